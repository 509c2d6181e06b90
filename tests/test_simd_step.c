/*
 * tests/test_simd_step.c — the optimized path's decode step
 * (kdalab_simd_step_f32 and kdalab_simd_step_f64) against the float64
 * reference at every dispatch level this CPU can run: within tolerance, the
 * same bits wherever S sits in memory, a non-finite S refused wherever it is,
 * bad input refused as the reference of the precision refuses it, an overflow
 * reported as KDALAB_ERANGE.
 *
 * Each test is written once and registered for both precisions
 * (tests/simd_precisions.h: test_simd_step_against_reference_f32 and _f64,
 * ...); the tolerances, 1e-5 for float32 and 1e-12 for float64, are justified
 * there. S is held in the precision and placed at every element offset from
 * a 64-byte line (16 for float32, 8 for float64).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_levels.h"

static const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                         KDALAB_GATED_DELTANET, KDALAB_KDA};

/* A 64-byte aligned buffer of n elements of p plus a cache line's worth, so
 * that S can start at any element offset from a line (free with free()). */
static void *line_buffer(const simdt_precision *p, size_t n)
{
    size_t bytes = (n * p->size + 64 + 63) / 64 * 64; /* aligned_alloc: a multiple of 64 */
    void *b = aligned_alloc(64, bytes);
    assert_non_null(b);
    return b;
}

/* The elements of p in a 64-byte line: S's offsets from one */
static size_t per_line(const simdt_precision *p) { return 64 / p->size; }

/* S at element offset off of buf */
static void *at(const simdt_precision *p, void *buf, size_t off)
{
    return (char *)buf + off * p->size;
}

/* The decode step, 40 tokens in a row, against kdalab_step_f64, with S at
 * each element offset from a 64-byte boundary (the kernel reads S in the wrap
 * layout when V is a multiple of the vector width, else splits its columns at
 * the first cache-line boundary: every case is exercised); and the same bits
 * at every offset as on the cache line. */
static void test_simd_step_against_reference(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    gsl_rng *rng = test_rng(5);
    const size_t KV[][2] = {{128, 128}, {24, 20}, {7, 45}, {64, 40}, {3, 2}, {2, 16}};
    const size_t steps = 40;
    for (size_t si = 0; si < 6; si++)
        for (size_t mi = 0; mi < 4; mi++) {
            size_t K = KV[si][0], V = KV[si][1];
            kdalab_dims d = {1, steps, 1, K, V};
            random_problem pr;
            random_problem_make(&pr, rng, mechs[mi], d, si == 3 ? -50.0 : -1.0, 1);
            double scale = kdalab_default_scale(K);
            double *S = malloc(K * V * sizeof *S), *o = malloc(steps * V * sizeof *o);
            double *Sd = malloc(K * V * sizeof *Sd), *od = malloc(steps * V * sizeof *od);
            double *S0 = malloc(K * V * sizeof *S0), *o0 = malloc(steps * V * sizeof *o0);
            void *Sbuf = line_buffer(p, K * V);
            assert_true(S && o && Sd && od && S0 && o0);
            memcpy(S, pr.h0, K * V * sizeof *S);
            size_t gw = kdalab_mechanism_g_width(mechs[mi], K);
            for (size_t t = 0; t < steps; t++)
                assert_int_equal(kdalab_step_f64(mechs[mi], K, V, scale, pr.q + t * K,
                                                 pr.k + t * K, pr.v + t * V,
                                                 gw ? pr.g + t * gw : NULL, pr.beta[t], S,
                                                 o + t * V),
                                 KDALAB_OK);
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                for (size_t off = 0; off < per_line(p); off++) {
                    void *Sp = at(p, Sbuf, off);
                    p->put(Sp, pr.h0, K * V);
                    for (size_t t = 0; t < steps; t++)
                        assert_int_equal(p->simd_step(mechs[mi], K, V, scale, pr.q + t * K,
                                                      pr.k + t * K, pr.v + t * V,
                                                      gw ? pr.g + t * gw : NULL, pr.beta[t],
                                                      Sp, od + t * V),
                                         KDALAB_OK);
                    p->get(Sd, Sp, K * V);
                    double eo = rel_err_f64(od, o, steps * V), es = rel_err_f64(Sd, S, K * V);
                    simdt_note(p, eo > es ? eo : es);
                    if (eo > p->tol || es > p->tol)
                        print_error("%s, level %s, K %zu V %zu %s, S at +%zu: o %.3g S %.3g\n",
                                    p->name, kdalab_simd_level_name(simdt_levels[li]), K, V,
                                    kdalab_mechanism_name(mechs[mi]), off, eo, es);
                    assert_true(eo <= p->tol);
                    assert_true(es <= p->tol);
                    if (off == 0) {
                        memcpy(S0, Sd, K * V * sizeof *S0);
                        memcpy(o0, od, steps * V * sizeof *o0);
                    } else if (memcmp(Sd, S0, K * V * sizeof *S0) ||
                               memcmp(od, o0, steps * V * sizeof *o0)) {
                        fail_msg("%s, level %s, K %zu V %zu %s: S at +%zu differs from S on a "
                                 "cache line", p->name, kdalab_simd_level_name(simdt_levels[li]),
                                 K, V, kdalab_mechanism_name(mechs[mi]), off);
                    }
                }
            }
            free(S); free(o); free(Sd); free(od); free(S0); free(o0); free(Sbuf);
            random_problem_free(&pr);
        }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The decode step gives the same bits wherever S starts: on a cache line, or
 * any element past one (the kernel then reads S in the wrap layout when V is
 * a multiple of the vector width, or splits its columns at the first line
 * boundary otherwise); 6 steps of each mechanism in a row, shapes with and
 * without the wrap layout, the smallest (K = 2, V = 2 vectors) included; and
 * zeros keep their sign. */
static void test_simd_step_same_bits_any_offset(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    gsl_rng *rng = test_rng(11);
    const size_t KV[][2] = {{128, 128}, {2, 32}, {5, 16}, {16, 64}, {9, 48}, {3, 40}, {4, 20}};
    enum { STEPS = 6 };
    for (size_t si = 0; si < sizeof KV / sizeof KV[0]; si++)
        for (size_t mi = 0; mi < 4; mi++) {
            const size_t K = KV[si][0], V = KV[si][1];
            kdalab_dims d = {1, STEPS, 1, K, V};
            random_problem pr;
            random_problem_make(&pr, rng, mechs[mi], d, -1.0, 1);
            const size_t gw = kdalab_mechanism_g_width(mechs[mi], K);
            void *Sbuf = line_buffer(p, K * V), *S0 = malloc(K * V * p->size);
            double *o = malloc(STEPS * V * sizeof *o), *o0 = malloc(STEPS * V * sizeof *o0);
            assert_true(S0 && o && o0);
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                for (size_t off = 0; off < per_line(p); off++) {
                    void *S = at(p, Sbuf, off);
                    p->put(S, pr.h0, K * V);
                    for (size_t t = 0; t < STEPS; t++)
                        assert_int_equal(p->simd_step(mechs[mi], K, V, 0.3, pr.q + t * K,
                                                      pr.k + t * K, pr.v + t * V,
                                                      gw ? pr.g + t * gw : NULL, pr.beta[t],
                                                      S, o + t * V),
                                         KDALAB_OK);
                    if (off == 0) {
                        memcpy(S0, S, K * V * p->size);
                        memcpy(o0, o, STEPS * V * sizeof *o0);
                    } else if (memcmp(S, S0, K * V * p->size) ||
                               memcmp(o, o0, STEPS * V * sizeof *o0)) {
                        fail_msg("%s, level %s, K %zu V %zu %s: S at +%zu differs from S on a "
                                 "cache line", p->name, kdalab_simd_level_name(simdt_levels[li]),
                                 K, V, kdalab_mechanism_name(mechs[mi]), off);
                    }
                }
            }
            free(Sbuf); free(S0); free(o); free(o0);
            random_problem_free(&pr);
        }
    gsl_rng_free(rng);
    /* zeros keep their sign too: a zero state, v = 0, negative q (so a q . S
     * and delta (k . q) are -0) and decays of exactly 0 (g = -1000) */
    enum { KZ = 5, VZ = 32 };
    double qz[KZ], kz[KZ], gz[KZ], vz[VZ] = {0}, zeros[KZ * VZ] = {0}, oz[VZ], oz0[VZ];
    void *Zbuf = line_buffer(p, KZ * VZ), *Sz0 = malloc(KZ * VZ * p->size);
    assert_non_null(Sz0);
    for (int i = 0; i < KZ; i++) {
        qz[i] = -1.0;
        kz[i] = i % 2 ? 0.0 : 0.5;
        gz[i] = i % 3 ? -1000.0 : -0.1;
    }
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t off = 0; off < per_line(p); off++) {
                void *S = at(p, Zbuf, off);
                p->put(S, zeros, KZ * VZ);
                const double *g = mechs[mi] == KDALAB_KDA ? gz
                                  : mechs[mi] == KDALAB_GATED_DELTANET ? gz + 1 : NULL;
                assert_int_equal(p->simd_step(mechs[mi], KZ, VZ, 0.3, qz, kz, vz, g, 1.0, S,
                                              oz),
                                 KDALAB_OK);
                if (off == 0) {
                    memcpy(Sz0, S, KZ * VZ * p->size);
                    memcpy(oz0, oz, sizeof oz0);
                } else if (memcmp(S, Sz0, KZ * VZ * p->size) || memcmp(oz, oz0, sizeof oz0)) {
                    fail_msg("%s, level %s, %s, zero state: S at +%zu differs in a zero's "
                             "sign", p->name, kdalab_simd_level_name(simdt_levels[li]),
                             kdalab_mechanism_name(mechs[mi]), off);
                }
            }
    }
    free(Zbuf);
    free(Sz0);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The decode step's finiteness screen is its first pass's sums: a NaN or Inf
 * in any column of S (before, inside or after the cache-line-aligned strips,
 * with S at every element offset), in a row whose k or decay is 0 or not, is
 * refused with S and o untouched. */
static void test_simd_step_nonfinite_state_refused(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    enum { K = 16, VMAX = 64 };
    double q[K], k[K], v[VMAX], g[K], os[VMAX], Sd[K * VMAX];
    for (int i = 0; i < K; i++) {
        q[i] = 0.1 * (double)(i % 5);
        k[i] = i % 3 == 0 ? 0.0 : 0.3; /* rows with k = 0: 0 * NaN is still NaN */
        g[i] = i % 4 == 1 ? -1000.0 : -0.2; /* and rows whose decay is 0 */
    }
    for (int i = 0; i < VMAX; i++)
        v[i] = 1.0;
    void *buf = line_buffer(p, K * VMAX), *S0 = malloc(K * VMAX * p->size);
    assert_non_null(S0);
    const double bads[2] = {NAN, INFINITY};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        /* V = 40: columns split at a line boundary where 40 is not a multiple
         * of the vector width; V = 64: the wrap layout */
        for (int V = 40; V <= 64; V += 24)
            for (size_t off = 0; off < per_line(p); off++) {
                void *S = at(p, buf, off);
                for (int row = 0; row < K; row += 5)
                    for (int col = 0; col < V; col++) {
                        for (int i = 0; i < K * V; i++)
                            Sd[i] = 0.01 * (double)(i % 97);
                        Sd[row * V + col] = bads[col % 2];
                        p->put(S, Sd, K * V);
                        memcpy(S0, S, K * V * p->size);
                        for (int i = 0; i < V; i++)
                            os[i] = 7.0;
                        kdalab_status s = p->simd_step(KDALAB_KDA, K, V, 0.3, q, k, v, g, 0.5, S,
                                                       os);
                        assert_int_equal(s, KDALAB_ENONFINITE);
                        assert_true(memcmp(S, S0, K * V * p->size) == 0);
                        for (int i = 0; i < V; i++)
                            assert_true(os[i] == 7.0);
                    }
            }
    }
    free(buf);
    free(S0);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* Bad input, at every level, as the reference of the precision refuses it: an
 * Inf in S (S and o as they were), beta out of range, g missing, a NaN in q,
 * a bad scale. */
static void test_simd_step_bad_input_as_reference(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    enum { K = 8, V = 8 };
    double q[K], k[K], v[V], g[K], qn[K], Sd[K * V], os[V];
    for (int i = 0; i < K; i++) {
        q[i] = qn[i] = 0.1 * (double)(i % 7);
        k[i] = 0.2;
        g[i] = -0.5;
    }
    qn[K - 1] = NAN;
    for (int i = 0; i < V; i++)
        v[i] = 1.0;
    for (int i = 0; i < K * V; i++)
        Sd[i] = 0.01 * (double)i;
    Sd[K * V - 3] = INFINITY;
    void *S = malloc(K * V * p->size), *S0 = malloc(K * V * p->size);
    assert_true(S && S0);
    p->put(S, Sd, K * V);
    memcpy(S0, S, K * V * p->size);
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int i = 0; i < V; i++)
            os[i] = 7.0;
        for (int m = 0; m < 4; m++) {
            kdalab_status want = p->step((kdalab_mechanism)m, K, V, 0.3, q, k, v, g, 0.5, S, os);
            assert_int_equal(want, KDALAB_ENONFINITE);
            assert_int_equal(p->simd_step((kdalab_mechanism)m, K, V, 0.3, q, k, v, g, 0.5, S,
                                          os),
                             want);
            assert_memory_equal(S, S0, K * V * p->size);
            for (int i = 0; i < V; i++)
                assert_true(os[i] == 7.0);
        }
        /* the arguments are checked before S: with the Inf still in S, and
         * with S finite */
        for (int finite = 0; finite < 2; finite++) {
            Sd[K * V - 3] = finite ? 0.5 : INFINITY;
            p->put(S, Sd, K * V);
            struct { double beta, scale; const double *q, *g; kdalab_status want; } bad[] = {
                {2.5, 0.3, q, g, KDALAB_EDOMAIN}, {0.5, 0.3, q, NULL, KDALAB_ENULL},
                {0.5, 0.3, qn, g, KDALAB_OK}, {0.5, 0.0, q, g, KDALAB_OK}};
            for (int b = 0; b < (finite ? 4 : 2); b++) {
                kdalab_status want = p->step(KDALAB_KDA, K, V, bad[b].scale, bad[b].q, k, v,
                                             bad[b].g, bad[b].beta, S, os);
                assert_int_not_equal(want, KDALAB_OK);
                if (bad[b].want != KDALAB_OK)
                    assert_int_equal(want, bad[b].want);
                assert_int_equal(p->simd_step(KDALAB_KDA, K, V, bad[b].scale, bad[b].q, k, v,
                                              bad[b].g, bad[b].beta, S, os),
                                 want);
            }
        }
        Sd[K * V - 3] = INFINITY;
        p->put(S, Sd, K * V);
    }
    free(S);
    free(S0);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* A state that overflows from finite inputs is KDALAB_ERANGE, as in the
 * reference of the precision, even when o stays finite (q orthogonal to k):
 * the overflowed element must be seen in S itself. Every column position is
 * tried, with S at several offsets from a cache line, so the strips, the edge
 * columns, the wrap vector, its scalar ends and the scalar tails all report
 * it. */
static void test_simd_step_overflow_is_erange(void **state)
{
    const simdt_precision *p = SIMDT_PREC(state);
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        const size_t Ks[] = {2, 9}, Vs[] = {1, 7, 40, 128};
        for (size_t ki = 0; ki < 2; ki++)
            for (size_t vi = 0; vi < 4; vi++) {
                size_t K = Ks[ki], V = Vs[vi];
                for (size_t col = 0; col < V; col++)
                    for (size_t off = 0; off < per_line(p); off += col % 2 ? 1 : 3) {
                        double q[9] = {0}, k[9] = {0}, v[128] = {0}, o[128], ref_o[128];
                        double zeros[9 * 128] = {0}, Sd[9 * 128];
                        void *Sbuf = line_buffer(p, K * V), *S = at(p, Sbuf, off);
                        void *R = malloc(K * V * p->size);
                        assert_non_null(R);
                        p->put(S, zeros, K * V);
                        p->put(R, zeros, K * V);
                        q[1] = 1;        /* o reads row 1 only ...                      */
                        k[0] = p->big_k; /* ... the write goes to row 0 and overflows */
                        v[col] = p->big_v;
                        kdalab_status want = p->step(KDALAB_LINEAR_ATTENTION, K, V, 1.0, q, k,
                                                     v, NULL, 0, R, ref_o);
                        kdalab_status got = p->simd_step(KDALAB_LINEAR_ATTENTION, K, V, 1.0, q,
                                                         k, v, NULL, 0, S, o);
                        assert_int_equal(want, KDALAB_ERANGE);
                        if (got != KDALAB_ERANGE)
                            fail_msg("%s, level %s, K=%zu V=%zu column %zu, S at +%zu: status "
                                     "%s, want ERANGE", p->name,
                                     kdalab_simd_level_name(simdt_levels[li]), K, V, col, off,
                                     kdalab_strerror(got));
                        p->get(Sd, S, K * V);
                        assert_true(isinf(Sd[col]));
                        free(Sbuf);
                        free(R);
                    }
            }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        SIMDT_BOTH(test_simd_step_against_reference),
        SIMDT_BOTH(test_simd_step_same_bits_any_offset),
        SIMDT_BOTH(test_simd_step_nonfinite_state_refused),
        SIMDT_BOTH(test_simd_step_bad_input_as_reference),
        SIMDT_BOTH(test_simd_step_overflow_is_erange),
    };
    int failed = cmocka_run_group_tests_name("simd_step", tests, NULL, NULL);
    simdt_print_worst("decode step");
    return failed;
}
