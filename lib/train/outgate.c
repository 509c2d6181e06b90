/*
 * lib/train/outgate.c — the linear mixers' output gate in float64, forward and
 * backward: the act(z) of fla's gated output norm rmsnorm(o) * act(z), with
 *   z = x Wog                   full rank (fla's Gated DeltaNet layer's g_proj)
 *   z = (x Wog) Wog2 + bog      rank r (fla's KDA layer's g_proj: r = the head
 *                               dimension, a bias on the second projection)
 *   act = sigmoid (fla's KDA layer) or swish(z) = z sigmoid(z) (fla's
 *         FusedRMSNormGated default, its Gated DeltaNet layer)
 * lib/train/mixer.c calls it in training, lib/model/forward.c when a
 * trained model decodes. The sigmoid gate at full rank is the computation
 * the mixer did before the gate had options, in the same order (the same
 * bits). Checked against central differences in tests/test_train_model.c and
 * against the formulas by hand in tests/test_train_outgate.c.
 *
 * defines: kdalab__train_outgate_fwd_f64, kdalab__train_outgate_bwd_f64
 *          (lib/train/train_internal.h)
 */
#include <string.h>

#include "train_internal.h"

void kdalab__train_outgate_fwd_f64(const kdalab_mixer_config *cfg, size_t N, const double *x,
                                   const double *Wog, const double *Wog2, const double *bog,
                                   double *xr, double *z, double *s)
{
    // x [N, D]; xr [N, r]; z, s [N, D]
    const size_t D = cfg->D, r = cfg->gate_rank;
    if (r) {
        kdalab__train_mm_f64(N, D, r, x, Wog, xr, 0);
        kdalab__train_mm_f64(N, r, D, xr, Wog2, z, 0);
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++)
                z[n * D + i] += bog[i];
    } else {
        kdalab__train_mm_f64(N, D, D, x, Wog, z, 0);
    }
    if (cfg->gate == KDALAB_OUTPUT_GATE_SWISH) {
#pragma omp simd
        for (size_t i = 0; i < N * D; i++)
            s[i] = z[i] * train_sigmoid_f64(z[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < N * D; i++)
            s[i] = train_sigmoid_f64(z[i]);
    }
}

void kdalab__train_outgate_bwd_f64(const kdalab_mixer_config *cfg, size_t N, const double *x,
                                   const double *Wog, const double *Wog2, const double *xr,
                                   const double *z, const double *s, const double *ds,
                                   double *dz, double *dxr, double *dWog, double *dWog2,
                                   double *dbog, double *dx)
{
    // x [N, D]; xr, dxr [N, r]; z, s, ds, dz [N, D]
    const size_t D = cfg->D, r = cfg->gate_rank;
    if (cfg->gate == KDALAB_OUTPUT_GATE_SWISH) {
        /* d swish / dz = sigmoid(z) (1 + z (1 - sigmoid(z))) */
#pragma omp simd
        for (size_t i = 0; i < N * D; i++) {
            const double sg = train_sigmoid_f64(z[i]);
            dz[i] = ds[i] * sg * (1 + z[i] * (1 - sg));
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < N * D; i++)
            dz[i] = ds[i] * s[i] * (1 - s[i]);
    }
    if (!r) {
        kdalab__train_mm_bwd_f64(N, D, D, x, Wog, dz, dWog, dx, 1);
        return;
    }
    if (dbog) {
        memset(dbog, 0, D * sizeof *dbog);
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++)
                dbog[i] += dz[n * D + i];
    }
    kdalab__train_mm_bwd_f64(N, r, D, xr, Wog2, dz, dWog2, dxr, 0);
    kdalab__train_mm_bwd_f64(N, D, r, x, Wog, dxr, dWog, dx, 1);
}
