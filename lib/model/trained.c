/*
 * lib/model/trained.c — a trained model of lib/train as a hybrid stack: its
 * blocks read from the parameter layout (the forward is the chapter
 * stack's, forward.c), loaded from and saved to the checkpoint format
 * (kdalab_checkpoint.h).
 *
 * defines: kdalab_hybrid_new_model, kdalab_hybrid_load, kdalab_hybrid_save,
 *          kdalab_hybrid_model (public)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid_internal.h"

/* Block l of the model as the forward runs it: the training block's
 * computation (lib/train/model_loss.c's forward, mixer.c's) with every
 * weight pointing into m->theta. */
static hybrid_block block_of(const hybrid_model *m, size_t l)
{
    const kdalab_model_config *c = &m->cfg;
    const model_block_t *wb = &m->lay.block[l];
    const double *th = m->theta;
    const kdalab_mixer_kind kind = c->mixer[l];
    const int attention = kind == KDALAB_MIXER_ATTENTION;
    const kdalab_g_shape gs = train_g_shape_of(kind);
    const int gate = !attention && c->output_gate != KDALAB_OUTPUT_GATE_NONE;
    const int rank = gate && c->gate_rank != 0, conv = train_block_conv(c, l);
    hybrid_block b = {
        .attention = attention, .mech = train_mechanism_of(kind),
        .norm1 = th + wb->norm1,
        .wq = th + wb->mix[MIX_WQ], .wk = th + wb->mix[MIX_WK], .wv = th + wb->mix[MIX_WV],
        .wo = th + wb->mix[MIX_WO],
        .silu = 1, .l2_eps = TRAIN_L2_EPS,
        .wbeta = train_has_beta(kind) ? th + wb->mix[MIX_WB] : NULL,
        .gate = gs == KDALAB_G_NONE ? HYBRID_GATE_NONE : HYBRID_GATE_FLA,
        .onorm = attention ? NULL : th + wb->mix[MIX_ONORM],
        .mc = {kind, c->D, c->H, conv, c->output_gate, c->gate_rank},
        .wog = gate ? th + wb->mix[MIX_WOG] : NULL,
        .wog2 = rank ? th + wb->mix[MIX_WOG2] : NULL,
        .bog = rank ? th + wb->mix[MIX_BOG] : NULL,
        .norm2 = th + wb->norm2, .w1 = th + wb->W1, .w3 = th + wb->W3, .w2 = th + wb->W2};
    if (conv)
        for (int i = 0; i < 3; i++)
            b.conv[i] = th + wb->mix[MIX_CQ + i];
    if (b.gate == HYBRID_GATE_FLA) { /* per head: x Wa [D, H]; per key: x Wg Wg2 */
        b.wg = th + wb->mix[gs == KDALAB_G_PER_HEAD ? MIX_WA : MIX_WG];
        b.wg2 = gs == KDALAB_G_PER_HEAD ? NULL : th + wb->mix[MIX_WG2];
        b.alog = th + wb->mix[MIX_ALOG];
        b.dtb = th + wb->mix[MIX_DTB];
    }
    return b;
}

kdalab_status kdalab_hybrid_new_model(const kdalab_model_config *cfg, const double *theta,
                                      kdalab_hybrid **out)
{
    // theta [n_params] in the layout of kdalab_model_tensor_at
    kdalab_clear_error();
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_model: out is NULL");
    *out = NULL;
    model_layout_t lay;
    kdalab_status st = kdalab__model_layout(cfg, &lay, NULL);
    if (st == KDALAB_OK && !theta)
        st = kdalab_fail(KDALAB_ENULL, "hybrid_new_model: theta is NULL");
    if (st == KDALAB_OK)
        st = kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, lay.n_params, NULL);
    if (st != KDALAB_OK)
        return st;
    kdalab_hybrid *s = calloc(1, sizeof *s);
    hybrid_model *m = s ? calloc(1, sizeof *m) : NULL;
    int ok = m != NULL;
    if (ok) {
        s->model = m;
        m->cfg = *cfg;
        m->lay = lay;
        ok = (m->theta = malloc(lay.n_params * sizeof(double))) != NULL &&
             (s->blocks = calloc(cfg->L, sizeof *s->blocks)) != NULL;
    }
    if (ok) {
        memcpy(m->theta, theta, lay.n_params * sizeof(double));
        s->L = cfg->L;
        s->D = cfg->D;
        s->H = cfg->H;
        s->dh = cfg->D / cfg->H;
        s->F = cfg->F;
        s->scale = 1 / sqrt((double)s->dh); /* the training mixers' */
        for (size_t l = 0; l < cfg->L && ok; l++) {
            s->blocks[l] = block_of(m, l);
            ok = kdalab__hybrid_block_memory(&s->blocks[l], cfg->D, cfg->H,
                                             train_block_conv(cfg, l));
        }
    }
    if (!ok) {
        kdalab_hybrid_free(s);
        return kdalab_fail(KDALAB_ENOMEM, "hybrid_new_model: out of memory for %zu "
                           "parameters and %zu blocks", lay.n_params, cfg->L);
    }
    *out = s;
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_load(const char *dir, kdalab_hybrid **out)
{
    kdalab_clear_error();
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_load: out is NULL");
    *out = NULL;
    kdalab_model_config cfg;
    kdalab_status st = kdalab_checkpoint_read_config(dir, &cfg);
    size_t n_params = 0;
    if (st == KDALAB_OK)
        st = kdalab_model_size(&cfg, &n_params, NULL);
    double *theta = st == KDALAB_OK ? malloc(n_params * sizeof *theta) : NULL;
    if (st == KDALAB_OK && !theta)
        st = kdalab_fail(KDALAB_ENOMEM, "hybrid_load: out of memory for %zu parameters",
                         n_params);
    if (st == KDALAB_OK)
        st = kdalab_checkpoint_read_params(dir, &cfg, theta);
    if (st == KDALAB_OK)
        st = kdalab_hybrid_new_model(&cfg, theta, out);
    free(theta);
    return st;
}

kdalab_status kdalab_hybrid_save(const kdalab_hybrid *s, const char *dir)
{
    kdalab_clear_error();
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_save: stack is NULL");
    if (!s->model)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_save: the chapter's stack "
                           "(kdalab_hybrid_new_random) has no checkpoint form; a trained "
                           "model's stack has");
    return kdalab_checkpoint_write(dir, &s->model->cfg, s->model->theta, NULL);
}

kdalab_status kdalab_hybrid_model(const kdalab_hybrid *s, kdalab_model_config *cfg,
                                  const double **theta)
{
    kdalab_clear_error();
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_model: stack is NULL");
    if (!s->model)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_model: the chapter's stack, not a trained "
                           "model's");
    if (cfg)
        *cfg = s->model->cfg;
    if (theta)
        *theta = s->model->theta;
    return KDALAB_OK;
}
