/*
 * lib/train/train_internal.h — what lib/train's files share: the model's
 * layout (lib/train/model.c builds it, model_loss.c and trainer.c read it)
 * the CBLAS wrappers of matmul.c, the unchecked kernels of layers.c and
 * mixer.c that the model calls, and the sigmoid of layers.c and mixer.c
 * (the float32 twins' vectorisable exp and the per-instruction-set clones
 * are lib/core/vectorise.h's). Not installed, not exported.
 */
#ifndef KDALAB_TRAIN_INTERNAL_H
#define KDALAB_TRAIN_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <gsl/gsl_rng.h>

#include "kdalab.h"
#include "vectorise.h" /* TRAIN_CLONES, train_expf */

/* The training model's constants, which the hybrid stack running a trained
 * model (lib/model/forward.c) shares. */
#define TRAIN_CONV_W 4       /* the short convolution's width (fla's ShortConvolution) */
#define TRAIN_NORM_EPS 1e-6  /* the blocks' and the final RMSNorm (fla's model default) */
#define TRAIN_L2_EPS 1e-6    /* the linear mixers' L2 norm of q and k (fla's l2norm)    */
#define TRAIN_ONORM_EPS 1e-5 /* the linear mixers' output norm (fla's KDA norm_eps)    */

/* Whether block l's mixer has the short convolution: conv on and l not
 * in conv_off (kdalab_model_config). */
static inline int train_block_conv(const kdalab_model_config *cfg, size_t l)
{
    return cfg->conv && !(l < 64 && (cfg->conv_off >> l & 1));
}

/* The mechanism a linear mixer runs: the table's row kind - 1 (attention
 * has none: linear attention's is returned for it). */
static inline kdalab_mechanism train_mechanism_of(kdalab_mixer_kind kind)
{
    return kind == KDALAB_MIXER_ATTENTION ? KDALAB_LINEAR_ATTENTION
                                          : (kdalab_mechanism)((int)kind - 1);
}

/* The shape of a mixer's log-decay (KDALAB_G_NONE for attention and the
 * mechanisms without a decay): a per-head gate projects x Wa [D, H], a
 * per-key one x Wg Wg2 [D, d] [d, D]. */
static inline kdalab_g_shape train_g_shape_of(kdalab_mixer_kind kind)
{
    return kind == KDALAB_MIXER_ATTENTION ? KDALAB_G_NONE
                                          : kdalab_mechanism_g_shape(train_mechanism_of(kind));
}

/* A row the training mixer does not serve: the DPLR boundary, whose a, b
 * would need projections of their own (kdalab_mechanism_has_ab). */
static inline int train_unserved(kdalab_mixer_kind kind)
{
    return kind != KDALAB_MIXER_ATTENTION && kdalab_mechanism_has_ab(train_mechanism_of(kind));
}

/* Does the mixer write with the delta rule (and so project beta, x Wb)? */
static inline int train_has_beta(kdalab_mixer_kind kind)
{
    return kind != KDALAB_MIXER_ATTENTION &&
           kdalab_mechanism_has_delta(train_mechanism_of(kind));
}

/* The mixer's tensors, in kdalab_mixer_params' order. */
enum { MIX_WQ, MIX_WK, MIX_WV, MIX_WO, MIX_CQ, MIX_CK, MIX_CV,
       MIX_WB, MIX_WA, MIX_WG, MIX_WG2, MIX_ALOG, MIX_DTB, MIX_WOG, MIX_ONORM,
       MIX_WOG2, MIX_BOG, MIX_N };

/* Element counts of a linear mixer's output-gate tensors Wog, Wog2, bog
 * under cfg (0: unused; attention's are 0). cfg checked. */
static inline void train_outgate_sizes(const kdalab_mixer_config *cfg, size_t n[3])
{
    const int on = cfg->kind != KDALAB_MIXER_ATTENTION && cfg->gate != KDALAB_OUTPUT_GATE_NONE;
    const size_t r = cfg->gate_rank;
    n[0] = on ? cfg->D * (r ? r : cfg->D) : 0;
    n[1] = on ? r * cfg->D : 0;
    n[2] = on && r ? cfg->D : 0;
}

/* The output gate of the linear mixers (lib/train/outgate.c; twin in
 * outgate_f32.c), for the rows x [N, D] (the mixer's input) when cfg has a
 * gate (cfg->gate is not KDALAB_OUTPUT_GATE_NONE):
 *   z = x Wog                      [N, D]   gate_rank 0
 *   z = (x Wog) Wog2 + bog         [N, D]   gate_rank r: xr = x Wog [N, r] kept
 *   s = sigmoid(z) or swish(z) = z sigmoid(z)
 * Unchecked (the mixer's and the hybrid stack's arrays and sizes). The
 * backward, given the forward's xr, z, s and ds = dL/ds [N, D]: writes dz =
 * dL/dz [N, D] (dz may be ds: it is overwritten element by element) and
 * dxr [N, r] (scratch), dWog, dWog2, dbog (each skipped when NULL), and
 * adds dL/dx into dx (skipped when NULL). */
void kdalab__train_outgate_fwd_f64(const kdalab_mixer_config *cfg, size_t N, const double *x,
                                   const double *Wog, const double *Wog2, const double *bog,
                                   double *xr, double *z, double *s);
void kdalab__train_outgate_fwd_f32(const kdalab_mixer_config *cfg, size_t N, const float *x,
                                   const float *Wog, const float *Wog2, const float *bog,
                                   float *xr, float *z, float *s);
void kdalab__train_outgate_bwd_f64(const kdalab_mixer_config *cfg, size_t N, const double *x,
                                   const double *Wog, const double *Wog2, const double *xr,
                                   const double *z, const double *s, const double *ds,
                                   double *dz, double *dxr, double *dWog, double *dWog2,
                                   double *dbog, double *dx);
void kdalab__train_outgate_bwd_f32(const kdalab_mixer_config *cfg, size_t N, const float *x,
                                   const float *Wog, const float *Wog2, const float *xr,
                                   const float *z, const float *s, const float *ds,
                                   float *dz, float *dxr, float *dWog, float *dWog2,
                                   float *dbog, float *dx);

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

/* The palindrome and stack tasks (lib/train/tasks.c; layouts in
 * lib/kdalab_mqar.h), for lib/train/mqar.c. kdalab__task_rules: the task's
 * own rules for cfg (its task PALINDROME or STACK, the common rules already
 * checked), *n_scored the scored positions per sequence.
 * kdalab__task_work: the size_t scratch a sequence of cfg's task needs.
 * The sequence makers write one sequence, tokens and targets [T], drawing
 * from rng; cfg checked, work [kdalab__task_work(cfg)]. */
kdalab_status kdalab__task_rules(const kdalab_mqar_config *cfg, size_t *n_scored);
size_t kdalab__task_work(const kdalab_mqar_config *cfg);
void kdalab__palindrome_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, int32_t *tokens,
                                 int32_t *targets);
void kdalab__stack_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, size_t *work,
                            int32_t *tokens, int32_t *targets);

#endif /* KDALAB_TRAIN_INTERNAL_H */
