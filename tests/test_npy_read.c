/*
 * tests/test_npy_read.c — the .npy reader (lib/io/npy_read.c) on well-formed
 * variants: versions, long headers, shapes, key order and spacing, every
 * dtype it reads, Fortran order, files; NULL arguments.
 *
 * In-memory images (tests/npy_images.c) go through kdalab_npy_parse; files
 * written under a mkdtemp directory through kdalab_npy_read. Values are
 * compared exactly (bitwise for float64): the reader only moves bytes, so
 * any difference at all is a bug.
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

static void versions_1_2_3(void **state)
{
    const size_t shape[2] = {2, 3};
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    for (int major = 1; major <= 3; major++) {
        size_t len;
        unsigned char *b = npyt_image(major, dict, major == 1 ? 118 : 116,
                                      npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
        npyt_expect_ok(b, len, 2, shape, npyt_six);
        free(b);
    }
}

static void long_headers(void **state)
{
    const size_t shape[1] = {6};
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }";
    size_t len;
    /* > 256 bytes in 1.0 (the 2-byte length's high byte in use) */
    unsigned char *b = npyt_image(1, dict, 1000, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
    npyt_expect_ok(b, len, 1, shape, npyt_six);
    free(b);
    /* > 65535 bytes: needs 2.0 */
    b = npyt_image(2, dict, 70000, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
    npyt_expect_ok(b, len, 1, shape, npyt_six);
    free(b);
    /* no padding at all, no trailing newline */
    b = npyt_image(1, dict, 0, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
    npyt_expect_ok(b, len, 1, shape, npyt_six);
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
        unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(npyt_six, n, 0), n * 8, &len);
        npyt_expect_ok(b, len, cases[i].ndim, cases[i].shape, npyt_six);
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
        unsigned char *b = npyt_image(1, dicts[i], 118, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
        npyt_expect_ok(b, len, 2, shape, npyt_six);
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
        const unsigned char *data = cases[i].f4 ? npyt_f4_bytes(v, 6, cases[i].big)
                                                : npyt_f8_bytes(v, 6, cases[i].big);
        size_t len;
        unsigned char *b = npyt_image(1, dict, 118, data, cases[i].f4 ? 24 : 48, &len);
        npyt_expect_ok(b, len, 2, shape, v);
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
            unsigned char *b = npyt_image(1, dict, 118, cases[c].data, cases[c].bytes, &len);
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
        unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(fvals, n, 0), n * 8, &len);
        npyt_expect_ok(b, len, nd, sh, cvals);
        free(b);
        /* and big-endian float32 in Fortran order, for good measure */
        snprintf(dict, sizeof dict, "{'descr': '>f4', 'fortran_order': True, 'shape': %s, }",
                 shape_text);
        b = npyt_image(1, dict, 118, npyt_f4_bytes(fvals, n, 1), n * 4, &len);
        npyt_expect_ok(b, len, nd, sh, cvals);
        free(b);
    }
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
    snprintf(path, sizeof path, "%s/null.npy", npyt_tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, NULL, 1, shape), KDALAB_ENULL);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, &x, 1, NULL), KDALAB_ENULL);
    assert_int_equal(access(path, F_OK), -1);
}

static void read_files(void **state)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    size_t len;
    unsigned char *b = npyt_image(1, dict, 118, npyt_f8_bytes(npyt_six, 6, 0), 48, &len);
    const char *path = npyt_put_file("good.npy", b, len);
    kdalab_array a;
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_OK);
    assert_int_equal(a.size, 6);
    assert_memory_equal(a.data, npyt_six, sizeof npyt_six);
    kdalab_array_free(&a);
    unlink(path);

    /* each failure names the file */
    path = npyt_put_file("short.npy", b, len - 1);
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "short.npy"));
    unlink(path);
    path = npyt_put_file("empty.npy", b, 0);
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "empty.npy"));
    unlink(path);
    b[9] = 0x10; /* header length 4096 + 118 */
    path = npyt_put_file("past_end.npy", b, len);
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_EFORMAT);
    assert_non_null(strstr(kdalab_last_error(), "past_end.npy"));
    unlink(path);
    free(b);

    char missing[512];
    snprintf(missing, sizeof missing, "%s/missing.npy", npyt_tmpdir);
    assert_int_equal(kdalab_npy_read(missing, &a), KDALAB_EIO);
    assert_non_null(strstr(kdalab_last_error(), "missing.npy"));
    assert_int_equal(kdalab_npy_read(npyt_tmpdir, &a), KDALAB_EIO); /* a directory */
    assert_null(a.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(versions_1_2_3),
        cmocka_unit_test(long_headers),
        cmocka_unit_test(shapes),
        cmocka_unit_test(key_order_and_spacing),
        cmocka_unit_test(dtypes_read),
        cmocka_unit_test(half_and_integer_dtypes_read),
        cmocka_unit_test(fortran_order),
        cmocka_unit_test(null_arguments),
        cmocka_unit_test(read_files),
    };
    return cmocka_run_group_tests_name("npy_read", tests, npyt_setup, npyt_teardown);
}
