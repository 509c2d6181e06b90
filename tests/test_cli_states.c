/*
 * test_cli_states.c — kdalab run --h: the state entering each chunk, as the
 * library's SIMD chunkwise forward writes it (tests/test_call_states.c tests
 * the values against the recurrence). Every golden case: the file is
 * [B, NT, H, K, V], float64 equal to the in-process call bit for bit, float32
 * within 1e-5 of it (a 24-bit mantissa over the golden cases' T <= 64
 * steps), and without --chunk chunks of fla's 64, with o the same bits as
 * the run without --h; every golden varlen / GVA
 * case: [1, NT, HV, K, V], NT summing the sequences' chunks, each
 * sequence's chunk 0 its row of h0. A run that does
 * not write h refuses --h before reading an input, and writes nothing.
 *
 * The binary is ./bin/kdalab relative to the repository root (override with
 * $KDALAB_BIN); scratch files live in a mkdtemp directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "kdalab.h"

enum { C = 8 }; /* the chunk of every run here */

/* The h of one golden case from the library, float64 SIMD at chunk C. */
static double *library_h(const golden_case *c, size_t *nt)
{
    kdalab_chunk_opts opts = kdalab_simd_chunk_opts_default();
    opts.chunk = C;
    const kdalab_call call = {.dims = c->dims, .HV = c->dims.H, .mech = c->mech,
                              .scale = c->scale, .form = KDALAB_FORM_CHUNK,
                              .impl = KDALAB_IMPL_SIMD, .opts = &opts};
    *nt = kdalab_call_n_chunks(&call);
    size_t n = c->dims.B * *nt * c->dims.H * c->dims.K * c->dims.V, no = c->o.size;
    double *h = malloc((n + 1) * sizeof *h), *o = malloc((no + 1) * sizeof *o);
    const kdalab_tensors_f64 x = {.q = c->q.data, .k = c->k.data, .v = c->v.data,
                                  .g = c->g.data, .beta = c->beta.data, .h0 = c->h0.data,
                                  .a = c->a.data, .b = c->b.data, .o = o, .h = h};
    expect_status(kdalab_run_f64(&call, &x, NULL), KDALAB_OK, NULL);
    free(o);
    return h;
}

static void golden_states(void **state)
{
    (void)state;
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    assert_true(n >= 6);
    char hp[512], op[512]; /* tcli_tmp's buffer is reused by the next call */
    snprintf(hp, sizeof hp, "%s", tcli_tmp("h.npy"));
    snprintf(op, sizeof op, "%s", tcli_tmp("o.npy"));
    for (size_t i = 0; i < n; i++) {
        const golden_case *c = &cases[i];
        size_t nt;
        double *want = library_h(c, &nt);
        const size_t shape[5] = {c->dims.B, nt, c->dims.H, c->dims.K, c->dims.V};
        for (int f32 = 0; f32 <= 1; f32++) {
            unlink(hp);
            int rc = tcli_run("run %s --form chunk --chunk %d%s --o %s --h %s",
                              tcli_case_inputs(c), C, f32 ? " --precision fp32" : "", op,
                              hp);
            if (rc != 0)
                fail_msg("%s: exit %d: %s", c->name, rc, tcli_err);
            kdalab_array got;
            tcli_read_array(hp, &got);
            assert_int_equal(got.ndim, 5);
            for (int d = 0; d < 5; d++)
                assert_int_equal(got.shape[d], shape[d]);
            if (!f32 && memcmp(got.data, want, got.size * sizeof *want) != 0)
                fail_msg("%s: --h differs from the library's h", c->name);
            double e = rel_err_f64(got.data, want, got.size);
            if (f32 && !(e <= 1e-5))
                fail_msg("%s fp32: --h rel err %g > 1e-5", c->name, e);
            kdalab_array_free(&got);
        }
        free(want);
        /* without --chunk, --h takes fla's chunk of 64 and o is the run's own */
        assert_int_equal(tcli_run("run %s --form chunk --o %s", tcli_case_inputs(c), op), 0);
        kdalab_array plain_o, got_o, got;
        tcli_read_array(op, &plain_o);
        assert_int_equal(tcli_run("run %s --form chunk --o %s --h %s", tcli_case_inputs(c), op,
                                  hp),
                         0);
        tcli_read_array(hp, &got);
        tcli_read_array(op, &got_o);
        assert_int_equal(got.shape[1], (c->dims.T + 63) / 64);
        assert_memory_equal(got_o.data, plain_o.data, plain_o.size * sizeof(double));
        kdalab_array_free(&got), kdalab_array_free(&got_o), kdalab_array_free(&plain_o);
        golden_free(&cases[i]);
    }
}

static void varlen_states(void **state)
{
    (void)state;
    FILE *f = fopen("tests/golden_varlen/MANIFEST.tsv", "r");
    assert_non_null(f);
    char line[512];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        varlen_line vl;
        const char *in = tcli_varlen_inputs(line, &vl);
        const char *d = "tests/golden_varlen", *name = vl.name;
        const size_t N = vl.N, HV = vl.HV, K = vl.K, V = vl.V;
        const int has_h0 = vl.has_h0;
        char vo[512];
        snprintf(vo, sizeof vo, "%s", tcli_tmp("vo.npy"));
        int rc = tcli_run("run %s --form chunk --chunk %d --o %s --h %s", in, C, vo,
                          tcli_tmp("vh.npy"));
        if (rc != 0)
            fail_msg("%s: exit %d: %s", name, rc, tcli_err);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.cu_seqlens.npy", d, name);
        kdalab_array cu, h, h0 = {0};
        tcli_read_array(path, &cu);
        tcli_read_array(tcli_tmp("vh.npy"), &h);
        if (has_h0) {
            snprintf(path, sizeof path, "%s/%s.h0.npy", d, name);
            tcli_read_array(path, &h0);
        }
        size_t nt = 0, KV = K * V;
        assert_int_equal(h.ndim, 5);
        for (size_t s = 0; s < N; s++) { /* sequence s's chunk 0: its h0, or zero */
            size_t L = (size_t)(cu.data[s + 1] - cu.data[s]);
            for (size_t i = 0; i < HV * KV; i++) {
                double want = has_h0 ? h0.data[s * HV * KV + i] : 0.0;
                if (h.data[nt * HV * KV + i] != want)
                    fail_msg("%s: sequence %zu's chunk 0 is not its h0", name, s);
            }
            nt += (L + C - 1) / C;
        }
        const size_t shape[5] = {1, nt, HV, K, V};
        for (int i = 0; i < 5; i++)
            assert_int_equal(h.shape[i], shape[i]);
        kdalab_array_free(&cu);
        kdalab_array_free(&h);
        kdalab_array_free(&h0);
        cases++;
    }
    fclose(f);
    assert_true(cases >= 2);
}

/* Refused before any input is read (--q names no file), nothing written. */
static void refused(void **state)
{
    (void)state;
    char hp[512], op[512];
    snprintf(hp, sizeof hp, "%s", tcli_tmp("r.npy"));
    snprintf(op, sizeof op, "%s", tcli_tmp("ro.npy"));
    static const struct {
        const char *opts, *needle;
    } bad[] = {
        {"", "--h: the state entering each chunk"},            /* the recurrent form */
        {"--form chunk --impl reference", "SIMD chunkwise"},   /* the reference */
        {"--form chunk --decay pairwise", "the safe decay"},   /* another decay */
        {"--form chunk --precision fp32 --impl reference", "--impl simd"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tcli_expect_error(tcli_run("run --mechanism kda --q nowhere.npy --k nowhere.npy --v "
                                   "nowhere.npy --g nowhere.npy --beta nowhere.npy %s --o %s "
                                   "--h %s",
                                   bad[i].opts, op, hp),
                          2, bad[i].needle, NULL);
        assert_false(tcli_exists(hp));
    }
    tcli_expect_error(tcli_run("run --mechanism kda --q nowhere.npy --k nowhere.npy --v "
                               "nowhere.npy --g nowhere.npy --beta nowhere.npy --form chunk "
                               "--o %s --ht %s --h %s",
                               op, hp, hp),
                      2, "--ht and --h name the same file", NULL);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_states_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_states),
        cmocka_unit_test(varlen_states),
        cmocka_unit_test(refused),
    };
    return cmocka_run_group_tests_name("cli_states", tests, setup, teardown);
}
