/*
 * tests/test_grad_attention_gates.c — the backward of causal softmax attention and
 * of fla's KDA gate and the lower-bounded gate against central finite
 * differences (step 1e-5: truncation ~1e-10, rounding ~1e-11 relative to
 * gradients of order 1; tolerance 1e-7).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common.h"
#include "grad_forms.h"

#define FD_TOL 1e-7
#define F32_TOL 1e-5 /* the float32 backward against the float64 one */

/* L = sum(o * d_o) of causal softmax attention. */
static double attention_loss(const kdalab_dims *d, double scale, const double *q,
                             const double *k, const double *v, const double *d_o)
{
    double *o = malloc((n_v(d) + 1) * sizeof *o);
    assert_non_null(o);
    assert_int_equal(kdalab_attention_f64(d, scale, q, k, v, o), KDALAB_OK);
    double L = 0;
    for (size_t i = 0; i < n_v(d); i++)
        L += o[i] * d_o[i];
    free(o);
    return L;
}

static void test_attention_finite_differences(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(29);
    const kdalab_dims shapes[] = {{.B = 1, .T = 1, .H = 1, .K = 3, .V = 2},
                                  {.B = 2, .T = 8, .H = 2, .K = 4, .V = 3}};
    double worst = 0;
    for (size_t si = 0; si < 2; si++) {
        const kdalab_dims *d = &shapes[si];
        double *q = test_random_array(rng, n_qk(d)), *k = test_random_array(rng, n_qk(d));
        double *v = test_random_array(rng, n_v(d)), *d_o = test_random_array(rng, n_v(d));
        test_grads gr;
        test_grads_alloc(&gr, d, KDALAB_LINEAR_ATTENTION);
        assert_int_equal(kdalab_attention_bwd_f64(d, 1.3, q, k, v, d_o, gr.dq, gr.dk, gr.dv),
                         KDALAB_OK);
        struct {
            double *x;
            size_t n;
            const double *grad;
        } arr[] = {{q, n_qk(d), gr.dq}, {k, n_qk(d), gr.dk}, {v, n_v(d), gr.dv}};
        for (size_t a = 0; a < 3; a++) {
            double gmax = 1e-300;
            for (size_t i = 0; i < arr[a].n; i++)
                gmax = fabs(arr[a].grad[i]) > gmax ? fabs(arr[a].grad[i]) : gmax;
            for (size_t i = 0; i < arr[a].n; i++) {
                double x0 = arr[a].x[i], h = 1e-5;
                arr[a].x[i] = x0 + h;
                double lp = attention_loss(d, 1.3, q, k, v, d_o);
                arr[a].x[i] = x0 - h;
                double lm = attention_loss(d, 1.3, q, k, v, d_o);
                arr[a].x[i] = x0;
                double e = fabs((lp - lm) / (2 * h) - arr[a].grad[i]) / gmax;
                worst = e > worst ? e : worst;
            }
        }
        test_grads_free(&gr);
        free(q); free(k); free(v); free(d_o);
    }
    /* the float32 twin against the float64 backward */
    {
        const kdalab_dims *d = &shapes[1];
        double *q = test_random_array(rng, n_qk(d)), *k = test_random_array(rng, n_qk(d));
        double *v = test_random_array(rng, n_v(d)), *d_o = test_random_array(rng, n_v(d));
        test_grads gr;
        test_grads_alloc(&gr, d, KDALAB_LINEAR_ATTENTION);
        assert_int_equal(kdalab_attention_bwd_f64(d, 1.3, q, k, v, d_o, gr.dq, gr.dk, gr.dv),
                         KDALAB_OK);
        float *fq = to_f32(q, n_qk(d)), *fk = to_f32(k, n_qk(d)), *fv = to_f32(v, n_v(d)),
              *fdo = to_f32(d_o, n_v(d));
        float *g32[3] = {calloc(n_qk(d), 4), calloc(n_qk(d), 4), calloc(n_v(d), 4)};
        assert_int_equal(kdalab_attention_bwd_f32(d, 1.3f, fq, fk, fv, fdo, g32[0], g32[1],
                                                  g32[2]),
                         KDALAB_OK);
        double e32 = rel_err_f32(g32[0], gr.dq, n_qk(d));
        e32 = fmax(e32, rel_err_f32(g32[1], gr.dk, n_qk(d)));
        e32 = fmax(e32, rel_err_f32(g32[2], gr.dv, n_v(d)));
        printf("    softmax attention backward in float32: %.2e (tolerance %g)\n", e32, F32_TOL);
        assert_true(e32 <= F32_TOL);
        for (int a = 0; a < 3; a++)
            free(g32[a]);
        free(fq); free(fk); free(fv); free(fdo); free(q); free(k); free(v); free(d_o);
        test_grads_free(&gr);
    }
    printf("    softmax attention: finite differences %.2e (tolerance %g)\n", worst, FD_TOL);
    assert_true(worst <= FD_TOL);
    gsl_rng_free(rng);
}

/* The gates against central differences, and their shapes of output. */
static void test_gates(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(31);
    const size_t BT = 5, H = 2, K = 3, n = BT * H * K;
    double *x = test_random_array(rng, n), *A = test_random_array(rng, H),
           *bias = test_random_array(rng, H * K);
    double *dg = test_random_array(rng, n), g[30], gp[30], gm[30], dx[30], dA[2], db[6];
    for (size_t i = 0; i < n; i++)
        x[i] *= 30; /* both sides of softplus's switch */
    assert_int_equal(kdalab_kda_gate_f64(BT, H, K, x, A, bias, g), KDALAB_OK);
    for (size_t i = 0; i < n; i++)
        assert_true(g[i] <= 0);
    assert_int_equal(kdalab_kda_gate_bwd_f64(BT, H, K, x, A, bias, dg, dx, dA, db), KDALAB_OK);
    double worst = 0, h = 1e-6;
    struct {
        double *p;
        size_t n;
        const double *grad;
    } arr[] = {{x, n, dx}, {A, H, dA}, {bias, H * K, db}};
    for (size_t a = 0; a < 3; a++)
        for (size_t i = 0; i < arr[a].n; i++) {
            double p0 = arr[a].p[i];
            arr[a].p[i] = p0 + h;
            kdalab_kda_gate_f64(BT, H, K, x, A, bias, gp);
            arr[a].p[i] = p0 - h;
            kdalab_kda_gate_f64(BT, H, K, x, A, bias, gm);
            arr[a].p[i] = p0;
            double fd = 0, mag = 1e-300;
            for (size_t j = 0; j < n; j++)
                fd += dg[j] * (gp[j] - gm[j]) / (2 * h);
            for (size_t j = 0; j < arr[a].n; j++)
                mag = fabs(arr[a].grad[j]) > mag ? fabs(arr[a].grad[j]) : mag;
            double e = fabs(fd - arr[a].grad[i]) / mag;
            worst = e > worst ? e : worst;
        }
    /* the lower-bounded gate */
    assert_int_equal(kdalab_lower_bound_gate_f64(n, -5, x, g), KDALAB_OK);
    assert_int_equal(kdalab_lower_bound_gate_bwd_f64(n, -5, x, dg, dx), KDALAB_OK);
    for (size_t i = 0; i < n; i++) {
        assert_true(g[i] >= -5 && g[i] <= 0);
        double x0 = x[i], e;
        x[i] = x0 + h;
        kdalab_lower_bound_gate_f64(n, -5, x, gp);
        x[i] = x0 - h;
        kdalab_lower_bound_gate_f64(n, -5, x, gm);
        x[i] = x0;
        e = fabs(dg[i] * (gp[i] - gm[i]) / (2 * h) - dx[i]) / (fabs(dg[i]) * 1.25 + 1e-300);
        worst = e > worst ? e : worst;
    }
    printf("    gates: finite differences %.2e (tolerance %g)\n", worst, FD_TOL);
    assert_true(worst <= FD_TOL);
    assert_int_equal(kdalab_lower_bound_gate_f64(n, 0.5, x, g), KDALAB_EDOMAIN);
    x[4] = NAN;
    assert_int_equal(kdalab_kda_gate_f64(BT, H, K, x, A, bias, g), KDALAB_ENONFINITE);
    assert_int_equal(kdalab_kda_gate_f64(BT, 0, K, x, A, bias, g), KDALAB_ESIZE);
    free(x); free(A); free(bias); free(dg);
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_finite_differences),
        cmocka_unit_test(test_gates),
    };
    return cmocka_run_group_tests_name("grad_attention_gates", tests, NULL, NULL);
}
