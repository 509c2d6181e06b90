/*
 * tools/kdalab/outputs.c — writing several .npy outputs all or nothing:
 * every output is written whole to a temporary file beside its path first,
 * and only when all of them are written are they renamed over their paths.
 * A failure on any output leaves every existing file as it was.
 *
 * defines: cli_write_all (declared in cli.h)
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

int cli_write_all(size_t n, const cli_output *out)
{
    char tmp[16][PATH_MAX];
    size_t written = 0;
    int rc = 0;
    if (n > 16)
        return cli_fail(EXIT_BAD, "at most 16 outputs at once");
    for (size_t i = 0; i < n && rc == 0; i++) {
        int len = snprintf(tmp[i], PATH_MAX, "%s.kdalab-partial-%ld", out[i].path,
                           (long)getpid());
        if (len < 0 || len >= PATH_MAX) {
            rc = cli_fail(EXIT_FAIL, "%s %s: the path is too long for its temporary file",
                          out[i].flag, out[i].path);
            break;
        }
        if (kdalab_npy_write(tmp[i], KDALAB_DTYPE_F64, out[i].data, out[i].ndim,
                             out[i].shape) != KDALAB_OK) {
            rc = cli_fail(EXIT_FAIL, "%s: %s", out[i].flag, kdalab_last_error());
            break;
        }
        written = i + 1;
    }
    if (rc) { /* nothing was replaced: drop what was written */
        for (size_t i = 0; i < written; i++)
            unlink(tmp[i]);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        if (rename(tmp[i], out[i].path) != 0) {
            rc = cli_fail(EXIT_FAIL, "%s %s: cannot rename the finished file into place",
                          out[i].flag, out[i].path);
            for (size_t j = i; j < n; j++)
                unlink(tmp[j]);
            break;
        }
    return rc;
}
