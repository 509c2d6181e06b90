/*
 * lib/simd/entry.c — the public entry points of the optimized path in both
 * precisions: the chunkwise form and the decode step, written once over
 * `real` in lib/simd/entry_impl.h and instantiated here for float and double
 * (each public function below is a one-line call into its instance).
 *
 * defines: kdalab_simd_chunk_opts_default, kdalab_simd_chunk_f32,
 *          kdalab_simd_step_f32, kdalab_simd_chunk_f64, kdalab_simd_step_f64,
 *          kdalab_simd_chunk_bwd_f32, kdalab_simd_chunk_bwd_f64
 *          (lib/kdalab_simd.h)
 */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"
#include "simd_internal.h"

#define real float
#define E_FN(name) name##_f32
#define E_TABLE simd_table
#define E_ARGS simd_head_args
#define E_BWD_OUT simd_bwd_out
#define E_TABLE_ACTIVE kdalab__simd_table_active
#include "entry_impl.h"
#undef real
#undef E_FN
#undef E_TABLE
#undef E_ARGS
#undef E_BWD_OUT
#undef E_TABLE_ACTIVE

#define real double
#define E_FN(name) name##_f64
#define E_TABLE simd_table_f64
#define E_ARGS simd_head_args_f64
#define E_BWD_OUT simd_bwd_out_f64
#define E_TABLE_ACTIVE kdalab__simd_table_active_f64
#include "entry_impl.h"
#undef real
#undef E_FN
#undef E_TABLE
#undef E_ARGS
#undef E_BWD_OUT
#undef E_TABLE_ACTIVE

kdalab_chunk_opts kdalab_simd_chunk_opts_default(void)
{
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = 16; /* the fastest measured (lib/kdalab_simd.h says where) */
    return o;
}

kdalab_status kdalab_simd_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *h0, float *o, float *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_clear_error();
    return entry_chunk_f32(dims, mech, scale, q, k, v, g, beta, h0, o, ht, opts, report);
}

kdalab_status kdalab_simd_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *h0, double *o, double *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_clear_error();
    return entry_chunk_f64(dims, mech, scale, q, k, v, g, beta, h0, o, ht, opts, report);
}

kdalab_status kdalab_simd_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, float beta, float *S, float *o)
{
    kdalab_clear_error();
    return entry_step_f32(mech, K, V, scale, q, k, v, g, beta, S, o);
}

kdalab_status kdalab_simd_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, double beta, double *S, double *o)
{
    kdalab_clear_error();
    return entry_step_f64(mech, K, V, scale, q, k, v, g, beta, S, o);
}

kdalab_status kdalab_simd_chunk_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *h0, const float *d_o, const float *dht,
                                        float *dq, float *dk, float *dv, float *dg,
                                        float *dbeta, float *dh0, const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    return entry_chunk_bwd_f32(dims, mech, scale, q, k, v, g, beta, h0, d_o, dht, dq, dk, dv,
                               dg, dbeta, dh0, opts);
}

kdalab_status kdalab_simd_chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                        double scale, const double *q, const double *k,
                                        const double *v, const double *g, const double *beta,
                                        const double *h0, const double *d_o, const double *dht,
                                        double *dq, double *dk, double *dv, double *dg,
                                        double *dbeta, double *dh0,
                                        const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    return entry_chunk_bwd_f64(dims, mech, scale, q, k, v, g, beta, h0, d_o, dht, dq, dk, dv,
                               dg, dbeta, dh0, opts);
}
