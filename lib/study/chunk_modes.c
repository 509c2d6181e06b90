/*
 * lib/study/chunk_modes.c — the chunkwise form in float64 and float32 with
 * every KDA decay mode (safe, pairwise, rescaled, anchored) and emulated
 * bf16 / fp16 storage: the forms experiment 03 and the precision tests study.
 * The algorithm is in lib/study/chunk_modes_impl.h, written once over `real`.
 *
 * defines: kdalab_chunk_f32 (public), kdalab_study_chunk_f64 (internal: what
 *          kdalab_chunk_f64 runs for every decay mode but 'safe')
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kdalab_precision.h"

#define KDALAB_REAL 64
#include "real.h"
#include "chunk_modes_impl.h"
#include "real_undef.h"

#define KDALAB_REAL 32
#include "real.h"
#include "chunk_modes_impl.h"
#include "real_undef.h"

kdalab_status kdalab_study_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                     double scale, const double *q, const double *k,
                                     const double *v, const double *g, const double *beta,
                                     const double *h0, double *o, double *ht,
                                     const kdalab_chunk_opts *opts, kdalab_report *report)
{
    return study_chunk_f64(dims, mech, scale, q, k, v, g, beta, h0, o, ht, opts, report);
}

kdalab_status kdalab_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const float *q, const float *k, const float *v, const float *g,
                               const float *beta, const float *h0, float *o, float *ht,
                               const kdalab_chunk_opts *opts, kdalab_report *report)
{
    return study_chunk_f32(dims, mech, scale, q, k, v, g, beta, h0, o, ht, opts, report);
}
