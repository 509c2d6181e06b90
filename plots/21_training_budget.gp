# plots/21_training_budget.gp — trained recall against the training budget.
# Run from the repository root:  gnuplot -e "dir='results'" plots/21_training_budget.gp
# Reads  DIR/21_budget_summary.tsv, DIR/21_training_budget.tsv (bin/21_training_budget;
#        the second only for its header: which sweep)
# Writes OUT/21_training_budget.png (OUT defaults to DIR), one column per task:
#        top     test accuracy (mean over seeds; error bars one sd, cut at 0 and 1, when there
#                are several seeds) against the training budget, one line per (mixer, head
#                dimension d), each series drawn a little apart at a budget so no bar hides
#                another
#        bottom  steps to 95 % in the largest budget's runs (mean over the seeds that reached
#                it, labelled with how many did), per d and mixer
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/21_budget_summary.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/21_training_budget.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/21_training_budget.tsv', f)))
tasks = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 && !($1 in s) {s[$1] = 1; printf \"%%s \", $1}' '%s'", f))
budgets = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {print $4}' '%s' | sort -n | uniq | tr '\\n' ' '", f))
ds = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {print $2}' '%s' | sort -n | uniq | tr '\\n' ' '", f))
nt = words(tasks)
set datafile separator '\t'
stats f u 4 nooutput
bmin = STATS_min
bmax = STATS_max
set terminal pngcairo size 650 * nt + 330, 1050 font ',11'
set output out.'/21_training_budget.png'
how = seeds > 1 ? sprintf("mean over %d seeds; bars: one sd, cut at 0 and 1", seeds) : "one seed, so no error bars"
# the width from the summary's parameters line ("D=64"; 32 where a sweep predates it)
width = system(sprintf("awk '/^# parameters:/ {for (i = 1; i <= NF; i++) if ($i ~ /^D=/) {print substr($i, 3); exit}}' '%s'", f))
width = width eq '' ? '32' : width
set multiplot layout 2, nt title sprintf("Trained two-block models (D = %s): test accuracy against the training budget, each budget a run of its own\n(%s)\n%s", width, how, note) noenhanced
set logscale x
set xrange [bmin / 1.4 : bmax * 1.4]
set xtics ()
do for [b in budgets] { set xtics add (b real(b)) }
set yrange [0:1.05]
set grid
set xlabel 'optimiser steps (log scale)'
set ylabel 'test accuracy on the answers'
names = "deltanet gated_deltanet kda"
array label[3] = ['DeltaNet', 'Gated DeltaNet', 'KDA']
array color[3] = ['#228833', '#ee7733', '#cc3311']
sel(t, d, m) = (stringcolumn(1) eq t && $2 == d && stringcolumn(3) eq m) ? $5 : 1/0
clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
# the mixers this sweep has (the reduced one has no Gated DeltaNet)
present = system(sprintf("awk -F'\t' '!/^#/ && NF > 1 {seen[$3] = 1} END {n = split(\"%s\", m, \" \"); for (i = 1; i <= n; i++) if (m[i] in seen) printf \"%%d \", i}' '%s'", names, f))
np = words(present)
# each (mixer, d) series drawn a little apart at a budget (x times a factor), centred on the budget
nser = np * words(ds)
dodge(j, dj) = 1.07 ** (((j - 1) * words(ds) + dj) - (nser + 1) / 2.0)
do for [ti = 1:nt] {
    t = word(tasks, ti)
    set title sprintf('task: %s', t) noenhanced
    if (ti == nt) { set key outside right top noenhanced box opaque } else { unset key }
    if (seeds > 1) {
        plot for [j = 1:np] for [dj = 1:words(ds)] \
             f u ($4 * dodge(j, dj)):(sel(t, real(word(ds, dj)), word(names, int(word(present, j))))):(clip($5 - $6)):(clip($5 + $6)) \
             with yerrorlines lw 2 dt dj pt 7 lc rgb color[int(word(present, j))] \
             title sprintf('%s, d = %s', label[int(word(present, j))], word(ds, dj))
    } else {
        plot for [j = 1:np] for [dj = 1:words(ds)] \
             f u ($4 * dodge(j, dj)):(sel(t, real(word(ds, dj)), word(names, int(word(present, j))))) \
             with linespoints lw 2 dt dj pt 7 lc rgb color[int(word(present, j))] \
             title sprintf('%s, d = %s', label[int(word(present, j))], word(ds, dj))
    }
}
# ---- steps to 95 % in the largest budget's runs ---------------------------------------------
unset logscale x
set xrange [0.4:words(ds) + 0.6]
set xtics ()
do for [dj = 1:words(ds)] { set xtics add (sprintf('d = %s', word(ds, dj)) dj) }
set xlabel 'head dimension'
set ylabel sprintf('steps to 95 %% in the %d-step runs', bmax)
set yrange [0:bmax * 1.15]
set ytics auto
set style fill solid 0.75 border -1
bw = 0.8 / np
set boxwidth bw * 0.9
slot(j) = (j - (np + 1) / 2.0) * bw
top(t, d, m) = (stringcolumn(1) eq t && $2 == d && stringcolumn(3) eq m && $4 == bmax) ? 1 : 0
do for [ti = 1:nt] {
    t = word(tasks, ti)
    set title sprintf('task: %s — steps to 95 %% (mean over the seeds that got there; how many did)', t) noenhanced
    if (ti == nt) { set key outside right top noenhanced box opaque } else { unset key }
    plot for [j = 1:np] for [dj = 1:words(ds)] \
             f u (dj + slot(j)):(top(t, real(word(ds, dj)), word(names, int(word(present, j)))) && $7 > 0 ? $7 : 1/0) \
             w boxes lc rgb color[int(word(present, j))] title (dj == 1 ? label[int(word(present, j))] : ''), \
         for [j = 1:np] for [dj = 1:words(ds)] \
             f u (dj + slot(j)):(top(t, real(word(ds, dj)), word(names, int(word(present, j)))) ? ($7 > 0 ? $7 : 0) + bmax * 0.03 : 1/0) \
               :($7 > 0 ? sprintf('%d\n(%d of %d)', $7, $8, $9) : sprintf('none\n(0 of %d)', $9)) \
             w labels offset 0,0.9 font ',10' notitle
}
unset multiplot
