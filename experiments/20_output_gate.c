/*
 * 20_output_gate — trained models: does experiment 14's order of KDA and
 * Gated DeltaNet on MQAR hold across the designs of the output gate and of
 * the short convolution's initialisation?
 *
 * Both linear mixers end in fla's gated output norm, o <- rmsnorm(o) *
 * act(z), and fla's two layers differ there: its KDA layer gates with a
 * sigmoid of a low-rank input (z = (x Wog) Wog2 + bog, rank d), its Gated
 * DeltaNet layer with swish (z sigmoid(z)) of a full-rank one (z = x Wog),
 * or with no gate at all (use_gate=False). kdalab's models use the full-rank
 * sigmoid for both. The short convolution starts U(-1/2, 1/2) in kdalab
 * (PyTorch's Conv1d default) and N(0, 0.02^2) in fla's models. Each design
 * below is trained with both mixers, two blocks, on 14's task (kdalab's dense
 * recall layout, lib/kdalab_mqar.h):
 *   gate            sigmoid (kdalab's), swish (fla's Gated DeltaNet), none,
 *                   sigmoid at rank d (fla's KDA layer)
 *   conv init       uniform (kdalab's), normal0.02 (fla's models)
 * Each (mixer, design) is trained at every learning rate and seed and the
 * rate with the best mean accuracy kept (the Zoology protocol, as in 14).
 * The verdict per design: KDA against Gated DeltaNet by the verdict rule
 * (verdict.h: paired by seed, a 95 % t interval, 8 seeds or more).
 *
 * Reduced (make run): the four gates with the uniform conv init, vocabulary
 * 33, D = 32, H = 2, T = 24, 4 pairs, one seed, lr 3e-3, 150 steps of 16
 * sequences: the pipeline, not a verdict. Full (KDALAB_FULL=1): 14's full
 * configuration at its hardest point (vocabulary 129, D = 32, H = 2, T = 64,
 * 24 pairs, lr 1e-3 and 3e-3, seeds 1-3, 1000 steps of 32), every gate with
 * both conv inits: 2 mixers x 8 designs x 2 rates x 3 seeds = 96 models (run
 * them as jobs, experiments/README.md "A sweep as jobs").
 *
 * At experiment 22's regime, where both mixers train (d = 32, 3,000 steps),
 * on Zoology's MQAR with 8 seeds: KDALAB_FULL=1 20_output_gate --task zoology
 * --d-model 64 --pairs 8 --steps 3000 --seeds 8 (256 models). --task
 * overwrite runs Zoology's forgetting layout (P / 2 updates) instead; both
 * take Zoology's vocabulary split.
 *
 * Output (DIR = --out): 20_output_gate.tsv, one row per model, and
 * 20_output_gate_summary.tsv, one row per (design, mixer) at its best rate.
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
#define N_GATES 4
#define N_DESIGNS (2 * N_GATES)

static const char *const MIXERS[2] = {"gated_deltanet", "kda"};

/* One design of the output gate and the conv init; rank_d: rank d = D / H. */
typedef struct {
    kdalab_output_gate gate;
    int rank_d;
    kdalab_conv_init conv_init;
} design;

/* "sigmoid/full/uniform", "sigmoid/r16/normal0.02", ... */
static void design_name(const design *g, size_t d, char *out, size_t n)
{
    char rank[24] = "full";
    if (g->rank_d)
        snprintf(rank, sizeof rank, "r%zu", d);
    snprintf(out, n, "%s/%s/%s", kdalab_output_gate_name(g->gate), rank,
             kdalab_conv_init_name(g->conv_init));
}

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "20_output_gate",
             "KDA and Gated DeltaNet on trained MQAR by output gate and conv init");
    const int full = lab_full();
    size_t D = 32, H = 2, T = full ? 64 : 24, P = full ? 24 : 4, vocab = full ? 129 : 33;
    size_t steps = full ? 1000 : 150, batch = full ? 32 : 16, seeds = full ? 3 : 1;
    size_t test = full ? 512 : 128;
    const char *task_s = "dense";
    lab_flag_size(&x, "d-model", &D, "model width D");
    lab_flag_size(&x, "heads", &H, "heads (head dimension D / H)");
    lab_flag_size(&x, "vocab", &vocab, "vocabulary");
    lab_flag_string(&x, "task", &task_s,
                    "dense (kdalab's layout), or zoology / overwrite (Zoology's layouts and "
                    "vocabulary split)");
    lab_flag_size(&x, "steps", &steps, "optimiser steps per model");
    lab_flag_size(&x, "seq-len", &T, "tokens per sequence");
    lab_flag_size(&x, "pairs", &P, "key-value pairs per sequence");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (mixer, design, lr), from --seed on");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    kdalab_mqar_task task;
    lab_split split;
    if (lab_mqar_recall_task(&x, task_s, &task, &split))
        return 2;
    const size_t updates = task == KDALAB_MQAR_OVERWRITE ? P / 2 : 0;
    if (!H || D % H) {
        fprintf(stderr, "%s: --d-model %zu --heads %zu: H must divide D\n", x.name, D, H);
        return 2;
    }
    const double lrs_reduced[] = {3e-3}, lrs_full[MAX_LR] = {1e-3, 3e-3};
    const double *lrs = full ? lrs_full : lrs_reduced;
    const size_t n_lr = full ? 2 : 1, n_designs = full ? N_DESIGNS : N_GATES, d = D / H;
    design designs[N_DESIGNS];
    const kdalab_output_gate gates[N_GATES] = {KDALAB_OUTPUT_GATE_SIGMOID,
        KDALAB_OUTPUT_GATE_SWISH, KDALAB_OUTPUT_GATE_NONE, KDALAB_OUTPUT_GATE_SIGMOID};
    for (size_t i = 0; i < N_DESIGNS; i++)
        designs[i] = (design){gates[i % N_GATES], i % N_GATES == 3,
                              i < N_GATES ? KDALAB_CONV_INIT_UNIFORM : KDALAB_CONV_INIT_NORMAL};

    /* every (mixer, design) at its sizes: refused now, not after hours */
    for (size_t g = 0; g < n_designs; g++)
        for (size_t m = 0; m < 2; m++)
            lab_mqar_check(&x, &(lab_mqar_spec){
                               .mixers = MIXERS[m], .L = 2, .D = D, .H = H, .conv = 1, .T = T,
                               .P = P, .updates = updates, .vocab = vocab, .task = task,
                               .split = split, .batch = batch, .steps = steps,
                               .test = test, .lr = lrs[0], .seed = x.seed,
                               .gate = designs[g].gate, .gate_rank = designs[g].rank_d ? d : 0,
                               .conv_init = designs[g].conv_init});
    static const char *const cols[] = {LAB_MQAR_COLUMNS, "design",
                                       "output gate/rank (full or rN)/conv init", NULL};
    FILE *f = lab_tsv_open(&x, "20_output_gate", cols,
                           "%s sweep (%s): task=%s D=%zu H=%zu T=%zu pairs=%zu vocab=%zu "
                           "steps=%zu batch=%zu seeds=%zu test=%zu", full ? "full" : "reduced",
                           lab_mqar_precision(&x), kdalab_mqar_task_name(task), D, H, T, P,
                           vocab, steps, batch, seeds, test);
    static const char *const scols[] = {
        "index", "the design's position (the figure's x)", "design",
        "output gate/rank (full or rN)/conv init", "mixer", "the mixer of both blocks",
        "lr", "the learning rate with the best mean accuracy", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)", "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "20_output_gate_summary", scols,
                            "%s sweep: D=%zu H=%zu T=%zu pairs=%zu vocab=%zu steps=%zu seeds=%zu",
                            full ? "full" : "reduced", D, H, T, P, vocab, steps, seeds);
    static double acc[N_DESIGNS][2][MAX_LR][MAX_SEEDS], loss[N_DESIGNS][2][MAX_LR][MAX_SEEDS];
    const size_t total = n_designs * 2 * n_lr * seeds;
    size_t done = 0;
    /* seeds outermost: a sweep cut short still has whole tables for its first seeds */
    for (size_t sd = 0; sd < seeds; sd++)
        for (size_t g = 0; g < n_designs; g++)
            for (size_t m = 0; m < 2; m++)
                for (size_t il = 0; il < n_lr; il++) {
                    lab_mqar_spec s = {.mixers = MIXERS[m], .L = 2, .D = D, .H = H, .conv = 1,
                                       .T = T, .P = P, .updates = updates, .vocab = vocab,
                                       .task = task, .split = split, .batch = batch,
                                       .steps = steps, .test = test, .lr = lrs[il],
                                       .seed = x.seed + sd, .gate = designs[g].gate,
                                       .gate_rank = designs[g].rank_d ? d : 0,
                                       .conv_init = designs[g].conv_init};
                    lab_mqar_result r;
                    lab_mqar_train(&x, &s, 0, &r);
                    char name[64];
                    design_name(&designs[g], d, name, sizeof name);
                    lab_mqar_row_extra(f, MIXERS[m], &s, &r, name);
                    acc[g][m][il][sd] = r.accuracy;
                    loss[g][m][il][sd] = r.loss;
                    lab_progress(&x, "models", ++done, total);
                }
    lab_mqar_jobs_done(&x);
    double mean[N_DESIGNS][2], sdev[N_DESIGNS][2];
    size_t best[N_DESIGNS][2];
    for (size_t g = 0; g < n_designs; g++)
        for (size_t m = 0; m < 2; m++) {
            const size_t il = lab_best_lr(acc[g][m][0], MAX_SEEDS, n_lr, seeds, &mean[g][m]);
            best[g][m] = il;
            sdev[g][m] = seeds > 1 ? gsl_stats_sd(acc[g][m][il], 1, seeds) : 0;
            char name[64];
            design_name(&designs[g], d, name, sizeof name);
            fprintf(fs, "%zu\t%s\t%s\t%g\t%.4f\t%.4f\t%zu\n", g, name, MIXERS[m], lrs[il],
                    mean[g][m], sdev[g][m], seeds);
        }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);

    printf("%s (%s sweep; %s, D = %zu, H = %zu, d = %zu, T = %zu, %zu pairs, %zu steps, %zu "
           "seed(s)): test accuracy, mean%s at the best learning rate\n",
           x.name, full ? "full" : "reduced", kdalab_mqar_task_name(task), D, H, d, T, P, steps,
           seeds,
           seeds > 1 ? " ± sd" : "");
    printf("  %-26s  %-15s  %-15s\n", "gate/rank/conv init", "Gated DeltaNet", "KDA");
    for (size_t g = 0; g < n_designs; g++) {
        char name[64];
        design_name(&designs[g], d, name, sizeof name);
        printf("  %-26s  %.3f ± %-7.3f  %.3f ± %-7.3f\n", name, mean[g][0], sdev[g][0],
               mean[g][1], sdev[g][1]);
    }
    /* KDA against Gated DeltaNet per design, by the verdict rule (verdict.h),
     * each at its best learning rate */
    const lab_mqar_spec at = {.mixers = "kda", .L = 2, .D = D, .H = H, .conv = 1, .T = T,
                              .P = P, .updates = updates, .vocab = vocab, .task = task,
                              .split = split};
    const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
    for (size_t g = 0; g < n_designs; g++) {
        char name[64];
        design_name(&designs[g], d, name, sizeof name);
        const lab_side A = {"KDA", acc[g][1][best[g][1]], loss[g][1][best[g][1]]},
                       B = {"Gated DeltaNet", acc[g][0][best[g][0]], loss[g][0][best[g][0]]};
        lab_verdict v;
        lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
        lab_verdict_print(stdout, name, &A, &B, &v);
    }
    /* the failed seeds pooled over the designs, each mixer at its best rate:
     * how often each fails, and the sign test on the (design, seed) pairs
     * where only one of the two does (a description, not the rule) */
    size_t fails[2] = {0, 0}, only[2] = {0, 0};
    for (size_t g = 0; g < n_designs; g++)
        for (size_t sd = 0; sd < seeds; sd++) {
            const int fk = acc[g][1][best[g][1]][sd] < LAB_FAIL_ACCURACY,
                      fg = acc[g][0][best[g][0]][sd] < LAB_FAIL_ACCURACY;
            fails[1] += fk, fails[0] += fg;
            only[1] += fk && !fg, only[0] += fg && !fk;
        }
    printf("  below %.1f accuracy over the %zu designs: Gated DeltaNet in %zu, KDA in %zu of %zu "
           "(design, seed) pairs; only one of the two in %zu (Gated DeltaNet %zu, KDA %zu): "
           "exact two-sided sign test p = %.3f\n",
           LAB_FAIL_ACCURACY, n_designs, fails[0], fails[1], n_designs * seeds,
           only[0] + only[1], only[0], only[1], lab_sign_test_p(only[0], only[1]));
    if (!full)
        printf("  reduced sweep: one seed, a short run; see make run FULL=1\n");
    return 0;
}
