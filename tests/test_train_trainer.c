/*
 * tests/test_train_trainer.c — the training loop (lib/train/trainer.c): training is
 * deterministic and learns a tiny task, on MQAR and on a caller's task; a
 * training program keeps its freed memory (lib/train/memory.c).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common.h"

/* Training: a function of its config, and it learns a tiny MQAR task that
 * chance cannot pass (4 pairs, 8 values: chance 1/8; 0.94 after 300 steps at
 * this learning rate when this was written, 0.25 after 150 at 3e-3). */
static void test_train_learns(void **state)
{
    (void)state;
    kdalab_train_config c;
    memset(&c, 0, sizeof c);
    c.task = (kdalab_mqar_config){.T = 16, .kv_pairs = 4, .key_vocab = 8, .value_vocab = 8};
    c.model = (kdalab_model_config){.vocab = 17, .D = 16, .H = 2, .L = 2, .F = 32, .conv = 1,
                                    .mixer = {KDALAB_MIXER_ATTENTION, KDALAB_MIXER_ATTENTION}};
    c.opt = (kdalab_adamw_config){1e-2, 1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0, 40, 400};
    c.batch = 16;
    c.test_sequences = 256;
    c.seed = 1;
    size_t P;
    assert_int_equal(kdalab_model_size(&c.model, &P, NULL), KDALAB_OK);
    double *t1 = malloc(P * sizeof *t1), *t2 = malloc(P * sizeof *t2);
    kdalab_train_result r1, r2;
    assert_int_equal(kdalab_train_mqar_f64(&c, t1, NULL, NULL, &r1), KDALAB_OK);
    assert_int_equal(kdalab_train_mqar_f64(&c, t2, NULL, NULL, &r2), KDALAB_OK);
    assert_memory_equal(t1, t2, P * sizeof *t1);
    assert_true(r1.test_accuracy == r2.test_accuracy);
    printf("    tiny MQAR (4 pairs, 8 values), attention, 400 steps: test accuracy %.3f\n",
           r1.test_accuracy);
    assert_true(r1.test_accuracy > 0.5);
    /* the float32 twin trains the same model to the same place */
    float *t32 = malloc(P * sizeof *t32);
    kdalab_train_result r32;
    assert_int_equal(kdalab_train_mqar_f32(&c, t32, NULL, NULL, &r32), KDALAB_OK);
    printf("    the same in float32: test accuracy %.3f\n", r32.test_accuracy);
    assert_true(r32.test_accuracy > 0.5);
    /* a test set whose token count overflows: refused before training (and
     * by evaluate itself), not evaluated batch after batch for ever */
    c.test_sequences = SIZE_MAX;
    assert_int_equal(kdalab_train_mqar_f64(&c, t1, NULL, NULL, &r1), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_train_mqar_f32(&c, t32, NULL, NULL, &r32), KDALAB_EOVERFLOW);
    double tl, ta;
    assert_int_equal(kdalab_model_evaluate_f64(&c.model, t2, &c.task, 1, SIZE_MAX, 32, &tl, &ta),
                     KDALAB_EOVERFLOW);
    c.test_sequences = 256;
    c.model.vocab = 18;
    assert_int_equal(kdalab_train_mqar_f64(&c, t1, NULL, NULL, &r1), KDALAB_ESIZE);
    free(t32);
    free(t1);
    free(t2);
}

/* A caller's task through kdalab_train_f64: "repeat the previous token"
 * (targets[t] = tokens[t - 1]), which one attention block with the short
 * convolution learns from nothing; a maker that fails stops training with
 * its status; MQAR through the generic loop is kdalab_train_mqar_f64 bit for
 * bit. */
typedef struct {
    size_t vocab;
    size_t fail_at;      /* make fails on this batch index (SIZE_MAX: never) */
    kdalab_status fail;  /* with this status                                 */
    unsigned long blank; /* a stream whose targets are all -1 (0: none)      */
} copy_task;

static kdalab_status copy_batch(void *user, unsigned long stream, size_t index, size_t B,
                                size_t T, int32_t *tok, int32_t *tgt)
{
    const copy_task *ct = user;
    if (index == ct->fail_at)
        return ct->fail;
    unsigned long x = stream * 2654435761UL + index * 40503UL + 1;
    for (size_t i = 0; i < B * T; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        tok[i] = (int32_t)((x >> 33) % ct->vocab);
        tgt[i] = i % T == 0 || stream == ct->blank ? -1 : tok[i - 1];
    }
    return KDALAB_OK;
}

static kdalab_status mqar_batch(void *user, unsigned long stream, size_t index, size_t B,
                                size_t T, int32_t *tok, int32_t *tgt)
{
    (void)T;
    return kdalab_mqar_make(user, stream, index, B, tok, tgt);
}

static void test_train_own_task(void **state)
{
    (void)state;
    kdalab_train_config c;
    memset(&c, 0, sizeof c);
    c.task.T = 12; /* only T is read */
    c.model = (kdalab_model_config){.vocab = 8, .D = 16, .H = 2, .L = 1, .F = 32, .conv = 1,
                                    .mixer = {KDALAB_MIXER_ATTENTION}};
    c.opt = (kdalab_adamw_config){1e-2, 1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0, 20, 200};
    c.batch = 8;
    c.test_sequences = 64;
    c.seed = 3;
    size_t P;
    assert_int_equal(kdalab_model_size(&c.model, &P, NULL), KDALAB_OK);
    double *th = malloc(P * sizeof *th), *t2 = malloc(P * sizeof *t2);
    copy_task ct = {8, SIZE_MAX, KDALAB_EDOMAIN, 0};
    kdalab_train_result r;
    assert_int_equal(kdalab_train_f64(&c, copy_batch, &ct, th, NULL, NULL, &r), KDALAB_OK);
    printf("    copy the previous token (vocab 8, chance 0.125), 200 steps: test accuracy "
           "%.3f\n", r.test_accuracy);
    assert_true(r.test_accuracy > 0.9);
    ct.fail_at = 5;
    assert_int_equal(kdalab_train_f64(&c, copy_batch, &ct, th, NULL, NULL, &r),
                     KDALAB_EDOMAIN);
    assert_non_null(strstr(kdalab_last_error(), "making batch 5 of stream 3"));
    /* the maker's NaN/overflow statuses are its own, not a divergence */
    ct.fail = KDALAB_ENONFINITE;
    assert_int_equal(kdalab_train_f64(&c, copy_batch, &ct, th, NULL, NULL, &r),
                     KDALAB_ENONFINITE);
    ct.fail_at = SIZE_MAX;
    /* a test set with nothing to count is refused, not scored 0 */
    ct.blank = kdalab_mqar_test_seed(c.seed);
    assert_int_equal(kdalab_train_f64(&c, copy_batch, &ct, th, NULL, NULL, &r), KDALAB_ESIZE);
    assert_non_null(strstr(kdalab_last_error(), "no target is counted"));
    ct.blank = 0;
    /* a token outside the vocabulary is the model's bad input, named */
    ct.fail_at = SIZE_MAX;
    ct.vocab = 9;
    kdalab_status st = kdalab_train_f64(&c, copy_batch, &ct, th, NULL, NULL, &r);
    assert_int_equal(st, KDALAB_EDOMAIN);
    assert_non_null(strstr(kdalab_last_error(), "outside [0, 8)"));
    ct.vocab = 8;
    assert_int_equal(kdalab_train_f64(&c, NULL, &ct, th, NULL, NULL, &r), KDALAB_ENULL);
    c.task.T = 0;
    assert_int_equal(kdalab_train_f64(&c, copy_batch, &ct, th, NULL, NULL, &r), KDALAB_ESIZE);
    /* MQAR through the generic loop is the MQAR trainer */
    c.task = (kdalab_mqar_config){.T = 16, .kv_pairs = 4, .key_vocab = 8, .value_vocab = 8};
    c.model.vocab = 17;
    c.opt.steps = 30;
    assert_int_equal(kdalab_model_size(&c.model, &P, NULL), KDALAB_OK); /* a larger vocab */
    free(th);
    free(t2);
    th = malloc(P * sizeof *th);
    t2 = malloc(P * sizeof *t2);
    kdalab_train_result r2;
    assert_int_equal(kdalab_train_f64(&c, mqar_batch, &c.task, th, NULL, NULL, &r), KDALAB_OK);
    assert_int_equal(kdalab_train_mqar_f64(&c, t2, NULL, NULL, &r2), KDALAB_OK);
    assert_memory_equal(th, t2, P * sizeof *th);
    assert_true(r.test_loss == r2.test_loss && r.test_accuracy == r2.test_accuracy);
    free(th);
    free(t2);
}

/* Minor page faults of this process so far. */
static long minor_faults(void)
{
    struct rusage u;
    assert_int_equal(getrusage(RUSAGE_SELF, &u), 0);
    return u.ru_minflt;
}

/* Allocate n bytes, write every byte, free them; the minor page faults it took. */
static long touch_once(size_t n)
{
    long before = minor_faults();
    unsigned char *p = malloc(n);
    assert_non_null(p);
    memset(p, 1, n);
    long faults = minor_faults() - before + (p[n - 1] != 1); /* keep the writes */
    free(p);
    return faults;
}

/* kdalab_train_keep_memory: freed memory stays in the process. A 16 MB
 * buffer (4096 pages of 4 KB) freed and allocated again is written the second
 * time with fewer than 256 page faults. Without the call glibc maps the first
 * one afresh (above its 128 KB mmap threshold) and the second from new heap
 * pages: 4096 faults each time. Runs first, before other tests' large frees
 * move glibc's own thresholds. */
static void test_keep_memory_reuses_pages(void **state)
{
    (void)state;
#if TEST_UNDER_ASAN
    skip(); /* AddressSanitizer's allocator ignores mallopt */
#elif defined(__GLIBC__)
    assert_int_equal(kdalab_train_keep_memory(), 1);
    const size_t n = (size_t)16 << 20;
    (void)touch_once(n); /* the first time takes its faults: fresh pages */
    long second = touch_once(n);
    if (second >= 256)
        fail_msg("a freed 16 MB buffer took %ld page faults when allocated again", second);
#else
    assert_int_equal(kdalab_train_keep_memory(), 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_memory_reuses_pages),
        cmocka_unit_test(test_train_learns),
        cmocka_unit_test(test_train_own_task),
    };
    return cmocka_run_group_tests_name("train_trainer", tests, NULL, NULL);
}
