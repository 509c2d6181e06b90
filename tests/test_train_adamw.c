/*
 * tests/test_train_adamw.c — AdamW (lib/train/adamw.c) against its formula written
 * out, the learning-rate schedule (lib/train/schedule.c), their edges and
 * bad input.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The schedule at its corners; AdamW's update against its formula. */
static void test_adamw(void **state)
{
    (void)state;
    kdalab_adamw_config c = {1e-2, 1e-3, 0.9, 0.99, 1e-8, 0.1, 0, 10, 110};
    double lr;
    assert_int_equal(kdalab_adamw_lr(&c, 0, &lr), KDALAB_OK);
    assert_true(fabs(lr - 1e-3) < 1e-18);                /* (0 + 1) / 10 of the peak */
    assert_int_equal(kdalab_adamw_lr(&c, 9, &lr), KDALAB_OK);
    assert_true(fabs(lr - 1e-2) < 1e-17);                /* the peak */
    assert_int_equal(kdalab_adamw_lr(&c, 60, &lr), KDALAB_OK);
    assert_true(fabs(lr - (1e-3 + 9e-3 * 0.5)) < 1e-17); /* half-way down the cosine */
    assert_int_equal(kdalab_adamw_lr(&c, 500, &lr), KDALAB_OK);
    assert_true(fabs(lr - 1e-3) < 1e-18);                /* the floor after the end */
    kdalab_adamw_config bad = c;
    bad.beta2 = 1;
    assert_int_equal(kdalab_adamw_lr(&bad, 0, &lr), KDALAB_EDOMAIN);
    bad = c;
    bad.min_lr = 1;
    assert_int_equal(kdalab_adamw_lr(&bad, 0, &lr), KDALAB_EDOMAIN);

    /* two steps on 3 parameters, the second clipped: the formula by hand */
    c.clip = 1.0;
    double th[3] = {1, -2, 0.5}, m[3] = {0}, v[3] = {0}, gn;
    const double g1[3] = {0.3, -0.4, 0}, g2[3] = {3, 0, -4}; /* norms 0.5, 5 */
    const unsigned char decay[3] = {1, 0, 1};
    double e[3] = {1, -2, 0.5}, em[3] = {0}, ev[3] = {0};
    const double *gs[2] = {g1, g2};
    for (size_t step = 0; step < 2; step++) {
        assert_int_equal(kdalab_adamw_step_f64(&c, step, 3, th, gs[step], m, v, decay, &gn),
                         KDALAB_OK);
        assert_true(fabs(gn - (step ? 5 : 0.5)) < 1e-15);
        const double cl = step ? 1.0 / 5 : 1, t = (double)step + 1;
        kdalab_adamw_lr(&c, step, &lr);
        for (int i = 0; i < 3; i++) {
            const double gi = cl * gs[step][i];
            em[i] = 0.9 * em[i] + 0.1 * gi;
            ev[i] = 0.99 * ev[i] + 0.01 * gi * gi;
            const double mh = em[i] / (1 - pow(0.9, t)), vh = ev[i] / (1 - pow(0.99, t));
            e[i] -= lr * (mh / (sqrt(vh) + 1e-8) + (decay[i] ? 0.1 : 0) * e[i]);
            assert_true(fabs(th[i] - e[i]) < 1e-15);
        }
    }
    const double gbad[3] = {1, NAN, 0};
    assert_int_equal(kdalab_adamw_step_f64(&c, 2, 3, th, gbad, m, v, decay, &gn),
                     KDALAB_ENONFINITE);
    for (int i = 0; i < 3; i++)
        assert_true(th[i] == e[i]); /* nothing updated */
}

/* AdamW's float32 twin against the float64 step on the same float inputs: a
 * handful of float roundings (each <= 6e-8 relative), for the default betas
 * and for betas close to 1, where 1 - beta must be formed before rounding
 * (0.9999999 rounded to float first leaves 1 - beta off by 8 %); an eps below
 * float's range must not become 0 (0 / 0 for a zero gradient); a subnormal
 * largest gradient still has a finite norm. */
static void test_adamw_edges(void **state)
{
    (void)state;
    const double betas2[3] = {0.999, 0.9999999, 0.99999999};
    for (int b = 0; b < 3; b++) {
        kdalab_adamw_config c = {1e-3, 0, 0.9, betas2[b], 1e-8, 0.1, 0, 0, 10};
        float t32[4] = {0.5f, -0.25f, 1.0f, 0}, m32[4] = {0}, v32[4] = {0};
        double t64[4], m64[4] = {0}, v64[4] = {0};
        const float g32[4] = {0.3f, -1e-3f, 2.0f, 0.7f};
        double g64[4];
        for (int i = 0; i < 4; i++) {
            t64[i] = t32[i];
            g64[i] = g32[i];
        }
        for (size_t step = 0; step < 3; step++) {
            assert_int_equal(kdalab_adamw_step_f32(&c, step, 4, t32, g32, m32, v32, NULL, NULL),
                             KDALAB_OK);
            assert_int_equal(kdalab_adamw_step_f64(&c, step, 4, t64, g64, m64, v64, NULL, NULL),
                             KDALAB_OK);
        }
        for (int i = 0; i < 4; i++) { /* v: its own rounding only; theta: that of |theta| */
            double et = fabs((double)t32[i] - t64[i]) / fmax(fabs(t64[i]), 1e-3);
            double ev = fabs((double)v32[i] - v64[i]) / v64[i];
            if (et > 1e-6 || ev > 1e-6)
                fail_msg("beta2 = %.8f, parameter %d: float32 step off by %.2g (v by %.2g)",
                         betas2[b], i, et, ev);
        }
    }
    kdalab_adamw_config tiny = {1e-3, 0, 0.9, 0.999, 1e-50, 0, 0, 0, 10};
    float t1[2] = {0.5f, -1}, m1[2] = {0}, v1[2] = {0};
    const float g0[2] = {0, 0};
    assert_int_equal(kdalab_adamw_step_f32(&tiny, 0, 2, t1, g0, m1, v1, NULL, NULL), KDALAB_OK);
    assert_true(t1[0] == 0.5f && t1[1] == -1);
    double t2[2] = {0, 0}, m2[2] = {0}, v2[2] = {0}, norm = -1;
    const double gs[2] = {1e-310, 0};
    assert_int_equal(kdalab_adamw_step_f64(&tiny, 0, 2, t2, gs, m2, v2, NULL, &norm), KDALAB_OK);
    assert_true(norm == 1e-310);
    /* unclipped, (1 - beta2) |grad|^2 past float's range at |grad| = 1e22: an error, not a v of
     * inf that would freeze the parameter (0 = m / sqrt(inf)) */
    kdalab_adamw_config noclip = {1e-3, 0, 0.9, 0.999, 1e-8, 0, 0, 0, 10};
    float t3[2] = {0.5f, 1}, m3[2] = {0}, v3[2] = {0};
    const float big[2] = {1e22f, 1};
    assert_int_equal(kdalab_adamw_step_f32(&noclip, 0, 2, t3, big, m3, v3, NULL, NULL),
                     KDALAB_ERANGE);
    assert_non_null(strstr(kdalab_last_error(), "v[0] is inf"));
    /* |grad| = 1e20: v stays finite but v / bc2 would not; the parameter must
     * still move, by the step's learning rate each time (m / sqrt(v) = 1 after
     * the bias corrections): 1e-3 + 0.976e-3 + 0.905e-3 on this cosine */
    float t4[1] = {0.5f}, m4[1] = {0}, v4[1] = {0};
    const float g20[1] = {1e20f};
    for (size_t step = 0; step < 3; step++)
        assert_int_equal(kdalab_adamw_step_f32(&noclip, step, 1, t4, g20, m4, v4, NULL, NULL),
                         KDALAB_OK);
    const float moved = 0.5f - t4[0];
    assert_true(moved > 2.8e-3f && moved < 2.95e-3f);
    /* a v of +inf is refused before anything is written */
    float t5[2] = {1, 2}, m5[2] = {0}, v5[2] = {0, INFINITY};
    const float g5[2] = {1, 1};
    assert_int_equal(kdalab_adamw_step_f32(&noclip, 0, 2, t5, g5, m5, v5, NULL, NULL),
                     KDALAB_ENONFINITE);
    assert_true(t5[0] == 1 && t5[1] == 2 && m5[0] == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_adamw_edges),
    };
    return cmocka_run_group_tests_name("train_adamw", tests, NULL, NULL);
}
