/*
 * lib/simd/entry_impl.h — the chunkwise and decode-step entry points of the
 * optimized path, written once over `real` (float or double) and included
 * twice by lib/simd/entry.c, the way the kernel headers are included once per
 * instruction set. Around the kernel table of the level in use
 * (lib/simd/levels.c) they validate the call with the library's checks
 * (lib/core/rules.c) and spread the tasks over OpenMP threads
 * (lib/simd/plan.c).
 *
 * The including file defines: real; E_FN(name), the precision suffix
 * (name##_f32 or name##_f64, which also names the library's checks); E_TABLE,
 * E_ARGS, the kernel table and task types of simd_internal.h; E_TABLE_ACTIVE,
 * the function returning the active table.
 */

/*
 * A fast screen of one chunkwise call, not a check: 1 when the call is
 * certainly valid, 0 when not sure. On 0 the caller runs kdalab_check_f32 or
 * _f64 (lib/core/rules.c), which decides and words the error, so the statuses
 * and messages are the library's whatever the screen says. The sizes and
 * scale go through the library's own tests; the arrays, which the library's
 * check reads one element at a time, through the level's vector screen
 * (lib/simd/screen.h), in parallel segments of 128 KB.
 */
static int E_FN(screen_chunk_call)(const E_TABLE *tab, const kdalab_dims *dims,
                                   kdalab_mechanism mech, real scale, const real *q,
                                   const real *k, const real *v, const real *g,
                                   const real *beta, const real *h0, const real *o)
{
    kdalab_counts n;
    if (!kdalab_mechanism_row(mech) || kdalab_check_scale(scale) != KDALAB_OK ||
        kdalab_count_dims(dims, mech, sizeof(real), &n) != KDALAB_OK)
        return 0;
    int need_beta = kdalab_mechanism_has_beta(mech);
    if (n.qk > 0 && (!q || !k || !v || !o || (n.g > 0 && !g) || (need_beta && !beta)))
        return 0;
    enum { SEG = (1 << 17) / sizeof(real) };
    struct {
        const real *x;
        size_t n;
        kdalab_value_rule rule;
    } arr[6] = {{q, n.qk, KDALAB_RULE_FINITE},
                {k, n.qk, KDALAB_RULE_FINITE},
                {v, n.v, KDALAB_RULE_FINITE},
                {g, n.qk ? n.g : 0, KDALAB_RULE_LOG_DECAY},
                {beta, need_beta && n.qk ? n.bth : 0, KDALAB_RULE_BETA},
                {h0, h0 ? n.state : 0, KDALAB_RULE_FINITE}};
    size_t nseg = 0;
    for (int a = 0; a < 6; a++)
        nseg += (arr[a].n + SEG - 1) / SEG;
    int doubt = 0;
#pragma omp parallel for schedule(static) reduction(| : doubt)
    for (size_t sgi = 0; sgi < nseg; sgi++) {
        size_t idx = sgi;
        for (int a = 0; a < 6; a++) {
            size_t na = (arr[a].n + SEG - 1) / SEG;
            if (idx < na) {
                size_t off = idx * SEG, len = arr[a].n - off < SEG ? arr[a].n - off : SEG;
                doubt |= !tab->screen(arr[a].x + off, len, arr[a].rule);
                break;
            }
            idx -= na;
        }
    }
    return !doubt;
}

/* kdalab_simd_chunk_f32 / _f64 (lib/kdalab_simd.h documents them). */
static kdalab_status E_FN(entry_chunk)(const kdalab_dims *dims, kdalab_mechanism mech,
                                       real scale, const real *q, const real *k,
                                       const real *v, const real *g, const real *beta,
                                       const real *h0, real *o, real *ht,
                                       const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_chunk_opts op;
    const E_TABLE *tab = E_TABLE_ACTIVE();
    kdalab_status s = KDALAB_OK;
    if (!E_FN(screen_chunk_call)(tab, dims, mech, scale, q, k, v, g, beta, h0, o))
        s = E_FN(kdalab_check)(dims, mech, scale, q, k, v, g, beta, h0, o, NULL);
    if (s != KDALAB_OK)
        return s;
    const kdalab_chunk_opts dflt = kdalab_simd_chunk_opts_default();
    /* float64 takes no emulated storage precision: it is exact */
    s = kdalab_check_chunk_opts(opts ? opts : &dflt, sizeof(real) == sizeof(double), &op);
    if (s != KDALAB_OK)
        return s;
    /* the study's decay modes and emulated precisions: the reference's forms */
    if (op.decay != KDALAB_DECAY_SAFE || op.precision != KDALAB_FP32)
        return E_FN(kdalab_chunk)(dims, mech, scale, q, k, v, g, beta, h0, o, ht, &op, report);

    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1);
    const size_t c = op.subchunk < C ? op.subchunk : C;

    simd_plan pl;
    s = kdalab__simd_plan_make(&pl, B, H, C, c, K, V, sizeof(real), tab->work_floats);
    if (s != KDALAB_OK)
        return s;
    const int nth = pl.nth;
    const size_t ntasks = pl.ntasks;
    const size_t gw = kdalab_mechanism_g_width(mech, K);
    size_t bad_o = 0, bad_ht = 0;
#pragma omp parallel num_threads(nth) reduction(+ : bad_o, bad_ht)
    {
        real *mywork = pl.work[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (size_t task = 0; task < ntasks; task++) {
            size_t b, h, v0, v1;
            kdalab__simd_plan_task(&pl, V, task, &b, &h, &v0, &v1);
            size_t row0 = b * T * H + h, bh = b * H + h; /* (b, t = 0, h) */
            E_ARGS a = {
                .mech = mech, .T = T, .K = K, .V = V, .v0 = v0, .v1 = v1, .nh = pl.nh,
                .chunk = C, .subchunk = c, .scale = scale,
                .q = q ? q + row0 * K : NULL, .k = k ? k + row0 * K : NULL,
                .v = v ? v + row0 * V : NULL,
                .g = (gw && g) ? g + row0 * gw : NULL,
                .beta = (kdalab_mechanism_has_delta(mech) && beta) ? beta + row0 : NULL,
                .h0 = h0 ? h0 + bh * K * V : NULL,
                .o = o ? o + row0 * V : NULL, .ht = ht ? ht + bh * K * V : NULL,
                .ld_qk = H * K, .ld_v = H * V, .ld_g = H * gw, .ld_b = H,
            };
            tab->chunk_head(&a, mywork, &bad_o, &bad_ht);
        }
    }
    kdalab__simd_plan_free(&pl);
    return kdalab__simd_chunk_finish(bad_o, bad_ht, report);
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
        kdalab_mechanism_row(mech) && K && V && q && k && v && S && o &&
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

/* kdalab_simd_chunk_bwd_f32 / _f64 (lib/kdalab_simd.h documents them). */
static kdalab_status E_FN(entry_chunk_bwd)(const kdalab_dims *dims, kdalab_mechanism mech,
                                           real scale, const real *q, const real *k,
                                           const real *v, const real *g, const real *beta,
                                           const real *h0, const real *d_o, const real *dht,
                                           real *dq, real *dk, real *dv, real *dg,
                                           real *dbeta, real *dh0,
                                           const kdalab_chunk_opts *opts)
{
    const E_TABLE *tab = E_TABLE_ACTIVE();
    kdalab_counts cnt;
    kdalab_chunk_opts op;
    kdalab_status s =
        E_FN(kdalab_check_bwd)(dims, mech, scale, q, k, v, g, beta, h0, d_o, dht, &cnt);
    const kdalab_chunk_opts dflt = kdalab_simd_chunk_opts_default();
    if (s == KDALAB_OK)
        s = kdalab_check_bwd_chunk_opts(opts ? opts : &dflt, &op);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1);
    const size_t c = op.subchunk < C ? op.subchunk : C, nch = (T + C - 1) / C;
    const size_t gw = kdalab_mechanism_g_width(mech, K), ntasks = B * H;
    /* one workspace per thread, the chunk states included, before anything is written */
    /* bwd_work_floats <= (nch + 3) K V + 64 (C (C + K + V) + K + 64), every step checked
     * (K V and K + V fit: kdalab_count_dims; C <= max(T, 1)) */
    size_t states, rest, elems, bytes; /* bytes: the bound, checked; elems: the size */
    if (!kdalab_mul_size(nch + 3, K * V, &states) || !kdalab_mul_size(C, C + K + V, &rest) ||
        rest > SIZE_MAX - K - 64 || !kdalab_mul_size(rest + K + 64, 64, &rest) ||
        states > SIZE_MAX - rest || !kdalab_mul_size(states + rest, sizeof(real), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "%zu chunk states of %zu x %zu overflow the workspace", nch + 1, K,
                           V);
    elems = tab->bwd_work_floats(C, c, K, V, nch);
    int nth = omp_get_max_threads();
    if ((size_t)nth > ntasks)
        nth = (int)ntasks; /* 0 tasks: no workspace */
    void **work;
    s = kdalab__simd_work_alloc(nth, elems * sizeof(real), &work);
    if (s != KDALAB_OK)
        return s;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
    for (size_t task = 0; task < ntasks; task++) {
        size_t b = task / H, h = task % H;
        size_t row0 = b * T * H + h, bh = b * H + h; /* (b, t = 0, h) */
        E_ARGS a = {
            .mech = mech, .T = T, .K = K, .V = V, .v0 = 0, .v1 = V, .nh = 1,
            .chunk = C, .subchunk = c, .scale = scale,
            .q = q ? q + row0 * K : NULL, .k = k ? k + row0 * K : NULL,
            .v = v ? v + row0 * V : NULL, .g = gw && g ? g + row0 * gw : NULL,
            .beta = kdalab_mechanism_has_delta(mech) && beta ? beta + row0 : NULL,
            .h0 = h0 ? h0 + bh * K * V : NULL,
            .ld_qk = H * K, .ld_v = H * V, .ld_g = H * gw, .ld_b = H,
        };
        E_BWD_OUT bo = {
            .d_o = d_o ? d_o + row0 * V : NULL, .dht = dht ? dht + bh * K * V : NULL,
            .dq = dq ? dq + row0 * K : NULL, .dk = dk ? dk + row0 * K : NULL,
            .dv = dv ? dv + row0 * V : NULL, .dg = dg && gw ? dg + row0 * gw : NULL,
            .dbeta = dbeta && kdalab_mechanism_has_delta(mech) ? dbeta + row0 : NULL,
            .dh0 = dh0 ? dh0 + bh * K * V : NULL,
        };
        tab->chunk_head_bwd(&a, &bo, work[omp_get_thread_num()]);
    }
    kdalab__simd_work_free(nth, work);
    return E_FN(kdalab_check_grads)("SIMD chunkwise backward", dims, mech, dq, dk, dv, dg,
                                    dbeta, dh0);
}
