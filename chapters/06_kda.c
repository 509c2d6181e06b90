/*
 * 06_kda.c — chapter 6: Kimi Delta Attention, a half-life per key channel.
 *
 *   S' = Diag(a_t) S_{t-1},  a_t = exp(g_t) in (0,1)^K,  then the DeltaNet update on S'
 *                                                        (REFERENCE.md, chapter 06)
 *
 * Row c of S decays by its own a_t[c]. In the chunk gamma is a K-vector, so
 * there is no C x C mask: the decay moves into rescaled rows q~ = q * gamma,
 * k~ = k / gamma, restarted at every sub-chunk boundary so 1/gamma stays small.
 *
 * Run: make chapters && bin/chapters/06_kda   (rows "name index values", %.17g)
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

/* One token: decay each row c by a[c] = exp(g[c]), correct what k retrieves towards v, read. */
static void step(double S[K][V], const double q[K], const double k[K], const double v[V],
                 const double g[K], double beta, double s, double o[V])
{
    double u[V];
    for (int c = 0; c < K; c++)                 /* decay: S' = Diag(a) S */
        for (int d = 0; d < V; d++) S[c][d] *= exp(g[c]);
    for (int d = 0; d < V; d++) {               /* u = beta (v - S'^T k): the error */
        u[d] = v[d];
        for (int c = 0; c < K; c++) u[d] -= S[c][d] * k[c];
        u[d] *= beta;
    }
    for (int c = 0; c < K; c++)                 /* write: S <- S' + k u^T */
        for (int d = 0; d < V; d++) S[c][d] += k[c] * u[d];
    for (int d = 0; d < V; d++) {               /* read: o = s S^T q */
        o[d] = 0;
        for (int c = 0; c < K; c++) o[d] += s * S[c][d] * q[c];
    }
}

/*
 * One chunk of n <= C positions from t0, REFERENCE.md "Chunkwise form" steps
 * 1-7. S enters as the state before the chunk and leaves as the state after
 * it; U becomes V_new in place. Gamma_r sums g inside the chunk, now a
 * K-vector: instead of a C x C x K mask, each sub-chunk rescales its rows
 * against its first boundary b, q~_i = q_i gamma_i/gamma_b, k~_j = k_j gamma_b/gamma_j,
 * so q~_i . k~_j = sum_c q_i k_j exp(Gamma_i - Gamma_j) and 1/gamma never grows
 * beyond one sub-chunk's decay. sub = C is the chapter's plain rescaling.
 */
static void chunk_step(const struct inputs *in, int t0, int n, int sub, double s,
                       double S[K][V], double o[T][V])
{
    const double (*q)[K] = in->q + t0, (*k)[K] = in->k + t0, (*v)[V] = in->v + t0;
    const double *beta = in->beta + t0;
    double A[C][C] = {{0}}, Aqk[C][C] = {{0}}, Tm[C][C] = {{0}}, W[C][K] = {{0}};
    double U[C][V] = {{0}}, G[C][K];

    for (int r = 0; r < n; r++)                 /* Gamma_r, per channel */
        for (int c = 0; c < K; c++) G[r][c] = (r ? G[r - 1][c] : 0) + in->gk[t0 + r][c];
    for (int b = 0; b < n; b += sub) {          /* sub-chunk rows b..e-1: gamma restarts at b */
        int e = b + sub < n ? b + sub : n;
        double Gb[K], kt[C][K];                 /* Gamma at the boundary; k~ = k gamma_b / gamma */
        for (int c = 0; c < K; c++) Gb[c] = b ? G[b - 1][c] : 0;
        for (int j = 0; j < e; j++)
            for (int c = 0; c < K; c++) kt[j][c] = k[j][c] * exp(Gb[c] - G[j][c]);
        for (int i = b; i < e; i++)             /* 1. A_kk = strictly lower beta_i k_i . k~_j */
            for (int j = 0; j <= i; j++)        /* 5. A_qk = lower s q~_i . k~_j             */
                for (int c = 0; c < K; c++) {
                    double up = exp(G[i][c] - Gb[c]);   /* gamma_i / gamma_b: q~ = q up */
                    if (j < i) A[i][j] += beta[i] * k[i][c] * up * kt[j][c];
                    Aqk[i][j] += s * q[i][c] * up * kt[j][c];
                }
    }
    for (int i = 0; i < n; i++)                 /* 2. UT transform: T = (I + A_kk)^-1 Diag(beta), */
        for (int j = 0; j <= i; j++) {          /*    by forward substitution                    */
            Tm[i][j] = i == j ? beta[i] : 0;
            for (int m = j; m < i; m++) Tm[i][j] -= A[i][m] * Tm[m][j];
        }
    for (int i = 0; i < n; i++)                 /* 3. W = T (gamma K), U = T V */
        for (int j = 0; j <= i; j++) {
            for (int c = 0; c < K; c++) W[i][c] += Tm[i][j] * exp(G[j][c]) * k[j][c];
            for (int d = 0; d < V; d++) U[i][d] += Tm[i][j] * v[j][d];
        }
    for (int i = 0; i < n; i++)                 /* 4. V_new = U - W S */
        for (int d = 0; d < V; d++)
            for (int c = 0; c < K; c++) U[i][d] -= W[i][c] * S[c][d];
    for (int i = 0; i < n; i++)                 /* 6. O = s (gamma Q) S + A_qk V_new */
        for (int d = 0; d < V; d++) {
            o[t0 + i][d] = 0;
            for (int c = 0; c < K; c++) o[t0 + i][d] += s * exp(G[i][c]) * q[i][c] * S[c][d];
            for (int j = 0; j <= i; j++) o[t0 + i][d] += Aqk[i][j] * U[j][d];
        }
    for (int c = 0; c < K; c++)                 /* 7. S <- Diag(gamma_n) S              */
        for (int d = 0; d < V; d++) {           /*    + (exp(Gamma_n - Gamma) K)^T V_new */
            S[c][d] *= exp(G[n - 1][c]);
            for (int i = 0; i < n; i++) S[c][d] += exp(G[n - 1][c] - G[i][c]) * k[i][c] * U[i][d];
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
           Kc * Vc * 8,                         /* S, at any context length               */
           7 * Kc * Vc + 3 * Vc + Kc,           /* a = exp(g), Diag(a) S, then DeltaNet   */
           0.0);                                /* nothing grows with the context         */
}

int main(void)
{
    static struct inputs in;
    double o[T][V], S[K][V] = {{0}}, oc[T][V], Sc[K][V] = {{0}};
    const double s = 1.0 / sqrt(K);

    make_inputs(&in);
    printf("# chapter 6, KDA, C=%d, sub-chunks of %d: T=%d K=%d V=%d, scale %g\n",
           C, SUB, T, K, V, s);
    for (int t = 0; t < T; t++)                 /* the recurrent form, S_0 = 0 */
        step(S, in.q[t], in.k[t], in.v[t], in.gk[t], in.beta[t], s, o[t]);
    print_rows("o", T, V, &o[0][0]);
    print_rows("S", K, V, &S[0][0]);
    for (int t0 = 0; t0 < T; t0 += C)           /* the chunkwise form; the last chunk is short */
        chunk_step(&in, t0, T - t0 < C ? T - t0 : C, SUB, s, Sc, oc);
    print_rows("o_chunk", T, V, &oc[0][0]);
    print_rows("S_chunk", K, V, &Sc[0][0]);
    printf("# chunkwise vs recurrent: max |o difference| %.1e, max |S difference| %.1e\n",
           max_diff(&oc[0][0], &o[0][0], T * V), max_diff(&Sc[0][0], &S[0][0], K * V));
    printf("# half-lives in tokens at t = 0, per channel:");
    for (int c = 0; c < K; c++) printf(" %.1f", -log(2.0) / in.gk[0][c]);
    printf("\n");
    print_costs();
    return 0;
}
