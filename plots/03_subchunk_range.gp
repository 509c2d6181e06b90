# plots/03_subchunk_range.gp — the floating-point range problem of chunkwise KDA.
# Run from the repository root:  gnuplot -e "dir='results'" plots/03_subchunk_range.gp
# Reads  DIR/03_subchunk_range.tsv, DIR/03_subchunk_range_claims.tsv (bin/03_subchunk_range)
# Writes DIR/03_subchunk_range.png            per precision: the error of the runs that stayed
#                                             finite (top) and which runs wrote non-finite values
#                                             (the strip below), against the per-step decay
#        DIR/03_subchunk_range_inv_gamma.png  the exponent each mode asks exp() for (= ln of the
#                                             largest 1/gamma) against the per-step decay
if (!exists("dir")) dir = 'results'
f = dir.'/03_subchunk_range.tsv'

# Columns: 1 g, 2 C, 3 mode, 4 subchunk, 5 precision, 6 span_sum_g, 7 max_exp,
#          8 log10_inv_gamma, 9 nonfinite, 10 status, 11 err
sel(p, m, c, col) = (strcol(5) eq p && strcol(3) eq m && int($2) == c) ? column(col) : 1/0
# The strip: row y for a run of (p, m, c); nf = 1 keeps the runs that wrote non-finite values, 0 the others.
row(p, m, c, y, nf) = (strcol(5) eq p && strcol(3) eq m && int($2) == c && ($9 > 0) == nf) ? y : 1/0

# The modes, one colour each, as in both figures; strip rows top to bottom.
array MODE[7] = ['rescaled', 'rescaled', 'rescaled', 'anchored32', 'anchored16', 'safe16', 'pairwise']
array CH[7]   = [128, 64, 16, 64, 64, 64, 64]
array COL[7]  = ['#8c1c1c', '#d62728', '#ff9896', '#17becf', '#1f77b4', '#2ca02c', '#000000']
array NAME[7] = ['rescaled, C = 128', 'rescaled, C = 64', 'rescaled, C = 16', 'anchored 32', \
                 'anchored 16', 'safe 16', 'pairwise']

set terminal pngcairo size 1500,1250 enhanced font 'Sans,11'
set output dir.'/03_subchunk_range.png'
set datafile separator '\t'
set datafile missing 'nan'
set multiplot title "Chunkwise KDA against the float64 recurrence, per storage precision, as the per-step decay grows (T = 256, K = V = 32, one head; C = 64 unless noted).\nTop of each panel: the error of every run that stayed finite. Strip below it: which runs wrote non-finite values (×) and which stayed finite (·)." font ',12'

# Per precision: the error axis (no non-finite run is drawn on it).
array YLO[4] = [1e-16, 1e-8, 1e-3, 1e-4]
array YHI[4] = [1e-13, 1e-4, 1e-1, 1e-1]
do for [i = 1:4] {
    p = word('fp64 fp32 bf16 fp16', i)
    colm = (i - 1) % 2
    rowm = (i - 1) / 2
    x0 = 0.10 + 0.5 * colm
    x1 = 0.48 + 0.5 * colm
    ytop = 0.905 - 0.425 * rowm

    # ---- the error of the finite runs ----
    set lmargin at screen x0
    set rmargin at screen x1
    set tmargin at screen ytop
    set bmargin at screen ytop - 0.22
    set logscale xy
    set xrange [0.008:40]
    set yrange [YLO[i]:YHI[i]]
    set format x ''
    set format y '10^{%L}'
    unset xlabel
    set ylabel "max |o − o_{ref}| / max |o_{ref}|\n(o_{ref}: float64 recurrence)" font ',10'
    set grid xtics ytics mxtics lc rgb '#dddddd'
    # every panel's ticks in one font size (the strip's "set ytics (...) font" would otherwise carry over)
    set ytics auto font ',10'
    set xtics auto font ',10'
    unset key
    set arrow 1 from 0.10536, graph 0 to 0.10536, graph 1 nohead dt 3 lc rgb '#777777'
    set arrow 2 from 5, graph 0 to 5, graph 1 nohead dt 3 lc rgb '#777777'
    set label 1 'a = 0.9' at 0.112, graph 0.92 font ',9' tc rgb '#555555'
    set label 2 'production bound g = −5' at 4.6, graph 0.92 right font ',9' tc rgb '#555555'
    set title sprintf('%s%s', p, p eq 'fp64' ? ' (kdalab\_chunk\_f64)' : (p eq 'fp32' ? ' (kdalab\_chunk\_f32)' : ' storage, fp32 accumulation'))
    plot for [m = 1:6] f u (-$1):(sel(p, MODE[m], CH[m], 11)) w lp lw 1.8 pt 7 ps 0.45 lc rgb COL[m], \
         f u (-$1):(sel(p, 'pairwise', 64, 11)) w lp lw 2 dt 2 pt 7 ps 0.45 lc rgb COL[7], \
         f u (-$1):(p eq 'fp32' ? sel(p, 'recurrent_f32', 0, 11) : 1/0) w l lw 1.5 lc rgb '#999999', \
         f u (-$1):((p eq 'bf16' || p eq 'fp16') ? sel(p, 'floor', 0, 11) : 1/0) w l lw 1.5 lc rgb '#999999'

    # ---- the strip: which runs wrote non-finite values ----
    unset arrow
    unset label
    unset title
    set tmargin at screen ytop - 0.225
    set bmargin at screen ytop - 0.345
    unset logscale y
    set yrange [-0.6:6.6]
    set ytics ('rescaled C=128' 6, 'rescaled C=64' 5, 'rescaled C=16' 4, 'anchored 32' 3, 'anchored 16' 2, \
               'safe 16' 1, 'pairwise' 0) font ',10'
    set format x '%g'
    set ylabel ''
    set xlabel 'per-step decay |g| on every channel (g = ln a; log scale)' font ',10'
    set grid noytics xtics mxtics
    set arrow 1 from 0.10536, graph 0 to 0.10536, graph 1 nohead dt 3 lc rgb '#777777'
    set arrow 2 from 5, graph 0 to 5, graph 1 nohead dt 3 lc rgb '#777777'
    plot for [m = 1:7] f u (-$1):(row(p, MODE[m], CH[m], 7 - m, 0)) w p pt 7 ps 0.5 lc rgb '#999999', \
         for [m = 1:7] f u (-$1):(row(p, MODE[m], CH[m], 7 - m, 1)) w p pt 2 ps 1.3 lw 2.5 lc rgb COL[m]
    unset arrow
    set grid ytics
}

# The shared legend: an empty plot in the bottom strip.
unset arrow
unset label
unset title
unset logscale
unset border
unset tics
unset xlabel
unset ylabel
unset grid
set xrange [0:1]
set yrange [0:1]
set lmargin at screen 0.03
set rmargin at screen 0.97
set tmargin at screen 0.075
set bmargin at screen 0.005
set key at screen 0.5, 0.04 center center horizontal maxrows 3 samplen 3 width 1 font ',10' box
plot \
  NaN w lp lw 1.8 pt 7 ps 0.45 lc rgb '#d62728' t 'rescaled, chunk-level 1/{/Symbol g} (C = 64)', \
  NaN w lp lw 1.8 pt 7 ps 0.45 lc rgb '#ff9896' t 'rescaled, C = 16', \
  NaN w lp lw 1.8 pt 7 ps 0.45 lc rgb '#8c1c1c' t 'rescaled, C = 128', \
  NaN w lp lw 1.8 pt 7 ps 0.45 lc rgb '#1f77b4' t 'anchored sub-chunks of 16 (production)', \
  NaN w lp lw 1.8 pt 7 ps 0.45 lc rgb '#17becf' t 'anchored sub-chunks of 32', \
  NaN w lp lw 1.8 pt 7 ps 0.45 lc rgb '#2ca02c' t 'safe sub-chunks of 16 (kdalab default)', \
  NaN w lp lw 2 dt 2 pt 7 ps 0.45 lc rgb '#000000' t 'pairwise (C x C x K yardstick)', \
  NaN w l lw 1.5 lc rgb '#999999' t 'floor: f32 recurrence (fp32), f64 on rounded inputs (bf16, fp16)', \
  NaN w p pt 2 ps 1.3 lw 2.5 lc rgb '#444444' t 'strip: × wrote non-finite values, · stayed finite'
unset multiplot

# ---- how large 1/gamma gets --------------------------------------------------------------
reset
set datafile separator '\t'
set terminal pngcairo size 1150,780 enhanced font 'Sans,11'
set output dir.'/03_subchunk_range_inv_gamma.png'
set logscale xy
set xrange [0.008:40]
# The top is above the largest exponent asked (rescaled, C = 128, at the largest decay), so no line leaves the plot.
stats f u (sel('fp64', 'rescaled', 128, 7)) nooutput
ytop3 = STATS_max * 2
set yrange [0.03:ytop3]
set xlabel 'per-step decay |g| on every channel (g = ln a; log scale)'
set ylabel "exponent asked of exp(): |Σ g| over the span rescaled against\n(= ln of the largest 1/{/Symbol g} formed; log scale)"
set format y '%g'
# The right axis reads the same heights as 1/gamma itself: a height e is 1/gamma = exp(e).
set y2range [0.03:ytop3]
set logscale y2
# 1/gamma below 10 would sit at fractional powers of ten; the ticks stay at least half a decade of height apart.
set y2tics ('10' log(10), '10^3' log(1e3), '10^{10}' log(1e10), \
            '10^{38}' log(1e38), '10^{100}' log(1e100), '10^{308}' log(1e308), '10^{1000}' 1000 * log(10))
set y2label 'the largest 1/{/Symbol g} formed'
set ytics nomirror
set grid xtics ytics mxtics lc rgb '#dddddd'
set title "How large 1/{/Symbol g} gets: k ⊘ {/Symbol g} multiplies a key by exp(|Σ g|) over the span each mode rescales against.\nA format overflows where a line crosses its limit ln(max); safe sub-chunks and the pairwise form ask for no positive exponent (1/{/Symbol g} = 1)"
set key bottom right font ',10' opaque box
set arrow 1 from 0.10536, graph 0 to 0.10536, graph 1 nohead dt 3 lc rgb '#777777'
set label 1 'a = 0.9' at 0.112, graph 0.04 font ',9' tc rgb '#555555'
set arrow 2 from 5, graph 0 to 5, graph 1 nohead dt 3 lc rgb '#777777'
set label 2 'production bound g = −5' at 4.6, graph 0.96 right font ',9' tc rgb '#555555'
set arrow 3 from graph 0, first log(65504) to graph 1, first log(65504) nohead lw 1.5 dt 2 lc rgb '#9467bd'
set label 3 'fp16 overflows: ln 65504 = 11.1' at 0.01, first log(65504) offset 0,0.9 font ',9' tc rgb '#9467bd' front
set arrow 4 from graph 0, first log(3.4028e38) to graph 1, first log(3.4028e38) nohead lw 1.5 dt 2 lc rgb '#ff7f0e'
set label 4 'fp32 and bf16 overflow: ln 3.4e38 = 88.7' at 0.01, first log(3.4028e38) offset 0,0.9 font ',9' tc rgb '#ff7f0e' front
set arrow 5 from graph 0, first 709.78 to graph 1, first 709.78 nohead lw 1.5 dt 2 lc rgb '#555555'
set label 5 'fp64 overflows: ln 1.8e308 = 709.8' at 0.01, first 709.78 offset 0,0.9 font ',9' tc rgb '#555555' front
# (each limit's label sits above its dashed line, not on it)
# The chapter's two numbers: a = 0.9 over a chunk of 64 and of 128 (rescaled, fp64).
claims = dir.'/03_subchunk_range_claims.tsv'
inv64 = real(system(sprintf("awk -F'\t' '$1 == 64 && $2 == \"fp64\" {print $4}' '%s'", claims)))
inv128 = real(system(sprintf("awk -F'\t' '$1 == 128 && $2 == \"fp64\" {print $4}' '%s'", claims)))
e64 = log(inv64)
e128 = log(inv128)
set label 6 sprintf("the chapter at a = 0.9 (circles): 1/{/Symbol g} = %.0f ≈ 10^3 over 64 positions,\n%.0f ≈ 10^6 over 128 (rescaled)", inv64, inv128) at 0.0095, first 40 left font ',9' tc rgb '#8c1c1c' front
plot \
  f u (-$1):(sel('fp64', 'rescaled',  128, 7)) w l lw 2 dt 4 lc rgb '#8c1c1c' t 'rescaled, C = 128', \
  f u (-$1):(sel('fp64', 'rescaled',   64, 7)) w lp lw 2 pt 7 ps 0.6 lc rgb '#d62728' t 'rescaled, C = 64', \
  f u (-$1):(sel('fp64', 'anchored32', 64, 7)) w lp lw 2 pt 9 ps 0.7 lc rgb '#17becf' t 'anchored sub-chunks of 32', \
  f u (-$1):(sel('fp64', 'rescaled',   16, 7)) w l lw 5 lc rgb '#ff9896' t 'rescaled, C = 16 (the same exponents as anchored 16)', \
  f u (-$1):(sel('fp64', 'anchored16', 64, 7)) w lp lw 2 pt 5 ps 0.6 lc rgb '#1f77b4' t 'anchored sub-chunks of 16', \
  '+' u (0.10536):(e64) every ::0::0 w p pt 6 ps 2 lw 2 lc rgb '#d62728' notitle, \
  '+' u (0.10536):(e128) every ::0::0 w p pt 6 ps 2 lw 2 lc rgb '#8c1c1c' notitle
