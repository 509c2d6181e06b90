/*
 * experiments/ledger.c — the training experiments' model ledger (ledger.h):
 * one line per trained model, appended as it finishes, read back by a
 * resuming run.
 *
 * defines: lab_ledger_key, lab_ledger_path, lab_ledger_usable, lab_ledger_append
 * (reading the ledgers back: ledger_read.c)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger.h"

/* The format of a line is in ledger.h. */
void lab_ledger_key(const lab_ctx *x, const lab_mqar_spec *s, char *key, size_t n)
{
    /* the dense task's key has no task field: the ledgers written before the
     * other tasks existed read as they did */
    char task[96] = "", design[96] = "", data[96] = "", off[16 + KDALAB_MODEL_BLOCKS_TEXT] = "";
    if (s->task != KDALAB_MQAR_DENSE)
        snprintf(task, sizeof task, "\ttask=%s/%zu/%zu", kdalab_mqar_task_name(s->task),
                 s->updates, s->recent);
    /* likewise the default output gate (sigmoid, full rank) and conv init (uniform) */
    if (s->gate != KDALAB_OUTPUT_GATE_SIGMOID || s->gate_rank ||
        s->conv_init != KDALAB_CONV_INIT_UNIFORM)
        snprintf(design, sizeof design, "\tgate=%s/%zu/%s", kdalab_output_gate_name(s->gate),
                 s->gate_rank, kdalab_conv_init_name(s->conv_init));
    /* likewise the even split, no stacks and fresh batches */
    if (s->split != LAB_SPLIT_EVEN || s->stacks || s->train_set)
        snprintf(data, sizeof data, "\tdata=%s/%zu/%zu",
                 s->split == LAB_SPLIT_ZOOLOGY ? "zoology" : "even", s->stacks, s->train_set);
    /* likewise the convolution on every block or none; else the blocks
     * without it, by index ("conv_off=1") */
    char blocks[KDALAB_MODEL_BLOCKS_TEXT];
    if (s->conv_off && kdalab_model_format_blocks(s->conv_off, blocks, sizeof blocks) == KDALAB_OK)
        snprintf(off, sizeof off, "\tconv_off=%s", blocks);
    const int len = snprintf(key, n, "%s\t%s\t%zu\t%zu\t%zu\t%d\t%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%.17g\t%lu%s%s%s%s",
             lab_mqar_precision(x), s->mixers, s->L, s->D, s->H, s->conv, s->T, s->P, s->vocab,
             s->batch, s->steps, s->test, s->lr, s->seed, task, design, data, off);
    if (len < 0 || (size_t)len >= n) { /* a cut key could be another model's */
        fprintf(stderr, "%s: the ledger key of %s (L = %zu) is longer than %zu bytes: no "
                        "ledger can hold this model\n", x->name, s->mixers, s->L, n - 1);
        exit(2);
    }
}

/* The ledger this run appends to: DIR/mqar_models.tsv, or for job I of a
 * sweep (--job I) its own, DIR/mqar_jobs/NAME.I.tsv, so that jobs running at
 * once, here or on other machines, never write one file. A resuming run reads
 * DIR/mqar_models.tsv and every DIR/mqar_jobs/\*.tsv: merging the ledgers of
 * jobs run elsewhere is copying their files into DIR/mqar_jobs/. */
char *lab_ledger_path(const lab_ctx *x)
{
    size_t n = strlen(x->out) + strlen(x->name) + 64;
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    lab_out_dir(x);
    if (x->job < 0) {
        snprintf(p, n, "%s/mqar_models.tsv", x->out);
        return p;
    }
    snprintf(p, n, "%s/mqar_jobs", x->out);
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create directory '%s': %s\n", x->name, p, strerror(errno));
        exit(1);
    }
    snprintf(p, n, "%s/mqar_jobs/%s.%ld.tsv", x->out, x->name, x->job);
    return p;
}

/* The ledger, if there is one, must be a regular file (stat follows a
 * symbolic link, so a link to one is fine): a device, a FIFO or a directory
 * would block, never end, or swallow the appends; and one this process can
 * append to. Exits (status 1) with one line otherwise (a symbolic link to
 * nothing among them: a ledger that is not there is not the same as none);
 * returns 0 if there is no ledger yet, 1 if there is. */
int lab_ledger_usable(const lab_ctx *x, const char *path, int for_append)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        const int err = errno;
        if (err == ENOENT && lstat(path, &sb) != 0)
            return 0;
        fprintf(stderr, "%s: the model ledger '%s': %s\n", x->name, path,
                err == ENOENT ? "a symbolic link to nothing" : strerror(err));
        exit(1);
    }
    if (!S_ISREG(sb.st_mode)) {
        fprintf(stderr, "%s: the model ledger '%s' is %s, not a regular file: move it away "
                        "(or choose another --out)\n",
                x->name, path,
                S_ISDIR(sb.st_mode)    ? "a directory"
                : S_ISCHR(sb.st_mode)  ? "a character device"
                : S_ISBLK(sb.st_mode)  ? "a block device"
                : S_ISFIFO(sb.st_mode) ? "a FIFO"
                : S_ISSOCK(sb.st_mode) ? "a socket"
                                       : "not a file");
        exit(1);
    }
    if (access(path, for_append ? W_OK : R_OK) != 0) { /* now, not after a model trained */
        fprintf(stderr, "%s: the model ledger '%s' cannot be %s: %s\n", x->name, path,
                for_append ? "appended to" : "read", strerror(errno));
        exit(1);
    }
    return 1;
}

void lab_ledger_append(const lab_ctx *x, const char *path, const char *key,
                       const lab_ledger_record *rec)
{
    FILE *f = fopen(path, "a+");
    if (!f) {
        fprintf(stderr, "%s: cannot append to '%s': %s\n", x->name, path, strerror(errno));
        exit(1);
    }
    /* a line cut short by a killed run is ended first, marked as such
     * (LAB_LEDGER_CUT), so this one starts a line and the reader passes it over */
    int cut = fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n';
    fseek(f, 0, SEEK_END); /* a read, then a write: a positioning call between (C11 7.21.5.3) */
    char line[LAB_LEDGER_LINE_MAX + 1];
    const char *blas = kdalab_blas_kernels();
    int n = snprintf(line, sizeof line,
                     "%s%s\t%.17g\t%.17g\t%.17g\t%.17g\tsteps_to_95=%ld\tkdalab %s blas=%s "
                     "simd=%s\texperiment=%s\n",
                     cut ? LAB_LEDGER_CUT "\n" : "", key, rec->tr.test_accuracy, rec->tr.test_loss,
                     rec->tr.seconds, rec->tr.tokens_per_s, rec->steps_to_95, KDALAB_VERSION,
                     blas ? blas : "not-openblas",
                     kdalab_simd_level_name(kdalab_simd_get_level()), x->name);
    if (n < 0 || (size_t)n >= sizeof line || fwrite(line, 1, (size_t)n, f) != (size_t)n ||
        fclose(f) != 0) {
        fprintf(stderr, "%s: appending to '%s' failed\n", x->name, path);
        exit(1);
    }
    lab_ledger_note_appended(x, path, line + (cut ? strlen(LAB_LEDGER_CUT) + 1 : 0));
}

