/*
 * kdalab_status.h — status codes and the per-thread error detail, shared by every module;
 * also the declaration brackets every public header uses.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_STATUS_H
#define KDALAB_STATUS_H

#include <stddef.h>

/*
 * Every public header wraps its declarations in KDALAB_BEGIN_DECLS /
 * KDALAB_END_DECLS: C linkage for C++ callers, and default symbol visibility,
 * so that a library built with -fvisibility=hidden exports exactly the
 * functions declared in its public headers and nothing internal.
 */
#ifdef __cplusplus
#define KDALAB_BEGIN_DECLS extern "C" { _Pragma("GCC visibility push(default)")
#define KDALAB_END_DECLS _Pragma("GCC visibility pop") }
#else
#define KDALAB_BEGIN_DECLS _Pragma("GCC visibility push(default)")
#define KDALAB_END_DECLS _Pragma("GCC visibility pop")
#endif

#define KDALAB_VERSION "0.1.0"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Status codes                                                              */
/* ------------------------------------------------------------------------- */

typedef enum {
    KDALAB_OK = 0,
    KDALAB_ENULL,      /* a required pointer is NULL                               */
    KDALAB_ESIZE,      /* a size is zero where it must not be, or shapes disagree  */
    KDALAB_EOVERFLOW,  /* a product of sizes overflows size_t                      */
    KDALAB_EDOMAIN,    /* a value is out of its domain: g > 0, beta outside [0,2], */
                       /* scale not finite and positive                            */
    KDALAB_ENONFINITE, /* an input holds NaN or Inf                                */
    KDALAB_EINVAL,     /* an option is invalid: chunk size < 1, unknown mode, ...  */
    KDALAB_ENOMEM,     /* allocation failed                                        */
    KDALAB_ERANGE,     /* the computation produced non-finite values; outputs ARE  */
                       /* written (so they can be studied) and counted in the      */
                       /* report                                                   */
    KDALAB_EIO,        /* a file could not be opened, read, written or renamed     */
    KDALAB_EFORMAT,    /* a file is malformed (.npy header, truncated data, ...)   */
    KDALAB_EDTYPE      /* a file holds a dtype kdalab does not read                */
} kdalab_status;

/* A short, static message for a status ("g > 0 or beta outside [0,2]", ...). */
const char *kdalab_strerror(kdalab_status status);

/*
 * The detail of the last error raised on this thread, e.g.
 * "q.npy: dtype '|u1' is not supported (only <f8, >f8, <f4, >f4)". Every
 * public function that can fail (each that returns a kdalab_status, and
 * kdalab_kv_cache_new) empties it first, so it never holds an earlier
 * call's message: after such a call it is that call's error, or "" when
 * the call succeeded. The functions that cannot fail (names, defaults,
 * kdalab_strerror, this one) leave it as it is, so
 * printf("%s: %s", kdalab_strerror(s), kdalab_last_error()) prints the
 * error whatever order the arguments are evaluated in. Never NULL.
 */
const char *kdalab_last_error(void);

KDALAB_END_DECLS

#endif /* KDALAB_STATUS_H */
