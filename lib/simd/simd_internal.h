/*
 * lib/simd/simd_internal.h — what the level choice (lib/simd/levels.c), the
 * entry points (entry.c, recurrent.c, plan.c) and the per-ISA kernel files
 * (scalar.c, avx2.c, avx512.c and their _f64 twins) share. Not installed.
 *
 * Each kernel file defines its vector vocabulary and includes
 * lib/simd/instantiate.h, which compiles the kernel headers
 * (lib/simd/kernel_common.h lists them) for its instruction set and exports
 * one table of entry points (the tables declared below); the dispatcher
 * picks one table at run time (the only dispatch point) and runs the
 * threading and the input validation around it.
 */
#ifndef KDALAB_SIMD_INTERNAL_H
#define KDALAB_SIMD_INTERNAL_H

#include <stddef.h>
#include "kdalab.h"

/*
 * One task of one chunkwise call: nh consecutive heads (b, h .. h + nh - 1)
 * of one batch entry, restricted to the value columns [v0, v1) (columns of V
 * are independent in every mechanism of the lineage, so a head can be split
 * across threads by columns; a split task has nh = 1).
 *
 * Row r of the first head's sequence is at q + r*ld_qk (K floats),
 * k + r*ld_qk, v + r*ld_v (V floats), g + r*ld_g (gw floats), beta + r*ld_b,
 * o + r*ld_v; head j's rows follow its predecessor's (fla's [B, T, H, .]
 * layout: + j*K, + j*V, + j*gw, + j). h0/ht point at the first head's
 * [K, V] state, head j's at + j*K*V (NULL: zero / not wanted). hs points at
 * the first head's state entering chunk 0, the state entering chunk i at
 * + i*ld_hs (fla's h [B, NT, HV, K, V]: ld_hs = HV*K*V; NULL: not wanted),
 * chunk i of h_chunk positions (a multiple of chunk: h_chunk / chunk of the
 * form's chunks).
 */
typedef struct {
    kdalab_mechanism mech;
    size_t T, K, V;          /* sequence length and head dims                  */
    size_t v0, v1;           /* value columns handled by this call             */
    size_t nh;               /* consecutive heads in this task (>= 1)          */
    size_t chunk, subchunk;  /* C and c                                        */
    size_t state_bytes;      /* the backward's budget for stored chunk states, */
                             /* >= 1 (bwd_group in chunk_bwd_scores.h)         */
    float scale;
    const float *q, *k, *v, *g, *beta, *h0;
    float *o, *ht, *hs;
    size_t ld_qk, ld_v, ld_g, ld_b, ld_hs;
    size_t h_chunk;     /* positions between the states hs holds                     */
    const float *a, *b; /* the DPLR row's a, b (rows ld_ab apart, head j at + j*K), */
    size_t ld_ab;       /* else NULL                                                 */
    kdalab_precision store; /* the forward's emulated storage (chunk_kernels.h says   */
                            /* where it rounds); the backward's is KDALAB_FP32        */
} simd_head_args;

/* The same for the float64 path (kdalab_simd_chunk_f64). */
typedef struct {
    kdalab_mechanism mech;
    size_t T, K, V;
    size_t v0, v1;
    size_t nh;
    size_t chunk, subchunk;
    size_t state_bytes;
    double scale;
    const double *q, *k, *v, *g, *beta, *h0;
    double *o, *ht, *hs;
    size_t ld_qk, ld_v, ld_g, ld_b, ld_hs;
    size_t h_chunk;
    const double *a, *b;
    size_t ld_ab;
    kdalab_precision store; /* always KDALAB_FP32: float64 emulates no storage */
} simd_head_args_f64;

/*
 * The arrays of one backward task beyond its forward's inputs (which come in
 * the task's simd_head_args, with nh = 1 and all value columns): d_o like o,
 * dht like h0 (NULL: zero), and the gradients at the same offsets and
 * strides as the inputs they belong to (NULL: not wanted), except dq and dk,
 * whose rows are ld_dqk apart (ld_qk, or HV K when grouped value heads write
 * one row each, summed later).
 */
typedef struct {
    const float *d_o, *dht;
    float *dq, *dk, *dv, *dg, *dbeta, *dh0;
    size_t ld_dqk;
    float *da, *db; /* the DPLR row's, like a, b (NULL: not wanted) */
} simd_bwd_out;

/* The same for the float64 path. */
typedef struct {
    const double *d_o, *dht;
    double *dq, *dk, *dv, *dg, *dbeta, *dh0;
    size_t ld_dqk;
    double *da, *db;
} simd_bwd_out_f64;

/*
 * The bounds the SIMD screens test against, named once for them. They are not
 * the rules: g <= 0, beta in [0, 2], every input finite and scale finite and
 * > 0 are stated once, in lib/core/rules.c (rule_holds, kdalab_check_scale),
 * which decides every value a screen is not sure of and words the error. A
 * screen uses these only to say "certainly legal" quickly (screen.h,
 * and the entry points' screens in entry_impl.h).
 */
/* The backward's budget for stored chunk states per task when
 * kdalab_chunk_opts.bwd_state_bytes is 0 and the call has a workspace: 128
 * MiB, the N + 2 states of up to N = 1022 chunks at K = V = 128 in float64
 * (T = 16352 at C = 16). */
#define SIMD_BWD_STATE_BYTES ((size_t)128 << 20)

#define SIMD_RULE_G_MAX 0.0f    /* KDALAB_RULE_LOG_DECAY: g <= this       */
#define SIMD_RULE_BETA_MIN 0.0f /* KDALAB_RULE_BETA: beta in [MIN, MAX]   */
#define SIMD_RULE_BETA_MAX 2.0f

/* A kernel table: one per instruction-set level. */
typedef struct {
    const char *name;
    /* Floats of workspace one task needs (chunk C, sub-chunk c, K, W value
     * columns, nh heads; ab: the DPLR row's, a and b set in the task;
     * stored: the task's store is not KDALAB_FP32, room for the chunk's
     * input rows as stored). */
    size_t (*work_floats)(size_t C, size_t c, size_t K, size_t W, size_t nh, int ab,
                          int stored);
    /* Run one task (nh heads, columns [v0, v1)) with work_floats() of 64-byte
     * aligned workspace. Cannot fail: inputs were validated. Adds the number
     * of non-finite values it wrote to o, ht and hs to *bad_o, *bad_ht, *bad_h. */
    void (*chunk_head)(const simd_head_args *a, float *work, size_t *bad_o, size_t *bad_ht,
                       size_t *bad_h);
    /* One decode step on validated arguments except S, whose finiteness the
     * kernel checks while reading it (before anything is written). Returns
     * KDALAB_OK; KDALAB_ENONFINITE with *bad = index of a non-finite S element
     * (S and o untouched); KDALAB_ENOMEM when K or V is too large for its
     * stack buffer and malloc fails (S and o untouched); KDALAB_ERANGE when
     * the new state has a non-finite value (S and o written). Sets no error
     * message: the caller words it. */
    kdalab_status (*step)(kdalab_mechanism mech, size_t K, size_t V, float scale,
                          const float *q, const float *k, const float *v, const float *g,
                          float beta, float *S, float *o, size_t *bad);
    /* 1 when every x[0..n) is certainly legal under rule, 0 when not sure: a
     * filter that lets the dispatcher skip the exact check, never a verdict
     * (lib/simd/screen.h). */
    int (*screen)(const float *x, size_t n, kdalab_value_rule rule);
    /* Floats of workspace one backward task needs (chunk C, sub-chunk c, K,
     * V, nchunks chunks of its sequence; ab as work_floats'; state_bytes the
     * budget for its stored states, as the entry resolved it: >= 1). */
    size_t (*bwd_work_floats)(size_t C, size_t c, size_t K, size_t V, size_t nchunks, int ab,
                              size_t state_bytes);
    /* The chunkwise backward of one head (a->nh == 1, columns [0, V)) with
     * bwd_work_floats() of 64-byte aligned workspace (lib/simd/chunk_bwd.h).
     * Cannot fail: inputs were validated. */
    void (*chunk_head_bwd)(const simd_head_args *a, const simd_bwd_out *bo, float *work);
    /* x[0..n) rounded in place to p, bit for bit as kdalab_round
     * (kernel_common.h's store_round; KDALAB_FP32: untouched). */
    void (*store_round)(float *x, size_t n, kdalab_precision p);
} simd_table;

/* The float64 kernel table (lib/simd/scalar_f64.c, avx2_f64.c, avx512_f64.c):
 * the same entries as simd_table with double for float (work_floats counts
 * doubles). */
typedef struct {
    const char *name;
    size_t (*work_floats)(size_t C, size_t c, size_t K, size_t W, size_t nh, int ab,
                          int stored);
    void (*chunk_head)(const simd_head_args_f64 *a, double *work, size_t *bad_o,
                       size_t *bad_ht, size_t *bad_h);
    kdalab_status (*step)(kdalab_mechanism mech, size_t K, size_t V, double scale,
                          const double *q, const double *k, const double *v,
                          const double *g, double beta, double *S, double *o, size_t *bad);
    int (*screen)(const double *x, size_t n, kdalab_value_rule rule);
    size_t (*bwd_work_floats)(size_t C, size_t c, size_t K, size_t V, size_t nchunks, int ab,
                              size_t state_bytes);
    void (*chunk_head_bwd)(const simd_head_args_f64 *a, const simd_bwd_out_f64 *bo,
                           double *work);
} simd_table_f64;

extern const simd_table kdalab_simd_table_scalar;
extern const simd_table kdalab_simd_table_avx2;
extern const simd_table kdalab_simd_table_avx512;
extern const simd_table_f64 kdalab_simd_table_scalar_f64;
extern const simd_table_f64 kdalab_simd_table_avx2_f64;
extern const simd_table_f64 kdalab_simd_table_avx512_f64;

/* The kernel table of each precision at the level in use (lib/simd/levels.c):
 * the one dispatch point. */
const simd_table *kdalab__simd_table_active(void);
const simd_table_f64 *kdalab__simd_table_active_f64(void);

/*
 * What the chunkwise entry points of both precisions share (plan.c):
 * cutting a call of N sequences x HV heads into tasks (groups of nh
 * consecutive heads of one sequence, or blocks of value columns of one head
 * when there are fewer heads than threads) and one aligned workspace per
 * thread (work_elems elements of elem bytes), all allocated before anything
 * is written, from the caller's kdalab_workspace when there is one; and
 * turning the non-finite counts into the report and status.
 */
typedef struct {
    int nth;                     /* threads to run                            */
    size_t nh, ngroups;          /* heads per task (divides H), groups per b  */
    size_t nsplit, width;        /* column blocks per head, columns per block */
    size_t ntasks;               /* B * ngroups * nsplit                      */
    void **work;                 /* [nth] workspaces, 64-byte aligned         */
    kdalab_workspace *ws;        /* where work came from, or NULL             */
} simd_plan;

/* groups: 0 keeps one head per task (grouped value heads, whose query/key
 * heads are not consecutive). ab, stored: the DPLR row, emulated storage
 * (work_elems' last two arguments). ws: the caller's workspace, or NULL. */
kdalab_status kdalab__simd_plan_make(simd_plan *pl, size_t B, size_t H, int groups, size_t C,
                                     size_t c, size_t K, size_t V, size_t elem,
                                     size_t (*work_elems)(size_t, size_t, size_t, size_t, size_t,
                                                          int, int),
                                     int ab, int stored, kdalab_workspace *ws);
/* The task's sequence b, first head h and its value columns [v0, v1); its
 * head count is pl->nh. */
void kdalab__simd_plan_task(const simd_plan *pl, size_t V, size_t task, size_t *b, size_t *h,
                            size_t *v0, size_t *v1);
void kdalab__simd_plan_free(simd_plan *pl);
/*
 * nth workspaces of bytes each (rounded up to 64), 64-byte aligned, into
 * *work, and extra_bytes of scratch into *extra (NULL when 0): all or none
 * (KDALAB_ENOMEM). From ws when it is not NULL (grown when too small, kept
 * after), else allocated for this call. kdalab__simd_work_put gives them
 * back (frees them without ws).
 */
kdalab_status kdalab__simd_work_get(kdalab_workspace *ws, int nth, size_t bytes,
                                    size_t extra_bytes, void ***work, void **extra);
void kdalab__simd_work_put(kdalab_workspace *ws, int nth, void **work, void *extra);
kdalab_status kdalab__simd_chunk_finish(size_t bad_o, size_t bad_ht, size_t bad_h,
                                        kdalab_report *report);

#endif
