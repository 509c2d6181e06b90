/*
 * lib/train/adamw.c — AdamW (Loshchilov & Hutter, "Decoupled Weight Decay
 * Regularization", 2019, Algorithm 2) with global gradient-norm clipping, at
 * the learning rate of lib/train/schedule.c. Lines marked f64-scalar keep
 * double in the float32 twin (scripts/make_f32.sh): the schedule's value and
 * the gradient's sum of squares.
 *
 * defines: kdalab_adamw_step_f64
 */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "internal.h"

/* One element's step; k = {gradient scale, beta1, beta2, 1 - beta1, 1 - beta2,
 * lr / bc1, 1 / sqrt(bc2)}, lwd = lr * weight decay (0 for an element not
 * decayed). sqrt(v) / sqrt(bc2), not sqrt(v / bc2): v / bc2 overflows for a
 * finite v in the first steps (float32: |grad| from 1.8e19), which made the
 * step 0 and froze the parameter. */
static inline void adamw_element(const double *k, double eps, double g, double lwd, double *m,
                                 double *v, double *theta)
{
    const double gi = k[0] * g;
    const double mi = k[1] * *m + k[3] * gi;
    const double vi = k[2] * *v + k[4] * gi * gi;
    *m = mi;
    *v = vi;
    *theta -= k[5] * mi / (sqrt(vi) * k[6] + eps) + lwd * *theta;
}

kdalab_status kdalab_adamw_step_f64(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    double *theta, const double *grad, double *m, double *v,
                                    const unsigned char *decay, double *grad_norm) /* f64-scalar */
{
    // theta, grad, m, v, decay [n]
    kdalab_clear_error();
    double lr; /* f64-scalar */
    kdalab_status s = kdalab_adamw_lr(cfg, step, &lr);
    if (s != KDALAB_OK)
        return s;
    s = kdalab_check_count("adamw", n, sizeof(double));
    if (s != KDALAB_OK)
        return s;
    if (n && (!theta || !grad || !m || !v))
        return kdalab_fail(KDALAB_ENULL, "adamw: theta, grad, m or v is NULL");
    s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "grad", grad, n, NULL);
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, n, NULL);
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "m", m, n, NULL);
    int bad_v = 0; /* one vectorised pass; the slow one only to name the element */
#pragma omp simd reduction(| : bad_v)
    for (size_t i = 0; i < n; i++)
        bad_v |= !(v[i] >= 0 && v[i] < HUGE_VAL); /* NaN compares false too */
    for (size_t i = 0; bad_v && s == KDALAB_OK && i < n; i++)
        if (!(v[i] >= 0 && isfinite(v[i])))
            s = kdalab_fail(isfinite(v[i]) ? KDALAB_EDOMAIN : KDALAB_ENONFINITE,
                            "adamw: v[%zu] = %g: a second moment is finite and >= 0", i,
                            (double)v[i]);
    if (s != KDALAB_OK)
        return s;
    // |grad|, scaled by its largest element so no finite gradient overflows the sum;
    // the squares summed in four interleaved partial sums (element i into sum i % 4,
    // then added in order), a fixed order the compiler can vectorise
    double amax = 0, ss[4] = {0, 0, 0, 0}; /* f64-scalar */
#pragma omp simd reduction(max : amax)
    for (size_t i = 0; i < n; i++) {
        const double a = fabs((double)grad[i]); /* f64-scalar */
        amax = a > amax ? a : amax;             /* f64-scalar */
    }
    for (size_t i = 0; amax > 0 && i < n; i += 4) /* (not * 1 / amax: inf for a subnormal amax) */
        for (size_t j = 0; j < 4 && i + j < n; j++) {
            const double x = (double)grad[i + j] / amax; /* f64-scalar */
            ss[j] += x * x;                              /* f64-scalar */
        }
    const double norm = amax * sqrt((ss[0] + ss[1]) + (ss[2] + ss[3])); /* f64-scalar */
    const double c = cfg->clip > 0 && norm > cfg->clip ? cfg->clip / norm : 1; /* f64-scalar */
    const double t = (double)step + 1; /* f64-scalar */
    const double bc1 = 1 - pow(cfg->beta1, t), bc2 = 1 - pow(cfg->beta2, t); /* f64-scalar */
    // the step's constants, once, in the element type:
    //   theta -= lr (m / bc1 / ((v / bc2)^(1/2) + eps) + wd theta)
    // 1 - beta is formed before rounding (beta = 0.9999999 keeps its 1e-7), and
    // eps no smaller than the type's least normal number (it must not become 0)
    const double gc = c, b1 = cfg->beta1, b2 = cfg->beta2;
    const double ob1 = 1 - cfg->beta1, ob2 = 1 - cfg->beta2;
    const double eps = cfg->eps > DBL_MIN ? cfg->eps : DBL_MIN;
    const double lr_bc1 = lr / bc1, inv_sqrt_bc2 = 1 / sqrt(bc2);
    const double lr_wd = lr * cfg->weight_decay;
    const double k[7] = {gc, b1, b2, ob1, ob2, lr_bc1, inv_sqrt_bc2};
    if (decay) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            adamw_element(k, eps, grad[i], decay[i] ? lr_wd : 0, &m[i], &v[i], &theta[i]);
    } else { /* every element decays */
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            adamw_element(k, eps, grad[i], lr_wd, &m[i], &v[i], &theta[i]);
    }
    if (grad_norm)
        *grad_norm = norm;
    /* finite inputs, a non-finite step: the learning rate diverged; or an
     * unclipped |grad| overflowed v = ... + (1 - beta2) grad^2 (float32: from
     * |grad| ~ 5.8e20 at beta2 = 0.999), which would freeze that parameter */
    s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, n, NULL);
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "v", v, n, NULL);
    if (s != KDALAB_OK) {
        char why[256]; /* kdalab_fail formats into the buffer kdalab_last_error reads */
        snprintf(why, sizeof why, "%s", kdalab_last_error());
        return kdalab_fail(KDALAB_ERANGE, "adamw: the update overflowed (written): %s", why);
    }
    kdalab_clear_error();
    return KDALAB_OK;
}
