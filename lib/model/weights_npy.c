/*
 * lib/model/weights_npy.c — a hybrid stack's weights from and to .npy files,
 * one file per matrix or vector: dir/layerNN.NAME.npy (the layout is listed
 * at kdalab_hybrid_new_npy in kdalab_hybrid.h).
 *
 * defines: kdalab_hybrid_new_npy, kdalab_hybrid_save_npy (public)
 *
 * Reading and writing go through one list of a layer's files (layer_files),
 * so the two cannot disagree on names, order or shapes.
 */
#include <stdio.h>
#include <string.h>

#include "hybrid_internal.h"

/* One weight file of a layer: its name, where its values live in the layer,
 * and its shape ([shape[0]] when ndim == 1). */
typedef struct {
    const char *name;
    double *data;
    int ndim;
    size_t shape[2];
} weight_file;

/* The files of layer ly, in reading order, into f; returns how many (at most
 * 8: norm, four [d, d] matrices, and wg, bg, wbeta for KDA).
 *   f  [8] */
static size_t layer_files(const kdalab_hybrid *s, const hybrid_layer *ly, weight_file f[8])
{
    size_t d = s->cfg.d_model, H = s->cfg.n_heads, n = 0;
    if (s->cfg.rms_norm)
        f[n++] = (weight_file){"norm", ly->norm, 1, {d, 0}};
    f[n++] = (weight_file){"wq", ly->wq, 2, {d, d}};
    f[n++] = (weight_file){"wk", ly->wk, 2, {d, d}};
    f[n++] = (weight_file){"wv", ly->wv, 2, {d, d}};
    f[n++] = (weight_file){"wo", ly->wo, 2, {d, d}};
    if (ly->kind == KDALAB_HYBRID_KDA) {
        f[n++] = (weight_file){"wg", ly->wg, 2, {d, d}};
        f[n++] = (weight_file){"bg", ly->bg, 1, {d, 0}};
        f[n++] = (weight_file){"wbeta", ly->wbeta, 2, {d, H}};
    }
    return n;
}

/* buf = "dir/layerNN.name.npy"; 0 when it does not fit.
 *   buf  [len] */
static int weight_path(char *buf, size_t len, const char *dir, size_t layer, const char *name)
{
    int n = snprintf(buf, len, "%s/layer%02zu.%s.npy", dir, layer, name);
    return n > 0 && (size_t)n < len;
}

kdalab_status kdalab_hybrid_new_npy(const kdalab_hybrid_config *cfg, const char *dir,
                                    kdalab_hybrid **out)
{
    if (!out)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_npy: out is NULL");
    *out = NULL;
    if (!dir)
        return kdalab_fail(KDALAB_ENULL, "hybrid_new_npy: dir is NULL");
    if (!*dir) /* "" would read the weights from "/layerNN..." */
        return kdalab_fail(KDALAB_EINVAL, "hybrid_new_npy: dir is \"\": name a directory");
    kdalab_hybrid *s = NULL;
    kdalab_status st = kdalab__hybrid_alloc(cfg, &s);
    if (st != KDALAB_OK)
        return st;
    char path[4096];
    for (size_t l = 0; l < cfg->n_layers; l++) {
        weight_file f[8];
        size_t nf = layer_files(s, &s->layers[l], f);
        for (size_t i = 0; i < nf; i++) {
            if (!weight_path(path, sizeof path, dir, l, f[i].name)) {
                st = kdalab_fail(KDALAB_EIO, "hybrid_new_npy: path too long in '%s'", dir);
                goto fail;
            }
            kdalab_array a;
            st = kdalab_npy_read(path, &a);
            if (st != KDALAB_OK)
                goto fail; /* kdalab_npy_read set the detail, with the path */
            int ok = a.ndim == f[i].ndim;
            for (int j = 0; ok && j < f[i].ndim; j++)
                ok = a.shape[j] == f[i].shape[j];
            if (!ok) {
                if (f[i].ndim == 1)
                    st = kdalab_fail(KDALAB_ESIZE, "hybrid_new_npy: %s: expected shape [%zu]",
                                     path, f[i].shape[0]);
                else
                    st = kdalab_fail(KDALAB_ESIZE, "hybrid_new_npy: %s: expected shape [%zu, %zu]",
                                     path, f[i].shape[0], f[i].shape[1]);
                kdalab_array_free(&a);
                goto fail;
            }
            st = kdalab_check_finite_f64(path, a.data, a.size);
            if (st != KDALAB_OK) {
                kdalab_array_free(&a);
                goto fail;
            }
            memcpy(f[i].data, a.data, a.size * sizeof(double));
            kdalab_array_free(&a);
        }
    }
    *out = s;
    kdalab_clear_error();
    return KDALAB_OK;
fail:
    kdalab_hybrid_free(s);
    return st;
}

kdalab_status kdalab_hybrid_save_npy(const kdalab_hybrid *s, const char *dir)
{
    if (!s || !dir)
        return kdalab_fail(KDALAB_ENULL, "hybrid_save_npy: NULL argument");
    if (!*dir) /* "" would write the weights to "/layerNN..." */
        return kdalab_fail(KDALAB_EINVAL, "hybrid_save_npy: dir is \"\": name a directory");
    char path[4096];
    for (size_t l = 0; l < s->cfg.n_layers; l++) {
        weight_file f[8];
        size_t nf = layer_files(s, &s->layers[l], f);
        for (size_t i = 0; i < nf; i++) {
            if (!weight_path(path, sizeof path, dir, l, f[i].name))
                return kdalab_fail(KDALAB_EIO, "hybrid_save_npy: path too long in '%s'", dir);
            kdalab_status st = kdalab_npy_write(path, KDALAB_DTYPE_F64, f[i].data, f[i].ndim,
                                                f[i].shape);
            if (st != KDALAB_OK)
                return st;
        }
    }
    kdalab_clear_error();
    return KDALAB_OK;
}
