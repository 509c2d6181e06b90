/*
 * lib/core/precision.c — emulated low-precision storage (REFERENCE.md, "Low
 * precision, as production kernels use it").
 *
 * A production kernel stores its operands in bf16 or fp16 and accumulates in
 * fp32. We emulate the storage by rounding an fp32 value to the nearest value
 * of the smaller format (round to nearest, ties to even) and handing it back
 * as an fp32, so every later sum is an fp32 sum, as on a tensor core. A
 * float64 array is stored so in one threaded pass (kdalab_store_f64), and a
 * float32 result is measured against its float64 reference block by block
 * (kdalab_error_sums): the two passes of kdalab.testing's tolerances.
 *
 * defines: kdalab_round_bf16, kdalab_round_fp16, kdalab_round,
 *          kdalab_store_f64, kdalab_error_sums (lib/kdalab_precision.h)
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

static uint32_t bits_of(float x) { uint32_t u; memcpy(&u, &x, sizeof u); return u; }
static float float_of(uint32_t u) { float x; memcpy(&x, &u, sizeof x); return x; }

/* bfloat16 keeps fp32's sign and 8-bit exponent and the top 7 of its 23
 * mantissa bits: round the low 16 bits away, ties to even. */
float kdalab_round_bf16(float x)
{
    if (isnan(x))
        return x;
    uint32_t u = bits_of(x);
    uint32_t lsb = (u >> 16) & 1u;          /* last kept bit, for ties to even */
    u += 0x7fffu + lsb;                      /* may carry into the exponent:    */
    u &= 0xffff0000u;                        /* rounding up to inf is correct   */
    return float_of(u);
}

/* IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits; max 65504; smallest
 * subnormal 2^-24. Round the value onto that grid with ties to even. */
float kdalab_round_fp16(float x)
{
    if (isnan(x) || isinf(x) || x == 0.0f)
        return x;
    float a = fabsf(x);
    /* Values at or beyond 65520 (halfway between 65504 and the next binade
     * step, 65536) round to infinity. */
    if (a >= 65520.0f)
        return copysignf(INFINITY, x);
    int e;
    frexpf(a, &e);                           /* a = m * 2^e, m in [0.5, 1)       */
    int exp_unbiased = e - 1;                /* a in [2^exp, 2^(exp+1))          */
    if (exp_unbiased < -14)
        exp_unbiased = -14;                  /* subnormal range: fixed spacing   */
    float quantum = ldexpf(1.0f, exp_unbiased - 10);  /* spacing of fp16 values */
    /* a / quantum is exact (a power-of-two scaling); round it to an integer
     * with ties to even by hand, so the caller's rounding mode cannot matter */
    float n = a / quantum, whole = floorf(n), frac = n - whole;
    if (frac > 0.5f || (frac == 0.5f && fmodf(whole, 2.0f) != 0.0f))
        whole += 1.0f;
    return copysignf(whole * quantum, x);
}

float kdalab_round(kdalab_precision p, float x)
{
    switch (p) {
    case KDALAB_BF16: return kdalab_round_bf16(x);
    case KDALAB_FP16: return kdalab_round_fp16(x);
    default:          return x;
    }
}

kdalab_status kdalab_store_f64(kdalab_precision p, const double *x, float *y, size_t n,
                               double *max_abs)
{
    kdalab_clear_error();
    if (p != KDALAB_FP32 && p != KDALAB_BF16 && p != KDALAB_FP16)
        return kdalab_fail(KDALAB_EINVAL, "precision %d: expected fp32, bf16 or fp16", (int)p);
    if (n && (!x || !y))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL (n = %zu)", !x ? "x" : "y", n);
    double m = 0;
    /* (float) of a double rounds in the thread's rounding mode: each thread
     * rounds to nearest for the loop and restores its mode after, so the
     * caller's mode (and which thread had it) changes nothing. Beyond float's
     * range it is IEEE 754's overflow, +-inf (C11 Annex F, which GCC and Clang
     * follow on every target we build). */
#pragma omp parallel num_threads(kdalab__threads_for(n / 4096 + 1))
    {
        const int mode = kdalab__nearest_begin();
#pragma omp for simd schedule(static) reduction(max : m)
        for (size_t i = 0; i < n; i++) {
            const double a = fabs(x[i]);
            m = a > m ? a : m;
            y[i] = (float)x[i];
        }
        kdalab__nearest_end(mode);
    }
    if (max_abs)
        *max_abs = m;
    return kdalab_round_array(p, y, n);
}

kdalab_status kdalab_error_sums(const double *ref, const float *got, size_t n, size_t block,
                                double *sums)
{
    kdalab_clear_error();
    if (!block)
        return kdalab_fail(KDALAB_EINVAL, "block = 0: expected >= 1 element per block");
    if (n && (!ref || !got || !sums))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL (n = %zu)",
                           !ref ? "ref" : !got ? "got" : "sums", n);
    const size_t nb = n / block + (n % block != 0);
#pragma omp parallel num_threads(kdalab__threads_for(nb))
    {
        const int mode = kdalab__nearest_begin(); /* the same sums on any thread count */
#pragma omp for schedule(static)
        for (size_t i = 0; i < nb; i++) {
            const size_t lo = i * block, hi = n - lo < block ? n : lo + block;
            double md = 0, mr = 0, e2 = 0, r2 = 0;
#pragma omp simd reduction(max : md, mr) reduction(+ : e2, r2)
            for (size_t j = lo; j < hi; j++) {
                const double d = (double)got[j] - ref[j], ad = fabs(d), ar = fabs(ref[j]);
                md = ad > md ? ad : md;
                mr = ar > mr ? ar : mr;
                e2 += d * d;
                r2 += ref[j] * ref[j];
            }
            sums[4 * i] = md, sums[4 * i + 1] = mr, sums[4 * i + 2] = e2, sums[4 * i + 3] = r2;
        }
        kdalab__nearest_end(mode);
    }
    return KDALAB_OK;
}
