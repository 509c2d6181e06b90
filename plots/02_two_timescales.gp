# plots/02_two_timescales.gp — figure of experiments/02_two_timescales.c
# Run from the repository root:  gnuplot -e "dir='results'" plots/02_two_timescales.gp
# Reads  dir/02_two_timescales.tsv (scalar-alpha sweep), dir/02_two_timescales_kda.tsv (KDA row first)
# Writes dir/02_two_timescales.png
if (!exists("dir")) dir = 'results'
sweep = dir.'/02_two_timescales.tsv'
kda   = dir.'/02_two_timescales_kda.tsv'

set terminal pngcairo size 1000,660 enhanced font 'Sans,11'
set output dir.'/02_two_timescales.png'

stats kda using 2 every ::0::0 nooutput
a_slow = STATS_max
stats kda using 3 every ::0::0 nooutput
a_fast = STATS_max

set title "Two facts in one head: recall error at the end of the sequence (mean ± sd over seeds)\nGated DeltaNet with one scalar decay α for every channel, against KDA (both facts at once, one run)\ndefaults: K = V = 16, T = 512 tokens, rewrite every 4 tokens, rewrite-key noise σ = 0.3, 50 seeds"
set xlabel '1 − α  (log scale; α grows to the right; half-life ln2/(1−α) tokens roughly)'
set ylabel 'relative recall error |S^T k − v| / |v|'
set logscale xy
set xrange [0.13:7e-5]
set yrange [0.01:2]
set format x '%g'
set format y '%g'
set grid
set key bottom left box opaque
set arrow from graph 0, first 0.1 to graph 1, first 0.1 nohead dt 2 lc rgb 'gray30'
set label 'tol = 0.1' at graph 0.90, first 0.11 tc rgb 'gray30'
set label sprintf('KDA: durable channels a = %g', a_slow) at first (1-a_slow), first 0.032 right offset -1,0 tc rgb '#0044aa'
set label sprintf('KDA: volatile channels a = %g', a_fast) at first (1-a_fast), first 0.032 left offset 1,0 tc rgb '#aa2200'
plot sweep using 2:4:5 with yerrorlines lw 2 pt 7 ps 0.7 lc rgb '#0044aa' title 'durable fact (written once), scalar α', \
     sweep using 2:6:7 with yerrorlines lw 2 pt 5 ps 0.7 lc rgb '#aa2200' title 'volatile fact (rewritten every P tokens), scalar α', \
     kda using (1-$2):4:5 every ::0::0 with yerrorbars pt 3 ps 3 lw 3 lc rgb '#0044aa' title 'KDA, durable fact', \
     kda using (1-$3):6:7 every ::0::0 with yerrorbars pt 3 ps 3 lw 3 lc rgb '#aa2200' title 'KDA, volatile fact'
