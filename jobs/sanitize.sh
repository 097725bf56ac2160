#!/usr/bin/env bash
# The sanitize preset (ASan + UBSan with leak detection; tests/lsan.supp suppresses Open MPI's
# and OpenBLAS's own allocations only): install what is missing, build into build-sanitize,
# and run under it the unit tests and the MPI tests that reach every distributed code path
# (the C API on 1-3 ranks, the distributed forward on 3 ranks with every map, masks across
# 3 ranks; these last two without leak detection, see below). `--all` runs every unit and MPI test instead (over an hour on 2 cores: ASan slows
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
  # kernels' own tests, test_kern256*, run here), and so are the *_long20 tests (the short
  # tests' code paths at 2^20 tokens: 200-250 s each under ASan, near their 300 s timeout)
  ctest --preset sanitize -j2 -E "knownbug|_avx2$|_long20$" \
    -R "^(test_|fuzz_replay|no_fast_math|kernels_|api_dist_np[123]$|scan_np[37]$|bench_check_f64_np4$)" "$@"
  # The Python drivers start the program some 150 times each. Leak detection needs whole
  # stacks (fast_unwind_on_malloc=0: tests/lsan.supp matches frames inside Open MPI, which has
  # no frame pointers), and that unwinding costs 6 s of every 3-rank start: dist_np3 took
  # 266 s, masks_np3 186 s. Here ASan and UBSan check every access and operation, but not
  # leaks (1.3 s a start): the leaks of these paths are checked by the C API tests above and
  # by valgrind's memcheck test of the release suite (docs/testing.md "Test time").
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-sanitize --output-on-failure -R "^(dist_np3|masks_np3)$" "$@"
fi
