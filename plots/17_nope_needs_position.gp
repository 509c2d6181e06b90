# plots/17_nope_needs_position.gp — NoPE attention on MQAR with and without a KDA block.
# Run from the repository root:  gnuplot -e "dir='results'" plots/17_nope_needs_position.gp
# Reads  DIR/17_nope_needs_position.tsv (bin/17_nope_needs_position)
# Writes OUT/17_nope_needs_position.png (OUT defaults to DIR): test accuracy of each trained
#        stack (every seed a point, nudged sideways by seed; above them the values and their
#        mean); the title says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/17_nope_needs_position.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s'", f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s'", f)))
set datafile separator '\t'
set terminal pngcairo size 900,560 font ',11'
set output out.'/17_nope_needs_position.png'
set title sprintf("Two-block models on MQAR: NoPE attention alone, with the short convolution,\nand with a KDA block in place of the first attention block (no convolution)\n%s", note) noenhanced
set ylabel 'test accuracy'
# room above 1 so every value label sits just above its highest point
set yrange [0:1.3]
set ytics 0, 0.2, 1
set xrange [-0.6:2.6]
set grid ytics
set xtics ("NoPE attention x2\n(no conv)" 0, "attention x2\n+ short conv" 1, "KDA, then NoPE attention\n(no conv)" 2)
set key bottom center box opaque
set bmargin 4
# per stack: its seeds' accuracies and their mean, written above its highest point
array lab[3]
array top[3]
names = 'attention_nope attention_conv kda_then_attention'
do for [i = 1:3] {
    lab[i] = system(sprintf("awk -F'\t' '!/^#/ && $1 == \"%s\" {s = s sep sprintf(\"%%.2f\", $12); sep = \" / \"; m += $12; n++; if ($12 > t) t = $12} END {if (n > 1) printf \"%%s\\nmean %%.2f\", s, m / n; else printf \"%%s\", s}' '%s'", word(names, i), f))
    top[i] = real(system(sprintf("awk -F'\t' '!/^#/ && $1 == \"%s\" && $12 > t {t = $12} END {print t + 0}' '%s'", word(names, i), f)))
    set label i lab[i] at i - 1, top[i] + 0.1 center font ',10'
}
idx(s) = s eq 'attention_nope' ? 0 : s eq 'attention_conv' ? 1 : 2
# seed n of N at idx + 0.12 (n - (N + 1) / 2): several seeds side by side
xpos(s, n) = idx(s) + 0.08 * (n - (seeds + 1) / 2.0)
plot f u (xpos(stringcolumn(1), $9)):12 with points pt 7 ps 1.6 lc rgb '#4477aa' \
       title (seeds > 1 ? sprintf('one trained model (%d seeds side by side)', seeds) : 'one trained model (one seed)')
