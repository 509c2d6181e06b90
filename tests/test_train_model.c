/*
 * tests/test_train_model.c — the whole model (lib/train/model*.c).
 *
 * The model's gradient against central finite differences of its loss, for
 * every element of every parameter tensor of tiny models covering the five
 * mixers, a hybrid stack, the convolution on and off (and on one block of
 * two: kdalab_model_config's conv_off), and the output gate
 * designs (swish, none, low rank; convolution on): each element moved
 * by +-h, h = 3e-6, compared with the analytic gradient relative to the
 * largest |analytic| of that tensor. The loss is O(1) (about 2.4). Two
 * errors of the difference itself: truncation h^2 |L'''| / 6, large where
 * the linear mixers' output RMSNorm sees a small row (h = 1e-5 gave 2e-6
 * relative on embed, linear attention without conv; h = 3e-6 a tenth of
 * that), and rounding eps |L| / h ~ 2e-10 absolute, which dominates for the
 * tensors whose gradients are small (attention's Wq, Wk and convolutions:
 * max |grad| ~ 1e-4, so ~3e-6 relative). Pass: error <= 1e-6 max |analytic|
 * + 3e-9 (about fifteen times the rounding), with max |analytic| > 1e-6 so
 * the floor cannot hide a wrong gradient; the worst relative error is
 * printed.
 * Also: float32 against float64, the thread count changes no bit, bad
 * input, the layout, the initialisation's ranges.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define FD_TOL 1e-6
#define FD_ABS 3e-9
#define FD_STEP 3e-6

typedef struct {
    kdalab_model_config cfg;
    size_t P, n_tensors, B, T;
    double *theta;
    int32_t *tok, *tgt;
} model_problem;

/* A tiny model: vocab 11, D = 8, H = 2, F = 12, with the given mixers and
 * output gate of that rank; random tokens and about half the targets counted. */
static void problem_make_gate(model_problem *p, const kdalab_mixer_kind *mix, size_t L, int conv,
                              unsigned long seed, kdalab_output_gate gate, size_t rank,
                              uint64_t conv_off)
{
    memset(p, 0, sizeof *p);
    p->cfg.conv_off = conv_off;
    p->cfg.output_gate = gate;
    p->cfg.gate_rank = rank;
    p->cfg.vocab = 11;
    p->cfg.D = 8;
    p->cfg.H = 2;
    p->cfg.F = 12;
    p->cfg.L = L;
    p->cfg.conv = conv;
    for (size_t l = 0; l < L; l++)
        p->cfg.mixer[l] = mix[l];
    assert_int_equal(kdalab_model_size(&p->cfg, &p->P, &p->n_tensors), KDALAB_OK);
    p->theta = malloc(p->P * sizeof *p->theta);
    assert_non_null(p->theta);
    assert_int_equal(kdalab_model_init(&p->cfg, seed, p->theta), KDALAB_OK);
    /* matrices larger than fla's 0.02 so every path carries a visible gradient */
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed + 1);
    for (size_t i = 0; i < p->n_tensors; i++) {
        kdalab_model_tensor t;
        assert_int_equal(kdalab_model_tensor_at(&p->cfg, i, &t), KDALAB_OK);
        if (t.decay || strstr(t.name, ".bog")) /* the gate's bias starts at 0 */
            for (size_t j = 0; j < t.rows * t.cols; j++)
                p->theta[t.offset + j] = 0.4 * (gsl_rng_uniform(rng) - 0.5);
    }
    p->B = 3;
    p->T = 6;
    p->tok = malloc(p->B * p->T * sizeof *p->tok);
    p->tgt = malloc(p->B * p->T * sizeof *p->tgt);
    for (size_t i = 0; i < p->B * p->T; i++) {
        p->tok[i] = (int32_t)gsl_rng_uniform_int(rng, 11);
        p->tgt[i] = gsl_rng_uniform(rng) < 0.5 ? -1 : (int32_t)gsl_rng_uniform_int(rng, 11);
    }
    p->tgt[0] = 3; /* at least one counted */
    gsl_rng_free(rng);
}

static void problem_make(model_problem *p, const kdalab_mixer_kind *mix, size_t L, int conv,
                         unsigned long seed)
{
    problem_make_gate(p, mix, L, conv, seed, KDALAB_OUTPUT_GATE_SIGMOID, 0, 0);
}

static void problem_free(model_problem *p)
{
    free(p->theta);
    free(p->tok);
    free(p->tgt);
}

static double loss_at(model_problem *p)
{
    double l;
    assert_int_equal(kdalab_model_loss_f64(&p->cfg, p->theta, p->B, p->T, p->tok, p->tgt, &l,
                                           NULL, NULL),
                     KDALAB_OK);
    return l;
}

/* The worst relative error over the tensors of one model. */
static double fd_check(model_problem *p, const char *what)
{
    double *grad = malloc(p->P * sizeof *grad);
    assert_non_null(grad);
    double l0;
    assert_int_equal(kdalab_model_loss_f64(&p->cfg, p->theta, p->B, p->T, p->tok, p->tgt, &l0,
                                           NULL, grad),
                     KDALAB_OK);
    assert_true(fabs(loss_at(p) - l0) == 0); /* the gradient changes nothing of the loss */
    double worst = 0;
    for (size_t i = 0; i < p->n_tensors; i++) {
        kdalab_model_tensor t;
        assert_int_equal(kdalab_model_tensor_at(&p->cfg, i, &t), KDALAB_OK);
        const size_t n = t.rows * t.cols;
        double amax = 0, emax = 0;
        for (size_t j = 0; j < n; j++)
            amax = fmax(amax, fabs(grad[t.offset + j]));
        for (size_t j = 0; j < n; j++) {
            double *w = &p->theta[t.offset + j], w0 = *w;
            *w = w0 + FD_STEP;
            double lp = loss_at(p);
            *w = w0 - FD_STEP;
            double lm = loss_at(p);
            *w = w0;
            emax = fmax(emax, fabs((lp - lm) / (2 * FD_STEP) - grad[t.offset + j]));
        }
        const double rel = emax / fmax(amax, 1e-300);
        if (!(emax <= FD_TOL * amax + FD_ABS))
            fail_msg("%s: %s: FD error %.3g relative to max |grad| = %.3g", what, t.name, rel,
                     amax);
        if (!(amax > 1e-6)) /* every tensor is reached by the loss */
            fail_msg("%s: %s: max |grad| = %.3g", what, t.name, amax);
        if (getenv("KDALAB_FD_VERBOSE"))
            printf("      %s %s %.2g\n", what, t.name, rel);
        worst = fmax(worst, rel);
    }
    free(grad);
    return worst;
}

static void test_model_fd(void **state)
{
    (void)state;
    const kdalab_mixer_kind A = KDALAB_MIXER_ATTENTION, LA = KDALAB_MIXER_LINEAR_ATTENTION,
                            DN = KDALAB_MIXER_DELTANET, GDN = KDALAB_MIXER_GATED_DELTANET,
                            KDA = KDALAB_MIXER_KDA;
    const kdalab_output_gate SIG = KDALAB_OUTPUT_GATE_SIGMOID, SW = KDALAB_OUTPUT_GATE_SWISH,
                             NO = KDALAB_OUTPUT_GATE_NONE;
    const struct {
        const char *name;
        kdalab_mixer_kind mix[3];
        size_t L;
        kdalab_output_gate gate;
        size_t rank;
        uint64_t conv_off;
    } models[] = {
        {"attention x2", {A, A}, 2, SIG, 0, 0},
        {"kda, attention with conv_off 1 << 1", {KDA, A}, 2, SIG, 0, 1u << 1},
        {"attention, kda with conv_off 1 << 0", {A, KDA}, 2, SW, 0, 1u << 0},
        {"linear_attention", {LA}, 1, SIG, 0, 0},
        {"deltanet", {DN}, 1, SIG, 0, 0},
        {"gated_deltanet", {GDN}, 1, SIG, 0, 0},
        {"kda x2", {KDA, KDA}, 2, SIG, 0, 0},
        {"hybrid kda, gdn, attention", {KDA, GDN, A}, 3, SIG, 0, 0},
        {"gated_deltanet, swish gate", {GDN}, 1, SW, 0, 0},
        {"kda, attention, no gate", {KDA, A}, 2, NO, 0, 0},
        {"kda, sigmoid gate of rank 4", {KDA}, 1, SIG, 4, 0},
        {"deltanet, gdn, swish gate of rank 3", {DN, GDN}, 2, SW, 3, 0},
    };
    double worst = 0;
    /* the gate designs with the convolution on only: the gate does not meet it */
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
        for (int conv = models[m].gate == SIG && !models[m].rank && !models[m].conv_off ? 0 : 1;
             conv < 2; conv++) {
            model_problem p;
            char what[96];
            snprintf(what, sizeof what, "%s, conv %s", models[m].name, conv ? "on" : "off");
            problem_make_gate(&p, models[m].mix, models[m].L, conv, 100 + m, models[m].gate,
                              models[m].rank, models[m].conv_off);
            worst = fmax(worst, fd_check(&p, what));
            problem_free(&p);
        }
    printf("    model gradient vs central differences: worst %.2g relative (bound %.0g + %.0g "
           "absolute)\n", worst, FD_TOL, FD_ABS);
}

/* The float32 twin against the float64 model on the FD test's tiny models:
 * the loss and every tensor's gradient. float32 rounds at 6e-8; the chain is
 * a few hundred operations deep and the gradients of the small tensors are
 * differences of O(1) terms (the output norm near its eps amplifies them, as
 * the FD test's note says), so 1e-3 relative per tensor is the bound and the
 * measured worst is printed (float32's own error, not a bug, stays far
 * below; a wrong formula gives O(1)). */
static void test_model_f32(void **state)
{
    (void)state;
    const kdalab_mixer_kind mix[3][3] = {
        {KDALAB_MIXER_KDA, KDALAB_MIXER_GATED_DELTANET, KDALAB_MIXER_ATTENTION},
        {KDALAB_MIXER_DELTANET, KDALAB_MIXER_LINEAR_ATTENTION},
        {KDALAB_MIXER_KDA, KDALAB_MIXER_KDA}};
    const size_t Ls[3] = {3, 2, 2};
    /* then the other output gates: swish at rank 3, none (conv on, but not on
     * block 0: conv_off) */
    const kdalab_output_gate gates[5] = {0, 0, 0, KDALAB_OUTPUT_GATE_SWISH,
                                         KDALAB_OUTPUT_GATE_NONE};
    double worst_l = 0, worst_g = 0;
    for (int m = 0; m < 5; m++)
        for (int conv = m < 3 ? 0 : 1; conv < 2; conv++) {
            model_problem p;
            problem_make_gate(&p, mix[m % 3], Ls[m % 3], conv, 40 + (unsigned long)m, gates[m],
                              m == 3 ? 3 : 0, m == 4 ? 1u << 0 : 0);
            double *g = malloc(p.P * sizeof *g), l;
            float *th = malloc(p.P * sizeof *th), *g32 = malloc(p.P * sizeof *g32), l32;
            for (size_t i = 0; i < p.P; i++)
                th[i] = (float)p.theta[i];
            assert_int_equal(kdalab_model_loss_f64(&p.cfg, p.theta, p.B, p.T, p.tok, p.tgt, &l,
                                                   NULL, g),
                             KDALAB_OK);
            assert_int_equal(kdalab_model_loss_f32(&p.cfg, th, p.B, p.T, p.tok, p.tgt, &l32,
                                                   NULL, g32),
                             KDALAB_OK);
            worst_l = fmax(worst_l, fabs(l32 - l) / fabs(l));
            for (size_t i = 0; i < p.n_tensors; i++) {
                kdalab_model_tensor t;
                assert_int_equal(kdalab_model_tensor_at(&p.cfg, i, &t), KDALAB_OK);
                double amax = 0, emax = 0;
                for (size_t j = t.offset; j < t.offset + t.rows * t.cols; j++) {
                    amax = fmax(amax, fabs(g[j]));
                    emax = fmax(emax, fabs((double)g32[j] - g[j]));
                }
                if (!(emax <= 1e-3 * amax))
                    fail_msg("float32 %s: error %.3g relative to max |grad| %.3g", t.name,
                             emax / amax, amax);
                worst_g = fmax(worst_g, emax / amax);
            }
            free(g);
            free(th);
            free(g32);
            problem_free(&p);
        }
    printf("    float32 model vs float64: loss %.2g, worst gradient tensor %.2g relative "
           "(bound 1e-3)\n", worst_l, worst_g);
    assert_true(worst_l < 1e-5);
}

/* Edge cases of training, kept: a vocabulary of Zoology's size is not refused;
 * an overflowing model gives KDALAB_ERANGE with NaN outputs, not a message
 * about an internal array; a diverging run is KDALAB_ERANGE; a refused batch
 * leaves theta untouched; AdamW's float32 norm of a huge finite gradient is
 * finite. */
static void test_model_edges(void **state)
{
    (void)state;
    kdalab_model_config big = {.vocab = 8192, .D = 64, .H = 2, .L = 2, .F = 128, .conv = 1,
                               .mixer = {KDALAB_MIXER_KDA, KDALAB_MIXER_ATTENTION}};
    size_t P;
    assert_int_equal(kdalab_model_size(&big, &P, NULL), KDALAB_OK);

    const kdalab_mixer_kind mix[2] = {KDALAB_MIXER_KDA, KDALAB_MIXER_ATTENTION};
    model_problem p;
    problem_make(&p, mix, 2, 1, 9);
    for (size_t i = 0; i < p.P; i++)
        p.theta[i] *= 1e120; /* finite, and every product overflows */
    double *g = malloc(p.P * sizeof *g), l = 0, a = 0;
    assert_int_equal(kdalab_model_loss_f64(&p.cfg, p.theta, p.B, p.T, p.tok, p.tgt, &l, &a, g),
                     KDALAB_ERANGE);
    assert_true(isnan(l) && isnan(g[0]) && isnan(g[p.P - 1]));
    free(g);
    problem_free(&p);

    kdalab_train_config c;
    memset(&c, 0, sizeof c);
    c.task = (kdalab_mqar_config){.T = 16, .kv_pairs = 4, .key_vocab = 8, .value_vocab = 8};
    c.model = (kdalab_model_config){.vocab = 17, .D = 8, .H = 2, .L = 1, .F = 8, .conv = 1,
                                    .mixer = {KDALAB_MIXER_KDA}};
    c.opt = (kdalab_adamw_config){1e30, 1e29, 0.9, 0.999, 1e-8, 0, 0, 0, 5};
    c.batch = 4;
    c.test_sequences = 8;
    kdalab_model_size(&c.model, &P, NULL);
    double *th = malloc(P * sizeof *th);
    kdalab_train_result r;
    assert_int_equal(kdalab_train_mqar_f64(&c, th, NULL, NULL, &r), KDALAB_ERANGE);
    assert_non_null(strstr(kdalab_last_error(), "diverged"));
    for (size_t i = 0; i < P; i++)
        th[i] = 777;
    c.opt.lr = 1e-3;
    c.opt.min_lr = 1e-4;
    c.batch = (size_t)1 << 40;
    assert_int_equal(kdalab_train_mqar_f64(&c, th, NULL, NULL, &r), KDALAB_EOVERFLOW);
    for (size_t i = 0; i < P; i++)
        assert_true(th[i] == 777);
    free(th);

    kdalab_adamw_config o = {1e-3, 0, 0.9, 0.999, 1e-8, 0, 1.0, 0, 10};
    float t3[3] = {0}, m3[3] = {0}, v3[3] = {0};
    const float g3[3] = {2e19f, 2e19f, 0};
    double norm;
    assert_int_equal(kdalab_adamw_step_f32(&o, 0, 3, t3, g3, m3, v3, NULL, &norm), KDALAB_OK);
    assert_true(fabs(norm / (2e19 * sqrt(2.0)) - 1) < 1e-6);
}

/* One thread or two: the same bits (the batch's two halves are summed in a
 * fixed order). */
static void test_model_threads(void **state)
{
    (void)state;
    const kdalab_mixer_kind mix[2] = {KDALAB_MIXER_KDA, KDALAB_MIXER_ATTENTION};
    model_problem p;
    problem_make(&p, mix, 2, 1, 7);
    double *g1 = malloc(p.P * sizeof *g1), *g2 = malloc(p.P * sizeof *g2), l1, l2;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(kdalab_model_loss_f64(&p.cfg, p.theta, p.B, p.T, p.tok, p.tgt, &l1, NULL,
                                           g1),
                     KDALAB_OK);
    omp_set_num_threads(2);
    assert_int_equal(kdalab_model_loss_f64(&p.cfg, p.theta, p.B, p.T, p.tok, p.tgt, &l2, NULL,
                                           g2),
                     KDALAB_OK);
    omp_set_num_threads(saved);
    assert_memory_equal(&l1, &l2, sizeof l1);
    assert_memory_equal(g1, g2, p.P * sizeof *g1);
    free(g1);
    free(g2);
    problem_free(&p);
}

/* One sequence (B = 1) is one part on one thread, so OpenBLAS could split
 * its products over its own threads and reorder float32 sums: the library
 * asks OpenBLAS for one thread on every call, whatever B. The products must
 * be large enough for OpenBLAS to split them (D = 256, T = 256): this test
 * gave different gradients with OpenBLAS at 1 and 2 threads before. Skipped
 * when the CBLAS is not OpenBLAS. */
extern void openblas_set_num_threads(int n) __attribute__((weak));

static void test_model_threads_b1_f32(void **state)
{
    (void)state;
    if (!openblas_set_num_threads) {
        printf("    not OpenBLAS: nothing to check\n");
        return;
    }
    kdalab_model_config cfg = {.vocab = 11, .D = 256, .H = 2, .F = 256, .L = 1, .conv = 1};
    cfg.mixer[0] = KDALAB_MIXER_ATTENTION;
    size_t P, n_tensors;
    const size_t T = 256;
    assert_int_equal(kdalab_model_size(&cfg, &P, &n_tensors), KDALAB_OK);
    double *th64 = malloc(P * sizeof *th64);
    float *th = malloc(P * sizeof *th), *g[2] = {malloc(P * sizeof(float)),
                                                 malloc(P * sizeof(float))};
    int32_t tok[256], tgt[256];
    assert_int_equal(kdalab_model_init(&cfg, 5, th64), KDALAB_OK);
    for (size_t i = 0; i < P; i++)
        th[i] = (float)th64[i];
    for (size_t t = 0; t < T; t++) {
        tok[t] = (int32_t)((t * 7 + 3) % 11);
        tgt[t] = (int32_t)((t * 5 + 1) % 11);
    }
    float l[2];
    for (int i = 0; i < 2; i++) {
        openblas_set_num_threads(2 - i); /* what a caller may have set */
        assert_int_equal(kdalab_model_loss_f32(&cfg, th, 1, T, tok, tgt, &l[i], NULL, g[i]),
                         KDALAB_OK);
    }
    assert_memory_equal(&l[0], &l[1], sizeof l[0]);
    assert_memory_equal(g[0], g[1], P * sizeof(float));
    printf("    float32, B = 1, D = T = 256: OpenBLAS set to 2 or 1 threads, the same bits\n");
    free(th64);
    free(th);
    free(g[0]);
    free(g[1]);
}

/* The layout: names, offsets back to back, decay flags, and its errors. */
static void test_model_layout(void **state)
{
    (void)state;
    kdalab_model_config c = {.vocab = 10, .D = 6, .H = 3, .L = 2, .F = 5, .conv = 1,
                             .mixer = {KDALAB_MIXER_KDA, KDALAB_MIXER_ATTENTION}};
    size_t P, n;
    assert_int_equal(kdalab_model_size(&c, &P, &n), KDALAB_OK);
    /* embed 60; kda block: 2 norms 12, Wq..Wo 144, conv 72, Wb 18, Wg + Wg2 24, A_log 3,
     * dt_bias 6, Wog 36, onorm 2, mlp 90; attention block: 12 + 144 + 72 + 90; norm_f 6;
     * lm_head 60 */
    assert_int_equal(P, 60 + (12 + 144 + 72 + 18 + 24 + 3 + 6 + 36 + 2 + 90) +
                            (12 + 144 + 72 + 90) + 6 + 60);
    assert_int_equal(n, 1 + (2 + 4 + 3 + 1 + 2 + 2 + 2 + 3) + (2 + 4 + 3 + 3) + 2);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        kdalab_model_tensor t;
        assert_int_equal(kdalab_model_tensor_at(&c, i, &t), KDALAB_OK);
        assert_int_equal(t.offset, at);
        at += t.rows * t.cols;
        if (i == 0)
            assert_string_equal(t.name, "embed");
        if (i == 2)
            assert_string_equal(t.name, "blocks.0.mixer.Wq");
        if (strstr(t.name, "norm") || strstr(t.name, "A_log") || strstr(t.name, "dt_bias") ||
            strstr(t.name, ".c"))
            assert_int_equal(t.decay, 0);
        else
            assert_int_equal(t.decay, 1);
    }
    assert_int_equal(at, P);
    kdalab_model_tensor t;
    assert_int_equal(kdalab_model_tensor_at(&c, n, &t), KDALAB_EINVAL);
    assert_int_equal(kdalab_model_tensor_at(&c, 0, NULL), KDALAB_ENULL);
    assert_int_equal(kdalab_model_size(NULL, &P, &n), KDALAB_ENULL);
    kdalab_model_config bad = c;
    bad.D = 7;
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_ESIZE);
    bad = c;
    bad.L = 0;
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_ESIZE);
    bad.L = KDALAB_MODEL_MAX_LAYERS + 1;
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_ESIZE);
    bad = c;
    bad.mixer[1] = (kdalab_mixer_kind)9;
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_EINVAL);
    bad = c;
    bad.vocab = (size_t)1 << 40;
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_EOVERFLOW);
    /* conv_off: block 1 (attention) without its three [4, D] convolutions */
    kdalab_model_config off = c;
    off.conv_off = 1u << 1;
    size_t P_off, n_off;
    assert_int_equal(kdalab_model_size(&off, &P_off, &n_off), KDALAB_OK);
    assert_int_equal(P_off, P - 72);
    assert_int_equal(n_off, n - 3);
    for (size_t i = 0; i < n_off; i++) {
        assert_int_equal(kdalab_model_tensor_at(&off, i, &t), KDALAB_OK);
        assert_null(strstr(t.name, "blocks.1.mixer.c"));
    }
    assert_int_equal(kdalab_model_tensor_at(&off, 6, &t), KDALAB_OK); /* kda's own */
    assert_string_equal(t.name, "blocks.0.mixer.cq");
    bad = off;
    bad.conv = 0; /* nothing to leave off */
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "conv_off"));
    bad = off;
    bad.conv_off = 1u << 2; /* block 2 of 2 */
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_EINVAL);
    bad.conv_off = (uint64_t)1 << 63;
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_EINVAL);
    bad.conv_off = 3; /* every block: that is conv 0, spelt one way only */
    assert_int_equal(kdalab_model_size(&bad, &P, &n), KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "conv_off 0,1 leaves every block"));
    /* the text form of such a set of blocks */
    uint64_t m = 77;
    assert_int_equal(kdalab_model_parse_blocks("1", &m), KDALAB_OK);
    assert_true(m == 2);
    assert_int_equal(kdalab_model_parse_blocks("0,63,5", &m), KDALAB_OK);
    assert_true(m == ((uint64_t)1 << 63 | 1u << 5 | 1u));
    static const char *const refused[] = {"", ",", "1,", ",1", "1,,2", "1,1", "64",
                                          "99999999999999999999", "-1", "1 ", "x", "2;3"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        m = 77;
        if (kdalab_model_parse_blocks(refused[i], &m) != KDALAB_EINVAL || m != 77)
            fail_msg("blocks '%s' not refused, or *out written", refused[i]);
    }
    /* and back: every mask's text parses to it; too small a buffer is refused */
    char text[KDALAB_MODEL_BLOCKS_TEXT];
    const uint64_t masks[] = {0, 2, (uint64_t)1 << 63 | 1u << 5 | 1u, UINT64_MAX};
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        assert_int_equal(kdalab_model_format_blocks(masks[i], text, sizeof text), KDALAB_OK);
        if (masks[i]) {
            assert_int_equal(kdalab_model_parse_blocks(text, &m), KDALAB_OK);
            assert_true(m == masks[i]);
        } else {
            assert_string_equal(text, "");
        }
    }
    assert_int_equal(kdalab_model_format_blocks((uint64_t)1 << 63 | 1u << 5 | 1u, text, 64),
                     KDALAB_OK);
    assert_string_equal(text, "0,5,63");
    assert_int_equal(kdalab_model_format_blocks(1u << 10, text, 2), KDALAB_ESIZE);
    assert_string_equal(text, "");
    assert_int_equal(kdalab_model_format_blocks(1, NULL, 2), KDALAB_ENULL);
    assert_int_equal(kdalab_model_parse_blocks(NULL, &m), KDALAB_ENULL);
    assert_int_equal(kdalab_model_parse_blocks("1", NULL), KDALAB_ENULL);
}

/* The initialisation: norms 1, fla's gate ranges, matrices about N(0, 0.02^2). */
static void test_model_init(void **state)
{
    (void)state;
    kdalab_model_config c = {.vocab = 50, .D = 32, .H = 2, .L = 2, .F = 64, .conv = 1,
                             .mixer = {KDALAB_MIXER_KDA, KDALAB_MIXER_GATED_DELTANET}};
    size_t P, n;
    assert_int_equal(kdalab_model_size(&c, &P, &n), KDALAB_OK);
    double *th = malloc(P * sizeof *th), *th2 = malloc(P * sizeof *th2);
    assert_int_equal(kdalab_model_init(&c, 3, th), KDALAB_OK);
    assert_int_equal(kdalab_model_init(&c, 3, th2), KDALAB_OK);
    assert_memory_equal(th, th2, P * sizeof *th); /* a function of the seed */
    for (size_t i = 0; i < n; i++) {
        kdalab_model_tensor t;
        assert_int_equal(kdalab_model_tensor_at(&c, i, &t), KDALAB_OK);
        const double *w = th + t.offset;
        const size_t m = t.rows * t.cols;
        double ss = 0;
        for (size_t j = 0; j < m; j++) {
            ss += w[j] * w[j];
            if (strstr(t.name, "norm"))
                assert_true(w[j] == 1);
            if (strstr(t.name, "A_log"))
                assert_true(w[j] >= 0 && w[j] <= log(16.0));
            if (strstr(t.name, "dt_bias")) { /* softplus(dt_bias) in [1e-3, 1e-1] */
                double dt = log1p(exp(w[j]));
                assert_true(dt >= 1e-3 * (1 - 1e-12) && dt <= 1e-1 * (1 + 1e-12));
            }
        }
        if (t.decay && m >= 1000) /* the sample sd within 10 % of 0.02 */
            assert_true(fabs(sqrt(ss / (double)m) - 0.02) < 0.002);
    }
    assert_int_equal(kdalab_model_init(&c, 3, NULL), KDALAB_ENULL);
    free(th);
    free(th2);
}

/* Bad input to the loss: a clear status, nothing written. */
static void test_model_bad_input(void **state)
{
    (void)state;
    const kdalab_mixer_kind mix[1] = {KDALAB_MIXER_KDA};
    model_problem p;
    problem_make(&p, mix, 1, 1, 5);
    double *g = malloc(p.P * sizeof *g), l = 777;
    for (size_t i = 0; i < p.P; i++)
        g[i] = 777;
    const kdalab_model_config *c = &p.cfg;
    assert_int_equal(kdalab_model_loss_f64(c, NULL, p.B, p.T, p.tok, p.tgt, &l, NULL, g),
                     KDALAB_ENULL);
    assert_int_equal(kdalab_model_loss_f64(c, p.theta, p.B, p.T, NULL, p.tgt, &l, NULL, g),
                     KDALAB_ENULL);
    assert_int_equal(kdalab_model_loss_f64(c, p.theta, 0, p.T, p.tok, p.tgt, &l, NULL, g),
                     KDALAB_ESIZE);
    p.tok[4] = 11;
    assert_int_equal(kdalab_model_loss_f64(c, p.theta, p.B, p.T, p.tok, p.tgt, &l, NULL, g),
                     KDALAB_EDOMAIN);
    p.tok[4] = 1;
    p.tgt[5] = 11;
    assert_int_equal(kdalab_model_loss_f64(c, p.theta, p.B, p.T, p.tok, p.tgt, &l, NULL, g),
                     KDALAB_EDOMAIN);
    p.tgt[5] = -1;
    p.theta[p.P - 1] = NAN;
    assert_int_equal(kdalab_model_loss_f64(c, p.theta, p.B, p.T, p.tok, p.tgt, &l, NULL, g),
                     KDALAB_ENONFINITE);
    assert_true(l == 777);
    for (size_t i = 0; i < p.P; i++)
        assert_true(g[i] == 777);
    free(g);
    problem_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_fd),
        cmocka_unit_test(test_model_f32),
        cmocka_unit_test(test_model_edges),
        cmocka_unit_test(test_model_threads),
        cmocka_unit_test(test_model_threads_b1_f32),
        cmocka_unit_test(test_model_layout),
        cmocka_unit_test(test_model_init),
        cmocka_unit_test(test_model_bad_input),
    };
    return cmocka_run_group_tests_name("train_model", tests, NULL, NULL);
}
