/*
 * lib/reference/kv_cache.c — the growing KV cache a decoder keeps for causal
 * softmax attention (lib/reference/attention.c), float64: append one token's
 * keys and values, attend with one query per head.
 *
 * defines: kdalab_kv_cache_new, kdalab_kv_cache_free, kdalab_kv_cache_append,
 *          kdalab_kv_cache_attend, kdalab_kv_cache_clear, kdalab_kv_cache_tokens,
 *          kdalab_kv_cache_bytes
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "attention_steps.h"

/* The cache: keys [tokens, H, K] and values [tokens, H, V], float64, grown by
 * doubling. */
struct kdalab_kv_cache {
    size_t H, K, V;
    size_t tokens, capacity;
    double *k, *v;
};

kdalab_kv_cache *kdalab_kv_cache_new(size_t H, size_t K, size_t V)
{
    kdalab_clear_error();
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
    kdalab_clear_error();
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
    kdalab_clear_error();
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
        kdalab__attention_attend(c->K, c->V, scale, q + h * c->K, c->k + h * c->K, c->H * c->K,
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
