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
 *   g [B, T, HV] (Gated DeltaNet) or [B, T, HV, K] (KDA); h0, ht [N, HV, K, V].
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
 * kdalab_batch_f64 — a forward (KDALAB_FORM_RECURRENT: kdalab_recurrent_f64;
 * KDALAB_FORM_CHUNK: kdalab_chunk_f64 with opts) over a varlen / GVA batch.
 * KDALAB_FORM_SIMD_CHUNK: kdalab_simd_chunk_f64. ht may be NULL. Errors:
 * those of kdalab_batch_check and of the form; KDALAB_EINVAL for
 * KDALAB_FORM_SIMD_RECURRENT (float32 only).
 */
kdalab_status kdalab_batch_f64(const kdalab_batch *batch, kdalab_form form,
                               const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v,
                               const double *g, const double *beta, const double *h0,
                               double *o, double *ht, const kdalab_chunk_opts *opts);

/* The same in float32: the reference forms (kdalab_recurrent_f32,
 * kdalab_chunk_f32 with opts, emulated precisions included) or the SIMD path
 * (kdalab_simd_recurrent_f32, kdalab_simd_chunk_f32). */
kdalab_status kdalab_batch_f32(const kdalab_batch *batch, kdalab_form form,
                               const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const float *q, const float *k, const float *v, const float *g,
                               const float *beta, const float *h0, float *o, float *ht,
                               const kdalab_chunk_opts *opts);

/*
 * kdalab_batch_bwd_f64 — the backward (kdalab_recurrent_bwd_f64 or
 * kdalab_chunk_bwd_f64) over a varlen / GVA batch: d_o like o, dht like ht
 * (or NULL), gradients in the layouts of their inputs; dq and dk of a
 * query/key head sum the contributions of the G value heads that read it.
 * Any gradient may be NULL.
 */
kdalab_status kdalab_batch_bwd_f64(const kdalab_batch *batch, kdalab_form form,
                                   const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const double *q, const double *k,
                                   const double *v, const double *g, const double *beta,
                                   const double *h0, const double *d_o, const double *dht,
                                   double *dq, double *dk, double *dv, double *dg,
                                   double *dbeta, double *dh0, const kdalab_chunk_opts *opts);

KDALAB_END_DECLS

#endif /* KDALAB_BATCH_H */
