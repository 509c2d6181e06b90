/*
 * 02_two_timescales — the chapter's two-fact head (chapter 06, "a half-life
 * per channel": the file being edited and the loop variable three lines up).
 *
 * One head, K = V = 16. The key channels are split in two halves:
 *   durable channels  0 .. K/2-1   the durable fact: key k_d (unit, supported
 *                                  on these channels), value v_d, written ONCE
 *                                  at token 0
 *   volatile channels K/2 .. K-1   the volatile fact: rewritten with a NEW
 *                                  random value every P tokens; its canonical
 *                                  key is k_v, and each rewrite uses
 *                                  normalise(k_v + sigma n / sqrt(K/2)),
 *                                  n ~ N(0, I) on these channels
 * Every write has beta = 1; the tokens between writes write nothing
 * (beta = 0). The last token is a rewrite (or --gap tokens before the end).
 * At the end the state is read with each fact's key:
 *   error = |S_T^T k - v| / |v|   (v_d for the durable fact, the latest value
 *                                  for the volatile one; S_T = ht)
 * Why the rewrite key is noisy: with beta = 1 and the SAME key every time,
 * the delta rule replaces the old value exactly and no decay is needed
 * (measured below with sigma = 0). A fact written under context-dependent
 * keys is only partly overwritten; its stale values linger in nearby
 * directions until decay removes them. That is what "too retentive" costs.
 *
 * Sweep: Gated DeltaNet (one scalar alpha = exp(g) for every channel) with
 * alpha from 0.9 to 0.9999 (log-spaced in 1 - alpha). Then KDA with a slow
 * decay on the durable channels and a fast one on the volatile channels
 * (defaults 0.9999 and 0.9, the chapter's two values), and Gated DeltaNet
 * that oscillates alpha (fast on rewrite tokens, slow elsewhere: the chapter's
 * other "move"). Everything through kdalab_recurrent_f64, --seeds seeds,
 * mean and standard deviation (gsl_stats).
 *
 * Outputs (DIR = --out):
 *   02_two_timescales.tsv      the scalar-alpha sweep
 *   02_two_timescales_kda.tsv  KDA and the other strategies
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "kdalab.h"

/* One random instance of the two-fact sequence (inputs of the recurrence). */
typedef struct {
    size_t K, T;
    double *k, *v, *beta;  /* [T,K], [T,V=K], [T] */
    int *rewrite;          /* [T]: 1 on volatile rewrite tokens */
    double *kd, *vd, *kv;  /* the facts' keys and values [K] */
    double *vlast;         /* the volatile fact's latest value [K] */
} problem;

/* A unit vector supported on channels lo..hi-1 of a K-vector. */
static void unit_on(gsl_rng *rng, double *x, size_t K, size_t lo, size_t hi)
{
    memset(x, 0, K * sizeof *x);
    lab_random_unit(rng, x + lo, hi - lo);
}

static void problem_make(const lab_ctx *x, problem *p, gsl_rng *rng, size_t K, size_t T, size_t P,
                         size_t gap, double sigma)
{
    size_t h = K / 2;
    p->K = K, p->T = T;
    p->k = lab_zeros(x, T * K), p->v = lab_zeros(x, T * K), p->beta = lab_zeros(x, T);
    p->rewrite = calloc(T, sizeof *p->rewrite);
    p->kd = lab_zeros(x, K), p->vd = lab_zeros(x, K), p->kv = lab_zeros(x, K), p->vlast = lab_zeros(x, K);
    if (!p->rewrite) exit(1);
    unit_on(rng, p->kd, K, 0, h);
    lab_random_unit(rng, p->vd, K);
    unit_on(rng, p->kv, K, h, K);
    /* token 0: the durable write */
    memcpy(p->k, p->kd, K * sizeof(double));
    memcpy(p->v, p->vd, K * sizeof(double));
    p->beta[0] = 1.0;
    size_t last = T - 1 - gap; /* the last rewrite; rewrites every P tokens back from it */
    for (size_t t = 1; t < T; t++) {
        double *kt = p->k + t * K, *vt = p->v + t * K;
        if (t <= last && (last - t) % P == 0) {
            p->rewrite[t] = 1;
            double norm2 = 0.0;
            for (size_t c = h; c < K; c++) {
                kt[c] = p->kv[c] + sigma * gsl_ran_gaussian(rng, 1.0) / sqrt((double)(K - h));
                norm2 += kt[c] * kt[c];
            }
            for (size_t c = h; c < K; c++) kt[c] /= sqrt(norm2);
            lab_random_unit(rng, vt, K);
            memcpy(p->vlast, vt, K * sizeof(double));
            p->beta[t] = 1.0;
        } else {
            /* a token that writes nothing into this head (beta = 0); its key is
             * irrelevant but must be finite */
            unit_on(rng, kt, K, h, K);
        }
    }
}

static void problem_free(problem *p)
{
    free(p->k), free(p->v), free(p->beta), free(p->rewrite);
    free(p->kd), free(p->vd), free(p->kv), free(p->vlast);
}

/* |S^T key - val| / |val| for the K x K state S. */
static double recall_error(const double *S, size_t K, const double *key, const double *val)
{
    double e2 = 0.0, n2 = 0.0;
    for (size_t j = 0; j < K; j++) {
        double r = 0.0;
        for (size_t c = 0; c < K; c++) r += S[c * K + j] * key[c];
        e2 += (r - val[j]) * (r - val[j]);
        n2 += val[j] * val[j];
    }
    return sqrt(e2 / n2);
}

/* Run the recurrence with log-decay g ([T] for Gated DeltaNet, [T,K] for KDA)
 * and return both facts' recall errors. */
static void run(const lab_ctx *x, const problem *p, kdalab_mechanism mech, const double *g, double *err_d,
                double *err_v, double *o, double *S)
{
    kdalab_dims d = {1, p->T, 1, p->K, p->K};
    lab_check(x, kdalab_recurrent_f64(&d, mech, kdalab_default_scale(p->K), p->k, p->k, p->v, g, p->beta,
                                      NULL, o, S), "kdalab_recurrent_f64");
    *err_d = recall_error(S, p->K, p->kd, p->vd);
    *err_v = recall_error(S, p->K, p->kv, p->vlast);
}

/* The command-line parameters. */
typedef struct {
    size_t K, T, P, gap, seeds, npts;
    double sigma, a_min, a_max, a_slow, a_fast, tol;
} params;

/* The i-th alpha of the sweep: log-spaced in 1 - alpha from a_min to a_max. */
static double sweep_alpha(const params *p, size_t i)
{
    double lo = log(1.0 - p->a_max), hi = log(1.0 - p->a_min);
    return 1.0 - exp(hi + (lo - hi) * (double)i / (double)(p->npts - 1));
}

/* KDA's log-decay [T,K]: a_slow on the durable channels, a_fast on the volatile. */
static void kda_decay(const params *p, double *gk)
{
    for (size_t t = 0; t < p->T; t++)
        for (size_t c = 0; c < p->K; c++) gk[t * p->K + c] = log(c < p->K / 2 ? p->a_slow : p->a_fast);
}

/* ---- the scalar-alpha sweep (Gated DeltaNet) ------------------------------- */

/* What the summary reports of the sweep. */
typedef struct {
    double best_max, best_alpha, best_d, best_v; /* min over alpha of the larger mean error */
    double min_d, min_d_alpha, min_v, min_v_alpha;
    double max_v0;   /* largest volatile error with identical rewrite keys */
    size_t any_both; /* alphas where some seed had both errors < tol       */
} sweep_summary;

/* Every alpha on the instances pr (noisy rewrite keys) and pr0 (identical
 * keys): 02_two_timescales.tsv. */
static void alpha_sweep(lab_ctx *x, const params *p, const problem *pr, const problem *pr0,
                        sweep_summary *sum)
{
    size_t K = p->K, T = p->T, seeds = p->seeds, npts = p->npts;
    double tol = p->tol;
    double *o = lab_zeros(x, T * K), *S = lab_zeros(x, K * K), *g1 = lab_zeros(x, T);
    double *ed = lab_zeros(x, seeds), *ev = lab_zeros(x, seeds);
    static const char *const cols[] = {
        "alpha", "scalar decay per token, every channel (1)",
        "one_minus", "1 - alpha (1)",
        "half_life", "ln(1/2)/ln(alpha) (tokens)",
        "err_d", "durable fact: mean over seeds of |S^T k_d - v_d|/|v_d| (1)",
        "err_d_sd", "its standard deviation over seeds (1)",
        "err_v", "volatile fact: mean of |S^T k_v - v_latest|/|v_latest| (1)",
        "err_v_sd", "its standard deviation (1)",
        "err_v0", "volatile fact with identical rewrite keys (sigma = 0), mean (1)",
        "both_ok", "fraction of seeds with both errors < tol", NULL};
    FILE *f = lab_tsv_open(x, "02_two_timescales", cols,
                           "mechanism=gated_deltanet K=V=%zu T=%zu P=%zu gap=%zu sigma=%g seeds=%zu tol=%g beta=1",
                           K, T, p->P, p->gap, p->sigma, seeds, tol);
    *sum = (sweep_summary){.best_max = INFINITY, .best_alpha = NAN, .best_d = NAN, .best_v = NAN,
                           .min_v = INFINITY, .min_v_alpha = NAN, .min_d = INFINITY,
                           .min_d_alpha = NAN, .max_v0 = 0.0, .any_both = 0};
    for (size_t i = 0; i < npts; i++) {
        lab_progress(x, "alpha sweep", i, npts);
        double alpha = sweep_alpha(p, i);
        for (size_t t = 0; t < T; t++) g1[t] = log(alpha);
        size_t both = 0;
        double ev0 = 0.0;
        for (size_t s = 0; s < seeds; s++) {
            run(x, &pr[s], KDALAB_GATED_DELTANET, g1, &ed[s], &ev[s], o, S);
            both += ed[s] < tol && ev[s] < tol;
            double d0, v0;
            run(x, &pr0[s], KDALAB_GATED_DELTANET, g1, &d0, &v0, o, S);
            ev0 += v0 / (double)seeds;
            if (v0 > sum->max_v0) sum->max_v0 = v0;
        }
        double md = gsl_stats_mean(ed, 1, seeds), mv = gsl_stats_mean(ev, 1, seeds);
        fprintf(f, "%.8f\t%.6g\t%.6g\t%.6g\t%.3g\t%.6g\t%.3g\t%.3g\t%.3f\n", alpha, 1.0 - alpha,
                log(0.5) / log(alpha), md, gsl_stats_sd(ed, 1, seeds), mv, gsl_stats_sd(ev, 1, seeds), ev0,
                (double)both / (double)seeds);
        double mx = md > mv ? md : mv;
        if (mx < sum->best_max)
            sum->best_max = mx, sum->best_alpha = alpha, sum->best_d = md, sum->best_v = mv;
        if (mv < sum->min_v) sum->min_v = mv, sum->min_v_alpha = alpha;
        if (md < sum->min_d) sum->min_d = md, sum->min_d_alpha = alpha;
        if (both) sum->any_both++;
    }
    lab_progress(x, "alpha sweep", npts, npts);
    lab_tsv_close(x, f);
    free(o), free(S), free(g1), free(ed), free(ev);
}

/* ---- KDA and the other strategies -------------------------------------------- */

/* The strategies set against the scalar sweep, in the order of the TSV. */
typedef enum { KDA_PER_CHANNEL, GDN_OSCILLATING, DELTANET_NO_DECAY, N_STRATEGIES } strategy;
static const char *const strategy_name[N_STRATEGIES] = {"kda", "gdn_oscillating", "deltanet"};

typedef struct {
    double err_d, err_v, both_ok; /* mean errors over seeds, fraction with both < tol */
} strategy_result;

/* The decays of a strategy as the TSV and the summary show them (DeltaNet: none). */
static double a_durable(const params *p, strategy st) { return st == DELTANET_NO_DECAY ? 1.0 : p->a_slow; }
static double a_volatile(const params *p, strategy st) { return st == DELTANET_NO_DECAY ? 1.0 : p->a_fast; }

/* Every strategy on the instances pr: 02_two_timescales_kda.tsv. */
static void strategies(lab_ctx *x, const params *p, const problem *pr, strategy_result *res)
{
    size_t K = p->K, T = p->T, seeds = p->seeds;
    double *o = lab_zeros(x, T * K), *S = lab_zeros(x, K * K);
    double *g1 = lab_zeros(x, T), *gk = lab_zeros(x, T * K);
    double *ed = lab_zeros(x, seeds), *ev = lab_zeros(x, seeds);
    static const char *const kcols[] = {
        "strategy", "kda | gdn_oscillating | deltanet (alpha = 1)",
        "a_durable", "decay on the durable channels, or on non-rewrite tokens (1)",
        "a_volatile", "decay on the volatile channels, or on rewrite tokens (1)",
        "err_d", "durable fact: mean relative recall error (1)",
        "err_d_sd", "standard deviation over seeds (1)",
        "err_v", "volatile fact: mean relative recall error (1)",
        "err_v_sd", "standard deviation over seeds (1)",
        "both_ok", "fraction of seeds with both errors < tol", NULL};
    FILE *fk = lab_tsv_open(x, "02_two_timescales_kda", kcols,
                            "K=V=%zu T=%zu P=%zu gap=%zu sigma=%g seeds=%zu tol=%g beta=1", K, T, p->P,
                            p->gap, p->sigma, seeds, p->tol);
    kda_decay(p, gk);
    for (strategy st = 0; st < N_STRATEGIES; st++) {
        size_t both = 0;
        for (size_t s = 0; s < seeds; s++) {
            if (st == KDA_PER_CHANNEL) {
                run(x, &pr[s], KDALAB_KDA, gk, &ed[s], &ev[s], o, S);
            } else if (st == GDN_OSCILLATING) {
                /* the decay acts before the write of the same token: fast decay
                 * on rewrite tokens clears the stale value, and everything else */
                for (size_t t = 0; t < T; t++) g1[t] = log(pr[s].rewrite[t] ? p->a_fast : p->a_slow);
                run(x, &pr[s], KDALAB_GATED_DELTANET, g1, &ed[s], &ev[s], o, S);
            } else {
                run(x, &pr[s], KDALAB_DELTANET, NULL, &ed[s], &ev[s], o, S);
            }
            both += ed[s] < p->tol && ev[s] < p->tol;
        }
        res[st].err_d = gsl_stats_mean(ed, 1, seeds), res[st].err_v = gsl_stats_mean(ev, 1, seeds);
        res[st].both_ok = (double)both / (double)seeds;
        fprintf(fk, "%s\t%g\t%g\t%.6g\t%.3g\t%.6g\t%.3g\t%.3f\n", strategy_name[st], a_durable(p, st),
                a_volatile(p, st), res[st].err_d, gsl_stats_sd(ed, 1, seeds), res[st].err_v,
                gsl_stats_sd(ev, 1, seeds), res[st].both_ok);
    }
    lab_tsv_close(x, fk);
    free(o), free(S), free(g1), free(gk), free(ed), free(ev);
}

/* ---- the printed summary ------------------------------------------------------- */

static void print_summary(const lab_ctx *x, const params *p, const sweep_summary *sum,
                          const strategy_result *res)
{
    double tol = p->tol;
    printf("02_two_timescales — durable fact written once, volatile fact rewritten every %zu tokens\n", p->P);
    printf("  (K=V=%zu, T=%zu, rewrite-key noise sigma=%g, gap=%zu, %zu seeds, seed %lu; error = relative L2 "
           "recall error, mean over seeds)\n\n", p->K, p->T, p->sigma, p->gap, p->seeds, x->seed);
    printf("  Gated DeltaNet, scalar alpha (%zu values in [%g, %g]):\n", p->npts, p->a_min, p->a_max);
    printf("    best alpha for the durable fact:  %.6g  (durable error %.3g)\n", sum->min_d_alpha, sum->min_d);
    printf("    best alpha for the volatile fact: %.6g  (volatile error %.3g)\n", sum->min_v_alpha, sum->min_v);
    printf("    best compromise (min of the larger error): alpha %.6g: durable %.3g, volatile %.3g\n",
           sum->best_alpha, sum->best_d, sum->best_v);
    printf("    alphas where any seed had both errors < %g: %zu of %zu\n", tol, sum->any_both, p->npts);
    printf("\n  %-18s %10s %10s %10s %10s %12s\n", "strategy", "a_durable", "a_volatile", "err_d", "err_v",
           "both < tol");
    for (strategy st = 0; st < N_STRATEGIES; st++)
        printf("  %-18s %10g %10g %10.3g %10.3g %11.0f%%\n", strategy_name[st], a_durable(p, st),
               a_volatile(p, st), res[st].err_d, res[st].err_v, 100.0 * res[st].both_ok);
    printf("\n  with identical rewrite keys (sigma = 0) the delta rule overwrites the volatile fact exactly:\n"
           "    largest volatile error over every alpha and seed: %.2g\n", sum->max_v0);
    const strategy_result *kda = &res[KDA_PER_CHANNEL];
    int holds = sum->best_max >= tol && kda->err_d < tol && kda->err_v < tol;
    printf("\nchapter claim: \"any single choice is simultaneously too forgetful for the durable facts and too "
           "retentive\n  for the volatile ones\"; per-channel decay serves both:\n");
    printf("  best scalar alpha: larger error %.3g (%s tol %g); KDA: durable %.3g, volatile %.3g -> %s\n",
           sum->best_max, sum->best_max >= tol ? ">=" : "<", tol, kda->err_d, kda->err_v,
           holds ? "holds" : "DOES NOT HOLD with these parameters");
}

/* ---- sensitivity to the rewrite-key noise ----------------------------------------- */

/* For one sigma: the best scalar-alpha compromise (min over the sweep of the
 * larger mean error) and KDA's two mean errors, on fresh instances. */
static void sigma_check(const lab_ctx *x, gsl_rng *rng, const params *p, double sigma, double *best,
                        double *best_alpha, double *kda_d, double *kda_v)
{
    size_t K = p->K, T = p->T, seeds = p->seeds;
    problem *pr = calloc(seeds, sizeof *pr);
    double *o = lab_zeros(x, T * K), *S = lab_zeros(x, K * K), *g1 = lab_zeros(x, T), *gk = lab_zeros(x, T * K);
    if (!pr) exit(1);
    for (size_t s = 0; s < seeds; s++) problem_make(x, &pr[s], rng, K, T, p->P, p->gap, sigma);
    *best = INFINITY;
    for (size_t i = 0; i < p->npts; i++) {
        double alpha = sweep_alpha(p, i);
        for (size_t t = 0; t < T; t++) g1[t] = log(alpha);
        double md = 0.0, mv = 0.0, ed, ev;
        for (size_t s = 0; s < seeds; s++) {
            run(x, &pr[s], KDALAB_GATED_DELTANET, g1, &ed, &ev, o, S);
            md += ed / (double)seeds, mv += ev / (double)seeds;
        }
        double mx = md > mv ? md : mv;
        if (mx < *best) *best = mx, *best_alpha = alpha;
    }
    kda_decay(p, gk);
    *kda_d = *kda_v = 0.0;
    for (size_t s = 0; s < seeds; s++) {
        double ed, ev;
        run(x, &pr[s], KDALAB_KDA, gk, &ed, &ev, o, S);
        *kda_d += ed / (double)seeds, *kda_v += ev / (double)seeds;
        problem_free(&pr[s]);
    }
    free(pr), free(o), free(S), free(g1), free(gk);
}

static void sigma_sensitivity(const lab_ctx *x, gsl_rng *rng, const params *p)
{
    static const double sigmas[5] = {0.0, 0.1, 0.3, 0.5, 1.0};
    printf("\n  sensitivity to the rewrite-key noise sigma (%zu fresh seeds each):\n", p->seeds);
    printf("    %-6s %22s %12s %12s\n", "sigma", "best scalar: max err", "KDA err_d", "KDA err_v");
    for (int i = 0; i < 5; i++) {
        double b, ba = NAN, kd_, kv_;
        sigma_check(x, rng, p, sigmas[i], &b, &ba, &kd_, &kv_);
        printf("    %-6g %11.3g (a=%.5g) %12.3g %12.3g\n", sigmas[i], b, ba, kd_, kv_);
    }
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K = 16, .T = 512, .P = 4, .gap = 0, .seeds = 50, .npts = 25, .sigma = 0.3,
                .a_min = 0.9, .a_max = 0.9999, .a_slow = 0.9999, .a_fast = 0.9, .tol = 0.1};
    lab_init(&x, "02_two_timescales",
             "a durable and a volatile fact in one head: no scalar decay serves both, per-channel decay does");
    lab_flag_size(&x, "K", &p.K, "key = value dimension (even); half the channels per fact");
    lab_flag_size(&x, "T", &p.T, "tokens in the sequence");
    lab_flag_size(&x, "P", &p.P, "the volatile fact is rewritten every P tokens");
    lab_flag_size(&x, "gap", &p.gap, "tokens between the last rewrite and the end");
    lab_flag_double(&x, "sigma", &p.sigma, "noise of the volatile rewrite keys (0 = identical keys)");
    lab_flag_double(&x, "a-min", &p.a_min, "smallest scalar alpha of the sweep");
    lab_flag_double(&x, "a-max", &p.a_max, "largest scalar alpha of the sweep");
    lab_flag_size(&x, "points", &p.npts, "alphas in the sweep (log-spaced in 1 - alpha)");
    lab_flag_double(&x, "a-slow", &p.a_slow, "KDA decay on the durable channels");
    lab_flag_double(&x, "a-fast", &p.a_fast, "KDA decay on the volatile channels");
    lab_flag_double(&x, "tol", &p.tol, "a fact counts as recalled when its error is below tol");
    lab_flag_size(&x, "seeds", &p.seeds, "random instances (keys, values, noise)");
    lab_parse(&x, argc, argv);
    if (p.K < 2 || p.K % 2 || p.T < 2 || p.P < 1 || p.gap >= p.T - 1 || p.seeds < 2 || p.npts < 2 ||
        !(p.sigma >= 0) || !(p.a_min > 0 && p.a_min < p.a_max && p.a_max < 1) ||
        !(p.a_slow > 0 && p.a_slow <= 1) || !(p.a_fast > 0 && p.a_fast <= 1) || !(p.tol > 0)) {
        fprintf(stderr, "02_two_timescales: bad parameters (K even >= 2, T >= 2, P >= 1, gap < T-1, seeds >= 2, "
                        "points >= 2, 0 < a-min < a-max < 1, a-slow and a-fast in (0,1], sigma >= 0, tol > 0)\n");
        return 2;
    }
    gsl_rng *rng = lab_rng(&x);

    /* The instances, drawn in pairs: one with noisy rewrite keys, one with identical keys. */
    problem *pr = calloc(p.seeds, sizeof *pr), *pr0 = calloc(p.seeds, sizeof *pr0);
    if (!pr || !pr0) return 1;
    for (size_t s = 0; s < p.seeds; s++) {
        problem_make(&x, &pr[s], rng, p.K, p.T, p.P, p.gap, p.sigma);
        problem_make(&x, &pr0[s], rng, p.K, p.T, p.P, p.gap, 0.0);
    }
    sweep_summary sum;
    strategy_result res[N_STRATEGIES];
    alpha_sweep(&x, &p, pr, pr0, &sum);
    strategies(&x, &p, pr, res);
    print_summary(&x, &p, &sum, res);
    sigma_sensitivity(&x, rng, &p);
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    for (size_t s = 0; s < p.seeds; s++) problem_free(&pr[s]), problem_free(&pr0[s]);
    free(pr), free(pr0);
    gsl_rng_free(rng);
    return 0;
}
