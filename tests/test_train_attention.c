/*
 * tests/test_train_attention.c — training's matrix-form softmax attention
 * (lib/train/attention.c) at the edges of float64: its backward against the
 * reference's (kdalab_attention_bwd_f64) where a product it does not use
 * overflows. (Its agreement with the reference across tiles, and its
 * gradient against finite differences, are checked through the mixer in
 * test_train_mixer.c.)
 */
#include <math.h>

#include "common.h"
#include "train/train_internal.h"

/* A product the backward does not use — dO_t . v_j for a key j after the
 * query t — may overflow; it must not reach the gradients as 0 * inf = NaN
 * (found by a randomised search). The reference gives finite gradients here. */
static void test_attention_masked_overflow(void **state)
{
    (void)state;
    const kdalab_dims dims = {1, 2, 1, 1, 1};
    const double q[2] = {0.5, 0.5}, k[2] = {0.5, -0.5}, v[2] = {1, 1e300}, d_o[2] = {1e10, 1};
    double o[2], dq[2], dk[2], dv[2], rq[2], rk[2], rv[2];
    assert_int_equal(kdalab_attention_f64(&dims, 1.0, q, k, v, o), KDALAB_OK);
    assert_int_equal(kdalab_attention_bwd_f64(&dims, 1.0, q, k, v, d_o, rq, rk, rv), KDALAB_OK);
    assert_int_equal(kdalab__train_attention_bwd_f64(&dims, 1.0, q, k, v, o, d_o, dq, dk, dv),
                     KDALAB_OK);
    for (int i = 0; i < 2; i++) {
        assert_true(fabs(dq[i] - rq[i]) <= 1e-12 * fabs(rq[i]));
        assert_true(fabs(dk[i] - rk[i]) <= 1e-12 * fabs(rk[i]));
        assert_true(fabs(dv[i] - rv[i]) <= 1e-12 * fabs(rv[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_masked_overflow),
    };
    return cmocka_run_group_tests_name("train_attention", tests, NULL, NULL);
}
