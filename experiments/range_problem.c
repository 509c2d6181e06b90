/*
 * experiments/range_problem.c — experiment 03's problem (range_problem.h):
 * its inputs, one run through the one call, the float64 reference, and the
 * rounding floor of a storage format.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "range_problem.h"

void problem_make(const lab_ctx *x, problem *pb, gsl_rng *rng, size_t T, size_t K,
                         size_t V, kdalab_mechanism mech)
{
    memset(pb, 0, sizeof *pb);
    pb->mech = mech;
    pb->d = (kdalab_dims){.B = 1, .T = T, .H = 1, .K = K, .V = V};
    pb->nqk = T * K;
    pb->nv = T * V;
    pb->nbth = T;
    pb->nst = K * V;
    pb->scale = kdalab_default_scale(K);
    pb->q = lab_zeros(x, pb->nqk);
    pb->k = lab_zeros(x, pb->nqk);
    pb->v = lab_zeros(x, pb->nv);
    pb->beta = lab_zeros(x, pb->nbth);
    pb->g = lab_zeros(x, pb->nqk);
    pb->o_ref = lab_zeros(x, pb->nv);
    pb->o = lab_zeros(x, pb->nv);
    pb->ht = lab_zeros(x, pb->nst);
    for (size_t t = 0; t < T; t++) {
        lab_random_unit(rng, pb->q + t * K, K);
        lab_random_unit(rng, pb->k + t * K, K);
        for (size_t j = 0; j < V; j++) pb->v[t * V + j] = gsl_ran_gaussian(rng, 1.0);
        pb->beta[t] = gsl_rng_uniform(rng);
    }
    pb->qf = lab_floats(x, pb->q, pb->nqk);
    pb->kf = lab_floats(x, pb->k, pb->nqk);
    pb->vf = lab_floats(x, pb->v, pb->nv);
    pb->betaf = lab_floats(x, pb->beta, pb->nbth);
    pb->gf = lab_floats(x, NULL, pb->nqk); /* set with g by problem_set_g */
    pb->of = lab_floats(x, NULL, pb->nv);
    pb->htf = lab_floats(x, NULL, pb->nst);
    if (kdalab_mechanism_has_ab(mech)) { /* RWKV-7's a = -kk, b = kk * alpha */
        pb->a = lab_zeros(x, pb->nqk);
        pb->b = lab_zeros(x, pb->nqk);
        for (size_t t = 0; t < T; t++)
            lab_random_rwkv7_ab(rng, pb->a + t * K, pb->b + t * K, K);
        pb->af = lab_floats(x, pb->a, pb->nqk);
        pb->bf = lab_floats(x, pb->b, pb->nqk);
    }
}

/* One run of the problem's mechanism through the one call: float64 (o64,
 * ht64) or float32 (o32, ht32), recurrent (opts NULL) or chunkwise. */
kdalab_status run_form(problem *pb, int f64, const kdalab_chunk_opts *opts,
                              kdalab_report *rep, double *o64, double *ht64, float *o32,
                              float *ht32)
{
    const kdalab_call c = {.dims = pb->d, .HV = pb->d.H, .mech = pb->mech, .scale = pb->scale,
                           .form = opts ? KDALAB_FORM_CHUNK : KDALAB_FORM_RECURRENT,
                           .opts = opts};
    if (f64) {
        const kdalab_tensors_f64 t = {.q = pb->q, .k = pb->k, .v = pb->v, .g = pb->g,
                                      .beta = pb->beta, .a = pb->a, .b = pb->b, .o = o64,
                                      .ht = ht64};
        return kdalab_run_f64(&c, &t, rep);
    }
    const kdalab_tensors_f32 t = {.q = pb->qf, .k = pb->kf, .v = pb->vf, .g = pb->gf,
                                  .beta = pb->betaf, .a = pb->af, .b = pb->bf, .o = o32,
                                  .ht = ht32};
    return kdalab_run_f32(&c, &t, rep);
}

void problem_free(problem *pb)
{
    double *d[] = {pb->q, pb->k, pb->v, pb->beta, pb->g, pb->o_ref, pb->o, pb->ht, pb->a, pb->b};
    float *f[] = {pb->qf, pb->kf, pb->vf, pb->betaf, pb->gf, pb->of, pb->htf, pb->af, pb->bf};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) free(d[i]);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
}

/* Set the constant per-step log-decay g (<= 0) on every position and channel
 * and recompute the float64 recurrent reference. */
void problem_set_g(const lab_ctx *x, problem *pb, double g)
{
    for (size_t i = 0; i < pb->nqk; i++) {
        pb->g[i] = g;
        pb->gf[i] = (float)g;
    }
    lab_check(x, run_form(pb, 1, NULL, NULL, pb->o_ref, NULL, NULL, NULL),
              "recurrent_f64 reference");
}

/* The float64 recurrent form on inputs rounded to storage format kp: the
 * bf16 / fp16 floor. */
double rounding_floor(const lab_ctx *x, problem *pb, kdalab_precision kp)
{
    size_t nmax = pb->nqk > pb->nv ? pb->nqk : pb->nv;
    double *buf[5];
    for (int i = 0; i < 5; i++) buf[i] = lab_zeros(x, nmax);
    const double *src[5] = {pb->q, pb->k, pb->v, pb->g, pb->beta};
    size_t n[5] = {pb->nqk, pb->nqk, pb->nv, pb->nqk, pb->nbth};
    for (int i = 0; i < 5; i++)
        for (size_t j = 0; j < n[i]; j++) buf[i][j] = kdalab_round(kp, (float)src[i][j]);
    lab_check(x,
              kdalab_recurrent_f64(&pb->d, KDALAB_KDA, pb->scale, buf[0], buf[1], buf[2],
                                   buf[3], buf[4], NULL, pb->o, NULL),
              "recurrent_f64 on rounded inputs");
    double e = lab_rel_err(pb->o, NULL, pb->o_ref, pb->nv);
    for (int i = 0; i < 5; i++) free(buf[i]);
    return e;
}

