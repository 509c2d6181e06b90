/*
 * kdalab.h — all of kdalab's public API in one include.
 *
 * kdalab is a numerical reference for the lineage of sequence mixers that ends
 * in Kimi Delta Attention (KDA): softmax attention → linear attention →
 * DeltaNet → Gated DeltaNet → KDA → the KDA + attention hybrid.
 *
 * The conventions (layout, shapes, the update of each mechanism, status
 * codes) are at the top of kdalab_forms.h and in REFERENCE.md.
 */
#ifndef KDALAB_H
#define KDALAB_H

/*
 * One header per module, GSL-style (include only the one you need, or this):
 *   kdalab_status.h     status codes, kdalab_strerror, kdalab_last_error
 *   kdalab_forms.h      dims, mechanisms, recurrent / decode step / chunkwise forms
 *   kdalab_precision.h  bf16 / fp16 rounding of the study forms
 *   kdalab_attention.h  causal softmax attention and its KV cache
 *   kdalab_npy.h        .npy reader and writer
 *   kdalab_hybrid.h     the KDA + attention hybrid stack
 *   kdalab_simd.h       the optimized path (float32 and float64)
 *   kdalab_grad.h       gradients: the backward of every form, and the gates
 *   kdalab_call.h       the one call: every form, implementation, direction and
 *                       layout (plain, varlen cu_seqlens, GVA) of the linear mechanisms
 *   kdalab_train.h      training, what its modules share; includes:
 *     kdalab_mqar.h       the MQAR task
 *     kdalab_layers.h     RMSNorm, SiLU, SwiGLU, the short convolution
 *     kdalab_loss.h       the cross-entropy loss
 *     kdalab_mixer.h      one mixer sub-layer of the training model
 *     kdalab_model.h      the model: layout, initialisation, forward, loss and gradient
 *     kdalab_checkpoint.h the model on disk: the one checkpoint format
 *     kdalab_adamw.h      AdamW and its schedule
 *     kdalab_trainer.h    the training loop and evaluation
 *   kdalab_blas.h       the CBLAS under training's dense products: its kernels
 */
#include "kdalab_status.h"
#include "kdalab_forms.h"
#include "kdalab_precision.h"
#include "kdalab_attention.h"
#include "kdalab_npy.h"
#include "kdalab_hybrid.h"
#include "kdalab_simd.h"
#include "kdalab_grad.h"
#include "kdalab_call.h"
#include "kdalab_train.h"
#include "kdalab_blas.h"

#endif /* KDALAB_H */
