/*
 * tests/sweep_tables.c — comparing the tables of two runs of a training sweep
 * (sweep_tables.h).
 */
#define _GNU_SOURCE /* memrchr */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sweep_tables.h"

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
