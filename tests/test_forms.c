/*
 * tests/test_forms.c — what every form must compute, beyond the golden cases:
 * hand-computed values; causality; no h0 means a zero state; the range
 * premise of the sub-chunk experiment (rescaled overflows, safe does not);
 * attention and its KV cache; the bf16 / fp16 rounding.
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
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_causality_every_form),
        cmocka_unit_test(test_no_h0_is_zero_state),
        cmocka_unit_test(test_rescaled_overflows_safe_does_not),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_low_precision_rounding),
    };
    return cmocka_run_group_tests_name("forms", tests, NULL, NULL);
}
