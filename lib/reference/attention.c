/*
 * lib/reference/attention.c — causal scaled softmax attention without
 * positional encoding (chapter 01; the full-attention layer of the hybrid) in
 * float64, and the growing KV cache a decoder keeps for it.
 *
 * defines: kdalab_attention_f64, kdalab_kv_cache_new, kdalab_kv_cache_free,
 *          kdalab_kv_cache_append, kdalab_kv_cache_attend,
 *          kdalab_kv_cache_clear, kdalab_kv_cache_tokens, kdalab_kv_cache_bytes
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * o = sum_{j<n} softmax_j(s q . k_j) v_j over n keys/values whose rows sit
 * stride elements apart (k_j = k + j*kstride, v_j = v + j*vstride).
 * Computed in one pass with a running maximum (the online softmax), so no
 * exp() ever sees a positive argument. n >= 1.
 */
static void attend_one(size_t K, size_t V, double scale, const double *q, const double *k,
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
                attend_one(K, V, scale, q + bth * K, k + first * K, H * K, v + first * V, H * V,
                           t + 1, o + bth * V);
            }
    /* finite inputs can still overflow a score (q.k beyond the range) */
    size_t n_o = B * T * H * V;
    return kdalab_check_outputs_f64("softmax attention", o, n_o, NULL, 0, NULL, NULL);
}

/* The cache: keys [tokens, H, K] and values [tokens, H, V], float64, grown by
 * doubling. */
struct kdalab_kv_cache {
    size_t H, K, V;
    size_t tokens, capacity;
    double *k, *v;
};

kdalab_kv_cache *kdalab_kv_cache_new(size_t H, size_t K, size_t V)
{
    size_t hk, hv, bytes;
    if (!H || !K || !V || !kdalab_mul_size(H, K, &hk) || !kdalab_mul_size(H, V, &hv) ||
        !kdalab_mul_size(hk + hv < hk ? SIZE_MAX : hk + hv, sizeof(double), &bytes)) {
        kdalab_fail(KDALAB_ESIZE, "KV cache: H=%zu K=%zu V=%zu must be >= 1 and not overflow",
                    H, K, V);
        return NULL;
    }
    kdalab_kv_cache *c = calloc(1, sizeof *c);
    if (!c) {
        kdalab_fail(KDALAB_ENOMEM, "KV cache: out of memory");
        return NULL;
    }
    c->H = H;
    c->K = K;
    c->V = V;
    return c;
}

void kdalab_kv_cache_free(kdalab_kv_cache *c)
{
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c);
}

static kdalab_status check_row(const char *name, const double *x, size_t n)
{
    if (!x)
        return kdalab_fail(KDALAB_ENULL, "KV cache: %s is NULL", name);
    return kdalab_check_finite_f64(name, x, n);
}

kdalab_status kdalab_kv_cache_append(kdalab_kv_cache *c, const double *k, const double *v)
{
    if (!c)
        return kdalab_fail(KDALAB_ENULL, "KV cache is NULL");
    kdalab_status s = check_row("k", k, c->H * c->K);
    if (s == KDALAB_OK)
        s = check_row("v", v, c->H * c->V);
    if (s != KDALAB_OK)
        return s;
    if (c->tokens == c->capacity) {
        size_t cap = c->capacity ? 2 * c->capacity : 16, kb, vb;
        if (cap < c->capacity || !kdalab_mul_size(cap, c->H * c->K * sizeof(double), &kb) ||
            !kdalab_mul_size(cap, c->H * c->V * sizeof(double), &vb))
            return kdalab_fail(KDALAB_EOVERFLOW, "KV cache: %zu tokens overflow", cap);
        double *nk = realloc(c->k, kb);
        if (!nk)
            return kdalab_fail(KDALAB_ENOMEM, "KV cache: no memory for %zu tokens", cap);
        c->k = nk;
        double *nv = realloc(c->v, vb);
        if (!nv)
            return kdalab_fail(KDALAB_ENOMEM, "KV cache: no memory for %zu tokens", cap);
        c->v = nv;
        c->capacity = cap;
    }
    memcpy(c->k + c->tokens * c->H * c->K, k, c->H * c->K * sizeof(double));
    memcpy(c->v + c->tokens * c->H * c->V, v, c->H * c->V * sizeof(double));
    c->tokens++;
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_kv_cache_attend(const kdalab_kv_cache *c, double scale, const double *q,
                                     double *o)
{
    if (!c || !o)
        return kdalab_fail(KDALAB_ENULL, "KV cache attend: %s is NULL", !c ? "cache" : "o");
    kdalab_status s = check_row("q", q, c->H * c->K);
    if (s != KDALAB_OK)
        return s;
    if (!isfinite(scale) || !(scale > 0))
        return kdalab_fail(KDALAB_EDOMAIN, "scale = %g; it must be finite and > 0", scale);
    if (c->tokens == 0)
        return kdalab_fail(KDALAB_ESIZE, "KV cache attend: the cache is empty");
    for (size_t h = 0; h < c->H; h++)
        attend_one(c->K, c->V, scale, q + h * c->K, c->k + h * c->K, c->H * c->K,
                   c->v + h * c->V, c->H * c->V, c->tokens, o + h * c->V);
    return kdalab_check_outputs_f64("KV cache attend", o, c->H * c->V, NULL, 0, NULL, NULL);
}

void kdalab_kv_cache_clear(kdalab_kv_cache *c)
{
    if (c)
        c->tokens = 0;
}

size_t kdalab_kv_cache_tokens(const kdalab_kv_cache *c)
{
    return c ? c->tokens : 0;
}

size_t kdalab_kv_cache_bytes(const kdalab_kv_cache *c)
{
    return c ? c->tokens * c->H * (c->K + c->V) * sizeof(double) : 0;
}
