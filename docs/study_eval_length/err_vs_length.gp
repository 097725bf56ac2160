set terminal pngcairo size 1400,560 font ',10'
set output 'err_vs_length.png'
set multiplot layout 1,2
set logscale x 2
set grid
set key top left font ',9'
set datafile missing 'nan'
set format x "2^{%L}"
set xlabel 'n (causal; 1 head, dk = dv = 64)'
$d0 << EOD
1024 0.693775 0.679846 0.362774 0.230334
2048 0.700216 0.692002 0.361669 0.227949
4096 0.748555 0.698581 0.361312 nan
8192 0.703663 0.704442 0.364691 nan
16384 0.734639 0.708732 0.363125 nan
32768 0.754307 nan 0.366861 nan
65536 0.734309 nan 0.366217 nan
131072 0.708727 nan 0.365515 nan
262144 0.801142 nan 0.364302 nan
524288 0.724668 nan 0.365136 nan
1048576 0.718571 nan 0.363022 nan
EOD
$d1 << EOD
1024 2.56489 2.51082 0.651137 0.230334
2048 2.93874 2.88193 0.658114 0.227949
4096 3.33937 3.31012 0.661234 nan
8192 3.844 3.78608 0.670195 nan
16384 4.87871 4.5477 0.669173 nan
32768 5.46089 nan 0.672612 nan
65536 6.55632 nan 0.674774 nan
131072 6.46849 nan 0.671784 nan
262144 7.40589 nan 0.668126 nan
524288 8.39072 nan 0.671301 nan
1048576 9.69268 nan 0.670546 nan
EOD
$d2 << EOD
1024 2.13434 2.11495 0.563842 0.159988
2048 2.49963 2.38993 0.576859 0.195275
4096 2.83359 2.83717 0.579567 nan
8192 3.39334 3.23026 0.591967 nan
16384 3.89955 3.70951 0.590759 nan
32768 4.30184 nan 0.596791 nan
65536 5.37949 nan 0.598363 nan
131072 4.7813 nan 0.598309 nan
262144 5.6858 nan 0.59339 nan
524288 6.69453 nan 0.598704 nan
1048576 7.49202 nan 0.595171 nan
EOD
set logscale y
set ylabel 'out\_rel\_err against exact softmax (mean over seeds)'
set title 'Output error against length: sampled rows (lines), all rows (points)'
plot $d0 u 1:2 w lp lc 1 pt 7 t 'elu1 m=64 sampled', $d0 u 1:3 w p lc 1 pt 4 ps 2 t 'all rows', $d1 u 1:2 w lp lc 2 pt 7 t 'favor+ m=64 sampled', $d1 u 1:3 w p lc 2 pt 4 ps 2 t 'all rows', $d2 u 1:2 w lp lc 3 pt 7 t 'favor+ m=256 sampled', $d2 u 1:3 w p lc 3 pt 4 ps 2 t 'all rows'
unset logscale y
set yrange [0:1]
set ylabel 'weights\_tv (mean total variation per row)'
set title 'Row-normalized weights against softmax: TV (lines), rank-r reference (dashed)'
plot $d0 u 1:4 w lp lc 1 pt 7 t 'elu1 m=64', $d0 u 1:5 w lp lc 1 dt 2 pt 6 t 'rank-r reference', $d1 u 1:4 w lp lc 2 pt 7 t 'favor+ m=64', $d1 u 1:5 w lp lc 2 dt 2 pt 6 t 'rank-r reference', $d2 u 1:4 w lp lc 3 pt 7 t 'favor+ m=256', $d2 u 1:5 w lp lc 3 dt 2 pt 6 t 'rank-r reference'
unset multiplot
