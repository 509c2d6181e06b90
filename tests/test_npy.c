/*
 * test_npy.c — the .npy reader and writer (lib/io/npy_read.c, npy_write.c) against well-formed
 * variants and hostile inputs.
 *
 * In-memory images go through kdalab_npy_parse; files written under a
 * mkdtemp directory go through kdalab_npy_read / kdalab_npy_write. Values are
 * compared exactly (bitwise for float64): the reader only moves bytes, so any
 * difference at all is a bug.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kdalab.h"

static char tmpdir[256];

/* gcc says __SANITIZE_ADDRESS__; older clang only __has_feature. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NPY_TEST_CLANG_ASAN 1
#endif
#endif
#ifndef NPY_TEST_CLANG_ASAN
#define NPY_TEST_CLANG_ASAN 0
#endif

/* ------------------------------------------------------------------------- */
/* Building images                                                           */
/* ------------------------------------------------------------------------- */

/* A .npy image: magic, version major.0, header length (2 bytes for 1.0, 4
 * otherwise), the dict padded with spaces to pad bytes (then '\n') when pad is
 * larger than the dict, then dlen bytes of data. Caller frees. */
static unsigned char *image(int major, const char *dict, size_t pad, const void *data,
                            size_t dlen, size_t *len)
{
    size_t prefix = major == 1 ? 10 : 12;
    size_t dict_len = strlen(dict);
    size_t hlen = pad > dict_len ? pad : dict_len;
    *len = prefix + hlen + dlen;
    unsigned char *b = malloc(*len + 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t j = 0; j < prefix - 8; j++)
        b[8 + j] = (unsigned char)(hlen >> (8 * j));
    memcpy(b + prefix, dict, dict_len);
    if (hlen > dict_len) {
        memset(b + prefix + dict_len, ' ', hlen - dict_len - 1);
        b[prefix + hlen - 1] = '\n';
    }
    if (dlen)
        memcpy(b + prefix + hlen, data, dlen);
    return b;
}

/* n float64 / float32 values as little- or big-endian bytes (static buffer). */
static unsigned char bytes_buf[4096];
static const unsigned char *f8_bytes(const double *x, size_t n, int big)
{
    assert_true(n * 8 <= sizeof bytes_buf);
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &x[i], 8);
        for (int j = 0; j < 8; j++)
            bytes_buf[i * 8 + (size_t)(big ? 7 - j : j)] = (unsigned char)(u >> (8 * j));
    }
    return bytes_buf;
}
static const unsigned char *f4_bytes(const double *x, size_t n, int big)
{
    assert_true(n * 4 <= sizeof bytes_buf);
    for (size_t i = 0; i < n; i++) {
        float f = (float)x[i];
        uint32_t u;
        memcpy(&u, &f, 4);
        for (int j = 0; j < 4; j++)
            bytes_buf[i * 4 + (size_t)(big ? 3 - j : j)] = (unsigned char)(u >> (8 * j));
    }
    return bytes_buf;
}

static const double SIX[6] = {0.5, -1.25, 3.0, 1e-300, -7.0e12, 0.1};

/* Parse and expect success with the given shape and values (bitwise). */
static void expect_ok(const unsigned char *b, size_t len, int ndim, const size_t *shape,
                      const double *vals)
{
    kdalab_array a;
    kdalab_status s = kdalab_npy_parse(b, len, &a);
    if (s != KDALAB_OK)
        fail_msg("parse failed: %s (%s)", kdalab_strerror(s), kdalab_last_error());
    assert_string_equal(kdalab_last_error(), "");
    assert_int_equal(a.ndim, ndim);
    size_t size = 1;
    for (int i = 0; i < ndim; i++) {
        assert_int_equal(a.shape[i], shape[i]);
        size *= shape[i];
    }
    assert_int_equal(a.size, size);
    if (size == 0)
        assert_null(a.data);
    else
        assert_memory_equal(a.data, vals, size * sizeof(double));
    kdalab_array_free(&a);
    assert_null(a.data);
    assert_int_equal(a.size, 0);
}

/* Parse and expect status s; *out must come back zeroed; the detail message
 * must contain needle (when given). */
static void expect_fail(const unsigned char *b, size_t len, kdalab_status want, const char *needle)
{
    kdalab_array a;
    memset(&a, 0x5a, sizeof a);
    kdalab_status s = kdalab_npy_parse(b, len, &a);
    if (s != want)
        fail_msg("expected %s, got %s (%s)", kdalab_strerror(want), kdalab_strerror(s),
                 kdalab_last_error());
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.size, 0);
    assert_null(a.data);
    assert_true(strlen(kdalab_last_error()) > 0);
    if (needle && !strstr(kdalab_last_error(), needle))
        fail_msg("message '%s' lacks '%s'", kdalab_last_error(), needle);
}

static void expect_dict_fail(const char *dict, kdalab_status want, const char *needle)
{
    size_t len;
    unsigned char *b = image(1, dict, 118, f8_bytes(SIX, 6, 0), 48, &len);
    expect_fail(b, len, want, needle);
    free(b);
}

/* Write an image to tmpdir/name; returns the path (static buffer). */
static const char *put_file(const char *name, const void *b, size_t len)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Names in tmpdir that start with prefix (to catch left-over temp files). */
static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------------- */
/* Well-formed variants                                                      */
/* ------------------------------------------------------------------------- */

static void versions_1_2_3(void **state)
{
    const size_t shape[2] = {2, 3};
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    for (int major = 1; major <= 3; major++) {
        size_t len;
        unsigned char *b = image(major, dict, major == 1 ? 118 : 116, f8_bytes(SIX, 6, 0), 48, &len);
        expect_ok(b, len, 2, shape, SIX);
        free(b);
    }
}

static void long_headers(void **state)
{
    const size_t shape[1] = {6};
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }";
    size_t len;
    /* > 256 bytes in 1.0 (the 2-byte length's high byte in use) */
    unsigned char *b = image(1, dict, 1000, f8_bytes(SIX, 6, 0), 48, &len);
    expect_ok(b, len, 1, shape, SIX);
    free(b);
    /* > 65535 bytes: needs 2.0 */
    b = image(2, dict, 70000, f8_bytes(SIX, 6, 0), 48, &len);
    expect_ok(b, len, 1, shape, SIX);
    free(b);
    /* no padding at all, no trailing newline */
    b = image(1, dict, 0, f8_bytes(SIX, 6, 0), 48, &len);
    expect_ok(b, len, 1, shape, SIX);
    free(b);
}

static void shapes(void **state)
{
    static const struct {
        const char *shape_text;
        int ndim;
        size_t shape[4];
    } cases[] = {
        {"()", 0, {0}},          {"(5,)", 1, {5}},         {"(5 ,)", 1, {5}},
        {"( 5, )", 1, {5}},      {"(0, 3)", 2, {0, 3}},    {"(0,3)", 2, {0, 3}},
        {"(3, 0)", 2, {3, 0}},   {"(2,3)", 2, {2, 3}},     {"(2, 3)", 2, {2, 3}},
        {"( 2 ,  3 , )", 2, {2, 3}}, {"(2,3,)", 2, {2, 3}}, {"(1, 2, 3)", 3, {1, 2, 3}},
        {"(1,1,2,3)", 4, {1, 1, 2, 3}}, {"(2L, 3L)", 2, {2, 3}}, {"(0,)", 1, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }",
                 cases[i].shape_text);
        size_t n = 1;
        for (int d = 0; d < cases[i].ndim; d++)
            n *= cases[i].shape[d];
        size_t len;
        unsigned char *b = image(1, dict, 118, f8_bytes(SIX, n, 0), n * 8, &len);
        expect_ok(b, len, cases[i].ndim, cases[i].shape, SIX);
        free(b);
    }
}

static void key_order_and_spacing(void **state)
{
    static const char *dicts[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f8', 'shape': (2, 3), 'fortran_order': False, }",
        "{'fortran_order': False, 'descr': '<f8', 'shape': (2, 3), }",
        "{'fortran_order': False, 'shape': (2, 3), 'descr': '<f8', }",
        "{'shape': (2, 3), 'descr': '<f8', 'fortran_order': False, }",
        "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f8'}",
        "{'descr':'<f8','fortran_order':False,'shape':(2,3)}",
        "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2, 3)}",
        "  {  'descr' :  '<f8' ,\n 'fortran_order' :\tFalse , 'shape' : ( 2 , 3 ) ,  }  ",
    };
    const size_t shape[2] = {2, 3};
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        size_t len;
        unsigned char *b = image(1, dicts[i], 118, f8_bytes(SIX, 6, 0), 48, &len);
        expect_ok(b, len, 2, shape, SIX);
        free(b);
    }
}

static void dtypes_read(void **state)
{
    const size_t shape[2] = {2, 3};
    /* values exactly representable in float32, so the conversion is exact */
    const double v[6] = {0.5, -1.25, 3.0, 1024.0, -0.0, 0.15625};
    const char *fmt = "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }";
    static const struct {
        const char *descr;
        int f4, big;
        kdalab_dtype dtype;
    } cases[] = {{"<f8", 0, 0, KDALAB_DTYPE_F64},
                 {">f8", 0, 1, KDALAB_DTYPE_F64},
                 {"<f4", 1, 0, KDALAB_DTYPE_F32},
                 {">f4", 1, 1, KDALAB_DTYPE_F32}};
    for (size_t i = 0; i < 4; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, fmt, cases[i].descr);
        const unsigned char *data = cases[i].f4 ? f4_bytes(v, 6, cases[i].big)
                                                : f8_bytes(v, 6, cases[i].big);
        size_t len;
        unsigned char *b = image(1, dict, 118, data, cases[i].f4 ? 24 : 48, &len);
        expect_ok(b, len, 2, shape, v);
        kdalab_array a;
        assert_int_equal(kdalab_npy_parse(b, len, &a), KDALAB_OK);
        assert_int_equal(a.dtype, cases[i].dtype);
        kdalab_array_free(&a);
        free(b);
    }
}

/* Half precision (every half is a double: read exactly, subnormals and
 * infinities included) and the integers cu_seqlens come in, either byte order. */
static void half_and_integer_dtypes_read(void **state)
{
    const size_t shape[1] = {6};
    const char *fmt = "{'descr': '%s', 'fortran_order': False, 'shape': (6,), }";
    /* halves: 1, -2, 0.5, 65504 (max), 2^-24 (smallest subnormal), -inf */
    const uint16_t half[6] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0xfc00};
    const double half_v[6] = {1, -2, 0.5, 65504, 5.9604644775390625e-08, -INFINITY};
    const int64_t ints[6] = {0, 3, 17, -5, 2147483647, 9007199254740992LL /* 2^53 */};
    for (int big = 0; big <= 1; big++) {
        unsigned char hb[12], i8b[48], i4b[24];
        for (int i = 0; i < 6; i++) {
            for (int j = 0; j < 2; j++)
                hb[2 * i + j] = (unsigned char)(half[i] >> (8 * (big ? 1 - j : j)));
            for (int j = 0; j < 8; j++)
                i8b[8 * i + j] = (unsigned char)((uint64_t)ints[i] >> (8 * (big ? 7 - j : j)));
            for (int j = 0; j < 4; j++)
                i4b[4 * i + j] =
                    (unsigned char)((uint32_t)(int32_t)ints[i] >> (8 * (big ? 3 - j : j)));
        }
        const struct {
            const char *descr;
            const unsigned char *data;
            size_t bytes;
            kdalab_dtype dtype;
            int n_check;
        } cases[] = {{big ? ">f2" : "<f2", hb, 12, KDALAB_DTYPE_F16, 6},
                     {big ? ">i8" : "<i8", i8b, 48, KDALAB_DTYPE_I64, 6},
                     {big ? ">i4" : "<i4", i4b, 24, KDALAB_DTYPE_I32, 5}};
        for (int c = 0; c < 3; c++) {
            char dict[128];
            snprintf(dict, sizeof dict, fmt, cases[c].descr);
            size_t len;
            unsigned char *b = image(1, dict, 118, cases[c].data, cases[c].bytes, &len);
            kdalab_array a;
            assert_int_equal(kdalab_npy_parse(b, len, &a), KDALAB_OK);
            assert_int_equal(a.dtype, cases[c].dtype);
            assert_string_equal(a.descr, cases[c].descr);
            assert_int_equal(a.size, 6);
            assert_int_equal(a.shape[0], shape[0]);
            for (int i = 0; i < cases[c].n_check; i++) {
                double want = c == 0 ? half_v[i] : (double)ints[i];
                if (!(a.data[i] == want))
                    fail_msg("%s element %d: %.17g, expected %.17g", cases[c].descr, i,
                             a.data[i], want);
            }
            kdalab_array_free(&a);
            free(b);
        }
    }
}

static void dtypes_rejected(void **state)
{
    static const char *bad[] = {"|u1", ">i2", "<u8", "|b1", "<c16", "<f16",
                                "<U3", "|S4", "|O", "f8", "=f8", "<M8[ns]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (6,), }",
                 bad[i]);
        char needle[32];
        snprintf(needle, sizeof needle, "'%s'", bad[i]);
        expect_dict_fail(dict, KDALAB_EDTYPE, needle);
    }
    expect_dict_fail("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (6,), }",
                     KDALAB_EDTYPE, "structured");
}

/* Fortran order: element (i0,..,in-1) at i0 + d0*(i1 + d1*(i2 + ...)); the
 * reader must hand back C order. */
static void fortran_order(void **state)
{
    static const struct {
        int ndim;
        size_t shape[4];
    } cases[] = {{1, {6}}, {2, {2, 3}}, {2, {3, 2}}, {3, {2, 3, 4}}, {4, {2, 1, 3, 5}},
                 {2, {0, 4}}, {0, {0}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int nd = cases[c].ndim;
        const size_t *sh = cases[c].shape;
        size_t n = 1;
        for (int d = 0; d < nd; d++)
            n *= sh[d];
        double cvals[120], fvals[120];
        /* C order value = its linear C index; place each at its Fortran offset */
        for (size_t i = 0; i < n; i++) {
            size_t rem = i, idx[4] = {0};
            for (int d = nd - 1; d >= 0; d--) {
                idx[d] = rem % sh[d];
                rem /= sh[d];
            }
            size_t foff = 0;
            for (int d = nd - 1; d >= 0; d--)
                foff = foff * sh[d] + idx[d];
            cvals[i] = (double)i;
            fvals[foff] = (double)i;
        }
        char shape_text[64] = "(";
        for (int d = 0; d < nd; d++)
            snprintf(shape_text + strlen(shape_text), sizeof shape_text - strlen(shape_text),
                     "%zu,", sh[d]);
        strcat(shape_text, ")");
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': True, 'shape': %s, }",
                 shape_text);
        size_t len;
        unsigned char *b = image(1, dict, 118, f8_bytes(fvals, n, 0), n * 8, &len);
        expect_ok(b, len, nd, sh, cvals);
        free(b);
        /* and big-endian float32 in Fortran order, for good measure */
        snprintf(dict, sizeof dict, "{'descr': '>f4', 'fortran_order': True, 'shape': %s, }",
                 shape_text);
        b = image(1, dict, 118, f4_bytes(fvals, n, 1), n * 4, &len);
        expect_ok(b, len, nd, sh, cvals);
        free(b);
    }
}

/* ------------------------------------------------------------------------- */
/* Hostile images                                                            */
/* ------------------------------------------------------------------------- */

static void bad_magic_and_version(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }";
    size_t len;
    unsigned char *b = image(1, dict, 118, f8_bytes(SIX, 6, 0), 48, &len);
    b[1] = 'n';
    expect_fail(b, len, KDALAB_EFORMAT, "magic");
    b[1] = 'N';
    b[0] = 0x92;
    expect_fail(b, len, KDALAB_EFORMAT, "magic");
    b[0] = 0x93;
    b[6] = 4;
    expect_fail(b, len, KDALAB_EFORMAT, "version 4.0");
    b[6] = 0;
    expect_fail(b, len, KDALAB_EFORMAT, "version");
    b[6] = 1;
    b[7] = 1;
    expect_fail(b, len, KDALAB_EFORMAT, "version 1.1");
    b[7] = 0;
    expect_ok(b, len, 1, (const size_t[]){6}, SIX);
    const char *text = "x,y\n1,2\n";
    expect_fail((const unsigned char *)text, strlen(text), KDALAB_EFORMAT, "magic");
    free(b);
}

/* Every proper prefix of a valid file is an error (never a read past len). */
static void every_truncation(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    for (int major = 1; major <= 2; major++) {
        size_t len;
        unsigned char *b = image(major, dict, 0, f8_bytes(SIX, 6, 0), 48, &len);
        for (size_t cut = 0; cut < len; cut++) {
            /* a copy of exactly cut bytes, so ASan catches any over-read */
            unsigned char *t = malloc(cut ? cut : 1);
            assert_non_null(t);
            memcpy(t, b, cut);
            expect_fail(t, cut, KDALAB_EFORMAT, NULL);
            free(t);
        }
        expect_ok(b, len, 2, (const size_t[]){2, 3}, SIX);
        free(b);
    }
}

static void header_length_past_end(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }";
    size_t len;
    unsigned char *b = image(1, dict, 118, f8_bytes(SIX, 6, 0), 48, &len);
    b[8] = 0xff;
    b[9] = 0xff; /* 65535 bytes of header in a 176-byte file */
    expect_fail(b, len, KDALAB_EFORMAT, "past the end");
    free(b);
    b = image(2, dict, 116, f8_bytes(SIX, 6, 0), 48, &len);
    b[8] = 0x00;
    b[9] = 0x00;
    b[10] = 0x00;
    b[11] = 0x01; /* 16 MiB */
    expect_fail(b, len, KDALAB_EFORMAT, "past the end");
    free(b);
}

/* In a child process whose address space may grow by only 256 MiB, reading
 * path must give `want`: an attempt to allocate what a header (or the file
 * size) claims would show up as ENOMEM instead. */
static void expect_read_under_cap(const char *path, kdalab_status want, const char *what)
{
#if defined(__SANITIZE_ADDRESS__) || NPY_TEST_CLANG_ASAN
    /* ASan reserves terabytes of shadow memory: no address-space cap possible. */
    print_message("%s: address-space cap skipped under AddressSanitizer\n", what);
    (void)path;
    (void)want;
#else
    (void)what;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* current address-space size (first field of statm, in pages) + 256 MiB */
        unsigned long pages = 0;
        FILE *statm = fopen("/proc/self/statm", "r");
        if (statm == NULL || fscanf(statm, "%lu", &pages) != 1)
            _exit(3);
        fclose(statm);
        rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 20);
        struct rlimit lim = {cap, cap};
        if (setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(3);
        kdalab_array c;
        kdalab_status s = kdalab_npy_read(path, &c);
        _exit(s == want ? 0 : s == KDALAB_ENOMEM ? 1 : 2);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
#endif
}

/* A 12-byte format-2.0 file whose header length says 4 GiB - 1. The reader
 * must compare that with the file's real size, not allocate it. In a child
 * process whose address space may grow by only 256 MiB, an attempt to allocate
 * the declared size would show up as ENOMEM instead of EFORMAT. */
static void four_gib_header(void **state)
{
    const unsigned char tiny[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff};
    expect_fail(tiny, sizeof tiny, KDALAB_EFORMAT, "past the end");
    const char *path = put_file("huge_header.npy", tiny, sizeof tiny);
    kdalab_array a;
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "huge_header.npy"));
    assert_null(a.data);

    expect_read_under_cap(path, KDALAB_EFORMAT, "four_gib_header");
    unlink(path);
}

/* A 2 GiB file of zeros (sparse: no disk is used) is not .npy: the reader
 * must say so from its first bytes, under the same 256 MiB address-space cap,
 * instead of allocating and reading the whole file first. */
static void big_file_not_npy(void **state)
{
    const char *path = put_file("zeros.npy", "", 0);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)2 << 30), 0);
    fclose(f);
    kdalab_array a;
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "magic"));
    expect_read_under_cap(path, KDALAB_EFORMAT, "big_file_not_npy");
    unlink(path);
}

static void element_count_overflow(void **state)
{
    static const char *shapes_text[] = {
        "(4294967296, 4294967296)",    /* 2^64 elements        */
        "(18446744073709551615, 2)",   /* SIZE_MAX * 2         */
        "(65536, 65536, 65536, 65536)",
        "(2305843009213693952,)",      /* 2^61: 2^64 bytes     */
        "(99999999999999999999999,)",  /* one dim beyond 2^64 */
    };
    for (size_t i = 0; i < sizeof shapes_text / sizeof shapes_text[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }",
                 shapes_text[i]);
        expect_dict_fail(dict, KDALAB_EOVERFLOW, "overflow");
    }
    /* 2^61 float32 elements: 2^63 bytes in the file, but 2^64 bytes as float64 */
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,), }",
                     KDALAB_EOVERFLOW, "overflow");
    /* an element count that does not overflow but exceeds the data: EFORMAT */
    expect_dict_fail("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }",
                     KDALAB_EFORMAT, "truncated");
    /* a zero dimension makes the product 0 whatever the others are */
    size_t len;
    unsigned char *b = image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 18446744073709551615), }",
                             118, NULL, 0, &len);
    expect_ok(b, len, 2, (const size_t[]){0, SIZE_MAX}, NULL);
    free(b);
}

static void data_shorter_than_shape(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    for (size_t dlen = 0; dlen < 48; dlen += 7) {
        size_t len;
        unsigned char *b = image(1, dict, 118, f8_bytes(SIX, 6, 0), dlen, &len);
        expect_fail(b, len, KDALAB_EFORMAT, "truncated");
        free(b);
    }
    /* extra trailing bytes are ignored, as NumPy does */
    size_t len;
    double seven[7] = {0.5, -1.25, 3.0, 1e-300, -7.0e12, 0.1, 99.0};
    unsigned char *b = image(1, dict, 118, f8_bytes(seven, 7, 0), 56, &len);
    expect_ok(b, len, 2, (const size_t[]){2, 3}, SIX);
    free(b);
}

static void malformed_headers(void **state)
{
    static const char *dicts[] = {
        "",                                                                 /* empty        */
        "'descr': '<f8', 'fortran_order': False, 'shape': (6,)",            /* no braces    */
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6,)",           /* no '}'       */
        "{'descr': '<f8', 'fortran_order': False}",                         /* no shape     */
        "{'descr': '<f8', 'shape': (6,)}",                                  /* no order     */
        "{'fortran_order': False, 'shape': (6,)}",                          /* no descr     */
        "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (6,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), 'extra': 1}",
        "{'descr': '<f8', 'fortran_order': Maybe, 'shape': (6,)}",
        "{'descr': '<f8', 'fortran_order': Falsey, 'shape': (6,)}",
        "{'descr': '<f8', 'fortran_order': 0, 'shape': (6,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6)}",           /* int, not tuple */
        "{'descr': '<f8', 'fortran_order': False, 'shape': 6}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': [6]}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (-6,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6,,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3 2)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 2, 3)}", /* 5-D        */
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6.0,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (0x6,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6,)} trailing",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6,)}}",
        "{'descr': '<f8",                                                   /* unterminated */
        "{'descr': '<f\\x38', 'fortran_order': False, 'shape': (6,)}",      /* escape       */
        "{descr: '<f8', 'fortran_order': False, 'shape': (6,)}",
        "{'descr' '<f8', 'fortran_order': False, 'shape': (6,)}",
        "{'descr': '<f8' 'fortran_order': False, 'shape': (6,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (6,),,}",
        "{'descr': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}",
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++)
        expect_dict_fail(dicts[i], KDALAB_EFORMAT, ".npy");
}

static void null_arguments(void **state)
{
    kdalab_array a;
    unsigned char b[16] = {0};
    assert_int_equal(kdalab_npy_parse(NULL, 16, &a), KDALAB_ENULL);
    assert_null(a.data);
    assert_int_equal(kdalab_npy_parse(b, sizeof b, NULL), KDALAB_ENULL);
    assert_int_equal(kdalab_npy_read(NULL, &a), KDALAB_ENULL);
    assert_int_equal(kdalab_npy_read("x.npy", NULL), KDALAB_ENULL);
    kdalab_array_free(NULL);
    double x = 1.0;
    size_t shape[1] = {1};
    assert_int_equal(kdalab_npy_write(NULL, KDALAB_DTYPE_F64, &x, 1, shape), KDALAB_ENULL);
    char path[512];
    snprintf(path, sizeof path, "%s/null.npy", tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, NULL, 1, shape), KDALAB_ENULL);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, &x, 1, NULL), KDALAB_ENULL);
    assert_int_equal(access(path, F_OK), -1);
}

/* ------------------------------------------------------------------------- */
/* Files                                                                     */
/* ------------------------------------------------------------------------- */

static void read_files(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    size_t len;
    unsigned char *b = image(1, dict, 118, f8_bytes(SIX, 6, 0), 48, &len);
    const char *path = put_file("good.npy", b, len);
    kdalab_array a;
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_OK);
    assert_int_equal(a.size, 6);
    assert_memory_equal(a.data, SIX, sizeof SIX);
    kdalab_array_free(&a);
    unlink(path);

    /* each failure names the file */
    path = put_file("short.npy", b, len - 1);
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "short.npy"));
    unlink(path);
    path = put_file("empty.npy", b, 0);
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "empty.npy"));
    unlink(path);
    b[9] = 0x10; /* header length 4096 + 118 */
    path = put_file("past_end.npy", b, len);
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "past_end.npy"));
    unlink(path);
    free(b);

    char missing[512];
    snprintf(missing, sizeof missing, "%s/missing.npy", tmpdir);
    assert_int_equal(kdalab_npy_read(missing, &a), KDALAB_EIO);
    assert_non_null(strstr(kdalab_last_error(), "missing.npy"));
    assert_int_equal(kdalab_npy_read(tmpdir, &a), KDALAB_EIO); /* a directory */
    assert_null(a.data);
}

/* Every writer output reads back identically: ndim 0..4, both dtypes, empty
 * arrays, and the awkward float64 values (NaN, infinities, -0, subnormals). */
static void write_read_back(void **state)
{
    double vals[64];
    for (size_t i = 0; i < 64; i++)
        vals[i] = ldexp((double)i - 31.5, (int)i - 32);
    vals[0] = NAN;
    vals[1] = INFINITY;
    vals[2] = -INFINITY;
    vals[3] = -0.0;
    vals[4] = 4.9406564584124654e-324;
    vals[5] = 1.7976931348623157e308;
    static const struct {
        int ndim;
        size_t shape[4];
    } cases[] = {{0, {0}},       {1, {64}},        {2, {8, 8}},      {3, {2, 4, 8}},
                 {4, {2, 2, 2, 8}}, {1, {0}},      {2, {0, 3}},      {4, {1, 0, 5, 7}},
                 {2, {1, 1}}};
    char path[512];
    snprintf(path, sizeof path, "%s/rt.npy", tmpdir);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = 1;
        for (int d = 0; d < cases[c].ndim; d++)
            n *= cases[c].shape[d];
        for (int dt = 0; dt < 2; dt++) {
            kdalab_dtype dtype = dt ? KDALAB_DTYPE_F32 : KDALAB_DTYPE_F64;
            assert_int_equal(kdalab_npy_write(path, dtype, vals, cases[c].ndim, cases[c].shape),
                             KDALAB_OK);
            assert_string_equal(kdalab_last_error(), "");
            /* the file is what the format says: header a multiple of 64 bytes */
            struct stat st;
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(((size_t)st.st_size - n * (dt ? 4 : 8)) % 64, 0);
            kdalab_array a;
            assert_int_equal(kdalab_npy_read(path, &a), KDALAB_OK);
            assert_int_equal(a.ndim, cases[c].ndim);
            assert_int_equal(a.size, n);
            assert_int_equal(a.dtype, dtype);
            for (int d = 0; d < a.ndim; d++)
                assert_int_equal(a.shape[d], cases[c].shape[d]);
            for (size_t i = 0; i < n; i++) {
                double want = dt ? (double)(float)vals[i] : vals[i];
                if (isnan(want))
                    assert_true(isnan(a.data[i]));
                else
                    assert_memory_equal(&a.data[i], &want, sizeof want);
            }
            kdalab_array_free(&a);
        }
    }
    assert_int_equal(count_entries(tmpdir, "rt.npy.tmp"), 0);
    unlink(path);
}

/* The writer reproduces NumPy's own files byte for byte (the golden vectors
 * were written by NumPy, format 1.0, '<f8'). */
static void write_matches_numpy_golden(void **state)
{
    static const char *files[] = {"kda_small.q.npy", "kda_small.beta.npy", "kda_small.h0.npy",
                                  "gated_deltanet_small.g.npy"};
    char out[512];
    snprintf(out, sizeof out, "%s/copy.npy", tmpdir);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char in[512];
        snprintf(in, sizeof in, "%s/%s", golden_dir(), files[i]);
        kdalab_array a;
        kdalab_status s = kdalab_npy_read(in, &a);
        if (s != KDALAB_OK)
            fail_msg("%s", kdalab_last_error());
        assert_int_equal(kdalab_npy_write(out, KDALAB_DTYPE_F64, a.data, a.ndim, a.shape),
                         KDALAB_OK);
        kdalab_array_free(&a);
        FILE *f1 = fopen(in, "rb"), *f2 = fopen(out, "rb");
        assert_non_null(f1);
        assert_non_null(f2);
        int c1, c2;
        size_t pos = 0;
        do {
            c1 = fgetc(f1);
            c2 = fgetc(f2);
            if (c1 != c2)
                fail_msg("%s: byte %zu differs", files[i], pos);
            pos++;
        } while (c1 != EOF);
        fclose(f1);
        fclose(f2);
    }
    unlink(out);
}

/* A failed write leaves nothing at the path and no temporary file. */
static void write_failures_leave_nothing(void **state)
{
    double x[4] = {1, 2, 3, 4};
    size_t shape[5] = {2, 2, 1, 1, 1};
    char path[512];
    snprintf(path, sizeof path, "%s/nodir/x.npy", tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_EIO);
    assert_non_null(strstr(kdalab_last_error(), "x.npy"));

    snprintf(path, sizeof path, "%s/w.npy", tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 5, shape), KDALAB_EINVAL);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, -1, shape), KDALAB_EINVAL);
    assert_int_equal(kdalab_npy_write(path, (kdalab_dtype)7, x, 2, shape), KDALAB_EINVAL);
    size_t huge[2] = {SIZE_MAX, 3};
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, huge), KDALAB_EOVERFLOW);
    size_t big_bytes[1] = {SIZE_MAX / 4};
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 1, big_bytes),
                     KDALAB_EOVERFLOW);
    assert_int_equal(access(path, F_OK), -1);

    /* the rename fails (the target is a directory): no temp file left over */
    snprintf(path, sizeof path, "%s/isdir.npy", tmpdir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_EIO);
    assert_int_equal(count_entries(tmpdir, "isdir.npy"), 1);
    rmdir(path);

    /* overwriting an existing file replaces it whole */
    snprintf(path, sizeof path, "%s/over.npy", tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_OK);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F32, x, 1, shape), KDALAB_OK);
    kdalab_array a;
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_OK);
    assert_int_equal(a.ndim, 1);
    assert_int_equal(a.size, 2);
    assert_int_equal(a.dtype, KDALAB_DTYPE_F32);
    kdalab_array_free(&a);
    assert_int_equal(count_entries(tmpdir, "over.npy"), 1);
    unlink(path);
}

/* NumPy reads what the writer emits (only when python3 has numpy). */
static void numpy_reads_writer_output(void **state)
{
    /* the first python3 with numpy: the one on PATH, or Debian's (python3-numpy) */
    const char *pythons[] = {"python3", "/usr/bin/python3"}, *py = NULL;
    for (size_t i = 0; i < 2 && !py; i++) {
        char probe[128];
        snprintf(probe, sizeof probe, "%s -c 'import numpy' >/dev/null 2>&1", pythons[i]);
        if (system(probe) == 0)
            py = pythons[i];
    }
    if (!py) {
        print_message("numpy_reads_writer_output: skipped, no python3 with numpy "
                      "(apt-get install python3-numpy)\n");
        skip();
    }
    double x[6] = {0.5, -1.25, 3.0, 1e-300, -7.0e12, 0.1};
    size_t shape[2] = {2, 3};
    char p64[512], p32[512], cmd[2048];
    snprintf(p64, sizeof p64, "%s/np64.npy", tmpdir);
    snprintf(p32, sizeof p32, "%s/np32.npy", tmpdir);
    assert_int_equal(kdalab_npy_write(p64, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_OK);
    assert_int_equal(kdalab_npy_write(p32, KDALAB_DTYPE_F32, x, 2, shape), KDALAB_OK);
    snprintf(cmd, sizeof cmd,
             "%s -c \"import numpy as np, sys; x = np.array([0.5, -1.25, 3.0, 1e-300, "
             "-7.0e12, 0.1]).reshape(2, 3); a = np.load('%s'); b = np.load('%s'); "
             "sys.exit(0 if a.dtype == np.float64 and b.dtype == np.float32 and "
             "(a == x).all() and (b == x.astype(np.float32)).all() else 1)\"",
             py, p64, p32);
    assert_int_equal(system(cmd), 0);
    unlink(p64);
    unlink(p32);
}

/* ------------------------------------------------------------------------- */

static int setup(void **state)
{
    return test_tmpdir_make("kdalab_npy_", tmpdir, sizeof tmpdir);
}

static int teardown(void **state) { return test_tmpdir_remove(tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(versions_1_2_3),
        cmocka_unit_test(long_headers),
        cmocka_unit_test(shapes),
        cmocka_unit_test(key_order_and_spacing),
        cmocka_unit_test(dtypes_read),
        cmocka_unit_test(half_and_integer_dtypes_read),
        cmocka_unit_test(dtypes_rejected),
        cmocka_unit_test(fortran_order),
        cmocka_unit_test(bad_magic_and_version),
        cmocka_unit_test(every_truncation),
        cmocka_unit_test(header_length_past_end),
        cmocka_unit_test(four_gib_header),
        cmocka_unit_test(big_file_not_npy),
        cmocka_unit_test(element_count_overflow),
        cmocka_unit_test(data_shorter_than_shape),
        cmocka_unit_test(malformed_headers),
        cmocka_unit_test(null_arguments),
        cmocka_unit_test(read_files),
        cmocka_unit_test(write_read_back),
        cmocka_unit_test(write_matches_numpy_golden),
        cmocka_unit_test(write_failures_leave_nothing),
        cmocka_unit_test(numpy_reads_writer_output),
    };
    return cmocka_run_group_tests_name("npy", tests, setup, teardown);
}
