/*
 * tests/test_simd.c — the optimized float32 path's chunkwise form
 * (lib/simd/, kdalab_simd_chunk_f32) against the float64 reference, at every
 * dispatch level this CPU can run (levels it cannot run are skipped with a
 * message); its error statuses against the reference's; the input screens.
 *
 * Tolerance: 1e-5 relative (max |error| / max |reference|), the accuracy
 * kdalab promises of a float32 implementation: float32 rounds at 6e-8, the
 * longest sums here have ~128-256 terms and the UT solve and the chunk-to-
 * chunk state carry amplify that by at most a few tens on these
 * (well-conditioned, unit-norm-key) problems; the reference f32 forms land
 * near 1e-6. A wrong decay, a missing term or a lost chunk is >= 1e-3.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_levels.h"

#define TOL 1e-5
#define MAX_CASES 32

/* Run the SIMD chunkwise form on float64 inputs (rounded to float32) and
 * return the relative errors of o and ht against the given references. */
static void simd_vs(const kdalab_dims *d, kdalab_mechanism mech, double scale,
                    const double *q, const double *k, const double *v, const double *g,
                    const double *beta, const double *h0, const double *o_ref,
                    const double *ht_ref, const kdalab_chunk_opts *opts, double *err_o,
                    double *err_ht)
{
    size_t nqk = n_qk(d), nv = n_v(d), ns = n_state(d);
    size_t ng = kdalab_mechanism_g_width(mech, d->K) * n_bth(d);
    float *qf = to_f32(q, nqk), *kf = to_f32(k, nqk), *vf = to_f32(v, nv);
    float *gf = ng ? to_f32(g, ng) : NULL;
    float *bf = beta ? to_f32(beta, n_bth(d)) : NULL;
    float *h0f = h0 ? to_f32(h0, ns) : NULL;
    float *of = malloc((nv ? nv : 1) * sizeof *of), *htf = malloc(ns * sizeof *htf);
    assert_non_null(of);
    assert_non_null(htf);
    kdalab_report rep;
    kdalab_status s = kdalab_simd_chunk_f32(d, mech, (float)scale, qf, kf, vf, gf, bf, h0f,
                                            of, htf, opts, &rep);
    assert_int_equal(s, KDALAB_OK);
    assert_int_equal(rep.nonfinite_o, 0);
    assert_int_equal(rep.nonfinite_ht, 0);
    *err_o = nv ? rel_err_f32(of, o_ref, nv) : 0;
    *err_ht = rel_err_f32(htf, ht_ref, ns);
    simdt_note(*err_o);
    simdt_note(*err_ht);
    free(qf); free(kf); free(vf); free(gf); free(bf); free(h0f); free(of); free(htf);
}

static void test_golden_every_level(void **state)
{
    (void)state;
    static golden_case cases[MAX_CASES];
    size_t n = golden_load_all(cases, MAX_CASES);
    assert_true(n >= 6);
    kdalab_chunk_opts opt_default = kdalab_chunk_opts_default();
    kdalab_chunk_opts opt_small = opt_default;
    opt_small.chunk = 24; /* does not divide the golden T's; 3 sub-chunks of 8 */
    opt_small.subchunk = 8;
    kdalab_chunk_opts opt_odd = opt_default;
    opt_odd.chunk = 13; /* ragged sub-chunks too */
    opt_odd.subchunk = 5;
    const kdalab_chunk_opts *opts[] = {NULL, &opt_small, &opt_odd};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t i = 0; i < n; i++) {
            golden_case *gc = &cases[i];
            for (size_t oi = 0; oi < 3; oi++) {
                double eo, eh;
                simd_vs(&gc->dims, gc->mech, gc->scale, gc->q.data, gc->k.data, gc->v.data,
                        gc->g.data, gc->beta.data, gc->has_h0 ? gc->h0.data : NULL,
                        gc->o.data, gc->ht.data, opts[oi], &eo, &eh);
                if (eo > TOL || eh > TOL)
                    print_error("level %s, case %s, opts %zu: o %.3g, ht %.3g\n",
                                kdalab_simd_level_name(simdt_levels[li]), gc->name, oi, eo, eh);
                assert_true(eo <= TOL);
                assert_true(eh <= TOL);
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Random shapes: ragged T, C not dividing T, K != V, B*H > 1 and == 1 (the
 * column split across threads), strong decay (g down to -1000) and a mix of
 * tiny and huge g in the same sub-chunk (where differences of cumulative
 * sums would cancel). */
typedef struct {
    size_t B, T, H, K, V, C, c;
    double g_min;
    int spikes; /* 1: g mostly in [-0.05, 0] with -1000 spikes */
} shape;

static const shape shapes[] = {
    {1, 77, 2, 24, 20, 64, 16, -1.0, 0},  {2, 100, 3, 40, 72, 32, 8, -3.0, 0},
    {1, 130, 1, 128, 128, 64, 16, -0.5, 0}, {1, 90, 1, 16, 40, 64, 16, -1000.0, 0},
    {2, 70, 2, 32, 32, 64, 16, -20.0, 0}, {1, 200, 2, 64, 48, 64, 16, 0, 1},
    {1, 33, 1, 9, 7, 10, 3, -2.0, 0},     {1, 1, 1, 8, 8, 64, 16, -1.0, 0},
    {1, 65, 4, 128, 64, 64, 16, -0.1, 0},
};

static void test_random_every_level(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(7);
    const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                      KDALAB_GATED_DELTANET, KDALAB_KDA};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *sh = &shapes[si];
        kdalab_dims d = {sh->B, sh->T, sh->H, sh->K, sh->V};
        for (size_t mi = 0; mi < 4; mi++) {
            kdalab_mechanism mech = mechs[mi];
            random_problem p;
            random_problem_make(&p, rng, mech, d, sh->spikes ? -0.05 : sh->g_min, si % 2);
            if (sh->spikes)
                for (size_t i = 0; i < n_qk(&d); i++)
                    if (gsl_rng_uniform(rng) < 0.03)
                        p.g[i] = -1000.0;
            double scale = kdalab_default_scale(d.K);
            size_t nv = n_v(&d), ns = n_state(&d);
            double *o = malloc(nv * sizeof *o), *ht = malloc(ns * sizeof *ht);
            assert_non_null(o);
            assert_non_null(ht);
            const double *g = mech == KDALAB_KDA || mech == KDALAB_GATED_DELTANET ? p.g : NULL;
            const double *beta = mech == KDALAB_LINEAR_ATTENTION ? NULL : p.beta;
            assert_int_equal(kdalab_recurrent_f64(&d, mech, scale, p.q, p.k, p.v, g, beta,
                                                  p.h0, o, ht),
                             KDALAB_OK);
            kdalab_chunk_opts opts = kdalab_chunk_opts_default();
            opts.chunk = sh->C;
            opts.subchunk = sh->c;
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                double eo, eh;
                simd_vs(&d, mech, scale, p.q, p.k, p.v, g, beta, p.h0, o, ht, &opts, &eo,
                        &eh);
                if (eo > TOL || eh > TOL)
                    print_error("level %s, shape %zu, %s: o %.3g, ht %.3g\n",
                                kdalab_simd_level_name(simdt_levels[li]), si,
                                kdalab_mechanism_name(mech), eo, eh);
                assert_true(eo <= TOL);
                assert_true(eh <= TOL);
            }
            free(o);
            free(ht);
            random_problem_free(&p);
        }
    }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* g = -1000 everywhere: each step forgets everything before it; the result
 * must stay finite and match the reference. */
static void test_extreme_decay_finite(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    kdalab_dims d = {1, 150, 2, 64, 64};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, d, -1000.0, 1);
    for (size_t i = 0; i < n_qk(&d); i++)
        p.g[i] = -1000.0;
    double scale = kdalab_default_scale(d.K);
    double *o = malloc(n_v(&d) * sizeof *o), *ht = malloc(n_state(&d) * sizeof *ht);
    assert_int_equal(kdalab_recurrent_f64(&d, KDALAB_KDA, scale, p.q, p.k, p.v, p.g, p.beta,
                                          p.h0, o, ht),
                     KDALAB_OK);
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        double eo, eh;
        simd_vs(&d, KDALAB_KDA, scale, p.q, p.k, p.v, p.g, p.beta, p.h0, o, ht, NULL, &eo,
                &eh);
        assert_true(eo <= TOL);
        assert_true(eh <= TOL);
    }
    free(o);
    free(ht);
    random_problem_free(&p);
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* T = 0: no output rows; ht is h0 (or zero without h0), as the reference. */
static void test_empty_sequence(void **state)
{
    (void)state;
    kdalab_dims d = {2, 0, 3, 8, 5};
    size_t ns = n_state(&d);
    float *h0 = malloc(ns * sizeof *h0), *ht = malloc(ns * sizeof *ht);
    assert_non_null(h0);
    assert_non_null(ht);
    for (size_t i = 0; i < ns; i++)
        h0[i] = 0.5f * (float)i;
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int m = 0; m < 4; m++) {
            for (size_t i = 0; i < ns; i++)
                ht[i] = -1.0f;
            assert_int_equal(kdalab_simd_chunk_f32(&d, (kdalab_mechanism)m, 0.3f, NULL, NULL,
                                                   NULL, NULL, NULL, h0, NULL, ht, NULL, NULL),
                             KDALAB_OK);
            assert_memory_equal(ht, h0, ns * sizeof *ht);
            assert_int_equal(kdalab_simd_chunk_f32(&d, (kdalab_mechanism)m, 0.3f, NULL, NULL,
                                                   NULL, NULL, NULL, NULL, NULL, ht, NULL, NULL),
                             KDALAB_OK);
            for (size_t i = 0; i < ns; i++)
                assert_true(ht[i] == 0.0f);
        }
    }
    free(h0);
    free(ht);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Bad input: the same status as the reference, outputs untouched. */
static void test_errors_match_reference(void **state)
{
    (void)state;
    enum { K = 8, V = 8, T = 5 };
    float q[T * K], k[T * K], v[T * V], g[T * K], beta[T], o[T * V], o2[T * V];
    for (int i = 0; i < T * K; i++) {
        q[i] = 0.1f * (float)(i % 7);
        k[i] = 0.2f;
        g[i] = -0.5f;
    }
    for (int i = 0; i < T * V; i++)
        v[i] = 1.0f;
    for (int i = 0; i < T; i++)
        beta[i] = 0.5f;
    kdalab_dims d = {1, T, 1, K, V};
    /* g > 0, beta > 2, NaN in q, NULL v, zero K, bad scale, bad chunk */
    for (int trial = 0; trial < 7; trial++) {
        float gb[T * K], bb[T], qb[T * K];
        memcpy(gb, g, sizeof g);
        memcpy(bb, beta, sizeof beta);
        memcpy(qb, q, sizeof q);
        kdalab_dims db = d;
        const float *vp = v;
        float sc = 0.3f;
        kdalab_chunk_opts op = kdalab_chunk_opts_default();
        switch (trial) {
        case 0: gb[3] = 0.1f; break;
        case 1: bb[2] = 2.5f; break;
        case 2: qb[4] = NAN; break;
        case 3: vp = NULL; break;
        case 4: db.K = 0; break;
        case 5: sc = -1.0f; break;
        case 6: op.chunk = 0; break;
        }
        for (int i = 0; i < T * V; i++)
            o[i] = o2[i] = 42.0f;
        kdalab_status want = kdalab_chunk_f32(&db, KDALAB_KDA, sc, qb, k, vp, gb, bb, NULL,
                                              o2, NULL, &op, NULL);
        kdalab_status got = kdalab_simd_chunk_f32(&db, KDALAB_KDA, sc, qb, k, vp, gb, bb,
                                                  NULL, o, NULL, &op, NULL);
        assert_int_not_equal(want, KDALAB_OK);
        assert_int_equal(got, want);
        for (int i = 0; i < T * V; i++)
            assert_true(o[i] == 42.0f);
    }
    /* edge values the vector screen must judge as the reference does: legal
     * -0 and 2 (and g = -0), illegal smallest subnormal g, beta just above 2,
     * NaN beta, Inf v, NaN in the last element of g */
    for (int trial = 0; trial < 8 * (int)SIMDT_N_LEVELS; trial++) {
        if (trial % 8 == 0 && !simdt_use_level(simdt_levels[trial / 8])) {
            trial += 7;
            continue;
        }
        float gb[T * K], bb[T], vb[T * V];
        memcpy(gb, g, sizeof g);
        memcpy(bb, beta, sizeof beta);
        memcpy(vb, v, sizeof v);
        switch (trial % 8) {
        case 0: bb[1] = -0.0f; gb[7] = -0.0f; break;
        case 1: bb[4] = 2.0f; break;
        case 2: gb[11] = 1.40129846e-45f; break;
        case 3: bb[0] = 2.00000024f; break;
        case 4: bb[3] = NAN; break;
        case 5: vb[T * V - 1] = INFINITY; break;
        case 6: gb[T * K - 1] = NAN; break;
        case 7: bb[2] = -1.40129846e-45f; break;
        }
        kdalab_status want = kdalab_chunk_f32(&d, KDALAB_KDA, 0.3f, q, k, vb, gb, bb, NULL, o2,
                                              NULL, NULL, NULL);
        kdalab_status got = kdalab_simd_chunk_f32(&d, KDALAB_KDA, 0.3f, q, k, vb, gb, bb,
                                                  NULL, o, NULL, NULL, NULL);
        assert_int_equal(got, want);
        int t8 = trial % 8;
        assert_int_equal(want, t8 <= 1 ? KDALAB_OK
                               : (t8 >= 4 && t8 <= 6) ? KDALAB_ENONFINITE
                                                      : KDALAB_EDOMAIN);
    }
    /* the decode step: a NaN in S is refused and S, o stay as they were */
    float S[K * V], S0[K * V], os[V];
    for (int i = 0; i < K * V; i++)
        S[i] = S0[i] = 0.01f * (float)i;
    S[K * V - 3] = INFINITY;
    S0[K * V - 3] = INFINITY;
    for (int i = 0; i < V; i++)
        os[i] = 7.0f;
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int m = 0; m < 4; m++) {
            kdalab_status s = kdalab_simd_step_f32((kdalab_mechanism)m, K, V, 0.3f, q, k, v,
                                                   g, 0.5f, S, os);
            assert_int_equal(s, KDALAB_ENONFINITE);
            assert_memory_equal(S, S0, sizeof S);
            for (int i = 0; i < V; i++)
                assert_true(os[i] == 7.0f);
        }
        assert_int_equal(kdalab_simd_step_f32(KDALAB_KDA, K, V, 0.3f, q, k, v, g, 2.5f, S, os),
                         KDALAB_EDOMAIN);
        assert_int_equal(kdalab_simd_step_f32(KDALAB_KDA, K, V, 0.3f, q, k, v, NULL, 0.5f, S,
                                              os),
                         KDALAB_ENULL);
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The vector screen's wide loop (four vectors at a time, then single vectors,
 * then the tail): an edge value in each of those regions of g and beta,
 * judged as the reference judges it (the statuses of kdalab_chunk_f32), and
 * the output untouched when refused. T = 72 positions: beta has 64 elements
 * in the AVX-512 wide loop, g (T x K = 1152) all three regions at every level. */
static void test_screen_regions(void **state)
{
    (void)state;
    enum { K = 16, V = 16, T = 72 };
    static float q[T * K], k[T * K], v[T * V], g[T * K], beta[T], o[T * V], o2[T * V];
    for (int i = 0; i < T * K; i++) {
        q[i] = 0.01f * (float)(i % 13);
        k[i] = 0.05f;
        g[i] = -0.25f;
    }
    for (int i = 0; i < T * V; i++)
        v[i] = 1.0f;
    kdalab_dims d = {1, T, 1, K, V};
    /* positions: wide loop (early, late), single vectors (AVX-512 only for
     * beta), the tail; values: legal edges first (g: -0; beta: 2, -0), then
     * illegal ones (the smallest subnormal above 0 or below 0, just above 2,
     * NaN, +-Inf) */
    const int gpos[] = {0, 37, 1100, T * K - 1}, bpos[] = {3, 60, 66, T - 1};
    const float gval[] = {-0.0f, 1.40129846e-45f, NAN, INFINITY, -INFINITY};
    const float bval[] = {2.0f, -0.0f, 2.00000024f, -1.40129846e-45f, NAN};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int arr = 0; arr < 2; arr++)
            for (int pi = 0; pi < 4; pi++)
                for (int vi = 0; vi < 5; vi++) {
                    float gb[T * K], bb[T];
                    memcpy(gb, g, sizeof g);
                    memcpy(bb, beta, sizeof beta);
                    for (int t = 0; t < T; t++)
                        bb[t] = 0.5f;
                    if (arr == 0)
                        gb[gpos[pi]] = gval[vi];
                    else
                        bb[bpos[pi]] = bval[vi];
                    for (int i = 0; i < T * V; i++)
                        o[i] = o2[i] = 42.0f;
                    kdalab_status want = kdalab_chunk_f32(&d, KDALAB_KDA, 0.3f, q, k, v, gb, bb,
                                                          NULL, o2, NULL, NULL, NULL);
                    kdalab_status got = kdalab_simd_chunk_f32(&d, KDALAB_KDA, 0.3f, q, k, v,
                                                              gb, bb, NULL, o, NULL, NULL, NULL);
                    if (got != want)
                        print_error("level %s, %s[%d] = %g: simd %d, reference %d\n",
                                    kdalab_simd_level_name(simdt_levels[li]), arr ? "beta" : "g",
                                    arr ? bpos[pi] : gpos[pi], (double)(arr ? bval[vi] : gval[vi]),
                                    got, want);
                    assert_int_equal(got, want);
                    /* the legal edges pass, every other value is refused untouched */
                    assert_int_equal(want == KDALAB_OK, arr == 0 ? vi == 0 : vi < 2);
                    if (want != KDALAB_OK)
                        for (int i = 0; i < T * V; i++)
                            assert_true(o[i] == 42.0f);
                }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Levels: names round-trip; a level the CPU lacks is refused, never run. */
static void test_levels(void **state)
{
    (void)state;
    for (int l = 0; l <= KDALAB_SIMD_AUTO; l++) {
        kdalab_simd_level back;
        assert_int_equal(kdalab_simd_level_parse(kdalab_simd_level_name(l), &back), KDALAB_OK);
        assert_int_equal(back, l);
    }
    kdalab_simd_level dummy;
    assert_int_equal(kdalab_simd_level_parse("sse9", &dummy), KDALAB_EINVAL);
    assert_true(kdalab_simd_level_available(KDALAB_SIMD_SCALAR));
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        kdalab_status s = kdalab_simd_set_level(simdt_levels[li]);
        if (kdalab_simd_level_available(simdt_levels[li])) {
            assert_int_equal(s, KDALAB_OK);
            assert_int_equal(kdalab_simd_get_level(), simdt_levels[li]);
        } else {
            assert_int_equal(s, KDALAB_EINVAL);
            assert_int_not_equal(kdalab_simd_get_level(), simdt_levels[li]);
        }
    }
    assert_int_equal(kdalab_simd_set_level(KDALAB_SIMD_AUTO), KDALAB_OK);
    printf("    level in use: %s\n", kdalab_simd_level_name(kdalab_simd_get_level()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_golden_every_level),
        cmocka_unit_test(test_random_every_level),
        cmocka_unit_test(test_extreme_decay_finite),
        cmocka_unit_test(test_empty_sequence),
        cmocka_unit_test(test_errors_match_reference),
        cmocka_unit_test(test_screen_regions),
    };
    int failed = cmocka_run_group_tests_name("simd", tests, NULL, NULL);
    simdt_print_worst(TOL);
    return failed;
}
