# plots/20_output_gate.gp — KDA and Gated DeltaNet on trained MQAR by output-gate design.
# Run from the repository root:  gnuplot -e "dir='results'" plots/20_output_gate.gp
# Reads  DIR/20_output_gate_summary.tsv, DIR/20_output_gate.tsv (bin/20_output_gate; the
#        second for its header, which sweep, and each seed's model)
# Writes OUT/20_output_gate.png (OUT defaults to DIR): test accuracy (mean over seeds at the
#        best learning rate, error bars one standard deviation when there are several seeds)
#        of each mixer for each design (output gate / its rank / the conv init), and each
#        seed's model at that rate when there are several seeds.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/20_output_gate_summary.tsv'
# (no full sweep of 20 is published yet: the note says so)
note = system(sprintf("awk -f plots/sweep_note.awk '%s' '%s'", dir.'/20_output_gate.tsv', f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s' '%s'", dir.'/20_output_gate.tsv', f)))
set datafile separator '\t'
stats f u 1 nooutput
nmax = STATS_max
set terminal pngcairo size 1000,600 font ',11'
set output out.'/20_output_gate.png'
if (seeds > 1) {
    how = sprintf("mean over %d seeds at each model's best rate; bars: one sd (cut at 0 and 1); small marks: each seed", seeds)
} else {
    how = "one seed at each model's best learning rate, so no error bars"
}
set title sprintf("Trained two-block models on MQAR by output gate / its rank / the conv init\n(%s)\n%s", how, note) noenhanced
set xlabel 'output gate / rank (full, or rN) / short-convolution init'
set ylabel 'test accuracy on the answers'
set yrange [0:1.05]
set xrange [-0.6 : nmax + 0.6]
set grid ytics
set key outside right top noenhanced box opaque
set xtics noenhanced rotate by -20
clip(y) = y < 0 ? 0 : (y > 1 ? 1 : y)
sel(m) = stringcolumn(3) eq m ? $5 : 1/0
# each seed's model at its mixer's best rate: design index, mixer, accuracy (summary: $1
# index, $2 design, $3 mixer, $4 lr; models: $2 mixer, $10 lr, $12 accuracy, $15 design)
seeds_at_best = sprintf("< awk -F'\t' 'FNR == 1 {file++} /^#/ || NF < 2 {next} file == 1 {best[$2 FS $3] = $4 + 0; at[$2] = $1; next} ($15 FS $2) in best && $10 + 0 == best[$15 FS $2] {print at[$15] \"\\t\" $2 \"\\t\" $12}' '%s' '%s'", f, dir.'/20_output_gate.tsv')
dot(m) = stringcolumn(2) eq m ? $3 : 1/0
if (seeds > 1) {
    plot f u ($1 - 0.12):(sel('gated_deltanet')):(clip($5 - $6)):(clip($5 + $6)):xtic(2) \
           with yerrorbars pt 7 ps 1.5 lw 2 lc rgb '#ee7733' title 'Gated DeltaNet', \
         f u ($1 + 0.12):(sel('kda')):(clip($5 - $6)):(clip($5 + $6)) \
           with yerrorbars pt 5 ps 1.5 lw 2 lc rgb '#cc3311' title 'KDA', \
         seeds_at_best u ($1 - 0.24):(dot('gated_deltanet')) with points pt 6 ps 0.7 lc rgb '#ee7733' title 'Gated DeltaNet, each seed', \
         seeds_at_best u ($1 + 0.24):(dot('kda')) with points pt 4 ps 0.7 lc rgb '#cc3311' title 'KDA, each seed'
} else {
    plot f u ($1 - 0.12):(sel('gated_deltanet')):xtic(2) with points pt 7 ps 1.5 lc rgb '#ee7733' title 'Gated DeltaNet', \
         f u ($1 + 0.12):(sel('kda')) with points pt 5 ps 1.5 lc rgb '#cc3311' title 'KDA'
}
