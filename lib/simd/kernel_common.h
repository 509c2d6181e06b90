/*
 * lib/simd/kernel_common.h — the base of the optimized path's kernel headers:
 * the vector vocabulary they are written in (defined by the including ISA
 * file), compiler hints, and two scalar functions.
 *
 * defines, per ISA suffix (_scalar/_avx2/_avx512 for float, the same with
 * _f64 for double): min_sz, flush1, store_round, store_rows
 * defines (macros, used by the kernel headers after it): SIMD_FN, SIMD_TABLE,
 * SIMD_LEVEL_NAME, SIMD_INLINE, SIMD_PRAGMA, SIMD_UNROLL(n), SIMD_TINY,
 * SIMD_LINE, REXP, RFMA (a * b + c rounded once, as a vector lane's VFMA),
 * SIMD_ARGS, SIMD_BWD_OUT, SIMD_CHECK_VALUES
 *
 * The kernels are written once, over an element type `real`, and compiled
 * once per instruction set and element type: lib/simd/scalar.c (VLEN 1),
 * avx2.c (VLEN 8) and avx512.c (VLEN 16) for float, scalar_f64.c (VLEN 1),
 * avx2_f64.c (VLEN 4) and avx512_f64.c (VLEN 8) for double. Each defines the
 * vocabulary below, then includes lib/simd/instantiate.h, which includes the
 * kernel headers in this order (each uses only what the ones before it
 * define):
 *
 *   kernel_common.h    this file
 *   gemm.h             the register-blocked matrix product and a transpose
 *   chunk_workspace.h  one task's workspace and its input prefetching
 *   chunk_scores.h     decay factors and score matrices (steps 1 and 5)
 *   dplr_scores.h      the same for the DPLR row (its steps 1 and 2)
 *   chunk_kernels.h    the UT transform, one chunk, one head (the table's
 *                      chunk_head and work_floats)
 *   chunk_bwd_scores.h the backward's workspace, the backward of steps 1, 5
 *   dplr_bwd.h         the DPLR row's backward of one chunk
 *   chunk_bwd.h        the chunkwise backward of one head (the table's
 *                      chunk_head_bwd and bwd_work_floats)
 *   screen.h           the vector input screen (the table's screen)
 *   step_kernel.h      the decode step (the table's step)
 *
 * and fills the file's simd_table or simd_table_f64 (lib/simd/simd_internal.h)
 * with the results. Every function is static and named through
 * SIMD_FN(name), so each ISA file gets its own copy: gemm_scalar, gemm_avx2,
 * gemm_avx2_f64, and so on.
 *
 * The vocabulary the including file defines:
 *   real                   the element type, float or double
 *   SIMD_REAL_DOUBLE       1 when real is double, else 0 (or undefined)
 *   SIMD_LEVEL             the level's name as a bare word: scalar, avx2 or
 *                          avx512 (SIMD_FN's suffix and the table's name)
 *   vf, VLEN               the vector type and its element count
 *   VZERO() VSET1(x) VLOAD(p) VSTORE(p, v) VADD VSUB VMUL VFMA(a, b, c) = a*b + c
 *   vmask, VMASK_LO(n)     a lane mask with lanes < n set (0 <= n <= VLEN)
 *   VBLEND(m, a, b)        a's lanes where m is set, b's elsewhere (exact)
 *   VHSUM(v)               sum of the lanes
 *   VEXP(v)                exp of lanes <= 0 (lanes below -87, for double
 *                          -708, give exactly 0)
 *   VFLUSH(v)              lanes below FLT_MIN (DBL_MIN) set to 0
 *   VMAX(a, b) VMIN(a, b)  lane-wise larger / smaller of a and b; a NaN lane of
 *                          a gives b's lane (x86's maxps / minps)
 *   VALL_LE(v, x)          nonzero when every lane is <= x (a NaN lane is not)
 *   VALL_GE(v, x)          nonzero when every lane is >= x (a NaN lane is not)
 *   VROUND_BF16(v)         (float levels only) lanes rounded to bfloat16 /
 *   VROUND_FP16(v)         binary16, bit for bit as kdalab_round_bf16 / _fp16
 *
 * defined here from SIMD_LEVEL and SIMD_REAL_DOUBLE:
 *   SIMD_FN(name)          name with the level's suffix: name_avx2 for float,
 *                          name_avx2_f64 for double
 *   SIMD_TABLE             the table type: simd_table or simd_table_f64
 *   SIMD_LEVEL_NAME        SIMD_LEVEL as a string: "avx2"
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* SIMD_UNROLL(n) before a loop: unroll it n times (a loop of n or fewer
 * iterations, completely). n is an integer literal or a macro for one. */
#if defined(__GNUC__)
#define SIMD_INLINE static inline __attribute__((always_inline))
#define SIMD_PRAGMA(text) _Pragma(#text)
#define SIMD_UNROLL(n) SIMD_PRAGMA(GCC unroll n)
#else
#define SIMD_INLINE static inline
#define SIMD_UNROLL(n)
#endif

#define SIMD_CAT_(a, b) a##b
#define SIMD_CAT(a, b) SIMD_CAT_(a, b)
#define SIMD_STR_(x) #x
#define SIMD_STR(x) SIMD_STR_(x)
#define SIMD_LEVEL_NAME SIMD_STR(SIMD_LEVEL)

#if defined(SIMD_REAL_DOUBLE) && SIMD_REAL_DOUBLE
#define SIMD_FN(name) SIMD_CAT(SIMD_CAT(name##_, SIMD_LEVEL), _f64)
#define SIMD_TABLE simd_table_f64
#define SIMD_TINY 2.2250738585072014e-308 /* DBL_MIN */
#define REXP(x) exp(x)
#define RFMA(a, b, c) fma(a, b, c)
#define SIMD_ARGS simd_head_args_f64
#define SIMD_BWD_OUT simd_bwd_out_f64
#define SIMD_CHECK_VALUES kdalab_check_values_f64
#else
#define SIMD_FN(name) SIMD_CAT(name##_, SIMD_LEVEL)
#define SIMD_TABLE simd_table
#define SIMD_TINY 1.17549435e-38f /* FLT_MIN */
#define REXP(x) expf(x)
#define RFMA(a, b, c) fmaf(a, b, c)
#define SIMD_ARGS simd_head_args
#define SIMD_BWD_OUT simd_bwd_out
#define SIMD_CHECK_VALUES kdalab_check_values_f32
#endif
#define SIMD_LINE (64 / sizeof(real)) /* elements per 64-byte cache line */

static inline size_t SIMD_FN(min_sz)(size_t a, size_t b) { return a < b ? a : b; }

/* x, or exactly 0 when x < SIMD_TINY (a decay factor that has left the normal
 * range of real). */
static inline real SIMD_FN(flush1)(real x) { return x < SIMD_TINY ? 0.0f : x; }

/*
 * The float32 emulation of a kernel that stores in bf16 or fp16 (REFERENCE.md
 * "Low precision, as production kernels use it"; kdalab_chunk_opts'
 * precision): x[0..n) rounded in place to the format p, bit for bit as
 * kdalab_round (lib/core/precision.c). KDALAB_FP32, and every float64 level
 * (whose calls never emulate storage): nothing.
 */
static inline void SIMD_FN(store_round)(real *x, size_t n, kdalab_precision p)
{
#if defined(SIMD_REAL_DOUBLE) && SIMD_REAL_DOUBLE
    (void)x;
    (void)n;
    (void)p;
#else
    const size_t nv = n / VLEN * VLEN;
    if (p == KDALAB_BF16) {
        for (size_t i = 0; i < nv; i += VLEN)
            VSTORE(x + i, VROUND_BF16(VLOAD(x + i)));
        for (size_t i = nv; i < n; i++)
            x[i] = kdalab_round_bf16(x[i]);
    } else if (p == KDALAB_FP16) {
        for (size_t i = 0; i < nv; i += VLEN)
            VSTORE(x + i, VROUND_FP16(VLOAD(x + i)));
        for (size_t i = nv; i < n; i++)
            x[i] = kdalab_round_fp16(x[i]);
    }
#endif
}

/* dst [rows, width] (rows width apart) = src's rows (ld apart) rounded to
 * the format p as store_round does: a chunk's input rows as a kernel that
 * stores in p holds them. */
static inline void SIMD_FN(store_rows)(real *dst, const real *src, size_t ld, size_t rows,
                                       size_t width, kdalab_precision p)
{
    for (size_t r = 0; r < rows; r++) {
        memcpy(dst + r * width, src + r * ld, width * sizeof(real));
        SIMD_FN(store_round)(dst + r * width, width, p);
    }
}
