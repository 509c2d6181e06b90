/*
 * lib/model/dense.c — the dense row-vector arithmetic of the hybrid stack:
 * the projection y = x W, RMSNorm, the L2 norm of q and k, the sigmoid of
 * the gate and of beta. Plain loops in float64, no checks: the callers in
 * forward.c have validated the sizes and the inputs.
 *
 * defines: kdalab__hybrid_matmul, kdalab__hybrid_rms_norm, kdalab__hybrid_l2_normalise,
 *          kdalab__hybrid_sigmoid (hybrid_internal.h)
 *
 * Both norms go through root_mean_square, which scales by the largest
 * magnitude first, so neither overflows nor underflows on extreme rows.
 */
#include <math.h>

#include "hybrid_internal.h"

/* x is [T, n_in], W [n_in, n_out], out [T, n_out]. */
void kdalab__hybrid_matmul(size_t T, size_t n_in, size_t n_out, const double *x, const double *W,
                           double *out, int accumulate)
{
    for (size_t t = 0; t < T; t++) {
        double *o = out + t * n_out;
        const double *xt = x + t * n_in;
        if (!accumulate)
            for (size_t j = 0; j < n_out; j++)
                o[j] = 0.0;
        for (size_t i = 0; i < n_in; i++) {
            double xi = xt[i];
            const double *w = W + i * n_out;
            for (size_t j = 0; j < n_out; j++)
                o[j] += xi * w[j];
        }
    }
}

double kdalab__hybrid_sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* The root mean square of x, scaled by its largest magnitude first (as
 * BLAS's dnrm2 does) so that neither 1e160 nor 1e-170 over- or underflows
 * when squared.
 *   x  [n] */
static double root_mean_square(const double *x, size_t n)
{
    double mx = 0.0, ss = 0.0;
    for (size_t c = 0; c < n; c++)
        mx = fmax(mx, fabs(x[c]));
    if (mx == 0.0)
        return 0.0;
    for (size_t c = 0; c < n; c++)
        ss += (x[c] / mx) * (x[c] / mx);
    return mx * sqrt(ss / (double)n);
}

/* x is [n, m], normalised in place row by row: each row divided by its
 * largest magnitude first, then by the L2 norm of what that leaves (in
 * [1, sqrt m]), so that the norm itself never over- or underflows (a row of
 * 1.7e308 is not divided by an infinite norm). A row of zeros stays zeros. */
void kdalab__hybrid_l2_normalise(double *x, size_t n, size_t m)
{
    for (size_t r = 0; r < n; r++) {
        double *row = x + r * m, mx = 0.0, ss = 0.0;
        for (size_t c = 0; c < m; c++)
            mx = fmax(mx, fabs(row[c]));
        if (mx == 0.0)
            continue;
        for (size_t c = 0; c < m; c++)
            ss += (row[c] / mx) * (row[c] / mx);
        const double norm = sqrt(ss);
        for (size_t c = 0; c < m; c++)
            row[c] = row[c] / mx / norm;
    }
}

/* x is [T, d], w [d], u [T, d]. */
void kdalab__hybrid_rms_norm(size_t T, size_t d, const double *x, const double *w, double *u)
{
    const double eps = 1e-6;
    for (size_t t = 0; t < T; t++) {
        const double *xt = x + t * d;
        double rms = root_mean_square(xt, d);
        /* 1 / sqrt(rms^2 + eps), without squaring a huge rms */
        double inv = rms > 1.0 ? 1.0 / (rms * sqrt(1.0 + eps / (rms * rms)))
                               : 1.0 / sqrt(rms * rms + eps);
        for (size_t c = 0; c < d; c++)
            u[t * d + c] = xt[c] * inv * w[c];
    }
}
