/*
 * tests/test_grad.c — the backward of every form against fla's golden
 * gradients (tests/golden_grad), against central finite differences, and
 * against each other.
 *
 * Tolerances, relative to the max magnitude of each expected gradient:
 *   golden, float64       1e-10  (the golden files agree with finite
 *                                 differences to 6e-9; with autograd's own
 *                                 float64 arithmetic to ~1e-15)
 *   finite differences    1e-7   (central differences with step 1e-5 have
 *                                 truncation error ~h^2 |f'''| ~ 1e-10 and
 *                                 rounding ~eps |f| / h ~ 1e-11, relative to
 *                                 gradients of order 1 on these small shapes;
 *                                 measured: 9.4e-10)
 *   chunk = recurrent     1e-12  (the same sums in another order)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common.h"
#include "grad_forms.h"

#define MAX_CASES 16
#define GOLDEN_TOL 1e-10
#define FD_TOL 1e-7
#define CHUNK_TOL 1e-12
#define F32_TOL 1e-5 /* see test_golden_float32 */

/* ---- golden ----------------------------------------------------------------- */

static grad_case cases[MAX_CASES];
static size_t n_cases;

static int setup(void **state)
{
    (void)state;
    n_cases = grad_load_all(cases, MAX_CASES);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < n_cases; i++)
        grad_case_free(&cases[i]);
    return 0;
}

/* Every golden case in every form: each gradient within GOLDEN_TOL of fla's. */
static void test_golden_every_form(void **state)
{
    (void)state;
    double worst[N_FORMS][6] = {{0}}; /* per form and gradient */
    static const char *const names[6] = {"dq", "dk", "dv", "dbeta", "dg", "dh0"};
    for (size_t ci = 0; ci < n_cases; ci++) {
        const grad_case *c = &cases[ci];
        if (kdalab_mechanism_has_ab(c->mech))
            continue; /* the DPLR rows take a, b: tests/test_dplr.c */
        for (size_t fi = 0; fi < N_FORMS; fi++) {
            test_grads gr;
            test_grads_alloc(&gr, &c->dims, c->mech);
            kdalab_status s = gradt_run_bwd(&forms[fi], &c->dims, c->mech, c->scale, c->q.data,
                                      c->k.data, c->v.data, c->g.data, c->beta.data,
                                      c->h0.data, c->d_o.data, c->dht.data, &gr);
            if (s != KDALAB_OK)
                fail_msg("%s %s: %s (%s)", c->name, forms[fi].name, kdalab_strerror(s),
                         kdalab_last_error());
            const struct {
                const char *name;
                const double *got;
                const kdalab_array *want;
            } cmp[] = {{"dq", gr.dq, &c->dq},       {"dk", gr.dk, &c->dk},
                       {"dv", gr.dv, &c->dv},       {"dbeta", gr.dbeta, &c->dbeta},
                       {"dg", gr.dg, &c->dg},       {"dh0", gr.dh0, &c->dh0}};
            for (size_t a = 0; a < sizeof cmp / sizeof cmp[0]; a++) {
                if (!cmp[a].want->data)
                    continue;
                double e = rel_err_f64(cmp[a].got, cmp[a].want->data, cmp[a].want->size);
                if (e > worst[fi][a])
                    worst[fi][a] = e;
                if (!(e <= GOLDEN_TOL))
                    fail_msg("%s %s %s: relative error %.3g > %g", c->name, forms[fi].name,
                             cmp[a].name, e, GOLDEN_TOL);
            }
            test_grads_free(&gr);
        }
    }
    printf("    golden gradients, largest error relative to max|expected| (tolerance %g):\n",
           GOLDEN_TOL);
    printf("    %-10s", "form");
    for (int a = 0; a < 6; a++)
        printf(" %9s", names[a]);
    printf("\n");
    for (size_t fi = 0; fi < N_FORMS; fi++) {
        printf("    %-10s", forms[fi].name);
        for (int a = 0; a < 6; a++)
            printf(" %9.2e", worst[fi][a]);
        printf("\n");
    }
}

/* The float32 backward (recurrent and chunkwise) against the golden
 * gradients: measured 2.5e-7 (recurrent) and 3.5e-7 (chunk16) at worst —
 * fp32's eps is 6e-8, amplified a few times over T <= 70 steps and the UT
 * transform. The bound, F32_TOL = 1e-5 (the float32 paths' stated accuracy), leaves ~30x
 * headroom; under extreme decay (below) the float32 chunkwise backward is
 * held to the same bound against the float64 recurrent one. */
static void test_golden_float32(void **state)
{
    (void)state;
    double worst[2] = {0};
    for (size_t ci = 0; ci < n_cases; ci++) {
        const grad_case *c = &cases[ci];
        const kdalab_dims *d = &c->dims;
        if (kdalab_mechanism_has_ab(c->mech))
            continue; /* the DPLR rows take a, b: tests/test_dplr.c */
        float *q = to_f32(c->q.data, c->q.size), *k = to_f32(c->k.data, c->k.size);
        float *v = to_f32(c->v.data, c->v.size), *g = to_f32(c->g.data, c->g.size);
        float *beta = to_f32(c->beta.data, c->beta.size), *h0 = to_f32(c->h0.data, c->h0.size);
        float *d_o = to_f32(c->d_o.data, c->d_o.size), *dht = to_f32(c->dht.data, c->dht.size);
        size_t n[6] = {n_qk(d), n_qk(d), n_v(d), n_bth(d), c->dg.size, n_state(d)};
        for (int form = 0; form < 2; form++) {
            float *gr[6];
            for (int a = 0; a < 6; a++)
                gr[a] = calloc(n[a] + 1, sizeof(float));
            kdalab_chunk_opts o = kdalab_chunk_opts_default();
            o.chunk = 16;
            kdalab_status s =
                form ? kdalab_chunk_bwd_f32(d, c->mech, (float)c->scale, q, k, v, g, beta, h0,
                                            d_o, dht, gr[0], gr[1], gr[2], gr[4], gr[3], gr[5],
                                            &o)
                     : kdalab_recurrent_bwd_f32(d, c->mech, (float)c->scale, q, k, v, g, beta,
                                                h0, d_o, dht, gr[0], gr[1], gr[2], gr[4], gr[3],
                                                gr[5]);
            assert_int_equal(s, KDALAB_OK);
            const kdalab_array *want[6] = {&c->dq, &c->dk, &c->dv, &c->dbeta, &c->dg, &c->dh0};
            for (int a = 0; a < 6; a++) {
                if (!want[a]->data)
                    continue;
                double e = rel_err_f32(gr[a], want[a]->data, want[a]->size);
                worst[form] = e > worst[form] ? e : worst[form];
                if (!(e <= F32_TOL))
                    fail_msg("%s %s gradient %d: float32 error %.3g > %g", c->name,
                             form ? "chunk16" : "recurrent", a, e, F32_TOL);
            }
            for (int a = 0; a < 6; a++)
                free(gr[a]);
        }
        free(q); free(k); free(v); free(g); free(beta); free(h0); free(d_o); free(dht);
    }
    printf("    golden gradients in float32: recurrent %.2e, chunk16 %.2e (tolerance %g)\n",
           worst[0], worst[1], F32_TOL);
}

/* L = sum(o * d_o) + sum(ht * dht) by the float64 recurrent forward. */
static double loss(const random_problem *p, double scale, const double *d_o, const double *dht)
{
    const kdalab_dims *d = &p->dims;
    double *o = malloc((n_v(d) + 1) * sizeof *o), *ht = malloc(n_state(d) * sizeof *ht);
    assert_true(o && ht);
    assert_int_equal(kdalab_recurrent_f64(d, p->mech, scale, p->q, p->k, p->v, p->g, p->beta,
                                          p->h0, o, ht),
                     KDALAB_OK);
    double L = 0;
    for (size_t i = 0; i < n_v(d); i++)
        L += o[i] * d_o[i];
    for (size_t i = 0; dht && i < n_state(d); i++)
        L += ht[i] * dht[i];
    free(o);
    free(ht);
    return L;
}

/* Central differences of every element of x[n] against grad[n]. */
static double fd_error(random_problem *p, double scale, const double *d_o, const double *dht,
                       double *x, size_t n, const double *grad)
{
    const double h = 1e-5;
    double worst = 0, gmax = 1e-300;
    for (size_t i = 0; i < n; i++)
        gmax = fabs(grad[i]) > gmax ? fabs(grad[i]) : gmax;
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + h;
        double lp = loss(p, scale, d_o, dht);
        x[i] = x0 - h;
        double lm = loss(p, scale, d_o, dht);
        x[i] = x0;
        double e = fabs((lp - lm) / (2 * h) - grad[i]) / gmax;
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* Every gradient of every mechanism and form against central differences, on
 * small random shapes: T = 1, ragged chunks, K != V, h0 and dht present and absent. */
static void test_finite_differences(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    const kdalab_dims shapes[] = {{.B = 1, .T = 1, .H = 1, .K = 3, .V = 2},
                                  {.B = 2, .T = 9, .H = 2, .K = 4, .V = 3},
                                  {.B = 1, .T = 7, .H = 1, .K = 3, .V = 5}};
    const bwd_form fd_forms[] = {{"recurrent", 0}, {"chunk1", 1}, {"chunk4", 4}, {"chunk16", 16}};
    double worst = 0;
    for (int m = 0; m < KDALAB_N_MECHANISMS; m++) /* every row but DPLR's: test_dplr.c */
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !kdalab_mechanism_has_ab(m);
             si++)
            for (int variant = 0; variant < 4; variant++) {
                int with_h0 = variant & 1, with_dht = variant & 2;
                kdalab_dims d = shapes[si];
                random_problem p;
                random_problem_make(&p, rng, (kdalab_mechanism)m, d, -1.0, with_h0);
                for (size_t i = 0; i < n_qk(&d); i++)
                    p.g[i] -= 0.01; /* g + h stays <= 0 */
                double *d_o = test_random_array(rng, n_v(&d));
                double *dht = with_dht ? test_random_array(rng, n_state(&d)) : NULL;
                double scale = 0.7;
                for (size_t fi = 0; fi < sizeof fd_forms / sizeof fd_forms[0]; fi++) {
                    test_grads gr;
                    test_grads_alloc(&gr, &d, p.mech);
                    kdalab_chunk_opts o = kdalab_chunk_opts_default();
                    o.subchunk = 2; /* anchored pairs across sub-chunks too */
                    o.chunk = fd_forms[fi].chunk;
                    kdalab_status s =
                        fd_forms[fi].chunk
                            ? kdalab_chunk_bwd_f64(&d, p.mech, scale, p.q, p.k, p.v, p.g,
                                                   p.beta, p.h0, d_o, dht, gr.dq, gr.dk, gr.dv,
                                                   gr.dg, gr.dbeta, gr.dh0, &o)
                            : kdalab_recurrent_bwd_f64(&d, p.mech, scale, p.q, p.k, p.v, p.g,
                                                       p.beta, p.h0, d_o, dht, gr.dq, gr.dk,
                                                       gr.dv, gr.dg, gr.dbeta, gr.dh0);
                    assert_int_equal(s, KDALAB_OK);
                    size_t gw = kdalab_mechanism_g_width(p.mech, d.K);
                    struct {
                        const char *name;
                        double *x;
                        size_t n;
                        const double *grad;
                    } arr[] = {{"dq", p.q, n_qk(&d), gr.dq},
                               {"dk", p.k, n_qk(&d), gr.dk},
                               {"dv", p.v, n_v(&d), gr.dv},
                               {"dbeta", p.beta, !kdalab_mechanism_has_delta(m) ? 0 : n_bth(&d),
                                gr.dbeta},
                               {"dg", p.g, n_bth(&d) * gw, gr.dg},
                               {"dh0", p.h0, with_h0 ? n_state(&d) : 0, gr.dh0}};
                    for (size_t a = 0; a < sizeof arr / sizeof arr[0]; a++) {
                        if (arr[a].n == 0)
                            continue;
                        double e = fd_error(&p, scale, d_o, dht, arr[a].x, arr[a].n,
                                            arr[a].grad);
                        worst = e > worst ? e : worst;
                        if (!(e <= FD_TOL))
                            fail_msg("%s %s T=%zu K=%zu V=%zu h0=%d dht=%d %s: finite "
                                     "differences differ by %.3g",
                                     kdalab_mechanism_name(p.mech), fd_forms[fi].name, d.T, d.K,
                                     d.V, with_h0, !!with_dht, arr[a].name, e);
                    }
                    test_grads_free(&gr);
                }
                free(d_o);
                free(dht);
                random_problem_free(&p);
            }
    printf("    finite differences: largest relative difference %.2e (tolerance %g)\n", worst,
           FD_TOL);
    gsl_rng_free(rng);
}

static double grads_err(const kdalab_dims *d, kdalab_mechanism m, const test_grads *a,
                        const test_grads *b)
{
    size_t gw = kdalab_mechanism_g_width(m, d->K);
    double e[] = {
        rel_err_f64(a->dq, b->dq, n_qk(d)),       rel_err_f64(a->dk, b->dk, n_qk(d)),
        rel_err_f64(a->dv, b->dv, n_v(d)),        rel_err_f64(a->dbeta, b->dbeta, n_bth(d)),
        rel_err_f64(a->dg, b->dg, n_bth(d) * gw), rel_err_f64(a->dh0, b->dh0, n_state(d))};
    double w = 0;
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        w = e[i] > w ? e[i] : w;
    return w;
}

/* The forward's extreme-decay patterns: g = -2.5 ... ln 1e-12 everywhere,
 * U(-1000, 0) per token, one channel at -10 among slow ones; T = 128, 130;
 * C = 1, 7, 16, 64: chunkwise = recurrent to CHUNK_TOL, every gradient finite. */
static void test_extreme_decay_chunk_equals_recurrent(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(13);
    const double fixed[] = {-2.5, -12, -27.631021115928547 /* ln 1e-12 */, -1000};
    const size_t Cs[] = {1, 7, 16, 64}, Ts[] = {128, 130};
    double worst = 0, worst32 = 0;
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t pat = 0; pat < sizeof fixed / sizeof fixed[0] + 2; pat++) {
            kdalab_dims d = {.B = 1, .T = Ts[ti], .H = 2, .K = 16, .V = 8};
            random_problem p;
            random_problem_make(&p, rng, KDALAB_KDA, d, -0.01, 1);
            for (size_t i = 0; i < n_bth(&d); i++) {
                double gi = pat < 4 ? fixed[pat] : -1000.0 * gsl_rng_uniform(rng);
                for (size_t c = 0; c < d.K; c++)
                    p.g[i * d.K + c] = pat == 5 ? (c == 3 ? -10.0 : -1e-3) : gi;
            }
            double *d_o = test_random_array(rng, n_v(&d)),
                   *dht = test_random_array(rng, n_state(&d));
            test_grads ref;
            test_grads_alloc(&ref, &d, p.mech);
            assert_int_equal(kdalab_recurrent_bwd_f64(&d, p.mech, 0.25, p.q, p.k, p.v, p.g,
                                                      p.beta, p.h0, d_o, dht, ref.dq, ref.dk,
                                                      ref.dv, ref.dg, ref.dbeta, ref.dh0),
                             KDALAB_OK);
            for (size_t ci = 0; ci < 4; ci++) {
                test_grads got;
                test_grads_alloc(&got, &d, p.mech);
                kdalab_chunk_opts o = kdalab_chunk_opts_default();
                o.chunk = Cs[ci];
                kdalab_status s = kdalab_chunk_bwd_f64(&d, p.mech, 0.25, p.q, p.k, p.v, p.g,
                                                       p.beta, p.h0, d_o, dht, got.dq, got.dk,
                                                       got.dv, got.dg, got.dbeta, got.dh0, &o);
                double e = grads_err(&d, p.mech, &got, &ref);
                worst = e > worst ? e : worst;
                if (s != KDALAB_OK || !(e <= CHUNK_TOL))
                    fail_msg("pattern %zu T=%zu C=%zu: status %s, error %.3g", pat, d.T,
                             Cs[ci], kdalab_strerror(s), e);
                test_grads_free(&got);
            }
            /* float32, C = 16: finite, and within F32_TOL of the float64 oracle */
            {
                kdalab_chunk_opts o = kdalab_chunk_opts_default();
                o.chunk = 16;
                size_t n[6] = {n_qk(&d), n_qk(&d), n_v(&d), n_bth(&d), n_qk(&d), n_state(&d)};
                const double *want[6] = {ref.dq, ref.dk, ref.dv, ref.dbeta, ref.dg, ref.dh0};
                float *in[8] = {to_f32(p.q, n_qk(&d)), to_f32(p.k, n_qk(&d)), to_f32(p.v, n_v(&d)),
                                to_f32(p.g, n_qk(&d)), to_f32(p.beta, n_bth(&d)),
                                to_f32(p.h0, n_state(&d)), to_f32(d_o, n_v(&d)),
                                to_f32(dht, n_state(&d))};
                float *gr[6];
                for (int a = 0; a < 6; a++)
                    gr[a] = calloc(n[a] + 1, sizeof(float));
                assert_int_equal(kdalab_chunk_bwd_f32(&d, p.mech, 0.25f, in[0], in[1], in[2],
                                                      in[3], in[4], in[5], in[6], in[7], gr[0],
                                                      gr[1], gr[2], gr[4], gr[3], gr[5], &o),
                                 KDALAB_OK);
                for (int a = 0; a < 6; a++) {
                    /* a gradient the decay has driven below 1e-30 (e.g. dh0 after
                     * g ~ U(-1000, 0)) is beyond float32's normal range: there the
                     * float32 one must be as small, absolutely */
                    double mx = 0, e;
                    for (size_t i = 0; i < n[a]; i++)
                        mx = fabs(want[a][i]) > mx ? fabs(want[a][i]) : mx;
                    if (mx < 1e-30) {
                        e = 0;
                        for (size_t i = 0; i < n[a]; i++)
                            e = fabs(gr[a][i]) > e ? fabs(gr[a][i]) : e;
                        e = e <= 1e-30 ? 0 : INFINITY;
                    } else {
                        e = rel_err_f32(gr[a], want[a], n[a]);
                    }
                    worst32 = e > worst32 ? e : worst32;
                    if (!(e <= F32_TOL))
                        fail_msg("pattern %zu T=%zu float32 gradient %d: %.3g", pat, d.T, a, e);
                    free(gr[a]);
                }
                for (int a = 0; a < 8; a++)
                    free(in[a]);
            }
            test_grads_free(&ref);
            free(d_o);
            free(dht);
            random_problem_free(&p);
        }
    printf("    extreme decay: chunkwise vs recurrent backward %.2e (tolerance %g); float32 "
           "chunk16 vs float64 %.2e (tolerance %g)\n",
           worst, CHUNK_TOL, worst32, F32_TOL);
    gsl_rng_free(rng);
}

/* Changing d_o at positions < P leaves every gradient at positions >= P bit for
 * bit unchanged, in every form and mechanism. */
static void test_reverse_causality(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(17);
    kdalab_dims d = {.B = 2, .T = 37, .H = 2, .K = 8, .V = 5};
    const size_t P = 19;
    for (int m = 0; m < KDALAB_N_MECHANISMS; m++) /* every row but DPLR's: test_dplr.c */
        for (size_t fi = 0; fi < N_FORMS && !kdalab_mechanism_has_ab(m); fi++) {
            random_problem p;
            random_problem_make(&p, rng, (kdalab_mechanism)m, d, -2.0, 1);
            double *d_o = test_random_array(rng, n_v(&d)),
                   *dht = test_random_array(rng, n_state(&d));
            test_grads a, b;
            test_grads_alloc(&a, &d, p.mech);
            test_grads_alloc(&b, &d, p.mech);
            assert_int_equal(gradt_run_bwd(&forms[fi], &d, p.mech, 0.3, p.q, p.k, p.v, p.g, p.beta,
                                     p.h0, d_o, dht, &a),
                             KDALAB_OK);
            for (size_t bb = 0; bb < d.B; bb++) /* new d_o before P */
                for (size_t tt = 0; tt < P; tt++)
                    for (size_t x = 0; x < d.H * d.V; x++)
                        d_o[((bb * d.T + tt) * d.H) * d.V + x] = 5 * gsl_rng_uniform(rng);
            assert_int_equal(gradt_run_bwd(&forms[fi], &d, p.mech, 0.3, p.q, p.k, p.v, p.g, p.beta,
                                     p.h0, d_o, dht, &b),
                             KDALAB_OK);
            size_t gw = kdalab_mechanism_g_width(p.mech, d.K);
            for (size_t bb = 0; bb < d.B; bb++) {
                size_t r0 = (bb * d.T + P) * d.H, rows = (d.T - P) * d.H; /* (bb, P.., :) */
                const char *what = kdalab_mechanism_name(p.mech);
                if (memcmp(a.dq + r0 * d.K, b.dq + r0 * d.K, rows * d.K * 8) ||
                    memcmp(a.dk + r0 * d.K, b.dk + r0 * d.K, rows * d.K * 8) ||
                    memcmp(a.dv + r0 * d.V, b.dv + r0 * d.V, rows * d.V * 8) ||
                    memcmp(a.dbeta + r0, b.dbeta + r0, rows * 8) ||
                    (gw && memcmp(a.dg + r0 * gw, b.dg + r0 * gw, rows * gw * 8)))
                    fail_msg("%s %s: a gradient at t >= %zu changed with d_o at t < %zu", what,
                             forms[fi].name, P, P);
            }
            test_grads_free(&a);
            test_grads_free(&b);
            free(d_o);
            free(dht);
            random_problem_free(&p);
        }
    gsl_rng_free(rng);
}

static void bwd_of(const bwd_form *f, const random_problem *p, kdalab_mechanism m,
                   const double *g, const double *h0, const double *d_o, const double *dht,
                   test_grads *gr)
{
    test_grads_alloc(gr, &p->dims, m);
    kdalab_status s =
        gradt_run_bwd(f, &p->dims, m, 0.5, p->q, p->k, p->v, g, p->beta, h0, d_o, dht, gr);
    if (s != KDALAB_OK)
        fail_msg("%s: %s (%s)", f->name, kdalab_strerror(s), kdalab_last_error());
}

/* KDA with g = 0 has DeltaNet's gradients; KDA with every channel sharing g has
 * Gated DeltaNet's, and GDN's dg is the sum over channels of KDA's; beta = 0
 * gives dk = dv = 0; no h0 equals an explicit zero h0. Every form. */
static void test_identities(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(19);
    kdalab_dims d = {.B = 1, .T = 23, .H = 2, .K = 6, .V = 4};
    for (size_t fi = 0; fi < N_FORMS; fi++) {
        const bwd_form *f = &forms[fi];
        random_problem p;
        random_problem_make(&p, rng, KDALAB_KDA, d, -3.0, 1);
        double *d_o = test_random_array(rng, n_v(&d)), *dht = test_random_array(rng, n_state(&d));
        size_t bth = n_bth(&d), K = d.K;
        double *zero_g = calloc(n_qk(&d), sizeof(double));
        double *shared = malloc(n_qk(&d) * sizeof(double)); /* KDA g, every channel = GDN's */
        double *zero_h0 = calloc(n_state(&d), sizeof(double));
        assert_true(zero_g && shared && zero_h0);
        for (size_t i = 0; i < bth; i++)
            for (size_t c = 0; c < K; c++)
                shared[i * K + c] = p.g[i];
        test_grads kda0, dn, kdas, gdn, noh0, zh0;
        bwd_of(f, &p, KDALAB_KDA, zero_g, p.h0, d_o, dht, &kda0);
        bwd_of(f, &p, KDALAB_DELTANET, NULL, p.h0, d_o, dht, &dn);
        memset(kda0.dg, 0, (n_qk(&d) + 1) * sizeof(double));
        double e = grads_err(&d, KDALAB_DELTANET, &kda0, &dn);
        if (!(e <= CHUNK_TOL))
            fail_msg("%s: KDA(g = 0) vs DeltaNet gradients differ by %.3g", f->name, e);

        bwd_of(f, &p, KDALAB_KDA, shared, p.h0, d_o, dht, &kdas);
        bwd_of(f, &p, KDALAB_GATED_DELTANET, p.g, p.h0, d_o, dht, &gdn);
        double *summed = calloc(bth, sizeof(double));
        assert_non_null(summed);
        for (size_t i = 0; i < bth; i++)
            for (size_t c = 0; c < K; c++)
                summed[i] += kdas.dg[i * K + c];
        e = rel_err_f64(summed, gdn.dg, bth);
        memcpy(kdas.dg, gdn.dg, bth * sizeof(double)); /* compare the rest below */
        double e2 = grads_err(&d, KDALAB_GATED_DELTANET, &kdas, &gdn);
        if (!(e <= CHUNK_TOL) || !(e2 <= CHUNK_TOL))
            fail_msg("%s: KDA(shared g) vs Gated DeltaNet: dg %.3g, others %.3g", f->name, e,
                     e2);

        bwd_of(f, &p, KDALAB_KDA, p.g, NULL, d_o, dht, &noh0);
        bwd_of(f, &p, KDALAB_KDA, p.g, zero_h0, d_o, dht, &zh0);
        if (memcmp(noh0.dq, zh0.dq, n_qk(&d) * 8) || memcmp(noh0.dk, zh0.dk, n_qk(&d) * 8) ||
            memcmp(noh0.dv, zh0.dv, n_v(&d) * 8) || memcmp(noh0.dg, zh0.dg, n_qk(&d) * 8) ||
            memcmp(noh0.dbeta, zh0.dbeta, bth * 8) || memcmp(noh0.dh0, zh0.dh0, n_state(&d) * 8))
            fail_msg("%s: no h0 and a zero h0 give different gradients", f->name);

        for (int m = KDALAB_DELTANET; m <= KDALAB_KDA; m++) {
            memset(p.beta, 0, bth * sizeof(double));
            test_grads z;
            bwd_of(f, &p, (kdalab_mechanism)m, p.g, p.h0, d_o, dht, &z);
            for (size_t i = 0; i < n_qk(&d); i++)
                if (z.dk[i] != 0)
                    fail_msg("%s %s: beta = 0 but dk[%zu] = %g", f->name,
                             kdalab_mechanism_name((kdalab_mechanism)m), i, z.dk[i]);
            for (size_t i = 0; i < n_v(&d); i++)
                if (z.dv[i] != 0)
                    fail_msg("%s %s: beta = 0 but dv[%zu] = %g", f->name,
                             kdalab_mechanism_name((kdalab_mechanism)m), i, z.dv[i]);
            test_grads_free(&z);
        }
        test_grads_free(&kda0); test_grads_free(&dn); test_grads_free(&kdas); test_grads_free(&gdn);
        test_grads_free(&noh0); test_grads_free(&zh0);
        free(summed); free(zero_g); free(shared); free(zero_h0); free(d_o); free(dht);
        random_problem_free(&p);
    }
    gsl_rng_free(rng);
}

/* The forward's errors, plus a missing or non-finite d_o and a non-finite dht;
 * on error no output is touched. */
static void test_bad_input(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(23);
    kdalab_dims d = {.B = 1, .T = 5, .H = 1, .K = 3, .V = 2};
    random_problem p;
    random_problem_make(&p, rng, KDALAB_KDA, d, -1.0, 1);
    double *d_o = test_random_array(rng, n_v(&d)), *dht = test_random_array(rng, n_state(&d));
    for (size_t fi = 0; fi < 2; fi++) {
        const bwd_form *f = &forms[fi == 0 ? 0 : 3];
        test_grads gr;
        test_grads_alloc(&gr, &d, p.mech);
        for (size_t i = 0; i < n_qk(&d); i++)
            gr.dq[i] = 42; /* must survive every error */
        assert_int_equal(gradt_run_bwd(f, &d, p.mech, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0, NULL,
                                 dht, &gr),
                         KDALAB_ENULL);
        d_o[3] = NAN;
        assert_int_equal(gradt_run_bwd(f, &d, p.mech, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0, d_o,
                                 dht, &gr),
                         KDALAB_ENONFINITE);
        /* (flat element 3 of d_o [1, 5, 1, 2], named in that shape) */
        assert_non_null(strstr(kdalab_last_error(), "d_o[0, 1, 0, 1]"));
        d_o[3] = 0.5;
        dht[1] = INFINITY;
        assert_int_equal(gradt_run_bwd(f, &d, p.mech, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0, d_o,
                                 dht, &gr),
                         KDALAB_ENONFINITE);
        dht[1] = 0.5;
        p.g[2] = 0.1; /* the forward's rule */
        assert_int_equal(gradt_run_bwd(f, &d, p.mech, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0, d_o,
                                 dht, &gr),
                         KDALAB_EDOMAIN);
        p.g[2] = -0.1;
        assert_int_equal(gradt_run_bwd(f, &d, p.mech, -1, p.q, p.k, p.v, p.g, p.beta, p.h0, d_o,
                                 dht, &gr),
                         KDALAB_EDOMAIN);
        kdalab_dims z = d;
        z.K = 0;
        assert_int_equal(gradt_run_bwd(f, &z, p.mech, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0, d_o,
                                 dht, &gr),
                         KDALAB_ESIZE);
        for (size_t i = 0; i < n_qk(&d); i++)
            assert_true(gr.dq[i] == 42);
        test_grads_free(&gr);
    }
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.decay = KDALAB_DECAY_RESCALED;
    double dq[15];
    assert_int_equal(kdalab_chunk_bwd_f64(&d, p.mech, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0,
                                          d_o, dht, dq, NULL, NULL, NULL, NULL, NULL, &o),
                     KDALAB_EINVAL);
    free(d_o);
    free(dht);
    random_problem_free(&p);
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_every_form),
        cmocka_unit_test(test_golden_float32),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_extreme_decay_chunk_equals_recurrent),
        cmocka_unit_test(test_reverse_causality),
        cmocka_unit_test(test_identities),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests_name("grad", tests, setup, teardown);
}
