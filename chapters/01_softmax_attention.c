/*
 * 01_softmax_attention.c — chapter 1: softmax attention keeps everything.
 *
 *   o_t = sum_{j<=t} softmax_j(s q_t . k_j) v_j                (REFERENCE.md, chapter 01)
 *
 * The memory is the KV cache: every key and value seen so far, one more row
 * each token. Reading it costs O(t d) per token; nothing is ever overwritten,
 * so recall is exact. Causal, no positional encoding (NoPE).
 *
 * Run: make chapters && bin/chapters/01_softmax_attention   (rows "name index values", %.17g)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { T = 10, K = 4, V = 3 }; /* positions, key (and query) dim, value dim; one head */

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

/*
 * Token t arrives: its k_t, v_t join the cache, then q_t reads all t + 1 rows.
 * The softmax subtracts the largest score first, so no exp() can overflow.
 */
static void attention(const struct inputs *in, double s, double o[T][V])
{
    for (int t = 0; t < T; t++) {
        double w[T], m = -INFINITY, z = 0;
        for (int j = 0; j <= t; j++) {          /* scores s q_t . k_j */
            w[j] = 0;
            for (int c = 0; c < K; c++) w[j] += s * in->q[t][c] * in->k[j][c];
            m = fmax(m, w[j]);
        }
        for (int j = 0; j <= t; j++) w[j] = exp(w[j] - m), z += w[j]; /* softmax */
        for (int d = 0; d < V; d++) {           /* o_t = sum_j softmax_j v_j */
            o[t][d] = 0;
            for (int j = 0; j <= t; j++) o[t][d] += w[j] / z * in->v[j][d];
        }
    }
}

/* One head of one layer at K = V = 128 and 8k context, 8-byte numbers; multiply-add = 2 flops. */
static void print_costs(void)
{
    const double Kc = 128, Vc = 128, N = 8192;
    printf("cost K=V=128 N=%.0f state_bytes %.0f flops_per_token %.0f"
           " cache_bytes_per_token %.0f\n", N,
           N * (Kc + Vc) * 8,                   /* the cache at 8k: N keys, N values      */
           N * (2 * Kc + 3 + 2 * Vc) + Vc,      /* scores, softmax, weighted sum          */
           (Kc + Vc) * 8);                      /* one key and one value per token        */
}

int main(void)
{
    static struct inputs in;
    double o[T][V];
    const double s = 1.0 / sqrt(K);

    make_inputs(&in);
    printf("# chapter 1, softmax attention: T=%d K=%d V=%d, scale %g\n",
           T, K, V, s);
    attention(&in, s, o);
    print_rows("o", T, V, &o[0][0]);
    printf("# memory after %d tokens: a cache of %d keys and %d values = %d numbers,"
           " %d more per token\n", T, T, T, T * (K + V), K + V);
    print_costs();
    return 0;
}
