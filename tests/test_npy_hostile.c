/*
 * tests/test_npy_hostile.c — the .npy reader (lib/io/npy_read.c) on hostile input:
 * rejected dtypes, bad magic and version, every truncation, header lengths
 * past the end or of 4 GiB, a big file that is not .npy, element counts that
 * overflow, data shorter than the shape, malformed headers — each one error
 * naming the problem, read within a bounded allocation.
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
#include "npy_images.h"
#include "kdalab.h"

/* ------------------------------------------------------------------------- */
/* Building images                                                           */
/* ------------------------------------------------------------------------- */

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
    unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
    expect_fail(b, len, want, needle);
    free(b);
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

static void bad_magic_and_version(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }";
    size_t len;
    unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
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
    npyt_expect_ok(b, len, 1, (const size_t[]){6}, npyt_six);
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
        unsigned char *b = npyt_image(major, dict, 0, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
        for (size_t cut = 0; cut < len; cut++) {
            /* a copy of exactly cut bytes, so ASan catches any over-read */
            unsigned char *t = malloc(cut ? cut : 1);
            assert_non_null(t);
            memcpy(t, b, cut);
            expect_fail(t, cut, KDALAB_EFORMAT, NULL);
            free(t);
        }
        npyt_expect_ok(b, len, 2, (const size_t[]){2, 3}, npyt_six);
        free(b);
    }
}

static void header_length_past_end(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }";
    size_t len;
    unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
    b[8] = 0xff;
    b[9] = 0xff; /* 65535 bytes of header in a 176-byte file */
    expect_fail(b, len, KDALAB_EFORMAT, "past the end");
    free(b);
    b = npyt_image(2, dict, 116, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
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
#if TEST_UNDER_ASAN
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
    const char *path = npyt_put_file("huge_header.npy", tiny, sizeof tiny);
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
    const char *path = npyt_put_file("zeros.npy", "", 0);
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
    unsigned char *b = npyt_image(
        1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 18446744073709551615), }", 118,
        NULL, 0, &len);
    npyt_expect_ok(b, len, 2, (const size_t[]){0, SIZE_MAX}, NULL);
    free(b);
}

static void data_shorter_than_shape(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    for (size_t dlen = 0; dlen < 48; dlen += 7) {
        size_t len;
        unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(npyt_six, 6, 0), dlen, &len);
        expect_fail(b, len, KDALAB_EFORMAT, "truncated");
        free(b);
    }
    /* extra trailing bytes are ignored, as NumPy does */
    size_t len;
    double seven[7] = {0.5, -1.25, 3.0, 1e-300, -7.0e12, 0.1, 99.0};
    unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(seven, 7, 0), 56, &len);
    npyt_expect_ok(b, len, 2, (const size_t[]){2, 3}, npyt_six);
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
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2, 3)}", /* 6-D     */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtypes_rejected),
        cmocka_unit_test(bad_magic_and_version),
        cmocka_unit_test(every_truncation),
        cmocka_unit_test(header_length_past_end),
        cmocka_unit_test(four_gib_header),
        cmocka_unit_test(big_file_not_npy),
        cmocka_unit_test(element_count_overflow),
        cmocka_unit_test(data_shorter_than_shape),
        cmocka_unit_test(malformed_headers),
    };
    return cmocka_run_group_tests_name("npy_hostile", tests, npyt_setup, npyt_teardown);
}
