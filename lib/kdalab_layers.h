/*
 * kdalab_layers.h — the model's pieces other than the mixers (lib/train/layers.c):
 * RMSNorm with a gain, SiLU, the SwiGLU gate and the causal depthwise short
 * convolution, forward and backward, in float64 and float32 (each float32
 * declaration after the float64 one it twins).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_LAYERS_H
#define KDALAB_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/*
 * kdalab_rmsnorm_fwd_f64 — RMSNorm with a gain, over the last axis of N rows:
 *   y[n][d] = x[n][d] / sqrt(mean_d' x[n][d']^2 + eps) * w[d]
 *   x, y [N, D]; w [D]
 * eps > 0 and finite keeps an all-zero row finite (fla's RMSNorm default is
 * 1e-5; fla's model configurations use 1e-6). Backward, with
 * r = 1 / sqrt(mean x^2 + eps):
 *   dx[n][d] = r w[d] dy[n][d] - r^3 x[n][d] / D * sum_d' dy[n][d'] w[d'] x[n][d']
 *   dw[d]    = sum_n dy[n][d] x[n][d] r_n
 * Errors: KDALAB_ESIZE (D = 0), KDALAB_EOVERFLOW, KDALAB_EDOMAIN (eps),
 * KDALAB_ENULL, KDALAB_ENONFINITE (an input), KDALAB_ERANGE.
 */
kdalab_status kdalab_rmsnorm_fwd_f64(size_t N, size_t D, double eps, const double *x,
                                     const double *w, double *y);
kdalab_status kdalab_rmsnorm_bwd_f64(size_t N, size_t D, double eps, const double *x,
                                     const double *w, const double *dy, double *dx,
                                     double *dw);

/*
 * kdalab_silu_fwd_f64 — SiLU elementwise over n values: y = x sigmoid(x).
 * Backward: dx = dy sigmoid(x) (1 + x (1 - sigmoid(x))).
 *   x, y, dy, dx [n]
 * Errors: KDALAB_EOVERFLOW (n values overflow), KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_ERANGE.
 */
kdalab_status kdalab_silu_fwd_f64(size_t n, const double *x, double *y);
kdalab_status kdalab_silu_bwd_f64(size_t n, const double *x, const double *dy, double *dx);

/*
 * kdalab_swiglu_fwd_f64 — the SwiGLU gate, elementwise over n values:
 *   h = silu(a) * b
 * (an MLP's two input projections give a and b; its matmuls are not here).
 * Backward: da = dh b silu'(a), db = dh silu(a).
 *   a, b, h, dh, da, db [n]
 * Errors: KDALAB_EOVERFLOW (n values overflow), KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_ERANGE.
 */
kdalab_status kdalab_swiglu_fwd_f64(size_t n, const double *a, const double *b, double *h);
kdalab_status kdalab_swiglu_bwd_f64(size_t n, const double *a, const double *b,
                                    const double *dh, double *da, double *db);

/*
 * kdalab_short_conv_fwd_f64 — the causal depthwise short convolution of width
 * W that fla's layers put on q, k and v (fla/modules/convolution.py,
 * ShortConvolution without its bias and activation):
 *   y[b][t][c] = sum_{i < W} w[i][c] x[b][t - i][c]     (x = 0 before t = 0)
 *   x, y [B, T, C]; w [W, C]   (w[0] multiplies the current token)
 * fla's weight is PyTorch's conv1d weight [C, 1, W], in the other order:
 * w[i][c] = weight[c][0][W - 1 - i]. Backward:
 *   dx[b][t][c] = sum_{i < W, t + i < T} w[i][c] dy[b][t + i][c]
 *   dw[i][c]    = sum_{b, t >= i} dy[b][t][c] x[b][t - i][c]
 * Errors: KDALAB_ESIZE (C or W zero), KDALAB_EOVERFLOW, KDALAB_ENULL,
 * KDALAB_ENONFINITE, KDALAB_ERANGE.
 */
kdalab_status kdalab_short_conv_fwd_f64(size_t B, size_t T, size_t C, size_t W,
                                        const double *x, const double *w, double *y);
kdalab_status kdalab_short_conv_bwd_f64(size_t B, size_t T, size_t C, size_t W,
                                        const double *x, const double *w, const double *dy,
                                        double *dx, double *dw);

/* The float32 twins (lib/train/NAME_f32.c, generated from the float64 files by
 * scripts/make_f32.sh): the same algorithms, shapes, errors and promises
 * with float for double, for training faster; the float64 functions are
 * what they are checked against. */
kdalab_status kdalab_rmsnorm_fwd_f32(size_t N, size_t D, float eps, const float *x,
                                     const float *w, float *y);
kdalab_status kdalab_rmsnorm_bwd_f32(size_t N, size_t D, float eps, const float *x,
                                     const float *w, const float *dy, float *dx, float *dw);
kdalab_status kdalab_silu_fwd_f32(size_t n, const float *x, float *y);
kdalab_status kdalab_silu_bwd_f32(size_t n, const float *x, const float *dy, float *dx);
kdalab_status kdalab_swiglu_fwd_f32(size_t n, const float *a, const float *b, float *h);
kdalab_status kdalab_swiglu_bwd_f32(size_t n, const float *a, const float *b, const float *dh,
                                    float *da, float *db);
kdalab_status kdalab_short_conv_fwd_f32(size_t B, size_t T, size_t C, size_t W, const float *x,
                                        const float *w, float *y);
kdalab_status kdalab_short_conv_bwd_f32(size_t B, size_t T, size_t C, size_t W, const float *x,
                                        const float *w, const float *dy, float *dx, float *dw);

KDALAB_END_DECLS

#endif /* KDALAB_LAYERS_H */
