/*
 * lib/core/vectorise.h — what lets training's elementwise loops vectorise:
 * TRAIN_CLONES, the attribute that compiles a kernel once per instruction
 * set, and train_expf, the float32 exp a loop can vectorise. Used by
 * lib/train and by the tiled attention of lib/reference/attention.c, the
 * fast path training runs. Not installed, not exported.
 */
#ifndef KDALAB_CORE_VECTORISE_H
#define KDALAB_CORE_VECTORISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* On the elementwise kernels' definitions (lib/train/layers.c, the softmax
 * of the tiled attention in lib/reference/attention.c): GCC compiles the function for AVX-512, for AVX2 and for the
 * baseline, and the loader picks the widest this CPU has (function
 * multiversioning). The clones do the same operations in the same order
 * (C11 mode: no fused multiply-add contraction), so they give the same bits;
 * tests/test_train_layers.c checks the one picked against baseline code.
 * Measured on AVX-512: SiLU and SwiGLU were a quarter of a quick-config
 * attention step at the baseline's four floats per vector. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TRAIN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRAIN_CLONES
#endif

/* exp(x) in float for the float32 twins of lib/train and of the tiled
 * attention (scripts/make_f32.sh writes train_expf where lib/train's float64
 * source says exp, and on a line of lib/reference marked vector-exp): the
 * textbook range reduction x = n ln 2 + r, |r| <= ln 2 / 2, then exp(r) by
 * its Taylor series to r^7 / 7! (truncation below 2^-27 relative) and 2^n
 * put into the exponent bits. No branch and no call, so a loop of it vectorises, and it
 * is the same function in the vector body and the scalar tail (libm's expf
 * is a call a loop cannot vectorise: 11 % of a d = 128 attention step).
 * Within 2 ulp of exp on [-87.3, 88.7] (tests/test_train_layers.c measures
 * it against exp in double); exp(-inf) and anything below -87.3 give 0
 * (true values under 1.2e-38), above 88.7 inf, NaN gives NaN. */
static inline float train_expf(float x)
{
    const float lo = -87.33654f, hi = 88.72283f; /* exp(lo) = FLT_MIN, exp(hi) = FLT_MAX */
    const float xc = x < lo ? lo : x > hi ? hi : x; /* NaN compares false: stays NaN */
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick: t's low bits hold n */
    const float shift = 12582912.0f, t = xc * 1.44269504088896341f + shift;
    const float n = t - shift;
    /* r = x - n ln 2 with ln 2 = 0.693359375 - 2.12194440e-4: the first part
     * has 9 bits, so n times it is exact */
    const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as 2^k 2^m, k + m = n, each in [-63, 64]: both normal floats, and
     * the result is rounded once, by the last product. Unsigned arithmetic:
     * for a NaN x the bits are garbage (the result is NaN anyway), and must
     * not overflow a signed int */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const int32_t n_i = (int32_t)(bits - 0x4B400000u), m = n_i / 2, k = n_i - m;
    const uint32_t bk = (uint32_t)(k + 127) << 23, bm = (uint32_t)(m + 127) << 23;
    float two_k, two_m;
    memcpy(&two_k, &bk, sizeof two_k);
    memcpy(&two_m, &bm, sizeof two_m);
    const float e = p * two_k * two_m;
    return x < lo ? 0.0f : x > hi ? INFINITY : e;
}

#endif /* KDALAB_CORE_VECTORISE_H */
