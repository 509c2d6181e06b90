/*
 * bench/problem.h — the benchmark's problem, shared by bench/simd.c and the
 * ggml peer (bench/peer/ggml_peer.c) so both time the same inputs, drawn in
 * the same order from the same generator: unit-norm q, k rows, v ~ N(0, 1),
 * beta ~ U(0, 1), g ~ U(-0.5, 0) per channel, h0 ~ N(0, 0.01). Header-only
 * (static functions): each benchmark is one program.
 */
#ifndef KDALAB_BENCH_PROBLEM_H
#define KDALAB_BENCH_PROBLEM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "kdalab.h"

typedef struct {
    kdalab_dims d;
    float *q, *k, *v, *g, *beta, *h0, *o, *ht;
} problem;

static float *falloc(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench: out of memory (%zu floats)\n", n);
        exit(1);
    }
    return x;
}

/* Unit-norm q, k rows, v ~ N(0,1), beta ~ U(0,1), g ~ log(sigmoid(N(2,1)))-like
 * in [-0.5, 0) per channel: a realistic gate, not an easy one. */
static void problem_make(problem *p, gsl_rng *rng, size_t B, size_t T, size_t H, size_t K,
                         size_t V)
{
    p->d = (kdalab_dims){B, T, H, K, V};
    size_t bth = B * T * H;
    p->q = falloc(bth * K); p->k = falloc(bth * K); p->g = falloc(bth * K);
    p->v = falloc(bth * V); p->o = falloc(bth * V); p->beta = falloc(bth);
    p->h0 = falloc(B * H * K * V); p->ht = falloc(B * H * K * V);
    float *qk[2] = {p->q, p->k};
    for (int a = 0; a < 2; a++)
        for (size_t r = 0; r < bth; r++) {
            double n2 = 0;
            for (size_t c = 0; c < K; c++) {
                double x = gsl_ran_gaussian(rng, 1.0);
                qk[a][r * K + c] = (float)x;
                n2 += x * x;
            }
            for (size_t c = 0; c < K; c++)
                qk[a][r * K + c] = (float)(qk[a][r * K + c] / sqrt(n2));
        }
    for (size_t i = 0; i < bth * V; i++)
        p->v[i] = (float)gsl_ran_gaussian(rng, 1.0);
    for (size_t i = 0; i < bth; i++)
        p->beta[i] = (float)gsl_rng_uniform(rng);
    for (size_t i = 0; i < bth * K; i++)
        p->g[i] = (float)(-0.5 * gsl_rng_uniform(rng));
    for (size_t i = 0; i < B * H * K * V; i++)
        p->h0[i] = (float)(0.1 * gsl_ran_gaussian(rng, 1.0));
}

static void problem_free(problem *p)
{
    free(p->q); free(p->k); free(p->g); free(p->v); free(p->o); free(p->beta);
    free(p->h0); free(p->ht);
}

#endif /* KDALAB_BENCH_PROBLEM_H */
