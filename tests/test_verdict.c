/*
 * tests/test_verdict.c — the trained experiments' verdict rule
 * (experiments/verdict.c): the mean paired difference and its 95 % t
 * interval against numbers worked by hand, each outcome (ahead, behind,
 * level, not resolved) and where its boundary lies, fewer than 8 seeds
 * never ordered, stuck seeds and seeds below 0.5 accuracy counted and
 * named, the printed line, the sign test of pooled counts, and a
 * non-finite accuracy refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "../experiments/verdict.h"

#define LN64 4.1588830833596715

/* A verdict of accuracies a and b over n seeds (losses well below the
 * no-recall loss unless given). */
static lab_verdict run(const double *a, const double *b, const double *la, const double *lb,
                       size_t n)
{
    static const double low[LAB_VERDICT_MAX_SEEDS] = {0}; /* loss 0: learned */
    const lab_side A = {"A", a, la ? la : low}, B = {"B", b, lb ? lb : low};
    lab_verdict v;
    lab_verdict_apply(&A, &B, n, 1, LN64, &v);
    return v;
}

static void test_interval_by_hand(void **state)
{
    (void)state;
    /* d = 0.1 0.2 0.3 0.2 0.1 0.2 0.3 0.2: mean 0.2, sd sqrt(0.04 / 7),
     * t_{0.975, 7} = 2.364624, half width 2.364624 * 0.0755929 / sqrt(8) */
    const double a[8] = {0.6, 0.7, 0.8, 0.7, 0.6, 0.7, 0.8, 0.7};
    const double b[8] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    lab_verdict v = run(a, b, NULL, NULL, 8);
    const double half = 2.364624251592785 * sqrt(0.04 / 7) / sqrt(8.0);
    assert_true(fabs(v.mean - 0.2) < 1e-12);
    assert_true(fabs(v.lo - (0.2 - half)) < 1e-9 && fabs(v.hi - (0.2 + half)) < 1e-9);
    assert_int_equal(v.n, 8);
    assert_true(v.enough);
    assert_int_equal(v.outcome, LAB_AHEAD);
    v = run(b, a, NULL, NULL, 8); /* the other way round: behind, the interval mirrored */
    assert_int_equal(v.outcome, LAB_BEHIND);
    assert_true(fabs(v.lo + 0.2 + half) < 1e-9);
}

static void test_outcomes(void **state)
{
    (void)state;
    double a[10], b[10];
    /* differences +-0.01 about 0: level (the interval inside +-0.05) */
    for (int i = 0; i < 10; i++)
        a[i] = 0.5 + (i % 2 ? 0.01 : -0.01), b[i] = 0.5;
    assert_int_equal(run(a, b, NULL, NULL, 10).outcome, LAB_LEVEL);
    /* differences +-0.3 about 0: the interval straddles 0 and the margin */
    for (int i = 0; i < 10; i++)
        a[i] = 0.5 + (i % 2 ? 0.3 : -0.3);
    lab_verdict v = run(a, b, NULL, NULL, 10);
    assert_int_equal(v.outcome, LAB_NOT_RESOLVED);
    assert_true(v.lo < -LAB_VERDICT_MARGIN && v.hi > LAB_VERDICT_MARGIN);
    /* a small but sure difference is ahead, not level: 0.03 every seed */
    for (int i = 0; i < 10; i++)
        a[i] = 0.53, b[i] = 0.5;
    v = run(a, b, NULL, NULL, 10);
    assert_int_equal(v.outcome, LAB_AHEAD);
    assert_true(v.lo == v.hi); /* sd 0: the interval is the point */
    /* an interval inside +-0.05 that excludes 0 is ahead: 0.04 +- 0.002 */
    for (int i = 0; i < 10; i++)
        a[i] = 0.54 + (i % 2 ? 0.002 : -0.002);
    assert_int_equal(run(a, b, NULL, NULL, 10).outcome, LAB_AHEAD);
    /* seven seeds, however clear: not resolved, the interval still given */
    for (int i = 0; i < 7; i++)
        a[i] = 0.9 + 0.01 * i, b[i] = 0.1;
    v = run(a, b, NULL, NULL, 7);
    assert_false(v.enough);
    assert_int_equal(v.outcome, LAB_NOT_RESOLVED);
    assert_true(v.lo > 0.7);
    /* one seed: no interval */
    v = run(a, b, NULL, NULL, 1);
    assert_true(v.lo == v.mean && v.hi == v.mean && v.outcome == LAB_NOT_RESOLVED);
}

/* The line lab_verdict_print writes for v, into line [512]. */
static void printed(const char *what, const lab_side *a, const lab_side *b,
                    const lab_verdict *v, char *line)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    lab_verdict_print(f, what, a, b, v);
    rewind(f);
    assert_non_null(fgets(line, 512, f));
    fclose(f);
}

static void test_stuck_and_print(void **state)
{
    (void)state;
    double a[8], b[8], la[8], lb[8];
    for (int i = 0; i < 8; i++) {
        a[i] = 0.9, b[i] = 0.2, la[i] = 0.1, lb[i] = 1.0;
    }
    /* B stuck at seeds 3 and 6 (of 1 .. 8): loss at 0.9 ln 64 and above,
     * and a diverged run (inf); 0.89 ln 64 is not stuck */
    lb[2] = 0.9 * LN64, lb[5] = 1.0 / 0.0, lb[7] = 0.89 * LN64, b[5] = 0;
    lab_verdict v = run(a, b, la, lb, 8);
    assert_int_equal(v.stuck[0], 0);
    assert_int_equal(v.stuck[1], 2);
    assert_int_equal(v.stuck_seed[1][0], 3);
    assert_int_equal(v.stuck_seed[1][1], 6);
    assert_int_equal(v.outcome, LAB_AHEAD); /* stuck seeds stay in the mean */
    assert_true(fabs(v.mean - (0.7 * 7 + 0.9) / 8) < 1e-12);
    const lab_side A = {"KDA", a, la}, B = {"Gated DeltaNet", b, lb};
    char line[512];
    printed("dense, 24 pairs", &A, &B, &v, line);
    assert_non_null(strstr(line, "verdict (dense, 24 pairs): KDA ahead of Gated DeltaNet"));
    assert_non_null(strstr(line, "over 8 paired seeds (95 % t interval)"));
    assert_non_null(strstr(line, "Gated DeltaNet stuck at the no-recall loss in 2 of 8 (seeds 3, 6)"));
    /* fewer than 8 seeds say why no order is named */
    v = run(a, b, la, lb, 3);
    printed("x", &A, &B, &v, line);
    assert_non_null(strstr(line, "KDA not resolved against Gated DeltaNet"));
    assert_non_null(strstr(line, "fewer than 8 seeds"));
    /* a difference that rounds to 0.000 keeps its digits, never "-0.000" */
    for (int i = 0; i < 8; i++)
        b[i] = a[i] + 0.0004 + 0.00001 * (i % 2);
    v = run(a, b, la, la, 8);
    printed("x", &A, &B, &v, line);
    assert_null(strstr(line, "-0.000"));
    assert_non_null(strstr(line, "mean difference -4.0e-04 [-4.1e-04, -4.0e-04]"));
    assert_true(fabs(lab_no_recall_loss(64) - LN64) < 1e-12);
}

/* A model that learned the answer is one of its context's 8 values, not
 * which (accuracy near 1/8, loss near ln 8: far below 0.9 ln 64) is not
 * stuck, but it failed: the line names it. Accuracy 0.5 itself is no
 * failure. */
static void test_failed_above_the_stuck_loss(void **state)
{
    (void)state;
    double a[8], b[8], la[8], lb[8];
    for (int i = 0; i < 8; i++)
        a[i] = 0.99, b[i] = 0.98, la[i] = 0.02, lb[i] = 0.05;
    b[1] = 0.14, lb[1] = 2.2;
    b[4] = 0.15, lb[4] = 2.1;
    b[6] = 0.5;
    a[7] = 0.4999, la[7] = 1.5;
    lab_verdict v = run(a, b, la, lb, 8);
    assert_int_equal(v.stuck[0] + v.stuck[1], 0);
    assert_int_equal(v.failed[0], 1);
    assert_int_equal(v.failed_seed[0][0], 8);
    assert_int_equal(v.failed[1], 2);
    assert_int_equal(v.failed_seed[1][0], 2);
    assert_int_equal(v.failed_seed[1][1], 5);
    const lab_side A = {"KDA", a, la}, B = {"Gated DeltaNet", b, lb};
    char line[512];
    printed("zoology", &A, &B, &v, line);
    assert_non_null(strstr(line, "; KDA below 0.5 accuracy in 1 of 8 (seed 8)"));
    assert_non_null(strstr(line, "; Gated DeltaNet below 0.5 accuracy in 2 of 8 (seeds 2, 5)\n"));
    assert_null(strstr(line, "stuck"));
}

/* The sign test against binomial sums worked by hand: 12 against 5 of 17 is
 * 2 (C(17,0) + ... + C(17,5)) / 2^17 = 2 * 9402 / 131072; all of 6 on one
 * side 2 / 64; an even split is capped at 1; no pairs is 1. */
static void test_sign_test(void **state)
{
    (void)state;
    assert_true(fabs(lab_sign_test_p(12, 5) - 2.0 * 9402 / 131072) < 1e-12);
    assert_true(fabs(lab_sign_test_p(5, 12) - 2.0 * 9402 / 131072) < 1e-12);
    assert_true(fabs(lab_sign_test_p(0, 6) - 2.0 / 64) < 1e-15);
    assert_true(fabs(lab_sign_test_p(10, 0) - 2.0 / 1024) < 1e-15);
    assert_true(lab_sign_test_p(3, 3) == 1.0);
    assert_true(lab_sign_test_p(0, 0) == 1.0);
}

/* A non-finite accuracy, or a seed count out of range, is one line and exit 2. */
static void test_refused(void **state)
{
    (void)state;
    const double a[2] = {0.5, NAN}, b[2] = {0.5, 0.5}, l[2] = {0, 0};
    for (int c = 0; c < 3; c++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            const lab_side A = {"A", a, l}, B = {"B", b, l};
            lab_verdict v;
            lab_verdict_apply(&A, &B, c == 0 ? 2 : c == 1 ? 0 : 1, 1, c == 2 ? 0 : LN64, &v);
            _exit(0);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interval_by_hand),
        cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_stuck_and_print),
        cmocka_unit_test(test_failed_above_the_stuck_loss),
        cmocka_unit_test(test_sign_test),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests_name("verdict", tests, NULL, NULL);
}
