/*
 * tools/kdalab/info.c — `kdalab info`: the library's version, the SIMD level
 * it chose for this machine (or KDALAB_SIMD forced), the CPU's model name,
 * family and model, the CPU features it saw and the number of CPUs online;
 * `kdalab info --mechanisms`: the mechanism table, one line a row.
 *
 * defines: cmd_info (declared in cli.h)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char HELP[] =
    "usage: kdalab info [--mechanisms]\n"
    "\n"
    "Print the version, the SIMD level the library chose for this machine, the\n"
    "CPU's model name, family and model, the CPU features it saw, the CPUs\n"
    "online, the threads kdalab runs on (OpenMP's count: OMP_NUM_THREADS) and\n"
    "OpenBLAS's kernels.\n"
    "\n"
    "  --mechanisms   instead, the mechanism table: one line a mechanism, with its\n"
    "                 name, whether it has the delta rule with its beta write (dplr,\n"
    "                 fla's generalized delta rule, has a, b instead), the shape\n"
    "                 of its log-decay g, whether a, b give its transition a\n"
    "                 low-rank term (the DPLR boundary), fla's chunkwise and\n"
    "                 recurrent functions, the paper, and its title (tab-separated,\n"
    "                 a header line first)\n";

static const struct option OPTIONS[] = {
    {"help", no_argument, NULL, 'h'},
    {"mechanisms", no_argument, NULL, 'm'},
    {NULL, 0, NULL, 0},
};

/* The value of /proc/cpuinfo's first line whose key is exactly key (Linux),
 * into out[n]; "unknown" without one. */
static void cpuinfo_value(const char *key, char *out, size_t n)
{
    char line[512];
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        size_t klen = (size_t)(colon - line);
        while (klen && (line[klen - 1] == ' ' || line[klen - 1] == '\t'))
            klen--;
        if (klen != strlen(key) || strncmp(line, key, klen) != 0)
            continue;
        char *value = colon + 1 + strspn(colon + 1, " \t");
        value[strcspn(value, "\r\n")] = '\0';
        if (*value)
            snprintf(out, n, "%s", value);
        break;
    }
    if (f)
        fclose(f);
}

/* "cpu=<model name>", "cpu_family=" and "cpu_model=" from /proc/cpuinfo
 * (Linux on x86), so that a timing can name its machine: a model name can be
 * as short as "AMD EPYC", and the family and model tell a Zen 3 (25, 1) from
 * a Zen 5 (26, 2); "unknown" where the line is missing. */
static void print_cpu_name(void)
{
    char v[512];
    cpuinfo_value("model name", v, sizeof v);
    printf("cpu=%s\n", v);
    cpuinfo_value("cpu family", v, sizeof v);
    printf("cpu_family=%s\n", v);
    cpuinfo_value("model", v, sizeof v);
    printf("cpu_model=%s\n", v);
}

/* "cpu_features=avx avx2 ..." as the compiler's CPU detection sees them. */
static void print_cpu_features(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    struct {
        const char *name;
        int on;
    } feats[] = {
        {"sse2", __builtin_cpu_supports("sse2")},
        {"sse4.2", __builtin_cpu_supports("sse4.2")},
        {"avx", __builtin_cpu_supports("avx")},
        {"avx2", __builtin_cpu_supports("avx2")},
        {"fma", __builtin_cpu_supports("fma")},
        {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512dq", __builtin_cpu_supports("avx512dq")},
        {"avx512vl", __builtin_cpu_supports("avx512vl")},
    };
    int any = 0;
    printf("cpu_features=");
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
        if (feats[i].on) {
            printf("%s%s", any ? " " : "", feats[i].name);
            any = 1;
        }
    printf("%s\n", any ? "" : "none");
#else
    printf("cpu_features=unknown (not an x86 build)\n");
#endif
}

int cmd_info(int argc, char **argv)
{
    cli_who = "kdalab info";
    cli_parser p;
    cli_arg got;
    int c, help = 0, mechanisms = 0;
    cli_begin(&p, argc, argv, OPTIONS);
    while ((c = cli_next(&p, &got)) != CLI_END) {
        if (c == CLI_ERROR)
            return EXIT_BAD;
        if (c == CLI_ARG)
            return cli_fail(EXIT_BAD, "unexpected argument '%s' (see --help)", got.value);
        if (c == 'm')
            mechanisms = 1;
        else
            help = 1;
    }
    if (help) {
        fputs(HELP, stdout);
        return 0;
    }
    if (mechanisms) {
        static const char *const G[] = {"none", "per_head [B,T,H]", "per_key [B,T,H,K]"};
        printf("name\tdelta_rule\tg\tab\tfla_chunk\tfla_recurrent\tsource\ttitle\n");
        for (kdalab_mechanism m = 0; kdalab_mechanism_row(m); m++) {
            const kdalab_mechanism_info *r = kdalab_mechanism_row(m);
            printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r->name, r->delta ? "yes" : "no",
                   G[r->g], r->ab ? "yes [B,T,H,K]" : "no", r->fla_chunk, r->fla_recurrent,
                   r->source, r->title);
        }
        return 0;
    }
    printf("version=%s\n", KDALAB_VERSION);
    const char *forced = getenv("KDALAB_SIMD");
    printf("simd_level=%s%s%s%s\n", kdalab_simd_level_name(kdalab_simd_get_level()),
           forced ? " (KDALAB_SIMD=" : "", forced ? forced : "", forced ? ")" : "");
    print_cpu_name();
    print_cpu_features();
    printf("cpus_online=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("threads=%d\n", kdalab_get_num_threads());
    const char *blas = kdalab_blas_kernels(), *env = getenv("OPENBLAS_CORETYPE");
    printf("blas_kernels=%s%s%s%s\n", blas ? blas : "(not OpenBLAS)",
           env ? " (OPENBLAS_CORETYPE=" : "", env ? env : "", env ? ")" : "");
    return 0;
}
