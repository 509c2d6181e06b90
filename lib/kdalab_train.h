/*
 * kdalab_train.h — training small models: the multi-query associative recall
 * task (lib/train/mqar.c); the forward and backward of a model's pieces
 * other than the mixers (lib/train/layers.c, lib/train/loss.c), of one mixer
 * sub-layer around them (lib/train/mixer.c) and of the whole model
 * (lib/train/model.c, model_loss.c); the model on disk (checkpoint.c);
 * AdamW (adamw.c, schedule.c); the training loop, on MQAR or a caller's
 * batches (trainer.c). Each in float64 (the checkpoint holds float64), with
 * float32 twins generated from the float64 files. One header per module
 * (below); this one includes them all and states what they share.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 *
 * Every function returns a kdalab_status; on any error other than
 * KDALAB_ERANGE no output is touched and kdalab_last_error() says what was
 * wrong (exceptions are said where they apply: a training run stopped after
 * it began). KDALAB_ERANGE means finite inputs gave a non-finite output: the
 * outputs are written, so they can be studied. Output arrays must not overlap
 * input arrays. A backward takes the forward's inputs and the upstream
 * gradient dy (dL/dy) and writes dL/d(input) for L, overwriting its outputs
 * (gradients of weights are summed over every row, not added to what the
 * array held); each gradient output may be NULL when not wanted.
 */
#ifndef KDALAB_TRAIN_H
#define KDALAB_TRAIN_H

#include "kdalab_mqar.h"    /* the MQAR task                                   */
#include "kdalab_layers.h"  /* RMSNorm, SiLU, SwiGLU, the short convolution    */
#include "kdalab_loss.h"    /* cross-entropy                                   */
#include "kdalab_mixer.h"   /* one mixer sub-layer                             */
#include "kdalab_model.h"   /* the model: layout, initialisation, loss         */
#include "kdalab_checkpoint.h" /* the model on disk                            */
#include "kdalab_adamw.h"   /* AdamW and its schedule                          */
#include "kdalab_trainer.h" /* the training loop and evaluation                */

#endif /* KDALAB_TRAIN_H */
