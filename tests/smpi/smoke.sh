#!/bin/sh
# SMPI smoke test (label smpi; docs/simulation.md): builds the driver tools/smpi/simscan.c with
# smpicc from the plan's own sources (dist/scan.c, comm.c, plan_combine.c, stream.c,
# forward.c, scan_model.c, smpi_model.c and core/engine/state.c ...) and the model engine
# (tools/smpi/model_engine.c) in place of the real one, as tools/smpi/CMakeLists.txt does. Then
# on 16 and 37 simulated ranks of a small fat-tree checks that every point-to-point scan
# algorithm gives each rank the serial fold of the earlier ranks' elements (linattn_smpi scan
# --check: the messages are real), and on 16 ranks that `forward` runs the library's plan on
# the model engine, in memory and streaming: exit 0 and a row of positive seconds per
# algorithm.
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
  -I"$src/tools/smpi" "$src/tools/smpi/simscan.c" "$src/tools/smpi/model_engine.c" \
  "$src/dist/comm.c" "$src/dist/scan_element.c" "$src/dist/scan.c" "$src/dist/plan_combine.c" "$src/dist/stream.c" \
  "$src/dist/forward.c" "$src/dist/scan_model.c" "$src/dist/smpi_model.c" \
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
# forward on the model engine: a made-up calibration (seconds per token of the apply, keys
# pass, local apply, correction; the combine's per double), 16 ranks x 4096 tokens
printf 'tokens,heads,dk,dv,r,apply_s_per_token,accumulate_s_per_token,apply_local_s_per_token,correct_s_per_token,combine_s_per_double,apply_gflops\n4096,3,6,5,6,1e-6,4e-7,1e-6,9e-7,2e-10,1\n' > "$d/calib.csv"
for B in 0 1024; do
  smpirun -np 16 -platform "$d/fattree.xml" -hostfile "$d/hosts" \
    --cfg=smpi/simulate-computation:no --cfg=smpi/privatization:no \
    --cfg=smpi/reduce:binomial --log=root.thres:critical \
    "$d/linattn_smpi" forward --tokens-per-rank 4096 --block-tokens $B --heads 3 --dk 6 --dv 5 \
    --calib "$d/calib.csv" --algs doubling,chain,allgather,pipelined --combine-seconds 2e-10 \
    > "$d/out.txt" 2>&1
  r=$?
  grep -v '^/' "$d/out.txt"
  # alg,ranks,tokens,tokens_per_rank,heads,dk,dv,seconds,...: 4 rows, seconds > 4096 x 1e-6
  n=$(awk -F, '$2 == 16 && $8 > 0.004 && $10 > 0' "$d/out.txt" | wc -l)
  if [ $r -ne 0 ] || [ "$n" -ne 4 ]; then
    echo "FAIL: forward --block-tokens $B: exit $r, $n of 4 rows with positive seconds"
    rc=1
  fi
done
[ $rc -eq 0 ] && echo "smpi smoke: ok"
exit $rc
