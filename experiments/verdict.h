/*
 * experiments/verdict.h — the verdict rule of the trained experiments
 * (experiments/verdict.c; experiments/README.md "The verdict rule"), written
 * once and applied by every program that compares two trained models.
 *
 * A comparison of A with B is paired by seed: seed s trains both on the same
 * batches and tests both on the same test set (a run's data is a function of
 * its seed), so d_s = acc_A(s) - acc_B(s) removes what the seed's data does
 * to both. Over the n paired seeds the rule takes the mean difference
 * and its 95 % interval from Student's t with n - 1 degrees of freedom:
 *   mean +- t_{0.975, n-1} sd(d) / sqrt(n)
 * and says
 *   "ahead"          the interval lies above 0,
 *   "behind"         the interval lies below 0,
 *   "level"          the interval lies inside +-margin (LAB_VERDICT_MARGIN),
 *   "not resolved"   otherwise (more seeds might settle it),
 * each only with n >= LAB_VERDICT_SEEDS; with fewer seeds it says "not
 * resolved" whatever the interval, and prints it. A seed at which a model
 * never left the no-recall loss (test loss >= LAB_STUCK_FRACTION of it) is
 * counted and named for each side: it stays in the mean (leaving it out
 * would hide a failure to train), and the line says how many there were.
 * A model can also fail above that loss: on a recall task it can learn that
 * the answer is one of the values in its context, not which (test loss near
 * ln P with P pairs, accuracy near 1/P). So every seed with accuracy below
 * LAB_FAIL_ACCURACY is counted and named too, stuck or not.
 */
#ifndef KDALAB_EXPERIMENTS_VERDICT_H
#define KDALAB_EXPERIMENTS_VERDICT_H

#include <stddef.h>
#include <stdio.h>

/* The fewest paired seeds for an ahead / behind / level word. */
#define LAB_VERDICT_SEEDS 8
/* "level": the whole 95 % interval within +-0.05 of accuracy. */
#define LAB_VERDICT_MARGIN 0.05
/* A model is stuck at a seed when its test loss is at least this fraction
 * of the no-recall loss (the loss of a model that knows what kind of token
 * an answer is, not which: lab_no_recall_loss). */
#define LAB_STUCK_FRACTION 0.9
/* A model failed at a seed when its test accuracy is below this. */
#define LAB_FAIL_ACCURACY 0.5
/* The most seeds a verdict names (a sweep's seeds, as lab_verdict takes them). */
#define LAB_VERDICT_MAX_SEEDS 64

typedef enum {
    LAB_AHEAD,
    LAB_BEHIND,
    LAB_LEVEL,
    LAB_NOT_RESOLVED
} lab_outcome;

/* One side of a comparison: its name as printed, and per paired seed
 * (index i is seed first_seed + i) its test accuracy and test loss. */
typedef struct {
    const char *name;
    const double *acc, *loss;
} lab_side;

/* What the rule found. */
typedef struct {
    size_t n;              /* paired seeds                                      */
    double mean, lo, hi;   /* mean of acc_A - acc_B and its 95 % t interval      */
                           /* (lo = hi = mean with one seed)                     */
    lab_outcome outcome;
    int enough;            /* n >= LAB_VERDICT_SEEDS                             */
    size_t stuck[2];       /* seeds stuck at the no-recall loss, A and B         */
    unsigned long stuck_seed[2][LAB_VERDICT_MAX_SEEDS]; /* which (seed numbers)   */
    size_t failed[2];      /* seeds with accuracy < LAB_FAIL_ACCURACY, A and B   */
    unsigned long failed_seed[2][LAB_VERDICT_MAX_SEEDS]; /* which (seed numbers)  */
} lab_verdict;

/* Apply the rule to A and B over n paired seeds (1 <= n <=
 * LAB_VERDICT_MAX_SEEDS; seeds first_seed, first_seed + 1, ...) with the
 * task's no-recall loss (> 0). Exits (status 2) with one line on an n out of
 * range or a non-finite accuracy; a diverged run's accuracy 0 and loss inf
 * are a result (and stuck). */
void lab_verdict_apply(const lab_side *a, const lab_side *b, size_t n,
                       unsigned long first_seed, double no_recall_loss, lab_verdict *v);

/* The rule's outcome as words: "ahead of", "behind", "level with", "not
 * resolved against". */
const char *lab_outcome_words(lab_outcome o);

/* One line to f: "  verdict (what): A <outcome> B: mean difference ... [lo, hi]
 * over n paired seeds (95 % t interval) ...", with the seeds each side
 * failed at (accuracy < LAB_FAIL_ACCURACY) and was stuck at, and why a
 * verdict with fewer than LAB_VERDICT_SEEDS seeds is not resolved. */
void lab_verdict_print(FILE *f, const char *what, const lab_side *a, const lab_side *b,
                       const lab_verdict *v);

/* Is a model with this test loss stuck at the no-recall loss (loss >=
 * LAB_STUCK_FRACTION of it, or not a number)? The rule once, for the
 * verdicts and the experiments' summaries. */
int lab_is_stuck(double loss, double no_recall_loss);

/* How many of loss[0..n) are stuck (lab_is_stuck). */
size_t lab_stuck_count(const double *loss, size_t n, double no_recall_loss);

/* The exact two-sided sign test of a against b: the probability, under
 * equal odds, of a split of a + b discordant pairs at least as uneven as
 * this one (2 P(X <= min(a, b)), X ~ Binomial(a + b, 1/2), at most 1; 1
 * when a + b = 0). For counts pooled over several comparisons, such as the
 * (design, seed) pairs where only one side failed: a description of the
 * pooled counts, not a verdict of the rule. */
double lab_sign_test_p(size_t a, size_t b);

/* The no-recall loss of a task whose answers can be any of `answers`
 * tokens (a recall task's values, the palindrome's W - 1 string tokens, the
 * stack's values): ln(answers), the loss of a uniform guess among them. */
double lab_no_recall_loss(size_t answers);

#endif /* KDALAB_EXPERIMENTS_VERDICT_H */
