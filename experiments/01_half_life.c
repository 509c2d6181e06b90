/*
 * 01_half_life — per-channel decay as a memory horizon (chapter 06, "a
 * half-life per channel"; REFERENCE.md, Gated DeltaNet and KDA updates).
 *
 * Part 1, a constant decay a. One head writes ONE association (unit key k0,
 * unit value v0, beta = 1) into a zero state, then T more tokens pass that
 * write nothing (beta = 0) while the state decays by a per token. Every token
 * reads with q = k0, so o_t = s a^t v0 and the retained fraction is
 *   r(t) = <o_t, v0> / <o_0, v0>,    t = tokens since the write.
 * Run with kdalab_recurrent_f64 as Gated DeltaNet (g = ln a, one per token)
 * and as KDA (g = ln a on every channel), and as the grid's two cells
 * without the delta rule, simple GLA and GLA (the write is k0 v0^T, later
 * tokens write v = 0): all four must agree, since the horizon is the
 * decay's alone, whatever the write rule. The half-life is
 * fitted by least squares on ln r(t) = c1 t over the points with r >= r-min
 * (gsl_fit_linear: ln r = c0 + c1 t, half-life -ln 2 / c1) and compared with
 * ln(1/2) / ln(a). The chapter: a = 0.9 gives "under seven" tokens, a = 0.9999
 * "about seven thousand".
 *
 * Part 2, the spread of a production KDA gate. fla's KimiDeltaAttention with
 * the bounded ("safe") gate computes per token t and key channel c
 *   g[t,c] = lower_bound * sigmoid(A_h * (x[t,c] + dt_bias[c])),  lower_bound = -5
 * and initialises A_h = exp(A_log), A_log = ln U(1, 16) per head, and dt_bias
 * = softplus^-1(dt), dt log-uniform in [1e-3, 1e-1] per channel (Mamba's
 * time-step init). x is the token's gate projection; here x ~ N(0, x-std^2)
 * (an untrained model: a trained gate's x is not known to this lab). Each
 * channel's effective half-life is ln 2 / |mean_t g[t,c]| (after n tokens the
 * channel keeps exp(sum g) = exp(n mean g)). The bound itself: g > -5, so no
 * half-life is shorter than ln 2 / 5 = 0.139 tokens, and g -> 0 as the sigmoid
 * saturates, so there is no upper limit. The chapter: "from about six tokens
 * to effectively permanent".
 *
 * Outputs (DIR = --out):
 *   01_half_life.tsv            r(t) per a, the four mechanisms, and a^t
 *   01_half_life_fit.tsv        fitted vs exact half-life per a
 *   01_half_life_gate.tsv       one line per sampled gate channel
 *   01_half_life_gate_hist.tsv  histogram of log10 effective half-life
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_histogram.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "common.h"
#include "kdalab.h"

#define MAX_A 16

/* The retained fraction r(t), t = 0..T, of one association under a constant
 * decay a, for a mechanism with a decay (Gated DeltaNet, KDA, simple GLA,
 * GLA): with the delta rule token 0 writes with beta = 1 and later tokens
 * with beta = 0; without it token 0 writes k0 v0^T and later tokens v = 0. */
static void retained(const lab_ctx *x, gsl_rng *rng, size_t K, size_t V, size_t T, double a,
                     kdalab_mechanism mech, double *r)
{
    size_t n = T + 1;
    kdalab_dims d = {1, n, 1, K, V};
    size_t gw = kdalab_mechanism_g_width(mech, K);
    double *k0 = lab_zeros(x, K), *v0 = lab_zeros(x, V);
    lab_random_unit(rng, k0, K);
    lab_random_unit(rng, v0, V);
    double *q = lab_zeros(x, n * K), *k = lab_zeros(x, n * K), *v = lab_zeros(x, n * V);
    double *g = lab_zeros(x, n * gw), *beta = lab_zeros(x, n), *o = lab_zeros(x, n * V);
    for (size_t t = 0; t < n; t++) {
        memcpy(q + t * K, k0, K * sizeof *k0);
        memcpy(k + t * K, k0, K * sizeof *k0);
        for (size_t c = 0; c < gw; c++) g[t * gw + c] = log(a);
    }
    memcpy(v, v0, V * sizeof *v0); /* token 0 writes v0; later tokens write nothing */
    beta[0] = 1.0;
    lab_check(x, kdalab_recurrent_f64(&d, mech, kdalab_default_scale(K), q, k, v, g,
                                      kdalab_mechanism_has_delta(mech) ? beta : NULL, NULL, o,
                                      NULL),
              "kdalab_recurrent_f64");
    double o0 = 0.0;
    for (size_t j = 0; j < V; j++) o0 += o[j] * v0[j];
    for (size_t t = 0; t < n; t++) {
        double s = 0.0;
        for (size_t j = 0; j < V; j++) s += o[t * V + j] * v0[j];
        r[t] = s / o0;
    }
    free(k0), free(v0), free(q), free(k), free(v), free(g), free(beta), free(o);
}

static double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z)); }

/* The command-line parameters; a[] and na are parsed from decays. */
typedef struct {
    size_t K, V, T, heads, channels, tokens;
    const char *decays;
    double r_min, x_std, lower_bound;
    double a[MAX_A];
    size_t na;
} params;

/* ---- part 1: constant decay ------------------------------------------------ */

/* The half-life of one decay factor a, exact and fitted. */
typedef struct {
    double hl_exact, hl_fit, rel, dmax; /* dmax: max_t |r_gdn - r_kda| */
    double dgrid;                       /* max_t |r_gdn - r| over KDA, simple GLA, GLA */
    size_t nfit;                        /* points in the fit            */
} decay_fit;

/* r(t) for every a through both mechanisms, and the fit of each half-life:
 * 01_half_life.tsv and 01_half_life_fit.tsv. */
static void constant_decays(lab_ctx *x, const params *p, gsl_rng *rng, decay_fit *fit)
{
    size_t K = p->K, V = p->V, T = p->T;
    static const char *const cols[] = {
        "a", "decay factor per token (1)",
        "t", "tokens since the write",
        "r_gdn", "retained fraction <o_t,v0>/<o_0,v0>, Gated DeltaNet, g = ln a (1)",
        "r_kda", "the same, KDA with g = ln a on every channel (1)",
        "r_exact", "a^t (1)",
        "r_sgla", "the same, simple GLA with g = ln a (no delta rule: later tokens write v = 0) (1)",
        "r_gla", "the same, GLA with g = ln a on every channel (1)", NULL};
    FILE *f = lab_tsv_open(x, "01_half_life", cols, "K=%zu V=%zu T=%zu a=%s beta_write=1 scale=K^-1/2",
                           K, V, T, p->decays);
    static const char *const fcols[] = {
        "a", "decay factor per token (1)",
        "hl_exact", "ln(1/2)/ln(a) (tokens)",
        "hl_fit", "-ln 2 / c1, c1 the least-squares slope of ln r_gdn(t) = c1 t (tokens)",
        "rel_diff", "(hl_fit - hl_exact)/hl_exact (1)",
        "c0", "fitted intercept of ln r (0 for a pure exponential) (1)",
        "c1_se", "standard error of the fitted slope c1 (1/token)",
        "n_fit", "points in the fit (r >= r-min)",
        "max_gdn_kda", "max_t |r_gdn - r_kda| (1)",
        "max_grid", "max_t |r_gdn - r| over KDA, simple GLA and GLA (1)", NULL};
    FILE *ff = lab_tsv_open(x, "01_half_life_fit", fcols, "K=%zu V=%zu T=%zu r_min=%g", K, V, T, p->r_min);
    double *rg = lab_zeros(x, T + 1), *rk = lab_zeros(x, T + 1);
    double *rs = lab_zeros(x, T + 1), *rl = lab_zeros(x, T + 1); /* simple GLA, GLA */
    double *ft = lab_zeros(x, T + 1), *fy = lab_zeros(x, T + 1);
    for (size_t i = 0; i < p->na; i++) {
        double a = p->a[i];
        decay_fit *fi = &fit[i];
        lab_progress(x, "decays", i, p->na);
        /* the grid's two cells draw their key and value from a copy of the
         * generator, so part 2's draws (and its numbers) are as without them */
        gsl_rng *side = gsl_rng_clone(rng);
        retained(x, side, K, V, T, a, KDALAB_SIMPLE_GLA, rs);
        retained(x, side, K, V, T, a, KDALAB_GLA, rl);
        gsl_rng_free(side);
        retained(x, rng, K, V, T, a, KDALAB_GATED_DELTANET, rg);
        retained(x, rng, K, V, T, a, KDALAB_KDA, rk);
        /* every t up to 100, then about 100 points per decade */
        size_t next = 0;
        for (size_t t = 0; t <= T; t++) {
            if (t < next) continue;
            fprintf(f, "%g\t%zu\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\n", a, t, rg[t], rk[t],
                    pow(a, (double)t), rs[t], rl[t]);
            next = t < 100 ? t + 1 : (size_t)ceil((double)t * pow(10.0, 0.01));
        }
        fprintf(f, "\n\n"); /* one gnuplot data block per a */
        size_t n = 0;
        fi->dmax = 0.0;
        fi->dgrid = 0.0;
        for (size_t t = 1; t <= T; t++) {
            double dd = fabs(rg[t] - rk[t]);
            if (dd > fi->dmax || isnan(dd)) fi->dmax = dd;
            double dg = fmax(dd, fmax(fabs(rg[t] - rs[t]), fabs(rg[t] - rl[t])));
            if (dg > fi->dgrid || isnan(dg)) fi->dgrid = dg;
            if (rg[t] >= p->r_min) {
                ft[n] = (double)t;
                fy[n] = log(rg[t]);
                n++;
            }
        }
        double c0 = NAN, c1 = NAN, cov00, cov01, cov = NAN, sumsq;
        if (n >= 3) gsl_fit_linear(ft, 1, fy, 1, n, &c0, &c1, &cov00, &cov01, &cov, &sumsq);
        fi->nfit = n;
        fi->hl_exact = log(0.5) / log(a);
        fi->hl_fit = -log(2.0) / c1;
        fi->rel = (fi->hl_fit - fi->hl_exact) / fi->hl_exact;
        fprintf(ff, "%g\t%.10g\t%.10g\t%.3e\t%.3e\t%.3e\t%zu\t%.3e\t%.3e\n", a, fi->hl_exact,
                fi->hl_fit, fi->rel, c0, sqrt(cov), n, fi->dmax, fi->dgrid);
    }
    lab_progress(x, "decays", p->na, p->na);
    lab_tsv_close(x, f);
    lab_tsv_close(x, ff);
    free(rg), free(rk), free(rs), free(rl), free(ft), free(fy);
}

static void print_decay_summary(const lab_ctx *x, const params *p, const decay_fit *fit)
{
    printf("01_half_life — one association under a constant decay a (K=%zu, V=%zu, T=%zu, seed %lu)\n\n",
           p->K, p->V, p->T, x->seed);
    printf("  %-8s %14s %14s %10s %7s %12s %12s\n", "a", "ln(1/2)/ln a", "fitted", "rel diff",
           "points", "|GDN-KDA|", "|GDN-grid|");
    for (size_t i = 0; i < p->na; i++)
        printf("  %-8g %14.4f %14.4f %10.1e %7zu %12.1e %12.1e\n", p->a[i], fit[i].hl_exact,
               fit[i].hl_fit, fit[i].rel, fit[i].nfit, fit[i].dmax, fit[i].dgrid);
    printf("  (|GDN-grid|: the largest difference of KDA, simple GLA or GLA from Gated DeltaNet:\n"
           "   the horizon is the decay's, with or without the delta rule)\n");
    printf("\nchapter claims (half-life in tokens):\n");
    for (size_t i = 0; i < p->na; i++) {
        if (p->a[i] == 0.9)
            printf("  a = 0.9    \"under seven\":          measured %.3f -> %s\n", fit[i].hl_fit,
                   fit[i].hl_fit < 7.0 ? "holds" : "DOES NOT HOLD");
        if (p->a[i] == 0.9999)
            printf("  a = 0.9999 \"about seven thousand\": measured %.1f -> %s\n", fit[i].hl_fit,
                   fabs(fit[i].hl_fit - 7000.0) < 350.0 ? "holds (within 5%)" : "DOES NOT HOLD");
    }
}

/* ---- part 2: the spread of a production KDA gate ---------------------------- */

/* One gate channel over `tokens` tokens: the mean of g = lower_bound *
 * sigmoid(A (x + bias)), x ~ N(0, x_std^2); hl_tok (if not NULL) gets every
 * token's half-life ln2/|g|. */
static double gate_channel(gsl_rng *rng, double A, double bias, size_t tokens, double x_std,
                           double lower_bound, double *hl_tok)
{
    double sum = 0.0;
    for (size_t t = 0; t < tokens; t++) {
        double gv = lower_bound * sigmoid(A * (gsl_ran_gaussian(rng, x_std) + bias));
        sum += gv;
        if (hl_tok) hl_tok[t] = gv < 0 ? log(2.0) / -gv : INFINITY;
    }
    return sum / (double)tokens;
}

static double half_life(double mean_g) { return mean_g < 0 ? log(2.0) / -mean_g : INFINITY; }

/* One sampled gate: A per head, dt_bias per channel, and what it gives. */
typedef struct {
    size_t nch;            /* heads * channels                                    */
    double *A, *bias;      /* [heads], [nch]                                      */
    double *hl_eff;        /* [nch] effective half-life ln2/|mean g|              */
    double min_tok;        /* shortest per-token half-life over every channel     */
    double qv[7];          /* hl_eff at the quantiles 0, 1, 10, 50, 90, 99, 100 % */
    size_t under6, over1e6;
} gate_sample;

/* Draw the gate with fla's initialisation, sample every channel:
 * 01_half_life_gate.tsv, and the histogram 01_half_life_gate_hist.tsv. */
static void gate_spread(lab_ctx *x, const params *p, gsl_rng *rng, gate_sample *gs)
{
    size_t heads = p->heads, channels = p->channels, tokens = p->tokens, nch = heads * channels;
    gs->nch = nch;
    gs->A = lab_zeros(x, heads), gs->bias = lab_zeros(x, nch), gs->hl_eff = lab_zeros(x, nch);
    double *hl_tok = lab_zeros(x, tokens);
    gs->min_tok = INFINITY;
    static const char *const gcols[] = {
        "head", "head index",
        "channel", "key channel within the head",
        "A", "exp(A_log), A_log = ln U(1,16) per head (1)",
        "dt_bias", "softplus^-1(dt), dt log-uniform in [1e-3, 1e-1] (1)",
        "mean_g", "mean over tokens of g = lower_bound*sigmoid(A(x+dt_bias)) (log-decay per token)",
        "hl_eff", "effective half-life ln2/|mean_g| (tokens)",
        "hl_tok_median", "median over tokens of the per-token half-life ln2/|g| (tokens)",
        "hl_tok_min", "minimum over tokens of ln2/|g| (tokens)", NULL};
    FILE *fg = lab_tsv_open(x, "01_half_life_gate", gcols,
                            "heads=%zu channels=%zu tokens=%zu x~N(0,%g^2) lower_bound=%g", heads, channels,
                            tokens, p->x_std, p->lower_bound);
    for (size_t h = 0; h < heads; h++) gs->A[h] = gsl_ran_flat(rng, 1.0, 16.0);
    for (size_t c = 0; c < nch; c++) {
        double dt = exp(gsl_ran_flat(rng, log(1e-3), log(1e-1)));
        gs->bias[c] = dt + log(-expm1(-dt)); /* softplus^-1(dt) */
    }
    for (size_t h = 0; h < heads; h++) {
        for (size_t c = 0; c < channels; c++) {
            size_t ch = h * channels + c;
            double mean_g = gate_channel(rng, gs->A[h], gs->bias[ch], tokens, p->x_std,
                                         p->lower_bound, hl_tok);
            gs->hl_eff[ch] = half_life(mean_g);
            gsl_sort(hl_tok, 1, tokens);
            double tok_med = gsl_stats_median_from_sorted_data(hl_tok, 1, tokens);
            if (hl_tok[0] < gs->min_tok) gs->min_tok = hl_tok[0];
            fprintf(fg, "%zu\t%zu\t%.6g\t%.6g\t%.6e\t%.6e\t%.6e\t%.6e\n", h, c, gs->A[h], gs->bias[ch],
                    mean_g, gs->hl_eff[ch], tok_med, hl_tok[0]);
        }
    }
    lab_tsv_close(x, fg);
    free(hl_tok);

    /* histogram of log10(hl_eff) in half-decade bins from 10^-1 to past the longest
     * finite half-life, so no bin collects an overflow; a channel whose mean g is
     * exactly 0 (half-life infinite) is counted apart */
    double *lhl = lab_zeros(x, nch), hmax = 1.0;
    size_t infinite = 0;
    for (size_t c = 0; c < nch; c++) {
        lhl[c] = log10(gs->hl_eff[c]);
        if (isinf(lhl[c])) infinite++;
        else if (lhl[c] > hmax) hmax = lhl[c];
    }
    hmax = ceil(2.0 * hmax + 1e-9) / 2.0;
    gsl_histogram *hist = gsl_histogram_alloc((size_t)llround(2.0 * (hmax + 1.0)));
    gsl_histogram_set_ranges_uniform(hist, -1.0, hmax);
    for (size_t c = 0; c < nch; c++)
        if (!isinf(lhl[c])) gsl_histogram_increment(hist, lhl[c]);
    static const char *const hcols[] = {
        "log10_lo", "bin lower edge, log10 of the effective half-life (log10 tokens)",
        "log10_hi", "bin upper edge (log10 tokens)",
        "count", "channels in the bin",
        "fraction", "count / channels (1)", NULL};
    FILE *fh = lab_tsv_open(x, "01_half_life_gate_hist", hcols,
                            "heads=%zu channels=%zu tokens=%zu x~N(0,%g^2) lower_bound=%g; half-decade bins up to "
                            "the longest finite half-life; infinite=%zu channels with mean g = 0 are in no bin",
                            heads, channels, tokens, p->x_std, p->lower_bound, infinite);
    for (size_t b = 0; b < gsl_histogram_bins(hist); b++) {
        double lo, hi;
        gsl_histogram_get_range(hist, b, &lo, &hi);
        double cnt = gsl_histogram_get(hist, b);
        fprintf(fh, "%.4f\t%.4f\t%g\t%.6g\n", lo, hi, cnt, cnt / (double)nch);
    }
    lab_tsv_close(x, fh);
    gsl_histogram_free(hist);

    gsl_sort(lhl, 1, nch);
    static const double q[7] = {0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0};
    for (int i = 0; i < 7; i++) gs->qv[i] = pow(10.0, gsl_stats_quantile_from_sorted_data(lhl, 1, nch, q[i]));
    gs->under6 = gs->over1e6 = 0;
    for (size_t c = 0; c < nch; c++) {
        if (gs->hl_eff[c] < 6.0) gs->under6++;
        if (gs->hl_eff[c] > 1e6) gs->over1e6++;
    }
    free(lhl);
}

static void print_gate_summary(const params *p, const gate_sample *gs)
{
    size_t nch = gs->nch, under6 = gs->under6, over1e6 = gs->over1e6;
    const double *qv = gs->qv;
    double x_std = p->x_std, lower_bound = p->lower_bound;
    printf("\nKDA gate g = %g * sigmoid(A (x + dt_bias)), fla init, x ~ N(0, %g^2): %zu heads x %zu channels, "
           "%zu tokens each\n", lower_bound, x_std, p->heads, p->channels, p->tokens);
    printf("  bound: per-token half-life > ln2/%g = %.4f tokens; no upper bound (g -> 0)\n", -lower_bound,
           log(2.0) / -lower_bound);
    printf("  shortest per-token half-life seen:       %.4f tokens\n", gs->min_tok);
    printf("  effective per-channel half-life ln2/|mean g| (tokens):\n");
    printf("    min %.3g  1%% %.3g  10%% %.3g  median %.3g  90%% %.3g  99%% %.3g  max %.3g\n", qv[0], qv[1],
           qv[2], qv[3], qv[4], qv[5], qv[6]);
    printf("    channels under 6 tokens: %zu of %zu (%.1f%%); over 1e6 tokens: %zu (%.1f%%)\n", under6, nch,
           100.0 * under6 / nch, over1e6, 100.0 * over1e6 / nch);
    printf("  chapter: \"from about six tokens to effectively permanent\": with x std %g the upper end holds "
           "(%.1f%% of channels\n  beyond 1e6 tokens) and the shortest channel is %.3g tokens (%s); the gate's "
           "floor is %.3f tokens per token,\n  not six. Both ends move with the scale of x (table below).\n",
           x_std, 100.0 * over1e6 / nch, qv[0], qv[0] >= 3.0 && qv[0] <= 12.0 ? "the order of the chapter's six" : "NOT about six",
           log(2.0) / -lower_bound);
}

/* How much the spread depends on the scale of the gate input x: the same A
 * and dt_bias, fresh draws of x at three standard deviations. */
static void gate_sensitivity(const params *p, gsl_rng *rng, gate_sample *gs)
{
    size_t nch = gs->nch;
    double *hl = gs->hl_eff; /* overwritten: the summary above has been printed */
    static const double xs[3] = {1.0 / 3.0, 1.0, 3.0};
    printf("\n  sensitivity to the std of x (same A and dt_bias, fresh draws of x, so the std 1 row\n"
           "  differs from the block above by sampling alone; effective half-life in tokens):\n");
    printf("    %-8s %10s %10s %10s %12s %12s\n", "x std", "min", "median", "max", "< 6 tokens", "> 1e6 tokens");
    for (int i = 0; i < 3; i++) {
        for (size_t h = 0; h < p->heads; h++)
            for (size_t c = 0; c < p->channels; c++) {
                size_t ch = h * p->channels + c;
                hl[ch] = half_life(gate_channel(rng, gs->A[h], gs->bias[ch], p->tokens, xs[i],
                                                p->lower_bound, NULL));
            }
        gsl_sort(hl, 1, nch);
        size_t u6 = 0, o6 = 0;
        for (size_t c = 0; c < nch; c++) u6 += hl[c] < 6.0, o6 += hl[c] > 1e6;
        printf("    %-8.3g %10.3g %10.3g %10.3g %11.1f%% %11.1f%%\n", xs[i], hl[0],
               gsl_stats_median_from_sorted_data(hl, 1, nch), hl[nch - 1], 100.0 * u6 / nch,
               100.0 * o6 / nch);
    }
    printf("    (x std 1/3 is roughly what two default-initialised nn.Linear layers give a unit-RMS input)\n");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K = 16, .V = 16, .T = 100000, .heads = 8, .channels = 128, .tokens = 4096,
                .decays = "0.5,0.9,0.99,0.999,0.9999", .r_min = 1e-3, .x_std = 1.0,
                .lower_bound = -5.0};
    lab_init(&x, "01_half_life", "per-channel decay as a memory horizon: half-lives of constant decays and of a KDA gate");
    lab_flag_string(&x, "a", &p.decays, "comma-separated decay factors a in (0,1)");
    lab_flag_size(&x, "T", &p.T, "tokens of decay after the write");
    lab_flag_size(&x, "K", &p.K, "key dimension of the decay run");
    lab_flag_size(&x, "V", &p.V, "value dimension of the decay run");
    lab_flag_double(&x, "r-min", &p.r_min, "fit ln r(t) over the points with r >= r-min");
    lab_flag_size(&x, "heads", &p.heads, "gate sample: heads (one A per head)");
    lab_flag_size(&x, "channels", &p.channels, "gate sample: key channels per head");
    lab_flag_size(&x, "tokens", &p.tokens, "gate sample: tokens per channel");
    lab_flag_double(&x, "x-std", &p.x_std, "gate sample: std of the gate projection x");
    lab_flag_double(&x, "lower-bound", &p.lower_bound, "gate: g = lower_bound * sigmoid(...), < 0");
    lab_parse(&x, argc, argv);

    p.na = lab_parse_list(p.decays, p.a, MAX_A);
    for (size_t i = 0; i < p.na; i++)
        if (!(p.a[i] > 0.0 && p.a[i] < 1.0)) p.na = 0;
    lab_need(&x, p.na > 0, "--a", "1 to %d values, each in (0, 1)", MAX_A);
    lab_need(&x, p.K >= 1 && p.V >= 1, "--K, --V", "K, V >= 1");
    lab_need(&x, p.T >= 2, "--T", "T >= 2");
    lab_need(&x, p.heads >= 1 && p.channels >= 1 && p.tokens >= 1, "--heads, --channels, --tokens",
             "each >= 1");
    lab_need(&x, p.lower_bound < 0, "--lower-bound", "a value < 0");
    lab_need(&x, p.x_std >= 0, "--x-std", "a value >= 0");
    lab_need(&x, p.r_min > 0 && p.r_min < 1, "--r-min", "a value in (0, 1)");
    gsl_rng *rng = lab_rng(&x);
    decay_fit fit[MAX_A];
    gate_sample gs;
    constant_decays(&x, &p, rng, fit);
    gate_spread(&x, &p, rng, &gs);
    print_decay_summary(&x, &p, fit);
    print_gate_summary(&p, &gs);
    gate_sensitivity(&p, rng, &gs);
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    free(gs.A), free(gs.bias), free(gs.hl_eff);
    gsl_rng_free(rng);
    return 0;
}
