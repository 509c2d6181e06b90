# plots/16_recall_by_ratio.gp — trained hybrid stacks: recall and cache against the ratio.
# Run from the repository root:  gnuplot -e "dir='results'" plots/16_recall_by_ratio.gp
# Reads  DIR/16_recall_by_ratio_summary.tsv (bin/16_recall_by_ratio)
# Writes DIR/16_recall_by_ratio.png: MQAR test accuracy (mean, bars one sd) and the decode
#        cache as a fraction of the attention-only stack's, against the share of attention blocks.
if (!exists("dir")) dir = 'results'
f = dir.'/16_recall_by_ratio_summary.tsv'
set datafile separator '\t'
set terminal pngcairo size 900,560 font ',11'
set output dir.'/16_recall_by_ratio.png'
set title "Trained KDA + attention stacks of equal depth on MQAR (where pure KDA struggles)\nrecall and the decode cache against the share of attention blocks"
set xlabel 'attention blocks / blocks (0 = pure KDA, 0.25 = 3:1, 1 = pure attention)'
set ylabel 'test accuracy / cache fraction'
set yrange [0:1.15]
set xrange [-0.05:1.05]
set grid
set key bottom right
plot f u 2:3:4 with yerrorlines lw 2 pt 7 title 'MQAR test accuracy', \
     f u 2:5 with linespoints lw 2 pt 5 dt 2 title 'cache / attention-only cache (128K tokens, Kimi sizes)', \
     f u 2:3:1 with labels offset 0,1.2 noenhanced notitle
