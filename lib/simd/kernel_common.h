/*
 * lib/simd/kernel_common.h — the base of the optimized path's kernel headers:
 * the vector vocabulary they are written in (defined by the including ISA
 * file), compiler hints, and two scalar functions.
 *
 * defines, per ISA suffix (_scalar/_avx2/_avx512 for float, the same with
 * _f64 for double): min_sz, flush1
 * defines (macros, used by the kernel headers after it): SIMD_INLINE,
 * SIMD_PRAGMA, SIMD_UNROLL(n), SIMD_TINY, SIMD_LINE, REXP, RFMA (a * b + c
 * rounded once, as a vector lane's VFMA), SIMD_ARGS,
 * SIMD_CHECK_VALUES
 *
 * The kernels are written once, over an element type `real`, and compiled
 * once per instruction set and element type: lib/simd/scalar.c (VLEN 1),
 * avx2.c (VLEN 8) and avx512.c (VLEN 16) for float, scalar_f64.c (VLEN 1),
 * avx2_f64.c (VLEN 4) and avx512_f64.c (VLEN 8) for double. Each defines the
 * vocabulary below, then includes the kernel headers in this order (each
 * uses only what the ones before it define):
 *
 *   kernel_common.h    this file
 *   gemm.h             the register-blocked matrix product and a transpose
 *   chunk_workspace.h  one task's workspace and its input prefetching
 *   chunk_scores.h     decay factors and score matrices (steps 1 and 5)
 *   chunk_kernels.h    the UT transform, one chunk, one head (the table's
 *                      chunk_head and work_floats)
 *   screen.h           the vector input screen (the table's screen)
 *   step_kernel.h      the decode step (the table's step)
 *
 * and fill their simd_table or simd_table_f64 (lib/simd/simd_internal.h)
 * with the results. Every function is static and named through
 * SIMD_FN(name), so each ISA file gets its own copy: gemm_scalar, gemm_avx2,
 * gemm_avx2_f64, and so on.
 *
 * The vocabulary the including file defines:
 *   real                   the element type, float or double
 *   SIMD_REAL_DOUBLE       1 when real is double, else 0 (or undefined)
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
 *   SIMD_FN(name)          name with the level's suffix
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

#if defined(SIMD_REAL_DOUBLE) && SIMD_REAL_DOUBLE
#define SIMD_TINY 2.2250738585072014e-308 /* DBL_MIN */
#define REXP(x) exp(x)
#define RFMA(a, b, c) fma(a, b, c)
#define SIMD_ARGS simd_head_args_f64
#define SIMD_CHECK_VALUES kdalab_check_values_f64
#else
#define SIMD_TINY 1.17549435e-38f /* FLT_MIN */
#define REXP(x) expf(x)
#define RFMA(a, b, c) fmaf(a, b, c)
#define SIMD_ARGS simd_head_args
#define SIMD_CHECK_VALUES kdalab_check_values_f32
#endif
#define SIMD_LINE (64 / sizeof(real)) /* elements per 64-byte cache line */

static inline size_t SIMD_FN(min_sz)(size_t a, size_t b) { return a < b ? a : b; }

/* x, or exactly 0 when x < SIMD_TINY (a decay factor that has left the normal
 * range of real). */
static inline real SIMD_FN(flush1)(real x) { return x < SIMD_TINY ? 0.0f : x; }
