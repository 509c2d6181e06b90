/*
 * lib/train/trainer.c — the training loop: initialise, then per step a fresh
 * batch from a batch maker, the loss and gradient (kdalab_model_loss_f64),
 * one AdamW step; at the end the test set. MQAR (kdalab_mqar_make) is one
 * batch maker; a caller's task is another. Also the evaluation on its own,
 * for a trained theta.
 *
 * defines: kdalab_train_f64, kdalab_train_mqar_f64, kdalab_model_evaluate_f64
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "train_internal.h"

static double now_s(void) /* f64-scalar */
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec; /* f64-scalar */
}

/* MQAR as a batch maker: user is the kdalab_mqar_config. */
static kdalab_status mqar_batch(void *user, unsigned long stream, size_t index, size_t B,
                                size_t T, int32_t *tok, int32_t *tgt)
{
    (void)T; /* the task's own */
    return kdalab_mqar_make(user, stream, index, B, tok, tgt);
}

/* make's batch, with its failure named: which batch, and why (its own
 * message when it set one through the library, else the status's). */
static kdalab_status make_batch(kdalab_batch_fn make, void *user, unsigned long stream,
                                size_t index, size_t B, size_t T, int32_t *tok, int32_t *tgt)
{
    kdalab_clear_error();
    kdalab_status s = make(user, stream, index, B, T, tok, tgt);
    if (s == KDALAB_OK)
        return s;
    char why[256];
    snprintf(why, sizeof why, "%s", *kdalab_last_error() ? kdalab_last_error()
                                                          : kdalab_strerror(s));
    return kdalab_fail(s, "train: making batch %zu of stream %lu: %s", index, stream, why);
}

/* Loss and accuracy of theta on n sequences of `make`'s stream `seed`, in
 * batches of up to `batch`. *made (may be NULL): 0 when make failed. */
static kdalab_status evaluate(const kdalab_model_config *model, const double *theta,
                              kdalab_batch_fn make, void *make_user, size_t T,
                              unsigned long seed, size_t n, size_t batch, double *loss,
                              double *accuracy, int *made)
{
    if (made)
        *made = 1;
    if (n == 0 || batch == 0)
        return kdalab_fail(KDALAB_ESIZE, "evaluate: n = %zu, batch = %zu: each must be >= 1",
                           n, batch);
    const size_t b = batch < n ? batch : n;
    size_t tokens, bytes; /* the whole test set's tokens, one batch's bytes */
    if (!kdalab_mul_size(n, T, &tokens) || !kdalab_mul_size(b * T, sizeof(int32_t), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "evaluate: n = %zu sequences of T = %zu tokens overflow size_t", n, T);
    int32_t *tok = malloc(bytes), *tgt = malloc(bytes);
    kdalab_status s = tok && tgt ? KDALAB_OK
                                 : kdalab_fail(KDALAB_ENOMEM, "evaluate: cannot allocate");
    double sum_l = 0, sum_a = 0;
    size_t weight = 0; /* rows of the batches with a counted target */
    for (size_t done = 0, i = 0; done < n && s == KDALAB_OK; i++) {
        const size_t rows = n - done < b ? n - done : b;
        double l = 0, a = 0;
        s = make_batch(make, make_user, seed, i, rows, T, tok, tgt);
        if (s != KDALAB_OK && made)
            *made = 0;
        if (s == KDALAB_OK)
            s = kdalab_model_loss_f64(model, theta, rows, T, tok, tgt, &l, &a, NULL);
        size_t counted = 0;
        for (size_t x = 0; s == KDALAB_OK && x < rows * T && !counted; x++)
            counted = tgt[x] >= 0;
        /* weighed by rows: every sequence has the same number of counted targets
         * in MQAR; for another task, the mean of per-batch means, a batch
         * with nothing counted left out (its loss would read 0) */
        if (counted) {
            sum_l += l * (double)rows;
            sum_a += a * (double)rows;
            weight += rows;
        }
        done += rows;
    }
    free(tok);
    free(tgt);
    if (s == KDALAB_OK && weight == 0)
        s = kdalab_fail(KDALAB_ESIZE, "evaluate: no target is counted in %zu test sequences", n);
    if (s != KDALAB_OK)
        return s;
    if (loss)
        *loss = sum_l / (double)weight;
    if (accuracy)
        *accuracy = sum_a / (double)weight;
    return KDALAB_OK;
}

kdalab_status kdalab_model_evaluate_f64(const kdalab_model_config *model, const double *theta,
                                    const kdalab_mqar_config *task, unsigned long seed,
                                    size_t n, size_t batch, double *loss, double *accuracy)
{
    kdalab_clear_error();
    if (!task)
        return kdalab_fail(KDALAB_ENULL, "evaluate: task is NULL");
    return evaluate(model, theta, mqar_batch, (void *)task, task->T, seed, n, batch, loss,
                    accuracy, NULL);
}

/* The test set is drawn in batches of this many sequences whatever the
 * training batch, so runs that differ only in --batch meet the same test. */
#define TEST_BATCH 32

/* The divergence of a run, as KDALAB_ERANGE, keeping what the step said. */
static kdalab_status diverged(const char *where, size_t step)
{
    char why[256]; /* kdalab_fail formats into the buffer kdalab_last_error reads */
    snprintf(why, sizeof why, "%s", kdalab_last_error());
    return kdalab_fail(KDALAB_ERANGE, "train: diverged at %s %zu (%s)", where, step, why);
}

/* One decay flag per parameter, from the tensors' own. */
static unsigned char *decay_mask(const kdalab_model_config *model, size_t P, size_t n_tensors)
{
    model_layout_t lay;
    unsigned char *mask = calloc(P, 1);
    kdalab_model_tensor *list = malloc(n_tensors * sizeof *list);
    if (mask && list && kdalab__model_layout(model, &lay, list) == KDALAB_OK) {
        for (size_t i = 0; i < n_tensors; i++)
            memset(mask + list[i].offset, list[i].decay, list[i].rows * list[i].cols);
    } else {
        free(mask);
        mask = NULL;
    }
    free(list);
    return mask;
}

kdalab_status kdalab_train_f64(const kdalab_train_config *cfg, kdalab_batch_fn make,
                           void *make_user, double *theta, kdalab_train_callback cb,
                           void *user, kdalab_train_result *result)
{
    kdalab_clear_error();
    if (!cfg || !make || !theta || !result)
        return kdalab_fail(KDALAB_ENULL, "train: %s is NULL",
                           !cfg ? "config" : !make ? "make" : !theta ? "theta" : "result");
    size_t P, n_tensors;
    kdalab_status s = kdalab_model_size(&cfg->model, &P, &n_tensors);
    if (s == KDALAB_OK)
        s = kdalab_adamw_lr(&cfg->opt, 0, &(double){0}); /* f64-scalar */
    if (s != KDALAB_OK)
        return s;
    if (cfg->batch == 0 || cfg->test_sequences == 0 || cfg->task.T == 0)
        return kdalab_fail(KDALAB_ESIZE, "train: batch = %zu, test_sequences = %zu, T = %zu: "
                           "each must be >= 1", cfg->batch, cfg->test_sequences, cfg->task.T);
    const size_t B = cfg->batch, T = cfg->task.T;
    size_t test_tokens;
    if (!kdalab_mul_size(cfg->test_sequences, T, &test_tokens))
        return kdalab_fail(KDALAB_EOVERFLOW, "train: test_sequences = %zu of T = %zu tokens "
                           "overflow size_t", cfg->test_sequences, T);
    s = kdalab__model_check_batch(&cfg->model, B, T);
    if (s != KDALAB_OK)
        return s; /* before anything is allocated or theta is written */
    double *grad = malloc(P * sizeof *grad), *m = calloc(P, sizeof *m), *v = calloc(P, sizeof *v);
    int32_t *tok = malloc(B * T * sizeof *tok), *tgt = malloc(B * T * sizeof *tgt);
    unsigned char *mask = decay_mask(&cfg->model, P, n_tensors);
    if (!grad || !m || !v || !tok || !tgt || !mask)
        s = kdalab_fail(KDALAB_ENOMEM, "train: cannot allocate the optimiser state");
    /* kdalab_model_init writes float64 (the float32 twin converts) */
    double *init = s == KDALAB_OK ? malloc(P * sizeof *init) : NULL; /* f64-scalar */
    if (s == KDALAB_OK && !init)
        s = kdalab_fail(KDALAB_ENOMEM, "train: cannot allocate the initial parameters");
    if (s == KDALAB_OK)
        s = kdalab_model_init(&cfg->model, cfg->seed, init);
    for (size_t i = 0; s == KDALAB_OK && i < P; i++)
        theta[i] = init[i];
    free(init);
    const double t0 = now_s(); /* f64-scalar */
    double loss = 0, acc = 0;
    for (size_t step = 0; step < cfg->opt.steps && s == KDALAB_OK; step++) {
        s = make_batch(make, make_user, cfg->seed, step, B, T, tok, tgt);
        if (s != KDALAB_OK)
            break; /* the maker's own status, not a divergence */
        s = kdalab_model_loss_f64(&cfg->model, theta, B, T, tok, tgt, &loss, &acc, grad);
        if (s == KDALAB_ERANGE || s == KDALAB_ENONFINITE) {
            s = diverged("step", step);
            break;
        }
        kdalab_train_progress pr = {step + 1, cfg->opt.steps, loss, acc, 0, 0, 0, 0};
        if (s == KDALAB_OK)
            s = kdalab_adamw_lr(&cfg->opt, step, &pr.lr);
        if (s == KDALAB_OK)
            s = kdalab_adamw_step_f64(&cfg->opt, step, P, theta, grad, m, v, mask,
                                      &pr.grad_norm);
        if (s == KDALAB_ERANGE || s == KDALAB_ENONFINITE) {
            s = diverged("AdamW step", step);
            break;
        }
        pr.seconds = now_s() - t0;
        pr.tokens_per_s = (double)(B * T * (step + 1)) / (pr.seconds > 0 ? pr.seconds : 1e-9);
        if (s == KDALAB_OK && cb && cb(&pr, user))
            s = kdalab_fail(KDALAB_EINVAL, "train: stopped by the callback at step %zu",
                            step + 1);
    }
    kdalab_train_result r = {0};
    r.train_loss = loss;
    r.seconds = now_s() - t0;
    r.tokens_per_s = (double)(B * T * cfg->opt.steps) / (r.seconds > 0 ? r.seconds : 1e-9);
    double test_loss = 0, test_acc = 0;
    if (s == KDALAB_OK) {
        int made;
        s = evaluate(&cfg->model, theta, make, make_user, T, kdalab_mqar_test_seed(cfg->seed),
                     cfg->test_sequences, TEST_BATCH, &test_loss, &test_acc, &made);
        if (made && (s == KDALAB_ERANGE || s == KDALAB_ENONFINITE))
            s = diverged("the test set after step", cfg->opt.steps);
    }
    r.test_loss = test_loss;
    r.test_accuracy = test_acc;
    free(grad); free(m); free(v); free(tok); free(tgt); free(mask);
    if (s != KDALAB_OK)
        return s;
    *result = r;
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_train_mqar_f64(const kdalab_train_config *cfg, double *theta,
                                kdalab_train_callback cb, void *user,
                                kdalab_train_result *result)
{
    kdalab_clear_error();
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "train: config is NULL");
    size_t vocab;
    kdalab_status s = kdalab_mqar_vocab_size(&cfg->task, &vocab, NULL);
    if (s != KDALAB_OK)
        return s;
    if (cfg->model.vocab != vocab)
        return kdalab_fail(KDALAB_ESIZE, "train: model vocab %zu, task vocab %zu (must match)",
                           cfg->model.vocab, vocab);
    return kdalab_train_f64(cfg, mqar_batch, (void *)&cfg->task, theta, cb, user, result);
}
