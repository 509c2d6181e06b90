/*
 * tests/common.c — code shared by the cmocka tests (see tests/common.h).
 */
#define _DEFAULT_SOURCE /* realpath */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>

#include "common.h"

static double max_abs(const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(b[i]) > m)
            m = fabs(b[i]);
    return m;
}

double rel_err_f64(const double *a, const double *b, size_t n)
{
    double m = max_abs(b, n), e = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        if (fabs(a[i] - b[i]) > e)
            e = fabs(a[i] - b[i]);
    }
    return e / (m > 1e-300 ? m : 1e-300);
}

double rel_err_f32(const float *a, const double *b, size_t n)
{
    double *w = to_f64(a, n);
    double e = rel_err_f64(w, b, n);
    free(w);
    return e;
}

float *to_f32(const double *x, size_t n)
{
    if (!x)
        return NULL;
    float *y = malloc((n ? n : 1) * sizeof *y);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++)
        y[i] = (float)x[i];
    return y;
}

double *to_f64(const float *x, size_t n)
{
    if (!x)
        return NULL;
    double *y = malloc((n ? n : 1) * sizeof *y);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

size_t n_qk(const kdalab_dims *d) { return d->B * d->T * d->H * d->K; }
size_t n_v(const kdalab_dims *d) { return d->B * d->T * d->H * d->V; }
size_t n_bth(const kdalab_dims *d) { return d->B * d->T * d->H; }
size_t n_state(const kdalab_dims *d) { return d->B * d->H * d->K * d->V; }

gsl_rng *test_rng(unsigned long seed)
{
    gsl_rng_env_setup(); /* honours GSL_RNG_SEED / GSL_RNG_TYPE */
    gsl_rng *r = gsl_rng_alloc(gsl_rng_default);
    assert_non_null(r);
    if (!getenv("GSL_RNG_SEED"))
        gsl_rng_set(r, seed);
    return r;
}

static double *alloc_n(size_t n)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    return x;
}

/* rows of length K drawn from N(0,1) and scaled to unit norm */
static void unit_rows(gsl_rng *rng, double *x, size_t rows, size_t K)
{
    for (size_t r = 0; r < rows; r++) {
        double n2 = 0;
        for (size_t c = 0; c < K; c++) {
            x[r * K + c] = gsl_ran_gaussian(rng, 1.0);
            n2 += x[r * K + c] * x[r * K + c];
        }
        double inv = 1.0 / sqrt(n2 > 0 ? n2 : 1.0);
        for (size_t c = 0; c < K; c++)
            x[r * K + c] *= inv;
    }
}

void random_problem_make(random_problem *p, gsl_rng *rng, kdalab_mechanism mech,
                         kdalab_dims dims, double g_min, int with_h0)
{
    memset(p, 0, sizeof *p);
    p->dims = dims;
    p->mech = mech;
    size_t bth = n_bth(&dims);
    p->q = alloc_n(n_qk(&dims));
    p->k = alloc_n(n_qk(&dims));
    p->v = alloc_n(n_v(&dims));
    p->beta = alloc_n(bth);
    p->g = alloc_n(n_qk(&dims)); /* wide enough for KDA; GDN uses the first bth */
    unit_rows(rng, p->q, bth, dims.K);
    unit_rows(rng, p->k, bth, dims.K);
    for (size_t i = 0; i < n_v(&dims); i++)
        p->v[i] = gsl_ran_gaussian(rng, 1.0);
    for (size_t i = 0; i < bth; i++)
        p->beta[i] = gsl_rng_uniform(rng);
    for (size_t i = 0; i < n_qk(&dims); i++)
        p->g[i] = g_min * gsl_rng_uniform(rng);
    if (with_h0) {
        p->h0 = alloc_n(n_state(&dims));
        for (size_t i = 0; i < n_state(&dims); i++)
            p->h0[i] = gsl_ran_gaussian(rng, 1.0);
    }
    if (kdalab_mechanism_has_ab(mech)) { /* a = -kk, b = kk * alpha */
        p->a = alloc_n(n_qk(&dims));
        p->b = alloc_n(n_qk(&dims));
        unit_rows(rng, p->a, bth, dims.K);
        for (size_t i = 0; i < n_qk(&dims); i++) {
            p->b[i] = p->a[i] * gsl_rng_uniform(rng);
            p->a[i] = -p->a[i];
        }
    }
}

void random_problem_free(random_problem *p)
{
    free(p->q); free(p->k); free(p->v); free(p->beta); free(p->g); free(p->h0);
    free(p->a); free(p->b);
    memset(p, 0, sizeof *p);
}

/* The call of a plain batch of dims in the form opts selects (NULL: recurrent). */
static kdalab_call plain_call(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                              const kdalab_dims *d, double scale)
{
    return (kdalab_call){.dims = *d, .HV = d->H, .mech = mech, .scale = scale,
                         .form = opts ? KDALAB_FORM_CHUNK : KDALAB_FORM_RECURRENT,
                         .impl = KDALAB_IMPL_REFERENCE, .opts = opts};
}

kdalab_status run_ab_f64(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                         const kdalab_dims *d, double scale, const double *q, const double *k,
                         const double *v, const double *g, const double *beta, const double *a,
                         const double *b, const double *h0, double *o, double *ht,
                         kdalab_report *report)
{
    const kdalab_call c = plain_call(opts, mech, d, scale);
    const kdalab_tensors_f64 x = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .a = a,
                                  .b = b, .h0 = h0, .o = o, .ht = ht};
    return kdalab_run_f64(&c, &x, report);
}

kdalab_status run_f64(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                      const kdalab_dims *d, double scale, const double *q, const double *k,
                      const double *v, const double *g, const double *beta, const double *h0,
                      double *o, double *ht, kdalab_report *report)
{
    return run_ab_f64(opts, mech, d, scale, q, k, v, g, beta, NULL, NULL, h0, o, ht, report);
}

kdalab_status run_ab_f32(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                         const kdalab_dims *d, double scale, const double *q, const double *k,
                         const double *v, const double *g, const double *beta, const double *a,
                         const double *b, const double *h0, double *o, double *ht,
                         kdalab_report *report)
{
    size_t nqk = n_qk(d), nv = n_v(d), ns = n_state(d);
    size_t ng = kdalab_mechanism_g_width(mech, d->K) * n_bth(d);
    float *qf = to_f32(q, nqk), *kf = to_f32(k, nqk), *vf = to_f32(v, nv);
    float *gf = ng ? to_f32(g, ng) : NULL, *bf = to_f32(beta, n_bth(d));
    float *af = to_f32(a, nqk), *bbf = to_f32(b, nqk);
    float *h0f = to_f32(h0, ns);
    float *of = malloc((nv ? nv : 1) * sizeof *of), *htf = malloc(ns * sizeof *htf);
    assert_non_null(of);
    assert_non_null(htf);
    const kdalab_call c = plain_call(opts, mech, d, scale);
    const kdalab_tensors_f32 x = {.q = qf, .k = kf, .v = vf, .g = gf, .beta = bf, .a = af,
                                  .b = bbf, .h0 = h0f, .o = of, .ht = ht ? htf : NULL};
    kdalab_status s = kdalab_run_f32(&c, &x, report);
    if (s == KDALAB_OK || s == KDALAB_ERANGE) {
        for (size_t i = 0; i < nv; i++)
            o[i] = of[i];
        for (size_t i = 0; ht && i < ns; i++)
            ht[i] = htf[i];
    }
    free(qf); free(kf); free(vf); free(gf); free(bf); free(af); free(bbf); free(h0f);
    free(of); free(htf);
    return s;
}

kdalab_status run_f32(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                      const kdalab_dims *d, double scale, const double *q, const double *k,
                      const double *v, const double *g, const double *beta, const double *h0,
                      double *o, double *ht, kdalab_report *report)
{
    return run_ab_f32(opts, mech, d, scale, q, k, v, g, beta, NULL, NULL, h0, o, ht, report);
}

int test_tmpdir_make(const char *prefix, char *buf, size_t cap)
{
    const char *base = getenv("TMPDIR");
    int n = snprintf(buf, cap, "%s/%sXXXXXX", base && *base ? base : "/tmp", prefix);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    return mkdtemp(buf) ? 0 : -1;
}

int test_tmpdir_remove(const char *dir)
{
    char cmd[600];
    if (strchr(dir, '\'') || snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= (int)sizeof cmd)
        return -1;
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------- */
/* Running bin/kdalab                                                        */
/* ------------------------------------------------------------------------- */

char tcli_tmpdir[256];
const char *tcli_bin;
char tcli_out[8192], tcli_err[8192];

int tcli_setup(const char *prefix)
{
    /* KDALAB_BIN is the programs' directory (bin, or build-asan/bin) */
    static char path[512], full[4096];
    const char *dir = getenv("KDALAB_BIN");
    snprintf(path, sizeof path, "%s/kdalab", dir && *dir ? dir : "./bin");
    tcli_bin = path;
    if (realpath(path, full)) /* absolute: a test may run it from another directory */
        tcli_bin = full;
    if (access(tcli_bin, X_OK) != 0) {
        fprintf(stderr, "%s not found: run `make` (or set KDALAB_BIN to its directory) from "
                        "the repository root\n",
                tcli_bin);
        return -1;
    }
    /* a sanitizer report in the tool must not pass for exit 1 or 2 */
    setenv("ASAN_OPTIONS", "exitcode=86", 0);
    setenv("UBSAN_OPTIONS", "exitcode=86:print_stacktrace=1", 0);
    return test_tmpdir_make(prefix, tcli_tmpdir, sizeof tcli_tmpdir);
}

static void slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static int run_v(const char *env, const char *fmt, va_list ap, char *args, size_t cap)
{
    char cmd[8192];
    vsnprintf(args, cap, fmt, ap);
    snprintf(cmd, sizeof cmd, "%s%s %s >%s/stdout 2>%s/stderr", env, tcli_bin, args, tcli_tmpdir,
             tcli_tmpdir);
    int st = system(cmd);
    char p[512];
    snprintf(p, sizeof p, "%s/stdout", tcli_tmpdir);
    slurp(p, tcli_out, sizeof tcli_out);
    snprintf(p, sizeof p, "%s/stderr", tcli_tmpdir);
    slurp(p, tcli_err, sizeof tcli_err);
    return st;
}

int tcli_run_raw(const char *env, const char *fmt, ...)
{
    char args[6144];
    va_list ap;
    va_start(ap, fmt);
    int st = run_v(env, fmt, ap, args, sizeof args);
    va_end(ap);
    return st;
}

int tcli_run(const char *fmt, ...)
{
    char args[6144];
    va_list ap;
    va_start(ap, fmt);
    int st = run_v("", fmt, ap, args, sizeof args);
    va_end(ap);
    if (st == -1 || !WIFEXITED(st))
        fail_msg("kdalab %s: did not exit normally (status %d)\n%s", args, st, tcli_err);
    int rc = WEXITSTATUS(st);
    /* the shell's 128 + n is a death by signal n; 86 a sanitizer report */
    if (rc == 126 || rc == 127 || rc > 2)
        fail_msg("kdalab %s: exit %d (a crash or a sanitizer report?)\n%s", args, rc, tcli_err);
    return rc;
}

void tcli_expect_error(int got, int rc, ...)
{
    if (got != rc)
        fail_msg("exit %d, expected %d; stderr: %s", got, rc, tcli_err);
    size_t len = strlen(tcli_err);
    assert_true(len > 0);
    if (strchr(tcli_err, '\n') != tcli_err + len - 1)
        fail_msg("error is not exactly one line: '%s'", tcli_err);
    va_list ap;
    va_start(ap, rc);
    const char *needle;
    while ((needle = va_arg(ap, const char *)) != NULL)
        if (!strstr(tcli_err, needle))
            fail_msg("error '%s' lacks '%s'", tcli_err, needle);
    va_end(ap);
}

const char *tcli_tmp(const char *name)
{
    static char paths[8][512];
    static int next = 0;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", tcli_tmpdir, name);
    return p;
}

int tcli_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int tcli_count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir ? dir : tcli_tmpdir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

unsigned char *tcli_file_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = '\0'; /* so a text file can be read as a string */
    *len = (size_t)n;
    return b;
}

char *test_read_text(const char *path)
{
    size_t len;
    return (char *)tcli_file_bytes(path, &len);
}

void test_write_text(const char *path, const char *text)
{
    tcli_put_bytes(path, text, strlen(text));
}

void tcli_put_bytes(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot create %s", path);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* ---- the inputs of the command-line tests ---------------------------------- */

void tcli_write_array(const char *path, kdalab_dtype dtype, const kdalab_array *a)
{
    kdalab_status s = kdalab_npy_write(path, dtype, a->data, a->ndim, a->shape);
    if (s != KDALAB_OK)
        fail_msg("writing %s: %s", path, kdalab_last_error());
}

void tcli_read_array(const char *path, kdalab_array *a)
{
    kdalab_status s = kdalab_npy_read(path, a);
    if (s != KDALAB_OK)
        fail_msg("reading %s: %s", path, kdalab_last_error());
}

static char golden_path_buf[8][512];
const char *tcli_golden_path(const char *name, const char *key)
{
    static int next = 0;
    char *p = golden_path_buf[next++ % 8];
    snprintf(p, 512, "%s/%s.%s.npy", golden_dir(), name, key);
    return p;
}

/* The input flags of a golden case: "--q .. --k .. --v .. [--beta ..] [--g ..] [--h0 ..]". */
const char *tcli_case_inputs(const golden_case *c)
{
    static char buf[4096];
    int n = snprintf(buf, sizeof buf, "--mechanism %s --scale %.17g --q %s --k %s --v %s",
                     kdalab_mechanism_name(c->mech), c->scale, tcli_golden_path(c->name, "q"),
                     tcli_golden_path(c->name, "k"), tcli_golden_path(c->name, "v"));
    if (kdalab_mechanism_has_beta(c->mech))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --beta %s",
                      tcli_golden_path(c->name, "beta"));
    if (kdalab_mechanism_g_width(c->mech, 1))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --g %s", tcli_golden_path(c->name, "g"));
    if (kdalab_mechanism_has_ab(c->mech))
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --a %s --b %s",
                      tcli_golden_path(c->name, "a"), tcli_golden_path(c->name, "b"));
    if (c->has_h0)
        snprintf(buf + n, sizeof buf - (size_t)n, " --h0 %s", tcli_golden_path(c->name, "h0"));
    return buf;
}

/* kda_small's flags with one input replaced (key = "q", "k", "v", "beta",
 * "g" or "h0"; path NULL drops it). */
const char *tcli_varlen_inputs(const char *line, varlen_line *out)
{
    static char buf[4096];
    varlen_line l;
    if (sscanf(line, "%63s %63s %zu %zu %zu %zu %zu %zu %lf %d", l.name, l.mech, &l.T, &l.N,
               &l.H, &l.HV, &l.K, &l.V, &l.scale, &l.has_h0) != 10)
        fail_msg("malformed varlen MANIFEST line: %s", line);
    const char *d = "tests/golden_varlen", *name = l.name;
    int n = snprintf(buf, sizeof buf,
                     "--mechanism %s --scale %.17g --q %s/%s.q.npy --k %s/%s.k.npy --v "
                     "%s/%s.v.npy --cu-seqlens %s/%s.cu_seqlens.npy",
                     l.mech, l.scale, d, name, d, name, d, name, d, name);
    if (strcmp(l.mech, "linear_attention") != 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --beta %s/%s.beta.npy", d, name);
    if (strcmp(l.mech, "kda") == 0 || strcmp(l.mech, "gated_deltanet") == 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " --g %s/%s.g.npy", d, name);
    if (l.has_h0)
        snprintf(buf + n, sizeof buf - (size_t)n, " --h0 %s/%s.h0.npy", d, name);
    if (out)
        *out = l;
    return buf;
}

const char *tcli_kda_with(const char *key, const char *path)
{
    static char buf[4096];
    static const char *keys[] = {"q", "k", "v", "beta", "g", "h0"};
    int n = snprintf(buf, sizeof buf, "--mechanism kda");
    for (int i = 0; i < 6; i++) {
        const char *p = tcli_golden_path("kda_small", keys[i]);
        if (key && strcmp(key, keys[i]) == 0)
            p = path;
        if (p)
            n += snprintf(buf + n, sizeof buf - (size_t)n, " --%s %s", keys[i], p);
    }
    return buf;
}

/* ---- statuses ------------------------------------------------------------------ */

void test_expect_status_at(int line, kdalab_status got, kdalab_status want,
                           const char *needle)
{
    if (got != want)
        fail_msg("line %d: status %d, want %d (%s)", line, (int)got, (int)want,
                 kdalab_last_error());
    if (needle && !strstr(kdalab_last_error(), needle))
        fail_msg("line %d: error '%s' does not mention '%s'", line, kdalab_last_error(),
                 needle);
}

/* ---- random inputs -------------------------------------------------------------- */

double *test_random_array(gsl_rng *rng, size_t n)
{
    double *x = malloc((n + 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = 2 * gsl_rng_uniform(rng) - 1;
    return x;
}
