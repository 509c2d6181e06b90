/*
 * lib/real.h — the one type switch behind kdalab's float64/float32 pairs.
 *
 * The reference algorithms are written once, in the lib/NAME_impl.h files, in terms of
 * `real`, `EXP`, `SQRT` and `FN(name)`; each .c file includes them twice,
 * once with KDALAB_REAL 64 and once with 32 (the way GSL's templates_on.h
 * does). Include this file after defining KDALAB_REAL, and lib/real_undef.h
 * after the instantiation.
 */
#if KDALAB_REAL == 64
#define real double
#define EXP exp
#define SQRT sqrt
#define FABS fabs
#define REAL_IS_FINITE(x) isfinite(x)
#define FN(name) name##_f64
#elif KDALAB_REAL == 32
#define real float
#define EXP expf
#define SQRT sqrtf
#define FABS fabsf
#define REAL_IS_FINITE(x) isfinite(x)
#define FN(name) name##_f32
#else
#error "define KDALAB_REAL as 64 or 32 before including real.h"
#endif
