/*
 * lib/train/train_internal.h — what lib/train's files share: the model's
 * layout (lib/train/model.c builds it, model_loss.c and trainer.c read it)
 * the CBLAS wrappers of matmul.c and the matrix-form attention of attention.c. Not installed, not exported.
 */
#ifndef KDALAB_TRAIN_INTERNAL_H
#define KDALAB_TRAIN_INTERNAL_H

#include <stddef.h>
#include "kdalab.h"

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
    int overflow; /* a tensor or the total did not fit (model_layout refuses it) */
} model_layout_t;

/* Causal softmax attention (NoPE) and its backward in matrix form, a tile of
 * queries at a time through CBLAS (lib/train/attention.c; the float32 twin
 * in attention_f32.c): the same function as kdalab_attention_f64 and
 * kdalab_attention_bwd_f64 for the model's heads (dims->K == dims->V). q, k,
 * dq, dk are (B, T, H, K); v, o, d_o, dv are (B, T, H, V); the backward takes
 * the forward's output o and writes all three gradients (none may be NULL).
 * The inputs are the mixer's, already finite; KDALAB_ERANGE when a score or
 * gradient overflows, KDALAB_ENOMEM. */
kdalab_status train_attention_fwd_f64(const kdalab_dims *dims, double scale, const double *q,
                                      const double *k, const double *v, double *o);
kdalab_status train_attention_fwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                      const float *k, const float *v, float *o);
kdalab_status train_attention_bwd_f64(const kdalab_dims *dims, double scale, const double *q,
                                      const double *k, const double *v, const double *o,
                                      const double *d_o, double *dq, double *dk, double *dv);
kdalab_status train_attention_bwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                      const float *k, const float *v, const float *o,
                                      const float *d_o, float *dq, float *dk, float *dv);

/* C [m, n] (+)= A [m, k] B [k, n] (+ when accumulate), row-major, through
 * CBLAS (lib/train/matmul.c; the float32 twin in matmul_f32.c). */
void train_mm_f64(size_t m, size_t k, size_t n, const double *A, const double *B, double *C,
                  int accumulate);
void train_mm_f32(size_t m, size_t k, size_t n, const float *A, const float *B, float *C,
                  int accumulate);

/* The backward of Y = X W, X [m, k], W [k, n], given dY [m, n]: dW [k, n] =
 * X^T dY and dX [m, k] = dY W^T (added to dX when accumulate); either
 * output may be NULL and is then skipped (X is read only for dW, W only
 * for dX). */
void train_mm_bwd_f64(size_t m, size_t k, size_t n, const double *X, const double *W,
                      const double *dY, double *dW, double *dX, int accumulate);
void train_mm_bwd_f32(size_t m, size_t k, size_t n, const float *X, const float *W,
                      const float *dY, float *dW, float *dX, int accumulate);

/* Check cfg and fill *lay (and list[n_tensors] when not NULL, in layout
 * order). Errors as kdalab_model_size. */
kdalab_status model_layout(const kdalab_model_config *cfg, model_layout_t *lay,
                           kdalab_model_tensor *list);

/* A batch of B sequences of T tokens through the model holds B * T * max(D,
 * F, V) elements in one array, indexed by a CBLAS int: KDALAB_EOVERFLOW
 * past 2^31 - 1 (lib/train/model.c), else KDALAB_OK. cfg already checked. */
kdalab_status model_check_batch(const kdalab_model_config *cfg, size_t B, size_t T);

#endif /* KDALAB_TRAIN_INTERNAL_H */
