# plots/10_chunk_cost.gp — the C x C x K decay tensor: what it would hold, what it costs.
# Run from the repository root:  gnuplot -e "dir='results'" plots/10_chunk_cost.gp
# Reads  DIR/10_chunk_cost.tsv, DIR/10_chunk_cost_memory.tsv (bin/10_chunk_cost)
# Writes DIR/10_chunk_cost.png, three panels against the chunk size C:
#   left    measured CPU time per token of each decay mode, float64 and float32
#   middle  exp() evaluations per token of each mode's two Gram matrices (counted)
#   right   memory per chunk per head: the tensor if stored, against what the code allocates
if (!exists("dir")) dir = 'results'
f  = dir.'/10_chunk_cost.tsv'
fm = dir.'/10_chunk_cost_memory.tsv'
set datafile separator '\t'

# 10_chunk_cost.tsv: 1 precision, 2 mode, 3 C, 4 ns_per_token, 5 exps_per_token, 6 err
sel(p, m, col) = (strcol(1) eq p && strcol(2) eq m) ? column(col) : 1/0
mname = 'pairwise rescaled safe'
array mcol[3] = ['#d62728', '#ff7f0e', '#2ca02c']
array mpt[3] = [7, 5, 9]
array mtitle[3] = ['pairwise (every element of the C x C x K tensor)', 'rescaled (q {/Symbol g}, k / {/Symbol g})', 'safe sub-chunks of 16 (default)']
stats f u 3 nooutput
CMIN = STATS_min
CMAX = STATS_max

set terminal pngcairo size 1800,700 enhanced font 'Sans,11'
set output dir.'/10_chunk_cost.png'
set multiplot layout 1,3 title "10 chunk cost — per-channel decay inside a chunk: one KDA head, K = V = 128 (the chapter's d_k); kdalab\\_chunk\\_f64 / \\_f32, opts.decay" font ',13'
set grid lc rgb '#dddddd'
set logscale x 2
set xrange [CMIN / 1.3 : CMAX * 1.3]
set xlabel 'chunk size C'
set bmargin 9
set key below font ',10' box maxrows 3

set title "time: the pairwise mode pays for the tensor in exp() calls\n(CPU time per token, median of the rounds, this machine)"
set ylabel 'CPU time per token, {/Symbol m}s'
set yrange [0:*]
plot \
  for [m = 1:3] f u 3:(sel('f64', word(mname, m), 4) / 1000) w lp lw 2.5 pt mpt[m] ps 1 lc rgb mcol[m] t sprintf('%s, float64', word(mname, m)), \
  for [m = 1:3] f u 3:(sel('f32', word(mname, m), 4) / 1000) w lp lw 1.5 dt 2 pt mpt[m] ps 0.8 lc rgb mcol[m] t sprintf('%s, float32', word(mname, m))

set title "work: decay factors exp() per token for the two Gram matrices\n(counted from the code)"
set ylabel 'exp() evaluations per token'
set logscale y
set format y '10^{%L}'
set yrange [*:*]
plot for [m = 1:3] f u 3:(sel('f64', word(mname, m), 5)) w lp lw 2.5 pt mpt[m] ps 1 lc rgb mcol[m] t mtitle[m]

# 10_chunk_cost_memory.tsv: 1 C, 2 tensor, 3 lower, 4 scores, 5 rows, 6 ws, 7 tensor_f32_B, ...
set title "memory per chunk per head, float32 bytes (computed):\nthe tensor outgrows everything the chunk holds"
set ylabel 'bytes (float32)'
# binary prefixes (KiB, MiB), as the experiment's printout gives them
set yrange [2**9:2**26]
set ytics 2**10, 4
set format y '%.0b %BB'
# top left, clear of the tensor's line, which rises to the right; an arrow to its point
set label 1 "C = 64:\n524 288 elements = 2 MiB\n(the chapter: 500 000)" at CMIN / 1.2, 2**24 left font ',9'
set arrow 1 from 40, 2**22 to 60, 2**21.3 lw 1 lc rgb '#000000' size char 0.6, 20
set object 1 circle at 64, 2097152 size char 0.6 fs empty border lc rgb '#000000' lw 2 front
plot \
  fm u 1:($2 * 4) w lp lw 3 pt 7 ps 1 lc rgb '#d62728' t 'C x C x K decay tensor, if stored', \
  fm u 1:($6 * 4) w lp lw 2 pt 5 ps 0.8 lc rgb '#1f77b4' t "the chunkwise form's whole workspace (every mode)", \
  fm u 1:($5 * 4) w lp lw 2 pt 9 ps 0.8 lc rgb '#9467bd' t "the chunk's own q, k, v", \
  fm u 1:($4 * 4) w lp lw 2 pt 13 ps 0.8 lc rgb '#2ca02c' t 'one C x C score matrix', \
  fm u 1:(128 * 128 * 4) w l lw 1.5 dt 2 lc rgb '#777777' t 'the K x V state'
unset arrow 1
unset multiplot
