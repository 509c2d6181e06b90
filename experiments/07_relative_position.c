/*
 * 07_relative_position — decay as a relative position bias (seed chapter,
 * "Decay is a learned relative position bias": "exponential decay is a
 * relative position bias, of exactly the family ALiBi made explicit, except
 * that here it is (a) learned, (b) data-dependent and (c) multi-scale").
 *
 * What is measured: the factor by which a fact written at position j is
 * scaled when it is read at position i >= j, per key channel, through the
 * library's decode step (kdalab_step_f64). The state just after position j
 * holds one fact per channel, S_j = I (key e_c -> value e_c, V = K); every
 * later position writes nothing (beta = 0) and decays with its gate g_t; the
 * read uses q = (1, ..., 1) and scale 1, so o_i[c] = w_c(j -> i), the weight
 * of channel c's fact after the span. Its log is the position bias.
 *
 * Part 1, fixed gates (the same g at every position): for
 *   the scalar gate    Gated DeltaNet, one g = ln a for every channel
 *   KDA                one g per channel, g_c = -m_c with m_c ALiBi's slopes
 *                      2^(-8c/K), c = 1..K (so channel c and ALiBi head c of
 *                      a K-head model have the same slope)
 *   no decay           linear attention (the reference: no position signal)
 * log w against the distance d = i - j, the least-squares slope and R^2
 * (gsl_fit_linear), and the largest change of log w(d) when the write moves
 * to another absolute position j (a relative bias does not move).
 * ALiBi is its definition: softmax logit bias -m_h d, h = 1..H, so the
 * attention weight is scaled by exp(-m_h d).
 * Part 2, a data-dependent gate: g_t[c] = -m_c z_t[c], z log-normal with mean
 * 1 (--sigma), and hard resets (g = --reset-g) at a few positions. log w is
 * compared with the sum of g over j+1..i; for a fixed distance its spread over
 * the start positions j shows that the bias is no longer a function of i - j.
 * Part 3, the KDA mixture: a query and key spread evenly over the K channels
 * of ONE head weigh a fact by (1/K) sum_c exp(-m_c d): K timescales inside a
 * head, where ALiBi gives each head one slope. Its log is not linear in d.
 *
 * Outputs (DIR = --out):
 *   07_relative_position.tsv          part 1 and 3: log w per series and distance
 *   07_relative_position_fit.tsv      per series: slope set, slope fitted, R^2
 *   07_relative_position_dynamic.tsv  part 2: log w and sum g per start and distance
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_randist.h>

#include "common.h"
#include "kdalab.h"

typedef struct {
    size_t K, D, T, starts, resets;
    double a, sigma, reset_g;
} params;

/* ALiBi's slope of head h (1-based) among H: 2^(-8h/H). */
static double alibi_slope(size_t h, size_t H) { return pow(2.0, -8.0 * (double)h / (double)H); }

/*
 * The measured log-weights of one write at position j, read at j .. j+D:
 * logw[d * K + c] = ln o_{j+d}[c]. g holds T rows of gw values (gw = 0, 1 or
 * K: no decay, one per position, one per channel); position t uses row t.
 */
static void measure(const lab_ctx *x, kdalab_mechanism mech, const double *g, size_t gw,
                    size_t K, size_t j, size_t D, double *logw)
{
    double *S = lab_zeros(x, K * K), *q = lab_zeros(x, K), *k = lab_zeros(x, K),
           *v = lab_zeros(x, K), *o = lab_zeros(x, K);
    for (size_t c = 0; c < K; c++) {
        S[c * K + c] = 1.0; /* S_j = I: fact c written through channel c */
        q[c] = 1.0;
    }
    for (size_t c = 0; c < K; c++) logw[c] = 0.0; /* d = 0: the write itself */
    for (size_t d = 1; d <= D; d++) {
        const double *gt = gw ? g + (j + d) * gw : NULL;
        lab_check(x, kdalab_step_f64(mech, K, K, 1.0, q, k, v, gt, 0.0, S, o), "decode step");
        for (size_t c = 0; c < K; c++) logw[d * K + c] = log(o[c]);
    }
    free(S), free(q), free(k), free(v), free(o);
}

typedef struct {
    double slope, intercept, r2;
} fit;

/* Least squares y = intercept + slope * d over d = 0..n-1 (y with stride). */
static fit fit_line(const lab_ctx *x, const double *y, size_t stride, size_t n)
{
    double *d = lab_zeros(x, n), *yy = lab_zeros(x, n);
    fit f = {NAN, NAN, NAN};
    double mean = 0.0, tss = 0.0, c00, c01, c11, rss;
    for (size_t i = 0; i < n; i++) {
        d[i] = (double)i;
        yy[i] = y[i * stride];
        mean += yy[i] / (double)n;
    }
    for (size_t i = 0; i < n; i++) tss += (yy[i] - mean) * (yy[i] - mean);
    gsl_fit_linear(d, 1, yy, 1, n, &f.intercept, &f.slope, &c00, &c01, &c11, &rss);
    f.r2 = tss > 0.0 ? 1.0 - rss / tss : 1.0;
    free(d), free(yy);
    return f;
}

/* ---- part 1 and 3: fixed gates ------------------------------------------------------ */

typedef struct {
    const char *series;   /* scalar_gate, kda, no_decay, alibi, kda_mixture */
    size_t channel;       /* 1-based channel or head; 0 for one-line series  */
    double m;             /* set slope (decay per token), 0 for none         */
    fit f;
    double max_dev;       /* max |log w - (-m d)|                            */
    double shift_dev;     /* max change of log w(d) when j moves             */
} series_fit;

#define MAX_FIT 256

/* Fixed gates, measured at start positions 0, T/2 and T - D - 1. Writes the
 * TSV of log-weights and returns the fits in out[] (count in *n). */
static void fixed_gates(lab_ctx *x, const params *p, series_fit *out, size_t *n)
{
    const size_t K = p->K, D = p->D, T = p->T;
    double *g_kda = lab_zeros(x, T * K), *g_gdn = lab_zeros(x, T);
    for (size_t t = 0; t < T; t++) {
        g_gdn[t] = log(p->a);
        for (size_t c = 0; c < K; c++) g_kda[t * K + c] = -alibi_slope(c + 1, K);
    }
    const size_t starts[3] = {0, T / 2, T - D - 1};
    double *w[3][3]; /* [mechanism][start] */
    const kdalab_mechanism mech[3] = {KDALAB_GATED_DELTANET, KDALAB_KDA,
                                      KDALAB_LINEAR_ATTENTION};
    const double *gs[3] = {g_gdn, g_kda, NULL};
    const size_t gw[3] = {1, K, 0};
    for (int m = 0; m < 3; m++)
        for (int s = 0; s < 3; s++) {
            w[m][s] = lab_zeros(x, (D + 1) * K);
            measure(x, mech[m], gs[m], gw[m], K, starts[s], D, w[m][s]);
        }

    static const char *const cols[] = {
        "series", "scalar_gate (Gated DeltaNet), kda (per channel), no_decay (linear "
                  "attention), alibi (definition), kda_mixture (one head, q, k spread "
                  "evenly over the K channels)",
        "channel", "KDA channel or ALiBi head, 1-based (0: one-line series)",
        "m", "slope set: decay per token, -g (ALiBi: 2^(-8h/H))",
        "d", "distance i - j, tokens",
        "logw", "ln of the weight of a fact written at j, read at i = j + d (measured with "
                "kdalab_step_f64, j = 0; ALiBi: -m d by definition)",
        "pred", "-m d, the straight line of slope m (kda_mixture: ln mean_c exp(-m_c d))",
        NULL};
    FILE *f = lab_tsv_open(x, "07_relative_position", cols,
                           "K=%zu channels (= ALiBi heads H), D=%zu, scalar gate a=%g "
                           "(m=%.6g), KDA g_c = -2^(-8c/K)", K, D, p->a, -log(p->a));
    size_t nf = 0;
    for (int m = 0; m < 3; m++) {
        size_t nch = m == 1 ? K : 1;
        for (size_t c = 0; c < nch; c++) {
            series_fit *sf = &out[nf++];
            sf->series = m == 0 ? "scalar_gate" : m == 1 ? "kda" : "no_decay";
            sf->channel = m == 1 ? c + 1 : 0;
            sf->m = m == 0 ? -log(p->a) : m == 1 ? alibi_slope(c + 1, K) : 0.0;
            sf->f = fit_line(x, w[m][0] + c, K, D + 1);
            sf->max_dev = sf->shift_dev = 0.0;
            for (size_t d = 0; d <= D; d++) {
                double y = w[m][0][d * K + c], pr = -sf->m * (double)d;
                sf->max_dev = fmax(sf->max_dev, fabs(y - pr));
                for (int s = 1; s < 3; s++)
                    sf->shift_dev = fmax(sf->shift_dev, fabs(w[m][s][d * K + c] - y));
                fprintf(f, "%s\t%zu\t%.8g\t%zu\t%.12g\t%.12g\n", sf->series, sf->channel, sf->m,
                        d, y, pr);
            }
            fprintf(f, "\n\n");
        }
    }
    for (size_t h = 1; h <= K; h++) { /* ALiBi: the bias itself */
        series_fit *sf = &out[nf++];
        sf->series = "alibi";
        sf->channel = h;
        sf->m = alibi_slope(h, K);
        sf->f = (fit){-sf->m, 0.0, 1.0};
        sf->max_dev = sf->shift_dev = 0.0;
        for (size_t d = 0; d <= D; d++)
            fprintf(f, "alibi\t%zu\t%.8g\t%zu\t%.12g\t%.12g\n", h, sf->m, d, -sf->m * (double)d,
                    -sf->m * (double)d);
        fprintf(f, "\n\n");
    }
    /* part 3: the KDA mixture inside one head, from the measured channel weights */
    double *mix = lab_zeros(x, D + 1);
    series_fit *sf = &out[nf++];
    *sf = (series_fit){.series = "kda_mixture", .channel = 0, .m = NAN};
    for (size_t d = 0; d <= D; d++) {
        double s = 0.0, pr = 0.0;
        for (size_t c = 0; c < K; c++) {
            s += exp(w[1][0][d * K + c]) / (double)K;
            pr += exp(-alibi_slope(c + 1, K) * (double)d) / (double)K;
        }
        mix[d] = log(s);
        sf->max_dev = fmax(sf->max_dev, fabs(mix[d] - log(pr)));
        fprintf(f, "kda_mixture\t0\tnan\t%zu\t%.12g\t%.12g\n", d, mix[d], log(pr));
    }
    sf->f = fit_line(x, mix, 1, D + 1);
    lab_tsv_close(x, f);
    *n = nf;
    free(mix);
    for (int m = 0; m < 3; m++)
        for (int s = 0; s < 3; s++) free(w[m][s]);
    free(g_kda), free(g_gdn);
}

static void write_fits(lab_ctx *x, const params *p, const series_fit *sf, size_t n)
{
    static const char *const cols[] = {
        "series", "as in 07_relative_position.tsv",
        "channel", "KDA channel or ALiBi head (1-based; 0: one-line series)",
        "m_set", "slope set, per token (nan: the mixture has no single slope)",
        "slope_fit", "least-squares slope of log w on d (gsl_fit_linear), d = 0..D",
        "r2", "coefficient of determination of that fit",
        "max_dev", "max over d of |log w - (-m d)| (mixture: against its formula)",
        "shift_dev", "max over d of the change of log w(d) when the write moves from j = 0 "
                     "to j = T/2 and j = T-D-1",
        NULL};
    FILE *f = lab_tsv_open(x, "07_relative_position_fit", cols, "K=%zu D=%zu T=%zu", p->K, p->D,
                           p->T);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\t%zu\t%.8g\t%.10g\t%.15g\t%.3e\t%.3e\n", sf[i].series, sf[i].channel,
                sf[i].m, -sf[i].f.slope, sf[i].f.r2, sf[i].max_dev, sf[i].shift_dev);
    lab_tsv_close(x, f);
}

/* ---- part 2: a data-dependent gate --------------------------------------------------- */

typedef struct {
    double max_sum_err;  /* max |log w - sum g| over every start, distance, channel */
    double spread_lo, spread_hi, spread_mean; /* log w at d = D over the starts (channel cs) */
    double r2_pooled;    /* R^2 of log w on d pooled over the starts (channel cs)      */
    size_t cs, nstart;
} dynamic_result;

static dynamic_result dynamic_gates(lab_ctx *x, const params *p, gsl_rng *rng)
{
    const size_t K = p->K, D = p->D, T = p->T;
    double *g = lab_zeros(x, T * K), *w = lab_zeros(x, (D + 1) * K);
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < K; c++) {
            double z = exp(p->sigma * gsl_ran_gaussian(rng, 1.0) - 0.5 * p->sigma * p->sigma);
            g[t * K + c] = -alibi_slope(c + 1, K) * z;
        }
    for (size_t r = 0; r < p->resets; r++) { /* hard resets on every channel */
        size_t t = 1 + gsl_rng_uniform_int(rng, T - 1);
        for (size_t c = 0; c < K; c++) g[t * K + c] = p->reset_g;
    }
    static const char *const cols[] = {
        "j", "position of the write",
        "channel", "KDA channel, 1-based",
        "m", "mean slope of the channel (-E[g])",
        "d", "distance i - j",
        "logw", "ln of the measured weight of the fact at i = j + d (kdalab_step_f64)",
        "sum_g", "g_{j+1} + ... + g_i of that channel, summed here (the predicted log w)",
        NULL};
    FILE *f = lab_tsv_open(x, "07_relative_position_dynamic", cols,
                           "K=%zu D=%zu T=%zu, g_t[c] = -2^(-8c/K) * lognormal(sigma=%g, mean "
                           "1), %zu resets g=%g on every channel; every start j = 0..T-D-1 is "
                           "measured, --starts of them written", K, D, T, p->sigma, p->resets,
                           p->reset_g);
    dynamic_result r = {.cs = K / 2, .spread_lo = INFINITY, .spread_hi = -INFINITY};
    size_t nj = T - D, every = nj / (p->starts ? p->starts : 1);
    if (every == 0) every = 1;
    double *pool_d = lab_zeros(x, nj * (D + 1)), *pool_y = lab_zeros(x, nj * (D + 1));
    size_t np = 0;
    for (size_t j = 0; j < nj; j++) {
        measure(x, KDALAB_KDA, g, K, K, j, D, w);
        int written = j % every == 0 && j / every < p->starts;
        for (size_t c = 0; c < K; c++) {
            double run = 0.0;
            for (size_t d = 0; d <= D; d++) {
                if (d > 0) run += g[(j + d) * K + c];
                double y = w[d * K + c];
                r.max_sum_err = fmax(r.max_sum_err, fabs(y - run) / fmax(1.0, fabs(run)));
                if (written)
                    fprintf(f, "%zu\t%zu\t%.8g\t%zu\t%.12g\t%.12g\n", j, c + 1,
                            alibi_slope(c + 1, K), d, y, run);
                if (c == r.cs) {
                    pool_d[np] = (double)d;
                    pool_y[np++] = y;
                }
            }
            if (written) fprintf(f, "\n\n");
        }
        double yD = w[D * K + r.cs];
        r.spread_lo = fmin(r.spread_lo, yD);
        r.spread_hi = fmax(r.spread_hi, yD);
        r.spread_mean += yD / (double)nj;
    }
    lab_tsv_close(x, f);
    double c0, c1, c00, c01, c11, rss, mean = 0.0, tss = 0.0;
    for (size_t i = 0; i < np; i++) mean += pool_y[i] / (double)np;
    for (size_t i = 0; i < np; i++) tss += (pool_y[i] - mean) * (pool_y[i] - mean);
    gsl_fit_linear(pool_d, 1, pool_y, 1, np, &c0, &c1, &c00, &c01, &c11, &rss);
    r.r2_pooled = 1.0 - rss / tss;
    r.nstart = nj;
    free(pool_d), free(pool_y), free(g), free(w);
    return r;
}

/* ---- the verdict ---------------------------------------------------------------------- */

/* Tolerances of the verdicts: a straight line to rounding, a bias that does
 * not move with j, and a data-dependent bias that is not one line. */
#define LINE_TOL 1e-12   /* 1 - R^2 and max |log w + m d| of a fixed gate         */
#define SUM_TOL 1e-12    /* |log w - sum g| relative, data-dependent gate         */
#define NOT_LINE_R2 0.99 /* pooled R^2 below this: not a function of i - j alone  */

static void print_summary(const params *p, const series_fit *sf, size_t n,
                          const dynamic_result *dr)
{
    printf("\nFixed gates: log-weight against distance d = 0..%zu (measured through "
           "kdalab_step_f64)\n", p->D);
    printf("%-12s %4s %12s %12s %10s %10s %10s\n", "series", "ch", "m set", "m fitted",
           "1 - R^2", "max dev", "j-shift");
    double worst_1r2 = 0.0, worst_dev = 0.0, worst_shift = 0.0, worst_alibi = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(sf[i].series, "alibi") == 0) continue;
        /* The mixture has no single set slope: "-" rather than nan. 0.0 + m and
         * 0.0 - slope print a zero slope (no decay, a = 1) as 0, not -0. */
        char m_set[16] = "-";
        if (!isnan(sf[i].m)) snprintf(m_set, sizeof m_set, "%.6g", 0.0 + sf[i].m);
        printf("%-12s %4zu %12s %12.6g %10.2e %10.2e %10.2e\n", sf[i].series, sf[i].channel,
               m_set, 0.0 - sf[i].f.slope, 1.0 - sf[i].f.r2, sf[i].max_dev, sf[i].shift_dev);
        if (strcmp(sf[i].series, "kda_mixture") == 0) continue;
        worst_1r2 = fmax(worst_1r2, 1.0 - sf[i].f.r2);
        worst_dev = fmax(worst_dev, sf[i].max_dev);
        worst_shift = fmax(worst_shift, sf[i].shift_dev);
        if (strcmp(sf[i].series, "kda") == 0) {
            double m = alibi_slope(sf[i].channel, p->K);
            worst_alibi = fmax(worst_alibi, fabs(-sf[i].f.slope - m) / m);
        }
    }
    printf("ALiBi slopes 2^(-8h/H), H = %zu:", p->K);
    for (size_t h = 1; h <= p->K; h++) printf(" %.6g", alibi_slope(h, p->K));
    printf("\n");
    int fixed_ok = worst_1r2 < LINE_TOL && worst_dev < LINE_TOL && worst_shift < LINE_TOL &&
                   worst_alibi < LINE_TOL;
    printf("\nVerdict, fixed gates: log w is linear in distance (worst 1 - R^2 = %.1e, max "
           "|log w + m d| = %.1e), the same wherever the write sits (max change %.1e), and "
           "KDA channel c has ALiBi head c's slope (max relative slope difference %.1e): "
           "%s\n", worst_1r2, worst_dev, worst_shift, worst_alibi,
           fixed_ok ? "the ALiBi family, one slope per channel. CONFIRMED."
                    : "NOT CONFIRMED (a tolerance of 1e-12 was exceeded).");
    const series_fit *mix = &sf[n - 1];
    printf("Multi-scale: a query/key spread over the %zu channels of one head weighs a fact "
           "by a mixture of %zu exponentials; its log is %s (R^2 of a linear fit %.4f, "
           "slope %.4g per token over d = 0..%zu).\n", p->K, p->K,
           mix->f.r2 < NOT_LINE_R2 ? "not a line" : "close to a line", mix->f.r2,
           -mix->f.slope, p->D);
    int dyn_ok = dr->max_sum_err < SUM_TOL && dr->r2_pooled < NOT_LINE_R2;
    printf("Data-dependent gate (lognormal sigma = %g, %zu resets): log w = (sum of g over "
           "the span) to %.1e (relative), over %zu starts x %zu distances x %zu channels; at "
           "d = %zu, channel %zu (mean slope %.4g), log w ranges over [%.2f, %.2f] across the "
           "starts (a fixed slope would give %.2f at every start); pooled R^2 of log w on "
           "d = %.4f. %s\n", p->sigma, p->resets, dr->max_sum_err, dr->nstart, p->D + 1, p->K,
           p->D, dr->cs + 1, alibi_slope(dr->cs + 1, p->K), dr->spread_lo, dr->spread_hi,
           -alibi_slope(dr->cs + 1, p->K) * (double)p->D, dr->r2_pooled,
           dyn_ok ? "The bias is the sum of g over the span, not a fixed slope. CONFIRMED."
                  : "NOT CONFIRMED.");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K = 8, .D = 256, .T = 768, .starts = 6, .resets = 3, .a = 0.9, .sigma = 1.0,
                .reset_g = -8.0};
    lab_init(&x, "07_relative_position",
             "decay as a relative position bias: log-weight against distance for the scalar "
             "gate, KDA's per-channel gate and ALiBi; data-dependent gates");
    lab_flag_size(&x, "K", &p.K, "key channels (= ALiBi heads compared), <= 64");
    lab_flag_size(&x, "D", &p.D, "largest distance i - j");
    lab_flag_size(&x, "T", &p.T, "positions (part 2 measures every start j <= T-D-1)");
    lab_flag_size(&x, "starts", &p.starts, "start positions written to the dynamic TSV");
    lab_flag_size(&x, "resets", &p.resets, "hard resets in the data-dependent gate");
    lab_flag_double(&x, "a", &p.a, "decay factor per token of the scalar gate, in (0,1]");
    lab_flag_double(&x, "sigma", &p.sigma, "log-normal spread of the data-dependent gate");
    lab_flag_double(&x, "reset-g", &p.reset_g, "log-decay of a hard reset (<= 0; not with --resets 0)");
    lab_parse(&x, argc, argv);
    lab_need(&x, p.K >= 1 && p.K <= 64, "--K", "1 <= K <= 64");
    lab_need(&x, p.D >= 2, "--D", "D >= 2");
    lab_need(&x, p.T >= 2 && p.D <= (p.T - 2) / 2, "--T, --D", "T >= 2 D + 2"); /* no wrap */
    lab_need(&x, p.a > 0.0 && p.a <= 1.0, "--a", "a value in (0, 1]");
    lab_need(&x, p.sigma >= 0.0, "--sigma", "sigma >= 0");
    lab_need(&x, p.reset_g <= 0.0, "--reset-g", "a log-decay <= 0");
    lab_refuse_unused(&x, "reset-g", p.resets == 0,
                      "with --resets 0: there is no reset to give that log-decay");
    series_fit sf[MAX_FIT];
    size_t n = 0;
    fixed_gates(&x, &p, sf, &n);
    write_fits(&x, &p, sf, n);
    gsl_rng *rng = lab_rng(&x);
    dynamic_result dr = dynamic_gates(&x, &p, rng);
    gsl_rng_free(rng);
    print_summary(&p, sf, n, &dr);
    printf("\n%s: %.2f s; results in %s/07_relative_position*.tsv\n", x.name, lab_elapsed(&x),
           x.out);
    return 0;
}
