/*
 * tests/npy_images.h — the .npy suites' shared pieces (tests/npy_images.c).
 */
#ifndef KDALAB_TESTS_NPY_IMAGES_H
#define KDALAB_TESTS_NPY_IMAGES_H

#include <stddef.h>

/* The suite's scratch directory (its setup makes it) and six test values
 * spanning signs and magnitudes (1e-300 to 7e12). */
extern char npyt_tmpdir[256];
extern const double npyt_six[6];

/* A .npy image: magic, version major.0, header length (2 bytes for 1.0, 4
 * otherwise), the dict padded with spaces to pad bytes (then '\n') when pad is
 * larger than the dict, then dlen bytes of data. Caller frees. */
unsigned char *npyt_image(int major, const char *dict, size_t pad, const void *data,
                          size_t dlen, size_t *len);
/* n float64 / float32 values as little- or big-endian bytes (a static
 * buffer of 4096 bytes, overwritten by the next call). */
const unsigned char *npyt_f8_bytes(const double *x, size_t n, int big);
const unsigned char *npyt_f4_bytes(const double *x, size_t n, int big);
/* Parse and expect success with the given shape and values (bitwise). */
void npyt_expect_ok(const unsigned char *b, size_t len, int ndim, const size_t *shape,
                    const double *want);
/* A .npy suite's cmocka group setup and teardown: make npyt_tmpdir, remove it. */
int npyt_setup(void **state);
int npyt_teardown(void **state);

/* Write an image to npyt_tmpdir/name; returns the path (static buffer). */
const char *npyt_put_file(const char *name, const void *b, size_t len);

#endif
