/*
 * tools/kdalab/cli.c — the part of bin/kdalab every subcommand shares: the
 * one-line error, flag parsing (getopt_long with our own messages), number
 * parsing, reading and checking .npy inputs, and output-path checks.
 *
 * defines: cli_who, cli_fail, cli_exit_for, cli_shape_str, cli_index_str,
 *          cli_begin, cli_next, cli_store, cli_parse_size, cli_parse_double,
 *          cli_parse_scale, cli_input_to_f32,
 *          cli_read_input, cli_check_values, cli_shape_is, cli_shape_mismatch,
 *          cli_check_output_path, cli_same_output (declared in cli.h)
 *
 * The rules an input's values obey are the library's (kdalab_check_values_f64);
 * this file only adds the flag, the file and the element's multi-index to
 * the library's verdict.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Errors                                                                    */
/* ------------------------------------------------------------------------- */

const char *cli_who = "kdalab";

int cli_fail(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line, whatever the message held */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "%s: %s\n", cli_who, msg);
    return code;
}

int cli_exit_for(kdalab_status s)
{
    return (s == KDALAB_ENOMEM || s == KDALAB_ERANGE) ? EXIT_FAIL : EXIT_BAD;
}

/* "(a, b, c)" from n sizes; "(a,)" for one. */
static const char *tuple_str(const size_t *x, int n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ", %zu" : "%zu", x[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, n == 1 ? ",)" : ")");
    return buf;
}

const char *cli_shape_str(const kdalab_array *a, char *buf, size_t cap)
{
    return tuple_str(a->shape, a->ndim, buf, cap);
}

const char *cli_index_str(const kdalab_array *a, size_t i, char *buf, size_t cap)
{
    size_t idx[KDALAB_NPY_MAX_DIMS] = {0};
    for (int d = a->ndim - 1; d >= 0; d--) {
        idx[d] = a->shape[d] ? i % a->shape[d] : 0;
        i = a->shape[d] ? i / a->shape[d] : 0;
    }
    return tuple_str(idx, a->ndim, buf, cap);
}

/* ------------------------------------------------------------------------- */
/* Flags                                                                     */
/* ------------------------------------------------------------------------- */

/*
 * getopt_long does the scanning; this layer words every error as one line
 * of ours (opterr = 0) and refuses abbreviations, which getopt_long would
 * otherwise accept ("--mech" for "--mechanism").
 *
 * "-" first in the option string returns positional arguments in order, as
 * CLI_ARG, instead of permuting argv (whatever POSIXLY_CORRECT says); ":"
 * next tells a missing value (':') from an unknown flag ('?'); "h" is -h.
 * Without permutation, the argument getopt_long is looking at when called is
 * argv[optind] (the flag itself when it takes its value from the next
 * argument), which is how the messages name it.
 */
static const char OPTSTRING[] = "-:h";

void cli_begin(cli_parser *p, int argc, char **argv, const struct option *opts)
{
    p->argc = argc - 1; /* getopt_long takes argv[0] as the program's name: */
    p->argv = argv + 1; /* here, the subcommand's                           */
    p->opts = opts;
    p->rest = -1;
    memset(p->seen, 0, sizeof p->seen);
    optind = 0; /* 0, not 1: a full restart of getopt_long's scan */
    opterr = 0; /* its messages are replaced by ours               */
}

/* The option whose val is val, or NULL. */
static const struct option *option_with_val(const struct option *opts, int val)
{
    for (; opts->name; opts++)
        if (opts->val == val)
            return opts;
    return NULL;
}

/* Is token exactly "--name" or "--name=..."? */
static int spelled(const char *token, const char *name)
{
    size_t n = strlen(name);
    return strncmp(token, "--", 2) == 0 && strncmp(token + 2, name, n) == 0 &&
           (token[2 + n] == '\0' || token[2 + n] == '=');
}

/* "unknown option '--bogus'" (any "=value" left out), "unknown option '-x'". */
static int unknown_option(const char *token)
{
    int len = (int)strlen(token);
    if (strncmp(token, "--", 2) == 0 && strchr(token, '='))
        len = (int)(strchr(token, '=') - token);
    cli_fail(EXIT_BAD, "unknown option '%.*s' (see --help)", len, token);
    return CLI_ERROR;
}

int cli_next(cli_parser *p, cli_arg *got)
{
    got->name = NULL;
    got->value = NULL;
    if (p->rest >= 0) { /* after "--": positionals only */
        if (p->rest >= p->argc)
            return CLI_END;
        got->value = p->argv[p->rest++];
        return CLI_ARG;
    }

    int at = optind > 0 ? optind : 1; /* the argument about to be read */
    int index = -1;
    int c = getopt_long(p->argc, p->argv, OPTSTRING, p->opts, &index);
    const char *token = at < p->argc ? p->argv[at] : "";

    if (c == -1) { /* the end, or "--" with positionals after it */
        p->rest = optind;
        return cli_next(p, got);
    }
    if (c == 1) {
        got->value = optarg;
        return CLI_ARG;
    }
    if (c == ':' || c == '?') {
        /* optopt is the val of a flag found but misused; 0 (long) or the
         * letter (short) for a flag that does not exist */
        const struct option *o = optopt ? option_with_val(p->opts, optopt) : NULL;
        if (o == NULL || strncmp(token, "--", 2) != 0 || !spelled(token, o->name))
            return unknown_option(token);
        if (c == ':' || (o->has_arg == required_argument && !strchr(token, '=')))
            cli_fail(EXIT_BAD, "--%s needs a value", o->name);
        else
            cli_fail(EXIT_BAD, "--%s takes no value", o->name);
        return CLI_ERROR;
    }
    if (index >= 0) { /* a long flag: in full, or it is not ours */
        if (!spelled(token, p->opts[index].name))
            return unknown_option(token);
        got->name = p->opts[index].name;
        if (index < CLI_MAX_OPTIONS && p->seen[index]++ && strcmp(got->name, "help") != 0) {
            cli_fail(EXIT_BAD, "--%s is given twice", got->name);
            return CLI_ERROR;
        }
    } else { /* -h */
        const struct option *o = option_with_val(p->opts, c);
        got->name = o ? o->name : "help";
    }
    got->value = optarg;
    return c;
}

int cli_store(const cli_arg *got, const char **slot)
{
    if (*slot != NULL)
        return cli_fail(EXIT_BAD, "--%s is given twice", got->name);
    if (got->value == NULL || *got->value == '\0')
        return cli_fail(EXIT_BAD, "--%s has an empty value", got->name);
    *slot = got->value;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Numbers                                                                   */
/* ------------------------------------------------------------------------- */

int cli_parse_size(const char *flagname, const char *s, size_t min, size_t *out)
{
    if (*s < '0' || *s > '9')
        return cli_fail(EXIT_BAD, "--%s: '%s' is not an integer >= %zu", flagname, s, min);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0' || v > SIZE_MAX || v < min)
        return cli_fail(EXIT_BAD, "--%s: '%s' is not an integer >= %zu", flagname, s, min);
    *out = (size_t)v;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return -1;
    /* ERANGE: overflow gives +-HUGE_VAL (inf), kept for the caller's rule to
     * refuse; underflow to a subnormal is a usable value; to 0 it is not */
    if (errno == ERANGE && v == 0)
        return -1;
    *out = v;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Inputs                                                                    */
/* ------------------------------------------------------------------------- */

int cli_read_input(cli_input *in)
{
    kdalab_status s = kdalab_npy_read(in->path, &in->a);
    if (s != KDALAB_OK)
        return cli_fail(cli_exit_for(s), "%s: %s", in->flag, kdalab_last_error());
    if (in->a.dtype == KDALAB_DTYPE_I64 || in->a.dtype == KDALAB_DTYPE_I32)
        return cli_fail(EXIT_BAD, "%s %s: dtype '%s' (%s): a tensor must be floating point "
                                  "(float64, float32 or float16)",
                        in->flag, in->path, in->a.descr, kdalab_dtype_name(in->a.dtype));
    return 0;
}

int cli_check_values(const cli_input *in, kdalab_value_rule rule, const char *name)
{
    const kdalab_array *a = &in->a;
    size_t bad = 0;
    kdalab_status s = kdalab_check_values_f64(rule, name, a->data, a->size, &bad);
    if (s == KDALAB_OK)
        return 0;
    char ib[96];
    if (s == KDALAB_ENONFINITE) {
        double x = a->data[bad];
        return cli_fail(EXIT_BAD, "%s %s: element %s is %s; inputs must be finite", in->flag,
                        in->path, cli_index_str(a, bad, ib, sizeof ib),
                        isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
    }
    if (s == KDALAB_EDOMAIN) /* the library's message states the rule broken */
        return cli_fail(EXIT_BAD, "%s %s: element %s: %s", in->flag, in->path,
                        cli_index_str(a, bad, ib, sizeof ib), kdalab_last_error());
    return cli_fail(cli_exit_for(s), "%s %s: %s", in->flag, in->path, kdalab_last_error());
}

int cli_shape_is(const kdalab_array *a, int nd, const size_t *want)
{
    if (a->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (a->shape[i] != want[i])
            return 0;
    return 1;
}

int cli_shape_mismatch(const cli_input *in, const char *layout, int nd, const size_t *want,
                       const cli_input *ref)
{
    char got[96], expected[96], refs[96];
    return cli_fail(EXIT_BAD, "%s %s: shape %s, expected %s = %s from %s %s shape %s", in->flag,
                    in->path, cli_shape_str(&in->a, got, sizeof got), layout,
                    tuple_str(want, nd, expected, sizeof expected), ref->flag, ref->path,
                    cli_shape_str(&ref->a, refs, sizeof refs));
}

/* ------------------------------------------------------------------------- */
/* Outputs                                                                   */
/* ------------------------------------------------------------------------- */

int cli_check_output_path(const char *which, const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int n = slash == NULL   ? snprintf(dir, sizeof dir, ".")
            : slash == path ? snprintf(dir, sizeof dir, "/")
                            : snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= sizeof dir)
        return cli_fail(EXIT_BAD, "%s: the directory part of the path is too long", which);
    struct stat st;
    if (stat(dir, &st) != 0)
        return cli_fail(EXIT_FAIL, "%s: directory '%s': %s", which, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cli_fail(EXIT_FAIL, "%s: '%s' is not a directory", which, dir);
    if (access(dir, W_OK) != 0)
        return cli_fail(EXIT_FAIL, "%s: directory '%s' is not writable", which, dir);
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return cli_fail(EXIT_FAIL, "%s: '%s' exists and is not a regular file", which,
                            path);
    } else if (errno != ENOENT) { /* ENAMETOOLONG, ELOOP, EACCES, ...: not writable */
        return cli_fail(EXIT_FAIL, "%s: cannot use this path: %s", which, strerror(errno));
    }
    return 0;
}

int cli_same_output(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    na = na ? na + 1 : a;
    nb = nb ? nb + 1 : b;
    if (strcmp(na, nb) != 0)
        return 0;
    char da[4096], db[4096];
    int la = snprintf(da, sizeof da, "%.*s", na == a ? 1 : (int)(na - a), na == a ? "." : a);
    int lb = snprintf(db, sizeof db, "%.*s", nb == b ? 1 : (int)(nb - b), nb == b ? "." : b);
    if (la < 0 || lb < 0 || (size_t)la >= sizeof da || (size_t)lb >= sizeof db)
        return strcmp(a, b) == 0; /* too long to resolve; cli_check_output_path refuses it */
    return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int cli_parse_scale(const char *s, double *out)
{
    if (cli_parse_double(s, out) != 0)
        return cli_fail(EXIT_BAD, "--scale: '%s' is not a finite number > 0", s);
    if (kdalab_check_scale(*out) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--scale %s: the scale must be finite and > 0", s);
    return 0;
}

int cli_input_to_f32(const cli_input *in, kdalab_value_rule rule, const char *name, float **out)
{
    *out = NULL;
    if (in->path == NULL || in->a.size == 0)
        return 0;
    float *f = malloc(in->a.size * sizeof *f);
    if (f == NULL)
        return cli_fail(EXIT_FAIL, "%s %s: out of memory", in->flag, in->path);
    *out = f;
    for (size_t j = 0; j < in->a.size; j++)
        f[j] = (float)in->a.data[j];
    size_t bad = 0;
    kdalab_status s = kdalab_check_values_f32(rule, name, f, in->a.size, &bad);
    if (s == KDALAB_OK)
        return 0;
    char ib[96];
    if (s == KDALAB_ENONFINITE)
        return cli_fail(EXIT_BAD, "%s %s: element %s = %g is beyond float32's range", in->flag,
                        in->path, cli_index_str(&in->a, bad, ib, sizeof ib), in->a.data[bad]);
    return cli_fail(cli_exit_for(s), "%s %s: in float32, %s", in->flag, in->path,
                    kdalab_last_error());
}
