/*
 * tests/test_call_states.c — h, the state entering each chunk, that the SIMD
 * chunkwise forward writes (the field h of kdalab_tensors_f64 / _f32, fla's
 * return_intermediate_states): for every row of the mechanism table, in
 * float64 and float32, over a plain batch with a short last chunk, varlen
 * with grouped value heads, and a head whose value columns are split over
 * the threads, h[chunk c of sequence n] is the final state of the reference
 * recurrence run on that sequence's first c C_h positions (C_h = the
 * options' h_chunk, a multiple of the chunk C the form runs, or C); chunk
 * 0's is h0 to the bit. kdalab_call_n_chunks counts the chunks. Any other forward given h
 * is refused by name with nothing written, and a backward ignores it; an h
 * whose size overflows is refused before any input is read; an overflowed
 * state is counted in h.
 *
 * Tolerances, relative to max |expected| of each state: float64 1e-12 (the
 * chunkwise form reorders sums: ~1e-15 seen), float32 1e-5 (a 24-bit
 * mantissa over at most 40 steps of values ~1, against the float64
 * recurrence).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common.h"

#define F64_TOL 1e-12
#define F32_TOL 1e-5

/* One layout: dims, value heads, sequences (cu NULL: plain, N = B), chunk,
 * h's chunk (0: the chunk). */
typedef struct {
    const char *name;
    kdalab_dims d;
    size_t HV, N, C;
    const int64_t *cu;
    size_t Ch;
} layout;

static const int64_t CU[] = {0, 5, 6, 19, 33};
static const layout LAYOUTS[] = {
    /* a short last chunk (37 = 4 * 8 + 5) in each of two batch entries */
    {"plain", {.B = 2, .T = 37, .H = 2, .K = 5, .V = 3}, 2, 2, 8, NULL, 0},
    /* sequences of 5, 1, 13, 14 positions, two value heads per q/k head */
    {"varlen+GVA", {.B = 1, .T = 33, .H = 2, .K = 6, .V = 4}, 4, 4, 4, CU, 0},
    /* one head, V = 40: its value columns are split over the threads */
    {"split columns", {.B = 1, .T = 21, .H = 1, .K = 6, .V = 40}, 1, 1, 8, NULL, 0},
    /* h every 3 chunks of 4: 37 = 3 * 12 + 1, the last state after 36 */
    {"plain, h_chunk 12", {.B = 2, .T = 37, .H = 2, .K = 5, .V = 3}, 2, 2, 4, NULL, 12},
    /* h every 2 chunks of 2, over sequences of odd lengths */
    {"varlen+GVA, h_chunk 4", {.B = 1, .T = 33, .H = 2, .K = 6, .V = 4}, 4, 4, 2, CU, 4},
};

static double *uniform(gsl_rng *r, size_t n, double lo, double hi)
{
    double *x = malloc((n + 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * gsl_rng_uniform(r);
    return x;
}

/* Rows t0 .. t0 + L - 1 of batch entry b of an array of w values per
 * position (T positions per entry), as a new [1, L, w] array. */
static double *rows(const double *x, size_t T, size_t w, size_t b, size_t t0, size_t L)
{
    double *y = malloc((L * w + 1) * sizeof *y);
    memcpy(y, x + (b * T + t0) * w, L * w * sizeof *y);
    return y;
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Every chunk's state of one run of mechanism m over layout L, float64 or
 * float32, against the reference recurrence on each sequence's prefix. */
static void check_layout(gsl_rng *r, const layout *L, kdalab_mechanism m, int f32)
{
    const kdalab_dims d = L->d;
    const size_t HV = L->HV, KV = d.K * d.V, rows_all = d.B * d.T;
    const size_t gw = kdalab_mechanism_g_width(m, d.K);
    double *q = uniform(r, rows_all * d.H * d.K, -0.5, 0.5);
    double *k = uniform(r, rows_all * d.H * d.K, -0.5, 0.5);
    double *v = uniform(r, rows_all * HV * d.V, -1, 1);
    double *g = uniform(r, rows_all * HV * d.K, -2, 0);
    double *beta = uniform(r, rows_all * HV, 0, 1);
    double *a = uniform(r, rows_all * HV * d.K, -0.3, 0.3);
    double *b = uniform(r, rows_all * HV * d.K, -0.3, 0.3);
    double *h0 = uniform(r, L->N * HV * KV, -1, 1);
    const int ab = kdalab_mechanism_has_ab(m);
    kdalab_chunk_opts opts = kdalab_simd_chunk_opts_default();
    opts.chunk = L->C, opts.h_chunk = L->Ch;
    const size_t Ch = L->Ch ? L->Ch : L->C;
    kdalab_call call = {.dims = d, .HV = HV, .cu_seqlens = L->cu, .n_seqs = L->cu ? L->N : 0,
                        .mech = m, .scale = 0.4, .form = KDALAB_FORM_CHUNK,
                        .impl = KDALAB_IMPL_SIMD, .opts = &opts};
    const size_t NT = kdalab_call_n_chunks(&call), nh = d.B * NT * HV * KV;
    double *h = malloc(nh * sizeof *h), *o = malloc(rows_all * HV * d.V * sizeof *o);
    if (!f32) {
        kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0,
                                .a = a, .b = b, .o = o, .h = h};
        expect_status(kdalab_run_f64(&call, &x, NULL), KDALAB_OK, NULL);
    } else {
        float *qf = to_f32(q, rows_all * d.H * d.K), *kf = to_f32(k, rows_all * d.H * d.K);
        float *vf = to_f32(v, rows_all * HV * d.V), *gf = to_f32(g, rows_all * HV * d.K);
        float *bf = to_f32(beta, rows_all * HV), *af = to_f32(a, rows_all * HV * d.K);
        float *bbf = to_f32(b, rows_all * HV * d.K), *h0f = to_f32(h0, L->N * HV * KV);
        float *of = malloc(rows_all * HV * d.V * sizeof *of), *hf = malloc(nh * sizeof *hf);
        kdalab_tensors_f32 x = {.q = qf, .k = kf, .v = vf, .g = gf, .beta = bf, .h0 = h0f,
                                .a = af, .b = bbf, .o = of, .h = hf};
        expect_status(kdalab_run_f32(&call, &x, NULL), KDALAB_OK, NULL);
        for (size_t i = 0; i < nh; i++)
            h[i] = hf[i];
        /* the float32 inputs, exactly in float64, for the reference below */
        for (size_t i = 0; i < rows_all * d.H * d.K; i++)
            q[i] = qf[i], k[i] = kf[i];
        for (size_t i = 0; i < rows_all * HV * d.V; i++)
            v[i] = vf[i];
        for (size_t i = 0; i < rows_all * HV * d.K; i++)
            g[i] = gf[i], a[i] = af[i], b[i] = bbf[i];
        for (size_t i = 0; i < rows_all * HV; i++)
            beta[i] = bf[i];
        for (size_t i = 0; i < L->N * HV * KV; i++)
            h0[i] = h0f[i];
        free(qf), free(kf), free(vf), free(gf), free(bf), free(af), free(bbf), free(h0f);
        free(of), free(hf);
    }
    size_t slot = 0; /* the chunk of h that sequence n's chunk c is */
    for (size_t n = 0; n < L->N; n++) {
        size_t bn = L->cu ? 0 : n, t0 = L->cu ? (size_t)L->cu[n] : 0;
        size_t len = L->cu ? (size_t)(L->cu[n + 1] - L->cu[n]) : d.T;
        size_t chunks = (len + Ch - 1) / Ch;
        for (size_t c = 0; c < chunks; c++, slot++) {
            const double *got = h + slot * HV * KV;
            if (c == 0) { /* chunk 0 enters with h0, bit for bit */
                if (memcmp(got, h0 + n * HV * KV, HV * KV * sizeof *got) != 0)
                    fail_msg("%s %s %s: sequence %zu's chunk 0 is not h0", L->name,
                             kdalab_mechanism_name(m), f32 ? "f32" : "f64", n);
                continue;
            }
            size_t P = c * Ch; /* the prefix's positions */
            double *pq = rows(q, d.T, d.H * d.K, bn, t0, P), *pk = rows(k, d.T, d.H * d.K, bn, t0, P);
            double *pv = rows(v, d.T, HV * d.V, bn, t0, P), *pg = rows(g, d.T, HV * gw, bn, t0, P);
            double *pb = rows(beta, d.T, HV, bn, t0, P), *pa = rows(a, d.T, HV * d.K, bn, t0, P);
            double *pbb = rows(b, d.T, HV * d.K, bn, t0, P);
            double *po = malloc(P * HV * d.V * sizeof *po), *want = malloc(HV * KV * sizeof *want);
            kdalab_call ref = {.dims = {.B = 1, .T = P, .H = d.H, .K = d.K, .V = d.V},
                               .HV = HV, .mech = m, .scale = 0.4,
                               .form = KDALAB_FORM_RECURRENT, .impl = KDALAB_IMPL_REFERENCE};
            kdalab_tensors_f64 x = {.q = pq, .k = pk, .v = pv, .g = pg, .beta = pb,
                                    .h0 = h0 + n * HV * KV, .a = ab ? pa : NULL,
                                    .b = ab ? pbb : NULL, .o = po, .ht = want};
            expect_status(kdalab_run_f64(&ref, &x, NULL), KDALAB_OK, NULL);
            double err = 0, scale = max_abs(want, HV * KV);
            for (size_t i = 0; i < HV * KV; i++)
                err = fabs(got[i] - want[i]) > err ? fabs(got[i] - want[i]) : err;
            if (!(err <= (f32 ? F32_TOL : F64_TOL) * scale))
                fail_msg("%s %s %s: sequence %zu chunk %zu: max |h - recurrence| = %g of "
                         "%g",
                         L->name, kdalab_mechanism_name(m), f32 ? "f32" : "f64", n, c, err,
                         scale);
            free(pq), free(pk), free(pv), free(pg), free(pb), free(pa), free(pbb), free(po);
            free(want);
        }
    }
    assert_int_equal(slot, L->cu ? NT : d.B * NT); /* every chunk of h checked */
    free(q), free(k), free(v), free(g), free(beta), free(a), free(b), free(h0);
    free(h), free(o);
}

static void test_states_are_the_recurrence_at_chunk_starts(void **state)
{
    (void)state;
    gsl_rng *r = test_rng(71);
    for (size_t l = 0; l < sizeof LAYOUTS / sizeof LAYOUTS[0]; l++)
        for (int m = 0; m < KDALAB_N_MECHANISMS; m++)
            for (int f32 = 0; f32 <= 1; f32++)
                check_layout(r, &LAYOUTS[l], (kdalab_mechanism)m, f32);
    gsl_rng_free(r);
}

/* NT: ceil(T / C), or the sum over the sequences; the implementation's
 * default C without opts, opts->chunk for either form; 0 for NULL, T = 0
 * and a call both checks refuse. */
static void test_n_chunks(void **state)
{
    (void)state;
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    opts.chunk = 8;
    kdalab_call c = {.dims = {.B = 2, .T = 37, .H = 1, .K = 4, .V = 4}, .HV = 1,
                     .mech = KDALAB_KDA, .scale = 0.5, .form = KDALAB_FORM_CHUNK,
                     .impl = KDALAB_IMPL_SIMD, .opts = &opts};
    assert_int_equal(kdalab_call_n_chunks(&c), 5);
    opts.h_chunk = 16; /* h's chunk when set */
    assert_int_equal(kdalab_call_n_chunks(&c), 3);
    opts.h_chunk = 12; /* not a multiple of the chunk: refused */
    assert_int_equal(kdalab_call_n_chunks(&c), 0);
    assert_non_null(strstr(kdalab_last_error(), "h_chunk = 12"));
    opts.h_chunk = 0;
    c.opts = NULL; /* the SIMD path's default, 16 */
    assert_int_equal(kdalab_call_n_chunks(&c), 3);
    c.impl = KDALAB_IMPL_REFERENCE; /* the reference's, 64 */
    assert_int_equal(kdalab_call_n_chunks(&c), 1);
    c.form = KDALAB_FORM_RECURRENT, c.opts = &opts; /* opts->chunk, whatever the form */
    assert_int_equal(kdalab_call_n_chunks(&c), 5);
    c.form = KDALAB_FORM_CHUNK;
    opts.chunk = 4;
    c.opts = &opts;
    c.dims.B = 1, c.dims.T = 33, c.cu_seqlens = CU, c.n_seqs = 4; /* 2 + 1 + 4 + 4 */
    assert_int_equal(kdalab_call_n_chunks(&c), 11);
    opts.precision = KDALAB_BF16; /* a float32 call's options are counted too */
    assert_int_equal(kdalab_call_n_chunks(&c), 11);
    opts.precision = KDALAB_FP32;
    c.scale = 1e-50; /* a float64 scale float32 cannot hold: counted by the float64 check */
    assert_int_equal(kdalab_call_n_chunks(&c), 11);
    c.scale = 0.5;
    const int64_t bad[] = {0, 5, 5, 19, 33};
    c.cu_seqlens = bad; /* both checks refuse: 0, the error set */
    assert_int_equal(kdalab_call_n_chunks(&c), 0);
    assert_non_null(strstr(kdalab_last_error(), "cu_seqlens[2]"));
    c.cu_seqlens = NULL, c.n_seqs = 0, c.dims.T = 0;
    assert_int_equal(kdalab_call_n_chunks(&c), 0);
    assert_int_equal(kdalab_call_n_chunks(NULL), 0);
}

/* A run that does not write h refuses it by name, with o untouched; an h
 * too large for size_t is refused before any array is read (q is NULL). */
static void test_refused(void **state)
{
    (void)state;
    enum { T = 8, K = 4, V = 4 };
    double q[T * K], k[T * K], v[T * V], g[T * K], beta[T], o[T * V], h[4 * K * V];
    float qf[T * K], kf[T * K], vf[T * V], gf[T * K], bf[T], of[T * V], hf[4 * K * V];
    for (size_t i = 0; i < T * K; i++)
        q[i] = k[i] = qf[i] = kf[i] = 0.1f, g[i] = gf[i] = -0.1f;
    for (size_t i = 0; i < T * V; i++)
        v[i] = vf[i] = 1, o[i] = of[i] = NAN;
    for (size_t i = 0; i < T; i++)
        beta[i] = bf[i] = 0.5;
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    opts.chunk = 2;
    kdalab_call c = {.dims = {.B = 1, .T = T, .H = 1, .K = K, .V = V}, .HV = 1,
                     .mech = KDALAB_KDA, .scale = 0.5, .form = KDALAB_FORM_CHUNK,
                     .impl = KDALAB_IMPL_REFERENCE, .opts = &opts};
    kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .o = o, .h = h};
    kdalab_tensors_f32 xf = {.q = qf, .k = kf, .v = vf, .g = gf, .beta = bf, .o = of, .h = hf};
    expect_status(kdalab_run_f64(&c, &x, NULL), KDALAB_EINVAL, "reference chunkwise form");
    expect_status(kdalab_run_f32(&c, &xf, NULL), KDALAB_EINVAL, "h (the state entering");
    c.impl = KDALAB_IMPL_SIMD, c.form = KDALAB_FORM_RECURRENT, c.opts = NULL;
    expect_status(kdalab_run_f32(&c, &xf, NULL), KDALAB_EINVAL, "SIMD recurrent form");
    c.form = KDALAB_FORM_CHUNK, c.opts = &opts;
    opts.decay = KDALAB_DECAY_RESCALED;
    expect_status(kdalab_run_f32(&c, &xf, NULL), KDALAB_EINVAL, "another decay mode");
    for (size_t i = 0; i < T * V; i++)
        if (!isnan(o[i]) || !isnan(of[i]))
            fail_msg("o[%zu] was written by a refused call", i);
    opts.decay = KDALAB_DECAY_SAFE;
    expect_status(kdalab_run_f64(&c, &x, NULL), KDALAB_OK, NULL); /* and h is welcome */
    /* a backward ignores h, as it ignores o and ht: h stays as it was */
    double d_o[T * V], dv[T * V], kept[4 * K * V];
    for (size_t i = 0; i < T * V; i++)
        d_o[i] = 1;
    memcpy(kept, h, sizeof h);
    kdalab_tensors_f64 xb = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .d_o = d_o,
                             .dv = dv, .h = h};
    for (int impl = 0; impl <= 1; impl++) {
        c.impl = impl ? KDALAB_IMPL_SIMD : KDALAB_IMPL_REFERENCE;
        expect_status(kdalab_run_bwd_f64(&c, &xb), KDALAB_OK, NULL);
        assert_memory_equal(h, kept, sizeof h);
    }
    /* h [1, 2^20, 1, 2^21, 2^21] doubles: 2^65 bytes; v, o and the state fit */
    opts.chunk = 1;
    c.dims = (kdalab_dims){.B = 1, .T = (size_t)1 << 20, .H = 1, .K = (size_t)1 << 21,
                           .V = (size_t)1 << 21};
    kdalab_tensors_f64 none = {.h = h};
    expect_status(kdalab_run_f64(&c, &none, NULL), KDALAB_EOVERFLOW, "h [B = 1, NT = 1048576");
}

/* A state that overflows from finite inputs is KDALAB_ERANGE, counted in h
 * (linear attention's state sums k v^T: 4 rows of 1e20 * 1e20 in float32). */
static void test_overflow_counted(void **state)
{
    (void)state;
    enum { T = 8, K = 2, V = 2 };
    float q[T * K], k[T * K], v[T * V], o[T * V], h[2 * K * V];
    for (size_t i = 0; i < T * K; i++)
        q[i] = 0, k[i] = 1e20f;
    for (size_t i = 0; i < T * V; i++)
        v[i] = 1e20f;
    kdalab_chunk_opts opts = kdalab_simd_chunk_opts_default();
    opts.chunk = 4;
    kdalab_call c = {.dims = {.B = 1, .T = T, .H = 1, .K = K, .V = V}, .HV = 1,
                     .mech = KDALAB_LINEAR_ATTENTION, .scale = 0.5,
                     .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD, .opts = &opts};
    kdalab_tensors_f32 x = {.q = q, .k = k, .v = v, .o = o, .h = h};
    expect_status(kdalab_run_f32(&c, &x, NULL), KDALAB_ERANGE, "4 in h");
    assert_true(h[0] == 0 && isinf(h[K * V]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states_are_the_recurrence_at_chunk_starts),
        cmocka_unit_test(test_n_chunks),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_overflow_counted),
    };
    return cmocka_run_group_tests_name("call_states", tests, NULL, NULL);
}
