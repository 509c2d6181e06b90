/*
 * lib/core/step_rules.c — the checks of one decode step's arguments
 * (kdalab_step_f64 and kdalab_step_ab_f64, their float32 twins and the SIMD
 * step), by the rules of rules.c: the same statuses and messages as a call.
 *
 * defines: kdalab_check_step_args_f64/_f32, kdalab_check_step_f64/_f32,
 *          kdalab_check_step_ab_f64/_f32 (internal.h)
 */
#include "internal.h"

/* x[0..n) (float32 when is_f32) under rule, a message naming "name[i]". */
static kdalab_status values(kdalab_value_rule rule, const char *name, const void *x, int is_f32,
                            size_t n)
{
    const size_t shape[1] = {n};
    return kdalab_check_values_nd(rule, name, x, is_f32, 1, shape);
}

/* ---- one decode step -------------------------------------------------------- */

/* A decode step's arguments, for a row with a, b (ab: kdalab_step_ab_*) or
 * without (kdalab_step_*): each function refuses the other kind of row. */
static kdalab_status check_step_args(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                     const void *q, const void *k, const void *v, const void *g,
                                     double beta, const void *S, const void *o, int is_f32,
                                     int ab)
{
    kdalab_dims d = {.B = 1, .T = 1, .H = 1, .K = K, .V = V};
    kdalab_counts c;
    KDALAB__TRY(kdalab_count_dims(&d, mech, is_f32 ? sizeof(float) : sizeof(double), &c));
    if (!kdalab_mechanism_row(mech))
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)mech);
    if (kdalab_mechanism_has_ab(mech) != ab)
        return kdalab_fail(KDALAB_EINVAL, ab ? "%s has no a, b: its decode step is "
                                               "kdalab_step_f64 / _f32"
                                             : "%s takes a, b: its decode step is "
                                               "kdalab_step_ab_f64 / _f32",
                           kdalab_mechanism_name(mech));
    KDALAB__TRY(kdalab_check_scale(scale));
    if (!q || !k || !v || !S || !o)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL",
                           !q   ? "q"
                           : !k ? "k"
                           : !v ? "v"
                           : !S ? "S"
                                : "o");
    if (c.g > 0 && !g)
        return kdalab_fail(KDALAB_ENULL, "g is NULL but %s needs a log-decay",
                           kdalab_mechanism_name(mech));
    KDALAB__TRY(values(KDALAB_RULE_FINITE, "q", q, is_f32, K));
    KDALAB__TRY(values(KDALAB_RULE_FINITE, "k", k, is_f32, K));
    KDALAB__TRY(values(KDALAB_RULE_FINITE, "v", v, is_f32, V));
    if (c.g > 0)
        KDALAB__TRY(values(KDALAB_RULE_LOG_DECAY, "g", g, is_f32, c.g));
    if (kdalab_mechanism_has_beta(mech))
        KDALAB__TRY(values(KDALAB_RULE_BETA, "beta", &beta, 0, 1));
    return KDALAB_OK;
}

kdalab_status kdalab_check_step_args_f64(kdalab_mechanism mech, size_t K, size_t V,
                                         double scale, const double *q, const double *k,
                                         const double *v, const double *g, double beta,
                                         const double *S, const double *o)
{
    return check_step_args(mech, K, V, scale, q, k, v, g, beta, S, o, 0, 0);
}

kdalab_status kdalab_check_step_args_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                         const float *q, const float *k, const float *v,
                                         const float *g, float beta, const float *S,
                                         const float *o)
{
    return check_step_args(mech, K, V, scale, q, k, v, g, beta, S, o, 1, 0);
}

kdalab_status kdalab_check_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                    const double *q, const double *k, const double *v,
                                    const double *g, double beta, const double *S,
                                    const double *o)
{
    KDALAB__TRY(check_step_args(mech, K, V, scale, q, k, v, g, beta, S, o, 0, 0));
    const size_t shape[2] = {K, V};
    return kdalab_check_values_nd(KDALAB_RULE_FINITE, "S", S, 0, 2, shape);
}

kdalab_status kdalab_check_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                    const float *q, const float *k, const float *v,
                                    const float *g, float beta, const float *S, const float *o)
{
    KDALAB__TRY(check_step_args(mech, K, V, scale, q, k, v, g, beta, S, o, 1, 0));
    const size_t shape[2] = {K, V};
    return kdalab_check_values_nd(KDALAB_RULE_FINITE, "S", S, 1, 2, shape);
}

/* A DPLR row's decode step: the arguments above, then a, b [K] and S. */
static kdalab_status check_step_ab(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                   const void *q, const void *k, const void *v, const void *g,
                                   const void *a, const void *b, const void *S, const void *o,
                                   int is_f32)
{
    KDALAB__TRY(check_step_args(mech, K, V, scale, q, k, v, g, 0, S, o, is_f32, 1));
    if (!a || !b)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL but %s needs the low-rank term b a^T",
                           !a ? "a" : "b", kdalab_mechanism_name(mech));
    KDALAB__TRY(values(KDALAB_RULE_FINITE, "a", a, is_f32, K));
    KDALAB__TRY(values(KDALAB_RULE_FINITE, "b", b, is_f32, K));
    const size_t shape[2] = {K, V};
    return kdalab_check_values_nd(KDALAB_RULE_FINITE, "S", S, is_f32, 2, shape);
}

kdalab_status kdalab_check_step_ab_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                       const double *q, const double *k, const double *v,
                                       const double *g, const double *a, const double *b,
                                       const double *S, const double *o)
{
    return check_step_ab(mech, K, V, scale, q, k, v, g, a, b, S, o, 0);
}

kdalab_status kdalab_check_step_ab_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                       const float *q, const float *k, const float *v,
                                       const float *g, const float *a, const float *b,
                                       const float *S, const float *o)
{
    return check_step_ab(mech, K, V, scale, q, k, v, g, a, b, S, o, 1);
}

