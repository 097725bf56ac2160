#!/usr/bin/env bash
# The sanitize preset (ASan + UBSan with leak detection, tests/lsan.supp for Open MPI's and
# OpenBLAS's own allocations only): install what is missing, build into build-sanitize, and
# run the unit tests and the MPI tests under it. Extra arguments go to ctest.
# Usage: bash jobs/sanitize.sh [ctest options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/setup.sh >/dev/null
. jobs/env.sh
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize
# The unit tests, and the MPI tests at the rank counts that cover every code path; the larger
# rank counts of the same drivers repeat those paths and only cost time under ASan.
ctest --preset sanitize -L "unit|mpi" \
  -E "knownbug|_np4|_np6|_np7|streaming_memory|slurm_batch|bench_peers" "$@"
