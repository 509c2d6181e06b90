/*
 * tests/test_experiment_usage.c — the numbered experiments' command lines
 * (experiments/common.c, lab_parse): a flag given twice is refused by every
 * program (one line naming the flag, exit 2, before any directory is made),
 * as `kdalab` refuses it, rather than the last one silently counting; and
 * a flag that would do nothing in the combination given is refused, naming
 * it and why (lab_refuse_unused); a value out of range names its flag and
 * the rule (lab_need); --out is made only when a result is written, and one
 * that cannot hold results is refused at once.
 *
 * Runs every $KDALAB_BIN/NN_name (bin by default) that a refusal stops
 * before it computes anything: a fraction of a second each.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static char tmpdir[256];
static const char *bin = "bin";

/* Run "$bin/<program> <args>" with its stderr into tmpdir/stderr; its exit
 * status (-1: it did not exit) and, in err[cap], its stderr. OpenBLAS's
 * generic kernels are named for it (OPENBLAS_CORETYPE=Prescott, what
 * OpenBLAS picks on a CPU it does not know), so that a training program
 * given a good command line does not restart itself with a note on stderr
 * (kdalab_blas_choose_kernels) before the refusal checked here. */
static int run(char *err, size_t cap, const char *program, const char *fmt, ...)
{
    char args[1024], cmd[2048], path[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(path, sizeof path, "%s/stderr", tmpdir);
    snprintf(cmd, sizeof cmd,
             "env -u KDALAB_FULL -u KDALAB_RESUME OPENBLAS_CORETYPE=Prescott %s/%s %s "
             ">/dev/null 2>%s",
             bin, program, args, path);
    int st = system(cmd);
    char *text = test_read_text(path);
    snprintf(err, cap, "%s", text);
    free(text);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/* err is one line holding every needle (a NULL-terminated list). */
static void expect_line(const char *program, const char *err, ...)
{
    const char *nl = strchr(err, '\n');
    if (!nl || nl[1] != '\0')
        fail_msg("%s: not one line on stderr: '%s'", program, err);
    va_list ap;
    va_start(ap, err);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(err, needle))
            fail_msg("%s: '%s' lacks '%s'", program, err, needle);
    va_end(ap);
}

/* Every experiment: --seed, --out (every program has them) and one of its
 * own flags given twice, each spelling of a flag counting as the flag. */
static void every_experiment_refuses_a_flag_given_twice(void **state)
{
    (void)state;
    DIR *d = opendir(bin);
    assert_non_null(d);
    char err[4096], out[300];
    snprintf(out, sizeof out, "%s/never", tmpdir);
    int programs = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (!(n[0] >= '0' && n[0] <= '9' && n[1] >= '0' && n[1] <= '9' && n[2] == '_'))
            continue;
        programs++;
        assert_int_equal(run(err, sizeof err, n, "--seed 3 --out %s --seed=0", out), 2);
        expect_line(n, err, n, "--seed is given twice", NULL);
        assert_int_equal(run(err, sizeof err, n, "--out %s --out %s", out, out), 2);
        expect_line(n, err, "--out is given twice", NULL);
        assert_false(tcli_exists(out)); /* refused before --out is made */
    }
    closedir(d);
    assert_int_equal(programs, 24);
    /* the flags a program registers: the job of a sweep, a switch, a number */
    assert_int_equal(run(err, sizeof err, "14_recall_by_mechanism", "--job 3 --job 0"), 2);
    expect_line("14", err, "--job is given twice", NULL);
    assert_int_equal(run(err, sizeof err, "19_gating_by_task", "--list-jobs --list-jobs"), 2);
    expect_line("19", err, "--list-jobs is given twice", NULL);
    assert_int_equal(run(err, sizeof err, "01_half_life", "--T 10 --T=20"), 2);
    expect_line("01", err, "--T is given twice", NULL);
    /* --help may come more than once */
    assert_int_equal(run(err, sizeof err, "01_half_life", "--help --help"), 0);
}

/* A flag that does nothing with the others given: one line naming it and
 * the flag that makes it idle, exit 2, before anything is computed. */
static void a_flag_that_does_nothing_is_refused(void **state)
{
    (void)state;
    char err[4096], out[300];
    snprintf(out, sizeof out, "%s/r", tmpdir);
    assert_int_equal(
        run(err, sizeof err, "07_relative_position", "--out %s --resets 0 --reset-g -3", out), 2);
    expect_line("07", err, "--reset-g does nothing", "--resets 0", NULL);
    assert_int_equal(
        run(err, sizeof err, "06_scaling", "--out %s --Tmin 256 --Tmax 512 --budget 2", out), 2);
    expect_line("06", err, "--budget does nothing", "--Tmin", NULL);
    assert_int_equal(run(err, sizeof err, "05_hybrid_cache",
                         "--out %s --max-context 4096 --real-context 4096 --pool 8", out),
                     2);
    expect_line("05", err, "--pool does nothing", "--real-context", NULL);
    assert_false(tcli_exists(out)); /* refused before --out is made */
}

/* A value out of its rule's range (lab_need): one line naming the flag and
 * the rule, exit 2, before anything is computed or --out is made. */
static void a_value_out_of_range_names_its_flag(void **state)
{
    (void)state;
    char err[4096], out[300];
    snprintf(out, sizeof out, "%s/range", tmpdir);
    assert_int_equal(run(err, sizeof err, "04_recall_capacity", "--out %s --ratios 1,,2", out), 2);
    expect_line("04", err, "--ratios: need", NULL);
    assert_int_equal(run(err, sizeof err, "04_recall_capacity", "--out %s --K 0", out), 2);
    expect_line("04", err, "--K: need K >= 1", NULL);
    assert_int_equal(run(err, sizeof err, "06_scaling", "--out %s --reps 4", out), 2);
    expect_line("06", err, "--reps: need 5 <= reps", NULL);
    assert_int_equal(run(err, sizeof err, "18_learned_timescales", "--out %s --steps 0", out), 2);
    expect_line("18", err, "--steps: need steps >= 1", NULL);
    /* rules whose arithmetic could wrap, and a probe with fewer rows than features (GSL aborted) */
    assert_int_equal(
        run(err, sizeof err, "07_relative_position", "--out %s --D 9223372036854775807 --T 10", out), 2);
    expect_line("07", err, "--T, --D: need T >= 2 D + 2", NULL);
    assert_int_equal(run(err, sizeof err, "13_nope_position",
                         "--out %s --T 4 --vocab 4 --train 4 --test 4", out), 2);
    expect_line("13", err, "--train, --T, --d: need", NULL);
    assert_false(tcli_exists(out));
}

/* --out: a value a program refuses after parsing leaves no directory behind
 * (it is made when the first result is written); one that cannot hold
 * results (a file, a missing parent, /proc even for root) is refused at
 * once, naming it. */
static void out_is_made_only_to_write_into(void **state)
{
    (void)state;
    char err[4096], out[300], file[300];
    snprintf(out, sizeof out, "%s/never2", tmpdir);
    assert_int_equal(run(err, sizeof err, "22_trainable_regime", "--out %s --points 1:2", out),
                     2);
    expect_line("22", err, "--points 1:2", NULL);
    assert_false(tcli_exists(out));
    snprintf(file, sizeof file, "%s/a_file", tmpdir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(run(err, sizeof err, "01_half_life", "--out %s", file), 1);
    expect_line("01", err, "--out", "not a directory", NULL);
    assert_int_equal(run(err, sizeof err, "01_half_life", "--out %s/no/such", tmpdir), 1);
    expect_line("01", err, "cannot write results there", NULL);
    char link[300];
    snprintf(link, sizeof link, "%s/dangling", tmpdir);
    assert_int_equal(symlink("no_such_dir", link), 0);
    assert_int_equal(run(err, sizeof err, "01_half_life", "--out %s", link), 1);
    expect_line("01", err, "a symbolic link to nothing", NULL);
    /* where access() says yes to root but the file system refuses: tried at once */
    assert_int_equal(run(err, sizeof err, "03_subchunk_range", "--out /proc"), 1);
    expect_line("03", err, "--out /proc", "cannot write results there", NULL);
    assert_int_equal(run(err, sizeof err, "03_subchunk_range", "--out /proc/kdalab_no"), 1);
    expect_line("03", err, "--out /proc/kdalab_no", "cannot write results there", NULL);
}

static int setup(void **state)
{
    (void)state;
    const char *b = getenv("KDALAB_BIN");
    if (b && *b)
        bin = b;
    char probe[512];
    snprintf(probe, sizeof probe, "%s/01_half_life", bin);
    if (!tcli_exists(probe)) {
        fprintf(stderr, "test_experiment_usage: %s not found: run `make` (or set KDALAB_BIN)\n",
                probe);
        return -1;
    }
    return test_tmpdir_make("kdalab_exp_usage_", tmpdir, sizeof tmpdir);
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_experiment_refuses_a_flag_given_twice),
        cmocka_unit_test(a_flag_that_does_nothing_is_refused),
        cmocka_unit_test(a_value_out_of_range_names_its_flag),
        cmocka_unit_test(out_is_made_only_to_write_into),
    };
    return cmocka_run_group_tests_name("experiment_usage", tests, setup, teardown);
}
