/*
 * 09_dense_cost — what a general transition costs (seed chapter, "Why a
 * diagonal, and not any matrix?": "A general A_t has no such collapse. The
 * product A_C ... A_1 is C dense matrix multiplies that must happen in order").
 *
 * Cost per token, in floating-point operations (counted from the algorithm,
 * a multiply-add = 2) and in measured CPU time, of
 *   dense recurrence   S <- A_t S + k_t v_t^T, o_t = S^T q_t with a dense
 *                      K x K transition A_t: 2K^2 V + 4KV per token, and
 *                      sequential (this experiment's own loop, plain C)
 *   dense products     what a chunked form of it would have to form: the
 *                      running product A_t ... A_1 inside each chunk, one
 *                      K x K x K product per token: 2K^3 (this experiment)
 *   KDA recurrent      kdalab_recurrent_f64: the DPLR step, O(KV) per token
 *   KDA chunkwise      kdalab_chunk_f64 (safe sub-chunks of 16) with chunk C:
 *                      3CK + 2CV + 6KV per token (steps 1-7 of REFERENCE.md:
 *                      Gram matrices C^2 K... per chunk, the UT solve, four
 *                      C x K x V products), decay exponentials not counted
 *   DPLR chunkwise     the library's DPLR row (the general transition
 *                      Diag(exp g) + b a^T, RWKV-7's a, b), chunkwise at C = 64:
 *                      4CK + 4CV + 8KV per token (four decayed products, one
 *                      solve, REFERENCE.md "The boundary"): the most general
 *                      transition that keeps the collapse, against the dense one
 * as K grows (V = K) and, for the chunkwise form, as C grows. The ratio
 * reported is dense recurrence / KDA chunkwise, per token, in flops and in
 * CPU time. Every series runs in one thread, in float64.
 *
 * Timing: process CPU time (lab_cpu_now, kdalab on one thread) over --reps rounds
 * (at least 5); each round times every point once, so a slow spell on the
 * machine hits one round of every series rather than every round of one. A
 * ratio is formed within each round, and the printout gives its median and
 * range over the rounds ("spread:" lines); the tables are the medians. Each point runs enough tokens
 * for about --work flops (at least one chunk, at most --Tmax tokens), so a
 * point takes a similar time whatever its cost per token. The dense series
 * cycle through a pool of 4 random transitions, A = 0.5 G / sqrt(K) with G
 * standard normal (spectral radius about 0.5: the state stays bounded and
 * no value goes subnormal). Times are this machine's; ratios are the result.
 *
 * Outputs (DIR = --out):
 *   09_dense_cost.tsv        per (series, K, C): tokens, flops/token, ns/token
 *   09_dense_cost_ratio.tsv  per (K, C): dense recurrence / KDA chunkwise
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "kdalab.h"

#define MAX_LIST 16
#define MAX_REPS 32
#define POOL 4

typedef struct {
    const char *Ks_s, *Cs_s;
    double Ks[MAX_LIST], Cs[MAX_LIST];
    size_t nK, nC, reps, Tmax;
    double work;
} params;

typedef enum { DENSE_REC = 0, DENSE_PROD, KDA_REC, KDA_CHUNK, DPLR_CHUNK } series_kind;
static const char *const series_name[] = {"dense_recurrence", "dense_products", "kda_recurrent",
                                          "kda_chunkwise", "dplr_chunkwise"};

/* Flops per token of each series (multiply-add = 2), V = value dim. */
static double flops_per_token(series_kind s, double K, double V, double C)
{
    switch (s) {
    case DENSE_REC: return 2 * K * K * V + 4 * K * V;
    case DENSE_PROD: return 2 * K * K * K;
    case KDA_REC: return 7 * K * V; /* decay KV, S'^T k 2KV, rank-one update 2KV, read 2KV */
    case KDA_CHUNK: return 3 * C * K + 2 * C * V + 6 * K * V;
    case DPLR_CHUNK: return 4 * C * K + 4 * C * V + 8 * K * V;
    }
    return NAN;
}

/* The inputs of one K: T_max tokens of q, k, v, beta, g and the pool of A. */
typedef struct {
    size_t K, V, T;
    double *q, *k, *v, *beta, *g, *o, *A, *S, *P, *tmp;
    double *a, *b; /* DPLR: RWKV-7's a = -kk, b = kk * alpha */
} inputs;

static void inputs_make(const lab_ctx *x, inputs *in, gsl_rng *rng)
{
    size_t K = in->K, V = in->V, T = in->T;
    in->q = lab_zeros(x, T * K);
    in->k = lab_zeros(x, T * K);
    in->v = lab_zeros(x, T * V);
    in->beta = lab_zeros(x, T);
    in->g = lab_zeros(x, T * K);
    in->o = lab_zeros(x, T * V);
    in->A = lab_zeros(x, POOL * K * K);
    in->S = lab_zeros(x, K * (K > V ? K : V));
    in->P = lab_zeros(x, K * K);
    in->tmp = lab_zeros(x, K * (K > V ? K : V));
    for (size_t t = 0; t < T; t++) {
        lab_random_unit(rng, in->q + t * K, K);
        lab_random_unit(rng, in->k + t * K, K);
        for (size_t j = 0; j < V; j++) in->v[t * V + j] = gsl_ran_gaussian(rng, 1.0);
        in->beta[t] = gsl_rng_uniform(rng);
        for (size_t c = 0; c < K; c++) in->g[t * K + c] = -0.1 * gsl_rng_uniform(rng);
    }
    for (size_t i = 0; i < POOL * K * K; i++)
        in->A[i] = 0.5 * gsl_ran_gaussian(rng, 1.0) / sqrt((double)K);
    in->a = lab_zeros(x, T * K);
    in->b = lab_zeros(x, T * K);
    for (size_t t = 0; t < T; t++)
        lab_random_rwkv7_ab(rng, in->a + t * K, in->b + t * K, K);
}

static void inputs_free(inputs *in)
{
    double *d[] = {in->q,  in->k, in->v, in->beta, in->g,  in->o,
                   in->A,  in->S, in->P, in->tmp,  in->a,  in->b};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) free(d[i]);
}

/* out (n x m) = A (n x n) B (n x m), row-major, i-k-j order. */
static void matmul(const double *A, const double *B, double *out, size_t n, size_t m)
{
    memset(out, 0, n * m * sizeof *out);
    for (size_t i = 0; i < n; i++)
        for (size_t l = 0; l < n; l++) {
            double a = A[i * n + l];
            const double *b = B + l * m;
            double *r = out + i * m;
            for (size_t j = 0; j < m; j++) r[j] += a * b[j];
        }
}

/* The dense recurrence over T tokens: S <- A_t S + k v^T, o = S^T q. */
static void dense_recurrence(inputs *in, size_t T)
{
    const size_t K = in->K, V = in->V;
    memset(in->S, 0, K * V * sizeof *in->S);
    for (size_t t = 0; t < T; t++) {
        matmul(in->A + (t % POOL) * K * K, in->S, in->tmp, K, V);
        const double *kt = in->k + t * K, *vt = in->v + t * V, *qt = in->q + t * K;
        for (size_t c = 0; c < K; c++)
            for (size_t j = 0; j < V; j++) in->S[c * V + j] = in->tmp[c * V + j] + kt[c] * vt[j];
        double *ot = in->o + t * V;
        memset(ot, 0, V * sizeof *ot);
        for (size_t c = 0; c < K; c++)
            for (size_t j = 0; j < V; j++) ot[j] += in->S[c * V + j] * qt[c];
    }
}

/* The running products A_t ... A_1 inside chunks of C (reset to I at each). */
static void dense_products(inputs *in, size_t T, size_t C)
{
    const size_t K = in->K;
    for (size_t t = 0; t < T; t++) {
        if (t % C == 0) {
            memset(in->P, 0, K * K * sizeof *in->P);
            for (size_t c = 0; c < K; c++) in->P[c * K + c] = 1.0;
        }
        matmul(in->A + (t % POOL) * K * K, in->P, in->tmp, K, K);
        memcpy(in->P, in->tmp, K * K * sizeof *in->P);
    }
}

/* CPU seconds of one run of series s on the first T tokens. */
static double time_one(const lab_ctx *x, series_kind s, inputs *in, size_t T, size_t C)
{
    kdalab_dims d = {.B = 1, .T = T, .H = 1, .K = in->K, .V = in->V};
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = C ? C : 64;
    double scale = kdalab_default_scale(in->K), t0 = lab_cpu_now();
    switch (s) {
    case DENSE_REC: dense_recurrence(in, T); break;
    case DENSE_PROD: dense_products(in, T, C ? C : 64); break;
    case KDA_REC:
        lab_check(x, kdalab_recurrent_f64(&d, KDALAB_KDA, scale, in->q, in->k, in->v, in->g,
                                          in->beta, NULL, in->o, NULL), "recurrent_f64");
        break;
    case KDA_CHUNK:
        lab_check(x, kdalab_chunk_f64(&d, KDALAB_KDA, scale, in->q, in->k, in->v, in->g,
                                      in->beta, NULL, in->o, NULL, &op, NULL), "chunk_f64");
        break;
    case DPLR_CHUNK: {
        const kdalab_call c = {.dims = d, .HV = 1, .mech = KDALAB_DPLR, .scale = scale,
                               .form = KDALAB_FORM_CHUNK, .opts = &op};
        const kdalab_tensors_f64 t = {.q = in->q, .k = in->k, .v = in->v, .g = in->g,
                                      .a = in->a, .b = in->b, .o = in->o};
        lab_check(x, kdalab_run_f64(&c, &t, NULL), "run_f64 dplr");
        break;
    }
    }
    return lab_cpu_now() - t0;
}

/* One measured point. */
typedef struct {
    series_kind s;
    size_t K, V, C, T;
    double flops, secs;      /* secs: the median over the rounds */
    double round[MAX_REPS];  /* CPU seconds in each round */
} point;

#define MAX_POINTS (MAX_LIST * (MAX_LIST + 3))

/* Tokens for about p->work flops: a multiple of C, between C and Tmax. */
static size_t tokens_for(const params *p, double flops, size_t C)
{
    double want = ceil(p->work / flops);
    size_t unit = C ? C : 1, T = (size_t)want;
    if (T > p->Tmax) T = p->Tmax;
    T = (T + unit - 1) / unit * unit;
    return T < unit ? unit : T;
}

static size_t measure(lab_ctx *x, const params *p, gsl_rng *rng, point *pts)
{
    size_t np = 0;
    for (size_t ki = 0; ki < p->nK; ki++) {
        size_t K = (size_t)p->Ks[ki], V = K;
        size_t first = np;
        pts[np++] = (point){.s = DENSE_REC, .K = K, .V = V, .C = 0};
        pts[np++] = (point){.s = DENSE_PROD, .K = K, .V = V, .C = 64};
        pts[np++] = (point){.s = KDA_REC, .K = K, .V = V, .C = 0};
        for (size_t ci = 0; ci < p->nC; ci++)
            pts[np++] = (point){.s = KDA_CHUNK, .K = K, .V = V, .C = (size_t)p->Cs[ci]};
        pts[np++] = (point){.s = DPLR_CHUNK, .K = K, .V = V, .C = 64};
        size_t Tneed = 1;
        for (size_t i = first; i < np; i++) {
            pts[i].flops = flops_per_token(pts[i].s, (double)K, (double)V, (double)pts[i].C);
            pts[i].T = tokens_for(p, pts[i].flops,
                                  pts[i].s == KDA_CHUNK || pts[i].s == DPLR_CHUNK ? pts[i].C : 0);
            if (pts[i].T > Tneed) Tneed = pts[i].T;
        }
        inputs in = {.K = K, .V = V, .T = Tneed};
        inputs_make(x, &in, rng);
        for (size_t r = 0; r < p->reps; r++)
            for (size_t i = first; i < np; i++) {
                pts[i].round[r] = time_one(x, pts[i].s, &in, pts[i].T, pts[i].C);
                lab_progress(x, "points", (ki * p->reps + r) * (np - first) + i - first + 1,
                             p->nK * p->reps * (np - first));
            }
        inputs_free(&in);
        for (size_t i = first; i < np; i++) pts[i].secs = lab_spread_of(pts[i].round, p->reps).median;
    }
    return np;
}

/* ---- output ------------------------------------------------------------------------------ */

static const point *find(const point *pts, size_t np, series_kind s, size_t K, size_t C)
{
    for (size_t i = 0; i < np; i++)
        if (pts[i].s == s && pts[i].K == K && (s != KDA_CHUNK || pts[i].C == C)) return &pts[i];
    /* (the DPLR series has one chunk size, 64) */
    return NULL;
}

static void write_results(lab_ctx *x, const params *p, const point *pts, size_t np)
{
    static const char *const cols[] = {
        "series", "dense_recurrence, dense_products (chunk of 64), kda_recurrent, kda_chunkwise, "
                  "dplr_chunkwise (C = 64)",
        "K", "key dimension (the dense transition is K x K)",
        "V", "value dimension (= K)",
        "C", "chunk size (kda_chunkwise; dense_products resets its product every C = 64; 0: none)",
        "tokens", "tokens run per timing",
        "flops_per_token", "counted from the algorithm (multiply-add = 2)",
        "cpu_s", "median process CPU time over the rounds, s",
        "ns_per_token", "cpu_s / tokens, ns",
        "gflops", "flops_per_token * tokens / cpu_s / 1e9 (achieved rate)",
        "cpu_s_min", "the fastest round, s",
        "cpu_s_max", "the slowest round, s",
        NULL};
    FILE *f = lab_tsv_open(x, "09_dense_cost", cols,
                           "float64, one thread, reps=%zu, work=%g flops per point, Tmax=%zu; "
                           "KDA: unit q,k, v~N(0,1), beta~U(0,1), g~U(-0.1,0); dense: pool of "
                           "%d A = 0.5 N(0,1)/sqrt(K); CPU time", p->reps, p->work, p->Tmax, POOL);
    /* one block per series (per chunk size for the chunkwise form), K ascending */
    for (int s = 0; s <= DPLR_CHUNK; s++)
        for (size_t ci = 0; ci < (s == KDA_CHUNK ? p->nC : 1); ci++) {
            for (size_t i = 0; i < np; i++) {
                const point *q = &pts[i];
                if ((int)q->s != s || (s == KDA_CHUNK && q->C != (size_t)p->Cs[ci])) continue;
                lab_spread sp = lab_spread_of(q->round, p->reps);
                fprintf(f, "%s\t%zu\t%zu\t%zu\t%zu\t%.6g\t%.6e\t%.2f\t%.4f\t%.6e\t%.6e\n",
                        series_name[s], q->K, q->V, q->C, q->T, q->flops, q->secs,
                        1e9 * q->secs / (double)q->T, q->flops * (double)q->T / q->secs / 1e9, sp.lo,
                        sp.hi);
            }
            fprintf(f, "\n\n");
        }
    lab_tsv_close(x, f);

    static const char *const rcols[] = {
        "K", "key dimension (V = K)",
        "C", "chunk size of the KDA chunkwise form",
        "flops_ratio", "flops per token: dense recurrence / KDA chunkwise",
        "time_ratio", "CPU time per token: dense recurrence / KDA chunkwise (this machine; median of the rounds' medians)",
        "time_ratio_rec", "CPU time per token: dense recurrence / KDA recurrent",
        "prod_over_rec", "CPU time per token: dense products / dense recurrence",
        NULL};
    FILE *fr = lab_tsv_open(x, "09_dense_cost_ratio", rcols, "ratios of 09_dense_cost.tsv");
    printf("\nCost per token, float64, one thread (CPU time measured on this machine, the median "
           "of %zu rounds; flops counted):\n", p->reps);
    printf("%5s %5s %14s %14s %14s %14s %10s %10s\n", "K", "C", "dense ns/tok", "KDA-chunk ns",
           "dense flops", "KDA flops", "flops x", "time x");
    for (size_t ci = 0; ci < p->nC; ci++) {
        for (size_t ki = 0; ki < p->nK; ki++) {
            size_t K = (size_t)p->Ks[ki], C = (size_t)p->Cs[ci];
            const point *dr = find(pts, np, DENSE_REC, K, 0), *dp = find(pts, np, DENSE_PROD, K, 0),
                        *kr = find(pts, np, KDA_REC, K, 0), *kc = find(pts, np, KDA_CHUNK, K, C);
            double nd = dr->secs / (double)dr->T, nc = kc->secs / (double)kc->T,
                   nr = kr->secs / (double)kr->T, npd = dp->secs / (double)dp->T;
            fprintf(fr, "%zu\t%zu\t%.4f\t%.4f\t%.4f\t%.4f\n", K, C, dr->flops / kc->flops, nd / nc,
                    nd / nr, npd / nd);
            printf("%5zu %5zu %14.1f %14.1f %14.4g %14.4g %10.1f %10.1f\n", K, C, 1e9 * nd,
                   1e9 * nc, dr->flops, kc->flops, dr->flops / kc->flops, nd / nc);
        }
        fprintf(fr, "\n\n");
    }
    lab_tsv_close(x, fr);
}

/* Per round: a / b, each per token. */
static lab_spread round_ratio(const params *p, const point *a, const point *b)
{
    double v[MAX_REPS];
    for (size_t r = 0; r < p->reps; r++)
        v[r] = (a->round[r] / (double)a->T) / (b->round[r] / (double)b->T);
    return lab_spread_of(v, p->reps);
}

static void print_verdict(const params *p, const point *pts, size_t np)
{
    size_t Kmax = (size_t)p->Ks[p->nK - 1], Kmin = (size_t)p->Ks[0];
    const point *d1 = find(pts, np, DENSE_REC, Kmin, 0), *d2 = find(pts, np, DENSE_REC, Kmax, 0);
    lab_spread s_dense = round_ratio(p, d2, d1);
    double growth_dense = s_dense.median;
    size_t C64 = 0;
    for (size_t ci = 0; ci < p->nC; ci++)
        if ((size_t)p->Cs[ci] == 64) C64 = 64;
    if (!C64) C64 = (size_t)p->Cs[0];
    const point *c1 = find(pts, np, KDA_CHUNK, Kmin, C64), *c2 = find(pts, np, KDA_CHUNK, Kmax, C64);
    lab_spread s_kda = round_ratio(p, c2, c1), s_max = round_ratio(p, d2, c2),
               s_min = round_ratio(p, d1, c1);
    const point *pp = find(pts, np, DENSE_PROD, Kmax, 0);
    lab_spread s_prod = round_ratio(p, pp, d2);
    double growth_kda = s_kda.median, ratio_max = s_max.median, ratio_min = s_min.median,
           prod = s_prod.median;
    double r = (double)Kmax / (double)Kmin;
    char what[160];
    printf("\nEach ratio below is formed within a round (CPU time per token) and summarised over the "
           "%zu rounds:\n", p->reps);
    snprintf(what, sizeof what, "dense recurrence, time per token K = %zu -> %zu", Kmin, Kmax);
    lab_print_spread(what, s_dense, 1.0, 0, "x");
    snprintf(what, sizeof what, "KDA chunkwise (C = %zu), time per token K = %zu -> %zu", C64,
             Kmin, Kmax);
    lab_print_spread(what, s_kda, 1.0, 1, "x");
    snprintf(what, sizeof what, "dense recurrence / KDA chunkwise (C = %zu) per token at K = %zu",
             C64, Kmax);
    lab_print_spread(what, s_max, 1.0, 1, "x");
    snprintf(what, sizeof what, "dense recurrence / KDA chunkwise (C = %zu) per token at K = %zu",
             C64, Kmin);
    lab_print_spread(what, s_min, 1.0, 1, "x");
    snprintf(what, sizeof what, "dense chunk products / dense recurrence at K = %zu", Kmax);
    lab_print_spread(what, s_prod, 1.0, 2, "x");
    const point *g2 = find(pts, np, DPLR_CHUNK, Kmax, 64), *k64 = find(pts, np, KDA_CHUNK, Kmax, 64);
    if (g2 && k64) {
        snprintf(what, sizeof what, "dense recurrence / DPLR chunkwise (C = 64) per token at "
                 "K = %zu", Kmax);
        lab_print_spread(what, round_ratio(p, d2, g2), 1.0, 1, "x");
        snprintf(what, sizeof what, "DPLR chunkwise / KDA chunkwise (C = 64) per token at "
                 "K = %zu", Kmax);
        lab_print_spread(what, round_ratio(p, g2, k64), 1.0, 2, "x");
    }
    printf("\nVerdict (medians of the rounds): from K = %zu to %zu (x%.0f, V = K) the dense "
           "recurrence's time per token grows x%.0f (flops x%.0f = K^3), the KDA chunkwise form's (C = %zu) x%.1f (flops "
           "x%.1f). At K = %zu the dense recurrence costs %.1f x the KDA chunkwise form per "
           "token (%.1f x at K = %zu); forming the dense chunk products costs %.2f x the "
           "sequential dense recurrence (2K^3 vs 2K^2 V flops: no saving from chunking). A "
           "general A_t has no collapse: %s\n"
           "(One thread: this measures work per token. That the dense products must be formed "
           "one after another, while KDA's chunk is a few independent matrix products and one "
           "triangular solve, is structural and not timed here.)\n",
           Kmin, Kmax, r, growth_dense, d2->flops / d1->flops, C64, growth_kda,
           c2->flops / c1->flops, Kmax, ratio_max, ratio_min, Kmin, prod,
           ratio_max > 1.0 && prod > 0.5 && growth_dense > growth_kda
               ? "CONFIRMED (measured on this machine, CPU time)."
               : "NOT CONFIRMED.");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.Ks_s = "16,32,64,128", .Cs_s = "16,32,64,128", .reps = 5, .Tmax = 8192,
                .work = 2e8};
    lab_init(&x, "09_dense_cost",
             "cost per token of a dense K x K transition recurrence against KDA's DPLR "
             "chunkwise form, as K and C grow");
    lab_flag_string(&x, "Ks", &p.Ks_s, "key dimensions (V = K), ascending, comma-separated");
    lab_flag_string(&x, "Cs", &p.Cs_s, "chunk sizes of the KDA chunkwise form");
    lab_flag_size(&x, "reps", &p.reps, "rounds, 5 to 32 (each times every point; medians and ranges are printed)");
    lab_flag_size(&x, "Tmax", &p.Tmax, "most tokens per timing");
    lab_flag_double(&x, "work", &p.work, "flops per timed run (sets the tokens per point)");
    lab_parse(&x, argc, argv);
    lab_one_thread(&x);
    p.nK = lab_parse_list(p.Ks_s, p.Ks, MAX_LIST);
    p.nC = lab_parse_list(p.Cs_s, p.Cs, MAX_LIST);
    int ok_K = p.nK > 0, ok_C = p.nC > 0 && p.Tmax >= 1;
    for (size_t i = 0; ok_K && i < p.nK; i++)
        ok_K = p.Ks[i] >= 1 && p.Ks[i] <= 1024 && p.Ks[i] == floor(p.Ks[i]) &&
               (i == 0 || p.Ks[i] > p.Ks[i - 1]);
    for (size_t i = 0; ok_C && i < p.nC; i++)
        ok_C = p.Cs[i] >= 1 && p.Cs[i] <= p.Tmax && p.Cs[i] == floor(p.Cs[i]);
    lab_need(&x, ok_K, "--Ks", "ascending integers in 1 .. 1024, comma-separated");
    lab_need(&x, ok_C, "--Cs, --Tmax", "integers in 1 .. Tmax, comma-separated");
    lab_need(&x, p.reps >= 5 && p.reps <= MAX_REPS, "--reps", "5 <= reps <= %d", MAX_REPS);
    lab_need(&x, p.work > 0.0, "--work", "work > 0");
    gsl_rng *rng = lab_rng(&x);
    point pts[MAX_POINTS];
    size_t np = measure(&x, &p, rng, pts);
    write_results(&x, &p, pts, np);
    print_verdict(&p, pts, np);
    printf("\n%s: %.1f s; results in %s/09_dense_cost*.tsv\n", x.name, lab_elapsed(&x), x.out);
    gsl_rng_free(rng);
    return 0;
}
