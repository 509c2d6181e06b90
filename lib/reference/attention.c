/*
 * lib/reference/attention.c — causal scaled softmax attention without
 * positional encoding (chapter 01; the full-attention layer of the hybrid) in
 * float64. The KV cache a decoder keeps for it is lib/reference/kv_cache.c.
 *
 * defines: kdalab_attention_f64; kdalab__attention_attend (internal, attention_steps.h)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "attention_steps.h"

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
