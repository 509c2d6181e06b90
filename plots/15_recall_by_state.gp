# plots/15_recall_by_state.gp — pairs recalled at 95 % against head dimension.
# Run from the repository root:  gnuplot -e "dir='results'" plots/15_recall_by_state.gp
# Reads  DIR/15_recall_by_state_summary.tsv (bin/15_recall_by_state)
# Writes DIR/15_recall_by_state.png: pairs recalled at 95 % test accuracy by DeltaNet and
#        KDA against the head dimension d (line: from the seed-mean accuracy curve; points and
#        bars: mean and sd of each seed's own value), with the line pairs = d.
if (!exists("dir")) dir = 'results'
f = dir.'/15_recall_by_state_summary.tsv'
set datafile separator '\t'
set terminal pngcairo size 900,560 font ',11'
set output dir.'/15_recall_by_state.png'
set title "Trained two-block models on MQAR: pairs recalled at 95 % test accuracy\nagainst the head dimension d (width fixed; the chapter: \"on the order of d\")"
set xlabel 'head dimension d'
set ylabel 'key-value pairs at 95 % accuracy'
set logscale x 2
set grid
set key top left noenhanced
set yrange [0:*]
set offsets graph 0.04, graph 0.04, 0, 0
sel(m) = stringcolumn(1) eq m ? $4 : 1/0
own(m) = stringcolumn(1) eq m ? $5 : 1/0
plot for [i=1:2] f u 2:(sel(word("deltanet kda", i))) with lines lw 2 lc i title word("deltanet kda", i), \
     for [i=1:2] f u 2:(own(word("deltanet kda", i))):6 with yerrorbars pt 7 lc i \
         title word("deltanet kda", i)." (per seed)", \
     f u 2:(stringcolumn(1) eq "deltanet" ? $2 : 1/0) with lines dt 2 lc rgb '#888888' \
         title 'pairs = d'
