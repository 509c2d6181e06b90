/*
 * tests/test_simd_bwd.c — the SIMD chunkwise backward (kdalab_simd_chunk_bwd_f64
 * and _f32) against the float64 reference backward (kdalab_chunk_bwd_f64) at
 * every dispatch level this CPU runs (scalar always): the golden gradient
 * cases, random shapes of every mechanism, extreme decay, varlen + GVA
 * through kdalab_run_bwd_f64, the same bits for any thread count and
 * whether the chunk states are all kept or checkpointed (each case runs
 * both and compares them), and bad input refused with the reference's
 * status and no output touched.
 *
 * Tolerances, relative to the max magnitude of each reference gradient (the
 * same reasoning as tests/simd_precisions.c's for the forward):
 *   float64  1e-12: both round at 1.1e-16 and differ in summation order and
 *            in how a decay factor is formed (products of exp(g) here, exp of
 *            span sums there), amplified by the UT solve and the state carry
 *            by a few tens; a float32 intermediate anywhere would be ~1e-7.
 *   float32  1e-5: kdalab's stated float32 accuracy; float32 rounds at 6e-8
 *            and the reference's own float32 backward lands near 1e-6.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common.h"
#include "simd_levels.h"

#define F64_TOL 1e-12
#define F32_TOL 1e-5
#define MAX_CASES 16

static const simdt_precision *const precisions[2] = {&simdt_f32, &simdt_f64};
static const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                         KDALAB_GATED_DELTANET, KDALAB_KDA};

/* The six gradients of one call, in the inputs' layouts (NULL when the
 * mechanism has none). */
typedef struct {
    double *a[6]; /* dq, dk, dv, dg, dbeta, dh0 */
    size_t n[6];
} grads;
static const char *const gnames[6] = {"dq", "dk", "dv", "dg", "dbeta", "dh0"};

static void grads_alloc(grads *gr, const kdalab_dims *d, kdalab_mechanism m, double fill)
{
    size_t gw = kdalab_mechanism_g_width(m, d->K);
    size_t n[6] = {n_qk(d), n_qk(d), n_v(d), n_bth(d) * gw,
                   kdalab_mechanism_has_beta(m) ? n_bth(d) : 0, n_state(d)};
    for (int i = 0; i < 6; i++) {
        gr->n[i] = n[i];
        gr->a[i] = NULL;
        if (n[i]) {
            gr->a[i] = malloc(n[i] * sizeof(double));
            assert_non_null(gr->a[i]);
            for (size_t j = 0; j < n[i]; j++)
                gr->a[i][j] = fill;
        }
    }
}

static void grads_free(grads *gr)
{
    for (int i = 0; i < 6; i++)
        free(gr->a[i]);
}

/* One problem: the forward's inputs and the upstream gradients. */
typedef struct {
    kdalab_dims d;
    kdalab_mechanism m;
    double scale;
    const double *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
} problem;

static kdalab_status ref_bwd(const problem *p, size_t chunk, grads *gr)
{
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.chunk = chunk;
    return kdalab_chunk_bwd_f64(&p->d, p->m, p->scale, p->q, p->k, p->v, p->g, p->beta, p->h0,
                                p->d_o, p->dht, gr->a[0], gr->a[1], gr->a[2], gr->a[3],
                                gr->a[4], gr->a[5], &op);
}

/* kdalab_chunk_opts.bwd_state_bytes that keeps every state of these problems */
#define KEEP_ALL ((size_t)1 << 40)

/* The SIMD backward in precision p (float32: inputs rounded, gradients
 * widened) with state_bytes as kdalab_chunk_opts.bwd_state_bytes (KEEP_ALL:
 * every state kept; 1, or 0 with no workspace: checkpointed). */
static kdalab_status simd_bwd(const simdt_precision *p, const problem *pr, size_t chunk,
                              size_t state_bytes, grads *gr)
{
    kdalab_chunk_opts op = kdalab_simd_chunk_opts_default();
    op.chunk = chunk;
    op.bwd_state_bytes = state_bytes;
    const kdalab_dims *d = &pr->d;
    if (p->size == 8)
        return kdalab_simd_chunk_bwd_f64(d, pr->m, pr->scale, pr->q, pr->k, pr->v, pr->g,
                                         pr->beta, pr->h0, pr->d_o, pr->dht, gr->a[0],
                                         gr->a[1], gr->a[2], gr->a[3], gr->a[4], gr->a[5], &op);
    size_t gw = kdalab_mechanism_g_width(pr->m, d->K);
    float *in[8] = {to_f32(pr->q, n_qk(d)),  to_f32(pr->k, n_qk(d)),
                    to_f32(pr->v, n_v(d)),   to_f32(pr->g, n_bth(d) * gw),
                    to_f32(pr->beta, n_bth(d)), to_f32(pr->h0, n_state(d)),
                    to_f32(pr->d_o, n_v(d)), to_f32(pr->dht, n_state(d))};
    float *out[6];
    for (int i = 0; i < 6; i++)
        out[i] = to_f32(gr->a[i], gr->n[i]);
    kdalab_status s = kdalab_simd_chunk_bwd_f32(d, pr->m, (float)pr->scale, in[0], in[1], in[2],
                                                in[3], in[4], in[5], in[6], in[7], out[0],
                                                out[1], out[2], out[3], out[4], out[5], &op);
    for (int i = 0; i < 6; i++) {
        for (size_t j = 0; out[i] && j < gr->n[i]; j++)
            gr->a[i][j] = out[i][j];
        free(out[i]);
    }
    for (int i = 0; i < 8; i++)
        free(in[i]);
    return s;
}

/* The largest error over the six gradients, each relative to its own max. */
static double worst_err(const grads *got, const grads *want, const char **which)
{
    double w = 0;
    for (int i = 0; i < 6; i++) {
        if (!want->a[i])
            continue;
        double e = rel_err_f64(got->a[i], want->a[i], want->n[i]);
        if (!(e <= w)) {
            w = e;
            *which = gnames[i];
        }
    }
    return w;
}

/* SIMD vs reference on problem pr at chunk C, every level and precision,
 * with the chunk states kept and checkpointed. */
static void check_problem(const problem *pr, size_t chunk, const char *label)
{
    grads ref;
    grads_alloc(&ref, &pr->d, pr->m, 0);
    kdalab_status s = ref_bwd(pr, chunk, &ref);
    if (s != KDALAB_OK)
        fail_msg("%s: reference: %s (%s)", label, kdalab_strerror(s), kdalab_last_error());
    for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
        if (!simdt_use_level(simdt_levels[li]))
            continue;
        for (size_t pi = 0; pi < 2; pi++) {
            grads got[2]; /* states checkpointed (0), kept (1): the same bits */
            for (size_t sb = 0; sb < 2; sb++) {
                const simdt_precision *p = precisions[pi];
                grads_alloc(&got[sb], &pr->d, pr->m, 0);
                s = simd_bwd(p, pr, chunk, sb ? KEEP_ALL : 1, &got[sb]);
                if (s != KDALAB_OK)
                    fail_msg("%s, %s, level %s: %s (%s)", label, p->name,
                             kdalab_simd_level_name(simdt_levels[li]), kdalab_strerror(s),
                             kdalab_last_error());
                const char *which = "";
                double e = worst_err(&got[sb], &ref, &which);
                simdt_note(p, e);
                double tol = p->size == 8 ? F64_TOL : F32_TOL;
                if (!(e <= tol))
                    fail_msg("%s, %s, level %s, C = %zu, states %s: %s relative error %.3g > %g",
                             label, p->name, kdalab_simd_level_name(simdt_levels[li]), chunk,
                             sb ? "kept" : "checkpointed", which, e, tol);
            }
            for (int i = 0; i < 6; i++)
                if (got[0].a[i] && memcmp(got[0].a[i], got[1].a[i], got[0].n[i] * sizeof(double)))
                    fail_msg("%s, %s, level %s, C = %zu: %s differs between the states kept "
                             "and checkpointed", label, precisions[pi]->name,
                             kdalab_simd_level_name(simdt_levels[li]), chunk, gnames[i]);
            grads_free(&got[0]);
            grads_free(&got[1]);
        }
    }
    kdalab_simd_set_level(KDALAB_SIMD_AUTO);
    grads_free(&ref);
}

/* Every golden gradient case (tests/golden_grad), at C = 16 (the default),
 * 7 (sub-chunks cut by the chunk edge) and 64. */
static void test_simd_bwd_golden(void **state)
{
    (void)state;
    static grad_case cases[MAX_CASES];
    size_t nc = grad_load_all(cases, MAX_CASES);
    assert_true(nc > 0);
    const size_t chunks[] = {16, 7, 64};
    for (size_t ci = 0; ci < nc; ci++) {
        const grad_case *c = &cases[ci];
        problem p = {c->dims, c->mech, c->scale, c->q.data, c->k.data, c->v.data,
                     c->g.data, c->beta.data, c->h0.data, c->d_o.data, c->dht.data};
        for (size_t k = 0; k < sizeof chunks / sizeof chunks[0] && !kdalab_mechanism_has_ab(c->mech);
             k++) /* (the DPLR row takes a, b: tests/test_simd_dplr.c) */
            check_problem(&p, chunks[k], c->name);
        grad_case_free(&cases[ci]);
    }
    simdt_print_worst("chunkwise backward, golden cases");
}

/* Random shapes: K, V off the vector width, T not a multiple of C, several
 * heads and sequences, with and without h0 and dht; the last, 38 chunks,
 * checkpointed has six groups of 7 (lib/simd/chunk_bwd.h), the last of 3. */
static void test_simd_bwd_random_shapes(void **state)
{
    (void)state;
    const struct {
        kdalab_dims d;
        size_t chunk;
        int h0, dht;
    } shapes[] = {
        {{1, 37, 1, 16, 16}, 16, 1, 1}, {{2, 50, 3, 13, 9}, 16, 0, 1},
        {{1, 64, 2, 32, 40}, 32, 1, 0}, {{2, 33, 2, 8, 24}, 8, 1, 1},
        {{1, 100, 1, 64, 64}, 64, 1, 1}, {{1, 5, 2, 3, 2}, 16, 0, 0},
        {{1, 300, 1, 8, 8}, 8, 1, 1},
    };
    gsl_rng *rng = test_rng(2027);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t mi = 0; mi < 4; mi++) {
            random_problem rp;
            random_problem_make(&rp, rng, mechs[mi], shapes[si].d, -2.0, shapes[si].h0);
            double *d_o = test_random_array(rng, n_v(&rp.dims));
            double *dht = shapes[si].dht ? test_random_array(rng, n_state(&rp.dims)) : NULL;
            problem p = {rp.dims, rp.mech, 1.0 / sqrt((double)rp.dims.K), rp.q, rp.k, rp.v,
                         rp.g, rp.beta, rp.h0, d_o, dht};
            char label[96];
            snprintf(label, sizeof label, "shape %zu, %s", si, kdalab_mechanism_name(mechs[mi]));
            check_problem(&p, shapes[si].chunk, label);
            free(d_o);
            free(dht);
            random_problem_free(&rp);
        }
    gsl_rng_free(rng);
    simdt_print_worst("chunkwise backward, random shapes");
}

/* g = -1000 at some positions and channels beside tiny decays: every factor
 * exact (0 or a product of factors <= 1), nothing overflows. */
static void test_simd_bwd_extreme_decay(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(7);
    kdalab_dims d = {1, 45, 2, 16, 8};
    for (size_t mi = 2; mi < 4; mi++) {
        random_problem rp;
        random_problem_make(&rp, rng, mechs[mi], d, -0.05, 1);
        size_t ng = n_bth(&d) * kdalab_mechanism_g_width(mechs[mi], d.K);
        for (size_t i = 0; i < ng; i += 5)
            rp.g[i] = -1000.0;
        double *d_o = test_random_array(rng, n_v(&d));
        double *dht = test_random_array(rng, n_state(&d));
        problem p = {d, mechs[mi], 0.25, rp.q, rp.k, rp.v, rp.g, rp.beta, rp.h0, d_o, dht};
        check_problem(&p, 16, kdalab_mechanism_name(mechs[mi]));
        free(d_o);
        free(dht);
        random_problem_free(&rp);
    }
    gsl_rng_free(rng);
}

/* One thread and two give the same bits (each head is one thread's work). */
static void test_simd_bwd_thread_count(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(11);
    kdalab_dims d = {2, 40, 3, 16, 16};
    random_problem rp;
    random_problem_make(&rp, rng, KDALAB_KDA, d, -1.0, 1);
    double *d_o = test_random_array(rng, n_v(&d));
    problem p = {d, KDALAB_KDA, 0.25, rp.q, rp.k, rp.v, rp.g, rp.beta, rp.h0, d_o, NULL};
    int was = omp_get_max_threads();
    grads one, two;
    grads_alloc(&one, &d, p.m, 0);
    grads_alloc(&two, &d, p.m, 0);
    omp_set_num_threads(1);
    assert_int_equal(simd_bwd(&simdt_f64, &p, 16, 0, &one), KDALAB_OK);
    omp_set_num_threads(2);
    assert_int_equal(simd_bwd(&simdt_f64, &p, 16, 0, &two), KDALAB_OK);
    omp_set_num_threads(was);
    for (int i = 0; i < 6; i++)
        if (one.a[i] && memcmp(one.a[i], two.a[i], one.n[i] * sizeof(double)) != 0)
            fail_msg("%s differs between 1 and 2 threads", gnames[i]);
    grads_free(&one);
    grads_free(&two);
    free(d_o);
    random_problem_free(&rp);
    gsl_rng_free(rng);
}

/* The chunk states kept, checkpointed, or kept for the short sequences of a
 * varlen batch and checkpointed for the long ones: the same arithmetic, so
 * the same bits. The budget of 60 states of K V doubles keeps a sequence of
 * up to 58 chunks (C = 4): the 50-chunk one keeps its 52 states while the
 * 100-chunk one checkpoints into 10 + 10 + 1 = 21, so the workspace, sized
 * for the longest, must hold the shorter one's larger layout (an overflow
 * there is what ASan would report). With bwd_state_bytes 0 a call with a
 * workspace keeps every state (its workspace holds the 102 states of the
 * longest: 81 more than a checkpointing call's) and one without checkpoints. */
static void test_simd_bwd_states_kept_or_checkpointed(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(13);
    const size_t K = 4, V = 4, T = 400 + 200 + 3;
    const int64_t cu[] = {0, 400, 600, T}; /* 100, 50 and 1 chunks of 4 */
    kdalab_dims d = {1, T, 1, K, V};
    random_problem rp;
    random_problem_make(&rp, rng, KDALAB_KDA, d, -0.5, 0);
    double *d_o = test_random_array(rng, n_v(&d));
    enum { N_RUNS = 6 };
    const struct {
        size_t bytes;
        int work;
        const char *what;
    } runs[N_RUNS] = {{KEEP_ALL, 0, "kept"},
                      {1, 0, "checkpointed"},
                      {60 * K * V * sizeof(double), 0, "kept for the short, checkpointed for "
                                                       "the long"},
                      {0, 1, "the default with a workspace"},
                      {0, 0, "the default without one"},
                      {1, 1, "checkpointed with a workspace"}};
    grads gr[N_RUNS];
    size_t ws_bytes[N_RUNS] = {0};
    for (size_t ri = 0; ri < N_RUNS; ri++) {
        kdalab_chunk_opts op = kdalab_simd_chunk_opts_default();
        op.chunk = 4;
        op.bwd_state_bytes = runs[ri].bytes;
        kdalab_workspace *w = runs[ri].work ? kdalab_workspace_new() : NULL;
        kdalab_call call = {.dims = d, .HV = 1, .cu_seqlens = cu, .n_seqs = 3, .mech = KDALAB_KDA,
                            .scale = 0.5, .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_SIMD,
                            .opts = &op, .work = w};
        grads_alloc(&gr[ri], &d, KDALAB_KDA, 0);
        kdalab_tensors_f64 x = {.q = rp.q, .k = rp.k, .v = rp.v, .g = rp.g, .beta = rp.beta,
                                .d_o = d_o, .dq = gr[ri].a[0], .dk = gr[ri].a[1],
                                .dv = gr[ri].a[2], .dg = gr[ri].a[3], .dbeta = gr[ri].a[4]};
        kdalab_status s = kdalab_run_bwd_f64(&call, &x);
        if (s != KDALAB_OK)
            fail_msg("states %s: %s", runs[ri].what, kdalab_last_error());
        ws_bytes[ri] = kdalab_workspace_bytes(w);
        kdalab_workspace_free(w);
    }
    if (ws_bytes[3] < ws_bytes[5] + 81 * K * V * sizeof(double))
        fail_msg("the default with a workspace holds %zu bytes, checkpointing %zu: not every state "
                 "kept", ws_bytes[3], ws_bytes[5]);
    for (size_t ri = 1; ri < N_RUNS; ri++)
        for (int i = 0; i < 5; i++)
            if (memcmp(gr[0].a[i], gr[ri].a[i], gr[0].n[i] * sizeof(double)) != 0)
                fail_msg("%s: states %s differ from every state kept", gnames[i], runs[ri].what);
    for (size_t ri = 0; ri < N_RUNS; ri++)
        grads_free(&gr[ri]);
    free(d_o);
    random_problem_free(&rp);
    gsl_rng_free(rng);
}

/* varlen + GVA through kdalab_run_bwd_f64: the SIMD path (in place) against
 * the reference chunkwise form (one gathered piece at a time) on the same
 * batch. */
static void test_simd_bwd_varlen_gva(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(5);
    const int64_t cu[] = {0, 7, 30, 31, 52};
    kdalab_dims d = {1, 52, 2, 16, 12}; /* H = 2 query/key heads */
    const size_t HV = 4;                /* 4 value heads: GVA groups of 2 */
    kdalab_call ref = {.dims = d, .HV = HV, .cu_seqlens = cu, .n_seqs = 4, .scale = 0.3,
                       .form = KDALAB_FORM_CHUNK, .impl = KDALAB_IMPL_REFERENCE};
    kdalab_call simd = ref;
    simd.impl = KDALAB_IMPL_SIMD;
    for (size_t mi = 0; mi < 4; mi++) {
        kdalab_mechanism m = mechs[mi];
        size_t gw = kdalab_mechanism_g_width(m, d.K), T = d.T;
        double *q = test_random_array(rng, T * d.H * d.K);
        double *k = test_random_array(rng, T * d.H * d.K);
        for (size_t r = 0; r < T * d.H; r++) { /* unit-norm keys */
            double nn = 0;
            for (size_t c = 0; c < d.K; c++)
                nn += k[r * d.K + c] * k[r * d.K + c];
            for (size_t c = 0; c < d.K; c++)
                k[r * d.K + c] /= sqrt(nn);
        }
        double *v = test_random_array(rng, T * HV * d.V);
        double *g = gw ? test_random_array(rng, T * HV * gw) : NULL;
        double *beta = test_random_array(rng, T * HV);
        double *d_o = test_random_array(rng, T * HV * d.V);
        for (size_t i = 0; g && i < T * HV * gw; i++)
            g[i] = -fabs(g[i]);
        for (size_t i = 0; i < T * HV; i++)
            beta[i] = fabs(beta[i]) < 2 ? fabs(beta[i]) : 1;
        grads want, got;
        kdalab_dims dv = d;
        dv.H = HV; /* the gradient buffers: dq, dk have H heads, the rest HV */
        grads_alloc(&want, &dv, m, 0);
        grads_alloc(&got, &dv, m, 0);
        kdalab_tensors_f64 a = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .d_o = d_o};
        kdalab_tensors_f64 b = a;
        ref.mech = simd.mech = m;
        a.dq = want.a[0], a.dk = want.a[1], a.dv = want.a[2], a.dg = want.a[3];
        a.dbeta = want.a[4];
        b.dq = got.a[0], b.dk = got.a[1], b.dv = got.a[2], b.dg = got.a[3];
        b.dbeta = got.a[4];
        kdalab_status s = kdalab_run_bwd_f64(&ref, &a);
        if (s != KDALAB_OK)
            fail_msg("reference %s: %s", kdalab_last_error(), kdalab_mechanism_name(m));
        want.n[0] = want.n[1] = T * d.H * d.K; /* dq, dk: H heads */
        free(want.a[5]);                        /* no dh0 asked */
        want.a[5] = NULL;
        for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
            if (!simdt_use_level(simdt_levels[li]))
                continue;
            s = kdalab_run_bwd_f64(&simd, &b);
            if (s != KDALAB_OK)
                fail_msg("simd %s: %s", kdalab_last_error(), kdalab_mechanism_name(m));
            const char *which = "";
            double e = worst_err(&got, &want, &which);
            if (!(e <= F64_TOL))
                fail_msg("%s, level %s: %s relative error %.3g", kdalab_mechanism_name(m),
                         kdalab_simd_level_name(simdt_levels[li]), which, e);
        }
        kdalab_simd_set_level(KDALAB_SIMD_AUTO);
        grads_free(&want);
        grads_free(&got);
        free(q); free(k); free(v); free(g); free(beta); free(d_o);
    }
    gsl_rng_free(rng);
}

/* Bad input: the reference's status, and not one output element written. */
static void test_simd_bwd_bad_input(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(3);
    kdalab_dims d = {1, 20, 2, 8, 8};
    random_problem rp;
    random_problem_make(&rp, rng, KDALAB_KDA, d, -1.0, 1);
    double *d_o = test_random_array(rng, n_v(&d));
    const double sentinel = 12345.0;
    for (int bad = 0; bad < 5; bad++) {
        problem p = {d, KDALAB_KDA, 0.3, rp.q, rp.k, rp.v, rp.g, rp.beta, rp.h0, d_o, NULL};
        double keep = 0;
        double *poke = NULL;
        switch (bad) {
        case 0: p.d_o = NULL; break;                       /* ENULL */
        case 1: poke = &rp.g[7]; keep = *poke; *poke = 0.5; break;      /* g > 0 */
        case 2: poke = &d_o[3]; keep = *poke; *poke = NAN; break;       /* NaN */
        case 3: poke = &rp.beta[2]; keep = *poke; *poke = 2.5; break;   /* beta > 2 */
        case 4: p.d.K = 0; break;                          /* zero size */
        }
        grads ref, got;
        grads_alloc(&ref, &d, p.m, sentinel);
        grads_alloc(&got, &d, p.m, sentinel);
        kdalab_status want = ref_bwd(&p, 16, &ref);
        assert_int_not_equal(want, KDALAB_OK);
        for (size_t li = 0; li < SIMDT_N_LEVELS; li++) {
            if (!simdt_use_level(simdt_levels[li]))
                continue;
            for (size_t pi = 0; pi < 2; pi++) {
                kdalab_status s = simd_bwd(precisions[pi], &p, 16, 0, &got);
                if (s != want)
                    fail_msg("case %d, %s: status %s, reference %s", bad,
                             precisions[pi]->name, kdalab_strerror(s),
                             kdalab_strerror(want));
                for (int i = 0; i < 6; i++)
                    for (size_t j = 0; got.a[i] && j < got.n[i]; j++)
                        if (got.a[i][j] != sentinel)
                            fail_msg("case %d: %s[%zu] written", bad, gnames[i], j);
            }
        }
        kdalab_simd_set_level(KDALAB_SIMD_AUTO);
        if (poke)
            *poke = keep;
        grads_free(&ref);
        grads_free(&got);
    }
    free(d_o);
    random_problem_free(&rp);
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_bwd_golden),
        cmocka_unit_test(test_simd_bwd_random_shapes),
        cmocka_unit_test(test_simd_bwd_extreme_decay),
        cmocka_unit_test(test_simd_bwd_thread_count),
        cmocka_unit_test(test_simd_bwd_states_kept_or_checkpointed),
        cmocka_unit_test(test_simd_bwd_varlen_gva),
        cmocka_unit_test(test_simd_bwd_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
