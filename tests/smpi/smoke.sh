#!/bin/sh
# SMPI smoke test (label smpi; docs/simulation.md): builds the scan driver tools/smpi/simscan.c
# with smpicc from the scan's own sources (dist/scan.c, comm.c, plan_combine.c, scan_model.c,
# smpi_model.c and core/engine/state.c; tests/smpi/stubs.c for the engine), then on 16 and 37 simulated ranks of a
# small fat-tree checks that every point-to-point scan algorithm gives each rank the serial
# fold of the earlier ranks' elements (linattn_smpi scan --check: the messages are real).
# MPI_Exscan is not checked: SimGrid 3.32's MPI_Exscan/MPI_Iexscan with a user operator return
# zeros (docs/simulation.md "Limitations"). Exit 77 (skipped) without smpicc or smpirun.
# usage: smoke.sh SOURCE_DIR
set -u
src=$1
command -v smpicc >/dev/null 2>&1 && command -v smpirun >/dev/null 2>&1 ||
  { echo "skipped: no smpicc/smpirun (apt-get install libsimgrid-dev)"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
coreinc=""  # core's folders (core/CMakeLists.txt LINATTN_CORE_FOLDERS)
for g in base engine simd maps random exact softmax io; do coreinc="$coreinc -I$src/core/$g"; done
# shellcheck disable=SC2086
smpicc -std=c11 -O1 -D_GNU_SOURCE -DLA_SMPI -I"$src/include" -I"$src/core" $coreinc -I"$src/dist" \
  -I"$src/tools/smpi" "$src/tools/smpi/simscan.c" "$src/tests/smpi/stubs.c" \
  "$src/dist/comm.c" "$src/dist/scan_element.c" "$src/dist/scan.c" "$src/dist/plan_combine.c" "$src/dist/scan_model.c" "$src/dist/smpi_model.c" \
  "$src/core/engine/state.c" "$src/core/engine/ownership.c" "$src/core/base/status.c" "$src/core/base/alloc.c" "$src/core/exact/exact.c" \
  -o "$d/linattn_smpi" -lm || { echo "FAIL: smpicc"; exit 1; }
/usr/bin/python3 "$src/tools/smpi/platform.py" "$d" --nodes 32 --leaf 8 --ranks-per-node 2 || exit 1
rc=0
for P in 16 37; do
  for algs in "doubling,chain,allgather,pipelined,auto" ; do
    for K in 3 8; do
      smpirun -np $P -platform "$d/fattree.xml" -hostfile "$d/hosts" \
        --cfg=smpi/simulate-computation:no --cfg=smpi/privatization:no \
        --cfg=smpi/reduce:binomial --log=root.thres:critical \
        "$d/linattn_smpi" scan --heads 3 --r 6 --dv 5 --pieces $K --algs "$algs" --check \
        --combine-seconds 1e-10 > "$d/out.txt" 2>&1
      r=$?
      grep -v '^/' "$d/out.txt"
      if [ $r -ne 0 ] || ! grep -q '^# check: ok' "$d/out.txt"; then
        echo "FAIL: P=$P pieces=$K: a scan differs from the serial fold (exit $r)"
        rc=1
      fi
    done
  done
done
[ $rc -eq 0 ] && echo "smpi smoke: ok"
exit $rc
