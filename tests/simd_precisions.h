/*
 * tests/simd_precisions.h — the two precisions of the SIMD path as the SIMD
 * suites (test_simd_chunk, test_simd_step) drive them (tests/simd_precisions.c):
 * each test is written once, over this table, and registered once per
 * precision (SIMDT_BOTH), the way it loops over the dispatch levels
 * (tests/simd_levels.h).
 *
 * A test holds its arrays in double. The chunk and step entries take double
 * arrays: the float32 entries round the inputs to float, call the float32
 * function and widen what it wrote (an output the call leaves untouched comes
 * back as it was: the values the tests put there are exact in float); the
 * float64 entries call the float64 function. The decode step's state S is the
 * one array held in the precision itself (size bytes an element), because
 * where it sits from a cache line is what the step tests vary.
 */
#ifndef KDALAB_TESTS_SIMD_PRECISIONS_H
#define KDALAB_TESTS_SIMD_PRECISIONS_H

#include <stddef.h>

#include "kdalab.h"

typedef kdalab_status (*simdt_chunk_fn)(const kdalab_dims *d, kdalab_mechanism mech,
                                        double scale, const double *q, const double *k,
                                        const double *v, const double *g, const double *beta,
                                        const double *h0, double *o, double *ht,
                                        const kdalab_chunk_opts *opts, kdalab_report *report);
typedef kdalab_status (*simdt_step_fn)(kdalab_mechanism mech, size_t K, size_t V,
                                       double scale, const double *q, const double *k,
                                       const double *v, const double *g, double beta,
                                       void *S, double *o);

typedef struct {
    const char *name;     /* "float32" or "float64"                               */
    size_t size;          /* bytes of one element                                 */
    double tol;           /* max |error| / max |float64 reference| allowed        */
    double above_two;     /* the next value above 2 (beta just out of range)      */
    double tiny;          /* the smallest positive subnormal                      */
    double big_k, big_v;  /* finite, but k * v overflows                          */
    int emulates_bf16;    /* the chunkwise form takes KDALAB_BF16 (float32 only)  */
    simdt_chunk_fn simd_chunk, chunk; /* kdalab_simd_chunk_fNN, kdalab_chunk_fNN */
    simdt_step_fn simd_step, step;    /* kdalab_simd_step_fNN, kdalab_step_fNN   */
    void (*put)(void *dst, const double *src, size_t n); /* round into this precision */
    void (*get)(double *dst, const void *src, size_t n); /* and back, exactly         */
} simdt_precision;

extern const simdt_precision simdt_f32, simdt_f64;

/* Register test fn once per precision, named fn_f32 and fn_f64 (its state
 * is the precision's table: SIMDT_PREC(state)). */
#define SIMDT_BOTH(fn) {#fn "_f32", fn, NULL, NULL, (void *)&simdt_f32}, \
                       {#fn "_f64", fn, NULL, NULL, (void *)&simdt_f64}
#define SIMDT_PREC(state) ((const simdt_precision *)*(state))

#endif
