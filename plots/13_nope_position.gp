# plots/13_nope_position.gp — how much position a probe recovers from each layer's output.
# Run from the repository root:  gnuplot -e "dir='results'" plots/13_nope_position.gp
# Reads  DIR/13_nope_position.tsv (bin/13_nope_position)
# Writes DIR/13_nope_position.png: held-out R^2 of a ridge probe predicting t/T, per
#        probed layer, for a linear probe and one that also sees the squared output.
if (!exists("dir")) dir = 'results'
f = dir.'/13_nope_position.tsv'
set datafile separator '\t'
set terminal pngcairo size 900,560 font ',11'
set output dir.'/13_nope_position.png'
# The sizes and the seed, from the TSV's header (the experiment's flags).
pv(k) = system(sprintf("sed -n 's/^# parameters:.*[ ]%s=\\([^ ]*\\).*/\\1/p' '%s' | head -1", k, f))
seed = system(sprintf("sed -n 's/^# seed: *//p' '%s' | head -1", f))
set title sprintf("Position recoverable from a layer's output (tokens carry none; untrained layers)\nNoPE attention leaks almost none; a KDA layer carries it, and passes it to attention after it\nT = %s tokens, d = %s, %s heads, %s token embeddings; ridge probe fitted on %s sequences, scored on %s others; seed %s", \
    pv('T'), pv('d'), pv('H'), pv('vocab'), pv('train'), pv('test'), seed) font ',10'
set ylabel 'held-out R^2 of a probe for t / T'
set yrange [-0.1:1]
set grid ytics
set style fill solid 0.8 border -1
set boxwidth 0.38
set key top left
set xrange [-0.6:3.6]
set xtics ("input embeddings" 0, "NoPE attention" 1, "KDA layer" 2, "attention after KDA" 3)
# a value that rounds to zero is printed 0.00, never -0.00
r2(v) = abs(v) < 0.005 ? 0 : v
idx(s) = s eq 'embeddings' ? 0 : s eq 'nope_attention' ? 1 : s eq 'kda' ? 2 : 3
plot f u (stringcolumn(2) eq 'linear' ? idx(stringcolumn(1)) - 0.2 : 1/0):3 with boxes \
       title 'linear probe (the output)' lc rgb '#4477aa', \
     f u (stringcolumn(2) eq 'quadratic' ? idx(stringcolumn(1)) + 0.2 : 1/0):3 with boxes \
       title 'quadratic probe (the output and its squares)' lc rgb '#ee6677', \
     f u (idx(stringcolumn(1)) + (stringcolumn(2) eq 'linear' ? -0.2 : 0.2)):($3 > 0 ? $3 + 0.03 : 0.03):(sprintf('%.2f', r2(column(3)))) \
       with labels notitle
