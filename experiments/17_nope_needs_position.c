/*
 * 17_nope_needs_position — trained models: can attention without positional
 * encoding (NoPE) solve MQAR, and does one KDA block supply the position it
 * lacks?
 *
 * The chapter: the hybrid's attention blocks are NoPE, "they get their
 * positional signal from the KDA layers". MQAR needs position: the answer
 * to a query is the token *after* the matching key, and causal attention
 * without positions cannot tell which token follows which. Three two-block
 * stacks, the same sizes and training:
 *   attention_nope       attention, attention; no short convolution
 *   attention_conv       attention, attention; with the convolution (a
 *                        positional signal of its own, as fla's layers have)
 *   kda_then_attention   kda, attention; no convolution anywhere
 * (experiment 13 asked the same of untrained layers with a probe). The task
 * is kdalab's dense recall layout at vocabulary 65 (lib/kdalab_mqar.h); the
 * other two stacks are judged against NoPE attention by the verdict rule
 * (verdict.h: paired by seed, a 95 % t interval, 8 seeds or more).
 *
 * Reduced (make run): D = 32, H = 2, T = 48, 8 pairs, one seed, 600 steps
 * of 16 sequences. Full (KDALAB_FULL=1): the quick configuration
 * (D = 64, T = 64, 8 pairs, 1500 steps of 32, lr 1e-3), seeds 1-3.
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

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "17_nope_needs_position", "NoPE attention on MQAR with and without KDA");
    const int full = lab_full();
    size_t D = full ? 64 : 32, T = full ? 64 : 48, steps = full ? 1500 : 600;
    size_t batch = full ? 32 : 16, seeds = full ? 3 : 1;
    double lr = full ? 1e-3 : 3e-3;
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "seeds", &seeds, "seeds per stack, from --seed on");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    const struct {
        const char *label, *mixers;
        int conv;
    } stacks[3] = {{"attention_nope", "attention", 0},
                   {"attention_conv", "attention", 1},
                   {"kda_then_attention", "kda,attention", 0}};
    static const char *const cols[] = {LAB_MQAR_COLUMNS, "conv", "short convolution on",
                                       NULL};
    FILE *f = lab_tsv_open(&x, "17_nope_needs_position", cols,
                           "%s sweep (%s): D=%zu H=2 T=%zu pairs=8 steps=%zu batch=%zu seeds=%zu "
                           "lr=%g", full ? "full" : "reduced", lab_mqar_precision(&x), D, T, steps, batch, seeds, lr);
    double mean[3], sd[3];
    /* seeds outermost: a sweep stopped early has every stack at the seeds it did */
    double acc[3][MAX_SEEDS], loss[3][MAX_SEEDS];
    for (size_t s = 0; s < seeds; s++)
        for (int i = 0; i < 3; i++) {
            lab_mqar_spec spec = {.mixers = stacks[i].mixers, .L = 2, .D = D, .H = 2,
                                  .conv = stacks[i].conv, .T = T, .P = 8, .vocab = 65,
                                  .batch = batch, .steps = steps, .test = 512, .lr = lr,
                                  .seed = x.seed + s};
            lab_mqar_result r;
            lab_mqar_train(&x, &spec, 0, &r);
            lab_mqar_row_extra(f, stacks[i].label, &spec, &r, stacks[i].conv ? "1" : "0");
            acc[i][s] = r.accuracy;
            loss[i][s] = r.loss;
            lab_progress(&x, "models", s * 3 + (size_t)i + 1, 3 * seeds);
        }
    lab_mqar_jobs_done(&x);
    for (int i = 0; i < 3; i++) {
        mean[i] = gsl_stats_mean(acc[i], 1, seeds);
        sd[i] = seeds > 1 ? gsl_stats_sd(acc[i], 1, seeds) : 0;
    }
    lab_tsv_close(&x, f);
    printf("%s (%s sweep; D = %zu, T = %zu, 8 pairs, %zu steps, %zu seed(s)): test accuracy\n",
           x.name, full ? "full" : "reduced", D, T, steps, seeds);
    for (int i = 0; i < 3; i++)
        printf("  %-20s %.3f +- %.3f\n", stacks[i].label, mean[i], sd[i]);
    /* each stack against NoPE attention alone, by the verdict rule (verdict.h) */
    const lab_mqar_spec at = {.mixers = "attention", .L = 2, .D = D, .H = 2, .T = T, .P = 8,
                              .vocab = 65};
    const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
    const lab_side nope = {"NoPE attention", acc[0], loss[0]};
    const lab_side other[2] = {{"attention with the convolution", acc[1], loss[1]},
                               {"KDA then NoPE attention", acc[2], loss[2]}};
    for (int k = 0; k < 2; k++) {
        lab_verdict v;
        lab_verdict_apply(&other[k], &nope, seeds, x.seed, no_recall, &v);
        lab_verdict_print(stdout, "8 pairs", &other[k], &nope, &v);
    }
    if (!full)
        printf("  reduced sweep; see make run FULL=1\n");
    return 0;
}
