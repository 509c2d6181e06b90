/*
 * lib/train/train_internal.h — what lib/train's files share: the model's
 * layout (lib/train/model.c builds it, model_loss.c and trainer.c read it)
 * the CBLAS wrappers of matmul.c, the matrix-form attention of attention.c,
 * the unchecked kernels of layers.c and mixer.c that the model calls, and
 * the float32 twins' vectorisable exp. Not installed, not exported.
 */
#ifndef KDALAB_TRAIN_INTERNAL_H
#define KDALAB_TRAIN_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "kdalab.h"

/* The training model's constants, which the hybrid stack running a trained
 * model (lib/model/trained_forward.c) shares. */
#define TRAIN_CONV_W 4       /* the short convolution's width (fla's ShortConvolution) */
#define TRAIN_NORM_EPS 1e-6  /* the blocks' and the final RMSNorm (fla's model default) */
#define TRAIN_L2_EPS 1e-6    /* the linear mixers' L2 norm of q and k (fla's l2norm)    */
#define TRAIN_ONORM_EPS 1e-5 /* the linear mixers' output norm (fla's KDA norm_eps)    */

/* The mechanism a linear mixer runs (attention has none: linear attention's
 * is returned for it). */
static inline kdalab_mechanism train_mechanism_of(kdalab_mixer_kind kind)
{
    switch (kind) {
    case KDALAB_MIXER_DELTANET: return KDALAB_DELTANET;
    case KDALAB_MIXER_GATED_DELTANET: return KDALAB_GATED_DELTANET;
    case KDALAB_MIXER_KDA: return KDALAB_KDA;
    default: return KDALAB_LINEAR_ATTENTION;
    }
}

/* The mixer's tensors, in kdalab_mixer_params' order. */
enum { MIX_WQ, MIX_WK, MIX_WV, MIX_WO, MIX_CQ, MIX_CK, MIX_CV,
       MIX_WB, MIX_WA, MIX_WG, MIX_WG2, MIX_ALOG, MIX_DTB, MIX_WOG, MIX_ONORM, MIX_N };

/* Offsets into theta of one block's tensors (SIZE_MAX: not used). */
typedef struct {
    size_t norm1, mix[MIX_N], norm2, W1, W3, W2;
} model_block_t;

/* Offsets of every tensor, and the totals. */
typedef struct {
    size_t embed, norm_f, lm_head;
    model_block_t block[KDALAB_MODEL_MAX_LAYERS];
    size_t n_params, n_tensors;
    int overflow; /* a tensor or the total did not fit (kdalab__model_layout refuses it) */
} model_layout_t;

/* Causal softmax attention (NoPE) and its backward in matrix form, a tile of
 * queries at a time through CBLAS (lib/train/attention.c; the float32 twin
 * in attention_f32.c): the same function as kdalab_attention_f64 and
 * kdalab_attention_bwd_f64 for the model's heads (dims->K == dims->V). q, k,
 * dq, dk are (B, T, H, K); v, o, d_o, dv are (B, T, H, V); the backward takes
 * the forward's output o and writes all three gradients (none may be NULL).
 * The inputs are the mixer's, already finite; KDALAB_ERANGE when a score or
 * gradient overflows, KDALAB_ENOMEM. */
kdalab_status kdalab__train_attention_fwd_f64(const kdalab_dims *dims, double scale,
                                              const double *q, const double *k, const double *v,
                                              double *o);
kdalab_status kdalab__train_attention_fwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                              const float *k, const float *v, float *o);
kdalab_status kdalab__train_attention_bwd_f64(const kdalab_dims *dims, double scale,
                                              const double *q, const double *k, const double *v,
                                              const double *o, const double *d_o, double *dq,
                                              double *dk, double *dv);
kdalab_status kdalab__train_attention_bwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                              const float *k, const float *v, const float *o,
                                              const float *d_o, float *dq, float *dk, float *dv);

/* C [m, n] (+)= A [m, k] B [k, n] (+ when accumulate), row-major, through
 * CBLAS (lib/train/matmul.c; the float32 twin in matmul_f32.c). */
void kdalab__train_mm_f64(size_t m, size_t k, size_t n, const double *A, const double *B, double *C,
                          int accumulate);
void kdalab__train_mm_f32(size_t m, size_t k, size_t n, const float *A, const float *B, float *C,
                          int accumulate);

/* The backward of Y = X W, X [m, k], W [k, n], given dY [m, n]: dW [k, n] =
 * X^T dY and dX [m, k] = dY W^T (added to dX when accumulate); either
 * output may be NULL and is then skipped (X is read only for dW, W only
 * for dX). */
void kdalab__train_mm_bwd_f64(size_t m, size_t k, size_t n, const double *X, const double *W,
                              const double *dY, double *dW, double *dX, int accumulate);
void kdalab__train_mm_bwd_f32(size_t m, size_t k, size_t n, const float *X, const float *W,
                              const float *dY, float *dW, float *dX, int accumulate);

/* On the elementwise kernels' definitions (layers.c, the softmax of
 * attention.c): GCC compiles the function for AVX-512, for AVX2 and for the
 * baseline, and the loader picks the widest this CPU has (function
 * multiversioning). The clones do the same operations in the same order
 * (C11 mode: no fused multiply-add contraction), so they give the same bits;
 * tests/test_train_layers.c checks the one picked against baseline code.
 * Measured on AVX-512: SiLU and SwiGLU were a quarter of a quick-config
 * attention step at the baseline's four floats per vector. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TRAIN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRAIN_CLONES
#endif

/* The kernels of lib/train/layers.c (float32 twins in layers_f32.c): the
 * library's one RMSNorm (the hybrid stack of lib/model/ calls it too); the
 * arithmetic of kdalab_rmsnorm_fwd_f64 ... kdalab_short_conv_bwd_f64 with
 * the same arguments and no checks at all, for callers whose arrays are
 * their own and whose sizes are already checked (the model, the mixer). A
 * non-finite input or an overflow gives non-finite outputs, which the
 * caller's final check sees. NULL outputs of a backward are skipped as in
 * the public functions. */
void kdalab__train_rmsnorm_fwd_f64(size_t N, size_t D, double eps, const double *x, const double *w,
                                   double *y);
void kdalab__train_rmsnorm_fwd_f32(size_t N, size_t D, float eps, const float *x, const float *w,
                                   float *y);
void kdalab__train_rmsnorm_bwd_f64(size_t N, size_t D, double eps, const double *x, const double *w,
                                   const double *dy, double *dx, double *dw);
void kdalab__train_rmsnorm_bwd_f32(size_t N, size_t D, float eps, const float *x, const float *w,
                                   const float *dy, float *dx, float *dw);
void kdalab__train_silu_fwd_f64(size_t n, const double *x, double *y);
void kdalab__train_silu_fwd_f32(size_t n, const float *x, float *y);
void kdalab__train_silu_bwd_f64(size_t n, const double *x, const double *dy, double *dx);
void kdalab__train_silu_bwd_f32(size_t n, const float *x, const float *dy, float *dx);
void kdalab__train_swiglu_fwd_f64(size_t n, const double *a, const double *b, double *h);
void kdalab__train_swiglu_fwd_f32(size_t n, const float *a, const float *b, float *h);
void kdalab__train_swiglu_bwd_f64(size_t n, const double *a, const double *b, const double *dh,
                                  double *da, double *db);
void kdalab__train_swiglu_bwd_f32(size_t n, const float *a, const float *b, const float *dh,
                                  float *da, float *db);
void kdalab__train_short_conv_fwd_f64(size_t B, size_t T, size_t C, size_t W, const double *x,
                                      const double *w, double *y);
void kdalab__train_short_conv_fwd_f32(size_t B, size_t T, size_t C, size_t W, const float *x,
                                      const float *w, float *y);
void kdalab__train_short_conv_bwd_f64(size_t B, size_t T, size_t C, size_t W, const double *x,
                                      const double *w, const double *dy, double *dx, double *dw);
void kdalab__train_short_conv_bwd_f32(size_t B, size_t T, size_t C, size_t W, const float *x,
                                      const float *w, const float *dy, float *dx, float *dw);

/* The library's one L2 normalisation (lib/train/layers.c; float32 twin in
 * layers_f32.c), fla's l2norm over each of the rows of d values:
 *   y = x / sqrt(|x|^2 + eps)                      x, y [rows, d]; y may be x
 * eps >= 0 (the mixers pass 1e-6; the hybrid stack's KDA layers 0, a plain
 * unit norm); a double in both precisions. Rows whose squares overflow (or,
 * with eps = 0, underflow) are scaled by their largest magnitude first, so a
 * finite row never gives inf or 0 (eps then does not count); a row of zeros
 * stays zeros. The backward, given the forward's y and dy:
 *   dx = (dy - y (y . dy)) / sqrt(|x|^2 + eps)     [rows, d]
 * No checks (the callers' arrays, sizes checked). */
void kdalab__train_l2norm_fwd_f64(size_t rows, size_t d, double eps, const double *x, double *y);
void kdalab__train_l2norm_fwd_f32(size_t rows, size_t d, double eps, const float *x, float *y);
void kdalab__train_l2norm_bwd_f64(size_t rows, size_t d, double eps, const double *x,
                                  const double *y, const double *dy, double *dx);
void kdalab__train_l2norm_bwd_f32(size_t rows, size_t d, double eps, const float *x,
                                  const float *y, const float *dy, float *dx);

/* kdalab_mixer_fwd_f64 and kdalab_mixer_bwd_f64 (lib/train/mixer.c; twins
 * in mixer_f32.c) for the model, which has checked the config, the sizes,
 * theta (every weight) and made x and dy itself: the same computation and
 * errors (KDALAB_ERANGE when an intermediate overflows, KDALAB_ENOMEM)
 * without re-checking those inputs or the finished y and dx, whose
 * non-finite values reach the model's loss or gradient check. cache must
 * be non-NULL in the forward; g and dx may be NULL in the backward. */
kdalab_status kdalab__train_mixer_fwd_f64(const kdalab_mixer_config *cfg,
                                          const kdalab_mixer_params *p, size_t B, size_t T,
                                          const double *x, double *y, kdalab_mixer_cache **cache);
kdalab_status kdalab__train_mixer_fwd_f32(const kdalab_mixer_config *cfg,
                                          const kdalab_mixer_params_f32 *p, size_t B, size_t T,
                                          const float *x, float *y, kdalab_mixer_cache_f32 **cache);
kdalab_status kdalab__train_mixer_bwd_f64(const kdalab_mixer_config *cfg,
                                          const kdalab_mixer_params *p, size_t B, size_t T,
                                          const double *x, const kdalab_mixer_cache *cache,
                                          const double *dy, double *dx,
                                          const kdalab_mixer_grads *g);
kdalab_status kdalab__train_mixer_bwd_f32(const kdalab_mixer_config *cfg,
                                          const kdalab_mixer_params_f32 *p, size_t B, size_t T,
                                          const float *x, const kdalab_mixer_cache_f32 *cache,
                                          const float *dy, float *dx,
                                          const kdalab_mixer_grads_f32 *g);

/* exp(x) in float for the float32 twins of lib/train (scripts/make_f32.sh
 * writes train_expf where the float64 source says exp): the textbook range
 * reduction x = n ln 2 + r, |r| <= ln 2 / 2, then exp(r) by its Taylor
 * series to r^7 / 7! (truncation below 2^-27 relative) and 2^n put into the
 * exponent bits. No branch and no call, so a loop of it vectorises, and it
 * is the same function in the vector body and the scalar tail (libm's expf
 * is a call a loop cannot vectorise: 11 % of a d = 128 attention step).
 * Within 2 ulp of exp on [-87.3, 88.7] (tests/test_train_layers.c measures
 * it against exp in double); exp(-inf) and anything below -87.3 give 0
 * (true values under 1.2e-38), above 88.7 inf, NaN gives NaN. */
static inline float train_expf(float x)
{
    const float lo = -87.33654f, hi = 88.72283f; /* exp(lo) = FLT_MIN, exp(hi) = FLT_MAX */
    const float xc = x < lo ? lo : x > hi ? hi : x; /* NaN compares false: stays NaN */
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick: t's low bits hold n */
    const float shift = 12582912.0f, t = xc * 1.44269504088896341f + shift;
    const float n = t - shift;
    /* r = x - n ln 2 with ln 2 = 0.693359375 - 2.12194440e-4: the first part
     * has 9 bits, so n times it is exact */
    const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as 2^k 2^m, k + m = n, each in [-63, 64]: both normal floats, and
     * the result is rounded once, by the last product. Unsigned arithmetic:
     * for a NaN x the bits are garbage (the result is NaN anyway), and must
     * not overflow a signed int */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const int32_t n_i = (int32_t)(bits - 0x4B400000u), m = n_i / 2, k = n_i - m;
    const uint32_t bk = (uint32_t)(k + 127) << 23, bm = (uint32_t)(m + 127) << 23;
    float two_k, two_m;
    memcpy(&two_k, &bk, sizeof two_k);
    memcpy(&two_m, &bm, sizeof two_m);
    const float e = p * two_k * two_m;
    return x < lo ? 0.0f : x > hi ? INFINITY : e;
}

/* sigmoid(z) with one exponential, of a non-positive number, e = exp(-|z|):
 * 1 / (1 + e) for z >= 0, e / (1 + e) below. No branch, so a loop of it
 * vectorises; never exp of a positive number, so no overflow. The float32
 * form takes train_expf. Used by layers.c (SiLU, SwiGLU) and mixer.c (beta,
 * the output gate), and their twins. */
static inline double train_sigmoid_f64(double z)
{
    const double e = exp(-fabs(z));
    return (z >= 0 ? 1 : e) / (1 + e);
}

static inline float train_sigmoid_f32(float z)
{
    const float e = train_expf(-fabsf(z));
    return (z >= 0 ? 1 : e) / (1 + e);
}

/* Check cfg and fill *lay (and list[n_tensors] when not NULL, in layout
 * order). Errors as kdalab_model_size. */
kdalab_status kdalab__model_layout(const kdalab_model_config *cfg, model_layout_t *lay,
                                   kdalab_model_tensor *list);

/* A batch of B sequences of T tokens through the model holds B * T * max(D,
 * F, V) elements in one array, indexed by a CBLAS int: KDALAB_EOVERFLOW
 * past 2^31 - 1 (lib/train/model.c), else KDALAB_OK. cfg already checked. */
kdalab_status kdalab__model_check_batch(const kdalab_model_config *cfg, size_t B, size_t T);

#endif /* KDALAB_TRAIN_INTERNAL_H */
