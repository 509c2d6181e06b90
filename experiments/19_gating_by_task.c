/*
 * 19_gating_by_task — trained models: when does gating pay? The five mixers
 * at one state size on a recall task that never needs to forget and on two
 * that do.
 *
 * The chapter's case for KDA is about forgetting: a decay frees the state
 * for what matters now, and a decay per channel lets one head keep some
 * facts and drop others. Experiment 14's task (MQAR) rewards none of that:
 * every pair stays relevant to the end, so any decay only loses information
 * (there KDA trails DeltaNet). Three tasks of the same family (layouts in
 * lib/kdalab_mqar.h and REFERENCE.md), each a two-block model of one mixer,
 * D = 32, H = 2 (d = 16: every linear mixer's state is 2 heads of 16 x 16):
 *   zoology    Zoology's multiquery_ar layout: P pairs, every key asked once
 *   overwrite  Zoology's forgetting_mqar: P pairs, then U keys bound again;
 *              the answer is the latest value
 *   recent     more pairs than the state holds (P > d), only the last W asked
 * Each (task, mixer) is trained at every learning rate and seed; the rate
 * with the best mean accuracy is kept (the Zoology protocol, as in 14).
 * Gating pays on a task where Gated DeltaNet or KDA is ahead of DeltaNet
 * (the same delta rule without a decay) by the verdict rule (verdict.h:
 * paired by seed, a 95 % t interval, 8 seeds or more). The task layouts
 * are Zoology's, with kdalab's even vocabulary split (64 keys, 64 values at
 * 129; Zoology's own is 63 and 65).
 *
 * Reduced (make run): DeltaNet and KDA only (the delta rule without a decay
 * and with one per channel), T = 48, vocabulary 65, zoology P = 8, overwrite P = 8,
 * U = 4, recent P = 20, W = 4; one seed, lr 3e-3, 600 steps of 16: the
 * pipeline and a direction, not a verdict. Full (KDALAB_FULL=1): T = 128,
 * vocabulary 129, zoology P = 16, overwrite P = 16, U = 8, recent P = 48,
 * W = 8; seeds 1-3, lr 1e-3 and 3e-3, 1000 steps of 32 (90 models: run them
 * as jobs, experiments/README.md "A sweep as jobs").
 *
 * Output (DIR = --out): 19_gating_by_task.tsv, one row per model, and
 * 19_gating_summary.tsv, one row per (task, mixer) at its best learning rate.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_SEEDS 16
#define MAX_LR 2
#define N_MIXERS 5
#define N_TASKS 3

/* the full sweep's mixers; the reduced one runs DeltaNet and KDA */
static const char *const MIXERS[N_MIXERS] = {"attention", "linear_attention", "deltanet",
                                             "gated_deltanet", "kda"};
enum { DELTANET = 2, GATED_DELTANET = 3, KDA = 4 };

/* One task of the sweep: its layout and sizes. */
typedef struct {
    kdalab_mqar_task task;
    size_t P, updates, recent;
} task_spec;

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "19_gating_by_task",
             "trained recall by mixer on tasks with and without forgetting");
    const int full = lab_full();
    size_t T = full ? 128 : 48, vocab = full ? 129 : 65, steps = full ? 1000 : 600;
    size_t batch = full ? 32 : 16, seeds = full ? 3 : 1, test = 512;
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (task, mixer, lr), from --seed on");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    const task_spec tasks_reduced[N_TASKS] = {{KDALAB_MQAR_ZOOLOGY, 8, 0, 0},
                                              {KDALAB_MQAR_OVERWRITE, 8, 4, 0},
                                              {KDALAB_MQAR_RECENT, 20, 0, 4}};
    const task_spec tasks_full[N_TASKS] = {{KDALAB_MQAR_ZOOLOGY, 16, 0, 0},
                                           {KDALAB_MQAR_OVERWRITE, 16, 8, 0},
                                           {KDALAB_MQAR_RECENT, 48, 0, 8}};
    const task_spec *tasks = full ? tasks_full : tasks_reduced;
    const double lrs_reduced[] = {3e-3}, lrs_full[MAX_LR] = {1e-3, 3e-3};
    const double *lrs = full ? lrs_full : lrs_reduced;
    const size_t n_lr = full ? 2 : 1;
    /* the mixers this sweep trains, as indices of MIXERS */
    static const size_t ms_full[N_MIXERS] = {0, 1, DELTANET, GATED_DELTANET, KDA},
                        ms_reduced[] = {DELTANET, KDA};
    const size_t *ms = full ? ms_full : ms_reduced, n_ms = full ? N_MIXERS : 2;

    /* every (task, mixer) at its sizes: refused now, not after hours */
    for (size_t it = 0; it < N_TASKS; it++)
        for (size_t j = 0; j < n_ms; j++)
            lab_mqar_check(&x, &(lab_mqar_spec){
                                   .mixers = MIXERS[ms[j]], .L = 2, .D = 32, .H = 2, .conv = 1,
                                   .T = T, .P = tasks[it].P, .vocab = vocab, .batch = batch,
                                   .steps = steps, .test = test, .lr = lrs[0], .seed = x.seed,
                                   .task = tasks[it].task, .updates = tasks[it].updates,
                                   .recent = tasks[it].recent});
    static const char *const cols[] = {LAB_MQAR_COLUMNS, "task",
                                       "the task (kdalab_mqar_task_name)/updates/recent", NULL};
    FILE *f = lab_tsv_open(&x, "19_gating_by_task", cols,
                           "%s sweep (%s): D=32 H=2 T=%zu vocab=%zu steps=%zu batch=%zu "
                           "seeds=%zu test=%zu", full ? "full" : "reduced",
                           lab_mqar_precision(&x), T, vocab, steps, batch, seeds, test);
    static const char *const scols[] = {
        "task", "the task", "mixer", "the mixer of both blocks", "pairs", "key-value pairs",
        "lr", "the learning rate with the best mean accuracy", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)", "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "19_gating_summary", scols,
                            "%s sweep: D=32 H=2 T=%zu vocab=%zu seeds=%zu",
                            full ? "full" : "reduced", T, vocab, seeds);
    static double acc[N_TASKS][N_MIXERS][MAX_LR][MAX_SEEDS], loss[N_TASKS][N_MIXERS][MAX_LR][MAX_SEEDS];
    const size_t total = N_TASKS * n_ms * n_lr * seeds;
    size_t done = 0;
    /* seeds outermost: a sweep cut short still has whole tables for its first seeds */
    for (size_t sd = 0; sd < seeds; sd++)
        for (size_t it = 0; it < N_TASKS; it++)
            for (size_t j = 0; j < n_ms; j++)
                for (size_t il = 0; il < n_lr; il++) {
                    const size_t m = ms[j];
                    const task_spec *t = &tasks[it];
                    lab_mqar_spec s = {.mixers = MIXERS[m], .L = 2, .D = 32, .H = 2, .conv = 1,
                                       .T = T, .P = t->P, .vocab = vocab, .batch = batch,
                                       .steps = steps, .test = test, .lr = lrs[il],
                                       .seed = x.seed + sd, .task = t->task,
                                       .updates = t->updates, .recent = t->recent};
                    lab_mqar_result r;
                    lab_mqar_train(&x, &s, 0, &r);
                    char task[64];
                    snprintf(task, sizeof task, "%s/%zu/%zu", kdalab_mqar_task_name(t->task),
                             t->updates, t->recent);
                    lab_mqar_row_extra(f, MIXERS[m], &s, &r, task);
                    acc[it][m][il][sd] = r.accuracy;
                    loss[it][m][il][sd] = r.loss;
                    lab_progress(&x, "models", ++done, total);
                }
    lab_mqar_jobs_done(&x);
    double mean[N_TASKS][N_MIXERS] = {{0}}, sdev[N_TASKS][N_MIXERS] = {{0}};
    size_t best[N_TASKS][N_MIXERS] = {{0}};
    for (size_t it = 0; it < N_TASKS; it++)
        for (size_t j = 0; j < n_ms; j++) {
            const size_t m = ms[j];
            const size_t il = lab_best_lr(acc[it][m][0], MAX_SEEDS, n_lr, seeds, &mean[it][m]);
            best[it][m] = il;
            sdev[it][m] = seeds > 1 ? gsl_stats_sd(acc[it][m][il], 1, seeds) : 0;
            fprintf(fs, "%s\t%s\t%zu\t%g\t%.4f\t%.4f\t%zu\n", kdalab_mqar_task_name(tasks[it].task),
                    MIXERS[m], tasks[it].P, lrs[il], mean[it][m], sdev[it][m], seeds);
        }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);

    printf("%s (%s sweep; D = 32, H = 2, d = 16, T = %zu, %zu steps, %zu seed(s)): test "
           "accuracy, mean%s at the best learning rate\n",
           x.name, full ? "full" : "reduced", T, steps, seeds, seeds > 1 ? " ± sd" : "");
    printf("  %-16s", "task");
    for (size_t j = 0; j < n_ms; j++)
        printf("  %-16s", MIXERS[ms[j]]);
    printf("\n");
    for (size_t it = 0; it < N_TASKS; it++) {
        printf("  %-16s", kdalab_mqar_task_name(tasks[it].task));
        for (size_t j = 0; j < n_ms; j++)
            printf("  %.3f ± %-8.3f", mean[it][ms[j]], sdev[it][ms[j]]);
        printf("\n");
    }
    /* the verdict per task by the rule (verdict.h), each mixer at its best
     * learning rate: each gated delta rule against the ungated one
     * (DeltaNet), and KDA against Gated DeltaNet (the reduced sweep has KDA
     * and DeltaNet only) */
    static const char *const names[N_MIXERS] = {"attention", "linear attention", "DeltaNet",
                                                "Gated DeltaNet", "KDA"};
    const size_t cmp[3][2] = {{GATED_DELTANET, DELTANET}, {KDA, DELTANET}, {KDA, GATED_DELTANET}};
    for (size_t it = 0; it < N_TASKS; it++) {
        const task_spec *t = &tasks[it];
        const lab_mqar_spec at = {.mixers = "kda", .L = 2, .D = 32, .H = 2, .conv = 1, .T = T,
                                  .P = t->P, .vocab = vocab, .task = t->task,
                                  .updates = t->updates, .recent = t->recent};
        const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
        for (int c = full ? 0 : 1; c < (full ? 3 : 2); c++) {
            const size_t a = cmp[c][0], b = cmp[c][1], la = best[it][a], lb = best[it][b];
            const lab_side A = {names[a], acc[it][a][la], loss[it][a][la]},
                           B = {names[b], acc[it][b][lb], loss[it][b][lb]};
            lab_verdict v;
            lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
            lab_verdict_print(stdout, kdalab_mqar_task_name(t->task), &A, &B, &v);
        }
    }
    if (!full)
        printf("  reduced sweep: the direction only; see make run FULL=1\n");
    return 0;
}
