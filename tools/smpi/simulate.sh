#!/bin/bash
# Regenerates the simulated study of docs/simulation.md: calibration on this machine, the
# scan sweep (every algorithm x P x state size), weak and strong scaling of the causal
# forward, the model fit (auto's coefficients) and the plots. Needs the `smpi` preset built
# (cmake --preset smpi && cmake --build --preset smpi), SimGrid (libsimgrid-dev), python3 with
# NumPy and gnuplot. With the default SIM_TIMEOUT (300 s) about 35 minutes on the 2-core machine
# of docs/simulation.md, but the largest points then time out (they take 15 to 40 minutes
# each): SIM_TIMEOUT=2400 reproduces all of docs/sim_scan.csv in some hours.
#
# usage: tools/smpi/simulate.sh [OUTDIR (docs)] ; SIM_PS="16 64 256 1024 4096" to change the P list,
#        SIM_JOBS=2 simulations at a time, SIM_TIMEOUT=900 seconds per simulation.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/docs}
bin=$root/build-smpi/linattn_smpi
calbin=$root/build-smpi/linattn_smpi_calibrate
work=${SIM_WORK:-/tmp/linattn_sim}
PS=${SIM_PS:-"16 64 256 1024 4096"}
JOBS=${SIM_JOBS:-2}
TMO=${SIM_TIMEOUT:-300}
[ -x "$bin" ] && [ -x "$calbin" ] || { echo "linattn: error: $bin or $calbin missing: cmake --preset smpi && cmake --build --preset smpi" >&2; exit 1; }
command -v smpirun >/dev/null || { echo "linattn: error: smpirun missing: apt-get install libsimgrid-dev" >&2; exit 1; }
mkdir -p "$work/parts" "$out"
rm -f "$work"/parts/*
# Shared buffers map one block per MiB: 4096 ranks of 16 MiB states need more maps than the
# default limit of 65530, and allgather's P states per rank at 4096 x 133 KB about 2.2 million.
if [ "$(cat /proc/sys/vm/max_map_count)" -lt 16000000 ]; then
  sysctl -qw vm.max_map_count=16000000 2>/dev/null ||
    echo "linattn: warning: vm.max_map_count is low; the largest states at 4096 ranks may fail" >&2
fi
/usr/bin/python3 "$here/platform.py" "$work" --nodes 2048 --leaf 32 --ranks-per-node 2
# SMPI settings: no timing of the host's own computation (every cost is charged explicitly),
# no privatization (the driver has no mutable globals), binomial reduce and ring allgather
# (SMPI's defaults are linear: O(P^2) simulation time); small actor stacks.
SM=(smpirun -platform "$work/fattree.xml" -hostfile "$work/hosts"
    --cfg=smpi/simulate-computation:no --cfg=smpi/privatization:no
    --cfg=smpi/reduce:binomial --cfg=smpi/allgather:ring --cfg=contexts/stack-size:128
    --log=root.thres:critical)
export SM_STR="${SM[*]}"

t0=$(date +%s)
# 1. calibration: the real engine on this machine (causal elu1 float32, H 4, dk dv 64, 1 thread;
#    linattn_smpi_calibrate, linked to linattn_core: linattn_smpi has the model engine instead)
# (SIM_CALIB=file: reuse a calibration taken on an idle machine)
if [ -n "${SIM_CALIB:-}" ]; then
  [ "$SIM_CALIB" -ef "$out/sim_calibration.csv" ] || cp "$SIM_CALIB" "$out/sim_calibration.csv"
else
  "${SM[@]}" -np 1 "$calbin" --tokens 262144 --reps 2 2>/dev/null | grep -v '^/' > "$out/sim_calibration.csv"
fi
cat "$out/sim_calibration.csv"
comb=$(awk -F, 'NR == 2 {print $10}' "$out/sim_calibration.csv")

# 2. the job list: one simulation per line
jl=$work/jobs.txt
: > "$jl"
states=${SIM_STATES:-"4:64 32:64 4:256 32:256"} # H:r (= dv)
for P in $PS; do
  for st in $states; do
    H=${st%%:*} r=${st##*:}
    # 16.8 MB at 4096 ranks: about 2.5 hours of host time on this machine (docs/simulation.md)
    [ "$P" -ge 4096 ] && [ "$st" = "32:256" ] && continue
    # the point-to-point algorithms; combines charged at the measured rate, arithmetic skipped
    # and buffers above 1 MiB shared (their contents are not checked here; see the smoke test)
    echo "scan_${P}_${H}_${r}_p2p $P scan --heads $H --r $r --dv $r --algs doubling,chain,pipelined,auto --skip-combines --combine-seconds $comb" >> "$jl"
    # LASP-2's all-gather: P^2 messages, each payload copied by SMPI; its P-state buffers are
    # shared. Host time on the machine of docs/simulation.md: 70 s at 1024 x 133 KB, 323 s at
    # 1024 x 1.07 MB, 1823 s at 4096 x 133 KB (4.3 GB of page tables, which grow as P^2 x
    # state); so up to 1024 ranks, 4096 for the smallest state, 256 for 16.8 MB.
    { [ "$P" -le 256 ] || { [ "$P" -le 1024 ] && [ "$st" != "32:256" ]; } ||
      [ "$st" = "4:64" ]; } && echo "scan_${P}_${H}_${r}_ag $P scan --heads $H --r $r --dv $r --algs allgather --skip-combines --combine-seconds $comb" >> "$jl"
  done
done
# SimGrid's own MPI_Exscan (linear, slow to simulate), at 16, 64 and 128 ranks; not 16.8 MB
# beyond 16 ranks (at 64 its private copies took all 24 GB of this machine)
for P in 16 64 128; do
  for st in $states; do
    H=${st%%:*} r=${st##*:}
    [ "$P" -gt 16 ] && [ "$st" = "32:256" ] && continue
    echo "scan_${P}_${H}_${r}_ex $P scan --heads $H --r $r --dv $r --algs exscan --skip-combines --combine-seconds $comb" >> "$jl"
  done
done
for P in 1 $PS; do
  # weak scaling: 2^20 tokens per rank, in memory (bench) and streaming (run, blocks of 16384)
  a="doubling,chain,pipelined,auto"
  [ "$P" = 1 ] && a=auto
  echo "weak_${P} $P forward --tokens-per-rank 1048576 --calib $out/sim_calibration.csv --algs $a --skip-combines --combine-seconds $comb" >> "$jl"
  echo "weakrun_${P} $P forward --tokens-per-rank 1048576 --block-tokens 16384 --calib $out/sim_calibration.csv --algs auto --skip-combines --combine-seconds $comb" >> "$jl"
  # strong scaling: 2^30 tokens in all
  a="doubling,pipelined,auto"
  [ "$P" = 1 ] && a=auto
  echo "strong_${P} $P forward --tokens 1073741824 --calib $out/sim_calibration.csv --algs $a --skip-combines --combine-seconds $comb" >> "$jl"
done

run_one() { # name P args...
  local name=$1 P=$2; shift 2
  local t=$(date +%s)
  # shellcheck disable=SC2086
  timeout "$TMO" $SM_STR --cfg=smpi/auto-shared-malloc-thresh:1048576 -np "$P" "$BIN" "$@" \
    > "$WORK/parts/$name.csv" 2> "$WORK/parts/$name.err"
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t ))s" | tee -a "$WORK/parts/_log"
}
export -f run_one
export BIN=$bin WORK=$work TMO
# largest first, so that the long ones overlap
sort -t' ' -k2,2nr "$jl" | xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _
echo "simulations: $(( $(date +%s) - t0 )) s"

# 3. merge, fit, plot
/usr/bin/python3 "$here/collect.py" "$work/parts" "$out"
bash "$here/plot.sh" "$out"
echo "total: $(( $(date +%s) - t0 )) s"
