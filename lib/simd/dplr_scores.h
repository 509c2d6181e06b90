/*
 * lib/simd/dplr_scores.h — steps 1 and 2 of the DPLR row's chunkwise form
 * (REFERENCE.md "The boundary", S_t = (Diag(exp g_t) + b_t a_t^T) S_{t-1}
 * + k_t v_t^T): the decay factors of one chunk, the rows the state steps
 * read, and the four score matrices A_ab, A_ak, A_qb, A_qk. The state steps
 * (3-5) are dplr_chunk in chunk_kernels.h.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: row_fill, row_mul, row_exp,
 * dplr_pair, dplr_factors, dplr_put_block, dplr_scores, dplr_store_factors
 * needs: kernel_common.h, gemm.h, chunk_workspace.h, chunk_scores.h
 *
 * The decay is KDA's, and so is its treatment (chunk_scores.h): every
 * factor is a product of the per-step decays ex_t = exp(g_t) <= 1 over
 * exactly the span it covers (forward F inside a sub-chunk, backward B,
 * sub-chunk totals between), flushed to 0 below the normal range; nothing
 * is divided by a decay, so nothing overflows for any g <= 0.
 *
 * Every score is a decayed Gram entry with the left index at or after the
 * right one,
 *   M_xy[i][j] = sum_ch x_i[ch] y_j[ch] prod_{t=j+1..i} ex_t[ch],  j <= i,
 * for a left row x in {a', q} and a right row y in {b, k}, where a' is a
 * moved one position up (a'_i = a_{i+1}; a'_{n-1} = 0, no row after the
 * chunk is read). Then A_qb = M_qb and A_qk = M_qk, and
 * A_ab[i][j] = M_a'b[i-1][j], A_ak[i][j] = M_a'k[i-1][j] for j < i (their
 * span is j+1..i-1). For sub-chunks J < I the entries are the products
 * [a'F ; qF]_I d_IJ (bB)_J^T and ... (kB)_J^T (one gemm each); inside a
 * sub-chunk they are formed pair by pair with a running product.
 */

/* ---- rows of K (vectors, then the channels left over) ------------------------ */

/* dst[ch] = v, ch < n. */
static inline void SIMD_FN(row_fill)(real *dst, real v, size_t n)
{
    for (size_t ch = 0; ch < n; ch++)
        dst[ch] = v;
}

/* dst[ch] = x[ch] y[ch], ch < n, and exactly 0 below the normal range when
 * flush (a decay factor). dst may be x or y. */
static inline void SIMD_FN(row_mul)(real *dst, const real *x, const real *y, size_t n,
                                    int flush)
{
    const size_t nv = n / VLEN * VLEN;
    for (size_t ch = 0; ch < nv; ch += VLEN) {
        vf p = VMUL(VLOAD(x + ch), VLOAD(y + ch));
        VSTORE(dst + ch, flush ? VFLUSH(p) : p);
    }
    for (size_t ch = nv; ch < n; ch++)
        dst[ch] = flush ? SIMD_FN(flush1)(x[ch] * y[ch]) : x[ch] * y[ch];
}

/* dst[ch] = exp(g[ch]) (g <= 0), exactly 0 below the normal range. */
static inline void SIMD_FN(row_exp)(real *dst, const real *g, size_t n)
{
    const size_t nv = n / VLEN * VLEN;
    for (size_t ch = 0; ch < nv; ch += VLEN)
        VSTORE(dst + ch, VFLUSH(VEXP(VLOAD(g + ch))));
    for (size_t ch = nv; ch < n; ch++)
        dst[ch] = SIMD_FN(flush1)(REXP(g[ch]));
}

/* The four sums of one pair inside a sub-chunk, in one pass over the
 * channels: out = {a'.(b P), a'.(k P), q.(b P), q.(k P)} (ap NULL: the
 * first two are 0). */
static inline void SIMD_FN(dplr_pair)(const real *ap, const real *q, const real *b,
                                      const real *k, const real *P, size_t n, real out[4])
{
    const size_t nv = n / VLEN * VLEN;
    vf ab = VZERO(), ak = VZERO(), qb = VZERO(), qk = VZERO();
    for (size_t ch = 0; ch < nv; ch += VLEN) {
        vf p = VLOAD(P + ch), tb = VMUL(VLOAD(b + ch), p), tk = VMUL(VLOAD(k + ch), p);
        vf qv = VLOAD(q + ch);
        qb = VFMA(qv, tb, qb);
        qk = VFMA(qv, tk, qk);
        if (ap) {
            vf av = VLOAD(ap + ch);
            ab = VFMA(av, tb, ab);
            ak = VFMA(av, tk, ak);
        }
    }
    out[0] = VHSUM(ab);
    out[1] = VHSUM(ak);
    out[2] = VHSUM(qb);
    out[3] = VHSUM(qk);
    for (size_t ch = nv; ch < n; ch++) {
        real tb = b[ch] * P[ch], tk = k[ch] * P[ch];
        if (ap) {
            out[0] += ap[ch] * tb;
            out[1] += ap[ch] * tk;
        }
        out[2] += q[ch] * tb;
        out[3] += q[ch] * tk;
    }
}

/* ---- step 1: the factors and the rows the state steps read -------------------- */

/*
 * One chunk of n positions, sub-chunks of c. Writes:
 *   g       ex_r = exp(g_r)                                   [n, K]
 *   kqf     per sub-chunk I >= 1: cI rows a'_r F_r, then cI rows q_r F_r
 *   kb, bb  k_r B_r, b_r B_r, sub-chunks J < nsub - 1         [n, K]
 *   subtot  prod ex over each sub-chunk                       [nsub, K]
 *   qg      s gamma_r q_r                                     [n, K]
 *   ah      gamma_{r-1} a_r (row 0: a_0)                      [n, K]
 *   kd, bd  (prod ex over r+1..n-1) k_r, ... b_r              [n, K]
 *   gl      gamma_{n-1}, the chunk's total decay              [K]
 * with gamma_r = prod ex over 0..r = (earlier sub-chunks' totals) F_r.
 */
static void SIMD_FN(dplr_factors)(SIMD_FN(ws) *w, size_t n, real s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c;
    const size_t ld = w->ldqk, lab = w->ldab;
    real *ex = w->g, *F = w->rows, *eP = F + K, *gam = eP + K;
    real *Bv = gam + K, *eQ = Bv + K, *dec = eQ + K;
    SIMD_FN(row_fill)(eP, 1, K); /* prod ex over the sub-chunks before I */
    memcpy(w->ah, w->ain, K * sizeof(real));
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
        real *af = w->kqf + 2 * s0 * K, *qf = af + (s1 - s0) * K;
        SIMD_FN(row_fill)(F, 1, K);
        for (size_t r = s0; r < s1; r++) {
            const real *q = w->q + r * ld, *anext = r + 1 < n ? w->ain + (r + 1) * lab : NULL;
            SIMD_FN(row_exp)(ex + r * K, w->gin + r * w->ldg, K);
            SIMD_FN(row_mul)(F, F, ex + r * K, K, 1);
            SIMD_FN(row_mul)(gam, eP, F, K, 1);
            if (I > 0) {
                SIMD_FN(row_mul)(qf + (r - s0) * K, q, F, K, 0);
                if (anext)
                    SIMD_FN(row_mul)(af + (r - s0) * K, anext, F, K, 0);
                else
                    SIMD_FN(row_fill)(af + (r - s0) * K, 0, K);
            }
            SIMD_FN(row_mul)(w->qg + r * K, q, gam, K, 0);
            SIMD_FN(scale_row)(w->qg + r * K, w->qg + r * K, s, K);
            if (anext)
                SIMD_FN(row_mul)(w->ah + (r + 1) * K, anext, gam, K, 0);
        }
        memcpy(w->subtot + I * K, F, K * sizeof(real));
        SIMD_FN(row_mul)(eP, eP, F, K, 1);
    }
    memcpy(w->gl, eP, K * sizeof(real));
    SIMD_FN(row_fill)(eQ, 1, K); /* prod ex over the sub-chunks after I */
    for (size_t I = nsub; I-- > 0;) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n);
        SIMD_FN(row_fill)(Bv, 1, K);
        for (size_t r = s1; r-- > s0;) {
            const real *k = w->k + r * ld, *b = w->bin + r * lab;
            if (I + 1 < nsub) {
                SIMD_FN(row_mul)(w->kb + r * K, k, Bv, K, 0);
                SIMD_FN(row_mul)(w->bb + r * K, b, Bv, K, 0);
            }
            SIMD_FN(row_mul)(dec, eQ, Bv, K, 1);
            SIMD_FN(row_mul)(w->kd + r * K, dec, k, K, 0);
            SIMD_FN(row_mul)(w->bd + r * K, dec, b, K, 0);
            SIMD_FN(row_mul)(Bv, Bv, ex + r * K, K, 1);
        }
        SIMD_FN(row_mul)(eQ, eQ, w->subtot + I * K, K, 1);
    }
}

/* ---- step 2: the four score matrices -------------------------------------------- */

/* Block (rows s0.., columns t0..) of the products of left rows i and right
 * rows j: blk [2 cI, cJ] holds M_a'y in its first cI rows and M_qy in the
 * next; M_a'y goes to row i + 1 of ay (sign times it: -A_ab for the UT
 * transform), M_qy to row i of qy times s. */
static void SIMD_FN(dplr_put_block)(SIMD_FN(ws) *w, size_t n, size_t s0, size_t cI, size_t t0,
                                    size_t cJ, real *ay, real sign, real *qy, real s)
{
    const size_t C = w->C;
    for (size_t ii = 0; ii < cI; ii++) {
        size_t i = s0 + ii;
        if (i + 1 < n)
            SIMD_FN(scale_row)(ay + (i + 1) * C + t0, w->blk + ii * cJ, sign, cJ);
        SIMD_FN(scale_row)(qy + i * C + t0, w->blk + (cI + ii) * cJ, s, cJ);
    }
}

/* -A_ab into Akk (so that ut_transform gives (I - A_ab)^-1), A_ak into Aak,
 * s A_qb into Aqb, s A_qk into Aqk, for one chunk of n positions whose
 * factors dplr_factors has written; zero elsewhere in their first n rows
 * (the lower-triangular gemm reads up to the block's edge). */
static void SIMD_FN(dplr_scores)(SIMD_FN(ws) *w, size_t n, real s)
{
    const size_t K = w->K, C = w->C, c = w->c, nsub = (n + c - 1) / c, ld = w->ldqk;
    const real *ex = w->g;
    real *P = w->rows, pair[4];
    memset(w->Akk, 0, n * C * sizeof(real));
    memset(w->Aak, 0, n * C * sizeof(real));
    memset(w->Aqb, 0, n * C * sizeof(real));
    memset(w->Aqk, 0, n * C * sizeof(real));
    if (nsub > 1) { /* (kB)^T, (bB)^T [K, n]: the right factors of the blocks J < I */
        SIMD_FN(transpose)(w->X, w->kb, K, n, K);
        SIMD_FN(transpose)(w->Xb, w->bb, K, n, K);
    }
    for (size_t I = 0; I < nsub; I++) {
        size_t s0 = I * c, s1 = SIMD_FN(min_sz)(s0 + c, n), cI = s1 - s0;
        const real *kqf = w->kqf + 2 * s0 * K;
        SIMD_FN(row_fill)(w->dvec, 1, K); /* d_IJ: prod ex strictly between J and I */
        for (size_t J = I; J-- > 0;) {
            size_t t0 = J * c, cJ = c;
            const real *left = kqf;
            if (J + 1 < I || w->store != KDALAB_FP32) { /* stored: rounded once, here */
                if (J + 1 < I)
                    SIMD_FN(row_mul)(w->dvec, w->dvec, w->subtot + (J + 1) * K, K, 1);
                for (size_t r = 0; r < 2 * cI; r++)
                    SIMD_FN(row_mul)(w->kqd + r * K, kqf + r * K, w->dvec, K, 0);
                SIMD_FN(store_round)(w->kqd, 2 * cI * K, w->store);
                left = w->kqd;
            }
            SIMD_FN(gemm)(2 * cI, cJ, K, left, K, 1, w->Xb + t0, n, w->blk, cJ, 0, 0);
            SIMD_FN(dplr_put_block)(w, n, s0, cI, t0, cJ, w->Akk, -1, w->Aqb, s);
            SIMD_FN(gemm)(2 * cI, cJ, K, left, K, 1, w->X + t0, n, w->blk, cJ, 0, 0);
            SIMD_FN(dplr_put_block)(w, n, s0, cI, t0, cJ, w->Aak, 1, w->Aqk, s);
        }
        /* inside the sub-chunk: P = prod ex over j+1..i, a running product down j */
        for (size_t i = s0; i < s1; i++) {
            const real *ap = i + 1 < n ? w->ain + (i + 1) * w->ldab : NULL;
            SIMD_FN(row_fill)(P, 1, K);
            for (size_t j = i + 1; j-- > s0;) {
                if (j < i)
                    SIMD_FN(row_mul)(P, P, ex + (j + 1) * K, K, 1);
                SIMD_FN(dplr_pair)(ap, w->q + i * ld, w->bin + j * w->ldab, w->k + j * ld, P,
                                   K, pair);
                if (ap) {
                    w->Akk[(i + 1) * C + j] = -pair[0];
                    w->Aak[(i + 1) * C + j] = pair[1];
                }
                w->Aqb[i * C + j] = s * pair[2];
                w->Aqk[i * C + j] = s * pair[3];
            }
        }
    }
}

/* Emulated storage (w->store, as store_factors in chunk_scores.h): the rows
 * dplr_factors rescaled, which the products read, rounded to the format:
 * qg (gamma q, formed without s when storing, scaled by s once rounded), ah,
 * kd, bd and the right factors kb, bb of the off-diagonal blocks (their left
 * factors are rounded as dplr_scores forms them). */
static void SIMD_FN(dplr_store_factors)(SIMD_FN(ws) *w, size_t n, real s)
{
    const size_t K = w->K, c = w->c, nsub = (n + c - 1) / c;
    if (w->store == KDALAB_FP32)
        return;
    real *rows[] = {w->qg, w->ah, w->kd, w->bd};
    for (size_t i = 0; i < 4; i++)
        SIMD_FN(store_round)(rows[i], n * K, w->store);
    SIMD_FN(scale_row)(w->qg, w->qg, s, n * K);
    if (nsub > 1) {
        SIMD_FN(store_round)(w->kb, (nsub - 1) * c * K, w->store);
        SIMD_FN(store_round)(w->bb, (nsub - 1) * c * K, w->store);
    }
}
