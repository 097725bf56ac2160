#!/usr/bin/env bash
# jobs/long_run.sbatch under a real Slurm (the test slurm_requeue). Skipped (exit 77) when no
# Slurm controller answers (fails under CI=true); jobs/slurm_local.sh starts a single-node one.
#   1. a 2-rank reference through jobs/linattn.sbatch;
#   2. the same run through jobs/long_run.sbatch; once its first checkpoint exists,
#      `scancel --signal=USR1` the job. linattn checkpoints and exits 75, the job requeues
#      itself (Restarts=1), the next start resumes, and the job completes;
#   3. its output equals the reference bitwise, nothing is left under <out>.partial or in the
#      checkpoint folder, and the log shows the stop, the requeue and the resume.
# Usage: check_requeue.sh LINATTN_BINARY
set -uo pipefail
BIN=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/slurm/need_slurm.sh
. "$here/need_slurm.sh"
need_slurm check_requeue.sh
w=$(mktemp -d)
jid=
trap '[ -n "$jid" ] && scancel "$jid" 2>/dev/null; rm -rf "$w"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_execute_quiet=1
fail=0
# favor+ with 256 features: 2.2 s of compute (2.9 s wall) on 2 idle ranks for 384 MB of
# output, so that the job is still running when its first checkpoint (--checkpoint-every
# 0.5) appears. With elu1 (r = 16) the run took 0.23 s of compute on an idle machine, and
# ended before the signal.
args=(--n 3000000 --heads 2 --dk 16 --dv 16 --seed 11 --block-tokens 8192 --feature-map favor+ --features 256)
cd "$w" || exit 1
# 1. the reference
LINATTN_BIN=$BIN timeout 300 sbatch --wait --quiet --nodes=1 --ntasks-per-node=2 \
  --cpus-per-task=1 -o "$w/ref.out" "$root/jobs/linattn.sbatch" "${args[@]}" --out "$w/ref.npy"
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: reference job exited $rc"; cat "$w/ref.out"; exit 1; fi
# 2. the long run, signalled once its first checkpoint exists
jid=$(LINATTN_BIN=$BIN LINATTN_CHECKPOINT=$w/ck sbatch --parsable --nodes=1 --ntasks-per-node=2 \
  --cpus-per-task=1 -o "$w/long.out" "$root/jobs/long_run.sbatch" "${args[@]}" \
  --checkpoint-every 0.5 --out "$w/out.npy" --report "$w/r.json")
if [ -z "$jid" ]; then echo "FAIL: sbatch of long_run.sbatch"; exit 1; fi
t0=$(date +%s)
until compgen -G "$w/ck/ckpt.*" >/dev/null; do
  if [ $(( $(date +%s) - t0 )) -gt 240 ]; then echo "FAIL: no checkpoint after 240 s"; cat "$w/long.out"; exit 1; fi
  if ! squeue -h -j "$jid" 2>/dev/null | grep -q .; then echo "FAIL: the job ended before its first checkpoint"; cat "$w/long.out"; exit 1; fi
  sleep 0.2
done
scancel --signal=USR1 "$jid"
echo "sent SIGUSR1 to job $jid after $(( $(date +%s) - t0 )) s ($(ls "$w/ck" | tr '\n' ' '))"
state=""
restarts=""
for _ in $(seq 600); do
  info=$(scontrol show job "$jid" 2>/dev/null)
  state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
  restarts=$(sed -n 's/.*Restarts=\([0-9]*\).*/\1/p' <<<"$info")
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
jid_done=$jid
jid=
if [ "$state" != COMPLETED ] || [ "${restarts:-0}" -lt 1 ]; then
  echo "FAIL: job $jid_done ended $state with Restarts=$restarts"; cat "$w/long.out"; fail=1
else
  echo "ok: job $jid_done: COMPLETED after Restarts=$restarts"
fi
# 3. the outcome
if [ $fail -eq 0 ]; then
  if cmp -s "$w/out.npy" "$w/ref.npy"; then echo "ok: requeued output is bitwise the reference"
  else echo "FAIL: requeued output differs from the reference"; fail=1; fi
  if [ -e "$w/out.npy.partial" ] || [ -e "$w/ck" ]; then
    echo "FAIL: left behind: $(ls "$w")"; fail=1
  else echo "ok: no partial output or checkpoint folder left"; fi
  for pat in 'stopped at checkpoint' 'requeueing job' 'resuming from' 'start 2 on'; do
    if grep -q "$pat" "$w/long.out"; then echo "ok: the log says '$pat'"
    else echo "FAIL: the log lacks '$pat'"; fail=1; fi
  done
  /usr/bin/python3 - "$w/r.json" <<'PYEOF' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))["checkpoint"]
ok = c["resumed_ranks"] == 2 and c["resumed_pass"] in (1, 2)
print(f"{'ok' if ok else 'FAIL'}: report checkpoint {c}")
sys.exit(0 if ok else 1)
PYEOF
  [ $fail -ne 0 ] && cat "$w/long.out"
fi
exit $fail
