# plots/08_dplr.gp — a product of C DPLR transitions: rank <= C, one triangular solve.
# Run from the repository root:  gnuplot -e "dir='results'" plots/08_dplr.gp
# Reads  DIR/08_dplr.tsv, DIR/08_dplr_spectrum.tsv, DIR/08_dplr_identity.tsv (bin/08_dplr)
# Writes DIR/08_dplr.png, three panels:
#   left    singular values of P_C - Diag(gamma_C) for a few C: a cliff after the C-th
#   middle  that cliff for every C: sigma_C (kept) and sigma_{C+1} (rounding) over sigma_1
#   right   the WY form, kdalab_chunk_f64 and kdalab_recurrent_f64 against the dense chain
if (!exists("dir")) dir = 'results'
f  = dir.'/08_dplr.tsv'
fs = dir.'/08_dplr_spectrum.tsv'
fi = dir.'/08_dplr_identity.tsv'
set datafile separator '\t'
set datafile missing 'nan'

# 08_dplr.tsv: 1 K, 2 C, 3 rank, 4 sigma1, 5 sC, 6 sC1, 7 err_ut, 8 err_chunk, 9 err_recurrent
stats f u 1 nooutput
K2 = int(STATS_max)
K1 = int(STATS_min)
stats f u 2 nooutput
CM = int(STATS_max)
stats fi u 4 nooutput
IDERR = STATS_max
# is the numerical rank min(C, K) at every C?
stats f u ($3 == ($2 < $1 ? $2 : $1) ? 0 : 1) nooutput
RANKBAD = int(STATS_sum)

set terminal pngcairo size 1800,680 enhanced font 'Sans,11'
set output dir.'/08_dplr.png'
set multiplot layout 1,3 title sprintf("08 DPLR — P_C = A_C ... A_1 with A_t = (I - {/Symbol b}_t k_t k_t^T) Diag(a_t), float64, random unit keys (dense chain of C matrix products as the reference)") font ',13'
set grid lc rgb '#dddddd'
set logscale y
set format y '10^{%L}'
set bmargin 8

# ---- left: spectra ------------------------------------------------------------------------
array Cs[5] = [1, 4, 16, 32, 64]
array col[5] = ['#1f77b4', '#2ca02c', '#ff7f0e', '#d62728', '#9467bd']
set title sprintf("singular values of P_C - Diag(a_1 ... a_C), K = %d:\nexactly C are nonzero, the rest are rounding", K2)
set xlabel 'index i of the singular value'
set ylabel '{/Symbol s}_i / {/Symbol s}_1'
set xrange [0:K2 + 1]
# The bottom sits a decade below the smallest nonzero singular value drawn (the last ones fall below 1e-19);
# an exactly zero one is drawn on the bottom edge.
stats fs u ((int($1) == K2 && $4 > 0) ? log10($4) : 1/0) nooutput
ylo1 = 10**(floor(STATS_min) - 1)
set yrange [ylo1:3]
set ytics 100
# The key sits in the empty lower middle (right of the cliffs, above the rounding floor), in the axes' font.
set key at graph 0.97, graph 0.72 right top font ',11' box opaque title 'transitions C' vertical
plot for [n = 1:5] fs u 3:((int($1) == K2 && int($2) == Cs[n]) ? ($4 > 0 ? $4 : ylo1) : 1/0) \
     w lp lw 2 pt 7 ps 0.5 lc rgb col[n] t sprintf('C = %d', Cs[n])

# ---- middle: the cliff for every C ----------------------------------------------------------
set key below font ',10' box maxrows 3 noopaque notitle
set ytics auto
set title sprintf("the cliff after the C-th singular value, every C = 1..%d:\nnumerical rank = min(C, K) %s", CM, RANKBAD == 0 ? "at every C (both K)" : sprintf("FAILS at %d values of C", RANKBAD))
set xlabel 'C (transitions in the product)'
set xrange [0:CM + 1]
set yrange [1e-19:3]
set arrow 1 from graph 0, first 1e-10 to graph 1, first 1e-10 nohead dt 2 lc rgb '#777777'
set label 1 'rank threshold 10^{-10} {/Symbol s}_1' at graph 0.02, first 3e-10 font ',9' tc rgb '#555555'
plot \
  f u 2:(int($1) == K1 ? $5 : 1/0) w lp lw 2 pt 7 ps 0.5 lc rgb '#1f77b4' t sprintf('{/Symbol s}_C / {/Symbol s}_1, K = %d (last one kept)', K1), \
  f u 2:(int($1) == K2 ? $5 : 1/0) w lp lw 2 pt 5 ps 0.5 lc rgb '#d62728' t sprintf('{/Symbol s}_C / {/Symbol s}_1, K = %d', K2), \
  f u 2:(int($1) == K1 ? ($6 > 0 ? $6 : 1e-18) : 1/0) w lp lw 1.5 dt 2 pt 6 ps 0.5 lc rgb '#1f77b4' t sprintf('{/Symbol s}_{C+1} / {/Symbol s}_1, K = %d (first one dropped; 10^{-18}: exactly 0)', K1), \
  f u 2:(int($1) == K2 ? ($6 > 0 ? $6 : 1e-18) : 1/0) w lp lw 1.5 dt 2 pt 4 ps 0.5 lc rgb '#d62728' t sprintf('{/Symbol s}_{C+1} / {/Symbol s}_1, K = %d', K2)
unset arrow 1
unset label 1

# ---- right: one triangular solve reproduces the product -------------------------------------
set title sprintf("one C x C triangular solve gives the same matrix:\nmax|X - P_C| / max|P_C|; the identity's error: %.1e", IDERR)
set ylabel 'max |X - P_C| / max |P_C|'
set yrange [1e-17:1e-12]
set arrow 2 from graph 0, first 2.22e-16 to graph 1, first 2.22e-16 nohead dt 3 lc rgb '#777777'
set label 2 'float64 epsilon 2.2e-16' at graph 0.6, first 1.6e-16 font ',9' tc rgb '#555555'
plot \
  f u 2:(int($1) == K2 ? $7 : 1/0) w lp lw 2.5 pt 7 ps 0.6 lc rgb '#000000' t sprintf("WY form, this experiment's own C x C solve, K = %d", K2), \
  f u 2:(int($1) == K2 ? $8 : 1/0) w l lw 1.5 lc rgb '#2ca02c' t sprintf('kdalab\_chunk\_f64, one chunk of C, K = %d', K2), \
  f u 2:(int($1) == K2 ? $9 : 1/0) w l lw 1.5 dt 2 lc rgb '#ff7f0e' t sprintf('kdalab\_recurrent\_f64 (step by step), K = %d', K2), \
  f u 2:(int($1) == K1 ? $7 : 1/0) w lp lw 1.5 pt 6 ps 0.5 lc rgb '#777777' t sprintf('WY form, K = %d', K1)
unset multiplot
