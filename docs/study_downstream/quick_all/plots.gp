# linattn.downstream: the plots of report.md, made from the CSV files of this folder;
# the numbers plotted are inline below. To (re)make the PNGs: run `gnuplot plots.gp`
# in this folder (gnuplot 5 or later: datablocks). Tasks: capacity, mqar, charlm, swap.
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
$d9 << EOD
4 0.9966666666666667 0.99624999999999997 0.99750000000000005
8 0.99479166666666663 0.99375000000000002 0.99562499999999998
16 1 1 1
32 0.99989583333333332 0.99968749999999995 1
64 0.99968749999999995 0.99945312500000005 0.99992187499999996
EOD
$d10 << EOD
4 0.78541666666666676 0.63249999999999995 0.9325
8 0.61937500000000001 0.40062500000000001 0.859375
16 0.44041666666666668 0.21156249999999999 0.7371875
32 0.26703125 0.083125000000000004 0.53531249999999997
64 0.13565104166666667 0.037890624999999997 0.29867187499999998
EOD
$d11 << EOD
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
plot $d9 using 1:2:3:4 with yerrorlines lc 1 dt 1 pt 7 title "softmax", \
     $d10 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1", \
     $d11 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "favor+:16"
unset multiplot
set output
$d12 << EOD
20 4.2033979301015547 4.1720194661414345 4.2452235375158871
40 3.9417773483335483 3.9400578657902217 3.9437761307018753
60 3.8733081886475493 3.8626646410060523 3.8847946805884752
80 3.8384240303322414 3.831464580382427 3.8472192230973654
EOD
$d13 << EOD
20 4.2210752241980396 4.1875305814227515 4.2690637725784901
40 3.9392700705941692 3.9366680877417157 3.9411575228598381
60 3.8713988372576704 3.8605657647349227 3.8826345784936382
80 3.8390943040502035 3.8326010417393284 3.8473846704074952
EOD
$d14 << EOD
20 4.184739876274751 4.1672190863905518 4.1970601401070597
40 3.9350608525418522 3.932034187196868 3.937429626919736
60 3.8625926376028912 3.852479828421957 3.874925628151364
80 3.8309497789808442 3.8248088517940362 3.8393424176878486
EOD
$d15 << EOD
20 4.2279679448793193 4.1957087004365796 4.2750470490020067
40 3.9416813820143664 3.9353734023460203 3.9465326686299047
60 3.8726272520052327 3.8663588283465855 3.8825589061272585
80 3.8395904166703922 3.8318026982740232 3.8453680018434779
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
plot $d12 using 1:2:3:4 with yerrorlines lc 1 dt 2 pt 6 title "softmax", \
     $d13 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1", \
     $d14 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "favor+:64", \
     $d15 using 1:2:3:4 with yerrorlines lc 4 dt 1 pt 7 title "hedgehog"
unset multiplot
set output
$d16 << EOD
0 3.8384240303322414 3.831464580382427 3.8472192230973654
10 3.8623536963732925 3.8514252308068664 3.8839770750662734
20 3.8243029934902988 3.8206547828450961 3.8283623573261636
30 3.8221769439603328 3.8109773190810459 3.8340274658455846
EOD
$d17 << EOD
0 3.8533391684007676 3.8462396099180509 3.8581741739920243
10 3.8694687332945876 3.8574009399937452 3.8920526924201875
20 3.8236548482067469 3.8168574059140452 3.8359013888093858
30 3.8217382735455314 3.8075758462122811 3.8427146535059666
EOD
$d18 << EOD
0 3.8408970261965476 3.8334189912268317 3.8492056227148308
10 3.8616571666372983 3.8504260116053532 3.8819820763162647
20 3.8228208470051626 3.8175718218457293 3.8295951289675481
30 3.8261192449385106 3.8107331037168204 3.8416665912316086
EOD
$d19 << EOD
0 3.8524754715281353 3.845399302685935 3.8576279570928844
10 3.8689230896709503 3.8559765796792997 3.89252564471006
20 3.8229113098795167 3.8154794809153323 3.8345678353345956
30 3.822659871243955 3.8076577099540918 3.8432674057458396
EOD

# ---- swap_bpc.png ----
if (cairo) { set terminal pngcairo size 900,600 noenhanced font ',10' } else { set terminal png size 900,600 noenhanced }
set output 'swap_bpc.png'.suffix
set multiplot layout 1,1
set title "Swap: the softmax model with each map, fine-tuned\nmean over seeds, bars min..max (step 0 = zero-shot)"
set xlabel "fine-tune step"
set ylabel "validation bpc"
unset logscale
set xrange [*:*]
set yrange [*:*]
plot $d16 using 1:2:3:4 with yerrorlines lc 1 dt 2 pt 6 title "softmax", \
     $d17 using 1:2:3:4 with yerrorlines lc 2 dt 1 pt 7 title "elu1", \
     $d18 using 1:2:3:4 with yerrorlines lc 3 dt 1 pt 7 title "favor+:64", \
     $d19 using 1:2:3:4 with yerrorlines lc 4 dt 1 pt 7 title "hedgehog"
unset multiplot
set output
