/*
 * tools/kdalab.c — bin/kdalab, a float64 oracle for kernel writers (issue 4).
 *
 *   kdalab run      run one mechanism of the lineage on .npy tensors in fla's
 *                   layout (REFERENCE.md, "Shapes and names") and write o and
 *                   the final state ht as float64 .npy
 *   kdalab compare  compare two .npy arrays: max absolute error, max error
 *                   relative to max|B|, the worst element, non-finite counts
 *   kdalab info     version, the SIMD level chosen, the CPU features seen
 *
 * Every subcommand has --help. Every error is ONE line on stderr that names
 * the flag and file at fault, and the exit status says what kind:
 *   0  success (compare: within tolerance)
 *   1  compare: outside tolerance; run: the computation overflowed (outputs
 *      written for study), memory ran out, or an output could not be written
 *   2  bad command line or bad input (unreadable or malformed file, wrong
 *      shape, NaN/Inf, g > 0, beta outside [0, 2], ...)
 * Outputs go through kdalab_npy_write (temporary name, then rename), so no
 * half-written file is ever left behind.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kdalab.h"

#define EXIT_FAIL 1 /* computation or output failed; compare: outside tolerance */
#define EXIT_BAD 2  /* bad command line or bad input                          */

/* "kdalab run", "kdalab compare", ...: the prefix of every error line. */
static const char *who = "kdalab";

/* Print one error line "<who>: <message>" and return code. */
static int fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(int code, const char *fmt, ...)
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
    fprintf(stderr, "%s: %s\n", who, msg);
    return code;
}

/* The exit status for a library status: bad input or a real failure. */
static int exit_for(kdalab_status s)
{
    return (s == KDALAB_ENOMEM || s == KDALAB_ERANGE) ? EXIT_FAIL : EXIT_BAD;
}

/* "(1, 37, 2, 16)", "(5,)", "()" */
static const char *shape_str(const kdalab_array *a, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < a->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %zu" : "%zu", a->shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, a->ndim == 1 ? ",)" : ")");
    return buf;
}

/* The multi-index of element i of a C-order array, as "(0, 3, 1, 2)". */
static const char *index_str(const kdalab_array *a, size_t i, char *buf, size_t cap)
{
    size_t idx[KDALAB_NPY_MAX_DIMS] = {0};
    for (int d = a->ndim - 1; d >= 0; d--) {
        idx[d] = a->shape[d] ? i % a->shape[d] : 0;
        i = a->shape[d] ? i / a->shape[d] : 0;
    }
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < a->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %zu" : "%zu", idx[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, a->ndim == 1 ? ",)" : ")");
    return buf;
}

/* ------------------------------------------------------------------------- */
/* Command-line parsing                                                      */
/* ------------------------------------------------------------------------- */

/* One flag of a subcommand: its name, whether it takes a value, where to put
 * it (value string, or 1 for a switch). */
typedef struct {
    const char *name;
    int takes_value;
    const char **value; /* when takes_value */
    int *on;            /* when not         */
} flag;

/* Parse argv[first..argc) into the flags; positional arguments go to pos (at
 * most max_pos). Accepts "--name value" and "--name=value". */
static int parse_flags(int argc, char **argv, int first, flag *flags, size_t nflags,
                       const char **pos, int max_pos, int *npos)
{
    *npos = 0;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (arg[0] == '-' && arg[1] != '\0' && strcmp(arg, "-h") != 0)
                return fail(EXIT_BAD, "unknown option '%s' (see --help)", arg);
            if (strcmp(arg, "-h") == 0) {
                for (size_t f = 0; f < nflags; f++)
                    if (strcmp(flags[f].name, "help") == 0)
                        *flags[f].on = 1;
                continue;
            }
            if (*npos >= max_pos)
                return fail(EXIT_BAD, "unexpected argument '%s' (see --help)", arg);
            pos[(*npos)++] = arg;
            continue;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        flag *fl = NULL;
        for (size_t f = 0; f < nflags; f++)
            if (strlen(flags[f].name) == nlen && strncmp(flags[f].name, name, nlen) == 0)
                fl = &flags[f];
        if (fl == NULL)
            return fail(EXIT_BAD, "unknown option '--%.*s' (see --help)", (int)nlen, name);
        if (!fl->takes_value) {
            if (eq)
                return fail(EXIT_BAD, "--%s takes no value", fl->name);
            *fl->on = 1;
            continue;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return fail(EXIT_BAD, "--%s needs a value", fl->name);
            value = argv[++i];
        }
        if (*fl->value != NULL)
            return fail(EXIT_BAD, "--%s is given twice", fl->name);
        if (*value == '\0')
            return fail(EXIT_BAD, "--%s has an empty value", fl->name);
        *fl->value = value;
    }
    return 0;
}

/* An integer >= min, written in decimal and nothing else. */
static int parse_size(const char *flagname, const char *s, size_t min, size_t *out)
{
    if (*s < '0' || *s > '9')
        return fail(EXIT_BAD, "--%s: '%s' is not an integer >= %zu", flagname, s, min);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0' || v > SIZE_MAX || v < min)
        return fail(EXIT_BAD, "--%s: '%s' is not an integer >= %zu", flagname, s, min);
    *out = (size_t)v;
    return 0;
}

/* A finite number; positive when strictly, else >= 0. */
static int parse_number(const char *flagname, const char *s, int strictly_positive, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) ||
        (strictly_positive ? !(v > 0) : !(v >= 0)))
        return fail(EXIT_BAD, "--%s: '%s' is not a finite number %s", flagname, s,
                    strictly_positive ? "> 0" : ">= 0");
    *out = v;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* kdalab run                                                                */
/* ------------------------------------------------------------------------- */

static const char RUN_HELP[] =
    "usage: kdalab run --mechanism M --q Q.npy --k K.npy --v V.npy [--beta B.npy]\n"
    "                  [--g G.npy] [--h0 H0.npy] --o O.npy [--ht HT.npy] [options]\n"
    "\n"
    "Run one mechanism of the lineage on your tensors and write its output o and\n"
    "final state ht as float64 .npy: an independent answer to check a kernel against.\n"
    "Inputs are .npy files ('<f8', '<f4', '>f8', '>f4'; C or Fortran order) in\n"
    "flash-linear-attention's layout:\n"
    "  q, k  [B, T, H, K]      v     [B, T, H, V]     beta  [B, T, H], each in [0, 2]\n"
    "  g     [B, T, H] (gated_deltanet) or [B, T, H, K] (kda): log-decay, every g <= 0\n"
    "  h0    [B, H, K, V] initial state (default zero)\n"
    "  o     [B, T, H, V] output          ht    [B, H, K, V] final state\n"
    "T = 0 is legal (o is empty, ht = h0). Inputs must be finite.\n"
    "\n"
    "  --mechanism M     linear_attention | deltanet | gated_deltanet | kda (required)\n"
    "  --form F          recurrent (default) | chunk\n"
    "  --precision P     fp64 (default) | fp32 | bf16 | fp16 (bf16/fp16: emulated\n"
    "                    storage rounding, chunk form only)\n"
    "  --impl I          reference (default) | simd: the float32 fast path (needs a\n"
    "                    float32 precision; the recurrent form repeats its decode step;\n"
    "                    kernels exist for fp32 + safe decay, anything else runs the\n"
    "                    float32 reference, with a note on stderr)\n"
    "  --chunk C         chunk size, >= 1 (default 64; chunk form)\n"
    "  --subchunk c      sub-chunk size >= 1, or 'none' for one sub-chunk per chunk\n"
    "                    (default 16; chunk form, safe and anchored decay)\n"
    "  --decay D         safe (default) | pairwise | rescaled | anchored (chunk form)\n"
    "  --scale s         query scale, finite and > 0 (default K^-1/2)\n"
    "  --beta, --g       required by the mechanisms that use them, refused otherwise\n"
    "  --time            print 'compute_seconds=X head_tokens_per_s=Y' on stderr,\n"
    "                    timing the computation alone (not the file I/O)\n"
    "  --help            this text\n"
    "\n"
    "Exit status: 0 ok; 1 the computation overflowed (outputs written, non-finite\n"
    "values counted on stderr) or an output could not be written; 2 bad input.\n";

typedef struct {
    const char *flag;  /* "--q" */
    const char *path;  /* NULL when not given */
    kdalab_array a;
} input;

/* Check every element is finite (and, for g, <= 0; for beta, in [0, 2]),
 * naming the file, the flag and the element on failure. */
static int check_values(const input *in, int is_g, int is_beta)
{
    const kdalab_array *a = &in->a;
    char ib[96];
    for (size_t i = 0; i < a->size; i++) {
        double x = a->data[i];
        if (!isfinite(x))
            return fail(EXIT_BAD, "%s %s: element %s is %s; inputs must be finite", in->flag,
                        in->path, index_str(a, i, ib, sizeof ib),
                        isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
        if (is_g && x > 0)
            return fail(EXIT_BAD,
                        "%s %s: element %s is %.17g > 0; g is a log-decay (factor exp(g)) and "
                        "must be <= 0",
                        in->flag, in->path, index_str(a, i, ib, sizeof ib), x);
        if (is_beta && !(x >= 0 && x <= 2))
            return fail(EXIT_BAD, "%s %s: element %s is %.17g, outside [0, 2]", in->flag,
                        in->path, index_str(a, i, ib, sizeof ib), x);
    }
    return 0;
}

/* Does a have exactly the shape want[0..nd)? */
static int shape_is(const kdalab_array *a, int nd, const size_t *want)
{
    if (a->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (a->shape[i] != want[i])
            return 0;
    return 1;
}

/* "expected (B, T, H) = (1, 37, 2)"-style message for a shape mismatch. */
static int shape_mismatch(const input *in, const char *layout, int nd, const size_t *want,
                          const input *ref)
{
    char got[96], expected[96], refs[96];
    kdalab_array w = {0};
    w.ndim = nd;
    for (int i = 0; i < nd; i++)
        w.shape[i] = want[i];
    return fail(EXIT_BAD, "%s %s: shape %s, expected %s = %s from %s %s shape %s", in->flag,
                in->path, shape_str(&in->a, got, sizeof got), layout,
                shape_str(&w, expected, sizeof expected), ref->flag, ref->path,
                shape_str(&ref->a, refs, sizeof refs));
}

/* float64 -> float32 copy; a finite value beyond float32's range is refused. */
static int to_float(const input *in, float **out)
{
    *out = NULL;
    if (in->path == NULL || in->a.size == 0)
        return 0;
    float *f = malloc(in->a.size * sizeof *f);
    if (f == NULL)
        return fail(EXIT_FAIL, "%s %s: out of memory", in->flag, in->path);
    for (size_t i = 0; i < in->a.size; i++) {
        f[i] = (float)in->a.data[i];
        if (!isfinite(f[i])) {
            char ib[96];
            free(f);
            return fail(EXIT_BAD, "%s %s: element %s = %g is beyond float32's range", in->flag,
                        in->path, index_str(&in->a, i, ib, sizeof ib), in->a.data[i]);
        }
    }
    *out = f;
    return 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Count the non-finite values of x[0..n). */
static size_t count_nonfinite(const double *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

/*
 * Can path be written as an output? Its directory must exist and be
 * writable, and an existing path must be a regular file (kdalab_npy_write
 * refuses to replace anything else). Checked for every output before
 * computing, so a run does not replace --o and then fail on --ht.
 * Returns 0 or an exit status after printing the reason.
 */
static int check_output_path(const char *which, const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int n = slash == NULL   ? snprintf(dir, sizeof dir, ".")
            : slash == path ? snprintf(dir, sizeof dir, "/")
                            : snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= sizeof dir)
        return fail(EXIT_BAD, "%s: the directory part of the path is too long", which);
    struct stat st;
    if (stat(dir, &st) != 0)
        return fail(EXIT_FAIL, "%s: directory '%s': %s", which, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return fail(EXIT_FAIL, "%s: '%s' is not a directory", which, dir);
    if (access(dir, W_OK) != 0)
        return fail(EXIT_FAIL, "%s: directory '%s' is not writable", which, dir);
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return fail(EXIT_FAIL, "%s: '%s' exists and is not a regular file", which, path);
    } else if (errno != ENOENT) { /* ENAMETOOLONG, ELOOP, EACCES, ...: not writable */
        return fail(EXIT_FAIL, "%s: cannot use this path: %s", which, strerror(errno));
    }
    return 0;
}

/* Do two output paths name the same file? (the same inode if one exists,
 * else the same directory inode and file name) */
static int same_output(const char *a, const char *b)
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
        return strcmp(a, b) == 0; /* too long to resolve; check_output_path refuses it */
    return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

enum { IN_Q, IN_K, IN_V, IN_BETA, IN_G, IN_H0, N_IN };

static int cmd_run(int argc, char **argv)
{
    who = "kdalab run";
    const char *mech_s = NULL, *form_s = NULL, *prec_s = NULL, *impl_s = NULL, *chunk_s = NULL,
               *sub_s = NULL, *decay_s = NULL, *scale_s = NULL, *o_path = NULL,
               *ht_path = NULL;
    int help = 0, timing = 0;
    input in[N_IN] = {{"--q", NULL, {0}},    {"--k", NULL, {0}}, {"--v", NULL, {0}},
                      {"--beta", NULL, {0}}, {"--g", NULL, {0}}, {"--h0", NULL, {0}}};
    flag flags[] = {
        {"mechanism", 1, &mech_s, NULL}, {"form", 1, &form_s, NULL},
        {"precision", 1, &prec_s, NULL}, {"impl", 1, &impl_s, NULL},
        {"chunk", 1, &chunk_s, NULL},    {"subchunk", 1, &sub_s, NULL},
        {"decay", 1, &decay_s, NULL},    {"scale", 1, &scale_s, NULL},
        {"q", 1, &in[IN_Q].path, NULL},  {"k", 1, &in[IN_K].path, NULL},
        {"v", 1, &in[IN_V].path, NULL},  {"beta", 1, &in[IN_BETA].path, NULL},
        {"g", 1, &in[IN_G].path, NULL},  {"h0", 1, &in[IN_H0].path, NULL},
        {"o", 1, &o_path, NULL},         {"ht", 1, &ht_path, NULL},
        {"time", 0, NULL, &timing},      {"help", 0, NULL, &help},
    };
    int npos, rc;
    if ((rc = parse_flags(argc, argv, 2, flags, sizeof flags / sizeof flags[0], NULL, 0, &npos)))
        return rc;
    if (help) {
        fputs(RUN_HELP, stdout);
        return 0;
    }

    /* ---- options ---- */
    kdalab_mechanism mech;
    if (mech_s == NULL)
        return fail(EXIT_BAD, "--mechanism is required (linear_attention, deltanet, "
                              "gated_deltanet, kda)");
    if (kdalab_mechanism_parse(mech_s, &mech) != KDALAB_OK)
        return fail(EXIT_BAD, "--mechanism: unknown mechanism '%s' (linear_attention, "
                              "deltanet, gated_deltanet, kda)", mech_s);
    int chunk_form = 0;
    if (form_s && strcmp(form_s, "chunk") == 0)
        chunk_form = 1;
    else if (form_s && strcmp(form_s, "recurrent") != 0)
        return fail(EXIT_BAD, "--form: unknown form '%s' (recurrent, chunk)", form_s);
    /* precision: -1 is fp64, else a kdalab_precision of the float32 family */
    int prec = -1;
    if (prec_s && strcmp(prec_s, "fp64") != 0) {
        if (strcmp(prec_s, "fp32") == 0)
            prec = KDALAB_FP32;
        else if (strcmp(prec_s, "bf16") == 0)
            prec = KDALAB_BF16;
        else if (strcmp(prec_s, "fp16") == 0)
            prec = KDALAB_FP16;
        else
            return fail(EXIT_BAD, "--precision: unknown precision '%s' (fp64, fp32, bf16, fp16)",
                        prec_s);
    }
    int simd = 0;
    if (impl_s && strcmp(impl_s, "simd") == 0)
        simd = 1;
    else if (impl_s && strcmp(impl_s, "reference") != 0)
        return fail(EXIT_BAD, "--impl: unknown implementation '%s' (reference, simd)", impl_s);
    if ((prec == KDALAB_BF16 || prec == KDALAB_FP16) && !chunk_form)
        return fail(EXIT_BAD, "--precision %s needs --form chunk (emulated low-precision "
                              "storage exists only in the chunkwise form)", prec_s);
    if (!chunk_form && (chunk_s || sub_s || decay_s))
        return fail(EXIT_BAD, "--%s applies to --form chunk only",
                    chunk_s ? "chunk" : sub_s ? "subchunk" : "decay");
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    if (chunk_s && (rc = parse_size("chunk", chunk_s, 1, &opts.chunk)))
        return rc;
    if (sub_s && strcmp(sub_s, "none") == 0)
        opts.subchunk = opts.chunk; /* one sub-chunk spans the chunk */
    else if (sub_s && (rc = parse_size("subchunk", sub_s, 1, &opts.subchunk)))
        return rc;
    if (decay_s && kdalab_decay_parse(decay_s, &opts.decay) != KDALAB_OK)
        return fail(EXIT_BAD, "--decay: unknown decay mode '%s' (safe, pairwise, rescaled, "
                              "anchored)", decay_s);
    opts.precision = prec < 0 ? KDALAB_FP32 : (kdalab_precision)prec;
    double scale = 0;
    if (scale_s && (rc = parse_number("scale", scale_s, 1, &scale)))
        return rc;
    if (simd && prec < 0)
        return fail(EXIT_BAD, "--impl simd computes in float32: add --precision fp32 (or "
                              "bf16/fp16 with --form chunk)");

    /* ---- which files ---- */
    int need_beta = kdalab_mechanism_has_beta(mech);
    int need_g = kdalab_mechanism_g_width(mech, 1) > 0;
    for (int i = IN_Q; i <= IN_V; i++)
        if (in[i].path == NULL)
            return fail(EXIT_BAD, "%s is required (a .npy file)", in[i].flag);
    if (need_beta && in[IN_BETA].path == NULL)
        return fail(EXIT_BAD, "--beta is required by %s (a .npy file, [B, T, H])", mech_s);
    if (!need_beta && in[IN_BETA].path)
        return fail(EXIT_BAD, "--beta is not used by %s", mech_s);
    if (need_g && in[IN_G].path == NULL)
        return fail(EXIT_BAD, "--g is required by %s (a .npy file, %s)", mech_s,
                    mech == KDALAB_KDA ? "[B, T, H, K]" : "[B, T, H]");
    if (!need_g && in[IN_G].path)
        return fail(EXIT_BAD, "--g is not used by %s", mech_s);
    if (o_path == NULL)
        return fail(EXIT_BAD, "--o is required (where to write the output, .npy)");
    if (ht_path && same_output(ht_path, o_path))
        return fail(EXIT_BAD, "--o and --ht name the same file '%s'", o_path);
    int bad_out = check_output_path("--o", o_path);
    if (bad_out == 0 && ht_path)
        bad_out = check_output_path("--ht", ht_path);
    if (bad_out)
        return bad_out;

    /* From here on, every exit goes through done: to free what was read. */
    int status = 0;
    double *o = NULL, *ht = NULL;
    float *fin[N_IN] = {NULL}, *fo = NULL, *fht = NULL;

    for (int i = 0; i < N_IN; i++) {
        if (in[i].path == NULL)
            continue;
        kdalab_status s = kdalab_npy_read(in[i].path, &in[i].a);
        if (s != KDALAB_OK) {
            status = fail(exit_for(s), "%s: %s", in[i].flag, kdalab_last_error());
            goto done;
        }
    }

    /* ---- shapes: q fixes B, T, H, K; v fixes V ---- */
    const kdalab_array *q = &in[IN_Q].a, *v = &in[IN_V].a;
    char s1[96], s2[96], s3[96];
    if (q->ndim != 4) {
        status = fail(EXIT_BAD, "--q %s: shape %s has %d dimensions; q is [B, T, H, K]",
                      in[IN_Q].path, shape_str(q, s1, sizeof s1), q->ndim);
        goto done;
    }
    kdalab_dims dims = {q->shape[0], q->shape[1], q->shape[2], q->shape[3], 0};
    if (dims.B == 0 || dims.H == 0 || dims.K == 0) {
        status = fail(EXIT_BAD, "--q %s: shape %s: B, H and K must be >= 1 (only T may be 0)",
                      in[IN_Q].path, shape_str(q, s1, sizeof s1));
        goto done;
    }
    if (!shape_is(&in[IN_K].a, 4, q->shape)) {
        status = fail(EXIT_BAD, "--k %s: shape %s does not match --q %s shape %s (k is [B, T, "
                                "H, K] like q)",
                      in[IN_K].path, shape_str(&in[IN_K].a, s1, sizeof s1), in[IN_Q].path,
                      shape_str(q, s2, sizeof s2));
        goto done;
    }
    if (v->ndim != 4 || v->shape[0] != dims.B || v->shape[1] != dims.T ||
        v->shape[2] != dims.H || v->shape[3] == 0) {
        status = fail(EXIT_BAD, "--v %s: shape %s does not fit --q %s shape %s (v is [B, T, H, "
                                "V] with q's B, T, H and V >= 1)",
                      in[IN_V].path, shape_str(v, s1, sizeof s1), in[IN_Q].path,
                      shape_str(q, s2, sizeof s2));
        goto done;
    }
    dims.V = v->shape[3];
    size_t bth[3] = {dims.B, dims.T, dims.H};
    size_t bthk[4] = {dims.B, dims.T, dims.H, dims.K};
    size_t state_shape[4] = {dims.B, dims.H, dims.K, dims.V};
    size_t o_shape[4] = {dims.B, dims.T, dims.H, dims.V};
    if (need_beta && !shape_is(&in[IN_BETA].a, 3, bth)) {
        status = shape_mismatch(&in[IN_BETA], "(B, T, H)", 3, bth, &in[IN_Q]);
        goto done;
    }
    if (mech == KDALAB_GATED_DELTANET && !shape_is(&in[IN_G].a, 3, bth)) {
        status = shape_mismatch(&in[IN_G], "(B, T, H) for gated_deltanet", 3, bth, &in[IN_Q]);
        goto done;
    }
    if (mech == KDALAB_KDA && !shape_is(&in[IN_G].a, 4, bthk)) {
        status = shape_mismatch(&in[IN_G], "(B, T, H, K) for kda", 4, bthk, &in[IN_Q]);
        goto done;
    }
    if (in[IN_H0].path && !shape_is(&in[IN_H0].a, 4, state_shape)) {
        status = fail(EXIT_BAD, "--h0 %s: shape %s, expected (B, H, K, V) = (%zu, %zu, %zu, "
                                "%zu) from --q %s shape %s and --v %s shape %s",
                      in[IN_H0].path, shape_str(&in[IN_H0].a, s1, sizeof s1), dims.B, dims.H,
                      dims.K, dims.V, in[IN_Q].path, shape_str(q, s2, sizeof s2),
                      in[IN_V].path, shape_str(v, s3, sizeof s3));
        goto done;
    }

    /* ---- values ---- */
    for (int i = 0; i < N_IN; i++)
        if (in[i].path && (status = check_values(&in[i], i == IN_G, i == IN_BETA)))
            goto done;
    if (!scale_s)
        scale = kdalab_default_scale(dims.K);

    /* ---- compute ---- */
    size_t n_o = in[IN_V].a.size, n_state = in[IN_H0].path ? in[IN_H0].a.size : 0;
    if (n_state == 0) {
        /* B*H*K*V without h0: each factor came from a file that exists, but the
         * product may still overflow */
        n_state = 1;
        const size_t f[4] = {dims.B, dims.H, dims.K, dims.V};
        for (int i = 0; i < 4 && n_state; i++)
            n_state = f[i] <= SIZE_MAX / sizeof(double) / n_state ? n_state * f[i] : 0;
        if (n_state == 0) {
            status = fail(EXIT_BAD, "the state [B, H, K, V] = [%zu, %zu, %zu, %zu] overflows "
                                    "size_t",
                          dims.B, dims.H, dims.K, dims.V);
            goto done;
        }
    }
    o = malloc(n_o ? n_o * sizeof *o : 1);
    ht = malloc(n_state * sizeof *ht);
    if (o == NULL || ht == NULL) {
        status = fail(EXIT_FAIL, "out of memory for the outputs");
        goto done;
    }
    const double *d[N_IN];
    for (int i = 0; i < N_IN; i++)
        d[i] = in[i].path ? in[i].a.data : NULL;
    kdalab_status s;
    kdalab_report report = {0, 0, 0};
    double t0 = 0, t1 = 0;
    if (prec < 0) {
        t0 = now_seconds();
        if (chunk_form)
            s = kdalab_chunk_f64(&dims, mech, scale, d[IN_Q], d[IN_K], d[IN_V], d[IN_G],
                                 d[IN_BETA], d[IN_H0], o, ht, &opts, &report);
        else
            s = kdalab_recurrent_f64(&dims, mech, scale, d[IN_Q], d[IN_K], d[IN_V], d[IN_G],
                                     d[IN_BETA], d[IN_H0], o, ht);
        t1 = now_seconds();
    } else {
        for (int i = 0; i < N_IN; i++)
            if ((status = to_float(&in[i], &fin[i])))
                goto done;
        fo = malloc(n_o ? n_o * sizeof *fo : 1);
        fht = malloc(n_state * sizeof *fht);
        if (fo == NULL || fht == NULL) {
            status = fail(EXIT_FAIL, "out of memory for the outputs");
            goto done;
        }
        if (!isfinite((float)scale) || !((float)scale > 0)) {
            status = fail(EXIT_BAD, "--scale: %g is not a positive float32", scale);
            goto done;
        }
        if (simd && chunk_form &&
            (opts.precision != KDALAB_FP32 ||
             (mech == KDALAB_KDA && opts.decay != KDALAB_DECAY_SAFE)))
            /* kdalab_simd_chunk_f32 hands these to the reference: say so, or
             * --time would pass the reference's speed off as the SIMD path's */
            fprintf(stderr, "kdalab run: note: the SIMD path has kernels for fp32 with the "
                            "safe decay mode only; the float32 reference computed this run\n");
        t0 = now_seconds();
        if (simd && chunk_form)
            s = kdalab_simd_chunk_f32(&dims, mech, (float)scale, fin[IN_Q], fin[IN_K],
                                      fin[IN_V], fin[IN_G], fin[IN_BETA], fin[IN_H0], fo, fht,
                                      &opts, &report);
        else if (simd)
            s = kdalab_simd_recurrent_f32(&dims, mech, (float)scale, fin[IN_Q], fin[IN_K], fin[IN_V],
                               fin[IN_G], fin[IN_BETA], fin[IN_H0], fo, fht);
        else if (chunk_form)
            s = kdalab_chunk_f32(&dims, mech, (float)scale, fin[IN_Q], fin[IN_K], fin[IN_V],
                                 fin[IN_G], fin[IN_BETA], fin[IN_H0], fo, fht, &opts, &report);
        else
            s = kdalab_recurrent_f32(&dims, mech, (float)scale, fin[IN_Q], fin[IN_K],
                                     fin[IN_V], fin[IN_G], fin[IN_BETA], fin[IN_H0], fo, fht);
        t1 = now_seconds();
        if (s == KDALAB_OK || s == KDALAB_ERANGE) {
            for (size_t i = 0; i < n_o; i++)
                o[i] = fo[i];
            for (size_t i = 0; i < n_state; i++)
                ht[i] = fht[i];
        }
    }
    if (s != KDALAB_OK && s != KDALAB_ERANGE) {
        status = fail(exit_for(s), "%s: %s", kdalab_strerror(s), kdalab_last_error());
        goto done;
    }
    if (timing) {
        double sec = t1 - t0;
        double head_tokens = (double)dims.B * (double)dims.H * (double)dims.T;
        fprintf(stderr, "compute_seconds=%.9f head_tokens_per_s=%.6g\n", sec,
                sec > 0 ? head_tokens / sec : 0.0);
    }

    /* ---- outputs (each written whole or not at all) ---- */
    if (kdalab_npy_write(o_path, KDALAB_DTYPE_F64, o, 4, o_shape) != KDALAB_OK) {
        status = fail(EXIT_FAIL, "--o: %s", kdalab_last_error());
        goto done;
    }
    if (ht_path && kdalab_npy_write(ht_path, KDALAB_DTYPE_F64, ht, 4, state_shape) != KDALAB_OK) {
        status = fail(EXIT_FAIL, "--ht: %s", kdalab_last_error());
        goto done;
    }
    if (s == KDALAB_ERANGE) {
        /* counted here, so every form and path reports the same way */
        size_t bad_o = count_nonfinite(o, n_o), bad_ht = count_nonfinite(ht, n_state);
        if (chunk_form && mech == KDALAB_KDA && !simd)
            status = fail(EXIT_FAIL,
                          "the computation overflowed (decay mode %s, largest exponent formed "
                          "%g): %zu non-finite values in o, %zu in ht; outputs written for "
                          "study",
                          kdalab_decay_name(opts.decay), report.max_exponent, bad_o, bad_ht);
        else
            status = fail(EXIT_FAIL,
                          "the computation overflowed: %zu non-finite values in o, %zu in ht; "
                          "outputs written for study",
                          bad_o, bad_ht);
    }

done:
    for (int i = 0; i < N_IN; i++) {
        kdalab_array_free(&in[i].a);
        free(fin[i]);
    }
    free(o);
    free(ht);
    free(fo);
    free(fht);
    return status;
}

/* ------------------------------------------------------------------------- */
/* kdalab compare                                                            */
/* ------------------------------------------------------------------------- */

static const char COMPARE_HELP[] =
    "usage: kdalab compare A.npy B.npy [--rtol r] [--atol a]\n"
    "\n"
    "Compare A (yours) with B (the reference) element by element. Prints\n"
    "  shape, max_abs_err = max |A - B|, max_rel_err = max_abs_err / max|B|,\n"
    "  worst_index (with both values), nonfinite_a, nonfinite_b, nonfinite_mismatch\n"
    "  (positions where A and B are not the same non-finite value), result.\n"
    "A passes when max_abs_err <= atol + rtol * max|B| and nonfinite_mismatch = 0.\n"
    "Non-finite pairs are left out of max_abs_err and max|B|.\n"
    "\n"
    "  --rtol r   tolerance relative to max|B|, >= 0 (default 1e-12: float64 agreement)\n"
    "  --atol a   absolute tolerance, >= 0 (default 0)\n"
    "  --help     this text\n"
    "\n"
    "Exit status: 0 within tolerance; 1 outside; 2 bad input (unreadable or\n"
    "malformed file, shapes differ).\n";

static int cmd_compare(int argc, char **argv)
{
    who = "kdalab compare";
    const char *rtol_s = NULL, *atol_s = NULL, *pos[2];
    int help = 0, npos, rc;
    flag flags[] = {{"rtol", 1, &rtol_s, NULL}, {"atol", 1, &atol_s, NULL},
                    {"help", 0, NULL, &help}};
    if ((rc = parse_flags(argc, argv, 2, flags, 3, pos, 2, &npos)))
        return rc;
    if (help) {
        fputs(COMPARE_HELP, stdout);
        return 0;
    }
    if (npos != 2)
        return fail(EXIT_BAD, "needs two files, A.npy and B.npy (see --help)");
    double rtol = 1e-12, atol = 0;
    if (rtol_s && (rc = parse_number("rtol", rtol_s, 0, &rtol)))
        return rc;
    if (atol_s && (rc = parse_number("atol", atol_s, 0, &atol)))
        return rc;

    kdalab_array a = {0}, b = {0};
    kdalab_status s = kdalab_npy_read(pos[0], &a);
    if (s != KDALAB_OK)
        return fail(exit_for(s), "A: %s", kdalab_last_error());
    s = kdalab_npy_read(pos[1], &b);
    if (s != KDALAB_OK) {
        kdalab_array_free(&a);
        return fail(exit_for(s), "B: %s", kdalab_last_error());
    }
    char sa[96], sb[96];
    int same = a.ndim == b.ndim;
    for (int i = 0; same && i < a.ndim; i++)
        same = a.shape[i] == b.shape[i];
    if (!same) {
        rc = fail(EXIT_BAD, "shapes differ: A %s is %s, B %s is %s", pos[0],
                  shape_str(&a, sa, sizeof sa), pos[1], shape_str(&b, sb, sizeof sb));
        kdalab_array_free(&a);
        kdalab_array_free(&b);
        return rc;
    }

    double max_abs = 0, max_b = 0;
    size_t worst = 0, nf_a = 0, nf_b = 0, nf_mismatch = 0;
    int have_worst = 0;
    for (size_t i = 0; i < a.size; i++) {
        double x = a.data[i], y = b.data[i];
        nf_a += !isfinite(x);
        nf_b += !isfinite(y);
        if (!isfinite(x) || !isfinite(y)) {
            int same_nf = (isnan(x) && isnan(y)) || (isinf(x) && x == y);
            nf_mismatch += !same_nf;
            continue;
        }
        double e = fabs(x - y);
        if (!have_worst || e > max_abs) {
            max_abs = e;
            worst = i;
            have_worst = 1;
        }
        if (fabs(y) > max_b)
            max_b = fabs(y);
    }
    double rel = max_b > 0 ? max_abs / max_b : (max_abs > 0 ? INFINITY : 0.0);
    int pass = max_abs <= atol + rtol * max_b && nf_mismatch == 0;

    printf("shape=%s\n", shape_str(&a, sa, sizeof sa));
    printf("max_abs_err=%.6e\n", max_abs);
    printf("max_rel_err=%.6e\n", rel);
    printf("max_abs_b=%.6e\n", max_b);
    if (have_worst)
        printf("worst_index=%s a=%.17g b=%.17g\n", index_str(&a, worst, sa, sizeof sa),
               a.data[worst], b.data[worst]);
    else
        printf("worst_index=none\n");
    printf("nonfinite_a=%zu nonfinite_b=%zu nonfinite_mismatch=%zu\n", nf_a, nf_b, nf_mismatch);
    printf("rtol=%g atol=%g\n", rtol, atol);
    printf("result=%s\n", pass ? "PASS" : "FAIL");
    kdalab_array_free(&a);
    kdalab_array_free(&b);
    return pass ? 0 : EXIT_FAIL;
}

/* ------------------------------------------------------------------------- */
/* kdalab info                                                               */
/* ------------------------------------------------------------------------- */

static const char INFO_HELP[] =
    "usage: kdalab info\n"
    "\n"
    "Print the version, the SIMD level the library chose for this machine, and\n"
    "the CPU features it saw.\n";

static int cmd_info(int argc, char **argv)
{
    who = "kdalab info";
    int help = 0, npos, rc;
    flag flags[] = {{"help", 0, NULL, &help}};
    if ((rc = parse_flags(argc, argv, 2, flags, 1, NULL, 0, &npos)))
        return rc;
    if (help) {
        fputs(INFO_HELP, stdout);
        return 0;
    }
    printf("version=%s\n", KDALAB_VERSION);
    const char *forced = getenv("KDALAB_SIMD");
    printf("simd_level=%s%s%s%s\n", kdalab_simd_level_name(kdalab_simd_get_level()), forced ? " (KDALAB_SIMD=" : "",
           forced ? forced : "", forced ? ")" : "");
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    printf("cpu_features=");
    struct {
        const char *name;
        int on;
    } feats[] = {
        {"sse2", __builtin_cpu_supports("sse2")},       {"sse4.2", __builtin_cpu_supports("sse4.2")},
        {"avx", __builtin_cpu_supports("avx")},         {"avx2", __builtin_cpu_supports("avx2")},
        {"fma", __builtin_cpu_supports("fma")},         {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512dq", __builtin_cpu_supports("avx512dq")}, {"avx512vl", __builtin_cpu_supports("avx512vl")},
    };
    int any = 0;
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
        if (feats[i].on) {
            printf("%s%s", any ? " " : "", feats[i].name);
            any = 1;
        }
    printf("%s\n", any ? "" : "none");
#else
    printf("cpu_features=unknown (not an x86 build)\n");
#endif
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("cpus_online=%ld\n", cpus);
    return 0;
}

/* ------------------------------------------------------------------------- */

static const char MAIN_HELP[] =
    "usage: kdalab <command> [options]   (kdalab <command> --help for each)\n"
    "\n"
    "A float64 oracle for the lineage ending in Kimi Delta Attention: run a\n"
    "mechanism on your own .npy tensors (fla layout) and compare your kernel's\n"
    "output with it.\n"
    "\n"
    "  run       run linear_attention, deltanet, gated_deltanet or kda; write o, ht\n"
    "  compare   compare two .npy arrays (errors, worst element, non-finite counts)\n"
    "  info      version, SIMD level, CPU features\n"
    "\n"
    "Exit status: 0 ok, 1 failed / outside tolerance, 2 bad command line or input.\n";

int main(int argc, char **argv)
{
    if (argc < 2)
        return fail(EXIT_BAD, "no command given (run, compare, info; see kdalab --help)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(MAIN_HELP, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("kdalab %s\n", KDALAB_VERSION);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc, argv);
    if (strcmp(cmd, "compare") == 0)
        return cmd_compare(argc, argv);
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc, argv);
    return fail(EXIT_BAD, "unknown command '%s' (run, compare, info; see kdalab --help)", cmd);
}
