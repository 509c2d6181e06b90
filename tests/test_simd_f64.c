/*
 * tests/test_simd_f64.c — the optimized float64 path (kdalab_simd_chunk_f64,
 * kdalab_simd_step_f64) against the float64 reference (kdalab_chunk_f64 with
 * the same options, kdalab_step_f64), at every dispatch level this CPU can
 * run (levels it cannot run are skipped with a message).
 *
 * Tolerance: 1e-12 relative to max |reference|. Both sides round at 1.1e-16;
 * they sum in different orders and form the decay factors differently
 * (products of exp(g) here, exp of span sums there), and the UT solve and the
 * chunk-to-chunk state carry amplify that by a few tens on these problems:
 * the errors seen are ~1e-15. A float32 intermediate anywhere would be ~1e-7.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_levels.h"

#define TOL 1e-12
#define MAX_CASES 32

static const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                         KDALAB_GATED_DELTANET, KDALAB_KDA};

/* The largest error seen per level, chunkwise and decode step (printed at the end). */
static double worst[SIMDT_N_LEVELS], worst_step[SIMDT_N_LEVELS];

/* kdalab_simd_chunk_f64 vs kdalab_chunk_f64, same arguments, at the level in
 * use: both OK, no non-finite output, o and ht within TOL (returned). */
static double simd_vs_ref(const kdalab_dims *d, kdalab_mechanism mech, double scale,
                          const double *q, const double *k, const double *v, const double *g,
                          const double *beta, const double *h0, const kdalab_chunk_opts *opts)
{
    size_t nv = n_v(d), ns = n_state(d);
    double *o = malloc((nv ? nv : 1) * sizeof *o), *ht = malloc(ns * sizeof *ht);
    double *ro = malloc((nv ? nv : 1) * sizeof *ro), *rht = malloc(ns * sizeof *rht);
    assert_true(o && ht && ro && rht);
    kdalab_report rep;
    assert_int_equal(kdalab_chunk_f64(d, mech, scale, q, k, v, g, beta, h0, ro, rht, opts,
                                      NULL),
                     KDALAB_OK);
    assert_int_equal(kdalab_simd_chunk_f64(d, mech, scale, q, k, v, g, beta, h0, o, ht, opts,
                                           &rep),
                     KDALAB_OK);
    assert_int_equal(rep.nonfinite_o, 0);
    assert_int_equal(rep.nonfinite_ht, 0);
    double eo = nv ? rel_err_f64(o, ro, nv) : 0, eh = rel_err_f64(ht, rht, ns);
    double e = eo > eh ? eo : eh;
    kdalab_simd_level l = kdalab_simd_get_level();
    if (e > worst[l])
        worst[l] = e;
    free(o); free(ht); free(ro); free(rht);
    return e;
}

static void test_golden_every_level(void **state)
{
    (void)state;
    static golden_case cases[MAX_CASES];
    size_t n = golden_load_all(cases, MAX_CASES);
    assert_true(n >= 6);
    kdalab_chunk_opts opt_small = kdalab_chunk_opts_default(), opt_odd = opt_small;
    opt_small.chunk = 24; /* does not divide the golden T's; 3 sub-chunks of 8 */
    opt_small.subchunk = 8;
    opt_odd.chunk = 13; /* ragged sub-chunks too */
    opt_odd.subchunk = 5;
    const kdalab_chunk_opts *opts[] = {NULL, &opt_small, &opt_odd};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t i = 0; i < n; i++) {
            golden_case *gc = &cases[i];
            for (size_t oi = 0; oi < 3; oi++) {
                double e = simd_vs_ref(&gc->dims, gc->mech, gc->scale, gc->q.data, gc->k.data,
                                       gc->v.data, gc->g.data, gc->beta.data,
                                       gc->has_h0 ? gc->h0.data : NULL, opts[oi]);
                if (e > TOL)
                    print_error("level %s, case %s, opts %zu: %.3g\n",
                                kdalab_simd_level_name(simdt_levels[li]), gc->name, oi, e);
                assert_true(e <= TOL);
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Random shapes: ragged T, C not dividing T, K != V, K and V not multiples of
 * the vector width, B*H > 1 and == 1 (the column split across threads),
 * strong decay, g near and below exp's floor (-708), and g mostly tiny with
 * -1000 spikes. */
typedef struct {
    size_t B, T, H, K, V, C, c;
    double g_min;
    int spikes;
} shape;

static const shape shapes[] = {
    {1, 77, 2, 24, 20, 64, 16, -1.0, 0},  {2, 100, 3, 40, 72, 32, 8, -3.0, 0},
    {1, 130, 1, 128, 128, 64, 16, -0.5, 0}, {1, 90, 1, 16, 40, 64, 16, -1000.0, 0},
    {2, 70, 2, 32, 32, 64, 16, -20.0, 0}, {1, 200, 2, 64, 48, 64, 16, 0, 1},
    {1, 33, 1, 9, 7, 10, 3, -2.0, 0},     {1, 1, 1, 8, 8, 64, 16, -1.0, 0},
    {1, 65, 4, 128, 64, 64, 16, -0.1, 0}, {1, 50, 2, 13, 11, 16, 4, -760.0, 0},
    {1, 40, 1, 5, 3, 8, 3, -0.01, 0},
};

static void test_random_every_level(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(17);
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
            const double *g = mech == KDALAB_KDA || mech == KDALAB_GATED_DELTANET ? p.g : NULL;
            const double *beta = mech == KDALAB_LINEAR_ATTENTION ? NULL : p.beta;
            kdalab_chunk_opts opts = kdalab_chunk_opts_default();
            opts.chunk = sh->C;
            opts.subchunk = sh->c;
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                double e = simd_vs_ref(&d, mech, kdalab_default_scale(d.K), p.q, p.k, p.v, g,
                                       beta, p.h0, &opts);
                if (e > TOL)
                    print_error("level %s, shape %zu, %s: %.3g\n",
                                kdalab_simd_level_name(simdt_levels[li]), si,
                                kdalab_mechanism_name(mech), e);
                assert_true(e <= TOL);
            }
            random_problem_free(&p);
        }
    }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* g = -1000 everywhere (each step forgets everything before it) and g = -720
 * (decays just below exp's floor): finite, and as the reference. */
static void test_extreme_decay(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    kdalab_dims d = {1, 150, 2, 64, 64};
    const double gs[] = {-1000.0, -720.0, -707.0};
    for (size_t gi = 0; gi < 3; gi++) {
        random_problem p;
        random_problem_make(&p, rng, KDALAB_KDA, d, -1.0, 1);
        for (size_t i = 0; i < n_qk(&d); i++)
            p.g[i] = gs[gi];
        for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
            if (!simdt_use_level(simdt_levels[li]))
                continue;
            assert_true(simd_vs_ref(&d, KDALAB_KDA, 0.125, p.q, p.k, p.v, p.g, p.beta, p.h0,
                                    NULL) <= TOL);
        }
        random_problem_free(&p);
    }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* T = 0: ht is h0 (or zero without h0), as the reference. The study decay
 * modes go to the reference: the same bits. */
static void test_empty_and_study_modes(void **state)
{
    (void)state;
    kdalab_dims d = {2, 0, 3, 8, 5};
    size_t ns = n_state(&d);
    double *h0 = malloc(ns * sizeof *h0), *ht = malloc(ns * sizeof *ht);
    assert_true(h0 && ht);
    for (size_t i = 0; i < ns; i++)
        h0[i] = 0.5 * (double)i;
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int m = 0; m < 4; m++) {
            for (size_t i = 0; i < ns; i++)
                ht[i] = -1.0;
            assert_int_equal(kdalab_simd_chunk_f64(&d, (kdalab_mechanism)m, 0.3, NULL, NULL,
                                                   NULL, NULL, NULL, h0, NULL, ht, NULL, NULL),
                             KDALAB_OK);
            assert_memory_equal(ht, h0, ns * sizeof *ht);
            assert_int_equal(kdalab_simd_chunk_f64(&d, (kdalab_mechanism)m, 0.3, NULL, NULL,
                                                   NULL, NULL, NULL, NULL, NULL, ht, NULL, NULL),
                             KDALAB_OK);
            for (size_t i = 0; i < ns; i++)
                assert_true(ht[i] == 0.0);
        }
    }
    free(h0);
    free(ht);

    gsl_rng *rng = test_rng(3);
    kdalab_dims d2 = {1, 40, 2, 16, 8};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, d2, -0.5, 1);
    size_t nv = n_v(&d2);
    double *o1 = malloc(nv * sizeof *o1), *o2 = malloc(nv * sizeof *o2);
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.decay = KDALAB_DECAY_PAIRWISE;
    assert_int_equal(kdalab_chunk_f64(&d2, KDALAB_KDA, 0.25, p.q, p.k, p.v, p.g, p.beta, p.h0,
                                      o1, NULL, &op, NULL),
                     KDALAB_OK);
    assert_int_equal(kdalab_simd_chunk_f64(&d2, KDALAB_KDA, 0.25, p.q, p.k, p.v, p.g, p.beta,
                                           p.h0, o2, NULL, &op, NULL),
                     KDALAB_OK);
    assert_memory_equal(o1, o2, nv * sizeof *o1);
    free(o1);
    free(o2);
    random_problem_free(&p);
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The decode step, 40 tokens in a row, against kdalab_step_f64, with S at
 * each double offset from a 64-byte boundary (the kernel reads S in the wrap
 * layout when V is a multiple of the vector width, else splits its columns
 * at the first cache-line boundary: every case is exercised); and the same
 * bits at every offset as on the cache line. */
static void test_step_every_level(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(5);
    const size_t KV[][2] = {{128, 128}, {24, 20}, {7, 45}, {64, 40}, {3, 2}, {2, 16}};
    for (size_t si = 0; si < 6; si++)
        for (size_t mi = 0; mi < 4; mi++) {
            size_t K = KV[si][0], V = KV[si][1], steps = 40;
            kdalab_dims d = {1, steps, 1, K, V};
            random_problem p;
            random_problem_make(&p, rng, mechs[mi], d, si == 3 ? -50.0 : -1.0, 1);
            double scale = kdalab_default_scale(K);
            double *S = malloc(K * V * sizeof *S), *o = malloc(steps * V * sizeof *o);
            memcpy(S, p.h0, K * V * sizeof *S);
            size_t gw = kdalab_mechanism_g_width(mechs[mi], K);
            for (size_t t = 0; t < steps; t++)
                assert_int_equal(kdalab_step_f64(mechs[mi], K, V, scale, p.q + t * K,
                                                 p.k + t * K, p.v + t * V,
                                                 gw ? p.g + t * gw : NULL, p.beta[t], S,
                                                 o + t * V),
                                 KDALAB_OK);
            double *S0 = malloc(K * V * sizeof *S0), *o0 = malloc(steps * V * sizeof *o0);
            assert_true(S0 && o0);
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                for (size_t off = 0; off < 8; off++) {
                    size_t nS = (K * V + 32 + 7) / 8 * 8; /* a multiple of 64 bytes */
                    double *Sbuf = aligned_alloc(64, nS * sizeof(double)), *Sd = Sbuf + off;
                    double *od = malloc(steps * V * sizeof *od);
                    assert_true(Sbuf && od);
                    memcpy(Sd, p.h0, K * V * sizeof *Sd);
                    for (size_t t = 0; t < steps; t++)
                        assert_int_equal(kdalab_simd_step_f64(mechs[mi], K, V, scale,
                                                              p.q + t * K, p.k + t * K,
                                                              p.v + t * V,
                                                              gw ? p.g + t * gw : NULL,
                                                              p.beta[t], Sd, od + t * V),
                                         KDALAB_OK);
                    double eo = rel_err_f64(od, o, steps * V), es = rel_err_f64(Sd, S, K * V);
                    double e = eo > es ? eo : es;
                    if (e > worst_step[li])
                        worst_step[li] = e;
                    if (e > TOL)
                        print_error("level %s, K %zu V %zu %s, S at +%zu: o %.3g S %.3g\n",
                                    kdalab_simd_level_name(simdt_levels[li]), K, V,
                                    kdalab_mechanism_name(mechs[mi]), off, eo, es);
                    assert_true(e <= TOL);
                    if (off == 0) {
                        memcpy(S0, Sd, K * V * sizeof *S0);
                        memcpy(o0, od, steps * V * sizeof *o0);
                    } else if (memcmp(Sd, S0, K * V * sizeof *S0) ||
                               memcmp(od, o0, steps * V * sizeof *o0)) {
                        fail_msg("level %s, K %zu V %zu %s: S at +%zu doubles differs from S "
                                 "on a cache line", kdalab_simd_level_name(simdt_levels[li]), K, V,
                                 kdalab_mechanism_name(mechs[mi]), off);
                    }
                    free(Sbuf);
                    free(od);
                }
            }
            free(S0);
            free(o0);
            free(S);
            free(o);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Bad input: the same status as the reference, outputs untouched. */
static void test_errors_match_reference(void **state)
{
    (void)state;
    enum { K = 8, V = 8, T = 5 };
    double q[T * K], k[T * K], v[T * V], g[T * K], beta[T], o[T * V], o2[T * V];
    for (int i = 0; i < T * K; i++) {
        q[i] = 0.1 * (double)(i % 7);
        k[i] = 0.2;
        g[i] = -0.5;
    }
    for (int i = 0; i < T * V; i++)
        v[i] = 1.0;
    for (int i = 0; i < T; i++)
        beta[i] = 0.5;
    kdalab_dims d = {1, T, 1, K, V};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        /* g > 0, beta > 2, NaN in q, NULL v, zero K, bad scale, bad chunk,
         * bf16 precision (the float64 form wants FP32), Inf in the last v, NaN
         * beta, smallest subnormal g; legal edges -0 and beta = 2 */
        for (int trial = 0; trial < 12; trial++) {
            double gb[T * K], bb[T], qb[T * K], vb[T * V];
            memcpy(gb, g, sizeof g);
            memcpy(bb, beta, sizeof beta);
            memcpy(qb, q, sizeof q);
            memcpy(vb, v, sizeof v);
            kdalab_dims db = d;
            const double *vp = vb;
            double sc = 0.3;
            kdalab_chunk_opts op = kdalab_chunk_opts_default();
            switch (trial) {
            case 0: gb[3] = 0.1; break;
            case 1: bb[2] = 2.0000000000000004; break;
            case 2: qb[4] = NAN; break;
            case 3: vp = NULL; break;
            case 4: db.K = 0; break;
            case 5: sc = -1.0; break;
            case 6: op.chunk = 0; break;
            case 7: op.precision = KDALAB_BF16; break;
            case 8: vb[T * V - 1] = INFINITY; break;
            case 9: bb[3] = NAN; break;
            case 10: gb[11] = 4.9406564584124654e-324; break;
            case 11: bb[1] = -0.0; gb[7] = -0.0; bb[4] = 2.0; break;
            }
            for (int i = 0; i < T * V; i++)
                o[i] = o2[i] = 42.0;
            kdalab_status want = kdalab_chunk_f64(&db, KDALAB_KDA, sc, qb, k, vp, gb, bb, NULL,
                                                  o2, NULL, &op, NULL);
            kdalab_status got = kdalab_simd_chunk_f64(&db, KDALAB_KDA, sc, qb, k, vp, gb, bb,
                                                      NULL, o, NULL, &op, NULL);
            assert_int_equal(got, want);
            if (trial == 11) {
                assert_int_equal(got, KDALAB_OK);
                continue;
            }
            assert_int_not_equal(want, KDALAB_OK);
            for (int i = 0; i < T * V; i++)
                assert_true(o[i] == 42.0);
        }
        /* the decode step: Inf in S refused, S and o as they were; bad beta,
         * missing g, NaN q, bad scale as the reference */
        double S[K * V], S0[K * V], os[V], qn[K];
        memcpy(qn, q, sizeof qn);
        qn[K - 1] = NAN;
        for (int i = 0; i < K * V; i++)
            S[i] = S0[i] = 0.01 * (double)i;
        S[K * V - 3] = S0[K * V - 3] = INFINITY;
        for (int i = 0; i < V; i++)
            os[i] = 7.0;
        for (int m = 0; m < 4; m++) {
            kdalab_status want = kdalab_step_f64((kdalab_mechanism)m, K, V, 0.3, q, k, v, g,
                                                 0.5, S, os);
            assert_int_equal(want, KDALAB_ENONFINITE);
            assert_int_equal(kdalab_simd_step_f64((kdalab_mechanism)m, K, V, 0.3, q, k, v, g,
                                                  0.5, S, os),
                             want);
            assert_memory_equal(S, S0, sizeof S);
            for (int i = 0; i < V; i++)
                assert_true(os[i] == 7.0);
        }
        S[K * V - 3] = 0.5;
        struct { double beta, scale; const double *q, *g; } bad[] = {
            {2.5, 0.3, q, g}, {0.5, 0.3, q, NULL}, {0.5, 0.3, qn, g}, {0.5, 0.0, q, g}};
        for (int b = 0; b < 4; b++) {
            kdalab_status want = kdalab_step_f64(KDALAB_KDA, K, V, bad[b].scale, bad[b].q, k,
                                                 v, bad[b].g, bad[b].beta, S, os);
            assert_int_not_equal(want, KDALAB_OK);
            assert_int_equal(kdalab_simd_step_f64(KDALAB_KDA, K, V, bad[b].scale, bad[b].q, k,
                                                  v, bad[b].g, bad[b].beta, S, os),
                             want);
        }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* A state that overflows from finite inputs is KDALAB_ERANGE, as in the
 * reference, even when o stays finite (q orthogonal to k). */
static void test_step_overflow_is_erange(void **state)
{
    (void)state;
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        const size_t Ks[] = {2, 9}, Vs[] = {1, 7, 40, 128};
        for (size_t ki = 0; ki < 2; ki++)
            for (size_t vi = 0; vi < 4; vi++) {
                size_t K = Ks[ki], V = Vs[vi];
                for (size_t col = 0; col < V; col++) {
                    double q[9] = {0}, k[9] = {0}, v[128] = {0}, o[128], ref_o[128];
                    double *S = calloc(K * V, sizeof *S), *R = calloc(K * V, sizeof *R);
                    q[1] = 1;
                    k[0] = 1e300;
                    v[col] = 1e100;
                    assert_int_equal(kdalab_step_f64(KDALAB_LINEAR_ATTENTION, K, V, 1.0, q, k,
                                                     v, NULL, 0, R, ref_o),
                                     KDALAB_ERANGE);
                    assert_int_equal(kdalab_simd_step_f64(KDALAB_LINEAR_ATTENTION, K, V, 1.0,
                                                          q, k, v, NULL, 0, S, o),
                                     KDALAB_ERANGE);
                    assert_true(isinf(S[col]));
                    free(S);
                    free(R);
                }
            }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_every_level),
        cmocka_unit_test(test_random_every_level),
        cmocka_unit_test(test_extreme_decay),
        cmocka_unit_test(test_empty_and_study_modes),
        cmocka_unit_test(test_step_every_level),
        cmocka_unit_test(test_errors_match_reference),
        cmocka_unit_test(test_step_overflow_is_erange),
    };
    int failed = cmocka_run_group_tests_name("simd_f64", tests, NULL, NULL);
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++)
        if (kdalab_simd_level_available(simdt_levels[li]))
            printf("    level %s: largest relative error against the float64 reference: "
                   "chunkwise %.2e, decode step %.2e (tolerance %.0e)\n",
                   kdalab_simd_level_name(simdt_levels[li]), worst[li], worst_step[li], TOL);
    return failed;
}
