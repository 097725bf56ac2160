#!/usr/bin/env bash
# Chunk-length sweep behind the engine's default chunk per (r, dv) (la_default_chunk in
# core/engine/engine.c, issue 6). Times causal mode, the only mode whose work depends on C (the
# intra-chunk products cost 2C(r+dv) flops per token, the state products 4 r dv), for
# C in 16..256 at several (r, dv), and prints the best C for each with its GFLOP/s.
# A benchmark, not a test: timings are noisy on a shared node, rerun before trusting a tie.
# Usage: jobs/tune_chunk.sh [--linattn PATH] [--n N] [--threads T] [--csv FILE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
LINATTN=$here/../build/linattn N=262144 T=$(nproc) CSV=${TMPDIR:-/tmp}/linattn-chunks.csv
while [ $# -gt 0 ]; do
  case "$1" in
    --linattn) LINATTN=$2; shift 2 ;;
    --n) N=$2; shift 2 ;;
    --threads) T=$2; shift 2 ;;
    --csv) CSV=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "tune_chunk.sh: error: unknown option '$1'" >&2; exit 2 ;;
  esac
done
source "$here/env.sh"
rm -f "$CSV"
# (map, dk, dv, m): elu1 has r = dk; favor+ has r = m
for cfg in "elu1 16 16 0" "elu1 32 32 0" "elu1 64 64 0" "elu1 128 128 0" "elu1 64 128 0" \
           "elu1 128 64 0" "favor+ 64 64 64" "favor+ 64 64 256"; do
  set -- $cfg
  for C in 16 32 48 64 96 128 192 256; do
    args=(--n "$N" --heads 4 --dk "$2" --dv "$3" --threads "$T" --repeat 3 --chunk "$C"
          --modes causal --feature-maps "$1" --force)
    [ "$4" != 0 ] && args+=(--features "$4")
    OMP_NUM_THREADS=$T "$LINATTN" bench "${args[@]}" --csv "$CSV.part" >/dev/null
    if [ -f "$CSV" ]; then tail -n +2 "$CSV.part" >>"$CSV"; else cp "$CSV.part" "$CSV"; fi
  done
done
rm -f "$CSV.part"
echo "best chunk per (map, r, dv) on this machine ($CSV):"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  { key = $c["map"] " r=" $c["r"] " dv=" $c["dv"]; g = $c["gflops"] + 0
    if (g > best[key]) { best[key] = g; bc[key] = $c["chunk"] }
    all[key] = all[key] sprintf(" %s:%.0f", $c["chunk"], g) }
  END { for (k in best) printf "  %-22s best C = %-4s (%.1f GFLOP/s)   C:GFLOP/s%s\n", k, bc[k], best[k], all[k] }' "$CSV" | sort
