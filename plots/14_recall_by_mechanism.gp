# plots/14_recall_by_mechanism.gp — trained MQAR recall by mixer.
# Run from the repository root:  gnuplot -e "dir='results'" plots/14_recall_by_mechanism.gp
# Reads  DIR/14_recall_summary.tsv (bin/14_recall_by_mechanism)
# Writes DIR/14_recall_by_mechanism.png: test accuracy (mean over seeds at the best
#        learning rate, error bars one standard deviation) against key-value pairs.
if (!exists("dir")) dir = 'results'
f = dir.'/14_recall_summary.tsv'
set datafile separator '\t'
set terminal pngcairo size 900,560 font ',11'
set output dir.'/14_recall_by_mechanism.png'
set title "Trained two-block models on MQAR: test accuracy against pairs per sequence\n(mean over seeds at each mixer's best learning rate; bars: one sd, none for one seed)" noenhanced
set xlabel 'key-value pairs per sequence'
set ylabel 'test accuracy on the answers'
set yrange [0:1.05]
set grid
set key bottom left noenhanced
set logscale x 2
sel(m) = stringcolumn(1) eq m ? $4 : 1/0
plot for [m in "attention linear_attention deltanet gated_deltanet kda"] \
       f u 2:(sel(m)):5 with yerrorlines lw 2 pt 7 title m
