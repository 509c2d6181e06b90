/*
 * tests/test_hybrid_trained.c — a trained model in the hybrid stack
 * (lib/model/trained.c, forward.c) through the one checkpoint format
 * (lib/train/checkpoint.c).
 *
 *   - a tiny model trained by kdalab_train_mqar_f64 (a KDA + attention
 *     hybrid, and a stack of all five mixers with the convolution on, off,
 *     and on some blocks only (conv_off), and with the swish, no and low-rank output gates), saved with kdalab_checkpoint_write and loaded with
 *     kdalab_hybrid_load, prefills part of a sequence and decodes the rest
 *     token by token: its logits equal kdalab_model_logits_f64's on the
 *     whole sequence (the training forward) within TOL; a checkpoint with one
 *     matrix transposed does not (so the comparison sees a wrong load)
 *   - kdalab_hybrid_save writes the same files kdalab_checkpoint_write did;
 *     reset, then one prefill of everything, gives the same logits again
 *   - the checkpoint reader refuses a missing file, a wrong shape, a NaN, a
 *     config.txt without the format line or with a NUL byte, and the writer a
 *     malformed extra line; a rewrite that fails among the tensors leaves no
 *     config.txt; layers=0, layers=65 and conv=2 are named with their rule,
 *     in a fresh thread and after another checkpoint's failed load (whose
 *     file the message must not name)
 *   - bad arguments: tokens out of range change nothing; each kind of stack
 *     refuses the other kind's calls
 *
 * Tolerance: the two sides run the same float64 arithmetic except the
 * mechanism (training: the SIMD path's chunkwise form, C = 16; the stack:
 * the reference's chunkwise form, C = 64, for the prefill and the recurrent
 * step for the decode) and attention (matrix form against one query at a
 * time): different summation orders of the same sums, ~1e-15 relative
 * measured (2.6e-16 to 2.6e-15 of max |logit|, printed). TOL = 1e-12 of max
 * |logit| leaves room for that and for longer sums; one transposed matrix
 * moves the logits by 0.02 to 1.6 of max |logit| (printed; the least with
 * the swish gate of rank 3, whose small gate values damp block 0's output),
 * ten orders of magnitude past TOL.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define TOL 1e-12
#define T_SEQ 24   /* tokens compared */
#define PREFILL 7  /* of which prefilled; the rest decoded */

#define OK(call)                                                                              \
    do {                                                                                      \
        kdalab_status st_ = (call);                                                           \
        if (st_ != KDALAB_OK)                                                                 \
            fail_msg("%s: %s (%s)", #call, kdalab_strerror(st_), kdalab_last_error());        \
    } while (0)

/* A tiny MQAR model with the given mixers and output gate (of that rank),
 * trained for 20 steps in float64: its config in *c, its parameters returned
 * (malloc'd). */
static double *train_gated(const char *mixers, int conv, uint64_t conv_off,
                           kdalab_output_gate gate, size_t rank, kdalab_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->model.conv_off = conv_off;
    c->model.output_gate = gate;
    c->model.gate_rank = rank;
    c->model.conv_init = rank ? KDALAB_CONV_INIT_NORMAL : KDALAB_CONV_INIT_UNIFORM;
    c->task = (kdalab_mqar_config){.T = 16, .kv_pairs = 3, .key_vocab = 5, .value_vocab = 6};
    c->model.vocab = 12;
    c->model.D = 8;
    c->model.H = 2;
    c->model.F = 16;
    c->model.conv = conv;
    c->model.L = 2; /* for hybrid:1; a list sets it */
    OK(kdalab_model_parse_mixers(mixers, &c->model.L, 0, c->model.mixer));
    c->opt = (kdalab_adamw_config){1e-2, 1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0, 2, 20};
    c->batch = 4;
    c->test_sequences = 4;
    c->seed = 5;
    size_t n_params;
    OK(kdalab_model_size(&c->model, &n_params, NULL));
    double *theta = malloc(n_params * sizeof *theta);
    assert_non_null(theta);
    kdalab_train_result r;
    OK(kdalab_train_mqar_f64(c, theta, NULL, NULL, &r));
    return theta;
}

static double *train_tiny(const char *mixers, int conv, kdalab_train_config *c)
{
    return train_gated(mixers, conv, 0, KDALAB_OUTPUT_GATE_SIGMOID, 0, c);
}

/* T_SEQ tokens, every id of the vocabulary among them. */
static void make_tokens(size_t V, int32_t *tokens)
{
    for (size_t t = 0; t < T_SEQ; t++)
        tokens[t] = (int32_t)((t * 5 + 3) % V);
}

/* The stack's logits [T_SEQ, V] for tokens: prefill PREFILL, decode the rest. */
static void stack_logits(kdalab_hybrid *s, size_t V, const int32_t *tokens, double *logits)
{
    OK(kdalab_hybrid_prefill_tokens(s, PREFILL, tokens, logits));
    for (size_t t = PREFILL; t < T_SEQ; t++)
        OK(kdalab_hybrid_decode_token(s, tokens[t], logits + t * V));
    assert_int_equal(kdalab_hybrid_position(s), T_SEQ);
}

/* Train, save, load, prefill + decode; compare with the training forward. */
static void check_model(const char *mixers, int conv, uint64_t conv_off, kdalab_output_gate gate,
                        size_t rank)
{
    kdalab_train_config c;
    double *theta = train_gated(mixers, conv, conv_off, gate, rank, &c);
    const size_t V = c.model.vocab;
    char dir[256];
    assert_int_equal(test_tmpdir_make("kdalab_trained_", dir, sizeof dir), 0);
    OK(kdalab_checkpoint_write(dir, &c.model, theta, "task=mqar\nsteps=20\n"));

    int32_t tokens[T_SEQ];
    make_tokens(V, tokens);
    double *ref = malloc(T_SEQ * V * sizeof *ref), *got = malloc(T_SEQ * V * sizeof *got);
    assert_true(ref && got);
    OK(kdalab_model_logits_f64(&c.model, theta, 1, T_SEQ, tokens, ref));

    kdalab_hybrid *s = NULL;
    OK(kdalab_hybrid_load(dir, &s));
    kdalab_model_config back;
    const double *theta_back;
    OK(kdalab_hybrid_model(s, &back, &theta_back));
    assert_int_equal(back.L, c.model.L);
    assert_true(back.output_gate == gate && back.gate_rank == rank &&
                back.conv_init == c.model.conv_init && back.conv_off == conv_off);
    assert_memory_equal(back.mixer, c.model.mixer, c.model.L * sizeof c.model.mixer[0]);
    stack_logits(s, V, tokens, got);
    const double e = rel_err_f64(got, ref, T_SEQ * V);
    print_message("%-40s conv %d (off 0x%llx), gate %s rank %zu: prefill %d + decode %d vs "
                  "training forward: %.2g of max |logit|\n", mixers, conv,
                  (unsigned long long)conv_off, kdalab_output_gate_name(gate), rank, PREFILL,
                  T_SEQ - PREFILL, e);
    assert_true(e < TOL);

    /* reset, then everything in one prefill: the same logits */
    OK(kdalab_hybrid_reset(s));
    OK(kdalab_hybrid_prefill_tokens(s, T_SEQ, tokens, got));
    assert_true(rel_err_f64(got, ref, T_SEQ * V) < TOL);

    /* a prefill for the memory only (no logits: the last block's outputs are
     * skipped, its convolution's history still moves on), then decode: the
     * same logits from PREFILL on */
    OK(kdalab_hybrid_reset(s));
    OK(kdalab_hybrid_prefill_tokens(s, PREFILL, tokens, NULL));
    for (size_t t = PREFILL; t < T_SEQ; t++)
        OK(kdalab_hybrid_decode_token(s, tokens[t], got + t * V));
    assert_true(rel_err_f64(got + PREFILL * V, ref + PREFILL * V, (T_SEQ - PREFILL) * V) < TOL);

    /* kdalab_hybrid_save writes the tensors kdalab_checkpoint_write wrote */
    char dir2[256];
    assert_int_equal(test_tmpdir_make("kdalab_trained2_", dir2, sizeof dir2), 0);
    OK(kdalab_hybrid_save(s, dir2));
    kdalab_hybrid *s2 = NULL;
    OK(kdalab_hybrid_load(dir2, &s2));
    const double *theta2;
    OK(kdalab_hybrid_model(s2, NULL, &theta2));
    size_t n_params;
    OK(kdalab_model_size(&c.model, &n_params, NULL));
    assert_memory_equal(theta2, theta, n_params * sizeof *theta);
    assert_memory_equal(theta_back, theta, n_params * sizeof *theta);
    kdalab_hybrid_free(s2);

    /* Block 0's Wq (square) written transposed loads without complaint and
     * moves the logits far outside TOL: the comparison above sees a wrong load */
    kdalab_model_tensor t;
    OK(kdalab_model_tensor_at(&c.model, 2, &t));
    assert_string_equal(t.name, "blocks.0.mixer.Wq");
    double *bad = malloc(n_params * sizeof *bad);
    assert_non_null(bad);
    memcpy(bad, theta, n_params * sizeof *bad);
    for (size_t i = 0; i < t.rows; i++)
        for (size_t j = 0; j < t.cols; j++)
            bad[t.offset + i * t.cols + j] = theta[t.offset + j * t.cols + i];
    OK(kdalab_checkpoint_write(dir2, &c.model, bad, NULL));
    OK(kdalab_hybrid_load(dir2, &s2));
    stack_logits(s2, V, tokens, got);
    const double e_bad = rel_err_f64(got, ref, T_SEQ * V);
    print_message("%-40s conv %d, gate %s rank %zu: with blocks.0.mixer.Wq transposed: %.2g\n",
                  mixers, conv, kdalab_output_gate_name(gate), rank, e_bad);
    assert_true(e_bad > 1e6 * TOL);
    kdalab_hybrid_free(s2);

    kdalab_hybrid_free(s);
    assert_int_equal(test_tmpdir_remove(dir), 0);
    assert_int_equal(test_tmpdir_remove(dir2), 0);
    free(bad);
    free(ref);
    free(got);
    free(theta);
}

static void check_gated(const char *mixers, int conv, kdalab_output_gate gate, size_t rank)
{
    check_model(mixers, conv, 0, gate, rank);
}

static void check_case(const char *mixers, int conv)
{
    check_gated(mixers, conv, KDALAB_OUTPUT_GATE_SIGMOID, 0);
}

static void test_hybrid_kda_attention(void **state)
{
    (void)state;
    check_case("hybrid:1", 1); /* kda, attention */
}

static void test_every_mixer(void **state)
{
    (void)state;
    check_case("kda,attention,linear_attention,deltanet,gated_deltanet", 1);
    check_case("kda,attention,linear_attention,deltanet,gated_deltanet", 0);
    /* the convolution on some blocks only: not on attention and DeltaNet */
    check_model("kda,attention,linear_attention,deltanet,gated_deltanet", 1,
                (1u << 1) | (1u << 3), KDALAB_OUTPUT_GATE_SIGMOID, 0);
}

/* The output-gate designs decode as they train: swish, none, and a swish
 * gate of rank 3 (with the N(0, 0.02^2) conv init) */
static void test_gate_designs(void **state)
{
    (void)state;
    const char *all = "kda,attention,linear_attention,deltanet,gated_deltanet";
    check_gated(all, 1, KDALAB_OUTPUT_GATE_SWISH, 0);
    check_gated(all, 1, KDALAB_OUTPUT_GATE_NONE, 0);
    check_gated(all, 1, KDALAB_OUTPUT_GATE_SWISH, 3);
}

/* The reader's and the writer's refusals, each naming the file. */
static void test_checkpoint_errors(void **state)
{
    (void)state;
    kdalab_train_config c;
    double *theta = train_tiny("hybrid:1", 1, &c);
    char dir[256], path[600];
    assert_int_equal(test_tmpdir_make("kdalab_ckpt_", dir, sizeof dir), 0);
    kdalab_hybrid *s = NULL;
    assert_int_equal(kdalab_hybrid_load(dir, &s), KDALAB_EIO); /* no config.txt */
    assert_non_null(strstr(kdalab_last_error(), "config.txt"));
    assert_int_equal(kdalab_checkpoint_write(dir, &c.model, theta, "mixer=kda\n"),
                     KDALAB_EINVAL);
    assert_int_equal(kdalab_checkpoint_write(dir, &c.model, theta, "task=mqar"), KDALAB_EINVAL);
    OK(kdalab_checkpoint_write(dir, &c.model, theta, "note=extra lines are kept\n"));
    kdalab_model_config m;
    OK(kdalab_checkpoint_read_config(dir, &m));
    assert_int_equal(m.vocab, 12);
    assert_int_equal(m.conv, 1);

    /* a tensor of the wrong shape, then missing, then NaN */
    snprintf(path, sizeof path, "%s/blocks.1.mlp.W2.npy", dir);
    const size_t wrong[2] = {8, 16};
    double z[128] = {0};
    OK(kdalab_npy_write(path, KDALAB_DTYPE_F64, z, 2, wrong));
    assert_int_equal(kdalab_hybrid_load(dir, &s), KDALAB_ESIZE);
    assert_null(s);
    assert_non_null(strstr(kdalab_last_error(), "blocks.1.mlp.W2.npy"));
    assert_int_equal(remove(path), 0);
    assert_int_equal(kdalab_hybrid_load(dir, &s), KDALAB_EIO);
    assert_non_null(strstr(kdalab_last_error(), "blocks.1.mlp.W2.npy"));
    const size_t right[2] = {16, 8};
    z[5] = NAN;
    OK(kdalab_npy_write(path, KDALAB_DTYPE_F64, z, 2, right));
    assert_int_equal(kdalab_hybrid_load(dir, &s), KDALAB_ENONFINITE);

    /* config.txt without the format line; then one describing no model */
    snprintf(path, sizeof path, "%s/config.txt", dir);
    test_write_text(path, "mixer=kda,attention\nlayers=2\n");
    assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "format=kdalab-checkpoint/1"));
    test_write_text(path, "format=kdalab-checkpoint/1\nmixer=kda,attention\nlayers=3\n"
                          "d_model=8\nheads=2\nmlp_hidden=16\nconv=1\nvocab=12\n");
    assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "does not describe a model"));
    assert_non_null(strstr(kdalab_last_error(), "lists 2 blocks, not 3")); /* the cause */
    static const char nul[] = "format=kdalab-checkpoint/1\n\0mixer=kda\n"; /* a NUL first */
    tcli_put_bytes(path, nul, sizeof nul - 1);
    assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "NUL byte in line 2"));
    test_write_text(path, "format=kdalab-checkpoint/1\nmixer=kda,attention\nlayers=2\n"
                          "d_model=8\nheads=2\nmlp_hidden=16\nconv=1\nvocab=12\n"
                          "output_gate=relu\n");
    assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "relu"));
    assert_int_equal(kdalab_checkpoint_write(dir, &c.model, theta, "gate_rank=2\n"),
                     KDALAB_EINVAL);
    /* a rewrite stopped among the tensors (a directory where the last one goes)
     * leaves no config.txt: not a mix of old and new tensors read as a model */
    OK(kdalab_checkpoint_write(dir, &c.model, theta, NULL));
    snprintf(path, sizeof path, "%s/lm_head.npy", dir);
    assert_int_equal(remove(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(kdalab_checkpoint_write(dir, &c.model, theta, NULL), KDALAB_EIO);
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_EIO);
    assert_int_equal(kdalab_checkpoint_read_config(NULL, &m), KDALAB_ENULL);
    assert_int_equal(kdalab_hybrid_load(dir, NULL), KDALAB_ENULL);
    assert_int_equal(test_tmpdir_remove(dir), 0);
    free(theta);
}

/* A load in a thread of its own, whose error state is a fresh process's: the
 * status and the message, copied. */
typedef struct {
    const char *dir;
    kdalab_status s;
    char msg[512];
} fresh_load;

static void *load_fresh(void *arg)
{
    fresh_load *f = arg;
    kdalab_hybrid *h = NULL;
    f->s = kdalab_hybrid_load(f->dir, &h);
    snprintf(f->msg, sizeof f->msg, "%s", kdalab_last_error());
    kdalab_hybrid_free(h);
    return NULL;
}

/* layers=0 and layers=65 (KDALAB_MODEL_MAX_LAYERS is 64): the message names
 * the key, its value and the rule, both where no error came before (a fresh
 * thread) and after another checkpoint's failed load, whose file it must
 * not name. And conv=2 likewise; and conv_off= lists that are malformed or
 * name a block the model does not have. */
static void test_checkpoint_layers_out_of_range(void **state)
{
    (void)state;
    char dir[256], path[600], text[512], want[64], other[600];
    assert_int_equal(test_tmpdir_make("kdalab_ckpt_layers_", dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/config.txt", dir);
    snprintf(other, sizeof other, "%s/other-checkpoint", dir);
    const struct { const char *key; size_t value; const char *rule; } bad[] = {
        {"layers", 0, "must be in [1, 64]"}, {"layers", 65, "must be in [1, 64]"},
        {"conv", 2, "must be 0 or 1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int layers = strcmp(bad[i].key, "layers") == 0;
        snprintf(text, sizeof text, "format=kdalab-checkpoint/1\nmixer=kda\nlayers=%zu\n"
                 "d_model=8\nheads=2\nmlp_hidden=16\nconv=%zu\nvocab=12\n",
                 layers ? bad[i].value : 2, layers ? 1 : bad[i].value);
        test_write_text(path, text);
        snprintf(want, sizeof want, "%s=%zu: %s", bad[i].key, bad[i].value, bad[i].rule);
        fresh_load f = {.dir = dir};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, load_fresh, &f), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(f.s, KDALAB_EFORMAT);
        if (!strstr(f.msg, want))
            fail_msg("fresh: '%s' lacks '%s'", f.msg, want);
        /* after another load failed, naming its own file */
        kdalab_hybrid *h = NULL;
        assert_int_equal(kdalab_hybrid_load(other, &h), KDALAB_EIO);
        assert_non_null(strstr(kdalab_last_error(), "other-checkpoint"));
        assert_int_equal(kdalab_hybrid_load(dir, &h), KDALAB_EFORMAT);
        assert_null(h);
        if (!strstr(kdalab_last_error(), want) || strstr(kdalab_last_error(), "other-checkpoint"))
            fail_msg("after another load: '%s' lacks '%s' or names the other file",
                     kdalab_last_error(), want);
    }
    /* conv_off: malformed lists, and lists the model refuses */
    const struct { const char *conv, *off, *want; } offs[] = {
        {"1", "1,1", "conv_off=1,1 is not a list"}, {"1", "x", "conv_off=x is not"},
        {"1", "", "conv_off= is not"}, {"1", "1,", "conv_off=1, is not"},
        {"1", "64", "conv_off=64 is not"}, {"1", "2", "names a block at or above L = 2"},
        {"0", "1", "with conv 0"}};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        snprintf(text, sizeof text, "format=kdalab-checkpoint/1\nmixer=kda,attention\n"
                 "layers=2\nd_model=8\nheads=2\nmlp_hidden=16\nconv=%s\nvocab=12\n"
                 "conv_off=%s\n", offs[i].conv, offs[i].off);
        test_write_text(path, text);
        kdalab_model_config m;
        assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_EFORMAT);
        if (!strstr(kdalab_last_error(), offs[i].want))
            fail_msg("conv_off=%s: '%s' lacks '%s'", offs[i].off, kdalab_last_error(),
                     offs[i].want);
    }
    snprintf(text, sizeof text, "format=kdalab-checkpoint/1\nmixer=kda,attention\nlayers=2\n"
             "d_model=8\nheads=2\nmlp_hidden=16\nconv=1\nvocab=12\nconv_off=1\n");
    test_write_text(path, text);
    kdalab_model_config m;
    assert_int_equal(kdalab_checkpoint_read_config(dir, &m), KDALAB_OK);
    assert_true(m.conv == 1 && m.conv_off == 2);
    assert_int_equal(test_tmpdir_remove(dir), 0);
}

/* Bad arguments; each kind of stack refuses the other's calls. */
static void test_bad_arguments(void **state)
{
    (void)state;
    kdalab_train_config c;
    double *theta = train_tiny("hybrid:1", 1, &c);
    kdalab_hybrid *s = NULL;
    OK(kdalab_hybrid_new_model(&c.model, theta, &s));
    double logits[12], x[8] = {0}, y[8];
    int32_t tokens[3] = {1, 12, 2};
    assert_int_equal(kdalab_hybrid_prefill_tokens(s, 3, tokens, logits), KDALAB_EDOMAIN);
    assert_int_equal(kdalab_hybrid_decode_token(s, -1, logits), KDALAB_EDOMAIN);
    assert_int_equal(kdalab_hybrid_decode_token(s, 1, NULL), KDALAB_ENULL);
    assert_int_equal(kdalab_hybrid_prefill_tokens(s, 1, NULL, logits), KDALAB_ENULL);
    assert_int_equal(kdalab_hybrid_position(s), 0); /* nothing happened */
    OK(kdalab_hybrid_prefill_tokens(s, 0, NULL, NULL));
    const int32_t good[2] = {1, 2};
    OK(kdalab_hybrid_prefill_tokens(s, 2, good, NULL)); /* memory only */
    assert_int_equal(kdalab_hybrid_position(s), 2);
    size_t per[2], total;
    OK(kdalab_hybrid_cache_bytes(s, per, &total));
    assert_int_equal(per[0], (2 * 4 * 4 + 3 * 3 * 8) * 8);     /* state + conv rows */
    assert_int_equal(per[1], (2 * 2 * 8 + 3 * 3 * 8) * 8);     /* 2 tokens' k, v + conv */
    double *st;
    kdalab_kv_cache *cache;
    OK(kdalab_hybrid_kda_state(s, 0, &st));
    OK(kdalab_hybrid_kv_cache(s, 1, &cache));
    assert_int_equal(kdalab_kv_cache_tokens(cache), 2);
    assert_int_equal(kdalab_hybrid_kda_state(s, 1, &st), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_kv_cache(s, 0, &cache), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_kv_cache(s, 2, &cache), KDALAB_EINVAL);
    assert_null(kdalab_hybrid_config_of(s));
    assert_int_equal(kdalab_hybrid_prefill(s, 1, x, y, NULL), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_decode(s, x, y, NULL), KDALAB_EINVAL);
    kdalab_hybrid_weights w;
    assert_int_equal(kdalab_hybrid_layer_weights(s, 0, &w), KDALAB_EINVAL);
    OK(kdalab_hybrid_reset(s));
    assert_int_equal(kdalab_hybrid_position(s), 0);
    assert_int_equal(kdalab_kv_cache_tokens(cache), 0);
    kdalab_hybrid_free(s);

    theta[3] = INFINITY;
    assert_int_equal(kdalab_hybrid_new_model(&c.model, theta, &s), KDALAB_ENONFINITE);
    assert_null(s);
    kdalab_hybrid_config hc = kdalab_hybrid_config_default();
    OK(kdalab_hybrid_new_random(&hc, 1, &s));
    assert_int_equal(kdalab_hybrid_prefill_tokens(s, 1, tokens, logits), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_model(s, NULL, NULL), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_save(s, "/tmp"), KDALAB_EINVAL);
    kdalab_hybrid_free(s);
    free(theta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_kda_attention),
        cmocka_unit_test(test_every_mixer),
        cmocka_unit_test(test_gate_designs),
        cmocka_unit_test(test_checkpoint_errors),
        cmocka_unit_test(test_checkpoint_layers_out_of_range),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests_name("hybrid_trained", tests, NULL, NULL);
}
