/*
 * 08_dplr — KDA's transition is diagonal plus low rank, and a product of C of
 * them collapses into one C x C triangular solve (seed chapter, "Why a
 * diagonal, and not any matrix?"; REFERENCE.md, "Chunkwise form", step 2).
 *
 * KDA's state transition at step t (REFERENCE.md) is
 *   A_t = (I - beta_t k_t k_t^T) Diag(a_t) = Diag(a_t) - beta_t k_t (a_t * k_t)^T
 * and the chapter claims (1) that identity, and (2) that the product
 * P_C = A_C ... A_1 of C such transitions "collapses into one C x C
 * triangular solve". Both are measured in float64 for K = --K1 and --K2 and
 * C = 1 .. --Cmax, with random unit keys k_t, beta_t ~ U(0,1) and a per-channel
 * decay a_t[c] = exp(g), g ~ U(--gmin, 0):
 *
 * Part 1, the identity: both sides formed explicitly (the left one by a dense
 * K x K x K matrix product), max |left - right| / max |left| over --trials draws.
 * Part 2, the product. P_C is formed by C dense matrix products (the
 * sequential chain). Then
 *   rank     P_C - Diag(gamma_C), gamma_C = a_1 * ... * a_C (the product of
 *            the diagonal parts), has rank <= C: its singular values
 *            (gsl_linalg_SV_decomp), the numerical rank at 1e-10 * sigma_1,
 *            sigma_C / sigma_1 and sigma_{C+1} / sigma_1 (the cliff);
 *   UT / WY  P_C = Diag(gamma_C) - Ktil^T T (gamma * K), with rows
 *            Ktil_r = k_r * gamma_C / gamma_r and (gamma * K)_r = gamma_r * k_r,
 *            T = (I + A_kk)^-1 Diag(beta) (one C x C unit lower-triangular
 *            solve, forward substitution), A_kk[i][j] = beta_i sum_c k_i[c]
 *            k_j[c] gamma_i[c] / gamma_j[c] for j < i: the same matrices as
 *            the chunkwise form's steps 1-3 and 7 with V = 0;
 *   library  kdalab_chunk_f64 (one chunk of C, safe sub-chunks) and
 *            kdalab_recurrent_f64 on v = 0, h0 = I: their final state is P_C;
 *            and the library's DPLR row (the general transition
 *            Diag(exp g) + b a^T, kdalab_run_f64) with KDA's a = -a_t * k,
 *            b = beta k, one chunk of C: the boundary's own chunkwise kernel.
 * Each form is compared with the dense chain: max |X - P_C| / max |P_C|.
 * Part 3, the general transition: the same product for RWKV-7's
 * parametrisation (a = -kk, b = kk * alpha, kk unit, alpha ~ U(0, 1): no
 * delta rule's b proportional to k), its rank and the library's DPLR chunk
 * and recurrent forms against the dense chain; then the cost of the DPLR
 * chunkwise form against C (K = V = --K1, T = --T, median of 5 alternating
 * rounds with the recurrent form in each).
 *
 * Outputs (DIR = --out):
 *   08_dplr.tsv           per (K, C): rank, the cliff, the errors
 *   08_dplr_spectrum.tsv  per (K, C, i): sigma_i / sigma_1 of P_C - Diag(gamma_C)
 *   08_dplr_identity.tsv  per K: the identity's error over the trials
 *   08_dplr_general.tsv   per (K, C): the general transition's rank and errors
 *   08_dplr_cost.tsv      per C: the DPLR chunkwise form's time against the
 *                         recurrent form's, same run
 */
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_vector.h>

#include "common.h"
#include "kdalab.h"

typedef struct {
    size_t K1, K2, Cmax, trials, T;
    double gmin, rank_tol;
} params;

/* C (n x n) = A B, all row-major. */
static void matmul(const double *A, const double *B, double *C, size_t n)
{
    memset(C, 0, n * n * sizeof *C);
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < n; m++) {
            double a = A[i * n + m];
            for (size_t j = 0; j < n; j++) C[i * n + j] += a * B[m * n + j];
        }
}

/* One random transition: unit k [K], beta, log-decay g [K]. */
static void draw(gsl_rng *rng, size_t K, double gmin, double *k, double *beta, double *g)
{
    lab_random_unit(rng, k, K);
    *beta = gsl_rng_uniform(rng);
    for (size_t c = 0; c < K; c++) g[c] = gmin * gsl_rng_uniform(rng);
}

/* ---- part 1: the identity ---------------------------------------------------------- */

static double identity(lab_ctx *x, const params *p, gsl_rng *rng, size_t K, FILE *f)
{
    double *k = lab_zeros(x, K), *g = lab_zeros(x, K), *M = lab_zeros(x, K * K),
           *Da = lab_zeros(x, K * K), *L = lab_zeros(x, K * K), *R = lab_zeros(x, K * K);
    double worst = 0.0, beta;
    for (size_t t = 0; t < p->trials; t++) {
        draw(rng, K, p->gmin, k, &beta, g);
        for (size_t r = 0; r < K; r++)
            for (size_t c = 0; c < K; c++) {
                M[r * K + c] = (r == c) - beta * k[r] * k[c];   /* I - beta k k^T */
                Da[r * K + c] = r == c ? exp(g[c]) : 0.0;        /* Diag(a)        */
                R[r * K + c] = Da[r * K + c] - beta * k[r] * exp(g[c]) * k[c];
            }
        matmul(M, Da, L, K);
        double e = lab_rel_err(R, NULL, L, K * K);
        worst = fmax(worst, e);
        fprintf(f, "%zu\t%zu\t%.6g\t%.3e\n", K, t, beta, e);
    }
    free(k), free(g), free(M), free(Da), free(L), free(R);
    return worst;
}

/* ---- part 2: the product of C transitions ---------------------------------------------- */

/* The WY form of the product of transitions 0..C-1 (rows of k, g; beta):
 * P = Diag(gamma_C) - Ktil^T T (gamma * K). Written to P (K x K). */
static void ut_product(const lab_ctx *x, const double *k, const double *g, const double *beta,
                       size_t C, size_t K, double *P)
{
    double *Gin = lab_zeros(x, C * K), *Akk = lab_zeros(x, C * C), *W = lab_zeros(x, C * K),
           *Kt = lab_zeros(x, C * K);
    for (size_t c = 0; c < K; c++) { /* Gin[r] = g_0 + ... + g_r (ln gamma_r) */
        double run = 0.0;
        for (size_t r = 0; r < C; r++) {
            run += g[r * K + c];
            Gin[r * K + c] = run;
        }
    }
    for (size_t i = 0; i < C; i++)      /* A_kk, strictly lower; exponents <= 0 */
        for (size_t j = 0; j < i; j++) {
            double s = 0.0;
            for (size_t c = 0; c < K; c++)
                s += k[i * K + c] * k[j * K + c] * exp(Gin[i * K + c] - Gin[j * K + c]);
            Akk[i * C + j] = beta[i] * s;
        }
    for (size_t r = 0; r < C; r++)      /* right-hand side Diag(beta) (gamma * K) */
        for (size_t c = 0; c < K; c++) {
            W[r * K + c] = beta[r] * exp(Gin[r * K + c]) * k[r * K + c];
            Kt[r * K + c] = k[r * K + c] * exp(Gin[(C - 1) * K + c] - Gin[r * K + c]);
        }
    for (size_t i = 0; i < C; i++)      /* (I + A_kk) W = rhs: forward substitution */
        for (size_t m = 0; m < i; m++)
            for (size_t c = 0; c < K; c++) W[i * K + c] -= Akk[i * C + m] * W[m * K + c];
    for (size_t r = 0; r < K; r++)      /* P = Diag(gamma_C) - Kt^T W */
        for (size_t c = 0; c < K; c++) {
            double s = r == c ? exp(Gin[(C - 1) * K + c]) : 0.0;
            for (size_t m = 0; m < C; m++) s -= Kt[m * K + r] * W[m * K + c];
            P[r * K + c] = s;
        }
    free(Gin), free(Akk), free(W), free(Kt);
}

/* The library's final state on v = 0, h0 = I over positions 0..C-1: P_C. */
static void library_product(const lab_ctx *x, const double *k, const double *g,
                            const double *beta, size_t C, size_t K, int chunked, double *P)
{
    kdalab_dims d = {.B = 1, .T = C, .H = 1, .K = K, .V = K};
    double *q = lab_zeros(x, C * K), *v = lab_zeros(x, C * K), *o = lab_zeros(x, C * K),
           *h0 = lab_zeros(x, K * K);
    for (size_t c = 0; c < K; c++) h0[c * K + c] = 1.0;
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = C;
    op.subchunk = C < 16 ? C : 16;
    if (chunked)
        lab_check(x, kdalab_chunk_f64(&d, KDALAB_KDA, 1.0, q, k, v, g, beta, h0, o, P, &op, NULL),
                  "chunk_f64");
    else
        lab_check(x, kdalab_recurrent_f64(&d, KDALAB_KDA, 1.0, q, k, v, g, beta, h0, o, P),
                  "recurrent_f64");
    free(q), free(v), free(o), free(h0);
}

/* The library's DPLR row on v = 0, h0 = I over positions 0..C-1 with the
 * low-rank term's rows a, b and log-decay g [C, K]: P_C of the general
 * transition Diag(exp g) + b a^T, chunkwise (one chunk of C) or recurrent. */
static void dplr_product(const lab_ctx *x, const double *a, const double *b, const double *g,
                         size_t C, size_t K, int chunked, double *P)
{
    double *q = lab_zeros(x, C * K), *v = lab_zeros(x, C * K), *o = lab_zeros(x, C * K),
           *h0 = lab_zeros(x, K * K);
    for (size_t c = 0; c < K; c++) h0[c * K + c] = 1.0;
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = C;
    op.subchunk = C < 16 ? C : 16;
    const kdalab_call call = {.dims = {.B = 1, .T = C, .H = 1, .K = K, .V = K}, .HV = 1,
                              .mech = KDALAB_DPLR, .scale = 1.0,
                              .form = chunked ? KDALAB_FORM_CHUNK : KDALAB_FORM_RECURRENT,
                              .opts = &op};
    const kdalab_tensors_f64 t = {.q = q, .k = q, .v = v, .g = g, .a = a, .b = b, .h0 = h0,
                                  .o = o, .ht = P};
    lab_check(x, kdalab_run_f64(&call, &t, NULL), "run_f64 dplr");
    free(q), free(v), free(o), free(h0);
}

typedef struct {
    size_t K, C, rank;
    double s1, sC, sC1;     /* sigma_1, sigma_C / sigma_1, sigma_{C+1} / sigma_1 (0 if C >= K) */
    double e_ut, e_chunk, e_rec, e_dplr;
} product_row;

/* Every C = 1..Cmax for one K: rows[C-1]; the spectra go to fs. */
static void products(lab_ctx *x, const params *p, gsl_rng *rng, size_t K, product_row *rows,
                     FILE *fs)
{
    size_t Cm = p->Cmax;
    double *k = lab_zeros(x, Cm * K), *g = lab_zeros(x, Cm * K), *beta = lab_zeros(x, Cm);
    for (size_t t = 0; t < Cm; t++) draw(rng, K, p->gmin, k + t * K, beta + t, g + t * K);
    double *da = lab_zeros(x, Cm * K), *db = lab_zeros(x, Cm * K); /* KDA as a DPLR */
    for (size_t i = 0; i < Cm * K; i++) {
        da[i] = -exp(g[i]) * k[i];
        db[i] = beta[i / K] * k[i];
    }
    double *P = lab_zeros(x, K * K), *A = lab_zeros(x, K * K), *tmp = lab_zeros(x, K * K),
           *X = lab_zeros(x, K * K), *lng = lab_zeros(x, K);
    for (size_t c = 0; c < K; c++) P[c * K + c] = 1.0;
    gsl_matrix *Dm = gsl_matrix_alloc(K, K), *Vm = gsl_matrix_alloc(K, K);
    gsl_vector *S = gsl_vector_alloc(K), *work = gsl_vector_alloc(K);
    for (size_t C = 1; C <= Cm; C++) {
        const double *kt = k + (C - 1) * K, *gt = g + (C - 1) * K;
        double b = beta[C - 1];
        for (size_t r = 0; r < K; r++) /* A_C, materialised: (I - b k k^T) Diag(a) */
            for (size_t c = 0; c < K; c++)
                A[r * K + c] = ((r == c) - b * kt[r] * kt[c]) * exp(gt[c]);
        matmul(A, P, tmp, K); /* the dense chain: P_C = A_C P_{C-1} */
        memcpy(P, tmp, K * K * sizeof *P);
        for (size_t c = 0; c < K; c++) lng[c] += gt[c];

        product_row *row = &rows[C - 1];
        row->K = K;
        row->C = C;
        for (size_t r = 0; r < K; r++) /* P_C - Diag(gamma_C) */
            for (size_t c = 0; c < K; c++)
                gsl_matrix_set(Dm, r, c, P[r * K + c] - (r == c ? exp(lng[c]) : 0.0));
        gsl_linalg_SV_decomp(Dm, Vm, S, work);
        double s1 = gsl_vector_get(S, 0);
        row->s1 = s1;
        row->rank = 0;
        for (size_t i = 0; i < K; i++) {
            double si = gsl_vector_get(S, i) / s1;
            row->rank += si > p->rank_tol;
            fprintf(fs, "%zu\t%zu\t%zu\t%.6e\n", K, C, i + 1, si);
        }
        fprintf(fs, "\n\n");
        row->sC = C <= K ? gsl_vector_get(S, C - 1) / s1 : NAN;
        row->sC1 = C < K ? gsl_vector_get(S, C) / s1 : 0.0;

        ut_product(x, k, g, beta, C, K, X);
        row->e_ut = lab_rel_err(X, NULL, P, K * K);
        library_product(x, k, g, beta, C, K, 1, X);
        row->e_chunk = lab_rel_err(X, NULL, P, K * K);
        library_product(x, k, g, beta, C, K, 0, X);
        row->e_rec = lab_rel_err(X, NULL, P, K * K);
        dplr_product(x, da, db, g, C, K, 1, X);
        row->e_dplr = lab_rel_err(X, NULL, P, K * K);
        lab_progress(x, "products", C, Cm);
    }
    free(da), free(db);
    gsl_matrix_free(Dm), gsl_matrix_free(Vm), gsl_vector_free(S), gsl_vector_free(work);
    free(k), free(g), free(beta), free(P), free(A), free(tmp), free(X), free(lng);
}

static void write_rows(lab_ctx *x, const params *p, const product_row *rows, size_t n)
{
    static const char *const cols[] = {
        "K", "key dimension (the state is K x K here: V = K)",
        "C", "transitions in the product",
        "rank", "numerical rank of P_C - Diag(gamma_C): singular values > rank_tol * sigma_1",
        "sigma1", "largest singular value of P_C - Diag(gamma_C)",
        "sC", "sigma_C / sigma_1: the smallest of the first C (nan when C > K)",
        "sC1", "sigma_{C+1} / sigma_1: the largest beyond C (0 when C >= K)",
        "err_ut", "max|P_UT - P_C| / max|P_C|: the WY form with one C x C triangular solve",
        "err_chunk", "the same for kdalab_chunk_f64 (one chunk of C) on v = 0, h0 = I",
        "err_recurrent", "the same for kdalab_recurrent_f64 on v = 0, h0 = I",
        "err_dplr", "the same for the library's DPLR row (one chunk of C) with KDA's a, b",
        NULL};
    FILE *f = lab_tsv_open(x, "08_dplr", cols,
                           "float64; unit k, beta~U(0,1), g~U(%g,0) per channel; rank_tol=%g; "
                           "P_C by C dense K x K products", p->gmin, p->rank_tol);
    for (size_t i = 0; i < n; i++) {
        const product_row *r = &rows[i];
        fprintf(f, "%zu\t%zu\t%zu\t%.6e\t%.6e\t%.6e\t%.3e\t%.3e\t%.3e\t%.3e\n", r->K, r->C,
                r->rank, r->s1, r->sC, r->sC1, r->e_ut, r->e_chunk, r->e_rec, r->e_dplr);
        if (i + 1 < n && rows[i + 1].K != r->K) fprintf(f, "\n\n");
    }
    lab_tsv_close(x, f);
}

/* ---- part 3: the general transition ------------------------------------------------------ */

typedef struct {
    size_t K, C, rank;
    double sC1, e_chunk, e_rec;
} general_row;

/* RWKV-7's parametrisation: a = -kk, b = kk * alpha (kk unit, alpha ~ U(0,1)). */
static void draw_general(gsl_rng *rng, size_t K, double gmin, double *a, double *b, double *g)
{
    lab_random_unit(rng, a, K);
    for (size_t c = 0; c < K; c++) {
        b[c] = a[c] * gsl_rng_uniform(rng);
        a[c] = -a[c];
        g[c] = gmin * gsl_rng_uniform(rng);
    }
}

/* Every C = 1..Cmax for one K: the dense chain of Diag(exp g_t) + b_t a_t^T, the
 * rank of P_C - Diag(gamma_C), and the library's DPLR forms against it. */
static void general_products(lab_ctx *x, const params *p, gsl_rng *rng, size_t K,
                             general_row *rows)
{
    const size_t Cm = p->Cmax;
    double *a = lab_zeros(x, Cm * K), *b = lab_zeros(x, Cm * K), *g = lab_zeros(x, Cm * K);
    for (size_t t = 0; t < Cm; t++) draw_general(rng, K, p->gmin, a + t * K, b + t * K, g + t * K);
    double *P = lab_zeros(x, K * K), *A = lab_zeros(x, K * K), *tmp = lab_zeros(x, K * K),
           *X = lab_zeros(x, K * K), *lng = lab_zeros(x, K);
    for (size_t c = 0; c < K; c++) P[c * K + c] = 1.0;
    gsl_matrix *Dm = gsl_matrix_alloc(K, K), *Vm = gsl_matrix_alloc(K, K);
    gsl_vector *S = gsl_vector_alloc(K), *work = gsl_vector_alloc(K);
    for (size_t C = 1; C <= Cm; C++) {
        const double *at = a + (C - 1) * K, *bt = b + (C - 1) * K, *gt = g + (C - 1) * K;
        for (size_t r = 0; r < K; r++) /* A_C = Diag(exp g) + b a^T, materialised */
            for (size_t c = 0; c < K; c++)
                A[r * K + c] = (r == c ? exp(gt[c]) : 0.0) + bt[r] * at[c];
        matmul(A, P, tmp, K);
        memcpy(P, tmp, K * K * sizeof *P);
        for (size_t c = 0; c < K; c++) lng[c] += gt[c];
        general_row *row = &rows[C - 1];
        row->K = K, row->C = C;
        for (size_t r = 0; r < K; r++)
            for (size_t c = 0; c < K; c++)
                gsl_matrix_set(Dm, r, c, P[r * K + c] - (r == c ? exp(lng[c]) : 0.0));
        gsl_linalg_SV_decomp(Dm, Vm, S, work);
        const double s1 = gsl_vector_get(S, 0);
        row->rank = 0;
        for (size_t i = 0; i < K; i++) row->rank += gsl_vector_get(S, i) / s1 > p->rank_tol;
        row->sC1 = C < K ? gsl_vector_get(S, C) / s1 : 0.0;
        dplr_product(x, a, b, g, C, K, 1, X);
        row->e_chunk = lab_rel_err(X, NULL, P, K * K);
        dplr_product(x, a, b, g, C, K, 0, X);
        row->e_rec = lab_rel_err(X, NULL, P, K * K);
        lab_progress(x, "general products", C, Cm);
    }
    gsl_matrix_free(Dm), gsl_matrix_free(Vm), gsl_vector_free(S), gsl_vector_free(work);
    free(a), free(b), free(g), free(P), free(A), free(tmp), free(X), free(lng);
}

/* The DPLR chunkwise form's cost against C: seconds per call of T positions at
 * K = V (one head, float64), the reference's and the SIMD path's, median of
 * `rounds` alternating rounds, each timing the recurrent form too; rows to
 * f, ratios printed. One thread: the forms are compared as algorithms (and
 * a second thread's spin-wait would slow the reference calls after it). */
static void chunk_cost(lab_ctx *x, const params *p, gsl_rng *rng, size_t K, FILE *f)
{
    enum { ROUNDS = 5, NC = 5 };
    static const size_t Cs[NC] = {4, 8, 16, 32, 64};
    const size_t T = p->T;
    double *q = lab_zeros(x, T * K), *k = lab_zeros(x, T * K), *v = lab_zeros(x, T * K),
           *a = lab_zeros(x, T * K), *b = lab_zeros(x, T * K), *g = lab_zeros(x, T * K),
           *o = lab_zeros(x, T * K), *o_rec = lab_zeros(x, T * K), *ht = lab_zeros(x, K * K),
           *o_simd = lab_zeros(x, T * K);
    for (size_t t = 0; t < T; t++) {
        lab_random_unit(rng, q + t * K, K);
        lab_random_unit(rng, k + t * K, K);
        for (size_t c = 0; c < K; c++) v[t * K + c] = gsl_ran_gaussian(rng, 1.0);
        draw_general(rng, K, p->gmin, a + t * K, b + t * K, g + t * K);
    }
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    kdalab_call call = {.dims = {.B = 1, .T = T, .H = 1, .K = K, .V = K}, .HV = 1,
                        .mech = KDALAB_DPLR, .scale = kdalab_default_scale(K), .opts = &op};
    const kdalab_tensors_f64 tc = {.q = q, .k = k, .v = v, .g = g, .a = a, .b = b, .o = o,
                                   .ht = ht},
                             tr = {.q = q, .k = k, .v = v, .g = g, .a = a, .b = b, .o = o_rec,
                                   .ht = ht},
                             ts = {.q = q, .k = k, .v = v, .g = g, .a = a, .b = b, .o = o_simd,
                                   .ht = ht};
    double t_chunk[NC][ROUNDS], t_rec[ROUNDS], ratio[NC][ROUNDS], err[NC] = {0};
    double t_simd[NC][ROUNDS], ratio_simd[NC][ROUNDS], err_simd[NC] = {0};
    const int nth = omp_get_max_threads();
    omp_set_num_threads(1);
    for (size_t r = 0; r < ROUNDS; r++) {
        call.form = KDALAB_FORM_RECURRENT;
        double t0 = lab_now();
        lab_check(x, kdalab_run_f64(&call, &tr, NULL), "dplr recurrent");
        t_rec[r] = lab_now() - t0;
        call.form = KDALAB_FORM_CHUNK;
        for (size_t i = 0; i < NC; i++) {
            op.chunk = Cs[i];
            op.subchunk = Cs[i] < 16 ? Cs[i] : 16;
            t0 = lab_now();
            lab_check(x, kdalab_run_f64(&call, &tc, NULL), "dplr chunk");
            t_chunk[i][r] = lab_now() - t0;
            ratio[i][r] = t_chunk[i][r] / t_rec[r];
            err[i] = fmax(err[i], lab_rel_err(o, NULL, o_rec, T * K));
            call.impl = KDALAB_IMPL_SIMD;
            t0 = lab_now();
            lab_check(x, kdalab_run_f64(&call, &ts, NULL), "dplr chunk, SIMD path");
            t_simd[i][r] = lab_now() - t0;
            call.impl = KDALAB_IMPL_REFERENCE;
            ratio_simd[i][r] = t_simd[i][r] / t_rec[r];
            err_simd[i] = fmax(err_simd[i], lab_rel_err(o_simd, NULL, o_rec, T * K));
        }
        lab_progress(x, "cost rounds", r + 1, ROUNDS);
    }
    omp_set_num_threads(nth);
    printf("\nThe DPLR chunkwise form's cost against C (float64, K = V = %zu, T = %zu, one "
           "head, one thread; %d alternating rounds with the recurrent form; the reference's "
           "and the SIMD path's, level %s):\n",
           K, T, ROUNDS, kdalab_simd_level_name(kdalab_simd_get_level()));
    const lab_spread rec = lab_spread_of(t_rec, ROUNDS);
    lab_print_spread("  recurrent form", rec, 1e3, 1, "ms");
    for (size_t i = 0; i < NC; i++) {
        const lab_spread sc = lab_spread_of(t_chunk[i], ROUNDS), sr = lab_spread_of(ratio[i], ROUNDS);
        char what[96];
        snprintf(what, sizeof what, "  chunkwise C = %2zu / recurrent (o agrees to %.0e)", Cs[i],
                 err[i]);
        lab_print_spread(what, sr, 1.0, 2, "x");
        const lab_spread ss = lab_spread_of(t_simd[i], ROUNDS),
                         ssr = lab_spread_of(ratio_simd[i], ROUNDS);
        snprintf(what, sizeof what, "  SIMD path  C = %2zu / recurrent (o agrees to %.0e)", Cs[i],
                 err_simd[i]);
        lab_print_spread(what, ssr, 1.0, 3, "x");
        fprintf(f, "%zu\t%zu\t%zu\t%.6e\t%.6e\t%.4f\t%.4f\t%.4f\t%.3e\t%.6e\t%.4f\t%.4f\t%.4f"
                "\t%.3e\n", K, T, Cs[i], sc.median, rec.median, sr.median, sr.lo, sr.hi, err[i],
                ss.median, ssr.median, ssr.lo, ssr.hi, err_simd[i]);
    }
    free(q), free(k), free(v), free(a), free(b), free(g), free(o), free(o_rec), free(ht),
        free(o_simd);
}

/* ---- the verdict ------------------------------------------------------------------------ */

#define ERR_TOL 1e-12 /* "to rounding" in float64 */

static void print_summary(const params *p, const size_t *Ks, const double *id_err,
                          const product_row *rows, size_t n)
{
    printf("\nThe identity (I - b k k^T) Diag(a) = Diag(a) - b k (a * k)^T, %zu draws each:\n",
           p->trials);
    for (int i = 0; i < 2; i++)
        printf("  K = %3zu: max |left - right| / max |left| = %.2e\n", Ks[i], id_err[i]);
    printf("\nThe product of C transitions (selected C; every C in 08_dplr.tsv):\n");
    printf("%4s %4s %5s %11s %11s %11s %11s %11s\n", "K", "C", "rank", "s_C/s_1",
           "s_C+1/s_1", "err UT", "err chunk", "err recur");
    int rank_ok = 1;
    double worst_ut = 0, worst_chunk = 0, worst_rec = 0, worst_dplr = 0, worst_cliff = 0,
           weakest = 1;
    for (size_t i = 0; i < n; i++) {
        const product_row *r = &rows[i];
        size_t want = r->C < r->K ? r->C : r->K;
        rank_ok &= r->rank == want;
        worst_ut = fmax(worst_ut, r->e_ut);
        worst_chunk = fmax(worst_chunk, r->e_chunk);
        worst_rec = fmax(worst_rec, r->e_rec);
        worst_dplr = fmax(worst_dplr, r->e_dplr);
        worst_cliff = fmax(worst_cliff, r->sC1);
        if (r->C <= r->K) weakest = fmin(weakest, r->sC);
        if (r->C == 1 || r->C == 2 || r->C == 4 || r->C % 16 == 0)
            printf("%4zu %4zu %5zu %11.3e %11.3e %11.3e %11.3e %11.3e\n", r->K, r->C, r->rank,
                   r->sC, r->sC1, r->e_ut, r->e_chunk, r->e_rec);
    }
    int id_ok = id_err[0] < ERR_TOL && id_err[1] < ERR_TOL;
    printf("\nVerdict, identity: max error %.1e over K = %zu, %zu. %s\n", fmax(id_err[0], id_err[1]),
           Ks[0], Ks[1], id_ok ? "CONFIRMED (to rounding)." : "NOT CONFIRMED.");
    printf("Verdict, collapse: for every C = 1..%zu the product minus its diagonal part has "
           "numerical rank min(C, K) %s (weakest kept sigma_C/sigma_1 = %.1e, largest "
           "sigma_{C+1}/sigma_1 = %.1e), and one C x C triangular solve reproduces the "
           "product: max error %.1e (WY form), %.1e (kdalab_chunk_f64), %.1e "
           "(kdalab_recurrent_f64), %.1e (the library's DPLR chunk kernel with KDA's a, b). "
           "%s\n",
           p->Cmax, rank_ok ? "at every C" : "NOT at every C", weakest, worst_cliff, worst_ut,
           worst_chunk, worst_rec, worst_dplr,
           rank_ok && worst_ut < ERR_TOL && worst_chunk < ERR_TOL && worst_dplr < ERR_TOL
               ? "CONFIRMED."
               : "NOT CONFIRMED.");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K1 = 64, .K2 = 128, .Cmax = 64, .trials = 100, .T = 1024, .gmin = -0.1,
                .rank_tol = 1e-10};
    lab_init(&x, "08_dplr",
             "KDA's transition is diagonal plus rank one, and a product of C of them is "
             "diagonal plus rank <= C, reproduced by one C x C triangular solve; so is the "
             "general DPLR transition's, by the library's DPLR chunk kernel");
    lab_flag_size(&x, "K1", &p.K1, "first key dimension");
    lab_flag_size(&x, "K2", &p.K2, "second key dimension");
    lab_flag_size(&x, "Cmax", &p.Cmax, "largest number of transitions in a product");
    lab_flag_size(&x, "trials", &p.trials, "random draws for the identity");
    lab_flag_size(&x, "T", &p.T, "positions of the DPLR cost measurement");
    lab_flag_double(&x, "gmin", &p.gmin, "log-decay drawn from U(gmin, 0) per channel");
    lab_flag_double(&x, "rank-tol", &p.rank_tol, "numerical rank: sigma_i > rank-tol * sigma_1");
    lab_parse(&x, argc, argv);
    lab_need(&x, p.K1 >= 1 && p.K1 <= 1024 && p.K2 >= 1 && p.K2 <= 1024, "--K1, --K2",
             "1 <= K1, K2 <= 1024");
    lab_need(&x, p.Cmax >= 1 && p.Cmax <= 4096, "--Cmax", "1 <= Cmax <= 4096");
    lab_need(&x, p.T >= 1 && p.T <= 1048576, "--T", "1 <= T <= 2^20");
    lab_need(&x, p.gmin <= 0.0, "--gmin", "a log-decay <= 0");
    lab_need(&x, p.rank_tol > 0.0, "--rank-tol", "rank-tol > 0");
    gsl_set_error_handler_off();
    gsl_rng *rng = lab_rng(&x);
    const size_t Ks[2] = {p.K1, p.K2};

    static const char *const icols[] = {
        "K", "key dimension",
        "trial", "draw index",
        "beta", "write strength of the draw",
        "err", "max |(I - b k k^T) Diag(a) - (Diag(a) - b k (a*k)^T)| / max |left|, the left "
               "side by a dense matrix product",
        NULL};
    FILE *fi = lab_tsv_open(&x, "08_dplr_identity", icols, "float64; unit k, beta~U(0,1), "
                            "g~U(%g,0), a = exp(g)", p.gmin);
    double id_err[2];
    for (int i = 0; i < 2; i++) {
        id_err[i] = identity(&x, &p, rng, Ks[i], fi);
        fprintf(fi, "\n\n");
    }
    lab_tsv_close(&x, fi);

    static const char *const scols[] = {
        "K", "key dimension",
        "C", "transitions in the product",
        "i", "index of the singular value, 1 = largest",
        "sigma_rel", "sigma_i / sigma_1 of P_C - Diag(gamma_C)",
        NULL};
    FILE *fs = lab_tsv_open(&x, "08_dplr_spectrum", scols, "float64; gsl_linalg_SV_decomp");
    product_row *rows = calloc(2 * p.Cmax, sizeof *rows);
    if (!rows) return 1;
    for (int i = 0; i < 2; i++) products(&x, &p, rng, Ks[i], rows + i * p.Cmax, fs);
    lab_tsv_close(&x, fs);
    write_rows(&x, &p, rows, 2 * p.Cmax);
    print_summary(&p, Ks, id_err, rows, 2 * p.Cmax);

    /* part 3: the general transition, and the cost of its chunkwise form */
    general_row *gen = calloc(2 * p.Cmax, sizeof *gen);
    if (!gen) return 1;
    for (int i = 0; i < 2; i++) general_products(&x, &p, rng, Ks[i], gen + i * p.Cmax);
    static const char *const gcols[] = {
        "K", "key dimension (V = K)",
        "C", "transitions in the product",
        "rank", "numerical rank of P_C - Diag(gamma_C)",
        "sC1", "sigma_{C+1} / sigma_1 (0 when C >= K)",
        "err_chunk", "max|P - P_C| / max|P_C|: the library's DPLR chunk (one chunk of C)",
        "err_recurrent", "the same for its recurrent form",
        NULL};
    FILE *fg = lab_tsv_open(&x, "08_dplr_general", gcols, "float64; RWKV-7's a = -kk, b = kk * "
                            "alpha, alpha~U(0,1); g~U(%g,0); P_C by C dense products", p.gmin);
    int g_rank_ok = 1;
    double g_chunk = 0, g_rec = 0;
    for (size_t i = 0; i < 2 * p.Cmax; i++) {
        const general_row *r = &gen[i];
        g_rank_ok &= r->rank <= (r->C < r->K ? r->C : r->K);
        g_chunk = fmax(g_chunk, r->e_chunk);
        g_rec = fmax(g_rec, r->e_rec);
        fprintf(fg, "%zu\t%zu\t%zu\t%.6e\t%.3e\t%.3e\n", r->K, r->C, r->rank, r->sC1,
                r->e_chunk, r->e_rec);
        if (i + 1 == p.Cmax) fprintf(fg, "\n\n");
    }
    lab_tsv_close(&x, fg);
    printf("\nVerdict, the general transition (RWKV-7's a, b, not the delta rule's): for every "
           "C = 1..%zu the product minus its diagonal part has rank <= C %s, and the library's "
           "DPLR chunk kernel (one chunk of C: four decayed products, one triangular solve) "
           "reproduces the dense chain to %.1e (its recurrent form %.1e). %s\n",
           p.Cmax, g_rank_ok ? "at every C" : "NOT at every C", g_chunk, g_rec,
           g_rank_ok && g_chunk < ERR_TOL && g_rec < ERR_TOL ? "CONFIRMED." : "NOT CONFIRMED.");
    free(gen);
    static const char *const ccols[] = {
        "K", "key and value dimension",
        "T", "positions",
        "C", "chunk size",
        "chunk_seconds", "median seconds of the chunkwise form (the reference, float64)",
        "recurrent_seconds", "median seconds of the recurrent form, same rounds",
        "ratio", "median of chunk / recurrent over the rounds",
        "ratio_lo", "its smallest round",
        "ratio_hi", "its largest round",
        "err", "max |o_chunk - o_recurrent| / max |o_recurrent|",
        "simd_seconds", "median seconds of the SIMD path's chunkwise form (float64)",
        "simd_ratio", "median of SIMD chunk / recurrent over the rounds",
        "simd_ratio_lo", "its smallest round",
        "simd_ratio_hi", "its largest round",
        "simd_err", "max |o_simd - o_recurrent| / max |o_recurrent|",
        NULL};
    FILE *fc = lab_tsv_open(&x, "08_dplr_cost", ccols, "the DPLR forms on this machine "
                            "(kdalab info), RWKV-7's a, b; 5 alternating rounds");
    chunk_cost(&x, &p, rng, p.K1, fc);
    lab_tsv_close(&x, fc);
    printf("\n%s: %.1f s; results in %s/08_dplr*.tsv\n", x.name, lab_elapsed(&x), x.out);
    free(rows);
    gsl_rng_free(rng);
    return 0;
}
