#!/usr/bin/env bash
# Install missing Debian packages (as root), then configure and build the release preset.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(build-essential cmake libopenmpi-dev openmpi-bin libopenblas-dev liblapacke-dev
      libscalapack-openmpi-dev python3 python3-numpy python3-torch python3-mpi4py gnuplot-nox valgrind libsimgrid-dev
      dict-gcide)
. jobs/apt.sh
la_apt_install "${PKGS[@]}"
cmake --preset release >/dev/null
cmake --build --preset release
