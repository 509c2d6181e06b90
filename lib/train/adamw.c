/*
 * lib/train/adamw.c — AdamW (Loshchilov & Hutter, "Decoupled Weight Decay
 * Regularization", 2019, Algorithm 2) with global gradient-norm clipping, at
 * the learning rate of lib/train/schedule.c. Lines marked f64-scalar keep
 * double in the float32 twin (scripts/make_f32.sh): the schedule's value and
 * the gradient's sum of squares.
 *
 * defines: kdalab_adamw_step_f64
 */
#include <math.h>

#include "internal.h"

kdalab_status kdalab_adamw_step_f64(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    double *theta, const double *grad, double *m, double *v,
                                    const unsigned char *decay, double *grad_norm) /* f64-scalar */
{
    // theta, grad, m, v, decay [n]
    double lr; /* f64-scalar */
    kdalab_status s = kdalab_adamw_lr(cfg, step, &lr);
    if (s != KDALAB_OK)
        return s;
    if (n && (!theta || !grad || !m || !v))
        return kdalab_fail(KDALAB_ENULL, "adamw: theta, grad, m or v is NULL");
    double ss = 0; /* f64-scalar */
    for (size_t i = 0; i < n; i++)
        ss += grad[i] * grad[i];
    const double norm = sqrt(ss); /* f64-scalar */
    if (!isfinite(norm))
        return kdalab_check_values_f64(KDALAB_RULE_FINITE, "grad", grad, n, NULL) != KDALAB_OK
                   ? KDALAB_ENONFINITE
                   : kdalab_fail(KDALAB_ENONFINITE, "adamw: the gradient norm overflows");
    const double c = cfg->clip > 0 && norm > cfg->clip ? cfg->clip / norm : 1;
    const double t = (double)step + 1;
    const double bc1 = 1 - pow(cfg->beta1, t), bc2 = 1 - pow(cfg->beta2, t);
    for (size_t i = 0; i < n; i++) {
        const double gi = c * grad[i];
        m[i] = cfg->beta1 * m[i] + (1 - cfg->beta1) * gi;
        v[i] = cfg->beta2 * v[i] + (1 - cfg->beta2) * gi * gi;
        const double wd = !decay || decay[i] ? cfg->weight_decay : 0;
        theta[i] -= lr * (m[i] / bc1 / (sqrt(v[i] / bc2) + cfg->eps) + wd * theta[i]);
    }
    if (grad_norm)
        *grad_norm = norm;
    kdalab_clear_error();
    return KDALAB_OK;
}
