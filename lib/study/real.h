/*
 * lib/study/real.h — the type switch of the study forms.
 *
 * lib/study/chunk_modes_impl.h is written once in terms of `real`, `EXP` and
 * `FN(name)`; lib/study/chunk_modes.c includes it twice, once with
 * KDALAB_REAL 64 and once with 32 (the way GSL's templates_on.h does), so
 * FN(study_chunk) becomes study_chunk_f64 and study_chunk_f32. The float64
 * reference (lib/reference/) is plain C and does not use this. Include this
 * file after defining KDALAB_REAL, and lib/study/real_undef.h after the
 * instantiation.
 */
#if KDALAB_REAL == 64
#define real double
#define EXP exp
#define FN(name) name##_f64
#elif KDALAB_REAL == 32
#define real float
#define EXP expf
#define FN(name) name##_f32
#else
#error "define KDALAB_REAL as 64 or 32 before including real.h"
#endif
