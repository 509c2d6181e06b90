/*
 * lib/reference/chunk_bwd.c — the backward of the chunkwise form in float64
 * (the safe decay mode's): REFERENCE.md "Gradients" as a chunkwise
 * algorithm, steps 7 to 1 of chunk.c differentiated, chunk by chunk, last
 * to first; and the same for the DPLR rows' five steps (REFERENCE.md "The
 * boundary").
 *
 * defines: kdalab__chunk_bwd_f64, on a call kdalab_run_bwd_f64 has validated
 *          (lib/call/call.c; the public kdalab_chunk_bwd_f64 reaches it
 *          through it)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "chunk_steps.h"

/* ---- the backward -------------------------------------------------------- */

/*
 * A forward sweep keeps only the state entering each chunk, (T/C + 1) K V
 * numbers per head. Then, for each chunk from the last, with S the state
 * entering it and dS_out = dL/d(the state leaving it):
 *   recompute its forward (decay factors, Gkk, A_kk, W, U, V_new, A_qk) from S,
 *   and push the gradients back through
 *     6. O = s ((gamma*Q) S + A_qk V_new)
 *     7. S_out = Diag(gamma_last) S + (to_end*K)^T V_new
 *     5. A_qk = decayed Gram of (Q, K)
 *     4. V_new = U - W S
 *   2-3. U = M^-1 Diag(beta) V,  W = M^-1 Diag(beta) (gamma*K),  M = I + A_kk
 *        (for X = M^-1 R: dR = M^-T dX and dM = -dR X^T, strictly lower)
 *     1. A_kk = Diag(beta) Gkk,  Gkk = decayed Gram of (K, K)
 *   giving the chunk's dq, dk, dv, dbeta, the gradients of its decay
 *   factors, and dS = dL/dS for the chunk before.
 *
 * dg from the decay factors. Every factor is exp of a sum of g over a span,
 * so dL/dg_m collects, per channel, factor * dL/dfactor over every factor
 * whose span contains m:
 *   gamma_r  (span 0..r)        -> m <= r:  a suffix sum of gamma * dgamma
 *   to_end_r (span r+1..L-1)    -> m > r:   a prefix sum of to_end * dto_end
 *   decay(j -> i) in the Gram matrices (span j+1..i): with
 *   P[i][j] = dG[i][j] X_i Y_j decay(j -> i), dg_m gets the pairs i >= m > j,
 *   = sum_{i>=m} R_i - sum_{j>=m} Cc_j, R_i = sum_{j<i} P[i][j] (a row of P
 *   without its diagonal), Cc_j = sum_{i>j} P[i][j] (a column).
 * No exponent is positive anywhere, so any g <= 0 stays finite and exact;
 * a position with exp(g) = 0 gets dg = 0 exactly, as in the recurrence.
 */

/* Gradient buffers of one chunk (rows r = 0..L-1), sized for C positions. */
typedef struct {
    double *dq, *dk;       // (L, K)
    double *dv;            // (L, V)
    double *dbeta;         // (L)
    double *dgamma;        // (L, K) dL/dgamma
    double *dto_end;       // (L, K) dL/dto_end
    double *dgsum;         // (L, K) R - Cc of the Gram matrices
    double *dVn, *dW;      // (L, V), (L, K)
    double *dRv, *dRk;     // (L, V), (L, K)
    double *dAqk, *dAkk;   // (L, L)
    double *dXo, *dYo;     // (L, K) off-diagonal parts of a Gram backward
    double *xf, *yf;       // (L, K), (K) decay factors to and from an anchor
    double *run;           // (K)
    double *S, *dS;        // (K, V) the state entering the chunk; dL/d(state)
    double *states;        // (n_chunks + 1, K, V) the state entering each chunk
    double *da, *db, *dash; // (L, K) the DPLR rows: dL/da, dL/db, dL/d(a one row up)
    double *dAqb, *dAak, *dGsh; // (L, L) the DPLR rows: dA_qb, dA_ak, a Gram's one row up
} chunk_grads;

/* y (n) += a * x (n) */
static void axpy(double a, const double *x, double *y, size_t n)
{
    for (size_t c = 0; c < n; c++)
        y[c] += a * x[c];
}

/*
 * The backward of kdalab__chunk_decayed_gram: G[i][j] = sum_c X_i[c] Y_j[c]
 * decay(j -> i)[c] for j < i (and j == i with with_diag), X, Y, dX, dY
 * (L, K), dG (L, L). Adds dL/dX to dX, dL/dY to dY, and R - Cc (see the top
 * of the file) to gr->dgsum. The same safe sub-chunks as the forward: pairs
 * across sub-chunks through the anchor, pairs inside one sub-chunk pairwise.
 */
static void decayed_gram_bwd(const chunk_work *ck, chunk_grads *gr, const double *X,
                             const double *Y, const double *dG, int with_diag, double *dX,
                             double *dY)
{
    const size_t L = ck->L, K = ck->K;
    const double *g = ck->g;
    double *dXo = gr->dXo, *dYo = gr->dYo, *xf = gr->xf, *yf = gr->yf, *run = gr->run;
    memset(dXo, 0, L * K * sizeof *dXo);
    memset(dYo, 0, L * K * sizeof *dYo);

    for (size_t i0 = 0; i0 < L; i0 += ck->sub) {
        size_t i1 = i0 + ck->sub < L ? i0 + ck->sub : L;
        /* xf_i = exp(g_{i0} + ... + g_i) */
        memset(run, 0, K * sizeof *run);
        for (size_t i = i0; i < i1; i++)
            for (size_t c = 0; c < K; c++) {
                run[c] += g[i * K + c];
                xf[i * K + c] = exp(run[c]);
            }
        /* earlier sub-chunks: yf = exp(g_{j+1} + ... + g_{i0-1}) */
        memset(run, 0, K * sizeof *run);
        for (size_t j = i0; j-- > 0;) {
            for (size_t c = 0; c < K; c++)
                yf[c] = exp(run[c]);
            for (size_t i = i0; i < i1; i++) {
                double w = dG[i * L + j];
                for (size_t c = 0; c < K; c++) {
                    double d = xf[i * K + c] * yf[c];
                    dXo[i * K + c] += w * Y[j * K + c] * d;
                    dYo[j * K + c] += w * X[i * K + c] * d;
                }
            }
            for (size_t c = 0; c < K; c++)
                run[c] += g[j * K + c];
        }
        /* the same sub-chunk, pairwise: run = g_{j+1} + ... + g_i */
        for (size_t i = i0; i < i1; i++) {
            memset(run, 0, K * sizeof *run);
            for (size_t j = i + 1; j-- > i0;) {
                double w = dG[i * L + j];
                if (j < i)
                    for (size_t c = 0; c < K; c++) {
                        double d = exp(run[c]);
                        dXo[i * K + c] += w * Y[j * K + c] * d;
                        dYo[j * K + c] += w * X[i * K + c] * d;
                    }
                else if (with_diag) { /* decay(i -> i) = 1: no g involved */
                    axpy(w, Y + j * K, dX + i * K, K);
                    axpy(w, X + i * K, dY + j * K, K);
                }
                for (size_t c = 0; c < K; c++)
                    run[c] += g[j * K + c];
            }
        }
    }
    for (size_t r = 0; r < L; r++)
        for (size_t c = 0; c < K; c++) {
            size_t rc = r * K + c;
            dX[rc] += dXo[rc];
            dY[rc] += dYo[rc];
            gr->dgsum[rc] += X[rc] * dXo[rc] - Y[rc] * dYo[rc];
        }
}

/*
 * Backward substitution with the transpose of M = I + A_kk (unit lower
 * triangular): X (L, width) <- M^-T X, i.e. X_i -= sum_{m>i} A_kk[m][i] X_m.
 */
static void ut_transform_transposed(const chunk_work *ck, double *X, size_t width)
{
    const size_t L = ck->L;
    for (size_t i = L; i-- > 0;)
        for (size_t m = i + 1; m < L; m++)
            axpy(-ck->Akk[m * L + i], X + m * width, X + i * width, width);
}

/*
 * What every chunk's backward shares, the two terms of the state S entering
 * the chunk (gr->S): its read s (gamma*Q) S in the outputs and its carry
 * Diag(gamma_last) S into the state leaving. Adds d(gamma*Q) = s dO S^T
 * into dq and dgamma, dL/dgamma_last = sum dS_out * S, and turns gr->dS
 * (dL/dS_out on entry) into Diag(gamma_last) dS_out + s (gamma*Q)^T dO in
 * place: the chunk's own terms in dL/dS are the caller's to add.
 */
static void entering_state_bwd(const chunk_work *ck, chunk_grads *gr, double scale,
                               const double *dO, size_t o_stride)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    const double *S = gr->S;
    double *dS = gr->dS;
    for (size_t c = 0; c < K; c++)
        gr->dgamma[(L - 1) * K + c] += kdalab__chunk_dot(dS + c * V, S + c * V, V);
    for (size_t i = 0; i < L; i++)
        for (size_t c = 0; c < K; c++) {
            double dqg = scale * kdalab__chunk_dot(dO + i * o_stride, S + c * V, V);
            gr->dq[i * K + c] += ck->gamma[i * K + c] * dqg;
            gr->dgamma[i * K + c] += ck->q[i * K + c] * dqg;
        }
    for (size_t c = 0; c < K; c++) {
        double *dsc = dS + c * V;
        const double gl = ck->gamma[(L - 1) * K + c];
        for (size_t j = 0; j < V; j++)
            dsc[j] *= gl;
        for (size_t i = 0; i < L; i++)
            axpy(scale * ck->q[i * K + c] * ck->gamma[i * K + c], dO + i * o_stride, dsc, V);
    }
}

/*
 * The backward of one chunk. On entry gr->S (K, V) is the state entering the
 * chunk and gr->dS (K, V) is dL/d(state leaving it); dO is the chunk's first
 * row of d_o, rows o_stride apart. On return gr->dS is dL/d(state entering)
 * and gr's row buffers hold the chunk's gradients.
 */
static void chunk_bwd(chunk_work *ck, chunk_grads *gr, double scale, const double *dO,
                      size_t o_stride)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    const double *S = gr->S;
    double *dSout = gr->dS; /* dL/d(state leaving); becomes dL/d(state entering) */

    /* the forward of this chunk, from S */
    kdalab__chunk_decay_factors(ck);
    kdalab__chunk_corrected_values(ck, S);
    kdalab__chunk_decayed_gram(ck, ck->q, ck->k, 1, ck->Aqk);

    memset(gr->dq, 0, L * K * sizeof(double));
    memset(gr->dk, 0, L * K * sizeof(double));
    memset(gr->dv, 0, L * V * sizeof(double));
    memset(gr->dbeta, 0, L * sizeof(double));
    memset(gr->dgamma, 0, L * K * sizeof(double));
    memset(gr->dto_end, 0, L * K * sizeof(double));
    memset(gr->dgsum, 0, L * K * sizeof(double));
    memset(gr->dVn, 0, L * V * sizeof(double));

    /* 7. S_out = Diag(gamma_last) S + (to_end*K)^T V_new */
    for (size_t r = 0; r < L; r++) {
        double *dvn = gr->dVn + r * V;
        for (size_t c = 0; c < K; c++) {
            double kd = ck->to_end[r * K + c] * ck->k[r * K + c];
            const double *dsc = dSout + c * V;
            axpy(kd, dsc, dvn, V);                      /* dV_new += (to_end*K) dS_out */
            double dkd =
                kdalab__chunk_dot(ck->Vn + r * V, dsc, V); /* d(to_end*K) = V_new dS_out^T */
            gr->dk[r * K + c] += ck->to_end[r * K + c] * dkd;
            gr->dto_end[r * K + c] += ck->k[r * K + c] * dkd;
        }
    }

    /* 6. O = s ((gamma*Q) S + A_qk V_new): dA_qk, dV_new; then the state's terms */
    for (size_t i = 0; i < L; i++) {
        const double *doi = dO + i * o_stride;
        for (size_t j = 0; j <= i; j++) {
            gr->dAqk[i * L + j] = scale * kdalab__chunk_dot(doi, ck->Vn + j * V, V);
            axpy(scale * ck->Aqk[i * L + j], doi, gr->dVn + j * V, V);
        }
    }
    entering_state_bwd(ck, gr, scale, dO, o_stride); /* dS - W^T dV_new follows in step 4 */

    /* 5. A_qk = decayed Gram of (Q, K), j <= i */
    decayed_gram_bwd(ck, gr, ck->q, ck->k, gr->dAqk, 1, gr->dq, gr->dk);

    if (!ck->delta) { /* linear attention: V_new = V */
        memcpy(gr->dv, gr->dVn, L * V * sizeof(double));
        return;
    }

    /* 4. V_new = U - W S: dU = dV_new, dW = -dV_new S^T, dS -= W^T dV_new */
    for (size_t r = 0; r < L; r++)
        for (size_t c = 0; c < K; c++) {
            gr->dW[r * K + c] = -kdalab__chunk_dot(gr->dVn + r * V, S + c * V, V);
            axpy(-ck->W[r * K + c], gr->dVn + r * V, dSout + c * V, V);
        }

    /* 2-3. dR = M^-T dX for U and W; dA_kk = -(dRv U^T + dRk W^T), strictly lower */
    memcpy(gr->dRv, gr->dVn, L * V * sizeof(double));
    memcpy(gr->dRk, gr->dW, L * K * sizeof(double));
    ut_transform_transposed(ck, gr->dRv, V);
    ut_transform_transposed(ck, gr->dRk, K);
    for (size_t i = 0; i < L; i++)
        for (size_t j = 0; j < i; j++)
            gr->dAkk[i * L + j] = -(kdalab__chunk_dot(gr->dRv + i * V, ck->U + j * V, V) +
                                    kdalab__chunk_dot(gr->dRk + i * K, ck->W + j * K, K));
    /* R_v = Diag(beta) V, R_k = Diag(beta) (gamma*K) */
    for (size_t r = 0; r < L; r++) {
        double b = ck->beta[r], db = kdalab__chunk_dot(gr->dRv + r * V, ck->v + r * V, V);
        axpy(b, gr->dRv + r * V, gr->dv + r * V, V);
        for (size_t c = 0; c < K; c++) {
            double gk = ck->gamma[r * K + c] * ck->k[r * K + c];
            double drk = gr->dRk[r * K + c];
            db += drk * gk;
            gr->dk[r * K + c] += b * drk * ck->gamma[r * K + c];
            gr->dgamma[r * K + c] += b * drk * ck->k[r * K + c];
        }
        gr->dbeta[r] += db;
    }

    /* 1. A_kk = Diag(beta) Gkk: dbeta_i += sum_j dA_kk Gkk; dGkk = Diag(beta) dA_kk */
    for (size_t i = 0; i < L; i++)
        for (size_t j = 0; j < i; j++) {
            gr->dbeta[i] += gr->dAkk[i * L + j] * ck->Gkk[i * L + j];
            gr->dAkk[i * L + j] *= ck->beta[i];
        }
    decayed_gram_bwd(ck, gr, ck->k, ck->k, gr->dAkk, 0, gr->dk, gr->dk);
}

/*
 * The backward of one chunk of a DPLR row (REFERENCE.md "The boundary",
 * steps 5 to 1), as chunk_bwd for the table's other rows: on entry gr->S is
 * the state entering the chunk and gr->dS dL/d(state leaving it); on return
 * gr->dS is dL/d(state entering) and gr's row buffers (dq, dk, dv, da, db,
 * and the decay factors' gradients) hold the chunk's gradients. With
 * M = I - A_ab and U = M^-1 R, R = (a * gamma_{i-1}) S + A_ak V:
 *   5. S_out = Diag(gamma_last) S + (to_end*B)^T U + (to_end*K)^T V
 *   4. O = s ((gamma*Q) S + A_qb U + A_qk V)
 *   3. dR = M^-T dU;  dA_ab = dR U^T and dA_ak = dR V^T (strictly lower);
 *      d(a * gamma_{i-1}) = dR S^T;  dS += (a * gamma_{i-1})^T dR;  dV += A_ak^T dR
 * 2-1. A_ab, A_ak: decayed Gram matrices of a's rows one position up against
 *      b's and k's, differentiated by decayed_gram_bwd (rows one position up).
 */
static void dplr_chunk_bwd(chunk_work *ck, chunk_grads *gr, double scale, const double *dO,
                           size_t o_stride)
{
    const size_t L = ck->L, K = ck->K, V = ck->V;
    const double *S = gr->S;
    double *dS = gr->dS; /* dL/d(state leaving); becomes dL/d(state entering) */
    double *dU = gr->dVn, *dR = gr->dRv;

    /* the forward of this chunk, from S: A_ab (ck->Akk), A_ak (ck->Gkk), U, A_qb, A_qk */
    kdalab__chunk_decay_factors(ck);
    kdalab__chunk_dplr_reads(ck, S);
    kdalab__chunk_decayed_gram(ck, ck->q, ck->b, 1, ck->Aqb);
    kdalab__chunk_decayed_gram(ck, ck->q, ck->k, 1, ck->Aqk);

    double *zero[] = {gr->dq, gr->dk, gr->da, gr->db, gr->dgamma, gr->dto_end, gr->dgsum,
                      gr->dash};
    for (size_t z = 0; z < sizeof zero / sizeof zero[0]; z++)
        memset(zero[z], 0, L * K * sizeof(double));
    memset(gr->dv, 0, L * V * sizeof(double));
    memset(dU, 0, L * V * sizeof(double));

    /* 5. S_out = Diag(gamma_last) S + (to_end*B)^T U + (to_end*K)^T V */
    for (size_t r = 0; r < L; r++)
        for (size_t c = 0; c < K; c++) {
            const double te = ck->to_end[r * K + c], *dsc = dS + c * V;
            axpy(te * ck->b[r * K + c], dsc, dU + r * V, V);
            axpy(te * ck->k[r * K + c], dsc, gr->dv + r * V, V);
            double dbd = kdalab__chunk_dot(ck->U + r * V, dsc, V);
            double dkd = kdalab__chunk_dot(ck->v + r * V, dsc, V);
            gr->db[r * K + c] += te * dbd;
            gr->dk[r * K + c] += te * dkd;
            gr->dto_end[r * K + c] += ck->b[r * K + c] * dbd + ck->k[r * K + c] * dkd;
        }

    /* 4. O = s ((gamma*Q) S + A_qb U + A_qk V) */
    for (size_t i = 0; i < L; i++) {
        const double *doi = dO + i * o_stride;
        for (size_t j = 0; j <= i; j++) {
            gr->dAqb[i * L + j] = scale * kdalab__chunk_dot(doi, ck->U + j * V, V);
            gr->dAqk[i * L + j] = scale * kdalab__chunk_dot(doi, ck->v + j * V, V);
            axpy(scale * ck->Aqb[i * L + j], doi, dU + j * V, V);
            axpy(scale * ck->Aqk[i * L + j], doi, gr->dv + j * V, V);
        }
    }
    entering_state_bwd(ck, gr, scale, dO, o_stride); /* + (a*gamma_{i-1})^T dR in step 3 */
    decayed_gram_bwd(ck, gr, ck->q, ck->b, gr->dAqb, 1, gr->dq, gr->db);
    decayed_gram_bwd(ck, gr, ck->q, ck->k, gr->dAqk, 1, gr->dq, gr->dk);

    /* 3. dR = (I - A_ab)^-T dU, last row first: dR_i = dU_i + sum_{m>i} A_ab[m][i] dR_m */
    memcpy(dR, dU, L * V * sizeof(double));
    for (size_t i = L; i-- > 0;)
        for (size_t m = i + 1; m < L; m++)
            axpy(ck->Akk[m * L + i], dR + m * V, dR + i * V, V);
    for (size_t i = 0; i < L; i++) {
        for (size_t j = 0; j < i; j++) {
            gr->dAkk[i * L + j] = kdalab__chunk_dot(dR + i * V, ck->U + j * V, V); /* dA_ab */
            gr->dAak[i * L + j] = kdalab__chunk_dot(dR + i * V, ck->v + j * V, V);
            axpy(ck->Gkk[i * L + j], dR + i * V, gr->dv + j * V, V); /* A_ak in ck->Gkk */
        }
        for (size_t c = 0; c < K; c++) { /* R_i's first term, (a_i * gamma_{i-1}) S */
            const double gp = i ? ck->gamma[(i - 1) * K + c] : 1;
            double dad = kdalab__chunk_dot(dR + i * V, S + c * V, V);
            gr->da[i * K + c] += gp * dad;
            if (i)
                gr->dgamma[(i - 1) * K + c] += ck->a[i * K + c] * dad;
            axpy(ck->a[i * K + c] * gp, dR + i * V, dS + c * V, V);
        }
    }

    /* 2-1. A_ab[i][j] = G(ash, B)[i-1][j] and A_ak[i][j] = G(ash, K)[i-1][j], j < i */
    const double *dA[2] = {gr->dAkk, gr->dAak}, *Y[2] = {ck->b, ck->k};
    double *dY[2] = {gr->db, gr->dk};
    for (int m = 0; m < 2; m++) {
        for (size_t i = 0; i < L; i++) /* row i of the Gram is row i + 1 of A (last: none) */
            for (size_t j = 0; j <= i; j++)
                gr->dGsh[i * L + j] = i + 1 < L ? dA[m][(i + 1) * L + j] : 0;
        decayed_gram_bwd(ck, gr, ck->ash, Y[m], gr->dGsh, 1, gr->dash, dY[m]);
    }
    for (size_t i = 1; i < L; i++) /* ash row i - 1 is a_i */
        axpy(1.0, gr->dash + (i - 1) * K, gr->da + i * K, K);
}

/*
 * dL/dg of the chunk's positions (L, K) from the gradients of its decay
 * factors (see the top of the file), written to dg rows (gw = K: per
 * channel; gw = 1: summed over the channels, Gated DeltaNet's one g).
 */
static void chunk_dg(const chunk_work *ck, const chunk_grads *gr, double *dg, size_t dg_stride,
                     size_t gw)
{
    const size_t L = ck->L, K = ck->K;
    for (size_t r = 0; r < L; r++)
        for (size_t w = 0; w < gw; w++)
            dg[r * dg_stride + w] = 0;
    for (size_t c = 0; c < K; c++) {
        double *dgc = dg + (gw == K ? c : 0);
        double prefix = 0; /* sum_{r < m} to_end_r dto_end_r */
        for (size_t m = 0; m < L; m++) {
            dgc[m * dg_stride] += prefix;
            prefix += ck->to_end[m * K + c] * gr->dto_end[m * K + c];
        }
        double suffix = 0; /* sum_{r >= m} (gamma_r dgamma_r + dgsum_r) */
        for (size_t m = L; m-- > 0;) {
            suffix += ck->gamma[m * K + c] * gr->dgamma[m * K + c] + gr->dgsum[m * K + c];
            dgc[m * dg_stride] += suffix;
        }
    }
}

static void grads_free(chunk_grads *gr)
{
    double *all[] = {gr->dq,  gr->dk,  gr->dv,   gr->dbeta, gr->dgamma, gr->dto_end,
                     gr->dgsum, gr->dVn, gr->dW, gr->dRv,   gr->dRk,    gr->dAqk,
                     gr->dAkk, gr->dXo, gr->dYo, gr->xf,    gr->yf,     gr->run,
                     gr->S,   gr->dS,  gr->states, gr->da, gr->db, gr->dash,
                     gr->dAqb, gr->dAak, gr->dGsh};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static kdalab_status grads_alloc(chunk_grads *gr, size_t C, size_t K, size_t V,
                                 size_t n_chunks)
{
    /* C K, C V, C C, K V fit: kdalab__chunk_alloc checked them */
    const size_t e = sizeof(double);
    size_t CK = C * K, CV = C * V, CC = C * C, KV = K * V, states, bytes;
    if (!kdalab_mul_size(n_chunks + 1, KV, &states) ||
        !kdalab_mul_size(states, e, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "%zu chunk states of %zu x %zu overflow",
                           n_chunks + 1, K, V);
    gr->dq = malloc(CK * e);     gr->dk = malloc(CK * e);     gr->dv = malloc(CV * e);
    gr->dbeta = malloc(C * e);   gr->dgamma = malloc(CK * e); gr->dto_end = malloc(CK * e);
    gr->dgsum = malloc(CK * e);  gr->dVn = malloc(CV * e);    gr->dW = malloc(CK * e);
    gr->dRv = malloc(CV * e);    gr->dRk = malloc(CK * e);
    gr->dAqk = calloc(CC, e);    gr->dAkk = calloc(CC, e);
    gr->dXo = malloc(CK * e);    gr->dYo = malloc(CK * e);    gr->xf = malloc(CK * e);
    gr->yf = malloc(K * e);      gr->run = malloc(K * e);
    gr->S = malloc(KV * e);      gr->dS = malloc(KV * e);     gr->states = malloc(bytes);
    gr->da = malloc(CK * e);     gr->db = malloc(CK * e);     gr->dash = malloc(CK * e);
    gr->dAqb = calloc(CC, e);    gr->dAak = calloc(CC, e);    gr->dGsh = calloc(CC, e);
    if (!gr->dq || !gr->dk || !gr->dv || !gr->dbeta || !gr->dgamma || !gr->dto_end ||
        !gr->dgsum || !gr->dVn || !gr->dW || !gr->dRv || !gr->dRk || !gr->dAqk || !gr->dAkk ||
        !gr->dXo || !gr->dYo || !gr->xf || !gr->yf || !gr->run || !gr->S || !gr->dS ||
        !gr->states || !gr->da || !gr->db || !gr->dash || !gr->dAqb || !gr->dAak || !gr->dGsh) {
        grads_free(gr);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for the chunkwise backward");
    }
    return KDALAB_OK;
}

kdalab_status kdalab__chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *a, const double *bb, const double *h0,
                                    const double *d_o, const double *dht, double *dq,
                                    double *dk, double *dv, double *dg, double *dbeta,
                                    double *da, double *db, double *dh0,
                                    const kdalab_chunk_opts *opts)
{
    // q, k, dq, dk are (B, T, H, K); v, d_o, dv are (B, T, H, V); beta, dbeta are
    // (B, T, H); g, dg are (B, T, H) or (B, T, H, K); a, bb, da, db are (B, T, H, K)
    // (DPLR) or NULL; h0, dht, dh0 are (B, H, K, V)
    const kdalab_chunk_opts op = *opts;
    kdalab_status s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V, KV = K * V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1);
    const size_t gw = kdalab_mechanism_g_width(mech, K), n_chunks = (T + C - 1) / C;
    chunk_work ck = {.K = K, .V = V, .sub = op.subchunk, .delta = kdalab_mechanism_has_delta(mech),
                     .ab = kdalab_mechanism_has_ab(mech)};
    chunk_grads gr = {0};
    s = kdalab__chunk_alloc(&ck, C, K, V);
    if (s != KDALAB_OK)
        return s;
    s = grads_alloc(&gr, C, K, V, n_chunks);
    if (s != KDALAB_OK) {
        kdalab__chunk_free(&ck);
        return s;
    }

    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            /* forward sweep: the state entering each chunk (steps 1-4 and 7) */
            if (h0)
                memcpy(gr.states, h0 + bh * KV, KV * sizeof(double));
            else
                memset(gr.states, 0, KV * sizeof(double));
            for (size_t n_c = 0; n_c < n_chunks; n_c++) {
                double *Sn = gr.states + (n_c + 1) * KV;
                memcpy(Sn, gr.states + n_c * KV, KV * sizeof(double));
                ck.L = (n_c + 1) * C <= T ? C : T - n_c * C;
                kdalab__chunk_load(&ck, dims, b, h, n_c * C, q, k, v, g, gw, beta);
                kdalab__chunk_decay_factors(&ck);
                if (ck.ab) { /* the boundary's steps 1-3 and 5 */
                    kdalab__chunk_load_ab(&ck, dims, b, h, n_c * C, a, bb);
                    kdalab__chunk_dplr_reads(&ck, gr.states + n_c * KV);
                    kdalab__chunk_dplr_advance(&ck, Sn);
                    continue;
                }
                kdalab__chunk_corrected_values(&ck, gr.states + n_c * KV);
                kdalab__chunk_advance_state(&ck, Sn);
            }

            /* backward sweep */
            if (dht)
                memcpy(gr.dS, dht + bh * KV, KV * sizeof(double));
            else
                memset(gr.dS, 0, KV * sizeof(double));
            for (size_t n_c = n_chunks; n_c-- > 0;) {
                size_t t0 = n_c * C;
                ck.L = t0 + C <= T ? C : T - t0;
                kdalab__chunk_load(&ck, dims, b, h, t0, q, k, v, g, gw, beta);
                memcpy(gr.S, gr.states + n_c * KV, KV * sizeof(double));
                size_t row = (b * T + t0) * H + h; /* (b, t0, h) */
                if (ck.ab) {
                    kdalab__chunk_load_ab(&ck, dims, b, h, t0, a, bb);
                    dplr_chunk_bwd(&ck, &gr, scale, d_o + row * V, H * V);
                } else {
                    chunk_bwd(&ck, &gr, scale, d_o + row * V, H * V);
                }
                for (size_t r = 0; r < ck.L; r++) {
                    size_t bth = row + r * H;
                    if (dq)
                        memcpy(dq + bth * K, gr.dq + r * K, K * sizeof(double));
                    if (dk)
                        memcpy(dk + bth * K, gr.dk + r * K, K * sizeof(double));
                    if (dv)
                        memcpy(dv + bth * V, gr.dv + r * V, V * sizeof(double));
                    if (dbeta && ck.delta)
                        dbeta[bth] = gr.dbeta[r];
                    if (da && ck.ab)
                        memcpy(da + bth * K, gr.da + r * K, K * sizeof(double));
                    if (db && ck.ab)
                        memcpy(db + bth * K, gr.db + r * K, K * sizeof(double));
                }
                if (dg && gw)
                    chunk_dg(&ck, &gr, dg + row * gw, H * gw, gw);
            }
            if (dh0)
                memcpy(dh0 + bh * KV, gr.dS, KV * sizeof(double));
        }
    kdalab__chunk_free(&ck);
    grads_free(&gr);
    return kdalab_check_grads_f64("chunkwise backward", dims, mech, dq, dk, dv, dg, dbeta,
                                  ck.ab ? da : NULL, ck.ab ? db : NULL, dh0);
}
