#!/usr/bin/env bash
# Fuzz the input readers and the option parser (tests/fuzz/README.md): install what is
# missing, build the libFuzzer harnesses with clang (ASan + UBSan) in build-fuzz, and run
# each one for SECONDS (default 30) through ctest -L fuzz, two at a time.
# Usage: bash jobs/fuzz.sh [SECONDS]
# Prints the executions of every harness; exits non-zero on any crash, leak, timeout or
# failed check (the input is under build-fuzz/tests/fuzz/work/NAME/; see tests/fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: bash jobs/fuzz.sh [SECONDS]   (seconds per harness, default 30)" >&2
  exit 2
fi
t0=$(date +%s)

# What configuring the project needs (jobs/setup.sh), and clang.
PKGS=(build-essential cmake clang libopenmpi-dev openmpi-bin libopenblas-dev liblapacke-dev
      libscalapack-openmpi-dev python3 python3-numpy)
install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz.sh: error: missing Debian packages: $* (run as root, or apt-get install them)" >&2
    exit 1
  fi
  echo "fuzz.sh: installing $*" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] || install "${missing[@]}"
# libFuzzer and the sanitizer runtimes come in a package of their own (libclang-rt-V-dev).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
  >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  v=$(clang -dumpversion | cut -d. -f1)
  install "libclang-rt-$v-dev"
  clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p"
fi

# OpenMP stays off: the fuzzed code has none, and clang's runtime (libomp) may be missing.
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DLINATTN_FUZZ=ON -DLINATTN_FUZZ_SECONDS="$secs" \
  -DLINATTN_OPENMP=OFF -DLINATTN_WERROR=OFF >/dev/null
if ! cmake --build build-fuzz --target fuzz_harnesses -j 2 >build-fuzz/build.log 2>&1; then
  tail -n 40 build-fuzz/build.log
  echo "fuzz.sh: build failed (build-fuzz/build.log)" >&2
  exit 1
fi
t1=$(date +%s)
echo "fuzz.sh: harnesses built in $((t1 - t0)) s; fuzzing each for $secs s" >&2

rc=0
rm -f build-fuzz/tests/fuzz/work/*/summary.txt
ctest --test-dir build-fuzz -L '^fuzz$' -j 2 --output-on-failure >build-fuzz/fuzz-ctest.log 2>&1 || rc=$?
cat build-fuzz/tests/fuzz/work/*/summary.txt 2>/dev/null || true
if [ $rc -ne 0 ]; then
  cat build-fuzz/fuzz-ctest.log
  echo "fuzz.sh: FAILED (ctest exit $rc) after $(($(date +%s) - t0)) s" >&2
  exit 1
fi
echo "fuzz.sh: ok, $(($(date +%s) - t0)) s in all" >&2
