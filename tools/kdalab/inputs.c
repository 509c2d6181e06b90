/*
 * tools/kdalab/inputs.c — the forward inputs every computing subcommand
 * (run, grad) takes: which of q, k, v, beta, g, h0, a, b the mechanism needs, reading
 * them with --cu-seqlens, checking their shapes against q's and v's (v's head
 * count fixes HV: grouped value heads when it is a multiple of q's) and their
 * values by the library's rules.
 *
 * defines: IN_FLAG, IN_NAME, IN_RULE, cli_inputs_plan, cli_inputs_read,
 *          cli_inputs_free (declared in cli.h)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *const IN_FLAG[N_IN] = {"--q", "--k", "--v", "--beta", "--g", "--h0", "--a", "--b"};
const char *const IN_NAME[N_IN] = {"q", "k", "v", "beta", "g", "h0", "a", "b"};
const kdalab_value_rule IN_RULE[N_IN] = {KDALAB_RULE_FINITE,    KDALAB_RULE_FINITE,
                                         KDALAB_RULE_FINITE,    KDALAB_RULE_BETA,
                                         KDALAB_RULE_LOG_DECAY, KDALAB_RULE_FINITE,
                                         KDALAB_RULE_FINITE,    KDALAB_RULE_FINITE};

int cli_inputs_plan(cli_inputs *fw, const char *const path[N_IN], const char *cu_seqlens)
{
    fw->cu = (cli_input){.flag = "--cu-seqlens", .path = cu_seqlens};
    const char *mech = kdalab_mechanism_name(fw->mech);
    for (int i = 0; i < N_IN; i++) {
        fw->in[i].flag = IN_FLAG[i];
        fw->in[i].path = path[i];
    }
    for (int i = IN_Q; i <= IN_V; i++)
        if (path[i] == NULL)
            return cli_fail(EXIT_BAD, "%s is required (a .npy file)", IN_FLAG[i]);
    int need_beta = kdalab_mechanism_has_beta(fw->mech);
    int need_g = kdalab_mechanism_g_width(fw->mech, 1) > 0;
    if (need_beta && path[IN_BETA] == NULL)
        return cli_fail(EXIT_BAD, "--beta is required by %s (a .npy file, [B, T, H])", mech);
    if (!need_beta && path[IN_BETA])
        return cli_fail(EXIT_BAD, "--beta is not used by %s", mech);
    if (need_g && path[IN_G] == NULL)
        return cli_fail(EXIT_BAD, "--g is required by %s (a .npy file, %s)", mech,
                        kdalab_mechanism_g_shape(fw->mech) == KDALAB_G_PER_KEY ? "[B, T, H, K]"
                                                                               : "[B, T, H]");
    if (!need_g && path[IN_G])
        return cli_fail(EXIT_BAD, "--g is not used by %s", mech);
    const int need_ab = kdalab_mechanism_has_ab(fw->mech);
    for (int i = IN_A; i <= IN_B; i++) {
        if (need_ab && path[i] == NULL)
            return cli_fail(EXIT_BAD, "%s is required by %s (a .npy file, [B, T, H, K]: the "
                                      "low-rank term b a^T)",
                            IN_FLAG[i], mech);
        if (!need_ab && path[i])
            return cli_fail(EXIT_BAD, "%s is not used by %s", IN_FLAG[i], mech);
    }
    return 0;
}

/* --cu-seqlens: a 1-D integer array [N+1] (int64 or int32, as torch and
 * NumPy write them), checked by the library's rule (kdalab_call_check),
 * which names the first bad index. */
static int read_cu_seqlens(cli_inputs *fw)
{
    cli_input *cu = &fw->cu;
    fw->n_seqs = 0;
    if (cu->path == NULL)
        return 0;
    kdalab_status s = kdalab_npy_read(cu->path, &cu->a);
    if (s != KDALAB_OK)
        return cli_fail(cli_exit_for(s), "%s: %s", cu->flag, kdalab_last_error());
    char sb[96];
    if (cu->a.dtype != KDALAB_DTYPE_I64 && cu->a.dtype != KDALAB_DTYPE_I32)
        return cli_fail(EXIT_BAD, "%s %s: dtype '%s' (%s): cu_seqlens must be int64 or int32",
                        cu->flag, cu->path, cu->a.descr, kdalab_dtype_name(cu->a.dtype));
    if (cu->a.ndim != 1 || cu->a.size < 2)
        return cli_fail(EXIT_BAD, "%s %s: shape %s; cu_seqlens is [N + 1] with N >= 1",
                        cu->flag, cu->path, cli_shape_str(&cu->a, sb, sizeof sb));
    fw->cu_seqlens = malloc(cu->a.size * sizeof *fw->cu_seqlens);
    if (fw->cu_seqlens == NULL)
        return cli_fail(EXIT_FAIL, "%s: out of memory", cu->flag);
    for (size_t i = 0; i < cu->a.size; i++) {
        double x = cu->a.data[i]; /* an integer, read as a double: exact below 2^53 */
        if (!(fabs(x) < 9007199254740992.0))
            return cli_fail(EXIT_BAD, "%s %s: cu_seqlens[%zu] = %.0f is beyond 2^53 (no T is "
                                      "that long)",
                            cu->flag, cu->path, i, x);
        fw->cu_seqlens[i] = (int64_t)x;
    }
    fw->n_seqs = cu->a.size - 1;
    const kdalab_call layout = cli_call(fw, 1.0, 0, 0, NULL, NULL); /* the layout's checks */
    s = kdalab_call_check(&layout, 0, 0);
    if (s != KDALAB_OK)
        return cli_fail(EXIT_BAD, "%s %s: %s", cu->flag, cu->path, kdalab_last_error());
    return 0;
}

kdalab_call cli_call(const cli_inputs *fw, double scale, int chunk_form, int simd,
                     const kdalab_chunk_opts *opts, kdalab_workspace *work)
{
    return (kdalab_call){.dims = fw->dims, .HV = fw->HV, .cu_seqlens = fw->cu_seqlens,
                         .n_seqs = fw->n_seqs, .mech = fw->mech, .scale = scale,
                         .form = chunk_form ? KDALAB_FORM_CHUNK : KDALAB_FORM_RECURRENT,
                         .impl = simd ? KDALAB_IMPL_SIMD : KDALAB_IMPL_REFERENCE,
                         .opts = opts, .work = work};
}

/* q fixes B, T, H, K; v fixes V; every other input must fit them. */
static int check_shapes(cli_inputs *fw)
{
    cli_input *in = fw->in;
    const kdalab_array *q = &in[IN_Q].a, *v = &in[IN_V].a;
    char s1[96], s2[96], s3[96];
    if (q->ndim != 4)
        return cli_fail(EXIT_BAD, "--q %s: shape %s has %d dimensions; q is [B, T, H, K]",
                        in[IN_Q].path, cli_shape_str(q, s1, sizeof s1), q->ndim);
    kdalab_dims d = {q->shape[0], q->shape[1], q->shape[2], q->shape[3], 0};
    if (d.B == 0 || d.H == 0 || d.K == 0)
        return cli_fail(EXIT_BAD, "--q %s: shape %s: B, H and K must be >= 1 (only T may be 0)",
                        in[IN_Q].path, cli_shape_str(q, s1, sizeof s1));
    if (!cli_shape_is(&in[IN_K].a, 4, q->shape))
        return cli_fail(EXIT_BAD, "--k %s: shape %s does not match --q %s shape %s (k is [B, T, "
                                  "H, K] like q)",
                        in[IN_K].path, cli_shape_str(&in[IN_K].a, s1, sizeof s1), in[IN_Q].path,
                        cli_shape_str(q, s2, sizeof s2));
    size_t HV = v->ndim == 4 ? v->shape[2] : 0; /* value heads: H, or G * H (GVA) */
    if (v->ndim != 4 || v->shape[0] != d.B || v->shape[1] != d.T || HV == 0 || HV % d.H != 0 ||
        v->shape[3] == 0)
        return cli_fail(EXIT_BAD, "--v %s: shape %s does not fit --q %s shape %s (v is [B, T, "
                                  "H, V] with q's B, T, H and V >= 1, or [B, T, HV, V] with HV "
                                  "a multiple of H for grouped value heads)",
                        in[IN_V].path, cli_shape_str(v, s1, sizeof s1), in[IN_Q].path,
                        cli_shape_str(q, s2, sizeof s2));
    d.V = v->shape[3];
    fw->dims = d;
    fw->HV = HV;
    int rc = read_cu_seqlens(fw);
    if (rc)
        return rc;
    fw->N = fw->cu_seqlens ? fw->n_seqs : d.B;

    const int gva = HV != d.H;
    const size_t bth[3] = {d.B, d.T, HV}, bthk[4] = {d.B, d.T, HV, d.K};
    const size_t state[4] = {fw->N, HV, d.K, d.V};
    if (kdalab_mechanism_has_beta(fw->mech) && !cli_shape_is(&in[IN_BETA].a, 3, bth))
        return cli_shape_mismatch(&in[IN_BETA], gva ? "(B, T, HV)" : "(B, T, H)", 3, bth,
                                  &in[IN_Q]);
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(fw->mech);
    char want[96];
    if (gs == KDALAB_G_PER_HEAD && !cli_shape_is(&in[IN_G].a, 3, bth)) {
        snprintf(want, sizeof want, "(B, T, %s) for %s", gva ? "HV" : "H",
                 kdalab_mechanism_name(fw->mech));
        return cli_shape_mismatch(&in[IN_G], want, 3, bth, &in[IN_Q]);
    }
    if (gs == KDALAB_G_PER_KEY && !cli_shape_is(&in[IN_G].a, 4, bthk)) {
        snprintf(want, sizeof want, "(B, T, %s, K) for %s", gva ? "HV" : "H",
                 kdalab_mechanism_name(fw->mech));
        return cli_shape_mismatch(&in[IN_G], want, 4, bthk, &in[IN_Q]);
    }
    for (int i = IN_A; i <= IN_B && kdalab_mechanism_has_ab(fw->mech); i++)
        if (!cli_shape_is(&in[i].a, 4, bthk))
            return cli_shape_mismatch(&in[i], gva ? "(B, T, HV, K)" : "(B, T, H, K)", 4, bthk,
                                      &in[IN_Q]);
    if (in[IN_H0].path && !cli_shape_is(&in[IN_H0].a, 4, state))
        return cli_fail(EXIT_BAD, "--h0 %s: shape %s, expected (%s, %s, K, V) = (%zu, %zu, %zu, "
                                  "%zu) from --q %s shape %s and --v %s shape %s",
                        in[IN_H0].path, cli_shape_str(&in[IN_H0].a, s1, sizeof s1),
                        fw->cu_seqlens ? "N" : "B", gva ? "HV" : "H", state[0], state[1], d.K,
                        d.V, in[IN_Q].path, cli_shape_str(q, s2, sizeof s2), in[IN_V].path,
                        cli_shape_str(v, s3, sizeof s3));
    return 0;
}

int cli_inputs_read(cli_inputs *fw)
{
    int rc;
    for (int i = 0; i < N_IN; i++)
        if (fw->in[i].path && (rc = cli_read_input(&fw->in[i])))
            return rc;
    if ((rc = check_shapes(fw)))
        return rc;
    for (int i = 0; i < N_IN; i++)
        if (fw->in[i].path && (rc = cli_check_values(&fw->in[i], IN_RULE[i], IN_NAME[i])))
            return rc;
    /* the states [N, HV, K, V]: each factor came from a file that exists, but
     * the product (in doubles) may still overflow */
    const size_t f[4] = {fw->N, fw->HV, fw->dims.K, fw->dims.V};
    size_t n = 1;
    for (int i = 0; i < 4 && n; i++)
        n = f[i] <= SIZE_MAX / sizeof(double) / n ? n * f[i] : 0;
    if (n == 0)
        return cli_fail(EXIT_BAD, "the state [N, HV, K, V] = [%zu, %zu, %zu, %zu] overflows "
                                  "size_t",
                        f[0], f[1], f[2], f[3]);
    fw->n_state = n;
    return 0;
}

void cli_inputs_free(cli_inputs *fw)
{
    for (int i = 0; i < N_IN; i++)
        kdalab_array_free(&fw->in[i].a);
    kdalab_array_free(&fw->cu.a);
    free(fw->cu_seqlens);
}
