#!/bin/sh
# scripts/results_page.sh — one page of results: RESULTS/index.html.
#
#   sh scripts/results_page.sh [RESULTS [CLAIMS [PLOTS]]]
#
# RESULTS (default results) is what `make run` wrote: the experiments' TSVs, their
# printed summaries NN_name.txt, the figures NN_name*.png, machine.txt
# (scripts/machine.sh), run_time.txt ("seconds=N", `make run`), and full-sweeps/,
# the figures `make figures-full` draws from the published full sweeps (those
# of a variant run, full-sweeps/NN-name/, in full-sweeps/NN-name/).
# CLAIMS (default plots/claims.tsv) is the findings list; PLOTS (default plots)
# the gnuplot scripts, whose "set output" lines name every figure, and
# sweep_note.awk; FULL_SWEEPS (default full-sweeps/ beside scripts/) the
# published full sweeps' TSVs, for the sweep their figures show.
#
# The page is plain HTML beside the PNGs (relative links, no scripts, no styles
# from elsewhere): the machine and how long the run took, the findings table
# (claim, experiment, verdict, where the verdict's numbers come from, the sweep,
# the claim's figure as a thumbnail linking the full size; a timed claim's row
# quotes its experiment's "spread:" lines, the median and range of its rounds, and
# the "verdict:" lines it computed from them),
# then a section per experiment with its figures, the sweep they come from, and
# the numbers the experiment printed. A figure or summary that is missing is
# named as missing, never linked. Written to index.html.tmp, then renamed.
set -eu
res=${1:-results}
claims=${2:-plots/claims.tsv}
plots=${3:-plots}
here=$(dirname "$0")
note_awk="$plots/sweep_note.awk"
full_dir=${FULL_SWEEPS:-$here/../full-sweeps}

[ -d "$res" ] || { echo "results_page: RESULTS '$res' is not a directory" >&2; exit 1; }
# the full sweeps' README, as a link relative to the page (empty when there is none)
readme_link=
[ -f "$full_dir/README.md" ] && readme_link=$(realpath --relative-to="$res" "$full_dir/README.md" 2>/dev/null)
[ -r "$claims" ] || { echo "results_page: CLAIMS '$claims' cannot be read" >&2; exit 1; }

man="$res/index.manifest.tmp"
: > "$man"
# every figure a plot script writes: "fig <TAB> experiment <TAB> png <TAB> drawn <TAB> full-sweep png drawn"
for gp in "$plots"/[0-9][0-9]_*.gp; do
    [ -f "$gp" ] || continue
    exp=$(basename "$gp" .gp)
    n=$(printf '%s' "$exp" | cut -c1-3)
    sed -n "s/^set output [a-z]*\.'\/\([^']*\.png\)'.*/\1/p" "$gp" | while read -r png; do
        drawn=0; [ -s "$res/$png" ] && drawn=1
        full=0; [ -s "$res/full-sweeps/$png" ] && full=1
        printf 'fig\t%s\t%s\t%s\t%s\n' "$exp" "$png" "$drawn" "$full" >> "$man"
        # the same figure of a variant run (full-sweeps/NN-name/, drawn by make figures-full)
        for v in "$res"/full-sweeps/*/"$png"; do
            [ -s "$v" ] || continue
            vname=$(basename "$(dirname "$v")")
            vnote=""
            set -- "$full_dir/$vname/$n"*.tsv
            [ -f "$1" ] && vnote=$(awk -f "$note_awk" "$@")
            printf 'var\t%s\t%s\t%s\n' "$exp" "$vname/$png" "$vnote" >> "$man"
        done
    done
    # the sweep of this run's TSVs and of the published full sweep's (empty: not a sweep)
    run_note=""; full_note=""
    set -- "$res/$n"*.tsv
    [ -f "$1" ] && run_note=$(awk -f "$note_awk" "$@")
    set -- "$full_dir/$n"*.tsv
    [ -f "$1" ] && full_note=$(awk -f "$note_awk" "$@")
    txt=0; [ -s "$res/$exp.txt" ] && txt=1
    # a timed experiment's "spread:" lines (median and range of its rounds) and the verdicts
    # it computed from them ("verdict:" or "Verdict (...):" lines), for its claims' rows
    [ $txt -eq 1 ] && sed -n -e 's/^spread: //p' -e "s/^[Vv]erdict[^:]*: /this run's verdict: /p" \
        "$res/$exp.txt" | while IFS= read -r sp; do
        printf 'spread\t%s\t%s\n' "$exp" "$sp" >> "$man"
    done
    printf 'exp\t%s\t%s\t%s\t%s\n' "$exp" "$run_note" "$full_note" "$txt" >> "$man"
done

awk -F'\t' -v res="$res" -v man="$man" -v readme="$readme_link" '
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); gsub(/"/, "\\&quot;", s); return s }
# a thumbnail of p linking its full size, then label (HTML); cls: the class of the link, or ""
function thumb(p, label, cls) {
    return "<a" (cls != "" ? " class=\"" cls "\"" : "") " href=\"" esc(p) "\"><img class=\"thumb\" src=\"" esc(p) "\" alt=\"" esc(p) "\"></a><br>" label
}
# p at full width, linking itself, with a caption (HTML)
function figure(p, caption) {
    return sprintf("<figure><a href=\"%s\"><img src=\"%s\" alt=\"%s\"></a><figcaption>%s</figcaption></figure>\n", esc(p), esc(p), esc(p), caption)
}
function kv(file, key,    line, v) {
    v = ""
    while ((getline line < file) > 0) if (index(line, key "=") == 1) { v = substr(line, length(key) + 2); break }
    close(file)
    return v
}
BEGIN {
    # the manifest: figures and experiments in the plot scripts order
    while ((getline line < man) > 0) {
        split(line, f, "\t")
        if (f[1] == "fig") { nf[f[2]]++; fig[f[2], nf[f[2]]] = f[3]; drawn[f[3]] = f[4]; fdrawn[f[3]] = f[5] }
        if (f[1] == "exp") { ne++; exps[ne] = f[2]; runnote[f[2]] = f[3]; fullnote[f[2]] = f[4]; hastxt[f[2]] = f[5] }
        if (f[1] == "spread") spreads[f[2]] = spreads[f[2]] "<li>" esc(f[3]) "</li>"
        if (f[1] == "var") { nv[f[2]]++; vfig[f[2], nv[f[2]]] = f[3]; vdrawn[f[3]] = 1; vnote[f[3]] = f[4] }
    }
    close(man)
    # the README of the full sweeps as a link, or its name
    readme_a = readme != "" ? "<a href=\"" esc(readme) "\">full-sweeps/README.md</a>" : "full-sweeps/README.md"
}
/^#/ || $1 == "id" || NF < 6 { next }
{ nc++; cid[nc] = $1; ctext[nc] = $2; cexp[nc] = $3; cfigs[nc] = $4; cverd[nc] = $5; csrc[nc] = $6; ncl[$3]++; cl[$3, ncl[$3]] = nc }
END {
    mf = res "/machine.txt"
    cpu = kv(mf, "cpu"); fam = kv(mf, "cpu_family"); mod = kv(mf, "cpu_model")
    if (cpu != "" && fam != "" && fam != "unknown") cpu = cpu " (family " fam " model " mod ")"
    simd = kv(mf, "simd_level"); cpus = kv(mf, "cpus_online"); blas = kv(mf, "blas_kernels"); date = kv(mf, "date")
    secs = kv(res "/run_time.txt", "seconds")
    machine = (cpu != "" ? cpu : "unknown CPU") ", SIMD level " (simd != "" ? simd : "unknown") (cpus != "" ? ", " cpus " CPUs online" : "") (blas != "" ? ", OpenBLAS kernels " blas : "")

    print "<!DOCTYPE html>"
    print "<html lang=\"en\"><head><meta charset=\"utf-8\">"
    print "<title>kdalab results</title>"
    print "<style>body{font-family:sans-serif;max-width:1500px;margin:1em auto;padding:0 1em;line-height:1.4}"
    print "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 6px;vertical-align:top;text-align:left}"
    print "th{background:#eee}img{max-width:100%;height:auto;border:1px solid #ddd}img.thumb{width:240px}ul.spread{margin:4px 0;padding-left:1.2em;font-size:12px}pre{background:#f6f6f6;padding:6px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}"
    print ".reduced{color:#a40}.full{color:#060}.missing{color:#b00}section{border-top:2px solid #888;margin-top:2em}</style>"
    print "</head><body>"
    print "<h1>kdalab results</h1>"
    print "<p>Machine: " esc(machine) (date != "" ? "; measured " esc(date) : "") ".<br>"
    if (secs != "") printf "<code>make run</code> (every experiment and figure, after the build) took %d min %d s on it.<br>\n", int(secs / 60), secs % 60
    print "&ldquo;This run&rdquo; below means these measurements on this machine."
    print "Each claim below is checked by one experiment: its verdict, where the numbers behind the verdict come from, and the sweep its figure shows."
    print "Training experiments (14&ndash;24) run a <span class=\"reduced\">reduced sweep</span> under <code>make run</code> (they show the pipeline, not a verdict and not the direction: one seed and a few hundred steps can reverse an order); their verdicts come from the <span class=\"full\">full sweeps</span> in <code>full-sweeps/</code>, whose figures are shown below this run&#39;s. Click a figure to open it at full size.</p>"

    print "<h2 id=\"findings\">Findings</h2>"
    print "<table><tr><th>claim</th><th>experiment</th><th>verdict</th><th>the verdict&#39;s numbers</th><th>figure (click for full size): this run&#39;s, and the full sweep&#39;s where the verdict rests on it</th></tr>"
    for (i = 1; i <= nc; i++) {
        e = cexp[i]
        fn = fullnote[e]; sub(/^full sweep: /, "", fn)
        src = csrc[i] == "full-sweep" ? "<span class=\"full\">the full sweep (full-sweeps/" (fn != "" ? "; " esc(fn) : "") ")</span>" : "this run"
        # a timed claim: the medians and ranges its experiment printed, and what they are
        if (csrc[i] == "timed") src = "this run, timed on this machine: the median and range of alternating rounds" \
            (spreads[e] != "" ? "<ul class=\"spread\">" spreads[e] "</ul>" : " (<span class=\"missing\">no spread lines printed</span>)") \
            "The milliseconds and ratios move from machine to machine and run to run; the verdict should not."
        sweep = runnote[e] == "" ? "" : "<br><span class=\"" (runnote[e] ~ /^reduced/ ? "reduced" : "full") "\">" esc(runnote[e]) "</span>"
        n = split(cfigs[i], fl, " ")
        figcell = ""
        split("", named); vsrc = ""
        for (j = 1; j <= n; j++) {
            # NAME/PNG: the PNG of this run, and a verdict that rests on the variant run
            # full-sweeps/NAME/ (make figures-full) rather than on the main full sweep
            fg = fl[j]; base = fg; sub(/^.*\//, "", base); full = (fg == base) ? base : fg
            named[full] = 1
            if (fg != base && vsrc == "") vsrc = fg
            figcell = figcell (j > 1 ? "<br>" : "") (drawn[base] == 1 ? thumb(base, esc(base), "") : "<span class=\"missing\">" esc(base) " (not drawn)</span>")
            # a verdict from the full sweep shows the figure it rests on too
            fok = (fg == base) ? fdrawn[base] == 1 : vdrawn[fg] == 1
            if (csrc[i] == "full-sweep") figcell = figcell "<br>" (fok ? thumb("full-sweeps/" full, "<span class=\"full\">full-sweeps/" esc(full) " (the verdict&#39;s)</span>", "full") : "<span class=\"missing\">full-sweeps/" esc(full) " (not drawn)</span>")
        }
        # and the other full-sweep figures of the experiment (its variant runs), which the row
        # does not name: shown, not called the verdict figures
        if (csrc[i] == "full-sweep") for (j = 1; j <= nv[e]; j++) if (!(vfig[e, j] in named))
            figcell = figcell "<br>" thumb("full-sweeps/" vfig[e, j], "<span class=\"full\">full-sweeps/" esc(vfig[e, j]) " (a variant run: full-sweeps/README.md says what it is)</span>", "full")
        # a verdict that rests on a variant run names that run as where its numbers come from
        if (csrc[i] == "full-sweep" && vsrc != "") {
            vd = vsrc; sub(/\/[^\/]*$/, "", vd)
            vn = vnote[vsrc]; sub(/^full sweep: /, "", vn)
            src = "<span class=\"full\">the full sweep&#39;s variant run (full-sweeps/" esc(vd) "/" (vn != "" ? "; " esc(vn) : "") ")</span>"
        }
        printf "<tr id=\"claim-%s\"><td>%s</td><td><a href=\"#%s\">%s</a></td><td>%s</td><td>%s</td><td>%s%s</td></tr>\n", \
            esc(cid[i]), esc(ctext[i]), esc(e), esc(e), esc(cverd[i]), src, figcell, sweep
    }
    print "</table>"

    for (k = 1; k <= ne; k++) {
        e = exps[k]
        printf "<section id=\"%s\"><h2>%s</h2>\n", esc(e), esc(e)
        if (ncl[e] > 0) {
            print "<ul>"
            for (j = 1; j <= ncl[e]; j++) { i = cl[e, j]; printf "<li><a href=\"#claim-%s\">%s</a> &mdash; <b>%s</b></li>\n", esc(cid[i]), esc(ctext[i]), esc(cverd[i]) }
            print "</ul>"
        }
        if (runnote[e] != "") printf "<p>This run: <span class=\"%s\">%s</span>.</p>\n", (runnote[e] ~ /^reduced/ ? "reduced" : "full"), esc(runnote[e])
        for (j = 1; j <= nf[e]; j++) {
            p = fig[e, j]
            if (drawn[p] == 1) printf "%s", figure(p, esc(p) " (this run)")
            else printf "<p class=\"missing\">%s: not drawn by this run.</p>\n", esc(p)
            if (fdrawn[p] == 1) printf "%s", figure("full-sweeps/" p, esc(p) " from the published full sweep (<span class=\"full\">" esc(fullnote[e]) "</span>; its machine and date: " readme_a ")")
        }
        for (j = 1; j <= nv[e]; j++)
            printf "%s", figure("full-sweeps/" vfig[e, j], esc(vfig[e, j]) " from a variant run of the published full sweeps (its settings, machine and date: " readme_a ")")
        if (hastxt[e] == 1) {
            printf "<details open><summary>what %s printed (%s)</summary><pre>", esc(e), esc(e ".txt")
            tf = res "/" e ".txt"
            while ((getline line < tf) > 0) print esc(line)
            close(tf)
            print "</pre></details>"
        } else printf "<p class=\"missing\">%s.txt: no printed summary in this results folder.</p>\n", esc(e)
        print "</section>"
    }
    print "</body></html>"
}
' "$claims" > "$res/index.html.tmp"
rm -f "$man"
mv "$res/index.html.tmp" "$res/index.html"
