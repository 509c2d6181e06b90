/*
 * lib/simd/levels.c — the instruction-set level of the optimized path: which
 * levels this CPU can run, the one in use (KDALAB_SIMD or the best available,
 * resolved once) and the kernel table of each precision at that level. The
 * only dispatch point: every SIMD kernel call goes through a table returned
 * by kdalab__simd_table_active or kdalab__simd_table_active_f64.
 *
 * defines: kdalab_simd_level_name, kdalab_simd_level_parse,
 *          kdalab_simd_level_available, kdalab_simd_get_level,
 *          kdalab_simd_set_level (lib/kdalab_simd.h);
 *          kdalab__simd_table_active, kdalab__simd_table_active_f64 (simd_internal.h);
 *          kdalab__simd_screen (internal.h): the active level's value screen
 */
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
    kdalab_clear_error();
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

/* The level in use, resolved on the first call. */
static kdalab_simd_level resolved_level(void)
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
    return (kdalab_simd_level)l;
}

/* The kernel tables of each precision by level (resolved_level never gives
 * KDALAB_SIMD_AUTO: it is resolved to a level first). */
static const simd_table *const tables[] = {[KDALAB_SIMD_SCALAR] = &kdalab_simd_table_scalar,
                                           [KDALAB_SIMD_AVX2] = &kdalab_simd_table_avx2,
                                           [KDALAB_SIMD_AVX512] = &kdalab_simd_table_avx512};
static const simd_table_f64 *const tables_f64[] = {
    [KDALAB_SIMD_SCALAR] = &kdalab_simd_table_scalar_f64,
    [KDALAB_SIMD_AVX2] = &kdalab_simd_table_avx2_f64,
    [KDALAB_SIMD_AVX512] = &kdalab_simd_table_avx512_f64};

const simd_table *kdalab__simd_table_active(void) { return tables[resolved_level()]; }

const simd_table_f64 *kdalab__simd_table_active_f64(void) { return tables_f64[resolved_level()]; }

kdalab_simd_level kdalab_simd_get_level(void)
{
    return resolved_level();
}

kdalab_status kdalab_simd_set_level(kdalab_simd_level level)
{
    kdalab_clear_error();
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

/* 1 when every x[0..n) is certainly legal under rule: the level's vector
 * screen (lib/simd/screen.h) over segments of 128 KB in parallel. 0 is "not
 * sure": the exact check then decides and words the error. */
int kdalab__simd_screen(const void *x, size_t n, kdalab_value_rule rule, int is_f32)
{
    const size_t es = is_f32 ? sizeof(float) : sizeof(double), seg = (1 << 17) / es;
    const size_t nseg = (n + seg - 1) / seg;
    const simd_table *t32 = kdalab__simd_table_active();
    const simd_table_f64 *t64 = kdalab__simd_table_active_f64();
    int doubt = 0;
#pragma omp parallel for num_threads(kdalab__threads_for(nseg)) schedule(static) \
    reduction(| : doubt) if (nseg > 1)
    for (size_t i = 0; i < nseg; i++) {
        size_t off = i * seg, len = n - off < seg ? n - off : seg;
        doubt |= is_f32 ? !t32->screen((const float *)x + off, len, rule)
                        : !t64->screen((const double *)x + off, len, rule);
    }
    return !doubt;
}
