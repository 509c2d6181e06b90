/*
 * lib/core/rules.c — the domain rules of kdalab's inputs, each stated once,
 * and the one validation every form (reference, SIMD, hybrid, command
 * line) calls, so that all of them reject the same inputs with the same
 * status and message. A decode step's checks are step_rules.c, on these.
 *
 * defines: kdalab_check_values_f64, kdalab_check_values_f32, kdalab_check_scale
 *          (public); kdalab_count_dims, kdalab_check_finite_f64/_f32,
 *          kdalab_check_f64/_f32, kdalab_check_outputs_f64/_f32,
 *          kdalab_check_bwd_f64/_f32, kdalab_check_grads_f64/_f32,
 *          kdalab_check_chunk_opts, kdalab_check_bwd_chunk_opts,
 *          kdalab_check_values_nd, kdalab__check_call_arrays (the arrays of
 *          a call: lib/call/call.c's one check, and attention's),
 *          kdalab_check_result_f64/_f32 (internal.h)
 *
 * The float64 and float32 entry points share one body: each array is read
 * through `elem` (an element of a double or float array, as double, which is
 * exact), so a rule exists once whatever the precision of the caller.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "internal.h"

/* ---- the rules ------------------------------------------------------------ */

/* Is x legal under rule? The whole of kdalab's domain knowledge is here. */
static int rule_holds(kdalab_value_rule rule, double x)
{
    switch (rule) {
    case KDALAB_RULE_LOG_DECAY: /* g = log of a decay factor in (0, 1] */
        return isfinite(x) && x <= 0;
    case KDALAB_RULE_BETA: /* write strength; 2 reflects, beyond it diverges */
        return isfinite(x) && x >= 0 && x <= 2;
    case KDALAB_RULE_FINITE:
    default:
        return isfinite(x);
    }
}

/* Element i of x, a double array (is_f32 == 0) or a float array, as double. */
static double elem(const void *x, int is_f32, size_t i)
{
    return is_f32 ? (double)((const float *)x)[i] : ((const double *)x)[i];
}

/* Are all of x[0..n) finite? One pass without an early exit or a per-element
 * call (omp simd: GCC 12 vectorises the float loop): the common case of
 * every check, and 8 % of a training step when it went element by element. */
static int all_finite(const void *x, int is_f32, size_t n)
{
    int bad = 0;
    if (is_f32) {
        const float *f = x;
#pragma omp simd reduction(| : bad)
        for (size_t i = 0; i < n; i++)
            bad |= !isfinite(f[i]);
    } else {
        const double *d = x;
#pragma omp simd reduction(| : bad)
        for (size_t i = 0; i < n; i++)
            bad |= !isfinite(d[i]);
    }
    return !bad;
}

/* "name[i0, i1, ...]": flat index i of an array of shape[ndim] (row-major)
 * in the caller's shape; "name[i]" when shape is NULL. */
static void index_text(char *buf, size_t len, const char *name, size_t i, int ndim,
                       const size_t *shape)
{
    size_t idx[KDALAB_NPY_MAX_DIMS] = {0};
    if (!shape || ndim < 1 || ndim > KDALAB_NPY_MAX_DIMS) {
        snprintf(buf, len, "%s[%zu]", name, i);
        return;
    }
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
    int n = snprintf(buf, len, "%s[", name);
    for (int d = 0; d < ndim && n > 0 && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, d ? ", %zu" : "%zu", idx[d]);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "]");
}

/* The first element of x[0..n) that breaks rule, worded as an error naming
 * it by its index in shape[ndim] (flat when shape is NULL). */
static kdalab_status check_values_nd(kdalab_value_rule rule, const char *name, const void *x,
                                     int is_f32, size_t n, int ndim, const size_t *shape,
                                     size_t *first_bad)
{
    if (rule == KDALAB_RULE_FINITE && all_finite(x, is_f32, n))
        return KDALAB_OK;
    for (size_t i = 0; i < n; i++) {
        double xi = elem(x, is_f32, i);
        if (rule_holds(rule, xi))
            continue;
        if (first_bad)
            *first_bad = i;
        char at[160];
        index_text(at, sizeof at, name, i, ndim, shape);
        if (!isfinite(xi))
            return kdalab_fail(KDALAB_ENONFINITE, "%s is %g: inputs must be finite", at, xi);
        if (rule == KDALAB_RULE_LOG_DECAY)
            return kdalab_fail(KDALAB_EDOMAIN,
                               "%s = %.17g > 0: g is a log-decay and must be <= 0", at, xi);
        /* all 17 digits: 2.0000000001 must not print as "2" */
        return kdalab_fail(KDALAB_EDOMAIN, "%s = %.17g is outside [0, 2]", at, xi);
    }
    return KDALAB_OK;
}

static kdalab_status check_values(kdalab_value_rule rule, const char *name, const void *x,
                                  int is_f32, size_t n, size_t *first_bad)
{
    return check_values_nd(rule, name, x, is_f32, n, 0, NULL, first_bad);
}

kdalab_status kdalab_check_values_nd(kdalab_value_rule rule, const char *name, const void *x,
                                     int is_f32, int ndim, const size_t *shape)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (!kdalab_mul_size(n, shape[d], &n))
            return kdalab_fail(KDALAB_EOVERFLOW, "%s: its shape overflows", name);
    if (n && !x)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", name);
    return check_values_nd(rule, name, x, is_f32, n, ndim, shape, NULL);
}

kdalab_status kdalab_check_values_f64(kdalab_value_rule rule, const char *name, const double *x,
                                      size_t n, size_t *first_bad)
{
    kdalab_clear_error();
    if (!name || (!x && n))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", name ? name : "name");
    kdalab_status s = kdalab_check_count(name, n, sizeof *x);
    return s != KDALAB_OK ? s : check_values(rule, name, x, 0, n, first_bad);
}

kdalab_status kdalab_check_values_f32(kdalab_value_rule rule, const char *name, const float *x,
                                      size_t n, size_t *first_bad)
{
    kdalab_clear_error();
    if (!name || (!x && n))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", name ? name : "name");
    kdalab_status s = kdalab_check_count(name, n, sizeof *x);
    return s != KDALAB_OK ? s : check_values(rule, name, x, 1, n, first_bad);
}

kdalab_status kdalab_check_scale(double scale)
{
    kdalab_clear_error();
    if (!isfinite(scale) || !(scale > 0))
        return kdalab_fail(KDALAB_EDOMAIN, "scale = %g; it must be finite and > 0", scale);
    return KDALAB_OK;
}

kdalab_status kdalab_check_finite_f64(const char *name, const double *x, size_t n)
{
    return check_values(KDALAB_RULE_FINITE, name, x, 0, n, NULL);
}

kdalab_status kdalab_check_finite_f32(const char *name, const float *x, size_t n)
{
    return check_values(KDALAB_RULE_FINITE, name, x, 1, n, NULL);
}

/* ---- sizes ---------------------------------------------------------------- */

/* Element counts of a problem; errors for zero sizes and for overflow of the
 * element count or of the byte count (elem_bytes each). */
kdalab_status kdalab_count_dims(const kdalab_dims *d, kdalab_mechanism mech, size_t elem_bytes,
                                kdalab_counts *out)
{
    if (!d)
        return kdalab_fail(KDALAB_ENULL, "dims is NULL");
    if (d->B == 0 || d->H == 0 || d->K == 0 || d->V == 0)
        return kdalab_fail(KDALAB_ESIZE, "B=%zu H=%zu K=%zu V=%zu: B, H, K and V must be >= 1",
                           d->B, d->H, d->K, d->V);
    size_t bth, qk, v, bh, state, bytes;
    if (!kdalab_mul_size(d->B, d->T, &bth) || !kdalab_mul_size(bth, d->H, &bth) ||
        !kdalab_mul_size(bth, d->K, &qk) || !kdalab_mul_size(bth, d->V, &v) ||
        !kdalab_mul_size(d->B, d->H, &bh) || !kdalab_mul_size(bh, d->K, &state) ||
        !kdalab_mul_size(state, d->V, &state) ||
        !kdalab_mul_size(qk > v ? qk : v, elem_bytes, &bytes) ||
        !kdalab_mul_size(state, elem_bytes, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "B=%zu T=%zu H=%zu K=%zu V=%zu: the array sizes overflow", d->B,
                           d->T, d->H, d->K, d->V);
    out->qk = qk;
    out->v = v;
    out->bth = bth;
    out->state = state;
    kdalab_g_shape gs = kdalab_mechanism_g_shape(mech);
    out->g = gs == KDALAB_G_PER_KEY ? qk : gs == KDALAB_G_PER_HEAD ? bth : 0;
    return KDALAB_OK;
}

/* ---- one call of a form ----------------------------------------------------- */


/* The arrays of one call against the rules, each named by its index in its
 * own shape (kdalab__check_call_arrays, internal.h): the one check of every
 * linear-mechanism call (lib/call/call.c) and of attention's. */
kdalab_status kdalab__check_call_arrays(const kdalab__call *c, const kdalab__arrays *a,
                                        int is_f32, int bwd)
{
    const size_t rows = c->B * c->T;
    if (bwd && rows && !a->d_o)
        return kdalab_fail(KDALAB_ENULL, "d_o is NULL");
    if (rows) { /* T > 0: every per-position array must be there */
        if (!a->q || !a->k || !a->v || (!bwd && !a->o))
            return kdalab_fail(KDALAB_ENULL, "%s is NULL",
                               !a->q   ? "q"
                               : !a->k ? "k"
                               : !a->v ? "v"
                                       : "o");
        if (c->gw && !a->g)
            return kdalab_fail(KDALAB_ENULL, "g is NULL but %s needs a log-decay",
                               kdalab_mechanism_name(c->mech));
        if (c->delta && !a->beta)
            return kdalab_fail(KDALAB_ENULL, "beta is NULL but %s needs it",
                               kdalab_mechanism_name(c->mech));
        if (c->ab && (!a->a || !a->b))
            return kdalab_fail(KDALAB_ENULL, "%s is NULL but %s needs the low-rank term b a^T",
                               !a->a ? "a" : "b", kdalab_mechanism_name(c->mech));
    }
    /* each array with its shape, so that a message names the caller's index
     * (g[0, 17, 2, 5]; the row's shape, also where K = 1); ndim 0: not in
     * this call */
    const int per_key = kdalab_mechanism_g_shape(c->mech) == KDALAB_G_PER_KEY;
    const struct {
        const char *name;
        const void *x;
        int ndim;
        size_t shape[4];
        kdalab_value_rule rule;
    } arr[] = {{"q", a->q, rows ? 4 : 0, {c->B, c->T, c->H, c->K}, KDALAB_RULE_FINITE},
               {"k", a->k, rows ? 4 : 0, {c->B, c->T, c->H, c->K}, KDALAB_RULE_FINITE},
               {"v", a->v, rows ? 4 : 0, {c->B, c->T, c->HV, c->V}, KDALAB_RULE_FINITE},
               {"g", a->g, !rows || !c->gw ? 0 : per_key ? 4 : 3, {c->B, c->T, c->HV, c->gw},
                KDALAB_RULE_LOG_DECAY},
               {"beta", a->beta, rows && c->delta ? 3 : 0, {c->B, c->T, c->HV},
                KDALAB_RULE_BETA},
               {"a", a->a, rows && c->ab ? 4 : 0, {c->B, c->T, c->HV, c->K}, KDALAB_RULE_FINITE},
               {"b", a->b, rows && c->ab ? 4 : 0, {c->B, c->T, c->HV, c->K}, KDALAB_RULE_FINITE},
               {"h0", a->h0, a->h0 ? 4 : 0, {c->N, c->HV, c->K, c->V}, KDALAB_RULE_FINITE},
               {"d_o", a->d_o, bwd && rows ? 4 : 0, {c->B, c->T, c->HV, c->V},
                KDALAB_RULE_FINITE},
               {"dht", a->dht, bwd && a->dht ? 4 : 0, {c->N, c->HV, c->K, c->V},
                KDALAB_RULE_FINITE}};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) {
        if (!arr[i].ndim)
            continue;
        size_t n = 1;
        for (int d = 0; d < arr[i].ndim; d++)
            n *= arr[i].shape[d]; /* fits: check_layout counted the widest */
        if (kdalab__simd_screen(arr[i].x, n, arr[i].rule, is_f32))
            continue;
        kdalab_status s = check_values_nd(arr[i].rule, arr[i].name, arr[i].x, is_f32, n,
                                          arr[i].ndim, arr[i].shape, NULL);
        if (s != KDALAB_OK)
            return s;
    }
    return KDALAB_OK;
}

/* kdalab_check_f64 / _f32 (internal.h), for arrays of either precision: a
 * plain batch (HV = H, N = B) through the call's array check. */
static kdalab_status check_call(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                                const void *q, const void *k, const void *v, const void *g,
                                const void *beta, const void *h0, const void *o, int is_f32,
                                kdalab_counts *counts)
{
    kdalab_counts c;
    KDALAB__TRY(kdalab_count_dims(dims, mech, is_f32 ? sizeof(float) : sizeof(double), &c));
    if (!kdalab_mechanism_row(mech))
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)mech);
    KDALAB__TRY(kdalab_check_scale(scale));
    const kdalab__call pc = {.mech = mech, .B = dims->B, .T = dims->T, .H = dims->H,
                             .K = dims->K, .V = dims->V, .HV = dims->H, .G = 1, .N = dims->B,
                             .gw = kdalab_mechanism_g_width(mech, dims->K),
                             .delta = kdalab_mechanism_has_delta(mech)};
    const kdalab__arrays a = {q, k, v, g, beta, h0, NULL, NULL, o, NULL, NULL};
    KDALAB__TRY(kdalab__check_call_arrays(&pc, &a, is_f32, 0));
    if (counts)
        *counts = c;
    return KDALAB_OK;
}

kdalab_status kdalab_check_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v,
                               const double *g, const double *beta, const double *h0,
                               const double *o, kdalab_counts *counts)
{
    return check_call(dims, mech, scale, q, k, v, g, beta, h0, o, 0, counts);
}

kdalab_status kdalab_check_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const float *q, const float *k, const float *v, const float *g,
                               const float *beta, const float *h0, const float *o,
                               kdalab_counts *counts)
{
    return check_call(dims, mech, scale, q, k, v, g, beta, h0, o, 1, counts);
}

/* ---- one call of a backward ---------------------------------------------------- */

/* kdalab_check_bwd_f64 / _f32 (internal.h): the forward's checks, then the
 * upstream gradients d_o (like o) and dht (like ht, optional). */
static kdalab_status check_bwd_call(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const void *q, const void *k, const void *v,
                                    const void *g, const void *beta, const void *h0,
                                    const void *d_o, const void *dht, int is_f32,
                                    kdalab_counts *counts)
{
    kdalab_counts c;
    KDALAB__TRY(kdalab_count_dims(dims, mech, is_f32 ? sizeof(float) : sizeof(double), &c));
    if (!kdalab_mechanism_row(mech))
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)mech);
    KDALAB__TRY(kdalab_check_scale(scale));
    const kdalab__call pc = {.mech = mech, .B = dims->B, .T = dims->T, .H = dims->H,
                             .K = dims->K, .V = dims->V, .HV = dims->H, .G = 1, .N = dims->B,
                             .gw = kdalab_mechanism_g_width(mech, dims->K),
                             .delta = kdalab_mechanism_has_delta(mech)};
    const kdalab__arrays a = {q, k, v, g, beta, h0, d_o, dht, NULL, NULL, NULL};
    KDALAB__TRY(kdalab__check_call_arrays(&pc, &a, is_f32, 1));
    if (counts)
        *counts = c;
    return KDALAB_OK;
}

kdalab_status kdalab_check_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const double *q, const double *k,
                                   const double *v, const double *g, const double *beta,
                                   const double *h0, const double *d_o, const double *dht,
                                   kdalab_counts *counts)
{
    return check_bwd_call(dims, mech, scale, q, k, v, g, beta, h0, d_o, dht, 0, counts);
}

kdalab_status kdalab_check_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, const float *beta, const float *h0,
                                   const float *d_o, const float *dht, kdalab_counts *counts)
{
    return check_bwd_call(dims, mech, scale, q, k, v, g, beta, h0, d_o, dht, 1, counts);
}

/* ---- outputs ------------------------------------------------------------------ */

/* The outputs of a computation: count the non-finite elements of o[n_o] and
 * ht[n_ht] (ht may be NULL) and turn any into KDALAB_ERANGE with a message
 * naming `what`; the counts go to *bad_o, *bad_ht when not NULL. */
static kdalab_status check_outputs(const char *what, const void *o, size_t n_o, const void *ht,
                                   size_t n_ht, int is_f32, size_t *bad_o, size_t *bad_ht)
{
    size_t bo = 0, bh = 0;
    if (!all_finite(o, is_f32, n_o)) /* the common case is one branch-free pass */
        for (size_t i = 0; i < n_o; i++)
            bo += !isfinite(elem(o, is_f32, i));
    if (ht && !all_finite(ht, is_f32, n_ht))
        for (size_t i = 0; i < n_ht; i++)
            bh += !isfinite(elem(ht, is_f32, i));
    if (bad_o)
        *bad_o = bo;
    if (bad_ht)
        *bad_ht = bh;
    if (bo || bh)
        return kdalab_fail(KDALAB_ERANGE,
                           "%s: %zu non-finite values in the output and %zu in the state, "
                           "from finite inputs (an intermediate overflowed)",
                           what, bo, bh);
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_check_outputs_f64(const char *what, const double *o, size_t n_o,
                                       const double *ht, size_t n_ht, size_t *bad_o,
                                       size_t *bad_ht)
{
    return check_outputs(what, o, n_o, ht, n_ht, 0, bad_o, bad_ht);
}

kdalab_status kdalab_check_outputs_f32(const char *what, const float *o, size_t n_o,
                                       const float *ht, size_t n_ht, size_t *bad_o,
                                       size_t *bad_ht)
{
    return check_outputs(what, o, n_o, ht, n_ht, 1, bad_o, bad_ht);
}

/* The gradients a backward wrote (each NULL when not requested): any
 * non-finite value is KDALAB_ERANGE naming `what` and the gradient. */
static kdalab_status check_grads(const char *what, const kdalab_dims *d, kdalab_mechanism mech,
                                 const void *dq, const void *dk, const void *dv, const void *dg,
                                 const void *dbeta, const void *da, const void *db,
                                 const void *dh0, int is_f32)
{
    kdalab_counts c;
    KDALAB__TRY(kdalab_count_dims(d, mech, is_f32 ? sizeof(float) : sizeof(double), &c));
    const struct {
        const char *name;
        const void *x;
        size_t n;
    } grads[] = {{"dq", dq, c.qk},
                 {"dk", dk, c.qk},
                 {"dv", dv, c.v},
                 {"dg", dg, c.g},
                 {"dbeta", dbeta, kdalab_mechanism_has_beta(mech) ? c.bth : 0},
                 {"da", da, kdalab_mechanism_has_ab(mech) ? c.qk : 0},
                 {"db", db, kdalab_mechanism_has_ab(mech) ? c.qk : 0},
                 {"dh0", dh0, c.state}};
    for (size_t a = 0; a < sizeof grads / sizeof grads[0]; a++) {
        size_t bad = 0;
        for (size_t i = 0; grads[a].x && i < grads[a].n; i++)
            bad += !isfinite(elem(grads[a].x, is_f32, i));
        if (bad)
            return kdalab_fail(KDALAB_ERANGE,
                               "%s: %zu non-finite values in %s from finite inputs (an "
                               "intermediate overflowed)",
                               what, bad, grads[a].name);
    }
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_check_grads_f64(const char *what, const kdalab_dims *dims,
                                     kdalab_mechanism mech, const double *dq, const double *dk,
                                     const double *dv, const double *dg, const double *dbeta,
                                     const double *da, const double *db, const double *dh0)
{
    return check_grads(what, dims, mech, dq, dk, dv, dg, dbeta, da, db, dh0, 0);
}

kdalab_status kdalab_check_grads_f32(const char *what, const kdalab_dims *dims,
                                     kdalab_mechanism mech, const float *dq, const float *dk,
                                     const float *dv, const float *dg, const float *dbeta,
                                     const float *da, const float *db, const float *dh0)
{
    return check_grads(what, dims, mech, dq, dk, dv, dg, dbeta, da, db, dh0, 1);
}

/* ---- chunk options ------------------------------------------------------------ */

kdalab_status kdalab_check_chunk_opts(const kdalab_chunk_opts *opts, int want_fp32,
                                      kdalab_chunk_opts *out)
{
    *out = opts ? *opts : kdalab_chunk_opts_default();
    if (out->chunk < 1)
        return kdalab_fail(KDALAB_EINVAL, "chunk size C = %zu; it must be >= 1", out->chunk);
    if (out->subchunk < 1)
        return kdalab_fail(KDALAB_EINVAL, "sub-chunk size c = %zu; it must be >= 1",
                           out->subchunk);
    if ((unsigned)out->decay > (unsigned)KDALAB_DECAY_ANCHORED)
        return kdalab_fail(KDALAB_EINVAL, "unknown decay mode %d", (int)out->decay);
    if ((unsigned)out->precision > (unsigned)KDALAB_FP16)
        return kdalab_fail(KDALAB_EINVAL, "unknown precision %d", (int)out->precision);
    if (want_fp32 && out->precision != KDALAB_FP32)
        return kdalab_fail(KDALAB_EINVAL,
                           "precision %s needs kdalab_chunk_f32; the float64 form is exact",
                           kdalab_precision_name(out->precision));
    if (out->h_chunk % out->chunk != 0)
        return kdalab_fail(KDALAB_EINVAL,
                           "h_chunk = %zu (the span of h's states) is not a multiple of the "
                           "chunk size C = %zu",
                           out->h_chunk, out->chunk);
    if (!out->h_chunk)
        out->h_chunk = out->chunk;
    return KDALAB_OK;
}

kdalab_status kdalab_check_bwd_chunk_opts(const kdalab_chunk_opts *opts,
                                          kdalab_chunk_opts *out)
{
    if (opts && opts->precision != KDALAB_FP32 && (unsigned)opts->precision <= (unsigned)KDALAB_FP16)
        return kdalab_fail(KDALAB_EINVAL, "the chunkwise backward has no emulated storage "
                                          "(precision %s asked): it runs in plain float32 or "
                                          "float64",
                           kdalab_precision_name(opts->precision));
    kdalab_status s = kdalab_check_chunk_opts(opts, 1, out);
    if (s == KDALAB_OK && out->decay != KDALAB_DECAY_SAFE)
        s = kdalab_fail(KDALAB_EINVAL, "the chunkwise backward runs the safe decay mode only "
                                       "(decay mode '%s' asked)",
                        kdalab_decay_name(out->decay));
    return s;
}

/* ---- one named result ----------------------------------------------------------- */

static kdalab_status check_result(const char *what, const char *name, const void *x, int is_f32,
                                  int ndim, const size_t *shape, const char *cause)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d]; /* the shape of an array the caller checked */
    if (!x || all_finite(x, is_f32, n)) {
        kdalab_clear_error(); /* as kdalab_check_outputs_*: a finite result is a success */
        return KDALAB_OK;
    }
    size_t i = 0;
    while (isfinite(elem(x, is_f32, i)))
        i++;
    char at[160];
    index_text(at, sizeof at, name, i, ndim, shape);
    return kdalab_fail(KDALAB_ERANGE, "%s: %s is %g from finite inputs: %s", what, at,
                       elem(x, is_f32, i), cause);
}

kdalab_status kdalab_check_result_f64(const char *what, const char *name, const double *x,
                                      int ndim, const size_t *shape, const char *cause)
{
    return check_result(what, name, x, 0, ndim, shape, cause);
}

kdalab_status kdalab_check_result_f32(const char *what, const char *name, const float *x,
                                      int ndim, const size_t *shape, const char *cause)
{
    return check_result(what, name, x, 1, ndim, shape, cause);
}
