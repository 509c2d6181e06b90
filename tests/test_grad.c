/*
 * tests/test_grad.c — the backward of every form against fla's golden
 * gradients (tests/golden_grad), against central finite differences, and
 * against each other.
 *
 * Tolerances, relative to the max magnitude of each expected gradient:
 *   golden, float64       1e-10  (the golden files agree with finite
 *                                 differences to 6e-9; with autograd's own
 *                                 float64 arithmetic to ~1e-15)
 *   finite differences    1e-6   (central differences with step 1e-5 have
 *                                 truncation error ~h^2 |f'''| ~ 1e-10 and
 *                                 rounding ~eps |f| / h ~ 1e-11, relative to
 *                                 gradients of order 1 on these small shapes)
 *   chunk = recurrent     1e-12  (the same sums in another order)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MAX_CASES 16
#define GOLDEN_TOL 1e-10
#define FD_TOL 1e-6
#define CHUNK_TOL 1e-12

/* A form of the backward: recurrent (chunk == 0) or chunkwise with C = chunk. */
typedef struct {
    const char *name;
    size_t chunk;
} bwd_form;

static const bwd_form forms[] = {{"recurrent", 0}, {"chunk1", 1},   {"chunk7", 7},
                                 {"chunk16", 16},  {"chunk64", 64}, {"chunk1000", 1000}};
#define N_FORMS (sizeof forms / sizeof forms[0])

/* The gradients of one call, malloc'd in the layouts of the inputs. */
typedef struct {
    double *dq, *dk, *dv, *dg, *dbeta, *dh0;
} grads;

static void grads_alloc(grads *gr, const kdalab_dims *d, kdalab_mechanism m)
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

static void grads_free(grads *gr)
{
    free(gr->dq); free(gr->dk); free(gr->dv); free(gr->dg); free(gr->dbeta); free(gr->dh0);
}

static kdalab_status run_bwd(const bwd_form *f, const kdalab_dims *d, kdalab_mechanism m,
                             double scale, const double *q, const double *k, const double *v,
                             const double *g, const double *beta, const double *h0,
                             const double *d_o, const double *dht, grads *gr)
{
    if (f->chunk == 0)
        return kdalab_recurrent_bwd_f64(d, m, scale, q, k, v, g, beta, h0, d_o, dht, gr->dq,
                                        gr->dk, gr->dv, gr->dg, gr->dbeta, gr->dh0);
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = f->chunk;
    return kdalab_chunk_bwd_f64(d, m, scale, q, k, v, g, beta, h0, d_o, dht, gr->dq, gr->dk,
                                gr->dv, gr->dg, gr->dbeta, gr->dh0, &o);
}

/* ---- golden ----------------------------------------------------------------- */

static grad_case cases[MAX_CASES];
static size_t n_cases;

static int setup(void **state)
{
    (void)state;
    n_cases = grad_load_all(cases, MAX_CASES);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < n_cases; i++)
        grad_case_free(&cases[i]);
    return 0;
}

/* Every golden case in every form: each gradient within GOLDEN_TOL of fla's. */
static void test_golden_every_form(void **state)
{
    (void)state;
    double worst[N_FORMS] = {0};
    for (size_t ci = 0; ci < n_cases; ci++) {
        const grad_case *c = &cases[ci];
        for (size_t fi = 0; fi < N_FORMS; fi++) {
            grads gr;
            grads_alloc(&gr, &c->dims, c->mech);
            kdalab_status s = run_bwd(&forms[fi], &c->dims, c->mech, c->scale, c->q.data,
                                      c->k.data, c->v.data, c->g.data, c->beta.data,
                                      c->h0.data, c->d_o.data, c->dht.data, &gr);
            if (s != KDALAB_OK)
                fail_msg("%s %s: %s (%s)", c->name, forms[fi].name, kdalab_strerror(s),
                         kdalab_last_error());
            const struct {
                const char *name;
                const double *got;
                const kdalab_array *want;
            } cmp[] = {{"dq", gr.dq, &c->dq},       {"dk", gr.dk, &c->dk},
                       {"dv", gr.dv, &c->dv},       {"dbeta", gr.dbeta, &c->dbeta},
                       {"dg", gr.dg, &c->dg},       {"dh0", gr.dh0, &c->dh0}};
            for (size_t a = 0; a < sizeof cmp / sizeof cmp[0]; a++) {
                if (!cmp[a].want->data)
                    continue;
                double e = rel_err_f64(cmp[a].got, cmp[a].want->data, cmp[a].want->size);
                if (e > worst[fi])
                    worst[fi] = e;
                if (!(e <= GOLDEN_TOL))
                    fail_msg("%s %s %s: relative error %.3g > %g", c->name, forms[fi].name,
                             cmp[a].name, e, GOLDEN_TOL);
            }
            grads_free(&gr);
        }
    }
    for (size_t fi = 0; fi < N_FORMS; fi++)
        printf("    golden gradients, %-10s largest relative error %.2e (tolerance %g)\n",
               forms[fi].name, worst[fi], GOLDEN_TOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_every_form),
    };
    return cmocka_run_group_tests_name("grad", tests, setup, teardown);
}
