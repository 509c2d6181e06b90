/*
 * lib/model/hybrid_internal.h — what the files of the KDA + attention hybrid
 * stack share (not installed): the stack and layer structs, and the functions
 * one file defines for the others. The public API and every equation and
 * shape are in kdalab_hybrid.h.
 *
 * defines:  hybrid_layer, struct kdalab_hybrid
 * declares: kdalab__hybrid_kind_by_ratio (config.c); kdalab__hybrid_alloc,
 *           kdalab__hybrid_check_layer (stack.c); kdalab__hybrid_matmul,
 *           kdalab__hybrid_rms_norm, kdalab__hybrid_l2_normalise,
 *           kdalab__hybrid_sigmoid (dense.c)
 *
 * The files of lib/model/, by job:
 *   config.c       the configuration: default, check, kind of each layer
 *   stack.c        a stack's memory: build (zeroed or random), free, reset,
 *                  accessors, cache bytes
 *   weights_npy.c  a stack's weights from and to .npy files
 *   dense.c        row-vector operations: y = x W, RMSNorm, L2 norm, sigmoid
 *   forward.c      the layer projections and the forward pass (prefill, decode)
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

struct kdalab_hybrid {
    kdalab_hybrid_config cfg;  /* cfg.kinds points at kinds below               */
    kdalab_hybrid_kind *kinds; /* [L] resolved kinds                            */
    size_t dh;                 /* d_head = d_model / H                          */
    double scale;              /* resolved query scale                          */
    size_t position;           /* tokens consumed                               */
    hybrid_layer *layers;      /* [L]                                           */
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

/* KDALAB_ENULL when s is NULL, KDALAB_EINVAL when layer >= L; `what` names
 * the caller in the message. */
kdalab_status kdalab__hybrid_check_layer(const kdalab_hybrid *s, size_t layer, const char *what);

/* ---- dense.c ------------------------------------------------------------- */

/* out = x W, or out += x W when accumulate (no checks).
 *   x    [T, n_in]
 *   W    [n_in, n_out]  row-major
 *   out  [T, n_out]     must not overlap x or W */
void kdalab__hybrid_matmul(size_t T, size_t n_in, size_t n_out, const double *x, const double *W,
                           double *out, int accumulate);

/* u = RMSNorm(x) with gain w, row by row: x / sqrt(mean(x^2) + 1e-6) * w.
 *   x  [T, d]
 *   w  [d]
 *   u  [T, d] */
void kdalab__hybrid_rms_norm(size_t T, size_t d, const double *x, const double *w, double *u);

/* Scale each row of x to unit L2 norm, in place (zero rows stay zero).
 *   x  [n, m] */
void kdalab__hybrid_l2_normalise(double *x, size_t n, size_t m);

/* 1 / (1 + exp(-z)). */
double kdalab__hybrid_sigmoid(double z);

#endif /* KDALAB_HYBRID_INTERNAL_H */
