/*
 * kdalab_adamw.h — AdamW with warm-up and cosine decay (lib/train/adamw.c,
 * schedule.c), in float64 and float32.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_ADAMW_H
#define KDALAB_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/* AdamW (Loshchilov & Hutter 2019) with linear warm-up and cosine decay. */
typedef struct {
    double lr;           /* peak learning rate, > 0                              */
    double min_lr;       /* the cosine ends here, 0 <= min_lr <= lr              */
    double beta1, beta2; /* in [0, 1)                                            */
    double eps;          /* > 0                                                  */
    double weight_decay; /* >= 0, decoupled: theta -= lr * wd * theta            */
    double clip;         /* the global gradient norm is clipped to this; 0: off  */
    size_t warmup;       /* steps of linear warm-up                              */
    size_t steps;        /* total steps (the cosine's length), >= 1              */
} kdalab_adamw_config;

/*
 * kdalab_adamw_lr — the learning rate of step (0-based):
 *   step < warmup:  lr (step + 1) / warmup
 *   after:          min_lr + (lr - min_lr) (1 + cos(pi p)) / 2,
 *                   p = (step - warmup) / max(1, steps - warmup), capped at 1
 * Errors: KDALAB_ENULL, KDALAB_EDOMAIN (a field outside its range above).
 */
kdalab_status kdalab_adamw_lr(const kdalab_adamw_config *cfg, size_t step, double *lr);

/*
 * kdalab_adamw_step_f64 — one AdamW update of n parameters at step (0-based):
 *   c  = min(1, clip / |grad|)        (1 when clip is 0 or |grad| is 0)
 *   m  = beta1 m + (1 - beta1) c grad;   v = beta2 v + (1 - beta2) (c grad)^2
 *   theta -= lr_t (m / (1 - beta1^(step+1)) / (sqrt(v / (1 - beta2^(step+1))) + eps)
 *                  + wd theta)        wd = weight_decay where decay[i], else 0
 *   theta, m, v [n] updated in place (m, v start at 0); grad [n];
 *   decay [n] or NULL (decay everything)
 * *grad_norm (may be NULL) gets |grad| before clipping (computed scaled, so
 * every finite gradient has a finite norm). Errors, with nothing updated:
 * those of kdalab_adamw_lr, KDALAB_EOVERFLOW (n values overflow), KDALAB_ENULL,
 * KDALAB_ENONFINITE (grad, theta or m), KDALAB_EDOMAIN (v < 0); KDALAB_ERANGE when finite
 * inputs gave a non-finite theta or v (written: the step diverged, or |grad|^2 overflowed).
 */
kdalab_status kdalab_adamw_step_f64(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    double *theta, const double *grad, double *m, double *v,
                                    const unsigned char *decay, double *grad_norm);

/* float32 (lib/train/adamw_f32.c, generated): float32 parameters and
 * moments, the schedule and the norm in double. */
kdalab_status kdalab_adamw_step_f32(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    float *theta, const float *grad, float *m, float *v,
                                    const unsigned char *decay, double *grad_norm);

KDALAB_END_DECLS

#endif /* KDALAB_ADAMW_H */
