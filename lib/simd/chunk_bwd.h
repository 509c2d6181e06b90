/*
 * lib/simd/chunk_bwd.h — the chunkwise backward of one head on the optimized
 * path: the algorithm of lib/reference/chunk.c's kdalab_chunk_bwd_f64
 * (REFERENCE.md "Gradients", steps 7 to 1 differentiated chunk by chunk,
 * last to first), written over the forward's kernels: the decay factors and
 * the score matrices (chunk_scores.h) and the UT transform (chunk_kernels.h)
 * for the sweep that stores the chunk-boundary states and for each chunk's
 * recomputation, and gemm (gemm.h) for every product.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: chunk_recompute, chunk_bwd,
 * bwd_dg, chunk_rows, chunk_head_bwd (the table's entry)
 * needs: kernel_common.h, gemm.h, chunk_workspace.h, chunk_scores.h,
 * chunk_kernels.h, chunk_bwd_scores.h (the workspace, the Gram backward),
 * dplr_bwd.h (the DPLR row's chunk, which chunk_head_bwd runs instead of
 * chunk_bwd)
 *
 * Memory: the reference keeps the state entering every chunk, and so does
 * this path when they fit in the task's budget (a->state_bytes; the entry
 * chooses it: kdalab_chunk_opts.bwd_state_bytes, 128 MiB with a caller's
 * workspace, none without): one group of all the chunks, swept once. Else it
 * checkpoints them (Chen et al. 2016, "Training deep nets with sublinear
 * memory cost"): a first sweep keeps the state entering each group of
 * G = ceil(sqrt(nch)) chunks, and before a group is differentiated its G
 * states are recomputed from that one, with the same arithmetic, so the
 * same bits. ngroups + G + 1 states of K V elements per task (one head),
 * about 2 sqrt(nch) instead of nch + 1 (33 instead of 257 at T = 4096,
 * C = 16: 4.3 MB instead of 34 MB in float64 at K = V = 128), for one more
 * forward of each chunk outside the last group; the rest is
 * O(C (C + K + V) + K V).
 *
 * Every mechanism runs KDA's per-channel code: a per-head g (one per
 * position) is copied to every channel and its dg summed over them; without
 * a decay g is 0 (every decay factor exactly 1). Without the delta rule there
 * are no steps 1-4 (V_new = V).
 *
 * Notation (one chunk of n positions, S [K, V] the state entering it):
 *   a_r = exp(g_r) per channel; gamma_r = prod a over 0..r; te_r = prod a
 *   over r+1..n-1 (te: "to end"); F_r, B_r the same inside r's sub-chunk
 *   (chunk_scores.h); qg = s gamma q, kg = -gamma k, kd = te k (the forward's
 *   rows); Akk = Diag(beta) Gkk with Gkk the decayed Gram of (k, k), j < i;
 *   Aqk = s Gqk, j <= i; Minv = (I + Akk)^-1, Tb = Minv Diag(beta);
 *   Wn = Tb kg (= -W), U = Tb v, Vn = U + Wn S (V_new);
 *   O = qg S + Aqk Vn;  S_out = Diag(gamma_{n-1}) S + kd^T Vn.
 * Every factor is a product of a's (each <= 1) over its span, flushed to 0
 * below the type's smallest normal, as in the forward: any g <= 0 is exact.
 */

/*
 * The forward of one chunk of n positions (steps 1-4), recomputed from the
 * state S = w->f.S entering it, with the chunk's input rows set in w->f
 * (chunk_rows): the decay factors (kda_factors), Gkk and
 * Aqk = s Gqk (kda_scores), and with delta Minv, Wn, U and Vn. Returns Vn's
 * rows (v's own rows without delta) and their stride in *ldvn. beta stays in
 * w->f.b.
 */
static const real *SIMD_FN(chunk_recompute)(SIMD_FN(bws) *w, int delta, size_t n, real s,
                                            size_t *ldvn)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = f->K, V = f->W, C = f->C;
    real *beta = f->b;
    SIMD_FN(kda_factors)(f, n, s);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < C; j++)
            f->Akk[i * C + j] = f->Aqk[i * C + j] = 0;
    f->b = w->ones;
    SIMD_FN(kda_scores)(f, n, s); /* Akk = Gkk (b = 1), Aqk = s Gqk */
    *ldvn = f->ldv;
    if (!delta) {
        f->b = beta;
        return f->v;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            w->Gkk[i * C + j] = f->Akk[i * C + j];
            f->Akk[i * C + j] *= beta[i];
        }
    SIMD_FN(ut_transform)(f, n); /* b = 1: Tm = Minv */
    f->b = beta;
    memcpy(w->Minv, f->Tm, n * C * sizeof(real));
    for (size_t i = 0; i < n; i++) /* Tm = Minv Diag(beta) */
        for (size_t j = 0; j <= i; j++)
            f->Tm[i * C + j] *= beta[j];
    SIMD_FN(gemm)(n, K, n, f->Tm, C, 1, f->kg, K, w->Wn, K, 0, 1);
    SIMD_FN(gemm)(n, V, n, f->Tm, C, 1, f->v, f->ldv, w->U, V, 0, 1);
    memcpy(w->Vn, w->U, n * V * sizeof(real));
    SIMD_FN(gemm)(n, V, K, w->Wn, K, 1, f->S, V, w->Vn, V, 1, 0);
    *ldvn = V;
    return w->Vn;
}

/*
 * One chunk of n positions, last to first. On entry w->f.S is the state
 * entering the chunk, w->dS is dL/d(state leaving it), the chunk's input
 * rows are set in w->f (chunk_rows) and dO [n, ldo] is its rows of d_o. On
 * return w->dS is dL/d(state entering) and dq, dk, dv, dbeta, dgam
 * (gamma * dL/dgamma), dgsum and dkd hold the chunk's gradients.
 */
static void SIMD_FN(chunk_bwd)(SIMD_FN(bws) *w, int delta, size_t n, real s, const real *dO,
                               size_t ldo)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = f->K, V = f->W, C = f->C;
    const real *S = f->S;
    real *dS = w->dS;
    size_t ldvn;
    const real *Vn = SIMD_FN(chunk_recompute)(w, delta, n, s, &ldvn);
    const real *beta = f->b;
    SIMD_FN(bwd_factors)(w, n);

    /* Products X Y^T with Y [n, V] a chunk's rows are formed as (Y X^T)^T,
     * transposing the [n, V] and [K, n] sides (C (K + V) elements) instead of
     * the [K, V] state */
    SIMD_FN(transpose)(w->VnT, Vn, ldvn, n, V);

    /* 7. S_out = Diag(gamma_last) S + kd^T Vn */
    SIMD_FN(gemm)(n, V, K, f->kd, K, 1, dS, V, w->dVn, V, 0, 0);        /* dVn = kd dS */
    SIMD_FN(gemm)(K, n, V, dS, V, 1, w->VnT, n, w->rT, n, 0, 0);        /* dkd = Vn dS^T */
    SIMD_FN(transpose)(w->dkd, w->rT, n, K, n);
    for (size_t ch = 0; ch < K; ch++)
        w->dgl[ch] = SIMD_FN(row_dot)(dS + ch * V, S + ch * V, V);

    /* 6. O = qg S + Aqk Vn */
    SIMD_FN(gemm)(n, n, V, dO, ldo, 1, w->VnT, n, w->dAqk, C, 0, 0);     /* dAqk = dO Vn^T */
    SIMD_FN(gemm)(n, V, n, f->Aqk, 1, C, dO, ldo, w->dVn, V, 1, 0);     /* dVn += Aqk^T dO */

    /* 6 and 4 (Vn = U + Wn S) together, as products over m = 2n stacked rows
     * B2 = [dO ; dVn], A2 = [qg ; Wn] (n rows without delta):
     *   [dqg , dWn] = S B2^T, i.e. dqg = dO S^T, dWn = dVn S^T (dU = dVn)
     *   dS (entering) = Diag(gamma_last) dS_out + A2^T B2
     *                 = ... + qg^T dO + Wn^T dVn */
    const size_t m = delta ? 2 * n : n;
    for (size_t r = 0; r < n; r++) {
        memcpy(w->B2 + r * V, dO + r * ldo, V * sizeof(real));
        memcpy(w->A2 + r * K, f->qg + r * K, K * sizeof(real));
    }
    if (delta) {
        memcpy(w->B2 + n * V, w->dVn, n * V * sizeof(real));
        memcpy(w->A2 + n * K, w->Wn, n * K * sizeof(real));
    }
    SIMD_FN(transpose)(w->B2T, w->B2, V, m, V);
    SIMD_FN(gemm)(K, m, V, S, V, 1, w->B2T, m, w->rT, m, 0, 0);
    SIMD_FN(transpose)(w->dqg, w->rT, m, K, n);
    if (delta)
        SIMD_FN(transpose)(w->dWn, w->rT + n, m, K, n);
    SIMD_FN(gemm_rs)(K, V, m, w->A2, 1, K, w->B2, V, dS, V, 1, 0, f->gl);

    memset(w->dq, 0, n * K * sizeof(real));
    memset(w->dk, 0, n * K * sizeof(real));
    memset(w->dgsum, 0, n * K * sizeof(real));
    for (size_t r = 0; r < n; r++) {
        real *dq = w->dq + r * K, *dk = w->dk + r * K, *dgm = w->dgam + r * K;
        const real *gm = w->gam + r * K, *te = w->te + r * K, *dqg = w->dqg + r * K;
        const real *dkd = w->dkd + r * K;
        for (size_t ch = 0; ch < K; ch++) {
            dq[ch] = s * gm[ch] * dqg[ch];       /* qg = s gamma q */
            dk[ch] = te[ch] * dkd[ch];           /* kd = te k */
            dgm[ch] = f->qg[r * K + ch] * dqg[ch]; /* gamma dL/dgamma */
        }
    }
    for (size_t ch = 0; ch < K; ch++)
        w->dgam[(n - 1) * K + ch] += f->gl[ch] * w->dgl[ch];

    /* 5. Aqk = s (decayed Gram of (q, k)), j <= i: dGqk = s dAqk */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < C; j++)
            w->dAqk[i * C + j] = j <= i ? s * w->dAqk[i * C + j] : 0.0f;
    SIMD_FN(gram_bwd)(w, n, f->q, f->ldqk, 1, f->k, f->ldqk, f->kb, w->dAqk, 1, w->dq, w->dk);

    if (!delta) { /* linear attention: V_new = V */
        for (size_t r = 0; r < n; r++)
            memcpy(w->dv + r * V, w->dVn + r * V, V * sizeof(real));
        return;
    }

    /* 2-3. U = Minv Diag(beta) v, Wn = Minv Diag(beta) kg:
     * dRv = Minv^T dU, dRk = Minv^T dWn, dAkk = -(dRv U^T + dRk Wn^T) (j < i) */
    SIMD_FN(gemm)(n, V, n, w->Minv, 1, C, w->dVn, V, w->dRv, V, 0, 0);
    SIMD_FN(gemm)(n, K, n, w->Minv, 1, C, w->dWn, K, w->dRk, K, 0, 0);
    SIMD_FN(transpose)(w->UT, w->U, V, n, V);
    SIMD_FN(transpose)(w->WnT, w->Wn, K, n, K);
    SIMD_FN(gemm)(n, n, V, w->dRv, V, 1, w->UT, n, w->dA, C, 0, 0);
    SIMD_FN(gemm)(n, n, K, w->dRk, K, 1, w->WnT, n, w->dA, C, 1, 0);
    for (size_t r = 0; r < n; r++) {
        real b = beta[r];
        const real *drv = w->dRv + r * V, *drk = w->dRk + r * K;
        real db = SIMD_FN(row_dot)(drv, f->v + r * f->ldv, V) +
                  SIMD_FN(row_dot)(drk, f->kg + r * K, K);
        for (size_t j = 0; j < V; j++)
            w->dv[r * V + j] = b * drv[j];
        /* kg = -gamma k: dk -= gamma b dRk, gamma dgamma += kg b dRk */
        for (size_t ch = 0; ch < K; ch++) {
            real dkg = b * drk[ch];
            w->dk[r * K + ch] -= w->gam[r * K + ch] * dkg;
            w->dgam[r * K + ch] += f->kg[r * K + ch] * dkg;
        }
        /* 1. Akk = Diag(beta) Gkk: dbeta_i += sum_j dAkk Gkk, dGkk = beta_i dAkk */
        for (size_t j = 0; j < C; j++) {
            real dA = j < r ? -w->dA[r * C + j] : 0.0f;
            db += dA * w->Gkk[r * C + j];
            w->dA[r * C + j] = b * dA;
        }
        w->dbeta[r] = db;
    }
    SIMD_FN(gram_bwd)(w, n, f->k, f->ldqk, 0, f->k, f->ldqk, f->kb, w->dA, 0, w->dk, w->dk);
}

/*
 * dL/dg of the chunk's n positions from its factors' gradients, as the
 * reference's chunk_dg: dg_m = sum_{r < m} te_r dL/dte_r + sum_{r >= m}
 * (gamma_r dL/dgamma_r + dgsum_r), where te dL/dte = kd * dkd (the DPLR
 * row: + bd * dbd, ab set). gw = K: per channel (KDA, DPLR); gw = 1: summed
 * over the channels (Gated DeltaNet).
 */
static void SIMD_FN(bwd_dg)(SIMD_FN(bws) *w, size_t n, real *dg, size_t ldg, size_t gw, int ab)
{
    const size_t K = w->f.K;
    real *pre = w->run, *suf = w->dvec;
    for (size_t ch = 0; ch < K; ch++)
        pre[ch] = suf[ch] = 0;
    /* tmp = prefix part, row m: sum_{r < m} kd_r dkd_r */
    for (size_t m = 0; m < n; m++)
        for (size_t ch = 0; ch < K; ch++) {
            w->tmp[m * K + ch] = pre[ch];
            pre[ch] += w->f.kd[m * K + ch] * w->dkd[m * K + ch];
            if (ab)
                pre[ch] += w->f.bd[m * K + ch] * w->dbd[m * K + ch];
        }
    for (size_t m = n; m-- > 0;) {
        for (size_t ch = 0; ch < K; ch++) {
            suf[ch] += w->dgam[m * K + ch] + w->dgsum[m * K + ch];
            w->tmp[m * K + ch] += suf[ch];
        }
        if (gw == K)
            memcpy(dg + m * ldg, w->tmp + m * K, K * sizeof(real));
        else {
            real t = 0;
            for (size_t ch = 0; ch < K; ch++)
                t += w->tmp[m * K + ch];
            dg[m * ldg] = t;
        }
    }
}

/* Point w->f at the rows [t0, t0 + n) of the task's head: q, k, v where the
 * caller keeps them, g per channel (KDA's own rows; Gated DeltaNet's one g
 * copied to every channel, the other mechanisms' 0, in w->gx) and beta (1
 * for linear attention) in w->f.b. */
static void SIMD_FN(chunk_rows)(SIMD_FN(bws) *w, const SIMD_ARGS *a, size_t t0, size_t n)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = a->K;
    f->q = a->q + t0 * a->ld_qk;
    f->k = a->k + t0 * a->ld_qk;
    f->v = a->v + t0 * a->ld_v;
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(a->mech);
    if (gs == KDALAB_G_PER_KEY) {
        f->gin = a->g + t0 * a->ld_g;
        f->ldg = a->ld_g;
    } else {
        for (size_t r = 0; r < n; r++) {
            real gr = gs == KDALAB_G_PER_HEAD ? a->g[(t0 + r) * a->ld_g] : 0.0f;
            for (size_t ch = 0; ch < K; ch++)
                w->gx[r * K + ch] = gr;
        }
        f->gin = w->gx;
        f->ldg = K;
    }
    for (size_t r = 0; r < n; r++)
        f->b[r] = !kdalab_mechanism_has_delta(a->mech) ? 1.0f : a->beta[(t0 + r) * a->ld_b];
    f->ain = a->a ? a->a + t0 * a->ld_ab : NULL; /* the DPLR row's a, b */
    f->bin = a->b ? a->b + t0 * a->ld_ab : NULL;
    f->ldab = a->ld_ab;
}

/* The forward (steps 1-4 and 7) of chunks nc0 .. nc0 + m - 1 from the state
 * Sb[0] entering the first: Sb[j + 1] = Diag(gamma_last) Sb[j] + kd^T Vn,
 * Sb [m + 1, K, V]. */
static void SIMD_FN(bwd_sweep)(SIMD_FN(bws) *w, const SIMD_ARGS *a, size_t nc0, size_t m,
                               real *Sb)
{
    SIMD_FN(ws) *f = &w->f;
    const size_t K = a->K, V = a->V, T = a->T, KV = K * V, C = f->C;
    const int delta = kdalab_mechanism_has_delta(a->mech);
    const int decays = kdalab_mechanism_g_shape(a->mech) != KDALAB_G_NONE;
    for (size_t j = 0; j < m; j++) {
        size_t t0 = (nc0 + j) * C, n = SIMD_FN(min_sz)(C, T - t0), ldvn;
        f->S = Sb + j * KV;
        SIMD_FN(chunk_rows)(w, a, t0, n);
        real *Sn = Sb + (j + 1) * KV;
        if (a->a) { /* the DPLR row (dplr_bwd.h) */
            SIMD_FN(dplr_recompute)(w, n, a->scale);
            memcpy(Sn, f->S, KV * sizeof(real));
            SIMD_FN(dplr_sweep_step)(w, n, Sn);
            continue;
        }
        const real *Vn = SIMD_FN(chunk_recompute)(w, delta, n, a->scale, &ldvn);
        memcpy(Sn, f->S, KV * sizeof(real));
        SIMD_FN(gemm_rs)(K, V, n, f->kd, 1, K, Vn, ldvn, Sn, V, 1, 0, decays ? f->gl : NULL);
    }
}

/*
 * One backward task: one head (all value columns), its gradients written to
 * bo's arrays at the same row offsets and strides as the inputs (dq, dk like
 * q; dv like v; dg like g; dbeta like beta; dh0 like h0). A forward sweep
 * (steps 1-4 and 7) keeps the state entering each group of G chunks; then
 * each group, last to first, has its chunks' states recomputed from that
 * one (the last group's are still there from the sweep; with every state
 * kept, one group, nothing again), and each chunk, last to first, is
 * recomputed from its state and differentiated. work: the task's
 * bwd_work_floats(C, c, K, V, ceil(T / C), a->a != NULL, a->state_bytes),
 * 64-byte aligned.
 */
static void SIMD_FN(chunk_head_bwd)(const SIMD_ARGS *a, const SIMD_BWD_OUT *bo, real *work)
{
    const size_t K = a->K, V = a->V, T = a->T, KV = K * V;
    const size_t C = a->chunk < T ? a->chunk : (T ? T : 1);
    const size_t c = a->subchunk < C ? a->subchunk : C, nch = (T + C - 1) / C;
    const size_t gw = kdalab_mechanism_g_width(a->mech, K);
    const int delta = kdalab_mechanism_has_delta(a->mech), ab = a->a != NULL;
    const size_t G = SIMD_FN(bwd_group)(nch, K, V, a->state_bytes), ngroups = (nch + G - 1) / G;
    SIMD_FN(bws) w;
    SIMD_FN(bwd_carve)(&w, work, C, c, K, V, nch, a->a != NULL, a->state_bytes);
    SIMD_FN(ws) *f = &w.f;
    f->pa = a;
    f->ldqk = a->ld_qk;
    f->ldv = a->ld_v;
    f->ldo = a->ld_v;
    for (size_t r = 0; r < C; r++)
        w.ones[r] = 1;

    /* the forward sweep, keeping the state entering each group in ck */
    for (size_t i = 0; i < KV; i++)
        w.loc[i] = a->h0 ? a->h0[i] : 0.0f;
    for (size_t gr = 0; gr < ngroups; gr++) {
        size_t m = SIMD_FN(min_sz)(G, nch - gr * G);
        memcpy(w.ck + gr * KV, w.loc, KV * sizeof(real));
        SIMD_FN(bwd_sweep)(&w, a, gr * G, m, w.loc);
        if (gr + 1 < ngroups)
            memcpy(w.loc, w.loc + m * KV, KV * sizeof(real));
    }

    /* the backward sweep */
    for (size_t i = 0; i < KV; i++)
        w.dS[i] = bo->dht ? bo->dht[i] : 0.0f;
    for (size_t nc = nch; nc-- > 0;) {
        size_t t0 = nc * C, n = SIMD_FN(min_sz)(C, T - t0), gr = nc / G, j = nc % G;
        if (gr + 1 < ngroups && j == G - 1) { /* entering a group: its states again */
            memcpy(w.loc, w.ck + gr * KV, KV * sizeof(real));
            SIMD_FN(bwd_sweep)(&w, a, gr * G, G - 1, w.loc);
        }
        f->S = w.loc + j * KV;
        SIMD_FN(chunk_rows)(&w, a, t0, n);
        if (ab)
            SIMD_FN(dplr_chunk_bwd)(&w, n, a->scale, bo->d_o + t0 * a->ld_v, a->ld_v);
        else
            SIMD_FN(chunk_bwd)(&w, delta, n, a->scale, bo->d_o + t0 * a->ld_v, a->ld_v);
        for (size_t r = 0; r < n; r++) {
            size_t t = t0 + r;
            if (bo->dq)
                memcpy(bo->dq + t * bo->ld_dqk, w.dq + r * K, K * sizeof(real));
            if (bo->dk)
                memcpy(bo->dk + t * bo->ld_dqk, w.dk + r * K, K * sizeof(real));
            if (bo->dv)
                memcpy(bo->dv + t * a->ld_v, w.dv + r * V, V * sizeof(real));
            if (bo->dbeta && delta)
                bo->dbeta[t * a->ld_b] = w.dbeta[r];
            if (bo->da && ab)
                memcpy(bo->da + t * a->ld_ab, w.da + r * K, K * sizeof(real));
            if (bo->db && ab)
                memcpy(bo->db + t * a->ld_ab, w.db + r * K, K * sizeof(real));
        }
        if (bo->dg && gw)
            SIMD_FN(bwd_dg)(&w, n, bo->dg + t0 * a->ld_g, a->ld_g, gw, ab);
    }
    if (bo->dh0)
        memcpy(bo->dh0, w.dS, KV * sizeof(real));
}
