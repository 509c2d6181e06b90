# plots/17_nope_needs_position.gp — NoPE attention on MQAR with and without a KDA block.
# Run from the repository root:  gnuplot -e "dir='results'" plots/17_nope_needs_position.gp
# Reads  DIR/17_nope_needs_position.tsv (bin/17_nope_needs_position)
# Writes OUT/17_nope_needs_position.png (OUT defaults to DIR): test accuracy of each trained
#        stack, every seed a point, one colour per learning rate (the rates side by side,
#        the seeds nudged within); above each stack the mean per rate; the title says which
#        sweep.
if (!exists("dir")) dir = 'results'
if (!exists("out")) out = dir
f = dir.'/17_nope_needs_position.tsv'
note = system(sprintf("awk -f plots/sweep_note.awk '%s'", f))
seeds = int(system(sprintf("awk -v want=seeds -f plots/sweep_note.awk '%s'", f)))
# the learning rates in the file, in the order they first appear (column 10)
lrs = system(sprintf("awk -F'\t' '!/^#/ && !($10 in s) {s[$10]; printf \"%%s \", $10}' '%s'", f))
nlr = words(lrs)
set datafile separator '\t'
set terminal pngcairo size 1150,620 font ',11'
set output out.'/17_nope_needs_position.png'
pairs = system(sprintf("awk -F'\t' '!/^#/ {print $7; exit}' '%s'", f))
set title sprintf("Two-block models on MQAR (%s pairs): two NoPE attention blocks, without or with the short convolution;\nin front of a NoPE attention block: KDA without or with its convolution, or attention with its convolution\n%s", pairs, note) noenhanced
set ylabel 'test accuracy'
# room above 1 so every value label sits just above its highest point
set yrange [0:1.35]
set ytics 0, 0.2, 1
set xrange [-0.6:4.6]
set grid ytics
set xtics ("NoPE attention x2\n(no conv)" 0, "attention x2\n+ short conv" 1, "KDA, then NoPE\nattention (no conv)" 2, "KDA + its conv,\nthen NoPE attention" 3, "attention + its conv,\nthen NoPE attention" 4)
set key below
set bmargin 6
names = 'attention_nope attention_conv kda_then_attention kda_conv_then_attention attention_conv_then_attention'
# per stack: the mean per rate, written above its highest point
do for [i = 1:5] {
    lab = system(sprintf("awk -F'\t' '!/^#/ && $1 == \"%s\" {m[$10] += $12; n[$10]++; if (!($10 in o)) o[$10] = k++} END {for (r in o) l[o[r]] = sprintf(n[r] > 1 ? \"lr %%s: mean %%.2f\" : \"lr %%s: %%.2f\", r, m[r] / n[r]); for (j = 0; j < k; j++) printf \"%%s%%s\", (j ? \"\\n\" : \"\"), l[j]}' '%s'", word(names, i), f))
    top = real(system(sprintf("awk -F'\t' '!/^#/ && $1 == \"%s\" && $12 > t {t = $12} END {print t + 0}' '%s'", word(names, i), f)))
    set label i lab at i - 1, top + 0.06 + 0.04 * nlr center font ',9'
}
idx(s) = s eq 'attention_nope' ? 0 : s eq 'attention_conv' ? 1 : s eq 'kda_then_attention' ? 2 : s eq 'kda_conv_then_attention' ? 3 : 4
# rate r of nlr a band of width 0.3 side by side; seed n of N nudged within its band
band(r) = nlr > 1 ? 0.34 * ((r - 1.0) / (nlr - 1) - 0.5) : 0
xpos(s, r, n) = idx(s) + band(r) + 0.025 * (n - (seeds + 1) / 2.0)
colour(r) = word('#4477aa #ee6677 #228833 #ccbb44', r)
plot for [r = 1:nlr] f u (stringcolumn(10) eq word(lrs, r) ? xpos(stringcolumn(1), r, $9) : NaN):12 \
       with points pt 7 ps 1.2 lc rgb colour(r) \
       title sprintf('lr %s, one trained model per seed (%d seed%s)', word(lrs, r), seeds, seeds > 1 ? 's' : '')
