/*
 * lib/reference/attention.c — causal scaled softmax attention without
 * positional encoding (chapter 01; the full-attention layer of the hybrid)
 * and its backward, in float64, in two forms of one function:
 *   - query by query (kdalab_attention_f64, kdalab_attention_bwd_f64): the
 *     reference, with an online softmax;
 *   - its fast path in matrix form (kdalab__attention_tiled_fwd_f64 / _bwd_f64,
 *     internal, declared in core/internal.h): a tile of queries at a time, so
 *     that its products are matrix products through CBLAS (OpenBLAS when
 *     linked). Training runs it: at d = 128, T = 256 the query-by-query loops
 *     were about half of every training step. tests/test_attention_tiled.c
 *     checks it against the reference.
 * The KV cache a decoder keeps is lib/reference/kv_cache.c.
 *
 * defines: kdalab_attention_f64, kdalab_attention_bwd_f64 (the reference);
 *          kdalab__attention_tiled_fwd_f64, kdalab__attention_tiled_bwd_f64 (its fast path);
 *          kdalab__attention_attend (internal, attention_steps.h)
 */
#include <gsl/gsl_cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "attention_steps.h"
#include "vectorise.h"

/* ---- the reference: the forward, query by query -------------------------- */

/*
 * o = sum_{j<n} softmax_j(s q . k_j) v_j over n keys/values whose rows sit
 * stride elements apart (k_j = k + j*kstride, v_j = v + j*vstride).
 * Computed in one pass with a running maximum (the online softmax), so no
 * exp() ever sees a positive argument. n >= 1.
 */
void kdalab__attention_attend(size_t K, size_t V, double scale, const double *q, const double *k,
                              size_t kstride, const double *v, size_t vstride, size_t n, double *o)
{
    double m = -INFINITY, z = 0; /* running max of the scores, running normaliser */
    for (size_t j = 0; j < V; j++)
        o[j] = 0;
    for (size_t t = 0; t < n; t++) {
        double score = 0;
        for (size_t c = 0; c < K; c++)
            score += q[c] * k[t * kstride + c];
        score *= scale;
        if (score > m) { /* a new maximum: rescale what was summed so far */
            double r = exp(m - score);
            z *= r;
            for (size_t j = 0; j < V; j++)
                o[j] *= r;
            m = score;
        }
        double p = exp(score - m);
        z += p;
        for (size_t j = 0; j < V; j++)
            o[j] += p * v[t * vstride + j];
    }
    for (size_t j = 0; j < V; j++)
        o[j] /= z;
}

kdalab_status kdalab_attention_f64(const kdalab_dims *dims, double scale, const double *q,
                                   const double *k, const double *v, double *o)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V)
    kdalab_clear_error();
    /* same validation as the linear mechanisms: no beta, no g */
    kdalab_status s = kdalab_check_f64(dims, KDALAB_LINEAR_ATTENTION, scale, q, k, v, NULL,
                                       NULL, NULL, o, NULL);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < T; t++) {
                size_t first = (b * T) * H + h;   /* (b, 0, h)  */
                size_t bth = (b * T + t) * H + h; /* (b, t, h)  */
                kdalab__attention_attend(K, V, scale, q + bth * K, k + first * K, H * K,
                                         v + first * V, H * V, t + 1, o + bth * V);
            }
    /* finite inputs can still overflow a score (q.k beyond the range) */
    size_t n_o = B * T * H * V;
    return kdalab_check_outputs_f64("softmax attention", o, n_o, NULL, 0, NULL, NULL);
}

/* ---- the reference: the backward ----------------------------------------- */

/*
 * Forward, per head and query t:  s_j = scale q_t . k_j (j <= t),
 * p = softmax(s), o_t = sum_j p_j v_j. Backward, with d_o_t the gradient of o_t:
 *   dv_j  += p_j d_o_t
 *   ds_j   = p_j (d_o_t . v_j - d_o_t . o_t)       (the softmax Jacobian)
 *   dq_t   = scale sum_j ds_j k_j
 *   dk_j  += scale ds_j q_t
 * The probabilities are recomputed from the scores with their running
 * maximum subtracted, as in the forward, so no exp() sees a positive argument.
 */

kdalab_status kdalab_attention_bwd_f64(const kdalab_dims *dims, double scale, const double *q,
                                       const double *k, const double *v, const double *d_o,
                                       double *dq, double *dk, double *dv)
{
    // q, k, dq, dk are (B, T, H, K); v, d_o, dv are (B, T, H, V)
    kdalab_clear_error();
    kdalab_counts n;
    kdalab_status s = kdalab_check_bwd_f64(dims, KDALAB_LINEAR_ATTENTION, scale, q, k, v, NULL,
                                           NULL, NULL, d_o, NULL, &n);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    double *p = malloc((T ? T : 1) * sizeof *p);           // (T) probabilities of one query
    double *o = malloc(V * sizeof *o);                      // (V) that query's output
    double *gk = calloc((T ? T : 1) * K, sizeof *gk);       // (T, K) one head's dk
    double *gv = calloc((T ? T : 1) * V, sizeof *gv);       // (T, V) one head's dv
    if (!p || !o || !gk || !gv) {
        free(p); free(o); free(gk); free(gv);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for the attention backward, T = %zu", T);
    }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            memset(gk, 0, T * K * sizeof *gk);
            memset(gv, 0, T * V * sizeof *gv);
            for (size_t t = 0; t < T; t++) {
                const size_t bt = (b * T + t) * H + h; /* (b, t, h) */
                const double *qt = q + bt * K, *dot_ = d_o + bt * V;
                /* probabilities and the output of query t */
                double m = -INFINITY, z = 0;
                for (size_t j = 0; j <= t; j++) {
                    const double *kj = k + ((b * T + j) * H + h) * K;
                    double sc = 0;
                    for (size_t c = 0; c < K; c++)
                        sc += qt[c] * kj[c];
                    p[j] = scale * sc;
                    m = p[j] > m ? p[j] : m;
                }
                for (size_t j = 0; j <= t; j++) {
                    p[j] = exp(p[j] - m);
                    z += p[j];
                }
                memset(o, 0, V * sizeof *o);
                for (size_t j = 0; j <= t; j++) {
                    p[j] /= z;
                    const double *vj = v + ((b * T + j) * H + h) * V;
                    for (size_t x = 0; x < V; x++)
                        o[x] += p[j] * vj[x];
                }
                double do_o = 0; /* d_o_t . o_t */
                for (size_t x = 0; x < V; x++)
                    do_o += dot_[x] * o[x];
                /* backward */
                if (dq)
                    memset(dq + bt * K, 0, K * sizeof *dq);
                for (size_t j = 0; j <= t; j++) {
                    const size_t bj = (b * T + j) * H + h;
                    const double *kj = k + bj * K, *vj = v + bj * V;
                    double dp = 0;
                    for (size_t x = 0; x < V; x++) {
                        dp += dot_[x] * vj[x];
                        gv[j * V + x] += p[j] * dot_[x];
                    }
                    double ds = p[j] * (dp - do_o);
                    for (size_t c = 0; c < K; c++) {
                        if (dq)
                            dq[bt * K + c] += scale * ds * kj[c];
                        gk[j * K + c] += scale * ds * qt[c];
                    }
                }
            }
            for (size_t t = 0; t < T; t++) {
                const size_t bt = (b * T + t) * H + h;
                if (dk)
                    memcpy(dk + bt * K, gk + t * K, K * sizeof *dk);
                if (dv)
                    memcpy(dv + bt * V, gv + t * V, V * sizeof *dv);
            }
        }
    free(p); free(o); free(gk); free(gv);
    return kdalab_check_grads_f64("attention backward", dims, KDALAB_LINEAR_ATTENTION, dq, dk,
                                  dv, NULL, NULL, NULL, NULL, NULL);
}

/* ---- the fast path: the tiled matrix form, forward and backward ---------- */

/*
 * Per head, for the queries of one tile t in [r0, r1) and the keys j < r1:
 *   S = scale Q K^T (masked: j > t), P = softmax over j <= t, O = P V;
 * backward, with dO given and O the forward's output:
 *   dP = dO V^T,  dS = P (dP - rowsum(dO o O))   (the softmax Jacobian)
 *   dQ = scale dS K,  dK += scale dS^T Q,  dV += P^T dO.
 * Each row's maximum is subtracted before exp(), so no exp() sees a positive
 * argument. Tiles are min(T, 64) queries; the scratch is one tile x T matrix
 * in the forward and two in the backward, whatever the batch.
 */

/* Queries per tile: one tile covers the whole sequence at T <= 64. */
#define TILE 64

/* P [m, n] (leading dimension n) = the causal softmax of the tile's scores
 * S = scale Q[r0, r0 + m) K[0, n)^T, row i being query r0 + i; entries past
 * the query (j > r0 + i) are 0. q, k point at the head's first row, ld apart. */
TRAIN_CLONES
static void tile_probabilities(size_t m, size_t n, size_t r0, size_t K, size_t ld, double scale,
                               const double *q, const double *k, double *P)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)K, scale,
                q + r0 * ld, (int)ld, k, (int)ld, 0.0, P, (int)n);
    for (size_t i = 0; i < m; i++) {
        double *row = P + i * n, mx = -INFINITY, z = 0;
        const size_t last = r0 + i; /* the query's own position */
#pragma omp simd reduction(max : mx)
        for (size_t j = 0; j <= last; j++)
            mx = row[j] > mx ? row[j] : mx;
#pragma omp simd
        for (size_t j = 0; j <= last; j++)
            row[j] = exp(row[j] - mx); /* vector-exp: train_expf in float32 */
        for (size_t j = 0; j <= last; j++) /* in order: the sum's rounding fixed */
            z += row[j];
#pragma omp simd
        for (size_t j = 0; j <= last; j++)
            row[j] /= z;
        for (size_t j = last + 1; j < n; j++)
            row[j] = 0;
    }
}

kdalab_status kdalab__attention_tiled_fwd_f64(const kdalab_dims *dims, double scale,
                                              const double *q, const double *k, const double *v,
                                              double *o)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V); K == V (the model's heads)
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t tile = T < TILE ? T : TILE, ldk = H * K, ldv = H * V;
    size_t tt, bytes;
    if (!kdalab_mul_size(tile, T, &tt) || !kdalab_mul_size(tt, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "softmax attention: T = %zu overflows", T);
    double *P = malloc(tt * sizeof *P); // (tile, T) one tile's probabilities
    if (!P)
        return kdalab_fail(KDALAB_ENOMEM, "no memory for attention scores, T = %zu", T);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const size_t first = (b * T) * H + h; /* (b, 0, h) */
            const double *qh = q + first * K, *kh = k + first * K, *vh = v + first * V;
            double *oh = o + first * V;
            for (size_t r0 = 0; r0 < T; r0 += tile) {
                const size_t m = T - r0 < tile ? T - r0 : tile, n = r0 + m;
                tile_probabilities(m, n, r0, K, ldk, scale, qh, kh, P);
                // O[r0, r0 + m) = P V[0, n)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)V, (int)n,
                            1.0, P, (int)n, vh, (int)ldv, 0.0, oh + r0 * ldv, (int)ldv);
            }
        }
    free(P);
    /* finite inputs can still overflow a score (q.k beyond the range) */
    return kdalab_check_outputs_f64("softmax attention", o, B * T * H * V, NULL, 0, NULL, NULL);
}

kdalab_status kdalab__attention_tiled_bwd_f64(const kdalab_dims *dims, double scale,
                                              const double *q, const double *k, const double *v,
                                              const double *o, const double *d_o, double *dq,
                                              double *dk, double *dv)
{
    // q, k, dq, dk are (B, T, H, K); v, o, d_o, dv are (B, T, H, V); K == V
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t tile = T < TILE ? T : TILE, ldk = H * K, ldv = H * V;
    size_t tt, bytes;
    if (!kdalab_mul_size(tile, T, &tt) || !kdalab_mul_size(tt, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "softmax attention backward: T = %zu overflows", T);
    double *P = malloc(tt * sizeof *P);  // (tile, T) probabilities
    double *dS = malloc(tt * sizeof *dS); // (tile, T) dP, then dS in place
    if (!P || !dS) {
        free(P);
        free(dS);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for the attention backward, T = %zu", T);
    }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const size_t first = (b * T) * H + h; /* (b, 0, h) */
            const double *qh = q + first * K, *kh = k + first * K, *vh = v + first * V;
            const double *oh = o + first * V, *doh = d_o + first * V;
            double *dqh = dq + first * K, *dkh = dk + first * K, *dvh = dv + first * V;
            for (size_t t = 0; t < T; t++) { /* dK, dV accumulate over the tiles */
                memset(dkh + t * ldk, 0, K * sizeof *dk);
                memset(dvh + t * ldv, 0, V * sizeof *dv);
            }
            for (size_t r0 = 0; r0 < T; r0 += tile) {
                const size_t m = T - r0 < tile ? T - r0 : tile, n = r0 + m;
                tile_probabilities(m, n, r0, K, ldk, scale, qh, kh, P);
                // dP = dO[r0, r0 + m) V[0, n)^T
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)V, 1.0,
                            doh + r0 * ldv, (int)ldv, vh, (int)ldv, 0.0, dS, (int)n);
                for (size_t i = 0; i < m; i++) {
                    const double *o_t = oh + (r0 + i) * ldv, *do_t = doh + (r0 + i) * ldv;
                    double delta = 0; /* dO_t . O_t */
                    for (size_t x = 0; x < V; x++)
                        delta += do_t[x] * o_t[x];
                    const size_t last = r0 + i; /* keys past the query: dS = 0, not
                                                 * 0 * dP (an overflowed dP there is unused) */
                    for (size_t j = 0; j <= last; j++)
                        dS[i * n + j] = P[i * n + j] * (dS[i * n + j] - delta);
                    for (size_t j = last + 1; j < n; j++)
                        dS[i * n + j] = 0;
                }
                // dQ = scale dS K;  dK += scale dS^T Q;  dV += P^T dO
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)K, (int)n,
                            scale, dS, (int)n, kh, (int)ldk, 0.0, dqh + r0 * ldk, (int)ldk);
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)K, (int)m,
                            scale, dS, (int)n, qh + r0 * ldk, (int)ldk, 1.0, dkh, (int)ldk);
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)V, (int)m, 1.0,
                            P, (int)n, doh + r0 * ldv, (int)ldv, 1.0, dvh, (int)ldv);
            }
        }
    free(P);
    free(dS);
    return kdalab_check_grads_f64("attention backward", dims, KDALAB_LINEAR_ATTENTION, dq, dk,
                                  dv, NULL, NULL, NULL, NULL, NULL);
}
