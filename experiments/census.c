/*
 * experiments/census.c — the look a resuming training run takes at its sweep
 * before it trains anything (census.h).
 *
 * defines: lab_census_run, lab_census_note, lab_census_report
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "census.h"
#include "ledger.h"

/* One job of the sweep, as the copy saw it. */
typedef struct {
    size_t index;
    char *key;
    char what[200]; /* the model in words, for the list of missing ones */
    int found;
} census_job;

static census_job *jobs;
static size_t n_jobs, cap_jobs;

static void out_of_memory(const lab_ctx *x)
{
    fprintf(stderr, "%s: out of memory\n", x->name);
    exit(1);
}

void lab_census_run(lab_ctx *x)
{
    if (x->census)
        return;
    lab_ledger_load(x); /* read once, here: what it names is named once */
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: fork (to look at the ledgers before training): %s\n", x->name,
                strerror(errno));
        exit(1);
    }
    if (pid == 0) { /* the copy: runs the grid, trains nothing, writes nothing */
        x->census = 1;
        const int fd = open("/dev/null", O_WRONLY);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
            fprintf(stderr, "%s: /dev/null: %s\n", x->name, strerror(errno));
            exit(1);
        }
        close(fd);
        lab_tsv_discard(x);
        return;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "%s: waitpid: %s\n", x->name, strerror(errno));
            exit(1);
        }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return;
    if (WIFEXITED(st))
        exit(WEXITSTATUS(st)); /* it said why */
    fprintf(stderr, "%s: the look at the ledgers before training ended by signal %d\n", x->name,
            WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    exit(1);
}

void lab_census_note(const lab_ctx *x, size_t index, const lab_mqar_spec *s, const char *key,
                     int found)
{
    if (n_jobs == cap_jobs) {
        cap_jobs = cap_jobs ? 2 * cap_jobs : 128;
        census_job *more = realloc(jobs, cap_jobs * sizeof *more);
        if (!more)
            out_of_memory(x);
        jobs = more;
    }
    census_job *j = &jobs[n_jobs++];
    j->index = index;
    j->found = found;
    j->key = strdup(key);
    if (!j->key)
        out_of_memory(x);
    int k = snprintf(j->what, sizeof j->what, "%s (L = %zu, d = %zu), %zu pairs, lr %g, seed %lu, "
                     "%zu steps", s->mixers, s->L, s->H ? s->D / s->H : 0, s->P, s->lr, s->seed,
                     s->steps);
    if (s->task != KDALAB_MQAR_PLAIN && k > 0 && (size_t)k < sizeof j->what)
        k += snprintf(j->what + k, sizeof j->what - (size_t)k, ", task %s",
                      kdalab_mqar_task_name(s->task));
    if ((s->gate != KDALAB_OUTPUT_GATE_SIGMOID || s->gate_rank ||
         s->conv_init != KDALAB_CONV_INIT_UNIFORM) && k > 0 && (size_t)k < sizeof j->what)
        k += snprintf(j->what + k, sizeof j->what - (size_t)k, ", gate %s/%zu/%s",
                      kdalab_output_gate_name(s->gate), s->gate_rank,
                      kdalab_conv_init_name(s->conv_init));
    /* the convolution, where it is not on every block */
    if (!s->conv && k > 0 && (size_t)k < sizeof j->what)
        k += snprintf(j->what + k, sizeof j->what - (size_t)k, ", no conv");
    char blocks[KDALAB_MODEL_BLOCKS_TEXT];
    if (s->conv_off && k > 0 && (size_t)k < sizeof j->what &&
        kdalab_model_format_blocks(s->conv_off, blocks, sizeof blocks) == KDALAB_OK)
        snprintf(j->what + k, sizeof j->what - (size_t)k, ", no conv on blocks %.150s", blocks);
}

/* The missing jobs' numbers as a Slurm array takes them ("3,7-9,12"), into
 * a malloc'd string. */
static char *missing_list(const lab_ctx *x)
{
    char *out = malloc(n_jobs * 24 + 1);
    if (!out)
        out_of_memory(x);
    size_t n = 0;
    for (size_t i = 0; i < n_jobs; i++) {
        if (jobs[i].found)
            continue;
        size_t j = i;
        while (j + 1 < n_jobs && !jobs[j + 1].found && jobs[j + 1].index == jobs[j].index + 1)
            j++;
        n += (size_t)sprintf(out + n, n ? ",%zu" : "%zu", jobs[i].index);
        if (j > i)
            n += (size_t)sprintf(out + n, "-%zu", jobs[j].index);
        i = j;
    }
    out[n] = '\0';
    return out;
}

/* The 18 settings a ledger key holds (lab_ledger_key): the 14 fields, then
 * the task, the output-gate design, the data (vocabulary split, stacks,
 * fixed training set) and the blocks without the convolution (their
 * defaults where the key has no such field). */
#define N_SETTINGS 18
static const char *const setting[N_SETTINGS] = {
    "precision", "mixers", "layers", "d_model", "heads", "conv", "seq_len", "pairs", "vocab",
    "batch",     "steps",  "test",    "lr",    "seed", "task",    "gate", "data", "conv_off"};

static void key_settings(const char *key, size_t len, const char **v, size_t *vn)
{
    v[14] = "dense/0/0";
    v[15] = "sigmoid/0/uniform";
    v[16] = "even/0/0";
    v[17] = "none";
    for (int f = 14; f < N_SETTINGS; f++)
        vn[f] = strlen(v[f]);
    size_t i = 0;
    for (const char *p = key, *end = key + len; p <= end;) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        const size_t n = (size_t)((tab ? tab : end) - p);
        if (i < 14)
            v[i] = p, vn[i++] = n;
        else if (n > 5 && memcmp(p, "task=", 5) == 0)
            v[14] = p + 5, vn[14] = n - 5;
        else if (n > 5 && memcmp(p, "gate=", 5) == 0)
            v[15] = p + 5, vn[15] = n - 5;
        else if (n > 5 && memcmp(p, "data=", 5) == 0)
            v[16] = p + 5, vn[16] = n - 5;
        else if (n > 9 && memcmp(p, "conv_off=", 9) == 0)
            v[17] = p + 9, vn[17] = n - 9;
        if (!tab)
            break;
        p = tab + 1;
    }
    for (; i < 14; i++)
        v[i] = "", vn[i] = 0;
}

/* One setting's value as a reader reads it (the learning rate as %g, not the
 * key's %.17g), into buf. */
static const char *shown(int f, const char *v, size_t n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.*s", (int)n, v);
    if (f == 12)
        snprintf(buf, cap, "%g", strtod(buf, NULL));
    return buf;
}

/* How the ledger key a differs from this run's key b: the number of settings,
 * and "steps 2 (this run: 3), ..." into out[cap]. */
static size_t key_diff(const char *a, size_t an, const char *b, char *out, size_t cap)
{
    const char *va[N_SETTINGS], *vb[N_SETTINGS];
    size_t na[N_SETTINGS], nb[N_SETTINGS], count = 0, k = 0;
    key_settings(a, an, va, na);
    key_settings(b, strlen(b), vb, nb);
    out[0] = '\0';
    for (int f = 0; f < N_SETTINGS; f++) {
        if (na[f] == nb[f] && memcmp(va[f], vb[f], na[f]) == 0)
            continue;
        count++;
        char sa[64], sb[64];
        if (k < cap)
            k += (size_t)snprintf(out + k, cap - k, "%s%s %s (this run: %s)", k ? ", " : "",
                                  setting[f], shown(f, va[f], na[f], sa, sizeof sa),
                                  shown(f, vb[f], nb[f], sb, sizeof sb));
    }
    return count;
}

/* This experiment's ledger lines at settings the run does not ask for, by
 * how they differ from the nearest missing model. */
#define MAX_SHOWN 6
typedef struct {
    size_t n_other;
    size_t n_kinds;
    struct {
        char diff[300], where[400];
        size_t count;
    } kind[MAX_SHOWN];
} other_settings;

static void note_other(const char *line, size_t key_len, const char *file, size_t lineno,
                       void *user)
{
    other_settings *o = user;
    for (size_t i = 0; i < n_jobs; i++)
        if (strlen(jobs[i].key) == key_len && memcmp(jobs[i].key, line, key_len) == 0)
            return; /* a model this run asks for */
    char best[300] = "", diff[300];
    size_t fewest = N_SETTINGS + 1;
    for (size_t i = 0; i < n_jobs; i++) {
        const size_t d = jobs[i].found ? fewest : key_diff(line, key_len, jobs[i].key, diff,
                                                            sizeof diff);
        if (d < fewest) {
            fewest = d;
            strcpy(best, diff);
        }
    }
    o->n_other++;
    for (size_t k = 0; k < o->n_kinds; k++)
        if (strcmp(o->kind[k].diff, best) == 0) {
            o->kind[k].count++;
            return;
        }
    if (o->n_kinds == MAX_SHOWN)
        return;
    strcpy(o->kind[o->n_kinds].diff, best);
    snprintf(o->kind[o->n_kinds].where, sizeof o->kind[0].where, "%s:%zu", file, lineno);
    o->kind[o->n_kinds++].count = 1;
}

_Noreturn void lab_census_report(const lab_ctx *x)
{
    size_t found = 0;
    for (size_t i = 0; i < n_jobs; i++)
        found += jobs[i].found != 0;
    const size_t missing = n_jobs - found;
    if (missing == 0) {
        fprintf(stderr, "%s: all %zu models of this sweep are in the ledgers under %s/: "
                        "training none\n", x->name, n_jobs, x->out);
        exit(0);
    }
    other_settings o = {0};
    lab_ledger_each_own(x, note_other, &o);
    const int assembling = lab_ledger_has_jobs(x), asked = lab_train_missing();
    char *list = missing_list(x);
    const char *s = missing > 1 ? "s" : "";
    if (!asked && !assembling && o.n_other == 0) {
        if (found == 0)
            fprintf(stderr, "%s: none of the %zu models of this sweep is in the ledgers under "
                            "%s/: training all %zu\n", x->name, n_jobs, x->out, n_jobs);
        else
            fprintf(stderr, "%s: %zu of %zu models of this sweep are in the ledgers under %s/; "
                            "training the other %zu (job%s %s)\n",
                    x->name, found, n_jobs, x->out, missing, s, list);
        free(list);
        exit(0);
    }
    fprintf(stderr, "%s: %zu of %zu models of this sweep are in the ledgers under %s/; %zu %s in "
                    "none (job%s %s)%s\n",
            x->name, found, n_jobs, x->out, missing, missing > 1 ? "are" : "is", s, list,
            asked ? "" : ":");
    for (size_t i = 0, shown_jobs = 0; i < n_jobs && !asked; i++)
        if (!jobs[i].found && shown_jobs++ < 10)
            fprintf(stderr, "  job %zu: %s\n", jobs[i].index, jobs[i].what);
    if (missing > 10 && !asked)
        fprintf(stderr, "  ... and %zu more\n", missing - 10);
    if (o.n_other) {
        fprintf(stderr, "%s: the ledgers hold %zu model%s of this experiment at other settings "
                        "than this run's:\n", x->name, o.n_other, o.n_other > 1 ? "s" : "");
        size_t listed = 0;
        for (size_t k = 0; k < o.n_kinds; k++) {
            fprintf(stderr, "  %s: %zu model%s, e.g. %s\n", o.kind[k].diff, o.kind[k].count,
                    o.kind[k].count > 1 ? "s" : "", o.kind[k].where);
            listed += o.kind[k].count;
        }
        if (listed < o.n_other)
            fprintf(stderr, "  and %zu more, other ways\n", o.n_other - listed);
    }
    if (asked) {
        fprintf(stderr, "%s: KDALAB_TRAIN_MISSING is set: training the %zu missing model%s "
                        "here\n", x->name, missing, s);
        free(list);
        exit(0);
    }
    if (o.n_other)
        fprintf(stderr, "%s: not training the missing models at this run's settings: give the "
                        "flags the ledgers' models were made with (those of the job list), or "
                        "set KDALAB_TRAIN_MISSING=1 to train them\n", x->name);
    else {
        fprintf(stderr, "%s: an assembling run (this experiment has job ledgers in "
                        "%s/mqar_jobs/) does not train them: a full sweep's model can take half "
                        "an hour. Run the missing jobs, then assemble again: with GNU parallel, "
                        "rerun the job list with its job log and --resume-failed (--resume "
                        "counts a killed job as done); one job alone:\n  ",
                x->name, x->out);
        for (size_t i = 0; i < n_jobs; i++)
            if (!jobs[i].found) {
                lab_mqar_print_job(stderr, x, jobs[i].index);
                break;
            }
        fprintf(stderr, "%s: or set KDALAB_TRAIN_MISSING=1 to train them in this run\n",
                x->name);
    }
    free(list);
    exit(1);
}
