/*
 * tests/test_hybrid.c — the KDA + attention hybrid stack (lib/model/).
 *
 *   - prefill of T tokens then decode of n more equals prefill of T + n
 *     (and prefill in two pieces equals one prefill), float64, 1e-12 relative
 *   - a one-layer pure-KDA stack equals the bare KDA recurrence
 *     (kdalab_recurrent_f64) on q, k, v, g, beta computed here, independently,
 *     from the stack's weights; a one-layer attention stack equals
 *     kdalab_attention_f64 the same way
 *   - cache bytes match H*d_head*d_head*8 per KDA layer plus
 *     tokens*2*H*d_head*8 per attention layer, for every ratio and length tried
 *   - the ratio layout (every (N+M)-th period ends in M attention layers)
 *   - bad configurations and arguments return errors
 *
 * Tolerances: every comparison is of two float64 evaluations of the same
 * function through different summation orders (chunkwise vs recurrent, batch
 * attention vs cache), so they agree to a few ulps times the depth of the
 * sums; 1e-12 relative leaves room for that and nothing else.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "train/train_internal.h" /* kdalab__train_l2norm_fwd_f64, linked from libkdalab.a */

#define TOL 1e-12

static double *random_x(gsl_rng *rng, size_t n)
{
    double *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = gsl_ran_gaussian(rng, 1.0);
    return x;
}

static kdalab_hybrid_config make_cfg(size_t L, size_t d, size_t H, size_t N, size_t M)
{
    kdalab_hybrid_config c = kdalab_hybrid_config_default();
    c.n_layers = L;
    c.d_model = d;
    c.n_heads = H;
    c.ratio_kda = N;
    c.ratio_attention = M;
    return c;
}

static kdalab_hybrid *new_stack(const kdalab_hybrid_config *c, unsigned long seed)
{
    kdalab_hybrid *s = NULL;
    kdalab_status st = kdalab_hybrid_new_random(c, seed, &s);
    if (st != KDALAB_OK)
        fail_msg("new_random: %s (%s)", kdalab_strerror(st), kdalab_last_error());
    assert_non_null(s);
    return s;
}

#define OK(call)                                                                              \
    do {                                                                                      \
        kdalab_status st_ = (call);                                                           \
        if (st_ != KDALAB_OK)                                                                 \
            fail_msg("%s: %s (%s)", #call, kdalab_strerror(st_), kdalab_last_error());        \
    } while (0)

/* ------------------------------------------------------------------------- */

static const size_t RATIOS[][2] = {{0, 1}, {1, 1}, {3, 1}, {7, 1}, {1, 0}, {2, 3}};
#define N_RATIOS (sizeof RATIOS / sizeof RATIOS[0])

/* Prefill T + n == prefill T, then n decode steps; and == prefill T1 + prefill T2. */
static void test_prefill_decode_equals_prefill(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(31);
    const size_t L = 4, d = 16, H = 2, T = 70, n = 6; /* T crosses a chunk (64) */
    double *x = random_x(rng, (T + n) * d);
    double *y_full = malloc((T + n) * d * sizeof(double));
    double *y_split = malloc((T + n) * d * sizeof(double));
    double *y_two = malloc((T + n) * d * sizeof(double));
    assert_non_null(y_full);
    assert_non_null(y_split);
    assert_non_null(y_two);
    for (size_t r = 0; r < N_RATIOS; r++) {
        kdalab_hybrid_config c = make_cfg(L, d, H, RATIOS[r][0], RATIOS[r][1]);
        kdalab_hybrid *a = new_stack(&c, 5), *b = new_stack(&c, 5), *e = new_stack(&c, 5);
        OK(kdalab_hybrid_prefill(a, T + n, x, y_full, NULL));
        OK(kdalab_hybrid_prefill(b, T, x, y_split, NULL));
        for (size_t i = 0; i < n; i++)
            OK(kdalab_hybrid_decode(b, x + (T + i) * d, y_split + (T + i) * d, NULL));
        OK(kdalab_hybrid_prefill(e, 33, x, y_two, NULL));
        OK(kdalab_hybrid_prefill(e, T + n - 33, x + 33 * d, y_two + 33 * d, NULL));
        double err_dec = rel_err_f64(y_split, y_full, (T + n) * d);
        double err_two = rel_err_f64(y_two, y_full, (T + n) * d);
        if (err_dec > TOL || err_two > TOL)
            fail_msg("ratio %zu:%zu: decode err %.3g, two-piece prefill err %.3g", RATIOS[r][0],
                     RATIOS[r][1], err_dec, err_two);
        assert_int_equal(kdalab_hybrid_position(a), T + n);
        assert_int_equal(kdalab_hybrid_position(b), T + n);
        /* The memories agree too. */
        for (size_t l = 0; l < L; l++) {
            double *sa, *sb;
            if (kdalab_hybrid_kda_state(a, l, &sa) == KDALAB_OK) {
                OK(kdalab_hybrid_kda_state(b, l, &sb));
                double es = rel_err_f64(sb, sa, H * (d / H) * (d / H));
                if (es > TOL)
                    fail_msg("ratio %zu:%zu layer %zu: state err %.3g", RATIOS[r][0],
                             RATIOS[r][1], l, es);
            } else {
                kdalab_kv_cache *ca, *cb;
                OK(kdalab_hybrid_kv_cache(a, l, &ca));
                OK(kdalab_hybrid_kv_cache(b, l, &cb));
                assert_int_equal(kdalab_kv_cache_tokens(ca), T + n);
                assert_int_equal(kdalab_kv_cache_tokens(cb), T + n);
            }
        }
        /* After a reset the stack reproduces its first run. */
        OK(kdalab_hybrid_reset(a));
        assert_int_equal(kdalab_hybrid_position(a), 0);
        OK(kdalab_hybrid_prefill(a, T + n, x, y_two, NULL));
        assert_true(rel_err_f64(y_two, y_full, (T + n) * d) == 0.0);
        kdalab_hybrid_free(a);
        kdalab_hybrid_free(b);
        kdalab_hybrid_free(e);
    }
    free(x);
    free(y_full);
    free(y_split);
    free(y_two);
    gsl_rng_free(rng);
}

/* out [T, m] = x [T, d] W [d, m], written out here rather than borrowed. */
static void ref_matmul(size_t T, size_t d, size_t m, const double *x, const double *W,
                       double *out)
{
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < m; j++) {
            double acc = 0;
            for (size_t i = 0; i < d; i++)
                acc += x[t * d + i] * W[i * m + j];
            out[t * m + j] = acc;
        }
}

static void ref_l2norm(double *x, size_t rows, size_t m)
{
    for (size_t r = 0; r < rows; r++) {
        double ss = 0;
        for (size_t c = 0; c < m; c++)
            ss += x[r * m + c] * x[r * m + c];
        for (size_t c = 0; c < m; c++)
            x[r * m + c] /= sqrt(ss);
    }
}

/* u = x / sqrt(mean x^2 + 1e-6) * gain per row, or a copy of x without the norm. */
static double *ref_prenorm(const double *x, size_t T, size_t d, const double *gain, int on)
{
    double *u = malloc(T * d * sizeof(double));
    assert_non_null(u);
    for (size_t t = 0; t < T; t++) {
        double ms = 0;
        for (size_t c = 0; c < d; c++)
            ms += x[t * d + c] * x[t * d + c] / (double)d;
        for (size_t c = 0; c < d; c++)
            u[t * d + c] = on ? x[t * d + c] / sqrt(ms + 1e-6) * gain[c] : x[t * d + c];
    }
    return u;
}

/* A one-layer KDA stack is the KDA recurrence wrapped in projections (with and
 * without the pre-norm; the gain is set to random values so that it counts). */
static void one_kda_layer(int with_norm)
{
    gsl_rng *rng = test_rng(47);
    const size_t d = 24, H = 3, dh = d / H, T = 150;
    kdalab_hybrid_config c = make_cfg(1, d, H, 1, 0);
    c.gate_lower_bound = -3.0;
    c.rms_norm = with_norm;
    kdalab_hybrid *s = new_stack(&c, 11);
    kdalab_hybrid_weights w;
    OK(kdalab_hybrid_layer_weights(s, 0, &w));
    assert_int_equal(w.kind, KDALAB_HYBRID_KDA);
    assert_non_null(w.wg);
    for (size_t ch = 0; ch < d; ch++)
        w.norm[ch] = 0.5 + gsl_rng_uniform(rng);

    double *x = random_x(rng, T * d);
    double *u = ref_prenorm(x, T, d, w.norm, with_norm);
    double *q = malloc(T * d * sizeof(double)), *k = malloc(T * d * sizeof(double));
    double *v = malloc(T * d * sizeof(double)), *g = malloc(T * d * sizeof(double));
    double *beta = malloc(T * H * sizeof(double)), *o = malloc(T * d * sizeof(double));
    double *ht = malloc(H * dh * dh * sizeof(double)), *y_ref = malloc(T * d * sizeof(double));
    double *y = malloc(T * d * sizeof(double)), *p = malloc(T * d * sizeof(double));
    assert_true(q && k && v && g && beta && o && ht && y_ref && y && p);

    /* The layer's inputs, from the weights and the documented formulas. */
    ref_matmul(T, d, d, u, w.wq, q);
    ref_matmul(T, d, d, u, w.wk, k);
    ref_matmul(T, d, d, u, w.wv, v);
    ref_matmul(T, d, d, u, w.wg, g);
    ref_matmul(T, d, H, u, w.wbeta, beta);
    ref_l2norm(q, T * H, dh);
    ref_l2norm(k, T * H, dh);
    double gmin = 0, gmax = -INFINITY;
    for (size_t t = 0; t < T; t++)
        for (size_t ch = 0; ch < d; ch++) {
            double *gi = &g[t * d + ch];
            *gi = -3.0 / (1.0 + exp(-(*gi + w.bg[ch])));
            gmin = fmin(gmin, *gi);
            gmax = fmax(gmax, *gi);
        }
    for (size_t i = 0; i < T * H; i++)
        beta[i] = 1.0 / (1.0 + exp(-beta[i]));
    /* The initialiser's gates are not degenerate: decay spans a wide range. */
    assert_true(gmin > -3.0 && gmin < -0.5 && gmax < 0 && gmax > -1e-2);

    /* The library's projections agree with these (1e-13: same sums, other order). */
    double *pk = malloc(T * d * sizeof(double)), *pg = malloc(T * d * sizeof(double));
    assert_true(pk && pg);
    OK(kdalab_hybrid_layer_project(s, 0, T, x, p, pk, NULL, pg, NULL));
    assert_true(rel_err_f64(p, q, T * d) < TOL);
    assert_true(rel_err_f64(pk, k, T * d) < TOL);
    assert_true(rel_err_f64(pg, g, T * d) < TOL);
    free(pk);
    free(pg);

    /* The bare recurrence, then the output projection and the residual. */
    kdalab_dims dims = {1, T, H, dh, dh};
    OK(kdalab_recurrent_f64(&dims, KDALAB_KDA, 1.0 / sqrt((double)dh), q, k, v, g, beta, NULL,
                            o, ht));
    ref_matmul(T, d, d, o, w.wo, y_ref);
    for (size_t i = 0; i < T * d; i++)
        y_ref[i] += x[i];

    OK(kdalab_hybrid_prefill(s, T, x, y, NULL));
    double err = rel_err_f64(y, y_ref, T * d);
    double *S;
    OK(kdalab_hybrid_kda_state(s, 0, &S));
    double err_s = rel_err_f64(S, ht, H * dh * dh);
    if (err > TOL || err_s > TOL)
        fail_msg("prefill vs recurrence: y err %.3g, state err %.3g", err, err_s);

    /* And token by token through decode. */
    OK(kdalab_hybrid_reset(s));
    for (size_t t = 0; t < T; t++)
        OK(kdalab_hybrid_decode(s, x + t * d, y + t * d, NULL));
    err = rel_err_f64(y, y_ref, T * d);
    err_s = rel_err_f64(S, ht, H * dh * dh);
    if (err > TOL || err_s > TOL)
        fail_msg("decode vs recurrence: y err %.3g, state err %.3g", err, err_s);

    free(x); free(u); free(q); free(k); free(v); free(g); free(beta); free(o); free(ht);
    free(y_ref); free(y); free(p);
    kdalab_hybrid_free(s);
    gsl_rng_free(rng);
}

static void test_one_kda_layer_is_the_recurrence(void **state)
{
    (void)state;
    one_kda_layer(1);
    one_kda_layer(0);
}

/* A one-layer attention stack is causal softmax attention on raw projections. */
static void test_one_attention_layer_is_attention(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(53);
    const size_t d = 16, H = 4, dh = d / H, T = 40;
    kdalab_hybrid_config c = make_cfg(1, d, H, 0, 1);
    kdalab_hybrid *s = new_stack(&c, 3);
    kdalab_hybrid_weights w;
    OK(kdalab_hybrid_layer_weights(s, 0, &w));
    assert_int_equal(w.kind, KDALAB_HYBRID_ATTENTION);
    assert_null(w.wg);
    double *x = random_x(rng, T * d);
    double *u = ref_prenorm(x, T, d, w.norm, 1);
    double *q = malloc(T * d * sizeof(double)), *k = malloc(T * d * sizeof(double));
    double *v = malloc(T * d * sizeof(double)), *o = malloc(T * d * sizeof(double));
    double *y_ref = malloc(T * d * sizeof(double)), *y = malloc(T * d * sizeof(double));
    assert_true(q && k && v && o && y_ref && y);
    ref_matmul(T, d, d, u, w.wq, q);
    ref_matmul(T, d, d, u, w.wk, k);
    ref_matmul(T, d, d, u, w.wv, v);
    kdalab_dims dims = {1, T, H, dh, dh};
    OK(kdalab_attention_f64(&dims, 1.0 / sqrt((double)dh), q, k, v, o));
    ref_matmul(T, d, d, o, w.wo, y_ref);
    for (size_t i = 0; i < T * d; i++)
        y_ref[i] += x[i];
    OK(kdalab_hybrid_prefill(s, T, x, y, NULL));
    assert_true(rel_err_f64(y, y_ref, T * d) < TOL);
    kdalab_kv_cache *cache;
    OK(kdalab_hybrid_kv_cache(s, 0, &cache));
    assert_int_equal(kdalab_kv_cache_tokens(cache), T);
    free(x); free(u); free(q); free(k); free(v); free(o); free(y_ref); free(y);
    kdalab_hybrid_free(s);
    gsl_rng_free(rng);
}

/* The layout rule, counted here independently of the library. */
static size_t count_attention(size_t L, size_t N, size_t M)
{
    size_t p = N + M, full = L / p, rest = L % p;
    return full * M + (rest > N ? rest - N : 0);
}

static void test_layout(void **state)
{
    (void)state;
    kdalab_hybrid_config c = make_cfg(8, 8, 1, 3, 1);
    const char *want = "KKKAKKKA";
    for (size_t l = 0; l < 8; l++) {
        kdalab_hybrid_kind kind;
        OK(kdalab_hybrid_layer_kind(&c, l, &kind));
        assert_int_equal(kind, want[l] == 'A' ? KDALAB_HYBRID_ATTENTION : KDALAB_HYBRID_KDA);
    }
    kdalab_hybrid_kind kind;
    assert_int_equal(kdalab_hybrid_layer_kind(&c, 8, &kind), KDALAB_EINVAL);
    /* An explicit list overrides the ratio and is copied. */
    kdalab_hybrid_kind list[3] = {KDALAB_HYBRID_ATTENTION, KDALAB_HYBRID_KDA,
                                  KDALAB_HYBRID_ATTENTION};
    kdalab_hybrid_config e = make_cfg(3, 8, 2, 0, 0);
    e.kinds = list;
    kdalab_hybrid *s = new_stack(&e, 1);
    list[0] = KDALAB_HYBRID_KDA;
    const kdalab_hybrid_config *got = kdalab_hybrid_config_of(s);
    assert_int_equal(got->kinds[0], KDALAB_HYBRID_ATTENTION);
    assert_int_equal(got->kinds[1], KDALAB_HYBRID_KDA);
    assert_int_equal(got->kinds[2], KDALAB_HYBRID_ATTENTION);
    double *S;
    assert_int_equal(kdalab_hybrid_kda_state(s, 0, &S), KDALAB_EINVAL);
    OK(kdalab_hybrid_kda_state(s, 1, &S));
    kdalab_hybrid_free(s);
    assert_string_equal(kdalab_hybrid_kind_name(KDALAB_HYBRID_KDA), "kda");
    assert_string_equal(kdalab_hybrid_kind_name(KDALAB_HYBRID_ATTENTION), "attention");
}

/* Bytes held == H*dh*dh*8 per KDA layer + tokens*2*H*dh*8 per attention layer. */
static void test_cache_bytes(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(61);
    const size_t L = 8, d = 12, H = 3, dh = d / H;
    const size_t steps[] = {0, 1, 16, 47, 130}; /* cumulative context lengths */
    double *x = random_x(rng, 130 * d);
    double *y = malloc(130 * d * sizeof(double));
    size_t per[8];
    assert_non_null(y);
    for (size_t r = 0; r < N_RATIOS; r++) {
        size_t N = RATIOS[r][0], M = RATIOS[r][1];
        kdalab_hybrid_config c = make_cfg(L, d, H, N, M);
        kdalab_hybrid *s = new_stack(&c, 2);
        size_t n_att = count_attention(L, N, M), done = 0;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
            size_t T = steps[i];
            /* grow by prefill and, for odd steps, partly by decode */
            size_t by_decode = (i % 2) ? (T - done) / 2 : 0;
            OK(kdalab_hybrid_prefill(s, T - done - by_decode, x + done * d, y, NULL));
            for (size_t j = T - by_decode; j < T; j++)
                OK(kdalab_hybrid_decode(s, x + j * d, y, NULL));
            done = T;
            size_t total = 0;
            OK(kdalab_hybrid_cache_bytes(s, per, &total));
            size_t want = (L - n_att) * H * dh * dh * 8 + n_att * T * 2 * H * dh * 8;
            if (total != want)
                fail_msg("ratio %zu:%zu at %zu tokens: %zu bytes, formula %zu", N, M, T, total,
                         want);
            for (size_t l = 0; l < L; l++) {
                int att = (l % (N + M)) >= N;
                size_t wl = att ? T * 2 * H * dh * 8 : H * dh * dh * 8;
                assert_int_equal(per[l], wl);
            }
        }
        kdalab_hybrid_free(s);
    }
    assert_int_equal(kdalab_hybrid_cache_bytes(NULL, per, NULL), KDALAB_ENULL);
    free(x);
    free(y);
    gsl_rng_free(rng);
}

static void test_bad_configurations(void **state)
{
    (void)state;
    kdalab_hybrid *s = NULL;
    kdalab_hybrid_config c;

    assert_int_equal(kdalab_hybrid_config_check(NULL), KDALAB_ENULL);
    assert_int_equal(kdalab_hybrid_new_random(NULL, 1, &s), KDALAB_ENULL);
    c = make_cfg(4, 8, 2, 3, 1);
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, NULL), KDALAB_ENULL);

    c = make_cfg(4, 8, 2, 0, 0); /* ratio 0:0 */
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_ESIZE);
    c = make_cfg(0, 8, 2, 3, 1);
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_ESIZE);
    c = make_cfg(4, 0, 2, 3, 1);
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_ESIZE);
    c = make_cfg(4, 8, 0, 3, 1);
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_ESIZE);
    c = make_cfg(4, 8, 3, 3, 1); /* 3 does not divide 8 */
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_ESIZE);
    c = make_cfg(4, (size_t)1 << 40, 1, 3, 1); /* d^2 overflows */
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_EOVERFLOW);
    c = make_cfg(4, 8, 2, 3, 1);
    c.gate_lower_bound = 0.5;
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_EDOMAIN);
    c.gate_lower_bound = NAN;
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_EDOMAIN);
    c = make_cfg(4, 8, 2, 3, 1);
    c.rms_norm = 2;
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_EINVAL);
    c = make_cfg(4, 8, 2, 3, 1);
    c.scale = -1;
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_EDOMAIN);
    kdalab_hybrid_kind bad[4] = {KDALAB_HYBRID_KDA, (kdalab_hybrid_kind)7, KDALAB_HYBRID_KDA,
                                 KDALAB_HYBRID_KDA};
    c = make_cfg(4, 8, 2, 3, 1);
    c.kinds = bad;
    assert_int_equal(kdalab_hybrid_new_random(&c, 1, &s), KDALAB_EINVAL);
    assert_null(s);

    /* Bad arguments to a good stack. */
    c = make_cfg(2, 8, 2, 1, 1);
    s = new_stack(&c, 1);
    double x[8] = {0}, y[8];
    assert_int_equal(kdalab_hybrid_prefill(s, 1, NULL, y, NULL), KDALAB_ENULL);
    assert_int_equal(kdalab_hybrid_prefill(NULL, 1, x, y, NULL), KDALAB_ENULL);
    assert_int_equal(kdalab_hybrid_decode(s, x, NULL, NULL), KDALAB_ENULL);
    x[5] = INFINITY;
    assert_int_equal(kdalab_hybrid_prefill(s, 1, x, y, NULL), KDALAB_ENONFINITE);
    assert_int_equal(kdalab_hybrid_decode(s, x, y, NULL), KDALAB_ENONFINITE);
    assert_int_equal(kdalab_hybrid_position(s), 0); /* nothing happened */
    size_t total = 1;
    OK(kdalab_hybrid_cache_bytes(s, NULL, &total));
    assert_int_equal(total, 2 * 4 * 4 * 8); /* the KDA state only; the cache is empty */
    x[5] = 0;
    OK(kdalab_hybrid_prefill(s, 0, NULL, NULL, NULL)); /* T = 0 is a no-op */
    /* T * d_model past 2^31 - 1 (the CBLAS's int sizes) is refused before x is read */
    const size_t T_big = (size_t)INT_MAX / 8 + 1;
    assert_int_equal(kdalab_hybrid_prefill(s, T_big, x, y, NULL), KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_hybrid_layer_project(s, 0, T_big, x, y, NULL, NULL, NULL, NULL),
                     KDALAB_EOVERFLOW);
    assert_int_equal(kdalab_hybrid_position(s), 0);
    kdalab_hybrid_weights w;
    assert_int_equal(kdalab_hybrid_layer_weights(s, 2, &w), KDALAB_EINVAL);
    assert_int_equal(kdalab_hybrid_layer_project(s, 2, 1, x, y, NULL, NULL, NULL, NULL),
                     KDALAB_EINVAL);
    kdalab_kv_cache *cache;
    assert_int_equal(kdalab_hybrid_kv_cache(s, 0, &cache), KDALAB_EINVAL);
    OK(kdalab_hybrid_kv_cache(s, 1, &cache));
    assert_int_equal(kdalab_hybrid_reset(NULL), KDALAB_ENULL);
    kdalab_hybrid_free(s);
    kdalab_hybrid_free(NULL);
}

/* Extreme but finite inputs: RMSNorm is scale-invariant even at 1e160 and
 * 1e-150 (no overflow or underflow when squaring), q and k stay unit-norm,
 * and a residual stream that overflows is reported, not returned as NaN. */
static void test_extreme_inputs(void **state)
{
    (void)state;
    kdalab_hybrid_config c = make_cfg(4, 16, 2, 3, 1);
    kdalab_hybrid *s = new_stack(&c, 7);
    double x[16], xs[16], q1[16], q2[16];
    const double scales[] = {1e160, 1e-150};
    for (size_t i = 0; i < 16; i++)
        x[i] = sin(0.7 * (double)i + 1.0);
    OK(kdalab_hybrid_layer_project(s, 0, 1, x, q1, NULL, NULL, NULL, NULL));
    for (size_t si = 0; si < 2; si++) {
        for (size_t i = 0; i < 16; i++)
            xs[i] = scales[si] * x[i];
        OK(kdalab_hybrid_layer_project(s, 0, 1, xs, q2, NULL, NULL, NULL, NULL));
        for (size_t h = 0; h < 2; h++) {
            double n2 = 0;
            for (size_t c2 = 0; c2 < 8; c2++)
                n2 += q2[h * 8 + c2] * q2[h * 8 + c2];
            assert_true(fabs(n2 - 1) < 1e-12); /* still unit norm */
        }
        if (si == 0) /* far above the 1e-6 epsilon: the same normalised rows */
            assert_true(rel_err_f64(q2, q1, 16) < 1e-12);
    }
    kdalab_hybrid_free(s);
    /* without the norm, 1e200 overflows an attention score: ERANGE, not OK */
    c.rms_norm = 0;
    s = new_stack(&c, 7);
    double big[3 * 16], y[3 * 16];
    for (size_t i = 0; i < 3 * 16; i++)
        big[i] = 1e200 * sin(0.7 * (double)i + 1.0);
    kdalab_status st = kdalab_hybrid_prefill(s, 3, big, y, NULL);
    assert_int_equal(st, KDALAB_ERANGE);
    kdalab_hybrid_free(s);
}

/* The L2 normalisation of the KDA layers' q and k rows (the library's one,
 * lib/train/layers.c, with eps = 0 as the stack calls it) when |row| itself
 * overflows: eight channels of 1.7e308 become eight of 8^-1/2, not zeros; a
 * row of 1e-170 (squares underflow) likewise; zeros stay zeros. */
static void test_l2_normalise_extreme_rows(void **state)
{
    (void)state;
    const double vals[] = {1.7e308, -1e300, 1e-170, 4.9e-324};
    for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++) {
        double row[8];
        for (size_t c = 0; c < 8; c++)
            row[c] = vals[v];
        kdalab__train_l2norm_fwd_f64(1, 8, 0, row, row);
        for (size_t c = 0; c < 8; c++)
            if (!(fabs(fabs(row[c]) - sqrt(0.125)) < 1e-15))
                fail_msg("a row of 8 x %g normalised to %.17g, not +-8^-1/2", vals[v], row[c]);
    }
    double zero[4] = {0};
    kdalab__train_l2norm_fwd_f64(1, 4, 0, zero, zero);
    for (size_t c = 0; c < 4; c++)
        assert_true(zero[c] == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_decode_equals_prefill),
        cmocka_unit_test(test_one_kda_layer_is_the_recurrence),
        cmocka_unit_test(test_one_attention_layer_is_attention),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_cache_bytes),
        cmocka_unit_test(test_bad_configurations),
        cmocka_unit_test(test_extreme_inputs),
        cmocka_unit_test(test_l2_normalise_extreme_rows),
    };
    return cmocka_run_group_tests_name("hybrid", tests, NULL, NULL);
}
