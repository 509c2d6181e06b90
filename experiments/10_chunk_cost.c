/*
 * 10_chunk_cost — what the per-channel decay costs inside a chunk (seed
 * chapter, "What changes in the kernel": "naively you would need a C x C x d_k
 * tensor, which for C = 64, d_k = 128 is 500 000 elements per chunk per head,
 * and the whole point of chunking was to avoid materialising things of that
 * size").
 *
 * The three ways kdalab's chunkwise form applies KDA's decay inside a chunk
 * (REFERENCE.md, "Where the floating-point range problem lives"; opts.decay):
 *   pairwise  exp(Gamma_i - Gamma_j) per pair and channel: every element of
 *             the C x C x K tensor is evaluated (C(C+1)/2 K per Gram matrix,
 *             two Gram matrices), streamed through, never stored
 *   rescaled  q * gamma, k / gamma: two plain C x C x K matrix products, O(CK)
 *             exponentials
 *   safe      sub-chunks of c = 16: off-diagonal blocks through an anchor,
 *             only the c x c diagonal blocks pairwise (kdalab's default)
 * each in kdalab_chunk_f64 and kdalab_chunk_f32 (lib/reference/chunk.c and
 * its float32 twin: one algorithm, the mode a parameter of its Gram step).
 *
 * Measured: CPU time per token (process CPU time, kdalab on one thread, over --reps rounds, at
 * least 5, each round timing every point once; the tables are the medians,
 * and each ratio the verdict quotes is formed within a round and printed as
 * its median and range over the rounds, a "spread:" line) for C = 16 ... 256, one KDA head,
 * K = V = 128 (the chapter's d_k), T = --T tokens, g ~ U(-0.1, 0) (so that the
 * rescaled mode stays finite at C = 256 in float32: |sum g| <= 25.6 < 88.7),
 * and the error max|o - o_ref| / max|o_ref| against kdalab_recurrent_f64, so
 * every timed run is known to compute the same thing.
 * Computed (from the code's buffers, not measured): the elements of the
 * C x C x K tensor the chapter warns about, the C x C score matrices, the
 * workspace the chunkwise form allocates per head, every mode (malloc sizes
 * in lib/reference/chunk_steps.c kdalab__chunk_alloc + the state), and the
 * decay factors exp()
 * each mode evaluates per chunk for its two Gram matrices.
 *
 * Outputs (DIR = --out):
 *   10_chunk_cost.tsv         per (precision, mode, C): time, error, exp() count
 *   10_chunk_cost_memory.tsv  per C: elements and bytes, tensor against workspace
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "kdalab.h"

typedef struct {
    size_t T, K, V, sub, reps, Cmin, Cmax;
    double gmin;
} params;

typedef struct {
    const char *name;
    kdalab_decay_mode mode;
} mode_case;
static const mode_case modes[] = {
    {"pairwise", KDALAB_DECAY_PAIRWISE},
    {"rescaled", KDALAB_DECAY_RESCALED},
    {"safe", KDALAB_DECAY_SAFE},
};
#define N_MODES 3
#define MAX_C 16

/* ---- the analytic counts -------------------------------------------------------------- */

/* exp() evaluations of the two decayed Gram matrices of one full chunk of C
 * (KDA, K channels), as lib/reference/chunk_steps.c kdalab__chunk_decayed_gram
 * forms them: per Gram matrix,
 * the rows decayed to their sub-chunk anchor (C K), the earlier rows decayed
 * up to each anchor (K c n(n-1)/2 for n = C/c sub-chunks), and the diagonal
 * blocks: pairwise (K c(c+1)/2 each) or rescaled (C K). */
static double gram_exps(kdalab_decay_mode m, double C, double K, double c)
{
    double per;
    if (m == KDALAB_DECAY_PAIRWISE) per = C * K + C * (C + 1) / 2 * K;
    else if (m == KDALAB_DECAY_RESCALED) per = 2 * C * K;
    else {
        double n = ceil(C / c);
        per = C * K + K * c * n * (n - 1) / 2 + n * c * (c + 1) / 2 * K;
    }
    return 2 * per;
}

/* Workspace per head, in elements, every mode and precision (kdalab__chunk_alloc:
 * 9 CK, 3 CV, 3 CC, C, K, + the state KV in chunk.c). */
static double workspace(double C, double K, double V)
{
    return 9 * C * K + 3 * C * V + 3 * C * C + C + K + K * V;
}

/* ---- the measurement ------------------------------------------------------------------ */

typedef struct {
    double *q, *k, *v, *beta, *g, *o, *oref;
    float *qf, *kf, *vf, *betaf, *gf, *of;
} inputs;

#define MAX_REPS 32

typedef struct {
    int f32;
    size_t mi, C;
    double secs, err, exps;  /* secs: the median over the rounds */
    double round[MAX_REPS];  /* CPU seconds in each round */
    kdalab_status st;
} point;

static void run_point(const lab_ctx *x, const params *p, inputs *in, point *pt, size_t r)
{
    kdalab_dims d = {.B = 1, .T = p->T, .H = 1, .K = p->K, .V = p->V};
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = pt->C;
    op.subchunk = p->sub < pt->C ? p->sub : pt->C;
    op.decay = modes[pt->mi].mode;
    double scale = kdalab_default_scale(p->K), t0 = lab_cpu_now();
    kdalab_status st;
    if (pt->f32)
        st = kdalab_chunk_f32(&d, KDALAB_KDA, (float)scale, in->qf, in->kf, in->vf, in->gf,
                              in->betaf, NULL, in->of, NULL, &op, NULL);
    else
        st = kdalab_chunk_f64(&d, KDALAB_KDA, scale, in->q, in->k, in->v, in->g, in->beta,
                              NULL, in->o, NULL, &op, NULL);
    double s = lab_cpu_now() - t0;
    if (st != KDALAB_ERANGE) lab_check(x, st, "chunkwise form");
    pt->st = st;
    pt->round[r] = s;
    pt->err = pt->f32 ? lab_rel_err(NULL, in->of, in->oref, p->T * p->V)
                      : lab_rel_err(in->o, NULL, in->oref, p->T * p->V);
}

static size_t measure(lab_ctx *x, const params *p, gsl_rng *rng, point *pts, size_t *Cs,
                      size_t nC)
{
    size_t T = p->T, K = p->K, V = p->V;
    inputs in;
    in.q = lab_zeros(x, T * K), in.k = lab_zeros(x, T * K), in.v = lab_zeros(x, T * V);
    in.beta = lab_zeros(x, T), in.g = lab_zeros(x, T * K), in.o = lab_zeros(x, T * V);
    in.oref = lab_zeros(x, T * V);
    for (size_t t = 0; t < T; t++) {
        lab_random_unit(rng, in.q + t * K, K);
        lab_random_unit(rng, in.k + t * K, K);
        for (size_t j = 0; j < V; j++) in.v[t * V + j] = gsl_ran_gaussian(rng, 1.0);
        in.beta[t] = gsl_rng_uniform(rng);
        for (size_t c = 0; c < K; c++) in.g[t * K + c] = p->gmin * gsl_rng_uniform(rng);
    }
    in.qf = lab_floats(x, in.q, T * K), in.kf = lab_floats(x, in.k, T * K);
    in.vf = lab_floats(x, in.v, T * V), in.betaf = lab_floats(x, in.beta, T);
    in.gf = lab_floats(x, in.g, T * K), in.of = lab_floats(x, NULL, T * V);
    kdalab_dims d = {.B = 1, .T = T, .H = 1, .K = K, .V = V};
    lab_check(x, kdalab_recurrent_f64(&d, KDALAB_KDA, kdalab_default_scale(K), in.q, in.k, in.v,
                                      in.g, in.beta, NULL, in.oref, NULL), "recurrent_f64");
    size_t np = 0;
    for (int f32 = 0; f32 <= 1; f32++)
        for (size_t mi = 0; mi < N_MODES; mi++)
            for (size_t ci = 0; ci < nC; ci++)
                pts[np++] = (point){.f32 = f32, .mi = mi, .C = Cs[ci],
                                    .exps = gram_exps(modes[mi].mode, (double)Cs[ci], (double)K,
                                                      (double)(p->sub < Cs[ci] ? p->sub : Cs[ci]))};
    for (size_t r = 0; r < p->reps; r++)
        for (size_t i = 0; i < np; i++) {
            run_point(x, p, &in, &pts[i], r);
            lab_progress(x, "runs", r * np + i + 1, p->reps * np);
        }
    for (size_t i = 0; i < np; i++) pts[i].secs = lab_spread_of(pts[i].round, p->reps).median;
    double *d64[] = {in.q, in.k, in.v, in.beta, in.g, in.o, in.oref};
    float *d32[] = {in.qf, in.kf, in.vf, in.betaf, in.gf, in.of};
    for (size_t i = 0; i < 7; i++) free(d64[i]);
    for (size_t i = 0; i < 6; i++) free(d32[i]);
    return np;
}

/* ---- output ------------------------------------------------------------------------------ */

static const point *find(const point *pts, size_t np, int f32, size_t mi, size_t C)
{
    for (size_t i = 0; i < np; i++)
        if (pts[i].f32 == f32 && pts[i].mi == mi && pts[i].C == C) return &pts[i];
    return NULL;
}

static void write_times(lab_ctx *x, const params *p, const point *pts, size_t np)
{
    static const char *const cols[] = {
        "precision", "f64 (kdalab_chunk_f64) or f32 (kdalab_chunk_f32, fp32 storage)",
        "mode", "opts.decay: pairwise, rescaled, safe (sub-chunks of --sub)",
        "C", "chunk size",
        "ns_per_token", "median process CPU time over the rounds / T, ns",
        "exps_per_token", "decay factors exp() evaluated for the two Gram matrices, per token "
                          "(counted from the code, see gram_exps)",
        "err", "max|o - o_ref| / max|o_ref| against kdalab_recurrent_f64 (nan: non-finite)",
        NULL};
    FILE *f = lab_tsv_open(x, "10_chunk_cost", cols,
                           "KDA, B=H=1, T=%zu, K=%zu, V=%zu, sub-chunk %zu, g~U(%g,0), unit q,k, "
                           "v~N(0,1), beta~U(0,1), reps=%zu, one thread, CPU time", p->T, p->K,
                           p->V, p->sub, p->gmin, p->reps);
    for (size_t i = 0; i < np; i++) {
        const point *q = &pts[i];
        fprintf(f, "%s\t%s\t%zu\t%.2f\t%.6g\t%.3e\n", q->f32 ? "f32" : "f64", modes[q->mi].name,
                q->C, 1e9 * q->secs / (double)p->T, q->exps / (double)q->C, q->err);
        if (i + 1 == np || pts[i + 1].mi != q->mi || pts[i + 1].f32 != q->f32)
            fprintf(f, "\n\n");
    }
    lab_tsv_close(x, f);
}

static void write_memory(lab_ctx *x, const params *p, const size_t *Cs, size_t nC)
{
    static const char *const cols[] = {
        "C", "chunk size",
        "tensor_elems", "C x C x K: exp(Gamma_i - Gamma_j) per pair and channel, if stored",
        "tensor_lower", "C(C+1)/2 x K: its causal half (what the pairwise mode evaluates per "
                        "Gram matrix)",
        "scores_elems", "C x C: one score matrix (A_kk or A_qk)",
        "rows_elems", "C (2K + V): the chunk's own q, k, v",
        "ws_elems", "workspace per head of the chunkwise form, every mode and precision "
                    "(lib/reference): 9CK + 3CV + 3C^2 + C + K + KV",
        "tensor_bytes_f32", "tensor_elems * 4",
        "tensor_bytes_f64", "tensor_elems * 8",
        "ws_bytes_f32", "ws_elems * 4",
        "ws_bytes_f64", "ws_elems * 8",
        "tensor_over_rows", "tensor_elems / rows_elems = CK / (2K + V)",
        NULL};
    FILE *f = lab_tsv_open(x, "10_chunk_cost_memory", cols,
                           "K=%zu V=%zu; computed from the buffers the code allocates (the "
                           "pairwise mode streams the tensor, never stores it)", p->K, p->V);
    double K = (double)p->K, V = (double)p->V;
    printf("\nPer chunk per head, K = %zu, V = %zu (computed from the code's buffers):\n", p->K,
           p->V);
    printf("%5s %14s %12s %14s %14s %16s %16s %10s\n", "C", "CxCxK elems", "CxC elems",
           "chunk q,k,v", "workspace", "tensor f32 B", "workspace f32 B", "tensor/qkv");
    for (size_t i = 0; i < nC; i++) {
        double C = (double)Cs[i], t = C * C * K, ws = workspace(C, K, V), rows = C * (2 * K + V);
        fprintf(f, "%zu\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.4g\n", Cs[i], t,
                C * (C + 1) / 2 * K, C * C, rows, ws, 4 * t, 8 * t, 4 * ws, 8 * ws, t / rows);
        printf("%5zu %14.0f %12.0f %14.0f %14.0f %16.0f %16.0f %10.1f\n", Cs[i], t, C * C, rows,
               ws, 4 * t, 4 * ws, t / rows);
    }
    lab_tsv_close(x, f);
}

static void print_times(const params *p, const point *pts, size_t np, const size_t *Cs, size_t nC)
{
    printf("\nCPU time per token, ns (one KDA head, K = V = %zu, T = %zu; this machine), and "
           "error against kdalab_recurrent_f64:\n", p->K, p->T);
    printf("%5s", "C");
    for (int f32 = 0; f32 <= 1; f32++)
        for (size_t mi = 0; mi < N_MODES; mi++)
            printf(" %9s-%s", modes[mi].name, f32 ? "32" : "64");
    printf(" %12s\n", "max err");
    for (size_t ci = 0; ci < nC; ci++) {
        double worst = 0;
        printf("%5zu", Cs[ci]);
        for (int f32 = 0; f32 <= 1; f32++)
            for (size_t mi = 0; mi < N_MODES; mi++) {
                const point *q = find(pts, np, f32, mi, Cs[ci]);
                printf(" %12.0f", 1e9 * q->secs / (double)p->T);
                worst = isnan(q->err) || isnan(worst) ? NAN : fmax(worst, q->err);
            }
        printf(" %12.2e\n", worst);
    }
}

/* Per round: a / b. */
static lab_spread round_ratio(const params *p, const point *a, const point *b)
{
    double v[MAX_REPS];
    for (size_t r = 0; r < p->reps; r++) v[r] = a->round[r] / b->round[r];
    return lab_spread_of(v, p->reps);
}

static void print_verdict(const params *p, const point *pts, size_t np, const size_t *Cs,
                          size_t nC)
{
    size_t C64 = Cs[0];
    for (size_t i = 0; i < nC; i++)
        if (Cs[i] == 64) C64 = 64;
    size_t Cl = Cs[nC - 1];
    double K = (double)p->K, V = (double)p->V, t64 = (double)C64 * (double)C64 * K;
    const point *pw = find(pts, np, 0, 0, Cl), *rs = find(pts, np, 0, 1, Cl),
                *sf = find(pts, np, 0, 2, Cl), *pw0 = find(pts, np, 0, 0, Cs[0]),
                *sf0 = find(pts, np, 0, 2, Cs[0]);
    const point *pw32 = find(pts, np, 1, 0, Cl), *sf32 = find(pts, np, 1, 2, Cl);
    lab_spread s_gpw = round_ratio(p, pw, pw0), s_gsf = round_ratio(p, sf, sf0),
               s_sf = round_ratio(p, pw, sf), s_sf32 = round_ratio(p, pw32, sf32),
               s_rs = round_ratio(p, pw, rs);
    double grow_pw = s_gpw.median, grow_sf = s_gsf.median;
    char what[160];
    printf("\nEach ratio below is formed within a round (CPU time) and summarised over the %zu "
           "rounds:\n", p->reps);
    snprintf(what, sizeof what, "pairwise mode, time per token C = %zu -> %zu (float64)", Cs[0], Cl);
    lab_print_spread(what, s_gpw, 1.0, 1, "x");
    snprintf(what, sizeof what, "safe mode, time per token C = %zu -> %zu (float64)", Cs[0], Cl);
    lab_print_spread(what, s_gsf, 1.0, 1, "x");
    snprintf(what, sizeof what, "pairwise / safe at C = %zu (float64)", Cl);
    lab_print_spread(what, s_sf, 1.0, 1, "x");
    snprintf(what, sizeof what, "pairwise / safe at C = %zu (float32)", Cl);
    lab_print_spread(what, s_sf32, 1.0, 1, "x");
    snprintf(what, sizeof what, "pairwise / rescaled at C = %zu (float64)", Cl);
    lab_print_spread(what, s_rs, 1.0, 1, "x");
    double ws64 = workspace((double)C64, K, V);
    int finite = 1;
    double worst[2] = {0, 0}; /* float64, float32 */
    for (size_t i = 0; i < np; i++) {
        finite &= !isnan(pts[i].err) && pts[i].err < 1e-3;
        worst[pts[i].f32] = fmax(worst[pts[i].f32], pts[i].err);
    }
    printf("\nVerdict (medians of the rounds): at C = %zu, K = %zu the C x C x K tensor has %.0f elements (the "
           "chapter: 500 000) = %.1f MiB in float32, %.0f x the C x C score matrix and %.0f x "
           "the whole workspace of a chunk (%.0f elements). kdalab never stores it: the "
           "pairwise mode evaluates each element instead, and pays in time: from C = %zu to "
           "%zu its time per token grows x%.1f (float64; safe sub-chunks x%.1f), and at C = "
           "%zu it is %.1f x the safe mode (float32 %.1f x) and %.1f x the rescaled mode. "
           "Every run agrees with the recurrent form (%s: max error %.1e in float64, %.1e in "
           "float32). %s\n",
           C64, p->K, t64, 4 * t64 / 1048576.0, K, t64 / ws64, ws64, Cs[0], Cl, grow_pw,
           grow_sf, Cl, s_sf.median, s_sf32.median, s_rs.median,
           finite ? "yes" : "NO, SOME RUN FAILED", worst[0], worst[1],
           finite && s_sf.median > 1.0 && grow_pw > grow_sf
               ? "The tensor is what chunking must avoid: CONFIRMED (times measured on this "
                 "machine, CPU time; sizes computed)."
               : "NOT CONFIRMED.");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.T = 1024, .K = 128, .V = 128, .sub = 16, .reps = 5, .Cmin = 16, .Cmax = 256,
                .gmin = -0.1};
    lab_init(&x, "10_chunk_cost",
             "time and memory of the C x C x K decay tensor against the rescaled and safe "
             "sub-chunk modes of kdalab_chunk_f64/f32, C = 16..256");
    lab_flag_size(&x, "T", &p.T, "tokens (one KDA head)");
    lab_flag_size(&x, "K", &p.K, "key dimension");
    lab_flag_size(&x, "V", &p.V, "value dimension");
    lab_flag_size(&x, "sub", &p.sub, "sub-chunk size c of the safe mode");
    lab_flag_size(&x, "reps", &p.reps, "rounds, 5 to 32 (each times every point; medians and ranges are printed)");
    lab_flag_size(&x, "Cmin", &p.Cmin, "smallest chunk size (doubled up to --Cmax)");
    lab_flag_size(&x, "Cmax", &p.Cmax, "largest chunk size");
    lab_flag_double(&x, "gmin", &p.gmin, "log-decay drawn from U(gmin, 0)");
    lab_parse(&x, argc, argv);
    lab_one_thread(&x);
    lab_need(&x, p.T >= 1 && p.K >= 1 && p.V >= 1 && p.sub >= 1, "--T, --K, --V, --sub",
             "each >= 1");
    lab_need(&x, p.reps >= 5 && p.reps <= MAX_REPS, "--reps", "5 <= reps <= %d", MAX_REPS);
    lab_need(&x, p.Cmin >= 1 && p.Cmin <= p.Cmax && p.Cmax <= p.T, "--Cmin, --Cmax, --T",
             "1 <= Cmin <= Cmax <= T");
    lab_need(&x, p.gmin <= 0.0, "--gmin", "a log-decay <= 0");
    size_t Cs[MAX_C], nC = 0;
    for (size_t C = p.Cmin; C <= p.Cmax && nC < MAX_C; C *= 2) Cs[nC++] = C;
    point pts[2 * N_MODES * MAX_C];
    gsl_rng *rng = lab_rng(&x);
    size_t np = measure(&x, &p, rng, pts, Cs, nC);
    write_times(&x, &p, pts, np);
    write_memory(&x, &p, Cs, nC);
    print_times(&p, pts, np, Cs, nC);
    print_verdict(&p, pts, np, Cs, nC);
    printf("\n%s: %.1f s; results in %s/10_chunk_cost*.tsv\n", x.name, lab_elapsed(&x), x.out);
    gsl_rng_free(rng);
    return 0;
}
