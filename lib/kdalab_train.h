/*
 * kdalab_train.h — training small models: the multi-query associative recall
 * task (lib/train/mqar.c); the forward and backward of a model's pieces
 * other than the mixers (lib/train/layers.c, lib/train/loss.c), of one mixer
 * sub-layer around them (lib/train/mixer.c) and of the whole model
 * (lib/train/model.c, model_loss.c); AdamW (adamw.c, schedule.c); the
 * training loop, on MQAR or a caller's batches (trainer.c). Each in float64, with float32 twins generated
 * from the float64 files (the last section).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 * Every function returns a kdalab_status; on any error other than
 * KDALAB_ERANGE no output is touched and kdalab_last_error() says what was
 * wrong (exceptions are said where they apply: a training run stopped after
 * it began). KDALAB_ERANGE means finite inputs gave a non-finite output: the
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
 * Errors: KDALAB_EOVERFLOW (n values overflow), KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_ERANGE.
 */
kdalab_status kdalab_silu_fwd_f64(size_t n, const double *x, double *y);
kdalab_status kdalab_silu_bwd_f64(size_t n, const double *x, const double *dy, double *dx);

/*
 * kdalab_swiglu_fwd_f64 — the SwiGLU gate, elementwise over n values:
 *   h = silu(a) * b
 * (an MLP's two input projections give a and b; its matmuls are not here).
 * Backward: da = dh b silu'(a), db = dh silu(a).
 *   a, b, h, dh, da, db [n]
 * Errors: KDALAB_EOVERFLOW (n values overflow), KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_ERANGE.
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
 * does not use one (d = D / H, the head dimension):
 *   Wq, Wk, Wv, Wo       [D, D]   every kind
 *   cq, ck, cv           [4, D]   conv on (kdalab_short_conv_fwd_f64's w)
 *   Wb                   [D, H]   DeltaNet, Gated DeltaNet, KDA: beta = sigmoid(x Wb)
 *   Wa                   [D, H]   Gated DeltaNet: g = -exp(A_log) softplus(x Wa + dt_bias)
 *   Wg, Wg2              [D, d], [d, D]   KDA: g = kdalab_kda_gate_f64((x Wg) Wg2,
 *                                 A_log, dt_bias), fla's low-rank f_proj (rank d)
 *   A_log                [H]      Gated DeltaNet, KDA
 *   dt_bias              [H] (Gated DeltaNet), [D] = [H, d] (KDA)
 *   Wog                  [D, D]   the linear mixers: the output gate sigmoid(x Wog)
 *   onorm                [d]      the linear mixers: the output RMSNorm's gain,
 *                                 shared by the heads (fla's o_norm) */
typedef struct {
    const double *Wq, *Wk, *Wv, *Wo;
    const double *cq, *ck, *cv;
    const double *Wb, *Wa, *Wg, *Wg2;
    const double *A_log, *dt_bias;
    const double *Wog, *onorm;
} kdalab_mixer_params;

/* Their gradients, same shapes; each may be NULL when not wanted (and is
 * ignored where the kind or conv has no such weight). */
typedef struct {
    double *Wq, *Wk, *Wv, *Wo;
    double *cq, *ck, *cv;
    double *Wb, *Wa, *Wg, *Wg2;
    double *A_log, *dt_bias;
    double *Wog, *onorm;
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
 *     o <- rmsnorm(o, onorm, eps 1e-5) * sigmoid(x Wog)
 *   attention: o = kdalab_attention_f64(q, k, v, scale d^-1/2)
 *   y = o Wo       (o [B, T, H, d] read as [B, T, D])
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

/* ------------------------------------------------------------------------- */
/* The model (lib/train/model.c: layout and initialisation;                  */
/*            lib/train/model_loss.c: loss and gradient)                     */
/* ------------------------------------------------------------------------- */

/* At most this many blocks. */
#define KDALAB_MODEL_MAX_LAYERS 64

/*
 * A small language model, as in the Zoology and Kimi Linear MQAR studies:
 *   x = embed[tokens]                                   [N, D], N = B * T
 *   L blocks:  x = x + mixer_l(rmsnorm(x, norm1_l))
 *              x = x + (silu(h W1_l) * (h W3_l)) W2_l,  h = rmsnorm(x, norm2_l)
 *   logits = rmsnorm(x, norm_f) lm_head                  [N, V]
 * RMSNorm eps 1e-6 (fla's model default); no biases; lm_head not tied to
 * embed. Each block's mixer is kdalab_mixer_fwd_f64 of kind mixer[l] with
 * (D, H, conv).
 */
typedef struct {
    size_t vocab; /* V: token ids in [0, V)                                  */
    size_t D;     /* model width, a multiple of H                            */
    size_t H;     /* heads of every mixer (head dimension d = D / H)         */
    size_t L;     /* blocks, 1 .. KDALAB_MODEL_MAX_LAYERS                     */
    size_t F;     /* the SwiGLU MLP's hidden width (>= 1)                     */
    int conv;     /* != 0: the short convolution on every mixer's q, k, v     */
    kdalab_mixer_kind mixer[KDALAB_MODEL_MAX_LAYERS]; /* block l's mixer     */
} kdalab_model_config;

/* "attention", "linear_attention", "deltanet", "gated_deltanet", "kda";
 * "unknown" for any other value. */
const char *kdalab_mixer_name(kdalab_mixer_kind kind);

/*
 * kdalab_model_parse_mixers — the blocks' mixers from a text spec:
 *   "kda" (any one name)   every one of the *L blocks
 *   "hybrid:N"             N KDA blocks then one attention block, repeated
 *                          (Kimi Linear's 3:1 is hybrid:3); block l is attention
 *                          when (l + 1) % (N + 1) == 0
 *   "kda,kda,attention"    one name per block; sets *L (when fixed_L, the count
 *                          must equal *L)
 * out [KDALAB_MODEL_MAX_LAYERS] gets the kinds of blocks 0 .. *L - 1.
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (an unknown name, a malformed N),
 * KDALAB_ESIZE (*L zero or above the maximum, a list of another length,
 * hybrid:N with *L < N + 1: no attention block).
 */
kdalab_status kdalab_model_parse_mixers(const char *spec, size_t *L, int fixed_L,
                                        kdalab_mixer_kind *out);

/* One parameter tensor: theta[offset .. offset + rows * cols), row-major. */
typedef struct {
    char name[40];  /* "embed", "blocks.0.norm1", "blocks.0.mixer.Wq",
                       "blocks.0.mlp.W1", ..., "norm_f", "lm_head"          */
    size_t offset;  /* into the flat parameter vector                        */
    size_t rows, cols; /* shape [rows, cols]; vectors have rows = 1          */
    int decay;      /* 1 for matrices (AdamW decays them), 0 for norms,      */
                    /* convolutions, A_log and dt_bias                       */
} kdalab_model_tensor;

/*
 * kdalab_model_size — check cfg; *n_params gets the length of the flat
 * parameter vector theta, *n_tensors the number of tensors in it (either
 * pointer may be NULL). Tensors are laid out in the order: embed [V, D];
 * per block norm1 [D], the mixer's weights in kdalab_mixer_params' order
 * (those its kind and conv use, shapes as there), norm2 [D], mlp.W1 [D, F],
 * mlp.W3 [D, F], mlp.W2 [F, D]; norm_f [D]; lm_head [D, V].
 * Errors: KDALAB_ENULL (cfg), KDALAB_ESIZE (V, D, H, F zero, D not a multiple
 * of H, L outside 1 .. KDALAB_MODEL_MAX_LAYERS), KDALAB_EINVAL (an unknown
 * mixer kind), KDALAB_EOVERFLOW.
 */
kdalab_status kdalab_model_size(const kdalab_model_config *cfg, size_t *n_params,
                                size_t *n_tensors);

/* kdalab_model_tensor_at — tensor i (0 .. n_tensors - 1) of the layout.
 * Errors: those of kdalab_model_size, KDALAB_ENULL (t), KDALAB_EINVAL (i). */
kdalab_status kdalab_model_tensor_at(const kdalab_model_config *cfg, size_t i,
                                     kdalab_model_tensor *t);

/*
 * kdalab_model_init — fill theta [n_params] from seed (GSL's mt19937):
 * matrices N(0, 0.02^2) (fla's initializer_range); norms (and onorm) 1; convolutions
 * U(-1/2, 1/2) (PyTorch's conv1d default for width 4); and as fla's layers
 * initialise the gates, A_log = log U(1, 16) and dt_bias = softplus^-1(dt),
 * dt = exp(U(ln 1e-3, ln 1e-1)), so the initial half-lives span about
 * 0.04 to 70 tokens rather than less than one. Errors: those of
 * kdalab_model_size, KDALAB_ENULL (theta), KDALAB_ENOMEM.
 */
kdalab_status kdalab_model_init(const kdalab_model_config *cfg, unsigned long seed,
                                double *theta);

/*
 * kdalab_model_loss_f64 — the model on B sequences of T tokens: the masked
 * cross-entropy (kdalab_cross_entropy_fwd_f64) of its logits against
 * targets, and its gradient.
 *   theta [n_params]; tokens, targets [B, T] (targets -1 where not counted)
 *   grad  [n_params] dloss/dtheta, overwritten; NULL for the loss only
 * loss, accuracy (either may be NULL) as kdalab_cross_entropy_fwd_f64.
 * Errors: those of kdalab_model_size, KDALAB_ENULL, KDALAB_ESIZE (B or T
 * zero), KDALAB_EOVERFLOW, KDALAB_EDOMAIN (a token outside [0, V), a target
 * outside [0, V) other than -1), KDALAB_ENONFINITE (theta), KDALAB_ENOMEM,
 * or a layer's error; KDALAB_ERANGE (finite inputs overflowed an
 * intermediate, the loss or a gradient: loss, accuracy and grad written as
 * NaN; the layers inside do not re-check what they pass each other).
 * The batch is cut into two halves run on up to two OpenMP threads and summed
 * in a fixed order, so the result does not depend on the thread count. When
 * the CBLAS is OpenBLAS, it is set to one thread per call
 * (openblas_set_num_threads(1), a process-wide setting): its own threads
 * slowed training by a third on 2 cores.
 */
kdalab_status kdalab_model_loss_f64(const kdalab_model_config *cfg, const double *theta,
                                    size_t B, size_t T, const int32_t *tokens,
                                    const int32_t *targets, double *loss, double *accuracy,
                                    double *grad);

/* ------------------------------------------------------------------------- */
/* AdamW (lib/train/adamw.c)                                                 */
/* ------------------------------------------------------------------------- */

/* AdamW (Loshchilov & Hutter 2019) with linear warm-up and cosine decay. */
typedef struct {
    double lr;           /* peak learning rate, > 0                              */
    double min_lr;       /* the cosine ends here, 0 <= min_lr <= lr              */
    double beta1, beta2; /* in [0, 1)                                            */
    double eps;          /* > 0                                                  */
    double weight_decay; /* >= 0, decoupled: theta -= lr * wd * theta            */
    double clip;         /* the global gradient norm is clipped to this; 0: off  */
    size_t warmup;       /* steps of linear warm-up                              */
    size_t steps;        /* total steps (the cosine's length), >= 1              */
} kdalab_adamw_config;

/*
 * kdalab_adamw_lr — the learning rate of step (0-based):
 *   step < warmup:  lr (step + 1) / warmup
 *   after:          min_lr + (lr - min_lr) (1 + cos(pi p)) / 2,
 *                   p = (step - warmup) / max(1, steps - warmup), capped at 1
 * Errors: KDALAB_ENULL, KDALAB_EDOMAIN (a field outside its range above).
 */
kdalab_status kdalab_adamw_lr(const kdalab_adamw_config *cfg, size_t step, double *lr);

/*
 * kdalab_adamw_step_f64 — one AdamW update of n parameters at step (0-based):
 *   c  = min(1, clip / |grad|)        (1 when clip is 0 or |grad| is 0)
 *   m  = beta1 m + (1 - beta1) c grad;   v = beta2 v + (1 - beta2) (c grad)^2
 *   theta -= lr_t (m / (1 - beta1^(step+1)) / (sqrt(v / (1 - beta2^(step+1))) + eps)
 *                  + wd theta)        wd = weight_decay where decay[i], else 0
 *   theta, m, v [n] updated in place (m, v start at 0); grad [n];
 *   decay [n] or NULL (decay everything)
 * *grad_norm (may be NULL) gets |grad| before clipping (computed scaled, so
 * every finite gradient has a finite norm). Errors, with nothing updated:
 * those of kdalab_adamw_lr, KDALAB_EOVERFLOW (n values overflow), KDALAB_ENULL,
 * KDALAB_ENONFINITE (grad, theta or m), KDALAB_EDOMAIN (v < 0); KDALAB_ERANGE when finite
 * inputs gave a non-finite theta or v (written: the step diverged, or |grad|^2 overflowed).
 */
kdalab_status kdalab_adamw_step_f64(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    double *theta, const double *grad, double *m, double *v,
                                    const unsigned char *decay, double *grad_norm);

/* ------------------------------------------------------------------------- */
/* Training on MQAR (lib/train/trainer.c)                                    */
/* ------------------------------------------------------------------------- */

typedef struct {
    kdalab_model_config model;  /* model.vocab must be the task's vocabulary  */
    kdalab_mqar_config task;    /* kdalab_train_f64 reads only task.T          */
    kdalab_adamw_config opt;    /* opt.steps is the number of steps trained   */
    size_t batch;               /* sequences per step, >= 1                   */
    size_t test_sequences;      /* size of the test set, >= 1                 */
    unsigned long seed;         /* initialisation, training and test data     */
} kdalab_train_config;

/* What a progress callback sees, after each step. */
typedef struct {
    size_t step, steps;    /* steps done (1-based) of steps                  */
    double loss, accuracy; /* this step's training batch                     */
    double lr, grad_norm;  /* this step's learning rate, gradient norm       */
    double seconds;        /* wall time since training began                 */
    double tokens_per_s;   /* B * T * step / seconds                         */
} kdalab_train_progress;

/* Called after every step; a non-zero return stops training (status
 * KDALAB_EINVAL, "stopped by the callback"). */
typedef int (*kdalab_train_callback)(const kdalab_train_progress *p, void *user);

/* The result of a run. */
typedef struct {
    double test_loss, test_accuracy;   /* on the test set, after training   */
    double train_loss;                 /* the last step's batch             */
    double seconds, tokens_per_s;      /* training only (not the test)      */
} kdalab_train_result;

/*
 * A batch maker: batch `index` of the stream `stream`, B sequences of T tokens:
 *   tokens [B, T] in [0, model.vocab); targets [B, T], the token to predict
 *   at each position or -1 where the loss does not count it
 * A function of (stream, index, B) alone, so a run is a function of its
 * seed. Returns KDALAB_OK or a status that stops training with it.
 * kdalab_mqar_make is one (the trainer wraps it); user is the caller's.
 */
typedef kdalab_status (*kdalab_batch_fn)(void *user, unsigned long stream, size_t index,
                                         size_t B, size_t T, int32_t *tokens, int32_t *targets);

/*
 * kdalab_train_f64 — train a model from kdalab_model_init(cfg->seed) on the
 * batches make(make_user, cfg->seed, step, cfg->batch, T = cfg->task.T) with
 * AdamW (matrices decayed; norms, biases, A_log, dt_bias, convolutions not),
 * then measure it on cfg->test_sequences sequences of the stream
 * kdalab_mqar_test_seed(cfg->seed), made 32 at a time (batch means weighted by rows).
 *   theta [n_params of cfg->model]: the trained parameters on return
 * Errors, theta untouched: KDALAB_ENULL (cfg, make, theta, result), KDALAB_ESIZE (batch,
 * test_sequences or T zero), those of kdalab_train_mqar_f64; once training has begun
 * (theta written): make's own status, the loss's (a token or target out of range). */
kdalab_status kdalab_train_f64(const kdalab_train_config *cfg, kdalab_batch_fn make,
                           void *make_user, double *theta, kdalab_train_callback cb,
                           void *user, kdalab_train_result *result);

/*
 * kdalab_train_mqar_f64 — kdalab_train_f64 on MQAR: train a model from kdalab_model_init(cfg->seed) on
 * training batches kdalab_mqar_make(task, seed, step, batch) with AdamW
 * (matrices decayed, other tensors not), then measure it on the test set:
 * test_sequences sequences of the stream kdalab_mqar_test_seed(seed).
 *   theta [n_params of cfg->model]: the trained parameters on return
 * The result is a function of cfg alone (not of the thread count or the
 * batch's effect on the test draw: the test set is drawn 32 sequences at a
 * time whatever cfg->batch). Errors, with theta untouched: those of the
 * pieces' checks, KDALAB_ENULL (cfg, theta, result), KDALAB_ESIZE (batch or
 * test_sequences zero, model.vocab not the task's), KDALAB_EOVERFLOW (batch *
 * T * the widest layer beyond a CBLAS int), KDALAB_ENOMEM. Once training has
 * begun, theta holds the parameters of the step it stopped at:
 * KDALAB_EINVAL (stopped by the callback: an early stop), KDALAB_ERANGE
 * (training diverged: a non-finite loss, gradient, update or test loss).
 */
kdalab_status kdalab_train_mqar_f64(const kdalab_train_config *cfg, double *theta,
                                kdalab_train_callback cb, void *user,
                                kdalab_train_result *result);

/*
 * kdalab_model_evaluate_f64 — loss and accuracy of theta on n sequences of the
 * MQAR stream `seed`, in batches of up to `batch` (batch_index 0, 1, ...).
 * Errors: those of kdalab_model_loss_f64 and kdalab_mqar_make, KDALAB_ESIZE
 * (n or batch zero).
 */
kdalab_status kdalab_model_evaluate_f64(const kdalab_model_config *model, const double *theta,
                                    const kdalab_mqar_config *task, unsigned long seed,
                                    size_t n, size_t batch, double *loss, double *accuracy);

/* The test stream of a training seed: a hash of it (SplitMix64's
 * finaliser), so no small training seed's stream is another run's test set. */
unsigned long kdalab_mqar_test_seed(unsigned long seed);

/* ------------------------------------------------------------------------- */
/* The float32 twins (lib/train/NAME_f32.c, generated from the float64 files by */
/* scripts/make_f32.sh): the same algorithms, shapes, errors and promises    */
/* with float for double, for training faster; the float64 functions above  */
/* are what they are checked against (tests/test_train_model.c).             */
/* ------------------------------------------------------------------------- */

kdalab_status kdalab_rmsnorm_fwd_f32(size_t N, size_t D, float eps, const float *x,
                                     const float *w, float *y);
kdalab_status kdalab_rmsnorm_bwd_f32(size_t N, size_t D, float eps, const float *x,
                                     const float *w, const float *dy, float *dx, float *dw);
kdalab_status kdalab_silu_fwd_f32(size_t n, const float *x, float *y);
kdalab_status kdalab_silu_bwd_f32(size_t n, const float *x, const float *dy, float *dx);
kdalab_status kdalab_swiglu_fwd_f32(size_t n, const float *a, const float *b, float *h);
kdalab_status kdalab_swiglu_bwd_f32(size_t n, const float *a, const float *b, const float *dh,
                                    float *da, float *db);
kdalab_status kdalab_short_conv_fwd_f32(size_t B, size_t T, size_t C, size_t W, const float *x,
                                        const float *w, float *y);
kdalab_status kdalab_short_conv_bwd_f32(size_t B, size_t T, size_t C, size_t W, const float *x,
                                        const float *w, const float *dy, float *dx, float *dw);
kdalab_status kdalab_cross_entropy_fwd_f32(size_t N, size_t V, const float *logits,
                                           const int32_t *targets, float *loss, float *accuracy,
                                           size_t *counted);
kdalab_status kdalab_cross_entropy_bwd_f32(size_t N, size_t V, const float *logits,
                                           const int32_t *targets, float dloss, float *dlogits);

/* The mixer's weights, gradients and cache in float32 (fields as above). */
typedef struct {
    const float *Wq, *Wk, *Wv, *Wo;
    const float *cq, *ck, *cv;
    const float *Wb, *Wa, *Wg, *Wg2;
    const float *A_log, *dt_bias;
    const float *Wog, *onorm;
} kdalab_mixer_params_f32;
typedef struct {
    float *Wq, *Wk, *Wv, *Wo;
    float *cq, *ck, *cv;
    float *Wb, *Wa, *Wg, *Wg2;
    float *A_log, *dt_bias;
    float *Wog, *onorm;
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

/* The model's loss and gradient with float32 parameters theta [n_params]
 * (kdalab_model_init writes float64: convert), AdamW over float32 state,
 * evaluation and the training loop (theta float32 on return). */
kdalab_status kdalab_model_loss_f32(const kdalab_model_config *cfg, const float *theta,
                                    size_t B, size_t T, const int32_t *tokens,
                                    const int32_t *targets, float *loss, float *accuracy,
                                    float *grad);
kdalab_status kdalab_adamw_step_f32(const kdalab_adamw_config *cfg, size_t step, size_t n,
                                    float *theta, const float *grad, float *m, float *v,
                                    const unsigned char *decay, double *grad_norm);
kdalab_status kdalab_model_evaluate_f32(const kdalab_model_config *model, const float *theta,
                                        const kdalab_mqar_config *task, unsigned long seed,
                                        size_t n, size_t batch, float *loss, float *accuracy);
kdalab_status kdalab_train_f32(const kdalab_train_config *cfg, kdalab_batch_fn make,
                               void *make_user, float *theta, kdalab_train_callback cb,
                               void *user, kdalab_train_result *result);
kdalab_status kdalab_train_mqar_f32(const kdalab_train_config *cfg, float *theta,
                                    kdalab_train_callback cb, void *user,
                                    kdalab_train_result *result);

KDALAB_END_DECLS

#endif /* KDALAB_TRAIN_H */
