# plots/16_recall_by_ratio.gp — trained hybrid stacks: recall and cache against the ratio.
# Run from the repository root:  gnuplot -e "dir='results'" plots/16_recall_by_ratio.gp
# Reads  DIR/16_recall_by_ratio_summary.tsv, DIR/16_recall_by_ratio.tsv (bin/16_recall_by_ratio;
#        the second only for its header: which sweep)
# Writes OUT/16_recall_by_ratio.png (OUT defaults to DIR): MQAR test accuracy (left axis; mean,
#        bars one sd when there are several seeds) and the decode cache as a fraction of the
#        attention-only stack's (right axis), against the share of attention blocks; the title
#        says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/16_recall_by_ratio_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/16_recall_by_ratio.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/16_recall_by_ratio.tsv', f)))
set datafile separator '\t'
set terminal pngcairo size 950,620 font ',11'
set output out.'/16_recall_by_ratio.png'
if (seeds > 1) {
    how = sprintf("accuracy: mean over %d seeds, bars one sd", seeds)
} else {
    how = "accuracy: one seed, so no error bars"
}
set title sprintf("Trained KDA + attention stacks of equal depth on MQAR (where pure KDA struggles):\nrecall (%s) and the decode cache at Kimi Linear sizes,\nagainst the share of attention blocks\n%s", how, note) noenhanced
# Two-line tick labels: the x title sits a full line below them, and the margin holds both.
set xlabel 'attention blocks / blocks  (KDA:attention ratio under each tick)' offset 0,-1.4
set bmargin 5.5
set ylabel 'MQAR test accuracy' tc rgb '#0044aa'
set y2label 'decode cache ÷ attention-only cache, 128K tokens' tc rgb '#aa5500'
set yrange [0:1.05]
set y2range [0:1.05]
set ytics 0.2 nomirror tc rgb '#0044aa'
set y2tics 0.2 tc rgb '#aa5500'
# room either side for the end ticks' names ('pure KDA', 'pure attention')
set xrange [-0.1:1.1]
set grid
set key top left box opaque
# a tick per stack: its attention share, and its ratio under it
stack(s) = s eq 'kda' ? 'pure KDA' : s eq 'attention' ? 'pure attention' : s[8:].':1'
set xtics () nomirror
tick(x, s) = sprintf("%.3g\n%s", x, stack(s))
if (seeds > 1) {
    plot f u 2:3:4:xtic(tick($2, stringcolumn(1))) with yerrorlines lw 2 pt 7 ps 1.2 lc rgb '#0044aa' \
           title 'MQAR test accuracy (mean ± sd, left axis)', \
         f u 2:5 axes x1y2 with linespoints lw 2 pt 5 dt 2 lc rgb '#aa5500' title 'decode cache fraction (right axis)'
} else {
    plot f u 2:3:xtic(tick($2, stringcolumn(1))) with linespoints lw 2 pt 7 ps 1.2 lc rgb '#0044aa' \
           title 'MQAR test accuracy (left axis)', \
         f u 2:5 axes x1y2 with linespoints lw 2 pt 5 dt 2 lc rgb '#aa5500' title 'decode cache fraction (right axis)'
}
