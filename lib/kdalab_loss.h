/*
 * kdalab_loss.h — the softmax cross-entropy loss (lib/train/loss.c),
 * forward and backward, in float64 and float32.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_LOSS_H
#define KDALAB_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/*
 * kdalab_cross_entropy_fwd_f64 — softmax cross-entropy over a vocabulary of
 * V at the N positions whose target is not -1:
 *   loss     = mean over counted n of  logsumexp(logits[n]) - logits[n][targets[n]]
 *   accuracy = the fraction of counted n whose argmax (the first, on ties)
 *              is targets[n]
 *   logits [N, V]; targets [N], each -1 or in [0, V)
 * *counted (may be NULL) gets the number of counted positions; with none,
 * loss and accuracy are 0. accuracy may be NULL. Backward, for the
 * upstream gradient dloss = dL/dloss:
 *   dlogits[n] = dloss / counted * (softmax(logits[n]) - onehot(targets[n]))
 *   at counted n, 0 at the others.
 * Errors: KDALAB_ESIZE (V = 0), KDALAB_EOVERFLOW, KDALAB_ENULL,
 * KDALAB_ENONFINITE (logits, dloss), KDALAB_EDOMAIN (a target outside
 * [0, V) other than -1).
 */
kdalab_status kdalab_cross_entropy_fwd_f64(size_t N, size_t V, const double *logits,
                                           const int32_t *targets, double *loss,
                                           double *accuracy, size_t *counted);
kdalab_status kdalab_cross_entropy_bwd_f64(size_t N, size_t V, const double *logits,
                                           const int32_t *targets, double dloss,
                                           double *dlogits);

/* float32 (lib/train/loss_f32.c, generated). */
kdalab_status kdalab_cross_entropy_fwd_f32(size_t N, size_t V, const float *logits,
                                           const int32_t *targets, float *loss, float *accuracy,
                                           size_t *counted);
kdalab_status kdalab_cross_entropy_bwd_f32(size_t N, size_t V, const float *logits,
                                           const int32_t *targets, float dloss, float *dlogits);

KDALAB_END_DECLS

#endif /* KDALAB_LOSS_H */
