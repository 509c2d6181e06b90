# plots/15_recall_by_state.gp — pairs recalled at 95 % against head dimension.
# Run from the repository root:  gnuplot -e "dir='results'" plots/15_recall_by_state.gp
# Reads  DIR/15_recall_by_state_summary.tsv, DIR/15_recall_by_state.tsv (bin/15_recall_by_state;
#        the second only for its header: which sweep)
# Writes OUT/15_recall_by_state.png (OUT defaults to DIR): pairs recalled at 95 % test accuracy
#        by DeltaNet and KDA against the head dimension d (line: from the seed-mean accuracy
#        curve; with several seeds, points and bars: mean and sd of each seed's own value),
#        with the line pairs = d; the title says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/15_recall_by_state_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/15_recall_by_state.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/15_recall_by_state.tsv', f)))
ds = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {print $2}' '%s' | sort -n | uniq | tr '\\n' ' '", f))
set datafile separator '\t'
stats f u 2 nooutput
dmin = STATS_min
dmax = STATS_max
set terminal pngcairo size 900,600 font ',11'
set output out.'/15_recall_by_state.png'
set title sprintf("Trained two-block models on MQAR: pairs recalled at 95 %% test accuracy\nagainst the head dimension d (width fixed; the chapter: \"on the order of d\")\n%s", note) noenhanced
set xlabel 'head dimension d'
set ylabel 'key-value pairs at 95 % accuracy (0: not reached at the fewest pairs)'
set logscale x 2
set xrange [dmin / 1.3 : dmax * 1.3]
set xtics ()
do for [d in ds] { set xtics add (d real(d)) }
set grid
set key top left noenhanced box opaque
# a little room under 0, so a curve at 0 does not hide in the axis
set yrange [-1:*]
set ytics 0, 4
names = "deltanet kda"
array label[2] = ['DeltaNet', 'KDA']
array color[2] = ['#228833', '#cc3311']
sel(m) = stringcolumn(1) eq m ? $4 : 1/0
own(m) = stringcolumn(1) eq m ? $5 : 1/0
# the two mechanisms drawn a little apart at each d, so that one does not hide the other
nudge(i) = 2 ** (0.04 * (2 * i - 3))
# a count of pairs is never negative: an error bar stops at 0
lo0(y) = y < 0 ? 0 : y
if (seeds > 1) {
    plot for [i=1:2] f u 2:(sel(word(names, i))) with linespoints lw 2 pt 7 ps 1.2 lc rgb color[i] \
             title label[i].' (from the seed-mean accuracy)', \
         for [i=1:2] f u ($2 * nudge(i)):(own(word(names, i))):(lo0($5 - $6)):($5 + $6) with yerrorbars pt 6 ps 1.2 lc rgb color[i] \
             title sprintf('%s, each seed''s own value: mean ± sd of %d seeds (bar cut at 0)', label[i], seeds), \
         f u 2:(stringcolumn(1) eq "deltanet" ? $2 : 1/0) with lines dt 2 lc rgb '#888888' \
             title 'pairs = d'
} else {
    plot for [i=1:2] f u ($2 * nudge(i)):(sel(word(names, i))) with linespoints lw 2 pt 7 ps 1.2 lc rgb color[i] \
             title label[i].' (one seed; drawn a little apart at each d)', \
         f u 2:(stringcolumn(1) eq "deltanet" ? $2 : 1/0) with lines dt 2 lc rgb '#888888' \
             title 'pairs = d'
}
