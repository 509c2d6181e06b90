/*
 * tools/kdalab/compare.c — `kdalab compare A.npy B.npy`: compare two arrays
 * element by element and print the max absolute error, the max error
 * relative to max|B|, the worst element and the non-finite counts; the exit
 * status says whether A is within tolerance of B.
 *
 * defines: cmd_compare (declared in cli.h)
 */
#include <math.h>
#include <stdio.h>

#include "cli.h"

static const char HELP[] =
    "usage: kdalab compare A.npy B.npy [--rtol r] [--atol a]\n"
    "\n"
    "Compare A (yours) with B (the reference) element by element. Prints\n"
    "  shape, max_abs_err = max |A - B|, max_rel_err = max_abs_err / max|B|,\n"
    "  worst_index (with both values), nonfinite_a, nonfinite_b, nonfinite_mismatch\n"
    "  (positions where A and B are not the same non-finite value; the first of\n"
    "  them as first_nonfinite_mismatch, with both values), result.\n"
    "A passes when max_abs_err <= atol + rtol * max|B| and nonfinite_mismatch = 0.\n"
    "Non-finite pairs are left out of max_abs_err and max|B|.\n"
    "\n"
    "  --rtol r   tolerance relative to max|B|, >= 0 (default 1e-12: float64 agreement)\n"
    "  --atol a   absolute tolerance, >= 0 (default 0)\n"
    "  --help     this text\n"
    "\n"
    "Exit status: 0 within tolerance; 1 outside; 2 bad input (unreadable or\n"
    "malformed file, shapes differ).\n";

enum { OPT_RTOL = 256, OPT_ATOL };

static const struct option OPTIONS[] = {
    {"rtol", required_argument, NULL, OPT_RTOL},
    {"atol", required_argument, NULL, OPT_ATOL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The command line of one comparison, as given (NULL: not given). */
typedef struct {
    const char *path[2]; /* A, B */
    const char *rtol, *atol;
    int help;
} compare_flags;

static int parse_flags(int argc, char **argv, compare_flags *f)
{
    cli_parser p;
    cli_arg got;
    int c, npos = 0, rc = 0;
    cli_begin(&p, argc, argv, OPTIONS);
    while (rc == 0 && (c = cli_next(&p, &got)) != CLI_END) {
        switch (c) {
        case CLI_ERROR: return EXIT_BAD;
        case CLI_ARG:
            if (npos == 2)
                return cli_fail(EXIT_BAD, "unexpected argument '%s' (see --help)", got.value);
            f->path[npos++] = got.value;
            break;
        case 'h': f->help = 1; break;
        case OPT_RTOL: rc = cli_store(&got, &f->rtol); break;
        case OPT_ATOL: rc = cli_store(&got, &f->atol); break;
        }
    }
    return rc;
}

/* A tolerance: a finite number >= 0. Returns 0 or EXIT_BAD. */
static int parse_tolerance(const char *flagname, const char *s, double *out)
{
    double v;
    if (cli_parse_double(s, &v) != 0 || !isfinite(v) || !(v >= 0))
        return cli_fail(EXIT_BAD, "--%s: '%s' is not a finite number >= 0", flagname, s);
    *out = v;
    return 0;
}

/* What comparing A with B found. */
typedef struct {
    double max_abs, max_b;        /* over the pairs where both are finite */
    size_t worst;                 /* the element of max_abs (if have_worst) */
    int have_worst;
    size_t nf_a, nf_b, nf_mismatch; /* non-finite counts */
    size_t first_nf;                /* the first mismatch's element (if nf_mismatch) */
} comparison;

static comparison compare_arrays(const kdalab_array *a, const kdalab_array *b)
{
    comparison r = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < a->size; i++) {
        double x = a->data[i], y = b->data[i];
        r.nf_a += !isfinite(x);
        r.nf_b += !isfinite(y);
        if (!isfinite(x) || !isfinite(y)) {
            int same_nf = (isnan(x) && isnan(y)) || (isinf(x) && x == y);
            if (!same_nf && r.nf_mismatch++ == 0)
                r.first_nf = i;
            continue;
        }
        double e = fabs(x - y);
        if (!r.have_worst || e > r.max_abs) {
            r.max_abs = e;
            r.worst = i;
            r.have_worst = 1;
        }
        if (fabs(y) > r.max_b)
            r.max_b = fabs(y);
    }
    return r;
}

/* Print the comparison; return the exit status (0 pass, EXIT_FAIL fail). */
static int report(const kdalab_array *a, const kdalab_array *b, const comparison *r,
                  double rtol, double atol)
{
    char buf[96];
    double rel = r->max_b > 0 ? r->max_abs / r->max_b : (r->max_abs > 0 ? INFINITY : 0.0);
    int pass = r->max_abs <= atol + rtol * r->max_b && r->nf_mismatch == 0;
    printf("shape=%s\n", cli_shape_str(a, buf, sizeof buf));
    printf("max_abs_err=%.6e\n", r->max_abs);
    printf("max_rel_err=%.6e\n", rel);
    printf("max_abs_b=%.6e\n", r->max_b);
    if (r->have_worst)
        printf("worst_index=%s a=%.17g b=%.17g\n", cli_index_str(a, r->worst, buf, sizeof buf),
               a->data[r->worst], b->data[r->worst]);
    else
        printf("worst_index=none\n");
    printf("nonfinite_a=%zu nonfinite_b=%zu nonfinite_mismatch=%zu\n", r->nf_a, r->nf_b,
           r->nf_mismatch);
    if (r->nf_mismatch)
        printf("first_nonfinite_mismatch=%s a=%.17g b=%.17g\n",
               cli_index_str(a, r->first_nf, buf, sizeof buf), a->data[r->first_nf],
               b->data[r->first_nf]);
    printf("rtol=%g atol=%g\n", rtol, atol);
    printf("result=%s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : EXIT_FAIL;
}

int cmd_compare(int argc, char **argv)
{
    cli_who = "kdalab compare";
    compare_flags f = {{NULL, NULL}, NULL, NULL, 0};
    int rc = parse_flags(argc, argv, &f);
    if (rc)
        return rc;
    if (f.help) {
        fputs(HELP, stdout);
        return 0;
    }
    if (f.path[1] == NULL)
        return cli_fail(EXIT_BAD, "needs two files, A.npy and B.npy (see --help)");
    double rtol = 1e-12, atol = 0;
    if (f.rtol && (rc = parse_tolerance("rtol", f.rtol, &rtol)))
        return rc;
    if (f.atol && (rc = parse_tolerance("atol", f.atol, &atol)))
        return rc;

    cli_input in[2] = {{"A", f.path[0], {0}}, {"B", f.path[1], {0}}};
    if ((rc = cli_read_input(&in[0])) == 0 && (rc = cli_read_input(&in[1])) == 0) {
        const kdalab_array *a = &in[0].a, *b = &in[1].a;
        if (!cli_shape_is(b, a->ndim, a->shape)) {
            char sa[96], sb[96];
            rc = cli_fail(EXIT_BAD, "shapes differ: A %s is %s, B %s is %s", in[0].path,
                          cli_shape_str(a, sa, sizeof sa), in[1].path,
                          cli_shape_str(b, sb, sizeof sb));
        } else {
            comparison r = compare_arrays(a, b);
            rc = report(a, b, &r, rtol, atol);
        }
    }
    kdalab_array_free(&in[0].a);
    kdalab_array_free(&in[1].a);
    return rc;
}
