#!/usr/bin/env bash
# Set up, build, and run the test suite with ctest: the default tier (every test but those
# labelled `full`), or with --full the exhaustive tier (every test but those labelled
# `sampled`, their lighter twins): all rank counts, every allocation of the fault sweeps,
# all oracle cases on every kernel table (docs/testing.md "Test time"). Plain
# `ctest --preset release` runs both tiers.
# Usage: bash jobs/test.sh [--full] [extra ctest options]
# With CI=true and as root it also starts a single-node Slurm (jobs/slurm_local.sh) for the
# test slurm_batch, and fails if it does not start; elsewhere that test runs only if a Slurm
# controller already answers (and is skipped otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-LE full)
if [ "${1:-}" = --full ]; then tier=(-LE sampled); shift; fi
bash jobs/setup.sh
. jobs/env.sh
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
  # under CI a Slurm that does not start is a failure, not a skipped test
  bash jobs/slurm_local.sh || { echo "test.sh: error: the local Slurm did not start" >&2; exit 1; }
fi
ctest --preset release "${tier[@]}" "$@"
