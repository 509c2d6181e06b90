/*
 * 04_recall_capacity — how many associations a K x V state holds (chapter 06,
 * "The admission": "a state of that size holds on the order of d cleanly
 * separable associations, because you only get d mutually orthogonal
 * directions in R^d. Gating changes which associations survive. It does not
 * change how many.").
 *
 * One head, K = V = d. Write N key -> value pairs, keys random unit vectors
 * (and, where N <= K, orthonormal: the Q of a Gaussian matrix, gsl_linalg_QR),
 * values random unit vectors. Then query every key and score the recall r
 * against the right value v two ways:
 *   nearest   a hit when v is the stored value closest to r in cosine (the
 *             lenient count: a hit can have a low cosine when the other
 *             stored values are further still; the lowest and mean cosine
 *             of the hits are reported)
 *   cosine    recalled when cos(r, v) >= --cos-recalled (0.9) or, "exact",
 *             >= --cos-exact (0.99)
 *
 *   linear attention   S = sum k v^T
 *   DeltaNet           beta = --beta (1: each write replaces what its key reads)
 *   Gated DeltaNet     beta as DeltaNet, scalar decay alpha = --gdn-alpha per write
 *   KDA                beta as DeltaNet, per-channel decay: channel c keeps a
 *                      half-life drawn log-uniform in [--hl-min, --hl-max]
 *   simple GLA, GLA    the grid's cells without the delta rule: Gated
 *                      DeltaNet's and KDA's decays with linear attention's
 *                      write S += k v^T (what the delta rule buys, beside
 *                      what the decay buys)
 *   least squares      the K x V state S that minimises sum_i |S^T k_i - v_i|^2
 *                      (minimum norm), solved directly (gsl_linalg QR for
 *                      N >= K, Cholesky of the Gram matrix for N < K): the
 *                      best any K x V linear read-out can store. With linearly
 *                      independent keys it recalls all N <= K exactly, and past
 *                      K it recalls the projection onto the keys' span, so its
 *                      exact capacity is d = K
 *   softmax attention  a KV cache of the N pairs; q, k of norm sqrt(K) (unit
 *                      entries, as after RMSNorm) with the default scale
 *                      K^-1/2, i.e. scale sqrt(K) on the unit vectors
 *                      (--softmax-scale)
 * The recurrent mechanisms run kdalab_recurrent_f64 on 2N tokens: N writes,
 * then N reads (k = 0, v = 0, beta = 0, g = 0: they leave the state as it is)
 * whose outputs o = s S^T q are the recalls. Softmax attention uses
 * kdalab_kv_cache_attend. Accuracy, the mean cosine between the recall and
 * the right value and the counts above, mean and standard deviation over
 * --seeds seeds (gsl_stats).
 *
 * Outputs (DIR = --out):
 *   04_recall_capacity.tsv   one line per (keys, mechanism, N); gnuplot blocks
 *                            (separated by two blank lines) in the order
 *                            keys = random, orthonormal; mechanism = linear
 *                            attention, DeltaNet, Gated DeltaNet, KDA, least
 *                            squares, softmax, simple GLA, GLA
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "kdalab.h"

enum { M_LINEAR = 0, M_DELTANET, M_GDN, M_KDA, M_LSQ, M_SOFTMAX, M_SGLA, M_GLA, N_MECH };
static const char *const mech_name[N_MECH] = {"linear_attention", "deltanet", "gated_deltanet", "kda",
                                              "least_squares", "softmax_attention", "simple_gla",
                                              "gla"};
enum { KEYS_RANDOM = 0, KEYS_ORTHO, N_KEYS };
static const char *const keys_name[N_KEYS] = {"random", "orthonormal"};

#define MAX_N 64

/* What one instance's N recalls score (see the header). */
typedef struct {
    double acc, mcos;     /* fraction decoded to the right value; mean cosine with it   */
    double n_rec, n_exact; /* recalls with cosine >= cos-recalled, >= cos-exact          */
    double hit_cos, hit_min; /* mean and lowest cosine of the nearest-value hits (NAN: none) */
} decoded;

/* Decode N recalls o [N,V] against the stored unit values [N,V]. A zero
 * recall counts as a miss with cosine 0. */
static decoded decode(const double *o, const double *vals, size_t N, size_t V, double c_rec, double c_exact)
{
    size_t hits = 0, n_rec = 0, n_exact = 0;
    double sc = 0.0, shit = 0.0, hmin = INFINITY;
    for (size_t i = 0; i < N; i++) {
        const double *oi = o + i * V;
        double on = 0.0;
        for (size_t j = 0; j < V; j++) on += oi[j] * oi[j];
        if (!(on > 0.0)) continue;
        on = sqrt(on);
        size_t best = 0;
        double bestc = -INFINITY, ci = 0.0;
        for (size_t n = 0; n < N; n++) {
            double d = 0.0; /* values are unit vectors */
            for (size_t j = 0; j < V; j++) d += oi[j] * vals[n * V + j];
            d /= on;
            if (d > bestc) bestc = d, best = n;
            if (n == i) ci = d;
        }
        if (best == i) hits++, shit += ci, hmin = fmin(hmin, ci);
        n_rec += ci >= c_rec, n_exact += ci >= c_exact;
        sc += ci;
    }
    return (decoded){(double)hits / (double)N, sc / (double)N, (double)n_rec, (double)n_exact,
                     hits ? shit / (double)hits : NAN, hits ? hmin : NAN};
}

/* The least-squares (minimum-norm) K x V state for N pairs, S [K,V] =
 * argmin sum_i |S^T k_i - v_i|^2, and its recalls o [N,V] = (S^T k_i)_i. */
static void least_squares(const lab_ctx *x, const double *keys, const double *vals, size_t N, size_t K,
                          size_t V, double *S, double *o)
{
    gsl_matrix *A = gsl_matrix_alloc(N, K), *G = gsl_matrix_alloc(N, N);
    gsl_vector *tau = gsl_vector_alloc(N < K ? N : K), *b = gsl_vector_alloc(N), *sol = gsl_vector_alloc(N > K ? N : K);
    gsl_vector *res = gsl_vector_alloc(N);
    if (!A || !G || !tau || !b || !sol || !res) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < K; c++) gsl_matrix_set(A, n, c, keys[n * K + c]);
    if (N >= K) { /* overdetermined (or square): QR least squares, column by column */
        gsl_linalg_QR_decomp(A, tau);
        gsl_vector_view sk = gsl_vector_subvector(sol, 0, K);
        for (size_t j = 0; j < V; j++) {
            for (size_t n = 0; n < N; n++) gsl_vector_set(b, n, vals[n * V + j]);
            gsl_linalg_QR_lssolve(A, tau, b, &sk.vector, res);
            for (size_t c = 0; c < K; c++) S[c * V + j] = gsl_vector_get(&sk.vector, c);
        }
    } else { /* underdetermined: S = A^T (A A^T)^-1 V, the minimum-norm solution */
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, A, A, 0.0, G);
        gsl_linalg_cholesky_decomp1(G);
        gsl_vector_view sn = gsl_vector_subvector(sol, 0, N);
        memset(S, 0, K * V * sizeof *S);
        for (size_t j = 0; j < V; j++) {
            for (size_t n = 0; n < N; n++) gsl_vector_set(b, n, vals[n * V + j]);
            gsl_linalg_cholesky_solve(G, b, &sn.vector);
            for (size_t n = 0; n < N; n++)
                for (size_t c = 0; c < K; c++) S[c * V + j] += keys[n * K + c] * gsl_vector_get(&sn.vector, n);
        }
    }
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < V; j++) {
            double acc = 0.0;
            for (size_t c = 0; c < K; c++) acc += S[c * V + j] * keys[n * K + c];
            o[n * V + j] = acc;
        }
    gsl_matrix_free(A), gsl_matrix_free(G), gsl_vector_free(tau), gsl_vector_free(b), gsl_vector_free(sol);
    gsl_vector_free(res);
}

/* The command-line parameters; ratios[] and Ns[] are derived from ratios_s. */
typedef struct {
    size_t K, V, seeds;
    double beta, gdn_alpha, hl_min, hl_max, sm_scale, clean, clean_cos, cos_rec, cos_exact;
    const char *ratios_s;
    double ratios[MAX_N];
    size_t nr, Ns[MAX_N], Nmax; /* N = round(ratio * K), at least 2; the largest */
} params;

/* What decode() gives for every (keys, mechanism, ratio, seed). */
typedef struct {
    decoded *d;
    size_t nr, seeds;
} results;

static size_t at(const results *r, int kt, int m, size_t i, size_t s)
{
    return (((size_t)kt * N_MECH + (size_t)m) * r->nr + i) * r->seeds + s;
}

/* Buffers for one instance of 2 Nmax tokens. */
typedef struct {
    double *keys, *vals, *q, *k, *v, *g1, *gk, *bt, *o, *kda_g, *S;
} workspace;

/* One instance: N random values, N keys of kind kt, every mechanism's
 * accuracy and mean cosine into r at (kt, ratio i, seed s). */
static void recall_once(const lab_ctx *x, const params *p, gsl_rng *rng, workspace *w, int kt,
                        size_t i, size_t s, results *r)
{
    size_t K = p->K, V = p->V, N = p->Ns[i];
    for (size_t n = 0; n < N; n++) {
        if (kt == KEYS_RANDOM) lab_random_unit(rng, w->keys + n * K, K);
        lab_random_unit(rng, w->vals + n * V, V);
    }
    if (kt == KEYS_ORTHO) lab_random_orthonormal(x, rng, N, K, w->keys);
    /* per-channel KDA half-lives, log-uniform in [hl_min, hl_max] */
    for (size_t c = 0; c < K; c++)
        w->kda_g[c] = -log(2.0) / exp(gsl_ran_flat(rng, log(p->hl_min), log(p->hl_max) + 1e-300));
    /* 2N tokens: N writes, then N reads that change nothing */
    size_t T = 2 * N;
    memset(w->k, 0, T * K * sizeof *w->k);
    memset(w->v, 0, T * V * sizeof *w->v);
    for (size_t n = 0; n < N; n++) {
        memcpy(w->q + n * K, w->keys + n * K, K * sizeof *w->q);
        memcpy(w->k + n * K, w->keys + n * K, K * sizeof *w->k);
        memcpy(w->v + n * V, w->vals + n * V, V * sizeof *w->v);
        memcpy(w->q + (N + n) * K, w->keys + n * K, K * sizeof *w->q);
        w->bt[n] = p->beta, w->bt[N + n] = 0.0;
        w->g1[n] = log(p->gdn_alpha), w->g1[N + n] = 0.0;
        for (size_t c = 0; c < K; c++) w->gk[n * K + c] = w->kda_g[c], w->gk[(N + n) * K + c] = 0.0;
    }
    kdalab_dims d = {1, T, 1, K, V};
    double scale = kdalab_default_scale(K);
    /* the recurrent mechanisms: a decay per head takes g1 (--gdn-alpha), one
     * per key channel gk (the drawn half-lives); beta only with the delta rule */
    static const struct { int m; kdalab_mechanism lib; } rec[] = {
        {M_LINEAR, KDALAB_LINEAR_ATTENTION}, {M_DELTANET, KDALAB_DELTANET},
        {M_GDN, KDALAB_GATED_DELTANET},      {M_KDA, KDALAB_KDA},
        {M_SGLA, KDALAB_SIMPLE_GLA},         {M_GLA, KDALAB_GLA}};
    for (size_t j = 0; j < sizeof rec / sizeof rec[0]; j++) {
        kdalab_g_shape gs = kdalab_mechanism_g_shape(rec[j].lib);
        const double *g = gs == KDALAB_G_PER_HEAD ? w->g1 : gs == KDALAB_G_PER_KEY ? w->gk : NULL;
        lab_check(x, kdalab_recurrent_f64(&d, rec[j].lib, scale, w->q, w->k, w->v, g,
                                          kdalab_mechanism_has_delta(rec[j].lib) ? w->bt : NULL,
                                          NULL, w->o, NULL),
                  "kdalab_recurrent_f64");
        r->d[at(r, kt, rec[j].m, i, s)] =
            decode(w->o + N * V, w->vals, N, V, p->cos_rec, p->cos_exact);
    }
    least_squares(x, w->keys, w->vals, N, K, V, w->S, w->o);
    r->d[at(r, kt, M_LSQ, i, s)] = decode(w->o, w->vals, N, V, p->cos_rec, p->cos_exact);
    kdalab_kv_cache *cache = kdalab_kv_cache_new(1, K, V);
    if (!cache) {
        fprintf(stderr, "04_recall_capacity: kdalab_kv_cache_new failed\n");
        exit(1);
    }
    for (size_t n = 0; n < N; n++)
        lab_check(x, kdalab_kv_cache_append(cache, w->keys + n * K, w->vals + n * V), "kv_cache_append");
    for (size_t n = 0; n < N; n++)
        lab_check(x, kdalab_kv_cache_attend(cache, p->sm_scale, w->keys + n * K, w->o + n * V),
                  "kv_cache_attend");
    kdalab_kv_cache_free(cache);
    r->d[at(r, kt, M_SOFTMAX, i, s)] = decode(w->o, w->vals, N, V, p->cos_rec, p->cos_exact);
}

/* Every (keys, ratio, seed); orthonormal keys only where N <= K. */
static void measure(lab_ctx *x, const params *p, gsl_rng *rng, results *r)
{
    size_t K = p->K, V = p->V, T2 = 2 * p->Nmax;
    workspace w = {
        .keys = lab_zeros(x, p->Nmax * K), .vals = lab_zeros(x, p->Nmax * V),
        .q = lab_zeros(x, T2 * K), .k = lab_zeros(x, T2 * K), .v = lab_zeros(x, T2 * V),
        .g1 = lab_zeros(x, T2), .gk = lab_zeros(x, T2 * K), .bt = lab_zeros(x, T2),
        .o = lab_zeros(x, T2 * V), .kda_g = lab_zeros(x, K), .S = lab_zeros(x, K * V)};
    size_t total = N_KEYS * p->nr * p->seeds, done = 0;
    for (int kt = 0; kt < N_KEYS; kt++) {
        for (size_t i = 0; i < p->nr; i++) {
            if (kt == KEYS_ORTHO && p->Ns[i] > K) {
                done += p->seeds;
                continue;
            }
            for (size_t s = 0; s < p->seeds; s++, done++) {
                lab_progress(x, "points", done, total);
                recall_once(x, p, rng, &w, kt, i, s, r);
            }
        }
    }
    lab_progress(x, "points", total, total);
    free(w.keys), free(w.vals), free(w.q), free(w.k), free(w.v), free(w.g1), free(w.gk), free(w.bt),
        free(w.o), free(w.kda_g), free(w.S);
}

/* What the printed summary reports per (keys, mechanism). */
typedef struct {
    double clean_ratio;    /* largest N/K up to which the mean accuracy stays >= clean   */
    double cos_ratio;      /* the same for the mean cosine and clean-cos                 */
    double best_recalled;  /* largest mean number of correctly decoded associations      */
    double best_hit_cos, best_hit_min; /* mean and lowest cosine of those hits, at that N */
    double best_rec, best_exact; /* largest mean count with cosine >= cos-recalled, >= cos-exact */
    double acc_at[3];      /* mean accuracy at N = K, 2K, 4K (NAN: not in the sweep)     */
} capacity;

/* One field of decoded, by offset, copied into a[0..seeds-1]. */
static void field(const results *r, int kt, int m, size_t i, size_t off, double *a)
{
    for (size_t s = 0; s < r->seeds; s++) a[s] = *(const double *)((const char *)&r->d[at(r, kt, m, i, s)] + off);
}

/* The mean of a[0..n-1] over its non-NAN entries (NAN when none). */
static double nanmean(const double *a, size_t n)
{
    double sum = 0.0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(a[i])) sum += a[i], k++;
    return k ? sum / (double)k : NAN;
}

/* 04_recall_capacity.tsv, one block per (keys, mechanism), and the summary. */
static void write_results(lab_ctx *x, const params *p, const results *r,
                          capacity cap[N_KEYS][N_MECH])
{
    size_t K = p->K, seeds = p->seeds;
    double *a = lab_zeros(x, seeds), *cs = lab_zeros(x, seeds), *t = lab_zeros(x, seeds);
    static const char *const cols[] = {
        "keys", "random | orthonormal",
        "mechanism", "linear_attention | deltanet | gated_deltanet | kda | least_squares | softmax_attention | "
                     "simple_gla | gla",
        "N", "associations written",
        "N_over_K", "N / K (1)",
        "acc", "fraction of keys whose recall is nearest (cosine) to the right value, mean over seeds (1)",
        "acc_sd", "its standard deviation over seeds (1)",
        "cos", "cosine between recall and the right value, mean over keys and seeds (1)",
        "cos_sd", "standard deviation over seeds of the per-seed mean cosine (1)",
        "recalled", "acc * N: associations decoded to the right value, mean over seeds",
        "acc_min", "lowest per-seed accuracy (1)",
        "rec_cos", "associations recalled with cosine >= cos-recalled, mean over seeds",
        "rec_exact", "associations recalled with cosine >= cos-exact, mean over seeds",
        "hit_cos", "mean cosine of the nearest-value hits (mean over seeds; nan: no hit)",
        "hit_cos_min", "lowest cosine of any nearest-value hit over all seeds (nan: no hit)", NULL};
    FILE *f = lab_tsv_open(x, "04_recall_capacity", cols,
                           "K=V=%zu seeds=%zu beta=%g gdn_alpha=%g kda_half_life=loguniform[%g,%g] "
                           "softmax_scale=%g (on unit q,k) cos_recalled=%g cos_exact=%g ratios=%s",
                           K, seeds, p->beta, p->gdn_alpha, p->hl_min, p->hl_max, p->sm_scale, p->cos_rec,
                           p->cos_exact, p->ratios_s);
    for (int kt = 0; kt < N_KEYS; kt++) {
        for (int m = 0; m < N_MECH; m++) {
            capacity *c = &cap[kt][m];
            *c = (capacity){.best_hit_cos = NAN, .best_hit_min = NAN, .acc_at = {NAN, NAN, NAN}};
            int broken = 0, cbroken = 0; /* "clean" up to the first ratio that is not */
            for (size_t i = 0; i < p->nr; i++) {
                size_t N = p->Ns[i];
                if (kt == KEYS_ORTHO && N > K) continue;
                field(r, kt, m, i, offsetof(decoded, acc), a);
                field(r, kt, m, i, offsetof(decoded, mcos), cs);
                double am = gsl_stats_mean(a, 1, seeds), cm = gsl_stats_mean(cs, 1, seeds);
                double amin = gsl_stats_min(a, 1, seeds), asd = gsl_stats_sd(a, 1, seeds), csd = gsl_stats_sd(cs, 1, seeds);
                field(r, kt, m, i, offsetof(decoded, n_rec), t);
                double rec = gsl_stats_mean(t, 1, seeds);
                field(r, kt, m, i, offsetof(decoded, n_exact), t);
                double ex = gsl_stats_mean(t, 1, seeds);
                field(r, kt, m, i, offsetof(decoded, hit_cos), t);
                double hc = nanmean(t, seeds), hmin = INFINITY;
                field(r, kt, m, i, offsetof(decoded, hit_min), t);
                for (size_t s = 0; s < seeds; s++)
                    if (!isnan(t[s])) hmin = fmin(hmin, t[s]);
                if (isinf(hmin)) hmin = NAN;
                fprintf(f, "%s\t%s\t%zu\t%.6g\t%.6f\t%.4f\t%.6f\t%.4f\t%.3f\t%.4f\t%.3f\t%.3f\t%.4f\t%.4f\n",
                        keys_name[kt], mech_name[m], N, (double)N / (double)K, am, asd, cm, csd, am * (double)N,
                        amin, rec, ex, hc, hmin);
                if (am >= p->clean && !broken) c->clean_ratio = (double)N / (double)K;
                else broken = 1;
                if (cm >= p->clean_cos && !cbroken) c->cos_ratio = (double)N / (double)K;
                else cbroken = 1;
                if (am * (double)N > c->best_recalled)
                    c->best_recalled = am * (double)N, c->best_hit_cos = hc, c->best_hit_min = hmin;
                c->best_rec = fmax(c->best_rec, rec), c->best_exact = fmax(c->best_exact, ex);
                if (N == K) c->acc_at[0] = am;
                if (N == 2 * K) c->acc_at[1] = am;
                if (N == 4 * K) c->acc_at[2] = am;
            }
            fprintf(f, "\n\n");
        }
    }
    lab_tsv_close(x, f);
    free(a), free(cs), free(t);
}

static void print_summary(const lab_ctx *x, const params *p, capacity cap[N_KEYS][N_MECH])
{
    size_t K = p->K;
    printf("04_recall_capacity — N associations in a %zu x %zu state, decoded by nearest stored value and by cosine\n",
           K, p->V);
    printf("  (%zu seeds, seed %lu; beta=%g, gated_deltanet alpha=%g, kda half-lives log-uniform [%g, %g], "
           "softmax scale %g on unit q,k)\n", p->seeds, x->seed, p->beta, p->gdn_alpha, p->hl_min, p->hl_max,
           p->sm_scale);
    for (int kt = 0; kt < N_KEYS; kt++) {
        printf("\n  %s keys:\n", keys_name[kt]);
        printf("    %-18s %10s %10s %16s %9s %9s %9s\n", "mechanism", "acc-clean", "cos-clean", "max recalled",
               "acc N=K", "acc N=2K", "acc N=4K");
        for (int m = 0; m < N_MECH; m++) {
            const capacity *c = &cap[kt][m];
            printf("    %-18s %10.3g %10.3g %9.1f (%.2gK)", mech_name[m], c->clean_ratio, c->cos_ratio,
                   c->best_recalled, c->best_recalled / (double)K);
            for (int j = 0; j < 3; j++) /* "-": that N was not in the sweep (orthonormal: N <= K) */
                if (isnan(c->acc_at[j]))
                    printf(" %9s", "-");
                else
                    printf(" %9.3f", c->acc_at[j]);
            printf("\n");
        }
    }
    printf("\n  (acc-clean: the largest N/K of the sweep up to which the mean accuracy stays >= %g;\n"
           "   cos-clean: ... up to which the mean cosine of recall and right value stays >= %g;\n"
           "   max recalled: the largest mean number of correctly decoded associations, acc * N)\n", p->clean,
           p->clean_cos);
    const capacity *rnd = cap[KEYS_RANDOM], *ortho = cap[KEYS_ORTHO];
    printf("\n  capacity of random keys by the rule that counts a recall (largest mean count over the sweep's N;"
           " d = K = %zu):\n", K);
    printf("    %-18s %24s %20s %14s %14s\n", "mechanism", "nearest stored value", "cosine of those hits",
           "cos >= 0.9", "cos >= 0.99");
    for (int m = 0; m < N_MECH; m++) {
        const capacity *c = &rnd[m];
        printf("    %-18s %15.1f (%4.2fd) %11.2f (min %5.2f) %7.1f (%4.2fd) %7.1f (%4.2fd)\n", mech_name[m],
               c->best_recalled, c->best_recalled / (double)K, c->best_hit_cos, c->best_hit_min, c->best_rec,
               c->best_rec / (double)K, c->best_exact, c->best_exact / (double)K);
    }
    printf("    (cos >= %g / >= %g: --cos-recalled / --cos-exact; \"cosine of those hits\": mean and lowest cosine\n"
           "     with the right value among the nearest-value hits at the N where their count is largest)\n",
           p->cos_rec, p->cos_exact);
    printf("\nchapter claim: \"a state of that size holds on the order of d cleanly separable associations\":\n");
    printf("  orthonormal keys: linear attention and DeltaNet recall all N <= K = d exactly (clean up to %.3g, %.3g);\n",
           ortho[M_LINEAR].clean_ratio, ortho[M_DELTANET].clean_ratio);
    printf("  least squares (the best K x V state for the pairs): %.1f = %.2fd recalled at cosine >= %g, the exact\n"
           "  capacity d of linearly independent keys; the one-pass delta-rule write (DeltaNet, beta = %g) holds\n"
           "  %.1f (%.2fd) at cosine >= %g and %.1f (%.2fd) at >= %g;\n", rnd[M_LSQ].best_exact,
           rnd[M_LSQ].best_exact / (double)K, p->cos_exact, p->beta, rnd[M_DELTANET].best_exact,
           rnd[M_DELTANET].best_exact / (double)K, p->cos_exact, rnd[M_DELTANET].best_rec,
           rnd[M_DELTANET].best_rec / (double)K, p->cos_rec);
    printf("  decoded by the nearest stored value, DeltaNet counts %.1f (%.2fd) at a mean cosine of %.2f (lowest %.2f),\n"
           "  linear attention %.1f (%.2fd) at %.2f (lowest %.2f): that count is not \"clean\" recall;\n",
           rnd[M_DELTANET].best_recalled, rnd[M_DELTANET].best_recalled / (double)K, rnd[M_DELTANET].best_hit_cos,
           rnd[M_DELTANET].best_hit_min, rnd[M_LINEAR].best_recalled, rnd[M_LINEAR].best_recalled / (double)K,
           rnd[M_LINEAR].best_hit_cos, rnd[M_LINEAR].best_hit_min);
    printf("  random keys, accuracy >= %g up to N/K = %.3g (linear attention), %.3g (DeltaNet), %.3g (Gated "
           "DeltaNet), %.3g (KDA);\n", p->clean, rnd[M_LINEAR].clean_ratio, rnd[M_DELTANET].clean_ratio,
           rnd[M_GDN].clean_ratio, rnd[M_KDA].clean_ratio);
    printf("  random keys, mean cosine >= %g up to N/K = %.3g, %.3g, %.3g, %.3g (same order): crosstalk starts "
           "well before d;\n", p->clean_cos, rnd[M_LINEAR].cos_ratio, rnd[M_DELTANET].cos_ratio,
           rnd[M_GDN].cos_ratio, rnd[M_KDA].cos_ratio);
    printf("  softmax attention (a cache that grows with N) recalls %.2fd at cosine >= %g at N = %.3gd.\n",
           rnd[M_SOFTMAX].best_exact / (double)K, p->cos_exact, (double)p->Nmax / (double)K);
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K = 64, .seeds = 20, .beta = 1.0, .gdn_alpha = 0.995, .hl_min = 32.0, .hl_max = 4096.0,
                .sm_scale = 0.0, .clean = 0.99, .clean_cos = 0.9, .cos_rec = 0.9, .cos_exact = 0.99,
                .ratios_s = "0.125,0.25,0.5,0.75,1,1.25,1.5,2,3,4"};
    lab_init(&x, "04_recall_capacity", "how many key->value associations a K x V state holds, per mechanism");
    lab_flag_size(&x, "K", &p.K, "key = value dimension d");
    lab_flag_string(&x, "ratios", &p.ratios_s, "comma-separated N/K values (N = round(ratio * K))");
    lab_flag_size(&x, "seeds", &p.seeds, "random instances per point (>= 2)");
    lab_flag_double(&x, "beta", &p.beta, "write strength of the delta-rule mechanisms, in (0, 2]");
    lab_flag_double(&x, "gdn-alpha", &p.gdn_alpha, "Gated DeltaNet decay per write, in (0, 1]");
    lab_flag_double(&x, "hl-min", &p.hl_min, "KDA: shortest channel half-life (tokens)");
    lab_flag_double(&x, "hl-max", &p.hl_max, "KDA: longest channel half-life (tokens)");
    lab_flag_double(&x, "softmax-scale", &p.sm_scale, "softmax scale on unit q, k (0: sqrt(K))");
    lab_flag_double(&x, "clean", &p.clean, "accuracy that counts as 'cleanly separable'");
    lab_flag_double(&x, "clean-cos", &p.clean_cos, "mean cosine that counts as a clean readout");
    lab_flag_double(&x, "cos-recalled", &p.cos_rec, "cosine at or above which one recall counts as recalled");
    lab_flag_double(&x, "cos-exact", &p.cos_exact, "cosine at or above which one recall counts as exact");
    lab_parse(&x, argc, argv);
    p.nr = lab_parse_list(p.ratios_s, p.ratios, MAX_N);
    for (size_t i = 0; i < p.nr; i++)
        if (!(p.ratios[i] > 0.0 && p.ratios[i] <= 64.0)) p.nr = 0;
    if (p.sm_scale == 0.0) p.sm_scale = sqrt((double)p.K);
    lab_need(&x, p.nr > 0, "--ratios", "1 to %d numbers, each in (0, 64], comma-separated", MAX_N);
    lab_need(&x, p.K >= 1, "--K", "K >= 1");
    lab_need(&x, p.seeds >= 2, "--seeds", "seeds >= 2");
    lab_need(&x, p.beta > 0 && p.beta <= 2, "--beta", "a value in (0, 2]");
    lab_need(&x, p.gdn_alpha > 0 && p.gdn_alpha <= 1, "--gdn-alpha", "a value in (0, 1]");
    lab_need(&x, p.hl_min > 0 && p.hl_min <= p.hl_max, "--hl-min, --hl-max",
             "0 < hl-min <= hl-max");
    lab_need(&x, p.sm_scale > 0, "--softmax-scale", "a value >= 0 (0: sqrt(K))");
    lab_need(&x, p.clean > 0 && p.clean <= 1, "--clean", "a value in (0, 1]");
    lab_need(&x, p.cos_rec > -1 && p.cos_rec <= 1, "--cos-recalled", "a value in (-1, 1]");
    lab_need(&x, p.cos_exact > -1 && p.cos_exact <= 1, "--cos-exact", "a value in (-1, 1]");
    p.V = p.K;
    p.Nmax = 0;
    for (size_t i = 0; i < p.nr; i++) {
        p.Ns[i] = (size_t)llround(p.ratios[i] * (double)p.K);
        if (p.Ns[i] < 2) p.Ns[i] = 2;
        if (p.Ns[i] > p.Nmax) p.Nmax = p.Ns[i];
    }
    gsl_rng *rng = lab_rng(&x);

    size_t cells = N_KEYS * N_MECH * p.nr * p.seeds;
    results r = {.d = calloc(cells, sizeof(decoded)), .nr = p.nr, .seeds = p.seeds};
    if (!r.d) return 1;
    capacity cap[N_KEYS][N_MECH];
    measure(&x, &p, rng, &r);
    write_results(&x, &p, &r, cap);
    print_summary(&x, &p, cap);
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    free(r.d);
    gsl_rng_free(rng);
    return 0;
}
