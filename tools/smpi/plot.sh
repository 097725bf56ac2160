#!/bin/bash
# Plots of the simulated study (docs/simulation.md) from docs/sim_*.csv, with gnuplot:
#   sim_scan.png   the scan's communication time of each algorithm against P, per state size
#   sim_weak.png   weak-scaling efficiency of the causal forward (2^20 tokens per rank)
#   sim_strong.png strong-scaling speedup (2^30 tokens), with the ideal line
# usage: tools/smpi/plot.sh [DIR (docs)]
set -eu
d=${1:-$(cd "$(dirname "$0")/../.." && pwd)/docs}
cd "$d"
gnuplot <<'GP'
set datafile separator ","
set terminal pngcairo size 1200,900 font ",10"
set output "sim_scan.png"
set multiplot layout 2,2 title "Simulated scan communication time (fat-tree, 100 Gb/s, SimGrid SMPI)"
set logscale xy 2
set format y "%.0e"
set logscale y 10
set xlabel "ranks P"
set ylabel "seconds"
set key top left
states = "4:64 32:64 4:256 32:256"
algs = "exscan doubling chain allgather pipelined"
do for [s in states] {
  H = word(system("echo ".s." | tr ':' ' '"), 1)
  R = word(system("echo ".s." | tr ':' ' '"), 2)
  set title sprintf("H = %s, r = dv = %s", H, R)
  plot for [a in algs] "sim_scan.csv" using ((strcol(1) eq a && strcol(3) eq H && strcol(4) eq R) ? $2 : 1/0):7 with linespoints title a
}
unset multiplot
set output "sim_weak.png"
unset logscale y
set logscale x 2
set format y "%.2f"
set title "Simulated weak scaling, causal elu1 f32, 2^{20} tokens per rank, H = 4, dk = dv = 64"
set ylabel "efficiency"
set yrange [0:1.05]
set key bottom left
plot "sim_weak.csv" using ((strcol(1) eq "auto") ? $3 : 1/0):10 with linespoints title "in memory (bench): T(1) / T(P)", \
     "sim_weak.csv" using ((strcol(1) eq "auto") ? $3 : 1/0):11 with linespoints title "in memory: compute / T(P) (cost of the scan)", \
     "sim_weak_stream.csv" using ((strcol(1) eq "auto") ? $3 : 1/0):10 with linespoints title "streaming (run): T(1) / T(P)", \
     1 with lines dt 2 title "ideal"
set output "sim_strong.png"
set logscale xy 2
set format y "%g"
set yrange [*:*]
set title "Simulated strong scaling, 2^{30} tokens, H = 4, dk = dv = 64"
set ylabel "speedup"
set key top left
plot "sim_strong.csv" using ((strcol(1) eq "auto") ? $3 : 1/0):9 with linespoints title "auto", \
     "sim_strong.csv" using ((strcol(1) eq "doubling") ? $3 : 1/0):9 with linespoints title "doubling", \
     "sim_strong.csv" using ((strcol(1) eq "pipelined") ? $3 : 1/0):9 with linespoints title "pipelined", \
     x with lines dt 2 title "ideal"
GP
echo "plots: $d/sim_scan.png $d/sim_weak.png $d/sim_strong.png"
