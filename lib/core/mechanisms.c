/*
 * lib/core/mechanisms.c — the mechanism table: one row per linear mechanism
 * of the lineage, the 2 x 3 grid {no delta rule, delta rule} x {no decay,
 * a log-decay per head, one per key channel}, and the general
 * diagonal-plus-low-rank transition that bounds it. A row says what the
 * mechanism is (the delta rule or not, the shape of g, a given low-rank term
 * b a^T or not) and how the field names it
 * (kdalab's name, fla's functions, the paper); everything else — kernels,
 * checks, the command line, Python, help texts — reads it from here. The
 * kernels branch on the properties (kdalab_mechanism_has_delta,
 * kdalab_mechanism_g_shape / _g_width), never on a mechanism's id:
 * scripts/check_layout.sh keeps comparisons of ids out of every other file.
 *
 * Per (b, h) and step t (REFERENCE.md's update table):
 *   decay      S' = S_{t-1}              (no decay)
 *              S' = exp(g_t) S_{t-1}     (g per head)
 *              S' = Diag(exp g_t) S_{t-1} (g per key channel)
 *   write      S_t = S' + k_t v_t^T                          (no delta rule)
 *              S_t = S' + beta_t k_t (v_t - S'^T k_t)^T      (the delta rule)
 *   DPLR       S_t = Diag(exp g_t) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T
 *              (a, b given: the boundary every row above is an instance of)
 *   read       o_t = scale S_t^T q_t
 *
 * defines: kdalab_mechanism_row, kdalab_mechanism_name, kdalab_mechanism_parse,
 *          kdalab_mechanism_list, kdalab_mechanism_has_delta,
 *          kdalab_mechanism_has_beta, kdalab_mechanism_g_shape,
 *          kdalab_mechanism_g_width, kdalab_mechanism_has_ab
 */
#include <string.h>

#include "internal.h"

/* The rows, in the order of kdalab_mechanism (row i has id i). */
static const kdalab_mechanism_info rows[KDALAB_N_MECHANISMS] = {
    {KDALAB_LINEAR_ATTENTION, "linear_attention", "linear attention", 0, KDALAB_G_NONE, 0,
     "chunk_linear_attn", "fused_recurrent_linear_attn", "arXiv:2006.16236"},
    {KDALAB_DELTANET, "deltanet", "DeltaNet", 1, KDALAB_G_NONE, 0, "chunk_delta_rule",
     "fused_recurrent_delta_rule", "arXiv:2406.06484"},
    {KDALAB_GATED_DELTANET, "gated_deltanet", "Gated DeltaNet", 1, KDALAB_G_PER_HEAD, 0,
     "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "arXiv:2412.06464"},
    {KDALAB_KDA, "kda", "Kimi Delta Attention", 1, KDALAB_G_PER_KEY, 0, "chunk_kda",
     "fused_recurrent_kda", "arXiv:2510.26692"},
    {KDALAB_SIMPLE_GLA, "simple_gla", "simple GLA", 0, KDALAB_G_PER_HEAD, 0,
     "chunk_simple_gla", "fused_recurrent_simple_gla", "arXiv:2405.21060"},
    {KDALAB_GLA, "gla", "Gated Linear Attention", 0, KDALAB_G_PER_KEY, 0, "chunk_gla",
     "fused_recurrent_gla", "arXiv:2312.06635"},
    {KDALAB_DPLR, "dplr", "diagonal plus low rank (generalized delta rule)", 0,
     KDALAB_G_PER_KEY, 1, "chunk_dplr_delta_rule", "fused_recurrent_dplr_delta_rule",
     "arXiv:2503.14456"},
};

const kdalab_mechanism_info *kdalab_mechanism_row(kdalab_mechanism m)
{
    return (unsigned)m < (unsigned)KDALAB_N_MECHANISMS ? &rows[m] : NULL;
}

const char *kdalab_mechanism_name(kdalab_mechanism m)
{
    const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
    return r ? r->name : "unknown";
}

const char *kdalab_mechanism_list(const char *sep, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < KDALAB_N_MECHANISMS; i++) {
        const char *parts[2] = {i ? (sep ? sep : "") : "", rows[i].name};
        for (int p = 0; p < 2; p++)
            for (const char *c = parts[p]; *c && used + 1 < n; c++)
                buf[used++] = *c;
    }
    buf[used] = '\0';
    return buf;
}

kdalab_status kdalab_mechanism_parse(const char *name, kdalab_mechanism *out)
{
    kdalab_clear_error();
    if (!name || !out)
        return kdalab_fail(KDALAB_ENULL, "mechanism: NULL argument");
    for (size_t i = 0; i < KDALAB_N_MECHANISMS; i++)
        if (strcmp(name, rows[i].name) == 0) {
            *out = rows[i].id;
            return KDALAB_OK;
        }
    char names[256];
    return kdalab_fail(KDALAB_EINVAL, "unknown mechanism '%s' (%s)", name,
                       kdalab_mechanism_list(", ", names, sizeof names));
}

int kdalab_mechanism_has_delta(kdalab_mechanism m)
{
    const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
    return r ? r->delta : 0;
}

int kdalab_mechanism_has_beta(kdalab_mechanism m)
{
    return kdalab_mechanism_has_delta(m); /* beta is the delta rule's write strength */
}

kdalab_g_shape kdalab_mechanism_g_shape(kdalab_mechanism m)
{
    const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
    return r ? r->g : KDALAB_G_NONE;
}

size_t kdalab_mechanism_g_width(kdalab_mechanism m, size_t K)
{
    kdalab_g_shape g = kdalab_mechanism_g_shape(m);
    return g == KDALAB_G_PER_KEY ? K : g == KDALAB_G_PER_HEAD ? 1 : 0;
}

int kdalab_mechanism_has_ab(kdalab_mechanism m)
{
    const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
    return r ? r->ab : 0;
}
