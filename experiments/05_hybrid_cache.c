/*
 * 05_hybrid_cache — the bill of the 3:1 hybrid: cache bytes, time per decoded
 * token and exact recall of a planted token (seed chapter, "Do not choose.
 * Interleave." and "Why three-to-one"), for stacks of L layers
 * (lib/model/hybrid.c; the probe of part 2 in hybrid_probe.c) with KDA : attention ratios 0:1 (attention only), 1:1,
 * 3:1, 7:1 and 1:0 (KDA only). In each period of N+M layers the first N are KDA
 * and the last M attention (3:1 = KDA KDA KDA ATTN, as in Kimi Linear). The
 * weights are UNTRAINED: drawn by kdalab_hybrid_new_random from --seed.
 *
 * Part 1, cache and decode time vs context length c (16 ... --max-context,
 * doubling). At each c the stack's cache bytes are read with
 * kdalab_hybrid_cache_bytes (what the objects hold, not a formula) and checked
 * against the formula  n_kda * H*dh*dh*8 + n_attn * c * 2*H*dh*8  (the run
 * stops if they differ). Then --decode-tokens tokens are decoded one by one
 * with kdalab_hybrid_decode and timed (median and minimum ms per token).
 * At --max-context every stack is then timed again in --rounds alternating
 * rounds (at least 5; each round decodes --round-tokens tokens per stack, the
 * minimum kept), so a slow spell hits one round of every stack; each stack's
 * time as a fraction of the attention-only stack's is formed within a round
 * and printed as its median and range over the rounds (a "spread:" line).
 * How the context is built, to keep the run short:
 *   c <= --real-context   a real prefill (kdalab_hybrid_prefill) of random
 *                          N(0,1) token embeddings: the true forward pass
 *   c >  --real-context   the attention layers' KV caches are extended to c
 *                          rows by appending k, v rows cycled from a pool of
 *                          --pool rows (each layer's own W_k, W_v applied to
 *                          random N(0,1) inputs), through kdalab_hybrid_kv_cache.
 *                          KDA states are not advanced: their size and their
 *                          per-token cost do not depend on how many tokens they
 *                          absorbed. Decode cost depends on the cache length,
 *                          not on its contents, so the timing is that of a real
 *                          context of c tokens; the outputs are not used.
 *
 * Part 2, exact recall of a planted token at distance n. One random sequence
 * per stack is run through the TRUE forward pass (prefill between the planted
 * positions, kdalab_hybrid_decode at each planted position to record every
 * layer's residual input). Distances n (tokens written after the planted one)
 * are ~4 per octave from 1 to the limit: --recall-max for stacks whose only
 * attention layers are last (KDA only, 7:1 with L = 8: their prefill is
 * linear in T), --recall-max-all for the others (their prefill is O(T^2)).
 * At the end every layer's memory is probed for each planted token, with that
 * layer's own key k_p and value v_p for it (kdalab_hybrid_layer_project):
 *   KDA layer        read  r = S^T k_p  per head (S the layer state; k_p unit)
 *   attention layer  attend over the whole KV cache with the sharp query
 *                    q = (tau / scale) k_p / |k_p|^2 per head (logit tau for
 *                    the planted token; --tau), as a trained W_q would give
 * and scored by cos(r, v_p) over all heads. A token counts as recalled exactly
 * when the best layer of the stack reaches cos >= --exact. The projections
 * are random, so this measures what each memory CAN return, not what an
 * untrained model does. Part 2 is a CONSTRUCTION CHECK, not a test of "exact
 * retrieval needs attention": the attention probe's query is built from the
 * planted key itself, so every stack with an attention layer recalls by
 * construction (the check is that the cache kept the raw token and the
 * forward pass reaches it), while the untrained KDA state has had no chance
 * to learn what to keep. The attention query is centred: q is taken along
 * k_p - mean key (which shifts every logit by the same q.mean, i.e. scores
 * the centred keys). Default H = 1 (d_head = 64): with d_head = 32 the random
 * keys of one head are not always separable by a query along k_p (a key with
 * a larger norm can project further onto k_p than k_p itself; measured: the
 * single attention layer of 7:1 recalled 42 of 48 planted tokens at --heads 2,
 * already at distance 3), a property of random keys, not of the distance.
 *
 * Part 3, the claim at documented sizes (cache_model.c, arithmetic): the 3:1
 * cache as a fraction of the attention-only cache at Kimi Linear's layer sizes
 * (KDA 32 x 128 x 128 per layer, MLA 576 numbers per token), contexts 1K ... 1M.
 *
 * Outputs (DIR = --out):
 *   05_hybrid_cache.tsv         per ratio and context: bytes, formula, ms/token
 *   05_hybrid_cache_recall.tsv  per ratio and planted token: distance, cosines
 *   05_hybrid_cache_claim.tsv   per ratio at --max-context: bytes and time as a
 *                               fraction of the attention-only stack
 *   05_hybrid_cache_kimi.tsv, 05_hybrid_cache_kimi_fall.tsv   part 3
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cache_model.h"
#include "common.h"
#include "hybrid_probe.h"
#include "kdalab.h"

typedef struct {
    size_t N, M;
    const char *label;
} ratio;

static const ratio RATIOS[] = {
    {0, 1, "attention only (0:1)"},
    {1, 1, "1:1"},
    {3, 1, "3:1"},
    {7, 1, "7:1"},
    {1, 0, "KDA only (1:0)"},
};
#define N_RATIOS (sizeof RATIOS / sizeof RATIOS[0])

/* Parameters of one run. */
typedef struct {
    size_t L, d, H, max_ctx, min_ctx, decode, real_ctx, pool, recall_max, recall_max_all, far,
        rounds, round_tokens;
    double tau, exact;
} params;

/* Results kept for the summary. */
typedef struct {
    size_t n_attn;
    size_t bytes_max;       /* bytes at the largest context              */
    double ms_max;          /* minimum ms/token at the largest one       */
    double ms_max_median;   /* median ms/token at the largest one        */
    double ms_min_ctx;      /* minimum ms/token at the smallest context  */
    lab_spread ms_rounds;   /* the alternating rounds at the largest one */
    lab_spread frac_rounds; /* per round: ms / the attention-only stack's */
    size_t recall_limit;    /* largest distance probed            */
    size_t probes, recalled_far, probes_far; /* far: distance > recall_far */
    size_t recalled;
    double cos_far_mean;
} result;

static void fill_random(gsl_rng *rng, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = gsl_ran_gaussian(rng, 1.0);
}

static size_t count_attention(const lab_ctx *x, const kdalab_hybrid_config *cfg)
{
    size_t n = 0;
    for (size_t l = 0; l < cfg->n_layers; l++) {
        kdalab_hybrid_kind k;
        lab_check(x, kdalab_hybrid_layer_kind(cfg, l, &k), "layer kind");
        n += k == KDALAB_HYBRID_ATTENTION;
    }
    return n;
}

/* The configuration of the stack with ratio r. */
static kdalab_hybrid_config stack_config(const params *p, size_t r)
{
    kdalab_hybrid_config cfg = kdalab_hybrid_config_default();
    cfg.n_layers = p->L;
    cfg.d_model = p->d;
    cfg.n_heads = p->H;
    cfg.ratio_kda = RATIOS[r].N;
    cfg.ratio_attention = RATIOS[r].M;
    return cfg;
}

/* The largest context of the doubling sequence min_ctx, 2 min_ctx, ... <= max_ctx. */
static size_t largest_context(const params *p)
{
    size_t c = p->min_ctx;
    while (c * 2 <= p->max_ctx)
        c *= 2;
    return c;
}

/* ---- part 1: cache bytes and decode time -------------------------------------- */

/* Every ratio at every context: 05_hybrid_cache.tsv. */
static void part_cache(lab_ctx *x, const params *p, gsl_rng *rng, result *res,
                       kdalab_hybrid *keep[])
{
    static const char *const cols[] = {
        "ratio_kda", "N of the ratio N:M (KDA layers per period)",
        "ratio_attention", "M of the ratio N:M (attention layers per period)",
        "n_attention", "attention layers in the stack of L",
        "context", "context length c (tokens in each attention layer's KV cache)",
        "cache_bytes", "bytes held, read with kdalab_hybrid_cache_bytes (bytes)",
        "formula_bytes", "n_kda*H*dh*dh*8 + n_attention*c*2*H*dh*8 (bytes)",
        "ms_median", "median time per decoded token over decode-tokens tokens (ms)",
        "ms_min", "minimum time per decoded token (ms)",
        "context_built_by", "real = true prefill; filled = KV caches extended from a row pool",
        NULL};
    FILE *f = lab_tsv_open(x, "05_hybrid_cache", cols,
                           "L=%zu d_model=%zu H=%zu d_head=%zu contexts %zu..%zu doubling, "
                           "decode-tokens=%zu real-context=%zu pool=%zu; untrained random "
                           "weights (kdalab_hybrid_new_random, seed+ratio index); one block per ratio",
                           p->L, p->d, p->H, p->d / p->H, p->min_ctx, p->max_ctx, p->decode,
                           p->real_ctx, p->pool);
    size_t n_ctx = 0;
    for (size_t c = p->min_ctx; c <= p->max_ctx; c *= 2)
        n_ctx++;
    size_t d = p->d, dh = d / p->H, done = 0, total = n_ctx * N_RATIOS;
    double *xs = lab_zeros(x, p->real_ctx * d), *y = lab_zeros(x, d);
    double *ms = lab_zeros(x, p->decode);
    for (size_t r = 0; r < N_RATIOS; r++) {
        kdalab_hybrid_config cfg = stack_config(p, r);
        kdalab_hybrid *s = NULL;
        lab_check(x, kdalab_hybrid_new_random(&cfg, x->seed + r, &s), "new stack");
        size_t n_attn = count_attention(x, &cfg);
        res[r].n_attn = n_attn;

        /* The pool of k, v rows per attention layer for the cheap fill. */
        double **pk = calloc(p->L, sizeof *pk), **pv = calloc(p->L, sizeof *pv);
        double *px = lab_zeros(x, p->pool * d);
        if (!pk || !pv) {
            fprintf(stderr, "%s: out of memory\n", x->name);
            exit(1);
        }
        fill_random(rng, px, p->pool * d);
        for (size_t l = 0; l < p->L; l++) {
            kdalab_kv_cache *cache;
            if (kdalab_hybrid_kv_cache(s, l, &cache) != KDALAB_OK)
                continue;
            pk[l] = lab_zeros(x, p->pool * d);
            pv[l] = lab_zeros(x, p->pool * d);
            lab_check(x, kdalab_hybrid_layer_project(s, l, p->pool, px, NULL, pk[l], pv[l], NULL,
                                                     NULL),
                      "pool projection");
        }

        size_t ctx = 0, filled = 0; /* tokens in the attention caches; of those, filled */
        for (size_t c = p->min_ctx; c <= p->max_ctx; c *= 2) {
            int real = c <= p->real_ctx;
            if (real) {
                size_t T = c - ctx;
                fill_random(rng, xs, T * d);
                lab_check(x, kdalab_hybrid_prefill(s, T, xs, NULL, NULL), "prefill");
            } else {
                for (size_t l = 0; l < p->L; l++) {
                    kdalab_kv_cache *cache;
                    if (kdalab_hybrid_kv_cache(s, l, &cache) != KDALAB_OK)
                        continue;
                    for (size_t t = ctx, i = filled; t < c; t++, i++) {
                        size_t row = i % p->pool;
                        lab_check(x, kdalab_kv_cache_append(cache, pk[l] + row * d,
                                                            pv[l] + row * d),
                                  "cache fill");
                    }
                }
                filled += c - ctx;
            }
            ctx = c;
            size_t bytes = 0;
            lab_check(x, kdalab_hybrid_cache_bytes(s, NULL, &bytes), "cache bytes");
            size_t formula = (p->L - n_attn) * p->H * dh * dh * 8 + n_attn * c * 2 * p->H * dh * 8;
            if (bytes != formula) {
                fprintf(stderr, "%s: ratio %s at %zu tokens holds %zu bytes, formula %zu\n",
                        x->name, RATIOS[r].label, c, bytes, formula);
                exit(1);
            }
            for (size_t i = 0; i < p->decode; i++) {
                fill_random(rng, y, d);
                double t0 = lab_now();
                lab_check(x, kdalab_hybrid_decode(s, y, y, NULL), "decode");
                ms[i] = 1e3 * (lab_now() - t0);
            }
            ctx += p->decode;
            gsl_sort(ms, 1, p->decode);
            double med = gsl_stats_median_from_sorted_data(ms, 1, p->decode);
            fprintf(f, "%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%.6g\t%.6g\t%s\n", RATIOS[r].N, RATIOS[r].M,
                    n_attn, c, bytes, formula, med, ms[0], real ? "real" : "filled");
            if (c == p->min_ctx)
                res[r].ms_min_ctx = ms[0];
            res[r].bytes_max = bytes;
            res[r].ms_max = ms[0];
            res[r].ms_max_median = med;
            lab_progress(x, "cache/decode points", ++done, total);
        }
        fprintf(f, "\n\n");
        for (size_t l = 0; l < p->L; l++)
            free(pk[l]), free(pv[l]);
        free(pk), free(pv), free(px);
        keep[r] = s; /* at the largest context, for the rounds */
    }
    lab_tsv_close(x, f);
    free(xs), free(y), free(ms);
}

/* The stacks at the largest context, timed in alternating rounds; frees them. */
#define MAX_ROUNDS 32
static void time_rounds(lab_ctx *x, const params *p, result *res, kdalab_hybrid *keep[])
{
    /* a generator of its own: the rounds leave part 2's draws as they were */
    gsl_rng *rng = lab_rng(x);
    double ms[N_RATIOS][MAX_ROUNDS], frac[MAX_ROUNDS], *y = lab_zeros(x, p->d);
    for (size_t k = 0; k < p->rounds; k++)
        for (size_t r = 0; r < N_RATIOS; r++) {
            ms[r][k] = INFINITY;
            for (size_t i = 0; i < p->round_tokens; i++) {
                fill_random(rng, y, p->d);
                double t0 = lab_now();
                lab_check(x, kdalab_hybrid_decode(keep[r], y, y, NULL), "decode");
                ms[r][k] = fmin(ms[r][k], 1e3 * (lab_now() - t0));
            }
            lab_progress(x, "timing rounds", k * N_RATIOS + r + 1, p->rounds * N_RATIOS);
        }
    for (size_t r = 0; r < N_RATIOS; r++) {
        for (size_t k = 0; k < p->rounds; k++) frac[k] = ms[r][k] / ms[0][k];
        res[r].ms_rounds = lab_spread_of(ms[r], p->rounds);
        res[r].frac_rounds = lab_spread_of(frac, p->rounds);
        kdalab_hybrid_free(keep[r]);
    }
    free(y);
    gsl_rng_free(rng);
}

/* ---- part 2: recall of a planted token ------------------------------------------ */

/* A cosine for the TSV, or "nan" when the stack has no layer of that kind (-2). */
static void fmt_cos(char buf[32], double c)
{
    snprintf(buf, 32, c < -1.5 ? "nan" : "%.6f", c < -1.5 ? 0.0 : c);
}

#define MAX_PROBES 128

/* Plant tokens at distances up to each stack's limit, run the true forward
 * pass, probe every planted token at the end: 05_hybrid_cache_recall.tsv. */
static void part_recall(lab_ctx *x, const params *p, gsl_rng *rng, result *res)
{
    static const char *const cols[] = {
        "ratio_kda", "N of the ratio N:M",
        "ratio_attention", "M of the ratio N:M",
        "n_attention", "attention layers in the stack",
        "distance", "tokens written after the planted token (tokens)",
        "cos_best", "best cosine over the stack's layers between the read and v_p",
        "cos_kda", "best over KDA layers of cos(S^T k_p, v_p) (nan: no KDA layer)",
        "cos_attention", "best over attention layers of cos(attend(q_p), v_p) (nan: none)",
        "exact", "1 when cos_best >= --exact",
        NULL};
    FILE *f = lab_tsv_open(x, "05_hybrid_cache_recall", cols,
                           "L=%zu d_model=%zu H=%zu recall-max=%zu (KDA only, 7:1) recall-max-all=%zu "
                           "(others) tau=%g exact=%g; untrained random weights (seed+100+ratio index), "
                           "random N(0,1) tokens, true forward pass; one block per ratio. A CONSTRUCTION CHECK, "
                           "not a test of 'exact retrieval needs attention': the attention probe's query is "
                           "built from the planted key, so every stack with attention recalls by construction, "
                           "and the KDA state is untrained",
                           p->L, p->d, p->H, p->recall_max, p->recall_max_all, p->tau, p->exact);
    size_t d = p->d, L = p->L;
    size_t total_work = 0, work_done = 0;
    size_t limits[N_RATIOS];
    for (size_t r = 0; r < N_RATIOS; r++) {
        kdalab_hybrid_config cfg = stack_config(p, r);
        /* Linear-time prefill unless an attention layer feeds another layer. */
        int quadratic = 0;
        for (size_t l = 0; l + 1 < L; l++) {
            kdalab_hybrid_kind k;
            lab_check(x, kdalab_hybrid_layer_kind(&cfg, l, &k), "layer kind");
            quadratic |= k == KDALAB_HYBRID_ATTENTION;
        }
        limits[r] = quadratic ? p->recall_max_all : p->recall_max;
        total_work += limits[r];
    }
    double *buf = lab_zeros(x, SEG * d), *y = lab_zeros(x, d), *li = lab_zeros(x, L * SEG * d);
    double *kbuf = lab_zeros(x, SEG * d), *ksum = lab_zeros(x, L * d);
    double *trace = lab_zeros(x, MAX_PROBES * L * d);
    hprobe_buffers pb = {lab_zeros(x, d), lab_zeros(x, d), lab_zeros(x, d), lab_zeros(x, d)};
    for (size_t r = 0; r < N_RATIOS; r++) {
        kdalab_hybrid_config cfg = stack_config(p, r);
        kdalab_hybrid *s = NULL;
        lab_check(x, kdalab_hybrid_new_random(&cfg, x->seed + 100 + r, &s), "new stack");
        size_t dist[MAX_PROBES];
        size_t n_probe = hprobe_distance_grid(limits[r], dist, MAX_PROBES);
        size_t end = limits[r] + 1; /* positions 0 .. limits[r]; probe at the end */
        /* Planted positions ascending: pos = end - 1 - dist, dist descending. */
        size_t cur = 0;
        memset(ksum, 0, L * d * sizeof(double));
        for (size_t i = n_probe; i-- > 0;) {
            size_t pos = end - 1 - dist[i];
            hprobe_advance(x, s, rng, L, d, pos - cur, buf, li, kbuf, ksum);
            fill_random(rng, y, d);
            lab_check(x, kdalab_hybrid_decode(s, y, y, trace + i * L * d), "recall decode");
            hprobe_add_keys(x, s, L, d, 1, trace + i * L * d, kbuf, ksum);
            cur = pos + 1;
            lab_progress(x, "recall tokens", work_done + cur, total_work);
        }
        hprobe_advance(x, s, rng, L, d, end - cur, buf, li, kbuf, ksum);
        work_done += limits[r];

        res[r].recall_limit = limits[r];
        res[r].probes = n_probe;
        double cos_far = 0;
        for (size_t i = 0; i < n_probe; i++) {
            double best_kda, best_att;
            hprobe_probe(x, s, L, d, p->H, p->tau, trace + i * L * d, ksum, &pb, &best_kda,
                         &best_att);
            double best = fmax(best_kda, best_att);
            int hit = best >= p->exact;
            res[r].recalled += hit;
            if (dist[i] > p->far) {
                res[r].probes_far++;
                res[r].recalled_far += hit;
                cos_far += best;
            }
            char ck[32], ca[32];
            fmt_cos(ck, best_kda);
            fmt_cos(ca, best_att);
            fprintf(f, "%zu\t%zu\t%zu\t%zu\t%.6f\t%s\t%s\t%d\n", RATIOS[r].N, RATIOS[r].M,
                    res[r].n_attn, dist[i], best, ck, ca, hit);
        }
        res[r].cos_far_mean = res[r].probes_far ? cos_far / res[r].probes_far : NAN;
        fprintf(f, "\n\n");
        kdalab_hybrid_free(s);
    }
    lab_tsv_close(x, f);
    free(buf), free(y), free(li), free(kbuf), free(ksum), free(trace);
    free(pb.k), free(pb.v), free(pb.q), free(pb.o);
}

/* ---- part 3: the claim, and the printed summary -------------------------------------- */

/* The claim: at 3:1 "the cache bill has already fallen by three quarters".
 * 05_hybrid_cache_claim.tsv: every ratio against the attention-only stack. */
static void write_claim(lab_ctx *x, const params *p, const result *res)
{
    static const char *const claim_cols[] = {
        "ratio_kda", "N of the ratio N:M",
        "ratio_attention", "M of the ratio N:M",
        "n_attention", "attention layers in the stack",
        "context", "context length (tokens)",
        "cache_bytes", "bytes held at that context (bytes)",
        "fraction_of_attention", "cache_bytes / the attention-only stack's",
        "saving", "1 - fraction_of_attention",
        "ms_min", "minimum ms per decoded token at that context (ms)",
        "ms_fraction", "ms_min / the attention-only stack's",
        "ms_median", "median ms per decoded token at that context (ms)",
        "rounds_ms", "the alternating rounds: median of each round's minimum ms per token (ms)",
        "rounds_fraction", "the rounds: median of (ms / the attention-only stack's ms in that round)",
        "rounds_fraction_lo", "the smallest of those fractions",
        "rounds_fraction_hi", "the largest of those fractions",
        NULL};
    FILE *f = lab_tsv_open(x, "05_hybrid_cache_claim", claim_cols,
                           "L=%zu d_model=%zu H=%zu context=%zu rounds=%zu round-tokens=%zu", p->L,
                           p->d, p->H, p->max_ctx, p->rounds, p->round_tokens);
    size_t ctx_max = largest_context(p);
    for (size_t r = 0; r < N_RATIOS; r++)
        fprintf(f, "%zu\t%zu\t%zu\t%zu\t%zu\t%.6f\t%.6f\t%.6g\t%.4f\t%.6g\t%.6g\t%.4f\t%.4f\t%.4f\n",
                RATIOS[r].N, RATIOS[r].M, res[r].n_attn, ctx_max, res[r].bytes_max,
                (double)res[r].bytes_max / (double)res[0].bytes_max,
                1.0 - (double)res[r].bytes_max / (double)res[0].bytes_max, res[r].ms_max,
                res[r].ms_max / res[0].ms_max, res[r].ms_max_median, res[r].ms_rounds.median,
                res[r].frac_rounds.median, res[r].frac_rounds.lo, res[r].frac_rounds.hi);
    lab_tsv_close(x, f);
}

static void print_summary(const lab_ctx *x, const params *p, const result *res)
{
    size_t ctx_max = largest_context(p);
    printf("05_hybrid_cache: L=%zu layers, d_model=%zu, H=%zu, d_head=%zu; untrained random "
           "weights, seed %lu\n", p->L, p->d, p->H, p->d / p->H, x->seed);
    printf("cache bytes held (kdalab_hybrid_cache_bytes; equal to the formula at every point) and "
           "ms per decoded token at c = %zu tokens\n(%zu alternating rounds, each the minimum over "
           "%zu decoded tokens per stack: the median of the rounds, and the median and range of "
           "\neach round's time as a fraction of the attention-only stack's in that round)\n",
           ctx_max, p->rounds, p->round_tokens);
    printf("(contexts > %zu built by extending the KV caches from a row pool; see --help)\n\n",
           p->real_ctx);
    printf("%-22s %5s %14s %10s %8s %10s %10s %17s %9s\n", "ratio KDA:attn", "attn", "bytes",
           "MiB", "of attn", "ms/token", "of attn", "range", "ms @ c0");
    for (size_t r = 0; r < N_RATIOS; r++)
        printf("%-22s %5zu %14zu %10.2f %7.2f%% %10.3f %9.2f%% %7.2f .. %5.2f%% %9.3f\n",
               RATIOS[r].label, res[r].n_attn, res[r].bytes_max, res[r].bytes_max / 1048576.0,
               100.0 * res[r].bytes_max / res[0].bytes_max, res[r].ms_rounds.median,
               100.0 * res[r].frac_rounds.median, 100.0 * res[r].frac_rounds.lo,
               100.0 * res[r].frac_rounds.hi, res[r].ms_min_ctx);
    printf("(ms @ c0: ms per token at c = %zu, the minimum over %zu decoded tokens)\n", p->min_ctx,
           p->decode);
    char what[160];
    snprintf(what, sizeof what, "3:1 / attention only, ms per decoded token at c = %zu", ctx_max);
    lab_print_spread(what, res[2].frac_rounds, 100.0, 1, " %");
    snprintf(what, sizeof what, "KDA only, ms per decoded token at c = %zu", ctx_max);
    lab_print_spread(what, res[N_RATIOS - 1].ms_rounds, 1.0, 3, " ms");
    printf("\n");
    double f31 = (double)res[2].bytes_max / (double)res[0].bytes_max;
    printf("claim \"at 3:1 the cache bill has already fallen by three quarters\", this lab's stack (its "
           "KDA state weighs %zu tokens\nof one attention cache): at c = %zu, 3:1 holds %.4f of the attention-only "
           "cache, a fall of %.2f%% (75%% minus\nthe KDA states' %.2f%%); at Kimi Linear's sizes see the end\n\n",
           (p->d / p->H) / 2, ctx_max, f31, 100.0 * (1.0 - f31), 100.0 * (f31 - 0.25));
    printf("construction check: exact recall of a planted token (cos >= %g between the best layer's read "
           "and v_p),\ntrue forward pass, untrained weights, attention probe logit tau = %g\n", p->exact,
           p->tau);
    printf("%-22s %5s %9s %12s %16s %14s\n", "ratio KDA:attn", "attn", "max dist", "exact (all)",
           "exact (dist>far)", "mean cos far");
    for (size_t r = 0; r < N_RATIOS; r++)
        printf("%-22s %5zu %9zu %6zu/%-5zu %10zu/%-5zu %14.4f\n", RATIOS[r].label, res[r].n_attn,
               res[r].recall_limit, res[r].recalled, res[r].probes, res[r].recalled_far,
               res[r].probes_far, res[r].cos_far_mean);
    printf("(far = %zu tokens)\n", p->far);
    printf("this is a construction check, not a test of \"exact retrieval needs a layer that keeps the raw "
           "context\":\nthe attention probe's query is built from the planted key, so every stack with an "
           "attention layer\nrecalls by construction; the KDA state is untrained (a trained one is not measured "
           "here). What it shows:\nthe KV cache keeps the raw token at every distance and the forward pass "
           "reaches it; the fixed-size\nuntrained state of the KDA-only stack returns %zu of %zu planted tokens exactly.\n",
           res[N_RATIOS - 1].recalled, res[N_RATIOS - 1].probes);
}

/* ---- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.L = 8, .d = 64, .H = 1, .max_ctx = 65536, .min_ctx = 16, .decode = 16,
                .real_ctx = 1024, .pool = 1024, .recall_max = 8192, .recall_max_all = 2048,
                .far = 256, .tau = 100.0, .exact = 0.99, .rounds = 5, .round_tokens = 6};
    lab_init(&x, "05_hybrid_cache",
             "the bill of the 3:1 hybrid: cache bytes, ms per decoded token, exact recall");
    lab_flag_size(&x, "layers", &p.L, "layers L per stack (7:1 needs L >= 8 to hold attention)");
    lab_flag_size(&x, "d-model", &p.d, "residual width d_model");
    lab_flag_size(&x, "heads", &p.H, "heads H (d_head = d_model / H = K = V)");
    lab_flag_size(&x, "max-context", &p.max_ctx, "largest context length c (tokens)");
    lab_flag_size(&x, "min-context", &p.min_ctx, "smallest context length c; c doubles up to the largest");
    lab_flag_size(&x, "decode-tokens", &p.decode, "tokens decoded and timed at each c (<= min-context)");
    lab_flag_size(&x, "rounds", &p.rounds, "alternating timing rounds at the largest context, 5 to 32");
    lab_flag_size(&x, "round-tokens", &p.round_tokens, "tokens decoded per stack in each round (the minimum kept)");
    lab_flag_size(&x, "real-context", &p.real_ctx, "contexts up to this are a real prefill; longer are cache fills");
    lab_flag_size(&x, "pool", &p.pool, "k,v rows the cache fills (contexts > real-context) cycle through");
    lab_flag_size(&x, "recall-max", &p.recall_max, "largest recall distance for stacks with linear-time prefill");
    lab_flag_size(&x, "recall-max-all", &p.recall_max_all, "largest recall distance for the O(T^2) stacks");
    lab_flag_size(&x, "far", &p.far, "summary: recall over distances > far");
    lab_flag_double(&x, "tau", &p.tau, "attention probe: logit of the planted token (sharpness)");
    lab_flag_double(&x, "exact", &p.exact, "cosine at or above which a recall counts as exact");
    lab_parse(&x, argc, argv);
    lab_need(&x, p.L >= 1, "--layers", "layers >= 1");
    lab_need(&x, p.d >= 1 && p.H >= 1 && p.d % p.H == 0, "--d-model, --heads",
             "d-model, heads >= 1, heads dividing d-model");
    lab_need(&x, p.decode >= 1 && p.decode <= p.min_ctx && p.min_ctx <= p.max_ctx,
             "--decode-tokens, --min-context, --max-context",
             "1 <= decode-tokens <= min-context <= max-context");
    lab_need(&x, p.rounds >= 5 && p.rounds <= MAX_ROUNDS, "--rounds", "5 <= rounds <= %d",
             MAX_ROUNDS);
    lab_need(&x, p.round_tokens >= 1, "--round-tokens", "round-tokens >= 1");
    lab_need(&x, p.pool >= 1, "--pool", "pool >= 1");
    lab_need(&x, p.recall_max_all >= 1 && p.recall_max_all <= p.recall_max,
             "--recall-max-all, --recall-max", "1 <= recall-max-all <= recall-max");
    lab_need(&x, p.tau > 0, "--tau", "tau > 0");
    lab_need(&x, p.exact > 0 && p.exact <= 1, "--exact", "a value in (0, 1]");
    lab_refuse_unused(&x, "pool", p.real_ctx >= p.max_ctx, "with --real-context >= --max-context: "
                      "every context is a real prefill, and only a cache fill draws from the pool");
    if (p.real_ctx > p.max_ctx)
        p.real_ctx = p.max_ctx;
    gsl_rng *rng = lab_rng(&x);
    result res[N_RATIOS];
    memset(res, 0, sizeof res);

    kdalab_hybrid *keep[N_RATIOS];
    part_cache(&x, &p, rng, res, keep);
    time_rounds(&x, &p, res, keep);
    part_recall(&x, &p, rng, res);
    write_claim(&x, &p, res);
    print_summary(&x, &p, res);
    cache_model_report(&x, p.H, p.d / p.H, largest_context(&p),
                       (double)res[2].bytes_max / (double)res[0].bytes_max);
    printf("results: %s/05_hybrid_cache.tsv, 05_hybrid_cache_recall.tsv, 05_hybrid_cache_claim.tsv,"
           " 05_hybrid_cache_kimi.tsv, 05_hybrid_cache_kimi_fall.tsv (%.1f s)\n", x.out, lab_elapsed(&x));
    gsl_rng_free(rng);
    return 0;
}
