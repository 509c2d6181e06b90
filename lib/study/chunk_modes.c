/*
 * lib/study/chunk_modes.c — the chunkwise form in float64 with every KDA
 * decay mode (safe, pairwise, rescaled, anchored): the forms experiment 03
 * and the precision tests study. The float32 form (chunk_modes_f32.c,
 * generated from chunk_modes.c by scripts/make_f32.sh) also emulates bf16 /
 * fp16 storage (store() below).
 *
 * defines: kdalab_study_chunk_f64 (internal: what kdalab_chunk_f64 runs for
 *          every decay mode but 'safe')
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kdalab_precision.h"

/* Everything one chunk needs; buffers are sized for a full chunk of C. */
typedef struct {
    size_t L, K, V;            /* positions in this chunk, head dims            */
    size_t gw;                 /* log-decay values per position: 0, 1 or K      */
    kdalab_chunk_opts opts;    /* chunk, sub-chunk, decay mode, precision       */
    double scale;
    double *Q, *Kc, *Vc, *beta;  /* the chunk's rows: [L,K], [L,K], [L,V], [L]     */
    double *g;                   /* log-decay of the chunk's rows [L, gw]         */
    double *Gin, *Gout;          /* [L, gw] sum of g over 0..r, over r+1..L-1     */
    double *Akk, *Aqk;           /* [C,C] lower-triangular score matrices          */
    double *W, *U;               /* [C,K], [C,V] right-hand sides of the UT solve  */
    double *Xs, *Ys;             /* [C,K] rows rescaled by a decay factor          */
    double *E;                   /* [C,K] exponents: span sums of g                */
    double *run;                 /* [K] a running span sum                         */
    double *S;                   /* [K,V] the state entering / leaving the chunk   */
    double max_exponent;       /* largest exponent formed (for the report); f64-scalar */
} chunk_ws_f64;

/* Where a production kernel stores a value, emulate its storage format. */
static inline double store_f64(const chunk_ws_f64 *w, double x)
{
    /* the float32 form rounds to the emulated format; the other form is
     * exact (the options check refuses it an emulated precision) */
    if (sizeof(double) == sizeof(float))
        return kdalab_round(w->opts.precision, x);
    (void)w;
    return x;
}

static double dot_f64(const double *x, const double *y, size_t n)
{
    double s = 0;
    for (size_t c = 0; c < n; c++)
        s += x[c] * y[c];
    return s;
}

/* dst = store(src * exp(sign * e)) per channel; records the exponent. */
static void rescale_row_f64(chunk_ws_f64 *w, double *dst, const double *src, const double *e,
                            double sign)
{
    for (size_t c = 0; c < w->K; c++) {
        double x = sign * e[c];
        if (x > w->max_exponent)
            w->max_exponent = x;
        dst[c] = store_f64(w, src[c] * exp(x));
    }
}

/*
 * The decayed Gram matrix of two sets of rows of the chunk:
 *   out[i][j] = sum_c X[i][c] Y[j][c] exp(sum_{m=j+1..i} g_m[c])   for j < i
 * (and j == i when include_diag). Steps 1 and 5 of REFERENCE.md. Only j <= i
 * is ever touched, so o[i] cannot depend on a later position, not even
 * through a zero.
 *
 * For KDA this is where the decay modes differ. The rows are cut into
 * sub-chunks (of c positions; of the whole chunk for pairwise/rescaled), and
 * a query row i in the sub-chunk [i0, i1) is anchored at the boundary before
 * i0:
 *   - rows j of an EARLIER sub-chunk: the decay factors into
 *     exp(sum_{m=i0..i} g_m) * exp(sum_{m=j+1..i0-1} g_m), both exponents
 *     <= 0: a plain dot of rescaled rows;
 *   - rows j of the SAME sub-chunk: pairwise (safe, pairwise modes: every
 *     exponent <= 0) or rescaled about the anchor (rescaled, anchored modes:
 *     Y_j * exp(-sum_{m=i0..j} g_m) has a POSITIVE exponent, up to |sum g|
 *     over the span — the floating-point range problem).
 */
static void decayed_gram_f64(chunk_ws_f64 *w, const double *X, const double *Y, int include_diag,
                             double *out)
{
    const size_t L = w->L, K = w->K, C = w->opts.chunk;
    const double *g = w->g;

    if (w->gw <= 1) { /* no decay, or one scalar per position: a C x C mask */
        for (size_t i = 0; i < L; i++) {
            double e = 0; /* sum_{m=j+1..i} g_m, grown as j walks down from i */
            for (size_t j = i + 1; j-- > 0;) {
                if (j < i || include_diag) {
                    double d = dot_f64(X + i * K, Y + j * K, K);
                    out[i * C + j] = w->gw ? d * exp(e) : d; /* exponent <= 0 */
                }
                if (w->gw)
                    e += g[j];
            }
        }
        return;
    }

    kdalab_decay_mode mode = w->opts.decay;
    size_t sub = (mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_ANCHORED)
                     ? w->opts.subchunk
                     : L;
    int diag_pairwise = (mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_PAIRWISE);
    double *E = w->E, *run = w->run;

    for (size_t i0 = 0; i0 < L; i0 += sub) {
        size_t i1 = i0 + sub < L ? i0 + sub : L;

        /* X rows decayed down to the anchor: E_i = sum_{m=i0..i} g_m <= 0 */
        for (size_t i = i0; i < i1; i++) {
            for (size_t c = 0; c < K; c++)
                E[i * K + c] = (i > i0 ? E[(i - 1) * K + c] : 0) + g[i * K + c];
            rescale_row_f64(w, w->Xs + i * K, X + i * K, E + i * K, 1);
        }

        /* off-diagonal blocks: Y rows of earlier sub-chunks, decayed up to the
         * anchor by exp(sum_{m=j+1..i0-1} g_m) <= 1 */
        memset(run, 0, K * sizeof *run);
        for (size_t j = i0; j-- > 0;) {
            rescale_row_f64(w, w->Ys + j * K, Y + j * K, run, 1);
            for (size_t i = i0; i < i1; i++)
                out[i * C + j] = dot_f64(w->Xs + i * K, w->Ys + j * K, K);
            for (size_t c = 0; c < K; c++)
                run[c] += g[j * K + c];
        }

        /* the diagonal block */
        if (diag_pairwise) {
            for (size_t i = i0; i < i1; i++) {
                memset(run, 0, K * sizeof *run); /* sum_{m=j+1..i} g_m, per channel */
                for (size_t j = i + 1; j-- > i0;) {
                    if (j < i || include_diag) {
                        double acc = 0;
                        for (size_t c = 0; c < K; c++)
                            acc += X[i * K + c] * Y[j * K + c] * exp(run[c]);
                        out[i * C + j] = acc;
                    }
                    for (size_t c = 0; c < K; c++)
                        run[c] += g[j * K + c];
                }
            }
        } else {
            for (size_t i = i0; i < i1; i++) {
                /* Y_i / gamma_i about the anchor: exponent -E_i >= 0 */
                rescale_row_f64(w, w->Ys + i * K, Y + i * K, E + i * K, -1);
                for (size_t j = i0; j < i + (include_diag ? 1 : 0); j++)
                    out[i * C + j] = dot_f64(w->Xs + i * K, w->Ys + j * K, K);
            }
        }
    }
}

/* gamma_r[c] = exp(sum_{m=0..r} g_m[c]) <= 1: the decay from the chunk start to r. */
static double gamma_f64(const chunk_ws_f64 *w, size_t r, size_t c)
{
    return w->gw == 0 ? 1 : exp(w->Gin[r * w->gw + (w->gw == 1 ? 0 : c)]);
}

/* exp(sum_{m=r+1..L-1} g_m[c]) <= 1: the decay from r to the chunk end. */
static double decay_to_end_f64(const chunk_ws_f64 *w, size_t r, size_t c)
{
    return w->gw == 0 ? 1 : exp(w->Gout[r * w->gw + (w->gw == 1 ? 0 : c)]);
}

/*
 * The UT transform, applied to right-hand sides: solve (I + A_kk) X = R for X
 * in place (R holds Diag(beta) times the rows), by forward substitution over
 * the unit lower-triangular I + A_kk. Equivalent to X = T R' with
 * T = (I + A_kk)^-1 Diag(beta), REFERENCE.md step 2.
 */
static void ut_transform_f64(const chunk_ws_f64 *w, double *X, size_t width)
{
    const size_t C = w->opts.chunk;
    for (size_t i = 0; i < w->L; i++)
        for (size_t m = 0; m < i; m++) {
            double a = w->Akk[i * C + m];
            for (size_t c = 0; c < width; c++)
                X[i * width + c] -= a * X[m * width + c];
        }
}

/* One chunk: o rows for its L positions (written through o_rows with the
 * given stride) and the state S advanced past it. Steps 1-7. */
static void chunk_step_f64(chunk_ws_f64 *w, kdalab_mechanism mech, double *o, size_t o_stride)
{
    const size_t L = w->L, K = w->K, V = w->V, C = w->opts.chunk;
    double *S = w->S;
    int delta = kdalab_mechanism_has_delta(mech);

    /* 1. A_kk[i][j] = beta_i sum_c k_i k_j exp(G_i - G_j), j < i */
    if (delta) {
        decayed_gram_f64(w, w->Kc, w->Kc, 0, w->Akk);
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < i; j++)
                w->Akk[i * C + j] *= w->beta[i];
    }
    /* 5. A_qk[i][j] = s sum_c q_i k_j exp(G_i - G_j), j <= i */
    decayed_gram_f64(w, w->Q, w->Kc, 1, w->Aqk);

    /* 2-3. W = T (gamma * K), U = T V; linear attention: W = 0, U = V */
    for (size_t r = 0; r < L; r++) {
        double b = delta ? w->beta[r] : 1;
        for (size_t c = 0; c < K; c++)
            w->W[r * K + c] = delta ? b * gamma_f64(w, r, c) * w->Kc[r * K + c] : 0;
        for (size_t j = 0; j < V; j++)
            w->U[r * V + j] = b * w->Vc[r * V + j];
    }
    if (delta) {
        ut_transform_f64(w, w->W, K);
        ut_transform_f64(w, w->U, V);
    }

    /* 4. V_new = U - W S (in place in U) */
    if (delta)
        for (size_t r = 0; r < L; r++)
            for (size_t c = 0; c < K; c++) {
                double wrc = w->W[r * K + c];
                for (size_t j = 0; j < V; j++)
                    w->U[r * V + j] -= wrc * S[c * V + j];
            }
    const double *Vnew = w->U;

    /* 6. O = s (gamma * Q) S + A_qk V_new */
    for (size_t i = 0; i < L; i++) {
        double *oi = o + i * o_stride;
        for (size_t j = 0; j < V; j++)
            oi[j] = 0;
        for (size_t c = 0; c < K; c++) {
            double qg = store_f64(w, w->Q[i * K + c] * gamma_f64(w, i, c));
            for (size_t j = 0; j < V; j++)
                oi[j] += qg * S[c * V + j];
        }
        for (size_t m = 0; m <= i; m++) {
            double a = w->Aqk[i * C + m];
            for (size_t j = 0; j < V; j++)
                oi[j] += a * Vnew[m * V + j];
        }
        for (size_t j = 0; j < V; j++)
            oi[j] *= w->scale;
    }

    /* 7. S <- Diag(gamma_L) S + (exp(G_L - G) * K)^T V_new */
    for (size_t c = 0; c < K; c++) {
        double gl = gamma_f64(w, L - 1, c);
        for (size_t j = 0; j < V; j++)
            S[c * V + j] *= gl;
        for (size_t r = 0; r < L; r++) {
            double kd = store_f64(w, w->Kc[r * K + c] * decay_to_end_f64(w, r, c));
            for (size_t j = 0; j < V; j++)
                S[c * V + j] += kd * Vnew[r * V + j];
        }
    }
}

static void chunk_ws_free_f64(chunk_ws_f64 *w)
{
    free(w->Q); free(w->Kc); free(w->Vc); free(w->beta);
    free(w->g); free(w->Gin); free(w->Gout);
    free(w->Akk); free(w->Aqk); free(w->W); free(w->U);
    free(w->Xs); free(w->Ys); free(w->E); free(w->run); free(w->S);
}

static kdalab_status chunk_ws_alloc_f64(chunk_ws_f64 *w, size_t C, size_t K, size_t V)
{
    size_t CK, CV, CC, KV, bytes;
    if (!kdalab_mul_size(C, K, &CK) || !kdalab_mul_size(C, V, &CV) ||
        !kdalab_mul_size(C, C, &CC) || !kdalab_mul_size(K, V, &KV) ||
        !kdalab_mul_size(CK > CV ? CK : CV, sizeof(double), &bytes) ||
        !kdalab_mul_size(CC > KV ? CC : KV, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "chunk C = %zu with K = %zu, V = %zu overflows",
                           C, K, V);
    w->Q = malloc(CK * sizeof(double));   w->Kc = malloc(CK * sizeof(double));
    w->Vc = malloc(CV * sizeof(double));  w->beta = malloc(C * sizeof(double));
    w->g = malloc(CK * sizeof(double));   w->Gin = malloc(CK * sizeof(double));
    w->Gout = malloc(CK * sizeof(double));
    w->Akk = calloc(CC, sizeof(double));  w->Aqk = calloc(CC, sizeof(double));
    w->W = malloc(CK * sizeof(double));   w->U = malloc(CV * sizeof(double));
    w->Xs = malloc(CK * sizeof(double));  w->Ys = malloc(CK * sizeof(double));
    w->E = malloc(CK * sizeof(double));   w->run = malloc(K * sizeof(double));
    w->S = malloc(KV * sizeof(double));
    if (!w->Q || !w->Kc || !w->Vc || !w->beta || !w->g || !w->Gin || !w->Gout || !w->Akk ||
        !w->Aqk || !w->W || !w->U || !w->Xs || !w->Ys || !w->E || !w->run || !w->S) {
        chunk_ws_free_f64(w);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for chunk C = %zu, K = %zu, V = %zu", C,
                           K, V);
    }
    return KDALAB_OK;
}

kdalab_status kdalab_study_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v, const double *g,
                               const double *beta, const double *h0, double *o, double *ht,
                               const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_counts n;
    kdalab_chunk_opts op;
    kdalab_status s = kdalab_check_f64(dims, mech, scale, q, k, v, g, beta, h0, o, &n);
    if (s != KDALAB_OK)
        return s;
    s = kdalab_check_chunk_opts(opts, sizeof(double) == 8, &op);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1); /* no buffer larger than T */

    chunk_ws_f64 w = {.K = K, .V = V, .gw = kdalab_mechanism_g_width(mech, K), .opts = op,
                      .scale = scale};
    w.opts.chunk = C;
    s = chunk_ws_alloc_f64(&w, C, K, V);
    if (s != KDALAB_OK)
        return s;

    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            if (h0)
                memcpy(w.S, h0 + bh * K * V, K * V * sizeof(double));
            else
                memset(w.S, 0, K * V * sizeof(double)); /* no h0: a zero state */
            for (size_t t0 = 0; t0 < T; t0 += C) {
                w.L = t0 + C <= T ? C : T - t0;
                /* gather the chunk's rows, stored as the kernel would store them */
                for (size_t r = 0; r < w.L; r++) {
                    size_t bth = (b * T + t0 + r) * H + h;
                    for (size_t c = 0; c < K; c++) {
                        w.Q[r * K + c] = store_f64(&w, q[bth * K + c]);
                        w.Kc[r * K + c] = store_f64(&w, k[bth * K + c]);
                    }
                    for (size_t j = 0; j < V; j++)
                        w.Vc[r * V + j] = store_f64(&w, v[bth * V + j]);
                    w.beta[r] = beta && kdalab_mechanism_has_delta(mech)
                                    ? store_f64(&w, beta[bth]) : 1;
                    /* the log-decay stays in full precision, as production
                     * kernels keep it in fp32; Gin = sum over 0..r */
                    for (size_t c = 0; c < w.gw; c++) {
                        w.g[r * w.gw + c] = g[bth * w.gw + c];
                        w.Gin[r * w.gw + c] = (r ? w.Gin[(r - 1) * w.gw + c] : 0) +
                                              w.g[r * w.gw + c];
                    }
                }
                /* Gout = sum over r+1..L-1, summed backwards from the chunk end */
                for (size_t r = w.L; r-- > 0;)
                    for (size_t c = 0; c < w.gw; c++)
                        w.Gout[r * w.gw + c] =
                            r + 1 < w.L ? w.Gout[(r + 1) * w.gw + c] + w.g[(r + 1) * w.gw + c]
                                        : 0;
                chunk_step_f64(&w, mech, o + ((b * T + t0) * H + h) * V, H * V);
            }
            if (ht)
                memcpy(ht + bh * K * V, w.S, K * V * sizeof(double));
        }
    chunk_ws_free_f64(&w);

    kdalab_report rep = {.max_exponent = w.max_exponent};
    char what[96];
    snprintf(what, sizeof what, "chunkwise form (decay mode '%s', largest exponent %g)",
             kdalab_decay_name(op.decay), w.max_exponent);
    s = kdalab_check_outputs_f64(what, o, n.v, ht, n.state, &rep.nonfinite_o,
                                 &rep.nonfinite_ht);
    if (report)
        *report = rep;
    return s;
}
