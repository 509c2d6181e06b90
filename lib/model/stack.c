/*
 * lib/model/stack.c — a hybrid stack's memory: building it (zeroed, or with
 * seeded random weights), freeing it, resetting its caches, the accessors
 * that hand out its parts, and the bytes its caches hold.
 *
 * defines: kdalab_hybrid_new_random, kdalab_hybrid_free, kdalab_hybrid_reset,
 *          kdalab_hybrid_config_of, kdalab_hybrid_position,
 *          kdalab_hybrid_layer_weights, kdalab_hybrid_kda_state,
 *          kdalab_hybrid_kv_cache, kdalab_hybrid_cache_bytes (public);
 *          kdalab__hybrid_alloc, kdalab__hybrid_check_layer (hybrid_internal.h)
 *
 * Each layer's weights are one block, laid out wq, wk, wv, wo, norm and then,
 * for KDA layers only, wg, bg, wbeta. A KDA layer owns its [H, dh, dh] state,
 * an attention layer a kdalab_kv_cache. A trained model's stack (s->model,
 * lib/model/trained.c) has no layers: free, reset, the state and cache
 * accessors and the cache bytes reach its blocks instead; the chapter
 * stack's own accessors refuse it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "hybrid_internal.h"

/* ---- building and freeing ------------------------------------------------ */

void kdalab_hybrid_free(kdalab_hybrid *s)
{
    if (!s)
        return;
    if (s->layers) {
        for (size_t l = 0; l < s->cfg.n_layers; l++) {
            free(s->layers[l].weights);
            free(s->layers[l].state);
            kdalab_kv_cache_free(s->layers[l].cache);
        }
        free(s->layers);
    }
    kdalab__hybrid_model_free(s->model);
    free(s->kinds);
    free(s);
}

/* Doubles of weights one layer of the given kind holds. */
static size_t layer_weight_count(size_t d, size_t H, kdalab_hybrid_kind kind)
{
    size_t n = 4 * d * d + d;
    if (kind == KDALAB_HYBRID_KDA)
        n += d * d + d + d * H;
    return n;
}

kdalab_status kdalab__hybrid_alloc(const kdalab_hybrid_config *cfg, kdalab_hybrid **out)
{
    kdalab_status st = kdalab_hybrid_config_check(cfg);
    if (st != KDALAB_OK)
        return st;
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid: out is NULL");
    *out = NULL;
    size_t L = cfg->n_layers, d = cfg->d_model, H = cfg->n_heads, dh = d / H;
    kdalab_hybrid *s = calloc(1, sizeof *s);
    if (!s)
        return kdalab_fail(KDALAB_ENOMEM, "hybrid: out of memory");
    s->cfg = *cfg;
    s->dh = dh;
    s->scale = cfg->scale > 0 ? cfg->scale : 1.0 / sqrt((double)dh);
    s->kinds = calloc(L, sizeof *s->kinds);
    s->layers = calloc(L, sizeof *s->layers);
    if (!s->kinds || !s->layers)
        goto nomem;
    for (size_t l = 0; l < L; l++)
        s->kinds[l] = cfg->kinds ? cfg->kinds[l] : kdalab__hybrid_kind_by_ratio(cfg, l);
    s->cfg.kinds = s->kinds;
    for (size_t l = 0; l < L; l++) {
        hybrid_layer *ly = &s->layers[l];
        ly->kind = s->kinds[l];
        ly->weights = calloc(layer_weight_count(d, H, ly->kind), sizeof(double));
        if (!ly->weights)
            goto nomem;
        double *w = ly->weights;
        ly->wq = w; w += d * d;
        ly->wk = w; w += d * d;
        ly->wv = w; w += d * d;
        ly->wo = w; w += d * d;
        ly->norm = w; w += d;
        for (size_t c = 0; c < d; c++)
            ly->norm[c] = 1.0;
        if (ly->kind == KDALAB_HYBRID_KDA) {
            ly->wg = w; w += d * d;
            ly->bg = w; w += d;
            ly->wbeta = w;
            size_t n_state = H * dh * dh; /* <= d * d: no overflow (checked) */
            /* on its own cache lines: a decode step streams the whole state */
            size_t bytes = (n_state * sizeof(double) + 63) / 64 * 64;
            ly->state = aligned_alloc(64, bytes);
            if (!ly->state)
                goto nomem;
            memset(ly->state, 0, bytes);
            ly->state_bytes = n_state * sizeof(double);
        } else {
            ly->cache = kdalab_kv_cache_new(H, dh, dh);
            if (!ly->cache)
                goto nomem;
        }
    }
    *out = s;
    return KDALAB_OK;
nomem:
    kdalab_hybrid_free(s);
    return kdalab_fail(KDALAB_ENOMEM, "hybrid: out of memory for %zu layers of width %zu", L, d);
}

kdalab_status kdalab_hybrid_new_random(const kdalab_hybrid_config *cfg, unsigned long seed,
                                       kdalab_hybrid **out)
{
    kdalab_clear_error();
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_random: out is NULL");
    *out = NULL;
    kdalab_hybrid *s = NULL;
    kdalab_status st = kdalab__hybrid_alloc(cfg, &s);
    if (st != KDALAB_OK)
        return st;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng) {
        kdalab_hybrid_free(s);
        return kdalab_fail(KDALAB_ENOMEM, "hybrid: out of memory for the generator");
    }
    gsl_rng_set(rng, seed);
    size_t d = cfg->d_model, H = cfg->n_heads;
    double sd = 1.0 / sqrt((double)d);
    double lb = -cfg->gate_lower_bound; /* >= 0 */
    for (size_t l = 0; l < cfg->n_layers; l++) {
        hybrid_layer *ly = &s->layers[l];
        /* Every matrix N(0, 1/d), in a fixed order; the gain stays 1. */
        double *mats[5] = {ly->wq, ly->wk, ly->wv, ly->wo, ly->wg};
        size_t n_mat = (ly->kind == KDALAB_HYBRID_KDA) ? 5 : 4;
        for (size_t m = 0; m < n_mat; m++)
            for (size_t i = 0; i < d * d; i++)
                mats[m][i] = gsl_ran_gaussian(rng, sd);
        if (ly->kind != KDALAB_HYBRID_KDA)
            continue;
        for (size_t i = 0; i < d * H; i++)
            ly->wbeta[i] = gsl_ran_gaussian(rng, sd);
        for (size_t c = 0; c < d; c++) {
            /* per-step decay -g at x = 0, log-uniform in [1e-4, 1] */
            double u = exp(log(1e-4) + gsl_rng_uniform(rng) * (0.0 - log(1e-4)));
            if (lb == 0) {
                ly->bg[c] = 0.0;
                continue;
            }
            double p = u / lb;
            if (p > 0.999)
                p = 0.999;
            ly->bg[c] = log(p / (1.0 - p));
        }
    }
    gsl_rng_free(rng);
    *out = s;
    kdalab_clear_error();
    return KDALAB_OK;
}

/* ---- resetting ----------------------------------------------------------- */

kdalab_status kdalab_hybrid_reset(kdalab_hybrid *s)
{
    kdalab_clear_error();
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_reset: stack is NULL");
    if (s->model)
        kdalab__hybrid_model_reset(s->model);
    /* emptying a cache keeps its memory: a reset cannot run out of memory
     * halfway and leave the stack half reset */
    for (size_t l = 0; l < s->cfg.n_layers; l++)
        if (s->layers[l].kind == KDALAB_HYBRID_ATTENTION)
            kdalab_kv_cache_clear(s->layers[l].cache);
    for (size_t l = 0; l < s->cfg.n_layers; l++)
        if (s->layers[l].state)
            memset(s->layers[l].state, 0, s->layers[l].state_bytes);
    s->position = 0;
    kdalab_clear_error();
    return KDALAB_OK;
}

/* ---- accessors ----------------------------------------------------------- */

const kdalab_hybrid_config *kdalab_hybrid_config_of(const kdalab_hybrid *s)
{
    return s && !s->model ? &s->cfg : NULL;
}

size_t kdalab_hybrid_position(const kdalab_hybrid *s) { return s ? s->position : 0; }

kdalab_status kdalab__hybrid_check_layer(const kdalab_hybrid *s, size_t layer, const char *what)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "%s: stack is NULL", what);
    const size_t L = s->model ? s->model->cfg.L : s->cfg.n_layers;
    if (layer >= L)
        return kdalab_fail(KDALAB_EINVAL, "%s: layer %zu >= n_layers %zu", what, layer, L);
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_layer_weights(kdalab_hybrid *s, size_t layer,
                                          kdalab_hybrid_weights *out)
{
    kdalab_clear_error();
    kdalab_status st = kdalab__hybrid_check_layer(s, layer, "hybrid_layer_weights");
    if (st != KDALAB_OK)
        return st;
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_layer_weights: out is NULL");
    if (s->model)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_layer_weights: a trained model's stack: "
                           "its weights are kdalab_hybrid_model's theta");
    const hybrid_layer *ly = &s->layers[layer];
    out->kind = ly->kind;
    out->norm = ly->norm;
    out->wq = ly->wq;
    out->wk = ly->wk;
    out->wv = ly->wv;
    out->wo = ly->wo;
    out->wg = ly->wg;
    out->bg = ly->bg;
    out->wbeta = ly->wbeta;
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_kda_state(kdalab_hybrid *s, size_t layer, double **state)
{
    kdalab_clear_error();
    kdalab_status st = kdalab__hybrid_check_layer(s, layer, "hybrid_kda_state");
    if (st != KDALAB_OK)
        return st;
    if (!state)
        return kdalab_fail(KDALAB_ENULL, "hybrid_kda_state: state is NULL");
    if (s->model) {
        if (!s->model->blocks[layer].state)
            return kdalab_fail(KDALAB_EINVAL, "hybrid_kda_state: block %zu is attention",
                               layer);
        *state = s->model->blocks[layer].state;
        return KDALAB_OK;
    }
    if (s->layers[layer].kind != KDALAB_HYBRID_KDA)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_kda_state: layer %zu is attention", layer);
    *state = s->layers[layer].state;
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_kv_cache(kdalab_hybrid *s, size_t layer, kdalab_kv_cache **cache)
{
    kdalab_clear_error();
    kdalab_status st = kdalab__hybrid_check_layer(s, layer, "hybrid_kv_cache");
    if (st != KDALAB_OK)
        return st;
    if (!cache)
        return kdalab_fail(KDALAB_ENULL, "hybrid_kv_cache: cache is NULL");
    if (s->model) {
        if (!s->model->blocks[layer].cache)
            return kdalab_fail(KDALAB_EINVAL, "hybrid_kv_cache: block %zu is a linear mixer",
                               layer);
        *cache = s->model->blocks[layer].cache;
        return KDALAB_OK;
    }
    if (s->layers[layer].kind != KDALAB_HYBRID_ATTENTION)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_kv_cache: layer %zu is KDA", layer);
    *cache = s->layers[layer].cache;
    return KDALAB_OK;
}

/* ---- memory held --------------------------------------------------------- */

kdalab_status kdalab_hybrid_cache_bytes(const kdalab_hybrid *s, size_t *per_layer, size_t *total)
{
    kdalab_clear_error();
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_cache_bytes: stack is NULL");
    size_t sum = 0;
    const size_t L = s->model ? s->model->cfg.L : s->cfg.n_layers;
    for (size_t l = 0; l < L; l++) {
        const hybrid_layer *ly = s->model ? NULL : &s->layers[l];
        size_t b = s->model                    ? kdalab__hybrid_model_bytes(s->model, l)
                   : ly->kind == KDALAB_HYBRID_KDA ? ly->state_bytes
                                                   : kdalab_kv_cache_bytes(ly->cache);
        if (per_layer)
            per_layer[l] = b;
        sum += b;
    }
    if (total)
        *total = sum;
    return KDALAB_OK;
}
