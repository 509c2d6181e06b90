/*
 * 14_recall_by_mechanism — trained models on multi-query associative recall
 * (kdalab's dense layout of it), by mixer: test accuracy against the number of key-value pairs at
 * a fixed width, for softmax attention, linear attention, DeltaNet, Gated
 * DeltaNet and KDA (each a two-block model, kdalab_train_mqar_f64).
 *
 * The chapter's claims under test: a d_k x d_v state "holds on the order of
 * d cleanly separable associations" and the literature's ordering (the Kimi
 * Linear report §5.1: KDA ahead of Gated DeltaNet; the DeltaNet paper: the
 * delta rule far ahead of linear attention; attention on top). Each (mixer,
 * pairs) is trained at every learning rate of the sweep and every seed; the
 * learning rate with the best mean accuracy over seeds is reported (the
 * Zoology protocol), with the mean and the standard deviation over seeds;
 * the orderings at the largest number of pairs are judged by the verdict
 * rule (verdict.h: paired by seed, a 95 % t interval, 8 seeds or more). The
 * task is kdalab's dense recall layout (lib/kdalab_mqar.h), not Zoology's.
 *
 * Reduced (make run): vocabulary 65 (32 keys, 32 values; --vocab), D = 32,
 * H = 2 (d = 16), T = 40, pairs 4 and 16, one seed, learning rate 3e-3, 600
 * steps of 16 sequences: about two minutes, and at the edge of where
 * training takes off (attention at 4 pairs, D = 32: test accuracy 0.03 after
 * 250 steps, 0.51 after 400, 0.995 after 500 at T = 64), so its numbers show
 * the pipeline, not the verdict. Full (KDALAB_FULL=1): vocabulary 129 (64
 * keys: more keys than the layer's 2 x 16 key dimensions — at 65 every key
 * can have a direction of its own and linear attention recalls 24 pairs at
 * 0.98), T = 64, pairs 4, 8, 16, 24, seeds 1-3, learning rates 1e-3 and
 * 3e-3, 1000 steps of 32 sequences.
 *
 * At experiment 22's regime, where every mixer trains (d = 32, 3,000
 * steps), on Zoology's MQAR with 8 seeds: KDALAB_FULL=1
 * 14_recall_by_mechanism --task zoology --d-model 64 --pairs 4,8,16
 * --steps 3000 --seeds 8 (240 models; Zoology's layout asks T >= 4P).
 *
 * Output (DIR = --out): 14_recall_by_mechanism.tsv, one row per model
 * trained (every seed and learning rate), and 14_recall_summary.tsv, one
 * row per (mixer, pairs) at its best learning rate: mean and sd.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_SEEDS 16
#define MAX_LR 4

static const char *const MIXERS[5] = {"attention", "linear_attention", "deltanet",
                                      "gated_deltanet", "kda"};

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "14_recall_by_mechanism", "trained MQAR recall by mixer and number of pairs");
    const int full = lab_full();
    size_t D = 32, H = 2, T = full ? 64 : 40, steps = full ? 1000 : 600, batch = full ? 32 : 16;
    size_t seeds = full ? 3 : 1, test = 512, vocab = full ? 129 : 65;
    const char *task_s = "dense", *pairs_s = full ? "4,8,16,24" : "4,16";
    lab_flag_string(&x, "task", &task_s,
                    "dense (kdalab's layout), or zoology / overwrite (Zoology's layouts and "
                    "vocabulary split)");
    lab_flag_string(&x, "pairs", &pairs_s, "key-value pairs per sequence, comma-separated "
                                           "(at most 4; the verdicts are at the last)");
    lab_flag_size(&x, "d-model", &D, "model width D");
    lab_flag_size(&x, "heads", &H, "heads (head dimension D / H)");
    lab_flag_size(&x, "seq-len", &T, "tokens per sequence");
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "batch", &batch, "sequences per step");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (mixer, pairs, lr), from --seed on");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_flag_size(&x, "vocab", &vocab, "vocabulary: 1 filler, (W - 1) / 2 keys, the rest values");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    kdalab_mqar_task task;
    lab_split split;
    if (lab_mqar_recall_task(&x, task_s, &task, &split))
        return 2;
    double pairs_d[4];
    size_t pairs[4];
    const size_t n_pairs = lab_parse_list(pairs_s, pairs_d, 4);
    for (size_t i = 0; i < n_pairs; i++) { /* checked before the cast: no overflow */
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= pairs_d[j] == pairs_d[i];
        if (!(pairs_d[i] >= 1 && pairs_d[i] <= 1e6) || pairs_d[i] != floor(pairs_d[i]) || dup) {
            fprintf(stderr, "%s: --pairs %s: want distinct whole numbers from 1 to 10^6\n",
                    x.name, pairs_s);
            return 2;
        }
        pairs[i] = (size_t)pairs_d[i];
    }
    if (!n_pairs) {
        fprintf(stderr, "%s: --pairs %s: want 1 .. 4 counts\n", x.name, pairs_s);
        return 2;
    }
#define UPDATES(P) (task == KDALAB_MQAR_OVERWRITE ? (P) / 2 : 0) /* overwrite's U */
    const double lrs_reduced[] = {3e-3}, lrs_full[] = {1e-3, 3e-3};
    const double *lrs = full ? lrs_full : lrs_reduced;
    const size_t n_lr = full ? 2 : 1;

    for (size_t m = 0; m < 5; m++) /* the largest number of pairs: refused now, not later */
        lab_mqar_check(&x, &(lab_mqar_spec){.mixers = MIXERS[m], .L = 2, .D = D, .H = H,
                                            .conv = 1, .T = T, .P = pairs[n_pairs - 1],
                                            .updates = UPDATES(pairs[n_pairs - 1]),
                                            .task = task, .split = split,
                                            .vocab = vocab, .batch = batch, .steps = steps,
                                            .test = test, .lr = lrs[0], .seed = x.seed});
    static const char *const cols[] = {LAB_MQAR_COLUMNS, NULL};
    FILE *f = lab_tsv_open(&x, "14_recall_by_mechanism", cols,
                           "%s sweep (%s): task=%s D=%zu H=%zu T=%zu vocab=%zu steps=%zu "
                           "batch=%zu seeds=%zu test=%zu", full ? "full" : "reduced",
                           lab_mqar_precision(&x), kdalab_mqar_task_name(task), D, H, T, vocab,
                           steps, batch, seeds, test);
    static const char *const scols[] = {
        "mixer", "the mixer of both blocks", "pairs", "key-value pairs per sequence",
        "lr", "the learning rate with the best mean accuracy", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)", "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "14_recall_summary", scols,
                            "%s sweep: D=%zu H=%zu T=%zu vocab=%zu seeds=%zu",
                            full ? "full" : "reduced", D, H, T, vocab, seeds);
    double mean_at[5][4] = {{0}};
    size_t best_at[5][4] = {{0}};
    static double acc[5][4][MAX_LR][MAX_SEEDS], loss[5][4][MAX_LR][MAX_SEEDS];
    const size_t total = 5 * n_pairs * n_lr * seeds;
    size_t done = 0;
    /* seeds outermost: a sweep cut short still has whole curves for its
     * first seeds (and KDALAB_RESUME=1 picks it up where it stopped) */
    for (size_t sd = 0; sd < seeds; sd++)
        for (size_t m = 0; m < 5; m++)
            for (size_t ip = 0; ip < n_pairs; ip++)
                for (size_t il = 0; il < n_lr; il++) {
                    lab_mqar_spec s = {.mixers = MIXERS[m], .L = 2, .D = D, .H = H, .conv = 1,
                                       .T = T, .P = pairs[ip], .updates = UPDATES(pairs[ip]),
                                       .task = task, .split = split, .vocab = vocab,
                                       .batch = batch,
                                       .steps = steps, .test = test, .lr = lrs[il],
                                       .seed = x.seed + sd};
                    lab_mqar_result r;
                    lab_mqar_train(&x, &s, 0, &r);
                    lab_mqar_row(f, MIXERS[m], &s, &r);
                    acc[m][ip][il][sd] = r.accuracy;
                    loss[m][ip][il][sd] = r.loss;
                    lab_progress(&x, "models", ++done, total);
                }
    lab_mqar_jobs_done(&x);
    for (size_t m = 0; m < 5; m++)
        for (size_t ip = 0; ip < n_pairs; ip++) {
            double best_mean;
            const size_t il = lab_best_lr(acc[m][ip][0], MAX_SEEDS, n_lr, seeds, &best_mean);
            const double best_sd = seeds > 1 ? gsl_stats_sd(acc[m][ip][il], 1, seeds) : 0;
            const double best_lr = lrs[il];
            fprintf(fs, "%s\t%zu\t%g\t%.4f\t%.4f\t%zu\n", MIXERS[m], pairs[ip], best_lr,
                    best_mean, best_sd, seeds);
            mean_at[m][ip] = best_mean;
            best_at[m][ip] = il;
        }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);

    printf("%s (%s sweep; %s, D = %zu, H = %zu, d = %zu, T = %zu, %zu steps, %zu seed(s)):\n",
           x.name, full ? "full" : "reduced", kdalab_mqar_task_name(task), D, H, D / H, T, steps,
           seeds);
    printf("  %-18s", "test accuracy");
    for (size_t ip = 0; ip < n_pairs; ip++)
        printf("  P = %-4zu", pairs[ip]);
    printf("\n");
    for (size_t m = 0; m < 5; m++) {
        printf("  %-18s", MIXERS[m]);
        for (size_t ip = 0; ip < n_pairs; ip++)
            printf("  %-8.3f", mean_at[m][ip]);
        printf("\n");
    }
    /* the literature's ordering at the largest number of pairs, by the
     * verdict rule (verdict.h), each mixer at its best learning rate:
     * attention against the best recurrent mixer, the delta rule against
     * linear attention, KDA against Gated DeltaNet */
    const size_t L = n_pairs - 1;
    static const char *const names[5] = {"attention", "linear attention", "DeltaNet",
                                         "Gated DeltaNet", "KDA"};
    size_t best = 1;
    for (size_t m = 2; m < 5; m++)
        if (mean_at[m][L] > mean_at[best][L])
            best = m;
    const lab_mqar_spec at = {.mixers = MIXERS[0], .L = 2, .D = D, .H = H, .conv = 1, .T = T,
                              .P = pairs[L], .updates = UPDATES(pairs[L]), .task = task,
                              .split = split, .vocab = vocab};
    const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
    const size_t cmp[3][2] = {{0, best}, {2, 1}, {4, 3}};
    char what[64];
    snprintf(what, sizeof what, "P = %zu", pairs[L]);
    for (int c = 0; c < 3; c++) {
        const size_t a = cmp[c][0], b = cmp[c][1], la = best_at[a][L], lb = best_at[b][L];
        const lab_side A = {names[a], acc[a][L][la], loss[a][L][la]},
                       B = {names[b], acc[b][L][lb], loss[b][L][lb]};
        lab_verdict v;
        lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
        lab_verdict_print(stdout, what, &A, &B, &v);
    }
    if (!full)
        printf("  reduced sweep: one seed, the pipeline only; see make run FULL=1\n");
    return 0;
}
