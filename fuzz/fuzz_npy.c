/*
 * fuzz_npy.c — libFuzzer target for the .npy reader.
 *
 * Feeds arbitrary bytes to kdalab_npy_parse and checks, beyond "no crash, no
 * out-of-bounds access" (AddressSanitizer and UBSan are on in `make fuzz`),
 * the reader's contract from lib/kdalab.h:
 *   - on success: 0 <= ndim <= 4, size is the product of the shape, data is
 *     non-NULL exactly when size > 0, and the data takes no more bytes than
 *     the input (every element read from the file: 4 or 8 bytes each), and
 *     the detail message is empty;
 *   - on failure: the status is one the reader documents, *out is zeroed,
 *     and kdalab_last_error() says why.
 * A violated property aborts, which libFuzzer reports as a finding.
 *
 * The input is copied into a buffer of exactly its length so ASan catches a
 * read of even one byte past the end.
 *
 * Build and run: `make fuzz` (FUZZ_SECONDS, default 60); seeds in fuzz/corpus/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kdalab.h"

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (copy == NULL)
        return 0;
    if (size)
        memcpy(copy, data, size);

    kdalab_array a;
    memset(&a, 0xa5, sizeof a); /* garbage in: the reader must overwrite it */
    kdalab_status s = kdalab_npy_parse(copy, size, &a);

    if (s == KDALAB_OK) {
        check(a.ndim >= 0 && a.ndim <= KDALAB_NPY_MAX_DIMS);
        size_t n = 1;
        for (int i = 0; i < a.ndim; i++)
            n *= a.shape[i]; /* cannot overflow: the reader checked */
        check(n == a.size);
        check((a.size > 0) == (a.data != NULL));
        /* every dtype the reader returns, and no more elements than bytes allow */
        size_t itemsize = a.dtype == KDALAB_DTYPE_F64 || a.dtype == KDALAB_DTYPE_I64 ? 8
                          : a.dtype == KDALAB_DTYPE_F32 || a.dtype == KDALAB_DTYPE_I32 ? 4
                          : a.dtype == KDALAB_DTYPE_F16                                ? 2
                                                                                       : 0;
        check(itemsize != 0);
        check(a.size <= size / itemsize);
        check(strlen(a.descr) == 3 && (a.descr[0] == '<' || a.descr[0] == '>'));
        check(kdalab_last_error()[0] == '\0');
        /* touch every element so ASan sees any short allocation */
        volatile double sink = 0;
        for (size_t i = 0; i < a.size; i++)
            sink += a.data[i];
        (void)sink;
        kdalab_array_free(&a);
        check(a.data == NULL && a.size == 0);
    } else {
        check(s == KDALAB_EFORMAT || s == KDALAB_EDTYPE || s == KDALAB_EOVERFLOW ||
              s == KDALAB_ENOMEM);
        check(a.ndim == 0 && a.size == 0 && a.data == NULL);
        check(kdalab_last_error()[0] != '\0');
    }
    free(copy);
    return 0;
}
