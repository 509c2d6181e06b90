/*
 * lib/simd/recurrent.c — the recurrent form on the optimized path: the
 * decode step of the level in use (lib/simd/levels.c) token by token, the
 * heads spread over OpenMP threads.
 *
 * defines: kdalab__simd_recurrent_f32, on a call kdalab_run_f32 has validated
 * (lib/call/call.c; the public kdalab_simd_recurrent_f32 reaches it through it)
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "simd_internal.h"


kdalab_status kdalab__simd_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                         float scale, const float *q, const float *k,
                                         const float *v, const float *g, const float *beta,
                                         const float *h0, float *o, float *ht)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V); beta is (B, T, H);
    // g is (B, T, H) or (B, T, H, K); h0, ht are (B, H, K, V)
    kdalab_counts n;
    kdalab_count_dims(dims, mech, sizeof(float), &n); /* validated: cannot fail */
    const simd_table *tab = kdalab__simd_table_active();
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t gw = kdalab_mechanism_g_width(mech, K), KV = K * V;
    size_t bytes = (KV * sizeof(float) + 63) / 64 * 64; /* a state on its own cache lines */
    const int nth = kdalab__threads_for(B * H); /* a state per thread */
    float **S = calloc((size_t)nth, sizeof *S);
    int ok = S != NULL;
    for (int t = 0; ok && t < nth; t++)
        ok = (S[t] = aligned_alloc(64, bytes)) != NULL;
    if (!ok) {
        for (int t = 0; S && t < nth; t++)
            free(S[t]);
        free(S);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for %d states of %zu x %zu", nth, K, V);
    }
    int nomem = 0;
#pragma omp parallel num_threads(nth) reduction(| : nomem)
    {
        const int mode = kdalab__nearest_begin(); /* the same bits on any thread count */
#pragma omp for schedule(dynamic, 1)
        for (size_t bh = 0; bh < B * H; bh++) {
            float *St = S[omp_get_thread_num()];
            size_t b = bh / H, h = bh % H;
            if (h0)
                memcpy(St, h0 + bh * KV, KV * sizeof *St);
            else
                memset(St, 0, KV * sizeof *St);
            int broken = 0; /* the state overflowed: the rest of this head is NaN */
            for (size_t t = 0; t < T; t++) {
                size_t row = (b * T + t) * H + h; /* index into [B, T, H] */
                size_t bad = 0;
                kdalab_status st = broken ? KDALAB_ENONFINITE
                                          : tab->step(mech, K, V, scale, q + row * K, k + row * K,
                                                      v + row * V, gw ? g + row * gw : NULL,
                                                      beta ? beta[row] : 0.0f, St, o + row * V,
                                                      &bad);
                if (st == KDALAB_ERANGE) /* taken, and overflowed: o is written */
                    broken = 1;
                else if (st != KDALAB_OK) { /* not taken (S non-finite, or no memory) */
                    if (st == KDALAB_ENOMEM)
                        nomem = 1;
                    broken = 1;
                    for (size_t j = 0; j < V; j++)
                        o[row * V + j] = NAN;
                }
            }
            if (ht)
                memcpy(ht + bh * KV, St, KV * sizeof *St);
        }
        kdalab__nearest_end(mode);
    }
    for (int t = 0; t < nth; t++)
        free(S[t]);
    free(S);
    if (nomem) /* a step's scratch for K or V > the kernel's stack buffer */
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a decode step of K = %zu, V = %zu",
                           K, V);
    return kdalab_check_outputs_f32("SIMD recurrent form", o, n.v, ht, n.state, NULL, NULL);
}
