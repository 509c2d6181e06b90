# plots/12_latent_cache.gp — the next bill: what the surviving attention layers cache.
# Run from the repository root:  gnuplot -e "dir='results'" plots/12_latent_cache.gp
# Reads  DIR/12_latent_cache.tsv, DIR/12_latent_cache_model.tsv, DIR/12_latent_cache_check.tsv
#        (bin/12_latent_cache)
# Writes DIR/12_latent_cache.png, two panels:
#   left   bytes cached per token, whole model, for the four models
#   right  total decode-time memory against context N, with the KDA states' fixed part and
#          the Kimi Linear layout's latent cache alone, whose crossing with the fixed part
#          (N = fixed bytes / latent bytes per token) is marked
if (!exists("dir")) dir = 'results'
f  = dir.'/12_latent_cache.tsv'
fm = dir.'/12_latent_cache_model.tsv'
fc = dir.'/12_latent_cache_check.tsv'
set datafile separator '\t'

stats fc u 7 nooutput
ERR = STATS_max
stats fm u (strcol(1) eq 'hybrid_latent' ? $6 : 1/0) nooutput
FIXED = STATS_max
stats fm u (strcol(1) eq 'hybrid_latent' ? $5 : 1/0) nooutput
PERTOK = STATS_max
CROSS = FIXED / PERTOK
stats f u 2 nooutput
NMIN = STATS_min
NMAX = STATS_max
array mname[4] = ['attention_full', 'attention_latent', 'hybrid_full', 'hybrid_latent']
array mtitle[4] = ['attention only, full KV (2 H d_h)', 'attention only, latent (MLA: d_c + d_{rope})', 'hybrid 20 KDA : 7 attention, full KV', 'hybrid 20 KDA : 7 attention, latent (Kimi Linear)']
array mcol[4] = ['#000000', '#7f7f7f', '#d62728', '#1f77b4']

set terminal pngcairo size 1600,700 enhanced font 'Sans,11'
set output dir.'/12_latent_cache.png'
set multiplot layout 1,2 title sprintf("12 latent cache — Kimi-Linear-like sizes: 27 layers (7 attention), H = 32, d_h = 128, d_c = 512, d_{rope} = 64, bf16 cache, fp32 KDA state\n(sizes computed; a latent cache attends exactly as the expanded one: measured difference %.0e)", ERR) font ',12'
set grid lc rgb '#dddddd'

# ---- per token ---------------------------------------------------------------------------------
set title "bytes cached per token (whole model)"
set style fill solid 0.8 border -1
set boxwidth 0.6
set xrange [-0.6:3.6]
set yrange [0:520000]
set ylabel 'bytes per token'
set format y '%.0f'
# the hybrid is the experiment's default stack: 27 layers, 7 of them attention, 20 KDA (about 3:1)
set xtics ("attention only\nfull KV" 0, "attention only\nlatent (MLA)" 1, "hybrid\n20 KDA : 7 attn.\nfull KV" 2, "hybrid\n20 KDA : 7 attn.\nlatent (Kimi Linear)" 3)
set bmargin 6
plot \
  for [i = 1:4] fm u (i - 1):5 every ::(i - 1)::(i - 1) w boxes lc rgb mcol[i] notitle, \
  fm u 0:($5 + 30000):(sprintf("%.0f B\n(%.1f%% of attention only)", $5, 100 * $7)) w labels font ',10' notitle
set style fill empty
set xtics auto

# ---- total against context ------------------------------------------------------------------------
set title sprintf("total decode-time memory (cache + KDA states)\nthe 20 KDA states (%.1f MiB) equal the latent cache at N = %.0f", FIXED / 1048576.0, CROSS)
set logscale xy 2
set xrange [NMIN / 1.4 : NMAX * 1.4]
set xtics ('4K' 4096, '16K' 16384, '64K' 65536, '256K' 262144, '1M' 1048576)
set yrange [2**24:2**40]
set format y '%.0b %BB'
set xlabel 'context length N (tokens)'
set ylabel 'bytes (binary prefixes)'
set key top left font ',10' box opaque
set arrow 1 from CROSS, graph 0 to CROSS, graph 1 nohead dt 3 lc rgb '#1f77b4'
set label 1 sprintf("N = %.0f: the latent cache alone\nequals the KDA states", CROSS) at CROSS, FIXED / 2.2 left offset 0.8,0 font ',10' tc rgb '#1f77b4' front
plot \
  for [i = 1:4] f u 2:(strcol(1) eq mname[i] ? $5 : 1/0) w lp lw 2.5 pt 7 ps 0.7 lc rgb mcol[i] t mtitle[i], \
  f u 2:(strcol(1) eq 'hybrid_latent' ? $3 : 1/0) w l lw 2 dt 4 lc rgb '#1f77b4' t 'hybrid, latent: the cache alone (without the states)', \
  FIXED w l lw 2 dt 2 lc rgb '#2ca02c' t 'the 20 KDA layers fixed states + conv windows', \
  '+' u (CROSS):(FIXED) every ::0::0 w p pt 6 ps 2.5 lw 2.5 lc rgb '#1f77b4' notitle
unset label 1
unset arrow 1
unset multiplot
