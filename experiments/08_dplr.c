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
 *            kdalab_recurrent_f64 on v = 0, h0 = I: their final state is P_C.
 * Each form is compared with the dense chain: max |X - P_C| / max |P_C|.
 *
 * Outputs (DIR = --out):
 *   08_dplr.tsv           per (K, C): rank, the cliff, the errors
 *   08_dplr_spectrum.tsv  per (K, C, i): sigma_i / sigma_1 of P_C - Diag(gamma_C)
 *   08_dplr_identity.tsv  per K: the identity's error over the trials
 */
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
    size_t K1, K2, Cmax, trials;
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

/* max |X - Y| / max |Y| over n values. */
static double rel_err(const double *X, const double *Y, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(X[i] - Y[i]));
        den = fmax(den, fabs(Y[i]));
    }
    return den > 0.0 ? num / den : num;
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
        double e = rel_err(R, L, K * K);
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

typedef struct {
    size_t K, C, rank;
    double s1, sC, sC1;     /* sigma_1, sigma_C / sigma_1, sigma_{C+1} / sigma_1 (0 if C >= K) */
    double e_ut, e_chunk, e_rec;
} product_row;

/* Every C = 1..Cmax for one K: rows[C-1]; the spectra go to fs. */
static void products(lab_ctx *x, const params *p, gsl_rng *rng, size_t K, product_row *rows,
                     FILE *fs)
{
    size_t Cm = p->Cmax;
    double *k = lab_zeros(x, Cm * K), *g = lab_zeros(x, Cm * K), *beta = lab_zeros(x, Cm);
    for (size_t t = 0; t < Cm; t++) draw(rng, K, p->gmin, k + t * K, beta + t, g + t * K);
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
        row->e_ut = rel_err(X, P, K * K);
        library_product(x, k, g, beta, C, K, 1, X);
        row->e_chunk = rel_err(X, P, K * K);
        library_product(x, k, g, beta, C, K, 0, X);
        row->e_rec = rel_err(X, P, K * K);
        lab_progress(x, "products", C, Cm);
    }
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
        NULL};
    FILE *f = lab_tsv_open(x, "08_dplr", cols,
                           "float64; unit k, beta~U(0,1), g~U(%g,0) per channel; rank_tol=%g; "
                           "P_C by C dense K x K products", p->gmin, p->rank_tol);
    for (size_t i = 0; i < n; i++) {
        const product_row *r = &rows[i];
        fprintf(f, "%zu\t%zu\t%zu\t%.6e\t%.6e\t%.6e\t%.3e\t%.3e\t%.3e\n", r->K, r->C, r->rank,
                r->s1, r->sC, r->sC1, r->e_ut, r->e_chunk, r->e_rec);
        if (i + 1 < n && rows[i + 1].K != r->K) fprintf(f, "\n\n");
    }
    lab_tsv_close(x, f);
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
    double worst_ut = 0, worst_chunk = 0, worst_rec = 0, worst_cliff = 0, weakest = 1;
    for (size_t i = 0; i < n; i++) {
        const product_row *r = &rows[i];
        size_t want = r->C < r->K ? r->C : r->K;
        rank_ok &= r->rank == want;
        worst_ut = fmax(worst_ut, r->e_ut);
        worst_chunk = fmax(worst_chunk, r->e_chunk);
        worst_rec = fmax(worst_rec, r->e_rec);
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
           "(kdalab_recurrent_f64). %s\n",
           p->Cmax, rank_ok ? "at every C" : "NOT at every C", weakest, worst_cliff, worst_ut,
           worst_chunk, worst_rec,
           rank_ok && worst_ut < ERR_TOL && worst_chunk < ERR_TOL ? "CONFIRMED."
                                                                  : "NOT CONFIRMED.");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.K1 = 64, .K2 = 128, .Cmax = 64, .trials = 100, .gmin = -0.1, .rank_tol = 1e-10};
    lab_init(&x, "08_dplr",
             "KDA's transition is diagonal plus rank one, and a product of C of them is "
             "diagonal plus rank <= C, reproduced by one C x C triangular solve");
    lab_flag_size(&x, "K1", &p.K1, "first key dimension");
    lab_flag_size(&x, "K2", &p.K2, "second key dimension");
    lab_flag_size(&x, "Cmax", &p.Cmax, "largest number of transitions in a product");
    lab_flag_size(&x, "trials", &p.trials, "random draws for the identity");
    lab_flag_double(&x, "gmin", &p.gmin, "log-decay drawn from U(gmin, 0) per channel");
    lab_flag_double(&x, "rank-tol", &p.rank_tol, "numerical rank: sigma_i > rank-tol * sigma_1");
    lab_parse(&x, argc, argv);
    if (p.K1 < 1 || p.K2 < 1 || p.K1 > 1024 || p.K2 > 1024 || p.Cmax < 1 || p.Cmax > 4096 ||
        !(p.gmin <= 0.0) || !(p.rank_tol > 0.0)) {
        fprintf(stderr, "%s: need 1 <= K1, K2 <= 1024, 1 <= Cmax <= 4096, gmin <= 0, "
                        "rank-tol > 0\n", x.name);
        return 2;
    }
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
    printf("\n%s: %.1f s; results in %s/08_dplr*.tsv\n", x.name, lab_elapsed(&x), x.out);
    free(rows);
    gsl_rng_free(rng);
    return 0;
}
