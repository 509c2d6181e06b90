/*
 * bench/dplr.h — bench_simd's rows for the DPLR boundary (included by
 * bench/simd.c, after its timing functions): the SIMD path's chunkwise
 * forward of the general transition S_t = (Diag(exp g_t) + b_t a_t^T)
 * S_{t-1} + k_t v_t^T (lib/simd/dplr_scores.h, dplr_chunk in
 * chunk_kernels.h) in float32 at C = 16 and 64 and in float64 at C = 16, at
 * each level this CPU runs, on the table's problem with RWKV-7's
 * a = -kk, b = kk * alpha (kk k's unit rows, alpha ~ U(0, 1)); each
 * validated against the float64 reference before it is timed. Then, for
 * scale, the reference's float32 chunkwise form: fla has no CPU kernel for
 * this row and ggml no op, so the reference is the nearest CPU alternative
 * that runs in the same process. Then its chunkwise backward in float64
 * (lib/simd/dplr_bwd.h) at each level against the reference backward, on
 * the same problem.
 */

/* The DPLR chunk's operations per chunk of n positions (2 flops a
 * multiply-add, 1 a multiply), as the SIMD path does them. */
static double dplr_flops_one(double n, double c, double K, double V)
{
    double ns = ceil(n / c), pairs_off = ns * (ns - 1) / 2;
    double f = 0;
    f += pairs_off * 2 * (2 * c) * c * K * 2;    /* [a'F ; qF] d (bB)^T and (kB)^T       */
    f += (pairs_off - (ns - 1)) * 2 * c * K;     /* [a'F ; qF] * d_IJ (not next to I)    */
    f += ns * (c * (c + 1) / 2) * K * 11;        /* pairs: P*ex, b P, k P, 4 FMAs         */
    f += n * K * 15;                             /* factor rows: F, gamma, qF, a'F, qg,
                                                    ah, bB, kB, dec, kd, bd, B            */
    f += n * n * n / 3;                          /* (I - A_ab)^-1                         */
    f += 2 * n * K * V + n * n * V;              /* R = A^ S + A_ak V                     */
    f += n * n * V;                              /* U = T R                               */
    f += 2 * n * K * V + 2 * n * n * V;          /* O = qg S + A_qb U + A_qk V            */
    f += 4 * n * K * V + K * V;                  /* S = gl S + (kd)^T V + (bd)^T U        */
    return f;
}

static double dplr_flops(const kdalab_dims *d, size_t C, size_t c)
{
    double f = 0;
    for (size_t t0 = 0; t0 < d->T; t0 += C) {
        size_t n = t0 + C <= d->T ? C : d->T - t0;
        f += dplr_flops_one((double)n, (double)(c < n ? c : n), (double)d->K, (double)d->V);
    }
    return f * (double)(d->B * d->H);
}

/* RWKV-7's a = -kk, b = kk * alpha for problem p (kk: p's k rows, unit). */
static void dplr_ab(const problem *p, gsl_rng *rng, float **a, float **b)
{
    const size_t n = p->d.B * p->d.T * p->d.H * p->d.K;
    *a = falloc(n);
    *b = falloc(n);
    for (size_t i = 0; i < n; i++) {
        (*a)[i] = -p->k[i];
        (*b)[i] = p->k[i] * (float)gsl_rng_uniform(rng);
    }
}

/* One chunkwise DPLR call on p (a, b): float32 (o32 non-NULL) or float64
 * (the widened inputs w[0..5] = q, k, v, g, -, h0 and wa, wb), impl, C. */
static kdalab_status dplr_call(const problem *p, kdalab_impl impl, size_t C, const float *a,
                               const float *b, float *o32, double *const w[6], const double *wa,
                               const double *wb, double *o64, double *ht64)
{
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = C;
    const kdalab_call c = {.dims = p->d, .HV = p->d.H, .mech = KDALAB_DPLR,
                           .scale = kdalab_default_scale(p->d.K), .form = KDALAB_FORM_CHUNK,
                           .impl = impl, .opts = &op};
    if (o32) {
        const kdalab_tensors_f32 x = {.q = p->q, .k = p->k, .v = p->v, .g = p->g, .a = a,
                                      .b = b, .h0 = p->h0, .o = o32, .ht = p->ht};
        return kdalab_run_f32(&c, &x, NULL);
    }
    const kdalab_tensors_f64 x = {.q = w[0], .k = w[1], .v = w[2], .g = w[3], .a = wa,
                                  .b = wb, .h0 = w[5], .o = o64, .ht = ht64};
    return kdalab_run_f64(&c, &x, NULL);
}

/* The float64 chunkwise backward of the DPLR call on p (widened inputs w,
 * wa, wb; d_o ~ U(-0.5, 0.5) from a fixed sequence): the reference's once,
 * then the SIMD path's at each level, validated against it (1e-12) and
 * timed (median of reps), with its ratio to the float64 forward at the same
 * level (t_fwd64, 0: not measured) and to the reference. Returns 1 when a
 * level disagreed. */
static int dplr_bwd_rows(const problem *p, double *const w[6], const double *wa,
                         const double *wb, int reps, int quick, const double t_fwd64[3])
{
    const kdalab_dims *d = &p->d;
    const size_t nqk = d->B * d->T * d->H * d->K, nv = d->B * d->T * d->H * d->V;
    const size_t ns = d->B * d->H * d->K * d->V, n[7] = {nqk, nqk, nv, nqk, nqk, nqk, ns};
    const double htok = (double)(d->B * d->T * d->H);
    double *d_o = malloc(nv * sizeof *d_o), *g[7], *ref[7];
    if (!d_o)
        exit(1);
    for (size_t i = 0; i < nv; i++)
        d_o[i] = (double)((i * 2654435761u) % 1000) / 1000.0 - 0.5;
    for (int i = 0; i < 7; i++) {
        g[i] = malloc(n[i] * sizeof(double));
        ref[i] = malloc(n[i] * sizeof(double));
        if (!g[i] || !ref[i])
            exit(1);
    }
    kdalab_chunk_opts op = kdalab_simd_chunk_opts_default();
    kdalab_call c = {.dims = *d, .HV = d->H, .mech = KDALAB_DPLR,
                     .scale = kdalab_default_scale(d->K), .form = KDALAB_FORM_CHUNK,
                     .impl = KDALAB_IMPL_REFERENCE, .opts = &op};
    kdalab_tensors_f64 x = {.q = w[0], .k = w[1], .v = w[2], .g = w[3], .a = wa, .b = wb,
                            .h0 = w[5], .d_o = d_o, .dq = ref[0], .dk = ref[1], .dv = ref[2],
                            .dg = ref[3], .da = ref[4], .db = ref[5], .dh0 = ref[6]};
    double t0 = now();
    if (kdalab_run_bwd_f64(&c, &x) != KDALAB_OK) {
        fprintf(stderr, "bench_simd: dplr reference backward: %s\n", kdalab_last_error());
        exit(1);
    }
    const double t_ref = now() - t0;
    printf("#\n# the DPLR boundary's float64 chunkwise backward (x fwd: the float64 forward's "
           "time over the backward's; x ref: the reference backward's time over it)\n");
    printf("%-17s %-9s %-7s %11s %9s %8s %7s %7s %7s  %s\n", "mechanism", "backward", "level",
           "head-tok/s", "ms", "", "", "x fwd", "x ref", "err");
    printf("%-17s %-9s %-7s %11.0f %9.1f %8s %7s %7s %7s  the reference's chunkwise backward, "
           "float64, C = %zu, 1 call\n",
           "dplr", "f64 ref", "ref", htok / t_ref, 1e3 * t_ref, "", "", "", "", op.chunk);
    x.dq = g[0], x.dk = g[1], x.dv = g[2], x.dg = g[3], x.da = g[4], x.db = g[5], x.dh0 = g[6];
    c.impl = KDALAB_IMPL_SIMD;
    const kdalab_simd_level levels[] = {KDALAB_SIMD_SCALAR, KDALAB_SIMD_AVX2,
                                        KDALAB_SIMD_AVX512};
    int invalid = 0;
    for (size_t li = 0; li < 3; li++) {
        if (!kdalab_simd_level_available(levels[li]))
            continue;
        kdalab_simd_set_level(levels[li]);
        double err = kdalab_run_bwd_f64(&c, &x) == KDALAB_OK ? 0 : INFINITY;
        for (int i = 0; i < 7; i++) { /* a NaN error counts (fmax would drop it) */
            double e = rel_err(NULL, g[i], ref[i], n[i]);
            err = e > err || !isfinite(e) ? e : err;
        }
        if (!(err <= 1e-12)) {
            printf("%-17s %-9s %-7s INVALID: error %.3g against the reference backward > "
                   "1e-12; not timed\n", "dplr", "f64 simd", kdalab_simd_level_name(levels[li]),
                   err);
            invalid = 1;
            continue;
        }
        double ts[32];
        const int r_n = quick ? 2 : (reps < 5 ? reps : 5);
        for (int r = 0; r < r_n; r++) {
            t0 = now();
            kdalab_run_bwd_f64(&c, &x);
            ts[r] = now() - t0;
        }
        gsl_sort(ts, 1, (size_t)r_n);
        const double t = gsl_stats_median_from_sorted_data(ts, 1, (size_t)r_n);
        char xf[16] = "";
        if (t_fwd64[li] > 0)
            snprintf(xf, sizeof xf, "%.2f", t_fwd64[li] / t);
        printf("%-17s %-9s %-7s %11.0f %9.1f %8s %7s %7s %7.1f  err %.1e; x fwd: float64 "
               "forward time / backward time (C = 16)\n",
               "dplr", "f64 simd", kdalab_simd_level_name(levels[li]), htok / t, 1e3 * t, "",
               "", xf, t_ref / t, err);
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    for (int i = 0; i < 7; i++)
        free(g[i]), free(ref[i]);
    free(d_o);
    return invalid;
}

/* The DPLR rows of the forward table on the table's problem p; returns 1
 * when a kernel disagreed with the float64 reference (its row says
 * INVALID, untimed). KDA's float32 chunk16 time at the widest level
 * (index widest of scalar, avx2, avx512; kda_t, 0: not measured) gives the
 * row there its ratio to it. */
static int dplr_rows(problem *p, gsl_rng *rng, int reps, int quick, int widest, double peakN,
                     double peak1, double kda_t)
{
    const kdalab_dims *d = &p->d;
    const size_t nv = d->B * d->T * d->H * d->V, ns = d->B * d->H * d->K * d->V;
    const size_t nqk = d->B * d->T * d->H * d->K;
    const double htok = (double)(d->B * d->T * d->H);
    float *a, *b;
    dplr_ab(p, rng, &a, &b);
    double *w[6], *wa = malloc(nqk * sizeof *wa), *wb = malloc(nqk * sizeof *wb);
    double *ref = malloc(nv * sizeof *ref), *o64 = malloc(nv * sizeof *o64);
    double *ht64 = malloc(ns * sizeof *ht64);
    if (!wa || !wb || !ref || !o64 || !ht64)
        exit(1);
    problem_widen(p, w);
    for (size_t i = 0; i < nqk; i++)
        wa[i] = a[i], wb[i] = b[i];
    const kdalab_simd_level levels[] = {KDALAB_SIMD_SCALAR, KDALAB_SIMD_AVX2,
                                        KDALAB_SIMD_AVX512};
    int invalid = 0;
    double t_fwd64[3] = {0}; /* the float64 forward's time at each level */
    printf("#\n# the DPLR boundary's chunkwise forward on the table's problem, RWKV-7's a, b "
           "(bench/dplr.h); 'own' counts its four decayed products, solve and state products\n");
    printf("%-17s %-9s %-7s %11s %9s %8s %8s %7s %5s %11s  %s\n", "mechanism", "form", "level",
           "head-tok/s", "ms", "GF/s own", "GF/s 7KV", "of peak", "", "", "[min..max] ms");
    reps = reps > 32 ? 32 : reps;
    for (int f64 = 0; f64 <= 1; f64++) {
        const size_t chunks[] = {16, 64};
        for (size_t ci = 0; ci < (f64 ? 1u : 2u); ci++) {
            const size_t C = chunks[ci];
            /* the float64 reference at the same chunk size (the oracle's answer) */
            if (dplr_call(p, KDALAB_IMPL_REFERENCE, C, a, b, NULL, w, wa, wb, ref, ht64) !=
                KDALAB_OK) {
                fprintf(stderr, "bench_simd: dplr reference: %s\n", kdalab_last_error());
                exit(1);
            }
            const double fl = dplr_flops(d, C, 16);
            char form[16];
            snprintf(form, sizeof form, "%s%zu", f64 ? "f64ch" : "chunk", C);
            for (size_t li = 0; li < 3; li++) {
                if (!kdalab_simd_level_available(levels[li]) ||
                    (levels[li] == KDALAB_SIMD_SCALAR && ci > 0))
                    continue;
                kdalab_simd_set_level(levels[li]);
                const char *lv = kdalab_simd_level_name(levels[li]);
                kdalab_status s = dplr_call(p, KDALAB_IMPL_SIMD, C, a, b, f64 ? NULL : p->o,
                                            w, wa, wb, o64, ht64); /* also the warm-up */
                double err = s != KDALAB_OK ? INFINITY : rel_err(f64 ? NULL : p->o, o64, ref, nv);
                const double tol = f64 ? 1e-12 : VALID_TOL;
                if (!(err <= tol)) {
                    printf("%-17s %-9s %-7s INVALID: error %.3g against the float64 "
                           "reference > %g; not timed\n", "dplr", form, lv, err, tol);
                    invalid = 1;
                    continue;
                }
                double ts[32];
                for (int r = 0; r < reps; r++) {
                    double t0 = now();
                    dplr_call(p, KDALAB_IMPL_SIMD, C, a, b, f64 ? NULL : p->o, w, wa, wb, o64,
                              ht64);
                    ts[r] = now() - t0;
                }
                gsl_sort(ts, 1, (size_t)reps);
                const double t = gsl_stats_median_from_sorted_data(ts, 1, (size_t)reps);
                if (f64)
                    t_fwd64[li] = t;
                char share[16] = ""; /* of the float32 peak: float32 rows only */
                if (!f64 && peakN > 0)
                    snprintf(share, sizeof share, "%.1f%%", 100 * fl / t * 1e-9 / peakN);
                printf("%-17s %-9s %-7s %11.0f %9.2f %8.1f %8.1f %7s %5s %11s  [%.2f..%.2f] "
                       " err %.1e%s",
                       "dplr", form, lv, htok / t, 1e3 * t, fl / t * 1e-9,
                       7.0 * d->K * d->V * htok / t * 1e-9, share, "", "", 1e3 * ts[0],
                       1e3 * ts[reps - 1], err, f64 ? ", float64" : "");
                if (kda_t > 0 && !f64 && C == 16 && (int)li == widest)
                    printf("; %.2fx KDA's chunk16 time", t / kda_t);
                printf("\n");
            }
        }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    /* for scale: the reference's float32 chunkwise form, C = 64, T = 1024 */
    problem pr;
    problem_make(&pr, rng, 1, quick ? 256 : 1024, d->H, d->K, d->V);
    float *ra, *rb;
    dplr_ab(&pr, rng, &ra, &rb);
    double t = 1e300;
    for (int r = 0; r < (quick ? 2 : 5); r++) {
        const double t0 = now();
        if (dplr_call(&pr, KDALAB_IMPL_REFERENCE, 64, ra, rb, pr.o, w, NULL, NULL, NULL,
                      NULL) != KDALAB_OK) {
            fprintf(stderr, "bench_simd: dplr: %s\n", kdalab_last_error());
            exit(1);
        }
        t = fmin(t, now() - t0);
    }
    /* its own count: four decayed C x C products, one solve, the state's
     * products: 4CK + 4CV + 8KV a head-token */
    const double ht = (double)(pr.d.T * d->H);
    const double fl = ht * (4.0 * 64 * d->K + 4.0 * 64 * d->V + 8.0 * d->K * d->V);
    printf("%-17s %-9s %-7s %11.0f %9.2f %8.1f %8s %6.1f%% %5s %11s  the reference's chunkwise "
           "form (the nearest CPU alternative), T=%zu, best of %d\n",
           "dplr", "chunk64", "ref", ht / t, 1e3 * t, fl / t * 1e-9, "",
           peak1 > 0 ? 100 * fl / t * 1e-9 / peak1 : 0, "", "", pr.d.T, quick ? 2 : 5);
    free(ra);
    free(rb);
    problem_free(&pr);
    invalid |= dplr_bwd_rows(p, w, wa, wb, reps, quick, t_fwd64);
    for (int i = 0; i < 6; i++)
        free(w[i]);
    free(a); free(b); free(wa); free(wb); free(ref); free(o64); free(ht64);
    return invalid;
}
