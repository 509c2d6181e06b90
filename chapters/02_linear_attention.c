/*
 * 02_linear_attention.c — chapter 2: drop the softmax, keep a fixed-size state.
 *
 *   S_t = S_{t-1} + k_t v_t^T,    o_t = s S_t^T q_t            (REFERENCE.md, chapter 02)
 *
 * Without the softmax, sum_j (q_t . k_j) v_j = S_t^T q_t: the cache folds
 * into one K x V matrix, read in O(K V) per token at any length. Nothing is
 * ever removed: S is the plain sum of every write.
 *
 * Run: make chapters && bin/chapters/02_linear_attention   (rows "name index values", %.17g)
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

/* One token: write S <- S + k v^T, then read o = s S^T q. */
static void step(double S[K][V], const double q[K], const double k[K], const double v[V],
                 double s, double o[V])
{
    for (int c = 0; c < K; c++)                 /* write: S <- S + k v^T */
        for (int d = 0; d < V; d++) S[c][d] += k[c] * v[d];
    for (int d = 0; d < V; d++) {               /* read: o = s S^T q */
        o[d] = 0;
        for (int c = 0; c < K; c++) o[d] += s * S[c][d] * q[c];
    }
}

/* One head of one layer at K = V = 128 and 8k context, 8-byte numbers; multiply-add = 2 flops. */
static void print_costs(void)
{
    const double Kc = 128, Vc = 128, N = 8192;
    printf("cost K=V=128 N=%.0f state_bytes %.0f flops_per_token %.0f"
           " cache_bytes_per_token %.0f\n", N,
           Kc * Vc * 8,                         /* S, at any context length               */
           4 * Kc * Vc + Vc,                    /* write k v^T, read s S^T q              */
           0.0);                                /* nothing grows with the context         */
}

int main(void)
{
    static struct inputs in;
    double o[T][V], S[K][V] = {{0}};
    const double s = 1.0 / sqrt(K);

    make_inputs(&in);
    printf("# chapter 2, linear attention: T=%d K=%d V=%d, scale %g\n",
           T, K, V, s);
    for (int t = 0; t < T; t++)                 /* the recurrent form, S_0 = 0 */
        step(S, in.q[t], in.k[t], in.v[t], s, o[t]);
    print_rows("o", T, V, &o[0][0]);
    print_rows("S", K, V, &S[0][0]);
    printf("# memory after %d tokens: a %d x %d state = %d numbers at any length\n",
           T, K, V, K * V);
    print_costs();
    return 0;
}
