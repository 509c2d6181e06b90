# plots/18_learned_timescales.gp — the half-lives a scalar and a per-channel gate learn.
# Run from the repository root:  gnuplot -e "dir='results'" plots/18_learned_timescales.gp
# Reads  DIR/18_learned_half_lives.tsv, DIR/18_learned_timescales.tsv (bin/18_learned_timescales;
#        the second only for its header: which sweep)
# Writes OUT/18_learned_timescales.png (OUT defaults to DIR): every gate channel's learned
#        half-life for Gated DeltaNet (one per head) and KDA (one per key channel), on a log
#        axis, a marker per seed, with the chapter's two timescales (decay 0.9 and 0.9999 per
#        token) marked on the right axis; the title says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/18_learned_half_lives.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/18_learned_timescales.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/18_learned_timescales.tsv', f)))
set datafile separator '\t'
stats f u (stringcolumn(1) eq 'kda' ? $3 : 1/0) nooutput
nch = int(STATS_max) + 1
stats f u (stringcolumn(1) eq 'gated_deltanet' ? $3 : 1/0) nooutput
nheads = int(STATS_max) + 1
per = nch / nheads
set terminal pngcairo size 1000,640 font ',11'
set output out.'/18_learned_timescales.png'
if (seeds > 1) {
    how = sprintf("one trained block per seed, %d seeds overlaid, a marker per seed", seeds)
} else {
    how = "one trained block, one seed"
}
# The fact's span: written at positions 0-1 of a T-token sequence, queried at T - 1, so its value must
# survive T - 2 tokens (experiments/18_learned_timescales.c); T from the TSV's parameters.
T = int(system(sprintf("sed -n 's/^# parameters:.*[ ]T=\\([0-9]*\\).*/\\1/p' '%s' | head -1", dir.'/18_learned_timescales.tsv')))
span = T > 2 ? sprintf("the fact is queried %d tokens after it is written (T = %d), a stream value 2-6 tokens after", T - 2, T) : "the fact is queried T - 2 tokens after it is written"
set title sprintf("Learned half-lives on a task with a durable fact and a volatile stream:\n%s\n(%s; each point a gate channel, mean over the test tokens)\n%s", span, how, note) noenhanced
set xlabel sprintf('gate channel (head-major: %d heads of %d key channels)', nheads, per)
set ylabel 'half-life (tokens)'
set logscale y
set grid xtics ytics
set xrange [-1:nch - 0.2]
set xtics 0, per / 2
set mxtics 2
set yrange [0.1:3e5]
set key top left opaque box
hl9 = -log(2) / log(0.9)
hl9999 = -log(2) / log(0.9999)
# the chapter's two timescales: dashed lines named on the right axis, off the data
set arrow 1 from graph 0, first hl9 to graph 1, first hl9 nohead dt 2 lc rgb '#888888'
set arrow 2 from graph 0, first hl9999 to graph 1, first hl9999 nohead dt 2 lc rgb '#888888'
set logscale y2
set y2range [0.1:3e5]
set y2tics ("decay 0.9\nper token" hl9, "decay 0.9999\nper token" hl9999) tc rgb '#555555'
# room right of the plot for the two-line right-axis labels
set rmargin 16
array kpt[3] = [7, 9, 13]
array gpt[3] = [5, 11, 4]
plot for [s = 1:seeds] f u (stringcolumn(1) eq 'kda' && $2 == s ? $3 : 1/0):4 with points pt kpt[(s - 1) % 3 + 1] ps 0.9 lc rgb '#cc3311' \
         title (seeds > 1 ? sprintf('KDA channels, seed %d', s) : 'KDA channels'), \
     for [s = 1:seeds] f u (stringcolumn(1) eq 'gated_deltanet' && $2 == s ? $3 * per + per / 2 - 0.5 : 1/0):4 with points pt gpt[(s - 1) % 3 + 1] ps 1.8 lc rgb '#0044aa' \
         title (seeds > 1 ? sprintf('Gated DeltaNet heads, seed %d (placed mid-head)', s) : 'Gated DeltaNet heads (placed mid-head)')
