/*
 * tests/grad_forms.c — what the backward's suites share (tests/grad_forms.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "common.h"
#include "grad_forms.h"

const bwd_form forms[N_FORMS] = {{"recurrent", 0}, {"chunk1", 1},   {"chunk7", 7},
                                 {"chunk16", 16},  {"chunk64", 64}, {"chunk1000", 1000}};

void test_grads_alloc(test_grads *gr, const kdalab_dims *d, kdalab_mechanism m)
{
    size_t gw = kdalab_mechanism_g_width(m, d->K);
    gr->dq = calloc(n_qk(d) + 1, sizeof(double));
    gr->dk = calloc(n_qk(d) + 1, sizeof(double));
    gr->dv = calloc(n_v(d) + 1, sizeof(double));
    gr->dg = calloc(n_bth(d) * (gw ? gw : 1) + 1, sizeof(double));
    gr->dbeta = calloc(n_bth(d) + 1, sizeof(double));
    gr->dh0 = calloc(n_state(d) + 1, sizeof(double));
    assert_true(gr->dq && gr->dk && gr->dv && gr->dg && gr->dbeta && gr->dh0);
}

void test_grads_free(test_grads *gr)
{
    free(gr->dq); free(gr->dk); free(gr->dv); free(gr->dg); free(gr->dbeta); free(gr->dh0);
}

kdalab_status gradt_run_bwd(const bwd_form *f, const kdalab_dims *d, kdalab_mechanism m,
                            double scale, const double *q, const double *k, const double *v,
                            const double *g, const double *beta, const double *h0,
                            const double *d_o, const double *dht, test_grads *gr)
{
    if (f->chunk == 0)
        return kdalab_recurrent_bwd_f64(d, m, scale, q, k, v, g, beta, h0, d_o, dht, gr->dq,
                                        gr->dk, gr->dv, gr->dg, gr->dbeta, gr->dh0);
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = f->chunk;
    return kdalab_chunk_bwd_f64(d, m, scale, q, k, v, g, beta, h0, d_o, dht, gr->dq, gr->dk,
                                gr->dv, gr->dg, gr->dbeta, gr->dh0, &o);
}

