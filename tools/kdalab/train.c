/*
 * tools/kdalab/train.c — `kdalab train`: train one small model on
 * multi-query associative recall (kdalab_train_mqar_f64), print a progress line
 * while it runs and `accuracy=<test accuracy>` at the end, and save the
 * trained parameters as one .npy per tensor with the configuration beside
 * them.
 *
 * defines: cmd_train (declared in cli.h)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char HELP[] =
    "usage: kdalab train --task mqar --mixer M [options]\n"
    "\n"
    "Train a model (embedding -> L blocks of [RMSNorm -> mixer -> residual;\n"
    "RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm -> LM head) on multi-query\n"
    "associative recall with AdamW; then print its accuracy on a\n"
    "fresh test set as `accuracy=<a>` on its own line of standard output.\n"
    "\n"
    "  --task mqar          the task (the only one so far)\n"
    "  --mixer M            attention | linear_attention | deltanet | gated_deltanet |\n"
    "                       kda: every block; hybrid:N: N KDA blocks then one\n"
    "                       attention block, repeated (Kimi Linear is hybrid:3);\n"
    "                       or a comma list, one per block (--layers follows it)\n"
    "  --layers L           blocks (default 2)\n"
    "  --d-model D          width (default 64)     --heads H   heads (default 2)\n"
    "  --mlp-hidden F       the MLP's hidden width (default 2 D)\n"
    "  --no-conv            no short convolution on q, k, v (on by default)\n"
    "  --seq-len T          tokens per sequence (default 64)\n"
    "  --kv-pairs P         key-value pairs per sequence (default 8)\n"
    "  --vocab W            vocabulary: 1 filler, (W-1)/2 keys, the rest values\n"
    "                       (default 64)\n"
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
    "                       (DIR new, or a checkpoint directory it replaces)\n"
    "  --log-every K        a progress line every K steps (default: 20 lines in all;\n"
    "                       0: none)\n"
    "\n"
    "Exit status: 0 trained, 1 diverged or could not save, 2 bad command line.\n";

enum { O_TASK = 256, O_MIXER, O_LAYERS, O_D, O_HEADS, O_F, O_NOCONV, O_T, O_P, O_VOCAB,
       O_BATCH, O_STEPS, O_LR, O_WD, O_TEST, O_SEED, O_OUT, O_LOG, O_PREC };

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

int cmd_train(int argc, char **argv)
{
    cli_who = "kdalab train";
    kdalab_train_config c;
    memset(&c, 0, sizeof c);
    size_t L = 2, D = 64, H = 2, F = 0, T = 64, P = 8, W = 64, steps = 1500, log_every = SIZE_MAX;
    double lr = 1e-3, wd = 0.1;
    const char *task = NULL, *mixer = NULL, *out = NULL, *precision = NULL;
    int conv = 1, layers_given = 0, rc = 0;
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
        case O_WD: rc = parse_positive(got.name, got.value, 1, &wd); break;
        }
    }
    if (rc != 0)
        return rc;
    if (!task || strcmp(task, "mqar") != 0)
        return cli_fail(EXIT_BAD, "--task: %s (the only task is mqar)",
                        task ? "unknown task" : "missing");
    if (!mixer)
        return cli_fail(EXIT_BAD, "--mixer: missing (see --help)");
    const int f64 = precision && strcmp(precision, "fp64") == 0;
    if (precision && !f64 && strcmp(precision, "fp32") != 0)
        return cli_fail(EXIT_BAD, "--precision %s: fp32 or fp64", precision);
    if (L > KDALAB_MODEL_MAX_LAYERS)
        return cli_fail(EXIT_BAD, "--layers %zu: at most %d", L, KDALAB_MODEL_MAX_LAYERS);
    if (kdalab_model_parse_mixers(mixer, &L, layers_given, c.model.mixer) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--mixer %s: %s", mixer, kdalab_last_error());
    c.model.L = L;
    c.model.D = D;
    c.model.H = H;
    c.model.F = F ? F : 2 * D;
    c.model.conv = conv;
    c.task.T = T;
    c.task.kv_pairs = P;
    c.task.key_vocab = (W - 1) / 2;
    c.task.value_vocab = W - 1 - c.task.key_vocab;
    c.model.vocab = W;
    c.opt = (kdalab_adamw_config){lr, lr / 10, 0.9, 0.999, 1e-8, wd, 1.0, steps / 10, steps};
    kdalab_status s = kdalab_mqar_vocab_size(&c.task, NULL, NULL);
    if (s == KDALAB_OK)
        s = kdalab_model_size(&c.model, NULL, NULL);
    if (s != KDALAB_OK)
        return cli_fail(EXIT_BAD, "%s", kdalab_last_error());
    if (out && (rc = ckpt_check_out(out)) != 0) /* fail now, not after training */
        return rc;
    /* the command line is good: now (not before its errors) the CBLAS's
     * kernels, which may restart the program once */
    kdalab_blas_choose_kernels(argv);
    size_t n_params;
    kdalab_model_size(&c.model, &n_params, NULL);
    double *theta = malloc(n_params * sizeof *theta);
    float *theta32 = f64 ? NULL : malloc(n_params * sizeof *theta32);
    if (!theta || (!f64 && !theta32))
        return cli_fail(EXIT_FAIL, "cannot allocate %zu parameters", n_params);
    progress_ctx ctx = {log_every == SIZE_MAX ? (steps >= 20 ? steps / 20 : 1) : log_every};
    fprintf(stderr, "kdalab train: %zu parameters, %zu blocks (%s), D = %zu, H = %zu, "
            "T = %zu, %zu pairs, vocab %zu, batch %zu, %zu steps, lr %g, seed %lu, %s\n",
            n_params, L, mixer, D, H, T, P, W, c.batch, steps, lr, c.seed,
            f64 ? "fp64" : "fp32");
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
    rc = out ? ckpt_save(out, &c, theta, &r, f64 ? "fp64" : "fp32") : 0;
    free(theta);
    if (rc != 0) /* no accuracy= line: a script reading it must not take this run as done */
        fprintf(stderr, "kdalab train: test accuracy %.4f, but the checkpoint was not saved\n",
                r.test_accuracy);
    else
        printf("accuracy=%.4f\n", r.test_accuracy);
    return rc;
}
