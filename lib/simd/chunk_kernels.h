/*
 * lib/simd/chunk_kernels.h — the chunkwise form of one head: the UT
 * transform (steps 2-3), one chunk of steps 1-7 for every mechanism, and the
 * driver of one task (its heads, chunk by chunk), which is the kernel table's
 * chunk_head.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: ut_transform, dplr_chunk, chunk,
 * work_floats, nonfinite_canon, chunk_head
 * needs: kernel_common.h, gemm.h, chunk_workspace.h, chunk_scores.h, dplr_scores.h
 *
 * The algorithm is REFERENCE.md "Chunkwise form", steps 1-7, with the safe
 * sub-chunk decay for KDA (chunk_scores.h says how the decay factors are
 * formed); for the DPLR row, "The boundary", steps 1-5 (dplr_chunk, its
 * scores in dplr_scores.h). Beyond that:
 *
 *   - The UT transform is formed explicitly as the unit lower-triangular
 *     inverse T = (I + A_kk)^-1 Diag(beta) (forward substitution, about C^3/6
 *     multiply-adds), so W and U come out of one triangular matrix product.
 *   - The state S [K, V] is kept for the value columns [v0, v1) of this task.
 *   - Every matrix product goes through gemm (gemm.h).
 *   - Emulated storage (the task's store, bf16 or fp16; float32 only): a
 *     chunk's q, k, v, beta (a, b) rows are copied into the workspace
 *     rounded to the format (chunk_head), and so are the rescaled rows the
 *     products read (store_factors, dplr_store_factors, and the left
 *     factors of the off-diagonal score blocks as kda_scores / dplr_scores
 *     form them); g, the state, A, W, U and the sums stay float32, as in
 *     the reference's emulation (lib/reference/chunk_steps_f32.c).
 */

/* ---------------------------------------------------------------------------- */
/* One chunk: the scores (chunk_scores.h), then steps 2-4, 6, 7 for every       */
/* mechanism                                                                    */
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
            const real *ai = w->Akk + i * C;
            for (size_t m = 0; m < i; m++) {
                vf nav = VSET1(-ai[m]);
                const real *tm = w->Tm + m * C;
                SIMD_UNROLL(8)
                for (int bk = 0; bk < 8; bk++)
                    if ((size_t)bk * VLEN <= m)
                        acc[bk] = VFMA(nav, VLOAD(tm + bk * VLEN), acc[bk]);
            }
            real *ti = w->Tm + i * C;
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
            real *ti = w->Tm + i * C;
            for (size_t j = 0; j < C; j++)
                ti[j] = 0;
            ti[i] = 1;
            for (size_t m = 0; m < i; m++) {
                real a = w->Akk[i * C + m];
                const real *tm = w->Tm + m * C;
                for (size_t j = 0; j <= m; j++)
                    ti[j] -= a * tm[j];
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++)
            w->Tm[i * C + j] *= w->b[j];
}

/* One chunk of the DPLR row: steps 1-2 (dplr_scores.h), then 3-5 of
 * REFERENCE.md "The boundary" on the state columns of this task. */
static void SIMD_FN(dplr_chunk)(SIMD_FN(ws) *w, size_t n, real s)
{
    const size_t K = w->K, W = w->W, C = w->C, pf = w->pf_rows;
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(dplr_factors)(w, n, SIMD_FN(qg_scale)(w, s));
    SIMD_FN(dplr_store_factors)(w, n, s);
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(dplr_scores)(w, n, s);
    SIMD_FN(prefetch_rows)(w, pf);
    /* 3. (I - A_ab) U = A^ S + A_ak V: T = (I - A_ab)^-1 (w->b is 1), U = T R */
    SIMD_FN(ut_transform)(w, n);
    SIMD_FN(gemm)(n, W, K, w->ah, K, 1, w->S, W, w->R, W, 0, 0);
    SIMD_FN(gemm)(n, W, n, w->Aak, C, 1, w->v, w->ldv, w->R, W, 1, 1);
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(gemm)(n, W, n, w->Tm, C, 1, w->R, W, w->U, W, 0, 1);
    SIMD_FN(prefetch_rows)(w, pf);
    /* 4. O = s (gamma q) S + s A_qb U + s A_qk V, into the caller's rows */
    SIMD_FN(gemm)(n, W, K, w->qg, K, 1, w->S, W, w->o, w->ldo, 0, 0);
    SIMD_FN(gemm)(n, W, n, w->Aqb, C, 1, w->U, W, w->o, w->ldo, 1, 1);
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(gemm)(n, W, n, w->Aqk, C, 1, w->v, w->ldv, w->o, w->ldo, 1, 1);
    SIMD_FN(prefetch_rows)(w, pf);
    /* 5. S <- Diag(gamma_n) S + (kdec k)^T V + (kdec b)^T U */
    SIMD_FN(gemm_rs)(K, W, n, w->kd, 1, K, w->v, w->ldv, w->S, W, 1, 0, w->gl);
    SIMD_FN(gemm)(K, W, n, w->bd, 1, K, w->U, W, w->S, W, 1, 0);
}

static void SIMD_FN(chunk)(SIMD_FN(ws) *w, kdalab_mechanism mech, size_t n, real s)
{
    if (kdalab_mechanism_has_ab(mech)) {
        SIMD_FN(dplr_chunk)(w, n, s);
        return;
    }
    const size_t K = w->K, W = w->W, C = w->C;
    const int delta = kdalab_mechanism_has_delta(mech);
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(mech);
    const size_t pf = w->pf_rows;

    SIMD_FN(prefetch_rows)(w, pf);
    if (gs == KDALAB_G_PER_KEY) {
        SIMD_FN(kda_factors)(w, n, SIMD_FN(qg_scale)(w, s));
        SIMD_FN(store_factors)(w, n, 1, s);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < C; j++) {
                w->Akk[i * C + j] = 0;
                w->Aqk[i * C + j] = 0;
            }
        SIMD_FN(prefetch_rows)(w, pf);
        SIMD_FN(kda_scores)(w, n, s);
    } else {
        SIMD_FN(scalar_scores)(w, n, s, gs == KDALAB_G_PER_HEAD, delta);
        SIMD_FN(store_factors)(w, n, 0, s);
    }

    const real *Vnew = w->v;
    size_t ldn = w->ldv;
    if (delta) {
        /* 2-3. T = (I + A_kk)^-1 Diag(beta); -W = T (-gamma k), U = T V */
        SIMD_FN(prefetch_rows)(w, pf);
        SIMD_FN(ut_transform)(w, n);
        SIMD_FN(gemm)(n, K, n, w->Tm, C, 1, w->kg, K, w->Wn, K, 0, 1);
        SIMD_FN(prefetch_rows)(w, pf);
        SIMD_FN(gemm)(n, W, n, w->Tm, C, 1, w->v, w->ldv, w->U, W, 0, 1);
        SIMD_FN(prefetch_rows)(w, pf);
        /* 4. V_new = U - W S */
        SIMD_FN(gemm)(n, W, K, w->Wn, K, 1, w->S, W, w->U, W, 1, 0);
        Vnew = w->U;
        ldn = W;
    }
    /* 6. O = s (gamma q) S + A_qk V_new, straight into the caller's rows */
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(gemm)(n, W, K, w->qg, K, 1, w->S, W, w->o, w->ldo, 0, 0);
    SIMD_FN(prefetch_rows)(w, pf);
    SIMD_FN(gemm)(n, W, n, w->Aqk, C, 1, Vnew, ldn, w->o, w->ldo, 1, 1);
    SIMD_FN(prefetch_rows)(w, pf);
    /* 7. S <- Diag(gamma_n) S + (kdec k)^T V_new, the decay applied as the
     * product loads S (one pass over the state instead of two) */
    const int decays = gs != KDALAB_G_NONE;
    SIMD_FN(gemm_rs)(K, W, n, w->kd, 1, K, Vnew, ldn, w->S, W, 1, 0, decays ? w->gl : NULL);
}

/* ---------------------------------------------------------------------------- */
/* One task (a group of heads, or a block of one head's value columns)          */
/* ---------------------------------------------------------------------------- */

static size_t SIMD_FN(work_floats)(size_t C, size_t c, size_t K, size_t W, size_t nh, int ab,
                                   int stored)
{
    return SIMD_FN(ws_floats)(C, c, K, W, nh, ab, stored);
}

/* Non-finite values among x[0..n), each NaN rewritten as the one quiet NaN
 * of <math.h> (an overflowed output's NaNs would otherwise carry whatever
 * sign the arithmetic of its register block gave them, and a different
 * split of the work, so a different thread count, could change their bits).
 * A vector sum of x - x (0 when finite, NaN otherwise) says whether to look
 * at all. */
static size_t SIMD_FN(nonfinite_canon)(real *x, size_t n)
{
    vf acc = VZERO();
    size_t nv = n / VLEN * VLEN;
    for (size_t i = 0; i < nv; i += VLEN) {
        vf xv = VLOAD(x + i);
        acc = VADD(acc, VSUB(xv, xv));
    }
    real tail = 0;
    for (size_t i = nv; i < n; i++)
        tail += x[i] - x[i];
    if (VHSUM(acc) == 0 && tail == 0)
        return 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += !isfinite(x[i]);
        if (isnan(x[i]))
            x[i] = NAN;
    }
    return bad;
}

/* One task: nh heads, value columns [v0, v1), chunk by chunk, and within a
 * chunk head by head (so the heads' neighbouring rows are read together). */
static void SIMD_FN(chunk_head)(const SIMD_ARGS *a, real *work, size_t *bad_o,
                                size_t *bad_ht, size_t *bad_h)
{
    const size_t K = a->K, V = a->V, W = a->v1 - a->v0, T = a->T, nh = a->nh;
    size_t C = a->chunk < T ? a->chunk : (T ? T : 1);
    size_t c = a->subchunk < C ? a->subchunk : C;
    const kdalab_precision st = a->store;
    const int stored = st != KDALAB_FP32;
    SIMD_FN(ws) w;
    SIMD_FN(ws_carve)(&w, work, C, c, K, W, nh, a->a != NULL, stored);
    w.pa = a;
    w.store = st;
    const size_t gw = kdalab_mechanism_g_width(a->mech, K);

    for (size_t h = 0; h < nh; h++)
        for (size_t ch = 0; ch < K; ch++)
            for (size_t j = 0; j < W; j++)
                w.Sall[(h * K + ch) * W + j] =
                    a->h0 ? a->h0[h * K * V + ch * V + a->v0 + j] : 0.0f;

    /* the input rows where the caller keeps them, or their stored copies */
    w.ldqk = stored ? K : a->ld_qk;
    w.ldv = stored ? W : a->ld_v;
    w.ldab = stored ? K : a->ld_ab;
    w.ldo = a->ld_v;
    w.ldg = a->ld_g;
    w.pf_rows = (C + 8 * nh - 1) / (8 * nh); /* 8 stages per chunk of each head */
    for (size_t t0 = 0; t0 < T; t0 += C) {
        size_t n = SIMD_FN(min_sz)(C, T - t0);
        w.pf_next = t0 + n; /* the next chunk's rows, spread over this chunk's work */
        w.pf_end = SIMD_FN(min_sz)(t0 + n + C, T);
        for (size_t h = 0; h < nh; h++) {
            w.S = w.Sall + h * K * W;
            if (a->hs && t0 % a->h_chunk == 0) { /* entering h's chunk, as fla's h holds it */
                real *hs = a->hs + t0 / a->h_chunk * a->ld_hs + h * K * V + a->v0;
                for (size_t ch = 0; ch < K; ch++) {
                    memcpy(hs + ch * V, w.S + ch * W, W * sizeof(real));
                    *bad_h += SIMD_FN(nonfinite_canon)(hs + ch * V, W);
                }
            }
            w.q = a->q + t0 * a->ld_qk + h * K;
            w.k = a->k + t0 * a->ld_qk + h * K;
            w.v = a->v + t0 * a->ld_v + h * V + a->v0;
            w.gin = gw ? a->g + t0 * a->ld_g + h * gw : NULL;
            w.ain = a->a ? a->a + t0 * a->ld_ab + h * K : NULL;
            w.bin = a->b ? a->b + t0 * a->ld_ab + h * K : NULL;
            w.o = a->o + t0 * a->ld_v + h * V + a->v0;
            for (size_t r = 0; r < n; r++)
                w.b[r] = !kdalab_mechanism_has_delta(a->mech) ? 1.0f
                                                              : a->beta[(t0 + r) * a->ld_b + h];
            if (stored) { /* q, k, v, beta (a, b) as a kernel storing in st holds them */
                SIMD_FN(store_rows)(w.qs, w.q, a->ld_qk, n, K, st);
                SIMD_FN(store_rows)(w.ks, w.k, a->ld_qk, n, K, st);
                SIMD_FN(store_rows)(w.vs, w.v, a->ld_v, n, W, st);
                w.q = w.qs, w.k = w.ks, w.v = w.vs;
                if (w.ain) {
                    SIMD_FN(store_rows)(w.as, w.ain, a->ld_ab, n, K, st);
                    SIMD_FN(store_rows)(w.bs, w.bin, a->ld_ab, n, K, st);
                    w.ain = w.as, w.bin = w.bs;
                }
                if (kdalab_mechanism_has_delta(a->mech))
                    SIMD_FN(store_round)(w.b, n, st);
            }
            SIMD_FN(chunk)(&w, a->mech, n, a->scale);
            for (size_t r = 0; r < n; r++)
                *bad_o += SIMD_FN(nonfinite_canon)(w.o + r * w.ldo, W);
        }
        SIMD_FN(prefetch_rows)(&w, C); /* whatever is left */
    }
    if (a->ht) {
        *bad_ht += SIMD_FN(nonfinite_canon)(w.Sall, nh * K * W);
        for (size_t h = 0; h < nh; h++)
            for (size_t ch = 0; ch < K; ch++)
                memcpy(a->ht + h * K * V + ch * V + a->v0, w.Sall + (h * K + ch) * W,
                       W * sizeof(real));
    }
}
