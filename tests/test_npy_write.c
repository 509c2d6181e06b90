/*
 * tests/test_npy_write.c — the .npy writer (lib/io/npy_write.c): what it writes
 * reads back bit for bit, matches NumPy's own files byte for byte, is read
 * by NumPy, and a failed write leaves nothing behind (files under a mkdtemp
 * directory).
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

/* Every writer output reads back identically: ndim 0..5, both dtypes, empty
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
        size_t shape[5];
    } cases[] = {{0, {0}},       {1, {64}},        {2, {8, 8}},      {3, {2, 4, 8}},
                 {4, {2, 2, 2, 8}}, {1, {0}},      {2, {0, 3}},      {4, {1, 0, 5, 7}},
                 {2, {1, 1}},    {5, {2, 1, 2, 2, 8}}, {5, {1, 3, 0, 2, 2}}};
    char path[512];
    snprintf(path, sizeof path, "%s/rt.npy", npyt_tmpdir);
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
    assert_int_equal(tcli_count_entries(npyt_tmpdir, "rt.npy.tmp"), 0);
    unlink(path);
}

/* The writer reproduces NumPy's own files byte for byte (the golden vectors
 * were written by NumPy, format 1.0, '<f8'). */
static void write_matches_numpy_golden(void **state)
{
    static const char *files[] = {"kda_small.q.npy", "kda_small.beta.npy", "kda_small.h0.npy",
                                  "gated_deltanet_small.g.npy"};
    char out[512];
    snprintf(out, sizeof out, "%s/copy.npy", npyt_tmpdir);
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
    size_t shape[6] = {2, 2, 1, 1, 1, 1};
    char path[512];
    snprintf(path, sizeof path, "%s/nodir/x.npy", npyt_tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_EIO);
    assert_non_null(strstr(kdalab_last_error(), "x.npy"));

    snprintf(path, sizeof path, "%s/w.npy", npyt_tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 6, shape), KDALAB_EINVAL);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, -1, shape), KDALAB_EINVAL);
    assert_int_equal(kdalab_npy_write(path, (kdalab_dtype)7, x, 2, shape), KDALAB_EINVAL);
    size_t huge[2] = {SIZE_MAX, 3};
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, huge), KDALAB_EOVERFLOW);
    size_t big_bytes[1] = {SIZE_MAX / 4};
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 1, big_bytes),
                     KDALAB_EOVERFLOW);
    assert_int_equal(access(path, F_OK), -1);

    /* the rename fails (the target is a directory): no temp file left over */
    snprintf(path, sizeof path, "%s/isdir.npy", npyt_tmpdir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_EIO);
    assert_int_equal(tcli_count_entries(npyt_tmpdir, "isdir.npy"), 1);
    rmdir(path);

    /* overwriting an existing file replaces it whole */
    snprintf(path, sizeof path, "%s/over.npy", npyt_tmpdir);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 2, shape), KDALAB_OK);
    assert_int_equal(kdalab_npy_write(path, KDALAB_DTYPE_F32, x, 1, shape), KDALAB_OK);
    kdalab_array a;
    assert_int_equal(kdalab_npy_read(path, &a), KDALAB_OK);
    assert_int_equal(a.ndim, 1);
    assert_int_equal(a.size, 2);
    assert_int_equal(a.dtype, KDALAB_DTYPE_F32);
    kdalab_array_free(&a);
    assert_int_equal(tcli_count_entries(npyt_tmpdir, "over.npy"), 1);
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
    snprintf(p64, sizeof p64, "%s/np64.npy", npyt_tmpdir);
    snprintf(p32, sizeof p32, "%s/np32.npy", npyt_tmpdir);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(write_read_back),
        cmocka_unit_test(write_matches_numpy_golden),
        cmocka_unit_test(write_failures_leave_nothing),
        cmocka_unit_test(numpy_reads_writer_output),
    };
    return cmocka_run_group_tests_name("npy_write", tests, npyt_setup, npyt_teardown);
}
