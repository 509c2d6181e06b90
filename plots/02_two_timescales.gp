# plots/02_two_timescales.gp — figure of experiments/02_two_timescales.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/02_two_timescales.gp
# Reads  dir/02_two_timescales.tsv     (scalar-alpha sweep; block 0 aligned keys, block 1 rotated keys)
#        dir/02_two_timescales_kda.tsv (the strategies; same blocks, KDA the first row of each)
# Writes dir/02_two_timescales.png: recall error with aligned keys (top left) and rotated keys
#        (top right), and the cosine of the read with the stored value in both (bottom)
if (!exists("dir")) dir = 'results'
sweep = dir.'/02_two_timescales.tsv'
kda   = dir.'/02_two_timescales_kda.tsv'
set datafile separator '\t'

# sweep columns: 1 basis 2 alpha 3 one_minus 4 half_life 5 err_v0 6 err_d 7 err_d_sd 8 err_v
#                9 err_v_sd 10 both_ok 11 cos_d 12 cos_v 13 acc_d 14 acc_v
# kda columns:   1 basis 2 strategy 3 a_durable 4 a_volatile 5 err_d 6 err_d_sd 7 err_v 8 err_v_sd
#                9 both_ok 10 cos_d 11 cos_v 12 acc_d 13 acc_v
# One number of the KDA row of block b (0 aligned, 1 rotated).
kval(b, c) = real(system(sprintf("awk -F'\\t' '!/^#/ && NF > 1 && $1 == \"%s\" && $2 == \"kda\" {print $%d}' '%s'", b == 0 ? 'aligned' : 'rotated', c, kda)))
a_slow = kval(0, 3)
a_fast = kval(0, 4)
shape = system(sprintf("sed -n 's/^# parameters: .*K=V=\\([0-9]*\\) T=\\([0-9]*\\) P=\\([0-9]*\\).* sigma=\\([0-9.]*\\) seeds=\\([0-9]*\\).*/K = V = \\1, T = \\2 tokens, rewrite every \\3 tokens, rewrite-key noise σ = \\4, \\5 seeds/p' '%s' | head -1", sweep))

set terminal pngcairo size 1400,1100 enhanced font 'Sans,11'
set output dir.'/02_two_timescales.png'
set multiplot title sprintf("Two facts in one head: a durable fact written once and a volatile fact rewritten often; read at the end (mean over seeds)\nGated DeltaNet with one scalar decay α for every channel (lines) against KDA with decay %g on half the channels and %g on the other half (stars)\n%s; each star drawn just outside its own 1 − α", a_slow, a_fast, shape) font ',12'

blue = '#0044aa'
red  = '#aa2200'
set logscale x
set xrange [0.14:6.5e-5]
# KDA's stars sit at their own 1 − α, moved out by this factor (volatile left, durable right)
# so that they do not cover the scalar-α point at the same decay.
nudge = 1.2
set format x '%g'
set grid
set xlabel '1 − α of the scalar decay  (log scale, α grows to the right; half-life ≈ ln2/(1−α) tokens)' font ',10'

# ---- top: relative error, aligned and rotated keys ----------------------------------
set logscale y
set yrange [0.01:3]
set format y '%g'
set ylabel 'relative recall error |S^T k − v| / |v|'
set arrow 1 from graph 0, first 0.1 to graph 1, first 0.1 nohead dt 2 lc rgb 'gray30'
# below the line, in the middle, where no curve comes near it
set label 1 'tol = 0.1' at graph 0.6, first 0.078 center tc rgb 'gray30'
set key at graph 0.01, graph 0.76 left top box opaque font ',10' samplen 2
do for [b = 0:1] {
    set lmargin at screen 0.07 + 0.5 * b
    set rmargin at screen 0.47 + 0.5 * b
    set tmargin at screen 0.87
    set bmargin at screen 0.53
    if (b == 0) {
        set title "each fact on its own half of the key channels (set by hand):\nKDA's two decays fall exactly on the two facts and serve both"
    } else {
        set title sprintf("the same facts, every key rotated by a random orthogonal matrix,\nsame decays: KDA errs %.2f on the durable fact (scalar α: unchanged)", kval(1, 5))
    }
    set label 2 sprintf('KDA: durable err %.3f', kval(b, 5)) at first (1 - a_slow), first kval(b, 5) * (b == 0 ? 0.62 : 1.5) right tc rgb blue
    # under the lowest error bar of the volatile curve, clear of the data
    set label 3 sprintf('KDA: volatile err %.3f', kval(b, 7)) at first (1 - a_fast), first 0.015 left tc rgb red
    plot sweep index b using 3:6:7 with yerrorlines lw 2 pt 7 ps 0.6 lc rgb blue title 'durable fact, scalar α', \
         sweep index b using 3:8:9 with yerrorlines lw 2 pt 5 ps 0.6 lc rgb red title 'volatile fact, scalar α', \
         kda index b using ((1 - $3) / nudge):5:6 every ::0::0 with yerrorbars pt 3 ps 3 lw 3 lc rgb blue title 'KDA, durable fact', \
         kda index b using ((1 - $4) * nudge):7:8 every ::0::0 with yerrorbars pt 3 ps 3 lw 3 lc rgb red title 'KDA, volatile fact'
}
unset label 2
unset label 3
unset arrow 1
unset label 1

# ---- bottom: the cosine of the read with the stored value ---------------------------
unset logscale y
set yrange [0:1.08]
set ytics 0.2
set ylabel 'cosine(read, stored value)'
set lmargin at screen 0.07
set rmargin at screen 0.97
set tmargin at screen 0.42
set bmargin at screen 0.06
# The lowest nearest-stored-value accuracy of every other strategy row (both facts, both bases).
others = real(system(sprintf("awk -F'\t' '!/^#/ && NF > 1 && !($1 == \"rotated\" && $2 == \"kda\") {m = (m == \"\" || $12 < m) ? $12 : m; m = ($13 < m) ? $13 : m} END {print m}' '%s'", kda)))
set title sprintf("Scored by direction instead: a scalar α keeps both facts (its error above is shrinkage of the durable read); only KDA with rotated keys\nloses the durable fact (cosine %.2f; its read is nearest to the right stored value in %.0f%% of seeds, %s)", kval(1, 10), 100 * kval(1, 12), \
    others >= 1 ? "every other strategy's in 100%" : sprintf("every other strategy's in at least %.0f%%", 100 * others))
set key default
set key bottom right box opaque font ',10'
set label 4 sprintf('KDA, rotated keys: durable cosine %.2f', kval(1, 10)) at first (1 - a_slow), first kval(1, 10) right offset -2,0 tc rgb blue
set label 5 "dashed: at the smallest α the durable read (α^T of its size)\nsinks below the float64 rounding of the other writes\n(with aligned keys those stay exactly zero)" at first 0.045, first 0.35 left font ',9' tc rgb blue
plot sweep index 0 using 3:11 with linespoints lw 2 pt 7 ps 0.6 lc rgb blue title 'durable fact, scalar α, aligned keys', \
     sweep index 1 using 3:11 with linespoints lw 2 dt 2 pt 6 ps 0.8 lc rgb blue title 'durable fact, scalar α, rotated keys', \
     sweep index 0 using 3:12 with linespoints lw 2 pt 5 ps 0.6 lc rgb red title 'volatile fact, scalar α (the same in both bases)', \
     kda index 0 using ((1 - $3) / nudge):10 every ::0::0 with points pt 3 ps 3 lw 3 lc rgb blue title 'KDA, aligned keys, durable fact', \
     kda index 0 using ((1 - $4) * nudge):11 every ::0::0 with points pt 3 ps 3 lw 3 lc rgb red title 'KDA, aligned keys, volatile fact', \
     kda index 1 using ((1 - $3) / nudge):10 every ::0::0 with points pt 6 ps 2.5 lw 3 lc rgb blue title 'KDA, rotated keys, durable fact', \
     kda index 1 using ((1 - $4) * nudge):11 every ::0::0 with points pt 6 ps 2.5 lw 3 lc rgb red title 'KDA, rotated keys, volatile fact'
unset multiplot
