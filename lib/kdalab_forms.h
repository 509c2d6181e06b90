/*
 * kdalab_forms.h — the recurrent and chunkwise forms of the linear mechanisms
 * (the mechanism table: linear attention, DeltaNet, Gated DeltaNet, KDA,
 * simple GLA, GLA; lib/reference/, with every decay mode and the emulated
 * precisions), their decode step and the validation rules every form shares.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 * Conventions (see REFERENCE.md in the repository, fla's public layout):
 *   q, k   [B, T, H, K]   row-major, last index fastest
 *   v, o   [B, T, H, V]
 *   beta   [B, T, H]      write strength, legal range [0, 2]
 *   g      [B, T, H]      log-decay per head (Gated DeltaNet, simple GLA), g <= 0
 *          [B, T, H, K]   log-decay per key channel (KDA, GLA), g <= 0
 *   h0, ht [B, H, K, V]   initial / final state S (row c = key channel c)
 *   scale  s > 0          default K^-1/2 (kdalab_default_scale)
 *
 * Per (b, h), S_0 = h0 (or zero when h0 == NULL) and for t = 1..T
 *   linear attention  S_t = S_{t-1} + k_t v_t^T
 *   DeltaNet          S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
 *   Gated DeltaNet    S'  = exp(g_t) S_{t-1},        then the DeltaNet update on S'
 *   KDA               S'  = Diag(exp(g_t)) S_{t-1},  then the DeltaNet update on S'
 *   simple GLA        S_t = exp(g_t) S_{t-1} + k_t v_t^T
 *   GLA               S_t = Diag(exp(g_t)) S_{t-1} + k_t v_t^T
 *   o_t = s * S_t^T q_t          (the state after step t)
 *
 * Every function returns a kdalab_status. On any error other than
 * KDALAB_ERANGE the outputs are left untouched: inputs are validated in full
 * before the first output element is written. KDALAB_ERANGE means finite
 * inputs overflowed an intermediate: the outputs are written and hold the
 * non-finite values, so no form ever hands back NaN or Inf with KDALAB_OK.
 *
 * Output arrays must not overlap any input array.
 */
#ifndef KDALAB_FORMS_H
#define KDALAB_FORMS_H

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Shapes and mechanisms                                                     */
/* ------------------------------------------------------------------------- */

/* The sizes shared by every array of one call (see the layout table above). */
typedef struct {
    size_t B; /* batch                              >= 1 */
    size_t T; /* sequence length (positions)        >= 0 */
    size_t H; /* heads                              >= 1 */
    size_t K; /* key (and query) dimension per head >= 1 */
    size_t V; /* value dimension per head           >= 1 */
} kdalab_dims;

/* The linear mechanisms of the lineage: the 2 x 3 grid {no delta rule, delta
 * rule} x {no decay, one log-decay per head, one per key channel}, and the
 * boundary that contains them all, the general diagonal-plus-low-rank
 * transition (DPLR: S_t = (Diag(exp g_t) + b_t a_t^T) S_{t-1} + k_t v_t^T,
 * with a, b inputs). Each is a row of lib/core/mechanisms.c; kernels branch
 * on a row's properties (kdalab_mechanism_has_delta, kdalab_mechanism_g_shape,
 * kdalab_mechanism_has_ab), never on its id.
 *
 *                 no decay           g per head [B,T,H]    g per key [B,T,H,K]
 *   no delta      linear attention   simple GLA            GLA
 *   delta rule    DeltaNet           Gated DeltaNet        KDA
 *   general (a, b)                                         DPLR
 */
typedef enum {
    KDALAB_LINEAR_ATTENTION = 0, /* no beta, no g                        */
    KDALAB_DELTANET,             /* beta [B,T,H], no g                   */
    KDALAB_GATED_DELTANET,       /* beta [B,T,H], g [B,T,H]              */
    KDALAB_KDA,                  /* beta [B,T,H], g [B,T,H,K]            */
    KDALAB_SIMPLE_GLA,           /* no beta,      g [B,T,H]              */
    KDALAB_GLA,                  /* no beta,      g [B,T,H,K]            */
    KDALAB_DPLR,                 /* a, b [B,T,H,K], g [B,T,H,K]; no beta */
    KDALAB_N_MECHANISMS          /* the number of rows (not a mechanism) */
} kdalab_mechanism;

/* The shape of a mechanism's log-decay g. */
typedef enum {
    KDALAB_G_NONE = 0,  /* no decay: S is carried as it is     */
    KDALAB_G_PER_HEAD,  /* g [B,T,H]: one factor for the state  */
    KDALAB_G_PER_KEY    /* g [B,T,H,K]: one per key channel     */
} kdalab_g_shape;

/* One row of the mechanism table. */
typedef struct {
    kdalab_mechanism id;
    const char *name;          /* CLI, Python and checkpoints: "kda"             */
    const char *title;         /* "Kimi Delta Attention"                         */
    int delta;                 /* 1: the delta rule, beta [B,T,H] in [0, 2]     */
    kdalab_g_shape g;          /* the log-decay's shape (g <= 0 where present)   */
    int ab;                    /* 1: the low-rank term b a^T of the transition is
                                  given, a, b [B,T,H,K] (the DPLR boundary)       */
    const char *fla_chunk;     /* fla's chunkwise function: "chunk_kda"          */
    const char *fla_recurrent; /* fla's recurrent one: "fused_recurrent_kda"     */
    const char *source;        /* the paper (arXiv id) the row follows           */
} kdalab_mechanism_info;

/* The row of mechanism m, or NULL when m is not a mechanism (no error set:
 * a lookup, not a check). kdalab_mechanism_row(KDALAB_N_MECHANISMS) is NULL,
 * so `for (m = 0; kdalab_mechanism_row(m); m++)` visits every row. */
const kdalab_mechanism_info *kdalab_mechanism_row(kdalab_mechanism m);

/* The row's name ("linear_attention", "deltanet", "gated_deltanet", "kda",
 * "simple_gla", "gla", "dplr"), or "unknown". */
const char *kdalab_mechanism_name(kdalab_mechanism m);

/* Parse a mechanism name of the table. KDALAB_EINVAL when unknown (the
 * message lists the names), KDALAB_ENULL for NULL. */
kdalab_status kdalab_mechanism_parse(const char *name, kdalab_mechanism *out);

/* The names of every row, separated by sep ("kda|gla|..."), written into
 * buf of n bytes (truncated, always terminated when n > 0); returns buf.
 * For help texts and error messages. */
const char *kdalab_mechanism_list(const char *sep, char *buf, size_t n);

/* Does the mechanism have the delta rule (and so take beta)? (0 for an
 * unknown m.) kdalab_mechanism_has_beta is the same question, by its input. */
int kdalab_mechanism_has_delta(kdalab_mechanism m);
int kdalab_mechanism_has_beta(kdalab_mechanism m);

/* The shape of its g (KDALAB_G_NONE for an unknown m), and how many g values
 * per (b,t,h): 0, 1 or K. */
kdalab_g_shape kdalab_mechanism_g_shape(kdalab_mechanism m);
size_t kdalab_mechanism_g_width(kdalab_mechanism m, size_t K);

/* Does the mechanism take the transition's low-rank term as inputs a, b
 * [B,T,H,K] (S_t = (Diag(exp g_t) + b_t a_t^T) S_{t-1} + k_t v_t^T; REFERENCE.md
 * "The boundary")? 0 for an unknown m. The reference's forms serve such a
 * row through the one call (kdalab_call.h), forward and backward, and its
 * decode step is kdalab_step_ab_f64; the SIMD path and the flat functions
 * refuse it (KDALAB_EINVAL naming what does). */
int kdalab_mechanism_has_ab(kdalab_mechanism m);

/* The default query scale, K^-1/2. */
double kdalab_default_scale(size_t K);

/* ------------------------------------------------------------------------- */
/* The domain rules (lib/core/rules.c)                                       */
/* ------------------------------------------------------------------------- */

/* Which rule an input array obeys. Every form checks its inputs with these
 * rules before it writes anything; they are stated once, in lib/core/rules.c. */
typedef enum {
    KDALAB_RULE_FINITE = 0, /* q, k, v, h0: every value finite                     */
    KDALAB_RULE_LOG_DECAY,  /* g: finite and <= 0 (a decay factor exp(g) in (0,1]) */
    KDALAB_RULE_BETA        /* beta: finite and in [0, 2]                          */
} kdalab_value_rule;

/*
 * kdalab_check_values_f64 / _f32 — check x[0..n) against one rule, exactly as
 * the forms do. On the first bad element: KDALAB_ENONFINITE (NaN/Inf) or
 * KDALAB_EDOMAIN (finite but outside the rule), its flat index in *first_bad
 * (when first_bad is not NULL) and a message "name[i] ..." in
 * kdalab_last_error(). KDALAB_ENULL when name is NULL, or x is NULL with n > 0;
 * KDALAB_EOVERFLOW when n elements overflow the address space.
 * For callers that read inputs themselves (the command line adds the file
 * name and the multi-index) and want the library's verdict and wording.
 */
kdalab_status kdalab_check_values_f64(kdalab_value_rule rule, const char *name,
                                      const double *x, size_t n, size_t *first_bad);
kdalab_status kdalab_check_values_f32(kdalab_value_rule rule, const char *name,
                                      const float *x, size_t n, size_t *first_bad);

/* The query scale's rule: finite and > 0 (any such double, subnormals too).
 * KDALAB_EDOMAIN otherwise. */
kdalab_status kdalab_check_scale(double scale);

/* ------------------------------------------------------------------------- */
/* Recurrent form (the reference) and the decode step                        */
/* ------------------------------------------------------------------------- */

/*
 * kdalab_recurrent_f64 — the token-by-token recurrence of REFERENCE.md, in
 * float64. This is the oracle every other form is checked against; it is
 * exactly fla's fla/ops/<mechanism>/naive.py recurrent reference.
 *
 *   dims   B, T, H, K, V (T may be 0: o is empty and ht = h0 or zero)
 *   mech   which update rule
 *   scale  query scale s, finite and > 0
 *   q, k   [B,T,H,K]; v [B,T,H,V]
 *   g      log-decay, [B,T,H] (a decay per head: gated_deltanet, simple_gla) or
 *          [B,T,H,K] (per key channel: kda, gla); NULL without a decay
 *          (ignored when the mechanism has none); every g <= 0
 *   beta   [B,T,H], each in [0, 2], with the delta rule; NULL without it (ignored)
 *   h0     [B,H,K,V] initial state, or NULL for a zero state
 *   o      [B,T,H,V] output (written)
 *   ht     [B,H,K,V] final state (written), or NULL when not wanted
 *
 * Errors: KDALAB_ENULL (q, k, v, o, or a needed g/beta is NULL; any pointer may
 * be NULL when T == 0 except o/ht shapes still validated), KDALAB_ESIZE (B, H,
 * K or V is 0), KDALAB_EOVERFLOW (B*T*H*max(K,V) or B*H*K*V overflows),
 * KDALAB_EDOMAIN (g > 0, beta outside [0,2], bad scale), KDALAB_ENONFINITE
 * (NaN/Inf in any input), KDALAB_EINVAL (unknown mechanism), KDALAB_ENOMEM,
 * KDALAB_ERANGE (finite inputs so large that the state overflowed; o and ht
 * are written).
 */
kdalab_status kdalab_recurrent_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const double *q, const double *k,
                                   const double *v, const double *g, const double *beta,
                                   const double *h0, double *o, double *ht);

/* The same recurrence computed entirely in float32 (same shapes, same errors). */
kdalab_status kdalab_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                   float scale, const float *q, const float *k,
                                   const float *v, const float *g, const float *beta,
                                   const float *h0, float *o, float *ht);

/*
 * kdalab_step_f64 — the decode step: advance ONE head's state by ONE token, in
 * place, and return that token's output. What a server runs per generated
 * token. Equation per mechanism as in the header comment.
 *
 *   K, V   head dims (>= 1)
 *   q, k   [K]; v [V]
 *   g      [1] (a decay per head), [K] (per key channel); required with a
 *          decay, ignored (may be NULL) without one
 *   beta   write strength in [0,2] (ignored for linear attention)
 *   S      [K,V] state, updated in place (S_{t-1} -> S_t)
 *   o      [V] output s * S_t^T q
 *
 * Errors as kdalab_recurrent_f64; on error S and o are untouched (except
 * KDALAB_ERANGE: the step was taken and overflowed).
 */
kdalab_status kdalab_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                              const double *q, const double *k, const double *v,
                              const double *g, double beta, double *S, double *o);
kdalab_status kdalab_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                              const float *q, const float *k, const float *v,
                              const float *g, float beta, float *S, float *o);

/*
 * kdalab_step_ab_f64 — the decode step of a row with the DPLR term
 * (kdalab_mechanism_has_ab): S <- Diag(exp g) S + b (a^T S) + k v^T in place,
 * o = s * S^T q (REFERENCE.md "The boundary").
 *   q, k, g, a, b  [K] (g <= 0);  v, o [V];  S [K, V] (S_{t-1} -> S_t)
 * Errors: KDALAB_ENULL, KDALAB_ESIZE (K or V zero), KDALAB_EINVAL (a row
 * without a, b: kdalab_step_f64 is its step), KDALAB_ENONFINITE (an input),
 * KDALAB_EDOMAIN (g > 0, scale), KDALAB_ENOMEM, KDALAB_ERANGE (o or S
 * overflowed; written). kdalab_step_f64 refuses these rows by name.
 */
kdalab_status kdalab_step_ab_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                 const double *q, const double *k, const double *v,
                                 const double *g, const double *a, const double *b, double *S,
                                 double *o);
kdalab_status kdalab_step_ab_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                 const float *q, const float *k, const float *v, const float *g,
                                 const float *a, const float *b, float *S, float *o);


/* ------------------------------------------------------------------------- */
/* Chunkwise form                                                            */
/* ------------------------------------------------------------------------- */

/*
 * How decay is applied inside a chunk (REFERENCE.md, "Where the
 * floating-point range problem lives"). Only a per-key decay (KDA, GLA)
 * distinguishes them; a per-head one (Gated DeltaNet, simple GLA) uses the
 * C x C matrix exp(Gamma_i - Gamma_j) in every mode but the safe one (no
 * positive exponent), and DeltaNet / linear attention have no decay.
 */
typedef enum {
    KDALAB_DECAY_SAFE = 0,   /* sub-chunks: off-diagonal blocks through a boundary  */
                             /* anchor, diagonal block pairwise. Never overflows.  */
                             /* The default.                                       */
    KDALAB_DECAY_PAIRWISE,   /* exp(Gamma_i - Gamma_j) per pair and channel: the    */
                             /* C x C x K yardstick. Never overflows. Slow.         */
    KDALAB_DECAY_RESCALED,   /* q*gamma, k/gamma relative to the chunk start, as    */
                             /* the chapter writes it. Overflows when |sum g| over  */
                             /* the chunk exceeds ln(max finite).                   */
    KDALAB_DECAY_ANCHORED    /* sub-chunks: anchored off-diagonal blocks, the       */
                             /* diagonal block rescaled relative to its start (the  */
                             /* production kernels' way). Overflows when |sum g|    */
                             /* over one sub-chunk exceeds ln(max finite).          */
} kdalab_decay_mode;

/* "safe", "pairwise", "rescaled", "anchored"; parse returns KDALAB_EINVAL if unknown. */
const char *kdalab_decay_name(kdalab_decay_mode mode);
kdalab_status kdalab_decay_parse(const char *name, kdalab_decay_mode *out);

/* Storage precision of the float32 chunkwise form. */
typedef enum {
    KDALAB_FP32 = 0, /* plain float32                                               */
    KDALAB_BF16,     /* inputs and rescaled q~, k~ rounded to bfloat16 (8-bit      */
                     /* mantissa, fp32 range), accumulation in float32             */
    KDALAB_FP16      /* the same with IEEE half (11-bit mantissa, max 65504,        */
                     /* overflow -> +-inf)                                          */
} kdalab_precision;

const char *kdalab_precision_name(kdalab_precision p); /* "fp32", "bf16", "fp16" */

/* Options of the chunkwise form. kdalab_chunk_opts_default() gives C = 64,
 * c = 16, safe decay, fp32, bwd_state_bytes 0, h_chunk 0. */
typedef struct {
    size_t chunk;               /* C >= 1, positions per chunk; the last chunk may be shorter */
    size_t subchunk;            /* c >= 1, positions per sub-chunk (safe/anchored modes)      */
    kdalab_decay_mode decay;    /* see kdalab_decay_mode                                      */
    kdalab_precision precision; /* the float32 chunkwise forms' (reference and SIMD) storage; */
                                /* must be FP32 for float64 and for the backward           */
    size_t bwd_state_bytes;     /* the SIMD backward's memory for chunk states, in bytes per  */
                                /* (sequence, head) task: it keeps the state entering every   */
                                /* chunk when they fit (each chunk's forward runs twice),     */
                                /* else checkpoints them (about 2 sqrt(N) states, most        */
                                /* chunks' forward three times); same bits either way.        */
                                /* 0: 128 MiB for a call with a workspace (kdalab_call.work), */
                                /* whose pages are reused; without one, checkpoint (fresh     */
                                /* pages cost more than the recomputation saves). The         */
                                /* reference backward keeps every state.                      */
    size_t h_chunk;             /* the span of the states the SIMD forward writes to h        */
                                /* (kdalab_tensors_f64's field h): the state entering every   */
                                /* h_chunk positions, a multiple of C (checked by every       */
                                /* chunkwise call, KDALAB_EINVAL); 0: C. So a kernel's h at   */
                                /* its chunk (fla's 64) comes from the float64 forward run at */
                                /* its fastest C (16), which agrees with C = 64 to ~1e-15.    */
} kdalab_chunk_opts;

/* The chunk options every path uses when given none (opts == NULL), and the
 * command line when given no chunk flag: C = 64, c = 16, safe decay, fp32. */
kdalab_chunk_opts kdalab_chunk_opts_default(void);

/* What a chunkwise call saw. All fields are filled on KDALAB_OK and KDALAB_ERANGE. */
typedef struct {
    size_t nonfinite_o;   /* non-finite elements written to o                        */
    size_t nonfinite_ht;  /* non-finite elements written to ht                       */
    double max_exponent;  /* the largest argument passed to exp() when forming decay */
                          /* factors (0 when none was positive): exp(max_exponent)  */
                          /* is the largest 1/gamma the mode built                   */
} kdalab_report;

/*
 * kdalab_chunk_f64 — the chunkwise form of REFERENCE.md ("Chunkwise form"),
 * in float64. Same shapes, layout and meaning as kdalab_recurrent_f64; the
 * result equals the recurrent form up to rounding (~1e-12 relative) for every
 * chunk size C >= 1 and every T >= 0, including a shorter last chunk.
 *
 * Per chunk, with S the state entering it (REFERENCE.md steps 1-7):
 *   A_kk = strictly-lower beta_i sum_c k_i[c] k_j[c] exp(Gamma_i[c]-Gamma_j[c])
 *   T    = (I + A_kk)^-1 Diag(beta)              (the UT transform)
 *   W    = T (gamma * K),  U = T V,  V_new = U - W S
 *   O    = s (gamma * Q) S + (lower A_qk) V_new
 *   S   <- Diag(gamma_C) S + (exp(Gamma_C - Gamma) * K)^T V_new
 *
 *   opts   NULL for kdalab_chunk_opts_default(); opts->precision must be FP32
 *   report NULL or filled as described at kdalab_report
 *
 * Errors: those of kdalab_recurrent_f64, plus KDALAB_EINVAL (C < 1, c < 1,
 * unknown decay mode, precision not FP32), and KDALAB_ERANGE when the decay
 * mode (or anything else) overflowed: o and ht are written, report counts
 * the non-finite values.
 *
 * Decay exponents are always formed as sums of g over their span (never as a
 * difference of two running sums), so one very large |g| — a hard reset —
 * does not swallow the small decays that follow it.
 */
kdalab_status kdalab_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                               double scale, const double *q, const double *k,
                               const double *v, const double *g, const double *beta,
                               const double *h0, double *o, double *ht,
                               const kdalab_chunk_opts *opts, kdalab_report *report);

/*
 * kdalab_chunk_f32 — the chunkwise form computed in float32, with optional
 * emulated bf16 / fp16 storage (opts->precision): the inputs q, k, v, beta
 * and the rescaled q~ = q*gamma, k~ = k/gamma (and the anchored rows of the
 * sub-chunked modes) are rounded to the format where a production kernel
 * stores them; every sum accumulates in float32. The log-decay g and its
 * span sums stay in float32, as production kernels keep them. Same shapes
 * and errors as kdalab_chunk_f64.
 */
kdalab_status kdalab_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                               float scale, const float *q, const float *k,
                               const float *v, const float *g, const float *beta,
                               const float *h0, float *o, float *ht,
                               const kdalab_chunk_opts *opts, kdalab_report *report);

KDALAB_END_DECLS

#endif /* KDALAB_FORMS_H */
