/*
 * lib/hybrid.c — the KDA + attention hybrid stack (seed chapter, "Do not
 * choose. Interleave."; issue 3). A stack of L mixing layers over a residual
 * stream of width d_model; each layer is KDA (fixed-size state) or causal
 * softmax attention without positional encoding (growing KV cache), chosen by
 * a ratio N:M or an explicit list. See the "Hybrid stack" section of
 * kdalab.h for every equation and shape.
 *
 * The kernels are the library's own: kdalab_chunk_f64 (prefill) and
 * kdalab_step_f64 (decode) for KDA, kdalab_attention_f64 and the
 * kdalab_kv_cache_* functions for attention. This file only adds the
 * projections, the gate, beta, the L2 norm of q and k, the output projection
 * and the residual add, and keeps the per-layer memory.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "internal.h"
#include "kdalab.h"

/* One mixing layer: its weights (one allocation) and its decode-time memory. */
typedef struct {
    kdalab_hybrid_kind kind;
    double *weights;          /* every matrix below points into this block    */
    double *norm;             /* [d] RMSNorm gain                                */
    double *wq, *wk, *wv, *wo; /* [d, d]                                       */
    double *wg, *bg, *wbeta;  /* [d, d], [d], [d, H]; NULL for attention        */
    double *state;            /* KDA: [H, dh, dh]; NULL for attention           */
    size_t state_bytes;       /* bytes allocated for state                      */
    kdalab_kv_cache *cache;   /* attention: the KV cache; NULL for KDA          */
} hybrid_layer;

struct kdalab_hybrid {
    kdalab_hybrid_config cfg;  /* cfg.kinds points at kinds below               */
    kdalab_hybrid_kind *kinds; /* [L] resolved kinds                            */
    size_t dh;                 /* d_head = d_model / H                          */
    double scale;              /* resolved query scale                          */
    size_t position;           /* tokens consumed                               */
    hybrid_layer *layers;      /* [L]                                           */
};

/* ------------------------------------------------------------------------- */
/* Configuration                                                             */
/* ------------------------------------------------------------------------- */

const char *kdalab_hybrid_kind_name(kdalab_hybrid_kind kind)
{
    switch (kind) {
    case KDALAB_HYBRID_KDA:       return "kda";
    case KDALAB_HYBRID_ATTENTION: return "attention";
    }
    return "unknown";
}

kdalab_hybrid_config kdalab_hybrid_config_default(void)
{
    kdalab_hybrid_config c;
    c.n_layers = 4;
    c.d_model = 64;
    c.n_heads = 2;
    c.ratio_kda = 3;
    c.ratio_attention = 1;
    c.kinds = NULL;
    c.gate_lower_bound = -5.0;
    c.scale = 0.0;
    c.rms_norm = 1;
    return c;
}

/* Doubles of weights one layer of the given kind holds. */
static size_t layer_weight_count(size_t d, size_t H, kdalab_hybrid_kind kind)
{
    size_t n = 4 * d * d + d;
    if (kind == KDALAB_HYBRID_KDA)
        n += d * d + d + d * H;
    return n;
}

kdalab_status kdalab_hybrid_config_check(const kdalab_hybrid_config *cfg)
{
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "hybrid: config is NULL");
    if (cfg->n_layers == 0)
        return kdalab_fail(KDALAB_ESIZE, "hybrid: n_layers is 0");
    if (cfg->d_model == 0)
        return kdalab_fail(KDALAB_ESIZE, "hybrid: d_model is 0");
    if (cfg->n_heads == 0)
        return kdalab_fail(KDALAB_ESIZE, "hybrid: n_heads is 0");
    if (cfg->d_model % cfg->n_heads != 0)
        return kdalab_fail(KDALAB_ESIZE, "hybrid: n_heads %zu does not divide d_model %zu",
                           cfg->n_heads, cfg->d_model);
    if (!cfg->kinds) {
        if (cfg->ratio_kda == 0 && cfg->ratio_attention == 0)
            return kdalab_fail(KDALAB_ESIZE, "hybrid: ratio 0:0 (no layer kind at all)");
        if (cfg->ratio_kda > SIZE_MAX - cfg->ratio_attention)
            return kdalab_fail(KDALAB_EOVERFLOW, "hybrid: ratio %zu:%zu overflows",
                               cfg->ratio_kda, cfg->ratio_attention);
    } else {
        for (size_t l = 0; l < cfg->n_layers; l++)
            if (cfg->kinds[l] != KDALAB_HYBRID_KDA && cfg->kinds[l] != KDALAB_HYBRID_ATTENTION)
                return kdalab_fail(KDALAB_EINVAL, "hybrid: kinds[%zu] = %d is not a layer kind",
                                   l, (int)cfg->kinds[l]);
    }
    if (!isfinite(cfg->gate_lower_bound) || cfg->gate_lower_bound > 0)
        return kdalab_fail(KDALAB_EDOMAIN, "hybrid: gate_lower_bound %g must be finite and <= 0",
                           cfg->gate_lower_bound);
    if (cfg->rms_norm != 0 && cfg->rms_norm != 1)
        return kdalab_fail(KDALAB_EINVAL, "hybrid: rms_norm %d must be 0 or 1", cfg->rms_norm);
    if (!isfinite(cfg->scale) || cfg->scale < 0)
        return kdalab_fail(KDALAB_EDOMAIN, "hybrid: scale %g must be finite and >= 0 (0: default)",
                           cfg->scale);
    /* Every count used later: weights per layer and over the stack, state and
     * cache rows, bytes of each. */
    size_t d = cfg->d_model, H = cfg->n_heads, dd, dd5, dH, per_layer, all, bytes;
    if (!kdalab_mul_size(d, d, &dd) || !kdalab_mul_size(dd, 5, &dd5) ||
        !kdalab_mul_size(d, H, &dH) || dd5 > SIZE_MAX - d - dH)
        return kdalab_fail(KDALAB_EOVERFLOW, "hybrid: d_model %zu overflows the weight count", d);
    per_layer = dd5 + d + dH;
    if (per_layer > SIZE_MAX - d)
        return kdalab_fail(KDALAB_EOVERFLOW, "hybrid: d_model %zu overflows the weight count", d);
    per_layer += d;
    if (!kdalab_mul_size(per_layer, cfg->n_layers, &all) ||
        !kdalab_mul_size(all, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "hybrid: %zu layers of width %zu overflow",
                           cfg->n_layers, d);
    return KDALAB_OK;
}

static kdalab_hybrid_kind kind_by_ratio(const kdalab_hybrid_config *cfg, size_t layer)
{
    size_t period = cfg->ratio_kda + cfg->ratio_attention;
    return (layer % period) >= cfg->ratio_kda ? KDALAB_HYBRID_ATTENTION : KDALAB_HYBRID_KDA;
}

kdalab_status kdalab_hybrid_layer_kind(const kdalab_hybrid_config *cfg, size_t layer,
                                       kdalab_hybrid_kind *out)
{
    kdalab_status st = kdalab_hybrid_config_check(cfg);
    if (st != KDALAB_OK)
        return st;
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_layer_kind: out is NULL");
    if (layer >= cfg->n_layers)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_layer_kind: layer %zu >= n_layers %zu", layer,
                           cfg->n_layers);
    *out = cfg->kinds ? cfg->kinds[layer] : kind_by_ratio(cfg, layer);
    return KDALAB_OK;
}

/* ------------------------------------------------------------------------- */
/* Construction                                                              */
/* ------------------------------------------------------------------------- */

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
    free(s->kinds);
    free(s);
}

/* A stack with zeroed weights, empty caches and zero states. */
static kdalab_status hybrid_alloc(const kdalab_hybrid_config *cfg, kdalab_hybrid **out)
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
        s->kinds[l] = cfg->kinds ? cfg->kinds[l] : kind_by_ratio(cfg, l);
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
            ly->state = calloc(n_state, sizeof(double));
            if (!ly->state)
                goto nomem;
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
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_random: out is NULL");
    *out = NULL;
    kdalab_hybrid *s = NULL;
    kdalab_status st = hybrid_alloc(cfg, &s);
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

/* The files of one layer: name, pointer into the layer, shape. */
typedef struct {
    const char *name;
    double *data;
    int ndim;
    size_t shape[2];
} weight_file;

static size_t layer_files(const kdalab_hybrid *s, const hybrid_layer *ly, weight_file f[8])
{
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, n = 0;
    if (s->cfg.rms_norm)
        f[n++] = (weight_file){"norm", ly->norm, 1, {d, 0}};
    f[n++] = (weight_file){"wq", ly->wq, 2, {d, d}};
    f[n++] = (weight_file){"wk", ly->wk, 2, {d, d}};
    f[n++] = (weight_file){"wv", ly->wv, 2, {d, d}};
    f[n++] = (weight_file){"wo", ly->wo, 2, {d, d}};
    if (ly->kind == KDALAB_HYBRID_KDA) {
        f[n++] = (weight_file){"wg", ly->wg, 2, {d, d}};
        f[n++] = (weight_file){"bg", ly->bg, 1, {d, 0}};
        f[n++] = (weight_file){"wbeta", ly->wbeta, 2, {d, H}};
    }
    return n;
}

static int weight_path(char *buf, size_t len, const char *dir, size_t layer, const char *name)
{
    int n = snprintf(buf, len, "%s/layer%02zu.%s.npy", dir, layer, name);
    return n > 0 && (size_t)n < len;
}

kdalab_status kdalab_hybrid_new_npy(const kdalab_hybrid_config *cfg, const char *dir,
                                    kdalab_hybrid **out)
{
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_npy: out is NULL");
    *out = NULL;
    if (!dir)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_npy: dir is NULL");
    kdalab_hybrid *s = NULL;
    kdalab_status st = hybrid_alloc(cfg, &s);
    if (st != KDALAB_OK)
        return st;
    char path[4096];
    for (size_t l = 0; l < cfg->n_layers; l++) {
        weight_file f[8];
        size_t nf = layer_files(s, &s->layers[l], f);
        for (size_t i = 0; i < nf; i++) {
            if (!weight_path(path, sizeof path, dir, l, f[i].name)) {
                st = kdalab_fail(KDALAB_EIO, "hybrid_new_npy: path too long in '%s'", dir);
                goto fail;
            }
            kdalab_array a;
            st = kdalab_npy_read(path, &a);
            if (st != KDALAB_OK)
                goto fail; /* kdalab_npy_read set the detail, with the path */
            int ok = a.ndim == f[i].ndim;
            for (int j = 0; ok && j < f[i].ndim; j++)
                ok = a.shape[j] == f[i].shape[j];
            if (!ok) {
                if (f[i].ndim == 1)
                    st = kdalab_fail(KDALAB_ESIZE, "hybrid_new_npy: %s: expected shape [%zu]",
                                     path, f[i].shape[0]);
                else
                    st = kdalab_fail(KDALAB_ESIZE, "hybrid_new_npy: %s: expected shape [%zu, %zu]",
                                     path, f[i].shape[0], f[i].shape[1]);
                kdalab_array_free(&a);
                goto fail;
            }
            st = kdalab_check_finite_f64(path, a.data, a.size);
            if (st != KDALAB_OK) {
                kdalab_array_free(&a);
                goto fail;
            }
            memcpy(f[i].data, a.data, a.size * sizeof(double));
            kdalab_array_free(&a);
        }
    }
    *out = s;
    kdalab_clear_error();
    return KDALAB_OK;
fail:
    kdalab_hybrid_free(s);
    return st;
}

kdalab_status kdalab_hybrid_save_npy(const kdalab_hybrid *s, const char *dir)
{
    if (!s || !dir)
        return kdalab_fail(KDALAB_ENULL, "hybrid_save_npy: NULL argument");
    char path[4096];
    for (size_t l = 0; l < s->cfg.n_layers; l++) {
        weight_file f[8];
        size_t nf = layer_files(s, &s->layers[l], f);
        for (size_t i = 0; i < nf; i++) {
            if (!weight_path(path, sizeof path, dir, l, f[i].name))
                return kdalab_fail(KDALAB_EIO, "hybrid_save_npy: path too long in '%s'", dir);
            kdalab_status st = kdalab_npy_write(path, KDALAB_DTYPE_F64, f[i].data, f[i].ndim,
                                                f[i].shape);
            if (st != KDALAB_OK)
                return st;
        }
    }
    kdalab_clear_error();
    return KDALAB_OK;
}

/* ------------------------------------------------------------------------- */
/* Accessors                                                                 */
/* ------------------------------------------------------------------------- */

const kdalab_hybrid_config *kdalab_hybrid_config_of(const kdalab_hybrid *s)
{
    return s ? &s->cfg : NULL;
}

size_t kdalab_hybrid_position(const kdalab_hybrid *s) { return s ? s->position : 0; }

kdalab_status kdalab_hybrid_reset(kdalab_hybrid *s)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_reset: stack is NULL");
    size_t H = s->cfg.n_heads, dh = s->dh;
    /* Build the new caches first, so a failed allocation changes nothing. */
    for (size_t l = 0; l < s->cfg.n_layers; l++) {
        hybrid_layer *ly = &s->layers[l];
        if (ly->kind != KDALAB_HYBRID_ATTENTION || kdalab_kv_cache_tokens(ly->cache) == 0)
            continue;
        kdalab_kv_cache *fresh = kdalab_kv_cache_new(H, dh, dh);
        if (!fresh)
            return kdalab_fail(KDALAB_ENOMEM, "hybrid_reset: out of memory");
        kdalab_kv_cache_free(ly->cache);
        ly->cache = fresh;
    }
    for (size_t l = 0; l < s->cfg.n_layers; l++)
        if (s->layers[l].state)
            memset(s->layers[l].state, 0, s->layers[l].state_bytes);
    s->position = 0;
    kdalab_clear_error();
    return KDALAB_OK;
}

static kdalab_status check_layer(const kdalab_hybrid *s, size_t layer, const char *what)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "%s: stack is NULL", what);
    if (layer >= s->cfg.n_layers)
        return kdalab_fail(KDALAB_EINVAL, "%s: layer %zu >= n_layers %zu", what, layer,
                           s->cfg.n_layers);
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_layer_weights(kdalab_hybrid *s, size_t layer,
                                          kdalab_hybrid_weights *out)
{
    kdalab_status st = check_layer(s, layer, "hybrid_layer_weights");
    if (st != KDALAB_OK)
        return st;
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_layer_weights: out is NULL");
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
    kdalab_status st = check_layer(s, layer, "hybrid_kda_state");
    if (st != KDALAB_OK)
        return st;
    if (!state)
        return kdalab_fail(KDALAB_ENULL, "hybrid_kda_state: state is NULL");
    if (s->layers[layer].kind != KDALAB_HYBRID_KDA)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_kda_state: layer %zu is attention", layer);
    *state = s->layers[layer].state;
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_kv_cache(kdalab_hybrid *s, size_t layer, kdalab_kv_cache **cache)
{
    kdalab_status st = check_layer(s, layer, "hybrid_kv_cache");
    if (st != KDALAB_OK)
        return st;
    if (!cache)
        return kdalab_fail(KDALAB_ENULL, "hybrid_kv_cache: cache is NULL");
    if (s->layers[layer].kind != KDALAB_HYBRID_ATTENTION)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_kv_cache: layer %zu is KDA", layer);
    *cache = s->layers[layer].cache;
    return KDALAB_OK;
}

kdalab_status kdalab_hybrid_cache_bytes(const kdalab_hybrid *s, size_t *per_layer, size_t *total)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "hybrid_cache_bytes: stack is NULL");
    size_t sum = 0;
    for (size_t l = 0; l < s->cfg.n_layers; l++) {
        const hybrid_layer *ly = &s->layers[l];
        size_t b = ly->kind == KDALAB_HYBRID_KDA ? ly->state_bytes : kdalab_kv_cache_bytes(ly->cache);
        if (per_layer)
            per_layer[l] = b;
        sum += b;
    }
    if (total)
        *total = sum;
    return KDALAB_OK;
}

/* ------------------------------------------------------------------------- */
/* The layer computation                                                     */
/* ------------------------------------------------------------------------- */

/* out [T, n_out] = x [T, n_in] W [n_in, n_out] (+= when accumulate). */
static void matmul(size_t T, size_t n_in, size_t n_out, const double *x, const double *W,
                   double *out, int accumulate)
{
    for (size_t t = 0; t < T; t++) {
        double *o = out + t * n_out;
        const double *xt = x + t * n_in;
        if (!accumulate)
            for (size_t j = 0; j < n_out; j++)
                o[j] = 0.0;
        for (size_t i = 0; i < n_in; i++) {
            double xi = xt[i];
            const double *w = W + i * n_out;
            for (size_t j = 0; j < n_out; j++)
                o[j] += xi * w[j];
        }
    }
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* The root mean square of x[0..n), scaled by its largest magnitude first
 * (as BLAS's dnrm2 does) so that neither 1e160 nor 1e-170 over- or
 * underflows when squared. */
static double root_mean_square(const double *x, size_t n)
{
    double mx = 0.0, ss = 0.0;
    for (size_t c = 0; c < n; c++)
        mx = fmax(mx, fabs(x[c]));
    if (mx == 0.0)
        return 0.0;
    for (size_t c = 0; c < n; c++)
        ss += (x[c] / mx) * (x[c] / mx);
    return mx * sqrt(ss / (double)n);
}

/* Normalise each of the n rows of length m to unit L2 norm (zero rows stay zero). */
static void l2_normalise(double *x, size_t n, size_t m)
{
    for (size_t r = 0; r < n; r++) {
        double *row = x + r * m;
        double norm = root_mean_square(row, m) * sqrt((double)m);
        if (norm > 0)
            for (size_t c = 0; c < m; c++)
                row[c] /= norm;
    }
}

/* u [T, d] = RMSNorm(x) with gain w: x / sqrt(mean(x^2) + 1e-6) * w. */
static void rms_norm(size_t T, size_t d, const double *x, const double *w, double *u)
{
    const double eps = 1e-6;
    for (size_t t = 0; t < T; t++) {
        const double *xt = x + t * d;
        double rms = root_mean_square(xt, d);
        /* 1 / sqrt(rms^2 + eps), without squaring a huge rms */
        double inv = rms > 1.0 ? 1.0 / (rms * sqrt(1.0 + eps / (rms * rms)))
                               : 1.0 / sqrt(rms * rms + eps);
        for (size_t c = 0; c < d; c++)
            u[t * d + c] = xt[c] * inv * w[c];
    }
}

/* The projections of one layer (no checks): any output may be NULL. scratch
 * [T, d] holds the normalised rows when the stack has rms_norm. */
static void project(const kdalab_hybrid *s, const hybrid_layer *ly, size_t T, const double *x,
                    double *scratch, double *q, double *k, double *v, double *g, double *beta)
{
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, dh = s->dh;
    int kda = ly->kind == KDALAB_HYBRID_KDA;
    if (s->cfg.rms_norm) {
        rms_norm(T, d, x, ly->norm, scratch);
        x = scratch;
    }
    if (q) {
        matmul(T, d, d, x, ly->wq, q, 0);
        if (kda)
            l2_normalise(q, T * H, dh);
    }
    if (k) {
        matmul(T, d, d, x, ly->wk, k, 0);
        if (kda)
            l2_normalise(k, T * H, dh);
    }
    if (v)
        matmul(T, d, d, x, ly->wv, v, 0);
    if (!kda)
        return;
    if (g) {
        matmul(T, d, d, x, ly->wg, g, 0);
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < d; c++)
                g[t * d + c] = s->cfg.gate_lower_bound * sigmoid(g[t * d + c] + ly->bg[c]);
    }
    if (beta) {
        matmul(T, d, H, x, ly->wbeta, beta, 0);
        for (size_t i = 0; i < T * H; i++)
            beta[i] = sigmoid(beta[i]);
    }
}

kdalab_status kdalab_hybrid_layer_project(const kdalab_hybrid *s, size_t layer, size_t T,
                                          const double *x, double *q, double *k, double *v,
                                          double *g, double *beta)
{
    kdalab_status st = check_layer(s, layer, "hybrid_layer_project");
    if (st != KDALAB_OK)
        return st;
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

/* Work buffers for T tokens: q, k, v, g, o [T, d], beta [T, H], ht [H, dh, dh]. */
typedef struct {
    double *q, *k, *v, *g, *o, *beta, *ht, *cur, *u;
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

/* One attention layer over T new tokens whose k, v are in w: append them to
 * the cache and, when want_out, write the outputs into w->o. */
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

/* KDA over T tokens: chunkwise (prefill) or by the decode step per head. */
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

/* The forward pass shared by prefill (by_step = 0) and decode (by_step = 1). */
static kdalab_status forward(kdalab_hybrid *s, size_t T, const double *x, double *y,
                             double *layer_inputs, int by_step, const char *what)
{
    if (!s)
        return kdalab_fail(KDALAB_ENULL, "%s: stack is NULL", what);
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
            matmul(T, d, d, w.o, ly->wo, w.cur, 1); /* residual: cur += o W_o */
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
    return forward(s, T, x, y, layer_inputs, 0, "hybrid_prefill");
}

kdalab_status kdalab_hybrid_decode(kdalab_hybrid *s, const double *x, double *y,
                                   double *layer_inputs)
{
    if (!y)
        return kdalab_fail(KDALAB_ENULL, "hybrid_decode: y is NULL");
    return forward(s, 1, x, y, layer_inputs, 1, "hybrid_decode");
}
