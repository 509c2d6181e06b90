/*
 * lib/simd/plan.c — what the chunkwise entry points of both precisions
 * share: cutting a call of N sequences x HV heads into tasks for the OpenMP
 * threads, one aligned workspace per thread (all allocated before anything
 * is written; kept between calls in a caller's kdalab_workspace), and
 * turning the kernels' non-finite counts into the report and the status.
 *
 * defines: kdalab_workspace_new, kdalab_workspace_free, kdalab_workspace_bytes
 *          (kdalab_call.h); kdalab__simd_plan_make, kdalab__simd_plan_task,
 *          kdalab__simd_plan_free, kdalab__simd_work_get, kdalab__simd_work_put,
 *          kdalab__simd_chunk_finish (simd_internal.h)
 */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"
#include "simd_internal.h"

kdalab_status kdalab__simd_plan_make(simd_plan *pl, size_t B, size_t H, int groups, size_t C,
                                     size_t c, size_t K, size_t V, size_t elem,
                                     size_t (*work_elems)(size_t, size_t, size_t, size_t, size_t,
                                                          int, int),
                                     int ab, int stored, kdalab_workspace *ws)
{
    /* Tasks: groups of nh consecutive heads of one batch entry, nh the
     * largest of 4, 3, 2 that divides H and leaves the threads equal shares (a
     * task count that is a multiple of the thread count, or at least four
     * tasks per thread), else 1. A thread then reads the rows of nh
     * neighbouring heads (adjacent in fla's [B, T, H, .] layout) together,
     * chunk by chunk: nh times longer runs of contiguous memory, and each 4 KB
     * page of the inputs walked once per task instead of once per head. With
     * fewer heads than threads, one head per task and its value columns
     * (independent in every mechanism) split into blocks of 16. */
    int nth = kdalab_get_num_threads();
    size_t BH = B * H, nh = 1, ngroups = H, nsplit = 1, width = V;
    if (BH < (size_t)nth && V > 16) {
        size_t want = ((size_t)nth + BH - 1) / BH;
        width = (V + want - 1) / want;
        width = (width + 15) / 16 * 16;
        nsplit = (V + width - 1) / width;
    } else {
        for (nh = groups ? 4 : 1; nh > 1; nh--) {
            size_t tasks = B * (H / nh);
            if (H % nh == 0 && (tasks % (size_t)nth == 0 || tasks >= 4 * (size_t)nth))
                break;
        }
        ngroups = H / nh;
    }
    size_t ntasks = B * ngroups * nsplit;
    if ((size_t)nth > ntasks)
        nth = (int)ntasks;

    /* workspace per thread, allocated before anything is written */
    size_t CC, CKV, bytes;
    if (!kdalab_mul_size(C, C, &CC) || !kdalab_mul_size(C, K + width + 16, &CKV) ||
        !kdalab_mul_size(CC + CKV, 16 * elem, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "chunk C = %zu with K = %zu, V = %zu overflows",
                           C, K, V);
    bytes = (work_elems(C, c, K, width, nh, ab, stored) * elem + 63) / 64 * 64;
    void **work;
    kdalab_status s = kdalab__simd_work_get(ws, nth, bytes, 0, &work, NULL);
    if (s != KDALAB_OK)
        return s;
    *pl = (simd_plan){.nth = nth, .nh = nh, .ngroups = ngroups, .nsplit = nsplit,
                      .width = width, .ntasks = ntasks, .work = work, .ws = ws};
    return KDALAB_OK;
}

void kdalab__simd_plan_task(const simd_plan *pl, size_t V, size_t task, size_t *b, size_t *h,
                            size_t *v0, size_t *v1)
{
    size_t bg = task / pl->nsplit, part = task % pl->nsplit, grp = bg % pl->ngroups;
    *b = bg / pl->ngroups;
    *h = grp * pl->nh;
    *v0 = part * pl->width;
    *v1 = *v0 + pl->width < V ? *v0 + pl->width : V;
}

void kdalab__simd_plan_free(simd_plan *pl) { kdalab__simd_work_put(pl->ws, pl->nth, pl->work, NULL); }

/* ---- workspaces ------------------------------------------------------------ */

/* A caller's workspace: nth per-thread blocks of bytes each, and scratch. */
struct kdalab_workspace {
    int nth;
    size_t bytes;
    void **work;
    void *extra;
    size_t extra_bytes;
};

static void free_blocks(int nth, void **work)
{
    for (int t = 0; work && t < nth; t++)
        free(work[t]);
    free(work);
}

/* nth blocks of bytes (a multiple of 64), 64-byte aligned: all or none. */
static void **alloc_blocks(int nth, size_t bytes)
{
    void **work = calloc(nth > 0 ? (size_t)nth : 1, sizeof *work); /* nth = 0: none */
    int ok = work != NULL;
    for (int t = 0; ok && t < nth; t++)
        ok = (work[t] = aligned_alloc(64, bytes)) != NULL;
    if (!ok) {
        free_blocks(work ? nth : 0, work);
        return NULL;
    }
    return work;
}

kdalab_workspace *kdalab_workspace_new(void) { return calloc(1, sizeof(kdalab_workspace)); }

void kdalab_workspace_free(kdalab_workspace *w)
{
    if (!w)
        return;
    free_blocks(w->nth, w->work);
    free(w->extra);
    free(w);
}

size_t kdalab_workspace_bytes(const kdalab_workspace *w)
{
    return w ? (size_t)w->nth * w->bytes + w->extra_bytes : 0;
}

kdalab_status kdalab__simd_work_get(kdalab_workspace *ws, int nth, size_t bytes,
                                    size_t extra_bytes, void ***work, void **extra)
{
    bytes = (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
    if (!ws) {
        void **w = alloc_blocks(nth, bytes);
        void *e = extra_bytes ? malloc(extra_bytes) : NULL;
        if (!w || (extra_bytes && !e)) {
            free_blocks(w ? nth : 0, w);
            free(e);
            return kdalab_fail(KDALAB_ENOMEM, "no memory for %d workspaces of %zu bytes", nth,
                               bytes);
        }
        *work = w;
        if (extra)
            *extra = e;
        return KDALAB_OK;
    }
    if (ws->nth < nth || ws->bytes < bytes || !ws->work) { /* grow: the new set, then the old goes */
        int n = ws->nth > nth ? ws->nth : nth;
        size_t b = ws->bytes > bytes ? ws->bytes : bytes;
        void **w = alloc_blocks(n, b);
        if (!w)
            return kdalab_fail(KDALAB_ENOMEM, "no memory for %d workspaces of %zu bytes", n, b);
        free_blocks(ws->nth, ws->work);
        ws->work = w, ws->nth = n, ws->bytes = b;
    }
    if (ws->extra_bytes < extra_bytes) {
        void *e = malloc(extra_bytes);
        if (!e)
            return kdalab_fail(KDALAB_ENOMEM, "no memory for %zu bytes of scratch", extra_bytes);
        free(ws->extra);
        ws->extra = e, ws->extra_bytes = extra_bytes;
    }
    *work = ws->work;
    if (extra)
        *extra = extra_bytes ? ws->extra : NULL;
    return KDALAB_OK;
}

void kdalab__simd_work_put(kdalab_workspace *ws, int nth, void **work, void *extra)
{
    if (ws)
        return; /* the caller's: kept for the next call */
    free_blocks(nth, work);
    free(extra);
}

kdalab_status kdalab__simd_chunk_finish(size_t bad_o, size_t bad_ht, size_t bad_h,
                                        kdalab_report *report)
{
    if (report) {
        report->nonfinite_o = bad_o;
        report->nonfinite_ht = bad_ht;
        report->max_exponent = 0;
    }
    if (bad_o || bad_ht || bad_h)
        return kdalab_fail(KDALAB_ERANGE,
                           "SIMD chunkwise form: the computation overflowed from finite inputs: "
                           "%zu non-finite values in o, %zu in ht and %zu in h (outputs "
                           "written)",
                           bad_o, bad_ht, bad_h);
    kdalab_clear_error();
    return KDALAB_OK;
}
