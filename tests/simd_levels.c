/*
 * tests/simd_levels.c — what the SIMD suites share about levels
 * (tests/simd_levels.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "simd_levels.h"

const kdalab_simd_level simdt_levels[SIMDT_N_LEVELS] = {KDALAB_SIMD_SCALAR, KDALAB_SIMD_AVX2,
                                                        KDALAB_SIMD_AVX512};

/* the largest error seen, [0] float32 and [1] float64, per level */
static double worst[2][SIMDT_N_LEVELS];

int simdt_use_level(kdalab_simd_level l)
{
    static int told[SIMDT_N_LEVELS];
    if (!kdalab_simd_level_available(l)) {
        if (!told[l]++)
            printf("    [ SKIP     ] level %s: not available on this CPU (skipped in every "
                   "test)\n", kdalab_simd_level_name(l));
        return 0;
    }
    assert_int_equal(kdalab_simd_set_level(l), KDALAB_OK);
    assert_string_equal(kdalab_simd_level_name(kdalab_simd_get_level()), kdalab_simd_level_name(l));
    return 1;
}

void simdt_note(const simdt_precision *p, double e)
{
    kdalab_simd_level l = kdalab_simd_get_level();
    double *w = &worst[p == &simdt_f64][l];
    if (e > *w)
        *w = e;
}

void simdt_print_worst(const char *what)
{
    const simdt_precision *ps[2] = {&simdt_f32, &simdt_f64};
    for (int pi = 0; pi < 2; pi++)
        for (size_t li = 0; li < SIMDT_N_LEVELS; li++)
            if (kdalab_simd_level_available(simdt_levels[li]))
                printf("    %s, level %s: largest relative error of the %s against the float64 "
                       "reference %.2e (tolerance %.0e)\n", ps[pi]->name,
                       kdalab_simd_level_name(simdt_levels[li]), what, worst[pi][li],
                       ps[pi]->tol);
}
