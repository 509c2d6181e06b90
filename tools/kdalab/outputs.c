/*
 * tools/kdalab/outputs.c — writing several .npy outputs all or nothing:
 * every output is written whole to a fresh temporary file beside its path
 * (replace_make_temp: a name that did not exist, so never one of the call's
 * inputs), and only when all of them are written is each swapped with its
 * path in one step (replace_swap); if a swap fails, those done are swapped
 * back. The previous files, left under the temporary names by the swaps,
 * are removed last. Interrupts are held from the first temporary file to
 * the last removal (replace_hold_signals), so an output path always holds
 * its old file or its new one, and no temporary file is left behind.
 *
 * defines: cli_write_all (declared in cli.h)
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

int cli_write_all(size_t n, const cli_output *out)
{
    char tmp[16][PATH_MAX];
    int made[16] = {0}, swapped[16] = {0}, had[16] = {0};
    int rc = 0;
    if (n > 16)
        return cli_fail(EXIT_BAD, "at most 16 outputs at once");
    replace_held saved;
    replace_hold_signals(&saved);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (replace_make_temp(out[i].path, "kdalab-partial", 0, tmp[i], PATH_MAX) != 0) {
            rc = cli_fail(EXIT_FAIL, "%s %s: cannot create a temporary file beside it: %s "
                                     "(nothing was written)",
                          out[i].flag, out[i].path, strerror(errno));
            break;
        }
        made[i] = 1;
        if (kdalab_npy_write(tmp[i], KDALAB_DTYPE_F64, out[i].data, out[i].ndim,
                             out[i].shape) != KDALAB_OK)
            rc = cli_fail(EXIT_FAIL, "%s: %s (nothing was written)", out[i].flag,
                          kdalab_last_error());
    }
    replace_test_point("write");
    struct stat st;
    for (size_t i = 0; i < n && rc == 0; i++) {
        had[i] = lstat(out[i].path, &st) == 0;
        if (replace_swap(tmp[i], out[i].path) != 0) {
            rc = cli_fail(EXIT_FAIL, "%s %s: cannot put the finished file in place: %s "
                                     "(nothing was written)",
                          out[i].flag, out[i].path, strerror(errno));
            break;
        }
        swapped[i] = 1;
        made[i] = had[i]; /* tmp[i] now holds the previous file, or is gone */
        replace_test_point("swap");
    }
    for (size_t i = 0; rc != 0 && i < n; i++) { /* undo: every previous file back */
        if (!swapped[i])
            continue;
        if (had[i] ? replace_swap(tmp[i], out[i].path) != 0 : unlink(out[i].path) != 0) {
            fprintf(stderr, "%s: %s: the previous file is kept as %s\n", cli_who, out[i].flag,
                    tmp[i]);
            made[i] = 0;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (made[i])
            unlink(tmp[i]);
    replace_test_point("remove");
    replace_release_signals(&saved);
    return rc;
}
