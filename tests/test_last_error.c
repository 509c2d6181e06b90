/*
 * tests/test_last_error.c — kdalab_last_error() never holds an earlier
 * call's message: every public function that can fail (those returning a
 * kdalab_status, and kdalab_kv_cache_new) empties it when called, so after
 * a call it holds that call's error, or nothing.
 *
 * For one or more functions of every public header: first a call that fails
 * with a message naming STALE (a .npy path), then the function, once failing
 * (its status an error, its message its own: not empty, not naming STALE)
 * and once succeeding (the message empty). scripts/check_layout.sh checks
 * the rule for every public function by its first statement; this suite
 * checks what a caller sees.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define STALE "/nonexistent-STALE-message/x.npy"

/* Set a message that names STALE (a failing read). */
static void leave_stale_message(void)
{
    kdalab_array a = {0};
    assert_int_equal(kdalab_npy_read(STALE, &a), KDALAB_EIO);
    assert_non_null(strstr(kdalab_last_error(), "STALE"));
}

/* A KDA problem of one token, one head, K = V = 2, and its outputs. */
static const kdalab_dims DIMS = {.B = 1, .T = 1, .H = 1, .K = 2, .V = 2};
static const double Q[2] = {0.6, 0.8}, K[2] = {0.8, -0.6}, V[2] = {1, 2}, G[2] = {-0.1, -0.2};
static const double BETA[1] = {0.5};
static const float QF[2] = {0.6f, 0.8f}, KF[2] = {0.8f, -0.6f}, VF[2] = {1, 2};
static const float GF[2] = {-0.1f, -0.2f}, BETAF[1] = {0.5f};
static double O[2], S[4], DQ[2];
static float OF[2], SF[4];
static char tmpdir[256];

/* A one-block KDA model of width 4 and its parameters (kdalab_model_init). */
static kdalab_model_config model(void)
{
    kdalab_model_config m;
    memset(&m, 0, sizeof m);
    m.vocab = 5;
    m.D = 4;
    m.H = 2;
    m.L = 1;
    m.F = 8;
    m.conv = 1;
    m.mixer[0] = KDALAB_MIXER_KDA;
    return m;
}

/* Call entry `which` of the table below, failing (good = 0) or succeeding. */
static kdalab_status call(int which, int good)
{
    kdalab_mechanism mech;
    kdalab_decay_mode mode;
    kdalab_output_gate gate;
    kdalab_conv_init ci;
    kdalab_mqar_task task;
    kdalab_simd_level level;
    kdalab_hybrid_kind kind;
    const double bad_x[2] = {NAN, 1};
    const float bad_xf[2] = {NAN, 1};
    const double bad_logits[4] = {NAN, 1, 1, 1}; /* [2, 2] */
    const kdalab_dims dims0 = {.B = 1, .T = 1, .H = 1, .K = 0, .V = 2};
    const kdalab_dims *d = good ? &DIMS : &dims0;
    kdalab_chunk_opts opts = kdalab_chunk_opts_default();
    kdalab_model_config m = model();
    kdalab_mqar_config task_cfg = {.T = 16, .kv_pairs = 2, .key_vocab = 4, .value_vocab = 4};
    kdalab_adamw_config adamw = {1e-3, 1e-4, 0.9, 0.999, 1e-8, 0.1, 1.0, 2, 20};
    kdalab_train_config train;
    memset(&train, 0, sizeof train);
    train.model = m;
    train.task = task_cfg;
    train.opt = adamw;
    train.batch = 2;
    train.test_sequences = 2;
    kdalab_hybrid_config hc = kdalab_hybrid_config_default();
    double y[4], w[4] = {1, 1, 1, 1}, loss, acc, lr, a, b, c;
    size_t n1, n2, counted;
    const int32_t targets[2] = {0, 1};
    char path[300];
    switch (which) {
    case 0: return kdalab_mechanism_parse(good ? "kda" : "mamba", &mech);
    case 1: return kdalab_decay_parse(good ? "safe" : "fast", &mode);
    case 2: return kdalab_check_values_f64(KDALAB_RULE_FINITE, "x", good ? Q : bad_x, 2, NULL);
    case 3: return kdalab_check_values_f32(KDALAB_RULE_FINITE, "x", good ? QF : bad_xf, 2, NULL);
    case 4: return kdalab_check_scale(good ? 1.0 : 0.0);
    case 5: return kdalab_recurrent_f64(d, KDALAB_KDA, 0.5, Q, K, V, G, BETA, NULL, O, NULL);
    case 6: return kdalab_recurrent_f32(d, KDALAB_KDA, 0.5f, QF, KF, VF, GF, BETAF, NULL, OF,
                                        NULL);
    case 7: return kdalab_step_f64(KDALAB_KDA, 2, good ? 2 : 0, 0.5, Q, K, V, G, 0.5, S, O);
    case 8: return kdalab_step_f32(KDALAB_KDA, 2, good ? 2 : 0, 0.5f, QF, KF, VF, GF, 0.5f, SF,
                                   OF);
    case 9: return kdalab_chunk_f64(d, KDALAB_KDA, 0.5, Q, K, V, G, BETA, NULL, O, NULL, &opts,
                                    NULL);
    case 10: return kdalab_chunk_f32(d, KDALAB_KDA, 0.5f, QF, KF, VF, GF, BETAF, NULL, OF, NULL,
                                     &opts, NULL);
    case 11: return kdalab_simd_chunk_f64(d, KDALAB_KDA, 0.5, Q, K, V, G, BETA, NULL, O, NULL,
                                          NULL, NULL);
    case 12: return kdalab_simd_level_parse(good ? "scalar" : "mmx", &level);
    case 13: return kdalab_attention_f64(d, 0.5, Q, K, V, O);
    case 14: return kdalab_recurrent_bwd_f64(d, KDALAB_KDA, 0.5, Q, K, V, G, BETA, NULL, V, NULL,
                                             DQ, NULL, NULL, NULL, NULL, NULL);
    case 15: return kdalab_lower_bound_gate_f64(2, good ? -5.0 : 1.0, Q, y);
    case 16: return kdalab_call_check(&(kdalab_call){.dims = DIMS, .HV = good ? 1 : 0, .scale = 1}, 0, 0);
    case 17: return kdalab_silu_fwd_f64(2, good ? Q : NULL, y);
    case 18: return kdalab_rmsnorm_fwd_f64(1, 4, good ? 1e-6 : -1.0, w, w, y);
    case 19: return kdalab_cross_entropy_fwd_f64(2, 2, good ? w : bad_logits, targets, &loss,
                                                 &acc, &counted);
    case 20: return kdalab_output_gate_parse(good ? "swish" : "relu", &gate);
    case 21: return kdalab_conv_init_parse(good ? "uniform" : "zeros", &ci);
    case 22: n1 = 1; return kdalab_model_parse_mixers(good ? "kda" : "mamba", &n1, 0, m.mixer);
    case 23: m.H = good ? 2 : 3; return kdalab_model_size(&m, &n1, &n2);
    case 24: return kdalab_mqar_parse_task(good ? "zoology" : "copy", &task);
    case 25: task_cfg.kv_pairs = good ? 2 : 0; return kdalab_mqar_vocab_size(&task_cfg, &n1, &n2);
    case 26: adamw.steps = good ? 20 : 0; return kdalab_adamw_lr(&adamw, 0, &lr);
    case 27: train.model.H = good ? 2 : 3; return kdalab_train_cost(&train, &a, &b, &c);
    case 28: hc.n_heads = good ? 2 : 3; return kdalab_hybrid_config_check(&hc);
    case 29: return kdalab_hybrid_layer_kind(&hc, good ? 0 : 99, &kind);
    case 30:
        snprintf(path, sizeof path, "%s/%s", tmpdir, good ? "ckpt" : "layers0");
        return kdalab_checkpoint_read_config(path, &m);
    case 31:
        snprintf(path, sizeof path, "%s/x.npy", tmpdir);
        return kdalab_npy_write(good ? path : "", KDALAB_DTYPE_F64, Q, 1, (size_t[]){2});
    case 32: {
        kdalab_kv_cache *kv = kdalab_kv_cache_new(good ? 1 : 0, 2, 2);
        kdalab_kv_cache_free(kv);
        return kv ? KDALAB_OK : KDALAB_ESIZE;
    }
    }
    fail_msg("no entry %d", which);
    return KDALAB_OK;
}

static const char *const NAMES[] = {
    "kdalab_mechanism_parse", "kdalab_decay_parse", "kdalab_check_values_f64",
    "kdalab_check_values_f32", "kdalab_check_scale", "kdalab_recurrent_f64",
    "kdalab_recurrent_f32", "kdalab_step_f64", "kdalab_step_f32", "kdalab_chunk_f64",
    "kdalab_chunk_f32", "kdalab_simd_chunk_f64", "kdalab_simd_level_parse",
    "kdalab_attention_f64", "kdalab_recurrent_bwd_f64", "kdalab_lower_bound_gate_f64",
    "kdalab_batch_check", "kdalab_silu_fwd_f64", "kdalab_rmsnorm_fwd_f64",
    "kdalab_cross_entropy_fwd_f64", "kdalab_output_gate_parse", "kdalab_conv_init_parse",
    "kdalab_model_parse_mixers", "kdalab_model_size", "kdalab_mqar_parse_task",
    "kdalab_mqar_vocab_size", "kdalab_adamw_lr", "kdalab_train_cost",
    "kdalab_hybrid_config_check", "kdalab_hybrid_layer_kind", "kdalab_checkpoint_read_config",
    "kdalab_npy_write", "kdalab_kv_cache_new"};

/* After a failed call, each function's own failure says its own error and
 * its success leaves no message. */
static void test_no_stale_message(void **state)
{
    (void)state;
    const int n = (int)(sizeof NAMES / sizeof NAMES[0]);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        leave_stale_message();
        kdalab_status s = call(i, 0);
        const char *msg = kdalab_last_error();
        if (s == KDALAB_OK || !*msg || strstr(msg, "STALE")) {
            print_error("%s failing: status %d, message '%s'\n", NAMES[i], (int)s, msg);
            bad++;
        }
        leave_stale_message();
        s = call(i, 1);
        msg = kdalab_last_error();
        if (s != KDALAB_OK || *msg) {
            print_error("%s succeeding: status %d, message '%s'\n", NAMES[i], (int)s, msg);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* A checkpoint (of model()) for kdalab_checkpoint_read_config to read. */
static int setup(void **state)
{
    (void)state;
    if (test_tmpdir_make("kdalab_last_error_", tmpdir, sizeof tmpdir) != 0)
        return -1;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/ckpt", tmpdir);
    kdalab_model_config m = model();
    size_t n;
    if (mkdir(dir, 0700) != 0 || kdalab_model_size(&m, &n, NULL) != KDALAB_OK)
        return -1;
    double *theta = malloc(n * sizeof *theta);
    int rc = theta && kdalab_model_init(&m, 1, theta) == KDALAB_OK &&
                     kdalab_checkpoint_write(dir, &m, theta, NULL) == KDALAB_OK
                 ? 0
                 : -1;
    free(theta);
    /* one whose config.txt says layers=0, a check of the reader's own */
    snprintf(dir, sizeof dir, "%s/layers0", tmpdir);
    if (rc == 0 && mkdir(dir, 0700) == 0) {
        snprintf(dir, sizeof dir, "%s/layers0/config.txt", tmpdir);
        test_write_text(dir, "format=kdalab-checkpoint/1\nmixer=kda\nlayers=0\nd_model=4\n"
                             "heads=2\nmlp_hidden=8\nconv=1\nvocab=5\n");
    }
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_stale_message),
    };
    return cmocka_run_group_tests_name("last_error", tests, setup, teardown);
}
