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

/* For one sigma: the best scalar-alpha compromise (min over the sweep of the
 * larger mean error) and KDA's two mean errors, on fresh instances. */
static void sigma_check(const lab_ctx *x, gsl_rng *rng, size_t K, size_t T, size_t P, size_t gap, double sigma,
                        size_t seeds, size_t npts, double a_min, double a_max, double a_slow, double a_fast,
                        double *best, double *best_alpha, double *kda_d, double *kda_v)
{
    problem *pr = calloc(seeds, sizeof *pr);
    double *o = lab_zeros(x, T * K), *S = lab_zeros(x, K * K), *g1 = lab_zeros(x, T), *gk = lab_zeros(x, T * K);
    if (!pr) exit(1);
    for (size_t s = 0; s < seeds; s++) problem_make(x, &pr[s], rng, K, T, P, gap, sigma);
    *best = INFINITY;
    for (size_t i = 0; i < npts; i++) {
        double lo = log(1.0 - a_max), hi = log(1.0 - a_min);
        double alpha = 1.0 - exp(hi + (lo - hi) * (double)i / (double)(npts - 1));
        for (size_t t = 0; t < T; t++) g1[t] = log(alpha);
        double md = 0.0, mv = 0.0, ed, ev;
        for (size_t s = 0; s < seeds; s++) {
            run(x, &pr[s], KDALAB_GATED_DELTANET, g1, &ed, &ev, o, S);
            md += ed / (double)seeds, mv += ev / (double)seeds;
        }
        double mx = md > mv ? md : mv;
        if (mx < *best) *best = mx, *best_alpha = alpha;
    }
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < K; c++) gk[t * K + c] = log(c < K / 2 ? a_slow : a_fast);
    *kda_d = *kda_v = 0.0;
    for (size_t s = 0; s < seeds; s++) {
        double ed, ev;
        run(x, &pr[s], KDALAB_KDA, gk, &ed, &ev, o, S);
        *kda_d += ed / (double)seeds, *kda_v += ev / (double)seeds;
        problem_free(&pr[s]);
    }
    free(pr), free(o), free(S), free(g1), free(gk);
}

int main(int argc, char **argv)
{
    lab_ctx x;
    size_t K = 16, T = 512, P = 4, gap = 0, seeds = 50, npts = 25;
    double sigma = 0.3, a_min = 0.9, a_max = 0.9999, a_slow = 0.9999, a_fast = 0.9, tol = 0.1;
    lab_init(&x, "02_two_timescales",
             "a durable and a volatile fact in one head: no scalar decay serves both, per-channel decay does");
    lab_flag_size(&x, "K", &K, "key = value dimension (even); half the channels per fact");
    lab_flag_size(&x, "T", &T, "tokens in the sequence");
    lab_flag_size(&x, "P", &P, "the volatile fact is rewritten every P tokens");
    lab_flag_size(&x, "gap", &gap, "tokens between the last rewrite and the end");
    lab_flag_double(&x, "sigma", &sigma, "noise of the volatile rewrite keys (0 = identical keys)");
    lab_flag_double(&x, "a-min", &a_min, "smallest scalar alpha of the sweep");
    lab_flag_double(&x, "a-max", &a_max, "largest scalar alpha of the sweep");
    lab_flag_size(&x, "points", &npts, "alphas in the sweep (log-spaced in 1 - alpha)");
    lab_flag_double(&x, "a-slow", &a_slow, "KDA decay on the durable channels");
    lab_flag_double(&x, "a-fast", &a_fast, "KDA decay on the volatile channels");
    lab_flag_double(&x, "tol", &tol, "a fact counts as recalled when its error is below tol");
    lab_flag_size(&x, "seeds", &seeds, "random instances (keys, values, noise)");
    lab_parse(&x, argc, argv);
    if (K < 2 || K % 2 || T < 2 || P < 1 || gap >= T - 1 || seeds < 2 || npts < 2 || !(sigma >= 0) ||
        !(a_min > 0 && a_min < a_max && a_max < 1) || !(a_slow > 0 && a_slow <= 1) ||
        !(a_fast > 0 && a_fast <= 1) || !(tol > 0)) {
        fprintf(stderr, "02_two_timescales: bad parameters (K even >= 2, T >= 2, P >= 1, gap < T-1, seeds >= 2, "
                        "points >= 2, 0 < a-min < a-max < 1, a-slow and a-fast in (0,1], sigma >= 0, tol > 0)\n");
        return 2;
    }
    gsl_rng *rng = lab_rng(&x);

    problem *pr = calloc(seeds, sizeof *pr), *pr0 = calloc(seeds, sizeof *pr0);
    if (!pr || !pr0) return 1;
    for (size_t s = 0; s < seeds; s++) {
        problem_make(&x, &pr[s], rng, K, T, P, gap, sigma);
        problem_make(&x, &pr0[s], rng, K, T, P, gap, 0.0); /* identical rewrite keys */
    }
    double *o = lab_zeros(&x, T * K), *S = lab_zeros(&x, K * K);
    double *g1 = lab_zeros(&x, T), *gk = lab_zeros(&x, T * K);
    double *ed = lab_zeros(&x, seeds), *ev = lab_zeros(&x, seeds);

    /* ---- scalar alpha sweep (Gated DeltaNet) ------------------------------- */
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
    FILE *f = lab_tsv_open(&x, "02_two_timescales", cols,
                           "mechanism=gated_deltanet K=V=%zu T=%zu P=%zu gap=%zu sigma=%g seeds=%zu tol=%g beta=1",
                           K, T, P, gap, sigma, seeds, tol);
    double best_max = INFINITY, best_alpha = NAN, best_d = NAN, best_v = NAN;
    double min_v = INFINITY, min_v_alpha = NAN, min_d = INFINITY, min_d_alpha = NAN, max_v0 = 0.0;
    size_t any_both = 0;
    for (size_t i = 0; i < npts; i++) {
        lab_progress(&x, "alpha sweep", i, npts);
        double lo = log(1.0 - a_max), hi = log(1.0 - a_min);
        double alpha = 1.0 - exp(hi + (lo - hi) * (double)i / (double)(npts - 1));
        for (size_t t = 0; t < T; t++) g1[t] = log(alpha);
        size_t both = 0;
        double ev0 = 0.0;
        for (size_t s = 0; s < seeds; s++) {
            run(&x, &pr[s], KDALAB_GATED_DELTANET, g1, &ed[s], &ev[s], o, S);
            both += ed[s] < tol && ev[s] < tol;
            double d0, v0;
            run(&x, &pr0[s], KDALAB_GATED_DELTANET, g1, &d0, &v0, o, S);
            ev0 += v0 / (double)seeds;
            if (v0 > max_v0) max_v0 = v0;
        }
        double md = gsl_stats_mean(ed, 1, seeds), mv = gsl_stats_mean(ev, 1, seeds);
        fprintf(f, "%.8f\t%.6g\t%.6g\t%.6g\t%.3g\t%.6g\t%.3g\t%.3g\t%.3f\n", alpha, 1.0 - alpha,
                log(0.5) / log(alpha), md, gsl_stats_sd(ed, 1, seeds), mv, gsl_stats_sd(ev, 1, seeds), ev0,
                (double)both / (double)seeds);
        double mx = md > mv ? md : mv;
        if (mx < best_max) best_max = mx, best_alpha = alpha, best_d = md, best_v = mv;
        if (mv < min_v) min_v = mv, min_v_alpha = alpha;
        if (md < min_d) min_d = md, min_d_alpha = alpha;
        if (both) any_both++;
    }
    lab_progress(&x, "alpha sweep", npts, npts);
    lab_tsv_close(&x, f);

    /* ---- KDA and the other strategies ------------------------------------- */
    static const char *const kcols[] = {
        "strategy", "kda | gdn_oscillating | deltanet (alpha = 1)",
        "a_durable", "decay on the durable channels, or on non-rewrite tokens (1)",
        "a_volatile", "decay on the volatile channels, or on rewrite tokens (1)",
        "err_d", "durable fact: mean relative recall error (1)",
        "err_d_sd", "standard deviation over seeds (1)",
        "err_v", "volatile fact: mean relative recall error (1)",
        "err_v_sd", "standard deviation over seeds (1)",
        "both_ok", "fraction of seeds with both errors < tol", NULL};
    FILE *fk = lab_tsv_open(&x, "02_two_timescales_kda", kcols,
                            "K=V=%zu T=%zu P=%zu gap=%zu sigma=%g seeds=%zu tol=%g beta=1", K, T, P, gap, sigma,
                            seeds, tol);
    const char *names[3] = {"kda", "gdn_oscillating", "deltanet"};
    double sd_[3], sv_[3], okf[3];
    for (int m = 0; m < 3; m++) {
        size_t both = 0;
        for (size_t s = 0; s < seeds; s++) {
            if (m == 0) {
                for (size_t t = 0; t < T; t++)
                    for (size_t c = 0; c < K; c++) gk[t * K + c] = log(c < K / 2 ? a_slow : a_fast);
                run(&x, &pr[s], KDALAB_KDA, gk, &ed[s], &ev[s], o, S);
            } else if (m == 1) {
                /* the decay acts before the write of the same token: fast decay
                 * on rewrite tokens clears the stale value, and everything else */
                for (size_t t = 0; t < T; t++) g1[t] = log(pr[s].rewrite[t] ? a_fast : a_slow);
                run(&x, &pr[s], KDALAB_GATED_DELTANET, g1, &ed[s], &ev[s], o, S);
            } else {
                run(&x, &pr[s], KDALAB_DELTANET, NULL, &ed[s], &ev[s], o, S);
            }
            both += ed[s] < tol && ev[s] < tol;
        }
        sd_[m] = gsl_stats_mean(ed, 1, seeds), sv_[m] = gsl_stats_mean(ev, 1, seeds);
        okf[m] = (double)both / (double)seeds;
        fprintf(fk, "%s\t%g\t%g\t%.6g\t%.3g\t%.6g\t%.3g\t%.3f\n", names[m], m == 2 ? 1.0 : a_slow,
                m == 2 ? 1.0 : a_fast, sd_[m], gsl_stats_sd(ed, 1, seeds), sv_[m], gsl_stats_sd(ev, 1, seeds),
                okf[m]);
    }
    lab_tsv_close(&x, fk);

    /* ---- summary ------------------------------------------------------------ */
    printf("02_two_timescales — durable fact written once, volatile fact rewritten every %zu tokens\n", P);
    printf("  (K=V=%zu, T=%zu, rewrite-key noise sigma=%g, gap=%zu, %zu seeds, seed %lu; error = relative L2 "
           "recall error, mean over seeds)\n\n", K, T, sigma, gap, seeds, x.seed);
    printf("  Gated DeltaNet, scalar alpha (%zu values in [%g, %g]):\n", npts, a_min, a_max);
    printf("    best alpha for the durable fact:  %.6g  (durable error %.3g)\n", min_d_alpha, min_d);
    printf("    best alpha for the volatile fact: %.6g  (volatile error %.3g)\n", min_v_alpha, min_v);
    printf("    best compromise (min of the larger error): alpha %.6g: durable %.3g, volatile %.3g\n", best_alpha,
           best_d, best_v);
    printf("    alphas where any seed had both errors < %g: %zu of %zu\n", tol, any_both, npts);
    printf("\n  %-18s %10s %10s %10s %10s %12s\n", "strategy", "a_durable", "a_volatile", "err_d", "err_v",
           "both < tol");
    for (int m = 0; m < 3; m++)
        printf("  %-18s %10g %10g %10.3g %10.3g %11.0f%%\n", names[m], m == 2 ? 1.0 : a_slow,
               m == 2 ? 1.0 : a_fast, sd_[m], sv_[m], 100.0 * okf[m]);
    printf("\n  with identical rewrite keys (sigma = 0) the delta rule overwrites the volatile fact exactly:\n"
           "    largest volatile error over every alpha and seed: %.2g\n", max_v0);
    int holds = best_max >= tol && sd_[0] < tol && sv_[0] < tol;
    printf("\nchapter claim: \"any single choice is simultaneously too forgetful for the durable facts and too "
           "retentive\n  for the volatile ones\"; per-channel decay serves both:\n");
    printf("  best scalar alpha: larger error %.3g (%s tol %g); KDA: durable %.3g, volatile %.3g -> %s\n", best_max,
           best_max >= tol ? ">=" : "<", tol, sd_[0], sv_[0],
           holds ? "holds" : "DOES NOT HOLD with these parameters");

    static const double sigmas[5] = {0.0, 0.1, 0.3, 0.5, 1.0};
    printf("\n  sensitivity to the rewrite-key noise sigma (%zu fresh seeds each):\n", seeds);
    printf("    %-6s %22s %12s %12s\n", "sigma", "best scalar: max err", "KDA err_d", "KDA err_v");
    for (int i = 0; i < 5; i++) {
        double b, ba = NAN, kd_, kv_;
        sigma_check(&x, rng, K, T, P, gap, sigmas[i], seeds, npts, a_min, a_max, a_slow, a_fast, &b, &ba, &kd_,
                    &kv_);
        printf("    %-6g %11.3g (a=%.5g) %12.3g %12.3g\n", sigmas[i], b, ba, kd_, kv_);
    }
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    for (size_t s = 0; s < seeds; s++) problem_free(&pr[s]), problem_free(&pr0[s]);
    free(pr), free(pr0), free(o), free(S), free(g1), free(gk), free(ed), free(ev);
    gsl_rng_free(rng);
    return 0;
}
