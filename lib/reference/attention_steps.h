/*
 * lib/reference/attention_steps.h — the one-query step of causal softmax
 * attention (lib/reference/attention.c), shared with the KV cache
 * (kv_cache.c). Internal: not installed, not exported.
 */
#ifndef KDALAB_REFERENCE_ATTENTION_STEPS_H
#define KDALAB_REFERENCE_ATTENTION_STEPS_H

#include <stddef.h>

/*
 * o (V) = sum_{j<n} softmax_j(scale q . k_j) v_j over n keys/values whose rows
 * sit stride elements apart (k_j = k + j*kstride, v_j = v + j*vstride); q is
 * (K). One pass with a running maximum (the online softmax), so no exp() sees
 * a positive argument. n >= 1.
 */
void kdalab__attention_attend(size_t K, size_t V, double scale, const double *q, const double *k,
                              size_t kstride, const double *v, size_t vstride, size_t n, double *o);

#endif
