/*
 * kdalab_grad.h — gradients: the backward of every form, and of the gate
 * functions models train with (each beside its forward: lib/reference/recurrent.c,
 * chunk.c, attention.c, gates.c).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 * The contract (REFERENCE.md, "Gradients"): a backward takes the forward's
 * inputs and the upstream gradients
 *   d_o  [B,T,H,V]   dL/do
 *   dht  [B,H,K,V]   dL/dht, or NULL for zero (the final state is not used)
 * and returns the gradients of L = sum(o * d_o) + sum(ht * dht) with respect to
 * each input, each in the layout of that input:
 *   dq, dk [B,T,H,K]; dv [B,T,H,V]; dbeta [B,T,H];
 *   dg [B,T,H] (Gated DeltaNet) or [B,T,H,K] (KDA); dh0 [B,H,K,V].
 * Every output may be NULL when not wanted; dg and dbeta are ignored for the
 * mechanisms without g or beta. dh0 is written whether or not h0 was given
 * (with h0 == NULL it is the gradient at the zero initial state).
 * Output arrays must not overlap any input array.
 *
 * Errors: those of the matching forward (with the same messages), plus
 * KDALAB_ENULL (d_o NULL while T > 0), KDALAB_ENONFINITE (NaN/Inf in d_o or
 * dht), KDALAB_ERANGE (finite inputs whose gradients overflowed: every
 * requested output is written). On any other error no output is touched.
 */
#ifndef KDALAB_GRAD_H
#define KDALAB_GRAD_H

#include "kdalab_forms.h"

KDALAB_BEGIN_DECLS

/*
 * kdalab_recurrent_bwd_f64 — the backward of kdalab_recurrent_f64: the
 * recurrence of REFERENCE.md run backwards in time, token by token
 * (REFERENCE.md "Gradients" table). States are recomputed from checkpoints
 * kept every 64 positions, so memory is O(T (K + V) + (T / 64) K V).
 * The oracle every other backward is checked against.
 */
kdalab_status kdalab_recurrent_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                       double scale, const double *q, const double *k,
                                       const double *v, const double *g, const double *beta,
                                       const double *h0, const double *d_o, const double *dht,
                                       double *dq, double *dk, double *dv, double *dg,
                                       double *dbeta, double *dh0);

/*
 * kdalab_chunk_bwd_f64 — the backward of kdalab_chunk_f64 as a chunkwise
 * algorithm: the chunk-boundary states are stored in a forward sweep, then
 * each chunk, last to first, recomputes its forward (decay factors, the
 * decayed Gram matrices, the UT transform, the corrected values) from its
 * boundary state and differentiates steps 7 to 1. Memory O(T (K + V) +
 * (T / C) K V). Every decay factor is a sum of g over its span, exponentiated
 * (<= 1): exact for any g <= 0, equal to kdalab_recurrent_bwd_f64 up to
 * rounding (~1e-12 relative). opts: NULL for kdalab_chunk_opts_default();
 * decay must be KDALAB_DECAY_SAFE and precision FP32 (else KDALAB_EINVAL).
 */
kdalab_status kdalab_chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                   double scale, const double *q, const double *k,
                                   const double *v, const double *g, const double *beta,
                                   const double *h0, const double *d_o, const double *dht,
                                   double *dq, double *dk, double *dv, double *dg,
                                   double *dbeta, double *dh0, const kdalab_chunk_opts *opts);

/*
 * The float32 backward: the same algorithms computed entirely in float32
 * (lib/reference/recurrent_f32.c, chunk_f32.c, generated from the float64 files by
 * scripts/make_f32.sh), to measure what float32 costs a backward. Same
 * arguments, shapes and errors as the float64 functions above.
 */
kdalab_status kdalab_recurrent_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                       float scale, const float *q, const float *k,
                                       const float *v, const float *g, const float *beta,
                                       const float *h0, const float *d_o, const float *dht,
                                       float *dq, float *dk, float *dv, float *dg,
                                       float *dbeta, float *dh0);
kdalab_status kdalab_chunk_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, const float *beta, const float *h0,
                                   const float *d_o, const float *dht, float *dq, float *dk,
                                   float *dv, float *dg, float *dbeta, float *dh0,
                                   const kdalab_chunk_opts *opts);

/*
 * kdalab_attention_bwd_f64 — the backward of kdalab_attention_f64 (causal
 * softmax attention, NoPE): with p_tj = softmax_j(s q_t . k_j),
 *   dv_j = sum_t p_tj d_o_t,   ds_tj = p_tj (d_o_t . v_j - d_o_t . o_t),
 *   dq_t = s sum_j ds_tj k_j,  dk_j = s sum_t ds_tj q_t.
 * q, k, dq, dk [B,T,H,K]; v, d_o, dv [B,T,H,V]. Errors as
 * kdalab_attention_f64 plus those above. Cost O(T^2 (K + V)) per head.
 */
kdalab_status kdalab_attention_bwd_f64(const kdalab_dims *dims, double scale, const double *q,
                                       const double *k, const double *v, const double *d_o,
                                       double *dq, double *dk, double *dv);
/* The same in float32 (lib/reference/attention_f32.c, generated). */
kdalab_status kdalab_attention_bwd_f32(const kdalab_dims *dims, float scale, const float *q,
                                       const float *k, const float *v, const float *d_o,
                                       float *dq, float *dk, float *dv);

/* ------------------------------------------------------------------------- */
/* Gates (lib/reference/gates.c)                                             */
/* ------------------------------------------------------------------------- */

/*
 * kdalab_kda_gate_f64 — fla's KDA gate (fla/ops/kda/gate.py, naive_kda_gate):
 *   g[r][h][c] = -exp(A_log[h]) * softplus(x[r][h][c] + dt_bias[h][c])
 * for r over BT = B * T rows (the gate is pointwise in time).
 *   x, g     [BT, H, K]  (g <= 0, the log-decay KDA takes)
 *   A_log    [H]
 *   dt_bias  [H, K], or NULL for zero
 * softplus is exact for every z (fla's switch to the identity above 20
 * differs by < 2.1e-9). Errors: KDALAB_ENULL, KDALAB_ESIZE (H or K zero),
 * KDALAB_EOVERFLOW, KDALAB_ENONFINITE (an input), KDALAB_ERANGE (exp(A_log)
 * overflowed; g written).
 */
kdalab_status kdalab_kda_gate_f64(size_t BT, size_t H, size_t K, const double *x,
                                  const double *A_log, const double *dt_bias, double *g);

/*
 * kdalab_kda_gate_bwd_f64 — its backward: given dg [BT, H, K] (dL/dg),
 *   dx [BT, H, K]     = -exp(A_log[h]) sigmoid(x + dt_bias) dg
 *   dA_log [H]        = sum over r, c of g dg
 *   ddt_bias [H, K]   = sum over r of dx
 * Any of dx, dA_log, ddt_bias may be NULL. Errors as kdalab_kda_gate_f64,
 * plus ENULL / ENONFINITE for dg.
 */
kdalab_status kdalab_kda_gate_bwd_f64(size_t BT, size_t H, size_t K, const double *x,
                                      const double *A_log, const double *dt_bias,
                                      const double *dg, double *dx, double *dA_log,
                                      double *ddt_bias);

/*
 * kdalab_lower_bound_gate_f64 — the lower-bounded gate g = lb * sigmoid(x)
 * (so lb <= g <= 0: the per-step decay is bounded, as production kernels need),
 * elementwise over n values. Its backward: dx = dg * lb * s (1 - s),
 * s = sigmoid(x). Errors: KDALAB_EOVERFLOW (n * sizeof(double) overflows),
 * KDALAB_EDOMAIN (lb not finite or > 0), KDALAB_ENULL, KDALAB_ENONFINITE,
 * KDALAB_ERANGE (the backward's dx overflowed from finite inputs; dx
 * written).
 */
kdalab_status kdalab_lower_bound_gate_f64(size_t n, double lb, const double *x, double *g);
kdalab_status kdalab_lower_bound_gate_bwd_f64(size_t n, double lb, const double *x,
                                              const double *dg, double *dx);

/* The gates in float32 (lib/reference/gates_f32.c, generated from
 * lib/reference/gates.c by scripts/make_f32.sh): the same formulas, shapes
 * and errors with float for double; the float32 model's gates. */
kdalab_status kdalab_kda_gate_f32(size_t BT, size_t H, size_t K, const float *x,
                                  const float *A_log, const float *dt_bias, float *g);
kdalab_status kdalab_kda_gate_bwd_f32(size_t BT, size_t H, size_t K, const float *x,
                                      const float *A_log, const float *dt_bias,
                                      const float *dg, float *dx, float *dA_log,
                                      float *ddt_bias);
kdalab_status kdalab_lower_bound_gate_f32(size_t n, float lb, const float *x, float *g);
kdalab_status kdalab_lower_bound_gate_bwd_f32(size_t n, float lb, const float *x,
                                              const float *dg, float *dx);

KDALAB_END_DECLS

#endif /* KDALAB_GRAD_H */
