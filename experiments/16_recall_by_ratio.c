/*
 * 16_recall_by_ratio — trained KDA + attention stacks: MQAR test accuracy
 * against the share of attention blocks, at a setting where pure KDA fails,
 * beside the cache bill of each stack (cache_model.h, the share of the
 * attention-only stack's cache it holds at Kimi Linear's sizes and 128K
 * tokens).
 *
 * The chapter's claim under test: 3:1 "sits where the recall curve has
 * flattened but the cache bill has already fallen by three quarters". Stacks
 * of equal depth L: pure KDA, N:1 for N = L - 1 down to 1 (hybrid:N), pure
 * attention; is there a knee in recall, and is it at 3:1?
 *
 * Reduced (make run): L = 4 (pure KDA, 3:1, 1:1, pure attention), D = 32,
 * H = 2, T = 40, 16 pairs, one seed, 600 steps of 16 sequences. Full
 * (KDALAB_FULL=1): L = 8 (adds 7:1), 24 pairs at T = 64, seeds 1-3, 1000
 * steps of 32 sequences.
 *
 * Output (DIR = --out): 16_recall_by_ratio.tsv, one row per model, and
 * 16_recall_by_ratio_summary.tsv, one row per stack: attention share, mean
 * and sd accuracy, cache fraction.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_statistics_double.h>

#include "cache_model.h"
#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_SEEDS 16

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "16_recall_by_ratio", "trained MQAR recall against the hybrid ratio");
    const int full = lab_full();
    size_t L = full ? 8 : 4, D = 32, H = 2, T = full ? 64 : 40, P = full ? 24 : 16;
    size_t steps = full ? 1000 : 600, batch = full ? 32 : 16, seeds = full ? 3 : 1;
    double lr = 3e-3;
    lab_flag_size(&x, "layers", &L, "blocks of every stack (>= 2)");
    lab_flag_size(&x, "pairs", &P, "key-value pairs per sequence");
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "seeds", &seeds, "seeds per stack, from --seed on");
    lab_flag_double(&x, "lr", &lr, "peak learning rate");
    lab_mqar_flags(&x);
    lab_parse(&x, argc, argv);
    lab_need(&x, seeds >= 1 && seeds <= MAX_SEEDS, "--seeds", "1 <= seeds <= %d", MAX_SEEDS);
    lab_need(&x, L >= 2 && L <= 16, "--layers", "2 <= layers <= 16");
    lab_need(&x, P <= (T - 1) / 2, "--pairs", "2 pairs < T = %zu", T); /* 2 P < T, no wrap */
    lab_need(&x, steps >= 1, "--steps", "steps >= 1");
    lab_need(&x, lr > 0 && isfinite(lr), "--lr", "a finite lr > 0");
    kdalab_blas_choose_kernels(argv); /* a good command line: may restart the program, once */
    kdalab_train_keep_memory(); /* each step reuses the last one's pages */
    /* the stacks: pure KDA, hybrid:N for N = L-1, ..., 1 where L % (N+1) == 0, attention */
    char specs[20][32];
    size_t ns = 0;
    snprintf(specs[ns++], 32, "kda");
    for (size_t n = L - 1; n >= 1; n--)
        if (L % (n + 1) == 0)
            snprintf(specs[ns++], 32, "hybrid:%zu", n);
    snprintf(specs[ns++], 32, "attention");

    static const char *const cols[] = {LAB_MQAR_COLUMNS, NULL};
    FILE *f = lab_tsv_open(&x, "16_recall_by_ratio", cols,
                           "%s sweep (%s): L=%zu D=%zu H=%zu T=%zu pairs=%zu steps=%zu seeds=%zu lr=%g",
                           full ? "full" : "reduced", lab_mqar_precision(&x), L, D, H, T, P, steps, seeds, lr);
    static const char *const scols[] = {
        "stack", "kda, hybrid:N (N KDA blocks per attention block), attention",
        "attn_share", "attention blocks / blocks", "mean", "mean test accuracy",
        "sd", "standard deviation over seeds (0 for one seed)",
        "cache_fraction", "its decode cache / the attention-only stack's, Kimi Linear "
        "sizes (32 heads of 128, KV cache 2 x 32 x 128 per token), 128K tokens", NULL};
    FILE *fs = lab_tsv_open(&x, "16_recall_by_ratio_summary", scols, "%s sweep: L=%zu",
                            full ? "full" : "reduced", L);
    /* seeds outermost: a sweep stopped early has whole curves, not whole stacks */
    double mean[20], share[20], frac[20], acc[20][MAX_SEEDS], loss[20][MAX_SEEDS];
    size_t done = 0;
    for (size_t sd = 0; sd < seeds; sd++)
        for (size_t i = 0; i < ns; i++) {
            lab_mqar_spec s = {.mixers = specs[i], .L = L, .D = D, .H = H, .conv = 1, .T = T,
                               .P = P, .vocab = 65, .batch = batch, .steps = steps, .test = 512,
                               .lr = lr, .seed = x.seed + sd};
            lab_mqar_result r;
            lab_mqar_train(&x, &s, 0, &r);
            lab_mqar_row(f, specs[i], &s, &r);
            acc[i][sd] = r.accuracy;
            loss[i][sd] = r.loss;
            lab_progress(&x, "models", ++done, ns * seeds);
            size_t n_attn = 0;
            for (size_t l = 0; l < L; l++)
                n_attn += r.model.mixer[l] == KDALAB_MIXER_ATTENTION;
            share[i] = (double)n_attn / (double)L;
            cache_model m = {specs[i], "", L - n_attn, n_attn, 32, 128, 128, 4, 2 * 32 * 128};
            frac[i] = cache_model_fraction(&m, 131072);
        }
    lab_mqar_jobs_done(&x);
    for (size_t i = 0; i < ns; i++) {
        mean[i] = gsl_stats_mean(acc[i], 1, seeds);
        fprintf(fs, "%s\t%.4f\t%.4f\t%.4f\t%.4f\n", specs[i], share[i], mean[i],
                seeds > 1 ? gsl_stats_sd(acc[i], 1, seeds) : 0.0, frac[i]);
    }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);
    printf("%s (%s sweep; L = %zu, D = %zu, T = %zu, %zu pairs, %zu steps, %zu seed(s)):\n",
           x.name, full ? "full" : "reduced", L, D, T, P, steps, seeds);
    size_t i31 = ns;
    for (size_t i = 0; i < ns; i++) {
        printf("  %-10s attention share %.3f  accuracy %.3f  cache %.3f of attention's\n",
               specs[i], share[i], mean[i], frac[i]);
        if (specs[i][0] == 'h' && atoi(specs[i] + 7) == 3)
            i31 = i;
    }
    const double top = mean[ns - 1], bottom = mean[0];
    if (i31 < ns)
        printf("  verdict: 3:1 recovers %.0f %% of the gap from pure KDA (%.3f) to pure "
               "attention (%.3f) at %.0f %% of its cache (a fall of %.0f %%)%s\n",
               top > bottom ? 100 * (mean[i31] - bottom) / (top - bottom) : 0.0, bottom, top,
               100 * frac[i31], 100 * (1 - frac[i31]),
               bottom < 0.5 ? "" : " — but pure KDA does not fail here; raise --pairs");
    /* the shape of the curve by the verdict rule (verdict.h): each stack
     * against the next one with more attention */
    const lab_mqar_spec any = {.mixers = "kda", .L = L, .D = D, .H = H, .conv = 1, .T = T,
                               .P = P, .vocab = 65};
    const double no_recall = lab_no_recall_loss(lab_mqar_answers(&any));
    for (size_t i = 0; i + 1 < ns; i++) {
        const lab_side A = {specs[i + 1], acc[i + 1], loss[i + 1]}, B = {specs[i], acc[i], loss[i]};
        lab_verdict v;
        lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
        lab_verdict_print(stdout, "the next stack", &A, &B, &v);
    }
    if (!full)
        printf("  (reduced sweep: one seed, short training; see make run FULL=1)\n");
    return 0;
}
