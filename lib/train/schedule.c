/*
 * lib/train/schedule.c — the learning rate of a training step: linear
 * warm-up, then a cosine decay (kdalab_adamw_config), shared by both
 * precisions' AdamW.
 *
 * defines: kdalab_adamw_lr
 */
#include <math.h>

#include "internal.h"

kdalab_status kdalab_adamw_lr(const kdalab_adamw_config *cfg, size_t step, double *lr)
{
    kdalab_clear_error();
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
