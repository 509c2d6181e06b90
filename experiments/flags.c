/*
 * experiments/flags.c — the numbered experiments' command line: the flags
 * each registers, getopt_long parsing, --help, the checks of --out and of
 * each flag's rule. See common.h for the contract of each function.
 */
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void lab_init(lab_ctx *x, const char *name, const char *about)
{
    memset(x, 0, sizeof *x);
    x->name = name;
    x->about = about;
    x->out = "results";
    x->seed = 1;
    x->job = -1;
    x->t_start = lab_now();
    x->t_progress = x->t_start;
}

static void add_flag(lab_ctx *x, const char *name, lab_flag_type type, void *target,
                     const char *help)
{
    if (x->nflags == LAB_MAX_FLAGS) {
        fprintf(stderr, "%s: too many flags (LAB_MAX_FLAGS = %d)\n", x->name, LAB_MAX_FLAGS);
        exit(1);
    }
    x->flags[x->nflags++] = (lab_flag){name, type, target, help};
}

void lab_flag_size(lab_ctx *x, const char *name, size_t *target, const char *help)
{
    add_flag(x, name, LAB_FLAG_SIZE, target, help);
}
void lab_flag_int(lab_ctx *x, const char *name, long *target, const char *help)
{
    add_flag(x, name, LAB_FLAG_INT, target, help);
}
void lab_flag_double(lab_ctx *x, const char *name, double *target, const char *help)
{
    add_flag(x, name, LAB_FLAG_DOUBLE, target, help);
}
void lab_flag_string(lab_ctx *x, const char *name, const char **target, const char *help)
{
    add_flag(x, name, LAB_FLAG_STRING, target, help);
}

void lab_flag_jobs(lab_ctx *x)
{
    add_flag(x, "list-jobs", LAB_FLAG_SWITCH, &x->list_jobs,
             "print one command line per job of this sweep (one model each), run none");
    add_flag(x, "job", LAB_FLAG_INT, &x->job,
             "run job I of --list-jobs only (-1: the whole sweep)");
}

static void print_default(FILE *f, const lab_flag *fl)
{
    switch (fl->type) {
    case LAB_FLAG_SIZE: fprintf(f, "%zu", *(size_t *)fl->target); break;
    case LAB_FLAG_INT: fprintf(f, "%ld", *(long *)fl->target); break;
    case LAB_FLAG_DOUBLE: fprintf(f, "%g", *(double *)fl->target); break;
    case LAB_FLAG_STRING: {
        const char *s = *(const char **)fl->target;
        fprintf(f, "\"%s\"", s ? s : "");
        break;
    }
    case LAB_FLAG_SWITCH: fprintf(f, "%s", *(long *)fl->target ? "on" : "off"); break;
    }
}

static void usage(const lab_ctx *x, FILE *f)
{
    fprintf(f, "usage: %s [flags]\n%s\n\nflags (default in brackets):\n", x->name, x->about);
    fprintf(f, "  --%-14s %s [%s]\n", "out DIR", "directory for the TSV results", x->out);
    fprintf(f, "  --%-14s %s [%lu]\n", "seed N", "seed of the GSL random generator", x->seed);
    for (size_t i = 0; i < x->nflags; i++) {
        const lab_flag *fl = &x->flags[i];
        static const char *const meta[] = {"N", "INT", "X", "STR", ""};
        char lhs[64];
        snprintf(lhs, sizeof lhs, "%s %s", fl->name, meta[fl->type]);
        fprintf(f, "  --%-14s %s [", lhs, fl->help);
        print_default(f, fl);
        fprintf(f, "]\n");
    }
    fprintf(f, "  --%-14s %s\n", "help", "print this list and exit");
}

/* A bad command line: one line on stderr, "NAME: LEAD<fmt's text> (see
 * --help)", naming the problem; exit 2. */
static void vbad_usage(const lab_ctx *x, const char *lead, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: %s", x->name, lead);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see --help)\n");
    exit(2);
}

__attribute__((format(printf, 2, 3))) static void bad_usage(const lab_ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vbad_usage(x, "", fmt, ap);
}

/* A non-negative decimal integer into *v; returns 0 on success. Digits
 * only: strtoull alone would skip leading blanks and wrap " -5" around to
 * 2^64 - 5. */
static int parse_count(const char *s, unsigned long long max, unsigned long long *v)
{
    char *end = NULL;
    errno = 0;
    if (!isdigit((unsigned char)*s)) return -1;
    *v = strtoull(s, &end, 10);
    return errno || *end != '\0' || *v > max ? -1 : 0;
}

/* Parse one value into a flag's target; returns 0 on success. */
static int set_value(lab_flag *fl, const char *s)
{
    char *end = NULL;
    errno = 0;
    switch (fl->type) {
    case LAB_FLAG_SIZE: {
        unsigned long long v;
        if (parse_count(s, SIZE_MAX, &v) != 0) return -1;
        *(size_t *)fl->target = (size_t)v;
        return 0;
    }
    case LAB_FLAG_INT: {
        long v = strtol(s, &end, 10);
        if (errno || *s == '\0' || *end != '\0') return -1;
        *(long *)fl->target = v;
        return 0;
    }
    case LAB_FLAG_DOUBLE: {
        double v = strtod(s, &end);
        if (errno || *s == '\0' || *end != '\0' || !isfinite(v)) return -1;
        *(double *)fl->target = v;
        return 0;
    }
    case LAB_FLAG_STRING: *(const char **)fl->target = s; return 0;
    case LAB_FLAG_SWITCH: *(long *)fl->target = 1; return 0;
    }
    return -1;
}

/* What set_value accepts for each flag type, for the error message. */
static const char *const value_kind[] = {"a non-negative integer", "an integer",
                                         "a finite number", "a string", "no value"};

/* getopt_long also takes a unique prefix of a long name (--see for --seed).
 * The lab does not: a prefix that is unique today can change meaning when a
 * flag is added, and the command line recorded in each TSV should name the
 * flags in full. arg is the command-line word "--name" or "--name=VALUE". */
static int spelled_in_full(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, "--", 2) == 0 && strncmp(arg + 2, name, n) == 0 &&
           (arg[2 + n] == '\0' || arg[2 + n] == '=');
}

/* getopt_long return values: 'h' for --help / -h, then --out, --seed, and
 * OPT_FLAG + i for the registered flag x->flags[i]. */
enum { OPT_HELP = 'h', OPT_OUT = 256, OPT_SEED, OPT_FLAG };

/* Can a file be made in the directory dir? Made and removed at once, which
 * says no where access() would say yes to root and the file system still
 * refuses (/proc, a read-only mount), and no for a missing or closed
 * directory as access() would. NULL, or why not. */
static const char *probe_dir(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/.kdalab-probe-XXXXXX";
    char *path = malloc(n);
    if (!path)
        return "out of memory";
    snprintf(path, n, "%s/.kdalab-probe-XXXXXX", dir);
    int fd = mkstemp(path);
    const char *why = fd < 0 ? strerror(errno) : NULL;
    if (fd >= 0) {
        close(fd);
        if (unlink(path) != 0) /* an append-only directory: no result could be renamed in */
            why = strerror(errno);
    }
    free(path);
    return why;
}

/* --out can be used: an existing directory this process can make a file in,
 * or a new name in a directory it can make a file in (probe_dir; the new
 * directory itself is not tried, so that jobs of a sweep started together
 * on one new --out never remove a directory another has just made).
 * Checked while the flags are parsed, so a run that could not write its
 * results stops before it computes; made only when something is written
 * (lab_out_dir), so a run refused for a flag's value leaves no directory
 * behind. Exits (status 1) with one line otherwise. */
static void check_out(const lab_ctx *x)
{
    struct stat st;
    const char *why = NULL;
    if (stat(x->out, &st) == 0) {
        why = S_ISDIR(st.st_mode) ? probe_dir(x->out) : "it exists and is not a directory";
    } else if (errno == ENOENT && lstat(x->out, &st) == 0) {
        why = "a symbolic link to nothing";
    } else if (errno == ENOENT) {
        size_t n = strlen(x->out);
        char *parent = malloc(n + 2);
        if (!parent) {
            fprintf(stderr, "%s: out of memory\n", x->name);
            exit(1);
        }
        memcpy(parent, x->out, n + 1);
        while (n > 1 && parent[n - 1] == '/') /* "dir/" is "dir" */
            parent[--n] = '\0';
        char *slash = strrchr(parent, '/');
        if (!slash)
            strcpy(parent, ".");
        else if (slash == parent)
            parent[1] = '\0';
        else
            *slash = '\0';
        why = probe_dir(parent);
        free(parent);
    } else {
        why = strerror(errno);
    }
    if (why) {
        fprintf(stderr, "%s: --out %s: cannot write results there: %s\n", x->name, x->out, why);
        exit(1);
    }
}

void lab_parse(lab_ctx *x, int argc, char **argv)
{
    x->argc = argc;
    x->argv = argv;
    struct option opts[LAB_MAX_FLAGS + 4];
    size_t n = 0;
    opts[n++] = (struct option){"out", required_argument, NULL, OPT_OUT};
    opts[n++] = (struct option){"seed", required_argument, NULL, OPT_SEED};
    opts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    for (size_t i = 0; i < x->nflags; i++)
        opts[n++] = (struct option){x->flags[i].name,
                                    x->flags[i].type == LAB_FLAG_SWITCH ? no_argument
                                                                        : required_argument,
                                    NULL, OPT_FLAG + (int)i};
    opts[n] = (struct option){NULL, 0, NULL, 0};

    memset(x->given, 0, sizeof x->given);
    /* "+": stop at the first word that is not a flag (reported below) instead
     * of reordering argv; ":": report a missing value as ':', not '?'.
     * opterr = 0: the messages are ours, and name the experiment. */
    opterr = 0;
    optind = 1;
    for (;;) {
        int word = optind; /* the command-line word getopt_long reads next */
        int li = -1;
        int c = getopt_long(argc, argv, "+:h", opts, &li);
        if (c == -1) break;
        if (c == '?') bad_usage(x, "unknown flag '%s'", argv[word]);
        if (c == ':') bad_usage(x, "%s needs a value", argv[word]);
        if (li >= 0 && !spelled_in_full(argv[word], opts[li].name))
            bad_usage(x, "unknown flag '%s'", argv[word]);
        /* the flag's slot in given: --out 0, --seed 1, registered flag i 2 + i */
        const int slot = c == OPT_OUT ? 0 : c == OPT_SEED ? 1 : c - OPT_FLAG + 2;
        if (c != OPT_HELP && x->given[slot]++) /* which one would count is a guess */
            bad_usage(x, "--%s is given twice", c == OPT_OUT ? "out" : c == OPT_SEED ? "seed"
                                                  : x->flags[c - OPT_FLAG].name);
        if (c == OPT_HELP) {
            usage(x, stdout);
            exit(0);
        } else if (c == OPT_OUT) {
            x->out = optarg;
        } else if (c == OPT_SEED) {
            unsigned long long seed;
            if (parse_count(optarg, ULONG_MAX, &seed) != 0)
                bad_usage(x, "--seed needs a non-negative integer, not '%s'", optarg);
            x->seed = (unsigned long)seed;
        } else {
            lab_flag *fl = &x->flags[c - OPT_FLAG];
            if (set_value(fl, optarg) != 0)
                bad_usage(x, "--%s needs %s, not '%s'", fl->name, value_kind[fl->type],
                          optarg);
        }
    }
    if (optind < argc) bad_usage(x, "unexpected argument '%s'", argv[optind]);
    if (x->list_jobs && x->job >= 0) bad_usage(x, "--list-jobs and --job: one or the other");
    if (x->job < -1) bad_usage(x, "--job %ld: a job number is >= 0", x->job);
    /* the job list is one line per job (wc -l, parallel, a Slurm array) */
    for (int i = 0; x->list_jobs && i < argc; i++)
        if (strpbrk(argv[i], "\n\r"))
            bad_usage(x, "--list-jobs: argument %d holds a line break, which a list of one "
                      "line per job cannot hold", i);
    if (x->out[0] == '\0') bad_usage(x, "empty --out directory");
    check_out(x);
}

void lab_out_dir(const lab_ctx *x)
{
    if (mkdir(x->out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create directory '%s': %s\n", x->name, x->out,
                strerror(errno));
        exit(1);
    }
}

int lab_given(const lab_ctx *x, const char *name)
{
    if (strcmp(name, "out") == 0 || strcmp(name, "seed") == 0)
        return x->given[name[0] == 's'];
    for (size_t i = 0; i < x->nflags; i++)
        if (strcmp(x->flags[i].name, name) == 0)
            return x->given[2 + i];
    fprintf(stderr, "%s: lab_given: no flag --%s\n", x->name, name);
    exit(1);
}

void lab_refuse_unused(const lab_ctx *x, const char *name, int unused, const char *why)
{
    if (unused && lab_given(x, name))
        bad_usage(x, "--%s does nothing %s", name, why);
}

void lab_need(const lab_ctx *x, int ok, const char *flags, const char *rule, ...)
{
    if (ok)
        return;
    char lead[256];
    snprintf(lead, sizeof lead, "%s: need ", flags);
    va_list ap;
    va_start(ap, rule);
    vbad_usage(x, lead, rule, ap);
}
