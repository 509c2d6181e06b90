# plots/17_nope_needs_position.gp — NoPE attention on MQAR with and without a KDA block.
# Run from the repository root:  gnuplot -e "dir='results'" plots/17_nope_needs_position.gp
# Reads  DIR/17_nope_needs_position.tsv (bin/17_nope_needs_position)
# Writes DIR/17_nope_needs_position.png: test accuracy of each trained stack (every seed a point).
if (!exists("dir")) dir = 'results'
f = dir.'/17_nope_needs_position.tsv'
set datafile separator '\t'
set terminal pngcairo size 900,520 font ',11'
set output dir.'/17_nope_needs_position.png'
set title "Two-block models on MQAR: NoPE attention alone, with the short convolution,\nand with a KDA block in place of the first attention block (no convolution)"
set ylabel 'test accuracy'
set yrange [0:1.12]
set xrange [-0.6:2.6]
set grid ytics
set xtics ("NoPE attention x2\n(no conv)" 0, "attention x2\n+ short conv" 1, "KDA, then NoPE attention\n(no conv)" 2)
idx(s) = s eq 'attention_nope' ? 0 : s eq 'attention_conv' ? 1 : 2
plot f u (idx(stringcolumn(1))):12 with points pt 7 ps 1.8 lc rgb '#4477aa' title 'one trained model (seed)', \
     f u (idx(stringcolumn(1))):($12 + 0.04):(sprintf('%.2f', $12)) with labels notitle
