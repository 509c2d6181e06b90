/*
 * 23_report_tasks — trained models on the Kimi Linear report's other
 * synthetic tasks: the palindrome, the stack, and MQAR at a longer T, for
 * the lineage (attention, linear attention, DeltaNet, Gated DeltaNet, KDA).
 *
 * The report shows KDA ahead on all three (palindrome: reverse a string;
 * MQAR; stack: the value on top of one of many stacks) as T grows. Each task
 * here (layouts in lib/kdalab_mqar.h and REFERENCE.md):
 *   palindrome   N = T/2 tokens of an alphabet of vocab - 1, then the same
 *                backwards, every reversed token scored
 *   stack        --stacks S stacks, T/2 operations of which --pushes are
 *                pushes, each pop's value scored
 *   mqar         Zoology's multiquery_ar with Zoology's vocabulary split,
 *                --pairs pairs at a T twice experiment 14's
 * Each (task, mixer) is two blocks of D = 2d, H = 2, trained at every
 * learning rate and seed; the rate with the best mean accuracy is kept (the
 * Zoology protocol), and the lineage's steps are judged by the verdict rule
 * (verdict.h: paired by seed, a 95 % t interval, 8 seeds or more): linear
 * attention -> DeltaNet -> Gated DeltaNet -> KDA, attention against KDA, and
 * KDA against DeltaNet (what the per-key decay adds to the delta rule).
 *
 * Reduced (make run): DeltaNet and KDA, d = 16, palindrome T = 16
 * (alphabet 8), stack T = 24 (2 stacks, 8 pushes), mqar T = 32 (4 pairs,
 * vocabulary 65), one seed, lr 3e-3, 300 steps of 16: the pipeline, not a
 * verdict. Full (KDALAB_FULL=1): all five mixers, d = 32, palindrome T = 64
 * (alphabet 16), stack T = 64 (4 stacks, 20 pushes and 12 pops, 16 values),
 * mqar T = 128 (16 pairs, vocabulary 129), lr 1e-3 and 3e-3, seeds 1-8,
 * 3,000 steps of 32 (experiment 22's regime: d = 32, 3,000 steps, where
 * Gated DeltaNet and KDA train): 240 models (run them as jobs,
 * experiments/README.md "A sweep as jobs"); --d, --steps, --lrs and --seeds
 * move it. Measured 16 at a time on a 16-CPU Intel Xeon (family 6 model
 * 207): 251 s a model on average (102-606 s), so the full sweep takes about
 * 63 minutes with `parallel -j16` there.
 *
 * --tasks names a subset (palindrome,stack,mqar by default): its tables and
 * verdicts alone (a subset's job list is numbered on its own, as 24's: run
 * it in its own --out, the full sweep's ledgers concatenated into its
 * mqar_models.tsv; experiments/README.md #e23 shows the 16-seed MQAR run).
 *
 * Output (DIR = --out): 23_report_tasks.tsv, one row per model, and
 * 23_report_summary.tsv, one row per (task, mixer) at its best rate.
 */
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_LR 4
#define MAX_SEEDS 16
#define N_MIXERS 5
#define N_TASKS 3

static const char *const MIXERS[N_MIXERS] = {"attention", "linear_attention", "deltanet",
                                             "gated_deltanet", "kda"};
static const char *const NAMES[N_MIXERS] = {"attention", "linear attention", "DeltaNet",
                                            "Gated DeltaNet", "KDA"};
enum { ATTENTION, LINEAR, DELTANET, GATED_DELTANET, KDA };

/* One task of the sweep. */
typedef struct {
    const char *name; /* as printed */
    kdalab_mqar_task task;
    size_t T, P, vocab, stacks;
} task_spec;

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "23_report_tasks",
             "the lineage on the Kimi Linear report's palindrome, stack and MQAR at longer T");
    const int full = lab_full();
    size_t d = full ? 32 : 16, steps = full ? 3000 : 300, batch = full ? 32 : 16;
    size_t seeds = full ? 8 : 1, test = 512, train_set = 0;
    const char *lrs_s = full ? "1e-3,3e-3" : "3e-3", *tasks_s = "palindrome,stack,mqar";
    lab_flag_size(&x, "d", &d, "head dimension (two heads: D = 2d)");
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "batch", &batch, "sequences per step");
    lab_flag_string(&x, "lrs", &lrs_s, "peak learning rates, comma-separated");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (task, mixer, lr), from --seed on");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_flag_size(&x, "train-set", &train_set, "a fixed training set of N sequences (0: fresh)");
    lab_flag_string(&x, "tasks", &tasks_s, "the tasks to run and tabulate, comma-separated");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    double lrs[MAX_LR];
    const size_t n_lr = lab_parse_list(lrs_s, lrs, MAX_LR);
    if (!n_lr) {
        fprintf(stderr, "%s: --lrs %s: want 1 .. %d rates\n", x.name, lrs_s, MAX_LR);
        return 2;
    }
    const task_spec tasks_full[N_TASKS] = {
        {"palindrome", KDALAB_MQAR_PALINDROME, 64, 32, 17, 0},
        {"stack", KDALAB_MQAR_STACK, 64, 20, 25, 4},
        {"mqar", KDALAB_MQAR_ZOOLOGY, 128, 16, 129, 0}};
    const task_spec tasks_reduced[N_TASKS] = {
        {"palindrome", KDALAB_MQAR_PALINDROME, 16, 8, 9, 0},
        {"stack", KDALAB_MQAR_STACK, 24, 8, 13, 2},
        {"mqar", KDALAB_MQAR_ZOOLOGY, 32, 4, 65, 0}};
    const task_spec *tasks = full ? tasks_full : tasks_reduced;
    const char *const task_names[N_TASKS] = {tasks[0].name, tasks[1].name, tasks[2].name};
    int use[N_TASKS]; /* the tasks --tasks names */
    lab_parse_names(&x, "tasks", tasks_s, task_names, N_TASKS, use);
    static const size_t ms_full[N_MIXERS] = {ATTENTION, LINEAR, DELTANET, GATED_DELTANET, KDA},
                        ms_reduced[] = {DELTANET, KDA};
    const size_t *ms = full ? ms_full : ms_reduced, n_ms = full ? N_MIXERS : 2;
#define SPEC(it, m, il, sd)                                                                       \
    ((lab_mqar_spec){.mixers = MIXERS[m], .L = 2, .D = 2 * d, .H = 2, .conv = 1,                   \
                     .T = tasks[it].T, .P = tasks[it].P, .vocab = tasks[it].vocab,                 \
                     .batch = batch, .steps = steps, .test = test, .lr = lrs[il],                  \
                     .seed = x.seed + (sd), .task = tasks[it].task, .stacks = tasks[it].stacks,    \
                     .split = LAB_SPLIT_ZOOLOGY, .train_set = train_set})
    for (size_t it = 0; it < N_TASKS; it++) /* refused now, not after hours */
        for (size_t j = 0; j < n_ms && use[it]; j++)
            lab_mqar_check(&x, &SPEC(it, ms[j], 0, 0));

    static const char *const cols[] = {LAB_MQAR_COLUMNS, "task", "the task", NULL};
    FILE *f = lab_tsv_open(&x, "23_report_tasks", cols,
                           "%s sweep (%s): d=%zu H=2 steps=%zu batch=%zu seeds=%zu test=%zu "
                           "train_set=%zu lrs=%s tasks=%s", full ? "full" : "reduced",
                           lab_mqar_precision(&x), d, steps, batch, seeds, test, train_set, lrs_s,
                           tasks_s);
    static const char *const scols[] = {
        "task", "the task", "seq_len", "tokens per sequence", "mixer", "the mixer of both blocks",
        "lr", "the learning rate with the best mean accuracy", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)",
        "stuck", "seeds stuck at the no-recall loss", "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "23_report_summary", scols,
                            "%s sweep: d=%zu steps=%zu seeds=%zu tasks=%s",
                            full ? "full" : "reduced", d, steps, seeds, tasks_s);
    static double acc[N_TASKS][N_MIXERS][MAX_LR][MAX_SEEDS], loss[N_TASKS][N_MIXERS][MAX_LR][MAX_SEEDS];
    const size_t total = (size_t)(use[0] + use[1] + use[2]) * n_ms * n_lr * seeds;
    size_t done = 0;
    /* seeds outermost: a sweep cut short still has whole tables for its first seeds */
    for (size_t sd = 0; sd < seeds; sd++)
        for (size_t it = 0; it < N_TASKS; it++)
            for (size_t j = 0; j < n_ms && use[it]; j++)
                for (size_t il = 0; il < n_lr; il++) {
                    lab_mqar_spec s = SPEC(it, ms[j], il, sd);
                    lab_mqar_result r;
                    lab_mqar_train(&x, &s, 0, &r);
                    lab_mqar_row_extra(f, MIXERS[ms[j]], &s, &r, tasks[it].name);
                    acc[it][ms[j]][il][sd] = r.accuracy;
                    loss[it][ms[j]][il][sd] = r.loss;
                    lab_progress(&x, "models", ++done, total);
                }
    lab_mqar_jobs_done(&x);

    printf("%s (%s sweep; two blocks, D = %zu, H = 2, d = %zu, %zu steps, %zu seed(s)): test "
           "accuracy, mean%s at the best learning rate\n",
           x.name, full ? "full" : "reduced", 2 * d, d, steps, seeds, seeds > 1 ? " ± sd" : "");
    size_t best[N_TASKS][N_MIXERS] = {{0}};
    for (size_t it = 0; it < N_TASKS; it++) {
        if (!use[it])
            continue;
        const lab_mqar_spec at = SPEC(it, KDA, 0, 0);
        const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
        printf("  %-10s T = %-4zu", tasks[it].name, tasks[it].T);
        for (size_t j = 0; j < n_ms; j++) {
            const size_t m = ms[j];
            double mean;
            const size_t il = lab_best_lr(acc[it][m][0], MAX_SEEDS, n_lr, seeds, &mean);
            best[it][m] = il;
            const double sdv = seeds > 1 ? gsl_stats_sd(acc[it][m][il], 1, seeds) : 0;
            const size_t stuck = lab_stuck_count(loss[it][m][il], seeds, no_recall);
            fprintf(fs, "%s\t%zu\t%s\t%g\t%.4f\t%.4f\t%zu\t%zu\n", tasks[it].name, tasks[it].T,
                    MIXERS[m], lrs[il], mean, sdv, stuck, seeds);
            printf("  %s %.3f ± %.3f", NAMES[m], mean, sdv);
        }
        printf("\n");
    }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);
    /* the lineage's steps, attention against KDA and KDA against DeltaNet,
     * by the verdict rule (the reduced sweep has only the last) */
    int present[N_MIXERS] = {0};
    for (size_t j = 0; j < n_ms; j++)
        present[ms[j]] = 1;
    const size_t cmp[5][2] = {{DELTANET, LINEAR}, {GATED_DELTANET, DELTANET},
                              {KDA, GATED_DELTANET}, {ATTENTION, KDA}, {KDA, DELTANET}};
    for (size_t it = 0; it < N_TASKS; it++) {
        if (!use[it])
            continue;
        const lab_mqar_spec at = SPEC(it, KDA, 0, 0);
        const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
        for (size_t c = 0; c < 5; c++) {
            const size_t a = cmp[c][0], b = cmp[c][1];
            if (!present[a] || !present[b])
                continue;
            const lab_side A = {NAMES[a], acc[it][a][best[it][a]], loss[it][a][best[it][a]]},
                           B = {NAMES[b], acc[it][b][best[it][b]], loss[it][b][best[it][b]]};
            lab_verdict v;
            lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
            lab_verdict_print(stdout, tasks[it].name, &A, &B, &v);
        }
    }
    if (!full)
        printf("  reduced sweep: one seed, a short run; see make run FULL=1\n");
    return 0;
}
