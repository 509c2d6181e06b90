/*
 * lib/simd/threads.c — how many threads kdalab's OpenMP loops run on: the
 * caller's setting, else OpenMP's own count. A process-wide setting, as the
 * SIMD level is (levels.c), so that a program whose other libraries set
 * OpenMP's count for themselves (PyTorch does at import) can still give
 * kdalab every core.
 *
 * defines: kdalab_set_num_threads, kdalab_get_num_threads (lib/kdalab_simd.h)
 */
#include <omp.h>
#include <stdatomic.h>

#include "internal.h"

/* The setting: 0 for OpenMP's count. */
static atomic_int num_threads = 0;

kdalab_status kdalab_set_num_threads(int n)
{
    kdalab_clear_error();
    if (n < 0)
        return kdalab_fail(KDALAB_EINVAL, "thread count %d: expected >= 1, or 0 for OpenMP's "
                                          "own count", n);
    atomic_store(&num_threads, n);
    return KDALAB_OK;
}

int kdalab_get_num_threads(void)
{
    const int n = atomic_load(&num_threads);
    return n > 0 ? n : omp_get_max_threads();
}
