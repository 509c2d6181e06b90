/*
 * lib/io/npy_header.c — the header side of the .npy reader: the preamble
 * (magic, version, header length) and the header's Python dict literal
 * (descr, fortran_order, shape), each length and product checked; the
 * format is described in lib/io/npy_read.c, which reads the data.
 *
 * defines: kdalab__npy_parse_preamble, kdalab__npy_parse_header
 * (lib/io/npy_header.h)
 */
#include "kdalab.h"
#include "internal.h"
#include "npy_header.h"

#include <stdint.h>
#include <string.h>

static const unsigned char NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

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

/*
 * The preamble of an image whose first len (>= 0) bytes are in buf: magic,
 * version, header length. Sets *prefix (10 or 12 bytes) and *hlen. Needs at
 * most 12 bytes.
 */
kdalab_status kdalab__npy_parse_preamble(const unsigned char *buf, size_t len, const char *name,
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
kdalab_status kdalab__npy_parse_header(const unsigned char *hdr, size_t hlen, const char *name,
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
