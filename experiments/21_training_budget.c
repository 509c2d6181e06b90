/*
 * 21_training_budget — trained models: does KDA catch up with more training,
 * and where? Test accuracy against the training budget for DeltaNet, Gated
 * DeltaNet and KDA, at two head dimensions, on kdalab's dense recall layout
 * and on a task that needs forgetting.
 *
 * Experiments 14 and 15 train every model for 1,000 steps, and KDA trails
 * there while still improving (15's probe: 3,000 steps lift it from 0.29 d to
 * 0.55 d pairs at 95 %). Here each (task, d, mixer) is trained at several
 * budgets, each a run of its own (warm-up and cosine decay over its own
 * steps), and each run also records its steps to 95 %: the first step whose
 * mean training-batch accuracy over the last 50 steps reached 0.95 (a batch
 * is fresh data, so that is the test accuracy before the step's update).
 *
 * Tasks (lib/kdalab_mqar.h): dense (14's: vocabulary 129, T = 64, 24 pairs,
 * 16 of them asked) and overwrite (Zoology's forgetting MQAR at T = 64: 12
 * pairs, 6 keys bound again). Models: two blocks, D = 32, d = 16 (H = 2) and
 * d = 32 (H = 1), lr 3e-3 (14's best rate for every mixer), batches of 32.
 *
 * Reduced (make run): dense task only at vocabulary 65, T = 40, 4 pairs,
 * DeltaNet and KDA at d = 16, budgets 200 and 600 steps of 16, one seed: the
 * pipeline, not a verdict. Full (KDALAB_FULL=1): budgets 1,000, 3,000 and
 * 10,000 steps, seeds 1-3: 108 models, most of the time in the 36 of 10,000
 * steps (run them as jobs: experiments/README.md "A sweep as jobs").
 *
 * At experiment 22's regime (--layout zoology): Zoology's MQAR (8 pairs) and
 * its overwrite (8 pairs, 4 bound again) at T = 64, Zoology's vocabulary
 * split of 129, two blocks of two heads of d = 32 (D = 64), the same
 * budgets: KDALAB_FULL=1 21_training_budget --layout zoology --seeds 8 is
 * 144 models, 48 of them 10,000 steps long.
 *
 * Output (DIR = --out): 21_training_budget.tsv, one row per model (with its
 * steps to 95 %), and 21_budget_summary.tsv, one row per (task, d, mixer,
 * budget): mean and sd of the test accuracy, and the steps to 95 % of the
 * seeds that reached it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_SEEDS 16

/* One task of the sweep: its layout and sizes. */
typedef struct {
    kdalab_mqar_task task;
    size_t T, P, updates, vocab;
} budget_task;

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "21_training_budget", "trained recall against the training budget");
    const int full = lab_full();
    size_t seeds = full ? 3 : 1, test = 512;
    const char *layout = "dense";
    lab_flag_string(&x, "layout", &layout,
                    "dense (kdalab's dense layout and overwrite, D = 32, d = 16 and 32) or "
                    "zoology (Zoology's MQAR and overwrite at 22's regime, d = 32, D = 64)");
    lab_flag_size(&x, "seeds", &seeds, "seeds per model, from --seed on");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    const int zoo = strcmp(layout, "zoology") == 0;
    if (!zoo && strcmp(layout, "dense") != 0) {
        fprintf(stderr, "%s: --layout %s: expected dense or zoology\n", x.name, layout);
        return 2;
    }
    static const char *const mixers_full[] = {"deltanet", "gated_deltanet", "kda"},
                             *const mixers_reduced[] = {"deltanet", "kda"};
    const char *const *mixers = full ? mixers_full : mixers_reduced;
    const size_t n_mix = full ? 3 : 2;
    const size_t ds_full[] = {16, 32}, ds_reduced[] = {16}, ds_zoo[] = {32};
    const size_t *ds = zoo ? ds_zoo : full ? ds_full : ds_reduced, n_d = full && !zoo ? 2 : 1;
    const size_t budgets_full[] = {1000, 3000, 10000}, budgets_reduced[] = {200, 600};
    const size_t *budgets = full ? budgets_full : budgets_reduced, n_b = full ? 3 : 2;
    const budget_task tasks_full[] = {{KDALAB_MQAR_DENSE, 64, 24, 0, 129},
                                      {KDALAB_MQAR_OVERWRITE, 64, 12, 6, 129}},
                      tasks_reduced[] = {{KDALAB_MQAR_DENSE, 40, 4, 0, 65}},
                      tasks_zoo[] = {{KDALAB_MQAR_ZOOLOGY, 64, 8, 0, 129},
                                     {KDALAB_MQAR_OVERWRITE, 64, 8, 4, 129}},
                      tasks_zoo_reduced[] = {{KDALAB_MQAR_ZOOLOGY, 32, 4, 0, 65}};
    const budget_task *tasks = zoo ? (full ? tasks_zoo : tasks_zoo_reduced)
                                   : (full ? tasks_full : tasks_reduced);
    const size_t n_t = full ? 2 : 1, batch = full ? 32 : 16;
    /* the width: D = 32 with d = 16 or 32 (H = 2 or 1); at 22's regime two heads of d */
#define D_OF(id) (zoo ? 2 * ds[id] : 32)
#define H_OF(id) (zoo ? 2 : 32 / ds[id])
    const double lr = 3e-3;
#define SPEC(it, id, m, ib, sd)                                                                 \
    ((lab_mqar_spec){.mixers = mixers[m], .L = 2, .D = D_OF(id), .H = H_OF(id), .conv = 1,      \
                     .T = tasks[it].T, .P = tasks[it].P, .vocab = tasks[it].vocab,             \
                     .batch = batch, .steps = budgets[ib], .test = test, .lr = lr,             \
                     .seed = x.seed + (sd), .task = tasks[it].task,                            \
                     .updates = tasks[it].updates,                                             \
                     .split = zoo ? LAB_SPLIT_ZOOLOGY : LAB_SPLIT_EVEN})
    for (size_t it = 0; it < n_t; it++) /* refused now, not after hours */
        for (size_t id = 0; id < n_d; id++)
            for (size_t m = 0; m < n_mix; m++)
                lab_mqar_check(&x, &SPEC(it, id, m, n_b - 1, 0));

    static const char *const cols[] = {LAB_MQAR_COLUMNS, "task", "the task",
                                       "steps_to_95", "first step whose mean training-batch "
                                       "accuracy over 50 steps reached 0.95 (-1: never)", NULL};
    FILE *f = lab_tsv_open(&x, "21_training_budget", cols,
                           "%s sweep (%s): layout=%s D=%zu lr=%g batch=%zu seeds=%zu test=%zu",
                           full ? "full" : "reduced", lab_mqar_precision(&x), layout,
                           (size_t)D_OF(0), lr, batch, seeds, test);
    static const char *const scols[] = {
        "task", "the task", "d", "head dimension", "mixer", "the mixer of both blocks",
        "steps", "the training budget (optimiser steps)", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)",
        "s95_mean", "mean steps to 95 % of the seeds that reached it (-1: none did)",
        "s95_reached", "seeds that reached 95 % within the budget", "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "21_budget_summary", scols, "%s sweep: layout=%s D=%zu seeds=%zu",
                            full ? "full" : "reduced", layout, (size_t)D_OF(0), seeds);
    /* acc and steps to 95 % of (task, d, mixer, budget, seed) */
    static double acc[2][2][3][3][MAX_SEEDS], s95[2][2][3][3][MAX_SEEDS],
        loss[2][2][3][3][MAX_SEEDS];
    const size_t total = n_t * n_d * n_mix * n_b * seeds;
    size_t done = 0;
    /* seeds outermost: a sweep cut short still has whole tables for its first seeds */
    for (size_t sd = 0; sd < seeds; sd++)
        for (size_t it = 0; it < n_t; it++)
            for (size_t id = 0; id < n_d; id++)
                for (size_t m = 0; m < n_mix; m++)
                    for (size_t ib = 0; ib < n_b; ib++) {
                        lab_mqar_spec s = SPEC(it, id, m, ib, sd);
                        lab_mqar_result r;
                        lab_mqar_train(&x, &s, 0, &r);
                        char extra[96];
                        snprintf(extra, sizeof extra, "%s\t%ld",
                                 kdalab_mqar_task_name(tasks[it].task), r.steps_to_95);
                        lab_mqar_row_extra(f, mixers[m], &s, &r, extra);
                        acc[it][id][m][ib][sd] = r.accuracy;
                        loss[it][id][m][ib][sd] = r.loss;
                        s95[it][id][m][ib][sd] = (double)r.steps_to_95;
                        lab_progress(&x, "models", ++done, total);
                    }
    lab_mqar_jobs_done(&x);
    printf("%s (%s sweep; %s layout, D = %zu, lr %g, %zu seed(s)): test accuracy by training "
           "budget; steps to 95 %% (seeds that reached it)\n",
           x.name, full ? "full" : "reduced", layout, (size_t)D_OF(0), lr, seeds);
    for (size_t it = 0; it < n_t; it++)
        for (size_t id = 0; id < n_d; id++)
            for (size_t m = 0; m < n_mix; m++) {
                printf("  %-9s d = %-2zu %-15s", kdalab_mqar_task_name(tasks[it].task), ds[id],
                       mixers[m]);
                for (size_t ib = 0; ib < n_b; ib++) {
                    const double *a = acc[it][id][m][ib], *q = s95[it][id][m][ib];
                    const double mean = gsl_stats_mean(a, 1, seeds);
                    const double sdv = seeds > 1 ? gsl_stats_sd(a, 1, seeds) : 0;
                    double s_sum = 0;
                    size_t reached = 0;
                    for (size_t sd = 0; sd < seeds; sd++)
                        if (q[sd] >= 0)
                            s_sum += q[sd], reached++;
                    const double s_mean = reached ? s_sum / (double)reached : -1;
                    fprintf(fs, "%s\t%zu\t%s\t%zu\t%.4f\t%.4f\t%.0f\t%zu\t%zu\n",
                            kdalab_mqar_task_name(tasks[it].task), ds[id], mixers[m], budgets[ib],
                            mean, sdv, s_mean, reached, seeds);
                    printf("  %5zu steps %.3f ± %.3f", budgets[ib], mean, sdv);
                    if (reached)
                        printf(" (95 %% at %.0f, %zu/%zu)", s_mean, reached, seeds);
                }
                printf("\n");
            }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);
    /* KDA against DeltaNet and against Gated DeltaNet (the full sweep's) at
     * each (task, d, budget), by the verdict rule (verdict.h) */
    static const char *const names_full[] = {"DeltaNet", "Gated DeltaNet", "KDA"},
                             *const names_reduced[] = {"DeltaNet", "KDA"};
    const char *const *names = full ? names_full : names_reduced;
    const size_t kda = n_mix - 1;
    for (size_t it = 0; it < n_t; it++)
        for (size_t id = 0; id < n_d; id++)
            for (size_t ib = 0; ib < n_b; ib++) {
                const lab_mqar_spec at = SPEC(it, id, kda, ib, 0);
                const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
                char what[96];
                snprintf(what, sizeof what, "%s, d = %zu, %zu steps",
                         kdalab_mqar_task_name(tasks[it].task), ds[id], budgets[ib]);
                for (size_t m = 0; m < kda; m++) {
                    const lab_side A = {names[kda], acc[it][id][kda][ib], loss[it][id][kda][ib]},
                                   B = {names[m], acc[it][id][m][ib], loss[it][id][m][ib]};
                    lab_verdict v;
                    lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
                    lab_verdict_print(stdout, what, &A, &B, &v);
                }
            }
    if (!full)
        printf("  reduced sweep: the pipeline and the direction only; see make run FULL=1\n");
    return 0;
}
