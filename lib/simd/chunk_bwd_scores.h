/*
 * lib/simd/chunk_bwd_scores.h — the backward's workspace and the backward
 * of steps 1 and 5 (the decayed Gram matrices A_kk and A_qk) on the
 * optimized path, the counterpart of chunk_scores.h: the decay factors the
 * backward needs beyond the forward's rows, and dL/dX, dL/dY and the decay
 * factors' share of dL/dg of a decayed Gram matrix, as matrix products
 * between sub-chunks and pairwise inside one. lib/simd/chunk_bwd.h (which
 * includes this file's definitions through instantiate.h) says the algorithm
 * and its notation.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: the type bws, bwd_carve,
 * bwd_work_floats, row_mul3, row_axpy, row_dot, bwd_factors,
 * gram_diag_pairs, gram_bwd
 * needs: kernel_common.h, gemm.h, chunk_workspace.h, chunk_scores.h,
 * chunk_kernels.h
 */

typedef struct {
    SIMD_FN(ws) f;               /* the forward's workspace (one head, W = V)   */
    real *Gkk, *Minv, *dAqk, *dA;          /* [C, C]                            */
    real *gam, *te, *F, *Bf;               /* [C, K] decay factors              */
    real *Wn, *dqg, *dkd, *dWn, *dRk;      /* [C, K]                            */
    real *U, *Vn, *dVn, *dRv;              /* [C, V]                            */
    real *UT, *VnT;                        /* [V, C] U, Vn transposed            */
    real *B2, *A2;                         /* [2C, V] dO ; dVn, [2C, K] qg ; Wn  */
    real *B2T, *rT;                        /* [V, 2C] B2 transposed, [K, 2C]     */
    real *WnT;                             /* [K, C] Wn transposed               */
    real *dq, *dk, *dgam, *dgsum;          /* [C, K] gradients of the chunk      */
    real *dXo, *dYo, *tmp;                 /* [C, K] a Gram's backward           */
    real *gx;                              /* [C, K] g per channel (not KDA)     */
    real *dv;                              /* [C, V]                             */
    real *dbeta, *ones;                    /* [C]                                */
    real *run, *dvec, *dgl;                /* [K]                                */
    real *dS;                              /* [K, V] dL/d(state)                 */
    /* DPLR only (dplr_bwd.h) */
    real *ash, *dash, *da, *db, *dbd;      /* [C, K] a one row up, its gradient,
                                              the chunk's da, db, dL/d(bd)       */
    real *ck;                              /* [ngroups, K, V] entering each group */
    real *loc;                             /* [G + 1, K, V] entering each chunk of
                                              one group, and leaving its last     */
} SIMD_FN(bws);

/* Chunks per group of the sweep that stores the states (lib/simd/chunk_bwd.h):
 * all of them (one group: nchunks + 2 states, none recomputed) when those fit
 * in state_bytes (>= 1: the budget the entry resolved, entry_impl.h), else
 * ceil(sqrt(nchunks)), which makes the stored states, ngroups + G + 1
 * of them, about 2 sqrt(nchunks) instead of nchunks + 2, for one more
 * forward of most chunks. */
static size_t SIMD_FN(bwd_group)(size_t nchunks, size_t K, size_t V, size_t state_bytes)
{
    if (nchunks + 2 <= state_bytes / sizeof(real) / (K * V))
        return nchunks ? nchunks : 1;
    size_t G = 1;
    while (G * G < nchunks)
        G++;
    return G;
}

/* Lay the backward's workspace out from base (or only count it, base ==
 * NULL) for a sequence of nchunks chunks; returns the elements used. */
static size_t SIMD_FN(bwd_carve)(SIMD_FN(bws) *w, real *base, size_t C, size_t c, size_t K,
                                 size_t V, size_t nchunks, int ab, size_t state_bytes)
{
    size_t cur = SIMD_FN(ws_carve)(&w->f, base, C, c, K, V, 1, ab, 0);
    cur = (cur + SIMD_LINE - 1) / SIMD_LINE * SIMD_LINE;
#define BWD_TAKE(ptr, n)                                                                      \
    do {                                                                                      \
        (ptr) = base ? base + cur : NULL;                                                     \
        cur += ((n) + SIMD_LINE - 1) / SIMD_LINE * SIMD_LINE; /* 64-byte aligned */          \
    } while (0)
    BWD_TAKE(w->Gkk, C * C); BWD_TAKE(w->Minv, C * C);
    BWD_TAKE(w->dAqk, C * C); BWD_TAKE(w->dA, C * C);
    BWD_TAKE(w->gam, C * K); BWD_TAKE(w->te, C * K); BWD_TAKE(w->F, C * K);
    BWD_TAKE(w->Bf, C * K); BWD_TAKE(w->Wn, C * K); BWD_TAKE(w->dqg, C * K);
    BWD_TAKE(w->dkd, C * K); BWD_TAKE(w->dWn, C * K); BWD_TAKE(w->dRk, C * K);
    BWD_TAKE(w->U, C * V); BWD_TAKE(w->Vn, C * V); BWD_TAKE(w->dVn, C * V);
    BWD_TAKE(w->dRv, C * V);
    BWD_TAKE(w->UT, V * C); BWD_TAKE(w->VnT, V * C); BWD_TAKE(w->WnT, K * C);
    BWD_TAKE(w->B2, 2 * C * V); BWD_TAKE(w->A2, 2 * C * K);
    BWD_TAKE(w->B2T, 2 * C * V); BWD_TAKE(w->rT, 2 * C * K);
    BWD_TAKE(w->dq, C * K); BWD_TAKE(w->dk, C * K); BWD_TAKE(w->dgam, C * K);
    BWD_TAKE(w->dgsum, C * K); BWD_TAKE(w->dXo, C * K); BWD_TAKE(w->dYo, C * K);
    BWD_TAKE(w->tmp, C * K); BWD_TAKE(w->gx, C * K);
    BWD_TAKE(w->dv, C * V);
    BWD_TAKE(w->dbeta, C); BWD_TAKE(w->ones, C);
    BWD_TAKE(w->run, K); BWD_TAKE(w->dvec, K); BWD_TAKE(w->dgl, K);
    BWD_TAKE(w->dS, K * V);
    const size_t CKab = ab ? C * K : 0; /* the DPLR row's */
    BWD_TAKE(w->ash, CKab); BWD_TAKE(w->dash, CKab); BWD_TAKE(w->da, CKab);
    BWD_TAKE(w->db, CKab); BWD_TAKE(w->dbd, CKab);
    const size_t G = SIMD_FN(bwd_group)(nchunks, K, V, state_bytes);
    const size_t ngroups = (nchunks + G - 1) / G;
    BWD_TAKE(w->ck, (ngroups ? ngroups : 1) * K * V);
    BWD_TAKE(w->loc, (G + 1) * K * V);
#undef BWD_TAKE
    return cur;
}

/* Elements of workspace one backward task needs for a sequence of nchunks
 * chunks (chunk C, sub-chunk c, head dims K, V; ab: the DPLR row's buffers
 * too; state_bytes as bwd_group's). Not monotone in nchunks: a shorter
 * sequence may keep every state where a longer one checkpoints, so a batch
 * of several lengths takes the largest over its sequences. The caller has
 * checked that the sizes fit. */
static size_t SIMD_FN(bwd_work_floats)(size_t C, size_t c, size_t K, size_t V, size_t nchunks,
                                       int ab, size_t state_bytes)
{
    SIMD_FN(bws) w;
    return SIMD_FN(bwd_carve)(&w, NULL, C, c, K, V, nchunks, ab, state_bytes);
}

/* x [n] (+)= y [n] * z [n] * f (vector over the row; add: accumulate). */
static inline void SIMD_FN(row_mul3)(real *x, const real *y, const real *z, const real *f,
                                     size_t n, int add)
{
    size_t nv = n / VLEN * VLEN;
    for (size_t j = 0; j < nv; j += VLEN) {
        vf p = VMUL(VMUL(VLOAD(y + j), VLOAD(z + j)), VLOAD(f + j));
        VSTORE(x + j, add ? VADD(VLOAD(x + j), p) : p);
    }
    for (size_t j = nv; j < n; j++)
        x[j] = (add ? x[j] : 0.0f) + y[j] * z[j] * f[j];
}

/* x [n] += a * y [n] (vector over the row). */
static inline void SIMD_FN(row_axpy)(real *x, real a, const real *y, size_t n)
{
    vf av = VSET1(a);
    size_t nv = n / VLEN * VLEN;
    for (size_t j = 0; j < nv; j += VLEN)
        VSTORE(x + j, VFMA(av, VLOAD(y + j), VLOAD(x + j)));
    for (size_t j = nv; j < n; j++)
        x[j] += a * y[j];
}

/* sum_j x[j] y[j], j < n. */
static inline real SIMD_FN(row_dot)(const real *x, const real *y, size_t n)
{
    vf acc = VZERO();
    size_t nv = n / VLEN * VLEN;
    for (size_t j = 0; j < nv; j += VLEN)
        acc = VFMA(VLOAD(x + j), VLOAD(y + j), acc);
    real s = VHSUM(acc);
    for (size_t j = nv; j < n; j++)
        s += x[j] * y[j];
    return s;
}

/*
 * The factors the backward needs beyond the forward's rows: gam (gamma),
 * te (to the chunk end), F and Bf (inside the sub-chunk) [n, K], from the
 * a = exp(g) that kda_factors left in w->f.g and its sub-chunk totals, by
 * the same running products (and flushes) as kda_factors.
 */
static void SIMD_FN(bwd_factors)(SIMD_FN(bws) *w, size_t n)
{
    const size_t K = w->f.K, c = w->f.c, nsub = (n + c - 1) / c, Kv = K / VLEN * VLEN;
    const real *a = w->f.g, *tot = w->f.subtot;
    real *eP = w->run, *eQ = w->dvec;
    const vf one = VSET1(1.0f);
    for (size_t ch = 0; ch < K; ch++)
        eP[ch] = eQ[ch] = 1;
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
        for (size_t r = s0; r < s1; r++) {
            const real *prev = w->F + (r - 1) * K, *ar = a + r * K;
            real *Fr = w->F + r * K, *gr = w->gam + r * K;
            size_t ch = 0;
            for (; ch < Kv; ch += VLEN) {
                vf F = VFLUSH(VMUL(r > s0 ? VLOAD(prev + ch) : one, VLOAD(ar + ch)));
                VSTORE(Fr + ch, F);
                VSTORE(gr + ch, VFLUSH(VMUL(VLOAD(eP + ch), F)));
            }
            for (; ch < K; ch++) {
                Fr[ch] = SIMD_FN(flush1)((r > s0 ? prev[ch] : 1.0f) * ar[ch]);
                gr[ch] = SIMD_FN(flush1)(eP[ch] * Fr[ch]);
            }
        }
        for (size_t ch = 0; ch < K; ch++)
            eP[ch] = SIMD_FN(flush1)(eP[ch] * tot[I * K + ch]);
    }
    for (size_t I = nsub; I-- > 0;) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
        for (size_t r = s1; r-- > s0;) {
            const real *next = w->Bf + (r + 1) * K, *an = a + (r + 1) * K;
            real *Br = w->Bf + r * K, *tr = w->te + r * K;
            int last = r + 1 == s1;
            size_t ch = 0;
            for (; ch < Kv; ch += VLEN) {
                vf B = last ? one : VFLUSH(VMUL(VLOAD(next + ch), VLOAD(an + ch)));
                VSTORE(Br + ch, B);
                VSTORE(tr + ch, VFLUSH(VMUL(VLOAD(eQ + ch), B)));
            }
            for (; ch < K; ch++) {
                Br[ch] = last ? 1.0f : SIMD_FN(flush1)(next[ch] * an[ch]);
                tr[ch] = SIMD_FN(flush1)(eQ[ch] * Br[ch]);
            }
        }
        for (size_t ch = 0; ch < K; ch++)
            eQ[ch] = SIMD_FN(flush1)(eQ[ch] * tot[I * K + ch]);
    }
}

/* Channels [ch0, ch0 + nb*VLEN) of the diagonal block's pairs (i, j),
 * j in [s0, i): P = prod a over j+1..i as a running product down j (as
 * kda_diag_pairs), dXo_i += dG[i][j] Y_j P and dYo_j += dG[i][j] X_i P, with
 * P, X_i and dXo_i's partial sum in registers. */
#if defined(SIMD_NRV) && SIMD_NRV >= 4
#define BWD_NB 8
#else
#define BWD_NB 4
#endif
SIMD_INLINE void SIMD_FN(gram_diag_pairs)(SIMD_FN(bws) *w, const int nb, size_t ch0, size_t i,
                                          size_t s0, const real *X, size_t ldx, const real *Y,
                                          size_t ldy, const real *dG)
{
    const size_t K = w->f.K, C = w->f.C;
    const real *a = w->f.g + ch0;
    vf P[BWD_NB], xi[BWD_NB], acc[BWD_NB];
    SIMD_UNROLL(BWD_NB)
    for (int b = 0; b < BWD_NB; b++) {
        P[b] = VSET1(1.0f);
        xi[b] = b < nb ? VLOAD(X + i * ldx + ch0 + b * VLEN) : VZERO();
        acc[b] = VZERO();
    }
    for (size_t j = i; j-- > s0;) {
        const real *aj = a + (j + 1) * K, *yj = Y + j * ldy + ch0;
        real *dyj = w->dYo + j * K + ch0;
        vf wv = VSET1(dG[i * C + j]);
        SIMD_UNROLL(BWD_NB)
        for (int b = 0; b < BWD_NB; b++) {
            if (b < nb) {
                P[b] = VFLUSH(VMUL(P[b], VLOAD(aj + b * VLEN)));
                vf wp = VMUL(wv, P[b]);
                acc[b] = VFMA(wp, VLOAD(yj + b * VLEN), acc[b]);
                VSTORE(dyj + b * VLEN, VFMA(wp, xi[b], VLOAD(dyj + b * VLEN)));
            }
        }
    }
    real *dxi = w->dXo + i * K + ch0;
    SIMD_UNROLL(BWD_NB)
    for (int b = 0; b < BWD_NB; b++)
        if (b < nb)
            VSTORE(dxi + b * VLEN, VADD(VLOAD(dxi + b * VLEN), acc[b]));
}

/*
 * The backward of a decayed Gram matrix G[i][j] = sum_c X_i[c] Y_j[c]
 * decay(j -> i)[c] (j < i; j == i too with with_diag, undecayed) of one
 * chunk of n positions: dG [n, n] (row length C) given, X rows ldx apart,
 * Y rows ldk apart (KDA: X = q or k, Y = k; DPLR: X = a one row up or q,
 * Y = b or k). xf: X * F per sub-chunk, the second half of the forward's
 * kqf rows (q * F) when x_second, else the first (k * F; DPLR's a * F);
 * yb: Y * B, [n, K] (the forward's kb, or DPLR's bb).
 * Adds dL/dX to dX and dL/dY to dY ([n, K]) and X dXo - Y dYo (the off-diagonal
 * parts, which carry the decay) to w->dgsum, as the reference's
 * decayed_gram_bwd. Blocks of different sub-chunks are matrix products
 * (decay = F_i d_IJ B_j, chunk_scores.h); the diagonal block is pairwise.
 */
static void SIMD_FN(gram_bwd)(SIMD_FN(bws) *w, size_t n, const real *X, size_t ldx,
                              int x_second, const real *Y, size_t ldk, const real *yb,
                              const real *dG, int with_diag, real *dX, real *dY)
{
    const size_t K = w->f.K, C = w->f.C, c = w->f.c, nsub = (n + c - 1) / c;
    const size_t Kv = K / VLEN * VLEN;
    memset(w->dXo, 0, n * K * sizeof(real));
    memset(w->dYo, 0, n * K * sizeof(real));
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n), cI = s1 - s0;
        /* X_I * F_I: the forward's kqf rows (k * F, then q * F) */
        const real *xf = w->f.kqf + 2 * s0 * K + (x_second ? cI * K : 0);
        for (size_t ch = 0; ch < K; ch++)
            w->dvec[ch] = 1;
        for (size_t J = I; J-- > 0;) {
            size_t t0 = J * c, cJ = c;
            if (J + 1 < I)
                for (size_t ch = 0; ch < K; ch++)
                    w->dvec[ch] = SIMD_FN(flush1)(w->dvec[ch] * w->f.subtot[(J + 1) * K + ch]);
            /* dXo_I += (dG_IJ (k_J B_J)) * d_IJ * F_I */
            SIMD_FN(gemm)(cI, K, cJ, dG + s0 * C + t0, C, 1, yb + t0 * K, K, w->tmp, K, 0, 0);
            for (size_t r = 0; r < cI; r++)
                SIMD_FN(row_mul3)(w->dXo + (s0 + r) * K, w->tmp + r * K, w->dvec,
                                  w->F + (s0 + r) * K, K, 1);
            /* dYo_J += (dG_IJ^T (X_I F_I)) * d_IJ * B_J */
            SIMD_FN(gemm)(cJ, K, cI, dG + s0 * C + t0, 1, C, xf, K, w->tmp, K, 0, 0);
            for (size_t r = 0; r < cJ; r++)
                SIMD_FN(row_mul3)(w->dYo + (t0 + r) * K, w->tmp + r * K, w->dvec,
                                  w->Bf + (t0 + r) * K, K, 1);
        }
        /* the diagonal block, pairwise */
        for (size_t i = s0 + 1; i < s1; i++) {
            size_t ch = 0;
            for (; ch + BWD_NB * VLEN <= Kv; ch += BWD_NB * VLEN)
                SIMD_FN(gram_diag_pairs)(w, BWD_NB, ch, i, s0, X, ldx, Y, ldk, dG);
            for (; ch < Kv; ch += VLEN)
                SIMD_FN(gram_diag_pairs)(w, 1, ch, i, s0, X, ldx, Y, ldk, dG);
            for (ch = Kv; ch < K; ch++) {
                real P = 1;
                for (size_t j = i; j-- > s0;) {
                    P = SIMD_FN(flush1)(P * w->f.g[(j + 1) * K + ch]);
                    real wp = dG[i * C + j] * P;
                    w->dXo[i * K + ch] += wp * Y[j * ldk + ch];
                    w->dYo[j * K + ch] += wp * X[i * ldx + ch];
                }
            }
        }
    }
    for (size_t r = 0; r < n; r++) {
        const real *xr = X + r * ldx, *yr = Y + r * ldk;
        real *dxo = w->dXo + r * K, *dyo = w->dYo + r * K, *gs = w->dgsum + r * K;
        real *dx = dX + r * K, *dy = dY + r * K;
        size_t ch = 0;
        for (; ch < Kv; ch += VLEN) {
            vf a = VLOAD(dxo + ch), b = VLOAD(dyo + ch);
            VSTORE(gs + ch, VSUB(VFMA(VLOAD(xr + ch), a, VLOAD(gs + ch)),
                                 VMUL(VLOAD(yr + ch), b)));
            VSTORE(dx + ch, VADD(VLOAD(dx + ch), a));
            VSTORE(dy + ch, VADD(VLOAD(dy + ch), b));
        }
        for (; ch < K; ch++) {
            gs[ch] += xr[ch] * dxo[ch] - yr[ch] * dyo[ch];
            dx[ch] += dxo[ch];
            dy[ch] += dyo[ch];
        }
        if (with_diag) { /* decay(i -> i) = 1: no g involved */
            real d = dG[r * C + r];
            SIMD_FN(row_axpy)(dx, d, yr, K);
            SIMD_FN(row_axpy)(dy, d, xr, K);
        }
    }
}
#undef BWD_NB

