/*
 * lib/reference/chunk_steps.c — the steps of the float64 chunkwise form, one
 * function each (REFERENCE.md "Chunkwise form", steps 1-7): what
 * lib/reference/chunk.c runs per chunk, and what its backward (the second
 * half of chunk.c) recomputes and differentiates. The algorithm
 * and the safe sub-chunks are described at the top of chunk.c; the other
 * decay modes (pairwise, rescaled, anchored: REFERENCE.md "Where the
 * floating-point range problem lives", experiment 03) are a parameter of
 * steps 1 and 5, and the float32 twin's emulated bf16 / fp16 storage
 * (store() below) a parameter of every step that stores a value.
 *
 * defines: kdalab__chunk_dot, kdalab__chunk_decay_factors, kdalab__chunk_decayed_gram,
 *          kdalab__chunk_ut_transform, kdalab__chunk_corrected_values, kdalab__chunk_outputs,
 *          kdalab__chunk_advance_state, kdalab__chunk_load, kdalab__chunk_free, kdalab__chunk_alloc,
 *          and the DPLR rows' kdalab__chunk_load_ab, kdalab__chunk_dplr_reads,
 *          kdalab__chunk_dplr_outputs, kdalab__chunk_dplr_advance
 *          (internal, declared in chunk_steps.h)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kdalab_precision.h"
#include "chunk_steps.h"

/* Where a production kernel stores a value, the float32 twin rounds it to
 * the emulated format (ck->precision); the float64 form is exact (the
 * options check refuses it an emulated precision). */
static inline double store(const chunk_work *ck, double x)
{
    if (sizeof(double) == sizeof(float))
        return kdalab_round(ck->precision, x);
    (void)ck;
    return x;
}

/* exp(x), noting a positive exponent (the modes that rescale form them). */
static double note_exp(chunk_work *ck, double x)
{
    if (x > ck->max_exponent)
        ck->max_exponent = x;
    return exp(x);
}

double kdalab__chunk_dot(const double *x, const double *y, size_t n)
{
    double s = 0;
    for (size_t c = 0; c < n; c++)
        s += x[c] * y[c];
    return s;
}

/*
 * Decay factors of the chunk: gamma_r = exp(g_0 + ... + g_r) and
 * to_end_r = exp(g_{r+1} + ... + g_{L-1}), each exponent summed over its own
 * span (a forward and a backward running sum; never a difference of sums,
 * which would lose every small g after a large one: -1e20 + -1 == -1e20).
 */
void kdalab__chunk_decay_factors(chunk_work *ck)
{
    const size_t L = ck->L, K = ck->K;
    for (size_t c = 0; c < K; c++) {
        double in = 0, out = 0;
        for (size_t r = 0; r < L; r++) {
            in += ck->g[r * K + c];
            ck->gamma[r * K + c] = exp(in);
        }
        for (size_t r = L; r-- > 0;) {
            ck->to_end[r * K + c] = exp(out);
            out += ck->g[r * K + c];
        }
    }
}

/*
 * Steps 1 and 5: the decayed Gram matrix of two sets of rows,
 *   out[i][j] = sum_c X_i[c] Y_j[c] exp(g_{j+1}[c] + ... + g_i[c])
 * for j < i (and j == i when with_diag); X, Y are (L, K), out is (L, L).
 * Nothing above the diagonal is touched: o_i cannot see a later position.
 *
 * Safe sub-chunks (the default): rows are cut into sub-chunks of c
 * positions. For a row i of the sub-chunk [i0, i1), anchored at the
 * boundary before i0,
 *   - a row j < i0 (an earlier sub-chunk): the decay splits into
 *       exp(g_{i0} + ... + g_i) * exp(g_{j+1} + ... + g_{i0-1}),
 *     both factors <= 1: one plain dot of the decayed rows xa_i and yb_j, so
 *     the off-diagonal blocks are matrix products (what a kernel runs);
 *   - a row j in [i0, i] (the same sub-chunk): the decay is formed pairwise,
 *     exp of the running sum from j+1 up to i, again <= 1.
 * No exponent is ever positive.
 *
 * The other modes change two choices, for a decay per key channel:
 *   pairwise   one sub-chunk of the whole chunk, pairwise: the C x C x K
 *              yardstick, never overflows;
 *   rescaled   one sub-chunk of the whole chunk, its diagonal block rescaled
 *              about the anchor, as the chapter writes q~ = q * gamma,
 *              k~ = k / gamma: yb_j = Y_j * exp(-(g_{i0} + ... + g_j)), a
 *              POSITIVE exponent up to |sum g| over the chunk (the range
 *              problem, noted in ck->max_exponent);
 *   anchored   sub-chunks of c, each diagonal block rescaled about its own
 *              anchor (the production kernels' way): positive exponents up
 *              to |sum g| over one sub-chunk.
 * A decay per head (or none) in those modes is the C x C mask a Gated
 * DeltaNet kernel forms, exp(g_{j+1} + ... + g_i) per pair, never positive:
 * the modes exist to study a per-channel decay.
 */
void kdalab__chunk_decayed_gram(chunk_work *ck, const double *X, const double *Y, int with_diag,
                                double *out)
{
    const size_t L = ck->L, K = ck->K;
    const double *g = ck->g;
    double *run = ck->run, *E = ck->E;
    const kdalab_decay_mode mode = ck->decay;

    if (mode != KDALAB_DECAY_SAFE && !ck->per_key) { /* a scalar decay: the pairwise mask */
        for (size_t i = 0; i < L; i++) {
            double e = 0; /* g_{j+1} + ... + g_i (channel 0: one value per position) */
            for (size_t j = i + 1; j-- > 0;) {
                if (j < i || with_diag)
                    out[i * L + j] = kdalab__chunk_dot(X + i * K, Y + j * K, K) * exp(e);
                e += g[j * K];
            }
        }
        return;
    }
    const size_t sub = mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_ANCHORED ? ck->sub : L;
    const int pairwise = mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_PAIRWISE;

    for (size_t i0 = 0; i0 < L; i0 += sub) {
        size_t i1 = i0 + sub < L ? i0 + sub : L;

        /* xa_i = X_i * exp(E_i), E_i = g_{i0} + ... + g_i: X rows decayed down to the anchor */
        memset(run, 0, K * sizeof *run);
        for (size_t i = i0; i < i1; i++)
            for (size_t c = 0; c < K; c++) {
                run[c] += g[i * K + c];
                E[i * K + c] = run[c];
                ck->xa[i * K + c] = store(ck, X[i * K + c] * exp(run[c]));
            }

        /* earlier sub-chunks: yb_j = Y_j * exp(g_{j+1} + ... + g_{i0-1}),
         * walking j down from the anchor */
        memset(run, 0, K * sizeof *run);
        for (size_t j = i0; j-- > 0;) {
            for (size_t c = 0; c < K; c++)
                ck->yb[j * K + c] = store(ck, Y[j * K + c] * exp(run[c]));
            for (size_t i = i0; i < i1; i++)
                out[i * L + j] = kdalab__chunk_dot(ck->xa + i * K, ck->yb + j * K, K);
            for (size_t c = 0; c < K; c++)
                run[c] += g[j * K + c];
        }

        if (pairwise) { /* the same sub-chunk, pairwise: run = g_{j+1} + ... + g_i */
            for (size_t i = i0; i < i1; i++) {
                memset(run, 0, K * sizeof *run);
                for (size_t j = i + 1; j-- > i0;) {
                    if (j < i || with_diag) {
                        double acc = 0;
                        for (size_t c = 0; c < K; c++)
                            acc += X[i * K + c] * Y[j * K + c] * exp(run[c]);
                        out[i * L + j] = acc;
                    }
                    for (size_t c = 0; c < K; c++)
                        run[c] += g[j * K + c];
                }
            }
        } else { /* rescaled about the anchor: yb_i = Y_i * exp(-E_i), exponent >= 0 */
            for (size_t i = i0; i < i1; i++) {
                for (size_t c = 0; c < K; c++)
                    ck->yb[i * K + c] = store(ck, Y[i * K + c] * note_exp(ck, -E[i * K + c]));
                for (size_t j = i0; j < i + (with_diag ? 1 : 0); j++)
                    out[i * L + j] = kdalab__chunk_dot(ck->xa + i * K, ck->yb + j * K, K);
            }
        }
    }
}

/*
 * Step 2, the UT transform, applied to right-hand sides: solve
 * (I + A_kk) X = R in place, where R (L, width) already holds Diag(beta)
 * times the rows, by forward substitution over the unit lower-triangular
 * I + A_kk. That is X = T R' with T = (I + A_kk)^-1 Diag(beta): the product
 * of the chunk's L diagonal-plus-rank-one transitions in one solve.
 */
void kdalab__chunk_ut_transform(const chunk_work *ck, double *X, size_t width)
{
    for (size_t i = 0; i < ck->L; i++)
        for (size_t m = 0; m < i; m++) {
            double a = ck->Akk[i * ck->L + m];
            for (size_t c = 0; c < width; c++)
                X[i * width + c] -= a * X[m * width + c];
        }
}

/*
 * Steps 1-4: the corrected values V_new = U - W S of the chunk, in ck->Vn
 * (L, V), with A_kk, W and U on the way. S is (K, V), the state entering the
 * chunk.
 */
void kdalab__chunk_corrected_values(chunk_work *ck, const double *S)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    if (!ck->delta) { /* linear attention: V_new = V */
        memcpy(ck->Vn, ck->v, L * V * sizeof *ck->Vn);
        return;
    }
    /* 1. A_kk = Diag(beta) Gkk, Gkk the decayed K K^T, strictly lower */
    kdalab__chunk_decayed_gram(ck, ck->k, ck->k, 0, ck->Gkk);
    for (size_t i = 0; i < L; i++)
        for (size_t j = 0; j < i; j++)
            ck->Akk[i * L + j] = ck->beta[i] * ck->Gkk[i * L + j];
    /* 2-3. W = T (gamma * K), U = T V */
    for (size_t r = 0; r < L; r++) {
        for (size_t c = 0; c < K; c++)
            ck->W[r * K + c] = ck->beta[r] * ck->gamma[r * K + c] * ck->k[r * K + c];
        for (size_t j = 0; j < V; j++)
            ck->U[r * V + j] = ck->beta[r] * ck->v[r * V + j];
    }
    kdalab__chunk_ut_transform(ck, ck->W, K);
    kdalab__chunk_ut_transform(ck, ck->U, V);
    /* 4. V_new = U - W S */
    for (size_t r = 0; r < L; r++) {
        for (size_t j = 0; j < V; j++)
            ck->Vn[r * V + j] = ck->U[r * V + j];
        for (size_t c = 0; c < K; c++) {
            double w = ck->W[r * K + c];
            for (size_t j = 0; j < V; j++)
                ck->Vn[r * V + j] -= w * S[c * V + j];
        }
    }
}

/* Row i's read of the state S (K, V) entering the chunk, decayed to i:
 * oi (V) = (gamma_i * q_i)^T S, the first term of every form's outputs. */
static void read_state(const chunk_work *ck, const double *S, size_t i, double *oi)
{
    const size_t K = ck->K, V = ck->V;
    for (size_t j = 0; j < V; j++)
        oi[j] = 0;
    for (size_t c = 0; c < K; c++) {
        double qg = store(ck, ck->q[i * K + c] * ck->gamma[i * K + c]);
        for (size_t j = 0; j < V; j++)
            oi[j] += qg * S[c * V + j];
    }
}

/*
 * Steps 5-6: the chunk's outputs O = s ((gamma * Q) S + A_qk V_new).
 * S (K, V) is the state entering the chunk; row i of O is written to
 * o + i * o_stride (V values; o_stride = H * V in the [B,T,H,V] layout).
 */
void kdalab__chunk_outputs(chunk_work *ck, const double *S, double scale, double *o,
                           size_t o_stride)
{
    const size_t L = ck->L, V = ck->V;
    const double *Vnew = ck->Vn;
    kdalab__chunk_decayed_gram(ck, ck->q, ck->k, 1, ck->Aqk); /* 5. */
    for (size_t i = 0; i < L; i++) {            /* 6. */
        double *oi = o + i * o_stride;
        read_state(ck, S, i, oi);
        for (size_t m = 0; m <= i; m++) { /* what this chunk wrote up to i */
            double a = ck->Aqk[i * L + m];
            for (size_t j = 0; j < V; j++)
                oi[j] += a * Vnew[m * V + j];
        }
        for (size_t j = 0; j < V; j++)
            oi[j] *= scale;
    }
}

/* Step 7: S (K, V) <- Diag(gamma_{L-1}) S + (to_end * K)^T V_new. */
void kdalab__chunk_advance_state(const chunk_work *ck, double *S)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    const double *Vnew = ck->Vn;
    for (size_t c = 0; c < K; c++) {
        double decay = ck->gamma[(L - 1) * K + c];
        for (size_t j = 0; j < V; j++)
            S[c * V + j] *= decay;
        for (size_t r = 0; r < L; r++) {
            double kd = store(ck, ck->k[r * K + c] * ck->to_end[r * K + c]);
            for (size_t j = 0; j < V; j++)
                S[c * V + j] += kd * Vnew[r * V + j];
        }
    }
}

/*
 * Copy positions t0 .. t0+L-1 of head (b, h) into the chunk's rows.
 * q, k are (B, T, H, K); v is (B, T, H, V); beta is (B, T, H); g is
 * (B, T, H, gw) with gw = K (KDA), 1 (Gated DeltaNet) or 0.
 */
void kdalab__chunk_load(chunk_work *ck, const kdalab_dims *d, size_t b, size_t h, size_t t0,
                        const double *q, const double *k, const double *v, const double *g,
                        size_t gw, const double *beta)
{
    const size_t K = d->K, V = d->V;
    for (size_t r = 0; r < ck->L; r++) {
        size_t bth = (b * d->T + t0 + r) * d->H + h; /* index of (b, t0 + r, h) */
        for (size_t c = 0; c < K; c++) { /* stored as the kernel would store them */
            ck->q[r * K + c] = store(ck, q[bth * K + c]);
            ck->k[r * K + c] = store(ck, k[bth * K + c]);
        }
        for (size_t j = 0; j < V; j++)
            ck->v[r * V + j] = store(ck, v[bth * V + j]);
        ck->beta[r] = ck->delta ? store(ck, beta[bth]) : 1;
        /* the log-decay stays in full precision, as production kernels keep it */
        for (size_t c = 0; c < K; c++)
            ck->g[r * K + c] = gw == K ? g[bth * K + c] : gw == 1 ? g[bth] : 0;
    }
}

void kdalab__chunk_free(chunk_work *ck)
{
    free(ck->q); free(ck->k); free(ck->v); free(ck->beta); free(ck->g);
    free(ck->gamma); free(ck->to_end); free(ck->Akk); free(ck->Aqk);
    free(ck->W); free(ck->U); free(ck->Vn); free(ck->Gkk); free(ck->xa); free(ck->yb);
    free(ck->E); free(ck->run);
    free(ck->a); free(ck->b); free(ck->ash); free(ck->Aqb);
}

/* Buffers for chunks of up to C positions. EOVERFLOW / ENOMEM on failure. */
kdalab_status kdalab__chunk_alloc(chunk_work *ck, size_t C, size_t K, size_t V)
{
    const size_t e = sizeof(double);
    size_t CK, CV, CC, bytes;
    if (!kdalab_mul_size(C, K, &CK) || !kdalab_mul_size(C, V, &CV) ||
        !kdalab_mul_size(C, C, &CC) || !kdalab_mul_size(CK > CV ? CK : CV, e, &bytes) ||
        !kdalab_mul_size(CC, e, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "chunk C = %zu with K = %zu, V = %zu overflows",
                           C, K, V);
    ck->q = malloc(CK * e);     ck->k = malloc(CK * e);      ck->v = malloc(CV * e);
    ck->beta = malloc(C * e);   ck->g = malloc(CK * e);      ck->gamma = malloc(CK * e);
    ck->to_end = malloc(CK * e);
    ck->Akk = calloc(CC, e);    ck->Aqk = calloc(CC, e);
    ck->W = malloc(CK * e);     ck->U = malloc(CV * e);     ck->Vn = malloc(CV * e);
    ck->Gkk = calloc(CC, e);
    ck->xa = malloc(CK * e);    ck->yb = malloc(CK * e);     ck->run = malloc(K * e);
    ck->E = malloc(CK * e);
    ck->a = ck->b = ck->ash = ck->Aqb = NULL;
    if (ck->ab) {
        ck->a = malloc(CK * e); ck->b = malloc(CK * e); ck->ash = calloc(CK, e);
        ck->Aqb = calloc(CC, e);
    }
    if (!ck->q || !ck->k || !ck->v || !ck->beta || !ck->g || !ck->gamma || !ck->to_end ||
        !ck->Akk || !ck->Aqk || !ck->W || !ck->U || !ck->Vn || !ck->Gkk || !ck->xa || !ck->yb ||
        !ck->E || !ck->run || (ck->ab && (!ck->a || !ck->b || !ck->ash || !ck->Aqb))) {
        kdalab__chunk_free(ck);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for chunk C = %zu, K = %zu, V = %zu", C,
                           K, V);
    }
    return KDALAB_OK;
}

/* ---- the DPLR boundary (chunk_steps.h) ----------------------------------- */

void kdalab__chunk_load_ab(chunk_work *ck, const kdalab_dims *d, size_t b, size_t h, size_t t0,
                           const double *a, const double *bb)
{
    // a, bb are (B, T, H, K); rows t0 .. t0 + L - 1 of head (b, h) -> ck->a, ck->b (L, K)
    const size_t K = d->K;
    for (size_t r = 0; r < ck->L; r++) {
        size_t bth = (b * d->T + t0 + r) * d->H + h;
        for (size_t c = 0; c < K; c++) {
            ck->a[r * K + c] = store(ck, a[bth * K + c]);
            ck->b[r * K + c] = store(ck, bb[bth * K + c]);
        }
    }
}

/*
 * Steps 1-3. A_ab[i][j] = sum_c a_i[c] b_j[c] exp(g_{j+1} + ... + g_{i-1}), j < i:
 * the decayed Gram matrix (j <= i') of the rows a_{i'+1} against b_j, at
 * i' = i - 1 — so the same function, in the same decay mode, forms it. Then
 * the rows u_i solve, by forward substitution over the unit lower-triangular
 * I - A_ab,
 *   u_i = (a_i * gamma_{i-1}) S + sum_{j<i} A_ak[i][j] v_j + sum_{j<i} A_ab[i][j] u_j
 * (gamma_{-1} = 1): the product of the chunk's L transitions in one solve.
 */
void kdalab__chunk_dplr_reads(chunk_work *ck, const double *S)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    memcpy(ck->ash, ck->a + K, (L - 1) * K * sizeof *ck->ash); /* row r = a_{r+1} */
    memset(ck->ash + (L - 1) * K, 0, K * sizeof *ck->ash);
    kdalab__chunk_decayed_gram(ck, ck->ash, ck->b, 1, ck->Gkk); /* A_ab one row up */
    for (size_t i = 1; i < L; i++)
        for (size_t j = 0; j < i; j++)
            ck->Akk[i * L + j] = ck->Gkk[(i - 1) * L + j];
    kdalab__chunk_decayed_gram(ck, ck->ash, ck->k, 1, ck->Gkk); /* A_ak one row up */
    for (size_t i = L; i-- > 1;) /* shift down in place, last row first */
        for (size_t j = 0; j < i; j++)
            ck->Gkk[i * L + j] = ck->Gkk[(i - 1) * L + j];
    for (size_t i = 0; i < L; i++) {
        double *u = ck->U + i * V;
        for (size_t j = 0; j < V; j++)
            u[j] = 0;
        for (size_t c = 0; c < K; c++) { /* what the state entering the chunk gives */
            double ad = store(ck, ck->a[i * K + c] * (i ? ck->gamma[(i - 1) * K + c] : 1));
            for (size_t j = 0; j < V; j++)
                u[j] += ad * S[c * V + j];
        }
        for (size_t m = 0; m < i; m++) { /* what this chunk wrote before i */
            double wk = ck->Gkk[i * L + m], wb = ck->Akk[i * L + m];
            for (size_t j = 0; j < V; j++)
                u[j] += wk * ck->v[m * V + j] + wb * ck->U[m * V + j];
        }
    }
}

/* Step 4: O = s ((gamma * Q) S + A_qb U + A_qk V), row i at o + i * o_stride. */
void kdalab__chunk_dplr_outputs(chunk_work *ck, const double *S, double scale, double *o,
                                size_t o_stride)
{
    const size_t L = ck->L, V = ck->V;
    kdalab__chunk_decayed_gram(ck, ck->q, ck->b, 1, ck->Aqb);
    kdalab__chunk_decayed_gram(ck, ck->q, ck->k, 1, ck->Aqk);
    for (size_t i = 0; i < L; i++) {
        double *oi = o + i * o_stride;
        read_state(ck, S, i, oi);
        for (size_t m = 0; m <= i; m++) {
            double wb = ck->Aqb[i * L + m], wk = ck->Aqk[i * L + m];
            for (size_t j = 0; j < V; j++)
                oi[j] += wb * ck->U[m * V + j] + wk * ck->v[m * V + j];
        }
        for (size_t j = 0; j < V; j++)
            oi[j] *= scale;
    }
}

/* Step 5: S (K, V) <- Diag(gamma_{L-1}) S + (to_end * B)^T U + (to_end * K)^T V. */
void kdalab__chunk_dplr_advance(const chunk_work *ck, double *S)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    for (size_t c = 0; c < K; c++) {
        double decay = ck->gamma[(L - 1) * K + c];
        for (size_t j = 0; j < V; j++)
            S[c * V + j] *= decay;
        for (size_t r = 0; r < L; r++) {
            double bd = store(ck, ck->b[r * K + c] * ck->to_end[r * K + c]);
            double kd = store(ck, ck->k[r * K + c] * ck->to_end[r * K + c]);
            for (size_t j = 0; j < V; j++)
                S[c * V + j] += bd * ck->U[r * V + j] + kd * ck->v[r * V + j];
        }
    }
}
