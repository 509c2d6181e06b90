/*
 * tools/kdalab/checkpoint.c — `kdalab train --out DIR`: the trained
 * parameters as one .npy per tensor (the layout's names) and config.txt,
 * written all or nothing.
 *
 * A directory is a checkpoint only if kdalab made it: its config.txt begins
 * with CKPT_FORMAT_LINE, and it holds nothing but that file and the .npy
 * files of the tensors the config describes. Only such a directory is ever
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

/* The model a checkpoint's config.txt describes, or why it is not one
 * (why[cap]: a phrase). Returns 0 when dir/config.txt is a regular file
 * starting with CKPT_FORMAT_LINE that describes a valid model. */
static int read_config(const char *dir, kdalab_model_config *m, char *why, size_t cap)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.txt", dir);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, cap, "it has no config.txt");
        return -1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, cap, "its config.txt cannot be read: %s", strerror(errno));
        return -1;
    }
    char line[512], mixers[512] = "";
    size_t L = 0, D = 0, H = 0, F = 0, V = 0;
    int conv = -1, marked = 0, lines = 0, bad = 0;
    while (!bad && lines < 64 && fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') { /* longer than any line kdalab writes */
            bad = 1;
            break;
        }
        line[n - 1] = '\0';
        if (lines++ == 0) {
            marked = strcmp(line, CKPT_FORMAT_LINE) == 0;
            if (!marked)
                break;
            continue;
        }
        if (sscanf(line, "layers=%zu", &L) == 1 || sscanf(line, "d_model=%zu", &D) == 1 ||
            sscanf(line, "heads=%zu", &H) == 1 || sscanf(line, "mlp_hidden=%zu", &F) == 1 ||
            sscanf(line, "vocab=%zu", &V) == 1 || sscanf(line, "conv=%d", &conv) == 1)
            continue;
        if (strncmp(line, "mixer=", 6) == 0)
            snprintf(mixers, sizeof mixers, "%s", line + 6);
    }
    fclose(f);
    if (!marked) {
        snprintf(why, cap, "its config.txt does not begin with the line %s", CKPT_FORMAT_LINE);
        return -1;
    }
    memset(m, 0, sizeof *m);
    m->L = L;
    m->D = D;
    m->H = H;
    m->F = F;
    m->vocab = V;
    m->conv = conv;
    if (bad || conv < 0 || L == 0 || L > KDALAB_MODEL_MAX_LAYERS ||
        kdalab_model_parse_mixers(mixers, &m->L, 1, m->mixer) != KDALAB_OK ||
        kdalab_model_size(m, NULL, NULL) != KDALAB_OK) {
        snprintf(why, cap, "its config.txt does not describe a model");
        return -1;
    }
    return 0;
}

/* Is dir a checkpoint (see the file's comment)? 0 if so; else -1 with why. */
static int is_checkpoint(const char *dir, char *why, size_t cap)
{
    kdalab_model_config m;
    if (read_config(dir, &m, why, cap) != 0)
        return -1;
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

/* Write every file into dir (which exists and is empty). */
static int write_files(const char *dir, const kdalab_train_config *c, const double *theta,
                       const kdalab_train_result *r, const char *precision, const char *out)
{
    size_t n_tensors;
    kdalab_model_size(&c->model, NULL, &n_tensors);
    char path[PATH_MAX + 128];
    for (size_t i = 0; i < n_tensors; i++) {
        kdalab_model_tensor t;
        kdalab_model_tensor_at(&c->model, i, &t);
        snprintf(path, sizeof path, "%s/%s.npy", dir, t.name);
        size_t shape[2] = {t.rows, t.cols};
        const int nd = t.rows == 1 ? 1 : 2;
        if (kdalab_npy_write(path, KDALAB_DTYPE_F64, theta + t.offset, nd,
                             nd == 1 ? shape + 1 : shape) != KDALAB_OK)
            return cli_fail(EXIT_FAIL, "--out %s: writing %s.npy: %s", out, t.name,
                            kdalab_last_error());
    }
    snprintf(path, sizeof path, "%s/config.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return cli_fail(EXIT_FAIL, "--out %s: writing config.txt: %s", out, strerror(errno));
    fprintf(f, "%s\ntask=mqar\nmixer=", CKPT_FORMAT_LINE);
    for (size_t l = 0; l < c->model.L; l++)
        fprintf(f, "%s%s", l ? "," : "", kdalab_mixer_name(c->model.mixer[l]));
    fprintf(f, "\nlayers=%zu\nd_model=%zu\nheads=%zu\nmlp_hidden=%zu\nconv=%d\nvocab=%zu\n"
            "seq_len=%zu\nkv_pairs=%zu\nbatch=%zu\nsteps=%zu\nlr=%g\nweight_decay=%g\n"
            "seed=%lu\ntest_size=%zu\ntest_accuracy=%.6f\ntest_loss=%.6f\nseconds=%.2f\n"
            "precision=%s\n",
            c->model.L, c->model.D, c->model.H, c->model.F, c->model.conv, c->model.vocab,
            c->task.T, c->task.kv_pairs, c->batch, c->opt.steps, c->opt.lr,
            c->opt.weight_decay, c->seed, c->test_sequences, r->test_accuracy, r->test_loss,
            r->seconds, precision);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        int e = errno;
        fclose(f);
        return cli_fail(EXIT_FAIL, "--out %s: writing config.txt: %s", out, strerror(e));
    }
    if (fclose(f) != 0)
        return cli_fail(EXIT_FAIL, "--out %s: writing config.txt: %s", out, strerror(errno));
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
