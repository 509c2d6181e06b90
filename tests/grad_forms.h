/*
 * tests/grad_forms.h — what the backward's suites (test_grad,
 * test_grad_attention_gates) share (tests/grad_forms.c): the forms of the
 * backward they run, one call of either, and its gradients' buffers.
 */
#ifndef KDALAB_TESTS_GRAD_FORMS_H
#define KDALAB_TESTS_GRAD_FORMS_H

#include "kdalab.h"

/* A form of the backward: recurrent (chunk == 0) or chunkwise with C = chunk. */
typedef struct {
    const char *name;
    size_t chunk;
} bwd_form;

/* recurrent, then chunkwise with C = 1, 7, 16, 64, 1000 */
#define N_FORMS 6
extern const bwd_form forms[N_FORMS];

/* The gradients of one backward call, calloc'd in the layouts of the inputs
 * of dims d and mechanism m (one spare element each); fails the test when
 * out of memory. */
typedef struct {
    double *dq, *dk, *dv, *dg, *dbeta, *dh0;
} test_grads;
void test_grads_alloc(test_grads *gr, const kdalab_dims *d, kdalab_mechanism m);
void test_grads_free(test_grads *gr);

/* The float64 backward in form f (kdalab_recurrent_bwd_f64 or
 * kdalab_chunk_bwd_f64 with C = f->chunk) into gr's buffers. */
kdalab_status gradt_run_bwd(const bwd_form *f, const kdalab_dims *d, kdalab_mechanism m,
                            double scale, const double *q, const double *k, const double *v,
                            const double *g, const double *beta, const double *h0,
                            const double *d_o, const double *dht, test_grads *gr);

#endif
