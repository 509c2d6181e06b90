/*
 * tests/test_sweep_conv_off.c — a training sweep with the short convolution
 * on some blocks only (kdalab_model_config's conv_off) and the model ledger
 * (experiments/ledger.c): such a model is its own model in the ledger.
 *
 * Runs $KDALAB_BIN/17_nope_needs_position (bin by default) in its reduced
 * sweep cut to 2 optimiser steps: five tiny two-block models, two of them a
 * block with its convolution (KDA, attention) before an attention block
 * without one. Checked:
 *   - the ledger holds five lines with five different keys; the keys of the
 *     stacks with the convolution on every block or none are as before
 *     conv_off existed (no conv_off= field: the published ledgers still
 *     read), the other two end in conv_off=1 (block 1, by index);
 *   - the results table names each stack's convolutions (none, both, first);
 *   - a resuming run trains nothing and writes the same table;
 *   - with the line of attention with the convolution on both blocks gone
 *     (its key is the start of the key of attention with it on block 0
 *     only), a resuming run trains that model again and takes no other
 *     line for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe[512];

#define N_MODELS 5 /* attention x2: no conv, conv, conv on block 0; kda then attention: no conv, conv on kda */

static void ledger_keys_by_convolution(void **state)
{
    (void)state;
    assert_int_equal(sweep_run_status(exe, tmpdir, tmpdir, "", "--steps 2"), 0);
    char *ledger = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *table = test_read_text(sweep_path(tmpdir, "17_nope_needs_position.tsv"));
    char keys[N_MODELS][320];
    size_t n = 0, off = 0;
    for (char *line = ledger; *line; n++) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        assert_true(n < N_MODELS);
        /* the key: the 14 fields, and conv_off= after them where there is one */
        const char *f = strstr(line, "\tconv_off=");
        const int has_off = f && f < end;
        size_t len = 0;
        for (int tabs = 0; tabs < 14 + has_off; len++)
            tabs += line[len] == '\t';
        assert_true(len < sizeof keys[0]);
        snprintf(keys[n], sizeof keys[n], "%.*s", (int)len, line);
        if (has_off) {
            off++;
            assert_int_equal(strncmp(f, "\tconv_off=1\t", 12), 0);
            assert_true(strstr(keys[n], "\tkda,attention\t2\t32\t2\t1\t") ||
                        strstr(keys[n], "\tattention\t2\t32\t2\t1\t"));
        }
        line = end + 1;
    }
    assert_int_equal(n, N_MODELS);
    assert_int_equal(off, 2);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0)
                fail_msg("two models share the ledger key '%s'", keys[i]);
    assert_non_null(strstr(table, "\nkda_conv_then_attention\tkda,attention\t"));
    assert_non_null(strstr(table, "\nattention_conv_then_attention\tattention\t"));
    assert_non_null(strstr(table, "\tfirst\n"));
    assert_non_null(strstr(table, "\tboth\n"));

    /* resuming: nothing trained, the same table and ledger */
    assert_int_equal(sweep_run_status(exe, tmpdir, tmpdir, "KDALAB_RESUME=1", "--steps 2"), 0);
    char *l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *t_again = test_read_text(sweep_path(tmpdir, "17_nope_needs_position.tsv"));
    assert_string_equal(l_again, ledger);
    sweep_assert_same_but_times(t_again, table);

    /* attention with the convolution on both blocks gone: trained again, and
     * the line of attention with it on block 0 only not taken for it */
    char *without = strdup(ledger);
    assert_non_null(without);
    char *line = without;
    for (; *line; line = strchr(line, '\n') + 1) {
        char *end = strchr(line, '\n'), *off_at = strstr(line, "\tconv_off=");
        if (strstr(line, "\tattention\t2\t32\t2\t1\t") == strchr(line, '\t') &&
            !(off_at && off_at < end))
            break;
    }
    assert_true(*line);
    memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), without);
    assert_int_equal(sweep_run_status(exe, tmpdir, tmpdir, "KDALAB_RESUME=1 KDALAB_TRAIN_MISSING=1",
                                      "--steps 2"), 0);
    char *err = test_read_text(sweep_path(tmpdir, "stderr"));
    if (strstr(err, "not read back") || strstr(err, "is not"))
        fail_msg("another model's line was read as this one's:\n%s", err);
    free(err);
    free(l_again);
    l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    assert_null(strstr(sweep_added_line(without, l_again), "conv_off="));
    free(without);
    free(ledger);
    free(table);
    free(l_again);
    free(t_again);
}

static int setup(void **state)
{
    (void)state;
    return sweep_setup("test_sweep_conv_off", "17_nope_needs_position", exe, sizeof exe,
                       "kdalab_conv_off", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ledger_keys_by_convolution)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
