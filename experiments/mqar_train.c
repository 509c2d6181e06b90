/*
 * experiments/mqar_train.c — one model trained on MQAR for an experiment,
 * the shared TSV row (mqar_train.h).
 *
 * defines: lab_full, lab_resume, lab_mqar_flags, lab_mqar_precision, lab_mqar_check,
 *          lab_mqar_train, lab_mqar_jobs_done, lab_mqar_row, lab_mqar_row_extra
 */
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_statistics_double.h>

#include "mqar_train.h"

int lab_full(void)
{
    const char *v = getenv("KDALAB_FULL");
    return v && *v && strcmp(v, "0") != 0;
}

int lab_resume(void)
{
    const char *v = getenv("KDALAB_RESUME");
    return v && *v && strcmp(v, "0") != 0;
}

static const char *precision = "fp32";

void lab_mqar_flags(lab_ctx *x)
{
    lab_flag_jobs(x);
    lab_flag_string(x, "precision", &precision,
                    "fp32 (the float32 twins) or fp64 (the float64 model)");
}

const char *lab_mqar_precision(const lab_ctx *x)
{
    if (strcmp(precision, "fp32") != 0 && strcmp(precision, "fp64") != 0) {
        fprintf(stderr, "%s: --precision %s: fp32 or fp64\n", x->name, precision);
        exit(2);
    }
    return precision;
}

static void fill_result(const kdalab_train_config *c, const lab_mqar_spec *s,
                        const kdalab_train_result *tr, lab_mqar_result *r)
{
    r->accuracy = tr->test_accuracy;
    r->loss = tr->test_loss;
    r->seconds = tr->seconds;
    r->tokens_per_s = tr->tokens_per_s;
    r->lr = s->lr;
    r->model = c->model;
}

/* Statuses that mean the flags asked for a model or task the library refuses. */
static int bad_input(kdalab_status st)
{
    return st == KDALAB_ESIZE || st == KDALAB_EDOMAIN || st == KDALAB_EINVAL ||
           st == KDALAB_EOVERFLOW || st == KDALAB_ENULL;
}

/* A bad command line: one line naming the model, exit 2 (the TSVs of an
 * earlier run stay: lab_tsv_open writes to .tmp files until they close). */
static void refuse(const lab_ctx *x, const lab_mqar_spec *s)
{
    fprintf(stderr, "%s: the flags give %s, D = %zu, H = %zu, %zu pairs at T = %zu: %s\n",
            x->name, s->mixers, s->D, s->H, s->P, s->T, kdalab_last_error());
    exit(2);
}

/* The model ledger, DIR/mqar_models.tsv: one line per trained model,
 * "key<TAB>accuracy<TAB>test_loss<TAB>train_s<TAB>tokens_per_s<TAB>made_with"
 * (the numbers %.17g, so a model read back prints as it did when trained;
 * made_with names what sets the last bits besides the key: kdalab's
 * version, OpenBLAS's kernels and the SIMD level, e.g. "kdalab 0.1.0
 * blas=SkylakeX simd=avx512"; ledgers from before it have no such field and
 * read the same; it is a record, not part of the key), appended
 * (one write, then a flush) as each model finishes, so an interrupted sweep
 * keeps what it finished and two experiments may share a directory. The key
 * is every input of the run, printed exactly (%.17g for the learning rate):
 * training is deterministic, so the same key gives the same bits. */
static void ledger_key(const lab_ctx *x, const lab_mqar_spec *s, char *key, size_t n)
{
    /* the plain task's key has no task field: the ledgers written before the
     * other tasks existed read as they did */
    char task[96] = "";
    if (s->task != KDALAB_MQAR_PLAIN)
        snprintf(task, sizeof task, "\ttask=%s/%zu/%zu", kdalab_mqar_task_name(s->task),
                 s->updates, s->recent);
    snprintf(key, n, "%s\t%s\t%zu\t%zu\t%zu\t%d\t%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%.17g\t%lu%s",
             lab_mqar_precision(x), s->mixers, s->L, s->D, s->H, s->conv, s->T, s->P, s->vocab,
             s->batch, s->steps, s->test, s->lr, s->seed, task);
}

/* The ledger this run appends to: DIR/mqar_models.tsv, or for job I of a
 * sweep (--job I) its own, DIR/mqar_jobs/NAME.I.tsv, so that jobs running at
 * once, here or on other machines, never write one file. A resuming run reads
 * DIR/mqar_models.tsv and every DIR/mqar_jobs/\*.tsv: merging the ledgers of
 * jobs run elsewhere is copying their files into DIR/mqar_jobs/. */
static char *ledger_path(const lab_ctx *x)
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
static int ledger_usable(const lab_ctx *x, const char *path, int for_append)
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
                       kdalab_train_result *tr)
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
            /* (after tokens_per_s: made_with, or the end of an older line) */
        }
        if (!rule)
            rule = ledger_rule_broken(v);
        if (rule) {
            bad_line = lineno;
            bad_rule = rule;
            continue;
        }
        memset(tr, 0, sizeof *tr);
        tr->test_accuracy = v[0];
        tr->test_loss = v[1];
        tr->seconds = v[2];
        tr->tokens_per_s = v[3];
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
static int ledger_find_any(const lab_ctx *x, const char *key, kdalab_train_result *tr)
{
    size_t n = strlen(x->out) + 64;
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    snprintf(p, n, "%s/mqar_models.tsv", x->out);
    int found = ledger_usable(x, p, 0) && ledger_find(x, p, key, tr);
    snprintf(p, n, "%s/mqar_jobs/*.tsv", x->out);
    glob_t g;
    if (!found && glob(p, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !found; i++)
            found = ledger_usable(x, g.gl_pathv[i], 0) && ledger_find(x, g.gl_pathv[i], key, tr);
        globfree(&g);
    }
    free(p);
    return found;
}

static void ledger_append(const lab_ctx *x, const char *path, const char *key,
                          const kdalab_train_result *tr)
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
                     "%s%s\t%.17g\t%.17g\t%.17g\t%.17g\tkdalab %s blas=%s simd=%s\n",
                     cut ? "\n" : "", key, tr->test_accuracy, tr->test_loss, tr->seconds,
                     tr->tokens_per_s, KDALAB_VERSION, blas ? blas : "not-openblas",
                     kdalab_simd_level_name(kdalab_simd_get_level()));
    if (n < 0 || (size_t)n >= sizeof line || fwrite(line, 1, (size_t)n, f) != (size_t)n ||
        fclose(f) != 0) {
        fprintf(stderr, "%s: appending to '%s' failed\n", x->name, path);
        exit(1);
    }
}

/* The trainer's configuration of a spec, and its number of parameters;
 * refuses (exit 2) a spec the library refuses, before anything is trained. */
static void config_of(const lab_ctx *x, const lab_mqar_spec *s, kdalab_train_config *c,
                      size_t *n_params)
{
    memset(c, 0, sizeof *c);
    c->model.L = s->L;
    if (kdalab_model_parse_mixers(s->mixers, &c->model.L, 1, c->model.mixer) != KDALAB_OK)
        refuse(x, s);
    c->model.D = s->D;
    c->model.H = s->H;
    c->model.F = 2 * s->D;
    c->model.conv = s->conv;
    c->model.vocab = s->vocab;
    c->task = (kdalab_mqar_config){
        .T = s->T,
        .kv_pairs = s->P,
        .key_vocab = s->vocab > 0 ? (s->vocab - 1) / 2 : 0,
        .value_vocab = s->vocab > 0 ? s->vocab - 1 - (s->vocab - 1) / 2 : 0,
        .task = s->task,
        .updates = s->updates,
        .recent = s->recent};
    c->opt = (kdalab_adamw_config){s->lr, s->lr / 10, 0.9, 0.999, 1e-8, 0.1, 1.0,
                                   s->steps / 10, s->steps};
    c->batch = s->batch;
    c->test_sequences = s->test;
    c->seed = s->seed;
    double lr0;
    if (kdalab_model_size(&c->model, n_params, NULL) != KDALAB_OK ||
        kdalab_mqar_vocab_size(&c->task, NULL, NULL) != KDALAB_OK ||
        kdalab_adamw_lr(&c->opt, 0, &lr0) != KDALAB_OK)
        refuse(x, s);
}

void lab_mqar_check(const lab_ctx *x, const lab_mqar_spec *s)
{
    kdalab_train_config c;
    size_t P;
    config_of(x, s, &c, &P);
}

/* The models lab_mqar_train has been asked for so far: the next one's job number. */
static size_t n_jobs = 0;

/* One word of a command line, quoted for a POSIX shell where it needs to be. */
static void print_word(const char *w)
{
    if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                        "_-./:=,+@%") == strlen(w)) {
        fputs(w, stdout);
        return;
    }
    putchar('\'');
    for (; *w; w++)
        *w == '\'' ? fputs("'\\''", stdout) : putchar(*w);
    putchar('\'');
}

/* --list-jobs: job `index` as one shell command line: this run's command
 * line without --list-jobs, with --job index, KDALAB_FULL=1 in front of a
 * full sweep's. */
static void print_job(const lab_ctx *x, size_t index)
{
    if (lab_full())
        fputs("KDALAB_FULL=1 ", stdout);
    for (int i = 0; i < x->argc; i++) {
        if (strcmp(x->argv[i], "--list-jobs") == 0)
            continue;
        if (i)
            putchar(' ');
        print_word(x->argv[i]);
    }
    printf(" --job %zu\n", index);
}

void lab_mqar_jobs_done(const lab_ctx *x)
{
    if (x->list_jobs) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "%s: writing the job list failed\n", x->name);
            exit(1);
        }
        exit(0);
    }
    if (x->job >= 0) {
        fprintf(stderr, "%s: --job %ld: this sweep has %zu jobs, 0 to %zu (see --list-jobs)\n",
                x->name, x->job, n_jobs, n_jobs ? n_jobs - 1 : 0);
        exit(2);
    }
}

void lab_mqar_train(lab_ctx *x, const lab_mqar_spec *s, int keep, lab_mqar_result *r)
{
    kdalab_train_config c;
    size_t P;
    memset(r, 0, sizeof *r);
    config_of(x, s, &c, &P);
    const size_t index = n_jobs++;
    if (keep && (x->list_jobs || x->job >= 0)) {
        fprintf(stderr, "%s: --list-jobs, --job: this sweep keeps its models' parameters, so "
                        "it runs as one job\n", x->name);
        exit(2);
    }
    if (x->list_jobs) {
        print_job(x, index);
        r->model = c.model;
        return;
    }
    if (x->job >= 0 && (size_t)x->job != index) {
        r->model = c.model;
        return;
    }
    kdalab_train_result tr;
    char key[512];
    ledger_key(x, s, key, sizeof key);
    /* the ledger this model will be appended to is checked before it is trained */
    char *path = ledger_path(x);
    ledger_usable(x, path, 1);
    if (!keep && lab_resume() && ledger_find_any(x, key, &tr)) {
        free(path);
        fill_result(&c, s, &tr, r);
        if (x->job >= 0) {
            fprintf(stderr, "%s: job %ld: in a ledger already (KDALAB_RESUME): not trained\n",
                    x->name, x->job);
            exit(0);
        }
        return;
    }
    double *theta = malloc(P * sizeof *theta);
    if (!theta) {
        fprintf(stderr, "%s: out of memory\n", x->name);
        exit(1);
    }
    kdalab_status st;
    if (strcmp(lab_mqar_precision(x), "fp64") == 0) {
        st = kdalab_train_mqar_f64(&c, theta, NULL, NULL, &tr);
    } else {
        float *t32 = malloc(P * sizeof *t32);
        if (!t32) {
            fprintf(stderr, "%s: out of memory\n", x->name);
            exit(1);
        }
        st = kdalab_train_mqar_f32(&c, t32, NULL, NULL, &tr);
        for (size_t i = 0; i < P; i++)
            theta[i] = t32[i];
        free(t32);
    }
    if (st == KDALAB_ERANGE) {
        fprintf(stderr, "%s: %s at lr %g diverged (%s): counted as accuracy 0\n", x->name,
                s->mixers, s->lr, kdalab_last_error());
        memset(&tr, 0, sizeof tr);
        tr.test_loss = 1.0 / 0.0;
    } else if (bad_input(st)) {
        refuse(x, s);
    } else {
        lab_check(x, st, "train_mqar");
    }
    ledger_append(x, path, key, &tr);
    if (x->job >= 0) {
        fprintf(stderr, "%s: job %ld: %s, %zu pairs, lr %g, seed %lu: accuracy %.4f (%.1f s); "
                        "ledger %s\n", x->name, x->job, s->mixers, s->P, s->lr, s->seed,
                tr.test_accuracy, tr.seconds, path);
        free(path);
        exit(0);
    }
    free(path);
    fill_result(&c, s, &tr, r);
    if (keep)
        r->theta = theta;
    else
        free(theta);
}

void lab_mqar_row_extra(FILE *f, const char *label, const lab_mqar_spec *s,
                        const lab_mqar_result *r, const char *extra)
{
    fprintf(f, "%s\t%s\t%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%lu\t%g\t%zu\t%.4f\t%.4f\t%.1f%s%s\n",
            label, s->mixers, r->model.L, s->D, s->H, s->D / s->H, s->P, s->T, s->seed, r->lr,
            s->steps, r->accuracy, r->loss, r->seconds, extra ? "\t" : "", extra ? extra : "");
    fflush(f);
}

size_t lab_best_lr(const double *acc, size_t stride, size_t n_lr, size_t seeds, double *mean)
{
    size_t best = 0;
    *mean = -1;
    for (size_t il = 0; il < n_lr; il++) {
        const double mu = gsl_stats_mean(acc + il * stride, 1, seeds);
        if (mu > *mean) {
            *mean = mu;
            best = il;
        }
    }
    return best;
}

void lab_mqar_row(FILE *f, const char *label, const lab_mqar_spec *s, const lab_mqar_result *r)
{
    lab_mqar_row_extra(f, label, s, r, NULL);
}
