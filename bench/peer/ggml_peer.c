/*
 * bench/peer/ggml_peer.c — ggml's fused CPU op ggml_gated_delta_net timed as a
 * peer of bin/bench_simd. Not built by `make` (it needs a ggml build):
 *
 *   make peer-ggml GGML_DIR=/tmp/ggml-src GGML_BUILD=/tmp/ggml-build   -> bin/peer_ggml
 *   KDALAB_PEER_GGML=bin/peer_ggml make bench                 (bench/README.md)
 *
 * The inputs are bench_simd's problem, made the same way from the same GSL
 * generator (mt19937, GSL_RNG_SEED honoured): unit-norm q, k rows, v ~ N(0,1),
 * beta ~ U(0,1), g ~ -0.5 U(0,1) (per key channel for KDA, per head for Gated
 * DeltaNet: the first B*T*H values), h0 ~ 0.1 N(0,1). With B, T, H, K, V equal
 * to bench_simd's reference shape they are bit for bit its inputs.
 *
 * What ggml computes (include/ggml.h, src/ggml-cpu/ops.cpp), and the mapping:
 *   q, k   ggml [K, H, T, B] (ne0 fastest) = kdalab [B,T,H,K]: the same bytes
 *   v      ggml [V, H, T, B] = kdalab [B,T,H,V]
 *   g      ggml [K, H, T, B] (KDA) or [1, H, T, B] (scalar gate) = kdalab g
 *   beta   ggml [1, H, T, B] = kdalab [B,T,H]
 *   state  ggml [V, V, H, B], element (i, j) at j*K + i with i the KEY channel:
 *          per head the transpose of kdalab's h0/ht [K,V] rows
 *   result [o (B*T*H*V floats, kdalab's o layout) | final state (as `state`)]
 *   per token: S = exp(g) S (per key row for KDA), d = beta (v - S^T k),
 *   S += k d^T, o = S^T q / sqrt(V) — kdalab's recurrence with scale K^-1/2;
 *   ggml fixes the scale and needs K == V.
 *
 * First the op's output and final state are compared with
 * kdalab_recurrent_f64 on the same inputs widened to float64 (max |x - ref| /
 * max |ref|); above 1e-4 it refuses to time. Then warm repeated calls
 * through a CPU graph with a persistent threadpool of --threads threads:
 *
 *   ggml_peer head_tokens_per_s best=<b> median=<m> max_rel_err=<e>
 *
 * --decode: one token, one head (B = T = H = 1), K = V = 128 by default, one
 * call per token, the state ping-ponging between two buffers (call n reads the
 * state call n-1 wrote), validated over 256 chained calls, then µs per call
 * (the graph dispatch included: it is what a decode step through ggml costs):
 *
 *   ggml_peer decode_us best=<b> median=<m> max_rel_err=<e>
 *
 *   bin/peer_ggml [--mech kda|gated_deltanet] [--B n] [--T n] [--H n] [--K n] [--V n]
 *                 [--threads n] [--reps n] [--decode] [--version]
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kdalab.h"
#include "../problem.h"

#define VALID_TOL 1e-4
#define MAX_REPS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *x = malloc(n ? n : 1);
    if (!x) {
        fprintf(stderr, "peer_ggml: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return x;
}

/* bench/simd.c's problem_make, the same draws in the same order. */
/* dst[n][c][r] = src[n][r][c] for n < heads: kdalab's [K,V] state <-> ggml's. */
static void transpose_heads(float *dst, const float *src, size_t heads, size_t rows, size_t cols)
{
    for (size_t n = 0; n < heads; n++)
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++)
                dst[(n * cols + c) * rows + r] = src[(n * rows + r) * cols + c];
}

/* The op on one graph: tensors of shape (B, T, H, K, V), a plan, a threadpool. */
typedef struct {
    struct ggml_context *ctx;
    struct ggml_cgraph *gf;
    struct ggml_tensor *q, *k, *v, *g, *beta, *s, *out;
    struct ggml_threadpool *tp;
    struct ggml_cplan plan;
} peer_graph;

static void graph_make(peer_graph *pg, const kdalab_dims *d, int kda, int nth)
{
    const int64_t B = (int64_t)d->B, T = (int64_t)d->T, H = (int64_t)d->H, K = (int64_t)d->K,
                  V = (int64_t)d->V;
    size_t floats = (size_t)(B * T * H * (2 * K + 2 * V + (kda ? K : 1) + 1) + 2 * B * H * K * V);
    struct ggml_init_params ip = {floats * sizeof(float) + 16 * ggml_tensor_overhead() +
                                      ggml_graph_overhead() + (1 << 20),
                                  NULL, false};
    pg->ctx = ggml_init(ip);
    if (!pg->ctx) {
        fprintf(stderr, "peer_ggml: ggml_init failed\n");
        exit(1);
    }
    pg->q = ggml_new_tensor_4d(pg->ctx, GGML_TYPE_F32, K, H, T, B);
    pg->k = ggml_new_tensor_4d(pg->ctx, GGML_TYPE_F32, K, H, T, B);
    pg->v = ggml_new_tensor_4d(pg->ctx, GGML_TYPE_F32, V, H, T, B);
    pg->g = ggml_new_tensor_4d(pg->ctx, GGML_TYPE_F32, kda ? K : 1, H, T, B);
    pg->beta = ggml_new_tensor_4d(pg->ctx, GGML_TYPE_F32, 1, H, T, B);
    pg->s = ggml_new_tensor_4d(pg->ctx, GGML_TYPE_F32, V, V, H, B);
    pg->out = ggml_gated_delta_net(pg->ctx, pg->q, pg->k, pg->v, pg->g, pg->beta, pg->s, 1);
    pg->gf = ggml_new_graph(pg->ctx);
    ggml_build_forward_expand(pg->gf, pg->out);
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(nth);
    pg->tp = ggml_threadpool_new(&tpp);
    pg->plan = ggml_graph_plan(pg->gf, nth, pg->tp);
    pg->plan.work_data = xmalloc(pg->plan.work_size);
}

static void graph_free(peer_graph *pg)
{
    free(pg->plan.work_data);
    ggml_threadpool_free(pg->tp);
    ggml_free(pg->ctx);
}

static void graph_run(peer_graph *pg)
{
    if (ggml_graph_compute(pg->gf, &pg->plan) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "peer_ggml: ggml_graph_compute failed\n");
        exit(1);
    }
}

/* kdalab_recurrent_f64 on p's inputs widened to float64: o [B,T,H,V], ht [B,H,K,V]. */
static void reference(const problem *p, kdalab_mechanism m, double *o, double *ht)
{
    const kdalab_dims *d = &p->d;
    size_t nqk = d->B * d->T * d->H * d->K, nv = d->B * d->T * d->H * d->V,
           nbth = d->B * d->T * d->H, ns = d->B * d->H * d->K * d->V;
    const float *src[6] = {p->q, p->k, p->v, p->g, p->beta, p->h0};
    size_t n[6] = {nqk, nqk, nv, nqk, nbth, ns};
    double *w[6];
    for (int a = 0; a < 6; a++) {
        w[a] = xmalloc(n[a] * sizeof(double));
        for (size_t i = 0; i < n[a]; i++)
            w[a][i] = src[a][i];
    }
    if (kdalab_recurrent_f64(d, m, kdalab_default_scale(d->K), w[0], w[1], w[2], w[3], w[4],
                             w[5], o, ht) != KDALAB_OK) {
        fprintf(stderr, "peer_ggml: reference: %s\n", kdalab_last_error());
        exit(1);
    }
    for (int a = 0; a < 6; a++)
        free(w[a]);
}

/* max |x - ref| / max |ref| (NaN in x counts as infinitely wrong). */
static double rel_err(const float *x, const double *ref, size_t n)
{
    double mx = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
        double e = fabs((double)x[i] - ref[i]);
        err = e > err || !isfinite(e) ? e : err;
    }
    return err / (mx > 0 ? mx : 1);
}

/* Validation verdict: 1 when within VALID_TOL (prints the errors either way). */
static int validated(double eo, double es, double *err)
{
    *err = eo > es || isnan(eo) ? eo : es;
    printf("ggml_peer validation o_rel_err=%.3g state_rel_err=%.3g (kdalab_recurrent_f64)\n",
           eo, es);
    if (*err <= VALID_TOL)
        return 1;
    printf("ggml_peer INVALID max_rel_err=%.3g > %g: not timed\n", *err, VALID_TOL);
    return 0;
}

/* The full problem: validate, then time reps warm calls. */
static int run_full(const problem *p, kdalab_mechanism m, int nth, int reps)
{
    const kdalab_dims *d = &p->d;
    const int kda = m == KDALAB_KDA;
    const size_t bth = d->B * d->T * d->H, nv = bth * d->V, ns = d->B * d->H * d->K * d->V;
    peer_graph pg;
    graph_make(&pg, d, kda, nth);
    memcpy(pg.q->data, p->q, ggml_nbytes(pg.q));
    memcpy(pg.k->data, p->k, ggml_nbytes(pg.k));
    memcpy(pg.v->data, p->v, ggml_nbytes(pg.v));
    memcpy(pg.g->data, p->g, ggml_nbytes(pg.g)); /* scalar gate: the first B*T*H */
    memcpy(pg.beta->data, p->beta, ggml_nbytes(pg.beta));
    transpose_heads(pg.s->data, p->h0, d->B * d->H, d->K, d->V);

    double *oref = xmalloc(nv * sizeof(double)), *sref = xmalloc(ns * sizeof(double));
    reference(p, m, oref, sref);
    graph_run(&pg); /* also the warm-up call */
    const float *out = pg.out->data;
    float *ht = xmalloc(ns * sizeof(float));
    transpose_heads(ht, out + nv, d->B * d->H, d->V, d->K);
    double err;
    int ok = validated(rel_err(out, oref, nv), rel_err(ht, sref, ns), &err);
    if (ok) {
        double t[MAX_REPS];
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            graph_run(&pg);
            t[r] = (double)bth / (now() - t0);
        }
        gsl_sort(t, 1, (size_t)reps);
        printf("ggml_peer head_tokens_per_s best=%.1f median=%.1f max_rel_err=%.3g\n",
               t[reps - 1], gsl_stats_median_from_sorted_data(t, 1, (size_t)reps), err);
    }
    free(oref); free(sref); free(ht);
    graph_free(&pg);
    return !ok;
}

/* Decode: one call per token of p (B = H = 1), the state chained through
 * buf[0] and buf[1] ([o | state] each, the op's output layout). */
static void decode_chain(peer_graph *pg, const problem *p, float *buf[2], size_t *c, float *o)
{
    const size_t K = p->d.K, V = p->d.V, gw = pg->g->ne[0];
    for (size_t i = 0; i < p->d.T; i++) {
        pg->q->data = p->q + i * K;
        pg->k->data = p->k + i * K;
        pg->v->data = p->v + i * V;
        pg->g->data = p->g + i * gw;
        pg->beta->data = p->beta + i;
        pg->s->data = buf[*c] + V;
        pg->out->data = buf[1 - *c];
        graph_run(pg);
        *c = 1 - *c;
        if (o)
            memcpy(o + i * V, buf[*c], V * sizeof *o);
    }
}

static int run_decode(const problem *p, kdalab_mechanism m, int reps)
{
    const size_t NTOK = p->d.T, K = p->d.K, V = p->d.V;
    peer_graph pg;
    kdalab_dims one = {1, 1, 1, K, V};
    graph_make(&pg, &one, m == KDALAB_KDA, 1);
    float *buf[2] = {xmalloc((V + K * V) * sizeof(float)), xmalloc((V + K * V) * sizeof(float))};
    float *o = xmalloc(NTOK * V * sizeof(float)), *ht = xmalloc(K * V * sizeof(float));
    double *oref = xmalloc(NTOK * V * sizeof(double)), *sref = xmalloc(K * V * sizeof(double));
    size_t c = 0;
    transpose_heads(buf[0] + V, p->h0, 1, K, V);
    decode_chain(&pg, p, buf, &c, o);
    reference(p, m, oref, sref);
    transpose_heads(ht, buf[c] + V, 1, V, K);
    double err;
    int ok = validated(rel_err(o, oref, NTOK * V), rel_err(ht, sref, K * V), &err);
    if (ok) {
        double t[MAX_REPS];
        const int rounds = 20;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (int round = 0; round < rounds; round++)
                decode_chain(&pg, p, buf, &c, NULL);
            t[r] = 1e6 * (now() - t0) / (double)(rounds * NTOK);
        }
        gsl_sort(t, 1, (size_t)reps);
        printf("ggml_peer decode_us best=%.3f median=%.3f max_rel_err=%.3g\n", t[0],
               gsl_stats_median_from_sorted_data(t, 1, (size_t)reps), err);
    }
    free(buf[0]); free(buf[1]); free(o); free(ht); free(oref); free(sref);
    graph_free(&pg);
    return !ok;
}

int main(int argc, char **argv)
{
    size_t dim[5] = {1, 4096, 4, 128, 128}; /* B, T, H, K, V: bench_simd's shape */
    int nth = 2, reps = 7, decode = 0, given = 0; /* given: bit i for dim[i] */
    kdalab_mechanism m = KDALAB_KDA;
    static const struct option opts[] = {
        {"B", required_argument, NULL, 'B'},      {"T", required_argument, NULL, 'T'},
        {"H", required_argument, NULL, 'H'},      {"K", required_argument, NULL, 'K'},
        {"V", required_argument, NULL, 'V'},      {"threads", required_argument, NULL, 't'},
        {"reps", required_argument, NULL, 'r'},   {"mech", required_argument, NULL, 'm'},
        {"decode", no_argument, NULL, 'd'},       {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        static const char dims[] = "BTHKV";
        const char *which = o > 0 ? strchr(dims, o) : NULL;
        char *end = NULL;
        long x = optarg ? strtol(optarg, &end, 10) : 0;
        int num = optarg && *optarg && *end == 0;
        if (which && num && x >= 1 && x <= (1L << 24)) {
            dim[which - dims] = (size_t)x;
            given |= 1 << (which - dims);
        } else if ((o == 't' || o == 'r') && num && x >= 1 && x <= MAX_REPS) {
            *(o == 't' ? &nth : &reps) = (int)x;
        } else if (o == 'm' && kdalab_mechanism_parse(optarg, &m) == KDALAB_OK &&
                   kdalab_mechanism_g_width(m, 1) > 0) {
            continue;
        } else if (o == 'd') {
            decode = 1;
        } else if (o == 'v') {
            printf("ggml %s commit %s\n", ggml_version(), ggml_commit());
            return 0;
        } else {
            printf("usage: bin/peer_ggml [--mech kda|gated_deltanet] [--B n] [--T n] [--H n] "
                   "[--K n] [--V n] [--threads n] [--reps n] [--decode] [--version]\n"
                   "  ggml_gated_delta_net validated against kdalab_recurrent_f64, then "
                   "timed; see bench/peer/ggml_peer.c\n");
            return o == 'h' ? 0 : 2;
        }
    }
    for (int i = 0; decode && i < 3; i++) /* one head, 256 chained tokens (bench_simd's step) */
        dim[i] = given & (1 << i) ? dim[i] : i == 1 ? 256 : 1;
    if (dim[3] != dim[4]) {
        fprintf(stderr, "peer_ggml: ggml_gated_delta_net needs K == V (got %zu, %zu)\n",
                dim[3], dim[4]);
        return 2;
    }
    if (decode && (dim[0] != 1 || dim[2] != 1)) {
        fprintf(stderr, "peer_ggml: --decode runs one head (B = H = 1)\n");
        return 2;
    }
    gsl_rng_env_setup();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    problem p;
    problem_make(&p, rng, dim[0], dim[1], dim[2], dim[3], dim[4]);
    printf("# ggml %s commit %s: ggml_gated_delta_net, %s, B=%zu T=%zu H=%zu K=%zu V=%zu, "
           "%d thread%s, %d reps\n",
           ggml_version(), ggml_commit(), kdalab_mechanism_name(m), dim[0], dim[1], dim[2],
           dim[3], dim[4], decode ? 1 : nth, (decode ? 1 : nth) > 1 ? "s" : "", reps);
    fflush(stdout);
    int rc = decode ? run_decode(&p, m, reps) : run_full(&p, m, nth, reps);
    problem_free(&p);
    gsl_rng_free(rng);
    return rc;
}
