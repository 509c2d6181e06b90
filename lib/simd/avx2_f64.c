/*
 * lib/simd/avx2_f64.c — the AVX2 + FMA level of the float64 optimized path
 * (4 doubles per vector), compiled with -mavx2 -mfma; only ever called after
 * the dispatcher has seen both features on the CPU. The kernels of avx2.c
 * (the kernel headers) over double: only the vocabulary below differs.
 */
#include <immintrin.h>

#include "simd_internal.h"

typedef double real;
#define SIMD_LEVEL avx2
#define SIMD_REAL_DOUBLE 1
typedef __m256d vf;
#define VLEN 4
#define VZERO() _mm256_setzero_pd()
typedef __m256d vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) \
    _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)(n)), \
                                           _mm256_setr_epi64x(0, 1, 2, 3)))
#define VBLEND(m, a, b) _mm256_blendv_pd((b), (a), (m))
#define VSET1(x) _mm256_set1_pd(x)
#define VLOAD(p) _mm256_loadu_pd(p)
#define VSTORE(p, v) _mm256_storeu_pd((p), (v))
#define VADD(a, b) _mm256_add_pd((a), (b))
#define VSUB(a, b) _mm256_sub_pd((a), (b))
#define VMUL(a, b) _mm256_mul_pd((a), (b))
#define VFMA(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define VHSUM(v) avx2_hsum_f64(v)
#define VEXP(v) avx2_exp_f64(v)
#define VFLUSH(v) _mm256_and_pd((v), _mm256_cmp_pd((v), _mm256_set1_pd(2.2250738585072014e-308), _CMP_GE_OQ))
#define VMAX(a, b) _mm256_max_pd((a), (b))
#define VMIN(a, b) _mm256_min_pd((a), (b))
#define VALL_LE(v, x) (_mm256_movemask_pd(_mm256_cmp_pd((v), _mm256_set1_pd(x), _CMP_LE_OQ)) == 0xf)
#define VALL_GE(v, x) (_mm256_movemask_pd(_mm256_cmp_pd((v), _mm256_set1_pd(x), _CMP_GE_OQ)) == 0xf)

static inline double avx2_hsum_f64(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

/*
 * exp(x) for x <= 0 in double: x = n ln2 + r with |r| <= ln2/2 (ln2 split in
 * a 32-bit head and its tail, fdlibm's, with fused multiply-adds), exp(r) by
 * its Taylor polynomial to degree 13 (truncation < 5e-18 relative, below
 * double's 1.1e-16; Horner with FMA adds a few ulp), times 2^n built in the
 * exponent field. Lanes below -708 (where exp < 3.4e-308, near DBL_MIN) give
 * exactly 0.
 */
static inline __m256d avx2_exp_f64(__m256d x)
{
    static const double inv_fact[14] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
        1.0 / 6227020800.0};
    const __m256d lo = _mm256_set1_pd(-708.0);
    __m256d xc = _mm256_max_pd(x, lo);
    __m256d n = _mm256_round_pd(_mm256_mul_pd(xc, _mm256_set1_pd(1.4426950408889634074)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), xc);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
    __m256d p = _mm256_set1_pd(inv_fact[13]);
#if defined(__GNUC__)
#pragma GCC unroll 13
#endif
    for (int i = 12; i >= 0; i--)
        p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(inv_fact[i]));
    __m256i e = _mm256_slli_epi64(
        _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)), _mm256_set1_epi64x(1023)),
        52);
    __m256d y = _mm256_mul_pd(p, _mm256_castsi256_pd(e));
    return _mm256_and_pd(y, _mm256_cmp_pd(x, lo, _CMP_GE_OQ));
}

/* The kernels and this level's table (lib/simd/instantiate.h). */
#include "instantiate.h"
