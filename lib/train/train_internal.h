/*
 * lib/train/train_internal.h — the model's layout, shared by
 * lib/train/model.c (which builds it) and lib/train/model_loss.c (which
 * reads theta and writes grad through it). Not installed, not exported.
 */
#ifndef KDALAB_TRAIN_INTERNAL_H
#define KDALAB_TRAIN_INTERNAL_H

#include <stddef.h>
#include "kdalab.h"

/* The mixer's tensors, in kdalab_mixer_params' order. */
enum { MIX_WQ, MIX_WK, MIX_WV, MIX_WO, MIX_CQ, MIX_CK, MIX_CV,
       MIX_WB, MIX_WA, MIX_WG, MIX_WG2, MIX_ALOG, MIX_DTB, MIX_WOG, MIX_ONORM, MIX_N };

/* Offsets into theta of one block's tensors (SIZE_MAX: not used). */
typedef struct {
    size_t norm1, mix[MIX_N], norm2, W1, W3, W2;
} model_block_t;

/* Offsets of every tensor, and the totals. */
typedef struct {
    size_t embed, norm_f, lm_head;
    model_block_t block[KDALAB_MODEL_MAX_LAYERS];
    size_t n_params, n_tensors;
    int overflow; /* a tensor or the total did not fit (model_layout refuses it) */
} model_layout_t;

/* Check cfg and fill *lay (and list[n_tensors] when not NULL, in layout
 * order). Errors as kdalab_model_size. */
kdalab_status model_layout(const kdalab_model_config *cfg, model_layout_t *lay,
                           kdalab_model_tensor *list);

#endif /* KDALAB_TRAIN_INTERNAL_H */
