/*
 * lib/core/status.c — status messages, the per-thread error detail, names of
 * mechanisms, decay modes and precisions, and small shared defaults.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[512];

const char *kdalab_strerror(kdalab_status status)
{
    switch (status) {
    case KDALAB_OK:         return "success";
    case KDALAB_ENULL:      return "a required pointer is NULL";
    case KDALAB_ESIZE:      return "a size is zero or the shapes disagree";
    case KDALAB_EOVERFLOW:  return "a product of sizes overflows";
    case KDALAB_EDOMAIN:    return "a value is outside its domain (g > 0, beta outside [0,2], scale <= 0)";
    case KDALAB_ENONFINITE: return "an input holds NaN or Inf";
    case KDALAB_EINVAL:     return "an option is invalid";
    case KDALAB_ENOMEM:     return "out of memory";
    case KDALAB_ERANGE:     return "the computation produced non-finite values";
    case KDALAB_EIO:        return "a file could not be read or written";
    case KDALAB_EFORMAT:    return "a file is malformed";
    case KDALAB_EDTYPE:     return "a file holds an unsupported dtype";
    }
    return "unknown status";
}

const char *kdalab_last_error(void) { return last_error; }

void kdalab_clear_error(void) { last_error[0] = '\0'; }

kdalab_status kdalab_fail(kdalab_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int kdalab_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

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

kdalab_status kdalab_check_chunk_opts(const kdalab_chunk_opts *opts, int want_fp32,
                                      kdalab_chunk_opts *out)
{
    *out = opts ? *opts : kdalab_chunk_opts_default();
    if (out->chunk < 1)
        return kdalab_fail(KDALAB_EINVAL, "chunk size C = %zu; it must be >= 1", out->chunk);
    if (out->subchunk < 1)
        return kdalab_fail(KDALAB_EINVAL, "sub-chunk size c = %zu; it must be >= 1",
                           out->subchunk);
    if ((unsigned)out->decay > (unsigned)KDALAB_DECAY_ANCHORED)
        return kdalab_fail(KDALAB_EINVAL, "unknown decay mode %d", (int)out->decay);
    if ((unsigned)out->precision > (unsigned)KDALAB_FP16)
        return kdalab_fail(KDALAB_EINVAL, "unknown precision %d", (int)out->precision);
    if (want_fp32 && out->precision != KDALAB_FP32)
        return kdalab_fail(KDALAB_EINVAL,
                           "precision %s needs kdalab_chunk_f32; the float64 form is exact",
                           kdalab_precision_name(out->precision));
    return KDALAB_OK;
}
