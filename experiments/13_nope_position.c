/*
 * 13_nope_position — where the hybrid's attention layers get position from
 * (the chapter: its attention layers are NoPE, "they get their positional
 * signal from the KDA layers").
 *
 * Position is measured as what a probe can recover: a ridge regression from
 * a layer's mixer output at position t to t / T, fitted on training
 * sequences and scored by R^2 on held-out ones. The inputs carry no position:
 * each token is one of --vocab random embeddings drawn i.i.d., so every
 * position looks the same to a layer that cannot count. Stacks (untrained,
 * kdalab_hybrid_new_random, one layer or two, RMSNorm before each mixer):
 *   embeddings        the input itself (the floor: R^2 ~ 0)
 *   nope_attention    one causal softmax attention layer, no positional encoding
 *   kda               one KDA layer
 *   kda_then_attention  the attention layer of a [KDA, attention] stack
 * Two probes: linear in the output, and linear in the output and its
 * elementwise squares (so a position carried by the output's magnitude, not
 * its direction, also counts).
 *
 * What to expect and why: causal attention without positions averages the
 * values of t tokens; the average's spread shrinks like 1/sqrt(t), so its
 * magnitude carries position even without an encoding — the quadratic probe
 * finds it. A KDA layer's state fills at rates set by its per-channel decays,
 * a clock of several speeds. The measured question is how much each carries.
 *
 * Output (DIR = --out): 13_nope_position.tsv, one line per (stack, probe).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_multifit.h>
#include <gsl/gsl_randist.h>

#include "common.h"
#include "kdalab.h"

typedef struct {
    size_t T, d, H, vocab, train, test;
    double ridge;
} params;

enum { S_EMBED, S_NOPE, S_KDA, S_KDA_ATTN, N_STACKS };
static const char *const STACK_NAME[N_STACKS] = {"embeddings", "nope_attention", "kda",
                                                 "kda_then_attention"};

/* The features of every position of `seqs` sequences for one stack: [seqs * T, d]. */
static void features(const lab_ctx *x, const params *p, int stack, unsigned long seed,
                     const double *emb, const size_t *tokens, size_t seqs, double *out)
{
    const size_t T = p->T, d = p->d;
    kdalab_hybrid *h = NULL;
    kdalab_hybrid_kind kinds[2] = {KDALAB_HYBRID_KDA, KDALAB_HYBRID_ATTENTION};
    kdalab_hybrid_config cfg = kdalab_hybrid_config_default();
    cfg.d_model = d;
    cfg.n_heads = p->H;
    if (stack == S_NOPE) {
        cfg.n_layers = 1;
        cfg.kinds = kinds + 1;
    } else if (stack == S_KDA) {
        cfg.n_layers = 1;
        cfg.kinds = kinds;
    } else {
        cfg.n_layers = 2;
        cfg.kinds = kinds;
    }
    if (stack != S_EMBED)
        lab_check(x, kdalab_hybrid_new_random(&cfg, seed, &h), "hybrid_new_random");
    double *in = lab_zeros(x, T * d), *y = lab_zeros(x, T * d);
    double *layers = lab_zeros(x, 2 * T * d);
    for (size_t s = 0; s < seqs; s++) {
        for (size_t t = 0; t < T; t++)
            memcpy(in + t * d, emb + tokens[s * T + t] * d, d * sizeof *in);
        double *f = out + s * T * d;
        if (stack == S_EMBED) {
            memcpy(f, in, T * d * sizeof *f);
            continue;
        }
        lab_check(x, kdalab_hybrid_reset(h), "hybrid_reset");
        lab_check(x, kdalab_hybrid_prefill(h, T, in, y, layers), "hybrid_prefill");
        /* the last layer's mixer output: its residual output minus its input */
        const double *last_in = stack == S_KDA_ATTN ? layers + T * d : in;
        for (size_t i = 0; i < T * d; i++)
            f[i] = y[i] - last_in[i];
    }
    free(in);
    free(y);
    free(layers);
    kdalab_hybrid_free(h);
}

/* Ridge fit of t / T on the features (and their squares when quadratic) over
 * the training positions; R^2 on the test positions. */
static double probe_r2(const lab_ctx *x, const params *p, const double *ftr, const double *fte,
                       int quadratic)
{
    const size_t T = p->T, d = p->d, ntr = p->train * T, nte = p->test * T;
    const size_t nf = 1 + d * (quadratic ? 2 : 1);
    gsl_matrix *X = gsl_matrix_alloc(ntr, nf);
    gsl_vector *yv = gsl_vector_alloc(ntr), *c = gsl_vector_alloc(nf);
    if (!X || !yv || !c) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    for (size_t r = 0; r < ntr; r++) {
        gsl_matrix_set(X, r, 0, 1.0);
        for (size_t j = 0; j < d; j++) {
            double v = ftr[r * d + j];
            gsl_matrix_set(X, r, 1 + j, v);
            if (quadratic)
                gsl_matrix_set(X, r, 1 + d + j, v * v);
        }
        gsl_vector_set(yv, r, (double)(r % T) / (double)T);
    }
    /* standardise the columns, so one ridge weight fits every feature scale */
    double *mu = lab_zeros(x, nf), *sd = lab_zeros(x, nf);
    for (size_t j = 1; j < nf; j++) {
        double m = 0, s2 = 0;
        for (size_t r = 0; r < ntr; r++)
            m += gsl_matrix_get(X, r, j);
        m /= (double)ntr;
        for (size_t r = 0; r < ntr; r++)
            s2 += pow(gsl_matrix_get(X, r, j) - m, 2);
        mu[j] = m;
        sd[j] = sqrt(s2 / (double)ntr) + 1e-300;
        for (size_t r = 0; r < ntr; r++)
            gsl_matrix_set(X, r, j, (gsl_matrix_get(X, r, j) - m) / sd[j]);
    }
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(ntr, nf);
    double rnorm, snorm;
    gsl_multifit_linear_svd(X, w);
    gsl_multifit_linear_solve(sqrt(p->ridge * (double)ntr), X, yv, c, &rnorm, &snorm, w);
    /* R^2 on the test positions */
    double ss_res = 0, ss_tot = 0, ybar = 0;
    for (size_t r = 0; r < nte; r++)
        ybar += (double)(r % T) / (double)T;
    ybar /= (double)nte;
    for (size_t r = 0; r < nte; r++) {
        double pred = gsl_vector_get(c, 0);
        for (size_t j = 0; j < d; j++) {
            double v = fte[r * d + j];
            pred += gsl_vector_get(c, 1 + j) * (v - mu[1 + j]) / sd[1 + j];
            if (quadratic)
                pred += gsl_vector_get(c, 1 + d + j) * (v * v - mu[1 + d + j]) / sd[1 + d + j];
        }
        double truth = (double)(r % T) / (double)T;
        ss_res += (pred - truth) * (pred - truth);
        ss_tot += (truth - ybar) * (truth - ybar);
    }
    gsl_multifit_linear_free(w);
    gsl_matrix_free(X);
    gsl_vector_free(yv);
    gsl_vector_free(c);
    free(mu);
    free(sd);
    return 1 - ss_res / ss_tot;
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.T = 256, .d = 64, .H = 2, .vocab = 16, .train = 24, .test = 8, .ridge = 1e-3};
    lab_init(&x, "13_nope_position", "position recoverable from a layer's output (NoPE vs KDA)");
    lab_flag_size(&x, "T", &p.T, "positions per sequence");
    lab_flag_size(&x, "d", &p.d, "d_model");
    lab_flag_size(&x, "H", &p.H, "heads (must divide d)");
    lab_flag_size(&x, "vocab", &p.vocab, "distinct token embeddings (content without position)");
    lab_flag_size(&x, "train", &p.train, "training sequences for the probe");
    lab_flag_size(&x, "test", &p.test, "held-out sequences the R^2 is measured on");
    lab_flag_double(&x, "ridge", &p.ridge, "ridge weight (on standardised features)");
    lab_parse(&x, argc, argv);
    lab_need(&x, p.T >= 2, "--T", "T >= 2");
    lab_need(&x, p.d >= 1 && p.H >= 1 && p.d % p.H == 0, "--d, --H", "d, H >= 1, H dividing d");
    lab_need(&x, p.vocab >= 1 && p.train >= 1 && p.test >= 1, "--vocab, --train, --test",
             "each >= 1");
    lab_need(&x, p.ridge >= 0, "--ridge", "ridge >= 0");
    /* the probe's least squares (gsl_multifit_linear_svd) needs at least as many rows as
     * features: train T positions against 1 + 2 d (the quadratic probe's) */
    lab_need(&x, p.d <= SIZE_MAX / 4 && p.train <= SIZE_MAX / p.T && p.train * p.T >= 2 * p.d + 1,
             "--train, --T, --d", "train T >= 2 d + 1 (the probe's rows, at least its features)");
    gsl_rng *rng = lab_rng(&x);
    double *emb = lab_zeros(&x, p.vocab * p.d);
    for (size_t i = 0; i < p.vocab * p.d; i++)
        emb[i] = gsl_ran_gaussian(rng, 1.0);
    size_t n_tr = p.train * p.T, n_te = p.test * p.T;
    size_t *tok = malloc((n_tr + n_te) * sizeof *tok);
    if (!tok)
        return 1;
    for (size_t i = 0; i < n_tr + n_te; i++)
        tok[i] = gsl_rng_uniform_int(rng, p.vocab);

    static const char *const cols[] = {
        "stack", "embeddings | nope_attention | kda | kda_then_attention (the probed layer)",
        "probe", "linear (the output) | quadratic (the output and its squares)",
        "r2", "held-out R^2 of the probe's prediction of t / T (1: position fully recoverable)",
        NULL};
    FILE *f = lab_tsv_open(&x, "13_nope_position", cols,
                           "T=%zu d=%zu H=%zu vocab=%zu train=%zu test=%zu ridge=%g", p.T, p.d,
                           p.H, p.vocab, p.train, p.test, p.ridge);
    double r2[N_STACKS][2];
    double *ftr = lab_zeros(&x, n_tr * p.d), *fte = lab_zeros(&x, n_te * p.d);
    for (int s = 0; s < N_STACKS; s++) {
        unsigned long seed = x.seed * 7919 + (unsigned long)s;
        features(&x, &p, s, seed, emb, tok, p.train, ftr);
        features(&x, &p, s, seed, emb, tok + n_tr, p.test, fte);
        for (int q = 0; q < 2; q++) {
            r2[s][q] = probe_r2(&x, &p, ftr, fte, q);
            fprintf(f, "%s\t%s\t%.6f\n", STACK_NAME[s], q ? "quadratic" : "linear", r2[s][q]);
        }
        lab_progress(&x, "stacks", (size_t)s + 1, N_STACKS);
    }
    lab_tsv_close(&x, f);

    printf("13_nope_position: held-out R^2 of t/T from a layer's output (untrained layers, "
           "tokens without position)\n");
    printf("  %-20s %10s %10s\n", "probed layer", "linear", "quadratic");
    for (int s = 0; s < N_STACKS; s++)
        printf("  %-20s %10.3f %10.3f\n", STACK_NAME[s], r2[s][0], r2[s][1]);
    printf("verdict: a KDA layer's output carries position (R^2 %.2f linear, %.2f quadratic); "
           "a NoPE attention layer's carries %.2f linearly and %.2f through its magnitude "
           "(quadratic) — %s\n",
           r2[S_KDA][0], r2[S_KDA][1], r2[S_NOPE][0], r2[S_NOPE][1],
           r2[S_KDA][0] > r2[S_NOPE][0] + 0.2
               ? "the KDA layer is the positional source the chapter describes, and the "
                 "attention layer after it inherits it; NoPE attention alone is nearly, not "
                 "exactly, position-blind: causal averaging leaks a little through the "
                 "output's spread"
               : "the chapter's claim is not borne out at these settings");
    free(ftr);
    free(fte);
    free(tok);
    free(emb);
    gsl_rng_free(rng);
    return 0;
}
