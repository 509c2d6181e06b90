/*
 * test_cli_inputs.c — kdalab run on bad input files and values: truncated files, wrong magic,
 * overflowing shapes, integer dtypes, NaN/Inf, g > 0, mismatched shapes, other
 * byte orders and layouts read correctly, outputs that must not be touched —
 * each one error line, exit status, nothing written or half-written.
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

/* Run kda_small with one input replaced, expecting failure with the needles;
 * a pre-existing o.npy must come through untouched and no temp file appear. */
static void run_fails(const char *key, const char *path, int rc, const char *n1,
                      const char *n2)
{
    const char *o = tcli_tmp("o.npy");
    const char marker[] = "previous contents";
    tcli_put_bytes(o, marker, sizeof marker);
    unlink(tcli_tmp("ht.npy"));
    tcli_expect_error(
        tcli_run("run %s --o %s --ht %s", tcli_kda_with(key, path), o, tcli_tmp("ht.npy")), rc, n1,
        n2, NULL);
    size_t len;
    unsigned char *b = tcli_file_bytes(o, &len);
    assert_int_equal(len, sizeof marker);
    assert_memory_equal(b, marker, sizeof marker);
    free(b);
    assert_false(tcli_exists(tcli_tmp("ht.npy")));
    assert_int_equal(tcli_count_entries(NULL, "o.npy"), 1);
    assert_int_equal(tcli_count_entries(NULL, "ht.npy"), 0);
    unlink(o);
}

/* Run kda_small with one input replaced; expect the golden answer. */
static void run_matches_golden(const char *key, const char *path)
{
    const char *o = tcli_tmp("o.npy");
    int rc = tcli_run("run %s --scale 0.1767766952966369 --o %s", tcli_kda_with(key, path), o);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, tcli_err);
    assert_int_equal(tcli_run("compare %s %s", o, tcli_golden_path("kda_small", "o")), 0);
    unlink(o);
}

static void bad_files(void **state)
{
    size_t len;
    unsigned char *q = tcli_file_bytes(tcli_golden_path("kda_small", "q"), &len);

    /* truncated: in the data, in the header, in the magic */
    tcli_put_bytes(tcli_tmp("trunc.npy"), q, len / 2);
    run_fails("q", tcli_tmp("trunc.npy"), 2, "--q", "truncated");
    tcli_put_bytes(tcli_tmp("trunc.npy"), q, 40);
    run_fails("q", tcli_tmp("trunc.npy"), 2, "--q", "trunc.npy");
    tcli_put_bytes(tcli_tmp("trunc.npy"), q, 3);
    run_fails("k", tcli_tmp("trunc.npy"), 2, "--k", "trunc.npy");
    tcli_put_bytes(tcli_tmp("trunc.npy"), q, 0);
    run_fails("v", tcli_tmp("trunc.npy"), 2, "--v", "trunc.npy");

    /* wrong magic */
    unsigned char *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, q, len);
    memcpy(bad + 1, "NUMPZ", 5);
    tcli_put_bytes(tcli_tmp("magic.npy"), bad, len);
    run_fails("q", tcli_tmp("magic.npy"), 2, "--q", "magic");
    char manifest[512];
    snprintf(manifest, sizeof manifest, "%s/MANIFEST.tsv", golden_dir()); /* not .npy at all */
    run_fails("q", manifest, 2, "--q", "magic");

    /* header length past the end (1.0 and a 4 GiB 2.0 header) */
    memcpy(bad, q, len);
    bad[8] = 0xff;
    bad[9] = 0xff;
    tcli_put_bytes(tcli_tmp("hlen.npy"), bad, len);
    run_fails("g", tcli_tmp("hlen.npy"), 2, "--g", "past the end");
    const unsigned char tiny[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff};
    tcli_put_bytes(tcli_tmp("tiny.npy"), tiny, sizeof tiny);
    run_fails("beta", tcli_tmp("tiny.npy"), 2, "--beta", "past the end");

    /* overflowing shape: same header length, shape text replaced */
    const char *hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, "
                      "4294967296, 2, 32), }";
    memcpy(bad, q, len);
    memset(bad + 10, ' ', 117);
    memcpy(bad + 10, hdr, strlen(hdr));
    tcli_put_bytes(tcli_tmp("ovf.npy"), bad, len);
    run_fails("q", tcli_tmp("ovf.npy"), 2, "--q", "overflow");

    /* integer dtypes */
    static const char *ints[] = {"<i8", "|u1", "<i4"};
    for (int i = 0; i < 3; i++) {
        memcpy(bad, q, len);
        memcpy(bad + 21, ints[i], 3); /* 'descr': '<f8' -> the integer dtype */
        tcli_put_bytes(tcli_tmp("int.npy"), bad, len);
        char needle[16];
        snprintf(needle, sizeof needle, "'%s'", ints[i]);
        run_fails("q", tcli_tmp("int.npy"), 2, "--q", needle);
    }

    /* a directory and a missing file */
    run_fails("h0", tcli_tmpdir, 2, "--h0", "not a regular file");
    run_fails("h0", tcli_tmp("missing.npy"), 2, "--h0", "missing.npy");
    free(bad);
    free(q);
}

/* Big-endian and float32 files and Fortran order are read correctly. */
static void other_layouts_read_correctly(void **state)
{
    kdalab_array q;
    tcli_read_array(tcli_golden_path("kda_small", "q"), &q);

    /* big-endian: swap every element's bytes and mark the dtype '>f8' */
    size_t len;
    unsigned char *b = tcli_file_bytes(tcli_golden_path("kda_small", "q"), &len);
    assert_int_equal(b[22], 'f');
    b[21] = '>';
    for (size_t i = 128; i + 8 <= len; i += 8)
        for (int j = 0; j < 4; j++) {
            unsigned char t = b[i + (size_t)j];
            b[i + (size_t)j] = b[i + 7 - (size_t)j];
            b[i + 7 - (size_t)j] = t;
        }
    tcli_put_bytes(tcli_tmp("be.npy"), b, len);
    run_matches_golden("q", tcli_tmp("be.npy"));
    free(b);

    /* Fortran order: same values stored first-index-fastest */
    b = tcli_file_bytes(tcli_golden_path("kda_small", "q"), &len);
    const char *hdr = "{'descr': '<f8', 'fortran_order': True, 'shape': (1, 64, 2, 32), }";
    memset(b + 10, ' ', 117);
    memcpy(b + 10, hdr, strlen(hdr));
    const size_t *sh = q.shape;
    for (size_t i = 0; i < q.size; i++) {
        size_t rem = i, idx[4];
        for (int d = 3; d >= 0; d--) {
            idx[d] = rem % sh[d];
            rem /= sh[d];
        }
        size_t f = idx[0] + sh[0] * (idx[1] + sh[1] * (idx[2] + sh[2] * idx[3]));
        memcpy(b + 128 + 8 * f, &q.data[i], 8); /* host order: little-endian here */
    }
    tcli_put_bytes(tcli_tmp("fortran.npy"), b, len);
    run_matches_golden("q", tcli_tmp("fortran.npy"));
    free(b);

    /* float32 inputs: same result as float64 files holding the rounded values */
    kdalab_array r;
    tcli_write_array(tcli_tmp("q32.npy"), KDALAB_DTYPE_F32, &q);
    tcli_read_array(tcli_tmp("q32.npy"), &r);
    assert_int_equal(r.dtype, KDALAB_DTYPE_F32);
    tcli_write_array(tcli_tmp("q64.npy"), KDALAB_DTYPE_F64, &r);
    assert_int_equal(
        tcli_run("run %s --o %s", tcli_kda_with("q", tcli_tmp("q32.npy")), tcli_tmp("o32.npy")), 0);
    assert_int_equal(
        tcli_run("run %s --o %s", tcli_kda_with("q", tcli_tmp("q64.npy")), tcli_tmp("o64.npy")), 0);
    assert_int_equal(tcli_run("compare %s %s --rtol 0", tcli_tmp("o32.npy"), tcli_tmp("o64.npy")),
                     0);
    kdalab_array_free(&r);
    kdalab_array_free(&q);
}

/* NaN or Inf in q, k, v, g, beta, h0; g > 0; beta > 2. */
static void bad_values(void **state)
{
    static const struct {
        const char *key;
        size_t at;
        double value;
        const char *n1, *n2;
    } cases[] = {
        {"q", 70, NAN, "--q", "NaN"},
        {"k", 0, INFINITY, "--k", "+Inf"},
        {"v", 33, -INFINITY, "--v", "-Inf"},
        {"g", 5, NAN, "--g", "NaN"},
        {"g", 100, INFINITY, "--g", "Inf"},
        {"beta", 3, NAN, "--beta", "NaN"},
        {"h0", 9, INFINITY, "--h0", "Inf"},
        {"g", 7, 0.25, "--g", "must be <= 0"},
        {"g", 0, 1e-300, "--g", "must be <= 0"},
        {"beta", 1, 2.5, "--beta", "outside [0, 2]"},
        {"beta", 2, -0.1, "--beta", "outside [0, 2]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kdalab_array a;
        tcli_read_array(tcli_golden_path("kda_small", cases[i].key), &a);
        assert_true(cases[i].at < a.size);
        a.data[cases[i].at] = cases[i].value;
        tcli_write_array(tcli_tmp("bad.npy"), KDALAB_DTYPE_F64, &a);
        run_fails(cases[i].key, tcli_tmp("bad.npy"), 2, cases[i].n1, cases[i].n2);
        kdalab_array_free(&a);
    }
    /* the element's index is named: q element 70 of [1, 64, 2, 32] is (0, 1, 0, 6) */
    kdalab_array a;
    tcli_read_array(tcli_golden_path("kda_small", "q"), &a);
    a.data[70] = NAN;
    tcli_write_array(tcli_tmp("bad.npy"), KDALAB_DTYPE_F64, &a);
    run_fails("q", tcli_tmp("bad.npy"), 2, "(0, 1, 0, 6)", "bad.npy");
    kdalab_array_free(&a);
    /* g = 0 exactly is legal (no decay) */
    tcli_read_array(tcli_golden_path("kda_small", "g"), &a);
    for (size_t i = 0; i < a.size; i++)
        a.data[i] = 0.0;
    tcli_write_array(tcli_tmp("g0.npy"), KDALAB_DTYPE_F64, &a);
    assert_int_equal(
        tcli_run("run %s --o %s", tcli_kda_with("g", tcli_tmp("g0.npy")), tcli_tmp("o.npy")), 0);
    kdalab_array_free(&a);
    unlink(tcli_tmp("o.npy"));
}

/* Mismatched B/T/H (and K, V) between files: both shapes in the message. */
static void mismatched_shapes(void **state)
{
    /* kda_small: q [1,64,2,32], v [1,64,2,16]; deltanet_small: [1,45,2,16], v [1,45,2,8] */
    run_fails("k", tcli_golden_path("kda_ragged", "k"), 2, "(2, 77, 3, 24)", "(1, 64, 2, 32)");
    run_fails("v", tcli_golden_path("deltanet_small", "v"), 2, "(1, 45, 2, 8)", "(1, 64, 2, 32)");
    run_fails("beta", tcli_golden_path("deltanet_small", "beta"), 2, "(1, 45, 2)",
              "(1, 64, 2, 32)");
    run_fails("g", tcli_golden_path("gated_deltanet_small", "g"), 2, "(2, 50, 2)",
              "(1, 64, 2, 32)");
    run_fails("g", tcli_golden_path("kda_strong_decay", "g"), 2, "(1, 200, 2, 64)",
              "(1, 64, 2, 32)");
    run_fails("h0", tcli_golden_path("deltanet_small", "h0"), 2, "(1, 2, 16, 8)", "(1, 2, 32, 16)");
    /* q not 4-D */
    run_fails("q", tcli_golden_path("kda_small", "beta"), 2, "--q", "(1, 64, 2)");
    /* v with a different H only */
    kdalab_array v;
    tcli_read_array(tcli_golden_path("kda_small", "v"), &v);
    v.shape[2] = 1;
    v.shape[1] = 128;
    tcli_write_array(tcli_tmp("v_h1.npy"), KDALAB_DTYPE_F64, &v);
    run_fails("v", tcli_tmp("v_h1.npy"), 2, "(1, 128, 1, 16)", "(1, 64, 2, 32)");
    kdalab_array_free(&v);
}

/* Outputs that must not be touched: an --ht in a missing directory fails the
 * run BEFORE --o is replaced; devices, FIFOs and symbolic links are never
 * replaced; a FIFO as input is refused at once (no blocking open); "o.npy"
 * and "./o.npy" are the same file. */
static void outputs_are_guarded(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    const golden_case *c = &cases[0];
    const char *keep = tcli_tmp("keep.npy");
    tcli_put_bytes(keep, "untouched", 9);
    tcli_expect_error(
        tcli_run("run %s --o %s --ht %s/nodir/ht.npy", tcli_case_inputs(c), keep, tcli_tmpdir), 1,
        "--ht", "nodir", NULL);
    size_t len;
    unsigned char *b = tcli_file_bytes(keep, &len);
    assert_true(len == 9 && memcmp(b, "untouched", 9) == 0);
    free(b);

    const char *fifo = tcli_tmp("fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    tcli_expect_error(tcli_run("run %s --o %s", tcli_case_inputs(c), fifo), 1, "--o",
                      "not a regular file", NULL);
    tcli_expect_error(tcli_run("compare %s %s", fifo, tcli_golden_path(c->name, "o")), 2,
                 "not a regular file", NULL);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* still a FIFO */

    const char *link = tcli_tmp("link.npy");
    assert_int_equal(symlink(keep, link), 0);
    tcli_expect_error(tcli_run("run %s --o %s", tcli_case_inputs(c), link), 1, "not a regular file",
                      NULL);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    tcli_expect_error(tcli_run("run %s --o %s/same.npy --ht %s/./same.npy", tcli_case_inputs(c),
                               tcli_tmpdir, tcli_tmpdir),
                      2, "same file", NULL);

    /* a file name the system refuses (300 bytes > NAME_MAX) is caught before --o is written */
    char longname[320];
    memset(longname, 'a', 300);
    memcpy(longname + 300, ".npy", 5);
    const char *o1 = tcli_tmp("o1.npy");
    unlink(o1);
    tcli_expect_error(
        tcli_run("run %s --o %s --ht %s/%s", tcli_case_inputs(c), o1, tcli_tmpdir, longname), 1,
        "--ht", "too long", NULL);
    assert_false(tcli_exists(o1));

    /* a name that fits NAME_MAX but not with the temporary suffix: the second
     * output fails after the first was written to its temporary file, and the
     * existing --o is still the old one (both outputs or neither) */
    memset(longname, 'b', 250);
    memcpy(longname + 250, ".npy", 5);
    tcli_put_bytes(o1, "previous", 8);
    tcli_expect_error(
        tcli_run("run %s --o %s --ht %s/%s", tcli_case_inputs(c), o1, tcli_tmpdir, longname), 1,
        "--ht", NULL);
    b = tcli_file_bytes(o1, &len);
    assert_true(len == 8 && memcmp(b, "previous", 8) == 0);
    free(b);
    assert_int_equal(tcli_count_entries(NULL, "o1.npy."), 0); /* no temporary file left behind */

    /* an output naming an input is refused, and the input kept */
    const char *qcopy = tcli_tmp("qcopy.npy");
    size_t qlen;
    unsigned char *qb = tcli_file_bytes(tcli_golden_path(c->name, "q"), &qlen);
    tcli_put_bytes(qcopy, qb, qlen);
    char inputs[4096];
    snprintf(inputs, sizeof inputs, "%s", tcli_case_inputs(c));
    char *qflag = strstr(inputs, "--q ");
    assert_non_null(qflag);
    char *rest = strchr(qflag + 4, ' ');
    char tail[4096];
    snprintf(tail, sizeof tail, "%s", rest ? rest : "");
    snprintf(qflag, sizeof inputs - (size_t)(qflag - inputs), "--q %s%s", qcopy, tail);
    tcli_expect_error(tcli_run("run %s --o %s", inputs, qcopy), 2, "--o", "refusing to overwrite",
                 NULL);
    tcli_expect_error(tcli_run("run %s --o %s --ht %s", inputs, tcli_tmp("fine.npy"), qcopy), 2,
                      "--ht", "--q", NULL);
    b = tcli_file_bytes(qcopy, &len);
    assert_true(len == qlen && memcmp(b, qb, qlen) == 0);
    free(b);
    free(qb);
    assert_false(tcli_exists(tcli_tmp("fine.npy")));
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_inputs_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_files),
        cmocka_unit_test(outputs_are_guarded),
        cmocka_unit_test(other_layouts_read_correctly),
        cmocka_unit_test(bad_values),
        cmocka_unit_test(mismatched_shapes),
    };
    return cmocka_run_group_tests_name("cli_inputs", tests, setup, teardown);
}
