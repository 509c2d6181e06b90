/*
 * lib/simd/threads.c — how many threads kdalab's OpenMP loops run on: the
 * caller's setting, else OpenMP's own count. A process-wide setting, as the
 * SIMD level is (levels.c), so that a program whose other libraries set
 * OpenMP's count for themselves (PyTorch does at import) can still give
 * kdalab every core.
 *
 * defines: kdalab_set_num_threads, kdalab_get_num_threads (lib/kdalab_simd.h);
 *          kdalab__threads_for, kdalab__nearest_begin, kdalab__nearest_end
 *          (internal.h)
 */
#include <fenv.h>
#include <omp.h>
#include <stdatomic.h>

#include "internal.h"

/* The setting: 0 for OpenMP's count. */
static atomic_int num_threads = 0;

kdalab_status kdalab_set_num_threads(int n)
{
    kdalab_clear_error();
    if (n < 0 || n > KDALAB_MAX_THREADS)
        return kdalab_fail(KDALAB_EINVAL, "thread count %d: expected 1 to %d, or 0 for OpenMP's "
                                          "own count", n, KDALAB_MAX_THREADS);
    atomic_store(&num_threads, n);
    return KDALAB_OK;
}

int kdalab_get_num_threads(void)
{
    const int n = atomic_load(&num_threads);
    return n > 0 ? n : omp_get_max_threads();
}

int kdalab__nearest_begin(void)
{
    const int mode = fegetround();
    if (mode != FE_TONEAREST)
        fesetround(FE_TONEAREST);
    return mode;
}

void kdalab__nearest_end(int mode)
{
    if (mode != FE_TONEAREST)
        fesetround(mode);
}

int kdalab__threads_for(size_t tasks)
{
    const int n = kdalab_get_num_threads();
    return tasks < (size_t)n ? (tasks ? (int)tasks : 1) : n;
}
