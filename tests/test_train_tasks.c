/*
 * tests/test_train_tasks.c — the synthetic tasks against their definitions
 * (lib/kdalab_mqar.h): the Zoology layout's statistics against Zoology's
 * multiquery_ar (the vocabulary split, the query gaps' power law drawn one
 * gap after another, the scored positions, the distractors), the fixed
 * training set, the palindrome and the stack (every pop answered by the top
 * of its stack), the task names, and a few training steps on each new task.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "common.h"

/* Pearson's chi-square of counts[n] against probabilities p[n] (total draws
 * the sum of counts), cells with an expected count below 5 pooled into one;
 * returns the p-value (gsl_cdf_chisq_Q). */
static double chi_square_p(const size_t *counts, const double *p, size_t n)
{
    double total = 0, chi = 0, pool_o = 0, pool_e = 0;
    for (size_t i = 0; i < n; i++)
        total += (double)counts[i];
    size_t cells = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = p[i] * total;
        if (e < 5) {
            pool_o += (double)counts[i];
            pool_e += e;
            continue;
        }
        chi += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        cells++;
    }
    if (pool_e > 0) {
        chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    }
    assert_true(cells >= 2);
    return gsl_cdf_chisq_Q(chi, (double)(cells - 1));
}

static void test_zoology_split(void **state)
{
    (void)state;
    kdalab_mqar_config c = {.T = 64, .kv_pairs = 8};
    assert_int_equal(kdalab_mqar_zoology_split(129, &c), KDALAB_OK);
    assert_int_equal(c.key_vocab, 63); /* keys [1, 64), values [64, 129): Zoology's ids */
    assert_int_equal(c.value_vocab, 65);
    assert_int_equal(c.T, 64); /* nothing else written */
    size_t vocab;
    assert_int_equal(kdalab_mqar_vocab_size(&c, &vocab, NULL), KDALAB_OK);
    assert_int_equal(vocab, 129);
    assert_int_equal(kdalab_mqar_zoology_split(128, &c), KDALAB_OK);
    assert_true(c.key_vocab == 63 && c.value_vocab == 64);
    assert_int_equal(kdalab_mqar_zoology_split(4, &c), KDALAB_OK);
    assert_true(c.key_vocab == 1 && c.value_vocab == 2);
    expect_status(kdalab_mqar_zoology_split(3, &c), KDALAB_ESIZE, "W = 3");
    expect_status(kdalab_mqar_zoology_split(129, NULL), KDALAB_ENULL, NULL);
    assert_true(c.key_vocab == 1 && c.value_vocab == 2); /* untouched on error */
}

/* Zoology's multiquery_ar draws the P gaps of [0, space) without
 * replacement, with p(g) proportional to (g + 1)^(a - 1): numpy's choice
 * keeps the first distinct draws of i.i.d. samples, so the gap of pair 0's
 * key has law p, and the gap of pair 1's key has law
 * sum_g1 p(g1) p(g) / (1 - p(g1)) over g1 != g. The layout puts key j at
 * 2P + 2 gap_j, scores only there, and fills every other position after the
 * pairs with a token uniform over the whole vocabulary. */
static void test_zoology_statistics(void **state)
{
    (void)state;
    enum { W = 129, T = 64, P = 8, SPACE = (T - 2 * P) / 2, B = 500, BATCHES = 40 };
    kdalab_mqar_config c = {.T = T, .kv_pairs = P, .task = KDALAB_MQAR_ZOOLOGY};
    assert_int_equal(kdalab_mqar_zoology_split(W, &c), KDALAB_OK);
    double p[SPACE], p2[SPACE] = {0}, sum = 0;
    for (size_t g = 0; g < SPACE; g++)
        sum += p[g] = pow((double)(g + 1), KDALAB_MQAR_POWER_A - 1);
    for (size_t g = 0; g < SPACE; g++)
        p[g] /= sum;
    for (size_t g1 = 0; g1 < SPACE; g1++)
        for (size_t g = 0; g < SPACE; g++)
            if (g != g1)
                p2[g] += p[g1] * p[g] / (1 - p[g1]);
    size_t first[SPACE] = {0}, second[SPACE] = {0}, noise[W] = {0};
    int32_t *tok = malloc(B * T * sizeof *tok), *tgt = malloc(B * T * sizeof *tgt);
    assert_true(tok && tgt);
    for (size_t batch = 0; batch < BATCHES; batch++) {
        assert_int_equal(kdalab_mqar_make(&c, 3, batch, B, tok, tgt), KDALAB_OK);
        for (size_t b = 0; b < B; b++) {
            const int32_t *x = tok + b * T, *y = tgt + b * T;
            for (size_t q = 0; q < P; q++) { /* Zoology's ids: keys [1, 64), values [64, 129) */
                assert_true(x[2 * q] >= 1 && x[2 * q] < W / 2);
                assert_true(x[2 * q + 1] >= W / 2 && x[2 * q + 1] < W);
                assert_int_equal(y[2 * q], -1);
                assert_int_equal(y[2 * q + 1], -1);
            }
            size_t scored = 0;
            for (size_t t = 2 * P; t < T; t++) {
                if (y[t] < 0) {
                    noise[x[t]]++;
                    continue;
                }
                assert_int_equal((t - 2 * P) % 2, 0); /* even offsets only */
                size_t j = 0;
                while (j < P && x[2 * j] != x[t])
                    j++;
                assert_true(j < P);
                assert_int_equal(y[t], x[2 * j + 1]);
                if (j == 0)
                    first[(t - 2 * P) / 2]++;
                if (j == 1)
                    second[(t - 2 * P) / 2]++;
                scored++;
            }
            assert_int_equal(scored, P); /* every key asked once */
        }
    }
    /* fixed seeds: these are numbers, not chances; a generator drawing the
     * gaps by another law (a = 1, or the gaps at once) gives p ~ 0 */
    assert_true(chi_square_p(first, p, SPACE) > 1e-3);
    assert_true(chi_square_p(second, p2, SPACE) > 1e-3);
    double uniform[W];
    for (size_t i = 0; i < W; i++)
        uniform[i] = 1.0 / W;
    assert_true(chi_square_p(noise, uniform, W) > 1e-3);
    free(tok);
    free(tgt);
}

/* With train_set = N a stream is N sequences, each pass over them in a new
 * order; the same set whatever the batch size. */
static void test_fixed_set(void **state)
{
    (void)state;
    enum { N = 10, T = 16 };
    kdalab_mqar_config c = {.T = T, .kv_pairs = 4, .key_vocab = 6, .value_vocab = 6,
                            .task = KDALAB_MQAR_ZOOLOGY, .train_set = N};
    int32_t rows4[3 * N + 2][T], rows3[3 * N][T], tgt[4 * T];
    for (size_t i = 0; i * 4 < 3 * N; i++) /* 32 rows in batches of 4 */
        assert_int_equal(kdalab_mqar_make(&c, 5, i, 4, rows4[4 * i], tgt), KDALAB_OK);
    for (size_t i = 0; i * 3 < 3 * N; i++)
        assert_int_equal(kdalab_mqar_make(&c, 5, i, 3, rows3[3 * i], tgt), KDALAB_OK);
    /* each pass holds N distinct sequences, the same N in every pass and for
     * either batch size, in another order in each pass */
    for (size_t pass = 0; pass < 3; pass++) {
        for (size_t a = 0; a < N; a++) {
            const int32_t *r = rows4[pass * N + a];
            size_t in_first = 0, in3 = 0, same = 0;
            for (size_t b = 0; b < N; b++) {
                in_first += memcmp(r, rows4[b], sizeof rows4[0]) == 0;
                in3 += memcmp(r, rows3[pass * N + b], sizeof rows3[0]) == 0;
                same += b != a && memcmp(r, rows4[pass * N + b], sizeof rows4[0]) == 0;
            }
            assert_int_equal(in_first, 1);
            assert_int_equal(in3, 1);
            assert_int_equal(same, 0);
        }
        if (pass)
            assert_true(memcmp(rows4[0], rows4[pass * N], N * sizeof rows4[0]) != 0);
    }
    /* another seed, another set; train_set 0: fresh batches, as before */
    int32_t other[4][T];
    assert_int_equal(kdalab_mqar_make(&c, 6, 0, 4, other[0], tgt), KDALAB_OK);
    assert_true(memcmp(other, rows4, sizeof other) != 0);
    c.train_set = 0;
    assert_int_equal(kdalab_mqar_make(&c, 5, 0, 4, other[0], tgt), KDALAB_OK);
    c.train_set = ((size_t)1 << 40) + 1;
    expect_status(kdalab_mqar_make(&c, 5, 0, 4, other[0], tgt), KDALAB_ESIZE, "train_set");
    c.train_set = 3;
    expect_status(kdalab_mqar_make(&c, 5, SIZE_MAX / 2, 4, other[0], tgt), KDALAB_EOVERFLOW,
                  "batch_index");
}

static void test_palindrome(void **state)
{
    (void)state;
    enum { N = 12, T = 2 * N, B = 64 };
    const kdalab_mqar_config c = {.T = T, .kv_pairs = N, .key_vocab = 5, .value_vocab = 4,
                                  .task = KDALAB_MQAR_PALINDROME};
    size_t vocab, scored;
    assert_int_equal(kdalab_mqar_vocab_size(&c, &vocab, &scored), KDALAB_OK);
    assert_int_equal(vocab, 10);
    assert_int_equal(scored, N);
    int32_t tok[B * T], tgt[B * T];
    size_t seen[10] = {0};
    assert_int_equal(kdalab_mqar_make(&c, 1, 0, B, tok, tgt), KDALAB_OK);
    for (size_t b = 0; b < B; b++) {
        const int32_t *x = tok + b * T, *y = tgt + b * T;
        for (size_t t = 0; t < N; t++) {
            assert_true(x[t] >= 1 && x[t] < 10); /* key and value tokens alike */
            assert_int_equal(y[t], -1);
            seen[x[t]]++;
        }
        assert_int_equal(x[N], 0); /* the separator */
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(y[N + i], x[N - 1 - i]); /* the string backwards */
            if (i + 1 < N)
                assert_int_equal(x[N + 1 + i], x[N - 1 - i]); /* the answer so far */
        }
    }
    for (size_t v = 1; v < 10; v++)
        assert_true(seen[v] > 0);
    kdalab_mqar_config bad = c;
    bad.T = T + 2;
    expect_status(kdalab_mqar_vocab_size(&bad, NULL, NULL), KDALAB_ESIZE, "T must be 24");
    bad = c, bad.updates = 1;
    expect_status(kdalab_mqar_vocab_size(&bad, NULL, NULL), KDALAB_ESIZE, "palindrome");
}

/* Replay every stack sequence: pushes and pops on S stacks, each pop's
 * target the value on top of its stack, which the next token repeats. */
static void test_stack(void **state)
{
    (void)state;
    enum { S = 3, P = 20, T = 64, B = 128 };
    const kdalab_mqar_config c = {.T = T, .kv_pairs = P, .key_vocab = 2 * S, .value_vocab = 7,
                                  .task = KDALAB_MQAR_STACK};
    size_t vocab, scored;
    assert_int_equal(kdalab_mqar_vocab_size(&c, &vocab, &scored), KDALAB_OK);
    assert_int_equal(vocab, 1 + 2 * S + 7);
    assert_int_equal(scored, T / 2 - P);
    int32_t tok[B * T], tgt[B * T];
    size_t pops_on[S] = {0}, deep = 0;
    assert_int_equal(kdalab_mqar_make(&c, 2, 0, B, tok, tgt), KDALAB_OK);
    for (size_t b = 0; b < B; b++) {
        const int32_t *x = tok + b * T, *y = tgt + b * T;
        int32_t stack[S][P];
        size_t depth[S] = {0}, pushes = 0, pops = 0;
        for (size_t o = 0; o < T / 2; o++) {
            const int32_t op = x[2 * o], v = x[2 * o + 1];
            assert_true(op >= 1 && op < 1 + 2 * S);
            assert_true(v >= 1 + 2 * S && v < (int32_t)vocab);
            assert_int_equal(y[2 * o + 1], -1);
            const size_t s = (size_t)(op - 1) % S;
            if (op < 1 + S) { /* a push: not scored */
                assert_int_equal(y[2 * o], -1);
                stack[s][depth[s]++] = v;
                pushes++;
            } else { /* a pop: from a stack that holds a value, its top the answer */
                assert_true(depth[s] > 0);
                const int32_t top = stack[s][--depth[s]];
                assert_int_equal(y[2 * o], top);
                assert_int_equal(v, top);
                pops_on[s]++;
                deep += depth[s] > 0;
                pops++;
            }
        }
        assert_int_equal(pushes, P);
        assert_int_equal(pops, T / 2 - P);
    }
    for (size_t s = 0; s < S; s++)
        assert_true(pops_on[s] > 0);
    assert_true(deep > 0); /* some pops leave a value below: a stack, not a register */
    kdalab_mqar_config bad = c;
    bad.key_vocab = 5;
    expect_status(kdalab_mqar_vocab_size(&bad, NULL, NULL), KDALAB_ESIZE, "must be even");
    bad = c, bad.T = 63;
    expect_status(kdalab_mqar_vocab_size(&bad, NULL, NULL), KDALAB_ESIZE, "T must be even");
    bad = c, bad.T = 2 * P;
    expect_status(kdalab_mqar_vocab_size(&bad, NULL, NULL), KDALAB_ESIZE, "0 pops");
    bad = c, bad.T = 4 * P + 2;
    expect_status(kdalab_mqar_vocab_size(&bad, NULL, NULL), KDALAB_ESIZE, "21 pops");
}

static void test_task_names(void **state)
{
    (void)state;
    const char *names[] = {"dense", "zoology", "overwrite", "recent", "palindrome", "stack"};
    for (int i = 0; i < 6; i++) {
        kdalab_mqar_task t;
        assert_int_equal(kdalab_mqar_parse_task(names[i], &t), KDALAB_OK);
        assert_int_equal(t, i);
        assert_string_equal(kdalab_mqar_task_name(t), names[i]);
    }
    kdalab_mqar_task t;
    /* the names that could mean either recall layout name both */
    expect_status(kdalab_mqar_parse_task("plain", &t), KDALAB_EINVAL, "'dense'");
    expect_status(kdalab_mqar_parse_task("mqar", &t), KDALAB_EINVAL, "'zoology'");
    expect_status(kdalab_mqar_parse_task("copy", &t), KDALAB_EINVAL, "palindrome or stack");
    expect_status(kdalab_mqar_parse_task(NULL, &t), KDALAB_ENULL, NULL);
    assert_string_equal(kdalab_mqar_task_name((kdalab_mqar_task)9), "unknown");
}

/* A few training steps on each new task, and on a fixed set: the trainer
 * takes them as it takes MQAR. */
static void test_tasks_train(void **state)
{
    (void)state;
    const kdalab_mqar_config tasks[] = {
        {.T = 16, .kv_pairs = 8, .key_vocab = 4, .value_vocab = 4,
         .task = KDALAB_MQAR_PALINDROME},
        {.T = 16, .kv_pairs = 5, .key_vocab = 4, .value_vocab = 4, .task = KDALAB_MQAR_STACK},
        {.T = 16, .kv_pairs = 4, .key_vocab = 4, .value_vocab = 4, .task = KDALAB_MQAR_ZOOLOGY,
         .train_set = 20}};
    for (size_t i = 0; i < 3; i++) {
        kdalab_train_config c = {0};
        c.model = (kdalab_model_config){.L = 1, .D = 8, .H = 2, .F = 16, .vocab = 9, .conv = 1,
                                        .mixer = {KDALAB_MIXER_KDA}};
        c.task = tasks[i];
        c.opt = (kdalab_adamw_config){1e-3, 1e-4, 0.9, 0.999, 1e-8, 0.1, 1.0, 0, 3};
        c.batch = 4;
        c.test_sequences = 8;
        c.seed = 1;
        size_t P;
        assert_int_equal(kdalab_model_size(&c.model, &P, NULL), KDALAB_OK);
        float *theta = malloc(P * sizeof *theta);
        kdalab_train_result r;
        assert_int_equal(kdalab_train_mqar_f32(&c, theta, NULL, NULL, &r), KDALAB_OK);
        assert_true(r.test_accuracy >= 0 && r.test_accuracy <= 1 && isfinite(r.test_loss));
        free(theta);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zoology_split),   cmocka_unit_test(test_zoology_statistics),
        cmocka_unit_test(test_fixed_set),       cmocka_unit_test(test_palindrome),
        cmocka_unit_test(test_stack),           cmocka_unit_test(test_task_names),
        cmocka_unit_test(test_tasks_train),
    };
    return cmocka_run_group_tests_name("train_tasks", tests, NULL, NULL);
}
