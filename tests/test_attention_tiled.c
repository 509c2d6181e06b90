/*
 * tests/test_attention_tiled.c — the fast path of causal softmax attention
 * (lib/reference/attention.c: kdalab__attention_tiled_fwd/_bwd, 64 queries a
 * tile through CBLAS, what training runs) against the reference form of the
 * same file, query by query (kdalab_attention_f64 / kdalab_attention_bwd_f64):
 *   - across three tiles, the last one short (T = 150), forward and backward,
 *     in float64 and in float32;
 *   - its backward against central differences across a tile boundary;
 *   - its backward where a product it does not use overflows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "internal.h"

/* At T = 150 (tiles [0, 64), [64, 128), [128, 150)) the tiled form and the
 * reference compute the same sums in other orders: 1e-12 relative in float64
 * (measured ~1e-16) against O(1) values, where a tile that dropped a key,
 * kept a masked one or missed a dK / dV accumulation moves them by O(0.1).
 * The float32 twin (train_expf, sgemm) against the float64 reference: 1e-5,
 * a hundred times float32's rounding of the O(1) results (measured ~1e-7). */
static void test_tiled_matches_reference(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(77);
    const kdalab_dims d = {2, 150, 2, 4, 4};
    const size_t n = d.B * d.T * d.H * d.K; /* K == V: every array is n long */
    const double scale = 1 / sqrt((double)d.K);
    double *x[4], *o = malloc(n * sizeof *o), *o_ref = malloc(n * sizeof *o);
    double *g[3], *g_ref[3];
    for (int i = 0; i < 4; i++) /* q, k, v, d_o */
        x[i] = test_random_array(rng, n);
    for (int i = 0; i < 3; i++) {
        g[i] = malloc(n * sizeof *g[i]);
        g_ref[i] = malloc(n * sizeof *g_ref[i]);
    }
    assert_int_equal(kdalab_attention_f64(&d, scale, x[0], x[1], x[2], o_ref), KDALAB_OK);
    assert_int_equal(kdalab__attention_tiled_fwd_f64(&d, scale, x[0], x[1], x[2], o), KDALAB_OK);
    assert_int_equal(kdalab_attention_bwd_f64(&d, scale, x[0], x[1], x[2], x[3], g_ref[0],
                                              g_ref[1], g_ref[2]),
                     KDALAB_OK);
    assert_int_equal(kdalab__attention_tiled_bwd_f64(&d, scale, x[0], x[1], x[2], o, x[3], g[0],
                                                     g[1], g[2]),
                     KDALAB_OK);
    const double eo = rel_err_f64(o, o_ref, n), eq = rel_err_f64(g[0], g_ref[0], n),
                 ek = rel_err_f64(g[1], g_ref[1], n), ev = rel_err_f64(g[2], g_ref[2], n);
    printf("    float64, T = 150 (3 tiles) vs the reference: o %.1e, dq %.1e, dk %.1e, dv %.1e\n",
           eo, eq, ek, ev);
    assert_true(eo < 1e-12 && eq < 1e-12 && ek < 1e-12 && ev < 1e-12);

    float *f[4], *fo = malloc(n * sizeof *fo), *fg[3];
    for (int i = 0; i < 4; i++)
        f[i] = to_f32(x[i], n);
    for (int i = 0; i < 3; i++)
        fg[i] = malloc(n * sizeof *fg[i]);
    assert_int_equal(kdalab__attention_tiled_fwd_f32(&d, (float)scale, f[0], f[1], f[2], fo),
                     KDALAB_OK);
    assert_int_equal(kdalab__attention_tiled_bwd_f32(&d, (float)scale, f[0], f[1], f[2], fo, f[3],
                                                     fg[0], fg[1], fg[2]),
                     KDALAB_OK);
    const double fo_err = rel_err_f32(fo, o_ref, n), fq = rel_err_f32(fg[0], g_ref[0], n),
                 fk = rel_err_f32(fg[1], g_ref[1], n), fv = rel_err_f32(fg[2], g_ref[2], n);
    printf("    float32, T = 150 vs the float64 reference: o %.1e, dq %.1e, dk %.1e, dv %.1e\n",
           fo_err, fq, fk, fv);
    assert_true(fo_err < 1e-5 && fq < 1e-5 && fk < 1e-5 && fv < 1e-5);

    for (int i = 0; i < 4; i++) {
        free(x[i]);
        free(f[i]);
    }
    for (int i = 0; i < 3; i++) {
        free(g[i]);
        free(g_ref[i]);
        free(fg[i]);
    }
    free(o);
    free(o_ref);
    free(fo);
    gsl_rng_free(rng);
}

/* L = sum(o * w) of the tiled forward. */
static double tiled_loss(const kdalab_dims *d, double scale, double *const x[3], const double *w,
                         double *o, size_t n)
{
    assert_int_equal(kdalab__attention_tiled_fwd_f64(d, scale, x[0], x[1], x[2], o), KDALAB_OK);
    double l = 0;
    for (size_t i = 0; i < n; i++)
        l += o[i] * w[i];
    return l;
}

/* Every element of q, k and v moved by +-h at T = 70 (tiles [0, 64) and
 * [64, 70)): dq, dk, dv of the tiled backward against central differences.
 * h = 1e-5: truncation h^2 |L'''| / 6 ~ 1e-11 and rounding eps |L| / h
 * ~ 1e-11 for these O(1) values, so 1e-8 relative to the largest |gradient|
 * leaves a margin (measured 7e-10). */
static void test_tiled_finite_differences(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(78);
    const kdalab_dims d = {1, 70, 2, 2, 2};
    const size_t n = d.B * d.T * d.H * d.K;
    const double scale = 0.9, h = 1e-5;
    double *x[3], *g[3], *w = test_random_array(rng, n), *o = malloc(n * sizeof *o);
    for (int i = 0; i < 3; i++) {
        x[i] = test_random_array(rng, n);
        g[i] = malloc(n * sizeof *g[i]);
    }
    tiled_loss(&d, scale, x, w, o, n);
    assert_int_equal(kdalab__attention_tiled_bwd_f64(&d, scale, x[0], x[1], x[2], o, w, g[0], g[1],
                                                     g[2]),
                     KDALAB_OK);
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        double gmax = 0, err = 0;
        for (size_t j = 0; j < n; j++)
            gmax = fmax(gmax, fabs(g[i][j]));
        for (size_t j = 0; j < n; j++) {
            const double keep = x[i][j];
            x[i][j] = keep + h;
            const double lp = tiled_loss(&d, scale, x, w, o, n);
            x[i][j] = keep - h;
            const double lm = tiled_loss(&d, scale, x, w, o, n);
            x[i][j] = keep;
            err = fmax(err, fabs((lp - lm) / (2 * h) - g[i][j]));
        }
        worst = fmax(worst, err / gmax);
    }
    printf("    T = 70 (2 tiles): finite differences %.1e (tolerance 1e-8)\n", worst);
    assert_true(worst < 1e-8);
    for (int i = 0; i < 3; i++) {
        free(x[i]);
        free(g[i]);
    }
    free(w);
    free(o);
    gsl_rng_free(rng);
}

/* A product the backward does not use — dO_t . v_j for a key j after the
 * query t — may overflow; it must not reach the gradients as 0 * inf = NaN
 * (found by a randomised search). The reference gives finite gradients here. */
static void test_tiled_masked_overflow(void **state)
{
    (void)state;
    const kdalab_dims dims = {1, 2, 1, 1, 1};
    const double q[2] = {0.5, 0.5}, k[2] = {0.5, -0.5}, v[2] = {1, 1e300}, d_o[2] = {1e10, 1};
    double o[2], dq[2], dk[2], dv[2], rq[2], rk[2], rv[2];
    assert_int_equal(kdalab_attention_f64(&dims, 1.0, q, k, v, o), KDALAB_OK);
    assert_int_equal(kdalab_attention_bwd_f64(&dims, 1.0, q, k, v, d_o, rq, rk, rv), KDALAB_OK);
    assert_int_equal(kdalab__attention_tiled_bwd_f64(&dims, 1.0, q, k, v, o, d_o, dq, dk, dv),
                     KDALAB_OK);
    for (int i = 0; i < 2; i++) {
        assert_true(fabs(dq[i] - rq[i]) <= 1e-12 * fabs(rq[i]));
        assert_true(fabs(dk[i] - rk[i]) <= 1e-12 * fabs(rk[i]));
        assert_true(fabs(dv[i] - rv[i]) <= 1e-12 * fabs(rv[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiled_matches_reference),
        cmocka_unit_test(test_tiled_finite_differences),
        cmocka_unit_test(test_tiled_masked_overflow),
    };
    return cmocka_run_group_tests_name("attention_tiled", tests, NULL, NULL);
}
