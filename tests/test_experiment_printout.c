/*
 * tests/test_experiment_printout.c — what a training experiment prints reads
 * top to bottom: its header line (name, sweep, sizes) first, then one line
 * per trained model, then the verdict.
 *
 * Runs $KDALAB_BIN/18_learned_timescales (bin by default) cut to 2 optimiser
 * steps, into a temporary folder: two tiny models, about a second. Only the
 * order of the lines is checked, not the numbers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"

static char tmpdir[256];
static char exe[512];

static void header_before_model_lines(void **state)
{
    (void)state;
    char cmd[2048], path[600];
    snprintf(cmd, sizeof cmd,
             "env -u KDALAB_FULL -u KDALAB_RESUME %s --out %s --steps 2 >%s/stdout 2>%s/stderr", exe,
             tmpdir, tmpdir, tmpdir);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: failed (status %d); see %s/stderr", cmd, st, tmpdir);
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int n = 0, models = 0, verdict = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (n == 1) {
            if (strncmp(line, "18_learned_timescales (", 23) != 0)
                fail_msg("the first line printed is not the header: %s", line);
        } else if (strstr(line, " seed ")) {
            if (verdict)
                fail_msg("a model line after the verdict: %s", line);
            models++;
        } else if (strstr(line, "verdict:"))
            verdict++;
    }
    fclose(f);
    assert_int_equal(models, 2);
    assert_int_equal(verdict, 1);
}

static int setup(void **state)
{
    (void)state;
    const char *bin = getenv("KDALAB_BIN");
    snprintf(exe, sizeof exe, "%s/18_learned_timescales", bin && *bin ? bin : "bin");
    FILE *f = fopen(exe, "rb");
    if (!f) {
        fprintf(stderr, "test_experiment_printout: %s not found: run `make` (or set KDALAB_BIN)\n",
                exe);
        return -1;
    }
    fclose(f);
    return test_tmpdir_make("kdalab_printout", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(header_before_model_lines)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
