# plots/14_recall_by_mechanism.gp — trained MQAR recall by mixer.
# Run from the repository root:  gnuplot -e "dir='results'" plots/14_recall_by_mechanism.gp
# Reads  DIR/14_recall_summary.tsv, DIR/14_recall_by_mechanism.tsv (bin/14_recall_by_mechanism;
#        the second only for its header: which sweep)
# Writes OUT/14_recall_by_mechanism.png (OUT defaults to DIR): test accuracy (mean over seeds
#        at the best learning rate, error bars one standard deviation when there are several
#        seeds) against key-value pairs; the title says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/14_recall_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/14_recall_by_mechanism.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/14_recall_by_mechanism.tsv', f)))
# the pair counts the sweep has (ticks only where there is data)
pairs = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {print $2}' '%s' | sort -n | uniq | tr '\\n' ' '", f))
set datafile separator '\t'
stats f u 2 nooutput
pmin = STATS_min
pmax = STATS_max
set terminal pngcairo size 1000,600 font ',11'
set output out.'/14_recall_by_mechanism.png'
if (seeds > 1) {
    how = sprintf("mean over %d seeds at each mixer's best learning rate; bars: one sd, cut at 0 and 1, the accuracy's range", seeds)
} else {
    how = "one seed at each mixer's best learning rate, so no error bars"
}
set title sprintf("Trained two-block models on MQAR: test accuracy against pairs per sequence\n(%s)\n%s", how, note) noenhanced
set xlabel 'key-value pairs per sequence'
set ylabel 'test accuracy on the answers'
set yrange [0:1.05]
set grid
set key outside right top noenhanced box opaque
set logscale x 2
set xtics ()
do for [p in pairs] { set xtics add (p real(p)) }
set xrange [pmin / 1.2 : pmax * 1.2]
names  = "attention linear_attention deltanet gated_deltanet kda"
array label[5] = ['attention', 'linear attention', 'DeltaNet', 'Gated DeltaNet', 'KDA']
array color[5] = ['#000000', '#4477aa', '#228833', '#ee7733', '#cc3311']
sel(m) = stringcolumn(1) eq m ? $4 : 1/0
# each mixer's points nudged sideways so that error bars at one pair count do not cover each other
nudge(i) = 2 ** (0.025 * (i - 3))
if (seeds > 1) {
    # an accuracy lies in [0, 1]: the bar mean ± sd is cut there rather than drawn past the axis' meaning
    clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
    plot for [i=1:5] f u ($2 * nudge(i)):(sel(word(names, i))):(clip($4 - $5)):(clip($4 + $5)) \
         with yerrorlines lw 2 pt 7 lc rgb color[i] title label[i]
} else {
    plot for [i=1:5] f u 2:(sel(word(names, i))) with linespoints lw 2 pt 7 lc rgb color[i] title label[i]
}
