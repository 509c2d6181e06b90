/*
 * 22_trainable_regime — trained models: where do the gated delta-rule
 * mixers train? Gated DeltaNet and KDA on Zoology's MQAR and on its
 * forgetting variant at a ladder of scales (head size d, sequence length T,
 * training steps), to find the smallest scale at which both reach 0.9 test
 * accuracy in most seeds: the regime where comparing them means something.
 *
 * Experiments 14 and 19-21 compare the mixers at d = 16 and 1,000 steps,
 * where Gated DeltaNet and KDA often never leave the no-recall loss (19: on
 * Zoology's layout at T = 128 every seed of both). A verdict between two
 * models that learned nothing orders nothing. Each point of this sweep is
 *   d : T : steps     two blocks, H = 2 heads of d (D = 2d), T tokens,
 *                     P = T / 8 pairs (overwrite: U = P / 2 bound again),
 *                     trained `steps` steps of 32 sequences
 * and every point trains both mixers on both tasks (Zoology's layout and
 * vocabulary split: lib/kdalab_mqar.h) at every learning rate and seed. Per
 * (point, task, mixer) the rate with the best mean accuracy is kept (the
 * Zoology protocol); the mixer *trains* there when more than half its seeds
 * reach 0.9. The regime is the cheapest point (by kdalab_train_cost) where
 * both mixers train on both tasks.
 *
 * Reduced (make run): one point 16:32:500, vocabulary 65, one seed, lr 3e-3,
 * batches of 16: the pipeline, not a verdict. Full (KDALAB_FULL=1): the
 * points 16:64:1000, 16:128:1000 (experiment 19's failing scale, on
 * Zoology's own layout), 16:64:3000, 32:64:1000, 32:64:3000, 32:128:1000,
 * 64:128:1000 (--points sets others), vocabulary 129, lr 1e-3 and 3e-3,
 * seeds 1-3: 168 models, listed most expensive point first so that
 * `parallel` starts the longest jobs first (experiments/README.md "A sweep
 * as jobs"). Measured on one core of an Intel Xeon (Cooper Lake, AVX-512)
 * shared with other work, the models' CPU time per 1,000 steps (the mean of
 * the two mixers and tasks) is 22 s at 16:64, 46 s at 16:128, 49 s at
 * 32:64, 94 s at 32:128 and 243 s at 64:128 (KDA's the longest, about 290 s):
 * the full sweep is about 16,000 core-seconds (270 core-minutes), about 17
 * minutes on 16 cores with `parallel -j16`.
 *
 * Output (DIR = --out): 22_trainable_regime.tsv, one row per model, and
 * 22_regime_summary.tsv, one row per (point, task, mixer) at its best rate:
 * mean and sd, the seeds that reached 0.9 and the seeds stuck at the
 * no-recall loss. Per (point, task) it prints KDA against Gated DeltaNet by
 * the verdict rule (verdict.h: paired by seed, each at its best rate; 8
 * seeds or more for a word): with --points 32:64:3000 --seeds 8 it is the
 * comparison at the regime the full sweep found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "mqar_train.h"
#include "verdict.h"

#define MAX_POINTS 16
#define MAX_LR 4
#define MAX_SEEDS 16
#define TRAINED 0.9 /* the accuracy a seed must reach to count as trained */

static const char *const MIXERS[2] = {"gated_deltanet", "kda"};
static const char *const NAMES[2] = {"Gated DeltaNet", "KDA"};
static const kdalab_mqar_task TASKS[2] = {KDALAB_MQAR_ZOOLOGY, KDALAB_MQAR_OVERWRITE};

/* One point of the ladder, and its cost (training floating-point operations
 * of one model, KDA's). */
typedef struct {
    size_t d, T, steps;
    double cost;
} point;

/* Parse "d:T:steps,d:T:steps,..." into p[max]; the count, or 0 on a
 * malformed list. */
static size_t parse_points(const char *s, point *p, size_t max)
{
    size_t n = 0;
    while (*s) {
        if (n == max)
            return 0;
        char *end;
        unsigned long long v[3];
        for (int i = 0; i < 3; i++) {
            if (*s < '0' || *s > '9')
                return 0;
            v[i] = strtoull(s, &end, 10);
            if (v[i] == 0 || v[i] > 1000000 || (i < 2 && *end != ':'))
                return 0;
            s = i < 2 ? end + 1 : end;
        }
        p[n++] = (point){(size_t)v[0], (size_t)v[1], (size_t)v[2], 0};
        if (*s == ',' && s[1]) /* a comma is followed by another point */
            s++;
        else if (*s)
            return 0;
    }
    return n;
}

/* The spec of one model of the sweep. */
static lab_mqar_spec spec_of(const point *pt, size_t task, size_t mixer, double lr,
                             unsigned long seed, size_t vocab, size_t batch, size_t steps,
                             size_t test, size_t train_set)
{
    const size_t P = pt->T / 8 ? pt->T / 8 : 1;
    return (lab_mqar_spec){.mixers = MIXERS[mixer], .L = 2, .D = 2 * pt->d, .H = 2, .conv = 1,
                           .T = pt->T, .P = P, .vocab = vocab, .batch = batch,
                           .steps = steps ? steps : pt->steps, .test = test, .lr = lr,
                           .seed = seed, .task = TASKS[task],
                           .updates = TASKS[task] == KDALAB_MQAR_OVERWRITE ? (P + 1) / 2 : 0,
                           .split = LAB_SPLIT_ZOOLOGY, .train_set = train_set};
}

/* A model's training cost (kdalab_train_cost of its configuration). */
static double cost_of(const lab_mqar_spec *s)
{
    kdalab_train_config c = {0};
    c.model = (kdalab_model_config){.L = s->L, .D = s->D, .H = s->H, .F = 2 * s->D,
                                    .vocab = s->vocab, .conv = s->conv};
    size_t L = s->L;
    kdalab_model_parse_mixers(s->mixers, &L, 1, c.model.mixer);
    c.task = (kdalab_mqar_config){.T = s->T};
    c.opt.steps = s->steps;
    c.batch = s->batch;
    c.test_sequences = 1;
    double ops = 0;
    kdalab_train_cost(&c, &ops, NULL, NULL);
    return ops;
}

int main(int argc, char **argv)
{
    lab_ctx x;
    lab_init(&x, "22_trainable_regime",
             "where Gated DeltaNet and KDA train: trained recall against scale");
    const int full = lab_full();
    size_t seeds = full ? 3 : 1, vocab = full ? 129 : 65, batch = full ? 32 : 16, test = 512;
    size_t steps = 0, train_set = 0;
    const char *points_s = full ? "16:64:1000,16:128:1000,16:64:3000,32:64:1000,32:64:3000,"
                                  "32:128:1000,64:128:1000"
                                : "16:32:500";
    const char *lrs_s = full ? "1e-3,3e-3" : "3e-3";
    lab_flag_string(&x, "points", &points_s, "the ladder: d:T:steps, comma-separated");
    lab_flag_string(&x, "lrs", &lrs_s, "peak learning rates, comma-separated");
    lab_flag_size(&x, "seeds", &seeds, "seeds per (point, task, mixer, lr), from --seed on");
    lab_flag_size(&x, "vocab", &vocab, "vocabulary (Zoology's split; larger than every T)");
    lab_flag_size(&x, "batch", &batch, "sequences per step");
    lab_flag_size(&x, "steps", &steps, "optimiser steps of every point (0: each point's own)");
    lab_flag_size(&x, "test", &test, "test sequences per model");
    lab_flag_size(&x, "train-set", &train_set, "a fixed training set of N sequences (0: fresh)");
    lab_mqar_flags(&x);
    lab_mqar_parse(&x, argc, argv, &seeds, MAX_SEEDS);
    point pts[MAX_POINTS];
    double lrs[MAX_LR];
    const size_t n_pts = parse_points(points_s, pts, MAX_POINTS);
    const size_t n_lr = lab_parse_list(lrs_s, lrs, MAX_LR);
    if (!n_pts || !n_lr) {
        fprintf(stderr, "%s: --points %s, --lrs %s: want 1 .. %d points d:T:steps (each a "
                        "positive integer) and 1 .. %d rates\n",
                x.name, points_s, lrs_s, MAX_POINTS, MAX_LR);
        return 2;
    }
    for (size_t i = 0; i < n_pts; i++) {
        if (pts[i].T >= vocab) { /* Zoology's generator asserts it */
            fprintf(stderr, "%s: point %zu:%zu:%zu: T must be below the vocabulary (%zu), as "
                            "Zoology's multiquery_ar asks\n",
                    x.name, pts[i].d, pts[i].T, pts[i].steps, vocab);
            return 2;
        }
        for (size_t t = 0; t < 2; t++) /* every model's sizes: refused now, not after hours */
            for (size_t m = 0; m < 2; m++) {
                const lab_mqar_spec s = spec_of(&pts[i], t, m, lrs[0], x.seed, vocab, batch,
                                                steps, test, train_set);
                lab_mqar_check(&x, &s);
            }
        const lab_mqar_spec s = spec_of(&pts[i], 0, 1, lrs[0], x.seed, vocab, batch, steps, test,
                                        train_set);
        pts[i].cost = cost_of(&s);
    }
    /* the order of the jobs: the most expensive point first */
    size_t order[MAX_POINTS];
    for (size_t i = 0; i < n_pts; i++)
        order[i] = i;
    for (size_t i = 1; i < n_pts; i++)
        for (size_t j = i; j > 0 && pts[order[j]].cost > pts[order[j - 1]].cost; j--) {
            const size_t tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }

    static const char *const cols[] = {LAB_MQAR_COLUMNS, "task", "the task", "point",
                                       "d:T:steps", NULL};
    FILE *f = lab_tsv_open(&x, "22_trainable_regime", cols,
                           "%s sweep (%s): H=2 vocab=%zu batch=%zu seeds=%zu test=%zu "
                           "train_set=%zu points=%s lrs=%s", full ? "full" : "reduced",
                           lab_mqar_precision(&x), vocab, batch, seeds, test, train_set,
                           points_s, lrs_s);
    static const char *const scols[] = {
        "point", "d:T:steps", "d", "head dimension", "seq_len", "tokens per sequence",
        "steps", "optimiser steps", "task", "the task", "mixer", "the mixer of both blocks",
        "lr", "the learning rate with the best mean accuracy", "mean", "mean test accuracy",
        "sd", "its standard deviation over seeds (0 for one seed)",
        "trained", "seeds at 0.9 or more", "stuck", "seeds stuck at the no-recall loss",
        "seeds", "seeds", NULL};
    FILE *fs = lab_tsv_open(&x, "22_regime_summary", scols,
                            "%s sweep: H=2 vocab=%zu seeds=%zu points=%s",
                            full ? "full" : "reduced", vocab, seeds, points_s);
    static double acc[MAX_POINTS][2][2][MAX_LR][MAX_SEEDS], loss[MAX_POINTS][2][2][MAX_LR][MAX_SEEDS];
    const size_t total = n_pts * 2 * 2 * n_lr * seeds;
    size_t done = 0;
    for (size_t k = 0; k < n_pts; k++)
        for (size_t sd = 0; sd < seeds; sd++)
            for (size_t t = 0; t < 2; t++)
                for (size_t m = 0; m < 2; m++)
                    for (size_t il = 0; il < n_lr; il++) {
                        const size_t i = order[k];
                        lab_mqar_spec s = spec_of(&pts[i], t, m, lrs[il], x.seed + sd, vocab,
                                                  batch, steps, test, train_set);
                        lab_mqar_result r;
                        lab_mqar_train(&x, &s, 0, &r);
                        char extra[96];
                        snprintf(extra, sizeof extra, "%s\t%zu:%zu:%zu",
                                 kdalab_mqar_task_name(TASKS[t]), pts[i].d, pts[i].T, s.steps);
                        lab_mqar_row_extra(f, MIXERS[m], &s, &r, extra);
                        acc[i][t][m][il][sd] = r.accuracy;
                        loss[i][t][m][il][sd] = r.loss;
                        lab_progress(&x, "models", ++done, total);
                    }
    lab_mqar_jobs_done(&x);

    printf("%s (%s sweep; two blocks, H = 2, D = 2d, P = T/8, vocabulary %zu with Zoology's "
           "split, %zu seed(s)): test accuracy at the best rate, seeds at %.1f or more\n",
           x.name, full ? "full" : "reduced", vocab, seeds, TRAINED);
    int trains[MAX_POINTS][2][2];
    for (size_t k = n_pts; k-- > 0;) { /* cheapest first */
        const size_t i = order[k];
        for (size_t t = 0; t < 2; t++) {
            const lab_mqar_spec at = spec_of(&pts[i], t, 1, lrs[0], x.seed, vocab, batch, steps,
                                             test, train_set);
            const double no_recall = lab_no_recall_loss(lab_mqar_answers(&at));
            printf("  %zu:%zu:%-6zu %-9s", pts[i].d, pts[i].T, at.steps,
                   kdalab_mqar_task_name(TASKS[t]));
            size_t best[2];
            for (size_t m = 0; m < 2; m++) {
                double mean;
                const size_t il = lab_best_lr(acc[i][t][m][0], MAX_SEEDS, n_lr, seeds, &mean);
                best[m] = il;
                const double *a = acc[i][t][m][il], *l = loss[i][t][m][il];
                size_t good = 0;
                for (size_t sd = 0; sd < seeds; sd++)
                    good += a[sd] >= TRAINED;
                const size_t stuck = lab_stuck_count(l, seeds, no_recall);
                trains[i][t][m] = 2 * good > seeds;
                const double sdv = seeds > 1 ? gsl_stats_sd(a, 1, seeds) : 0;
                fprintf(fs, "%zu:%zu:%zu\t%zu\t%zu\t%zu\t%s\t%s\t%g\t%.4f\t%.4f\t%zu\t%zu\t%zu\n",
                        pts[i].d, pts[i].T, at.steps, pts[i].d, pts[i].T, at.steps,
                        kdalab_mqar_task_name(TASKS[t]), MIXERS[m], lrs[il], mean, sdv, good,
                        stuck, seeds);
                printf("  %s %.3f ± %.3f (lr %g; %zu of %zu at %.1f, %zu stuck)", NAMES[m], mean,
                       sdv, lrs[il], good, seeds, TRAINED, stuck);
            }
            printf("\n");
            /* KDA against Gated DeltaNet by the verdict rule: paired by seed, each
             * at its best rate */
            const lab_side A = {NAMES[1], acc[i][t][1][best[1]], loss[i][t][1][best[1]]},
                           B = {NAMES[0], acc[i][t][0][best[0]], loss[i][t][0][best[0]]};
            lab_verdict v;
            lab_verdict_apply(&A, &B, seeds, x.seed, no_recall, &v);
            char what[64];
            snprintf(what, sizeof what, "%zu:%zu:%zu %s", pts[i].d, pts[i].T, at.steps,
                     kdalab_mqar_task_name(TASKS[t]));
            lab_verdict_print(stdout, what, &A, &B, &v);
        }
    }
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, fs);
    size_t regime = n_pts;
    for (size_t i = 0; i < n_pts; i++)
        if (trains[i][0][0] && trains[i][0][1] && trains[i][1][0] && trains[i][1][1] &&
            (regime == n_pts || pts[i].cost < pts[regime].cost))
            regime = i;
    if (regime < n_pts)
        printf("  verdict: the cheapest point where Gated DeltaNet and KDA both train on both "
               "tasks (more than half the seeds at %.1f) is d = %zu, T = %zu, %zu steps%s\n",
               TRAINED, pts[regime].d, pts[regime].T, steps ? steps : pts[regime].steps,
               seeds < 3 ? " — with fewer than 3 seeds, a direction only" : "");
    else
        printf("  verdict: at no point of this sweep do Gated DeltaNet and KDA both train on "
               "both tasks: the regime lies beyond it (larger d, more steps)\n");
    if (!full)
        printf("  reduced sweep: one seed, a short run; see make run FULL=1\n");
    return 0;
}
