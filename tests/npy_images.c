/*
 * tests/npy_images.c — what the .npy suites (test_npy_read, test_npy_hostile,
 * test_npy_write) share: in-memory .npy images built byte by byte, values as
 * little- or big-endian bytes, the check of a successful parse, files in the
 * suite's scratch directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "npy_images.h"

char npyt_tmpdir[256];
const double npyt_six[6] = {0.5, -1.25, 3.0, 1e-300, -7.0e12, 0.1};

/* the bytes npyt_f8_bytes / npyt_f4_bytes return */
static unsigned char bytes_buf[4096];

/* A .npy image: magic, version major.0, header length (2 bytes for 1.0, 4
 * otherwise), the dict padded with spaces to pad bytes (then '\n') when pad is
 * larger than the dict, then dlen bytes of data. Caller frees. */
unsigned char *npyt_image(int major, const char *dict, size_t pad, const void *data,
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

const unsigned char *npyt_f8_bytes(const double *x, size_t n, int big)
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

const unsigned char *npyt_f4_bytes(const double *x, size_t n, int big)
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

/* a holds ndim dimensions of shape and the values vals (bitwise); freed. */
static void expect_array(kdalab_array *a, int ndim, const size_t *shape, const double *vals)
{
    assert_int_equal(a->ndim, ndim);
    size_t size = 1;
    for (int i = 0; i < ndim; i++) {
        assert_int_equal(a->shape[i], shape[i]);
        size *= shape[i];
    }
    assert_int_equal(a->size, size);
    if (size == 0)
        assert_null(a->data);
    else
        assert_memory_equal(a->data, vals, size * sizeof(double));
    kdalab_array_free(a);
    assert_null(a->data);
    assert_int_equal(a->size, 0);
}

/* Parse and expect success with the given shape and values (bitwise); then
 * the same for the image read from a file (kdalab_npy_read reads native
 * float64 in place, everything else through the parser's decoding). */
void npyt_expect_ok(const unsigned char *b, size_t len, int ndim, const size_t *shape,
                    const double *vals)
{
    kdalab_array a;
    kdalab_status s = kdalab_npy_parse(b, len, &a);
    if (s != KDALAB_OK)
        fail_msg("parse failed: %s (%s)", kdalab_strerror(s), kdalab_last_error());
    assert_string_equal(kdalab_last_error(), "");
    expect_array(&a, ndim, shape, vals);
    s = kdalab_npy_read(npyt_put_file("expect_ok.npy", b, len), &a);
    if (s != KDALAB_OK)
        fail_msg("read failed: %s (%s)", kdalab_strerror(s), kdalab_last_error());
    expect_array(&a, ndim, shape, vals);
}

/* Write an image to npyt_tmpdir/name; returns the path (static buffer). */
const char *npyt_put_file(const char *name, const void *b, size_t len)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", npyt_tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

int npyt_setup(void **state)
{
    (void)state;
    return test_tmpdir_make("kdalab_npy_", npyt_tmpdir, sizeof npyt_tmpdir);
}

int npyt_teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(npyt_tmpdir);
}
