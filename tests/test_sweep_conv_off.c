/*
 * tests/test_sweep_conv_off.c — a training sweep with the short convolution
 * on some blocks only (kdalab_model_config's conv_off) and the model ledger
 * (experiments/ledger.c): such a model is its own model in the ledger.
 *
 * Runs $KDALAB_BIN/17_nope_needs_position (bin by default) in its reduced
 * sweep cut to 2 optimiser steps: four tiny two-block models, one of them a
 * KDA block with its convolution before an attention block without one.
 * Checked:
 *   - the ledger holds four lines with four different keys; the keys of the
 *     stacks with the convolution on every block or none are as before
 *     conv_off existed (no conv_off= field: the published ledgers still
 *     read), the other's ends in conv_off=1 (block 1, by index);
 *   - the results table names each stack's convolutions (none, both, kda);
 *   - a resuming run trains nothing and writes the same table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe[512];

#define N_MODELS 4 /* attention x2 with and without conv, kda then attention, the same with kda's conv */

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
            assert_non_null(strstr(keys[n], "\tkda,attention\t2\t32\t2\t1\t"));
        }
        line = end + 1;
    }
    assert_int_equal(n, N_MODELS);
    assert_int_equal(off, 1);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0)
                fail_msg("two models share the ledger key '%s'", keys[i]);
    assert_non_null(strstr(table, "\nkda_conv_then_attention\tkda,attention\t"));
    assert_non_null(strstr(table, "\tkda\n"));
    assert_non_null(strstr(table, "\tboth\n"));

    /* resuming: nothing trained, the same table and ledger */
    assert_int_equal(sweep_run_status(exe, tmpdir, tmpdir, "KDALAB_RESUME=1", "--steps 2"), 0);
    char *l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *t_again = test_read_text(sweep_path(tmpdir, "17_nope_needs_position.tsv"));
    assert_string_equal(l_again, ledger);
    sweep_assert_same_but_times(t_again, table);
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
