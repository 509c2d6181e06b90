/*
 * tests/test_properties.c — properties over random shapes (GSL random
 * numbers), the identities that tie the lineage together, and the cases
 * drawn from public reports of production kernels failing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>

#include "common.h"

#define F64_TOL 1e-12
#define F32_TOL 1e-5

/* every row of the mechanism table, in its order */
#define MECH(i) ((kdalab_mechanism)((i) % KDALAB_N_MECHANISMS))

/* o and ht of one run, in float64 */
typedef struct {
    double *o, *ht;
} outputs;

static outputs outputs_alloc(const kdalab_dims *d)
{
    outputs r = {malloc((n_v(d) ? n_v(d) : 1) * sizeof(double)),
                 malloc(n_state(d) * sizeof(double))};
    assert_non_null(r.o);
    assert_non_null(r.ht);
    /* garbage, so a form that reads its outputs before writing them shows */
    for (size_t i = 0; i < n_v(d); i++)
        r.o[i] = NAN;
    for (size_t i = 0; i < n_state(d); i++)
        r.ht[i] = 1e300;
    return r;
}

static void outputs_free(outputs *r) { free(r->o); free(r->ht); }

static kdalab_status run(const random_problem *p, const kdalab_chunk_opts *opts, int f32,
                         double scale, outputs *out)
{
    return (f32 ? run_ab_f32 : run_ab_f64)(opts, p->mech, &p->dims, scale, p->q, p->k, p->v,
                                           p->g, p->beta, p->a, p->b, p->h0, out->o, out->ht,
                                           NULL);
}

/* max of the o and ht relative errors of a against b */
static double out_err(const kdalab_dims *d, const outputs *a, const outputs *b)
{
    double eo = rel_err_f64(a->o, b->o, n_v(d)), eh = rel_err_f64(a->ht, b->ht, n_state(d));
    return eo > eh ? eo : eh;
}

static void expect_close(const char *what, double e, double tol)
{
    if (!(e <= tol))
        fail_msg("%s: relative error %.3g > %.1g", what, e, tol);
}

/* ---- chunkwise == recurrent over random shapes ---------------------------- */

static void test_chunk_equals_recurrent_random_shapes(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(1);
    for (int trial = 0; trial < 60; trial++) {
        kdalab_dims d = {.B = 1 + gsl_rng_uniform_int(rng, 2),
                         .T = gsl_rng_uniform_int(rng, 90), /* includes 0 and 1 */
                         .H = 1 + gsl_rng_uniform_int(rng, 3),
                         .K = 1 + gsl_rng_uniform_int(rng, 20),
                         .V = 1 + gsl_rng_uniform_int(rng, 20)};
        if (trial == 0) d.T = 0;
        if (trial == 1) d.T = 1;
        kdalab_mechanism m = MECH(trial);
        random_problem p;
        random_problem_make(&p, rng, m, d, -3.0, trial % 3 != 0);
        kdalab_chunk_opts o = kdalab_chunk_opts_default();
        o.chunk = 1 + gsl_rng_uniform_int(rng, 40); /* C = 1, C > T, C not dividing T */
        if (trial == 2) o.chunk = 1;
        if (trial == 3) o.chunk = d.T + 5;
        o.subchunk = 1 + gsl_rng_uniform_int(rng, 12);
        o.decay = (kdalab_decay_mode)gsl_rng_uniform_int(rng, 4);
        double scale = kdalab_default_scale(d.K);
        for (int f32 = 0; f32 <= 1; f32++) {
            outputs ref = outputs_alloc(&d), got = outputs_alloc(&d);
            assert_int_equal(run(&p, NULL, f32, scale, &ref), KDALAB_OK);
            assert_int_equal(run(&p, &o, f32, scale, &got), KDALAB_OK);
            char what[160];
            snprintf(what, sizeof what,
                     "%s %s B=%zu T=%zu H=%zu K=%zu V=%zu C=%zu c=%zu %s",
                     kdalab_mechanism_name(m), f32 ? "f32" : "f64", d.B, d.T, d.H, d.K, d.V,
                     o.chunk, o.subchunk, kdalab_decay_name(o.decay));
            expect_close(what, out_err(&d, &got, &ref), f32 ? F32_TOL : F64_TOL);
            outputs_free(&ref);
            outputs_free(&got);
        }
        random_problem_free(&p);
    }
    gsl_rng_free(rng);
}

/* ---- decode steps == recurrent --------------------------------------------- */

static void test_decode_steps_equal_recurrent(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(2);
    for (size_t mi = 0; mi < KDALAB_N_MECHANISMS; mi++) {
        kdalab_dims d = {.B = 2, .T = 23, .H = 2, .K = 9, .V = 5};
        if (kdalab_mechanism_has_ab(MECH(mi)))
            continue; /* the DPLR row takes a, b: tests/test_dplr.c */
        random_problem p;
        random_problem_make(&p, rng, MECH(mi), d, -1.0, 1);
        double scale = 0.7;
        outputs ref = outputs_alloc(&d);
        assert_int_equal(run(&p, NULL, 0, scale, &ref), KDALAB_OK);
        size_t gw = kdalab_mechanism_g_width(p.mech, d.K);
        double *o = malloc(n_v(&d) * sizeof *o), *S = malloc(n_state(&d) * sizeof *S);
        memcpy(S, p.h0, n_state(&d) * sizeof *S);
        for (size_t b = 0; b < d.B; b++)
            for (size_t t = 0; t < d.T; t++)
                for (size_t h = 0; h < d.H; h++) {
                    size_t i = (b * d.T + t) * d.H + h;
                    assert_int_equal(kdalab_step_f64(p.mech, d.K, d.V, scale, p.q + i * d.K,
                                                     p.k + i * d.K, p.v + i * d.V,
                                                     p.g + i * gw, p.beta[i],
                                                     S + (b * d.H + h) * d.K * d.V,
                                                     o + i * d.V),
                                     KDALAB_OK);
                }
        outputs got = {o, S};
        expect_close(kdalab_mechanism_name(p.mech), out_err(&d, &got, &ref), F64_TOL);
        outputs_free(&got);
        outputs_free(&ref);
        random_problem_free(&p);
    }
    gsl_rng_free(rng);
}

/* ---- the initial state is honoured: T1 then T2 from ht equals T1+T2 -------- */

static void test_initial_state_honoured(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(3);
    for (size_t mi = 0; mi < KDALAB_N_MECHANISMS; mi++)
        for (int chunked = 0; chunked <= 1 && !kdalab_mechanism_has_ab(MECH(mi)); chunked++) {
            /* (the DPLR row takes a, b: tests/test_dplr.c) */
            kdalab_dims d = {.B = 1, .T = 40, .H = 2, .K = 8, .V = 6};
            random_problem p;
            random_problem_make(&p, rng, MECH(mi), d, -0.5, 1);
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 16;
            const kdalab_chunk_opts *op = chunked ? &o : NULL;
            outputs whole = outputs_alloc(&d);
            assert_int_equal(run(&p, op, 0, 0.5, &whole), KDALAB_OK);
            /* the first 25 positions, then the last 15 from the state they left */
            size_t T1 = 25, T2 = d.T - T1, gw = kdalab_mechanism_g_width(p.mech, d.K);
            kdalab_dims d1 = d, d2 = d;
            d1.T = T1;
            d2.T = T2;
            outputs a = outputs_alloc(&d1), b2 = outputs_alloc(&d2);
            assert_int_equal(run_f64(op, p.mech, &d1, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0,
                                     a.o, a.ht, NULL), KDALAB_OK);
            size_t o1 = T1 * d.H;
            assert_int_equal(run_f64(op, p.mech, &d2, 0.5, p.q + o1 * d.K, p.k + o1 * d.K,
                                     p.v + o1 * d.V, p.g + o1 * gw, p.beta + o1, a.ht, b2.o,
                                     b2.ht, NULL), KDALAB_OK);
            expect_close("second half o", rel_err_f64(b2.o, whole.o + o1 * d.V, n_v(&d2)),
                         F64_TOL);
            expect_close("final state", rel_err_f64(b2.ht, whole.ht, n_state(&d)), F64_TOL);
            /* and the state really mattered: a zero start gives something else */
            outputs z = outputs_alloc(&d2);
            assert_int_equal(run_f64(op, p.mech, &d2, 0.5, p.q + o1 * d.K, p.k + o1 * d.K,
                                     p.v + o1 * d.V, p.g + o1 * gw, p.beta + o1, NULL, z.o,
                                     z.ht, NULL), KDALAB_OK);
            assert_true(rel_err_f64(z.o, b2.o, n_v(&d2)) > 1e-3);
            outputs_free(&whole); outputs_free(&a); outputs_free(&b2); outputs_free(&z);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
}

/* ---- beta = 0 leaves the state unchanged ------------------------------------ */

static void test_beta_zero_keeps_state(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(4);
    for (size_t mi = 0; mi < KDALAB_N_MECHANISMS; mi++) /* the rows with the delta rule */
        for (int chunked = 0; chunked <= 1 && kdalab_mechanism_has_delta(MECH(mi)); chunked++) {
            kdalab_dims d = {.B = 1, .T = 30, .H = 1, .K = 7, .V = 4};
            random_problem p;
            random_problem_make(&p, rng, MECH(mi), d, 0.0, 1); /* g = 0: no decay */
            for (size_t i = 0; i < n_bth(&d); i++)
                p.beta[i] = 0;
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 8;
            outputs r = outputs_alloc(&d);
            assert_int_equal(run(&p, chunked ? &o : NULL, 0, 1.0, &r), KDALAB_OK);
            for (size_t i = 0; i < n_state(&d); i++)
                assert_true(r.ht[i] == p.h0[i]); /* exactly: nothing was added */
            outputs_free(&r);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
}

/* ---- DeltaNet, beta = 1, orthonormal keys: exact recall ---------------------- */

static void test_deltanet_orthonormal_recall(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(5);
    const size_t K = 12, V = 5, N = 12; /* as many associations as dimensions */
    /* orthonormal keys: the Q factor of a random Gaussian matrix (GSL) */
    gsl_matrix *A = gsl_matrix_alloc(K, K), *Q = gsl_matrix_alloc(K, K),
               *R = gsl_matrix_alloc(K, K);
    gsl_vector *tau = gsl_vector_alloc(K);
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++)
            gsl_matrix_set(A, i, j, gsl_ran_gaussian(rng, 1.0));
    gsl_linalg_QR_decomp(A, tau);
    gsl_linalg_QR_unpack(A, tau, Q, R);
    /* write N pairs (overwriting a random initial state), then read them back */
    kdalab_dims d = {.B = 1, .T = 2 * N, .H = 1, .K = K, .V = V};
    double *q = calloc(n_qk(&d), sizeof *q), *k = calloc(n_qk(&d), sizeof *k);
    double *v = calloc(n_v(&d), sizeof *v), *beta = calloc(d.T, sizeof *beta);
    double *h0 = malloc(K * V * sizeof *h0), *o = malloc(n_v(&d) * sizeof *o);
    for (size_t i = 0; i < K * V; i++)
        h0[i] = gsl_ran_gaussian(rng, 1.0);
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < K; c++) {
            k[n * K + c] = gsl_matrix_get(Q, c, n);       /* write key n       */
            q[(N + n) * K + c] = gsl_matrix_get(Q, c, n); /* query it later    */
        }
    for (size_t n = 0; n < N; n++) {
        beta[n] = 1;
        for (size_t j = 0; j < V; j++)
            v[n * V + j] = gsl_ran_gaussian(rng, 1.0);
    }
    for (int chunked = 0; chunked <= 1; chunked++) {
        kdalab_chunk_opts opts = kdalab_chunk_opts_default();
        opts.chunk = 5;
        assert_int_equal(run_f64(chunked ? &opts : NULL, KDALAB_DELTANET, &d, 1.0, q, k, v,
                                 NULL, beta, h0, o, NULL, NULL), KDALAB_OK);
        /* positions N.. have k = 0, beta = 0: reads of the final state */
        expect_close("recalled values", rel_err_f64(o + N * V, v, N * V), F64_TOL);
    }
    free(q); free(k); free(v); free(beta); free(h0); free(o);
    gsl_matrix_free(A); gsl_matrix_free(Q); gsl_matrix_free(R); gsl_vector_free(tau);
    gsl_rng_free(rng);
}

/* ---- the lineage collapses: KDA(g=0) = DeltaNet, KDA(g per head) = GDN -------- */

static void test_kda_reduces_to_ancestors(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(6);
    kdalab_dims d = {.B = 2, .T = 37, .H = 2, .K = 10, .V = 6};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_GATED_DELTANET, d, -2.0, 1);
    double *g0 = calloc(n_qk(&d), sizeof *g0), *gk = malloc(n_qk(&d) * sizeof *gk);
    for (size_t i = 0; i < n_bth(&d); i++)
        for (size_t c = 0; c < d.K; c++)
            gk[i * d.K + c] = p.g[i]; /* the GDN gate, copied to every channel */
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    opts.chunk = 16;
    opts.subchunk = 4;
    for (int chunked = 0; chunked <= 1; chunked++) {
        const kdalab_chunk_opts *op = chunked ? &opts : NULL;
        outputs kda = outputs_alloc(&d), anc = outputs_alloc(&d);
        assert_int_equal(run_f64(op, KDALAB_KDA, &d, 0.3, p.q, p.k, p.v, g0, p.beta, p.h0,
                                 kda.o, kda.ht, NULL), KDALAB_OK);
        assert_int_equal(run_f64(op, KDALAB_DELTANET, &d, 0.3, p.q, p.k, p.v, NULL, p.beta,
                                 p.h0, anc.o, anc.ht, NULL), KDALAB_OK);
        expect_close("KDA with g = 0 vs DeltaNet", out_err(&d, &kda, &anc), F64_TOL);
        assert_int_equal(run_f64(op, KDALAB_KDA, &d, 0.3, p.q, p.k, p.v, gk, p.beta, p.h0,
                                 kda.o, kda.ht, NULL), KDALAB_OK);
        assert_int_equal(run_f64(op, KDALAB_GATED_DELTANET, &d, 0.3, p.q, p.k, p.v, p.g,
                                 p.beta, p.h0, anc.o, anc.ht, NULL), KDALAB_OK);
        expect_close("KDA with a shared g vs Gated DeltaNet", out_err(&d, &kda, &anc),
                     F64_TOL);
        outputs_free(&kda);
        outputs_free(&anc);
    }
    free(g0);
    free(gk);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* ---- extreme decay (public reports: -26 per step turning prefill into NaN;
 *      unbounded gates overflowing past -5.5 per step over 16 tokens) --------- */

static void extreme_case(gsl_rng *rng, double g_fixed, int per_token_random, int one_fast,
                         size_t C, size_t T)
{
    kdalab_dims d = {.B = 1, .T = T, .H = 2, .K = 16, .V = 8};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, d, -0.01, 1);
    for (size_t i = 0; i < n_bth(&d); i++) {
        double gi = per_token_random ? -1000.0 * gsl_rng_uniform(rng) : g_fixed;
        for (size_t c = 0; c < d.K; c++)
            p.g[i * d.K + c] = one_fast ? (c == 3 ? -10.0 : -1e-3) : gi;
    }
    kdalab_chunk_opts o = kdalab_chunk_opts_default(); /* safe sub-chunks of 16 */
    o.chunk = C;
    for (int f32 = 0; f32 <= 1; f32++) {
        outputs ref = outputs_alloc(&d), got = outputs_alloc(&d);
        assert_int_equal(run(&p, NULL, f32, 0.25, &ref), KDALAB_OK);
        kdalab_status s = run(&p, &o, f32, 0.25, &got);
        char what[128];
        snprintf(what, sizeof what, "g=%g%s%s C=%zu T=%zu %s", g_fixed,
                 per_token_random ? " (U(-1000,0))" : "", one_fast ? " (one channel -10)" : "",
                 C, T, f32 ? "f32" : "f64");
        if (s != KDALAB_OK)
            fail_msg("%s: status %s", what, kdalab_strerror(s));
        expect_close(what, out_err(&d, &got, &ref), f32 ? F32_TOL : F64_TOL);
        outputs_free(&ref);
        outputs_free(&got);
    }
    random_problem_free(&p);
}

static void test_extreme_decay_default_form(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(7);
    const double fixed[] = {-2.5, -5, -6, -8, -12, -27.631021115928547 /* ln 1e-12 */};
    const size_t Cs[] = {16, 32, 64}, Ts[] = {128, 130};
    for (size_t ci = 0; ci < 3; ci++)
        for (size_t ti = 0; ti < 2; ti++) {
            for (size_t fi = 0; fi < sizeof fixed / sizeof fixed[0]; fi++)
                extreme_case(rng, fixed[fi], 0, 0, Cs[ci], Ts[ti]);
            extreme_case(rng, 0, 1, 0, Cs[ci], Ts[ti]);
            extreme_case(rng, 0, 0, 1, Cs[ci], Ts[ti]);
        }
    gsl_rng_free(rng);
}

/* ---- a hard reset: one huge |g| must not swallow the decays after it ------
 * Gamma_i - Gamma_j as a difference of running sums turns -1e20 + -1 into
 * -1e20 and so loses every later decay; span sums keep them. */

static void test_hard_reset_keeps_later_decay(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(9);
    for (size_t mi = 0; mi < KDALAB_N_MECHANISMS; mi++) /* the rows with a decay */
        for (int f32 = 0; f32 <= 1 && kdalab_mechanism_g_shape(MECH(mi)) != KDALAB_G_NONE; f32++)
            for (size_t mode = 0; mode < 4; mode++) {
                kdalab_dims d = {.B = 1, .T = 40, .H = 1, .K = 6, .V = 4};
                random_problem p;
                random_problem_make(&p, rng, MECH(mi), d, -1.0, 1);
                size_t gw = kdalab_mechanism_g_width(MECH(mi), d.K);
                for (size_t c = 0; c < gw; c++) {
                    p.g[3 * gw + c] = f32 ? -1e6 : -1e20; /* resets at t = 3 and 21 */
                    p.g[21 * gw + c] = f32 ? -1e6 : -1e20;
                }
                kdalab_chunk_opts o = kdalab_chunk_opts_default();
                o.chunk = 16;
                o.subchunk = 4;
                o.decay = (kdalab_decay_mode)mode;
                outputs ref = outputs_alloc(&d), got = outputs_alloc(&d);
                assert_int_equal(run(&p, NULL, f32, 0.5, &ref), KDALAB_OK);
                kdalab_status s = run(&p, &o, f32, 0.5, &got);
                char what[96];
                snprintf(what, sizeof what, "%s %s %s after a reset",
                         kdalab_mechanism_name(MECH(mi)), kdalab_decay_name(o.decay),
                         f32 ? "f32" : "f64");
                if (kdalab_mechanism_g_shape(MECH(mi)) == KDALAB_G_PER_KEY &&
                    (o.decay == KDALAB_DECAY_RESCALED ||
                                             o.decay == KDALAB_DECAY_ANCHORED)) {
                    /* these modes must represent exp(1e20): they overflow, and say so */
                    assert_int_equal(s, KDALAB_ERANGE);
                } else {
                    assert_int_equal(s, KDALAB_OK);
                    expect_close(what, out_err(&d, &got, &ref), f32 ? F32_TOL : F64_TOL);
                }
                outputs_free(&ref);
                outputs_free(&got);
                random_problem_free(&p);
            }
    gsl_rng_free(rng);
}

/* ---- incremental consistency: chunk over T-1, then one decode step ----------- */

static void test_chunk_then_decode_equals_chunk(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(8);
    const size_t Ts[] = {5, 63, 64, 65, 130};
    for (size_t ti = 0; ti < 5; ti++)
        for (size_t mi = 0; mi < KDALAB_N_MECHANISMS; mi++) {
            if (kdalab_mechanism_has_ab(MECH(mi)))
                continue; /* the decode step takes no a, b: test_dplr.c steps the DPLR row */
            kdalab_dims d = {.B = 1, .T = Ts[ti], .H = 1, .K = 16, .V = 12};
            random_problem p;
            random_problem_make(&p, rng, MECH(mi), d, -1.0, 1);
            kdalab_chunk_opts o = kdalab_chunk_opts_default(); /* C = 64 */
            outputs whole = outputs_alloc(&d);
            assert_int_equal(run(&p, &o, 0, 0.25, &whole), KDALAB_OK);
            kdalab_dims d1 = d;
            d1.T = d.T - 1;
            outputs part = outputs_alloc(&d1);
            assert_int_equal(run_f64(&o, p.mech, &d1, 0.25, p.q, p.k, p.v, p.g, p.beta, p.h0,
                                     part.o, part.ht, NULL), KDALAB_OK);
            size_t t = d.T - 1, gw = kdalab_mechanism_g_width(p.mech, d.K);
            double *last = malloc(d.V * sizeof *last);
            assert_int_equal(kdalab_step_f64(p.mech, d.K, d.V, 0.25, p.q + t * d.K,
                                             p.k + t * d.K, p.v + t * d.V, p.g + t * gw,
                                             p.beta[t], part.ht, last), KDALAB_OK);
            expect_close("decoded output", rel_err_f64(last, whole.o + t * d.V, d.V),
                         F64_TOL);
            expect_close("decoded state", rel_err_f64(part.ht, whole.ht, n_state(&d)),
                         F64_TOL);
            free(last);
            outputs_free(&whole);
            outputs_free(&part);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_equals_recurrent_random_shapes),
        cmocka_unit_test(test_decode_steps_equal_recurrent),
        cmocka_unit_test(test_initial_state_honoured),
        cmocka_unit_test(test_beta_zero_keeps_state),
        cmocka_unit_test(test_deltanet_orthonormal_recall),
        cmocka_unit_test(test_kda_reduces_to_ancestors),
        cmocka_unit_test(test_extreme_decay_default_form),
        cmocka_unit_test(test_hard_reset_keeps_later_decay),
        cmocka_unit_test(test_chunk_then_decode_equals_chunk),
    };
    return cmocka_run_group_tests_name("properties", tests, NULL, NULL);
}
