#!/usr/bin/env bash
# scripts/sweep_slurm.sh — one training experiment's full sweep as a Slurm job
# array: one array task per model, each trained by `--job I` into its own
# ledger under --out. From the repository root, on a cluster whose nodes see
# this checkout (built with `make`) and DIR on a shared file system:
#
#   n=$(KDALAB_FULL=1 bin/14_recall_by_mechanism --out DIR --list-jobs | wc -l)
#   sbatch --array=0-$((n - 1)) scripts/sweep_slurm.sh 14_recall_by_mechanism DIR
#   # when every task has finished: the tables, from the jobs' ledgers, training nothing
#   KDALAB_FULL=1 KDALAB_RESUME=1 bin/14_recall_by_mechanism --out DIR
#
# Extra flags after DIR go to every job (and must go to the listing and the
# assembling run as well: they are part of each model's key; the assembling
# run refuses other ones, naming the setting). A task that fails, or is killed
# at its time limit, can be run again alone (sbatch --array=I): the assembling
# run refuses while a task's model is missing, and lists the missing tasks as
# --array takes them (jobs 3,7-9); KDALAB_RESUME=1 below makes a task whose
# model is in a ledger already exit at once.
#SBATCH --job-name=kdalab-sweep
#SBATCH --cpus-per-task=1
#SBATCH --time=02:00:00
#SBATCH --output=kdalab-sweep-%A_%a.out
set -euo pipefail

if [ $# -lt 2 ] || [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
    echo "usage: sbatch --array=0-N scripts/sweep_slurm.sh EXPERIMENT DIR [FLAGS...]" >&2
    exit 2
fi
experiment=$1
dir=$2
shift 2
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
KDALAB_FULL=1 KDALAB_RESUME=1 exec "bin/$experiment" --out "$dir" "$@" \
    --job "$SLURM_ARRAY_TASK_ID"
