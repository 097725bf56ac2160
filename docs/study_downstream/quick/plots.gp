# linattn.downstream: the plots of report.md, made from the CSV files of this folder;
# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp`
# in this folder (gnuplot 5 or later: datablocks). Tasks: capacity.
if (!exists("suffix")) suffix = ""
cairo = strstrt(GPVAL_TERMINALS, "pngcairo") > 0
set grid
set key outside right top font ',8'
set bars small
set datafile missing 'nan'
$d0 << EOD
20 0.00060058825865076085 0.00056481877916373508 0.00062550058688128052
100 2.3708070201062696e-05 2.1010939113198824e-05 2.6791520674051063e-05
EOD
$d1 << EOD
20 0.00087361187002671337 0.00083507979861346048 0.00089738066141964901
100 0.17362873219236982 0.16505243939171219 0.18132457478776148
EOD
$d2 << EOD
20 0.00059296925741004266 0.00051516520621461661 0.00064844602145038564
100 0.0042209371461808714 0.0040177000598049075 0.0043933619114939759
EOD
$d3 << EOD
20 0.00060058825865076085 0.00056481877916373508 0.00062550058688128052
100 2.3708070201062696e-05 2.1010939113198824e-05 2.6791520674051063e-05
EOD
$d4 << EOD
20 0.00063432530000000003
100 2.0059512999999999e-05
EOD
$d5 << EOD
20 0.00087361187002671337 0.00083507979861346048 0.00089738066141964901
100 0.17362873219236982 0.16505243939171219 0.18132457478776148
EOD
$d6 << EOD
20 0.00088874220000000005
100 0.17154059999999999
EOD
$d7 << EOD
20 0.00059296925741004266 0.00051516520621461661 0.00064844602145038564
100 0.0042209371461808714 0.0040177000598049075 0.0043933619114939759
EOD
$d8 << EOD
20 0.00078294390000000001
100 0.00020874513
EOD

# ---- capacity_mse.png ----
if (cairo) { set terminal pngcairo size 1520,560 noenhanced font ',10' } else { set terminal png size 1520,560 noenhanced }
set output 'capacity_mse.png'.suffix
set multiplot layout 1,2 title "Capacity (Schlag et al. 2021, sec. 6.1): test MSE against N"
set title "every attention"
set xlabel "N (stored pairs)"
set ylabel "test MSE (0.5 sum of squares; mean, bars min-max over seeds; floor 1e-7)"
unset logscale
set logscale y 10
set xrange [*:*]
set yrange [*:*]
plot $d0 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "softmax", \
     $d1 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1", \
     $d2 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "dpfp:1"
set title "engine (solid) against Schlag et al.'s logs (dashed, last test)"
set xlabel "N (stored pairs)"
set ylabel "test MSE (0.5 sum of squares; mean, bars min-max over seeds; floor 1e-7)"
unset logscale
set logscale y 10
set xrange [*:*]
set yrange [*:*]
plot $d3 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "softmax (engine)", \
     $d4 using 1:2 with linespoints lc 1 dt 2 pt 6 title "softmax_cat (Schlag et al.)", \
     $d5 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1 (engine)", \
     $d6 using 1:2 with linespoints lc 2 dt 2 pt 6 title "linear_sum (Schlag et al.)", \
     $d7 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "dpfp:1 (engine)", \
     $d8 using 1:2 with linespoints lc 3 dt 2 pt 6 title "dpfp1_sum (Schlag et al.)"
unset multiplot
set output
