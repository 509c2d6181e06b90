/*
 * tests/simd_precisions.c — the two precisions of the SIMD path as the SIMD
 * suites drive them (tests/simd_precisions.h).
 *
 * Tolerances, relative to max |float64 reference|:
 * - float32, 1e-5: the accuracy kdalab promises of a float32 implementation.
 *   float32 rounds at 6e-8, the longest sums here have ~128-256 terms and the
 *   UT solve and the chunk-to-chunk state carry amplify that by at most a few
 *   tens on these (well-conditioned, unit-norm-key) problems; the reference
 *   float32 forms land near 1e-6. A wrong decay, a missing term or a lost
 *   chunk is >= 1e-3.
 * - float64, 1e-12: both sides round at 1.1e-16; they sum in different orders
 *   and form the decay factors differently (products of exp(g) here, exp of
 *   span sums in the reference), and the UT solve and the state carry amplify
 *   that by a few tens: the errors seen are ~1e-15. A float32 intermediate
 *   anywhere would be ~1e-7.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_precisions.h"

/* ---- float64: the library's functions, S as double ---------------------------- */

static kdalab_status simd_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, double beta, void *S, double *o)
{
    return kdalab_simd_step_f64(mech, K, V, scale, q, k, v, g, beta, S, o);
}

static kdalab_status step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                              const double *q, const double *k, const double *v,
                              const double *g, double beta, void *S, double *o)
{
    return kdalab_step_f64(mech, K, V, scale, q, k, v, g, beta, S, o);
}

static void put_f64(void *dst, const double *src, size_t n) { memcpy(dst, src, n * 8); }
static void get_f64(double *dst, const void *src, size_t n) { memcpy(dst, src, n * 8); }

/* ---- float32: round the inputs, call, widen the outputs -------------------------- */

/* y's n floats widened into x (nothing for NULL), and y freed */
static void widen(double *x, float *y, size_t n)
{
    if (x)
        for (size_t i = 0; i < n; i++)
            x[i] = y[i];
    free(y);
}

typedef kdalab_status (*chunk_f32_fn)(const kdalab_dims *, kdalab_mechanism, float,
                                      const float *, const float *, const float *,
                                      const float *, const float *, const float *, float *,
                                      float *, const kdalab_chunk_opts *, kdalab_report *);

static kdalab_status chunk_in_f32(chunk_f32_fn fn, const kdalab_dims *d, kdalab_mechanism mech,
                                  double scale, const double *q, const double *k,
                                  const double *v, const double *g, const double *beta,
                                  const double *h0, double *o, double *ht,
                                  const kdalab_chunk_opts *opts, kdalab_report *report)
{
    size_t bth = n_bth(d), nqk = n_qk(d), nv = n_v(d), ns = n_state(d);
    size_t ng = bth * kdalab_mechanism_g_width(mech, d->K);
    float *qf = to_f32(q, nqk), *kf = to_f32(k, nqk), *vf = to_f32(v, nv);
    float *gf = to_f32(g, ng), *bf = to_f32(beta, bth), *h0f = to_f32(h0, ns);
    float *of = to_f32(o, nv), *htf = to_f32(ht, ns);
    kdalab_status s = fn(d, mech, (float)scale, qf, kf, vf, gf, bf, h0f, of, htf, opts, report);
    widen(o, of, nv);
    widen(ht, htf, ns);
    free(qf); free(kf); free(vf); free(gf); free(bf); free(h0f);
    return s;
}

static kdalab_status simd_chunk_f32(const kdalab_dims *d, kdalab_mechanism mech, double scale,
                                    const double *q, const double *k, const double *v,
                                    const double *g, const double *beta, const double *h0,
                                    double *o, double *ht, const kdalab_chunk_opts *opts,
                                    kdalab_report *report)
{
    return chunk_in_f32(kdalab_simd_chunk_f32, d, mech, scale, q, k, v, g, beta, h0, o, ht,
                        opts, report);
}

static kdalab_status chunk_f32(const kdalab_dims *d, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v,
                               const double *g, const double *beta, const double *h0,
                               double *o, double *ht, const kdalab_chunk_opts *opts,
                               kdalab_report *report)
{
    return chunk_in_f32(kdalab_chunk_f32, d, mech, scale, q, k, v, g, beta, h0, o, ht, opts,
                        report);
}

typedef kdalab_status (*step_f32_fn)(kdalab_mechanism, size_t, size_t, float, const float *,
                                     const float *, const float *, const float *, float,
                                     float *, float *);

static kdalab_status step_in_f32(step_f32_fn fn, kdalab_mechanism mech, size_t K, size_t V,
                                 double scale, const double *q, const double *k,
                                 const double *v, const double *g, double beta, void *S,
                                 double *o)
{
    size_t gw = kdalab_mechanism_g_width(mech, K);
    float *qf = to_f32(q, K), *kf = to_f32(k, K), *vf = to_f32(v, V), *gf = to_f32(g, gw);
    float *of = to_f32(o, V);
    kdalab_status s = fn(mech, K, V, (float)scale, qf, kf, vf, gf, (float)beta, S, of);
    widen(o, of, V);
    free(qf); free(kf); free(vf); free(gf);
    return s;
}

static kdalab_status simd_step_f32(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, double beta, void *S, double *o)
{
    return step_in_f32(kdalab_simd_step_f32, mech, K, V, scale, q, k, v, g, beta, S, o);
}

static kdalab_status step_f32(kdalab_mechanism mech, size_t K, size_t V, double scale,
                              const double *q, const double *k, const double *v,
                              const double *g, double beta, void *S, double *o)
{
    return step_in_f32(kdalab_step_f32, mech, K, V, scale, q, k, v, g, beta, S, o);
}

static void put_f32(void *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ((float *)dst)[i] = (float)src[i];
}

static void get_f32(double *dst, const void *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ((const float *)src)[i];
}

/* one row per precision: the fields as simd_precisions.h names them */
const simdt_precision simdt_f32 = {
    .name = "float32", .size = 4, .tol = 1e-5, .above_two = 2 + 0x1p-22, .tiny = 0x1p-149,
    .big_k = 1e30, .big_v = 1e10, .emulates_bf16 = 1, .simd_chunk = simd_chunk_f32,
    .chunk = chunk_f32, .simd_step = simd_step_f32, .step = step_f32, .put = put_f32,
    .get = get_f32};
const simdt_precision simdt_f64 = {
    .name = "float64", .size = 8, .tol = 1e-12, .above_two = 2 + 0x1p-51, .tiny = 0x1p-1074,
    .big_k = 1e300, .big_v = 1e100, .emulates_bf16 = 0, .simd_chunk = kdalab_simd_chunk_f64,
    .chunk = kdalab_chunk_f64, .simd_step = simd_step_f64, .step = step_f64, .put = put_f64,
    .get = get_f64};
