/*
 * lib/reference/chunk.c — the chunkwise form in float64, in every decay
 * mode (safe sub-chunks by default): REFERENCE.md "Chunkwise form", steps
 * 1-7, one function per step (chapters 04-06; fla's naive_chunk_kda is the
 * same algorithm). Its backward is chunk_bwd.c.
 *
 * defines: kdalab__chunk_f64 (forward), on a call kdalab_run_f64 has
 *          validated (lib/call/call.c; the public kdalab_chunk_f64 reaches it
 *          through it); its steps, which the backward (chunk_bwd.c)
 *          recomputes, are in chunk_steps.c
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
 * takes care: they use safe sub-chunks (kdalab__chunk_decayed_gram in
 * chunk_steps.c). The other decay modes, which form positive exponents and
 * are studied in experiment 03, are a parameter of the same step, and the
 * float32 twin's emulated bf16 / fp16 storage a parameter of every step
 * that stores a value: one algorithm, whatever the mode and precision.
 *
 * Every mechanism of the table runs the same code: a per-key g is per channel, a
 * per-head g (one per position) is used for every channel, and no decay is
 * g = 0 (every decay factor exactly 1). Without the delta rule (linear
 * attention, simple GLA, GLA) there is no correction: A_kk = 0, beta = 1, W = 0, U = V.
 * A row with the DPLR term b a^T (kdalab_mechanism_has_ab) replaces steps 1-7
 * by the boundary's five (REFERENCE.md "The boundary"; chunk_steps.h): its
 * products are decayed Gram matrices of the same function, so the decay
 * modes and the emulated storage apply unchanged.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "chunk_steps.h"

/* ---- the forward --------------------------------------------------------- */

kdalab_status kdalab__chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech, double scale,
                                const double *q, const double *k, const double *v,
                                const double *g, const double *beta, const double *a,
                                const double *bb, const double *h0, double *o, double *ht,
                                const kdalab_chunk_opts *opts, kdalab_report *report)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V); beta is (B, T, H);
    // g is (B, T, H) or (B, T, H, K); a, bb are (B, T, H, K) (DPLR) or NULL;
    // h0, ht are (B, H, K, V)
    kdalab_counts n;
    kdalab_count_dims(dims, mech, sizeof(double), &n); /* validated: cannot fail */
    const kdalab_chunk_opts op = *opts;
    kdalab_status s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1); /* no buffer larger than T */
    const size_t gw = kdalab_mechanism_g_width(mech, K);
    chunk_work ck = {.K = K, .V = V, .sub = op.subchunk, .delta = kdalab_mechanism_has_delta(mech),
                     .per_key = kdalab_mechanism_g_shape(mech) == KDALAB_G_PER_KEY,
                     .ab = kdalab_mechanism_has_ab(mech), .decay = op.decay,
                     .precision = op.precision};
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
                double *ot = o + ((b * T + t0) * H + h) * V;
                kdalab__chunk_load(&ck, dims, b, h, t0, q, k, v, g, gw, beta);
                kdalab__chunk_decay_factors(&ck);
                if (ck.ab) { /* the boundary's steps 1-5 */
                    kdalab__chunk_load_ab(&ck, dims, b, h, t0, a, bb);
                    kdalab__chunk_dplr_reads(&ck, S);                /* 1-3 */
                    kdalab__chunk_dplr_outputs(&ck, S, scale, ot, H * V); /* 4 */
                    kdalab__chunk_dplr_advance(&ck, S);              /* 5 */
                    continue;
                }
                kdalab__chunk_corrected_values(&ck, S); /* 1-4 */
                kdalab__chunk_outputs(&ck, S, scale, ot, H * V); /* 5-6 */
                kdalab__chunk_advance_state(&ck, S); /* 7 */
            }
            if (ht)
                memcpy(ht + bh * K * V, S, K * V * sizeof *S);
        }
    kdalab__chunk_free(&ck);
    free(S);

    kdalab_report rep = {.max_exponent = ck.max_exponent}; /* 0 in the safe and pairwise modes */
    char what[96];
    snprintf(what, sizeof what, "chunkwise form (decay mode '%s', largest exponent %g)",
             kdalab_decay_name(op.decay), ck.max_exponent);
    s = kdalab_check_outputs_f64(what, o, n.v, ht, n.state, &rep.nonfinite_o,
                                 &rep.nonfinite_ht);
    if (report)
        *report = rep;
    return s;
}
