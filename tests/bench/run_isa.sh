#!/usr/bin/env bash
# One kernel table against another in the same run (docs/performance.md "The AVX2 kernels"):
# for each round and each table, `linattn bench` (best of 3 calls) on causal and bidirectional
# elu1, causal favor+ (m = 256) and causal elu1 f64, N = 2^20, H = 4, dk = dv = 64, each with
# the GEMM probe; prints one line per row: table, round, impl, mode, map, dtype, threads,
# GFLOP/s, tokens/s, efficiency. The efficiency column is against that call's probe; compare
# against the best probe of the run. Timings are printed, never asserted.
# Usage: run_isa.sh [--kernels "avx2 generic"] [--rounds K] [--threads T] [--n N] [--linattn PATH]
# The OpenBLAS core is the environment's (OPENBLAS_CORETYPE=Haswell for an AVX2 comparison).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$here/../../build/linattn K="avx2 generic" R=3 T=2 N=1048576
while [ $# -gt 0 ]; do
  case "$1" in
    --kernels) K=$2; shift 2 ;;
    --rounds) R=$2; shift 2 ;;
    --threads) T=$2; shift 2 ;;
    --n) N=$2; shift 2 ;;
    --linattn) B=$2; shift 2 ;;
    *) echo "linattn: error: run_isa.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
. "$here/../../jobs/env.sh" >/dev/null 2>&1
echo "CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}; load: $(cut -d' ' -f1-3 /proc/loadavg)"
common=(--n "$N" --heads 4 --dk 64 --dv 64 --threads "$T" --repeat 3 --gemm-probe)
for round in $(seq 1 "$R"); do
  for k in $K; do
    for extra in "--modes causal,bidirectional" "--modes causal --feature-maps favor+ --features 256" \
                 "--modes causal --dtype f64"; do
      # shellcheck disable=SC2086  # extra is a list of options
      LINATTN_KERNELS=$k "$B" bench "${common[@]}" $extra |
        awk -F, -v k="$k" -v r="$round" 'NR > 1 { print k, r, $1, $2, $3, $10, $12, $16, $17, $20 }'
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
