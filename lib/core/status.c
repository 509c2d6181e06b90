/*
 * lib/core/status.c — status messages, the per-thread error detail, and the
 * size-overflow check every allocation goes through.
 *
 * defines: kdalab_strerror, kdalab_last_error (public); kdalab_clear_error,
 *          kdalab_fail, kdalab_mul_size, kdalab_check_count (internal.h)
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
    /* formatted apart first: an argument may be kdalab_last_error() itself, the
     * cause a caller wraps, which formatting in place would overwrite as it read */
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return status;
}

int kdalab_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

kdalab_status kdalab_check_count(const char *what, size_t n, size_t elem_bytes)
{
    size_t bytes;
    if (!kdalab_mul_size(n, elem_bytes, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "%s: %zu elements of %zu bytes overflow the address space", what, n,
                           elem_bytes);
    return KDALAB_OK;
}
