# plots/01_half_life.gp — figures of experiments/01_half_life.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/01_half_life.gp
# Reads  dir/01_half_life.tsv, dir/01_half_life_fit.tsv, dir/01_half_life_gate_hist.tsv
# Writes dir/01_half_life.png (retained fraction vs tokens, one curve per a)
#        dir/01_half_life_gate.png (histogram of per-channel half-lives of a KDA gate)
if (!exists("dir")) dir = 'results'
data = dir.'/01_half_life.tsv'
fit  = dir.'/01_half_life_fit.tsv'
hist = dir.'/01_half_life_gate_hist.tsv'

set terminal pngcairo size 1240,640 enhanced font 'Sans,11'

# ---- retained fraction vs tokens ------------------------------------------------
set output dir.'/01_half_life.png'
stats fit using 1 nooutput
n = STATS_records
array A[n]
array H[n]
do for [i=1:n] {
    stats fit using 1 every ::(i-1)::(i-1) nooutput
    A[i] = STATS_max
    stats fit using 3 every ::(i-1)::(i-1) nooutput
    H[i] = STATS_max
}
# The chapter's two decays, a = 0.9 and a = 0.9999, when the sweep has them.
h09 = NaN
h09999 = NaN
do for [i=1:n] {
    if (abs(A[i] - 0.9) < 1e-12) { h09 = H[i] }
    if (abs(A[i] - 0.9999) < 1e-12) { h09999 = H[i] }
}
set title sprintf("One association under a constant per-token decay a: the retained fraction of the write halves after ln(1/2)/ln a tokens\na = 0.9: %.4g tokens (chapter: \"under seven\"); a = 0.9999: %.4g (chapter: \"about seven thousand\")\n(Gated DeltaNet recurrence, float64; points: the least-squares fitted half-life)", h09, h09999)
set xlabel 'tokens since the write, t'
set ylabel 'retained fraction  <o_t, v_0> / <o_0, v_0>'
set logscale x
set format x '10^{%T}'
set xrange [1:*]
set yrange [0:1.05]
set grid
# The key sits outside the plot, right of it: inside, every corner is crossed by a curve.
set key outside right top box opaque title 'decay a  (half-life)'
set arrow from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 2 lc rgb 'gray40'
set label 'half' at graph 0.01, first 0.53 tc rgb 'gray40'
plot for [i=1:n] data index (i-1) using ($2 > 0 ? $2 : NaN):3 with lines lw 2 lc i \
         title sprintf('a = %g  (%.4g token%s)', A[i], H[i], sprintf('%.4g', H[i]) eq '1' ? '' : 's'), \
     for [i=1:n] '+' using (H[i]):(0.5) every ::0::0 with points pt 7 ps 1.4 lc i notitle
unset arrow
unset label

# ---- histogram of effective per-channel half-lives of a KDA gate ------------------
set output dir.'/01_half_life_gate.png'
reset
gate = dir.'/01_half_life_gate.tsv'
set terminal pngcairo size 1100,660 enhanced font 'Sans,11'
# What the sampled channels say (01_half_life_gate.tsv, column 6 = effective half-life).
xstd = system(sprintf("sed -n 's/^# parameters: .*x~N(0,\\([0-9.e+-]*\\)^2).*/\\1/p' '%s' | head -1", hist))
stats gate using (log10($6)) nooutput
lmin = STATS_min
lmed = STATS_median
lmax = STATS_max
nch = STATS_records
stats gate using ($6 > 1e6 ? 1 : 0) nooutput
permanent = STATS_sum / nch
stats hist using 2 nooutput
xhi = STATS_max
set title sprintf("Half-lives of the %d channels of an untrained KDA gate g = −5·σ(A (x + dt\\_bias)), fla's initialisation, input x from N(0, %s^2).\nShortest channel %.3g tokens (chapter: \"about six\"); median 10^{%.1f}; %.0f%% beyond 10^6 tokens (\"effectively permanent\"); longest 10^{%.1f}", nch, xstd, 10**lmin, lmed, 100 * permanent, lmax) font ',11'
set xlabel 'effective half-life of a channel, ln 2 / |mean over tokens of g|  (tokens, log scale)'
set ylabel 'fraction of channels per half-decade'
set xrange [-1.2:xhi + 0.3]
set xtics 2
set mxtics 2
set format x '10^{%.0f}'
set yrange [0:*]
set grid ytics xtics
set style fill solid 0.6 border -1
set key top right box opaque
floor = log10(log(2)/5)
set object 1 rect from 6, graph 0 to graph 1, graph 1 fc rgb '#eeeeee' fs solid 1.0 noborder behind
set label 1 "beyond 10^6 tokens:\n\"effectively permanent\"" at 6.3, graph 0.72 left tc rgb 'gray30' font ',10'
set arrow 1 from floor, graph 0 to floor, graph 1 nohead lw 2 dt 2 lc rgb 'red'
set arrow 2 from log10(6), graph 0 to log10(6), graph 1 nohead lw 2 dt 3 lc rgb 'dark-green'
plot hist using (($1+$2)/2):4:($2-$1) with boxes lc rgb '#4477aa' title 'channels', \
     NaN with lines lw 2 dt 2 lc rgb 'red' title 'the gate floor ln2/5 = 0.139 tokens (a bound per token, not per channel)', \
     NaN with lines lw 2 dt 3 lc rgb 'dark-green' title 'the chapter: "about six tokens"'
