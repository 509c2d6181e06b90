/*
 * lib/model/stack.c — a hybrid stack's memory: building the chapter's stack
 * (zeroed, or with seeded random weights) and its blocks, each block's
 * decode-time memory, freeing a stack, resetting its memory, the accessors
 * that hand out its parts, and the bytes its memory holds.
 *
 * defines: kdalab_hybrid_new_random, kdalab_hybrid_free, kdalab_hybrid_reset,
 *          kdalab_hybrid_config_of, kdalab_hybrid_position,
 *          kdalab_hybrid_layer_weights, kdalab_hybrid_kda_state,
 *          kdalab_hybrid_kv_cache, kdalab_hybrid_cache_bytes (public);
 *          kdalab__hybrid_block_memory, kdalab__hybrid_check_layer
 *          (hybrid_internal.h)
 *
 * Each chapter layer's weights are one block of memory, laid out wq, wk, wv,
 * wo, norm and then, for KDA layers only, wg, bg, wbeta; its hybrid_block
 * points into it. Whichever the stack, each block owns its memory (a linear
 * mixer's state, an attention mixer's cache, the convolution's taps), so
 * free, reset, the state and cache accessors and the cache bytes read the
 * blocks alone; only kdalab_hybrid_layer_weights is the chapter's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "hybrid_internal.h"

#define TAPS (TRAIN_CONV_W - 1) /* rows of history the convolution reads */

/* ---- building and freeing ------------------------------------------------ */

void kdalab_hybrid_free(kdalab_hybrid *s)
{
    if (!s)
        return;
    for (size_t l = 0; s->blocks && l < s->L; l++) {
        free(s->blocks[l].state);
        kdalab_kv_cache_free(s->blocks[l].cache);
        free(s->blocks[l].taps);
    }
    free(s->blocks);
    for (size_t l = 0; s->layers && l < s->L; l++)
        free(s->layers[l].weights);
    free(s->layers);
    if (s->model)
        free(s->model->theta);
    free(s->model);
    free(s->kinds);
    free(s);
}

int kdalab__hybrid_block_memory(hybrid_block *b, size_t D, size_t H, int conv)
{
    const size_t d = D / H;
    if (b->attention) {
        if (!(b->cache = kdalab_kv_cache_new(H, d, d)))
            return 0;
    } else {
        /* H d^2 <= D^2, Wq's size (checked); on its own cache lines: a decode
         * step streams the whole state */
        b->state_bytes = H * d * d * sizeof(double);
        const size_t bytes = (b->state_bytes + 63) / 64 * 64;
        if (!(b->state = aligned_alloc(64, bytes)))
            return 0;
        memset(b->state, 0, bytes);
    }
    return !conv || (b->taps = calloc(3 * TAPS * D, sizeof(double))) != NULL;
}

/* Doubles of weights one layer of the given kind holds. */
static size_t layer_weight_count(size_t d, size_t H, kdalab_hybrid_kind kind)
{
    size_t n = 4 * d * d + d;
    if (kind == KDALAB_HYBRID_KDA)
        n += d * d + d + d * H;
    return n;
}

/* Chapter layer l's weights (zeroed, gain 1) and its block: pre-norm (when
 * the stack has it), projections, KDA's L2 norm (eps 0), beta and bounded
 * gate; no convolution, SiLU, output norm or gate, MLP. 0: out of memory. */
static int chapter_layer(kdalab_hybrid *s, size_t l)
{
    const size_t d = s->D, H = s->H;
    hybrid_layer *ly = &s->layers[l];
    hybrid_block *b = &s->blocks[l];
    const int kda = s->kinds[l] == KDALAB_HYBRID_KDA;
    if (!(ly->weights = calloc(layer_weight_count(d, H, s->kinds[l]), sizeof(double))))
        return 0;
    double *w = ly->weights;
    ly->wq = w; w += d * d;
    ly->wk = w; w += d * d;
    ly->wv = w; w += d * d;
    ly->wo = w; w += d * d;
    ly->norm = w; w += d;
    for (size_t c = 0; c < d; c++)
        ly->norm[c] = 1.0;
    if (kda) {
        ly->wg = w; w += d * d;
        ly->bg = w; w += d;
        ly->wbeta = w;
    }
    *b = (hybrid_block){.attention = !kda, .mech = KDALAB_KDA,
                        .norm1 = s->cfg.rms_norm ? ly->norm : NULL,
                        .wq = ly->wq, .wk = ly->wk, .wv = ly->wv, .wo = ly->wo,
                        .l2_eps = 0, .wbeta = ly->wbeta,
                        .gate = kda ? HYBRID_GATE_BOUNDED : HYBRID_GATE_NONE,
                        .lower_bound = s->cfg.gate_lower_bound, .wg = ly->wg, .bg = ly->bg};
    return kdalab__hybrid_block_memory(b, d, H, 0);
}

/* A chapter stack for cfg with zeroed weights (gains 1), empty caches and
 * zero states, in *out. Errors: those of kdalab_hybrid_config_check,
 * KDALAB_ENULL (out), KDALAB_ENOMEM. */
static kdalab_status chapter_alloc(const kdalab_hybrid_config *cfg, kdalab_hybrid **out)
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
    s->L = L;
    s->D = d;
    s->H = H;
    s->dh = dh;
    s->scale = cfg->scale > 0 ? cfg->scale : 1.0 / sqrt((double)dh);
    s->kinds = calloc(L, sizeof *s->kinds);
    s->layers = calloc(L, sizeof *s->layers);
    s->blocks = calloc(L, sizeof *s->blocks);
    if (!s->kinds || !s->layers || !s->blocks)
        goto nomem;
    for (size_t l = 0; l < L; l++)
        s->kinds[l] = cfg->kinds ? cfg->kinds[l] : kdalab__hybrid_kind_by_ratio(cfg, l);
    s->cfg.kinds = s->kinds;
    for (size_t l = 0; l < L; l++)
        if (!chapter_layer(s, l))
            goto nomem;
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
    kdalab_status st = chapter_alloc(cfg, &s);
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
        const int kda = s->kinds[l] == KDALAB_HYBRID_KDA;
        /* Every matrix N(0, 1/d), in a fixed order; the gain stays 1. */
        double *mats[5] = {ly->wq, ly->wk, ly->wv, ly->wo, ly->wg};
        size_t n_mat = kda ? 5 : 4;
        for (size_t m = 0; m < n_mat; m++)
            for (size_t i = 0; i < d * d; i++)
                mats[m][i] = gsl_ran_gaussian(rng, sd);
        if (!kda)
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
    /* emptying a cache keeps its memory: a reset cannot run out of memory
     * halfway and leave the stack half reset */
    for (size_t l = 0; l < s->L; l++) {
        hybrid_block *b = &s->blocks[l];
        kdalab_kv_cache_clear(b->cache);
        if (b->state)
            memset(b->state, 0, b->state_bytes);
        if (b->taps)
            memset(b->taps, 0, 3 * TAPS * s->D * sizeof(double));
    }
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
    if (layer >= s->L)
        return kdalab_fail(KDALAB_EINVAL, "%s: layer %zu >= n_layers %zu", what, layer, s->L);
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
    *out = (kdalab_hybrid_weights){s->kinds[layer], ly->norm, ly->wq, ly->wk, ly->wv, ly->wo,
                                   ly->wg, ly->bg, ly->wbeta};
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
    if (!s->blocks[layer].state)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_kda_state: layer %zu is attention", layer);
    *state = s->blocks[layer].state;
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
    if (!s->blocks[layer].cache)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_kv_cache: layer %zu is a linear mixer (%s)",
                           layer, kdalab_mechanism_name(s->blocks[layer].mech));
    *cache = s->blocks[layer].cache;
    return KDALAB_OK;
}

/* ---- memory held --------------------------------------------------------- */

kdalab_status kdalab_hybrid_cache_bytes(const kdalab_hybrid *s, size_t *per_layer, size_t *total)
{
    kdalab_clear_error();
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_cache_bytes: stack is NULL");
    size_t sum = 0;
    for (size_t l = 0; l < s->L; l++) {
        const hybrid_block *b = &s->blocks[l];
        size_t n = b->cache ? kdalab_kv_cache_bytes(b->cache) : b->state_bytes;
        if (b->taps)
            n += 3 * TAPS * s->D * sizeof(double);
        if (per_layer)
            per_layer[l] = n;
        sum += n;
    }
    if (total)
        *total = sum;
    return KDALAB_OK;
}
