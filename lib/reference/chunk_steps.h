/*
 * lib/reference/chunk_steps.h — the steps of the float64 chunkwise form
 * (lib/reference/chunk_steps.c), run by chunk.c's forward and recomputed by
 * its backward.
 * Internal: not installed, not exported.
 */
#ifndef KDALAB_REFERENCE_CHUNK_STEPS_H
#define KDALAB_REFERENCE_CHUNK_STEPS_H

#include "internal.h"

/* One chunk of one head: its rows, their decay, and the step-by-step results.
 * Every buffer is sized for a full chunk of C positions. The decay mode and
 * the emulated storage are parameters of the steps (zero: safe, plain). */
typedef struct {
    size_t L, K, V; /* positions in this chunk (<= C), key and value dims   */
    size_t sub;     /* c, positions per sub-chunk of the decayed Gram matrices */
    int delta;      /* 1 for the delta rule (not linear attention)           */
    int per_key;    /* 1: g is per key channel; 0: per head or none          */
    int ab;         /* 1: the DPLR term b a^T (kdalab_mechanism_has_ab)       */
    kdalab_decay_mode decay;    /* how steps 1 and 5 form a per-key decay     */
    kdalab_precision precision; /* the float32 twin's emulated storage        */
    double max_exponent; /* f64-scalar: the largest exponent formed (>= 0) */
    double *q, *k;  // (L, K)  the chunk's queries and keys
    double *v;      // (L, V)  its values
    double *beta;   // (L)     write strengths (1 for linear attention)
    double *g;      // (L, K)  log-decay per channel (0 without decay)
    double *gamma;  // (L, K)  exp(g_0 + ... + g_r)
    double *to_end; // (L, K)  exp(g_{r+1} + ... + g_{L-1})
    double *Gkk;    // (L, L)  the decayed Gram matrix of the keys (strictly lower)
    double *Akk;    // (L, L)  step 1: Diag(beta) Gkk
    double *Aqk;    // (L, L)  step 5 (lower triangular)
    double *W;      // (L, K)  step 3
    double *U;      // (L, V)  step 3
    double *Vn;     // (L, V)  step 4: V_new
    double *xa, *yb; // (L, K) rows decayed to and from a sub-chunk anchor
    double *E;       // (L, K) g summed from a sub-chunk's anchor through each row
    double *run;     // (K)    a running span sum of g
    double *a, *b;   // (L, K) DPLR: the low-rank term's rows (NULL otherwise)
    double *ash;     // (L, K) DPLR: a shifted up one row (row r = a_{r+1}, last 0)
    double *Aqb;     // (L, L) DPLR: A_qb (lower triangular)
} chunk_work;

/* x . y over n values. */
double kdalab__chunk_dot(const double *x, const double *y, size_t n);

/* Buffers for chunks of up to C positions (ck->K, V, sub, delta, ab set by
 * the caller; a, b, ash, Aqb only when ab). EOVERFLOW / ENOMEM on failure,
 * with nothing left allocated. */
kdalab_status kdalab__chunk_alloc(chunk_work *ck, size_t C, size_t K, size_t V);
void kdalab__chunk_free(chunk_work *ck);

/* Copy positions t0 .. t0+ck->L-1 of head (b, h) into the chunk's rows. */
void kdalab__chunk_load(chunk_work *ck, const kdalab_dims *d, size_t b, size_t h, size_t t0,
                        const double *q, const double *k, const double *v, const double *g,
                        size_t gw, const double *beta);

/* gamma and to_end of the loaded chunk. */
void kdalab__chunk_decay_factors(chunk_work *ck);

/* Steps 1 and 5: out (L, L) = the decayed Gram matrix of X, Y (L, K), j < i
 * (j <= i with with_diag), in the chunk's decay mode (safe sub-chunks by
 * default). */
void kdalab__chunk_decayed_gram(chunk_work *ck, const double *X, const double *Y, int with_diag,
                                double *out);

/* Step 2: solve (I + A_kk) X = X in place, X (L, width). */
void kdalab__chunk_ut_transform(const chunk_work *ck, double *X, size_t width);

/* Steps 1-4 from the state S (K, V) entering the chunk: Gkk, Akk, W, U, Vn. */
void kdalab__chunk_corrected_values(chunk_work *ck, const double *S);

/* Steps 5-6: the chunk's outputs, row i at o + i * o_stride (V values). */
void kdalab__chunk_outputs(chunk_work *ck, const double *S, double scale, double *o,
                           size_t o_stride);

/* Step 7: S (K, V) <- Diag(gamma_{L-1}) S + (to_end * K)^T V_new. */
void kdalab__chunk_advance_state(const chunk_work *ck, double *S);

/*
 * The DPLR rows (ck->ab; REFERENCE.md "The boundary", steps 1-5), with
 * u_r = S_{r-1}^T a_r the low-rank term's read of the state:
 *   load_ab          a, b (B, T, H, K) of head (b, h), positions t0.. -> ck->a, ck->b
 *   dplr_reads       steps 1-3: A_ab (in ck->Akk) and A_ak (in ck->Gkk), the
 *                    decayed Gram matrices of a's rows one position back
 *                    against b's and k's (j < i), and the solve
 *                    (I - A_ab) U = (a * gamma_{i-1}) S + A_ak V  -> ck->U (L, V)
 *   dplr_outputs     step 4: O = s ((gamma * Q) S + A_qb U + A_qk V)
 *   dplr_advance     step 5: S <- Diag(gamma_{L-1}) S + (to_end * B)^T U
 *                    + (to_end * K)^T V
 * Every decayed product goes through kdalab__chunk_decayed_gram, so the
 * decay modes apply as they do to KDA.
 */
void kdalab__chunk_load_ab(chunk_work *ck, const kdalab_dims *d, size_t b, size_t h, size_t t0,
                           const double *a, const double *bb);
void kdalab__chunk_dplr_reads(chunk_work *ck, const double *S);
void kdalab__chunk_dplr_outputs(chunk_work *ck, const double *S, double scale, double *o,
                                size_t o_stride);
void kdalab__chunk_dplr_advance(const chunk_work *ck, double *S);

#endif
