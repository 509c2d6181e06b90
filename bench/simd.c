/*
 * bench/simd.c — speed of the optimized float32 path (lib/simd/), not a test.
 *
 * Prints, for each mechanism x form x dispatch level this CPU can run:
 *   head-tokens/s;
 *   GFLOP/s counting the algorithm's own flops (chunk_flops() below: the
 *     multiply-adds of steps 1-7 as this path performs them, 2 flops each;
 *     exp not counted);
 *   GFLOP/s counting 7*K*V flops per head-token (the recurrent form's count,
 *     the one ggml's op is measured by);
 *   the fraction of this machine's fp32 FMA peak, measured in the same run by
 *     a register-resident FMA loop, per core and with all threads.
 * With a peer, kdalab and the peer alternating in rounds (alternate()).
 * Then the DPLR boundary's chunkwise forward (bench/dplr.h).
 * Then the chunkwise backward of each mechanism in float64 and float32
 * (bench/backward.h), against the float64 SIMD forward and the reference
 * backward on the same problem.
 * Then the decode step (one token, one head, K = V = 128, one thread) in µs,
 * with S on a cache line ("step") and 16 bytes past one ("step+16B"),
 * and the chunkwise KDA time against T from 1k to 64k with its log-log slope
 * (GSL least squares).
 *
 * The peer: when KDALAB_PEER_GGML names an executable (bin/peer_ggml, built
 * by `make peer-ggml` from bench/peer/ggml_peer.c against a ggml build), ggml's
 * fused CPU op ggml_gated_delta_net is run on the same problem, same threads,
 * right after kdalab's float32 rows for KDA and Gated DeltaNet (validated by
 * the peer against kdalab_recurrent_f64 before it is timed), and its decode
 * step after kdalab's; each such row gives kdalab's ratio to it. Without the
 * variable the benchmark says it has no peer.
 *
 * Reference shape: B = 1, T = 4096, H = 4, K = V = 128, 2 threads
 * (OMP_NUM_THREADS overrides the thread count). Every time is the median of
 * several repetitions; the machine is shared, so the spread is printed too.
 *
 *   bin/bench_simd [--quick] [--table | --backward | --sweep | --dplr]
 *     --quick: fewer repetitions, T sweep to 16k; --table / --backward / --sweep:
 *     only that part (the table with the DPLR rows); --dplr: only the DPLR rows
 */
#include <getopt.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "kdalab.h"
#include "problem.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------- */
/* The machine's fp32 FMA peak: 12 independent accumulator chains (enough to   */
/* cover FMA latency x pipes on current x86 cores), no memory traffic.          */
/* ---------------------------------------------------------------------------- */

#define FMA_CHAINS 12

__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long iters, float seed)
{
    __m256 acc[FMA_CHAINS];
    for (int i = 0; i < FMA_CHAINS; i++)
        acc[i] = _mm256_set1_ps(seed + (float)i);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < FMA_CHAINS; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    __m256 s = acc[0];
    for (int i = 1; i < FMA_CHAINS; i++)
        s = _mm256_add_ps(s, acc[i]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

__attribute__((target("avx512f"))) static float fma_loop_avx512(long iters, float seed)
{
    __m512 acc[FMA_CHAINS];
    for (int i = 0; i < FMA_CHAINS; i++)
        acc[i] = _mm512_set1_ps(seed + (float)i);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < FMA_CHAINS; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < FMA_CHAINS; i++)
        s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

static volatile float sink;

#include "floors.h"

/* GFLOP/s of the FMA loop on nth threads (best of 5), widest ISA available. */
static double fma_peak(int nth, int avx512)
{
    const long iters = 20 * 1000 * 1000;
    const double lanes = avx512 ? 16 : 8;
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now();
#pragma omp parallel num_threads(nth)
        {
            float x = avx512 ? fma_loop_avx512(iters, (float)omp_get_thread_num())
                             : fma_loop_avx2(iters, (float)omp_get_thread_num());
#pragma omp critical
            sink += x;
        }
        t[r] = now() - t0;
    }
    gsl_sort(t, 1, 5);
    /* the best of 5: interference from other processes only slows a run down */
    return nth * (double)iters * FMA_CHAINS * lanes * 2 / t[0] * 1e-9;
}

/* ---------------------------------------------------------------------------- */
/* Flop counts                                                                  */
/* ---------------------------------------------------------------------------- */

/* The chunkwise form's multiply-adds per (b, h), as lib/simd/chunk_scores.h
 * and chunk_kernels.h do them: for a chunk of n positions with sub-chunks of
 * c, head dims K, V. */
static double chunk_flops_one(kdalab_mechanism m, double n, double c, double K, double V)
{
    double f = 0;
    const int delta = kdalab_mechanism_has_delta(m);
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(m);
    if (gs == KDALAB_G_PER_KEY) {
        double ns = ceil(n / c), pairs_off = ns * (ns - 1) / 2;
        f += pairs_off * (2 * c) * c * K * 2;       /* off-diagonal blocks [kf;qf] d kb^T */
        f += (pairs_off - (ns - 1)) * 2 * c * K;     /* [kf;qf] * d_IJ (not next to I)    */
        f += ns * (c * (c - 1) / 2) * K * 6;         /* diagonal pairs: P*a, k*P, 2 FMAs  */
        f += n * K * 2;                              /* diagonal q.k                      */
        f += n * K * 12;                             /* decay products, rescaled rows     */
    } else {
        f += n * n * K * 2 * (delta ? 2 : 1); /* full q k^T, k k^T */
    }
    if (delta) {
        f += n * n * n / 3;             /* UT transform (triangular inverse)       */
        f += n * n * (K + V);           /* W = T (gamma k), U = T V (triangular)   */
        f += 2 * n * K * V;             /* V_new = U - W S                         */
    }
    f += 2 * n * K * V + n * n * V;     /* O = s (gamma q) S + A_qk V_new           */
    f += 2 * n * K * V;                 /* S += (kdec k)^T V_new                    */
    if (gs != KDALAB_G_NONE)
        f += K * V;                     /* S *= gamma_n                             */
    return f;
}

static double chunk_flops(kdalab_mechanism m, const kdalab_dims *d, size_t C, size_t c)
{
    double f = 0;
    for (size_t t0 = 0; t0 < d->T; t0 += C) {
        size_t n = t0 + C <= d->T ? C : d->T - t0;
        f += chunk_flops_one(m, (double)n, (double)(c < n ? c : n), (double)d->K,
                             (double)d->V);
    }
    return f * (double)(d->B * d->H);
}

/* The decode step's multiply-adds, as lib/simd/step_kernel.h does them. */
static double step_flops(kdalab_mechanism m, double K, double V)
{
    return (4 + 2 * kdalab_mechanism_has_delta(m) +                /* S += k v^T, o = S^T q; */
            (kdalab_mechanism_g_shape(m) != KDALAB_G_NONE)) * K * V; /* + u = S^T k; + decay */
}

/* ---------------------------------------------------------------------------- */
/* Problems                                                                     */
/* ---------------------------------------------------------------------------- */

typedef kdalab_status (*chunk_fn)(const kdalab_dims *, kdalab_mechanism, float, const float *,
                                  const float *, const float *, const float *, const float *,
                                  const float *, float *, float *, const kdalab_chunk_opts *,
                                  kdalab_report *);

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static kdalab_chunk_opts bench_opts; /* chunk size of the chunkwise runs */
static double last_busy;             /* CPU seconds / wall seconds of the last timing */
static double last_cpu;              /* median CPU seconds (all threads) of the last timing */

/* The problem's inputs widened to float64, w[0..5] = q, k, v, g, beta, h0
 * (malloc'd; free each). */
static void problem_widen(const problem *p, double *w[6])
{
    const kdalab_dims *d = &p->d;
    size_t nqk = d->B * d->T * d->H * d->K, nv = d->B * d->T * d->H * d->V,
           nbth = d->B * d->T * d->H, ns = d->B * d->H * d->K * d->V;
    const float *src[6] = {p->q, p->k, p->v, p->g, p->beta, p->h0};
    size_t n[6] = {nqk, nqk, nv, nqk, nbth, ns};
    for (int a = 0; a < 6; a++) {
        w[a] = malloc(n[a] * sizeof(double));
        if (!w[a])
            exit(1);
        for (size_t i = 0; i < n[a]; i++)
            w[a][i] = src[a][i];
    }
}

/* max |x - ref| / max |ref| over n values (x float32, or x64 float64 when x32
 * is NULL; max |x - ref| when ref is all zero); a non-finite difference
 * makes it non-finite. Every validation below measures by it. */
static double rel_err(const float *x32, const double *x64, const double *ref, size_t n)
{
    double mx = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
        double e = fabs((x32 ? (double)x32[i] : x64[i]) - ref[i]);
        err = e > err || !isfinite(e) ? e : err;
    }
    return err / (mx > 0 ? mx : 1);
}

/*
 * Validate before timing (llm.c's validate_result before benchmark_kernel):
 * the largest |o - o_ref| / max |o_ref| of the SIMD chunkwise form at the
 * level in use against the float64 reference on the same (widened) inputs.
 * o_ref is computed once per mechanism and chunk size (*ref, NULL to start).
 */
static double validate_chunk(problem *p, kdalab_mechanism m, double **ref)
{
    const kdalab_dims *d = &p->d;
    size_t nv = d->B * d->T * d->H * d->V, ns = d->B * d->H * d->K * d->V;
    float scale = (float)kdalab_default_scale(d->K);
    if (!*ref) {
        double *w[6];
        problem_widen(p, w);
        *ref = malloc(nv * sizeof(double));
        double *ht = malloc(ns * sizeof(double));
        if (!*ref || !ht)
            exit(1);
        kdalab_status s = kdalab_chunk_f64(d, m, scale, w[0], w[1], w[2], w[3], w[4], w[5], *ref,
                                           ht, &bench_opts, NULL);
        if (s != KDALAB_OK) {
            fprintf(stderr, "bench_simd: reference: %s\n", kdalab_last_error());
            exit(1);
        }
        for (int a = 0; a < 6; a++)
            free(w[a]);
        free(ht);
    }
    kdalab_status s = kdalab_simd_chunk_f32(d, m, scale, p->q, p->k, p->v, p->g, p->beta, p->h0,
                                            p->o, p->ht, &bench_opts, NULL);
    return s == KDALAB_OK ? rel_err(p->o, NULL, *ref, nv) : INFINITY;
}

/*
 * The float64 SIMD path at the level in use: validated against
 * kdalab_chunk_f64 (tolerance 1e-12: both are float64, only the order of the
 * sums differs), then the median wall time of reps calls. Returns the time,
 * or a negative number when the validation failed (*err says by how much).
 */
static double time_chunk_f64(const problem *p, kdalab_mechanism m, int reps, double *err)
{
    const kdalab_dims *d = &p->d;
    size_t nv = d->B * d->T * d->H * d->V, ns = d->B * d->H * d->K * d->V;
    double *w[6], *o = malloc(nv * sizeof *o), *ref = malloc(nv * sizeof *ref),
                  *ht = malloc(ns * sizeof *ht);
    if (!o || !ref || !ht)
        exit(1);
    problem_widen(p, w);
    double scale = kdalab_default_scale(d->K), ts[32];
    kdalab_status s = kdalab_chunk_f64(d, m, scale, w[0], w[1], w[2], w[3], w[4], w[5], ref, ht,
                                       &bench_opts, NULL);
    s = s == KDALAB_OK ? kdalab_simd_chunk_f64(d, m, scale, w[0], w[1], w[2], w[3], w[4], w[5],
                                               o, ht, &bench_opts, NULL)
                       : s;
    *err = s == KDALAB_OK ? rel_err(NULL, o, ref, nv) : INFINITY;
    double tmed = -1;
    if (*err <= 1e-12) {
        reps = reps > 32 ? 32 : reps;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            kdalab_simd_chunk_f64(d, m, scale, w[0], w[1], w[2], w[3], w[4], w[5], o, ht,
                                  &bench_opts, NULL);
            ts[r] = now() - t0;
        }
        gsl_sort(ts, 1, (size_t)reps);
        tmed = gsl_stats_median_from_sorted_data(ts, 1, (size_t)reps);
    }
    for (int a = 0; a < 6; a++)
        free(w[a]);
    free(o);
    free(ref);
    free(ht);
    return tmed;
}

/* Median seconds of reps runs (and the min, max) of one chunkwise call. */
static double time_chunk(chunk_fn fn, problem *p, kdalab_mechanism m, int reps, double *tmin,
                         double *tmax)
{
    double t[32], c[32], cs[32];
    if (reps > 32)
        reps = 32;
    float scale = (float)kdalab_default_scale(p->d.K);
    for (int r = 0; r < reps; r++) {
        double t0 = now(), c0 = cpu_now();
        kdalab_status s = fn(&p->d, m, scale, p->q, p->k, p->v, p->g, p->beta, p->h0, p->o,
                             p->ht, &bench_opts, NULL);
        t[r] = now() - t0;
        cs[r] = cpu_now() - c0;
        c[r] = cs[r] / t[r];
        if (s != KDALAB_OK) {
            fprintf(stderr, "bench_simd: %s: %s\n", kdalab_strerror(s), kdalab_last_error());
            exit(1);
        }
    }
    gsl_sort(c, 1, (size_t)reps);
    last_busy = gsl_stats_median_from_sorted_data(c, 1, (size_t)reps);
    gsl_sort(cs, 1, (size_t)reps);
    last_cpu = gsl_stats_median_from_sorted_data(cs, 1, (size_t)reps);
    gsl_sort(t, 1, (size_t)reps);
    *tmin = t[0];
    *tmax = t[reps - 1];
    return gsl_stats_median_from_sorted_data(t, 1, (size_t)reps);
}

static double thread_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double last_step_cpu_us; /* median CPU µs per step of the last time_step */

/* Median wall-clock µs of one decode step (one token, one head), 1 thread,
 * with S starting s_off floats past a 64-byte boundary (where malloc puts a
 * 64 KB block depends on the heap's history: 0, 16, 32 or 48 bytes past one;
 * the kernel's loads are cheapest from a cache-line-aligned S). With
 * floor_us, each repetition's steps are followed by as many pairs of
 * floor_passes at floor_level over a state of the same size (bench/floors.h),
 * and *floor_us is their median µs: the floor alternates with the step, so
 * both see the machine in the same state. */
static double time_step(kdalab_mechanism m, size_t K, size_t V, gsl_rng *rng, size_t s_off,
                        int floor_level, double *floor_us)
{
    enum { NTOK = 256, REPS = 9, ROUNDS = 20 };
    problem p;
    problem_make(&p, rng, 1, NTOK, 1, K, V);
    const size_t KV = (K * V + 16 + 15) / 16 * 16, KoV = K > V ? K : V;
    float *Sbuf = aligned_alloc(64, KV * sizeof(float)), *o = falloc(V);
    float *F = aligned_alloc(64, KV * sizeof(float)), *a = falloc(K), *d = falloc(KoV);
    float *u = falloc(V);
    if (!Sbuf || !F) {
        fprintf(stderr, "bench_simd: out of memory (state)\n");
        exit(1);
    }
    float *S = Sbuf + s_off;
    memcpy(S, p.h0, K * V * sizeof *S);
    memcpy(F, p.h0, K * V * sizeof *F);
    for (size_t i = 0; i < K; i++)
        a[i] = 0.999f;
    for (size_t i = 0; i < KoV; i++)
        d[i] = 1e-4f;
    float scale = (float)kdalab_default_scale(K);
    size_t gw = kdalab_mechanism_g_width(m, K);
    double t[REPS], c[REPS], tf[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now(), c0 = thread_cpu_now();
        for (int round = 0; round < ROUNDS; round++)
            for (size_t i = 0; i < NTOK; i++)
                kdalab_simd_step_f32(m, K, V, scale, p.q + i * K, p.k + i * K, p.v + i * V,
                                     gw ? p.g + i * gw : NULL, p.beta[i], S, o);
        t[r] = (now() - t0) / (ROUNDS * NTOK);
        c[r] = (thread_cpu_now() - c0) / (ROUNDS * NTOK);
        if (floor_us) {
            double t1 = now();
            for (int i = 0; i < ROUNDS * NTOK; i++)
                floor_passes(F, K, V, a, d, u, floor_level);
            tf[r] = (now() - t1) / (ROUNDS * NTOK);
        }
    }
    sink += u[0] + F[0];
    if (floor_us) {
        gsl_sort(tf, 1, REPS);
        *floor_us = 1e6 * gsl_stats_median_from_sorted_data(tf, 1, REPS);
    }
    gsl_sort(c, 1, REPS);
    last_step_cpu_us = 1e6 * gsl_stats_median_from_sorted_data(c, 1, REPS);
    gsl_sort(t, 1, REPS);
    free(Sbuf); free(F); free(o); free(a); free(d); free(u);
    problem_free(&p);
    return 1e6 * gsl_stats_median_from_sorted_data(t, 1, REPS);
}

#define VALID_TOL 1e-4 /* float32 over T = 4096: measured ~1e-6; a wrong kernel is O(1) */

/* ---------------------------------------------------------------------------- */
/* The peer: $KDALAB_PEER_GGML (bench/peer/ggml_peer.c), run through popen      */
/* ---------------------------------------------------------------------------- */

static const char *peer_exe; /* NULL: no peer in this run */

/* Run the peer with args; its line "ggml_peer <what> best=B median=M
 * max_rel_err=E" into v[0..2]. 1 when it timed; 0 when it failed, or refused
 * to time (v[2] is then its error, NaN when it gave none). */
static int peer_run(const char *args, const char *what, double v[3])
{
    char cmd[1024], line[512], fmt[128];
    snprintf(cmd, sizeof cmd, "'%s' %s", peer_exe, args);
    snprintf(fmt, sizeof fmt, "ggml_peer %s best=%%lf median=%%lf max_rel_err=%%lf", what);
    v[0] = v[1] = 0;
    v[2] = NAN;
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    int got = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, fmt, &v[0], &v[1], &v[2]) == 3)
            got = 1;
        else
            sscanf(line, "ggml_peer INVALID max_rel_err=%lf", &v[2]);
    return pclose(f) == 0 && got;
}

/* The row of a peer that did not time: INVALID (its error) or FAILED. */
static void peer_fail_row(kdalab_mechanism m, const char *form, double err)
{
    if (isnan(err))
        printf("%-17s %-9s %-7s FAILED: %s gave no timing (its stderr above)\n",
               kdalab_mechanism_name(m), form, "ggml", peer_exe);
    else
        printf("%-17s %-9s %-7s INVALID: error %.3g against kdalab_recurrent_f64 > %g; not "
               "timed\n", kdalab_mechanism_name(m), form, "ggml", err, VALID_TOL);
}

/*
 * kdalab against the peer in alternating rounds: the machine's speed drifts
 * 10-20 % over minutes here, and the table times kdalab's rows and the
 * peer's minutes apart. Each round times kdalab's float32 chunkwise form
 * (the widest level, the default chunk) and then the peer, back to back,
 * each the median of reps calls, and takes their ratio; the median of the
 * rounds' ratios is printed with its range. kdalab is validated first.
 */
static void alternate(problem *p, kdalab_mechanism m, int rounds, int reps, int nth)
{
    const double htok = (double)(p->d.B * p->d.T * p->d.H);
    double ratio[16], ours[16], theirs[16], *ref = NULL, pv[3], tmin, tmax;
    rounds = rounds > 16 ? 16 : rounds;
    bench_opts = kdalab_simd_chunk_opts_default();
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    const double err = validate_chunk(p, m, &ref);
    free(ref);
    if (!(err <= VALID_TOL)) {
        printf("%-17s alternating: INVALID (error %.3g); not timed\n", kdalab_mechanism_name(m),
               err);
        return;
    }
    char args[256];
    snprintf(args, sizeof args, "--mech %s --B %zu --T %zu --H %zu --K %zu --V %zu "
             "--threads %d --reps %d", kdalab_mechanism_name(m), p->d.B, p->d.T, p->d.H,
             p->d.K, p->d.V, nth, reps);
    int n = 0;
    for (int r = 0; r < rounds; r++) {
        const double t = time_chunk(kdalab_simd_chunk_f32, p, m, reps, &tmin, &tmax);
        if (!peer_run(args, "head_tokens_per_s", pv)) {
            peer_fail_row(m, "recurrent", pv[2]);
            return;
        }
        ours[n] = htok / t;
        theirs[n] = pv[1];
        ratio[n] = ours[n] / theirs[n];
        printf("%-17s round %2d  kdalab chunk%zu %s %9.0f  ggml %9.0f head-tok/s  %.2fx\n",
               kdalab_mechanism_name(m), r + 1, bench_opts.chunk,
               kdalab_simd_level_name(kdalab_simd_get_level()), ours[n], theirs[n], ratio[n]);
        n++;
    }
    gsl_sort(ratio, 1, (size_t)n);
    gsl_sort(ours, 1, (size_t)n);
    gsl_sort(theirs, 1, (size_t)n);
    printf("%-17s median of %d rounds: kdalab %.0f, ggml %.0f head-tok/s; ratio %.2fx "
           "[%.2f..%.2f]\n", kdalab_mechanism_name(m), n,
           gsl_stats_median_from_sorted_data(ours, 1, (size_t)n),
           gsl_stats_median_from_sorted_data(theirs, 1, (size_t)n),
           gsl_stats_median_from_sorted_data(ratio, 1, (size_t)n), ratio[0], ratio[n - 1]);
}

static const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                         KDALAB_GATED_DELTANET, KDALAB_KDA};

#include "backward.h"
#include "dplr.h"

int main(int argc, char **argv)
{
    int quick = 0, table = 1, sweep = 1, backward = 1, dplr = 1;
    static const struct option opts[] = {{"quick", no_argument, NULL, 'q'},
                                         {"sweep", no_argument, NULL, 's'},
                                         {"table", no_argument, NULL, 't'},
                                         {"backward", no_argument, NULL, 'b'},
                                         {"dplr", no_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *usage = "usage: %s [--quick] [--table | --backward | --sweep | --dplr]\n  speed "
                        "of the SIMD path (--table: only the forward table, with the DPLR rows; "
                        "--backward: only the backward's; --sweep: only the T sweep; --dplr: "
                        "only the DPLR rows); see bench/simd.c\n";
    for (int c, li = -1; (c = getopt_long(argc, argv, "h", opts, &li)) != -1; li = -1) {
        /* a flag in full, as the experiments take them: getopt_long would take a prefix */
        if (li >= 0 && (strncmp(argv[optind - 1], "--", 2) != 0 ||
                        strcmp(argv[optind - 1] + 2, opts[li].name) != 0)) {
            fprintf(stderr, "%s: '%s': give the flag in full (--%s)\n", argv[0], argv[optind - 1],
                    opts[li].name);
            return 2;
        }
        if (c == 'q')
            quick = 1;
        else if (c == 's')
            table = backward = dplr = 0;
        else if (c == 't')
            sweep = backward = 0;
        else if (c == 'b')
            table = sweep = dplr = 0;
        else if (c == 'd')
            table = sweep = backward = 0;
        else if (c == 'h') {
            printf(usage, argv[0]);
            return 0;
        } else { /* getopt_long has named the flag on stderr */
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    if (!getenv("OMP_NUM_THREADS"))
        omp_set_num_threads(2);
    const int nth = omp_get_max_threads();
    const size_t B = 1, T = 4096, H = 4, K = 128, V = 128;
    const int reps = quick ? 3 : 7;
    gsl_rng_env_setup();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);

    /* the machine */
    char model[256] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    snprintf(model, sizeof model, "%s", c + 2);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        fclose(f);
    }
    int has512 = kdalab_simd_level_available(KDALAB_SIMD_AVX512);
    int has2 = kdalab_simd_level_available(KDALAB_SIMD_AVX2);
    printf("# kdalab %s SIMD benchmark\n", KDALAB_VERSION);
    printf("# cpu: %s; %d threads; widest level: %s\n", model, nth,
           has512 ? "avx512" : has2 ? "avx2" : "scalar");
    double peak1 = 0, peakN = 0;
    if (has2 || has512) {
        peak1 = fma_peak(1, has512);
        peakN = fma_peak(nth, has512);
    }
    printf("# measured fp32 FMA peak (%s, register-resident loop): %.1f GFLOP/s on 1 core, "
           "%.1f GFLOP/s on %d threads\n",
           has512 ? "avx512" : "avx2", peak1, peakN, nth);
    if (nth > 1 && peak1 > 0 && peakN < 0.75 * nth * peak1)
        printf("# WARNING: %d threads reach only %.2fx the 1-core peak: other jobs share these "
               "cores, and every time below is slowed by them (busy < 100%% says where)\n",
               nth, peakN / peak1);
    printf("# shape: B=%zu T=%zu H=%zu K=%zu V=%zu; chunkNN: chunk C=NN, sub-chunk c=16; "
           "median of %d runs [min..max]\n",
           B, T, H, K, V, reps);
    printf("# 'own' GFLOP/s counts the algorithm's multiply-adds (2 flops each, exp not "
           "counted); '7KV' counts 7*K*V per head-token\n");
    printf("# peak fraction: own flops / measured peak (chunk: %d-thread peak; step: 1-core "
           "peak)\n# per core-s: head-tokens per CPU-second of all threads (what one core "
           "does when it runs)\n",
           nth);
    printf("# busy: CPU time of the process / (wall time x threads); below 100%% other "
           "processes had our cores\n");
    printf("# err: each chunkwise kernel is validated before it is timed: max |o - o_ref| / "
           "max |o_ref| against kdalab_chunk_f64 (tolerance %g)\n", VALID_TOL);
    char peer_ver[128] = "";
    peer_exe = getenv("KDALAB_PEER_GGML");
    if (peer_exe && access(peer_exe, X_OK) == 0) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "'%s' --version 2>&1", peer_exe);
        FILE *pv = popen(cmd, "r");
        if (pv && fgets(peer_ver, sizeof peer_ver, pv))
            peer_ver[strcspn(peer_ver, "\n")] = 0;
        if (!pv || pclose(pv) != 0 || strncmp(peer_ver, "ggml ", 5) != 0)
            peer_ver[0] = 0;
    }
    if (peer_ver[0])
        printf("# peer: ggml_gated_delta_net (%s) through %s, float32, same shape and threads, "
               "run after kdalab's rows; its err is against kdalab_recurrent_f64; 'x' is "
               "kdalab's speed / the peer's (medians)\n#\n", peer_ver, peer_exe);
    else
        printf("# peer: no peer implementation is built or timed in this run%s; REFERENCE.md "
               "records figures measured elsewhere\n#\n",
               peer_exe ? " (KDALAB_PEER_GGML does not run as bin/peer_ggml)"
                        : " (KDALAB_PEER_GGML=bin/peer_ggml: bench/README.md)");
    peer_exe = peer_ver[0] ? peer_exe : NULL;

    problem p;
    problem_make(&p, rng, B, T, H, K, V);
    const double htok = (double)(B * T * H);
    const kdalab_simd_level levels[] = {KDALAB_SIMD_SCALAR, KDALAB_SIMD_AVX2,
                                        KDALAB_SIMD_AVX512};
    if (table)
        printf("%-17s %-9s %-7s %11s %9s %8s %8s %7s %5s %11s  %s\n", "mechanism", "form",
               "level", "head-tok/s", "ms", "GF/s own", "GF/s 7KV", "of peak", "busy",
               "per core-s", "[min..max] ms");
    const size_t chunks[] = {64, 32, 16}; /* 16: kdalab_simd_chunk_opts_default() */
    int invalid = 0;
    const int widest = has512 ? 2 : has2 ? 1 : 0;
    double kda_t = 0, kda_fl = 0, kda_busy = 0; /* KDA chunk16 at the widest level */
    double kda_step = 0, kda_floor = 0;          /* KDA step there, and its floor     */
    for (size_t mi = 0; table && mi < 4; mi++) {
        kdalab_mechanism m = mechs[mi];
        const int peered = peer_exe && kdalab_mechanism_g_width(m, K) > 0;
        double best_t = INFINITY, peer_ht = 0, pv[3]; /* kdalab's fastest float32 row */
        char best_row[32] = "";
        for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
            bench_opts = kdalab_chunk_opts_default();
            bench_opts.chunk = chunks[ci];
            double *ref = NULL; /* the float64 reference's o, once per (mechanism, C) */
            double fl = chunk_flops(m, &p.d, chunks[ci], 16);
            char form[16];
            snprintf(form, sizeof form, "chunk%zu", chunks[ci]);
            for (size_t li = 0; li < 3; li++) {
                if (!kdalab_simd_level_available(levels[li]))
                    continue;
                if (levels[li] == KDALAB_SIMD_SCALAR && ci > 0)
                    continue; /* the portable level once is enough */
                kdalab_simd_set_level(levels[li]);
                double err = validate_chunk(&p, m, &ref); /* also the warm-up call */
                if (!(err <= VALID_TOL)) {
                    printf("%-17s %-9s %-7s INVALID: error %.3g against the float64 "
                           "reference > %g; not timed\n",
                           kdalab_mechanism_name(m), form,
                           kdalab_simd_level_name(kdalab_simd_get_level()), err, VALID_TOL);
                    invalid = 1;
                    continue;
                }
                double tmin, tmax;
                double t = time_chunk(kdalab_simd_chunk_f32, &p, m, reps, &tmin, &tmax);
                printf("%-17s %-9s %-7s %11.0f %9.2f %8.1f %8.1f %6.1f%% %4.0f%% %11.0f  "
                       "[%.2f..%.2f]  err %.1e\n",
                       kdalab_mechanism_name(m), form, kdalab_simd_level_name(kdalab_simd_get_level()), htok / t,
                       1e3 * t, fl / t * 1e-9, 7.0 * K * V * htok / t * 1e-9,
                       peakN > 0 ? 100 * fl / t * 1e-9 / peakN : 0, 100 * last_busy / nth,
                       htok / last_cpu, 1e3 * tmin, 1e3 * tmax, err);
                if (m == KDALAB_KDA && chunks[ci] == 16 && (int)li == widest) {
                    kda_t = t;
                    kda_fl = fl;
                    kda_busy = last_busy / nth;
                }
                if (t < best_t) {
                    best_t = t;
                    snprintf(best_row, sizeof best_row, "%s %s", form,
                             kdalab_simd_level_name(kdalab_simd_get_level()));
                }
            }
            free(ref);
        }
        if (peered) { /* ggml's op on the same problem, right after kdalab's rows */
            char args[256];
            snprintf(args, sizeof args, "--mech %s --B %zu --T %zu --H %zu --K %zu --V %zu "
                     "--threads %d --reps %d", kdalab_mechanism_name(m), B, T, H, K, V, nth,
                     reps);
            if (peer_run(args, "head_tokens_per_s", pv)) {
                peer_ht = pv[1];
                printf("%-17s %-9s %-7s %11.0f %9.2f %8s %8.1f %7s %5s %11s  best %.0f; "
                       "kdalab %s: %.2fx  err %.1e\n",
                       kdalab_mechanism_name(m), "recurrent", "ggml", pv[1], 1e3 * htok / pv[1],
                       "", 7.0 * K * V * pv[1] * 1e-9, "", "", "", pv[0], best_row,
                       htok / best_t / pv[1], pv[2]);
            } else {
                peer_fail_row(m, "recurrent", pv[2]);
            }
        }
        double step_us = 0; /* kdalab's aligned step at the widest level */
        for (size_t li = 0; li < 3; li++) {
            if (!kdalab_simd_level_available(levels[li]))
                continue;
            kdalab_simd_set_level(levels[li]);
            /* S on a cache line ("step"), and 16 bytes past one ("step+16B") */
            for (size_t s_off = 0; s_off <= 4; s_off += 4) {
                /* the floor alternates with KDA's aligned step at the widest level */
                const int floored = m == KDALAB_KDA && !s_off && (int)li == widest;
                double us = time_step(m, K, V, rng, s_off, widest, floored ? &kda_floor : NULL);
                step_us = s_off ? step_us : us;
                if (floored)
                    kda_step = us;
                double sf = step_flops(m, K, V);
                printf("%-17s %-9s %-7s %11.0f %9.4f %8.1f %8.1f %6.1f%% %5s %11s  one token, "
                       "one head, 1 thread: %.2f us (CPU %.2f us)\n",
                       kdalab_mechanism_name(m), s_off ? "step+16B" : "step",
                       kdalab_simd_level_name(kdalab_simd_get_level()), 1e6 / us, 1e-3 * us, sf / us * 1e-3,
                       7.0 * K * V / us * 1e-3, peak1 > 0 ? 100 * sf / us * 1e-3 / peak1 : 0,
                       "", "", us, last_step_cpu_us);
            }
        }
        if (peered) { /* ggml's op on one token, one head, one thread, state chained */
            char args[128];
            snprintf(args, sizeof args, "--decode --mech %s --K %zu --V %zu --reps 9",
                     kdalab_mechanism_name(m), K, V);
            if (peer_run(args, "decode_us", pv))
                printf("%-17s %-9s %-7s %11.0f %9.4f %8.1f %8.1f %7s %5s %11s  one token, one "
                       "head, 1 thread: %.2f us (best %.2f); kdalab step: %.2fx  err %.1e\n",
                       kdalab_mechanism_name(m), "step", "ggml", 1e6 / pv[1], 1e-3 * pv[1],
                       step_flops(m, K, V) / pv[1] * 1e-3, 7.0 * K * V / pv[1] * 1e-3, "", "",
                       "", pv[1], pv[0], pv[1] / step_us, pv[2]);
            else
                peer_fail_row(m, "step", pv[2]);
        }
        /* the float64 SIMD path (the oracle's fast form), C = 64 and 16 */
        for (size_t li = 0; li < 3; li++) {
            if (!kdalab_simd_level_available(levels[li]))
                continue;
            kdalab_simd_set_level(levels[li]);
            const size_t c64[] = {64, 16};
            for (size_t ci = 0; ci < 2; ci++) {
                bench_opts = kdalab_chunk_opts_default();
                bench_opts.chunk = c64[ci];
                double err, t = time_chunk_f64(&p, m, quick ? 2 : 5, &err);
                char form[16];
                snprintf(form, sizeof form, "f64ch%zu", c64[ci]);
                if (t < 0) {
                    printf("%-17s %-9s %-7s INVALID: error %.3g against kdalab_chunk_f64 > "
                           "1e-12; not timed\n",
                           kdalab_mechanism_name(m), form,
                           kdalab_simd_level_name(kdalab_simd_get_level()), err);
                    invalid = 1;
                    continue;
                }
                printf("%-17s %-9s %-7s %11.0f %9.2f %8s %8.1f %7s %5s %11s  float64, median "
                       "of %d",
                       kdalab_mechanism_name(m), form,
                       kdalab_simd_level_name(kdalab_simd_get_level()), htok / t, 1e3 * t, "",
                       7.0 * K * V * htok / t * 1e-9, "", "", "", quick ? 2 : 5);
                if (peer_ht > 0)
                    printf("; ggml: %.2fx", htok / t / peer_ht);
                printf("  err %.1e\n", err);
            }
        }
        /* the reference float32 chunkwise form, once, for scale */
        {
            double tmin, tmax;
            problem pr;
            problem_make(&pr, rng, 1, quick ? 256 : 1024, H, K, V);
            bench_opts = kdalab_chunk_opts_default();
            double t = time_chunk(kdalab_chunk_f32, &pr, m, 1, &tmin, &tmax);
            double ht2 = (double)(pr.d.T * H);
            double fl2 = chunk_flops(m, &pr.d, 64, 16);
            printf("%-17s %-9s %-7s %11.0f %9.2f %8.1f %8.1f %6.1f%% %4.0f%% %11.0f  "
                   "kdalab_chunk_f32 (the reference), T=%zu, 1 thread, 1 run\n",
                   kdalab_mechanism_name(m), "chunk64", "ref", ht2 / t, 1e3 * t,
                   fl2 / t * 1e-9, 7.0 * K * V * ht2 / t * 1e-9,
                   peak1 > 0 ? 100 * fl2 / t * 1e-9 / peak1 : 0, 100 * last_busy,
                   ht2 / last_cpu, pr.d.T);
            problem_free(&pr);
        }
    }
    if (dplr) /* the DPLR boundary, on the same problem with RWKV-7's a, b */
        invalid |= dplr_rows(&p, rng, reps, quick, widest, peakN, peak1, kda_t);
    if (table && peer_exe) {
        printf("#\n# kdalab and ggml alternating, back to back in each round (the ratio of "
               "each round; the table's rows above were minutes apart)\n");
        alternate(&p, KDALAB_GATED_DELTANET, quick ? 3 : 9, reps, nth);
        alternate(&p, KDALAB_KDA, quick ? 3 : 9, reps, nth);
    }
    if (table && kda_t > 0) {
        /* bytes a call must move: its inputs twice (the screen, then the
         * kernel), o and ht once */
        const double in = 4.0 * (double)(B * T * H) * (3.0 * K + V + 1) + 4.0 * B * H * K * V;
        const double out = 4.0 * (double)(B * T * H) * V + 4.0 * B * H * K * V;
        const double gbs = floor_read_gbs(nth, (size_t)in, widest);
        const double fma_ms = peakN > 0 ? 1e3 * kda_fl / (peakN * 1e9) : 0;
        const double mem_ms = gbs > 0 ? 1e3 * (2 * in + out) / (gbs * 1e9) : 0;
        printf("#\n# floors, measured in this run (what bounds a kernel of this design here; "
               "bench/README.md: \"Where the time goes\")\n");
        printf("# kda chunk16 %s: %.2f ms (busy %.0f%%); FMA floor %.2f ms (own flops at the "
               "%d-thread peak, %.0f%% of the time); memory floor %.2f ms (2 x %.1f MB in + "
               "%.1f MB out at %.1f GB/s, the read bandwidth of %d threads over %.0f MB)\n",
               widest == 2 ? "avx512" : widest == 1 ? "avx2" : "scalar", 1e3 * kda_t,
               100 * kda_busy, fma_ms, nth, 100 * fma_ms / (1e3 * kda_t), mem_ms, in / 1e6,
               out / 1e6, gbs, nth, in / 1e6);
        if (kda_step > 0)
            printf("# kda step %s: %.2f us; the state's two passes alone (read, then "
                   "read-modify-write, %zu x %zu floats, 1 thread), alternating with it: "
                   "%.2f us against its %.2f us\n",
                   widest == 2 ? "avx512" : widest == 1 ? "avx2" : "scalar", kda_step, K, V,
                   kda_floor, kda_step);
    }
    if (backward)
        invalid |= backward_table(&p, rng, reps, quick, peakN);
    problem_free(&p);
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);

    if (!sweep) {
        gsl_rng_free(rng);
        return 0;
    }
    /* time against T for chunkwise KDA at the best level, the path's default C */
    bench_opts = kdalab_simd_chunk_opts_default();
    printf("#\n# chunkwise KDA against T (level %s, B=1 H=4 K=V=128, C=%zu, %d threads; "
           "median of rounds over every T)\n",
           kdalab_simd_level_name(kdalab_simd_get_level()), bench_opts.chunk, nth);
    printf("%8s %11s %13s %5s %11s\n", "T", "ms", "head-tok/s", "busy", "per core-s");
    /* every T's problem is made first, then the rounds go over all of them
     * (one call per T per round, medians over rounds): a slow minute of a
     * shared machine then slows one round of every T, not every call of one T */
    enum { NT_MAX = 7, ROUNDS_MAX = 5 };
    const size_t tmax_sweep = quick ? 16384 : 65536;
    const int rounds = quick ? 3 : 5;
    problem ps[NT_MAX];
    double tw[NT_MAX][ROUNDS_MAX], tc[NT_MAX][ROUNDS_MAX], tb[NT_MAX][ROUNDS_MAX];
    size_t nT = 0;
    for (size_t Ts = 1024; Ts <= tmax_sweep && nT < NT_MAX; Ts *= 2)
        problem_make(&ps[nT++], rng, 1, Ts, H, K, V);
    for (size_t ti = 0; ti < nT; ti++) { /* warm-up: first touch of every buffer */
        double tmin, tmax;
        time_chunk(kdalab_simd_chunk_f32, &ps[ti], KDALAB_KDA, 1, &tmin, &tmax);
    }
    for (int r = 0; r < rounds; r++)
        for (size_t ti = 0; ti < nT; ti++) {
            double tmin, tmax;
            tw[ti][r] = time_chunk(kdalab_simd_chunk_f32, &ps[ti], KDALAB_KDA, 1, &tmin, &tmax);
            tc[ti][r] = last_cpu;
            tb[ti][r] = last_busy;
        }
    double lx[NT_MAX], ly[NT_MAX], lc[NT_MAX];
    size_t np = 0;
    for (size_t ti = 0; ti < nT; ti++) {
        const size_t Ts = ps[ti].d.T;
        gsl_sort(tw[ti], 1, (size_t)rounds);
        gsl_sort(tc[ti], 1, (size_t)rounds);
        gsl_sort(tb[ti], 1, (size_t)rounds);
        double t = gsl_stats_median_from_sorted_data(tw[ti], 1, (size_t)rounds);
        double cpu = gsl_stats_median_from_sorted_data(tc[ti], 1, (size_t)rounds);
        double busy = gsl_stats_median_from_sorted_data(tb[ti], 1, (size_t)rounds);
        printf("%8zu %11.2f %13.0f %4.0f%% %11.0f\n", Ts, 1e3 * t, (double)(Ts * H) / t,
               100 * busy / nth, (double)(Ts * H) / cpu);
        lx[np] = log((double)Ts);
        ly[np] = log(t);
        lc[np] = log(cpu);
        np++;
        problem_free(&ps[ti]);
    }
    double c0, c1, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(lx, 1, ly, 1, np, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    printf("# log-log slope of wall time against T: %.3f +- %.3f (linear: 1)\n", c1,
           sqrt(cov11));
    gsl_fit_linear(lx, 1, lc, 1, np, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    printf("# log-log slope of CPU time against T:  %.3f +- %.3f\n", c1, sqrt(cov11));
    /* a figure measured elsewhere is not printed here: REFERENCE.md records
     * it, with the machine it came from; a peer built here is timed above */
    if (!peer_exe)
        printf("# for scale, not measured in this run: REFERENCE.md (\"Numbers measured on "
               "real implementations\") records ggml's fused recurrent GATED_DELTA_NET op at "
               "this shape\n");
    gsl_rng_free(rng);
    if (invalid)
        fprintf(stderr, "bench_simd: a kernel disagreed with the float64 reference (INVALID "
                        "rows above)\n");
    return invalid;
}
