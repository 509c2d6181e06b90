/*
 * test_cli_train.c — kdalab train: a tiny model end to end (its checkpoint
 * loaded into the hybrid stack, which decodes the model's logits), its bad
 * command lines, the output-gate and conv-init flags, and its choice of
 * OpenBLAS kernels.
 *
 * The binary is ./bin/kdalab relative to the repository root, where `make
 * test` runs the tests (override with $KDALAB_BIN); the runner and the
 * functions the command-line suites share are in tests/common.c. Scratch
 * files live in a mkdtemp directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kdalab.h"

/* Occurrences of needle in hay. */
static int count_in(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* `kdalab train` restarts itself once with OPENBLAS_CORETYPE set exactly when
 * OpenBLAS fell back to its generic Prescott kernels on a CPU with AVX2 and
 * FMA (kdalab_blas_choose_kernels), says so in one line, and trains once;
 * with OPENBLAS_CORETYPE set by the caller it never restarts. (Built on
 * another CBLAS, info says "(not OpenBLAS)" and nothing restarts.) */
static void train_chooses_blas_kernels(void **state)
{
    (void)state;
    const char *tiny = "train --task dense --mixer attention --d-model 8 --heads 2 "
                       "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 2 "
                       "--test-size 4 --log-every 0";
    const char *keep = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    if (keep)
        snprintf(saved, sizeof saved, "%s", keep);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("KDALAB_BLAS_RESTARTED");

    assert_int_equal(tcli_run("info"), 0);
    const char *line = strstr(tcli_out, "blas_kernels=");
    assert_non_null(line);
    int prescott = strncmp(line, "blas_kernels=Prescott\n", 22) == 0;
    int wide = kdalab_simd_level_available(KDALAB_SIMD_AVX2); /* AVX2 and FMA */
    assert_int_equal(tcli_run("%s", tiny), 0);
    assert_int_equal(count_in(tcli_err, "restarting with OPENBLAS_CORETYPE="),
                     prescott && wide ? 1 : 0);
    assert_int_equal(count_in(tcli_err, "kdalab train: "), 1); /* trained once */
    assert_int_equal(count_in(tcli_out, "accuracy="), 1);

    setenv("OPENBLAS_CORETYPE", "Prescott", 1); /* the caller's choice is kept */
    assert_int_equal(tcli_run("%s", tiny), 0);
    assert_int_equal(count_in(tcli_err, "restarting"), 0);
    assert_int_equal(tcli_run("info"), 0); /* reported, whatever the CBLAS makes of it */
    assert_non_null(strstr(tcli_out, " (OPENBLAS_CORETYPE=Prescott)\n"));

    if (keep)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
}

/* kdalab train: a tiny model end to end (progress on stderr, accuracy= on
 * stdout, a checkpoint NumPy's layout reads), and its bad command lines,
 * each one line with nothing created. */
static void train_command(void **state)
{
    (void)state;
    const char *tiny = "train --task dense --mixer kda,attention --d-model 8 --heads 2 "
                       "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 4 "
                       "--test-size 4 --log-every 2";
    assert_int_equal(tcli_run("%s --out %s", tiny, tcli_tmp("ckpt")), 0);
    assert_non_null(strstr(tcli_out, "accuracy="));
    assert_non_null(strstr(tcli_err, "step 4/4 loss"));
    double acc = -1;
    assert_int_equal(sscanf(strstr(tcli_out, "accuracy="), "accuracy=%lf", &acc), 1);
    assert_true(acc >= 0 && acc <= 1);
    kdalab_array a;
    tcli_read_array(tcli_tmp("ckpt/embed.npy"), &a);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 9);
    assert_int_equal(a.shape[1], 8);
    kdalab_array_free(&a);
    tcli_read_array(tcli_tmp("ckpt/blocks.0.mixer.A_log.npy"), &a);
    assert_int_equal(a.ndim, 1);
    assert_int_equal(a.shape[0], 2);
    kdalab_array_free(&a);
    assert_true(tcli_exists(tcli_tmp("ckpt/config.txt")));
    assert_false(tcli_exists(tcli_tmp("ckpt/config.txt.tmp")));
    /* the checkpoint loads into the hybrid stack, whose prefill and decode
     * give the training forward's logits (float64 rounding apart) */
    kdalab_hybrid *s = NULL;
    assert_int_equal(kdalab_hybrid_load(tcli_tmp("ckpt"), &s), KDALAB_OK);
    kdalab_model_config m;
    const double *theta;
    assert_int_equal(kdalab_hybrid_model(s, &m, &theta), KDALAB_OK);
    const int32_t tok[6] = {1, 4, 2, 8, 3, 0};
    double ref[6 * 9], got[6 * 9];
    assert_int_equal(kdalab_model_logits_f64(&m, theta, 1, 6, tok, ref), KDALAB_OK);
    assert_int_equal(kdalab_hybrid_prefill_tokens(s, 2, tok, got), KDALAB_OK);
    for (size_t t = 2; t < 6; t++)
        assert_int_equal(kdalab_hybrid_decode_token(s, tok[t], got + t * 9), KDALAB_OK);
    assert_true(rel_err_f64(got, ref, 6 * 9) < 1e-12);
    kdalab_hybrid_free(s);
    /* the same run again gives the same accuracy (a function of the seed) */
    char first[sizeof tcli_out];
    memcpy(first, tcli_out, sizeof first);
    assert_int_equal(tcli_run("%s", tiny), 0);
    assert_string_equal(tcli_out, first);

    tcli_expect_error(tcli_run("train --task dense --mixer foo"), 2, "--mixer", "foo", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer hybrid:3 --layers 2"), 2, "hybrid:3",
                 "no attention block", NULL);
    tcli_expect_error(tcli_run("train --task copy --mixer kda"), 2, "--task", NULL);
    tcli_expect_error(tcli_run("train --task dense"), 2, "--mixer", "missing", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --d-model 10 --heads 3"), 2,
                 "not a multiple", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --seq-len 16 --kv-pairs 8"), 2,
                      "--seq-len 16", "--kv-pairs 8", NULL);
    /* the library's field names (T, key_vocab, D) come with the flags that set them */
    tcli_expect_error(tcli_run("train --task dense --mixer kda --vocab 18446744073709551615"), 2,
                      "--vocab 18446744073709551615", "key_vocab", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --d-model 10 --heads 3"), 2,
                      "--d-model 10", "--heads 3", "not a multiple", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --lr -1"), 2, "--lr", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --lr nan"), 2, "--lr", NULL);
    /* a number given twice: which one would count is a guess, so neither does */
    tcli_expect_error(tcli_run("train --task dense --mixer kda --steps 3 --steps=4"), 2, "--steps",
                 "given twice", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --no-conv --no-conv"), 2, "--no-conv",
                 "given twice", NULL);
    assert_int_equal(tcli_run("info --help --help"), 0); /* help wins, however often asked */
    assert_non_null(strstr(tcli_out, "usage"));
    /* a second run into the same checkpoint replaces it whole: a one-block model
     * leaves no block-1 tensor of the two-block one behind */
    assert_int_equal(tcli_run("train --task dense --mixer kda --layers 1 --d-model 8 --heads 2 "
                            "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 2 "
                            "--test-size 4 --out %s", tcli_tmp("ckpt")), 0);
    assert_false(tcli_exists(tcli_tmp("ckpt/blocks.1.norm1.npy")));
    assert_true(tcli_exists(tcli_tmp("ckpt/blocks.0.norm1.npy")));
    assert_int_equal(tcli_count_entries(NULL, "ckpt."), 0); /* no .partial or .old left */
    /* a directory holding anything else is refused before training, kept whole */
    tcli_put_bytes(tcli_tmp("ckpt/notes.md"), "mine", 4);
    tcli_expect_error(tcli_run("%s --out %s", tiny, tcli_tmp("ckpt")), 2, "not a kdalab checkpoint",
                 "notes.md", NULL);
    assert_true(tcli_exists(tcli_tmp("ckpt/notes.md")) && tcli_exists(tcli_tmp("ckpt/config.txt")));
    /* a diverging run: exit 1, one error line at the end, no directory made */
    assert_int_equal(tcli_run("%s --lr 1e10 --out %s", tiny, tcli_tmp("never")), 1);
    assert_non_null(strstr(tcli_err, "diverged"));
    assert_false(tcli_exists(tcli_tmp("never")));
    /* --out naming a regular file: refused before training, the file kept */
    tcli_put_bytes(tcli_tmp("not_a_dir"), "keep", 4);
    tcli_expect_error(tcli_run("%s --out %s", tiny, tcli_tmp("not_a_dir")), 2, "not a directory",
                      NULL);
    size_t len;
    unsigned char *b = tcli_file_bytes(tcli_tmp("not_a_dir"), &len);
    assert_int_equal(len, 4);
    assert_memory_equal(b, "keep", 4);
    free(b);
}

/* --output-gate, --gate-rank, --conv-init, --conv-off: the checkpoint records them (and a
 * default model's config.txt does not mention them), holds the gate's
 * tensors, decodes the training forward's logits and can be replaced; bad
 * values, and each of them where it would do nothing (a gate with no linear
 * block, an initialisation or a block left without it with --no-conv), are
 * one line, exit 2. */
static void train_design_flags(void **state)
{
    (void)state;
    const char *tiny = "train --task dense --mixer gated_deltanet,kda --d-model 8 --heads 2 "
                       "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 4 "
                       "--test-size 4 --log-every 0";
    const char *design = "--output-gate swish --gate-rank 4 --conv-init normal0.02";
    assert_int_equal(tcli_run("%s %s --out %s", tiny, design, tcli_tmp("gated")), 0);
    assert_non_null(strstr(tcli_err, "output gate swish, rank 4, conv init normal0.02"));
    char *cfg = test_read_text(tcli_tmp("gated/config.txt"));
    assert_non_null(strstr(cfg, "\noutput_gate=swish\ngate_rank=4\nconv_init=normal0.02\n"));
    free(cfg);
    kdalab_array a;
    tcli_read_array(tcli_tmp("gated/blocks.1.mixer.Wog.npy"), &a);
    assert_true(a.ndim == 2 && a.shape[0] == 8 && a.shape[1] == 4);
    kdalab_array_free(&a);
    tcli_read_array(tcli_tmp("gated/blocks.0.mixer.bog.npy"), &a);
    assert_true(a.ndim == 1 && a.shape[0] == 8);
    kdalab_array_free(&a);
    kdalab_hybrid *s = NULL;
    assert_int_equal(kdalab_hybrid_load(tcli_tmp("gated"), &s), KDALAB_OK);
    kdalab_model_config m;
    const double *theta;
    assert_int_equal(kdalab_hybrid_model(s, &m, &theta), KDALAB_OK);
    assert_true(m.output_gate == KDALAB_OUTPUT_GATE_SWISH && m.gate_rank == 4 &&
                m.conv_init == KDALAB_CONV_INIT_NORMAL);
    const int32_t tok[5] = {1, 4, 2, 8, 3};
    double ref[5 * 9], got[5 * 9];
    assert_int_equal(kdalab_model_logits_f64(&m, theta, 1, 5, tok, ref), KDALAB_OK);
    assert_int_equal(kdalab_hybrid_prefill_tokens(s, 5, tok, got), KDALAB_OK);
    assert_true(rel_err_f64(got, ref, 5 * 9) < 1e-12);
    kdalab_hybrid_free(s);
    /* the checkpoint is one kdalab train replaces: with no gate now */
    assert_int_equal(tcli_run("%s --output-gate none --out %s", tiny, tcli_tmp("gated")), 0);
    assert_false(tcli_exists(tcli_tmp("gated/blocks.0.mixer.Wog.npy")));
    assert_true(tcli_exists(tcli_tmp("gated/blocks.0.mixer.onorm.npy")));
    /* a default model's config.txt names none of them */
    assert_int_equal(tcli_run("%s --out %s", tiny, tcli_tmp("plain")), 0);
    cfg = test_read_text(tcli_tmp("plain/config.txt"));
    assert_null(strstr(cfg, "output_gate"));
    assert_null(strstr(cfg, "gate_rank"));
    assert_null(strstr(cfg, "conv_init"));
    assert_null(strstr(cfg, "conv_off"));
    free(cfg);
    /* --conv-off 1: block 0 keeps its convolution, block 1 has none */
    assert_int_equal(tcli_run("%s --conv-off 1 --out %s", tiny, tcli_tmp("off")), 0);
    assert_non_null(strstr(tcli_err, "no convolution on block 1"));
    cfg = test_read_text(tcli_tmp("off/config.txt"));
    assert_non_null(strstr(cfg, "\nconv=1\n"));
    assert_non_null(strstr(cfg, "\nconv_off=1\n"));
    free(cfg);
    assert_true(tcli_exists(tcli_tmp("off/blocks.0.mixer.cq.npy")));
    assert_false(tcli_exists(tcli_tmp("off/blocks.1.mixer.cq.npy")));
    assert_int_equal(kdalab_hybrid_load(tcli_tmp("off"), &s), KDALAB_OK);
    assert_int_equal(kdalab_hybrid_model(s, &m, &theta), KDALAB_OK);
    assert_true(m.conv == 1 && m.conv_off == 2);
    kdalab_hybrid_free(s);
    tcli_expect_error(tcli_run("%s --conv-off 2", tiny), 2, "--conv-off 2", "from 0 to 1",
                      NULL);
    tcli_expect_error(tcli_run("%s --conv-off 0,0", tiny), 2, "--conv-off 0,0", "distinct", NULL);
    tcli_expect_error(tcli_run("%s --conv-off 1,0", tiny), 2, "names every block",
                      "--no-conv", NULL);
    tcli_expect_error(tcli_run("%s --conv-off one", tiny), 2, "--conv-off one", NULL);
    tcli_expect_error(tcli_run("%s --no-conv --conv-off 1 --out %s", tiny, tcli_tmp("idle")),
                      2, "--conv-off does nothing", "--no-conv", NULL);

    tcli_expect_error(tcli_run("%s --output-gate relu", tiny), 2, "--output-gate relu", NULL);
    tcli_expect_error(tcli_run("%s --conv-init zeros", tiny), 2, "--conv-init zeros", NULL);
    tcli_expect_error(tcli_run("%s --output-gate none --gate-rank 2", tiny), 2, "--gate-rank 2",
                      "no", NULL);
    tcli_expect_error(tcli_run("%s --gate-rank 9", tiny), 2, "--gate-rank 9", "above", NULL);

    /* an option that would do nothing is refused (before, it was ignored and
     * written into config.txt): a gate where every block is attention, a
     * convolution's initialisation with no convolution; nothing is made */
    const char *attn = "train --task dense --mixer attention --d-model 8 --heads 2 "
                       "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 2 "
                       "--test-size 4 --log-every 0";
    tcli_expect_error(tcli_run("%s --output-gate swish --out %s", attn, tcli_tmp("idle")), 2,
                      "--output-gate does nothing", "--mixer attention", "attention", NULL);
    tcli_expect_error(tcli_run("%s --output-gate sigmoid", attn), 2,
                      "--output-gate does nothing", NULL);
    tcli_expect_error(tcli_run("%s --gate-rank 2 --out %s", attn, tcli_tmp("idle")), 2,
                      "--gate-rank does nothing", "output gate", NULL);
    tcli_expect_error(tcli_run("%s --no-conv --conv-init normal0.02 --out %s", tiny,
                               tcli_tmp("idle")),
                      2, "--conv-init does nothing", "--no-conv", NULL);
    assert_false(tcli_exists(tcli_tmp("idle")));
    /* where they act they are taken: attention's convolution has an
     * initialisation, a hybrid's KDA blocks have a gate */
    assert_int_equal(tcli_run("%s --conv-init normal0.02 --out %s", attn, tcli_tmp("idle")), 0);
    cfg = test_read_text(tcli_tmp("idle/config.txt"));
    assert_non_null(strstr(cfg, "\nconv_init=normal0.02\n"));
    assert_null(strstr(cfg, "output_gate"));
    free(cfg);
    assert_int_equal(tcli_run("train --task dense --mixer hybrid:1 --d-model 8 --heads 2 "
                              "--seq-len 16 --kv-pairs 2 --vocab 9 --batch 2 --steps 2 "
                              "--test-size 4 --log-every 0 --output-gate none"),
                     0);
}

/* --task: kdalab's dense layout (dense, or its older names mqar and plain),
 * the Zoology layouts zoology, overwrite (--updates) and recent (--recent),
 * the palindrome and the stack (--stacks) train, with --train-set too, the
 * task named in the progress line and the checkpoint; a variant's count without its
 * task, or its task without the count, and a sequence too short for the
 * layout are one line, exit 2. */
static void train_task_variants(void **state)
{
    (void)state;
    const char *tiny = "train --mixer deltanet --d-model 8 --heads 2 --kv-pairs 4 "
                       "--vocab 17 --batch 2 --steps 3 --test-size 4 --log-every 0";
    assert_int_equal(tcli_run("%s --task mqar --seq-len 16", tiny), 0);
    char mqar[sizeof tcli_out];
    memcpy(mqar, tcli_out, sizeof mqar);
    /* the older names run dense, and say which task that is */
    assert_non_null(strstr(tcli_err, "--task mqar is kdalab's dense recall layout"));
    assert_non_null(strstr(tcli_err, "Zoology's MQAR is --task zoology"));
    assert_int_equal(tcli_run("%s --task plain --seq-len 16", tiny), 0);
    assert_string_equal(tcli_out, mqar); /* the same task, the same run */
    assert_non_null(strstr(tcli_err, "--task plain is kdalab's dense"));
    assert_int_equal(tcli_run("%s --task dense --seq-len 16", tiny), 0);
    assert_string_equal(tcli_out, mqar); /* dense is its name now */

    /* the report's other tasks, and a fixed training set */
    assert_int_equal(tcli_run("%s --task palindrome --seq-len 8", tiny), 0);
    assert_int_equal(count_in(tcli_out, "accuracy="), 1);
    assert_int_equal(tcli_run("%s --task stack --stacks 2 --seq-len 12 --train-set 40 --out %s",
                              tiny, tcli_tmp("stack")), 0);
    char *st = test_read_text(tcli_tmp("stack/config.txt"));
    assert_non_null(strstr(st, "\ntask=stack\nstacks=2\ntrain_set=40\nseq_len=12\n"));
    free(st);
    tcli_expect_error(tcli_run("%s --task stack --seq-len 12", tiny), 2, "--stacks", NULL);
    tcli_expect_error(tcli_run("%s --task zoology --stacks 2 --seq-len 16", tiny), 2,
                      "--stacks: only with --task stack", NULL);
    tcli_expect_error(tcli_run("%s --task stack --stacks 8 --seq-len 12", tiny), 2,
                      "--stacks 8, --vocab 17", NULL);
    tcli_expect_error(tcli_run("%s --task palindrome --seq-len 10", tiny), 2, "--task palindrome",
                      "T must be 8", NULL);

    assert_int_equal(tcli_run("%s --task overwrite --updates 2 --seq-len 20 --out %s", tiny,
                              tcli_tmp("over")), 0);
    assert_non_null(strstr(tcli_err, "task overwrite, T = 20"));
    assert_int_equal(count_in(tcli_out, "accuracy="), 1);
    char *cfg = test_read_text(tcli_tmp("over/config.txt"));
    assert_non_null(strstr(cfg, "\ntask=overwrite\nupdates=2\nseq_len=20\n"));
    free(cfg);
    assert_int_equal(tcli_run("%s --task recent --recent 2 --seq-len 12", tiny), 0);
    assert_non_null(strstr(tcli_err, "task recent, T = 12"));
    assert_int_equal(tcli_run("%s --task zoology --seq-len 16", tiny), 0);
    assert_int_equal(count_in(tcli_out, "accuracy="), 1);

    tcli_expect_error(tcli_run("%s --task overwrite --seq-len 20", tiny), 2, "--updates", NULL);
    tcli_expect_error(tcli_run("%s --task recent --seq-len 20", tiny), 2, "--recent", NULL);
    tcli_expect_error(tcli_run("%s --task mqar --updates 2 --seq-len 20", tiny), 2,
                      "--updates", "overwrite", NULL);
    tcli_expect_error(tcli_run("%s --task zoology --recent 2 --seq-len 20", tiny), 2,
                      "--recent", NULL);
    tcli_expect_error(tcli_run("%s --task recent --recent 5 --seq-len 20", tiny), 2,
                      "--task recent", NULL); /* W > P: the library's message */
    tcli_expect_error(tcli_run("%s --task zoology --seq-len 14", tiny), 2, "--task zoology",
                      "--seq-len 14", NULL);
    tcli_expect_error(tcli_run("%s --task copy --seq-len 16", tiny), 2, "--task:",
                      "unknown task 'copy'", NULL);
    tcli_expect_error(tcli_run("%s --seq-len 16", tiny), 2, "--task", "missing", NULL);
}

static int setup(void **state) { return tcli_setup("kdalab_cli_train_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(train_command),
        cmocka_unit_test(train_design_flags),
        cmocka_unit_test(train_task_variants),
        cmocka_unit_test(train_chooses_blas_kernels),
    };
    return cmocka_run_group_tests_name("cli_train", tests, setup, teardown);
}
