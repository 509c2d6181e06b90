/*
 * test_cli.c — bin/kdalab end to end.
 *
 * Every golden case goes through `kdalab run` (each form and precision) and
 * `kdalab compare` against the expected o and ht, every golden gradient case
 * through `kdalab grad`; the bad inputs
 * (truncated files, wrong magic, header past the end, overflowing shape,
 * big-endian data, integer dtypes, Fortran order, NaN/Inf, g > 0, mismatched
 * B/T/H, empty arrays) each get their own check of the exit status, the one
 * error line, and that no output file was left behind or half-written.
 *
 * The binary is ./bin/kdalab relative to the repository root, where `make
 * test` runs the tests (override with $KDALAB_BIN). Scratch files live in a
 * mkdtemp directory. Each result read back in-process is also checked with
 * rel_err_f64, so a lying `compare` would not hide a wrong `run`.
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

/* The shared runner (tests/common.c) under this file's short names. */
#define tmpdir tcli_tmpdir
#define kdalab_bin tcli_bin
#define out_text tcli_out
#define err_text tcli_err
#define kdalab tcli_run
#define expect_error tcli_expect_error
#define tmp tcli_tmp
#define exists tcli_exists
#define count_entries(prefix) tcli_count_entries(NULL, prefix)
#define file_bytes tcli_file_bytes
#define put_bytes tcli_put_bytes

static void write_array(const char *path, kdalab_dtype dtype, const kdalab_array *a)
{
    kdalab_status s = kdalab_npy_write(path, dtype, a->data, a->ndim, a->shape);
    if (s != KDALAB_OK)
        fail_msg("writing %s: %s", path, kdalab_last_error());
}

static void read_array(const char *path, kdalab_array *a)
{
    kdalab_status s = kdalab_npy_read(path, a);
    if (s != KDALAB_OK)
        fail_msg("reading %s: %s", path, kdalab_last_error());
}

/* ------------------------------------------------------------------------- */
/* Golden cases end to end                                                   */
/* ------------------------------------------------------------------------- */

static char golden_path_buf[8][512];
static const char *golden_path(const char *name, const char *key)
{
    static int next = 0;
    char *p = golden_path_buf[next++ % 8];
    snprintf(p, 512, "%s/%s.%s.npy", golden_dir(), name, key);
    return p;
}

/* The input flags of a golden case: "--q .. --k .. --v .. [--beta ..] [--g ..] [--h0 ..]". */
static const char *case_inputs(const golden_case *c)
{
    static char buf[4096];
    int n = snprintf(buf, sizeof buf, "--mechanism %s --scale %.17g --q %s --k %s --v %s",
                     kdalab_mechanism_name(c->mech), c->scale, golden_path(c->name, "q"),
                     golden_path(c->name, "k"), golden_path(c->name, "v"));
    if (kdalab_mechanism_has_beta(c->mech))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --beta %s", golden_path(c->name, "beta"));
    if (kdalab_mechanism_g_width(c->mech, 1))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --g %s", golden_path(c->name, "g"));
    if (c->has_h0)
        snprintf(buf + n, sizeof buf - (size_t)n, " --h0 %s", golden_path(c->name, "h0"));
    return buf;
}

/* Run one golden case with extra options; check o and ht by `compare` at
 * rtol and in-process by rel_err_f64 at the same bound. */
static void golden_run(const golden_case *c, const char *options, double rtol)
{
    const char *o = tmp("o.npy"), *ht = tmp("ht.npy");
    unlink(o);
    unlink(ht);
    int rc = kdalab("run %s %s --o %s --ht %s", case_inputs(c), options, o, ht);
    if (rc != 0)
        fail_msg("%s [%s]: exit %d: %s", c->name, options, rc, err_text);
    const char *keys[2] = {"o", "ht"}, *outs[2] = {o, ht};
    const kdalab_array *want[2] = {&c->o, &c->ht};
    for (int i = 0; i < 2; i++) {
        rc = kdalab("compare %s %s --rtol %g", outs[i], golden_path(c->name, keys[i]), rtol);
        if (rc != 0)
            fail_msg("%s [%s]: compare %s exit %d:\n%s", c->name, options, keys[i], rc,
                     out_text);
        assert_non_null(strstr(out_text, "result=PASS"));
        kdalab_array got;
        read_array(outs[i], &got);
        assert_int_equal(got.dtype, KDALAB_DTYPE_F64);
        assert_int_equal(got.ndim, 4);
        for (int d = 0; d < 4; d++)
            assert_int_equal(got.shape[d], want[i]->shape[d]);
        double e = rel_err_f64(got.data, want[i]->data, got.size);
        if (!(e <= rtol))
            fail_msg("%s [%s]: %s rel err %g > %g", c->name, options, keys[i], e, rtol);
        kdalab_array_free(&got);
    }
}

/* float64 agrees with fla's float64 reference to rounding: 1e-12 relative
 * (the forms differ in summation order only). float32: 1e-5 (24-bit
 * mantissa, error growing with T and the condition of the UT transform). */
static void golden_reference(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    assert_true(n >= 6);
    for (size_t i = 0; i < n; i++) {
        const golden_case *c = &cases[i];
        golden_run(c, "", 1e-12);
        golden_run(c, "--form recurrent --precision fp64 --impl reference", 1e-12);
        golden_run(c, "--form chunk", 1e-12);
        golden_run(c, "--form chunk --chunk 16 --subchunk 4", 1e-12);
        golden_run(c, "--form chunk --chunk 13 --subchunk none", 1e-12);
        golden_run(c, "--form recurrent --precision fp32", 1e-5);
        golden_run(c, "--form chunk --precision fp32", 1e-5);
        if (c->mech == KDALAB_KDA) {
            golden_run(c, "--form chunk --decay pairwise --chunk 32", 1e-12);
            golden_run(c, "--form chunk --decay anchored --chunk 16 --subchunk 4", 1e-12);
        }
        golden_free(&cases[i]);
    }
}

/* The SIMD path through the CLI: float32, so 1e-5; float64 (chunk form), 1e-12. */
static void golden_simd(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    for (size_t i = 0; i < n; i++) {
        golden_run(&cases[i], "--impl simd --precision fp32 --form chunk", 1e-5);
        golden_run(&cases[i], "--impl simd --precision fp32 --form recurrent", 1e-5);
        golden_run(&cases[i], "--impl simd --precision fp64 --form chunk", 1e-12);
        golden_free(&cases[i]);
    }
}

/* Emulated bf16 runs and yields finite output on every golden case except
 * the deliberately extreme one; its error is the lead's measured bound, so
 * here only "runs, finite, shaped right" is asserted. */
static void golden_bf16_runs(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    for (size_t i = 0; i < n; i++) {
        const golden_case *c = &cases[i];
        if (c->mech == KDALAB_KDA || c->mech == KDALAB_GATED_DELTANET) {
            const char *o = tmp("o.npy");
            int rc = kdalab("run %s --form chunk --precision bf16 --o %s", case_inputs(c), o);
            if (rc != 0)
                fail_msg("%s bf16: exit %d: %s", c->name, rc, err_text);
            kdalab_array got;
            read_array(o, &got);
            assert_int_equal(got.size, c->o.size);
            for (size_t j = 0; j < got.size; j++)
                assert_true(isfinite(got.data[j]));
            kdalab_array_free(&got);
        }
        golden_free(&cases[i]);
    }
}

/* ------------------------------------------------------------------------- */
/* compare                                                                   */
/* ------------------------------------------------------------------------- */

static void compare_semantics(void **state)
{
    kdalab_array b;
    read_array(golden_path("kda_small", "o"), &b);
    const char *pb = tmp("b.npy"), *pa = tmp("a.npy");
    write_array(pb, KDALAB_DTYPE_F64, &b);

    /* identical */
    assert_int_equal(kdalab("compare %s %s", pb, pb), 0);
    assert_non_null(strstr(out_text, "max_abs_err=0.000000e+00"));
    assert_non_null(strstr(out_text, "result=PASS"));

    /* one element off by 1e-3 of max|B|: fails at the default 1e-12, names
     * the element, passes at rtol 1e-2 */
    double maxb = 0;
    for (size_t i = 0; i < b.size; i++)
        maxb = fmax(maxb, fabs(b.data[i]));
    size_t at = 2 * 16 + 5; /* (0, 1, 0, 5) in [1, 64, 2, 16] */
    b.data[at] += 1e-3 * maxb;
    write_array(pa, KDALAB_DTYPE_F64, &b);
    assert_int_equal(kdalab("compare %s %s", pa, pb), 1);
    assert_non_null(strstr(out_text, "worst_index=(0, 1, 0, 5)"));
    const char *rel = strstr(out_text, "max_rel_err=");
    double rel_value = 0;
    assert_non_null(rel);
    assert_int_equal(sscanf(rel, "max_rel_err=%lf", &rel_value), 1);
    assert_true(fabs(rel_value - 1e-3) < 1e-9);
    assert_non_null(strstr(out_text, "result=FAIL"));
    assert_int_equal(kdalab("compare %s %s --rtol 1e-2", pa, pb), 0);
    assert_int_equal(kdalab("compare %s %s --atol=1", pa, pb), 0);

    /* non-finite: the same NaN in both agrees; NaN on one side only fails */
    b.data[at] = NAN;
    write_array(pa, KDALAB_DTYPE_F64, &b);
    assert_int_equal(kdalab("compare %s %s --rtol 1", pa, pa), 0);
    assert_non_null(strstr(out_text, "nonfinite_a=1 nonfinite_b=1 nonfinite_mismatch=0"));
    assert_int_equal(kdalab("compare %s %s --rtol 1", pa, pb), 1);
    assert_non_null(strstr(out_text, "nonfinite_a=1 nonfinite_b=0 nonfinite_mismatch=1"));

    /* bad input: exit 2 */
    kdalab_array ht;
    read_array(golden_path("kda_small", "ht"), &ht);
    expect_error(kdalab("compare %s %s", pb, golden_path("kda_small", "ht")), 2,
                 "(1, 64, 2, 16)", "(1, 2, 32, 16)", NULL);
    expect_error(kdalab("compare %s %s", pb, tmp("missing.npy")), 2, "missing.npy", NULL);
    expect_error(kdalab("compare %s", pb), 2, "two files", NULL);
    expect_error(kdalab("compare %s %s --rtol abc", pb, pb), 2, "--rtol", NULL);
    expect_error(kdalab("compare %s %s --atol -1", pb, pb), 2, "--atol", NULL);

    /* empty arrays compare equal */
    size_t eshape[2] = {0, 3};
    assert_int_equal(kdalab_npy_write(tmp("e.npy"), KDALAB_DTYPE_F64, NULL, 2, eshape),
                     KDALAB_OK);
    assert_int_equal(kdalab("compare %s %s", tmp("e.npy"), tmp("e.npy")), 0);
    assert_non_null(strstr(out_text, "worst_index=none"));

    kdalab_array_free(&b);
    kdalab_array_free(&ht);
}

/* ------------------------------------------------------------------------- */
/* run: bad inputs                                                           */
/* ------------------------------------------------------------------------- */

/* kda_small's flags with one input replaced (key = "q", "k", "v", "beta",
 * "g" or "h0"; path NULL drops it). */
static const char *kda_with(const char *key, const char *path)
{
    static char buf[4096];
    static const char *keys[] = {"q", "k", "v", "beta", "g", "h0"};
    int n = snprintf(buf, sizeof buf, "--mechanism kda");
    for (int i = 0; i < 6; i++) {
        const char *p = golden_path("kda_small", keys[i]);
        if (key && strcmp(key, keys[i]) == 0)
            p = path;
        if (p)
            n += snprintf(buf + n, sizeof buf - (size_t)n, " --%s %s", keys[i], p);
    }
    return buf;
}

/* Run kda_small with one input replaced, expecting failure with the needles;
 * a pre-existing o.npy must come through untouched and no temp file appear. */
static void run_fails(const char *key, const char *path, int rc, const char *n1,
                      const char *n2)
{
    const char *o = tmp("o.npy");
    const char marker[] = "previous contents";
    put_bytes(o, marker, sizeof marker);
    unlink(tmp("ht.npy"));
    expect_error(kdalab("run %s --o %s --ht %s", kda_with(key, path), o, tmp("ht.npy")), rc,
                 n1, n2, NULL);
    size_t len;
    unsigned char *b = file_bytes(o, &len);
    assert_int_equal(len, sizeof marker);
    assert_memory_equal(b, marker, sizeof marker);
    free(b);
    assert_false(exists(tmp("ht.npy")));
    assert_int_equal(count_entries("o.npy"), 1);
    assert_int_equal(count_entries("ht.npy"), 0);
    unlink(o);
}

/* Run kda_small with one input replaced; expect the golden answer. */
static void run_matches_golden(const char *key, const char *path)
{
    const char *o = tmp("o.npy");
    int rc = kdalab("run %s --scale 0.1767766952966369 --o %s", kda_with(key, path), o);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err_text);
    assert_int_equal(kdalab("compare %s %s", o, golden_path("kda_small", "o")), 0);
    unlink(o);
}

static void bad_files(void **state)
{
    size_t len;
    unsigned char *q = file_bytes(golden_path("kda_small", "q"), &len);

    /* truncated: in the data, in the header, in the magic */
    put_bytes(tmp("trunc.npy"), q, len / 2);
    run_fails("q", tmp("trunc.npy"), 2, "--q", "truncated");
    put_bytes(tmp("trunc.npy"), q, 40);
    run_fails("q", tmp("trunc.npy"), 2, "--q", "trunc.npy");
    put_bytes(tmp("trunc.npy"), q, 3);
    run_fails("k", tmp("trunc.npy"), 2, "--k", "trunc.npy");
    put_bytes(tmp("trunc.npy"), q, 0);
    run_fails("v", tmp("trunc.npy"), 2, "--v", "trunc.npy");

    /* wrong magic */
    unsigned char *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, q, len);
    memcpy(bad + 1, "NUMPZ", 5);
    put_bytes(tmp("magic.npy"), bad, len);
    run_fails("q", tmp("magic.npy"), 2, "--q", "magic");
    char manifest[512];
    snprintf(manifest, sizeof manifest, "%s/MANIFEST.tsv", golden_dir()); /* not .npy at all */
    run_fails("q", manifest, 2, "--q", "magic");

    /* header length past the end (1.0 and a 4 GiB 2.0 header) */
    memcpy(bad, q, len);
    bad[8] = 0xff;
    bad[9] = 0xff;
    put_bytes(tmp("hlen.npy"), bad, len);
    run_fails("g", tmp("hlen.npy"), 2, "--g", "past the end");
    const unsigned char tiny[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff};
    put_bytes(tmp("tiny.npy"), tiny, sizeof tiny);
    run_fails("beta", tmp("tiny.npy"), 2, "--beta", "past the end");

    /* overflowing shape: same header length, shape text replaced */
    const char *hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, "
                      "4294967296, 2, 32), }";
    memcpy(bad, q, len);
    memset(bad + 10, ' ', 117);
    memcpy(bad + 10, hdr, strlen(hdr));
    put_bytes(tmp("ovf.npy"), bad, len);
    run_fails("q", tmp("ovf.npy"), 2, "--q", "overflow");

    /* integer dtypes */
    static const char *ints[] = {"<i8", "|u1", "<i4"};
    for (int i = 0; i < 3; i++) {
        memcpy(bad, q, len);
        memcpy(bad + 21, ints[i], 3); /* 'descr': '<f8' -> the integer dtype */
        put_bytes(tmp("int.npy"), bad, len);
        char needle[16];
        snprintf(needle, sizeof needle, "'%s'", ints[i]);
        run_fails("q", tmp("int.npy"), 2, "--q", needle);
    }

    /* a directory and a missing file */
    run_fails("h0", tmpdir, 2, "--h0", "not a regular file");
    run_fails("h0", tmp("missing.npy"), 2, "--h0", "missing.npy");
    free(bad);
    free(q);
}

/* Big-endian and float32 files and Fortran order are read correctly. */
static void other_layouts_read_correctly(void **state)
{
    kdalab_array q;
    read_array(golden_path("kda_small", "q"), &q);

    /* big-endian: swap every element's bytes and mark the dtype '>f8' */
    size_t len;
    unsigned char *b = file_bytes(golden_path("kda_small", "q"), &len);
    assert_int_equal(b[22], 'f');
    b[21] = '>';
    for (size_t i = 128; i + 8 <= len; i += 8)
        for (int j = 0; j < 4; j++) {
            unsigned char t = b[i + (size_t)j];
            b[i + (size_t)j] = b[i + 7 - (size_t)j];
            b[i + 7 - (size_t)j] = t;
        }
    put_bytes(tmp("be.npy"), b, len);
    run_matches_golden("q", tmp("be.npy"));
    free(b);

    /* Fortran order: same values stored first-index-fastest */
    b = file_bytes(golden_path("kda_small", "q"), &len);
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
    put_bytes(tmp("fortran.npy"), b, len);
    run_matches_golden("q", tmp("fortran.npy"));
    free(b);

    /* float32 inputs: same result as float64 files holding the rounded values */
    kdalab_array r;
    write_array(tmp("q32.npy"), KDALAB_DTYPE_F32, &q);
    read_array(tmp("q32.npy"), &r);
    assert_int_equal(r.dtype, KDALAB_DTYPE_F32);
    write_array(tmp("q64.npy"), KDALAB_DTYPE_F64, &r);
    assert_int_equal(kdalab("run %s --o %s", kda_with("q", tmp("q32.npy")), tmp("o32.npy")), 0);
    assert_int_equal(kdalab("run %s --o %s", kda_with("q", tmp("q64.npy")), tmp("o64.npy")), 0);
    assert_int_equal(kdalab("compare %s %s --rtol 0", tmp("o32.npy"), tmp("o64.npy")), 0);
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
        read_array(golden_path("kda_small", cases[i].key), &a);
        assert_true(cases[i].at < a.size);
        a.data[cases[i].at] = cases[i].value;
        write_array(tmp("bad.npy"), KDALAB_DTYPE_F64, &a);
        run_fails(cases[i].key, tmp("bad.npy"), 2, cases[i].n1, cases[i].n2);
        kdalab_array_free(&a);
    }
    /* the element's index is named: q element 70 of [1, 64, 2, 32] is (0, 1, 0, 6) */
    kdalab_array a;
    read_array(golden_path("kda_small", "q"), &a);
    a.data[70] = NAN;
    write_array(tmp("bad.npy"), KDALAB_DTYPE_F64, &a);
    run_fails("q", tmp("bad.npy"), 2, "(0, 1, 0, 6)", "bad.npy");
    kdalab_array_free(&a);
    /* g = 0 exactly is legal (no decay) */
    read_array(golden_path("kda_small", "g"), &a);
    for (size_t i = 0; i < a.size; i++)
        a.data[i] = 0.0;
    write_array(tmp("g0.npy"), KDALAB_DTYPE_F64, &a);
    assert_int_equal(kdalab("run %s --o %s", kda_with("g", tmp("g0.npy")), tmp("o.npy")), 0);
    kdalab_array_free(&a);
    unlink(tmp("o.npy"));
}

/* Mismatched B/T/H (and K, V) between files: both shapes in the message. */
static void mismatched_shapes(void **state)
{
    /* kda_small: q [1,64,2,32], v [1,64,2,16]; deltanet_small: [1,45,2,16], v [1,45,2,8] */
    run_fails("k", golden_path("kda_ragged", "k"), 2, "(2, 77, 3, 24)", "(1, 64, 2, 32)");
    run_fails("v", golden_path("deltanet_small", "v"), 2, "(1, 45, 2, 8)", "(1, 64, 2, 32)");
    run_fails("beta", golden_path("deltanet_small", "beta"), 2, "(1, 45, 2)", "(1, 64, 2, 32)");
    run_fails("g", golden_path("gated_deltanet_small", "g"), 2, "(2, 50, 2)", "(1, 64, 2, 32)");
    run_fails("g", golden_path("kda_strong_decay", "g"), 2, "(1, 200, 2, 64)",
              "(1, 64, 2, 32)");
    run_fails("h0", golden_path("deltanet_small", "h0"), 2, "(1, 2, 16, 8)", "(1, 2, 32, 16)");
    /* q not 4-D */
    run_fails("q", golden_path("kda_small", "beta"), 2, "--q", "(1, 64, 2)");
    /* v with a different H only */
    kdalab_array v;
    read_array(golden_path("kda_small", "v"), &v);
    v.shape[2] = 1;
    v.shape[1] = 128;
    write_array(tmp("v_h1.npy"), KDALAB_DTYPE_F64, &v);
    run_fails("v", tmp("v_h1.npy"), 2, "(1, 128, 1, 16)", "(1, 64, 2, 32)");
    kdalab_array_free(&v);
}

/* Usage errors: one line naming the flag, exit 2, nothing written. */
static void usage_errors(void **state)
{
    const char *o = tmp("o.npy");
    char in[4096];
    snprintf(in, sizeof in, "%s", kda_with(NULL, NULL));
    expect_error(kdalab("%s", ""), 2, "no command", NULL);
    expect_error(kdalab("frobnicate"), 2, "'frobnicate'", NULL);
    expect_error(kdalab("run"), 2, "--mechanism", NULL);
    expect_error(kdalab("run --mechanism mamba %s --o %s", in + 15, o), 2, "'mamba'", NULL);
    expect_error(kdalab("run %s", in), 2, "--o", NULL);
    expect_error(kdalab("run %s --o %s --bogus 1", in, o), 2, "'--bogus'", NULL);
    expect_error(kdalab("run %s --o %s --form zigzag", in, o), 2, "--form", NULL);
    expect_error(kdalab("run %s --o %s --form chunk --chunk 0", in, o), 2, "--chunk", NULL);
    expect_error(kdalab("run %s --o %s --form chunk --chunk -3", in, o), 2, "--chunk", NULL);
    expect_error(kdalab("run %s --o %s --form chunk --chunk 99999999999999999999999", in, o),
                 2, "--chunk", NULL);
    expect_error(kdalab("run %s --o %s --form chunk --subchunk 0", in, o), 2, "--subchunk",
                 NULL);
    expect_error(kdalab("run %s --o %s --chunk 16", in, o), 2, "--chunk", "--form chunk", NULL);
    expect_error(kdalab("run %s --o %s --form chunk --decay fast", in, o), 2, "--decay", NULL);
    expect_error(kdalab("run %s --o %s --precision fp8", in, o), 2, "--precision", NULL);
    expect_error(kdalab("run %s --o %s --precision bf16", in, o), 2, "--precision",
                 "--form chunk", NULL);
    expect_error(kdalab("run %s --o %s --impl gpu", in, o), 2, "--impl", NULL);
    expect_error(kdalab("run %s --o %s --impl simd", in, o), 2, "--impl simd", "--form chunk",
                 NULL);
    expect_error(kdalab("run %s --o %s --scale 0", in, o), 2, "--scale", NULL);
    expect_error(kdalab("run %s --o %s --scale inf", in, o), 2, "--scale", NULL);
    expect_error(kdalab("run %s --o %s --q x.npy", in, o), 2, "--q", "twice", NULL);
    expect_error(kdalab("run %s --o", in), 2, "--o", "value", NULL);
    expect_error(kdalab("run %s --o %s --ht %s", in, o, o), 2, "same file", NULL);
    expect_error(kdalab("run %s --o %s", kda_with("beta", NULL), o), 2, "--beta", "required",
                 NULL);
    expect_error(kdalab("run %s --o %s", kda_with("g", NULL), o), 2, "--g", "required", NULL);
    expect_error(kdalab("run --mechanism linear_attention %s --o %s", in + 15, o), 2, "--beta",
                 "not used", NULL);
    assert_false(exists(o));
    /* an output directory that does not exist: exit 1, nothing created */
    expect_error(kdalab("run %s --o %s", in, tmp("nodir/o.npy")), 1, "--o", "nodir", NULL);
    expect_error(kdalab("run %s --o %s --ht %s", in, o, tmp("nodir/ht.npy")), 1, "--ht", NULL);
}

static void help_everywhere(void **state)
{
    static const char *cmds[] = {"--help", "run --help", "compare --help", "info --help",
                                 "run -h", "compare --rtol 1 --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_int_equal(kdalab("%s", cmds[i]), 0);
        assert_non_null(strstr(out_text, "usage: kdalab"));
        assert_string_equal(err_text, "");
    }
}

static void info_and_time(void **state)
{
    assert_int_equal(kdalab("info"), 0);
    assert_non_null(strstr(out_text, "version=" KDALAB_VERSION));
    assert_non_null(strstr(out_text, "simd_level="));
    assert_non_null(strstr(out_text, "cpu_features="));
    /* the CPU's model name, so that a timing can name its machine: the
     * first "model name" of /proc/cpuinfo, or "unknown" */
    const char *cpu = strstr(out_text, "\ncpu=");
    assert_non_null(cpu);
    cpu += 5;
    assert_true(*cpu != '\n' && *cpu != '\0');
    FILE *ci = fopen("/proc/cpuinfo", "r");
    char line[512];
    int checked = 0;
    while (ci && !checked && fgets(line, sizeof line, ci))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            const char *want = strchr(line, ':') + 1;
            want += strspn(want, " \t");
            assert_memory_equal(cpu, want, strcspn(want, "\r\n"));
            checked = 1;
        }
    if (ci)
        fclose(ci);
    if (!checked)
        assert_memory_equal(cpu, "unknown\n", 8);

    assert_int_equal(kdalab("run %s --o %s --time", kda_with(NULL, NULL), tmp("o.npy")), 0);
    double sec = -1, rate = -1;
    assert_int_equal(sscanf(err_text, "compute_seconds=%lf head_tokens_per_s=%lf", &sec, &rate),
                     2);
    assert_true(sec >= 0);
    assert_true(rate >= 0);
    /* the best of --repeat timed calls and their median: best <= median */
    assert_int_equal(kdalab("run %s --o %s --time --repeat 3", kda_with(NULL, NULL),
                            tmp("o.npy")),
                     0);
    double med = -1, med_rate = -1;
    size_t reps = 0;
    assert_int_equal(sscanf(err_text,
                            "compute_seconds=%lf head_tokens_per_s=%lf median_seconds=%lf "
                            "median_head_tokens_per_s=%lf repeat=%zu",
                            &sec, &rate, &med, &med_rate, &reps),
                     5);
    assert_true(reps == 3 && sec <= med && rate >= med_rate);
    expect_error(kdalab("run %s --o %s --repeat 3", kda_with(NULL, NULL), tmp("o.npy")), 2,
                 "--repeat", NULL);
    expect_error(kdalab("run %s --o %s --time --repeat 0", kda_with(NULL, NULL), tmp("o.npy")),
                 2, "--repeat", NULL);
    /* without --time, stderr stays quiet */
    assert_int_equal(kdalab("run %s --o %s", kda_with(NULL, NULL), tmp("o.npy")), 0);
    assert_string_equal(err_text, "");
    unlink(tmp("o.npy"));
}

/* T = 0 is legal: o is [B, 0, H, V] and empty, ht = h0 (or zero). */
static void empty_sequences(void **state)
{
    static const kdalab_mechanism mechs[] = {KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET,
                                             KDALAB_GATED_DELTANET, KDALAB_KDA};
    const size_t B = 2, H = 3, K = 4, V = 5;
    size_t qs[4] = {B, 0, H, K}, vs[4] = {B, 0, H, V}, bs[3] = {B, 0, H}, hs[4] = {B, H, K, V};
    double h0[2 * 3 * 4 * 5];
    for (size_t i = 0; i < B * H * K * V; i++)
        h0[i] = 0.01 * (double)i - 0.3;
    assert_int_equal(kdalab_npy_write(tmp("eq.npy"), KDALAB_DTYPE_F64, NULL, 4, qs), KDALAB_OK);
    assert_int_equal(kdalab_npy_write(tmp("ev.npy"), KDALAB_DTYPE_F32, NULL, 4, vs), KDALAB_OK);
    assert_int_equal(kdalab_npy_write(tmp("eb.npy"), KDALAB_DTYPE_F64, NULL, 3, bs), KDALAB_OK);
    assert_int_equal(kdalab_npy_write(tmp("eh0.npy"), KDALAB_DTYPE_F64, h0, 4, hs), KDALAB_OK);
    for (size_t m = 0; m < 4; m++) {
        char extra[1024] = "";
        if (kdalab_mechanism_has_beta(mechs[m]))
            snprintf(extra, sizeof extra, "--beta %s", tmp("eb.npy"));
        if (mechs[m] == KDALAB_GATED_DELTANET)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --g %s",
                     tmp("eb.npy"));
        if (mechs[m] == KDALAB_KDA)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --g %s",
                     tmp("eq.npy"));
        static const char *forms[] = {"", "--form chunk", "--precision fp32",
                                      "--form chunk --precision fp32 --impl simd"};
        for (int f = 0; f < 4; f++)
            for (int with_h0 = 0; with_h0 < 2; with_h0++) {
                unlink(tmp("o.npy"));
                unlink(tmp("ht.npy"));
                int rc = kdalab("run --mechanism %s --q %s --k %s --v %s %s %s %s %s --o %s "
                                "--ht %s",
                                kdalab_mechanism_name(mechs[m]), tmp("eq.npy"), tmp("eq.npy"),
                                tmp("ev.npy"), extra, with_h0 ? "--h0" : "",
                                with_h0 ? tmp("eh0.npy") : "", forms[f], tmp("o.npy"),
                                tmp("ht.npy"));
                if (rc != 0)
                    fail_msg("%s %s: exit %d: %s", kdalab_mechanism_name(mechs[m]), forms[f],
                             rc, err_text);
                kdalab_array o, ht;
                read_array(tmp("o.npy"), &o);
                assert_int_equal(o.ndim, 4);
                assert_int_equal(o.size, 0);
                for (int d = 0; d < 4; d++)
                    assert_int_equal(o.shape[d], vs[d]);
                read_array(tmp("ht.npy"), &ht);
                assert_int_equal(ht.size, B * H * K * V);
                for (size_t i = 0; i < ht.size; i++) {
                    /* float32 paths round h0; compare at float32 precision there */
                    double want = with_h0 ? h0[i] : 0.0;
                    double tol = strstr(forms[f], "fp32") ? 1e-7 : 0.0;
                    assert_true(fabs(ht.data[i] - want) <= tol);
                }
                kdalab_array_free(&o);
                kdalab_array_free(&ht);
            }
    }
    /* B = 0 is not a sequence of length 0: refused */
    size_t zb[4] = {0, 3, H, K};
    assert_int_equal(kdalab_npy_write(tmp("zb.npy"), KDALAB_DTYPE_F64, NULL, 4, zb), KDALAB_OK);
    expect_error(kdalab("run --mechanism linear_attention --q %s --k %s --v %s --o %s",
                        tmp("zb.npy"), tmp("zb.npy"), tmp("zb.npy"), tmp("o.npy")),
                 2, "--q", "only T may be 0", NULL);
}

/* The rescaled decay without sub-chunks overflows float32 on the strong-decay
 * case at C = 64 (the range premise): exit 1, the counts on stderr, and the
 * outputs ARE written, so they can be studied. */
static void overflow_is_reported(void **state)
{
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(cases[i].name, "kda_strong_decay") == 0) {
            const char *o = tmp("o.npy");
            unlink(o);
            expect_error(kdalab("run %s --form chunk --decay rescaled --chunk 64 --precision "
                                "fp32 --o %s",
                                case_inputs(&cases[i]), o),
                         1, "overflowed", "non-finite", NULL);
            kdalab_array a;
            read_array(o, &a);
            size_t nonfinite = 0;
            for (size_t j = 0; j < a.size; j++)
                nonfinite += !isfinite(a.data[j]);
            assert_true(nonfinite > 0);
            kdalab_array_free(&a);
            /* and the default (safe) mode does not */
            golden_run(&cases[i], "--form chunk --precision fp32", 1e-5);
        }
        golden_free(&cases[i]);
    }
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
    const char *keep = tmp("keep.npy");
    put_bytes(keep, "untouched", 9);
    expect_error(kdalab("run %s --o %s --ht %s/nodir/ht.npy", case_inputs(c), keep, tmpdir), 1,
                 "--ht", "nodir", NULL);
    size_t len;
    unsigned char *b = file_bytes(keep, &len);
    assert_true(len == 9 && memcmp(b, "untouched", 9) == 0);
    free(b);

    const char *fifo = tmp("fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_error(kdalab("run %s --o %s", case_inputs(c), fifo), 1, "--o", "not a regular file",
                 NULL);
    expect_error(kdalab("compare %s %s", fifo, golden_path(c->name, "o")), 2,
                 "not a regular file", NULL);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* still a FIFO */

    const char *link = tmp("link.npy");
    assert_int_equal(symlink(keep, link), 0);
    expect_error(kdalab("run %s --o %s", case_inputs(c), link), 1, "not a regular file", NULL);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    expect_error(kdalab("run %s --o %s/same.npy --ht %s/./same.npy", case_inputs(c), tmpdir,
                        tmpdir),
                 2, "same file", NULL);

    /* a file name the system refuses (300 bytes > NAME_MAX) is caught before --o is written */
    char longname[320];
    memset(longname, 'a', 300);
    memcpy(longname + 300, ".npy", 5);
    const char *o1 = tmp("o1.npy");
    unlink(o1);
    expect_error(kdalab("run %s --o %s --ht %s/%s", case_inputs(c), o1, tmpdir, longname), 1,
                 "--ht", "too long", NULL);
    assert_false(exists(o1));

    /* a name that fits NAME_MAX but not with the temporary suffix: the second
     * output fails after the first was written to its temporary file, and the
     * existing --o is still the old one (both outputs or neither) */
    memset(longname, 'b', 250);
    memcpy(longname + 250, ".npy", 5);
    put_bytes(o1, "previous", 8);
    expect_error(kdalab("run %s --o %s --ht %s/%s", case_inputs(c), o1, tmpdir, longname), 1,
                 "--ht", NULL);
    b = file_bytes(o1, &len);
    assert_true(len == 8 && memcmp(b, "previous", 8) == 0);
    free(b);
    assert_int_equal(count_entries("o1.npy."), 0); /* no temporary file left behind */

    /* an output naming an input is refused, and the input kept */
    const char *qcopy = tmp("qcopy.npy");
    size_t qlen;
    unsigned char *qb = file_bytes(golden_path(c->name, "q"), &qlen);
    put_bytes(qcopy, qb, qlen);
    char inputs[4096];
    snprintf(inputs, sizeof inputs, "%s", case_inputs(c));
    char *qflag = strstr(inputs, "--q ");
    assert_non_null(qflag);
    char *rest = strchr(qflag + 4, ' ');
    char tail[4096];
    snprintf(tail, sizeof tail, "%s", rest ? rest : "");
    snprintf(qflag, sizeof inputs - (size_t)(qflag - inputs), "--q %s%s", qcopy, tail);
    expect_error(kdalab("run %s --o %s", inputs, qcopy), 2, "--o", "refusing to overwrite",
                 NULL);
    expect_error(kdalab("run %s --o %s --ht %s", inputs, tmp("fine.npy"), qcopy), 2, "--ht",
                 "--q", NULL);
    b = file_bytes(qcopy, &len);
    assert_true(len == qlen && memcmp(b, qb, qlen) == 0);
    free(b);
    free(qb);
    assert_false(exists(tmp("fine.npy")));
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
}

/* The SIMD recurrent path runs every step even after one overflows, so the
 * written outputs are computed values (as the reference's), never unwritten
 * memory. */
static void simd_overflow_writes_computed_values(void **state)
{
    const size_t T = 5, K = 2, V = 2;
    size_t qshape[4] = {1, T, 1, K}, vshape[4] = {1, T, 1, V};
    double q[10], v[10];
    for (size_t i = 0; i < 10; i++) {
        q[i] = i < 2 ? 1e20 : 0.1 * (double)i; /* the first row overflows in float32 */
        v[i] = 1.0 + (double)i;
    }
    kdalab_array qa = {.ndim = 4, .size = 10, .data = q}, va = {.ndim = 4, .size = 10, .data = v};
    memcpy(qa.shape, qshape, sizeof qshape);
    memcpy(va.shape, vshape, sizeof vshape);
    write_array(tmp("qov.npy"), KDALAB_DTYPE_F64, &qa);
    write_array(tmp("vov.npy"), KDALAB_DTYPE_F64, &va);
    const char *impl[2] = {"reference", "simd"};
    kdalab_array out[2];
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "ov_%s.npy", impl[i]);
        expect_error(kdalab("run --mechanism linear_attention --precision fp32 --impl %s "
                            "--q %s --k %s --v %s --o %s",
                            impl[i], tmp("qov.npy"), tmp("qov.npy"), tmp("vov.npy"), tmp(name)),
                     1, "overflowed", NULL);
        read_array(tmp(name), &out[i]);
    }
    assert_int_equal(out[0].size, out[1].size);
    for (size_t j = 0; j < out[0].size; j++) {
        double a = out[0].data[j], b2 = out[1].data[j];
        if (!(a == b2 || (isnan(a) && isnan(b2)) || fabs(a - b2) <= 1e-5 * fabs(a)))
            fail_msg("o[%zu]: reference %g, simd %g", j, a, b2);
    }
    kdalab_array_free(&out[0]);
    kdalab_array_free(&out[1]);
}

/* ------------------------------------------------------------------------- */

/* ------------------------------------------------------------------------- */
/* kdalab grad                                                               */
/* ------------------------------------------------------------------------- */

static char grad_path_buf[8][512];
static const char *grad_path(const char *name, const char *key)
{
    static int next = 0;
    char *p = grad_path_buf[next++ % 8];
    snprintf(p, 512, "%s/%s.%s.npy", grad_golden_dir(), name, key);
    return p;
}

/* The input flags of a golden gradient case, do and dht included. */
static const char *grad_inputs(const grad_case *c)
{
    static char buf[4096];
    int n = snprintf(buf, sizeof buf, "--mechanism %s --scale %.17g --q %s --k %s --v %s",
                     kdalab_mechanism_name(c->mech), c->scale, grad_path(c->name, "q"),
                     grad_path(c->name, "k"), grad_path(c->name, "v"));
    if (kdalab_mechanism_has_beta(c->mech))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --beta %s", grad_path(c->name, "beta"));
    if (kdalab_mechanism_g_width(c->mech, 1))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --g %s", grad_path(c->name, "g"));
    if (c->has_h0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --h0 %s", grad_path(c->name, "h0"));
    if (c->has_dht)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --dht %s", grad_path(c->name, "dht"));
    snprintf(buf + n, sizeof buf - (size_t)n, " --do %s", grad_path(c->name, "do")); /* last */
    return buf;
}

/* Every golden gradient case through `kdalab grad`, recurrent and chunkwise
 * (C = 16) in float64 and chunkwise in float32: each gradient within 1e-10
 * (float32: 1e-5) of fla's (test_grad's bounds), read back in-process and
 * through `compare`. */
static void grad_golden(void **state)
{
    (void)state;
    grad_case cases[16];
    size_t n = grad_load_all(cases, 16);
    assert_true(n >= 6);
    const char *forms[] = {"--form recurrent", "--form chunk --chunk 16",
                           "--form chunk --precision fp32"};
    const double tols[] = {1e-10, 1e-10, 1e-5}; /* float32: test_grad's bound */
    for (size_t ci = 0; ci < n; ci++) {
        const grad_case *c = &cases[ci];
        const char *keys[] = {"dq", "dk", "dv", "dbeta", "dg", "dh0"};
        const kdalab_array *want[] = {&c->dq, &c->dk, &c->dv, &c->dbeta, &c->dg, &c->dh0};
        for (int fi = 0; fi < 3; fi++) {
            char outs[1024] = "";
            size_t len = 0;
            for (int a = 0; a < 6; a++)
                if (want[a]->data)
                    len += (size_t)snprintf(outs + len, sizeof outs - len, " --%s %s", keys[a],
                                            tmp(keys[a]));
            int rc = kdalab("grad %s %s %s", grad_inputs(c), forms[fi], outs);
            if (rc != 0)
                fail_msg("%s [%s]: exit %d: %s", c->name, forms[fi], rc, err_text);
            for (int a = 0; a < 6; a++) {
                if (!want[a]->data)
                    continue;
                rc = kdalab("compare %s %s --rtol %g", tmp(keys[a]),
                            grad_path(c->name, keys[a]), tols[fi]);
                if (rc != 0)
                    fail_msg("%s [%s] %s: compare exit %d:\n%s", c->name, forms[fi], keys[a],
                             rc, out_text);
                kdalab_array got;
                read_array(tmp(keys[a]), &got);
                assert_int_equal(got.ndim, want[a]->ndim);
                double e = rel_err_f64(got.data, want[a]->data, got.size);
                if (!(e <= tols[fi]))
                    fail_msg("%s [%s] %s: rel err %g", c->name, forms[fi], keys[a], e);
                kdalab_array_free(&got);
            }
        }
    }
    for (size_t ci = 0; ci < n; ci++)
        grad_case_free(&cases[ci]);
}

/* Bad input to grad: the forward's errors plus d_o/dht of the wrong shape,
 * a non-finite d_o, no output, an output that is an input, a gradient the
 * mechanism lacks; nothing is written on any error. */
static void grad_errors(void **state)
{
    (void)state;
    grad_case cases[16];
    size_t n = grad_load_all(cases, 16);
    const grad_case *c = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, "kda_grad") == 0)
            c = &cases[i];
    assert_non_null(c);
    const char *dq = tmp("grad_dq.npy"), *dg = tmp("grad_dg.npy");
    unlink(dq);
    unlink(dg);
    expect_error(kdalab("grad %s", grad_inputs(c)), 2, "no output", NULL);
    expect_error(kdalab("grad %s --dq %s --do %s", grad_inputs(c), dq, grad_path(c->name, "v")),
                 2, "--do", "given twice", NULL);
    /* d_o of the wrong shape: v's shape differs from o's only by V, use q */
    char bad[4096];
    snprintf(bad, sizeof bad, "%s", grad_inputs(c));
    char *p = strstr(bad, "--do ");
    assert_non_null(p);
    snprintf(p, sizeof bad - (size_t)(p - bad), "--do %s --dq %s", grad_path(c->name, "q"), dq);
    expect_error(kdalab("grad %s", bad), 2, "--do", "(B, T, H, V)", NULL);
    expect_error(kdalab("grad %s --dq %s", grad_inputs(c), grad_path(c->name, "k")), 2,
                 "refusing to overwrite", NULL);
    kdalab_array d_o;
    read_array(grad_path(c->name, "do"), &d_o);
    d_o.data[5] = NAN;
    write_array(tmp("do_nan.npy"), KDALAB_DTYPE_F64, &d_o);
    kdalab_array_free(&d_o);
    snprintf(bad, sizeof bad, "%s", grad_inputs(c));
    p = strstr(bad, "--do ");
    snprintf(p, sizeof bad - (size_t)(p - bad), "--do %s --dq %s --dg %s", tmp("do_nan.npy"),
             dq, dg);
    expect_error(kdalab("grad %s", bad), 2, "--do", "NaN", NULL);
    expect_error(kdalab("grad --mechanism deltanet --q %s --k %s --v %s --beta %s --do %s "
                        "--dg %s",
                        grad_path("deltanet_grad", "q"), grad_path("deltanet_grad", "k"),
                        grad_path("deltanet_grad", "v"), grad_path("deltanet_grad", "beta"),
                        grad_path("deltanet_grad", "do"), dg),
                 2, "has no dg", NULL);
    expect_error(kdalab("grad %s --dq %s --precision bf16", grad_inputs(c), dq), 2,
                 "fp64 or fp32", NULL);
    assert_false(exists(dq));
    assert_false(exists(dg));
    assert_int_equal(count_entries("grad_"), 0);
    assert_int_equal(kdalab("grad --help"), 0);
    assert_non_null(strstr(out_text, "sum(o * do)"));
    for (size_t i = 0; i < n; i++)
        grad_case_free(&cases[i]);
}

/* ------------------------------------------------------------------------- */
/* varlen and GVA                                                            */
/* ------------------------------------------------------------------------- */

/* The inputs of a golden varlen / GVA case (tests/golden_varlen), with
 * --cu-seqlens; *mech, *T get the case's mechanism and length. */
static const char *varlen_inputs(const char *line, char *name, size_t cap)
{
    static char buf[4096];
    char mech[64];
    size_t T, N, H, HV, K, V;
    double scale;
    int has_h0;
    if (sscanf(line, "%63s %63s %zu %zu %zu %zu %zu %zu %lf %d", name, mech, &T, &N, &H, &HV,
               &K, &V, &scale, &has_h0) != 10)
        fail_msg("malformed varlen MANIFEST line: %s", line);
    (void)cap;
    const char *d = "tests/golden_varlen";
    int n = snprintf(buf, sizeof buf,
                     "--mechanism %s --scale %.17g --q %s/%s.q.npy --k %s/%s.k.npy --v "
                     "%s/%s.v.npy --cu-seqlens %s/%s.cu_seqlens.npy",
                     mech, scale, d, name, d, name, d, name, d, name);
    if (strcmp(mech, "linear_attention") != 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --beta %s/%s.beta.npy", d, name);
    if (strcmp(mech, "kda") == 0 || strcmp(mech, "gated_deltanet") == 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --g %s/%s.g.npy", d, name);
    if (has_h0)
        snprintf(buf + n, sizeof buf - (size_t)n, " --h0 %s/%s.h0.npy", d, name);
    return buf;
}

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
        const char *in = varlen_inputs(line, name, sizeof name);
        for (size_t fi = 0; fi < sizeof forms / sizeof forms[0]; fi++) {
            int rc = kdalab("run %s %s --o %s --ht %s", in, forms[fi].opts, tmp("vo.npy"),
                            tmp("vht.npy"));
            if (rc != 0)
                fail_msg("%s [%s]: exit %d: %s", name, forms[fi].opts, rc, err_text);
            const char *keys[2] = {"o", "ht"}, *outs[2] = {tmp("vo.npy"), tmp("vht.npy")};
            for (int k = 0; k < 2; k++) {
                char want[512];
                snprintf(want, sizeof want, "tests/golden_varlen/%s.%s.npy", name, keys[k]);
                rc = kdalab("compare %s %s --rtol %g", outs[k], want, forms[fi].tol);
                if (rc != 0)
                    fail_msg("%s [%s] %s: %s", name, forms[fi].opts, keys[k], out_text);
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
    snprintf(in, sizeof in, "%s", varlen_inputs(line, name, sizeof name));
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
        write_array(tmp("cu.npy"), bad[i].dtype, &a);
        snprintf(cu, sizeof in - (size_t)(cu - in), "--cu-seqlens %s%s", tmp("cu.npy"), tail);
        expect_error(kdalab("run %s --o %s", in, tmp("x.npy")), 2, "--cu-seqlens",
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
        put_bytes(tmp("cu.npy"), img, sizeof img);
        expect_error(kdalab("run %s --o %s", in, tmp("x.npy")), 2, "--cu-seqlens",
                     ints[i].needle, NULL);
    }
    assert_false(exists(tmp("x.npy")));
    /* the backward over the same packing runs, and writes dh0 per sequence */
    snprintf(cu, sizeof in - (size_t)(cu - in), "--cu-seqlens tests/golden_varlen/%s.cu_seqlens.npy%s",
             name, tail);
    assert_int_equal(kdalab("grad %s --do tests/golden_varlen/%s.o.npy --dq %s --dh0 %s", in,
                            name, tmp("vdq.npy"), tmp("vdh0.npy")),
                     0);
    kdalab_array dh0;
    read_array(tmp("vdh0.npy"), &dh0);
    assert_int_equal(dh0.shape[0], 4); /* N = 4 sequences */
    kdalab_array_free(&dh0);
}

/* Half-precision dumps are read (a '<f2' copy of a golden case agrees to fp16
 * rounding), and every positive scale the library accepts is accepted. */
static void half_inputs_and_tiny_scale(void **state)
{
    (void)state;
    golden_case cases[16];
    size_t n = golden_load_all(cases, 16);
    const golden_case *c = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, "kda_small") == 0)
            c = &cases[i];
    assert_non_null(c);
    /* q, k, v, g, beta, h0 as '<f2' files, written by hand */
    const char *keys[] = {"q", "k", "v", "g", "beta", "h0"};
    const kdalab_array *arr[] = {&c->q, &c->k, &c->v, &c->g, &c->beta, &c->h0};
    char paths[6][512], args[4096];
    size_t len = 0;
    for (int a = 0; a < 6; a++) {
        const kdalab_array *x = arr[a];
        char hdr[128];
        int hl = snprintf(hdr, sizeof hdr, "{'descr': '<f2', 'fortran_order': False, 'shape': (");
        for (int d = 0; d < x->ndim; d++)
            hl += snprintf(hdr + hl, sizeof hdr - (size_t)hl, "%zu, ", x->shape[d]);
        snprintf(hdr + hl, sizeof hdr - (size_t)hl, "), }");
        size_t total = 128 + 2 * x->size;
        unsigned char *img = malloc(total);
        assert_non_null(img);
        memset(img, ' ', 128);
        memcpy(img, "\x93NUMPY\x01\x00\x76\x00", 10);
        memcpy(img + 10, hdr, strlen(hdr));
        img[127] = '\n';
        for (size_t i = 0; i < x->size; i++) {
            uint16_t h = 0; /* float -> half, round to nearest (|x| < 65504 here) */
            float f = kdalab_round_fp16((float)x->data[i]);
            uint32_t u;
            memcpy(&u, &f, 4);
            int e = (int)((u >> 23) & 0xff) - 127 + 15;
            uint32_t man = u & 0x7fffff;
            if (f == 0)
                h = (uint16_t)((u >> 16) & 0x8000);
            else if (e <= 0) /* subnormal half */
                h = (uint16_t)(((u >> 16) & 0x8000) | ((man | 0x800000) >> (14 - e)));
            else
                h = (uint16_t)(((u >> 16) & 0x8000) | (uint32_t)e << 10 | man >> 13);
            img[128 + 2 * i] = (unsigned char)h;
            img[128 + 2 * i + 1] = (unsigned char)(h >> 8);
        }
        snprintf(paths[a], sizeof paths[a], "%s/half_%s.npy", tmpdir, keys[a]);
        put_bytes(paths[a], img, total);
        free(img);
        len += (size_t)snprintf(args + len, sizeof args - len, " --%s %s", keys[a], paths[a]);
    }
    assert_int_equal(kdalab("run --mechanism kda --scale %.17g%s --o %s", c->scale, args,
                            tmp("half_o.npy")),
                     0);
    /* fp16 keeps 11 significant bits: inputs rounded by 2^-11 relative */
    assert_int_equal(kdalab("compare %s %s --rtol 2e-2", tmp("half_o.npy"),
                            golden_path(c->name, "o")),
                     0);
    assert_int_equal(kdalab("run --mechanism kda --scale 1e-320%s --o %s", args, tmp("tiny.npy")),
                     0);
    expect_error(kdalab("run --mechanism kda --scale 0%s --o %s", args, tmp("zero.npy")), 2,
                 "--scale", NULL);
    assert_false(exists(tmp("zero.npy")));
    for (size_t i = 0; i < n; i++)
        golden_free(&cases[i]);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_"); }

static int teardown(void **state) { return test_tmpdir_remove(tmpdir); }

/* kdalab train: a tiny model end to end (progress on stderr, accuracy= on
 * stdout, a checkpoint NumPy's layout reads), and its bad command lines,
 * each one line with nothing created. */
/* Occurrences of needle in hay. */
static int count_in(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* `kdalab train` restarts itself once with OPENBLAS_CORETYPE set exactly when
 * OpenBLAS fell back to its generic Prescott kernels on a CPU with AVX2 and
 * FMA (kdalab_blas_choose_kernels), says so in one line, and trains once;
 * with OPENBLAS_CORETYPE set by the caller it never restarts. (Built on
 * another CBLAS, info says "(not OpenBLAS)" and nothing restarts.) */
static void train_chooses_blas_kernels(void **state)
{
    (void)state;
    const char *tiny = "train --task mqar --mixer attention --d-model 8 --heads 2 "
                       "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 2 "
                       "--test-size 4 --log-every 0";
    const char *keep = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    if (keep)
        snprintf(saved, sizeof saved, "%s", keep);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("KDALAB_BLAS_RESTARTED");

    assert_int_equal(kdalab("info"), 0);
    const char *line = strstr(out_text, "blas_kernels=");
    assert_non_null(line);
    int prescott = strncmp(line, "blas_kernels=Prescott\n", 22) == 0;
    int wide = kdalab_simd_level_available(KDALAB_SIMD_AVX2); /* AVX2 and FMA */
    assert_int_equal(kdalab("%s", tiny), 0);
    assert_int_equal(count_in(err_text, "restarting with OPENBLAS_CORETYPE="),
                     prescott && wide ? 1 : 0);
    assert_int_equal(count_in(err_text, "kdalab train: "), 1); /* trained once */
    assert_int_equal(count_in(out_text, "accuracy="), 1);

    setenv("OPENBLAS_CORETYPE", "Prescott", 1); /* the caller's choice is kept */
    assert_int_equal(kdalab("%s", tiny), 0);
    assert_int_equal(count_in(err_text, "restarting"), 0);
    assert_int_equal(kdalab("info"), 0); /* reported, whatever the CBLAS makes of it */
    assert_non_null(strstr(out_text, " (OPENBLAS_CORETYPE=Prescott)\n"));

    if (keep)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
}

static void train_command(void **state)
{
    (void)state;
    const char *tiny = "train --task mqar --mixer kda,attention --d-model 8 --heads 2 "
                       "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 4 "
                       "--test-size 4 --log-every 2";
    assert_int_equal(kdalab("%s --out %s", tiny, tmp("ckpt")), 0);
    assert_non_null(strstr(out_text, "accuracy="));
    assert_non_null(strstr(err_text, "step 4/4 loss"));
    double acc = -1;
    assert_int_equal(sscanf(strstr(out_text, "accuracy="), "accuracy=%lf", &acc), 1);
    assert_true(acc >= 0 && acc <= 1);
    kdalab_array a;
    read_array(tmp("ckpt/embed.npy"), &a);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 9);
    assert_int_equal(a.shape[1], 8);
    kdalab_array_free(&a);
    read_array(tmp("ckpt/blocks.0.mixer.A_log.npy"), &a);
    assert_int_equal(a.ndim, 1);
    assert_int_equal(a.shape[0], 2);
    kdalab_array_free(&a);
    assert_true(exists(tmp("ckpt/config.txt")));
    assert_false(exists(tmp("ckpt/config.txt.tmp")));
    /* the same run again gives the same accuracy (a function of the seed) */
    char first[sizeof out_text];
    memcpy(first, out_text, sizeof first);
    assert_int_equal(kdalab("%s", tiny), 0);
    assert_string_equal(out_text, first);

    expect_error(kdalab("train --task mqar --mixer foo"), 2, "--mixer", "foo", NULL);
    expect_error(kdalab("train --task mqar --mixer hybrid:3 --layers 2"), 2, "hybrid:3",
                 "no attention block", NULL);
    expect_error(kdalab("train --task copy --mixer kda"), 2, "--task", NULL);
    expect_error(kdalab("train --task mqar"), 2, "--mixer", "missing", NULL);
    expect_error(kdalab("train --task mqar --mixer kda --d-model 10 --heads 3"), 2,
                 "not a multiple", NULL);
    expect_error(kdalab("train --task mqar --mixer kda --seq-len 16 --kv-pairs 8"), 2, "T",
                 NULL);
    expect_error(kdalab("train --task mqar --mixer kda --lr -1"), 2, "--lr", NULL);
    expect_error(kdalab("train --task mqar --mixer kda --lr nan"), 2, "--lr", NULL);
    /* a number given twice: which one would count is a guess, so neither does */
    expect_error(kdalab("train --task mqar --mixer kda --steps 3 --steps=4"), 2, "--steps",
                 "given twice", NULL);
    expect_error(kdalab("train --task mqar --mixer kda --no-conv --no-conv"), 2, "--no-conv",
                 "given twice", NULL);
    assert_int_equal(kdalab("info --help --help"), 0); /* help wins, however often asked */
    assert_non_null(strstr(out_text, "usage"));
    /* a second run into the same checkpoint replaces it whole: a one-block model
     * leaves no block-1 tensor of the two-block one behind */
    assert_int_equal(kdalab("train --task mqar --mixer kda --layers 1 --d-model 8 --heads 2 "
                            "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 2 "
                            "--test-size 4 --out %s", tmp("ckpt")), 0);
    assert_false(exists(tmp("ckpt/blocks.1.norm1.npy")));
    assert_true(exists(tmp("ckpt/blocks.0.norm1.npy")));
    assert_int_equal(count_entries("ckpt."), 0); /* no .partial or .old left */
    /* a directory holding anything else is refused before training, kept whole */
    put_bytes(tmp("ckpt/notes.md"), "mine", 4);
    expect_error(kdalab("%s --out %s", tiny, tmp("ckpt")), 2, "not a kdalab checkpoint",
                 "notes.md", NULL);
    assert_true(exists(tmp("ckpt/notes.md")) && exists(tmp("ckpt/config.txt")));
    /* a diverging run: exit 1, one error line at the end, no directory made */
    assert_int_equal(kdalab("%s --lr 1e10 --out %s", tiny, tmp("never")), 1);
    assert_non_null(strstr(err_text, "diverged"));
    assert_false(exists(tmp("never")));
    /* --out naming a regular file: refused before training, the file kept */
    put_bytes(tmp("not_a_dir"), "keep", 4);
    expect_error(kdalab("%s --out %s", tiny, tmp("not_a_dir")), 2, "not a directory", NULL);
    size_t len;
    unsigned char *b = file_bytes(tmp("not_a_dir"), &len);
    assert_int_equal(len, 4);
    assert_memory_equal(b, "keep", 4);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_reference),
        cmocka_unit_test(golden_simd),
        cmocka_unit_test(golden_bf16_runs),
        cmocka_unit_test(compare_semantics),
        cmocka_unit_test(bad_files),
        cmocka_unit_test(outputs_are_guarded),
        cmocka_unit_test(simd_overflow_writes_computed_values),
        cmocka_unit_test(other_layouts_read_correctly),
        cmocka_unit_test(bad_values),
        cmocka_unit_test(mismatched_shapes),
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(help_everywhere),
        cmocka_unit_test(info_and_time),
        cmocka_unit_test(empty_sequences),
        cmocka_unit_test(overflow_is_reported),
        cmocka_unit_test(grad_golden),
        cmocka_unit_test(grad_errors),
        cmocka_unit_test(varlen_golden),
        cmocka_unit_test(varlen_errors),
        cmocka_unit_test(half_inputs_and_tiny_scale),
        cmocka_unit_test(train_command),
        cmocka_unit_test(train_chooses_blas_kernels),
    };
    return cmocka_run_group_tests_name("cli", tests, setup, teardown);
}
