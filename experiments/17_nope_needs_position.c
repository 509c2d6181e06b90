/*
 * 17_nope_needs_position — trained models: can attention without positional
 * encoding (NoPE) solve MQAR, and does one KDA block supply the position it
 * lacks?
 *
 * The chapter: the hybrid's attention blocks are NoPE, "they get their
 * positional signal from the KDA layers". MQAR needs position: the answer
 * to a query is the token *after* the matching key, and causal attention
 * without positions cannot tell which token follows which. Five two-block
 * stacks, the same sizes and training:
 *   attention_nope           attention, attention; no short convolution
 *   attention_conv           attention, attention; with the convolution (a
 *                            positional signal of its own, as fla's layers have)
 *   kda_then_attention       kda, attention; no convolution anywhere
 *   kda_conv_then_attention  kda with its convolution (as a KDA layer has
 *                            one), then attention without: the hybrid's
 *                            layout (kdalab_model_config's conv_off)
 *   attention_conv_then_attention  the same with attention in KDA's place:
 *                            is it the KDA block or its convolution that
 *                            gives the NoPE block its position?
 * (experiment 13 asked the same of untrained layers with a probe). The task
 * is kdalab's dense recall layout at vocabulary 65 (lib/kdalab_mqar.h). At
 * each learning rate the other four stacks are judged against NoPE
 * attention alone by the verdict rule (verdict.h: paired by seed, a 95 % t
 * interval, 8 seeds or more), and KDA with its convolution against
 * attention with one in the first block.
 *
 * Reduced (make run): D = 32, H = 2, T = 48, 8 pairs, one seed, 600 steps
 * of 16 sequences, lr 3e-3. Full (KDALAB_FULL=1): D = 64 (d = 32), T = 64,
 * 8 pairs, 1500 steps of 32, lr 1e-3 and 3e-3 (14's two), seeds 1-8.
 * --pairs P asks P pairs instead of 8 (16 at T = 64: both one-convolution
 * stacks off their ceiling, so the KDA block and attention can differ).
 *
 * Output (DIR = --out): 17_nope_needs_position.tsv, one row per model.
 */
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_SEEDS 16
#define MAX_LR 4
#define N_STACKS 5

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "17_nope_needs_position", "NoPE attention on MQAR with and without KDA");
    const int full = lab_full();
    size_t D = full ? 64 : 32, T = full ? 64 : 48, steps = full ? 1500 : 600;
    size_t batch = full ? 32 : 16, seeds = full ? 8 : 1, P = 8;
    const char *lrs_s = full ? "1e-3,3e-3" : "3e-3";
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (stack, lr), from --seed on");
    lab_flag_size(&x, "pairs", &P, "key-value pairs per sequence");
    lab_flag_string(&x, "lrs", &lrs_s, "peak learning rates, comma-separated");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    double lrs[MAX_LR];
    const size_t n_lr = lab_parse_list(lrs_s, lrs, MAX_LR);
    int bad = !n_lr;
    for (size_t i = 0; i < n_lr; i++) /* each a model of its own: distinct, and a rate */
        for (size_t j = 0; j <= i; j++)
            bad |= !(lrs[i] > 0 && lrs[i] < 1) || (j < i && lrs[j] == lrs[i]);
    if (bad) {
        fprintf(stderr, "%s: --lrs %s: want 1 .. %d distinct rates in (0, 1), "
                        "comma-separated\n", x.name, lrs_s, MAX_LR);
        return 2;
    }
    const struct {
        const char *label, *mixers, *conv_name;
        int conv;
        uint64_t conv_off;
    } stacks[N_STACKS] = {{"attention_nope", "attention", "none", 0, 0},
                          {"attention_conv", "attention", "both", 1, 0},
                          {"kda_then_attention", "kda,attention", "none", 0, 0},
                          {"kda_conv_then_attention", "kda,attention", "first", 1, 1u << 1},
                          {"attention_conv_then_attention", "attention", "first", 1, 1u << 1}};
    static const char *const cols[] = {LAB_MQAR_COLUMNS, "conv",
                                       "the blocks with the short convolution: none, both, first",
                                       NULL};
    FILE *f = lab_tsv_open(&x, "17_nope_needs_position", cols,
                           "%s sweep (%s): D=%zu H=2 T=%zu pairs=%zu steps=%zu batch=%zu "
                           "seeds=%zu lrs=%s", full ? "full" : "reduced", lab_mqar_precision(&x), D,
                           T, P, steps, batch, seeds, lrs_s);
    /* seeds outermost: a sweep stopped early has every stack at the seeds it did */
    static double acc[MAX_LR][N_STACKS][MAX_SEEDS], loss[MAX_LR][N_STACKS][MAX_SEEDS];
    for (size_t s = 0; s < seeds; s++)
        for (size_t il = 0; il < n_lr; il++)
            for (int i = 0; i < N_STACKS; i++) {
                lab_mqar_spec spec = {.mixers = stacks[i].mixers, .L = 2, .D = D, .H = 2,
                                      .conv = stacks[i].conv, .conv_off = stacks[i].conv_off,
                                      .T = T, .P = P, .vocab = 65, .batch = batch,
                                      .steps = steps, .test = 512, .lr = lrs[il],
                                      .seed = x.seed + s};
                lab_mqar_result r;
                lab_mqar_train(&x, &spec, 0, &r);
                lab_mqar_row_extra(f, stacks[i].label, &spec, &r, stacks[i].conv_name);
                acc[il][i][s] = r.accuracy;
                loss[il][i][s] = r.loss;
                lab_progress(&x, "models", (s * n_lr + il) * N_STACKS + (size_t)i + 1,
                             seeds * n_lr * N_STACKS);
            }
    lab_mqar_jobs_done(&x);
    lab_tsv_close(&x, f);
    printf("%s (%s sweep; D = %zu, T = %zu, %zu pairs, %zu steps, %zu seed(s)): test accuracy, "
           "mean +- sd\n", x.name, full ? "full" : "reduced", D, T, P, steps, seeds);
    /* each stack against NoPE attention alone, by the verdict rule (verdict.h) */
    const lab_mqar_spec at = {.mixers = "attention", .L = 2, .D = D, .H = 2, .T = T, .P = P,
                              .vocab = 65};
    const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
    static const char *const said[N_STACKS] = {
        "NoPE attention", "attention with the convolution", "KDA then NoPE attention",
        "KDA with its convolution then NoPE attention",
        "attention with the convolution then NoPE attention"};
    for (size_t il = 0; il < n_lr; il++) {
        printf(" lr %g:\n", lrs[il]);
        for (int i = 0; i < N_STACKS; i++)
            printf("  %-30s %.3f +- %.3f\n", stacks[i].label,
                   gsl_stats_mean(acc[il][i], 1, seeds),
                   seeds > 1 ? gsl_stats_sd(acc[il][i], 1, seeds) : 0.0);
        const lab_side nope = {said[0], acc[il][0], loss[il][0]};
        char what[48];
        snprintf(what, sizeof what, "%zu pairs, lr %g", P, lrs[il]);
        for (int i = 1; i < N_STACKS; i++) {
            const lab_side other = {said[i], acc[il][i], loss[il][i]};
            lab_verdict v;
            lab_verdict_apply(&other, &nope, seeds, x.seed, no_recall, &v);
            lab_verdict_print(stdout, what, &other, &nope, &v);
        }
        /* the KDA block against another block with the same convolution */
        const lab_side kc = {said[3], acc[il][3], loss[il][3]};
        const lab_side ac = {said[4], acc[il][4], loss[il][4]};
        lab_verdict v;
        lab_verdict_apply(&kc, &ac, seeds, x.seed, no_recall, &v);
        lab_verdict_print(stdout, what, &kc, &ac, &v);
    }
    if (!full)
        printf("  reduced sweep; see make run FULL=1\n");
    return 0;
}
