# plots/19_gating_by_task.gp — trained recall by mixer on tasks with and without forgetting.
# Run from the repository root:  gnuplot -e "dir='results'" plots/19_gating_by_task.gp
# Reads  DIR/19_gating_summary.tsv, DIR/19_gating_by_task.tsv (bin/19_gating_by_task;
#        the second only for its header: which sweep)
# Writes OUT/19_gating_by_task.png (OUT defaults to DIR): test accuracy (mean over seeds at
#        the best learning rate; error bars one standard deviation, cut at 0 and 1, when there
#        are several seeds) of each mixer, grouped by task, each labelled with its mean above its
#        error bar; the title says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/19_gating_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/19_gating_by_task.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/19_gating_by_task.tsv', f)))
set datafile separator '\t'
set terminal pngcairo size 1100,650 font ',11'
set output out.'/19_gating_by_task.png'
if (seeds > 1) {
    how = sprintf("mean over %d seeds at each mixer's best learning rate; bars: one sd, cut at 0 and 1", seeds)
} else {
    how = "one seed, so no error bars"
}
set title sprintf("When does gating pay? Trained two-block models (d = 16) on three recall tasks\nzoology: nothing to forget;  overwrite: keys bound again, the latest value asked;\nrecent: more pairs than the state holds, only the recent ones asked\n(%s)\n%s", how, note) noenhanced
set ylabel 'test accuracy on the answers'
set yrange [0:1.15]
set grid ytics
set key outside right top noenhanced box opaque
tasks = "zoology overwrite recent"
set xtics ('zoology' 0, 'overwrite' 1, 'recent' 2)
set xrange [-0.6:2.6]
names = "attention linear_attention deltanet gated_deltanet kda"
array label[5] = ['attention', 'linear attention', 'DeltaNet (no decay)', 'Gated DeltaNet (one decay per head)', 'KDA (one decay per channel)']
array color[5] = ['#000000', '#4477aa', '#228833', '#ee7733', '#cc3311']
# the mixers this sweep has, in the order above; each gets its slot in a task's group
present = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {seen[$2] = 1} END {n = split(\"%s\", m, \" \"); for (i = 1; i <= n; i++) if (m[i] in seen) printf \"%%d \", i}' '%s'", names, f))
nm = words(present)
w = 0.8 / nm
slot(j) = -0.4 + w * (j - 0.5)
task_x(t) = t eq 'zoology' ? 0 : (t eq 'overwrite' ? 1 : 2)
sel(m) = stringcolumn(2) eq m ? $5 : 1/0
clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
set style fill solid 0.8 border -1
set boxwidth w * 0.9 absolute
plot for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(sel(word(names, int(word(present, j))))) \
         with boxes lc rgb color[int(word(present, j))] title label[int(word(present, j))], \
     for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(seeds > 1 ? sel(word(names, int(word(present, j)))) : 1/0) \
         :(clip($5 - $6)):(clip($5 + $6)) with yerrorbars lc rgb '#333333' pt 0 notitle, \
     for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(sel(word(names, int(word(present, j)))) + (seeds > 1 ? clip($5 + $6) - $5 : 0)):(sprintf('%.2f', $5)) \
         with labels offset 0,0.7 font ',9' notitle
