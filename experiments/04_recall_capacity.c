/*
 * 04_recall_capacity — how many associations a K x V state holds (chapter 06,
 * "The admission": "a state of that size holds on the order of d cleanly
 * separable associations, because you only get d mutually orthogonal
 * directions in R^d. Gating changes which associations survive. It does not
 * change how many.").
 *
 * One head, K = V = d. Write N key -> value pairs, keys random unit vectors
 * (and, where N <= K, orthonormal: the Q of a Gaussian matrix, gsl_linalg_QR),
 * values random unit vectors. Then query every key and decode by the nearest
 * stored value (largest cosine); count a hit when it is the right one.
 *
 *   linear attention   S = sum k v^T
 *   DeltaNet           beta = --beta (1: each write replaces what its key reads)
 *   Gated DeltaNet     beta as DeltaNet, scalar decay alpha = --gdn-alpha per write
 *   KDA                beta as DeltaNet, per-channel decay: channel c keeps a
 *                      half-life drawn log-uniform in [--hl-min, --hl-max]
 *   softmax attention  a KV cache of the N pairs; q, k of norm sqrt(K) (unit
 *                      entries, as after RMSNorm) with the default scale
 *                      K^-1/2, i.e. scale sqrt(K) on the unit vectors
 *                      (--softmax-scale)
 * The recurrent mechanisms run kdalab_recurrent_f64 on 2N tokens: N writes,
 * then N reads (k = 0, v = 0, beta = 0, g = 0: they leave the state as it is)
 * whose outputs o = s S^T q are the recalls. Softmax attention uses
 * kdalab_kv_cache_attend. Accuracy and the mean cosine between the recall and
 * the right value, mean and standard deviation over --seeds seeds (gsl_stats).
 *
 * Outputs (DIR = --out):
 *   04_recall_capacity.tsv   one line per (keys, mechanism, N); gnuplot blocks
 *                            (separated by two blank lines) in the order
 *                            keys = random, orthonormal; mechanism = linear
 *                            attention, DeltaNet, Gated DeltaNet, KDA, softmax
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "kdalab.h"

enum { M_LINEAR = 0, M_DELTANET, M_GDN, M_KDA, M_SOFTMAX, N_MECH };
static const char *const mech_name[N_MECH] = {"linear_attention", "deltanet", "gated_deltanet", "kda",
                                              "softmax_attention"};
enum { KEYS_RANDOM = 0, KEYS_ORTHO, N_KEYS };
static const char *const keys_name[N_KEYS] = {"random", "orthonormal"};

#define MAX_N 64

/* N orthonormal keys in R^K (N <= K): the first N columns of the Q factor of
 * a K x N Gaussian matrix. keys is [N, K]. */
static void orthonormal_keys(const lab_ctx *x, gsl_rng *rng, size_t N, size_t K, double *keys)
{
    gsl_matrix *A = gsl_matrix_alloc(K, N), *Q = gsl_matrix_alloc(K, K), *R = gsl_matrix_alloc(K, N);
    gsl_vector *tau = gsl_vector_alloc(N);
    if (!A || !Q || !R || !tau) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < N; j++) gsl_matrix_set(A, i, j, gsl_ran_gaussian(rng, 1.0));
    gsl_linalg_QR_decomp(A, tau);
    gsl_linalg_QR_unpack(A, tau, Q, R);
    for (size_t j = 0; j < N; j++)
        for (size_t i = 0; i < K; i++) keys[j * K + i] = gsl_matrix_get(Q, i, j);
    gsl_matrix_free(A), gsl_matrix_free(Q), gsl_matrix_free(R), gsl_vector_free(tau);
}

/* Decode N recalls o [N,V] against the stored values [N,V]: fraction whose
 * nearest value (largest cosine) is the right one, and the mean cosine with
 * the right value. A zero recall counts as a miss with cosine 0. */
static void decode(const double *o, const double *vals, size_t N, size_t V, double *acc, double *mcos)
{
    size_t hits = 0;
    double sc = 0.0;
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
        hits += best == i;
        sc += ci;
    }
    *acc = (double)hits / (double)N;
    *mcos = sc / (double)N;
}

/* The command-line parameters; ratios[] and Ns[] are derived from ratios_s. */
typedef struct {
    size_t K, V, seeds;
    double beta, gdn_alpha, hl_min, hl_max, sm_scale, clean, clean_cos;
    const char *ratios_s;
    double ratios[MAX_N];
    size_t nr, Ns[MAX_N], Nmax; /* N = round(ratio * K), at least 2; the largest */
} params;

/* Accuracy and mean cosine of every (keys, mechanism, ratio, seed). */
typedef struct {
    double *acc, *cos;
    size_t nr, seeds;
} results;

static size_t at(const results *r, int kt, int m, size_t i, size_t s)
{
    return (((size_t)kt * N_MECH + (size_t)m) * r->nr + i) * r->seeds + s;
}

/* Buffers for one instance of 2 Nmax tokens. */
typedef struct {
    double *keys, *vals, *q, *k, *v, *g1, *gk, *bt, *o, *kda_g;
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
    if (kt == KEYS_ORTHO) orthonormal_keys(x, rng, N, K, w->keys);
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
    static const kdalab_mechanism lib_mech[4] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                                 KDALAB_GATED_DELTANET, KDALAB_KDA};
    for (int m = M_LINEAR; m <= M_KDA; m++) {
        const double *g = m == M_GDN ? w->g1 : m == M_KDA ? w->gk : NULL;
        lab_check(x, kdalab_recurrent_f64(&d, lib_mech[m], scale, w->q, w->k, w->v, g,
                                          m == M_LINEAR ? NULL : w->bt, NULL, w->o, NULL),
                  "kdalab_recurrent_f64");
        decode(w->o + N * V, w->vals, N, V, &r->acc[at(r, kt, m, i, s)], &r->cos[at(r, kt, m, i, s)]);
    }
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
    decode(w->o, w->vals, N, V, &r->acc[at(r, kt, M_SOFTMAX, i, s)], &r->cos[at(r, kt, M_SOFTMAX, i, s)]);
}

/* Every (keys, ratio, seed); orthonormal keys only where N <= K. */
static void measure(lab_ctx *x, const params *p, gsl_rng *rng, results *r)
{
    size_t K = p->K, V = p->V, T2 = 2 * p->Nmax;
    workspace w = {
        .keys = lab_zeros(x, p->Nmax * K), .vals = lab_zeros(x, p->Nmax * V),
        .q = lab_zeros(x, T2 * K), .k = lab_zeros(x, T2 * K), .v = lab_zeros(x, T2 * V),
        .g1 = lab_zeros(x, T2), .gk = lab_zeros(x, T2 * K), .bt = lab_zeros(x, T2),
        .o = lab_zeros(x, T2 * V), .kda_g = lab_zeros(x, K)};
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
        free(w.o), free(w.kda_g);
}

/* What the printed summary reports per (keys, mechanism). */
typedef struct {
    double clean_ratio;    /* largest N/K up to which the mean accuracy stays >= clean   */
    double cos_ratio;      /* the same for the mean cosine and clean-cos                 */
    double best_recalled;  /* largest mean number of correctly decoded associations      */
    double acc_at[3];      /* mean accuracy at N = K, 2K, 4K (NAN: not in the sweep)     */
} capacity;

/* 04_recall_capacity.tsv, one block per (keys, mechanism), and the summary. */
static void write_results(lab_ctx *x, const params *p, const results *r,
                          capacity cap[N_KEYS][N_MECH])
{
    size_t K = p->K, seeds = p->seeds;
    static const char *const cols[] = {
        "keys", "random | orthonormal",
        "mechanism", "linear_attention | deltanet | gated_deltanet | kda | softmax_attention",
        "N", "associations written",
        "N_over_K", "N / K (1)",
        "acc", "fraction of keys whose recall is nearest to the right value, mean over seeds (1)",
        "acc_sd", "its standard deviation over seeds (1)",
        "cos", "cosine between recall and the right value, mean over keys and seeds (1)",
        "cos_sd", "standard deviation over seeds of the per-seed mean cosine (1)",
        "recalled", "acc * N: associations recalled, mean over seeds",
        "acc_min", "lowest per-seed accuracy (1)", NULL};
    FILE *f = lab_tsv_open(x, "04_recall_capacity", cols,
                           "K=V=%zu seeds=%zu beta=%g gdn_alpha=%g kda_half_life=loguniform[%g,%g] "
                           "softmax_scale=%g (on unit q,k) ratios=%s",
                           K, seeds, p->beta, p->gdn_alpha, p->hl_min, p->hl_max, p->sm_scale, p->ratios_s);
    for (int kt = 0; kt < N_KEYS; kt++) {
        for (int m = 0; m < N_MECH; m++) {
            capacity *c = &cap[kt][m];
            c->clean_ratio = 0.0, c->cos_ratio = 0.0, c->best_recalled = 0.0;
            c->acc_at[0] = c->acc_at[1] = c->acc_at[2] = NAN;
            int broken = 0, cbroken = 0; /* "clean" up to the first ratio that is not */
            for (size_t i = 0; i < p->nr; i++) {
                size_t N = p->Ns[i];
                if (kt == KEYS_ORTHO && N > K) continue;
                const double *a = &r->acc[at(r, kt, m, i, 0)], *cs = &r->cos[at(r, kt, m, i, 0)];
                double am = gsl_stats_mean(a, 1, seeds), cm = gsl_stats_mean(cs, 1, seeds);
                double amin = gsl_stats_min(a, 1, seeds);
                fprintf(f, "%s\t%s\t%zu\t%.6g\t%.6f\t%.4f\t%.6f\t%.4f\t%.3f\t%.4f\n", keys_name[kt], mech_name[m],
                        N, (double)N / (double)K, am, gsl_stats_sd(a, 1, seeds), cm,
                        gsl_stats_sd(cs, 1, seeds), am * (double)N, amin);
                if (am >= p->clean && !broken) c->clean_ratio = (double)N / (double)K;
                else broken = 1;
                if (cm >= p->clean_cos && !cbroken) c->cos_ratio = (double)N / (double)K;
                else cbroken = 1;
                if (am * (double)N > c->best_recalled) c->best_recalled = am * (double)N;
                if (N == K) c->acc_at[0] = am;
                if (N == 2 * K) c->acc_at[1] = am;
                if (N == 4 * K) c->acc_at[2] = am;
            }
            fprintf(f, "\n\n");
        }
    }
    lab_tsv_close(x, f);
}

static void print_summary(const lab_ctx *x, const params *p, capacity cap[N_KEYS][N_MECH])
{
    size_t K = p->K;
    printf("04_recall_capacity — N associations in a %zu x %zu state, decode by nearest stored value\n", K, p->V);
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
    printf("\nchapter claim: \"a state of that size holds on the order of d cleanly separable associations\":\n");
    printf("  orthonormal keys: linear attention and DeltaNet recall all N <= K = d exactly (clean up to %.3g, %.3g);\n",
           ortho[M_LINEAR].clean_ratio, ortho[M_DELTANET].clean_ratio);
    printf("  random keys, accuracy >= %g up to N/K = %.3g (linear attention), %.3g (DeltaNet), %.3g (Gated "
           "DeltaNet), %.3g (KDA);\n", p->clean, rnd[M_LINEAR].clean_ratio, rnd[M_DELTANET].clean_ratio,
           rnd[M_GDN].clean_ratio, rnd[M_KDA].clean_ratio);
    printf("  random keys, mean cosine >= %g up to N/K = %.3g, %.3g, %.3g, %.3g (same order): crosstalk starts "
           "well before d;\n", p->clean_cos, rnd[M_LINEAR].cos_ratio, rnd[M_DELTANET].cos_ratio,
           rnd[M_GDN].cos_ratio, rnd[M_KDA].cos_ratio);
    printf("  at most %.2gK associations are recalled by any recurrent mechanism, while softmax attention "
           "recalls %.2gK at N=%.3gK.\n",
           fmax(fmax(rnd[M_LINEAR].best_recalled, rnd[M_DELTANET].best_recalled),
                fmax(rnd[M_GDN].best_recalled, rnd[M_KDA].best_recalled)) / (double)K,
           rnd[M_SOFTMAX].best_recalled / (double)K, (double)p->Nmax / (double)K);
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K = 64, .seeds = 20, .beta = 1.0, .gdn_alpha = 0.995, .hl_min = 32.0, .hl_max = 4096.0,
                .sm_scale = 0.0, .clean = 0.99, .clean_cos = 0.9,
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
    lab_parse(&x, argc, argv);
    p.nr = lab_parse_list(p.ratios_s, p.ratios, MAX_N);
    for (size_t i = 0; i < p.nr; i++)
        if (!(p.ratios[i] > 0.0 && p.ratios[i] <= 64.0)) p.nr = 0;
    if (p.sm_scale == 0.0) p.sm_scale = sqrt((double)p.K);
    if (p.nr == 0 || p.K == 0 || p.seeds < 2 || !(p.beta > 0 && p.beta <= 2) ||
        !(p.gdn_alpha > 0 && p.gdn_alpha <= 1) || !(p.hl_min > 0 && p.hl_min <= p.hl_max) ||
        !(p.sm_scale > 0) || !(p.clean > 0 && p.clean <= 1)) {
        fprintf(stderr, "04_recall_capacity: bad parameters (ratios > 0, at most %d; K >= 1; seeds >= 2; beta in "
                        "(0,2]; gdn-alpha in (0,1]; 0 < hl-min <= hl-max; softmax-scale > 0; clean in (0,1])\n",
                MAX_N);
        return 2;
    }
    p.V = p.K;
    p.Nmax = 0;
    for (size_t i = 0; i < p.nr; i++) {
        p.Ns[i] = (size_t)llround(p.ratios[i] * (double)p.K);
        if (p.Ns[i] < 2) p.Ns[i] = 2;
        if (p.Ns[i] > p.Nmax) p.Nmax = p.Ns[i];
    }
    gsl_rng *rng = lab_rng(&x);

    size_t cells = N_KEYS * N_MECH * p.nr * p.seeds;
    results r = {.acc = lab_zeros(&x, cells), .cos = lab_zeros(&x, cells), .nr = p.nr, .seeds = p.seeds};
    capacity cap[N_KEYS][N_MECH];
    measure(&x, &p, rng, &r);
    write_results(&x, &p, &r, cap);
    print_summary(&x, &p, cap);
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    free(r.acc), free(r.cos);
    gsl_rng_free(rng);
    return 0;
}
