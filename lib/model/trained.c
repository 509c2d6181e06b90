/*
 * lib/model/trained.c — a trained model of lib/train as a hybrid stack:
 * built from its configuration and parameters, loaded from and saved to the
 * checkpoint format (kdalab_checkpoint.h), and the decode-time memory of its
 * blocks (a linear mixer's state, an attention mixer's KV cache, the short
 * convolution's last rows). Its prefill and decode are in trained_forward.c.
 *
 * defines: kdalab_hybrid_new_model, kdalab_hybrid_load, kdalab_hybrid_save,
 *          kdalab_hybrid_model (public); kdalab__hybrid_model_free,
 *          kdalab__hybrid_model_reset, kdalab__hybrid_model_bytes
 *          (hybrid_internal.h)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid_internal.h"

#define TAPS (TRAIN_CONV_W - 1) /* rows of history the convolution reads */

void kdalab__hybrid_model_free(hybrid_model *m)
{
    if (!m)
        return;
    for (size_t l = 0; m->blocks && l < m->cfg.L; l++) {
        free(m->blocks[l].state);
        kdalab_kv_cache_free(m->blocks[l].cache);
        free(m->blocks[l].taps);
    }
    free(m->blocks);
    free(m->theta);
    free(m);
}

void kdalab__hybrid_model_reset(hybrid_model *m)
{
    for (size_t l = 0; l < m->cfg.L; l++) {
        hybrid_block *b = &m->blocks[l];
        if (b->state)
            memset(b->state, 0, b->state_bytes);
        kdalab_kv_cache_clear(b->cache);
        if (b->taps)
            memset(b->taps, 0, 3 * TAPS * m->cfg.D * sizeof(double));
    }
}

size_t kdalab__hybrid_model_bytes(const hybrid_model *m, size_t l)
{
    const hybrid_block *b = &m->blocks[l];
    const size_t taps = b->taps ? 3 * TAPS * m->cfg.D * sizeof(double) : 0;
    return taps + (b->cache ? kdalab_kv_cache_bytes(b->cache) : b->state_bytes);
}

/* The memory of every block of m (m->cfg set), zeroed; 0 when out of memory. */
static int blocks_new(hybrid_model *m)
{
    const size_t L = m->cfg.L, D = m->cfg.D, H = m->cfg.H, d = D / H;
    if (!(m->blocks = calloc(L, sizeof *m->blocks)))
        return 0;
    for (size_t l = 0; l < L; l++) {
        hybrid_block *b = &m->blocks[l];
        if (m->cfg.mixer[l] == KDALAB_MIXER_ATTENTION) {
            if (!(b->cache = kdalab_kv_cache_new(H, d, d)))
                return 0;
        } else {
            b->state_bytes = H * d * d * sizeof(double); /* <= D * D: Wq's size, checked */
            if (!(b->state = calloc(1, b->state_bytes)))
                return 0;
        }
        if (m->cfg.conv && !(b->taps = calloc(3 * TAPS * D, sizeof(double))))
            return 0;
    }
    return 1;
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
    if (m) {
        s->model = m;
        m->cfg = *cfg;
        m->lay = lay;
        m->theta = malloc(lay.n_params * sizeof(double));
    }
    if (!m || !m->theta || !blocks_new(m)) {
        kdalab_hybrid_free(s);
        return kdalab_fail(KDALAB_ENOMEM, "hybrid_new_model: out of memory for %zu "
                           "parameters and %zu blocks", lay.n_params, cfg->L);
    }
    memcpy(m->theta, theta, lay.n_params * sizeof(double));
    s->dh = cfg->D / cfg->H;
    s->scale = 1 / sqrt((double)s->dh); /* the training mixers' */
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
