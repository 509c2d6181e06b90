# plots/01_half_life.gp — figures of experiments/01_half_life.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/01_half_life.gp
# Reads  dir/01_half_life.tsv, dir/01_half_life_fit.tsv, dir/01_half_life_gate_hist.tsv
# Writes dir/01_half_life.png (retained fraction vs tokens, one curve per a)
#        dir/01_half_life_gate.png (histogram of per-channel half-lives of a KDA gate)
if (!exists("dir")) dir = 'results'
data = dir.'/01_half_life.tsv'
fit  = dir.'/01_half_life_fit.tsv'
hist = dir.'/01_half_life_gate_hist.tsv'

set terminal pngcairo size 1000,640 enhanced font 'Sans,11'

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
set title "One association under a constant per-token decay a: retained fraction of the write\n(Gated DeltaNet recurrence, float64; points: fitted half-life)"
set xlabel 'tokens since the write, t'
set ylabel 'retained fraction  <o_t, v_0> / <o_0, v_0>'
set logscale x
set format x '10^{%T}'
set xrange [1:*]
set yrange [0:1.05]
set grid
set key top right box opaque title 'decay a  (half-life)'
set arrow from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 2 lc rgb 'gray40'
set label 'half' at graph 0.01, first 0.53 tc rgb 'gray40'
plot for [i=1:n] data index (i-1) using ($2 > 0 ? $2 : NaN):3 with lines lw 2 lc i \
         title sprintf('a = %g  (%.4g tokens)', A[i], H[i]), \
     for [i=1:n] '+' using (H[i]):(0.5) every ::0::0 with points pt 7 ps 1.4 lc i notitle
unset arrow
unset label

# ---- histogram of effective per-channel half-lives of a KDA gate ------------------
set output dir.'/01_half_life_gate.png'
reset
set terminal pngcairo size 1000,640 enhanced font 'Sans,11'
set title "KDA gate g = -5 sigmoid(A (x + dt\\_bias)) with fla's initialisation, gate input x normal (std: --x-std, default 1)\nper-channel effective half-life ln2 / |mean_t g|; the last bin holds every channel at 10^{12} tokens and beyond"
set xlabel 'effective half-life (tokens, log scale)'
set ylabel 'fraction of channels'
set xrange [-1.2:12.2]
set xtics 1
set format x '10^{%.0f}'
set yrange [0:0.3]
set grid ytics
set style fill solid 0.6 border -1
set key top center box opaque
floor = log10(log(2)/5)
set arrow from floor, graph 0 to floor, graph 1 nohead lw 2 dt 2 lc rgb 'red'
set arrow from log10(6), graph 0 to log10(6), graph 1 nohead lw 2 dt 3 lc rgb 'dark-green'
set arrow from 6, graph 0 to 6, graph 1 nohead lw 2 dt 4 lc rgb 'black'
plot hist using (($1+$2)/2):4:($2-$1) with boxes lc rgb '#4477aa' title 'channels', \
     NaN with lines lw 2 dt 2 lc rgb 'red' title 'gate floor ln2/5 = 0.139 tokens (per token)', \
     NaN with lines lw 2 dt 3 lc rgb 'dark-green' title 'chapter: "about six tokens"', \
     NaN with lines lw 2 dt 4 lc rgb 'black' title '10^6 tokens (beyond any context: "effectively permanent")'
