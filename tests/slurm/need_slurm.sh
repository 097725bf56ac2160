# shellcheck shell=bash
# Sourced by the tests/slurm/check_*.sh scripts: continue only when a Slurm controller answers.
# Without one the test is skipped (exit 77), except under CI=true, where jobs/test.sh has
# started one (jobs/slurm_local.sh) and not answering is a failure (exit 1).
need_slurm() {
  local name=$1
  if command -v sbatch >/dev/null && timeout 10 sinfo -h >/dev/null 2>&1; then return 0; fi
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $name: CI=true but no Slurm controller answers"
    exit 1
  fi
  echo "$name: no Slurm controller answers (bash jobs/slurm_local.sh starts one); skipped"
  exit 77
}
