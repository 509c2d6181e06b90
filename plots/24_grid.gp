# plots/24_grid.gp — the grid as a factorial ablation: six mixers on MQAR, overwrite and recent.
# Run from the repository root:  gnuplot -e "dir='results'" plots/24_grid.gp
# Reads  DIR/24_grid_summary.tsv, DIR/24_grid.tsv (bin/24_grid;
#        the second only for its header: which sweep)
# Writes OUT/24_grid.png (OUT defaults to DIR): test accuracy (mean over seeds at
#        the best learning rate; error bars one standard deviation, cut at 0 and 1, when there
#        are several seeds) of each mixer, grouped by task, the mixers in the grid's order
#        (no delta rule: linear attention, simple GLA, GLA; the delta rule: DeltaNet,
#        Gated DeltaNet, KDA); the title says which sweep, and a task with no
#        models in it (--tasks) is labelled so.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/24_grid_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/24_grid.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/24_grid.tsv', f)))
set datafile separator '\t'
set terminal pngcairo size 1100,650 font ',11'
set output out.'/24_grid.png'
if (seeds > 1) {
    how = sprintf("mean over %d seeds at each mixer's best learning rate; bars: one sd, cut at 0 and 1", seeds)
} else {
    how = "one seed, so no error bars"
}
set title sprintf("The grid as a factorial ablation: two-block models of each mechanism\nzoology: Zoology's MQAR;  overwrite: keys bound again;  recent: more pairs than the state holds, the last few asked\n(%s)\n%s", how, note) noenhanced
set ylabel 'test accuracy on the scored tokens'
set yrange [0:1.1]
set grid ytics
set key outside right top noenhanced box opaque
# a task the summary has no row of (a sweep run or tabulated with --tasks) says so
has(t) = int(system(sprintf("awk -F'\t' '!/^#/ && $1 == \"%s\" {n++} END {print n + 0}' '%s'", t, f)))
tic(t) = has(t) ? t : t.' (not in this sweep)'
set xtics (tic('zoology') 0, tic('overwrite') 1, tic('recent') 2) noenhanced
set xrange [-0.6:2.6]
names = "linear_attention simple_gla gla deltanet gated_deltanet kda"
array label[6] = ['linear attention', 'simple GLA', 'GLA', 'DeltaNet', 'Gated DeltaNet', 'KDA']
array color[6] = ['#4477aa', '#66ccee', '#aa3377', '#228833', '#ee7733', '#cc3311']
# the mixers this sweep has, in the order above; each gets its slot in a task's group
present = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {seen[$3] = 1} END {n = split(\"%s\", m, \" \"); for (i = 1; i <= n; i++) if (m[i] in seen) printf \"%%d \", i}' '%s'", names, f))
nm = words(present)
w = 0.8 / nm
slot(j) = -0.4 + w * (j - 0.5)
task_x(t) = t eq 'zoology' ? 0 : (t eq 'overwrite' ? 1 : 2)
sel(m) = stringcolumn(3) eq m ? $5 : 1/0
clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
set style fill solid 0.8 border -1
set boxwidth w * 0.9 absolute
plot for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(sel(word(names, int(word(present, j))))) \
         with boxes lc rgb color[int(word(present, j))] title label[int(word(present, j))], \
     for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(seeds > 1 ? sel(word(names, int(word(present, j)))) : 1/0) \
         :(clip($5 - $6)):(clip($5 + $6)) with yerrorbars lc rgb '#333333' pt 0 notitle, \
     for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(sel(word(names, int(word(present, j))))):(sprintf('%.2f', $5)) \
         with labels offset 0,0.7 font ',9' notitle
