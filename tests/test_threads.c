/*
 * tests/test_threads.c — the number of OpenMP threads changes nothing in the
 * output bits of the SIMD path: heads go to threads whole, and when there
 * are fewer heads than threads the value columns (independent in every
 * mechanism) are split, so no sum is ever reordered by the thread count.
 * Checked bit for bit with 1, 2 and 3 threads at every level the CPU runs,
 * for B * H = 1 (the column split), 3 and 8, every mechanism, chunkwise and
 * recurrent; and for outputs that overflow (their NaNs included).
 * kdalab_set_num_threads decides the count over OpenMP's own (a program's
 * omp_set_num_threads, as PyTorch's import makes): a call then keeps one
 * workspace per thread of the setting. In any rounding mode of the caller
 * the threaded forms compute in round to nearest: the same bits as in the
 * default mode, on 1, 2 and 3 threads; the reference follows the caller's.
 */
#include <fenv.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void run(const random_problem *p, int chunk, float *fq[5], float *o, float *ht)
{
    const kdalab_dims *d = &p->dims;
    kdalab_status s =
        chunk ? kdalab_simd_chunk_f32(d, p->mech, 0.3f, fq[0], fq[1], fq[2], fq[3], fq[4], NULL,
                                      o, ht, NULL, NULL)
              : kdalab_simd_recurrent_f32(d, p->mech, 0.3f, fq[0], fq[1], fq[2], fq[3], fq[4],
                                          NULL, o, ht);
    assert_int_equal(s, KDALAB_OK);
}

/* p's q, k, v, g, beta as new float32 arrays, in fq (run's order). */
static void f32_inputs(const random_problem *p, float *fq[5])
{
    const kdalab_dims *d = &p->dims;
    fq[0] = to_f32(p->q, n_qk(d)), fq[1] = to_f32(p->k, n_qk(d)), fq[2] = to_f32(p->v, n_v(d));
    fq[3] = to_f32(p->g, n_qk(d)), fq[4] = to_f32(p->beta, n_bth(d));
}

static void test_thread_count_changes_no_bits(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(53);
    const kdalab_dims shapes[] = {{.B = 1, .T = 70, .H = 1, .K = 32, .V = 40},
                                  {.B = 1, .T = 67, .H = 3, .K = 16, .V = 24},
                                  {.B = 2, .T = 33, .H = 4, .K = 24, .V = 16}};
    int checked = 0;
    for (int lvl = KDALAB_SIMD_SCALAR; lvl <= KDALAB_SIMD_AVX512; lvl++) {
        if (!kdalab_simd_level_available((kdalab_simd_level)lvl))
            continue;
        assert_int_equal(kdalab_simd_set_level((kdalab_simd_level)lvl), KDALAB_OK);
        for (size_t si = 0; si < 3; si++)
            for (int m = KDALAB_LINEAR_ATTENTION; m <= KDALAB_KDA; m++)
                for (int chunk = 0; chunk <= 1; chunk++) {
                    random_problem p;
                    random_problem_make(&p, rng, (kdalab_mechanism)m, shapes[si], -3.0, 0);
                    const kdalab_dims *d = &p.dims;
                    float *fq[5];
                    f32_inputs(&p, fq);
                    float *o[3], *ht[3];
                    for (int th = 0; th < 3; th++) {
                        o[th] = malloc(n_v(d) * sizeof(float));
                        ht[th] = malloc(n_state(d) * sizeof(float));
                        assert_true(o[th] && ht[th]);
                        omp_set_num_threads(th + 1);
                        run(&p, chunk, fq, o[th], ht[th]);
                    }
                    for (int th = 1; th < 3; th++)
                        if (memcmp(o[0], o[th], n_v(d) * sizeof(float)) ||
                            memcmp(ht[0], ht[th], n_state(d) * sizeof(float)))
                            fail_msg("%s %s level %s, B*H = %zu: %d threads change the bits",
                                     kdalab_mechanism_name(p.mech),
                                     chunk ? "chunkwise" : "recurrent",
                                     kdalab_simd_level_name((kdalab_simd_level)lvl),
                                     d->B * d->H, th + 1);
                    for (int th = 0; th < 3; th++) {
                        free(o[th]);
                        free(ht[th]);
                    }
                    for (int a = 0; a < 5; a++)
                        free(fq[a]);
                    random_problem_free(&p);
                    checked++;
                }
    }
    omp_set_num_threads(omp_get_num_procs());
    assert_int_equal(kdalab_simd_set_level(KDALAB_SIMD_AUTO), KDALAB_OK);
    printf("    %d (level, shape, mechanism, form) cases: 1, 2 and 3 threads bit-identical\n",
           checked);
    gsl_rng_free(rng);
}

/* The setting, not OpenMP's count, sizes a call: with a caller's workspace
 * the SIMD forward keeps one scratch per thread, so its bytes follow the
 * thread count (H = 12 heads: tasks of 4 heads for 1 and 3 threads, so 3
 * threads hold exactly 3 times 1 thread's bytes); 0 gives the count back to
 * OpenMP; a negative count is refused and the setting kept. */
static void test_set_num_threads(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(54);
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, (kdalab_dims){.B = 1, .T = 40, .H = 12, .K = 16,
                                                           .V = 16}, -3.0, 0);
    double *o = malloc(n_v(&p.dims) * sizeof *o);
    size_t bytes[4] = {0};
    omp_set_num_threads(1); /* as an imported PyTorch sets it on a machine of 2 CPUs */
    for (int n = 0; n <= 3; n++) {
        assert_int_equal(kdalab_set_num_threads(n), KDALAB_OK);
        assert_int_equal(kdalab_get_num_threads(), n ? n : 1);
        kdalab_workspace *w = kdalab_workspace_new();
        kdalab_call c = {.dims = p.dims, .HV = p.dims.H, .mech = KDALAB_KDA, .scale = 0.3,
                         .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD, .work = w};
        kdalab_tensors_f64 x = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta, .o = o};
        expect_status(kdalab_run_f64(&c, &x, NULL), KDALAB_OK, NULL);
        bytes[n] = kdalab_workspace_bytes(w);
        kdalab_workspace_free(w);
    }
    assert_true(bytes[1] > 0 && bytes[0] == bytes[1] && bytes[2] > bytes[1]);
    assert_true(bytes[3] == 3 * bytes[1]);
    /* the most threads allowed, on work of one head: one thread, one state */
    assert_int_equal(kdalab_set_num_threads(KDALAB_MAX_THREADS), KDALAB_OK);
    float qf[8], kf[8], vf[8], gf[8], bf[2], of[8], hf[16];
    for (int i = 0; i < 8; i++)
        qf[i] = kf[i] = 0.5f, vf[i] = 1, gf[i] = -0.1f;
    bf[0] = bf[1] = 0.5f;
    kdalab_dims one = {.B = 1, .T = 2, .H = 1, .K = 4, .V = 4};
    expect_status(kdalab_simd_recurrent_f32(&one, KDALAB_KDA, 0.5f, qf, kf, vf, gf, bf, NULL, of,
                                            hf),
                  KDALAB_OK, NULL);
    double peak;
    expect_status(kdalab_store_f64(KDALAB_BF16, p.q, qf, 8, &peak), KDALAB_OK, NULL);
    assert_int_equal(kdalab_set_num_threads(2), KDALAB_OK);
    expect_status(kdalab_set_num_threads(-1), KDALAB_EINVAL, "thread count -1");
    expect_status(kdalab_set_num_threads(KDALAB_MAX_THREADS + 1), KDALAB_EINVAL, "expected 1 to");
    assert_int_equal(kdalab_get_num_threads(), 2);
    assert_int_equal(kdalab_set_num_threads(0), KDALAB_OK);
    omp_set_num_threads(omp_get_num_procs());
    free(o);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* The caller's rounding mode (only its own thread's) changes no bit of the
 * threaded forms: the chunkwise forward and recurrent form in float32, the
 * float64 backward, each on 1, 2 and 3 threads in FE_UPWARD, FE_DOWNWARD and
 * FE_TOWARDZERO, equal to round to nearest on one thread. */
static void test_rounding_mode_changes_no_bits(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(55);
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, (kdalab_dims){.B = 1, .T = 50, .H = 5, .K = 16,
                                                           .V = 24}, -3.0, 0);
    const kdalab_dims *d = &p.dims;
    float *fq[5];
    f32_inputs(&p, fq);
    const size_t nv = n_v(d), nq = n_qk(d);
    float *want_o[2], *got_o = malloc(nv * sizeof(float)), *ht = malloc(n_state(d) * 4);
    double *d_o = malloc(nv * sizeof *d_o), *want_dk = malloc(nq * sizeof(double));
    double *dk = malloc(nq * sizeof *dk);
    for (size_t i = 0; i < nv; i++)
        d_o[i] = p.v[(i * 7) % nv];
    kdalab_call c = {.dims = *d, .HV = d->H, .mech = KDALAB_KDA, .scale = 0.3,
                     .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD};
    kdalab_tensors_f64 xb = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                             .d_o = d_o, .dk = dk};
    assert_int_equal(kdalab_set_num_threads(1), KDALAB_OK);
    for (int chunk = 0; chunk <= 1; chunk++) {
        want_o[chunk] = malloc(nv * sizeof(float));
        run(&p, chunk, fq, want_o[chunk], ht);
    }
    xb.dk = want_dk;
    expect_status(kdalab_run_bwd_f64(&c, &xb), KDALAB_OK, NULL);
    xb.dk = dk;
    const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    for (int th = 1; th <= 3; th++)
        for (int mi = 0; mi < 3; mi++) {
            assert_int_equal(kdalab_set_num_threads(th), KDALAB_OK);
            for (int chunk = 0; chunk <= 1; chunk++) {
                fesetround(modes[mi]);
                run(&p, chunk, fq, got_o, ht);
                fesetround(FE_TONEAREST);
                if (memcmp(got_o, want_o[chunk], nv * sizeof(float)))
                    fail_msg("%s, %d threads, mode %d: o differs from round to nearest",
                             chunk ? "chunkwise" : "recurrent", th, mi);
            }
            fesetround(modes[mi]);
            kdalab_status s = kdalab_run_bwd_f64(&c, &xb);
            fesetround(FE_TONEAREST);
            expect_status(s, KDALAB_OK, NULL);
            if (memcmp(dk, want_dk, nq * sizeof(double)))
                fail_msg("backward, %d threads, mode %d: dk differs from round to nearest", th,
                         mi);
        }
    assert_int_equal(kdalab_set_num_threads(0), KDALAB_OK);
    for (int a = 0; a < 5; a++)
        free(fq[a]);
    free(want_o[0]), free(want_o[1]), free(got_o), free(ht), free(d_o), free(want_dk), free(dk);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* The reference, by contrast, computes in the caller's rounding mode
 * (kdalab_call.h, kdalab_impl): its float64 chunkwise KDA output under
 * FE_UPWARD and FE_DOWNWARD differs from round to nearest, by more than
 * nothing and less than 1e-12 of the output's largest magnitude (about 1e-14
 * measured: 256 directed roundings' reach, a thousand times unit roundoff at
 * most). */
static void test_reference_follows_the_callers_mode(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(56);
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, (kdalab_dims){.B = 1, .T = 64, .H = 2, .K = 16,
                                                           .V = 16}, -3.0, 0);
    const size_t nv = n_v(&p.dims);
    double *want = malloc(nv * sizeof *want), *got = malloc(nv * sizeof *got);
    kdalab_call c = {.dims = p.dims, .HV = p.dims.H, .mech = KDALAB_KDA, .scale = 0.3,
                     .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_REFERENCE};
    kdalab_tensors_f64 x = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta, .o = want};
    expect_status(kdalab_run_f64(&c, &x, NULL), KDALAB_OK, NULL);
    double peak = 0;
    for (size_t i = 0; i < nv; i++)
        peak = fmax(peak, fabs(want[i]));
    const int modes[] = {FE_UPWARD, FE_DOWNWARD};
    x.o = got;
    for (int mi = 0; mi < 2; mi++) {
        fesetround(modes[mi]);
        kdalab_status s = kdalab_run_f64(&c, &x, NULL);
        fesetround(FE_TONEAREST);
        expect_status(s, KDALAB_OK, NULL);
        double diff = 0;
        for (size_t i = 0; i < nv; i++)
            diff = fmax(diff, fabs(got[i] - want[i]));
        if (!(diff > 0 && diff < 1e-12 * peak))
            fail_msg("mode %d: max |o - o_nearest| = %.3g of max |o| %.3g: expected (0, 1e-12) "
                     "of it", mi, diff, peak);
    }
    free(want), free(got);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* The generator of the case below: a 64-bit LCG, so the case is the same
 * draws on every machine. */
static unsigned long long lcg_state;
static double lcg_uniform(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) / 9007199254740992.0;
}
static size_t lcg_int(size_t a, size_t b) { return a + (size_t)(lcg_uniform() * (double)(b - a + 1)); }

/* Outputs that overflow: the same bits too. Three cases from a
 * randomised search (draw numbers 92, 568 and 1474 of its generator, reproduced here): with
 * inputs near the top of the range, o and ht hold NaNs whose sign depended
 * on how the columns were split among threads (AVX-512), until the kernels
 * wrote every NaN of an overflowed output as the one quiet NaN. Each case
 * must return KDALAB_ERANGE with identical o and ht for 1, 2 and 3 threads,
 * at every level. */
static void test_overflow_changes_no_bits(void **state)
{
    (void)state;
    const int draws[] = {92, 568, 1474};
    int checked = 0;
    for (size_t di = 0; di < sizeof draws / sizeof draws[0]; di++) {
        lcg_state = 1000 + (unsigned long long)draws[di];
        lcg_uniform();
        int mech = (int)lcg_int(0, 3);
        kdalab_dims d = {lcg_int(1, 2), lcg_int(1, 120), lcg_int(1, 6), lcg_int(1, 40),
                         lcg_int(1, 40)};
        size_t nqk = n_qk(&d), nv = n_v(&d), nb = n_bth(&d), ns = n_state(&d);
        size_t ng = nb * kdalab_mechanism_g_width((kdalab_mechanism)mech, d.K);
        int big = (int)lcg_int(0, 4);
        double sq = big == 0 ? 1e19 : big == 1 ? 1e10 : big == 2 ? 1e30 : big == 3 ? 3e18 : 1e5;
        double sv = big == 2 ? 1e30 : big == 4 ? 1e36 : 1e10;
        int with_h0 = lcg_uniform() < 0.5, f64 = lcg_uniform() < 0.5;
        double *x[6];
        size_t n[6] = {nqk, nqk, nv, ng, nb, ns};
        for (int a = 0; a < 6; a++)
            assert_non_null(x[a] = malloc((n[a] + 1) * sizeof(double)));
        for (size_t i = 0; i < nqk; i++) {
            x[0][i] = sq * (lcg_uniform() - 0.5);
            x[1][i] = sq * (lcg_uniform() - 0.5);
        }
        for (size_t i = 0; i < nv; i++)
            x[2][i] = sv * (lcg_uniform() - 0.5);
        for (size_t i = 0; i < ng; i++)
            x[3][i] = -0.01 * lcg_uniform();
        for (size_t i = 0; i < nb; i++)
            x[4][i] = 2 * lcg_uniform();
        for (size_t i = 0; i < ns; i++)
            x[5][i] = (f64 ? 1e300 : 1e37) * (lcg_uniform() - 0.5);
        if (f64) {
            for (size_t i = 0; i < nqk; i++) {
                x[0][i] *= 1e140;
                x[1][i] *= 1e140;
            }
            for (size_t i = 0; i < nv; i++)
                x[2][i] *= 1e250;
        }
        kdalab_chunk_opts op = kdalab_chunk_opts_default();
        op.chunk = lcg_int(1, 40);
        op.subchunk = lcg_int(1, op.chunk);
        double scale = kdalab_default_scale(d.K);
        float *xf[6];
        for (int a = 0; a < 6; a++)
            xf[a] = f64 ? NULL : to_f32(x[a], n[a]);
        const size_t es = f64 ? sizeof(double) : sizeof(float);
        for (int lvl = KDALAB_SIMD_SCALAR; lvl <= KDALAB_SIMD_AVX512; lvl++) {
            if (!kdalab_simd_level_available((kdalab_simd_level)lvl))
                continue;
            assert_int_equal(kdalab_simd_set_level((kdalab_simd_level)lvl), KDALAB_OK);
            unsigned char *o[3], *ht[3];
            for (int th = 0; th < 3; th++) {
                assert_non_null(o[th] = malloc(nv * es + 1));
                assert_non_null(ht[th] = malloc(ns * es + 1));
                omp_set_num_threads(th + 1);
                kdalab_status s =
                    f64 ? kdalab_simd_chunk_f64(&d, (kdalab_mechanism)mech, scale, x[0], x[1],
                                                x[2], x[3], x[4], with_h0 ? x[5] : NULL,
                                                (double *)o[th], (double *)ht[th], &op, NULL)
                        : kdalab_simd_chunk_f32(&d, (kdalab_mechanism)mech, (float)scale,
                                                xf[0], xf[1], xf[2], xf[3], xf[4],
                                                with_h0 ? xf[5] : NULL, (float *)o[th],
                                                (float *)ht[th], &op, NULL);
                assert_int_equal(s, KDALAB_ERANGE);
            }
            for (int th = 1; th < 3; th++)
                if (memcmp(o[0], o[th], nv * es) || memcmp(ht[0], ht[th], ns * es))
                    fail_msg("draw %d (%s, %s) level %s: %d threads change the bits of an "
                             "overflowed output", draws[di],
                             kdalab_mechanism_name((kdalab_mechanism)mech),
                             f64 ? "float64" : "float32",
                             kdalab_simd_level_name((kdalab_simd_level)lvl), th + 1);
            for (int th = 0; th < 3; th++) {
                free(o[th]);
                free(ht[th]);
            }
            checked++;
        }
        for (int a = 0; a < 6; a++) {
            free(x[a]);
            free(xf[a]);
        }
    }
    omp_set_num_threads(omp_get_num_procs());
    assert_int_equal(kdalab_simd_set_level(KDALAB_SIMD_AUTO), KDALAB_OK);
    printf("    %d (draw, level) overflow cases: 1, 2 and 3 threads bit-identical\n", checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_count_changes_no_bits),
        cmocka_unit_test(test_overflow_changes_no_bits),
        cmocka_unit_test(test_set_num_threads),
        cmocka_unit_test(test_rounding_mode_changes_no_bits),
        cmocka_unit_test(test_reference_follows_the_callers_mode),
    };
    return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
