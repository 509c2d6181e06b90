# plots/05_hybrid_cache.gp — figures of experiments/05_hybrid_cache.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/05_hybrid_cache.gp
# Reads  dir/05_hybrid_cache.tsv         (one block per ratio: 0:1, 1:1, 3:1, 7:1, 1:0)
#        dir/05_hybrid_cache_recall.tsv  (the same block order)
# Writes dir/05_hybrid_cache.png         (cache bytes and ms per decoded token vs context)
#        dir/05_hybrid_cache_recall.png  (recall of a planted token vs distance)
if (!exists("dir")) dir = 'results'
data   = dir.'/05_hybrid_cache.tsv'
recall = dir.'/05_hybrid_cache_recall.tsv'

# The block order written by the experiment (RATIOS[] in experiments/05_hybrid_cache.c).
array T[5] = ['attention only (0:1)', 'KDA:attention 1:1', 'KDA:attention 3:1', \
              'KDA:attention 7:1', 'KDA only (1:0)']
array C[5] = ['#cc3311', '#ee7733', '#0077bb', '#33bbee', '#009988']

# The stack's shape, from the TSV header ("# parameters: L=8 d_model=64 H=1 d_head=64 ...").
shape = system(sprintf("sed -n 's/^# parameters: \\(L=[0-9]* d_model=[0-9]* H=[0-9]*\\).*/\\1/p' '%s' | head -1 | sed 's/_/\\\\_/g'", data))
realc = system(sprintf("sed -n 's/.*real-context=\\([0-9]*\\).*/\\1/p' '%s' | head -1", data))
exact = real(system(sprintf("sed -n 's/.*exact=\\([0-9.]*\\).*/\\1/p' '%s' | head -1", recall)))

set terminal pngcairo size 1500,620 enhanced font 'Sans,11'
set output dir.'/05_hybrid_cache.png'
set multiplot layout 1,2 title sprintf("Decode-time memory and cost of KDA + attention stacks (%s, float64, untrained random weights)", shape)

set logscale xy 2
set format x '2^{%L}'
set grid
set xlabel 'context length (tokens)'
set key top left box opaque
set title "cache bytes held (kdalab\\_hybrid\\_cache\\_bytes)"
set ylabel 'cache held (MiB)'
set format y '2^{%L}'
plot for [i=1:5] data index (i-1) using 4:($5/1048576.0) with linespoints lw 2 pt 7 ps 0.8 \
     lc rgb C[i] title T[i]

set title sprintf("time per decoded token (minimum over the decoded tokens)\nfilled symbols: real prefill; open: KV caches extended from a row pool (> %s tokens)", realc)
set ylabel 'ms per decoded token'
set format y '%g'
plot for [i=1:5] data index (i-1) using 4:8:(strcol(9) eq 'real' ? 7 : 6) \
     with linespoints lw 2 pt variable ps 1.0 lc rgb C[i] title T[i]
unset multiplot

# ---- recall of a planted token ----------------------------------------------------
reset
set terminal pngcairo size 1100,640 enhanced font 'Sans,11'
set output dir.'/05_hybrid_cache_recall.png'
set title sprintf("Recall of a planted token after n more tokens: best layer of each stack (%s)\nKDA: S^T k_p;  attention: a sharp query along k_p over the whole KV cache;  untrained random weights, true forward pass", shape)
set xlabel 'distance n (tokens written after the planted token)'
set ylabel 'cosine(read, v_p) of the best layer'
set logscale x 2
set format x '2^{%L}'
set yrange [0:1.05]
set grid
set key bottom left box opaque
set arrow from graph 0, first exact to graph 1, first exact nohead dt 2 lw 1.5 lc rgb 'gray30'
set label sprintf('exact (cos >= %g)', exact) at graph 0.99, first exact - 0.03 right tc rgb 'gray30'
set label 'the four stacks with an attention layer overlap at cos = 1' at graph 0.02, first 1.025 left font 'Sans,10'
plot for [i=1:5] recall index (i-1) using 4:5 with linespoints lw 2 dt i pt (4 + i) ps 0.9 \
     lc rgb C[i] title T[i]
