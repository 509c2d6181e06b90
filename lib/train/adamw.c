/*
 * lib/train/adamw.c — AdamW (Loshchilov & Hutter, "Decoupled Weight Decay
 * Regularization", 2019, Algorithm 2) with global gradient-norm clipping and
 * a linear warm-up followed by a cosine decay of the learning rate.
 *
 * defines: kdalab_adamw_lr, kdalab_adamw_step_f64
 */
#include <math.h>

#include "internal.h"

kdalab_status kdalab_adamw_lr(const kdalab_adamw_config *cfg, size_t step, double *lr)
{
    if (!cfg || !lr)
        return kdalab_fail(KDALAB_ENULL, "adamw: %s is NULL", cfg ? "lr" : "config");
    if (!(cfg->lr > 0 && isfinite(cfg->lr)) || !(cfg->min_lr >= 0 && cfg->min_lr <= cfg->lr) ||
        !(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1) ||
        !(cfg->eps > 0 && isfinite(cfg->eps)) ||
        !(cfg->weight_decay >= 0 && isfinite(cfg->weight_decay)) ||
        !(cfg->clip >= 0 && isfinite(cfg->clip)) || cfg->steps == 0)
        return kdalab_fail(KDALAB_EDOMAIN, "adamw: lr = %g, min_lr = %g, betas = (%g, %g), "
                           "eps = %g, weight_decay = %g, clip = %g, steps = %zu: out of range "
                           "(kdalab_train.h)", cfg->lr, cfg->min_lr, cfg->beta1, cfg->beta2,
                           cfg->eps, cfg->weight_decay, cfg->clip, cfg->steps);
    if (step < cfg->warmup) {
        *lr = cfg->lr * (double)(step + 1) / (double)cfg->warmup;
    } else {
        const size_t span = cfg->steps > cfg->warmup + 1 ? cfg->steps - cfg->warmup : 1;
        double p = (double)(step - cfg->warmup) / (double)span;
        p = p < 1 ? p : 1;
        *lr = cfg->min_lr + (cfg->lr - cfg->min_lr) * 0.5 * (1 + cos(3.14159265358979323846 * p));
    }
    return KDALAB_OK;
}

kdalab_status kdalab_adamw_step_f64(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    double *theta, const double *grad, double *m, double *v,
                                    const unsigned char *decay, double *grad_norm)
{
    // theta, grad, m, v, decay [n]
    double lr;
    kdalab_status s = kdalab_adamw_lr(cfg, step, &lr);
    if (s != KDALAB_OK)
        return s;
    if (n && (!theta || !grad || !m || !v))
        return kdalab_fail(KDALAB_ENULL, "adamw: theta, grad, m or v is NULL");
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += grad[i] * grad[i];
    const double norm = sqrt(ss);
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
