#!/bin/sh
# scripts/run_experiments.sh — `make run`'s experiments: each program in turn
# with --out DIR, its printed summary kept beside its TSVs (DIR/NN_name.txt,
# for the results page); stops (exit 1) at the first that fails.
#
# usage: scripts/run_experiments.sh [--full] [--resume] DIR PROGRAM... [-- FLAGS...]
#   --full      the training experiments' full sweeps (KDALAB_FULL=1; make run FULL=1)
#   --resume    keep the ledger of trained models, DIR/mqar_models.tsv, and
#               read its models back (make run RESUME=1)
#   FLAGS       given to every program (the tests run a tiny sweep this way)
#
# Without --resume the ledger starts empty, so every model read back from it
# was trained by this run and this build: a model two experiments share (15's
# d = 16 points are 14's models) is trained once.
full=; resume=
while :; do
    case "${1:-}" in
        --full) full=1; shift ;;
        --resume) resume=1; shift ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ]; then
    echo "usage: scripts/run_experiments.sh [--full] [--resume] DIR PROGRAM... [-- FLAGS...]" >&2
    exit 2
fi
dir=$1; shift
progs=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    progs="$progs $1"; shift
done
[ "${1:-}" = -- ] && shift

if [ -z "$resume" ]; then
    rm -f "$dir/mqar_models.tsv" || exit 1
fi
for e in $progs; do
    echo "== $e" >&2
    n=$(basename "$e")
    case "$e" in */*) ;; *) e=./$e ;; esac
    KDALAB_FULL=$full KDALAB_RESUME=1 "$e" --out "$dir" "$@" > "$dir/$n.txt"; rc=$?
    cat "$dir/$n.txt"; [ $rc -eq 0 ] || exit 1
done
