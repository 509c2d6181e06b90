/*
 * tests/test_sweep_ladder.c — the two sweeps after the verdict rule:
 * experiment 22 (where Gated DeltaNet and KDA train: a ladder of scales)
 * and 23 (the report's palindrome, stack and MQAR for the lineage).
 *
 * Runs $KDALAB_BIN/22_trainable_regime and 23_report_tasks (bin by default)
 * cut to 2 optimiser steps and a 4-sequence test set. Checked:
 *   - 22's full sweep is 168 jobs, its most expensive point (64:128, D = 128)
 *     first: job 0 trains a model of width 128 at T = 128 on Zoology's split;
 *     a resuming run of the reduced sweep trains nothing and writes the same
 *     summary, one row per (point, task, mixer), and prints its verdict;
 *   - a malformed --points (a missing field, a zero, a trailing comma, a
 *     letter), a T not below the vocabulary, a bad --lrs: one line, exit 2;
 *   - 23's reduced sweep: a row per (task, mixer) in its summary, and the
 *     verdict rule's line for each task; its full sweep is 240 jobs, 160
 *     with --tasks mqar --seeds 16; a reduced run with --tasks stack
 *     tabulates the stack alone; a bad task name is one line, exit 2;
 *   - 24's full sweep is 288 jobs, 96 with --tasks overwrite; a reduced run
 *     with --tasks overwrite tabulates that task alone; an unknown task
 *     name, or a list naming none, is one line, exit 2.
 */
#define _XOPEN_SOURCE 700
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe22[PATH_MAX], exe23[PATH_MAX], exe24[PATH_MAX];

/* Run a shell command (KDALAB_FULL, KDALAB_RESUME unset unless it sets
 * them) with stdout and stderr to tmpdir/out and tmpdir/err; its exit
 * status (-1: it did not exit). */
static int sh(const char *fmt, ...)
{
    char body[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "env -u KDALAB_FULL -u KDALAB_RESUME sh -c '%s' >%s/out 2>%s/err",
             body, tmpdir, tmpdir);
    int st = system(cmd);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/* The data lines of text (not '#' comments). */
static size_t data_lines(const char *text)
{
    size_t n = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        n += *line != '#' && *line != '\n';
        line = nl ? nl + 1 : line + strlen(line);
    }
    return n;
}

static void regime_jobs_and_resume(void **state)
{
    (void)state;
    assert_int_equal(sh("KDALAB_FULL=1 %s --list-jobs", exe22), 0);
    char *list = test_read_text(sweep_path(tmpdir, "out"));
    assert_int_equal(data_lines(list), 168);
    free(list);
    /* job 0: the most expensive point, 64:128 (D = 128, T = 128, 16 pairs) */
    assert_int_equal(sh("KDALAB_FULL=1 %s --out %s/full --job 0 --steps 1 --test 4", exe22,
                        tmpdir), 0);
    char *job = test_read_text(sweep_path(tmpdir, "full/mqar_jobs/22_trainable_regime.0.tsv"));
    assert_non_null(strstr(job, "fp32\tgated_deltanet\t2\t128\t2\t1\t128\t16\t129\t32\t1\t4\t"));
    assert_non_null(strstr(job, "\ttask=zoology/0/0\tdata=zoology/0/0\t"));
    free(job);

    sweep_run_tiny(exe22, tmpdir, "");
    char *sum = test_read_text(sweep_path(tmpdir, "22_regime_summary.tsv"));
    char *out = test_read_text(sweep_path(tmpdir, "stdout"));
    assert_int_equal(data_lines(sum), 4); /* one point x 2 tasks x 2 mixers */
    assert_non_null(strstr(out, "  verdict: "));
    sweep_run_tiny(exe22, tmpdir, "KDALAB_RESUME=1");
    char *sum2 = test_read_text(sweep_path(tmpdir, "22_regime_summary.tsv"));
    char *err = test_read_text(sweep_path(tmpdir, "stderr"));
    assert_string_equal(sum, sum2);
    assert_null(strstr(err, "diverged"));
    free(sum), free(sum2), free(out), free(err);
}

static void regime_bad_flags(void **state)
{
    (void)state;
    const char *bad[] = {"--points 16:64", "--points 0:64:10", "--points 16:64:10,",
                         "--points 16:x:10", "--points 16:64:10 --vocab 64", "--lrs 0.1,,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sh("%s %s --out %s/bad", exe22, bad[i], tmpdir), 2);
        char *err = test_read_text(sweep_path(tmpdir, "err"));
        assert_non_null(strstr(err, "22_trainable_regime: "));
        free(err);
    }
}

static void report_tasks(void **state)
{
    (void)state;
    assert_int_equal(sh("KDALAB_FULL=1 %s --list-jobs", exe23), 0);
    char *list = test_read_text(sweep_path(tmpdir, "out"));
    assert_int_equal(data_lines(list), 240);
    free(list);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/r23", tmpdir);
    assert_int_equal(sh("mkdir -p %s", dir), 0);
    sweep_run_tiny(exe23, dir, "");
    char *sum = test_read_text(sweep_path(dir, "23_report_summary.tsv"));
    char *out = test_read_text(sweep_path(dir, "stdout"));
    assert_int_equal(data_lines(sum), 6); /* 3 tasks x DeltaNet, KDA */
    for (const char *t = "palindrome\0stack\0mqar\0"; *t; t += strlen(t) + 1) {
        char want[64];
        snprintf(want, sizeof want, "verdict (%s): KDA ", t);
        assert_non_null(strstr(out, want));
    }
    free(sum), free(out);
}

static void report_tasks_subset(void **state)
{
    (void)state;
    assert_int_equal(sh("KDALAB_FULL=1 %s --list-jobs --tasks mqar --seeds 16", exe23), 0);
    char *list = test_read_text(sweep_path(tmpdir, "out"));
    assert_int_equal(data_lines(list), 160); /* 16 seeds x 5 mixers x 2 rates */
    assert_non_null(strstr(list, "--tasks mqar --seeds 16 --job 159"));
    free(list);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/r23s", tmpdir);
    assert_int_equal(sh("mkdir -p %s && %s --tasks stack --out %s --steps 2 --test 4", dir, exe23,
                        dir), 0);
    char *sum = test_read_text(sweep_path(dir, "23_report_summary.tsv"));
    assert_int_equal(data_lines(sum), 2); /* stack x DeltaNet, KDA */
    assert_null(strstr(sum, "\npalindrome\t")); /* no data row; the title names every task */
    assert_non_null(strstr(sum, "\nstack\t"));
    free(sum);
    char *out = test_read_text(sweep_path(tmpdir, "out"));
    assert_non_null(strstr(out, "verdict (stack): KDA "));
    assert_null(strstr(out, "verdict (mqar)"));
    free(out);
    assert_int_equal(sh("%s --tasks stack,zoology --out %s", exe23, dir), 2);
    char *err = test_read_text(sweep_path(tmpdir, "err"));
    assert_non_null(strstr(err, "'zoology' is not one of palindrome, stack, mqar"));
    free(err);
}

static void grid_tasks(void **state)
{
    (void)state;
    const size_t want[2] = {288, 96};
    for (int sub = 0; sub < 2; sub++) {
        assert_int_equal(sh("KDALAB_FULL=1 %s --list-jobs%s", exe24,
                            sub ? " --tasks overwrite" : ""), 0);
        char *list = test_read_text(sweep_path(tmpdir, "out"));
        assert_int_equal(data_lines(list), want[sub]);
        assert_true(!sub || strstr(list, "--tasks overwrite --job 95"));
        free(list);
    }
    char dir[300];
    snprintf(dir, sizeof dir, "%s/r24", tmpdir);
    assert_int_equal(sh("mkdir -p %s && %s --tasks overwrite --out %s --steps 2 --test 4",
                        dir, exe24, dir), 0);
    char *sum = test_read_text(sweep_path(dir, "24_grid_summary.tsv"));
    assert_int_equal(data_lines(sum), 2); /* overwrite x GLA, KDA */
    assert_null(strstr(sum, "zoology"));
    assert_non_null(strstr(sum, "overwrite"));
    free(sum);
    assert_int_equal(sh("%s --tasks overwrite,mqar --out %s", exe24, dir), 2);
    char *err = test_read_text(sweep_path(tmpdir, "err"));
    assert_non_null(strstr(err, "'mqar' is not one of zoology, overwrite, recent"));
    free(err);
    assert_int_equal(sh("%s --tasks , --out %s", exe24, dir), 2);
    err = test_read_text(sweep_path(tmpdir, "err"));
    assert_non_null(strstr(err, "names no task"));
    free(err);
}

static int setup(void **state)
{
    (void)state;
    if (sweep_setup("test_sweep_ladder", "22_trainable_regime", exe22, sizeof exe22,
                    "kdalab_ladder", tmpdir, sizeof tmpdir) != 0)
        return -1;
    char rel[PATH_MAX];
    const char *bin = getenv("KDALAB_BIN");
    snprintf(rel, sizeof rel, "%s/23_report_tasks", bin && *bin ? bin : "bin");
    if (!realpath(rel, exe23)) {
        fprintf(stderr, "test_sweep_ladder: %s not found: run `make` (or set KDALAB_BIN)\n", rel);
        return -1;
    }
    snprintf(rel, sizeof rel, "%s/24_grid", bin && *bin ? bin : "bin");
    if (!realpath(rel, exe24)) {
        fprintf(stderr, "test_sweep_ladder: %s not found: run `make` (or set KDALAB_BIN)\n", rel);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(regime_jobs_and_resume),
        cmocka_unit_test(regime_bad_flags),
        cmocka_unit_test(report_tasks),
        cmocka_unit_test(report_tasks_subset),
        cmocka_unit_test(grid_tasks),
    };
    return cmocka_run_group_tests_name("sweep_ladder", tests, setup, teardown);
}
