#!/usr/bin/env bash
# The portable fallback on a second architecture (docs/testing.md "The aarch64 check"):
# cross-compile linattn::core and its MPI-free unit tests for aarch64 with Debian's
# gcc-aarch64-linux-gnu and arm64 OpenBLAS/LAPACKE (cmake/aarch64-linux-gnu.cmake,
# -DLINATTN_CORE_ONLY=ON), and run them under qemu-user. On ARM nothing of x86 is built or
# chosen: no AVX-512 or AVX2 file gets its flags, and every kernel choice falls to the
# generic C and OpenBLAS path. This checks correctness, not speed.
#
# Installs what is missing (as root: adds the arm64 architecture to dpkg, apt-get update,
# apt-get install --no-install-recommends, so no binfmt_misc handler is registered), then
# configures and builds build-aarch64 (-j2, warnings as errors) and runs ctest there.
# Usage: bash jobs/aarch64_check.sh [ctest options]
#   LINATTN_AARCH64_BUILD=DIR   build folder (default build-aarch64)
# Exit 0 when every test passed (test_kern512 reports itself skipped: no AVX-512 on ARM),
# 1 otherwise; one `linattn: error:` line says which step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${LINATTN_AARCH64_BUILD:-build-aarch64}
t0=$(date +%s)
err() { echo "linattn: error: aarch64_check: $*" >&2; exit 1; }

PKGS=(cmake gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libopenblas-dev:arm64 liblapacke-dev:arm64
      libgomp1:arm64)
. jobs/apt.sh
if [ -n "$(la_apt_missing "${PKGS[@]}")" ] && [ "$(id -u)" -eq 0 ] &&
   ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "linattn: aarch64_check: dpkg --add-architecture arm64" >&2
  dpkg --add-architecture arm64
fi
LA_APT_OPTS=--no-install-recommends la_apt_install "${PKGS[@]}" ||
  err "installing the cross toolchain failed (as root: dpkg --add-architecture arm64; apt-get update; apt-get install --no-install-recommends the packages above)"
t_installed=$(date +%s)
command -v qemu-aarch64 >/dev/null || err "no qemu-aarch64 on PATH (apt-get install qemu-user)"

mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DLINATTN_CORE_ONLY=ON -DCMAKE_BUILD_TYPE=Release -DLINATTN_WERROR=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; err "configuring $build failed (log above)"; }
cmake --build "$build" -j2 || err "building $build failed"
t_built=$(date +%s)

# The tests really are ARM binaries (ELF e_machine 183 = EM_AARCH64), not host ones.
m=$(od -An -tu2 -j18 -N2 "$build/tests/test_api" | tr -d ' ')
[ "$m" = 183 ] || err "$build/tests/test_api is not an aarch64 executable (ELF machine $m)"

# An x86 OPENBLAS_CORETYPE (jobs/blas_core.sh) names no core of the ARM library.
unset OPENBLAS_CORETYPE LINATTN_KERNELS
export OPENBLAS_NUM_THREADS=1
rc=0
ctest --test-dir "$build" --output-on-failure --no-tests=error -j2 "$@" || rc=$?
t_end=$(date +%s)
echo "linattn: aarch64_check: install $((t_installed - t0)) s, configure + build" \
     "$((t_built - t_installed)) s, tests under qemu-aarch64 $((t_end - t_built)) s;" \
     "total $((t_end - t0)) s" >&2
[ $rc = 0 ] || err "some tests failed on aarch64 (ctest's list above; rerun one with" \
                   "ctest --test-dir $build -R NAME --output-on-failure)"
echo "linattn: aarch64_check: passed" >&2
