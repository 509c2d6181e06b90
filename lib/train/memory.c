/*
 * lib/train/memory.c — a training program keeps the memory it frees, so that
 * each step reuses the pages of the step before (lib/kdalab_trainer.h says
 * when and why).
 *
 * defines: kdalab_train_keep_memory
 */
#include <stdlib.h> /* first: glibc's headers define __GLIBC__ */
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "kdalab_trainer.h"

int kdalab_train_keep_memory(void)
{
#ifdef __GLIBC__
    /* 32 MiB is the largest mmap threshold glibc accepts on a 64-bit system;
     * a trim threshold of 256 MiB keeps a step's buffers (≈ 0.25 GB at
     * bench_train's d = 128) in the heap between steps */
    return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
#else
    return 0;
#endif
}
