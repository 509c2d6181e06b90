/*
 * lib/call/abi.c — the sizes of the public structs that a binding lays out
 * itself (kdalab_call.h: kdalab_struct_size), so that a binding built for
 * other headers is refused when it loads the library, not run.
 *
 * defines: kdalab_struct_size
 */
#include <string.h>

#include "internal.h"

size_t kdalab_struct_size(const char *name)
{
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {
        {"kdalab_dims", sizeof(kdalab_dims)},
        {"kdalab_chunk_opts", sizeof(kdalab_chunk_opts)},
        {"kdalab_call", sizeof(kdalab_call)},
        {"kdalab_tensors_f64", sizeof(kdalab_tensors_f64)},
        {"kdalab_tensors_f32", sizeof(kdalab_tensors_f32)},
        {"kdalab_mechanism_info", sizeof(kdalab_mechanism_info)},
    };
    if (!name)
        return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(name, sizes[i].name) == 0)
            return sizes[i].size;
    return 0;
}
