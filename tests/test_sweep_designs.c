/*
 * tests/test_sweep_designs.c — a training sweep over model designs (the
 * output gate, its rank, the conv init) and the model ledger
 * (experiments/mqar_train.c): each design is its own model in the ledger.
 *
 * Runs $KDALAB_BIN/20_output_gate (bin by default) in its reduced sweep cut
 * to 2 optimiser steps and a 4-sequence test set: eight tiny models (two
 * mixers, four gate designs), about a second. Checked:
 *   - the ledger holds eight lines with eight different keys (a key without
 *     the design would give the four designs of a mixer one key, and a
 *     resuming run would read one model back for all four);
 *   - the default design's key is the one written before designs existed
 *     (no gate= field: the published ledgers still read), the others end
 *     in gate=NAME/RANK/INIT;
 *   - a resuming run trains nothing and gives the same tables;
 *   - with a default-design line gone, a resuming run trains that model
 *     again and calls no other line bad: the other designs' lines, which
 *     start with its key, are not taken for its line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"
#include "sweep_runs.h"

static char tmpdir[256];
static char exe[512];

#define N_MODELS 8 /* 2 mixers x 4 gate designs, one seed, one lr */



static void ledger_keys_by_design(void **state)
{
    (void)state;
    sweep_run_tiny(exe, tmpdir, "");
    char *ledger = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *summary = test_read_text(sweep_path(tmpdir, "20_output_gate_summary.tsv"));
    /* the keys: each line up to its 15th field, the accuracy (14 fields, or 15 with gate=) */
    char keys[N_MODELS][256];
    size_t n = 0, plain = 0;
    for (char *line = ledger; *line && n < N_MODELS + 1; n++) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        const int designed = strstr(line, "\tgate=") && strstr(line, "\tgate=") < end;
        size_t len = 0;
        for (int tabs = 0; tabs < 14 + designed; len++)
            tabs += line[len] == '\t';
        assert_true(n < N_MODELS && len < sizeof keys[0]);
        snprintf(keys[n], sizeof keys[n], "%.*s", (int)len, line);
        plain += !designed;
        line = end + 1;
    }
    assert_int_equal(n, N_MODELS);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0)
                fail_msg("two models share the ledger key '%s'", keys[i]);
    assert_int_equal(plain, 2); /* sigmoid, full rank, uniform: one per mixer */
    assert_non_null(strstr(ledger, "\tgate=swish/0/uniform\t"));
    assert_non_null(strstr(ledger, "\tgate=none/0/uniform\t"));
    assert_non_null(strstr(ledger, "\tgate=sigmoid/16/uniform\t"));

    /* resuming: nothing trained, the same summary */
    sweep_run_tiny(exe, tmpdir, "KDALAB_RESUME=1");
    char *l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    char *s_again = test_read_text(sweep_path(tmpdir, "20_output_gate_summary.tsv"));
    assert_string_equal(l_again, ledger);
    assert_string_equal(s_again, summary);

    /* a default-design model missing from the ledger: its key is the start of
     * the other designs' lines (which go on with gate=), and none of them is
     * taken for its line: it is trained again, and no line is called bad */
    char *without = strdup(ledger);
    assert_non_null(without);
    char *line = without;
    while (strstr(line, "\tgate=") && strstr(line, "\tgate=") < strchr(line, '\n'))
        line = strchr(line, '\n') + 1;
    memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    test_write_text(sweep_path(tmpdir, "mqar_models.tsv"), without);
    sweep_run_tiny(exe, tmpdir, "KDALAB_RESUME=1");
    char *err = test_read_text(sweep_path(tmpdir, "stderr"));
    if (strstr(err, "not read back") || strstr(err, "is not"))
        fail_msg("another design's line was read as the default design's:\n%s", err);
    free(l_again);
    l_again = test_read_text(sweep_path(tmpdir, "mqar_models.tsv"));
    /* the ledger as it was, and one line more: the model trained again */
    sweep_added_line(without, l_again);
    free(s_again);
    s_again = test_read_text(sweep_path(tmpdir, "20_output_gate_summary.tsv"));
    assert_string_equal(s_again, summary);
    free(err);
    free(without);
    free(ledger);
    free(summary);
    free(l_again);
    free(s_again);
}

static int setup(void **state)
{
    (void)state;
    return sweep_setup("test_sweep_designs", "20_output_gate", exe, sizeof exe,
                       "kdalab_designs", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ledger_keys_by_design)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
