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
#include <stdio.h>

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
    s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "grad", grad, n, NULL);
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, n, NULL);
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "m", m, n, NULL);
    for (size_t i = 0; s == KDALAB_OK && i < n; i++)
        if (!(v[i] >= 0 && isfinite(v[i])))
            s = kdalab_fail(isfinite(v[i]) ? KDALAB_EDOMAIN : KDALAB_ENONFINITE,
                            "adamw: v[%zu] = %g: a second moment is finite and >= 0", i,
                            (double)v[i]);
    if (s != KDALAB_OK)
        return s;
    // |grad|, scaled by its largest element so no finite gradient overflows the sum
    double amax = 0, ss = 0; /* f64-scalar */
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs((double)grad[i])); /* f64-scalar */
    for (size_t i = 0; amax > 0 && i < n; i++)
        ss += ((double)grad[i] / amax) * ((double)grad[i] / amax); /* f64-scalar */
    const double norm = amax * sqrt(ss); /* f64-scalar */
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
    s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, n, NULL);
    if (s != KDALAB_OK) { /* finite inputs, a non-finite step: the learning rate diverged */
        char why[256]; /* kdalab_fail formats into the buffer kdalab_last_error reads */
        snprintf(why, sizeof why, "%s", kdalab_last_error());
        return kdalab_fail(KDALAB_ERANGE, "adamw: the update overflowed theta (written): %s",
                           why);
    }
    kdalab_clear_error();
    return KDALAB_OK;
}
