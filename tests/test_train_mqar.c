/*
 * tests/test_train_mqar.c — the recall layouts' promises (lib/train/mqar.c;
 * the other tasks and the names are tests/test_train_tasks.c's): for the
 * dense layout determinism, pairs before queries, distinct keys, every query answered by
 * its pair, targets only at queries, bad configs; the Zoology layouts
 * (zoology, overwrite, recent): distinct values, the latest binding as the
 * answer, queries at even offsets with power-law gaps, random filler.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "train/train_internal.h"

#define FD_TOL 1e-7
#define FD_STEP 1e-5
#define SENTINEL 12345.0

static void mqar_alloc(size_t B, size_t T, int32_t **tok, int32_t **tgt)
{
    *tok = malloc(B * T * sizeof **tok);
    *tgt = malloc(B * T * sizeof **tgt);
    assert_true(*tok && *tgt);
}

/* Every promise of kdalab_train.h about one batch; returns the query count. */
static size_t mqar_check_batch(const kdalab_mqar_config *cfg, size_t B, const int32_t *tok,
                               const int32_t *tgt, size_t want_queries)
{
    size_t T = cfg->T, P = cfg->kv_pairs, Kv = cfg->key_vocab, Vv = cfg->value_vocab;
    int32_t k_lo = 1, k_hi = (int32_t)(1 + Kv), v_hi = (int32_t)(1 + Kv + Vv);
    size_t total = 0;
    for (size_t b = 0; b < B; b++) {
        const int32_t *x = tok + b * T, *y = tgt + b * T;
        for (size_t p = 0; p < P; p++) {
            assert_true(x[2 * p] >= k_lo && x[2 * p] < k_hi);        /* a key   */
            assert_true(x[2 * p + 1] >= k_hi && x[2 * p + 1] < v_hi); /* a value */
            assert_int_equal(y[2 * p], -1);
            assert_int_equal(y[2 * p + 1], -1);
            for (size_t q = 0; q < p; q++) /* distinct keys */
                assert_true(x[2 * q] != x[2 * p]);
        }
        size_t queries = 0;
        for (size_t t = 2 * P; t < T; t++) {
            if (x[t] == 0) { /* filler: no target */
                assert_int_equal(y[t], -1);
                continue;
            }
            /* a query: a key of an earlier pair, answered by that pair's value,
             * and no key asked twice */
            assert_true(x[t] >= k_lo && x[t] < k_hi);
            size_t p = 0;
            while (p < P && x[2 * p] != x[t])
                p++;
            assert_true(p < P);
            assert_int_equal(y[t], x[2 * p + 1]);
            for (size_t u = 2 * P; u < t; u++)
                assert_true(x[u] != x[t]);
            queries++;
        }
        assert_int_equal(queries, want_queries);
        total += queries;
    }
    return total;
}

static void test_mqar_properties(void **state)
{
    (void)state;
    /* the quick configuration (kdalab train's defaults): T = 64, P = 8, vocabulary 64 */
    kdalab_mqar_config cfg = {.T = 64, .kv_pairs = 8, .key_vocab = 31, .value_vocab = 32};
    size_t vocab, nq, B = 32, T = cfg.T;
    assert_int_equal(kdalab_mqar_vocab_size(&cfg, &vocab, &nq), KDALAB_OK);
    assert_int_equal(vocab, 64);
    assert_int_equal(nq, 8);
    int32_t *tok, *tgt, *tok2, *tgt2;
    mqar_alloc(B, T, &tok, &tgt);
    mqar_alloc(B, T, &tok2, &tgt2);
    size_t *position_used = calloc(T, sizeof *position_used);
    for (size_t batch = 0; batch < 20; batch++) {
        assert_int_equal(kdalab_mqar_make(&cfg, 7, batch, B, tok, tgt), KDALAB_OK);
        mqar_check_batch(&cfg, B, tok, tgt, nq);
        for (size_t i = 0; i < B * T; i++)
            position_used[i % T] += tgt[i] != -1;
    }
    /* uniform positions: over 640 sequences every query slot was used */
    for (size_t t = 2 * cfg.kv_pairs; t < T; t++)
        assert_true(position_used[t] > 0);

    /* determinism: (seed, batch index) fixes the batch, whatever came before */
    assert_int_equal(kdalab_mqar_make(&cfg, 7, 3, B, tok, tgt), KDALAB_OK);
    assert_int_equal(kdalab_mqar_make(&cfg, 7, 11, B, tok2, tgt2), KDALAB_OK);
    assert_int_equal(kdalab_mqar_make(&cfg, 7, 3, B, tok2, tgt2), KDALAB_OK);
    assert_memory_equal(tok, tok2, B * T * sizeof *tok);
    assert_memory_equal(tgt, tgt2, B * T * sizeof *tgt);
    /* another batch index or seed gives another batch */
    assert_int_equal(kdalab_mqar_make(&cfg, 7, 4, B, tok2, tgt2), KDALAB_OK);
    assert_true(memcmp(tok, tok2, B * T * sizeof *tok) != 0);
    assert_int_equal(kdalab_mqar_make(&cfg, 8, 3, B, tok2, tgt2), KDALAB_OK);
    assert_true(memcmp(tok, tok2, B * T * sizeof *tok) != 0);
    /* rows are drawn in order from one generator: a smaller batch is a prefix */
    assert_int_equal(kdalab_mqar_make(&cfg, 7, 3, 1, tok2, tgt2), KDALAB_OK);
    assert_memory_equal(tok, tok2, T * sizeof *tok);

    /* fewer queries than pairs; no room for every key (T = 2P + 3: 3 queries);
     * every key of the vocabulary used (key_vocab = P) */
    kdalab_mqar_config few = cfg, tight = {.T = 19, .kv_pairs = 8, .key_vocab = 8,
                                            .value_vocab = 2};
    few.n_queries = 3;
    assert_int_equal(kdalab_mqar_make(&few, 1, 0, B, tok, tgt), KDALAB_OK);
    mqar_check_batch(&few, B, tok, tgt, 3);
    assert_int_equal(kdalab_mqar_vocab_size(&tight, NULL, &nq), KDALAB_OK);
    assert_int_equal(nq, 3);
    assert_int_equal(kdalab_mqar_make(&tight, 1, 0, B, tok, tgt), KDALAB_OK);
    mqar_check_batch(&tight, B, tok, tgt, 3);
    free(position_used);
    free(tok); free(tgt); free(tok2); free(tgt2);
}

static void test_mqar_bad_input(void **state)
{
    (void)state;
    const kdalab_mqar_config good = {.T = 16, .kv_pairs = 4, .key_vocab = 8, .value_vocab = 8};
    int32_t tok[2 * 16], tgt[2 * 16];
    for (size_t i = 0; i < 32; i++)
        tok[i] = tgt[i] = 777;
    kdalab_mqar_config c;
    expect_status(kdalab_mqar_make(NULL, 1, 0, 2, tok, tgt), KDALAB_ENULL, "config is NULL");
    c = good, c.kv_pairs = 0;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_ESIZE, "kv_pairs = 0");
    c = good, c.value_vocab = 0;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_ESIZE, "value_vocab = 0");
    c = good, c.key_vocab = 3;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_ESIZE, "too small for kv_pairs");
    c = good, c.T = 8;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_ESIZE,
                  "T = 8 < 2 * kv_pairs + 1");
    c = good, c.n_queries = 5;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_ESIZE, "n_queries = 5");
    c = good, c.key_vocab = (size_t)INT32_MAX, c.value_vocab = 1;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_EOVERFLOW, "int32_t");
    c = good, c.T = (size_t)UINT32_MAX + 1;
    expect_status(kdalab_mqar_make(&c, 1, 0, 2, tok, tgt), KDALAB_ESIZE, NULL);
    expect_status(kdalab_mqar_make(&good, 1, 0, SIZE_MAX / 8, tok, tgt), KDALAB_EOVERFLOW, "B =");
    expect_status(kdalab_mqar_make(&good, 1, 0, 2, NULL, tgt), KDALAB_ENULL, "tokens is NULL");
    expect_status(kdalab_mqar_make(&good, 1, 0, 2, tok, NULL), KDALAB_ENULL, "targets is NULL");
    for (size_t i = 0; i < 32; i++)
        assert_true(tok[i] == 777 && tgt[i] == 777);
    /* B = 0: nothing to write, NULL allowed */
    assert_int_equal(kdalab_mqar_make(&good, 1, 0, 0, NULL, NULL), KDALAB_OK);
}

/* Every promise of lib/kdalab_mqar.h about one batch of a Zoology layout. */
static void zoology_check_batch(const kdalab_mqar_config *cfg, size_t B, const int32_t *tok,
                                const int32_t *tgt, size_t *gap_count)
{
    const size_t T = cfg->T, P = cfg->kv_pairs, U = cfg->updates, ctx = 2 * (P + U);
    const size_t nq = cfg->task == KDALAB_MQAR_RECENT ? cfg->recent : P, first = P - nq;
    const int32_t k_hi = (int32_t)(1 + cfg->key_vocab),
                  v_hi = (int32_t)(1 + cfg->key_vocab + cfg->value_vocab);
    for (size_t b = 0; b < B; b++) {
        const int32_t *x = tok + b * T, *y = tgt + b * T;
        int32_t latest[64];
        assert_true(P <= 64);
        for (size_t p = 0; p < P; p++) { /* distinct keys, distinct values */
            assert_true(x[2 * p] >= 1 && x[2 * p] < k_hi);
            assert_true(x[2 * p + 1] >= k_hi && x[2 * p + 1] < v_hi);
            for (size_t q = 0; q < p; q++)
                assert_true(x[2 * q] != x[2 * p] && x[2 * q + 1] != x[2 * p + 1]);
            latest[p] = x[2 * p + 1];
        }
        for (size_t j = 0; j < U; j++) { /* a key bound again, to another value */
            const int32_t key = x[2 * (P + j)], v = x[2 * (P + j) + 1];
            size_t p = 0;
            while (p < P && x[2 * p] != key)
                p++;
            assert_true(p < P);
            assert_true(v >= k_hi && v < v_hi && v != x[2 * p + 1]);
            for (size_t i = 0; i < j; i++) /* each key bound again once */
                assert_true(x[2 * (P + i)] != key);
            latest[p] = v;
        }
        for (size_t t = 0; t < ctx; t++)
            assert_int_equal(y[t], -1);
        size_t queries = 0;
        for (size_t t = ctx; t < T; t++) {
            assert_true(x[t] >= 0 && x[t] < v_hi); /* filler from the whole vocabulary */
            if (y[t] == -1)
                continue;
            /* a query: at an even offset, the key of one of the pairs asked
             * about (RECENT: the last nq), asked once, answered by that key's
             * latest value */
            assert_int_equal((t - ctx) % 2, 0);
            size_t p = first;
            while (p < P && x[2 * p] != x[t])
                p++;
            assert_true(p < P);
            assert_int_equal(y[t], latest[p]);
            for (size_t u = ctx; u < t; u++)
                assert_true(y[u] == -1 || x[u] != x[t]);
            if (gap_count)
                gap_count[(t - ctx) / 2]++;
            queries++;
        }
        assert_int_equal(queries, nq);
    }
}

static void test_mqar_zoology_layouts(void **state)
{
    (void)state;
    const kdalab_mqar_config cfgs[] = {
        {.T = 64, .kv_pairs = 8, .key_vocab = 31, .value_vocab = 32,
         .task = KDALAB_MQAR_ZOOLOGY},
        {.T = 64, .kv_pairs = 8, .key_vocab = 31, .value_vocab = 32,
         .task = KDALAB_MQAR_OVERWRITE, .updates = 4},
        {.T = 96, .kv_pairs = 32, .key_vocab = 40, .value_vocab = 40,
         .task = KDALAB_MQAR_RECENT, .recent = 8},
        {.T = 32, .kv_pairs = 8, .key_vocab = 8, .value_vocab = 8, /* the tightest T */
         .task = KDALAB_MQAR_ZOOLOGY}};
    const size_t want_nq[] = {8, 8, 8, 8};
    const size_t B = 64;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        const kdalab_mqar_config *cfg = &cfgs[c];
        size_t vocab, nq, gaps[64] = {0};
        assert_int_equal(kdalab_mqar_vocab_size(cfg, &vocab, &nq), KDALAB_OK);
        assert_int_equal(vocab, 1 + cfg->key_vocab + cfg->value_vocab);
        assert_int_equal(nq, want_nq[c]);
        int32_t *tok, *tgt, *tok2, *tgt2;
        mqar_alloc(B, cfg->T, &tok, &tgt);
        mqar_alloc(B, cfg->T, &tok2, &tgt2);
        for (size_t batch = 0; batch < 4; batch++) {
            assert_int_equal(kdalab_mqar_make(cfg, 5, batch, B, tok, tgt), KDALAB_OK);
            zoology_check_batch(cfg, B, tok, tgt, gaps);
        }
        /* a function of (seed, batch index) */
        assert_int_equal(kdalab_mqar_make(cfg, 5, 3, B, tok2, tgt2), KDALAB_OK);
        assert_memory_equal(tok, tok2, B * cfg->T * sizeof *tok);
        assert_memory_equal(tgt, tgt2, B * cfg->T * sizeof *tgt);
        /* the power law puts queries early: the first gap is drawn far more
         * often than the last (weights 1 and space^-0.99) */
        const size_t space = (cfg->T - 2 * (cfg->kv_pairs + cfg->updates)) / 2;
        if (space > 2 * nq)
            assert_true(gaps[0] > 4 * gaps[space - 1] + 4);
        free(tok), free(tgt), free(tok2), free(tgt2);
    }
    /* the recent task asks only the last W pairs, overwrite the latest value:
     * checked inside zoology_check_batch; the filler is not all zeros */
    int32_t tok[64], tgt[64];
    assert_int_equal(kdalab_mqar_make(&cfgs[0], 9, 0, 1, tok, tgt), KDALAB_OK);
    size_t nonzero = 0;
    for (size_t t = 16; t < 64; t++)
        nonzero += tok[t] != 0;
    assert_true(nonzero > 40);
}

static void test_mqar_zoology_bad_input(void **state)
{
    (void)state;
    const kdalab_mqar_config z = {.T = 64, .kv_pairs = 8, .key_vocab = 31, .value_vocab = 32,
                                  .task = KDALAB_MQAR_ZOOLOGY};
    int32_t tok[64], tgt[64];
    for (size_t i = 0; i < 64; i++)
        tok[i] = tgt[i] = 777;
    kdalab_mqar_config c;
    c = z, c.T = 63;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "T must be even");
    c = z, c.T = 30;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "T = 30 < 32");
    c = z, c.value_vocab = 7;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "8 distinct values");
    c = z, c.n_queries = 4;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "n_queries = 4");
    c = z, c.updates = 2;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "only the overwrite");
    c = z, c.task = KDALAB_MQAR_OVERWRITE;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "updates = 0");
    c.updates = 9;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "updates = 9");
    c.updates = 8; /* 2 * (8 + 8) + 16 = 48 <= 64: fine; T = 46 is not */
    c.T = 46;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "T = 46 < 48");
    c = z, c.task = KDALAB_MQAR_RECENT, c.recent = 9;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "recent = 9");
    c = z, c.task = (kdalab_mqar_task)7;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_EINVAL, "task = 7");
    c = z, c.task = KDALAB_MQAR_DENSE, c.recent = 1;
    expect_status(kdalab_mqar_make(&c, 1, 0, 1, tok, tgt), KDALAB_ESIZE, "dense task has");
    for (size_t i = 0; i < 64; i++)
        assert_true(tok[i] == 777 && tgt[i] == 777);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mqar_properties),
        cmocka_unit_test(test_mqar_bad_input),
        cmocka_unit_test(test_mqar_zoology_layouts),
        cmocka_unit_test(test_mqar_zoology_bad_input),
    };
    return cmocka_run_group_tests_name("train_mqar", tests, NULL, NULL);
}
