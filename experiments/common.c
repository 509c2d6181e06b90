/*
 * experiments/common.c — flags, TSV headers, progress and timing for the
 * numbered experiments. See common.h for the contract of each function.
 */
#include "common.h"

#include <ctype.h>
#include <fcntl.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>

double lab_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double lab_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void lab_one_thread(const lab_ctx *x) { lab_check(x, kdalab_set_num_threads(1), "one thread"); }

double lab_elapsed(const lab_ctx *x) { return lab_now() - x->t_start; }

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

/* Is this run one job of a sweep, the listing of its jobs, or a look at them
 * (census.c)? */
static int jobs_mode(const lab_ctx *x) { return x->list_jobs || x->job >= 0 || x->census; }

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

/* A bad command line: one line on stderr naming the problem, exit 2. */
__attribute__((format(printf, 2, 3))) static void bad_usage(const lab_ctx *x, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", x->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see --help)\n");
    exit(2);
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

/* Can a file be made in the existing directory dir? Made and removed at
 * once: access() says yes to root where a file system still refuses (/proc,
 * a read-only mount). NULL, or why not. */
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
        unlink(path);
    }
    free(path);
    return why;
}

/* --out can be used: an existing directory this process can make a file in,
 * or a name it can make a directory under (tried: made and removed at once).
 * Checked while the flags are parsed, so a run that could not write its
 * results stops before it computes; made for good only when something is
 * written (lab_out_dir), so a run refused for a flag's value leaves no
 * directory behind. Exits (status 1) with one line otherwise. */
static void check_out(const lab_ctx *x)
{
    struct stat st;
    const char *why = NULL;
    if (stat(x->out, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            why = "it exists and is not a directory";
        else if (access(x->out, W_OK | X_OK) != 0)
            why = strerror(errno);
        else
            why = probe_dir(x->out);
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
        if (access(parent, W_OK | X_OK) != 0)
            why = strerror(errno);
        else if (mkdir(x->out, 0755) != 0)
            why = strerror(errno);
        else
            rmdir(x->out);
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
    va_list ap;
    fprintf(stderr, "%s: %s: need ", x->name, flags);
    va_start(ap, rule);
    vfprintf(stderr, rule, ap);
    va_end(ap);
    fprintf(stderr, " (see --help)\n");
    exit(2);
}

gsl_rng *lab_rng(const lab_ctx *x)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r) {
        fprintf(stderr, "%s: out of memory (gsl_rng_alloc)\n", x->name);
        exit(1);
    }
    gsl_rng_set(r, x->seed);
    return r;
}

/* The TSV files being written: each goes to <path>.tmp and is renamed to
 * <path> by lab_tsv_close, so a run that fails (or is stopped) never leaves a
 * half-written table in place of the last good one; an exit before the close
 * removes the .tmp (atexit). */
#define LAB_MAX_TSV 16
static struct {
    FILE *f;
    char *path, *tmp;
} open_tsv[LAB_MAX_TSV];

static void remove_unfinished_tsv(void)
{
    for (int i = 0; i < LAB_MAX_TSV; i++)
        if (open_tsv[i].f) {
            fclose(open_tsv[i].f);
            remove(open_tsv[i].tmp);
        }
}

FILE *lab_tsv_open(const lab_ctx *x, const char *file, const char *const *columns,
                   const char *params_fmt, ...)
{
    if (jobs_mode(x)) { /* one job of a sweep: the assembling run writes the tables */
        FILE *f = fopen("/dev/null", "w");
        if (!f) {
            fprintf(stderr, "%s: cannot open /dev/null: %s\n", x->name, strerror(errno));
            exit(1);
        }
        return f;
    }
    static int registered = 0;
    if (!registered)
        registered = atexit(remove_unfinished_tsv) == 0;
    int slot = 0;
    while (slot < LAB_MAX_TSV && open_tsv[slot].f)
        slot++;
    size_t n = strlen(x->out) + strlen(file) + 10;
    char *path = malloc(n), *tmp = malloc(n);
    if (!path || !tmp || slot == LAB_MAX_TSV) {
        fprintf(stderr, "%s: out of memory or more than %d TSV files open\n", x->name,
                LAB_MAX_TSV);
        exit(1);
    }
    snprintf(path, n, "%s/%s.tsv", x->out, file);
    snprintf(tmp, n, "%s/%s.tsv.tmp", x->out, file);
    lab_out_dir(x);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot open '%s': %s\n", x->name, tmp, strerror(errno));
        exit(1);
    }
    open_tsv[slot].f = f;
    open_tsv[slot].path = path;
    open_tsv[slot].tmp = tmp;
    fprintf(f, "# %s: %s\n# command:", x->name, x->about);
    for (int i = 0; i < x->argc; i++) fprintf(f, " %s", x->argv[i]);
    fprintf(f, "\n# seed: %lu\n# parameters: ", x->seed);
    if (params_fmt) {
        va_list ap;
        va_start(ap, params_fmt);
        vfprintf(f, params_fmt, ap);
        va_end(ap);
    }
    fprintf(f, "\n# columns:\n");
    size_t ncol = 0;
    for (size_t i = 0; columns && columns[i] && columns[i + 1]; i += 2, ncol++)
        fprintf(f, "#   %2zu  %-12s %s\n", ncol + 1, columns[i], columns[i + 1]);
    fprintf(f, "#");
    for (size_t i = 0; columns && columns[i] && columns[i + 1]; i += 2)
        fprintf(f, "%s%s", i ? "\t" : " ", columns[i]);
    fprintf(f, "\n");
    return f;
}

void lab_tsv_discard(const lab_ctx *x)
{
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot open /dev/null: %s\n", x->name, strerror(errno));
        exit(1);
    }
    for (int i = 0; i < LAB_MAX_TSV; i++)
        if (open_tsv[i].f) {
            if (dup2(fd, fileno(open_tsv[i].f)) < 0) {
                fprintf(stderr, "%s: dup2: %s\n", x->name, strerror(errno));
                exit(1);
            }
            open_tsv[i].f = NULL;
        }
    close(fd);
}

void lab_tsv_close(const lab_ctx *x, FILE *f)
{
    int slot = 0;
    while (slot < LAB_MAX_TSV && open_tsv[slot].f != f)
        slot++;
    if (slot == LAB_MAX_TSV && jobs_mode(x)) { /* /dev/null (lab_tsv_open) */
        fclose(f);
        return;
    }
    if (slot == LAB_MAX_TSV) {
        fprintf(stderr, "%s: lab_tsv_close of a stream lab_tsv_open did not open\n", x->name);
        exit(1);
    }
    open_tsv[slot].f = NULL;
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(open_tsv[slot].tmp, open_tsv[slot].path) != 0) {
        fprintf(stderr, "%s: writing %s failed\n", x->name, open_tsv[slot].path);
        remove(open_tsv[slot].tmp);
        exit(1);
    }
    free(open_tsv[slot].path);
    free(open_tsv[slot].tmp);
}

void lab_progress(lab_ctx *x, const char *what, size_t done, size_t total)
{
    if (jobs_mode(x)) return;
    double now = lab_now();
    int tty = isatty(fileno(stderr));
    int last = done >= total;
    if (!last && now - x->t_progress < (tty ? 0.1 : 2.0)) return;
    if (last && x->t_done && strcmp(x->t_done, what) == 0) return; /* out already */
    x->t_progress = now;
    x->t_done = last ? what : NULL;
    fprintf(stderr, "%s[%s] %s %zu/%zu  (%.1f s)%s", tty ? "\r" : "", x->name, what, done,
            total, now - x->t_start, (tty && !last) ? "" : "\n");
    fflush(stderr);
}

lab_spread lab_spread_of(const double *v, size_t n)
{
    double s[64];
    lab_spread r = {NAN, NAN, NAN, n};
    if (n == 0 || n > 64)
        return r;
    memcpy(s, v, n * sizeof *s);
    for (size_t i = 1; i < n; i++) /* insertion sort: n is a handful of rounds */
        for (size_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    r.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    r.lo = s[0];
    r.hi = s[n - 1];
    return r;
}

void lab_print_spread(const char *what, lab_spread s, double scale, int decimals, const char *unit)
{
    printf("spread: %s: median %.*f%s (range %.*f .. %.*f%s, %zu rounds)\n", what, decimals,
           scale * s.median, unit, decimals, scale * s.lo, decimals, scale * s.hi, unit, s.n);
}

void lab_random_rwkv7_ab(gsl_rng *rng, double *a, double *b, size_t K)
{
    lab_random_unit(rng, a, K);
    for (size_t c = 0; c < K; c++) {
        b[c] = a[c] * gsl_rng_uniform(rng);
        a[c] = -a[c];
    }
}

void lab_random_unit(gsl_rng *rng, double *v, size_t n)
{
    double norm2;
    do {
        norm2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            v[i] = gsl_ran_gaussian(rng, 1.0);
            norm2 += v[i] * v[i];
        }
    } while (norm2 == 0.0);
    double inv = 1.0 / sqrt(norm2);
    for (size_t i = 0; i < n; i++) v[i] *= inv;
}

void lab_random_orthonormal(const lab_ctx *x, gsl_rng *rng, size_t N, size_t K, double *out)
{
    gsl_matrix *A = gsl_matrix_alloc(K, N), *Q = gsl_matrix_alloc(K, K), *R = gsl_matrix_alloc(K, N);
    gsl_vector *tau = gsl_vector_alloc(N);
    if (!A || !Q || !R || !tau) {
        fprintf(stderr, "%s: out of memory (lab_random_orthonormal)\n", x->name);
        exit(1);
    }
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < N; j++) gsl_matrix_set(A, i, j, gsl_ran_gaussian(rng, 1.0));
    gsl_linalg_QR_decomp(A, tau);
    gsl_linalg_QR_unpack(A, tau, Q, R);
    for (size_t j = 0; j < N; j++) {
        double sign = gsl_matrix_get(R, j, j) < 0 ? -1.0 : 1.0;
        for (size_t i = 0; i < K; i++) out[j * K + i] = sign * gsl_matrix_get(Q, i, j);
    }
    gsl_matrix_free(A), gsl_matrix_free(Q), gsl_matrix_free(R), gsl_vector_free(tau);
}

void lab_check(const lab_ctx *x, kdalab_status status, const char *what)
{
    if (status == KDALAB_OK) return;
    fprintf(stderr, "%s: %s: %s (%s)\n", x->name, what, kdalab_strerror(status),
            kdalab_last_error());
    exit(1);
}

double lab_rel_err(const double *a, const float *af, const double *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double ai = a ? a[i] : (double)af[i];
        if (!isfinite(ai)) return NAN;
        num = fmax(num, fabs(ai - ref[i]));
        den = fmax(den, fabs(ref[i]));
    }
    return den > 0.0 ? num / den : num;
}

double *lab_zeros(const lab_ctx *x, size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu doubles)\n", x->name, n);
        exit(1);
    }
    return p;
}

float *lab_floats(const lab_ctx *x, const double *src, size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu floats)\n", x->name, n);
        exit(1);
    }
    for (size_t i = 0; i < n && src; i++) p[i] = (float)src[i];
    return p;
}
