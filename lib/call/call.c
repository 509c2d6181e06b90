/*
 * lib/call/call.c — the one way into every linear mechanism: a call is
 * checked once, here, then run by the implementation it names, which does
 * not check again (kdalab_call.h).
 *
 * defines: kdalab_call_check, kdalab_call_n_seqs, kdalab_call_n_chunks, kdalab_run_f64,
 *          kdalab_run_f32, kdalab_run_bwd_f64, kdalab_run_bwd_f32
 *
 * The order of the checks, and so which of several errors a bad call
 * reports: the sizes and layout, the mechanism, scale, form,
 * implementation and options (kdalab_call_check); then the forward's h (who
 * writes it, its size); then the arrays: d_o
 * (backward), q, k, v, o (forward), g, beta present; then every input's
 * values, in the order q, k, v, g, beta, h0, d_o, dht.
 *
 * A row with the DPLR term (a, b) runs on the SIMD path in the chunkwise
 * form only, forward and backward (resolve refuses its SIMD recurrent form
 * by name).
 *
 * Where a call goes, once checked:
 *   SIMD, chunkwise, safe decay, plain storage   lib/simd/entry_impl.h, every
 *                                                layout in place
 *   a plain layout (no cu_seqlens, HV = H)       the form on the whole batch
 *   varlen or GVA                                lib/call/pieces.c, one
 *                                                (sequence, value head) at a time
 */
#include <math.h>
#include "internal.h"

size_t kdalab_call_n_seqs(const kdalab_call *call)
{
    return !call ? 0 : call->cu_seqlens ? call->n_seqs : call->dims.B;
}

/* The sizes, the layout (cu_seqlens, HV) and that every array's bytes fit. */
static kdalab_status check_layout(const kdalab_call *c, size_t es)
{
    const kdalab_dims *d = &c->dims;
    if (d->B == 0 || d->H == 0 || d->K == 0 || d->V == 0)
        return kdalab_fail(KDALAB_ESIZE, "B=%zu H=%zu K=%zu V=%zu: B, H, K and V must be >= 1",
                           d->B, d->H, d->K, d->V);
    if (c->HV == 0)
        return kdalab_fail(KDALAB_ESIZE, "HV = 0 value heads: HV must be >= 1 (H = %zu for a "
                                         "plain batch)",
                           d->H);
    if (c->HV % d->H != 0)
        return kdalab_fail(KDALAB_ESIZE,
                           "HV = %zu value heads is not a multiple of H = %zu query/key heads",
                           c->HV, d->H);
    /* v, o [B, T, HV, V] and a state per value head [HV, K, V], in bytes */
    size_t bytes;
    if (!kdalab_mul_size(d->B, d->T, &bytes) || !kdalab_mul_size(bytes, c->HV, &bytes) ||
        !kdalab_mul_size(bytes, d->V, &bytes) || !kdalab_mul_size(bytes, es, &bytes) ||
        !kdalab_mul_size(c->HV, d->K, &bytes) || !kdalab_mul_size(bytes, d->V, &bytes) ||
        !kdalab_mul_size(bytes, es, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "HV = %zu value heads with B = %zu, T = %zu, K = %zu, V = %zu: the "
                           "value or state arrays' sizes overflow size_t",
                           c->HV, d->B, d->T, d->K, d->V);
    /* the widest per-position arrays have max(H, HV) = HV heads; the states
     * [N, HV, K, V] with N <= max(B, T) */
    kdalab_dims widest = *d;
    widest.H = c->HV;
    kdalab_counts n;
    kdalab_status s = kdalab_count_dims(&widest, c->mech, es, &n);
    if (s != KDALAB_OK)
        return s;
    if (!c->cu_seqlens)
        return KDALAB_OK;
    const int64_t *cu = c->cu_seqlens;
    if (d->B != 1)
        return kdalab_fail(KDALAB_ESIZE, "cu_seqlens needs B = 1 (the sequences are packed "
                                         "along T), got B = %zu",
                           d->B);
    if (c->n_seqs == 0)
        return kdalab_fail(KDALAB_ESIZE, "cu_seqlens with n_seqs = 0: at least one sequence");
    if (c->n_seqs - 1 > d->T) /* n_seqs >= 1: no wrap */
        return kdalab_fail(KDALAB_EINVAL,
                           "cu_seqlens: %zu sequences cannot be strictly increasing within "
                           "T = %zu",
                           c->n_seqs, d->T);
    if (cu[0] != 0)
        return kdalab_fail(KDALAB_EINVAL, "cu_seqlens[0] = %lld: the first boundary must be 0",
                           (long long)cu[0]);
    for (size_t i = 1; i <= c->n_seqs; i++)
        if (cu[i] <= cu[i - 1])
            return kdalab_fail(KDALAB_EINVAL,
                               "cu_seqlens[%zu] = %lld is not greater than cu_seqlens[%zu] = "
                               "%lld: boundaries must strictly increase",
                               i, (long long)cu[i], i - 1, (long long)cu[i - 1]);
    if ((uint64_t)cu[c->n_seqs] != d->T)
        return kdalab_fail(KDALAB_EINVAL,
                           "cu_seqlens[%zu] = %lld: the last boundary must be T = %zu",
                           c->n_seqs, (long long)cu[c->n_seqs], d->T);
    return KDALAB_OK;
}

/* kdalab_call_check, and the call resolved into *out (options with their
 * defaults) for the implementations. */
static kdalab_status resolve(const kdalab_call *call, int is_f32, int bwd, kdalab__call *out)
{
    if (!call)
        return kdalab_fail(KDALAB_ENULL, "call is NULL");
    const size_t es = is_f32 ? sizeof(float) : sizeof(double);
    kdalab_status s = check_layout(call, es);
    if (s != KDALAB_OK)
        return s;
    if (!kdalab_mechanism_row(call->mech))
        return kdalab_fail(KDALAB_EINVAL, "unknown mechanism %d", (int)call->mech);
    /* float32 runs with the scale as a float: that value must obey the rule */
    s = kdalab_check_scale(is_f32 ? (double)(float)call->scale : call->scale);
    if (s != KDALAB_OK)
        return s;
    if ((unsigned)call->form > (unsigned)KDALAB_FORM_CHUNK)
        return kdalab_fail(KDALAB_EINVAL, "unknown form %d", (int)call->form);
    if ((unsigned)call->impl > (unsigned)KDALAB_IMPL_SIMD)
        return kdalab_fail(KDALAB_EINVAL, "unknown implementation %d", (int)call->impl);
    const int simd = call->impl == KDALAB_IMPL_SIMD;
    if (kdalab_mechanism_has_ab(call->mech) && simd && call->form != KDALAB_FORM_CHUNK)
        return kdalab_fail(KDALAB_EINVAL, "%s: the SIMD path serves the DPLR transition "
                           "(a, b) in the chunkwise form only; use the reference (impl "
                           "reference) for its recurrent form",
                           kdalab_mechanism_name(call->mech));
    if (simd && call->form == KDALAB_FORM_RECURRENT && bwd)
        return kdalab_fail(KDALAB_EINVAL, "the backward has no SIMD recurrent form (the SIMD "
                                          "chunkwise backward is form chunk, impl simd)");
    if (simd && call->form == KDALAB_FORM_RECURRENT && !is_f32)
        return kdalab_fail(KDALAB_EINVAL, "the SIMD recurrent form is float32 only (the "
                                          "float64 SIMD path is chunkwise)");
    const kdalab_chunk_opts dflt =
        simd ? kdalab_simd_chunk_opts_default() : kdalab_chunk_opts_default();
    const kdalab_chunk_opts *opts = call->opts ? call->opts : &dflt;
    kdalab__call c = {.mech = call->mech, .B = call->dims.B, .T = call->dims.T,
                      .H = call->dims.H, .K = call->dims.K, .V = call->dims.V,
                      .HV = call->HV, .G = call->HV / call->dims.H,
                      .N = kdalab_call_n_seqs(call), .cu = call->cu_seqlens,
                      .gw = kdalab_mechanism_g_width(call->mech, call->dims.K),
                      .delta = kdalab_mechanism_has_delta(call->mech),
                      .ab = kdalab_mechanism_has_ab(call->mech), .form = call->form,
                      .impl = call->impl, .op = dflt, .work = call->work};
    if (call->form == KDALAB_FORM_CHUNK)
        s = bwd ? kdalab_check_bwd_chunk_opts(opts, &c.op)
                : kdalab_check_chunk_opts(opts, !is_f32, &c.op); /* bf16/fp16: float32 only */
    for (size_t n = 0; n < c.N; n++) { /* the longest sequence: every buffer's size */
        size_t b, t0, L;
        kdalab__call_seq(&c, n, &b, &t0, &L);
        c.Lmax = L > c.Lmax ? L : c.Lmax;
    }
    if (s == KDALAB_OK && out)
        *out = c;
    return s;
}

kdalab_status kdalab_call_check(const kdalab_call *call, int is_f32, int bwd)
{
    kdalab_clear_error();
    return resolve(call, is_f32, bwd, NULL);
}

/* NT of a resolved call's h: the sum of ceil(L_n / C) (plain: ceil(T / C),
 * every batch entry alike). */
static size_t n_chunks(const kdalab__call *c)
{
    if (!c->cu)
        return kdalab__call_chunks(c, 0);
    size_t nt = 0;
    for (size_t n = 0; n < c->N; n++)
        nt += kdalab__call_chunks(c, n); /* <= T: no wrap */
    return nt;
}

size_t kdalab_call_n_chunks(const kdalab_call *call)
{
    kdalab_clear_error();
    if (!call)
        return 0;
    kdalab__call c;
    kdalab_call chunked = *call; /* its opts resolved as the chunkwise form's */
    chunked.form = KDALAB_FORM_CHUNK;
    /* float64's check, else float32's (bf16 / fp16 storage is float32's only) */
    if (resolve(&chunked, 0, 0, &c) != KDALAB_OK) {
        kdalab_clear_error();
        if (resolve(&chunked, 1, 0, &c) != KDALAB_OK)
            return 0;
    }
    return n_chunks(&c);
}

/* ---- the arrays ----------------------------------------------------------- */

/* ---- running a checked call ------------------------------------------------- */

/* A plain layout: the form runs on the whole batch as the caller laid it out. */
static int plain(const kdalab__call *c) { return !c->cu && c->G == 1; }

/* The SIMD chunkwise kernels serve this forward (else the reference's forms):
 * the safe decay, in any storage the call may ask for (bf16 / fp16 come only
 * with float32, which the SIMD kernels emulate as the reference does). */
static int simd_chunk(const kdalab__call *c)
{
    return c->impl == KDALAB_IMPL_SIMD && c->form == KDALAB_FORM_CHUNK &&
           c->op.decay == KDALAB_DECAY_SAFE;
}

/* h, the states entering the chunks: written by the SIMD chunkwise forward
 * only (simd_chunk), and its B NT HV K V elements' bytes must fit in size_t. */
static kdalab_status check_h(const kdalab__call *c, const void *h, size_t es)
{
    if (!h)
        return KDALAB_OK;
    if (!simd_chunk(c))
        return kdalab_fail(KDALAB_EINVAL,
                           "h (the state entering each chunk) is written by the SIMD chunkwise "
                           "forward only (impl simd, form chunk, the safe decay); this call "
                           "runs the %s %s form%s",
                           c->impl == KDALAB_IMPL_SIMD ? "SIMD" : "reference",
                           c->form == KDALAB_FORM_CHUNK ? "chunkwise" : "recurrent",
                           c->form == KDALAB_FORM_CHUNK && c->op.decay != KDALAB_DECAY_SAFE
                               ? " with another decay mode"
                               : "");
    size_t bytes;
    if (!kdalab_mul_size(c->B, n_chunks(c), &bytes) || !kdalab_mul_size(bytes, c->HV, &bytes) ||
        !kdalab_mul_size(bytes, c->K, &bytes) || !kdalab_mul_size(bytes, c->V, &bytes) ||
        !kdalab_mul_size(bytes, es, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "h [B = %zu, NT = %zu, HV = %zu, K = %zu, V = %zu]: its size "
                           "overflows size_t",
                           c->B, n_chunks(c), c->HV, c->K, c->V);
    return KDALAB_OK;
}

/* A form that has no report of its own: zeros, except on KDALAB_ERANGE the
 * non-finite values it wrote to o and ht. */
static void plain_report(kdalab_report *r, kdalab_status s, const void *o, size_t n_o,
                         const void *ht, size_t n_ht, int is_f32)
{
    if (!r || (s != KDALAB_OK && s != KDALAB_ERANGE))
        return;
    *r = (kdalab_report){0};
    for (size_t i = 0; s == KDALAB_ERANGE && i < n_o; i++)
        r->nonfinite_o += is_f32 ? !isfinite(((const float *)o)[i])
                                 : !isfinite(((const double *)o)[i]);
    for (size_t i = 0; s == KDALAB_ERANGE && ht && i < n_ht; i++)
        r->nonfinite_ht += is_f32 ? !isfinite(((const float *)ht)[i])
                                  : !isfinite(((const double *)ht)[i]);
}

/* The start every run shares: the call resolved into *c (kdalab_call_check)
 * and x given (have_x); the caller then checks x's arrays. */
static kdalab_status begin(const kdalab_call *call, int have_x, int is_f32, int bwd,
                           kdalab__call *c)
{
    kdalab_status s = resolve(call, is_f32, bwd, c);
    if (s == KDALAB_OK && !have_x)
        s = kdalab_fail(KDALAB_ENULL, "x is NULL (the struct naming the call's arrays)");
    return s;
}

/* The arrays of x (kdalab_tensors_f64 or _f32: the same names) a run of c
 * reads: g, beta, a and b only where the mechanism has them. */
#define ARRAYS(x, c, bwd)                                                                      \
    ((kdalab__arrays){(x)->q, (x)->k, (x)->v, (c).gw ? (x)->g : NULL,                          \
                      (c).delta ? (x)->beta : NULL, (x)->h0, (bwd) ? (x)->d_o : NULL,         \
                      (bwd) ? (x)->dht : NULL, (bwd) ? NULL : (x)->o,                          \
                      (c).ab ? (x)->a : NULL, (c).ab ? (x)->b : NULL})

kdalab_status kdalab_run_f64(const kdalab_call *call, const kdalab_tensors_f64 *x,
                             kdalab_report *report)
{
    kdalab_clear_error();
    kdalab__call c;
    kdalab_status s = begin(call, x != NULL, 0, 0, &c);
    const kdalab__arrays a = s == KDALAB_OK ? ARRAYS(x, c, 0) : (kdalab__arrays){0};
    if (s == KDALAB_OK)
        s = check_h(&c, x->h, sizeof(double));
    if (s == KDALAB_OK)
        s = kdalab__check_call_arrays(&c, &a, 0, 0);
    if (s != KDALAB_OK)
        return s;
    const double scale = call->scale;
    if (simd_chunk(&c))
        return kdalab__simd_chunk_f64(&c, scale, x, report);
    if (!plain(&c))
        return kdalab__run_pieces(&c, sizeof(double), scale, x, 0, report);
    const kdalab_dims *d = &call->dims;
    if (c.form == KDALAB_FORM_CHUNK)
        return kdalab__chunk_f64(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                                 x->h0, x->o, x->ht, &c.op, report);
    s = kdalab__recurrent_f64(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                              x->h0, x->o, x->ht);
    plain_report(report, s, x->o, c.B * c.T * c.H * c.V, x->ht, c.N * c.H * c.K * c.V, 0);
    return s;
}

kdalab_status kdalab_run_f32(const kdalab_call *call, const kdalab_tensors_f32 *x,
                             kdalab_report *report)
{
    kdalab_clear_error();
    kdalab__call c;
    kdalab_status s = begin(call, x != NULL, 1, 0, &c);
    const kdalab__arrays a = s == KDALAB_OK ? ARRAYS(x, c, 0) : (kdalab__arrays){0};
    if (s == KDALAB_OK)
        s = check_h(&c, x->h, sizeof(float));
    if (s == KDALAB_OK)
        s = kdalab__check_call_arrays(&c, &a, 1, 0);
    if (s != KDALAB_OK)
        return s;
    const float scale = (float)call->scale;
    if (simd_chunk(&c))
        return kdalab__simd_chunk_f32(&c, scale, x, report);
    if (!plain(&c))
        return kdalab__run_pieces(&c, sizeof(float), scale, x, 0, report);
    const kdalab_dims *d = &call->dims;
    if (c.form == KDALAB_FORM_CHUNK)
        return kdalab__chunk_f32(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                                 x->h0, x->o, x->ht, &c.op, report);
    s = c.impl == KDALAB_IMPL_SIMD
            ? kdalab__simd_recurrent_f32(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta,
                                         x->h0, x->o, x->ht)
            : kdalab__recurrent_f32(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a,
                                    a.b, x->h0, x->o, x->ht);
    plain_report(report, s, x->o, c.B * c.T * c.H * c.V, x->ht, c.N * c.H * c.K * c.V, 1);
    return s;
}

kdalab_status kdalab_run_bwd_f64(const kdalab_call *call, const kdalab_tensors_f64 *x)
{
    kdalab_clear_error();
    kdalab__call c;
    kdalab_status s = begin(call, x != NULL, 0, 1, &c);
    const kdalab__arrays a = s == KDALAB_OK ? ARRAYS(x, c, 1) : (kdalab__arrays){0};
    if (s == KDALAB_OK)
        s = kdalab__check_call_arrays(&c, &a, 0, 1);
    if (s != KDALAB_OK)
        return s;
    const double scale = call->scale;
    if (c.impl == KDALAB_IMPL_SIMD) /* chunkwise, safe: resolve refused the rest */
        return kdalab__simd_chunk_bwd_f64(&c, scale, x);
    if (!plain(&c))
        return kdalab__run_pieces(&c, sizeof(double), scale, x, 1, NULL);
    const kdalab_dims *d = &call->dims;
    double *dg = c.gw ? x->dg : NULL, *dbeta = c.delta ? x->dbeta : NULL;
    double *da = c.ab ? x->da : NULL, *db = c.ab ? x->db : NULL;
    if (c.form == KDALAB_FORM_CHUNK)
        return kdalab__chunk_bwd_f64(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                                     x->h0, x->d_o, x->dht, x->dq, x->dk, x->dv, dg, dbeta, da,
                                     db, x->dh0, &c.op);
    return kdalab__recurrent_bwd_f64(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                                     x->h0, x->d_o, x->dht, x->dq, x->dk, x->dv, dg, dbeta, da,
                                     db, x->dh0);
}

kdalab_status kdalab_run_bwd_f32(const kdalab_call *call, const kdalab_tensors_f32 *x)
{
    kdalab_clear_error();
    kdalab__call c;
    kdalab_status s = begin(call, x != NULL, 1, 1, &c);
    const kdalab__arrays a = s == KDALAB_OK ? ARRAYS(x, c, 1) : (kdalab__arrays){0};
    if (s == KDALAB_OK)
        s = kdalab__check_call_arrays(&c, &a, 1, 1);
    if (s != KDALAB_OK)
        return s;
    const float scale = (float)call->scale;
    if (c.impl == KDALAB_IMPL_SIMD)
        return kdalab__simd_chunk_bwd_f32(&c, scale, x);
    if (!plain(&c))
        return kdalab__run_pieces(&c, sizeof(float), scale, x, 1, NULL);
    const kdalab_dims *d = &call->dims;
    float *dg = c.gw ? x->dg : NULL, *dbeta = c.delta ? x->dbeta : NULL;
    float *da = c.ab ? x->da : NULL, *db = c.ab ? x->db : NULL;
    if (c.form == KDALAB_FORM_CHUNK)
        return kdalab__chunk_bwd_f32(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                                     x->h0, x->d_o, x->dht, x->dq, x->dk, x->dv, dg, dbeta, da,
                                     db, x->dh0, &c.op);
    return kdalab__recurrent_bwd_f32(d, c.mech, scale, x->q, x->k, x->v, a.g, a.beta, a.a, a.b,
                                     x->h0, x->d_o, x->dht, x->dq, x->dk, x->dv, dg, dbeta, da,
                                     db, x->dh0);
}
