/*
 * tools/kdalab/grad.c — `kdalab grad`: the float64 backward of one mechanism
 * on .npy tensors in fla's layout: given the forward's inputs and the
 * upstream gradients d_o (and dht), write the gradients of
 * L = sum(o * d_o) + sum(ht * dht) (REFERENCE.md, "Gradients").
 *
 * defines: cmd_grad (declared in cli.h)
 *
 * Steps, one function each: parse_flags → plan (options, inputs, outputs; all
 * checked before any file is read) → read (the forward inputs through
 * inputs.c, then d_o and dht against their shapes) → compute (the library's
 * recurrent, chunkwise or attention backward) → cli_write_all (every output
 * written, or none).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { OUT_DQ, OUT_DK, OUT_DV, OUT_DG, OUT_DBETA, OUT_DH0, OUT_DA, OUT_DB, N_OUT };
static const char *const OUT_FLAG[N_OUT] = {"--dq",    "--dk",  "--dv", "--dg",
                                            "--dbeta", "--dh0", "--da", "--db"};

typedef struct {
    const char *mechanism, *form, *precision, *impl, *chunk, *subchunk, *scale, *d_o, *dht;
    const char *cu_seqlens;
    const char *input[N_IN];
    const char *out[N_OUT];
    int help;
} grad_flags;

typedef struct {
    int attention;          /* --mechanism attention: softmax attention's backward */
    int fp32;               /* --precision fp32                                   */
    int chunk_form;         /* --form chunk                                       */
    int simd;               /* --impl simd: the SIMD chunkwise backward           */
    kdalab_chunk_opts opts; /* kdalab_chunk_opts_default(), then the flags        */
    int have_scale;
    double scale;
    cli_inputs fwd;
    cli_input d_o, dht;
    double *grad[N_OUT]; /* the gradients, float64, in the layout of their input */
} grad_job;

static void print_help(void)
{
    kdalab_chunk_opts def = kdalab_chunk_opts_default();
    char names[256];
    printf(
        "usage: kdalab grad --mechanism M --q Q.npy --k K.npy --v V.npy [--beta B.npy]\n"
        "                   [--g G.npy] [--h0 H0.npy] --do DO.npy [--dht DHT.npy]\n"
        "                   [--a A.npy --b B.npy]\n"
        "                   [--dq F] [--dk F] [--dv F] [--dg F] [--dbeta F] [--dh0 F]\n"
        "                   [--da F] [--db F]\n"
        "\n"
        "The float64 backward: the gradients of L = sum(o * do) + sum(ht * dht) with\n"
        "respect to each input, what a backward kernel given do and dht must return.\n"
        "Inputs as for `kdalab run` (fla's layout, .npy float64, float32 or float16), plus\n"
        "  do    [B, T, H, V] the upstream gradient of o (required)\n"
        "  dht   [B, H, K, V] the upstream gradient of the final state (default zero)\n"
        "        (varlen and grouped value heads: do like o, dht like ht, as for run)\n"
        "Each output is float64 in the layout of its input (dg like g, dh0 like h0);\n"
        "give at least one. They are written all or none.\n"
        "\n"
        "  --mechanism M     %s |\n"
        "                    attention (causal softmax attention: q, k, v, do -> dq, dk, dv)\n"
        "  --form F          recurrent (default) | chunk (the chunkwise backward)\n"
        "  --impl I          reference | simd: the SIMD path's chunkwise backward\n"
        "                    (default: simd for --form chunk, reference otherwise).\n"
        "                    simd agrees with the reference to ~1e-14 relative in fp64;\n"
        "                    the reference is the oracle of record (bench/README.md has\n"
        "                    the speeds)\n"
        "  --chunk C         chunk size >= 1 (chunk form; default %zu on the reference, %zu\n"
        "                    on the SIMD path, which --form chunk takes by default)\n"
        "  --subchunk c      sub-chunk size >= 1 (default %zu; chunk form)\n"
        "  --scale s         query scale, finite and > 0 (default K^-1/2)\n"
        "  --cu-seqlens F    int64/int32 [N + 1]: packed sequences, as for run (grouped\n"
        "                    value heads are inferred from v's head count)\n"
        "  --precision P     fp64 (default) | fp32: the same backward computed in float32\n"
        "  --help            this text\n"
        "\n"
        "Exit status: 0 ok; 1 a gradient overflowed or an output could not be\n"
        "written; 2 bad input.\n",
        kdalab_mechanism_list(" | ", names, sizeof names), def.chunk,
        kdalab_simd_chunk_opts_default().chunk, def.subchunk);
}

enum {
    OPT_MECHANISM = 256, OPT_FORM, OPT_IMPL, OPT_PRECISION, OPT_CHUNK, OPT_SUBCHUNK, OPT_SCALE,
    OPT_DO, OPT_DHT, OPT_CU_SEQLENS, OPT_INPUT, /* + IN_* */
    OPT_OUT = OPT_INPUT + N_IN /* + OUT_* */
};

static const struct option OPTIONS[] = {
    {"mechanism", required_argument, NULL, OPT_MECHANISM},
    {"form", required_argument, NULL, OPT_FORM},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"chunk", required_argument, NULL, OPT_CHUNK},
    {"subchunk", required_argument, NULL, OPT_SUBCHUNK},
    {"scale", required_argument, NULL, OPT_SCALE},
    {"do", required_argument, NULL, OPT_DO},
    {"dht", required_argument, NULL, OPT_DHT},
    {"cu-seqlens", required_argument, NULL, OPT_CU_SEQLENS},
    CLI_INPUT_OPTIONS(OPT_INPUT),
    {"dq", required_argument, NULL, OPT_OUT + OUT_DQ},
    {"dk", required_argument, NULL, OPT_OUT + OUT_DK},
    {"dv", required_argument, NULL, OPT_OUT + OUT_DV},
    {"dg", required_argument, NULL, OPT_OUT + OUT_DG},
    {"dbeta", required_argument, NULL, OPT_OUT + OUT_DBETA},
    {"dh0", required_argument, NULL, OPT_OUT + OUT_DH0},
    {"da", required_argument, NULL, OPT_OUT + OUT_DA},
    {"db", required_argument, NULL, OPT_OUT + OUT_DB},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_flags(int argc, char **argv, grad_flags *f)
{
    cli_parser p;
    cli_arg got;
    int c;
    cli_begin(&p, argc, argv, OPTIONS);
    while ((c = cli_next(&p, &got)) != CLI_END) {
        const char **slot;
        switch (c) {
        case CLI_ERROR: return EXIT_BAD;
        case CLI_ARG: return cli_fail(EXIT_BAD, "unexpected argument '%s' (see --help)", got.value);
        case 'h': f->help = 1; continue;
        case OPT_MECHANISM: slot = &f->mechanism; break;
        case OPT_FORM: slot = &f->form; break;
        case OPT_IMPL: slot = &f->impl; break;
        case OPT_PRECISION: slot = &f->precision; break;
        case OPT_CHUNK: slot = &f->chunk; break;
        case OPT_SUBCHUNK: slot = &f->subchunk; break;
        case OPT_SCALE: slot = &f->scale; break;
        case OPT_DO: slot = &f->d_o; break;
        case OPT_DHT: slot = &f->dht; break;
        case OPT_CU_SEQLENS: slot = &f->cu_seqlens; break;
        default:
            slot = c >= OPT_OUT ? &f->out[c - OPT_OUT] : &f->input[c - OPT_INPUT];
            break;
        }
        int rc = cli_store(&got, slot);
        if (rc)
            return rc;
    }
    return 0;
}

/* Options, which inputs are needed, and every output path: all before any
 * file is read. */
static int plan(const grad_flags *f, grad_job *job)
{
    int rc;
    char names[256];
    kdalab_mechanism_list(", ", names, sizeof names);
    if (f->mechanism == NULL)
        return cli_fail(EXIT_BAD, "--mechanism is required (%s, attention)", names);
    job->attention = strcmp(f->mechanism, "attention") == 0;
    if (job->attention)
        job->fwd.mech = KDALAB_LINEAR_ATTENTION; /* the same inputs: q, k, v */
    else if (kdalab_mechanism_parse(f->mechanism, &job->fwd.mech) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--mechanism: unknown mechanism '%s' (%s, attention)",
                        f->mechanism, names);
    job->fp32 = f->precision && strcmp(f->precision, "fp32") == 0;
    if (f->precision && !job->fp32 && strcmp(f->precision, "fp64") != 0)
        return cli_fail(EXIT_BAD, "--precision %s: the backward runs in fp64 or fp32",
                        f->precision);
    if (f->form && strcmp(f->form, "chunk") == 0)
        job->chunk_form = 1;
    else if (f->form && strcmp(f->form, "recurrent") != 0)
        return cli_fail(EXIT_BAD, "--form: unknown form '%s' (recurrent, chunk)", f->form);
    if (job->attention && job->chunk_form)
        return cli_fail(EXIT_BAD, "--form chunk: softmax attention has no chunkwise form");
    if (!job->chunk_form && (f->chunk || f->subchunk))
        return cli_fail(EXIT_BAD, "--%s applies to --form chunk only",
                        f->chunk ? "chunk" : "subchunk");
    if (f->impl && strcmp(f->impl, "simd") != 0 && strcmp(f->impl, "reference") != 0)
        return cli_fail(EXIT_BAD, "--impl: unknown implementation '%s' (reference, simd)",
                        f->impl);
    /* no --impl: the SIMD backward for the chunkwise form, the reference otherwise */
    job->simd = f->impl ? strcmp(f->impl, "simd") == 0
                        : job->chunk_form && !job->attention;
    if (job->simd && !job->chunk_form)
        return cli_fail(EXIT_BAD, "--impl simd needs --form chunk (the SIMD backward is "
                                  "chunkwise)");
    job->opts = job->simd ? kdalab_simd_chunk_opts_default() : kdalab_chunk_opts_default();
    if (f->chunk && (rc = cli_parse_size("chunk", f->chunk, 1, &job->opts.chunk)))
        return rc;
    if (f->subchunk && (rc = cli_parse_size("subchunk", f->subchunk, 1, &job->opts.subchunk)))
        return rc;
    if (f->scale) { /* any scale the library accepts, subnormals included */
        if ((rc = cli_parse_scale(f->scale, &job->scale)))
            return rc;
        job->have_scale = 1;
    }
    if (job->attention && (f->input[IN_H0] || f->dht || f->input[IN_G] || f->input[IN_BETA]))
        return cli_fail(EXIT_BAD, "--%s is not used by attention",
                        f->dht ? "dht" : f->input[IN_H0] ? "h0" : f->input[IN_G] ? "g" : "beta");
    if (job->attention && f->cu_seqlens)
        return cli_fail(EXIT_BAD, "--cu-seqlens is not used by attention");
    if ((rc = cli_inputs_plan(&job->fwd, f->input, f->cu_seqlens)))
        return rc;
    if (f->d_o == NULL)
        return cli_fail(EXIT_BAD, "--do is required (the upstream gradient of o, .npy)");
    job->d_o = (cli_input){.flag = "--do", .path = f->d_o};
    job->dht = (cli_input){.flag = "--dht", .path = f->dht};

    /* outputs: at least one; those the mechanism has; no two the same file,
     * none the same file as an input */
    int any = 0;
    for (int i = 0; i < N_OUT; i++) {
        const char *path = f->out[i];
        if (path == NULL)
            continue;
        any = 1;
        int has = i == OUT_DG      ? !job->attention && kdalab_mechanism_g_width(job->fwd.mech, 1)
                  : i == OUT_DBETA ? !job->attention && kdalab_mechanism_has_beta(job->fwd.mech)
                  : i == OUT_DH0   ? !job->attention
                  : i == OUT_DA || i == OUT_DB
                      ? !job->attention && kdalab_mechanism_has_ab(job->fwd.mech)
                      : 1;
        if (!has)
            return cli_fail(EXIT_BAD, "%s: %s has no %s", OUT_FLAG[i], f->mechanism,
                            OUT_FLAG[i] + 2);
        for (int j = 0; j < i; j++)
            if (f->out[j] && cli_same_output(path, f->out[j]))
                return cli_fail(EXIT_BAD, "%s and %s name the same file '%s'", OUT_FLAG[j],
                                OUT_FLAG[i], path);
        for (int j = 0; j < N_IN; j++)
            if (f->input[j] && cli_same_output(path, f->input[j]))
                return cli_fail(EXIT_BAD, "%s '%s' is the input %s: refusing to overwrite it",
                                OUT_FLAG[i], path, IN_FLAG[j]);
        if ((f->d_o && cli_same_output(path, f->d_o)) ||
            (f->dht && cli_same_output(path, f->dht)) ||
            (f->cu_seqlens && cli_same_output(path, f->cu_seqlens)))
            return cli_fail(EXIT_BAD, "%s '%s' is an input: refusing to overwrite it",
                            OUT_FLAG[i], path);
        if ((rc = cli_check_output_path(OUT_FLAG[i], path)))
            return rc;
    }
    if (!any)
        return cli_fail(EXIT_BAD, "no output asked for (--dq, --dk, --dv, --dg, --dbeta, --dh0, "
                                  "--da, --db)");
    return 0;
}

/* The forward inputs, then d_o [B,T,H,V] and dht [B,H,K,V] against them. */
static int read_all(grad_job *job)
{
    int rc = cli_inputs_read(&job->fwd);
    if (rc)
        return rc;
    const kdalab_dims *d = &job->fwd.dims;
    if (job->attention && CLI_IS_BATCH(&job->fwd))
        return cli_fail(EXIT_BAD, "--v: attention takes v with q's %zu heads, not %zu", d->H,
                        job->fwd.HV);
    const size_t o_shape[4] = {d->B, d->T, job->fwd.HV, d->V};
    const size_t state[4] = {job->fwd.N, job->fwd.HV, d->K, d->V};
    if ((rc = cli_read_input(&job->d_o)))
        return rc;
    if (!cli_shape_is(&job->d_o.a, 4, o_shape))
        return cli_shape_mismatch(&job->d_o, "(B, T, H, V) like o", 4, o_shape,
                                  &job->fwd.in[IN_Q]);
    if ((rc = cli_check_values(&job->d_o, KDALAB_RULE_FINITE, "d_o")))
        return rc;
    if (job->dht.path) {
        if ((rc = cli_read_input(&job->dht)))
            return rc;
        if (!cli_shape_is(&job->dht.a, 4, state))
            return cli_shape_mismatch(&job->dht, "(B, H, K, V) like ht", 4, state,
                                      &job->fwd.in[IN_Q]);
        if ((rc = cli_check_values(&job->dht, KDALAB_RULE_FINITE, "dht")))
            return rc;
    }
    if (!job->have_scale)
        job->scale = kdalab_default_scale(d->K);
    return 0;
}

/* The float32 backward: float32 copies in, gradients (nout elements each, by
 * OUT_*) widened back to float64. */
static int compute_f32(grad_job *job, const size_t nout[N_OUT])
{
    const kdalab_dims *d = &job->fwd.dims;
    float *f[N_IN + 2] = {0}, *gf[N_OUT] = {0}; /* the inputs, then d_o and dht */
    int rc = 0;
    for (int i = 0; i < N_IN && rc == 0; i++)
        rc = cli_input_to_f32(&job->fwd.in[i], IN_RULE[i], IN_NAME[i], &f[i]);
    if (rc == 0)
        rc = cli_input_to_f32(&job->d_o, KDALAB_RULE_FINITE, "d_o", &f[N_IN]);
    if (rc == 0)
        rc = cli_input_to_f32(&job->dht, KDALAB_RULE_FINITE, "dht", &f[N_IN + 1]);
    for (int i = 0; i < N_OUT && rc == 0; i++)
        if (!(gf[i] = malloc((nout[i] ? nout[i] : 1) * sizeof(float))))
            rc = cli_fail(EXIT_FAIL, "out of memory for the float32 gradients");
    kdalab_status s = KDALAB_OK;
    if (rc == 0 && job->attention)
        s = kdalab_attention_bwd_f32(d, (float)job->scale, f[IN_Q], f[IN_K], f[IN_V], f[N_IN],
                                     gf[OUT_DQ], gf[OUT_DK], gf[OUT_DV]);
    else if (rc == 0) {
        const kdalab_call c = cli_call(&job->fwd, job->scale, job->chunk_form, job->simd,
                                       &job->opts, NULL);
        const kdalab_tensors_f32 t = {
            .q = f[IN_Q], .k = f[IN_K], .v = f[IN_V], .g = f[IN_G], .beta = f[IN_BETA],
            .h0 = f[IN_H0], .d_o = f[N_IN], .dht = f[N_IN + 1], .dq = gf[OUT_DQ],
            .dk = gf[OUT_DK], .dv = gf[OUT_DV], .dg = gf[OUT_DG], .dbeta = gf[OUT_DBETA],
            .dh0 = gf[OUT_DH0], .a = f[IN_A], .b = f[IN_B], .da = gf[OUT_DA],
            .db = gf[OUT_DB]};
        s = kdalab_run_bwd_f32(&c, &t);
    }
    if (rc == 0 && s == KDALAB_ERANGE)
        rc = cli_fail(EXIT_FAIL, "a gradient overflowed in float32 (%s); nothing written",
                      kdalab_last_error());
    else if (rc == 0 && s != KDALAB_OK)
        rc = cli_fail(cli_exit_for(s), "%s: in float32, %s", kdalab_strerror(s),
                      kdalab_last_error());
    for (int i = 0; rc == 0 && i < N_OUT; i++)
        for (size_t j = 0; j < nout[i]; j++)
            job->grad[i][j] = gf[i][j];
    for (int i = 0; i < N_IN + 2; i++)
        free(f[i]);
    for (int i = 0; i < N_OUT; i++)
        free(gf[i]);
    return rc;
}

static int compute(grad_job *job)
{
    const kdalab_dims *d = &job->fwd.dims;
    const size_t n[N_OUT] = {job->fwd.in[IN_Q].a.size,    job->fwd.in[IN_Q].a.size,
                             job->fwd.in[IN_V].a.size,    job->fwd.in[IN_G].a.size,
                             job->fwd.in[IN_BETA].a.size, job->fwd.n_state,
                             job->fwd.in[IN_A].a.size,    job->fwd.in[IN_B].a.size};
    for (int i = 0; i < N_OUT; i++)
        if (!(job->grad[i] = malloc((n[i] ? n[i] : 1) * sizeof(double))))
            return cli_fail(EXIT_FAIL, "out of memory for the gradients");
    if (job->fp32)
        return compute_f32(job, n);
    const double *x[N_IN];
    for (int i = 0; i < N_IN; i++)
        x[i] = job->fwd.in[i].path ? job->fwd.in[i].a.data : NULL;
    double **gr = job->grad;
    const double *dht = job->dht.path ? job->dht.a.data : NULL;
    kdalab_status s;
    if (job->attention)
        s = kdalab_attention_bwd_f64(d, job->scale, x[IN_Q], x[IN_K], x[IN_V], job->d_o.a.data,
                                     gr[OUT_DQ], gr[OUT_DK], gr[OUT_DV]);
    else {
        const kdalab_call c = cli_call(&job->fwd, job->scale, job->chunk_form, job->simd,
                                       &job->opts, NULL);
        const kdalab_tensors_f64 t = {
            .q = x[IN_Q], .k = x[IN_K], .v = x[IN_V], .g = x[IN_G], .beta = x[IN_BETA],
            .h0 = x[IN_H0], .d_o = job->d_o.a.data, .dht = dht, .dq = gr[OUT_DQ],
            .dk = gr[OUT_DK], .dv = gr[OUT_DV], .dg = gr[OUT_DG], .dbeta = gr[OUT_DBETA],
            .dh0 = gr[OUT_DH0], .a = x[IN_A], .b = x[IN_B], .da = gr[OUT_DA],
            .db = gr[OUT_DB]};
        s = kdalab_run_bwd_f64(&c, &t);
    }
    if (s == KDALAB_ERANGE)
        return cli_fail(EXIT_FAIL, "a gradient overflowed (%s); nothing written",
                        kdalab_last_error());
    if (s != KDALAB_OK)
        return cli_fail(cli_exit_for(s), "%s: %s", kdalab_strerror(s), kdalab_last_error());
    return 0;
}

static int write_grads(const grad_flags *f, const grad_job *job)
{
    const kdalab_dims *d = &job->fwd.dims;
    const int src[N_OUT] = {IN_Q, IN_K, IN_V, IN_G, IN_BETA, -1, IN_A, IN_B};
    cli_output out[N_OUT];
    size_t n = 0;
    for (int i = 0; i < N_OUT; i++) {
        if (f->out[i] == NULL)
            continue;
        cli_output *o = &out[n++];
        o->flag = OUT_FLAG[i];
        o->path = f->out[i];
        o->data = job->grad[i];
        if (src[i] >= 0) { /* the layout of the matching input */
            const kdalab_array *a = &job->fwd.in[src[i]].a;
            o->ndim = a->ndim;
            memcpy(o->shape, a->shape, sizeof o->shape);
        } else {
            o->ndim = 4;
            const size_t state[4] = {job->fwd.N, job->fwd.HV, d->K, d->V};
            memcpy(o->shape, state, sizeof state);
        }
    }
    return cli_write_all(n, out);
}

int cmd_grad(int argc, char **argv)
{
    cli_who = "kdalab grad";
    grad_flags flags = {0};
    grad_job job = {0};
    int rc = parse_flags(argc, argv, &flags);
    if (rc)
        return rc;
    if (flags.help) {
        print_help();
        return 0;
    }
    if ((rc = plan(&flags, &job)) == 0 && (rc = read_all(&job)) == 0 &&
        (rc = compute(&job)) == 0)
        rc = write_grads(&flags, &job);
    cli_inputs_free(&job.fwd);
    kdalab_array_free(&job.d_o.a);
    kdalab_array_free(&job.dht.a);
    for (int i = 0; i < N_OUT; i++)
        free(job.grad[i]);
    return rc;
}
