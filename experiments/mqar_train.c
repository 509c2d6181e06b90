/*
 * experiments/mqar_train.c — one model trained on MQAR for an experiment,
 * the shared TSV row (mqar_train.h).
 *
 * defines: lab_full, lab_resume, lab_train_missing, lab_mqar_flags, lab_mqar_parse,
 *          lab_mqar_precision, lab_mqar_check, lab_mqar_answers, lab_mqar_print_job,
 *          lab_mqar_train, lab_mqar_jobs_done, lab_mqar_row, lab_mqar_row_extra,
 *          lab_best_lr, lab_mqar_recall_task
 */
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>

#include "census.h"
#include "ledger.h"
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

int lab_train_missing(void)
{
    const char *v = getenv("KDALAB_TRAIN_MISSING");
    return v && *v && strcmp(v, "0") != 0;
}

static const char *precision = "fp32";

void lab_mqar_flags(lab_ctx *x)
{
    lab_flag_jobs(x);
    lab_flag_string(x, "precision", &precision,
                    "fp32 (the float32 twins) or fp64 (the float64 model)");
}

void lab_mqar_parse(lab_ctx *x, int argc, char **argv, const size_t *seeds, size_t max_seeds)
{
    lab_parse(x, argc, argv);
    kdalab_blas_choose_kernels(argv); /* a good command line: may restart the program, once */
    kdalab_train_keep_memory(); /* each step reuses the last one's pages */
    if (*seeds < 1 || *seeds > max_seeds) {
        fprintf(stderr, "%s: --seeds must be 1 .. %zu\n", x->name, max_seeds);
        exit(2);
    }
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
                        const lab_ledger_record *rec, lab_mqar_result *r)
{
    r->accuracy = rec->tr.test_accuracy;
    r->loss = rec->tr.test_loss;
    r->seconds = rec->tr.seconds;
    r->tokens_per_s = rec->tr.tokens_per_s;
    r->steps_to_95 = rec->steps_to_95;
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
    c->model.conv_off = s->conv_off;
    c->model.output_gate = s->gate;
    c->model.gate_rank = s->gate_rank;
    c->model.conv_init = s->conv_init;
    c->model.vocab = s->vocab;
    c->task = (kdalab_mqar_config){
        .T = s->T,
        .kv_pairs = s->P,
        .key_vocab = s->vocab > 0 ? (s->vocab - 1) / 2 : 0,
        .value_vocab = s->vocab > 0 ? s->vocab - 1 - (s->vocab - 1) / 2 : 0,
        .task = s->task,
        .updates = s->updates,
        .recent = s->recent,
        .train_set = s->train_set};
    if (s->task == KDALAB_MQAR_STACK) { /* 2 S operation tokens, the rest values */
        c->task.key_vocab = 2 * s->stacks;
        c->task.value_vocab = s->vocab > 1 + 2 * s->stacks ? s->vocab - 1 - 2 * s->stacks : 0;
    } else if (s->split == LAB_SPLIT_ZOOLOGY &&
               kdalab_mqar_zoology_split(s->vocab, &c->task) != KDALAB_OK) {
        refuse(x, s);
    }
    if ((s->task == KDALAB_MQAR_STACK) != (s->stacks > 0)) {
        fprintf(stderr, "%s: %s with %zu stacks: the stack task, and only it, has stacks\n",
                x->name, kdalab_mqar_task_name(s->task), s->stacks);
        exit(2);
    }
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
    /* a run that cannot finish is refused as `kdalab train` refuses it */
    double train_ops, test_ops;
    kdalab_train_cost(c, &train_ops, &test_ops, NULL);
    if (train_ops + test_ops > LAB_WORK_BOUND) {
        fprintf(stderr, "%s: the flags give %s with %zu steps of %zu sequences and %zu test "
                        "sequences of %zu tokens: about %.2g floating-point operations, above "
                        "the bound on one model, %.0e\n",
                x->name, s->mixers, s->steps, s->batch, s->test, s->T, train_ops + test_ops,
                LAB_WORK_BOUND);
        exit(2);
    }
}

void lab_mqar_check(const lab_ctx *x, const lab_mqar_spec *s)
{
    kdalab_train_config c;
    size_t P;
    config_of(x, s, &c, &P);
}

size_t lab_mqar_answers(const lab_mqar_spec *s)
{
    if (s->task == KDALAB_MQAR_PALINDROME)
        return s->vocab - 1;
    if (s->task == KDALAB_MQAR_STACK)
        return s->vocab - 1 - 2 * s->stacks;
    return s->split == LAB_SPLIT_ZOOLOGY ? s->vocab - s->vocab / 2 : s->vocab - 1 - (s->vocab - 1) / 2;
}

/* Steps to 95 %: the training batches' accuracies of the last LAB_S95_WINDOW
 * steps (each batch is fresh, so each is a sample of the test accuracy before
 * that step's update), and the first step whose window mean reached 0.95. */
typedef struct {
    double acc[LAB_S95_WINDOW], sum;
    long first;
} s95_state;

static int s95_step(const kdalab_train_progress *p, void *user)
{
    s95_state *w = user;
    const size_t i = (p->step - 1) % LAB_S95_WINDOW;
    w->sum += p->accuracy - (p->step > LAB_S95_WINDOW ? w->acc[i] : 0);
    w->acc[i] = p->accuracy;
    if (w->first < 0 && p->step >= LAB_S95_WINDOW && w->sum >= 0.95 * LAB_S95_WINDOW)
        w->first = (long)p->step;
    return 0;
}

/* The models lab_mqar_train has been asked for so far: the next one's job number. */
static size_t n_jobs = 0;
/* with --list-jobs and KDALAB_RESUME: the jobs not listed, their models in a ledger */
static size_t n_listed_found = 0;

/* One word of a command line, quoted for a POSIX shell where it needs to be. */
static void print_word(FILE *f, const char *w)
{
    if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                        "_-./:=,+@%") == strlen(w)) {
        fputs(w, f);
        return;
    }
    putc('\'', f);
    for (; *w; w++)
        *w == '\'' ? fputs("'\\''", f) : putc(*w, f);
    putc('\'', f);
}

/* Job `index` as one shell command line: this run's command line without
 * --list-jobs, with --job index, KDALAB_FULL=1 in front of a full sweep's
 * (lab_parse refused a word with a line break). */
void lab_mqar_print_job(FILE *f, const lab_ctx *x, size_t index)
{
    if (lab_full())
        fputs("KDALAB_FULL=1 ", f);
    for (int i = 0; i < x->argc; i++) {
        if (strcmp(x->argv[i], "--list-jobs") == 0)
            continue;
        if (i)
            putc(' ', f);
        print_word(f, x->argv[i]);
    }
    fprintf(f, " --job %zu\n", index);
}

void lab_mqar_jobs_done(const lab_ctx *x)
{
    if (x->census)
        lab_census_report(x);
    if (x->list_jobs) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "%s: writing the job list failed\n", x->name);
            exit(1);
        }
        if (lab_resume())
            fprintf(stderr, "%s: %zu of %zu jobs listed; the models of the other %zu are in the "
                            "ledgers under %s/ (KDALAB_RESUME)\n", x->name,
                    n_jobs - n_listed_found, n_jobs, n_listed_found, x->out);
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
    /* a resuming run looks at its whole sweep before it trains (census.h) */
    static int looked;
    if (!x->list_jobs && x->job < 0 && lab_resume() && !looked++)
        lab_census_run(x);
    if (x->census) {
        char key[512];
        lab_ledger_key(x, s, key, sizeof key);
        lab_ledger_record rec;
        if (!keep)
            lab_census_note(x, index, s, key, lab_ledger_find_any(x, s, key, &rec));
        r->model = c.model;
        return;
    }
    if (x->list_jobs) { /* resuming: only the jobs whose model no ledger holds */
        char key[512];
        lab_ledger_key(x, s, key, sizeof key);
        lab_ledger_record rec;
        if (lab_resume() && lab_ledger_find_any(x, s, key, &rec))
            n_listed_found++;
        else
            lab_mqar_print_job(stdout, x, index);
        r->model = c.model;
        return;
    }
    if (x->job >= 0 && (size_t)x->job != index) {
        r->model = c.model;
        return;
    }
    lab_ledger_record rec = {.steps_to_95 = -1};
    kdalab_train_result *tr = &rec.tr;
    char key[512];
    lab_ledger_key(x, s, key, sizeof key);
    /* the ledger this model will be appended to is checked before it is trained */
    char *path = lab_ledger_path(x);
    lab_ledger_usable(x, path, 1);
    if (!keep && lab_resume() && lab_ledger_find_any(x, s, key, &rec)) {
        free(path);
        fill_result(&c, s, &rec, r);
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
    s95_state w = {.first = -1};
    if (strcmp(lab_mqar_precision(x), "fp64") == 0) {
        st = kdalab_train_mqar_f64(&c, theta, s95_step, &w, tr);
    } else {
        float *t32 = malloc(P * sizeof *t32);
        if (!t32) {
            fprintf(stderr, "%s: out of memory\n", x->name);
            exit(1);
        }
        st = kdalab_train_mqar_f32(&c, t32, s95_step, &w, tr);
        for (size_t i = 0; i < P; i++)
            theta[i] = t32[i];
        free(t32);
    }
    if (st == KDALAB_ERANGE) {
        fprintf(stderr, "%s: %s at lr %g diverged (%s): counted as accuracy 0\n", x->name,
                s->mixers, s->lr, kdalab_last_error());
        memset(tr, 0, sizeof *tr);
        tr->test_loss = 1.0 / 0.0;
    } else if (bad_input(st)) {
        refuse(x, s);
    } else {
        lab_check(x, st, "train_mqar");
    }
    rec.steps_to_95 = w.first;
    lab_ledger_append(x, path, key, &rec);
    if (x->job >= 0) {
        fprintf(stderr, "%s: job %ld: %s, %zu pairs, lr %g, seed %lu: accuracy %.4f (%.1f s); "
                        "ledger %s\n", x->name, x->job, s->mixers, s->P, s->lr, s->seed,
                tr->test_accuracy, tr->seconds, path);
        free(path);
        exit(0);
    }
    free(path);
    fill_result(&c, s, &rec, r);
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

int lab_mqar_recall_task(const lab_ctx *x, const char *name, kdalab_mqar_task *task,
                         lab_split *split)
{
    if (kdalab_mqar_parse_task(name, task) != KDALAB_OK ||
        (*task != KDALAB_MQAR_DENSE && *task != KDALAB_MQAR_ZOOLOGY &&
         *task != KDALAB_MQAR_OVERWRITE)) {
        fprintf(stderr, "%s: --task %s: expected dense, zoology or overwrite\n", x->name, name);
        return 2;
    }
    *split = *task == KDALAB_MQAR_DENSE ? LAB_SPLIT_EVEN : LAB_SPLIT_ZOOLOGY;
    return 0;
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
