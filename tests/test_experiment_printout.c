/*
 * tests/test_experiment_printout.c — what a training experiment prints reads
 * top to bottom: its header line (name, sweep, sizes) first, then one line
 * per trained model, then the verdicts (one per answer, by the rule).
 *
 * Runs $KDALAB_BIN/18_learned_timescales (bin by default) cut to 2 optimiser
 * steps, into a temporary folder: two tiny models, about a second. Only the
 * order of the lines is checked, not the numbers.
 *
 * And every timed experiment (05, 06, 09, 10), at tiny sizes (under a second
 * each), prints the numbers its verdict quotes as "spread:" lines: a median
 * and the range of at least 5 rounds, lo <= median <= hi, each a finite
 * number; and refuses fewer than 5 rounds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"

static char tmpdir[256];
static char exe[512];
static char bindir[400];

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
        } else if (strncmp(line, "  verdict (", 11) == 0)
            verdict++;
    }
    fclose(f);
    assert_int_equal(models, 2);
    assert_int_equal(verdict, 2); /* the fact's and the stream's, by the verdict rule */
}

/* Run bin/<cmd> into the temporary folder; return its exit status. */
static int run_quiet(const char *cmd)
{
    char line[2048];
    snprintf(line, sizeof line, "%s/%s --out %s >%s/stdout 2>%s/stderr", bindir, cmd, tmpdir, tmpdir,
             tmpdir);
    int st = system(line);
    if (st == -1 || !WIFEXITED(st))
        fail_msg("%s: did not exit", line);
    return WEXITSTATUS(st);
}

/* Run one timed experiment and check its "spread:" lines. */
static void check_spread(const char *cmd, int want_lines)
{
    if (run_quiet(cmd) != 0)
        fail_msg("%s failed; see %s/stderr", cmd, tmpdir);
    char path[600], line[1024];
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "spread: ", 8) != 0)
            continue;
        const char *m = strstr(line, ": median ");
        double med, lo, hi;
        unsigned rounds;
        /* "median M UNIT (range LO .. HI UNIT, N rounds)": the unit may be empty */
        const char *r = m ? strstr(m, "(range ") : NULL, *c = r ? strstr(r, ", ") : NULL;
        if (!m || !r || !c || sscanf(m, ": median %lf", &med) != 1 ||
            sscanf(r, "(range %lf .. %lf", &lo, &hi) != 2 || sscanf(c, ", %u rounds)", &rounds) != 1)
            fail_msg("%s: a spread line not of the form 'median M (range LO .. HI, N rounds)': %s", cmd,
                     line);
        if (!(lo <= med && med <= hi) || !(hi - lo < 1e300))
            fail_msg("%s: median outside its range: %s", cmd, line);
        if (rounds < 5)
            fail_msg("%s: fewer than 5 rounds: %s", cmd, line);
        n++;
    }
    fclose(f);
    if (n != want_lines)
        fail_msg("%s printed %d spread lines, expected %d", cmd, n, want_lines);
}

static void timed_findings_print_median_and_range(void **state)
{
    (void)state;
    check_spread("09_dense_cost --Ks 8,16 --Cs 16 --work 1e5 --Tmax 256", 5);
    check_spread("10_chunk_cost --T 64 --K 16 --V 16 --Cmin 16 --Cmax 32", 5);
    check_spread("06_scaling --Tmin 64 --Tmax 512 --fit-min 64 --K 16 --V 16", 8);
    check_spread("05_hybrid_cache --max-context 256 --real-context 64 --recall-max 64 "
                 "--recall-max-all 32 --pool 64", 2);
    /* fewer than 5 rounds is a bad command line, exit 2 */
    assert_int_equal(run_quiet("09_dense_cost --Ks 8,16 --Cs 16 --work 1e5 --reps 3"), 2);
    assert_int_equal(run_quiet("10_chunk_cost --T 64 --K 16 --V 16 --Cmax 32 --reps 4"), 2);
    assert_int_equal(run_quiet("06_scaling --Tmin 64 --Tmax 128 --reps 1"), 2);
    assert_int_equal(run_quiet("05_hybrid_cache --max-context 256 --rounds 2"), 2);
}

static int setup(void **state)
{
    (void)state;
    const char *bin = getenv("KDALAB_BIN");
    snprintf(bindir, sizeof bindir, "%s", bin && *bin ? bin : "bin");
    snprintf(exe, sizeof exe, "%s/18_learned_timescales", bindir);
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
    const struct CMUnitTest tests[] = {cmocka_unit_test(header_before_model_lines),
                                       cmocka_unit_test(timed_findings_print_median_and_range)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
