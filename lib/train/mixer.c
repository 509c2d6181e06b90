/*
 * lib/train/mixer.c — one mixer sub-layer, forward and backward in float64:
 * the q, k, v projections, the optional short convolution and SiLU, the
 * L2 normalisation, beta and the gate of the linear mixers, the mechanism
 * (the SIMD path's kdalab_simd_chunk_f64 at its default chunk, the same
 * function as the reference's kdalab_chunk_f64 to ~1e-15 in float64 and
 * about five times faster in float32; or for attention
 * kdalab__attention_tiled_fwd_f64: the same function as kdalab_attention_f64 in
 * matrix form), the linear mixers' output norm and gate (the gate's kind and
 * rank as the config says: lib/train/outgate.c) and the output projection.
 * The backward is the chain rule through the same steps in reverse, using
 * the mechanism's and the gate's own backwards (the SIMD path's
 * kdalab_simd_chunk_bwd_f64, the same function as the reference's
 * kdalab_chunk_bwd_f64 up to rounding, tests/test_simd_bwd.c; the gates' in lib/reference;
 * kdalab__attention_tiled_bwd_f64) and the step-1
 * backwards of lib/train/layers.c; the projections are the CBLAS wrappers of
 * lib/train/matmul.c. Checked against central finite differences in
 * tests/test_train_mixer.c.
 *
 * Shapes: N = B * T rows, D = H * d, d = K = V the head dimension.
 *
 * defines: kdalab_mixer_fwd_f64, kdalab_mixer_bwd_f64, kdalab_mixer_cache_free,
 *          kdalab__train_mixer_fwd_f64, kdalab__train_mixer_bwd_f64 (the model's unchecked entries,
 *          lib/train/train_internal.h)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "train_internal.h"

/* Everything the backward reads, each [N, D] unless said otherwise. */
struct kdalab_mixer_cache {
    kdalab_mixer_config cfg;
    size_t B, T;
    double *a[3];  /* x Wq, x Wk, x Wv                                        */
    double *c[3];  /* after the convolution (a copy of a with conv off)        */
    double *s[3];  /* silu(c): q, k, v as the mechanism's inputs before norm   */
    double *qn, *kn; /* L2-normalised q, k (linear mixers)                     */
    double *zb;    /* [N, H] x Wb (beta = sigmoid(zb))                         */
    double *beta;  /* [N, H]                                                   */
    double *zf;    /* [N, d] x Wg (KDA's low-rank gate)                         */
    double *zg;    /* [N, H] x Wa (Gated DeltaNet) or [N, D] zf Wg2 (KDA)       */
    double *g;     /* same shape as zg: the log-decay                          */
    double *sp, *sg; /* same shape: softplus and sigmoid of zg + dt_bias, kept    */
                     /* for the gate's backward                                  */
    double *o;     /* the mechanism's output [N, H, d]                         */
    double *on;    /* linear mixers: rmsnorm(o, onorm) per (n, head)           */
    double *zr;    /* [N, r] x Wog (a gate of rank r)                          */
    double *zo;    /* linear mixers with a gate: its input z (x Wog at full rank) */
    double *so;    /* linear mixers with a gate: act(z)                        */
    double *og;    /* linear mixers with a gate: on * so, what Wo reads        */
};

void kdalab_mixer_cache_free(kdalab_mixer_cache *cache)
{
    if (!cache)
        return;
    for (int i = 0; i < 3; i++) {
        free(cache->a[i]);
        free(cache->c[i]);
        free(cache->s[i]);
    }
    double *rest[] = {cache->qn, cache->kn, cache->zb, cache->beta, cache->zf, cache->zg,
                      cache->g,  cache->sp, cache->sg, cache->o,    cache->on, cache->zr,
                      cache->zo, cache->so, cache->og};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
        free(rest[i]);
    free(cache);
}

/* ---- small pieces ------------------------------------------------------------ */

static int is_linear(kdalab_mixer_kind kind) { return kind != KDALAB_MIXER_ATTENTION; }
static int has_outgate(const kdalab_mixer_config *cfg)
{
    return is_linear(cfg->kind) && cfg->gate != KDALAB_OUTPUT_GATE_NONE;
}

/* Gate width per head: 1 (a decay per head), d (per key channel), 0 (none). */
static size_t gate_width(const kdalab_mixer_config *cfg)
{
    const kdalab_g_shape gs = train_g_shape_of(cfg->kind);
    return gs == KDALAB_G_PER_HEAD ? 1 : gs == KDALAB_G_PER_KEY ? cfg->D / cfg->H : 0;
}

/* Remember the first KDALAB_ERANGE in *range; any other failure is returned. */
static kdalab_status keep_range(kdalab_status s, kdalab_status *range)
{
    if (s == KDALAB_ERANGE) {
        if (*range == KDALAB_OK)
            *range = s;
        return KDALAB_OK;
    }
    return s;
}

/* ---- checks --------------------------------------------------------------------- */

/* The mixer's tensors in kdalab_mixer_params' (and _grads') order, and how
 * many elements of each this config uses (0: unused). cfg checked. */
static const char *const tensor_name[MIX_N] = {"Wq", "Wk", "Wv", "Wo", "cq", "ck", "cv", "Wb",
    "Wa", "Wg", "Wg2", "A_log", "dt_bias", "Wog", "onorm", "Wog2", "bog"};

static void tensor_sizes(const kdalab_mixer_config *cfg, size_t n[MIX_N])
{
    const size_t D = cfg->D, H = cfg->H, conv = cfg->conv ? TRAIN_CONV_W * D : 0;
    const kdalab_g_shape gs = train_g_shape_of(cfg->kind);
    const int per_key = gs == KDALAB_G_PER_KEY, linear = is_linear(cfg->kind);
    size_t og[3];
    train_outgate_sizes(cfg, og);
    const size_t sizes[MIX_N] = {
        D * D, D * D, D * D, D * D, conv, conv, conv,
        train_has_beta(cfg->kind) ? D * H : 0,
        gs == KDALAB_G_PER_HEAD ? D * H : 0,
        per_key ? D * (D / H) : 0, per_key ? D * (D / H) : 0,
        gate_width(cfg) ? H : 0, H * gate_width(cfg),
        og[0], linear ? D / H : 0, og[1], og[2]};
    memcpy(n, sizes, sizeof sizes);
}

/* The config, the sizes (*N = B * T rows), every weight the config uses, x. */
static kdalab_status check(const kdalab_mixer_config *cfg, const kdalab_mixer_params *p,
                           size_t B, size_t T, const double *x, size_t *N)
{
    if (!cfg || !p)
        return kdalab_fail(KDALAB_ENULL, "mixer: %s is NULL", cfg ? "params" : "config");
    if ((int)cfg->kind < 0 || cfg->kind >= KDALAB_N_MIXERS)
        return kdalab_fail(KDALAB_EINVAL, "mixer: unknown kind %d", (int)cfg->kind);
    if (train_unserved(cfg->kind))
        return kdalab_fail(KDALAB_EINVAL, "mixer: %s has no training mixer (its a, b would "
                           "need projections of their own)", kdalab_mixer_name(cfg->kind));
    const size_t D = cfg->D, H = cfg->H;
    if (B == 0 || T == 0 || D == 0 || H == 0)
        return kdalab_fail(KDALAB_ESIZE, "mixer: B = %zu, T = %zu, D = %zu, H = %zu: "
                           "each must be >= 1", B, T, D, H);
    if (D % H)
        return kdalab_fail(KDALAB_ESIZE, "mixer: D = %zu is not a multiple of H = %zu", D, H);
    if ((int)cfg->gate < 0 || cfg->gate > KDALAB_OUTPUT_GATE_NONE)
        return kdalab_fail(KDALAB_EINVAL, "mixer: unknown output gate %d", (int)cfg->gate);
    if (cfg->gate_rank && cfg->gate == KDALAB_OUTPUT_GATE_NONE)
        return kdalab_fail(KDALAB_EINVAL, "mixer: gate_rank %zu with no output gate",
                           cfg->gate_rank);
    if (cfg->gate_rank > D)
        return kdalab_fail(KDALAB_ESIZE, "mixer: gate_rank %zu above D = %zu", cfg->gate_rank, D);
    size_t DD, ND, bytes;
    if (!kdalab_mul_size(B, T, N) || !kdalab_mul_size(*N, D, &ND) ||
        !kdalab_mul_size(ND, sizeof(double), &bytes) || !kdalab_mul_size(D, D, &DD) ||
        !kdalab_mul_size(DD, sizeof(double), &bytes) || ND > INT32_MAX || DD > INT32_MAX)
        return kdalab_fail(KDALAB_EOVERFLOW, "mixer: B * T * D = %zu * %zu * %zu overflows",
                           B, T, D);
    const double *w[MIX_N] = {p->Wq, p->Wk, p->Wv, p->Wo, p->cq, p->ck, p->cv, p->Wb, p->Wa,
                              p->Wg, p->Wg2, p->A_log, p->dt_bias, p->Wog, p->onorm, p->Wog2,
                              p->bog};
    size_t n[MIX_N];
    tensor_sizes(cfg, n);
    kdalab_status s = KDALAB_OK;
    for (int i = 0; i < MIX_N && s == KDALAB_OK; i++)
        if (n[i] && !w[i])
            s = kdalab_fail(KDALAB_ENULL, "mixer: %s is NULL", tensor_name[i]);
        else if (n[i])
            s = kdalab_check_values_f64(KDALAB_RULE_FINITE, tensor_name[i], w[i], n[i], NULL);
    if (s == KDALAB_OK && !x)
        s = kdalab_fail(KDALAB_ENULL, "mixer: x is NULL");
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "x", x, ND, NULL);
    return s;
}

/* The backward's outputs, dx [N, D] and every gradient asked for, checked for
 * non-finite values: KDALAB_ERANGE naming the first (the inputs were finite). */
static kdalab_status check_backward_outputs(const kdalab_mixer_config *cfg, size_t N,
                                            const double *dx, const kdalab_mixer_grads *g)
{
    const double *w[MIX_N] = {g->Wq, g->Wk, g->Wv, g->Wo, g->cq, g->ck, g->cv, g->Wb, g->Wa,
                              g->Wg, g->Wg2, g->A_log, g->dt_bias, g->Wog, g->onorm, g->Wog2,
                              g->bog};
    size_t n[MIX_N];
    tensor_sizes(cfg, n);
    kdalab_status s = dx ? kdalab_check_outputs_f64("mixer backward", dx, N * cfg->D, NULL, 0,
                                                    NULL, NULL)
                         : KDALAB_OK;
    for (int i = 0; i < MIX_N && s == KDALAB_OK; i++)
        if (n[i] && w[i] &&
            kdalab_check_values_f64(KDALAB_RULE_FINITE, tensor_name[i], w[i], n[i], NULL) !=
                KDALAB_OK)
            s = kdalab_fail(KDALAB_ERANGE, "mixer backward: the gradient of %s overflowed "
                            "(outputs written)", tensor_name[i]);
    return s;
}

/* A cache with every array the config needs, or NULL. */
static kdalab_mixer_cache *cache_new(const kdalab_mixer_config *cfg, size_t B, size_t T)
{
    kdalab_mixer_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->B = B;
    c->T = T;
    const size_t N = B * T, ND = N * cfg->D, NH = N * cfg->H, gw = gate_width(cfg);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        ok &= (c->a[i] = malloc(ND * sizeof(double))) != NULL;
        ok &= (c->c[i] = malloc(ND * sizeof(double))) != NULL;
        ok &= (c->s[i] = malloc(ND * sizeof(double))) != NULL;
    }
    ok &= (c->o = malloc(ND * sizeof(double))) != NULL;
    if (is_linear(cfg->kind)) {
        ok &= (c->qn = malloc(ND * sizeof(double))) != NULL;
        ok &= (c->kn = malloc(ND * sizeof(double))) != NULL;
        ok &= (c->on = malloc(ND * sizeof(double))) != NULL;
    }
    if (has_outgate(cfg)) {
        ok &= (c->zo = malloc(ND * sizeof(double))) != NULL;
        ok &= (c->so = malloc(ND * sizeof(double))) != NULL;
        ok &= (c->og = malloc(ND * sizeof(double))) != NULL;
        if (cfg->gate_rank)
            ok &= (c->zr = malloc(N * cfg->gate_rank * sizeof(double))) != NULL;
    }
    if (train_g_shape_of(cfg->kind) == KDALAB_G_PER_KEY)
        ok &= (c->zf = malloc(N * (cfg->D / cfg->H) * sizeof(double))) != NULL;
    if (train_has_beta(cfg->kind)) {
        ok &= (c->zb = malloc(NH * sizeof(double))) != NULL;
        ok &= (c->beta = malloc(NH * sizeof(double))) != NULL;
    }
    if (gw) {
        ok &= (c->zg = malloc(NH * gw * sizeof(double))) != NULL;
        ok &= (c->g = malloc(NH * gw * sizeof(double))) != NULL;
        ok &= (c->sp = malloc(NH * gw * sizeof(double))) != NULL;
        ok &= (c->sg = malloc(NH * gw * sizeof(double))) != NULL;
    }
    if (!ok) {
        kdalab_mixer_cache_free(c);
        return NULL;
    }
    return c;
}

/* ---- forward ---------------------------------------------------------------------- */

/* An overflow before the mechanism: o is NaN, so y shows it. */
static kdalab_status nan_output(kdalab_mixer_cache *c, kdalab_status s)
{
    for (size_t i = 0; i < c->B * c->T * c->cfg.D; i++) {
        c->o[i] = NAN;
        if (c->on)
            c->on[i] = NAN;
        if (c->og)
            c->og[i] = NAN;
    }
    return s;
}

/* Fill the cache from x; *range gets KDALAB_ERANGE if a step overflowed. */
static kdalab_status forward(const kdalab_mixer_config *cfg, const kdalab_mixer_params *p,
                             const double *x, kdalab_mixer_cache *c, kdalab_status *range)
{
    const size_t B = c->B, T = c->T, N = B * T, D = cfg->D, H = cfg->H, d = D / H;
    const double *W[3] = {p->Wq, p->Wk, p->Wv}, *Cw[3] = {p->cq, p->ck, p->cv};
    kdalab_status s = KDALAB_OK;
    // q, k, v: a = x W [N, D]; c = conv(a) [N, D]; s = silu(c) [N, D]
    for (int i = 0; i < 3; i++) {
        kdalab__train_mm_f64(N, D, D, x, W[i], c->a[i], 0);
        if (cfg->conv)
            kdalab__train_short_conv_fwd_f64(B, T, D, TRAIN_CONV_W, c->a[i], Cw[i], c->c[i]);
        else
            memcpy(c->c[i], c->a[i], N * D * sizeof(double));
        kdalab__train_silu_fwd_f64(N * D, c->c[i], c->s[i]);
        /* x and the weights are finite: a non-finite q, k or v is an overflow */
        if (kdalab_check_values_f64(KDALAB_RULE_FINITE, "q, k, v", c->s[i], N * D, NULL) !=
            KDALAB_OK)
            *range = KDALAB_ERANGE;
    }
    if (*range != KDALAB_OK)
        return nan_output(c, KDALAB_OK); /* the mechanism would refuse a non-finite q, k or v */
    const kdalab_dims dims = {B, T, H, d, d};
    const double scale = 1 / sqrt((double)d);
    if (!is_linear(cfg->kind))
        return keep_range(
            kdalab__attention_tiled_fwd_f64(&dims, scale, c->s[0], c->s[1], c->s[2], c->o), range);
    // the linear mixers: qn, kn [N, H, d]; beta [N, H]; g [N, H] or [N, H, d]
    kdalab__train_l2norm_fwd_f64(N * H, d, TRAIN_L2_EPS, c->s[0], c->qn);
    kdalab__train_l2norm_fwd_f64(N * H, d, TRAIN_L2_EPS, c->s[1], c->kn);
    if (train_has_beta(cfg->kind)) {
        kdalab__train_mm_f64(N, D, H, x, p->Wb, c->zb, 0);
        for (size_t r = 0; r < N * H; r++)
            c->beta[r] = train_sigmoid_f64(c->zb[r]);
    }
    const size_t gw = gate_width(cfg);
    if (gw) {
        /* a per-head gate is a per-key one with one channel per head (by the
         * row's g shape, not by width: a per-key gate with d = 1 also has one
         * channel per head, through Wg, Wg2) */
        if (train_g_shape_of(cfg->kind) == KDALAB_G_PER_HEAD) {
            kdalab__train_mm_f64(N, D, H, x, p->Wa, c->zg, 0);
        } else {
            kdalab__train_mm_f64(N, D, d, x, p->Wg, c->zf, 0);
            kdalab__train_mm_f64(N, d, D, c->zf, p->Wg2, c->zg, 0);
        }
        s = keep_range(kdalab__kda_gate_keep_f64(N, H, gw, c->zg, p->A_log, p->dt_bias, c->g,
                                                 c->sp, c->sg),
                       range);
        if (s != KDALAB_OK || *range != KDALAB_OK)
            return nan_output(c, s);
    }
    const kdalab_mechanism mech = train_mechanism_of(cfg->kind);
    s = keep_range(kdalab_simd_chunk_f64(&dims, mech, scale, c->qn, c->kn, c->s[2], c->g,
                                         c->beta, NULL, c->o, NULL, NULL, NULL),
                   range);
    if (s != KDALAB_OK || *range != KDALAB_OK)
        return s == KDALAB_OK ? nan_output(c, s) : s;
    // the gated output norm: og = rmsnorm(o, onorm) * act(z) [N, H, d], z = x Wog
    // (or (x Wog) Wog2 + bog), act sigmoid or swish; with no gate, og = on
    kdalab__train_rmsnorm_fwd_f64(N * H, d, TRAIN_ONORM_EPS, c->o, p->onorm, c->on);
    if (!has_outgate(cfg))
        return KDALAB_OK;
    kdalab__train_outgate_fwd_f64(cfg, N, x, p->Wog, p->Wog2, p->bog, c->zr, c->zo, c->so);
#pragma omp simd
    for (size_t i = 0; i < N * D; i++)
        c->og[i] = c->on[i] * c->so[i];
    return KDALAB_OK;
}

/* What the output projection reads: the gated norm's output (linear mixers;
 * the norm's alone with no gate) or the mechanism's. */
static const double *mixer_out(const kdalab_mixer_cache *c)
{
    return !is_linear(c->cfg.kind) ? c->o : has_outgate(&c->cfg) ? c->og : c->on;
}

kdalab_status kdalab__train_mixer_fwd_f64(const kdalab_mixer_config *cfg,
                                          const kdalab_mixer_params *p, size_t B, size_t T,
                                          const double *x, double *y, kdalab_mixer_cache **cache)
{
    // x, y are (B, T, D); the weights as kdalab_mixer_params says
    kdalab_mixer_cache *c = cache_new(cfg, B, T);
    if (!c)
        return kdalab_fail(KDALAB_ENOMEM, "mixer: cannot allocate the cache");
    kdalab_status range = KDALAB_OK;
    kdalab_status s = forward(cfg, p, x, c, &range);
    if (s != KDALAB_OK) {
        kdalab_mixer_cache_free(c);
        return s;
    }
    kdalab__train_mm_f64(B * T, cfg->D, cfg->D, mixer_out(c), p->Wo, y, 0);
    kdalab_mixer_cache_free(*cache);
    *cache = c;
    if (range != KDALAB_OK)
        return kdalab_fail(range, "mixer: an intermediate overflowed (y written)");
    return KDALAB_OK;
}

kdalab_status kdalab_mixer_fwd_f64(const kdalab_mixer_config *cfg, const kdalab_mixer_params *p,
                                   size_t B, size_t T, const double *x, double *y,
                                   kdalab_mixer_cache **cache)
{
    // x, y are (B, T, D); the weights as kdalab_mixer_params says
    kdalab_clear_error();
    size_t N;
    kdalab_status s = check(cfg, p, B, T, x, &N);
    if (s == KDALAB_OK && !y)
        s = kdalab_fail(KDALAB_ENULL, "mixer: y is NULL");
    if (s != KDALAB_OK)
        return s;
    kdalab_mixer_cache *c = NULL;
    s = kdalab__train_mixer_fwd_f64(cfg, p, B, T, x, y, &c);
    if (cache && c) {
        kdalab_mixer_cache_free(*cache);
        *cache = c;
    } else {
        kdalab_mixer_cache_free(c);
    }
    if (s == KDALAB_OK)
        s = kdalab_check_outputs_f64("mixer", y, N * cfg->D, NULL, 0, NULL, NULL);
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}

/* ---- backward --------------------------------------------------------------------- */

/* Scratch for the backward: gradients of the cache's arrays. */
typedef struct {
    double *dO;      /* [N, D] dL/do                                    */
    double *ds[3];   /* [N, D] dL/d silu(c) for q, k, v                  */
    double *dn[2];   /* [N, D] dL/dqn, dL/dkn                            */
    double *dc;      /* [N, D] dL/dc, then dL/da (one of q, k, v at a time) */
    double *da;      /* [N, D] dL/da with conv on                        */
    double *dbeta;   /* [N, H]                                           */
    double *dg;      /* [N, H * gw]                                      */
    double *dog;     /* [N, D] dL/d og (linear mixers), then dL/d on     */
    double *dzo;     /* [N, D] dL/d act(z), then dL/dz (a gate's input)   */
    double *dzr;     /* [N, r] dL/d (x Wog) (a gate of rank r)           */
    double *dzf;     /* [N, d] dL/d (x Wg) (KDA)                         */
    double *donorm;  /* [d] dL/d onorm, copied out once nothing can fail  */
} scratch;

static void scratch_free(scratch *w)
{
    double *all[] = {w->dO, w->ds[0], w->ds[1], w->ds[2], w->dn[0], w->dn[1], w->dc,
                     w->da, w->dbeta, w->dg, w->dog, w->dzo, w->dzr, w->dzf, w->donorm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static int scratch_new(scratch *w, size_t N, size_t D, size_t H, size_t gw, size_t r)
{
    memset(w, 0, sizeof *w);
    int ok = (w->dO = malloc(N * D * sizeof(double))) != NULL;
    for (int i = 0; i < 3; i++)
        ok &= (w->ds[i] = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->dn[0] = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->dn[1] = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->dc = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->da = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->dbeta = malloc(N * H * sizeof(double))) != NULL;
    ok &= (w->dg = malloc((gw ? N * H * gw : 1) * sizeof(double))) != NULL;
    ok &= (w->dog = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->dzo = malloc(N * D * sizeof(double))) != NULL;
    ok &= (w->dzr = malloc(N * (r ? r : 1) * sizeof(double))) != NULL;
    ok &= (w->dzf = malloc(N * (D / H) * sizeof(double))) != NULL;
    ok &= (w->donorm = malloc((D / H) * sizeof(double))) != NULL;
    if (!ok)
        scratch_free(w);
    return ok;
}

/* The mechanism's backward: dL/do -> dL/d silu(c) for q, k, v, and dbeta, dg. */
static kdalab_status mechanism_bwd(const kdalab_mixer_config *cfg, const kdalab_mixer_cache *c,
                                   scratch *w, kdalab_status *range)
{
    const size_t N = c->B * c->T, H = cfg->H, d = cfg->D / H;
    const kdalab_dims dims = {c->B, c->T, H, d, d};
    const double scale = 1 / sqrt((double)d);
    if (!is_linear(cfg->kind))
        return keep_range(kdalab__attention_tiled_bwd_f64(&dims, scale, c->s[0], c->s[1], c->s[2],
                                                          c->o, w->dO, w->ds[0], w->ds[1],
                                                          w->ds[2]),
                          range);
    /* at the SIMD path's default chunk, as the forward */
    kdalab_status s = keep_range(
        kdalab_simd_chunk_bwd_f64(&dims, train_mechanism_of(cfg->kind), scale, c->qn, c->kn,
                                  c->s[2], c->g, c->beta, NULL, w->dO, NULL, w->dn[0], w->dn[1],
                                  w->ds[2], w->dg, w->dbeta, NULL, NULL),
        range);
    if (s != KDALAB_OK)
        return s;
    kdalab__train_l2norm_bwd_f64(N * H, d, TRAIN_L2_EPS, c->s[0], c->qn, w->dn[0], w->ds[0]);
    kdalab__train_l2norm_bwd_f64(N * H, d, TRAIN_L2_EPS, c->s[1], c->kn, w->dn[1], w->ds[1]);
    return KDALAB_OK;
}

kdalab_status kdalab__train_mixer_bwd_f64(const kdalab_mixer_config *cfg,
                                          const kdalab_mixer_params *p, size_t B, size_t T,
                                          const double *x, const kdalab_mixer_cache *cache,
                                          const double *dy, double *dx, const kdalab_mixer_grads *g)
{
    // x, dy, dx are (B, T, D); the gradients have their weights' shapes
    const size_t N = B * T;
    kdalab_status s = KDALAB_OK;
    const size_t D = cfg->D, H = cfg->H, gw = gate_width(cfg);
    const kdalab_mixer_grads none = {0};
    if (!g)
        g = &none;
    scratch w;
    if (!scratch_new(&w, N, D, H, gw, cfg->gate_rank))
        return kdalab_fail(KDALAB_ENOMEM, "mixer backward: cannot allocate scratch");
    kdalab_status range = KDALAB_OK;
    const kdalab_mixer_cache *c = cache;

    // do = dy Wo^T [N, D] (through the gated output norm for the linear mixers);
    // then the mechanism back to q, k, v (after SiLU), beta, g
    const size_t d = D / H;
    if (is_linear(cfg->kind)) {
        kdalab__train_mm_bwd_f64(N, D, D, NULL, p->Wo, dy, NULL, w.dog, 0);
        if (has_outgate(cfg)) {
#pragma omp simd
            for (size_t i = 0; i < N * D; i++) {
                w.dzo[i] = w.dog[i] * c->on[i];
                w.dog[i] *= c->so[i]; /* now dL/d on */
            }
        }
        kdalab__train_rmsnorm_bwd_f64(N * H, d, TRAIN_ONORM_EPS, c->o, p->onorm, w.dog, w.dO,
                                      w.donorm);
    } else {
        kdalab__train_mm_bwd_f64(N, D, D, NULL, p->Wo, dy, NULL, w.dO, 0);
    }
    if (s == KDALAB_OK)
        s = mechanism_bwd(cfg, c, &w, &range);
    if (s != KDALAB_OK) {
        scratch_free(&w);
        return s;
    }
    /* from here on only this file's loops and step-1 backwards: outputs get written */
    if (g->onorm && is_linear(cfg->kind))
        memcpy(g->onorm, w.donorm, d * sizeof(double));
    kdalab__train_mm_bwd_f64(N, D, D, mixer_out(c), p->Wo, dy, g->Wo, NULL, 0);
    if (dx)
        memset(dx, 0, N * D * sizeof *dx);
    if (has_outgate(cfg)) /* dL/d act(z) -> dL/dz in place, then the gate's weights, dx */
        kdalab__train_outgate_bwd_f64(cfg, N, x, p->Wog, p->Wog2, c->zr, c->zo, c->so, w.dzo,
                                      w.dzo, w.dzr, g->Wog, g->Wog2, g->bog, dx);

    // beta = sigmoid(zb): dzb = dbeta beta (1 - beta) [N, H], reusing dbeta
    if (train_has_beta(cfg->kind)) {
        for (size_t r = 0; r < N * H; r++)
            w.dbeta[r] *= c->beta[r] * (1 - c->beta[r]);
        kdalab__train_mm_bwd_f64(N, D, H, x, p->Wb, w.dbeta, g->Wb, dx, 1);
    }
    // the gate: dg -> dzg [N, H * gw] (in w.dc), dA_log, ddt_bias
    if (gw && s == KDALAB_OK) {
        s = keep_range(kdalab__kda_gate_bwd_kept_f64(N, H, gw, c->zg, p->A_log, p->dt_bias,
                                                     c->sp, c->sg, w.dg, w.dc, g->A_log,
                                                     g->dt_bias),
                       &range);
        if (s == KDALAB_OK && train_g_shape_of(cfg->kind) == KDALAB_G_PER_HEAD) {
            kdalab__train_mm_bwd_f64(N, D, H, x, p->Wa, w.dc, g->Wa, dx, 1);
        } else if (s == KDALAB_OK) { /* zg = (x Wg) Wg2 */
            memset(w.dzf, 0, N * d * sizeof(double));
            kdalab__train_mm_bwd_f64(N, d, D, c->zf, p->Wg2, w.dc, g->Wg2, w.dzf, 1);
            kdalab__train_mm_bwd_f64(N, D, d, x, p->Wg, w.dzf, g->Wg, dx, 1);
        }
    }
    // q, k, v: silu, then the convolution, then the projection
    const double *W[3] = {p->Wq, p->Wk, p->Wv}, *Cw[3] = {p->cq, p->ck, p->cv};
    double *dW[3] = {g->Wq, g->Wk, g->Wv}, *dC[3] = {g->cq, g->ck, g->cv};
    for (int i = 0; i < 3 && s == KDALAB_OK; i++) {
        kdalab__train_silu_bwd_f64(N * D, c->c[i], w.ds[i], w.dc);
        double *da = w.dc;
        if (cfg->conv) {
            kdalab__train_short_conv_bwd_f64(B, T, D, TRAIN_CONV_W, c->a[i], Cw[i], w.dc, w.da,
                                             dC[i]);
            da = w.da;
        }
        kdalab__train_mm_bwd_f64(N, D, D, x, W[i], da, dW[i], dx, 1);
    }
    scratch_free(&w);
    if (s == KDALAB_OK && range != KDALAB_OK)
        s = kdalab_fail(range, "mixer backward: an intermediate overflowed (outputs written)");
    return s;
}

kdalab_status kdalab_mixer_bwd_f64(const kdalab_mixer_config *cfg, const kdalab_mixer_params *p,
                                   size_t B, size_t T, const double *x,
                                   const kdalab_mixer_cache *cache, const double *dy,
                                   double *dx, const kdalab_mixer_grads *g)
{
    // x, dy, dx are (B, T, D); the gradients have their weights' shapes
    kdalab_clear_error();
    size_t N;
    kdalab_status s = check(cfg, p, B, T, x, &N);
    if (s == KDALAB_OK && !cache)
        s = kdalab_fail(KDALAB_ENULL, "mixer backward: cache is NULL");
    if (s == KDALAB_OK && (cache->B != B || cache->T != T || cache->cfg.kind != cfg->kind ||
                           cache->cfg.D != cfg->D || cache->cfg.H != cfg->H ||
                           !cache->cfg.conv != !cfg->conv || cache->cfg.gate != cfg->gate ||
                           cache->cfg.gate_rank != cfg->gate_rank))
        s = kdalab_fail(KDALAB_EINVAL, "mixer backward: the cache is of another config or size");
    if (s == KDALAB_OK && !dy)
        s = kdalab_fail(KDALAB_ENULL, "mixer backward: dy is NULL");
    if (s == KDALAB_OK)
        s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "dy", dy, N * cfg->D, NULL);
    if (s == KDALAB_OK)
        s = kdalab__train_mixer_bwd_f64(cfg, p, B, T, x, cache, dy, dx, g);
    if (s == KDALAB_OK)
        s = check_backward_outputs(cfg, N, dx, g ? g : &(const kdalab_mixer_grads){0});
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}
