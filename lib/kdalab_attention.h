/*
 * kdalab_attention.h — causal softmax attention and its KV cache (lib/reference/attention.c,
 * lib/reference/attention_f32.c).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_ATTENTION_H
#define KDALAB_ATTENTION_H

#include "kdalab_forms.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Softmax attention (chapter 01) and its KV cache                           */
/* ------------------------------------------------------------------------- */

/*
 * kdalab_attention_f64 — causal scaled softmax attention without positional
 * encoding (NoPE), the hybrid's full-attention layer:
 *   o_t = sum_{j<=t} softmax_j(s q_t . k_j) v_j       per (b, h)
 * computed with a running max, so exp() never overflows for finite scores.
 *
 *   q, k [B,T,H,K]; v, o [B,T,H,V]; scale finite and > 0.
 * Errors: KDALAB_ENULL, KDALAB_ESIZE, KDALAB_EOVERFLOW, KDALAB_EDOMAIN (scale),
 * KDALAB_ENONFINITE, KDALAB_ENOMEM, KDALAB_ERANGE (a score s q.k overflowed
 * for finite q, k; o is written). Cost O(T^2 K) per head.
 */
kdalab_status kdalab_attention_f64(const kdalab_dims *dims, double scale, const double *q,
                                   const double *k, const double *v, double *o);
kdalab_status kdalab_attention_f32(const kdalab_dims *dims, float scale, const float *q,
                                   const float *k, const float *v, float *o);

/* A growing KV cache for H heads: what decode-time attention keeps per layer. */
typedef struct kdalab_kv_cache kdalab_kv_cache;

/* A new, empty cache for H heads of key dim K and value dim V (float64).
 * Returns NULL when H, K or V is 0, their product overflows, or memory runs out. */
kdalab_kv_cache *kdalab_kv_cache_new(size_t H, size_t K, size_t V);
/* Free a cache and everything it holds. NULL is allowed. */
void kdalab_kv_cache_free(kdalab_kv_cache *cache);

/* Append one token: k [H,K], v [H,V]. Errors: ENULL, ENONFINITE, ENOMEM (cache unchanged). */
kdalab_status kdalab_kv_cache_append(kdalab_kv_cache *cache, const double *k, const double *v);

/* Attend with one query per head, q [H,K], over every cached token; o [H,V].
 * Errors: ENULL, ENONFINITE, EDOMAIN (scale), ESIZE (the cache is empty),
 * ERANGE (a score overflowed; o is written). */
kdalab_status kdalab_kv_cache_attend(const kdalab_kv_cache *cache, double scale,
                                     const double *q, double *o);

/* Empty the cache (0 tokens), keeping its memory for reuse: cannot fail.
 * NULL is allowed. */
void kdalab_kv_cache_clear(kdalab_kv_cache *cache);

/* Tokens held, and bytes the cached keys and values occupy: tokens*H*(K+V)*8. */
size_t kdalab_kv_cache_tokens(const kdalab_kv_cache *cache);
size_t kdalab_kv_cache_bytes(const kdalab_kv_cache *cache);

KDALAB_END_DECLS

#endif /* KDALAB_ATTENTION_H */
