/*
 * lib/reference/recurrent.c — the recurrent form and the decode step of
 * linear attention, DeltaNet, Gated DeltaNet and KDA in float64: the oracle
 * every other form is checked against. It reads like the update table of
 * REFERENCE.md (chapters 02, 03, 05, 06) and like fla's
 * fla/ops/<mechanism>/naive.py recurrences.
 *
 * defines: kdalab_step_f64, kdalab_recurrent_f64
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * One token, one head: S_{t-1} -> S_t in place, o = s * S_t^T q.
 *   S [K,V]; q, k [K]; v, o [V]; g: [1] (GDN), [K] (KDA), unused otherwise.
 * Inputs are assumed valid (the public functions check them first).
 */
static void step_head(kdalab_mechanism mech, size_t K, size_t V, double scale, const double *q,
                      const double *k, const double *v, const double *g, double beta, double *S,
                      double *o)
{
    /* 1. decay: S' = alpha S (Gated DeltaNet) or Diag(a) S (KDA), a = exp(g) */
    if (mech == KDALAB_GATED_DELTANET) {
        double alpha = exp(g[0]);
        for (size_t c = 0; c < K; c++)
            for (size_t j = 0; j < V; j++)
                S[c * V + j] *= alpha;
    } else if (mech == KDALAB_KDA) {
        for (size_t c = 0; c < K; c++) {
            double a = exp(g[c]); /* row c = everything written through key channel c */
            for (size_t j = 0; j < V; j++)
                S[c * V + j] *= a;
        }
    }

    /* 2. write, one value column j at a time:
     *      linear attention  S[:,j] += k v_j
     *      delta rule        S[:,j] += beta k (v_j - S'[:,j] . k)   (uses the decayed S')
     * 3. read the same column of the new state: o_j = s S_t[:,j] . q */
    for (size_t j = 0; j < V; j++) {
        double write = v[j];
        if (mech != KDALAB_LINEAR_ATTENTION) {
            double predicted = 0; /* S'^T k: what the state already returns for key k */
            for (size_t c = 0; c < K; c++)
                predicted += S[c * V + j] * k[c];
            write = beta * (v[j] - predicted);
        }
        double read = 0;
        for (size_t c = 0; c < K; c++) {
            S[c * V + j] += k[c] * write;
            read += S[c * V + j] * q[c];
        }
        o[j] = scale * read;
    }
}

kdalab_status kdalab_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                              const double *q, const double *k, const double *v,
                              const double *g, double beta, double *S, double *o)
{
    kdalab_status s = kdalab_check_step_f64(mech, K, V, scale, q, k, v, g, beta, S, o);
    if (s != KDALAB_OK)
        return s;
    step_head(mech, K, V, scale, q, k, v, g, beta, S, o);
    return kdalab_check_outputs_f64("decode step", o, V, S, K * V, NULL, NULL);
}

kdalab_status kdalab_recurrent_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, const double *beta, const double *h0,
                                   double *o, double *ht)
{
    kdalab_counts n;
    kdalab_status s = kdalab_check_f64(dims, mech, scale, q, k, v, g, beta, h0, o, &n);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t gw = kdalab_mechanism_g_width(mech, K); /* g values per (b,t,h) */

    double *S = malloc(K * V * sizeof *S); /* one head's state [K,V] */
    if (!S)
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a %zu x %zu state", K, V);

    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            if (h0)
                memcpy(S, h0 + bh * K * V, K * V * sizeof *S);
            else
                memset(S, 0, K * V * sizeof *S); /* no h0: a zero state */
            for (size_t t = 0; t < T; t++) {
                size_t bth = (b * T + t) * H + h; /* index of (b,t,h) */
                step_head(mech, K, V, scale, q + bth * K, k + bth * K, v + bth * V,
                          gw ? g + bth * gw : NULL, beta ? beta[bth] : 1, S, o + bth * V);
            }
            if (ht)
                memcpy(ht + bh * K * V, S, K * V * sizeof *S);
        }
    free(S);
    return kdalab_check_outputs_f64("recurrent form", o, n.v, ht, n.state, NULL, NULL);
}
