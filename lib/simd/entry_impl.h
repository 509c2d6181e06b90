/*
 * lib/simd/entry_impl.h — the chunkwise and decode-step entry points of the
 * optimized path, written once over `real` (float or double) and included
 * twice by lib/simd/entry.c, the way the kernel headers are included once per
 * instruction set. Around the kernel table of the level in use
 * (lib/simd/levels.c) they spread the tasks over OpenMP threads
 * (lib/simd/plan.c). The chunkwise ones run on a call kdalab_run_f32 / _f64
 * checked (lib/call/call.c); the decode step checks its own arguments with
 * the library's checks (lib/core/rules.c).
 *
 * The including file defines: real; E_FN(name), the precision suffix
 * (name##_f32 or name##_f64, which also names the library's checks); E_TABLE,
 * E_ARGS, E_BWD_OUT, the kernel table and task types of simd_internal.h;
 * E_TENSORS, the call's arrays (kdalab_tensors_f32 / _f64); E_TABLE_ACTIVE,
 * the function returning the active table.
 */

/* The float64 / float32 chunkwise forward on a validated call
 * (kdalab__simd_chunk_f32 / _f64, internal.h): tasks over the (sequence,
 * value head) pairs, every array read and written in place. Row r of
 * sequence n of value head j is at ((b T + t0 + r) HV + j) of v, o, g,
 * beta, a, b, and the query/key head j / G at ((b T + t0 + r) H + j / G)
 * of q, k. */
static kdalab_status E_FN(run_chunk)(const kdalab__call *c, real scale, const E_TENSORS *x,
                                     kdalab_report *report)
{
    const E_TABLE *tab = E_TABLE_ACTIVE();
    const size_t T = c->T, H = c->H, HV = c->HV, G = c->G, K = c->K, V = c->V, gw = c->gw;
    const size_t Lmax = c->Lmax;
    const size_t C = c->op.chunk < Lmax ? c->op.chunk : (Lmax ? Lmax : 1);
    const size_t sc = c->op.subchunk < C ? c->op.subchunk : C;

    simd_plan pl;
    /* grouped value heads: one head per task (its q/k head is found by index) */
    kdalab_status s = kdalab__simd_plan_make(&pl, c->N, HV, G == 1, C, sc, K, V, sizeof(real),
                                             tab->work_floats, c->ab,
                                             c->op.precision != KDALAB_FP32, c->work);
    if (s != KDALAB_OK)
        return s;
    /* h: sequence n's first chunk, the sum of the chunks before it (plain:
     * ceil(T / C) per batch entry) */
    size_t *first = NULL;
    if (x->h && c->cu) {
        first = malloc(c->N * sizeof *first);
        if (!first) {
            kdalab__simd_plan_free(&pl);
            return kdalab_fail(KDALAB_ENOMEM, "no memory for the chunk offsets of %zu "
                                              "sequences", c->N);
        }
        for (size_t n = 0, at = 0; n < c->N; at += kdalab__call_chunks(c, n), n++)
            first[n] = at;
    }
    const int nth = pl.nth;
    const size_t ntasks = pl.ntasks;
    size_t bad_o = 0, bad_ht = 0, bad_h = 0;
#pragma omp parallel num_threads(nth) reduction(+ : bad_o, bad_ht, bad_h)
    {
        const int mode = kdalab__nearest_begin(); /* the same bits on any thread count */
        real *mywork = pl.work[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (size_t task = 0; task < ntasks; task++) {
            size_t n, j, v0, v1, b, t0, L;
            kdalab__simd_plan_task(&pl, V, task, &n, &j, &v0, &v1);
            kdalab__call_seq(c, n, &b, &t0, &L);
            size_t rqk = (b * T + t0) * H + j / G, rv = (b * T + t0) * HV + j; /* t = t0 */
            size_t nj = n * HV + j;                                             /* state */
            size_t hj = ((first ? first[n] : n * kdalab__call_chunks(c, n)) * HV + j) * K * V;
            E_ARGS a = {
                .mech = c->mech, .T = L, .K = K, .V = V, .v0 = v0, .v1 = v1, .nh = pl.nh,
                .chunk = C, .subchunk = sc, .scale = scale,
                .q = x->q ? x->q + rqk * K : NULL, .k = x->k ? x->k + rqk * K : NULL,
                .v = x->v ? x->v + rv * V : NULL,
                .g = gw && x->g ? x->g + rv * gw : NULL,
                .beta = c->delta && x->beta ? x->beta + rv : NULL,
                .h0 = x->h0 ? x->h0 + nj * K * V : NULL,
                .o = x->o ? x->o + rv * V : NULL, .ht = x->ht ? x->ht + nj * K * V : NULL,
                .hs = x->h ? x->h + hj : NULL, .ld_hs = HV * K * V, .h_chunk = c->op.h_chunk,
                .ld_qk = H * K, .ld_v = HV * V, .ld_g = HV * gw, .ld_b = HV,
                .a = c->ab && x->a ? x->a + rv * K : NULL,
                .b = c->ab && x->b ? x->b + rv * K : NULL,
                .ld_ab = HV * K, .store = c->op.precision,
            };
            tab->chunk_head(&a, mywork, &bad_o, &bad_ht, &bad_h);
        }
        kdalab__nearest_end(mode);
    }
    free(first);
    kdalab__simd_plan_free(&pl);
    return kdalab__simd_chunk_finish(bad_o, bad_ht, bad_h, report);
}

/* kdalab_simd_step_f32 / _f64 (lib/kdalab_simd.h documents them). */
static kdalab_status E_FN(entry_step)(kdalab_mechanism mech, size_t K, size_t V, real scale,
                                      const real *q, const real *k, const real *v,
                                      const real *g, real beta, real *S, real *o)
{
    const E_TABLE *tab = E_TABLE_ACTIVE();
    /* A screen, not a check: certain is 1 only when the step is certainly
     * valid. scale and beta go through the library's own tests; the size test
     * is kdalab_count_dims's for B = T = H = 1 without its divisions (K*V and
     * max(K, V) elements certainly have a byte count in size_t); q, k, v and
     * g go through the level's vector screen. When not sure, the library's
     * checks decide and word the error. */
    size_t gn = kdalab_mechanism_g_width(mech, K);
    int certain =
        kdalab_mechanism_row(mech) && !kdalab_mechanism_has_ab(mech) && K && V && q && k &&
        v && S && o &&
        (gn == 0 || g) && kdalab_check_scale(scale) == KDALAB_OK &&
        (!kdalab_mechanism_has_beta(mech) ||
         E_FN(kdalab_check_values)(KDALAB_RULE_BETA, "beta", &beta, 1, NULL) == KDALAB_OK) &&
        K <= ((size_t)-1) / sizeof(real) / (V > K ? V : K) &&
        tab->screen(q, K, KDALAB_RULE_FINITE) && tab->screen(k, K, KDALAB_RULE_FINITE) &&
        tab->screen(v, V, KDALAB_RULE_FINITE) &&
        (gn == 0 || tab->screen(g, gn, KDALAB_RULE_LOG_DECAY));
    if (!certain) { /* the library's checks, except S: the kernel's first pass checks it */
        kdalab_status c =
            E_FN(kdalab_check_step_args)(mech, K, V, scale, q, k, v, g, beta, S, o);
        if (c != KDALAB_OK)
            return c;
    }
    size_t bad = 0;
    kdalab_status s = tab->step(mech, K, V, scale, q, k, v, g, beta, S, o, &bad);
    if (s == KDALAB_ENONFINITE)
        return kdalab_fail(KDALAB_ENONFINITE, "S[%zu] is %g: inputs must be finite", bad,
                           (double)S[bad]);
    if (s == KDALAB_ENOMEM)
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a decode step of K = %zu, V = %zu",
                           K, V);
    if (s == KDALAB_ERANGE) /* the kernel's write pass saw a non-finite state */
        return kdalab_fail(KDALAB_ERANGE,
                           "SIMD decode step: the state overflowed from finite inputs "
                           "(S and o are written)");
    if (s != KDALAB_OK)
        return s;
    /* as the reference: an overflow is KDALAB_ERANGE, never NaN with OK (the
     * kernel checked S as it wrote it; o is V values) */
    return E_FN(kdalab_check_outputs)("SIMD decode step", o, V, NULL, 0, NULL, NULL);
}

/* The chunkwise backward on a validated call (kdalab__simd_chunk_bwd_f32 /
 * _f64, internal.h): one task per (sequence, value head), one head per
 * thread at a time, so the result has the same bits for any thread count.
 * With grouped value heads (G > 1) each value head's dq, dk go to scratch
 * [B, T, HV, K] and are summed over the G heads of a query/key head, in
 * head order, at the end. */
static kdalab_status E_FN(run_chunk_bwd)(const kdalab__call *c, real scale, const E_TENSORS *x)
{
    const E_TABLE *tab = E_TABLE_ACTIVE();
    const size_t T = c->T, H = c->H, HV = c->HV, G = c->G, K = c->K, V = c->V, gw = c->gw;
    const size_t Lmax = c->Lmax;
    const size_t C = c->op.chunk < Lmax ? c->op.chunk : (Lmax ? Lmax : 1);
    const size_t sc = c->op.subchunk < C ? c->op.subchunk : C, nch = (Lmax + C - 1) / C;
    const size_t ntasks = c->N * HV;
    /* one workspace per thread, the chunk states included, before anything is written */
    /* bwd_work_floats <= (nch + 5) K V + 64 (C (C + K + V) + K + 64), every step checked
     * (K V and K + V fit: kdalab_count_dims; C <= max(T, 1)): the states are
     * the forward scratch's one, dS, and the ngroups + G + 1 entering the
     * groups and one group's chunks, at most nch + 2 with every state kept
     * (3 at nch = 0); and the bytes leave room for work_get's rounding to 64 */
    size_t states, rest, bytes;
    if (!kdalab_mul_size(nch + 5, K * V, &states) || !kdalab_mul_size(C, C + K + V, &rest) ||
        rest > SIZE_MAX - K - 64 || !kdalab_mul_size(rest + K + 64, 64, &rest) ||
        states > SIZE_MAX - rest || !kdalab_mul_size(states + rest, sizeof(real), &bytes) ||
        bytes > SIZE_MAX - 64)
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "the states of %zu chunks, %zu x %zu each, overflow the workspace",
                           nch, K, V);
    /* the budget for kept chunk states: the caller's; else, with a workspace
     * the caller keeps, SIMD_BWD_STATE_BYTES (its pages serve every call);
     * without one, 1: checkpoint, since a fresh page for every kept state
     * costs more than the forward it saves (bench/README.md) */
    const size_t state_bytes = c->op.bwd_state_bytes ? c->op.bwd_state_bytes
                               : c->work             ? SIMD_BWD_STATE_BYTES
                                                     : 1;
    /* the largest layout any sequence needs: under cu_seqlens a short one may
     * keep every state where the longest checkpoints (a plain batch's
     * sequences all have T positions: the first stands for them) */
    size_t elems = 0;
    for (size_t n = 0; n < (c->cu ? c->N : 1); n++) {
        size_t b, t0, L;
        kdalab__call_seq(c, n, &b, &t0, &L);
        const size_t e = tab->bwd_work_floats(C, sc, K, V, (L + C - 1) / C, c->ab, state_bytes);
        elems = e > elems ? e : elems;
    }
    int nth = kdalab_get_num_threads();
    if ((size_t)nth > ntasks)
        nth = (int)ntasks; /* 0 tasks: no workspace */
    /* grouped value heads: dq and dk per value head, summed at the end */
    const int grouped = G > 1 && (x->dq || x->dk);
    const size_t nqk = c->B * T * HV * K; /* fits: check_layout counted [B, T, HV, K] */
    void **work;
    real *gdq = NULL;
    kdalab_status s = kdalab__simd_work_get(c->work, nth, elems * sizeof(real),
                                            grouped ? 2 * nqk * sizeof(real) : 0, &work,
                                            (void **)&gdq);
    if (s != KDALAB_OK)
        return s;
    real *gdk = gdq ? gdq + nqk : NULL;
    const size_t ld_dqk = grouped ? HV * K : H * K;
#pragma omp parallel num_threads(nth)
    {
        const int mode = kdalab__nearest_begin(); /* the same bits on any thread count */
#pragma omp for schedule(dynamic, 1)
        for (size_t task = 0; task < ntasks; task++) {
            size_t n = task / HV, j = task % HV, b, t0, L;
            kdalab__call_seq(c, n, &b, &t0, &L);
            size_t rqk = (b * T + t0) * H + j / G, rv = (b * T + t0) * HV + j; /* t = t0 */
            size_t nj = n * HV + j, rdqk = grouped ? rv : rqk;
            real *dq = grouped ? (x->dq ? gdq : NULL) : x->dq;
            real *dk = grouped ? (x->dk ? gdk : NULL) : x->dk;
            E_ARGS a = {
                .mech = c->mech, .T = L, .K = K, .V = V, .v0 = 0, .v1 = V, .nh = 1,
                .chunk = C, .subchunk = sc, .state_bytes = state_bytes, .scale = scale,
                .q = x->q ? x->q + rqk * K : NULL, .k = x->k ? x->k + rqk * K : NULL,
                .v = x->v ? x->v + rv * V : NULL, .g = gw && x->g ? x->g + rv * gw : NULL,
                .beta = c->delta && x->beta ? x->beta + rv : NULL,
                .h0 = x->h0 ? x->h0 + nj * K * V : NULL,
                .ld_qk = H * K, .ld_v = HV * V, .ld_g = HV * gw, .ld_b = HV,
                .a = c->ab && x->a ? x->a + rv * K : NULL,
                .b = c->ab && x->b ? x->b + rv * K : NULL,
                .ld_ab = HV * K, .store = KDALAB_FP32,
            };
            E_BWD_OUT bo = {
                .d_o = x->d_o ? x->d_o + rv * V : NULL, .dht = x->dht ? x->dht + nj * K * V : NULL,
                .dq = dq ? dq + rdqk * K : NULL, .dk = dk ? dk + rdqk * K : NULL, .ld_dqk = ld_dqk,
                .dv = x->dv ? x->dv + rv * V : NULL, .dg = x->dg && gw ? x->dg + rv * gw : NULL,
                .dbeta = x->dbeta && c->delta ? x->dbeta + rv : NULL,
                .dh0 = x->dh0 ? x->dh0 + nj * K * V : NULL,
                .da = x->da && c->ab ? x->da + rv * K : NULL,
                .db = x->db && c->ab ? x->db + rv * K : NULL,
            };
            tab->chunk_head_bwd(&a, &bo, work[omp_get_thread_num()]);
        }
        kdalab__nearest_end(mode);
    }
    if (grouped) { /* dq[b, t, h] = sum over i < G of dq_v[b, t, h G + i], in head order */
        const size_t rows = c->B * T * H;
#pragma omp parallel num_threads(nth > 0 ? nth : 1)
        {
            const int mode = kdalab__nearest_begin();
#pragma omp for schedule(static)
            for (size_t r = 0; r < rows; r++)
                for (int which = 0; which < 2; which++) {
                    real *dst = which ? x->dk : x->dq;
                    const real *src = which ? gdk : gdq;
                    if (!dst)
                        continue;
                    real *d = dst + r * K;
                    const real *s0 = src + r * G * K; /* row (b, t, h G) of [B, T, HV, K] */
                    for (size_t ch = 0; ch < K; ch++)
                        d[ch] = s0[ch];
                    for (size_t i = 1; i < G; i++)
                        for (size_t ch = 0; ch < K; ch++)
                            d[ch] += s0[i * K + ch];
                }
            kdalab__nearest_end(mode);
        }
    }
    kdalab__simd_work_put(c->work, nth, work, gdq);
    /* The gradients are finite unless an intermediate overflowed: the
     * level's vector screen, spread over the threads (kdalab__simd_screen, as
     * for the inputs), says so at memory speed; only where it is not sure do
     * the library's checks (one thread, an element at a time) count the
     * values and word the error. */
    const size_t nqkh = c->B * T * H * K, nvh = c->B * T * HV * V, nbh = c->B * T * HV;
    const struct {
        const real *x;
        size_t n;
    } grads[] = {{x->dq, nqkh},
                 {x->dk, nqkh},
                 {x->dv, nvh},
                 {gw ? x->dg : NULL, nbh * gw},
                 {c->delta ? x->dbeta : NULL, nbh},
                 {c->ab ? x->da : NULL, nbh * K},
                 {c->ab ? x->db : NULL, nbh * K},
                 {x->dh0, c->N * HV * K * V}};
    int sure = 1;
    for (size_t i = 0; sure && i < sizeof grads / sizeof grads[0]; i++)
        if (grads[i].x)
            sure = kdalab__simd_screen(grads[i].x, grads[i].n, KDALAB_RULE_FINITE,
                                       sizeof(real) == sizeof(float));
    if (sure)
        return KDALAB_OK;
    kdalab_dims dq_dims = {.B = c->B, .T = T, .H = H, .K = K, .V = V};
    kdalab_dims dv_dims = {.B = c->B, .T = T, .H = HV, .K = K, .V = V};
    kdalab_dims st_dims = {.B = c->N, .T = T, .H = HV, .K = K, .V = V};
    /* the gradients in their own shapes: dq, dk [B, T, H, K]; dv, dg, dbeta, da, db over
     * HV heads; dh0 [N, HV, K, V] */
    s = E_FN(kdalab_check_grads)("SIMD chunkwise backward", &dq_dims, c->mech, x->dq, x->dk,
                                 NULL, NULL, NULL, NULL, NULL, NULL);
    if (s == KDALAB_OK)
        s = E_FN(kdalab_check_grads)("SIMD chunkwise backward", &dv_dims, c->mech, NULL, NULL,
                                     x->dv, gw ? x->dg : NULL, c->delta ? x->dbeta : NULL,
                                     c->ab ? x->da : NULL, c->ab ? x->db : NULL, NULL);
    if (s == KDALAB_OK)
        s = E_FN(kdalab_check_grads)("SIMD chunkwise backward", &st_dims, c->mech, NULL, NULL,
                                     NULL, NULL, NULL, NULL, NULL, x->dh0);
    return s;
}
