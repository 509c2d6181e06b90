/*
 * lib/batch/batch.c — fla's varlen (cu_seqlens) and GVA batch layouts for
 * every form: each (sequence, value head) is gathered into a plain
 * one-sequence, one-head call of the chosen form, and its results scattered
 * back (see kdalab_batch.h for the layouts).
 *
 * defines: kdalab_batch_check, kdalab_batch_n_seqs, kdalab_batch_f64,
 *          kdalab_batch_f32, kdalab_batch_bwd_f64
 *
 * One driver serves float64 and float32, forward and backward: rows are
 * moved by memcpy of `es` bytes per element, and the form is a callback on a
 * gathered piece. The whole call is validated before anything runs, and the
 * outputs are assembled in scratch, copied out only at the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kdalab_batch.h"
#include "kdalab_grad.h"
#include "kdalab_simd.h"

kdalab_status kdalab_batch_check(const kdalab_batch *batch, const kdalab_dims *dims)
{
    kdalab_clear_error();
    if (!batch || !dims)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", !batch ? "batch" : "dims");
    if (dims->B == 0 || dims->H == 0 || dims->K == 0 || dims->V == 0)
        return kdalab_fail(KDALAB_ESIZE, "B=%zu H=%zu K=%zu V=%zu: B, H, K and V must be >= 1",
                           dims->B, dims->H, dims->K, dims->V);
    const size_t HV = batch->HV;
    if (HV == 0)
        return kdalab_fail(KDALAB_ESIZE, "HV = 0 value heads: HV must be >= 1 (H = %zu for a "
                                         "plain batch)",
                           dims->H);
    if (HV % dims->H != 0)
        return kdalab_fail(KDALAB_ESIZE,
                           "HV = %zu value heads is not a multiple of H = %zu query/key heads",
                           HV, dims->H);
    /* v, o [B, T, HV, V] and a state per head [HV, K, V], in bytes of a double */
    size_t bytes;
    if (!kdalab_mul_size(dims->B, dims->T, &bytes) || !kdalab_mul_size(bytes, HV, &bytes) ||
        !kdalab_mul_size(bytes, dims->V, &bytes) ||
        !kdalab_mul_size(bytes, sizeof(double), &bytes) ||
        !kdalab_mul_size(HV, dims->K, &bytes) || !kdalab_mul_size(bytes, dims->V, &bytes) ||
        !kdalab_mul_size(bytes, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "HV = %zu value heads with B = %zu, T = %zu, K = %zu, V = %zu: the "
                           "value or state arrays' sizes overflow size_t",
                           HV, dims->B, dims->T, dims->K, dims->V);
    if (!batch->cu_seqlens)
        return KDALAB_OK;
    const int64_t *cu = batch->cu_seqlens;
    if (dims->B != 1)
        return kdalab_fail(KDALAB_ESIZE, "cu_seqlens needs B = 1 (the sequences are packed "
                                         "along T), got B = %zu",
                           dims->B);
    if (batch->n_seqs == 0)
        return kdalab_fail(KDALAB_ESIZE, "cu_seqlens with n_seqs = 0: at least one sequence");
    if (batch->n_seqs - 1 > dims->T) /* n_seqs >= 1: no wrap */
        return kdalab_fail(KDALAB_EINVAL,
                           "cu_seqlens: %zu sequences cannot be strictly increasing within "
                           "T = %zu",
                           batch->n_seqs, dims->T);
    if (cu[0] != 0)
        return kdalab_fail(KDALAB_EINVAL, "cu_seqlens[0] = %lld: the first boundary must be 0",
                           (long long)cu[0]);
    for (size_t n = 1; n <= batch->n_seqs; n++)
        if (cu[n] <= cu[n - 1])
            return kdalab_fail(KDALAB_EINVAL,
                               "cu_seqlens[%zu] = %lld is not greater than cu_seqlens[%zu] = "
                               "%lld: boundaries must strictly increase",
                               n, (long long)cu[n], n - 1, (long long)cu[n - 1]);
    if ((uint64_t)cu[batch->n_seqs] != dims->T)
        return kdalab_fail(KDALAB_EINVAL,
                           "cu_seqlens[%zu] = %lld: the last boundary must be T = %zu",
                           batch->n_seqs, (long long)cu[batch->n_seqs], dims->T);
    return KDALAB_OK;
}

size_t kdalab_batch_n_seqs(const kdalab_batch *batch, const kdalab_dims *dims)
{
    return batch && batch->cu_seqlens ? batch->n_seqs : dims ? dims->B : 0;
}

/* ---- the driver ------------------------------------------------------------ */

/* One call: the layout, the arrays (float64 or float32, es bytes each) and
 * the form to run on each piece. */
typedef struct {
    kdalab_form form;
    kdalab_mechanism mech;
    size_t es;                 /* bytes per element: 8 or 4                   */
    double scale;
    const kdalab_chunk_opts *opts;
    size_t B, T, H, HV, G, K, V, gw, N;
    const int64_t *cu;         /* NULL: B sequences of T                       */
    const void *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
    int bwd;
} call;

/* One (sequence, value head), gathered: L positions of one head. */
typedef struct {
    kdalab_dims d;                  /* {1, L, 1, K, V}                        */
    void *q, *k, *v, *g, *beta, *h0; // (L, K), (L, K), (L, V), (L, gw), (L), (K, V)
    void *d_o, *dht;                 // (L, V), (K, V)
    void *o, *ht;                    // forward: (L, V), (K, V)
    void *dq, *dk, *dv, *dg, *dbeta, *dh0; // backward: like the inputs
} piece;

/* The form on one piece. */
static kdalab_status run_piece(const call *c, piece *p)
{
    const kdalab_dims *d = &p->d;
    const void *h0 = c->h0 ? p->h0 : NULL, *dht = c->dht ? p->dht : NULL;
    if (c->bwd) {
        if (c->form == KDALAB_FORM_SIMD_CHUNK)
            return kdalab_simd_chunk_bwd_f64(d, c->mech, c->scale, p->q, p->k, p->v, p->g,
                                             p->beta, h0, p->d_o, dht, p->dq, p->dk, p->dv,
                                             p->dg, p->dbeta, p->dh0, c->opts);
        if (c->form == KDALAB_FORM_RECURRENT)
            return kdalab_recurrent_bwd_f64(d, c->mech, c->scale, p->q, p->k, p->v, p->g,
                                            p->beta, h0, p->d_o, dht, p->dq, p->dk, p->dv,
                                            p->dg, p->dbeta, p->dh0);
        return kdalab_chunk_bwd_f64(d, c->mech, c->scale, p->q, p->k, p->v, p->g, p->beta, h0,
                                    p->d_o, dht, p->dq, p->dk, p->dv, p->dg, p->dbeta, p->dh0,
                                    c->opts);
    }
    if (c->es == 8 && c->form == KDALAB_FORM_RECURRENT)
        return kdalab_recurrent_f64(d, c->mech, c->scale, p->q, p->k, p->v, p->g, p->beta, h0,
                                    p->o, p->ht);
    if (c->es == 8 && c->form == KDALAB_FORM_CHUNK)
        return kdalab_chunk_f64(d, c->mech, c->scale, p->q, p->k, p->v, p->g, p->beta, h0, p->o,
                                p->ht, c->opts, NULL);
    if (c->es == 8) /* KDALAB_FORM_SIMD_CHUNK (setup refused SIMD_RECURRENT) */
        return kdalab_simd_chunk_f64(d, c->mech, c->scale, p->q, p->k, p->v, p->g, p->beta, h0,
                                     p->o, p->ht, c->opts, NULL);
    float s = (float)c->scale;
    switch (c->form) {
    case KDALAB_FORM_RECURRENT:
        return kdalab_recurrent_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, h0, p->o,
                                    p->ht);
    case KDALAB_FORM_CHUNK:
        return kdalab_chunk_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, h0, p->o,
                                p->ht, c->opts, NULL);
    case KDALAB_FORM_SIMD_RECURRENT:
        return kdalab_simd_recurrent_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, h0,
                                         p->o, p->ht);
    default:
        return kdalab_simd_chunk_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, h0, p->o,
                                     p->ht, c->opts, NULL);
    }
}

/* Rows t0 .. t0+L-1 of head h of an array [B, T, heads, width] <-> a
 * contiguous (L, width) block. */
static void gather(void *dst, const void *src, const call *c, size_t b, size_t t0, size_t L,
                   size_t heads, size_t h, size_t width)
{
    for (size_t r = 0; r < L; r++)
        memcpy((char *)dst + r * width * c->es,
               (const char *)src + (((b * c->T + t0 + r) * heads + h) * width) * c->es,
               width * c->es);
}

static void scatter(void *dst, const void *src, const call *c, size_t b, size_t t0, size_t L,
                    size_t heads, size_t h, size_t width)
{
    for (size_t r = 0; r < L; r++)
        memcpy((char *)dst + (((b * c->T + t0 + r) * heads + h) * width) * c->es,
               (const char *)src + r * width * c->es, width * c->es);
}

/* dst rows += src rows (the G value heads that read one query/key head). */
static void scatter_add(void *dst, const void *src, const call *c, size_t b, size_t t0,
                        size_t L, size_t h, size_t width)
{
    for (size_t r = 0; r < L; r++)
        for (size_t x = 0; x < width; x++) {
            size_t at = ((b * c->T + t0 + r) * c->H + h) * width + x;
            ((double *)dst)[at] += ((const double *)src)[r * width + x];
        }
}

/* The whole call's values, by the library's rules, before anything runs. */
static kdalab_status check_values(const call *c)
{
    /* dims were checked: no shape overflows. Each array with its shape, so a
     * message names the caller's index (g[0, 17, 2, 5]); ndim 0: the array is
     * not in this call */
    const struct {
        const char *name;
        const void *x;
        int ndim;
        size_t shape[4];
        kdalab_value_rule rule;
    } arr[] = {{"q", c->q, 4, {c->B, c->T, c->H, c->K}, KDALAB_RULE_FINITE},
               {"k", c->k, 4, {c->B, c->T, c->H, c->K}, KDALAB_RULE_FINITE},
               {"v", c->v, 4, {c->B, c->T, c->HV, c->V}, KDALAB_RULE_FINITE},
               {"g", c->g, c->gw == 0 ? 0 : c->gw == 1 ? 3 : 4, {c->B, c->T, c->HV, c->gw},
                KDALAB_RULE_LOG_DECAY},
               {"beta", c->beta, kdalab_mechanism_has_beta(c->mech) ? 3 : 0,
                {c->B, c->T, c->HV}, KDALAB_RULE_BETA},
               {"h0", c->h0, c->h0 ? 4 : 0, {c->N, c->HV, c->K, c->V}, KDALAB_RULE_FINITE},
               {"d_o", c->d_o, c->bwd ? 4 : 0, {c->B, c->T, c->HV, c->V}, KDALAB_RULE_FINITE},
               {"dht", c->dht, c->dht ? 4 : 0, {c->N, c->HV, c->K, c->V}, KDALAB_RULE_FINITE}};
    kdalab_status s = kdalab_check_scale(c->scale);
    for (size_t a = 0; s == KDALAB_OK && a < sizeof arr / sizeof arr[0]; a++)
        if (arr[a].ndim)
            s = kdalab_check_values_nd(arr[a].rule, arr[a].name, arr[a].x, c->es != 8,
                                       arr[a].ndim, arr[a].shape);
    return s;
}

/* The outputs, each (size in elements, destination, scratch). */
enum { O_O, O_HT, O_DQ, O_DK, O_DV, O_DG, O_DBETA, O_DH0, N_OUTS };

static kdalab_status drive(call *c, void *const dest[N_OUTS])
{
    size_t rows = c->B * c->T, state = c->N * c->HV * c->K * c->V;
    size_t total[N_OUTS] = {rows * c->HV * c->V, state, rows * c->H * c->K,
                            rows * c->H * c->K, rows * c->HV * c->V, rows * c->HV * c->gw,
                            rows * c->HV, state};
    size_t Lmax = 0;
    for (size_t n = 0; n < c->N; n++) {
        size_t L = c->cu ? (size_t)(c->cu[n + 1] - c->cu[n]) : c->T;
        Lmax = L > Lmax ? L : Lmax;
    }
    size_t Lb = Lmax ? Lmax : 1, KV = c->K * c->V;
    /* scratch: the piece's buffers, and every output whole */
    void *all[N_OUTS] = {0};
    piece p = {0};
    void **bufs[] = {&p.q, &p.k, &p.v, &p.g, &p.beta, &p.h0, &p.d_o, &p.dht, &p.o,
                     &p.ht, &p.dq, &p.dk, &p.dv, &p.dg, &p.dbeta, &p.dh0};
    size_t sizes[] = {Lb * c->K, Lb * c->K, Lb * c->V, Lb * (c->gw ? c->gw : 1), Lb, KV,
                      Lb * c->V, KV, Lb * c->V, KV, Lb * c->K, Lb * c->K, Lb * c->V,
                      Lb * (c->gw ? c->gw : 1), Lb, KV};
    int ok = 1;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ok &= (*bufs[i] = calloc(sizes[i], c->es)) != NULL;
    for (int i = 0; i < N_OUTS; i++)
        if (dest[i])
            ok &= (all[i] = calloc(total[i] ? total[i] : 1, c->es)) != NULL;
    kdalab_status worst = KDALAB_OK;
    if (!ok)
        worst = kdalab_fail(KDALAB_ENOMEM, "no memory for a batch of T = %zu", c->T);

    for (size_t n = 0; worst != KDALAB_ENOMEM && n < c->N; n++) {
        size_t b = c->cu ? 0 : n, t0 = c->cu ? (size_t)c->cu[n] : 0;
        size_t L = c->cu ? (size_t)(c->cu[n + 1] - c->cu[n]) : c->T;
        p.d = (kdalab_dims){.B = 1, .T = L, .H = 1, .K = c->K, .V = c->V};
        for (size_t j = 0; j < c->HV; j++) {
            size_t h = j / c->G, nj = (n * c->HV + j) * KV; /* q/k head; state offset */
            gather(p.q, c->q, c, b, t0, L, c->H, h, c->K);
            gather(p.k, c->k, c, b, t0, L, c->H, h, c->K);
            gather(p.v, c->v, c, b, t0, L, c->HV, j, c->V);
            if (c->gw)
                gather(p.g, c->g, c, b, t0, L, c->HV, j, c->gw);
            if (kdalab_mechanism_has_beta(c->mech))
                gather(p.beta, c->beta, c, b, t0, L, c->HV, j, 1);
            if (c->h0)
                memcpy(p.h0, (const char *)c->h0 + nj * c->es, KV * c->es);
            if (c->bwd) {
                gather(p.d_o, c->d_o, c, b, t0, L, c->HV, j, c->V);
                if (c->dht)
                    memcpy(p.dht, (const char *)c->dht + nj * c->es, KV * c->es);
            }
            kdalab_status s = run_piece(c, &p);
            if (s != KDALAB_OK && s != KDALAB_ERANGE) {
                worst = s;
                break;
            }
            if (s == KDALAB_ERANGE)
                worst = s;
            /* scatter into the whole-output scratch */
            if (!c->bwd) {
                if (all[O_O])
                    scatter(all[O_O], p.o, c, b, t0, L, c->HV, j, c->V);
                if (all[O_HT])
                    memcpy((char *)all[O_HT] + nj * c->es, p.ht, KV * c->es);
                continue;
            }
            if (all[O_DQ])
                scatter_add(all[O_DQ], p.dq, c, b, t0, L, h, c->K);
            if (all[O_DK])
                scatter_add(all[O_DK], p.dk, c, b, t0, L, h, c->K);
            if (all[O_DV])
                scatter(all[O_DV], p.dv, c, b, t0, L, c->HV, j, c->V);
            if (all[O_DG] && c->gw)
                scatter(all[O_DG], p.dg, c, b, t0, L, c->HV, j, c->gw);
            if (all[O_DBETA] && kdalab_mechanism_has_beta(c->mech))
                scatter(all[O_DBETA], p.dbeta, c, b, t0, L, c->HV, j, 1);
            if (all[O_DH0])
                memcpy((char *)all[O_DH0] + nj * c->es, p.dh0, KV * c->es);
        }
        if (worst != KDALAB_OK && worst != KDALAB_ERANGE)
            break;
    }
    if (worst == KDALAB_OK || worst == KDALAB_ERANGE)
        for (int i = 0; i < N_OUTS; i++)
            if (dest[i] && total[i])
                memcpy(dest[i], all[i], total[i] * c->es);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    for (int i = 0; i < N_OUTS; i++)
        free(all[i]);
    if (worst == KDALAB_ERANGE)
        return kdalab_fail(KDALAB_ERANGE, "batch: a sequence overflowed (outputs written)");
    if (worst == KDALAB_OK)
        kdalab_clear_error();
    return worst;
}

/* Fill the call from the arguments shared by every entry point. */
static kdalab_status setup(call *c, const kdalab_batch *batch, kdalab_form form,
                           const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                           size_t es)
{
    kdalab_status s = kdalab_batch_check(batch, dims);
    if (s != KDALAB_OK)
        return s;
    if (!kdalab_mechanism_row(mech))
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)mech);
    if ((unsigned)form > (unsigned)KDALAB_FORM_SIMD_CHUNK)
        return kdalab_fail(KDALAB_EINVAL, "unknown form %d", (int)form);
    c->form = form;
    c->mech = mech;
    c->es = es;
    c->scale = scale;
    c->B = dims->B;
    c->T = dims->T;
    c->H = dims->H;
    c->K = dims->K;
    c->V = dims->V;
    c->HV = batch->HV;
    c->G = c->HV / c->H;
    c->N = kdalab_batch_n_seqs(batch, dims);
    c->cu = batch->cu_seqlens;
    c->gw = kdalab_mechanism_g_width(mech, dims->K);
    /* every array's element count must fit, in bytes */
    kdalab_dims widest = {.B = dims->B, .T = dims->T, .H = c->HV > c->H ? c->HV : c->H,
                          .K = dims->K, .V = dims->V};
    kdalab_counts n;
    if ((s = kdalab_count_dims(&widest, mech, es, &n)) != KDALAB_OK)
        return s;
    size_t nkv, bytes;
    if (!kdalab_mul_size(c->N * c->HV, dims->K * dims->V, &nkv) ||
        !kdalab_mul_size(nkv, es, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "the states [N, HV, K, V] overflow");
    return KDALAB_OK;
}

/* The forward of either precision (es bytes per element): the layout, the
 * arrays' struct, o, the values, then the sequences. The arrays come as
 * untyped pointers in kdalab_batch_args_f64's order (q, k, v, g, beta, h0;
 * o, ht), both NULL when args is. */
static kdalab_status forward(const kdalab_batch *batch, kdalab_form form, const kdalab_dims *dims,
                             kdalab_mechanism mech, double scale, size_t es,
                             const void *const in[6], void *const out[2],
                             const kdalab_chunk_opts *opts)
{
    call c = {0};
    kdalab_status s = setup(&c, batch, form, dims, mech, scale, es);
    if (s == KDALAB_OK && !in)
        s = kdalab_fail(KDALAB_ENULL, "args is NULL (the struct naming the call's arrays)");
    if (s == KDALAB_OK && es == sizeof(double) && form == KDALAB_FORM_SIMD_RECURRENT)
        s = kdalab_fail(KDALAB_EINVAL, "the SIMD recurrent form is float32 only "
                                       "(kdalab_batch_f32)");
    if (s == KDALAB_OK && dims->T > 0 && !out[0])
        s = kdalab_fail(KDALAB_ENULL, "o is NULL");
    if (s != KDALAB_OK)
        return s;
    c.q = in[0], c.k = in[1], c.v = in[2], c.g = in[3], c.beta = in[4], c.h0 = in[5];
    c.opts = opts;
    if ((s = check_values(&c)) != KDALAB_OK)
        return s;
    void *dest[N_OUTS] = {out[0], out[1]};
    return drive(&c, dest);
}

kdalab_status kdalab_batch_f64(const kdalab_batch *batch, kdalab_form form,
                               const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const kdalab_batch_args_f64 *args, const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    if (!args)
        return forward(batch, form, dims, mech, scale, sizeof(double), NULL, NULL, opts);
    const void *in[6] = {args->q, args->k, args->v, args->g, args->beta, args->h0};
    void *out[2] = {args->o, args->ht};
    return forward(batch, form, dims, mech, scale, sizeof(double), in, out, opts);
}

kdalab_status kdalab_batch_f32(const kdalab_batch *batch, kdalab_form form,
                               const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const kdalab_batch_args_f32 *args, const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    if (!args)
        return forward(batch, form, dims, mech, scale, sizeof(float), NULL, NULL, opts);
    const void *in[6] = {args->q, args->k, args->v, args->g, args->beta, args->h0};
    void *out[2] = {args->o, args->ht};
    return forward(batch, form, dims, mech, scale, sizeof(float), in, out, opts);
}

kdalab_status kdalab_batch_bwd_f64(const kdalab_batch *batch, kdalab_form form,
                                   const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const kdalab_batch_bwd_args_f64 *args,
                                   const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    call c = {0};
    kdalab_status s = setup(&c, batch, form, dims, mech, scale, sizeof(double));
    if (s == KDALAB_OK && !args)
        s = kdalab_fail(KDALAB_ENULL, "args is NULL (the struct naming the call's arrays)");
    if (s == KDALAB_OK && form == KDALAB_FORM_SIMD_RECURRENT)
        s = kdalab_fail(KDALAB_EINVAL, "the backward has no SIMD recurrent form (the SIMD "
                                       "chunkwise backward is KDALAB_FORM_SIMD_CHUNK)");
    if (s != KDALAB_OK)
        return s;
    const kdalab_batch_bwd_args_f64 *a = args;
    c.q = a->q, c.k = a->k, c.v = a->v, c.g = a->g, c.beta = a->beta, c.h0 = a->h0;
    c.opts = opts, c.d_o = a->d_o, c.dht = a->dht, c.bwd = 1;
    if (dims->T > 0 && !a->d_o)
        return kdalab_fail(KDALAB_ENULL, "d_o is NULL");
    if ((s = check_values(&c)) != KDALAB_OK)
        return s;
    if (form == KDALAB_FORM_SIMD_CHUNK && !c.cu && c.HV == c.H) /* one call: OpenMP over B x H */
        return kdalab_simd_chunk_bwd_f64(dims, mech, scale, a->q, a->k, a->v, a->g, a->beta,
                                         a->h0, a->d_o, a->dht, a->dq, a->dk, a->dv,
                                         c.gw ? a->dg : NULL,
                                         kdalab_mechanism_has_beta(mech) ? a->dbeta : NULL,
                                         a->dh0, opts);
    void *dest[N_OUTS] = {NULL, NULL, a->dq, a->dk, a->dv, c.gw ? a->dg : NULL,
                          kdalab_mechanism_has_beta(mech) ? a->dbeta : NULL, a->dh0};
    return drive(&c, dest);
}
