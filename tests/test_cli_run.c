/*
 * test_cli_run.c — kdalab run end to end: every golden case through each form, precision
 * and path (checked by `kdalab compare` and in-process), emulated bf16, empty
 * sequences, overflow reporting, half-precision inputs.
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

/* Run one golden case with extra options; check o and ht by `compare` at
 * rtol and in-process by rel_err_f64 at the same bound. */
static void golden_run(const golden_case *c, const char *options, double rtol)
{
    const char *o = tcli_tmp("o.npy"), *ht = tcli_tmp("ht.npy");
    unlink(o);
    unlink(ht);
    int rc = tcli_run("run %s %s --o %s --ht %s", tcli_case_inputs(c), options, o, ht);
    if (rc != 0)
        fail_msg("%s [%s]: exit %d: %s", c->name, options, rc, tcli_err);
    const char *keys[2] = {"o", "ht"}, *outs[2] = {o, ht};
    const kdalab_array *want[2] = {&c->o, &c->ht};
    for (int i = 0; i < 2; i++) {
        rc = tcli_run("compare %s %s --rtol %g", outs[i], tcli_golden_path(c->name, keys[i]), rtol);
        if (rc != 0)
            fail_msg("%s [%s]: compare %s exit %d:\n%s", c->name, options, keys[i], rc,
                     tcli_out);
        assert_non_null(strstr(tcli_out, "result=PASS"));
        kdalab_array got;
        tcli_read_array(outs[i], &got);
        assert_int_equal(got.dtype, KDALAB_DTYPE_F64);
        assert_int_equal(got.ndim, 4);
        for (int d = 0; d < 4; d++)
            assert_int_equal(got.shape[d], want[i]->shape[d]);
        double e = rel_err_f64(got.data, want[i]->data, got.size);
        if (!(e <= rtol))
            fail_msg("%s [%s]: %s rel err %g > %g", c->name, options, keys[i], e, rtol);
        kdalab_array_free(&got);
    }
}

/* float64 agrees with fla's float64 reference to rounding: 1e-12 relative
 * (the forms differ in summation order only). float32: 1e-5 (24-bit
 * mantissa, error growing with T and the condition of the UT transform). */
static void golden_reference(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    assert_true(n >= 6);
    for (size_t i = 0; i < n; i++) {
        const golden_case *c = &cases[i];
        golden_run(c, "", 1e-12);
        golden_run(c, "--form recurrent --precision fp64 --impl reference", 1e-12);
        golden_run(c, "--form chunk", 1e-12);
        golden_run(c, "--form chunk --chunk 16 --subchunk 4", 1e-12);
        golden_run(c, "--form chunk --chunk 13 --subchunk none", 1e-12);
        golden_run(c, "--form recurrent --precision fp32", 1e-5);
        golden_run(c, "--form chunk --precision fp32", 1e-5);
        if (c->mech == KDALAB_KDA) {
            golden_run(c, "--form chunk --decay pairwise --chunk 32", 1e-12);
            golden_run(c, "--form chunk --decay anchored --chunk 16 --subchunk 4", 1e-12);
        }
        golden_free(&cases[i]);
    }
}

/* The SIMD path through the CLI: float32, so 1e-5; float64 (chunk form), 1e-12. */
static void golden_simd(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    for (size_t i = 0; i < n; i++) {
        if (kdalab_mechanism_has_ab(cases[i].mech)) { /* the chunkwise form only */
            golden_run(&cases[i], "--impl simd --precision fp32 --form chunk", 1e-5);
            golden_run(&cases[i], "--form chunk", 1e-12); /* the SIMD path by default */
            tcli_expect_error(tcli_run("run %s --impl simd --precision fp32 --o %s",
                                       tcli_case_inputs(&cases[i]), tcli_tmp("o.npy")),
                              2, "chunkwise form", NULL);
            golden_free(&cases[i]);
            continue;
        }
        golden_run(&cases[i], "--impl simd --precision fp32 --form chunk", 1e-5);
        golden_run(&cases[i], "--impl simd --precision fp32 --form recurrent", 1e-5);
        golden_run(&cases[i], "--impl simd --precision fp64 --form chunk", 1e-12);
        golden_free(&cases[i]);
    }
}

/* Emulated bf16 runs and yields finite output on every golden case except
 * the deliberately extreme one; its error is the lead's measured bound, so
 * here only "runs, finite, shaped right" is asserted. */
static void golden_bf16_runs(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    for (size_t i = 0; i < n; i++) {
        const golden_case *c = &cases[i];
        if (kdalab_mechanism_g_shape(c->mech) != KDALAB_G_NONE) {
            const char *o = tcli_tmp("o.npy");
            int rc =
                tcli_run("run %s --form chunk --precision bf16 --o %s", tcli_case_inputs(c), o);
            if (rc != 0)
                fail_msg("%s bf16: exit %d: %s", c->name, rc, tcli_err);
            kdalab_array got;
            tcli_read_array(o, &got);
            assert_int_equal(got.size, c->o.size);
            for (size_t j = 0; j < got.size; j++)
                assert_true(isfinite(got.data[j]));
            kdalab_array_free(&got);
        }
        golden_free(&cases[i]);
    }
}

/* T = 0 is legal: o is [B, 0, H, V] and empty, ht = h0 (or zero). */
static void empty_sequences(void **state)
{
    static const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                             KDALAB_GATED_DELTANET, KDALAB_KDA};
    const size_t B = 2, H = 3, K = 4, V = 5;
    size_t qs[4] = {B, 0, H, K}, vs[4] = {B, 0, H, V}, bs[3] = {B, 0, H}, hs[4] = {B, H, K, V};
    double h0[2 * 3 * 4 * 5];
    for (size_t i = 0; i < B * H * K * V; i++)
        h0[i] = 0.01 * (double)i - 0.3;
    assert_int_equal(kdalab_npy_write(tcli_tmp("eq.npy"), KDALAB_DTYPE_F64, NULL, 4, qs),
                     KDALAB_OK);
    assert_int_equal(kdalab_npy_write(tcli_tmp("ev.npy"), KDALAB_DTYPE_F32, NULL, 4, vs),
                     KDALAB_OK);
    assert_int_equal(kdalab_npy_write(tcli_tmp("eb.npy"), KDALAB_DTYPE_F64, NULL, 3, bs),
                     KDALAB_OK);
    assert_int_equal(kdalab_npy_write(tcli_tmp("eh0.npy"), KDALAB_DTYPE_F64, h0, 4, hs), KDALAB_OK);
    for (size_t m = 0; m < 4; m++) {
        char extra[1024] = "";
        if (kdalab_mechanism_has_beta(mechs[m]))
            snprintf(extra, sizeof extra, "--beta %s", tcli_tmp("eb.npy"));
        if (mechs[m] == KDALAB_GATED_DELTANET)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --g %s",
                     tcli_tmp("eb.npy"));
        if (mechs[m] == KDALAB_KDA)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --g %s",
                     tcli_tmp("eq.npy"));
        static const char *forms[] = {"", "--form chunk", "--precision fp32",
                                      "--form chunk --precision fp32 --impl simd"};
        for (int f = 0; f < 4; f++)
            for (int with_h0 = 0; with_h0 < 2; with_h0++) {
                unlink(tcli_tmp("o.npy"));
                unlink(tcli_tmp("ht.npy"));
                int rc = tcli_run("run --mechanism %s --q %s --k %s --v %s %s %s %s %s --o %s "
                                  "--ht %s",
                                  kdalab_mechanism_name(mechs[m]), tcli_tmp("eq.npy"),
                                  tcli_tmp("eq.npy"), tcli_tmp("ev.npy"), extra,
                                  with_h0 ? "--h0" : "", with_h0 ? tcli_tmp("eh0.npy") : "",
                                  forms[f], tcli_tmp("o.npy"), tcli_tmp("ht.npy"));
                if (rc != 0)
                    fail_msg("%s %s: exit %d: %s", kdalab_mechanism_name(mechs[m]), forms[f],
                             rc, tcli_err);
                kdalab_array o, ht;
                tcli_read_array(tcli_tmp("o.npy"), &o);
                assert_int_equal(o.ndim, 4);
                assert_int_equal(o.size, 0);
                for (int d = 0; d < 4; d++)
                    assert_int_equal(o.shape[d], vs[d]);
                tcli_read_array(tcli_tmp("ht.npy"), &ht);
                assert_int_equal(ht.size, B * H * K * V);
                for (size_t i = 0; i < ht.size; i++) {
                    /* float32 paths round h0; compare at float32 precision there */
                    double want = with_h0 ? h0[i] : 0.0;
                    double tol = strstr(forms[f], "fp32") ? 1e-7 : 0.0;
                    assert_true(fabs(ht.data[i] - want) <= tol);
                }
                kdalab_array_free(&o);
                kdalab_array_free(&ht);
            }
    }
    /* B = 0 is not a sequence of length 0: refused */
    size_t zb[4] = {0, 3, H, K};
    assert_int_equal(kdalab_npy_write(tcli_tmp("zb.npy"), KDALAB_DTYPE_F64, NULL, 4, zb),
                     KDALAB_OK);
    tcli_expect_error(tcli_run("run --mechanism linear_attention --q %s --k %s --v %s --o %s",
                               tcli_tmp("zb.npy"), tcli_tmp("zb.npy"), tcli_tmp("zb.npy"),
                               tcli_tmp("o.npy")),
                      2, "--q", "only T may be 0", NULL);
}

/* The rescaled decay without sub-chunks overflows float32 on the strong-decay
 * case at C = 64 (the range premise): exit 1, the counts on stderr, and the
 * outputs ARE written, so they can be studied. */
static void overflow_is_reported(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(cases[i].name, "kda_strong_decay") == 0) {
            const char *o = tcli_tmp("o.npy");
            unlink(o);
            tcli_expect_error(
                tcli_run("run %s --form chunk --decay rescaled --chunk 64 --precision "
                         "fp32 --o %s",
                         tcli_case_inputs(&cases[i]), o),
                1, "overflowed", "non-finite", NULL);
            kdalab_array a;
            tcli_read_array(o, &a);
            size_t nonfinite = 0;
            for (size_t j = 0; j < a.size; j++)
                nonfinite += !isfinite(a.data[j]);
            assert_true(nonfinite > 0);
            kdalab_array_free(&a);
            /* and the default (safe) mode does not */
            golden_run(&cases[i], "--form chunk --precision fp32", 1e-5);
        }
        golden_free(&cases[i]);
    }
}

/* The SIMD recurrent path runs every step even after one overflows, so the
 * written outputs are computed values (as the reference's), never unwritten
 * memory. */
static void simd_overflow_writes_computed_values(void **state)
{
    const size_t T = 5, K = 2, V = 2;
    size_t qshape[4] = {1, T, 1, K}, vshape[4] = {1, T, 1, V};
    double q[10], v[10];
    for (size_t i = 0; i < 10; i++) {
        q[i] = i < 2 ? 1e20 : 0.1 * (double)i; /* the first row overflows in float32 */
        v[i] = 1.0 + (double)i;
    }
    kdalab_array qa = {.ndim = 4, .size = 10, .data = q}, va = {.ndim = 4, .size = 10, .data = v};
    memcpy(qa.shape, qshape, sizeof qshape);
    memcpy(va.shape, vshape, sizeof vshape);
    tcli_write_array(tcli_tmp("qov.npy"), KDALAB_DTYPE_F64, &qa);
    tcli_write_array(tcli_tmp("vov.npy"), KDALAB_DTYPE_F64, &va);
    const char *impl[2] = {"reference", "simd"};
    kdalab_array out[2];
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "ov_%s.npy", impl[i]);
        tcli_expect_error(tcli_run("run --mechanism linear_attention --precision fp32 --impl %s "
                                   "--q %s --k %s --v %s --o %s",
                                   impl[i], tcli_tmp("qov.npy"), tcli_tmp("qov.npy"),
                                   tcli_tmp("vov.npy"), tcli_tmp(name)),
                          1, "overflowed", NULL);
        tcli_read_array(tcli_tmp(name), &out[i]);
    }
    assert_int_equal(out[0].size, out[1].size);
    for (size_t j = 0; j < out[0].size; j++) {
        double a = out[0].data[j], b2 = out[1].data[j];
        if (!(a == b2 || (isnan(a) && isnan(b2)) || fabs(a - b2) <= 1e-5 * fabs(a)))
            fail_msg("o[%zu]: reference %g, simd %g", j, a, b2);
    }
    kdalab_array_free(&out[0]);
    kdalab_array_free(&out[1]);
}

/* Half-precision dumps are read (a '<f2' copy of a golden case agrees to fp16
 * rounding), and every positive scale the library accepts is accepted. */
static void half_inputs_and_tiny_scale(void **state)
{
    (void)state;
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    const golden_case *c = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, "kda_small") == 0)
            c = &cases[i];
    assert_non_null(c);
    /* q, k, v, g, beta, h0 as '<f2' files, written by hand */
    const char *keys[] = {"q", "k", "v", "g", "beta", "h0"};
    const kdalab_array *arr[] = {&c->q, &c->k, &c->v, &c->g, &c->beta, &c->h0};
    char paths[6][512], args[4096];
    size_t len = 0;
    for (int a = 0; a < 6; a++) {
        const kdalab_array *x = arr[a];
        char hdr[128];
        int hl = snprintf(hdr, sizeof hdr, "{'descr': '<f2', 'fortran_order': False, 'shape': (");
        for (int d = 0; d < x->ndim; d++)
            hl += snprintf(hdr + hl, sizeof hdr - (size_t)hl, "%zu, ", x->shape[d]);
        snprintf(hdr + hl, sizeof hdr - (size_t)hl, "), }");
        size_t total = 128 + 2 * x->size;
        unsigned char *img = malloc(total);
        assert_non_null(img);
        memset(img, ' ', 128);
        memcpy(img, "\x93NUMPY\x01\x00\x76\x00", 10);
        memcpy(img + 10, hdr, strlen(hdr));
        img[127] = '\n';
        for (size_t i = 0; i < x->size; i++) {
            uint16_t h = 0; /* float -> half, round to nearest (|x| < 65504 here) */
            float f = kdalab_round_fp16((float)x->data[i]);
            uint32_t u;
            memcpy(&u, &f, 4);
            int e = (int)((u >> 23) & 0xff) - 127 + 15;
            uint32_t man = u & 0x7fffff;
            if (f == 0)
                h = (uint16_t)((u >> 16) & 0x8000);
            else if (e <= 0) /* subnormal half */
                h = (uint16_t)(((u >> 16) & 0x8000) | ((man | 0x800000) >> (14 - e)));
            else
                h = (uint16_t)(((u >> 16) & 0x8000) | (uint32_t)e << 10 | man >> 13);
            img[128 + 2 * i] = (unsigned char)h;
            img[128 + 2 * i + 1] = (unsigned char)(h >> 8);
        }
        snprintf(paths[a], sizeof paths[a], "%s/half_%s.npy", tcli_tmpdir, keys[a]);
        tcli_put_bytes(paths[a], img, total);
        free(img);
        len += (size_t)snprintf(args + len, sizeof args - len, " --%s %s", keys[a], paths[a]);
    }
    assert_int_equal(tcli_run("run --mechanism kda --scale %.17g%s --o %s", c->scale, args,
                            tcli_tmp("half_o.npy")),
                     0);
    /* fp16 keeps 11 significant bits: inputs rounded by 2^-11 relative */
    assert_int_equal(tcli_run("compare %s %s --rtol 2e-2", tcli_tmp("half_o.npy"),
                            tcli_golden_path(c->name, "o")),
                     0);
    assert_int_equal(
        tcli_run("run --mechanism kda --scale 1e-320%s --o %s", args, tcli_tmp("tiny.npy")), 0);
    tcli_expect_error(
        tcli_run("run --mechanism kda --scale 0%s --o %s", args, tcli_tmp("zero.npy")), 2,
        "--scale", NULL);
    assert_false(tcli_exists(tcli_tmp("zero.npy")));
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_run_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_reference),
        cmocka_unit_test(golden_simd),
        cmocka_unit_test(golden_bf16_runs),
        cmocka_unit_test(simd_overflow_writes_computed_values),
        cmocka_unit_test(empty_sequences),
        cmocka_unit_test(overflow_is_reported),
        cmocka_unit_test(half_inputs_and_tiny_scale),
    };
    return cmocka_run_group_tests_name("cli_run", tests, setup, teardown);
}
