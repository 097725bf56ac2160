# linattn.downstream: the plots of report.md, made from the CSV files of this folder;
# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp`
# in this folder (gnuplot 5 or later: datablocks). Tasks: mqar.
if (!exists("suffix")) suffix = ""
cairo = strstrt(GPVAL_TERMINALS, "pngcairo") > 0
set grid
set key outside right top font ',8'
set bars small
set datafile missing 'nan'
$d0 << EOD
4 0.9966666666666667 0.99624999999999997 0.99750000000000005
8 0.99479166666666663 0.99375000000000002 0.99562499999999998
16 1 1 1
32 0.99989583333333332 0.99968749999999995 1
64 0.99968749999999995 0.99945312500000005 0.99992187499999996
EOD
$d1 << EOD
4 0.78541666666666676 0.63249999999999995 0.9325
8 0.61937500000000001 0.40062500000000001 0.859375
16 0.44041666666666668 0.21156249999999999 0.7371875
32 0.26703125 0.083125000000000004 0.53531249999999997
64 0.13565104166666667 0.037890624999999997 0.29867187499999998
EOD
$d2 << EOD
4 0.10791666666666666 0.10375 0.11
8 0.057291666666666664 0.051874999999999998 0.0625
16 0.026354166666666665 0.024062500000000001 0.028750000000000001
32 0.017499999999999998 0.0159375 0.01921875
64 0.011510416666666667 0.0096874999999999999 0.013125
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
plot $d0 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "softmax", \
     $d1 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1", \
     $d2 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "favor+:16"
unset multiplot
set output
