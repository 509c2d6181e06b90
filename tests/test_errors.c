/*
 * tests/test_errors.c — invalid inputs get their status and leave outputs
 * untouched, in every form: empty sequences, overflow reported, sizes whose
 * counts overflow, messages that name the argument and its index.
 */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define SENTINEL 12345.0

/* A tiny valid KDA problem whose arrays the error tests spoil one at a time. */
typedef struct {
    kdalab_dims d;
    double q[2 * 3], k[2 * 3], v[2 * 2], g[2 * 3], beta[2], h0[3 * 2];
    double o[2 * 2], ht[3 * 2];
} tiny;

static void tiny_init(tiny *t)
{
    t->d = (kdalab_dims){.B = 1, .T = 2, .H = 1, .K = 3, .V = 2};
    for (int i = 0; i < 6; i++) {
        t->q[i] = 0.1 * (i + 1);
        t->k[i] = 0.2 * (i - 2);
        t->g[i] = -0.1 * i;
        t->h0[i] = 0.5;
    }
    for (int i = 0; i < 4; i++) {
        t->v[i] = i;
        t->o[i] = SENTINEL;
    }
    for (int i = 0; i < 6; i++)
        t->ht[i] = SENTINEL;
    t->beta[0] = 0.5;
    t->beta[1] = 1.0;
}

/* Every form (recurrent and chunkwise, f64 and f32) must return `want` on
 * this problem and leave o and ht untouched. The f32 forms get float copies
 * of the tiny arrays (dims may claim more, which is what is being tested). */
static void expect_status_all_forms(const char *what, tiny *t, double scale,
                                    kdalab_status want)
{
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    float q[6], k[6], v[4], g[6], beta[2], h0[6], o[4], ht[6];
    for (int i = 0; i < 6; i++) {
        q[i] = (float)t->q[i]; k[i] = (float)t->k[i]; g[i] = (float)t->g[i];
        h0[i] = (float)t->h0[i]; ht[i] = (float)SENTINEL;
    }
    for (int i = 0; i < 4; i++) {
        v[i] = (float)t->v[i];
        o[i] = (float)SENTINEL;
    }
    beta[0] = (float)t->beta[0];
    beta[1] = (float)t->beta[1];
    for (int form = 0; form < 4; form++) {
        const kdalab_chunk_opts *op = form & 1 ? &opts : NULL;
        kdalab_status s;
        if (form & 2)
            s = op ? kdalab_chunk_f32(&t->d, KDALAB_KDA, (float)scale, q, k, v, g, beta, h0, o,
                                      ht, op, NULL)
                   : kdalab_recurrent_f32(&t->d, KDALAB_KDA, (float)scale, q, k, v, g, beta,
                                          h0, o, ht);
        else
            s = run_f64(op, KDALAB_KDA, &t->d, scale, t->q, t->k, t->v, t->g, t->beta, t->h0,
                        t->o, t->ht, NULL);
        if (s != want)
            fail_msg("%s (form %d): got '%s', want '%s'", what, form, kdalab_strerror(s),
                     kdalab_strerror(want));
        assert_true(strlen(kdalab_last_error()) > 0); /* a detail was recorded */
        for (int i = 0; i < 4; i++)
            assert_true(t->o[i] == SENTINEL && o[i] == (float)SENTINEL);
        for (int i = 0; i < 6; i++)
            assert_true(t->ht[i] == SENTINEL && ht[i] == (float)SENTINEL);
    }
}

static void test_invalid_inputs(void **state)
{
    (void)state;
    tiny t;
    tiny_init(&t);
    kdalab_status s = kdalab_recurrent_f64(&t.d, KDALAB_KDA, 1.0, NULL, t.k, t.v, t.g, t.beta,
                                           NULL, t.o, NULL);
    assert_int_equal(s, KDALAB_ENULL);
    s = kdalab_chunk_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, NULL, t.beta, NULL, t.o, NULL,
                         NULL, NULL);
    assert_int_equal(s, KDALAB_ENULL); /* KDA without g */
    s = kdalab_recurrent_f64(&t.d, KDALAB_DELTANET, 1.0, t.q, t.k, t.v, NULL, NULL, NULL,
                             t.o, NULL);
    assert_int_equal(s, KDALAB_ENULL); /* DeltaNet without beta */
    assert_int_equal(kdalab_recurrent_f64(NULL, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta,
                                          NULL, t.o, NULL), KDALAB_ENULL);
    assert_true(t.o[0] == SENTINEL);

    tiny_init(&t); t.d.K = 0; expect_status_all_forms("K = 0", &t, 1.0, KDALAB_ESIZE);
    tiny_init(&t); t.d.V = 0; expect_status_all_forms("V = 0", &t, 1.0, KDALAB_ESIZE);
    tiny_init(&t); t.d.B = 0; expect_status_all_forms("B = 0", &t, 1.0, KDALAB_ESIZE);
    tiny_init(&t); t.d.H = 0; expect_status_all_forms("H = 0", &t, 1.0, KDALAB_ESIZE);
    tiny_init(&t); t.d.T = (size_t)1 << 62; t.d.H = 16;
    expect_status_all_forms("T*H*K overflows", &t, 1.0, KDALAB_EOVERFLOW);
    tiny_init(&t); t.d.K = SIZE_MAX / 2; t.d.T = 0;
    expect_status_all_forms("K*V overflows", &t, 1.0, KDALAB_EOVERFLOW);
    tiny_init(&t); t.g[4] = 0.25; expect_status_all_forms("g > 0", &t, 1.0, KDALAB_EDOMAIN);
    tiny_init(&t); t.beta[1] = 2.5;
    expect_status_all_forms("beta > 2", &t, 1.0, KDALAB_EDOMAIN);
    tiny_init(&t); t.beta[0] = -0.1;
    expect_status_all_forms("beta < 0", &t, 1.0, KDALAB_EDOMAIN);
    tiny_init(&t); expect_status_all_forms("scale 0", &t, 0.0, KDALAB_EDOMAIN);
    tiny_init(&t); expect_status_all_forms("scale NaN", &t, NAN, KDALAB_EDOMAIN);
    tiny_init(&t); t.q[2] = NAN; expect_status_all_forms("NaN in q", &t, 1.0, KDALAB_ENONFINITE);
    tiny_init(&t); t.k[5] = INFINITY;
    expect_status_all_forms("Inf in k", &t, 1.0, KDALAB_ENONFINITE);
    tiny_init(&t); t.v[3] = NAN; expect_status_all_forms("NaN in v", &t, 1.0, KDALAB_ENONFINITE);
    tiny_init(&t); t.g[1] = -INFINITY;
    expect_status_all_forms("-Inf in g", &t, 1.0, KDALAB_ENONFINITE);
    tiny_init(&t); t.h0[0] = NAN;
    expect_status_all_forms("NaN in h0", &t, 1.0, KDALAB_ENONFINITE);

    /* chunk options */
    tiny_init(&t);
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = 0;
    assert_int_equal(kdalab_chunk_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta, NULL,
                                      t.o, t.ht, &o, NULL), KDALAB_EINVAL);
    o = kdalab_chunk_opts_default();
    o.subchunk = 0;
    assert_int_equal(kdalab_chunk_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta, NULL,
                                      t.o, t.ht, &o, NULL), KDALAB_EINVAL);
    o = kdalab_chunk_opts_default();
    o.precision = KDALAB_BF16; /* only the float32 form emulates storage */
    assert_int_equal(kdalab_chunk_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta, NULL,
                                      t.o, t.ht, &o, NULL), KDALAB_EINVAL);
    o = kdalab_chunk_opts_default();
    o.decay = (kdalab_decay_mode)42;
    assert_int_equal(kdalab_chunk_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta, NULL,
                                      t.o, t.ht, &o, NULL), KDALAB_EINVAL);
    assert_int_equal(kdalab_recurrent_f64(&t.d, (kdalab_mechanism)9, 1.0, t.q, t.k, t.v, t.g,
                                          t.beta, NULL, t.o, t.ht), KDALAB_EINVAL);
    for (int i = 0; i < 4; i++)
        assert_true(t.o[i] == SENTINEL);

    /* the decode step */
    double S[6] = {1, 2, 3, 4, 5, 6}, out[2] = {SENTINEL, SENTINEL};
    assert_int_equal(kdalab_step_f64(KDALAB_KDA, 3, 2, 1.0, t.q, t.k, t.v, NULL, 0.5, S, out),
                     KDALAB_ENULL);
    assert_int_equal(kdalab_step_f64(KDALAB_KDA, 3, 2, 1.0, t.q, t.k, t.v, t.g, 3.0, S, out),
                     KDALAB_EDOMAIN);
    assert_int_equal(kdalab_step_f64(KDALAB_KDA, 0, 2, 1.0, t.q, t.k, t.v, t.g, 0.5, S, out),
                     KDALAB_ESIZE);
    t.g[0] = 1;
    assert_int_equal(kdalab_step_f64(KDALAB_KDA, 3, 2, 1.0, t.q, t.k, t.v, t.g, 0.5, S, out),
                     KDALAB_EDOMAIN);
    assert_true(S[0] == 1 && S[5] == 6 && out[0] == SENTINEL);

    /* names round-trip, unknown names are errors */
    kdalab_mechanism m;
    kdalab_decay_mode dm;
    assert_int_equal(kdalab_mechanism_parse("gated_deltanet", &m), KDALAB_OK);
    assert_int_equal(m, KDALAB_GATED_DELTANET);
    assert_int_equal(kdalab_mechanism_parse("mamba", &m), KDALAB_EINVAL);
    assert_int_equal(kdalab_decay_parse("anchored", &dm), KDALAB_OK);
    assert_int_equal(dm, KDALAB_DECAY_ANCHORED);
    assert_string_equal(kdalab_strerror(KDALAB_EDOMAIN),
                        "a value is outside its domain (g > 0, beta outside [0,2], scale <= 0)");
}

/* T = 0 is legal: nothing to write to o, and ht is h0 (or zero). */
static void test_empty_sequence(void **state)
{
    (void)state;
    kdalab_dims d = {.B = 1, .T = 0, .H = 2, .K = 2, .V = 3};
    double h0[12], ht[12];
    for (int i = 0; i < 12; i++) {
        h0[i] = i;
        ht[i] = SENTINEL;
    }
    assert_int_equal(kdalab_chunk_f64(&d, KDALAB_KDA, 1.0, NULL, NULL, NULL, NULL, NULL, h0,
                                      NULL, ht, NULL, NULL), KDALAB_OK);
    for (int i = 0; i < 12; i++)
        assert_true(ht[i] == h0[i]);
    assert_int_equal(kdalab_recurrent_f64(&d, KDALAB_KDA, 1.0, NULL, NULL, NULL, NULL, NULL,
                                          NULL, NULL, ht), KDALAB_OK);
    for (int i = 0; i < 12; i++)
        assert_true(ht[i] == 0);
}

static void test_overflow_is_reported(void **state)
{
    (void)state;
    kdalab_dims d = {.B = 1, .T = 2, .H = 1, .K = 2, .V = 2};
    double big[4] = {1e200, 1e200, 1e200, 1e200}, v[4] = {1, 2, 3, 4}, beta[2] = {1, 1};
    double o[4], ht[4];
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    assert_int_equal(kdalab_attention_f64(&d, 1.0, big, big, v, o), KDALAB_ERANGE);
    assert_true(strstr(kdalab_last_error(), "non-finite") != NULL);
    assert_int_equal(kdalab_recurrent_f64(&d, KDALAB_DELTANET, 1.0, big, big, v, NULL, beta,
                                          NULL, o, ht), KDALAB_ERANGE);
    assert_int_equal(kdalab_chunk_f64(&d, KDALAB_DELTANET, 1.0, big, big, v, NULL, beta, NULL,
                                      o, ht, &opts, NULL), KDALAB_ERANGE);
    double S[4] = {0, 0, 0, 0};
    assert_int_equal(kdalab_step_f64(KDALAB_LINEAR_ATTENTION, 2, 2, 1.0, big, big, big, NULL,
                                     0, S, o), KDALAB_ERANGE);
    kdalab_kv_cache *cache = kdalab_kv_cache_new(1, 2, 2);
    assert_int_equal(kdalab_kv_cache_append(cache, big, v), KDALAB_OK);
    assert_int_equal(kdalab_kv_cache_attend(cache, 1.0, big, o), KDALAB_ERANGE);
    kdalab_kv_cache_free(cache);
    /* and a normal call clears the detail again */
    double one[4] = {0.5, 0.5, 0.5, 0.5};
    assert_int_equal(kdalab_attention_f64(&d, 1.0, one, one, v, o), KDALAB_OK);
    assert_string_equal(kdalab_last_error(), "");
}

/* Entry points sized by one count n refuse an n whose bytes overflow with
 * KDALAB_EOVERFLOW before reading anything (a read of n values runs off the
 * 4-element arrays); an empty checkpoint directory is invalid (it named "/"). */
static void test_counts_overflow_and_empty_dir(void **state)
{
    (void)state;
    const size_t n = SIZE_MAX / 2; /* n * 8 and n * 4 overflow */
    double x[4] = {NAN, 0, 0, 0}, y[4] = {0};
    float xf[4] = {NAN, 0, 0, 0}, yf[4] = {0};
    unsigned char dec[4] = {1, 1, 1, 1};
    assert_int_equal(kdalab_lower_bound_gate_f64(n, -1, x, y), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_lower_bound_gate_bwd_f64(n, -1, x, x, y), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_lower_bound_gate_f32(n, -1, xf, yf), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_lower_bound_gate_bwd_f32(n, -1, xf, xf, yf), KDALAB_EOVERFLOW);
    assert_non_null(strstr(kdalab_last_error(), "overflow"));
    assert_int_equal(kdalab_silu_fwd_f64(n, x, y), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_silu_bwd_f64(n, x, x, y), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_swiglu_fwd_f64(n, x, x, y), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_swiglu_bwd_f64(n, x, x, x, y, y), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_silu_fwd_f32(n, xf, yf), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_swiglu_bwd_f32(n, xf, xf, xf, yf, yf), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_check_values_f64(KDALAB_RULE_FINITE, "x", x, n, NULL),
                     KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_check_values_f32(KDALAB_RULE_FINITE, "x", xf, n, NULL),
                     KDALAB_EOVERFLOW);
    kdalab_adamw_config ac = {1e-3, 1e-4, 0.9, 0.999, 1e-8, 0.1, 1.0, 1, 10};
    double m[4] = {0}, v[4] = {0};
    float mf[4] = {0}, vf[4] = {0};
    assert_int_equal(kdalab_adamw_step_f64(&ac, 0, n, y, x, m, v, dec, NULL), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_adamw_step_f32(&ac, 0, n, yf, xf, mf, vf, dec, NULL),
                     KDALAB_EOVERFLOW);

    kdalab_model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.vocab = 5, mc.D = 4, mc.H = 2, mc.L = 1, mc.F = 4, mc.mixer[0] = KDALAB_MIXER_KDA;
    kdalab_hybrid *s = (kdalab_hybrid *)&mc; /* set to NULL on refusal */
    assert_int_equal(kdalab_hybrid_load("", &s), KDALAB_EINVAL);
    assert_null(s);
    assert_non_null(strstr(kdalab_last_error(), "dir is \"\""));
    assert_int_equal(kdalab_checkpoint_read_config("", &mc), KDALAB_EINVAL);
    size_t n_params;
    assert_int_equal(kdalab_model_size(&mc, &n_params, NULL), KDALAB_OK);
    double *theta = calloc(n_params, sizeof *theta);
    assert_non_null(theta);
    assert_int_equal(kdalab_checkpoint_write("", &mc, theta, NULL), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_new_model(&mc, theta, &s), KDALAB_OK);
    assert_int_equal(kdalab_hybrid_save(s, ""), KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "dir is \"\""));
    kdalab_hybrid_free(s);
    free(theta);
}

/* Messages name the caller's argument, its index in the caller's shape and
 * the rule: g[b, t, h, k], not a flat index; a gate's overflow names the
 * gate's output, not "the state". */
static void test_messages_name_argument_and_index(void **state)
{
    (void)state;
    tiny t;
    tiny_init(&t); /* B = 1, T = 2, H = 1, K = 3, V = 2 */
    t.g[1 * 3 + 2] = 0.25;
    assert_int_equal(kdalab_recurrent_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta,
                                          t.h0, t.o, t.ht), KDALAB_EDOMAIN);
    assert_non_null(strstr(kdalab_last_error(), "g[0, 1, 0, 2] = 0.25 > 0"));
    tiny_init(&t);
    t.h0[2 * 2 + 1] = NAN;
    assert_int_equal(kdalab_chunk_f64(&t.d, KDALAB_KDA, 1.0, t.q, t.k, t.v, t.g, t.beta, t.h0,
                                      t.o, t.ht, NULL, NULL), KDALAB_ENONFINITE);
    assert_non_null(strstr(kdalab_last_error(), "h0[0, 0, 2, 1] is nan"));
    double x[2 * 2 * 3] = {0}, A_log[2] = {0, 800}, g[2 * 2 * 3];
    assert_int_equal(kdalab_kda_gate_f64(2, 2, 3, x, A_log, NULL, g), KDALAB_ERANGE);
    assert_non_null(strstr(kdalab_last_error(), "KDA gate: g[0, 1, 0] is -inf"));
    assert_non_null(strstr(kdalab_last_error(), "A_log"));
    assert_null(strstr(kdalab_last_error(), "state"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_inputs),
        cmocka_unit_test(test_empty_sequence),
        cmocka_unit_test(test_overflow_is_reported),
        cmocka_unit_test(test_counts_overflow_and_empty_dir),
        cmocka_unit_test(test_messages_name_argument_and_index),
    };
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
