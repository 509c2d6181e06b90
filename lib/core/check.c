/*
 * lib/check.c — validation shared by every form (reference, chunkwise, SIMD):
 * one place decides what a legal call is, so all forms reject the same inputs
 * with the same status.
 */
#include <math.h>
#include <stdint.h>

#include "internal.h"

/* Element counts of a problem; errors for zero sizes and for overflow of the
 * element count or of the byte count (elem_bytes each). */
kdalab_status kdalab_count_dims(const kdalab_dims *d, kdalab_mechanism mech, size_t elem_bytes,
                                kdalab_counts *out)
{
    if (!d)
        return kdalab_fail(KDALAB_ENULL, "dims is NULL");
    if (d->B == 0 || d->H == 0 || d->K == 0 || d->V == 0)
        return kdalab_fail(KDALAB_ESIZE, "B=%zu H=%zu K=%zu V=%zu: B, H, K and V must be >= 1",
                           d->B, d->H, d->K, d->V);
    size_t bth, qk, v, bh, state, bytes;
    if (!kdalab_mul_size(d->B, d->T, &bth) || !kdalab_mul_size(bth, d->H, &bth) ||
        !kdalab_mul_size(bth, d->K, &qk) || !kdalab_mul_size(bth, d->V, &v) ||
        !kdalab_mul_size(d->B, d->H, &bh) || !kdalab_mul_size(bh, d->K, &state) ||
        !kdalab_mul_size(state, d->V, &state) ||
        !kdalab_mul_size(qk > v ? qk : v, elem_bytes, &bytes) ||
        !kdalab_mul_size(state, elem_bytes, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "B=%zu T=%zu H=%zu K=%zu V=%zu: the array sizes overflow", d->B,
                           d->T, d->H, d->K, d->V);
    out->qk = qk;
    out->v = v;
    out->bth = bth;
    out->state = state;
    out->g = mech == KDALAB_KDA ? qk : mech == KDALAB_GATED_DELTANET ? bth : 0;
    return KDALAB_OK;
}

#define KDALAB_REAL 64
#include "real.h"
#include "check_impl.h"
#include "real_undef.h"

#define KDALAB_REAL 32
#include "real.h"
#include "check_impl.h"
#include "real_undef.h"
