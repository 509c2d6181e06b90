/*
 * lib/core/internal.h — functions shared inside the library (not installed, not
 * exported: the library is built with -fvisibility=hidden).
 */
#ifndef KDALAB_INTERNAL_H
#define KDALAB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "kdalab.h"

/* Record the detail of an error for kdalab_last_error() and return status.
 * fmt is printf-style; the message is truncated at 512 bytes. */
kdalab_status kdalab_fail(kdalab_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Return from the calling function with expr's status unless it is KDALAB_OK
 * (the checks of rules.c and step_rules.c chain their rules with it). */
#define KDALAB__TRY(expr)                                                                      \
    do {                                                                                       \
        kdalab_status s_ = (expr);                                                             \
        if (s_ != KDALAB_OK)                                                                   \
            return s_;                                                                         \
    } while (0)

/* Clear the thread's error detail (called on success paths that report). */
void kdalab_clear_error(void);

/* *out = a * b; returns 0 on overflow (and leaves *out unspecified), 1 otherwise. */
int kdalab_mul_size(size_t a, size_t b, size_t *out);

/* KDALAB_EOVERFLOW, naming what and n, when n elements of elem_bytes bytes
 * each overflow a size_t (kdalab_mul_size), else KDALAB_OK: the check of an
 * entry point whose arrays are sized by one count the caller passes. */
kdalab_status kdalab_check_count(const char *what, size_t n, size_t elem_bytes);

/* Element counts of one problem, computed with overflow checks. */
typedef struct {
    size_t qk;    /* B*T*H*K : q, k (and g for KDA) */
    size_t v;     /* B*T*H*V : v, o                 */
    size_t bth;   /* B*T*H   : beta (and g for GDN) */
    size_t state; /* B*H*K*V : h0, ht               */
    size_t g;     /* g elements: 0, bth or qk        */
} kdalab_counts;

/* Element counts of dims for a mechanism: ESIZE for B, H, K or V == 0,
 * EOVERFLOW when an element or byte count (elem_bytes each) overflows. */
kdalab_status kdalab_count_dims(const kdalab_dims *dims, kdalab_mechanism mech,
                                size_t elem_bytes, kdalab_counts *out);

/* kdalab_check_values_f64 / _f32 (is_f32) on an array of shape[ndim]
 * (row-major, ndim <= KDALAB_NPY_MAX_DIMS): the message names the first bad
 * element by its index in that shape, "name[b, t, h, k]". */
kdalab_status kdalab_check_values_nd(kdalab_value_rule rule, const char *name, const void *x,
                                     int is_f32, int ndim, const size_t *shape);

/* KDALAB_ENONFINITE naming the first NaN/Inf of x[0..n) as "name[i] is ...",
 * or KDALAB_OK: the one finiteness check of the library. */
kdalab_status kdalab_check_finite_f64(const char *name, const double *x, size_t n);
kdalab_status kdalab_check_finite_f32(const char *name, const float *x, size_t n);

/*
 * Validate one call of the recurrent/chunkwise family in full, before any
 * output is written: pointers (NULL allowed for empty arrays when T == 0, and
 * for h0/ht always), sizes (B, H, K, V >= 1; no overflow of element or byte
 * counts), scale finite and > 0, every input finite, g <= 0, beta in [0, 2].
 * Fills *counts on success. Returns the status (with kdalab_last_error set).
 * The f32 version is what the SIMD path calls too.
 */
kdalab_status kdalab_check_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v,
                               const double *g, const double *beta, const double *h0,
                               const double *o, kdalab_counts *counts);
kdalab_status kdalab_check_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const float *q, const float *k, const float *v,
                               const float *g, const float *beta, const float *h0,
                               const float *o, kdalab_counts *counts);

/* Validate one call of a backward: kdalab_check_f64's rules for the forward
 * inputs, then d_o [B,T,H,V] (required when T > 0) and dht [B,H,K,V] (may be
 * NULL) finite. Errors: the forward's, ENULL "d_o is NULL", ENONFINITE. */
kdalab_status kdalab_check_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const double *q, const double *k,
                                   const double *v, const double *g, const double *beta,
                                   const double *h0, const double *d_o, const double *dht,
                                   kdalab_counts *counts);
kdalab_status kdalab_check_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, const float *beta, const float *h0,
                                   const float *d_o, const float *dht, kdalab_counts *counts);

/* Count the non-finite values of the gradients a backward wrote (NULL: not
 * requested): KDALAB_ERANGE naming `what` and the first bad gradient, else
 * KDALAB_OK. Every backward ends with it. */
kdalab_status kdalab_check_grads_f64(const char *what, const kdalab_dims *dims,
                                     kdalab_mechanism mech, const double *dq, const double *dk,
                                     const double *dv, const double *dg, const double *dbeta,
                                     const double *da, const double *db, const double *dh0);
kdalab_status kdalab_check_grads_f32(const char *what, const kdalab_dims *dims,
                                     kdalab_mechanism mech, const float *dq, const float *dk,
                                     const float *dv, const float *dg, const float *dbeta,
                                     const float *da, const float *db, const float *dh0);

/* Count non-finite values in the outputs o[n_o] and ht[n_ht] (ht may be
 * NULL): KDALAB_ERANGE with a message naming `what` when there are any (the
 * outputs stay written), KDALAB_OK otherwise. Counts go to bad_o, bad_ht
 * when not NULL. Every form ends with it, so no form hands back NaN silently. */
kdalab_status kdalab_check_outputs_f64(const char *what, const double *o, size_t n_o,
                                       const double *ht, size_t n_ht, size_t *bad_o,
                                       size_t *bad_ht);
kdalab_status kdalab_check_outputs_f32(const char *what, const float *o, size_t n_o,
                                       const float *ht, size_t n_ht, size_t *bad_o,
                                       size_t *bad_ht);

/* An output x of shape[ndim] (NULL: not asked for) with a non-finite value:
 * KDALAB_ERANGE "what: name[i, j, k] is inf from finite inputs: cause",
 * naming the first such element in that shape; else KDALAB_OK with the error
 * detail cleared, as kdalab_check_outputs_*. For functions whose outputs are
 * not a form's o and ht. */
kdalab_status kdalab_check_result_f64(const char *what, const char *name, const double *x,
                                      int ndim, const size_t *shape, const char *cause);
kdalab_status kdalab_check_result_f32(const char *what, const char *name, const float *x,
                                      int ndim, const size_t *shape, const char *cause);

/* Validate chunk options (NULL means defaults) into *out. want_fp32: the
 * precision must be FP32 (the float64 form). */
kdalab_status kdalab_check_chunk_opts(const kdalab_chunk_opts *opts, int want_fp32,
                                      kdalab_chunk_opts *out);

/* The chunkwise backward's options (kdalab_chunk_bwd_f64/_f32 and the SIMD
 * path's): kdalab_check_chunk_opts with FP32 storage, and the safe decay mode
 * only (KDALAB_EINVAL naming the mode asked). */
kdalab_status kdalab_check_bwd_chunk_opts(const kdalab_chunk_opts *opts,
                                          kdalab_chunk_opts *out);

/* Validate one decode step's arguments (see kdalab_step_f64). The _args
 * variants check everything except the finiteness of the state S (K*V
 * values, more than the step itself costs to scan), for a kernel that checks
 * S during its own read-only first pass with the message "S[i] is ...". */
kdalab_status kdalab_check_step_args_f64(kdalab_mechanism mech, size_t K, size_t V,
                                         double scale, const double *q, const double *k,
                                         const double *v, const double *g, double beta,
                                         const double *S, const double *o);
kdalab_status kdalab_check_step_args_f32(kdalab_mechanism mech, size_t K, size_t V,
                                         float scale, const float *q, const float *k,
                                         const float *v, const float *g, float beta,
                                         const float *S, const float *o);
kdalab_status kdalab_check_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                    const double *q, const double *k, const double *v,
                                    const double *g, double beta, const double *S,
                                    const double *o);
kdalab_status kdalab_check_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                    const float *q, const float *k, const float *v,
                                    const float *g, float beta, const float *S,
                                    const float *o);
/* The same for a DPLR row's decode step (kdalab_step_ab_f64): a, b [K] too. */
kdalab_status kdalab_check_step_ab_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                       const double *q, const double *k, const double *v,
                                       const double *g, const double *a, const double *b,
                                       const double *S, const double *o);
kdalab_status kdalab_check_step_ab_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                       const float *q, const float *k, const float *v,
                                       const float *g, const float *a, const float *b,
                                       const float *S, const float *o);

/*
 * Causal softmax attention (NoPE) and its backward in matrix form, a tile of
 * queries at a time through CBLAS (lib/reference/attention.c, the float32
 * twin in attention_f32.c): the fast path of kdalab_attention_f64 and
 * kdalab_attention_bwd_f64, the same function up to summation order, which
 * training runs, for the model's heads (dims->K == dims->V). q, k, dq, dk
 * are (B, T, H, K); v, o, d_o, dv are (B, T, H, V); the backward takes the
 * forward's output o and writes all three gradients (none may be NULL).
 * Unchecked: the inputs are the caller's, already finite; KDALAB_ERANGE when
 * a score or gradient overflows, KDALAB_ENOMEM, KDALAB_EOVERFLOW.
 */
kdalab_status kdalab__attention_tiled_fwd_f64(const kdalab_dims *dims, double scale,
                                              const double *q, const double *k, const double *v,
                                              double *o);
kdalab_status kdalab__attention_tiled_fwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                              const float *k, const float *v, float *o);
kdalab_status kdalab__attention_tiled_bwd_f64(const kdalab_dims *dims, double scale,
                                              const double *q, const double *k, const double *v,
                                              const double *o, const double *d_o, double *dq,
                                              double *dk, double *dv);
kdalab_status kdalab__attention_tiled_bwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                              const float *k, const float *v, const float *o,
                                              const float *d_o, float *dq, float *dk, float *dv);

/*
 * The KDA gate pair of lib/reference/gates.c for a trainer
 * (lib/train/mixer.c): kdalab__kda_gate_keep_f64 is kdalab_kda_gate_f64
 * that also writes softplus(z) and sigmoid(z) of each z = x + dt_bias into
 * sp, sg ([BT, H, K] like g, not NULL); kdalab__kda_gate_bwd_kept_f64 is
 * kdalab_kda_gate_bwd_f64 reading them instead of computing them again (the
 * same bits: the same values). Arguments, checks and errors as the public
 * pair's (kdalab_grad.h).
 */
kdalab_status kdalab__kda_gate_keep_f64(size_t BT, size_t H, size_t K, const double *x,
                                        const double *A_log, const double *dt_bias, double *g,
                                        double *sp, double *sg);
kdalab_status kdalab__kda_gate_bwd_kept_f64(size_t BT, size_t H, size_t K, const double *x,
                                            const double *A_log, const double *dt_bias,
                                            const double *sp, const double *sg,
                                            const double *dg, double *dx, double *dA_log,
                                            double *ddt_bias);
kdalab_status kdalab__kda_gate_keep_f32(size_t BT, size_t H, size_t K, const float *x,
                                        const float *A_log, const float *dt_bias, float *g,
                                        float *sp, float *sg);
kdalab_status kdalab__kda_gate_bwd_kept_f32(size_t BT, size_t H, size_t K, const float *x,
                                            const float *A_log, const float *dt_bias,
                                            const float *sp, const float *sg, const float *dg,
                                            float *dx, float *dA_log, float *ddt_bias);

/*
 * A call kdalab_call_check and the value checks have passed (lib/call/call.c),
 * resolved for the implementations: the sizes, the layout and the options
 * with their defaults applied. Sequence n is batch entry b = cu ? 0 : n,
 * positions t0 = cu ? cu[n] : 0 .. t0 + L - 1 (kdalab__call_seq).
 */
typedef struct {
    kdalab_mechanism mech;
    size_t B, T, H, K, V; /* the call's dims                                    */
    size_t HV, G;         /* value heads; G = HV / H value heads per q/k head   */
    size_t N;             /* sequences                                          */
    size_t Lmax;          /* the longest sequence's length (T without cu)       */
    const int64_t *cu;    /* [N + 1] boundaries, or NULL: B sequences of T      */
    size_t gw;            /* g values per (position, value head): 0, 1 or K     */
    int delta;            /* the mechanism has the delta rule (and beta)        */
    int ab;               /* the mechanism takes the low-rank term's a, b        */
    kdalab_form form;
    kdalab_impl impl;
    kdalab_chunk_opts op; /* validated, the implementation's default if none    */
    kdalab_workspace *work;
} kdalab__call;

/* Sequence n of a resolved call: its batch entry, first position, length. */
static inline void kdalab__call_seq(const kdalab__call *c, size_t n, size_t *b, size_t *t0,
                                    size_t *L)
{
    *b = c->cu ? 0 : n;
    *t0 = c->cu ? (size_t)c->cu[n] : 0;
    *L = c->cu ? (size_t)(c->cu[n + 1] - c->cu[n]) : c->T;
}

/* The chunks of h's op.h_chunk positions of a resolved call's sequence n:
 * ceil(L / C_h) (kdalab_call_n_chunks sums them for h's NT). */
static inline size_t kdalab__call_chunks(const kdalab__call *c, size_t n)
{
    size_t b, t0, L;
    kdalab__call_seq(c, n, &b, &t0, &L);
    return L / c->op.h_chunk + (L % c->op.h_chunk != 0);
}

/*
 * The forms on a validated plain batch (lib/reference/, lib/simd/recurrent.c):
 * the public functions' arguments and shapes (kdalab_forms.h, kdalab_grad.h),
 * opts validated and not NULL. They check their results (a non-finite output
 * is KDALAB_ERANGE), never their inputs.
 */
kdalab_status kdalab__recurrent_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *a, const double *b, const double *h0,
                                    double *o, double *ht);
kdalab_status kdalab__recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *a, const float *b, const float *h0,
                                    float *o, float *ht);
kdalab_status kdalab__chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                                const double *q, const double *k, const double *v,
                                const double *g, const double *beta, const double *a,
                                const double *b, const double *h0,
                                double *o, double *ht, const kdalab_chunk_opts *opts,
                                kdalab_report *report);
kdalab_status kdalab__chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                                const float *q, const float *k, const float *v,
                                const float *g, const float *beta, const float *a,
                                const float *b, const float *h0,
                                float *o, float *ht, const kdalab_chunk_opts *opts,
                                kdalab_report *report);
kdalab_status kdalab__recurrent_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                        double scale, const double *q, const double *k,
                                        const double *v, const double *g, const double *beta,
                                        const double *a, const double *b, const double *h0,
                                        const double *d_o, const double *dht, double *dq,
                                        double *dk, double *dv, double *dg, double *dbeta,
                                        double *da, double *db, double *dh0);
kdalab_status kdalab__recurrent_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *a, const float *b, const float *h0,
                                        const float *d_o, const float *dht, float *dq,
                                        float *dk, float *dv, float *dg, float *dbeta,
                                        float *da, float *db, float *dh0);
kdalab_status kdalab__chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *a, const double *b, const double *h0,
                                    const double *d_o, const double *dht, double *dq,
                                    double *dk, double *dv, double *dg, double *dbeta,
                                    double *da, double *db, double *dh0,
                                    const kdalab_chunk_opts *opts);
kdalab_status kdalab__chunk_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *a, const float *b, const float *h0,
                                    const float *d_o, const float *dht, float *dq,
                                    float *dk, float *dv, float *dg, float *dbeta,
                                    float *da, float *db, float *dh0,
                                    const kdalab_chunk_opts *opts);
kdalab_status kdalab__simd_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                         float scale, const float *q, const float *k,
                                         const float *v, const float *g, const float *beta,
                                         const float *h0, float *o, float *ht);

/*
 * The SIMD path's chunkwise forward and backward on a validated call, every
 * layout in place (lib/simd/entry_impl.h): OpenMP over the (sequence, value
 * head) pairs; grouped value heads read their query/key head by index. The
 * safe decay mode in plain float32 / float64 only (the dispatcher sends the
 * others to the reference). The backward's dq, dk sum the G value heads.
 */
kdalab_status kdalab__simd_chunk_f64(const kdalab__call *c, double scale,
                                     const kdalab_tensors_f64 *x, kdalab_report *report);
kdalab_status kdalab__simd_chunk_f32(const kdalab__call *c, float scale,
                                     const kdalab_tensors_f32 *x, kdalab_report *report);
kdalab_status kdalab__simd_chunk_bwd_f64(const kdalab__call *c, double scale,
                                         const kdalab_tensors_f64 *x);
kdalab_status kdalab__simd_chunk_bwd_f32(const kdalab__call *c, float scale,
                                         const kdalab_tensors_f32 *x);

/* The arrays of one call, untyped, in kdalab_tensors_f64's order (o: the
 * forward's output, whose presence is checked). */
typedef struct {
    const void *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
    const void *o;
    const void *a, *b; /* the DPLR rows' low-rank term (NULL for the others) */
} kdalab__arrays;

/*
 * The arrays of a resolved call against the rules (lib/core/rules.c): in a
 * backward d_o first, then q, k, v, o (forward) present, g and beta present
 * where the row has them, then every input's values — q, k, v, g, beta, h0,
 * d_o, dht — each named by its index in its own shape ("g[0, 17, 2, 5]").
 * KDALAB_ENULL, KDALAB_ENONFINITE, KDALAB_EDOMAIN.
 */
kdalab_status kdalab__check_call_arrays(const kdalab__call *c, const kdalab__arrays *a,
                                        int is_f32, int bwd);

/* 1 when every x[0..n) (float32 when is_f32, else float64) is certainly
 * legal under rule: the active level's vector screen (lib/simd/screen.h)
 * over segments of 128 KB in parallel (lib/simd/levels.c). 0 is "not sure":
 * the exact check (kdalab_check_values_nd) then decides and words the error. */
int kdalab__simd_screen(const void *x, size_t n, kdalab_value_rule rule, int is_f32);

/* The threads for a loop of `tasks` independent tasks: kdalab_get_num_threads(),
 * but no more than the tasks (and at least 1) (lib/simd/threads.c). */
int kdalab__threads_for(size_t tasks);

/* The SIMD path's threaded loops compute in round to nearest whatever the
 * caller's rounding mode (only the calling thread has it; OpenMP's others
 * have their own), so their bits do not depend on the thread count:
 * kdalab__nearest_begin sets round to nearest in this thread and returns
 * the mode kdalab__nearest_end restores (lib/simd/threads.c). */
int kdalab__nearest_begin(void);
void kdalab__nearest_end(int mode);

/*
 * The reference forms (and the float32 SIMD recurrence) over a varlen / GVA
 * layout (lib/call/pieces.c): each (sequence, value head) gathered into a
 * plain one-head call, its results scattered back; the outputs assembled in
 * scratch and copied out at the end (on KDALAB_OK and KDALAB_ERANGE only).
 * es: 8 (x is a kdalab_tensors_f64) or 4 (kdalab_tensors_f32).
 */
kdalab_status kdalab__run_pieces(const kdalab__call *c, size_t es, double scale, const void *x,
                                 int bwd, kdalab_report *report);

#endif
