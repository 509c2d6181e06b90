/*
 * lib/train/layers.c — the pieces of a model around its mixers, forward and
 * backward, in float64: RMSNorm with a gain, SiLU, the SwiGLU gate and the
 * causal depthwise short convolution. Each backward is the forward's chain
 * rule written out (the formulas are in kdalab_train.h) and is checked
 * against central finite differences in tests/test_train_layers.c.
 *
 * Each public function checks its arguments (sizes, NULL, finite inputs)
 * and its outputs, then calls its kernel, train_<layer>_<fwd|bwd>_f64
 * (lib/train/train_internal.h): the same arithmetic without the checks,
 * which the model calls on activations it made itself (it checks theta
 * once, and the loss and every gradient once, instead of every layer's
 * inputs again: those passes were 6 % of a d = 128 attention step). The
 * elementwise loops carry `omp simd` so that they vectorise; the float32
 * twin's exp is train_expf, the vectorisable one of train_internal.h.
 *
 * defines: kdalab_rmsnorm_fwd_f64, kdalab_rmsnorm_bwd_f64,
 *          kdalab_silu_fwd_f64, kdalab_silu_bwd_f64,
 *          kdalab_swiglu_fwd_f64, kdalab_swiglu_bwd_f64,
 *          kdalab_short_conv_fwd_f64, kdalab_short_conv_bwd_f64,
 *          and their kernels kdalab__train_rmsnorm_fwd_f64 ... kdalab__train_short_conv_bwd_f64;
 *          the L2 normalisation kdalab__train_l2norm_fwd_f64, kdalab__train_l2norm_bwd_f64
 *          (lib/train/train_internal.h)
 *
 * The library's one RMSNorm and one L2 normalisation are here: the training
 * mixers (mixer.c) and the hybrid stack (lib/model/) both call these kernels.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "train_internal.h"

/* ---- shared checks ----------------------------------------------------------- */

/* *n = a * b elements of double, no overflow of the count or its bytes. */
static kdalab_status count2(const char *what, size_t a, size_t b, size_t *n)
{
    size_t bytes;
    if (!kdalab_mul_size(a, b, n) || !kdalab_mul_size(*n, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "%s: %zu * %zu elements overflow", what, a, b);
    return KDALAB_OK;
}

/* An input array of n values: not NULL when n > 0, every value finite. */
static kdalab_status input(const char *name, const double *x, size_t n)
{
    kdalab_status s = kdalab_check_count(name, n, sizeof(double));
    if (s != KDALAB_OK)
        return s;
    if (n && !x)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", name);
    return kdalab_check_values_f64(KDALAB_RULE_FINITE, name, x, n, NULL);
}

/* A required output array of n values. */
static kdalab_status output(const char *name, const double *y, size_t n)
{
    kdalab_status s = kdalab_check_count(name, n, sizeof(double));
    if (s != KDALAB_OK)
        return s;
    if (n && !y)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", name);
    return KDALAB_OK;
}

/* Both outputs of a backward checked for non-finite values (NULL: not asked). */
static kdalab_status check_grads(const char *what, const double *d1, size_t n1,
                                 const double *d2, size_t n2)
{
    kdalab_status s = KDALAB_OK;
    if (d1)
        s = kdalab_check_outputs_f64(what, d1, n1, NULL, 0, NULL, NULL);
    if (s == KDALAB_OK && d2)
        s = kdalab_check_outputs_f64(what, d2, n2, NULL, 0, NULL, NULL);
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}

/* ---- RMSNorm ------------------------------------------------------------------- */

static kdalab_status rmsnorm_check(size_t N, size_t D, double eps, const double *x,
                                   const double *w, size_t *n)
{
    if (D == 0)
        return kdalab_fail(KDALAB_ESIZE, "D = 0: RMSNorm needs at least one feature");
    if (!isfinite(eps) || eps <= 0)
        return kdalab_fail(KDALAB_EDOMAIN, "eps = %g: it must be finite and > 0", eps);
    kdalab_status s = count2("RMSNorm", N, D, n);
    if (s == KDALAB_OK)
        s = input("x", x, *n);
    if (s == KDALAB_OK)
        s = input("w", w, D);
    return s;
}

/* 1 / sqrt(mean(x^2) + eps) of one row x [D]. When the squares overflow
 * (|x| past ~1e154, ~1e19 in float32) the same from x scaled by its largest
 * magnitude, where eps no longer counts: a finite row never gets 0. */
static double rms_inverse(size_t D, double eps, const double *x)
{
    double ss = 0;
    for (size_t d = 0; d < D; d++)
        ss += x[d] * x[d];
    if (isfinite(ss))
        return 1 / sqrt(ss / (double)D + eps);
    double m = 0, s2 = 0;
    for (size_t d = 0; d < D; d++)
        m = fmax(m, fabs(x[d]));
    for (size_t d = 0; d < D; d++)
        s2 += (x[d] / m) * (x[d] / m);
    return 1 / (m * sqrt(s2 / (double)D));
}

TRAIN_CLONES
void kdalab__train_rmsnorm_fwd_f64(size_t N, size_t D, double eps, const double *x, const double *w,
                                   double *y)
{
    // x, y are (N, D); w is (D)
    for (size_t r = 0; r < N; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        const double inv = rms_inverse(D, eps, xr);
#pragma omp simd
        for (size_t d = 0; d < D; d++)
            yr[d] = xr[d] * inv * w[d];
    }
}

kdalab_status kdalab_rmsnorm_fwd_f64(size_t N, size_t D, double eps, const double *x,
                                     const double *w, double *y)
{
    // x, y are (N, D); w is (D)
    kdalab_clear_error();
    size_t n;
    kdalab_status s = rmsnorm_check(N, D, eps, x, w, &n);
    if (s == KDALAB_OK)
        s = output("y", y, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_rmsnorm_fwd_f64(N, D, eps, x, w, y);
    return kdalab_check_outputs_f64("RMSNorm", y, n, NULL, 0, NULL, NULL);
}

TRAIN_CLONES
void kdalab__train_rmsnorm_bwd_f64(size_t N, size_t D, double eps, const double *x, const double *w,
                                   const double *dy, double *dx, double *dw)
{
    // x, dy, dx are (N, D); w, dw are (D)
    for (size_t d = 0; dw && d < D; d++)
        dw[d] = 0;
    for (size_t r = 0; r < N; r++) {
        const double *xr = x + r * D, *dyr = dy + r * D;
        double inv = rms_inverse(D, eps, xr);
        /* dot = sum_d dy w x: how the row's scale moves the loss */
        double dot = 0;
        for (size_t d = 0; d < D; d++)
            dot += dyr[d] * w[d] * xr[d];
        /* dx = r w dy - r^3 x dot / D, grouped as r (w dy - (r dot / D)(r x)) so
         * no power of r under- or overflows when x is huge */
        const double coef = inv * dot / (double)D;
        double *dxr = dx ? dx + r * D : NULL;
        if (dxr) {
#pragma omp simd
            for (size_t d = 0; d < D; d++)
                dxr[d] = inv * (w[d] * dyr[d] - coef * (inv * xr[d]));
        }
        if (dw) {
#pragma omp simd
            for (size_t d = 0; d < D; d++)
                dw[d] += dyr[d] * xr[d] * inv;
        }
    }
}

kdalab_status kdalab_rmsnorm_bwd_f64(size_t N, size_t D, double eps, const double *x,
                                     const double *w, const double *dy, double *dx,
                                     double *dw)
{
    // x, dy, dx are (N, D); w, dw are (D)
    kdalab_clear_error();
    size_t n;
    kdalab_status s = rmsnorm_check(N, D, eps, x, w, &n);
    if (s == KDALAB_OK)
        s = input("dy", dy, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_rmsnorm_bwd_f64(N, D, eps, x, w, dy, dx, dw);
    return check_grads("RMSNorm backward", dx, n, dw, D);
}

/* ---- L2 normalisation -------------------------------------------------------- */

/* The L2 norm of one row x [d] as a divisor m and a factor inv, so that
 * x / sqrt(|x|^2 + eps) = (x / m) * inv: m = 1 and inv = 1 / sqrt(|x|^2 + eps)
 * while the sum of squares is finite and, with eps, at least DBL_MIN (always,
 * for eps > 0); else m = max |x| and inv = 1 / sqrt(|x / m|^2) (eps then does
 * not count), neither of which over- or underflows. A row of zeros gets
 * inv = 0 and stays zeros, also with eps = 0. eps stays a 64-bit number in
 * both precisions, so the twin forms ss + eps in 64 bits, as it did when the
 * mixer added its 1e-6 constant there (the same bits). */
static double l2_scale(size_t d, const double *x, double *m,
                       double eps) /* f64-scalar: eps */
{
    double ss = 0, mx = 0, s2 = 0;
    for (size_t i = 0; i < d; i++)
        ss += x[i] * x[i];
    *m = 1;
    if (isfinite(ss) && ss + eps >= DBL_MIN)
        return 1 / sqrt(ss + eps);
    for (size_t i = 0; i < d; i++)
        mx = fmax(mx, fabs(x[i]));
    if (mx == 0)
        return 0;
    for (size_t i = 0; i < d; i++)
        s2 += (x[i] / mx) * (x[i] / mx);
    *m = mx;
    return 1 / sqrt(s2);
}

void kdalab__train_l2norm_fwd_f64(size_t rows, size_t d,
                                  double eps, /* f64-scalar */
                                  const double *x, double *y)
{
    // x, y are (rows, d); y may be x
    for (size_t r = 0; r < rows; r++) {
        double m;
        const double inv = l2_scale(d, x + r * d, &m, eps);
        for (size_t i = 0; i < d; i++)
            y[r * d + i] = x[r * d + i] / m * inv;
    }
}

void kdalab__train_l2norm_bwd_f64(size_t rows, size_t d,
                                  double eps, /* f64-scalar */
                                  const double *x, const double *y, const double *dy, double *dx)
{
    // x, y, dy, dx are (rows, d): dx = (dy - y (y . dy)) / sqrt(|x|^2 + eps)
    for (size_t r = 0; r < rows; r++) {
        double yd = 0, m;
        for (size_t i = 0; i < d; i++)
            yd += y[r * d + i] * dy[r * d + i];
        const double inv = l2_scale(d, x + r * d, &m, eps);
        for (size_t i = 0; i < d; i++)
            dx[r * d + i] = (dy[r * d + i] - y[r * d + i] * yd) / m * inv;
    }
}

/* ---- SiLU and the SwiGLU gate ------------------------------------------------------ */

static inline double silu(double x) { return x * train_sigmoid_f64(x); }

/* d silu / dx = s + x s (1 - s), s = sigmoid(x) */
static inline double silu_grad(double x)
{
    const double sg = train_sigmoid_f64(x);
    return sg * (1 + x * (1 - sg));
}

TRAIN_CLONES
void kdalab__train_silu_fwd_f64(size_t n, const double *x, double *y)
{
    // x, y are (n)
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = silu(x[i]);
}

kdalab_status kdalab_silu_fwd_f64(size_t n, const double *x, double *y)
{
    // x, y are (n)
    kdalab_clear_error();
    kdalab_status s = input("x", x, n);
    if (s == KDALAB_OK)
        s = output("y", y, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_silu_fwd_f64(n, x, y);
    kdalab_clear_error(); /* |silu(x)| <= |x|: finite */
    return KDALAB_OK;
}

TRAIN_CLONES
void kdalab__train_silu_bwd_f64(size_t n, const double *x, const double *dy, double *dx)
{
    // x, dy, dx are (n)
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * silu_grad(x[i]);
}

kdalab_status kdalab_silu_bwd_f64(size_t n, const double *x, const double *dy, double *dx)
{
    // x, dy, dx are (n)
    kdalab_clear_error();
    kdalab_status s = input("x", x, n);
    if (s == KDALAB_OK)
        s = input("dy", dy, n);
    if (s == KDALAB_OK)
        s = output("dx", dx, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_silu_bwd_f64(n, x, dy, dx);
    return check_grads("SiLU backward", dx, n, NULL, 0);
}

TRAIN_CLONES
void kdalab__train_swiglu_fwd_f64(size_t n, const double *a, const double *b, double *h)
{
    // a, b, h are (n)
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        h[i] = silu(a[i]) * b[i];
}

kdalab_status kdalab_swiglu_fwd_f64(size_t n, const double *a, const double *b, double *h)
{
    // a, b, h are (n)
    kdalab_clear_error();
    kdalab_status s = input("a", a, n);
    if (s == KDALAB_OK)
        s = input("b", b, n);
    if (s == KDALAB_OK)
        s = output("h", h, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_swiglu_fwd_f64(n, a, b, h);
    return kdalab_check_outputs_f64("SwiGLU", h, n, NULL, 0, NULL, NULL);
}

TRAIN_CLONES
void kdalab__train_swiglu_bwd_f64(size_t n, const double *a, const double *b, const double *dh,
                                  double *da, double *db)
{
    // a, b, dh, da, db are (n)
    if (da) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            da[i] = dh[i] * b[i] * silu_grad(a[i]);
    }
    if (db) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            db[i] = dh[i] * silu(a[i]);
    }
}

kdalab_status kdalab_swiglu_bwd_f64(size_t n, const double *a, const double *b,
                                    const double *dh, double *da, double *db)
{
    // a, b, dh, da, db are (n)
    kdalab_clear_error();
    kdalab_status s = input("a", a, n);
    if (s == KDALAB_OK)
        s = input("b", b, n);
    if (s == KDALAB_OK)
        s = input("dh", dh, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_swiglu_bwd_f64(n, a, b, dh, da, db);
    return check_grads("SwiGLU backward", da, n, db, n);
}

/* ---- the causal depthwise short convolution ----------------------------------------- */

static kdalab_status conv_check(size_t B, size_t T, size_t C, size_t W, const double *x,
                                const double *w, size_t *n, size_t *nw)
{
    size_t bt;
    if (C == 0 || W == 0)
        return kdalab_fail(KDALAB_ESIZE, "C = %zu, W = %zu: both must be >= 1", C, W);
    kdalab_status s = count2("short convolution", B, T, &bt);
    if (s == KDALAB_OK)
        s = count2("short convolution", bt, C, n);
    if (s == KDALAB_OK)
        s = count2("short convolution weight", W, C, nw);
    if (s == KDALAB_OK)
        s = input("x", x, *n);
    if (s == KDALAB_OK)
        s = input("w", w, *nw);
    return s;
}

TRAIN_CLONES
void kdalab__train_short_conv_fwd_f64(size_t B, size_t T, size_t C, size_t W, const double *x,
                                      const double *w, double *y)
{
    // x, y are (B, T, C); w is (W, C), w[0] on the current token
    for (size_t b = 0; b < B; b++) {
        const double *xb = x + b * T * C;
        double *yb = y + b * T * C;
        for (size_t t = 0; t < T; t++) {
            /* y[t] = sum over i = 0, 1, ... of w[i] x[t - i], channel by channel:
             * the taps outermost so the channel loop vectorises (same order of sums) */
            double *yt = yb + t * C;
#pragma omp simd
            for (size_t c = 0; c < C; c++)
                yt[c] = w[c] * xb[t * C + c];
            for (size_t i = 1; i < W && i <= t; i++) {
                const double *wi = w + i * C, *xs = xb + (t - i) * C;
#pragma omp simd
                for (size_t c = 0; c < C; c++)
                    yt[c] += wi[c] * xs[c];
            }
        }
    }
}

kdalab_status kdalab_short_conv_fwd_f64(size_t B, size_t T, size_t C, size_t W,
                                        const double *x, const double *w, double *y)
{
    // x, y are (B, T, C); w is (W, C), w[0] on the current token
    kdalab_clear_error();
    size_t n, nw;
    kdalab_status s = conv_check(B, T, C, W, x, w, &n, &nw);
    if (s == KDALAB_OK)
        s = output("y", y, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_short_conv_fwd_f64(B, T, C, W, x, w, y);
    return kdalab_check_outputs_f64("short convolution", y, n, NULL, 0, NULL, NULL);
}

TRAIN_CLONES
void kdalab__train_short_conv_bwd_f64(size_t B, size_t T, size_t C, size_t W, const double *x,
                                      const double *w, const double *dy, double *dx, double *dw)
{
    // x, dy, dx are (B, T, C); w, dw are (W, C)
    for (size_t j = 0; dw && j < W * C; j++)
        dw[j] = 0;
    for (size_t b = 0; b < B; b++) {
        const double *xb = x + b * T * C, *dyb = dy + b * T * C;
        for (size_t t = 0; t < T; t++) {
            /* x[t] reaches y[t + i] through w[i] */
            if (dx) {
                double *dxt = dx + b * T * C + t * C;
#pragma omp simd
                for (size_t c = 0; c < C; c++)
                    dxt[c] = w[c] * dyb[t * C + c];
                for (size_t i = 1; i < W && t + i < T; i++) {
                    const double *wi = w + i * C, *dys = dyb + (t + i) * C;
#pragma omp simd
                    for (size_t c = 0; c < C; c++)
                        dxt[c] += wi[c] * dys[c];
                }
            }
            /* w[i] met x[t - i] at y[t] */
            for (size_t i = 0; dw && i < W && i <= t; i++) {
                double *dwi = dw + i * C;
                const double *dyt = dyb + t * C, *xs = xb + (t - i) * C;
#pragma omp simd
                for (size_t c = 0; c < C; c++)
                    dwi[c] += dyt[c] * xs[c];
            }
        }
    }
}

kdalab_status kdalab_short_conv_bwd_f64(size_t B, size_t T, size_t C, size_t W,
                                        const double *x, const double *w, const double *dy,
                                        double *dx, double *dw)
{
    // x, dy, dx are (B, T, C); w, dw are (W, C)
    kdalab_clear_error();
    size_t n, nw;
    kdalab_status s = conv_check(B, T, C, W, x, w, &n, &nw);
    if (s == KDALAB_OK)
        s = input("dy", dy, n);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_short_conv_bwd_f64(B, T, C, W, x, w, dy, dx, dw);
    return check_grads("short convolution backward", dx, n, dw, nw);
}
