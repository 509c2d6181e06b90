/*
 * lib/train/loss.c — softmax cross-entropy over a vocabulary at the
 * positions that have a target (-1 marks the others), with its accuracy and
 * its backward, in float64.
 *
 * defines: kdalab_cross_entropy_fwd_f64, kdalab_cross_entropy_bwd_f64
 *
 * logsumexp is formed around the row's maximum, m + log(sum exp(l - m)),
 * so every exponent is <= 0 and the loss is finite for any finite logits.
 */
#include <math.h>
#include <stdint.h>

#include "internal.h"
#include "train_internal.h"

static kdalab_status ce_check(size_t N, size_t V, const double *logits,
                              const int32_t *targets, size_t *n, size_t *counted)
{
    size_t bytes;
    if (V == 0)
        return kdalab_fail(KDALAB_ESIZE, "V = 0: the vocabulary is empty");
    if (!kdalab_mul_size(N, V, n) || !kdalab_mul_size(*n, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "N = %zu, V = %zu: N * V logits overflow", N, V);
    if (N && (!logits || !targets))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", !logits ? "logits" : "targets");
    kdalab_status s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "logits", logits, *n, NULL);
    if (s != KDALAB_OK)
        return s;
    *counted = 0;
    for (size_t r = 0; r < N; r++) {
        if (targets[r] == -1)
            continue;
        if (targets[r] < 0 || (uint64_t)targets[r] >= (uint64_t)V)
            return kdalab_fail(KDALAB_EDOMAIN,
                               "targets[%zu] = %d: a target is -1 (not counted) or in "
                               "[0, V = %zu)",
                               r, (int)targets[r], V);
        (*counted)++;
    }
    return KDALAB_OK;
}

/* The maximum of a row l [V] and log(sum exp(l - max)). */
static double row_max(size_t V, const double *l)
{
    double m = l[0];
    for (size_t v = 1; v < V; v++)
        if (l[v] > m)
            m = l[v];
    return m;
}

static double log_sum_exp_shifted(size_t V, const double *l, double m)
{
    double sum = 0;
    for (size_t v = 0; v < V; v++)
        sum += exp(l[v] - m);
    return log(sum); /* sum >= 1: the maximum contributes exp(0) */
}

kdalab_status kdalab_cross_entropy_fwd_f64(size_t N, size_t V, const double *logits,
                                           const int32_t *targets, double *loss,
                                           double *accuracy, size_t *counted)
{
    // logits is (N, V); targets is (N)
    kdalab_clear_error();
    size_t n, cnt;
    kdalab_status s = ce_check(N, V, logits, targets, &n, &cnt);
    if (s == KDALAB_OK && !loss)
        s = kdalab_fail(KDALAB_ENULL, "loss is NULL");
    if (s != KDALAB_OK)
        return s;
    double total = 0;
    size_t right = 0;
    for (size_t r = 0; r < N; r++) {
        if (targets[r] == -1)
            continue;
        const double *l = logits + r * V;
        double m = row_max(V, l);
        total += m + log_sum_exp_shifted(V, l, m) - l[targets[r]];
        size_t argmax = 0; /* the first maximum */
        while (l[argmax] != m)
            argmax++;
        right += argmax == (size_t)targets[r];
    }
    *loss = cnt ? total / (double)cnt : 0;
    if (accuracy)
        *accuracy = cnt ? (double)right / (double)cnt : 0;
    if (counted)
        *counted = cnt;
    return kdalab_check_outputs_f64("cross-entropy", loss, 1, NULL, 0, NULL, NULL);
}

kdalab_status kdalab_cross_entropy_bwd_f64(size_t N, size_t V, const double *logits,
                                           const int32_t *targets, double dloss,
                                           double *dlogits)
{
    // logits, dlogits are (N, V); targets is (N)
    kdalab_clear_error();
    size_t n, cnt;
    kdalab_status s = ce_check(N, V, logits, targets, &n, &cnt);
    if (s == KDALAB_OK && !isfinite(dloss))
        s = kdalab_fail(KDALAB_ENONFINITE, "dloss is %g: inputs must be finite", dloss);
    if (s == KDALAB_OK && n && !dlogits)
        s = kdalab_fail(KDALAB_ENULL, "dlogits is NULL");
    if (s != KDALAB_OK)
        return s;
    double scale = cnt ? dloss / (double)cnt : 0;
    for (size_t r = 0; r < N; r++) {
        const double *l = logits + r * V;
        double *dl = dlogits + r * V;
        if (targets[r] == -1) {
            for (size_t v = 0; v < V; v++)
                dl[v] = 0;
            continue;
        }
        double m = row_max(V, l), lse = log_sum_exp_shifted(V, l, m);
        for (size_t v = 0; v < V; v++)
            dl[v] = scale * exp(l[v] - m - lse); /* softmax, each <= 1 */
        dl[targets[r]] -= scale;
    }
    return kdalab_check_outputs_f64("cross-entropy backward", dlogits, n, NULL, 0, NULL,
                                    NULL);
}
