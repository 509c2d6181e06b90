/*
 * experiments/common.h — the small functions every numbered experiment shares.
 *
 *   flags     --out DIR (default "results"), --seed N (default 1), --help, plus
 *             per-experiment flags registered in one line each (getopt_long),
 *             and each flag's rule (flags.c; the rest is common.c)
 *   TSV       a file DIR/NAME.tsv opened with a '#' header block naming the
 *             experiment, the command line, the seed, the parameters and what
 *             each column is (gnuplot skips '#' lines)
 *   progress  one line on stderr while a sweep runs
 *   timing    a monotonic clock and the process's CPU clock (clock_gettime),
 *             one thread for kdalab's loops; the median and range of
 *             repeated timings, printed as one "spread:" line
 *   misc      a seeded GSL generator, random unit vectors and orthonormal sets,
 *             a status check, zeroed and float32 buffers
 *
 * Typical use:
 *
 *   lab_ctx x;
 *   size_t T = 1000;
 *   lab_init(&x, "01_half_life", "per-channel decay as a memory horizon");
 *   lab_flag_size(&x, "T", &T, "tokens to decay over");
 *   lab_parse(&x, argc, argv);            // exits on --help or a bad flag
 *   gsl_rng *rng = lab_rng(&x);
 *   static const char *const cols[] = {"a", "decay factor per token",
 *                                      "t", "tokens since the write", NULL};
 *   FILE *f = lab_tsv_open(&x, "01_half_life", cols, "T=%zu", T);
 *   ...
 *   lab_tsv_close(&x, f);
 *
 * Every function that can fail prints a message naming the experiment and
 * exits with status 1 (2 for a bad command line): an experiment is a
 * program, and a half-written result is worse than none.
 */
#ifndef KDALAB_EXPERIMENTS_COMMON_H
#define KDALAB_EXPERIMENTS_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include <gsl/gsl_rng.h>

#include "kdalab.h"

#define LAB_MAX_FLAGS 32

typedef enum {
    LAB_FLAG_SIZE,
    LAB_FLAG_INT,
    LAB_FLAG_DOUBLE,
    LAB_FLAG_STRING,
    LAB_FLAG_SWITCH /* no value: --name sets *(long *)target to 1 */
} lab_flag_type;

/* One registered flag: --name VALUE or --name=VALUE. */
typedef struct {
    const char *name;   /* without the leading "--"                      */
    lab_flag_type type;
    void *target;       /* size_t*, long* (INT, SWITCH), double* or const char** */
    const char *help;   /* one line for --help                           */
} lab_flag;

/* The state of one experiment run. Fields are read-only after lab_parse. */
typedef struct {
    const char *name;    /* "01_half_life": program name, TSV prefix      */
    const char *about;   /* one line describing the experiment            */
    const char *out;     /* output directory (--out), default "results"   */
    unsigned long seed;  /* --seed, default 1                             */
    int argc;            /* the command line, recorded in every TSV       */
    char **argv;
    long list_jobs;      /* --list-jobs (lab_flag_jobs): print the jobs, run none */
    long job;            /* --job I (lab_flag_jobs): run job I only; -1: all      */
    int census;          /* this process only looks at its sweep's jobs (census.c):  */
                         /* like --list-jobs, it writes no table and prints no progress */
    double t_start;      /* lab_now() at lab_init                         */
    double t_progress;   /* last progress print                           */
    const char *t_done;  /* the `what` whose final line was printed last  */
    lab_flag flags[LAB_MAX_FLAGS];
    size_t nflags;
    unsigned char given[LAB_MAX_FLAGS + 2]; /* on the command line: --out, --seed, */
                                            /* then each registered flag          */
} lab_ctx;

/* Start an experiment: name (e.g. "01_half_life") and a one-line description.
 * Sets the defaults out = "results", seed = 1 and starts the clock. */
void lab_init(lab_ctx *x, const char *name, const char *about);

/* Register a per-experiment flag --name; *target holds the default, shown by
 * --help, and is overwritten by the command line. At most LAB_MAX_FLAGS. */
void lab_flag_size(lab_ctx *x, const char *name, size_t *target, const char *help);
void lab_flag_int(lab_ctx *x, const char *name, long *target, const char *help);
void lab_flag_double(lab_ctx *x, const char *name, double *target, const char *help);
void lab_flag_string(lab_ctx *x, const char *name, const char **target, const char *help);

/* Register --list-jobs and --job I, for an experiment whose sweep is a list
 * of independent jobs (one trained model each: mqar_train.h). While either is
 * given, lab_tsv_open writes nothing (its stream goes to /dev/null) and
 * lab_progress prints nothing: the tables are made by a later run that
 * assembles the jobs' results. */
void lab_flag_jobs(lab_ctx *x);

/* In a process forked to run the experiment only to look at its sweep
 * (census.c, with x->census set): every TSV stream lab_tsv_open has opened
 * writes to /dev/null from now on, in this process only (the parent's files
 * are untouched), and is forgotten, so that no exit of this process removes
 * the parent's unfinished files. Exits (status 1) if /dev/null cannot be
 * opened. */
void lab_tsv_discard(const lab_ctx *x);

/* Parse argv with getopt_long: --name VALUE or --name=VALUE, flag names in
 * full (no abbreviations), a lone "--" ends the flags. --help / -h prints the
 * flag list (with defaults) to stdout and exits 0; an unknown flag, a missing
 * value, a malformed number, a flag other than --help given twice (which one
 * would count is a guess the lab does not make) or a stray argument prints
 * one line naming the problem to stderr and exits 2. Creates the --out
 * directory (one level) if it does not exist. */
void lab_parse(lab_ctx *x, int argc, char **argv);

/* Make the --out directory if it is not there (lab_parse checked it can be):
 * called by whatever writes into it first (lab_tsv_open, the ledger), so a
 * run refused for a flag's value leaves no directory behind. Exits (status
 * 1) with one line if it cannot. */
void lab_out_dir(const lab_ctx *x);

/* Was --name ("out", "seed" or a registered flag) on the command line? */
int lab_given(const lab_ctx *x, const char *name);

/* Refuse (one line, exit 2) --name when it was given and does nothing here
 * (unused != 0): "--name does nothing <why> (see --help)". Call after
 * lab_parse, with why saying in which combination and why, e.g. "with
 * --resets 0: there is no reset to give a log-decay". */
void lab_refuse_unused(const lab_ctx *x, const char *name, int unused, const char *why);

/* One rule of the flags: when ok is 0, one line "NAME: FLAGS: need RULE (see
 * --help)" and exit 2, so that a refused command line names the flag (or
 * the flags that constrain each other) that broke the rule. Call after
 * lab_parse, one rule at a time, e.g.
 *   lab_need(&x, K >= 1 && K <= 64, "--K", "1 <= K <= 64");
 * rule is a printf format for what follows. */
__attribute__((format(printf, 4, 5))) void lab_need(const lab_ctx *x, int ok, const char *flags,
                                                    const char *rule, ...);

/* A GSL Mersenne-Twister generator seeded with x->seed (free with gsl_rng_free). */
gsl_rng *lab_rng(const lab_ctx *x);

/*
 * Open DIR/<file>.tsv for writing ("file" without the extension) and write
 * the header block:
 *   # <name>: <about>
 *   # command: <argv joined by spaces>
 *   # seed: <seed>
 *   # parameters: <params_fmt formatted, printf-style; may be NULL>
 *   # columns:
 *   #   1  <col>  <description>
 *   #   ...
 *   # <col1>\t<col2>\t...
 * columns is a NULL-terminated list of pairs: name, description (with units).
 * Exits 1 if the file cannot be opened. Returns the stream.
 */
FILE *lab_tsv_open(const lab_ctx *x, const char *file, const char *const *columns,
                   const char *params_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Close a TSV stream and put it in place, exiting 1 if a write failed (disk
 * full, ...). Until then it is written to DIR/<file>.tsv.tmp: a run that
 * fails keeps the last good DIR/<file>.tsv (an exit removes the .tmp). */
void lab_tsv_close(const lab_ctx *x, FILE *f);

/* Progress on stderr: "[name] what done/total  (elapsed s)". On a terminal the
 * line is rewritten in place; otherwise printed at most every 2 s. Call with
 * done == total once to finish the line (again for the same what: nothing). */
void lab_progress(lab_ctx *x, const char *what, size_t done, size_t total);

/* Seconds on a monotonic clock (clock_gettime CLOCK_MONOTONIC). */
double lab_now(void);

/* CPU seconds the process has used, every thread's (clock_gettime
 * CLOCK_PROCESS_CPUTIME_ID): the clock of an experiment that times work
 * rather than waiting, on a machine it shares. Pair it with lab_one_thread:
 * with a second thread, OpenMP's idle worker spins between kdalab's
 * threaded input checks and its spinning would be counted too. */
double lab_cpu_now(void);

/* kdalab's own threaded loops (its input checks, the SIMD path) run on one
 * thread from here on (kdalab_set_num_threads(1)): for an experiment whose
 * numbers are one thread's. */
void lab_one_thread(const lab_ctx *x);

/* Seconds since lab_init. */
double lab_elapsed(const lab_ctx *x);

/* The median and range of n >= 1 repeats of one measurement (a timing or a
 * ratio of two timings measured in the same round). */
typedef struct {
    double median, lo, hi;
    size_t n;
} lab_spread;

/* The spread of v[0..n-1] (v is not changed; n <= 64). */
lab_spread lab_spread_of(const double *v, size_t n);

/* Print one line to stdout,
 *   spread: WHAT: median M UNIT (range LO .. HI UNIT, N rounds)
 * with the numbers multiplied by scale and printed with `decimals` digits
 * after the point. Every timed finding prints its number this way: a timing
 * moves from run to run and machine to machine, and the range says how much. */
void lab_print_spread(const char *what, lab_spread s, double scale, int decimals, const char *unit);

/* Fill x[0..n-1] with a uniformly random unit vector (normalised Gaussian). */
void lab_random_unit(gsl_rng *rng, double *v, size_t n);

/* One position's low-rank term of the DPLR row in RWKV-7's parametrisation,
 * a = -kk, b = kk * alpha (kk a random unit vector, alpha ~ U(0,1) per
 * channel): the transition's eigenvalues stay in [0, 1]. a, b [K]. */
void lab_random_rwkv7_ab(gsl_rng *rng, double *a, double *b, size_t K);

/* N orthonormal vectors in R^K (1 <= N <= K), Haar-distributed: the first N
 * columns of the Q factor of a K x N Gaussian matrix (gsl_linalg_QR), each
 * column's sign set by R's diagonal. out is [N, K], row j = column j of Q; with
 * N = K the rows are a random rotation (out times a vector rotates it). */
void lab_random_orthonormal(const lab_ctx *x, gsl_rng *rng, size_t N, size_t K, double *out);

/* If status is not KDALAB_OK, print "<name>: <what>: <strerror> (<last_error>)"
 * and exit 1. Returns nothing; use after every library call. */
void lab_check(const lab_ctx *x, kdalab_status status, const char *what);

/* Parse a comma-separated list of numbers ("0.5,0.9,1e-3") into out[0..max-1].
 * Returns the count, or 0 when the list is empty, malformed, holds a
 * non-finite number or has more than max entries. */
size_t lab_parse_list(const char *s, double *out, size_t max);

/* Parse --flag's comma-separated list of names, each one of names[0..n)
 * (repeats allowed): use[i] = 1 for each name listed, 0 for the others.
 * Exits (status 2) with one line naming the flag and the choices on an
 * unknown name or a list that names none ("", ","). */
void lab_parse_names(const lab_ctx *x, const char *flag, const char *list,
                     const char *const *names, size_t n, int *use);

/* max |a - ref| / max |ref| over n values (a float64, or af float32 when a
 * is NULL; max |a - ref| when ref is all zero); NaN when a holds a
 * non-finite value. */
double lab_rel_err(const double *a, const float *af, const double *ref, size_t n);

/* Allocate n doubles set to zero, exiting 1 on failure. */
double *lab_zeros(const lab_ctx *x, size_t n);

/* Allocate n floats, converted from src[0..n-1] (zero when src is NULL),
 * exiting 1 on failure: the float32 copy of a float64 input. */
float *lab_floats(const lab_ctx *x, const double *src, size_t n);

#endif
