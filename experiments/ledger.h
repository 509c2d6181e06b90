/*
 * experiments/ledger.h — the training experiments' model ledger
 * (experiments/ledger.c; read back by ledger_read.c), used by lab_mqar_train
 * (mqar_train.c).
 *
 * The ledger, DIR/mqar_models.tsv (or a job's own, DIR/mqar_jobs/NAME.I.tsv:
 * lab_ledger_path): one line per trained model,
 *   key <TAB> accuracy <TAB> test_loss <TAB> train_s <TAB> tokens_per_s
 *       <TAB> steps_to_95=N <TAB> made_with <TAB> experiment=NAME
 * the numbers %.17g, so a model read back prints as it did when trained;
 * steps_to_95 the first optimiser step at which the mean training-batch
 * accuracy over the last LAB_S95_WINDOW steps reached 0.95, so LAB_S95_WINDOW
 * to the model's steps (-1: never; lines of an older build have no such field
 * and read as LAB_S95_UNKNOWN); made_with
 * names what sets the last bits besides the key: kdalab's version, OpenBLAS's
 * kernels and the SIMD level, e.g. "kdalab 0.1.0 blas=SkylakeX simd=avx512" (a
 * record, not part of the key); experiment= names the program that trained it
 * (a record, so 15 reads 14's models, but a run can tell its own experiment's
 * lines at other settings: census.c; older lines have none). Lines are appended (one write, then a flush) as
 * each model finishes, so an interrupted sweep keeps what it finished and two
 * experiments may share a directory. The key is every input of the run,
 * printed exactly (%.17g for the learning rate): training is deterministic, so
 * the same key gives the same bits.
 */
#ifndef KDALAB_EXPERIMENTS_LEDGER_H
#define KDALAB_EXPERIMENTS_LEDGER_H

#include "mqar_train.h"

/* The steps-to-95 % window (training steps), and the value of a line that
 * has no steps_to_95 field. */
#define LAB_S95_WINDOW 50
#define LAB_S95_UNKNOWN (-2L)

/* The longest line lab_ledger_append can write, '\n' included: a longer line
 * was not written by it, and a file of such lines (a device that never ends,
 * say) is not a ledger. */
#define LAB_LEDGER_LINE_MAX 1023

/* What lab_ledger_append writes at the end of a line a killed run left cut
 * short (the ledger's last line without its end) before its own line: the
 * reader passes such a line over instead of reading a shortened number. */
#define LAB_LEDGER_CUT "\tcut-short"

/* What the ledger keeps of one model. */
typedef struct {
    kdalab_train_result tr; /* test accuracy and loss, training time, tokens/s       */
    long steps_to_95;       /* see above; -1 never, LAB_S95_UNKNOWN not recorded      */
} lab_ledger_record;

/* The ledger key of a spec (every input of the run) into key[n]. */
void lab_ledger_key(const lab_ctx *x, const lab_mqar_spec *s, char *key, size_t n);

/* The ledger this run appends to (malloc'd): DIR/mqar_models.tsv, or with
 * --job I, DIR/mqar_jobs/NAME.I.tsv (the directory made if missing). */
char *lab_ledger_path(const lab_ctx *x);

/* Is there a ledger at path, and may it be used (a regular file, readable,
 * or with for_append writable)? 0 if there is none; exits (status 1) with
 * one line if it cannot be used. */
int lab_ledger_usable(const lab_ctx *x, const char *path, int for_append);

/* The model with this key (of spec s) in DIR/mqar_models.tsv or
 * DIR/mqar_jobs/\*.tsv into *rec; 1 if found. The ledgers are read on the
 * first call (ledger_read.c), DIR/mqar_models.tsv first, then
 * DIR/mqar_jobs/\*.tsv in name order. Every line with the key must be a record
 * this model can have (each field in its range, steps_to_95 within the
 * model's steps: see ledger_read.c), and all of them the same record:
 * otherwise one error names the file, the line, the field and its value (or
 * both lines of a conflict), exit 1. A line cut short by a killed run (no
 * line end, or ended by a later append: LAB_LEDGER_CUT) is passed over, named
 * once on stderr. A DIR/mqar_jobs that is not a directory or cannot be listed
 * exits (status 1) naming it. */
int lab_ledger_find_any(const lab_ctx *x, const lab_mqar_spec *s, const char *key,
                        lab_ledger_record *rec);

/* Read every ledger a resuming run reads, once (later calls do nothing):
 * DIR/mqar_models.tsv, then DIR/mqar_jobs/\*.tsv in name order; a line cut
 * short by a killed run is named on stderr here. Exits (status 1) on a ledger
 * or a DIR/mqar_jobs that cannot be read (lab_ledger_usable). */
void lab_ledger_load(const lab_ctx *x);

/* Does DIR/mqar_jobs hold a ledger of this experiment's jobs (NAME.\*.tsv)? */
int lab_ledger_has_jobs(const lab_ctx *x);

/* Call fn for every whole line of the ledgers that this experiment wrote: a
 * line of DIR/mqar_jobs/NAME.\*.tsv, or one whose experiment= field names it
 * (lines of an older build have none), with its key (key_len bytes of line),
 * its file and line number. */
typedef void lab_ledger_line_fn(const char *line, size_t key_len, const char *file,
                                size_t lineno, void *user);
void lab_ledger_each_own(const lab_ctx *x, lab_ledger_line_fn *fn, void *user);

/* Tell the reader (ledger_read.c) that line (ending with '\n') was appended to
 * the ledger at path, so that a later lab_ledger_find_any of this run finds
 * it; nothing if the ledgers have not been read. */
void lab_ledger_note_appended(const lab_ctx *x, const char *path, const char *line);

/* Append the model's line to the ledger at path; exits (status 1) on failure. */
void lab_ledger_append(const lab_ctx *x, const char *path, const char *key,
                       const lab_ledger_record *rec);

#endif /* KDALAB_EXPERIMENTS_LEDGER_H */
