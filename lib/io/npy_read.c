/*
 * lib/io/npy_read.c — read NumPy .npy files, the interchange format of the field.
 *
 * defines: kdalab_npy_parse, kdalab_npy_read, kdalab_array_free, kdalab_dtype_name
 * (the header is parsed in lib/io/npy_header.c; the writer is lib/io/npy_write.c)
 *
 * The format (NumPy Enhancement Proposal 1, "A simple file format for NumPy
 * arrays", and numpy/lib/format.py's documentation of versions 2.0 and 3.0):
 *
 *   bytes 0..5   magic "\x93NUMPY"
 *   byte  6, 7   major, minor version: 1.0, 2.0 or 3.0
 *   then         header length HLEN, little-endian: 2 bytes (1.0) or 4 bytes (2.0, 3.0)
 *   then         HLEN bytes of header: a Python dict literal
 *                  {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
 *                padded with spaces and ended by '\n' (latin-1 in 1.0/2.0, UTF-8 in 3.0)
 *   then         the raw elements, C order (last index fastest) unless
 *                fortran_order is True (first index fastest)
 *
 * kdalab reads '<f8', '>f8', '<f4', '>f4', '<f2', '>f2', '<i8', '>i8', '<i4',
 * '>i4' in either order and always returns float64 in C order; it writes
 * '<f8' or '<f4', C order, version 1.0 (2.0 only if the header would not fit
 * in 65535 bytes).
 *
 * The reader treats every file as hostile: every length is checked against
 * the bytes actually present before it is used, every product of sizes is
 * checked for overflow, and nothing is allocated before the bytes it stands
 * for are known to exist (so a tiny file that declares a 4 GiB header or a
 * 2^60-element shape is an error, not an allocation).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fdopen, mkstemp, fchmod, fsync */
#endif
#include "kdalab.h"
#include "internal.h"
#include "npy_header.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Small functions                                                           */
/* ------------------------------------------------------------------------- */

/* Clear the thread's error detail after a successful call. */
static kdalab_status npy_ok(void)
{
    kdalab_clear_error();
    return KDALAB_OK;
}

/* IEEE binary16 bits as a double (exact: every half is a double). */
static double half_to_double(uint16_t u)
{
    int sign = u >> 15, exp = (u >> 10) & 0x1f, man = u & 0x3ff;
    double x;
    if (exp == 0)
        x = ldexp(man, -24); /* zero or subnormal */
    else if (exp == 31)
        x = man ? NAN : INFINITY;
    else
        x = ldexp(man | 0x400, exp - 25);
    return sign ? -x : x;
}

/* One element at index i of raw data, converted to double (integers beyond
 * 2^53 round to the nearest double). */
static double load_element(const unsigned char *src, size_t i, const npy_header *h)
{
    const unsigned char *b = src + i * h->itemsize;
    uint64_t u = 0;
    for (size_t j = 0; j < h->itemsize; j++) { /* most significant byte first */
        size_t byte = h->big_endian ? j : h->itemsize - 1 - j;
        u = (u << 8) | b[byte];
    }
    switch (h->dtype) {
    case KDALAB_DTYPE_F64: {
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    case KDALAB_DTYPE_F32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, sizeof f);
        return (double)f;
    }
    case KDALAB_DTYPE_F16:
        return half_to_double((uint16_t)u);
    case KDALAB_DTYPE_I64:
        return (double)(int64_t)u;
    case KDALAB_DTYPE_I32:
    default:
        return (double)(int32_t)(uint32_t)u;
    }
}

/* Whether this machine stores numbers least significant byte first, as the
 * '<' of a .npy descr does. */
static int host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Whether the data h describes are in C order and in this machine's byte
 * order, so that their elements can be copied as they are. */
static int native_layout(const npy_header *h)
{
    return !h->big_endian && host_little_endian() && (!h->fortran || h->ndim < 2);
}

/* Whether they are also float64: their bytes are the decoded array itself. */
static int native_f64(const npy_header *h)
{
    return h->dtype == KDALAB_DTYPE_F64 && native_layout(h);
}

/* out: the array h describes, holding data (taken over). */
static kdalab_status set_out(const npy_header *h, double *data, kdalab_array *out)
{
    out->ndim = h->ndim;
    for (int i = 0; i < h->ndim; i++)
        out->shape[i] = h->shape[i];
    out->size = h->size;
    out->dtype = h->dtype;
    memcpy(out->descr, h->descr, sizeof out->descr);
    out->data = data;
    return npy_ok();
}

/* The raw data src (as the header describes it) into out, converted to
 * float64 in C order. Native float64 (native_f64) and little-endian float32
 * in C order on a little-endian machine (what NumPy writes there) are a
 * copy and a widening loop; everything else goes element by element through
 * load_element. */
static kdalab_status decode_data(const unsigned char *src, const npy_header *h, const char *name,
                                 kdalab_array *out)
{
    double *data = NULL;
    if (h->size > 0) {
        data = malloc(h->size * sizeof *data); /* the product was checked */
        if (data == NULL)
            return kdalab_fail(KDALAB_ENOMEM, "%s: out of memory for %zu elements", name,
                               h->size);
        if (native_f64(h)) {
            memcpy(data, src, h->size * sizeof *data);
        } else if (h->dtype == KDALAB_DTYPE_F32 && native_layout(h)) {
            for (size_t i = 0; i < h->size; i++) {
                float f;
                memcpy(&f, src + i * sizeof f, sizeof f);
                data[i] = f;
            }
        } else if (!h->fortran || h->ndim < 2) {
            for (size_t i = 0; i < h->size; i++)
                data[i] = load_element(src, i, h);
        } else {
            /* Fortran order: element (i0,..,in-1) sits at i0 + d0*(i1 + d1*(...)).
             * Walk the C-order index with an odometer (last index fastest). */
            size_t fstride[KDALAB_NPY_MAX_DIMS], idx[KDALAB_NPY_MAX_DIMS] = {0};
            fstride[0] = 1;
            for (int d = 1; d < h->ndim; d++)
                fstride[d] = fstride[d - 1] * h->shape[d - 1]; /* <= size: no overflow */
            size_t foff = 0;
            for (size_t i = 0; i < h->size; i++) {
                data[i] = load_element(src, foff, h);
                for (int d = h->ndim - 1; d >= 0; d--) {
                    if (++idx[d] < h->shape[d]) {
                        foff += fstride[d];
                        break;
                    }
                    foff -= (idx[d] - 1) * fstride[d];
                    idx[d] = 0;
                }
            }
        }
    }
    return set_out(h, data, out);
}

/* Does a part of `need` bytes fit in the `have` bytes the file still holds?
 * ("header length" points past the end; "data" is truncated.) */
static kdalab_status check_fits(const char *name, const char *part, size_t need, size_t have)
{
    if (need <= have)
        return KDALAB_OK;
    if (strcmp(part, "data") == 0)
        return kdalab_fail(KDALAB_EFORMAT,
                           "%s: .npy data truncated: the shape needs %zu bytes, the file has %zu",
                           name, need, have);
    return kdalab_fail(KDALAB_EFORMAT,
                       "%s: .npy header length %zu points past the end of the file (%zu bytes "
                       "follow the preamble)",
                       name, need, have);
}

/* The whole image buf[0..len) whose name (for messages) is name. */
static kdalab_status npy_parse_named(const unsigned char *buf, size_t len, const char *name,
                                     kdalab_array *out)
{
    size_t prefix, hlen, nbytes;
    npy_header h;
    kdalab_status s = kdalab__npy_parse_preamble(buf, len, name, &prefix, &hlen);
    if (s != KDALAB_OK)
        return s;
    if ((s = check_fits(name, "header length", hlen, len - prefix)) != KDALAB_OK)
        return s;
    if ((s = kdalab__npy_parse_header(buf + prefix, hlen, name, &h, &nbytes)) != KDALAB_OK)
        return s;
    if ((s = check_fits(name, "data", nbytes, len - prefix - hlen)) != KDALAB_OK)
        return s;
    return decode_data(buf + prefix + hlen, &h, name, out);
}

/* ------------------------------------------------------------------------- */
/* Public reader                                                             */
/* ------------------------------------------------------------------------- */

kdalab_status kdalab_npy_parse(const void *buf, size_t len, kdalab_array *out)
{
    kdalab_clear_error();
    if (out == NULL)
        return kdalab_fail(KDALAB_ENULL, "kdalab_npy_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (buf == NULL)
        return kdalab_fail(KDALAB_ENULL, "kdalab_npy_parse: buf is NULL");
    kdalab_status s = npy_parse_named(buf, len, "<buffer>", out);
    if (s != KDALAB_OK)
        memset(out, 0, sizeof *out);
    return s;
}

/* Read exactly n bytes into buf, or fail naming what was being read. */
static kdalab_status read_exact(FILE *f, void *buf, size_t n, const char *path,
                                const char *what)
{
    size_t got = n ? fread(buf, 1, n, f) : 0;
    if (got != n)
        return kdalab_fail(ferror(f) ? KDALAB_EIO : KDALAB_EFORMAT, "%s: read %zu of the %zu "
                                                                    "bytes of its %s",
                           path, got, n, what);
    return KDALAB_OK;
}

/*
 * A .npy file of len bytes, header first: the preamble (12 bytes at most),
 * then the header it declares, checked against the file's size before it is
 * read, then only the data bytes the header declares — never a size taken
 * on trust, never more than the file holds.
 */
static kdalab_status read_file(FILE *f, size_t len, const char *path, kdalab_array *out)
{
    unsigned char pre[12];
    size_t npre = len < sizeof pre ? len : sizeof pre, prefix, hlen, nbytes;
    kdalab_status s = read_exact(f, pre, npre, path, "preamble");
    if (s == KDALAB_OK)
        s = kdalab__npy_parse_preamble(pre, npre, path, &prefix, &hlen);
    if (s != KDALAB_OK)
        return s;
    if ((s = check_fits(path, "header length", hlen, len - prefix)) != KDALAB_OK)
        return s;
    unsigned char *hdr = malloc(hlen + 1);
    if (hdr == NULL)
        return kdalab_fail(KDALAB_ENOMEM, "%s: out of memory for its header", path);
    /* the part of the header already read with the preamble, then the rest */
    size_t have = npre - prefix;
    memcpy(hdr, pre + prefix, have < hlen ? have : hlen);
    if (have < hlen)
        s = read_exact(f, hdr + have, hlen - have, path, "header");
    npy_header h;
    if (s == KDALAB_OK)
        s = kdalab__npy_parse_header(hdr, hlen, path, &h, &nbytes);
    free(hdr);
    if (s != KDALAB_OK)
        return s;
    if ((s = check_fits(path, "data", nbytes, len - prefix - hlen)) != KDALAB_OK)
        return s;
    unsigned char *data = malloc(nbytes ? nbytes : 1);
    if (data == NULL)
        return kdalab_fail(KDALAB_ENOMEM, "%s: out of memory for %zu bytes", path, nbytes);
    /* bytes of data that came in with the preamble (a header shorter than 2 bytes) */
    size_t early = have > hlen ? have - hlen : 0;
    early = early < nbytes ? early : nbytes;
    memcpy(data, pre + prefix + hlen, early);
    s = read_exact(f, data + early, nbytes - early, path, "data");
    if (s == KDALAB_OK && native_f64(&h) && h.size > 0) {
        s = set_out(&h, (double *)(void *)data, out); /* the bytes read are the array */
        data = NULL;
    } else if (s == KDALAB_OK) {
        s = decode_data(data, &h, path, out);
    }
    free(data);
    return s;
}

kdalab_status kdalab_npy_read(const char *path, kdalab_array *out)
{
    kdalab_clear_error();
    if (out == NULL)
        return kdalab_fail(KDALAB_ENULL, "kdalab_npy_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (path == NULL)
        return kdalab_fail(KDALAB_ENULL, "kdalab_npy_read: path is NULL");

    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
     * below as not a regular file (regular files ignore the flag) */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return kdalab_fail(KDALAB_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kdalab_fail(KDALAB_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kdalab_fail(KDALAB_EIO, "%s: not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        int e = errno;
        close(fd);
        return kdalab_fail(KDALAB_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size > (uintmax_t)SIZE_MAX) {
        fclose(f);
        return kdalab_fail(KDALAB_EOVERFLOW, "%s: file too large for this machine", path);
    }
    kdalab_status s = read_file(f, (size_t)st.st_size, path, out);
    fclose(f);
    if (s != KDALAB_OK)
        memset(out, 0, sizeof *out);
    return s;
}

void kdalab_array_free(kdalab_array *a)
{
    if (a == NULL)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

const char *kdalab_dtype_name(kdalab_dtype dtype)
{
    static const char *const names[] = {"float64", "float32", "float16", "int64", "int32"};
    return (unsigned)dtype <= KDALAB_DTYPE_I32 ? names[dtype] : "unknown";
}
