/*
 * 07_dplr.c — the boundary: the general diagonal-plus-low-rank transition.
 *
 *   S_t = (Diag(exp g_t) + b_t a_t^T) S_{t-1} + k_t v_t^T     (REFERENCE.md "The boundary")
 *
 * KDA's step is this with a = -exp(g) * k, b = beta k and the write (beta k) v^T:
 * main builds those a, b from chapter 6's inputs, so o and S below are 06_kda's
 * numbers. In the chunk the correction is no longer one UT transform of k
 * against itself but four decayed products (a.b, a.k, q.b, q.k) and one
 * triangular solve for u_i = S_{i-1}^T a_i, what the low-rank term reads.
 *
 * Run: make chapters && bin/chapters/07_dplr   (rows "name index values", %.17g)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { T = 10, K = 4, V = 3 }; /* positions, key (and query) dim, value dim; one head */
enum { C = 4, SUB = 2 };       /* chunk size (chunks of 4, 4, 2) and sub-chunk size  */

/* The worked example: the same inputs in every chapter, from a fixed formula. */
struct inputs {
    double q[T][K], k[T][K], v[T][V]; /* rows of q and k have unit length          */
    double beta[T];                   /* write strength in (0, 1)                 */
    double g1[T], gk[T][K];           /* log-decay per position, per key channel  */
};

static double input(int stream, int t, int c)
{
    return sin(0.9 * t + 1.7 * c + 2.3 * stream + 0.31 * t * c);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void make_inputs(struct inputs *in)
{
    for (int t = 0; t < T; t++) {
        double nq = 0, nk = 0;
        for (int c = 0; c < K; c++) {
            in->q[t][c] = input(0, t, c), nq += in->q[t][c] * in->q[t][c];
            in->k[t][c] = input(1, t, c), nk += in->k[t][c] * in->k[t][c];
            in->gk[t][c] = log(sigmoid(1.0 + 2.0 * c + input(5, t, c))); /* channel 3 slowest */
        }
        for (int c = 0; c < K; c++) in->q[t][c] /= sqrt(nq), in->k[t][c] /= sqrt(nk);
        for (int d = 0; d < V; d++) in->v[t][d] = input(2, t, d);
        in->beta[t] = sigmoid(input(3, t, 0));
        in->g1[t] = log(sigmoid(3.0 + input(4, t, 0)));
    }
}

static void print_rows(const char *name, int rows, int cols, const double *x)
{
    for (int r = 0; r < rows; r++) {
        printf("%-10s %2d", name, r);
        for (int c = 0; c < cols; c++) printf(" %24.17g", x[r * cols + c]);
        printf("\n");
    }
}

/* The low-rank term of each position, and the key it writes with. */
struct lowrank {
    double a[T][K], b[T][K], kw[T][K];
};

/* One token: r = S^T a (the low-rank read), decay each row c by exp(g[c]), add b r^T + k v^T, read. */
static void step(double S[K][V], const double q[K], const double k[K], const double v[V],
                 const double g[K], const double a[K], const double b[K], double s, double o[V])
{
    double r[V];
    for (int d = 0; d < V; d++) {               /* r = S_{t-1}^T a: before the decay */
        r[d] = 0;
        for (int c = 0; c < K; c++) r[d] += a[c] * S[c][d];
    }
    for (int c = 0; c < K; c++)                 /* decay: S' = Diag(exp g) S */
        for (int d = 0; d < V; d++) S[c][d] *= exp(g[c]);
    for (int c = 0; c < K; c++)                 /* write: S <- S' + b r^T + k v^T */
        for (int d = 0; d < V; d++) S[c][d] += b[c] * r[d] + k[c] * v[d];
    for (int d = 0; d < V; d++) {               /* read: o = s S^T q */
        o[d] = 0;
        for (int c = 0; c < K; c++) o[d] += s * S[c][d] * q[c];
    }
}

/*
 * One chunk of n <= C positions from t0, REFERENCE.md "The boundary" steps
 * 1-5. S enters as the state before the chunk and leaves as the state after
 * it. Gamma_r sums g inside the chunk per channel; every product is formed
 * pairwise, sum_c x_i[c] y_j[c] exp(Gamma_i'[c] - Gamma_j[c]) with i' = i - 1
 * (reads of a, one position behind) or i, an exponent <= 0.
 */
static void chunk_step(const struct inputs *in, const struct lowrank *lr, int t0, int n,
                       double s, double S[K][V], double o[T][V])
{
    const double (*q)[K] = in->q + t0, (*k)[K] = lr->kw + t0, (*v)[V] = in->v + t0;
    const double (*a)[K] = lr->a + t0, (*b)[K] = lr->b + t0;
    double Aab[C][C] = {{0}}, Aak[C][C] = {{0}}, Aqb[C][C] = {{0}}, Aqk[C][C] = {{0}};
    double U[C][V] = {{0}}, G[C][K];

    for (int r = 0; r < n; r++)                 /* Gamma_r, per channel */
        for (int c = 0; c < K; c++) G[r][c] = (r ? G[r - 1][c] : 0) + in->gk[t0 + r][c];
    for (int i = 0; i < n; i++)                 /* 1-2. the four products */
        for (int j = 0; j <= i; j++)
            for (int c = 0; c < K; c++) {
                double in_i = exp(G[i][c] - G[j][c]);           /* decay j -> i */
                double before = i ? exp(G[i - 1][c] - G[j][c]) : 0; /* decay j -> i - 1 */
                if (j < i) Aab[i][j] += a[i][c] * b[j][c] * before;
                if (j < i) Aak[i][j] += a[i][c] * k[j][c] * before;
                Aqb[i][j] += q[i][c] * b[j][c] * in_i;
                Aqk[i][j] += q[i][c] * k[j][c] * in_i;
            }
    for (int i = 0; i < n; i++)                 /* 3. (I - A_ab) U = (a gamma_{i-1}) S + A_ak V, */
        for (int d = 0; d < V; d++) {           /*    by forward substitution                   */
            for (int c = 0; c < K; c++) U[i][d] += a[i][c] * (i ? exp(G[i - 1][c]) : 1) * S[c][d];
            for (int j = 0; j < i; j++) U[i][d] += Aak[i][j] * v[j][d] + Aab[i][j] * U[j][d];
        }
    for (int i = 0; i < n; i++)                 /* 4. O = s ((gamma Q) S + A_qb U + A_qk V) */
        for (int d = 0; d < V; d++) {
            o[t0 + i][d] = 0;
            for (int c = 0; c < K; c++) o[t0 + i][d] += exp(G[i][c]) * q[i][c] * S[c][d];
            for (int j = 0; j <= i; j++) o[t0 + i][d] += Aqb[i][j] * U[j][d] + Aqk[i][j] * v[j][d];
            o[t0 + i][d] *= s;
        }
    for (int c = 0; c < K; c++)                 /* 5. S <- Diag(gamma_n) S + (exp(Gamma_n -  */
        for (int d = 0; d < V; d++) {           /*    Gamma) B)^T U + (exp(Gamma_n - Gamma) K)^T V */
            S[c][d] *= exp(G[n - 1][c]);
            for (int i = 0; i < n; i++)
                S[c][d] += exp(G[n - 1][c] - G[i][c]) * (b[i][c] * U[i][d] + k[i][c] * v[i][d]);
        }
}

static double max_diff(const double *a, const double *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* One head of one layer at K = V = 128 and 8k context, 8-byte numbers; multiply-add = 2 flops. */
static void print_costs(void)
{
    const double Kc = 128, Vc = 128, N = 8192;
    printf("cost K=V=128 N=%.0f state_bytes %.0f flops_per_token %.0f"
           " cache_bytes_per_token %.0f\n", N,
           Kc * Vc * 8,                         /* S, at any context length                  */
           9 * Kc * Vc + Kc,                    /* exp(g), S^T a, Diag S, b r^T + k v^T, read */
           0.0);                                /* nothing grows with the context            */
}

int main(void)
{
    static struct inputs in;
    static struct lowrank lr;
    double o[T][V], S[K][V] = {{0}}, oc[T][V], Sc[K][V] = {{0}};
    const double s = 1.0 / sqrt(K);

    make_inputs(&in);
    for (int t = 0; t < T; t++)                 /* KDA as a DPLR: a = -exp(g) k, b = beta k */
        for (int c = 0; c < K; c++) {
            lr.a[t][c] = -exp(in.gk[t][c]) * in.k[t][c];
            lr.b[t][c] = lr.kw[t][c] = in.beta[t] * in.k[t][c];
        }
    printf("# the DPLR boundary, C=%d: T=%d K=%d V=%d, scale %g (a, b: KDA's)\n", C, T, K, V, s);
    for (int t = 0; t < T; t++)                 /* the recurrent form, S_0 = 0 */
        step(S, in.q[t], lr.kw[t], in.v[t], in.gk[t], lr.a[t], lr.b[t], s, o[t]);
    print_rows("o", T, V, &o[0][0]);
    print_rows("S", K, V, &S[0][0]);
    for (int t0 = 0; t0 < T; t0 += C)           /* the chunkwise form; the last chunk is short */
        chunk_step(&in, &lr, t0, T - t0 < C ? T - t0 : C, s, Sc, oc);
    print_rows("o_chunk", T, V, &oc[0][0]);
    print_rows("S_chunk", K, V, &Sc[0][0]);
    printf("# chunkwise vs recurrent: max |o difference| %.1e, max |S difference| %.1e\n",
           max_diff(&oc[0][0], &o[0][0], T * V), max_diff(&Sc[0][0], &S[0][0], K * V));
    print_costs();
    return 0;
}
