/*
 * tools/kdalab/main.c — bin/kdalab, a float64 oracle for kernel writers: the
 * usage text and the dispatch to the subcommands.
 *
 *   kdalab run      run one mechanism of the lineage on .npy tensors in fla's
 *                   layout and write o and the final state ht (run.c)
 *   kdalab compare  compare two .npy arrays: max absolute error, max error
 *                   relative to max|B|, the worst element, non-finite counts
 *                   (compare.c)
 *   kdalab grad     the float64 backward: the gradients of sum(o * do) +
 *                   sum(ht * dht) for upstream do, dht (grad.c)
 *   kdalab train    train a small model on multi-query associative recall
 *                   and print its test accuracy (train.c)
 *   kdalab info     version, the SIMD level chosen, the CPU features seen
 *                   (info.c)
 *
 * Every subcommand has --help. Every error is one line on stderr naming the
 * flag and file at fault; the exit status says what kind (cli.h).
 *
 * defines: main
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char HELP[] =
    "usage: kdalab <command> [options]   (kdalab <command> --help for each)\n"
    "\n"
    "A float64 oracle for the lineage ending in Kimi Delta Attention: run a\n"
    "mechanism on your own .npy tensors (fla layout) and compare your kernel's\n"
    "output with it.\n"
    "\n"
    "  run       run a mechanism of the lineage (info --mechanisms lists them); write o, ht\n"
    "  grad      the backward of a mechanism: dq, dk, dv, dg, dbeta, dh0 for given do, dht\n"
    "  compare   compare two .npy arrays (errors, worst element, non-finite counts)\n"
    "  train     train a small model on multi-query associative recall (MQAR)\n"
    "  info      version, SIMD level, CPU features; --mechanisms: the mechanism table\n"
    "\n"
    "Exit status: 0 ok, 1 failed / outside tolerance, 2 bad command line or input.\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} COMMANDS[] = {
    {"run", cmd_run},
    {"grad", cmd_grad},
    {"compare", cmd_compare},
    {"info", cmd_info},
    {"train", cmd_train},
};

int main(int argc, char **argv)
{
    /* A file-size limit (ulimit -f) reached while writing is an error the
     * write reports (EFBIG), with the outputs left as they were; not a
     * signal that kills the process in the middle of replacing them. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2)
        return cli_fail(EXIT_BAD, "no command given (run, grad, compare, train, info; see kdalab --help)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(HELP, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("kdalab %s\n", KDALAB_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (strcmp(cmd, COMMANDS[i].name) == 0)
            return COMMANDS[i].run(argc, argv);
    return cli_fail(EXIT_BAD, "unknown command '%s' (run, grad, compare, train, info; see kdalab --help)",
                    cmd);
}
