/*
 * tests/sweep_runs.h — what the suites that run a training experiment share
 * (tests/test_sweep_resume.c, test_sweep_jobs.c, test_sweep_designs.c):
 * finding the program, a scratch directory, comparing two runs' tables.
 */
#ifndef KDALAB_TESTS_SWEEP_RUNS_H
#define KDALAB_TESTS_SWEEP_RUNS_H

#include <stddef.h>

/* A cmocka group setup's work: the absolute path of $KDALAB_BIN/experiment
 * (bin/ by default) into exe[exe_cap] and a fresh scratch directory
 * /tmp/prefixXXXXXX into tmpdir[tmp_cap]; 0, or -1 with one line on stderr
 * naming suite and what is missing. */
int sweep_setup(const char *suite, const char *experiment, char *exe, size_t exe_cap,
                const char *prefix, char *tmpdir, size_t tmp_cap);

/* Run exe (an experiment) in its reduced sweep cut to 2 optimiser steps and a
 * 4-sequence test set, with --out tmpdir and env in front (e.g.
 * "KDALAB_RESUME=1"; KDALAB_FULL, KDALAB_RESUME and KDALAB_TRAIN_MISSING unset
 * otherwise), its
 * stdout and stderr into tmpdir/stdout, tmpdir/stderr; fails the test unless
 * it exits 0. */
void sweep_run_tiny(const char *exe, const char *tmpdir, const char *env);

/* Run exe with env (e.g. "KDALAB_RESUME=1"; KDALAB_FULL, KDALAB_RESUME and
 * KDALAB_TRAIN_MISSING unset otherwise) and flags, with --out dir, killed
 * after a minute (a read that never ends fails instead of hanging); its
 * stdout and stderr into tmpdir/stdout, tmpdir/stderr. Its exit status, -1
 * if it was killed. */
int sweep_run_status(const char *exe, const char *tmpdir, const char *dir, const char *env,
                     const char *flags);

/* Fail the test unless after is before and one whole line more (a ledger
 * a resuming run appended one model to); that line, inside after. */
const char *sweep_added_line(const char *before, const char *after);

/* The number of '\n' in s. */
size_t sweep_lines(const char *s);

/* tmpdir/file (one of 4 rotating static buffers). */
char *sweep_path(const char *tmpdir, const char *file);

/* Fail the test unless tables a and b (a TSV file's text each) are equal
 * line for line, comment lines included, except for the last column of each
 * data line: train_s, the training wall time, which a model trained again,
 * or elsewhere, need not repeat. */
void sweep_assert_same_but_times(const char *a, const char *b);

#endif
