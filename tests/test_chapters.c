/*
 * tests/test_chapters.c — the chapter programs (chapters/) agree with
 * the library.
 *
 * Each test runs one bin/chapters/NN_name (from the repository root, or from
 * $KDALAB_CHAPTERS_BIN), parses its "name row values..." lines (%.17g), builds
 * the same worked-example inputs here (input() and make_inputs() below are
 * copies of the chapters' shared generator), and compares every printed block
 * with the library on those inputs:
 *   01         o                  kdalab_attention_f64
 *   02, 03     o, S               kdalab_recurrent_f64 and a loop of kdalab_step_f64
 *   04, 05     + o_chunk, S_chunk kdalab_chunk_f64, C = 4
 *   06_kda     + o_chunk, S_chunk kdalab_chunk_f64, C = 4, anchored sub-chunks of 2
 *   07_dplr    o, S, o_chunk, S_chunk: the one call's DPLR row, both forms, with
 *              KDA's a, b; and the same blocks against KDA itself (the instance)
 *   06_hybrid  x_out, S_layer0..2 a composition of kdalab_recurrent_f64 (KDA) and
 *                                 kdalab_attention_f64 with the chapter's projections
 *                                 and residual, and kdalab_hybrid_prefill with the
 *                                 chapter's weights loaded into a library stack
 * and checks the byte counts of each "cost" line against what the library's
 * own objects hold (a KV cache of 8192 tokens, a KDA state, a 3:1 stack).
 *
 * Tolerance 1e-12 relative (max |a - b| / max |b|): both sides are float64
 * evaluations of the same function in different summation orders (the chunk
 * steps, the UT solve, %.17g printing is exact), which agree to a few ulps
 * times the sum depth (T = 10 here); 1e-12 allows that and nothing more.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define TOL 1e-12

enum { T = 10, K = 4, V3 = 3, MAXV = 4, C = 4, SUB = 2 };

/* ------------------------------------------------------------------------- */
/* The chapters' worked example, copied (the chapters are self-contained).   */
/* ------------------------------------------------------------------------- */

typedef struct {
    int V;
    double q[T * K], k[T * K], v[T * MAXV], beta[T], g1[T], gk[T * K];
} inputs;

static double input(int stream, int t, int c)
{
    return sin(0.9 * t + 1.7 * c + 2.3 * stream + 0.31 * t * c);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void make_inputs(inputs *in, int V)
{
    in->V = V;
    for (int t = 0; t < T; t++) {
        double nq = 0, nk = 0;
        for (int c = 0; c < K; c++) {
            in->q[t * K + c] = input(0, t, c), nq += in->q[t * K + c] * in->q[t * K + c];
            in->k[t * K + c] = input(1, t, c), nk += in->k[t * K + c] * in->k[t * K + c];
            in->gk[t * K + c] = log(sigmoid(1.0 + 2.0 * c + input(5, t, c)));
        }
        for (int c = 0; c < K; c++) in->q[t * K + c] /= sqrt(nq), in->k[t * K + c] /= sqrt(nk);
        for (int d = 0; d < V; d++) in->v[t * V + d] = input(2, t, d);
        in->beta[t] = sigmoid(input(3, t, 0));
        in->g1[t] = log(sigmoid(3.0 + input(4, t, 0)));
    }
}

/* ------------------------------------------------------------------------- */
/* Running a chapter and reading its blocks                                  */
/* ------------------------------------------------------------------------- */

enum { MAXBLOCKS = 16, MAXROWS = 16, MAXCOLS = 8 };

typedef struct {
    char name[32];
    int rows, cols;
    double v[MAXROWS * MAXCOLS];
} block;

typedef struct {
    int n;
    block b[MAXBLOCKS];
    int has_cost;
    double state_bytes, flops_per_token, cache_bytes_per_token;
} chapter_output;

static void parse_cost(chapter_output *out, char *line)
{
    char *save = NULL;
    strtok_r(line, " \t\n", &save); /* "cost" */
    for (char *key = strtok_r(NULL, " \t\n", &save); key; key = strtok_r(NULL, " \t\n", &save)) {
        char *val = strchr(key, '=') ? NULL : strtok_r(NULL, " \t\n", &save);
        if (!val)
            continue; /* "K=V=128", "N=8192": labels */
        if (!strcmp(key, "state_bytes")) out->state_bytes = strtod(val, NULL);
        else if (!strcmp(key, "flops_per_token")) out->flops_per_token = strtod(val, NULL);
        else if (!strcmp(key, "cache_bytes_per_token")) out->cache_bytes_per_token = strtod(val, NULL);
    }
    out->has_cost = 1;
}

/* Run bin/chapters/<name>, parse every block; fails the test if it cannot. */
static void run_chapter(const char *name, chapter_output *out)
{
    const char *dir = getenv("KDALAB_CHAPTERS_BIN"), *bin = getenv("KDALAB_BIN");
    char cmd[512], line[1024];
    if (dir)
        snprintf(cmd, sizeof cmd, "%s/%s", dir, name);
    else
        snprintf(cmd, sizeof cmd, "%s/chapters/%s", bin && *bin ? bin : "bin", name);
    FILE *f = fopen(cmd, "rb");
    if (!f)
        fail_msg("%s not found: run `make chapters` (or set KDALAB_CHAPTERS_BIN)", cmd);
    fclose(f);
    memset(out, 0, sizeof *out);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof line, p)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (!strncmp(line, "cost ", 5)) {
            parse_cost(out, line);
            continue;
        }
        char bname[32];
        int row, used;
        if (sscanf(line, "%31s %d%n", bname, &row, &used) != 2)
            fail_msg("%s: unreadable line: %s", name, line);
        block *b = NULL;
        for (int i = 0; i < out->n; i++)
            if (!strcmp(out->b[i].name, bname))
                b = &out->b[i];
        if (!b) {
            assert_true(out->n < MAXBLOCKS);
            b = &out->b[out->n++];
            snprintf(b->name, sizeof b->name, "%s", bname);
        }
        if (row != b->rows || row >= MAXROWS)
            fail_msg("%s: block %s row %d out of order", name, bname, row);
        char *s = line + used, *end;
        int cols = 0;
        for (double x = strtod(s, &end); end != s; x = strtod(s, &end)) {
            assert_true(cols < MAXCOLS);
            b->v[row * MAXCOLS + cols++] = x;
            s = end;
        }
        if (row > 0 && cols != b->cols)
            fail_msg("%s: block %s row %d has %d values, not %d", name, bname, row, cols, b->cols);
        b->cols = cols;
        b->rows++;
    }
    int rc = pclose(p);
    if (rc != 0)
        fail_msg("%s exited with status %d", cmd, rc);
}

/* Compare block `name` (rows x cols) with want[rows * cols]; fails if absent or off. */
static void check_block(const chapter_output *out, const char *name, int rows, int cols,
                        const double *want)
{
    for (int i = 0; i < out->n; i++) {
        const block *b = &out->b[i];
        if (strcmp(b->name, name))
            continue;
        if (b->rows != rows || b->cols != cols)
            fail_msg("block %s is %d x %d, expected %d x %d", name, b->rows, b->cols, rows, cols);
        double got[MAXROWS * MAXCOLS];
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                got[r * cols + c] = b->v[r * MAXCOLS + c];
        double e = rel_err_f64(got, want, (size_t)rows * cols);
        if (!(e <= TOL))
            fail_msg("block %s: relative error %.3g against the library (tolerance %g)", name, e,
                     TOL);
        print_message("    %-9s relative error %.1e\n", name, e);
        return;
    }
    fail_msg("block %s not printed", name);
}

static void ok(kdalab_status st)
{
    if (st != KDALAB_OK)
        fail_msg("library call failed: %s (%s)", kdalab_strerror(st), kdalab_last_error());
}

/* ------------------------------------------------------------------------- */
/* The lineage chapters                                                      */
/* ------------------------------------------------------------------------- */

static const kdalab_dims dims3 = {1, T, 1, K, V3};

/* The recurrence through kdalab_recurrent_f64 and through T kdalab_step_f64
 * calls, both against "o" and "S". */
static void check_recurrent(const chapter_output *out, const inputs *in, kdalab_mechanism m,
                            const double *g)
{
    const double s = kdalab_default_scale(K);
    double o[T * V3], ht[K * V3], S[K * V3] = {0}, os[T * V3];
    ok(kdalab_recurrent_f64(&dims3, m, s, in->q, in->k, in->v, g,
                            m == KDALAB_LINEAR_ATTENTION ? NULL : in->beta, NULL, o, ht));
    check_block(out, "o", T, V3, o);
    check_block(out, "S", K, V3, ht);
    size_t gw = kdalab_mechanism_g_width(m, K);
    for (int t = 0; t < T; t++)
        ok(kdalab_step_f64(m, K, V3, s, in->q + t * K, in->k + t * K, in->v + t * V3,
                           gw ? g + t * gw : NULL, in->beta[t], S, os + t * V3));
    check_block(out, "o", T, V3, os);
    check_block(out, "S", K, V3, S);
}

static void check_chunk(const chapter_output *out, const inputs *in, kdalab_mechanism m,
                        const double *g, kdalab_decay_mode mode)
{
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    opts.chunk = C;
    opts.subchunk = SUB;
    opts.decay = mode;
    double o[T * V3], ht[K * V3];
    ok(kdalab_chunk_f64(&dims3, m, kdalab_default_scale(K), in->q, in->k, in->v, g, in->beta,
                        NULL, o, ht, &opts, NULL));
    check_block(out, "o_chunk", T, V3, o);
    check_block(out, "S_chunk", K, V3, ht);
}

/* Every recurrent chapter keeps one K x V state of float64: the same bytes
 * as a KDA layer of the library's stack at d_model = 128, one head. */
static void check_state_cost(const chapter_output *out)
{
    assert_true(out->has_cost);
    kdalab_hybrid_config cfg = kdalab_hybrid_config_default();
    cfg.n_layers = 1, cfg.d_model = 128, cfg.n_heads = 1, cfg.ratio_kda = 1;
    cfg.ratio_attention = 0;
    kdalab_hybrid *stack = NULL;
    size_t bytes = 0;
    ok(kdalab_hybrid_new_random(&cfg, 1, &stack));
    ok(kdalab_hybrid_cache_bytes(stack, NULL, &bytes));
    kdalab_hybrid_free(stack);
    assert_true(out->state_bytes == (double)bytes);
    assert_true(out->cache_bytes_per_token == 0.0);
}

static void test_01_softmax_attention(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("01_softmax_attention", &out);
    double o[T * V3];
    ok(kdalab_attention_f64(&dims3, kdalab_default_scale(K), in.q, in.k, in.v, o));
    check_block(&out, "o", T, V3, o);

    /* The cost line: a KV cache of 8192 tokens at K = V = 128, as the library holds it. */
    assert_true(out.has_cost);
    kdalab_kv_cache *cache = kdalab_kv_cache_new(1, 128, 128);
    assert_non_null(cache);
    double kv[256] = {0};
    for (int t = 0; t < 8192; t++)
        ok(kdalab_kv_cache_append(cache, kv, kv + 128));
    size_t at_8k = kdalab_kv_cache_bytes(cache);
    ok(kdalab_kv_cache_append(cache, kv, kv + 128));
    size_t per_token = kdalab_kv_cache_bytes(cache) - at_8k;
    kdalab_kv_cache_free(cache);
    assert_true(out.state_bytes == (double)at_8k);
    assert_true(out.cache_bytes_per_token == (double)per_token);
}

static void test_02_linear_attention(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("02_linear_attention", &out);
    check_recurrent(&out, &in, KDALAB_LINEAR_ATTENTION, NULL);
    check_state_cost(&out);
}

static void test_03_deltanet(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("03_deltanet", &out);
    check_recurrent(&out, &in, KDALAB_DELTANET, NULL);
    check_state_cost(&out);
}

static void test_04_chunkwise(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("04_chunkwise", &out);
    check_recurrent(&out, &in, KDALAB_DELTANET, NULL);
    check_chunk(&out, &in, KDALAB_DELTANET, NULL, KDALAB_DECAY_SAFE);
    check_state_cost(&out);
}

static void test_05_gated_deltanet(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("05_gated_deltanet", &out);
    check_recurrent(&out, &in, KDALAB_GATED_DELTANET, in.g1);
    check_chunk(&out, &in, KDALAB_GATED_DELTANET, in.g1, KDALAB_DECAY_SAFE);
    check_state_cost(&out);
}

static void test_06_kda(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("06_kda", &out);
    check_recurrent(&out, &in, KDALAB_KDA, in.gk);
    /* the chapter's step is the anchored form: sub-chunk rows rescaled against their boundary */
    check_chunk(&out, &in, KDALAB_KDA, in.gk, KDALAB_DECAY_ANCHORED);
    check_chunk(&out, &in, KDALAB_KDA, in.gk, KDALAB_DECAY_PAIRWISE);
    check_state_cost(&out);
}

/* The boundary: the chapter's DPLR run with KDA's a = -exp(g) k, b = beta k and
 * the write key beta k, against the library's DPLR row in both forms, and
 * against KDA's recurrence (the same numbers, the instance). */
static void test_07_dplr(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, V3);
    run_chapter("07_dplr", &out);
    double a[T * K], b[T * K];
    for (int i = 0; i < T * K; i++) {
        a[i] = -exp(in.gk[i]) * in.k[i];
        b[i] = in.beta[i / K] * in.k[i];
    }
    for (int chunk = 0; chunk <= 1; chunk++) {
        kdalab_chunk_opts opts = kdalab_chunk_opts_default();
        opts.chunk = C;
        const kdalab_call c = {.dims = dims3, .HV = 1, .mech = KDALAB_DPLR,
                               .scale = kdalab_default_scale(K),
                               .form = chunk ? KDALAB_FORM_CHUNK : KDALAB_FORM_RECURRENT,
                               .opts = &opts};
        double o[T * V3], ht[K * V3];
        const kdalab_tensors_f64 x = {.q = in.q, .k = b, .v = in.v, .g = in.gk, .a = a, .b = b,
                                      .o = o, .ht = ht};
        ok(kdalab_run_f64(&c, &x, NULL));
        check_block(&out, chunk ? "o_chunk" : "o", T, V3, o);
        check_block(&out, chunk ? "S_chunk" : "S", K, V3, ht);
    }
    check_recurrent(&out, &in, KDALAB_KDA, in.gk); /* KDA's own numbers */
    check_state_cost(&out);
}

/* ------------------------------------------------------------------------- */
/* The hybrid                                                                */
/* ------------------------------------------------------------------------- */

enum { D = K, L = 4 };
#define LOWER (-1.0)

/* The chapter's weights: layer l, role r = 0 W_q, 1 W_k, 2 W_v, 3 W_g, 4 W_beta, 5 W_o. */
static double weight(int l, int r, int i, int j) { return 0.5 * input(6 + 6 * l + r, i, j); }

static void project(const double *x, int l, int r, int cols, double *y)
{
    for (int t = 0; t < T; t++)
        for (int j = 0; j < cols; j++) {
            y[t * cols + j] = 0;
            for (int i = 0; i < D; i++) y[t * cols + j] += x[t * D + i] * weight(l, r, i, j);
        }
}

static void unit_rows(double *x)
{
    for (int t = 0; t < T; t++) {
        double n = 0;
        for (int c = 0; c < K; c++) n += x[t * K + c] * x[t * K + c];
        for (int c = 0; c < K; c++) x[t * K + c] /= sqrt(n);
    }
}

/* The chapter's stack rebuilt from library kernels: KDA layers by
 * kdalab_recurrent_f64, the attention layer by kdalab_attention_f64. */
static void hybrid_by_kernels(const double *x0, double *x, double S[3][K * D])
{
    const kdalab_dims dims = {1, T, 1, K, D};
    const double s = kdalab_default_scale(K);
    memcpy(x, x0, sizeof(double) * T * D);
    for (int l = 0; l < L; l++) {
        double q[T * K], k[T * K], v[T * D], g[T * K], beta[T], o[T * D];
        project(x, l, 0, K, q);
        project(x, l, 1, K, k);
        project(x, l, 2, D, v);
        if (l == 3) {
            ok(kdalab_attention_f64(&dims, s, q, k, v, o));
        } else {
            project(x, l, 3, K, g);
            project(x, l, 4, 1, beta);
            unit_rows(q);
            unit_rows(k);
            for (int t = 0; t < T; t++) {
                for (int c = 0; c < K; c++)
                    g[t * K + c] = LOWER * sigmoid(g[t * K + c] + 2.0 * c - 5.0);
                beta[t] = sigmoid(beta[t]);
            }
            ok(kdalab_recurrent_f64(&dims, KDALAB_KDA, s, q, k, v, g, beta, NULL, o, S[l]));
        }
        double add[T * D];
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) {
                add[t * D + j] = 0;
                for (int e = 0; e < D; e++) add[t * D + j] += o[t * D + e] * weight(l, 5, e, j);
            }
        for (int i = 0; i < T * D; i++) x[i] += add[i];
    }
}

static kdalab_hybrid_config chapter_config(void)
{
    kdalab_hybrid_config cfg = kdalab_hybrid_config_default();
    cfg.n_layers = L, cfg.d_model = D, cfg.n_heads = 1;
    cfg.ratio_kda = 3, cfg.ratio_attention = 1;
    cfg.gate_lower_bound = LOWER;
    cfg.scale = 0; /* d_head^-1/2, as the chapter */
    cfg.rms_norm = 0; /* the chapter's layer has no pre-mixer norm */
    return cfg;
}

/* The chapter's stack as a library stack: its weights written into the layers. */
static kdalab_hybrid *hybrid_by_library(void)
{
    kdalab_hybrid_config cfg = chapter_config();
    kdalab_hybrid *stack = NULL;
    ok(kdalab_hybrid_new_random(&cfg, 1, &stack));
    for (int l = 0; l < L; l++) {
        kdalab_hybrid_weights w;
        ok(kdalab_hybrid_layer_weights(stack, (size_t)l, &w));
        assert_int_equal(w.kind, l == 3 ? KDALAB_HYBRID_ATTENTION : KDALAB_HYBRID_KDA);
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                w.wq[i * D + j] = weight(l, 0, i, j);
                w.wk[i * D + j] = weight(l, 1, i, j);
                w.wv[i * D + j] = weight(l, 2, i, j);
                w.wo[i * D + j] = weight(l, 5, i, j);
                if (w.kind == KDALAB_HYBRID_KDA) w.wg[i * D + j] = weight(l, 3, i, j);
            }
        if (w.kind == KDALAB_HYBRID_KDA)
            for (int i = 0; i < D; i++) {
                w.bg[i] = 2.0 * i - 5.0;
                w.wbeta[i] = weight(l, 4, i, 0);
            }
    }
    return stack;
}

static void test_06_hybrid(void **state)
{
    (void)state;
    chapter_output out;
    inputs in;
    make_inputs(&in, D);
    run_chapter("06_hybrid", &out);

    /* the tokens entering the stack are the worked example's unit q rows */
    double x[T * D], S[3][K * D];
    hybrid_by_kernels(in.q, x, S);
    check_block(&out, "x_out", T, D, x);
    check_block(&out, "S_layer0", K, D, S[0]);
    check_block(&out, "S_layer1", K, D, S[1]);
    check_block(&out, "S_layer2", K, D, S[2]);

    kdalab_hybrid *stack = hybrid_by_library();
    double y[T * D];
    ok(kdalab_hybrid_prefill(stack, T, in.q, y, NULL));
    check_block(&out, "x_out", T, D, y);
    for (int l = 0; l < 3; l++) {
        double *st = NULL;
        char name[32];
        ok(kdalab_hybrid_kda_state(stack, (size_t)l, &st));
        snprintf(name, sizeof name, "S_layer%d", l);
        check_block(&out, name, K, D, st);
    }
    kdalab_hybrid_free(stack);
}

/* The hybrid's cost line is the average layer of a 3:1 stack at d_model = 128,
 * one head, after 8192 tokens (the attention cache filled directly). */
static void test_06_hybrid_cost(void **state)
{
    (void)state;
    chapter_output out;
    run_chapter("06_hybrid", &out);
    assert_true(out.has_cost);
    kdalab_hybrid_config cfg = chapter_config();
    cfg.d_model = 128;
    kdalab_hybrid *stack = NULL;
    kdalab_kv_cache *cache = NULL;
    size_t at_8k = 0, after = 0;
    ok(kdalab_hybrid_new_random(&cfg, 1, &stack));
    ok(kdalab_hybrid_kv_cache(stack, 3, &cache));
    double kv[256] = {0};
    for (int t = 0; t < 8192; t++)
        ok(kdalab_kv_cache_append(cache, kv, kv + 128));
    ok(kdalab_hybrid_cache_bytes(stack, NULL, &at_8k));
    ok(kdalab_kv_cache_append(cache, kv, kv + 128));
    ok(kdalab_hybrid_cache_bytes(stack, NULL, &after));
    kdalab_hybrid_free(stack);
    assert_true(out.state_bytes == (double)at_8k / L);
    assert_true(out.cache_bytes_per_token == (double)(after - at_8k) / L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_01_softmax_attention),
        cmocka_unit_test(test_02_linear_attention),
        cmocka_unit_test(test_03_deltanet),
        cmocka_unit_test(test_04_chunkwise),
        cmocka_unit_test(test_05_gated_deltanet),
        cmocka_unit_test(test_06_kda),
        cmocka_unit_test(test_07_dplr),
        cmocka_unit_test(test_06_hybrid),
        cmocka_unit_test(test_06_hybrid_cost),
    };
    return cmocka_run_group_tests_name("chapters", tests, NULL, NULL);
}
