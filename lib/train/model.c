/*
 * lib/train/model.c — the model's parameters: where each tensor lives in the
 * flat vector theta (the layout kdalab_train.h describes) and how it is
 * initialised. The loss and its gradient are in lib/train/model_loss.c,
 * which reads the same layout through kdalab__model_layout().
 *
 * defines: kdalab_model_size, kdalab_model_tensor_at, kdalab_model_init,
 *          kdalab_mixer_name, kdalab_model_parse_mixers, kdalab_model_parse_blocks,
 *          kdalab_model_format_blocks,
 *          kdalab_output_gate_name,
 *          kdalab_conv_init_name, kdalab_output_gate_parse, kdalab_conv_init_parse,
 *          kdalab_train_cost,
 *          kdalab__model_layout, kdalab__model_check_batch (lib/train/train_internal.h)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "internal.h"
#include "train_internal.h"

/* The mixer's tensors in kdalab_mixer_params' order. */
static const char *const mixer_name[MIX_N] = {
    "Wq", "Wk", "Wv", "Wo", "cq", "ck", "cv", "Wb", "Wa", "Wg", "Wg2", "A_log", "dt_bias", "Wog",
    "onorm", "Wog2", "bog"};

/* Shape [rows, cols] of mixer tensor i of a block of kind under cfg, with
 * the convolution or not (conv); 0 if unused. */
static int mixer_shape(const kdalab_model_config *cfg, kdalab_mixer_kind kind, int conv, int i,
                       size_t *rows, size_t *cols)
{
    const size_t D = cfg->D, H = cfg->H, r = cfg->gate_rank;
    const int beta = train_has_beta(kind);
    const int ogate = kind != KDALAB_MIXER_ATTENTION && cfg->output_gate != KDALAB_OUTPUT_GATE_NONE;
    const kdalab_g_shape gs = train_g_shape_of(kind);
    const int gdn = gs == KDALAB_G_PER_HEAD, kda = gs == KDALAB_G_PER_KEY; /* the gate's shape */
    const int linear = kind != KDALAB_MIXER_ATTENTION;
    *rows = 1;
    *cols = 0;
    switch (i) {
    case MIX_WQ: case MIX_WK: case MIX_WV: case MIX_WO: *rows = D; *cols = D; break;
    case MIX_CQ: case MIX_CK: case MIX_CV:
        if (conv) { *rows = 4; *cols = D; }
        break;
    case MIX_WB: if (beta) { *rows = D; *cols = H; } break;
    case MIX_WA: if (gdn) { *rows = D; *cols = H; } break;
    case MIX_WG: if (kda) { *rows = D; *cols = D / H; } break;
    case MIX_WG2: if (kda) { *rows = D / H; *cols = D; } break;
    case MIX_WOG: if (ogate) { *rows = D; *cols = r ? r : D; } break;
    case MIX_ONORM: if (linear) *cols = D / H; break;
    case MIX_WOG2: if (ogate && r) { *rows = r; *cols = D; } break;
    case MIX_BOG: if (ogate && r) *cols = D; break;
    case MIX_ALOG: if (gdn || kda) *cols = H; break;
    case MIX_DTB: if (gdn || kda) *cols = gdn ? H : D; break;
    }
    return *cols != 0;
}

/* Append one tensor to the layout being built; returns its offset. */
static size_t add(model_layout_t *lay, kdalab_model_tensor *list, size_t rows, size_t cols,
                  int decay, const char *name)
{
    const size_t at = lay->n_params;
    if (list) {
        kdalab_model_tensor *t = &list[lay->n_tensors];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->offset = at;
        t->rows = rows;
        t->cols = cols;
        t->decay = decay;
    }
    size_t n, bytes;
    lay->n_tensors++;
    /* each tensor's products index it with a CBLAS int; the total is bytes */
    if (!kdalab_mul_size(rows, cols, &n) || n > INT32_MAX || lay->n_params + n < n ||
        !kdalab_mul_size(lay->n_params + n, sizeof(double), &bytes))
        lay->overflow = 1;
    else
        lay->n_params += n;
    return at;
}

/* A conv_off the model refuses: the blocks by index, then why (formatted
 * only when the check fails: the layout is built at every training step). */
static kdalab_status conv_off_fail(uint64_t mask, const char *why)
{
    char off[KDALAB_MODEL_BLOCKS_TEXT];
    kdalab_model_format_blocks(mask, off, sizeof off);
    return kdalab_fail(KDALAB_EINVAL, "model: conv_off %s %s", off, why);
}

kdalab_status kdalab__model_layout(const kdalab_model_config *cfg, model_layout_t *lay,
                                   kdalab_model_tensor *list)
{
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "model: config is NULL");
    const size_t V = cfg->vocab, D = cfg->D, H = cfg->H, L = cfg->L, F = cfg->F;
    if (V == 0 || D == 0 || H == 0 || F == 0)
        return kdalab_fail(KDALAB_ESIZE, "model: vocab = %zu, D = %zu, H = %zu, F = %zu: "
                           "each must be >= 1", V, D, H, F);
    if (D % H)
        return kdalab_fail(KDALAB_ESIZE, "model: D = %zu is not a multiple of H = %zu", D, H);
    if (L == 0 || L > KDALAB_MODEL_MAX_LAYERS)
        return kdalab_fail(KDALAB_ESIZE, "model: L = %zu blocks; 1 .. %d allowed", L,
                           KDALAB_MODEL_MAX_LAYERS);
    for (size_t l = 0; l < L; l++)
        if ((int)cfg->mixer[l] < 0 || cfg->mixer[l] >= KDALAB_N_MIXERS)
            return kdalab_fail(KDALAB_EINVAL, "model: block %zu has unknown mixer kind %d", l,
                               (int)cfg->mixer[l]);
        else if (train_unserved(cfg->mixer[l]))
            return kdalab_fail(KDALAB_EINVAL, "model: block %zu: %s has no training mixer", l,
                               kdalab_mixer_name(cfg->mixer[l]));
    if ((int)cfg->output_gate < 0 || cfg->output_gate > KDALAB_OUTPUT_GATE_NONE ||
        (int)cfg->conv_init < 0 || cfg->conv_init > KDALAB_CONV_INIT_NORMAL)
        return kdalab_fail(KDALAB_EINVAL, "model: unknown output gate %d or conv init %d",
                           (int)cfg->output_gate, (int)cfg->conv_init);
    if (cfg->gate_rank && cfg->output_gate == KDALAB_OUTPUT_GATE_NONE)
        return kdalab_fail(KDALAB_EINVAL, "model: gate_rank %zu with output gate none",
                           cfg->gate_rank);
    if (cfg->gate_rank > D)
        return kdalab_fail(KDALAB_ESIZE, "model: gate_rank %zu above D = %zu", cfg->gate_rank, D);
    const uint64_t every = L < 64 ? ((uint64_t)1 << L) - 1 : UINT64_MAX;
    if (cfg->conv_off && !cfg->conv)
        return conv_off_fail(cfg->conv_off, "with conv 0: there is no convolution to leave off");
    if (cfg->conv_off & ~every) {
        char above[48];
        snprintf(above, sizeof above, "names a block at or above L = %zu", L);
        return conv_off_fail(cfg->conv_off, above);
    }
    if (cfg->conv_off && cfg->conv_off == every) /* one model, one spelling */
        return conv_off_fail(cfg->conv_off, "leaves every block without the convolution: "
                                            "that is conv 0");
    int linear = 0; /* the output gate is a linear mixer's: set on none, it would do nothing */
    for (size_t l = 0; l < L; l++)
        linear |= cfg->mixer[l] != KDALAB_MIXER_ATTENTION;
    if (!linear && (cfg->output_gate != KDALAB_OUTPUT_GATE_SIGMOID || cfg->gate_rank))
        return kdalab_fail(KDALAB_EINVAL, "model: output gate %s%s set, but every block is "
                           "attention: the output gate is a linear mixer's (leave it at its "
                           "default)", kdalab_output_gate_name(cfg->output_gate),
                           cfg->gate_rank ? " with a gate_rank" : "");
    memset(lay, 0, sizeof *lay);
    char nm[40];
    lay->embed = add(lay, list, V, D, 1, "embed");
    for (size_t l = 0; l < L; l++) {
        model_block_t *b = &lay->block[l];
        snprintf(nm, sizeof nm, "blocks.%zu.norm1", l);
        b->norm1 = add(lay, list, 1, D, 0, nm);
        for (int i = 0; i < MIX_N; i++) {
            size_t r, c;
            b->mix[i] = SIZE_MAX;
            if (!mixer_shape(cfg, cfg->mixer[l], train_block_conv(cfg, l), i, &r, &c))
                continue;
            snprintf(nm, sizeof nm, "blocks.%zu.mixer.%s", l, mixer_name[i]);
            /* AdamW decays the projections, not convolutions, gate constants, gains, bias */
            const int decay = i != MIX_CQ && i != MIX_CK && i != MIX_CV && i != MIX_ALOG &&
                              i != MIX_DTB && i != MIX_ONORM && i != MIX_BOG;
            b->mix[i] = add(lay, list, r, c, decay, nm);
        }
        const char *part[4] = {"norm2", "mlp.W1", "mlp.W3", "mlp.W2"};
        size_t *slot[4] = {&b->norm2, &b->W1, &b->W3, &b->W2};
        const size_t rows[4] = {1, D, D, F}, cols[4] = {D, F, F, D};
        for (int i = 0; i < 4; i++) {
            snprintf(nm, sizeof nm, "blocks.%zu.%s", l, part[i]);
            *slot[i] = add(lay, list, rows[i], cols[i], i > 0, nm);
        }
    }
    lay->norm_f = add(lay, list, 1, D, 0, "norm_f");
    lay->lm_head = add(lay, list, D, V, 1, "lm_head");
    if (lay->overflow)
        return kdalab_fail(KDALAB_EOVERFLOW, "model: V = %zu, D = %zu, F = %zu, L = %zu: a "
                           "tensor beyond 2^31 - 1 elements or the parameters' bytes overflow",
                           V, D, F, L);
    return KDALAB_OK;
}

kdalab_status kdalab__model_check_batch(const kdalab_model_config *cfg, size_t B, size_t T)
{
    size_t N, NX, bytes, widest = cfg->D > cfg->F ? cfg->D : cfg->F;
    widest = widest > cfg->vocab ? widest : cfg->vocab;
    if (!kdalab_mul_size(B, T, &N) || !kdalab_mul_size(N, widest, &NX) || NX > INT32_MAX ||
        !kdalab_mul_size(NX, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "model: a batch of B * T = %zu * %zu tokens times "
                           "the widest layer (%zu) exceeds a CBLAS int (2^31 - 1)", B, T,
                           widest);
    return KDALAB_OK;
}

kdalab_status kdalab_model_size(const kdalab_model_config *cfg, size_t *n_params,
                                size_t *n_tensors)
{
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s = kdalab__model_layout(cfg, &lay, NULL);
    if (s != KDALAB_OK)
        return s;
    if (n_params)
        *n_params = lay.n_params;
    if (n_tensors)
        *n_tensors = lay.n_tensors;
    kdalab_clear_error();
    return KDALAB_OK;
}

kdalab_status kdalab_train_cost(const kdalab_train_config *cfg, double *train_ops,
                                double *test_ops, double *bytes)
{
    kdalab_clear_error();
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "train_cost: cfg is NULL");
    size_t n_params;
    kdalab_status s = kdalab_model_size(&cfg->model, &n_params, NULL);
    if (s != KDALAB_OK)
        return s;
    const kdalab_model_config *m = &cfg->model;
    const double P = (double)n_params, T = (double)cfg->task.T, D = (double)m->D;
    const double H = (double)m->H, F = (double)m->F, B = (double)cfg->batch;
    const double V = (double)m->vocab;
    double mix = 0, act = 0; /* per token: the mixers' operations; per sequence: doubles */
    for (size_t l = 0; l < m->L; l++) {
        const int attn = m->mixer[l] == KDALAB_MIXER_ATTENTION;
        mix += attn ? 4 * T * D : 16 * D * (D / H);
        act += T * (12 * D + 3 * F) + (attn ? H * T * T : 0);
    }
    if (train_ops)
        *train_ops = (double)cfg->opt.steps * B * T * (6 * P + 3 * mix);
    if (test_ops)
        *test_ops = (double)cfg->test_sequences * T * (2 * P + mix);
    if (bytes)
        *bytes = 8 * (5 * P + B * (act + 2 * T * V));
    kdalab_clear_error();
    return KDALAB_OK;
}

/* The whole tensor list (malloc'd; free it), or NULL with the error set. */
static kdalab_model_tensor *tensor_list(const kdalab_model_config *cfg, model_layout_t *lay,
                                        kdalab_status *s)
{
    *s = kdalab__model_layout(cfg, lay, NULL);
    if (*s != KDALAB_OK)
        return NULL;
    kdalab_model_tensor *list = malloc(lay->n_tensors * sizeof *list);
    if (!list) {
        *s = kdalab_fail(KDALAB_ENOMEM, "model: cannot allocate the tensor list");
        return NULL;
    }
    *s = kdalab__model_layout(cfg, lay, list);
    return list;
}

kdalab_status kdalab_model_tensor_at(const kdalab_model_config *cfg, size_t i,
                                     kdalab_model_tensor *t)
{
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s = kdalab__model_layout(cfg, &lay, NULL);
    if (s == KDALAB_OK && !t)
        s = kdalab_fail(KDALAB_ENULL, "model: tensor is NULL");
    if (s == KDALAB_OK && i >= lay.n_tensors)
        s = kdalab_fail(KDALAB_EINVAL, "model: tensor %zu of %zu", i, lay.n_tensors);
    if (s != KDALAB_OK)
        return s;
    kdalab_model_tensor *list = tensor_list(cfg, &lay, &s);
    if (!list)
        return s;
    *t = list[i];
    free(list);
    kdalab_clear_error();
    return KDALAB_OK;
}

/* softplus^-1(y) = y + log(1 - exp(-y)), for y > 0. */
static double inv_softplus(double y) { return y + log(-expm1(-y)); }

kdalab_status kdalab_model_init(const kdalab_model_config *cfg, unsigned long seed,
                                double *theta)
{
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s;
    kdalab_model_tensor *list = tensor_list(cfg, &lay, &s);
    if (!list)
        return s;
    gsl_rng *rng = theta ? gsl_rng_alloc(gsl_rng_mt19937) : NULL;
    if (!theta || !rng) {
        free(list);
        return theta ? kdalab_fail(KDALAB_ENOMEM, "model init: cannot allocate the generator")
                     : kdalab_fail(KDALAB_ENULL, "model init: theta is NULL");
    }
    gsl_rng_set(rng, seed);
    for (size_t i = 0; i < lay.n_tensors; i++) {
        const kdalab_model_tensor *t = &list[i];
        double *w = theta + t->offset;
        const size_t n = t->rows * t->cols;
        const char *leaf = strrchr(t->name, '.');
        leaf = leaf ? leaf + 1 : t->name;
        for (size_t j = 0; j < n; j++) {
            if (strncmp(leaf, "norm", 4) == 0 || strcmp(leaf, "onorm") == 0)
                w[j] = 1;
            else if (strcmp(leaf, "bog") == 0)
                w[j] = 0;
            else if (leaf[0] == 'c' && leaf[2] == '\0') /* cq, ck, cv */
                w[j] = cfg->conv_init == KDALAB_CONV_INIT_NORMAL ? gsl_ran_gaussian(rng, 0.02)
                                                               : gsl_ran_flat(rng, -0.5, 0.5);
            else if (strcmp(leaf, "A_log") == 0)
                w[j] = log(gsl_ran_flat(rng, 1, 16));
            else if (strcmp(leaf, "dt_bias") == 0) {
                double dt = exp(gsl_ran_flat(rng, log(1e-3), log(1e-1)));
                w[j] = inv_softplus(dt > 1e-4 ? dt : 1e-4);
            } else
                w[j] = gsl_ran_gaussian(rng, 0.02);
        }
    }
    gsl_rng_free(rng);
    free(list);
    kdalab_clear_error();
    return KDALAB_OK;
}

const char *kdalab_mixer_name(kdalab_mixer_kind kind)
{
    if (kind == KDALAB_MIXER_ATTENTION)
        return "attention";
    return (int)kind > 0 && kind < KDALAB_N_MIXERS ? kdalab_mechanism_name(train_mechanism_of(kind))
                                                   : "unknown";
}

static const char *const GATE_NAMES[] = {"sigmoid", "swish", "none"};
static const char *const CONV_INIT_NAMES[] = {"uniform", "normal0.02"};

const char *kdalab_output_gate_name(kdalab_output_gate gate)
{
    return (int)gate >= 0 && gate <= KDALAB_OUTPUT_GATE_NONE ? GATE_NAMES[gate] : "unknown";
}

const char *kdalab_conv_init_name(kdalab_conv_init init)
{
    return (int)init >= 0 && init <= KDALAB_CONV_INIT_NORMAL ? CONV_INIT_NAMES[init] : "unknown";
}

/* *out = the index of name in names[n] (list: them, for the message); the
 * status, with the error set when it is not KDALAB_OK. */
static kdalab_status parse_name(const char *what, const char *name, const char *const *names,
                                int n, const char *list, int *out)
{
    if (!name || !out)
        return kdalab_fail(KDALAB_ENULL, "%s: %s is NULL", what, name ? "out" : "name");
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return KDALAB_OK;
        }
    return kdalab_fail(KDALAB_EINVAL, "%s: '%s' is not %s", what, name, list);
}

kdalab_status kdalab_output_gate_parse(const char *name, kdalab_output_gate *out)
{
    kdalab_clear_error();
    int i = 0;
    kdalab_status s = parse_name("output gate", name, GATE_NAMES, 3, "sigmoid, swish or none",
                                 out ? &i : NULL);
    if (s == KDALAB_OK)
        *out = (kdalab_output_gate)i;
    return s;
}

kdalab_status kdalab_conv_init_parse(const char *name, kdalab_conv_init *out)
{
    kdalab_clear_error();
    int i = 0;
    kdalab_status s = parse_name("conv init", name, CONV_INIT_NAMES, 2, "uniform or normal0.02",
                                 out ? &i : NULL);
    if (s == KDALAB_OK)
        *out = (kdalab_conv_init)i;
    return s;
}

kdalab_status kdalab_model_parse_mixers(const char *spec, size_t *L, int fixed_L,
                                        kdalab_mixer_kind *out)
{
    kdalab_clear_error();
    if (!spec || !L || !out)
        return kdalab_fail(KDALAB_ENULL, "mixers: spec, L or out is NULL");
    if (strncmp(spec, "hybrid:", 7) == 0) {
        char *end;
        const char *num = spec + 7;
        unsigned long n = *num >= '0' && *num <= '9' ? strtoul(num, &end, 10) : 0;
        if (n == 0 || *end != '\0' || n >= KDALAB_MODEL_MAX_LAYERS)
            return kdalab_fail(KDALAB_EINVAL, "mixers: '%s': N in hybrid:N must be an integer "
                               "in 1 .. %d", spec, KDALAB_MODEL_MAX_LAYERS - 1);
        if (*L < n + 1 || *L > KDALAB_MODEL_MAX_LAYERS)
            return kdalab_fail(KDALAB_ESIZE, "mixers: '%s' with %zu blocks has no attention "
                               "block (needs %lu .. %d blocks)", spec, *L, n + 1,
                               KDALAB_MODEL_MAX_LAYERS);
        for (size_t l = 0; l < *L; l++)
            out[l] = (l + 1) % (n + 1) == 0 ? KDALAB_MIXER_ATTENTION : KDALAB_MIXER_KDA;
        return KDALAB_OK;
    }
    kdalab_mixer_kind kinds[KDALAB_MODEL_MAX_LAYERS];
    size_t n = 0;
    for (const char *p = spec;; p++) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = 0;
        for (int i = 0; i < KDALAB_N_MIXERS && !found; i++)
            if (strlen(kdalab_mixer_name((kdalab_mixer_kind)i)) == len &&
                strncmp(p, kdalab_mixer_name((kdalab_mixer_kind)i), len) == 0) {
                if (n == KDALAB_MODEL_MAX_LAYERS)
                    return kdalab_fail(KDALAB_ESIZE, "mixers: more than %d blocks",
                                       KDALAB_MODEL_MAX_LAYERS);
                kinds[n++] = (kdalab_mixer_kind)i;
                found = 1;
            }
        if (!found) {
            char names[256];
            return kdalab_fail(KDALAB_EINVAL, "mixers: '%.*s' is not attention, %s or hybrid:N",
                               (int)len, p, kdalab_mechanism_list(", ", names, sizeof names));
        }
        if (!comma)
            break;
        p = comma;
    }
    if (n == 1) {
        if (*L == 0 || *L > KDALAB_MODEL_MAX_LAYERS)
            return kdalab_fail(KDALAB_ESIZE, "mixers: %zu blocks; 1 .. %d allowed", *L,
                               KDALAB_MODEL_MAX_LAYERS);
        for (size_t l = 0; l < *L; l++)
            out[l] = kinds[0];
        return KDALAB_OK;
    }
    if (fixed_L && n != *L)
        return kdalab_fail(KDALAB_ESIZE, "mixers: '%s' lists %zu blocks, not %zu", spec, n, *L);
    *L = n;
    memcpy(out, kinds, n * sizeof *kinds);
    return KDALAB_OK;
}

kdalab_status kdalab_model_format_blocks(uint64_t mask, char *buf, size_t cap)
{
    kdalab_clear_error();
    if (!buf)
        return kdalab_fail(KDALAB_ENULL, "blocks: buf is NULL");
    size_t at = 0;
    for (unsigned l = 0; l < 64; l++)
        if (mask >> l & 1) {
            const int n = snprintf(buf + (at < cap ? at : cap), at < cap ? cap - at : 0,
                                   "%s%u", at ? "," : "", l);
            at += (size_t)n;
        }
    if (at >= cap) {
        if (cap)
            buf[0] = '\0';
        return kdalab_fail(KDALAB_ESIZE, "blocks: %zu bytes hold no text of %zu", cap, at);
    }
    buf[at] = '\0';
    return KDALAB_OK;
}

kdalab_status kdalab_model_parse_blocks(const char *spec, uint64_t *out)
{
    kdalab_clear_error();
    if (!spec || !out)
        return kdalab_fail(KDALAB_ENULL, "blocks: spec or out is NULL");
    uint64_t mask = 0;
    for (const char *p = spec;; p++) {
        size_t l = 0, digits = 0;
        for (; *p >= '0' && *p <= '9'; p++, digits++)
            l = l < KDALAB_MODEL_MAX_LAYERS ? 10 * l + (size_t)(*p - '0') : l;
        if (digits == 0 || (*p != ',' && *p != '\0'))
            return kdalab_fail(KDALAB_EINVAL, "blocks: '%.40s' is not block indices joined by "
                               "commas (\"1\", \"0,2\")", spec);
        if (l >= KDALAB_MODEL_MAX_LAYERS)
            return kdalab_fail(KDALAB_EINVAL, "blocks: '%.40s': item %.*s is not below %d",
                               spec, (int)(digits < 24 ? digits : 24), p - digits,
                               KDALAB_MODEL_MAX_LAYERS);
        if (mask >> l & 1)
            return kdalab_fail(KDALAB_EINVAL, "blocks: '%.40s': block %zu named twice", spec, l);
        mask |= (uint64_t)1 << l;
        if (*p == '\0')
            break;
    }
    *out = mask;
    return KDALAB_OK;
}
