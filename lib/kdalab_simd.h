/*
 * kdalab_simd.h — the optimized float32 path (lib/simd/), and its float64
 * twin (kdalab_simd_chunk_f64, kdalab_simd_step_f64).
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it.
 */
#ifndef KDALAB_SIMD_H
#define KDALAB_SIMD_H

#include "kdalab_forms.h"

KDALAB_BEGIN_DECLS

/* ------------------------------------------------------------------------- */
/* Optimized SIMD path (lib/simd/)                                           */
/* ------------------------------------------------------------------------- */
/*
 * The float32 fast path: the same forms as kdalab_chunk_f32 / kdalab_step_f32
 * (same shapes, layout, validation and status codes), computed with
 * register-blocked matrix products and vectorized exp, and threaded with
 * OpenMP over batch x heads (and over value columns when B*H is below the
 * thread count; OMP_NUM_THREADS or kdalab_set_num_threads sets the count).
 *
 * The instruction-set level is chosen once, at the first call, from the CPU's
 * features (AVX-512F+DQ+VL, else AVX2+FMA, else portable scalar code), unless
 * the environment variable KDALAB_SIMD is "scalar", "avx2" or "avx512". A level
 * the CPU lacks is never run: KDALAB_SIMD naming one prints a warning on
 * stderr and the best available level is used instead;
 * kdalab_simd_set_level() refuses it with KDALAB_EINVAL.
 */
typedef enum {
    KDALAB_SIMD_SCALAR = 0, /* portable C, any CPU                     */
    KDALAB_SIMD_AVX2,       /* AVX2 + FMA, 8 floats per vector          */
    KDALAB_SIMD_AVX512,     /* AVX-512 F/DQ/VL, 16 floats per vector    */
    KDALAB_SIMD_AUTO        /* set_level only: the best the CPU has     */
} kdalab_simd_level;

/* The level in use (never KDALAB_SIMD_AUTO); resolves it at the first call. */
kdalab_simd_level kdalab_simd_get_level(void);
/* Name of a level ("scalar", "avx2", "avx512", "auto"); "?" when unknown. The
 * level in use: kdalab_simd_level_name(kdalab_simd_get_level()). */
const char *kdalab_simd_level_name(kdalab_simd_level level);
/* Parse a level name as above. KDALAB_EINVAL when unknown. */
kdalab_status kdalab_simd_level_parse(const char *name, kdalab_simd_level *out);
/* 1 when this CPU (and OS) can run the level, else 0. AUTO and SCALAR: 1. */
int kdalab_simd_level_available(kdalab_simd_level level);
/* Force the level for every later call in the process (AUTO: the best
 * available). KDALAB_EINVAL when the CPU cannot run it (the level is kept). */
kdalab_status kdalab_simd_set_level(kdalab_simd_level level);

/* The threads of kdalab's OpenMP loops (the SIMD path's forms, forward and
 * backward, its value screens, kdalab_store_f64, kdalab_error_sums; not the
 * training programs' loops, which OpenMP's count sets) for every later call
 * in the process: 1 <= n <= KDALAB_MAX_THREADS, or 0 (the start) for
 * OpenMP's own count (omp_get_max_threads(): OMP_NUM_THREADS, or whatever
 * the program set: an imported PyTorch sets it to its intra-op count, 1 of
 * 2 CPUs in Debian's torch 1.13). A loop never runs more threads than it
 * has tasks. The results are the same bits for any count: the threaded
 * loops compute in round to nearest whatever the caller's rounding mode
 * (which only the calling thread has). KDALAB_EINVAL for n out of range
 * (the setting is kept). */
#define KDALAB_MAX_THREADS 1024
kdalab_status kdalab_set_num_threads(int n);
/* The thread count the next call asks for: the setting, else OpenMP's
 * (inside a caller's parallel region without nesting, OpenMP runs it on
 * one). */
int kdalab_get_num_threads(void);

/*
 * kdalab_simd_chunk_f32 — the chunkwise form in float32 (REFERENCE.md steps
 * 1-7), arguments, shapes and errors exactly as kdalab_chunk_f32. Outputs
 * agree with kdalab_recurrent_f64 within ~1e-5 relative (float32 rounding).
 *
 * Fast for opts->decay == KDALAB_DECAY_SAFE (the default), in every storage
 * precision: KDA's exponents are all sums of g over the span they cover, all
 * <= 0, so it stays finite and exact for any g <= 0 (g = -1000 decays to an
 * exact 0). With precision BF16 or FP16 it emulates a kernel that stores in
 * that format, as the reference does: q, k, v, beta (a, b) and the rescaled
 * rows its products read (gamma q, scaled by s once rounded; the decayed
 * keys) rounded as kdalab_round_array rounds, sums in float32; its error
 * against float64 is within ~10% of the reference emulation's
 * (tests/test_simd_store.c). The chunk's stored rows take 4 (2 C K + C V)
 * bytes more of each thread's workspace (and 8 C K for the DPLR row's a, b). Other decay
 * modes are passed to kdalab_chunk_f32 (the reference), since they exist to
 * be studied, not to be fast.
 * report (may be NULL): the non-finite counts; max_exponent is 0 on the fast
 * path (no positive exponent is ever formed).
 * Speed: each thread works in a workspace of about
 * 4 (8 C K + 2 c K + nh K V + 3 C^2) bytes for KDA (c the sub-chunk, nh
 * the heads a thread runs side by side: 2-4 when they divide H into equal
 * shares per thread, else 1; the other mechanisms need less) and reads q, k,
 * v, g and writes o where the caller keeps them: K = V = 128, c = 16 take
 * 226 KB at C = 32 and 392 KB at C = 64 with nh = 1, 290 KB at C = 32 with
 * nh = 2 (B = 1, H = 4 on two threads). A C whose working set fits a core's cache runs faster
 * (bench/simd.c times C = 16, 32 and 64 on the machine it runs on). With
 * opts == NULL this path uses kdalab_simd_chunk_opts_default() (C = 16, the
 * fastest measured), and so does `kdalab run --impl simd` without --chunk.
 * C changes the rounding, not the result.
 * Errors: those of kdalab_chunk_f32 (ENULL, ESIZE, EOVERFLOW, EDOMAIN,
 * ENONFINITE, EINVAL, ENOMEM before any output is written; ERANGE after).
 */
/*
 * The SIMD paths' chunk options when the caller passes none: those of
 * kdalab_chunk_opts_default() with C = 16 instead of 64. C = 16 measured
 * fastest for the float32 kernels on both kinds of machine kdalab is
 * measured on: on an Intel Xeon with AVX-512 (one head in one process,
 * alternating, T = 4096) 1.01-1.06x C = 32 and 1.17-1.31x C = 64 for each of
 * the four mechanisms, and on an AMD Zen 3 with AVX2. For float64 it is
 * fastest on the Zen 3 and, on the Xeon, for all four mechanisms (KDA
 * 1.39-1.87x C = 64). The reference paths keep
 * C = 64 (kdalab_chunk_opts_default()).
 */
kdalab_chunk_opts kdalab_simd_chunk_opts_default(void);

kdalab_status kdalab_simd_chunk_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                    float scale, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta,
                                    const float *h0, float *o, float *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report);

/*
 * kdalab_simd_recurrent_f32 — the recurrent form in float32 on the SIMD path:
 * kdalab_simd_step_f32 token by token, heads in parallel (OpenMP over
 * batch x heads). Arguments, shapes and errors exactly as kdalab_recurrent_f32;
 * the whole call is validated before anything is written. After a head's
 * state overflows (KDALAB_ERANGE), that head's remaining outputs are NaN.
 * With K or V above 512 a step allocates its scratch; if that fails the
 * call returns KDALAB_ENOMEM after writing (the heads it hit are NaN from
 * there on).
 */
kdalab_status kdalab_simd_recurrent_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *h0, float *o, float *ht);

/*
 * kdalab_simd_step_f32 — the decode step (one token of one head, in place),
 * arguments and errors exactly as kdalab_step_f32: S [K,V] becomes
 * Diag(a) S + k (beta (v - (Diag(a) S)^T k))^T and o = s S^T q. Single-threaded
 * (a server runs many heads side by side). Two passes over S.
 */
kdalab_status kdalab_simd_step_f32(kdalab_mechanism mech, size_t K, size_t V, float scale,
                                   const float *q, const float *k, const float *v,
                                   const float *g, float beta, float *S, float *o);

/*
 * kdalab_simd_chunk_f64 — the chunkwise form in float64 on the SIMD path
 * (lib/simd/entry.c): the kernels of kdalab_simd_chunk_f32 compiled
 * for double (4 doubles per AVX2 vector, 8 per AVX-512 vector), at the level
 * kdalab_simd_get_level() reports, threaded the same way. Arguments, shapes,
 * validation and errors exactly as kdalab_chunk_f64 (opts->precision must be
 * FP32). Outputs agree with kdalab_chunk_f64 within ~1e-12 relative to
 * max |o| (tests/test_simd_chunk.c checks it on random shapes, and the golden
 * cases against fla's outputs, at every level the CPU runs). The safe decay mode (the default) is
 * the fast path; the other decay modes are passed to kdalab_chunk_f64. With
 * opts == NULL it uses kdalab_simd_chunk_opts_default() (C = 16). Decay
 * factors below DBL_MIN are exactly 0. report: as kdalab_simd_chunk_f32's
 * (max_exponent 0 on the fast path). The workspace is twice the float32
 * path's bytes.
 */
kdalab_status kdalab_simd_chunk_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *h0, double *o, double *ht,
                                    const kdalab_chunk_opts *opts, kdalab_report *report);

/*
 * kdalab_simd_step_f64 — the decode step in float64 on the SIMD path,
 * arguments and errors exactly as kdalab_step_f64 (and as
 * kdalab_simd_step_f32 otherwise: single-threaded, two passes over S; on
 * KDALAB_ERANGE the step was taken). Agrees with kdalab_step_f64 within
 * ~1e-13 relative to max |o| (the dot products are summed in another order;
 * tests hold it to 1e-12), and S within ~1e-15.
 */
kdalab_status kdalab_simd_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                   const double *q, const double *k, const double *v,
                                   const double *g, double beta, double *S, double *o);

/*
 * kdalab_simd_chunk_bwd_f64 — the chunkwise backward on the SIMD path
 * (lib/simd/chunk_bwd.h): the algorithm of kdalab_chunk_bwd_f64 (boundary
 * states stored by a forward sweep, each chunk recomputed from its state and
 * differentiated, last to first) built on the forward's kernels, every
 * product through its register-blocked matrix product; the boundary states
 * are checkpointed (below), with the same bits. Arguments, shapes,
 * validation and errors exactly as kdalab_chunk_bwd_f64 (lib/kdalab_grad.h);
 * opts NULL means kdalab_simd_chunk_opts_default() (C = 16), the decay mode
 * must be KDALAB_DECAY_SAFE. OpenMP over batch x heads, one head per thread
 * at a time, so the result has the same bits for any thread count. Memory:
 * the states entering each group of G = ceil(sqrt(N)) chunks (N = ceil(T /
 * C)) and those of one group, about 2 sqrt(N) K V doubles per thread (the
 * reference keeps N + 1), plus O(C (C + K + V) + K V); each chunk outside
 * the last group runs its forward once more to rebuild its group's states.
 * With opts->bwd_state_bytes set and N + 2 states fitting in it, every state
 * is kept instead (no third forward); through kdalab_run_bwd_f64 with a
 * workspace, 0 means 128 MiB (lib/kdalab_forms.h). The same bits either
 * way. Decay factors are products of exp(g) <= 1 (below
 * DBL_MIN exactly 0), as in kdalab_simd_chunk_f64: any g <= 0 is exact.
 * Agrees with kdalab_chunk_bwd_f64 within ~1e-14 relative to each
 * gradient's max (tests/test_simd_bwd.c holds it to 1e-12 at every level
 * the CPU runs). Every linear mechanism runs KDA's per-channel code.
 * Through kdalab_run_bwd_f64 (kdalab_call.h) it takes varlen and grouped
 * value heads in place, one (sequence, value head) per task; it is a plain
 * batch of that call.
 */
kdalab_status kdalab_simd_chunk_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                        double scale, const double *q, const double *k,
                                        const double *v, const double *g, const double *beta,
                                        const double *h0, const double *d_o, const double *dht,
                                        double *dq, double *dk, double *dv, double *dg,
                                        double *dbeta, double *dh0,
                                        const kdalab_chunk_opts *opts);

/*
 * kdalab_simd_chunk_bwd_f32 — the same in float32 (arguments and errors as
 * kdalab_chunk_bwd_f32). Decay factors below FLT_MIN are exactly 0.
 */
kdalab_status kdalab_simd_chunk_bwd_f32(const kdalab_dims *dims, kdalab_mechanism mech,
                                        float scale, const float *q, const float *k,
                                        const float *v, const float *g, const float *beta,
                                        const float *h0, const float *d_o, const float *dht,
                                        float *dq, float *dk, float *dv, float *dg,
                                        float *dbeta, float *dh0, const kdalab_chunk_opts *opts);

KDALAB_END_DECLS

#endif /* KDALAB_SIMD_H */
