/*
 * tools/kdalab/run.c — `kdalab run`: run one mechanism of the lineage on .npy
 * tensors in fla's layout (REFERENCE.md, "Shapes and names") and write the
 * output o and the final state ht (and the state entering each chunk, h) as
 * float64 .npy.
 *
 * defines: cmd_run (declared in cli.h)
 *
 * A run goes in steps, one function each:
 *   parse_flags     the command line, as text (getopt_long through cli_next)
 *   plan_options,   what to compute and where the results go; every option
 *   plan_files      and output path is checked before any file is read
 *   read_inputs     read the files, check their shapes against q's and v's,
 *                   and their values by the library's rules (inputs.c)
 *   compute         the float64 reference, or one float32 form (reference or
 *                   SIMD) on float32 copies of the inputs
 *   write_outputs   o, ht and h, all written or none (cli_write_all: each to a
 *                   temporary file, renamed into place once all are complete)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* The command line of one run, as given (NULL: not given). */
typedef struct {
    const char *mechanism, *form, *precision, *impl, *chunk, *subchunk, *decay, *scale;
    const char *input[N_IN]; /* paths, by IN_* */
    const char *o, *ht, *h, *cu_seqlens, *repeat;
    int timing, help;
} run_flags;

/* One run: what to compute, on what, and what came of it. */
typedef struct {
    kdalab_mechanism mech;
    int chunk_form;         /* --form chunk, else recurrent                    */
    int fp64;               /* --precision fp64, else float32 (opts.precision) */
    int simd;               /* the SIMD path runs it (--impl, or its default)  */
    kdalab_chunk_opts opts; /* kdalab_chunk_opts_default(), then the flags     */
    int have_scale;         /* --scale given; else K^-1/2 once K is known      */
    double scale;
    const char *o_path, *ht_path, *h_path;
    int timing;

    cli_inputs fwd;              /* q, k, v, beta, g, h0 and the dims they fix */
    size_t n_o;                  /* elements of o (ht: fwd.n_state)       */
    size_t nt, n_h;              /* --h: chunks NT and the elements of h  */
    double *o, *ht, *h;          /* the outputs, float64 (h: --h only)    */
    float *fin[N_IN], *fo, *fht, *fh; /* float32 copies (float32 runs only) */
    kdalab_status computed;      /* KDALAB_OK or KDALAB_ERANGE            */
    kdalab_report report;        /* filled by the chunkwise forms         */
    kdalab_workspace *work;      /* the SIMD path's scratch, kept between --time's calls */
    double seconds;              /* --time: the best call, in seconds     */
    double median_seconds;       /* --time: the median call               */
    size_t repeat;               /* --repeat: timed calls after a warm-up */
} run_job;

static void print_help(void)
{
    kdalab_chunk_opts def = kdalab_chunk_opts_default();
    char names[256];
    printf(
        "usage: kdalab run --mechanism M --q Q.npy --k K.npy --v V.npy [--beta B.npy]\n"
        "                  [--g G.npy] [--a A.npy --b B.npy] [--h0 H0.npy] --o O.npy\n"
        "                  [--ht HT.npy] [--h H.npy] [options]\n"
        "\n"
        "Run one mechanism of the lineage on your tensors and write its output o and\n"
        "final state ht as float64 .npy: an independent answer to check a kernel against.\n"
        "Inputs are .npy files (f8, f4 or f2, either byte order; C or Fortran order) in\n"
        "flash-linear-attention's layout:\n"
        "  q, k  [B, T, H, K]      v     [B, T, H, V]     beta  [B, T, H], each in [0, 2]\n"
        "  g     [B, T, H] (a decay per head) or [B, T, H, K] (per key channel):\n"
        "        log-decay, every g <= 0 (kdalab info --mechanisms says which takes which)\n"
        "  h0    [B, H, K, V] initial state (default zero)\n"
        "  o     [B, T, H, V] output          ht    [B, H, K, V] final state\n"
        "  h     [B, NT, H, K, V] the state entering each chunk (--h; NT = ceil(T / C),\n"
        "        C = --chunk, or 64 without it)\n"
        "T = 0 is legal (o is empty, ht = h0). Inputs must be finite. With --cu-seqlens\n"
        "(N packed sequences, B = 1) h0 and ht are [N, H, K, V]; with grouped value heads\n"
        "v, beta, g, h0, o and ht have HV heads where q and k have H (see below).\n"
        "\n"
        "  --mechanism M     %s\n"
        "                    (required)\n"
        "  --form F          recurrent (default) | chunk\n"
        "  --precision P     fp64 (default) | fp32 | bf16 | fp16 (bf16/fp16: emulated\n"
        "                    storage rounding, chunk form only)\n"
        "  --impl I          reference | simd (default: simd for --form chunk with the\n"
        "                    safe decay, reference otherwise). Both agree to ~1e-15 in\n"
        "                    fp64; their bf16/fp16 emulations round the same inputs\n"
        "                    and their errors agree within ~10%%. The reference is the\n"
        "                    oracle of record, simd the fast path (in float32 the\n"
        "                    recurrent form repeats its decode step; fp64 simd needs\n"
        "                    --form chunk; asked for another decay mode it runs the\n"
        "                    reference, with a note on stderr)\n"
        "  --chunk C         chunk size, >= 1 (chunk form; default %zu on the reference,\n"
        "                    %zu on the SIMD path, which --form chunk takes by default)\n"
        "  --subchunk c      sub-chunk size >= 1, or 'none' for one sub-chunk per chunk\n"
        "                    (default %zu; chunk form, safe and anchored decay)\n"
        "  --decay D         safe | pairwise | rescaled | anchored (default %s; chunk form)\n"
        "  --scale s         query scale, finite and > 0 (default K^-1/2)\n"
        "  --beta, --g       required by the mechanisms that use them, refused otherwise\n"
        "  --a, --b          [B, T, H, K] the low-rank term b a^T of dplr's transition\n"
        "                    (required by dplr, refused otherwise; dplr's SIMD path\n"
        "                    is the chunkwise form)\n"
        "  --cu-seqlens F    int64/int32 [N + 1]: N sequences packed along T (B = 1);\n"
        "                    h0 and ht are then [N, H, K, V] (fla's varlen)\n"
        "  (grouped value heads: v, beta, g, h0 with HV = G * H heads, value head j\n"
        "   reading q/k head j / G, are inferred from v's head count)\n"
        "  --time            time the computation alone (not the file I/O): one warm-up\n"
        "                    call, then --repeat timed calls; one line on stderr,\n"
        "                    'compute_seconds=BEST head_tokens_per_s=BEST median_seconds=M\n"
        "                    median_head_tokens_per_s=M repeat=N'\n"
        "  --repeat N        timed calls for --time, 1..64 (default 5)\n"
        "  --h H.npy         also write h, the state entering each chunk of --chunk\n"
        "                    positions (fla's return_intermediate_states; chunk 0's\n"
        "                    is h0): [B, NT, H, K, V], or [1, NT, H, K, V] with NT\n"
        "                    summing every sequence's chunks under --cu-seqlens.\n"
        "                    Without --chunk: chunks of fla's 64, while the run keeps\n"
        "                    its own chunk (o is the same with --h as without).\n"
        "                    The SIMD chunkwise form writes it: needs --form chunk,\n"
        "                    the safe decay and the SIMD path (their defaults)\n"
        "  --help            this text\n"
        "\n"
        "Exit status: 0 ok; 1 the computation overflowed (outputs written, non-finite\n"
        "values counted on stderr) or an output could not be written; 2 bad input.\n",
        kdalab_mechanism_list(" | ", names, sizeof names), def.chunk, kdalab_simd_chunk_opts_default().chunk, def.subchunk,
        kdalab_decay_name(def.decay));
}

/* ---- step 1: the command line -------------------------------------------- */

enum {
    OPT_MECHANISM = 256, OPT_FORM, OPT_PRECISION, OPT_IMPL, OPT_CHUNK, OPT_SUBCHUNK,
    OPT_DECAY, OPT_SCALE, OPT_O, OPT_HT, OPT_H, OPT_TIME, OPT_CU_SEQLENS, OPT_REPEAT,
    OPT_INPUT /* + IN_*: --q, --k, --v, --beta, --g, --h0 */
};

static const struct option OPTIONS[] = {
    {"mechanism", required_argument, NULL, OPT_MECHANISM},
    {"form", required_argument, NULL, OPT_FORM},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"chunk", required_argument, NULL, OPT_CHUNK},
    {"subchunk", required_argument, NULL, OPT_SUBCHUNK},
    {"decay", required_argument, NULL, OPT_DECAY},
    {"scale", required_argument, NULL, OPT_SCALE},
    CLI_INPUT_OPTIONS(OPT_INPUT),
    {"o", required_argument, NULL, OPT_O},
    {"ht", required_argument, NULL, OPT_HT},
    {"h", required_argument, NULL, OPT_H},
    {"time", no_argument, NULL, OPT_TIME},
    {"cu-seqlens", required_argument, NULL, OPT_CU_SEQLENS},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_flags(int argc, char **argv, run_flags *f)
{
    cli_parser p;
    cli_arg got;
    int c;
    cli_begin(&p, argc, argv, OPTIONS);
    while ((c = cli_next(&p, &got)) != CLI_END) {
        const char **slot = NULL;
        switch (c) {
        case CLI_ERROR: return EXIT_BAD;
        case CLI_ARG: return cli_fail(EXIT_BAD, "unexpected argument '%s' (see --help)", got.value);
        case 'h': f->help = 1; continue;
        case OPT_TIME: f->timing = 1; continue;
        case OPT_MECHANISM: slot = &f->mechanism; break;
        case OPT_FORM: slot = &f->form; break;
        case OPT_PRECISION: slot = &f->precision; break;
        case OPT_IMPL: slot = &f->impl; break;
        case OPT_CHUNK: slot = &f->chunk; break;
        case OPT_SUBCHUNK: slot = &f->subchunk; break;
        case OPT_DECAY: slot = &f->decay; break;
        case OPT_SCALE: slot = &f->scale; break;
        case OPT_O: slot = &f->o; break;
        case OPT_HT: slot = &f->ht; break;
        case OPT_H: slot = &f->h; break;
        case OPT_CU_SEQLENS: slot = &f->cu_seqlens; break;
        case OPT_REPEAT: slot = &f->repeat; break;
        default: slot = &f->input[c - OPT_INPUT]; break; /* OPT_INPUT + IN_* */
        }
        int rc = cli_store(&got, slot);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- step 2: what to compute and where it goes --------------------------- */

static int plan_options(const run_flags *f, run_job *job)
{
    int rc;
    char names[256];
    kdalab_mechanism_list(", ", names, sizeof names);
    if (f->mechanism == NULL)
        return cli_fail(EXIT_BAD, "--mechanism is required (%s)", names);
    if (kdalab_mechanism_parse(f->mechanism, &job->mech) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--mechanism: unknown mechanism '%s' (%s)", f->mechanism,
                        names);
    if (f->form && strcmp(f->form, "chunk") == 0)
        job->chunk_form = 1;
    else if (f->form && strcmp(f->form, "recurrent") != 0)
        return cli_fail(EXIT_BAD, "--form: unknown form '%s' (recurrent, chunk)", f->form);

    /* no chunk option at all: exactly the library's default */
    job->opts = kdalab_chunk_opts_default();
    job->fp64 = f->precision == NULL || strcmp(f->precision, "fp64") == 0;
    if (!job->fp64) {
        if (strcmp(f->precision, "fp32") == 0)
            job->opts.precision = KDALAB_FP32;
        else if (strcmp(f->precision, "bf16") == 0)
            job->opts.precision = KDALAB_BF16;
        else if (strcmp(f->precision, "fp16") == 0)
            job->opts.precision = KDALAB_FP16;
        else
            return cli_fail(EXIT_BAD, "--precision: unknown precision '%s' (fp64, fp32, bf16, "
                                      "fp16)",
                            f->precision);
    }
    if (f->impl && strcmp(f->impl, "simd") != 0 && strcmp(f->impl, "reference") != 0)
        return cli_fail(EXIT_BAD, "--impl: unknown implementation '%s' (reference, simd)",
                        f->impl);
    if (!job->fp64 && job->opts.precision != KDALAB_FP32 && !job->chunk_form)
        return cli_fail(EXIT_BAD, "--precision %s needs --form chunk (emulated low-precision "
                                  "storage exists only in the chunkwise form)",
                        f->precision);
    if (!job->chunk_form && (f->chunk || f->subchunk || f->decay))
        return cli_fail(EXIT_BAD, "--%s applies to --form chunk only",
                        f->chunk ? "chunk" : f->subchunk ? "subchunk" : "decay");
    if (f->chunk && (rc = cli_parse_size("chunk", f->chunk, 1, &job->opts.chunk)))
        return rc;
    if (f->subchunk && strcmp(f->subchunk, "none") == 0)
        job->opts.subchunk = job->opts.chunk; /* one sub-chunk spans the chunk */
    else if (f->subchunk && (rc = cli_parse_size("subchunk", f->subchunk, 1, &job->opts.subchunk)))
        return rc;
    if (f->decay && kdalab_decay_parse(f->decay, &job->opts.decay) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--decay: unknown decay mode '%s' (safe, pairwise, rescaled, "
                                  "anchored)",
                        f->decay);
    /* no --impl: the SIMD path wherever its kernels run the call (the chunkwise
     * form, safe decay; any storage), the reference otherwise */
    job->simd = f->impl ? strcmp(f->impl, "simd") == 0
                        : job->chunk_form && job->opts.decay == KDALAB_DECAY_SAFE;
    if (job->simd && !f->chunk) { /* as with opts == NULL; h at fla's chunk of 64 */
        job->opts.chunk = kdalab_simd_chunk_opts_default().chunk;
        job->opts.h_chunk = f->h ? 64 : 0;
    }
    if (f->scale) { /* any scale the library accepts, subnormals included */
        if ((rc = cli_parse_scale(f->scale, &job->scale)))
            return rc;
        job->have_scale = 1;
    }
    if (job->simd && !job->chunk_form && kdalab_mechanism_has_ab(job->mech))
        return cli_fail(EXIT_BAD, "--impl simd: %s's SIMD path is the chunkwise form (add "
                                  "--form chunk, or --impl reference for the recurrence)",
                        kdalab_mechanism_name(job->mech));
    if (job->simd && job->fp64 && !job->chunk_form)
        return cli_fail(EXIT_BAD, "--impl simd with --precision fp64 needs --form chunk (the "
                                  "float64 SIMD path has no recurrent form); or add "
                                  "--precision fp32");
    if (f->h && !(job->chunk_form && job->simd && job->opts.decay == KDALAB_DECAY_SAFE))
        return cli_fail(EXIT_BAD, "--h: the state entering each chunk is written by the SIMD "
                                  "chunkwise form only (--form chunk, the safe decay, --impl "
                                  "simd: the defaults of --form chunk)");
    job->timing = f->timing;
    job->repeat = 5;
    if (f->repeat && !f->timing)
        return cli_fail(EXIT_BAD, "--repeat applies to --time only");
    if (f->repeat && (rc = cli_parse_size("repeat", f->repeat, 1, &job->repeat)))
        return rc;
    if (job->repeat > 64)
        return cli_fail(EXIT_BAD, "--repeat %zu: at most 64 timed calls", job->repeat);
    return 0;
}

/* Which inputs the mechanism needs, and whether the outputs can be written:
 * checked for every output before computing, so a run does not replace --o
 * and then fail on --ht. */
static int plan_files(const run_flags *f, run_job *job)
{
    job->fwd.mech = job->mech;
    int rc = cli_inputs_plan(&job->fwd, (const char *const *)f->input, f->cu_seqlens);
    if (rc)
        return rc;
    if (f->o == NULL)
        return cli_fail(EXIT_BAD, "--o is required (where to write the output, .npy)");
    const char *outs[3] = {f->o, f->ht, f->h}, *flag[3] = {"o", "ht", "h"};
    for (int w = 0; w < 3; w++) /* no two outputs name one file */
        for (int u = w + 1; u < 3; u++)
            if (outs[w] && outs[u] && cli_same_output(outs[w], outs[u]))
                return cli_fail(EXIT_BAD, "--%s and --%s name the same file '%s'", flag[w],
                                flag[u], outs[u]);
    for (int i = 0; i < N_IN; i++) /* an output never replaces an input */
        for (int w = 0; w < 3; w++)
            if (outs[w] && f->input[i] && cli_same_output(outs[w], f->input[i]))
                return cli_fail(EXIT_BAD, "--%s '%s' is the input %s: refusing to overwrite it",
                                flag[w], outs[w], IN_FLAG[i]);
    for (int w = 0; w < 3 && f->cu_seqlens; w++)
        if (outs[w] && cli_same_output(outs[w], f->cu_seqlens))
            return cli_fail(EXIT_BAD, "--%s '%s' is the input --cu-seqlens: refusing to "
                                      "overwrite it",
                            flag[w], outs[w]);
    for (int w = 0; w < 3; w++) {
        char which[8];
        snprintf(which, sizeof which, "--%s", flag[w]);
        if (outs[w] && (rc = cli_check_output_path(which, outs[w])))
            return rc;
    }
    job->o_path = f->o;
    job->ht_path = f->ht;
    job->h_path = f->h;
    return 0;
}

/* ---- step 3: read and check the inputs ----------------------------------- */

static int read_inputs(run_job *job)
{
    int rc = cli_inputs_read(&job->fwd);
    if (rc == 0 && !job->have_scale)
        job->scale = kdalab_default_scale(job->fwd.dims.K);
    return rc;
}

/* ---- step 4: compute ----------------------------------------------------- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/*
 * Run the form once; with --time, once to warm up (not counted: it pays for
 * the first writes to fresh output memory), then --repeat times, each timed:
 * job->seconds is the best, job->median_seconds the median.
 */
static kdalab_status timed(run_job *job, kdalab_status (*call)(run_job *))
{
    if (!job->timing)
        return call(job);
    kdalab_status s = call(job);
    double t[64];
    size_t n = 0, want = job->repeat < 64 ? job->repeat : 64;
    while (n < want && (s == KDALAB_OK || s == KDALAB_ERANGE)) {
        double t0 = now_seconds();
        s = call(job);
        t[n++] = now_seconds() - t0;
    }
    if (n == 0) { /* the warm-up call failed: nothing was timed */
        job->seconds = job->median_seconds = 0;
        return s;
    }
    qsort(t, n, sizeof t[0], cmp_double);
    job->seconds = t[0];
    job->median_seconds = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return s;
}

/* One call of the chosen float32 form on the float32 copies. */
static kdalab_status call_f32(run_job *job)
{
    float *const *x = job->fin;
    const kdalab_call c =
        cli_call(&job->fwd, job->scale, job->chunk_form, job->simd, &job->opts, job->work);
    const kdalab_tensors_f32 t = {.q = x[IN_Q], .k = x[IN_K], .v = x[IN_V], .g = x[IN_G],
                                  .beta = x[IN_BETA], .h0 = x[IN_H0], .a = x[IN_A],
                                  .b = x[IN_B], .o = job->fo, .ht = job->fht, .h = job->fh};
    return kdalab_run_f32(&c, &t, &job->report);
}

/* The float32 family: convert, run the chosen form, widen the results. */
static int compute_f32(run_job *job)
{
    int rc;
    for (int i = 0; i < N_IN; i++)
        if ((rc = cli_input_to_f32(&job->fwd.in[i], IN_RULE[i], IN_NAME[i], &job->fin[i])))
            return rc;
    job->fo = malloc(job->n_o ? job->n_o * sizeof *job->fo : 1);
    job->fht = malloc(job->fwd.n_state * sizeof *job->fht);
    if (job->h_path)
        job->fh = malloc(job->n_h ? job->n_h * sizeof *job->fh : 1);
    if (job->fo == NULL || job->fht == NULL || (job->h_path && job->fh == NULL))
        return cli_fail(EXIT_FAIL, "out of memory for the outputs");
    float scale = (float)job->scale;
    if (kdalab_check_scale(scale) != KDALAB_OK)
        return cli_fail(EXIT_BAD, "--scale: %g is not a positive float32", job->scale);
    if (job->simd && job->chunk_form && job->opts.decay != KDALAB_DECAY_SAFE)
        /* kdalab_run_f32 hands these to the reference: say so, or --time
         * would pass the reference's speed off as the SIMD path's */
        fprintf(stderr, "kdalab run: note: the SIMD path's kernels have the safe decay mode "
                        "only; for the %s mode the float32 reference computed this run\n",
                kdalab_decay_name(job->opts.decay));
    kdalab_status s = timed(job, call_f32);
    job->computed = s;
    if (s == KDALAB_OK || s == KDALAB_ERANGE) {
        for (size_t i = 0; i < job->n_o; i++)
            job->o[i] = job->fo[i];
        for (size_t i = 0; i < job->fwd.n_state; i++)
            job->ht[i] = job->fht[i];
        for (size_t i = 0; job->h && i < job->n_h; i++)
            job->h[i] = job->fh[i];
    }
    return 0;
}

/* One call of the chosen float64 form. */
static kdalab_status call_f64(run_job *job)
{
    const double *x[N_IN];
    for (int i = 0; i < N_IN; i++)
        x[i] = job->fwd.in[i].path ? job->fwd.in[i].a.data : NULL;
    const kdalab_call c =
        cli_call(&job->fwd, job->scale, job->chunk_form, job->simd, &job->opts, job->work);
    const kdalab_tensors_f64 t = {.q = x[IN_Q], .k = x[IN_K], .v = x[IN_V], .g = x[IN_G],
                                  .beta = x[IN_BETA], .h0 = x[IN_H0], .a = x[IN_A],
                                  .b = x[IN_B], .o = job->o, .ht = job->ht, .h = job->h};
    return kdalab_run_f64(&c, &t, &job->report);
}

static int compute(run_job *job)
{
    const kdalab_dims *d = &job->fwd.dims;
    job->n_o = job->fwd.in[IN_V].a.size;
    job->o = malloc(job->n_o ? job->n_o * sizeof *job->o : 1);
    job->ht = malloc(job->fwd.n_state * sizeof *job->ht);
    if (job->o == NULL || job->ht == NULL)
        return cli_fail(EXIT_FAIL, "out of memory for the outputs");
    if (job->h_path) { /* h [B, NT, HV, K, V]: NT from the call's chunks */
        const kdalab_call c = cli_call(&job->fwd, 1.0, 1, 1, &job->opts, NULL);
        job->nt = kdalab_call_n_chunks(&c);
        size_t kv = d->K * d->V; /* fits: n_state = N HV K V was checked */
        if (job->nt && (kv * job->fwd.HV > SIZE_MAX / sizeof(double) / job->nt / d->B))
            return cli_fail(EXIT_BAD, "--h: [%zu, %zu, %zu, %zu, %zu] is too large", d->B,
                            job->nt, job->fwd.HV, d->K, d->V);
        job->n_h = d->B * job->nt * job->fwd.HV * kv;
        job->h = malloc(job->n_h ? job->n_h * sizeof *job->h : 1);
        if (job->h == NULL)
            return cli_fail(EXIT_FAIL, "out of memory for h (%zu values)", job->n_h);
    }

    if (job->simd && (job->work = kdalab_workspace_new()) == NULL)
        return cli_fail(EXIT_FAIL, "out of memory for the SIMD path's workspace");
    if (job->fp64) {
        if (job->simd && job->opts.decay != KDALAB_DECAY_SAFE)
            fprintf(stderr, "kdalab run: note: the float64 SIMD path has kernels for the safe "
                            "decay mode only; the float64 reference computed this run\n");
        job->computed = timed(job, call_f64);
    } else {
        int rc = compute_f32(job);
        if (rc)
            return rc;
    }
    kdalab_status s = job->computed;
    if (s != KDALAB_OK && s != KDALAB_ERANGE)
        return cli_fail(cli_exit_for(s), "%s: %s", kdalab_strerror(s), kdalab_last_error());
    if (job->timing) {
        double head_tokens = (double)d->B * (double)job->fwd.HV * (double)d->T;
        fprintf(stderr,
                "compute_seconds=%.9f head_tokens_per_s=%.6g median_seconds=%.9f "
                "median_head_tokens_per_s=%.6g repeat=%zu\n",
                job->seconds, job->seconds > 0 ? head_tokens / job->seconds : 0.0,
                job->median_seconds,
                job->median_seconds > 0 ? head_tokens / job->median_seconds : 0.0, job->repeat);
    }
    return 0;
}

/* ---- step 5: the outputs ------------------------------------------------- */

static size_t count_nonfinite(const double *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

static int write_outputs(const run_job *job)
{
    const kdalab_dims *d = &job->fwd.dims;
    const size_t o_shape[4] = {d->B, d->T, job->fwd.HV, d->V};
    const size_t state[4] = {job->fwd.N, job->fwd.HV, d->K, d->V};
    const size_t h_shape[5] = {d->B, job->nt, job->fwd.HV, d->K, d->V};
    cli_output out[3] = {{"--o", job->o_path, job->o, 4, {0}}};
    memcpy(out[0].shape, o_shape, sizeof o_shape);
    size_t n = 1;
    if (job->ht_path) {
        out[n] = (cli_output){"--ht", job->ht_path, job->ht, 4, {0}};
        memcpy(out[n++].shape, state, sizeof state);
    }
    if (job->h_path) {
        out[n] = (cli_output){"--h", job->h_path, job->h, 5, {0}};
        memcpy(out[n++].shape, h_shape, sizeof h_shape);
    }
    int rc = cli_write_all(n, out); /* all, or none */
    if (rc)
        return rc;
    if (job->computed != KDALAB_ERANGE)
        return 0;
    /* counted here, so every form and path reports the same way */
    size_t bad_o = count_nonfinite(job->o, job->n_o);
    size_t bad_ht = count_nonfinite(job->ht, job->fwd.n_state);
    if (job->chunk_form && kdalab_mechanism_g_shape(job->mech) == KDALAB_G_PER_KEY &&
        !job->simd)
        return cli_fail(EXIT_FAIL,
                        "the computation overflowed (decay mode %s, largest exponent formed "
                        "%g): %zu non-finite values in o, %zu in ht; outputs written for study",
                        kdalab_decay_name(job->opts.decay), job->report.max_exponent, bad_o,
                        bad_ht);
    if (job->h_path)
        return cli_fail(EXIT_FAIL,
                        "the computation overflowed: %zu non-finite values in o, %zu in ht, "
                        "%zu in h; outputs written for study",
                        bad_o, bad_ht, count_nonfinite(job->h, job->n_h));
    return cli_fail(EXIT_FAIL,
                    "the computation overflowed: %zu non-finite values in o, %zu in ht; "
                    "outputs written for study",
                    bad_o, bad_ht);
}

/* ---- the subcommand ------------------------------------------------------ */

static void free_job(run_job *job)
{
    cli_inputs_free(&job->fwd);
    for (int i = 0; i < N_IN; i++)
        free(job->fin[i]);
    free(job->o);
    free(job->ht);
    free(job->h);
    free(job->fo);
    free(job->fht);
    free(job->fh);
    kdalab_workspace_free(job->work);
}

int cmd_run(int argc, char **argv)
{
    cli_who = "kdalab run";
    run_flags flags = {0};
    run_job job = {0};
    int rc = parse_flags(argc, argv, &flags);
    if (rc)
        return rc;
    if (flags.help) {
        print_help();
        return 0;
    }
    if ((rc = plan_options(&flags, &job)) || (rc = plan_files(&flags, &job)))
        return rc;
    if ((rc = read_inputs(&job)) == 0 && (rc = compute(&job)) == 0)
        rc = write_outputs(&job);
    free_job(&job);
    return rc;
}
