#!/bin/bash
# The error-vs-length study of `linattn eval` (docs/design.md §8.7; docs/study_eval_length/):
# elu1 and favor+ (m = 64, 256) against exact softmax, causal, n = 2^10 .. 2^20, on P ranks.
#   1. sampled: every n with --softmax-max-n 0 --kernel-max-n 0: out_rel_err, kernel_rel_err and
#      weights_tv on --kernel-rows evenly spaced query rows (exact softmax for those rows only,
#      every rank holding only its own keys); weights_tv_floor up to --floor-max-n;
#   2. all rows: n <= 2^14 with the all-rows softmax reference, the check of the sampled estimate.
# Then tools/study_eval_length.py merges both into length.csv, plots, and prints the table.
# Usage: tools/study_eval_length.sh [WORKDIR [OUTDIR]]   (env: P=2, ROWS=512, SEEDS=2, LINATTN=build/linattn)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/study_eval_length}
out=${2:-$here/docs/study_eval_length}
P=${P:-2} ROWS=${ROWS:-512} SEEDS=${SEEDS:-2}
bin=${LINATTN:-$here/build/linattn}
. "$here/jobs/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=1
rm -rf "$work" && mkdir -p "$work" "$out"
common=(--heads 1 --dk 64 --dv 64 --feature-maps elu1,favor+ --features 64,256 --seeds "$SEEDS"
        --modes causal --kernel-max-n 0 --kernel-rows "$ROWS" --no-progress)
big=1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576
t0=$(date +%s)
# /usr/bin/time per rank: the largest resident set of the 2^20 run
mpirun --oversubscribe -np "$P" /usr/bin/time -f "rank peak RSS %M KiB, wall %e s" \
  "$bin" eval --out-dir "$work/sampled" --n "$big" --softmax-max-n 0 --floor-max-n 2048 "${common[@]}" \
  2> "$work/sampled.log"
t1=$(date +%s)
mpirun --oversubscribe -np "$P" "$bin" eval --out-dir "$work/allrows" --n 1024,2048,4096,8192,16384 \
  --softmax-max-n 16384 --floor-max-n 0 "${common[@]}" 2> "$work/allrows.log"
t2=$(date +%s)
echo "sampled sweep $((t1 - t0)) s, all-rows sweep $((t2 - t1)) s on $P ranks x $OMP_NUM_THREADS threads" \
  | tee "$work/times.txt"
grep -h 'linattn: eval:\|peak RSS' "$work/sampled.log" "$work/allrows.log" | tee -a "$work/times.txt"
/usr/bin/python3 "$here/tools/study_eval_length.py" "$work" "$out"
