/*
 * lib/simd/scalar_f64.c — the portable level of the float64 optimized path:
 * the kernel headers (lib/simd/kernel_common.h lists them) over double, with
 * a "vector" of one double (the compiler may still vectorize loops with the
 * default instruction set). Runs on any CPU; the float64 fallback when
 * neither AVX2 nor AVX-512 is present or wanted.
 */
#include <math.h>

#include "simd_internal.h"

typedef double real;
#define SIMD_REAL_DOUBLE 1
typedef double vf;
#define VLEN 1
#define VZERO() 0.0
typedef int vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) ((n) > 0)
#define VBLEND(m, a, b) ((m) ? (a) : (b))
#define VSET1(x) ((double)(x))
#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VHSUM(v) (v)
#define VEXP(v) scalar_exp_f64(v)
#define VFLUSH(v) ((v) < 2.2250738585072014e-308 ? 0.0 : (v))
#define VMAX(a, b) ((a) > (b) ? (a) : (b))
#define VMIN(a, b) ((a) < (b) ? (a) : (b))
#define VALL_LE(v, x) ((v) <= (x))
#define VALL_GE(v, x) ((v) >= (x))
#define SIMD_FN(name) name##_scalar_f64

/* exp for x <= 0, exactly 0 below the floor the vector levels use. */
static inline double scalar_exp_f64(double x) { return x < -708.0 ? 0.0 : exp(x); }

/* The kernels, instantiated for this level (order: see kernel_common.h). */
#include "kernel_common.h"
#include "gemm.h"
#include "chunk_workspace.h"
#include "chunk_scores.h"
#include "chunk_kernels.h"
#include "screen.h"
#include "step_kernel.h"

const simd_table_f64 kdalab_simd_table_scalar_f64 = {
    .name = "scalar",
    .work_floats = work_floats_scalar_f64,
    .chunk_head = chunk_head_scalar_f64,
    .step = step_scalar_f64,
    .screen = screen_scalar_f64,
};
