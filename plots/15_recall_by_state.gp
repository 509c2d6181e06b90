# plots/15_recall_by_state.gp — pairs recalled at 95 % against head dimension.
# Run from the repository root:  gnuplot -e "dir='results'" plots/15_recall_by_state.gp
# Reads  DIR/15_recall_by_state_summary.tsv, DIR/15_recall_by_state.tsv (bin/15_recall_by_state;
#        the second only for its header: which sweep)
# Writes OUT/15_recall_by_state.png (OUT defaults to DIR): pairs recalled at 95 % test accuracy
#        by DeltaNet and KDA against the head dimension d (line: from the seed-mean accuracy
#        curve; with several seeds, points and bars: mean and sd of each seed's own value),
#        with the line pairs = d; where DIR holds 15_kda_converged_probe.tsv (the published
#        full sweep's probe: KDA at d = 16 and 32 with 3,000 steps), KDA's pairs at 95 % from
#        that probe's seed-mean curve too, labelled; the title says which sweep.
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
set terminal pngcairo size 1000,760 font ',11'
set output out.'/15_recall_by_state.png'
set title sprintf("Trained two-block models on MQAR: pairs recalled at 95 %% test accuracy\nagainst the head dimension d (width fixed; the chapter: \"on the order of d\")\n%s", note) noenhanced
set xlabel 'head dimension d'
set ylabel 'key-value pairs at 95 % accuracy (0: not reached at the fewest pairs)'
set logscale x 2
set xrange [dmin / 1.3 : dmax * 1.9]
set xtics ()
do for [d in ds] { set xtics add (d real(d)) }
set grid
# the legend below the plot, where it hides no line
set key at screen 0.07, screen 0.01 left bottom noenhanced box opaque
set bmargin 11
# a little room under 0, so a curve at 0 does not hide in the axis
set yrange [-1:dmax * 1.1]
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
# KDA with 3,000 steps (the probe beside the full sweep): pairs at 95 % of the seed-mean accuracy,
# linear between the two pair counts around 0.95, as the experiment computes its own
probe = dir.'/15_kda_converged_probe.tsv'
hasprobe = int(system(sprintf("test -s '%s' && echo 1 || echo 0", probe)))
if (hasprobe) {
    p95 = system(sprintf("awk -F'\t' '!/^#/ && $1 == \"kda\" {k = $2 SUBSEP $3; s[k] += $7; n[k]++; ds[$2] = 1; ps[$3] = 1} END {m = 0; for (p in ps) pl[++m] = p + 0; for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (pl[j] < pl[i]) {t = pl[i]; pl[i] = pl[j]; pl[j] = t}; for (d in ds) {prev = -1; for (i = 1; i <= m; i++) {k = d SUBSEP pl[i]; if (!(k in n)) continue; a = s[k] / n[k]; if (a < 0.95 && prev >= 0.95) {printf \"%%s %%.1f \", d, pp + (prev - 0.95) / (prev - a) * (pl[i] - pp); break}; prev = a; pp = pl[i]}}}' '%s'", probe))
    steps_probe = system(sprintf("awk -F'\t' '!/^#/ && $1 == \"kda\" {print $6; exit}' '%s'", probe))
}
if (seeds > 1 && hasprobe) {
    np95 = words(p95) / 2
    plot for [i=1:2] f u 2:(sel(word(names, i))) with linespoints lw 2 pt 7 ps 1.2 lc rgb color[i] \
             title label[i].' (from the seed-mean accuracy)', \
         for [i=1:2] f u ($2 * nudge(i)):(own(word(names, i))):(lo0($5 - $6)):($5 + $6) with yerrorbars pt 6 ps 1.2 lc rgb color[i] \
             title sprintf('%s, each seed''s own value: mean ± sd of %d seeds (bar cut at 0)', label[i], seeds), \
         f u 2:(stringcolumn(1) eq "deltanet" ? $2 : 1/0) with lines dt 2 lc rgb '#888888' \
             title 'pairs = d', \
         [j=1:np95:1] '+' u (real(word(p95, 2 * int(j) - 1))):(real(word(p95, 2 * int(j)))) with linespoints lw 2 dt 3 pt 5 ps 1.6 lc rgb '#cc3311' \
             title sprintf('KDA with %s steps (15_kda_converged_probe.tsv, 2 seeds, lr 3e-3)', steps_probe), \
         [j=1:np95:1] '+' u (real(word(p95, 2 * int(j) - 1))):(real(word(p95, 2 * int(j)))):(sprintf('%s pairs at d = %s\nwith %s steps', word(p95, 2 * int(j)), word(p95, 2 * int(j) - 1), steps_probe)) \
             with labels left offset 2.4,0.2 font ',10' tc rgb '#cc3311' notitle
} else { if (seeds > 1) {
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
}
