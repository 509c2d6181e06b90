/*
 * lib/reference/chunk.c — the chunkwise form in float64, in the safe
 * sub-chunk mode: REFERENCE.md "Chunkwise form", steps 1-7, one function per
 * step (chapters 04-06; fla's naive_chunk_kda is the same algorithm).
 *
 * defines: kdalab_chunk_f64 (the steps are in chunk_steps.c); its float32
 *          twin chunk_f32.c, generated from this file, kdalab_chunk_f32
 *
 * Per head, the sequence is cut into chunks of C positions (the last may be
 * shorter). Inside a chunk of L positions r = 0..L-1, with S the state
 * entering it and g_r[c] the log-decay of position r and key channel c:
 *
 *   a value written at j and read at i >= j is decayed by
 *       exp(g_{j+1} + ... + g_i)                 (per channel; 1 when i == j)
 *   gamma_r  = exp(g_0 + ... + g_r)               decay from the chunk start through r
 *   to_end_r = exp(g_{r+1} + ... + g_{L-1})       decay from r to the chunk end
 *
 *   1. A_kk[i][j] = beta_i sum_c k_i[c] k_j[c] decay(j -> i)[c],  j < i
 *   2. T = (I + A_kk)^-1 Diag(beta)                       (the UT transform)
 *   3. W = T (gamma * K),  U = T V
 *   4. V_new = U - W S
 *   5. A_qk[i][j] = sum_c q_i[c] k_j[c] decay(j -> i)[c],  j <= i
 *   6. O = s ((gamma * Q) S + A_qk V_new)
 *   7. S <- Diag(gamma_{L-1}) S + (to_end * K)^T V_new
 *
 * Every exponent is a sum of g over the span it covers, so it is <= 0 and
 * exp() of it is <= 1: any g <= 0 (even -1000) decays to an exact 0 instead
 * of overflowing. The decayed Gram matrices of steps 1 and 5 are where that
 * takes care: they use safe sub-chunks (decayed_gram below). The other decay
 * modes, which form positive exponents and are studied in experiment 03, and
 * emulated bf16 / fp16 storage live in lib/study/chunk_modes.c.
 *
 * All four mechanisms run the same code: KDA's g is per channel, Gated
 * DeltaNet's one g per position is used for every channel, and DeltaNet and
 * linear attention have g = 0 (every decay factor exactly 1). Linear
 * attention has no correction: A_kk = 0, beta = 1, W = 0 and U = V.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "chunk_steps.h"

kdalab_status kdalab_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                               const double *q, const double *k, const double *v,
                               const double *g, const double *beta, const double *h0,
                               double *o, double *ht, const kdalab_chunk_opts *opts,
                               kdalab_report *report)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V); beta is (B, T, H);
    // g is (B, T, H) or (B, T, H, K); h0, ht are (B, H, K, V)
    kdalab_counts n;
    kdalab_chunk_opts op = {0};
    kdalab_status s = kdalab_check_f64(dims, mech, scale, q, k, v, g, beta, h0, o, &n);
    if (s == KDALAB_OK)
        s = kdalab_check_chunk_opts(opts, sizeof(double) == 8, &op); /* bf16/fp16: float32 only */
    if (s != KDALAB_OK)
        return s;
    /* the modes studied in experiment 03, and emulated bf16 / fp16 storage */
    if (op.decay != KDALAB_DECAY_SAFE || op.precision != KDALAB_FP32)
        return kdalab_study_chunk_f64(dims, mech, scale, q, k, v, g, beta, h0, o, ht, &op,
                                      report);

    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1); /* no buffer larger than T */
    const size_t gw = kdalab_mechanism_g_width(mech, K);
    chunk_work ck = {.K = K, .V = V, .sub = op.subchunk, .delta = mech != KDALAB_LINEAR_ATTENTION};
    double *S = malloc(K * V * sizeof *S); /* one head's state (K, V) */
    if (!S)
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a %zu x %zu state", K, V);
    s = kdalab__chunk_alloc(&ck, C, K, V);
    if (s != KDALAB_OK) {
        free(S);
        return s;
    }

    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            if (h0)
                memcpy(S, h0 + bh * K * V, K * V * sizeof *S);
            else
                memset(S, 0, K * V * sizeof *S); /* no h0: a zero state */
            for (size_t t0 = 0; t0 < T; t0 += C) {
                ck.L = t0 + C <= T ? C : T - t0;
                kdalab__chunk_load(&ck, dims, b, h, t0, q, k, v, g, gw, beta);
                kdalab__chunk_decay_factors(&ck);
                kdalab__chunk_corrected_values(&ck, S); /* 1-4 */
                kdalab__chunk_outputs(&ck, S, scale, o + ((b * T + t0) * H + h) * V,
                                      H * V); /* 5-6 */
                kdalab__chunk_advance_state(&ck, S); /* 7 */
            }
            if (ht)
                memcpy(ht + bh * K * V, S, K * V * sizeof *S);
        }
    kdalab__chunk_free(&ck);
    free(S);

    kdalab_report rep = {.max_exponent = 0}; /* the safe mode forms no positive exponent */
    s = kdalab_check_outputs_f64("chunkwise form (decay mode 'safe', largest exponent 0)", o,
                                 n.v, ht, n.state, &rep.nonfinite_o, &rep.nonfinite_ht);
    if (report)
        *report = rep;
    return s;
}
