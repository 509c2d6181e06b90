/*
 * tests/common.h — code shared by the cmocka tests: the golden cases,
 * error measures, random inputs from GSL.
 */
#ifndef KDALAB_TESTS_COMMON_H
#define KDALAB_TESTS_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <gsl/gsl_rng.h>

#include "kdalab.h"

/* 1 in a build with AddressSanitizer, whose allocator replaces glibc's (gcc
 * says __SANITIZE_ADDRESS__; older clang only __has_feature). */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

/* One golden case of tests/golden/MANIFEST.tsv, with its arrays loaded. */
typedef struct {
    char name[64];
    kdalab_mechanism mech;
    kdalab_dims dims;
    double scale;
    int has_h0;
    /* inputs (NULL where the mechanism or case has none) and expected outputs */
    kdalab_array q, k, v, beta, g, h0, o, ht;
    kdalab_array a, b; /* the DPLR rows (kdalab_mechanism_has_ab) */
} golden_case;

/* The directory holding the golden files (tests/golden, or $KDALAB_GOLDEN). */
const char *golden_dir(void);

/* Load every case of MANIFEST.tsv; returns the count, fails the test on error. */
size_t golden_load_all(golden_case *cases, size_t max);
void golden_free(golden_case *c);

/* One case of tests/golden_grad/MANIFEST.tsv: the forward inputs, the
 * upstream gradients and the expected gradients (NULL data where absent). */
typedef struct {
    char name[64];
    kdalab_mechanism mech;
    kdalab_dims dims;
    double scale;
    int has_h0, has_dht;
    kdalab_array q, k, v, beta, g, h0, d_o, dht, o, ht;
    kdalab_array dq, dk, dv, dbeta, dg, dh0;
    kdalab_array a, b, da, db; /* the DPLR rows (kdalab_mechanism_has_ab) */
} grad_case;

/* The directory of the golden gradients (tests/golden_grad, or $KDALAB_GOLDEN_GRAD). */
const char *grad_golden_dir(void);
/* Load every case of golden_grad/MANIFEST.tsv; returns the count. */
size_t grad_load_all(grad_case *cases, size_t max);
void grad_case_free(grad_case *c);

/* max |a - b| / max(max |b|, tiny) over n elements (non-finite a gives +inf). */
double rel_err_f64(const double *a, const double *b, size_t n);
double rel_err_f32(const float *a, const double *b, size_t n);

/* Copies between precisions; malloc'd, caller frees. */
float *to_f32(const double *x, size_t n);
double *to_f64(const float *x, size_t n);

/* Random inputs for a mechanism: q, k unit-norm rows (as fla's tests L2-normalise),
 * v ~ N(0,1), beta ~ U(0,1), g = log(sigmoid-ish) in [g_min, 0]; for a DPLR
 * row, RWKV-7's parametrisation a = -kk, b = kk * alpha (kk unit rows, alpha
 * ~ U(0,1) per channel: the transition's eigenvalues stay in [0, 1]), else
 * a = b = NULL. All malloc'd. */
typedef struct {
    kdalab_dims dims;
    kdalab_mechanism mech;
    double *q, *k, *v, *beta, *g, *h0; /* h0 may be NULL */
    double *a, *b;                     /* DPLR rows only */
} random_problem;

void random_problem_make(random_problem *p, gsl_rng *rng, kdalab_mechanism mech,
                         kdalab_dims dims, double g_min, int with_h0);
void random_problem_free(random_problem *p);

/* Sizes of the arrays of a problem. */
size_t n_qk(const kdalab_dims *d);
size_t n_v(const kdalab_dims *d);
size_t n_bth(const kdalab_dims *d);
size_t n_state(const kdalab_dims *d);

/* Run the recurrent form (opts == NULL) or the chunkwise form with opts, on
 * float64 inputs; run_f32 converts to float32, runs the float32 form and
 * converts o and ht back. ht may be NULL. */
kdalab_status run_f64(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                      const kdalab_dims *d, double scale, const double *q, const double *k,
                      const double *v, const double *g, const double *beta, const double *h0,
                      double *o, double *ht, kdalab_report *report);
kdalab_status run_f32(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                      const kdalab_dims *d, double scale, const double *q, const double *k,
                      const double *v, const double *g, const double *beta, const double *h0,
                      double *o, double *ht, kdalab_report *report);
/* The same through the one call (kdalab_run_f64 / _f32), with the DPLR rows'
 * a, b [B,T,H,K] (NULL for the other rows); run_f64 / _f32 are these with
 * a = b = NULL. */
kdalab_status run_ab_f64(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                         const kdalab_dims *d, double scale, const double *q, const double *k,
                         const double *v, const double *g, const double *beta, const double *a,
                         const double *b, const double *h0, double *o, double *ht,
                         kdalab_report *report);
kdalab_status run_ab_f32(const kdalab_chunk_opts *opts, kdalab_mechanism mech,
                         const kdalab_dims *d, double scale, const double *q, const double *k,
                         const double *v, const double *g, const double *beta, const double *a,
                         const double *b, const double *h0, double *o, double *ht,
                         kdalab_report *report);

/* A fresh directory $TMPDIR/<prefix>XXXXXX (or /tmp) written into buf
 * [cap]; returns 0, or -1 if it cannot be made. test_tmpdir_remove deletes
 * it and everything in it; returns 0 or -1. */
int test_tmpdir_make(const char *prefix, char *buf, size_t cap);
int test_tmpdir_remove(const char *dir);

/* A GSL generator seeded from $GSL_RNG_SEED or the given seed. */
gsl_rng *test_rng(unsigned long seed);

/* n values uniform in [-1, 1) from rng (n + 1 allocated); caller frees. */
double *test_random_array(gsl_rng *rng, size_t n);

/* The status of a library call is want and, when needle is not NULL, its
 * error message holds needle; fails the test naming the caller's line
 * otherwise. */
void test_expect_status_at(int line, kdalab_status got, kdalab_status want,
                           const char *needle);
#define expect_status(got, want, needle) test_expect_status_at(__LINE__, got, want, needle)

/* ---- running bin/kdalab (the tests of the command-line tool) ----------------- */

/* The scratch directory, the program, and the stdout / stderr of the last run. */
extern char tcli_tmpdir[256];
extern const char *tcli_bin;
extern char tcli_out[8192], tcli_err[8192];

/* Find the program ($KDALAB_BIN/kdalab, else ./bin/kdalab), make a sanitizer
 * report exit with 86, make tcli_tmpdir ($TMPDIR/<prefix>XXXXXX). For a
 * cmocka group setup: 0, or -1 with the reason on stderr. */
int tcli_setup(const char *prefix);

/* Run "kdalab <args>" (printf-style) through the shell, capturing stdout and
 * stderr; env is prepended to the command ("VAR=x ", or ""). tcli_run_raw
 * returns the wait status as system() gives it; tcli_run returns the exit
 * status and fails the test on a death by signal or a sanitizer report. */
int tcli_run_raw(const char *env, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int tcli_run(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The last run exited with rc and printed ONE line on stderr holding every
 * needle (a NULL-terminated list); fails the test otherwise. */
void tcli_expect_error(int got, int rc, ...);

/* tcli_tmpdir/name (one of 8 rotating static buffers). */
const char *tcli_tmp(const char *name);
/* Does path exist (stat, links followed)? */
int tcli_exists(const char *path);
/* Entries of dir (tcli_tmpdir when NULL) whose name starts with prefix. */
int tcli_count_entries(const char *dir, const char *prefix);
/* The bytes of a file (malloc'd, followed by a NUL; *len their count); fails
 * the test if unreadable. */
unsigned char *tcli_file_bytes(const char *path, size_t *len);
/* A text file as a malloc'd string / text written to path (created or
 * truncated); each fails the test on error. */
char *test_read_text(const char *path);
void test_write_text(const char *path, const char *text);
/* Write len bytes to path (created or truncated); fails the test on error. */
void tcli_put_bytes(const char *path, const void *b, size_t len);

/* Write / read a .npy file; fail the test on error. */
void tcli_write_array(const char *path, kdalab_dtype dtype, const kdalab_array *a);
void tcli_read_array(const char *path, kdalab_array *a);
/* The path of golden case name's array key (tests/golden/NAME.KEY.npy; one of
 * 8 rotating static buffers). */
const char *tcli_golden_path(const char *name, const char *key);
/* The input flags of a golden case: "--mechanism .. --scale .. --q .. --k ..
 * --v .. [--beta ..] [--g ..] [--h0 ..]" (a static buffer). */
const char *tcli_case_inputs(const golden_case *c);
/* One line of tests/golden_varlen/MANIFEST.tsv (a varlen / GVA case). */
typedef struct {
    char name[64], mech[64];
    size_t T, N, H, HV, K, V;
    double scale;
    int has_h0;
} varlen_line;
/* Parse a MANIFEST line into *out (a malformed line fails the test) and
 * return the case's input flags for `kdalab run`, --cu-seqlens included (a
 * static buffer). */
const char *tcli_varlen_inputs(const char *line, varlen_line *out);
/* kda_small's flags with one input replaced (key = "q", "k", "v", "beta",
 * "g" or "h0"; path NULL drops it; a static buffer). */
const char *tcli_kda_with(const char *key, const char *path);

#endif
