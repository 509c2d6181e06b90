/*
 * lib/train/model_loss.c — the model's loss and its gradient in float64: the
 * forward pass through the blocks keeping what the backward reads (as
 * llm.c's train_gpt2.c keeps its activations), then the chain rule back
 * through the same steps in reverse. The pieces are lib/train/layers.c,
 * lib/train/loss.c and lib/train/mixer.c; the matrix products are
 * lib/train/matmul.c's CBLAS calls. Checked against central finite
 * differences (every tensor) in tests/test_train_model.c and against
 * PyTorch autograd in tests/test_train_torch.c.
 *
 * defines: kdalab_model_loss_f64, kdalab_model_logits_f64 (the forward alone)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "train_internal.h"

/* What one block keeps for the backward. */
typedef struct {
    double *x;    /* [N, D] the residual stream entering the block      */
    double *h1;   /* [N, D] rmsnorm(x, norm1): the mixer's input        */
    kdalab_mixer_cache *mc;
    double *xm;   /* [N, D] x + mixer(h1): entering the MLP             */
    double *h2;   /* [N, D] rmsnorm(xm, norm2)                          */
    double *a, *b, *u; /* [N, F] h2 W1, h2 W3, silu(a) * b              */
} block_acts;

/* Everything the forward keeps. */
typedef struct {
    block_acts blk[KDALAB_MODEL_MAX_LAYERS];
    double *xf;     /* [N, D] the stream after the last block */
    double *hf;     /* [N, D] rmsnorm(xf, norm_f)             */
    double *logits; /* [N, V]                                 */
} acts;

static void acts_free(acts *A, size_t L)
{
    for (size_t l = 0; l < L; l++) {
        block_acts *b = &A->blk[l];
        free(b->x); free(b->h1); free(b->xm); free(b->h2);
        free(b->a); free(b->b); free(b->u);
        kdalab_mixer_cache_free(b->mc);
    }
    free(A->xf); free(A->hf); free(A->logits);
}

static int acts_new(acts *A, size_t L, size_t N, size_t D, size_t F, size_t V)
{
    memset(A, 0, sizeof *A);
    int ok = 1;
    for (size_t l = 0; l < L; l++) {
        block_acts *b = &A->blk[l];
        double **nd[4] = {&b->x, &b->h1, &b->xm, &b->h2}, **nf[3] = {&b->a, &b->b, &b->u};
        for (int i = 0; i < 4; i++)
            ok &= (*nd[i] = malloc(N * D * sizeof(double))) != NULL;
        for (int i = 0; i < 3; i++)
            ok &= (*nf[i] = malloc(N * F * sizeof(double))) != NULL;
    }
    ok &= (A->xf = malloc(N * D * sizeof(double))) != NULL;
    ok &= (A->hf = malloc(N * D * sizeof(double))) != NULL;
    ok &= (A->logits = malloc(N * V * sizeof(double))) != NULL;
    if (!ok)
        acts_free(A, L);
    return ok;
}

/* Note a KDALAB_ERANGE in *range and pass every status on: a mixer that
 * overflowed stops the pass. The layers between the mixers are unchecked;
 * what overflows there reaches the loss or the gradient, checked at the end. */
static kdalab_status keep_range(kdalab_status s, kdalab_status *range)
{
    if (s == KDALAB_ERANGE)
        *range = s;
    return s;
}

/* Block l's mixer weights (const) or their gradients, from a flat vector. */
static kdalab_mixer_params mixer_params(const model_block_t *b, const double *theta)
{
    const double *w[MIX_N];
    for (int i = 0; i < MIX_N; i++)
        w[i] = b->mix[i] == SIZE_MAX ? NULL : theta + b->mix[i];
    kdalab_mixer_params p = {w[MIX_WQ],  w[MIX_WK],   w[MIX_WV],  w[MIX_WO], w[MIX_CQ],
                             w[MIX_CK],  w[MIX_CV],   w[MIX_WB],  w[MIX_WA], w[MIX_WG],
                             w[MIX_WG2], w[MIX_ALOG], w[MIX_DTB], w[MIX_WOG], w[MIX_ONORM],
                             w[MIX_WOG2], w[MIX_BOG]};
    return p;
}

static kdalab_mixer_grads mixer_grads(const model_block_t *b, double *grad)
{
    double *w[MIX_N];
    for (int i = 0; i < MIX_N; i++)
        w[i] = b->mix[i] == SIZE_MAX ? NULL : grad + b->mix[i];
    kdalab_mixer_grads g = {w[MIX_WQ],  w[MIX_WK],   w[MIX_WV],  w[MIX_WO], w[MIX_CQ],
                            w[MIX_CK],  w[MIX_CV],   w[MIX_WB],  w[MIX_WA], w[MIX_WG],
                            w[MIX_WG2], w[MIX_ALOG], w[MIX_DTB], w[MIX_WOG], w[MIX_ONORM],
                            w[MIX_WOG2], w[MIX_BOG]};
    return g;
}

/* The forward: embed, blocks, final norm, logits; A filled. */
static kdalab_status forward(const kdalab_model_config *cfg, const model_layout_t *lay,
                             const double *theta, size_t B, size_t T, const int32_t *tokens,
                             acts *A, kdalab_status *range)
{
    const size_t N = B * T, D = cfg->D, F = cfg->F, L = cfg->L;
    const kdalab_mixer_config mcfg0 = {KDALAB_MIXER_ATTENTION, D, cfg->H, cfg->conv,
                                       cfg->output_gate, cfg->gate_rank};
    // x = embed[tokens] [N, D]
    for (size_t n = 0; n < N; n++)
        memcpy(A->blk[0].x + n * D, theta + lay->embed + (size_t)tokens[n] * D,
               D * sizeof(double));
    kdalab_status s = KDALAB_OK;
    for (size_t l = 0; l < L && s == KDALAB_OK; l++) {
        const model_block_t *w = &lay->block[l];
        block_acts *b = &A->blk[l];
        double *x_next = l + 1 < L ? A->blk[l + 1].x : A->xf;
        kdalab_mixer_config mcfg = mcfg0;
        mcfg.kind = cfg->mixer[l];
        mcfg.conv = train_block_conv(cfg, l);
        const kdalab_mixer_params mp = mixer_params(w, theta);
        // h1 = rmsnorm(x); xm = x + mixer(h1)
        kdalab__train_rmsnorm_fwd_f64(N, D, TRAIN_NORM_EPS, b->x, theta + w->norm1, b->h1);
        s = keep_range(kdalab__train_mixer_fwd_f64(&mcfg, &mp, B, T, b->h1, b->xm, &b->mc), range);
        if (s != KDALAB_OK)
            break;
        for (size_t i = 0; i < N * D; i++)
            b->xm[i] += b->x[i];
        // h2 = rmsnorm(xm); a = h2 W1, b = h2 W3 [N, F]; u = silu(a) b; x' = xm + u W2
        kdalab__train_rmsnorm_fwd_f64(N, D, TRAIN_NORM_EPS, b->xm, theta + w->norm2, b->h2);
        kdalab__train_mm_f64(N, D, F, b->h2, theta + w->W1, b->a, 0);
        kdalab__train_mm_f64(N, D, F, b->h2, theta + w->W3, b->b, 0);
        kdalab__train_swiglu_fwd_f64(N * F, b->a, b->b, b->u);
        memcpy(x_next, b->xm, N * D * sizeof(double));
        kdalab__train_mm_f64(N, F, D, b->u, theta + w->W2, x_next, 1);
    }
    if (s == KDALAB_OK)
        kdalab__train_rmsnorm_fwd_f64(N, D, TRAIN_NORM_EPS, A->xf, theta + lay->norm_f, A->hf);
    if (s == KDALAB_OK)
        kdalab__train_mm_f64(N, D, cfg->vocab, A->hf, theta + lay->lm_head, A->logits, 0);
    return s;
}

/* The backward from dlogits [N, V] (in A->logits' place, overwritten) to grad. */
static kdalab_status backward(const kdalab_model_config *cfg, const model_layout_t *lay,
                              const double *theta, size_t B, size_t T, const int32_t *tokens,
                              acts *A, const double *dlogits, double *grad,
                              kdalab_status *range)
{
    const size_t N = B * T, D = cfg->D, F = cfg->F, V = cfg->vocab;
    double *dx = malloc(N * D * sizeof(double)), *dh = malloc(N * D * sizeof(double));
    double *dt = malloc(N * D * sizeof(double));
    double *da = malloc(N * F * sizeof(double)), *db = malloc(N * F * sizeof(double));
    double *du = malloc(N * F * sizeof(double));
    kdalab_status s = KDALAB_OK;
    if (!dx || !dh || !dt || !da || !db || !du)
        s = kdalab_fail(KDALAB_ENOMEM, "model backward: cannot allocate scratch");
    const kdalab_mixer_config mcfg0 = {KDALAB_MIXER_ATTENTION, D, cfg->H, cfg->conv,
                                       cfg->output_gate, cfg->gate_rank};
    if (s == KDALAB_OK) {
        // logits = hf lm_head: d lm_head, dhf; then the final norm: dx = dL/dxf
        kdalab__train_mm_bwd_f64(N, D, V, A->hf, theta + lay->lm_head, dlogits, grad + lay->lm_head,
                                 dh, 0);
        kdalab__train_rmsnorm_bwd_f64(N, D, TRAIN_NORM_EPS, A->xf, theta + lay->norm_f, dh, dx,
                                      grad + lay->norm_f);
    }
    for (size_t l = cfg->L; l-- > 0 && s == KDALAB_OK;) {
        const model_block_t *w = &lay->block[l];
        block_acts *b = &A->blk[l];
        // the MLP: x' = xm + u W2, u = silu(a) b, a = h2 W1, b = h2 W3, h2 = rmsnorm(xm)
        kdalab__train_mm_bwd_f64(N, F, D, b->u, theta + w->W2, dx, grad + w->W2, du, 0);
        kdalab__train_swiglu_bwd_f64(N * F, b->a, b->b, du, da, db);
        kdalab__train_mm_bwd_f64(N, D, F, b->h2, theta + w->W1, da, grad + w->W1, dh, 0);
        kdalab__train_mm_bwd_f64(N, D, F, b->h2, theta + w->W3, db, grad + w->W3, dh, 1);
        kdalab__train_rmsnorm_bwd_f64(N, D, TRAIN_NORM_EPS, b->xm, theta + w->norm2, dh, dt,
                                      grad + w->norm2);
        for (size_t i = 0; i < N * D; i++)
            dx[i] += dt[i]; /* dL/dxm */
        // the mixer: xm = x + mixer(h1), h1 = rmsnorm(x)
        kdalab_mixer_config mcfg = mcfg0;
        mcfg.kind = cfg->mixer[l];
        mcfg.conv = train_block_conv(cfg, l);
        const kdalab_mixer_params mp = mixer_params(w, theta);
        const kdalab_mixer_grads mg = mixer_grads(w, grad);
        s = keep_range(kdalab__train_mixer_bwd_f64(&mcfg, &mp, B, T, b->h1, b->mc, dx, dh, &mg),
                       range);
        if (s != KDALAB_OK)
            break;
        kdalab__train_rmsnorm_bwd_f64(N, D, TRAIN_NORM_EPS, b->x, theta + w->norm1, dh, dt,
                                      grad + w->norm1);
        for (size_t i = 0; i < N * D; i++)
            dx[i] += dt[i]; /* dL/dx entering block l */
    }
    if (s == KDALAB_OK) {
        // x = embed[tokens]: scatter-add the rows
        memset(grad + lay->embed, 0, V * D * sizeof(double));
        for (size_t n = 0; n < N; n++) {
            double *row = grad + lay->embed + (size_t)tokens[n] * D;
            for (size_t i = 0; i < D; i++)
                row[i] += dx[n * D + i];
        }
    }
    free(dx); free(dh); free(dt); free(da); free(db); free(du);
    return s;
}

/* The loss of B sequences (mean over their counted positions, *counted of
 * them), their accuracy and, when grad is not NULL, its gradient. */
static kdalab_status loss_part(const kdalab_model_config *cfg, const model_layout_t *lay,
                               const double *theta, size_t B, size_t T, const int32_t *tokens,
                               const int32_t *targets, double *loss, double *accuracy,
                               size_t *counted, double *grad, kdalab_status *range)
{
    const size_t N = B * T, V = cfg->vocab;
    acts A;
    if (!acts_new(&A, cfg->L, N, cfg->D, cfg->F, V))
        return kdalab_fail(KDALAB_ENOMEM, "model: cannot allocate the activations");
    kdalab_status s = forward(cfg, lay, theta, B, T, tokens, &A, range);
    if (s == KDALAB_OK)
        s = kdalab_cross_entropy_fwd_f64(N, V, A.logits, targets, loss, accuracy, counted);
    if (s == KDALAB_OK && grad) {
        double *dlogits = malloc(N * V * sizeof(double));
        s = dlogits ? kdalab_cross_entropy_bwd_f64(N, V, A.logits, targets, 1.0, dlogits)
                    : kdalab_fail(KDALAB_ENOMEM, "model: cannot allocate dlogits");
        if (s == KDALAB_OK)
            s = backward(cfg, lay, theta, B, T, tokens, &A, dlogits, grad, range);
        free(dlogits);
    }
    acts_free(&A, cfg->L);
    return s;
}

/* The checks of the model's entry points: cfg (its layout into *lay), theta,
 * the batch's size, the tokens, and the targets when has_targets. */
static kdalab_status check_inputs(const kdalab_model_config *cfg, const double *theta,
                                  size_t B, size_t T, const int32_t *tokens,
                                  const int32_t *targets, int has_targets, model_layout_t *lay)
{
    kdalab_status s = kdalab__model_layout(cfg, lay, NULL);
    if (s != KDALAB_OK)
        return s;
    const size_t V = cfg->vocab;
    if (!theta || !tokens || (has_targets && !targets))
        return kdalab_fail(KDALAB_ENULL, "model: %s is NULL",
                           !theta ? "theta" : !tokens ? "tokens" : "targets");
    if (B == 0 || T == 0)
        return kdalab_fail(KDALAB_ESIZE, "model: B = %zu, T = %zu: each must be >= 1", B, T);
    s = kdalab__model_check_batch(cfg, B, T);
    if (s != KDALAB_OK)
        return s;
    const size_t N = B * T;
    for (size_t n = 0; n < N; n++)
        if (tokens[n] < 0 || (size_t)tokens[n] >= V)
            return kdalab_fail(KDALAB_EDOMAIN, "model: tokens[%zu] = %d is outside [0, %zu)",
                               n, (int)tokens[n], V);
    for (size_t n = 0; has_targets && n < N; n++) /* here, so the index named is the batch's */
        if (targets[n] < -1 || targets[n] >= (int64_t)V)
            return kdalab_fail(KDALAB_EDOMAIN, "model: targets[%zu] = %d is outside [0, %zu) "
                               "and not -1", n, (int)targets[n], V);
    return kdalab_check_values_f64(KDALAB_RULE_FINITE, "theta", theta, lay->n_params, NULL);
}

kdalab_status kdalab_model_logits_f64(const kdalab_model_config *cfg, const double *theta,
                                      size_t B, size_t T, const int32_t *tokens, double *logits)
{
    // theta [n_params]; tokens [B, T]; logits [B, T, V]
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s = check_inputs(cfg, theta, B, T, tokens, NULL, 0, &lay);
    if (s == KDALAB_OK && !logits)
        s = kdalab_fail(KDALAB_ENULL, "model: logits is NULL");
    if (s != KDALAB_OK)
        return s;
    const size_t N = B * T, V = cfg->vocab;
    acts A;
    if (!acts_new(&A, cfg->L, N, cfg->D, cfg->F, V))
        return kdalab_fail(KDALAB_ENOMEM, "model: cannot allocate the activations");
    kdalab_status range = KDALAB_OK;
    s = forward(cfg, &lay, theta, B, T, tokens, &A, &range);
    if (s == KDALAB_OK) {
        memcpy(logits, A.logits, N * V * sizeof(double));
        s = kdalab_check_outputs_f64("model logits", logits, N * V, NULL, 0, NULL, NULL);
    }
    acts_free(&A, cfg->L);
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}

/* The batch is cut into this many parts of consecutive sequences, run on
 * up to as many threads and summed in a fixed order: the same bits on any
 * number of threads. */
#define PARTS 2

/* OpenBLAS's own threads would compete with the parts' threads (measured:
 * 7.6 K tokens/s with two BLAS threads per part, 11.6 K with one, training
 * KDA on 2 cores), and with one part (B = 1) they would make the float32
 * sums depend on the thread count. When the CBLAS is OpenBLAS, ask it for
 * one thread per call, whatever B; the weak reference lets any other CBLAS
 * link too. */
extern void openblas_set_num_threads(int n) __attribute__((weak));

typedef struct {
    size_t b0, nb;       /* sequences [b0, b0 + nb)           */
    double loss, acc;
    size_t counted;
    double *grad;        /* its own gradient (NULL: not asked) */
    kdalab_status s, range;
    char err[512];
} part_t;

kdalab_status kdalab_model_loss_f64(const kdalab_model_config *cfg, const double *theta,
                                    size_t B, size_t T, const int32_t *tokens,
                                    const int32_t *targets, double *loss, double *accuracy,
                                    double *grad)
{
    // theta, grad [n_params]; tokens, targets [B, T]
    kdalab_clear_error();
    model_layout_t lay;
    kdalab_status s = check_inputs(cfg, theta, B, T, tokens, targets, 1, &lay);
    if (s != KDALAB_OK)
        return s;
    const size_t P = lay.n_params;
    const size_t parts = B < PARTS ? B : PARTS;
    part_t part[PARTS];
    memset(part, 0, sizeof part);
    for (size_t i = 0, b0 = 0; i < parts; i++) {
        part[i].b0 = b0;
        part[i].nb = B / parts + (i < B % parts);
        b0 += part[i].nb;
        if (grad && !(part[i].grad = malloc(P * sizeof(double))))
            s = kdalab_fail(KDALAB_ENOMEM, "model: cannot allocate a gradient");
    }
    if (s == KDALAB_OK && openblas_set_num_threads)
        openblas_set_num_threads(1);
    if (s == KDALAB_OK) {
#pragma omp parallel for schedule(static, 1)
        for (size_t i = 0; i < parts; i++) {
            part_t *q = &part[i];
            q->s = loss_part(cfg, &lay, theta, q->nb, T, tokens + q->b0 * T,
                             targets + q->b0 * T, &q->loss, &q->acc, &q->counted, q->grad,
                             &q->range);
            if (q->s != KDALAB_OK)
                snprintf(q->err, sizeof q->err, "%s", kdalab_last_error());
        }
        // combine in a fixed order: each part's means weighed by its counted positions
        size_t C = 0;
        double l_out = 0, acc_out = 0;
        kdalab_status range = KDALAB_OK;
        for (size_t i = 0; i < parts && s == KDALAB_OK; i++) {
            /* theta was checked finite above, so a layer refusing a non-finite
             * input means an earlier product overflowed: a range error too */
            if (part[i].s == KDALAB_ERANGE || part[i].s == KDALAB_ENONFINITE ||
                part[i].range != KDALAB_OK)
                range = KDALAB_ERANGE; /* written as NaN below */
            else if (part[i].s != KDALAB_OK)
                s = kdalab_fail(part[i].s, "%s", part[i].err);
            C += part[i].counted;
        }
        for (size_t i = 0; i < parts && s == KDALAB_OK && range == KDALAB_OK && C; i++) {
            const double w = (double)part[i].counted / (double)C;
            l_out += w * part[i].loss;
            acc_out += w * part[i].acc;
            for (size_t j = 0; grad && j < P; j++)
                grad[j] = (i ? grad[j] : 0) + w * part[i].grad[j];
        }
        if (s == KDALAB_OK && grad && !C)
            memset(grad, 0, P * sizeof *grad);
        /* the layers inside do not check what they pass each other: an overflow
         * anywhere shows here, as a non-finite loss or gradient */
        if (s == KDALAB_OK && range == KDALAB_OK &&
            (!isfinite(l_out) ||
             (grad && kdalab_check_values_f64(KDALAB_RULE_FINITE, "grad", grad, P, NULL) !=
                          KDALAB_OK)))
            range = KDALAB_ERANGE;
        if (s == KDALAB_OK && range != KDALAB_OK) {
            for (size_t j = 0; grad && j < P; j++)
                grad[j] = NAN;
            if (loss)
                *loss = NAN;
            if (accuracy)
                *accuracy = NAN;
            s = kdalab_fail(KDALAB_ERANGE, "model: an intermediate overflowed (loss, accuracy "
                            "and grad written as NaN)");
        }
        if (s == KDALAB_OK) {
            if (loss)
                *loss = l_out;
            if (accuracy)
                *accuracy = acc_out;
        }
    }
    for (size_t i = 0; i < parts; i++)
        free(part[i].grad);
    if (s == KDALAB_OK)
        kdalab_clear_error();
    return s;
}
