/*
 * tests/test_sweep_resume.c — the training experiments' model ledger
 * (experiments/mqar_train.c): every trained model is appended to
 * DIR/mqar_models.tsv, and with KDALAB_RESUME=1 a model already there is read
 * back instead of trained.
 *
 * Runs $KDALAB_BIN/14_recall_by_mechanism (bin by default) in its reduced
 * sweep cut to 2 optimiser steps and a 4-sequence test set: ten tiny models,
 * about a second. Checked:
 *   - the first run writes one complete ledger line per model;
 *   - a resuming run gives the same tables, byte for byte, trains nothing
 *     (the ledger does not grow) and really reads the ledger (an accuracy
 *     edited in the ledger is the one the table prints);
 *   - a line cut short (a run killed while writing it) is not trusted: that
 *     model is trained again and appended on a line of its own, with the
 *     bits of the first run; the cut line is ended with a mark, and the next
 *     resuming run passes it over (trains nothing, no error);
 *   - without KDALAB_RESUME the ledger is not read (the edit is ignored);
 *   - every field of a line with the model's key is checked against what the
 *     model can have recorded (ledger_bad_values): an accuracy NaN, 7.5, -inf
 *     or empty, a negative loss, time or tokens/s, a loss of inf outside a
 *     diverged run's record, a steps_to_95 that is not -1 or a step from the
 *     50-step window to the model's steps (1, 999999999; 49 and 61 for a
 *     60-step model), a made_with or experiment not as written, a field more:
 *     the run stops
 *     before training with one line naming file:line, the field and its
 *     value, no ledger or table changed; a diverged run's record (accuracy 0,
 *     loss inf) is read back as it was written, and so are steps_to_95 50 and
 *     60 for a 60-step model;
 *   - reads of the ledger end (ledger_bounded_reads, each run under
 *     `timeout -s KILL`, so a hang fails): a link to /dev/full, a FIFO, a
 *     directory, a line longer than any ledger line are refused with one
 *     clear error; a line of the longest length is passed over;
 *   - DIR/mqar_jobs that is not a directory (a file, a link loop, a link to
 *     nothing) or cannot be listed (mode 0) stops a resuming run with one
 *     error naming it and why, before anything trains (jobs_dir_unreadable).
 * What a run reads and trains before it starts: test_sweep_census.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe[512];

#define N_MODELS 10 /* 5 mixers x 2 pair counts, one seed, one lr */


/* The experiment with env and flags into dir (sweep_run_status). */
static int run_flags(const char *dir, const char *env, const char *flags)
{
    return sweep_run_status(exe, tmpdir, dir, env, flags);
}

/* The tiny sweep (sweep_run_tiny's), and one whose models can reach the
 * 50-step window (one sequence a step keeps it quick). */
#define TINY "--steps 2 --test 4"
#define STEPS60 "--steps 60 --batch 1 --test 4"

static int run_status(const char *dir, const char *env) { return run_flags(dir, env, TINY); }

static size_t lines(const char *s) { return sweep_lines(s); }
/* Replace the accuracy (field 15) of the ledger's first line by 0.5. */
static char *edit_first_accuracy(const char *ledger)
{
    char *out = malloc(strlen(ledger) + 32);
    assert_non_null(out);
    const char *p = ledger;
    for (int tabs = 0; tabs < 14; p++)
        if (*p == '\t')
            tabs++;
        else
            assert_true(*p != '\n' && *p != '\0');
    const char *end = strchr(p, '\t');
    assert_non_null(end);
    sprintf(out, "%.*s0.5%s", (int)(p - ledger), ledger, end);
    return out;
}

static void ledger_resume(void **state)
{
    (void)state;
    remove(sweep_path(tmpdir, "mqar_models.tsv"));
    sweep_run_tiny(exe, tmpdir, "");
    char *ledger = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *table = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    char *summary = test_read_text(sweep_path(tmpdir, "14_recall_summary.tsv"));
    assert_int_equal(lines(ledger), N_MODELS);
    assert_non_null(strstr(ledger, "fp32\tattention\t2\t32\t2\t1\t40\t4\t65\t16\t2\t4\t"));
    /* each line records what made it (version, BLAS kernels, SIMD level) */
    assert_non_null(strstr(ledger, "\tkdalab " KDALAB_VERSION " blas="));
    assert_non_null(strstr(ledger, " simd="));
    /* and when training reached 95 % (2 steps: never) */
    assert_non_null(strstr(ledger, "\tsteps_to_95=-1\tkdalab "));

    /* resuming: same tables, nothing trained */
    sweep_run_tiny(exe, tmpdir, "KDALAB_RESUME=1");
    char *again = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    char *s_again = test_read_text(sweep_path(tmpdir, "14_recall_summary.tsv"));
    assert_string_equal(again, table);
    assert_string_equal(s_again, summary);
    char *l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_string_equal(l_again, ledger);
    free(again);
    free(s_again);
    free(l_again);

    /* a ledger from before the made_with field reads the same: nothing trained */
    char *older = strdup(ledger);
    assert_non_null(older);
    char *w = older;
    for (const char *r = ledger; *r; r++) {
        if (strncmp(r, "\tkdalab ", 8) == 0)
            r = strchr(r, '\n');
        *w++ = *r;
    }
    *w = '\0';
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), older);
    sweep_run_tiny(exe, tmpdir, "KDALAB_RESUME=1");
    again = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    assert_string_equal(again, table);
    free(again);
    l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_string_equal(l_again, older);
    free(l_again);
    free(older);

    /* it really reads the ledger: an edited accuracy is what the table says */
    char *edited = edit_first_accuracy(ledger);
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), edited);
    sweep_run_tiny(exe, tmpdir, "KDALAB_RESUME=1");
    again = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    assert_non_null(strstr(again, "\t0.5000\t"));
    free(again);
    /* ... and without KDALAB_RESUME it does not */
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), edited);
    sweep_run_tiny(exe, tmpdir, "");
    again = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    sweep_assert_same_but_times(again, table);
    free(again);
    free(edited);

    /* a last line cut short is retrained and appended, same bits */
    char *cut = strdup(ledger);
    assert_non_null(cut);
    char *last = cut + strlen(cut) - 1; /* the final '\n' */
    while (last > cut && last[-1] != '\n')
        last--;
    last[strlen(last) / 2] = '\0';
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), cut);
    sweep_run_tiny(exe, tmpdir, "KDALAB_RESUME=1");
    again = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    sweep_assert_same_but_times(again, table);
    l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    /* 9 whole lines, the cut one (ended by the append), its retrain */
    assert_int_equal(lines(l_again), N_MODELS + 1);
    const char *tail = strrchr(ledger, '\n');
    while (tail > ledger && tail[-1] != '\n')
        tail--;
    /* the retrained line's key and accuracy equal the original last line's */
    const char *acc_end = tail;
    for (int tabs = 0; tabs < 15; acc_end++)
        if (*acc_end == '\t')
            tabs++;
    char key_acc[512];
    snprintf(key_acc, sizeof key_acc, "\n%.*s", (int)(acc_end - tail), tail);
    assert_non_null(strstr(l_again, key_acc));
    /* the cut line was ended as one (LAB_LEDGER_CUT), and the next resuming
     * run passes it over: nothing trained, no error */
    assert_non_null(strstr(l_again, "\tcut-short\n"));
    assert_int_equal(run_status(tmpdir, "KDALAB_RESUME=1"), 0);
    char *l_third = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_string_equal(l_third, l_again);
    free(l_third);
    free(again);
    free(l_again);
    free(cut);
    free(ledger);
    free(table);
    free(summary);
}

/* The ledger with field `field` (0-based; the key has 14, then accuracy,
 * loss, time, tokens/s) of line `line` (0-based) replaced by text. */
static char *edit_field(const char *ledger, int line, int field, const char *text)
{
    char *out = malloc(strlen(ledger) + strlen(text) + 1);
    assert_non_null(out);
    const char *p = ledger;
    for (int l = 0; l < line; p++)
        if (*p == '\n')
            l++;
    for (int tabs = 0; tabs < field; p++)
        if (*p == '\t')
            tabs++;
    const char *end = p + strcspn(p, "\t\n");
    sprintf(out, "%.*s%s%s", (int)(p - ledger), ledger, text, end);
    return out;
}

/* One bad field: the resuming run stops before training (status 1) with one
 * line naming the file, the line, the field and its value (want), and
 * changes no ledger and no table. */
static void assert_bad_field(const char *flags, const char *ledger, const char *table,
                             const char *want)
{
    char full[1024];
    snprintf(full, sizeof full, "%s:%s", sweep_path(tmpdir, "mqar_models.tsv"), want);
    int st = run_flags(tmpdir, "KDALAB_RESUME=1", flags);
    char *err = test_read_text(sweep_path(tmpdir, "stderr"));
    if (st != 1 || !strstr(err, full))
        fail_msg("status %d (want 1), stderr:\n%s\nwant \"%s\"", st, err, full);
    char *l_now = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *t_now = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    assert_string_equal(l_now, ledger);
    assert_string_equal(t_now, table);
    free(err);
    free(l_now);
    free(t_now);
}

static void ledger_bad_values(void **state)
{
    (void)state;
    remove(sweep_path(tmpdir, "mqar_models.tsv"));
    sweep_run_tiny(exe, tmpdir, "");
    char *ledger = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *table = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    assert_int_equal(lines(ledger), N_MODELS);
    /* one fault at a time, on line i % N_MODELS + 1 (1-based): fields 14-20
     * are accuracy, test_loss, train_s, tokens_per_s, steps_to_95, made_with,
     * experiment */
    static const struct {
        int field;
        const char *text, *want;
    } fault[] = {
        {14, "nan", "accuracy 'nan' is not a number"},
        {14, "7.5", "accuracy '7.5' is not in [0, 1]"},
        {14, "-inf", "accuracy '-inf' is not in [0, 1]"},
        {15, "-1", "test_loss '-1' is not >= 0"},
        {16, "-0.5", "train_s '-0.5' is not a finite number >= 0"},
        {14, "", "accuracy '' is not a number"},
        {15, "inf", "test_loss 'inf' (a diverged run's loss) with accuracy, train_s or "
                    "tokens_per_s not 0"},
        {17, "-3", "tokens_per_s '-3' is not a finite number >= 0"},
        {18, "steps_to_95=x", "steps_to_95 'x' is not -1: this model's 2 steps are fewer "
                              "than the 50-step window"},
        /* a step inside the window, or past the model's steps: no run records it */
        {18, "steps_to_95=1", "steps_to_95 '1' is not -1"},
        {18, "steps_to_95=999999999", "steps_to_95 '999999999' is not -1"},
        {18, "steps_to_95=-2", "steps_to_95 '-2' is not -1"},
        {19, "kdalab 0.1.0", "made_with 'kdalab 0.1.0' is not 'kdalab VERSION blas=KERNELS "
                             "simd=LEVEL'"},
        {20, "experiment=", "experiment 'experiment=' is not 'experiment=NAME'"},
        {20, "experiment=14_recall_by_mechanism\tmore", "a field after experiment 'more' is "
                                                       "not a ledger field"},
    };
    for (size_t i = 0; i < sizeof fault / sizeof fault[0]; i++) {
        const int line = (int)(i % N_MODELS);
        char *bad = edit_field(ledger, line, fault[i].field, fault[i].text);
        test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), bad);
        char want[512];
        snprintf(want, sizeof want, "%d: %s", line + 1, fault[i].want);
        assert_bad_field(TINY, bad, table, want);
        free(bad);
    }
    /* a diverged run's record (accuracy 0, loss inf, time and tokens/s 0, as
     * lab_mqar_train writes it) is read back as it was written */
    char *bad = strdup(ledger);
    assert_non_null(bad);
    const char *diverged[] = {"0", "inf", "0", "0"};
    for (int f = 0; f < 4; f++) {
        char *next = edit_field(bad, N_MODELS - 1, 14 + f, diverged[f]);
        free(bad);
        bad = next;
    }
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), bad);
    assert_int_equal(run_status(tmpdir, "KDALAB_RESUME=1"), 0);
    char *div = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    assert_non_null(strstr(div, "\t0.0000\tinf\t"));
    char *after = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_string_equal(after, bad); /* nothing trained */
    free(after);
    free(div);
    free(bad);
    free(ledger);
    free(table);

    /* a model of 60 steps records steps_to_95 -1 or 50 (the first step with a
     * full window) to 60 */
    remove(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_int_equal(run_flags(tmpdir, "", STEPS60), 0);
    ledger = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    table = test_read_text(sweep_path(tmpdir, "14_recall_by_mechanism.tsv"));
    static const char *const past[] = {"steps_to_95=49", "steps_to_95=61",
                                       "steps_to_95=999999999"};
    for (int i = 0; i < 3; i++) {
        bad = edit_field(ledger, 2, 18, past[i]);
        test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), bad);
        char want[512];
        snprintf(want, sizeof want, "3: steps_to_95 '%s' is not -1 (never) or a step from 50 "
                 "(the first with a full window) to 60 (this model's steps)", past[i] + 12);
        assert_bad_field(STEPS60, bad, table, want);
        free(bad);
    }
    for (int i = 0; i < 2; i++) {
        bad = edit_field(ledger, 2, 18, i ? "steps_to_95=60" : "steps_to_95=50");
        test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), bad);
        assert_int_equal(run_flags(tmpdir, "KDALAB_RESUME=1", STEPS60), 0);
        after = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
        assert_string_equal(after, bad); /* read back, nothing trained */
        free(after);
        free(bad);
    }
    free(ledger);
    free(table);
}

/* A run refused with one clear line (status 1, stderr holding want). */
static void assert_refused(const char *dir, const char *env, const char *want)
{
    int st = run_status(dir, env);
    char *err = test_read_text(sweep_path(tmpdir, "stderr"));
    if (st != 1 || !strstr(err, want))
        fail_msg("--out %s (%s): status %d (want 1, -1 is killed), stderr:\n%s\nwant \"%s\"",
                 dir, env, st, err, want);
    free(err);
}

static void ledger_bounded_reads(void **state)
{
    (void)state;
    char dir[512], ledger[600], cmd[1400];
    /* a link to /dev/full: reads that never end */
    snprintf(dir, sizeof dir, "%s/full", tmpdir);
    snprintf(ledger, sizeof ledger, "%s/mqar_models.tsv", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && ln -sf /dev/full %s", dir, ledger);
    assert_int_equal(system(cmd), 0);
    assert_refused(dir, "KDALAB_RESUME=1", "is a character device, not a regular file");
    assert_refused(dir, "", "is a character device, not a regular file");
    /* a FIFO: opening it would wait for a writer */
    snprintf(dir, sizeof dir, "%s/fifo", tmpdir);
    snprintf(ledger, sizeof ledger, "%s/mqar_models.tsv", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && mkfifo %s", dir, ledger);
    assert_int_equal(system(cmd), 0);
    assert_refused(dir, "KDALAB_RESUME=1", "is a FIFO, not a regular file");
    /* a directory */
    snprintf(dir, sizeof dir, "%s/dir", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/mqar_models.tsv", dir);
    assert_int_equal(system(cmd), 0);
    assert_refused(dir, "KDALAB_RESUME=1", "is a directory, not a regular file");
    /* a regular file of zeros without a line end, as /dev/full reads */
    snprintf(dir, sizeof dir, "%s/long", tmpdir);
    snprintf(ledger, sizeof ledger, "%s/mqar_models.tsv", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && head -c 100000 /dev/zero > %s", dir, ledger);
    assert_int_equal(system(cmd), 0);
    char want[700];
    snprintf(want, sizeof want, "%s:1: a line longer than 1023 bytes", ledger);
    assert_refused(dir, "KDALAB_RESUME=1", want);
    /* a line of 1023 bytes (the '\n' included), the longest a ledger line can
     * be, is passed over; one byte more is refused, naming its line */
    remove(sweep_path(tmpdir, "mqar_models.tsv"));
    sweep_run_tiny(exe, tmpdir, "");
    char *good = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *text = malloc(strlen(good) + 2048);
    assert_non_null(text);
    strcpy(text, good);
    size_t n = strlen(text);
    memset(text + n, 'x', 1022);
    text[n + 1022] = '\n';
    text[n + 1023] = '\0';
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), text);
    assert_int_equal(run_status(tmpdir, "KDALAB_RESUME=1"), 0);
    char *l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_string_equal(l_again, text); /* nothing trained */
    free(l_again);
    memset(text + n, 'x', 1023);
    text[n + 1023] = '\n';
    text[n + 1024] = '\0';
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), text);
    snprintf(want, sizeof want, "%s:%d: a line longer than 1023 bytes",
             sweep_path(tmpdir, "mqar_models.tsv"),
             N_MODELS + 1);
    assert_refused(tmpdir, "KDALAB_RESUME=1", want);
    free(text);
    free(good);
}

/* DIR/mqar_jobs, where a resuming run reads the jobs' ledgers, is there but
 * cannot be read as a directory: one error naming it and the reason, nothing
 * trained (passing over it would train every model its ledgers hold again). */
static void jobs_dir_unreadable(void **state)
{
    (void)state;
    char dir[300], jobs[320], cmd[1400], want[800];
    snprintf(dir, sizeof dir, "%s/jobsdir", tmpdir);
    snprintf(jobs, sizeof jobs, "%s/mqar_jobs", dir);
    static const struct {
        const char *make, *why;
    } bad[] = {
        {"echo not a directory > '%s'", "not a directory"},
        {"ln -s mqar_jobs '%s'", "Too many levels of symbolic links"},
        {"ln -s nowhere '%s'", "a symbolic link to nothing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && ", dir, dir);
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), bad[i].make, jobs);
        assert_int_equal(system(cmd), 0);
        snprintf(want, sizeof want, "the jobs' ledgers '%s': %s", jobs, bad[i].why);
        assert_refused(dir, "KDALAB_RESUME=1", want);
        snprintf(cmd, sizeof cmd, "%s/mqar_models.tsv", dir);
        assert_false(tcli_exists(cmd)); /* nothing trained */
    }
    /* a directory this process may not list: mode 0 (as root, which may
     * list anything, the run is made as uid 1000 through setpriv) */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && chmod 777 '%s' && chmod 0 '%s'",
             dir, jobs, dir, jobs);
    assert_int_equal(system(cmd), 0);
    const char *as = "";
    if (geteuid() == 0) {
        as = "setpriv --reuid=1000 --regid=1000 --clear-groups";
        snprintf(cmd, sizeof cmd, "%s %s --help >/dev/null 2>&1", as, exe);
        if (chmod(tmpdir, 0711) != 0 || system(cmd) != 0) {
            printf("    root, and %s cannot be run as uid 1000 here: the mode-0 case skipped\n",
                   exe);
            chmod(tmpdir, 0700);
            return;
        }
    }
    snprintf(want, sizeof want, "the jobs' ledgers '%s': Permission denied", jobs);
    snprintf(cmd, sizeof cmd, "KDALAB_RESUME=1 %s", as);
    assert_refused(dir, cmd, want);
    assert_int_equal(chmod(tmpdir, 0700), 0);
}

static int setup(void **state)
{
    (void)state;
    return sweep_setup("test_sweep_resume", "14_recall_by_mechanism", exe, sizeof exe,
                       "kdalab_resume", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ledger_resume),
                                       cmocka_unit_test(ledger_bad_values),
                                       cmocka_unit_test(ledger_bounded_reads),
                                       cmocka_unit_test(jobs_dir_unreadable)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
