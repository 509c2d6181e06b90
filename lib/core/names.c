/*
 * lib/core/names.c — names of decay modes and precisions (and their
 * parsers), and the defaults every path uses: the query scale and the chunk
 * options. (The mechanisms' names are rows of lib/core/mechanisms.c.)
 *
 * defines: kdalab_decay_name, kdalab_decay_parse, kdalab_precision_name,
 *          kdalab_default_scale, kdalab_chunk_opts_default
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- names ---------------------------------------------------------------- */

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

double kdalab_default_scale(size_t K) { return K ? 1.0 / sqrt((double)K) : 0.0; }

kdalab_chunk_opts kdalab_chunk_opts_default(void)
{
    kdalab_chunk_opts o = {.chunk = 64, .subchunk = 16, .decay = KDALAB_DECAY_SAFE,
                           .precision = KDALAB_FP32};
    return o;
}
