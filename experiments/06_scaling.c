/*
 * 06_scaling — time against sequence length T for every mechanism and form of
 * the lineage (REFERENCE.md; chapter 06's table, "Read per token": O(d^2) for
 * the recurrent mechanisms, O(N d) for softmax attention).
 *
 * Series: linear attention, DeltaNet, Gated DeltaNet and KDA, each in the
 * recurrent form (kdalab_recurrent_f64/f32) and the chunkwise form
 * (kdalab_chunk_f64/f32, default options: C = 64, safe sub-chunks of 16),
 * and causal softmax attention (kdalab_attention_f64/f32). One problem of
 * length T_max is drawn once; a run at T uses its first T positions (B = 1).
 * The clock is the process CPU time (lab_cpu_now), with kdalab's threaded
 * input checks on one thread (lab_one_thread; a second thread's idle spinning
 * would count): on a shared machine a descheduled process loses wall time
 * that is not its work, and the exponent is about work. Wall time is recorded
 * too. Every point is timed
 * in each of --reps rounds (at least 5); a round times every point once, so
 * the rounds are spread over the run rather than bunched, and a slow spell on
 * the machine hits one round of every point instead of every round of a few.
 * A series stops growing T when its next point would take longer than
 * --budget seconds (predicted from its last two points in the first round):
 * softmax attention stops at T = 4096 at the defaults.
 *
 * The exponent p of time ~ T^p is the least-squares slope of ln(time) on
 * ln(T) (gsl_fit_linear) over the points with T >= --fit-min: about 1 for the
 * linear mechanisms, about 2 for softmax attention. It is fitted to each
 * round's times, and printed as the median and range over the rounds; the
 * ratios the verdict quotes (KDA against Gated DeltaNet, chunkwise against
 * recurrent, at the largest T) are formed within each round the same way.
 *
 * The verdicts: the linear series' median exponents each within
 * EXPONENT_TOL = 0.1 of 1 and softmax attention's of 2; KDA's chunkwise
 * exponent within 0.1 of Gated DeltaNet's ("no extra asymptotic cost"). Over
 * T = 512 .. 8192 (16x) an exponent off by 0.1 is a cost per token that
 * changes 1.32x across the range: wider than the medians move from run to
 * run (experiments/README.md), narrower than an O(T log T) cost's 0.13
 * (the slope of ln(T ln T), 1 + 1/ln T at T ~ 2048).
 *
 * Outputs (DIR = --out):
 *   06_scaling.tsv      one line per (series, T)
 *   06_scaling_fit.tsv  one line per series: exponent, its standard error
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common.h"
#include "kdalab.h"

#define EXPONENT_TOL 0.1 /* the verdicts' rule (the header) */

typedef enum { FORM_RECURRENT = 0, FORM_CHUNK, FORM_ATTENTION } form_kind;
static const char *const form_name[] = {"recurrent", "chunkwise", "attention"};

typedef struct {
    char label[48];  /* "kda_chunkwise_f32": series name in the TSV and the plot */
    const char *mech_name;
    kdalab_mechanism mech;
    form_kind form;
    int f32;
} series;

/* The shared inputs at T_max, in both precisions. B = 1, so a prefix of
 * length T of every [B,T,H,...] array is a valid problem of length T. */
typedef struct {
    size_t Tmax, H, K, V;
    double *q, *k, *v, *beta, *g_kda, *g_gdn, *o;
    float *qf, *kf, *vf, *betaf, *g_kdaf, *g_gdnf, *of;
} inputs;

static void inputs_make(const lab_ctx *x, inputs *in, gsl_rng *rng)
{
    size_t nqk = in->Tmax * in->H * in->K, nv = in->Tmax * in->H * in->V,
           nth = in->Tmax * in->H;
    in->q = lab_zeros(x, nqk);
    in->k = lab_zeros(x, nqk);
    in->v = lab_zeros(x, nv);
    in->beta = lab_zeros(x, nth);
    in->g_kda = lab_zeros(x, nqk);
    in->g_gdn = lab_zeros(x, nth);
    in->o = lab_zeros(x, nv);
    for (size_t r = 0; r < nth; r++) {
        lab_random_unit(rng, in->q + r * in->K, in->K);
        lab_random_unit(rng, in->k + r * in->K, in->K);
        for (size_t j = 0; j < in->V; j++) in->v[r * in->V + j] = gsl_ran_gaussian(rng, 1.0);
        in->beta[r] = gsl_rng_uniform(rng);
        /* Decays in [-0.1, 0]: a = 0.905..1, no subnormal slow paths in the timing. */
        in->g_gdn[r] = -0.1 * gsl_rng_uniform(rng);
        for (size_t c = 0; c < in->K; c++) in->g_kda[r * in->K + c] = -0.1 * gsl_rng_uniform(rng);
    }
    in->qf = lab_floats(x, in->q, nqk);
    in->kf = lab_floats(x, in->k, nqk);
    in->vf = lab_floats(x, in->v, nv);
    in->betaf = lab_floats(x, in->beta, nth);
    in->g_kdaf = lab_floats(x, in->g_kda, nqk);
    in->g_gdnf = lab_floats(x, in->g_gdn, nth);
    in->of = lab_floats(x, NULL, nv);
}

static void inputs_free(inputs *in)
{
    double *d[] = {in->q, in->k, in->v, in->beta, in->g_kda, in->g_gdn, in->o};
    float *f[] = {in->qf, in->kf, in->vf, in->betaf, in->g_kdaf, in->g_gdnf, in->of};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) free(d[i]);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
}

/* One timed call of a series at length T; returns CPU seconds, *wall gets
 * the wall seconds. */
static double time_one(const lab_ctx *x, const series *s, const inputs *in, size_t T,
                       double *wall)
{
    kdalab_dims d = {.B = 1, .T = T, .H = in->H, .K = in->K, .V = in->V};
    double scale = kdalab_default_scale(in->K);
    const double *g = s->mech == KDALAB_KDA ? in->g_kda : in->g_gdn;
    const float *gf = s->mech == KDALAB_KDA ? in->g_kdaf : in->g_gdnf;
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    kdalab_status st = KDALAB_OK;
    double w0 = lab_now(), c0 = lab_cpu_now();
    switch (s->form) {
    case FORM_RECURRENT:
        st = s->f32 ? kdalab_recurrent_f32(&d, s->mech, (float)scale, in->qf, in->kf, in->vf, gf,
                                           in->betaf, NULL, in->of, NULL)
                    : kdalab_recurrent_f64(&d, s->mech, scale, in->q, in->k, in->v, g, in->beta,
                                           NULL, in->o, NULL);
        break;
    case FORM_CHUNK:
        st = s->f32 ? kdalab_chunk_f32(&d, s->mech, (float)scale, in->qf, in->kf, in->vf, gf,
                                       in->betaf, NULL, in->of, NULL, &opts, NULL)
                    : kdalab_chunk_f64(&d, s->mech, scale, in->q, in->k, in->v, g, in->beta,
                                       NULL, in->o, NULL, &opts, NULL);
        break;
    case FORM_ATTENTION:
        st = s->f32 ? kdalab_attention_f32(&d, (float)scale, in->qf, in->kf, in->vf, in->of)
                    : kdalab_attention_f64(&d, scale, in->q, in->k, in->v, in->o);
        break;
    }
    double t = lab_cpu_now() - c0;
    *wall = lab_now() - w0;
    lab_check(x, st, s->label);
    return t;
}

/* The command-line parameters. */
typedef struct {
    size_t Tmin, Tmax, H, K, V, reps, fit_min;
    double budget;
} params;

#define MAX_SERIES 18
#define MAX_T 64
#define MAX_REPS 32

/* Every mechanism in both forms and precisions, then softmax attention in
 * both precisions. Returns the count. */
static size_t make_series(series ser[MAX_SERIES])
{
    size_t ns = 0;
    const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                      KDALAB_GATED_DELTANET, KDALAB_KDA};
    for (size_t m = 0; m < 4; m++)
        for (int form = FORM_RECURRENT; form <= FORM_CHUNK; form++)
            for (int f32 = 0; f32 <= 1; f32++) {
                series *s = &ser[ns++];
                s->mech = mechs[m];
                s->mech_name = kdalab_mechanism_name(mechs[m]);
                s->form = (form_kind)form;
                s->f32 = f32;
                snprintf(s->label, sizeof s->label, "%s_%s_%s", s->mech_name, form_name[form],
                         f32 ? "f32" : "f64");
            }
    for (int f32 = 0; f32 <= 1; f32++) {
        series *s = &ser[ns++];
        s->mech = KDALAB_LINEAR_ATTENTION; /* unused */
        s->mech_name = "softmax_attention";
        s->form = FORM_ATTENTION;
        s->f32 = f32;
        snprintf(s->label, sizeof s->label, "softmax_attention_%s", f32 ? "f32" : "f64");
    }
    return ns;
}

/* The measured times: [series][T index]. */
typedef struct {
    size_t Ts[MAX_T], nT;      /* Tmin, 2 Tmin, ... up to Tmax (always included) */
    series ser[MAX_SERIES];
    size_t ns;
    double secs[MAX_SERIES][MAX_T], wall[MAX_SERIES][MAX_T]; /* medians over the rounds */
    double round[MAX_REPS][MAX_SERIES][MAX_T];                /* CPU seconds per round */
    size_t runs[MAX_SERIES][MAX_T], npts[MAX_SERIES]; /* npts: points within the budget */
} timings;

/* Round 0 decides which points exist (the budget) and times each once;
 * rounds 1..reps-1 time every point once more. secs and wall end as the
 * medians over the rounds. */
static void measure(lab_ctx *x, const params *p, const inputs *in, timings *tm)
{
    size_t total = tm->ns * tm->nT * p->reps, done = 0;
    const size_t *Ts = tm->Ts;
    static double wall[MAX_REPS][MAX_SERIES][MAX_T];
    for (size_t si = 0; si < tm->ns; si++) {
        double *secs = tm->secs[si];
        tm->npts[si] = 0;
        for (size_t ti = 0; ti < tm->nT; ti++) {
            size_t T = Ts[ti];
            if (ti >= 2) { /* predict this point from the last two */
                double e = log(secs[ti - 1] / secs[ti - 2]) /
                           log((double)Ts[ti - 1] / (double)Ts[ti - 2]);
                if (!(e > 1.0)) e = 1.0;
                if (secs[ti - 1] * pow((double)T / (double)Ts[ti - 1], e) > p->budget) break;
            }
            secs[ti] = tm->round[0][si][ti] = time_one(x, &tm->ser[si], in, T, &wall[0][si][ti]);
            tm->runs[si][ti] = 1;
            tm->npts[si] = ti + 1;
            lab_progress(x, "runs", ++done, total);
        }
    }
    for (size_t r = 1; r < p->reps; r++)
        for (size_t si = 0; si < tm->ns; si++)
            for (size_t ti = 0; ti < tm->npts[si]; ti++) {
                tm->round[r][si][ti] = time_one(x, &tm->ser[si], in, Ts[ti], &wall[r][si][ti]);
                tm->runs[si][ti]++;
                lab_progress(x, "runs", ++done, total);
            }
    lab_progress(x, "runs", total, total);
    for (size_t si = 0; si < tm->ns; si++)
        for (size_t ti = 0; ti < tm->npts[si]; ti++) {
            double c[MAX_REPS], w[MAX_REPS];
            for (size_t r = 0; r < p->reps; r++) c[r] = tm->round[r][si][ti], w[r] = wall[r][si][ti];
            tm->secs[si][ti] = lab_spread_of(c, p->reps).median;
            tm->wall[si][ti] = lab_spread_of(w, p->reps).median;
        }
}

/* 06_scaling.tsv: one line per (series, T). */
static void write_times(lab_ctx *x, const params *p, const timings *tm)
{
    static const char *const cols[] = {
        "series", "mechanism_form_precision",
        "mechanism", "linear_attention, deltanet, gated_deltanet, kda, softmax_attention",
        "form", "recurrent, chunkwise (C=64, safe sub-chunks of 16), attention",
        "precision", "f64 or f32",
        "T", "sequence length, positions",
        "seconds", "median process CPU time over the runs, s",
        "wall_seconds", "median wall time over the runs, s",
        "runs", "timed runs at this point",
        "head_tokens_per_s", "B*H*T / seconds (CPU)",
        "ns_per_token_head", "seconds (CPU) / (B*H*T) in ns",
        "seconds_min", "the fastest run (CPU), s",
        "seconds_max", "the slowest run (CPU), s",
        NULL};
    FILE *f = lab_tsv_open(x, "06_scaling", cols,
                           "B=1 H=%zu K=%zu V=%zu, T = %zu..%zu doubling, reps=%zu, "
                           "budget=%gs per point, unit-norm q,k, v~N(0,1), beta~U(0,1), "
                           "g~U(-0.1,0); single thread",
                           p->H, p->K, p->V, p->Tmin, p->Tmax, p->reps, p->budget);
    for (size_t si = 0; si < tm->ns; si++) {
        const series *s = &tm->ser[si];
        for (size_t ti = 0; ti < tm->npts[si]; ti++) {
            double ht = (double)(p->H * tm->Ts[ti]), c[MAX_REPS];
            for (size_t r = 0; r < p->reps; r++) c[r] = tm->round[r][si][ti];
            lab_spread sp = lab_spread_of(c, p->reps);
            fprintf(f, "%s\t%s\t%s\t%s\t%zu\t%.6e\t%.6e\t%zu\t%.6e\t%.4f\t%.6e\t%.6e\n",
                    s->label, s->mech_name, form_name[s->form], s->f32 ? "f32" : "f64",
                    tm->Ts[ti], tm->secs[si][ti], tm->wall[si][ti], tm->runs[si][ti],
                    ht / tm->secs[si][ti], 1e9 * tm->secs[si][ti] / ht, sp.lo, sp.hi);
        }
    }
    lab_tsv_close(x, f);
}

/* The slope of ln(secs[ti]) on ln(T) over the points with T >= fit_min;
 *se gets its standard error (NAN with fewer than 3 points), *n the points. */
static double fit_one(const params *p, const timings *tm, size_t si, const double *secs,
                      double *se, size_t *n)
{
    double lx[MAX_T], ly[MAX_T];
    *n = 0;
    for (size_t ti = 0; ti < tm->npts[si]; ti++)
        if (tm->Ts[ti] >= p->fit_min) {
            lx[*n] = log((double)tm->Ts[ti]);
            ly[*n] = log(secs[ti]);
            (*n)++;
        }
    double c0 = NAN, c1 = NAN, cov00, cov01, cov11 = NAN, sumsq;
    if (*n >= 2) gsl_fit_linear(lx, 1, ly, 1, *n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    *se = *n >= 3 ? sqrt(cov11) : NAN;
    return c1;
}

/* The series labelled label, or -1. */
static int series_index(const timings *tm, const char *label)
{
    for (size_t si = 0; si < tm->ns; si++)
        if (strcmp(tm->ser[si].label, label) == 0) return (int)si;
    return -1;
}

/* Per round: series a's time / series b's time at the largest T both reached. */
static lab_spread round_ratio(const params *p, const timings *tm, int a, int b, size_t *T)
{
    size_t ti = (tm->npts[a] < tm->npts[b] ? tm->npts[a] : tm->npts[b]) - 1;
    double v[MAX_REPS];
    for (size_t r = 0; r < p->reps; r++) v[r] = tm->round[r][a][ti] / tm->round[r][b][ti];
    *T = tm->Ts[ti];
    return lab_spread_of(v, p->reps);
}

/* The exponent of each series over T >= fit_min: 06_scaling_fit.tsv and
 * the printed table; then the spread lines of the verdict's numbers. */
static void fit_exponents(lab_ctx *x, const params *p, const timings *tm)
{
    static const char *const fcols[] = {
        "series", "mechanism_form_precision",
        "exponent", "slope p of ln(CPU seconds) = c + p ln(T) (gsl_fit_linear)",
        "stderr", "standard error of p",
        "points", "points in the fit (T >= fit-min)",
        "T_max_reached", "largest T timed (smaller than --Tmax when the budget cut it)",
        "expected", "1 for the recurrent mechanisms, 2 for softmax attention",
        "exponent_median", "the median of the exponents fitted to each round's times",
        "exponent_lo", "the smallest of them",
        "exponent_hi", "the largest of them",
        NULL};
    FILE *ff = lab_tsv_open(x, "06_scaling_fit", fcols,
                            "B=1 H=%zu K=%zu V=%zu, fit over T >= %zu", p->H, p->K, p->V, p->fit_min);
    printf("\nExponents: fitted to the median times (with its standard error), and the median and "
           "range of the %zu exponents fitted to each round's times:\n", p->reps);
    printf("%-32s %9s %8s %17s %6s %8s %14s %14s\n", "series", "exponent", "stderr",
           "rounds: median", "range", "T_max", "s at T_max", "head-tok/s");
    lab_spread ex[MAX_SERIES];
    for (size_t si = 0; si < tm->ns; si++) {
        const series *s = &tm->ser[si];
        size_t npts = tm->npts[si], n;
        double se, c1 = fit_one(p, tm, si, tm->secs[si], &se, &n), e[MAX_REPS], se_r;
        for (size_t r = 0; r < p->reps; r++) e[r] = fit_one(p, tm, si, tm->round[r][si], &se_r, &n);
        ex[si] = lab_spread_of(e, p->reps);
        size_t tl = npts ? tm->Ts[npts - 1] : 0;
        double sl = npts ? tm->secs[si][npts - 1] : NAN;
        int expected = s->form == FORM_ATTENTION ? 2 : 1;
        fprintf(ff, "%s\t%.4f\t%.4f\t%zu\t%zu\t%d\t%.4f\t%.4f\t%.4f\n", s->label, c1, se, n, tl,
                expected, ex[si].median, ex[si].lo, ex[si].hi);
        printf("%-32s %9.3f %8.3f %17.3f %.3f..%.3f %5zu %14.4g %14.4g\n", s->label, c1, se,
               ex[si].median, ex[si].lo, ex[si].hi, tl, sl, (double)(p->H * tl) / sl);
    }
    lab_tsv_close(x, ff);

    /* the verdict's numbers, each as its median and range over the rounds */
    lab_spread lin = {INFINITY, INFINITY, -INFINITY, p->reps}, lin_med = lin;
    for (size_t si = 0; si < tm->ns; si++)
        if (tm->ser[si].form != FORM_ATTENTION) {
            lin.lo = fmin(lin.lo, ex[si].lo), lin.hi = fmax(lin.hi, ex[si].hi);
            lin_med.lo = fmin(lin_med.lo, ex[si].median), lin_med.hi = fmax(lin_med.hi, ex[si].median);
        }
    printf("\nlinear series: their median exponents span %.3f .. %.3f; every round's exponent lies in "
           "%.3f .. %.3f\n", lin_med.lo, lin_med.hi, lin.lo, lin.hi);
    char what[160];
    static const char *const shown[] = {"softmax_attention_f64", "softmax_attention_f32",
                                        "kda_chunkwise_f64", "gated_deltanet_chunkwise_f64"};
    for (size_t i = 0; i < 4; i++) {
        int si = series_index(tm, shown[i]);
        snprintf(what, sizeof what, "exponent of %s", shown[i]);
        lab_print_spread(what, ex[si], 1.0, 3, "");
    }
    size_t T;
    static const char *const pairs[][2] = {
        {"kda_chunkwise_f64", "gated_deltanet_chunkwise_f64"},
        {"kda_chunkwise_f32", "gated_deltanet_chunkwise_f32"},
        {"kda_chunkwise_f64", "kda_recurrent_f64"},
        {"deltanet_chunkwise_f64", "deltanet_recurrent_f64"}};
    for (size_t i = 0; i < 4; i++) {
        lab_spread r = round_ratio(p, tm, series_index(tm, pairs[i][0]),
                                   series_index(tm, pairs[i][1]), &T);
        snprintf(what, sizeof what, "%s / %s at T = %zu", pairs[i][0], pairs[i][1], T);
        lab_print_spread(what, r, 1.0, 2, "x");
    }

    /* the verdicts, by the rule in this file's header */
    const double s64 = ex[series_index(tm, "softmax_attention_f64")].median,
                 s32 = ex[series_index(tm, "softmax_attention_f32")].median,
                 kda = ex[series_index(tm, "kda_chunkwise_f64")].median,
                 gdn = ex[series_index(tm, "gated_deltanet_chunkwise_f64")].median;
    const int measured = isfinite(lin_med.lo) && isfinite(lin_med.hi) && isfinite(s64) &&
                         isfinite(s32);
    const int linear = fabs(lin_med.lo - 1) <= EXPONENT_TOL &&
                       fabs(lin_med.hi - 1) <= EXPONENT_TOL && fabs(s64 - 2) <= EXPONENT_TOL &&
                       fabs(s32 - 2) <= EXPONENT_TOL;
    static const char *const unmeasured = "not measured (fewer than 2 points at T >= --fit-min)";
    if (measured)
        printf("\nverdict: linear mechanisms linear in T, softmax attention quadratic: %s (median "
               "exponents: the linear series %.3f .. %.3f, softmax attention %.3f / %.3f in "
               "float64 / float32; the rule: each within %.1f of 1 and of 2)\n",
               linear ? "holds" : "does not hold", lin_med.lo, lin_med.hi, s64, s32,
               EXPONENT_TOL);
    else
        printf("\nverdict: linear mechanisms linear in T, softmax attention quadratic: %s\n",
               unmeasured);
    if (isfinite(kda) && isfinite(gdn))
        printf("verdict: per-channel decay costs no extra asymptotic cost: %s (median exponents, "
               "chunkwise, float64: KDA %.3f, Gated DeltaNet %.3f; the rule: within %.1f of each "
               "other)\n",
               fabs(kda - gdn) <= EXPONENT_TOL ? "holds" : "does not hold", kda, gdn,
               EXPONENT_TOL);
    else
        printf("verdict: per-channel decay costs no extra asymptotic cost: %s\n", unmeasured);
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.Tmin = 256, .Tmax = 8192, .H = 1, .K = 64, .V = 64, .reps = 5, .fit_min = 512,
                .budget = 2.0};
    lab_init(&x, "06_scaling",
             "time vs sequence length T for every mechanism and form; fitted exponents");
    lab_flag_size(&x, "Tmin", &p.Tmin, "smallest T (then doubled up to --Tmax)");
    lab_flag_size(&x, "Tmax", &p.Tmax, "largest T");
    lab_flag_size(&x, "H", &p.H, "heads");
    lab_flag_size(&x, "K", &p.K, "key dimension per head");
    lab_flag_size(&x, "V", &p.V, "value dimension per head");
    lab_flag_size(&x, "reps", &p.reps, "rounds, 5 to 32: runs per point (medians and ranges are printed)");
    lab_flag_size(&x, "fit-min", &p.fit_min, "smallest T used in the exponent fit");
    lab_flag_double(&x, "budget", &p.budget, "skip a point predicted to take longer (seconds)");
    lab_parse(&x, argc, argv);
    lab_one_thread(&x);
    lab_need(&x, p.Tmin >= 1 && p.Tmax >= p.Tmin, "--Tmin, --Tmax", "1 <= Tmin <= Tmax");
    lab_need(&x, p.H >= 1 && p.K >= 1 && p.V >= 1, "--H, --K, --V", "each >= 1");
    lab_need(&x, p.reps >= 5 && p.reps <= MAX_REPS, "--reps", "5 <= reps <= %d", MAX_REPS);
    lab_need(&x, p.budget > 0.0, "--budget", "budget > 0 (seconds)");

    static timings tm;
    for (size_t T = p.Tmin; T < p.Tmax && tm.nT < MAX_T - 1; T *= 2) tm.Ts[tm.nT++] = T;
    tm.Ts[tm.nT++] = p.Tmax;
    lab_refuse_unused(&x, "budget", tm.nT < 3,
                      "with fewer than three T from --Tmin to --Tmax: a point is predicted "
                      "from the two before it, and none has two");
    tm.ns = make_series(tm.ser);

    gsl_rng *rng = lab_rng(&x);
    inputs in = {.Tmax = p.Tmax, .H = p.H, .K = p.K, .V = p.V};
    inputs_make(&x, &in, rng);
    measure(&x, &p, &in, &tm);
    write_times(&x, &p, &tm);
    fit_exponents(&x, &p, &tm);
    printf("\n%s: %.1f s; results in %s/06_scaling*.tsv\n", x.name, lab_elapsed(&x), x.out);

    inputs_free(&in);
    gsl_rng_free(rng);
    return 0;
}
