/*
 * lib/reference/attention.c — causal scaled softmax attention without
 * positional encoding (chapter 01; the full-attention layer of the hybrid)
 * and its backward, in float64, query by query, with an online softmax.
 * The KV cache a decoder keeps is lib/reference/kv_cache.c.
 *
 * defines: kdalab_attention_f64 (forward), kdalab_attention_bwd_f64 (backward);
 *          kdalab__attention_attend (internal, attention_steps.h)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "attention_steps.h"

/* ---- the forward --------------------------------------------------------- */

/*
 * o = sum_{j<n} softmax_j(s q . k_j) v_j over n keys/values whose rows sit
 * stride elements apart (k_j = k + j*kstride, v_j = v + j*vstride).
 * Computed in one pass with a running maximum (the online softmax), so no
 * exp() ever sees a positive argument. n >= 1.
 */
void kdalab__attention_attend(size_t K, size_t V, double scale, const double *q, const double *k,
                              size_t kstride, const double *v, size_t vstride, size_t n, double *o)
{
    double m = -INFINITY, z = 0; /* running max of the scores, running normaliser */
    for (size_t j = 0; j < V; j++)
        o[j] = 0;
    for (size_t t = 0; t < n; t++) {
        double score = 0;
        for (size_t c = 0; c < K; c++)
            score += q[c] * k[t * kstride + c];
        score *= scale;
        if (score > m) { /* a new maximum: rescale what was summed so far */
            double r = exp(m - score);
            z *= r;
            for (size_t j = 0; j < V; j++)
                o[j] *= r;
            m = score;
        }
        double p = exp(score - m);
        z += p;
        for (size_t j = 0; j < V; j++)
            o[j] += p * v[t * vstride + j];
    }
    for (size_t j = 0; j < V; j++)
        o[j] /= z;
}

kdalab_status kdalab_attention_f64(const kdalab_dims *dims, double scale, const double *q,
                                   const double *k, const double *v, double *o)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V)
    /* same validation as the linear mechanisms: no beta, no g */
    kdalab_status s = kdalab_check_f64(dims, KDALAB_LINEAR_ATTENTION, scale, q, k, v, NULL,
                                       NULL, NULL, o, NULL);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < T; t++) {
                size_t first = (b * T) * H + h;   /* (b, 0, h)  */
                size_t bth = (b * T + t) * H + h; /* (b, t, h)  */
                kdalab__attention_attend(K, V, scale, q + bth * K, k + first * K, H * K,
                                         v + first * V, H * V, t + 1, o + bth * V);
            }
    /* finite inputs can still overflow a score (q.k beyond the range) */
    size_t n_o = B * T * H * V;
    return kdalab_check_outputs_f64("softmax attention", o, n_o, NULL, 0, NULL, NULL);
}

/* ---- the backward -------------------------------------------------------- */

/*
 * Forward, per head and query t:  s_j = scale q_t . k_j (j <= t),
 * p = softmax(s), o_t = sum_j p_j v_j. Backward, with d_o_t the gradient of o_t:
 *   dv_j  += p_j d_o_t
 *   ds_j   = p_j (d_o_t . v_j - d_o_t . o_t)       (the softmax Jacobian)
 *   dq_t   = scale sum_j ds_j k_j
 *   dk_j  += scale ds_j q_t
 * The probabilities are recomputed from the scores with their running
 * maximum subtracted, as in the forward, so no exp() sees a positive argument.
 */

kdalab_status kdalab_attention_bwd_f64(const kdalab_dims *dims, double scale, const double *q,
                                       const double *k, const double *v, const double *d_o,
                                       double *dq, double *dk, double *dv)
{
    // q, k, dq, dk are (B, T, H, K); v, d_o, dv are (B, T, H, V)
    kdalab_counts n;
    kdalab_status s = kdalab_check_bwd_f64(dims, KDALAB_LINEAR_ATTENTION, scale, q, k, v, NULL,
                                           NULL, NULL, d_o, NULL, &n);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    double *p = malloc((T ? T : 1) * sizeof *p);           // (T) probabilities of one query
    double *o = malloc(V * sizeof *o);                      // (V) that query's output
    double *gk = calloc((T ? T : 1) * K, sizeof *gk);       // (T, K) one head's dk
    double *gv = calloc((T ? T : 1) * V, sizeof *gv);       // (T, V) one head's dv
    if (!p || !o || !gk || !gv) {
        free(p); free(o); free(gk); free(gv);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for the attention backward, T = %zu", T);
    }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            memset(gk, 0, T * K * sizeof *gk);
            memset(gv, 0, T * V * sizeof *gv);
            for (size_t t = 0; t < T; t++) {
                const size_t bt = (b * T + t) * H + h; /* (b, t, h) */
                const double *qt = q + bt * K, *dot_ = d_o + bt * V;
                /* probabilities and the output of query t */
                double m = -INFINITY, z = 0;
                for (size_t j = 0; j <= t; j++) {
                    const double *kj = k + ((b * T + j) * H + h) * K;
                    double sc = 0;
                    for (size_t c = 0; c < K; c++)
                        sc += qt[c] * kj[c];
                    p[j] = scale * sc;
                    m = p[j] > m ? p[j] : m;
                }
                for (size_t j = 0; j <= t; j++) {
                    p[j] = exp(p[j] - m);
                    z += p[j];
                }
                memset(o, 0, V * sizeof *o);
                for (size_t j = 0; j <= t; j++) {
                    p[j] /= z;
                    const double *vj = v + ((b * T + j) * H + h) * V;
                    for (size_t x = 0; x < V; x++)
                        o[x] += p[j] * vj[x];
                }
                double do_o = 0; /* d_o_t . o_t */
                for (size_t x = 0; x < V; x++)
                    do_o += dot_[x] * o[x];
                /* backward */
                if (dq)
                    memset(dq + bt * K, 0, K * sizeof *dq);
                for (size_t j = 0; j <= t; j++) {
                    const size_t bj = (b * T + j) * H + h;
                    const double *kj = k + bj * K, *vj = v + bj * V;
                    double dp = 0;
                    for (size_t x = 0; x < V; x++) {
                        dp += dot_[x] * vj[x];
                        gv[j * V + x] += p[j] * dot_[x];
                    }
                    double ds = p[j] * (dp - do_o);
                    for (size_t c = 0; c < K; c++) {
                        if (dq)
                            dq[bt * K + c] += scale * ds * kj[c];
                        gk[j * K + c] += scale * ds * qt[c];
                    }
                }
            }
            for (size_t t = 0; t < T; t++) {
                const size_t bt = (b * T + t) * H + h;
                if (dk)
                    memcpy(dk + bt * K, gk + t * K, K * sizeof *dk);
                if (dv)
                    memcpy(dv + bt * V, gv + t * V, V * sizeof *dv);
            }
        }
    free(p); free(o); free(gk); free(gv);
    return kdalab_check_grads_f64("attention backward", dims, KDALAB_LINEAR_ATTENTION, dq, dk,
                                  dv, NULL, NULL, NULL);
}
