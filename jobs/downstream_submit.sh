#!/bin/bash
# Submit the downstream study as a Slurm job array plus its merge (docs/downstream.md "On a
# cluster"): counts the study's configurations, then
#   sbatch --array=0-(K-1) jobs/downstream_array.sbatch --out-dir BASE [study options]
#   sbatch --dependency=afterok:<array> jobs/downstream_merge.sh BASE
# and prints the two job ids. Usage:
#   bash jobs/downstream_submit.sh --out-dir BASE [--quick] [--tasks capacity,mqar] [...]
# sbatch settings come from the scripts' #SBATCH lines and sbatch's environment variables
# (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...). With --wait it waits for the
# merge and exits with its status. PYTHON as in downstream_array.sbatch.
set -euo pipefail
me=downstream_submit.sh
die() { echo "$me: error: $*" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
BASE="" STUDY=() WAIT=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --out-dir) [ $# -ge 2 ] || die "$1 needs a value"; BASE=$2; shift 2 ;;
    --wait) WAIT=1; shift ;;
    *) STUDY+=("$1"); shift ;;
  esac
done
[ -n "$BASE" ] || die "--out-dir BASE is required"
command -v sbatch >/dev/null || die "sbatch: not found (is this a Slurm login node?)"
# shellcheck source=jobs/env.sh
. "$root/jobs/env.sh"
export LINATTN_ROOT=${LINATTN_ROOT:-$root}   # the tasks and the merge find the checkout
# the whole listing first (a `| head -1` could close the pipe before Python finishes writing)
list=$("${PYTHON:-/usr/bin/python3}" -m linattn.downstream --list-configs ${STUDY[@]+"${STUDY[@]}"}) ||
  die "the study's options were refused (see above)"
K=${list%% *}
[[ $K =~ ^[1-9][0-9]*$ ]] || die "could not count the study's configurations"
jid=$(sbatch --parsable --array=0-$((K - 1)) "$root/jobs/downstream_array.sbatch" --out-dir "$BASE" \
        ${STUDY[@]+"${STUDY[@]}"})
jid=${jid%;*}
[ -n "$jid" ] || die "sbatch of the array failed"
echo "$me: array job $jid: $K tasks into $BASE/task-*" >&2
wait_opt=()
[ "$WAIT" = 0 ] || wait_opt=(--wait)
set +e
mid=$(sbatch --parsable ${wait_opt[@]+"${wait_opt[@]}"} --dependency="afterok:$jid" \
        --kill-on-invalid-dep=yes "$root/jobs/downstream_merge.sh" "$BASE")
rc=$?
set -e
echo "$me: merge job ${mid%;*} after it: $BASE/merged/report.md" >&2
echo "$jid ${mid%;*}"
exit $rc
