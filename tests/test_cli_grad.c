/*
 * test_cli_grad.c — kdalab grad end to end: every golden gradient case, and its bad input.
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

static char grad_path_buf[8][512];
static const char *grad_path(const char *name, const char *key)
{
    static int next = 0;
    char *p = grad_path_buf[next++ % 8];
    snprintf(p, 512, "%s/%s.%s.npy", grad_golden_dir(), name, key);
    return p;
}

/* The input flags of a golden gradient case, do and dht included. */
static const char *grad_inputs(const grad_case *c)
{
    static char buf[4096];
    int n = snprintf(buf, sizeof buf, "--mechanism %s --scale %.17g --q %s --k %s --v %s",
                     kdalab_mechanism_name(c->mech), c->scale, grad_path(c->name, "q"),
                     grad_path(c->name, "k"), grad_path(c->name, "v"));
    if (kdalab_mechanism_has_beta(c->mech))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --beta %s", grad_path(c->name, "beta"));
    if (kdalab_mechanism_g_width(c->mech, 1))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --g %s", grad_path(c->name, "g"));
    if (c->has_h0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --h0 %s", grad_path(c->name, "h0"));
    if (kdalab_mechanism_has_ab(c->mech))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --a %s --b %s", grad_path(c->name, "a"),
                      grad_path(c->name, "b"));
    if (c->has_dht)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --dht %s", grad_path(c->name, "dht"));
    snprintf(buf + n, sizeof buf - (size_t)n, " --do %s", grad_path(c->name, "do")); /* last */
    return buf;
}

/* Every golden gradient case through `kdalab grad`, recurrent and chunkwise
 * (C = 16) in float64, chunkwise in float32, and the SIMD chunkwise backward
 * (--impl simd) in both: each gradient within 1e-10 (float32: 1e-5) of fla's
 * (test_grad's bounds), read back in-process and through `compare`. */
static void grad_golden(void **state)
{
    (void)state;
    grad_case cases[16];
    size_t n = grad_load_all(cases, 16);
    assert_true(n >= 6);
    const char *forms[] = {"--form recurrent", "--form chunk --chunk 16",
                           "--form chunk --precision fp32", "--form chunk --impl simd",
                           "--form chunk --impl simd --precision fp32"};
    const double tols[] = {1e-10, 1e-10, 1e-5, 1e-10, 1e-5}; /* float32: test_grad's bound */
    const int n_forms = (int)(sizeof forms / sizeof forms[0]);
    for (size_t ci = 0; ci < n; ci++) {
        const grad_case *c = &cases[ci];
        const char *keys[] = {"dq", "dk", "dv", "dbeta", "dg", "dh0", "da", "db"};
        const kdalab_array *want[] = {&c->dq, &c->dk, &c->dv, &c->dbeta,
                                      &c->dg, &c->dh0, &c->da, &c->db};
        for (int fi = 0; fi < n_forms; fi++) {
            char outs[1024] = "";
            size_t len = 0;
            for (int a = 0; a < 8; a++)
                if (want[a]->data)
                    len += (size_t)snprintf(outs + len, sizeof outs - len, " --%s %s", keys[a],
                                            tcli_tmp(keys[a]));
            int rc = tcli_run("grad %s %s %s", grad_inputs(c), forms[fi], outs);
            if (rc != 0)
                fail_msg("%s [%s]: exit %d: %s", c->name, forms[fi], rc, tcli_err);
            for (int a = 0; a < 8; a++) {
                if (!want[a]->data)
                    continue;
                rc = tcli_run("compare %s %s --rtol %g", tcli_tmp(keys[a]),
                            grad_path(c->name, keys[a]), tols[fi]);
                if (rc != 0)
                    fail_msg("%s [%s] %s: compare exit %d:\n%s", c->name, forms[fi], keys[a],
                             rc, tcli_out);
                kdalab_array got;
                tcli_read_array(tcli_tmp(keys[a]), &got);
                assert_int_equal(got.ndim, want[a]->ndim);
                double e = rel_err_f64(got.data, want[a]->data, got.size);
                if (!(e <= tols[fi]))
                    fail_msg("%s [%s] %s: rel err %g", c->name, forms[fi], keys[a], e);
                kdalab_array_free(&got);
            }
        }
    }
    for (size_t ci = 0; ci < n; ci++)
        grad_case_free(&cases[ci]);
}

/* Bad input to grad: the forward's errors plus d_o/dht of the wrong shape,
 * a non-finite d_o, no output, an output that is an input, a gradient the
 * mechanism lacks; nothing is written on any error. */
static void grad_errors(void **state)
{
    (void)state;
    grad_case cases[16];
    size_t n = grad_load_all(cases, 16);
    const grad_case *c = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, "kda_grad") == 0)
            c = &cases[i];
    assert_non_null(c);
    const char *dq = tcli_tmp("grad_dq.npy"), *dg = tcli_tmp("grad_dg.npy");
    unlink(dq);
    unlink(dg);
    tcli_expect_error(tcli_run("grad %s", grad_inputs(c)), 2, "no output", NULL);
    tcli_expect_error(
        tcli_run("grad %s --dq %s --do %s", grad_inputs(c), dq, grad_path(c->name, "v")), 2, "--do",
        "given twice", NULL);
    /* d_o of the wrong shape: v's shape differs from o's only by V, use q */
    char bad[4096];
    snprintf(bad, sizeof bad, "%s", grad_inputs(c));
    char *p = strstr(bad, "--do ");
    assert_non_null(p);
    snprintf(p, sizeof bad - (size_t)(p - bad), "--do %s --dq %s", grad_path(c->name, "q"), dq);
    tcli_expect_error(tcli_run("grad %s", bad), 2, "--do", "(B, T, H, V)", NULL);
    tcli_expect_error(tcli_run("grad %s --dq %s", grad_inputs(c), grad_path(c->name, "k")), 2,
                 "refusing to overwrite", NULL);
    kdalab_array d_o;
    tcli_read_array(grad_path(c->name, "do"), &d_o);
    d_o.data[5] = NAN;
    tcli_write_array(tcli_tmp("do_nan.npy"), KDALAB_DTYPE_F64, &d_o);
    kdalab_array_free(&d_o);
    snprintf(bad, sizeof bad, "%s", grad_inputs(c));
    p = strstr(bad, "--do ");
    snprintf(p, sizeof bad - (size_t)(p - bad), "--do %s --dq %s --dg %s", tcli_tmp("do_nan.npy"),
             dq, dg);
    tcli_expect_error(tcli_run("grad %s", bad), 2, "--do", "NaN", NULL);
    tcli_expect_error(tcli_run("grad --mechanism deltanet --q %s --k %s --v %s --beta %s --do %s "
                        "--dg %s",
                        grad_path("deltanet_grad", "q"), grad_path("deltanet_grad", "k"),
                        grad_path("deltanet_grad", "v"), grad_path("deltanet_grad", "beta"),
                        grad_path("deltanet_grad", "do"), dg),
                 2, "has no dg", NULL);
    tcli_expect_error(tcli_run("grad %s --dq %s --precision bf16", grad_inputs(c), dq), 2,
                 "fp64 or fp32", NULL);
    tcli_expect_error(tcli_run("grad %s --dq %s --impl simd", grad_inputs(c), dq), 2,
                      "--impl simd needs --form chunk", NULL);
    tcli_expect_error(tcli_run("grad %s --dq %s --form chunk --impl fast", grad_inputs(c), dq),
                      2, "--impl", "fast", NULL);
    assert_false(tcli_exists(dq));
    assert_false(tcli_exists(dg));
    assert_int_equal(tcli_count_entries(NULL, "grad_"), 0);
    assert_int_equal(tcli_run("grad --help"), 0);
    assert_non_null(strstr(tcli_out, "sum(o * do)"));
    for (size_t i = 0; i < n; i++)
        grad_case_free(&cases[i]);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_grad_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grad_golden),
        cmocka_unit_test(grad_errors),
    };
    return cmocka_run_group_tests_name("cli_grad", tests, setup, teardown);
}
