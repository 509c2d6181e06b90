/*
 * kdalab.h — the one public header of kdalab.
 *
 * kdalab is a numerical reference for the lineage of sequence mixers that ends
 * in Kimi Delta Attention (KDA): softmax attention → linear attention →
 * DeltaNet → Gated DeltaNet → KDA → the KDA + attention hybrid.
 *
 * Conventions (see REFERENCE.md in the repository, fla's public layout):
 *   q, k   [B, T, H, K]   row-major, last index fastest
 *   v, o   [B, T, H, V]
 *   beta   [B, T, H]      write strength, legal range [0, 2]
 *   g      [B, T, H]      Gated DeltaNet log-decay (one per head and position), g <= 0
 *          [B, T, H, K]   KDA log-decay (one per key channel), g <= 0
 *   h0, ht [B, H, K, V]   initial / final state S (row c = key channel c)
 *   scale  s > 0          default K^-1/2 (kdalab_default_scale)
 *
 * Per (b, h), S_0 = h0 (or zero when h0 == NULL) and for t = 1..T
 *   linear attention  S_t = S_{t-1} + k_t v_t^T
 *   DeltaNet          S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
 *   Gated DeltaNet    S'  = exp(g_t) S_{t-1},        then the DeltaNet update on S'
 *   KDA               S'  = Diag(exp(g_t)) S_{t-1},  then the DeltaNet update on S'
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
#ifndef KDALAB_H
#define KDALAB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KDALAB_VERSION "0.1.0"

/* ------------------------------------------------------------------------- */
/* Status codes                                                              */
/* ------------------------------------------------------------------------- */

typedef enum {
    KDALAB_OK = 0,
    KDALAB_ENULL,      /* a required pointer is NULL                               */
    KDALAB_ESIZE,      /* a size is zero where it must not be, or shapes disagree  */
    KDALAB_EOVERFLOW,  /* a product of sizes overflows size_t                      */
    KDALAB_EDOMAIN,    /* a value is out of its domain: g > 0, beta outside [0,2], */
                       /* scale not finite and positive                            */
    KDALAB_ENONFINITE, /* an input holds NaN or Inf                                */
    KDALAB_EINVAL,     /* an option is invalid: chunk size < 1, unknown mode, ...  */
    KDALAB_ENOMEM,     /* allocation failed                                        */
    KDALAB_ERANGE,     /* the computation produced non-finite values; outputs ARE  */
                       /* written (so they can be studied) and counted in the      */
                       /* report                                                   */
    KDALAB_EIO,        /* a file could not be opened, read, written or renamed     */
    KDALAB_EFORMAT,    /* a file is malformed (.npy header, truncated data, ...)   */
    KDALAB_EDTYPE      /* a file holds a dtype kdalab does not read                */
} kdalab_status;

/* A short, static message for a status ("g > 0 or beta outside [0,2]", ...). */
const char *kdalab_strerror(kdalab_status status);

/*
 * The detail of the last error raised on this thread, e.g.
 * "q.npy: dtype '|u1' is not supported (only <f8, >f8, <f4, >f4)".
 * Like errno, it is meaningful right after a call returned an error status;
 * a successful call may leave an older message in place (the computing
 * forms clear it). Never NULL.
 */
const char *kdalab_last_error(void);

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

/* The recurrent mechanisms of the lineage (chapters 02, 03, 05, 06). */
typedef enum {
    KDALAB_LINEAR_ATTENTION = 0, /* no beta, no g                        */
    KDALAB_DELTANET,             /* beta [B,T,H], no g                   */
    KDALAB_GATED_DELTANET,       /* beta [B,T,H], g [B,T,H]              */
    KDALAB_KDA                   /* beta [B,T,H], g [B,T,H,K]            */
} kdalab_mechanism;

/* "linear_attention", "deltanet", "gated_deltanet", "kda". */
const char *kdalab_mechanism_name(kdalab_mechanism m);

/* Parse a mechanism name as above. KDALAB_EINVAL when unknown. */
kdalab_status kdalab_mechanism_parse(const char *name, kdalab_mechanism *out);

/* Does the mechanism take beta? take g? How many g values per (b,t,h): 0, 1 or K. */
int kdalab_mechanism_has_beta(kdalab_mechanism m);
size_t kdalab_mechanism_g_width(kdalab_mechanism m, size_t K);

/* The default query scale, K^-1/2. */
double kdalab_default_scale(size_t K);

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
 *   g      log-decay, [B,T,H] (gated_deltanet) or [B,T,H,K] (kda); NULL otherwise
 *          (ignored when the mechanism has none); every g <= 0
 *   beta   [B,T,H], each in [0, 2]; NULL for linear attention (ignored)
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
 *   g      [1] (gated_deltanet), [K] (kda), ignored otherwise (may be NULL)
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

/* ------------------------------------------------------------------------- */
/* Chunkwise form                                                            */
/* ------------------------------------------------------------------------- */

/*
 * How decay is applied inside a chunk (REFERENCE.md, "Where the
 * floating-point range problem lives"). Only KDA distinguishes them; Gated
 * DeltaNet always uses the C x C matrix exp(Gamma_i - Gamma_j) (no positive
 * exponent) and DeltaNet / linear attention have no decay.
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
 * c = 16, safe decay, fp32. */
typedef struct {
    size_t chunk;               /* C >= 1, positions per chunk; the last chunk may be shorter */
    size_t subchunk;            /* c >= 1, positions per sub-chunk (safe/anchored modes)      */
    kdalab_decay_mode decay;    /* see kdalab_decay_mode                                      */
    kdalab_precision precision; /* used by kdalab_chunk_f32 only; must be FP32 for _f64      */
} kdalab_chunk_opts;

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

/* ------------------------------------------------------------------------- */
/* Low-precision emulation                                                   */
/* ------------------------------------------------------------------------- */

/* Round a float32 to the nearest bfloat16 (ties to even), returned as float. NaN stays NaN. */
float kdalab_round_bf16(float x);
/* Round a float32 to the nearest IEEE binary16 (ties to even, subnormals kept,
 * |x| beyond the fp16 range -> +-inf), returned as float. */
float kdalab_round_fp16(float x);
/* Round to the given precision (FP32: identity). */
float kdalab_round(kdalab_precision p, float x);

/* ------------------------------------------------------------------------- */
/* Softmax attention (chapter 01) and its KV cache                           */
/* ------------------------------------------------------------------------- */

/*
 * kdalab_attention_f64 — causal scaled softmax attention without positional
 * encoding (NoPE), the hybrid's full-attention layer:
 *   o_t = sum_{j<=t} softmax_j(s q_t . k_j) v_j       per (b, h)
 * computed with a running max, so exp() never overflows for finite scores.
 *
 *   q, k [B,T,H,K]; v, o [B,T,H,V]; scale finite and > 0.
 * Errors: KDALAB_ENULL, KDALAB_ESIZE, KDALAB_EOVERFLOW, KDALAB_EDOMAIN (scale),
 * KDALAB_ENONFINITE, KDALAB_ENOMEM, KDALAB_ERANGE (a score s q.k overflowed
 * for finite q, k; o is written). Cost O(T^2 K) per head.
 */
kdalab_status kdalab_attention_f64(const kdalab_dims *dims, double scale, const double *q,
                                   const double *k, const double *v, double *o);
kdalab_status kdalab_attention_f32(const kdalab_dims *dims, float scale, const float *q,
                                   const float *k, const float *v, float *o);

/* A growing KV cache for H heads: what decode-time attention keeps per layer. */
typedef struct kdalab_kv_cache kdalab_kv_cache;

/* A new, empty cache for H heads of key dim K and value dim V (float64).
 * Returns NULL when H, K or V is 0, their product overflows, or memory runs out. */
kdalab_kv_cache *kdalab_kv_cache_new(size_t H, size_t K, size_t V);
void kdalab_kv_cache_free(kdalab_kv_cache *cache);

/* Append one token: k [H,K], v [H,V]. Errors: ENULL, ENONFINITE, ENOMEM (cache unchanged). */
kdalab_status kdalab_kv_cache_append(kdalab_kv_cache *cache, const double *k, const double *v);

/* Attend with one query per head, q [H,K], over every cached token; o [H,V].
 * Errors: ENULL, ENONFINITE, EDOMAIN (scale), ESIZE (the cache is empty),
 * ERANGE (a score overflowed; o is written). */
kdalab_status kdalab_kv_cache_attend(const kdalab_kv_cache *cache, double scale,
                                     const double *q, double *o);

/* Tokens held, and bytes the cached keys and values occupy: tokens*H*(K+V)*8. */
size_t kdalab_kv_cache_tokens(const kdalab_kv_cache *cache);
size_t kdalab_kv_cache_bytes(const kdalab_kv_cache *cache);

/* ------------------------------------------------------------------------- */
/* NumPy .npy files                                                          */
/* ------------------------------------------------------------------------- */

#define KDALAB_NPY_MAX_DIMS 4

/* The dtypes kdalab reads ('<f8', '>f8', '<f4', '>f4') and writes ('<f8', '<f4'). */
typedef enum { KDALAB_DTYPE_F64 = 0, KDALAB_DTYPE_F32 } kdalab_dtype;

/* An array read from a .npy file, always converted to float64, C order. */
typedef struct {
    int ndim;                          /* 0..4; 0 is a scalar, size 1           */
    size_t shape[KDALAB_NPY_MAX_DIMS]; /* shape[0..ndim-1]                       */
    size_t size;                       /* product of the shape (may be 0)        */
    kdalab_dtype dtype;                /* the dtype stored in the file           */
    double *data;                      /* size elements (malloc'd; NULL if 0)    */
} kdalab_array;

/*
 * Parse a .npy image held in memory (format 1.0, 2.0 or 3.0; '<f8', '>f8',
 * '<f4', '>f4'; C order, or Fortran order which is transposed to C order; up
 * to 4 dimensions). Every length is checked against len before it is read.
 *
 * Errors: KDALAB_ENULL, KDALAB_EFORMAT (bad magic, truncated, malformed
 * header or shape, data shorter than the shape), KDALAB_EDTYPE (any other
 * dtype), KDALAB_EOVERFLOW (element count or byte count overflows),
 * KDALAB_ENOMEM. On error *out is zeroed (nothing to free). kdalab_last_error()
 * has the detail.
 */
kdalab_status kdalab_npy_parse(const void *buf, size_t len, kdalab_array *out);

/* Read a .npy file (as kdalab_npy_parse, plus KDALAB_EIO). */
kdalab_status kdalab_npy_read(const char *path, kdalab_array *out);

/*
 * Write a .npy file, format 1.0 (2.0 if the header needs it), C order, dtype
 * '<f8' or '<f4' (data is converted from float64). Written to a temporary
 * name in the same directory and renamed, so no half-written file is ever
 * left at path. ndim 0..4, shape may be NULL when ndim == 0.
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (ndim), KDALAB_EOVERFLOW, KDALAB_EIO.
 */
kdalab_status kdalab_npy_write(const char *path, kdalab_dtype dtype, const double *data,
                               int ndim, const size_t *shape);

/* Free the data of an array read above and zero it. NULL is allowed. */
void kdalab_array_free(kdalab_array *a);

/* ------------------------------------------------------------------------- */
/* Hybrid stack (lib/hybrid.c)                                               */
/* ------------------------------------------------------------------------- */
/*
 * The chapter's last step (seed, "Do not choose. Interleave."): a stack of L
 * mixing layers over a residual stream of width d_model, each layer either
 * KDA (a fixed-size K x V state per head) or causal softmax attention without
 * positional encoding (NoPE; a KV cache that grows by one row per token).
 *
 * Sizes: H heads, d_head = d_model / H, and K = V = d_head for both kinds.
 * Row-vector convention: a projection of x [d_model] is x W with W
 * [d_in, d_out] row-major (PyTorch's nn.Linear stores the transpose).
 *
 * Layer l maps its residual input x [T, d_model] to x + o W_o, where
 *   u = RMSNorm(x) = x / sqrt(mean_c x[c]^2 + 1e-6) * w_norm   per row (pre-norm,
 *       as Kimi Linear and every pre-norm transformer; u = x when rms_norm == 0)
 *   q = u W_q, k = u W_k, v = u W_v          each [T, H, d_head] (= [T, d_model])
 *   KDA layers only:
 *     q, k  L2-normalised per (t, head)       (as fla's use_qk_l2norm_in_kernel)
 *     g     = lower_bound * sigmoid(u W_g + b_g)   [T, H, K]  per-channel log-decay
 *     beta  = sigmoid(u W_beta)                    [T, H]
 *     o     = the KDA recurrence (REFERENCE.md, chapter 06) from the layer's state
 *   attention layers:
 *     q, k  used as projected (no L2 norm: unit q, k would cap every logit at
 *           +-scale and make long-context softmax nearly uniform)
 *     o_t   = sum_{j<=t} softmax_j(scale q_t . k_j) v_j  over every token seen
 *   both: scale = config scale (0 selects d_head^-1/2); no FFN (this is the
 *   sequence-mixing half of the block only). The pre-norm keeps every
 *   layer's input at one scale whatever the depth; rms_norm = 0 drops it.
 *
 * Which layers are attention: with the ratio N:M (ratio_kda : ratio_attention),
 * layers come in periods of N+M; in each period the first N are KDA and the
 * last M are attention, i.e. layer l (0-based) is attention iff
 * l mod (N+M) >= N. 3:1 gives KDA KDA KDA ATTN KDA KDA KDA ATTN ... (every
 * fourth layer is attention, as in Kimi Linear); 1:0 is pure KDA, 0:1 pure
 * attention. An explicit per-layer list overrides the ratio.
 */

/* The kind of one mixing layer. */
typedef enum {
    KDALAB_HYBRID_KDA = 0,      /* Kimi Delta Attention: state [H, K, V], constant size */
    KDALAB_HYBRID_ATTENTION     /* causal softmax attention, NoPE: KV cache, grows      */
} kdalab_hybrid_kind;

/* "kda", "attention" ("unknown" otherwise). */
const char *kdalab_hybrid_kind_name(kdalab_hybrid_kind kind);

/* The shape of a stack. Start from kdalab_hybrid_config_default(). */
typedef struct {
    size_t n_layers;          /* L >= 1                                              */
    size_t d_model;           /* residual width >= 1                                 */
    size_t n_heads;           /* H >= 1, must divide d_model                         */
    size_t ratio_kda;         /* N of N:M; N + M >= 1 (ignored when kinds != NULL)   */
    size_t ratio_attention;   /* M of N:M                                            */
    const kdalab_hybrid_kind *kinds; /* NULL, or [n_layers] explicit kinds; copied  */
                              /* by kdalab_hybrid_new_*, so it may be freed after     */
    double gate_lower_bound;  /* KDA gate g = lower_bound * sigmoid(.); finite, <= 0 */
    double scale;             /* query scale, finite >= 0; 0 selects d_head^-1/2     */
    int rms_norm;             /* 1: RMSNorm before each mixer (default); 0: none      */
} kdalab_hybrid_config;

/* L = 4, d_model = 64, H = 2, ratio 3:1, kinds NULL, lower_bound -5, scale 0,
 * rms_norm 1. */
kdalab_hybrid_config kdalab_hybrid_config_default(void);

/*
 * kdalab_hybrid_config_check — validate a configuration. Errors: KDALAB_ENULL
 * (cfg NULL), KDALAB_ESIZE (L, d_model or H zero; H does not divide d_model;
 * ratio 0:0 with kinds == NULL), KDALAB_EINVAL (a kinds entry that is not a
 * kdalab_hybrid_kind; rms_norm not 0 or 1), KDALAB_EDOMAIN (lower_bound not
 * finite or > 0; scale not finite or < 0), KDALAB_EOVERFLOW (a weight count
 * overflows).
 */
kdalab_status kdalab_hybrid_config_check(const kdalab_hybrid_config *cfg);

/* The kind of layer `layer` (0-based) under cfg (see the ratio rule above).
 * Errors: those of kdalab_hybrid_config_check, KDALAB_EINVAL (layer >= L). */
kdalab_status kdalab_hybrid_layer_kind(const kdalab_hybrid_config *cfg, size_t layer,
                                       kdalab_hybrid_kind *out);

/* A stack: its weights, and per layer the KDA state or the KV cache. */
typedef struct kdalab_hybrid kdalab_hybrid;

/*
 * kdalab_hybrid_new_random — a stack with weights from a seeded GSL
 * Mersenne Twister (gsl_rng_mt19937, seed as given):
 *   W_q, W_k, W_v, W_o, W_g, W_beta   i.i.d. N(0, 1/d_model);  w_norm = 1
 *   b_g[c]  = logit(u_c / |lower_bound|) with u_c log-uniform in [1e-4, 1]
 *             (capped below |lower_bound|), so at x = 0 the per-step decay
 *             -g spans 1e-4 .. 1: half-lives from under a token to ~7000
 *             tokens, the multi-timescale spread the chapter describes.
 *             (lower_bound == 0: b_g = 0, g == 0.)
 * The caches are empty (position 0). Errors: those of
 * kdalab_hybrid_config_check, KDALAB_ENULL (out), KDALAB_ENOMEM.
 */
kdalab_status kdalab_hybrid_new_random(const kdalab_hybrid_config *cfg, unsigned long seed,
                                       kdalab_hybrid **out);

/*
 * kdalab_hybrid_new_npy — a stack with weights read from .npy files (any
 * dtype kdalab_npy_read accepts, converted to float64) in directory dir:
 *   dir/layerNN.wq.npy     [d_model, d_model]   (NN = layer index, two or more
 *   dir/layerNN.wk.npy     [d_model, d_model]    digits, zero-padded: layer00,
 *   dir/layerNN.wv.npy     [d_model, d_model]    layer01, ..., layer123)
 *   dir/layerNN.wo.npy     [d_model, d_model]
 *   dir/layerNN.norm.npy   [d_model]            RMSNorm gain (only when rms_norm)
 *   KDA layers only:
 *   dir/layerNN.wg.npy     [d_model, d_model]   gate projection
 *   dir/layerNN.bg.npy     [d_model]            gate bias
 *   dir/layerNN.wbeta.npy  [d_model, H]         beta projection
 * Layer kinds come from cfg, not from the files. All matrices are [in, out]:
 * y = x W. Errors: those of kdalab_hybrid_config_check and kdalab_npy_read
 * (KDALAB_EIO for a missing file, with its path in kdalab_last_error()),
 * KDALAB_ESIZE (a file's shape differs from the one above),
 * KDALAB_ENONFINITE (a weight is NaN/Inf), KDALAB_ENULL, KDALAB_ENOMEM.
 */
kdalab_status kdalab_hybrid_new_npy(const kdalab_hybrid_config *cfg, const char *dir,
                                    kdalab_hybrid **out);

/* Write a stack's weights as '<f8' .npy files in dir (which must exist), in
 * the layout kdalab_hybrid_new_npy reads. Errors: KDALAB_ENULL, those of
 * kdalab_npy_write. */
kdalab_status kdalab_hybrid_save_npy(const kdalab_hybrid *stack, const char *dir);

/* Free a stack (its weights, states and caches). NULL is allowed. */
void kdalab_hybrid_free(kdalab_hybrid *stack);

/* The configuration the stack was built with (kinds points at the stack's own
 * [L] copy, valid until kdalab_hybrid_free). NULL when stack is NULL. */
const kdalab_hybrid_config *kdalab_hybrid_config_of(const kdalab_hybrid *stack);

/* Tokens consumed since creation or the last reset (prefill + decode). 0 for NULL. */
size_t kdalab_hybrid_position(const kdalab_hybrid *stack);

/* Empty every KV cache and zero every KDA state (weights kept). ENULL for NULL. */
kdalab_status kdalab_hybrid_reset(kdalab_hybrid *stack);

/*
 * One layer's weights, pointing into the stack (writable: change them to set
 * weights by hand; the caches are not recomputed). All row-major, y = x W.
 *   norm            [d_model]           RMSNorm gain (used when rms_norm == 1)
 *   wq, wk, wv, wo  [d_model, d_model]
 *   wg              [d_model, d_model]  KDA layers; NULL for attention
 *   bg              [d_model]           KDA layers; NULL for attention
 *   wbeta           [d_model, H]        KDA layers; NULL for attention
 */
typedef struct {
    kdalab_hybrid_kind kind;
    double *norm, *wq, *wk, *wv, *wo, *wg, *bg, *wbeta;
} kdalab_hybrid_weights;

/* Errors: KDALAB_ENULL, KDALAB_EINVAL (layer >= L). */
kdalab_status kdalab_hybrid_layer_weights(kdalab_hybrid *stack, size_t layer,
                                          kdalab_hybrid_weights *out);

/*
 * kdalab_hybrid_layer_project — layer `layer`'s mixer inputs for T residual
 * rows x [T, d_model] (what prefill/decode feed the KDA recurrence or the
 * attention; the RMSNorm is applied first when rms_norm), exactly as computed
 * inside the stack:
 *   q, k  [T, H, d_head]  (L2-normalised per (t, head) for KDA layers)
 *   v     [T, H, d_head]
 *   g     [T, H, d_head]  KDA only (NULL allowed; ignored for attention)
 *   beta  [T, H]          KDA only (NULL allowed; ignored for attention)
 * Any of q, k, v may be NULL when not wanted. Does not touch the caches.
 * Errors: KDALAB_ENULL (stack, or x when T > 0), KDALAB_EINVAL (layer >= L),
 * KDALAB_ENONFINITE (x holds NaN/Inf).
 */
kdalab_status kdalab_hybrid_layer_project(const kdalab_hybrid *stack, size_t layer, size_t T,
                                          const double *x, double *q, double *k, double *v,
                                          double *g, double *beta);

/*
 * kdalab_hybrid_prefill — run T tokens through the stack at once, continuing
 * from its current caches (position P before, P + T after):
 *   KDA layers       kdalab_chunk_f64 with default options (C = 64, safe
 *                    decay), h0 = the layer's state, which is replaced by ht
 *   attention layers append the T keys and values to the layer's KV cache;
 *                    outputs by kdalab_attention_f64 when the cache was empty,
 *                    otherwise token by token over cache + new tokens
 *                    (kdalab_kv_cache_attend): the same causal attention
 *
 *   x             [T, d_model] residual-stream input (the token embeddings)
 *   y             [T, d_model] the residual stream after layer L-1, or NULL
 *                 when only the caches are wanted (then a final attention
 *                 layer only appends, skipping its O(T^2) scores)
 *   layer_inputs  [L, T, d_model] the residual input of each layer, before
 *                 its RMSNorm (layer_inputs[0] = x), or NULL
 * T == 0 is a no-op. Errors: KDALAB_ENULL (stack, or x when T > 0),
 * KDALAB_ENONFINITE (x holds NaN/Inf), KDALAB_EOVERFLOW, KDALAB_ENOMEM, and
 * any error of the KDA/attention kernels (e.g. KDALAB_ERANGE), and
 * KDALAB_ERANGE when y holds non-finite values from finite x (y is written).
 * On an error before the first layer ran nothing changes; on a kernel error
 * mid-stack (including a kernel's KDALAB_ERANGE) y is not written and the
 * stack is left inconsistent — call kdalab_hybrid_reset.
 */
kdalab_status kdalab_hybrid_prefill(kdalab_hybrid *stack, size_t T, const double *x,
                                    double *y, double *layer_inputs);

/*
 * kdalab_hybrid_decode — advance the stack by one token (position P -> P+1):
 * KDA layers by kdalab_step_f64 per head on their [H, K, V] state (O(K V) per
 * head, whatever P), attention layers by appending the token's k, v to the
 * cache and attending over all P+1 cached tokens (O(P d_head) per head).
 *   x             [d_model] input; y [d_model] output (may alias x)
 *   layer_inputs  [L, d_model] each layer's residual input, or NULL
 * Result equals kdalab_hybrid_prefill of the same tokens up to rounding.
 * Errors as kdalab_hybrid_prefill (y must not be NULL).
 */
kdalab_status kdalab_hybrid_decode(kdalab_hybrid *stack, const double *x, double *y,
                                   double *layer_inputs);

/*
 * kdalab_hybrid_cache_bytes — the decode-time memory the stack holds, read
 * from the objects themselves (not from a formula):
 *   KDA layer        the bytes of its state array: H * d_head * d_head * 8,
 *                    constant in the context length
 *   attention layer  kdalab_kv_cache_bytes of its cache: tokens * 2 * H *
 *                    d_head * 8, growing by 2 * d_model * 8 bytes per token
 *   per_layer  [L] bytes per layer (written), or NULL
 *   total      sum over the layers (written), or NULL
 * Errors: KDALAB_ENULL (stack).
 */
kdalab_status kdalab_hybrid_cache_bytes(const kdalab_hybrid *stack, size_t *per_layer,
                                        size_t *total);

/*
 * Direct access to one layer's memory, for probing and benchmarking:
 *   kdalab_hybrid_kda_state   the [H, d_head, d_head] state S (row c = key
 *                             channel c) of a KDA layer; EINVAL for attention
 *   kdalab_hybrid_kv_cache    the KV cache of an attention layer (keys, values
 *                             [tokens, H, d_head]); EINVAL for KDA. Appending
 *                             through it changes that layer only (the stack's
 *                             position does not move): for benchmarks that
 *                             need a long cache cheaply, never for outputs.
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (layer >= L or the wrong kind).
 */
kdalab_status kdalab_hybrid_kda_state(kdalab_hybrid *stack, size_t layer, double **state);
kdalab_status kdalab_hybrid_kv_cache(kdalab_hybrid *stack, size_t layer,
                                     kdalab_kv_cache **cache);

/* ------------------------------------------------------------------------- */
/* Optimized SIMD path (lib/simd/)                                           */
/* ------------------------------------------------------------------------- */
/*
 * The float32 fast path: the same forms as kdalab_chunk_f32 / kdalab_step_f32
 * (same shapes, layout, validation and status codes), computed with
 * register-blocked matrix products and vectorized exp, and threaded with
 * OpenMP over batch x heads (and over value columns when B*H is below the
 * thread count; OMP_NUM_THREADS sets the count).
 *
 * The instruction-set level is chosen once, at the first call, from the CPU's
 * features (AVX-512F+DQ+VL, else AVX2+FMA, else portable scalar code), unless
 * the environment variable KDALAB_SIMD is "scalar", "avx2" or "avx512". A level
 * the CPU lacks is never run: KDALAB_SIMD naming one prints a warning on
 * stderr and the best available level is used instead;
 * kdalab_simd_set_level() refuses it with KDALAB_EINVAL.
 */
typedef enum {
    KDALAB_SIMD_SCALAR = 0, /* portable C, any CPU                     */
    KDALAB_SIMD_AVX2,       /* AVX2 + FMA, 8 floats per vector          */
    KDALAB_SIMD_AVX512,     /* AVX-512 F/DQ/VL, 16 floats per vector    */
    KDALAB_SIMD_AUTO        /* set_level only: the best the CPU has     */
} kdalab_simd_level;

/* Name of the level in use ("scalar", "avx2", "avx512"); resolves it if needed. */
const char *kdalab_simd_level_name(void);
/* The level in use (never KDALAB_SIMD_AUTO). */
kdalab_simd_level kdalab_simd_get_level(void);
/* Name of any level ("scalar", "avx2", "avx512", "auto"); "?" when unknown. */
const char *kdalab_simd_level_str(kdalab_simd_level level);
/* Parse a level name as above. KDALAB_EINVAL when unknown. */
kdalab_status kdalab_simd_level_parse(const char *name, kdalab_simd_level *out);
/* 1 when this CPU (and OS) can run the level, else 0. AUTO and SCALAR: 1. */
int kdalab_simd_level_available(kdalab_simd_level level);
/* Force the level for every later call in the process (AUTO: the best
 * available). KDALAB_EINVAL when the CPU cannot run it (the level is kept). */
kdalab_status kdalab_simd_set_level(kdalab_simd_level level);

/*
 * kdalab_simd_chunk_f32 — the chunkwise form in float32 (REFERENCE.md steps
 * 1-7), arguments, shapes and errors exactly as kdalab_chunk_f32. Outputs
 * agree with kdalab_recurrent_f64 within ~1e-5 relative (float32 rounding).
 *
 * Fast for opts->decay == KDALAB_DECAY_SAFE (the default) and precision FP32:
 * KDA's exponents are all sums of g over the span they cover, all <= 0, so it
 * stays finite and exact for any g <= 0 (g = -1000 decays to an exact 0).
 * Other decay modes or bf16/fp16 emulation are passed to kdalab_chunk_f32 (the
 * reference), since they exist to be studied, not to be fast.
 * report (may be NULL): the non-finite counts; max_exponent is 0 on the fast
 * path (no positive exponent is ever formed).
 * Speed: each thread works in about 4 (3 C K + C V + K V + 2 C^2) bytes plus
 * temporaries (K = V = 128: 273 KB at C = 32, 486 KB at C = 64); a C whose
 * working set fits the L2 cache is faster (on a 512 KB L2, C = 32). With
 * opts == NULL this path uses C = 32 (not kdalab_chunk_opts_default()'s 64);
 * the other defaults are the same. C changes the rounding, not the result.
 * Errors: those of kdalab_chunk_f32 (ENULL, ESIZE, EOVERFLOW, EDOMAIN,
 * ENONFINITE, EINVAL, ENOMEM before any output is written; ERANGE after).
 */
kdalab_status kdalab_simd_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *h0, float *o, float *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report);

/*
 * kdalab_simd_step_f32 — the decode step (one token of one head, in place),
 * arguments and errors exactly as kdalab_step_f32: S [K,V] becomes
 * Diag(a) S + k (beta (v - (Diag(a) S)^T k))^T and o = s S^T q. Single-threaded
 * (a server runs many heads side by side). Two passes over S.
 */
kdalab_status kdalab_simd_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, float beta, float *S, float *o);

#ifdef __cplusplus
}
#endif

#endif /* KDALAB_H */
