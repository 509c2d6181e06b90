# plots/05_hybrid_cache.gp — figures of experiments/05_hybrid_cache.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/05_hybrid_cache.gp
# Reads  dir/05_hybrid_cache.tsv            (one block per ratio: 0:1, 1:1, 3:1, 7:1, 1:0)
#        dir/05_hybrid_cache_recall.tsv     (the same block order)
#        dir/05_hybrid_cache_kimi.tsv       (the 3:1 fraction at documented sizes vs context)
#        dir/05_hybrid_cache_kimi_fall.tsv  (per model: where the fall reaches 70 % and 74 %)
#        dir/05_hybrid_cache_claim.tsv      (per ratio at the largest context: the timing rounds'
#                                            median and range of time / the attention-only stack's)
# Writes dir/05_hybrid_cache.png         (cache bytes and ms per decoded token vs context for the
#                                         lab's stacks; the 3:1 fraction at Kimi Linear's sizes)
#        dir/05_hybrid_cache_recall.png  (the construction check: recall of a planted token)
if (!exists("dir")) dir = 'results'
data   = dir.'/05_hybrid_cache.tsv'
recall = dir.'/05_hybrid_cache_recall.tsv'
kimi   = dir.'/05_hybrid_cache_kimi.tsv'
fall   = dir.'/05_hybrid_cache_kimi_fall.tsv'

# The block order written by the experiment (RATIOS[] in experiments/05_hybrid_cache.c).
array T[5] = ['attention only (0:1)', 'KDA:attention 1:1', 'KDA:attention 3:1', \
              'KDA:attention 7:1', 'KDA only (1:0)']
array C[5] = ['#cc3311', '#ee7733', '#0077bb', '#33bbee', '#009988']
array CI[5] = [0xcc3311, 0xee7733, 0x0077bb, 0x33bbee, 0x009988]

# The stack's shape, from the TSV header ("# parameters: L=8 d_model=64 H=1 d_head=64 ...").
shape = system(sprintf("sed -n 's/^# parameters: \\(L=[0-9]* d_model=[0-9]* H=[0-9]*\\).*/\\1/p' '%s' | head -1 | sed 's/_/\\\\_/g'", data))
realc = system(sprintf("sed -n 's/.*real-context=\\([0-9]*\\).*/\\1/p' '%s' | head -1", data))
exact = real(system(sprintf("sed -n 's/.*exact=\\([0-9.]*\\).*/\\1/p' '%s' | head -1", recall)))
# One number of a model's line in the fall TSV (column c).
fallv(model, c) = real(system(sprintf("awk -F'\t' '$1 == \"%s\" {print $%d}' '%s'", model, c, fall)))

set terminal pngcairo size 1950,700 enhanced font 'Sans,11'
set output dir.'/05_hybrid_cache.png'
set multiplot layout 1,3 title sprintf("The decode-time bill of KDA + attention stacks: this lab's stacks (%s, float64, untrained random weights; left, middle)\nand the 3:1 cache at Kimi Linear's documented layer sizes (arithmetic; right)", shape) font ',12'

set logscale xy 2
set format x '2^{%L}'
set grid
set xlabel 'context length (tokens)'
set key top left box opaque
set title "cache bytes held (read from the stacks; the formula agrees):\nattention layers grow with the context, a KDA state does not"
# room under the lowest point and over the highest, so no point sits on the frame
set offsets 0, 0, graph 0.05, graph 0.05
set ylabel 'cache held (MiB)'
set format y '2^{%L}'
plot for [i=1:5] data index (i-1) using 4:($5/1048576.0) with linespoints lw 2 pt 7 ps 0.8 \
     lc rgb C[i] title T[i]

set title "time per decoded token (minimum over the decoded tokens; colours as on the left):\nthe attention layers' time follows their cache"
set ylabel 'ms per decoded token'
set format y '%g'
# the verdict's number: 3:1's time over attention-only's at the largest context, from the
# alternating timing rounds (columns 12-14 of the claim TSV, the 3:1 row)
claim = dir.'/05_hybrid_cache_claim.tsv'
clv(c) = real(system(sprintf("awk -F'\t' '!/^#/ && $1 == 3 && $2 == 1 {print $%d}' '%s'", c, claim)))
rounds = system(sprintf("sed -n 's/^# parameters:.* rounds=\\([0-9]*\\).*/\\1/p' '%s' | head -1", claim))
cmax = real(system(sprintf("awk -F'\t' '!/^#/ && $1 == 3 && $2 == 1 {print $4}' '%s'", claim)))
set label 7 sprintf("at %.0fK tokens, 3:1 takes %.1f %% of attention-only's time\nper token (the quarter of the chapter's \"¼ O(Nd)\"):\nmedian of %s alternating rounds, range %.1f-%.1f %%;\nthe milliseconds are this machine's", cmax / 1024, 100 * clv(12), rounds, 100 * clv(13), 100 * clv(14)) at graph 0.03, graph 0.95 left front font ',10' tc rgb '#0077bb'
# the legend says only what a filled and an open point are, low on the right, off the curves
set key bottom right box opaque
plot for [i=1:5] data index (i-1) using 4:8:(strcol(9) eq 'real' ? 7 : 6) \
     with linespoints lw 2 pt variable ps 1.3 lc rgb C[i] notitle, \
     keyentry with points pt 7 ps 1.3 lc rgb 'black' title 'filled: a real prefill', \
     keyentry with points pt 6 ps 1.3 lc rgb 'black' title sprintf('open: past %s tokens, caches from a row pool', realc)
unset label 7

# ---- the 3:1 fraction at documented sizes -------------------------------------------
c70 = fallv('kimi_mla_3to1', 8)
c74 = fallv('kimi_mla_3to1', 9)
f4k = fallv('kimi_mla_3to1', 10)
f32k = fallv('kimi_mla_3to1', 11)
set offsets 0, 0, 0, 0
set title sprintf("3:1 at Kimi Linear's sizes (KDA 32×128×128 + conv per layer,\nMLA 576 per token): %.2f of the attention-only cache at 4K tokens,\n%.2f at 32K: \"fallen by three quarters\" holds only at long context", f4k, f32k)
set logscale x 2
unset logscale y
set xrange [1024:1048576]
set xtics ("1K" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576)
set yrange [0:1]
set ytics 0.1
set format y '%.1f'
set ylabel 'cache of the 3:1 stack / cache of the attention-only stack'
set arrow 1 from graph 0, first 0.25 to graph 1, first 0.25 nohead dt 2 lw 1.5 lc rgb 'gray30'
set label 1 '1/4: the cache "fallen by three quarters"' at graph 0.98, first 0.22 right tc rgb 'gray30' font ',10'
set arrow 2 from c70, graph 0 to c70, first 0.30 nohead dt 3 lc rgb '#0077bb'
set arrow 3 from c74, graph 0 to c74, first 0.26 nohead dt 3 lc rgb '#0077bb'
set label 2 sprintf("fall 70%%\nat %.0f", c70) at c70, graph 0.12 left offset 0.4,0 tc rgb '#0077bb' font ',11'
set label 3 sprintf("fall 74%%\nat %.0f", c74) at c74, graph 0.12 left offset 0.4,0 tc rgb '#0077bb' font ',11'
set key top right box opaque font ',10'
plot kimi using 1:2 with lines lw 3 lc rgb '#0077bb' title 'Kimi Linear sizes, KDA:MLA exactly 3:1', \
     kimi using 1:3 with lines lw 2 dt 2 lc rgb '#0077bb' title 'released layout, 20 KDA + 7 MLA (fall tops out at 74.1%)', \
     kimi using 1:4 with lines lw 2 lc rgb '#ee7733' title 'same KDA, attention caching K and V (2·H·d_h)', \
     kimi using 1:5 with lines lw 2 dt 4 lc rgb '#999999' title "this lab's 3:1 stack (left panels)", \
     '+' using (c70):(0.30) every ::0::0 with points pt 7 ps 1.2 lc rgb '#0077bb' notitle, \
     '+' using (c74):(0.26) every ::0::0 with points pt 7 ps 1.2 lc rgb '#0077bb' notitle
unset multiplot

# ---- the construction check: recall of a planted token ------------------------------
reset
# Per stack: planted tokens recalled exactly by its best layer, and how far they were probed.
array R[5]
array N[5]
array D[5]
do for [i=1:5] {
    stats recall index (i-1) using 8 nooutput
    R[i] = STATS_sum
    N[i] = STATS_records
    stats recall index (i-1) using 4 nooutput
    D[i] = STATS_max
}
# Why the stacks were probed to different distances (experiments/05_hybrid_cache.c): distances are ~4 per
# octave from 1 to a limit, recall-max where the prefill is linear in T (no attention layer feeds another
# layer: KDA only, and 7:1 whose attention layer is the last), recall-max-all where it is O(T^2).
rmax = system(sprintf("sed -n 's/^# parameters:.* recall-max=\\([0-9]*\\).*/\\1/p' '%s' | head -1", recall))
rmaxall = system(sprintf("sed -n 's/^# parameters:.* recall-max-all=\\([0-9]*\\).*/\\1/p' '%s' | head -1", recall))
why = sprintf("Planted tokens at about 4 distances per octave up to a limit set by the prefill's cost: %s tokens where it is linear in T (KDA only; 7:1, whose one attention layer is last),\n%s where an attention layer feeds another layer (prefill O(T^2): attention only, 1:1, 3:1) — hence fewer tokens for those stacks, and the 1:1 and 3:1 curves end at %s", rmax, rmaxall, rmaxall)
set terminal pngcairo size 1500,700 enhanced font 'Sans,11'
set output dir.'/05_hybrid_cache_recall.png'
set multiplot layout 1,2 title sprintf("Construction check, not a test of \"exact retrieval needs attention\" (%s, untrained random weights, true forward pass):\nwhat each memory returns for a planted token's own key k_p after n more tokens\n%s", shape, why) font ',12'

set title "KDA layers, read S^T k_p: the untrained state's read of the planted token\nfades with distance in every stack (best KDA layer of each)"
set xlabel 'distance n (tokens written after the planted token)'
set ylabel 'cosine(read, v_p)'
set logscale x 2
set format x '2^{%L}'
set yrange [0:1.05]
set grid
set key bottom left box opaque
set arrow 1 from graph 0, first exact to graph 1, first exact nohead dt 2 lw 2 lc rgb 'black' front
set label 1 sprintf('exact: cos ≥ %g', exact) at graph 0.98, first exact - 0.04 right tc rgb 'black' front
plot for [i=2:5] recall index (i-1) using 4:6 with linespoints lw 1.5 pt 7 ps 0.6 lc rgb C[i] title T[i]
unset arrow 1
unset label 1

set title sprintf("best layer of each stack: planted tokens recalled exactly (cos ≥ %g);\nthe attention probe's query is built from k_p itself: recall by construction", exact)
unset logscale x
set format x '%g'
set xrange [0.4:5.6]
set yrange [0:1.2]
set ytics 0.2
set xlabel ''
set ylabel 'fraction of planted tokens recalled exactly'
set xtics ("attention only\n(0:1)" 1, "KDA:attention\n1:1" 2, "KDA:attention\n3:1" 3, "KDA:attention\n7:1" 4, "KDA only\n(1:0)" 5)
set grid noxtics
set style fill solid 0.7 border -1
set boxwidth 0.6
set bmargin 4
unset key
plot sample [i=1:5:1] '+' using (i):(R[i] / N[i]):(CI[int(i)]) with boxes lc rgb variable, \
     [i=1:5:1] '+' using (i):(R[i] / N[i] + 0.07):(sprintf("%d of %d\nto distance %d", R[int(i)], N[int(i)], D[int(i)])) with labels font ',10'
unset multiplot
