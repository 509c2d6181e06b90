/*
 * test_cli_varlen.c — kdalab run and grad with packed sequences (cu_seqlens) and grouped value
 * heads: every golden varlen / GVA case, and bad boundaries.
 *
 * The binary is ./bin/kdalab relative to the repository root, where `make
 * test` runs the tests (override with $KDALAB_BIN); the runner and the
 * functions the command-line suites share are in tests/common.c. Scratch
 * files live in a mkdtemp directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kdalab.h"

/* Every golden varlen / GVA case through `kdalab run`: float64 recurrent and
 * chunkwise within 1e-12, the SIMD path in float32 within 1e-5. */
static void varlen_golden(void **state)
{
    (void)state;
    FILE *f = fopen("tests/golden_varlen/MANIFEST.tsv", "r");
    assert_non_null(f);
    char line[512], name[64];
    int cases = 0;
    const struct {
        const char *opts;
        double tol;
    } forms[] = {{"", 1e-12},
                 {"--form chunk --chunk 16", 1e-12},
                 {"--form chunk --precision fp32 --impl simd", 1e-5},
                 {"--form chunk --precision fp64 --impl simd", 1e-12},
                 {"--precision fp32 --impl simd", 1e-5}};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        varlen_line vl;
        const char *in = tcli_varlen_inputs(line, &vl);
        snprintf(name, sizeof name, "%s", vl.name);
        for (size_t fi = 0; fi < sizeof forms / sizeof forms[0]; fi++) {
            int rc = tcli_run("run %s %s --o %s --ht %s", in, forms[fi].opts, tcli_tmp("vo.npy"),
                            tcli_tmp("vht.npy"));
            if (rc != 0)
                fail_msg("%s [%s]: exit %d: %s", name, forms[fi].opts, rc, tcli_err);
            const char *keys[2] = {"o", "ht"}, *outs[2] = {tcli_tmp("vo.npy"), tcli_tmp("vht.npy")};
            for (int k = 0; k < 2; k++) {
                char want[512];
                snprintf(want, sizeof want, "tests/golden_varlen/%s.%s.npy", name, keys[k]);
                rc = tcli_run("compare %s %s --rtol %g", outs[k], want, forms[fi].tol);
                if (rc != 0)
                    fail_msg("%s [%s] %s: %s", name, forms[fi].opts, keys[k], tcli_out);
            }
        }
        cases++;
    }
    fclose(f);
    assert_int_equal(cases, 7);
}

/* Bad boundaries and their one-line errors; a varlen grad runs. */
static void varlen_errors(void **state)
{
    (void)state;
    char name[64], line[512];
    FILE *f = fopen("tests/golden_varlen/MANIFEST.tsv", "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f) && (line[0] == '#' || strncmp(line, "kda_varlen\t", 11)))
        ;
    fclose(f);
    char in[4096];
    varlen_line vl;
    snprintf(in, sizeof in, "%s", tcli_varlen_inputs(line, &vl));
    snprintf(name, sizeof name, "%s", vl.name);
    char *cu = strstr(in, "--cu-seqlens ");
    assert_non_null(cu);
    char *rest = strchr(cu + 13, ' ');
    char tail[4096];
    snprintf(tail, sizeof tail, "%s", rest ? rest : "");
    const struct {
        kdalab_dtype dtype;
        double v[5];
        size_t n;
        const char *needle;
    } bad[] = {{KDALAB_DTYPE_F64, {0, 13, 26, 52}, 4, "int64 or int32"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kdalab_array a = {.ndim = 1, .shape = {bad[i].n}, .size = bad[i].n,
                          .dtype = bad[i].dtype, .data = (double *)bad[i].v};
        tcli_write_array(tcli_tmp("cu.npy"), bad[i].dtype, &a);
        snprintf(cu, sizeof in - (size_t)(cu - in), "--cu-seqlens %s%s", tcli_tmp("cu.npy"), tail);
        tcli_expect_error(tcli_run("run %s --o %s", in, tcli_tmp("x.npy")), 2, "--cu-seqlens",
                     bad[i].needle, NULL);
    }
    /* integer boundaries, written by hand as '<i8' */
    const struct {
        int64_t v[4];
        const char *needle;
    } ints[] = {{{0, 20, 20, 52}, "cu_seqlens[2] = 20"},
                {{0, 20, 30, 51}, "cu_seqlens[3] = 51"},
                {{3, 20, 30, 52}, "cu_seqlens[0] = 3"}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        unsigned char img[128 + 32];
        memset(img, ' ', 128);
        memcpy(img, "\x93NUMPY\x01\x00\x76\x00", 10);
        const char *hdr = "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }";
        memcpy(img + 10, hdr, strlen(hdr));
        img[127] = '\n';
        for (int e = 0; e < 4; e++)
            for (int b = 0; b < 8; b++)
                img[128 + 8 * e + b] = (unsigned char)((uint64_t)ints[i].v[e] >> (8 * b));
        tcli_put_bytes(tcli_tmp("cu.npy"), img, sizeof img);
        tcli_expect_error(tcli_run("run %s --o %s", in, tcli_tmp("x.npy")), 2, "--cu-seqlens",
                     ints[i].needle, NULL);
    }
    assert_false(tcli_exists(tcli_tmp("x.npy")));
    /* the backward over the same packing runs, and writes dh0 per sequence */
    snprintf(cu, sizeof in - (size_t)(cu - in),
             "--cu-seqlens tests/golden_varlen/%s.cu_seqlens.npy%s", name, tail);
    assert_int_equal(tcli_run("grad %s --do tests/golden_varlen/%s.o.npy --dq %s --dh0 %s", in,
                            name, tcli_tmp("vdq.npy"), tcli_tmp("vdh0.npy")),
                     0);
    kdalab_array dh0;
    tcli_read_array(tcli_tmp("vdh0.npy"), &dh0);
    assert_int_equal(dh0.shape[0], 4); /* N = 4 sequences */
    kdalab_array_free(&dh0);
    /* the SIMD chunkwise backward over the same packing: the reference
     * chunkwise backward's gradients within 1e-12 (tests/test_simd_bwd.c) */
    const char *impls[2] = {"--form chunk", "--form chunk --impl simd"};
    const char *dqs[2] = {"rdq.npy", "sdq.npy"}, *dh0s[2] = {"rdh0.npy", "sdh0.npy"};
    for (int i = 0; i < 2; i++)
        assert_int_equal(tcli_run("grad %s --do tests/golden_varlen/%s.o.npy %s --dq %s --dh0 %s",
                                  in, name, impls[i], tcli_tmp(dqs[i]), tcli_tmp(dh0s[i])),
                         0);
    assert_int_equal(tcli_run("compare %s %s --rtol 1e-12", tcli_tmp("sdq.npy"),
                              tcli_tmp("rdq.npy")),
                     0);
    assert_int_equal(tcli_run("compare %s %s --rtol 1e-12", tcli_tmp("sdh0.npy"),
                              tcli_tmp("rdh0.npy")),
                     0);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_varlen_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(varlen_golden),
        cmocka_unit_test(varlen_errors),
    };
    return cmocka_run_group_tests_name("cli_varlen", tests, setup, teardown);
}
