/*
 * kdalab_npy.h — NumPy .npy files: reader and atomic writer (lib/io/npy_read.c, lib/io/npy_write.c).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_NPY_H
#define KDALAB_NPY_H

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* NumPy .npy files                                                          */
/* ------------------------------------------------------------------------- */

/* up to 5: the state entering each chunk, h [B, NT, H, K, V], is the widest */
#define KDALAB_NPY_MAX_DIMS 5

/* The dtypes kdalab reads (little- or big-endian: '<f8' '>f8', '<f4' '>f4', '<f2'
 * '>f2', '<i8' '>i8', '<i4' '>i4') and writes ('<f8', '<f4'). Half precision
 * is read exactly; integers (for cu_seqlens) are exact up to 2^53. */
typedef enum {
    KDALAB_DTYPE_F64 = 0,
    KDALAB_DTYPE_F32,
    KDALAB_DTYPE_F16,
    KDALAB_DTYPE_I64,
    KDALAB_DTYPE_I32
} kdalab_dtype;

/* "float64", "float32", "float16", "int64", "int32". */
const char *kdalab_dtype_name(kdalab_dtype dtype);

/* An array read from a .npy file, always converted to float64, C order. */
typedef struct {
    int ndim;                          /* 0..5; 0 is a scalar, size 1           */
    size_t shape[KDALAB_NPY_MAX_DIMS]; /* shape[0..ndim-1]                       */
    size_t size;                       /* product of the shape (may be 0)        */
    kdalab_dtype dtype;                /* the dtype stored in the file           */
    char descr[4];                     /* its descr as written there, "<f2"     */
    double *data;                      /* size elements (malloc'd; NULL if 0)    */
} kdalab_array;

/*
 * Parse a .npy image held in memory (format 1.0, 2.0 or 3.0; a dtype of
 * kdalab_dtype; C order, or Fortran order which is transposed to C order; up
 * to 5 dimensions). Every length is checked against len before it is read.
 *
 * Errors: KDALAB_ENULL, KDALAB_EFORMAT (bad magic, truncated, malformed
 * header or shape, data shorter than the shape), KDALAB_EDTYPE (any other
 * dtype), KDALAB_EOVERFLOW (element count or byte count overflows),
 * KDALAB_ENOMEM. On error *out is zeroed (nothing to free). kdalab_last_error()
 * has the detail.
 */
kdalab_status kdalab_npy_parse(const void *buf, size_t len, kdalab_array *out);

/* Read a .npy file (as kdalab_npy_parse, plus KDALAB_EIO). The header is read
 * and checked first; then only the bytes it declares are read (a file that
 * is not .npy costs a few bytes, whatever its size). */
kdalab_status kdalab_npy_read(const char *path, kdalab_array *out);

/*
 * Write a .npy file, format 1.0 (2.0 if the header needs it), C order, dtype
 * '<f8' or '<f4' (data is converted from float64). Written to a temporary
 * name in the same directory and renamed, so no half-written file is ever
 * left at path. ndim 0..5, shape may be NULL when ndim == 0.
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (ndim), KDALAB_EOVERFLOW, KDALAB_EIO.
 */
kdalab_status kdalab_npy_write(const char *path, kdalab_dtype dtype, const double *data,
                               int ndim, const size_t *shape);

/* Free the data of an array read above and zero it. NULL is allowed. */
void kdalab_array_free(kdalab_array *a);

KDALAB_END_DECLS

#endif /* KDALAB_NPY_H */
