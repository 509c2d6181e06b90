/*
 * tools/kdalab/checkpoint.c — `kdalab train --out DIR`: the trained
 * parameters in the library's checkpoint format (kdalab_checkpoint.h: one
 * .npy per tensor and config.txt, kdalab_checkpoint_write), written all or
 * nothing.
 *
 * A directory is a checkpoint only if kdalab made it: its config.txt begins
 * with KDALAB_CHECKPOINT_FORMAT and describes a model
 * (kdalab_checkpoint_read_config), and it holds nothing but that file and
 * the .npy files of the tensors the config describes. Only such a directory is ever
 * replaced; anything else at DIR (other files, a symbolic link, ".") is
 * refused before training, by ckpt_plan, which makes every check the save
 * makes. The save builds the new checkpoint in a fresh directory
 * DIR.kdalab-save-XXXXXX beside DIR and swaps the two in one step
 * (replace.c), then removes the earlier one; interrupts are held meanwhile.
 * Only a kill that cannot be held (SIGKILL, a crash) can leave a
 * DIR.kdalab-save-* behind; the next run names it and stops.
 *
 * defines: ckpt_plan, ckpt_save (declared in cli.h)
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

#define SAVE_TAG "kdalab-save" /* DIR.kdalab-save-XXXXXX */

/* Is dir a checkpoint (see the file's comment)? 0 if so; else -1 with why. */
static int is_checkpoint(const char *dir, char *why, size_t cap)
{
    kdalab_model_config m;
    if (kdalab_checkpoint_read_config(dir, &m) != KDALAB_OK) {
        snprintf(why, cap, "%s", kdalab_last_error());
        return -1;
    }
    size_t n_tensors;
    kdalab_model_size(&m, NULL, &n_tensors);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, cap, "it cannot be read: %s", strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    char path[PATH_MAX + NAME_MAX + 2];
    while (rc == 0 && (e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "config.txt") == 0)
            continue;
        int known = 0;
        size_t len = strlen(name);
        for (size_t i = 0; !known && i < n_tensors; i++) {
            kdalab_model_tensor t;
            kdalab_model_tensor_at(&m, i, &t);
            size_t tl = strlen(t.name);
            known = len == tl + 4 && strncmp(name, t.name, tl) == 0 &&
                    strcmp(name + tl, ".npy") == 0;
        }
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!known || lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            snprintf(why, cap, "it holds %s, which is not one of the checkpoint's files", name);
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* Remove every entry of dir (a directory this program made, or a checkpoint
 * is_checkpoint accepted: regular files only), then dir. 0 when it is gone. */
static int remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char path[PATH_MAX + NAME_MAX + 2];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

/* dir's parent ("." for a bare name, "/" for "/x") and base name. */
static void split_path(const char *dir, char *parent, size_t cap, const char **base)
{
    const char *slash = strrchr(dir, '/');
    *base = slash ? slash + 1 : dir;
    if (!slash)
        snprintf(parent, cap, ".");
    else if (slash == dir)
        snprintf(parent, cap, "/");
    else
        snprintf(parent, cap, "%.*s", (int)(slash - dir), dir);
}

int ckpt_plan(const char *out, ckpt_plan_t *plan)
{
    memset(plan, 0, sizeof *plan);
    size_t len = strlen(out);
    /* room for DIR.kdalab-save-XXXXXX/<tensor>.npy and npy_write's own
     * .tmp.XXXXXX beside it */
    if (len + sizeof "." SAVE_TAG "-XXXXXX/" + sizeof ((kdalab_model_tensor *)0)->name +
            sizeof ".npy.tmp.XXXXXX" > sizeof plan->dir)
        return cli_fail(EXIT_BAD, "--out: the path is too long (%zu bytes)", len);
    memcpy(plan->dir, out, len + 1);
    while (len > 1 && plan->dir[len - 1] == '/') /* "ckpt/" is "ckpt" */
        plan->dir[--len] = '\0';
    const char *dir = plan->dir, *base;
    char parent[sizeof plan->dir];
    split_path(dir, parent, sizeof parent, &base);
    if (strcmp(dir, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return cli_fail(EXIT_BAD, "--out %s: names a directory by '%s', which cannot be "
                                  "replaced in place; name the directory itself (e.g. "
                                  "--out ../NAME) or a new one",
                        out, *base ? base : "/");
    if (strlen(base) + sizeof "." SAVE_TAG "-XXXXXX" - 1 > NAME_MAX)
        return cli_fail(EXIT_BAD, "--out %s: the name is too long for the temporary "
                                  "directory %s.%s-XXXXXX beside it (at most %d bytes)",
                        out, base, SAVE_TAG, (int)(NAME_MAX - sizeof "." SAVE_TAG "-XXXXXX" + 1));

    struct stat st, pst;
    if (stat(parent, &pst) != 0)
        return cli_fail(EXIT_BAD, "--out %s: the directory %s: %s", out, parent,
                        strerror(errno));
    if (!S_ISDIR(pst.st_mode))
        return cli_fail(EXIT_BAD, "--out %s: %s is not a directory", out, parent);
    if (access(parent, W_OK | X_OK) != 0)
        return cli_fail(EXIT_BAD, "--out %s: cannot write in %s: %s", out, parent,
                        strerror(errno));
    if (lstat(dir, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return cli_fail(EXIT_BAD, "--out %s: is a symbolic link; kdalab train replaces "
                                      "only a checkpoint directory itself, never through a "
                                      "link: give the directory's own path or another --out",
                            out);
        if (!S_ISDIR(st.st_mode))
            return cli_fail(EXIT_BAD, "--out %s: exists and is not a directory", out);
        char why[NAME_MAX + 128];
        if (is_checkpoint(dir, why, sizeof why) != 0)
            return cli_fail(EXIT_BAD, "--out %s: exists and is not a kdalab checkpoint (%s); "
                                      "kdalab train replaces nothing else. Choose another "
                                      "--out, or, if it is a checkpoint of an earlier kdalab "
                                      "without the format line, remove it first",
                            out, why);
        if (st.st_dev != pst.st_dev)
            return cli_fail(EXIT_BAD, "--out %s: is a mount point (another filesystem than "
                                      "%s), which cannot be replaced by a rename",
                            out, parent);
        if (access(dir, W_OK | X_OK) != 0)
            return cli_fail(EXIT_BAD, "--out %s: the earlier checkpoint cannot be removed: %s",
                            out, strerror(errno));
        plan->exists = 1;
    } else if (errno != ENOENT) {
        return cli_fail(EXIT_BAD, "--out %s: %s", out, strerror(errno));
    }

    /* what an interrupted save (a kill no program can hold off) left */
    DIR *d = opendir(parent);
    if (!d)
        return cli_fail(EXIT_BAD, "--out %s: cannot read %s: %s", out, parent, strerror(errno));
    char stem[NAME_MAX + 32];
    snprintf(stem, sizeof stem, "%s.%s-", base, SAVE_TAG);
    struct dirent *e;
    char left[NAME_MAX + 1] = "";
    while (!left[0] && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, stem, strlen(stem)) == 0)
            snprintf(left, sizeof left, "%s", e->d_name);
    closedir(d);
    if (left[0])
        return cli_fail(EXIT_BAD, "--out %s: %s%s%s is left from an interrupted save (an "
                                  "earlier or an unfinished checkpoint); look at it and remove "
                                  "it (or move it away), then run again",
                        out, base == dir ? "" : parent,
                        base == dir || strcmp(parent, "/") == 0 ? "" : "/", left);

    /* the save's steps, tried now on an empty directory: the temporary
     * directory can be made, and swapped with the earlier checkpoint and
     * back (access() cannot see every rule a rename obeys: a sticky parent
     * with another user's checkpoint, an append-only parent) */
    char probe[sizeof plan->dir + 32];
    replace_held saved; /* an interrupt here must not leave the probe behind */
    replace_hold_signals(&saved);
    if (replace_make_temp(dir, SAVE_TAG, 1, probe, sizeof probe) != 0) {
        int err = errno;
        replace_release_signals(&saved);
        return cli_fail(EXIT_BAD, "--out %s: cannot create a directory beside it: %s", out,
                        strerror(err));
    }
    if (plan->exists && replace_swap(probe, dir) != 0) {
        int err = errno;
        rmdir(probe);
        replace_release_signals(&saved);
        return cli_fail(EXIT_BAD, "--out %s: the earlier checkpoint cannot be replaced by a "
                                  "rename (%s); choose another --out",
                        out, strerror(err));
    }
    if (plan->exists && replace_swap(probe, dir) != 0) { /* back: the checkpoint at dir */
        int err = errno;
        replace_release_signals(&saved);
        return cli_fail(EXIT_FAIL, "--out %s: swapping the earlier checkpoint back failed "
                                   "(%s): it is now %s, and %s is an empty directory; "
                                   "rename it back by hand",
                        out, strerror(err), probe, dir);
    }
    if (rmdir(probe) != 0) {
        int err = errno;
        replace_release_signals(&saved);
        return cli_fail(EXIT_BAD, "--out %s: the trial directory %s beside it cannot be "
                                  "removed (%s); remove it, and choose another --out",
                        out, probe, strerror(err));
    }
    replace_release_signals(&saved);
    return 0;
}

/* Write the checkpoint into dir (which exists and is empty): the library's
 * format, with the task and the training settings as config.txt's extra lines. */
static int write_files(const char *dir, const kdalab_train_config *c, const double *theta,
                       const kdalab_train_result *r, const char *precision, const char *out)
{
    char extra[1024], variant[64] = "";
    if (c->task.task == KDALAB_MQAR_OVERWRITE)
        snprintf(variant, sizeof variant, "updates=%zu\n", c->task.updates);
    else if (c->task.task == KDALAB_MQAR_RECENT)
        snprintf(variant, sizeof variant, "recent=%zu\n", c->task.recent);
    else if (c->task.task == KDALAB_MQAR_STACK)
        snprintf(variant, sizeof variant, "stacks=%zu\n", c->task.key_vocab / 2);
    if (c->task.train_set)
        snprintf(variant + strlen(variant), sizeof variant - strlen(variant), "train_set=%zu\n",
                 c->task.train_set);
    snprintf(extra, sizeof extra,
             "task=%s\n%sseq_len=%zu\nkv_pairs=%zu\nbatch=%zu\nsteps=%zu\nlr=%g\n"
             "weight_decay=%g\nseed=%lu\ntest_size=%zu\ntest_accuracy=%.6f\n"
             "test_loss=%.6f\nseconds=%.2f\nprecision=%s\n",
             kdalab_mqar_task_name(c->task.task),
             variant, c->task.T, c->task.kv_pairs, c->batch, c->opt.steps, c->opt.lr,
             c->opt.weight_decay, c->seed, c->test_sequences, r->test_accuracy, r->test_loss,
             r->seconds, precision);
    if (kdalab_checkpoint_write(dir, &c->model, theta, extra) != KDALAB_OK)
        return cli_fail(EXIT_FAIL, "--out %s: %s", out, kdalab_last_error());
    return 0;
}

int ckpt_save(const ckpt_plan_t *plan, const kdalab_train_config *c, const double *theta,
              const kdalab_train_result *r, const char *precision)
{
    const char *dir = plan->dir;
    char part[sizeof plan->dir + 32];
    replace_held saved;
    replace_hold_signals(&saved); /* from the first entry made to the last removed */
    if (replace_make_temp(dir, SAVE_TAG, 1, part, sizeof part) != 0) {
        int e = errno;
        replace_release_signals(&saved);
        return cli_fail(EXIT_FAIL, "--out %s: cannot create a directory beside it: %s", dir,
                        strerror(e));
    }
    replace_test_point("mkdir");
    int rc = write_files(part, c, theta, r, precision, dir);
    replace_test_point("write");
    if (rc == 0 && replace_swap(part, dir) != 0)
        rc = cli_fail(EXIT_FAIL, "--out %s: cannot put the checkpoint in place: %s (the "
                                 "earlier one, if any, is unchanged)",
                      dir, strerror(errno));
    replace_test_point("swap");
    if (rc != 0) {
        remove_dir(part); /* only what this save wrote */
    } else {
        /* part now holds what was at DIR: the earlier checkpoint, removed;
         * or (DIR changed during training) something not ours to delete */
        char why[NAME_MAX + 128] = "it could not be removed";
        struct stat st;
        if (lstat(part, &st) != 0)
            why[0] = '\0'; /* DIR was new: nothing to remove */
        else if (!plan->exists || !S_ISDIR(st.st_mode))
            snprintf(why, sizeof why, "it appeared at --out during training");
        else if (is_checkpoint(part, why, sizeof why) == 0 && remove_dir(part) == 0)
            why[0] = '\0';
        if (why[0])
            fprintf(stderr, "kdalab train: note: what --out held before the save is kept in "
                            "%s, as %s\n", part, why);
    }
    replace_test_point("remove");
    replace_release_signals(&saved);
    return rc;
}
