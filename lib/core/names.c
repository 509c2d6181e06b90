/*
 * lib/core/names.c — names of mechanisms, decay modes and precisions (and
 * their parsers), what each mechanism takes, and the defaults every path
 * uses: the query scale and the chunk options.
 *
 * defines: kdalab_mechanism_name, kdalab_mechanism_parse, kdalab_decay_name,
 *          kdalab_decay_parse, kdalab_precision_name, kdalab_mechanism_has_beta,
 *          kdalab_mechanism_g_width, kdalab_default_scale,
 *          kdalab_chunk_opts_default
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- names ---------------------------------------------------------------- */

static const char *const mechanism_names[] = {"linear_attention", "deltanet",
                                              "gated_deltanet", "kda"};
static const char *const decay_names[] = {"safe", "pairwise", "rescaled", "anchored"};
static const char *const precision_names[] = {"fp32", "bf16", "fp16"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_of(const char *const *names, size_t n, int value)
{
    return (value >= 0 && (size_t)value < n) ? names[value] : "unknown";
}

static kdalab_status parse_name(const char *const *names, size_t n, const char *what,
                                const char *name, int *out)
{
    if (!name || !out)
        return kdalab_fail(KDALAB_ENULL, "%s: NULL argument", what);
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (int)i;
            return KDALAB_OK;
        }
    return kdalab_fail(KDALAB_EINVAL, "unknown %s '%s'", what, name);
}

const char *kdalab_mechanism_name(kdalab_mechanism m)
{
    return name_of(mechanism_names, COUNT(mechanism_names), (int)m);
}

kdalab_status kdalab_mechanism_parse(const char *name, kdalab_mechanism *out)
{
    kdalab_clear_error();
    int v = 0;
    kdalab_status s = parse_name(mechanism_names, COUNT(mechanism_names), "mechanism", name, &v);
    if (s == KDALAB_OK)
        *out = (kdalab_mechanism)v;
    return s;
}

const char *kdalab_decay_name(kdalab_decay_mode mode)
{
    return name_of(decay_names, COUNT(decay_names), (int)mode);
}

kdalab_status kdalab_decay_parse(const char *name, kdalab_decay_mode *out)
{
    kdalab_clear_error();
    int v = 0;
    kdalab_status s = parse_name(decay_names, COUNT(decay_names), "decay mode", name, &v);
    if (s == KDALAB_OK)
        *out = (kdalab_decay_mode)v;
    return s;
}

const char *kdalab_precision_name(kdalab_precision p)
{
    return name_of(precision_names, COUNT(precision_names), (int)p);
}

int kdalab_mechanism_has_beta(kdalab_mechanism m) { return m != KDALAB_LINEAR_ATTENTION; }

size_t kdalab_mechanism_g_width(kdalab_mechanism m, size_t K)
{
    return m == KDALAB_KDA ? K : m == KDALAB_GATED_DELTANET ? 1 : 0;
}

double kdalab_default_scale(size_t K) { return K ? 1.0 / sqrt((double)K) : 0.0; }

kdalab_chunk_opts kdalab_chunk_opts_default(void)
{
    kdalab_chunk_opts o = {.chunk = 64, .subchunk = 16, .decay = KDALAB_DECAY_SAFE,
                           .precision = KDALAB_FP32};
    return o;
}
