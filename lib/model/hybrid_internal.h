/*
 * lib/model/hybrid_internal.h — what the files of the KDA + attention hybrid
 * stack share (not installed): the stack and layer structs, and the functions
 * one file defines for the others. The public API and every equation and
 * shape are in kdalab_hybrid.h.
 *
 * defines:  hybrid_layer, hybrid_gate, hybrid_block, hybrid_model,
 *           struct kdalab_hybrid
 * declares: kdalab__hybrid_kind_by_ratio (config.c);
 *           kdalab__hybrid_block_memory, kdalab__hybrid_check_layer (stack.c)
 *
 * A stack is one of two kinds, run by one forward: the chapter's stack of
 * KDA and attention mixing layers on a residual stream (config.c, stack.c:
 * `layers` holds its weights), or a trained model of lib/train
 * (kdalab_model_config: embedding, blocks of a mixer and an MLP, LM head;
 * trained.c: `model` holds its parameters). Either is L blocks
 * (hybrid_block) pointing into those weights; the chapter's layer is a
 * trained block without the convolution, SiLU, output norm and gate, and
 * MLP, with its own gate (lower_bound * sigmoid). Position, reset, cache
 * bytes and the state and cache accessors read the blocks alone.
 *
 * The files of lib/model/, by job:
 *   config.c    the chapter stack's configuration: default, check, kinds
 *   stack.c     a stack's memory: the chapter's built (zeroed or random),
 *               free, reset, accessors, cache bytes
 *   trained.c   a trained model's stack: its blocks from the parameter
 *               layout, load and save (the checkpoint format)
 *   forward.c   the one forward over the blocks, and the public prefill and
 *               decode of both kinds (rows to rows, tokens to logits)
 * RMSNorm and the L2 normalisation are the library's one each
 * (lib/train/layers.c, through train/train_internal.h).
 *
 * These functions are not static, so they would be visible to the linker, but
 * the library is built with -fvisibility=hidden and only declarations inside
 * KDALAB_BEGIN_DECLS of the public headers are exported.
 */
#ifndef KDALAB_HYBRID_INTERNAL_H
#define KDALAB_HYBRID_INTERNAL_H

#include <stddef.h>

#include "internal.h"
#include "kdalab.h"
#include "train/train_internal.h" /* the trained model's layout; RMSNorm, L2 norm */

/* Sizes used below: L layers (blocks), D = d_model, H heads, d = D / H
 * (K = V = d), F the MLP's hidden width. */

/* The chapter stack's weights of one layer, one allocation (stack.c). */
typedef struct {
    double *weights;           /* every matrix below points into this block     */
    double *norm;              /* [D] RMSNorm gain                              */
    double *wq, *wk, *wv, *wo; /* [D, D] each                                   */
    double *wg, *bg, *wbeta;   /* [D, D], [D], [D, H]; NULL for attention       */
} hybrid_layer;

/* How a linear mixer makes its log-decay g [T, H, g_width] from u. */
typedef enum {
    HYBRID_GATE_NONE = 0, /* no decay (linear attention, DeltaNet)                  */
    HYBRID_GATE_BOUNDED,  /* the chapter's: g = lower_bound * sigmoid(u Wg + bg)    */
    HYBRID_GATE_FLA       /* the trained mixers' (fla's): kdalab_kda_gate_f64 of    */
                          /* u Wa (per head) or (u Wg) Wg2 (per key), A_log, dt_bias */
} hybrid_gate;

/*
 * One block as the one forward (forward.c) runs it, whichever stack it
 * belongs to: x + mixer(norm1(x)), then, when the block has an MLP,
 * x + MLP(norm2(x)). Weights point into the stack's own storage; a step
 * whose weight is NULL is skipped:
 *   norm1         [D]        pre-norm gain; NULL: u = x
 *   wq, wk, wv    [D, D]     u W, then the convolution (conv[i] [4, D], over
 *                            the last rows in taps) and SiLU when silu
 *   attention                causal softmax over the KV cache
 *   linear        mech       q, k L2-normalised (eps l2_eps); beta =
 *                            sigmoid(u wbeta) [D, H] when the row has beta;
 *                            g by `gate`: BOUNDED wg [D, D], bg [D],
 *                            lower_bound; FLA wg [D, H] (per head) or wg
 *                            [D, d] and wg2 [d, D] (per key), alog, dtb [H];
 *                            o from the state (chunkwise or step by step)
 *   onorm         [d]        o = rmsnorm(o) per (t, head), times the output
 *                            gate act(u wog [, wog2, bog]) when wog (mc's gate)
 *   wo            [D, D]     x += o wo
 *   norm2, w1, w3 [D], [D, F], [D, F];  w2 [F, D]: the SwiGLU MLP (NULL w1: none)
 * Memory (owned by the block): a linear mixer's state [H, d, d], an
 * attention mixer's cache, the convolution's last 3 rows of u Wq, u Wk, u Wv
 * (taps [3, 3, D]; NULL without it).
 */
typedef struct {
    int attention;             /* 1: softmax attention; 0: the linear mechanism */
    kdalab_mechanism mech;     /* the linear mixer's row of the table           */
    const double *norm1, *wq, *wk, *wv, *wo;
    const double *conv[3];
    int silu;
    double l2_eps;
    const double *wbeta;
    hybrid_gate gate;
    double lower_bound;
    const double *wg, *wg2, *bg, *alog, *dtb;
    const double *onorm;
    kdalab_mixer_config mc;    /* the output gate (mc.gate, mc.gate_rank)       */
    const double *wog, *wog2, *bog;
    const double *norm2, *w1, *w3, *w2;
    double *state;             /* linear: [H, d, d]; NULL for attention         */
    size_t state_bytes;        /* bytes of state (0 for attention)              */
    kdalab_kv_cache *cache;    /* attention: k, v as attended; NULL otherwise   */
    double *taps;              /* [3, TRAIN_CONV_W - 1, D]; NULL without conv   */
} hybrid_block;

/* A trained model (lib/train's kdalab_model_config) as a stack. */
typedef struct {
    kdalab_model_config cfg;
    model_layout_t lay;        /* where each tensor lives in theta              */
    double *theta;             /* [n_params] the stack's own copy               */
} hybrid_model;

struct kdalab_hybrid {
    size_t L, D, H, dh, F;     /* blocks, width, heads, d = D / H, MLP width (0: none) */
    double scale;              /* resolved query scale                          */
    size_t position;           /* tokens consumed                               */
    hybrid_block *blocks;      /* [L] what the forward runs                     */
    /* the chapter's stack (NULL layers for a trained model's) */
    kdalab_hybrid_config cfg;  /* cfg.kinds points at kinds below               */
    kdalab_hybrid_kind *kinds; /* [L] resolved kinds                            */
    hybrid_layer *layers;      /* [L] the weights the blocks point into         */
    /* a trained model's stack (NULL for the chapter's) */
    hybrid_model *model;
};

/* ---- config.c ------------------------------------------------------------ */

/* The kind of layer `layer` under cfg's ratio N:M (cfg->kinds is not read;
 * cfg must have passed kdalab_hybrid_config_check, so N + M >= 1). */
kdalab_hybrid_kind kdalab__hybrid_kind_by_ratio(const kdalab_hybrid_config *cfg, size_t layer);

/* ---- stack.c ------------------------------------------------------------- */

/* The decode-time memory of block b, zeroed: a linear mixer's [H, d, d]
 * state or an attention mixer's empty cache, and with conv the taps
 * [3, TRAIN_CONV_W - 1, D]. 0 when out of memory (kdalab_hybrid_free frees
 * what was allocated). */
int kdalab__hybrid_block_memory(hybrid_block *b, size_t D, size_t H, int conv);

/* KDALAB_ENULL when s is NULL, KDALAB_EINVAL when layer >= L; `what` names
 * the caller in the message. */
kdalab_status kdalab__hybrid_check_layer(const kdalab_hybrid *s, size_t layer, const char *what);

#endif /* KDALAB_HYBRID_INTERNAL_H */
