/*
 * tests/test_train_mixer.c — lib/train/mixer.c: the backward of one mixer
 * sub-layer against central finite differences, for each of the five kinds,
 * with the short convolution on and off, at two tiny sizes; and bad input.
 *
 * Finite differences: L = sum(y * dy) for a random upstream dy, each element
 * of x and of every weight tensor the kind uses moved by +-h, h = 2e-6,
 * compared with the analytic gradient relative to the largest |analytic| of
 * that tensor. Truncation h^2 |L'''| / 6 is what limits it: the linear
 * mixers' output RMSNorm is sharply curved where a head's row of o is small
 * (h = 1e-5 gave 8.6e-7 on linear attention without conv; h = 2e-6, 25
 * times less, as h^2 predicts). Rounding eps |L| / h with the chunkwise
 * form's own rounding (~1e-14 relative) stays below 1e-8 for these O(1)
 * values, so 1e-6 leaves more than an order of margin; the measured errors
 * are printed (the worst per kind and conv setting; 3.4e-8 or below when
 * this was written). The forward itself is checked once against the layer
 * written out by hand around kdalab_recurrent_f64 (Gated DeltaNet, conv off).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "train/train_internal.h"

#define FD_TOL 1e-6
#define FD_STEP 2e-6

/* The weight tensors in kdalab_mixer_params' order. */
enum { WQ, WK, WV, WO, CQ, CK, CV, WB, WA, WG, WG2, ALOG, DTB, WOG, ONORM, NW };
static const char *wname[NW] = {"Wq", "Wk",    "Wv",      "Wo",  "cq",   "ck",
                                "cv", "Wb",    "Wa",      "Wg",  "Wg2",  "A_log",
                                "dt_bias", "Wog", "onorm"};
typedef struct {
    kdalab_mixer_config cfg;
    size_t B, T, N;
    double *x, *dy;
    double *w[NW]; /* NULL where the kind or conv does not use it */
    size_t n[NW];
} mixer_problem;

static double *gaussian(gsl_rng *rng, size_t n, double sigma, double mean)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = mean + gsl_ran_gaussian(rng, sigma);
    return x;
}

static kdalab_mixer_params params_of(const mixer_problem *p)
{
    kdalab_mixer_params q = {p->w[WQ],  p->w[WK],   p->w[WV],  p->w[WO],  p->w[CQ],
                             p->w[CK],  p->w[CV],   p->w[WB],  p->w[WA],  p->w[WG],
                             p->w[WG2], p->w[ALOG], p->w[DTB], p->w[WOG], p->w[ONORM], 0, 0};
    return q;
}

static void problem_make(mixer_problem *p, gsl_rng *rng, kdalab_mixer_kind kind, int conv,
                         size_t B, size_t T, size_t H, size_t d)
{
    memset(p, 0, sizeof *p);
    const size_t D = H * d;
    p->cfg = (kdalab_mixer_config){kind, D, H, conv, KDALAB_OUTPUT_GATE_SIGMOID, 0};
    p->B = B;
    p->T = T;
    p->N = B * T;
    p->n[WQ] = p->n[WK] = p->n[WV] = p->n[WO] = D * D;
    if (conv)
        p->n[CQ] = p->n[CK] = p->n[CV] = 4 * D;
    /* the weights follow the mechanism's row: beta with the delta rule, Wa for
     * a decay per head, Wg and Wg2 for one per key channel */
    const kdalab_mechanism m = (kdalab_mechanism)((int)kind - 1);
    const int linear = kind != KDALAB_MIXER_ATTENTION;
    if (linear && kdalab_mechanism_has_delta(m))
        p->n[WB] = D * H;
    if (linear && kdalab_mechanism_g_shape(m) == KDALAB_G_PER_HEAD) {
        p->n[WA] = D * H;
        p->n[ALOG] = p->n[DTB] = H;
    }
    if (linear && kdalab_mechanism_g_shape(m) == KDALAB_G_PER_KEY) {
        p->n[WG] = p->n[WG2] = D * d;
        p->n[ALOG] = H;
        p->n[DTB] = D;
    }
    if (kind != KDALAB_MIXER_ATTENTION) {
        p->n[WOG] = D * D;
        p->n[ONORM] = d;
    }
    const double ws = 1 / sqrt((double)D);
    for (int i = 0; i < NW; i++)
        if (p->n[i])
            p->w[i] = gaussian(rng, p->n[i], i == ALOG ? 0.3 : i == DTB ? 0.5 : ws,
                               i == CQ || i == CK || i == CV ? 0.2
                               : i == DTB                    ? -1.0
                               : i == ONORM                  ? 1.0
                                                             : 0.0);
    p->x = gaussian(rng, p->N * D, 1, 0);
    p->dy = gaussian(rng, p->N * D, 1, 0);
}

static void problem_free(mixer_problem *p)
{
    for (int i = 0; i < NW; i++)
        free(p->w[i]);
    free(p->x);
    free(p->dy);
}

static double loss(const mixer_problem *p)
{
    const size_t n = p->N * p->cfg.D;
    double *y = malloc(n * sizeof *y);
    assert_non_null(y);
    kdalab_mixer_params w = params_of(p);
    assert_int_equal(kdalab_mixer_fwd_f64(&p->cfg, &w, p->B, p->T, p->x, y, NULL), KDALAB_OK);
    double L = 0;
    for (size_t i = 0; i < n; i++)
        L += y[i] * p->dy[i];
    free(y);
    return L;
}

/* The worst error of grad against central differences over a[0..n). */
static double fd_error(mixer_problem *p, double *a, size_t n, const double *grad)
{
    double gmax = 1e-300, worst = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(grad[i]));
    for (size_t i = 0; i < n; i++) {
        double a0 = a[i];
        a[i] = a0 + FD_STEP;
        double lp = loss(p);
        a[i] = a0 - FD_STEP;
        double lm = loss(p);
        a[i] = a0;
        worst = fmax(worst, fabs((lp - lm) / (2 * FD_STEP) - grad[i]) / gmax);
    }
    return worst;
}

/* One problem: the analytic gradients of x and every used weight, each
 * against finite differences; returns the worst error. */
static double check_problem(mixer_problem *p)
{
    const size_t n = p->N * p->cfg.D;
    double *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y), *dx = malloc(n * sizeof *y);
    double *gr[NW] = {0};
    for (int i = 0; i < NW; i++)
        gr[i] = malloc((p->n[i] ? p->n[i] : 1) * sizeof(double));
    kdalab_mixer_params w = params_of(p);
    kdalab_mixer_grads g = {gr[WQ],  gr[WK],   gr[WV],  gr[WO],  gr[CQ],
                            gr[CK],  gr[CV],   gr[WB],  gr[WA],  gr[WG],
                            gr[WG2], gr[ALOG], gr[DTB], gr[WOG], gr[ONORM], 0, 0};
    kdalab_mixer_cache *cache = NULL;
    assert_int_equal(kdalab_mixer_fwd_f64(&p->cfg, &w, p->B, p->T, p->x, y, &cache), KDALAB_OK);
    /* without a cache, the same y */
    assert_int_equal(kdalab_mixer_fwd_f64(&p->cfg, &w, p->B, p->T, p->x, y2, NULL), KDALAB_OK);
    assert_memory_equal(y, y2, n * sizeof *y);
    assert_int_equal(kdalab_mixer_bwd_f64(&p->cfg, &w, p->B, p->T, p->x, cache, p->dy, dx, &g),
                     KDALAB_OK);
    /* dx alone (no weight gradients) is the same */
    assert_int_equal(kdalab_mixer_bwd_f64(&p->cfg, &w, p->B, p->T, p->x, cache, p->dy, y2, NULL),
                     KDALAB_OK);
    assert_memory_equal(dx, y2, n * sizeof *y);
    double worst = fd_error(p, p->x, n, dx);
    for (int i = 0; i < NW; i++) {
        if (!p->n[i])
            continue;
        double e = fd_error(p, p->w[i], p->n[i], gr[i]);
        if (e > FD_TOL)
            printf("    %s conv=%d: d%s off by %.2e\n", kdalab_mixer_name(p->cfg.kind), p->cfg.conv,
                   wname[i], e);
        worst = fmax(worst, e);
    }
    kdalab_mixer_cache_free(cache);
    for (int i = 0; i < NW; i++)
        free(gr[i]);
    free(y);
    free(y2);
    free(dx);
    return worst;
}

static void test_mixer_fd(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(2024);
    /* (B, T, H, d): T below and above the conv width's reach, two head sizes */
    const size_t sizes[2][4] = {{2, 7, 2, 3}, {1, 9, 2, 4}};
    for (int kind = 0; kind < KDALAB_N_MIXERS; kind++) /* attention and every table row */
        for (int conv = 1; conv >= 0 && !train_unserved((kdalab_mixer_kind)kind); conv--) {
            double worst = 0;
            for (int s = 0; s < 2; s++) {
                mixer_problem p;
                problem_make(&p, rng, (kdalab_mixer_kind)kind, conv, sizes[s][0], sizes[s][1],
                             sizes[s][2], sizes[s][3]);
                worst = fmax(worst, check_problem(&p));
                problem_free(&p);
            }
            printf("    %-16s conv %-3s x and every weight: FD error %.2e (tolerance %g)\n",
                   kdalab_mixer_name((kdalab_mixer_kind)kind), conv ? "on" : "off", worst,
                   FD_TOL);
            assert_true(worst <= FD_TOL);
        }
    gsl_rng_free(rng);
}

/* KDA with head dimension 1 (D = H): its gate has one channel per head, as
 * Gated DeltaNet's does, and once took Gated DeltaNet's branch and read a
 * NULL Wa. It must run through Wg, Wg2 (the output depends on them, their
 * gradients are nonzero) and ignore Wa. (Central differences mean little
 * here: with d = 1 the L2 norm is a smoothed sign function.) */
static void test_mixer_kda_d1(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    mixer_problem p;
    problem_make(&p, rng, KDALAB_MIXER_KDA, 1, 1, 5, 3, 1);
    const size_t n = p.N * p.cfg.D;
    double *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y), *dx = malloc(n * sizeof *y);
    double gWg[3] = {0}, gWg2[3] = {0};
    kdalab_mixer_params w = params_of(&p);
    w.Wa = NULL;
    kdalab_mixer_grads g = {0};
    g.Wg = gWg;
    g.Wg2 = gWg2;
    kdalab_mixer_cache *cache = NULL;
    assert_int_equal(kdalab_mixer_fwd_f64(&p.cfg, &w, p.B, p.T, p.x, y, &cache), KDALAB_OK);
    assert_int_equal(kdalab_mixer_bwd_f64(&p.cfg, &w, p.B, p.T, p.x, cache, p.dy, dx, &g),
                     KDALAB_OK);
    assert_true(fabs(gWg[0]) + fabs(gWg[1]) + fabs(gWg[2]) > 0);
    assert_true(fabs(gWg2[0]) + fabs(gWg2[1]) + fabs(gWg2[2]) > 0);
    p.w[WG][0] += 0.5;
    assert_int_equal(kdalab_mixer_fwd_f64(&p.cfg, &w, p.B, p.T, p.x, y2, NULL), KDALAB_OK);
    assert_memory_not_equal(y, y2, n * sizeof *y);
    kdalab_mixer_cache_free(cache);
    free(y);
    free(y2);
    free(dx);
    problem_free(&p);
    gsl_rng_free(rng);
}

/* y [N, n] = x [N, m] W [m, n], plain loops. */
static void naive_matmul(size_t N, size_t m, size_t n, const double *x, const double *W,
                         double *y)
{
    for (size_t r = 0; r < N; r++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0;
            for (size_t i = 0; i < m; i++)
                acc += x[r * m + i] * W[i * n + j];
            y[r * n + j] = acc;
        }
}

/* q, k or v of a mixer without the convolution, by hand (i = 0, 1, 2):
 * a = x W_i, the pre-activation, and s = silu(a), both [N, D]; a may be s. */
static void silu_projection(const mixer_problem *p, int i, double *a, double *s)
{
    const size_t D = p->cfg.D;
    naive_matmul(p->N, D, D, p->x, p->w[WQ + i], a);
    for (size_t j = 0; j < p->N * D; j++)
        s[j] = a[j] / (1 + exp(-a[j]));
}

static void test_mixer_forward_by_hand(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(31);
    mixer_problem p;
    const size_t B = 2, T = 6, H = 2, d = 3, D = H * d;
    problem_make(&p, rng, KDALAB_MIXER_GATED_DELTANET, 0, B, T, H, d);
    const size_t N = p.N;
    double *qkv[3], *za = malloc(N * H * sizeof(double)), *gg = malloc(N * H * sizeof(double));
    double *beta = malloc(N * H * sizeof(double)), *o = malloc(N * D * sizeof(double));
    double *y = malloc(N * D * sizeof(double)), *y_ref = malloc(N * D * sizeof(double));
    for (int i = 0; i < 3; i++) {
        qkv[i] = malloc(N * D * sizeof(double));
        silu_projection(&p, i, qkv[i], qkv[i]);
    }
    for (size_t r = 0; r < N * H; r++)
        for (int i = 0; i < 2; i++) {
            double ss = 0, *row = qkv[i] + r * d;
            for (size_t c = 0; c < d; c++)
                ss += row[c] * row[c];
            for (size_t c = 0; c < d; c++)
                row[c] /= sqrt(ss + 1e-6);
        }
    naive_matmul(N, D, H, p.x, p.w[WB], beta);
    naive_matmul(N, D, H, p.x, p.w[WA], za);
    for (size_t r = 0; r < N; r++)
        for (size_t h = 0; h < H; h++) {
            beta[r * H + h] = 1 / (1 + exp(-beta[r * H + h]));
            gg[r * H + h] = -exp(p.w[ALOG][h]) * log1p(exp(za[r * H + h] + p.w[DTB][h]));
        }
    const kdalab_dims dims = {B, T, H, d, d};
    assert_int_equal(kdalab_recurrent_f64(&dims, KDALAB_GATED_DELTANET, 1 / sqrt((double)d),
                                          qkv[0], qkv[1], qkv[2], gg, beta, NULL, o, NULL),
                     KDALAB_OK);
    /* the gated output norm, per (n, head): rmsnorm(o) onorm sigmoid(x Wog) */
    double *zo = malloc(N * D * sizeof(double));
    naive_matmul(N, D, D, p.x, p.w[WOG], zo);
    for (size_t r = 0; r < N * H; r++) {
        double ss = 0, *row = o + r * d;
        for (size_t c = 0; c < d; c++)
            ss += row[c] * row[c];
        for (size_t c = 0; c < d; c++)
            row[c] = row[c] / sqrt(ss / (double)d + 1e-5) * p.w[ONORM][c] /
                     (1 + exp(-zo[r * d + c]));
    }
    free(zo);
    naive_matmul(N, D, D, o, p.w[WO], y_ref);
    kdalab_mixer_params w = params_of(&p);
    assert_int_equal(kdalab_mixer_fwd_f64(&p.cfg, &w, B, T, p.x, y, NULL), KDALAB_OK);
    double worst = 0;
    for (size_t j = 0; j < N * D; j++)
        worst = fmax(worst, fabs(y[j] - y_ref[j]));
    printf("    forward vs by hand (Gated DeltaNet): max |diff| %.2e\n", worst);
    assert_true(worst < 1e-12);
    for (int i = 0; i < 3; i++)
        free(qkv[i]);
    free(za);
    free(gg);
    free(beta);
    free(o);
    free(y);
    free(y_ref);
    problem_free(&p);
    gsl_rng_free(rng);
}

/* The public backward reports an overflow in any gradient it writes, not
 * only in dx (with the layers' own checks gone, an infinite onorm gradient
 * once came back as KDALAB_OK): a tiny output-norm
 * gain and a huge dy overflow d onorm while everything else is finite. */
static void test_mixer_bwd_reports_overflow(void **state)
{
    (void)state;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    mixer_problem p;
    problem_make(&p, rng, KDALAB_MIXER_DELTANET, 1, 1, 256, 2, 4);
    for (size_t i = 0; i < p.n[ONORM]; i++)
        p.w[ONORM][i] *= 1e-200;
    for (size_t i = 0; i < p.N * p.cfg.D; i++)
        p.dy[i] = p.dy[i] > 0 ? 4e307 : -4e307;
    const kdalab_mixer_params w = params_of(&p);
    double *y = malloc(p.N * p.cfg.D * sizeof *y), *dx = malloc(p.N * p.cfg.D * sizeof *dx);
    double *donorm = malloc(p.n[ONORM] * sizeof *donorm);
    kdalab_mixer_cache *c = NULL;
    assert_int_equal(kdalab_mixer_fwd_f64(&p.cfg, &w, p.B, p.T, p.x, y, &c), KDALAB_OK);
    kdalab_mixer_grads g = {0};
    g.onorm = donorm;
    for (int with_dx = 0; with_dx < 2; with_dx++)
        expect_status(kdalab_mixer_bwd_f64(&p.cfg, &w, p.B, p.T, p.x, c, p.dy, with_dx ? dx : NULL,
                                    &g),
               KDALAB_ERANGE, "onorm");
    kdalab_mixer_cache_free(c);
    free(y);
    free(dx);
    free(donorm);
    problem_free(&p);
    gsl_rng_free(rng);
}

static void test_mixer_bad_input(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(7);
    mixer_problem p;
    problem_make(&p, rng, KDALAB_MIXER_KDA, 1, 1, 5, 2, 3);
    const size_t n = p.N * p.cfg.D;
    double *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++)
        y[i] = dx[i] = 777;
    kdalab_mixer_params w = params_of(&p);
    kdalab_mixer_config c = p.cfg;
    kdalab_mixer_cache *cache = NULL;
    expect_status(kdalab_mixer_fwd_f64(NULL, &w, 1, 5, p.x, y, &cache), KDALAB_ENULL, "config");
    expect_status(kdalab_mixer_fwd_f64(&c, NULL, 1, 5, p.x, y, &cache), KDALAB_ENULL, "params");
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 5, NULL, y, &cache), KDALAB_ENULL, "x is NULL");
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 5, p.x, NULL, &cache), KDALAB_ENULL, "y is NULL");
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 0, 5, p.x, y, &cache), KDALAB_ESIZE, "B = 0");
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 0, p.x, y, &cache), KDALAB_ESIZE, "T = 0");
    c.kind = (kdalab_mixer_kind)9;
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 5, p.x, y, &cache), KDALAB_EINVAL,
                  "unknown kind");
    c = p.cfg;
    c.H = 4;
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 5, p.x, y, &cache), KDALAB_ESIZE,
                  "multiple of H");
    c = p.cfg;
    kdalab_mixer_params w2 = w;
    w2.Wg = NULL;
    expect_status(kdalab_mixer_fwd_f64(&c, &w2, 1, 5, p.x, y, &cache), KDALAB_ENULL, "Wg is NULL");
    w2 = w;
    w2.cv = NULL;
    expect_status(kdalab_mixer_fwd_f64(&c, &w2, 1, 5, p.x, y, &cache), KDALAB_ENULL, "cv is NULL");
    w2 = w;
    w2.dt_bias = NULL;
    expect_status(kdalab_mixer_fwd_f64(&c, &w2, 1, 5, p.x, y, &cache), KDALAB_ENULL, "dt_bias");
    p.w[WB][1] = NAN;
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 5, p.x, y, &cache), KDALAB_ENONFINITE, "Wb[1]");
    p.w[WB][1] = 0.1;
    p.x[3] = INFINITY;
    expect_status(kdalab_mixer_fwd_f64(&c, &w, 1, 5, p.x, y, &cache), KDALAB_ENONFINITE, "x[3]");
    p.x[3] = 0.5;
    assert_null(cache);
    for (size_t i = 0; i < n; i++)
        assert_true(y[i] == 777);
    /* unused weights may be NULL: conv off needs no cq, ck, cv */
    c.conv = 0;
    w2 = w;
    w2.cq = w2.ck = w2.cv = NULL;
    assert_int_equal(kdalab_mixer_fwd_f64(&c, &w2, 1, 5, p.x, y, &cache), KDALAB_OK);
    assert_non_null(cache);
    /* the backward: no cache, a cache of another config or size, bad dy */
    expect_status(kdalab_mixer_bwd_f64(&c, &w2, 1, 5, p.x, NULL, p.dy, dx, NULL), KDALAB_ENULL,
           "cache is NULL");
    expect_status(kdalab_mixer_bwd_f64(&p.cfg, &w, 1, 5, p.x, cache, p.dy, dx, NULL), KDALAB_EINVAL,
           "another config");
    expect_status(kdalab_mixer_bwd_f64(&c, &w2, 1, 4, p.x, cache, p.dy, dx, NULL), KDALAB_EINVAL,
           "another config");
    expect_status(kdalab_mixer_bwd_f64(&c, &w2, 1, 5, p.x, cache, NULL, dx, NULL), KDALAB_ENULL,
           "dy is NULL");
    p.dy[2] = NAN;
    expect_status(kdalab_mixer_bwd_f64(&c, &w2, 1, 5, p.x, cache, p.dy, dx, NULL),
                  KDALAB_ENONFINITE, "dy[2]");
    for (size_t i = 0; i < n; i++)
        assert_true(dx[i] == 777);
    /* a second forward into the same cache replaces it (no leak under ASan) */
    assert_int_equal(kdalab_mixer_fwd_f64(&c, &w2, 1, 5, p.x, y, &cache), KDALAB_OK);
    kdalab_mixer_cache_free(cache);
    kdalab_mixer_cache_free(NULL);
    free(y);
    free(dx);
    problem_free(&p);
    gsl_rng_free(rng);
}

/* The L2 norm of q when its squares overflow: q = (c, c) per head with
 * c = 1.7e308 is normalised to (1, 1) / sqrt 2 as q = (1e100, 1e100) is,
 * not to zero (|q| itself overflows): the same y, and the same dx. */
static void test_mixer_l2norm_of_huge_q(void **state)
{
    (void)state;
    const size_t B = 1, T = 3, H = 1, d = 2, D = H * d, N = B * T;
    double y[2][6], dx[2][6];
    for (int run = 0; run < 2; run++) {
        gsl_rng *rng = test_rng(37); /* the same other weights in both runs */
        mixer_problem p;
        problem_make(&p, rng, KDALAB_MIXER_DELTANET, 0, B, T, H, d);
        gsl_rng_free(rng);
        const double c = run ? 1.7e308 : 1e100;
        for (size_t i = 0; i < N * D; i++)
            p.x[i] = 1;
        for (size_t i = 0; i < D * D; i++)
            p.w[WQ][i] = i % (D + 1) == 0 ? c : 0; /* c I: a = x Wq = (c, c) */
        kdalab_mixer_params w = params_of(&p);
        kdalab_mixer_cache *cache = NULL;
        assert_int_equal(kdalab_mixer_fwd_f64(&p.cfg, &w, B, T, p.x, y[run], &cache), KDALAB_OK);
        for (size_t i = 0; i < N * D; i++)
            p.dy[i] = 1;
        kdalab_mixer_grads g = {0};
        assert_int_equal(kdalab_mixer_bwd_f64(&p.cfg, &w, B, T, p.x, cache, p.dy, dx[run], &g),
                         KDALAB_OK);
        kdalab_mixer_cache_free(cache);
        problem_free(&p);
    }
    for (size_t i = 0; i < N * D; i++)
        if (!(fabs(y[1][i] - y[0][i]) <= 1e-14 * fmax(1, fabs(y[0][i]))))
            fail_msg("y[%zu]: %.17g with q = 1.7e308, %.17g with q = 1e100", i, y[1][i], y[0][i]);
    double dmax = 0;
    for (size_t i = 0; i < N * D; i++)
        dmax = fmax(dmax, fabs(dx[0][i]));
    for (size_t i = 0; i < N * D; i++)
        if (!(fabs(dx[1][i] - dx[0][i]) <= 1e-12 * dmax))
            fail_msg("dx[%zu]: %.17g with q = 1.7e308, %.17g with q = 1e100", i, dx[1][i],
                     dx[0][i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixer_fd),
        cmocka_unit_test(test_mixer_kda_d1),
        cmocka_unit_test(test_mixer_forward_by_hand),
        cmocka_unit_test(test_mixer_bad_input),
        cmocka_unit_test(test_mixer_bwd_reports_overflow),
        cmocka_unit_test(test_mixer_l2norm_of_huge_q),
    };
    return cmocka_run_group_tests_name("train_mixer", tests, NULL, NULL);
}
