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
 *   - the Slurm array script is valid bash (`bash -n`; it is not run).
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
             "mkdir -p '%s/%s' && cd '%s/%s' && env -u KDALAB_FULL -u KDALAB_RESUME sh -c '%s' "
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
    /* listing trains nothing and writes no table */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/list/two words", tmpdir);
    assert_int_equal(tcli_count_entries(dir, ""), 2); /* "." and ".." only */
    free(list);

    assert_int_equal(run_in("list", "KDALAB_FULL=1 %s " TINY " --list-jobs", exe), 0);
    list = text_in("list", "stdout");
    assert_int_equal(count_lines(list), 120); /* 5 mixers x 4 pair counts x 2 lr x 3 seeds */
    assert_int_equal(strncmp(list, "KDALAB_FULL=1 ", 14), 0);
    free(list);
}

static void jobs_in_parallel_give_the_sequential_tables(void **state)
{
    (void)state;
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

static void slurm_script_parses(void **state)
{
    (void)state;
    assert_int_equal(system("bash -n scripts/sweep_slurm.sh"), 0);
}

static int setup(void **state)
{
    (void)state;
    if (system("command -v parallel >/dev/null") != 0) {
        fprintf(stderr, "test_sweep_jobs: GNU parallel not found: apt-get install parallel\n");
        return -1;
    }
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
        cmocka_unit_test(jobs_in_parallel_give_the_sequential_tables),
        cmocka_unit_test(job_errors), cmocka_unit_test(resume_in_a_dir_named_like_a_pattern),
        cmocka_unit_test(slurm_script_parses)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
