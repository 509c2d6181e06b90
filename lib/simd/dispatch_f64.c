/*
 * lib/simd/dispatch_f64.c — the public entry points of the optimized float64
 * path (kdalab_simd_chunk_f64, kdalab_simd_step_f64, see lib/kdalab_simd.h):
 * the float32 dispatcher's way (lib/simd/dispatch.c) over the float64 kernel
 * tables (scalar_f64.c, avx2_f64.c, avx512_f64.c). The level is the one
 * lib/simd/dispatch.c resolves (kdalab_simd_get_level), so KDALAB_SIMD and
 * kdalab_simd_set_level choose it for both element types.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "simd_internal.h"

static const simd_table_f64 *active_table_f64(void)
{
    switch (kdalab_simd_get_level()) {
    case KDALAB_SIMD_AVX512:
        return &kdalab_simd_table_avx512_f64;
    case KDALAB_SIMD_AVX2:
        return &kdalab_simd_table_avx2_f64;
    default:
        return &kdalab_simd_table_scalar_f64;
    }
}

/* ---------------------------------------------------------------------------- */
/* Chunkwise form                                                               */
/* ---------------------------------------------------------------------------- */

/* A fast screen of one chunkwise call, as screen_chunk_call in dispatch.c: 1
 * when the call is certainly valid, 0 when not sure (the caller then runs
 * kdalab_check_f64, which decides and words the error). */
static int screen_chunk_call_f64(const simd_table_f64 *tab, const kdalab_dims *dims,
                                 kdalab_mechanism mech, double scale, const double *q,
                                 const double *k, const double *v, const double *g,
                                 const double *beta, const double *h0, const double *o)
{
    kdalab_counts n;
    if ((unsigned)mech > (unsigned)KDALAB_KDA || kdalab_check_scale(scale) != KDALAB_OK ||
        kdalab_count_dims(dims, mech, sizeof(double), &n) != KDALAB_OK)
        return 0;
    int need_beta = kdalab_mechanism_has_beta(mech);
    if (n.qk > 0 && (!q || !k || !v || !o || (n.g > 0 && !g) || (need_beta && !beta)))
        return 0;
    enum { SEG = 1 << 14 };
    struct {
        const double *x;
        size_t n;
        kdalab_value_rule rule;
    } arr[6] = {{q, n.qk, KDALAB_RULE_FINITE},
                {k, n.qk, KDALAB_RULE_FINITE},
                {v, n.v, KDALAB_RULE_FINITE},
                {g, n.qk ? n.g : 0, KDALAB_RULE_LOG_DECAY},
                {beta, need_beta && n.qk ? n.bth : 0, KDALAB_RULE_BETA},
                {h0, h0 ? n.state : 0, KDALAB_RULE_FINITE}};
    size_t nseg = 0;
    for (int a = 0; a < 6; a++)
        nseg += (arr[a].n + SEG - 1) / SEG;
    int doubt = 0;
#pragma omp parallel for schedule(static) reduction(| : doubt)
    for (size_t sgi = 0; sgi < nseg; sgi++) {
        size_t idx = sgi;
        for (int a = 0; a < 6; a++) {
            size_t na = (arr[a].n + SEG - 1) / SEG;
            if (idx < na) {
                size_t off = idx * SEG, len = arr[a].n - off < SEG ? arr[a].n - off : SEG;
                doubt |= !tab->screen(arr[a].x + off, len, arr[a].rule);
                break;
            }
            idx -= na;
        }
    }
    return !doubt;
}

kdalab_status kdalab_simd_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *h0, double *o, double *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_chunk_opts op;
    const simd_table_f64 *tab = active_table_f64();
    kdalab_status s = KDALAB_OK;
    if (!screen_chunk_call_f64(tab, dims, mech, scale, q, k, v, g, beta, h0, o))
        s = kdalab_check_f64(dims, mech, scale, q, k, v, g, beta, h0, o, NULL);
    if (s != KDALAB_OK)
        return s;
    const kdalab_chunk_opts dflt = kdalab_simd_chunk_opts_default();
    s = kdalab_check_chunk_opts(opts ? opts : &dflt, 1, &op);
    if (s != KDALAB_OK)
        return s;
    if (op.decay != KDALAB_DECAY_SAFE) /* the study modes: the reference's */
        return kdalab_chunk_f64(dims, mech, scale, q, k, v, g, beta, h0, o, ht, &op, report);

    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1);
    const size_t c = op.subchunk < C ? op.subchunk : C;

    simd_plan pl;
    s = simd_plan_make(&pl, B, H, C, c, K, V, sizeof(double), tab->work_floats);
    if (s != KDALAB_OK)
        return s;
    const int nth = pl.nth;
    const size_t ntasks = pl.ntasks;
    const size_t gw = kdalab_mechanism_g_width(mech, K);
    size_t bad_o = 0, bad_ht = 0;
#pragma omp parallel num_threads(nth) reduction(+ : bad_o, bad_ht)
    {
        double *mywork = pl.work[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (size_t task = 0; task < ntasks; task++) {
            size_t b, h, v0, v1;
            simd_plan_task(&pl, V, task, &b, &h, &v0, &v1);
            size_t row0 = b * T * H + h, bh = b * H + h; /* (b, t = 0, h) */
            simd_head_args_f64 a = {
                .mech = mech, .T = T, .K = K, .V = V, .v0 = v0, .v1 = v1, .nh = pl.nh,
                .chunk = C, .subchunk = c, .scale = scale,
                .q = q ? q + row0 * K : NULL, .k = k ? k + row0 * K : NULL,
                .v = v ? v + row0 * V : NULL,
                .g = (gw && g) ? g + row0 * gw : NULL,
                .beta = (mech != KDALAB_LINEAR_ATTENTION && beta) ? beta + row0 : NULL,
                .h0 = h0 ? h0 + bh * K * V : NULL,
                .o = o ? o + row0 * V : NULL, .ht = ht ? ht + bh * K * V : NULL,
                .ld_qk = H * K, .ld_v = H * V, .ld_g = H * gw, .ld_b = H,
            };
            tab->chunk_head(&a, mywork, &bad_o, &bad_ht);
        }
    }
    simd_plan_free(&pl);
    return simd_chunk_finish(bad_o, bad_ht, report);
}

/* ---------------------------------------------------------------------------- */
/* Decode step                                                                  */
/* ---------------------------------------------------------------------------- */

kdalab_status kdalab_simd_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, double beta, double *S, double *o)
{
    const simd_table_f64 *tab = active_table_f64();
    /* a screen, not a check, as in kdalab_simd_step_f32 (dispatch.c) */
    size_t gn = kdalab_mechanism_g_width(mech, K);
    int certain =
        (unsigned)mech <= (unsigned)KDALAB_KDA && K && V && q && k && v && S && o &&
        (gn == 0 || g) && kdalab_check_scale(scale) == KDALAB_OK &&
        (!kdalab_mechanism_has_beta(mech) ||
         kdalab_check_values_f64(KDALAB_RULE_BETA, "beta", &beta, 1, NULL) == KDALAB_OK) &&
        K <= ((size_t)-1) / sizeof(double) / (V > K ? V : K) &&
        tab->screen(q, K, KDALAB_RULE_FINITE) && tab->screen(k, K, KDALAB_RULE_FINITE) &&
        tab->screen(v, V, KDALAB_RULE_FINITE) &&
        (gn == 0 || tab->screen(g, gn, KDALAB_RULE_LOG_DECAY));
    if (!certain) { /* the library's checks, except S: the kernel's first pass checks it */
        kdalab_status c = kdalab_check_step_args_f64(mech, K, V, scale, q, k, v, g, beta, S, o);
        if (c != KDALAB_OK)
            return c;
    }
    size_t bad = 0;
    kdalab_status s = tab->step(mech, K, V, scale, q, k, v, g, beta, S, o, &bad);
    if (s == KDALAB_ENONFINITE)
        return kdalab_fail(KDALAB_ENONFINITE, "S[%zu] is %g: inputs must be finite", bad,
                           S[bad]);
    if (s == KDALAB_ENOMEM)
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a decode step of K = %zu, V = %zu",
                           K, V);
    if (s == KDALAB_ERANGE)
        return kdalab_fail(KDALAB_ERANGE,
                           "SIMD decode step: the state overflowed from finite inputs "
                           "(S and o are written)");
    if (s != KDALAB_OK)
        return s;
    return kdalab_check_outputs_f64("SIMD decode step", o, V, NULL, 0, NULL, NULL);
}
