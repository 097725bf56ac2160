#!/bin/sh
# Run a command on the avx2 kernel table (LINATTN_KERNELS=avx2, docs/design.md §5.5); exit 77
# (ctest: skipped) on a CPU without AVX2 and FMA. Usage: with_avx2.sh COMMAND [ARGS...]
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || exit 77
LINATTN_KERNELS=avx2 exec "$@"
