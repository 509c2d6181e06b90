/*
 * lib/model/config.c — the configuration of a hybrid stack: its defaults, its
 * validation, and which layers are KDA and which attention (the ratio rule
 * N:M of kdalab_hybrid.h, or an explicit list).
 *
 * defines: kdalab_hybrid_kind_name, kdalab_hybrid_config_default,
 *          kdalab_hybrid_config_check, kdalab_hybrid_layer_kind (public);
 *          kdalab__hybrid_kind_by_ratio (hybrid_internal.h)
 */
#include <math.h>
#include <stdint.h>

#include "hybrid_internal.h"

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

kdalab_status kdalab_hybrid_config_check(const kdalab_hybrid_config *cfg)
{
    kdalab_clear_error();
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
    /* The counts the rest of the stack then computes unchecked: d*d (which
     * also bounds a KDA state, H*dh*dh = d*d/H), the doubles of the largest
     * layer (KDA: 5 d*d + 2 d + d*H), those of all L such layers, and their
     * bytes. A KV cache checks its own sizes as it grows. */
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

kdalab_hybrid_kind kdalab__hybrid_kind_by_ratio(const kdalab_hybrid_config *cfg, size_t layer)
{
    size_t period = cfg->ratio_kda + cfg->ratio_attention;
    return (layer % period) >= cfg->ratio_kda ? KDALAB_HYBRID_ATTENTION : KDALAB_HYBRID_KDA;
}

kdalab_status kdalab_hybrid_layer_kind(const kdalab_hybrid_config *cfg, size_t layer,
                                       kdalab_hybrid_kind *out)
{
    kdalab_clear_error();
    kdalab_status st = kdalab_hybrid_config_check(cfg);
    if (st != KDALAB_OK)
        return st;
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_layer_kind: out is NULL");
    if (layer >= cfg->n_layers)
        return kdalab_fail(KDALAB_EINVAL, "hybrid_layer_kind: layer %zu >= n_layers %zu", layer,
                           cfg->n_layers);
    *out = cfg->kinds ? cfg->kinds[layer] : kdalab__hybrid_kind_by_ratio(cfg, layer);
    return KDALAB_OK;
}
