/*
 * experiments/ledger.c — the training experiments' model ledger (ledger.h):
 * one line per trained model, appended as it finishes, read back by a
 * resuming run.
 *
 * defines: lab_ledger_key, lab_ledger_path, lab_ledger_usable, lab_ledger_find_any,
 *          lab_ledger_append
 */
#include <errno.h>
#include <glob.h>
#include <math.h>
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
    char task[96] = "", design[96] = "", data[96] = "";
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
    snprintf(key, n, "%s\t%s\t%zu\t%zu\t%zu\t%d\t%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%.17g\t%lu%s%s%s",
             lab_mqar_precision(x), s->mixers, s->L, s->D, s->H, s->conv, s->T, s->P, s->vocab,
             s->batch, s->steps, s->test, s->lr, s->seed, task, design, data);
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

/* The longest line ledger_append can write, '\n' included (its buffer less
 * the NUL): a longer line was not written by it, and a file of such lines
 * (a device that never ends, say) is not a ledger. */
#define LEDGER_LINE_MAX 1023

/* The ledger, if there is one, must be a regular file (stat follows a
 * symbolic link, so a link to one is fine): a device, a FIFO or a directory
 * would block, never end, or swallow the appends; and one this process can
 * append to. Exits (status 1) with one line otherwise; returns 0 if there is
 * no ledger yet, 1 if there is. */
int lab_ledger_usable(const lab_ctx *x, const char *path, int for_append)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "%s: the model ledger '%s': %s\n", x->name, path, strerror(errno));
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

/* One line of f into line[LEDGER_LINE_MAX + 1], NUL-terminated, its length
 * (the '\n' included if it has one) in *len: 1 for a line, 0 at the end of
 * the file. Exits (status 1) on a read error or a line longer than
 * LEDGER_LINE_MAX, so that no file makes the read go on for ever. */
static int ledger_line(const lab_ctx *x, const char *path, size_t lineno, FILE *f, char *line,
                       size_t *len)
{
    size_t n = 0;
    int c = EOF;
    while (n < LEDGER_LINE_MAX && (c = getc(f)) != EOF) {
        line[n++] = (char)c;
        if (c == '\n')
            break;
    }
    line[n] = '\0';
    *len = n;
    if (ferror(f)) {
        fprintf(stderr, "%s: reading the model ledger '%s' failed at line %zu: %s\n", x->name,
                path, lineno, strerror(errno));
        exit(1);
    }
    if (n == LEDGER_LINE_MAX && c != '\n' && (c = getc(f)) != EOF) {
        fprintf(stderr, "%s: %s:%zu: a line longer than %d bytes, more than any ledger line "
                        "can be: not a model ledger (move it away, or choose another --out)\n",
                x->name, path, lineno, LEDGER_LINE_MAX);
        exit(1);
    }
    return n > 0;
}

/* One number field of a ledger line, starting at p and ending at a tab or at
 * end: exactly what "%.17g" prints (digits, sign, point, exponent, "inf";
 * no blanks, no hex, never empty). 1 and *out if it is one, else 0. */
static int ledger_number(const char *p, const char *end, double *out)
{
    if (p == end)
        return 0;
    for (const char *c = p; c < end; c++)
        if (!strchr("0123456789+-.eEinf", *c))
            return 0;
    char *stop;
    errno = 0;
    *out = strtod(p, &stop);
    return stop == end;
}

/* The rule a ledger line's numbers break, or NULL if they are a model's:
 * accuracy in [0, 1], test loss, training time and tokens/s finite and
 * >= 0; or exactly the record of a diverged run (lab_mqar_train writes
 * accuracy 0, loss inf, time 0, tokens/s 0). */
static const char *ledger_rule_broken(const double *v)
{
    if (v[0] == 0 && isinf(v[1]) && v[1] > 0 && v[2] == 0 && v[3] == 0)
        return NULL; /* a diverged run */
    if (!(v[0] >= 0 && v[0] <= 1))
        return "the accuracy must be in [0, 1]";
    if (!isfinite(v[1]) || v[1] < 0)
        return "the test loss must be finite and >= 0 (or inf with accuracy, time and "
               "tokens/s 0: a diverged run)";
    if (!isfinite(v[2]) || v[2] < 0)
        return "the training time must be finite and >= 0";
    if (!isfinite(v[3]) || v[3] < 0)
        return "tokens/s must be finite and >= 0";
    return NULL;
}

/* The last valid line with this key of the ledger at path (which exists and
 * ledger_usable accepted), into tr; 1 if found. A line is
 * valid if it is complete (ends with '\n'; a CR before it is allowed) and
 * its four numbers are a model's (ledger_rule_broken). Lines of other keys,
 * binary garbage among them, are passed over. If lines with this key exist
 * and none is valid, one warning names the last of them (file:line) and the
 * rule it breaks, and 0 is returned: the model is trained again. A line cut
 * short by a killed run is such a line (or, cut inside its last field,
 * tokens/s, it reads as a shorter number: no table uses it). */
static int ledger_find(const lab_ctx *x, const char *path, const char *key,
                       lab_ledger_record *rec)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot read the model ledger '%s': %s\n", x->name, path,
                strerror(errno));
        exit(1);
    }
    const size_t kn = strlen(key);
    char line[LEDGER_LINE_MAX + 1];
    size_t len, lineno = 0, bad_line = 0;
    const char *bad_rule = NULL;
    int found = 0;
    while (ledger_line(x, path, ++lineno, f, line, &len)) {
        if (len <= kn || memcmp(line, key, kn) != 0 || line[kn] != '\t')
            continue;
        const char *rule = NULL;
        if (memchr(line, '\0', len))
            rule = "it holds a NUL byte";
        else if (line[len - 1] != '\n')
            rule = "it does not end (cut short)";
        double v[4];
        const char *p = line + kn + 1;
        for (int i = 0; i < 4 && !rule; i++) {
            const char *end = p + strcspn(p, "\t\r\n");
            if (*end == '\r' && end[1] != '\n')
                rule = "a carriage return inside it";
            else if (!ledger_number(p, end, &v[i]))
                rule = i == 0   ? "the accuracy is not a number"
                       : i == 1 ? "the test loss is not a number"
                       : i == 2 ? "the training time is not a number"
                                : "tokens/s is not a number";
            else if (i < 3 && *end != '\t')
                rule = "it has fewer than the four numbers after the key";
            p = end + 1;
        }
        /* after tokens/s: steps_to_95=N (a line of an older build has none),
         * then made_with (or the end of an older line) */
        long s95 = LAB_S95_UNKNOWN;
        if (!rule && strncmp(p, "steps_to_95=", 12) == 0) {
            char *stop;
            errno = 0;
            s95 = strtol(p + 12, &stop, 10);
            if (errno || stop == p + 12 || (*stop != '\t' && *stop != '\n' && *stop != '\r') ||
                s95 < -1)
                rule = "steps_to_95 is not a step count (or -1)";
        }
        if (!rule)
            rule = ledger_rule_broken(v);
        if (rule) {
            bad_line = lineno;
            bad_rule = rule;
            continue;
        }
        memset(rec, 0, sizeof *rec);
        rec->tr.test_accuracy = v[0];
        rec->tr.test_loss = v[1];
        rec->tr.seconds = v[2];
        rec->tr.tokens_per_s = v[3];
        rec->steps_to_95 = s95;
        found = 1;
        bad_line = 0;
    }
    fclose(f);
    if (!found && bad_line)
        fprintf(stderr, "%s: %s:%zu: not read back: %s; this model is trained again\n", x->name,
                path, bad_line, bad_rule);
    return found;
}

/* The model with this key in any ledger a resuming run reads (ledger_path):
 * DIR/mqar_models.tsv first, then DIR/mqar_jobs/\*.tsv in name order. */
int lab_ledger_find_any(const lab_ctx *x, const char *key, lab_ledger_record *rec)
{
    size_t n = 2 * strlen(x->out) + 64;
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    snprintf(p, n, "%s/mqar_models.tsv", x->out);
    int found = lab_ledger_usable(x, p, 0) && ledger_find(x, p, key, rec);
    /* DIR is matched as it is spelled: its '*', '?', '[' and '\\' escaped */
    char *e = p;
    for (const char *c = x->out; *c; c++) {
        if (strchr("*?[\\", *c))
            *e++ = '\\';
        *e++ = *c;
    }
    snprintf(e, n - (size_t)(e - p), "/mqar_jobs/*.tsv");
    glob_t g;
    if (!found && glob(p, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !found; i++)
            found = lab_ledger_usable(x, g.gl_pathv[i], 0) &&
                    ledger_find(x, g.gl_pathv[i], key, rec);
        globfree(&g);
    }
    free(p);
    return found;
}

void lab_ledger_append(const lab_ctx *x, const char *path, const char *key,
                       const lab_ledger_record *rec)
{
    FILE *f = fopen(path, "a+");
    if (!f) {
        fprintf(stderr, "%s: cannot append to '%s': %s\n", x->name, path, strerror(errno));
        exit(1);
    }
    /* a line cut short by a killed run is ended first, so this one starts a line */
    int cut = fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n';
    fseek(f, 0, SEEK_END); /* a read, then a write: a positioning call between (C11 7.21.5.3) */
    char line[1024];
    const char *blas = kdalab_blas_kernels();
    int n = snprintf(line, sizeof line,
                     "%s%s\t%.17g\t%.17g\t%.17g\t%.17g\tsteps_to_95=%ld\tkdalab %s blas=%s "
                     "simd=%s\n",
                     cut ? "\n" : "", key, rec->tr.test_accuracy, rec->tr.test_loss,
                     rec->tr.seconds, rec->tr.tokens_per_s, rec->steps_to_95, KDALAB_VERSION,
                     blas ? blas : "not-openblas",
                     kdalab_simd_level_name(kdalab_simd_get_level()));
    if (n < 0 || (size_t)n >= sizeof line || fwrite(line, 1, (size_t)n, f) != (size_t)n ||
        fclose(f) != 0) {
        fprintf(stderr, "%s: appending to '%s' failed\n", x->name, path);
        exit(1);
    }
}

