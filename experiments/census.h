/*
 * experiments/census.h — the look a resuming training run takes at its sweep
 * before it trains anything (census.c), used by lab_mqar_train.
 *
 * A run with KDALAB_RESUME set (not --list-jobs, not --job I) forks a copy of
 * itself at its first lab_mqar_train. The copy runs the experiment's grid as
 * --list-jobs does, training nothing and writing no table, looks each job's
 * model up in the ledgers (lab_ledger_find_any: a bad or conflicting line
 * stops it, status 1) and at lab_mqar_jobs_done says, in one line, how many
 * of the sweep's models the ledgers hold and which it will train, or refuses
 * (status 1, a line per missing job, and how to run them) where training them
 * here would not be what was asked for:
 *
 *   - an assembling run, one whose experiment has job ledgers
 *     (DIR/mqar_jobs/NAME.\*.tsv), is missing models: a killed job (GNU
 *     parallel's --resume counts it as done), one not run, one that failed;
 *   - models are missing and the ledgers hold models this experiment trained
 *     (its job ledgers, or lines with its experiment= field) at other settings
 *     than this run's: the flags differ from the listing's (no --steps, say);
 *     the setting that differs is named.
 *
 * KDALAB_TRAIN_MISSING=1 (lab_train_missing) trains the missing models anyway.
 * A run with no ledger of its experiment (make run's fresh run, a sequential
 * sweep resumed after a stop) trains the missing models and says how many.
 * The parent goes on if the copy exits 0, and exits with its status
 * otherwise.
 */
#ifndef KDALAB_EXPERIMENTS_CENSUS_H
#define KDALAB_EXPERIMENTS_CENSUS_H

#include "mqar_train.h"

/* In the run: fork the copy that looks at the sweep, wait for it; return if
 * it found nothing that stops the run, else exit with its status (it said
 * why). In the copy (x->census set): return at once, to run the grid. */
void lab_census_run(lab_ctx *x);

/* In the copy: job `index` of the sweep is spec s, key its ledger key, and
 * the ledgers hold its model (found) or not. */
void lab_census_note(const lab_ctx *x, size_t index, const lab_mqar_spec *s, const char *key,
                     int found);

/* In the copy, after the sweep's last job: say what the run will train, or
 * why it will not; exit 0 to let the run go on, 1 to stop it. */
_Noreturn void lab_census_report(const lab_ctx *x);

#endif /* KDALAB_EXPERIMENTS_CENSUS_H */
