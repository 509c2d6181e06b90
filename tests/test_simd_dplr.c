/*
 * tests/test_simd_dplr.c — the SIMD path's chunkwise forward and backward of
 * the DPLR row (lib/simd/dplr_scores.h, dplr_chunk in chunk_kernels.h,
 * dplr_bwd.h), in float32 and float64 at every dispatch level this CPU
 * runs: fla's golden DPLR cases (outputs and gradients), random shapes
 * against the float64 reference (ragged chunks and sub-chunks, K and V off
 * the vector width, several heads per task and one head split by columns,
 * decays down to -1000 and below exp's floor, packed sequences with grouped
 * value heads, a general (a, b) that is not RWKV-7's), the backward's bits
 * for any thread count and with the chunk states kept or checkpointed, a
 * transition that grows until it overflows, T = 0, a kept workspace, and
 * what the SIMD path refuses for this row (its float32 recurrent form and
 * decode step; tests/test_dplr.c has the rest).
 *
 * Tolerances, relative to max |float64 expected|, are the SIMD path's
 * (tests/simd_precisions.c justifies them): float64 1e-12, float32 1e-5. The
 * DPLR chunk adds one triangular solve of the same size as KDA's UT
 * transform and no division by a decay, so the same bounds hold, for the
 * gradients as for tests/test_simd_bwd.c's; the errors seen are printed.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "simd_levels.h"

#define TOL_F64 1e-12
#define TOL_F32 1e-5

static double worst[2][2][SIMDT_N_LEVELS]; /* [backward?][float64?][level] */

/* Inputs of one DPLR call in float64 (every array [.., K] but v, h0). */
typedef struct {
    const double *q, *k, *v, *g, *a, *b, *h0;
} dplr_in;

/* The SIMD chunkwise forward of call c (impl set here) in float64 (f64) or
 * float32 (inputs rounded, outputs widened) into o, ht; its status. */
static kdalab_status run_simd(int f64, kdalab_call c, const dplr_in *in, size_t nqk, size_t nab,
                              size_t nv, size_t ns, double *o, double *ht, kdalab_report *rep)
{
    c.impl = KDALAB_IMPL_SIMD;
    c.form = KDALAB_FORM_CHUNK;
    if (f64) {
        kdalab_tensors_f64 x = {.q = in->q, .k = in->k, .v = in->v, .g = in->g, .a = in->a,
                                .b = in->b, .h0 = in->h0, .o = o, .ht = ht};
        return kdalab_run_f64(&c, &x, rep);
    }
    float *f[7] = {to_f32(in->q, nqk), to_f32(in->k, nqk), to_f32(in->v, nv),
                   to_f32(in->g, nab), to_f32(in->a, nab), to_f32(in->b, nab),
                   in->h0 ? to_f32(in->h0, ns) : NULL};
    float *of = malloc((nv ? nv : 1) * sizeof *of), *hf = malloc(ns * sizeof *hf);
    assert_true(of && hf);
    kdalab_tensors_f32 x = {.q = f[0], .k = f[1], .v = f[2], .g = f[3], .a = f[4], .b = f[5],
                            .h0 = f[6], .o = of, .ht = hf};
    kdalab_status s = kdalab_run_f32(&c, &x, rep);
    for (size_t i = 0; i < nv; i++)
        o[i] = of[i];
    for (size_t i = 0; i < ns; i++)
        ht[i] = hf[i];
    for (int i = 0; i < 7; i++)
        free(f[i]);
    free(of);
    free(hf);
    return s;
}

/* At every level and in both precisions: the SIMD forward of c within
 * tolerance of o_ref, ht_ref; what: the case, for a failure's message. */
static void check_all_levels(const char *what, kdalab_call c, const dplr_in *in, size_t nqk,
                             size_t nab, size_t nv, size_t ns, const double *o_ref,
                             const double *ht_ref)
{
    double *o = malloc((nv ? nv : 1) * sizeof *o), *ht = malloc(ns * sizeof *ht);
    assert_true(o && ht);
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int f64 = 0; f64 <= 1; f64++) {
            kdalab_report rep;
            kdalab_status s = run_simd(f64, c, in, nqk, nab, nv, ns, o, ht, &rep);
            if (s != KDALAB_OK)
                fail_msg("%s: %s", what, kdalab_last_error());
            assert_int_equal(rep.nonfinite_o + rep.nonfinite_ht, 0);
            double e = fmax(nv ? rel_err_f64(o, o_ref, nv) : 0, rel_err_f64(ht, ht_ref, ns));
            double tol = f64 ? TOL_F64 : TOL_F32;
            worst[0][f64][li] = fmax(worst[0][f64][li], e);
            if (!(e <= tol))
                fail_msg("%s, %s, level %s: relative error %.3g > %g", what,
                         f64 ? "float64" : "float32", kdalab_simd_level_name(simdt_levels[li]),
                         e, tol);
        }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    free(o);
    free(ht);
}

/* The chunkwise call of a golden case at chunk CC[0], sub-chunk CC[1] (into
 * *opts), and its name for a failure's message (into what). */
static kdalab_call golden_call(const char *name, const kdalab_dims *d, kdalab_mechanism m,
                               double scale, const size_t CC[2], kdalab_chunk_opts *opts,
                               char *what, size_t cap)
{
    *opts = kdalab_chunk_opts_default();
    opts->chunk = CC[0];
    opts->subchunk = CC[1];
    snprintf(what, cap, "%s, C = %zu, c = %zu", name, CC[0], CC[1]);
    return (kdalab_call){.dims = *d, .HV = d->H, .mech = m, .scale = scale, .opts = opts};
}

/* ---- the backward ------------------------------------------------------------ */

/* The seven gradients of a DPLR call: dq, dk [B, T, H, K]; dv; dg, da, db
 * [B, T, HV, K]; dh0. */
#define NG 7
static const char *const gnames[NG] = {"dq", "dk", "dv", "dg", "da", "db", "dh0"};

/* The SIMD chunkwise backward of call c (impl set here) in float64 or
 * float32 (inputs rounded, gradients widened) into g[NG] of sizes n[NG]. */
static kdalab_status bwd_simd(int f64, kdalab_call c, const dplr_in *in, const double *d_o,
                              const double *dht, const size_t n[NG], double *g[NG])
{
    c.impl = KDALAB_IMPL_SIMD;
    c.form = KDALAB_FORM_CHUNK;
    if (f64) {
        kdalab_tensors_f64 x = {.q = in->q, .k = in->k, .v = in->v, .g = in->g, .a = in->a,
                                .b = in->b, .h0 = in->h0, .d_o = d_o, .dht = dht, .dq = g[0],
                                .dk = g[1], .dv = g[2], .dg = g[3], .da = g[4], .db = g[5],
                                .dh0 = g[6]};
        return kdalab_run_bwd_f64(&c, &x);
    }
    /* inputs in n's sizes: q, k like dq; v like dv; g, a, b like dg; h0, dht like dh0 */
    float *f[9] = {to_f32(in->q, n[0]), to_f32(in->k, n[0]), to_f32(in->v, n[2]),
                   to_f32(in->g, n[3]), to_f32(in->a, n[3]), to_f32(in->b, n[3]),
                   in->h0 ? to_f32(in->h0, n[6]) : NULL, to_f32(d_o, n[2]),
                   dht ? to_f32(dht, n[6]) : NULL};
    float *gf[NG];
    for (int i = 0; i < NG; i++)
        gf[i] = calloc(n[i], sizeof(float));
    kdalab_tensors_f32 x = {.q = f[0], .k = f[1], .v = f[2], .g = f[3], .a = f[4], .b = f[5],
                            .h0 = f[6], .d_o = f[7], .dht = f[8], .dq = gf[0], .dk = gf[1],
                            .dv = gf[2], .dg = gf[3], .da = gf[4], .db = gf[5], .dh0 = gf[6]};
    kdalab_status s = kdalab_run_bwd_f32(&c, &x);
    for (int i = 0; i < NG; i++) {
        for (size_t j = 0; j < n[i]; j++)
            g[i][j] = gf[i][j];
        free(gf[i]);
    }
    for (int i = 0; i < 9; i++)
        free(f[i]);
    return s;
}

/* At every level and in both precisions, with the chunk states checkpointed
 * and kept (kdalab_chunk_opts.bwd_state_bytes): the SIMD backward of c within
 * tolerance of want[NG] (NULL: not checked); and in float64 at the widest
 * level, the same bits on 1 thread checkpointed and 3 threads kept. */
static void check_bwd_all_levels(const char *what, kdalab_call c, const dplr_in *in,
                                 const double *d_o, const double *dht, const size_t n[NG],
                                 double *const want[NG])
{
    double *g[NG], *g1[NG];
    for (int i = 0; i < NG; i++)
        g[i] = malloc(n[i] * sizeof(double)), g1[i] = malloc(n[i] * sizeof(double));
    kdalab_chunk_opts ckpt = *c.opts, kept = *c.opts;
    ckpt.bwd_state_bytes = 1;                 /* too small for any state: checkpoints */
    kept.bwd_state_bytes = (size_t)1 << 40;   /* every state of these problems */
    kdalab_call cc = c, ck = c;
    cc.opts = &ckpt, ck.opts = &kept;
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int f64 = 0; f64 <= 1; f64++) {
            for (int keep = 0; keep <= 1; keep++) {
                if (bwd_simd(f64, keep ? ck : cc, in, d_o, dht, n, g) != KDALAB_OK)
                    fail_msg("%s backward: %s", what, kdalab_last_error());
                const double tol = f64 ? TOL_F64 : TOL_F32;
                for (int i = 0; i < NG; i++) {
                    if (!want[i])
                        continue;
                    double e = rel_err_f64(g[i], want[i], n[i]);
                    worst[1][f64][li] = fmax(worst[1][f64][li], e);
                    if (!(e <= tol))
                        fail_msg("%s, %s, level %s, states %s: %s relative error %.3g > %g", what,
                                 f64 ? "float64" : "float32",
                                 kdalab_simd_level_name(simdt_levels[li]),
                                 keep ? "kept" : "checkpointed", gnames[i], e, tol);
                }
            }
        }
    }
    const int nth = omp_get_max_threads(); /* at the widest level */
    omp_set_num_threads(1);
    assert_int_equal(bwd_simd(1, cc, in, d_o, dht, n, g1), KDALAB_OK);
    omp_set_num_threads(3);
    assert_int_equal(bwd_simd(1, ck, in, d_o, dht, n, g), KDALAB_OK);
    omp_set_num_threads(nth);
    for (int i = 0; i < NG; i++) {
        assert_memory_equal(g[i], g1[i], n[i] * sizeof(double));
        free(g[i]), free(g1[i]);
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
}

/* fla's golden DPLR gradients (tests/golden_grad), at C = 16, 13 / c = 5
 * and 64 / c = 16. */
static void test_bwd_golden(void **state)
{
    (void)state;
    static grad_case cases[16];
    size_t n = grad_load_all(cases, 16), seen = 0;
    const size_t CC[][2] = {{16, 16}, {13, 5}, {64, 16}};
    for (size_t ci = 0; ci < n; ci++) {
        const grad_case *gc = &cases[ci];
        if (!kdalab_mechanism_has_ab(gc->mech))
            continue;
        seen++;
        const kdalab_dims *d = &gc->dims;
        dplr_in in = {gc->q.data, gc->k.data, gc->v.data, gc->g.data, gc->a.data, gc->b.data,
                      gc->h0.data};
        const size_t sz[NG] = {n_qk(d), n_qk(d), n_v(d), n_qk(d), n_qk(d), n_qk(d),
                               n_state(d)};
        double *const want[NG] = {gc->dq.data, gc->dk.data, gc->dv.data, gc->dg.data,
                                  gc->da.data, gc->db.data, gc->has_h0 ? gc->dh0.data : NULL};
        for (size_t oi = 0; oi < sizeof CC / sizeof CC[0]; oi++) {
            kdalab_chunk_opts opts;
            char what[128];
            kdalab_call c = golden_call(gc->name, d, gc->mech, gc->scale, CC[oi], &opts, what,
                                        sizeof what);
            check_bwd_all_levels(what, c, &in, gc->d_o.data, gc->dht.data, sz, want);
        }
    }
    for (size_t ci = 0; ci < n; ci++)
        grad_case_free(&cases[ci]);
    assert_int_equal(seen, 4);
}

/* fla's golden DPLR cases (tests/golden), at the SIMD default C = 16 and at
 * C = 24 / c = 8, C = 13 / c = 5 (ragged), C = 64 / c = 16. */
static void test_golden(void **state)
{
    (void)state;
    static golden_case cases[32];
    size_t n = golden_load_all(cases, 32), seen = 0;
    const size_t CC[][2] = {{16, 16}, {24, 8}, {13, 5}, {64, 16}};
    for (size_t i = 0; i < n; i++) {
        const golden_case *gc = &cases[i];
        if (!kdalab_mechanism_has_ab(gc->mech))
            continue;
        seen++;
        const kdalab_dims *d = &gc->dims;
        dplr_in in = {gc->q.data, gc->k.data, gc->v.data, gc->g.data, gc->a.data, gc->b.data,
                      gc->has_h0 ? gc->h0.data : NULL};
        for (size_t oi = 0; oi < sizeof CC / sizeof CC[0]; oi++) {
            kdalab_chunk_opts opts;
            char what[128];
            kdalab_call c = golden_call(gc->name, d, gc->mech, gc->scale, CC[oi], &opts, what,
                                        sizeof what);
            check_all_levels(what, c, &in, n_qk(d), n_qk(d), n_v(d), n_state(d), gc->o.data,
                             gc->ht.data);
        }
    }
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
    assert_int_equal(seen, 4);
}

/* Random shapes against the float64 reference's chunkwise form, forward
 * and backward, with the same options. general: a, b drawn freely (|a_c|, |b_c| <= 1/K, so the
 * transition stays near a contraction without RWKV-7's structure). */
typedef struct {
    size_t B, T, H, HV, K, V, C, c;
    double g_min;
    int spikes, general, varlen;
} shape;

static const shape shapes[] = {
    {1, 77, 2, 2, 24, 20, 64, 16, -1.0, 0, 0, 0},  {2, 100, 3, 3, 40, 72, 32, 8, -3.0, 0, 0, 0},
    {1, 130, 1, 1, 128, 128, 16, 16, -0.5, 0, 0, 0}, {1, 90, 1, 1, 16, 40, 64, 16, -1000, 0, 0, 0},
    {1, 200, 2, 2, 64, 48, 64, 16, -0.05, 1, 0, 0}, {1, 33, 1, 1, 9, 7, 10, 3, -2.0, 0, 1, 0},
    {1, 1, 1, 1, 8, 8, 16, 16, -1.0, 0, 0, 0},     {1, 65, 4, 4, 128, 64, 64, 16, -0.1, 0, 1, 0},
    {1, 50, 2, 2, 13, 11, 16, 4, -760.0, 0, 0, 0}, {1, 61, 2, 4, 16, 12, 16, 8, -1.0, 0, 1, 1},
    {1, 40, 1, 1, 5, 3, 8, 3, -0.01, 0, 0, 0},
};

static void test_random_shapes(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(91);
    const int64_t cu[] = {0, 1, 17, 40, 61};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *sh = &shapes[si];
        kdalab_dims d = {sh->B, sh->T, sh->H, sh->K, sh->V}, dx = d;
        dx.H = sh->HV; /* v, g, a, b, h0 at HV heads */
        random_problem p;
        random_problem_make(&p, rng, KDALAB_DPLR, dx, sh->g_min, si % 2);
        for (size_t i = 0; i < n_qk(&dx); i++) {
            if (sh->spikes && gsl_rng_uniform(rng) < 0.03)
                p.g[i] = -1000.0;
            if (sh->general) {
                p.a[i] = (2 * gsl_rng_uniform(rng) - 1) / (double)sh->K;
                p.b[i] = (2 * gsl_rng_uniform(rng) - 1) / (double)sh->K;
            }
        }
        size_t N = sh->varlen ? 4 : d.B, ns = N * n_state(&dx) / dx.B;
        double *h0 = NULL;
        if (p.h0 && sh->varlen) { /* one state per packed sequence */
            h0 = malloc(ns * sizeof *h0);
            for (size_t i = 0; i < ns; i++)
                h0[i] = gsl_rng_uniform(rng) - 0.5;
        }
        kdalab_chunk_opts opts = kdalab_chunk_opts_default();
        opts.chunk = sh->C;
        opts.subchunk = sh->c;
        kdalab_call c = {.dims = d, .HV = sh->HV, .mech = KDALAB_DPLR,
                         .scale = kdalab_default_scale(d.K), .form = KDALAB_FORM_CHUNK,
                         .impl = KDALAB_IMPL_REFERENCE, .opts = &opts,
                         .cu_seqlens = sh->varlen ? cu : NULL, .n_seqs = sh->varlen ? 4 : 0};
        dplr_in in = {p.q, p.k, p.v, p.g, p.a, p.b, sh->varlen ? h0 : p.h0};
        double *o = malloc(n_v(&dx) * sizeof *o), *ht = malloc(ns * sizeof *ht);
        kdalab_tensors_f64 x = {.q = in.q, .k = in.k, .v = in.v, .g = in.g, .a = in.a,
                                .b = in.b, .h0 = in.h0, .o = o, .ht = ht};
        if (kdalab_run_f64(&c, &x, NULL) != KDALAB_OK)
            fail_msg("shape %zu: %s", si, kdalab_last_error());
        char what[64];
        snprintf(what, sizeof what, "shape %zu", si);
        check_all_levels(what, c, &in, n_qk(&d), n_qk(&dx), n_v(&dx), ns, o, ht);
        /* the backward against the reference's chunkwise backward */
        const size_t sz[NG] = {n_qk(&d), n_qk(&d), n_v(&dx), n_qk(&dx), n_qk(&dx), n_qk(&dx),
                               ns};
        double *d_o = malloc(n_v(&dx) * sizeof *d_o), *dht = malloc(ns * sizeof *dht);
        double *want[NG];
        for (size_t i = 0; i < n_v(&dx); i++)
            d_o[i] = gsl_rng_uniform(rng) - 0.5;
        for (size_t i = 0; i < ns; i++)
            dht[i] = gsl_rng_uniform(rng) - 0.5;
        for (int i = 0; i < NG; i++)
            want[i] = calloc(sz[i], sizeof(double));
        kdalab_tensors_f64 xb = {.q = in.q, .k = in.k, .v = in.v, .g = in.g, .a = in.a,
                                 .b = in.b, .h0 = in.h0, .d_o = d_o, .dht = dht,
                                 .dq = want[0], .dk = want[1], .dv = want[2], .dg = want[3],
                                 .da = want[4], .db = want[5], .dh0 = want[6]};
        if (kdalab_run_bwd_f64(&c, &xb) != KDALAB_OK)
            fail_msg("shape %zu backward: %s", si, kdalab_last_error());
        check_bwd_all_levels(what, c, &in, d_o, dht, sz, want);
        for (int i = 0; i < NG; i++)
            free(want[i]);
        free(d_o);
        free(dht);
        free(o);
        free(ht);
        free(h0);
        random_problem_free(&p);
    }
    gsl_rng_free(rng);
}

/* A transition with eigenvalue 1 + a^T b = 4.24 (a = b = 0.9 * 1, K = 4,
 * no decay): after 600 steps the state has overflowed, and the SIMD path
 * says so as the reference does (KDALAB_ERANGE, the non-finite outputs
 * counted, the early ones written). */
static void test_growth_is_reported(void **state)
{
    (void)state;
    kdalab_dims d = {.B = 1, .T = 600, .H = 1, .K = 4, .V = 2};
    const size_t nqk = n_qk(&d), nv = n_v(&d), ns = n_state(&d);
    double *q = malloc(nqk * 8), *a = malloc(nqk * 8), *g = calloc(nqk, 8);
    double *v = malloc(nv * 8), *o = malloc(nv * 8), *ht = malloc(ns * 8);
    for (size_t i = 0; i < nqk; i++)
        q[i] = 0.5, a[i] = 0.9;
    for (size_t i = 0; i < nv; i++)
        v[i] = 1;
    dplr_in in = {q, q, v, g, a, a, NULL};
    kdalab_call c = {.dims = d, .HV = 1, .mech = KDALAB_DPLR, .scale = 0.5};
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (int f64 = 0; f64 <= 1; f64++) {
            kdalab_report rep;
            assert_int_equal(run_simd(f64, c, &in, nqk, nqk, nv, ns, o, ht, &rep),
                             KDALAB_ERANGE);
            assert_true(rep.nonfinite_o > 0);
            assert_true(isfinite(o[0]));
        }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    free(q); free(a); free(g); free(v); free(o); free(ht);
}

/* The edges of the SIMD path for this row: T = 0 (ht = h0, a and b may be
 * NULL); a caller's workspace kept across calls gives the bits of calls
 * without one, forward and backward, and stops growing; the float32
 * recurrent form (the decode step repeated, which takes no a, b) and the
 * SIMD decode step refuse the row by name. */
static void test_edges(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(93);
    kdalab_dims d = {.B = 1, .T = 0, .H = 2, .K = 5, .V = 3};
    const size_t ns = n_state(&d);
    double h0[30], ht[30];
    for (size_t i = 0; i < ns; i++)
        h0[i] = gsl_rng_uniform(rng) - 0.5;
    kdalab_call c = {.dims = d, .HV = 2, .mech = KDALAB_DPLR, .scale = 0.5,
                     .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD};
    kdalab_tensors_f64 x0 = {.h0 = h0, .ht = ht};
    assert_int_equal(kdalab_run_f64(&c, &x0, NULL), KDALAB_OK);
    assert_memory_equal(ht, h0, ns * sizeof(double));

    d.T = 37;
    random_problem p;
    random_problem_make(&p, rng, KDALAB_DPLR, d, -1.0, 1);
    c.dims = d;
    const size_t nv = n_v(&d), nqk = n_qk(&d);
    double *o[2], *hts[2], *g[2][NG], *d_o = malloc(nv * sizeof *d_o);
    const size_t sz[NG] = {nqk, nqk, nv, nqk, nqk, nqk, ns};
    for (size_t i = 0; i < nv; i++)
        d_o[i] = gsl_rng_uniform(rng) - 0.5;
    kdalab_workspace *w = kdalab_workspace_new();
    assert_non_null(w);
    size_t bytes = 0;
    for (int run = 0; run < 3; run++) { /* 0: no workspace; 1, 2: the kept one */
        const int k = run ? 1 : 0;
        c.work = run ? w : NULL;
        o[k] = malloc(nv * sizeof(double)), hts[k] = malloc(ns * sizeof(double));
        for (int i = 0; i < NG; i++)
            g[k][i] = calloc(sz[i], sizeof(double));
        kdalab_tensors_f64 x = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .a = p.a, .b = p.b,
                                .h0 = p.h0, .o = o[k], .ht = hts[k], .d_o = d_o,
                                .dq = g[k][0], .dk = g[k][1], .dv = g[k][2], .dg = g[k][3],
                                .da = g[k][4], .db = g[k][5], .dh0 = g[k][6]};
        assert_int_equal(kdalab_run_f64(&c, &x, NULL), KDALAB_OK);
        assert_int_equal(kdalab_run_bwd_f64(&c, &x), KDALAB_OK);
        if (run == 2)
            assert_int_equal(kdalab_workspace_bytes(w), bytes); /* nothing new mapped */
        bytes = kdalab_workspace_bytes(w);
        if (run) {
            assert_memory_equal(o[1], o[0], nv * sizeof(double));
            assert_memory_equal(hts[1], hts[0], ns * sizeof(double));
            for (int i = 0; i < NG; i++) {
                assert_memory_equal(g[1][i], g[0][i], sz[i] * sizeof(double));
                free(g[1][i]);
            }
            free(o[1]), free(hts[1]);
        }
    }
    assert_true(bytes > 0);
    for (int i = 0; i < NG; i++)
        free(g[0][i]);
    free(o[0]), free(hts[0]), free(d_o);
    kdalab_workspace_free(w);

    /* the float32 recurrent form on the SIMD path would drop the b a^T term */
    float *f[7] = {to_f32(p.q, nqk), to_f32(p.k, nqk), to_f32(p.v, nv), to_f32(p.g, nqk),
                   to_f32(p.a, nqk), to_f32(p.b, nqk), malloc(nv * sizeof(float))};
    kdalab_tensors_f32 y = {.q = f[0], .k = f[1], .v = f[2], .g = f[3], .a = f[4], .b = f[5],
                            .o = f[6]};
    c.work = NULL;
    c.form = KDALAB_FORM_RECURRENT;
    assert_int_equal(kdalab_run_f32(&c, &y, NULL), KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "chunkwise form only"));
    /* and so would the SIMD decode step, whatever its inputs */
    double S[15] = {0}, out[3];
    float Sf[15] = {0}, outf[3];
    assert_int_equal(kdalab_simd_step_f64(KDALAB_DPLR, 5, 3, 0.5, p.q, p.k, p.v, p.g, 0, S,
                                          out),
                     KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "kdalab_step_ab"));
    assert_int_equal(kdalab_simd_step_f32(KDALAB_DPLR, 5, 3, 0.5f, f[0], f[1], f[2], f[3], 0,
                                          Sf, outf),
                     KDALAB_EINVAL);
    for (int i = 0; i < 7; i++)
        free(f[i]);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_bwd_golden),
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_growth_is_reported),
        cmocka_unit_test(test_edges),
    };
    int failed = cmocka_run_group_tests_name("simd_dplr", tests, NULL, NULL);
    for (int bwd = 0; bwd <= 1; bwd++)
        for (int f64 = 0; f64 <= 1; f64++)
            for (size_t li = 0; li < SIMDT_N_LEVELS; li++)
                if (kdalab_simd_level_available(simdt_levels[li]))
                    printf("    DPLR chunkwise %s, %s, level %s: largest relative error "
                           "%.2e (tolerance %g)\n", bwd ? "backward" : "forward",
                           f64 ? "float64" : "float32",
                           kdalab_simd_level_name(simdt_levels[li]), worst[bwd][f64][li],
                           f64 ? TOL_F64 : TOL_F32);
    return failed;
}
