/*
 * tests/sweep_runs.c — what the suites that run a training experiment share
 * (sweep_runs.h).
 */
#define _GNU_SOURCE /* memrchr, realpath */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "sweep_runs.h"

/* table with the last column of every data line dropped (comments kept). */
static char *without_times(const char *table)
{
    char *out = malloc(strlen(table) + 1), *o = out;
    assert_non_null(out);
    for (const char *line = table; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *tab = line[0] == '#' ? NULL : memrchr(line, '\t', len);
        const size_t keep = tab ? (size_t)(tab - line) : len;
        memcpy(o, line, keep);
        o += keep;
        *o++ = '\n';
        line += len + (nl != NULL);
    }
    *o = '\0';
    return out;
}

void sweep_assert_same_but_times(const char *a, const char *b)
{
    char *x = without_times(a), *y = without_times(b);
    assert_string_equal(x, y);
    free(x);
    free(y);
}

int sweep_setup(const char *suite, const char *experiment, char *exe, size_t exe_cap,
                const char *prefix, char *tmpdir, size_t tmp_cap)
{
    const char *bin = getenv("KDALAB_BIN");
    char rel[PATH_MAX], abs[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/%s", bin && *bin ? bin : "bin", experiment);
    if (!realpath(rel, abs) || strlen(abs) >= exe_cap) {
        fprintf(stderr, "%s: %s not found: run `make` (or set KDALAB_BIN)\n", suite, rel);
        return -1;
    }
    strcpy(exe, abs);
    return test_tmpdir_make(prefix, tmpdir, tmp_cap);
}

void sweep_run_tiny(const char *exe, const char *tmpdir, const char *env)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "env -u KDALAB_FULL -u KDALAB_RESUME -u KDALAB_TRAIN_MISSING %s %s --out %s --steps 2 --test 4 "
             ">%s/stdout 2>%s/stderr", env, exe, tmpdir, tmpdir, tmpdir);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: failed (status %d); see %s/stderr", cmd, st, tmpdir);
}

const char *sweep_added_line(const char *before, const char *after)
{
    const size_t n = strlen(before);
    assert_int_equal(strncmp(after, before, n), 0);
    const char *added = after + n;
    assert_true(*added && strchr(added, '\n') == added + strlen(added) - 1);
    return added;
}

char *sweep_path(const char *tmpdir, const char *file)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", tmpdir, file);
    return p[i];
}

int sweep_run_status(const char *exe, const char *tmpdir, const char *dir, const char *env,
                     const char *flags)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "env -u KDALAB_FULL -u KDALAB_RESUME -u KDALAB_TRAIN_MISSING %s timeout -s KILL 60 "
             "%s --out %s %s >%s/stdout 2>%s/stderr",
             env, exe, dir, flags, tmpdir, tmpdir);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st) == 137 ? -1 : WEXITSTATUS(st);
}

size_t sweep_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}
