/*
 * lib/simd/avx2.c — the AVX2 + FMA level of the optimized path (8 floats per
 * vector), compiled with -mavx2 -mfma; only ever called after the dispatcher
 * (lib/simd/levels.c) has seen both features on the CPU.
 */
#include <immintrin.h>
#include <math.h>

#include "simd_internal.h"

typedef float real;
#define SIMD_LEVEL avx2
typedef __m256 vf;
#define VLEN 8
#define VZERO() _mm256_setzero_ps()
typedef __m256 vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) \
    _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n)), \
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define VBLEND(m, a, b) _mm256_blendv_ps((b), (a), (m))
#define VSET1(x) _mm256_set1_ps(x)
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VSUB(a, b) _mm256_sub_ps((a), (b))
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VHSUM(v) avx2_hsum(v)
#define VEXP(v) avx2_exp(v)
#define VFLUSH(v) _mm256_and_ps((v), _mm256_cmp_ps((v), _mm256_set1_ps(1.17549435e-38f), _CMP_GE_OQ))
#define VMAX(a, b) _mm256_max_ps((a), (b))
#define VMIN(a, b) _mm256_min_ps((a), (b))
#define VALL_LE(v, x) (_mm256_movemask_ps(_mm256_cmp_ps((v), _mm256_set1_ps(x), _CMP_LE_OQ)) == 0xff)
#define VALL_GE(v, x) (_mm256_movemask_ps(_mm256_cmp_ps((v), _mm256_set1_ps(x), _CMP_GE_OQ)) == 0xff)
#define VROUND_BF16(v) avx2_round_bf16(v)
#define VROUND_FP16(v) avx2_round_fp16(v)

static inline float avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/*
 * exp(x) for x <= 0: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two parts so
 * n*ln2 is exact enough), exp(r) by its Taylor polynomial to degree 7
 * (truncation < 5e-9 relative, below float's 6e-8), times 2^n built in the
 * exponent field. Lanes below -87 (where exp < 1.7e-38) give exactly 0.
 */
static inline __m256 avx2_exp(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.0f);
    __m256 xc = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
}

/* x rounded to the nearest bfloat16, ties to even, as kdalab_round_bf16: the
 * low 16 bits rounded away in the integer lanes (a carry into the exponent
 * rounds up to the next binade or to inf, as it should); NaN lanes kept. */
static inline __m256 avx2_round_bf16(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    u = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    u = _mm256_and_si256(u, _mm256_set1_epi32((int)0xffff0000u));
    return _mm256_blendv_ps(_mm256_castsi256_ps(u), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* x rounded to the nearest IEEE binary16, ties to even, as kdalab_round_fp16
 * (subnormals kept, |x| >= 65520 to inf, NaN kept), in integer lanes so that
 * no rounding mode can change it: in fp16's normal range 13 bits of the
 * float32 rounded away, as bf16 rounds 16; below 2^-14, a multiple of 2^-24:
 * the 24-bit significand shifted right by d = -1 - e (e the exponent, d at
 * most 25, beyond which every value rounds to 0), ties to even, then
 * converted (exactly: at most 2^10) and scaled by 2^-24 (exactly). */
static inline __m256 avx2_round_fp16(__m256 x)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m256i u = _mm256_castps_si256(x);
    __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i sign = _mm256_xor_si256(u, mag);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(mag, 13), one);
    __m256i nrm = _mm256_add_epi32(_mm256_add_epi32(mag, _mm256_set1_epi32(0xfff)), lsb);
    nrm = _mm256_and_si256(nrm, _mm256_set1_epi32(~0x1fff));
    __m256i be = _mm256_srli_epi32(mag, 23); /* the biased exponent, e + 127 */
    __m256i d = _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(126), be),
                                 _mm256_set1_epi32(25));
    __m256i sig = _mm256_or_si256(_mm256_and_si256(mag, _mm256_set1_epi32(0x7fffff)),
                                  _mm256_set1_epi32(0x800000));
    __m256i q = _mm256_srlv_epi32(sig, d);
    __m256i rem = _mm256_sub_epi32(sig, _mm256_sllv_epi32(q, d));
    __m256i half = _mm256_sllv_epi32(one, _mm256_sub_epi32(d, one));
    __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(q, one), one);
    __m256i up = _mm256_or_si256(_mm256_cmpgt_epi32(rem, half),
                                 _mm256_and_si256(_mm256_cmpeq_epi32(rem, half), odd));
    q = _mm256_sub_epi32(q, up); /* up is -1 where the value rounds up */
    __m256 small = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(0x1p-24f));
    __m256 a = _mm256_castsi256_ps(mag);
    __m256 r = _mm256_blendv_ps(_mm256_castsi256_ps(nrm), small,
                                _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(113), be)));
    r = _mm256_blendv_ps(r, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(a, _mm256_set1_ps(65520.0f), _CMP_GE_OQ));
    r = _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_or_ps(r, _mm256_castsi256_ps(sign));
}

/* The kernels and this level's table (lib/simd/instantiate.h). */
#include "instantiate.h"
