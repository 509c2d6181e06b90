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

int main(int argc, char **argv)
{
    lab_ctx x;
    size_t K = 64, seeds = 20;
    double beta = 1.0, gdn_alpha = 0.995, hl_min = 32.0, hl_max = 4096.0, sm_scale = 0.0, clean = 0.99, clean_cos = 0.9;
    const char *ratios_s = "0.125,0.25,0.5,0.75,1,1.25,1.5,2,3,4";
    lab_init(&x, "04_recall_capacity", "how many key->value associations a K x V state holds, per mechanism");
    lab_flag_size(&x, "K", &K, "key = value dimension d");
    lab_flag_string(&x, "ratios", &ratios_s, "comma-separated N/K values (N = round(ratio * K))");
    lab_flag_size(&x, "seeds", &seeds, "random instances per point (>= 2)");
    lab_flag_double(&x, "beta", &beta, "write strength of the delta-rule mechanisms, in (0, 2]");
    lab_flag_double(&x, "gdn-alpha", &gdn_alpha, "Gated DeltaNet decay per write, in (0, 1]");
    lab_flag_double(&x, "hl-min", &hl_min, "KDA: shortest channel half-life (tokens)");
    lab_flag_double(&x, "hl-max", &hl_max, "KDA: longest channel half-life (tokens)");
    lab_flag_double(&x, "softmax-scale", &sm_scale, "softmax scale on unit q, k (0: sqrt(K))");
    lab_flag_double(&x, "clean", &clean, "accuracy that counts as 'cleanly separable'");
    lab_flag_double(&x, "clean-cos", &clean_cos, "mean cosine that counts as a clean readout");
    lab_parse(&x, argc, argv);
    double ratios[MAX_N];
    size_t nr = lab_parse_list(ratios_s, ratios, MAX_N);
    for (size_t i = 0; i < nr; i++)
        if (!(ratios[i] > 0.0 && ratios[i] <= 64.0)) nr = 0;
    if (sm_scale == 0.0) sm_scale = sqrt((double)K);
    if (nr == 0 || K == 0 || seeds < 2 || !(beta > 0 && beta <= 2) || !(gdn_alpha > 0 && gdn_alpha <= 1) ||
        !(hl_min > 0 && hl_min <= hl_max) || !(sm_scale > 0) || !(clean > 0 && clean <= 1)) {
        fprintf(stderr, "04_recall_capacity: bad parameters (ratios > 0, at most %d; K >= 1; seeds >= 2; beta in "
                        "(0,2]; gdn-alpha in (0,1]; 0 < hl-min <= hl-max; softmax-scale > 0; clean in (0,1])\n",
                MAX_N);
        return 2;
    }
    size_t Ns[MAX_N];
    for (size_t i = 0; i < nr; i++) {
        Ns[i] = (size_t)llround(ratios[i] * (double)K);
        if (Ns[i] < 2) Ns[i] = 2;
    }
    size_t V = K, Nmax = 0;
    for (size_t i = 0; i < nr; i++) Nmax = Ns[i] > Nmax ? Ns[i] : Nmax;
    gsl_rng *rng = lab_rng(&x);

    /* results [keys][mech][ratio][seed] */
    size_t cells = N_KEYS * N_MECH * nr * seeds;
    double *acc = lab_zeros(&x, cells), *cosv = lab_zeros(&x, cells);
#define AT(kt, m, i, s) ((((kt) * N_MECH + (m)) * nr + (i)) * seeds + (s))

    size_t T2 = 2 * Nmax;
    double *keys = lab_zeros(&x, Nmax * K), *vals = lab_zeros(&x, Nmax * V);
    double *q = lab_zeros(&x, T2 * K), *k = lab_zeros(&x, T2 * K), *v = lab_zeros(&x, T2 * V);
    double *g1 = lab_zeros(&x, T2), *gk = lab_zeros(&x, T2 * K), *bt = lab_zeros(&x, T2);
    double *o = lab_zeros(&x, T2 * V), *kda_g = lab_zeros(&x, K);
    size_t total = N_KEYS * nr * seeds, done = 0;

    for (int kt = 0; kt < N_KEYS; kt++) {
        for (size_t i = 0; i < nr; i++) {
            size_t N = Ns[i];
            if (kt == KEYS_ORTHO && N > K) {
                done += seeds;
                continue;
            }
            for (size_t s = 0; s < seeds; s++, done++) {
                lab_progress(&x, "points", done, total);
                for (size_t n = 0; n < N; n++) {
                    if (kt == KEYS_RANDOM) lab_random_unit(rng, keys + n * K, K);
                    lab_random_unit(rng, vals + n * V, V);
                }
                if (kt == KEYS_ORTHO) orthonormal_keys(&x, rng, N, K, keys);
                /* per-channel KDA half-lives, log-uniform in [hl_min, hl_max] */
                for (size_t c = 0; c < K; c++)
                    kda_g[c] = -log(2.0) / exp(gsl_ran_flat(rng, log(hl_min), log(hl_max) + 1e-300));
                /* 2N tokens: N writes, then N reads that change nothing */
                size_t T = 2 * N;
                memset(k, 0, T * K * sizeof *k);
                memset(v, 0, T * V * sizeof *v);
                for (size_t n = 0; n < N; n++) {
                    memcpy(q + n * K, keys + n * K, K * sizeof *q);
                    memcpy(k + n * K, keys + n * K, K * sizeof *k);
                    memcpy(v + n * V, vals + n * V, V * sizeof *v);
                    memcpy(q + (N + n) * K, keys + n * K, K * sizeof *q);
                    bt[n] = beta, bt[N + n] = 0.0;
                    g1[n] = log(gdn_alpha), g1[N + n] = 0.0;
                    for (size_t c = 0; c < K; c++) gk[n * K + c] = kda_g[c], gk[(N + n) * K + c] = 0.0;
                }
                kdalab_dims d = {1, T, 1, K, V};
                double scale = kdalab_default_scale(K);
                static const kdalab_mechanism lib_mech[4] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                                             KDALAB_GATED_DELTANET, KDALAB_KDA};
                for (int m = 0; m < 4; m++) {
                    const double *g = m == M_GDN ? g1 : m == M_KDA ? gk : NULL;
                    lab_check(&x, kdalab_recurrent_f64(&d, lib_mech[m], scale, q, k, v, g,
                                                       m == M_LINEAR ? NULL : bt, NULL, o, NULL),
                              "kdalab_recurrent_f64");
                    decode(o + N * V, vals, N, V, &acc[AT(kt, m, i, s)], &cosv[AT(kt, m, i, s)]);
                }
                kdalab_kv_cache *cache = kdalab_kv_cache_new(1, K, V);
                if (!cache) {
                    fprintf(stderr, "04_recall_capacity: kdalab_kv_cache_new failed\n");
                    return 1;
                }
                for (size_t n = 0; n < N; n++)
                    lab_check(&x, kdalab_kv_cache_append(cache, keys + n * K, vals + n * V), "kv_cache_append");
                for (size_t n = 0; n < N; n++)
                    lab_check(&x, kdalab_kv_cache_attend(cache, sm_scale, keys + n * K, o + n * V),
                              "kv_cache_attend");
                kdalab_kv_cache_free(cache);
                decode(o, vals, N, V, &acc[AT(kt, M_SOFTMAX, i, s)], &cosv[AT(kt, M_SOFTMAX, i, s)]);
            }
        }
    }
    lab_progress(&x, "points", total, total);

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
    FILE *f = lab_tsv_open(&x, "04_recall_capacity", cols,
                           "K=V=%zu seeds=%zu beta=%g gdn_alpha=%g kda_half_life=loguniform[%g,%g] "
                           "softmax_scale=%g (on unit q,k) ratios=%s",
                           K, seeds, beta, gdn_alpha, hl_min, hl_max, sm_scale, ratios_s);
    /* summary quantities per (keys, mech) */
    double clean_ratio[N_KEYS][N_MECH], cos_ratio[N_KEYS][N_MECH], best_recalled[N_KEYS][N_MECH], acc_at1[N_KEYS][N_MECH],
        acc_at2[N_KEYS][N_MECH], acc_at4[N_KEYS][N_MECH];
    for (int kt = 0; kt < N_KEYS; kt++) {
        for (int m = 0; m < N_MECH; m++) {
            clean_ratio[kt][m] = 0.0, cos_ratio[kt][m] = 0.0, best_recalled[kt][m] = 0.0;
            acc_at1[kt][m] = acc_at2[kt][m] = acc_at4[kt][m] = NAN;
            int broken = 0, cbroken = 0; /* "clean" up to the first ratio that is not */
            for (size_t i = 0; i < nr; i++) {
                if (kt == KEYS_ORTHO && Ns[i] > K) continue;
                const double *a = &acc[AT(kt, m, i, 0)], *c = &cosv[AT(kt, m, i, 0)];
                double am = gsl_stats_mean(a, 1, seeds), cm = gsl_stats_mean(c, 1, seeds);
                double amin = gsl_stats_min(a, 1, seeds);
                fprintf(f, "%s\t%s\t%zu\t%.6g\t%.6f\t%.4f\t%.6f\t%.4f\t%.3f\t%.4f\n", keys_name[kt], mech_name[m],
                        Ns[i], (double)Ns[i] / (double)K, am, gsl_stats_sd(a, 1, seeds), cm,
                        gsl_stats_sd(c, 1, seeds), am * (double)Ns[i], amin);
                if (am >= clean && !broken) clean_ratio[kt][m] = (double)Ns[i] / (double)K;
                else broken = 1;
                if (cm >= clean_cos && !cbroken) cos_ratio[kt][m] = (double)Ns[i] / (double)K;
                else cbroken = 1;
                if (am * (double)Ns[i] > best_recalled[kt][m]) best_recalled[kt][m] = am * (double)Ns[i];
                if (Ns[i] == K) acc_at1[kt][m] = am;
                if (Ns[i] == 2 * K) acc_at2[kt][m] = am;
                if (Ns[i] == 4 * K) acc_at4[kt][m] = am;
            }
            fprintf(f, "\n\n");
        }
    }
    lab_tsv_close(&x, f);

    printf("04_recall_capacity — N associations in a %zu x %zu state, decode by nearest stored value\n", K, V);
    printf("  (%zu seeds, seed %lu; beta=%g, gated_deltanet alpha=%g, kda half-lives log-uniform [%g, %g], "
           "softmax scale %g on unit q,k)\n", seeds, x.seed, beta, gdn_alpha, hl_min, hl_max, sm_scale);
    for (int kt = 0; kt < N_KEYS; kt++) {
        printf("\n  %s keys:\n", keys_name[kt]);
        printf("    %-18s %10s %10s %16s %9s %9s %9s\n", "mechanism", "acc-clean", "cos-clean", "max recalled",
               "acc N=K", "acc N=2K", "acc N=4K");
        for (int m = 0; m < N_MECH; m++) {
            printf("    %-18s %10.3g %10.3g %9.1f (%.2gK)", mech_name[m], clean_ratio[kt][m], cos_ratio[kt][m],
                   best_recalled[kt][m], best_recalled[kt][m] / (double)K);
            const double at[3] = {acc_at1[kt][m], acc_at2[kt][m], acc_at4[kt][m]};
            for (int j = 0; j < 3; j++) /* "-": that N was not in the sweep (orthonormal: N <= K) */
                if (isnan(at[j]))
                    printf(" %9s", "-");
                else
                    printf(" %9.3f", at[j]);
            printf("\n");
        }
    }
    printf("\n  (acc-clean: the largest N/K of the sweep up to which the mean accuracy stays >= %g;\n"
           "   cos-clean: ... up to which the mean cosine of recall and right value stays >= %g;\n"
           "   max recalled: the largest mean number of correctly decoded associations, acc * N)\n", clean,
           clean_cos);
    printf("\nchapter claim: \"a state of that size holds on the order of d cleanly separable associations\":\n");
    printf("  orthonormal keys: linear attention and DeltaNet recall all N <= K = d exactly (clean up to %.3g, %.3g);\n",
           clean_ratio[KEYS_ORTHO][M_LINEAR], clean_ratio[KEYS_ORTHO][M_DELTANET]);
    printf("  random keys, accuracy >= %g up to N/K = %.3g (linear attention), %.3g (DeltaNet), %.3g (Gated "
           "DeltaNet), %.3g (KDA);\n", clean, clean_ratio[KEYS_RANDOM][M_LINEAR],
           clean_ratio[KEYS_RANDOM][M_DELTANET], clean_ratio[KEYS_RANDOM][M_GDN], clean_ratio[KEYS_RANDOM][M_KDA]);
    printf("  random keys, mean cosine >= %g up to N/K = %.3g, %.3g, %.3g, %.3g (same order): crosstalk starts "
           "well before d;\n", clean_cos, cos_ratio[KEYS_RANDOM][M_LINEAR], cos_ratio[KEYS_RANDOM][M_DELTANET],
           cos_ratio[KEYS_RANDOM][M_GDN], cos_ratio[KEYS_RANDOM][M_KDA]);
    printf("  at most %.2gK associations are recalled by any recurrent mechanism, while softmax attention "
           "recalls %.2gK at N=%.3gK.\n",
           fmax(fmax(best_recalled[KEYS_RANDOM][M_LINEAR], best_recalled[KEYS_RANDOM][M_DELTANET]),
                fmax(best_recalled[KEYS_RANDOM][M_GDN], best_recalled[KEYS_RANDOM][M_KDA])) / (double)K,
           best_recalled[KEYS_RANDOM][M_SOFTMAX] / (double)K, (double)Nmax / (double)K);
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    free(acc), free(cosv), free(keys), free(vals), free(q), free(k), free(v), free(g1), free(gk), free(bt),
        free(o), free(kda_g);
    gsl_rng_free(rng);
    return 0;
}
