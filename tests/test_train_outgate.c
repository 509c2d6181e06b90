/*
 * tests/test_train_outgate.c — the linear mixers' output-gate options
 * (lib/train/outgate.c through lib/train/mixer.c) and the conv init option
 * (lib/train/model.c).
 *
 *   - each gate design by its formula: with Wo = I the mixer's output is the
 *     gated norm itself, so y(design) = y(none) * act(z) elementwise, z = x Wog
 *     (full rank) or (x Wog) Wog2 + bog (rank r), act = sigmoid or swish,
 *     written out here; y(none) is the norm alone, so the same weights with
 *     the default gate give y(none) * sigmoid(x Wog). Every other weight is
 *     shared, so the mechanism's output is the same bits in every design and
 *     the only error is the product's rounding: 1e-14 relative (measured
 *     ~1e-16, printed).
 *   - the mixer refuses a gate it does not know, a rank with no gate, a rank
 *     above D, and a cache of another design
 *   - the names and parsers; the layout of each design; the conv init's
 *     distributions (N(0, 0.02^2): sample sd within 10 % of 0.02 over 3 x 4 x
 *     64 weights, about 5 standard errors of a sample sd; U(-1/2, 1/2): inside
 *     the interval, sd within 10 % of 12^-1/2) and bog's zeros.
 * Gradients of every design against central differences are in
 * tests/test_train_model.c; the trained stack's decode in test_hybrid_trained.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"

#define B_ 2
#define T_ 5
#define H_ 2
#define DH 4
#define D_ (H_ * DH)
#define N_ (B_ * T_)
#define TOL 1e-14

/* Random weights for every tensor any design of kind uses (16 of each:
 * enough for the largest, [D, D] = 64), Wo = I. */
typedef struct {
    double w[17][D_ * D_];
    double x[N_ * D_];
} weights;

static void weights_make(weights *W, unsigned long seed)
{
    gsl_rng *rng = test_rng(seed);
    for (int t = 0; t < 17; t++)
        for (int i = 0; i < D_ * D_; i++)
            W->w[t][i] = gsl_ran_gaussian(rng, 0.5);
    for (int i = 0; i < N_ * D_; i++)
        W->x[i] = gsl_ran_gaussian(rng, 1.0);
    for (int i = 0; i < D_ * D_; i++) /* Wo = I */
        W->w[3][i] = i % (D_ + 1) == 0;
    for (int i = 0; i < D_; i++) { /* A_log, dt_bias in fla's ranges; onorm near 1 */
        W->w[11][i] = log(1 + 15 * gsl_rng_uniform(rng));
        W->w[12][i] = -3;
        W->w[14][i] = 1 + 0.1 * W->w[14][i];
    }
    gsl_rng_free(rng);
}

static kdalab_mixer_params params(const weights *W)
{
    kdalab_mixer_params p = {W->w[0],  W->w[1],  W->w[2],  W->w[3],  W->w[4],  W->w[5],
                             W->w[6],  W->w[7],  W->w[8],  W->w[9],  W->w[10], W->w[11],
                             W->w[12], W->w[13], W->w[14], W->w[15], W->w[16]};
    return p;
}

static void run(kdalab_mixer_kind kind, kdalab_output_gate gate, size_t rank, const weights *W,
                double *y)
{
    const kdalab_mixer_config cfg = {kind, D_, H_, 1, gate, rank};
    const kdalab_mixer_params p = params(W);
    assert_int_equal(kdalab_mixer_fwd_f64(&cfg, &p, B_, T_, W->x, y, NULL), KDALAB_OK);
}

/* z = x Wog [N, D] (rank 0) or (x Wog) Wog2 + bog, written out. */
static void gate_input(const weights *W, size_t rank, double *z)
{
    const double *Wog = W->w[13], *Wog2 = W->w[15], *bog = W->w[16];
    for (size_t n = 0; n < N_; n++)
        for (size_t j = 0; j < D_; j++) {
            double acc = 0;
            if (!rank) {
                for (size_t i = 0; i < D_; i++)
                    acc += W->x[n * D_ + i] * Wog[i * D_ + j];
            } else {
                for (size_t r = 0; r < rank; r++) {
                    double xr = 0;
                    for (size_t i = 0; i < D_; i++)
                        xr += W->x[n * D_ + i] * Wog[i * rank + r];
                    acc += xr * Wog2[r * D_ + j];
                }
                acc += bog[j];
            }
            z[n * D_ + j] = acc;
        }
}

static void test_gate_formulas(void **state)
{
    (void)state;
    const kdalab_mixer_kind kinds[2] = {KDALAB_MIXER_GATED_DELTANET, KDALAB_MIXER_KDA};
    const struct {
        kdalab_output_gate gate;
        size_t rank;
    } designs[4] = {{KDALAB_OUTPUT_GATE_SIGMOID, 0}, {KDALAB_OUTPUT_GATE_SWISH, 0},
                    {KDALAB_OUTPUT_GATE_SIGMOID, DH}, {KDALAB_OUTPUT_GATE_SWISH, 3}};
    double worst = 0;
    for (int k = 0; k < 2; k++) {
        weights W;
        weights_make(&W, 10 + (unsigned long)k);
        double none[N_ * D_], y[N_ * D_], ref[N_ * D_], z[N_ * D_];
        run(kinds[k], KDALAB_OUTPUT_GATE_NONE, 0, &W, none);
        for (int g = 0; g < 4; g++) {
            run(kinds[k], designs[g].gate, designs[g].rank, &W, y);
            gate_input(&W, designs[g].rank, z);
            for (size_t i = 0; i < N_ * D_; i++) {
                const double sg = 1 / (1 + exp(-z[i]));
                ref[i] = none[i] * (designs[g].gate == KDALAB_OUTPUT_GATE_SWISH ? z[i] * sg : sg);
            }
            const double e = rel_err_f64(y, ref, N_ * D_);
            if (!(e < TOL))
                fail_msg("%s, %s rank %zu: %.3g relative to the formula",
                         kdalab_mixer_name(kinds[k]), kdalab_output_gate_name(designs[g].gate),
                         designs[g].rank, e);
            worst = fmax(worst, e);
        }
        /* the gate changes the output: the check above is not vacuous */
        assert_true(rel_err_f64(none, y, N_ * D_) > 0.1);
    }
    printf("    every gate design against its formula (GDN, KDA): worst %.2g relative "
           "(bound %.0g)\n", worst, TOL);
}

static void test_gate_refusals(void **state)
{
    (void)state;
    weights W;
    weights_make(&W, 3);
    const kdalab_mixer_params p = params(&W);
    double y[N_ * D_];
    kdalab_mixer_config cfg = {KDALAB_MIXER_KDA, D_, H_, 1, (kdalab_output_gate)3, 0};
    assert_int_equal(kdalab_mixer_fwd_f64(&cfg, &p, B_, T_, W.x, y, NULL), KDALAB_EINVAL);
    cfg.gate = KDALAB_OUTPUT_GATE_NONE;
    cfg.gate_rank = 2;
    assert_int_equal(kdalab_mixer_fwd_f64(&cfg, &p, B_, T_, W.x, y, NULL), KDALAB_EINVAL);
    cfg.gate = KDALAB_OUTPUT_GATE_SWISH;
    cfg.gate_rank = D_ + 1;
    assert_int_equal(kdalab_mixer_fwd_f64(&cfg, &p, B_, T_, W.x, y, NULL), KDALAB_ESIZE);
    /* a low-rank gate without its second projection */
    cfg.gate_rank = 2;
    kdalab_mixer_params q = p;
    q.Wog2 = NULL;
    assert_int_equal(kdalab_mixer_fwd_f64(&cfg, &q, B_, T_, W.x, y, NULL), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "Wog2"));
    /* a cache of the sigmoid gate is not one of the swish gate */
    kdalab_mixer_cache *cache = NULL;
    cfg.gate = KDALAB_OUTPUT_GATE_SIGMOID;
    cfg.gate_rank = 0;
    assert_int_equal(kdalab_mixer_fwd_f64(&cfg, &p, B_, T_, W.x, y, &cache), KDALAB_OK);
    cfg.gate = KDALAB_OUTPUT_GATE_SWISH;
    double dx[N_ * D_];
    assert_int_equal(kdalab_mixer_bwd_f64(&cfg, &p, B_, T_, W.x, cache, y, dx, NULL),
                     KDALAB_EINVAL);
    kdalab_mixer_cache_free(cache);
}

static void test_names_and_layout(void **state)
{
    (void)state;
    kdalab_output_gate g;
    kdalab_conv_init c;
    const char *gates[3] = {"sigmoid", "swish", "none"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kdalab_output_gate_parse(gates[i], &g), KDALAB_OK);
        assert_int_equal(g, i);
        assert_string_equal(kdalab_output_gate_name(g), gates[i]);
    }
    assert_int_equal(kdalab_conv_init_parse("normal0.02", &c), KDALAB_OK);
    assert_int_equal(c, KDALAB_CONV_INIT_NORMAL);
    assert_string_equal(kdalab_conv_init_name(KDALAB_CONV_INIT_UNIFORM), "uniform");
    assert_int_equal(kdalab_output_gate_parse("silu", &g), KDALAB_EINVAL);
    assert_int_equal(kdalab_conv_init_parse(NULL, &c), KDALAB_ENULL);
    assert_string_equal(kdalab_output_gate_name((kdalab_output_gate)7), "unknown");

    /* the layout: none drops Wog; rank r makes Wog [D, r], adds Wog2 [r, D], bog [D] */
    kdalab_model_config m = {.vocab = 10, .D = 8, .H = 2, .L = 2, .F = 5, .conv = 1,
                             .mixer = {KDALAB_MIXER_KDA, KDALAB_MIXER_ATTENTION}};
    size_t P0, n0, P, n;
    assert_int_equal(kdalab_model_size(&m, &P0, &n0), KDALAB_OK);
    m.output_gate = KDALAB_OUTPUT_GATE_NONE;
    assert_int_equal(kdalab_model_size(&m, &P, &n), KDALAB_OK);
    assert_int_equal(P, P0 - 64);
    assert_int_equal(n, n0 - 1);
    m.output_gate = KDALAB_OUTPUT_GATE_SWISH;
    m.gate_rank = 3;
    assert_int_equal(kdalab_model_size(&m, &P, &n), KDALAB_OK);
    assert_int_equal(P, P0 - 64 + 24 + 24 + 8);
    assert_int_equal(n, n0 + 2);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        kdalab_model_tensor t;
        assert_int_equal(kdalab_model_tensor_at(&m, i, &t), KDALAB_OK);
        if (strcmp(t.name, "blocks.0.mixer.Wog") == 0)
            seen += t.rows == 8 && t.cols == 3 && t.decay == 1;
        if (strcmp(t.name, "blocks.0.mixer.Wog2") == 0)
            seen += t.rows == 3 && t.cols == 8 && t.decay == 1;
        if (strcmp(t.name, "blocks.0.mixer.bog") == 0)
            seen += t.rows == 1 && t.cols == 8 && t.decay == 0;
        assert_null(strstr(t.name, "blocks.1.mixer.Wog")); /* attention has no gate */
    }
    assert_int_equal(seen, 3);
    m.gate_rank = 9;
    assert_int_equal(kdalab_model_size(&m, &P, &n), KDALAB_ESIZE);
    m.gate_rank = 2;
    m.output_gate = KDALAB_OUTPUT_GATE_NONE;
    assert_int_equal(kdalab_model_size(&m, &P, &n), KDALAB_EINVAL);
    m.gate_rank = 0;
    m.conv_init = (kdalab_conv_init)2;
    assert_int_equal(kdalab_model_size(&m, &P, &n), KDALAB_EINVAL);
    /* a gate set on a model of attention blocks only would do nothing: refused,
     * so that no checkpoint records it (kdalab_checkpoint_write sizes the
     * model first) */
    kdalab_model_config a = m;
    a.mixer[0] = KDALAB_MIXER_ATTENTION;
    a.conv_init = KDALAB_CONV_INIT_UNIFORM, a.output_gate = KDALAB_OUTPUT_GATE_SWISH;
    assert_int_equal(kdalab_model_size(&a, &P, &n), KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "every block is attention"));
    a.output_gate = KDALAB_OUTPUT_GATE_SIGMOID, a.gate_rank = 0;
    assert_int_equal(kdalab_model_size(&a, &P, &n), KDALAB_OK);
}

/* The conv init's two distributions; bog starts at 0. */
static void test_conv_init(void **state)
{
    (void)state;
    kdalab_model_config m = {.vocab = 10, .D = 64, .H = 2, .L = 1, .F = 8, .conv = 1,
                             .mixer = {KDALAB_MIXER_KDA}, .output_gate =
                                 KDALAB_OUTPUT_GATE_SIGMOID, .gate_rank = 4};
    for (int ci = 0; ci < 2; ci++) {
        m.conv_init = (kdalab_conv_init)ci;
        size_t P, n;
        assert_int_equal(kdalab_model_size(&m, &P, &n), KDALAB_OK);
        double *th = malloc(P * sizeof *th);
        assert_int_equal(kdalab_model_init(&m, 7, th), KDALAB_OK);
        double ss = 0, most = 0;
        size_t count = 0;
        for (size_t i = 0; i < n; i++) {
            kdalab_model_tensor t;
            assert_int_equal(kdalab_model_tensor_at(&m, i, &t), KDALAB_OK);
            const double *w = th + t.offset;
            const size_t len = t.rows * t.cols;
            const char *leaf = strrchr(t.name, '.') ? strrchr(t.name, '.') + 1 : t.name;
            if (strcmp(leaf, "bog") == 0)
                for (size_t j = 0; j < len; j++)
                    assert_true(w[j] == 0);
            if (strcmp(leaf, "cq") && strcmp(leaf, "ck") && strcmp(leaf, "cv"))
                continue;
            for (size_t j = 0; j < len; j++, count++) {
                ss += w[j] * w[j];
                most = fmax(most, fabs(w[j]));
            }
        }
        assert_int_equal(count, 3 * 4 * 64);
        const double sd = sqrt(ss / (double)count), want = ci ? 0.02 : 1 / sqrt(12.0);
        printf("    conv init %s: sample sd %.4f (expected %.4f), max |w| %.3f\n",
               kdalab_conv_init_name(m.conv_init), sd, want, most);
        assert_true(fabs(sd / want - 1) < 0.1);
        if (!ci)
            assert_true(most <= 0.5);
        free(th);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_formulas),
        cmocka_unit_test(test_gate_refusals),
        cmocka_unit_test(test_names_and_layout),
        cmocka_unit_test(test_conv_init),
    };
    return cmocka_run_group_tests_name("train_outgate", tests, NULL, NULL);
}
