# plots/sweep_note.awk — one line for a figure's title: which sweep of a training
# experiment (14-21) its TSVs hold, read from their comment headers.
#
#   awk -f plots/sweep_note.awk results/14_recall_by_mechanism.tsv results/14_recall_summary.tsv
#
# Reads every "# parameters: full sweep ..." or "# parameters: reduced sweep ..." line
# of the files given (the first of each kind of value wins): "seeds=N", "steps=N".
# Without seeds=, counts the distinct values of the column named "seed" (the last
# comment line, the column names). Prints, for a reduced sweep,
#   reduced sweep: 1 seed, 600 steps — the full sweep is in full-sweeps/ (make figures-full)
# and for a full sweep
#   full sweep: 3 seeds, 1000 steps
# and nothing if no file says which sweep it is. With -v want=seeds, prints only the
# number of seeds (1 if unknown), for a script that draws error bars only over several.
# A reduced sweep's line points at full-sweeps/ only when that folder (run from the
# repository root) holds TSVs of the same experiment (NN_*.tsv, NN from the first
# file's name); otherwise it says that no full sweep is published yet. -v nofull=1
# says so whatever full-sweeps/ holds.
BEGIN { FS = "\t" }
FNR == 1 { seedcol = 0; if (first == "") first = FILENAME }
/^# parameters:/ {
    if (kind == "" && $0 ~ /reduced sweep/) kind = "reduced"
    if (kind == "" && $0 ~ /full sweep/) kind = "full"
    if (seeds == "" && match($0, /seeds=[0-9]+/)) seeds = substr($0, RSTART + 6, RLENGTH - 6)
    if (steps == "" && match($0, /steps=[0-9]+/)) steps = substr($0, RSTART + 6, RLENGTH - 6)
    next
}
/^#/ {
    # the column names: "# name<TAB>name..."
    line = substr($0, 3); n = split(line, c, "\t")
    if (n > 1) { seedcol = 0; for (i = 1; i <= n; i++) if (c[i] == "seed") seedcol = i }
    next
}
NF > 1 && seedcol > 0 { if (!(FILENAME SUBSEP $seedcol in seen)) { seen[FILENAME SUBSEP $seedcol] = 1; nseen[FILENAME]++ } }
END {
    if (seeds == "") for (f in nseen) if (nseen[f] > seeds + 0) seeds = nseen[f]
    if (want == "seeds") { print (seeds == "" ? 1 : seeds); exit }
    if (kind == "") exit
    s = kind " sweep"
    sep = ": "
    if (seeds != "") { s = s sep seeds (seeds == 1 ? " seed" : " seeds"); sep = ", " }
    if (steps != "") { s = s sep steps " steps" }
    if (kind == "reduced" && nofull == "") {
        base = first; sub(/.*\//, "", base)
        if (match(base, /^[0-9][0-9]_/) && system("ls full-sweeps/" substr(base, 1, 3) "*.tsv >/dev/null 2>&1") != 0)
            nofull = 1
    }
    if (kind == "reduced" && nofull == "") s = s " — the full sweep is in full-sweeps/ (make figures-full)"
    if (kind == "reduced" && nofull != "") s = s " — no full sweep published yet (make run FULL=1)"
    print s
}
