/*
 * lib/model/trained_forward.c — a trained model's stack run over tokens:
 * prefill (T tokens at once) and decode (one token), from and into each
 * block's memory, giving the logits kdalab_model_logits_f64 gives for the
 * same tokens. The training model's computation (lib/train/model_loss.c's
 * forward, lib/train/mixer.c's) with the same kernels, step by step:
 *
 *   x = embed[token]                                     [T, D]
 *   per block:  h = rmsnorm(x, norm1)
 *               a = h W  (Wq, Wk, Wv); c = conv(a) over the block's last
 *                   TRAIN_CONV_W - 1 rows of a and these (conv on), else a
 *               q, k, v = silu(c)
 *               attention:  append k, v to the KV cache, o = attend(q)
 *               linear:     q, k L2-normalised; beta, the gate; o from the
 *                           block's state (prefill: kdalab_chunk_f64 from it,
 *                           its final state kept; decode: kdalab_step_f64 per
 *                           head); o = rmsnorm(o, onorm) * act(z), z = h Wog
 *                           or (h Wog) Wog2 + bog, act sigmoid or swish, as the
 *                           model's output gate says (none: o = rmsnorm(o, onorm))
 *               x = x + o Wo;  x = x + (silu(h2 W1) * (h2 W3)) W2,
 *               h2 = rmsnorm(x, norm2)
 *   logits = rmsnorm(x, norm_f) lm_head                  [T, V]
 *
 * Against kdalab_model_logits_f64 the only differences are the mechanism's
 * form (there the SIMD path's chunkwise form, C = 16; here the reference's
 * chunkwise form, C = 64, or its recurrent step) and attention's (there
 * tiles of queries as matrix products; here one query at a time over the
 * cache): float64 rounding, ~1e-15 relative (tests/test_hybrid_trained.c).
 *
 * defines: kdalab_hybrid_prefill_tokens, kdalab_hybrid_decode_token (public)
 */
#include <stdlib.h>
#include <string.h>

#include "hybrid_internal.h"

#define TAPS (TRAIN_CONV_W - 1)

/* Work arrays for T tokens (B = 1). */
typedef struct {
    double *x, *h, *y;    /* [T, D] the stream, a norm's output, x + mixer(h)   */
    double *a[3];         /* [T, D] h Wq, h Wk, h Wv                             */
    double *cin, *cout;   /* [TAPS + T, D] the convolution over history and a   */
    double *s[3];         /* [T, D] q, k, v after the convolution and SiLU      */
    double *qn, *kn;      /* [T, D] L2-normalised q, k                           */
    double *beta;         /* [T, H]                                             */
    double *zf;           /* [T, d] KDA's low-rank gate                         */
    double *zg, *g;       /* [T, D] the gate's input and the log-decay          */
    double *o, *on, *so;  /* [T, D] the mechanism's output, its norm, the gate  */
    double *zo, *zr;      /* [T, D] the gate's input z; [T, r <= D] h Wog (rank r) */
    double *ht;           /* [H, d, d] the final state of kdalab_chunk_f64      */
    double *fa, *fb, *fu; /* [T, F] the MLP                                      */
} work;

static void work_free(work *w)
{
    double *all[] = {w->x,  w->h,  w->y,  w->a[0], w->a[1], w->a[2], w->cin, w->cout,
                     w->s[0], w->s[1], w->s[2], w->qn, w->kn, w->beta, w->zf, w->zg,
                     w->g,  w->o,  w->on, w->so,  w->zo,  w->zr,  w->ht,  w->fa,  w->fb,
                     w->fu};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* cfg and T checked (kdalab__model_check_batch): no count overflows. */
static int work_new(work *w, const kdalab_model_config *cfg, size_t T)
{
    memset(w, 0, sizeof *w);
    const size_t D = cfg->D, F = cfg->F, d = D / cfg->H, TD = T * D, nb = sizeof(double);
    double **td[] = {&w->x,  &w->h,  &w->y,  &w->a[0], &w->a[1], &w->a[2], &w->s[0],
                     &w->s[1], &w->s[2], &w->qn, &w->kn, &w->zg, &w->g,  &w->o,
                     &w->on, &w->so, &w->zo, &w->zr};
    int ok = 1;
    for (size_t i = 0; i < sizeof td / sizeof td[0]; i++)
        ok &= (*td[i] = malloc(TD * nb)) != NULL;
    ok &= (w->cin = malloc((TAPS + T) * D * nb)) != NULL;
    ok &= (w->cout = malloc((TAPS + T) * D * nb)) != NULL;
    ok &= (w->beta = malloc(T * cfg->H * nb)) != NULL;
    ok &= (w->zf = malloc(T * d * nb)) != NULL;
    ok &= (w->ht = malloc(D * d * nb)) != NULL;
    ok &= (w->fa = malloc(T * F * nb)) != NULL;
    ok &= (w->fb = malloc(T * F * nb)) != NULL;
    ok &= (w->fu = malloc(T * F * nb)) != NULL;
    if (!ok)
        work_free(w);
    return ok;
}

/* A kernel refusing a non-finite input the stack made from finite weights
 * and tokens means an intermediate overflowed. */
static kdalab_status overflowed(kdalab_status st, size_t l)
{
    if (st == KDALAB_ENONFINITE)
        return kdalab_fail(KDALAB_ERANGE, "hybrid: block %zu: an intermediate overflowed (%s)",
                           l, kdalab_last_error());
    return st;
}

/* q, k, v of block l for T tokens: w->h through Wq, Wk, Wv, the convolution
 * over the block's history (which moves on by T rows) and SiLU, into w->s. */
static void qkv(const hybrid_model *m, size_t l, size_t T, work *w)
{
    const model_block_t *wb = &m->lay.block[l];
    const size_t D = m->cfg.D;
    const int W[3] = {MIX_WQ, MIX_WK, MIX_WV}, C[3] = {MIX_CQ, MIX_CK, MIX_CV};
    for (int i = 0; i < 3; i++) {
        kdalab__train_mm_f64(T, D, D, w->h, m->theta + wb->mix[W[i]], w->a[i], 0);
        const double *c = w->a[i];
        if (m->cfg.conv) {
            double *hist = m->blocks[l].taps + (size_t)i * TAPS * D;
            memcpy(w->cin, hist, TAPS * D * sizeof(double));
            memcpy(w->cin + TAPS * D, w->a[i], T * D * sizeof(double));
            kdalab__train_short_conv_fwd_f64(1, TAPS + T, D, TRAIN_CONV_W, w->cin,
                                             m->theta + wb->mix[C[i]], w->cout);
            memcpy(hist, w->cin + T * D, TAPS * D * sizeof(double)); /* the last rows */
            c = w->cout + TAPS * D;
        }
        kdalab__train_silu_fwd_f64(T * D, c, w->s[i]);
    }
}

/* The linear mechanism of block l from its state: o [T, D]. */
static kdalab_status mechanism(const kdalab_hybrid *s, size_t l, size_t T, work *w, int by_step)
{
    const hybrid_model *m = s->model;
    const model_block_t *wb = &m->lay.block[l];
    const double *th = m->theta;
    const size_t D = m->cfg.D, H = m->cfg.H, d = D / H;
    const kdalab_mixer_kind kind = m->cfg.mixer[l];
    const kdalab_mechanism mech = train_mechanism_of(kind);
    const size_t gw = kdalab_mechanism_g_width(mech, d);
    const int beta = kdalab_mechanism_has_beta(mech);
    kdalab__train_l2norm_fwd_f64(T * H, d, TRAIN_L2_EPS, w->s[0], w->qn);
    kdalab__train_l2norm_fwd_f64(T * H, d, TRAIN_L2_EPS, w->s[1], w->kn);
    if (beta) {
        kdalab__train_mm_f64(T, D, H, w->h, th + wb->mix[MIX_WB], w->beta, 0);
        for (size_t r = 0; r < T * H; r++)
            w->beta[r] = train_sigmoid_f64(w->beta[r]);
    }
    kdalab_status st = KDALAB_OK;
    if (gw) {
        if (kdalab_mechanism_g_shape(mech) == KDALAB_G_PER_HEAD) { /* x Wa; per key: x Wg Wg2 */
            kdalab__train_mm_f64(T, D, H, w->h, th + wb->mix[MIX_WA], w->zg, 0);
        } else {
            kdalab__train_mm_f64(T, D, d, w->h, th + wb->mix[MIX_WG], w->zf, 0);
            kdalab__train_mm_f64(T, d, D, w->zf, th + wb->mix[MIX_WG2], w->zg, 0);
        }
        st = kdalab_kda_gate_f64(T, H, gw, w->zg, th + wb->mix[MIX_ALOG],
                                 th + wb->mix[MIX_DTB], w->g);
    }
    double *state = m->blocks[l].state;
    if (st == KDALAB_OK && by_step) {
        for (size_t t = 0; t < T && st == KDALAB_OK; t++)
            for (size_t hh = 0; hh < H && st == KDALAB_OK; hh++) {
                const size_t r = t * D + hh * d, row = t * H + hh;
                st = kdalab_step_f64(mech, d, d, s->scale, w->qn + r, w->kn + r, w->s[2] + r,
                                     gw ? w->g + row * gw : NULL, beta ? w->beta[row] : 0,
                                     state + hh * d * d, w->o + r);
            }
    } else if (st == KDALAB_OK) {
        const kdalab_dims dims = {1, T, H, d, d};
        st = kdalab_chunk_f64(&dims, mech, s->scale, w->qn, w->kn, w->s[2], gw ? w->g : NULL,
                              beta ? w->beta : NULL, state, w->o, w->ht, NULL, NULL);
        if (st == KDALAB_OK)
            memcpy(state, w->ht, m->blocks[l].state_bytes);
    }
    return st;
}

/* Block l's mixer: w->h -> w->y [T, D]. */
static kdalab_status mixer(const kdalab_hybrid *s, size_t l, size_t T, work *w, int by_step)
{
    const hybrid_model *m = s->model;
    const model_block_t *wb = &m->lay.block[l];
    const size_t D = m->cfg.D, H = m->cfg.H, d = D / H;
    qkv(m, l, T, w);
    kdalab_status st = KDALAB_OK;
    if (m->cfg.mixer[l] == KDALAB_MIXER_ATTENTION) {
        kdalab_kv_cache *cache = m->blocks[l].cache;
        for (size_t t = 0; t < T && st == KDALAB_OK; t++) {
            st = kdalab_kv_cache_append(cache, w->s[1] + t * D, w->s[2] + t * D);
            if (st == KDALAB_OK)
                st = kdalab_kv_cache_attend(cache, s->scale, w->s[0] + t * D, w->o + t * D);
        }
        if (st == KDALAB_OK)
            kdalab__train_mm_f64(T, D, D, w->o, m->theta + wb->mix[MIX_WO], w->y, 0);
        return st;
    }
    st = mechanism(s, l, T, w, by_step);
    if (st != KDALAB_OK)
        return st;
    // the gated output norm: rmsnorm(o, onorm) * act(z), per (t, head); no gate: the norm
    kdalab__train_rmsnorm_fwd_f64(T * H, d, TRAIN_ONORM_EPS, w->o, m->theta + wb->mix[MIX_ONORM],
                                  w->on);
    if (m->cfg.output_gate != KDALAB_OUTPUT_GATE_NONE) {
        const kdalab_mixer_config mc = {m->cfg.mixer[l], D, H, m->cfg.conv, m->cfg.output_gate,
                                        m->cfg.gate_rank};
        const double *th = m->theta;
        const int r = m->cfg.gate_rank != 0;
        kdalab__train_outgate_fwd_f64(&mc, T, w->h, th + wb->mix[MIX_WOG],
                                      r ? th + wb->mix[MIX_WOG2] : NULL,
                                      r ? th + wb->mix[MIX_BOG] : NULL, w->zr, w->zo, w->so);
        for (size_t i = 0; i < T * D; i++)
            w->on[i] = w->on[i] * w->so[i];
    }
    kdalab__train_mm_f64(T, D, D, w->on, m->theta + wb->mix[MIX_WO], w->y, 0);
    return KDALAB_OK;
}

/* T tokens through every block (by_step: decode's recurrent step, else the
 * chunkwise form), then the logits when logits is not NULL. */
static kdalab_status forward(kdalab_hybrid *s, size_t T, const int32_t *tokens, double *logits,
                             int by_step, const char *what)
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
    const size_t D = m->cfg.D, F = m->cfg.F, V = m->cfg.vocab;
    /* T's bounds first: a T past them is no length of a caller's buffer to read */
    kdalab_status st = kdalab__model_check_batch(&m->cfg, 1, T);
    if (st != KDALAB_OK)
        return st;
    for (size_t t = 0; t < T; t++)
        if (tokens[t] < 0 || (size_t)tokens[t] >= V)
            return kdalab_fail(KDALAB_EDOMAIN, "%s: tokens[%zu] = %d is outside [0, %zu)", what,
                               t, (int)tokens[t], V);
    work w;
    if (!work_new(&w, &m->cfg, T))
        return kdalab_fail(KDALAB_ENOMEM, "%s: out of memory for %zu tokens", what, T);
    const double *th = m->theta;
    for (size_t t = 0; t < T; t++)
        memcpy(w.x + t * D, th + m->lay.embed + (size_t)tokens[t] * D, D * sizeof(double));
    for (size_t l = 0; l < m->cfg.L && st == KDALAB_OK; l++) {
        const model_block_t *wb = &m->lay.block[l];
        // x = x + mixer(rmsnorm(x, norm1))
        kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, w.x, th + wb->norm1, w.h);
        st = overflowed(mixer(s, l, T, &w, by_step), l);
        if (st != KDALAB_OK)
            break;
        for (size_t i = 0; i < T * D; i++)
            w.y[i] += w.x[i];
        // x = x + (silu(h W1) * (h W3)) W2, h = rmsnorm(x, norm2)
        kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, w.y, th + wb->norm2, w.h);
        kdalab__train_mm_f64(T, D, F, w.h, th + wb->W1, w.fa, 0);
        kdalab__train_mm_f64(T, D, F, w.h, th + wb->W3, w.fb, 0);
        kdalab__train_swiglu_fwd_f64(T * F, w.fa, w.fb, w.fu);
        memcpy(w.x, w.y, T * D * sizeof(double));
        kdalab__train_mm_f64(T, F, D, w.fu, th + wb->W2, w.x, 1);
    }
    if (st == KDALAB_OK) {
        s->position += T;
        if (logits) {
            kdalab__train_rmsnorm_fwd_f64(T, D, TRAIN_NORM_EPS, w.x, th + m->lay.norm_f, w.h);
            kdalab__train_mm_f64(T, D, V, w.h, th + m->lay.lm_head, logits, 0);
            st = kdalab_check_outputs_f64(what, logits, T * V, NULL, 0, NULL, NULL);
        }
    }
    work_free(&w);
    if (st == KDALAB_OK)
        kdalab_clear_error();
    return st;
}

kdalab_status kdalab_hybrid_prefill_tokens(kdalab_hybrid *s, size_t T, const int32_t *tokens,
                                           double *logits)
{
    // tokens [T]; logits [T, V] or NULL
    kdalab_clear_error();
    return forward(s, T, tokens, logits, 0, "hybrid_prefill_tokens");
}

kdalab_status kdalab_hybrid_decode_token(kdalab_hybrid *s, int32_t token, double *logits)
{
    // logits [V]
    kdalab_clear_error();
    if (!logits)
        return kdalab_fail(KDALAB_ENULL, "hybrid_decode_token: logits is NULL");
    return forward(s, 1, &token, logits, 1, "hybrid_decode_token");
}
