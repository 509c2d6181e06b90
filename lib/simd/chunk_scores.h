/*
 * lib/simd/chunk_scores.h — steps 1 and 5 of the chunkwise form
 * (REFERENCE.md "Chunkwise form"): the decay factors of one chunk and the two
 * score matrices A_kk and A_qk, for KDA (per-channel decay, safe sub-chunks)
 * and for the scalar-decay mechanisms (Gated DeltaNet, DeltaNet, linear
 * attention).
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: kda_factors, kda_diag_pairs,
 * kda_diag_block, scale_row, kda_scores, scalar_scores, store_factors
 * needs: kernel_common.h, gemm.h, chunk_workspace.h
 *
 * What differs from the reference (lib/reference/chunk_steps.c) is how things
 * are computed, never what:
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
 */

/* ---------------------------------------------------------------------------- */
/* KDA: decay factors and the two score matrices (steps 1 and 5)                */
/* ---------------------------------------------------------------------------- */

/*
 * Channels [ch0, ch0 + nb*VLEN) of kda_factors: nb vectors side by side, so
 * the running products (one multiply and one flush per row, a chain of
 * dependent instructions) of nb vectors overlap. Stores only what a later
 * step reads: k*F, q*F of sub-chunks I >= 1 (the left factors of blocks
 * (I, J < I)) and k*B of sub-chunks J < nsub - 1 (the right factors).
 */
SIMD_INLINE void SIMD_FN(kda_factors_vec)(SIMD_FN(ws) *w, const int nb, size_t ch0, size_t n,
                                          real s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c, ld = w->ldqk, ldg = w->ldg;
    const vf sv = VSET1(s), mone = VSET1(-1.0f), one = VSET1(1.0f);
    real *a = w->g;
    vf eP[4]; /* prod a over the sub-chunks before I */
    SIMD_UNROLL(4)
    for (int b = 0; b < 4; b++)
        eP[b] = one;
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
        real *kf = w->kqf + 2 * s0 * K, *qf = kf + (s1 - s0) * K;
        vf F[4];
        SIMD_UNROLL(4)
        for (int b = 0; b < 4; b++)
            F[b] = one;
        for (size_t r = s0; r < s1; r++) {
            SIMD_UNROLL(4)
            for (int b = 0; b < 4; b++) {
                if (b < nb) {
                    size_t ch = ch0 + (size_t)b * VLEN;
                    vf av = VEXP(VLOAD(w->gin + r * ldg + ch));
                    VSTORE(a + r * K + ch, av);
                    F[b] = VFLUSH(VMUL(F[b], av));
                    vf gam = VFLUSH(VMUL(eP[b], F[b]));
                    vf kv = VLOAD(w->k + r * ld + ch), qv = VLOAD(w->q + r * ld + ch);
                    if (I > 0) {
                        VSTORE(kf + (r - s0) * K + ch, VMUL(kv, F[b]));
                        VSTORE(qf + (r - s0) * K + ch, VMUL(qv, F[b]));
                    }
                    VSTORE(w->qg + r * K + ch, VMUL(VMUL(sv, gam), qv));
                    VSTORE(w->kg + r * K + ch, VMUL(VMUL(mone, gam), kv));
                }
            }
        }
        SIMD_UNROLL(4)
        for (int b = 0; b < 4; b++) {
            if (b < nb) {
                VSTORE(w->subtot + I * K + ch0 + (size_t)b * VLEN, F[b]);
                eP[b] = VFLUSH(VMUL(eP[b], F[b]));
            }
        }
    }
    SIMD_UNROLL(4)
    for (int b = 0; b < 4; b++)
        if (b < nb)
            VSTORE(w->gl + ch0 + (size_t)b * VLEN, eP[b]);
    vf eQ[4]; /* prod a over the sub-chunks after I */
    SIMD_UNROLL(4)
    for (int b = 0; b < 4; b++)
        eQ[b] = one;
    for (size_t I = nsub; I-- > 0;) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
        vf Bv[4];
        SIMD_UNROLL(4)
        for (int b = 0; b < 4; b++)
            Bv[b] = one;
        for (size_t r = s1; r-- > s0;) {
            SIMD_UNROLL(4)
            for (int b = 0; b < 4; b++) {
                if (b < nb) {
                    size_t ch = ch0 + (size_t)b * VLEN;
                    vf kv = VLOAD(w->k + r * ld + ch);
                    if (I + 1 < nsub)
                        VSTORE(w->kb + r * K + ch, VMUL(kv, Bv[b]));
                    VSTORE(w->kd + r * K + ch, VMUL(VFLUSH(VMUL(eQ[b], Bv[b])), kv));
                    Bv[b] = VFLUSH(VMUL(Bv[b], VLOAD(a + r * K + ch)));
                }
            }
        }
        SIMD_UNROLL(4)
        for (int b = 0; b < 4; b++)
            if (b < nb)
                eQ[b] = VFLUSH(VMUL(eQ[b], VLOAD(w->subtot + I * K + ch0 + (size_t)b * VLEN)));
    }
}

/*
 * a = exp(g) into w->g, and subtot (prod a per sub-chunk), kqf (k*F and q*F
 * per sub-chunk), kb = k*B, and qg = s*gamma*q, kg = -gamma*k,
 * kd = (prod a over r+1..n-1)*k, gl = gamma at the chunk end, where
 * gamma_r = (prod of earlier sub-chunks' totals) * F_r and
 * prod a over r+1..n-1 = (prod of later sub-chunks' totals) * B_r.
 */
static void SIMD_FN(kda_factors)(SIMD_FN(ws) *w, size_t n, real s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c, ld = w->ldqk, ldg = w->ldg;
    const size_t Kv = K / VLEN * VLEN;
    real *a = w->g;
    size_t cv = 0;
    for (; cv + 4 * VLEN <= Kv; cv += 4 * VLEN)
        SIMD_FN(kda_factors_vec)(w, 4, cv, n, s);
    for (; cv < Kv; cv += VLEN)
        SIMD_FN(kda_factors_vec)(w, 1, cv, n, s);
    for (size_t ch = Kv; ch < K; ch++) {
        for (size_t r = 0; r < n; r++)
            a[r * K + ch] = SIMD_FN(flush1)(REXP(w->gin[r * ldg + ch]));
        real eP = 1;
        for (size_t I = 0; I < nsub; I++) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            real *kf = w->kqf + 2 * s0 * K, *qf = kf + (s1 - s0) * K;
            real F = 1;
            for (size_t r = s0; r < s1; r++) {
                F = SIMD_FN(flush1)(F * a[r * K + ch]);
                real gam = SIMD_FN(flush1)(eP * F);
                kf[(r - s0) * K + ch] = w->k[r * ld + ch] * F;
                qf[(r - s0) * K + ch] = w->q[r * ld + ch] * F;
                w->qg[r * K + ch] = s * gam * w->q[r * ld + ch];
                w->kg[r * K + ch] = -gam * w->k[r * ld + ch];
            }
            w->subtot[I * K + ch] = F;
            eP = SIMD_FN(flush1)(eP * F);
        }
        w->gl[ch] = eP;
        real eQ = 1;
        for (size_t I = nsub; I-- > 0;) {
            size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
            real Bv = 1;
            for (size_t r = s1; r-- > s0;) {
                real kv = w->k[r * ld + ch];
                w->kb[r * K + ch] = kv * Bv;
                w->kd[r * K + ch] = SIMD_FN(flush1)(eQ * Bv) * kv;
                Bv = SIMD_FN(flush1)(Bv * a[r * K + ch]);
            }
            eQ = SIMD_FN(flush1)(eQ * w->subtot[I * K + ch]);
        }
    }
}

/* Vectors of channels per group in the diagonal block: k_i, q_i and the
 * running products of a group stay in registers (3 per vector), so with 32
 * vector registers a group is 8 vectors, with 16 it is 4. */
#if defined(SIMD_NRV) && SIMD_NRV >= 4
#define DIAG_NB 8
#else
#define DIAG_NB 4
#endif

/* Channels [ch0, ch0 + nb*VLEN) of the diagonal-block pairs (i, j), j in
 * [s0, i): the lane partial sums of k_i . (k_j P_ij) and q_i . (k_j P_ij),
 * P_ij = prod a over j+1..i as a running product down j (a_i, then a_i a_{i-1},
 * ...). k_i, q_i and the nb running products stay in registers, so each pair
 * loads only a_{j+1} and k_j; pkk, pqk ([c, VLEN], row j - s0) hold the
 * partial sums of channels before ch0 (first: start them at 0). */
SIMD_INLINE void SIMD_FN(kda_diag_pairs)(SIMD_FN(ws) *w, const int nb, size_t ch0, size_t i,
                                         size_t s0, int first)
{
    const size_t K = w->K, ld = w->ldqk;
    const real *a = w->g + ch0, *k = w->k + ch0, *q = w->q + ch0;
    vf P[DIAG_NB], ki[DIAG_NB], qi[DIAG_NB];
    SIMD_UNROLL(DIAG_NB)
    for (int b = 0; b < DIAG_NB; b++) {
        P[b] = VSET1(1.0f);
        ki[b] = b < nb ? VLOAD(k + i * ld + b * VLEN) : VZERO();
        qi[b] = b < nb ? VLOAD(q + i * ld + b * VLEN) : VZERO();
    }
    for (size_t j = i; j-- > s0;) {
        const real *aj = a + (j + 1) * K, *kj = k + j * ld;
        real *pk = w->pkk + (j - s0) * VLEN, *pq = w->pqk + (j - s0) * VLEN;
        vf sk = first ? VZERO() : VLOAD(pk), sq = first ? VZERO() : VLOAD(pq);
        SIMD_UNROLL(DIAG_NB)
        for (int b = 0; b < DIAG_NB; b++) {
            if (b < nb) {
                P[b] = VFLUSH(VMUL(P[b], VLOAD(aj + b * VLEN)));
                vf t = VMUL(VLOAD(kj + b * VLEN), P[b]);
                sk = VFMA(ki[b], t, sk);
                sq = VFMA(qi[b], t, sq);
            }
        }
        VSTORE(pk, sk);
        VSTORE(pq, sq);
    }
}

/* The diagonal block of sub-chunk [s0, s1): pairwise decay, each factor the
 * running product of a over j+1..i (<= 1, below FLT_MIN exactly 0). Writes
 * Akk (strict lower, times beta_i) and Aqk (lower with diagonal, times s) in
 * the block, a row i at a time. w->g holds a. The channels go DIAG_NB vectors
 * at a time (kda_diag_pairs), lane partial sums in pkk, pqk between groups. */
static void SIMD_FN(kda_diag_block)(SIMD_FN(ws) *w, size_t s0, size_t s1, real s)
{
    const size_t K = w->K, C = w->C, Kv = K / VLEN * VLEN, ld = w->ldqk;
    const real *a = w->g;
    for (size_t i = s0; i < s1; i++) {
        const real *ki = w->k + i * ld, *qi = w->q + i * ld;
        /* j == i: no decay; A_kk's diagonal is not part of the strict lower triangle */
        {
            vf acc = VZERO();
            for (size_t ch = 0; ch < Kv; ch += VLEN)
                acc = VFMA(VLOAD(qi + ch), VLOAD(ki + ch), acc);
            real d = VHSUM(acc);
            for (size_t ch = Kv; ch < K; ch++)
                d += qi[ch] * ki[ch];
            w->Aqk[i * C + i] = s * d;
        }
        if (i == s0)
            continue;
        size_t ch = 0;
        for (; ch + DIAG_NB * VLEN <= Kv; ch += DIAG_NB * VLEN)
            SIMD_FN(kda_diag_pairs)(w, DIAG_NB, ch, i, s0, ch == 0);
        for (; ch < Kv; ch += VLEN)
            SIMD_FN(kda_diag_pairs)(w, 1, ch, i, s0, ch == 0);
        real *akk = w->Akk + i * C, *aqk = w->Aqk + i * C;
        for (size_t j = s0; j < i; j++) {
            akk[j] = Kv ? VHSUM(VLOAD(w->pkk + (j - s0) * VLEN)) : 0.0f;
            aqk[j] = Kv ? VHSUM(VLOAD(w->pqk + (j - s0) * VLEN)) : 0.0f;
        }
        for (ch = Kv; ch < K; ch++) {
            real P = 1;
            for (size_t j = i; j-- > s0;) {
                P = SIMD_FN(flush1)(P * a[(j + 1) * K + ch]);
                real t = w->k[j * ld + ch] * P;
                akk[j] += ki[ch] * t;
                aqk[j] += qi[ch] * t;
            }
        }
        for (size_t j = s0; j < i; j++) {
            akk[j] *= w->b[i];
            aqk[j] *= s;
        }
    }
}

#undef DIAG_NB

/* dst[j] = f * src[j], j < n (one row). */
static inline void SIMD_FN(scale_row)(real *dst, const real *src, real f, size_t n)
{
    vf fv = VSET1(f);
    size_t nv = n / VLEN * VLEN;
    for (size_t j = 0; j < nv; j += VLEN)
        VSTORE(dst + j, VMUL(fv, VLOAD(src + j)));
    for (size_t j = nv; j < n; j++)
        dst[j] = f * src[j];
}

/* A_kk and A_qk of one KDA chunk of n positions (safe sub-chunks). */
static void SIMD_FN(kda_scores)(SIMD_FN(ws) *w, size_t n, real s)
{
    const size_t K = w->K, C = w->C, c = w->c, nsub = (n + c - 1) / c;
    const size_t Kv = K / VLEN * VLEN;
    if (nsub > 1) /* kb^T [K, n]: the right-hand factor of every off-diagonal block */
        SIMD_FN(transpose)(w->X, w->kb, K, n, K);
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n), cI = s1 - s0;
        const real *kqf = w->kqf + 2 * s0 * K;
        /* d_IJ = prod a over the sub-chunks strictly between J and I: 1 for
         * J = I-1, then one more sub-chunk total per step down */
        for (size_t ch = 0; ch < K; ch++)
            w->dvec[ch] = 1;
        for (size_t J = I; J-- > 0;) {
            size_t t0 = J * c, cJ = c; /* J < I: a full sub-chunk */
            const real *left = kqf;
            if (J + 1 < I || w->store != KDALAB_FP32) { /* stored: rounded once, here */
                for (size_t ch = 0; J + 1 < I && ch < K; ch++)
                    w->dvec[ch] = SIMD_FN(flush1)(w->dvec[ch] * w->subtot[(J + 1) * K + ch]);
                /* [kf_I ; qf_I] * d_IJ, row by row */
                for (size_t r = 0; r < 2 * cI; r++) {
                    const real *src = kqf + r * K;
                    real *dst = w->kqd + r * K;
                    for (size_t ch = 0; ch < Kv; ch += VLEN)
                        VSTORE(dst + ch, VMUL(VLOAD(src + ch), VLOAD(w->dvec + ch)));
                    for (size_t ch = Kv; ch < K; ch++)
                        dst[ch] = src[ch] * w->dvec[ch];
                }
                SIMD_FN(store_round)(w->kqd, 2 * cI * K, w->store);
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

/* A_qk (and, with delta, A_kk) of one chunk of n positions, and the rows
 * qg, kg, kd and gl that kda_factors fills for KDA: the full Gram matrices
 * q k^T and k k^T from gemm, times the pairwise decay prod a over j+1..i
 * (gated: a = exp(g), one per position; otherwise a = 1). A running product
 * that reaches 0 ends its row: every earlier j decays further. */
static void SIMD_FN(scalar_scores)(SIMD_FN(ws) *w, size_t n, real s, int gated, int delta)
{
    const size_t K = w->K, C = w->C, ld = w->ldqk;
    SIMD_FN(transpose)(w->kt, w->k, ld, n, K);
    /* full Gram matrices q k^T and k k^T, [n, n] with row length C */
    SIMD_FN(gemm)(n, n, K, w->q, ld, 1, w->kt, n, w->Gq, C, 0, 0);
    if (delta)
        SIMD_FN(gemm)(n, n, K, w->k, ld, 1, w->kt, n, w->Gk, C, 0, 0);
    /* a_r = exp(g_r) */
    real *a = w->g;
    if (gated)
        for (size_t r = 0; r < n; r++)
            a[r] = SIMD_FN(flush1)(REXP(w->gin[r * w->ldg]));
    for (size_t i = 0; i < n; i++) {
        /* dsc[j] = prod a over j+1..i, a running product from j = i down */
        size_t jlo = 0;
        if (gated) {
            real P = 1;
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
        real bi = w->b[i];
        for (size_t j = 0; j < C; j++) {
            int live = j >= jlo && j <= i;
            w->Aqk[i * C + j] = live ? s * w->Gq[i * C + j] * w->dsc[j] : 0.0f;
            if (delta)
                w->Akk[i * C + j] = live && j < i ? bi * w->Gk[i * C + j] * w->dsc[j] : 0.0f;
        }
    }
    /* gamma_r = prod a over 0..r, kdec_r = prod a over r+1..n-1 */
    real P = 1;
    for (size_t r = 0; r < n; r++) {
        if (gated)
            P = SIMD_FN(flush1)(P * a[r]);
        w->gam[r] = P;
    }
    real Q = 1;
    for (size_t r = n; r-- > 0;) {
        w->kdec[r] = Q;
        if (gated)
            Q = SIMD_FN(flush1)(Q * a[r]);
    }
    const real sq = SIMD_FN(qg_scale)(w, s);
    for (size_t r = 0; r < n; r++) {
        vf sg = VSET1(sq * w->gam[r]), mg = VSET1(-w->gam[r]), kdv = VSET1(w->kdec[r]);
        size_t Kv = K / VLEN * VLEN;
        for (size_t ch = 0; ch < Kv; ch += VLEN) {
            vf qv = VLOAD(w->q + r * ld + ch), kv = VLOAD(w->k + r * ld + ch);
            VSTORE(w->qg + r * K + ch, VMUL(sg, qv));
            VSTORE(w->kg + r * K + ch, VMUL(mg, kv));
            VSTORE(w->kd + r * K + ch, VMUL(kdv, kv));
        }
        for (size_t ch = Kv; ch < K; ch++) {
            w->qg[r * K + ch] = sq * w->gam[r] * w->q[r * ld + ch];
            w->kg[r * K + ch] = -w->gam[r] * w->k[r * ld + ch];
            w->kd[r * K + ch] = w->kdec[r] * w->k[r * ld + ch];
        }
    }
    real gend = w->gam[n - 1];
    for (size_t ch = 0; ch < K; ch++)
        w->gl[ch] = gend;
}

/* ---------------------------------------------------------------------------- */
/* Emulated storage                                                             */
/* ---------------------------------------------------------------------------- */

/*
 * A kernel that stores in bf16 or fp16 (w->store; KDALAB_FP32: nothing) holds
 * the rescaled rows it multiplies in that format: after kda_factors or
 * scalar_scores, gamma q (qg, formed without the scale s when storing, then
 * rounded and scaled here: the reference rounds gamma q and scales the sum,
 * and s gamma q may leave the format where gamma q does not), the keys
 * decayed to the chunk's end (kd) and, for KDA, the keys decayed to their
 * sub-chunk's end (kb, the right factors of the off-diagonal score blocks;
 * their left factors are rounded as kda_scores forms them). The rows
 * -gamma k (kg), which the UT transform turns into W, stay in float32, as in
 * the reference's emulation (lib/reference/chunk_steps_f32.c). Over n
 * positions.
 */
static void SIMD_FN(store_factors)(SIMD_FN(ws) *w, size_t n, int per_key, real s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c;
    if (w->store == KDALAB_FP32)
        return;
    SIMD_FN(store_round)(w->qg, n * K, w->store);
    SIMD_FN(scale_row)(w->qg, w->qg, s, n * K);
    SIMD_FN(store_round)(w->kd, n * K, w->store);
    if (per_key && nsub > 1)
        SIMD_FN(store_round)(w->kb, (nsub - 1) * c * K, w->store);
}
