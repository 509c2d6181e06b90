/*
 * experiments/cache_model.h — the decode-time cache of a KDA + attention
 * stack, counted from documented layer sizes (arithmetic; nothing is run).
 *
 * A stack with n_kda KDA layers and n_attn attention layers holds, at a
 * context of c tokens,
 *   n_kda  * state          the KDA states: heads * d_k * d_v numbers per layer,
 *                           plus the short-convolution cache on q, k, v
 *                           ((kernel - 1) * 3 * heads * d_k numbers; 0 without)
 *   n_attn * c * per_token  the attention caches
 * and the attention-only stack of the same depth (n_kda + n_attn) * c *
 * per_token. The fraction of the two is n_attn / L + (n_kda / L) * state /
 * (c * per_token): it tends to the share of attention layers only as c grows
 * past state / per_token, the context at which one KDA state weighs as much
 * as one attention layer's cache. Every number is counted at the same width
 * (both caches in bf16, say); a KDA state kept in fp32 beside a bf16 cache
 * doubles its share.
 *
 * 05_hybrid_cache calls cache_model_report() for the models of
 * cache_model.c (Kimi Linear's documented sizes and this lab's stack).
 */
#ifndef KDALAB_EXPERIMENTS_CACHE_MODEL_H
#define KDALAB_EXPERIMENTS_CACHE_MODEL_H

#include <stddef.h>

#include "common.h"

typedef struct {
    const char *name;     /* the TSV's model column                              */
    const char *about;    /* one line: where the sizes come from                 */
    size_t n_kda, n_attn; /* layers of each kind (a ratio N:M, or a whole stack) */
    size_t heads, dk, dv; /* KDA: heads and head dimensions                      */
    size_t conv_kernel;   /* KDA's short convolution on q, k, v (0: none)        */
    size_t per_token;     /* numbers cached per token per attention layer        */
} cache_model;

/* Numbers one KDA layer holds: heads*dk*dv + (kernel-1)*3*heads*dk. */
double cache_model_state(const cache_model *m);

/* The stack's cache over the attention-only stack's of the same depth, at c tokens. */
double cache_model_fraction(const cache_model *m, double c);

/* The smallest whole context c at which the fall 1 - fraction reaches `fall`
 * (0 < fall < 1); INFINITY when the share of attention layers forbids it. */
double cache_model_context_for_fall(const cache_model *m, double fall);

/* The models of cache_model.c and the lab's own 3:1 stack of 05_hybrid_cache
 * (H heads of d_head, no convolution, K and V cached: 2 H d_head per token),
 * whose fraction at `context` tokens was measured as `measured` (the two are
 * compared in the summary). Writes
 *   DIR/05_hybrid_cache_kimi.tsv       the fraction of every model at contexts
 *                                      1K ... 1M tokens (8 per octave)
 *   DIR/05_hybrid_cache_kimi_fall.tsv  one line per model: its sizes, the
 *                                      smallest context where the fall reaches
 *                                      70 % and 74 %, the fraction at 4K, 32K,
 *                                      128K and 1M
 * and prints the summary. */
void cache_model_report(const lab_ctx *x, size_t H, size_t d_head, size_t context, double measured);

#endif
