/*
 * experiments/ledger_read.c — reading the model ledgers back (ledger.h): a
 * resuming run reads DIR/mqar_models.tsv and every DIR/mqar_jobs/\*.tsv once,
 * into a table of lines, and looks each model up there.
 *
 * defines: lab_ledger_load, lab_ledger_find_any, lab_ledger_note_appended,
 *          lab_ledger_has_jobs, lab_ledger_each_own
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ledger.h"

/* One line of a ledger, as read. */
typedef struct {
    char *text;     /* the line without its '\n', NUL-terminated (it may hold a NUL) */
    size_t len;     /* its bytes                                                      */
    size_t key_len; /* ledger_key_len: 0 if the line holds no key                      */
    size_t file;    /* its ledger: table.files[file]                                  */
    size_t lineno;  /* 1-based; 0 for a line this run appended                        */
    int ended;      /* it ends with '\n' (a line cut short by a killed run does not)    */
} ledger_row;

/* Every ledger a resuming run reads, read once (lab_ledger_load). */
static struct {
    int loaded;
    char **files;
    size_t nfiles;
    ledger_row *rows;
    size_t nrows, cap;
} table;

static void out_of_memory(const lab_ctx *x)
{
    fprintf(stderr, "%s: out of memory\n", x->name);
    exit(1);
}

/* One line of f into line[LAB_LEDGER_LINE_MAX + 1], NUL-terminated, its
 * length (the '\n' included if it has one) in *len: 1 for a line, 0 at the
 * end of the file. Exits (status 1) on a read error or a line longer than
 * LAB_LEDGER_LINE_MAX, so that no file makes the read go on for ever. */
static int ledger_line(const lab_ctx *x, const char *path, size_t lineno, FILE *f, char *line,
                       size_t *len)
{
    size_t n = 0;
    int c = EOF;
    while (n < LAB_LEDGER_LINE_MAX && (c = getc(f)) != EOF) {
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
    if (n == LAB_LEDGER_LINE_MAX && c != '\n' && (c = getc(f)) != EOF) {
        fprintf(stderr, "%s: %s:%zu: a line longer than %d bytes, more than any ledger line "
                        "can be: not a model ledger (move it away, or choose another --out)\n",
                x->name, path, lineno, LAB_LEDGER_LINE_MAX);
        exit(1);
    }
    return n > 0;
}

/* The length of a ledger line's key (lab_ledger_key): its 14 fields and the
 * task=, gate=, data= and conv_off= fields after them where there are such; 0 if no
 * field follows. A key is matched whole: the default design's key is the start of
 * every other design's (its fields, then gate=...), and a dense task's of
 * every other task's. */
static size_t ledger_key_len(const char *line, size_t len)
{
    size_t i = 0;
    for (int tabs = 0; i < len; i++)
        if (line[i] == '\t' && ++tabs == 14)
            break;
    while (i < len && (strncmp(line + i + 1, "task=", 5) == 0 ||
                       strncmp(line + i + 1, "gate=", 5) == 0 ||
                       strncmp(line + i + 1, "data=", 5) == 0 ||
                       strncmp(line + i + 1, "conv_off=", 9) == 0)) {
        const char *tab = memchr(line + i + 1, '\t', len - i - 1);
        i = tab ? (size_t)(tab - line) : len;
    }
    return i < len ? i : 0;
}

/* Is this line cut short: the file's last line without its end (a run was
 * killed while writing it), or one a later append ended with LAB_LEDGER_CUT? */
static int row_cut(const ledger_row *r)
{
    const size_t m = strlen(LAB_LEDGER_CUT);
    return !r->ended || (r->len >= m && memcmp(r->text + r->len - m, LAB_LEDGER_CUT, m) == 0);
}

/* Add a line to the table. */
static void add_row(const lab_ctx *x, size_t file, size_t lineno, const char *line, size_t len)
{
    if (table.nrows == table.cap) {
        table.cap = table.cap ? 2 * table.cap : 256;
        ledger_row *more = realloc(table.rows, table.cap * sizeof *more);
        if (!more)
            out_of_memory(x);
        table.rows = more;
    }
    ledger_row *r = &table.rows[table.nrows++];
    r->ended = len > 0 && line[len - 1] == '\n';
    r->len = len - (size_t)r->ended;
    r->text = malloc(r->len + 1);
    if (!r->text)
        out_of_memory(x);
    memcpy(r->text, line, r->len);
    r->text[r->len] = '\0';
    r->key_len = ledger_key_len(r->text, r->len);
    r->file = file;
    r->lineno = lineno;
}

/* The index of path in table.files, added if new. */
static size_t file_index(const lab_ctx *x, const char *path)
{
    for (size_t i = 0; i < table.nfiles; i++)
        if (strcmp(table.files[i], path) == 0)
            return i;
    char **more = realloc(table.files, (table.nfiles + 1) * sizeof *more);
    char *copy = malloc(strlen(path) + 1);
    if (!more || !copy)
        out_of_memory(x);
    table.files = more;
    table.files[table.nfiles] = strcpy(copy, path);
    return table.nfiles++;
}

/* Read the ledger at path (if there is one: lab_ledger_usable) into the table. */
static void load_file(const lab_ctx *x, const char *path)
{
    if (!lab_ledger_usable(x, path, 0))
        return;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot read the model ledger '%s': %s\n", x->name, path,
                strerror(errno));
        exit(1);
    }
    const size_t file = file_index(x, path);
    char line[LAB_LEDGER_LINE_MAX + 1];
    size_t len, lineno = 0;
    while (ledger_line(x, path, ++lineno, f, line, &len))
        add_row(x, file, lineno, line, len);
    fclose(f);
    const ledger_row *last = table.nrows ? &table.rows[table.nrows - 1] : NULL;
    if (last && last->file == file && !last->ended && last->key_len)
        fprintf(stderr, "%s: %s:%zu: cut short (no line end: a run was killed while writing "
                        "it): not read; the next append ends it\n",
                x->name, path, last->lineno);
}

/* DIR/mqar_jobs cannot be read: one line, exit 1. */
static _Noreturn void jobs_dir_error(const lab_ctx *x, const char *dir, const char *why)
{
    fprintf(stderr, "%s: the jobs' ledgers '%s': %s (a resuming run reads every ledger there, "
                    "so it stops rather than train their models again)\n",
            x->name, dir, why);
    exit(1);
}

static int name_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The jobs' ledgers a resuming run reads: DIR/mqar_jobs/\*.tsv (names not
 * starting with '.', as a shell's glob), in name order, into a malloc'd array
 * of malloc'd paths (*n of them). No DIR/mqar_jobs is no jobs' ledgers; one
 * that is not a directory, or cannot be listed, stops the run (exit 1) with
 * its path and the reason: passing over it would train again every model its
 * ledgers hold. */
static char **jobs_ledgers(const lab_ctx *x, size_t *n)
{
    *n = 0;
    const size_t dn = strlen(x->out) + 16;
    char *dir = malloc(dn);
    if (!dir)
        out_of_memory(x);
    snprintf(dir, dn, "%s/mqar_jobs", x->out);
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        const int err = errno;
        if (err == ENOENT && lstat(dir, &sb) != 0) {
            free(dir); /* none */
            return NULL;
        }
        jobs_dir_error(x, dir, err == ENOENT ? "a symbolic link to nothing" : strerror(err));
    }
    if (!S_ISDIR(sb.st_mode))
        jobs_dir_error(x, dir, "not a directory");
    DIR *d = opendir(dir);
    if (!d)
        jobs_dir_error(x, dir, strerror(errno));
    char **names = NULL;
    size_t cap = 0;
    struct dirent *e;
    for (errno = 0; (e = readdir(d)) != NULL; errno = 0) {
        const size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 4 || strcmp(e->d_name + len - 4, ".tsv") != 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **more = realloc(names, cap * sizeof *names);
            if (!more)
                out_of_memory(x);
            names = more;
        }
        char *p = malloc(dn + len + 1);
        if (!p)
            out_of_memory(x);
        snprintf(p, dn + len + 1, "%s/%s", dir, e->d_name);
        names[(*n)++] = p;
    }
    if (errno) {
        fprintf(stderr, "%s: listing the jobs' ledgers '%s' failed: %s\n", x->name, dir,
                strerror(errno));
        exit(1);
    }
    closedir(d);
    free(dir);
    if (*n)
        qsort(names, *n, sizeof *names, name_order);
    return names;
}

/* Read every ledger a resuming run reads, once: DIR/mqar_models.tsv, then
 * DIR/mqar_jobs/\*.tsv in name order. */
void lab_ledger_load(const lab_ctx *x)
{
    if (table.loaded)
        return;
    table.loaded = 1;
    char *p = malloc(strlen(x->out) + 32);
    if (!p)
        out_of_memory(x);
    sprintf(p, "%s/mqar_models.tsv", x->out);
    load_file(x, p);
    free(p);
    size_t nj;
    char **jobs = jobs_ledgers(x, &nj);
    for (size_t i = 0; i < nj; i++) {
        load_file(x, jobs[i]);
        free(jobs[i]);
    }
    free(jobs);
}

/* One number field of a ledger line, p[0 .. n-1]: exactly what "%.17g"
 * prints (digits, sign, point, exponent, "inf"; no blanks, no hex, never
 * empty). 1 and *out if it is one, else 0. */
static int ledger_number(const char *p, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf || strspn(p, "0123456789+-.eEinf") < n)
        return 0;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *stop;
    *out = strtod(buf, &stop);
    return stop == buf + n;
}

/* A field of a line with the model's key that is not what the model could
 * have recorded: one line naming the file, the line, the field and its value
 * (at most 60 bytes of it, a byte that does not print as '?'), exit 1. */
static _Noreturn void bad_field(const lab_ctx *x, const ledger_row *r, const char *field,
                                const char *value, size_t n, const char *rule)
{
    char shown[64];
    size_t k = 0;
    for (; k < n && k < 60; k++)
        shown[k] = value[k] >= 0x20 && value[k] < 0x7f ? value[k] : '?';
    shown[k] = '\0';
    fprintf(stderr, "%s: %s:%zu: %s '%s%s' %s: not what this model can have recorded; a "
                    "resuming run reads no ledger it cannot trust (correct or remove the line)\n",
            x->name, table.files[r->file], r->lineno, field, shown, n > 60 ? "..." : "", rule);
    exit(1);
}

/* Is made_with[0 .. n-1] what lab_ledger_append writes: "kdalab VERSION
 * blas=KERNELS simd=LEVEL", each word non-empty, no other blank? */
static int made_with_ok(const char *p, size_t n)
{
    static const char *const part[] = {"kdalab ", " blas=", " simd="};
    const char *end = p + n;
    for (int i = 0; i < 3; i++) {
        const size_t m = strlen(part[i]);
        if ((size_t)(end - p) <= m || memcmp(p, part[i], m) != 0)
            return 0;
        p += m;
        const size_t word = strcspn(p, " \t");
        if (word == 0 || p + word > end)
            return 0;
        p += word;
    }
    return p == end;
}

/* Is field[0 .. n-1] "experiment=NAME", NAME a program's name (letters,
 * digits, '_', '-', '.')? */
static int experiment_ok(const char *p, size_t n)
{
    return n > 11 && memcmp(p, "experiment=", 11) == 0 &&
           strspn(p + 11, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") >=
               n - 11;
}

/* The record of a complete line with the model's key (s: its steps), into
 * *rec, every field checked against what lab_mqar_train can write for that
 * model (ledger.h):
 *   accuracy      a number in [0, 1]
 *   test_loss     a finite number >= 0, or inf in a diverged run's record
 *                 (accuracy 0, train_s 0, tokens_per_s 0)
 *   train_s, tokens_per_s   finite numbers >= 0
 *   steps_to_95   -1 (never), or a step from LAB_S95_WINDOW (the first at
 *                 which the window is full) to the model's steps; a line of an
 *                 older build has no such field
 *   made_with     "kdalab VERSION blas=KERNELS simd=LEVEL"; absent in the
 *                 oldest lines
 *   experiment    "experiment=NAME", the program that trained it; absent in
 *                 lines of an older build
 * and nothing after them; a CR before the line end is allowed. Anything else
 * is an error naming the file, the line, the field and its value (bad_field). */
static void row_record(const lab_ctx *x, const ledger_row *r, const lab_mqar_spec *s,
                       lab_ledger_record *rec)
{
    static const char *const name[] = {"accuracy", "test_loss", "train_s", "tokens_per_s"};
    const char *line = r->text;
    size_t len = r->len;
    if (memchr(line, '\0', len))
        bad_field(x, r, "the line", "", 0, "holds a NUL byte");
    if (len && line[len - 1] == '\r')
        len--; /* a CRLF line end */
    /* the fields after the key: f[i], fn[i] bytes each */
    const char *f[8], *end = line + len;
    size_t fn[8], nf = 0;
    for (const char *p = line + r->key_len + 1; p <= end && nf < 8; nf++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        f[nf] = p;
        fn[nf] = (size_t)((tab ? tab : end) - p);
        p += fn[nf] + 1;
    }
    double v[4];
    for (size_t i = 0; i < 4; i++) {
        if (i >= nf)
            bad_field(x, r, name[i], "", 0, "is missing (the line ends before it)");
        if (!ledger_number(f[i], fn[i], &v[i]))
            bad_field(x, r, name[i], f[i], fn[i], "is not a number");
        if (i == 0 && !(v[0] >= 0 && v[0] <= 1))
            bad_field(x, r, name[i], f[i], fn[i], "is not in [0, 1]");
        if (i == 1 && !(v[1] >= 0))
            bad_field(x, r, name[i], f[i], fn[i], "is not >= 0");
        if (i > 1 && !(isfinite(v[i]) && v[i] >= 0))
            bad_field(x, r, name[i], f[i], fn[i], "is not a finite number >= 0");
    }
    if (isinf(v[1]) && !(v[0] == 0 && v[2] == 0 && v[3] == 0))
        bad_field(x, r, name[1], f[1], fn[1],
                  "(a diverged run's loss) with accuracy, train_s or tokens_per_s not 0, as "
                  "a diverged run's record has them");
    size_t i = 4;
    long s95 = LAB_S95_UNKNOWN;
    if (i < nf && fn[i] >= 12 && memcmp(f[i], "steps_to_95=", 12) == 0) {
        const char *d = f[i] + 12;
        const size_t dn = fn[i] - 12;
        char buf[24], *stop = buf;
        if (dn > 0 && dn < sizeof buf && strspn(d, "-0123456789") >= dn) {
            memcpy(buf, d, dn);
            buf[dn] = '\0';
            errno = 0;
            s95 = strtol(buf, &stop, 10);
        }
        if (stop != buf + dn || dn == 0 || errno ||
            !(s95 == -1 || (s95 >= LAB_S95_WINDOW && (size_t)s95 <= s->steps))) {
            char rule[160];
            if (s->steps >= LAB_S95_WINDOW)
                snprintf(rule, sizeof rule, "is not -1 (never) or a step from %d (the first "
                         "with a full window) to %zu (this model's steps)", LAB_S95_WINDOW,
                         s->steps);
            else
                snprintf(rule, sizeof rule, "is not -1: this model's %zu steps are fewer than "
                         "the %d-step window", s->steps, LAB_S95_WINDOW);
            bad_field(x, r, "steps_to_95", d, dn, rule);
        }
        i++;
    }
    if (i < nf && !made_with_ok(f[i], fn[i]))
        bad_field(x, r, "made_with", f[i], fn[i],
                  "is not 'kdalab VERSION blas=KERNELS simd=LEVEL'");
    if (++i < nf && !experiment_ok(f[i], fn[i]))
        bad_field(x, r, "experiment", f[i], fn[i], "is not 'experiment=NAME'");
    if (++i < nf)
        bad_field(x, r, "a field after experiment", f[i], (size_t)(end - f[i]),
                  "is not a ledger field");
    memset(rec, 0, sizeof *rec);
    rec->tr.test_accuracy = v[0];
    rec->tr.test_loss = v[1];
    rec->tr.seconds = v[2];
    rec->tr.tokens_per_s = v[3];
    rec->steps_to_95 = s95;
}

/* "accuracy A, test loss L, steps_to_95 S" of a record, into buf[n]. */
static const char *record_text(const lab_ledger_record *rec, char *buf, size_t n)
{
    int k = snprintf(buf, n, "accuracy %.17g, test loss %.17g", rec->tr.test_accuracy,
                     rec->tr.test_loss);
    if (rec->steps_to_95 != LAB_S95_UNKNOWN && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", steps_to_95 %ld", rec->steps_to_95);
    return buf;
}

/* Do two records of one key disagree on what training gave? The training
 * time and tokens/s are the machine's, not the model's, and a line of an
 * older build has no steps_to_95. */
static int records_differ(const lab_ledger_record *a, const lab_ledger_record *b)
{
    return a->tr.test_accuracy != b->tr.test_accuracy || a->tr.test_loss != b->tr.test_loss ||
           (a->steps_to_95 != LAB_S95_UNKNOWN && b->steps_to_95 != LAB_S95_UNKNOWN &&
            a->steps_to_95 != b->steps_to_95);
}

/* The model with this key in the ledgers (lab_ledger_load). Every complete line
 * with the key is checked (row_record: a bad one is an error); the first in
 * reading order is the record; a later one that records the model
 * differently is a conflict, an error naming both lines (exit 1); identical
 * duplicates (a ledger copied twice into mqar_jobs/, a job run twice) are
 * fine. A line cut short (lab_ledger_load named it) is passed over. */
int lab_ledger_find_any(const lab_ctx *x, const lab_mqar_spec *s, const char *key,
                        lab_ledger_record *rec)
{
    lab_ledger_load(x);
    const size_t kn = strlen(key);
    const ledger_row *first = NULL;
    for (size_t i = 0; i < table.nrows; i++) {
        const ledger_row *r = &table.rows[i];
        if (r->key_len != kn || memcmp(r->text, key, kn) != 0 || row_cut(r))
            continue;
        lab_ledger_record got;
        row_record(x, r, s, &got);
        if (!first) {
            first = r;
            *rec = got;
        } else if (records_differ(rec, &got)) {
            char a[160], b[160];
            fprintf(stderr,
                    "%s: two ledger lines record one model differently: %s:%zu (%s) and "
                    "%s:%zu (%s); training is deterministic, so one is from another build or "
                    "another machine's kernels, or was edited: move the wrong one away\n",
                    x->name, table.files[first->file], first->lineno,
                    record_text(rec, a, sizeof a), table.files[r->file], r->lineno,
                    record_text(&got, b, sizeof b));
            exit(1);
        }
    }
    return first != NULL;
}

void lab_ledger_note_appended(const lab_ctx *x, const char *path, const char *line)
{
    if (table.loaded)
        add_row(x, file_index(x, path), 0, line, strlen(line));
}

/* Is file (a path lab_ledger_load read) DIR/mqar_jobs/NAME.*.tsv, NAME this
 * experiment's? */
static int own_job_file(const lab_ctx *x, const char *file)
{
    const size_t dn = strlen(x->out), sn = strlen("/mqar_jobs/"), nn = strlen(x->name);
    return strncmp(file, x->out, dn) == 0 && strncmp(file + dn, "/mqar_jobs/", sn) == 0 &&
           strncmp(file + dn + sn, x->name, nn) == 0 && file[dn + sn + nn] == '.';
}

int lab_ledger_has_jobs(const lab_ctx *x)
{
    lab_ledger_load(x);
    for (size_t i = 0; i < table.nfiles; i++)
        if (own_job_file(x, table.files[i]))
            return 1;
    return 0;
}

void lab_ledger_each_own(const lab_ctx *x, lab_ledger_line_fn *fn, void *user)
{
    lab_ledger_load(x);
    char tag[128];
    const int tn = snprintf(tag, sizeof tag, "\texperiment=%s", x->name);
    for (size_t i = 0; i < table.nrows; i++) {
        const ledger_row *r = &table.rows[i];
        size_t len = r->len;
        if (len && r->text[len - 1] == '\r')
            len--;
        const int tagged = tn > 0 && (size_t)tn < sizeof tag && len >= (size_t)tn &&
                           memcmp(r->text + len - (size_t)tn, tag, (size_t)tn) == 0;
        if (r->key_len && !row_cut(r) && (tagged || own_job_file(x, table.files[r->file])))
            fn(r->text, r->key_len, table.files[r->file], r->lineno, user);
    }
}
