/*
 * tests/test_simd_chunk.c — the optimized path's chunkwise form
 * (kdalab_simd_chunk_f32 and kdalab_simd_chunk_f64, lib/simd/) against the
 * float64 reference at every dispatch level this CPU can run (levels it
 * cannot run are skipped with a message); its error statuses against the
 * reference of its precision; the input screens; the level functions
 * (kdalab_simd_level_*).
 *
 * Each test is written once and registered for both precisions
 * (tests/simd_precisions.h: test_simd_chunk_golden_f32 and _f64, ...); the
 * tolerances, 1e-5 for float32 and 1e-12 for float64, are justified there.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_levels.h"

#define MAX_CASES 32


/* The SIMD chunkwise form of precision p, at the level in use, on float64
 * inputs (rounded to p) against the float64 outputs o_ref, ht_ref: OK,
 * nothing non-finite; returns the larger relative error of o and ht, noted
 * for the closing lines. */
static double simd_vs(const simdt_precision *p, const kdalab_dims *d, kdalab_mechanism mech,
                      double scale, const double *q, const double *k, const double *v,
                      const double *g, const double *beta, const double *h0,
                      const kdalab_chunk_opts *opts, const double *o_ref, const double *ht_ref)
{
    size_t nv = n_v(d), ns = n_state(d);
    double *o = malloc((nv ? nv : 1) * sizeof *o), *ht = malloc(ns * sizeof *ht);
    assert_true(o && ht);
    kdalab_report rep;
    assert_int_equal(p->simd_chunk(d, mech, scale, q, k, v, g, beta, h0, o, ht, opts, &rep),
                     KDALAB_OK);
    assert_int_equal(rep.nonfinite_o, 0);
    assert_int_equal(rep.nonfinite_ht, 0);
    double eo = nv ? rel_err_f64(o, o_ref, nv) : 0, eh = rel_err_f64(ht, ht_ref, ns);
    double e = eo > eh ? eo : eh;
    simdt_note(p, e);
    free(o);
    free(ht);
    return e;
}

/* kdalab_chunk_f64's o and ht (malloc'd) for the same call */
static void reference(const kdalab_dims *d, kdalab_mechanism mech, double scale,
                      const double *q, const double *k, const double *v, const double *g,
                      const double *beta, const double *h0, const kdalab_chunk_opts *opts,
                      double **o, double **ht)
{
    size_t nv = n_v(d);
    *o = malloc((nv ? nv : 1) * sizeof **o);
    *ht = malloc(n_state(d) * sizeof **ht);
    assert_true(*o && *ht);
    assert_int_equal(kdalab_chunk_f64(d, mech, scale, q, k, v, g, beta, h0, *o, *ht, opts,
                                      NULL),
                     KDALAB_OK);
}

/* fla's golden cases at C = 64 and at C = 24, 13 (sub-chunks 8, 5: ragged
 * chunks and sub-chunks) within tolerance of fla's float64 o and ht. */
static void test_simd_chunk_golden(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
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
            for (size_t oi = 0; oi < 3 && !kdalab_mechanism_has_ab(gc->mech); oi++) {
                /* (the DPLR row takes a, b: tests/test_simd_dplr.c) */
                double e = simd_vs(p, &gc->dims, gc->mech, gc->scale, gc->q.data, gc->k.data,
                                   gc->v.data, gc->g.data, gc->beta.data,
                                   gc->has_h0 ? gc->h0.data : NULL, opts[oi], gc->o.data,
                                   gc->ht.data);
                if (e > p->tol)
                    print_error("%s, level %s, case %s, opts %zu: %.3g\n", p->name,
                                kdalab_simd_level_name(simdt_levels[li]), gc->name, oi, e);
                assert_true(e <= p->tol);
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Random shapes: ragged T, C not dividing T, K != V, K and V not multiples of
 * the vector width, B*H > 1 and == 1 (the column split across threads),
 * strong decay (g down to -1000), g near and below float64 exp's floor
 * (-708), and g mostly tiny with -1000 spikes in the same sub-chunk (where
 * differences of cumulative sums would cancel); against kdalab_chunk_f64 with
 * the same options. */
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
    {1, 65, 4, 128, 64, 64, 16, -0.1, 0}, {1, 50, 2, 13, 11, 16, 4, -760.0, 0},
    {1, 40, 1, 5, 3, 8, 3, -0.01, 0},
};

static void test_simd_chunk_random_shapes(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    gsl_rng *rng = test_rng(17);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *sh = &shapes[si];
        kdalab_dims d = {sh->B, sh->T, sh->H, sh->K, sh->V};
        for (size_t mi = 0; mi < KDALAB_N_MECHANISMS; mi++) { /* every row of the table */
            if (kdalab_mechanism_has_ab((kdalab_mechanism)mi))
                continue; /* these positional functions take no a, b: test_simd_dplr.c */
            kdalab_mechanism mech = (kdalab_mechanism)mi;
            random_problem pr;
            random_problem_make(&pr, rng, mech, d, sh->spikes ? -0.05 : sh->g_min, si % 2);
            if (sh->spikes)
                for (size_t i = 0; i < n_qk(&d); i++)
                    if (gsl_rng_uniform(rng) < 0.03)
                        pr.g[i] = -1000.0;
            const double *g = kdalab_mechanism_g_width(mech, d.K) ? pr.g : NULL;
            const double *beta = kdalab_mechanism_has_delta(mech) ? pr.beta : NULL;
            double scale = kdalab_default_scale(d.K), *o, *ht;
            kdalab_chunk_opts opts = kdalab_chunk_opts_default();
            opts.chunk = sh->C;
            opts.subchunk = sh->c;
            reference(&d, mech, scale, pr.q, pr.k, pr.v, g, beta, pr.h0, &opts, &o, &ht);
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                double e = simd_vs(p, &d, mech, scale, pr.q, pr.k, pr.v, g, beta, pr.h0, &opts,
                                   o, ht);
                if (e > p->tol)
                    print_error("%s, level %s, shape %zu, %s: %.3g\n", p->name,
                                kdalab_simd_level_name(simdt_levels[li]), si,
                                kdalab_mechanism_name(mech), e);
                assert_true(e <= p->tol);
            }
            free(o);
            free(ht);
            random_problem_free(&pr);
        }
    }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* g = -1000 everywhere (each step forgets everything before it), g = -720
 * and -707 (decays just below and above float64 exp's floor; far below
 * float32's): finite, and as the reference. */
static void test_simd_chunk_extreme_decay(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    gsl_rng *rng = test_rng(11);
    kdalab_dims d = {1, 150, 2, 64, 64};
    const double gs[] = {-1000.0, -720.0, -707.0};
    for (size_t gi = 0; gi < 3; gi++) {
        random_problem pr;
        random_problem_make(&pr, rng, KDALAB_KDA, d, -1.0, 1);
        for (size_t i = 0; i < n_qk(&d); i++)
            pr.g[i] = gs[gi];
        double *o, *ht;
        reference(&d, KDALAB_KDA, 0.125, pr.q, pr.k, pr.v, pr.g, pr.beta, pr.h0, NULL, &o, &ht);
        for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
            if (!simdt_use_level(simdt_levels[li]))
                continue;
            assert_true(simd_vs(p, &d, KDALAB_KDA, 0.125, pr.q, pr.k, pr.v, pr.g, pr.beta,
                                pr.h0, NULL, o, ht) <= p->tol);
        }
        free(o);
        free(ht);
        random_problem_free(&pr);
    }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* T = 0: no output rows; ht is h0 (or zero without h0), as the reference. */
static void test_simd_chunk_empty_sequence(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
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
            assert_int_equal(p->simd_chunk(&d, (kdalab_mechanism)m, 0.3, NULL, NULL, NULL,
                                           NULL, NULL, h0, NULL, ht, NULL, NULL),
                             KDALAB_OK);
            assert_memory_equal(ht, h0, ns * sizeof *ht);
            assert_int_equal(p->simd_chunk(&d, (kdalab_mechanism)m, 0.3, NULL, NULL, NULL,
                                           NULL, NULL, NULL, NULL, ht, NULL, NULL),
                             KDALAB_OK);
            for (size_t i = 0; i < ns; i++)
                assert_true(ht[i] == 0.0);
        }
    }
    free(h0);
    free(ht);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The study's decay modes go to the reference of the precision: the same bits. */
static void test_simd_chunk_study_modes_are_the_reference(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    gsl_rng *rng = test_rng(3);
    kdalab_dims d = {1, 40, 2, 16, 8};
    random_problem pr;
    random_problem_make(&pr, rng, KDALAB_KDA, d, -0.5, 1);
    size_t nv = n_v(&d);
    double *o1 = malloc(nv * sizeof *o1), *o2 = malloc(nv * sizeof *o2);
    assert_true(o1 && o2);
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.decay = KDALAB_DECAY_PAIRWISE;
    assert_int_equal(p->chunk(&d, KDALAB_KDA, 0.25, pr.q, pr.k, pr.v, pr.g, pr.beta, pr.h0, o1,
                              NULL, &op, NULL),
                     KDALAB_OK);
    assert_int_equal(p->simd_chunk(&d, KDALAB_KDA, 0.25, pr.q, pr.k, pr.v, pr.g, pr.beta,
                                   pr.h0, o2, NULL, &op, NULL),
                     KDALAB_OK);
    assert_memory_equal(o1, o2, nv * sizeof *o1);
    free(o1);
    free(o2);
    random_problem_free(&pr);
    gsl_rng_free(rng);
}

/* Bad input, at every level: the same status as the reference of the
 * precision, outputs untouched; and edge values the vector screens must judge
 * as the reference does, with the status each must have. */
static void test_simd_chunk_bad_input_as_reference(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
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
        /* g > 0, beta > 2 (far, and just), NaN in q, NULL v, zero K, bad
         * scale, bad chunk, bf16 storage (float32 emulates it; the float64 form
         * wants FP32), Inf in the last v, NaN beta, smallest subnormal g;
         * legal edges -0 and beta = 2 */
        for (int trial = 0; trial < 13; trial++) {
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
            case 1: bb[2] = 2.5; break;
            case 2: bb[2] = p->above_two; break;
            case 3: qb[4] = NAN; break;
            case 4: vp = NULL; break;
            case 5: db.K = 0; break;
            case 6: sc = -1.0; break;
            case 7: op.chunk = 0; break;
            case 8: op.precision = KDALAB_BF16; break;
            case 9: vb[T * V - 1] = INFINITY; break;
            case 10: bb[3] = NAN; break;
            case 11: gb[11] = p->tiny; break;
            case 12: bb[1] = -0.0; gb[7] = -0.0; bb[4] = 2.0; break;
            }
            for (int i = 0; i < T * V; i++)
                o[i] = o2[i] = 42.0;
            kdalab_status want = p->chunk(&db, KDALAB_KDA, sc, qb, k, vp, gb, bb, NULL, o2,
                                          NULL, &op, NULL);
            kdalab_status got = p->simd_chunk(&db, KDALAB_KDA, sc, qb, k, vp, gb, bb, NULL, o,
                                              NULL, &op, NULL);
            assert_int_equal(got, want);
            if (trial == 12 || (trial == 8 && p->emulates_bf16)) {
                assert_int_equal(got, KDALAB_OK);
                continue;
            }
            assert_int_not_equal(want, KDALAB_OK);
            for (int i = 0; i < T * V; i++)
                assert_true(o[i] == 42.0);
        }
        /* legal -0 and 2 (and g = -0); illegal smallest subnormal g, beta just
         * above 2, NaN beta, Inf v, NaN in the last element of g, beta just
         * below 0 */
        for (int trial = 0; trial < 8; trial++) {
            double gb[T * K], bb[T], vb[T * V];
            memcpy(gb, g, sizeof g);
            memcpy(bb, beta, sizeof beta);
            memcpy(vb, v, sizeof v);
            switch (trial) {
            case 0: bb[1] = -0.0; gb[7] = -0.0; break;
            case 1: bb[4] = 2.0; break;
            case 2: gb[11] = p->tiny; break;
            case 3: bb[0] = p->above_two; break;
            case 4: bb[3] = NAN; break;
            case 5: vb[T * V - 1] = INFINITY; break;
            case 6: gb[T * K - 1] = NAN; break;
            case 7: bb[2] = -p->tiny; break;
            }
            kdalab_status want = p->chunk(&d, KDALAB_KDA, 0.3, q, k, vb, gb, bb, NULL, o2, NULL,
                                          NULL, NULL);
            kdalab_status got = p->simd_chunk(&d, KDALAB_KDA, 0.3, q, k, vb, gb, bb, NULL, o,
                                              NULL, NULL, NULL);
            assert_int_equal(got, want);
            assert_int_equal(want, trial <= 1                  ? KDALAB_OK
                                   : (trial >= 4 && trial <= 6) ? KDALAB_ENONFINITE
                                                                : KDALAB_EDOMAIN);
        }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The vector screen's wide loop (four vectors at a time, then single vectors,
 * then the tail): an edge value in each of those regions of g and beta,
 * judged as the reference of the precision judges it, and the output
 * untouched when refused. T = 72 positions: for float32, beta has 64
 * elements in the AVX-512 wide loop and g (T x K = 1152) all three regions at
 * every level; for float64 (half as many lanes) the same positions fall in
 * the wide loop and the single vectors. */
static void test_simd_chunk_screen_edge_values(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    enum { K = 16, V = 16, T = 72 };
    static double q[T * K], k[T * K], v[T * V], g[T * K], o[T * V], o2[T * V];
    for (int i = 0; i < T * K; i++) {
        q[i] = 0.01 * (double)(i % 13);
        k[i] = 0.05;
        g[i] = -0.25;
    }
    for (int i = 0; i < T * V; i++)
        v[i] = 1.0;
    kdalab_dims d = {1, T, 1, K, V};
    /* positions: wide loop (early, late), single vectors, the tail; values:
     * legal edges first (g: -0; beta: 2, -0), then illegal ones (the smallest
     * subnormal above 0 or below 0, just above 2, NaN, +-Inf) */
    const int gpos[] = {0, 37, 1100, T * K - 1}, bpos[] = {3, 60, 66, T - 1};
    const double gval[] = {-0.0, p->tiny, NAN, INFINITY, -INFINITY};
    const double bval[] = {2.0, -0.0, p->above_two, -p->tiny, NAN};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int arr = 0; arr < 2; arr++)
            for (int pi = 0; pi < 4; pi++)
                for (int vi = 0; vi < 5; vi++) {
                    double gb[T * K], bb[T];
                    memcpy(gb, g, sizeof g);
                    for (int t = 0; t < T; t++)
                        bb[t] = 0.5;
                    if (arr == 0)
                        gb[gpos[pi]] = gval[vi];
                    else
                        bb[bpos[pi]] = bval[vi];
                    for (int i = 0; i < T * V; i++)
                        o[i] = o2[i] = 42.0;
                    kdalab_status want = p->chunk(&d, KDALAB_KDA, 0.3, q, k, v, gb, bb, NULL,
                                                  o2, NULL, NULL, NULL);
                    kdalab_status got = p->simd_chunk(&d, KDALAB_KDA, 0.3, q, k, v, gb, bb,
                                                      NULL, o, NULL, NULL, NULL);
                    if (got != want)
                        print_error("%s, level %s, %s[%d] = %g: simd %d, reference %d\n",
                                    p->name, kdalab_simd_level_name(simdt_levels[li]),
                                    arr ? "beta" : "g", arr ? bpos[pi] : gpos[pi],
                                    arr ? bval[vi] : gval[vi], got, want);
                    assert_int_equal(got, want);
                    /* the legal edges pass, every other value is refused untouched */
                    assert_int_equal(want == KDALAB_OK, arr == 0 ? vi == 0 : vi < 2);
                    if (want != KDALAB_OK)
                        for (int i = 0; i < T * V; i++)
                            assert_true(o[i] == 42.0);
                }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* kdalab_simd_level_name / _parse / _available / kdalab_simd_set_level /
 * _get_level: names round-trip; a level the CPU lacks is refused, never run. */
static void test_simd_level_name_parse_set(void **state)
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
        cmocka_unit_test(test_simd_level_name_parse_set),
        SIMDT_BOTH(test_simd_chunk_golden),
        SIMDT_BOTH(test_simd_chunk_random_shapes),
        SIMDT_BOTH(test_simd_chunk_extreme_decay),
        SIMDT_BOTH(test_simd_chunk_empty_sequence),
        SIMDT_BOTH(test_simd_chunk_study_modes_are_the_reference),
        SIMDT_BOTH(test_simd_chunk_bad_input_as_reference),
        SIMDT_BOTH(test_simd_chunk_screen_edge_values),
    };
    int failed = cmocka_run_group_tests_name("simd_chunk", tests, NULL, NULL);
    simdt_print_worst("chunkwise form");
    return failed;
}
