#!/bin/sh
# Run a command on the avx2 kernel table (LINATTN_KERNELS=avx2, docs/design.md §5.5); exit 77
# (ctest: skipped) on a CPU without AVX2 and FMA, and on one without AVX-512F, where `auto`
# already takes the avx2 table and the test this one twins ran it (oracle_forward in full).
# Usage: with_avx2.sh COMMAND [ARGS...]
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || exit 77
if ! grep -qw avx512f /proc/cpuinfo; then
  echo "with_avx2.sh: skipped: no AVX-512F here, so auto already runs the avx2 table" >&2
  exit 77
fi
LINATTN_KERNELS=avx2 exec "$@"
