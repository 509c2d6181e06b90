/*
 * tests/test_dplr.c — the boundary row, the general diagonal-plus-low-rank
 * transition S_t = (Diag(exp g_t) + b_t a_t^T) S_{t-1} + k_t v_t^T
 * (REFERENCE.md "The boundary"): its gradients against fla's, against
 * finite differences, the rows it contains as instances, grouped value
 * heads, what it does where the transition is not a contraction, and what
 * it refuses. (Its forward against fla's golden cases, in every form, decay
 * mode and precision, is tests/test_golden.c; varlen, tests/test_call.c;
 * chunkwise = recurrent over random shapes, tests/test_properties.c; the
 * SIMD path's chunkwise forward, tests/test_simd_dplr.c.)
 *
 * Tolerances, relative to max |expected|:
 *   golden gradients, float64   1e-10  (as tests/test_grad.c: fla's autograd
 *                                       of the same float64 recurrence)
 *   golden gradients, float32   1e-5   (float32's stated accuracy)
 *   finite differences          1e-7   (central, step 1e-5: truncation
 *                                       ~1e-10, rounding ~1e-11)
 *   instances                   1e-14 outputs, 1e-12 gradients mapped back
 *                                      (the same sums, reassociated)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common.h"
#include "train/train_internal.h"

#define MAX_CASES 16
#define GOLDEN_TOL 1e-10
#define F32_TOL 1e-5
#define FD_TOL 1e-7
#define FD_STEP 1e-5
#define INSTANCE_TOL 1e-14

static kdalab_call call_for(kdalab_mechanism m, const kdalab_dims *d, size_t HV, int chunk,
                            kdalab_impl impl, const kdalab_chunk_opts *opts)
{
    return (kdalab_call){.dims = *d, .HV = HV, .mech = m, .scale = kdalab_default_scale(d->K),
                         .form = chunk ? KDALAB_FORM_CHUNK : KDALAB_FORM_RECURRENT,
                         .impl = impl, .opts = opts};
}

/* ---- fla's golden gradients ------------------------------------------------ */

static void test_golden_gradients(void **state)
{
    (void)state;
    static grad_case cases[MAX_CASES];
    size_t n = grad_load_all(cases, MAX_CASES), seen = 0;
    double worst64 = 0, worst_chunk = 0, worst32 = 0;
    for (size_t ci = 0; ci < n; ci++) {
        const grad_case *c = &cases[ci];
        if (!kdalab_mechanism_has_ab(c->mech))
            continue;
        seen++;
        const kdalab_dims *d = &c->dims;
        double *g[8];
        const kdalab_array *want[8] = {&c->dq, &c->dk, &c->dv, &c->dg,
                                       &c->da, &c->db, &c->dh0, &c->o};
        for (int i = 0; i < 8; i++)
            g[i] = calloc(want[i]->size + 1, sizeof(double));
        kdalab_tensors_f64 x = {.q = c->q.data, .k = c->k.data, .v = c->v.data,
                                .g = c->g.data, .a = c->a.data, .b = c->b.data,
                                .h0 = c->h0.data, .d_o = c->d_o.data, .dht = c->dht.data,
                                .dq = g[0], .dk = g[1], .dv = g[2], .dg = g[3], .da = g[4],
                                .db = g[5], .dh0 = c->has_h0 ? g[6] : NULL};
        /* the recurrent backward, then the chunkwise one at C = 1, 7, 16, 64, 1000 */
        const size_t chunks[] = {0, 1, 7, 16, 64, 1000};
        for (size_t fi = 0; fi < sizeof chunks / sizeof chunks[0]; fi++) {
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = chunks[fi] ? chunks[fi] : 1;
            kdalab_call call = call_for(c->mech, d, d->H, chunks[fi] != 0,
                                        KDALAB_IMPL_REFERENCE, &o);
            call.scale = c->scale;
            if (kdalab_run_bwd_f64(&call, &x) != KDALAB_OK)
                fail_msg("%s C=%zu: %s", c->name, chunks[fi], kdalab_last_error());
            for (int i = 0; i < 7; i++) {
                if (!want[i]->data)
                    continue;
                double e = rel_err_f64(g[i], want[i]->data, want[i]->size);
                double *w = chunks[fi] ? &worst_chunk : &worst64;
                *w = fmax(*w, e);
                if (!(e <= GOLDEN_TOL))
                    fail_msg("%s C=%zu gradient %d: relative error %.3g > %g", c->name,
                             chunks[fi], i, e, GOLDEN_TOL);
            }
        }
        /* float32, the same call */
        float *f[9] = {to_f32(c->q.data, c->q.size),     to_f32(c->k.data, c->k.size),
                       to_f32(c->v.data, c->v.size),     to_f32(c->g.data, c->g.size),
                       to_f32(c->a.data, c->a.size),     to_f32(c->b.data, c->b.size),
                       to_f32(c->h0.data, c->h0.size),   to_f32(c->d_o.data, c->d_o.size),
                       to_f32(c->dht.data, c->dht.size)};
        float *gf[7];
        for (int i = 0; i < 7; i++)
            gf[i] = calloc(want[i]->size + 1, sizeof(float));
        kdalab_tensors_f32 y = {.q = f[0], .k = f[1], .v = f[2], .g = f[3], .a = f[4],
                                .b = f[5], .h0 = f[6], .d_o = f[7], .dht = f[8], .dq = gf[0],
                                .dk = gf[1], .dv = gf[2], .dg = gf[3], .da = gf[4], .db = gf[5],
                                .dh0 = c->has_h0 ? gf[6] : NULL};
        for (int chunk = 0; chunk <= 1; chunk++) { /* float32: recurrent, chunkwise C = 16 */
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 16;
            kdalab_call call = call_for(c->mech, d, d->H, chunk, KDALAB_IMPL_REFERENCE, &o);
            call.scale = c->scale;
            assert_int_equal(kdalab_run_bwd_f32(&call, &y), KDALAB_OK);
            for (int i = 0; i < 7; i++)
                if (want[i]->data)
                    worst32 = fmax(worst32, rel_err_f32(gf[i], want[i]->data, want[i]->size));
        }
        for (int i = 0; i < 9; i++)
            free(f[i]);
        for (int i = 0; i < 7; i++)
            free(gf[i]);
        for (int i = 0; i < 8; i++)
            free(g[i]);
    }
    for (size_t ci = 0; ci < n; ci++)
        grad_case_free(&cases[ci]);
    assert_int_equal(seen, 4);
    assert_true(worst32 <= F32_TOL);
    printf("    fla's DPLR gradients (dq, dk, dv, dgk, da, db, dh0), largest relative error: "
           "float64 recurrent %.2e, chunkwise (C = 1 .. 1000) %.2e (tolerance %g); float32 "
           "%.2e (tolerance %g)\n",
           worst64, worst_chunk, GOLDEN_TOL, worst32, F32_TOL);
}

/* ---- finite differences ---------------------------------------------------- */

/* L = sum o * d_o + sum ht * dht of the recurrent forward. */
static double loss_of(const kdalab_call *c, const random_problem *p, const double *d_o,
                      const double *dht)
{
    const kdalab_dims *d = &p->dims;
    double *o = malloc(n_v(d) * sizeof *o), *ht = malloc(n_state(d) * sizeof *ht);
    kdalab_tensors_f64 x = {.q = p->q, .k = p->k, .v = p->v, .g = p->g, .a = p->a, .b = p->b,
                            .h0 = p->h0, .o = o, .ht = ht};
    assert_int_equal(kdalab_run_f64(c, &x, NULL), KDALAB_OK);
    double L = 0;
    for (size_t i = 0; i < n_v(d); i++)
        L += o[i] * d_o[i];
    for (size_t i = 0; i < n_state(d); i++)
        L += ht[i] * dht[i];
    free(o);
    free(ht);
    return L;
}

static void test_finite_differences(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(77);
    kdalab_dims d = {.B = 2, .T = 9, .H = 2, .K = 4, .V = 3};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_DPLR, d, -1.0, 1);
    for (size_t i = 0; i < n_qk(&d); i++) /* a general (a, b): not RWKV-7's signs */
        p.b[i] += 0.2 * (gsl_rng_uniform(rng) - 0.5);
    double *d_o = malloc(n_v(&d) * sizeof *d_o), *dht = malloc(n_state(&d) * sizeof *dht);
    for (size_t i = 0; i < n_v(&d); i++)
        d_o[i] = gsl_rng_uniform(rng) - 0.5;
    for (size_t i = 0; i < n_state(&d); i++)
        dht[i] = gsl_rng_uniform(rng) - 0.5;
    const kdalab_call c = call_for(KDALAB_DPLR, &d, d.H, 0, KDALAB_IMPL_REFERENCE, NULL);
    double *x[7] = {p.q, p.k, p.v, p.g, p.a, p.b, p.h0};
    const size_t nx[7] = {n_qk(&d), n_qk(&d), n_v(&d), n_qk(&d),
                          n_qk(&d), n_qk(&d), n_state(&d)};
    double *gr[7];
    for (int i = 0; i < 7; i++)
        gr[i] = calloc(nx[i], sizeof(double));
    kdalab_tensors_f64 t = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .a = p.a, .b = p.b,
                            .h0 = p.h0, .d_o = d_o, .dht = dht, .dq = gr[0], .dk = gr[1],
                            .dv = gr[2], .dg = gr[3], .da = gr[4], .db = gr[5], .dh0 = gr[6]};
    assert_int_equal(kdalab_run_bwd_f64(&c, &t), KDALAB_OK);
    static const char *const names[7] = {"dq", "dk", "dv", "dg", "da", "db", "dh0"};
    double worst = 0;
    for (int a = 0; a < 7; a++) {
        double gmax = 1e-300;
        for (size_t i = 0; i < nx[a]; i++)
            gmax = fmax(gmax, fabs(gr[a][i]));
        for (size_t i = 0; i < nx[a]; i++) {
            double x0 = x[a][i];
            x[a][i] = x0 + FD_STEP;
            if (a == 3 && x[a][i] > 0) /* g <= 0: a one-sided step at the edge */
                continue;
            double lp = loss_of(&c, &p, d_o, dht);
            x[a][i] = x0 - FD_STEP;
            double lm = loss_of(&c, &p, d_o, dht);
            x[a][i] = x0;
            double e = fabs((lp - lm) / (2 * FD_STEP) - gr[a][i]) / gmax;
            worst = fmax(worst, e);
            if (!(e <= FD_TOL))
                fail_msg("%s[%zu]: finite difference %.6g, backward %.6g", names[a], i,
                         (lp - lm) / (2 * FD_STEP), gr[a][i]);
        }
    }
    printf("    DPLR recurrent backward against central differences: %.2e (tolerance %g)\n",
           worst, FD_TOL);
    for (int i = 0; i < 7; i++)
        free(gr[i]);
    free(d_o);
    free(dht);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* ---- the rows it contains -------------------------------------------------- */

/*
 * KDA, Gated DeltaNet and DeltaNet written as DPLR (REFERENCE.md "The
 * boundary"): gk = g (a per-head g in every channel; DeltaNet 0),
 * a = -exp(gk) * k, b = beta k, and the write (beta k) v^T. Outputs and final
 * states equal in both forms; gradients mapped back by the chain rule:
 *   dk = -exp(gk) * da + beta (db + dk')        (dk' the DPLR write's dk)
 *   dg = dgk + a * da                           (summed over c for a per-head g)
 *   dbeta = sum_c k (db + dk')
 */
static void test_instances(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(78);
    const kdalab_mechanism rows[3] = {KDALAB_KDA, KDALAB_GATED_DELTANET, KDALAB_DELTANET};
    kdalab_dims d = {.B = 1, .T = 37, .H = 2, .K = 8, .V = 5};
    const size_t nqk = n_qk(&d), bth = n_bth(&d), K = d.K;
    double worst_fwd = 0, worst_bwd = 0;
    for (int r = 0; r < 3; r++) {
        const kdalab_mechanism m = rows[r];
        const size_t gw = kdalab_mechanism_g_width(m, K);
        random_problem p;
        random_problem_make(&p, rng, m, d, -1.0, 1);
        double *gk = calloc(nqk, 8), *a = malloc(nqk * 8), *b = malloc(nqk * 8),
               *kw = malloc(nqk * 8);
        for (size_t i = 0; i < bth; i++)
            for (size_t c = 0; c < K; c++) {
                const size_t e = i * K + c;
                gk[e] = gw == K ? p.g[e] : gw == 1 ? p.g[i] : 0;
                a[e] = -exp(gk[e]) * p.k[e];
                b[e] = kw[e] = p.beta[i] * p.k[e];
            }
        double *d_o = malloc(n_v(&d) * 8), *dht = malloc(n_state(&d) * 8);
        for (size_t i = 0; i < n_v(&d); i++)
            d_o[i] = gsl_rng_uniform(rng) - 0.5;
        for (size_t i = 0; i < n_state(&d); i++)
            dht[i] = gsl_rng_uniform(rng) - 0.5;
        for (int chunk = 0; chunk <= 1; chunk++) {
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 16;
            const kdalab_call cm = call_for(m, &d, d.H, chunk, KDALAB_IMPL_REFERENCE, &o),
                              cd = call_for(KDALAB_DPLR, &d, d.H, chunk, KDALAB_IMPL_REFERENCE,
                                            &o);
            double *o1 = malloc(n_v(&d) * 8), *o2 = malloc(n_v(&d) * 8);
            double *h1 = malloc(n_state(&d) * 8), *h2 = malloc(n_state(&d) * 8);
            kdalab_tensors_f64 xm = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                     .h0 = p.h0, .o = o1, .ht = h1},
                               xd = {.q = p.q, .k = kw, .v = p.v, .g = gk, .a = a, .b = b,
                                     .h0 = p.h0, .o = o2, .ht = h2};
            assert_int_equal(kdalab_run_f64(&cm, &xm, NULL), KDALAB_OK);
            assert_int_equal(kdalab_run_f64(&cd, &xd, NULL), KDALAB_OK);
            double e = fmax(rel_err_f64(o2, o1, n_v(&d)), rel_err_f64(h2, h1, n_state(&d)));
            worst_fwd = fmax(worst_fwd, e);
            if (!(e <= INSTANCE_TOL))
                fail_msg("%s as DPLR, %s form: %.3g", kdalab_mechanism_name(m),
                         chunk ? "chunkwise" : "recurrent", e);
            free(o1); free(o2); free(h1); free(h2);
        }
        /* gradients (recurrent backward of both) */
        double *G[6], *H[7];
        for (int i = 0; i < 6; i++)
            G[i] = calloc(nqk > n_state(&d) ? nqk : n_state(&d), 8);
        for (int i = 0; i < 7; i++)
            H[i] = calloc(nqk > n_state(&d) ? nqk : n_state(&d), 8);
        const kdalab_call cm = call_for(m, &d, d.H, 0, KDALAB_IMPL_REFERENCE, NULL),
                          cd = call_for(KDALAB_DPLR, &d, d.H, 0, KDALAB_IMPL_REFERENCE, NULL);
        kdalab_tensors_f64 bm = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                 .h0 = p.h0, .d_o = d_o, .dht = dht, .dq = G[0], .dk = G[1],
                                 .dv = G[2], .dg = G[3], .dbeta = G[4], .dh0 = G[5]},
                           bd = {.q = p.q, .k = kw, .v = p.v, .g = gk, .a = a, .b = b,
                                 .h0 = p.h0, .d_o = d_o, .dht = dht, .dq = H[0], .dk = H[1],
                                 .dv = H[2], .dg = H[3], .da = H[4], .db = H[5], .dh0 = H[6]};
        assert_int_equal(kdalab_run_bwd_f64(&cm, &bm), KDALAB_OK);
        assert_int_equal(kdalab_run_bwd_f64(&cd, &bd), KDALAB_OK);
        double *dk = calloc(nqk, 8), *dg = calloc(nqk, 8), *dbeta = calloc(bth, 8);
        for (size_t i = 0; i < bth; i++)
            for (size_t c = 0; c < K; c++) {
                const size_t e = i * K + c;
                const double beta = p.beta[i];
                dk[e] = -exp(gk[e]) * H[4][e] + beta * (H[5][e] + H[1][e]);
                dbeta[i] += p.k[e] * (H[5][e] + H[1][e]);
                const double dge = H[3][e] + a[e] * H[4][e];
                if (gw == K)
                    dg[e] = dge;
                else if (gw == 1)
                    dg[i] += dge;
            }
        double e = rel_err_f64(H[0], G[0], nqk);
        e = fmax(e, rel_err_f64(dk, G[1], nqk));
        e = fmax(e, rel_err_f64(H[2], G[2], n_v(&d)));
        e = fmax(e, rel_err_f64(dbeta, G[4], bth));
        e = fmax(e, rel_err_f64(H[6], G[5], n_state(&d)));
        if (gw)
            e = fmax(e, rel_err_f64(dg, G[3], bth * gw));
        worst_bwd = fmax(worst_bwd, e);
        if (!(e <= INSTANCE_TOL * 100))
            fail_msg("%s as DPLR, gradients: %.3g", kdalab_mechanism_name(m), e);
        for (int i = 0; i < 6; i++)
            free(G[i]);
        for (int i = 0; i < 7; i++)
            free(H[i]);
        free(dk); free(dg); free(dbeta); free(gk); free(a); free(b); free(kw);
        free(d_o); free(dht);
        random_problem_free(&p);
    }
    printf("    KDA, Gated DeltaNet, DeltaNet as DPLR: outputs and states %.2e (tolerance %g), "
           "gradients mapped back %.2e (tolerance %g)\n",
           worst_fwd, INSTANCE_TOL, worst_bwd, INSTANCE_TOL * 100);
    gsl_rng_free(rng);
}

/* ---- grouped value heads --------------------------------------------------- */

/* HV = 2H: each value head reads its query/key head; a, b are per value head.
 * The same as the plain call with q, k repeated per value head. */
static void test_gva(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(79);
    kdalab_dims d = {.B = 2, .T = 21, .H = 2, .K = 4, .V = 3}, dx = d;
    dx.H = 4; /* HV */
    random_problem p; /* generated at HV heads: v, g, a, b, h0 as wide as they must be */
    random_problem_make(&p, rng, KDALAB_DPLR, dx, -1.0, 1);
    const size_t rows = d.B * d.T, G = 2;
    double *q = malloc(rows * d.H * d.K * 8), *k = malloc(rows * d.H * d.K * 8);
    for (size_t r = 0; r < rows; r++)
        for (size_t h = 0; h < d.H; h++)
            for (size_t c = 0; c < d.K; c++) { /* q, k of head h: the expanded row h * G */
                q[(r * d.H + h) * d.K + c] = p.q[(r * dx.H + h * G) * d.K + c];
                k[(r * d.H + h) * d.K + c] = p.k[(r * dx.H + h * G) * d.K + c];
            }
    for (size_t r = 0; r < rows; r++) /* the expanded problem repeats them */
        for (size_t j = 0; j < dx.H; j++)
            for (size_t c = 0; c < d.K; c++) {
                p.q[(r * dx.H + j) * d.K + c] = q[(r * d.H + j / G) * d.K + c];
                p.k[(r * dx.H + j) * d.K + c] = k[(r * d.H + j / G) * d.K + c];
            }
    for (int chunk = 0; chunk <= 1; chunk++) {
        double *o1 = malloc(n_v(&dx) * 8), *o2 = malloc(n_v(&dx) * 8);
        double *h1 = malloc(n_state(&dx) * 8), *h2 = malloc(n_state(&dx) * 8);
        const kdalab_call cg = call_for(KDALAB_DPLR, &d, dx.H, chunk, KDALAB_IMPL_REFERENCE,
                                        NULL),
                          cx = call_for(KDALAB_DPLR, &dx, dx.H, chunk, KDALAB_IMPL_REFERENCE,
                                        NULL);
        kdalab_tensors_f64 xg = {.q = q, .k = k, .v = p.v, .g = p.g, .a = p.a, .b = p.b,
                                 .h0 = p.h0, .o = o1, .ht = h1},
                           xx = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .a = p.a, .b = p.b,
                                 .h0 = p.h0, .o = o2, .ht = h2};
        kdalab_call cgs = cg;
        cgs.scale = cx.scale;
        assert_int_equal(kdalab_run_f64(&cgs, &xg, NULL), KDALAB_OK);
        assert_int_equal(kdalab_run_f64(&cx, &xx, NULL), KDALAB_OK);
        assert_true(rel_err_f64(o1, o2, n_v(&dx)) <= 1e-15);
        assert_true(rel_err_f64(h1, h2, n_state(&dx)) <= 1e-15);
        free(o1); free(o2); free(h1); free(h2);
    }
    free(q);
    free(k);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* The chunkwise backward equals the recurrent one over a varlen, grouped
 * batch (every gradient, C = 5 against sequences of 3 .. 17 positions). */
static void test_chunk_backward_varlen_gva(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(81);
    const int64_t cu[] = {0, 3, 11, 28};
    kdalab_dims d = {.B = 1, .T = 28, .H = 1, .K = 4, .V = 3}, dx = d;
    dx.H = 2; /* HV = 2: v, g, a, b, h0 per value head */
    random_problem p;
    random_problem_make(&p, rng, KDALAB_DPLR, dx, -1.0, 0);
    double *h0 = malloc(3 * n_state(&dx) / dx.B * 8), *d_o = malloc(n_v(&dx) * 8),
           *dht = malloc(3 * n_state(&dx) / dx.B * 8);
    for (size_t i = 0; i < 3 * n_state(&dx); i++)
        h0[i] = gsl_rng_uniform(rng) - 0.5, dht[i] = gsl_rng_uniform(rng) - 0.5;
    for (size_t i = 0; i < n_v(&dx); i++)
        d_o[i] = gsl_rng_uniform(rng) - 0.5;
    const size_t n[7] = {n_qk(&d), n_qk(&d), n_v(&dx), n_qk(&dx), n_qk(&dx), n_qk(&dx),
                         3 * n_state(&dx)};
    double *G[2][7];
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = 5;
    o.subchunk = 2;
    for (int chunk = 0; chunk <= 1; chunk++) {
        for (int i = 0; i < 7; i++)
            G[chunk][i] = calloc(n[i], 8);
        kdalab_call c = call_for(KDALAB_DPLR, &d, dx.H, chunk, KDALAB_IMPL_REFERENCE, &o);
        c.cu_seqlens = cu;
        c.n_seqs = 3;
        kdalab_tensors_f64 x = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .a = p.a, .b = p.b,
                                .h0 = h0, .d_o = d_o, .dht = dht, .dq = G[chunk][0],
                                .dk = G[chunk][1], .dv = G[chunk][2], .dg = G[chunk][3],
                                .da = G[chunk][4], .db = G[chunk][5], .dh0 = G[chunk][6]};
        if (kdalab_run_bwd_f64(&c, &x) != KDALAB_OK)
            fail_msg("chunk %d: %s", chunk, kdalab_last_error());
    }
    for (int i = 0; i < 7; i++) {
        double e = rel_err_f64(G[1][i], G[0][i], n[i]);
        if (!(e <= 1e-12))
            fail_msg("gradient %d: chunkwise vs recurrent %.3g", i, e);
        free(G[0][i]);
        free(G[1][i]);
    }
    free(h0); free(d_o); free(dht);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* The decode step (kdalab_step_ab_f64 / _f32), token by token, equals the
 * recurrent form's outputs and final state (float64 1e-14; float32 1e-5). */
static void test_decode_step(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(82);
    kdalab_dims d = {.B = 1, .T = 29, .H = 1, .K = 5, .V = 4};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_DPLR, d, -1.0, 1);
    double o[29 * 4], ht[20], os[29 * 4], S[20];
    const kdalab_call c = call_for(KDALAB_DPLR, &d, 1, 0, KDALAB_IMPL_REFERENCE, NULL);
    const kdalab_tensors_f64 x = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .a = p.a, .b = p.b,
                                  .h0 = p.h0, .o = o, .ht = ht};
    assert_int_equal(kdalab_run_f64(&c, &x, NULL), KDALAB_OK);
    float Sf[20], osf[29 * 4];
    memcpy(S, p.h0, sizeof S);
    for (int i = 0; i < 20; i++)
        Sf[i] = (float)p.h0[i];
    for (size_t t = 0; t < d.T; t++) {
        const size_t r = t * d.K;
        assert_int_equal(kdalab_step_ab_f64(KDALAB_DPLR, d.K, d.V, c.scale, p.q + r, p.k + r,
                                            p.v + t * d.V, p.g + r, p.a + r, p.b + r, S,
                                            os + t * d.V),
                         KDALAB_OK);
        float qf[5], kf[5], vf[4], gf[5], af[5], bf[5];
        for (size_t i = 0; i < d.K; i++)
            qf[i] = (float)p.q[r + i], kf[i] = (float)p.k[r + i], gf[i] = (float)p.g[r + i],
            af[i] = (float)p.a[r + i], bf[i] = (float)p.b[r + i];
        for (size_t j = 0; j < d.V; j++)
            vf[j] = (float)p.v[t * d.V + j];
        assert_int_equal(kdalab_step_ab_f32(KDALAB_DPLR, d.K, d.V, (float)c.scale, qf, kf, vf,
                                            gf, af, bf, Sf, osf + t * d.V),
                         KDALAB_OK);
    }
    assert_true(rel_err_f64(os, o, 29 * 4) <= INSTANCE_TOL);
    assert_true(rel_err_f64(S, ht, 20) <= INSTANCE_TOL);
    assert_true(rel_err_f32(osf, o, 29 * 4) <= F32_TOL);
    /* each step refuses the other kind of row, NULL and NaN */
    assert_int_equal(kdalab_step_ab_f64(KDALAB_KDA, d.K, d.V, 0.5, p.q, p.k, p.v, p.g, p.a,
                                        p.b, S, os),
                     KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "kdalab_step_f64"));
    assert_int_equal(kdalab_step_ab_f64(KDALAB_DPLR, d.K, d.V, 0.5, p.q, p.k, p.v, p.g, NULL,
                                        p.b, S, os),
                     KDALAB_ENULL);
    p.a[2] = NAN;
    assert_int_equal(kdalab_step_ab_f64(KDALAB_DPLR, d.K, d.V, 0.5, p.q, p.k, p.v, p.g, p.a,
                                        p.b, S, os),
                     KDALAB_ENONFINITE);
    assert_non_null(strstr(kdalab_last_error(), "a[2]"));
    random_problem_free(&p);
    gsl_rng_free(rng);
}

/* ---- range: the transition need not be a contraction ------------------------ */

/* With g = 0, a = b = 0.9 (1, ..., 1), the transition's eigenvalue
 * 1 + a^T b = 4.24 grows the state 4.24-fold a step: overflow by T = 600 in
 * any form. Each form says so (KDALAB_ERANGE, outputs written, the count of
 * non-finite values reported) instead of returning inf silently. */
static void test_growth_is_reported(void **state)
{
    (void)state;
    kdalab_dims d = {.B = 1, .T = 600, .H = 1, .K = 4, .V = 2};
    const size_t nqk = n_qk(&d);
    double *q = malloc(nqk * 8), *k = malloc(nqk * 8), *a = malloc(nqk * 8),
           *b = malloc(nqk * 8), *g = calloc(nqk, 8), *v = malloc(n_v(&d) * 8);
    for (size_t i = 0; i < nqk; i++)
        q[i] = k[i] = 0.5, a[i] = b[i] = 0.9;
    for (size_t i = 0; i < n_v(&d); i++)
        v[i] = 1;
    for (int chunk = 0; chunk <= 1; chunk++) {
        double *o = malloc(n_v(&d) * 8), *ht = malloc(n_state(&d) * 8);
        const kdalab_call c = call_for(KDALAB_DPLR, &d, d.H, chunk, KDALAB_IMPL_REFERENCE, NULL);
        kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .a = a, .b = b, .o = o, .ht = ht};
        kdalab_report rep;
        assert_int_equal(kdalab_run_f64(&c, &x, &rep), KDALAB_ERANGE);
        assert_true(rep.nonfinite_o > 0);
        assert_true(isfinite(o[0])); /* the first outputs, before the overflow, are written */
        free(o);
        free(ht);
    }
    /* 200 steps: 4.24^200 = 1e125, finite, and the forms agree */
    d.T = 200;
    double *o1 = malloc(n_v(&d) * 8), *o2 = malloc(n_v(&d) * 8);
    for (int chunk = 0; chunk <= 1; chunk++) {
        const kdalab_call c = call_for(KDALAB_DPLR, &d, d.H, chunk, KDALAB_IMPL_REFERENCE, NULL);
        kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .a = a, .b = b,
                                .o = chunk ? o2 : o1};
        assert_int_equal(kdalab_run_f64(&c, &x, NULL), KDALAB_OK);
    }
    assert_true(rel_err_f64(o2, o1, n_v(&d)) <= 1e-12);
    free(o1); free(o2);
    free(q); free(k); free(a); free(b); free(g); free(v);
}

/* ---- what it refuses ------------------------------------------------------- */

static void test_refusals(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(80);
    kdalab_dims d = {.B = 1, .T = 6, .H = 1, .K = 3, .V = 2};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_DPLR, d, -1.0, 0);
    double o[12], dq[18];
    kdalab_tensors_f64 x = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .a = p.a, .b = p.b, .o = o,
                            .d_o = o, .dq = dq};
    /* the SIMD path serves the chunkwise form (tests/test_simd_dplr.c): its
     * recurrent form, forward or backward, is refused by name */
    kdalab_call c = call_for(KDALAB_DPLR, &d, d.H, 0, KDALAB_IMPL_SIMD, NULL);
    assert_int_equal(kdalab_run_f64(&c, &x, NULL), KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "chunkwise form only"));
    assert_non_null(strstr(kdalab_last_error(), "recurrent form"));
    assert_int_equal(kdalab_run_bwd_f64(&c, &x), KDALAB_EINVAL);
    c.impl = KDALAB_IMPL_REFERENCE;
    x.a = NULL;
    assert_int_equal(kdalab_run_f64(&c, &x, NULL), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "a is NULL"));
    x.a = p.a;
    p.b[7] = NAN;
    assert_int_equal(kdalab_run_f64(&c, &x, NULL), KDALAB_ENONFINITE);
    assert_non_null(strstr(kdalab_last_error(), "b[0, 2, 0, 1]"));
    double S[6] = {0};
    assert_int_equal(kdalab_step_f64(KDALAB_DPLR, 3, 2, 0.5, p.q, p.k, p.v, p.g, 0, S, o),
                     KDALAB_EINVAL); /* its step is kdalab_step_ab_f64 */
    assert_non_null(strstr(kdalab_last_error(), "kdalab_step_ab_f64"));
    /* the flat functions (fla's argument lists for the other rows) have no a, b */
    assert_int_equal(kdalab_recurrent_f64(&d, KDALAB_DPLR, 0.5, p.q, p.k, p.v, p.g, NULL, NULL,
                                          o, NULL),
                     KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "kdalab_run_f64"));
    assert_int_equal(kdalab_recurrent_bwd_f64(&d, KDALAB_DPLR, 0.5, p.q, p.k, p.v, p.g, NULL,
                                              NULL, o, NULL, dq, NULL, NULL, NULL, NULL, NULL),
                     KDALAB_EINVAL);
    const kdalab_mixer_config mc = {(kdalab_mixer_kind)(1 + KDALAB_DPLR), 4, 1, 0, 0, 0};
    assert_true(train_unserved(mc.kind));
    assert_int_equal(kdalab_mixer_fwd_f64(&mc, &(kdalab_mixer_params){0}, 1, 1, o, o, NULL),
                     KDALAB_EINVAL);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_gradients), cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_instances),        cmocka_unit_test(test_gva),
        cmocka_unit_test(test_chunk_backward_varlen_gva), cmocka_unit_test(test_decode_step),
        cmocka_unit_test(test_growth_is_reported), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
