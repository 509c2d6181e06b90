/*
 * tests/test_simd_step.c — the optimized float32 path's decode step
 * (kdalab_simd_step_f32) and recurrent form against the float64 reference at
 * every dispatch level this CPU can run: within 1e-5 relative (float32's
 * accuracy, as in test_simd.c), the same bits wherever S sits in memory, a
 * non-finite S refused wherever it is, an overflow reported as
 * KDALAB_ERANGE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_levels.h"

#define TOL 1e-5
#define MAX_CASES 32

/* The decode step, 40 tokens in a row, against kdalab_step_f64, with S at
 * each float offset from a 64-byte boundary (the kernel splits S's columns at
 * the first cache-line boundary, so every split is exercised). */
static void test_step_every_level(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(5);
    const size_t KV[][2] = {{128, 128}, {24, 20}, {7, 45}, {64, 40}};
    const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                      KDALAB_GATED_DELTANET, KDALAB_KDA};
    for (size_t si = 0; si < 4; si++)
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
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                for (size_t off = 0; off < 16; off++) {
                /* aligned_alloc wants a size that is a multiple of 64 bytes */
                size_t nS = (K * V + 64 + 15) / 16 * 16;
                float *Sbuf = aligned_alloc(64, nS * sizeof(float)), *Sf = Sbuf + off;
                float *of = malloc(steps * V * sizeof *of);
                float *qf = to_f32(p.q, steps * K), *kf = to_f32(p.k, steps * K);
                float *vf = to_f32(p.v, steps * V), *gf = to_f32(p.g, steps * K);
                assert_non_null(Sbuf);
                for (size_t i = 0; i < K * V; i++)
                    Sf[i] = (float)p.h0[i];
                for (size_t t = 0; t < steps; t++)
                    assert_int_equal(kdalab_simd_step_f32(mechs[mi], K, V, (float)scale,
                                                          qf + t * K, kf + t * K, vf + t * V,
                                                          gw ? gf + t * gw : NULL,
                                                          (float)p.beta[t], Sf, of + t * V),
                                     KDALAB_OK);
                double eo = rel_err_f32(of, o, steps * V), es = rel_err_f32(Sf, S, K * V);
                simdt_note(eo);
                simdt_note(es);
                if (eo > TOL || es > TOL)
                    print_error("level %s, K %zu V %zu %s, S at +%zu floats: o %.3g S %.3g\n",
                                kdalab_simd_level_name(simdt_levels[li]), K, V,
                                kdalab_mechanism_name(mechs[mi]), off, eo, es);
                assert_true(eo <= TOL);
                assert_true(es <= TOL);
                free(Sbuf); free(of); free(qf); free(kf); free(vf); free(gf);
                }
            }
            free(S);
            free(o);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The decode step gives the same bits wherever S starts: on a cache line, or
 * any float past one (the kernel then reads S in the wrap layout when V is a
 * multiple of the vector width, or splits its columns at the first line
 * boundary otherwise); 6 steps of each mechanism in a row, shapes with and
 * without the wrap layout, the smallest (K = 2, V = 2 vectors) included. */
static void test_step_any_offset_same_bits(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    const size_t KV[][2] = {{128, 128}, {2, 32}, {5, 16}, {16, 64}, {9, 48}, {3, 40}, {4, 20}};
    const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                      KDALAB_GATED_DELTANET, KDALAB_KDA};
    enum { STEPS = 6 };
    for (size_t si = 0; si < sizeof KV / sizeof KV[0]; si++)
        for (size_t mi = 0; mi < 4; mi++) {
            const size_t K = KV[si][0], V = KV[si][1];
            kdalab_dims d = {1, STEPS, 1, K, V};
            random_problem p;
            random_problem_make(&p, rng, mechs[mi], d, -1.0, 1);
            const size_t gw = kdalab_mechanism_g_width(mechs[mi], K);
            float *qf = to_f32(p.q, STEPS * K), *kf = to_f32(p.k, STEPS * K);
            float *vf = to_f32(p.v, STEPS * V), *gf = to_f32(p.g, STEPS * K);
            const size_t nS = (K * V + 64 + 15) / 16 * 16;
            float *Sbuf = aligned_alloc(64, nS * sizeof(float)), *S0 = malloc(K * V * 4);
            float *o = malloc(STEPS * V * 4), *o0 = malloc(STEPS * V * 4);
            assert_true(Sbuf && S0 && o && o0);
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
                if (!simdt_use_level(simdt_levels[li]))
                    continue;
                for (size_t off = 0; off < 16; off++) {
                    float *S = Sbuf + off;
                    for (size_t i = 0; i < K * V; i++)
                        S[i] = (float)p.h0[i];
                    for (size_t t = 0; t < STEPS; t++)
                        assert_int_equal(kdalab_simd_step_f32(mechs[mi], K, V, 0.3f,
                                                              qf + t * K, kf + t * K,
                                                              vf + t * V,
                                                              gw ? gf + t * gw : NULL,
                                                              (float)p.beta[t], S, o + t * V),
                                         KDALAB_OK);
                    if (off == 0) {
                        memcpy(S0, S, K * V * 4);
                        memcpy(o0, o, STEPS * V * 4);
                    } else if (memcmp(S, S0, K * V * 4) || memcmp(o, o0, STEPS * V * 4)) {
                        fail_msg("level %s, K %zu V %zu %s: S at +%zu floats differs from "
                                 "S on a cache line",
                                 kdalab_simd_level_name(simdt_levels[li]), K, V,
                                 kdalab_mechanism_name(mechs[mi]), off);
                    }
                }
            }
            free(Sbuf); free(S0); free(o); free(o0);
            free(qf); free(kf); free(vf); free(gf);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
    /* zeros keep their sign too: a zero state, v = 0, negative q (so a q . S
     * and delta (k . q) are -0) and decays of exactly 0 (g = -1000) */
    enum { KZ = 5, VZ = 32 };
    float qz[KZ], kz[KZ], gz[KZ], vz[VZ] = {0}, oz[VZ], oz0[VZ], Sz0[KZ * VZ];
    float *Zbuf = aligned_alloc(64, (KZ * VZ + 64) * sizeof(float));
    assert_non_null(Zbuf);
    for (int i = 0; i < KZ; i++) {
        qz[i] = -1.0f;
        kz[i] = i % 2 ? 0.0f : 0.5f;
        gz[i] = i % 3 ? -1000.0f : -0.1f;
    }
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t off = 0; off < 16; off++) {
                float *S = Zbuf + off;
                memset(S, 0, KZ * VZ * sizeof(float));
                const float *g = mechs[mi] == KDALAB_KDA ? gz
                                 : mechs[mi] == KDALAB_GATED_DELTANET ? gz + 1 : NULL;
                assert_int_equal(kdalab_simd_step_f32(mechs[mi], KZ, VZ, 0.3f, qz, kz, vz, g,
                                                      1.0f, S, oz),
                                 KDALAB_OK);
                if (off == 0) {
                    memcpy(Sz0, S, sizeof Sz0);
                    memcpy(oz0, oz, sizeof oz0);
                } else if (memcmp(S, Sz0, sizeof Sz0) || memcmp(oz, oz0, sizeof oz0)) {
                    fail_msg("level %s, %s, zero state: S at +%zu floats differs in a zero's "
                             "sign", kdalab_simd_level_name(simdt_levels[li]),
                             kdalab_mechanism_name(mechs[mi]), off);
                }
            }
    }
    free(Zbuf);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* The decode step's finiteness screen is its first pass's sums: a NaN or Inf
 * in any column of S (before, inside or after the cache-line-aligned strips,
 * with S at every float offset), in a row whose k or decay is 0 or not, is
 * refused with S and o untouched. */
static void test_step_nonfinite_anywhere(void **state)
{
    (void)state;
    enum { K = 16, VMAX = 64 };
    float q[K], k[K], v[VMAX], g[K], os[VMAX];
    for (int i = 0; i < K; i++) {
        q[i] = 0.1f * (float)(i % 5);
        k[i] = i % 3 == 0 ? 0.0f : 0.3f; /* rows with k = 0: 0 * NaN is still NaN */
        g[i] = i % 4 == 1 ? -1000.0f : -0.2f; /* and rows whose decay is 0 */
    }
    for (int i = 0; i < VMAX; i++)
        v[i] = 1.0f;
    size_t nbuf = (K * VMAX + 64 + 15) / 16 * 16; /* a multiple of 64 bytes */
    float *buf = aligned_alloc(64, nbuf * sizeof(float));
    float *S0 = malloc(K * VMAX * sizeof(float));
    assert_non_null(buf);
    assert_non_null(S0);
    const float bads[2] = {NAN, INFINITY};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        /* V = 40: columns split at a line boundary; V = 64: the wrap layout */
        for (int V = 40; V <= 64; V += 24)
        for (size_t off = 0; off < 16; off++) {
            float *S = buf + off;
            for (int row = 0; row < K; row += 5)
                for (int col = 0; col < V; col++) {
                    for (int i = 0; i < K * V; i++)
                        S[i] = S0[i] = 0.01f * (float)(i % 97);
                    S[row * V + col] = S0[row * V + col] = bads[col % 2];
                    for (int i = 0; i < V; i++)
                        os[i] = 7.0f;
                    kdalab_status s = kdalab_simd_step_f32(KDALAB_KDA, K, V, 0.3f, q, k, v, g,
                                                           0.5f, S, os);
                    assert_int_equal(s, KDALAB_ENONFINITE);
                    for (int i = 0; i < K * V; i++)
                        assert_true(memcmp(&S[i], &S0[i], sizeof(float)) == 0);
                    for (int i = 0; i < V; i++)
                        assert_true(os[i] == 7.0f);
                }
        }
    }
    free(buf);
    free(S0);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* A state that overflows from finite inputs is KDALAB_ERANGE, as in the
 * reference, even when o stays finite (q orthogonal to k): the overflowed
 * element must be seen in S itself. Every column position is tried, with S
 * at several offsets from a cache line, so the strips, the edge columns, the
 * wrap vector, its scalar ends and the scalar tails all report it. */
static void test_step_overflow_is_erange(void **state)
{
    (void)state;
    for (int lvl = 0; lvl < 3; lvl++) {
        if (!kdalab_simd_level_available((kdalab_simd_level)lvl))
            continue;
        assert_int_equal(kdalab_simd_set_level((kdalab_simd_level)lvl), KDALAB_OK);
        const size_t Ks[] = {2, 9}, Vs[] = {1, 7, 40, 128};
        for (size_t ki = 0; ki < 2; ki++)
            for (size_t vi = 0; vi < 4; vi++) {
                size_t K = Ks[ki], V = Vs[vi];
                for (size_t col = 0; col < V; col++)
                for (size_t off = 0; off < 16; off += col % 2 ? 1 : 3) { /* S's offset */
                    float q[9] = {0}, k[9] = {0}, v[128] = {0}, o[128], ref_o[128];
                    float *Sbuf = aligned_alloc(64, (K * V + 16 + 15) / 16 * 64);
                    float *S = Sbuf + off, *R = calloc(K * V, sizeof *R);
                    memset(S, 0, K * V * sizeof *S);
                    q[1] = 1;      /* o reads row 1 only ...                      */
                    k[0] = 1e30f;  /* ... the write goes to row 0 and overflows */
                    v[col] = 1e10f;
                    kdalab_status want = kdalab_step_f32(KDALAB_LINEAR_ATTENTION, K, V, 1.0f,
                                                         q, k, v, NULL, 0, R, ref_o);
                    kdalab_status got = kdalab_simd_step_f32(KDALAB_LINEAR_ATTENTION, K, V,
                                                             1.0f, q, k, v, NULL, 0, S, o);
                    assert_int_equal(want, KDALAB_ERANGE);
                    if (got != KDALAB_ERANGE)
                        fail_msg("level %d K=%zu V=%zu column %zu, S at +%zu floats: status "
                                 "%s, want ERANGE", lvl, K, V, col, off, kdalab_strerror(got));
                    assert_true(isinf(S[col]));
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
        cmocka_unit_test(test_step_every_level),
        cmocka_unit_test(test_step_any_offset_same_bits),
        cmocka_unit_test(test_step_nonfinite_anywhere),
        cmocka_unit_test(test_step_overflow_is_erange),
    };
    int failed = cmocka_run_group_tests_name("simd_step", tests, NULL, NULL);
    simdt_print_worst(TOL);
    return failed;
}
