/*
 * lib/simd/entry.c — the entry points of the optimized path in both
 * precisions: the chunkwise forward and backward on a checked call, and the
 * decode step, written once over `real` in lib/simd/entry_impl.h and
 * instantiated here for float and double (each function below is a one-line
 * call into its instance). The public kdalab_simd_chunk_f32 and friends
 * reach the chunkwise ones through kdalab_run_f32 (lib/call/flat.c).
 *
 * defines: kdalab_simd_chunk_opts_default, kdalab_simd_step_f32,
 *          kdalab_simd_step_f64 (lib/kdalab_simd.h); kdalab_round_array
 *          (lib/kdalab_precision.h); kdalab__simd_chunk_f32,
 *          kdalab__simd_chunk_f64, kdalab__simd_chunk_bwd_f32,
 *          kdalab__simd_chunk_bwd_f64 (internal.h)
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
#define E_TENSORS kdalab_tensors_f32
#define E_TABLE_ACTIVE kdalab__simd_table_active
#include "entry_impl.h"
#undef real
#undef E_FN
#undef E_TABLE
#undef E_ARGS
#undef E_BWD_OUT
#undef E_TENSORS
#undef E_TABLE_ACTIVE

#define real double
#define E_FN(name) name##_f64
#define E_TABLE simd_table_f64
#define E_ARGS simd_head_args_f64
#define E_BWD_OUT simd_bwd_out_f64
#define E_TENSORS kdalab_tensors_f64
#define E_TABLE_ACTIVE kdalab__simd_table_active_f64
#include "entry_impl.h"
#undef real
#undef E_FN
#undef E_TABLE
#undef E_ARGS
#undef E_BWD_OUT
#undef E_TENSORS
#undef E_TABLE_ACTIVE

kdalab_chunk_opts kdalab_simd_chunk_opts_default(void)
{
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = 16; /* the fastest measured (lib/kdalab_simd.h says where) */
    return o;
}

kdalab_status kdalab_round_array(kdalab_precision p, float *x, size_t n)
{
    kdalab_clear_error();
    if (p != KDALAB_FP32 && p != KDALAB_BF16 && p != KDALAB_FP16)
        return kdalab_fail(KDALAB_EINVAL, "precision %d: expected fp32, bf16 or fp16", (int)p);
    if (!x && n)
        return kdalab_fail(KDALAB_ENULL, "x is NULL (n = %zu)", n);
    if (n)
        kdalab__simd_table_active()->store_round(x, n, p);
    return KDALAB_OK;
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

kdalab_status kdalab__simd_chunk_f32(const kdalab__call *c, float scale,
                                     const kdalab_tensors_f32 *x, kdalab_report *report)
{
    return run_chunk_f32(c, scale, x, report);
}

kdalab_status kdalab__simd_chunk_f64(const kdalab__call *c, double scale,
                                     const kdalab_tensors_f64 *x, kdalab_report *report)
{
    return run_chunk_f64(c, scale, x, report);
}

kdalab_status kdalab__simd_chunk_bwd_f32(const kdalab__call *c, float scale,
                                         const kdalab_tensors_f32 *x)
{
    return run_chunk_bwd_f32(c, scale, x);
}

kdalab_status kdalab__simd_chunk_bwd_f64(const kdalab__call *c, double scale,
                                         const kdalab_tensors_f64 *x)
{
    return run_chunk_bwd_f64(c, scale, x);
}
