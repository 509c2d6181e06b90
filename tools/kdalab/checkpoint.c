/*
 * tools/kdalab/checkpoint.c — `kdalab train --out DIR`: the trained
 * parameters as one .npy per tensor (the layout's names) and config.txt,
 * written all or nothing. Everything goes to a fresh sibling directory
 * DIR.partial-<pid> first; only when every file is written is it renamed to
 * DIR (an earlier checkpoint there is moved aside first and removed after),
 * so a failed save leaves DIR as it was, and a new checkpoint never mixes
 * with an old one's tensors.
 *
 * defines: ckpt_check_out, ckpt_save (declared in cli.h)
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

/* Is name a file a checkpoint holds (a .npy, config.txt)? */
static int ckpt_file(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "config.txt") == 0 || (n > 4 && strcmp(name + n - 4, ".npy") == 0);
}

/* Remove a checkpoint directory's files and the directory; 0 when it is gone
 * (a directory holding anything else is kept). */
static int remove_ckpt_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char path[PATH_MAX];
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (ckpt_file(e->d_name)) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    return rmdir(dir);
}

int ckpt_check_out(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return cli_fail(EXIT_BAD, "--out %s: exists and is not a directory", dir);
        DIR *d = opendir(dir);
        if (!d)
            return cli_fail(EXIT_BAD, "--out %s: cannot read the directory: %s", dir,
                            strerror(errno));
        int other = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                other |= !ckpt_file(e->d_name);
        closedir(d);
        if (other) /* a checkpoint replaces a checkpoint, never other files */
            return cli_fail(EXIT_BAD, "--out %s: holds files other than a checkpoint's "
                            "(.npy and config.txt)", dir);
    }
    /* the checkpoint is built beside DIR: its parent must take a new entry */
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    if (access(parent, W_OK | X_OK) != 0)
        return cli_fail(EXIT_BAD, "--out %s: cannot write in %s: %s", dir, parent,
                        strerror(errno));
    return 0;
}

/* Write every file into dir (which exists and is empty). */
static int write_files(const char *dir, const kdalab_train_config *c, const double *theta,
                       const kdalab_train_result *r, const char *precision, const char *out)
{
    size_t n_tensors;
    kdalab_model_size(&c->model, NULL, &n_tensors);
    char path[PATH_MAX + 64];
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
    fprintf(f, "task=mqar\nmixer=");
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
    if (fclose(f) != 0)
        return cli_fail(EXIT_FAIL, "--out %s: writing config.txt: %s", out, strerror(errno));
    return 0;
}

int ckpt_save(const char *dir, const kdalab_train_config *c, const double *theta,
              const kdalab_train_result *r, const char *precision)
{
    char part[PATH_MAX], old[PATH_MAX];
    snprintf(part, sizeof part, "%s.partial-%ld", dir, (long)getpid());
    snprintf(old, sizeof old, "%s.old-%ld", dir, (long)getpid());
    if (mkdir(part, 0777) != 0)
        return cli_fail(EXIT_FAIL, "--out %s: cannot create %s: %s", dir, part,
                        strerror(errno));
    int rc = write_files(part, c, theta, r, precision, dir);
    struct stat st;
    const int had = rc == 0 && stat(dir, &st) == 0;
    if (rc == 0 && had && rename(dir, old) != 0)
        rc = cli_fail(EXIT_FAIL, "--out %s: cannot move the earlier checkpoint aside: %s", dir,
                      strerror(errno));
    if (rc == 0 && rename(part, dir) != 0) {
        rc = cli_fail(EXIT_FAIL, "--out %s: cannot put the checkpoint in place: %s", dir,
                      strerror(errno));
        if (had)
            rename(old, dir); /* the earlier checkpoint back */
    }
    if (rc != 0) {
        remove_ckpt_dir(part);
        return rc;
    }
    if (had && remove_ckpt_dir(old) != 0)
        fprintf(stderr, "kdalab train: note: the earlier checkpoint is kept in %s\n", old);
    return 0;
}
