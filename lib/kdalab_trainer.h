/*
 * kdalab_trainer.h — the training loop (lib/train/trainer.c), on MQAR or a
 * caller's batches, and evaluation, in float64 and float32.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_TRAINER_H
#define KDALAB_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"
#include "kdalab_mqar.h"
#include "kdalab_model.h"
#include "kdalab_adamw.h"

KDALAB_BEGIN_DECLS

typedef struct {
    kdalab_model_config model;  /* model.vocab must be the task's vocabulary  */
    kdalab_mqar_config task;    /* kdalab_train_f64 reads only task.T          */
    kdalab_adamw_config opt;    /* opt.steps is the number of steps trained   */
    size_t batch;               /* sequences per step, >= 1                   */
    size_t test_sequences;      /* size of the test set, >= 1                 */
    unsigned long seed;         /* initialisation, training and test data     */
} kdalab_train_config;

/* What a progress callback sees, after each step. */
typedef struct {
    size_t step, steps;    /* steps done (1-based) of steps                  */
    double loss, accuracy; /* this step's training batch                     */
    double lr, grad_norm;  /* this step's learning rate, gradient norm       */
    double seconds;        /* wall time since training began                 */
    double tokens_per_s;   /* B * T * step / seconds                         */
} kdalab_train_progress;

/* Called after every step; a non-zero return stops training (status
 * KDALAB_EINVAL, "stopped by the callback"). */
typedef int (*kdalab_train_callback)(const kdalab_train_progress *p, void *user);

/* The result of a run. */
typedef struct {
    double test_loss, test_accuracy;   /* on the test set, after training   */
    double train_loss;                 /* the last step's batch             */
    double seconds, tokens_per_s;      /* training only (not the test)      */
} kdalab_train_result;

/*
 * A batch maker: batch `index` of the stream `stream`, B sequences of T tokens:
 *   tokens [B, T] in [0, model.vocab); targets [B, T], the token to predict
 *   at each position or -1 where the loss does not count it
 * A function of (stream, index, B) alone, so a run is a function of its
 * seed. Returns KDALAB_OK or a status that stops training with it.
 * kdalab_mqar_make is one (the trainer wraps it); user is the caller's.
 */
typedef kdalab_status (*kdalab_batch_fn)(void *user, unsigned long stream, size_t index,
                                         size_t B, size_t T, int32_t *tokens, int32_t *targets);

/*
 * kdalab_train_f64 — train a model from kdalab_model_init(cfg->seed) on the
 * batches make(make_user, cfg->seed, step, cfg->batch, T = cfg->task.T) with
 * AdamW (matrices decayed; norms, biases, A_log, dt_bias, convolutions not),
 * then measure it on cfg->test_sequences sequences of the stream
 * kdalab_mqar_test_seed(cfg->seed), made 32 at a time (batch means weighted by rows).
 *   theta [n_params of cfg->model]: the trained parameters on return
 * Errors, theta untouched: KDALAB_ENULL (cfg, make, theta, result), KDALAB_ESIZE (batch,
 * test_sequences or T zero), those of kdalab_train_mqar_f64; once training has begun
 * (theta written): make's own status, the loss's (a token or target out of range). */
kdalab_status kdalab_train_f64(const kdalab_train_config *cfg, kdalab_batch_fn make,
                           void *make_user, double *theta, kdalab_train_callback cb,
                           void *user, kdalab_train_result *result);

/*
 * kdalab_train_mqar_f64 — kdalab_train_f64 on MQAR: train a model from
 * kdalab_model_init(cfg->seed) on training batches kdalab_mqar_make(task,
 * seed, step, batch) with AdamW (matrices decayed, other tensors not), then
 * measure it on the test set:
 * test_sequences sequences of the stream kdalab_mqar_test_seed(seed).
 *   theta [n_params of cfg->model]: the trained parameters on return
 * The result is a function of cfg alone (not of the thread count or the
 * batch's effect on the test draw: the test set is drawn 32 sequences at a
 * time whatever cfg->batch). Errors, with theta untouched: those of the
 * pieces' checks, KDALAB_ENULL (cfg, theta, result), KDALAB_ESIZE (batch or
 * test_sequences zero, model.vocab not the task's), KDALAB_EOVERFLOW (batch *
 * T * the widest layer beyond a CBLAS int), KDALAB_ENOMEM. Once training has
 * begun, theta holds the parameters of the step it stopped at:
 * KDALAB_EINVAL (stopped by the callback: an early stop), KDALAB_ERANGE
 * (training diverged: a non-finite loss, gradient, update or test loss).
 */
kdalab_status kdalab_train_mqar_f64(const kdalab_train_config *cfg, double *theta,
                                kdalab_train_callback cb, void *user,
                                kdalab_train_result *result);

/*
 * kdalab_train_cost — what a training run will cost, from its sizes alone,
 * before anything is allocated: *train_ops and *test_ops the floating-point
 * operations of training (cfg->opt.steps steps of cfg->batch sequences of
 * cfg->task.T tokens) and of the test (cfg->test_sequences sequences), and
 * *bytes the least memory it needs (the parameters with their gradient,
 * AdamW's two moments and the initial copy, and one batch's cached
 * activations and logits). Any pointer but cfg may be NULL. An estimate to
 * refuse runs that cannot finish (kdalab train refuses above 1e16
 * operations), not a count: per token, a step costs about 6 P operations
 * for the P weights plus each block's sequence part (4 T D for attention,
 * 16 D d for a linear mixer's state), a test sequence a third of that.
 * Errors: KDALAB_ENULL (cfg), those of kdalab_model_size.
 */
kdalab_status kdalab_train_cost(const kdalab_train_config *cfg, double *train_ops,
                                double *test_ops, double *bytes);

/*
 * kdalab_model_evaluate_f64 — loss and accuracy of theta on n sequences of the
 * MQAR stream `seed`, in batches of up to `batch` (batch_index 0, 1, ...).
 * Errors: those of kdalab_model_loss_f64 and kdalab_mqar_make, KDALAB_ESIZE
 * (n or batch zero).
 */
kdalab_status kdalab_model_evaluate_f64(const kdalab_model_config *model, const double *theta,
                                    const kdalab_mqar_config *task, unsigned long seed,
                                    size_t n, size_t batch, double *loss, double *accuracy);

/* float32 (lib/train/trainer_f32.c, generated): theta float32 on return. */
kdalab_status kdalab_model_evaluate_f32(const kdalab_model_config *model, const float *theta,
                                        const kdalab_mqar_config *task, unsigned long seed,
                                        size_t n, size_t batch, float *loss, float *accuracy);
kdalab_status kdalab_train_f32(const kdalab_train_config *cfg, kdalab_batch_fn make,
                               void *make_user, float *theta, kdalab_train_callback cb,
                               void *user, kdalab_train_result *result);
kdalab_status kdalab_train_mqar_f32(const kdalab_train_config *cfg, float *theta,
                                    kdalab_train_callback cb, void *user,
                                    kdalab_train_result *result);

/*
 * kdalab_train_keep_memory — call once in main() of a program that trains,
 * before it allocates much. A training step allocates its activations and
 * gradients and frees them at its end (lib/train/model_loss.c, the mixers'
 * caches, the SIMD path's workspaces). glibc maps a buffer above its mmap
 * threshold afresh and unmaps it when freed, and hands a freed heap top
 * above its trim threshold back to the kernel; it raises both thresholds as
 * it sees large frees, but the trim threshold only to twice the largest
 * buffer, so a step that frees more than that in all gives its pages back
 * and the next step takes a page fault per 4 KB it touches again. This sets
 * glibc's mmap threshold to 32 MiB (the largest it accepts on a 64-bit
 * system, and where its own adjustment stops) and its trim threshold to
 * 256 MiB (mallopt; that also stops the adjustment): a step's buffers below
 * 32 MiB then stay in the process and the next step reuses them. A buffer
 * of 32 MiB or more is still mapped and unmapped each time. Nothing computed
 * changes; the peak memory stays that of one step. On an AMD Zen 5 VM
 * (faults of about 3 us each) it took `bench_train --config d128 --repeat
 * 3`'s page faults from 0.73-0.99 M to 65 K and its system time from
 * 5.6-7.6 s to 0.6 s (bench/README.md). Settings a caller made with mallopt
 * or glibc's MALLOC_ variables before are overwritten. Returns 1 when both
 * settings took effect, 0 otherwise (not glibc, a sanitizer's allocator, or
 * glibc refused a value).
 */
int kdalab_train_keep_memory(void);

KDALAB_END_DECLS

#endif /* KDALAB_TRAINER_H */
