#!/usr/bin/env bash
# Training through the Python binding (issue 34 part 6; docs/performance.md "Training through
# the Python binding"): forward plus backward of one attention call, B = 1, H = 4, d = 64,
# causal elu1, float32, on T threads, at L = 4096, 16384 and 65536, for
#   - the binding: linattn.torch.attention(q, k, v); out.backward(G), timed in Python;
#   - the engine from C, build/fwdbwd (tools/fwdbwd.c), on the same data, with the binding's
#     allocation pattern (c_fresh), with engine and buffers made once (c_reused), and the same
#     with the binding's NaN/Inf check of every row (c_checked);
#   - the PyTorch peers with autograd: fla's vectorized chunk form (chunk 32, 64, 128) and
#     the chunk loop, both checked against the binding on a small case first.
# Rounds alternate the implementations; each figure is the best of its calls (R rounds, at
# least S at L <= 16384, where a round costs under a second). Writes the CSV
# (impl,L,H,d,threads,fwd_s,bwd_s,total_s,tokens_per_s,best_of,cpu,blas_core) and prints a
# markdown table (also saved beside the CSV as .md). Progress on stderr. A benchmark: timings
# are reported, never asserted; exit 1 only when a peer disagrees with the binding.
# Builds build/fwdbwd and the binding's library if they are missing (cmake preset release).
# Usage: jobs/bench_binding.sh [--csv FILE] [--lengths L1,L2,...] [--threads T] [--rounds R]
#                              [--short-rounds S] [--loop-cap-s SEC] [--workdir DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
PY=/usr/bin/python3
CSV=${TMPDIR:-/tmp}/linattn-bench-binding.csv
LENGTHS=4096,16384,65536 T=2 R=5 S=21 CAP=600 WORK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --csv) CSV=$2; shift 2 ;;
    --lengths) LENGTHS=$2; shift 2 ;;
    --threads) T=$2; shift 2 ;;
    --rounds) R=$2; shift 2 ;;
    --short-rounds) S=$2; shift 2 ;;
    --loop-cap-s) CAP=$2; shift 2 ;;
    --workdir) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench_binding.sh: error: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [ ! -x "$root/build/fwdbwd" ] || [ ! -f "$root/build/python/liblinattn_py.so" ]; then
  echo "bench_binding.sh: building fwdbwd and the binding (cmake --preset release)" >&2
  (cd "$root" && { [ -f build/CMakeCache.txt ] || cmake --preset release >/dev/null; } &&
   cmake --build --preset release --target fwdbwd linattn_py >&2)
fi
source "$here/env.sh"
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/linattn-bench-binding.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
fi
echo "bench_binding.sh: $(lscpu | awk -F: '/^Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) CPUs;" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}; $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" >&2
OMP_NUM_THREADS=$T "$PY" "$root/tools/bench_binding.py" --fwdbwd "$root/build/fwdbwd" \
  --lengths "$LENGTHS" --threads "$T" --rounds "$R" --short-rounds "$S" --loop-cap-s "$CAP" --csv "$CSV" \
  --workdir "$WORK" | tee "${CSV%.csv}.md"
