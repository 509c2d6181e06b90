/*
 * tests/test_train_layers.c — lib/train: every backward (RMSNorm, SiLU, the
 * SwiGLU gate, the short convolution, the cross-entropy loss) against central
 * finite differences; hand-computed values; bad input; the float32 twins'
 * exp (train_expf) against exp.
 *
 * Finite differences: L = sum(y * dy) for a random upstream dy (for the loss,
 * L = dloss * loss), each input element moved by +-h, h = 1e-5, compared
 * with the analytic gradient relative to the largest |analytic| of that
 * array. The truncation error is h^2 |L'''| / 6 ~ 1e-11 and the rounding
 * error eps |L| / h ~ 1e-16 * 10 / 1e-5 = 1e-10 for these O(1) inputs, so
 * 1e-7 leaves three orders of margin (the same tolerance as test_grad);
 * the measured errors are printed (1.8e-10 or below when this was written).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "train/train_internal.h"

#define FD_TOL 1e-7
#define FD_STEP 1e-5
#define SENTINEL 12345.0

static double *gaussian(gsl_rng *rng, size_t n, double sigma, double mean)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = mean + gsl_ran_gaussian(rng, sigma);
    return x;
}

static double *zeros(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ---- finite differences ---------------------------------------------------------- */

/* One layer's problem: up to three inputs, the upstream gradient, the sizes. */
typedef struct {
    size_t N, D, B, T, C, W;
    double eps, dloss;
    double *in[3];
    size_t n_in[3];
    double *dy; /* the upstream gradient, n_out values */
    size_t n_out;
    const int32_t *targets;
} layer_problem;

/* L = sum(y * dy) of each forward, at the current inputs. */
static double loss_rmsnorm(const layer_problem *p)
{
    double *y = zeros(p->n_out);
    assert_int_equal(kdalab_rmsnorm_fwd_f64(p->N, p->D, p->eps, p->in[0], p->in[1], y),
                     KDALAB_OK);
    double L = dot(y, p->dy, p->n_out);
    free(y);
    return L;
}

static double loss_silu(const layer_problem *p)
{
    double *y = zeros(p->n_out);
    assert_int_equal(kdalab_silu_fwd_f64(p->n_out, p->in[0], y), KDALAB_OK);
    double L = dot(y, p->dy, p->n_out);
    free(y);
    return L;
}

static double loss_swiglu(const layer_problem *p)
{
    double *y = zeros(p->n_out);
    assert_int_equal(kdalab_swiglu_fwd_f64(p->n_out, p->in[0], p->in[1], y), KDALAB_OK);
    double L = dot(y, p->dy, p->n_out);
    free(y);
    return L;
}

static double loss_conv(const layer_problem *p)
{
    double *y = zeros(p->n_out);
    assert_int_equal(kdalab_short_conv_fwd_f64(p->B, p->T, p->C, p->W, p->in[0], p->in[1], y),
                     KDALAB_OK);
    double L = dot(y, p->dy, p->n_out);
    free(y);
    return L;
}

static double loss_ce(const layer_problem *p)
{
    double loss;
    assert_int_equal(kdalab_cross_entropy_fwd_f64(p->N, p->D, p->in[0], p->targets, &loss,
                                                  NULL, NULL),
                     KDALAB_OK);
    return p->dloss * loss;
}

/* The worst error of grad against central differences of loss over input a,
 * relative to max |grad|. */
static double fd_error(layer_problem *p, double (*loss)(const layer_problem *), size_t a,
                       const double *grad)
{
    double gmax = 1e-300, worst = 0;
    for (size_t i = 0; i < p->n_in[a]; i++)
        gmax = fmax(gmax, fabs(grad[i]));
    for (size_t i = 0; i < p->n_in[a]; i++) {
        double x0 = p->in[a][i];
        p->in[a][i] = x0 + FD_STEP;
        double lp = loss(p);
        p->in[a][i] = x0 - FD_STEP;
        double lm = loss(p);
        p->in[a][i] = x0;
        worst = fmax(worst, fabs((lp - lm) / (2 * FD_STEP) - grad[i]) / gmax);
    }
    return worst;
}

static void report(const char *what, double err)
{
    printf("    %-34s finite differences: %.2e (tolerance %g)\n", what, err, FD_TOL);
    assert_true(err <= FD_TOL);
}

static void test_rmsnorm_fd(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(101);
    /* eps = 1e-6 on O(1) rows (eps negligible), and eps = 0.1 with one row
     * scaled by 0.1, so that eps dominates that row's mean square */
    const double eps[2] = {1e-6, 0.1};
    for (int c = 0; c < 2; c++) {
        layer_problem p = {.N = 4, .D = 6, .eps = eps[c]};
        p.n_in[0] = p.n_out = p.N * p.D;
        p.n_in[1] = p.D;
        p.in[0] = gaussian(rng, p.n_in[0], 1, 0);
        for (size_t d = 0; c == 1 && d < p.D; d++)
            p.in[0][d] *= 0.1;
        p.in[1] = gaussian(rng, p.D, 0.3, 1);
        p.dy = gaussian(rng, p.n_out, 1, 0);
        double *dx = zeros(p.n_in[0]), *dw = zeros(p.D);
        assert_int_equal(kdalab_rmsnorm_bwd_f64(p.N, p.D, p.eps, p.in[0], p.in[1], p.dy, dx,
                                                dw),
                         KDALAB_OK);
        char what[64];
        snprintf(what, sizeof what, "RMSNorm dx (eps = %g)", p.eps);
        report(what, fd_error(&p, loss_rmsnorm, 0, dx));
        snprintf(what, sizeof what, "RMSNorm dw (eps = %g)", p.eps);
        report(what, fd_error(&p, loss_rmsnorm, 1, dw));
        /* either gradient alone is the same */
        double *dx1 = zeros(p.n_in[0]), *dw1 = zeros(p.D);
        assert_int_equal(kdalab_rmsnorm_bwd_f64(p.N, p.D, p.eps, p.in[0], p.in[1], p.dy, dx1,
                                                NULL),
                         KDALAB_OK);
        assert_int_equal(kdalab_rmsnorm_bwd_f64(p.N, p.D, p.eps, p.in[0], p.in[1], p.dy, NULL,
                                                dw1),
                         KDALAB_OK);
        assert_memory_equal(dx, dx1, p.n_in[0] * sizeof *dx);
        assert_memory_equal(dw, dw1, p.D * sizeof *dw);
        free(dx); free(dw); free(dx1); free(dw1);
        free(p.in[0]); free(p.in[1]); free(p.dy);
    }
    gsl_rng_free(rng);
}

static void test_silu_swiglu_fd(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(102);
    size_t n = 40;
    layer_problem p = {.n_out = n};
    p.n_in[0] = p.n_in[1] = n;
    p.in[0] = gaussian(rng, n, 3, 0); /* both signs, into the tails */
    p.in[1] = gaussian(rng, n, 1, 0);
    p.dy = gaussian(rng, n, 1, 0);
    double *dx = zeros(n), *db = zeros(n);
    assert_int_equal(kdalab_silu_bwd_f64(n, p.in[0], p.dy, dx), KDALAB_OK);
    report("SiLU dx", fd_error(&p, loss_silu, 0, dx));
    assert_int_equal(kdalab_swiglu_bwd_f64(n, p.in[0], p.in[1], p.dy, dx, db), KDALAB_OK);
    report("SwiGLU da", fd_error(&p, loss_swiglu, 0, dx));
    report("SwiGLU db", fd_error(&p, loss_swiglu, 1, db));
    free(dx); free(db); free(p.in[0]); free(p.in[1]); free(p.dy);
    gsl_rng_free(rng);
}

static void test_short_conv_fd(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(103);
    /* W < T, and W > T (taps that never meet a token) */
    const size_t shapes[][4] = {{2, 7, 3, 4}, {1, 3, 2, 5}};
    for (size_t s = 0; s < 2; s++) {
        layer_problem p = {.B = shapes[s][0], .T = shapes[s][1], .C = shapes[s][2],
                           .W = shapes[s][3]};
        p.n_in[0] = p.n_out = p.B * p.T * p.C;
        p.n_in[1] = p.W * p.C;
        p.in[0] = gaussian(rng, p.n_in[0], 1, 0);
        p.in[1] = gaussian(rng, p.n_in[1], 0.5, 0);
        p.dy = gaussian(rng, p.n_out, 1, 0);
        double *dx = zeros(p.n_in[0]), *dw = zeros(p.n_in[1]);
        assert_int_equal(kdalab_short_conv_bwd_f64(p.B, p.T, p.C, p.W, p.in[0], p.in[1], p.dy,
                                                   dx, dw),
                         KDALAB_OK);
        char what[64];
        snprintf(what, sizeof what, "short conv dx (T = %zu, W = %zu)", p.T, p.W);
        report(what, fd_error(&p, loss_conv, 0, dx));
        snprintf(what, sizeof what, "short conv dw (T = %zu, W = %zu)", p.T, p.W);
        report(what, fd_error(&p, loss_conv, 1, dw));
        if (p.W > p.T) /* taps W > T multiply nothing */
            for (size_t j = p.T * p.C; j < p.n_in[1]; j++)
                assert_true(dw[j] == 0);
        free(dx); free(dw); free(p.in[0]); free(p.in[1]); free(p.dy);
    }
    gsl_rng_free(rng);
}

static void test_cross_entropy_fd(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(104);
    const int32_t targets[] = {2, -1, 0, 4, -1, 1, 3};
    layer_problem p = {.N = 7, .D = 5, .dloss = 0.7, .targets = targets};
    p.n_in[0] = p.N * p.D;
    p.in[0] = gaussian(rng, p.n_in[0], 2, 0);
    double *dl = zeros(p.n_in[0]);
    assert_int_equal(kdalab_cross_entropy_bwd_f64(p.N, p.D, p.in[0], targets, p.dloss, dl),
                     KDALAB_OK);
    report("cross-entropy dlogits", fd_error(&p, loss_ce, 0, dl));
    for (size_t r = 0; r < p.N; r++) {
        double row = 0;
        for (size_t v = 0; v < p.D; v++)
            row += dl[r * p.D + v];
        assert_true(fabs(row) < 1e-15); /* softmax - onehot sums to 0 */
        if (targets[r] == -1)
            for (size_t v = 0; v < p.D; v++)
                assert_true(dl[r * p.D + v] == 0);
    }
    free(dl); free(p.in[0]);
    gsl_rng_free(rng);
}

static void test_layer_values(void **state)
{
    (void)state;
    /* RMSNorm of (3, 4): mean square 12.5 */
    double x[2] = {3, 4}, w[2] = {1, 2}, y[2];
    assert_int_equal(kdalab_rmsnorm_fwd_f64(1, 2, 1e-6, x, w, y), KDALAB_OK);
    double r = 1 / sqrt(12.5 + 1e-6);
    assert_true(fabs(y[0] - 3 * r) < 1e-15 && fabs(y[1] - 8 * r) < 1e-15);
    /* an all-zero row stays zero, and finite */
    double z[3] = {0, 0, 0}, wz[3] = {1, 1, 1}, yz[3] = {SENTINEL, SENTINEL, SENTINEL};
    assert_int_equal(kdalab_rmsnorm_fwd_f64(1, 3, 1e-6, z, wz, yz), KDALAB_OK);
    assert_true(yz[0] == 0 && yz[1] == 0 && yz[2] == 0);

    /* SiLU: silu(0) = 0, silu'(0) = 1/2; very negative and positive tails */
    double sx[3] = {0, -800, 800}, sy[3], sd[3], one[3] = {1, 1, 1};
    assert_int_equal(kdalab_silu_fwd_f64(3, sx, sy), KDALAB_OK);
    assert_true(sy[0] == 0 && sy[1] == 0 && sy[2] == 800);
    assert_int_equal(kdalab_silu_bwd_f64(3, sx, one, sd), KDALAB_OK);
    assert_true(sd[0] == 0.5 && sd[1] == 0 && sd[2] == 1);

    /* the short convolution of a unit impulse is the filter */
    double imp[5] = {1, 0, 0, 0, 0}, filt[3] = {0.5, -1, 2}, out[5];
    assert_int_equal(kdalab_short_conv_fwd_f64(1, 5, 1, 3, imp, filt, out), KDALAB_OK);
    const double want[5] = {0.5, -1, 2, 0, 0};
    assert_memory_equal(out, want, sizeof want);

    /* cross-entropy: uniform logits give log V; the first maximum is the argmax */
    double logits[2 * 4] = {0}, loss, acc;
    int32_t t[2] = {0, 3};
    size_t counted;
    assert_int_equal(kdalab_cross_entropy_fwd_f64(2, 4, logits, t, &loss, &acc, &counted),
                     KDALAB_OK);
    assert_true(fabs(loss - log(4.0)) < 1e-15 && acc == 0.5 && counted == 2);
    /* huge logits stay finite; a confident right answer costs ~0 */
    double big[3] = {1e300, -1e300, 0};
    int32_t t0 = 0;
    assert_int_equal(kdalab_cross_entropy_fwd_f64(1, 3, big, &t0, &loss, &acc, NULL), KDALAB_OK);
    assert_true(loss == 0 && acc == 1);
    /* nothing counted: zeros, and zero gradient */
    int32_t none[2] = {-1, -1};
    double dl[8];
    assert_int_equal(kdalab_cross_entropy_fwd_f64(2, 4, logits, none, &loss, &acc, &counted),
                     KDALAB_OK);
    assert_true(loss == 0 && acc == 0 && counted == 0);
    assert_int_equal(kdalab_cross_entropy_bwd_f64(2, 4, logits, none, 1, dl), KDALAB_OK);
    for (int i = 0; i < 8; i++)
        assert_true(dl[i] == 0);
}

/* train_expf against exp in double, rounded to float, over every 61st float
 * of [-87.33, 88.72] (5.2 million values, both signs): within 2 ulp of the
 * rounded value (1.22 measured over every 7th float when it was written;
 * its Taylor truncation alone is 0.1 ulp, the rest the float rounding of
 * its eight steps); the ends and specials exact. Then the library's SiLU
 * of an odd-length array (the clone of TRAIN_CLONES this CPU runs, its
 * vector body and its scalar tail) gives the same bits as the same formula
 * compiled here, for the baseline, one element at a time. */
static void test_train_expf(void **state)
{
    (void)state;
    double worst = 0;
    float worst_x = 0;
    for (int neg = 0; neg < 2; neg++) {
        const uint32_t top = neg ? 0x42AEAC4Fu : 0x42B17217u; /* 87.33654, 88.72283 */
        for (uint32_t b = 0; b <= top; b += 61) {
            const uint32_t bits = b | (neg ? 0x80000000u : 0);
            float x;
            memcpy(&x, &bits, sizeof x);
            const float want = (float)exp((double)x), got = train_expf(x);
            const double ulp = (double)nextafterf(want, INFINITY) - (double)want;
            const double err = fabs((double)got - exp((double)x)) / ulp;
            if (err > worst) {
                worst = err;
                worst_x = x;
            }
        }
    }
    printf("    train_expf: worst %.3f ulp (at x = %.8g; bound 2)\n", worst, (double)worst_x);
    assert_true(worst < 2);
    assert_true(train_expf(0) == 1.0f && train_expf(-INFINITY) == 0 && train_expf(-90) == 0);
    assert_true(isinf(train_expf(89)) && isinf(train_expf(INFINITY)) && isnan(train_expf(NAN)));

    enum { N = 1003 };
    float x[N], y[N], one;
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - N / 2) * 0.05f;
    assert_int_equal(kdalab_silu_fwd_f32(N, x, y), KDALAB_OK);
    for (int i = 0; i < N; i++) {
        one = x[i] * train_sigmoid_f32(x[i]); /* layers.c's silu, compiled here */
        assert_memory_equal(&one, &y[i], sizeof one);
    }
}

static void test_layer_bad_input(void **state)
{
    (void)state;
    double x[4] = {1, 2, 3, 4}, w[2] = {1, 1}, dy[4] = {1, 1, 1, 1};
    double y[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL}, dw[2] = {SENTINEL, SENTINEL};
    double nanx[4] = {1, NAN, 3, 4};
    expect_status(kdalab_rmsnorm_fwd_f64(2, 0, 1e-6, x, w, y), KDALAB_ESIZE, "D = 0");
    expect_status(kdalab_rmsnorm_fwd_f64(2, 2, 0, x, w, y), KDALAB_EDOMAIN, "eps");
    expect_status(kdalab_rmsnorm_fwd_f64(2, 2, NAN, x, w, y), KDALAB_EDOMAIN, "eps");
    expect_status(kdalab_rmsnorm_fwd_f64(2, 2, 1e-6, NULL, w, y), KDALAB_ENULL, "x is NULL");
    expect_status(kdalab_rmsnorm_fwd_f64(2, 2, 1e-6, x, w, NULL), KDALAB_ENULL, "y is NULL");
    expect_status(kdalab_rmsnorm_fwd_f64(2, 2, 1e-6, nanx, w, y), KDALAB_ENONFINITE, "x[1]");
    expect_status(kdalab_rmsnorm_fwd_f64(SIZE_MAX / 2, 4, 1e-6, x, w, y), KDALAB_EOVERFLOW, NULL);
    expect_status(kdalab_rmsnorm_bwd_f64(2, 2, 1e-6, x, w, nanx, y, dw), KDALAB_ENONFINITE,
                  "dy[1]");
    for (int i = 0; i < 4; i++)
        assert_true(y[i] == SENTINEL);
    assert_true(dw[0] == SENTINEL && dw[1] == SENTINEL);
    /* finite inputs, overflowing output: ERANGE with the output written */
    double huge[2] = {1.7e308, 1.7e308};
    expect_status(kdalab_rmsnorm_fwd_f64(2, 2, 1e-6, x, huge, y), KDALAB_ERANGE, "non-finite");

    double sy[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL};
    expect_status(kdalab_silu_fwd_f64(4, nanx, sy), KDALAB_ENONFINITE, "x[1]");
    expect_status(kdalab_silu_bwd_f64(4, x, dy, NULL), KDALAB_ENULL, "dx is NULL");
    expect_status(kdalab_swiglu_fwd_f64(4, x, nanx, sy), KDALAB_ENONFINITE, "b[1]");
    expect_status(kdalab_swiglu_bwd_f64(4, x, x, NULL, sy, sy), KDALAB_ENULL, "dh is NULL");
    for (int i = 0; i < 4; i++)
        assert_true(sy[i] == SENTINEL);
    /* n = 0: nothing to do, NULL allowed */
    assert_int_equal(kdalab_silu_fwd_f64(0, NULL, NULL), KDALAB_OK);

    expect_status(kdalab_short_conv_fwd_f64(1, 4, 0, 2, x, w, y), KDALAB_ESIZE, "C = 0");
    expect_status(kdalab_short_conv_fwd_f64(1, 4, 1, 0, x, w, y), KDALAB_ESIZE, "W = 0");
    expect_status(kdalab_short_conv_fwd_f64(SIZE_MAX, 2, 1, 2, x, w, y), KDALAB_EOVERFLOW, NULL);
    expect_status(kdalab_short_conv_fwd_f64(1, 4, 1, 2, x, NULL, y), KDALAB_ENULL, "w is NULL");
    expect_status(kdalab_short_conv_bwd_f64(1, 4, 1, 2, x, w, nanx, y, dw), KDALAB_ENONFINITE,
                  "dy");
    assert_true(dw[0] == SENTINEL);

    int32_t t[2] = {1, 0}, bad_t[2] = {1, 5}, neg_t[2] = {-2, 0};
    double loss = SENTINEL, dl[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL};
    expect_status(kdalab_cross_entropy_fwd_f64(2, 0, x, t, &loss, NULL, NULL), KDALAB_ESIZE,
                  "V = 0");
    expect_status(kdalab_cross_entropy_fwd_f64(2, 2, x, bad_t, &loss, NULL, NULL), KDALAB_EDOMAIN,
           "targets[1] = 5");
    expect_status(kdalab_cross_entropy_fwd_f64(2, 2, x, neg_t, &loss, NULL, NULL), KDALAB_EDOMAIN,
           "targets[0] = -2");
    expect_status(kdalab_cross_entropy_fwd_f64(2, 2, nanx, t, &loss, NULL, NULL), KDALAB_ENONFINITE,
           "logits[1]");
    expect_status(kdalab_cross_entropy_fwd_f64(2, 2, x, NULL, &loss, NULL, NULL), KDALAB_ENULL,
           "targets is NULL");
    expect_status(kdalab_cross_entropy_fwd_f64(2, 2, x, t, NULL, NULL, NULL), KDALAB_ENULL,
           "loss is NULL");
    assert_true(loss == SENTINEL);
    expect_status(kdalab_cross_entropy_bwd_f64(2, 2, x, t, INFINITY, dl), KDALAB_ENONFINITE,
                  "dloss");
    expect_status(kdalab_cross_entropy_bwd_f64(2, 2, x, t, 1, NULL), KDALAB_ENULL, "dlogits");
    for (int i = 0; i < 4; i++)
        assert_true(dl[i] == SENTINEL);
}

/* RMSNorm of a huge finite row: the squares overflow, the result must not
 * (it once returned 0). Scale-invariance gives the answer: y(s x) = y(x) and
 * dx(s x) = dx(x) / s, here with s = 1e200 (1e20 in float32). */
static void test_rmsnorm_huge(void **state)
{
    (void)state;
    const double x[3] = {1, -2, 0.5}, w[3] = {1, 0.5, 2}, dy[3] = {0.3, -1, 0.7};
    double xs[3], y[3], ys[3], dx[3], dxs[3];
    for (int i = 0; i < 3; i++)
        xs[i] = x[i] * 1e200;
    assert_int_equal(kdalab_rmsnorm_fwd_f64(1, 3, 1e-300, x, w, y), KDALAB_OK);
    assert_int_equal(kdalab_rmsnorm_fwd_f64(1, 3, 1e-300, xs, w, ys), KDALAB_OK);
    assert_int_equal(kdalab_rmsnorm_bwd_f64(1, 3, 1e-300, x, w, dy, dx, NULL), KDALAB_OK);
    assert_int_equal(kdalab_rmsnorm_bwd_f64(1, 3, 1e-300, xs, w, dy, dxs, NULL), KDALAB_OK);
    for (int i = 0; i < 3; i++) {
        assert_true(fabs(ys[i] - y[i]) < 1e-15);
        assert_true(fabs(dxs[i] * 1e200 - dx[i]) < 1e-14);
    }
    float xf[3], wf[3], yf[3];
    for (int i = 0; i < 3; i++) {
        xf[i] = (float)(x[i] * 1e20); /* squares past FLT_MAX */
        wf[i] = (float)w[i];
    }
    assert_int_equal(kdalab_rmsnorm_fwd_f32(1, 3, 1e-30f, xf, wf, yf), KDALAB_OK);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(yf[i] - y[i]) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_huge),
        cmocka_unit_test(test_rmsnorm_fd),
        cmocka_unit_test(test_silu_swiglu_fd),
        cmocka_unit_test(test_short_conv_fd),
        cmocka_unit_test(test_cross_entropy_fd),
        cmocka_unit_test(test_layer_values),
        cmocka_unit_test(test_train_expf),
        cmocka_unit_test(test_layer_bad_input),
    };
    return cmocka_run_group_tests_name("train_layers", tests, NULL, NULL);
}
