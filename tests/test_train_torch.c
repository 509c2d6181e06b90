/*
 * tests/test_train_torch.c — the model's loss and gradient
 * (kdalab_model_loss_f64) against PyTorch autograd: the golden cases of
 * tests/golden_torch/ (or $KDALAB_GOLDEN_TORCH), written by
 * scripts/torch_model_check.py, an independent float64 implementation of the
 * same model from its equations (the mechanisms' recurrent form one step at
 * a time; no code of lib/). Tiny models (vocab 11, D = 8, H = 2, F = 12,
 * B = 3, T = 6) that together run each of the five mixers with the short
 * convolution on and off. Each case's weights are copied into theta at the
 * offsets of kdalab_model_tensor_at by name, so the layout (names, order,
 * shapes, count) is checked against the Python one as well.
 *
 * Tolerance: both sides are float64 and compute the same function; they
 * differ only in rounding. The C side runs the chunkwise form (a UT-transform
 * solve instead of T rank-one updates), sums matrix products in the CBLAS's
 * order and the batch as two halves weighted by their counted positions;
 * torch runs the recurrence and its own reductions. Every value is O(1)
 * (loss about 2.4, weights below 0.5) and the chain is a few hundred
 * operations deep, so the expected disagreement is a few hundred ulps at
 * most, about 1e-13 relative; measured when this was written: 0 (the same
 * bits) on the loss and 1.5e-14 on the worst gradient tensor. The bound
 * 1e-10 (relative error max |a - b| / max |b| per tensor, |a - b| / |b| for
 * the loss) leaves three orders of margin over rounding yet is far below
 * what a modelling difference gives, as measured in torch on these cases:
 * RMSNorm eps 1e-5 instead of 1e-6 moves the loss by 6e-7 .. 6e-5 and the
 * gradients by 3e-3 .. 1e-2 relative; the output norm's eps 1e-6 instead of
 * 1e-5, the gradients by 0.4 .. 7 (its rows' mean square is 1e-8 .. 1e-2
 * here, often near eps); one element of the first block's Wq moved by 1e-6
 * gives 3e-7 (loss) and 1e-4 (gradient), checked by test_torch_discriminates.
 * The accuracy must agree to 1e-12 (a ratio of small integers); every
 * gradient tensor must be nonzero on both sides, so no comparison passes
 * vacuously; the cases must run every mixer with conv on and off.
 *
 * defines: main (the cmocka group train_torch) and its tests
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define TORCH_TOL 1e-10 /* relative, per tensor and for the loss          */
#define ACC_TOL 1e-12   /* absolute, on the accuracy                      */
#define MAX_CASES 16

/* One golden case, its arrays in kdalab's layout. */
typedef struct {
    char name[64];
    kdalab_model_config cfg;
    size_t B, T, n_tensors, n_params;
    int32_t *tokens, *targets; /* [B, T]                                     */
    double *theta, *grad;      /* [n_params]: the weights, torch's gradient  */
    double loss, accuracy;     /* torch's                                    */
} torch_case;

/* The directory of the golden files (tests/golden_torch, or $KDALAB_GOLDEN_TORCH). */
static const char *torch_dir(void)
{
    const char *d = getenv("KDALAB_GOLDEN_TORCH");
    return d && *d ? d : "tests/golden_torch";
}

/* Read <dir>/<case>/<file>.npy into a (the test fails if it cannot). */
static void load(const torch_case *c, const char *file, kdalab_array *a)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s.npy", torch_dir(), c->name, file);
    kdalab_status s = kdalab_npy_read(path, a);
    if (s != KDALAB_OK)
        fail_msg("reading %s: %s (%s)", path, kdalab_strerror(s), kdalab_last_error());
}

/* Parse <case>/config.txt (key=value lines) into c->cfg, B, T, n_tensors, n_params. */
static void parse_config(torch_case *c)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/%s/config.txt", torch_dir(), c->name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run the tests from the repository root)", path);
    size_t *num[] = {&c->cfg.vocab, &c->cfg.D, &c->cfg.H, &c->cfg.L, &c->cfg.F,
                     &c->B,         &c->T,     &c->n_tensors, &c->n_params};
    const char *key[] = {"vocab", "D", "H", "L", "F", "B", "T", "tensors", "params"};
    const size_t n_num = sizeof key / sizeof key[0];
    int seen = 0, have_conv = 0;
    char mixers[256] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *val = eq + 1;
        for (size_t i = 0; i < n_num; i++)
            if (strcmp(line, key[i]) == 0) {
                char *end;
                *num[i] = (size_t)strtoul(val, &end, 10);
                if (end == val || *end)
                    fail_msg("%s: %s=%s is not a count", path, line, val);
                seen |= 1 << i;
            }
        if (strcmp(line, "conv") == 0) {
            c->cfg.conv = atoi(val);
            have_conv = 1;
        }
        if (strcmp(line, "mixer") == 0)
            snprintf(mixers, sizeof mixers, "%s", val);
    }
    fclose(f);
    if (seen != (1 << n_num) - 1 || !have_conv || !mixers[0])
        fail_msg("%s: a key of vocab, D, H, L, F, conv, mixer, B, T, tensors, params is "
                 "missing", path);
    /* the per-block list must have L names (the library's parser, as the CLI's) */
    size_t L = c->cfg.L;
    if (kdalab_model_parse_mixers(mixers, &L, 1, c->cfg.mixer) != KDALAB_OK)
        fail_msg("%s: mixer=%s: %s", path, mixers, kdalab_last_error());
}

/* Copy <case>/<file>.npy, which must have tensor t's shape ([cols] for a
 * vector, [rows, cols] for a matrix), into dst + t->offset. */
static void load_tensor(const torch_case *c, const char *file, const kdalab_model_tensor *t,
                        double *dst)
{
    kdalab_array a;
    load(c, file, &a);
    const int ok = t->rows == 1 ? a.ndim == 1 && a.shape[0] == t->cols
                                : a.ndim == 2 && a.shape[0] == t->rows && a.shape[1] == t->cols;
    if (!ok)
        fail_msg("%s: %s.npy has %d dimensions (%zu, %zu), not the layout's [%zu, %zu]",
                 c->name, file, a.ndim, a.shape[0], a.ndim > 1 ? a.shape[1] : 0, t->rows,
                 t->cols);
    memcpy(dst + t->offset, a.data, t->rows * t->cols * sizeof(double));
    kdalab_array_free(&a);
}

/* Read an integer array [B, T] into out (values must be exact int32s). */
static void load_ints(const torch_case *c, const char *file, int32_t *out)
{
    kdalab_array a;
    load(c, file, &a);
    if (a.ndim != 2 || a.shape[0] != c->B || a.shape[1] != c->T)
        fail_msg("%s: %s.npy is not [B, T] = [%zu, %zu]", c->name, file, c->B, c->T);
    for (size_t i = 0; i < a.size; i++) {
        out[i] = (int32_t)a.data[i];
        if ((double)out[i] != a.data[i])
            fail_msg("%s: %s[%zu] = %g is not an integer", c->name, file, i, a.data[i]);
    }
    kdalab_array_free(&a);
}

/* Load one case: its config, then every tensor of kdalab's layout for that
 * config and its torch gradient, tokens, targets, loss and accuracy. */
static void case_load(const char *name, torch_case *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    parse_config(c);
    size_t P, n;
    assert_int_equal(kdalab_model_size(&c->cfg, &P, &n), KDALAB_OK);
    if (P != c->n_params || n != c->n_tensors)
        fail_msg("%s: kdalab's layout has %zu tensors, %zu parameters; torch's %zu, %zu",
                 name, n, P, c->n_tensors, c->n_params);
    c->theta = malloc(P * sizeof *c->theta);
    c->grad = malloc(P * sizeof *c->grad);
    c->tokens = malloc(c->B * c->T * sizeof *c->tokens);
    c->targets = malloc(c->B * c->T * sizeof *c->targets);
    assert_true(c->theta && c->grad && c->tokens && c->targets);
    for (size_t i = 0; i < n; i++) {
        kdalab_model_tensor t;
        char file[64];
        assert_int_equal(kdalab_model_tensor_at(&c->cfg, i, &t), KDALAB_OK);
        load_tensor(c, t.name, &t, c->theta);
        snprintf(file, sizeof file, "grad.%s", t.name);
        load_tensor(c, file, &t, c->grad);
    }
    load_ints(c, "tokens", c->tokens);
    load_ints(c, "targets", c->targets);
    kdalab_array a;
    load(c, "loss", &a);
    if (a.size != 2)
        fail_msg("%s: loss.npy holds %zu values, not 2 (loss, accuracy)", name, a.size);
    c->loss = a.data[0];
    c->accuracy = a.data[1];
    kdalab_array_free(&a);
}

static void case_free(torch_case *c)
{
    free(c->theta);
    free(c->grad);
    free(c->tokens);
    free(c->targets);
}

/* The case names of MANIFEST.tsv (first column); returns how many. */
static size_t manifest(char names[][64], size_t max)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/MANIFEST.tsv", torch_dir());
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run the tests from the repository root)", path);
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "%63s", names[n]) != 1)
            fail_msg("malformed MANIFEST line: %s", line);
        n++;
    }
    fclose(f);
    assert_true(n > 0);
    return n;
}

/* The worst errors of kdalab against torch on one case: *loss_err for the
 * loss (relative), the return value for the gradient (relative, the worst
 * tensor, named in worst_name [40]). Fails if the accuracy differs or a
 * gradient tensor is zero on either side. */
static double compare(const torch_case *c, const double *theta, double *loss_err,
                      char *worst_name)
{
    double *g = malloc(c->n_params * sizeof *g), loss, acc;
    assert_non_null(g);
    assert_int_equal(kdalab_model_loss_f64(&c->cfg, theta, c->B, c->T, c->tokens, c->targets,
                                           &loss, &acc, g),
                     KDALAB_OK);
    *loss_err = fabs(loss - c->loss) / fabs(c->loss);
    if (!(fabs(acc - c->accuracy) <= ACC_TOL))
        fail_msg("%s: accuracy %.17g, torch's %.17g", c->name, acc, c->accuracy);
    double worst = 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        kdalab_model_tensor t;
        assert_int_equal(kdalab_model_tensor_at(&c->cfg, i, &t), KDALAB_OK);
        const size_t n = t.rows * t.cols;
        double ref_max = 0, our_max = 0;
        for (size_t j = 0; j < n; j++) {
            ref_max = fmax(ref_max, fabs(c->grad[t.offset + j]));
            our_max = fmax(our_max, fabs(g[t.offset + j]));
        }
        if (!(ref_max > 1e-8 && our_max > 1e-8)) /* a zero gradient would compare vacuously */
            fail_msg("%s: %s: max |grad| = %.3g (kdalab), %.3g (torch)", c->name, t.name,
                     our_max, ref_max);
        const double e = rel_err_f64(g + t.offset, c->grad + t.offset, n);
        if (getenv("KDALAB_TORCH_VERBOSE"))
            printf("      %s %s %.2g\n", c->name, t.name, e);
        if (!(e <= worst)) { /* also catches NaN */
            worst = e;
            snprintf(worst_name, 40, "%s", t.name);
        }
    }
    free(g);
    return worst;
}

/* Every case: loss, accuracy and every gradient tensor within TORCH_TOL of
 * torch's; the cases together cover each mixer with conv on and off. */
static void test_torch_loss_and_grad(void **state)
{
    (void)state;
    char names[MAX_CASES][64];
    const size_t n = manifest(names, MAX_CASES);
    int covered[KDALAB_MIXER_KDA + 1][2] = {{0}};
    double worst_loss = 0, worst_grad = 0;
    const clock_t t0 = clock();
    for (size_t k = 0; k < n; k++) {
        torch_case c;
        case_load(names[k], &c);
        for (size_t l = 0; l < c.cfg.L; l++)
            covered[c.cfg.mixer[l]][c.cfg.conv != 0] = 1;
        double le;
        char where[40] = "";
        const double ge = compare(&c, c.theta, &le, where);
        printf("    %-26s loss %.6f: loss error %.2g, gradient error %.2g (%s)\n", c.name,
               c.loss, le, ge, where);
        if (!(le <= TORCH_TOL))
            fail_msg("%s: loss relative error %.3g > %.0g", c.name, le, TORCH_TOL);
        if (!(ge <= TORCH_TOL))
            fail_msg("%s: %s: gradient relative error %.3g > %.0g", c.name, where, ge,
                     TORCH_TOL);
        worst_loss = fmax(worst_loss, le);
        worst_grad = fmax(worst_grad, ge);
        case_free(&c);
    }
    for (int kind = 0; kind <= KDALAB_MIXER_KDA; kind++)
        for (int conv = 0; conv < 2; conv++)
            if (!covered[kind][conv])
                fail_msg("no golden case runs mixer kind %d with conv %s", kind,
                         conv ? "on" : "off");
    printf("    %zu cases against PyTorch autograd: worst %.2g (loss), %.2g (gradient), bound "
           "%.0g; %.2f s CPU\n", n, worst_loss, worst_grad, TORCH_TOL,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* The comparison can fail: theta moved by 1e-6 in one element of the first
 * block's Wq, the deepest weight from the loss, no longer matches torch. */
static void test_torch_discriminates(void **state)
{
    (void)state;
    char names[MAX_CASES][64];
    const size_t n = manifest(names, MAX_CASES);
    for (size_t k = 0; k < n; k++) {
        torch_case c;
        case_load(names[k], &c);
        kdalab_model_tensor t;
        size_t i = 0;
        do
            assert_int_equal(kdalab_model_tensor_at(&c.cfg, i++, &t), KDALAB_OK);
        while (strcmp(t.name, "blocks.0.mixer.Wq") != 0);
        c.theta[t.offset] += 1e-6;
        double le;
        char where[40] = "";
        const double ge = compare(&c, c.theta, &le, where);
        if (!(fmax(le, ge) > 100 * TORCH_TOL))
            fail_msg("%s: Wq moved by 1e-6 still matches torch (loss %.2g, gradient %.2g)",
                     c.name, le, ge);
        if (k == 0)
            printf("    %s with blocks.0.mixer.Wq[0][0] moved by 1e-6: loss error %.2g, "
                   "gradient error %.2g (%s)\n", c.name, le, ge, where);
        case_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_loss_and_grad),
        cmocka_unit_test(test_torch_discriminates),
    };
    return cmocka_run_group_tests_name("train_torch", tests, NULL, NULL);
}
