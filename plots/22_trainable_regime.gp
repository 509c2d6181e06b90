# plots/22_trainable_regime.gp — where Gated DeltaNet and KDA train: trained recall against scale.
# Run from the repository root:  gnuplot -e "dir='results'" plots/22_trainable_regime.gp
# Reads  DIR/22_regime_summary.tsv, DIR/22_trainable_regime.tsv (bin/22_trainable_regime;
#        the second only for its header: which sweep)
# Writes OUT/22_trainable_regime.png (OUT defaults to DIR): one panel per task (Zoology's MQAR,
#        overwrite); along x the sweep's points d:T:steps, cheapest first; per point the mean test
#        accuracy of each mixer at its best rate (bars one sd, cut at 0 and 1, when there are
#        several seeds), labelled with the seeds that reached 0.9 of all seeds; a line at 0.9.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/22_regime_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/22_trainable_regime.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/22_trainable_regime.tsv', f)))
# the points in the order the summary lists them (cheapest first), and the tasks
pts = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 && !($1 in s) {s[$1] = 1; printf \"%%s \", $1}' '%s'", f))
tasks = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 && !($5 in s) {s[$5] = 1; printf \"%%s \", $5}' '%s'", f))
np = words(pts)
nt = words(tasks)
set datafile separator '\t'
set terminal pngcairo size 500 + 150 * np * nt, 600 font ',11'
set output out.'/22_trainable_regime.png'
how = seeds > 1 ? sprintf("mean over %d seeds at each mixer's best learning rate; bars: one sd; labels: seeds at 0.9 or more", seeds) : "one seed, so no error bars; labels: seeds at 0.9 or more"
set multiplot layout 1, nt title sprintf("Where do the gated delta-rule mixers train? Two blocks, H = 2, D = 2d, P = T/8 pairs\n(%s)\n%s", how, note) noenhanced
set yrange [0:1.15]
set grid ytics
set xrange [-0.6:np - 0.4]
set xtics () rotate by -30
do for [i = 1:np] { set xtics add (word(pts, i) i - 1) }
set xlabel 'd : T : steps (cheapest first)'
set ylabel 'test accuracy on the answers'
idx(p) = sum [i = 1:np] (word(pts, i) eq p ? i - 1 : 0)
names = "gated_deltanet kda"
array label[2] = ['Gated DeltaNet', 'KDA']
array color[2] = ['#ee7733', '#cc3311']
w = 0.35
sel(t, m) = (stringcolumn(5) eq t && stringcolumn(6) eq m) ? $8 : 1/0
clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
set style fill solid 0.8 border -1
set boxwidth w * 0.9 absolute
do for [ti = 1:nt] {
    t = word(tasks, ti)
    set title sprintf('task: %s', t) noenhanced
    if (ti == nt) { set key outside right top noenhanced box opaque } else { unset key }
    plot for [j = 1:2] f u (idx(stringcolumn(1)) + (j - 1.5) * w):(sel(t, word(names, j))) \
             with boxes lc rgb color[j] title label[j], \
         for [j = 1:2] f u (idx(stringcolumn(1)) + (j - 1.5) * w):(seeds > 1 ? sel(t, word(names, j)) : 1/0) \
             :(clip($8 - $9)):(clip($8 + $9)) with yerrorbars lc rgb '#333333' pt 0 notitle, \
         for [j = 1:2] f u (idx(stringcolumn(1)) + (j - 1.5) * w):(sel(t, word(names, j))):(sprintf('%d/%d', $10, $12)) \
             with labels offset 0,0.7 font ',9' notitle, \
         0.9 with lines dt 2 lc rgb '#777777' title '0.9'
}
unset multiplot
