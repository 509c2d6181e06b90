/*
 * lib/simd/instantiate.h — what every ISA file (scalar.c, avx2.c, avx512.c
 * and their _f64 twins) does after defining its vector vocabulary: compile
 * the kernel headers for that level and precision (in the order
 * lib/simd/kernel_common.h gives) and export them as one kernel table. Written
 * once, so that an ISA file holds only what differs between them: its
 * vocabulary and the intrinsics behind it.
 *
 * defines: kdalab_simd_table_LEVEL (float) or kdalab_simd_table_LEVEL_f64
 * (double), declared in lib/simd/simd_internal.h: kdalab_simd_table_avx2 from
 * avx2.c, kdalab_simd_table_avx2_f64 from avx2_f64.c, and so on.
 */
#include "kernel_common.h"
#include "gemm.h"
#include "chunk_workspace.h"
#include "chunk_scores.h"
#include "dplr_scores.h"
#include "chunk_kernels.h"
#include "chunk_bwd_scores.h"
#include "dplr_bwd.h"
#include "chunk_bwd.h"
#include "screen.h"
#include "step_kernel.h"

const SIMD_TABLE SIMD_FN(kdalab_simd_table) = {
    .name = SIMD_LEVEL_NAME,
    .work_floats = SIMD_FN(work_floats),
    .chunk_head = SIMD_FN(chunk_head),
    .step = SIMD_FN(step),
    .screen = SIMD_FN(screen),
    .bwd_work_floats = SIMD_FN(bwd_work_floats),
    .chunk_head_bwd = SIMD_FN(chunk_head_bwd),
#if !(defined(SIMD_REAL_DOUBLE) && SIMD_REAL_DOUBLE)
    .store_round = SIMD_FN(store_round), /* float32 alone emulates storage */
#endif
};
