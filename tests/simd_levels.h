/*
 * tests/simd_levels.h — what the SIMD suites (test_simd_chunk, test_simd_step)
 * share about levels (tests/simd_levels.c): the dispatch levels, choosing
 * one for the calls that follow, and the largest error seen at each level in
 * each precision (tests/simd_precisions.h).
 */
#ifndef KDALAB_TESTS_SIMD_LEVELS_H
#define KDALAB_TESTS_SIMD_LEVELS_H

#include "kdalab.h"
#include "simd_precisions.h"

/* scalar, avx2, avx512: every level a test runs at, when the CPU can */
#define SIMDT_N_LEVELS 3
extern const kdalab_simd_level simdt_levels[SIMDT_N_LEVELS];

/* Select level l for the following calls (and check it is the one in use);
 * 0, with a message the first time, when this CPU cannot run it. */
int simdt_use_level(kdalab_simd_level l);

/* simdt_note records error e of precision p at the level in use; at the end
 * simdt_print_worst prints one line per precision and level the CPU runs
 * naming the largest against p's tolerance (what: "chunkwise", "decode step"). */
void simdt_note(const simdt_precision *p, double e);
void simdt_print_worst(const char *what);

#endif
