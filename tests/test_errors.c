/*
 * tests/test_errors.c — invalid inputs get their status and leave outputs
 * untouched; hand-computed values; causality; no-h0 means a zero state; the
 * range premise of the sub-chunk experiment; attention and its KV cache;
 * the bf16 / fp16 rounding.
 */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define F64_TOL 1e-12
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

/* ---- hand-computed values --------------------------------------------------- */

static void test_hand_computed(void **state)
{
    (void)state;
    /* T = 1, K = 2, V = 3, S0 = [[1,2,3],[4,5,6]], k = 0, beta = 0, q = [1,0],
     * scale 1: o = row 0 of S0 = [1,2,3]; with a KDA gate [ln 1/2, 0] row 0
     * halves: the state becomes [[0.5,1,1.5],[4,5,6]] and o = [0.5,1,1.5]. */
    kdalab_dims d = {.B = 1, .T = 1, .H = 1, .K = 2, .V = 3};
    double S0[6] = {1, 2, 3, 4, 5, 6}, q[2] = {1, 0}, k[2] = {0, 0}, v[3] = {7, 8, 9};
    double beta[1] = {0}, g0[2] = {0, 0}, gh[2] = {log(0.5), 0};
    double o[3], ht[6];
    const double want_decayed[6] = {0.5, 1, 1.5, 4, 5, 6};
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    for (int form = 0; form < 4; form++) {
        const kdalab_chunk_opts *op = form & 1 ? &opts : NULL;
        kdalab_status (*runf)(const kdalab_chunk_opts *, kdalab_mechanism, const kdalab_dims *,
                              double, const double *, const double *, const double *,
                              const double *, const double *, const double *, double *,
                              double *, kdalab_report *) = form & 2 ? run_f32 : run_f64;
        const kdalab_mechanism ms[] = {KDALAB_DELTANET, KDALAB_GATED_DELTANET, KDALAB_KDA};
        for (int mi = 0; mi < 3; mi++) {
            assert_int_equal(runf(op, ms[mi], &d, 1.0, q, k, v, g0, beta, S0, o, ht, NULL),
                             KDALAB_OK);
            assert_true(o[0] == 1 && o[1] == 2 && o[2] == 3);
            for (int i = 0; i < 6; i++)
                assert_true(ht[i] == S0[i]);
        }
        assert_int_equal(runf(op, KDALAB_KDA, &d, 1.0, q, k, v, gh, beta, S0, o, ht, NULL),
                         KDALAB_OK);
        for (int i = 0; i < 6; i++)
            assert_true(fabs(ht[i] - want_decayed[i]) <= 1e-7 * fabs(want_decayed[i]));
        assert_true(fabs(o[0] - 0.5) <= 1e-7 && fabs(o[1] - 1) <= 1e-7 &&
                    fabs(o[2] - 1.5) <= 1e-7);
    }
    /* Decay comes before the delta correction: K = V = 1, S0 = 1, k = 1,
     * v = 0, beta = 1, g = ln 1/2, q = 1, scale 1. Decay first: S' = 1/2,
     * the prediction S'k = 1/2, S = 1/2 + (0 - 1/2) = 0, o = 0. A form that
     * predicts from the undecayed state gets S = 1/2 + (0 - 1) = -1/2. */
    kdalab_dims d1 = {.B = 1, .T = 1, .H = 1, .K = 1, .V = 1};
    double one = 1, zero = 0, half = log(0.5), o1 = SENTINEL, h1;
    for (int form = 0; form < 4; form++) {
        const kdalab_chunk_opts *op = form & 1 ? &opts : NULL;
        for (int mi = 0; mi < 2; mi++) {
            kdalab_mechanism m = mi ? KDALAB_KDA : KDALAB_GATED_DELTANET;
            assert_int_equal((form & 2 ? run_f32 : run_f64)(op, m, &d1, 1.0, &one, &one, &zero,
                                                            &half, &one, &one, &o1, &h1, NULL),
                             KDALAB_OK);
            assert_true(o1 == 0 && h1 == 0);
        }
    }
    double S = 1;
    assert_int_equal(kdalab_step_f64(KDALAB_KDA, 1, 1, 1.0, &one, &one, &zero, &half, 1.0, &S,
                                     &o1), KDALAB_OK);
    assert_true(o1 == 0 && S == 0);
}

/* ---- causality: inputs at positions >= P never reach o[:P] ------------------- */

static void test_causality_every_form(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    kdalab_dims d = {.B = 1, .T = 45, .H = 2, .K = 8, .V = 5}; /* 45 = 2*16 + 13: ragged */
    const size_t P = 37;                                      /* inside the last chunk  */
    const kdalab_mechanism ms[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                   KDALAB_GATED_DELTANET, KDALAB_KDA};
    for (size_t mi = 0; mi < 4; mi++) {
        random_problem a, b;
        random_problem_make(&a, rng, ms[mi], d, -2.0, 1);
        random_problem_make(&b, rng, ms[mi], d, -2.0, 1);
        /* b = a before P, different from P on */
        size_t cut = P * d.H;
        memcpy(b.q, a.q, cut * d.K * sizeof(double));
        memcpy(b.k, a.k, cut * d.K * sizeof(double));
        memcpy(b.g, a.g, cut * d.K * sizeof(double));
        memcpy(b.v, a.v, cut * d.V * sizeof(double));
        memcpy(b.beta, a.beta, cut * sizeof(double));
        memcpy(b.h0, a.h0, n_state(&d) * sizeof(double));
        for (int form = 0; form < 2 * 5; form++) {
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 16;
            o.subchunk = 5;
            o.decay = (kdalab_decay_mode)(form / 2 % 4);
            const kdalab_chunk_opts *op = form / 2 == 4 ? NULL : &o;
            double *oa = malloc(n_v(&d) * sizeof *oa), *ob = malloc(n_v(&d) * sizeof *ob);
            assert_int_equal((form & 1 ? run_f32 : run_f64)(op, ms[mi], &d, 0.5, a.q, a.k, a.v,
                                                            a.g, a.beta, a.h0, oa, NULL, NULL),
                             KDALAB_OK);
            assert_int_equal((form & 1 ? run_f32 : run_f64)(op, ms[mi], &d, 0.5, b.q, b.k, b.v,
                                                            b.g, b.beta, b.h0, ob, NULL, NULL),
                             KDALAB_OK);
            if (memcmp(oa, ob, cut * d.V * sizeof(double)) != 0)
                fail_msg("%s form %d: o[:%zu] changed when inputs at >= %zu changed",
                         kdalab_mechanism_name(ms[mi]), form, P, P);
            assert_true(memcmp(oa + cut * d.V, ob + cut * d.V, d.V * sizeof(double)) != 0);
            free(oa);
            free(ob);
        }
        /* the SIMD path too, at every level this CPU runs (ragged last chunk) */
        for (int lvl = 0; lvl < 3; lvl++) {
            if (!kdalab_simd_level_available((kdalab_simd_level)lvl))
                continue;
            assert_int_equal(kdalab_simd_set_level((kdalab_simd_level)lvl), KDALAB_OK);
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 16;
            size_t nqk = n_qk(&d), nv = n_v(&d), nb = n_bth(&d);
            float *fo[2];
            random_problem *pr[2] = {&a, &b};
            for (int w = 0; w < 2; w++) {
                float *q = to_f32(pr[w]->q, nqk), *k = to_f32(pr[w]->k, nqk);
                float *v = to_f32(pr[w]->v, nv), *g = to_f32(pr[w]->g, nqk);
                float *beta = to_f32(pr[w]->beta, nb), *h0 = to_f32(pr[w]->h0, n_state(&d));
                fo[w] = malloc(nv * sizeof(float));
                assert_int_equal(kdalab_simd_chunk_f32(&d, ms[mi], 0.5f, q, k, v, g, beta, h0,
                                                       fo[w], NULL, &o, NULL),
                                 KDALAB_OK);
                free(q); free(k); free(v); free(g); free(beta); free(h0);
            }
            if (memcmp(fo[0], fo[1], cut * d.V * sizeof(float)) != 0)
                fail_msg("%s SIMD level %d: o[:%zu] changed when inputs at >= %zu changed",
                         kdalab_mechanism_name(ms[mi]), lvl, P, P);
            free(fo[0]);
            free(fo[1]);
        }
        assert_int_equal(kdalab_simd_set_level(KDALAB_SIMD_AUTO), KDALAB_OK);
        /* softmax attention too */
        double *oa = malloc(n_v(&d) * sizeof *oa), *ob = malloc(n_v(&d) * sizeof *ob);
        assert_int_equal(kdalab_attention_f64(&d, 0.5, a.q, a.k, a.v, oa), KDALAB_OK);
        assert_int_equal(kdalab_attention_f64(&d, 0.5, b.q, b.k, b.v, ob), KDALAB_OK);
        assert_memory_equal(oa, ob, cut * d.V * sizeof(double));
        free(oa);
        free(ob);
        random_problem_free(&a);
        random_problem_free(&b);
    }
    gsl_rng_free(rng);
}

/* ---- no initial state means a zero state, whatever the buffers held ---------- */

static void test_no_h0_is_zero_state(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(12);
    kdalab_dims d = {.B = 2, .T = 20, .H = 2, .K = 6, .V = 4};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, d, -1.0, 1);
    double *zeros = calloc(n_state(&d), sizeof *zeros);
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = 8;
    for (int form = 0; form < 4; form++) {
        const kdalab_chunk_opts *op = form & 1 ? &o : NULL;
        double *o1 = malloc(n_v(&d) * sizeof *o1), *o2 = malloc(n_v(&d) * sizeof *o2);
        double *h1 = malloc(n_state(&d) * sizeof *h1), *h2 = malloc(n_state(&d) * sizeof *h2);
        for (size_t i = 0; i < n_state(&d); i++)
            h1[i] = NAN; /* garbage in the output buffer must not leak in */
        for (size_t i = 0; i < n_v(&d); i++)
            o1[i] = 1e308;
        kdalab_status (*r)(const kdalab_chunk_opts *, kdalab_mechanism, const kdalab_dims *,
                           double, const double *, const double *, const double *,
                           const double *, const double *, const double *, double *, double *,
                           kdalab_report *) = form & 2 ? run_f32 : run_f64;
        assert_int_equal(r(op, p.mech, &d, 0.4, p.q, p.k, p.v, p.g, p.beta, NULL, o1, h1, NULL),
                         KDALAB_OK);
        assert_int_equal(r(op, p.mech, &d, 0.4, p.q, p.k, p.v, p.g, p.beta, zeros, o2, h2,
                           NULL), KDALAB_OK);
        assert_memory_equal(o1, o2, n_v(&d) * sizeof *o1);
        assert_memory_equal(h1, h2, n_state(&d) * sizeof *h1);
        free(o1); free(o2); free(h1); free(h2);
    }
    free(zeros);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* ---- the premise of experiment 03 ------------------------------------------- */

static void test_rescaled_overflows_safe_does_not(void **state)
{
    (void)state;
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16), found = 0;
    for (size_t i = 0; i < n; i++) {
        golden_case *c = &cases[i];
        if (strcmp(c->name, "kda_strong_decay") == 0) {
            found = 1;
            double *o = malloc(n_v(&c->dims) * sizeof *o);
            double *ht = malloc(n_state(&c->dims) * sizeof *ht);
            kdalab_chunk_opts opts = kdalab_chunk_opts_default();
            opts.chunk = 64;
            opts.decay = KDALAB_DECAY_RESCALED;
            kdalab_report rep;
            kdalab_status s = run_f32(&opts, c->mech, &c->dims, c->scale, c->q.data, c->k.data,
                                      c->v.data, c->g.data, c->beta.data, c->h0.data, o, ht,
                                      &rep);
            print_message("  rescaled C=64 fp32: status '%s', %zu non-finite in o, largest "
                          "exponent %.1f (ln FLT_MAX = %.1f)\n", kdalab_strerror(s),
                          rep.nonfinite_o, rep.max_exponent, log(FLT_MAX));
            assert_int_equal(s, KDALAB_ERANGE);
            assert_true(rep.nonfinite_o > 0);
            assert_true(rep.max_exponent > log(FLT_MAX));
            opts.decay = KDALAB_DECAY_SAFE;
            s = run_f32(&opts, c->mech, &c->dims, c->scale, c->q.data, c->k.data, c->v.data,
                        c->g.data, c->beta.data, c->h0.data, o, ht, &rep);
            assert_int_equal(s, KDALAB_OK);
            assert_int_equal(rep.nonfinite_o + rep.nonfinite_ht, 0);
            assert_true(rep.max_exponent <= 0); /* safe never forms a positive exponent */
            assert_true(rel_err_f64(o, c->o.data, n_v(&c->dims)) <= 1e-5);
            free(o);
            free(ht);
        }
        golden_free(c);
    }
    assert_true(found);
}

/* ---- finite inputs that overflow: KDALAB_ERANGE, never NaN with OK ---------- */

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
 * 4-element arrays); an empty weights directory is invalid (it named "/"). */
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

    kdalab_hybrid_config cfg = kdalab_hybrid_config_default();
    kdalab_hybrid *s = (kdalab_hybrid *)&cfg; /* set to NULL on refusal */
    assert_int_equal(kdalab_hybrid_new_npy(&cfg, "", &s), KDALAB_EINVAL);
    assert_null(s);
    assert_non_null(strstr(kdalab_last_error(), "dir is \"\""));
    assert_int_equal(kdalab_hybrid_new_random(&cfg, 1, &s), KDALAB_OK);
    assert_int_equal(kdalab_hybrid_save_npy(s, ""), KDALAB_EINVAL);
    kdalab_hybrid_free(s);
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

/* ---- softmax attention and the KV cache ---------------------------------------- */

static void test_attention(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(13);
    kdalab_dims d = {.B = 2, .T = 17, .H = 3, .K = 5, .V = 4};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_LINEAR_ATTENTION, d, 0, 0);
    for (size_t i = 0; i < n_qk(&d); i++)
        p.q[i] *= 30; /* large scores: the running max must keep exp() in range */
    double *o = malloc(n_v(&d) * sizeof *o), *want = malloc(n_v(&d) * sizeof *want);
    const double scale = 2.0;
    assert_int_equal(kdalab_attention_f64(&d, scale, p.q, p.k, p.v, o), KDALAB_OK);
    /* the textbook two-pass softmax, position by position */
    for (size_t b = 0; b < d.B; b++)
        for (size_t h = 0; h < d.H; h++)
            for (size_t t = 0; t < d.T; t++) {
                size_t it = (b * d.T + t) * d.H + h;
                double sc[64], mx = -INFINITY, z = 0;
                for (size_t j = 0; j <= t; j++) {
                    size_t ij = (b * d.T + j) * d.H + h;
                    sc[j] = 0;
                    for (size_t c = 0; c < d.K; c++)
                        sc[j] += scale * p.q[it * d.K + c] * p.k[ij * d.K + c];
                    mx = fmax(mx, sc[j]);
                }
                for (size_t j = 0; j <= t; j++)
                    z += exp(sc[j] - mx);
                for (size_t e = 0; e < d.V; e++) {
                    double s = 0;
                    for (size_t j = 0; j <= t; j++)
                        s += exp(sc[j] - mx) / z * p.v[((b * d.T + j) * d.H + h) * d.V + e];
                    want[it * d.V + e] = s;
                }
            }
    assert_true(rel_err_f64(o, want, n_v(&d)) <= F64_TOL);
    /* float32 form */
    float *qf = to_f32(p.q, n_qk(&d)), *kf = to_f32(p.k, n_qk(&d)), *vf = to_f32(p.v, n_v(&d));
    float *of = malloc(n_v(&d) * sizeof *of);
    assert_int_equal(kdalab_attention_f32(&d, (float)scale, qf, kf, vf, of), KDALAB_OK);
    assert_true(rel_err_f32(of, want, n_v(&d)) <= 1e-5);
    /* decode with a KV cache equals the full causal attention, batch 0 */
    kdalab_kv_cache *cache = kdalab_kv_cache_new(d.H, d.K, d.V);
    assert_non_null(cache);
    double out[3 * 4];
    assert_int_equal(kdalab_kv_cache_attend(cache, scale, p.q, out), KDALAB_ESIZE);
    for (size_t t = 0; t < d.T; t++) {
        size_t i = t * d.H;
        assert_int_equal(kdalab_kv_cache_append(cache, p.k + i * d.K, p.v + i * d.V),
                         KDALAB_OK);
        assert_int_equal(kdalab_kv_cache_attend(cache, scale, p.q + i * d.K, out), KDALAB_OK);
        assert_true(rel_err_f64(out, want + i * d.V, d.H * d.V) <= F64_TOL);
    }
    assert_int_equal(kdalab_kv_cache_tokens(cache), d.T);
    assert_int_equal(kdalab_kv_cache_bytes(cache), d.T * d.H * (d.K + d.V) * sizeof(double));
    assert_int_equal(kdalab_kv_cache_append(cache, NULL, p.v), KDALAB_ENULL);
    /* cleared: empty again, and it fills the same way */
    kdalab_kv_cache_clear(cache);
    kdalab_kv_cache_clear(NULL);
    assert_int_equal(kdalab_kv_cache_tokens(cache), 0);
    assert_int_equal(kdalab_kv_cache_bytes(cache), 0);
    assert_int_equal(kdalab_kv_cache_attend(cache, scale, p.q, out), KDALAB_ESIZE);
    assert_int_equal(kdalab_kv_cache_append(cache, p.k, p.v), KDALAB_OK);
    assert_int_equal(kdalab_kv_cache_attend(cache, scale, p.q, out), KDALAB_OK);
    assert_true(rel_err_f64(out, want, d.H * d.V) <= F64_TOL);
    assert_null(kdalab_kv_cache_new(0, 1, 1));
    kdalab_kv_cache_free(cache);
    assert_int_equal(kdalab_attention_f64(&d, -1.0, p.q, p.k, p.v, o), KDALAB_EDOMAIN);
    free(o); free(want); free(qf); free(kf); free(vf); free(of);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* ---- bf16 / fp16 rounding ------------------------------------------------------- */

static void test_low_precision_rounding(void **state)
{
    (void)state;
    /* bf16: 8 significant bits. 1 + 2^-8 is a tie between 1 and 1 + 2^-7:
     * ties to even gives 1; 1 + 3*2^-8 rounds up to 1 + 2^-6. */
    assert_true(kdalab_round_bf16(1.0f) == 1.0f);
    assert_true(kdalab_round_bf16(1.0f + 0x1p-8f) == 1.0f);
    assert_true(kdalab_round_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    assert_true(kdalab_round_bf16(1.0f + 0x1p-7f) == 1.0f + 0x1p-7f);
    assert_true(kdalab_round_bf16(-3.14159265f) == -3.140625f);
    assert_true(kdalab_round_bf16(1e38f) < INFINITY);    /* fp32's range */
    assert_true(isinf(kdalab_round_bf16(FLT_MAX)));       /* rounds up past the max */
    assert_true(isnan(kdalab_round_bf16(NAN)));
    /* fp16: 11 significant bits, max 65504, subnormals down to 2^-24 */
    assert_true(kdalab_round_fp16(1.0f + 0x1p-11f) == 1.0f);      /* tie -> even */
    assert_true(kdalab_round_fp16(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    assert_true(kdalab_round_fp16(65504.0f) == 65504.0f);
    assert_true(kdalab_round_fp16(65519.0f) == 65504.0f);
    assert_true(isinf(kdalab_round_fp16(65520.0f)));
    assert_true(isinf(kdalab_round_fp16(-1e6f)) && kdalab_round_fp16(-1e6f) < 0);
    assert_true(kdalab_round_fp16(0x1p-24f) == 0x1p-24f);
    assert_true(kdalab_round_fp16(0x1p-26f) == 0.0f);             /* below half the step */
    assert_true(kdalab_round_fp16(3 * 0x1p-26f) == 0x1p-24f);
    assert_true(kdalab_round(KDALAB_FP32, 0.1f) == 0.1f);
    /* ties to even whatever the caller's rounding mode */
    fesetround(FE_UPWARD);
    float up = kdalab_round_fp16(1.0f + 0x1p-12f);
    fesetround(FE_TONEAREST);
    assert_true(up == 1.0f);
    assert_string_equal(kdalab_precision_name(KDALAB_FP16), "fp16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_inputs),
        cmocka_unit_test(test_empty_sequence),
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_causality_every_form),
        cmocka_unit_test(test_no_h0_is_zero_state),
        cmocka_unit_test(test_rescaled_overflows_safe_does_not),
        cmocka_unit_test(test_overflow_is_reported),
        cmocka_unit_test(test_counts_overflow_and_empty_dir),
        cmocka_unit_test(test_messages_name_argument_and_index),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_low_precision_rounding),
    };
    return cmocka_run_group_tests_name("errors and edge cases", tests, NULL, NULL);
}
