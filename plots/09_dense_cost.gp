# plots/09_dense_cost.gp — a dense transition against KDA's DPLR chunkwise form.
# Run from the repository root:  gnuplot -e "dir='results'" plots/09_dense_cost.gp
# Reads  DIR/09_dense_cost.tsv, DIR/09_dense_cost_ratio.tsv (bin/09_dense_cost)
# Writes DIR/09_dense_cost.png, two panels:
#   left   CPU time per token against K (V = K), every series, log-log
#   right  dense recurrence / KDA chunkwise per token, measured (time) and counted (flops)
if (!exists("dir")) dir = 'results'
f  = dir.'/09_dense_cost.tsv'
fr = dir.'/09_dense_cost_ratio.tsv'
set datafile separator '\t'

# 09_dense_cost.tsv: 1 series, 2 K, 3 V, 4 C, 5 tokens, 6 flops_per_token, 7 cpu_s, 8 ns_per_token, 9 gflops
sel(s, c) = (strcol(1) eq s && (c < 0 || int($4) == c)) ? $8 : 1/0
stats f u 2 nooutput
KMIN = STATS_min
KMAX = STATS_max
array Cs[4] = [16, 32, 64, 128]
array col[4] = ['#9ecae1', '#4292c6', '#08519c', '#08306b']

set terminal pngcairo size 1600,720 enhanced font 'Sans,11'
set output dir.'/09_dense_cost.png'
set multiplot layout 1,2 title "09 dense cost — a general K x K transition S <- A_t S + k v^T against KDA's DPLR forms (float64, one thread, V = K; CPU time on this machine)" font ',13'
set grid lc rgb '#dddddd'
set logscale xy
set xrange [KMIN / 1.2 : KMAX * 1.2]
set xtics (16, 32, 64, 128, 256, 512)
set xlabel 'key dimension K (= V)'
set bmargin 10

set title "time per token: the dense forms grow as K^3, KDA's as K^2 or less"
set ylabel 'CPU time per token, ns (median of the rounds)'
set format y '10^{%L}'
set key below font ',10' box maxrows 4 width -3
plot \
  f u 2:(sel('dense_recurrence', -1)) w lp lw 3 pt 7 ps 1 lc rgb '#d62728' t 'dense recurrence, sequential (2K^2V flops)', \
  f u 2:(sel('dense_products', -1)) w lp lw 2 dt 2 pt 6 ps 1 lc rgb '#ff7f0e' t "dense chunk products A_t...A_1 (2K^3 flops)", \
  f u 2:(sel('kda_recurrent', -1)) w lp lw 2 pt 9 ps 1 lc rgb '#2ca02c' t 'KDA recurrent, kdalab\_recurrent\_f64 (7KV flops)', \
  for [i = 1:4] f u 2:(sel('kda_chunkwise', Cs[i])) w lp lw 2 pt 5 ps 0.8 lc rgb col[i] t sprintf('KDA chunkwise C = %d, kdalab\_chunk\_f64', Cs[i])

set title "how much more a dense transition costs per token than KDA's chunkwise form"
set ylabel 'dense recurrence / KDA chunkwise, per token'
set format y '%g'
set yrange [0.3:100]
set ytics (0.3, 1, 3, 10, 30, 100)
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lc rgb '#777777'
# two columns, filled down: the measured ratios, then the counted ones, each C = 16 ... 128
set key below font ',10' box vertical maxrows 4 maxcols 2 width 1 samplen 3
plot \
  for [i = 1:4] fr u 1:(int($2) == Cs[i] ? $4 : 1/0) w lp lw 2.5 pt 7 ps 0.9 lc rgb col[i] t sprintf('C = %d, CPU time (measured)', Cs[i]), \
  for [i = 1:4] fr u 1:(int($2) == Cs[i] ? $3 : 1/0) w l lw 2 dt 2 lc rgb col[i] t sprintf('C = %d, flops (counted)', Cs[i])
unset multiplot
