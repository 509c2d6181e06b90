/*
 * lib/model/forward.c — the one forward of a hybrid stack, whichever kind:
 * T rows of the residual stream through every block, from and into each
 * block's memory (prefill: the chunkwise form; decode: the recurrent step),
 * and the public entry points of both kinds: the chapter's stack takes and
 * gives residual rows, a trained model's takes tokens (its embedding) and
 * gives logits (its final RMSNorm and LM head). The equations and shapes
 * are in kdalab_hybrid.h; a block's steps in hybrid_internal.h.
 *
 *   per block:  u = rmsnorm(x, norm1)                       (or x)
 *               a = u W  (Wq, Wk, Wv); the convolution over the block's last
 *                   3 rows of a and these; SiLU           (when the block has them)
 *               attention:  append k, v to the KV cache, o = attend(q)
 *               linear:     q, k L2-normalised; beta, the gate g; o from the
 *                           block's state (kdalab_chunk_f64 from it, its final
 *                           state kept; or kdalab_step_f64 per head);
 *                           o = rmsnorm(o, onorm) * act(z)   (when it has them)
 *               x = x + o Wo;  x = x + (silu(h W1) * (h W3)) W2,
 *               h = rmsnorm(x, norm2)                      (when it has an MLP)
 *
 * The kernels are the library's own: kdalab_chunk_f64 and kdalab_step_f64
 * for the linear mechanisms, kdalab_attention_f64 and the kdalab_kv_cache_*
 * functions for attention, lib/train's layers for the rest. Training's
 * forward (lib/train/model_loss.c) is batched and keeps what its backward
 * needs; this one keeps decode-time memory, and equals it to ~1e-15
 * (tests/test_hybrid_trained.c).
 *
 * defines: kdalab_hybrid_layer_project, kdalab_hybrid_prefill,
 *          kdalab_hybrid_decode, kdalab_hybrid_prefill_tokens,
 *          kdalab_hybrid_decode_token (public)
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid_internal.h"

#define TAPS (TRAIN_CONV_W - 1) /* rows of history the convolution reads */

/* ---- work buffers for T tokens ------------------------------------------- */

/* Each [T, D] unless said; a step no block of the stack takes gets none. */
typedef struct {
    double *x, *y, *u;   /* the stream, the stream after the mixer (with an MLP),  */
                         /* a pre-norm's output                                     */
    double *a[3];        /* u Wq, u Wk, u Wv                                        */
    double *cin, *cout;  /* [TAPS + T, D] the convolution over history and a        */
    double *s[3];        /* q, k, v after the convolution and SiLU                  */
    double *beta;        /* [T, H]                                                  */
    double *zf, *zg, *g; /* [T, d] (u Wg); the gate's input; the log-decay          */
    double *o, *on, *so; /* the mechanism's output, its norm, the output gate       */
    double *zo, *zr;     /* the gate's input z; [T, r <= D] u Wog (rank r)          */
    double *ht;          /* [H, d, d] the final state of kdalab_chunk_f64           */
    double *fa, *fb, *fu;/* [T, F] the MLP                                          */
} work;

#define WORK_ARRAYS(w)                                                                        \
    {&(w)->x,  &(w)->y,  &(w)->u,  &(w)->a[0], &(w)->a[1], &(w)->a[2], &(w)->cin, &(w)->cout, \
     &(w)->s[0], &(w)->s[1], &(w)->s[2], &(w)->beta, &(w)->zf,                              \
     &(w)->zg, &(w)->g,  &(w)->o,  &(w)->on, &(w)->so, &(w)->zo, &(w)->zr, &(w)->ht,        \
     &(w)->fa, &(w)->fb, &(w)->fu}

static void work_free(work *w)
{
    double **all[] = WORK_ARRAYS(w);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(*all[i]);
}

/* Buffers for T tokens of s's blocks (T * D and T * F checked by the caller
 * not to overflow a size_t in bytes). KDALAB_ENOMEM. */
static kdalab_status work_new(const kdalab_hybrid *s, size_t T, work *w, const char *what)
{
    memset(w, 0, sizeof *w);
    int norm = 0, conv = 0, silu = 0, linear = 0, fla = 0, onorm = 0, gate = 0, mlp = 0;
    for (size_t l = 0; l < s->L; l++) {
        const hybrid_block *b = &s->blocks[l];
        norm |= b->norm1 != NULL;
        conv |= b->conv[0] != NULL;
        silu |= b->silu;
        linear |= !b->attention;
        fla |= b->gate == HYBRID_GATE_FLA;
        onorm |= b->onorm != NULL;
        gate |= b->wog != NULL;
        mlp |= b->w1 != NULL;
    }
    const size_t D = s->D, TD = T * D, nb = sizeof(double), F = mlp ? T * s->F : 0;
    /* the sizes in doubles, in WORK_ARRAYS' order (0: not needed) */
    const size_t n[] = {TD, mlp ? TD : 0, norm || mlp ? TD : 0, TD, TD, TD,
                        conv ? (TAPS + T) * D : 0, conv ? (TAPS + T) * D : 0, silu ? TD : 0,
                        silu ? TD : 0, silu ? TD : 0, linear ? T * s->H : 0,
                        fla ? T * s->dh : 0, fla ? TD : 0, linear ? TD : 0, TD,
                        onorm ? TD : 0, gate ? TD : 0, gate ? TD : 0, gate ? TD : 0,
                        linear ? D * s->dh : 0, F, F, F};
    double **all[] = WORK_ARRAYS(w);
    int ok = 1;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ok &= !n[i] || (*all[i] = malloc(n[i] * nb)) != NULL;
    if (ok)
        return KDALAB_OK;
    work_free(w);
    return kdalab_fail(KDALAB_ENOMEM, "%s: out of memory for %zu tokens", what, T);
}

/* ---- one block's steps --------------------------------------------------- */

/* q, k, v of block b for T rows u [T, D] into out[0..2]: u W, the
 * convolution over the block's history (which moves on by T rows), SiLU.
 * want_q == 0 skips q (only without a convolution, whose history q's rows
 * are part of). */
static void qkv(const kdalab_hybrid *s, const hybrid_block *b, size_t T, const double *u,
                work *w, int want_q, double *out[3])
{
    const size_t D = s->D;
    const double *W[3] = {b->wq, b->wk, b->wv};
    for (int i = 0; i < 3; i++) {
        out[i] = NULL;
        if (i == 0 && !want_q && !b->conv[0])
            continue;
        kdalab__train_mm_f64(T, D, D, u, W[i], w->a[i], 0);
        double *c = w->a[i];
        if (b->conv[i]) {
            double *hist = b->taps + (size_t)i * TAPS * D;
            memcpy(w->cin, hist, TAPS * D * sizeof(double));
            memcpy(w->cin + TAPS * D, w->a[i], T * D * sizeof(double));
            kdalab__train_short_conv_fwd_f64(1, TAPS + T, D, TRAIN_CONV_W, w->cin, b->conv[i],
                                             w->cout);
            memcpy(hist, w->cin + T * D, TAPS * D * sizeof(double)); /* the last rows */
            c = w->cout + TAPS * D;
        }
        if (b->silu) {
            kdalab__train_silu_fwd_f64(T * D, c, w->s[i]);
            c = w->s[i];
        } else if (b->conv[i]) { /* cout is the next tensor's */
            memcpy(w->a[i], c, T * D * sizeof(double));
            c = w->a[i];
        }
        out[i] = c;
    }
}

/* A linear mixer's beta [T, H] (when its row has one) and log-decay g
 * [T, H, g_width] (when it has a decay) from u [T, D]; w holds the fla
 * gate's intermediates (NULL allowed for the other gates). */
static kdalab_status beta_and_gate(const kdalab_hybrid *s, const hybrid_block *b, size_t T,
                                   const double *u, work *w, double *beta, double *g)
{
    const size_t D = s->D, H = s->H, d = s->dh;
    if (beta && b->wbeta) {
        kdalab__train_mm_f64(T, D, H, u, b->wbeta, beta, 0);
        for (size_t r = 0; r < T * H; r++)
            beta[r] = train_sigmoid_f64(beta[r]);
    }
    if (!g || b->gate == HYBRID_GATE_NONE)
        return KDALAB_OK;
    if (b->gate == HYBRID_GATE_BOUNDED) { /* the chapter's: lower_bound * sigmoid(u Wg + bg) */
        kdalab__train_mm_f64(T, D, D, u, b->wg, g, 0);
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < D; c++)
                g[t * D + c] = b->lower_bound * train_sigmoid_f64(g[t * D + c] + b->bg[c]);
        return KDALAB_OK;
    }
    const size_t gw = kdalab_mechanism_g_width(b->mech, d); /* fla's gate */
    if (!b->wg2) { /* per head: u Wa */
        kdalab__train_mm_f64(T, D, H, u, b->wg, w->zg, 0);
    } else {       /* per key: (u Wg) Wg2 */
        kdalab__train_mm_f64(T, D, d, u, b->wg, w->zf, 0);
        kdalab__train_mm_f64(T, d, D, w->zf, b->wg2, w->zg, 0);
    }
    return kdalab_kda_gate_f64(T, H, gw, w->zg, b->alog, b->dtb, g);
}

/* The linear mechanism of block b on q, k, v (q, k L2-normalised in place)
 * from its state: w->o [T, D]. */
static kdalab_status linear(const kdalab_hybrid *s, hybrid_block *b, size_t T, const double *u,
                            double *const in[3], work *w, int by_step)
{
    const size_t D = s->D, H = s->H, d = s->dh;
    const size_t gw = kdalab_mechanism_g_width(b->mech, d);
    kdalab__train_l2norm_fwd_f64(T * H, d, b->l2_eps, in[0], in[0]);
    kdalab__train_l2norm_fwd_f64(T * H, d, b->l2_eps, in[1], in[1]);
    const double *beta = b->wbeta ? w->beta : NULL, *g = gw ? w->g : NULL;
    kdalab_status st = beta_and_gate(s, b, T, u, w, w->beta, w->g);
    if (st == KDALAB_OK && by_step) {
        for (size_t t = 0; t < T && st == KDALAB_OK; t++)
            for (size_t h = 0; h < H && st == KDALAB_OK; h++) {
                const size_t r = t * D + h * d, row = t * H + h;
                st = kdalab_step_f64(b->mech, d, d, s->scale, in[0] + r, in[1] + r, in[2] + r,
                                     g ? g + row * gw : NULL, beta ? beta[row] : 0,
                                     b->state + h * d * d, w->o + r);
            }
    } else if (st == KDALAB_OK) {
        const kdalab_dims dims = {1, T, H, d, d};
        st = kdalab_chunk_f64(&dims, b->mech, s->scale, in[0], in[1], in[2], g, beta, b->state,
                              w->o, w->ht, NULL, NULL);
        if (st == KDALAB_OK)
            memcpy(b->state, w->ht, b->state_bytes);
    }
    return st;
}

/* Attention over T new tokens: append k, v to the cache and, when q is not
 * NULL, write the outputs into o. A fresh cache with T > 1 takes the batch
 * form (kdalab_attention_f64), the same causal attention. */
static kdalab_status attention(const kdalab_hybrid *s, hybrid_block *b, size_t T,
                               double *const in[3], double *o)
{
    const size_t D = s->D, H = s->H, d = s->dh;
    kdalab_status st = KDALAB_OK;
    if (in[0] && kdalab_kv_cache_tokens(b->cache) == 0 && T > 1) {
        const kdalab_dims dims = {1, T, H, d, d};
        st = kdalab_attention_f64(&dims, s->scale, in[0], in[1], in[2], o);
        for (size_t t = 0; t < T && st == KDALAB_OK; t++)
            st = kdalab_kv_cache_append(b->cache, in[1] + t * D, in[2] + t * D);
        return st;
    }
    for (size_t t = 0; t < T && st == KDALAB_OK; t++) {
        st = kdalab_kv_cache_append(b->cache, in[1] + t * D, in[2] + t * D);
        if (st == KDALAB_OK && in[0])
            st = kdalab_kv_cache_attend(b->cache, s->scale, in[0] + t * D, o + t * D);
    }
    return st;
}

/* Block l on w->x [T, D]: its memory moves on; when want_out, w->x becomes
 * the block's output (x + mixer, then + MLP). */
static kdalab_status block(kdalab_hybrid *s, size_t l, size_t T, work *w, int by_step,
                           int want_out)
{
    hybrid_block *b = &s->blocks[l];
    const size_t D = s->D, H = s->H, d = s->dh;
    const double *u = w->x;
    if (b->norm1) {
        kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, w->x, b->norm1, w->u);
        u = w->u;
    }
    double *in[3];
    qkv(s, b, T, u, w, want_out || !b->attention, in);
    if (b->attention && !want_out) /* q made only for its convolution's history */
        in[0] = NULL;
    kdalab_status st = b->attention ? attention(s, b, T, in, w->o)
                                    : linear(s, b, T, u, in, w, by_step);
    if (st != KDALAB_OK || !want_out)
        return st;
    const double *o = w->o;
    if (b->onorm) { /* the gated output norm: rmsnorm(o, onorm) * act(z), per (t, head) */
        kdalab__train_rmsnorm_fwd_f64(T * H, d, TRAIN_ONORM_EPS, w->o, b->onorm, w->on);
        if (b->wog) {
            kdalab__train_outgate_fwd_f64(&b->mc, T, u, b->wog, b->wog2, b->bog, w->zr, w->zo,
                                          w->so);
            for (size_t i = 0; i < T * D; i++)
                w->on[i] *= w->so[i];
        }
        o = w->on;
    }
    if (!b->w1) {
        kdalab__train_mm_f64(T, D, D, o, b->wo, w->x, 1); /* x = x + o Wo */
        return KDALAB_OK;
    }
    memcpy(w->y, w->x, T * D * sizeof(double));
    kdalab__train_mm_f64(T, D, D, o, b->wo, w->y, 1); /* y = x + o Wo */
    // x = y + (silu(h W1) * (h W3)) W2, h = rmsnorm(y, norm2)
    const size_t F = s->F;
    kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, w->y, b->norm2, w->u);
    kdalab__train_mm_f64(T, D, F, w->u, b->w1, w->fa, 0);
    kdalab__train_mm_f64(T, D, F, w->u, b->w3, w->fb, 0);
    kdalab__train_swiglu_fwd_f64(T * F, w->fa, w->fb, w->fu);
    memcpy(w->x, w->y, T * D * sizeof(double));
    kdalab__train_mm_f64(T, F, D, w->fu, b->w2, w->x, 1);
    return KDALAB_OK;
}

/* A kernel refusing a non-finite input the stack made from finite inputs
 * and weights means an intermediate overflowed. */
static kdalab_status overflowed(kdalab_status st, size_t l)
{
    if (st == KDALAB_ENONFINITE)
        return kdalab_fail(KDALAB_ERANGE, "hybrid: layer %zu: an intermediate overflowed (%s)",
                           l, kdalab_last_error());
    return st;
}

/* The T rows in w->x through every block (w->x then holds the stream after
 * the last block, when want_last); the position moves on by T. */
static kdalab_status run_blocks(kdalab_hybrid *s, size_t T, double *layer_inputs, int want_last,
                                int by_step, work *w)
{
    const size_t n = T * s->D;
    kdalab_status st = KDALAB_OK;
    for (size_t l = 0; l < s->L && st == KDALAB_OK; l++) {
        if (layer_inputs)
            memcpy(layer_inputs + l * n, w->x, n * sizeof(double));
        st = overflowed(block(s, l, T, w, by_step, l + 1 < s->L || want_last), l);
    }
    if (st == KDALAB_OK)
        s->position += T;
    return st;
}

/* The chapter's forward: T rows x [T, D] through every block (by_step: the
 * recurrent step, else the chunkwise form); y [T, D] the stream after the
 * last block, or NULL (then the last block only updates its memory);
 * layer_inputs [L, T, D] each block's input, or NULL. */
static kdalab_status rows_forward(kdalab_hybrid *s, size_t T, const double *x, double *y,
                                  double *layer_inputs, int by_step, const char *what)
{
    work w;
    kdalab_status st = work_new(s, T, &w, what);
    if (st != KDALAB_OK)
        return st;
    memcpy(w.x, x, T * s->D * sizeof(double));
    st = run_blocks(s, T, layer_inputs, y != NULL, by_step, &w);
    if (st == KDALAB_OK && y)
        memcpy(y, w.x, T * s->D * sizeof(double));
    work_free(&w);
    /* the residual stream can still overflow between layers */
    return st == KDALAB_OK && y ? kdalab_check_outputs_f64(what, y, T * s->D, NULL, 0, NULL, NULL)
                                : st;
}

/* The mixer inputs of chapter layer l for T rows x [T, D], as the forward
 * makes them (the chapter's blocks have no convolution or SiLU, and a
 * bounded gate): q, k, v [T, D] (q, k L2-normalised for KDA), g [T, D],
 * beta [T, H]; any may be NULL. Memory: the pre-norm's [T, D] when the
 * stack has it. */
static kdalab_status project(const kdalab_hybrid *s, size_t l, size_t T, const double *x,
                             double *q, double *k, double *v, double *g, double *beta)
{
    const hybrid_block *b = &s->blocks[l];
    const size_t D = s->D;
    double *u = NULL;
    if (b->norm1) {
        if (!(u = malloc(T * D * sizeof(double))))
            return kdalab_fail(KDALAB_ENOMEM, "hybrid_layer_project: out of memory");
        kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, x, b->norm1, u);
    }
    const double *in = u ? u : x, *W[3] = {b->wq, b->wk, b->wv};
    double *out[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        if (!out[i])
            continue;
        kdalab__train_mm_f64(T, D, D, in, W[i], out[i], 0);
        if (i < 2 && !b->attention)
            kdalab__train_l2norm_fwd_f64(T * s->H, s->dh, b->l2_eps, out[i], out[i]);
    }
    kdalab_status st = KDALAB_OK;
    if (!b->attention) /* the bounded gate needs no work arrays */
        st = beta_and_gate(s, b, T, in, NULL, beta, g);
    free(u);
    return st;
}

/* ---- the chapter's stack: residual rows in and out ----------------------- */

/* The checks of the chapter's entry points: the stack's kind, T, x. */
static kdalab_status check_rows(const kdalab_hybrid *s, size_t T, const double *x,
                                const char *what)
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
    size_t n;
    if (!kdalab_mul_size(T, s->D, &n) || !kdalab_mul_size(n, s->L, &(size_t){0}) ||
        n > INT_MAX) /* the CBLAS's sizes are int */
        return kdalab_fail(KDALAB_EOVERFLOW, "%s: T %zu rows of width %zu overflow (past "
                           "2^31 - 1 values)", what, T, s->D);
    char name[64];
    snprintf(name, sizeof name, "%s: x", what);
    return kdalab_check_finite_f64(name, x, n);
}

kdalab_status kdalab_hybrid_layer_project(const kdalab_hybrid *s, size_t layer, size_t T,
                                          const double *x, double *q, double *k, double *v,
                                          double *g, double *beta)
{
    // x [T, d_model]; q, k, v, g [T, H, d_head]; beta [T, H]
    kdalab_clear_error();
    kdalab_status st = kdalab__hybrid_check_layer(s, layer, "hybrid_layer_project");
    if (st != KDALAB_OK)
        return st;
    if (s->model)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_layer_project: a trained model's stack has "
                           "no chapter layers");
    st = check_rows(s, T, x, "hybrid_layer_project");
    if (st != KDALAB_OK || T == 0)
        return st;
    st = project(s, layer, T, x, q, k, v, g, beta);
    if (st == KDALAB_OK)
        kdalab_clear_error();
    return st;
}

kdalab_status kdalab_hybrid_prefill(kdalab_hybrid *s, size_t T, const double *x, double *y,
                                    double *layer_inputs)
{
    // x, y [T, d_model]; layer_inputs [L, T, d_model]
    kdalab_clear_error();
    kdalab_status st = check_rows(s, T, x, "hybrid_prefill");
    if (st != KDALAB_OK || T == 0)
        return st;
    return rows_forward(s, T, x, y, layer_inputs, 0, "hybrid_prefill");
}

kdalab_status kdalab_hybrid_decode(kdalab_hybrid *s, const double *x, double *y,
                                   double *layer_inputs)
{
    // x, y [d_model]; layer_inputs [L, d_model]
    kdalab_clear_error();
    if (!y)
        return kdalab_fail(KDALAB_ENULL, "hybrid_decode: y is NULL");
    kdalab_status st = check_rows(s, 1, x, "hybrid_decode");
    if (st != KDALAB_OK)
        return st;
    return rows_forward(s, 1, x, y, layer_inputs, 1, "hybrid_decode");
}

/* ---- a trained model's stack: tokens in, logits out ---------------------- */

/* T tokens through the blocks (by_step: decode's recurrent step), then the
 * logits [T, V] when logits is not NULL. */
static kdalab_status tokens_forward(kdalab_hybrid *s, size_t T, const int32_t *tokens,
                                    double *logits, int by_step, const char *what)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "%s: stack is NULL", what);
    if (!s->model)
        return kdalab_fail(KDALAB_EINVAL, "%s: the chapter's stack takes residual rows "
                           "(kdalab_hybrid_prefill, kdalab_hybrid_decode)", what);
    if (T == 0)
        return KDALAB_OK;
    if (!tokens)
        return kdalab_fail(KDALAB_ENULL, "%s: tokens is NULL", what);
    const hybrid_model *m = s->model;
    const size_t D = s->D, V = m->cfg.vocab;
    /* T's bounds first: a T past them is no length of a caller's buffer to read */
    kdalab_status st = kdalab__model_check_batch(&m->cfg, 1, T);
    if (st != KDALAB_OK)
        return st;
    for (size_t t = 0; t < T; t++)
        if (tokens[t] < 0 || (size_t)tokens[t] >= V)
            return kdalab_fail(KDALAB_EDOMAIN, "%s: tokens[%zu] = %d is outside [0, %zu)", what,
                               t, (int)tokens[t], V);
    work w;
    st = work_new(s, T, &w, what);
    if (st != KDALAB_OK)
        return st;
    const double *th = m->theta;
    for (size_t t = 0; t < T; t++) /* x = embed[token] */
        memcpy(w.x + t * D, th + m->lay.embed + (size_t)tokens[t] * D, D * sizeof(double));
    st = run_blocks(s, T, NULL, logits != NULL, by_step, &w);
    if (st == KDALAB_OK && logits) { /* logits = rmsnorm(x, norm_f) lm_head */
        kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, w.x, th + m->lay.norm_f, w.u);
        kdalab__train_mm_f64(T, D, V, w.u, th + m->lay.lm_head, logits, 0);
    }
    work_free(&w);
    if (st == KDALAB_OK && logits)
        st = kdalab_check_outputs_f64(what, logits, T * V, NULL, 0, NULL, NULL);
    if (st == KDALAB_OK)
        kdalab_clear_error();
    return st;
}

kdalab_status kdalab_hybrid_prefill_tokens(kdalab_hybrid *s, size_t T, const int32_t *tokens,
                                           double *logits)
{
    // tokens [T]; logits [T, V] or NULL
    kdalab_clear_error();
    return tokens_forward(s, T, tokens, logits, 0, "hybrid_prefill_tokens");
}

kdalab_status kdalab_hybrid_decode_token(kdalab_hybrid *s, int32_t token, double *logits)
{
    // logits [V]
    kdalab_clear_error();
    if (!logits)
        return kdalab_fail(KDALAB_ENULL, "hybrid_decode_token: logits is NULL");
    return tokens_forward(s, 1, &token, logits, 1, "hybrid_decode_token");
}
