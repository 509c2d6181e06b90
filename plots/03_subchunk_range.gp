# plots/03_subchunk_range.gp — the floating-point range problem of chunkwise KDA.
# Run from the repository root:  gnuplot -e "dir='results'" plots/03_subchunk_range.gp
# Reads  DIR/03_subchunk_range.tsv (bin/03_subchunk_range)
# Writes DIR/03_subchunk_range.png            error vs per-step decay, a panel per precision
#        DIR/03_subchunk_range_inv_gamma.png  largest 1/gamma each mode builds vs per-step decay
if (!exists("dir")) dir = 'results'
f = dir.'/03_subchunk_range.tsv'

# Columns: 1 g, 2 C, 3 mode, 4 subchunk, 5 precision, 6 span_sum_g, 7 max_exp,
#          8 log10_inv_gamma, 9 nonfinite, 10 status, 11 err
sel(p, m, c, col) = (strcol(5) eq p && strcol(3) eq m && int($2) == c) ? column(col) : 1/0
# A run that wrote non-finite values is drawn as a cross at height y in the top band.
nf(p, m, c, y) = (strcol(5) eq p && strcol(3) eq m && int($2) == c && $9 > 0) ? y : 1/0

set terminal pngcairo size 1500,1100 enhanced font 'Sans,11'
set output dir.'/03_subchunk_range.png'
set datafile separator '\t'
set datafile missing 'nan'
set logscale xy
set format y '10^{%L}'
set xrange [0.008:40]
set xlabel 'per-step decay |g| on every channel (g = ln a; log scale)'
set ylabel 'max |o - o_{ref}| / max |o_{ref}|  (o_{ref}: float64 recurrent)'
set grid xtics ytics mxtics lc rgb '#dddddd'
unset key
set arrow 1 from 0.10536, graph 0 to 0.10536, graph 1 nohead dt 3 lc rgb '#777777'
set label 1 'a = 0.9' at 0.112, graph 0.62 font ',9' tc rgb '#555555'
set arrow 2 from 5, graph 0 to 5, graph 1 nohead dt 3 lc rgb '#777777'
set label 2 'production bound g = -5' at 4.6, graph 0.62 right font ',9' tc rgb '#555555'
set label 3 'non-finite' at graph 0.01, graph 0.94 left font ',9' tc rgb '#aa3333'
set label 7 'output' at graph 0.01, graph 0.89 left font ',9' tc rgb '#aa3333'

set multiplot title "03 subchunk range — chunkwise KDA error vs per-step decay (default run: T = 256, K = V = 32, one head; C = 64 unless noted)" font ',13'

array ylos[4] = [1e-17, 1e-8, 1e-4, 1e-5]
do for [i = 1:4] {
    p = word('fp64 fp32 bf16 fp16', i)
    col = (i - 1) % 2
    row = (i - 1) / 2
    set lmargin at screen 0.07 + 0.5 * col
    set rmargin at screen 0.48 + 0.5 * col
    set tmargin at screen 0.92 - 0.385 * row
    set bmargin at screen 0.62 - 0.385 * row
    set yrange [ylos[i]:1e3]
    set object 1 rect from graph 0, first 1.0 to graph 1, graph 1 fc rgb '#f8e4e4' fs solid 0.6 noborder behind
    set title sprintf('%s%s', p, p eq 'fp64' ? ' (kdalab\_chunk\_f64)' : (p eq 'fp32' ? ' (kdalab\_chunk\_f32)' : ' storage, fp32 accumulation'))
    plot \
      f u (-$1):(sel(p, 'rescaled',   64, 11)) w lp lw 2 pt 7 ps 0.6 lc rgb '#d62728', \
      f u (-$1):(sel(p, 'rescaled',   16, 11)) w l lw 1.5 dt 2 lc rgb '#ff9896', \
      f u (-$1):(sel(p, 'rescaled',  128, 11)) w l lw 1.5 dt 4 lc rgb '#8c1c1c', \
      f u (-$1):(sel(p, 'anchored16', 64, 11)) w lp lw 2 pt 5 ps 0.6 lc rgb '#1f77b4', \
      f u (-$1):(sel(p, 'anchored32', 64, 11)) w lp lw 2 pt 9 ps 0.7 lc rgb '#17becf', \
      f u (-$1):(sel(p, 'safe16',     64, 11)) w lp lw 2 pt 13 ps 0.7 lc rgb '#2ca02c', \
      f u (-$1):(sel(p, 'pairwise',   64, 11)) w l lw 2 dt 2 lc rgb '#000000', \
      f u (-$1):(p eq 'fp32' ? sel(p, 'recurrent_f32', 0, 11) : 1/0) w l lw 1.5 lc rgb '#999999', \
      f u (-$1):((p eq 'bf16' || p eq 'fp16') ? sel(p, 'floor', 0, 11) : 1/0) w l lw 1.5 lc rgb '#999999', \
      f u (-$1):(nf(p, 'rescaled',   128, 300)) w p pt 2 ps 0.9 lc rgb '#8c1c1c', \
      f u (-$1):(nf(p, 'rescaled',    64, 100)) w p pt 2 ps 0.9 lc rgb '#d62728', \
      f u (-$1):(nf(p, 'rescaled',    16, 30))  w p pt 2 ps 0.9 lc rgb '#ff9896', \
      f u (-$1):(nf(p, 'anchored32',  64, 10))  w p pt 2 ps 0.9 lc rgb '#17becf', \
      f u (-$1):(nf(p, 'anchored16',  64, 3))   w p pt 2 ps 0.9 lc rgb '#1f77b4'
}

# The shared legend: an empty plot in the bottom strip.
unset object 1
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
set tmargin at screen 0.125
set bmargin at screen 0.005
set key at screen 0.5, 0.065 center center horizontal maxrows 3 samplen 3 width 1 font ',10' box
plot \
  NaN w lp lw 2 pt 7 ps 0.6 lc rgb '#d62728' t 'rescaled, chunk-level 1/{/Symbol g} (C = 64)', \
  NaN w l lw 1.5 dt 2 lc rgb '#ff9896' t 'rescaled, C = 16', \
  NaN w l lw 1.5 dt 4 lc rgb '#8c1c1c' t 'rescaled, C = 128', \
  NaN w lp lw 2 pt 5 ps 0.6 lc rgb '#1f77b4' t 'anchored sub-chunks of 16 (production)', \
  NaN w lp lw 2 pt 9 ps 0.7 lc rgb '#17becf' t 'anchored sub-chunks of 32', \
  NaN w lp lw 2 pt 13 ps 0.7 lc rgb '#2ca02c' t 'safe sub-chunks of 16 (kdalab default)', \
  NaN w l lw 2 dt 2 lc rgb '#000000' t 'pairwise (C x C x K yardstick)', \
  NaN w l lw 1.5 lc rgb '#999999' t 'floor: f32 recurrent (fp32 panel), f64 on rounded inputs (bf16, fp16)', \
  NaN w p pt 2 ps 0.9 lc rgb '#444444' t 'x in shaded band: that mode (colour) wrote non-finite values'
unset multiplot

# Reset what the legend strip changed.
set border
set tics
set grid xtics ytics mxtics lc rgb '#dddddd'
set logscale xy
set xrange [0.008:40]
set xlabel 'per-step decay |g| on every channel (g = ln a; log scale)'
set lmargin
set rmargin
set tmargin
set bmargin
set arrow 1 from 0.10536, graph 0 to 0.10536, graph 1 nohead dt 3 lc rgb '#777777'
set label 1 'a = 0.9' at 0.112, graph 0.62 font ',9' tc rgb '#555555'
set arrow 2 from 5, graph 0 to 5, graph 1 nohead dt 3 lc rgb '#777777'
set label 2 'production bound g = -5' at 4.6, graph 0.62 right font ',9' tc rgb '#555555'

# ---- the largest 1/gamma each mode builds ------------------------------------------
set output dir.'/03_subchunk_range_inv_gamma.png'
set terminal pngcairo size 1100,750 enhanced font 'Sans,11'
set key default
set key bottom right font ',10' opaque box
set label 1 at 0.112, graph 0.04
set label 2 at 4.6, graph 0.96
set yrange [0.01:3000]
set format y '%g'
set ylabel 'log_{10} of the largest 1/{/Symbol g} formed  (= report.max\_exponent / ln 10)'
set title "03 subchunk range — how large 1/{/Symbol g} gets (fp64 run; safe16 and pairwise form no positive exponent: 1/{/Symbol g} = 1)"
set arrow 3 from graph 0, first log10(65504) to graph 1, first log10(65504) nohead lw 1.5 dt 2 lc rgb '#9467bd'
set label 4 'fp16 max 65504 (10^{4.8})' at 0.01, first log10(65504)*1.25 font ',9' tc rgb '#9467bd'
set arrow 4 from graph 0, first log10(3.4028e38) to graph 1, first log10(3.4028e38) nohead lw 1.5 dt 2 lc rgb '#ff7f0e'
set label 5 'fp32 / bf16 max 3.4e38 (10^{38.5})' at 0.01, first log10(3.4028e38)*1.25 font ',9' tc rgb '#ff7f0e'
set arrow 5 from graph 0, first 308.25 to graph 1, first 308.25 nohead lw 1.5 dt 2 lc rgb '#555555'
set label 6 'fp64 max 1.8e308 (10^{308})' at 0.01, first 308.25*1.25 font ',9' tc rgb '#555555'
plot \
  f u (-$1):(sel('fp64', 'rescaled',   16, 8)) w l lw 4 dt 2 lc rgb '#ff9896' t 'rescaled, C = 16 (same exponents as anchored 16)', \
  f u (-$1):(sel('fp64', 'rescaled',   64, 8)) w lp lw 2 pt 7 ps 0.6 lc rgb '#d62728' t 'rescaled, C = 64', \
  f u (-$1):(sel('fp64', 'rescaled',  128, 8)) w l lw 1.5 dt 4 lc rgb '#8c1c1c' t 'rescaled, C = 128', \
  f u (-$1):(sel('fp64', 'anchored32', 64, 8)) w lp lw 2 pt 9 ps 0.7 lc rgb '#17becf' t 'anchored sub-chunks of 32', \
  f u (-$1):(sel('fp64', 'anchored16', 64, 8)) w lp lw 2 pt 5 ps 0.6 lc rgb '#1f77b4' t 'anchored sub-chunks of 16'
