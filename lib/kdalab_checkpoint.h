/*
 * kdalab_checkpoint.h — a trained model on disk (lib/train/checkpoint.c): the
 * one checkpoint format, which `kdalab train --out` writes and the hybrid
 * stack loads (kdalab_hybrid_load) for prefill and decode.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_CHECKPOINT_H
#define KDALAB_CHECKPOINT_H

#include "kdalab_status.h"
#include "kdalab_model.h"

KDALAB_BEGIN_DECLS

/* The first line of every checkpoint's config.txt. */
#define KDALAB_CHECKPOINT_FORMAT "format=kdalab-checkpoint/1"

/*
 * A checkpoint is a directory holding
 *   config.txt  the line KDALAB_CHECKPOINT_FORMAT, then the model
 *               (kdalab_model_config), one key=value per line:
 *                 mixer=kda,kda,attention   one kdalab_mixer_name per block
 *                 layers=3  d_model=64  heads=2  mlp_hidden=128  conv=1  vocab=64
 *               and, only where the model is not the default, the lines
 *                 output_gate=swish|none  gate_rank=R  conv_init=normal0.02
 *                 conv_off=1,3   (the blocks without the convolution, by index)
 *               (absent: sigmoid, 0 (full rank), uniform, none; kdalab_output_gate_name,
 *               kdalab_conv_init_name, kdalab_model_config's conv_off), then any lines the writer added
 *               (kdalab train: the task, the training settings, the test
 *               accuracy; readers skip keys they do not know). At most 64
 *               lines of at most 2047 bytes each.
 *   NAME.npy    one per tensor of the model's layout (kdalab_model_tensor_at),
 *               named by the tensor: embed.npy, blocks.0.norm1.npy,
 *               blocks.0.mixer.Wq.npy, ..., norm_f.npy, lm_head.npy; '<f8',
 *               shape [rows, cols], or [cols] when rows == 1 (norms, A_log,
 *               dt_bias, onorm, bog). Matrices are [in, out]: y = x W.
 * kdalab train --out DIR replaces DIR only when it is such a directory and
 * holds nothing else.
 */

/*
 * kdalab_checkpoint_write — write the model cfg with parameters theta
 * [n_params] (kdalab_model_size) into the existing directory dir: a
 * config.txt already there removed first, then every tensor's .npy (each
 * written under a temporary name and renamed), then config.txt, flushed to
 * disk, last, so a directory with a config.txt holds every tensor it
 * describes, all of one write. Files of the same names are replaced; nothing
 * else in dir is touched. A write that fails or is stopped leaves no
 * config.txt (not a checkpoint; kdalab train --out replaces a whole
 * directory in one step instead). extra: NULL, or further config.txt lines, each "key=value\n" with
 * a key of letters, digits and '_' that is not one of the model's keys
 * (format, mixer, layers, d_model, heads, mlp_hidden, conv, vocab,
 * output_gate, gate_rank, conv_init, conv_off).
 * Errors: those of kdalab_model_size, KDALAB_ENULL (dir, theta),
 * KDALAB_EINVAL (dir is "", a malformed extra line), KDALAB_ESIZE (more
 * than 64 lines in all), KDALAB_ENONFINITE (theta), KDALAB_EIO (a file
 * cannot be removed or written; those written before stay), KDALAB_ENOMEM;
 * every refusal but these two comes before dir is touched.
 */
kdalab_status kdalab_checkpoint_write(const char *dir, const kdalab_model_config *cfg,
                                      const double *theta, const char *extra);

/*
 * kdalab_checkpoint_read_config — the model a checkpoint's config.txt
 * describes, into *cfg. Errors: KDALAB_ENULL, KDALAB_EINVAL (dir is ""),
 * KDALAB_EIO (dir/config.txt is not a regular file or cannot be read),
 * KDALAB_EFORMAT (its first line is not KDALAB_CHECKPOINT_FORMAT; a line
 * too long, unterminated or holding a NUL byte; more than 64 lines; a model
 * key missing, repeated or malformed (an unknown output_gate or conv_init
 * name among them, a conv_off that is not distinct block indices below 64
 * joined by commas; layers outside 1 .. KDALAB_MODEL_MAX_LAYERS, conv other
 * than 0 or 1), or a model kdalab_model_size refuses); the message names the
 * file and what is wrong ("layers=0: must be in [1, 64]"). A key it does not
 * know is skipped.
 */
kdalab_status kdalab_checkpoint_read_config(const char *dir, kdalab_model_config *cfg);

/*
 * kdalab_checkpoint_read_params — the parameters of a checkpoint into theta
 * [n_params], for the cfg kdalab_checkpoint_read_config read from the same
 * dir: each tensor's .npy (any dtype kdalab_npy_read takes, converted to
 * float64). Errors: those of kdalab_model_size, KDALAB_ENULL, KDALAB_EINVAL
 * (dir is ""), those of kdalab_npy_read (KDALAB_EIO for a missing file,
 * with its path), KDALAB_ESIZE (a file's shape is not its tensor's),
 * KDALAB_ENONFINITE (a NaN or inf), KDALAB_ENOMEM. On error theta may be
 * partly written.
 */
kdalab_status kdalab_checkpoint_read_params(const char *dir, const kdalab_model_config *cfg,
                                            double *theta);

KDALAB_END_DECLS

#endif /* KDALAB_CHECKPOINT_H */
