/*
 * tools/kdalab/train.c — `kdalab train`: train one small model on
 * multi-query associative recall (kdalab_train_mqar_f64), print a progress line
 * while it runs and `accuracy=<test accuracy>` at the end, and save the
 * trained parameters as one .npy per tensor with the configuration beside
 * them.
 *
 * defines: cmd_train (declared in cli.h)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The tasks --task names (the library's names; mqar and plain are dense's
 * older names on this command line). */
#define TASKS "zoology, overwrite, recent, dense, palindrome, stack"

static const char HELP[] =
    "usage: kdalab train --task TASK --mixer M [options]\n"
    "\n"
    "Train a model (embedding -> L blocks of [RMSNorm -> mixer -> residual;\n"
    "RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm -> LM head) on a synthetic\n"
    "task (multi-query associative recall and its variants, the palindrome, the\n"
    "stack) with AdamW; then print its accuracy on a fresh test set as\n"
    "`accuracy=<a>` on its own line of standard output.\n"
    "\n"
    "  --task TASK          the task (layouts in REFERENCE.md): zoology (Zoology's\n"
    "                       MQAR, multiquery_ar: T even, T >= 4P), overwrite (zoology\n"
    "                       with --updates U of the P keys bound again, the latest\n"
    "                       value asked; T >= 2(P + U) + 2P), recent (zoology asking\n"
    "                       only the last --recent W pairs; T >= 2P + 2W), dense\n"
    "                       (kdalab's own recall layout; mqar and plain are its older\n"
    "                       names), palindrome (--kv-pairs N tokens, then the same\n"
    "                       backwards; T = 2N) or stack (--stacks S stacks, --kv-pairs\n"
    "                       P pushes and T/2 - P pops, each pop's value predicted)\n"
    "  --updates U          overwrite: keys bound again, 1 .. P\n"
    "  --recent W           recent: the last pairs asked, 1 .. P\n"
    "  --stacks S           stack: the stacks, a push and a pop token each\n"
    "  --train-set N        train on a fixed set of N sequences, each pass over it in a\n"
    "                       new order (Zoology's: 100000); default: every batch fresh\n"
    "  --mixer M            attention | linear_attention | deltanet | gated_deltanet |\n"
    "                       kda | simple_gla | gla (a row of kdalab info\n"
    "                       --mechanisms): every block; hybrid:N: N KDA blocks then one\n"
    "                       attention block, repeated (Kimi Linear is hybrid:3);\n"
    "                       or a comma list, one per block (--layers follows it)\n"
    "  --layers L           blocks (default 2)\n"
    "  --d-model D          width (default 64)     --heads H   heads (default 2)\n"
    "  --mlp-hidden F       the MLP's hidden width (default 2 D)\n"
    "  --no-conv            no short convolution on q, k, v (on by default)\n"
    "  --conv-init I        the convolutions' initialisation: uniform (U(-1/2, 1/2),\n"
    "                       PyTorch's default; the default) or normal0.02 (N(0, 0.02^2),\n"
    "                       fla's models); refused with --no-conv\n"
    "  --conv-off LIST      blocks without the convolution, by index from 0, joined by\n"
    "                       commas (--mixer kda,attention --conv-off 1: KDA with its\n"
    "                       convolution, attention without); refused with --no-conv\n"
    "  --output-gate G      the linear mixers' output gate rmsnorm(o) * act(z): sigmoid\n"
    "                       (the default; fla's KDA layer), swish (z sigmoid(z), fla's\n"
    "                       Gated DeltaNet layer) or none (rmsnorm(o) alone)\n"
    "  --gate-rank R        the gate's input z: 0 (default) x Wog, full rank; R in\n"
    "                       1 .. D: (x Wog) Wog2 + bog, rank R (fla's KDA layer: R = D/H);\n"
    "                       both refused when every block is attention\n"
    "  --seq-len T          tokens per sequence (default 64)\n"
    "  --kv-pairs P         key-value pairs per sequence (default 8)\n"
    "  --vocab W            vocabulary (default 64): zoology, overwrite and recent split\n"
    "                       it as Zoology does, keys [1, W/2) and values [W/2, W);\n"
    "                       dense as 1 filler, (W-1)/2 keys, the rest values; the\n"
    "                       palindrome's string is drawn from [1, W); stack has 2S\n"
    "                       operation tokens and W - 1 - 2S values\n"
    "  --batch B            sequences per step (default 32)\n"
    "  --steps S            optimiser steps (default 1500)\n"
    "  --lr X               peak learning rate (default 1e-3); warm-up over the first\n"
    "                       10 % of steps, cosine decay to X / 10\n"
    "  --weight-decay X     AdamW's, on matrices only (default 0.1)\n"
    "  --test-size N        test sequences (default 1024)\n"
    "  --seed N             initialisation and data (default 0)\n"
    "  --precision P        fp32 (default: the float32 twins, about twice as fast)\n"
    "                       or fp64 (the float64 model the gradient checks verify)\n"
    "  --out DIR            save <DIR>/<tensor>.npy and <DIR>/config.txt, all or nothing\n"
    "                       (DIR new, or a checkpoint kdalab train wrote, which it\n"
    "                       replaces in one step; anything else is refused before\n"
    "                       training)\n"
    "  --log-every K        a progress line every K steps (default: 20 lines in all;\n"
    "                       0: none)\n"
    "\n"
    "Exit status: 0 trained, 1 diverged or could not save, 2 bad command line.\n";

enum { O_TASK = 256, O_MIXER, O_LAYERS, O_D, O_HEADS, O_F, O_NOCONV, O_T, O_P, O_VOCAB,
       O_BATCH, O_STEPS, O_LR, O_WD, O_TEST, O_SEED, O_OUT, O_LOG, O_PREC, O_GATE, O_RANK,
       O_CINIT, O_UPDATES, O_RECENT, O_STACKS, O_SET, O_COFF };

static const struct option OPTIONS[] = {
    {"task", required_argument, NULL, O_TASK},     {"mixer", required_argument, NULL, O_MIXER},
    {"layers", required_argument, NULL, O_LAYERS}, {"d-model", required_argument, NULL, O_D},
    {"heads", required_argument, NULL, O_HEADS},   {"mlp-hidden", required_argument, NULL, O_F},
    {"no-conv", no_argument, NULL, O_NOCONV},      {"seq-len", required_argument, NULL, O_T},
    {"kv-pairs", required_argument, NULL, O_P},    {"vocab", required_argument, NULL, O_VOCAB},
    {"batch", required_argument, NULL, O_BATCH},   {"steps", required_argument, NULL, O_STEPS},
    {"lr", required_argument, NULL, O_LR},         {"weight-decay", required_argument, NULL, O_WD},
    {"test-size", required_argument, NULL, O_TEST}, {"seed", required_argument, NULL, O_SEED},
    {"out", required_argument, NULL, O_OUT},       {"log-every", required_argument, NULL, O_LOG},
    {"precision", required_argument, NULL, O_PREC},
    {"output-gate", required_argument, NULL, O_GATE},
    {"gate-rank", required_argument, NULL, O_RANK},
    {"conv-init", required_argument, NULL, O_CINIT},
    {"conv-off", required_argument, NULL, O_COFF},
    {"updates", required_argument, NULL, O_UPDATES},
    {"recent", required_argument, NULL, O_RECENT},
    {"stacks", required_argument, NULL, O_STACKS},
    {"train-set", required_argument, NULL, O_SET},
    {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0},
};

/* The progress line, on stderr. */
typedef struct {
    size_t every;
} progress_ctx;

static int progress(const kdalab_train_progress *p, void *user)
{
    const progress_ctx *ctx = user;
    if (ctx->every && (p->step % ctx->every == 0 || p->step == p->steps)) {
        double eta = p->seconds / (double)p->step * (double)(p->steps - p->step);
        fprintf(stderr, "step %zu/%zu loss %.4f acc %.3f lr %.2e |g| %.3f tokens/s %.0f "
                "eta %.0f s\n", p->step, p->steps, p->loss, p->accuracy, p->lr, p->grad_norm,
                p->tokens_per_s, eta);
    }
    return 0;
}

/* Parse a double flag value: finite and > 0 (or >= 0 when zero_ok). */
static int parse_positive(const char *flag, const char *s, int zero_ok, double *out)
{
    if (cli_parse_double(s, out) != 0 || !(*out > 0 || (zero_ok && *out == 0)) ||
        *out > 1e300)
        return cli_fail(EXIT_BAD, "--%s: '%s' is not a number %s 0 and <= 1e300", flag, s,
                        zero_ok ? ">=" : ">");
    return 0;
}

/*
 * The bounds on a run's size, refused before anything is allocated, from
 * the library's estimate of its cost (kdalab_train_cost: operations and the
 * least memory). Work: a run is refused above WORK_BOUND operations in all
 * (training and test): 4000 times the default run (2.6e12 with --mixer
 * kda), days of computing at any speed kdalab reaches on a CPU. Memory: a
 * run that needs more than the machine's physical memory is refused.
 */
#define WORK_BOUND 1e16

static int check_bounds(const kdalab_train_config *c)
{
    size_t P;
    kdalab_model_size(&c->model, &P, NULL);
    const kdalab_model_config *m = &c->model;
    double train, test, bytes;
    kdalab_train_cost(c, &train, &test, &bytes);
    const double B = (double)c->batch;
    /* the cost of one training sequence and of one test sequence */
    const double per_train = c->opt.steps && c->batch ? train / ((double)c->opt.steps * B) : 0;
    const double per_test = c->test_sequences ? test / (double)c->test_sequences : 0;
    if (train + test > WORK_BOUND) {
        char limit[160] = "";
        if (test > WORK_BOUND / 2 && train < WORK_BOUND)
            snprintf(limit, sizeof limit, "; with the other sizes as given, --test-size can be "
                     "at most %.0f", floor((WORK_BOUND - train) / per_test));
        else if (test < WORK_BOUND && WORK_BOUND - test >= B * per_train)
            snprintf(limit, sizeof limit, "; with the other sizes as given, --steps can be at "
                     "most %.0f", floor((WORK_BOUND - test) / (B * per_train)));
        return cli_fail(EXIT_BAD, "--steps %zu, --batch %zu, --seq-len %zu, --test-size %zu with "
                        "%zu parameters: about %.2g floating-point operations (%.2g to train, "
                        "%.2g to test), above the bound on one run, %.0e%s",
                        c->opt.steps, c->batch, c->task.T, c->test_sequences, P,
                        train + test, train, test, WORK_BOUND, limit);
    }
    const double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (phys > 0 && bytes > phys)
        return cli_fail(EXIT_BAD, "--batch %zu, --seq-len %zu, --d-model %zu, --mlp-hidden %zu, "
                        "--vocab %zu, --layers %zu: needs at least %.3g GB of memory (%zu "
                        "parameters with their optimiser state, one batch's activations), more "
                        "than this machine has (%.3g GB)",
                        c->batch, c->task.T, m->D, m->F, m->vocab, m->L, bytes / 1e9, P,
                        phys / 1e9);
    return 0;
}

int cmd_train(int argc, char **argv)
{
    cli_who = "kdalab train";
    kdalab_train_config c;
    memset(&c, 0, sizeof c);
    size_t L = 2, D = 64, H = 2, F = 0, T = 64, P = 8, W = 64, steps = 1500, log_every = SIZE_MAX;
    size_t stacks = 0;
    double lr = 1e-3, wd = 0.1;
    const char *task = NULL, *mixer = NULL, *out = NULL, *precision = NULL, *gate = NULL;
    const char *conv_init = NULL, *conv_off = NULL;
    int conv = 1, layers_given = 0, rank_given = 0, rc = 0;
    c.batch = 32;
    c.test_sequences = 1024;
    cli_parser p;
    cli_arg got;
    int opt;
    cli_begin(&p, argc, argv, OPTIONS);
    while (rc == 0 && (opt = cli_next(&p, &got)) != CLI_END) {
        size_t seed;
        switch (opt) {
        case CLI_ERROR: return EXIT_BAD;
        case CLI_ARG: return cli_fail(EXIT_BAD, "unexpected argument '%s' (see --help)", got.value);
        case 'h': fputs(HELP, stdout); return 0;
        case O_TASK: rc = cli_store(&got, &task); break;
        case O_MIXER: rc = cli_store(&got, &mixer); break;
        case O_OUT: rc = cli_store(&got, &out); break;
        case O_PREC: rc = cli_store(&got, &precision); break;
        case O_GATE: rc = cli_store(&got, &gate); break;
        case O_CINIT: rc = cli_store(&got, &conv_init); break;
        case O_COFF: rc = cli_store(&got, &conv_off); break;
        case O_RANK:
            rc = cli_parse_size(got.name, got.value, 0, &c.model.gate_rank);
            rank_given = 1;
            break;
        case O_NOCONV: conv = 0; break;
        case O_LAYERS: rc = cli_parse_size(got.name, got.value, 1, &L); layers_given = 1; break;
        case O_D: rc = cli_parse_size(got.name, got.value, 1, &D); break;
        case O_HEADS: rc = cli_parse_size(got.name, got.value, 1, &H); break;
        case O_F: rc = cli_parse_size(got.name, got.value, 1, &F); break;
        case O_T: rc = cli_parse_size(got.name, got.value, 3, &T); break;
        case O_P: rc = cli_parse_size(got.name, got.value, 1, &P); break;
        case O_VOCAB: rc = cli_parse_size(got.name, got.value, 3, &W); break;
        case O_BATCH: rc = cli_parse_size(got.name, got.value, 1, &c.batch); break;
        case O_STEPS: rc = cli_parse_size(got.name, got.value, 1, &steps); break;
        case O_TEST: rc = cli_parse_size(got.name, got.value, 1, &c.test_sequences); break;
        case O_LOG: rc = cli_parse_size(got.name, got.value, 0, &log_every); break;
        case O_SEED: rc = cli_parse_size(got.name, got.value, 0, &seed); c.seed = seed; break;
        case O_LR: rc = parse_positive(got.name, got.value, 0, &lr); break;
        case O_UPDATES: rc = cli_parse_size(got.name, got.value, 1, &c.task.updates); break;
        case O_RECENT: rc = cli_parse_size(got.name, got.value, 1, &c.task.recent); break;
        case O_STACKS: rc = cli_parse_size(got.name, got.value, 1, &stacks); break;
        case O_SET: rc = cli_parse_size(got.name, got.value, 1, &c.task.train_set); break;
        case O_WD: rc = parse_positive(got.name, got.value, 1, &wd); break;
        }
    }
    if (rc != 0)
        return rc;
    if (!task)
        return cli_fail(EXIT_BAD, "--task: missing (%s)", TASKS);
    const int older = strcmp(task, "mqar") == 0 || strcmp(task, "plain") == 0;
    if (older) /* dense's older names: noted once the command line is good */
        c.task.task = KDALAB_MQAR_DENSE;
    else if (kdalab_mqar_parse_task(task, &c.task.task) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--task: unknown task '%s' (%s)", task, TASKS);
    if (stacks && c.task.task != KDALAB_MQAR_STACK)
        return cli_fail(EXIT_BAD, "--stacks: only with --task stack");
    if (c.task.task == KDALAB_MQAR_STACK && !stacks)
        return cli_fail(EXIT_BAD, "--task stack: needs --stacks S");
    if (c.task.updates && c.task.task != KDALAB_MQAR_OVERWRITE)
        return cli_fail(EXIT_BAD, "--updates: only with --task overwrite");
    if (c.task.recent && c.task.task != KDALAB_MQAR_RECENT)
        return cli_fail(EXIT_BAD, "--recent: only with --task recent");
    if (c.task.task == KDALAB_MQAR_OVERWRITE && !c.task.updates)
        return cli_fail(EXIT_BAD, "--task overwrite: needs --updates U");
    if (c.task.task == KDALAB_MQAR_RECENT && !c.task.recent)
        return cli_fail(EXIT_BAD, "--task recent: needs --recent W");
    if (!mixer)
        return cli_fail(EXIT_BAD, "--mixer: missing (see --help)");
    const int f64 = precision && strcmp(precision, "fp64") == 0;
    if (precision && !f64 && strcmp(precision, "fp32") != 0)
        return cli_fail(EXIT_BAD, "--precision %s: fp32 or fp64", precision);
    if (gate && kdalab_output_gate_parse(gate, &c.model.output_gate) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--output-gate %s: sigmoid, swish or none", gate);
    if (conv_init && kdalab_conv_init_parse(conv_init, &c.model.conv_init) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--conv-init %s: uniform or normal0.02", conv_init);
    if (L > KDALAB_MODEL_MAX_LAYERS)
        return cli_fail(EXIT_BAD, "--layers %zu: at most %d", L, KDALAB_MODEL_MAX_LAYERS);
    if (kdalab_model_parse_mixers(mixer, &L, layers_given, c.model.mixer) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--mixer %s: %s%s", mixer, kdalab_last_error(),
                        strncmp(mixer, "hybrid:", 7) == 0 ? " (the blocks: --layers)" : "");
    /* an option that would change nothing is refused, not ignored and then
     * written into config.txt as if it had */
    int linear = 0;
    for (size_t l = 0; l < L; l++)
        linear |= c.model.mixer[l] != KDALAB_MIXER_ATTENTION;
    if (!linear && (gate || rank_given))
        return cli_fail(EXIT_BAD, "--%s does nothing with --mixer %s: every block is attention, "
                        "and only the linear mixers have an output gate",
                        gate ? "output-gate" : "gate-rank", mixer);
    if (!conv && (conv_init || conv_off))
        return cli_fail(EXIT_BAD, "--%s does nothing with --no-conv: there is no "
                        "convolution to %s", conv_init ? "conv-init" : "conv-off",
                        conv_init ? "initialise" : "leave off");
    if (conv_off && (kdalab_model_parse_blocks(conv_off, &c.model.conv_off) != KDALAB_OK ||
                     (L < 64 && c.model.conv_off >> L)))
        return cli_fail(EXIT_BAD, "--conv-off %s: want distinct block indices from 0 to %zu "
                        "joined by commas (the model has %zu blocks)", conv_off, L - 1, L);
    if (conv_off && c.model.conv_off == (L < 64 ? ((uint64_t)1 << L) - 1 : UINT64_MAX))
        return cli_fail(EXIT_BAD, "--conv-off %s names every block: that is --no-conv",
                        conv_off);
    c.model.L = L;
    c.model.D = D;
    c.model.H = H;
    c.model.F = F ? F : 2 * D;
    c.model.conv = conv;
    c.task.T = T;
    c.task.kv_pairs = P;
    if (c.task.task == KDALAB_MQAR_DENSE) {
        c.task.key_vocab = (W - 1) / 2;
        c.task.value_vocab = W - 1 - c.task.key_vocab;
    } else if (c.task.task == KDALAB_MQAR_STACK) {
        if (stacks > (W - 1) / 2 || W - 1 - 2 * stacks == 0)
            return cli_fail(EXIT_BAD, "--stacks %zu, --vocab %zu: the stack task needs 2 * "
                            "stacks operation tokens and at least one value below W - 1",
                            stacks, W);
        c.task.key_vocab = 2 * stacks;
        c.task.value_vocab = W - 1 - 2 * stacks;
    } else if (kdalab_mqar_zoology_split(W, &c.task) != KDALAB_OK) {
        return cli_fail(EXIT_BAD, "--task %s, --vocab %zu: %s", task, W, kdalab_last_error());
    }
    c.model.vocab = W;
    c.opt = (kdalab_adamw_config){lr, lr / 10, 0.9, 0.999, 1e-8, wd, 1.0, steps / 10, steps};
    /* the library names its own fields (T, key_vocab, D, ...): say which flags set them */
    kdalab_status s = kdalab_mqar_vocab_size(&c.task, NULL, NULL);
    if (s != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--task %s, --seq-len %zu, --kv-pairs %zu, --vocab %zu: %s",
                        task, T, P, W, kdalab_last_error());
    s = kdalab_model_size(&c.model, NULL, NULL);
    if (s != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--d-model %zu, --heads %zu, --mlp-hidden %zu, --layers %zu, "
                                  "--vocab %zu, --gate-rank %zu: %s",
                        D, H, c.model.F, c.model.L, W, c.model.gate_rank, kdalab_last_error());
    if ((rc = check_bounds(&c)) != 0)
        return rc;
    ckpt_plan_t plan;
    if (out && (rc = ckpt_plan(out, &plan)) != 0) /* fail now, not after training */
        return rc;
    /* the command line is good: now (not before its errors) the CBLAS's
     * kernels, which may restart the program once */
    kdalab_blas_choose_kernels(argv);
    if (older)
        fprintf(stderr, "kdalab train: note: --task %s is kdalab's dense recall layout (--task "
                        "dense); Zoology's MQAR is --task zoology\n",
                task);
    kdalab_train_keep_memory(); /* each step reuses the last one's pages */
    size_t n_params;
    kdalab_model_size(&c.model, &n_params, NULL);
    double *theta = malloc(n_params * sizeof *theta);
    float *theta32 = f64 ? NULL : malloc(n_params * sizeof *theta32);
    if (!theta || (!f64 && !theta32))
        return cli_fail(EXIT_FAIL, "cannot allocate %zu parameters", n_params);
    progress_ctx ctx = {log_every == SIZE_MAX ? (steps >= 20 ? steps / 20 : 1) : log_every};
    char design[320] = ""; /* the output gate and convolutions, when not the defaults */
    if (gate || conv_init || c.model.gate_rank || conv_off) {
        int at = snprintf(design, sizeof design, "; output gate %s, rank %zu, conv init %s",
                          kdalab_output_gate_name(c.model.output_gate), c.model.gate_rank,
                          kdalab_conv_init_name(c.model.conv_init));
        char blocks[KDALAB_MODEL_BLOCKS_TEXT]; /* as config.txt lists them */
        if (c.model.conv_off &&
            kdalab_model_format_blocks(c.model.conv_off, blocks, sizeof blocks) == KDALAB_OK)
            snprintf(design + at, sizeof design - (size_t)at, ", no convolution on block%s %s",
                     c.model.conv_off & (c.model.conv_off - 1) ? "s" : "", blocks);
    }
    fprintf(stderr, "kdalab train: %zu parameters, %zu blocks (%s), D = %zu, H = %zu, "
            "task %s, T = %zu, %zu pairs, vocab %zu, batch %zu, %zu steps, lr %g, seed %lu, "
            "%s%s\n",
            n_params, L, mixer, D, H, kdalab_mqar_task_name(c.task.task), T, P, W, c.batch,
            steps, lr, c.seed,
            f64 ? "fp64" : "fp32", design);
    kdalab_train_result r;
    s = f64 ? kdalab_train_mqar_f64(&c, theta, progress, &ctx, &r)
            : kdalab_train_mqar_f32(&c, theta32, progress, &ctx, &r);
    for (size_t i = 0; !f64 && i < n_params; i++)
        theta[i] = theta32[i];
    free(theta32);
    if (s != KDALAB_OK) {
        free(theta);
        return cli_fail(cli_exit_for(s), "%s", kdalab_last_error());
    }
    fprintf(stderr, "trained in %.1f s (%.0f tokens/s); test loss %.4f on %zu sequences\n",
            r.seconds, r.tokens_per_s, r.test_loss, c.test_sequences);
    rc = out ? ckpt_save(&plan, &c, theta, &r, f64 ? "fp64" : "fp32") : 0;
    free(theta);
    if (rc != 0) /* no accuracy= line: a script reading it must not take this run as done */
        fprintf(stderr, "kdalab train: test accuracy %.4f, but the checkpoint was not saved\n",
                r.test_accuracy);
    else
        printf("accuracy=%.4f\n", r.test_accuracy);
    return rc;
}
