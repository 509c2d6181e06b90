/*
 * lib/reference/gates.c — the gate functions models train with, forward and
 * backward, in float64: what turns a layer's raw gate input into the
 * log-decay g <= 0 the KDA forms take, so a fused kernel's gate can be
 * checked too.
 *
 * defines: kdalab_kda_gate_f64, kdalab_kda_gate_bwd_f64,
 *          kdalab_lower_bound_gate_f64, kdalab_lower_bound_gate_bwd_f64;
 *          kdalab__kda_gate_keep_f64, kdalab__kda_gate_bwd_kept_f64 (internal.h:
 *          the same pair keeping softplus and sigmoid for the backward)
 *
 *   fla's KDA gate       g = -exp(A_log[h]) * softplus(x + dt_bias[h][c])
 *   lower-bounded gate   g = lb * sigmoid(x),  lb <= 0  (g in (lb, 0))
 *
 * softplus(z) = log(1 + e^z) is formed as max(z, 0) + log1p(exp(-|z|)), exact
 * and finite for every finite z (fla's kernels switch to the identity above
 * z = 20, a difference below 2.1e-9). Its derivative is sigmoid(z).
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

static double softplus(double z)
{
    return (z > 0 ? z : 0) + log1p(exp(-fabs(z)));
}

static double sigmoid(double z)
{
    /* both branches exponentiate a non-positive number */
    return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
}

/* softplus(z) and sigmoid(z) from one exponential, e = exp(-|z|): the same
 * values as the two functions above (each exponentiates -|z| too). */
static void softplus_sigmoid(double z, double *sp, double *sg)
{
    double e = exp(-fabs(z));
    *sp = (z > 0 ? z : 0) + log1p(e);
    *sg = z >= 0 ? 1 / (1 + e) : e / (1 + e);
}

/* The sizes of a KDA gate call: n = BT * H * K elements, no overflow. */
static kdalab_status gate_sizes(size_t BT, size_t H, size_t K, size_t *n, size_t *hk)
{
    size_t bytes;
    if (H == 0 || K == 0)
        return kdalab_fail(KDALAB_ESIZE, "H = %zu, K = %zu: both must be >= 1", H, K);
    if (!kdalab_mul_size(H, K, hk) || !kdalab_mul_size(BT, *hk, n) ||
        !kdalab_mul_size(*n, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "BT = %zu, H = %zu, K = %zu overflow", BT, H, K);
    return KDALAB_OK;
}

static kdalab_status kda_gate_check(size_t BT, size_t H, size_t K, const double *x,
                                    const double *A_log, const double *dt_bias, size_t *n,
                                    size_t *hk)
{
    kdalab_status s = gate_sizes(BT, H, K, n, hk);
    if (s != KDALAB_OK)
        return s;
    if ((*n && !x) || !A_log)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", !A_log ? "A_log" : "x");
    s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "x", x, *n, NULL);
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "A_log", A_log, H, NULL);
    if (s == KDALAB_OK && dt_bias)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "dt_bias", dt_bias, *hk, NULL);
    return s;
}

/* The KDA gate's forward; with sp (and sg) not NULL also softplus(z) and
 * sigmoid(z) of each z = x + dt_bias, the values its backward reads. The
 * callers clear the error first. */
static kdalab_status kda_gate(size_t BT, size_t H, size_t K, const double *x,
                              const double *A_log, const double *dt_bias, double *g, double *sp,
                              double *sg)
{
    // x, g, sp, sg are (BT, H, K); A_log is (H); dt_bias is (H, K) or NULL
    size_t n, hk;
    kdalab_status s = kda_gate_check(BT, H, K, x, A_log, dt_bias, &n, &hk);
    if (s == KDALAB_OK && n && !g)
        s = kdalab_fail(KDALAB_ENULL, "g is NULL");
    if (s != KDALAB_OK)
        return s;
    for (size_t r = 0; r < BT; r++)
        for (size_t h = 0; h < H; h++) {
            const double na = -exp(A_log[h]); /* once per head and row */
            for (size_t c = 0; c < K; c++) {
                size_t hc = h * K + c, i = r * hk + hc;
                double z = x[i] + (dt_bias ? dt_bias[hc] : 0);
                if (sp) {
                    softplus_sigmoid(z, &sp[i], &sg[i]);
                    g[i] = na * sp[i];
                } else {
                    g[i] = na * softplus(z);
                }
            }
        }
    const size_t shape[3] = {BT, H, K};
    return kdalab_check_result_f64("KDA gate", "g", g, 3, shape,
                                   "-exp(A_log[h]) * softplus(x + dt_bias[h, k]) overflowed "
                                   "(A_log too large)");
}

kdalab_status kdalab_kda_gate_f64(size_t BT, size_t H, size_t K, const double *x,
                                  const double *A_log, const double *dt_bias, double *g)
{
    kdalab_clear_error();
    return kda_gate(BT, H, K, x, A_log, dt_bias, g, NULL, NULL);
}

kdalab_status kdalab__kda_gate_keep_f64(size_t BT, size_t H, size_t K, const double *x,
                                        const double *A_log, const double *dt_bias, double *g,
                                        double *sp, double *sg)
{
    kdalab_clear_error();
    return kda_gate(BT, H, K, x, A_log, dt_bias, g, sp, sg);
}

/* The KDA gate's backward; sp, sg: the forward's softplus(z) and sigmoid(z)
 * (kda_gate's), or NULL to compute them again from x. The callers clear the
 * error first. */
static kdalab_status kda_gate_bwd(size_t BT, size_t H, size_t K, const double *x,
                                  const double *A_log, const double *dt_bias, const double *sp,
                                  const double *sg, const double *dg, double *dx,
                                  double *dA_log, double *ddt_bias)
{
    // x, dg, dx are (BT, H, K); A_log, dA_log are (H); dt_bias, ddt_bias are (H, K)
    size_t n, hk;
    kdalab_status s = kda_gate_check(BT, H, K, x, A_log, dt_bias, &n, &hk);
    if (s == KDALAB_OK && n && !dg)
        s = kdalab_fail(KDALAB_ENULL, "dg is NULL");
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "dg", dg, n, NULL);
    if (s != KDALAB_OK)
        return s;
    double *dA = calloc(H, sizeof *dA), *db = calloc(hk, sizeof *db);
    if (!dA || !db) {
        free(dA);
        free(db);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for the KDA gate backward");
    }
    for (size_t r = 0; r < BT; r++)
        for (size_t h = 0; h < H; h++) {
            const double a = exp(A_log[h]); /* once per head and row */
            for (size_t c = 0; c < K; c++) {
                size_t hc = h * K + c, i = r * hk + hc;
                double spz, sgz;
                if (sp)
                    spz = sp[i], sgz = sg[i];
                else
                    softplus_sigmoid(x[i] + (dt_bias ? dt_bias[hc] : 0), &spz, &sgz);
                double dz = -a * sgz * dg[i]; /* dg/dz = -exp(A_log) sigmoid(z) */
                if (dx)
                    dx[i] = dz;
                db[hc] += dz;
                dA[h] += dg[i] * -a * spz; /* dg/dA_log = g */
            }
        }
    for (size_t h = 0; dA_log && h < H; h++)
        dA_log[h] = dA[h];
    for (size_t hc = 0; ddt_bias && hc < hk; hc++)
        ddt_bias[hc] = db[hc];
    const size_t s_x[3] = {BT, H, K}, s_b[2] = {H, K};
    const char *why = "a product with exp(A_log) or dg overflowed";
    s = kdalab_check_result_f64("KDA gate backward", "dA_log", dA, 1, &H, why);
    if (s == KDALAB_OK)
        s = kdalab_check_result_f64("KDA gate backward", "ddt_bias", db, 2, s_b, why);
    if (s == KDALAB_OK)
        s = kdalab_check_result_f64("KDA gate backward", "dx", dx, 3, s_x, why);
    free(dA);
    free(db);
    return s;
}

kdalab_status kdalab_kda_gate_bwd_f64(size_t BT, size_t H, size_t K, const double *x,
                                      const double *A_log, const double *dt_bias,
                                      const double *dg, double *dx, double *dA_log,
                                      double *ddt_bias)
{
    kdalab_clear_error();
    return kda_gate_bwd(BT, H, K, x, A_log, dt_bias, NULL, NULL, dg, dx, dA_log, ddt_bias);
}

kdalab_status kdalab__kda_gate_bwd_kept_f64(size_t BT, size_t H, size_t K, const double *x,
                                            const double *A_log, const double *dt_bias,
                                            const double *sp, const double *sg,
                                            const double *dg, double *dx, double *dA_log,
                                            double *ddt_bias)
{
    kdalab_clear_error();
    return kda_gate_bwd(BT, H, K, x, A_log, dt_bias, sp, sg, dg, dx, dA_log, ddt_bias);
}

static kdalab_status lower_bound_check(size_t n, double lb, const double *x)
{
    kdalab_status s = kdalab_check_count("lower-bounded gate", n, sizeof(double));
    if (s != KDALAB_OK)
        return s;
    if (!isfinite(lb) || lb > 0)
        return kdalab_fail(KDALAB_EDOMAIN, "lower bound %g: it must be finite and <= 0", lb);
    if (n && !x)
        return kdalab_fail(KDALAB_ENULL, "x is NULL");
    return kdalab_check_values_f64(KDALAB_RULE_FINITE, "x", x, n, NULL);
}

kdalab_status kdalab_lower_bound_gate_f64(size_t n, double lb, const double *x, double *g)
{
    // x, g are (n)
    kdalab_clear_error();
    kdalab_status s = lower_bound_check(n, lb, x);
    if (s == KDALAB_OK && n && !g)
        s = kdalab_fail(KDALAB_ENULL, "g is NULL");
    if (s != KDALAB_OK)
        return s;
    for (size_t i = 0; i < n; i++)
        g[i] = lb * sigmoid(x[i]);
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_lower_bound_gate_bwd_f64(size_t n, double lb, const double *x,
                                              const double *dg, double *dx)
{
    // x, dg, dx are (n)
    kdalab_clear_error();
    kdalab_status s = lower_bound_check(n, lb, x);
    if (s == KDALAB_OK && n && (!dg || !dx))
        s = kdalab_fail(KDALAB_ENULL, "%s is NULL", !dg ? "dg" : "dx");
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "dg", dg, n, NULL);
    if (s != KDALAB_OK)
        return s;
    for (size_t i = 0; i < n; i++) {
        double sg = sigmoid(x[i]);
        dx[i] = dg[i] * lb * sg * (1 - sg);
    }
    return kdalab_check_result_f64("lower-bounded gate backward", "dx", dx, 1, &n,
                                   "dg * lb * sigmoid'(x) overflowed");
}
