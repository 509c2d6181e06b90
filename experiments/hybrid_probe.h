/*
 * experiments/hybrid_probe.h — the planted-token probe of experiment 05's
 * construction check (part 2 of 05_hybrid_cache.c), for stacks built with
 * lib/model/hybrid.c.
 */
#ifndef KDALAB_EXPERIMENTS_HYBRID_PROBE_H
#define KDALAB_EXPERIMENTS_HYBRID_PROBE_H

#include <stddef.h>

#include <gsl/gsl_rng.h>

#include "common.h"
#include "kdalab.h"

#define SEG 4096 /* prefill piece: bounds the layer-input buffer to L*SEG*d */

/* Scratch vectors of d doubles each. */
typedef struct {
    double *k, *v, *q, *o;
} hprobe_buffers;

/* cos(a, b) over n entries (0 when either is zero). */
double hprobe_cosine(const double *a, const double *b, size_t n);

/* Distances ~4 per octave, distinct integers, 1 .. limit, into out[0..max-1];
 * returns the count. */
size_t hprobe_distance_grid(size_t limit, size_t *out, size_t max);

/* Add the keys of the attention layers for T residual rows per layer
 * (li [L, T, d]) to ksum [L, d]; kbuf holds T * d. */
void hprobe_add_keys(lab_ctx *x, kdalab_hybrid *s, size_t L, size_t d, size_t T,
                     const double *li, double *kbuf, double *ksum);

/* Prefill T random N(0,1) tokens in pieces of at most SEG, summing the
 * attention keys into ksum. buf and kbuf hold SEG * d, li L * SEG * d. */
void hprobe_advance(lab_ctx *x, kdalab_hybrid *s, gsl_rng *rng, size_t L, size_t d, size_t T,
                    double *buf, double *li, double *kbuf, double *ksum);

/* Probe every layer's memory for one planted token, with the layer's own
 * key k_p and value v_p for it (xin: the token's residual input per layer,
 * [L, d]; H heads; tau: the attention probe's logit for the planted token):
 * the best cosine over KDA layers and over attention layers (-2 when the
 * stack has none of that kind). ksum: the attention keys' sums. */
void hprobe_probe(lab_ctx *x, kdalab_hybrid *s, size_t L, size_t d, size_t H, double tau,
                  const double *xin, const double *ksum, hprobe_buffers *b, double *best_kda,
                  double *best_att);

#endif
