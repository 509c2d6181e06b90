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
/* x[0..n) rounded in place to p (BF16, FP16; FP32 leaves x as it is), each
 * element bit for bit as kdalab_round gives it, in the vectors of the SIMD
 * level in use (lib/simd/entry.c): how the SIMD path's float32 chunkwise
 * form stores when kdalab_chunk_opts.precision asks it to. Errors:
 * KDALAB_EINVAL for a p that is none of the three, KDALAB_ENULL for NULL x
 * with n > 0 (n = 0: nothing is read). */
kdalab_status kdalab_round_array(kdalab_precision p, float *x, size_t n);

/*
 * kdalab_store_f64 — a float64 array as a kernel storing it in p holds it:
 * y[i] = x[i] rounded to float32 (to nearest even, whatever the caller's
 * rounding mode; beyond float32's range +-inf, IEEE 754's overflow), then
 * to p as kdalab_round_array rounds, for i < n; and *max_abs (unless NULL)
 * = max |x[i]| in float64 (a NaN is skipped; 0 for n = 0), so that a caller
 * can check x against p's range without reading it again. One pass over x, spread over the threads.
 * Errors: those of kdalab_round_array (KDALAB_EINVAL for an unknown p,
 * KDALAB_ENULL for a NULL x or y with n > 0); nothing is written then.
 */
kdalab_status kdalab_store_f64(kdalab_precision p, const double *x, float *y, size_t n,
                               double *max_abs);

/*
 * kdalab_error_sums — how far a float32 result is from its float64
 * reference, block by block: the elements [i block, min((i + 1) block, n))
 * of ref and got (each n elements, any layout the caller flattened) give
 * sums[4 i .. 4 i + 3] = max |got - ref|, max |ref|, sum (got - ref)^2,
 * sum ref^2, for i < ceil(n / block) (each difference formed in float64,
 * exact where got is within a factor of 2 of ref, as a close result is;
 * the sums in any order). The measures of kdalab.testing's tolerances
 * (max error / max |ref|, the RMS ratio), one pass over each array with the
 * blocks spread over the threads. A NaN or an infinity makes the block's
 * sums non-finite (its maxima may skip a NaN): the caller measures such a
 * block another way. Errors: KDALAB_ENULL for a NULL array with n > 0,
 * KDALAB_EINVAL for block = 0; nothing is written then.
 */
kdalab_status kdalab_error_sums(const double *ref, const float *got, size_t n, size_t block,
                                double *sums);

KDALAB_END_DECLS

#endif /* KDALAB_PRECISION_H */
