/*
 * lib/train/blas.c — which kernels the CBLAS runs (OpenBLAS's name for them),
 * and choosing better ones when OpenBLAS does not know the CPU
 * (lib/kdalab_blas.h says when and why).
 *
 * defines: kdalab_blas_kernels, kdalab_blas_choose_kernels
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kdalab_blas.h"
#include "kdalab_simd.h"

/* OpenBLAS's own API; NULL when the CBLAS linked is another. */
extern char *openblas_get_corename(void) __attribute__((weak));

const char *kdalab_blas_kernels(void)
{
    return openblas_get_corename ? openblas_get_corename() : NULL;
}

/* OpenBLAS's name for the best kernels this CPU can run, of the two families
 * it has for x86-64 with wide vectors; NULL for neither. The levels are the
 * SIMD path's (kdalab_simd_level_available); OpenBLAS's SkylakeX kernels
 * also use AVX-512 BW and CD. */
static const char *kernels_for_this_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (kdalab_simd_level_available(KDALAB_SIMD_AVX512) &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
#endif
    if (kdalab_simd_level_available(KDALAB_SIMD_AVX2))
        return "Haswell";
    return NULL;
}

/* 1 when /proc/self/exe is the file this program was started from (the
 * name the kernel, or the dynamic loader when it runs a program, records as
 * AT_EXECFN); 0 when it is another, as when the dynamic loader is run by hand
 * (`/lib64/ld-linux-x86-64.so.2 bin/kdalab ...`: /proc/self/exe is the loader,
 * and running it again would lose the program), or when either is unknown. */
static int started_as_itself(void)
{
    const char *execfn = (const char *)getauxval(AT_EXECFN);
    struct stat a, b;
    return execfn && stat(execfn, &a) == 0 && stat("/proc/self/exe", &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void kdalab_blas_choose_kernels(char **argv)
{
    const char *now = kdalab_blas_kernels();
    if (!argv || !argv[0] || !now || strcasecmp(now, "Prescott") != 0)
        return; /* not OpenBLAS, or it knew the CPU */
    if (getenv("OPENBLAS_CORETYPE") || getenv("KDALAB_BLAS_RESTARTED"))
        return; /* chosen by the user, or already restarted once */
    const char *want = kernels_for_this_cpu();
    if (!want || !started_as_itself())
        return; /* Prescott is right for this CPU, or we cannot restart safely */
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0 ||
        setenv("KDALAB_BLAS_RESTARTED", "1", 1) != 0) {
        unsetenv("OPENBLAS_CORETYPE"); /* children see what we run with */
        return;
    }
    fprintf(stderr,
            "%s: OpenBLAS does not know this CPU and chose its generic Prescott kernels; "
            "restarting with OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE to choose)\n",
            argv[0], want);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* the restart failed: go on as we were, and leave children the same environment */
    fprintf(stderr, "%s: the restart failed (%s): going on with the Prescott kernels\n", argv[0],
            strerror(errno));
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("KDALAB_BLAS_RESTARTED");
}
