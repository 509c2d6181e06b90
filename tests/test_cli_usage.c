/*
 * test_cli_usage.c — bin/kdalab's command lines: usage errors (one line naming the flag, exit
 * 2, nothing written), --help everywhere, kdalab info.
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

/* Usage errors: one line naming the flag, exit 2, nothing written. */
static void usage_errors(void **state)
{
    const char *o = tcli_tmp("o.npy");
    char in[4096];
    snprintf(in, sizeof in, "%s", tcli_kda_with(NULL, NULL));
    tcli_expect_error(tcli_run("%s", ""), 2, "no command", NULL);
    tcli_expect_error(tcli_run("frobnicate"), 2, "'frobnicate'", NULL);
    tcli_expect_error(tcli_run("run"), 2, "--mechanism", NULL);
    tcli_expect_error(tcli_run("run --mechanism mamba %s --o %s", in + 15, o), 2, "'mamba'", NULL);
    tcli_expect_error(tcli_run("run %s", in), 2, "--o", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --bogus 1", in, o), 2, "'--bogus'", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --form zigzag", in, o), 2, "--form", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --form chunk --chunk 0", in, o), 2, "--chunk", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --form chunk --chunk -3", in, o), 2, "--chunk", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --form chunk --chunk 99999999999999999999999", in, o),
                 2, "--chunk", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --form chunk --subchunk 0", in, o), 2, "--subchunk",
                 NULL);
    tcli_expect_error(tcli_run("run %s --o %s --chunk 16", in, o), 2, "--chunk", "--form chunk",
                      NULL);
    tcli_expect_error(tcli_run("run %s --o %s --form chunk --decay fast", in, o), 2, "--decay",
                      NULL);
    tcli_expect_error(tcli_run("run %s --o %s --precision fp8", in, o), 2, "--precision", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --precision bf16", in, o), 2, "--precision",
                 "--form chunk", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --impl gpu", in, o), 2, "--impl", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --impl simd", in, o), 2, "--impl simd",
                      "--form chunk", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --scale 0", in, o), 2, "--scale", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --scale inf", in, o), 2, "--scale", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --q x.npy", in, o), 2, "--q", "twice", NULL);
    /* every subcommand with flags refuses one given twice, in either spelling
     * (the parser they share, cli_next) */
    tcli_expect_error(tcli_run("run %s --o %s --form chunk --form=recurrent", in, o), 2,
                      "--form is given twice", NULL);
    tcli_expect_error(tcli_run("grad %s --do x.npy --dq %s --scale 1 --scale 1", in, o), 2,
                      "--scale is given twice", NULL);
    tcli_expect_error(tcli_run("compare a.npy b.npy --rtol 1 --rtol=2"), 2,
                      "--rtol is given twice", NULL);
    tcli_expect_error(tcli_run("train --task dense --mixer kda --seed 1 --seed 0"), 2,
                      "--seed is given twice", NULL);
    tcli_expect_error(tcli_run("run %s --o", in), 2, "--o", "value", NULL);
    tcli_expect_error(tcli_run("run %s --o %s --ht %s", in, o, o), 2, "same file", NULL);
    tcli_expect_error(tcli_run("run %s --o %s", tcli_kda_with("beta", NULL), o), 2, "--beta",
                      "required", NULL);
    tcli_expect_error(tcli_run("run %s --o %s", tcli_kda_with("g", NULL), o), 2, "--g", "required",
                      NULL);
    tcli_expect_error(tcli_run("run --mechanism linear_attention %s --o %s", in + 15, o), 2,
                      "--beta", "not used", NULL);
    assert_false(tcli_exists(o));
    /* an output directory that does not exist: exit 1, nothing created */
    tcli_expect_error(tcli_run("run %s --o %s", in, tcli_tmp("nodir/o.npy")), 1, "--o", "nodir",
                      NULL);
    tcli_expect_error(tcli_run("run %s --o %s --ht %s", in, o, tcli_tmp("nodir/ht.npy")), 1, "--ht",
                      NULL);
}

static void help_everywhere(void **state)
{
    static const char *cmds[] = {"--help", "run --help", "compare --help", "info --help",
                                 "run -h", "compare --rtol 1 --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_int_equal(tcli_run("%s", cmds[i]), 0);
        assert_non_null(strstr(tcli_out, "usage: kdalab"));
        assert_string_equal(tcli_err, "");
    }
}

static void info_and_time(void **state)
{
    assert_int_equal(tcli_run("info"), 0);
    assert_non_null(strstr(tcli_out, "version=" KDALAB_VERSION));
    assert_non_null(strstr(tcli_out, "simd_level="));
    assert_non_null(strstr(tcli_out, "cpu_features="));
    /* the CPU's model name, family and model, so that a timing can name its
     * machine (a model name can be as short as "AMD EPYC"): the value of
     * /proc/cpuinfo's first line with exactly that key ("model" is not "model
     * name"), all of it, or unknown when the line is missing or empty */
    const char *keys[3][2] = {
        {"model name", "\ncpu="}, {"cpu family", "\ncpu_family="}, {"model", "\ncpu_model="}};
    char line[512];
    for (int i = 0; i < 3; i++) {
        const char *got = strstr(tcli_out, keys[i][1]);
        assert_non_null(got);
        got += strlen(keys[i][1]);
        const char *want = "unknown";
        size_t wlen = strlen(want);
        int found = 0;
        FILE *ci = fopen("/proc/cpuinfo", "r");
        while (ci && !found && fgets(line, sizeof line, ci)) {
            size_t klen = strcspn(line, "\t:");
            if (klen != strlen(keys[i][0]) || strncmp(line, keys[i][0], klen) != 0 ||
                !strchr(line, ':'))
                continue;
            found = 1;
            const char *val = strchr(line, ':') + 1;
            val += strspn(val, " \t");
            size_t vlen = strcspn(val, "\r\n");
            if (vlen) {
                want = val;
                wlen = vlen;
            }
        }
        if (ci)
            fclose(ci);
        assert_memory_equal(got, want, wlen);
        assert_int_equal(got[wlen], '\n');
    }

    assert_int_equal(tcli_run("run %s --o %s --time", tcli_kda_with(NULL, NULL), tcli_tmp("o.npy")),
                     0);
    double sec = -1, rate = -1;
    assert_int_equal(sscanf(tcli_err, "compute_seconds=%lf head_tokens_per_s=%lf", &sec, &rate),
                     2);
    assert_true(sec >= 0);
    assert_true(rate >= 0);
    /* the best of --repeat timed calls and their median: best <= median */
    assert_int_equal(tcli_run("run %s --o %s --time --repeat 3", tcli_kda_with(NULL, NULL),
                            tcli_tmp("o.npy")),
                     0);
    double med = -1, med_rate = -1;
    size_t reps = 0;
    assert_int_equal(sscanf(tcli_err,
                            "compute_seconds=%lf head_tokens_per_s=%lf median_seconds=%lf "
                            "median_head_tokens_per_s=%lf repeat=%zu",
                            &sec, &rate, &med, &med_rate, &reps),
                     5);
    assert_true(reps == 3 && sec <= med && rate >= med_rate);
    tcli_expect_error(
        tcli_run("run %s --o %s --repeat 3", tcli_kda_with(NULL, NULL), tcli_tmp("o.npy")), 2,
        "--repeat", NULL);
    tcli_expect_error(
        tcli_run("run %s --o %s --time --repeat 0", tcli_kda_with(NULL, NULL), tcli_tmp("o.npy")),
        2, "--repeat", NULL);
    /* without --time, stderr stays quiet */
    assert_int_equal(tcli_run("run %s --o %s", tcli_kda_with(NULL, NULL), tcli_tmp("o.npy")), 0);
    assert_string_equal(tcli_err, "");
    unlink(tcli_tmp("o.npy"));
}

static int setup(void **state) { return tcli_setup("kdalab_cli_usage_"); }

static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(help_everywhere),
        cmocka_unit_test(info_and_time),
    };
    return cmocka_run_group_tests_name("cli_usage", tests, setup, teardown);
}
