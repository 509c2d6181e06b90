/*
 * kdalab_batch.h — fla's batch layouts for every form: packed variable-length
 * sequences (cu_seqlens) and grouped value heads (GVA) (lib/batch/).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 * fla's conventions (REFERENCE.md, "Packed sequences and grouped value heads"):
 *   varlen  B = 1; N sequences concatenated along T; cu_seqlens [N+1] with
 *           0 = c_0 < c_1 < ... < c_N = T; sequence n is positions
 *           c_n .. c_{n+1}-1, starts from h0[n] (or zero), ends in ht[n];
 *           nothing flows between sequences.
 *   GVA     q, k have H heads; v, beta, g, o and the states have HV = G * H
 *           heads; value head j reads query/key head j / G (integer division,
 *           fla's repeat_interleave).
 * Shapes, with N the number of sequences (B without cu_seqlens):
 *   q, k [B, T, H, K]; v, o [B, T, HV, V]; beta [B, T, HV];
 *   g [B, T, HV] (a decay per head) or [B, T, HV, K] (per key channel); h0, ht [N, HV, K, V].
 * dims->H is the query/key head count H; dims->V the value dimension.
 *
 * Each (sequence, value head) is run through the chosen form on its own, so
 * every form, precision and path keeps its meaning and its errors. The whole
 * call is validated first, and the outputs are assembled in scratch and
 * copied out only at the end: on any error but KDALAB_ERANGE nothing is written.
 */
#ifndef KDALAB_BATCH_H
#define KDALAB_BATCH_H

#include <stdint.h>

#include "kdalab_forms.h"

KDALAB_BEGIN_DECLS

/* How a batch is laid out. {NULL, 0, dims->H} is a plain batch (B sequences
 * of T, HV = H), the layout of every other function of the library. HV is
 * always given: 0 is no value head (KDALAB_ESIZE), not a stand-in for H. */
typedef struct {
    const int64_t *cu_seqlens; /* [n_seqs + 1] boundaries, or NULL              */
    size_t n_seqs;             /* N when cu_seqlens is given (then dims->B == 1) */
    size_t HV;                 /* value heads: >= 1, a multiple of dims->H       */
} kdalab_batch;

/* Which form and implementation runs each sequence. */
typedef enum {
    KDALAB_FORM_RECURRENT = 0, /* the recurrence                                 */
    KDALAB_FORM_CHUNK,         /* the chunkwise form (opts)                      */
    KDALAB_FORM_SIMD_RECURRENT, /* float32 only: the SIMD path's recurrence      */
    KDALAB_FORM_SIMD_CHUNK      /* the SIMD path's chunkwise form (f32 and f64)  */
} kdalab_form;

/*
 * kdalab_batch_check — validate a layout against dims: cu_seqlens starts at
 * 0, strictly increases and ends at dims->T (an error names the first bad
 * index), dims->B == 1 with cu_seqlens, n_seqs >= 1, HV >= 1 and a multiple
 * of dims->H.
 * Errors: KDALAB_ENULL, KDALAB_ESIZE, KDALAB_EINVAL (bad cu_seqlens),
 * KDALAB_EOVERFLOW. Every function below calls it first.
 */
kdalab_status kdalab_batch_check(const kdalab_batch *batch, const kdalab_dims *dims);

/* The number of sequences N (n_seqs with cu_seqlens, else dims->B). */
size_t kdalab_batch_n_seqs(const kdalab_batch *batch, const kdalab_dims *dims);

/*
 * The arrays of one call, by name, in the shapes above (N sequences, H
 * query/key heads, HV value heads; varlen: B = 1 and T the packed length).
 * fla's names, except d_o for fla's `do` (a C keyword). Set the ones the call
 * has and leave the others NULL (a designated initializer does it):
 *   required  q, k, v, and o (forward) or d_o (backward), unless T = 0;
 *             g for a mechanism with a decay; beta for one with the delta
 *             rule (kdalab_mechanism_g_shape, _has_delta). A required array that is NULL is
 *             KDALAB_ENULL naming it ("k is NULL").
 *   optional  h0, dht (NULL: zero); ht and every gradient (NULL: not
 *             wanted).
 *   ignored   g, beta (and dg, dbeta) of a mechanism that has none.
 */

/* A forward's arrays, float64 (kdalab_batch_f64). */
typedef struct {
    const double *q;    /* [B, T, H, K]                                       */
    const double *k;    /* [B, T, H, K]                                       */
    const double *v;    /* [B, T, HV, V]                                      */
    const double *g;    /* [B, T, HV] Gated DeltaNet, [B, T, HV, K] KDA; g <= 0 */
    const double *beta; /* [B, T, HV], in [0, 2]                              */
    const double *h0;   /* [N, HV, K, V] initial states, or NULL (zero)       */
    double *o;          /* out [B, T, HV, V]                                  */
    double *ht;         /* out [N, HV, K, V] final states, or NULL            */
} kdalab_batch_args_f64;

/* The same arrays in float32 (kdalab_batch_f32). */
typedef struct {
    const float *q, *k, *v, *g, *beta, *h0; /* as kdalab_batch_args_f64     */
    float *o, *ht;
} kdalab_batch_args_f32;

/* A backward's arrays, float64 (kdalab_batch_bwd_f64): the forward's inputs,
 * the gradients of its outputs, and the gradients of its inputs, each in the
 * shape of the array it is the gradient of. */
typedef struct {
    const double *q, *k, *v, *g, *beta, *h0; /* the forward's inputs, as above */
    const double *d_o; /* [B, T, HV, V] dL/do                                 */
    const double *dht; /* [N, HV, K, V] dL/dht, or NULL (zero)                */
    double *dq;        /* out [B, T, H, K]: sums the G value heads of a q head */
    double *dk;        /* out [B, T, H, K]: likewise                          */
    double *dv;        /* out [B, T, HV, V]                                   */
    double *dg;        /* out like g                                          */
    double *dbeta;     /* out [B, T, HV]                                      */
    double *dh0;       /* out [N, HV, K, V]                                   */
} kdalab_batch_bwd_args_f64;

/*
 * kdalab_batch_f64 — a forward (KDALAB_FORM_RECURRENT: kdalab_recurrent_f64;
 * KDALAB_FORM_CHUNK: kdalab_chunk_f64 with opts) over a varlen / GVA batch.
 * KDALAB_FORM_SIMD_CHUNK: kdalab_simd_chunk_f64. args names the arrays. Errors:
 * those of kdalab_batch_check; KDALAB_ENULL when args or a required array
 * is NULL; those of the form; KDALAB_EINVAL for KDALAB_FORM_SIMD_RECURRENT
 * (float32 only).
 */
kdalab_status kdalab_batch_f64(const kdalab_batch *batch, kdalab_form form,
                               const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const kdalab_batch_args_f64 *args, const kdalab_chunk_opts *opts);

/* The same in float32: the reference forms (kdalab_recurrent_f32,
 * kdalab_chunk_f32 with opts, emulated precisions included) or the SIMD path
 * (kdalab_simd_recurrent_f32, kdalab_simd_chunk_f32). */
kdalab_status kdalab_batch_f32(const kdalab_batch *batch, kdalab_form form,
                               const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const kdalab_batch_args_f32 *args, const kdalab_chunk_opts *opts);

/*
 * kdalab_batch_bwd_f64 — the backward (KDALAB_FORM_RECURRENT:
 * kdalab_recurrent_bwd_f64; KDALAB_FORM_CHUNK: kdalab_chunk_bwd_f64;
 * KDALAB_FORM_SIMD_CHUNK: kdalab_simd_chunk_bwd_f64, called once for the
 * whole batch, threads over B x H, when there is neither cu_seqlens nor
 * HV > H) over a varlen / GVA batch, the arrays named by args. Errors: as
 * kdalab_batch_f64;
 * KDALAB_EINVAL for KDALAB_FORM_SIMD_RECURRENT (the backward has none).
 */
kdalab_status kdalab_batch_bwd_f64(const kdalab_batch *batch, kdalab_form form,
                                   const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const kdalab_batch_bwd_args_f64 *args,
                                   const kdalab_chunk_opts *opts);

KDALAB_END_DECLS

#endif /* KDALAB_BATCH_H */
