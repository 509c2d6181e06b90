# plots/18_learned_timescales.gp — the half-lives a scalar and a per-channel gate learn.
# Run from the repository root:  gnuplot -e "dir='results'" plots/18_learned_timescales.gp
# Reads  DIR/18_learned_half_lives.tsv, DIR/18_learned_timescales.tsv (bin/18_learned_timescales;
#        the second only for its header: which sweep)
# Writes OUT/18_learned_timescales.png (OUT defaults to DIR), two panels:
#        left   what the verdict rests on: the test accuracy on the fact and on the stream, per
#               mixer (bars: mean over seeds, labelled; points: each seed), with chance 1/16
#        right  every gate channel's learned half-life for Gated DeltaNet (one per head) and KDA
#               (one per key channel), on a log axis, markers cycling by seed (one key entry per
#               mixer, so the key hides no point), with the chapter's two
#               timescales (decay 0.9 and 0.9999 per token) marked on the right axis
#        the title says which sweep.
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
set terminal pngcairo size 1500,680 font ',11'
set output out.'/18_learned_timescales.png'
if (seeds > 1) {
    how = sprintf("one trained block per seed, %d seeds overlaid", seeds)
} else {
    how = "one trained block, one seed"
}
# The fact's span: written at positions 0-1 of a T-token sequence, queried at T - 1, so its value must
# survive T - 2 tokens (experiments/18_learned_timescales.c); T from the TSV's parameters.
T = int(system(sprintf("sed -n 's/^# parameters:.*[ ]T=\\([0-9]*\\).*/\\1/p' '%s' | head -1", dir.'/18_learned_timescales.tsv')))
span = T > 2 ? sprintf("the fact (positions 0-1) is asked at position %d, %d positions after its value; a stream value 2-6 positions after it (a gap of 1-5 fillers)", T - 1, T - 2) : "the fact is asked T - 2 positions after its value"
ft = dir.'/18_learned_timescales.tsv'
set multiplot title sprintf("A trained block on a task with a durable fact and a volatile stream (%s)\n%s\n%s", how, span, note) noenhanced

# ---- left: the recall the verdict rests on --------------------------------------------------
set lmargin at screen 0.06
set rmargin at screen 0.30
set tmargin at screen 0.80
set bmargin at screen 0.14
stats ft u (stringcolumn(1) eq 'gated_deltanet' ? $3 : 1/0) nooutput
gf = STATS_mean
stats ft u (stringcolumn(1) eq 'gated_deltanet' ? $4 : 1/0) nooutput
gs = STATS_mean
stats ft u (stringcolumn(1) eq 'kda' ? $3 : 1/0) nooutput
kf = STATS_mean
stats ft u (stringcolumn(1) eq 'kda' ? $4 : 1/0) nooutput
ks = STATS_mean
set title 'test accuracy (bars: mean over the seeds; points: each seed)'
set yrange [0:1.42]
set ytics 0, 0.2, 1
set ylabel 'test accuracy'
set xrange [-0.6:1.6]
set xtics ('Gated DeltaNet' 0, 'KDA' 1)
set grid ytics
set style fill solid 0.75 border -1
set boxwidth 0.36
set key top center opaque box font ',10' samplen 2
set arrow 9 from graph 0, first 1.0/16 to graph 1, first 1.0/16 nohead dt 2 lw 1.5 lc rgb '#555555'
plot '+' u (-0.2):(gf) every ::0::0 w boxes lc rgb '#0044aa' t 'fact (62 positions back)', \
     '+' u (0.2):(gs) every ::0::0 w boxes lc rgb '#99bbee' t 'stream (2-6 positions back)', \
     NaN w l dt 2 lw 1.5 lc rgb '#555555' t 'chance, 1/16', \
     '+' u (0.8):(kf) every ::0::0 w boxes lc rgb '#0044aa' notitle, \
     '+' u (1.2):(ks) every ::0::0 w boxes lc rgb '#99bbee' notitle, \
     ft u (stringcolumn(1) eq 'kda' ? 0.8 : -0.2):3 w p pt 7 ps 0.8 lc rgb 'black' notitle, \
     ft u (stringcolumn(1) eq 'kda' ? 1.2 : 0.2):4 w p pt 7 ps 0.8 lc rgb 'black' notitle, \
     '+' u (-0.2):(gf + 0.05):(sprintf('%.3f', gf)) every ::0::0 w labels font ',11' notitle, \
     '+' u (0.2):(gs + 0.05):(sprintf('%.3f', gs)) every ::0::0 w labels font ',11' notitle, \
     '+' u (0.8):(kf + 0.05):(sprintf('%.3f', kf)) every ::0::0 w labels font ',11' notitle, \
     '+' u (1.2):(ks + 0.05):(sprintf('%.3f', ks)) every ::0::0 w labels font ',11' notitle
unset arrow 9
unset ylabel
set style fill empty
set xtics auto
set ytics auto
set yrange [*:*]
set grid noytics

# ---- right: the learned half-lives ---------------------------------------------------------
set lmargin at screen 0.38
set rmargin at screen 0.88
set title 'learned half-lives: each point a gate channel, mean over the test tokens'
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
array kpt[3] = [7, 9, 13]
array gpt[3] = [5, 11, 4]
plot for [s = 1:seeds] f u (stringcolumn(1) eq 'kda' && $2 == s ? $3 : 1/0):4 with points pt kpt[(s - 1) % 3 + 1] ps 0.9 lc rgb '#cc3311' \
         title (s > 1 ? '' : seeds > 1 ? sprintf('KDA channels (%d seeds, markers cycle by seed)', seeds) : 'KDA channels'), \
     for [s = 1:seeds] f u (stringcolumn(1) eq 'gated_deltanet' && $2 == s ? $3 * per + per / 2 - 0.5 : 1/0):4 with points pt gpt[(s - 1) % 3 + 1] ps 1.8 lc rgb '#0044aa' \
         title (s > 1 ? '' : seeds > 1 ? sprintf('Gated DeltaNet heads (%d seeds; placed mid-head)', seeds) : 'Gated DeltaNet heads (placed mid-head)')
unset multiplot
