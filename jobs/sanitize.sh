#!/usr/bin/env bash
# The sanitize preset (ASan + UBSan with leak detection; tests/lsan.supp suppresses Open MPI's
# and OpenBLAS's own allocations only): install what is missing, build into build-sanitize,
# and run under it the unit tests and the MPI tests that reach every distributed code path
# (the C API on 1-3 ranks, the distributed forward on 3 ranks with every map, masks across
# 3 ranks). `--all` runs every unit and MPI test instead (over an hour on 2 cores: ASan slows
# the Python-driven drivers' many small runs). Other arguments go to ctest.
# Usage: bash jobs/sanitize.sh [--all] [ctest options]
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
bash jobs/setup.sh >/dev/null
. jobs/env.sh
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize
if [ $all = 1 ]; then
  ctest --preset sanitize -L "unit|mpi" -E "knownbug|slurm_|bench_peers" "$@"
else
  # the *_avx2 reruns of the engine's suites are left to the release build (the avx2
  # kernels' own tests, test_kern256*, run here)
  ctest --preset sanitize -j2 -E "knownbug|_avx2$" \
    -R "^(test_|fuzz_replay|no_fast_math|kernels_|api_dist_np[123]$|scan_np[37]$|dist_np3$|masks_np3$|bench_check_f64_np4$)" "$@"
fi
