/*
 * 24_grid — trained models: the chapter's grid as a factorial ablation.
 * {no delta rule, delta rule} x {no decay, a decay per head, one per key
 * channel}: linear attention, simple GLA, GLA, DeltaNet, Gated DeltaNet,
 * KDA, each trained on Zoology's MQAR, on overwrite and on recent, to tell
 * what the delta rule buys at each decay from what the decay buys with and
 * without the delta rule (REFERENCE.md, the grid; lib/core/mechanisms.c).
 *
 * Each (task, mixer) is two blocks of D = 2d, H = 2, trained at every
 * learning rate and seed; the rate with the best mean accuracy is kept (the
 * Zoology protocol), and each effect is a comparison by the verdict rule
 * (verdict.h: paired by seed, a 95 % t interval, 8 seeds or more):
 *   the delta rule     DeltaNet - linear attention, Gated DeltaNet - simple
 *                      GLA, KDA - GLA  (one per decay column)
 *   a decay per head   simple GLA - linear attention, Gated DeltaNet - DeltaNet
 *   a decay per key    GLA - linear attention, KDA - DeltaNet
 *   per key channel    GLA - simple GLA, KDA - Gated DeltaNet  (finer than
 *                      one per head, without and with the delta rule)
 * Tasks (layouts in lib/kdalab_mqar.h and REFERENCE.md): zoology (Zoology's
 * multiquery_ar, P = T/8 pairs) and overwrite (P = T/8 pairs, P/2 bound
 * again, the latest value asked) at T, and recent (more pairs than a head's
 * d x d state holds, only the last W asked) at twice T.
 *
 * Reduced (make run): GLA and KDA (the delta rule at a per-channel decay),
 * d = 16, T = 32, recent at 64 (24 pairs, 4 asked), vocabulary 65, one
 * seed, lr 3e-3, 300 steps of 16: the pipeline, not a verdict. Full
 * (KDALAB_FULL=1): the six mixers at experiment 22's regime, d = 32, T = 64
 * (zoology 8 pairs; overwrite 8 pairs, 4 bound again), recent at T = 128 (48
 * pairs, 8 asked), vocabulary 129 with Zoology's split, lr 1e-3 and 3e-3,
 * seeds 1-8, 3,000 steps of 32: 288 models (run them as jobs,
 * experiments/README.md "A sweep as jobs"). At 22's measured cost of a
 * 32:64:3000 model (245 s on average with 16 at a time on a 16-CPU Xeon)
 * and about twice that at T = 128, the full sweep is about 94,000
 * core-seconds at that load: about 100 minutes on 16 such cores, in
 * commands of bounded length resumed from the job ledgers.
 *
 * --tasks names a subset (zoology,overwrite,recent by default): its tables
 * and verdicts alone, from the same ledgers (a model's ledger key is its
 * configuration; a subset's job list is numbered on its own).
 *
 * Output (DIR = --out): 24_grid.tsv, one row per model, and
 * 24_grid_summary.tsv, one row per (task, mixer) at its best rate.
 */

#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_LR 4
#define MAX_SEEDS 16
#define N_MIXERS 6
#define N_TASKS 3

/* The grid, row by row: no delta rule, then the delta rule; columns no
 * decay, per head, per key channel. */
static const char *const MIXERS[N_MIXERS] = {"linear_attention", "simple_gla", "gla",
                                             "deltanet", "gated_deltanet", "kda"};
static const char *const NAMES[N_MIXERS] = {"linear attention", "simple GLA", "GLA",
                                            "DeltaNet", "Gated DeltaNet", "KDA"};
enum { LINEAR, SIMPLE_GLA, GLA, DELTANET, GATED_DELTANET, KDA };

/* One effect: a mixer against the one it differs from by one property. */
static const struct {
    size_t a, b;
    const char *what;
} EFFECTS[] = {{DELTANET, LINEAR, "the delta rule, no decay"},
               {GATED_DELTANET, SIMPLE_GLA, "the delta rule, a decay per head"},
               {KDA, GLA, "the delta rule, a decay per key channel"},
               {SIMPLE_GLA, LINEAR, "a decay per head, no delta rule"},
               {GATED_DELTANET, DELTANET, "a decay per head, the delta rule"},
               {GLA, LINEAR, "a decay per key channel, no delta rule"},
               {KDA, DELTANET, "a decay per key channel, the delta rule"},
               {GLA, SIMPLE_GLA, "per key channel over per head, no delta rule"},
               {KDA, GATED_DELTANET, "per key channel over per head, the delta rule"}};
#define N_EFFECTS (sizeof EFFECTS / sizeof EFFECTS[0])

/* One task of the sweep. */
typedef struct {
    kdalab_mqar_task task;
    size_t T, P, updates, recent;
} task_spec;

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "24_grid",
             "the grid as a factorial ablation: what the delta rule and the decay each buy");
    const int full = lab_full();
    size_t d = full ? 32 : 16, T = full ? 64 : 32, steps = full ? 3000 : 300;
    size_t batch = full ? 32 : 16, vocab = full ? 129 : 65, seeds = full ? 8 : 1, test = 512;
    const char *lrs_s = full ? "1e-3,3e-3" : "3e-3", *tasks_s = "zoology,overwrite,recent";
    lab_flag_size(&x, "d", &d, "head dimension (two heads: D = 2d)");
    lab_flag_size(&x, "T", &T, "tokens per sequence of zoology and overwrite (recent: 2T)");
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "batch", &batch, "sequences per step");
    lab_flag_size(&x, "vocab", &vocab, "vocabulary (Zoology's split)");
    lab_flag_string(&x, "lrs", &lrs_s, "peak learning rates, comma-separated");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (task, mixer, lr), from --seed on");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_flag_string(&x, "tasks", &tasks_s, "the tasks to run and tabulate, comma-separated");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    double lrs[MAX_LR];
    const size_t n_lr = lab_parse_list(lrs_s, lrs, MAX_LR);
    if (!n_lr) {
        fprintf(stderr, "%s: --lrs %s: want 1 .. %d rates\n", x.name, lrs_s, MAX_LR);
        return 2;
    }
    const size_t P = T / 8, Pr = 3 * T / 4; /* recent: 2T tokens, 3T/4 pairs */
    const task_spec tasks[N_TASKS] = {{KDALAB_MQAR_ZOOLOGY, T, P, 0, 0},
                                      {KDALAB_MQAR_OVERWRITE, T, P, P / 2, 0},
                                      {KDALAB_MQAR_RECENT, 2 * T, Pr, 0, Pr / 6}};
    const char *const task_names[N_TASKS] = {kdalab_mqar_task_name(tasks[0].task),
                                             kdalab_mqar_task_name(tasks[1].task),
                                             kdalab_mqar_task_name(tasks[2].task)};
    int use[N_TASKS]; /* the tasks --tasks names */
    lab_parse_names(&x, "tasks", tasks_s, task_names, N_TASKS, use);
    static const size_t ms_full[N_MIXERS] = {LINEAR, SIMPLE_GLA, GLA, DELTANET, GATED_DELTANET,
                                             KDA},
                        ms_reduced[] = {GLA, KDA};
    const size_t *ms = full ? ms_full : ms_reduced, n_ms = full ? N_MIXERS : 2;
#define SPEC(it, m, il, sd)                                                                       \
    ((lab_mqar_spec){.mixers = MIXERS[m], .L = 2, .D = 2 * d, .H = 2, .conv = 1,                   \
                     .T = tasks[it].T, .P = tasks[it].P, .updates = tasks[it].updates,             \
                     .recent = tasks[it].recent, .vocab = vocab, .batch = batch,                   \
                     .steps = steps, .test = test, .lr = lrs[il], .seed = x.seed + (sd),           \
                     .task = tasks[it].task, .split = LAB_SPLIT_ZOOLOGY})
    for (size_t it = 0; it < N_TASKS; it++) /* refused now, not after hours */
        for (size_t j = 0; j < n_ms && use[it]; j++)
            lab_mqar_check(&x, &SPEC(it, ms[j], 0, 0));

    static const char *const cols[] = {LAB_MQAR_COLUMNS, "task", "the task", NULL};
    FILE *f = lab_tsv_open(&x, "24_grid", cols,
                           "%s sweep (%s): d=%zu H=2 T=%zu steps=%zu batch=%zu vocab=%zu "
                           "seeds=%zu test=%zu lrs=%s", full ? "full" : "reduced",
                           lab_mqar_precision(&x), d, T, steps, batch, vocab, seeds, test, lrs_s);
    static const char *const scols[] = {
        "task", "the task", "seq_len", "tokens per sequence", "mixer", "the mixer of both blocks",
        "lr", "the learning rate with the best mean accuracy", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)",
        "stuck", "seeds stuck at the no-recall loss", "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "24_grid_summary", scols, "%s sweep: d=%zu steps=%zu seeds=%zu",
                            full ? "full" : "reduced", d, steps, seeds);
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
                    lab_mqar_row_extra(f, MIXERS[ms[j]], &s, &r,
                                       kdalab_mqar_task_name(tasks[it].task));
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
        printf("  %-9s T = %-4zu", kdalab_mqar_task_name(tasks[it].task), tasks[it].T);
        for (size_t j = 0; j < n_ms; j++) {
            const size_t m = ms[j];
            double mean;
            const size_t il = lab_best_lr(acc[it][m][0], MAX_SEEDS, n_lr, seeds, &mean);
            best[it][m] = il;
            const double sdv = seeds > 1 ? gsl_stats_sd(acc[it][m][il], 1, seeds) : 0;
            const size_t stuck = lab_stuck_count(loss[it][m][il], seeds, no_recall);
            fprintf(fs, "%s\t%zu\t%s\t%g\t%.4f\t%.4f\t%zu\t%zu\n",
                    kdalab_mqar_task_name(tasks[it].task), tasks[it].T, MIXERS[m], lrs[il], mean,
                    sdv, stuck, seeds);
            printf("  %s %.3f ± %.3f", NAMES[m], mean, sdv);
        }
        printf("\n");
    }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);
    /* each effect by the verdict rule, where the sweep has both mixers */
    int present[N_MIXERS] = {0};
    for (size_t j = 0; j < n_ms; j++)
        present[ms[j]] = 1;
    for (size_t it = 0; it < N_TASKS; it++) {
        if (!use[it])
            continue;
        const lab_mqar_spec at = SPEC(it, KDA, 0, 0);
        const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
        for (size_t e = 0; e < N_EFFECTS; e++) {
            const size_t a = EFFECTS[e].a, b = EFFECTS[e].b;
            if (!present[a] || !present[b])
                continue;
            const lab_side A = {NAMES[a], acc[it][a][best[it][a]], loss[it][a][best[it][a]]},
                           B = {NAMES[b], acc[it][b][best[it][b]], loss[it][b][best[it][b]]};
            char what[96];
            snprintf(what, sizeof what, "%s: %s", kdalab_mqar_task_name(tasks[it].task),
                     EFFECTS[e].what);
            lab_verdict v;
            lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
            lab_verdict_print(stdout, what, &A, &B, &v);
        }
    }
    if (!full)
        printf("  reduced sweep: one seed, a short run; see make run FULL=1\n");
    return 0;
}
