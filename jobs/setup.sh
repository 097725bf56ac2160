#!/usr/bin/env bash
# Install missing Debian packages (as root), then configure and build the release preset.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(build-essential cmake libopenmpi-dev openmpi-bin libopenblas-dev liblapacke-dev
      libscalapack-openmpi-dev python3 python3-numpy python3-torch python3-mpi4py gnuplot-nox valgrind libsimgrid-dev
      dict-gcide)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "linattn: error: missing Debian packages: ${missing[*]} (run as root, or apt-get install them)" >&2
    exit 1
  fi
  echo "linattn: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cmake --preset release >/dev/null
cmake --build --preset release
