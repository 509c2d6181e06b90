/*
 * 18_learned_timescales — one trained block of Gated DeltaNet against one of
 * KDA on a task that needs two memory timescales at once, and the half-lives
 * each learns.
 *
 * The chapter: KDA's per-channel gate lets one head keep a durable fact
 * (decay ~0.9999 per token) in some channels while others track a volatile
 * variable (~0.9); a scalar gate must pick one rate for the whole head.
 * The task (built here, one sequence of T tokens):
 *   position 0, 1   a fact: key f, value v_f (f from 8 fact keys)
 *   then            a stream of volatile pairs: key k_i, value x_i, then a
 *                   gap of 1-5 filler tokens and the query k_i, whose answer
 *                   is x_i; the keys come from 24 stream keys, so the stream
 *                   floods a slowly decaying state with writes it no longer
 *                   needs
 *   position T - 1  the query f: the answer v_f, T - 2 positions after its
 *                   value (position 1) was written
 * so a stream value is asked 2-6 positions after it was written (a gap of
 * 1-5 filler tokens), the fact 62 positions after at T = 64.
 * Embeddings are learned, so nothing aligns a fact with a channel in
 * advance (experiment 02's hand-built version had them axis-aligned).
 * The learned half-life of a channel is -ln 2 / mean g over every position
 * of the test sequences (the gate's log-decay g, read from the trained
 * weights); a = exp(mean g) is its decay per token.
 *
 * Training is kdalab_train_f64 with this task as its batch maker: the AdamW
 * of every training experiment (warm-up, cosine, clip 1, weight decay 0.1 on
 * the matrices only, so the gate's A_log and dt_bias, which set the
 * half-lives measured here, are not pulled towards zero). The test set is 16
 * batches of the run's test stream (kdalab_mqar_test_seed).
 *
 * Reduced (make run): D = 32, H = 2 (d = 16), T = 64, one seed, 800 steps of
 * 16 sequences at learning rate 3e-3. Full (KDALAB_FULL=1): seeds 1-8 (the
 * verdict rule's fewest, LAB_VERDICT_SEEDS), 2000 steps of 32 sequences.
 * The verdicts: KDA against Gated DeltaNet on each answer's test accuracy,
 * paired by seed, by the rule of verdict.h.
 *
 * Output (DIR = --out): 18_learned_timescales.tsv (one row per model: fact
 * and stream accuracy) and 18_learned_half_lives.tsv (one row per channel of
 * each model: its learned half-life).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h" /* lab_full */
#include "verdict.h"

#define N_FACT 8
#define N_STREAM 24
#define N_VALUE 16
/* tokens: 0 filler, fact keys, stream keys, values */
#define TOK_FACT 1
#define TOK_STREAM (TOK_FACT + N_FACT)
#define TOK_VALUE (TOK_STREAM + N_STREAM)
#define VOCAB (TOK_VALUE + N_VALUE)

/* Which answers a batch's targets count. */
enum { BOTH, FACT, STREAM };

/* One batch: tokens [B, T] and targets [B, T] (-1 where not counted: the
 * fact's answer, the stream's, or both). A function of (seed, index, B). */
static void make_batch(unsigned long seed, size_t index, size_t B, size_t T, int which,
                       int32_t *tok, int32_t *tgt)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (seed * 0x9E3779B9UL) ^ (index * 0x85EBCA6BUL) ^ 0x5bd1e995UL);
    for (size_t b = 0; b < B; b++) {
        int32_t *t = tok + b * T, *y = tgt + b * T;
        for (size_t i = 0; i < T; i++) {
            t[i] = 0;
            y[i] = -1;
        }
        const int32_t f = TOK_FACT + (int32_t)gsl_rng_uniform_int(r, N_FACT);
        const int32_t vf = TOK_VALUE + (int32_t)gsl_rng_uniform_int(r, N_VALUE);
        t[0] = f;
        t[1] = vf;
        size_t i = 2;
        while (i + 3 + 5 < T - 1) { /* key, value, gap 1-5, query; leave the last slot */
            const int32_t k = TOK_STREAM + (int32_t)gsl_rng_uniform_int(r, N_STREAM);
            const int32_t v = TOK_VALUE + (int32_t)gsl_rng_uniform_int(r, N_VALUE);
            const size_t gap = 1 + gsl_rng_uniform_int(r, 5);
            t[i] = k;
            t[i + 1] = v;
            t[i + 2 + gap] = k;
            if (which != FACT)
                y[i + 2 + gap] = v;
            i += 3 + gap;
        }
        t[T - 1] = f;
        if (which != STREAM)
            y[T - 1] = vf;
    }
    gsl_rng_free(r);
}

/* The training batches, as the trainer's batch maker: both answers count. */
static kdalab_status train_batch(void *user, unsigned long stream, size_t index, size_t B,
                                 size_t T, int32_t *tok, int32_t *tgt)
{
    (void)user;
    make_batch(stream, index, B, T, BOTH, tok, tgt);
    return KDALAB_OK;
}

/* Tensor `name` of the model, or exit. */
static const double *tensor(const lab_ctx *x, const kdalab_model_config *c, const double *theta,
                            const char *name)
{
    size_t n;
    kdalab_model_size(c, NULL, &n);
    for (size_t i = 0; i < n; i++) {
        kdalab_model_tensor t;
        lab_check(x, kdalab_model_tensor_at(c, i, &t), "tensor_at");
        if (strcmp(t.name, name) == 0)
            return theta + t.offset;
    }
    fprintf(stderr, "%s: no tensor %s\n", x->name, name);
    exit(1);
}

/* y [N, n] = a [N, m] W [m, n], plain loops: this is a readout, not training. */
static void matmul(size_t N, size_t m, size_t n, const double *a, const double *W, double *y)
{
    for (size_t r = 0; r < N; r++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t i = 0; i < m; i++)
                s += a[r * m + i] * W[i * n + j];
            y[r * n + j] = s;
        }
}

/* The mean log-decay of each gate channel over the test tokens of a one-block
 * model: mean_g [H * gw] (gw = 1 for Gated DeltaNet, d for KDA). */
static void mean_gate(const lab_ctx *x, const kdalab_model_config *c, const double *theta,
                      size_t N, const int32_t *tok, double *mean_g)
{
    const size_t D = c->D, H = c->H, d = D / H;
    const int kda = c->mixer[0] == KDALAB_MIXER_KDA;
    const size_t gw = kda ? d : 1;
    double *h = lab_zeros(x, N * D), *z = lab_zeros(x, N * D), *zf = lab_zeros(x, N * d);
    double *g = lab_zeros(x, N * H * gw);
    const double *emb = tensor(x, c, theta, "embed");
    for (size_t n = 0; n < N; n++) /* the embeddings in z for now: the norm's input */
        memcpy(z + n * D, emb + (size_t)tok[n] * D, D * sizeof *z);
    lab_check(x, kdalab_rmsnorm_fwd_f64(N, D, 1e-6, z, tensor(x, c, theta, "blocks.0.norm1"), h),
              "rmsnorm");
    /* z = h Wa [N, H] or (h Wg) Wg2 [N, D] */
    if (kda) {
        matmul(N, D, d, h, tensor(x, c, theta, "blocks.0.mixer.Wg"), zf);
        matmul(N, d, D, zf, tensor(x, c, theta, "blocks.0.mixer.Wg2"), z);
    } else {
        matmul(N, D, H, h, tensor(x, c, theta, "blocks.0.mixer.Wa"), z);
    }
    lab_check(x, kdalab_kda_gate_f64(N, H, gw, z, tensor(x, c, theta, "blocks.0.mixer.A_log"),
                                     tensor(x, c, theta, "blocks.0.mixer.dt_bias"), g),
              "gate");
    for (size_t j = 0; j < H * gw; j++) {
        double s = 0;
        for (size_t n = 0; n < N; n++)
            s += g[n * H * gw + j];
        mean_g[j] = s / (double)N;
    }
    free(h);
    free(z);
    free(zf);
    free(g);
}

typedef struct {
    double fact_acc, stream_acc, fact_loss, stream_loss, seconds;
    double half_life[256]; /* per gate channel, tokens */
    size_t n_channels;
} outcome;

/* Train one one-block model of `mixer` (kdalab_train_f64 on train_batch)
 * and measure it on 16 batches of the run's test stream. */
static void run(lab_ctx *x, kdalab_mixer_kind mixer, size_t D, size_t H, size_t T,
                size_t steps, size_t B, double lr, unsigned long seed, outcome *out)
{
    kdalab_train_config c;
    memset(&c, 0, sizeof c);
    c.model = (kdalab_model_config){.vocab = VOCAB, .D = D, .H = H, .L = 1, .F = 2 * D,
                                    .conv = 1, .mixer = {mixer}};
    c.task.T = T;
    c.opt = (kdalab_adamw_config){lr, lr / 10, 0.9, 0.999, 1e-8, 0.1, 1.0, steps / 10, steps};
    c.batch = B;
    c.test_sequences = B; /* the trainer's own test (both answers); ours is below */
    c.seed = seed;
    size_t P;
    lab_check(x, kdalab_model_size(&c.model, &P, NULL), "model_size");
    double *theta = lab_zeros(x, P);
    int32_t *tok = malloc(B * T * sizeof *tok), *tgt = malloc(B * T * sizeof *tgt);
    if (!tok || !tgt) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    kdalab_train_result tr;
    lab_check(x, kdalab_train_f64(&c, train_batch, NULL, theta, NULL, NULL, &tr), "train");
    out->seconds = tr.seconds;
    double fa = 0, sa = 0, fl = 0, sl = 0;
    const size_t nb = 16;
    const unsigned long test = kdalab_mqar_test_seed(seed);
    double *mg = lab_zeros(x, D), *sum_g = lab_zeros(x, D);
    const size_t gw = mixer == KDALAB_MIXER_KDA ? D / H : 1;
    for (size_t i = 0; i < nb; i++) {
        double a, l;
        make_batch(test, i, B, T, FACT, tok, tgt);
        lab_check(x, kdalab_model_loss_f64(&c.model, theta, B, T, tok, tgt, &l, &a, NULL),
                  "test");
        fa += a / (double)nb;
        fl += l / (double)nb;
        make_batch(test, i, B, T, STREAM, tok, tgt);
        lab_check(x, kdalab_model_loss_f64(&c.model, theta, B, T, tok, tgt, &l, &a, NULL),
                  "test");
        sa += a / (double)nb;
        sl += l / (double)nb;
        mean_gate(x, &c.model, theta, B * T, tok, mg);
        for (size_t j = 0; j < H * gw; j++)
            sum_g[j] += mg[j] / (double)nb;
    }
    out->fact_acc = fa;
    out->stream_acc = sa;
    out->fact_loss = fl;
    out->stream_loss = sl;
    out->n_channels = H * gw;
    for (size_t j = 0; j < H * gw; j++)
        out->half_life[j] = -log(2.0) / sum_g[j];
    free(theta); free(mg); free(sum_g); free(tok); free(tgt);
}

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "18_learned_timescales", "learned half-lives: Gated DeltaNet vs KDA");
    const int full = lab_full();
    size_t D = 32, H = 2, T = 64, steps = full ? 2000 : 800, batch = full ? 32 : 16;
    size_t seeds = full ? LAB_VERDICT_SEEDS : 1;
    double lr = 3e-3;
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "seeds", &seeds, "seeds per mixer, from --seed on");
    lab_flag_double(&x, "lr", &lr, "peak learning rate");
    lab_parse(&x, argc, argv);
    lab_need(&x, steps >= 1, "--steps", "steps >= 1");
    lab_need(&x, seeds >= 1 && seeds <= LAB_VERDICT_MAX_SEEDS, "--seeds", "1 <= seeds <= %d",
             LAB_VERDICT_MAX_SEEDS);
    lab_need(&x, lr > 0 && isfinite(lr), "--lr", "a finite lr > 0");
    kdalab_blas_choose_kernels(argv); /* a good command line: may restart the program, once */
    kdalab_train_keep_memory(); /* each step reuses the last one's pages */
    static const char *const cols[] = {
        "mixer", "gated_deltanet or kda (one block)", "seed", "seed",
        "fact_acc", "test accuracy on the fact, asked T - 2 positions after its value was written",
        "stream_acc", "test accuracy on the stream's queries (2-6 positions after the value)",
        "hl_min", "shortest learned half-life (tokens)", "hl_median", "median half-life",
        "hl_max", "longest half-life", "train_s", "training wall time (s)", NULL};
    FILE *f = lab_tsv_open(&x, "18_learned_timescales", cols,
                           "%s sweep: D=%zu H=%zu T=%zu steps=%zu batch=%zu lr=%g vocab=%d",
                           full ? "full" : "reduced", D, H, T, steps, batch, lr, VOCAB);
    static const char *const hcols[] = {
        "mixer", "gated_deltanet or kda", "seed", "seed", "channel",
        "gate channel (head * d + c for KDA, the head for Gated DeltaNet)",
        "half_life", "-ln 2 / mean log-decay over the test tokens (tokens)",
        "decay", "exp(mean log-decay): the decay per token", NULL};
    FILE *fh = lab_tsv_open(&x, "18_learned_half_lives", hcols, "%s sweep",
                            full ? "full" : "reduced");
    /* the header first: the per-seed lines below belong to it */
    printf("%s (%s sweep; D = %zu, H = %zu, T = %zu, %zu steps, %zu seed(s)):\n", x.name,
           full ? "full" : "reduced", D, H, T, steps, seeds);
    const kdalab_mixer_kind kinds[2] = {KDALAB_MIXER_GATED_DELTANET, KDALAB_MIXER_KDA};
    double ratio_kda = 0;
    /* [mixer][fact, stream][seed]: the verdicts' sides, and the means printed */
    double acc[2][2][LAB_VERDICT_MAX_SEEDS], loss[2][2][LAB_VERDICT_MAX_SEEDS];
    for (int k = 0; k < 2; k++)
        for (size_t s = 0; s < seeds; s++) {
            outcome o;
            run(&x, kinds[k], D, H, T, steps, batch, lr, x.seed + s, &o);
            double hl[256];
            memcpy(hl, o.half_life, o.n_channels * sizeof *hl);
            gsl_sort(hl, 1, o.n_channels);
            const char *name = kdalab_mixer_name(kinds[k]);
            fprintf(f, "%s\t%lu\t%.4f\t%.4f\t%.2f\t%.2f\t%.2f\t%.1f\n", name, x.seed + s,
                    o.fact_acc, o.stream_acc, hl[0], hl[o.n_channels / 2],
                    hl[o.n_channels - 1], o.seconds);
            for (size_t j = 0; j < o.n_channels; j++)
                fprintf(fh, "%s\t%lu\t%zu\t%.4f\t%.6f\n", name, x.seed + s, j, o.half_life[j],
                        exp(-log(2.0) / o.half_life[j]));
            acc[k][0][s] = o.fact_acc, acc[k][1][s] = o.stream_acc;
            loss[k][0][s] = o.fact_loss, loss[k][1][s] = o.stream_loss;
            if (k == 1)
                ratio_kda += hl[o.n_channels - 1] / hl[0] / (double)seeds;
            printf("  %-15s seed %lu: fact %.3f, stream %.3f; half-lives %.1f .. %.1f tokens "
                   "(median %.1f)\n", name, x.seed + s, o.fact_acc, o.stream_acc, hl[0],
                   hl[o.n_channels - 1], hl[o.n_channels / 2]);
            lab_progress(&x, "models", (size_t)k * seeds + s + 1, 2 * seeds);
        }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fh);
    printf("  mean over %zu seed(s): fact %.3f (KDA) and %.3f (Gated DeltaNet), stream %.3f and "
           "%.3f; KDA's longest half-life is %.0fx its shortest%s\n",
           seeds, gsl_stats_mean(acc[1][0], 1, seeds), gsl_stats_mean(acc[0][0], 1, seeds),
           gsl_stats_mean(acc[1][1], 1, seeds), gsl_stats_mean(acc[0][1], 1, seeds), ratio_kda,
           full ? "" : " (reduced sweep; see make run FULL=1)");
    /* the verdict rule (verdict.h), KDA against Gated DeltaNet paired by seed, on each answer;
     * the no-recall loss: ln of the N_VALUE values an answer can be */
    static const char *const what[2] = {"the fact, asked T - 2 positions after its value",
                                        "the stream, asked 2-6 positions after"};
    for (int a = 0; a < 2; a++) {
        const lab_side kd = {"KDA", acc[1][a], loss[1][a]},
                       gd = {"Gated DeltaNet", acc[0][a], loss[0][a]};
        lab_verdict v;
        lab_verdict_apply(&kd, &gd, seeds, x.seed, lab_no_recall_loss(N_VALUE), &v);
        lab_verdict_print(stdout, what[a], &kd, &gd, &v);
    }
    return 0;
}
