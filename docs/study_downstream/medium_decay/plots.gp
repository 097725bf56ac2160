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
75 3.8768881508441346 3.8692582408618188 3.881732529489863
150 3.7837275852926382 3.7796361466923871 3.789763775045071
225 3.7364624962649295 3.7299601188735583 3.7432994372397794
300 3.7146111832320052 3.710103517952891 3.7170514020694347
EOD
$d1 << EOD
75 3.8803099606613638 3.8724237965292625 3.8866555328708108
150 3.7905121718821881 3.7862873177405301 3.7961959691830027
225 3.7435006569412885 3.7382979667743754 3.752906216134325
300 3.7216207517926581 3.7183601470468379 3.7273574624223884
EOD
$d2 << EOD
75 3.7429481340116175 3.7284177784606207 3.7509478496889503
150 3.4339483383951657 3.4219345476466945 3.457060972189518
225 3.2882163741019022 3.2788417144584714 3.2957125675731724
300 3.2208437757978055 3.2171677899544884 3.2266873736450465
EOD
$d3 << EOD
75 3.8530945947393538 3.8447968044643002 3.8575006899312458
150 3.7008084146173714 3.6930240068870308 3.7131589187324567
225 3.6196365446792078 3.6095758319095976 3.6298225324780846
300 3.5804841782623371 3.5675046619336084 3.5919850594183851
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
plot $d0 using 1:2:3:4 with yerrorlines lc 1 dt 2 pt 6 title "softmax", \
     $d1 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1", \
     $d2 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "elu1@gates", \
     $d3 using 1:2:3:4 with yerrorlines lc 4 dt 1 pt 7 title "elu1@retnet"
unset multiplot
set output
