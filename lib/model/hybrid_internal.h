/*
 * lib/model/hybrid_internal.h — what the files of the KDA + attention hybrid
 * stack share (not installed): the stack and layer structs, and the functions
 * one file defines for the others. The public API and every equation and
 * shape are in kdalab_hybrid.h.
 *
 * defines:  hybrid_layer, hybrid_block, hybrid_model, struct kdalab_hybrid,
 *           HYBRID_NORM_EPS
 * declares: kdalab__hybrid_kind_by_ratio (config.c); kdalab__hybrid_alloc,
 *           kdalab__hybrid_check_layer (stack.c); kdalab__hybrid_matmul,
 *           kdalab__hybrid_sigmoid (dense.c); kdalab__hybrid_model_free,
 *           kdalab__hybrid_model_reset, kdalab__hybrid_model_bytes (trained.c)
 *
 * A stack is one of two kinds: the chapter's stack of KDA and attention
 * mixing layers on a residual stream (config.c ... forward.c: `layers`), or
 * a trained model of lib/train (kdalab_model_config: embedding, blocks of a
 * mixer and an MLP, LM head) run token by token (trained.c,
 * trained_forward.c: `model`). Position, reset, cache bytes and the
 * state and cache accessors serve both.
 *
 * The files of lib/model/, by job:
 *   config.c           the chapter stack's configuration: default, check, kinds
 *   stack.c            a stack's memory: build (zeroed or random), free, reset,
 *                      accessors, cache bytes
 *   dense.c            row-vector operations: y = x W, sigmoid
 *   forward.c          the chapter stack's projections and forward pass
 *   trained.c          a trained model's stack: build, load and save
 *                      (the checkpoint format), its memory
 *   trained_forward.c  a trained model's prefill and decode, tokens to logits
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

/* The chapter stack's RMSNorm eps (as the training model's). */
#define HYBRID_NORM_EPS 1e-6

/* Sizes used below: L layers, d = d_model, H heads, dh = d / H (K = V = dh). */

/* One mixing layer: its weights (one allocation) and its decode-time memory. */
typedef struct {
    kdalab_hybrid_kind kind;
    double *weights;           /* every matrix below points into this block     */
    double *norm;              /* [d] RMSNorm gain                              */
    double *wq, *wk, *wv, *wo; /* [d, d] each                                   */
    double *wg, *bg, *wbeta;   /* [d, d], [d], [d, H]; NULL for attention       */
    double *state;             /* KDA: [H, dh, dh]; NULL for attention          */
    size_t state_bytes;        /* bytes allocated for state (0 for attention)   */
    kdalab_kv_cache *cache;    /* attention: the KV cache; NULL for KDA         */
} hybrid_layer;

/* One block of a trained model's stack: its decode-time memory. */
typedef struct {
    double *state;             /* linear mixers: [H, d, d] (d = D / H); else NULL */
    size_t state_bytes;        /* bytes of state (0 for attention)              */
    kdalab_kv_cache *cache;    /* attention: the KV cache of q, k, v after the  */
                               /* convolution and SiLU; NULL otherwise          */
    double *taps;              /* conv on: [3, TRAIN_CONV_W - 1, D] the last    */
                               /* rows of x Wq, x Wk, x Wv (zeros at position   */
                               /* 0); NULL with conv off                        */
} hybrid_block;

/* A trained model (lib/train's kdalab_model_config) as a stack. */
typedef struct {
    kdalab_model_config cfg;
    model_layout_t lay;        /* where each tensor lives in theta              */
    double *theta;             /* [n_params] the stack's own copy               */
    hybrid_block *blocks;      /* [L]                                           */
} hybrid_model;

struct kdalab_hybrid {
    kdalab_hybrid_config cfg;  /* cfg.kinds points at kinds below               */
    kdalab_hybrid_kind *kinds; /* [L] resolved kinds                            */
    size_t dh;                 /* d_head = d_model / H                          */
    double scale;              /* resolved query scale                          */
    size_t position;           /* tokens consumed                               */
    hybrid_layer *layers;      /* [L]; NULL for a trained model's stack         */
    hybrid_model *model;       /* a trained model's stack; NULL for the chapter's */
};

/* ---- config.c ------------------------------------------------------------ */

/* The kind of layer `layer` under cfg's ratio N:M (cfg->kinds is not read;
 * cfg must have passed kdalab_hybrid_config_check, so N + M >= 1). */
kdalab_hybrid_kind kdalab__hybrid_kind_by_ratio(const kdalab_hybrid_config *cfg, size_t layer);

/* ---- stack.c ------------------------------------------------------------- */

/* A stack for cfg with zeroed weights (gains 1), empty caches and zero
 * states, in *out. Errors: those of kdalab_hybrid_config_check, KDALAB_ENULL
 * (out), KDALAB_ENOMEM. */
kdalab_status kdalab__hybrid_alloc(const kdalab_hybrid_config *cfg, kdalab_hybrid **out);

/* KDALAB_ENULL when s is NULL, KDALAB_EINVAL when layer >= L (the blocks of
 * a trained model's stack); `what` names the caller in the message. */
kdalab_status kdalab__hybrid_check_layer(const kdalab_hybrid *s, size_t layer, const char *what);

/* ---- trained.c ----------------------------------------------------------- */

/* Free a trained model's stack memory (NULL allowed). */
void kdalab__hybrid_model_free(hybrid_model *m);

/* Zero every state and convolution history, empty every KV cache. */
void kdalab__hybrid_model_reset(hybrid_model *m);

/* The decode-time bytes of block l: the state's, or the KV cache's (the
 * convolution's few rows are not counted). */
size_t kdalab__hybrid_model_bytes(const hybrid_model *m, size_t l);

/* ---- dense.c ------------------------------------------------------------- */

/* out = x W, or out += x W when accumulate (no checks).
 *   x    [T, n_in]
 *   W    [n_in, n_out]  row-major
 *   out  [T, n_out]     must not overlap x or W */
void kdalab__hybrid_matmul(size_t T, size_t n_in, size_t n_out, const double *x, const double *W,
                           double *out, int accumulate);

/* 1 / (1 + exp(-z)). */
double kdalab__hybrid_sigmoid(double z);

#endif /* KDALAB_HYBRID_INTERNAL_H */
