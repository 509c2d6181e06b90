/*
 * lib/simd/avx512.c — the AVX-512 level of the optimized path (16 floats per
 * vector), compiled with -mavx512f -mavx512dq -mavx512vl -mavx2 -mfma; only
 * ever called after the level choice (lib/simd/levels.c) has seen AVX-512F,
 * DQ and VL on the CPU. The same kernels as avx2.c (the kernel headers) with
 * a wider vector: only the vocabulary below differs.
 */
#include <immintrin.h>
#include <math.h>

#include "simd_internal.h"

typedef float real;
#define SIMD_LEVEL avx512
typedef __m512 vf;
#define VLEN 16
#define VZERO() _mm512_setzero_ps()
typedef __mmask16 vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) ((__mmask16)((1u << (n)) - 1u))
#define VBLEND(m, a, b) _mm512_mask_blend_ps((m), (b), (a))
#define VSET1(x) _mm512_set1_ps(x)
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VSUB(a, b) _mm512_sub_ps((a), (b))
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VEXP(v) avx512_exp(v)
#define VFLUSH(v) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((v), _mm512_set1_ps(1.17549435e-38f), _CMP_GE_OQ), (v))
#define VMAX(a, b) _mm512_max_ps((a), (b))
#define VMIN(a, b) _mm512_min_ps((a), (b))
#define VALL_LE(v, x) (_mm512_cmp_ps_mask((v), _mm512_set1_ps(x), _CMP_LE_OQ) == 0xffff)
#define VALL_GE(v, x) (_mm512_cmp_ps_mask((v), _mm512_set1_ps(x), _CMP_GE_OQ) == 0xffff)
#define VROUND_BF16(v) avx512_round_bf16(v)
#define VROUND_FP16(v) avx512_round_fp16(v)

/* exp(x) for x <= 0, as avx2_exp in lib/simd/avx2.c (same reduction and polynomial). */
static inline __m512 avx512_exp(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.0f);
    __m512 xc = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), y);
}

/* x rounded to bfloat16 and to binary16, as avx2_round_bf16 and
 * avx2_round_fp16 in lib/simd/avx2.c (the same steps, in integer lanes: no
 * rounding mode changes them). */
static inline __m512 avx512_round_bf16(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    u = _mm512_and_si512(u, _mm512_set1_epi32((int)0xffff0000u));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_castsi512_ps(u), x);
}

static inline __m512 avx512_round_fp16(__m512 x)
{
    const __m512i one = _mm512_set1_epi32(1);
    __m512i u = _mm512_castps_si512(x);
    __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i sign = _mm512_xor_si512(u, mag);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(mag, 13), one);
    __m512i nrm = _mm512_add_epi32(_mm512_add_epi32(mag, _mm512_set1_epi32(0xfff)), lsb);
    nrm = _mm512_and_si512(nrm, _mm512_set1_epi32(~0x1fff));
    __m512i be = _mm512_srli_epi32(mag, 23);
    __m512i d = _mm512_min_epi32(_mm512_sub_epi32(_mm512_set1_epi32(126), be),
                                 _mm512_set1_epi32(25));
    __m512i sig = _mm512_or_si512(_mm512_and_si512(mag, _mm512_set1_epi32(0x7fffff)),
                                  _mm512_set1_epi32(0x800000));
    __m512i q = _mm512_srlv_epi32(sig, d);
    __m512i rem = _mm512_sub_epi32(sig, _mm512_sllv_epi32(q, d));
    __m512i half = _mm512_sllv_epi32(one, _mm512_sub_epi32(d, one));
    __mmask16 up = _mm512_cmpgt_epi32_mask(rem, half) |
                   (_mm512_cmpeq_epi32_mask(rem, half) &
                    _mm512_cmpeq_epi32_mask(_mm512_and_si512(q, one), one));
    q = _mm512_mask_add_epi32(q, up, q, one);
    __m512 small = _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(0x1p-24f));
    __m512 a = _mm512_castsi512_ps(mag);
    __m512 r = _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(_mm512_set1_epi32(113), be),
                                    _mm512_castsi512_ps(nrm), small);
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(65520.0f), _CMP_GE_OQ), r,
                             _mm512_set1_ps(INFINITY));
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), r, a);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

/* The kernels and this level's table (lib/simd/instantiate.h). */
#define SIMD_NRV 4 /* 32 vector registers: gemm.h */
#include "instantiate.h"
