/*
 * lib/simd/scalar.c — the portable level of the optimized path: the kernel
 * headers (lib/simd/kernel_common.h lists them) with a "vector" of one float
 * (lib/simd/scalar_vocab.h; the compiler may still vectorize loops with the
 * default instruction set). Runs on any CPU; it is the fallback when neither
 * AVX2 nor AVX-512 is present or wanted.
 */
#include <math.h>

#include "simd_internal.h"

typedef float real;
#define SIMD_LEVEL scalar

/* exp for x <= 0, exactly 0 below the floor the vector levels use. */
static inline float scalar_exp(float x) { return x < -87.0f ? 0.0f : expf(x); }

#include "scalar_vocab.h"
#define VROUND_BF16(v) kdalab_round_bf16(v)
#define VROUND_FP16(v) kdalab_round_fp16(v)
/* The kernels and this level's table (lib/simd/instantiate.h). */
#include "instantiate.h"
