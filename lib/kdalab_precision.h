/*
 * kdalab_precision.h — emulated low-precision storage (bf16, fp16), what the float32
 * chunkwise form stores through (lib/core/precision.c).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_PRECISION_H
#define KDALAB_PRECISION_H

#include "kdalab_forms.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Low-precision emulation                                                   */
/* ------------------------------------------------------------------------- */

/* Round a float32 to the nearest bfloat16 (ties to even), returned as float. NaN stays NaN. */
float kdalab_round_bf16(float x);
/* Round a float32 to the nearest IEEE binary16 (ties to even, subnormals kept,
 * |x| beyond the fp16 range -> +-inf), returned as float. */
float kdalab_round_fp16(float x);
/* Round to the given precision (FP32: identity). */
float kdalab_round(kdalab_precision p, float x);

KDALAB_END_DECLS

#endif /* KDALAB_PRECISION_H */
