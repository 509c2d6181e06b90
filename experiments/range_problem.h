/*
 * experiments/range_problem.h — experiment 03's problem: one head of KDA (or
 * of the DPLR boundary) at a constant log-decay, in float64 and float32, run
 * through the one call (experiments/range_problem.c).
 */
#ifndef KDALAB_EXPERIMENTS_RANGE_PROBLEM_H
#define KDALAB_EXPERIMENTS_RANGE_PROBLEM_H

#include <gsl/gsl_rng.h>

#include "common.h"
#include "kdalab.h"

/* One KDA (or DPLR) problem in float64 and its float32 copy. */
typedef struct {
    kdalab_mechanism mech;
    kdalab_dims d;
    size_t nqk, nv, nbth, nst;
    double scale;
    double *q, *k, *v, *beta, *g, *o_ref, *o, *ht;
    double *a, *b; /* the DPLR row's low-rank term (NULL for KDA) */
    float *qf, *kf, *vf, *betaf, *gf, *of, *htf, *af, *bf;
} problem;

/* A problem of T positions, K keys, V values for mech (KDA, or the DPLR row
 * with RWKV-7's a, b): unit q, k, v ~ N(0,1), beta ~ U(0,1); g set later. */
void problem_make(const lab_ctx *x, problem *pb, gsl_rng *rng, size_t T, size_t K, size_t V,
                  kdalab_mechanism mech);
void problem_free(problem *pb);

/* One run of the problem's mechanism through the one call: float64 (o64,
 * ht64) or float32 (o32, ht32), recurrent (opts NULL) or chunkwise. */
kdalab_status run_form(problem *pb, int f64, const kdalab_chunk_opts *opts, kdalab_report *rep,
                       double *o64, double *ht64, float *o32, float *ht32);

/* Set the constant per-step log-decay g (<= 0) on every position and channel
 * and recompute the float64 recurrent reference o_ref. */
void problem_set_g(const lab_ctx *x, problem *pb, double g);

/* The float64 recurrent form on inputs rounded to storage format kp: the
 * bf16 / fp16 floor (written into pb->o). */
double rounding_floor(const lab_ctx *x, problem *pb, kdalab_precision kp);

#endif
