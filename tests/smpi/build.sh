#!/bin/sh
# smpi_build (label smpi): the `smpi` preset (smpicc, OpenMP off, warnings as errors) configures
# and builds linattn_smpi and linattn_smpi_calibrate from a clean directory. The release build
# has OpenMP, so a warning seen only without it (an unused parameter of a threads argument)
# would otherwise go unseen until someone runs tools/smpi/simulate.sh. Exit 77 (skipped)
# without smpicc.
# usage: build.sh SOURCE_DIR
set -u
src=$1
command -v smpicc >/dev/null 2>&1 || { echo "skipped: no smpicc (apt-get install libsimgrid-dev)"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$src" || exit 1
cmake --preset smpi -B "$d" > "$d/configure.log" 2>&1 || { cat "$d/configure.log"; echo "FAIL: configure"; exit 1; }
cmake --build "$d" -j 2 > "$d/build.log" 2>&1 || { grep -E "error|warning" "$d/build.log" | head -20; tail -5 "$d/build.log"; echo "FAIL: build"; exit 1; }
for t in linattn_smpi linattn_smpi_calibrate; do
  [ -x "$d/$t" ] || { echo "FAIL: no $t"; exit 1; }
done
echo "smpi preset build: ok"
