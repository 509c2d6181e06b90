/*
 * lib/io/npy_read.c — read NumPy .npy files, the interchange format of the field.
 *
 * defines: kdalab_npy_parse, kdalab_npy_read, kdalab_array_free, kdalab_dtype_name
 * (the writer is lib/io/npy_write.c)
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

static const unsigned char NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Clear the thread's error detail after a successful call. */
static kdalab_status npy_ok(void)
{
    kdalab_clear_error();
    return KDALAB_OK;
}

/* What the header of a .npy image says. */
typedef struct {
    int ndim;
    size_t shape[KDALAB_NPY_MAX_DIMS];
    size_t size;       /* product of the shape                   */
    size_t itemsize;   /* 8 or 4                                 */
    int big_endian;    /* '>' byte order                         */
    int fortran;       /* fortran_order: True                    */
    kdalab_dtype dtype;
    char descr[4];     /* as in the file, "<f2"                  */
} npy_header;

/* A cursor over the header text [p, end). */
typedef struct {
    const char *p;
    const char *end;
    const char *name; /* file name or "<buffer>", for messages */
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consume the character ch (after optional whitespace); 1 if it was there. */
static int accept(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Consume the identifier word (True, False) if it is next. */
static int accept_word(cursor *c, const char *word)
{
    size_t n = strlen(word);
    skip_ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    /* "Falsey" is not False */
    if ((size_t)(c->end - c->p) > n) {
        char next = c->p[n];
        if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
            (next >= '0' && next <= '9') || next == '_')
            return 0;
    }
    c->p += n;
    return 1;
}

/* A Python string literal in single or double quotes, no escapes, copied to
 * out (NUL-terminated, at most cap-1 characters). */
static kdalab_status parse_string(cursor *c, char *out, size_t cap, const char *what)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: expected a quoted %s", c->name,
                           what);
    char quote = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != quote) {
        if (*c->p == '\\')
            return kdalab_fail(KDALAB_EFORMAT,
                               "%s: .npy header: escape sequence in %s not supported", c->name,
                               what);
        if (n + 1 >= cap)
            return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: %s longer than %zu characters",
                               c->name, what, cap - 1);
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: unterminated %s", c->name, what);
    c->p++; /* closing quote */
    out[n] = '\0';
    return KDALAB_OK;
}

/* One dimension: decimal digits (an old Python 2 'L' suffix is allowed). */
static kdalab_status parse_dim(cursor *c, size_t *out)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == '-')
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: negative dimension in shape",
                           c->name);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: expected a dimension in shape",
                           c->name);
    size_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        size_t digit = (size_t)(*c->p - '0');
        if (v > (SIZE_MAX - digit) / 10)
            return kdalab_fail(KDALAB_EOVERFLOW,
                               "%s: .npy header: a dimension of the shape overflows size_t",
                               c->name);
        v = v * 10 + digit;
        c->p++;
    }
    if (c->p < c->end && *c->p == 'L')
        c->p++;
    *out = v;
    return KDALAB_OK;
}

/* A shape tuple: (), (5,), (2, 3), (2,3,), ... Python's (5) is an int, not a
 * tuple, and NumPy rejects it; so do we. */
static kdalab_status parse_shape(cursor *c, npy_header *h)
{
    if (!accept(c, '('))
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: shape is not a tuple", c->name);
    h->ndim = 0;
    if (accept(c, ')'))
        return KDALAB_OK;
    for (;;) {
        size_t d = 0;
        kdalab_status s = parse_dim(c, &d);
        if (s != KDALAB_OK)
            return s;
        if (h->ndim == KDALAB_NPY_MAX_DIMS)
            return kdalab_fail(KDALAB_EFORMAT,
                               "%s: .npy shape has more than %d dimensions (kdalab reads up to %d)",
                               c->name, KDALAB_NPY_MAX_DIMS, KDALAB_NPY_MAX_DIMS);
        h->shape[h->ndim++] = d;
        if (accept(c, ')')) {
            if (h->ndim == 1)
                return kdalab_fail(KDALAB_EFORMAT,
                                   "%s: .npy header: shape (%zu) is not a tuple (expected (%zu,))",
                                   c->name, d, d);
            return KDALAB_OK;
        }
        if (!accept(c, ','))
            return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: expected ',' or ')' in shape",
                               c->name);
        if (accept(c, ')'))
            return KDALAB_OK;
    }
}

/* The dtypes read: descr, kind, bytes per element. */
static const struct {
    const char *descr;
    kdalab_dtype dtype;
    size_t itemsize;
} DTYPES[] = {
    {"<f8", KDALAB_DTYPE_F64, 8}, {">f8", KDALAB_DTYPE_F64, 8}, {"<f4", KDALAB_DTYPE_F32, 4},
    {">f4", KDALAB_DTYPE_F32, 4}, {"<f2", KDALAB_DTYPE_F16, 2}, {">f2", KDALAB_DTYPE_F16, 2},
    {"<i8", KDALAB_DTYPE_I64, 8}, {">i8", KDALAB_DTYPE_I64, 8}, {"<i4", KDALAB_DTYPE_I32, 4},
    {">i4", KDALAB_DTYPE_I32, 4},
};
#define SUPPORTED "<f8, >f8, <f4, >f4, <f2, >f2, <i8, >i8, <i4, >i4"

/* The descr value: one of DTYPES. */
static kdalab_status parse_descr(cursor *c, npy_header *h)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == '[')
        return kdalab_fail(KDALAB_EDTYPE, "%s: structured dtype is not supported (only " SUPPORTED
                                          ")",
                           c->name);
    char descr[32];
    kdalab_status s = parse_string(c, descr, sizeof descr, "descr");
    if (s != KDALAB_OK)
        return s;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(descr, DTYPES[i].descr) == 0) {
            h->dtype = DTYPES[i].dtype;
            memcpy(h->descr, DTYPES[i].descr, 4);
            h->itemsize = DTYPES[i].itemsize;
            h->big_endian = descr[0] == '>';
            return KDALAB_OK;
        }
    return kdalab_fail(KDALAB_EDTYPE, "%s: dtype '%s' is not supported (only " SUPPORTED ")",
                       c->name, descr);
}

/* The header dict: exactly the keys descr, fortran_order and shape, in any
 * order, each once, optional trailing comma, then only whitespace. */
static kdalab_status parse_dict(cursor *c, npy_header *h)
{
    int have_descr = 0, have_order = 0, have_shape = 0;
    kdalab_status s;

    if (!accept(c, '{'))
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header is not a dict (no '{')", c->name);
    while (!accept(c, '}')) {
        char key[32];
        s = parse_string(c, key, sizeof key, "key");
        if (s != KDALAB_OK)
            return s;
        if (!accept(c, ':'))
            return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: expected ':' after '%s'",
                               c->name, key);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            s = parse_descr(c, h);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (accept_word(c, "True"))
                h->fortran = 1;
            else if (accept_word(c, "False"))
                h->fortran = 0;
            else
                s = kdalab_fail(KDALAB_EFORMAT,
                                "%s: .npy header: fortran_order is neither True nor False",
                                c->name);
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            s = parse_shape(c, h);
            have_shape = 1;
        } else if (strcmp(key, "descr") == 0 || strcmp(key, "fortran_order") == 0 ||
                   strcmp(key, "shape") == 0) {
            s = kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: key '%s' appears twice", c->name,
                            key);
        } else {
            s = kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: unexpected key '%s'", c->name,
                            key);
        }
        if (s != KDALAB_OK)
            return s;
        if (accept(c, ','))
            continue;
        if (accept(c, '}'))
            break;
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: expected ',' or '}'", c->name);
    }
    skip_ws(c);
    if (c->p != c->end)
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header: unexpected text after the dict",
                           c->name);
    if (!have_descr || !have_order || !have_shape)
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy header lacks the key '%s'", c->name,
                           !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
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

/*
 * The preamble of an image whose first len (>= 0) bytes are in buf: magic,
 * version, header length. Sets *prefix (10 or 12 bytes) and *hlen. Needs at
 * most 12 bytes.
 */
static kdalab_status parse_preamble(const unsigned char *buf, size_t len, const char *name,
                                    size_t *prefix, size_t *hlen)
{
    size_t head = len < sizeof NPY_MAGIC ? len : sizeof NPY_MAGIC;
    if (memcmp(buf, NPY_MAGIC, head) != 0)
        return kdalab_fail(KDALAB_EFORMAT, "%s: not a .npy file (wrong magic string)", name);
    if (len < 8)
        return kdalab_fail(KDALAB_EFORMAT,
                           "%s: .npy file truncated inside its preamble (%zu bytes)", name, len);
    int major = buf[6], minor = buf[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return kdalab_fail(KDALAB_EFORMAT,
                           "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0)", name,
                           major, minor);
    *prefix = major == 1 ? 10 : 12;
    if (len < *prefix)
        return kdalab_fail(KDALAB_EFORMAT, "%s: .npy file truncated inside its preamble", name);
    *hlen = major == 1 ? (size_t)buf[8] | (size_t)buf[9] << 8
                       : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
                             (size_t)buf[11] << 24;
    return KDALAB_OK;
}

/* The header dict text [hdr, hdr + hlen) into *h, with the element and byte
 * counts: *nbytes of data follow the header. */
static kdalab_status parse_header(const unsigned char *hdr, size_t hlen, const char *name,
                                  npy_header *h, size_t *nbytes)
{
    memset(h, 0, sizeof *h);
    cursor c = {(const char *)hdr, (const char *)hdr + hlen, name};
    kdalab_status s = parse_dict(&c, h);
    if (s != KDALAB_OK)
        return s;
    h->size = 1;
    for (int i = 0; i < h->ndim; i++)
        if (!kdalab_mul_size(h->size, h->shape[i], &h->size))
            return kdalab_fail(KDALAB_EOVERFLOW,
                               "%s: the element count of the .npy shape overflows size_t", name);
    size_t outbytes;
    if (!kdalab_mul_size(h->size, h->itemsize, nbytes) ||
        !kdalab_mul_size(h->size, sizeof(double), &outbytes))
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "%s: the byte count of the .npy data overflows size_t", name);
    return KDALAB_OK;
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

/* Whether the data h describes are float64 in C order as this machine
 * stores them: their bytes are the decoded array itself. */
static int native_f64(const npy_header *h)
{
    return h->dtype == KDALAB_DTYPE_F64 && !h->big_endian && host_little_endian() &&
           (!h->fortran || h->ndim < 2);
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
        } else if ((!h->fortran || h->ndim < 2) && !h->big_endian && host_little_endian() &&
                   h->dtype == KDALAB_DTYPE_F32) {
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
    kdalab_status s = parse_preamble(buf, len, name, &prefix, &hlen);
    if (s != KDALAB_OK)
        return s;
    if ((s = check_fits(name, "header length", hlen, len - prefix)) != KDALAB_OK)
        return s;
    if ((s = parse_header(buf + prefix, hlen, name, &h, &nbytes)) != KDALAB_OK)
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
        s = parse_preamble(pre, npre, path, &prefix, &hlen);
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
        s = parse_header(hdr, hlen, path, &h, &nbytes);
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
