/*
 * lib/train/checkpoint.c — the one checkpoint format (kdalab_checkpoint.h):
 * a trained model's config.txt and one .npy per tensor of its layout
 * (lib/train/model.c), written and read. `kdalab train --out` writes it
 * through kdalab_checkpoint_write (tools/kdalab/checkpoint.c adds the
 * all-or-nothing replacement of the directory); kdalab_hybrid_load
 * (lib/model/trained.c) reads it for prefill and decode.
 *
 * defines: kdalab_checkpoint_write, kdalab_checkpoint_read_config,
 *          kdalab_checkpoint_read_params
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "train_internal.h"

#define MAX_LINES 64
#define LINE_CAP 2048 /* a line's bytes before its newline: at most LINE_CAP - 1 */

/* The model's keys, in the order config.txt lists them after the format line:
 * the first K_REQUIRED always, the rest only when not their default (absent:
 * the default, so a checkpoint written before they existed reads as it did). */
enum { K_MIXER, K_LAYERS, K_D, K_HEADS, K_F, K_CONV, K_VOCAB, K_REQUIRED,
       K_GATE = K_REQUIRED, K_RANK, K_CINIT, K_COFF, K_N };
static const char *const KEYS[K_N] = {"mixer", "layers", "d_model", "heads", "mlp_hidden",
                                      "conv", "vocab", "output_gate", "gate_rank", "conv_init",
                                      "conv_off"};

/* "dir/name" in a new string (NULL when out of memory). */
static char *join(const char *dir, const char *name, const char *suffix)
{
    const size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

static kdalab_status check_dir(const char *dir, const char *what)
{
    if (!dir)
        return kdalab_fail(KDALAB_ENULL, "%s: dir is NULL", what);
    if (!*dir) /* "" would name "/config.txt" */
        return kdalab_fail(KDALAB_EINVAL, "%s: dir is \"\": name a directory", what);
    return KDALAB_OK;
}

/* ---- writing ------------------------------------------------------------------- */

/* The number of lines of extra (NULL: 0), or -1 with the error set when one
 * is not "key=value\n" with a key of [A-Za-z0-9_] that is not the model's. */
static long extra_lines(const char *extra)
{
    long n = 0;
    for (const char *p = extra; p && *p; n++) {
        const char *eq = p, *nl = strchr(p, '\n');
        while (isalnum((unsigned char)*eq) || *eq == '_')
            eq++;
        const size_t klen = (size_t)(eq - p);
        int reserved = klen == 6 && strncmp(p, "format", 6) == 0;
        for (int k = 0; k < K_N; k++)
            reserved |= klen == strlen(KEYS[k]) && strncmp(p, KEYS[k], klen) == 0;
        if (klen == 0 || *eq != '=' || !nl || nl < eq || reserved ||
            (size_t)(nl - p) >= LINE_CAP) {
            kdalab_fail(KDALAB_EINVAL, "checkpoint: extra line %ld ('%.*s') is not key=value "
                        "ending in a newline, with a key of letters, digits and '_' other "
                        "than the model's, under %d bytes", n + 1,
                        (int)(nl ? (size_t)(nl - p) : strlen(p)), p, LINE_CAP);
            return -1;
        }
        p = nl + 1;
    }
    return n;
}

/* dir/config.txt: the format line, the model, extra; flushed to disk. */
static kdalab_status write_config(const char *dir, const kdalab_model_config *cfg,
                                  const char *extra)
{
    char *path = join(dir, "config.txt", "");
    if (!path)
        return kdalab_fail(KDALAB_ENOMEM, "checkpoint: out of memory");
    FILE *f = fopen(path, "w");
    if (!f) {
        kdalab_status s = kdalab_fail(KDALAB_EIO, "%s: %s", path, strerror(errno));
        free(path);
        return s;
    }
    fprintf(f, "%s\nmixer=", KDALAB_CHECKPOINT_FORMAT);
    for (size_t l = 0; l < cfg->L; l++)
        fprintf(f, "%s%s", l ? "," : "", kdalab_mixer_name(cfg->mixer[l]));
    fprintf(f, "\nlayers=%zu\nd_model=%zu\nheads=%zu\nmlp_hidden=%zu\nconv=%d\nvocab=%zu\n",
            cfg->L, cfg->D, cfg->H, cfg->F, cfg->conv ? 1 : 0, cfg->vocab);
    if (cfg->output_gate != KDALAB_OUTPUT_GATE_SIGMOID)
        fprintf(f, "output_gate=%s\n", kdalab_output_gate_name(cfg->output_gate));
    if (cfg->gate_rank)
        fprintf(f, "gate_rank=%zu\n", cfg->gate_rank);
    if (cfg->conv_init != KDALAB_CONV_INIT_UNIFORM)
        fprintf(f, "conv_init=%s\n", kdalab_conv_init_name(cfg->conv_init));
    char off[KDALAB_MODEL_BLOCKS_TEXT]; /* the blocks without the convolution, by index */
    if (cfg->conv_off && kdalab_model_format_blocks(cfg->conv_off, off, sizeof off) == KDALAB_OK)
        fprintf(f, "conv_off=%s\n", off);
    fputs(extra ? extra : "", f);
    int err = fflush(f) != 0 || fsync(fileno(f)) != 0 ? errno : 0;
    if (fclose(f) != 0 && !err)
        err = errno;
    kdalab_status s = err ? kdalab_fail(KDALAB_EIO, "%s: %s", path, strerror(err)) : KDALAB_OK;
    free(path);
    return s;
}

kdalab_status kdalab_checkpoint_write(const char *dir, const kdalab_model_config *cfg,
                                      const double *theta, const char *extra)
{
    // theta [n_params] in the layout of kdalab_model_tensor_at
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s = check_dir(dir, "checkpoint write");
    if (s == KDALAB_OK)
        s = kdalab__model_layout(cfg, &lay, NULL);
    if (s == KDALAB_OK && !theta)
        s = kdalab_fail(KDALAB_ENULL, "checkpoint write: theta is NULL");
    if (s != KDALAB_OK)
        return s;
    const long n_extra = extra_lines(extra);
    if (n_extra < 0)
        return KDALAB_EINVAL;
    const int n_model = K_REQUIRED + (cfg->output_gate != KDALAB_OUTPUT_GATE_SIGMOID) +
                        (cfg->gate_rank != 0) + (cfg->conv_init != KDALAB_CONV_INIT_UNIFORM) +
                        (cfg->conv_off != 0);
    if (n_extra > MAX_LINES - 1 - n_model)
        return kdalab_fail(KDALAB_ESIZE, "checkpoint write: %ld extra lines; at most %d",
                           n_extra, MAX_LINES - 1 - n_model);
    s = kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, lay.n_params, NULL);
    kdalab_model_tensor *list = s == KDALAB_OK ? malloc(lay.n_tensors * sizeof *list) : NULL;
    if (s == KDALAB_OK && !list)
        s = kdalab_fail(KDALAB_ENOMEM, "checkpoint write: out of memory");
    if (s == KDALAB_OK)
        s = kdalab__model_layout(cfg, &lay, list);
    /* a config.txt from before goes first: were this write to stop among the
     * tensors, it would describe a mix of old and new ones, read without error */
    char *config = s == KDALAB_OK ? join(dir, "config.txt", "") : NULL;
    if (s == KDALAB_OK && !config)
        s = kdalab_fail(KDALAB_ENOMEM, "checkpoint write: out of memory");
    if (s == KDALAB_OK && remove(config) != 0 && errno != ENOENT)
        s = kdalab_fail(KDALAB_EIO, "%s: cannot remove: %s", config, strerror(errno));
    free(config);
    for (size_t i = 0; s == KDALAB_OK && i < lay.n_tensors; i++) {
        const kdalab_model_tensor *t = &list[i];
        char *path = join(dir, t->name, ".npy");
        const size_t shape[2] = {t->rows, t->cols};
        const int nd = t->rows == 1 ? 1 : 2;
        s = path ? kdalab_npy_write(path, KDALAB_DTYPE_F64, theta + t->offset, nd,
                                    nd == 1 ? shape + 1 : shape)
                 : kdalab_fail(KDALAB_ENOMEM, "checkpoint write: out of memory");
        free(path);
    }
    free(list);
    if (s == KDALAB_OK)
        s = write_config(dir, cfg, extra);
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}

/* ---- reading ------------------------------------------------------------------- */

/* A decimal integer, the whole of v, into *out; 0 when it is not one. */
static int parse_size(const char *v, size_t *out)
{
    if (!isdigit((unsigned char)*v))
        return 0;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || n > SIZE_MAX)
        return 0;
    *out = (size_t)n;
    return 1;
}

/* Read config.txt's lines into the model's values (the values of mixer,
 * output_gate, conv_init and conv_off into text[k], LINE_CAP bytes each); 0, or -1
 * with why[cap]. */
static int read_lines(FILE *f, char *text[K_N], size_t num[K_N], int seen[K_N], char *why,
                      size_t cap)
{
    char line[LINE_CAP + 1];
    int n = 0;
    /* zeroed before each line: a newline past strlen's end is a NUL inside it */
    for (; memset(line, 0, sizeof line), fgets(line, sizeof line, f); n++) {
        const size_t len = strlen(line);
        const char *nl = memchr(line, '\n', LINE_CAP);
        if (n == MAX_LINES) {
            snprintf(why, cap, "has more than %d lines", MAX_LINES);
            return -1;
        }
        if (len == 0 || (nl && (size_t)(nl - line) >= len)) {
            snprintf(why, cap, "has a NUL byte in line %d", n + 1);
            return -1;
        }
        if (line[len - 1] != '\n') {
            snprintf(why, cap, "has a line over %d bytes, or one without a newline",
                     LINE_CAP - 1);
            return -1;
        }
        line[len - 1] = '\0';
        if (n == 0 && strcmp(line, KDALAB_CHECKPOINT_FORMAT) != 0) {
            snprintf(why, cap, "does not begin with the line %s", KDALAB_CHECKPOINT_FORMAT);
            return -1;
        }
        const char *eq = strchr(line, '=');
        for (int k = 0; n > 0 && eq && k < K_N; k++) {
            if ((size_t)(eq - line) != strlen(KEYS[k]) || strncmp(line, KEYS[k], eq - line))
                continue;
            if (seen[k]++ || (text[k] ? snprintf(text[k], LINE_CAP, "%s", eq + 1) < 0
                                      : !parse_size(eq + 1, &num[k]))) {
                snprintf(why, cap, "has a second or malformed %s= line", KEYS[k]);
                return -1;
            }
        }
    }
    if (ferror(f)) {
        snprintf(why, cap, "cannot be read: %s", strerror(errno));
        return -1;
    }
    if (n == 0) {
        snprintf(why, cap, "is empty: it does not begin with the line %s",
                 KDALAB_CHECKPOINT_FORMAT);
        return -1;
    }
    for (int k = 0; k < K_REQUIRED; k++)
        if (!seen[k]) {
            snprintf(why, cap, "has no %s= line", KEYS[k]);
            return -1;
        }
    return 0;
}

kdalab_status kdalab_checkpoint_read_config(const char *dir, kdalab_model_config *cfg)
{
    kdalab_clear_error();
    kdalab_status s = check_dir(dir, "checkpoint");
    if (s == KDALAB_OK && !cfg)
        s = kdalab_fail(KDALAB_ENULL, "checkpoint: cfg is NULL");
    if (s != KDALAB_OK)
        return s;
    char *path = join(dir, "config.txt", ""), *mixers = calloc(4, LINE_CAP);
    char *text[K_N] = {0};
    if (mixers) {
        text[K_MIXER] = mixers;
        text[K_GATE] = mixers + LINE_CAP;
        text[K_CINIT] = mixers + 2 * LINE_CAP;
        text[K_COFF] = mixers + 3 * LINE_CAP;
    }
    struct stat st;
    FILE *f = NULL;
    if (!path || !mixers)
        s = kdalab_fail(KDALAB_ENOMEM, "checkpoint: out of memory");
    else if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        s = kdalab_fail(KDALAB_EIO, "%s: no such regular file", path);
    else if (!(f = fopen(path, "r")))
        s = kdalab_fail(KDALAB_EIO, "%s: %s", path, strerror(errno));
    size_t num[K_N] = {0};
    int seen[K_N] = {0};
    char why[160];
    if (s == KDALAB_OK && read_lines(f, text, num, seen, why, sizeof why) != 0)
        s = kdalab_fail(KDALAB_EFORMAT, "%s %s", path, why);
    if (f)
        fclose(f);
    kdalab_model_config m;
    memset(&m, 0, sizeof m);
    m.L = num[K_LAYERS];
    m.D = num[K_D];
    m.H = num[K_HEADS];
    m.F = num[K_F];
    m.vocab = num[K_VOCAB];
    m.conv = (int)num[K_CONV];
    m.gate_rank = num[K_RANK];
    if (s == KDALAB_OK && seen[K_GATE] &&
        kdalab_output_gate_parse(text[K_GATE], &m.output_gate) != KDALAB_OK)
        s = kdalab_fail(KDALAB_EFORMAT, "%s: output_gate=%.40s is not sigmoid, swish or none",
                        path, text[K_GATE]);
    if (s == KDALAB_OK && seen[K_CINIT] &&
        kdalab_conv_init_parse(text[K_CINIT], &m.conv_init) != KDALAB_OK)
        s = kdalab_fail(KDALAB_EFORMAT, "%s: conv_init=%.40s is not uniform or normal0.02", path,
                        text[K_CINIT]);
    if (s == KDALAB_OK && seen[K_COFF] &&
        kdalab_model_parse_blocks(text[K_COFF], &m.conv_off) != KDALAB_OK)
        s = kdalab_fail(KDALAB_EFORMAT, "%s: conv_off=%.40s is not a list of distinct block "
                        "indices below 64 joined by commas", path, text[K_COFF]);
    /* why the keys describe no model: the reader's own checks first, each
     * saying what is wrong, then the library's (which set their message) */
    char bad[96] = "";
    if (s == KDALAB_OK && num[K_CONV] > 1)
        snprintf(bad, sizeof bad, "conv=%zu: must be 0 or 1", num[K_CONV]);
    else if (s == KDALAB_OK && (m.L == 0 || m.L > KDALAB_MODEL_MAX_LAYERS))
        snprintf(bad, sizeof bad, "layers=%zu: must be in [1, %d]", m.L,
                 KDALAB_MODEL_MAX_LAYERS);
    if (s == KDALAB_OK &&
        (*bad || kdalab_model_parse_mixers(mixers, &m.L, 1, m.mixer) != KDALAB_OK ||
         kdalab_model_size(&m, NULL, NULL) != KDALAB_OK))
        s = kdalab_fail(KDALAB_EFORMAT, "%s does not describe a model (conv=%zu, layers=%zu, "
                        "mixer=%.40s%s): %s", path, num[K_CONV], num[K_LAYERS], mixers,
                        strlen(mixers) > 40 ? "..." : "", *bad ? bad : kdalab_last_error());
    free(path);
    free(mixers);
    if (s != KDALAB_OK)
        return s;
    *cfg = m;
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_checkpoint_read_params(const char *dir, const kdalab_model_config *cfg,
                                            double *theta)
{
    // theta [n_params] in the layout of kdalab_model_tensor_at
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s = check_dir(dir, "checkpoint");
    if (s == KDALAB_OK)
        s = kdalab__model_layout(cfg, &lay, NULL);
    if (s == KDALAB_OK && !theta)
        s = kdalab_fail(KDALAB_ENULL, "checkpoint: theta is NULL");
    kdalab_model_tensor *list = s == KDALAB_OK ? malloc(lay.n_tensors * sizeof *list) : NULL;
    if (s == KDALAB_OK && !list)
        s = kdalab_fail(KDALAB_ENOMEM, "checkpoint: out of memory");
    if (s == KDALAB_OK)
        s = kdalab__model_layout(cfg, &lay, list);
    for (size_t i = 0; s == KDALAB_OK && i < lay.n_tensors; i++) {
        const kdalab_model_tensor *t = &list[i];
        char *path = join(dir, t->name, ".npy");
        kdalab_array a = {0};
        s = path ? kdalab_npy_read(path, &a)
                 : kdalab_fail(KDALAB_ENOMEM, "checkpoint: out of memory");
        const int nd = t->rows == 1 ? 1 : 2;
        if (s == KDALAB_OK && (a.ndim != nd || a.shape[0] != (nd == 1 ? t->cols : t->rows) ||
                               (nd == 2 && a.shape[1] != t->cols))) {
            if (nd == 1)
                s = kdalab_fail(KDALAB_ESIZE, "%s: expected shape [%zu]", path, t->cols);
            else
                s = kdalab_fail(KDALAB_ESIZE, "%s: expected shape [%zu, %zu]", path, t->rows,
                                t->cols);
        }
        if (s == KDALAB_OK)
            s = kdalab_check_finite_f64(path, a.data, a.size);
        if (s == KDALAB_OK)
            memcpy(theta + t->offset, a.data, a.size * sizeof(double));
        kdalab_array_free(&a);
        free(path);
    }
    free(list);
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}
