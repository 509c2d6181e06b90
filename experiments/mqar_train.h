/*
 * experiments/mqar_train.h — what the training experiments (14-18) share:
 * one model trained on MQAR from a spec, the TSV row every training experiment writes, and the reduced or
 * full sweep switch.
 *
 *   reduced (default, `make run`)  sweeps small enough for `make run`'s
 *                                  ten-minute budget: one seed, one or two
 *                                  learning rates, few steps
 *   full (KDALAB_FULL=1, `make run FULL=1`)  the published sweeps
 *
 * Every model is kdalab_train_mqar_f32 (or _f64 with --precision fp64): AdamW (betas 0.9, 0.999, weight
 * decay 0.1 on matrices, clip 1), warm-up over the first 10 % of steps,
 * cosine decay to lr / 10, the short convolution on unless spec.conv = 0.
 */
#ifndef KDALAB_EXPERIMENTS_MQAR_TRAIN_H
#define KDALAB_EXPERIMENTS_MQAR_TRAIN_H

#include <stdio.h>

#include "common.h"

/* How a spec's vocabulary splits into keys and values (the recall tasks and
 * the palindrome; the stack's keys are its 2 * stacks operation tokens). */
typedef enum {
    LAB_SPLIT_EVEN = 0, /* 1 filler, (vocab - 1) / 2 keys, the rest values: the   */
                        /* published sweeps of 14-17 and 19-21                    */
    LAB_SPLIT_ZOOLOGY   /* Zoology's: keys [1, vocab/2), values [vocab/2, vocab)   */
} lab_split;

/* One model to train. */
typedef struct {
    const char *mixers; /* kdalab_model_parse_mixers' spec: "kda", "hybrid:3", ... */
    size_t L, D, H;     /* blocks, width, heads (d = D / H)                       */
    int conv;           /* the short convolution on q, k, v                       */
    uint64_t conv_off;  /* blocks without it although conv is set (bit l: block  */
                        /* l; kdalab_model_config's conv_off); 0: none            */
    size_t T, P, vocab; /* sequence length, key-value pairs, vocabulary (split    */
                        /* as `split` says)                                       */
    size_t batch, steps, test;
    double lr;
    unsigned long seed;
    kdalab_mqar_task task;  /* the layout (lib/kdalab_mqar.h); 0: dense             */
    size_t updates, recent; /* overwrite's U, recent's W (0 for the other tasks)     */
    kdalab_output_gate gate; /* the linear mixers' output gate; 0: sigmoid           */
    size_t gate_rank;        /* its rank; 0: full                                    */
    kdalab_conv_init conv_init; /* 0: U(-1/2, 1/2)                                   */
    lab_split split;         /* the vocabulary's split; 0: even                       */
    size_t stacks;           /* the stack task's S (0 for the other tasks)            */
    size_t train_set;        /* 0: a fresh batch each step; N: a fixed set of N       */
} lab_mqar_spec;

/* The number of tokens an answer of the spec's task can be: its value
 * tokens (the recall tasks, the stack), every token but the separator (the
 * palindrome). lab_no_recall_loss (verdict.h) of it is the loss of a model
 * that learned nothing but that. The spec must be one lab_mqar_check passes. */
size_t lab_mqar_answers(const lab_mqar_spec *s);

/* What one run gave. theta is kept only when asked (lab_mqar_train's keep). */
typedef struct {
    double accuracy, loss; /* on the test set                */
    double seconds;        /* training wall time              */
    double tokens_per_s;
    double lr;             /* the learning rate it ran with   */
    long steps_to_95;      /* first step whose mean training-batch accuracy over the */
                           /* last 50 steps is >= 0.95; -1 never; -2 not recorded    */
    double *theta;         /* the trained parameters, or NULL */
    kdalab_model_config model;
} lab_mqar_result;

/* Is this the full sweep (KDALAB_FULL set to anything but "" or "0")? */
int lab_full(void);

/* Resume an interrupted sweep (KDALAB_RESUME set to anything but "" or "0";
 * `make run FULL=1 RESUME=1`)? Every model lab_mqar_train trains is appended
 * to the ledger DIR/mqar_models.tsv (DIR = --out) as it finishes, keyed by
 * every input of the run (precision, mixers, sizes, task, batch, steps, test
 * set, learning rate, seed, output gate and conv init). When resuming, a
 * model whose key is in the ledger is not trained again: its accuracy, loss
 * and training time are read back (training is deterministic, so they are
 * the bits it would give); a line with the model's key that is not a record
 * the model can have (a field out of its range), two lines that record it
 * differently, a ledger that is not a regular file, or holds a line longer
 * than any ledger line, are errors (exit 1: lab_ledger_find_any). Off by
 * default: a ledger written by an older build would hide a change. */
int lab_resume(void);

/* Train the models a resuming run finds in no ledger even where it would
 * refuse to (KDALAB_TRAIN_MISSING set to anything but "" or "0"; `make run
 * RESUME=1 TRAIN_MISSING=1`): an assembling run whose jobs did not all
 * finish, or a run whose flags differ from those of the ledgers' models of
 * this experiment (census.h). */
int lab_train_missing(void);

/* Register --precision fp32|fp64 (default fp32: the float32 twins, 1.5-2x
 * faster; fp64: the float64 model the gradient checks verify) and the jobs
 * flags --list-jobs, --job I (lab_flag_jobs; see lab_mqar_train) on x; call
 * before lab_parse. lab_mqar_precision() gives the choice, checked. */
void lab_mqar_flags(lab_ctx *x);
const char *lab_mqar_precision(const lab_ctx *x);

/* lab_parse, then kdalab_blas_choose_kernels (which may restart the program
 * once with better OpenBLAS kernels), then refuse (one line, exit 2) a seed
 * count *seeds (a registered flag's target, read after the parse) outside
 * 1 .. max_seeds. */
void lab_mqar_parse(lab_ctx *x, int argc, char **argv, const size_t *seeds, size_t max_seeds);

/* The most floating-point operations one model may cost (kdalab_train_cost),
 * as `kdalab train` allows: days of computing at any speed kdalab reaches. */
#define LAB_WORK_BOUND 1e16

/* Refuse (one line naming the model, exit 2) a spec the library would
 * refuse, or one above LAB_WORK_BOUND: call it on a sweep's extreme specs
 * before training anything. */
void lab_mqar_check(const lab_ctx *x, const lab_mqar_spec *s);

/* Train one model (or, when resuming, read it from the ledger), and append
 * it to the ledger; exits (status 1) on an error other than divergence. A
 * diverged run counts as accuracy 0 and says so on stderr. keep: keep theta
 * (free it with free()); such a model is always trained.
 *
 * A sweep is a list of jobs, one per call in the order the experiment makes
 * them (its grid must not depend on results, so every run lists the same
 * jobs). With --list-jobs (lab_mqar_flags) a call trains nothing and prints
 * its job's command line (print_job), or with KDALAB_RESUME only when its
 * model is in no ledger (a job keeps its index in the whole list, and the
 * program says on stderr how many it left out); with --job I, call I trains its model
 * into its own ledger (DIR/mqar_jobs/NAME.I.tsv; with KDALAB_RESUME a model
 * already in a ledger is not trained again) and the program exits 0; the
 * other calls return accuracy 0 without training. Either way no table is
 * written (lab_flag_jobs). A run without these flags and with KDALAB_RESUME=1
 * then reads every model back from the ledgers and writes the tables; before
 * it trains anything it looks at the whole sweep (census.h): it says how many
 * models the ledgers hold and which it trains, or refuses (exit 1) to train
 * the missing models of an assembling run, or of one whose flags differ
 * from the ledgers' models'. */
void lab_mqar_train(lab_ctx *x, const lab_mqar_spec *s, int keep, lab_mqar_result *r);

/* Job `index` of the sweep as one shell command line into f: this run's
 * command line without --list-jobs, with --job index, KDALAB_FULL=1 in front
 * of a full sweep's. */
void lab_mqar_print_job(FILE *f, const lab_ctx *x, size_t index);

/* Call after the last lab_mqar_train of the sweep, before the results are
 * used: with --list-jobs, exits 0 (every job printed); with --job I, I was
 * past the last job: one line, exit 2; in the copy of a resuming run that
 * looks at the sweep first (census.h), says what the run will train and
 * exits. Otherwise returns. */
void lab_mqar_jobs_done(const lab_ctx *x);

/* The columns every training experiment's TSV starts with (name,
 * description pairs, as lab_tsv_open takes them), and one row of them:
 * label, mixers, layers, d_model, heads, d (head dim), pairs, seq_len, seed,
 * lr, steps, accuracy, test_loss, train_s. */
#define LAB_MQAR_COLUMNS                                                              \
    "label", "the model's name in this experiment", "mixers",                          \
        "the blocks' mixers (kdalab_model_parse_mixers)", "layers", "blocks",          \
        "d_model", "width D", "heads", "heads H", "d", "head dimension D / H",         \
        "pairs", "key-value pairs per sequence", "seq_len", "tokens per sequence",     \
        "seed", "initialisation and data seed", "lr", "peak learning rate",            \
        "steps", "optimiser steps", "accuracy", "test accuracy on the answers",        \
        "test_loss", "test cross-entropy (nats)", "train_s", "training wall time (s)"
void lab_mqar_row(FILE *f, const char *label, const lab_mqar_spec *s, const lab_mqar_result *r);
/* The learning rate with the best mean test accuracy over seeds (the Zoology
 * protocol, 14's and 15's): acc[il * stride + sd] is rate il's accuracy for
 * seed sd (il < n_lr, sd < seeds); returns that il (the first, on a tie)
 * and puts its mean in *mean. */
size_t lab_best_lr(const double *acc, size_t stride, size_t n_lr, size_t seeds, double *mean);
/* The --task of an experiment that runs one recall layout (14, 20): "dense"
 * (kdalab's layout, the even split) or Zoology's "zoology" / "overwrite"
 * (Zoology's split) into *task and *split; returns 0, or prints one line
 * naming x's program and the flag and returns 2 (the exit status). */
int lab_mqar_recall_task(const lab_ctx *x, const char *name, kdalab_mqar_task *task,
                         lab_split *split);
/* The same row with one more column, extra, before the line ends. */
void lab_mqar_row_extra(FILE *f, const char *label, const lab_mqar_spec *s,
                        const lab_mqar_result *r, const char *extra);

#endif /* KDALAB_EXPERIMENTS_MQAR_TRAIN_H */
