#!/bin/bash
# Merge step of jobs/downstream_array.sbatch: BASE/task-* into BASE/merged/ and its report.md
# (python3 -m linattn.downstream.merge; docs/downstream.md "On a cluster"). Submit it to start
# when the whole array has succeeded, or run it by hand:
#   sbatch --dependency=afterok:<array job id> jobs/downstream_merge.sh BASE
#   bash jobs/downstream_merge.sh [--force] BASE
# It refuses (exit 1, nothing written) when a task has no task.json (failed or still running),
# when a folder belongs to another study, or when BASE/merged exists without --force.
#SBATCH --job-name=linattn-downstream-merge
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:15:00
#SBATCH --output=linattn-downstream-merge-%j.out
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#SBATCH/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;; esac
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
ROOT=${LINATTN_ROOT:-$PWD}
[ -r "$ROOT/jobs/env.sh" ] || { echo "downstream_merge.sh: error: LINATTN_ROOT=$ROOT: not a linattn checkout" >&2; exit 2; }
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
# shellcheck source=jobs/env.sh
. "$ROOT/jobs/env.sh"
exec "${PYTHON:-/usr/bin/python3}" -m linattn.downstream.merge "$@"
