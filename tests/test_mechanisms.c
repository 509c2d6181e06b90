/*
 * tests/test_mechanisms.c — the mechanism table (lib/core/mechanisms.c): the
 * grid is complete (each combination of the two properties is exactly one
 * row), rows are found by id and by name and nowhere else, the property
 * queries agree with the rows, bad lookups are refused, and
 * `kdalab info --mechanisms` prints the table as it is.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"

static void test_grid_is_complete(void **state)
{
    (void)state;
    int seen[2][3] = {{0}}, n_ab = 0;
    size_t n = 0;
    for (kdalab_mechanism m = 0; kdalab_mechanism_row(m); m++, n++) {
        const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
        assert_int_equal(r->id, m);
        assert_true(r->delta == 0 || r->delta == 1);
        assert_true(r->g <= KDALAB_G_PER_KEY);
        assert_int_equal(kdalab_mechanism_has_ab(m), r->ab);
        if (r->ab) { /* the boundary: a per-key decay and a given b a^T, no beta */
            assert_int_equal(r->g, KDALAB_G_PER_KEY);
            assert_false(r->delta);
            n_ab++;
        } else {
            seen[r->delta][r->g]++;
        }
        assert_int_equal(kdalab_mechanism_has_delta(m), r->delta);
        assert_int_equal(kdalab_mechanism_has_beta(m), r->delta);
        assert_int_equal(kdalab_mechanism_g_shape(m), r->g);
        assert_int_equal(kdalab_mechanism_g_width(m, 7),
                         r->g == KDALAB_G_PER_KEY ? 7 : r->g == KDALAB_G_PER_HEAD ? 1 : 0);
        assert_true(strncmp(r->source, "arXiv:", 6) == 0);
        assert_true(strstr(r->fla_chunk, "chunk_") == r->fla_chunk);
        assert_true(strstr(r->fla_recurrent, "fused_recurrent_") == r->fla_recurrent);
    }
    assert_int_equal(n, KDALAB_N_MECHANISMS);
    assert_int_equal(n_ab, 1); /* the DPLR boundary */
    assert_true(kdalab_mechanism_has_ab(KDALAB_DPLR));
    assert_false(kdalab_mechanism_has_ab(KDALAB_N_MECHANISMS));
    for (int d = 0; d < 2; d++)
        for (int g = 0; g < 3; g++)
            if (seen[d][g] != 1)
                fail_msg("delta %d, g shape %d: %d rows (want exactly 1)", d, g, seen[d][g]);
    /* the cells the chapter names */
    assert_int_equal(kdalab_mechanism_g_shape(KDALAB_KDA), KDALAB_G_PER_KEY);
    assert_true(kdalab_mechanism_has_delta(KDALAB_KDA));
    assert_int_equal(kdalab_mechanism_g_shape(KDALAB_GLA), KDALAB_G_PER_KEY);
    assert_false(kdalab_mechanism_has_delta(KDALAB_GLA));
    assert_int_equal(kdalab_mechanism_g_shape(KDALAB_SIMPLE_GLA), KDALAB_G_PER_HEAD);
    assert_false(kdalab_mechanism_has_delta(KDALAB_SIMPLE_GLA));
}

static void test_names_parse_back(void **state)
{
    (void)state;
    for (kdalab_mechanism m = 0; kdalab_mechanism_row(m); m++) {
        kdalab_mechanism got = KDALAB_N_MECHANISMS;
        assert_int_equal(kdalab_mechanism_parse(kdalab_mechanism_name(m), &got), KDALAB_OK);
        assert_int_equal(got, m);
        for (kdalab_mechanism o = 0; o < m; o++)
            assert_string_not_equal(kdalab_mechanism_name(o), kdalab_mechanism_name(m));
    }
    kdalab_mechanism out = KDALAB_KDA;
    assert_int_equal(kdalab_mechanism_parse("KDA", &out), KDALAB_EINVAL); /* case matters */
    assert_int_equal(out, KDALAB_KDA);                                    /* untouched */
    assert_non_null(strstr(kdalab_last_error(), "unknown mechanism 'KDA'"));
    assert_non_null(strstr(kdalab_last_error(), "simple_gla, gla"));
    assert_int_equal(kdalab_mechanism_parse(NULL, &out), KDALAB_ENULL);
    assert_int_equal(kdalab_mechanism_parse("kda", NULL), KDALAB_ENULL);
}

static void test_unknown_ids(void **state)
{
    (void)state;
    const kdalab_mechanism bad[] = {KDALAB_N_MECHANISMS, (kdalab_mechanism)99,
                                    (kdalab_mechanism)-1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(kdalab_mechanism_row(bad[i]));
        assert_string_equal(kdalab_mechanism_name(bad[i]), "unknown");
        assert_int_equal(kdalab_mechanism_has_delta(bad[i]), 0);
        assert_int_equal(kdalab_mechanism_g_shape(bad[i]), KDALAB_G_NONE);
        assert_int_equal(kdalab_mechanism_g_width(bad[i], 8), 0);
    }
    /* every form refuses an id past the table */
    double x[4] = {0};
    kdalab_dims d = {1, 1, 1, 1, 1};
    assert_int_equal(kdalab_recurrent_f64(&d, KDALAB_N_MECHANISMS, 1.0, x, x, x, x, x, NULL,
                                          x, NULL),
                     KDALAB_EINVAL);
    assert_int_equal(kdalab_chunk_f64(&d, KDALAB_N_MECHANISMS, 1.0, x, x, x, x, x, NULL, x,
                                      NULL, NULL, NULL),
                     KDALAB_EINVAL);
}

static void test_list(void **state)
{
    (void)state;
    char buf[256], small[12];
    assert_string_equal(kdalab_mechanism_list(" | ", buf, sizeof buf),
                        "linear_attention | deltanet | gated_deltanet | kda | simple_gla | gla | dplr");
    assert_string_equal(kdalab_mechanism_list(",", small, sizeof small), "linear_atte"); /* 11 bytes and the NUL */
    assert_null(kdalab_mechanism_list(",", NULL, 10));
    small[0] = 'x';
    kdalab_mechanism_list(",", small, 0); /* n = 0: nothing written */
    assert_int_equal(small[0], 'x');
}

/* Messages follow the row, not the sizes: a per-head g is named with three
 * indices even where K = 1 makes it as long as a per-key one; and a
 * backward asked for emulated storage says it has none. */
static void test_messages_follow_the_row(void **state)
{
    (void)state;
    kdalab_dims d = {1, 2, 2, 1, 1};
    double x[4] = {0.5, 0.5, 0.5, 0.5}, o[4], g[4] = {-1, -1, -1, 0.5};
    const kdalab_mechanism per_head[] = {KDALAB_SIMPLE_GLA, KDALAB_GATED_DELTANET};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(kdalab_chunk_f64(&d, per_head[i], 1.0, x, x, x, g, x, NULL, o, NULL,
                                          NULL, NULL),
                         KDALAB_EDOMAIN);
        assert_non_null(strstr(kdalab_last_error(), "g[0, 1, 1] = 0.5"));
    }
    assert_int_equal(kdalab_chunk_f64(&d, KDALAB_GLA, 1.0, x, x, x, g, NULL, NULL, o, NULL,
                                      NULL, NULL),
                     KDALAB_EDOMAIN);
    assert_non_null(strstr(kdalab_last_error(), "g[0, 1, 1, 0] = 0.5"));
    float xf[4] = {0.5f, 0.5f, 0.5f, 0.5f}, gf[4] = {-1, -1, -1, -1}, df[4];
    kdalab_chunk_opts op = kdalab_chunk_opts_default();
    op.precision = KDALAB_BF16;
    assert_int_equal(kdalab_chunk_bwd_f32(&d, KDALAB_GLA, 1.0f, xf, xf, xf, gf, NULL, NULL, xf,
                                          NULL, df, df, df, df, NULL, NULL, &op),
                     KDALAB_EINVAL);
    assert_non_null(strstr(kdalab_last_error(), "no emulated storage (precision bf16"));
}

static void test_info_prints_the_table(void **state)
{
    (void)state;
    assert_int_equal(tcli_run("info --mechanisms"), 0);
    char expect[4096] = "name\tdelta_rule\tg\tab\tfla_chunk\tfla_recurrent\tsource\ttitle\n";
    static const char *const G[] = {"none", "per_head [B,T,H]", "per_key [B,T,H,K]"};
    for (kdalab_mechanism m = 0; kdalab_mechanism_row(m); m++) {
        const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
        size_t used = strlen(expect);
        snprintf(expect + used, sizeof expect - used, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
                 r->name, r->delta ? "yes" : "no", G[r->g], r->ab ? "yes [B,T,H,K]" : "no",
                 r->fla_chunk, r->fla_recurrent, r->source, r->title);
    }
    assert_string_equal(tcli_out, expect);
    assert_int_equal(tcli_run("info --mechanisms extra"), 2);
}

static int setup(void **state) { return tcli_setup("kdalab_mechanisms_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid_is_complete),
        cmocka_unit_test(test_names_parse_back),
        cmocka_unit_test(test_unknown_ids),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_messages_follow_the_row),
        cmocka_unit_test(test_info_prints_the_table),
    };
    return cmocka_run_group_tests_name("mechanisms", tests, setup, teardown);
}
