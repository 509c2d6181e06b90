/*
 * lib/model/forward.c — the computation of the hybrid stack: each layer's
 * projections, and the forward pass over all layers for T tokens at once
 * (prefill) or for one token (decode). The equations and shapes are in
 * kdalab_hybrid.h.
 *
 * defines: kdalab_hybrid_layer_project, kdalab_hybrid_prefill,
 *          kdalab_hybrid_decode (public)
 *
 * The mixing kernels are the library's own: kdalab_chunk_f64 (prefill) and
 * kdalab_step_f64 (decode) for KDA, kdalab_attention_f64 and the
 * kdalab_kv_cache_* functions for attention. This file only adds the
 * RMSNorm, the projections, the gate, beta, the L2 norm of q and k, the
 * output projection and the residual add, and keeps each layer's memory
 * (KDA state, KV cache) up to date.
 *
 * Sizes: d = d_model, H heads, dh = d / H; a [T, d] array is also [T, H, dh].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid_internal.h"

/* ---- the projections of one layer ---------------------------------------- */

/* The mixer inputs of layer ly for T rows of x (no checks); any output may be
 * NULL when not wanted, and g, beta are not written for attention layers.
 *   x        [T, d]     the layer's residual input
 *   scratch  [T, d]     holds RMSNorm(x) when the stack has rms_norm (else unused)
 *   q, k, v  [T, d]     q and k L2-normalised per (t, head) for KDA
 *   g        [T, d]     KDA log-decay, lower_bound * sigmoid(u W_g + b_g)
 *   beta     [T, H]     KDA write strength, sigmoid(u W_beta) */
static void project(const kdalab_hybrid *s, const hybrid_layer *ly, size_t T, const double *x,
                    double *scratch, double *q, double *k, double *v, double *g, double *beta)
{
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, dh = s->dh;
    int kda = ly->kind == KDALAB_HYBRID_KDA;
    if (s->cfg.rms_norm) {
        kdalab__train_rmsnorm_fwd_f64(T, d, HYBRID_NORM_EPS, x, ly->norm, scratch);
        x = scratch;
    }
    if (q) {
        kdalab__hybrid_matmul(T, d, d, x, ly->wq, q, 0);
        if (kda)
            kdalab__train_l2norm_fwd_f64(T * H, dh, 0, q, q);
    }
    if (k) {
        kdalab__hybrid_matmul(T, d, d, x, ly->wk, k, 0);
        if (kda)
            kdalab__train_l2norm_fwd_f64(T * H, dh, 0, k, k);
    }
    if (v)
        kdalab__hybrid_matmul(T, d, d, x, ly->wv, v, 0);
    if (!kda)
        return;
    if (g) {
        kdalab__hybrid_matmul(T, d, d, x, ly->wg, g, 0);
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < d; c++)
                g[t * d + c] =
                    s->cfg.gate_lower_bound * kdalab__hybrid_sigmoid(g[t * d + c] + ly->bg[c]);
    }
    if (beta) {
        kdalab__hybrid_matmul(T, d, H, x, ly->wbeta, beta, 0);
        for (size_t i = 0; i < T * H; i++)
            beta[i] = kdalab__hybrid_sigmoid(beta[i]);
    }
}

kdalab_status kdalab_hybrid_layer_project(const kdalab_hybrid *s, size_t layer, size_t T,
                                          const double *x, double *q, double *k, double *v,
                                          double *g, double *beta)
{
    kdalab_clear_error();
    kdalab_status st = kdalab__hybrid_check_layer(s, layer, "hybrid_layer_project");
    if (st != KDALAB_OK)
        return st;
    if (s->model)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_layer_project: a trained model's stack has "
                           "no chapter layers");
    if (T == 0)
        return KDALAB_OK;
    if (!x)
        return kdalab_fail(KDALAB_ENULL, "hybrid_layer_project: x is NULL");
    size_t n;
    if (!kdalab_mul_size(T, s->cfg.d_model, &n))
        return kdalab_fail(KDALAB_EOVERFLOW, "hybrid_layer_project: T %zu overflows", T);
    st = kdalab_check_finite_f64("hybrid_layer_project: x", x, n);
    if (st != KDALAB_OK)
        return st;
    double *scratch = NULL;
    if (s->cfg.rms_norm && !(scratch = malloc(n * sizeof(double))))
        return kdalab_fail(KDALAB_ENOMEM, "hybrid_layer_project: out of memory");
    project(s, &s->layers[layer], T, x, scratch, q, k, v, g, beta);
    free(scratch);
    kdalab_clear_error();
    return KDALAB_OK;
}

/* ---- work buffers for T tokens ------------------------------------------- */

typedef struct {
    double *cur;               /* [T, d] the residual stream                      */
    double *u;                 /* [T, d] RMSNorm(cur), project's scratch          */
    double *q, *k, *v, *g, *o; /* [T, d] a layer's mixer inputs and output        */
    double *beta;              /* [T, H]                                          */
    double *ht;                /* [H, dh, dh] the final state of kdalab_chunk_f64 */
} work;

static void work_free(work *w)
{
    free(w->q);
    free(w->k);
    free(w->v);
    free(w->g);
    free(w->o);
    free(w->beta);
    free(w->ht);
    free(w->cur);
    free(w->u);
}

static kdalab_status work_alloc(const kdalab_hybrid *s, size_t T, work *w)
{
    memset(w, 0, sizeof *w);
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, n, nb;
    if (!kdalab_mul_size(T, d, &n) || !kdalab_mul_size(n, sizeof(double), &nb))
        return kdalab_fail(KDALAB_EOVERFLOW, "hybrid: T %zu tokens of width %zu overflow", T, d);
    w->q = malloc(n * sizeof(double));
    w->k = malloc(n * sizeof(double));
    w->v = malloc(n * sizeof(double));
    w->g = malloc(n * sizeof(double));
    w->o = malloc(n * sizeof(double));
    w->cur = malloc(n * sizeof(double));
    w->u = malloc(n * sizeof(double));
    w->beta = malloc(T * H * sizeof(double)); /* T*H <= T*d */
    w->ht = malloc(H * s->dh * s->dh * sizeof(double));
    if (!w->q || !w->k || !w->v || !w->g || !w->o || !w->cur || !w->u || !w->beta || !w->ht) {
        work_free(w);
        return kdalab_fail(KDALAB_ENOMEM, "hybrid: out of memory for %zu tokens", T);
    }
    return KDALAB_OK;
}

/* ---- one layer's mixer --------------------------------------------------- */

/* One attention layer over T new tokens whose k, v (and, when want_out, q)
 * are in w: append k, v to the cache and, when want_out, write the outputs
 * into w->o. A fresh cache with T > 1 takes the batch form. */
static kdalab_status attention_layer(const kdalab_hybrid *s, hybrid_layer *ly, size_t T, work *w,
                                     int want_out)
{
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, dh = s->dh;
    kdalab_status st;
    if (want_out && kdalab_kv_cache_tokens(ly->cache) == 0 && T > 1) {
        /* Fresh cache: the batch form, then fill the cache. */
        kdalab_dims dims = {1, T, H, dh, dh};
        st = kdalab_attention_f64(&dims, s->scale, w->q, w->k, w->v, w->o);
        if (st != KDALAB_OK)
            return st;
        for (size_t t = 0; t < T; t++) {
            st = kdalab_kv_cache_append(ly->cache, w->k + t * d, w->v + t * d);
            if (st != KDALAB_OK)
                return st;
        }
        return KDALAB_OK;
    }
    /* Continuing (or decode): token t attends over the cache and tokens <= t. */
    for (size_t t = 0; t < T; t++) {
        st = kdalab_kv_cache_append(ly->cache, w->k + t * d, w->v + t * d);
        if (st != KDALAB_OK)
            return st;
        if (want_out) {
            st = kdalab_kv_cache_attend(ly->cache, s->scale, w->q + t * d, w->o + t * d);
            if (st != KDALAB_OK)
                return st;
        }
    }
    return KDALAB_OK;
}

/* One KDA layer over T tokens whose q, k, v, g, beta are in w, from and into
 * the layer's state; outputs into w->o. by_step: kdalab_step_f64 token by
 * token and head by head (decode), else one kdalab_chunk_f64 call (prefill,
 * default options) whose final state w->ht then replaces the layer's. */
static kdalab_status kda_layer(const kdalab_hybrid *s, hybrid_layer *ly, size_t T, work *w,
                               int by_step)
{
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, dh = s->dh;
    kdalab_status st;
    if (by_step) {
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < H; h++) {
                size_t r = t * d + h * dh;
                st = kdalab_step_f64(KDALAB_KDA, dh, dh, s->scale, w->q + r, w->k + r, w->v + r,
                                     w->g + r, w->beta[t * H + h], ly->state + h * dh * dh,
                                     w->o + r);
                if (st != KDALAB_OK)
                    return st;
            }
        return KDALAB_OK;
    }
    kdalab_dims dims = {1, T, H, dh, dh};
    st = kdalab_chunk_f64(&dims, KDALAB_KDA, s->scale, w->q, w->k, w->v, w->g, w->beta,
                          ly->state, w->o, w->ht, NULL, NULL);
    if (st != KDALAB_OK)
        return st;
    memcpy(ly->state, w->ht, ly->state_bytes);
    return KDALAB_OK;
}

/* ---- the forward pass ---------------------------------------------------- */

/* T tokens through every layer, shared by prefill (by_step = 0) and decode
 * (by_step = 1); `what` names the caller in messages.
 *   x             [T, d]     the residual-stream input
 *   y             [T, d]     the stream after the last layer, or NULL (then a
 *                            final attention layer only appends to its cache)
 *   layer_inputs  [L, T, d]  each layer's residual input, or NULL */
static kdalab_status forward(kdalab_hybrid *s, size_t T, const double *x, double *y,
                             double *layer_inputs, int by_step, const char *what)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "%s: stack is NULL", what);
    if (s->model)
        return kdalab_fail(KDALAB_EINVAL, "%s: a trained model's stack takes tokens "
                           "(kdalab_hybrid_prefill_tokens, kdalab_hybrid_decode_token)", what);
    if (T == 0)
        return KDALAB_OK;
    if (!x)
        return kdalab_fail(KDALAB_ENULL, "%s: x is NULL", what);
    size_t L = s->cfg.n_layers, d = s->cfg.d_model, n;
    if (!kdalab_mul_size(T, d, &n) || !kdalab_mul_size(n, L, &(size_t){0}))
        return kdalab_fail(KDALAB_EOVERFLOW, "%s: T %zu overflows", what, T);
    char name[64];
    snprintf(name, sizeof name, "%s: x", what);
    kdalab_status st = kdalab_check_finite_f64(name, x, n);
    if (st != KDALAB_OK)
        return st;
    work w;
    st = work_alloc(s, T, &w);
    if (st != KDALAB_OK)
        return st;
    memcpy(w.cur, x, n * sizeof(double));
    for (size_t l = 0; l < L; l++) {
        hybrid_layer *ly = &s->layers[l];
        int want_out = (l + 1 < L) || y != NULL;
        if (layer_inputs)
            memcpy(layer_inputs + l * n, w.cur, n * sizeof(double));
        if (ly->kind == KDALAB_HYBRID_KDA) {
            project(s, ly, T, w.cur, w.u, w.q, w.k, w.v, w.g, w.beta);
            st = kda_layer(s, ly, T, &w, by_step);
        } else {
            project(s, ly, T, w.cur, w.u, want_out ? w.q : NULL, w.k, w.v, NULL, NULL);
            st = attention_layer(s, ly, T, &w, want_out);
        }
        if (st != KDALAB_OK) {
            work_free(&w);
            return st;
        }
        if (want_out)
            kdalab__hybrid_matmul(T, d, d, w.o, ly->wo, w.cur, 1); /* residual: cur += o W_o */
    }
    if (y)
        memcpy(y, w.cur, n * sizeof(double));
    work_free(&w);
    s->position += T;
    /* the residual stream can still overflow between layers */
    return y ? kdalab_check_outputs_f64(what, y, n, NULL, 0, NULL, NULL) : KDALAB_OK;
}

kdalab_status kdalab_hybrid_prefill(kdalab_hybrid *s, size_t T, const double *x, double *y,
                                    double *layer_inputs)
{
    kdalab_clear_error();
    return forward(s, T, x, y, layer_inputs, 0, "hybrid_prefill");
}

kdalab_status kdalab_hybrid_decode(kdalab_hybrid *s, const double *x, double *y,
                                   double *layer_inputs)
{
    kdalab_clear_error();
    if (!y)
        return kdalab_fail(KDALAB_ENULL, "hybrid_decode: y is NULL");
    return forward(s, 1, x, y, layer_inputs, 1, "hybrid_decode");
}
