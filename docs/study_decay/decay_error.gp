set terminal pngcairo size 1100,460 font ",10"
set output "decay_error.png"
set multiplot layout 1,2
set logscale xy
set grid
set xlabel "1 - gamma (gamma = 1 plotted at 1e-4)"
set ylabel "median ||out - softmax|| / ||softmax||"
set key bottom left font ",8"
set title "causal, L = 2048, input scale 0.5, decayed softmax reference"
plot "decay_error.dat" index 0 using 1:2 with linespoints title "elu1", \
     "decay_error.dat" index 1 using 1:2 with linespoints title "relu", \
     "decay_error.dat" index 2 using 1:2 with linespoints title "taylor2", \
     "decay_error.dat" index 3 using 1:2 with linespoints title "dpfp", \
     "decay_error.dat" index 4 using 1:2 with linespoints title "favor+:256", \
     "decay_error.dat" index 5 using 1:2 with linespoints title "favor+:1024"
set title "causal, L = 2048, input scale 1, decayed softmax reference"
plot "decay_error.dat" index 6 using 1:2 with linespoints title "elu1", \
     "decay_error.dat" index 7 using 1:2 with linespoints title "relu", \
     "decay_error.dat" index 8 using 1:2 with linespoints title "taylor2", \
     "decay_error.dat" index 9 using 1:2 with linespoints title "dpfp", \
     "decay_error.dat" index 10 using 1:2 with linespoints title "favor+:256", \
     "decay_error.dat" index 11 using 1:2 with linespoints title "favor+:1024"
unset multiplot
