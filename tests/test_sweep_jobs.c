/*
 * tests/test_sweep_jobs.c — a training sweep as a list of independent jobs
 * (experiments/mqar_train.h): `--list-jobs` prints one command line per
 * model, `--job I` trains model I into its own ledger, and a resuming run
 * assembles the tables from the jobs' ledgers.
 *
 * Runs $KDALAB_BIN/14_recall_by_mechanism (bin by default) in its reduced
 * sweep cut to 2 optimiser steps and a 4-sequence test set: ten tiny models.
 * Checked:
 *   - the list: ten lines, job I's line is the command line with --job I,
 *     a word with a blank in it quoted for the shell; KDALAB_FULL=1 in front
 *     of a full sweep's (120 jobs); listing trains nothing, writes no table;
 *   - GNU parallel (`parallel -j2`, two jobs at a time, as Debian's package
 *     runs them) over the list, then one run with KDALAB_RESUME=1, gives the
 *     tables of one sequential run: the summary byte for byte, the model table
 *     but for its training times; the assembling run trains nothing;
 *   - a job past the last, --job with --list-jobs, a negative job, a listing
 *     with a line break in a word: one line, exit 2; a job run again under
 *     KDALAB_RESUME trains nothing, also with --out "r[1]" (a name glob would
 *     read as a pattern);
 *   - two ledgers (or two lines of one) that record one model differently
 *     are an error naming both lines, and no table is written; an identical
 *     copy of a job's ledger is read as one (conflicting_ledgers);
 *   - a job killed under GNU parallel (killed_job_rerun_by_resume_failed):
 *     parallel --resume with the job log counts it as done and runs nothing;
 *     the assembling run names the missing job (its number, its model, its
 *     command line, --resume-failed) and refuses, training nothing and
 *     writing no table; parallel --resume-failed runs it again, and the
 *     assembling run then trains nothing and gives the sequential tables;
 *   - without parallel (assembling_refuses_to_train): a missing job's
 *     ledger, or flags that are not the listing's (--steps 3 for 2: the
 *     setting named, with a line of a ledger that holds it), make the
 *     assembling run refuse; KDALAB_TRAIN_MISSING=1 trains the missing model;
 *   - with KDALAB_RESUME, --list-jobs lists only the jobs whose model no
 *     ledger holds, each with its index in the whole list, and says on
 *     stderr how many it left out (resumed_list_leaves_out_found_jobs);
 *   - the Slurm array script is valid bash (`bash -n`; it is not run).
 * The tests that run GNU parallel are skipped where it is not installed.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe[PATH_MAX];

#define N_JOBS 10 /* 5 mixers x 2 pair counts, one seed, one lr */
#define TINY "--steps 2 --test 4"

/* Run a shell command in tmpdir/dir (made if missing) with stdout and
 * stderr to files there; its exit status (-1: it did not exit). */
static int run_in(const char *dir, const char *fmt, ...)
{
    char body[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/%s' && cd '%s/%s' && env -u KDALAB_FULL -u KDALAB_RESUME -u KDALAB_TRAIN_MISSING sh -c '%s' "
             ">stdout 2>stderr",
             tmpdir, dir, tmpdir, dir, body);
    int st = system(cmd);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/* tmpdir/dir/file's text (the test fails if it cannot be read). */
static char *text_in(const char *dir, const char *file)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s/%s", tmpdir, dir, file);
    return test_read_text(p);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void jobs_listed(void **state)
{
    (void)state;
    assert_int_equal(run_in("list", "%s --out \"two words\" " TINY " --list-jobs", exe), 0);
    char *list = text_in("list", "stdout");
    assert_int_equal(count_lines(list), N_JOBS);
    const char *line = list;
    for (int i = 0; i < N_JOBS; i++) {
        char want[PATH_MAX + 128];
        snprintf(want, sizeof want, "%s --out 'two words' " TINY " --job %d\n", exe, i);
        assert_memory_equal(line, want, strlen(want));
        line += strlen(want);
    }
    /* listing trains nothing and writes nothing, not even --out's directory */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/list/two words", tmpdir);
    assert_false(tcli_exists(dir));
    free(list);

    assert_int_equal(run_in("list", "KDALAB_FULL=1 %s " TINY " --list-jobs", exe), 0);
    list = text_in("list", "stdout");
    assert_int_equal(count_lines(list), 120); /* 5 mixers x 4 pair counts x 2 lr x 3 seeds */
    assert_int_equal(strncmp(list, "KDALAB_FULL=1 ", 14), 0);
    free(list);
}

/* Jobs 3 and 7 run: a resuming listing leaves them out and keeps the other
 * jobs' indices; with every job run it lists none. */
static void resumed_list_leaves_out_found_jobs(void **state)
{
    (void)state;
    assert_int_equal(run_in("relist", "%s --out results " TINY " --job 3 && %s --out results "
                            TINY " --job 7", exe, exe), 0);
    assert_int_equal(run_in("relist", "KDALAB_RESUME=1 %s --out results " TINY " --list-jobs",
                            exe), 0);
    char *list = text_in("relist", "stdout"), *err = text_in("relist", "stderr");
    assert_int_equal(count_lines(list), N_JOBS - 2);
    for (int i = 0; i < N_JOBS; i++) {
        char want[64];
        snprintf(want, sizeof want, " --job %d\n", i);
        if ((strstr(list, want) != NULL) != (i != 3 && i != 7))
            fail_msg("job %d %s the resumed listing:\n%s", i,
                     i == 3 || i == 7 ? "in" : "missing from", list);
    }
    assert_non_null(strstr(err, "8 of 10 jobs listed; the models of the other 2 are in the "
                                "ledgers"));
    free(list);
    free(err);
    /* without KDALAB_RESUME every job is listed */
    assert_int_equal(run_in("relist", "%s --out results " TINY " --list-jobs", exe), 0);
    list = text_in("relist", "stdout");
    assert_int_equal(count_lines(list), N_JOBS);
    free(list);
    /* every job run: nothing left to list */
    assert_int_equal(run_in("relist", "for j in 0 1 2 4 5 6 8 9; do %s --out results " TINY
                            " --job $j || exit 1; done", exe), 0);
    assert_int_equal(run_in("relist", "KDALAB_RESUME=1 %s --out results " TINY " --list-jobs",
                            exe), 0);
    list = text_in("relist", "stdout");
    assert_int_equal(count_lines(list), 0);
    free(list);
}

/* Is GNU parallel installed (setup)? The tests that run it skip without it. */
static int have_parallel;

static void jobs_in_parallel_give_the_sequential_tables(void **state)
{
    (void)state;
    if (!have_parallel)
        skip();
    /* the sweep as jobs: listed, run two at a time, assembled */
    assert_int_equal(run_in("jobs", "%s --out results " TINY " --list-jobs >jobs.txt", exe), 0);
    const char *parallel = "OMP_NUM_THREADS=1 parallel --will-cite -j2 --joblog jobs.log <jobs.txt";
    assert_int_equal(run_in("jobs", "%s", parallel), 0);
    for (int i = 0; i < N_JOBS; i++) {
        char file[128];
        snprintf(file, sizeof file, "results/mqar_jobs/14_recall_by_mechanism.%d.tsv", i);
        char *ledger = text_in("jobs", file);
        assert_int_equal(count_lines(ledger), 1);
        free(ledger);
    }
    assert_int_equal(run_in("jobs", "KDALAB_RESUME=1 %s --out results " TINY, exe), 0);
    char p[1024];
    snprintf(p, sizeof p, "%s/jobs/results/mqar_models.tsv", tmpdir);
    assert_false(tcli_exists(p)); /* the assembling run trained nothing */

    /* the same sweep in one sequential run */
    assert_int_equal(run_in("seq", "%s --out results " TINY, exe), 0);
    char *a = text_in("jobs", "results/14_recall_summary.tsv");
    char *b = text_in("seq", "results/14_recall_summary.tsv");
    assert_string_equal(a, b);
    free(a);
    free(b);
    a = text_in("jobs", "results/14_recall_by_mechanism.tsv");
    b = text_in("seq", "results/14_recall_by_mechanism.tsv");
    sweep_assert_same_but_times(a, b);
    free(a);
    free(b);
}

static void job_errors(void **state)
{
    (void)state;
    assert_int_equal(run_in("errors", "%s " TINY " --job %d", exe, N_JOBS), 2);
    char *err = text_in("errors", "stderr");
    assert_non_null(strstr(err, "--job 10: this sweep has 10 jobs, 0 to 9"));
    free(err);
    assert_int_equal(run_in("errors", "%s " TINY " --list-jobs --job 1", exe), 2);
    assert_int_equal(run_in("errors", "%s " TINY " --job -2", exe), 2);
    /* a seed count the tables have no room for: refused before anything runs */
    assert_int_equal(run_in("errors", "%s " TINY " --seeds 0", exe), 2);
    assert_int_equal(run_in("errors", "%s " TINY " --seeds 17 --list-jobs", exe), 2);
    err = text_in("errors", "stderr");
    assert_non_null(strstr(err, "--seeds must be 1 .. 16"));
    free(err);
    /* a model that cannot finish: refused before anything trains */
    /* (without the bound it would run for ever: killed after a minute, status 137) */
    assert_int_equal(
        run_in("errors", "timeout -s KILL 60 %s --steps 2 --test 100000000000000", exe), 2);
    err = text_in("errors", "stderr");
    assert_non_null(strstr(err, "above the bound on one model"));
    free(err);
    /* a line break in a word: no job list of one line per job can hold it */
    assert_int_equal(run_in("errors", "%s --out \"$(printf \"a\\nb\")\" " TINY " --list-jobs",
                            exe), 2);
    char *out = text_in("errors", "stdout");
    assert_string_equal(out, "");
    free(out);

    /* a job run again under KDALAB_RESUME finds its model and trains nothing */
    assert_int_equal(run_in("errors", "%s " TINY " --job 3", exe), 0);
    assert_int_equal(run_in("errors", "KDALAB_RESUME=1 %s " TINY " --job 3", exe), 0);
    char *ledger = text_in("errors", "results/mqar_jobs/14_recall_by_mechanism.3.tsv");
    assert_int_equal(count_lines(ledger), 1);
    free(ledger);
    err = text_in("errors", "stderr");
    assert_non_null(strstr(err, "not trained"));
    free(err);
}

/* A --out with glob's characters in its name: a resuming job finds its own
 * ledger there (the name is not taken as a pattern). */
static void resume_in_a_dir_named_like_a_pattern(void **state)
{
    (void)state;
    assert_int_equal(run_in("glob", "%s --out \"r[1]\" " TINY " --job 3", exe), 0);
    assert_int_equal(run_in("glob", "KDALAB_RESUME=1 %s --out \"r[1]\" " TINY " --job 3", exe),
                     0);
    char *ledger = text_in("glob", "r[1]/mqar_jobs/14_recall_by_mechanism.3.tsv");
    assert_int_equal(count_lines(ledger), 1); /* found, not trained again */
    free(ledger);
}

/* Two ledgers that record one model differently (a copy of a job's ledger
 * edited, or from another build): an error naming both lines, no table;
 * an identical copy is read as one. */
static void conflicting_ledgers(void **state)
{
    (void)state;
    assert_int_equal(run_in("conflict", "%s --out results " TINY " --list-jobs >jobs.txt && "
                                        "sh jobs.txt", exe), 0);
    const char *j3 = "results/mqar_jobs/14_recall_by_mechanism.3.tsv";
    const char *copy = "results/mqar_jobs/14_recall_by_mechanism.3.copy.tsv";
    assert_int_equal(run_in("conflict", "cp %s %s && KDALAB_RESUME=1 %s --out results " TINY,
                            j3, copy, exe), 0);
    char *table = text_in("conflict", "results/14_recall_by_mechanism.tsv");
    /* the copy (read first: its name sorts first) says another accuracy */
    const char *edit = "awk -F \"\\t\" -v OFS=\"\\t\" \"{ \\$15 = 0.25 } 1\"";
    assert_int_equal(run_in("conflict", "%s %s > e && mv e %s && KDALAB_RESUME=1 %s --out "
                                        "results " TINY, edit, j3, copy, exe), 1);
    char *err = text_in("conflict", "stderr");
    char want[512];
    snprintf(want, sizeof want, "record one model differently: %s:1 (accuracy 0.25, ", copy);
    if (!strstr(err, want) || !strstr(err, j3))
        fail_msg("stderr lacks \"%s\" and %s:\n%s", want, j3, err);
    free(err);
    char *now = text_in("conflict", "results/14_recall_by_mechanism.tsv");
    assert_string_equal(now, table); /* no table written */
    free(now);
    /* the same in one file: its first line and a later one */
    assert_int_equal(run_in("conflict", "rm %s && %s %s >> %s && KDALAB_RESUME=1 %s --out "
                                        "results " TINY, copy, edit, j3, j3, exe), 1);
    err = text_in("conflict", "stderr");
    snprintf(want, sizeof want, "%s:1 (accuracy ", j3);
    char want2[512];
    snprintf(want2, sizeof want2, "%s:2 (accuracy 0.25, ", j3);
    if (!strstr(err, want) || !strstr(err, want2))
        fail_msg("stderr lacks \"%s\" and \"%s\":\n%s", want, want2, err);
    free(err);
    free(table);
}

/* Fail unless text holds want. */
static void assert_holds(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("lacks \"%s\":\n%s", want, text);
}

/* A job killed (GNU parallel's --resume would count it as done), the
 * documented way on: the assembling run names the missing job and refuses,
 * parallel --resume-failed with the job log runs it again, and the
 * assembling run then gives the sequential run's tables. */
static void killed_job_rerun_by_resume_failed(void **state)
{
    (void)state;
    if (!have_parallel)
        skip();
    assert_int_equal(run_in("killed", "%s --out results " TINY " --list-jobs >jobs.txt", exe), 0);
    /* the fourth job (--job 3) killed before it trains, as by a reboot or a
     * time limit: the job log records signal 9 */
    const char *par = "OMP_NUM_THREADS=1 parallel --will-cite -j2 --joblog jobs.log";
    assert_int_equal(run_in("killed", "%s \"[ {#} = 4 ] && kill -KILL \\$\\$; sh -c {}\" "
                                      "<jobs.txt", par), 1);
    char p[1024];
    snprintf(p, sizeof p, "%s/killed/results/mqar_jobs/14_recall_by_mechanism.3.tsv", tmpdir);
    assert_false(tcli_exists(p));
    /* --resume counts the killed job as done: nothing runs */
    assert_int_equal(run_in("killed", "%s --resume <jobs.txt", par), 0);
    assert_false(tcli_exists(p));

    /* the assembling run names what is missing and how to run it, trains nothing */
    assert_int_equal(run_in("killed", "KDALAB_RESUME=1 %s --out results " TINY, exe), 1);
    char *err = text_in("killed", "stderr");
    assert_holds(err, "14_recall_by_mechanism: 9 of 10 models of this sweep are in the ledgers "
                      "under results/; 1 is in none (job 3):\n  job 3: linear_attention "
                      "(L = 2, d = 16), 16 pairs, lr 0.003, seed 1, 2 steps\n");
    assert_holds(err, "--resume-failed");
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "\n  %s --out results " TINY " --job 3\n", exe);
    assert_holds(err, want);
    assert_holds(err, "KDALAB_TRAIN_MISSING=1");
    free(err);
    char q[1024];
    snprintf(q, sizeof q, "%s/killed/results/mqar_models.tsv", tmpdir);
    assert_false(tcli_exists(q)); /* nothing trained */
    snprintf(q, sizeof q, "%s/killed/results/14_recall_by_mechanism.tsv", tmpdir);
    assert_false(tcli_exists(q)); /* no table */

    /* --resume-failed runs the killed job again, then the assembly goes through */
    assert_int_equal(run_in("killed", "%s --resume-failed <jobs.txt", par), 0);
    assert_true(tcli_exists(p));
    assert_int_equal(run_in("killed", "KDALAB_RESUME=1 %s --out results " TINY, exe), 0);
    err = text_in("killed", "stderr");
    assert_holds(err, "14_recall_by_mechanism: all 10 models of this sweep are in the ledgers "
                      "under results/: training none\n");
    free(err);
    snprintf(q, sizeof q, "%s/killed/results/mqar_models.tsv", tmpdir);
    assert_false(tcli_exists(q)); /* nothing trained */
    assert_int_equal(run_in("killed-seq", "%s --out results " TINY, exe), 0);
    char *a = text_in("killed", "results/14_recall_by_mechanism.tsv");
    char *b = text_in("killed-seq", "results/14_recall_by_mechanism.tsv");
    sweep_assert_same_but_times(a, b);
    free(a);
    free(b);
    a = text_in("killed", "results/14_recall_summary.tsv");
    b = text_in("killed-seq", "results/14_recall_summary.tsv");
    assert_string_equal(a, b);
    free(a);
    free(b);
}

/* The assembling run refuses to train (without GNU parallel: the jobs run one
 * after another): a job whose ledger is missing, and every model when its
 * flags are not the listing's (--steps 3 for 2), naming the setting;
 * KDALAB_TRAIN_MISSING=1 trains them. */
static void assembling_refuses_to_train(void **state)
{
    (void)state;
    assert_int_equal(run_in("refuse", "%s --out results " TINY " --list-jobs >jobs.txt && "
                                      "sh jobs.txt && rm "
                                      "results/mqar_jobs/14_recall_by_mechanism.7.tsv", exe), 0);
    assert_int_equal(run_in("refuse", "KDALAB_RESUME=1 %s --out results " TINY, exe), 1);
    char *err = text_in("refuse", "stderr");
    assert_holds(err, "9 of 10 models of this sweep are in the ledgers under results/; 1 is in "
                      "none (job 7):\n  job 7: gated_deltanet (L = 2, d = 16), 16 pairs");
    free(err);
    char q[1024];
    snprintf(q, sizeof q, "%s/refuse/results/mqar_models.tsv", tmpdir);
    assert_false(tcli_exists(q));

    /* flags that are not the listing's: every model missing, the setting named */
    assert_int_equal(run_in("refuse", "KDALAB_RESUME=1 %s --out results --steps 3 --test 4",
                            exe), 1);
    err = text_in("refuse", "stderr");
    assert_holds(err, "0 of 10 models of this sweep are in the ledgers under results/; 10 are "
                      "in none (jobs 0-9):\n");
    assert_holds(err, "the ledgers hold 9 models of this experiment at other settings than "
                      "this run's:\n  steps 2 (this run: 3): 9 models, e.g. "
                      "results/mqar_jobs/14_recall_by_mechanism.0.tsv:1\n");
    assert_holds(err, "give the flags the ledgers' models were made with");
    free(err);
    assert_false(tcli_exists(q));

    /* KDALAB_TRAIN_MISSING=1: the missing job's model is trained here */
    assert_int_equal(run_in("refuse", "KDALAB_TRAIN_MISSING=1 KDALAB_RESUME=1 %s --out results "
                                      TINY, exe), 0);
    err = text_in("refuse", "stderr");
    assert_holds(err, "KDALAB_TRAIN_MISSING is set: training the 1 missing model here\n");
    free(err);
    char *ledger = text_in("refuse", "results/mqar_models.tsv");
    assert_int_equal(count_lines(ledger), 1);
    assert_holds(ledger, "\tgated_deltanet\t");
    free(ledger);
}

static void slurm_script_parses(void **state)
{
    (void)state;
    assert_int_equal(system("bash -n scripts/sweep_slurm.sh"), 0);
}

static int setup(void **state)
{
    (void)state;
    have_parallel = system("command -v parallel >/dev/null") == 0;
    if (!have_parallel)
        fprintf(stderr, "test_sweep_jobs: GNU parallel not found (apt-get install parallel): "
                        "its tests are skipped\n");
    return sweep_setup("test_sweep_jobs", "14_recall_by_mechanism", exe, sizeof exe,
                       "kdalab_jobs", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jobs_listed),
        cmocka_unit_test(resumed_list_leaves_out_found_jobs),
        cmocka_unit_test(jobs_in_parallel_give_the_sequential_tables),
        cmocka_unit_test(job_errors), cmocka_unit_test(resume_in_a_dir_named_like_a_pattern),
        cmocka_unit_test(conflicting_ledgers),
        cmocka_unit_test(killed_job_rerun_by_resume_failed),
        cmocka_unit_test(assembling_refuses_to_train),
        cmocka_unit_test(slurm_script_parses)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
