/*
 * tests/test_sweep_census.c — what a training run reads and trains before it
 * starts (experiments/census.h, scripts/run_experiments.sh): make run's fresh
 * run reads no ledger of an earlier run, and a resuming run says which of its
 * sweep's models it will train, or refuses.
 *
 * Runs $KDALAB_BIN/14_recall_by_mechanism (bin by default; and
 * 15_recall_by_state beside it) in its reduced sweep cut to 2 optimiser steps:
 * ten tiny models, about a second a run. Checked:
 *   - make run without RESUME (scripts/run_experiments.sh, 14 then 15) reads
 *     no ledger of an earlier run, the jobs' ones included: it removes them
 *     and its first line says so; 15 still reads back what 14 trained in the
 *     same run and is not refused (fresh_run_reads_no_old_ledger);
 *   - a resuming run with no job ledgers says, before training, how many of
 *     the sweep's models the ledgers hold and which jobs it trains (none
 *     there: all; two lines gone: those two), and trains them; with flags
 *     other than those of the ledger's models of this experiment (--steps 3
 *     for 2) it names the setting and refuses, training nothing, unless
 *     KDALAB_TRAIN_MISSING=1 (resume_says_what_it_trains).
 * The assembling run of a sweep run as jobs: test_sweep_jobs.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe[512];

#define N_MODELS 10 /* 5 mixers x 2 pair counts, one seed, one lr */

static int run_flags(const char *dir, const char *env, const char *flags)
{
    return sweep_run_status(exe, tmpdir, dir, env, flags);
}

static int run_status(const char *dir, const char *env)
{
    return run_flags(dir, env, "--steps 2 --test 4");
}

static size_t lines(const char *s) { return sweep_lines(s); }

/* make run without RESUME (scripts/run_experiments.sh without --resume) is a
 * fresh run: no ledger of an earlier run is read, neither DIR/mqar_models.tsv
 * nor a job's DIR/mqar_jobs/NAME.I.tsv (each experiment still reads back what
 * an earlier one of the same run trained, so 14 then 15 run as make run runs
 * them). */
static void fresh_run_reads_no_old_ledger(void **state)
{
    (void)state;
#define STEPS2 "--steps 2" /* 15 has no --test */
    char dir[300], cmd[4096];
    snprintf(dir, sizeof dir, "%s/fresh", tmpdir);
    /* an earlier run's ledgers: a job's and the sequential one, each with an
     * accuracy no fresh run gives */
    snprintf(cmd, sizeof cmd,
             "rm -rf %s && env -u KDALAB_RESUME %s --out %s " STEPS2 " --job 3 2>/dev/null && "
             "env -u KDALAB_RESUME %s --out %s " STEPS2 " --job 4 2>/dev/null && "
             "cd %s && awk -F '\t' -v OFS='\t' '{ $15 = 0.5 } 1' "
             "mqar_jobs/14_recall_by_mechanism.3.tsv > j && mv j "
             "mqar_jobs/14_recall_by_mechanism.3.tsv && awk -F '\t' -v OFS='\t' "
             "'{ $15 = 0.5 } 1' mqar_jobs/14_recall_by_mechanism.4.tsv > mqar_models.tsv && "
             "rm mqar_jobs/14_recall_by_mechanism.4.tsv",
             dir, exe, dir, exe, dir, dir);
    assert_int_equal(system(cmd), 0);
    char exe15[600];
    snprintf(exe15, sizeof exe15, "%.*s15_recall_by_state", (int)(strrchr(exe, '/') + 1 - exe),
             exe);
    snprintf(cmd, sizeof cmd,
             "env -u KDALAB_RESUME -u KDALAB_FULL sh scripts/run_experiments.sh %s %s %s -- "
             STEPS2 " >%s/stdout 2>%s/stderr",
             dir, exe, exe15, tmpdir, tmpdir);
    int st = system(cmd);
    char *err = test_read_text(sweep_path(tmpdir, "stderr"));
    if (st != 0)
        fail_msg("%s: status %d, stderr:\n%s", cmd, st, err);
    char p[400];
    snprintf(p, sizeof p, "%s/14_recall_by_mechanism.tsv", dir);
    char *table = test_read_text(p);
    if (strstr(table, "\t0.5000\t"))
        fail_msg("a fresh run read an earlier run's ledger:\n%s", table);
    snprintf(p, sizeof p, "%s/mqar_jobs/14_recall_by_mechanism.3.tsv", dir);
    assert_false(tcli_exists(p)); /* the earlier run's job ledger is gone */
    snprintf(p, sizeof p, "%s/mqar_models.tsv", dir);
    char *ledger = test_read_text(p);
    assert_int_equal(lines(ledger), N_MODELS + 8); /* 14's ten, 15's eight */
    assert_non_null(strstr(err, "a fresh run"));
    free(ledger);
    free(table);
    free(err);
}

/* A resuming run without job ledgers (a sequential sweep stopped, make run
 * RESUME=1) says before training how many models the ledgers hold and which
 * it trains, and trains them; but where the ledgers hold this experiment's
 * models at other settings (--steps 3 for 2), it names the setting and
 * refuses, unless KDALAB_TRAIN_MISSING=1. */
static void resume_says_what_it_trains(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/says", tmpdir);
    char *err;
    /* no ledger at all */
    assert_int_equal(run_status(dir, "KDALAB_RESUME=1"), 0);
    err = test_read_text(sweep_path(tmpdir, "stderr"));
    char want[1024];
    snprintf(want, sizeof want, "14_recall_by_mechanism: none of the 10 models of this sweep is "
             "in the ledgers under %s/: training all 10\n", dir);
    if (!strstr(err, want))
        fail_msg("stderr lacks \"%s\":\n%s", want, err);
    free(err);
    /* two lines gone: read the others, train those two */
    char ledger[400];
    snprintf(ledger, sizeof ledger, "%s/mqar_models.tsv", dir);
    char *full = test_read_text(ledger);
    char *cut = strdup(full);
    assert_non_null(cut);
    for (int drop = 7; drop >= 3; drop -= 4) { /* lines 8 and 4 (jobs 7 and 3) */
        char *line = cut;
        for (int l = 0; l < drop; l++)
            line = strchr(line, '\n') + 1;
        memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    }
    test_write_text(ledger, cut);
    assert_int_equal(run_status(dir, "KDALAB_RESUME=1"), 0);
    err = test_read_text(sweep_path(tmpdir, "stderr"));
    snprintf(want, sizeof want, "14_recall_by_mechanism: 8 of 10 models of this sweep are in the "
             "ledgers under %s/; training the other 2 (jobs 3,7)\n", dir);
    if (!strstr(err, want))
        fail_msg("stderr lacks \"%s\":\n%s", want, err);
    free(err);
    char *now = test_read_text(ledger);
    assert_int_equal(lines(now), N_MODELS);
    free(now);

    /* other flags than the ledger's: the setting named, nothing trained */
    assert_int_equal(run_flags(dir, "KDALAB_RESUME=1", "--steps 3 --test 4"), 1);
    err = test_read_text(sweep_path(tmpdir, "stderr"));
    snprintf(want, sizeof want, "the ledgers hold 10 models of this experiment at other "
             "settings than this run's:\n  steps 2 (this run: 3): 10 models, e.g. %s:1\n",
             ledger);
    if (!strstr(err, want) || !strstr(err, "0 of 10 models of this sweep are in the ledgers"))
        fail_msg("stderr lacks \"%s\":\n%s", want, err);
    free(err);
    now = test_read_text(ledger);
    assert_int_equal(lines(now), N_MODELS);
    free(now);
    /* asked to: trained at this run's settings */
    assert_int_equal(run_flags(dir, "KDALAB_RESUME=1 KDALAB_TRAIN_MISSING=1", "--steps 3 --test 4"),
                     0);
    now = test_read_text(ledger);
    assert_int_equal(lines(now), 2 * N_MODELS);
    free(now);
    free(cut);
    free(full);
}

static int setup(void **state)
{
    (void)state;
    return sweep_setup("test_sweep_census", "14_recall_by_mechanism", exe, sizeof exe,
                       "kdalab_census", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(fresh_run_reads_no_old_ledger),
                                       cmocka_unit_test(resume_says_what_it_trains)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
