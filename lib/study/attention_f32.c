/*
 * lib/study/attention_f32.c — causal softmax attention computed entirely in
 * float32: lib/reference/attention.c's kdalab_attention_f64 with float in
 * place of double, line for line, to measure what float32 costs.
 *
 * defines: kdalab_attention_f32
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

/*
 * o = sum_{j<n} softmax_j(s q . k_j) v_j over n keys/values whose rows sit
 * stride elements apart (k_j = k + j*kstride, v_j = v + j*vstride).
 * Computed in one pass with a running maximum (the online softmax), so no
 * exp() ever sees a positive argument. n >= 1.
 */
static void attend_one(size_t K, size_t V, float scale, const float *q, const float *k,
                       size_t kstride, const float *v, size_t vstride, size_t n, float *o)
{
    float m = -INFINITY, z = 0; /* running max of the scores, running normaliser */
    for (size_t j = 0; j < V; j++)
        o[j] = 0;
    for (size_t t = 0; t < n; t++) {
        float score = 0;
        for (size_t c = 0; c < K; c++)
            score += q[c] * k[t * kstride + c];
        score *= scale;
        if (score > m) { /* a new maximum: rescale what was summed so far */
            float r = expf(m - score);
            z *= r;
            for (size_t j = 0; j < V; j++)
                o[j] *= r;
            m = score;
        }
        float p = expf(score - m);
        z += p;
        for (size_t j = 0; j < V; j++)
            o[j] += p * v[t * vstride + j];
    }
    for (size_t j = 0; j < V; j++)
        o[j] /= z;
}

kdalab_status kdalab_attention_f32(const kdalab_dims *dims, float scale, const float *q,
                                   const float *k, const float *v, float *o)
{
    /* same validation as the linear mechanisms: no beta, no g */
    kdalab_status s = kdalab_check_f32(dims, KDALAB_LINEAR_ATTENTION, scale, q, k, v, NULL,
                                       NULL, NULL, o, NULL);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < T; t++) {
                size_t first = (b * T) * H + h;   /* (b, 0, h)  */
                size_t bth = (b * T + t) * H + h; /* (b, t, h)  */
                attend_one(K, V, scale, q + bth * K, k + first * K, H * K, v + first * V, H * V,
                           t + 1, o + bth * V);
            }
    /* finite inputs can still overflow a score (q.k beyond the range) */
    size_t n_o = B * T * H * V;
    return kdalab_check_outputs_f32("softmax attention", o, n_o, NULL, 0, NULL, NULL);
}
