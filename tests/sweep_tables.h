/*
 * tests/sweep_tables.h — comparing the tables of two runs of a training
 * sweep (tests/test_sweep_resume.c, tests/test_sweep_jobs.c).
 */
#ifndef KDALAB_TESTS_SWEEP_TABLES_H
#define KDALAB_TESTS_SWEEP_TABLES_H

/* Fail the test unless tables a and b (a TSV file's text each) are equal
 * line for line, comment lines included, except for the last column of each
 * data line: train_s, the training wall time, which a model trained again,
 * or elsewhere, need not repeat. */
void sweep_assert_same_but_times(const char *a, const char *b);

#endif
