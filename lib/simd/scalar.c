/*
 * lib/simd/scalar.c — the portable level of the optimized path: the kernel
 * headers (lib/simd/kernel_common.h lists them) with a "vector" of one float
 * (the compiler may still vectorize loops with the default instruction set).
 * Runs on any CPU; it is the fallback when neither AVX2 nor AVX-512 is
 * present or wanted.
 */
#include <math.h>

#include "simd_internal.h"

typedef float real;
typedef float vf;
#define VLEN 1
#define VZERO() 0.0f
typedef int vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) ((n) > 0)
#define VBLEND(m, a, b) ((m) ? (a) : (b))
#define VSET1(x) ((float)(x))
#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VHSUM(v) (v)
#define VEXP(v) scalar_exp(v)
#define VFLUSH(v) ((v) < 1.17549435e-38f ? 0.0f : (v))
#define VMAX(a, b) ((a) > (b) ? (a) : (b))
#define VMIN(a, b) ((a) < (b) ? (a) : (b))
#define VALL_LE(v, x) ((v) <= (x))
#define VALL_GE(v, x) ((v) >= (x))
#define SIMD_FN(name) name##_scalar

/* exp for x <= 0, exactly 0 below the floor the vector levels use. */
static inline float scalar_exp(float x) { return x < -87.0f ? 0.0f : expf(x); }

/* The kernels, instantiated for this level (order: see kernel_common.h). */
#include "kernel_common.h"
#include "gemm.h"
#include "chunk_workspace.h"
#include "chunk_scores.h"
#include "chunk_kernels.h"
#include "screen.h"
#include "step_kernel.h"

const simd_table kdalab_simd_table_scalar = {
    .name = "scalar",
    .work_floats = work_floats_scalar,
    .chunk_head = chunk_head_scalar,
    .step = step_scalar,
    .screen = screen_scalar,
};
