/*
 * lib/simd/kernels.h — the float32 chunkwise forms and decode steps of the
 * optimized path, written once in terms of a small vector vocabulary and
 * instantiated per instruction set by lib/simd/scalar.c (VLEN 1), avx2.c
 * (VLEN 8) and avx512.c (VLEN 16).
 *
 * The including file defines:
 *   vf, VLEN               the vector type and its float count
 *   VZERO() VSET1(x) VLOAD(p) VSTORE(p, v) VADD VSUB VMUL VFMA(a, b, c) = a*b + c
 *   VHSUM(v)               sum of the lanes
 *   VEXP(v)                exp of lanes <= 0 (lanes below -87 give exactly 0)
 *   VALL_LT(v, x)          nonzero when every lane is < x
 *   SIMD_FN(name)          name with the level's suffix
 *
 * The algorithm is REFERENCE.md "Chunkwise form", steps 1-7, with the safe
 * sub-chunk decay for KDA. What differs from the reference (lib/chunk_impl.h)
 * is how things are computed, never what:
 *
 *   - Every decay exponent is formed as a SUM of log-decays g over exactly the
 *     span it covers (running sums inside a sub-chunk, sums of sub-chunk totals
 *     across them), never as a difference of two cumulative sums. All g <= 0,
 *     so each sum is of same-sign terms (relative error <= n eps) and every
 *     exponent is <= 0: nothing can overflow, and there is no cancellation
 *     when one g is huge (g = -1000 next to g = -0.01).
 *   - KDA, sub-chunks of c positions (I, J index them; s_I is the boundary
 *     before sub-chunk I, e_J the last position of J):
 *       forward  F_i = exp(sum g over s_I..i)         (i in I)
 *       backward B_j = exp(sum g over j+1..e_J)       (j in J)
 *       between  d_IJ = exp(sum g over sub-chunks strictly between J and I)
 *     and for j in an earlier sub-chunk than i,
 *       exp(Gamma_i - Gamma_j) = F_i * d_IJ * B_j,
 *     so the off-diagonal blocks of A_kk and A_qk are plain matrix products
 *     [k_i F_i ; q_i F_i] x (d_IJ k_j B_j)^T. The diagonal block is pairwise,
 *     exp(sum g over j+1..i) per pair and channel, accumulated by running sums.
 *   - The UT transform is formed explicitly as the unit lower-triangular
 *     inverse T = (I + A_kk)^-1 Diag(beta) (forward substitution, about C^3/6
 *     multiply-adds), so W and U come out of one triangular matrix product.
 *   - The state S [K, V] is kept for the value columns [v0, v1) of this task.
 *
 * Matrix products go through one register-blocked kernel (gemm below):
 * 6 rows x 2 vectors of accumulators, A broadcast, B streamed.
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MR 6      /* rows of the register block      */
#define NRV 2     /* vectors per row of the block    */
#define EXP_FLOOR (-87.0f) /* exp below this is < 1.7e-38: taken as 0 */

#if defined(__GNUC__)
#define SIMD_INLINE static inline __attribute__((always_inline))
#define SIMD_UNROLL(n) _Pragma("GCC unroll 8")
#else
#define SIMD_INLINE static inline
#define SIMD_UNROLL(n)
#endif

static inline size_t SIMD_FN(min_sz)(size_t a, size_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------- */
/* Matrix product                                                               */
/* ---------------------------------------------------------------------------- */

/* One register block: C[mr x nv*VLEN] (=|+=) A[mr x kd] B[kd x nv*VLEN]. */
SIMD_INLINE void SIMD_FN(micro)(const int mr, const int nv, size_t kd, const float *A,
                                size_t rsa, size_t csa, const float *B, size_t ldb, float *C,
                                size_t ldc, int accumulate)
{
    vf c[MR][NRV];
    SIMD_UNROLL(6)
    for (int m = 0; m < MR; m++)
        SIMD_UNROLL(2)
        for (int n = 0; n < NRV; n++)
            c[m][n] = (m < mr && n < nv && accumulate) ? VLOAD(C + m * ldc + n * VLEN) : VZERO();
    for (size_t p = 0; p < kd; p++) {
        const float *bp = B + p * ldb;
        vf b0 = VLOAD(bp);
        vf b1 = nv > 1 ? VLOAD(bp + VLEN) : VZERO();
        const float *ap = A + p * csa;
        SIMD_UNROLL(6)
        for (int m = 0; m < MR; m++) {
            if (m < mr) {
                vf a = VSET1(ap[m * rsa]);
                c[m][0] = VFMA(a, b0, c[m][0]);
                if (nv > 1)
                    c[m][1] = VFMA(a, b1, c[m][1]);
            }
        }
    }
    SIMD_UNROLL(6)
    for (int m = 0; m < MR; m++)
        SIMD_UNROLL(2)
        for (int n = 0; n < NRV; n++)
            if (m < mr && n < nv)
                VSTORE(C + m * ldc + n * VLEN, c[m][n]);
}

static void SIMD_FN(micro_any)(int mr, int nv, size_t kd, const float *A, size_t rsa,
                               size_t csa, const float *B, size_t ldb, float *C, size_t ldc,
                               int accumulate)
{
#define SIMD_MICRO_CASE(R)                                                                    \
    case R:                                                                                   \
        if (nv == 2)                                                                          \
            SIMD_FN(micro)(R, 2, kd, A, rsa, csa, B, ldb, C, ldc, accumulate);                \
        else                                                                                  \
            SIMD_FN(micro)(R, 1, kd, A, rsa, csa, B, ldb, C, ldc, accumulate);                \
        break;
    switch (mr) {
        SIMD_MICRO_CASE(6)
        SIMD_MICRO_CASE(5)
        SIMD_MICRO_CASE(4)
        SIMD_MICRO_CASE(3)
        SIMD_MICRO_CASE(2)
        SIMD_MICRO_CASE(1)
    default:
        break;
    }
#undef SIMD_MICRO_CASE
}

/*
 * C[M x N] = (accumulate ? C : 0) + A[M x Kd] B[Kd x N].
 * A's element (m, p) is A[m*rsa + p*csa] (so a transposed A is rsa = 1,
 * csa = its row length); B and C are row-major with leading dims ldb, ldc.
 * lower: A is lower-triangular including the diagonal (A[m][p] = 0 for p > m
 * and stored as 0), so row block m0.. only reads p < m0 + rows.
 */
static void SIMD_FN(gemm)(size_t M, size_t N, size_t Kd, const float *A, size_t rsa,
                          size_t csa, const float *B, size_t ldb, float *C, size_t ldc,
                          int accumulate, int lower)
{
    const size_t NB = NRV * VLEN;
    size_t n0 = 0;
    for (; n0 + VLEN <= N; n0 += (N - n0 >= NB ? NB : VLEN)) {
        int nv = N - n0 >= NB ? NRV : 1;
        for (size_t m0 = 0; m0 < M; m0 += MR) {
            int mr = (int)SIMD_FN(min_sz)(MR, M - m0);
            size_t kd = lower ? SIMD_FN(min_sz)(Kd, m0 + (size_t)mr) : Kd;
            SIMD_FN(micro_any)(mr, nv, kd, A + m0 * rsa, rsa, csa, B + n0, ldb,
                               C + m0 * ldc + n0, ldc, accumulate);
        }
    }
    /* columns left over (fewer than one vector) */
    for (; n0 < N; n0++)
        for (size_t m = 0; m < M; m++) {
            size_t kd = lower ? SIMD_FN(min_sz)(Kd, m + 1) : Kd;
            float s = accumulate ? C[m * ldc + n0] : 0.0f;
            for (size_t p = 0; p < kd; p++)
                s += A[m * rsa + p * csa] * B[p * ldb + n0];
            C[m * ldc + n0] = s;
        }
}

/* dst[K x n] = src[n x K]^T (dst row length n). */
static void SIMD_FN(transpose)(float *dst, const float *src, size_t n, size_t K)
{
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < K; c++)
            dst[c * n + r] = src[r * K + c];
}

/* ---------------------------------------------------------------------------- */
/* Workspace of one task                                                        */
/* ---------------------------------------------------------------------------- */

typedef struct {
    size_t C, c, K, W, nsub;
    float *q, *k, *g, *v, *b;   /* packed chunk rows [C,K] [C,K] [C,K|1] [C,W] [C]  */
    float *S;                   /* [K, W] state columns of this task               */
    float *kqf;                 /* per sub-chunk: c rows k*F then c rows q*F [2C,K]  */
    float *kb;                  /* k * B (decayed to its sub-chunk's end) [C,K]     */
    float *gsub;                /* per sub-chunk sum of g [nsub, K]                 */
    float *dvec;                /* [K] between-sub-chunk decay                      */
    float *X;                   /* [K, c] a transposed, decayed key block           */
    float *blk;                 /* [2c, c] an off-diagonal block of A_kk ; A_qk      */
    float *pkk, *pqk;           /* [c, VLEN] lane partial sums of the diagonal block */
    float *Akk, *Aqk, *Tm;      /* [C, C]                                           */
    float *Gk, *Gq;             /* [C, C] full Gram matrices (non-KDA mechanisms)   */
    float *kg, *qg, *kd;        /* -gamma*k, s*gamma*q, kdec*k  [C,K]               */
    float *Wn, *U, *O;          /* [C,K] [C,W] [C,W]                                */
    float *kt;                  /* [K, C] transposed keys                           */
    float *gl;                  /* [K] gamma at the chunk end                       */
    float *dsc;                 /* [C] scalar decay row / factors                   */
    float *gam, *kdec;          /* [C] scalar gamma and decay-to-end                */
} SIMD_FN(ws);

/*
 * Lay the workspace out from base (or only count it, base == NULL); returns
 * the floats used. Buffers of the score phase (steps 1, 5: the packed q, k, g
 * rows and the KDA or the scalar-decay temporaries) share memory with those of
 * the state phase (steps 2-4, 6, 7: W, U, O), so one task's working set stays
 * small enough for the L2 cache (C = 64, K = V = 128: about 430 KB).
 */
static size_t SIMD_FN(ws_carve)(SIMD_FN(ws) *w, float *base, size_t C, size_t c, size_t K,
                                size_t W)
{
    size_t nsub = (C + c - 1) / c, cur = 0, mark, endA, endB;
    w->C = C; w->c = c; w->K = K; w->W = W; w->nsub = nsub;
#define SIMD_TAKE(ptr, n)                                                                     \
    do {                                                                                      \
        (ptr) = base ? base + cur : NULL;                                                     \
        cur += ((n) + 15) / 16 * 16; /* 64-byte aligned */                                    \
    } while (0)
    /* both phases */
    SIMD_TAKE(w->v, C * W); SIMD_TAKE(w->b, C); SIMD_TAKE(w->S, K * W);
    SIMD_TAKE(w->Akk, C * C); SIMD_TAKE(w->Aqk, C * C); SIMD_TAKE(w->Tm, C * C);
    SIMD_TAKE(w->kg, C * K); SIMD_TAKE(w->qg, C * K); SIMD_TAKE(w->kd, C * K);
    SIMD_TAKE(w->gl, K); SIMD_TAKE(w->gam, C); SIMD_TAKE(w->kdec, C);
    size_t region = cur;
    /* score phase: packed rows, then KDA's or the scalar decays' temporaries */
    SIMD_TAKE(w->q, C * K); SIMD_TAKE(w->k, C * K); SIMD_TAKE(w->g, C * K);
    mark = cur;
    SIMD_TAKE(w->kqf, 2 * C * K); SIMD_TAKE(w->kb, C * K);
    SIMD_TAKE(w->gsub, nsub * K); SIMD_TAKE(w->dvec, K);
    SIMD_TAKE(w->X, K * c); SIMD_TAKE(w->blk, 2 * c * c);
    SIMD_TAKE(w->pkk, c * VLEN); SIMD_TAKE(w->pqk, c * VLEN);
    endA = cur;
    cur = mark;
    SIMD_TAKE(w->Gk, C * C); SIMD_TAKE(w->Gq, C * C); SIMD_TAKE(w->kt, K * C);
    SIMD_TAKE(w->dsc, C);
    endA = cur > endA ? cur : endA;
    /* state phase, over the score phase's memory */
    cur = region;
    SIMD_TAKE(w->Wn, C * K); SIMD_TAKE(w->U, C * W); SIMD_TAKE(w->O, C * W);
    endB = cur;
#undef SIMD_TAKE
    return endA > endB ? endA : endB;
}

/* Floats needed by one task with chunk C, sub-chunk c, head dim K, W value columns. */
static size_t SIMD_FN(ws_floats)(size_t C, size_t c, size_t K, size_t W)
{
    SIMD_FN(ws) w;
    return SIMD_FN(ws_carve)(&w, NULL, C, c, K, W);
}

/* ---------------------------------------------------------------------------- */
/* KDA: decay factors and the two score matrices (steps 1 and 5)                */
/* ---------------------------------------------------------------------------- */

/*
 * Fill gsub, kqf (k*F and q*F per sub-chunk), kb = k*B, and qg = s*gamma*q,
 * kg = -gamma*k, kd = exp(sum g over r+1..n-1)*k, gl = gamma at the chunk end,
 * where gamma_r = exp(sum of earlier sub-chunks) * F_r and
 * exp(sum g over r+1..n-1) = exp(sum of later sub-chunks) * B_r:
 * products of factors <= 1, each exponent a same-sign sum.
 */
static void SIMD_FN(kda_factors)(SIMD_FN(ws) *w, size_t n, float s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c;
    const size_t Kv = K / VLEN * VLEN;
    const vf sv = VSET1(s), mone = VSET1(-1.0f);
    for (size_t ch = 0; ch < Kv; ch += VLEN) {
        vf P = VZERO(); /* sum of g over the sub-chunks before I */
        for (size_t I = 0; I < nsub; I++) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            float *kf = w->kqf + 2 * s0 * K, *qf = kf + (s1 - s0) * K;
            vf eP = VEXP(P), L = VZERO();
            for (size_t r = s0; r < s1; r++) {
                L = VADD(L, VLOAD(w->g + r * K + ch));
                vf F = VEXP(L), gam = VMUL(eP, F);
                vf kv = VLOAD(w->k + r * K + ch), qv = VLOAD(w->q + r * K + ch);
                VSTORE(kf + (r - s0) * K + ch, VMUL(kv, F));
                VSTORE(qf + (r - s0) * K + ch, VMUL(qv, F));
                VSTORE(w->qg + r * K + ch, VMUL(VMUL(sv, gam), qv));
                VSTORE(w->kg + r * K + ch, VMUL(VMUL(mone, gam), kv));
            }
            VSTORE(w->gsub + I * K + ch, L);
            P = VADD(P, L);
        }
        VSTORE(w->gl + ch, VEXP(P));
        vf Q = VZERO(); /* sum of g over the sub-chunks after I */
        for (size_t I = nsub; I-- > 0;) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            vf eQ = VEXP(Q), R = VZERO();
            for (size_t r = s1; r-- > s0;) {
                vf Bv = VEXP(R), kv = VLOAD(w->k + r * K + ch);
                vf kbv = VMUL(kv, Bv);
                VSTORE(w->kb + r * K + ch, kbv);
                VSTORE(w->kd + r * K + ch, VMUL(eQ, kbv));
                R = VADD(R, VLOAD(w->g + r * K + ch));
            }
            Q = VADD(Q, VLOAD(w->gsub + I * K + ch));
        }
    }
    for (size_t ch = Kv; ch < K; ch++) {
        float P = 0;
        for (size_t I = 0; I < nsub; I++) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            float *kf = w->kqf + 2 * s0 * K, *qf = kf + (s1 - s0) * K;
            float eP = expf(P), L = 0;
            for (size_t r = s0; r < s1; r++) {
                L += w->g[r * K + ch];
                float F = expf(L), gam = eP * F;
                kf[(r - s0) * K + ch] = w->k[r * K + ch] * F;
                qf[(r - s0) * K + ch] = w->q[r * K + ch] * F;
                w->qg[r * K + ch] = s * gam * w->q[r * K + ch];
                w->kg[r * K + ch] = -gam * w->k[r * K + ch];
            }
            w->gsub[I * K + ch] = L;
            P += L;
        }
        w->gl[ch] = expf(P);
        float Q = 0;
        for (size_t I = nsub; I-- > 0;) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            float eQ = expf(Q), R = 0;
            for (size_t r = s1; r-- > s0;) {
                float kbv = w->k[r * K + ch] * expf(R);
                w->kb[r * K + ch] = kbv;
                w->kd[r * K + ch] = eQ * kbv;
                R += w->g[r * K + ch];
            }
            Q += w->gsub[I * K + ch];
        }
    }
}

/* The diagonal block of sub-chunk [s0, s1): pairwise decay, every exponent a
 * running sum of g over j+1..i (<= 0). Writes Akk (strict lower, times beta_i)
 * and Aqk (lower with diagonal, times s) for rows and columns in the block. */
static void SIMD_FN(kda_diag_block)(SIMD_FN(ws) *w, size_t s0, size_t s1, float s)
{
    const size_t K = w->K, C = w->C, Kv = K / VLEN * VLEN;
    for (size_t j = s0; j < s1; j++) {
        const float *kj = w->k + j * K;
        /* i == j: no decay; A_kk's diagonal is not part of the strict lower triangle */
        {
            vf acc = VZERO();
            for (size_t ch = 0; ch < Kv; ch += VLEN)
                acc = VFMA(VLOAD(w->q + j * K + ch), VLOAD(kj + ch), acc);
            float d = VHSUM(acc);
            for (size_t ch = Kv; ch < K; ch++)
                d += w->q[j * K + ch] * kj[ch];
            w->Aqk[j * C + j] = s * d;
        }
        if (j + 1 >= s1)
            continue;
        for (size_t i = j + 1; i < s1; i++) {
            VSTORE(w->pkk + (i - s0) * VLEN, VZERO());
            VSTORE(w->pqk + (i - s0) * VLEN, VZERO());
        }
        for (size_t ch = 0; ch < Kv; ch += VLEN) {
            vf kjv = VLOAD(kj + ch), D = VZERO();
            for (size_t i = j + 1; i < s1; i++) {
                D = VADD(D, VLOAD(w->g + i * K + ch));
                if (VALL_LT(D, EXP_FLOOR))
                    break; /* g <= 0: every later i decays further, to exactly 0 */
                vf t = VMUL(kjv, VEXP(D));
                float *pk = w->pkk + (i - s0) * VLEN, *pq = w->pqk + (i - s0) * VLEN;
                VSTORE(pk, VFMA(VLOAD(w->k + i * K + ch), t, VLOAD(pk)));
                VSTORE(pq, VFMA(VLOAD(w->q + i * K + ch), t, VLOAD(pq)));
            }
        }
        for (size_t i = j + 1; i < s1; i++) {
            float dk = VHSUM(VLOAD(w->pkk + (i - s0) * VLEN));
            float dq = VHSUM(VLOAD(w->pqk + (i - s0) * VLEN));
            w->Akk[i * C + j] = dk;
            w->Aqk[i * C + j] = dq;
        }
        for (size_t ch = Kv; ch < K; ch++) {
            float D = 0;
            for (size_t i = j + 1; i < s1; i++) {
                D += w->g[i * K + ch];
                float t = kj[ch] * expf(D);
                w->Akk[i * C + j] += w->k[i * K + ch] * t;
                w->Aqk[i * C + j] += w->q[i * K + ch] * t;
            }
        }
        for (size_t i = j + 1; i < s1; i++) {
            w->Akk[i * C + j] *= w->b[i];
            w->Aqk[i * C + j] *= s;
        }
    }
}

/* A_kk and A_qk of one KDA chunk of n positions (safe sub-chunks). */
static void SIMD_FN(kda_scores)(SIMD_FN(ws) *w, size_t n, float s)
{
    const size_t K = w->K, C = w->C, c = w->c, nsub = (n + c - 1) / c;
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n), cI = s1 - s0;
        const float *kqf = w->kqf + 2 * s0 * K;
        for (size_t J = 0; J < I; J++) {
            size_t t0 = J * c, cJ = c; /* J < I: a full sub-chunk */
            /* d_IJ = exp(sum of g over the sub-chunks strictly between J and I) */
            for (size_t ch = 0; ch < K; ch++)
                w->dvec[ch] = 0;
            for (size_t M = J + 1; M < I; M++)
                for (size_t ch = 0; ch < K; ch++)
                    w->dvec[ch] += w->gsub[M * K + ch];
            size_t Kv = K / VLEN * VLEN;
            for (size_t ch = 0; ch < Kv; ch += VLEN)
                VSTORE(w->dvec + ch, VEXP(VLOAD(w->dvec + ch)));
            for (size_t ch = Kv; ch < K; ch++)
                w->dvec[ch] = expf(w->dvec[ch]);
            /* X = (d_IJ * kb_J)^T, [K, cJ] */
            for (size_t jj = 0; jj < cJ; jj++)
                for (size_t ch = 0; ch < K; ch++)
                    w->X[ch * cJ + jj] = w->kb[(t0 + jj) * K + ch] * w->dvec[ch];
            /* [kf_I ; qf_I] X  ->  blk [2 cI, cJ] */
            SIMD_FN(gemm)(2 * cI, cJ, K, kqf, K, 1, w->X, cJ, w->blk, cJ, 0, 0);
            for (size_t ii = 0; ii < cI; ii++)
                for (size_t jj = 0; jj < cJ; jj++) {
                    w->Akk[(s0 + ii) * C + t0 + jj] = w->b[s0 + ii] * w->blk[ii * cJ + jj];
                    w->Aqk[(s0 + ii) * C + t0 + jj] = s * w->blk[(cI + ii) * cJ + jj];
                }
        }
        SIMD_FN(kda_diag_block)(w, s0, s1, s);
    }
}

/* ---------------------------------------------------------------------------- */
/* Gated DeltaNet, DeltaNet, linear attention: scalar decay per position        */
/* ---------------------------------------------------------------------------- */

static void SIMD_FN(scalar_scores)(SIMD_FN(ws) *w, size_t n, float s, int gated, int delta)
{
    const size_t K = w->K, C = w->C;
    SIMD_FN(transpose)(w->kt, w->k, n, K);
    /* full Gram matrices q k^T and k k^T, [n, n] with row length C */
    SIMD_FN(gemm)(n, n, K, w->q, K, 1, w->kt, n, w->Gq, C, 0, 0);
    if (delta)
        SIMD_FN(gemm)(n, n, K, w->k, K, 1, w->kt, n, w->Gk, C, 0, 0);
    for (size_t i = 0; i < n; i++) {
        /* dsc[j] = exp(sum g over j+1..i), built right to left as a running sum */
        float D = 0;
        size_t jlo = 0;
        if (gated) {
            w->dsc[i] = 0; /* exp(0): the diagonal always counts */
            jlo = i;
            for (size_t j = i; j-- > 0;) {
                D += w->g[j + 1];
                if (D < EXP_FLOOR)
                    break;
                w->dsc[j] = D;
                jlo = j;
            }
            size_t span = i + 1 - jlo, nv = span / VLEN * VLEN;
            for (size_t x = 0; x < nv; x += VLEN)
                VSTORE(w->dsc + jlo + x, VEXP(VLOAD(w->dsc + jlo + x)));
            for (size_t x = jlo + nv; x <= i; x++)
                w->dsc[x] = expf(w->dsc[x]);
        } else {
            for (size_t j = 0; j <= i; j++)
                w->dsc[j] = 1;
        }
        float bi = w->b[i];
        for (size_t j = 0; j < C; j++) {
            int live = j >= jlo && j <= i;
            w->Aqk[i * C + j] = live ? s * w->Gq[i * C + j] * w->dsc[j] : 0.0f;
            if (delta)
                w->Akk[i * C + j] = live && j < i ? bi * w->Gk[i * C + j] * w->dsc[j] : 0.0f;
        }
    }
    /* gamma_r = exp(sum g over 0..r), kdec_r = exp(sum g over r+1..n-1) */
    float P = 0;
    for (size_t r = 0; r < n; r++) {
        if (gated)
            P += w->g[r];
        w->gam[r] = gated ? expf(P) : 1.0f;
    }
    float Q = 0;
    for (size_t r = n; r-- > 0;) {
        w->kdec[r] = gated ? expf(Q) : 1.0f;
        if (gated)
            Q += w->g[r];
    }
    for (size_t r = 0; r < n; r++) {
        vf sg = VSET1(s * w->gam[r]), mg = VSET1(-w->gam[r]), kdv = VSET1(w->kdec[r]);
        size_t Kv = K / VLEN * VLEN;
        for (size_t ch = 0; ch < Kv; ch += VLEN) {
            vf qv = VLOAD(w->q + r * K + ch), kv = VLOAD(w->k + r * K + ch);
            VSTORE(w->qg + r * K + ch, VMUL(sg, qv));
            VSTORE(w->kg + r * K + ch, VMUL(mg, kv));
            VSTORE(w->kd + r * K + ch, VMUL(kdv, kv));
        }
        for (size_t ch = Kv; ch < K; ch++) {
            w->qg[r * K + ch] = s * w->gam[r] * w->q[r * K + ch];
            w->kg[r * K + ch] = -w->gam[r] * w->k[r * K + ch];
            w->kd[r * K + ch] = w->kdec[r] * w->k[r * K + ch];
        }
    }
    float gend = w->gam[n - 1];
    for (size_t ch = 0; ch < K; ch++)
        w->gl[ch] = gend;
}

/* ---------------------------------------------------------------------------- */
/* One chunk: steps 2-4, 6, 7 (shared by every mechanism)                       */
/* ---------------------------------------------------------------------------- */

/* Tm = (I + Akk)^-1 Diag(beta), unit lower-triangular before the scaling;
 * zero above the diagonal (the gemm's lower mode reads up to the block edge). */
static void SIMD_FN(ut_transform)(SIMD_FN(ws) *w, size_t n)
{
    const size_t C = w->C;
    for (size_t i = 0; i < n; i++) {
        float *ti = w->Tm + i * C;
        for (size_t j = 0; j < C; j++)
            ti[j] = 0;
        ti[i] = 1;
        for (size_t m = 0; m < i; m++) {
            float a = w->Akk[i * C + m];
            if (a == 0)
                continue;
            const float *tm = w->Tm + m * C;
            vf av = VSET1(a);
            size_t len = m + 1, nv = len / VLEN * VLEN;
            for (size_t j = 0; j < nv; j += VLEN)
                VSTORE(ti + j, VSUB(VLOAD(ti + j), VMUL(av, VLOAD(tm + j))));
            for (size_t j = nv; j < len; j++)
                ti[j] -= a * tm[j];
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++)
            w->Tm[i * C + j] *= w->b[j];
}

static void SIMD_FN(chunk)(SIMD_FN(ws) *w, kdalab_mechanism mech, size_t n, float s)
{
    const size_t K = w->K, W = w->W, C = w->C;
    int delta = mech != KDALAB_LINEAR_ATTENTION;

    if (mech == KDALAB_KDA) {
        SIMD_FN(kda_factors)(w, n, s);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < C; j++) {
                w->Akk[i * C + j] = 0;
                w->Aqk[i * C + j] = 0;
            }
        SIMD_FN(kda_scores)(w, n, s);
    } else {
        SIMD_FN(scalar_scores)(w, n, s, mech == KDALAB_GATED_DELTANET, delta);
    }

    const float *Vnew = w->v;
    if (delta) {
        /* 2-3. T = (I + A_kk)^-1 Diag(beta); -W = T (-gamma k), U = T V */
        SIMD_FN(ut_transform)(w, n);
        SIMD_FN(gemm)(n, K, n, w->Tm, C, 1, w->kg, K, w->Wn, K, 0, 1);
        SIMD_FN(gemm)(n, W, n, w->Tm, C, 1, w->v, W, w->U, W, 0, 1);
        /* 4. V_new = U - W S */
        SIMD_FN(gemm)(n, W, K, w->Wn, K, 1, w->S, W, w->U, W, 1, 0);
        Vnew = w->U;
    }
    /* 6. O = s (gamma q) S + A_qk V_new */
    SIMD_FN(gemm)(n, W, K, w->qg, K, 1, w->S, W, w->O, W, 0, 0);
    SIMD_FN(gemm)(n, W, n, w->Aqk, C, 1, Vnew, W, w->O, W, 1, 1);
    /* 7. S <- Diag(gamma_n) S + (kdec k)^T V_new */
    if (mech == KDALAB_KDA || mech == KDALAB_GATED_DELTANET) {
        size_t Wv = W / VLEN * VLEN;
        for (size_t ch = 0; ch < K; ch++) {
            vf gv = VSET1(w->gl[ch]);
            float *row = w->S + ch * W;
            for (size_t j = 0; j < Wv; j += VLEN)
                VSTORE(row + j, VMUL(gv, VLOAD(row + j)));
            for (size_t j = Wv; j < W; j++)
                row[j] *= w->gl[ch];
        }
    }
    SIMD_FN(gemm)(K, W, n, w->kd, 1, K, Vnew, W, w->S, W, 1, 0);
}

/* ---------------------------------------------------------------------------- */
/* One head (one task)                                                          */
/* ---------------------------------------------------------------------------- */

static size_t SIMD_FN(work_floats)(size_t C, size_t c, size_t K, size_t W)
{
    return SIMD_FN(ws_floats)(C, c, K, W);
}

/* Non-finite values among x[0..n): a vector sum of x - x (0 when finite, NaN
 * otherwise) says whether to count at all. */
static size_t SIMD_FN(count_nonfinite)(const float *x, size_t n)
{
    vf acc = VZERO();
    size_t nv = n / VLEN * VLEN;
    for (size_t i = 0; i < nv; i += VLEN) {
        vf xv = VLOAD(x + i);
        acc = VADD(acc, VSUB(xv, xv));
    }
    float tail = 0;
    for (size_t i = nv; i < n; i++)
        tail += x[i] - x[i];
    if (VHSUM(acc) == 0 && tail == 0)
        return 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

/* Ask for n floats from p to be brought towards the cache (the inputs stream
 * from memory with a stride of H rows, which the hardware prefetcher misses). */
static inline void SIMD_FN(prefetch)(const float *p, size_t n)
{
#if defined(__GNUC__)
    for (size_t i = 0; i < n; i += 16)
        __builtin_prefetch(p + i, 0, 2);
#else
    (void)p;
    (void)n;
#endif
}

static void SIMD_FN(chunk_head)(const simd_head_args *a, float *work, size_t *bad_o,
                                size_t *bad_ht)
{
    const size_t K = a->K, V = a->V, W = a->v1 - a->v0, T = a->T;
    size_t C = a->chunk < T ? a->chunk : (T ? T : 1);
    size_t c = a->subchunk < C ? a->subchunk : C;
    SIMD_FN(ws) w;
    SIMD_FN(ws_carve)(&w, work, C, c, K, W);
    const size_t gw = kdalab_mechanism_g_width(a->mech, K);

    for (size_t ch = 0; ch < K; ch++)
        for (size_t j = 0; j < W; j++)
            w.S[ch * W + j] = a->h0 ? a->h0[ch * V + a->v0 + j] : 0.0f;

    for (size_t t0 = 0; t0 < T; t0 += C) {
        size_t n = SIMD_FN(min_sz)(C, T - t0);
        for (size_t r = 0; r < n; r++) {
            size_t t = t0 + r;
            if (t + C < T) { /* the next chunk's row, a chunk's work ahead */
                size_t tn = t + C;
                SIMD_FN(prefetch)(a->q + tn * a->ld_qk, K);
                SIMD_FN(prefetch)(a->k + tn * a->ld_qk, K);
                SIMD_FN(prefetch)(a->v + tn * a->ld_v + a->v0, W);
                if (gw)
                    SIMD_FN(prefetch)(a->g + tn * a->ld_g, gw);
            }
            memcpy(w.q + r * K, a->q + t * a->ld_qk, K * sizeof(float));
            memcpy(w.k + r * K, a->k + t * a->ld_qk, K * sizeof(float));
            memcpy(w.v + r * W, a->v + t * a->ld_v + a->v0, W * sizeof(float));
            if (gw)
                memcpy(w.g + r * gw, a->g + t * a->ld_g, gw * sizeof(float));
            w.b[r] = a->mech == KDALAB_LINEAR_ATTENTION ? 1.0f : a->beta[t * a->ld_b];
        }
        SIMD_FN(chunk)(&w, a->mech, n, a->scale);
        *bad_o += SIMD_FN(count_nonfinite)(w.O, n * W);
        for (size_t r = 0; r < n; r++)
            memcpy(a->o + (t0 + r) * a->ld_v + a->v0, w.O + r * W, W * sizeof(float));
    }
    if (a->ht) {
        for (size_t ch = 0; ch < K; ch++)
            memcpy(a->ht + ch * V + a->v0, w.S + ch * W, W * sizeof(float));
        *bad_ht += SIMD_FN(count_nonfinite)(w.S, K * W);
    }
}

/* ---------------------------------------------------------------------------- */
/* Decode step                                                                  */
/* ---------------------------------------------------------------------------- */

#define STEP_SMALL 512

/*
 * One token of one head, in place. Pass 1 reads S (no writes) to form
 * u = S^T (a*k) — the decayed state's prediction of v — and, at no extra cost,
 * notices a non-finite S (u is then non-finite too; S is rescanned to be sure).
 * Pass 2 writes S = Diag(a) S + k delta^T and accumulates o = s S^T q.
 */
static kdalab_status SIMD_FN(step)(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, float beta, float *S, float *o,
                                   size_t *bad)
{
    float small_buf[3 * STEP_SMALL];
    float *buf = small_buf;
    if (K > STEP_SMALL || V > STEP_SMALL) {
        buf = malloc((2 * K + V) * sizeof(float));
        if (!buf)
            return KDALAB_ENOMEM;
    }
    float *a = buf, *ak = buf + K, *dl = buf + 2 * K; /* decay, decay*k, delta (or u) */
    const size_t Kv = K / VLEN * VLEN, Vv = V / VLEN * VLEN;
    const size_t VB = 4 * VLEN, Vb = V / VB * VB;

    /* per-channel decay a = exp(g) and a*k */
    if (mech == KDALAB_KDA) {
        for (size_t ch = 0; ch < Kv; ch += VLEN)
            VSTORE(a + ch, VEXP(VLOAD(g + ch)));
        for (size_t ch = Kv; ch < K; ch++)
            a[ch] = expf(g[ch]);
    } else {
        float a0 = mech == KDALAB_GATED_DELTANET ? expf(g[0]) : 1.0f;
        for (size_t ch = 0; ch < K; ch++)
            a[ch] = a0;
    }
    for (size_t ch = 0; ch < K; ch++)
        ak[ch] = mech == KDALAB_LINEAR_ATTENTION ? 1.0f : a[ch] * k[ch];

    /* pass 1: u = S^T (a k)  (linear attention: column sums, only to check S) */
    size_t j0 = 0;
    for (; j0 < Vb; j0 += VB) {
        vf u0 = VZERO(), u1 = VZERO(), u2 = VZERO(), u3 = VZERO();
        for (size_t ch = 0; ch < K; ch++) {
            const float *row = S + ch * V + j0;
            vf akv = VSET1(ak[ch]);
            u0 = VFMA(akv, VLOAD(row), u0);
            u1 = VFMA(akv, VLOAD(row + VLEN), u1);
            u2 = VFMA(akv, VLOAD(row + 2 * VLEN), u2);
            u3 = VFMA(akv, VLOAD(row + 3 * VLEN), u3);
        }
        VSTORE(dl + j0, u0);
        VSTORE(dl + j0 + VLEN, u1);
        VSTORE(dl + j0 + 2 * VLEN, u2);
        VSTORE(dl + j0 + 3 * VLEN, u3);
    }
    for (; j0 < Vv; j0 += VLEN) {
        vf u0 = VZERO();
        for (size_t ch = 0; ch < K; ch++)
            u0 = VFMA(VSET1(ak[ch]), VLOAD(S + ch * V + j0), u0);
        VSTORE(dl + j0, u0);
    }
    for (; j0 < V; j0++) {
        float u0 = 0;
        for (size_t ch = 0; ch < K; ch++)
            u0 += ak[ch] * S[ch * V + j0];
        dl[j0] = u0;
    }
    int finite = 1;
    for (size_t j = 0; j < V; j++)
        finite &= isfinite(dl[j]) != 0;
    if (!finite) { /* maybe S holds a NaN/Inf, maybe the sum overflowed: look */
        for (size_t i = 0; i < K * V; i++)
            if (!isfinite(S[i])) {
                *bad = i;
                if (buf != small_buf)
                    free(buf);
                return KDALAB_ENONFINITE;
            }
    }
    /* delta = beta (v - u); linear attention writes v itself */
    for (size_t j = 0; j < V; j++)
        dl[j] = mech == KDALAB_LINEAR_ATTENTION ? v[j] : beta * (v[j] - dl[j]);

    /* pass 2: S = Diag(a) S + k delta^T, o = s S^T q */
    const int decays = mech == KDALAB_KDA || mech == KDALAB_GATED_DELTANET;
    const vf sv = VSET1(scale);
    for (j0 = 0; j0 < Vb; j0 += VB) {
        vf d0 = VLOAD(dl + j0), d1 = VLOAD(dl + j0 + VLEN);
        vf d2 = VLOAD(dl + j0 + 2 * VLEN), d3 = VLOAD(dl + j0 + 3 * VLEN);
        vf o0 = VZERO(), o1 = VZERO(), o2 = VZERO(), o3 = VZERO();
        for (size_t ch = 0; ch < K; ch++) {
            float *row = S + ch * V + j0;
            vf kv = VSET1(k[ch]), qv = VSET1(q[ch]);
            vf r0 = VLOAD(row), r1 = VLOAD(row + VLEN);
            vf r2 = VLOAD(row + 2 * VLEN), r3 = VLOAD(row + 3 * VLEN);
            if (decays) {
                vf av = VSET1(a[ch]);
                r0 = VMUL(av, r0); r1 = VMUL(av, r1); r2 = VMUL(av, r2); r3 = VMUL(av, r3);
            }
            r0 = VFMA(kv, d0, r0); r1 = VFMA(kv, d1, r1);
            r2 = VFMA(kv, d2, r2); r3 = VFMA(kv, d3, r3);
            VSTORE(row, r0); VSTORE(row + VLEN, r1);
            VSTORE(row + 2 * VLEN, r2); VSTORE(row + 3 * VLEN, r3);
            o0 = VFMA(qv, r0, o0); o1 = VFMA(qv, r1, o1);
            o2 = VFMA(qv, r2, o2); o3 = VFMA(qv, r3, o3);
        }
        VSTORE(o + j0, VMUL(sv, o0)); VSTORE(o + j0 + VLEN, VMUL(sv, o1));
        VSTORE(o + j0 + 2 * VLEN, VMUL(sv, o2)); VSTORE(o + j0 + 3 * VLEN, VMUL(sv, o3));
    }
    for (; j0 < Vv; j0 += VLEN) {
        vf d0 = VLOAD(dl + j0), o0 = VZERO();
        for (size_t ch = 0; ch < K; ch++) {
            float *row = S + ch * V + j0;
            vf r0 = VLOAD(row);
            if (decays)
                r0 = VMUL(VSET1(a[ch]), r0);
            r0 = VFMA(VSET1(k[ch]), d0, r0);
            VSTORE(row, r0);
            o0 = VFMA(VSET1(q[ch]), r0, o0);
        }
        VSTORE(o + j0, VMUL(sv, o0));
    }
    for (; j0 < V; j0++) {
        float o0 = 0;
        for (size_t ch = 0; ch < K; ch++) {
            float r = S[ch * V + j0];
            if (decays)
                r *= a[ch];
            r += k[ch] * dl[j0];
            S[ch * V + j0] = r;
            o0 += q[ch] * r;
        }
        o[j0] = scale * o0;
    }
    if (buf != small_buf)
        free(buf);
    return KDALAB_OK;
}

#undef MR
#undef NRV
#undef EXP_FLOOR
#undef STEP_SMALL
#undef SIMD_INLINE
#undef SIMD_UNROLL
