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
 * and as KDA (g = ln a on every channel): the two must agree. The half-life is
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
 *   01_half_life.tsv            r(t) per a, both mechanisms, and a^t
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
 * decay a, for Gated DeltaNet (kda == 0) or KDA (kda == 1). */
static void retained(const lab_ctx *x, gsl_rng *rng, size_t K, size_t V, size_t T, double a,
                     int kda, double *r)
{
    size_t n = T + 1;
    kdalab_dims d = {1, n, 1, K, V};
    kdalab_mechanism mech = kda ? KDALAB_KDA : KDALAB_GATED_DELTANET;
    size_t gw = kda ? K : 1;
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
    lab_check(x, kdalab_recurrent_f64(&d, mech, kdalab_default_scale(K), q, k, v, g, beta, NULL, o, NULL),
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

/* Effective half-life ln2/|mean_t g| of every channel of a gate with per-head
 * A[heads] and per-channel bias[heads*channels], x ~ N(0, x_std^2). */
static void gate_effective(gsl_rng *rng, const double *A, const double *bias, size_t heads,
                           size_t channels, size_t tokens, double x_std, double lower_bound, double *hl)
{
    for (size_t h = 0; h < heads; h++)
        for (size_t c = 0; c < channels; c++) {
            size_t ch = h * channels + c;
            double sum = 0.0;
            for (size_t t = 0; t < tokens; t++)
                sum += lower_bound * sigmoid(A[h] * (gsl_ran_gaussian(rng, x_std) + bias[ch]));
            double mg = sum / (double)tokens;
            hl[ch] = mg < 0 ? log(2.0) / -mg : INFINITY;
        }
}

int main(int argc, char **argv)
{
    lab_ctx x;
    size_t K = 16, V = 16, T = 100000, heads = 8, channels = 128, tokens = 4096;
    const char *decays = "0.5,0.9,0.99,0.999,0.9999";
    double r_min = 1e-3, x_std = 1.0, lower_bound = -5.0;
    lab_init(&x, "01_half_life", "per-channel decay as a memory horizon: half-lives of constant decays and of a KDA gate");
    lab_flag_string(&x, "a", &decays, "comma-separated decay factors a in (0,1)");
    lab_flag_size(&x, "T", &T, "tokens of decay after the write");
    lab_flag_size(&x, "K", &K, "key dimension of the decay run");
    lab_flag_size(&x, "V", &V, "value dimension of the decay run");
    lab_flag_double(&x, "r-min", &r_min, "fit ln r(t) over the points with r >= r-min");
    lab_flag_size(&x, "heads", &heads, "gate sample: heads (one A per head)");
    lab_flag_size(&x, "channels", &channels, "gate sample: key channels per head");
    lab_flag_size(&x, "tokens", &tokens, "gate sample: tokens per channel");
    lab_flag_double(&x, "x-std", &x_std, "gate sample: std of the gate projection x");
    lab_flag_double(&x, "lower-bound", &lower_bound, "gate: g = lower_bound * sigmoid(...), < 0");
    lab_parse(&x, argc, argv);

    double a[MAX_A];
    size_t na = lab_parse_list(decays, a, MAX_A);
    for (size_t i = 0; i < na; i++)
        if (!(a[i] > 0.0 && a[i] < 1.0)) na = 0;
    if (na == 0 || K == 0 || V == 0 || T < 2 || heads == 0 || channels == 0 || tokens == 0 ||
        !(lower_bound < 0) || !(x_std >= 0) || !(r_min > 0 && r_min < 1)) {
        fprintf(stderr, "01_half_life: bad parameters (need a in (0,1), at most %d values; K, V, heads, "
                        "channels, tokens >= 1; T >= 2; lower-bound < 0; r-min in (0,1))\n", MAX_A);
        return 2;
    }
    gsl_rng *rng = lab_rng(&x);

    /* ---- part 1: constant decay ------------------------------------------ */
    static const char *const cols[] = {
        "a", "decay factor per token (1)",
        "t", "tokens since the write",
        "r_gdn", "retained fraction <o_t,v0>/<o_0,v0>, Gated DeltaNet, g = ln a (1)",
        "r_kda", "the same, KDA with g = ln a on every channel (1)",
        "r_exact", "a^t (1)", NULL};
    FILE *f = lab_tsv_open(&x, "01_half_life", cols, "K=%zu V=%zu T=%zu a=%s beta_write=1 scale=K^-1/2",
                           K, V, T, decays);
    static const char *const fcols[] = {
        "a", "decay factor per token (1)",
        "hl_exact", "ln(1/2)/ln(a) (tokens)",
        "hl_fit", "-ln 2 / c1, c1 the least-squares slope of ln r_gdn(t) = c1 t (tokens)",
        "rel_diff", "(hl_fit - hl_exact)/hl_exact (1)",
        "c0", "fitted intercept of ln r (0 for a pure exponential) (1)",
        "c1_se", "standard error of the fitted slope c1 (1/token)",
        "n_fit", "points in the fit (r >= r-min)",
        "max_gdn_kda", "max_t |r_gdn - r_kda| (1)", NULL};
    FILE *ff = lab_tsv_open(&x, "01_half_life_fit", fcols, "K=%zu V=%zu T=%zu r_min=%g", K, V, T, r_min);
    double *rg = lab_zeros(&x, T + 1), *rk = lab_zeros(&x, T + 1);
    double *ft = lab_zeros(&x, T + 1), *fy = lab_zeros(&x, T + 1);
    double hl_fit[MAX_A], hl_exact[MAX_A], rel[MAX_A], dmax[MAX_A];
    size_t nfit[MAX_A];
    for (size_t i = 0; i < na; i++) {
        lab_progress(&x, "decays", i, na);
        retained(&x, rng, K, V, T, a[i], 0, rg);
        retained(&x, rng, K, V, T, a[i], 1, rk);
        /* every t up to 100, then about 100 points per decade */
        size_t next = 0;
        for (size_t t = 0; t <= T; t++) {
            if (t < next) continue;
            fprintf(f, "%g\t%zu\t%.17g\t%.17g\t%.17g\n", a[i], t, rg[t], rk[t], pow(a[i], (double)t));
            next = t < 100 ? t + 1 : (size_t)ceil((double)t * pow(10.0, 0.01));
        }
        fprintf(f, "\n\n"); /* one gnuplot data block per a */
        size_t n = 0;
        dmax[i] = 0.0;
        for (size_t t = 1; t <= T; t++) {
            double dd = fabs(rg[t] - rk[t]);
            if (dd > dmax[i] || isnan(dd)) dmax[i] = dd;
            if (rg[t] >= r_min) {
                ft[n] = (double)t;
                fy[n] = log(rg[t]);
                n++;
            }
        }
        double c0 = NAN, c1 = NAN, cov00, cov01, cov = NAN, sumsq;
        if (n >= 3) gsl_fit_linear(ft, 1, fy, 1, n, &c0, &c1, &cov00, &cov01, &cov, &sumsq);
        nfit[i] = n;
        hl_exact[i] = log(0.5) / log(a[i]);
        hl_fit[i] = -log(2.0) / c1;
        rel[i] = (hl_fit[i] - hl_exact[i]) / hl_exact[i];
        fprintf(ff, "%g\t%.10g\t%.10g\t%.3e\t%.3e\t%.3e\t%zu\t%.3e\n", a[i], hl_exact[i], hl_fit[i],
                rel[i], c0, sqrt(cov), n, dmax[i]);
    }
    lab_progress(&x, "decays", na, na);
    lab_tsv_close(&x, f);
    lab_tsv_close(&x, ff);
    free(rg), free(rk), free(ft), free(fy);

    /* ---- part 2: the spread of a production KDA gate ---------------------- */
    size_t nch = heads * channels;
    double *A = lab_zeros(&x, heads), *bias = lab_zeros(&x, nch);
    double *mean_g = lab_zeros(&x, nch), *hl_eff = lab_zeros(&x, nch);
    double *hl_tok = lab_zeros(&x, tokens), *tok_med = lab_zeros(&x, nch), *tok_min = lab_zeros(&x, nch);
    double min_tok_all = INFINITY;
    static const char *const gcols[] = {
        "head", "head index",
        "channel", "key channel within the head",
        "A", "exp(A_log), A_log = ln U(1,16) per head (1)",
        "dt_bias", "softplus^-1(dt), dt log-uniform in [1e-3, 1e-1] (1)",
        "mean_g", "mean over tokens of g = lower_bound*sigmoid(A(x+dt_bias)) (log-decay per token)",
        "hl_eff", "effective half-life ln2/|mean_g| (tokens)",
        "hl_tok_median", "median over tokens of the per-token half-life ln2/|g| (tokens)",
        "hl_tok_min", "minimum over tokens of ln2/|g| (tokens)", NULL};
    FILE *fg = lab_tsv_open(&x, "01_half_life_gate", gcols,
                            "heads=%zu channels=%zu tokens=%zu x~N(0,%g^2) lower_bound=%g", heads, channels,
                            tokens, x_std, lower_bound);
    for (size_t h = 0; h < heads; h++) A[h] = gsl_ran_flat(rng, 1.0, 16.0);
    for (size_t c = 0; c < nch; c++) {
        double dt = exp(gsl_ran_flat(rng, log(1e-3), log(1e-1)));
        bias[c] = dt + log(-expm1(-dt)); /* softplus^-1(dt) */
    }
    for (size_t h = 0; h < heads; h++) {
        for (size_t c = 0; c < channels; c++) {
            size_t ch = h * channels + c;
            double sum = 0.0;
            for (size_t t = 0; t < tokens; t++) {
                double xv = gsl_ran_gaussian(rng, x_std);
                double gv = lower_bound * sigmoid(A[h] * (xv + bias[ch]));
                sum += gv;
                hl_tok[t] = gv < 0 ? log(2.0) / -gv : INFINITY;
            }
            mean_g[ch] = sum / (double)tokens;
            hl_eff[ch] = mean_g[ch] < 0 ? log(2.0) / -mean_g[ch] : INFINITY;
            gsl_sort(hl_tok, 1, tokens);
            tok_med[ch] = gsl_stats_median_from_sorted_data(hl_tok, 1, tokens);
            tok_min[ch] = hl_tok[0];
            if (hl_tok[0] < min_tok_all) min_tok_all = hl_tok[0];
            fprintf(fg, "%zu\t%zu\t%.6g\t%.6g\t%.6e\t%.6e\t%.6e\t%.6e\n", h, c, A[h], bias[ch], mean_g[ch],
                    hl_eff[ch], tok_med[ch], tok_min[ch]);
        }
    }
    lab_tsv_close(&x, fg);

    /* histogram of log10(hl_eff); values past the top edge go into the last bin */
    double *lhl = lab_zeros(&x, nch);
    for (size_t c = 0; c < nch; c++) lhl[c] = log10(hl_eff[c]);
    double hmax = 12.0;
    gsl_histogram *hist = gsl_histogram_alloc(52);
    gsl_histogram_set_ranges_uniform(hist, -1.0, hmax);
    size_t beyond = 0;
    for (size_t c = 0; c < nch; c++) {
        double v = lhl[c] >= hmax ? hmax - 1e-9 : lhl[c];
        if (lhl[c] >= hmax) beyond++;
        gsl_histogram_increment(hist, v);
    }
    static const char *const hcols[] = {
        "log10_lo", "bin lower edge, log10 of the effective half-life (log10 tokens)",
        "log10_hi", "bin upper edge (log10 tokens)",
        "count", "channels in the bin (the last bin also holds every channel beyond its edge)",
        "fraction", "count / channels (1)", NULL};
    FILE *fh = lab_tsv_open(&x, "01_half_life_gate_hist", hcols,
                            "heads=%zu channels=%zu tokens=%zu x~N(0,%g^2) lower_bound=%g; %zu channels "
                            "with half-life >= 1e%g tokens are counted in the last bin",
                            heads, channels, tokens, x_std, lower_bound, beyond, hmax);
    for (size_t b = 0; b < gsl_histogram_bins(hist); b++) {
        double lo, hi;
        gsl_histogram_get_range(hist, b, &lo, &hi);
        double cnt = gsl_histogram_get(hist, b);
        fprintf(fh, "%.4f\t%.4f\t%g\t%.6g\n", lo, hi, cnt, cnt / (double)nch);
    }
    lab_tsv_close(&x, fh);
    gsl_histogram_free(hist);

    gsl_sort(lhl, 1, nch);
    double q[7] = {0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0};
    double qv[7];
    for (int i = 0; i < 7; i++) qv[i] = pow(10.0, gsl_stats_quantile_from_sorted_data(lhl, 1, nch, q[i]));
    size_t under6 = 0, over1e6 = 0;
    for (size_t c = 0; c < nch; c++) {
        if (hl_eff[c] < 6.0) under6++;
        if (hl_eff[c] > 1e6) over1e6++;
    }

    /* ---- summary ---------------------------------------------------------- */
    printf("01_half_life — one association under a constant decay a (K=%zu, V=%zu, T=%zu, seed %lu)\n\n",
           K, V, T, x.seed);
    printf("  %-8s %14s %14s %10s %7s %12s\n", "a", "ln(1/2)/ln a", "fitted", "rel diff", "points",
           "|GDN-KDA|");
    for (size_t i = 0; i < na; i++)
        printf("  %-8g %14.4f %14.4f %10.1e %7zu %12.1e\n", a[i], hl_exact[i], hl_fit[i], rel[i], nfit[i],
               dmax[i]);
    printf("\nchapter claims (half-life in tokens):\n");
    for (size_t i = 0; i < na; i++) {
        if (a[i] == 0.9)
            printf("  a = 0.9    \"under seven\":          measured %.3f -> %s\n", hl_fit[i],
                   hl_fit[i] < 7.0 ? "holds" : "DOES NOT HOLD");
        if (a[i] == 0.9999)
            printf("  a = 0.9999 \"about seven thousand\": measured %.1f -> %s\n", hl_fit[i],
                   fabs(hl_fit[i] - 7000.0) < 350.0 ? "holds (within 5%)" : "DOES NOT HOLD");
    }
    printf("\nKDA gate g = %g * sigmoid(A (x + dt_bias)), fla init, x ~ N(0, %g^2): %zu heads x %zu channels, "
           "%zu tokens each\n", lower_bound, x_std, heads, channels, tokens);
    printf("  bound: per-token half-life > ln2/%g = %.4f tokens; no upper bound (g -> 0)\n", -lower_bound,
           log(2.0) / -lower_bound);
    printf("  shortest per-token half-life seen:       %.4f tokens\n", min_tok_all);
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

    /* how much the spread depends on the scale of the gate input x */
    static const double xs[3] = {1.0 / 3.0, 1.0, 3.0};
    printf("\n  sensitivity to the std of x (same A and dt_bias, fresh draws of x, so the std 1 row\n"
           "  differs from the block above by sampling alone; effective half-life in tokens):\n");
    printf("    %-8s %10s %10s %10s %12s %12s\n", "x std", "min", "median", "max", "< 6 tokens", "> 1e6 tokens");
    for (int i = 0; i < 3; i++) {
        gate_effective(rng, A, bias, heads, channels, tokens, xs[i], lower_bound, hl_eff);
        gsl_sort(hl_eff, 1, nch);
        size_t u6 = 0, o6 = 0;
        for (size_t c = 0; c < nch; c++) u6 += hl_eff[c] < 6.0, o6 += hl_eff[c] > 1e6;
        printf("    %-8.3g %10.3g %10.3g %10.3g %11.1f%% %11.1f%%\n", xs[i], hl_eff[0],
               gsl_stats_median_from_sorted_data(hl_eff, 1, nch), hl_eff[nch - 1], 100.0 * u6 / nch,
               100.0 * o6 / nch);
    }
    printf("    (x std 1/3 is roughly what two default-initialised nn.Linear layers give a unit-RMS input)\n");
    printf("\n(%.1f s)\n", lab_elapsed(&x));

    free(A), free(bias), free(mean_g), free(hl_eff), free(hl_tok), free(tok_med), free(tok_min), free(lhl);
    gsl_rng_free(rng);
    return 0;
}
