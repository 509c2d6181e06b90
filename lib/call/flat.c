/*
 * lib/call/flat.c — the functions with fla's flat argument lists, each a
 * thin wrapper over the one call (kdalab_call.h): a plain batch (B
 * sequences of T, HV = H) of the form and implementation its name says.
 * They are documented where a reader looks for them: kdalab_forms.h (the
 * reference forward), kdalab_grad.h (the backward), kdalab_simd.h (the
 * optimized path).
 *
 * defines: kdalab_recurrent_f64, kdalab_recurrent_f32, kdalab_chunk_f64,
 *          kdalab_chunk_f32, kdalab_recurrent_bwd_f64, kdalab_recurrent_bwd_f32,
 *          kdalab_chunk_bwd_f64, kdalab_chunk_bwd_f32, kdalab_simd_recurrent_f32,
 *          kdalab_simd_chunk_f32, kdalab_simd_chunk_f64, kdalab_simd_chunk_bwd_f32,
 *          kdalab_simd_chunk_bwd_f64
 */
#include "internal.h"

/* The call of a plain batch; *ok is KDALAB_OK, or the error (set) when dims
 * is NULL or the mechanism takes a, b, which these argument lists lack. */
static kdalab_call plain(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                         kdalab_form form, kdalab_impl impl, const kdalab_chunk_opts *opts,
                         kdalab_status *ok)
{
    *ok = KDALAB_OK;
    if (!dims) {
        *ok = kdalab_fail(KDALAB_ENULL, "dims is NULL");
        return (kdalab_call){0};
    }
    if (kdalab_mechanism_has_ab(mech)) {
        *ok = kdalab_fail(KDALAB_EINVAL, "%s: the flat functions take no a, b; call "
                          "kdalab_run_f64 / kdalab_run_bwd_f64 (or _f32) with the "
                          "kdalab_tensors' a, b",
                          kdalab_mechanism_name(mech));
        return (kdalab_call){0};
    }
    return (kdalab_call){.dims = *dims, .HV = dims->H, .mech = mech, .scale = scale,
                         .form = form, .impl = impl, .opts = opts};
}

/* ---- the reference forward (kdalab_forms.h) -------------------------------- */

kdalab_status kdalab_recurrent_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, const double *beta, const double *h0,
                                   double *o, double *ht)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_RECURRENT, KDALAB_IMPL_REFERENCE, NULL,
                          &ok);
    kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f64(&c, &x, NULL) : ok;
}

kdalab_status kdalab_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, const float *beta, const float *h0, float *o,
                                   float *ht)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_RECURRENT, KDALAB_IMPL_REFERENCE, NULL,
                          &ok);
    kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f32(&c, &x, NULL) : ok;
}

kdalab_status kdalab_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v,
                               const double *g, const double *beta, const double *h0,
                               double *o, double *ht, const kdalab_chunk_opts *opts,
                               kdalab_report *report)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_CHUNK, KDALAB_IMPL_REFERENCE, opts, &ok);
    kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f64(&c, &x, report) : ok;
}

kdalab_status kdalab_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                               const float *q, const float *k, const float *v, const float *g,
                               const float *beta, const float *h0, float *o, float *ht,
                               const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_CHUNK, KDALAB_IMPL_REFERENCE, opts, &ok);
    kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f32(&c, &x, report) : ok;
}

/* ---- the backward (kdalab_grad.h) -------------------------------------------- */

/* The backward of a plain batch, either precision (T: the tensors type). */
#define BWD(run, T, form, impl, opts)                                                          \
    do {                                                                                       \
        kdalab_status ok;                                                                      \
        kdalab_call c = plain(dims, mech, scale, form, impl, opts, &ok);                       \
        T x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .d_o = d_o,             \
               .dht = dht, .dq = dq, .dk = dk, .dv = dv, .dg = dg, .dbeta = dbeta,             \
               .dh0 = dh0};                                                                    \
        return ok == KDALAB_OK ? run(&c, &x) : ok;                                             \
    } while (0)

kdalab_status kdalab_recurrent_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                       double scale, const double *q, const double *k,
                                       const double *v, const double *g, const double *beta,
                                       const double *h0, const double *d_o, const double *dht,
                                       double *dq, double *dk, double *dv, double *dg,
                                       double *dbeta, double *dh0)
{
    kdalab_clear_error();
    BWD(kdalab_run_bwd_f64, kdalab_tensors_f64, KDALAB_FORM_RECURRENT, KDALAB_IMPL_REFERENCE,
        NULL);
}

kdalab_status kdalab_recurrent_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                       float scale, const float *q, const float *k,
                                       const float *v, const float *g, const float *beta,
                                       const float *h0, const float *d_o, const float *dht,
                                       float *dq, float *dk, float *dv, float *dg, float *dbeta,
                                       float *dh0)
{
    kdalab_clear_error();
    BWD(kdalab_run_bwd_f32, kdalab_tensors_f32, KDALAB_FORM_RECURRENT, KDALAB_IMPL_REFERENCE,
        NULL);
}

kdalab_status kdalab_chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const double *q, const double *k,
                                   const double *v, const double *g, const double *beta,
                                   const double *h0, const double *d_o, const double *dht,
                                   double *dq, double *dk, double *dv, double *dg,
                                   double *dbeta, double *dh0, const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    BWD(kdalab_run_bwd_f64, kdalab_tensors_f64, KDALAB_FORM_CHUNK, KDALAB_IMPL_REFERENCE, opts);
}

kdalab_status kdalab_chunk_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, const float *beta, const float *h0,
                                   const float *d_o, const float *dht, float *dq, float *dk,
                                   float *dv, float *dg, float *dbeta, float *dh0,
                                   const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    BWD(kdalab_run_bwd_f32, kdalab_tensors_f32, KDALAB_FORM_CHUNK, KDALAB_IMPL_REFERENCE, opts);
}

kdalab_status kdalab_simd_chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                        double scale, const double *q, const double *k,
                                        const double *v, const double *g, const double *beta,
                                        const double *h0, const double *d_o, const double *dht,
                                        double *dq, double *dk, double *dv, double *dg,
                                        double *dbeta, double *dh0,
                                        const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    BWD(kdalab_run_bwd_f64, kdalab_tensors_f64, KDALAB_FORM_CHUNK, KDALAB_IMPL_SIMD, opts);
}

kdalab_status kdalab_simd_chunk_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *h0, const float *d_o, const float *dht,
                                        float *dq, float *dk, float *dv, float *dg,
                                        float *dbeta, float *dh0, const kdalab_chunk_opts *opts)
{
    kdalab_clear_error();
    BWD(kdalab_run_bwd_f32, kdalab_tensors_f32, KDALAB_FORM_CHUNK, KDALAB_IMPL_SIMD, opts);
}

#undef BWD

/* ---- the optimized forward (kdalab_simd.h) ------------------------------------ */

kdalab_status kdalab_simd_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *h0, float *o, float *ht)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_RECURRENT, KDALAB_IMPL_SIMD, NULL, &ok);
    kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f32(&c, &x, NULL) : ok;
}

kdalab_status kdalab_simd_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *h0, float *o, float *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_CHUNK, KDALAB_IMPL_SIMD, opts, &ok);
    kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f32(&c, &x, report) : ok;
}

kdalab_status kdalab_simd_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *h0, double *o, double *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_clear_error();
    kdalab_status ok;
    kdalab_call c = plain(dims, mech, scale, KDALAB_FORM_CHUNK, KDALAB_IMPL_SIMD, opts, &ok);
    kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0, .o = o,
                            .ht = ht};
    return ok == KDALAB_OK ? kdalab_run_f64(&c, &x, report) : ok;
}
