# plots/07_relative_position.gp — decay as a relative position bias.
# Run from the repository root:  gnuplot -e "dir='results'" plots/07_relative_position.gp
# Reads  DIR/07_relative_position.tsv, DIR/07_relative_position_dynamic.tsv
#        (bin/07_relative_position)
# Writes DIR/07_relative_position.png, three panels:
#   left    fixed gates: ln weight vs distance; KDA channels on ALiBi's lines
#   middle  a data-dependent gate: one curve per write position j, none a line
#   right   one KDA head, q and k spread over its channels: a mixture of slopes
if (!exists("dir")) dir = 'results'
f  = dir.'/07_relative_position.tsv'
fd = dir.'/07_relative_position_dynamic.tsv'
set datafile separator '\t'

# 07_relative_position.tsv: 1 series, 2 channel, 3 m, 4 d, 5 logw, 6 pred
sel(s, c) = (strcol(1) eq s && int($2) == c) ? $5 : 1/0
stats f u (strcol(1) eq 'kda' ? $2 : 1/0) nooutput
K = int(STATS_max)
stats f u 4 nooutput
D = int(STATS_max)
# the channel the experiment summarises in part 2: K/2 + 1 (1-based), and its mean slope
stats fd u 2 nooutput
CH = int(STATS_max / 2) + 1
stats fd u (int($2) == CH ? $3 : 1/0) nooutput
M = STATS_max
array col[8] = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf']
cc(c) = col[(c - 1) % 8 + 1]

set terminal pngcairo size 1800,760 enhanced font 'Sans,11'
set output dir.'/07_relative_position.png'
set multiplot layout 1,3 title "07 relative position — the weight of a fact written at j and read at i = j + d, measured through kdalab\\_step\\_f64 (ln, natural log)" font ',13'
set grid lc rgb '#dddddd'
set bmargin 9
set xlabel 'distance d = i - j (tokens)'
set xrange [0:D]

# ---- left: fixed gates ------------------------------------------------------------------
set title sprintf("fixed gates: ln w = -m d, a straight line;\nKDA channel c (colour) = ALiBi head c (dots), m_c = 2^{-8c/%d}", K)
set ylabel 'ln weight  (= position bias added to the logit)'
YMIN = -40
set yrange [YMIN:2]
set key below font ',10' box maxcols 1
# name each channel where its line leaves the panel: beside the line's end where it leaves
# through the bottom, in the right margin where it reaches d = D (lines that end close
# together there are pushed apart, so no label sits on a line or on another label)
set rmargin 8
do for [c = 1:K] {
    m = 2.0**(-8.0 * c / K)
    xe = (-YMIN / m < D) ? -YMIN / m : D
    dy = (c == K ? 0.5 : (c == K - 1 ? -0.4 : 0))
    set label 100 + c sprintf('c = %d', c) at xe, -m * xe offset (xe < D ? 0.8 : 0.6), (xe < D ? 0.4 : dy) font ',9' tc rgb cc(c) left
}
plot \
  for [c = 1:K] f u 4:(sel('kda', c)) w l lw 2.5 lc rgb cc(c) t (c == 1 ? sprintf('KDA channels c = 1..%d (measured)', K) : ''), \
  for [c = 1:K] f u 4:(int($4) % 16 == 0 ? sel('alibi', c) : 1/0) w p pt 7 ps 0.6 lc rgb '#000000' t (c == 1 ? 'ALiBi heads h: bias -m_h d (definition)' : ''), \
  f u 4:(sel('scalar_gate', 0)) w l lw 4 dt 2 lc rgb '#777777' t 'scalar gate a = 0.9 (Gated DeltaNet): one slope', \
  f u 4:(sel('no_decay', 0)) w l lw 2 lc rgb '#bbbbbb' t 'no decay (linear attention): no position signal'
unset label
set rmargin

# ---- middle: a data-dependent gate --------------------------------------------------------
set title sprintf("data-dependent gate, KDA channel %d (mean m = %.4g, hard resets):\nln w = sum of g over the span, one curve per write position j", CH, M)
set yrange [*:2]
set key below font ',10' box maxcols 1
set cbrange [*:*]
set cblabel 'write position j' offset 1,0
set rmargin 9
set palette defined (0 '#1f77b4', 1 '#2ca02c', 2 '#ff7f0e', 3 '#d62728')
# the fixed slope is drawn first as a wide pale band: the curves run along it, and a thin
# line would be hidden under them
plot \
  -M * x w l lw 12 lc rgb '#c8c8c8' t sprintf('fixed slope -m d (m = %.4g), the wide grey band', M), \
  fd u 4:(int($2) == CH ? $5 : 1/0):1 w l lw 2.5 lc palette t 'ln w measured (one curve per j)', \
  fd u 4:(int($2) == CH && int($4) % 8 == 0 ? $6 : 1/0) w p pt 6 ps 0.6 lc rgb '#000000' t 'sum of g over the span (computed)'
unset colorbox
set rmargin

# ---- right: one KDA head, many slopes ------------------------------------------------------
set title sprintf("one KDA head, q and k spread over its %d channels:\nw = mean_c exp(-m_c d), a mixture of timescales", K)
YMIN = -7
set yrange [YMIN:0.5]
set key below font ',10' box maxcols 1
set rmargin 8
# each channel named in its colour where its line leaves the panel, as in the left panel;
# the two steepest (c = 1, 2) leave too close together for a label and keep the left
# panel's colours
do for [c = 1:K] {
    m = 2.0**(-8.0 * c / K)
    xe = (-YMIN / m < D) ? -YMIN / m : D
    if (c > 2) {
        set label 200 + c sprintf('c = %d', c) at xe, -m * xe offset (xe < D ? 0.8 : 0.6), (xe < D ? 0.4 : 0) font ',9' tc rgb cc(c) left
    }
}
plot \
  for [c = 1:K] f u 4:(sel('kda', c)) w l lw 1 lc rgb cc(c) notitle, \
  f u 4:(strcol(1) eq 'kda_mixture' ? $5 : 1/0) w l lw 4 lc rgb '#000000' t 'KDA head: ln of the mixture (measured)', \
  NaN w l lw 1 lc rgb cc(K) t 'thin lines: its channels, coloured as left, each straight'
unset label
unset multiplot
