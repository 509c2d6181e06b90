/*
 * lib/simd/dispatch.c — the public entry points of the optimized float32 path
 * (kdalab_simd_*, see lib/kdalab.h): the one place that picks the
 * instruction-set level, validates the call (with the library's checks,
 * lib/core/rules.c) and spreads the heads over OpenMP threads.
 */
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "simd_internal.h"

/* ---------------------------------------------------------------------------- */
/* Levels                                                                       */
/* ---------------------------------------------------------------------------- */

static const char *const level_names[] = {"scalar", "avx2", "avx512", "auto"};

const char *kdalab_simd_level_name(kdalab_simd_level level)
{
    return (unsigned)level <= KDALAB_SIMD_AUTO ? level_names[level] : "?";
}

kdalab_status kdalab_simd_level_parse(const char *name, kdalab_simd_level *out)
{
    if (!name || !out)
        return kdalab_fail(KDALAB_ENULL, "name or out is NULL");
    for (int l = 0; l <= KDALAB_SIMD_AUTO; l++)
        if (strcmp(name, level_names[l]) == 0) {
            *out = (kdalab_simd_level)l;
            return KDALAB_OK;
        }
    return kdalab_fail(KDALAB_EINVAL, "unknown SIMD level '%s' (scalar, avx2, avx512, auto)",
                       name);
}

int kdalab_simd_level_available(kdalab_simd_level level)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    switch (level) {
    case KDALAB_SIMD_SCALAR:
    case KDALAB_SIMD_AUTO:
        return 1;
    case KDALAB_SIMD_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KDALAB_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
    }
    return 0;
#else
    return level == KDALAB_SIMD_SCALAR || level == KDALAB_SIMD_AUTO;
#endif
}

static kdalab_simd_level best_level(void)
{
    if (kdalab_simd_level_available(KDALAB_SIMD_AVX512))
        return KDALAB_SIMD_AVX512;
    if (kdalab_simd_level_available(KDALAB_SIMD_AVX2))
        return KDALAB_SIMD_AVX2;
    return KDALAB_SIMD_SCALAR;
}

/* The level in use; -1 until the first call resolves it. */
static atomic_int active_level = -1;

/* From KDALAB_SIMD if set and runnable, else the best the CPU has. */
static kdalab_simd_level level_from_env(void)
{
    const char *env = getenv("KDALAB_SIMD");
    kdalab_simd_level want;
    if (!env || !*env)
        return best_level();
    if (kdalab_simd_level_parse(env, &want) != KDALAB_OK) {
        fprintf(stderr, "kdalab: KDALAB_SIMD='%s' is not scalar, avx2, avx512 or auto; "
                        "using %s\n", env, level_names[best_level()]);
        return best_level();
    }
    if (want == KDALAB_SIMD_AUTO)
        return best_level();
    if (!kdalab_simd_level_available(want)) {
        fprintf(stderr, "kdalab: KDALAB_SIMD=%s but this CPU cannot run it; using %s\n", env,
                level_names[best_level()]);
        return best_level();
    }
    return want;
}

/* THE dispatch point: every kernel call goes through the table returned here. */
static const simd_table *active_table(void)
{
    int l = atomic_load(&active_level);
    if (l < 0) {
        int expected = -1;
        int fresh = (int)level_from_env();
        if (!atomic_compare_exchange_strong(&active_level, &expected, fresh))
            l = expected; /* another thread resolved it first */
        else
            l = fresh;
    }
    switch ((kdalab_simd_level)l) {
    case KDALAB_SIMD_AVX512:
        return &kdalab_simd_table_avx512;
    case KDALAB_SIMD_AVX2:
        return &kdalab_simd_table_avx2;
    default:
        return &kdalab_simd_table_scalar;
    }
}

kdalab_simd_level kdalab_simd_get_level(void)
{
    active_table();
    return (kdalab_simd_level)atomic_load(&active_level);
}

kdalab_status kdalab_simd_set_level(kdalab_simd_level level)
{
    if ((unsigned)level > KDALAB_SIMD_AUTO)
        return kdalab_fail(KDALAB_EINVAL, "unknown SIMD level %d", (int)level);
    if (level == KDALAB_SIMD_AUTO)
        level = best_level();
    if (!kdalab_simd_level_available(level))
        return kdalab_fail(KDALAB_EINVAL, "this CPU cannot run SIMD level %s",
                           level_names[level]);
    atomic_store(&active_level, (int)level);
    return KDALAB_OK;
}

/* ---- what both precisions' chunkwise entry points share ------------------- */

kdalab_status simd_plan_make(simd_plan *pl, size_t B, size_t H, size_t C, size_t c, size_t K,
                             size_t V, size_t elem,
                             size_t (*work_elems)(size_t, size_t, size_t, size_t, size_t))
{
    /* Tasks: groups of nh consecutive heads of one batch entry, nh the
     * largest of 4, 3, 2 that divides H and leaves the threads equal shares (a
     * task count that is a multiple of the thread count, or at least four
     * tasks per thread), else 1. A thread then reads the rows of nh
     * neighbouring heads (adjacent in fla's [B, T, H, .] layout) together,
     * chunk by chunk: nh times longer runs of contiguous memory, and each 4 KB
     * page of the inputs walked once per task instead of once per head. With
     * fewer heads than threads, one head per task and its value columns
     * (independent in every mechanism) split into blocks of 16. */
    int nth = omp_get_max_threads();
    size_t BH = B * H, nh = 1, ngroups = H, nsplit = 1, width = V;
    if (BH < (size_t)nth && V > 16) {
        size_t want = ((size_t)nth + BH - 1) / BH;
        width = (V + want - 1) / want;
        width = (width + 15) / 16 * 16;
        nsplit = (V + width - 1) / width;
    } else {
        for (nh = 4; nh > 1; nh--) {
            size_t tasks = B * (H / nh);
            if (H % nh == 0 && (tasks % (size_t)nth == 0 || tasks >= 4 * (size_t)nth))
                break;
        }
        ngroups = H / nh;
    }
    size_t ntasks = B * ngroups * nsplit;
    if ((size_t)nth > ntasks)
        nth = (int)ntasks;

    /* workspace per thread, allocated before anything is written */
    size_t CC, CKV, bytes;
    if (!kdalab_mul_size(C, C, &CC) || !kdalab_mul_size(C, K + width + 16, &CKV) ||
        !kdalab_mul_size(CC + CKV, 8 * elem, &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "chunk C = %zu with K = %zu, V = %zu overflows",
                           C, K, V);
    bytes = (work_elems(C, c, K, width, nh) * elem + 63) / 64 * 64;
    void **work = calloc((size_t)nth, sizeof *work);
    int ok = work != NULL;
    for (int t = 0; ok && t < nth; t++)
        ok = (work[t] = aligned_alloc(64, bytes)) != NULL;
    if (!ok) {
        for (int t = 0; work && t < nth; t++)
            free(work[t]);
        free(work);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for %d workspaces of %zu bytes", nth,
                           bytes);
    }
    *pl = (simd_plan){.nth = nth, .nh = nh, .ngroups = ngroups, .nsplit = nsplit,
                      .width = width, .ntasks = ntasks, .work = work};
    return KDALAB_OK;
}

void simd_plan_task(const simd_plan *pl, size_t V, size_t task, size_t *b, size_t *h,
                    size_t *v0, size_t *v1)
{
    size_t bg = task / pl->nsplit, part = task % pl->nsplit, grp = bg % pl->ngroups;
    *b = bg / pl->ngroups;
    *h = grp * pl->nh;
    *v0 = part * pl->width;
    *v1 = *v0 + pl->width < V ? *v0 + pl->width : V;
}

void simd_plan_free(simd_plan *pl)
{
    for (int t = 0; t < pl->nth; t++)
        free(pl->work[t]);
    free(pl->work);
}

kdalab_status simd_chunk_finish(size_t bad_o, size_t bad_ht, kdalab_report *report)
{
    if (report) {
        report->nonfinite_o = bad_o;
        report->nonfinite_ht = bad_ht;
        report->max_exponent = 0;
    }
    if (bad_o || bad_ht)
        return kdalab_fail(KDALAB_ERANGE, "%zu non-finite values in o and %zu in ht", bad_o,
                           bad_ht);
    kdalab_clear_error();
    return KDALAB_OK;
}

/* ---------------------------------------------------------------------------- */
/* Chunkwise form                                                               */
/* ---------------------------------------------------------------------------- */

/*
 * A fast screen of one chunkwise call, not a check: 1 when the call is
 * certainly valid, 0 when not sure. On 0 the caller runs kdalab_check_f32
 * (lib/core/rules.c), which decides and words the error, so the statuses and
 * messages are the library's whatever the screen says. The sizes and scale go
 * through the library's own tests; the arrays, which the library's check
 * reads one element at a time, through the level's vector screen
 * (lib/simd/screen.h), in parallel.
 */
static int screen_chunk_call(const simd_table *tab, const kdalab_dims *dims,
                             kdalab_mechanism mech, float scale, const float *q,
                             const float *k, const float *v, const float *g,
                             const float *beta, const float *h0, const float *o)
{
    kdalab_counts n;
    if ((unsigned)mech > (unsigned)KDALAB_KDA || kdalab_check_scale(scale) != KDALAB_OK ||
        kdalab_count_dims(dims, mech, sizeof(float), &n) != KDALAB_OK)
        return 0;
    int need_beta = kdalab_mechanism_has_beta(mech);
    if (n.qk > 0 && (!q || !k || !v || !o || (n.g > 0 && !g) || (need_beta && !beta)))
        return 0;
    enum { SEG = 1 << 15 };
    struct {
        const float *x;
        size_t n;
        kdalab_value_rule rule;
    } arr[6] = {{q, n.qk, KDALAB_RULE_FINITE},
                {k, n.qk, KDALAB_RULE_FINITE},
                {v, n.v, KDALAB_RULE_FINITE},
                {g, n.qk ? n.g : 0, KDALAB_RULE_LOG_DECAY},
                {beta, need_beta && n.qk ? n.bth : 0, KDALAB_RULE_BETA},
                {h0, h0 ? n.state : 0, KDALAB_RULE_FINITE}};
    size_t nseg = 0;
    for (int a = 0; a < 6; a++)
        nseg += (arr[a].n + SEG - 1) / SEG;
    int doubt = 0;
#pragma omp parallel for schedule(static) reduction(| : doubt)
    for (size_t sgi = 0; sgi < nseg; sgi++) {
        size_t idx = sgi;
        for (int a = 0; a < 6; a++) {
            size_t na = (arr[a].n + SEG - 1) / SEG;
            if (idx < na) {
                size_t off = idx * SEG, len = arr[a].n - off < SEG ? arr[a].n - off : SEG;
                doubt |= !tab->screen(arr[a].x + off, len, arr[a].rule);
                break;
            }
            idx -= na;
        }
    }
    return !doubt;
}

kdalab_chunk_opts kdalab_simd_chunk_opts_default(void)
{
    kdalab_chunk_opts o = kdalab_chunk_opts_default();
    o.chunk = 16; /* the fastest measured (lib/kdalab_simd.h says where) */
    return o;
}

kdalab_status kdalab_simd_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *h0, float *o, float *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_chunk_opts op;
    const simd_table *tab = active_table();
    kdalab_status s = KDALAB_OK;
    if (!screen_chunk_call(tab, dims, mech, scale, q, k, v, g, beta, h0, o))
        s = kdalab_check_f32(dims, mech, scale, q, k, v, g, beta, h0, o, NULL);
    if (s != KDALAB_OK)
        return s;
    const kdalab_chunk_opts dflt = kdalab_simd_chunk_opts_default();
    s = kdalab_check_chunk_opts(opts ? opts : &dflt, 0, &op);
    if (s != KDALAB_OK)
        return s;
    if (op.decay != KDALAB_DECAY_SAFE || op.precision != KDALAB_FP32)
        return kdalab_chunk_f32(dims, mech, scale, q, k, v, g, beta, h0, o, ht, &op, report);

    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1);
    const size_t c = op.subchunk < C ? op.subchunk : C;

    simd_plan pl;
    s = simd_plan_make(&pl, B, H, C, c, K, V, sizeof(float), tab->work_floats);
    if (s != KDALAB_OK)
        return s;
    const int nth = pl.nth;
    const size_t ntasks = pl.ntasks;
    const size_t gw = kdalab_mechanism_g_width(mech, K);
    size_t bad_o = 0, bad_ht = 0;
#pragma omp parallel num_threads(nth) reduction(+ : bad_o, bad_ht)
    {
        float *mywork = pl.work[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (size_t task = 0; task < ntasks; task++) {
            size_t b, h, v0, v1;
            simd_plan_task(&pl, V, task, &b, &h, &v0, &v1);
            size_t row0 = b * T * H + h, bh = b * H + h; /* (b, t = 0, h) */
            simd_head_args a = {
                .mech = mech, .T = T, .K = K, .V = V, .v0 = v0, .v1 = v1, .nh = pl.nh,
                .chunk = C, .subchunk = c, .scale = scale,
                .q = q ? q + row0 * K : NULL, .k = k ? k + row0 * K : NULL,
                .v = v ? v + row0 * V : NULL,
                .g = (gw && g) ? g + row0 * gw : NULL,
                .beta = (mech != KDALAB_LINEAR_ATTENTION && beta) ? beta + row0 : NULL,
                .h0 = h0 ? h0 + bh * K * V : NULL,
                .o = o ? o + row0 * V : NULL, .ht = ht ? ht + bh * K * V : NULL,
                .ld_qk = H * K, .ld_v = H * V, .ld_g = H * gw, .ld_b = H,
            };
            tab->chunk_head(&a, mywork, &bad_o, &bad_ht);
        }
    }
    simd_plan_free(&pl);
    return simd_chunk_finish(bad_o, bad_ht, report);
}

/* ---------------------------------------------------------------------------- */
/* Decode step                                                                  */
/* ---------------------------------------------------------------------------- */

kdalab_status kdalab_simd_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, float beta, float *S, float *o)
{
    const simd_table *tab = active_table();
    /* A screen, not a check: certain is 1 only when the step is certainly
     * valid. scale and beta go through the library's own tests; the size test
     * is kdalab_count_dims's for B = T = H = 1 without its divisions (K*V and
     * max(K, V) floats certainly have a byte count in size_t); q, k, v and g
     * go through the level's vector screen. When not sure, the library's
     * checks decide and word the error. */
    size_t gn = kdalab_mechanism_g_width(mech, K);
    int certain =
        (unsigned)mech <= (unsigned)KDALAB_KDA && K && V && q && k && v && S && o &&
        (gn == 0 || g) && kdalab_check_scale(scale) == KDALAB_OK &&
        (!kdalab_mechanism_has_beta(mech) ||
         kdalab_check_values_f32(KDALAB_RULE_BETA, "beta", &beta, 1, NULL) == KDALAB_OK) &&
        K <= ((size_t)-1) / sizeof(float) / (V > K ? V : K) &&
        tab->screen(q, K, KDALAB_RULE_FINITE) && tab->screen(k, K, KDALAB_RULE_FINITE) &&
        tab->screen(v, V, KDALAB_RULE_FINITE) &&
        (gn == 0 || tab->screen(g, gn, KDALAB_RULE_LOG_DECAY));
    if (!certain) { /* the library's checks, except S: the kernel's first pass checks it */
        kdalab_status c = kdalab_check_step_args_f32(mech, K, V, scale, q, k, v, g, beta, S, o);
        if (c != KDALAB_OK)
            return c;
    }
    size_t bad = 0;
    kdalab_status s = tab->step(mech, K, V, scale, q, k, v, g, beta, S, o, &bad);
    if (s == KDALAB_ENONFINITE)
        return kdalab_fail(KDALAB_ENONFINITE, "S[%zu] is %g: inputs must be finite", bad,
                           (double)S[bad]);
    if (s == KDALAB_ENOMEM)
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a decode step of K = %zu, V = %zu",
                           K, V);
    if (s == KDALAB_ERANGE) /* the kernel's write pass saw a non-finite state */
        return kdalab_fail(KDALAB_ERANGE,
                           "SIMD decode step: the state overflowed from finite inputs "
                           "(S and o are written)");
    if (s != KDALAB_OK)
        return s;
    /* as the reference: an overflow is KDALAB_ERANGE, never NaN with OK (the
     * kernel checked S as it wrote it; o is V values) */
    return kdalab_check_outputs_f32("SIMD decode step", o, V, NULL, 0, NULL, NULL);
}

/* ---------------------------------------------------------------------------- */
/* Recurrent form: the decode step token by token                               */
/* ---------------------------------------------------------------------------- */

kdalab_status kdalab_simd_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *h0, float *o, float *ht)
{
    kdalab_counts n;
    const simd_table *tab = active_table();
    kdalab_status s = kdalab_check_f32(dims, mech, scale, q, k, v, g, beta, h0, o, &n);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t gw = kdalab_mechanism_g_width(mech, K), KV = K * V;
    size_t bytes = (KV * sizeof(float) + 63) / 64 * 64; /* a state on its own cache lines */
    int nth = omp_get_max_threads();
    float **S = calloc((size_t)nth, sizeof *S);
    int ok = S != NULL;
    for (int t = 0; ok && t < nth; t++)
        ok = (S[t] = aligned_alloc(64, bytes)) != NULL;
    if (!ok) {
        for (int t = 0; S && t < nth; t++)
            free(S[t]);
        free(S);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for %d states of %zu x %zu", nth, K, V);
    }
    int nomem = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : nomem)
    for (size_t bh = 0; bh < B * H; bh++) {
        float *St = S[omp_get_thread_num()];
        size_t b = bh / H, h = bh % H;
        if (h0)
            memcpy(St, h0 + bh * KV, KV * sizeof *St);
        else
            memset(St, 0, KV * sizeof *St);
        int broken = 0; /* the state overflowed: the rest of this head is NaN */
        for (size_t t = 0; t < T; t++) {
            size_t row = (b * T + t) * H + h; /* index into [B, T, H] */
            size_t bad = 0;
            kdalab_status st = broken ? KDALAB_ENONFINITE
                                      : tab->step(mech, K, V, scale, q + row * K, k + row * K,
                                                  v + row * V, gw ? g + row * gw : NULL,
                                                  beta ? beta[row] : 0.0f, St, o + row * V,
                                                  &bad);
            if (st == KDALAB_ERANGE) /* taken, and overflowed: o is written */
                broken = 1;
            else if (st != KDALAB_OK) { /* not taken (S non-finite, or no memory) */
                if (st == KDALAB_ENOMEM)
                    nomem = 1;
                broken = 1;
                for (size_t j = 0; j < V; j++)
                    o[row * V + j] = NAN;
            }
        }
        if (ht)
            memcpy(ht + bh * KV, St, KV * sizeof *St);
    }
    for (int t = 0; t < nth; t++)
        free(S[t]);
    free(S);
    if (nomem) /* a step's scratch for K or V > the kernel's stack buffer */
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a decode step of K = %zu, V = %zu",
                           K, V);
    return kdalab_check_outputs_f32("SIMD recurrent form", o, n.v, ht, n.state, NULL, NULL);
}
