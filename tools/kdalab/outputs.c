/*
 * tools/kdalab/outputs.c — writing several .npy outputs all or nothing:
 * every output is written whole to a temporary file beside its path first,
 * and only when all of them are written are they moved over their paths —
 * the existing files set aside first and put back if any move fails. A
 * failure on any output leaves every existing file as it was.
 *
 * defines: cli_write_all (declared in cli.h)
 */
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
    /* Set every existing output aside first (a rename the system refuses, say
     * another user's file in a sticky directory, fails here, before anything
     * is replaced), then move the new files in; on any failure, put the old
     * ones back. */
    static char old[16][PATH_MAX];
    int moved[16] = {0}, placed[16] = {0};
    struct stat st;
    for (size_t i = 0; i < n && rc == 0; i++) {
        snprintf(old[i], PATH_MAX, "%s.kdalab-old-%ld", out[i].path, (long)getpid());
        if (lstat(out[i].path, &st) != 0)
            continue; /* nothing there to keep */
        if (rename(out[i].path, old[i]) != 0)
            rc = cli_fail(EXIT_FAIL, "%s %s: cannot replace the existing file (nothing was "
                                     "written)",
                          out[i].flag, out[i].path);
        else
            moved[i] = 1;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (rename(tmp[i], out[i].path) != 0)
            rc = cli_fail(EXIT_FAIL, "%s %s: cannot rename the finished file into place "
                                     "(nothing was written)",
                          out[i].flag, out[i].path);
        else
            placed[i] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (rc && placed[i])
            unlink(out[i].path); /* the new file out, the old one back below */
        if (!placed[i])
            unlink(tmp[i]);
        if (moved[i] && (rc ? rename(old[i], out[i].path) : unlink(old[i])) != 0 && rc)
            fprintf(stderr, "%s: %s: the previous file is kept as %s\n", cli_who, out[i].flag,
                    old[i]);
    }
    return rc;
}
