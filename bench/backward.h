/*
 * bench/backward.h — bench_simd's backward table (included by bench/simd.c,
 * after its timing functions): the SIMD chunkwise backward
 * (kdalab_simd_chunk_bwd_f64 / _f32) of each mechanism at each level this
 * CPU runs, validated against the float64 reference backward
 * (kdalab_chunk_bwd_f64) before it is timed, beside the float64 SIMD
 * forward and the reference backward on the same problem. ggml has no
 * backward op: there is no peer row.
 */

/* The backward's multiply-adds per chunk of n positions (2 flops each), as
 * lib/simd/chunk_bwd.h does them: the forward sweep (steps 1-4 and 7), the
 * recomputation (steps 1-4), and the products of the gradients; again (1)
 * the forward of a chunk outside the last checkpoint group and not last in
 * its group, which runs once more to rebuild its group's states (only when
 * the states are checkpointed). */
static double bwd_flops_one(kdalab_mechanism m, double n, double c, double K, double V,
                            int again)
{
    const int delta = kdalab_mechanism_has_delta(m);
    /* steps 1-4 of the per-channel path (every mechanism runs KDA's) */
    double ns = ceil(n / c), pairs_off = ns * (ns - 1) / 2;
    double scores = pairs_off * (2 * c) * c * K * 2 + ns * (c * (c - 1) / 2) * K * 6 +
                    n * K * 14;
    double s14 = scores + (delta ? n * n * n / 3 + n * n * (K + V) + 2 * n * K * V : 0);
    /* the sweep and its state update (twice outside the last group), the recomputation */
    double f = (again ? 3 : 2) * s14 + (again ? 2 : 1) * 2 * n * K * V;
    double m2 = delta ? 2 * n : n;      /* rows stacked in [dO ; dVn] */
    f += 2 * n * K * V * 2;             /* dVn = kd dS, dkd = Vn dS^T */
    f += 2 * n * n * V * 2;             /* dAqk = dO Vn^T, dVn += Aqk^T dO */
    f += 2 * m2 * K * V * 2;            /* [dqg, dWn] = S [dO ; dVn]^T, dS += [qg ; Wn]^T [...] */
    if (delta)
        f += 2 * n * n * (V + K) * 2;   /* dRv, dRk (Minv^T), dAkk = dRv U^T + dRk Wn^T */
    /* the decayed Grams' backward (two with delta): off-diagonal blocks as
     * two products each, diagonal pairs 8 flops per channel */
    f += (delta ? 2 : 1) * (pairs_off * 2 * c * c * K * 2 * 2 + ns * (c * (c - 1) / 2) * K * 8);
    f += n * K * 30;                    /* per-channel rows: factors, dq, dk, dg */
    return f;
}

/* elem: bytes per element (8 float64, 4 float32), for the choice between
 * keeping every state and checkpointing; 0: checkpointed whatever fits. */
static double bwd_flops(kdalab_mechanism m, const kdalab_dims *d, size_t C, size_t c,
                        size_t elem)
{
    double f = 0;
    size_t nch = (d->T + C - 1) / C, G = 1;
    /* the groups' size, as lib/simd/chunk_bwd_scores.h's bwd_group with the
     * default budget (kdalab_chunk_opts.bwd_state_bytes 0: 128 MiB) */
    if (elem && (nch + 2) * d->K * d->V * elem <= ((size_t)128 << 20))
        G = nch ? nch : 1; /* every state kept: one group, nothing again */
    while (G * G < nch)
        G++;
    const size_t last = nch ? (nch - 1) / G * G : 0; /* the last group's first chunk */
    for (size_t t0 = 0; t0 < d->T; t0 += C) {
        size_t n = t0 + C <= d->T ? C : d->T - t0;
        f += bwd_flops_one(m, (double)n, (double)(c < n ? c : n), (double)d->K, (double)d->V,
                           t0 / C < last && t0 / C % G != G - 1);
    }
    return f * (double)(d->B * d->H);
}

/* One backward call of the given kind on w (float64 inputs q, k, v, g, beta,
 * h0, d_o) into gr[6] (dq, dk, dv, dg, dbeta, dh0, float64): 0 the
 * reference, 1 the SIMD path in float64, 2 the SIMD path in float32 (inputs
 * rounded, gradients widened; f32 holds float32 copies of w and of gr), 3
 * the SIMD path in float64 with the chunk states checkpointed
 * (kdalab_chunk_opts.bwd_state_bytes = 1). The SIMD calls go through
 * kdalab_run_bwd_f64 / _f32 with a workspace kept between calls, as a
 * repeated caller (the Python and PyTorch doors) has: its pages are mapped
 * once, and kinds 1 and 2 keep every chunk state. */
typedef struct {
    const kdalab_dims *d;
    kdalab_mechanism m;
    double *w[7];
    float *wf[7];
    double *gr[6];
    float *gf[6];
    size_t n[6];
    kdalab_workspace *work;
} bwd_call;

static kdalab_status bwd_run(bwd_call *c, int kind)
{
    const double s = kdalab_default_scale(c->d->K);
    kdalab_chunk_opts op = bench_opts;
    if (kind == 3)
        op.bwd_state_bytes = 1; /* too small for any state: checkpointed */
    double **w = c->w, **g = c->gr;
    if (kind == 0)
        return kdalab_chunk_bwd_f64(c->d, c->m, s, w[0], w[1], w[2], w[3], w[4], w[5], w[6],
                                    NULL, g[0], g[1], g[2], g[3], g[4], g[5], &op);
    const kdalab_call call = {.dims = *c->d, .HV = c->d->H, .mech = c->m, .scale = s,
                              .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD, .opts = &op,
                              .work = c->work};
    if (kind == 1 || kind == 3) {
        const kdalab_tensors_f64 x = {.q = w[0], .k = w[1], .v = w[2], .g = w[3], .beta = w[4],
                                      .h0 = w[5], .d_o = w[6], .dq = g[0], .dk = g[1],
                                      .dv = g[2], .dg = g[3], .dbeta = g[4], .dh0 = g[5]};
        return kdalab_run_bwd_f64(&call, &x);
    }
    float **xf = c->wf, **y = c->gf;
    const kdalab_tensors_f32 x = {.q = xf[0], .k = xf[1], .v = xf[2], .g = xf[3], .beta = xf[4],
                                  .h0 = xf[5], .d_o = xf[6], .dq = y[0], .dk = y[1],
                                  .dv = y[2], .dg = y[3], .dbeta = y[4], .dh0 = y[5]};
    kdalab_status st = kdalab_run_bwd_f32(&call, &x);
    for (int a = 0; a < 6; a++)
        for (size_t i = 0; i < c->n[a]; i++)
            g[a][i] = y[a][i];
    return st;
}

/* The largest error over the six gradients of got against want, each
 * relative to want's max magnitude. */
static double bwd_err(double *const got[6], double *const want[6], const size_t n[6])
{
    double worst = 0;
    for (int a = 0; a < 6; a++) {
        double e = rel_err(NULL, got[a], want[a], n[a]);
        worst = e > worst || !isfinite(e) ? e : worst;
    }
    return worst;
}

/* Median seconds of reps calls of one kind. */
static double bwd_time(bwd_call *c, int kind, int reps)
{
    double ts[32];
    reps = reps > 32 ? 32 : reps;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        bwd_run(c, kind);
        ts[r] = now() - t0;
    }
    gsl_sort(ts, 1, (size_t)reps);
    return gsl_stats_median_from_sorted_data(ts, 1, (size_t)reps);
}

/* The backward table on problem p (its float32 inputs; d_o from rng). */
static int backward_table(problem *p, gsl_rng *rng, int reps, int quick, double peakN)
{
    const kdalab_dims *d = &p->d;
    const size_t nqk = d->B * d->T * d->H * d->K, nv = d->B * d->T * d->H * d->V;
    const size_t nb = d->B * d->T * d->H, ns = d->B * d->H * d->K * d->V;
    const double htok = (double)nb;
    const kdalab_simd_level levels[] = {KDALAB_SIMD_SCALAR, KDALAB_SIMD_AVX2,
                                        KDALAB_SIMD_AVX512};
    int invalid = 0;
    bwd_call c = {.d = d, .n = {nqk, nqk, nv, nqk, nb, ns}, .work = kdalab_workspace_new()};
    problem_widen(p, c.w); /* w[0..5] */
    c.w[6] = malloc(nv * sizeof(double));
    double *ref[6];
    for (int a = 0; a < 6; a++) {
        c.gr[a] = malloc(c.n[a] * sizeof(double));
        ref[a] = malloc(c.n[a] * sizeof(double));
        c.gf[a] = malloc(c.n[a] * sizeof(float));
    }
    size_t nin[7] = {nqk, nqk, nv, nqk, nb, ns, nv};
    for (size_t i = 0; i < nv; i++)
        c.w[6][i] = gsl_ran_gaussian(rng, 1.0);
    for (int a = 0; a < 7; a++) {
        c.wf[a] = malloc(nin[a] * sizeof(float));
        for (size_t i = 0; i < nin[a]; i++)
            c.wf[a][i] = (float)c.w[a][i];
    }
    bench_opts = kdalab_simd_chunk_opts_default();
    const size_t C = bench_opts.chunk;
    printf("#\n# the chunkwise backward, C = %zu (kdalab_run_bwd_f64 / _f32 on the SIMD path, "
           "a workspace kept between calls: every chunk state kept; 'f64 ckpt': KDA with the "
           "states checkpointed, bwd_state_bytes 1; ggml has no backward op: no peer row); "
           "err: max over dq, dk, dv, dg, dbeta, dh0 of |grad - ref| / "
           "max |ref| against kdalab_chunk_bwd_f64 (tolerance: float64 1e-12, float32 1e-5); "
           "'own' counts the backward's multiply-adds (bench/backward.h), 'of peak' is of the "
           "fp32 FMA peak (float64 rows: of half of it); x fwd: its "
           "head-tok/s over the float64 SIMD forward's at the same level; x ref: over the "
           "reference backward's (float64, 1 thread, the faster of 2 calls)\n", C);
    printf("%-17s %-9s %-7s %11s %9s %8s %7s %7s %7s  %s\n", "mechanism", "backward", "level",
           "head-tok/s", "ms", "GF/s own", "of peak", "x fwd", "x ref", "err");
    for (size_t mi = 0; mi < 4; mi++) {
        c.m = mechs[mi];
        /* what this mechanism's backward writes: dg [B,T,H,K] (KDA), [B,T,H]
         * (Gated DeltaNet) or nothing; dbeta for the delta rules only. The
         * rest of each buffer is never compared. */
        c.n[3] = kdalab_mechanism_g_width(c.m, d->K) * nb;
        c.n[4] = kdalab_mechanism_has_delta(c.m) ? nb : 0;
        const double fl64 = bwd_flops(c.m, d, C, 16, 8), fl32 = bwd_flops(c.m, d, C, 16, 4);
        const double flck = bwd_flops(c.m, d, C, 16, 0);
        /* the reference backward: the faster of two calls (one with --quick;
         * it is the slow one, and one call alone moved by 30 % between runs) */
        double t_ref = INFINITY;
        kdalab_status s = KDALAB_OK;
        for (int r = 0; r < (quick ? 1 : 2) && s == KDALAB_OK; r++) {
            double t0 = now();
            s = bwd_run(&c, 0);
            t_ref = fmin(t_ref, now() - t0);
        }
        if (s != KDALAB_OK) {
            printf("%-17s reference backward failed: %s\n", kdalab_mechanism_name(c.m),
                   kdalab_last_error());
            invalid = 1;
            continue;
        }
        for (int a = 0; a < 6; a++)
            memcpy(ref[a], c.gr[a], c.n[a] * sizeof(double));
        printf("%-17s %-9s %-7s %11.0f %9.1f %8.2f %7s %7s %7s  kdalab_chunk_bwd_f64, 1 "
               "thread, best of %d\n",
               kdalab_mechanism_name(c.m), "f64 ref", "ref", htok / t_ref, 1e3 * t_ref,
               fl64 / t_ref * 1e-9, "", "", "", quick ? 1 : 2);
        for (size_t li = 0; li < 3; li++) {
            if (!kdalab_simd_level_available(levels[li]))
                continue;
            kdalab_simd_set_level(levels[li]);
            double ferr, t_fwd = time_chunk_f64(p, c.m, quick ? 2 : 5, &ferr);
            bench_opts = kdalab_simd_chunk_opts_default();
            /* KDA also checkpointed (kind 3), against its kept states in the same run */
            for (int kind = 1; kind <= (c.m == KDALAB_KDA ? 3 : 2); kind++) {
                s = bwd_run(&c, kind); /* validation, and the warm-up */
                double err = s == KDALAB_OK ? bwd_err(c.gr, ref, c.n) : INFINITY;
                double tol = kind == 2 ? 1e-5 : 1e-12;
                const char *form = kind == 1 ? "f64 simd" : kind == 2 ? "f32 simd" : "f64 ckpt";
                if (!(err <= tol)) {
                    printf("%-17s %-9s %-7s INVALID: error %.3g against kdalab_chunk_bwd_f64 "
                           "> %g; not timed\n",
                           kdalab_mechanism_name(c.m), form,
                           kdalab_simd_level_name(levels[li]), err, tol);
                    invalid = 1;
                    continue;
                }
                double t = bwd_time(&c, kind, quick ? 2 : reps);
                char xf[16] = "";
                if (kind != 2 && t_fwd > 0)
                    snprintf(xf, sizeof xf, "%.2f", t_fwd / t);
                const double fl = kind == 1 ? fl64 : kind == 2 ? fl32 : flck;
                printf("%-17s %-9s %-7s %11.0f %9.1f %8.1f %6.1f%% %7s %7.1f  %.1e\n",
                       kdalab_mechanism_name(c.m), form, kdalab_simd_level_name(levels[li]),
                       htok / t, 1e3 * t, fl / t * 1e-9,
                       peakN > 0 ? 100 * fl / t * 1e-9 / (kind != 2 ? peakN / 2 : peakN) : 0,
                       xf, t_ref / t, err);
            }
        }
        kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    }
    for (int a = 0; a < 7; a++) {
        free(c.w[a]);
        free(c.wf[a]);
    }
    for (int a = 0; a < 6; a++) {
        free(c.gr[a]);
        free(ref[a]);
        free(c.gf[a]);
    }
    kdalab_workspace_free(c.work);
    return invalid;
}
