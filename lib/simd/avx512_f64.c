/*
 * lib/simd/avx512_f64.c — the AVX-512 level of the float64 optimized path
 * (8 doubles per vector), compiled with -mavx512f -mavx512dq -mavx512vl
 * -mavx2 -mfma; only ever called after the dispatcher has seen AVX-512F, DQ
 * and VL on the CPU. The kernels of avx512.c over double: only the
 * vocabulary below differs.
 */
#include <immintrin.h>

#include "simd_internal.h"

typedef double real;
#define SIMD_LEVEL avx512
#define SIMD_REAL_DOUBLE 1
typedef __m512d vf;
#define VLEN 8
#define VZERO() _mm512_setzero_pd()
typedef __mmask8 vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) ((__mmask8)((1u << (n)) - 1u))
#define VBLEND(m, a, b) _mm512_mask_blend_pd((m), (b), (a))
#define VSET1(x) _mm512_set1_pd(x)
#define VLOAD(p) _mm512_loadu_pd(p)
#define VSTORE(p, v) _mm512_storeu_pd((p), (v))
#define VADD(a, b) _mm512_add_pd((a), (b))
#define VSUB(a, b) _mm512_sub_pd((a), (b))
#define VMUL(a, b) _mm512_mul_pd((a), (b))
#define VFMA(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define VHSUM(v) _mm512_reduce_add_pd(v)
#define VEXP(v) avx512_exp_f64(v)
#define VFLUSH(v) _mm512_maskz_mov_pd(_mm512_cmp_pd_mask((v), _mm512_set1_pd(2.2250738585072014e-308), _CMP_GE_OQ), (v))
#define VMAX(a, b) _mm512_max_pd((a), (b))
#define VMIN(a, b) _mm512_min_pd((a), (b))
#define VALL_LE(v, x) (_mm512_cmp_pd_mask((v), _mm512_set1_pd(x), _CMP_LE_OQ) == 0xff)
#define VALL_GE(v, x) (_mm512_cmp_pd_mask((v), _mm512_set1_pd(x), _CMP_GE_OQ) == 0xff)

/* exp(x) for x <= 0 in double, as avx2_exp_f64 in lib/simd/avx2_f64.c (same
 * reduction and degree-13 polynomial). */
static inline __m512d avx512_exp_f64(__m512d x)
{
    static const double inv_fact[14] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
        1.0 / 6227020800.0};
    const __m512d lo = _mm512_set1_pd(-708.0);
    __m512d xc = _mm512_max_pd(x, lo);
    __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(xc, _mm512_set1_pd(1.4426950408889634074)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), xc);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);
    __m512d p = _mm512_set1_pd(inv_fact[13]);
#if defined(__GNUC__)
#pragma GCC unroll 13
#endif
    for (int i = 12; i >= 0; i--)
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(inv_fact[i]));
    __m512i e = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtpd_epi64(n), _mm512_set1_epi64(1023)),
                                  52);
    __m512d y = _mm512_mul_pd(p, _mm512_castsi512_pd(e));
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_GE_OQ), y);
}

/* The kernels and this level's table (lib/simd/instantiate.h). */
#define SIMD_NRV 4 /* 32 vector registers: gemm.h */
#include "instantiate.h"
