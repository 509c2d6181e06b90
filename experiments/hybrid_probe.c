/*
 * experiments/hybrid_probe.c — the planted-token probe of experiment 05's
 * construction check (05_hybrid_cache.c, part 2): the distances probed, the
 * prefill that sums each attention layer's keys, and the read of every
 * layer's memory with the planted token's own key. hybrid_probe.h says what
 * each function does.
 */
#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "hybrid_probe.h"

double hprobe_cosine(const double *a, const double *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    return (aa > 0 && bb > 0) ? ab / sqrt(aa * bb) : 0.0;
}

/* Distances ~4 per octave, distinct integers, 1 .. limit; returns the count. */
size_t hprobe_distance_grid(size_t limit, size_t *out, size_t max)
{
    size_t n = 0, last = 0;
    for (int j = 0; n < max; j++) {
        size_t dist = (size_t)llround(pow(2.0, j / 4.0));
        if (dist > limit)
            break;
        if (dist != last)
            out[n++] = last = dist;
    }
    if (n < max && last != limit && limit > 0)
        out[n++] = limit;
    return n;
}

/* Add the keys of attention layers for T residual rows per layer (li [L, T, d])
 * to ksum [L, d]. */
void hprobe_add_keys(lab_ctx *x, kdalab_hybrid *s, size_t L, size_t d, size_t T,
                     const double *li, double *kbuf, double *ksum)
{
    for (size_t l = 0; l < L; l++) {
        kdalab_kv_cache *cache;
        if (kdalab_hybrid_kv_cache(s, l, &cache) != KDALAB_OK)
            continue;
        lab_check(x, kdalab_hybrid_layer_project(s, l, T, li + l * T * d, NULL, kbuf, NULL,
                                                 NULL, NULL),
                  "key projection");
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < d; c++)
                ksum[l * d + c] += kbuf[t * d + c];
    }
}

/* Prefill T random tokens in pieces of at most SEG, summing the attention keys. */
void hprobe_advance(lab_ctx *x, kdalab_hybrid *s, gsl_rng *rng, size_t L, size_t d, size_t T,
                    double *buf, double *li, double *kbuf, double *ksum)
{
    while (T > 0) {
        size_t n = T < SEG ? T : SEG;
        for (size_t i = 0; i < n * d; i++) buf[i] = gsl_ran_gaussian(rng, 1.0);
        lab_check(x, kdalab_hybrid_prefill(s, n, buf, NULL, li), "recall prefill");
        hprobe_add_keys(x, s, L, d, n, li, kbuf, ksum);
        T -= n;
    }
}

/* Probe every layer's memory for one planted token, with the layer's own
 * key k_p and value v_p for it (xin: the token's residual input per layer,
 * [L, d]): the best cosine over KDA layers and over attention layers (-2
 * when the stack has none of that kind). ksum: the attention keys' sums. */
void hprobe_probe(lab_ctx *x, kdalab_hybrid *s, size_t L, size_t d, size_t H, double tau,
                  const double *xin, const double *ksum, hprobe_buffers *b, double *best_kda,
                  double *best_att)
{
    size_t dh = d / H;
    double scale = kdalab_default_scale(dh);
    double *k = b->k, *v = b->v, *q = b->q, *o = b->o;
    *best_kda = *best_att = -2;
    for (size_t l = 0; l < L; l++) {
        lab_check(x, kdalab_hybrid_layer_project(s, l, 1, xin + l * d, NULL, k, v, NULL, NULL),
                  "probe projection");
        double *S;
        kdalab_kv_cache *cache;
        if (kdalab_hybrid_kda_state(s, l, &S) == KDALAB_OK) {
            for (size_t h = 0; h < H; h++)
                for (size_t j = 0; j < dh; j++) {
                    double acc = 0;
                    for (size_t c = 0; c < dh; c++)
                        acc += k[h * dh + c] * S[h * dh * dh + c * dh + j];
                    o[h * dh + j] = acc;
                }
            *best_kda = fmax(*best_kda, hprobe_cosine(o, v, d));
        } else {
            lab_check(x, kdalab_hybrid_kv_cache(s, l, &cache), "kv cache");
            /* q along k_p - mean key: every logit moves by the same
             * q.mean, so this scores the centred keys. */
            double n_tok = (double)kdalab_kv_cache_tokens(cache);
            for (size_t h = 0; h < H; h++) {
                double nn = 0;
                for (size_t c = 0; c < dh; c++) {
                    size_t i_c = h * dh + c;
                    q[i_c] = k[i_c] - ksum[l * d + i_c] / n_tok;
                    nn += q[i_c] * q[i_c];
                }
                for (size_t c = 0; c < dh; c++)
                    q[h * dh + c] = nn > 0 ? tau / scale * q[h * dh + c] / nn : 0.0;
            }
            lab_check(x, kdalab_kv_cache_attend(cache, scale, q, o), "probe attend");
            *best_att = fmax(*best_att, hprobe_cosine(o, v, d));
        }
    }
}

