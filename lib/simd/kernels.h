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
 *   VFLUSH(v)              lanes below FLT_MIN set to 0
 *   VALL_LT(v, x)          nonzero when every lane is < x
 *   SIMD_FN(name)          name with the level's suffix
 *
 * The algorithm is REFERENCE.md "Chunkwise form", steps 1-7, with the safe
 * sub-chunk decay for KDA. What differs from the reference (lib/chunk_impl.h)
 * is how things are computed, never what:
 *
 *   - Every decay factor is a PRODUCT of the per-step decays a_t = exp(g_t) <= 1
 *     (one exp per position and channel) over exactly the span it covers:
 *     running products inside a sub-chunk, products of sub-chunk totals across
 *     them; never exp of a difference of cumulative sums. So no factor can
 *     exceed 1 (nothing overflows, for any g <= 0), there is no cancellation
 *     when one g is huge next to tiny ones (g = -1000 beside g = -0.01), and a
 *     product of n factors carries at most n roundings (n <= C). Factors that
 *     fall below FLT_MIN are set to exactly 0 (no subnormals: their
 *     contribution is below float32 resolution of anything they are added to).
 *   - KDA, sub-chunks of c positions (I, J index them; s_I is the first
 *     position of sub-chunk I, e_J the last position of J):
 *       forward  F_i = prod a over s_I..i              (i in I)
 *       backward B_j = prod a over j+1..e_J            (j in J)
 *       between  d_IJ = prod a over the sub-chunks strictly between J and I
 *     and for j in an earlier sub-chunk than i,
 *       exp(Gamma_i - Gamma_j) = F_i * d_IJ * B_j,
 *     so the off-diagonal blocks of A_kk and A_qk are plain matrix products
 *     [k_i F_i ; q_i F_i] x (d_IJ k_j B_j)^T. The diagonal block is pairwise,
 *     prod a over j+1..i per pair and channel, as a running product.
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

#if defined(__GNUC__)
#define SIMD_INLINE static inline __attribute__((always_inline))
#define SIMD_UNROLL(n) _Pragma("GCC unroll 8")
#define SIMD_UNROLL2 _Pragma("GCC unroll 2")
#else
#define SIMD_UNROLL2
#define SIMD_INLINE static inline
#define SIMD_UNROLL(n)
#endif

#define SIMD_TINY 1.17549435e-38f /* FLT_MIN */

static inline size_t SIMD_FN(min_sz)(size_t a, size_t b) { return a < b ? a : b; }

/* x, or exactly 0 when x < FLT_MIN (a decay factor that has left float range). */
static inline float SIMD_FN(flush1)(float x) { return x < SIMD_TINY ? 0.0f : x; }

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
    SIMD_UNROLL2
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
        for (size_t m0 = 0, mr; m0 < M; m0 += mr) {
            /* blocks of 6 rows; 7 or 8 rows left go as 4 + 3 or 4 + 4 (a block
             * of 1 or 2 rows has too few accumulators to hide FMA latency) */
            size_t left = M - m0;
            mr = (left == 7 || left == 8) ? 4 : SIMD_FN(min_sz)(MR, left);
            size_t kd = lower ? SIMD_FN(min_sz)(Kd, m0 + mr) : Kd;
            SIMD_FN(micro_any)((int)mr, nv, kd, A + m0 * rsa, rsa, csa, B + n0, ldb,
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

/* dst[K x n] = src[n x K]^T (dst row length n): each source row read once,
 * contiguously, and scattered down a destination column (unrolled: the
 * loop overhead was as large as the copying). */
static void SIMD_FN(transpose)(float *dst, const float *src, size_t n, size_t K)
{
    for (size_t r = 0; r < n; r++) {
        const float *s = src + r * K;
        float *d = dst + r;
        SIMD_UNROLL(8)
        for (size_t c = 0; c < K; c++)
            d[c * n] = s[c];
    }
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
    float *X;                   /* [K, C] kb transposed                             */
    float *kqd;                 /* [2c, K] a sub-chunk's [kf ; qf] times d_IJ        */
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
    const simd_head_args *pa;   /* the task, for prefetching its next rows          */
    size_t pf_next, pf_end;     /* rows [pf_next, pf_end) not yet prefetched         */
} SIMD_FN(ws);
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

/* Prefetch the next chunk's input rows (and its output rows, for writing)
 * a few at a time: called between the stages of a chunk, so the requests are
 * spread over the chunk's work instead of queueing up in one burst. */
static void SIMD_FN(prefetch_rows)(SIMD_FN(ws) *w, size_t nrows)
{
    const simd_head_args *a = w->pa;
    size_t gw = kdalab_mechanism_g_width(a->mech, a->K), W = a->v1 - a->v0;
    for (; nrows > 0 && w->pf_next < w->pf_end; nrows--, w->pf_next++) {
        size_t t = w->pf_next;
        SIMD_FN(prefetch)(a->q + t * a->ld_qk, a->K);
        SIMD_FN(prefetch)(a->k + t * a->ld_qk, a->K);
        SIMD_FN(prefetch)(a->v + t * a->ld_v + a->v0, W);
        if (gw)
            SIMD_FN(prefetch)(a->g + t * a->ld_g, gw);
#if defined(__GNUC__)
        for (size_t i = 0; i < W; i += 16)
            __builtin_prefetch(a->o + t * a->ld_v + a->v0 + i, 1, 2);
#endif
    }
}


/*
 * Lay the workspace out from base (or only count it, base == NULL); returns
 * the floats used. Buffers of the score phase (steps 1, 5: the packed q, k, g
 * rows and the KDA or the scalar-decay temporaries) share memory with those of
 * the state phase (steps 2-4, 6, 7: W, U, O), so one task's working set stays
 * small: K = V = 128 takes 273 KB at C = 32 and 486 KB at C = 64 (this
 * machine's L2 is 512 KB per core, which is why C = 32 runs faster here).
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
    SIMD_TAKE(w->X, K * C); SIMD_TAKE(w->blk, 2 * c * c); SIMD_TAKE(w->kqd, 2 * c * K);
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
 * Turn g into a = exp(g) in place, and fill ftot (prod a per sub-chunk), kqf
 * (k*F and q*F per sub-chunk), kb = k*B, and qg = s*gamma*q, kg = -gamma*k,
 * kd = (prod a over r+1..n-1)*k, gl = gamma at the chunk end, where
 * gamma_r = (prod of earlier sub-chunks' totals) * F_r and
 * prod a over r+1..n-1 = (prod of later sub-chunks' totals) * B_r.
 */
static void SIMD_FN(kda_factors)(SIMD_FN(ws) *w, size_t n, float s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c;
    const size_t Kv = K / VLEN * VLEN;
    const vf sv = VSET1(s), mone = VSET1(-1.0f), one = VSET1(1.0f);
    float *a = w->g;
    for (size_t ch = 0; ch < Kv; ch += VLEN) {
        for (size_t r = 0; r < n; r++)
            VSTORE(a + r * K + ch, VEXP(VLOAD(a + r * K + ch)));
        vf eP = one; /* prod a over the sub-chunks before I */
        for (size_t I = 0; I < nsub; I++) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            float *kf = w->kqf + 2 * s0 * K, *qf = kf + (s1 - s0) * K;
            vf F = one;
            for (size_t r = s0; r < s1; r++) {
                F = VFLUSH(VMUL(F, VLOAD(a + r * K + ch)));
                vf gam = VFLUSH(VMUL(eP, F));
                vf kv = VLOAD(w->k + r * K + ch), qv = VLOAD(w->q + r * K + ch);
                VSTORE(kf + (r - s0) * K + ch, VMUL(kv, F));
                VSTORE(qf + (r - s0) * K + ch, VMUL(qv, F));
                VSTORE(w->qg + r * K + ch, VMUL(VMUL(sv, gam), qv));
                VSTORE(w->kg + r * K + ch, VMUL(VMUL(mone, gam), kv));
            }
            VSTORE(w->gsub + I * K + ch, F);
            eP = VFLUSH(VMUL(eP, F));
        }
        VSTORE(w->gl + ch, eP);
        vf eQ = one; /* prod a over the sub-chunks after I */
        for (size_t I = nsub; I-- > 0;) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            vf Bv = one;
            for (size_t r = s1; r-- > s0;) {
                vf kv = VLOAD(w->k + r * K + ch);
                VSTORE(w->kb + r * K + ch, VMUL(kv, Bv));
                VSTORE(w->kd + r * K + ch, VMUL(VFLUSH(VMUL(eQ, Bv)), kv));
                Bv = VFLUSH(VMUL(Bv, VLOAD(a + r * K + ch)));
            }
            eQ = VFLUSH(VMUL(eQ, VLOAD(w->gsub + I * K + ch)));
        }
    }
    for (size_t ch = Kv; ch < K; ch++) {
        for (size_t r = 0; r < n; r++)
            a[r * K + ch] = SIMD_FN(flush1)(expf(a[r * K + ch]));
        float eP = 1;
        for (size_t I = 0; I < nsub; I++) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            float *kf = w->kqf + 2 * s0 * K, *qf = kf + (s1 - s0) * K;
            float F = 1;
            for (size_t r = s0; r < s1; r++) {
                F = SIMD_FN(flush1)(F * a[r * K + ch]);
                float gam = SIMD_FN(flush1)(eP * F);
                kf[(r - s0) * K + ch] = w->k[r * K + ch] * F;
                qf[(r - s0) * K + ch] = w->q[r * K + ch] * F;
                w->qg[r * K + ch] = s * gam * w->q[r * K + ch];
                w->kg[r * K + ch] = -gam * w->k[r * K + ch];
            }
            w->gsub[I * K + ch] = F;
            eP = SIMD_FN(flush1)(eP * F);
        }
        w->gl[ch] = eP;
        float eQ = 1;
        for (size_t I = nsub; I-- > 0;) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            float Bv = 1;
            for (size_t r = s1; r-- > s0;) {
                float kv = w->k[r * K + ch];
                w->kb[r * K + ch] = kv * Bv;
                w->kd[r * K + ch] = SIMD_FN(flush1)(eQ * Bv) * kv;
                Bv = SIMD_FN(flush1)(Bv * a[r * K + ch]);
            }
            eQ = SIMD_FN(flush1)(eQ * w->gsub[I * K + ch]);
        }
    }
}

/* Channels [ch0, ch0 + nb*VLEN) of the diagonal-block pairs (i, j), i in
 * (j, s1): the lane partial sums of k_i . (k_j P_ij) and q_i . (k_j P_ij),
 * P_ij = prod a over j+1..i as a running product down i. The nb running
 * products stay in registers; pkk, pqk ([c, VLEN]) hold the partial sums of
 * channels before ch0 (first: start them at 0). */
SIMD_INLINE void SIMD_FN(kda_diag_pairs)(SIMD_FN(ws) *w, const int nb, size_t ch0, size_t j,
                                         size_t s0, size_t s1, int first)
{
    const size_t K = w->K;
    const float *a = w->g, *kj = w->k + j * K + ch0;
    vf P[8];
    SIMD_UNROLL(8)
    for (int b = 0; b < 8; b++)
        P[b] = VSET1(1.0f);
    for (size_t i = j + 1; i < s1; i++) {
        const float *ai = a + i * K + ch0, *ki = w->k + i * K + ch0, *qi = w->q + i * K + ch0;
        float *pk = w->pkk + (i - s0) * VLEN, *pq = w->pqk + (i - s0) * VLEN;
        vf sk = first ? VZERO() : VLOAD(pk), sq = first ? VZERO() : VLOAD(pq);
        SIMD_UNROLL(8)
        for (int b = 0; b < 8; b++) {
            if (b < nb) {
                P[b] = VFLUSH(VMUL(P[b], VLOAD(ai + b * VLEN)));
                vf t = VMUL(VLOAD(kj + b * VLEN), P[b]);
                sk = VFMA(VLOAD(ki + b * VLEN), t, sk);
                sq = VFMA(VLOAD(qi + b * VLEN), t, sq);
            }
        }
        VSTORE(pk, sk);
        VSTORE(pq, sq);
    }
}

/* The diagonal block of sub-chunk [s0, s1): pairwise decay, each factor the
 * running product of a over j+1..i (<= 1, below FLT_MIN exactly 0). Writes
 * Akk (strict lower, times beta_i) and Aqk (lower with diagonal, times s) in
 * the block. w->g holds a. The channels go 8 vectors at a time, so the
 * running products live in registers and the sums in registers within a
 * group (lane partial sums in pkk, pqk between groups). */
static void SIMD_FN(kda_diag_block)(SIMD_FN(ws) *w, size_t s0, size_t s1, float s)
{
    const size_t K = w->K, C = w->C, Kv = K / VLEN * VLEN;
    const float *a = w->g;
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
        size_t ch = 0;
        for (; ch + 8 * VLEN <= Kv; ch += 8 * VLEN)
            SIMD_FN(kda_diag_pairs)(w, 8, ch, j, s0, s1, ch == 0);
        for (; ch < Kv; ch += VLEN)
            SIMD_FN(kda_diag_pairs)(w, 1, ch, j, s0, s1, ch == 0);
        for (size_t i = j + 1; i < s1; i++) {
            w->Akk[i * C + j] = Kv ? VHSUM(VLOAD(w->pkk + (i - s0) * VLEN)) : 0.0f;
            w->Aqk[i * C + j] = Kv ? VHSUM(VLOAD(w->pqk + (i - s0) * VLEN)) : 0.0f;
        }
        for (ch = Kv; ch < K; ch++) {
            float P = 1;
            for (size_t i = j + 1; i < s1; i++) {
                P = SIMD_FN(flush1)(P * a[i * K + ch]);
                float t = kj[ch] * P;
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

/* dst[i*ldd + j] = f * src[i*lds + j], j < n. */
static inline void SIMD_FN(scale_row)(float *dst, const float *src, float f, size_t n)
{
    vf fv = VSET1(f);
    size_t nv = n / VLEN * VLEN;
    for (size_t j = 0; j < nv; j += VLEN)
        VSTORE(dst + j, VMUL(fv, VLOAD(src + j)));
    for (size_t j = nv; j < n; j++)
        dst[j] = f * src[j];
}

/* A_kk and A_qk of one KDA chunk of n positions (safe sub-chunks). */
static void SIMD_FN(kda_scores)(SIMD_FN(ws) *w, size_t n, float s)
{
    const size_t K = w->K, C = w->C, c = w->c, nsub = (n + c - 1) / c;
    const size_t Kv = K / VLEN * VLEN;
    if (nsub > 1) /* kb^T [K, n]: the right-hand factor of every off-diagonal block */
        SIMD_FN(transpose)(w->X, w->kb, n, K);
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n), cI = s1 - s0;
        const float *kqf = w->kqf + 2 * s0 * K;
        /* d_IJ = prod a over the sub-chunks strictly between J and I: 1 for
         * J = I-1, then one more sub-chunk total per step down */
        for (size_t ch = 0; ch < K; ch++)
            w->dvec[ch] = 1;
        for (size_t J = I; J-- > 0;) {
            size_t t0 = J * c, cJ = c; /* J < I: a full sub-chunk */
            const float *left = kqf;
            if (J + 1 < I) {
                for (size_t ch = 0; ch < K; ch++)
                    w->dvec[ch] = SIMD_FN(flush1)(w->dvec[ch] * w->gsub[(J + 1) * K + ch]);
                /* [kf_I ; qf_I] * d_IJ, row by row */
                for (size_t r = 0; r < 2 * cI; r++) {
                    const float *src = kqf + r * K;
                    float *dst = w->kqd + r * K;
                    for (size_t ch = 0; ch < Kv; ch += VLEN)
                        VSTORE(dst + ch, VMUL(VLOAD(src + ch), VLOAD(w->dvec + ch)));
                    for (size_t ch = Kv; ch < K; ch++)
                        dst[ch] = src[ch] * w->dvec[ch];
                }
                left = w->kqd;
            }
            /* [kf_I ; qf_I] d_IJ (kb_J)^T  ->  blk [2 cI, cJ] */
            SIMD_FN(gemm)(2 * cI, cJ, K, left, K, 1, w->X + t0, n, w->blk, cJ, 0, 0);
            for (size_t ii = 0; ii < cI; ii++) {
                SIMD_FN(scale_row)(w->Akk + (s0 + ii) * C + t0, w->blk + ii * cJ,
                                   w->b[s0 + ii], cJ);
                SIMD_FN(scale_row)(w->Aqk + (s0 + ii) * C + t0, w->blk + (cI + ii) * cJ, s,
                                   cJ);
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
    /* a_r = exp(g_r) in place */
    float *a = w->g;
    if (gated)
        for (size_t r = 0; r < n; r++)
            a[r] = SIMD_FN(flush1)(expf(a[r]));
    for (size_t i = 0; i < n; i++) {
        /* dsc[j] = prod a over j+1..i, a running product from j = i down */
        size_t jlo = 0;
        if (gated) {
            float P = 1;
            w->dsc[i] = 1; /* the diagonal: no decay */
            jlo = i;
            for (size_t j = i; j-- > 0;) {
                P = SIMD_FN(flush1)(P * a[j + 1]);
                if (P == 0)
                    break; /* and every earlier j decays further */
                w->dsc[j] = P;
                jlo = j;
            }
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
    /* gamma_r = prod a over 0..r, kdec_r = prod a over r+1..n-1 */
    float P = 1;
    for (size_t r = 0; r < n; r++) {
        if (gated)
            P = SIMD_FN(flush1)(P * a[r]);
        w->gam[r] = P;
    }
    float Q = 1;
    for (size_t r = n; r-- > 0;) {
        w->kdec[r] = Q;
        if (gated)
            Q = SIMD_FN(flush1)(Q * a[r]);
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
 * zero above the diagonal (the gemm's lower mode reads up to the block edge).
 * Row i of the inverse is e_i - sum_{m<i} Akk[i][m] (row m of the inverse),
 * accumulated in registers when a row fits in 8 vectors. */
static void SIMD_FN(ut_transform)(SIMD_FN(ws) *w, size_t n)
{
    const size_t C = w->C;
    if (C <= 8 * VLEN && C % VLEN == 0) {
        for (size_t i = 0; i < n; i++) {
            vf acc[8];
            SIMD_UNROLL(8)
            for (int bk = 0; bk < 8; bk++)
                acc[bk] = VZERO();
            const float *ai = w->Akk + i * C;
            for (size_t m = 0; m < i; m++) {
                vf nav = VSET1(-ai[m]);
                const float *tm = w->Tm + m * C;
                SIMD_UNROLL(8)
                for (int bk = 0; bk < 8; bk++)
                    if ((size_t)bk * VLEN <= m)
                        acc[bk] = VFMA(nav, VLOAD(tm + bk * VLEN), acc[bk]);
            }
            float *ti = w->Tm + i * C;
            SIMD_UNROLL(8)
            for (int bk = 0; bk < 8; bk++)
                if ((size_t)bk * VLEN < C)
                    VSTORE(ti + bk * VLEN, acc[bk]);
            ti[i] = 1;
            for (size_t j = i + 1; j < C; j++)
                ti[j] = 0;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            float *ti = w->Tm + i * C;
            for (size_t j = 0; j < C; j++)
                ti[j] = 0;
            ti[i] = 1;
            for (size_t m = 0; m < i; m++) {
                float a = w->Akk[i * C + m];
                const float *tm = w->Tm + m * C;
                for (size_t j = 0; j <= m; j++)
                    ti[j] -= a * tm[j];
            }
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
    const size_t pf = (C + 7) / 8; /* rows to prefetch at each of 8 stages */

    SIMD_FN(prefetch_rows)(w, pf);
    if (mech == KDALAB_KDA) {
        SIMD_FN(kda_factors)(w, n, s);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < C; j++) {
                w->Akk[i * C + j] = 0;
                w->Aqk[i * C + j] = 0;
            }
        SIMD_FN(prefetch_rows)(w, pf);
        SIMD_FN(kda_scores)(w, n, s);
    } else {
        SIMD_FN(scalar_scores)(w, n, s, mech == KDALAB_GATED_DELTANET, delta);
    }

    const float *Vnew = w->v;
    if (delta) {
        /* 2-3. T = (I + A_kk)^-1 Diag(beta); -W = T (-gamma k), U = T V */
        SIMD_FN(prefetch_rows)(w, pf);
        SIMD_FN(ut_transform)(w, n);
        SIMD_FN(gemm)(n, K, n, w->Tm, C, 1, w->kg, K, w->Wn, K, 0, 1);
        SIMD_FN(prefetch_rows)(w, pf);
        SIMD_FN(gemm)(n, W, n, w->Tm, C, 1, w->v, W, w->U, W, 0, 1);
        SIMD_FN(prefetch_rows)(w, pf);
        /* 4. V_new = U - W S */
        SIMD_FN(gemm)(n, W, K, w->Wn, K, 1, w->S, W, w->U, W, 1, 0);
        Vnew = w->U;
    }
    /* 6. O = s (gamma q) S + A_qk V_new */
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(gemm)(n, W, K, w->qg, K, 1, w->S, W, w->O, W, 0, 0);
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(gemm)(n, W, n, w->Aqk, C, 1, Vnew, W, w->O, W, 1, 1);
    SIMD_FN(prefetch_rows)(w, pf);
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
    SIMD_FN(prefetch_rows)(w, C); /* whatever is left */
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

/* dst[0..n) = src[0..n): rows of a few hundred bytes, where a vector loop is
 * cheaper than a call to memcpy. */
static inline void SIMD_FN(copy)(float *dst, const float *src, size_t n)
{
    size_t nv = n / VLEN * VLEN;
    for (size_t i = 0; i < nv; i += VLEN)
        VSTORE(dst + i, VLOAD(src + i));
    for (size_t i = nv; i < n; i++)
        dst[i] = src[i];
}

static void SIMD_FN(chunk_head)(const simd_head_args *a, float *work, size_t *bad_o,
                                size_t *bad_ht)
{
    const size_t K = a->K, V = a->V, W = a->v1 - a->v0, T = a->T;
    size_t C = a->chunk < T ? a->chunk : (T ? T : 1);
    size_t c = a->subchunk < C ? a->subchunk : C;
    SIMD_FN(ws) w;
    SIMD_FN(ws_carve)(&w, work, C, c, K, W);
    w.pa = a;
    const size_t gw = kdalab_mechanism_g_width(a->mech, K);

    for (size_t ch = 0; ch < K; ch++)
        for (size_t j = 0; j < W; j++)
            w.S[ch * W + j] = a->h0 ? a->h0[ch * V + a->v0 + j] : 0.0f;

    for (size_t t0 = 0; t0 < T; t0 += C) {
        size_t n = SIMD_FN(min_sz)(C, T - t0);
        for (size_t r = 0; r < n; r++) {
            size_t t = t0 + r;
            SIMD_FN(copy)(w.q + r * K, a->q + t * a->ld_qk, K);
            SIMD_FN(copy)(w.k + r * K, a->k + t * a->ld_qk, K);
            SIMD_FN(copy)(w.v + r * W, a->v + t * a->ld_v + a->v0, W);
            if (gw)
                SIMD_FN(copy)(w.g + r * gw, a->g + t * a->ld_g, gw);
            w.b[r] = a->mech == KDALAB_LINEAR_ATTENTION ? 1.0f : a->beta[t * a->ld_b];
        }
        w.pf_next = t0 + n; /* the next chunk's rows, spread over this chunk's work */
        w.pf_end = SIMD_FN(min_sz)(t0 + n + C, T);
        SIMD_FN(chunk)(&w, a->mech, n, a->scale);
        *bad_o += SIMD_FN(count_nonfinite)(w.O, n * W);
        for (size_t r = 0; r < n; r++)
            SIMD_FN(copy)(a->o + (t0 + r) * a->ld_v + a->v0, w.O + r * W, W);
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

/* Nonzero when some x[i] breaks the rule of its kind: NaN/Inf (every kind);
 * kind 1 (a log-decay g): > 0; kind 2 (beta): outside [0, 2]. A vector
 * screen: the caller finds the exact index and message with the reference's
 * scalar checks. */
static int SIMD_FN(any_bad)(const float *x, size_t n, int kind)
{
    /* y < the smallest positive float  <=>  y <= 0 (and false for NaN) */
    const float above0 = 1.40129846e-45f, above2 = 2.00000024f;
    vf acc = VZERO();
    size_t nv = n / VLEN * VLEN;
    int bad = 0;
    for (size_t i = 0; i < nv; i += VLEN) {
        vf xv = VLOAD(x + i);
        acc = VADD(acc, VSUB(xv, xv)); /* 0, or NaN for NaN/Inf */
        if (kind == 1)
            bad |= !VALL_LT(xv, above0);
        else if (kind == 2)
            bad |= !VALL_LT(VSUB(VZERO(), xv), above0) || !VALL_LT(xv, above2);
    }
    bad |= VHSUM(acc) != 0;
    for (size_t i = nv; i < n; i++)
        bad |= !isfinite(x[i]) || (kind == 1 && x[i] > 0) ||
               (kind == 2 && !(x[i] >= 0 && x[i] <= 2));
    return bad;
}

/* Pass 1 of the decode step for four vectors of columns of S [K, V],
 * starting at columns p[0..3]: u_j = sum_ch ak_ch S[ch][j] and
 * wq_j = sum_ch aq_ch S[ch][j] (8 accumulators, 4 loads per row). The
 * vectors may overlap or repeat: each computes its columns' full sums, in the
 * same order, so a column written twice gets the same value twice. */
static void SIMD_FN(step_read4)(const float *S, size_t K, size_t V, const size_t p[4],
                                const float *ak, const float *aq, float *u, float *wq)
{
    vf u0 = VZERO(), u1 = VZERO(), u2 = VZERO(), u3 = VZERO();
    vf w0 = VZERO(), w1 = VZERO(), w2 = VZERO(), w3 = VZERO();
    for (size_t ch = 0; ch < K; ch++) {
        const float *row = S + ch * V;
        vf akv = VSET1(ak[ch]), aqv = VSET1(aq[ch]);
        vf r0 = VLOAD(row + p[0]), r1 = VLOAD(row + p[1]);
        vf r2 = VLOAD(row + p[2]), r3 = VLOAD(row + p[3]);
        u0 = VFMA(akv, r0, u0); u1 = VFMA(akv, r1, u1);
        u2 = VFMA(akv, r2, u2); u3 = VFMA(akv, r3, u3);
        w0 = VFMA(aqv, r0, w0); w1 = VFMA(aqv, r1, w1);
        w2 = VFMA(aqv, r2, w2); w3 = VFMA(aqv, r3, w3);
    }
    VSTORE(u + p[0], u0); VSTORE(u + p[1], u1); VSTORE(u + p[2], u2); VSTORE(u + p[3], u3);
    VSTORE(wq + p[0], w0); VSTORE(wq + p[1], w1); VSTORE(wq + p[2], w2); VSTORE(wq + p[3], w3);
}

/* Pass 1 of the decode step over all columns of S [K, V] (V >= VLEN): the
 * strips of four vectors from column head on, then the columns before head
 * and after the last strip as vectors that stay inside [0, V) (overlapping
 * their neighbours where needed), four at a time. */
static void SIMD_FN(step_read)(const float *S, size_t K, size_t V, size_t head,
                               const float *ak, const float *aq, float *u, float *wq)
{
    const size_t VB = 4 * VLEN, nb = (V - head) / VB, jv = head + nb * VB;
    for (size_t b = 0; b < nb; b++) {
        const size_t j = head + b * VB, p[4] = {j, j + VLEN, j + 2 * VLEN, j + 3 * VLEN};
        SIMD_FN(step_read4)(S, K, V, p, ak, aq, u, wq);
    }
    size_t p[4], np = 0;
    const size_t lastv = V - VLEN;
    for (int part = 0; part < 2; part++) {
        size_t x0 = part == 0 ? 0 : jv, x1 = part == 0 ? head : V;
        for (size_t x = x0; x < x1; x += VLEN) {
            p[np++] = SIMD_FN(min_sz)(x, lastv);
            if (np == 4) {
                SIMD_FN(step_read4)(S, K, V, p, ak, aq, u, wq);
                np = 0;
            }
        }
    }
    if (np > 0) {
        for (size_t i = np; i < 4; i++)
            p[i] = p[0]; /* repeats: the same sums again */
        SIMD_FN(step_read4)(S, K, V, p, ak, aq, u, wq);
    }
}

/* Pass 2 of the decode step: S[ch][j] = a_ch S[ch][j] + k_ch d_j (a = NULL:
 * a_ch = 1), in the opposite order of step_read: first the columns outside
 * its strips, row by row, then the strips from the last, last row first (what
 * pass 1 read last is still in L1, and what is written last is what the next
 * step reads first). Returns nonzero when a value it wrote is not finite (the
 * state overflowed): x - x is 0 for a finite x and NaN otherwise, summed into
 * accumulators that stay 0 while everything is finite, at no extra pass. */
static int SIMD_FN(step_write)(float *S, size_t K, size_t V, size_t j0, const float *a,
                               const float *k, const float *d)
{
    const size_t VB = 4 * VLEN;
    const size_t nb = (V - j0) / VB, jv = j0 + nb * VB;
    vf bad0 = VZERO(), bad1 = VZERO(), bad2 = VZERO(), bad3 = VZERO();
    int bad_tail = 0;
    for (size_t ch = K; ch-- > 0;) { /* columns before j0 and after the last strip */
        float *row = S + ch * V;
        const float as = a ? a[ch] : 1.0f;
        vf kv = VSET1(k[ch]), av = VSET1(as);
        for (int part = 0; part < 2; part++) {
            size_t j = part == 0 ? 0 : jv, je = part == 0 ? j0 : V;
            for (; j + VLEN <= je; j += VLEN) {
                vf x = VFMA(kv, VLOAD(d + j), VMUL(av, VLOAD(row + j)));
                VSTORE(row + j, x);
                bad0 = VADD(bad0, VSUB(x, x));
            }
            for (; j < je; j++) {
                row[j] = k[ch] * d[j] + as * row[j];
                bad_tail |= !isfinite(row[j]);
            }
        }
    }
    for (size_t b = nb; b-- > 0;) {
        const size_t j = j0 + b * VB;
        vf d0 = VLOAD(d + j), d1 = VLOAD(d + j + VLEN);
        vf d2 = VLOAD(d + j + 2 * VLEN), d3 = VLOAD(d + j + 3 * VLEN);
        for (size_t ch = K; ch-- > 0;) {
            float *row = S + ch * V + j;
            vf kv = VSET1(k[ch]), av = VSET1(a ? a[ch] : 1.0f);
            vf x0 = VFMA(kv, d0, VMUL(av, VLOAD(row)));
            vf x1 = VFMA(kv, d1, VMUL(av, VLOAD(row + VLEN)));
            vf x2 = VFMA(kv, d2, VMUL(av, VLOAD(row + 2 * VLEN)));
            vf x3 = VFMA(kv, d3, VMUL(av, VLOAD(row + 3 * VLEN)));
            VSTORE(row, x0);
            VSTORE(row + VLEN, x1);
            VSTORE(row + 2 * VLEN, x2);
            VSTORE(row + 3 * VLEN, x3);
            bad0 = VADD(bad0, VSUB(x0, x0));
            bad1 = VADD(bad1, VSUB(x1, x1));
            bad2 = VADD(bad2, VSUB(x2, x2));
            bad3 = VADD(bad3, VSUB(x3, x3));
        }
    }
    float sum = VHSUM(VADD(VADD(bad0, bad1), VADD(bad2, bad3)));
    return bad_tail || sum != 0.0f; /* NaN != 0 */
}

/*
 * One token of one head, in place, in two passes over S:
 *   pass 1 (reads S only): u = S^T (a*k) and w = S^T (a*q). Every element of
 *     S enters u with a factor (a*k)_ch, and 0 * Inf, 0 * NaN are NaN, so a
 *     NaN/Inf anywhere in S makes some u_j non-finite: that is the finiteness
 *     screen (S is then rescanned to be sure; nothing has been written yet);
 *   then delta = beta (v - u) and o = s (w + delta (k . q)), which is
 *     s S_new^T q for S_new = Diag(a) S + k delta^T without a reduction over
 *     the new state;
 *   pass 2 (writes S): S = Diag(a) S + k delta^T, in pass 1's column strips
 *     taken in the opposite order (step_read, step_write).
 * Linear attention: a = 1 and delta = v.
 */
static kdalab_status SIMD_FN(step)(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, float beta, float *S, float *o,
                                   size_t *bad)
{
    float small_buf[5 * STEP_SMALL];
    float *buf = small_buf;
    if (K > STEP_SMALL || V > STEP_SMALL) {
        buf = malloc((3 * K + 2 * V) * sizeof(float));
        if (!buf)
            return KDALAB_ENOMEM;
    }
    /* decay, decay*k, decay*q; then u (becomes delta), w */
    float *a = buf, *ak = buf + K, *aq = buf + 2 * K;
    float *u = buf + 3 * K, *wq = u + V;
    const size_t Kv = K / VLEN * VLEN;
    const int decays = mech == KDALAB_KDA || mech == KDALAB_GATED_DELTANET;

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
    vf kqv = VZERO();
    for (size_t ch = 0; ch < Kv; ch += VLEN) {
        vf av = VLOAD(a + ch), kv = VLOAD(k + ch), qv = VLOAD(q + ch);
        VSTORE(ak + ch, VMUL(av, kv));
        VSTORE(aq + ch, VMUL(av, qv));
        kqv = VFMA(kv, qv, kqv);
    }
    float kq = VHSUM(kqv);
    for (size_t ch = Kv; ch < K; ch++) {
        ak[ch] = a[ch] * k[ch];
        aq[ch] = a[ch] * q[ch];
        kq += k[ch] * q[ch];
    }

    /* S's columns from the first 64-byte boundary of row 0 on, then the few
     * before it: strips that start on a cache line (a 32-byte load across two
     * lines costs as much as two; misaligned S took 3.7-3.9 us, aligned 2.5) */
    size_t head = 0;
    if ((uintptr_t)S % sizeof(float) == 0)
        head = SIMD_FN(min_sz)((64 - (uintptr_t)S % 64) % 64 / sizeof(float), V);

    /* pass 1 */
    if (V >= VLEN) {
        SIMD_FN(step_read)(S, K, V, head, ak, aq, u, wq);
    } else {
        for (size_t j = 0; j < V; j++) {
            float u0 = 0, w0 = 0;
            for (size_t ch = 0; ch < K; ch++) {
                u0 += ak[ch] * S[ch * V + j];
                w0 += aq[ch] * S[ch * V + j];
            }
            u[j] = u0;
            wq[j] = w0;
        }
    }
    int finite = 1;
    for (size_t j = 0; j < V; j++)
        finite &= isfinite(u[j]) != 0;
    if (!finite) { /* maybe S holds a NaN/Inf, maybe u overflowed: look */
        for (size_t i = 0; i < K * V; i++)
            if (!isfinite(S[i])) {
                *bad = i;
                if (buf != small_buf)
                    free(buf);
                return KDALAB_ENONFINITE;
            }
    }
    /* delta (in u) and o */
    for (size_t j = 0; j < V; j++) {
        float d = mech == KDALAB_LINEAR_ATTENTION ? v[j] : beta * (v[j] - u[j]);
        u[j] = d;
        o[j] = scale * (wq[j] + d * kq);
    }

    /* pass 2, in the opposite order of pass 1; it reports an overflowed state */
    int overflowed = SIMD_FN(step_write)(S, K, V, head, decays ? a : NULL, k, u);
    if (buf != small_buf)
        free(buf);
    return overflowed ? KDALAB_ERANGE : KDALAB_OK;
}

#undef MR
#undef NRV
#undef SIMD_TINY
#undef STEP_SMALL
#undef SIMD_INLINE
#undef SIMD_UNROLL
#undef SIMD_UNROLL2
