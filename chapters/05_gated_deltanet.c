/*
 * 05_gated_deltanet.c — chapter 5: one dial for forgetting.
 *
 *   S' = alpha_t S_{t-1},  alpha_t = exp(g_t) in (0,1),  then the DeltaNet update on S'
 *                                                        (REFERENCE.md, chapter 05)
 *
 * The whole state fades by one scalar per token, so the model can bulk-clear
 * (alpha -> 0) as well as overwrite. In the chunk the decay between positions
 * j <= i is gamma_i / gamma_j, one C x C mask multiplied into the scores.
 *
 * Run: make chapters && bin/chapters/05_gated_deltanet   (rows "name index values", %.17g)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { T = 10, K = 4, V = 3 }; /* positions, key (and query) dim, value dim; one head */
enum { C = 4 };                /* chunk size: chunks of 4, 4 and 2                   */

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

/* One token: decay S by alpha = exp(g), correct what k retrieves towards v, read. */
static void step(double S[K][V], const double q[K], const double k[K], const double v[V],
                 double g, double beta, double s, double o[V])
{
    double u[V];
    for (int c = 0; c < K; c++)                 /* decay: S' = alpha S */
        for (int d = 0; d < V; d++) S[c][d] *= exp(g);
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
 * it; U becomes V_new in place. Gamma_r sums g inside the chunk (a scalar per
 * position), so the decay between positions j <= i is one C x C mask
 * D[i][j] = gamma_i / gamma_j = exp(Gamma_i - Gamma_j), multiplied into the scores.
 */
static void chunk_step(const struct inputs *in, int t0, int n, double s,
                       double S[K][V], double o[T][V])
{
    const double (*q)[K] = in->q + t0, (*k)[K] = in->k + t0, (*v)[V] = in->v + t0;
    const double *beta = in->beta + t0;
    double A[C][C] = {{0}}, Aqk[C][C] = {{0}}, Tm[C][C] = {{0}}, W[C][K] = {{0}};
    double U[C][V] = {{0}}, G[C], D[C][C];

    for (int r = 0; r < n; r++) G[r] = (r ? G[r - 1] : 0) + in->g1[t0 + r]; /* Gamma_r */
    for (int i = 0; i < n; i++)                 /* the mask D = gamma_i / gamma_j */
        for (int j = 0; j <= i; j++) D[i][j] = exp(G[i] - G[j]);
    for (int i = 0; i < n; i++)                 /* 1. A_kk = strictly lower beta_i k_i . k_j D */
        for (int j = 0; j <= i; j++)            /* 5. A_qk = lower s q_i . k_j D              */
            for (int c = 0; c < K; c++) {
                if (j < i) A[i][j] += beta[i] * k[i][c] * k[j][c] * D[i][j];
                Aqk[i][j] += s * q[i][c] * k[j][c] * D[i][j];
            }
    for (int i = 0; i < n; i++)                 /* 2. UT transform: T = (I + A_kk)^-1 Diag(beta), */
        for (int j = 0; j <= i; j++) {          /*    by forward substitution                    */
            Tm[i][j] = i == j ? beta[i] : 0;
            for (int m = j; m < i; m++) Tm[i][j] -= A[i][m] * Tm[m][j];
        }
    for (int i = 0; i < n; i++)                 /* 3. W = T (gamma K), U = T V */
        for (int j = 0; j <= i; j++) {
            for (int c = 0; c < K; c++) W[i][c] += Tm[i][j] * exp(G[j]) * k[j][c];
            for (int d = 0; d < V; d++) U[i][d] += Tm[i][j] * v[j][d];
        }
    for (int i = 0; i < n; i++)                 /* 4. V_new = U - W S */
        for (int d = 0; d < V; d++)
            for (int c = 0; c < K; c++) U[i][d] -= W[i][c] * S[c][d];
    for (int i = 0; i < n; i++)                 /* 6. O = s (gamma Q) S + A_qk V_new */
        for (int d = 0; d < V; d++) {
            o[t0 + i][d] = 0;
            for (int c = 0; c < K; c++) o[t0 + i][d] += s * exp(G[i]) * q[i][c] * S[c][d];
            for (int j = 0; j <= i; j++) o[t0 + i][d] += Aqk[i][j] * U[j][d];
        }
    for (int c = 0; c < K; c++)                 /* 7. S <- gamma_n S                    */
        for (int d = 0; d < V; d++) {           /*    + (exp(Gamma_n - Gamma) K)^T V_new */
            S[c][d] *= exp(G[n - 1]);
            for (int i = 0; i < n; i++) S[c][d] += exp(G[n - 1] - G[i]) * k[i][c] * U[i][d];
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
           7 * Kc * Vc + 3 * Vc + 1,            /* alpha = exp(g), alpha S, then DeltaNet */
           0.0);                                /* nothing grows with the context         */
}

int main(void)
{
    static struct inputs in;
    double o[T][V], S[K][V] = {{0}}, oc[T][V], Sc[K][V] = {{0}};
    const double s = 1.0 / sqrt(K);

    make_inputs(&in);
    printf("# chapter 5, Gated DeltaNet, C=%d: T=%d K=%d V=%d, scale %g\n",
           C, T, K, V, s);
    for (int t = 0; t < T; t++)                 /* the recurrent form, S_0 = 0 */
        step(S, in.q[t], in.k[t], in.v[t], in.g1[t], in.beta[t], s, o[t]);
    print_rows("o", T, V, &o[0][0]);
    print_rows("S", K, V, &S[0][0]);
    for (int t0 = 0; t0 < T; t0 += C)           /* the chunkwise form; the last chunk is short */
        chunk_step(&in, t0, T - t0 < C ? T - t0 : C, s, Sc, oc);
    print_rows("o_chunk", T, V, &oc[0][0]);
    print_rows("S_chunk", K, V, &Sc[0][0]);
    printf("# chunkwise vs recurrent: max |o difference| %.1e, max |S difference| %.1e\n",
           max_diff(&oc[0][0], &o[0][0], T * V), max_diff(&Sc[0][0], &S[0][0], K * V));
    printf("# half-life in tokens at t = 0: %.1f, the same for every channel\n",
           -log(2.0) / in.g1[0]);
    print_costs();
    return 0;
}
