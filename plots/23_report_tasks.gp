# plots/23_report_tasks.gp — the lineage on the Kimi Linear report's palindrome, stack and MQAR.
# Run from the repository root:  gnuplot -e "dir='results'" plots/23_report_tasks.gp
# Reads  DIR/23_report_summary.tsv, DIR/23_report_tasks.tsv (bin/23_report_tasks;
#        the second for its header, which sweep, and each seed's model)
# Writes OUT/23_report_tasks.png (OUT defaults to DIR): test accuracy (mean over seeds at
#        the best learning rate; error bars one standard deviation, cut at 0 and 1, and a dot
#        per seed at that rate, when there are several seeds) of each mixer, grouped by task
#        (the tasks the sweep ran); the title says which sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/23_report_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/23_report_tasks.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/23_report_tasks.tsv', f)))
set datafile separator '\t'
set terminal pngcairo size 1100,650 font ',11'
set output out.'/23_report_tasks.png'
if (seeds > 1) {
    how = sprintf("mean over %d seeds at each mixer's best learning rate; bars: one sd, cut at 0 and 1; dots: each seed", seeds)
} else {
    how = "one seed, so no error bars"
}
# the tasks this sweep has (--tasks runs a subset), in the order palindrome, stack, mqar;
# each gets a group on the x axis
tasks = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {seen[$1] = 1} END {n = split(\"palindrome stack mqar\", t, \" \"); for (i = 1; i <= n; i++) if (t[i] in seen) printf \"%%s \", t[i]}' '%s'", f))
nt = words(tasks)
desc(t) = t eq 'palindrome' ? 'palindrome: a string, then backwards' : \
          (t eq 'stack' ? 'stack: the value a pop returns' : "mqar: Zoology's MQAR at a longer T")
about = ''
do for [i=1:nt] { about = about . (i > 1 ? ';  ' : '') . desc(word(tasks, i)) }
set title sprintf("The Kimi Linear report's synthetic tasks, trained two-block models\n%s\n(%s)\n%s", about, how, note) noenhanced
set ylabel 'test accuracy on the scored tokens'
set yrange [0:1.1]
set grid ytics
set key outside right top noenhanced box opaque
set xtics ()
do for [i=1:nt] { set xtics add (word(tasks, i) i - 1) }
set xrange [-0.6:nt - 0.4]
names = "attention linear_attention deltanet gated_deltanet kda"
array label[5] = ['attention', 'linear attention', 'DeltaNet', 'Gated DeltaNet', 'KDA']
array color[5] = ['#000000', '#4477aa', '#228833', '#ee7733', '#cc3311']
# the mixers this sweep has, in the order above; each gets its slot in a task's group
present = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {seen[$3] = 1} END {n = split(\"%s\", m, \" \"); for (i = 1; i <= n; i++) if (m[i] in seen) printf \"%%d \", i}' '%s'", names, f))
nm = words(present)
w = 0.8 / nm
slot(j) = -0.4 + w * (j - 0.5)
task_x(t) = t eq word(tasks, 1) ? 0 : (t eq word(tasks, 2) ? 1 : 2)
sel(m) = stringcolumn(3) eq m ? $5 : 1/0
clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
# each seed's model at its mixer's best rate: task, mixer, accuracy (models: $1 mixer,
# $10 lr, $12 accuracy, $15 task; summary: $1 task, $3 mixer, $4 best lr)
seeds_at_best = sprintf("< awk -F'\t' 'FNR == 1 {file++} /^#/ || NF < 2 {next} file == 1 {best[$1 FS $3] = $4 + 0; next} ($15 FS $1) in best && $10 + 0 == best[$15 FS $1] {print $15 \"\\t\" $1 \"\\t\" $12}' '%s' '%s'", f, dir.'/23_report_tasks.tsv')
set style fill solid 0.8 border -1
set boxwidth w * 0.9 absolute
plot for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(sel(word(names, int(word(present, j))))) \
         with boxes lc rgb color[int(word(present, j))] title label[int(word(present, j))], \
     for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(seeds > 1 ? sel(word(names, int(word(present, j)))) : 1/0) \
         :(clip($5 - $6)):(clip($5 + $6)) with yerrorbars lc rgb '#333333' pt 0 notitle, \
     for [j=1:nm] seeds_at_best u (task_x(stringcolumn(1)) + slot(j)):(seeds > 1 && stringcolumn(2) eq word(names, int(word(present, j))) ? $3 : 1/0) \
         with points pt 7 ps 0.45 lc rgb '#222222' notitle, \
     for [j=1:nm] f u (task_x(stringcolumn(1)) + slot(j)):(sel(word(names, int(word(present, j))))):(sprintf('%.2f', $5)) \
         with labels offset 0,0.7 font ',9' notitle
