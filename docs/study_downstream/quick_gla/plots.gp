# linattn.downstream: the plots of report.md, made from the CSV files of this folder;
# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp`
# in this folder (gnuplot 5 or later: datablocks). Tasks: mqar, charlm.
if (!exists("suffix")) suffix = ""
cairo = strstrt(GPVAL_TERMINALS, "pngcairo") > 0
set grid
set key outside right top font ',8'
set bars small
set datafile missing 'nan'
$d0 << EOD
4 0.77333333333333343 0.67625000000000002 0.83625000000000005
8 0.64312500000000006 0.49187500000000001 0.75249999999999995
16 0.45375000000000004 0.27906249999999999 0.58156249999999998
32 0.24567708333333335 0.1159375 0.35796875
64 0.10846354166666666 0.051874999999999998 0.16140625
EOD
$d1 << EOD
4 0.38500000000000001 0.12125 0.87250000000000005
8 0.31624999999999998 0.053749999999999999 0.82125000000000004
16 0.23291666666666666 0.029687499999999999 0.63624999999999998
32 0.14890624999999999 0.017656249999999998 0.40749999999999997
64 0.072005208333333334 0.011796875 0.1915625
EOD

# ---- mqar_accuracy.png ----
if (cairo) { set terminal pngcairo size 900,600 noenhanced font ',10' } else { set terminal png size 900,600 noenhanced }
set output 'mqar_accuracy.png'.suffix
set multiplot layout 1,1
set title "MQAR (Zoology): accuracy against the number of pairs\nd_model 64 (best lr per attention)"
set xlabel "key-value pairs"
set ylabel "accuracy at the queries (mean, bars min-max over seeds)"
unset logscale
set logscale x 10
set xrange [*:*]
set yrange [0:1.02]
plot $d0 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "dpfp:1@gla", \
     $d1 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1@gla"
unset multiplot
set output
$d2 << EOD
20 4.1970015513506667 4.1801332636438406 4.2095519279698292
40 3.9033235181169315 3.8872289230287875 3.9242877446367053
60 3.8143966781455005 3.8086142774581906 3.8259583838324032
80 3.7723278872628483 3.7677687418435752 3.7760617452681799
EOD
$d3 << EOD
20 4.1828814317495278 4.1724356641565228 4.1995446014814242
40 3.9009343351311454 3.8779576822860751 3.9218270168681602
60 3.7855644746589534 3.7829847348960115 3.7900315520324641
80 3.734001094897669 3.7233442472645049 3.7444537417967076
EOD

# ---- charlm_bpc.png ----
if (cairo) { set terminal pngcairo size 900,600 noenhanced font ',10' } else { set terminal png size 900,600 noenhanced }
set output 'charlm_bpc.png'.suffix
set multiplot layout 1,1
set title "Character LM on GCIDE: validation bits per character\nmean over seeds, bars min..max (step 0, untrained, left out)"
set xlabel "training step"
set ylabel "validation bpc"
unset logscale
set xrange [*:*]
set yrange [*:*]
plot $d2 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "dpfp:1@gla", \
     $d3 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1@gla"
unset multiplot
set output
