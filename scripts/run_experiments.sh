#!/bin/sh
# scripts/run_experiments.sh — `make run`'s experiments: each program in turn
# with --out DIR, its printed summary kept beside its TSVs (DIR/NN_name.txt,
# for the results page); stops (exit 1) at the first that fails.
#
# usage: scripts/run_experiments.sh [--full] [--resume] [--train-missing] DIR PROGRAM...
#                                   [-- FLAGS...]
#   --full      the training experiments' full sweeps (KDALAB_FULL=1; make run FULL=1)
#   --resume    keep the ledgers of trained models, DIR/mqar_models.tsv and
#               the jobs' DIR/mqar_jobs/*.tsv, and read their models back
#               (make run RESUME=1); each training experiment says first how
#               many of its models are there and which it trains, and refuses
#               where its jobs did not all finish or the ledgers hold its
#               models at other settings (experiments/census.h)
#   --train-missing  train those missing models anyway (KDALAB_TRAIN_MISSING=1;
#               make run RESUME=1 TRAIN_MISSING=1)
#   FLAGS       given to every program (the tests run a tiny sweep this way)
#
# Without --resume this is a fresh run: the ledgers of earlier runs, of any
# kind, are removed first (a model from an older build would hide a change),
# and the line saying so names them. Every experiment still runs with
# KDALAB_RESUME=1, over ledgers that hold only what this run trained, so that a
# model two experiments share (15's d = 16 points are 14's models) is trained
# once.
full=; resume=; train=
while :; do
    case "${1:-}" in
        --full) full=1; shift ;;
        --resume) resume=1; shift ;;
        --train-missing) train=1; shift ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ]; then
    echo "usage: scripts/run_experiments.sh [--full] [--resume] [--train-missing] DIR PROGRAM..." \
         "[-- FLAGS...]" >&2
    exit 2
fi
dir=$1; shift
progs=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    progs="$progs $1"; shift
done
[ "${1:-}" = -- ] && shift

if [ -z "$resume" ]; then
    old=
    [ -e "$dir/mqar_models.tsv" ] && old=" $dir/mqar_models.tsv"
    jobs=0
    for f in "$dir"/mqar_jobs/*.tsv; do
        [ -e "$f" ] && jobs=$((jobs + 1))
    done
    [ $jobs -gt 0 ] && old="$old${old:+ and} the $jobs job ledgers in $dir/mqar_jobs/"
    rm -f "$dir/mqar_models.tsv" "$dir"/mqar_jobs/*.tsv || exit 1
    [ -d "$dir/mqar_jobs" ] && rmdir "$dir/mqar_jobs" 2>/dev/null
    echo "make run: a fresh run (no RESUME=1): ${old:+removed the ledgers of an earlier run,$old; }every model read back is one this run trained" >&2
else
    echo "make run: resuming (RESUME=1): each training experiment reads back the models in $dir/mqar_models.tsv and $dir/mqar_jobs/*.tsv and says first which it trains${train:+ (TRAIN_MISSING=1: whatever is missing)}" >&2
fi
for e in $progs; do
    echo "== $e" >&2
    n=$(basename "$e")
    case "$e" in */*) ;; *) e=./$e ;; esac
    KDALAB_FULL=$full KDALAB_RESUME=1 KDALAB_TRAIN_MISSING=$train "$e" --out "$dir" "$@" \
        > "$dir/$n.txt"; rc=$?
    cat "$dir/$n.txt"; [ $rc -eq 0 ] || exit 1
done
