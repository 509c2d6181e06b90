/*
 * tests/test_simd_store.c — the SIMD path's float32 emulation of bf16 / fp16
 * storage (kdalab_chunk_opts.precision with KDALAB_IMPL_SIMD): its rounding,
 * at every dispatch level, is kdalab_round's bit for bit, and its chunkwise
 * forward has the reference emulation's error against the float64 oracle.
 *
 * Tolerance of the second, a ratio of relative RMS errors: the SIMD
 * emulation's error of o (and ht) against the float64 oracle lies within
 * [0.9, 1.1] of the reference emulation's on the same inputs. Both round
 * the same inputs (q, k, v, beta; a, b) and the same rescaled rows (gamma q,
 * scaled by s after the rounding; the decayed keys of the state update and
 * of the off-diagonal score blocks); they differ in how the rescaled rows
 * are split (the SIMD path's sub-chunk factors) and in the scalar-decay
 * rows, whose decayed Gram rows a production kernel (and the SIMD path)
 * keeps in float32 while the reference rounds them. Measured here: 0.94-1.00
 * over the seven rows, both formats, K = 32 and 128, every level, seeds 0-3
 * and the default. A path that skipped the rounding
 * would sit at float32's 1e-7, some 10^4 below (caught by the floor, a
 * quarter of the format's unit roundoff); one that skipped the rescaled rows
 * gives ratios down to 0.79, one that skipped v's 0.69; one that rounded the
 * state or W as well would sit higher.
 *
 * kdalab_store_f64, which stores a float64 array so, is kdalab_round of
 * its float32 element by element. kdalab_error_sums, the tolerances'
 * measure of such an error, equals a plain loop's block by block: its
 * maxima exactly, its sums within 1e-12 relative (the same non-negative
 * terms added in another order).
 */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "simd_levels.h"

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float of_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Every exponent and sign with mantissas at and around each format's
 * rounding boundaries (bf16 drops 16 bits, fp16 13 in its normal range and
 * more below it), then random bit patterns; an odd count, so that each
 * level's vector tail runs too. */
static float *patterns(size_t *n, gsl_rng *rng)
{
    static const uint32_t mant[] = {0,      1,      0xfff,  0x1000, 0x1001, 0x17ff,
                                    0x1800, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001,
                                    0x18000, 0x28000, 0x400000, 0x7fffff, 0x7fe000, 0x7ff000};
    const size_t nm = sizeof mant / sizeof mant[0], nrand = 200001;
    *n = 2 * 256 * nm * 2 + nrand;
    float *x = malloc(*n * sizeof *x);
    assert_non_null(x);
    size_t i = 0;
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t e = 0; e < 256; e++)
            for (size_t m = 0; m < nm; m++)
                for (int hi = 0; hi < 2; hi++) { /* the kept bits even, then odd */
                    uint32_t keep = hi ? 0x10000u | 0x2000u : 0;
                    x[i++] = of_bits(s << 31 | e << 23 | ((mant[m] | keep) & 0x7fffffu));
                }
    while (i < *n)
        x[i++] = of_bits((uint32_t)gsl_rng_uniform_int(rng, 0xffffffffUL));
    return x;
}

static void test_round_array_is_kdalab_round(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    size_t n;
    float *x = patterns(&n, rng);
    float *y = malloc(n * sizeof *y), *want = malloc(3 * n * sizeof *want);
    assert_non_null(y);
    assert_non_null(want);
    const kdalab_precision ps[] = {KDALAB_BF16, KDALAB_FP16, KDALAB_FP32};
    for (size_t pi = 0; pi < 3; pi++)
        for (size_t i = 0; i < n; i++)
            want[pi * n + i] = kdalab_round(ps[pi], x[i]);
    /* in every rounding mode of the caller: the storage format's own rounding
     * is to nearest, ties to even, whatever the float arithmetic's mode */
    const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t pi = 0; pi < 3; pi++) {
                memcpy(y, x, n * sizeof *y);
                fesetround(modes[mi]);
                kdalab_status s = kdalab_round_array(ps[pi], y, n);
                fesetround(FE_TONEAREST);
                assert_int_equal(s, KDALAB_OK);
                for (size_t i = 0; i < n; i++) {
                    float w = want[pi * n + i];
                    if (isnan(w) ? !isnan(y[i]) : bits(y[i]) != bits(w))
                        fail_msg("level %s, precision %d, rounding mode %zu: x = %a (bits "
                                 "%08x) rounds to %a, kdalab_round gives %a",
                                 kdalab_simd_level_name(simdt_levels[li]), (int)ps[pi], mi,
                                 x[i], bits(x[i]), y[i], w);
                }
            }
    }
    free(want);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    free(x);
    free(y);
    gsl_rng_free(rng);
}

static void test_round_array_errors(void **state)
{
    (void)state;
    float x[3] = {1.0f + 0x1p-9f, 2, 3};
    expect_status(kdalab_round_array((kdalab_precision)7, x, 3), KDALAB_EINVAL, "precision 7");
    expect_status(kdalab_round_array(KDALAB_BF16, NULL, 3), KDALAB_ENULL, "x is NULL");
    expect_status(kdalab_round_array(KDALAB_BF16, NULL, 0), KDALAB_OK, NULL);
    assert_true(x[0] == 1.0f + 0x1p-9f); /* untouched by the refusals */
}

/* kdalab_store_f64: each element as kdalab_round gives its float32 rounded
 * to nearest, in every format, in every rounding mode of the caller and on
 * 1, 2 and 3 threads (the caller's mode is one thread's only), with max |x|
 * (a NaN skipped, 1e39 beyond float32's range stored as inf, still counted);
 * the refusals write nothing. */
static void test_store_f64(void **state)
{
    (void)state;
    enum { N = 515 };
    gsl_rng *rng = test_rng(11);
    double x[N], peak;
    float y[N], want[3][N];
    for (size_t i = 0; i < N; i++)
        x[i] = gsl_ran_gaussian(rng, 1.0) * exp(20 * gsl_rng_uniform(rng) - 10);
    x[7] = NAN, x[300] = -1e39, x[301] = 70000.0;
    for (size_t i = 400; i < 420; i++) /* between two floats: where the mode would decide */
        x[i] = (i % 2 ? -1 : 1) * (1 + 0x1p-40) * (double)(i - 399);
    const kdalab_precision ps[] = {KDALAB_FP32, KDALAB_BF16, KDALAB_FP16};
    for (size_t j = 0; j < 3; j++)
        for (size_t i = 0; i < N; i++)
            want[j][i] = kdalab_round(ps[j], (float)x[i]);
    const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    for (int th = 1; th <= 3; th++)
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t j = 0; j < 3; j++) {
                assert_int_equal(kdalab_set_num_threads(th), KDALAB_OK);
                fesetround(modes[mi]);
                kdalab_status s = kdalab_store_f64(ps[j], x, y, N, &peak);
                fesetround(FE_TONEAREST);
                expect_status(s, KDALAB_OK, NULL);
                assert_true(peak == 1e39);
                for (size_t i = 0; i < N; i++)
                    if (!(y[i] == want[j][i] || (isnan(y[i]) && isnan(want[j][i]))))
                        fail_msg("%s, %d threads, rounding mode %zu: x[%zu] = %.17g stored as "
                                 "%.9g, not %.9g",
                                 kdalab_precision_name(ps[j]), th, mi, i, x[i], y[i],
                                 want[j][i]);
                assert_true(isinf(y[300]) && y[300] < 0);
            }
    assert_int_equal(kdalab_set_num_threads(0), KDALAB_OK);
    y[0] = -1;
    expect_status(kdalab_store_f64((kdalab_precision)7, x, y, N, &peak), KDALAB_EINVAL,
                  "precision 7");
    expect_status(kdalab_store_f64(KDALAB_BF16, NULL, y, N, &peak), KDALAB_ENULL, "x is NULL");
    expect_status(kdalab_store_f64(KDALAB_BF16, x, NULL, N, NULL), KDALAB_ENULL, "y is NULL");
    assert_true(y[0] == -1);
    expect_status(kdalab_store_f64(KDALAB_BF16, NULL, NULL, 0, &peak), KDALAB_OK, NULL);
    assert_true(peak == 0);
    gsl_rng_free(rng);
}

/* kdalab_error_sums against one loop per block, over blocks that do not
 * divide n; a NaN makes its block's sums NaN and leaves the others; the
 * refusals write nothing. */
static void test_error_sums(void **state)
{
    (void)state;
    enum { N = 1001, BLOCK = 64, NB = (N + BLOCK - 1) / BLOCK };
    gsl_rng *rng = test_rng(9);
    double ref[N], sums[4 * NB];
    float got[N];
    for (size_t i = 0; i < N; i++) {
        ref[i] = gsl_ran_gaussian(rng, 1.0) * (i % 97 == 0 ? 1e3 : 1);
        got[i] = (float)(ref[i] * (1 + 1e-3 * gsl_ran_gaussian(rng, 1.0)));
    }
    got[700] = NAN;
    expect_status(kdalab_error_sums(ref, got, N, BLOCK, sums), KDALAB_OK, NULL);
    for (size_t b = 0; b < NB; b++) {
        double md = 0, mr = 0, e2 = 0, r2 = 0;
        for (size_t i = b * BLOCK; i < N && i < (b + 1) * BLOCK; i++) {
            double d = (double)got[i] - ref[i];
            md = fabs(d) > md ? fabs(d) : md, mr = fabs(ref[i]) > mr ? fabs(ref[i]) : mr;
            e2 += d * d, r2 += ref[i] * ref[i];
        }
        if (b == 700 / BLOCK) {
            assert_true(isnan(sums[4 * b + 2]));
            continue;
        }
        assert_true(sums[4 * b] == md && sums[4 * b + 1] == mr);
        assert_true(fabs(sums[4 * b + 2] - e2) <= 1e-12 * e2);
        assert_true(fabs(sums[4 * b + 3] - r2) <= 1e-12 * r2);
    }
    sums[0] = -1;
    expect_status(kdalab_error_sums(ref, got, N, 0, sums), KDALAB_EINVAL, "block = 0");
    expect_status(kdalab_error_sums(NULL, got, N, BLOCK, sums), KDALAB_ENULL, "ref is NULL");
    expect_status(kdalab_error_sums(ref, NULL, N, BLOCK, sums), KDALAB_ENULL, "got is NULL");
    expect_status(kdalab_error_sums(ref, got, N, BLOCK, NULL), KDALAB_ENULL, "sums is NULL");
    expect_status(kdalab_error_sums(NULL, NULL, 0, BLOCK, NULL), KDALAB_OK, NULL);
    assert_true(sums[0] == -1);
    gsl_rng_free(rng);
}

/* Relative RMS of a - b over n (b the float64 oracle). */
static double rel_rms(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* The float32 chunkwise forward of call c (impl, precision p, C = 64) on the
 * problem's inputs, o and ht back in float64. */
static void run_emulated(kdalab_call c, kdalab_impl impl, kdalab_precision p,
                         const random_problem *pr, size_t nv, size_t ns, double *o, double *ht)
{
    const kdalab_dims *d = &c.dims;
    size_t nqk = n_qk(d), nb = d->B * d->T * c.HV;
    size_t ng = kdalab_mechanism_g_width(c.mech, d->K) * nb;
    float *q = to_f32(pr->q, nqk), *k = to_f32(pr->k, nqk), *v = to_f32(pr->v, nv);
    float *g = ng ? to_f32(pr->g, ng) : NULL, *beta = pr->beta ? to_f32(pr->beta, nb) : NULL;
    float *a = pr->a ? to_f32(pr->a, nqk) : NULL, *b = pr->b ? to_f32(pr->b, nqk) : NULL;
    float *of = malloc(nv * sizeof *of), *htf = malloc(ns * sizeof *htf);
    assert_non_null(of);
    assert_non_null(htf);
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = 64;
    op.precision = p;
    c.form = KDALAB_FORM_CHUNK;
    c.impl = impl;
    c.opts = &op;
    kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .a = a, .b = b,
                            .o = of, .ht = htf};
    expect_status(kdalab_run_f32(&c, &x, NULL), KDALAB_OK, NULL);
    for (size_t i = 0; i < nv; i++)
        o[i] = of[i];
    for (size_t i = 0; i < ns; i++)
        ht[i] = htf[i];
    free(q); free(k); free(v); free(g); free(beta); free(a); free(b); free(of); free(htf);
}

/* One call c on a fresh problem: the SIMD emulation's error against the
 * float64 oracle in [0.9, 1.1] of the reference emulation's, and above a
 * quarter of the format's unit roundoff, for o and ht, in both formats. */
static void check_emulation(kdalab_call c, gsl_rng *rng, const char *what)
{
    const kdalab_dims *d = &c.dims;
    size_t N = c.cu_seqlens ? c.n_seqs : d->B;
    /* the problem over the value heads (v, g, beta, a, b); q, k over H */
    random_problem pr;
    kdalab_dims dv = *d;
    dv.H = c.HV;
    random_problem_make(&pr, rng, c.mech, dv, -0.3, 0);
    size_t nv = d->B * d->T * c.HV * d->V, ns = N * c.HV * d->K * d->V;
    double *o = malloc(nv * sizeof *o), *ht = malloc(ns * sizeof *ht);
    double *o1 = malloc(nv * sizeof *o1), *ht1 = malloc(ns * sizeof *ht1);
    double *o2 = malloc(nv * sizeof *o2), *ht2 = malloc(ns * sizeof *ht2);
    assert_true(o && ht && o1 && ht1 && o2 && ht2);
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    kdalab_call c64 = c;
    c64.form = KDALAB_FORM_CHUNK;
    c64.impl = KDALAB_IMPL_REFERENCE;
    c64.opts = &op;
    kdalab_tensors_f64 x = {.q = pr.q, .k = pr.k, .v = pr.v, .g = pr.g, .beta = pr.beta,
                            .a = pr.a, .b = pr.b, .o = o, .ht = ht};
    expect_status(kdalab_run_f64(&c64, &x, NULL), KDALAB_OK, NULL);
    const kdalab_precision ps[] = {KDALAB_BF16, KDALAB_FP16};
    const double unit[] = {0x1p-8, 0x1p-11};
    for (int pi = 0; pi < 2; pi++) {
        run_emulated(c, KDALAB_IMPL_REFERENCE, ps[pi], &pr, nv, ns, o1, ht1);
        run_emulated(c, KDALAB_IMPL_SIMD, ps[pi], &pr, nv, ns, o2, ht2);
        double e[2][2] = {{rel_rms(o1, o, nv), rel_rms(ht1, ht, ns)},
                          {rel_rms(o2, o, nv), rel_rms(ht2, ht, ns)}};
        for (int j = 0; j < 2; j++) {
            double r = e[1][j] / e[0][j];
            if (!(r >= 0.9 && r <= 1.1 && e[1][j] > 0.25 * unit[pi]))
                fail_msg("%s, level %s, %s, %s: SIMD emulation's error %.3e, reference "
                         "emulation's %.3e (ratio %.3f; want [0.9, 1.1] and > %.2e)",
                         what, kdalab_simd_level_name(kdalab_simd_get_level()),
                         kdalab_mechanism_name(c.mech), pi ? "fp16" : "bf16", e[1][j],
                         e[0][j], r, 0.25 * unit[pi]);
        }
    }
    free(o); free(ht); free(o1); free(ht1); free(o2); free(ht2);
    random_problem_free(&pr);
}

static void test_simd_emulation_has_the_references_error(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(12);
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t m = 0; m < KDALAB_N_MECHANISMS; m++) {
            kdalab_mechanism mech = (kdalab_mechanism)m;
            if (!kdalab_mechanism_row(mech))
                continue;
            kdalab_call c = {.dims = {1, 128, 2, 32, 32}, .HV = 2, .mech = mech,
                             .scale = 1 / sqrt(32.0)};
            check_emulation(c, rng, "plain B = 1, T = 128, H = 2, K = V = 32");
            kdalab_call wide = {.dims = {1, 128, 1, 128, 128}, .HV = 1, .mech = mech,
                                .scale = 1 / sqrt(128.0)};
            check_emulation(wide, rng, "plain B = 1, T = 128, H = 1, K = V = 128");
        }
        /* varlen and grouped value heads: 3 sequences, HV = 2 H */
        static const int64_t cu[] = {0, 37, 100, 160};
        kdalab_call c = {.dims = {1, 160, 1, 32, 16}, .HV = 2, .cu_seqlens = cu, .n_seqs = 3,
                         .mech = KDALAB_KDA, .scale = 0.2};
        check_emulation(c, rng, "varlen 37 + 63 + 60, GVA H = 1, HV = 2");
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    gsl_rng_free(rng);
}

/* The scale comes after the rounding, as in the reference: with s = 2 and an
 * fp16 q of 40000, s q is beyond fp16's 65504 but q is not, and the SIMD
 * emulation, like the reference's, stays finite. */
static void test_scale_after_storage(void **state)
{
    (void)state;
    enum { T = 20, K = 8, V = 8 };
    float q[T * K], k[T * K], v[T * V], o[T * V], o2[T * V];
    for (int i = 0; i < T * K; i++) {
        q[i] = 0.01f * (float)(i % 7);
        k[i] = 0.3f - 0.02f * (float)(i % 11);
    }
    for (int i = 0; i < T * V; i++)
        v[i] = 0.5f - 0.1f * (float)(i % 9);
    q[0] = 40000;
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.precision = KDALAB_FP16;
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int impl = 0; impl < 2; impl++) {
            kdalab_call c = {.dims = {1, T, 1, K, V}, .HV = 1, .mech = KDALAB_LINEAR_ATTENTION,
                             .scale = 2, .form = KDALAB_FORM_CHUNK,
                             .impl = impl ? KDALAB_IMPL_SIMD : KDALAB_IMPL_REFERENCE,
                             .opts = &op};
            kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .o = impl ? o : o2};
            expect_status(kdalab_run_f32(&c, &x, NULL), KDALAB_OK, NULL);
        }
        for (int i = 0; i < T * V; i++) /* the same rounding of the same rows */
            assert_true(fabsf(o[i] - o2[i]) <= 1e-5f * (1 + fabsf(o2[i])));
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_array_is_kdalab_round),
        cmocka_unit_test(test_round_array_errors),
        cmocka_unit_test(test_store_f64),
        cmocka_unit_test(test_error_sums),
        cmocka_unit_test(test_simd_emulation_has_the_references_error),
        cmocka_unit_test(test_scale_after_storage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
