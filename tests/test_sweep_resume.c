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
 *     bits of the first run;
 *   - without KDALAB_RESUME the ledger is not read (the edit is ignored).
 */
#define _GNU_SOURCE /* memrchr */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"

static char tmpdir[256];
static char exe[512];

#define N_MODELS 10 /* 5 mixers x 2 pair counts, one seed, one lr */

/* Run the experiment into tmpdir with env (e.g. "KDALAB_RESUME=1"); exit 0 or fail. */
static void run_experiment(const char *env)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "env -u KDALAB_FULL -u KDALAB_RESUME %s %s --out %s --steps 2 --test 4 "
             ">%s/stdout 2>%s/stderr", env, exe, tmpdir, tmpdir, tmpdir);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: failed (status %d); see %s/stderr", cmd, st, tmpdir);
}

static char *path_of(const char *file)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", tmpdir, file);
    return p[i];
}

/* The whole file, NUL-terminated; fails the test if unreadable. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s", path);
    char *b = malloc(1 << 20);
    assert_non_null(b);
    size_t n = fread(b, 1, (1 << 20) - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

static void spill(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static size_t lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The table without its last column (train_s, the wall time, which a model
 * trained again need not repeat), comment lines dropped. */
static char *without_times(const char *table)
{
    char *out = malloc(strlen(table) + 1), *o = out;
    assert_non_null(out);
    for (const char *line = table; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (line[0] != '#') {
            const char *tab = memrchr(line, '\t', len);
            const size_t keep = tab ? (size_t)(tab - line) : len;
            memcpy(o, line, keep);
            o += keep;
            *o++ = '\n';
        }
        line += len + (nl != NULL);
    }
    *o = '\0';
    return out;
}

/* Tables equal but for the training times. */
static void assert_same_but_times(const char *a, const char *b)
{
    char *x = without_times(a), *y = without_times(b);
    assert_string_equal(x, y);
    free(x);
    free(y);
}

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
    remove(path_of("mqar_models.tsv"));
    run_experiment("");
    char *ledger = slurp(path_of("mqar_models.tsv"));
    char *table = slurp(path_of("14_recall_by_mechanism.tsv"));
    char *summary = slurp(path_of("14_recall_summary.tsv"));
    assert_int_equal(lines(ledger), N_MODELS);
    assert_non_null(strstr(ledger, "fp32\tattention\t2\t32\t2\t1\t40\t4\t65\t16\t2\t4\t"));
    /* each line records what made it (version, BLAS kernels, SIMD level) */
    assert_non_null(strstr(ledger, "\tkdalab " KDALAB_VERSION " blas="));
    assert_non_null(strstr(ledger, " simd="));

    /* resuming: same tables, nothing trained */
    run_experiment("KDALAB_RESUME=1");
    char *again = slurp(path_of("14_recall_by_mechanism.tsv"));
    char *s_again = slurp(path_of("14_recall_summary.tsv"));
    assert_string_equal(again, table);
    assert_string_equal(s_again, summary);
    char *l_again = slurp(path_of("mqar_models.tsv"));
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
    spill(path_of("mqar_models.tsv"), older);
    run_experiment("KDALAB_RESUME=1");
    again = slurp(path_of("14_recall_by_mechanism.tsv"));
    assert_string_equal(again, table);
    free(again);
    l_again = slurp(path_of("mqar_models.tsv"));
    assert_string_equal(l_again, older);
    free(l_again);
    free(older);

    /* it really reads the ledger: an edited accuracy is what the table says */
    char *edited = edit_first_accuracy(ledger);
    spill(path_of("mqar_models.tsv"), edited);
    run_experiment("KDALAB_RESUME=1");
    again = slurp(path_of("14_recall_by_mechanism.tsv"));
    assert_non_null(strstr(again, "\t0.5000\t"));
    free(again);
    /* ... and without KDALAB_RESUME it does not */
    spill(path_of("mqar_models.tsv"), edited);
    run_experiment("");
    again = slurp(path_of("14_recall_by_mechanism.tsv"));
    assert_same_but_times(again, table);
    free(again);
    free(edited);

    /* a last line cut short is retrained and appended, same bits */
    char *cut = strdup(ledger);
    assert_non_null(cut);
    char *last = cut + strlen(cut) - 1; /* the final '\n' */
    while (last > cut && last[-1] != '\n')
        last--;
    last[strlen(last) / 2] = '\0';
    spill(path_of("mqar_models.tsv"), cut);
    run_experiment("KDALAB_RESUME=1");
    again = slurp(path_of("14_recall_by_mechanism.tsv"));
    assert_same_but_times(again, table);
    l_again = slurp(path_of("mqar_models.tsv"));
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
    free(again);
    free(l_again);
    free(cut);
    free(ledger);
    free(table);
    free(summary);
}

static int setup(void **state)
{
    (void)state;
    const char *bin = getenv("KDALAB_BIN");
    snprintf(exe, sizeof exe, "%s/14_recall_by_mechanism", bin && *bin ? bin : "bin");
    FILE *f = fopen(exe, "rb");
    if (!f) {
        fprintf(stderr, "test_sweep_resume: %s not found: run `make` (or set KDALAB_BIN)\n",
                exe);
        return -1;
    }
    fclose(f);
    return test_tmpdir_make("kdalab_resume", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ledger_resume)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
