# plots/04_recall_capacity.gp — figure of experiments/04_recall_capacity.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/04_recall_capacity.gp
# Reads  dir/04_recall_capacity.tsv: blocks (two blank lines apart) in the order
#        keys = random, orthonormal; mechanism = linear attention, DeltaNet,
#        Gated DeltaNet, KDA, least squares, softmax attention, simple GLA, GLA
#        ->  index = 8*keys + mechanism
#        columns: 1 keys 2 mechanism 3 N 4 N_over_K 5 acc 6 acc_sd 7 cos 8 cos_sd 9 recalled
#                 10 acc_min 11 rec_cos 12 rec_exact 13 hit_cos 14 hit_cos_min
# Writes dir/04_recall_capacity.png: random keys decoded by the nearest stored value (top left),
#        their mean cosine (top right), the count recalled at cosine >= cos_exact (bottom left),
#        and orthonormal keys at N = K (bottom right)
if (!exists("dir")) dir = 'results'
data = dir.'/04_recall_capacity.tsv'
set datafile separator '\t'
names = "'linear attention' 'DeltaNet' 'Gated DeltaNet' 'KDA' 'least squares (best K×V state)' 'softmax attention (cache grows)' 'simple GLA (no delta rule)' 'GLA (no delta rule)'"
array col[8] = ['#999999', '#0072b2', '#009e73', '#d55e00', '#cc79a7', '#000000', '#56b4e9', '#e69f00']
array pts[8] = [4, 5, 7, 9, 11, 3, 6, 8]
# the curves of the first two panels, back to front (the grid's cells without the delta rule dashed)
order = "5 4 7 6 3 2 1 0"
dash(m) = m >= 6 ? 2 : 1
param(name) = real(system(sprintf("sed -n 's/^# parameters: .*%s=\\([0-9.]*\\).*/\\1/p' '%s' | head -1", name, data)))
K = int(param('K=V'))
cexact = param('cos_exact')
# Over the random-key rows of the three delta-rule states: the cosines of their nearest-value hits
# past N = d (lowest mean, highest mean, lowest single), and the most pairs they recall exactly.
awkprog = '!/^#/ && $1 == "random" && ($2 == "deltanet" || $2 == "gated_deltanet" || $2 == "kda") && $4 > lo { v = $c; if (n++ == 0 || (op == "min" ? v < m : v > m)) m = v } END { print m + 0 }'
dr(c, op, lo) = real(system(sprintf("awk -F'\t' -v c=%d -v op=%s -v lo=%g '%s' '%s'", c, op, lo, awkprog, data)))
hit_lo   = dr(13, 'min', 1)
hit_hi   = dr(13, 'max', 1)
hit_min  = dr(14, 'min', 1)
dr_exact = dr(12, 'max', 0)

set terminal pngcairo size 1400,1050 enhanced font 'Sans,11'
set output dir.'/04_recall_capacity.png'
# the number of seeds, from the TSV's parameters (seeds=N)
nseeds = system(sprintf("sed -n 's/^# parameters:.*[ ]seeds=\\([0-9]*\\).*/\\1/p' '%s' | head -1", data))
set multiplot layout 2,2 title sprintf("How many key→value pairs one K × V state holds (K = V = d = %d): write N pairs, query every key, compare the recall with the right value\nmean over %s seeds (error bars: sd); least squares: the state that fits all N pairs best, solved directly", K, strlen(nseeds) > 0 ? nseeds : "the") font ',12'
set grid
set xlabel 'N / d  (pairs written per key dimension)'
set xrange [0:4.1]
set arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 2 lc rgb 'gray40'
set label 1 'N = d' at 0.97, graph 0.3 right tc rgb 'gray40' font ',9'

# ---- top left: the lenient count ------------------------------------------------------
set title sprintf("random unit keys, decoded by the nearest stored value: a lenient count\n(past N = d the delta-rule hits have cosine %.2f–%.2f on average, some %.2f)", hit_lo, hit_hi, hit_min)
set ylabel 'fraction decoded to the right value'
set yrange [0:1.05]
set key bottom left box opaque font ',10'
plot for [i=1:8] data index (m = int(word(order, i))) using 4:5:6 with yerrorlines lw 2 dt dash(m) pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)

# ---- top right: the mean cosine -------------------------------------------------------
set title "random unit keys: how close the recall is to the right value\n(the recurrent states fall below 0.9 well before N = d: crosstalk)"
set ylabel 'mean cosine(recall, right value)'
set arrow 2 from graph 0, first cexact to graph 1, first cexact nohead dt 3 lc rgb 'gray20'
set label 2 sprintf('exact: cos ≥ %g', cexact) at graph 0.98, first cexact - 0.035 right tc rgb 'gray20' font ',9'
set key bottom left box opaque font ',10'
plot for [i=1:8] data index (m = int(word(order, i))) using 4:7:8 with yerrorlines lw 2 dt dash(m) pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)
unset arrow 2
unset label 2

# ---- bottom left: the strict count ----------------------------------------------------
set title sprintf("random unit keys, pairs recalled exactly (cosine ≥ %g): least squares holds exactly d\nand nothing past it; the one-pass delta-rule write holds at most %.1f pairs (%.2f d)", cexact, dr_exact, dr_exact / K)
set ylabel sprintf('pairs recalled at cosine ≥ %g  (in units of d)', cexact)
set yrange [-0.06:1.3]   # below 0: points at zero stay clear of the axis
set arrow 3 from 0, 0 to 1.3, 1.3 nohead dt 4 lw 1.5 lc rgb 'gray50'
set label 3 "every pair (N / d):\nsoftmax attention, whose\ncache grows with N,\nstays on it (off the top)" at 1.32, 1.2 left tc rgb 'gray30' font ',9'
set label 4 sprintf('DeltaNet, Gated DeltaNet, KDA: at most %.1f pairs at any N', dr_exact) at 1.6, 0.09 left tc rgb '#0072b2' font ',9'
set key at graph 0.98, graph 0.7 right top box opaque font ',10'
plot for [i=2:8] data index (m = int(word(order, i))) using 4:($12 / K) with linespoints lw 2 dt dash(m) pt pts[m+1] ps 1 lc rgb col[m+1] title word(names, m+1)
unset arrow 3
unset label 3
unset label 4

# ---- bottom right: orthonormal keys ---------------------------------------------------
unset arrow 1
unset label 1
set title "orthonormal keys, N = d: no crosstalk, every mechanism recalls every pair\n(a per-channel decay, KDA's and GLA's, not diagonal in the key basis, costs a little)"
set ylabel 'mean cosine(recall, right value) at N = d'
set xlabel ''
set xrange [-0.6:7.6]
set yrange [0:1.15]
set xtics ("linear\nattention" 0, "DeltaNet" 1, "Gated\nDeltaNet" 2, "KDA" 3, "least\nsquares" 4, "softmax\nattention" 5, "simple\nGLA" 6, "GLA" 7) font ',10'
set style fill solid 0.7 border -1
set boxwidth 0.6
unset key
set grid noxtics
set bmargin 4
plot for [m=0:7] data index (8+m) using (m):($4 == 1 ? $7 : NaN) with boxes lc rgb col[m+1], \
     for [m=0:7] data index (8+m) using (m):($4 == 1 ? $7 + 0.04 : NaN):(sprintf('%.4f', $7)) with labels font ',9'
unset multiplot
