/*
 * 03_subchunk_range — the floating-point range problem of the chunkwise KDA
 * form (chapter 06, "What changes in the kernel"; REFERENCE.md, "Where the
 * floating-point range problem lives").
 *
 * The chapter absorbs per-channel decay into the vectors: q~ = q * gamma,
 * k~ = k / gamma. 1/gamma grows as exp(|sum g|) over the span it is taken
 * relative to, and overflows once that sum passes ln(max finite) of the
 * storage format: 709.8 (fp64), 88.7 (fp32, bf16), 11.1 (fp16).
 *
 * One KDA head (B = H = 1), random unit-norm q and k, v ~ N(0,1),
 * beta ~ U(0,1), and a CONSTANT per-step log-decay g on every channel and
 * position (so |sum g| over a span of n positions is n|g|). For every g of
 * the sweep, chunk size C, decay mode and precision:
 *   max 1/gamma built  exp(report.max_exponent)
 *   non-finite count   report.nonfinite_o + report.nonfinite_ht
 *   error              max |o - o_ref| / max |o_ref|, o_ref the float64
 *                      recurrent form on the unrounded inputs
 * Then, by bisection on |g|, the overflow threshold of each (precision,
 * mode): the largest span |sum g| the mode survives, against ln(max) — for
 * KDA and for the DPLR boundary (RWKV-7's a = -kk, b = kk * alpha), whose
 * chunk forms its products by the same decayed Gram function.
 *
 * Outputs (DIR = --out): 03_subchunk_range.tsv (the sweep, one line per run),
 * 03_subchunk_range_threshold.tsv (the overflow thresholds),
 * 03_subchunk_range_claims.tsv (the chapter's numbers, computed and measured).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include "common.h"
#include "kdalab.h"
#include "range_problem.h"

/* ---- the cases of the sweep -------------------------------------------------------- */

/* The precisions: float64 (kdalab_chunk_f64) and the three storage formats of
 * kdalab_chunk_f32, each with its largest finite value (bf16's is (2 - 2^-7) *
 * 2^127 = 3.3895e38, fp32's (2 - 2^-23) * 2^127 = 3.4028e38) and its floor
 * (floor_err: the error no chunking scheme can beat). */
typedef struct {
    const char *name;         /* the precision column: fp64, fp32, bf16, fp16         */
    int f64;                  /* 1: kdalab_chunk_f64; 0: kdalab_chunk_f32             */
    kdalab_precision storage; /* opts.precision (must be FP32 for kdalab_chunk_f64)   */
    double max_finite;        /* the largest finite value of the format              */
    const char *floor;        /* the floor's mode column in the sweep TSV (NULL: none) */
} precision_case;
static const precision_case precisions[] = {
    {"fp64", 1, KDALAB_FP32, DBL_MAX, NULL},
    {"fp32", 0, KDALAB_FP32, FLT_MAX, "recurrent_f32"},
    {"bf16", 0, KDALAB_BF16, 0x1.fep127, "floor"},
    {"fp16", 0, KDALAB_FP16, 65504.0, "floor"},
};
#define N_PREC (sizeof precisions / sizeof precisions[0])

/* The decay modes: the chapter's rescaling relative to the chunk start, the
 * production kernels' anchored sub-chunks at two sub-chunk sizes, and the two
 * that never overflow (safe sub-chunks, pairwise). subchunk == 0 means "the
 * chunk itself" (rescaled and pairwise ignore the sub-chunk). */
typedef struct {
    const char *label; /* the mode column and plot key */
    kdalab_decay_mode mode;
    size_t subchunk;
} mode_case;
static const mode_case modes[] = {
    {"rescaled", KDALAB_DECAY_RESCALED, 0},
    {"anchored16", KDALAB_DECAY_ANCHORED, 16},
    {"anchored32", KDALAB_DECAY_ANCHORED, 32},
    {"safe16", KDALAB_DECAY_SAFE, 16},
    {"pairwise", KDALAB_DECAY_PAIRWISE, 0},
};
#define N_MODES (sizeof modes / sizeof modes[0])

static const size_t chunks[] = {16, 32, 64, 128};
#define N_CHUNKS (sizeof chunks / sizeof chunks[0])

/* The overflow thresholds to bisect, at every precision. A sub-chunked mode's
 * threshold depends on the sub-chunk only, so one chunk size (64) each. */
typedef struct {
    const char *mode; /* a label of modes[] */
    size_t C;
} threshold_case;
static const threshold_case threshold_cases[] = {
    {"rescaled", 16},   {"rescaled", 32},   {"rescaled", 64},
    {"rescaled", 128},  {"anchored16", 64}, {"anchored32", 64},
};
#define N_THRESHOLD_CASES (sizeof threshold_cases / sizeof threshold_cases[0])

/* The |g| values the chapter and REFERENCE.md name: the sweep grid always
 * holds them and the C = 64 table shows them. */
#define N_NAMED_G 6
static void named_g(double g[N_NAMED_G])
{
    const double named[N_NAMED_G] = {
        -log(0.9), /* the chapter's a = 0.9                          */
        5.0,       /* production bound g >= -5                       */
        5.5,       /* reported overflow of unbounded gates           */
        6.0, 12.0, /* past the bound                                 */
        27.6,      /* a decay factor of ~1e-12, reported NaN prefill */
    };
    memcpy(g, named, sizeof named);
}

/* The index of a mode by its label, of a chunk by its size (a name not in
 * the tables is a bug in this file). */
static size_t mode_named(const char *label)
{
    for (size_t i = 0; i < N_MODES; i++)
        if (strcmp(modes[i].label, label) == 0) return i;
    fprintf(stderr, "03_subchunk_range: no decay mode '%s'\n", label);
    abort();
}

static size_t chunk_named(size_t C)
{
    for (size_t i = 0; i < N_CHUNKS; i++)
        if (chunks[i] == C) return i;
    fprintf(stderr, "03_subchunk_range: no chunk size %zu\n", C);
    abort();
}

typedef struct { /* the command-line parameters */
    size_t T, K, V, n_log, iters;
    double g_lo, g_hi;
} params;

/* ---- one problem and one run --------------------------------------------------------- */

typedef struct { /* the outcome of one chunkwise run */
    kdalab_status status;
    kdalab_report rep;
    double err;
} outcome;

/* One chunkwise run at precision pc (g already set). ERANGE is a measurement. */
static outcome run_chunk(const lab_ctx *x, problem *pb, const precision_case *pc, size_t C,
                         const mode_case *m)
{
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    opts.chunk = C;
    opts.subchunk = m->subchunk ? m->subchunk : C;
    opts.decay = m->mode;
    opts.precision = pc->storage;
    outcome r = {0};
    r.status = run_form(pb, pc->f64, &opts, &r.rep, pb->o, pb->ht, pb->of, pb->htf);
    if (r.status != KDALAB_ERANGE) lab_check(x, r.status, "chunkwise form");
    r.err = pc->f64 ? lab_rel_err(pb->o, NULL, pb->o_ref, pb->nv)
                    : lab_rel_err(NULL, pb->of, pb->o_ref, pb->nv);
    return r;
}

static size_t nonfinite(const outcome *r) { return r->rep.nonfinite_o + r->rep.nonfinite_ht; }

/* The floor of precision pc at the current g: the float32 recurrent form for
 * fp32, rounding_floor for bf16 and fp16, 0 for fp64 (which has none). */
static double floor_err(const lab_ctx *x, problem *pb, const precision_case *pc)
{
    if (pc->f64) return 0.0;
    if (pc->storage != KDALAB_FP32) return rounding_floor(x, pb, pc->storage);
    lab_check(x, run_form(pb, 0, NULL, NULL, NULL, NULL, pb->of, NULL), "recurrent_f32");
    return lab_rel_err(NULL, pb->of, pb->o_ref, pb->nv);
}

/* ---- part 1: the sweep over g, chunk size, mode and precision ------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The |g| grid: n_log log-spaced points over [g_lo, g_hi] and the named
 * points. Sorted, duplicates dropped. Returns the count. */
static size_t make_grid(double *grid, size_t n_log, double g_lo, double g_hi)
{
    size_t n = 0;
    for (size_t i = 0; i < n_log; i++)
        grid[n++] = g_lo * pow(g_hi / g_lo, n_log > 1 ? (double)i / (double)(n_log - 1) : 0.0);
    named_g(grid + n);
    n += N_NAMED_G;
    qsort(grid, n, sizeof grid[0], cmp_double);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || grid[i] > grid[m - 1] * (1.0 + 1e-9)) grid[m++] = grid[i];
    return m;
}

typedef struct { /* the sweep's results, kept for the tables after it */
    double *grid;   /* |g|, ascending                                            */
    size_t ng;
    outcome *runs;  /* [g][chunk][mode][precision]; unset where subchunk > chunk */
    double *floors; /* [g][precision]: floor_err                                 */
} sweep;

static outcome *sweep_run(const sweep *sw, size_t gi, size_t ci, size_t mi, size_t pi)
{
    return &sw->runs[((gi * N_CHUNKS + ci) * N_MODES + mi) * N_PREC + pi];
}

/* The index of |g| = g in the grid, or ng when it is not there. */
static size_t grid_index(const sweep *sw, double g)
{
    size_t gi = sw->ng;
    for (size_t i = 0; i < sw->ng; i++)
        if (fabs(sw->grid[i] - g) < 1e-9 * g) gi = i;
    return gi;
}

/* Every (g, C, mode, precision) run and every floor. */
static void sweep_measure(lab_ctx *x, const params *prm, problem *pb, sweep *sw)
{
    sw->grid = lab_zeros(x, prm->n_log + N_NAMED_G);
    sw->ng = make_grid(sw->grid, prm->n_log, prm->g_lo, prm->g_hi);
    sw->runs = calloc(sw->ng * N_CHUNKS * N_MODES * N_PREC, sizeof *sw->runs);
    sw->floors = lab_zeros(x, sw->ng * N_PREC);
    if (!sw->runs) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    for (size_t gi = 0; gi < sw->ng; gi++) {
        problem_set_g(x, pb, -sw->grid[gi]);
        for (size_t ci = 0; ci < N_CHUNKS; ci++)
            for (size_t mi = 0; mi < N_MODES; mi++) {
                if (modes[mi].subchunk > chunks[ci]) continue; /* sub-chunk > chunk */
                for (size_t pi = 0; pi < N_PREC; pi++)
                    *sweep_run(sw, gi, ci, mi, pi) =
                        run_chunk(x, pb, &precisions[pi], chunks[ci], &modes[mi]);
            }
        for (size_t pi = 0; pi < N_PREC; pi++)
            sw->floors[gi * N_PREC + pi] = floor_err(x, pb, &precisions[pi]);
        lab_progress(x, "decay values", gi + 1, sw->ng);
    }
}

/* Written series by series (precision, mode, C; g ascending in |g|) so that
 * each plotted line is a contiguous block; each precision's floor after it. */
static void sweep_write(const lab_ctx *x, const params *prm, const sweep *sw)
{
    static const char *const cols[] = {
        "g", "per-step log-decay on every channel (<= 0)",
        "C", "chunk size, positions (0: not chunked)",
        "mode", "decay mode: rescaled, anchored16/32, safe16, pairwise; recurrent_f32; "
                "floor = float64 recurrence on inputs rounded to the format",
        "subchunk", "sub-chunk size c, positions (= C for rescaled/pairwise)",
        "precision", "fp64 (chunk_f64), fp32/bf16/fp16 (chunk_f32 storage format)",
        "span_sum_g", "|sum g| over the span the mode rescales against: C|g| rescaled, c|g| "
                      "anchored, 0 safe/pairwise",
        "max_exp", "report.max_exponent: largest exp() argument formed",
        "log10_inv_gamma", "log10 of the largest 1/gamma built = max_exp / ln 10",
        "nonfinite", "non-finite values written to o and ht",
        "status", "library status (0 ok, 8 ERANGE)",
        "err", "max|o - o_ref| / max|o_ref| vs the float64 recurrent form (nan if non-finite)",
        NULL};
    FILE *f = lab_tsv_open(x, "03_subchunk_range", cols,
                           "KDA, B=1 H=1 T=%zu K=%zu V=%zu, unit-norm q,k, v~N(0,1), "
                           "beta~U(0,1), constant g on every channel and position; "
                           "|g| grid: %zu log points in [%g, %g] + ln(1/0.9), 5.5, 6, 12, 27.6",
                           prm->T, prm->K, prm->V, prm->n_log, prm->g_lo, prm->g_hi);
    const double *grid = sw->grid;
    for (size_t pi = 0; pi < N_PREC; pi++) {
        const precision_case *pc = &precisions[pi];
        for (size_t mi = 0; mi < N_MODES; mi++) {
            const mode_case *m = &modes[mi];
            for (size_t ci = 0; ci < N_CHUNKS; ci++) {
                size_t C = chunks[ci];
                if (m->subchunk > C) continue;
                size_t c = m->subchunk ? m->subchunk : C;
                for (size_t gi = 0; gi < sw->ng; gi++) {
                    const outcome *r = sweep_run(sw, gi, ci, mi, pi);
                    double span = m->mode == KDALAB_DECAY_RESCALED   ? (double)C * grid[gi]
                                  : m->mode == KDALAB_DECAY_ANCHORED ? (double)c * grid[gi]
                                                                     : 0.0;
                    fprintf(f, "%.6g\t%zu\t%s\t%zu\t%s\t%.6g\t%.6g\t%.6g\t%zu\t%d\t%.6e\n",
                            -grid[gi], C, m->label, c, pc->name, span, r->rep.max_exponent,
                            r->rep.max_exponent / log(10.0), nonfinite(r), (int)r->status,
                            r->err);
                }
            }
        }
        if (!pc->floor) continue;
        for (size_t gi = 0; gi < sw->ng; gi++)
            fprintf(f, "%.6g\t0\t%s\t0\t%s\t0\t0\t0\t0\t0\t%.6e\n", -grid[gi], pc->floor,
                    pc->name, sw->floors[gi * N_PREC + pi]);
    }
    lab_tsv_close(x, f);
}

/* ---- part 2: overflow thresholds ------------------------------------------------------- */

/* The overflow threshold of one (precision, C, mode): bisection on ln|g|
 * between a finite and a non-finite run. */
typedef struct {
    double g_ok, g_bad;       /* largest finite |g|, smallest non-finite |g|      */
    double exp_ok, exp_bad;   /* report.max_exponent at those two runs            */
    int found;                /* 0: finite up to the top of the bracket           */
} threshold;

static threshold find_threshold(const lab_ctx *x, problem *pb, const precision_case *pc,
                                size_t C, const mode_case *m, double lo, double hi, int iters)
{
    threshold th = {0};
    problem_set_g(x, pb, -hi);
    outcome r = run_chunk(x, pb, pc, C, m);
    if (nonfinite(&r) == 0) {
        th.g_ok = hi;
        th.exp_ok = r.rep.max_exponent;
        return th;
    }
    th.found = 1;
    th.g_bad = hi;
    th.exp_bad = r.rep.max_exponent;
    problem_set_g(x, pb, -lo);
    r = run_chunk(x, pb, pc, C, m);
    th.g_ok = lo;
    th.exp_ok = r.rep.max_exponent;
    for (int it = 0; it < iters; it++) {
        double mid = sqrt(th.g_ok * th.g_bad);
        problem_set_g(x, pb, -mid);
        r = run_chunk(x, pb, pc, C, m);
        if (nonfinite(&r) == 0) {
            th.g_ok = mid;
            th.exp_ok = r.rep.max_exponent;
        } else {
            th.g_bad = mid;
            th.exp_bad = r.rep.max_exponent;
        }
    }
    return th;
}

/* Every threshold_cases[] entry at every precision, for KDA and for the DPLR
 * boundary. One chunk of positions is enough (g is constant, every chunk
 * forms the same exponents), so T = 128. */
static void thresholds(lab_ctx *x, const params *prm)
{
    static const kdalab_mechanism mechs[2] = {KDALAB_KDA, KDALAB_DPLR};
    problem pt[2];
    gsl_rng *rng = lab_rng(x);
    for (int mi = 0; mi < 2; mi++)
        problem_make(x, &pt[mi], rng, prm->T < 128 ? prm->T : 128, prm->K, prm->V, mechs[mi]);
    gsl_rng_free(rng);
    static const char *const tcols[] = {
        "precision", "fp64, fp32, bf16, fp16",
        "mode", "rescaled or anchored16/32 (safe and pairwise never overflow)",
        "C", "chunk size",
        "span", "positions the mode rescales over (C or c)",
        "ln_max", "ln of the largest finite value of the format",
        "g_ok", "largest per-step |g| with no non-finite value",
        "g_bad", "smallest per-step |g| with non-finite values (0: none up to 200)",
        "exp_ok", "report.max_exponent at g_ok: the largest |sum g| survived",
        "exp_bad", "report.max_exponent at g_bad",
        "span_g_ok", "span * g_ok (the same |sum g| computed from the grid)",
        "mechanism", "kda, or dplr (RWKV-7's a = -kk, b = kk * alpha)",
        NULL};
    FILE *ft = lab_tsv_open(x, "03_subchunk_range_threshold", tcols,
                            "KDA and DPLR, B=1 H=1 T=%zu K=%zu V=%zu, constant g; bisection on "
                            "ln|g| in [1e-3, 200], %zu steps",
                            pt[0].d.T, prm->K, prm->V, prm->iters);
    printf("\nOverflow thresholds (largest |sum g| over the rescaled span before a non-finite "
           "value):\n");
    printf("%-5s %-5s %-11s %4s %5s %9s %10s %10s %10s\n", "mech", "prec", "mode", "C", "span",
           "ln(max)", "|g|_max", "exp_ok", "span*|g|");
    size_t nth = 2 * N_PREC * N_THRESHOLD_CASES, dth = 0;
    for (int mi = 0; mi < 2; mi++)
        for (size_t pi = 0; pi < N_PREC; pi++) {
            const precision_case *pc = &precisions[pi];
            double ln_max = log(pc->max_finite);
            for (size_t j = 0; j < N_THRESHOLD_CASES; j++) {
                const mode_case *m = &modes[mode_named(threshold_cases[j].mode)];
                size_t C = threshold_cases[j].C;
                if (C > pt[mi].d.T) continue;
                size_t span = m->subchunk ? m->subchunk : C;
                threshold th = find_threshold(x, &pt[mi], pc, C, m, 1e-3, 200.0, (int)prm->iters);
                const char *mech = kdalab_mechanism_name(mechs[mi]);
                fprintf(ft, "%s\t%s\t%zu\t%zu\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%s\n",
                        pc->name, m->label, C, span, ln_max, th.g_ok, th.found ? th.g_bad : 0.0,
                        th.exp_ok, th.exp_bad, (double)span * th.g_ok, mech);
                printf("%-5s %-5s %-11s %4zu %5zu %9.2f %10.4g %10.4g %10.4g%s\n", mech, pc->name,
                       m->label, C, span, ln_max, th.g_ok, th.exp_ok, (double)span * th.g_ok,
                       th.found ? "" : "  (finite up to |g| = 200)");
                lab_progress(x, "thresholds", ++dth, nth);
            }
        }
    lab_progress(x, "thresholds", nth, nth);
    lab_tsv_close(x, ft);
    problem_free(&pt[0]);
    problem_free(&pt[1]);
}

/* ---- part 3: the chapter's numbers, and C = 64 around the production bound ------------- */

/* "Over a chunk of 64 positions with a = 0.9, 1/gamma reaches 10^3; over 128
 * it reaches 10^6, and in bf16 the rescaled keys stop being representable." */
static void claims(const lab_ctx *x, const params *prm, const sweep *sw)
{
    static const size_t claim_chunks[] = {64, 128};
    size_t gi09 = grid_index(sw, -log(0.9));
    size_t rescaled = mode_named("rescaled"), pairwise = mode_named("pairwise");
    static const char *const ccols[] = {
        "C", "chunk size (positions), rescaled mode",
        "precision", "fp64, fp32, bf16, fp16",
        "inv_gamma_computed", "0.9^-C",
        "inv_gamma_measured", "exp(report.max_exponent) of the rescaled run",
        "nonfinite", "non-finite values in o and ht, rescaled",
        "err_rescaled", "max|o - o_ref| / max|o_ref|, rescaled (nan if non-finite)",
        "err_pairwise", "the same, pairwise mode at the same precision (no rescaling)",
        "err_floor", "fp32: float32 recurrent; bf16/fp16: float64 recurrence on rounded "
                     "inputs; fp64: 0",
        NULL};
    FILE *fc = lab_tsv_open(x, "03_subchunk_range_claims", ccols,
                            "KDA, B=1 H=1 T=%zu K=%zu V=%zu, constant g = ln 0.9 = %.6f on "
                            "every channel",
                            prm->T, prm->K, prm->V, log(0.9));
    printf("\nThe chapter's numbers (a = 0.9, g = ln 0.9 = %.5f), rescaled mode:\n", log(0.9));
    printf("%5s %-5s %10s %10s %10s %12s %12s %12s\n", "C", "prec", "0.9^-C", "max 1/gam",
           "nonfinite", "err rescaled", "err pairwise", "err floor");
    for (size_t k = 0; k < sizeof claim_chunks / sizeof claim_chunks[0]; k++) {
        size_t C = claim_chunks[k], ci = chunk_named(C);
        for (size_t pi = 0; pi < N_PREC; pi++) {
            const outcome *r = sweep_run(sw, gi09, ci, rescaled, pi);
            const outcome *rp = sweep_run(sw, gi09, ci, pairwise, pi);
            double fl = sw->floors[gi09 * N_PREC + pi];
            double computed = pow(0.9, -(double)C);
            fprintf(fc, "%zu\t%s\t%.6g\t%.6g\t%zu\t%.6e\t%.6e\t%.6e\n", C, precisions[pi].name,
                    computed, exp(r->rep.max_exponent), nonfinite(r), r->err, rp->err, fl);
            printf("%5zu %-5s %10.4g %10.4g %10zu %12.3e %12.3e %12.3e\n", C,
                   precisions[pi].name, computed, exp(r->rep.max_exponent), nonfinite(r),
                   r->err, rp->err, fl);
        }
    }
    printf("  C x C x K decay tensor at C = 64, d_k = 128: %d elements\n", 64 * 64 * 128);
    lab_tsv_close(x, fc);
}

/* Non-finite count and error of every mode and precision at C = 64, for the
 * named |g| values: the production bound and past it. */
static void production_table(const sweep *sw)
{
    size_t ci = chunk_named(64);
    printf("\nC = 64 around the production bound: non-finite count / error\n");
    printf("%8s %-11s", "g", "mode");
    for (size_t pi = 0; pi < N_PREC; pi++) printf(" %21s", precisions[pi].name);
    printf("\n");
    double show[N_NAMED_G];
    named_g(show);
    for (size_t s = 0; s < N_NAMED_G; s++) {
        size_t gi = grid_index(sw, show[s]);
        if (gi == sw->ng) continue;
        for (size_t mi = 0; mi < N_MODES; mi++) {
            printf("%8.4g %-11s", -sw->grid[gi], modes[mi].label);
            for (size_t pi = 0; pi < N_PREC; pi++) {
                const outcome *r = sweep_run(sw, gi, ci, mi, pi);
                printf("   %8zu / %9.2e", nonfinite(r), r->err);
            }
            printf("\n");
        }
    }
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params prm = {.T = 256, .K = 32, .V = 32, .n_log = 24, .iters = 30,
                  .g_lo = 0.01, .g_hi = 5.0};
    lab_init(&x, "03_subchunk_range",
             "the floating-point range problem of chunkwise KDA: 1/gamma, non-finite values "
             "and error by chunk size, decay mode and precision");
    lab_flag_size(&x, "T", &prm.T, "sequence length (positions)");
    lab_flag_size(&x, "K", &prm.K, "key dimension");
    lab_flag_size(&x, "V", &prm.V, "value dimension");
    lab_flag_size(&x, "points", &prm.n_log, "log-spaced |g| points between --gmin and --gmax");
    lab_flag_double(&x, "gmin", &prm.g_lo, "smallest per-step decay |g| of the log grid");
    lab_flag_double(&x, "gmax", &prm.g_hi, "largest per-step decay |g| of the log grid");
    lab_flag_size(&x, "iters", &prm.iters, "bisection steps per overflow threshold");
    lab_parse(&x, argc, argv);
    lab_need(&x, prm.T >= 1 && prm.K >= 1 && prm.V >= 1, "--T, --K, --V", "each >= 1");
    lab_need(&x, prm.g_lo > 0.0 && prm.g_hi >= prm.g_lo, "--gmin, --gmax", "0 < gmin <= gmax");
    lab_need(&x, prm.n_log <= 1000, "--points", "points <= 1000");

    gsl_rng *rng = lab_rng(&x);
    problem pb;
    problem_make(&x, &pb, rng, prm.T, prm.K, prm.V, KDALAB_KDA);
    sweep sw;
    sweep_measure(&x, &prm, &pb, &sw);
    sweep_write(&x, &prm, &sw);
    double t_sweep = lab_elapsed(&x);

    thresholds(&x, &prm);
    claims(&x, &prm, &sw);
    production_table(&sw);
    printf("\n%s: sweep %.1f s, total %.1f s; results in %s/03_subchunk_range*.tsv\n", x.name,
           t_sweep, lab_elapsed(&x), x.out);

    free(sw.grid), free(sw.runs), free(sw.floors);
    problem_free(&pb);
    gsl_rng_free(rng);
    return 0;
}
