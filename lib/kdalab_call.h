/*
 * kdalab_call.h — the one way into every linear mechanism (lib/call/): a call
 * description (sizes, batch layout, mechanism, scale, form, implementation,
 * options) and a struct of named arrays, taken by every form,
 * implementation, precision and direction.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 *   kdalab_call c = {.dims = {B, T, H, K, V}, .HV = H, .mech = KDALAB_KDA,
 *                    .scale = kdalab_default_scale(K),
 *                    .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD};
 *   kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .o = o};
 *   kdalab_status s = kdalab_run_f64(&c, &x, NULL);
 *
 * The flat functions that mirror fla's argument lists (kdalab_recurrent_f64,
 * kdalab_chunk_f64, kdalab_simd_chunk_f64, their backwards and float32
 * twins) are thin wrappers over these (lib/call/flat.c): a plain batch of
 * the form and implementation each names.
 *
 * Layouts (fla's; REFERENCE.md, "Packed sequences and grouped value heads"):
 *   plain   cu_seqlens NULL: B sequences of T positions, N = B.
 *   varlen  B = 1; N = n_seqs sequences concatenated along T; cu_seqlens
 *           [N + 1] with 0 = c_0 < c_1 < ... < c_N = T; sequence n is
 *           positions c_n .. c_{n+1} - 1, starts from h0[n] (or zero), ends
 *           in ht[n]; nothing flows between sequences.
 *   GVA     q, k have H heads; v, beta, g, o and the states have HV = G H
 *           heads; value head j reads query/key head j / G (integer
 *           division, fla's repeat_interleave). HV = H is no grouping.
 * Shapes, with N the number of sequences:
 *   q, k [B, T, H, K]; v, o [B, T, HV, V]; beta [B, T, HV];
 *   g [B, T, HV] (a decay per head) or [B, T, HV, K] (per key channel);
 *   a, b [B, T, HV, K] (DPLR: like a per-key g, one per value head's state);
 *   h0, ht [N, HV, K, V].
 *
 * Validation happens once, here, before anything is written: the sizes, the
 * layout, the options, and every input value against the rules of
 * lib/core/rules.c (a message names the caller's index, "g[0, 17, 2, 5]");
 * the forms a checked call runs do not check again. On any error but
 * KDALAB_ERANGE nothing is written. KDALAB_ERANGE: finite inputs overflowed
 * an intermediate; the outputs are written and hold the non-finite values.
 */
#ifndef KDALAB_CALL_H
#define KDALAB_CALL_H

#include <stdint.h>

#include "kdalab_forms.h"

KDALAB_BEGIN_DECLS

/* Which form runs. */
typedef enum {
    KDALAB_FORM_RECURRENT = 0, /* the token-by-token recurrence                     */
    KDALAB_FORM_CHUNK          /* the chunkwise form (REFERENCE.md steps 1-7; opts) */
} kdalab_form;

/* Which implementation runs it. Both agree to ~1e-15 relative in float64
 * (tests/test_call.c, tests/test_simd_chunk.c); the reference is the oracle
 * of record, the SIMD path the fast one. The reference computes in the
 * calling thread's rounding mode (fesetround): under FE_UPWARD or
 * FE_DOWNWARD its KDA output moves by ~1e-14 relative (B = 1, T = 256,
 * H = 2, K = V = 64), a rough reach of its own rounding; the SIMD path
 * computes in round to nearest on every thread whatever the caller's mode
 * (the same bits in any mode and on any thread count). */
typedef enum {
    KDALAB_IMPL_REFERENCE = 0, /* lib/reference/: the equations as written, one (sequence,
                                  head) at a time                                        */
    KDALAB_IMPL_SIMD           /* lib/simd/: the optimized kernels at the level
                                  kdalab_simd_get_level() reports, OpenMP over every
                                  (sequence, head) pair; the chunkwise form in float32 and
                                  float64, the recurrent form in float32                   */
} kdalab_impl;

/* A workspace a caller keeps between calls (the SIMD path's per-thread
 * scratch), so that repeated calls reuse its pages instead of mapping fresh
 * ones. Opaque; one call at a time may use it (not thread-safe). */
typedef struct kdalab_workspace kdalab_workspace;

/* An empty workspace (it grows to what the largest call needed), or NULL
 * when out of memory. */
kdalab_workspace *kdalab_workspace_new(void);

/* Frees w and what it holds; NULL is a no-op. */
void kdalab_workspace_free(kdalab_workspace *w);

/* The bytes w holds now (0 for NULL). */
size_t kdalab_workspace_bytes(const kdalab_workspace *w);

/* What one call is: everything but the arrays. A designated initializer
 * leaves what it does not name zero: the plain layout is cu_seqlens NULL,
 * HV = dims.H (HV = 0 is no value head: KDALAB_ESIZE, not a stand-in for H). */
typedef struct {
    kdalab_dims dims;          /* B, T, H (query/key heads), K, V; varlen: B = 1     */
    size_t HV;                 /* value heads: >= 1, a multiple of dims.H            */
    const int64_t *cu_seqlens; /* [n_seqs + 1] sequence boundaries, or NULL          */
    size_t n_seqs;             /* N when cu_seqlens is given                         */
    kdalab_mechanism mech;     /* a row of the mechanism table                       */
    double scale;              /* query scale s: finite, > 0 (float32: as a float)   */
    kdalab_form form;          /* recurrent or chunkwise                             */
    kdalab_impl impl;          /* reference or SIMD                                  */
    const kdalab_chunk_opts *opts; /* chunkwise options, or NULL: the implementation's
                                  default (reference C = 64, SIMD C = 16)            */
    kdalab_workspace *work;    /* the SIMD path's scratch, kept by the caller, or
                                  NULL: allocated and freed within the call         */
} kdalab_call;

/*
 * The arrays of one call, by name, in the shapes above. fla's names, except
 * d_o for fla's `do` (a C keyword). Set the ones the call has and leave the
 * others NULL (a designated initializer does it):
 *   required  q, k, v; o (forward) or d_o (backward), unless T = 0; g for a
 *             mechanism with a decay; beta for one with the delta rule; a, b
 *             for one with the DPLR term (kdalab_mechanism_g_shape,
 *             _has_delta, _has_ab). A required array that is NULL is
 *             KDALAB_ENULL naming it ("k is NULL").
 *   optional  h0, dht (NULL: zero); ht, h and every gradient (NULL: not
 *             wanted). h, the state entering every chunk, is written by the
 *             SIMD chunkwise forward only (impl SIMD, form chunk, the safe
 *             decay); any other forward given h is KDALAB_EINVAL naming it.
 *   ignored   g, beta, a, b (and their gradients) of a mechanism that has
 *             none; o, ht, h in a backward; d_o, dht and the gradients in a
 *             forward.
 * Outputs must not overlap inputs.
 */
typedef struct {
    const double *q;    /* [B, T, H, K]                                            */
    const double *k;    /* [B, T, H, K]                                            */
    const double *v;    /* [B, T, HV, V]                                           */
    const double *g;    /* [B, T, HV] or [B, T, HV, K] log-decay, every g <= 0     */
    const double *beta; /* [B, T, HV], each in [0, 2]                              */
    const double *h0;   /* [N, HV, K, V] initial states, or NULL (zero)            */
    double *o;          /* forward out [B, T, HV, V]                               */
    double *ht;         /* forward out [N, HV, K, V] final states, or NULL         */
    const double *d_o;  /* backward in [B, T, HV, V]: dL/do                        */
    const double *dht;  /* backward in [N, HV, K, V]: dL/dht, or NULL (zero)       */
    double *dq;         /* backward out [B, T, H, K]: sums the G value heads of a
                           query/key head                                          */
    double *dk;         /* backward out [B, T, H, K]: likewise                     */
    double *dv;         /* backward out [B, T, HV, V]                              */
    double *dg;         /* backward out, like g                                    */
    double *dbeta;      /* backward out [B, T, HV]                                 */
    double *dh0;        /* backward out [N, HV, K, V]                              */
    const double *a;    /* [B, T, HV, K] the DPLR rows' low-rank term b a^T: a    */
    const double *b;    /* [B, T, HV, K] and b (kdalab_mechanism_has_ab)          */
    double *da;         /* backward out [B, T, HV, K]                              */
    double *db;         /* backward out [B, T, HV, K]                              */
    double *h;          /* forward out [B, NT, HV, K, V], or NULL: the state
                           entering each chunk of C_h = opts->h_chunk positions
                           (opts->chunk unless set; fla's h,
                           return_intermediate_states; chunk 0's is h0 or zero).
                           NT = kdalab_call_n_chunks: ceil(T / C_h); varlen: B = 1
                           and NT sums every sequence's ceil(L_n / C_h), sequence
                           n's chunks after sequence n - 1's                       */
} kdalab_tensors_f64;

/* The same arrays in float32. */
typedef struct {
    const float *q, *k, *v, *g, *beta, *h0;
    float *o, *ht;
    const float *d_o, *dht;
    float *dq, *dk, *dv, *dg, *dbeta, *dh0;
    const float *a, *b;
    float *da, *db;
    float *h; /* the state held in float32 (never rounded to a storage format) */
} kdalab_tensors_f32;

/*
 * kdalab_struct_size — the size in bytes of a public struct as this library
 * was built, by its C name: "kdalab_dims", "kdalab_chunk_opts",
 * "kdalab_call", "kdalab_tensors_f64", "kdalab_tensors_f32",
 * "kdalab_mechanism_info" (the structs a binding lays out itself, such as
 * the Python module's ctypes mirrors). 0 for NULL or any other name. A
 * binding compares it with its own layout's size when it loads the library
 * and refuses a library built from another version of these headers (a
 * struct that grew) instead of passing it a struct of the wrong size.
 * There is no soname to do this for a dynamic link.
 */
size_t kdalab_struct_size(const char *name);

/*
 * kdalab_call_check — validate a call's description alone: dims (B, H, K,
 * V >= 1; sizes that fit in bytes), HV (>= 1, a multiple of H), cu_seqlens
 * (starts at 0, strictly increases, ends at T; an error names the first bad
 * index; B = 1; n_seqs >= 1), the mechanism, scale, form, implementation and
 * options (float64 and the backward take no emulated precision; the backward
 * runs the safe decay mode only; the SIMD recurrent form is float32 forward
 * only; a DPLR row, kdalab_mechanism_has_ab, takes the SIMD path in the
 * chunkwise form only).
 * is_f32 and bwd say which run it is for.
 * Errors: KDALAB_ENULL, KDALAB_ESIZE, KDALAB_EINVAL, KDALAB_EDOMAIN (scale),
 * KDALAB_EOVERFLOW. The run functions call it first.
 */
kdalab_status kdalab_call_check(const kdalab_call *call, int is_f32, int bwd);

/* The number of sequences N of a call: n_seqs with cu_seqlens, else dims.B. */
size_t kdalab_call_n_seqs(const kdalab_call *call);

/*
 * kdalab_call_n_chunks — NT, the second axis of the forward's h [B, NT, HV,
 * K, V]: ceil(T / C) chunks of a sequence of T positions (C = opts->h_chunk,
 * else opts->chunk, or the implementation's default without opts, whatever
 * call->form says); with cu_seqlens the sum of ceil(L_n / C) over the
 * sequences. A call is counted when the float64 or the float32 check accepts
 * it (so a float32 call's bf16 / fp16 options are counted too); 0 for NULL,
 * T = 0, or a call that both refuse (the float32 check's error is left
 * set).
 */
size_t kdalab_call_n_chunks(const kdalab_call *call);

/*
 * kdalab_run_f64 — the forward of call's mechanism over its batch: o and ht
 * (and h, the state entering each chunk, on the SIMD chunkwise path) from
 * q, k, v, g, beta, h0 (x names them). report: NULL, or filled on
 * KDALAB_OK and KDALAB_ERANGE (the chunkwise forms' kdalab_report; the
 * counts summed over the batch, max_exponent its largest; h's non-finite
 * values are counted in the error message only).
 * Errors: those of kdalab_call_check; KDALAB_ENULL (x or a required array);
 * KDALAB_ENONFINITE / KDALAB_EDOMAIN (an input value, named by its index);
 * KDALAB_ENOMEM; KDALAB_ERANGE (outputs written).
 */
kdalab_status kdalab_run_f64(const kdalab_call *call, const kdalab_tensors_f64 *x,
                             kdalab_report *report);

/* The same in float32: the reference forms or the SIMD path (chunkwise, and
 * the recurrent form); emulated bf16 / fp16 storage through opts->precision
 * in the chunkwise form of both (the SIMD path's with the safe decay). */
kdalab_status kdalab_run_f32(const kdalab_call *call, const kdalab_tensors_f32 *x,
                             kdalab_report *report);

/*
 * kdalab_run_bwd_f64 — the backward: every gradient x asks for (dq, dk, dv,
 * dg, dbeta, dh0, and da, db for a DPLR row; NULL: not wanted) from the
 * forward's inputs and d_o, dht.
 * The reference recurrent backward (lib/reference/recurrent.c) is the oracle;
 * the chunkwise ones recompute each chunk from its boundary state
 * (lib/kdalab_grad.h). Errors: as kdalab_run_f64 (KDALAB_ERANGE: a gradient
 * overflowed, the gradients are written).
 */
kdalab_status kdalab_run_bwd_f64(const kdalab_call *call, const kdalab_tensors_f64 *x);

/* The same in float32. */
kdalab_status kdalab_run_bwd_f32(const kdalab_call *call, const kdalab_tensors_f32 *x);

KDALAB_END_DECLS

#endif /* KDALAB_CALL_H */
