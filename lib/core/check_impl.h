/*
 * lib/check_impl.h — input validation, written once for float64 and float32
 * (instantiated by lib/check.c through lib/real.h). See kdalab_check_f64 in
 * lib/internal.h for the rules.
 */

/* First non-finite element of x[0..n), or n. */
static size_t FN(first_nonfinite)(const real *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!REAL_IS_FINITE(x[i]))
            return i;
    return n;
}

kdalab_status FN(kdalab_check_finite)(const char *name, const real *x, size_t n)
{
    size_t i = FN(first_nonfinite)(x, n);
    if (i < n)
        return kdalab_fail(KDALAB_ENONFINITE, "%s[%zu] is %g: inputs must be finite", name, i,
                           (double)x[i]);
    return KDALAB_OK;
}

static kdalab_status FN(check_log_decay)(const real *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] > 0)
            return kdalab_fail(KDALAB_EDOMAIN,
                               "g[%zu] = %g > 0: g is a log-decay and must be <= 0", i,
                               (double)g[i]);
    return KDALAB_OK;
}

static kdalab_status FN(check_beta)(const real *beta, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(beta[i] >= 0 && beta[i] <= 2))
            return kdalab_fail(KDALAB_EDOMAIN, "beta[%zu] = %g is outside [0, 2]", i,
                               (double)beta[i]);
    return KDALAB_OK;
}

static kdalab_status FN(check_scale)(real scale)
{
    if (!REAL_IS_FINITE(scale) || !(scale > 0))
        return kdalab_fail(KDALAB_EDOMAIN, "scale = %g; it must be finite and > 0",
                           (double)scale);
    return KDALAB_OK;
}

#define TRY(expr)                                                                        \
    do {                                                                                 \
        kdalab_status s_ = (expr);                                                       \
        if (s_ != KDALAB_OK)                                                             \
            return s_;                                                                   \
    } while (0)

kdalab_status FN(kdalab_check)(const kdalab_dims *dims, kdalab_mechanism mech, real scale,
                               const real *q, const real *k, const real *v, const real *g,
                               const real *beta, const real *h0, const real *o,
                               kdalab_counts *counts)
{
    kdalab_counts c;
    TRY(kdalab_count_dims(dims, mech, sizeof(real), &c));
    if ((unsigned)mech > (unsigned)KDALAB_KDA)
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)mech);
    TRY(FN(check_scale)(scale));
    int need_beta = kdalab_mechanism_has_beta(mech);
    if (c.qk > 0) { /* T > 0: every per-position array must be there */
        if (!q || !k || !v || !o)
            return kdalab_fail(KDALAB_ENULL, "%s is NULL",
                               !q ? "q" : !k ? "k" : !v ? "v" : "o");
        if (c.g > 0 && !g)
            return kdalab_fail(KDALAB_ENULL, "g is NULL but %s needs a log-decay",
                               kdalab_mechanism_name(mech));
        if (need_beta && !beta)
            return kdalab_fail(KDALAB_ENULL, "beta is NULL but %s needs it",
                               kdalab_mechanism_name(mech));
        TRY(FN(kdalab_check_finite)("q", q, c.qk));
        TRY(FN(kdalab_check_finite)("k", k, c.qk));
        TRY(FN(kdalab_check_finite)("v", v, c.v));
        if (c.g > 0) {
            TRY(FN(kdalab_check_finite)("g", g, c.g));
            TRY(FN(check_log_decay)(g, c.g));
        }
        if (need_beta) {
            TRY(FN(kdalab_check_finite)("beta", beta, c.bth));
            TRY(FN(check_beta)(beta, c.bth));
        }
    }
    if (h0)
        TRY(FN(kdalab_check_finite)("h0", h0, c.state));
    if (counts)
        *counts = c;
    return KDALAB_OK;
}

kdalab_status FN(kdalab_check_step_args)(kdalab_mechanism mech, size_t K, size_t V,
                                         real scale, const real *q, const real *k,
                                         const real *v, const real *g, real beta,
                                         const real *S, const real *o)
{
    kdalab_dims d = {.B = 1, .T = 1, .H = 1, .K = K, .V = V};
    kdalab_counts c;
    TRY(kdalab_count_dims(&d, mech, sizeof(real), &c));
    if ((unsigned)mech > (unsigned)KDALAB_KDA)
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)mech);
    TRY(FN(check_scale)(scale));
    if (!q || !k || !v || !S || !o)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL",
                           !q ? "q" : !k ? "k" : !v ? "v" : !S ? "S" : "o");
    if (c.g > 0 && !g)
        return kdalab_fail(KDALAB_ENULL, "g is NULL but %s needs a log-decay",
                           kdalab_mechanism_name(mech));
    TRY(FN(kdalab_check_finite)("q", q, K));
    TRY(FN(kdalab_check_finite)("k", k, K));
    TRY(FN(kdalab_check_finite)("v", v, V));
    if (c.g > 0) {
        TRY(FN(kdalab_check_finite)("g", g, c.g));
        TRY(FN(check_log_decay)(g, c.g));
    }
    if (kdalab_mechanism_has_beta(mech)) {
        TRY(FN(kdalab_check_finite)("beta", &beta, 1));
        TRY(FN(check_beta)(&beta, 1));
    }
    return KDALAB_OK;
}

kdalab_status FN(kdalab_check_step)(kdalab_mechanism mech, size_t K, size_t V, real scale,
                                    const real *q, const real *k, const real *v,
                                    const real *g, real beta, const real *S, const real *o)
{
    TRY(FN(kdalab_check_step_args)(mech, K, V, scale, q, k, v, g, beta, S, o));
    return FN(kdalab_check_finite)("S", S, K * V);
}

/* The outputs of a computation: count the non-finite elements of o[n_o] and
 * ht[n_ht] (ht may be NULL) and turn any into KDALAB_ERANGE with a message
 * naming `what`; the counts go to *bad_o, *bad_ht when not NULL. */
kdalab_status FN(kdalab_check_outputs)(const char *what, const real *o, size_t n_o,
                                       const real *ht, size_t n_ht, size_t *bad_o,
                                       size_t *bad_ht)
{
    size_t bo = 0, bh = 0;
    for (size_t i = 0; i < n_o; i++)
        bo += !REAL_IS_FINITE(o[i]);
    for (size_t i = 0; ht && i < n_ht; i++)
        bh += !REAL_IS_FINITE(ht[i]);
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

#undef TRY
