/*
 * tests/test_call.c — the one call (lib/call/) over fla's varlen
 * (cu_seqlens) and GVA layouts: the golden cases of tests/golden_varlen in
 * every form, implementation and precision, varlen = each sequence alone, GVA with G = 1 = plain multi-head,
 * the GVA backward = the backward of the expanded heads, a poisoned state
 * slot that never leaks, every bad boundary named, and a missing arrays'
 * struct or required array named; kdalab_struct_size, which bindings check
 * their struct layouts against.
 *
 * Tolerances, relative to max |expected|: float64 1e-12 (the golden files
 * agree with an independent recurrence to 5e-16; chunking reorders sums),
 * float32 1e-5 (as test_golden: 24-bit mantissa over T <= 52 steps).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common.h"

#define F64_TOL 1e-12
#define F32_TOL 1e-5
#define MAX_CASES 16

typedef struct {
    char name[64];
    kdalab_mechanism mech;
    kdalab_dims dims; /* B = 1, T, H, K, V */
    size_t N, HV;
    double scale;
    int has_h0;
    int64_t cu[64];
    kdalab_array q, k, v, g, beta, h0, o, ht;
} varlen_case;

/* The four ways a form runs: the reference's two forms, then the SIMD
 * path's (the recurrent one float32 only). */
enum { REC, CHUNK, SIMD_REC, SIMD_CHUNK };

/* A call of one of them over a layout. */
static kdalab_call call_of(const int64_t *cu, size_t n_seqs, size_t HV, const kdalab_dims *d,
                           int way, kdalab_mechanism mech, double scale,
                           const kdalab_chunk_opts *opts)
{
    return (kdalab_call){.dims = *d, .HV = HV, .cu_seqlens = cu, .n_seqs = n_seqs,
                         .mech = mech, .scale = scale,
                         .form = way == REC || way == SIMD_REC ? KDALAB_FORM_RECURRENT
                                                               : KDALAB_FORM_CHUNK,
                         .impl = way >= SIMD_REC ? KDALAB_IMPL_SIMD : KDALAB_IMPL_REFERENCE,
                         .opts = opts};
}

static varlen_case cases[MAX_CASES];
static size_t n_cases;

static void load(const char *name, const char *key, kdalab_array *a, int required)
{
    char path[512];
    snprintf(path, sizeof path, "tests/golden_varlen/%s.%s.npy", name, key);
    memset(a, 0, sizeof *a);
    if (!required)
        return;
    if (kdalab_npy_read(path, a) != KDALAB_OK)
        fail_msg("%s: %s", path, kdalab_last_error());
}

static int setup(void **state)
{
    (void)state;
    FILE *f = fopen("tests/golden_varlen/MANIFEST.tsv", "r");
    if (!f)
        return -1;
    char line[512], mech[64];
    while (fgets(line, sizeof line, f) && n_cases < MAX_CASES) {
        if (line[0] == '#')
            continue;
        varlen_case *c = &cases[n_cases];
        memset(c, 0, sizeof *c);
        if (sscanf(line, "%63s %63s %zu %zu %zu %zu %zu %zu %lf %d", c->name, mech, &c->dims.T,
                   &c->N, &c->dims.H, &c->HV, &c->dims.K, &c->dims.V, &c->scale,
                   &c->has_h0) != 10 ||
            kdalab_mechanism_parse(mech, &c->mech) != KDALAB_OK)
            return -1;
        c->dims.B = 1;
        load(c->name, "q", &c->q, 1);
        load(c->name, "k", &c->k, 1);
        load(c->name, "v", &c->v, 1);
        load(c->name, "g", &c->g, kdalab_mechanism_g_width(c->mech, 1) > 0);
        load(c->name, "beta", &c->beta, kdalab_mechanism_has_beta(c->mech));
        load(c->name, "h0", &c->h0, c->has_h0);
        load(c->name, "o", &c->o, 1);
        load(c->name, "ht", &c->ht, 1);
        kdalab_array cu;
        load(c->name, "cu_seqlens", &cu, 1);
        if (cu.dtype != KDALAB_DTYPE_I64 || cu.size != c->N + 1 || cu.size > 64)
            return -1;
        for (size_t i = 0; i < cu.size; i++)
            c->cu[i] = (int64_t)cu.data[i];
        kdalab_array_free(&cu);
        n_cases++;
    }
    fclose(f);
    return n_cases > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < n_cases; i++) {
        kdalab_array *all[] = {&cases[i].q, &cases[i].k,  &cases[i].v, &cases[i].g,
                               &cases[i].beta, &cases[i].h0, &cases[i].o, &cases[i].ht};
        for (size_t a = 0; a < 8; a++)
            kdalab_array_free(all[a]);
    }
    return 0;
}

/* One golden case through kdalab_run_f64 / _f32 in one form: the worse of
 * the o and ht errors. */
static double golden_error(const varlen_case *c, int form, size_t chunk, int f32)
{
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    opts.chunk = chunk;
    const kdalab_call bt = call_of(c->cu, c->N, c->HV, &c->dims, form, c->mech, c->scale, &opts);
    size_t no = c->o.size, nh = c->ht.size;
    double *o = malloc(no * sizeof *o), *ht = malloc(nh * sizeof *ht);
    assert_true(o && ht);
    kdalab_status s;
    if (!f32) {
        kdalab_tensors_f64 a = {.q = c->q.data, .k = c->k.data, .v = c->v.data,
                                .g = c->g.data, .beta = c->beta.data, .h0 = c->h0.data,
                                .o = o, .ht = ht};
        s = kdalab_run_f64(&bt, &a, NULL);
    } else {
        float *q = to_f32(c->q.data, c->q.size), *k = to_f32(c->k.data, c->k.size);
        float *v = to_f32(c->v.data, c->v.size), *g = to_f32(c->g.data, c->g.size);
        float *beta = to_f32(c->beta.data, c->beta.size), *h0 = to_f32(c->h0.data, c->h0.size);
        float *fo = malloc(no * sizeof *fo), *fht = malloc(nh * sizeof *fht);
        assert_true(fo && fht);
        kdalab_tensors_f32 a = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .h0 = h0,
                                .o = fo, .ht = fht};
        s = kdalab_run_f32(&bt, &a, NULL);
        for (size_t i = 0; i < no; i++)
            o[i] = fo[i];
        for (size_t i = 0; i < nh; i++)
            ht[i] = fht[i];
        free(q); free(k); free(v); free(g); free(beta); free(h0); free(fo); free(fht);
    }
    if (s != KDALAB_OK)
        fail_msg("%s form %d: %s (%s)", c->name, (int)form, kdalab_strerror(s),
                 kdalab_last_error());
    double eo = rel_err_f64(o, c->o.data, no), eh = rel_err_f64(ht, c->ht.data, nh);
    free(o);
    free(ht);
    return eo > eh ? eo : eh;
}

/* Every golden varlen / GVA case in every form, precision and SIMD level. */
static void test_golden(void **state)
{
    (void)state;
    const size_t chunks[] = {7, 16, 64};
    double w64 = 0, w32 = 0;
    for (size_t ci = 0; ci < n_cases; ci++) {
        const varlen_case *c = &cases[ci];
        double e = golden_error(c, REC, 64, 0);
        for (size_t i = 0; i < 3; i++) {
            double ec = golden_error(c, CHUNK, chunks[i], 0);
            e = ec > e ? ec : e;
        }
        if (!(e <= F64_TOL))
            fail_msg("%s float64: %.3g > %g", c->name, e, F64_TOL);
        w64 = e > w64 ? e : w64;
        for (int lvl = KDALAB_SIMD_SCALAR; lvl <= KDALAB_SIMD_AVX512; lvl++) {
            if (!kdalab_simd_level_available((kdalab_simd_level)lvl))
                continue;
            assert_int_equal(kdalab_simd_set_level((kdalab_simd_level)lvl), KDALAB_OK);
            double es = golden_error(c, SIMD_CHUNK, 16, 0); /* float64 SIMD */
            if (!(es <= F64_TOL))
                fail_msg("%s float64 SIMD level %s: %.3g > %g", c->name,
                         kdalab_simd_level_name((kdalab_simd_level)lvl), es, F64_TOL);
            w64 = es > w64 ? es : w64;
            for (int fi = REC; fi <= SIMD_CHUNK; fi++) {
                double ef = golden_error(c, fi, 16, 1);
                if (!(ef <= F32_TOL))
                    fail_msg("%s float32 form %d level %s: %.3g > %g", c->name, fi,
                             kdalab_simd_level_name((kdalab_simd_level)lvl), ef, F32_TOL);
                w32 = ef > w32 ? ef : w32;
            }
        }
        assert_int_equal(kdalab_simd_set_level(KDALAB_SIMD_AUTO), KDALAB_OK);
    }
    printf("    golden varlen/GVA: float64 %.2e (tolerance %g), float32 and SIMD %.2e "
           "(tolerance %g)\n",
           w64, F64_TOL, w32, F32_TOL);
}

/* A random problem in the batch layout: q, k with H heads, the rest with HV. */
typedef struct {
    kdalab_dims d;
    size_t HV, N;
    double *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
    double *a, *b; /* the DPLR row's low-rank term, small: [B, T, HV, K] */
} batch_problem;

static double *randn(gsl_rng *r, size_t n, double lo, double hi)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * gsl_rng_uniform(r);
    return x;
}

static void problem_make(batch_problem *p, gsl_rng *r, kdalab_dims d, size_t HV, size_t N)
{
    p->d = d;
    p->HV = HV;
    p->N = N;
    size_t rows = d.B * d.T;
    p->q = randn(r, rows * d.H * d.K, -0.5, 0.5);
    p->k = randn(r, rows * d.H * d.K, -0.5, 0.5);
    p->v = randn(r, rows * HV * d.V, -1, 1);
    p->g = randn(r, rows * HV * d.K, -2, 0);
    p->beta = randn(r, rows * HV, 0, 1);
    p->h0 = randn(r, N * HV * d.K * d.V, -1, 1);
    p->d_o = randn(r, rows * HV * d.V, -1, 1);
    p->dht = randn(r, N * HV * d.K * d.V, -1, 1);
    p->a = randn(r, rows * HV * d.K, -0.3, 0.3);
    p->b = randn(r, rows * HV * d.K, -0.3, 0.3);
}

static void problem_free(batch_problem *p)
{
    free(p->q); free(p->k); free(p->v); free(p->g); free(p->beta); free(p->h0);
    free(p->d_o); free(p->dht); free(p->a); free(p->b);
}

/* Varlen = each sequence run alone (bit for bit in float64), for every
 * mechanism and both forms; a poisoned ht buffer without h0 never leaks. */
static void test_varlen_is_each_sequence_alone(void **state)
{
    (void)state;
    gsl_rng *r = test_rng(41);
    const int64_t cu[] = {0, 5, 6, 19, 33};
    kdalab_dims d = {.B = 1, .T = 33, .H = 2, .K = 6, .V = 4};
    for (int m = 0; m < KDALAB_N_MECHANISMS; m++) /* every row of the table */
        for (int form = REC; form <= CHUNK; form++) {
            batch_problem p;
            problem_make(&p, r, d, d.H, 4);
            size_t no = d.T * d.H * d.V, nst = 4 * d.H * d.K * d.V, KV = d.K * d.V;
            double *o = malloc(no * 8), *ht = malloc(nst * 8);
            for (size_t i = 0; i < nst; i++)
                ht[i] = NAN; /* a poisoned slot: must be overwritten, never read */
            kdalab_chunk_opts opts = kdalab_chunk_opts_default();
            opts.chunk = 4;
            kdalab_tensors_f64 a = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                    .a = p.a, .b = p.b, .o = o, .ht = ht};
            const kdalab_call bt = call_of(cu, 4, d.H, &d, form, (kdalab_mechanism)m, 0.4, &opts);
            assert_int_equal(kdalab_run_f64(&bt, &a, NULL), KDALAB_OK);
            for (size_t n = 0; n < 4; n++) {
                size_t t0 = (size_t)cu[n], L = (size_t)(cu[n + 1] - cu[n]);
                kdalab_dims dn = {.B = 1, .T = L, .H = d.H, .K = d.K, .V = d.V};
                double *on = malloc(L * d.H * d.V * 8), *hn = malloc(d.H * KV * 8);
                size_t gw = kdalab_mechanism_g_width((kdalab_mechanism)m, d.K);
                const size_t tk = t0 * d.H * d.K;
                kdalab_status s = run_ab_f64(form == REC ? NULL : &opts, (kdalab_mechanism)m,
                                             &dn, 0.4, p.q + tk, p.k + tk, p.v + t0 * d.H * d.V,
                                             p.g + t0 * d.H * gw, p.beta + t0 * d.H, p.a + tk,
                                             p.b + tk, NULL, on, hn, NULL);
                assert_int_equal(s, KDALAB_OK);
                if (memcmp(on, o + t0 * d.H * d.V, L * d.H * d.V * 8) ||
                    memcmp(hn, ht + n * d.H * KV, d.H * KV * 8))
                    fail_msg("%s form %d: sequence %zu differs from running it alone",
                             kdalab_mechanism_name((kdalab_mechanism)m), form, n);
                free(on);
                free(hn);
            }
            free(o);
            free(ht);
            problem_free(&p);
        }
    gsl_rng_free(r);
}

/* GVA with G = 1 is plain multi-head, bit for bit; GVA's backward equals the
 * backward of the expanded problem (q, k repeated per value head), its dq, dk
 * summed over each group. */
static void test_gva(void **state)
{
    (void)state;
    gsl_rng *r = test_rng(43);
    kdalab_dims d = {.B = 2, .T = 13, .H = 2, .K = 5, .V = 3};
    batch_problem p;
    problem_make(&p, r, d, d.H, d.B);
    size_t no = d.B * d.T * d.H * d.V, nst = d.B * d.H * d.K * d.V;
    double *o1 = malloc(no * 8), *o2 = malloc(no * 8), *h1 = malloc(nst * 8),
           *h2 = malloc(nst * 8);
    const kdalab_call plain = call_of(NULL, 0, d.H, &d, CHUNK, KDALAB_KDA, 0.5, NULL);
    kdalab_tensors_f64 a = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                            .h0 = p.h0, .o = o1, .ht = h1};
    assert_int_equal(kdalab_run_f64(&plain, &a, NULL), KDALAB_OK);
    assert_int_equal(
        kdalab_chunk_f64(&d, KDALAB_KDA, 0.5, p.q, p.k, p.v, p.g, p.beta, p.h0, o2, h2, NULL, NULL),
        KDALAB_OK);
    assert_memory_equal(o1, o2, no * 8);
    assert_memory_equal(h1, h2, nst * 8);
    free(o1); free(o2); free(h1); free(h2);
    problem_free(&p);

    /* G = 3: the backward against the expanded heads */
    const size_t G = 3, HV = G * d.H;
    problem_make(&p, r, d, HV, d.B);
    size_t rows = d.B * d.T, nqk = rows * d.H * d.K, nqx = rows * HV * d.K;
    double *qx = malloc(nqx * 8), *kx = malloc(nqx * 8);
    for (size_t row = 0; row < rows; row++)
        for (size_t j = 0; j < HV; j++) {
            memcpy(qx + (row * HV + j) * d.K, p.q + (row * d.H + j / G) * d.K, d.K * 8);
            memcpy(kx + (row * HV + j) * d.K, p.k + (row * d.H + j / G) * d.K, d.K * 8);
        }
    kdalab_dims dx = d;
    dx.H = HV;
    double *dq = calloc(nqk, 8), *dk = calloc(nqk, 8), *dqx = calloc(nqx, 8),
           *dkx = calloc(nqx, 8), *dg = calloc(nqx, 8), *dgx = calloc(nqx, 8);
    const kdalab_call gva = call_of(NULL, 0, HV, &d, CHUNK, KDALAB_KDA, 0.5, NULL);
    kdalab_tensors_f64 ga = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                             .h0 = p.h0, .d_o = p.d_o, .dht = p.dht, .dq = dq, .dk = dk,
                             .dg = dg};
    assert_int_equal(kdalab_run_bwd_f64(&gva, &ga), KDALAB_OK);
    assert_int_equal(kdalab_recurrent_bwd_f64(&dx, KDALAB_KDA, 0.5, qx, kx, p.v, p.g, p.beta,
                                              p.h0, p.d_o, p.dht, dqx, dkx, NULL, dgx, NULL,
                                              NULL),
                     KDALAB_OK);
    double *dqs = calloc(nqk, 8), *dks = calloc(nqk, 8);
    for (size_t row = 0; row < rows; row++)
        for (size_t j = 0; j < HV; j++)
            for (size_t c = 0; c < d.K; c++) {
                dqs[(row * d.H + j / G) * d.K + c] += dqx[(row * HV + j) * d.K + c];
                dks[(row * d.H + j / G) * d.K + c] += dkx[(row * HV + j) * d.K + c];
            }
    double e = rel_err_f64(dq, dqs, nqk), ek = rel_err_f64(dk, dks, nqk),
           eg = rel_err_f64(dg, dgx, nqx);
    if (!(e <= F64_TOL && ek <= F64_TOL && eg <= F64_TOL))
        fail_msg("GVA backward vs expanded heads: dq %.3g dk %.3g dg %.3g", e, ek, eg);
    free(qx); free(kx); free(dq); free(dk); free(dqx); free(dkx); free(dg); free(dgx);
    free(dqs); free(dks);
    problem_free(&p);
    gsl_rng_free(r);
}

/* Each bad boundary is an error naming its index; nothing is written. */
static void test_bad_layouts(void **state)
{
    (void)state;
    gsl_rng *r = test_rng(47);
    kdalab_dims d = {.B = 1, .T = 10, .H = 2, .K = 3, .V = 2};
    batch_problem p;
    problem_make(&p, r, d, d.H, 3);
    double o[40], ht[36];
    for (size_t i = 0; i < 40; i++)
        o[i] = 7;
    const struct {
        int64_t cu[4];
        size_t n;
        const char *needle;
    } bad[] = {{{1, 4, 7, 10}, 3, "cu_seqlens[0] = 1"},
               {{0, 4, 4, 10}, 3, "cu_seqlens[2] = 4"},
               {{0, 6, 4, 10}, 3, "cu_seqlens[2] = 4"},
               {{0, 4, 7, 9}, 3, "cu_seqlens[3] = 9"},
               {{0, 4, 7, 11}, 3, "cu_seqlens[3] = 11"},
               {{0, -2, 7, 10}, 3, "cu_seqlens[1] = -2"}};
    const kdalab_tensors_f64 a = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                  .o = o, .ht = ht};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kdalab_call bt = call_of(bad[i].cu, bad[i].n, d.H, &d, REC, KDALAB_KDA, 0.5, NULL);
        assert_int_equal(kdalab_run_f64(&bt, &a, NULL), KDALAB_EINVAL);
        if (!strstr(kdalab_last_error(), bad[i].needle))
            fail_msg("'%s' lacks '%s'", kdalab_last_error(), bad[i].needle);
    }
    kdalab_call two = call_of(NULL, 0, 3, &d, REC, KDALAB_KDA, 0.5, NULL);
    assert_int_equal(kdalab_run_f64(&two, &a, NULL), KDALAB_ESIZE);
    const int64_t cu[] = {0, 10};
    kdalab_dims d2 = d;
    d2.B = 2;
    kdalab_call b2 = call_of(cu, 1, d.H, &d2, REC, KDALAB_KDA, 0.5, NULL);
    assert_int_equal(kdalab_run_f64(&b2, &a, NULL), KDALAB_ESIZE);
    p.g[5] = 0.5; /* the forward's rules still apply, to the whole call */
    kdalab_call ok = call_of(cu, 1, d.H, &d, REC, KDALAB_KDA, 0.5, NULL);
    assert_int_equal(kdalab_run_f64(&ok, &a, NULL), KDALAB_EDOMAIN);
    for (size_t i = 0; i < 40; i++)
        assert_true(o[i] == 7);
    problem_free(&p);
    gsl_rng_free(r);
}

/* HV = 0 value heads is refused by every entry point (forward in both
 * precisions, every form; backward), naming HV, before anything is read or
 * written: it is not a stand-in for H. */
static void test_zero_value_heads(void **state)
{
    (void)state;
    gsl_rng *r = test_rng(53);
    kdalab_dims d = {.B = 1, .T = 6, .H = 2, .K = 3, .V = 2};
    batch_problem p;
    problem_make(&p, r, d, d.H, d.B);
    const size_t no = d.B * d.T * d.H * d.V;
    double o[24], dq[36];
    float fq[36], fk[36], fv[24], fg[36], fb[12], fo[24];
    for (size_t i = 0; i < 36; i++)
        fq[i] = (float)p.q[i], fk[i] = (float)p.k[i], fg[i] = (float)p.g[i];
    for (size_t i = 0; i < 24; i++)
        fv[i] = (float)p.v[i];
    for (size_t i = 0; i < 12; i++)
        fb[i] = (float)p.beta[i];
    const int64_t cu[] = {0, 2, 6};
    const struct {
        const int64_t *cu;
        size_t n;
    } zero[] = {{NULL, 0}, {cu, 2}};
    const kdalab_tensors_f64 a = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                  .o = o};
    const kdalab_tensors_f32 fa = {.q = fq, .k = fk, .v = fv, .g = fg, .beta = fb, .o = fo};
    const kdalab_tensors_f64 ga = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                   .d_o = p.d_o, .dq = dq};
    for (size_t z = 0; z < 2; z++)
        for (int m = 0; m < KDALAB_N_MECHANISMS; m++) /* every row of the table */ {
            for (int f = REC; f <= SIMD_CHUNK; f++) {
                for (size_t i = 0; i < no; i++)
                    o[i] = 7, fo[i] = 7;
                const kdalab_call c =
                    call_of(zero[z].cu, zero[z].n, 0, &d, f, (kdalab_mechanism)m, 0.5, NULL);
                if (f != SIMD_REC) {
                    assert_int_equal(kdalab_run_f64(&c, &a, NULL), KDALAB_ESIZE);
                    if (!strstr(kdalab_last_error(), "HV = 0"))
                        fail_msg("'%s' does not name HV = 0", kdalab_last_error());
                }
                assert_int_equal(kdalab_run_f32(&c, &fa, NULL), KDALAB_ESIZE);
                for (size_t i = 0; i < no; i++)
                    assert_true(o[i] == 7 && fo[i] == 7);
            }
            for (int f = REC; f <= CHUNK; f++) {
                for (size_t i = 0; i < 36; i++)
                    dq[i] = 7;
                const kdalab_call c =
                    call_of(zero[z].cu, zero[z].n, 0, &d, f, (kdalab_mechanism)m, 0.5, NULL);
                assert_int_equal(kdalab_run_bwd_f64(&c, &ga), KDALAB_ESIZE);
                for (size_t i = 0; i < 36; i++)
                    assert_true(dq[i] == 7);
            }
        }
    problem_free(&p);
    gsl_rng_free(r);
}

/* The arrays' struct missing, or a required array of it left NULL (a field
 * the caller forgot or set under another name): KDALAB_ENULL naming it, in
 * every entry point, before anything is written. */
static void test_missing_arrays(void **state)
{
    (void)state;
    gsl_rng *r = test_rng(59);
    kdalab_dims d = {.B = 1, .T = 6, .H = 2, .K = 3, .V = 2};
    batch_problem p;
    problem_make(&p, r, d, d.H, d.B);
    double o[24], dq[36];
    float fo[24];
    const kdalab_call bt = call_of(NULL, 0, d.H, &d, CHUNK, KDALAB_KDA, 0.5, NULL);
    const kdalab_call rec = call_of(NULL, 0, d.H, &d, REC, KDALAB_KDA, 0.5, NULL);
    const kdalab_call simd = call_of(NULL, 0, d.H, &d, SIMD_CHUNK, KDALAB_KDA, 0.5, NULL);
    assert_int_equal(kdalab_run_f64(&bt, NULL, NULL), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "x is NULL"));
    assert_int_equal(kdalab_run_f32(&bt, NULL, NULL), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "x is NULL"));
    assert_int_equal(kdalab_run_bwd_f64(&bt, NULL), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "x is NULL"));
    assert_int_equal(kdalab_run_f64(NULL, NULL, NULL), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "call is NULL"));

    /* each required array of a KDA call left out in turn */
    const char *names[] = {"q", "k", "v", "g", "beta", "o"};
    for (size_t i = 0; i < 6; i++) {
        kdalab_tensors_f64 a = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                                .o = o};
        const double **in[] = {&a.q, &a.k, &a.v, &a.g, &a.beta};
        if (i < 5)
            *in[i] = NULL;
        else
            a.o = NULL;
        for (size_t x = 0; x < 24; x++)
            o[x] = 7;
        assert_int_equal(kdalab_run_f64(&rec, &a, NULL), KDALAB_ENULL);
        char want[32];
        snprintf(want, sizeof want, "%s is NULL", names[i]);
        if (strncmp(kdalab_last_error(), want, strlen(want)) != 0)
            fail_msg("'%s' does not begin '%s'", kdalab_last_error(), want);
        for (size_t x = 0; x < 24; x++)
            assert_true(o[x] == 7);
    }
    kdalab_tensors_f32 fa = {.o = fo}; /* q first */
    assert_int_equal(kdalab_run_f32(&simd, &fa, NULL), KDALAB_ENULL);
    assert_string_equal(kdalab_last_error(), "q is NULL");
    kdalab_tensors_f64 ga = {.q = p.q, .k = p.k, .v = p.v, .g = p.g, .beta = p.beta,
                             .dq = dq}; /* no d_o */
    for (size_t x = 0; x < 36; x++)
        dq[x] = 7;
    assert_int_equal(kdalab_run_bwd_f64(&bt, &ga), KDALAB_ENULL);
    assert_string_equal(kdalab_last_error(), "d_o is NULL");
    ga.d_o = p.d_o, ga.g = NULL;
    assert_int_equal(kdalab_run_bwd_f64(&bt, &ga), KDALAB_ENULL);
    assert_non_null(strstr(kdalab_last_error(), "g is NULL"));
    for (size_t x = 0; x < 36; x++)
        assert_true(dq[x] == 7);
    problem_free(&p);
    gsl_rng_free(r);
}

/* HV whose value arrays overflow size_t: refused by kdalab_call_check,
 * naming HV (not the H of the plain calls it is cut into). */
static void test_value_heads_overflow(void **state)
{
    (void)state;
    const kdalab_dims d = {.B = 1, .T = 2, .H = 1, .K = 1, .V = 1};
    const kdalab_call huge = call_of(NULL, 0, SIZE_MAX / 4, &d, REC, KDALAB_KDA, 0.5, NULL);
    assert_int_equal(kdalab_call_check(&huge, 0, 0), KDALAB_EOVERFLOW);
    if (!strstr(kdalab_last_error(), "HV = 4611686018427387903"))
        fail_msg("'%s' does not name HV", kdalab_last_error());
}

/* Grouped value heads whose dq, dk overflow only in their sum: two value
 * heads read one q/k head, each head's dq = scale beta k v d_o = 1e308 is
 * finite, their sum is not. KDALAB_ERANGE naming dq, in float64 through the
 * reference's two forms and the SIMD chunkwise form, and the same in
 * float32 (d_o 3e38). A backward may not return inf as a gradient with
 * KDALAB_OK. */
static void test_value_heads_sum_overflows(void **state)
{
    (void)state;
    const kdalab_dims d = {.B = 1, .T = 1, .H = 1, .K = 1, .V = 1};
    const double one[2] = {1, 1}, big[2] = {1e308, 1e308};
    const float onef[2] = {1, 1}, bigf[2] = {3e38f, 3e38f};
    const int ways[] = {REC, CHUNK, SIMD_CHUNK};
    for (size_t w = 0; w < 3; w++) {
        const kdalab_call c = call_of(NULL, 0, 2, &d, ways[w], KDALAB_DELTANET, 1.0, NULL);
        double dq[1] = {0}, dv[2] = {0};
        kdalab_tensors_f64 x = {.q = one, .k = one, .v = one, .beta = one, .d_o = big,
                                .dq = dq, .dv = dv};
        assert_int_equal(kdalab_run_bwd_f64(&c, &x), KDALAB_ERANGE);
        if (!strstr(kdalab_last_error(), "in dq"))
            fail_msg("way %d: '%s' does not name dq", ways[w], kdalab_last_error());
    }
    for (size_t w = 0; w < 3; w++) {
        const kdalab_call c = call_of(NULL, 0, 2, &d, ways[w], KDALAB_DELTANET, 1.0, NULL);
        float dq[1] = {0};
        kdalab_tensors_f32 x = {.q = onef, .k = onef, .v = onef, .beta = onef, .d_o = bigf,
                                .dq = dq};
        assert_int_equal(kdalab_run_bwd_f32(&c, &x), KDALAB_ERANGE);
    }
}

/* kdalab_struct_size: each public struct a binding mirrors by its C name, 0
 * for NULL, an unknown name, or a prefix of a known one */
static void test_struct_size(void **state)
{
    (void)state;
    assert_int_equal(kdalab_struct_size("kdalab_dims"), sizeof(kdalab_dims));
    assert_int_equal(kdalab_struct_size("kdalab_chunk_opts"), sizeof(kdalab_chunk_opts));
    assert_int_equal(kdalab_struct_size("kdalab_call"), sizeof(kdalab_call));
    assert_int_equal(kdalab_struct_size("kdalab_tensors_f64"), sizeof(kdalab_tensors_f64));
    assert_int_equal(kdalab_struct_size("kdalab_tensors_f32"), sizeof(kdalab_tensors_f32));
    assert_int_equal(kdalab_struct_size("kdalab_mechanism_info"), sizeof(kdalab_mechanism_info));
    assert_int_equal(kdalab_struct_size(NULL), 0);
    assert_int_equal(kdalab_struct_size("kdalab_dim"), 0);
    assert_int_equal(kdalab_struct_size("kdalab_status"), 0);
    assert_int_equal(kdalab_struct_size(""), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_struct_size),
        cmocka_unit_test(test_varlen_is_each_sequence_alone),
        cmocka_unit_test(test_gva),
        cmocka_unit_test(test_bad_layouts),
        cmocka_unit_test(test_zero_value_heads),
        cmocka_unit_test(test_missing_arrays),
        cmocka_unit_test(test_value_heads_overflow),
        cmocka_unit_test(test_value_heads_sum_overflows),
    };
    return cmocka_run_group_tests_name("call", tests, setup, teardown);
}
