/*
 * kdalab_hybrid.h — the KDA + attention hybrid stack (lib/model/): the
 * chapter's stack of mixing layers, and a trained model of lib/train loaded
 * from its checkpoint, each run by prefill and token-by-token decode.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_HYBRID_H
#define KDALAB_HYBRID_H

#include <stdint.h>

#include "kdalab_forms.h"
#include "kdalab_attention.h"
#include "kdalab_model.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Hybrid stack (lib/model/)                                                 */
/* ------------------------------------------------------------------------- */
/*
 * The book chapter's last step ("Do not choose. Interleave."): a stack of L
 * mixing layers over a residual stream of width d_model, each layer either
 * KDA (a fixed-size K x V state per head) or causal softmax attention without
 * positional encoding (NoPE; a KV cache that grows by one row per token).
 *
 * Sizes: H heads, d_head = d_model / H, and K = V = d_head for both kinds.
 * Row-vector convention: a projection of x [d_model] is x W with W
 * [d_in, d_out] row-major (PyTorch's nn.Linear stores the transpose).
 *
 * Layer l maps its residual input x [T, d_model] to x + o W_o, where
 *   u = RMSNorm(x) = x / sqrt(mean_c x[c]^2 + 1e-6) * w_norm   per row (pre-norm,
 *       as Kimi Linear and every pre-norm transformer; u = x when rms_norm == 0)
 *   q = u W_q, k = u W_k, v = u W_v          each [T, H, d_head] (= [T, d_model])
 *   KDA layers only:
 *     q, k  L2-normalised per (t, head)       (as fla's use_qk_l2norm_in_kernel)
 *     g     = lower_bound * sigmoid(u W_g + b_g)   [T, H, K]  per-channel log-decay
 *     beta  = sigmoid(u W_beta)                    [T, H]
 *     o     = the KDA recurrence (REFERENCE.md, chapter 06) from the layer's state
 *   attention layers:
 *     q, k  used as projected (no L2 norm: unit q, k would cap every logit at
 *           +-scale and make long-context softmax nearly uniform)
 *     o_t   = sum_{j<=t} softmax_j(scale q_t . k_j) v_j  over every token seen
 *   both: scale = config scale (0 selects d_head^-1/2); no FFN (this is the
 *   sequence-mixing half of the block only). The pre-norm keeps every
 *   layer's input at one scale whatever the depth; rms_norm = 0 drops it.
 *
 * Which layers are attention: with the ratio N:M (ratio_kda : ratio_attention),
 * layers come in periods of N+M; in each period the first N are KDA and the
 * last M are attention, i.e. layer l (0-based) is attention iff
 * l mod (N+M) >= N. 3:1 gives KDA KDA KDA ATTN KDA KDA KDA ATTN ... (every
 * fourth layer is attention, as in Kimi Linear); 1:0 is pure KDA, 0:1 pure
 * attention. An explicit per-layer list overrides the ratio.
 */

/* The kind of one mixing layer. */
typedef enum {
    KDALAB_HYBRID_KDA = 0,      /* Kimi Delta Attention: state [H, K, V], constant size */
    KDALAB_HYBRID_ATTENTION     /* causal softmax attention, NoPE: KV cache, grows      */
} kdalab_hybrid_kind;

/* "kda", "attention" ("unknown" otherwise). */
const char *kdalab_hybrid_kind_name(kdalab_hybrid_kind kind);

/* The shape of a stack. Start from kdalab_hybrid_config_default(). */
typedef struct {
    size_t n_layers;          /* L >= 1                                              */
    size_t d_model;           /* residual width >= 1                                 */
    size_t n_heads;           /* H >= 1, must divide d_model                         */
    size_t ratio_kda;         /* N of N:M; N + M >= 1 (ignored when kinds != NULL)   */
    size_t ratio_attention;   /* M of N:M                                            */
    const kdalab_hybrid_kind *kinds; /* NULL, or [n_layers] explicit kinds; copied  */
                              /* by kdalab_hybrid_new_*, so it may be freed after     */
    double gate_lower_bound;  /* KDA gate g = lower_bound * sigmoid(.); finite, <= 0 */
    double scale;             /* query scale, finite >= 0; 0 selects d_head^-1/2     */
    int rms_norm;             /* 1: RMSNorm before each mixer (default); 0: none      */
} kdalab_hybrid_config;

/* L = 4, d_model = 64, H = 2, ratio 3:1, kinds NULL, lower_bound -5, scale 0,
 * rms_norm 1. */
kdalab_hybrid_config kdalab_hybrid_config_default(void);

/*
 * kdalab_hybrid_config_check — validate a configuration. Errors: KDALAB_ENULL
 * (cfg NULL), KDALAB_ESIZE (L, d_model or H zero; H does not divide d_model;
 * ratio 0:0 with kinds == NULL), KDALAB_EINVAL (a kinds entry that is not a
 * kdalab_hybrid_kind; rms_norm not 0 or 1), KDALAB_EDOMAIN (lower_bound not
 * finite or > 0; scale not finite or < 0), KDALAB_EOVERFLOW (a weight count
 * overflows).
 */
kdalab_status kdalab_hybrid_config_check(const kdalab_hybrid_config *cfg);

/* The kind of layer `layer` (0-based) under cfg (see the ratio rule above).
 * Errors: those of kdalab_hybrid_config_check, KDALAB_EINVAL (layer >= L). */
kdalab_status kdalab_hybrid_layer_kind(const kdalab_hybrid_config *cfg, size_t layer,
                                       kdalab_hybrid_kind *out);

/* A stack: its weights, and per layer the KDA state or the KV cache. Either
 * the chapter's stack (kdalab_hybrid_new_random: the functions from here to
 * kdalab_hybrid_decode) or a trained model's (kdalab_hybrid_new_model,
 * kdalab_hybrid_load: the section "A trained model as a stack" below);
 * free, position, reset, cache bytes and the state and cache accessors
 * serve both. */
typedef struct kdalab_hybrid kdalab_hybrid;

/*
 * kdalab_hybrid_new_random — a stack with weights from a seeded GSL
 * Mersenne Twister (gsl_rng_mt19937, seed as given):
 *   W_q, W_k, W_v, W_o, W_g, W_beta   i.i.d. N(0, 1/d_model);  w_norm = 1
 *   b_g[c]  = logit(u_c / |lower_bound|) with u_c log-uniform in [1e-4, 1]
 *             (capped below |lower_bound|), so at x = 0 the per-step decay
 *             -g spans 1e-4 .. 1: half-lives from under a token to ~7000
 *             tokens, the multi-timescale spread the chapter describes.
 *             (lower_bound == 0: b_g = 0, g == 0.)
 * The caches are empty (position 0). Errors: those of
 * kdalab_hybrid_config_check, KDALAB_ENULL (out), KDALAB_ENOMEM.
 */
kdalab_status kdalab_hybrid_new_random(const kdalab_hybrid_config *cfg, unsigned long seed,
                                       kdalab_hybrid **out);

/* Free a stack (its weights, states and caches). NULL is allowed. */
void kdalab_hybrid_free(kdalab_hybrid *stack);

/* The configuration the stack was built with (kinds points at the stack's own
 * [L] copy, valid until kdalab_hybrid_free). NULL when stack is NULL or a
 * trained model's (kdalab_hybrid_model has its configuration). */
const kdalab_hybrid_config *kdalab_hybrid_config_of(const kdalab_hybrid *stack);

/* Tokens consumed since creation or the last reset (prefill + decode). 0 for NULL. */
size_t kdalab_hybrid_position(const kdalab_hybrid *stack);

/* Empty every KV cache and zero every KDA state (a trained model's: every
 * linear mixer's state and every convolution's history), weights kept,
 * position 0. The caches keep their memory (kdalab_kv_cache_clear), so a
 * reset cannot run out of memory. Errors: KDALAB_ENULL. */
kdalab_status kdalab_hybrid_reset(kdalab_hybrid *stack);

/*
 * One layer's weights, pointing into the stack (writable: change them to set
 * weights by hand; the caches are not recomputed). All row-major, y = x W.
 *   norm            [d_model]           RMSNorm gain (used when rms_norm == 1)
 *   wq, wk, wv, wo  [d_model, d_model]
 *   wg              [d_model, d_model]  KDA layers; NULL for attention
 *   bg              [d_model]           KDA layers; NULL for attention
 *   wbeta           [d_model, H]        KDA layers; NULL for attention
 */
typedef struct {
    kdalab_hybrid_kind kind;
    double *norm, *wq, *wk, *wv, *wo, *wg, *bg, *wbeta;
} kdalab_hybrid_weights;

/* Errors: KDALAB_ENULL, KDALAB_EINVAL (layer >= L; a trained model's stack:
 * kdalab_hybrid_model gives its parameters). */
kdalab_status kdalab_hybrid_layer_weights(kdalab_hybrid *stack, size_t layer,
                                          kdalab_hybrid_weights *out);

/*
 * kdalab_hybrid_layer_project — layer `layer`'s mixer inputs for T residual
 * rows x [T, d_model] (what prefill/decode feed the KDA recurrence or the
 * attention; the RMSNorm is applied first when rms_norm), exactly as computed
 * inside the stack:
 *   q, k  [T, H, d_head]  (L2-normalised per (t, head) for KDA layers)
 *   v     [T, H, d_head]
 *   g     [T, H, d_head]  KDA only (NULL allowed; ignored for attention)
 *   beta  [T, H]          KDA only (NULL allowed; ignored for attention)
 * Any of q, k, v may be NULL when not wanted. Does not touch the caches.
 * Errors: KDALAB_ENULL (stack, or x when T > 0), KDALAB_EINVAL (layer >= L;
 * a trained model's stack),
 * KDALAB_ENONFINITE (x holds NaN/Inf), KDALAB_EOVERFLOW (T * d_model past
 * 2^31 - 1),
 * KDALAB_ENOMEM (the RMSNorm scratch).
 */
kdalab_status kdalab_hybrid_layer_project(const kdalab_hybrid *stack, size_t layer, size_t T,
                                          const double *x, double *q, double *k, double *v,
                                          double *g, double *beta);

/*
 * kdalab_hybrid_prefill — run T tokens through the stack at once, continuing
 * from its current caches (position P before, P + T after):
 *   KDA layers       kdalab_chunk_f64 with default options (C = 64, safe
 *                    decay), h0 = the layer's state, which is replaced by ht
 *   attention layers append the T keys and values to the layer's KV cache;
 *                    outputs by kdalab_attention_f64 when the cache was empty,
 *                    otherwise token by token over cache + new tokens
 *                    (kdalab_kv_cache_attend): the same causal attention
 *
 *   x             [T, d_model] residual-stream input (the token embeddings)
 *   y             [T, d_model] the residual stream after layer L-1, or NULL
 *                 when only the caches are wanted (then a final attention
 *                 layer only appends, skipping its O(T^2) scores)
 *   layer_inputs  [L, T, d_model] the residual input of each layer, before
 *                 its RMSNorm (layer_inputs[0] = x), or NULL
 * T == 0 is a no-op. Errors: KDALAB_ENULL (stack, or x when T > 0),
 * KDALAB_EINVAL (a trained model's stack: it takes tokens,
 * kdalab_hybrid_prefill_tokens), KDALAB_ENONFINITE (x holds NaN/Inf),
 * KDALAB_EOVERFLOW (T * d_model past 2^31 - 1), KDALAB_ENOMEM, and
 * any error of the KDA/attention kernels (e.g. KDALAB_ERANGE), and
 * KDALAB_ERANGE when y holds non-finite values from finite x (y is written).
 * On an error before the first layer ran nothing changes; on a kernel error
 * mid-stack (including a kernel's KDALAB_ERANGE) y is not written and the
 * stack is left inconsistent — call kdalab_hybrid_reset.
 */
kdalab_status kdalab_hybrid_prefill(kdalab_hybrid *stack, size_t T, const double *x,
                                    double *y, double *layer_inputs);

/*
 * kdalab_hybrid_decode — advance the stack by one token (position P -> P+1):
 * KDA layers by kdalab_step_f64 per head on their [H, K, V] state (O(K V) per
 * head, whatever P), attention layers by appending the token's k, v to the
 * cache and attending over all P+1 cached tokens (O(P d_head) per head).
 *   x             [d_model] input; y [d_model] output (may alias x)
 *   layer_inputs  [L, d_model] each layer's residual input, or NULL
 * Result equals kdalab_hybrid_prefill of the same tokens up to rounding.
 * Errors as kdalab_hybrid_prefill (y must not be NULL).
 */
kdalab_status kdalab_hybrid_decode(kdalab_hybrid *stack, const double *x, double *y,
                                   double *layer_inputs);

/*
 * kdalab_hybrid_cache_bytes — the decode-time memory the stack holds, read
 * from the objects themselves (not from a formula):
 *   KDA layer        the bytes of its state array: H * d_head * d_head * 8,
 *                    constant in the context length
 *   attention layer  kdalab_kv_cache_bytes of its cache: tokens * 2 * H *
 *                    d_head * 8, growing by 2 * d_model * 8 bytes per token
 *   a trained model's block: its linear mixer's state or its attention's
 *                    cache, as above, plus with the convolution on its last
 *                    3 rows of q, k and v: 3 * 3 * d_model * 8
 *   per_layer  [L] bytes per layer (written), or NULL
 *   total      sum over the layers (written), or NULL
 * Errors: KDALAB_ENULL (stack).
 */
kdalab_status kdalab_hybrid_cache_bytes(const kdalab_hybrid *stack, size_t *per_layer,
                                        size_t *total);

/*
 * Direct access to one layer's memory, for probing and benchmarking:
 *   kdalab_hybrid_kda_state   the [H, d_head, d_head] state S (row c = key
 *                             channel c) of a KDA layer (a trained model's: of
 *                             any linear mixer); EINVAL for attention
 *   kdalab_hybrid_kv_cache    the KV cache of an attention layer (keys, values
 *                             [tokens, H, d_head]); EINVAL for KDA (and for
 *                             a trained model's linear mixers). Appending
 *                             through it changes that layer only (the stack's
 *                             position does not move): for benchmarks that
 *                             need a long cache cheaply, never for outputs.
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (layer >= L or the wrong kind).
 */
kdalab_status kdalab_hybrid_kda_state(kdalab_hybrid *stack, size_t layer, double **state);
kdalab_status kdalab_hybrid_kv_cache(kdalab_hybrid *stack, size_t layer,
                                     kdalab_kv_cache **cache);

/* ------------------------------------------------------------------------- */
/* A trained model as a stack (lib/model/trained.c, forward.c)               */
/* ------------------------------------------------------------------------- */
/*
 * The model kdalab_train_* trains (kdalab_model.h: embedding, L blocks of
 * RMSNorm -> mixer -> residual and RMSNorm -> SwiGLU MLP -> residual, final
 * RMSNorm, LM head; mixers attention or any row of the mechanism table —
 * linear attention, DeltaNet, Gated DeltaNet, KDA, simple GLA, GLA — and any
 * stack of them, such as `kdalab train --mixer hybrid:N`)
 * run as a decoder: prefill a prompt, then decode token by token. Each block
 * keeps what decoding needs: a linear mixer its [H, d, d] state (d = D / H),
 * an attention mixer its KV cache (q, k, v after the convolution and SiLU),
 * and with the convolution on the last 3 rows of x Wq, x Wk, x Wv. The
 * logits equal kdalab_model_logits_f64's for the same tokens up to float64
 * rounding (the mechanism's chunkwise or recurrent form against the
 * training forward's chunkwise one: ~1e-15 relative, measured in
 * tests/test_hybrid_trained.c). Both kinds of stack run one forward
 * (lib/model/forward.c): the chapter's layer is a trained block without
 * the convolution, SiLU, output norm and gate, and MLP, with its own gate.
 */

/*
 * kdalab_hybrid_new_model — a stack running the model cfg with parameters
 * theta [n_params] (kdalab_model_size; copied), its memory empty (position
 * 0). Errors: those of kdalab_model_size, KDALAB_ENULL (theta, out),
 * KDALAB_ENONFINITE (theta), KDALAB_ENOMEM.
 */
kdalab_status kdalab_hybrid_new_model(const kdalab_model_config *cfg, const double *theta,
                                      kdalab_hybrid **out);

/*
 * kdalab_hybrid_load — kdalab_hybrid_new_model on the checkpoint in
 * directory dir (kdalab_checkpoint.h; `kdalab train --out DIR` writes one).
 * Errors: those of kdalab_checkpoint_read_config, kdalab_checkpoint_read_params
 * and kdalab_hybrid_new_model; *out is NULL on error.
 */
kdalab_status kdalab_hybrid_load(const char *dir, kdalab_hybrid **out);

/*
 * kdalab_hybrid_save — a trained model's stack written as a checkpoint into
 * the existing directory dir (kdalab_checkpoint_write, no extra lines).
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (the chapter's stack, which has no
 * checkpoint form), those of kdalab_checkpoint_write.
 */
kdalab_status kdalab_hybrid_save(const kdalab_hybrid *stack, const char *dir);

/*
 * kdalab_hybrid_model — a trained model's stack's configuration (copied into
 * *cfg) and parameters (*theta points at the stack's [n_params], valid until
 * kdalab_hybrid_free); either may be NULL. Errors: KDALAB_ENULL (stack),
 * KDALAB_EINVAL (the chapter's stack).
 */
kdalab_status kdalab_hybrid_model(const kdalab_hybrid *stack, kdalab_model_config *cfg,
                                  const double **theta);

/*
 * kdalab_hybrid_prefill_tokens — T tokens through a trained model's stack,
 * continuing from its memory (position P before, P + T after): the linear
 * mixers by kdalab_chunk_f64 (default options) from their state, which their
 * final state replaces; attention as in kdalab_hybrid_prefill (the batch
 * form on an empty cache, then token by token over the cache).
 *   tokens  [T], each in [0, vocab)
 *   logits  [T, vocab] the logits of every position, or NULL when only the
 *           memory is wanted
 * T == 0 is a no-op. Errors: KDALAB_ENULL (stack, or tokens when T > 0),
 * KDALAB_EINVAL (the chapter's stack), KDALAB_EDOMAIN (a token outside
 * [0, vocab); nothing changes), KDALAB_EOVERFLOW (T times the widest layer
 * past 2^31 - 1), KDALAB_ENOMEM, a kernel's error, KDALAB_ERANGE (an
 * intermediate overflowed, or the logits are not finite; the logits are
 * written in the second case). On an error after the first block ran the
 * stack is inconsistent: call kdalab_hybrid_reset.
 */
kdalab_status kdalab_hybrid_prefill_tokens(kdalab_hybrid *stack, size_t T,
                                           const int32_t *tokens, double *logits);

/*
 * kdalab_hybrid_decode_token — one token through a trained model's stack
 * (position P -> P + 1): the linear mixers by kdalab_step_f64 per head on
 * their state (O(d^2) per head, whatever P), attention over the P + 1
 * cached tokens. logits [vocab] (not NULL). Errors as
 * kdalab_hybrid_prefill_tokens.
 */
kdalab_status kdalab_hybrid_decode_token(kdalab_hybrid *stack, int32_t token, double *logits);

KDALAB_END_DECLS

#endif /* KDALAB_HYBRID_H */
