/*
 * kdalab_mixer.h — one mixer sub-layer of the training model (lib/train/mixer.c):
 * attention, linear attention, DeltaNet, Gated DeltaNet or KDA with its
 * projections, short convolution, gate and output gate; forward and
 * backward, in float64 and float32.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_MIXER_H
#define KDALAB_MIXER_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_forms.h"
#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/* The sequence mixers a layer can be: softmax attention, or one per row of
 * the mechanism table (kind = 1 + the mechanism's id, named as the row is),
 * whose properties decide its weights: Wb (beta) with the delta rule; Wa
 * [D, H] for a decay per head; Wg [D, d], Wg2 [d, D] for one per key
 * channel. */
typedef enum {
    KDALAB_MIXER_ATTENTION = 0,                             /* causal softmax, NoPE */
    KDALAB_MIXER_LINEAR_ATTENTION = 1 + KDALAB_LINEAR_ATTENTION, /* no beta, no gate */
    KDALAB_MIXER_DELTANET = 1 + KDALAB_DELTANET,            /* beta, no gate         */
    KDALAB_MIXER_GATED_DELTANET = 1 + KDALAB_GATED_DELTANET, /* beta, g per head     */
    KDALAB_MIXER_KDA = 1 + KDALAB_KDA,                      /* beta, g per channel   */
    KDALAB_MIXER_SIMPLE_GLA = 1 + KDALAB_SIMPLE_GLA,        /* g per head            */
    KDALAB_MIXER_GLA = 1 + KDALAB_GLA,                      /* g per key channel     */
    KDALAB_N_MIXERS = 1 + KDALAB_N_MECHANISMS               /* (not a mixer)         */
} kdalab_mixer_kind;

/* The activation of the linear mixers' output gate, og = rmsnorm(o) * act(z)
 * (fla's FusedRMSNormGated: sigmoid in fla's KDA layer, swish = SiLU, its
 * default, in fla's Gated DeltaNet layer); none: og = rmsnorm(o), no gate
 * (fla's Gated DeltaNet with use_gate=False). */
typedef enum {
    KDALAB_OUTPUT_GATE_SIGMOID = 0, /* act(z) = 1 / (1 + exp(-z))  (the default) */
    KDALAB_OUTPUT_GATE_SWISH,       /* act(z) = z / (1 + exp(-z))                */
    KDALAB_OUTPUT_GATE_NONE         /* no gate, no Wog                           */
} kdalab_output_gate;

/* A mixer's shape: model width D = H * d (d = K = V, the head dimension),
 * H heads, conv != 0 for the short convolution (width 4) on q, k and v;
 * the linear mixers' output gate (attention has none, and ignores both):
 * gate_rank 0, the gate's input is full rank, z = x Wog (fla's Gated
 * DeltaNet); r in 1 .. D, low rank with a bias, z = (x Wog) Wog2 + bog (fla's
 * KDA layer, whose r is the head dimension d). gate_rank must be 0 with
 * KDALAB_OUTPUT_GATE_NONE. Zero in both (a config written before they
 * existed) is the full-rank sigmoid gate. */
typedef struct {
    kdalab_mixer_kind kind;
    size_t D, H;
    int conv;
    kdalab_output_gate gate;
    size_t gate_rank;
} kdalab_mixer_config;

/* The weights (row-vector convention, y = x W). NULL where the kind or conv
 * does not use one (d = D / H, the head dimension):
 *   Wq, Wk, Wv, Wo       [D, D]   every kind
 *   cq, ck, cv           [4, D]   conv on (kdalab_short_conv_fwd_f64's w)
 *   Wb                   [D, H]   the delta rule (DeltaNet, Gated DeltaNet, KDA):
 *                                 beta = sigmoid(x Wb)
 *   Wa                   [D, H]   a decay per head (Gated DeltaNet, simple GLA):
 *                                 g = -exp(A_log) softplus(x Wa + dt_bias)
 *   Wg, Wg2              [D, d], [d, D]   a decay per key channel (KDA, GLA):
 *                                 g = kdalab_kda_gate_f64((x Wg) Wg2, A_log, dt_bias),
 *                                 fla's low-rank f_proj (rank d)
 *   A_log                [H]      every mixer with a decay
 *   dt_bias              [H] (a decay per head), [D] = [H, d] (per key channel)
 *   Wog                  [D, D]   the linear mixers with a gate: its input z = x Wog;
 *                        [D, r]   with gate_rank r >= 1: z = (x Wog) Wog2 + bog
 *   onorm                [d]      the linear mixers: the output RMSNorm's gain,
 *                                 shared by the heads (fla's o_norm)
 *   Wog2, bog            [r, D], [D]   the low-rank gate's second projection and
 *                                 bias (gate_rank r >= 1) */
typedef struct {
    const double *Wq, *Wk, *Wv, *Wo;
    const double *cq, *ck, *cv;
    const double *Wb, *Wa, *Wg, *Wg2;
    const double *A_log, *dt_bias;
    const double *Wog, *onorm;
    const double *Wog2, *bog;
} kdalab_mixer_params;

/* Their gradients, same shapes; each may be NULL when not wanted (and is
 * ignored where the kind or conv has no such weight). */
typedef struct {
    double *Wq, *Wk, *Wv, *Wo;
    double *cq, *ck, *cv;
    double *Wb, *Wa, *Wg, *Wg2;
    double *A_log, *dt_bias;
    double *Wog, *onorm;
    double *Wog2, *bog;
} kdalab_mixer_grads;

/* What the forward keeps for the backward (opaque; kdalab_mixer_cache_free). */
typedef struct kdalab_mixer_cache kdalab_mixer_cache;

/*
 * kdalab_mixer_fwd_f64 — one mixer sub-layer, x [B, T, D] -> y [B, T, D]:
 *   a = x W        for W = Wq, Wk, Wv
 *   c = conv(a)    (kdalab_short_conv_fwd_f64, width 4; c = a with conv off)
 *   q, k, v = silu(c)                    (fla's layers: SiLU with or without conv)
 *   linear mixers: q, k <- q / sqrt(|q|^2 + 1e-6) per (t, head) (fla's l2norm),
 *     beta = sigmoid(x Wb), the gate above, o = kdalab_simd_chunk_f64(d^-1/2),
 *     then fla's gated output norm, per (t, head):
 *     o <- rmsnorm(o, onorm, eps 1e-5) * act(z), act and z as cfg->gate and
 *     cfg->gate_rank say (sigmoid(x Wog) by default; none: rmsnorm(o) alone)
 *   attention: o = kdalab_attention_f64(q, k, v, scale d^-1/2)
 *   y = o Wo       (o [B, T, H, d] read as [B, T, D])
 * cache: NULL to keep nothing (inference), else *cache gets a new cache
 * (any cache *cache held before is freed first) for kdalab_mixer_bwd_f64.
 * Errors: KDALAB_ENULL (cfg, p, x, y, a weight the config uses),
 * KDALAB_EINVAL (unknown kind or gate, a gate_rank with no gate),
 * KDALAB_ESIZE (B, T, D or H zero, D not a multiple of H, gate_rank above
 * D), KDALAB_EOVERFLOW, KDALAB_ENONFINITE (x or a weight),
 * KDALAB_ENOMEM, KDALAB_ERANGE (y written, and the cache when asked).
 */
kdalab_status kdalab_mixer_fwd_f64(const kdalab_mixer_config *cfg, const kdalab_mixer_params *p,
                                   size_t B, size_t T, const double *x, double *y,
                                   kdalab_mixer_cache **cache);

/*
 * kdalab_mixer_bwd_f64 — its backward: given dy [B, T, D] = dL/dy and the
 * cache of the forward of the same (cfg, p, B, T, x), write dx [B, T, D]
 * (may be NULL) and every gradient g asks for. Errors: those of the forward,
 * KDALAB_ENULL (cache, dy), KDALAB_EINVAL (a cache of another config or size),
 * KDALAB_ENONFINITE (dy), KDALAB_ERANGE (outputs written).
 */
kdalab_status kdalab_mixer_bwd_f64(const kdalab_mixer_config *cfg, const kdalab_mixer_params *p,
                                   size_t B, size_t T, const double *x,
                                   const kdalab_mixer_cache *cache, const double *dy,
                                   double *dx, const kdalab_mixer_grads *g);

/* Free a cache (NULL is fine). */
void kdalab_mixer_cache_free(kdalab_mixer_cache *cache);

/* float32 (lib/train/mixer_f32.c, generated). The mixer's weights,
 * gradients and cache in float32, fields as above. */
typedef struct {
    const float *Wq, *Wk, *Wv, *Wo;
    const float *cq, *ck, *cv;
    const float *Wb, *Wa, *Wg, *Wg2;
    const float *A_log, *dt_bias;
    const float *Wog, *onorm;
    const float *Wog2, *bog;
} kdalab_mixer_params_f32;
typedef struct {
    float *Wq, *Wk, *Wv, *Wo;
    float *cq, *ck, *cv;
    float *Wb, *Wa, *Wg, *Wg2;
    float *A_log, *dt_bias;
    float *Wog, *onorm;
    float *Wog2, *bog;
} kdalab_mixer_grads_f32;
typedef struct kdalab_mixer_cache_f32 kdalab_mixer_cache_f32;

kdalab_status kdalab_mixer_fwd_f32(const kdalab_mixer_config *cfg,
                                   const kdalab_mixer_params_f32 *p, size_t B, size_t T,
                                   const float *x, float *y, kdalab_mixer_cache_f32 **cache);
kdalab_status kdalab_mixer_bwd_f32(const kdalab_mixer_config *cfg,
                                   const kdalab_mixer_params_f32 *p, size_t B, size_t T,
                                   const float *x, const kdalab_mixer_cache_f32 *cache,
                                   const float *dy, float *dx, const kdalab_mixer_grads_f32 *g);
void kdalab_mixer_cache_free_f32(kdalab_mixer_cache_f32 *cache);

KDALAB_END_DECLS

#endif /* KDALAB_MIXER_H */
