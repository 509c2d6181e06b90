/*
 * test_cli_compare.c — kdalab compare: its exit statuses, tolerances and report.
 *
 * The binary is ./bin/kdalab relative to the repository root, where `make
 * test` runs the tests (override with $KDALAB_BIN); the runner and the
 * functions the command-line suites share are in tests/common.c. Scratch
 * files live in a mkdtemp directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kdalab.h"

static void compare_semantics(void **state)
{
    kdalab_array b;
    tcli_read_array(tcli_golden_path("kda_small", "o"), &b);
    const char *pb = tcli_tmp("b.npy"), *pa = tcli_tmp("a.npy");
    tcli_write_array(pb, KDALAB_DTYPE_F64, &b);

    /* identical */
    assert_int_equal(tcli_run("compare %s %s", pb, pb), 0);
    assert_non_null(strstr(tcli_out, "max_abs_err=0.000000e+00"));
    assert_non_null(strstr(tcli_out, "result=PASS"));

    /* one element off by 1e-3 of max|B|: fails at the default 1e-12, names
     * the element, passes at rtol 1e-2 */
    double maxb = 0;
    for (size_t i = 0; i < b.size; i++)
        maxb = fmax(maxb, fabs(b.data[i]));
    size_t at = 2 * 16 + 5; /* (0, 1, 0, 5) in [1, 64, 2, 16] */
    b.data[at] += 1e-3 * maxb;
    tcli_write_array(pa, KDALAB_DTYPE_F64, &b);
    assert_int_equal(tcli_run("compare %s %s", pa, pb), 1);
    assert_non_null(strstr(tcli_out, "worst_index=(0, 1, 0, 5)"));
    const char *rel = strstr(tcli_out, "max_rel_err=");
    double rel_value = 0;
    assert_non_null(rel);
    assert_int_equal(sscanf(rel, "max_rel_err=%lf", &rel_value), 1);
    assert_true(fabs(rel_value - 1e-3) < 1e-9);
    assert_non_null(strstr(tcli_out, "result=FAIL"));
    assert_int_equal(tcli_run("compare %s %s --rtol 1e-2", pa, pb), 0);
    assert_int_equal(tcli_run("compare %s %s --atol=1", pa, pb), 0);

    /* non-finite: the same NaN in both agrees; NaN on one side only fails */
    b.data[at] = NAN;
    tcli_write_array(pa, KDALAB_DTYPE_F64, &b);
    assert_int_equal(tcli_run("compare %s %s --rtol 1", pa, pa), 0);
    assert_non_null(strstr(tcli_out, "nonfinite_a=1 nonfinite_b=1 nonfinite_mismatch=0"));
    assert_int_equal(tcli_run("compare %s %s --rtol 1", pa, pb), 1);
    assert_non_null(strstr(tcli_out, "nonfinite_a=1 nonfinite_b=0 nonfinite_mismatch=1"));
    assert_non_null(strstr(tcli_out, "first_nonfinite_mismatch=(0, 1, 0, 5) a=nan b="));
    assert_int_equal(tcli_run("compare %s %s --rtol 1", pa, pa), 0); /* none: no line */
    assert_null(strstr(tcli_out, "first_nonfinite_mismatch"));

    /* bad input: exit 2 */
    kdalab_array ht;
    tcli_read_array(tcli_golden_path("kda_small", "ht"), &ht);
    tcli_expect_error(tcli_run("compare %s %s", pb, tcli_golden_path("kda_small", "ht")), 2,
                 "(1, 64, 2, 16)", "(1, 2, 32, 16)", NULL);
    tcli_expect_error(tcli_run("compare %s %s", pb, tcli_tmp("missing.npy")), 2, "missing.npy",
                      NULL);
    tcli_expect_error(tcli_run("compare %s", pb), 2, "two files", NULL);
    tcli_expect_error(tcli_run("compare %s %s --rtol abc", pb, pb), 2, "--rtol", NULL);
    tcli_expect_error(tcli_run("compare %s %s --atol -1", pb, pb), 2, "--atol", NULL);

    /* empty arrays compare equal */
    size_t eshape[2] = {0, 3};
    assert_int_equal(kdalab_npy_write(tcli_tmp("e.npy"), KDALAB_DTYPE_F64, NULL, 2, eshape),
                     KDALAB_OK);
    assert_int_equal(tcli_run("compare %s %s", tcli_tmp("e.npy"), tcli_tmp("e.npy")), 0);
    assert_non_null(strstr(tcli_out, "worst_index=none"));

    kdalab_array_free(&b);
    kdalab_array_free(&ht);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_compare_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compare_semantics),
    };
    return cmocka_run_group_tests_name("cli_compare", tests, setup, teardown);
}
