# plots/18_learned_timescales.gp — the half-lives a scalar and a per-channel gate learn.
# Run from the repository root:  gnuplot -e "dir='results'" plots/18_learned_timescales.gp
# Reads  DIR/18_learned_half_lives.tsv (bin/18_learned_timescales)
# Writes DIR/18_learned_timescales.png: every gate channel's learned half-life, sorted, for
#        Gated DeltaNet (one per head) and KDA (one per key channel), on a log axis, with
#        the chapter's two timescales (decay 0.9 and 0.9999 per token) marked.
if (!exists("dir")) dir = 'results'
f = dir.'/18_learned_half_lives.tsv'
set datafile separator '\t'
set terminal pngcairo size 900,560 font ',11'
set output dir.'/18_learned_timescales.png'
set title "Learned half-lives on a task with a durable fact and a volatile stream\n(one trained block per seed, seeds overlaid; each point a gate channel, mean over the test tokens)"
set xlabel 'gate channel (head-major)'
set ylabel 'half-life (tokens)'
set logscale y
set grid
set key at graph 0.98, graph 0.97 right top opaque box
hl9 = -log(2) / log(0.9)
hl9999 = -log(2) / log(0.9999)
set arrow from graph 0, first hl9 to graph 1, first hl9 nohead dt 2 lc rgb '#888888'
set label "decay 0.9 per token" at graph 0.02, first hl9 * 1.3 tc rgb '#666666'
set arrow from graph 0, first hl9999 to graph 1, first hl9999 nohead dt 2 lc rgb '#888888'
set label "decay 0.9999 per token" at graph 0.02, first hl9999 * 1.3 tc rgb '#666666'
set yrange [0.2:3e5]
plot f u (stringcolumn(1) eq 'kda' ? $3 : 1/0):4 with points pt 7 ps 0.8 title 'KDA channels', \
     f u (stringcolumn(1) eq 'gated_deltanet' ? $3 * 16 + 8 : 1/0):4 with points pt 5 ps 2 title 'Gated DeltaNet heads (placed mid-head)'
