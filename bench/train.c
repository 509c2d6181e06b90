/*
 * bench/train.c — training throughput of the C model, not a test: tokens per
 * second of whole optimiser steps (forward + backward + AdamW) in float64 and
 * in float32 (the generated twins), and
 * the same model trained by PyTorch in eager mode, in float64 and in float32,
 * in the same run when a Python with torch is found: each configuration times
 * C, then PyTorch, back to back, so a drift of the machine's load hits both
 * alike. Each precision is compared with the same precision in PyTorch.
 *
 * Configurations (MQAR batches, two blocks, the short convolution on):
 *   quick   D = 64,  H = 2 (d = 32),  T = 64,  B = 32   (the quick
 *           configuration: kdalab train's defaults), for attention and KDA
 *   d128    D = 256, H = 2 (d = 128), T = 256, B = 4,   for attention and KDA
 * Each timing: one warm-up step, then `--steps` steps, repeated `--repeat`
 * times; the best and the median of the repeats are printed. Before timing,
 * the first step's loss is checked to be finite and near ln(vocab) (an
 * untrained model), the llm.c habit of validating before benchmarking.
 *
 * The peer: `$KDALAB_TORCH_PYTHON scripts/torch_train_bench.py` (default
 * /usr/bin/python3), which builds the same model in float64 or float32
 * (--dtype) with the same thread count (torch.set_num_threads) and prints
 * its tokens/s. If it cannot import torch, the benchmark says it has no peer.
 *
 *   bin/bench_train [--steps N] [--repeat N] [--config quick|d128] [--no-peer]
 */
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "kdalab.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const char *name, *mixer;
    size_t D, H, T, B, P;
} bench_cfg;

/* One training step of either precision on the flat parameters (double or
 * float, as f32 says); returns the loss through *loss. */
static kdalab_status step_once(int f32, const kdalab_model_config *c,
                               const kdalab_adamw_config *opt, const bench_cfg *b, size_t s,
                               size_t P, void *theta, void *grad, void *m, void *v,
                               const int32_t *tok, const int32_t *tgt, double *loss)
{
    kdalab_status st;
    if (f32) {
        float l = 0;
        st = kdalab_model_loss_f32(c, theta, b->B, b->T, tok, tgt, &l, NULL, grad);
        if (st == KDALAB_OK)
            st = kdalab_adamw_step_f32(opt, s, P, theta, grad, m, v, NULL, NULL);
        *loss = l;
    } else {
        st = kdalab_model_loss_f64(c, theta, b->B, b->T, tok, tgt, loss, NULL, grad);
        if (st == KDALAB_OK)
            st = kdalab_adamw_step_f64(opt, s, P, theta, grad, m, v, NULL, NULL);
    }
    return st;
}

/* tokens/s of `steps` training steps (after one warm-up), best and median of
 * `repeat`, in float32 when f32; 0 on a failure (printed). */
static int time_c(const bench_cfg *b, int f32, size_t steps, size_t repeat, double *best,
                  double *median)
{
    kdalab_model_config c = {.vocab = 65, .D = b->D, .H = b->H, .L = 2, .F = 2 * b->D,
                             .conv = 1};
    size_t L = 2;
    if (kdalab_model_parse_mixers(b->mixer, &L, 1, c.mixer) != KDALAB_OK)
        return fprintf(stderr, "bench_train: %s\n", kdalab_last_error()), 0;
    kdalab_mqar_config task = {.T = b->T, .kv_pairs = b->P, .key_vocab = 32, .value_vocab = 32};
    kdalab_adamw_config opt = {1e-3, 1e-4, 0.9, 0.999, 1e-8, 0.1, 1.0, 10, 1000};
    size_t P;
    kdalab_model_size(&c, &P, NULL);
    const size_t es = f32 ? sizeof(float) : sizeof(double);
    double *theta = malloc(P * sizeof *theta);
    void *grad = malloc(P * es), *m = calloc(P, es), *v = calloc(P, es);
    int32_t *tok = malloc(b->B * b->T * sizeof *tok), *tgt = malloc(b->B * b->T * sizeof *tgt);
    double t[64];
    int ok = theta && grad && m && v && tok && tgt && repeat <= 64;
    ok = ok && kdalab_model_init(&c, 1, theta) == KDALAB_OK;
    for (size_t i = 0; ok && f32 && i < P; i++) /* float32 parameters in place */
        ((float *)theta)[i] = (float)theta[i];
    double loss = 0;
    for (size_t r = 0; ok && r <= repeat; r++) { /* r = 0: the warm-up step */
        const size_t n = r == 0 ? 1 : steps;
        const double t0 = now();
        for (size_t s = 0; ok && s < n; s++) {
            ok = kdalab_mqar_make(&task, 1, s, b->B, tok, tgt) == KDALAB_OK &&
                 step_once(f32, &c, &opt, b, s, P, theta, grad, m, v, tok, tgt, &loss) ==
                     KDALAB_OK;
            if (ok && r == 0 && !(loss > 0.5 * 4.17 && loss < 2 * 4.17)) { /* ln 65 = 4.17 */
                fprintf(stderr, "bench_train: %s %s: first loss %g is not near ln 65: INVALID\n",
                        b->name, b->mixer, loss);
                ok = 0;
            }
        }
        if (r > 0)
            t[r - 1] = (double)(n * b->B * b->T) / (now() - t0);
    }
    if (!ok && kdalab_last_error()[0])
        fprintf(stderr, "bench_train: %s\n", kdalab_last_error());
    if (ok) {
        gsl_sort(t, 1, repeat);
        *best = t[repeat - 1];
        *median = gsl_stats_median_from_sorted_data(t, 1, repeat);
    }
    free(theta); free(grad); free(m); free(v); free(tok); free(tgt);
    return ok;
}

/* The peer's tokens/s (best, median) from the PyTorch script; 0 when none. */
static int time_torch(const char *python, const bench_cfg *b, int f32, size_t steps,
                      size_t repeat, int threads, double *best, double *median)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s scripts/torch_train_bench.py --mixer %s --d-model %zu --heads %zu "
             "--seq-len %zu --batch %zu --pairs %zu --steps %zu --repeat %zu --threads %d "
             "--dtype %s 2>/dev/null", python, b->mixer, b->D, b->H, b->T, b->B, b->P, steps,
             repeat, threads, f32 ? "float32" : "float64");
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    char line[256];
    int got = 0;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "tokens_per_s best=%lf median=%lf", best, median) == 2)
            got = 1;
    return pclose(p) == 0 && got;
}

int main(int argc, char **argv)
{
    size_t steps = 10, repeat = 3;
    const char *only = NULL;
    int peer = 1;
    static const struct option opts[] = {{"steps", required_argument, NULL, 's'},
                                         {"repeat", required_argument, NULL, 'r'},
                                         {"config", required_argument, NULL, 'c'},
                                         {"no-peer", no_argument, NULL, 'n'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o == 's' || o == 'r') {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 64)
                return fprintf(stderr, "bench_train: --%s wants 1 .. 64\n",
                               o == 's' ? "steps" : "repeat"), 2;
            *(o == 's' ? &steps : &repeat) = (size_t)v;
        } else if (o == 'c') {
            only = optarg;
        } else if (o == 'n') {
            peer = 0;
        } else {
            printf("usage: bin/bench_train [--steps N] [--repeat N] [--config quick|d128] "
                   "[--no-peer]\n");
            return o == 'h' ? 0 : 2;
        }
    }
    kdalab_blas_choose_kernels(argv); /* a good command line: may restart the program, once */
    kdalab_train_keep_memory(); /* each step reuses the last one's pages */
    const bench_cfg cfgs[] = {
        {"quick", "attention", 64, 2, 64, 32, 8},  {"quick", "kda", 64, 2, 64, 32, 8},
        {"d128", "attention", 256, 2, 256, 4, 32}, {"d128", "kda", 256, 2, 256, 4, 32},
    };
    const char *python = getenv("KDALAB_TORCH_PYTHON");
    python = python ? python : "/usr/bin/python3";
    const int threads = omp_get_max_threads();
    char probe[512];
    snprintf(probe, sizeof probe, "%s -c 'import torch' >/dev/null 2>&1", python);
    peer = peer && system(probe) == 0;
    printf("# kdalab %s training benchmark: tokens/s of whole steps (forward + backward + "
           "AdamW), float64 and float32\n", KDALAB_VERSION);
    const char *blas = kdalab_blas_kernels();
    printf("# threads: %d; CBLAS: %s%s (PyTorch's too, when it runs on this OpenBLAS)\n",
           threads, blas ? "OpenBLAS, kernels " : "not OpenBLAS", blas ? blas : "");
    printf("# peer: %s\n", peer ? "PyTorch eager, float64 and float32, same threads, "
                                  "alternated in this run"
                                : "none (no Python with torch; set KDALAB_TORCH_PYTHON)");
    printf("# tokens/s, best and median of %zu repeats of %zu steps; the ratios are of medians,\n"
           "# each precision against PyTorch in the same precision\n", repeat, steps);
    printf("# %-6s %-10s %5s %4s %5s %4s  %9s %9s %9s %9s  %9s %9s %9s %9s  %s\n", "config",
           "mixer", "D", "H", "T", "B", "fp64 best", "fp64 med", "torch64 b", "torch64 m",
           "fp32 best", "fp32 med", "torch32 b", "torch32 m", "fp64/t64 fp32/t32");
    int failed = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const bench_cfg *b = &cfgs[i];
        if (only && strcmp(only, b->name) != 0)
            continue;
        double cb = 0, cm = 0, fb = 0, fm = 0, tb = 0, tm = 0, ub = 0, um = 0;
        int okc = time_c(b, 0, steps, repeat, &cb, &cm);
        int okt = peer && time_torch(python, b, 0, steps, repeat, threads, &tb, &tm);
        int okf = time_c(b, 1, steps, repeat, &fb, &fm);
        int oku = peer && time_torch(python, b, 1, steps, repeat, threads, &ub, &um);
        failed |= !okc || !okf;
        char t64[2][16] = {"-", "-"}, t32[2][16] = {"-", "-"}, r64[16] = "-", r32[16] = "-";
        if (okt) {
            snprintf(t64[0], sizeof t64[0], "%.0f", tb);
            snprintf(t64[1], sizeof t64[1], "%.0f", tm);
            snprintf(r64, sizeof r64, "%.2fx", cm / tm);
        }
        if (oku) {
            snprintf(t32[0], sizeof t32[0], "%.0f", ub);
            snprintf(t32[1], sizeof t32[1], "%.0f", um);
            snprintf(r32, sizeof r32, "%.2fx", fm / um);
        }
        printf("  %-6s %-10s %5zu %4zu %5zu %4zu  %9.0f %9.0f %9s %9s  %9.0f %9.0f %9s %9s  "
               "%5s %5s\n", b->name, b->mixer, b->D, b->H, b->T, b->B, cb, cm, t64[0], t64[1],
               fb, fm, t32[0], t32[1], r64, r32);
        fflush(stdout);
    }
    return failed;
}
