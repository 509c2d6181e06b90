/*
 * lib/simd/scalar_f64.c — the portable level of the float64 optimized path:
 * the kernel headers (lib/simd/kernel_common.h lists them) over double, with
 * a "vector" of one double (lib/simd/scalar_vocab.h; the compiler may still
 * vectorize loops with the default instruction set). Runs on any CPU; the
 * float64 fallback when neither AVX2 nor AVX-512 is present or wanted.
 */
#include <math.h>

#include "simd_internal.h"

typedef double real;
#define SIMD_REAL_DOUBLE 1
#define SIMD_LEVEL scalar

/* exp for x <= 0, exactly 0 below the floor the vector levels use. */
static inline double scalar_exp(double x) { return x < -708.0 ? 0.0 : exp(x); }

#include "scalar_vocab.h"
/* The kernels and this level's table (lib/simd/instantiate.h). */
#include "instantiate.h"
