/*
 * kdalab_train.h — training small models: the multi-query associative recall
 * task (lib/train/mqar.c) and the forward and backward of a model's pieces
 * other than the mixers (lib/train/layers.c, lib/train/loss.c) and one mixer
 * sub-layer around them (lib/train/mixer.c), in float64.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 * Every function returns a kdalab_status; on any error other than
 * KDALAB_ERANGE no output is touched and kdalab_last_error() says what was
 * wrong. KDALAB_ERANGE means finite inputs gave a non-finite output: the
 * outputs are written, so they can be studied. Output arrays must not overlap
 * input arrays. A backward takes the forward's inputs and the upstream
 * gradient dy (dL/dy) and writes dL/d(input) for L, overwriting its outputs
 * (gradients of weights are summed over every row, not added to what the
 * array held); each gradient output may be NULL when not wanted.
 */
#ifndef KDALAB_TRAIN_H
#define KDALAB_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Multi-query associative recall (lib/train/mqar.c)                         */
/* ------------------------------------------------------------------------- */

/*
 * One MQAR task, in the manner of the Zoology paper (Arora et al. 2023,
 * zoology/data/associative_recall.py). The vocabulary is
 *   0                              the filler token
 *   [1, 1 + key_vocab)             keys
 *   [1 + key_vocab, 1 + key_vocab + value_vocab)   values
 * so 1 + key_vocab + value_vocab tokens in all (kdalab_mqar_vocab_size).
 * A sequence of T tokens is
 *   positions 0 .. 2P-1   P pairs  key_0 value_0 key_1 value_1 ...  (distinct
 *                         keys; each value drawn uniformly and independently,
 *                         so two keys may share a value)
 *   positions 2P .. T-1   n_queries of the P keys, each at most once, at
 *                         distinct positions drawn uniformly; filler elsewhere
 * and the target at a query position is the value paired with its key; every
 * other target is -1 (not counted by the loss).
 * Differences from Zoology: Zoology draws query gaps from a power law (most
 * queries early), draws values without replacement, fills with random tokens
 * rather than 0, and puts the answer as the label of the position after the
 * query (the same thing after its one-token shift).
 */
typedef struct {
    size_t T;           /* tokens per sequence; >= 2 * kv_pairs + 1                 */
    size_t kv_pairs;    /* P >= 1                                                    */
    size_t key_vocab;   /* number of key tokens; >= P                                */
    size_t value_vocab; /* number of value tokens; >= 1                              */
    size_t n_queries;   /* 0: min(P, T - 2P), Zoology's every key once when it fits; */
                        /* else 1 .. min(P, T - 2P)                                  */
} kdalab_mqar_config;

/*
 * kdalab_mqar_vocab_size — check cfg and give the vocabulary size
 * 1 + key_vocab + value_vocab in *vocab (and the number of queries per
 * sequence in *n_queries; either pointer may be NULL). Errors: KDALAB_ENULL
 * (cfg), KDALAB_ESIZE (P = 0, a vocabulary of 0, key_vocab < P, T < 2P + 1,
 * T > 2^32 - 1, n_queries > min(P, T - 2P)), KDALAB_EOVERFLOW (2P + 1, or
 * the vocabulary beyond INT32_MAX, the largest token an int32_t holds).
 */
kdalab_status kdalab_mqar_vocab_size(const kdalab_mqar_config *cfg, size_t *vocab,
                                     size_t *n_queries);

/*
 * kdalab_mqar_make — batch number batch_index of the stream `seed`: B
 * sequences, a function of (cfg, seed, batch_index, B) only.
 *   tokens   [B, T]  the inputs
 *   targets  [B, T]  the answer at query positions, -1 elsewhere
 * Each batch draws from its own GSL gsl_rng_mt19937, seeded with a hash of
 * (seed, batch_index) (SplitMix64's finaliser, folded to the 32 bits
 * mt19937 takes): batches are independent of each other and of the order
 * they are made in; the rows are drawn in order, so the first B' rows of a
 * batch of B > B' are the batch of B'. Two different (seed, batch_index)
 * pairs share a generator with probability 2^-32, so a training run should
 * draw its test set from its own seed (e.g. seed + 1) rather than rely on
 * disjoint indices.
 * B = 0 writes nothing. Errors: those of kdalab_mqar_vocab_size,
 * KDALAB_EOVERFLOW (B * T elements), KDALAB_ENULL (tokens or targets),
 * KDALAB_ENOMEM.
 */
kdalab_status kdalab_mqar_make(const kdalab_mqar_config *cfg, unsigned long seed,
                               size_t batch_index, size_t B, int32_t *tokens,
                               int32_t *targets);

/* ------------------------------------------------------------------------- */
/* Layers (lib/train/layers.c)                                               */
/* ------------------------------------------------------------------------- */

/*
 * kdalab_rmsnorm_fwd_f64 — RMSNorm with a gain, over the last axis of N rows:
 *   y[n][d] = x[n][d] / sqrt(mean_d' x[n][d']^2 + eps) * w[d]
 *   x, y [N, D]; w [D]
 * eps > 0 and finite keeps an all-zero row finite (fla's RMSNorm default is
 * 1e-5; fla's model configurations use 1e-6). Backward, with
 * r = 1 / sqrt(mean x^2 + eps):
 *   dx[n][d] = r w[d] dy[n][d] - r^3 x[n][d] / D * sum_d' dy[n][d'] w[d'] x[n][d']
 *   dw[d]    = sum_n dy[n][d] x[n][d] r_n
 * Errors: KDALAB_ESIZE (D = 0), KDALAB_EOVERFLOW, KDALAB_EDOMAIN (eps),
 * KDALAB_ENULL, KDALAB_ENONFINITE (an input), KDALAB_ERANGE.
 */
kdalab_status kdalab_rmsnorm_fwd_f64(size_t N, size_t D, double eps, const double *x,
                                     const double *w, double *y);
kdalab_status kdalab_rmsnorm_bwd_f64(size_t N, size_t D, double eps, const double *x,
                                     const double *w, const double *dy, double *dx,
                                     double *dw);

/*
 * kdalab_silu_fwd_f64 — SiLU elementwise over n values: y = x sigmoid(x).
 * Backward: dx = dy sigmoid(x) (1 + x (1 - sigmoid(x))).
 *   x, y, dy, dx [n]
 * Errors: KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_ERANGE (dx overflowed).
 */
kdalab_status kdalab_silu_fwd_f64(size_t n, const double *x, double *y);
kdalab_status kdalab_silu_bwd_f64(size_t n, const double *x, const double *dy, double *dx);

/*
 * kdalab_swiglu_fwd_f64 — the SwiGLU gate, elementwise over n values:
 *   h = silu(a) * b
 * (an MLP's two input projections give a and b; its matmuls are not here).
 * Backward: da = dh b silu'(a), db = dh silu(a).
 *   a, b, h, dh, da, db [n]
 * Errors: KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_ERANGE.
 */
kdalab_status kdalab_swiglu_fwd_f64(size_t n, const double *a, const double *b, double *h);
kdalab_status kdalab_swiglu_bwd_f64(size_t n, const double *a, const double *b,
                                    const double *dh, double *da, double *db);

/*
 * kdalab_short_conv_fwd_f64 — the causal depthwise short convolution of width
 * W that fla's layers put on q, k and v (fla/modules/convolution.py,
 * ShortConvolution without its bias and activation):
 *   y[b][t][c] = sum_{i < W} w[i][c] x[b][t - i][c]     (x = 0 before t = 0)
 *   x, y [B, T, C]; w [W, C]   (w[0] multiplies the current token)
 * fla's weight is PyTorch's conv1d weight [C, 1, W], in the other order:
 * w[i][c] = weight[c][0][W - 1 - i]. Backward:
 *   dx[b][t][c] = sum_{i < W, t + i < T} w[i][c] dy[b][t + i][c]
 *   dw[i][c]    = sum_{b, t >= i} dy[b][t][c] x[b][t - i][c]
 * Errors: KDALAB_ESIZE (C or W zero), KDALAB_EOVERFLOW, KDALAB_ENULL,
 * KDALAB_ENONFINITE, KDALAB_ERANGE.
 */
kdalab_status kdalab_short_conv_fwd_f64(size_t B, size_t T, size_t C, size_t W,
                                        const double *x, const double *w, double *y);
kdalab_status kdalab_short_conv_bwd_f64(size_t B, size_t T, size_t C, size_t W,
                                        const double *x, const double *w, const double *dy,
                                        double *dx, double *dw);

/* ------------------------------------------------------------------------- */
/* The loss (lib/train/loss.c)                                               */
/* ------------------------------------------------------------------------- */

/*
 * kdalab_cross_entropy_fwd_f64 — softmax cross-entropy over a vocabulary of
 * V at the N positions whose target is not -1:
 *   loss     = mean over counted n of  logsumexp(logits[n]) - logits[n][targets[n]]
 *   accuracy = the fraction of counted n whose argmax (the first, on ties)
 *              is targets[n]
 *   logits [N, V]; targets [N], each -1 or in [0, V)
 * *counted (may be NULL) gets the number of counted positions; with none,
 * loss and accuracy are 0. accuracy may be NULL. Backward, for the
 * upstream gradient dloss = dL/dloss:
 *   dlogits[n] = dloss / counted * (softmax(logits[n]) - onehot(targets[n]))
 *   at counted n, 0 at the others.
 * Errors: KDALAB_ESIZE (V = 0), KDALAB_EOVERFLOW, KDALAB_ENULL,
 * KDALAB_ENONFINITE (logits, dloss), KDALAB_EDOMAIN (a target outside
 * [0, V) other than -1).
 */
kdalab_status kdalab_cross_entropy_fwd_f64(size_t N, size_t V, const double *logits,
                                           const int32_t *targets, double *loss,
                                           double *accuracy, size_t *counted);
kdalab_status kdalab_cross_entropy_bwd_f64(size_t N, size_t V, const double *logits,
                                           const int32_t *targets, double dloss,
                                           double *dlogits);

/* ------------------------------------------------------------------------- */
/* One mixer sub-layer (lib/train/mixer.c)                                   */
/* ------------------------------------------------------------------------- */

/* The five sequence mixers a layer can be. */
typedef enum {
    KDALAB_MIXER_ATTENTION = 0,     /* causal softmax attention, NoPE            */
    KDALAB_MIXER_LINEAR_ATTENTION,  /* no beta, no gate                          */
    KDALAB_MIXER_DELTANET,          /* beta, no gate                             */
    KDALAB_MIXER_GATED_DELTANET,    /* beta, one log-decay per head              */
    KDALAB_MIXER_KDA                /* beta, one log-decay per key channel       */
} kdalab_mixer_kind;

/* A mixer's shape: model width D = H * d (d = K = V, the head dimension),
 * H heads, conv != 0 for the short convolution (width 4) on q, k and v. */
typedef struct {
    kdalab_mixer_kind kind;
    size_t D, H;
    int conv;
} kdalab_mixer_config;

/* The weights (row-vector convention, y = x W). NULL where the kind or conv
 * does not use one:
 *   Wq, Wk, Wv, Wo       [D, D]   every kind
 *   cq, ck, cv           [4, D]   conv on (kdalab_short_conv_fwd_f64's w)
 *   Wb                   [D, H]   DeltaNet, Gated DeltaNet, KDA: beta = sigmoid(x Wb)
 *   Wa                   [D, H]   Gated DeltaNet: g = -exp(A_log) softplus(x Wa + dt_bias)
 *   Wg                   [D, D]   KDA: g = kdalab_kda_gate_f64(x Wg, A_log, dt_bias)
 *                                 (a full-rank stand-in for fla's low-rank projection)
 *   A_log                [H]      Gated DeltaNet, KDA
 *   dt_bias              [H] (Gated DeltaNet), [D] = [H, d] (KDA)  */
typedef struct {
    const double *Wq, *Wk, *Wv, *Wo;
    const double *cq, *ck, *cv;
    const double *Wb, *Wa, *Wg;
    const double *A_log, *dt_bias;
} kdalab_mixer_params;

/* Their gradients, same shapes; each may be NULL when not wanted (and is
 * ignored where the kind or conv has no such weight). */
typedef struct {
    double *Wq, *Wk, *Wv, *Wo;
    double *cq, *ck, *cv;
    double *Wb, *Wa, *Wg;
    double *A_log, *dt_bias;
} kdalab_mixer_grads;

/* What the forward keeps for the backward (opaque; kdalab_mixer_cache_free). */
typedef struct kdalab_mixer_cache kdalab_mixer_cache;

/*
 * kdalab_mixer_fwd_f64 — one mixer sub-layer, x [B, T, D] -> y [B, T, D]:
 *   a = x W        for W = Wq, Wk, Wv
 *   c = conv(a)    (kdalab_short_conv_fwd_f64, width 4; c = a with conv off)
 *   q, k, v = silu(c)                    (fla's layers: SiLU with or without conv)
 *   linear mixers: q, k <- q / sqrt(|q|^2 + 1e-6) per (t, head) (fla's l2norm),
 *     beta = sigmoid(x Wb), the gate above, o = kdalab_chunk_f64(scale d^-1/2)
 *   attention: o = kdalab_attention_f64(q, k, v, scale d^-1/2)
 *   y = o Wo       (o [B, T, H, d] read as [B, T, D])
 * Not here yet: fla's output RMSNorm with its sigmoid output gate.
 * cache: NULL to keep nothing (inference), else *cache gets a new cache
 * (any cache *cache held before is freed first) for kdalab_mixer_bwd_f64.
 * Errors: KDALAB_ENULL (cfg, p, x, y, a weight the config uses),
 * KDALAB_EINVAL (unknown kind), KDALAB_ESIZE (B, T, D or H zero, D not a
 * multiple of H), KDALAB_EOVERFLOW, KDALAB_ENONFINITE (x or a weight),
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

KDALAB_END_DECLS

#endif /* KDALAB_TRAIN_H */
