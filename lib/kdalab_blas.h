/*
 * kdalab_blas.h — the CBLAS under the training model's dense products
 * (projections, MLP, attention's score and value products): which kernels it
 * runs, and choosing them when OpenBLAS does not know the CPU.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_BLAS_H
#define KDALAB_BLAS_H

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/*
 * The name OpenBLAS gives the kernels it chose for this CPU ("SkylakeX",
 * "Haswell", "Zen", "Prescott", ...), or NULL when the CBLAS linked is not
 * OpenBLAS. OpenBLAS chooses once, when it is loaded, from the CPU's family
 * and model, or from the environment variable OPENBLAS_CORETYPE.
 */
const char *kdalab_blas_kernels(void);

/*
 * Call in main() of a program that trains, once its command line is known to
 * be good and before it writes anything (argv: main's, NULL-ended).
 *
 * An OpenBLAS older than the CPU does not know its model and falls back to
 * its generic "Prescott" kernels (SSE3, no FMA): Debian 12's OpenBLAS 0.3.21
 * does so on the Intel Xeon of family 6 model 207 this project was measured
 * on, where they take about half of a training step. When the kernels are
 * "Prescott", OPENBLAS_CORETYPE is unset and the CPU has AVX-512 F/CD/BW/DQ/VL
 * (then "SkylakeX") or AVX2 and FMA (then "Haswell"), this sets
 * OPENBLAS_CORETYPE to that name, says so in one line on stderr and
 * restarts the program with the same arguments (execv of /proc/self/exe);
 * the variable KDALAB_BLAS_RESTARTED marks the restart so it happens at most
 * once. It does not restart a program the dynamic loader was asked to run
 * by hand (/proc/self/exe would be the loader). In every other case it
 * returns and nothing changes; if the restart fails it says so on stderr
 * and returns with the environment as it was. To keep OpenBLAS's own
 * choice, set OPENBLAS_CORETYPE yourself (to the name kdalab_blas_kernels()
 * reports).
 *
 * Float32 products give different (equally valid) roundings with other
 * kernels, so a model trained with and without the restart differs in its
 * last bits; with the same kernels, results do not depend on it.
 */
void kdalab_blas_choose_kernels(char **argv);

KDALAB_END_DECLS

#endif /* KDALAB_BLAS_H */
