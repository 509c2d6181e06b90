# plots/04_recall_capacity.gp — figure of experiments/04_recall_capacity.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/04_recall_capacity.gp
# Reads  dir/04_recall_capacity.tsv: blocks (two blank lines apart) in the order
#        keys = random, orthonormal; mechanism = linear attention, DeltaNet,
#        Gated DeltaNet, KDA, softmax attention  ->  index = 5*keys + mechanism
# Writes dir/04_recall_capacity.png: accuracy (top) and mean cosine (bottom)
#        against N/K, random keys (left) and orthonormal keys (right)
if (!exists("dir")) dir = 'results'
data = dir.'/04_recall_capacity.tsv'
names = "'linear attention' 'DeltaNet' 'Gated DeltaNet' 'KDA' 'softmax attention'"
array col[5] = ['#999999', '#0072b2', '#009e73', '#d55e00', '#000000']
array pts[5] = [4, 5, 7, 9, 3]

set terminal pngcairo size 1300,950 enhanced font 'Sans,11'
set output dir.'/04_recall_capacity.png'
set multiplot layout 2,2 title "Recall capacity of one K x V head (K = V = 64 by default): write N key→value pairs, query every key,\ndecode by the nearest stored value; mean ± sd over seeds (defaults: 20)"
set grid
set key bottom left box opaque
set yrange [0:1.05]

set title 'random unit keys'
set xlabel 'N / K  (associations per key dimension)'
set ylabel 'accuracy (fraction decoded to the right value)'
set xrange [0:4.1]
set arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 2 lc rgb 'gray40'
plot for [m=0:4] data index m using 4:5:6 with yerrorlines lw 2 pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)

set title "orthonormal keys (N ≤ K): no crosstalk\nevery mechanism decodes all N (note the y range)"
set xrange [0:1.05]
set yrange [0.98:1.002]
unset arrow 1
plot for [m=0:4] data index (5+m) using 4:5:6 with yerrorlines lw 2 pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)

set title 'random unit keys'
set yrange [0:1.05]
set ylabel 'mean cosine(recall, right value)'
set xrange [0:4.1]
set arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 2 lc rgb 'gray40'
plot for [m=0:4] data index m using 4:7:8 with yerrorlines lw 2 pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)

set title "orthonormal keys (N ≤ K); note the y range\nKDA dips: per-channel decay is not diagonal in the key basis"
set xrange [0:1.05]
set yrange [0.98:1.002]
unset arrow 1
plot for [m=0:4] data index (5+m) using 4:7:8 with yerrorlines lw 2 pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)
unset multiplot
