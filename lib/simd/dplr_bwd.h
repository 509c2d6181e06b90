/*
 * lib/simd/dplr_bwd.h — the DPLR row's chunkwise backward of one chunk on
 * the optimized path: the reference's dplr_chunk_bwd
 * (lib/reference/chunk_bwd.c; REFERENCE.md "The boundary", Backward), steps
 * 5 to 1 in reverse, over the forward's factors and scores (dplr_scores.h)
 * and the decayed Grams' backward (gram_bwd, chunk_bwd_scores.h).
 * chunk_head_bwd (chunk_bwd.h) drives it: the checkpointed sweeps, the
 * chunks last to first, dg from the factors' gradients (bwd_dg).
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: dplr_recompute,
 * dplr_sweep_step, dplr_lower, dplr_shift_up, dplr_chunk_bwd
 * needs: kernel_common.h, gemm.h, chunk_workspace.h, chunk_scores.h,
 * dplr_scores.h, chunk_kernels.h (ut_transform), chunk_bwd_scores.h
 *
 * Notation (one chunk of n positions, S [K, V] the state entering it; the
 * rows of dplr_scores.h): Minv = (I - A_ab)^-1 (the forward's Tm),
 * R = ah S + A_ak V, U = Minv R;
 *   O = qg S + Aqb U + Aqk V      (Aqb = s M_qb, Aqk = s M_qk)
 *   S_out = Diag(gl) S + bd^T U + kd^T V
 * with A_ab[i][j] = M_a'b[i-1][j], A_ak[i][j] = M_a'k[i-1][j] (a' = a one
 * row up). Every factor is a product of exp(g) <= 1, as in the forward.
 */

/* The forward of one chunk from the state S = w->f.S entering it, its rows
 * set (chunk_rows): the factors and scores (dplr_factors, dplr_scores),
 * Minv in w->f.Tm (w->f.b is 1), R in w->Vn, U in w->U. */
static void SIMD_FN(dplr_recompute)(SIMD_FN(bws) *w, size_t n, real s)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = f->K, V = f->W, C = f->C;
    SIMD_FN(dplr_factors)(f, n, s);
    SIMD_FN(dplr_scores)(f, n, s);
    SIMD_FN(ut_transform)(f, n);
    SIMD_FN(gemm)(n, V, K, f->ah, K, 1, f->S, V, w->Vn, V, 0, 0);
    SIMD_FN(gemm)(n, V, n, f->Aak, C, 1, f->v, f->ldv, w->Vn, V, 1, 1);
    SIMD_FN(gemm)(n, V, n, f->Tm, C, 1, w->Vn, V, w->U, V, 0, 1);
}

/* The state leaving the chunk, Sn = Diag(gl) S + kd^T V + bd^T U, after
 * dplr_recompute (Sn holds a copy of S on entry). */
static void SIMD_FN(dplr_sweep_step)(SIMD_FN(bws) *w, size_t n, real *Sn)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = f->K, V = f->W;
    SIMD_FN(gemm_rs)(K, V, n, f->kd, 1, K, f->v, f->ldv, Sn, V, 1, 0, f->gl);
    SIMD_FN(gemm)(K, V, n, f->bd, 1, K, w->U, V, Sn, V, 1, 0);
}

/* dG [n, C] = its lower triangle (j <= i) times f, zero above. */
static void SIMD_FN(dplr_lower)(real *dG, size_t n, size_t C, real f)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < C; j++)
            dG[i * C + j] = j <= i ? f * dG[i * C + j] : 0.0f;
}

/* dA [n, C] of A_ab or A_ak (strictly lower) as the gradient of the Gram
 * of a' one row up: row i - 1 takes row i's j < i, the last row is 0. */
static void SIMD_FN(dplr_shift_up)(real *dA, size_t n, size_t C)
{
    for (size_t i = 0; i + 1 < n; i++)
        for (size_t j = 0; j < C; j++)
            dA[i * C + j] = j <= i ? dA[(i + 1) * C + j] : 0.0f;
    memset(dA + (n - 1) * C, 0, C * sizeof(real));
}

/*
 * One chunk of n positions, as chunk_bwd (chunk_bwd.h) for the other rows:
 * on entry w->f.S is the state entering the chunk, w->dS dL/d(state
 * leaving it), the rows are set (chunk_rows) and dO [n, ldo] is its rows of
 * d_o; on return w->dS is dL/d(state entering) and dq, dk, dv, da, db, dgam
 * (gamma * dL/dgamma), dgsum, dkd and dbd hold the chunk's gradients.
 */
static void SIMD_FN(dplr_chunk_bwd)(SIMD_FN(bws) *w, size_t n, real s, const real *dO,
                                    size_t ldo)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = f->K, V = f->W, C = f->C, ldv = f->ldv, lab = f->ldab;
    const real *S = f->S;
    /* the backward's buffers, under this row's names: dU in dVn, dR in dRv,
     * dL/d(ah) in dWn; the four Grams' dG: dM_qb in dAqk, dM_qk in dA,
     * dM_a'b in Gkk, dM_a'k in Minv (Minv itself is the forward's Tm) */
    real *dS = w->dS, *dU = w->dVn, *dR = w->dRv, *dah = w->dWn;
    SIMD_FN(dplr_recompute)(w, n, s);
    SIMD_FN(bwd_factors)(w, n);
    SIMD_FN(transpose)(w->UT, w->U, V, n, V);
    SIMD_FN(transpose)(w->VnT, f->v, ldv, n, V); /* V^T */

    /* 5. S_out = Diag(gl) S + bd^T U + kd^T V */
    SIMD_FN(gemm)(n, V, K, f->bd, K, 1, dS, V, dU, V, 0, 0);     /* dU = bd dS      */
    SIMD_FN(gemm)(n, V, K, f->kd, K, 1, dS, V, w->dv, V, 0, 0);  /* dV = kd dS      */
    SIMD_FN(gemm)(K, n, V, dS, V, 1, w->VnT, n, w->rT, n, 0, 0); /* dkd = V dS^T    */
    SIMD_FN(transpose)(w->dkd, w->rT, n, K, n);
    SIMD_FN(gemm)(K, n, V, dS, V, 1, w->UT, n, w->rT, n, 0, 0);  /* dbd = U dS^T    */
    SIMD_FN(transpose)(w->dbd, w->rT, n, K, n);
    for (size_t ch = 0; ch < K; ch++)
        w->dgl[ch] = SIMD_FN(row_dot)(dS + ch * V, S + ch * V, V);

    /* 4. O = qg S + Aqb U + Aqk V: dM_qb = s dO U^T, dM_qk = s dO V^T (lower) */
    SIMD_FN(gemm)(n, n, V, dO, ldo, 1, w->UT, n, w->dAqk, C, 0, 0);
    SIMD_FN(gemm)(n, n, V, dO, ldo, 1, w->VnT, n, w->dA, C, 0, 0);
    SIMD_FN(gemm)(n, V, n, f->Aqb, 1, C, dO, ldo, dU, V, 1, 0);  /* dU += Aqb^T dO  */
    SIMD_FN(gemm)(n, V, n, f->Aqk, 1, C, dO, ldo, w->dv, V, 1, 0); /* dV += Aqk^T dO */
    SIMD_FN(dplr_lower)(w->dAqk, n, C, s);
    SIMD_FN(dplr_lower)(w->dA, n, C, s);

    /* 3. (I - A_ab) U = ah S + A_ak V: dR = Minv^T dU; dA_ab = dR U^T and
     * dA_ak = dR V^T, whose entries j < i are kept (dplr_shift_up); dV +=
     * A_ak^T dR */
    SIMD_FN(gemm)(n, V, n, f->Tm, 1, C, dU, V, dR, V, 0, 0);
    SIMD_FN(gemm)(n, n, V, dR, V, 1, w->UT, n, w->Gkk, C, 0, 0);
    SIMD_FN(gemm)(n, n, V, dR, V, 1, w->VnT, n, w->Minv, C, 0, 0);
    SIMD_FN(gemm)(n, V, n, f->Aak, 1, C, dR, V, w->dv, V, 1, 0);
    SIMD_FN(dplr_shift_up)(w->Gkk, n, C);
    SIMD_FN(dplr_shift_up)(w->Minv, n, C);

    /* 4 and 3's reads of S together, over 2n stacked rows B2 = [dO ; dR],
     * A2 = [qg ; ah]: [dqg, dah] = S B2^T; dS (entering) = Diag(gl) dS_out +
     * qg^T dO + ah^T dR */
    const size_t m = 2 * n;
    for (size_t r = 0; r < n; r++) {
        memcpy(w->B2 + r * V, dO + r * ldo, V * sizeof(real));
        memcpy(w->A2 + r * K, f->qg + r * K, K * sizeof(real));
    }
    memcpy(w->B2 + n * V, dR, n * V * sizeof(real));
    memcpy(w->A2 + n * K, f->ah, n * K * sizeof(real));
    SIMD_FN(transpose)(w->B2T, w->B2, V, m, V);
    SIMD_FN(gemm)(K, m, V, S, V, 1, w->B2T, m, w->rT, m, 0, 0);
    SIMD_FN(transpose)(w->dqg, w->rT, m, K, n);
    SIMD_FN(transpose)(dah, w->rT + n, m, K, n);
    SIMD_FN(gemm_rs)(K, V, m, w->A2, 1, K, w->B2, V, dS, V, 1, 0, f->gl);

    /* the rows: qg = s gamma q, ah_r = gamma_{r-1} a_r (ah_0 = a_0), kd = te k,
     * bd = te b; gamma dL/dgamma into dgam */
    for (size_t r = 0; r < n; r++) {
        const real *gm = w->gam + r * K, *te = w->te + r * K, *dqg = w->dqg + r * K;
        const real *gprev = r ? w->gam + (r - 1) * K : NULL, *dahr = dah + r * K;
        real *dgm = w->dgam + r * K;
        for (size_t ch = 0; ch < K; ch++) {
            w->dq[r * K + ch] = s * gm[ch] * dqg[ch];
            dgm[ch] = f->qg[r * K + ch] * dqg[ch];
            w->dk[r * K + ch] = te[ch] * w->dkd[r * K + ch];
            w->db[r * K + ch] = te[ch] * w->dbd[r * K + ch];
            w->da[r * K + ch] = gprev ? gprev[ch] * dahr[ch] : dahr[ch];
            if (gprev)
                w->dgam[(r - 1) * K + ch] += f->ah[r * K + ch] * dahr[ch];
        }
    }
    for (size_t ch = 0; ch < K; ch++)
        w->dgam[(n - 1) * K + ch] += f->gl[ch] * w->dgl[ch];

    /* 2-1. the four decayed Grams (with their diagonals) */
    memset(w->dgsum, 0, n * K * sizeof(real));
    memset(w->dash, 0, n * K * sizeof(real));
    SIMD_FN(gram_bwd)(w, n, f->q, f->ldqk, 1, f->bin, lab, f->bb, w->dAqk, 1, w->dq, w->db);
    SIMD_FN(gram_bwd)(w, n, f->q, f->ldqk, 1, f->k, f->ldqk, f->kb, w->dA, 1, w->dq, w->dk);
    for (size_t r = 0; r + 1 < n; r++) /* a' row r is a_{r+1}; the last is 0 */
        memcpy(w->ash + r * K, f->ain + (r + 1) * lab, K * sizeof(real));
    memset(w->ash + (n - 1) * K, 0, K * sizeof(real));
    SIMD_FN(gram_bwd)(w, n, w->ash, K, 0, f->bin, lab, f->bb, w->Gkk, 1, w->dash, w->db);
    SIMD_FN(gram_bwd)(w, n, w->ash, K, 0, f->k, f->ldqk, f->kb, w->Minv, 1, w->dash, w->dk);
    for (size_t r = 1; r < n; r++)
        SIMD_FN(row_axpy)(w->da + r * K, 1.0f, w->dash + (r - 1) * K, K);
}
