/*
 * experiments/verdict.c — the verdict rule of the trained experiments
 * (verdict.h): a paired comparison over seeds, its 95 % t interval, and the
 * seeds each model failed and was stuck at.
 *
 * defines: lab_verdict_apply, lab_outcome_words, lab_verdict_print, lab_no_recall_loss,
 *          lab_is_stuck, lab_stuck_count, lab_sign_test_p
 */
#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_cdf.h>

#include "verdict.h"

void lab_verdict_apply(const lab_side *a, const lab_side *b, size_t n,
                       unsigned long first_seed, double no_recall_loss, lab_verdict *v)
{
    if (n < 1 || n > LAB_VERDICT_MAX_SEEDS || !(no_recall_loss > 0)) {
        fprintf(stderr, "verdict: %zu seeds and a no-recall loss of %g: the rule takes 1 .. %d "
                        "seeds and a loss > 0\n", n, no_recall_loss, LAB_VERDICT_MAX_SEEDS);
        exit(2);
    }
    const lab_side *side[2] = {a, b};
    *v = (lab_verdict){.n = n, .enough = n >= LAB_VERDICT_SEEDS};
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a->acc[i]) || !isfinite(b->acc[i])) {
            fprintf(stderr, "verdict: %s against %s: seed %lu has accuracy %g and %g\n",
                    a->name, b->name, first_seed + i, a->acc[i], b->acc[i]);
            exit(2);
        }
        sum += a->acc[i] - b->acc[i];
        for (int k = 0; k < 2; k++) {
            if (lab_is_stuck(side[k]->loss[i], no_recall_loss))
                v->stuck_seed[k][v->stuck[k]++] = first_seed + i;
            if (side[k]->acc[i] < LAB_FAIL_ACCURACY)
                v->failed_seed[k][v->failed[k]++] = first_seed + i;
        }
    }
    v->mean = sum / (double)n;
    v->lo = v->hi = v->mean;
    if (n > 1) {
        double ss = 0;
        for (size_t i = 0; i < n; i++) {
            const double e = a->acc[i] - b->acc[i] - v->mean;
            ss += e * e;
        }
        const double half = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1)) * sqrt(ss / (double)(n - 1)) /
                            sqrt((double)n);
        v->lo = v->mean - half;
        v->hi = v->mean + half;
    }
    v->outcome = !v->enough                         ? LAB_NOT_RESOLVED
                 : v->lo > 0                        ? LAB_AHEAD
                 : v->hi < 0                        ? LAB_BEHIND
                 : v->lo >= -LAB_VERDICT_MARGIN && v->hi <= LAB_VERDICT_MARGIN ? LAB_LEVEL
                                                    : LAB_NOT_RESOLVED;
}

const char *lab_outcome_words(lab_outcome o)
{
    switch (o) {
    case LAB_AHEAD: return "ahead of";
    case LAB_BEHIND: return "behind";
    case LAB_LEVEL: return "level with";
    default: return "not resolved against";
    }
}

/* x with its sign and three decimals, or, when those would show a nonzero
 * x as 0.000 ("-0.000" for a small negative one), two significant digits:
 * -4.2e-04. */
static const char *signed3(char *buf, size_t n, double x)
{
    snprintf(buf, n, x != 0 && fabs(x) < 0.0005 ? "%+.1e" : "%+.3f", x);
    return buf;
}

/* "; NAME WHAT in k of n (seeds s1, s2)" */
static void print_seeds(FILE *f, const char *name, const char *what, size_t k, size_t n,
                        const unsigned long *seed)
{
    fprintf(f, "; %s %s in %zu of %zu (seed%s", name, what, k, n, k == 1 ? "" : "s");
    for (size_t i = 0; i < k; i++)
        fprintf(f, "%s %lu", i ? "," : "", seed[i]);
    fputc(')', f);
}

void lab_verdict_print(FILE *f, const char *what, const lab_side *a, const lab_side *b,
                       const lab_verdict *v)
{
    char m[24], lo[24], hi[24];
    fprintf(f, "  verdict (%s): %s %s %s", what, a->name, lab_outcome_words(v->outcome), b->name);
    if (v->outcome == LAB_LEVEL)
        fprintf(f, " (within +-%.2f)", LAB_VERDICT_MARGIN);
    fprintf(f, ": mean difference %s", signed3(m, sizeof m, v->mean));
    if (v->n > 1)
        fprintf(f, " [%s, %s]", signed3(lo, sizeof lo, v->lo), signed3(hi, sizeof hi, v->hi));
    fprintf(f, " over %zu paired seed%s%s", v->n, v->n == 1 ? "" : "s",
            v->n > 1 ? " (95 % t interval)" : "");
    if (!v->enough)
        fprintf(f, "; fewer than %d seeds: the rule names no order", LAB_VERDICT_SEEDS);
    const lab_side *side[2] = {a, b};
    char below[40];
    snprintf(below, sizeof below, "below %.1f accuracy", LAB_FAIL_ACCURACY);
    for (int k = 0; k < 2; k++) {
        if (v->failed[k])
            print_seeds(f, side[k]->name, below, v->failed[k], v->n,
                        v->failed_seed[k]);
        if (v->stuck[k])
            print_seeds(f, side[k]->name, "stuck at the no-recall loss", v->stuck[k], v->n,
                        v->stuck_seed[k]);
    }
    fputc('\n', f);
}

double lab_sign_test_p(size_t a, size_t b)
{
    const size_t n = a + b, k = a < b ? a : b;
    if (n == 0)
        return 1.0;
    const double p = 2.0 * gsl_cdf_binomial_P((unsigned)k, 0.5, (unsigned)n);
    return p < 1.0 ? p : 1.0;
}

double lab_no_recall_loss(size_t answers)
{
    return log((double)(answers > 1 ? answers : 1));
}

int lab_is_stuck(double loss, double no_recall_loss)
{
    return !(loss < LAB_STUCK_FRACTION * no_recall_loss); /* a NaN loss: no evidence of learning */
}

size_t lab_stuck_count(const double *loss, size_t n, double no_recall_loss)
{
    size_t stuck = 0;
    for (size_t i = 0; i < n; i++)
        stuck += lab_is_stuck(loss[i], no_recall_loss);
    return stuck;
}
