/*
 * lib/io/npy_header.h — the .npy preamble and header dict, parsed
 * (lib/io/npy_header.c), for the reader lib/io/npy_read.c. Internal: not
 * part of kdalab's API.
 */
#ifndef KDALAB_NPY_HEADER_H
#define KDALAB_NPY_HEADER_H
#include <stddef.h>
#include "kdalab.h"

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

/* The preamble of an image whose first len (>= 0) bytes are in buf: magic,
 * version, header length. Sets *prefix (10 or 12 bytes) and *hlen. Needs at
 * most 12 bytes. Errors: KDALAB_EFORMAT, name in the message. */
kdalab_status kdalab__npy_parse_preamble(const unsigned char *buf, size_t len, const char *name,
                                         size_t *prefix, size_t *hlen);

/* The header dict text [hdr, hdr + hlen) into *h, with the element and byte
 * counts: *nbytes of data follow the header. Errors: KDALAB_EFORMAT,
 * KDALAB_EDTYPE, KDALAB_EOVERFLOW. */
kdalab_status kdalab__npy_parse_header(const unsigned char *hdr, size_t hlen, const char *name,
                                       npy_header *h, size_t *nbytes);

#endif /* KDALAB_NPY_HEADER_H */
