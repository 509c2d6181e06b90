/*
 * tests/simd_levels.h — what the SIMD suites (test_simd, test_simd_step,
 * test_simd_f64) share (tests/simd_levels.c): the dispatch levels, choosing
 * one for the calls that follow, and the largest error seen at each.
 */
#ifndef KDALAB_TESTS_SIMD_LEVELS_H
#define KDALAB_TESTS_SIMD_LEVELS_H

#include "kdalab.h"

/* scalar, avx2, avx512: every level a test runs at, when the CPU can */
#define SIMDT_N_LEVELS 3
extern const kdalab_simd_level simdt_levels[SIMDT_N_LEVELS];

/* Select level l for the following calls (and check it is the one in use);
 * 0, with a message the first time, when this CPU cannot run it. */
int simdt_use_level(kdalab_simd_level l);

/* The largest error seen at each level (simdt_note records e at the level
 * in use), and one line per level the CPU runs naming them against tol. */
extern double simdt_worst[SIMDT_N_LEVELS];
void simdt_note(double e);
void simdt_print_worst(double tol);

#endif
