/*
 * 06_hybrid.c — chapter 6: do not choose, interleave (3 KDA : 1 attention).
 *
 *   layer l:  x <- x + mix_l(x W_q, x W_k, x W_v) W_o,   mix = KDA, KDA, KDA, attention
 *                                              (the chapter's Kimi Linear stack, no FFN)
 *
 * Three KDA layers carry fixed-size states; every fourth layer keeps a KV
 * cache and does exact softmax retrieval, with no positional encoding: the
 * KDA decays already supply position. Weights are small fixed numbers.
 *
 * Run: make chapters && bin/chapters/06_hybrid   (rows "name index values", %.17g)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { T = 10, K = 4, V = 4 }; /* positions, key (and query) dim, value dim; one head */
enum { D = K, L = 4 };         /* d_model (one head, K = V = D) and layers           */
#define LOWER (-1.0)           /* KDA gate g = LOWER * sigmoid(x W_g + b_g), <= 0    */

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

/* Causal softmax attention over every token so far (chapter 1), NoPE. */
static void attention(double q[T][K], double k[T][K], double v[T][V], double s, double o[T][V])
{
    for (int t = 0; t < T; t++) {
        double w[T], m = -INFINITY, z = 0;
        for (int j = 0; j <= t; j++) {          /* scores s q_t . k_j */
            w[j] = 0;
            for (int c = 0; c < K; c++) w[j] += s * q[t][c] * k[j][c];
            m = fmax(m, w[j]);
        }
        for (int j = 0; j <= t; j++) w[j] = exp(w[j] - m), z += w[j]; /* softmax */
        for (int d = 0; d < V; d++) {           /* o_t = sum_j softmax_j v_j */
            o[t][d] = 0;
            for (int j = 0; j <= t; j++) o[t][d] += w[j] / z * v[j][d];
        }
    }
}

/* Layer l's fixed weights, role r = 0 W_q, 1 W_k, 2 W_v, 3 W_g, 4 W_beta, 5 W_o; y = x W. */
static double weight(int l, int r, int i, int j) { return 0.5 * input(6 + 6 * l + r, i, j); }

/* out[t][j] = sum_i x[t][i] W[i][j] for W = weight(l, r, ., .), D x cols. */
static void project(double x[T][D], int l, int r, int cols, double *out)
{
    for (int t = 0; t < T; t++)
        for (int j = 0; j < cols; j++) {
            out[t * cols + j] = 0;
            for (int i = 0; i < D; i++) out[t * cols + j] += x[t][i] * weight(l, r, i, j);
        }
}

static void normalize(double x[K])
{
    double n = 0;
    for (int c = 0; c < K; c++) n += x[c] * x[c];
    for (int c = 0; c < K; c++) x[c] /= sqrt(n);
}

/* Layer l: x <- x + o W_o. KDA (state S) for l = 0, 1, 2; attention for l = 3. */
static void layer(int l, double x[T][D], double s, double S[K][V])
{
    double q[T][K], k[T][K], v[T][V], g[T][K], beta[T], o[T][V];
    project(x, l, 0, K, &q[0][0]);
    project(x, l, 1, K, &k[0][0]);
    project(x, l, 2, V, &v[0][0]);
    project(x, l, 3, K, &g[0][0]);
    project(x, l, 4, 1, beta);
    if (l % 4 == 3)                             /* every fourth layer: exact retrieval */
        attention(q, k, v, s, o);
    else
        for (int t = 0; t < T; t++) {           /* unit q, k; gates b_g = 2c - 5: slow to fast */
            normalize(q[t]), normalize(k[t]);
            for (int c = 0; c < K; c++) g[t][c] = LOWER * sigmoid(g[t][c] + 2.0 * c - 5.0);
            beta[t] = sigmoid(beta[t]);
            step(S, q[t], k[t], v[t], g[t], beta[t], s, o[t]);
        }
    for (int t = 0; t < T; t++)                 /* the residual add: x <- x + o W_o */
        for (int j = 0; j < D; j++)
            for (int e = 0; e < V; e++) x[t][j] += o[t][e] * weight(l, 5, e, j);
}

/* One head of one layer at K = V = 128 and 8k context, 8-byte numbers; multiply-add = 2 flops.
 * The hybrid's numbers are the average layer of a KDA, KDA, KDA, attention group. */
static void print_costs(void)
{
    const double Kc = 128, Vc = 128, N = 8192;
    printf("cost K=V=128 N=%.0f state_bytes %.0f flops_per_token %.0f"
           " cache_bytes_per_token %.0f\n", N,
           (3 * Kc * Vc + N * (Kc + Vc)) * 8 / 4, /* 3 states, 1 cache at 8k        */
           (3 * (7 * Kc * Vc + 3 * Vc + Kc)       /* 3 KDA layers                   */
            + N * (2 * Kc + 3 + 2 * Vc) + Vc) / 4,/* 1 attention layer              */
           (Kc + Vc) * 8 / 4);                    /* one key and value, 1 layer in 4 */
}

int main(void)
{
    static struct inputs in;
    double x[T][D], S[L][K][V] = {{{0}}};
    const double s = 1.0 / sqrt(K);

    make_inputs(&in);
    printf("# chapter 6, hybrid of %d layers, d_model=%d: T=%d K=%d V=%d, scale %g\n",
           L, D, T, K, V, s);
    memcpy(x, in.q, sizeof x);                  /* the tokens entering the stack: unit rows */
    for (int l = 0; l < L; l++) layer(l, x, s, S[l]);
    print_rows("x_out", T, D, &x[0][0]);
    print_rows("S_layer0", K, V, &S[0][0][0]);
    print_rows("S_layer1", K, V, &S[1][0][0]);
    print_rows("S_layer2", K, V, &S[2][0][0]);
    printf("# memory after %d tokens: 3 states of %d numbers and a cache of %d numbers,"
           " %d more per token\n", T, K * V, T * (K + V), K + V);
    print_costs();
    return 0;
}
