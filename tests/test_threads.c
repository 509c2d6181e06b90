/*
 * tests/test_threads.c — the number of OpenMP threads changes nothing in the
 * output bits of the SIMD path: heads go to threads whole, and when there
 * are fewer heads than threads the value columns (independent in every
 * mechanism) are split, so no sum is ever reordered by the thread count.
 * Checked bit for bit with 1, 2 and 3 threads at every level the CPU runs,
 * for B * H = 1 (the column split), 3 and 8, every mechanism, chunkwise and
 * recurrent.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void run(const random_problem *p, int chunk, float *fq[5], float *o, float *ht)
{
    const kdalab_dims *d = &p->dims;
    kdalab_status s =
        chunk ? kdalab_simd_chunk_f32(d, p->mech, 0.3f, fq[0], fq[1], fq[2], fq[3], fq[4], NULL,
                                      o, ht, NULL, NULL)
              : kdalab_simd_recurrent_f32(d, p->mech, 0.3f, fq[0], fq[1], fq[2], fq[3], fq[4],
                                          NULL, o, ht);
    assert_int_equal(s, KDALAB_OK);
}

static void test_thread_count_changes_no_bits(void **state)
{
    (void)state;
    gsl_rng *rng = test_rng(53);
    const kdalab_dims shapes[] = {{.B = 1, .T = 70, .H = 1, .K = 32, .V = 40},
                                  {.B = 1, .T = 67, .H = 3, .K = 16, .V = 24},
                                  {.B = 2, .T = 33, .H = 4, .K = 24, .V = 16}};
    int checked = 0;
    for (int lvl = KDALAB_SIMD_SCALAR; lvl <= KDALAB_SIMD_AVX512; lvl++) {
        if (!kdalab_simd_level_available((kdalab_simd_level)lvl))
            continue;
        assert_int_equal(kdalab_simd_set_level((kdalab_simd_level)lvl), KDALAB_OK);
        for (size_t si = 0; si < 3; si++)
            for (int m = KDALAB_LINEAR_ATTENTION; m <= KDALAB_KDA; m++)
                for (int chunk = 0; chunk <= 1; chunk++) {
                    random_problem p;
                    random_problem_make(&p, rng, (kdalab_mechanism)m, shapes[si], -3.0, 0);
                    const kdalab_dims *d = &p.dims;
                    float *fq[5] = {to_f32(p.q, n_qk(d)), to_f32(p.k, n_qk(d)),
                                    to_f32(p.v, n_v(d)), to_f32(p.g, n_qk(d)),
                                    to_f32(p.beta, n_bth(d))};
                    float *o[3], *ht[3];
                    for (int th = 0; th < 3; th++) {
                        o[th] = malloc(n_v(d) * sizeof(float));
                        ht[th] = malloc(n_state(d) * sizeof(float));
                        assert_true(o[th] && ht[th]);
                        omp_set_num_threads(th + 1);
                        run(&p, chunk, fq, o[th], ht[th]);
                    }
                    for (int th = 1; th < 3; th++)
                        if (memcmp(o[0], o[th], n_v(d) * sizeof(float)) ||
                            memcmp(ht[0], ht[th], n_state(d) * sizeof(float)))
                            fail_msg("%s %s level %s, B*H = %zu: %d threads change the bits",
                                     kdalab_mechanism_name(p.mech),
                                     chunk ? "chunkwise" : "recurrent",
                                     kdalab_simd_level_name((kdalab_simd_level)lvl),
                                     d->B * d->H, th + 1);
                    for (int th = 0; th < 3; th++) {
                        free(o[th]);
                        free(ht[th]);
                    }
                    for (int a = 0; a < 5; a++)
                        free(fq[a]);
                    random_problem_free(&p);
                    checked++;
                }
    }
    omp_set_num_threads(omp_get_num_procs());
    assert_int_equal(kdalab_simd_set_level(KDALAB_SIMD_AUTO), KDALAB_OK);
    printf("    %d (level, shape, mechanism, form) cases: 1, 2 and 3 threads bit-identical\n",
           checked);
    gsl_rng_free(rng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_count_changes_no_bits),
    };
    return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
