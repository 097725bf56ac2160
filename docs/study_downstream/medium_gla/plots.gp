# linattn.downstream: the plots of report.md, made from the CSV files of this folder;
# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp`
# in this folder (gnuplot 5 or later: datablocks). Tasks: charlm.
if (!exists("suffix")) suffix = ""
cairo = strstrt(GPVAL_TERMINALS, "pngcairo") > 0
set grid
set key outside right top font ',8'
set bars small
set datafile missing 'nan'
$d0 << EOD
75 3.7723910335594897 3.7532870717146607 3.7847258872533467
150 3.4809301433331288 3.4650728269756246 3.4978505704469405
225 3.3312712991727147 3.3269111233486028 3.3359790805979954
300 3.2621975201457203 3.2555712149225147 3.2684590358345584
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
plot $d0 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "elu1@gla"
unset multiplot
set output
