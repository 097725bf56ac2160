#!/usr/bin/env bash
# Set up, build, and run the whole test suite with ctest.
# Usage: bash jobs/test.sh [extra ctest options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/setup.sh
. jobs/env.sh
ctest --preset release "$@"
