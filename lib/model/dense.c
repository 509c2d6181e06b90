/*
 * lib/model/dense.c — the dense row-vector arithmetic of the chapter's hybrid
 * stack: the projection y = x W and the sigmoid of the gate and of beta.
 * Plain loops in float64, no checks: the callers in forward.c have validated
 * the sizes and the inputs. Its RMSNorm and the L2 norm of q and k are the
 * library's one RMSNorm and one L2 normalisation (lib/train/layers.c).
 *
 * defines: kdalab__hybrid_matmul, kdalab__hybrid_sigmoid (hybrid_internal.h)
 */
#include <math.h>

#include "hybrid_internal.h"

/* x is [T, n_in], W [n_in, n_out], out [T, n_out]. */
void kdalab__hybrid_matmul(size_t T, size_t n_in, size_t n_out, const double *x, const double *W,
                           double *out, int accumulate)
{
    for (size_t t = 0; t < T; t++) {
        double *o = out + t * n_out;
        const double *xt = x + t * n_in;
        if (!accumulate)
            for (size_t j = 0; j < n_out; j++)
                o[j] = 0.0;
        for (size_t i = 0; i < n_in; i++) {
            double xi = xt[i];
            const double *w = W + i * n_out;
            for (size_t j = 0; j < n_out; j++)
                o[j] += xi * w[j];
        }
    }
}

double kdalab__hybrid_sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }
