/*
 * tests/simd_levels.c — what the SIMD suites share (tests/simd_levels.h).
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
double simdt_worst[SIMDT_N_LEVELS];

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

void simdt_note(double e)
{
    kdalab_simd_level l = kdalab_simd_get_level();
    if (e > simdt_worst[l])
        simdt_worst[l] = e;
}

void simdt_print_worst(double tol)
{
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++)
        if (kdalab_simd_level_available(simdt_levels[li]))
            printf("    level %s: largest relative error against float64 %.2e (tolerance %.0e)\n",
                   kdalab_simd_level_name(simdt_levels[li]), simdt_worst[li], tol);
}
