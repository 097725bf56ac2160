#!/usr/bin/env bash
# Set up, build, and run the whole test suite with ctest.
# Usage: bash jobs/test.sh [extra ctest options]
# With CI=true and as root it also starts a single-node Slurm (jobs/slurm_local.sh) for the
# test slurm_batch; elsewhere that test runs only if a Slurm controller already answers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/setup.sh
. jobs/env.sh
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
  bash jobs/slurm_local.sh || echo "test.sh: no local Slurm; slurm_batch will be skipped" >&2
fi
ctest --preset release "$@"
