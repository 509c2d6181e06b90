/*
 * experiments/lists.c — the comma-separated lists the experiments' flags
 * take: numbers (--lrs, --decays) and names from a fixed set (--tasks). See
 * common.h for the contract of each function.
 */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t lab_parse_list(const char *s, double *out, size_t max)
{
    size_t n = 0;
    const char *p = s;
    if (!s || !*s) return 0;
    while (*p) {
        char *end = NULL;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || n == max) return 0;
        out[n++] = v;
        p = end;
        if (*p == ',' && p[1] != '\0') p++;
        else if (*p) return 0;
    }
    return n;
}

/* "a, b, c": the choices, for a refusal's message */
static void print_choices(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", names[i]);
}

void lab_parse_names(const lab_ctx *x, const char *flag, const char *list,
                     const char *const *names, size_t n, int *use)
{
    int any = 0;
    for (size_t i = 0; i < n; i++)
        use[i] = 0;
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        if (len) {
            size_t i = 0;
            while (i < n && !(strlen(names[i]) == len && strncmp(p, names[i], len) == 0))
                i++;
            if (i == n) {
                fprintf(stderr, "%s: --%s %s: '%.*s' is not one of ", x->name, flag, list,
                        (int)len, p);
                print_choices(names, n);
                fprintf(stderr, "\n");
                exit(2);
            }
            use[i] = any = 1;
        }
        p += len + (p[len] == ',');
    }
    if (!any) {
        fprintf(stderr, "%s: --%s '%s': names no %s (", x->name, flag, list,
                strcmp(flag, "tasks") == 0 ? "task" : "choice");
        print_choices(names, n);
        fprintf(stderr, ")\n");
        exit(2);
    }
}
