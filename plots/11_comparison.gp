# plots/11_comparison.gp — the chapter's comparison table, column by column, measured.
# Run from the repository root:  gnuplot -e "dir='results'" plots/11_comparison.gp
# Reads  DIR/11_comparison_{bytes,fact,clear,timescales}.tsv (bin/11_comparison)
# Writes DIR/11_comparison.png, four panels:
#   top left      state per layer (= bytes read per token) against context N
#   top right     targeting one fact: errors after a rank-one overwrite
#   bottom left   bulk clearing: facts still recalled after one clearing step
#   bottom right  timescales: the measured half-life of every key channel
if (!exists("dir")) dir = 'results'
fb = dir.'/11_comparison_bytes.tsv'
ff = dir.'/11_comparison_fact.tsv'
fc = dir.'/11_comparison_clear.tsv'
ft = dir.'/11_comparison_timescales.tsv'
set datafile separator '\t'
set datafile missing 'nan'

stats fb u 1 nooutput
NMIN = STATS_min
NMAX = STATS_max
stats ft u 3 nooutput
K = int(STATS_max)
stats fc u ($5) nooutput
# the rows of the mechanism table in its order, then softmax attention (the TSVs' order)
array lbl[7] = ["linear\nattention", "DeltaNet", "Gated\nDeltaNet", "KDA", "simple\nGLA", "GLA", "softmax\nattention"]
array mcol[7] = ['#999999', '#0072b2', '#009e73', '#d55e00', '#56b4e9', '#e69f00', '#000000']

set terminal pngcairo size 1600,1150 enhanced font 'Sans,11'
set output dir.'/11_comparison.png'
set multiplot layout 2,2 title "11 comparison — the chapter's table measured, column by column (decode step kdalab\\_step\\_f64, KV cache kdalab\\_kv\\_cache)" font ',13'
set grid lc rgb '#dddddd'

# ---- state per layer / read per token ----------------------------------------------------------
set title "state per layer = bytes read per token (H = 32 heads, d = 128, bf16)\nthe recurrent states are constant; the KV cache grows with N"
set logscale xy 2
set xrange [NMIN / 1.3 : NMAX * 1.3]
set xtics ('1K' 1024, '2K' 2048, '4K' 4096, '8K' 8192, '16K' 16384, '32K' 32768, '64K' 65536)
set format y '%.0b %BB'
set xlabel 'context length N (tokens)'
set ylabel 'bytes per layer (binary prefixes)'
set yrange [2**19:2**31]
set key top left font ',10' box opaque
plot \
  fb u 1:2 w lp lw 3 pt 7 lc rgb '#000000' t 'softmax attention: 2 H d N', \
  fb u 1:4 w lp lw 2 pt 5 lc rgb '#cc79a7' t 'KDA + attention 3:1, per layer: (3 H d^2 + 2 H d N) / 4', \
  fb u 1:3 w lp lw 3 pt 9 lc rgb '#d55e00' t 'every linear mechanism (linear attention … KDA, simple GLA, GLA): H d^2'
unset logscale
set format y '%g'
set xtics auto
set xrange [*:*]
set yrange [*:*]

# ---- target one fact --------------------------------------------------------------------------------
set title "target one fact: write k_1→v_1, k_2→v_2, overwrite k_1→v_1' (orthonormal keys)\nerror of the overwritten fact and of the other one (10^{-17}: below the axis)"
set style fill solid 0.8 border -1
set boxwidth 0.38
set logscale y
set format y '10^{%L}'
set yrange [1e-17:10]
set xrange [-0.75:6.75]
set xlabel ''
set ylabel 'distance of the read from the wanted value'
set key top center font ',10' box opaque
plot \
  ff index 0 u ($0 - 0.2):($3 > 1e-17 ? $3 : 1.1e-17):xtic(lbl[int($0) + 1]) w boxes lc rgb '#d62728' t "k_1 reads v_1'? (|read - v_1'|)", \
  ff index 0 u ($0 + 0.2):($4 > 1e-17 ? $4 : 1.1e-17) w boxes lc rgb '#1f77b4' t 'k_2 still reads v_2? (|read - v_2|)'

# ---- bulk clear ------------------------------------------------------------------------------------------
set title sprintf("bulk clear: %d facts (key e_c), then ONE clearing step (GDN, simple GLA: {/Symbol a} = e^{-50};\nKDA, GLA: channels 1..%d only; DeltaNet / linear attn.: their best rank-one step)", K, K / 2)
unset logscale y
set format y '%g'
set yrange [0:1.32]
set ytics 0, 0.2, 1
set xrange [-0.6:5.6]
set ylabel 'fraction of facts still recalled (cos > 0.99)'
set bmargin 6
set xtics font ',10'
# a value label above every bar, so a bar of height 0 still reads "0"; above each pair, in its
# own row, how many steps clearing everything takes (the table's "can bulk-clear")
set key at first 2.0, first 0.6 center center box opaque
plot \
  fc u ($0 - 0.2):($3 / (K / 2.0)):xtic(lbl[int($0) + 1]) w boxes lc rgb '#d62728' t sprintf('channels 1..%d', K / 2), \
  fc u ($0):(1.18):(sprintf("%d step%s\nto clear all", int($5), int($5) == 1 ? '' : 's')) w labels font ',11:Bold' notitle, \
  fc u ($0 + 0.2):($4 / (K / 2.0)) w boxes lc rgb '#1f77b4' t sprintf('channels %d..%d', K / 2 + 1, K), \
  fc u ($0 - 0.2):($3 / (K / 2.0)):(sprintf('%.2g', $3 / (K / 2.0))) w labels offset 0,0.7 font ',9' tc rgb '#d62728' notitle, \
  fc u ($0 + 0.2):($4 / (K / 2.0)):(sprintf('%.2g', $4 / (K / 2.0))) w labels offset 0,0.7 font ',9' tc rgb '#1f77b4' notitle
set xtics font ''
set ytics auto

# ---- timescales ----------------------------------------------------------------------------------------------
set title sprintf("timescales: the measured half-life of each of the %d key channels (no decay:\ndrawn at the top; softmax attn.: a planted token keeps its weight at any distance)", K)
set bmargin
set style fill empty
set logscale y
set format y '10^{%L}'
set yrange [1:3e5]
set xrange [0:K + 1]
set xtics auto
set xlabel 'key channel c'
set ylabel 'half-life, tokens'
set key default
set key bottom right font ',10' box opaque
plot \
  ft u 3:(int($1) == 3 ? $4 : 1/0) w lp lw 2 pt 7 ps 0.5 lc rgb mcol[4] t 'KDA: one half-life per channel', \
  ft u 3:(int($1) == 5 ? $4 * 1.15 : 1/0) w l lw 2 dt 2 lc rgb mcol[6] t 'GLA: the same (drawn ×1.15 to show it)', \
  ft u 3:(int($1) == 4 ? $4 * 1.15 : 1/0) w l lw 2 dt 2 lc rgb mcol[5] t 'simple GLA: one, shared (×1.15)', \
  ft u 3:(int($1) == 2 ? $4 : 1/0) w l lw 3 lc rgb mcol[3] t 'Gated DeltaNet: one, shared (its gate varies per step)', \
  ft u 3:(int($1) == 1 && $4 > 1e300 ? 1.5e5 : 1/0) w l lw 3 dt 2 lc rgb mcol[2] t 'DeltaNet: none (no decay)', \
  ft u 3:(int($1) == 0 && $4 > 1e300 ? 1.1e5 : 1/0) w l lw 3 dt 3 lc rgb mcol[1] t 'linear attention: none (no decay)'
unset multiplot
