/*
 * lib/io/npy_write.c — write NumPy .npy files (format 1.0, or 2.0 when the
 * header needs it; '<f8' or '<f4'; C order), atomically: a temporary file in
 * the same directory, renamed over the path only once it is complete, so a
 * failed write never leaves a half-written file and never loses an existing one.
 * The format is described at the top of lib/io/npy_read.c.
 *
 * defines: kdalab_npy_write
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fdopen, mkstemp, fchmod, fsync */
#endif
#include "kdalab.h"
#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>


static const unsigned char NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ------------------------------------------------------------------------- */
/* Writer                                                                    */
/* ------------------------------------------------------------------------- */

/* Little-endian bytes of one element, whatever the host's byte order. */
static void store_element(unsigned char *dst, double x, kdalab_dtype dtype)
{
    if (dtype == KDALAB_DTYPE_F64) {
        uint64_t u;
        memcpy(&u, &x, sizeof u);
        for (int j = 0; j < 8; j++)
            dst[j] = (unsigned char)(u >> (8 * j));
    } else {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        for (int j = 0; j < 4; j++)
            dst[j] = (unsigned char)(u >> (8 * j));
    }
}

/* Build the preamble + header, padded with spaces and '\n' to a multiple of
 * 64 bytes as NumPy does. Returns its length (0 on failure). */
static size_t build_header(char *out, size_t cap, kdalab_dtype dtype, int ndim,
                           const size_t *shape)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     dtype == KDALAB_DTYPE_F64 ? "<f8" : "<f4");
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, i == 0 ? "%zu" : ", %zu", shape[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    size_t dlen = (size_t)n;

    /* version 1.0 if the header length fits in 2 bytes, else 2.0 */
    size_t prefix = 10;
    size_t total = (prefix + dlen + 1 + 63) / 64 * 64;
    if (total - prefix > 65535) {
        prefix = 12;
        total = (prefix + dlen + 1 + 63) / 64 * 64;
    }
    if (total > cap)
        return 0;
    size_t hlen = total - prefix;
    memcpy(out, NPY_MAGIC, sizeof NPY_MAGIC);
    out[6] = prefix == 10 ? 1 : 2;
    out[7] = 0;
    for (size_t j = 0; j < prefix - 8; j++)
        out[8 + j] = (char)(unsigned char)(hlen >> (8 * j));
    memcpy(out + prefix, dict, dlen);
    memset(out + prefix + dlen, ' ', hlen - dlen - 1);
    out[total - 1] = '\n';
    return total;
}

kdalab_status kdalab_npy_write(const char *path, kdalab_dtype dtype, const double *data,
                               int ndim, const size_t *shape)
{
    kdalab_clear_error();
    if (path == NULL)
        return kdalab_fail(KDALAB_ENULL, "kdalab_npy_write: path is NULL");
    if (ndim < 0 || ndim > KDALAB_NPY_MAX_DIMS)
        return kdalab_fail(KDALAB_EINVAL, "%s: cannot write %d dimensions (0..%d)", path, ndim,
                           KDALAB_NPY_MAX_DIMS);
    if (dtype != KDALAB_DTYPE_F64 && dtype != KDALAB_DTYPE_F32)
        return kdalab_fail(KDALAB_EINVAL, "%s: unknown dtype %d", path, (int)dtype);
    if (ndim > 0 && shape == NULL)
        return kdalab_fail(KDALAB_ENULL, "%s: shape is NULL for %d dimensions", path, ndim);
    size_t size = 1, itemsize = dtype == KDALAB_DTYPE_F64 ? 8 : 4, nbytes;
    for (int i = 0; i < ndim; i++)
        if (!kdalab_mul_size(size, shape[i], &size))
            return kdalab_fail(KDALAB_EOVERFLOW, "%s: element count overflows size_t", path);
    if (!kdalab_mul_size(size, itemsize, &nbytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "%s: byte count overflows size_t", path);
    if (size > 0 && data == NULL)
        return kdalab_fail(KDALAB_ENULL, "%s: data is NULL for %zu elements", path, size);

    /* Never replace a device, FIFO, directory or symbolic link: the rename
     * below would swap it for a regular file (run as root, --o /dev/null
     * would destroy /dev/null). */
    struct stat existing;
    if (lstat(path, &existing) == 0 && !S_ISREG(existing.st_mode))
        return kdalab_fail(KDALAB_EIO,
                           "%s: exists and is not a regular file; refusing to replace it",
                           path);

    char header[512];
    size_t hbytes = build_header(header, sizeof header, dtype, ndim, shape);
    if (hbytes == 0) /* cannot happen for <= 5 dims of size_t */
        return kdalab_fail(KDALAB_EINVAL, "%s: header too long", path);

    /* A temporary name in the same directory (so rename is atomic). */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".tmp.XXXXXX");
    if (tmp == NULL)
        return kdalab_fail(KDALAB_ENOMEM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return kdalab_fail(KDALAB_EIO, "%s: cannot create a temporary file: %s", path,
                           strerror(e));
    }
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a data file is world-readable */
    FILE *f = fdopen(fd, "wb");
    if (f == NULL) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return kdalab_fail(KDALAB_EIO, "%s: %s", path, strerror(e));
    }

    int ok = fwrite(header, 1, hbytes, f) == hbytes;
    unsigned char block[8 * 1024];
    size_t per_block = sizeof block / itemsize;
    for (size_t i = 0; ok && i < size; i += per_block) {
        size_t n = size - i < per_block ? size - i : per_block;
        for (size_t j = 0; j < n; j++)
            store_element(block + j * itemsize, data[i + j], dtype);
        ok = fwrite(block, itemsize, n, f) == n;
    }
    int e = ok ? 0 : errno;
    if (ok && fflush(f) != 0) {
        ok = 0;
        e = errno;
    }
    if (ok && fsync(fileno(f)) != 0 && errno != EINVAL) {
        ok = 0;
        e = errno;
    }
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return kdalab_fail(KDALAB_EIO, "%s: write failed: %s", path,
                           e ? strerror(e) : "short write");
    }
    free(tmp);
    kdalab_clear_error();
    return KDALAB_OK;
}
