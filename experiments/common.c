/*
 * experiments/common.c — TSV headers, progress, timing, random draws and
 * checks for the numbered experiments (their flags: flags.c). See common.h
 * for the contract of each function.
 */
#include "common.h"

#include <fcntl.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

/* Is this run one job of a sweep, the listing of its jobs, or a look at them
 * (census.c)? Then the assembling run writes the tables. */
static int jobs_mode(const lab_ctx *x) { return x->list_jobs || x->job >= 0 || x->census; }

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
