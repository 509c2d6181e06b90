# plots/06_scaling.gp — time vs sequence length for every mechanism and form.
# Run from the repository root:  gnuplot -e "dir='results'" plots/06_scaling.gp
# Reads  DIR/06_scaling.tsv, DIR/06_scaling_fit.tsv (bin/06_scaling)
# Writes DIR/06_scaling.png   log-log, a panel per precision, fitted exponents in the key
if (!exists("dir")) dir = 'results'
f  = dir.'/06_scaling.tsv'
ff = dir.'/06_scaling_fit.tsv'
set datafile separator '\t'

# Columns of 06_scaling.tsv: 1 series, 2 mechanism, 3 form, 4 precision, 5 T, 6 seconds, ...
sel(name) = strcol(1) eq name ? $6 : 1/0

mechs  = 'linear_attention deltanet gated_deltanet kda'
array mtitle[4] = ['linear attention', 'DeltaNet', 'Gated DeltaNet', 'KDA']
colors = '#1f77b4 #ff7f0e #2ca02c #d62728'

# The fitted exponent of a series (column 2 of the fit file), for the key.
array expo[18]
array names[18]
n = 0
do for [prec in 'f64 f32'] {
    do for [m = 1:4] {
        do for [form in 'recurrent chunkwise'] {
            n = n + 1
            names[n] = word(mechs, m).'_'.form.'_'.prec
        }
    }
    n = n + 1
    names[n] = 'softmax_attention_'.prec
}
do for [i = 1:18] {
    nm = names[i]
    stats ff u (strcol(1) eq nm ? $2 : 1/0) nooutput
    expo[i] = STATS_records > 0 ? STATS_max : NaN
}
idx(prec, m, form) = (prec eq 'f64' ? 0 : 9) + (m - 1) * 2 + (form eq 'recurrent' ? 1 : 2)

set terminal pngcairo size 1500,800 enhanced font 'Sans,11'
set output dir.'/06_scaling.png'
set logscale xy
set format y '10^{%L}'
set xrange [200:10000]
# The top decade and a half hold the key, above every point.
set yrange [1e-4:300]
set xtics (256, 512, 1024, 2048, 4096, 8192)
set xlabel 'sequence length T (positions; log scale)'
set ylabel 'process CPU time per call, s (median of the rounds; log scale)'
set grid xtics ytics lc rgb '#dddddd'
set key top left font ',11' spacing 1.0 opaque box

# The ranges of the fitted exponents, linear mechanisms (expected 1) and softmax attention (2).
stats ff u ($6 == 1 ? $2 : 1/0) nooutput
lin_lo = STATS_min
lin_hi = STATS_max
stats ff u ($6 == 2 ? $2 : 1/0) nooutput
sm_lo = STATS_min
sm_hi = STATS_max
# the machine it was timed on (scripts/machine.sh, which make run calls first), if known
cpu = system(sprintf("sed -n 's/^cpu=//p' '%s/machine.txt' 2>/dev/null | head -1", dir))
timed = strlen(cpu) > 0 ? sprintf("timed on %s in one run (other work on the cores widens the exponents' range)", cpu) : "timed in one run (other work on the cores widens the exponents' range)"
set multiplot layout 1,2 title sprintf("CPU time per call against sequence length T: every linear mechanism, recurrent or chunkwise, grows as T^{p} with p = %.2f … %.2f;\nsoftmax attention as T^{p}, p = %.2f … %.2f (p fitted over T ≥ 512 from 06\\_scaling\\_fit.tsv; one head, K = V = 64, one thread)\n%s", lin_lo, lin_hi, sm_lo, sm_hi, timed) font ',12'
do for [prec in 'f64 f32'] {
    set title sprintf('%s (kdalab\_*\_%s)', prec eq 'f64' ? 'float64' : 'float32', prec)
    plot \
      for [m = 1:4] f u 5:(sel(word(mechs, m).'_recurrent_'.prec)) w lp lw 2 pt 7 ps 0.7 lc rgb word(colors, m) \
          t sprintf('%s recurrent (p = %.2f)', mtitle[m], expo[idx(prec, m, 'recurrent')]), \
      for [m = 1:4] f u 5:(sel(word(mechs, m).'_chunkwise_'.prec)) w lp lw 2 dt 2 pt 5 ps 0.7 lc rgb word(colors, m) \
          t sprintf('%s chunkwise C = 64 (p = %.2f)', mtitle[m], expo[idx(prec, m, 'chunkwise')]), \
      f u 5:(sel('softmax_attention_'.prec)) w lp lw 2.5 pt 9 ps 0.9 lc rgb '#000000' \
          t sprintf('softmax attention (p = %.2f)', expo[prec eq 'f64' ? 9 : 18]), \
      [256:8192] 5e-4 * (x / 256.0) w l lw 1.5 dt 3 lc rgb '#777777' t 'reference slope 1 (time ∝ T)', \
      [256:8192] 1.2e-3 * (x / 256.0)**2 w l lw 1.5 dt 4 lc rgb '#777777' t 'reference slope 2 (time ∝ T^{2})'
}
unset multiplot
