/*
 * kdalab_model.h — the training model (lib/train/model.c: layout and
 * initialisation; lib/train/model_loss.c: forward, loss and gradient): L blocks of
 * a mixer and a SwiGLU MLP, in float64 and float32.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_MODEL_H
#define KDALAB_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"
#include "kdalab_mixer.h"

KDALAB_BEGIN_DECLS

/* At most this many blocks. */
#define KDALAB_MODEL_MAX_LAYERS 64

/* How kdalab_model_init draws the short convolutions' weights. */
typedef enum {
    KDALAB_CONV_INIT_UNIFORM = 0, /* U(-1/2, 1/2): PyTorch's Conv1d default at width 4 */
    KDALAB_CONV_INIT_NORMAL       /* N(0, 0.02^2): fla's models' _init_weights        */
} kdalab_conv_init;

/*
 * A small language model, as in the Zoology and Kimi Linear MQAR studies:
 *   x = embed[tokens]                                   [N, D], N = B * T
 *   L blocks:  x = x + mixer_l(rmsnorm(x, norm1_l))
 *              x = x + (silu(h W1_l) * (h W3_l)) W2_l,  h = rmsnorm(x, norm2_l)
 *   logits = rmsnorm(x, norm_f) lm_head                  [N, V]
 * RMSNorm eps 1e-6 (fla's model default); no biases; lm_head not tied to
 * embed. Each block's mixer is kdalab_mixer_fwd_f64 of kind mixer[l] with
 * (D, H, conv, output_gate, gate_rank), its conv off where conv_off says.
 */
typedef struct {
    size_t vocab; /* V: token ids in [0, V)                                  */
    size_t D;     /* model width, a multiple of H                            */
    size_t H;     /* heads of every mixer (head dimension d = D / H)         */
    size_t L;     /* blocks, 1 .. KDALAB_MODEL_MAX_LAYERS                     */
    size_t F;     /* the SwiGLU MLP's hidden width (>= 1)                     */
    int conv;     /* != 0: the short convolution on every mixer's q, k, v     */
    kdalab_mixer_kind mixer[KDALAB_MODEL_MAX_LAYERS]; /* block l's mixer     */
    /* every linear mixer's output gate and its rank (kdalab_mixer_config's
     * gate and gate_rank); the convolutions' initialisation. Zero in all
     * three is the model as it was before they existed. */
    kdalab_output_gate output_gate;
    size_t gate_rank;
    kdalab_conv_init conv_init;
    /* blocks without the short convolution although conv is set: bit l
     * (1 << l) leaves block l's mixer without it, e.g. a KDA block with its
     * convolution before an attention block without one (conv 1, conv_off
     * 1 << 1). Zero: the convolution on every block, as before it existed. */
    uint64_t conv_off;
} kdalab_model_config;

/* "sigmoid", "swish", "none"; "unknown" for any other value. */
const char *kdalab_output_gate_name(kdalab_output_gate gate);

/* "uniform", "normal0.02"; "unknown" for any other value. */
const char *kdalab_conv_init_name(kdalab_conv_init init);

/* kdalab_output_gate_parse, kdalab_conv_init_parse — the value a name above
 * names, into *out. Errors: KDALAB_ENULL, KDALAB_EINVAL (another name). */
kdalab_status kdalab_output_gate_parse(const char *name, kdalab_output_gate *out);
kdalab_status kdalab_conv_init_parse(const char *name, kdalab_conv_init *out);

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

/*
 * kdalab_model_parse_blocks — a set of blocks from a text spec, distinct
 * block indices below KDALAB_MODEL_MAX_LAYERS joined by commas ("1",
 * "0,2"), into the bit mask *out (bit l: block l), as kdalab_model_config's
 * conv_off holds it. Whether the model has those blocks is
 * kdalab_model_size's to check. Errors: KDALAB_ENULL, KDALAB_EINVAL (an
 * empty spec or item, anything but digits and commas, an index of 64 or
 * more, one named twice).
 */
kdalab_status kdalab_model_parse_blocks(const char *spec, uint64_t *out);

/*
 * kdalab_model_format_blocks — the text kdalab_model_parse_blocks reads
 * back: the blocks of mask (bit l: block l) by index, ascending, joined by
 * commas ("1", "0,2"; "" for 0), into buf[cap].
 * KDALAB_MODEL_BLOCKS_TEXT bytes hold any mask. Errors: KDALAB_ENULL (buf),
 * KDALAB_ESIZE (cap too small: buf gets "" when cap > 0).
 */
#define KDALAB_MODEL_BLOCKS_TEXT 192 /* 10 one-digit, 54 two-digit, 63 commas, NUL */
kdalab_status kdalab_model_format_blocks(uint64_t mask, char *buf, size_t cap);

/* One parameter tensor: theta[offset .. offset + rows * cols), row-major. */
typedef struct {
    char name[40];  /* "embed", "blocks.0.norm1", "blocks.0.mixer.Wq",
                       "blocks.0.mlp.W1", ..., "norm_f", "lm_head"          */
    size_t offset;  /* into the flat parameter vector                        */
    size_t rows, cols; /* shape [rows, cols]; vectors have rows = 1          */
    int decay;      /* 1 for matrices (AdamW decays them), 0 for norms,      */
                    /* convolutions, A_log, dt_bias and bog                  */
} kdalab_model_tensor;

/*
 * kdalab_model_size — check cfg; *n_params gets the length of the flat
 * parameter vector theta, *n_tensors the number of tensors in it (either
 * pointer may be NULL). Tensors are laid out in the order: embed [V, D];
 * per block norm1 [D], the mixer's weights in kdalab_mixer_params' order
 * (those its kind, conv and gate use, shapes as there; Wog2 and bog last),
 * norm2 [D], mlp.W1 [D, F],
 * mlp.W3 [D, F], mlp.W2 [F, D]; norm_f [D]; lm_head [D, V].
 * Errors: KDALAB_ENULL (cfg), KDALAB_ESIZE (V, D, H, F zero, D not a multiple
 * of H, L outside 1 .. KDALAB_MODEL_MAX_LAYERS, gate_rank above D),
 * KDALAB_EINVAL (an unknown mixer kind, output gate or conv init; a
 * gate_rank with output gate none; conv_off with conv 0, with a bit at or
 * above L, or naming every block, which is conv 0), KDALAB_EOVERFLOW.
 */
kdalab_status kdalab_model_size(const kdalab_model_config *cfg, size_t *n_params,
                                size_t *n_tensors);

/* kdalab_model_tensor_at — tensor i (0 .. n_tensors - 1) of the layout.
 * Errors: those of kdalab_model_size, KDALAB_ENULL (t), KDALAB_EINVAL (i). */
kdalab_status kdalab_model_tensor_at(const kdalab_model_config *cfg, size_t i,
                                     kdalab_model_tensor *t);

/*
 * kdalab_model_init — fill theta [n_params] from seed (GSL's mt19937):
 * matrices N(0, 0.02^2) (fla's initializer_range); norms (and onorm) 1; the
 * low-rank output gate's bias bog 0 (fla's models zero biases); convolutions
 * U(-1/2, 1/2) (PyTorch's conv1d default for width 4) or, with conv_init
 * KDALAB_CONV_INIT_NORMAL, N(0, 0.02^2) (fla's models); and as fla's layers
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

/*
 * kdalab_model_logits_f64 — the model's forward alone: the logits of B
 * sequences of T tokens (the same computation kdalab_model_loss_f64 runs
 * before its cross-entropy, in one part on the calling thread).
 *   theta [n_params]; tokens [B, T]; logits [B, T, V] (written)
 * Each sequence starts from empty mixer states (position 0).
 * kdalab_hybrid_load's stack reproduces these logits token by token.
 * Errors: those of kdalab_model_size, KDALAB_ENULL, KDALAB_ESIZE (B or T
 * zero), KDALAB_EOVERFLOW, KDALAB_EDOMAIN (a token outside [0, V)),
 * KDALAB_ENONFINITE (theta), KDALAB_ENOMEM, a layer's error, KDALAB_ERANGE
 * (finite inputs gave a non-finite logit; the logits are written unless a
 * mixer stopped the pass).
 */
kdalab_status kdalab_model_logits_f64(const kdalab_model_config *cfg, const double *theta,
                                      size_t B, size_t T, const int32_t *tokens,
                                      double *logits);

/* float32 (lib/train/model_loss_f32.c, generated): the loss and gradient,
 * and the logits, with float32 parameters theta [n_params]
 * (kdalab_model_init writes float64: convert). */
kdalab_status kdalab_model_loss_f32(const kdalab_model_config *cfg, const float *theta,
                                    size_t B, size_t T, const int32_t *tokens,
                                    const int32_t *targets, float *loss, float *accuracy,
                                    float *grad);
kdalab_status kdalab_model_logits_f32(const kdalab_model_config *cfg, const float *theta,
                                      size_t B, size_t T, const int32_t *tokens, float *logits);

KDALAB_END_DECLS

#endif /* KDALAB_MODEL_H */
