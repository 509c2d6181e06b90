/*
 * bench/floors.h — what this machine's memory allows, measured in the same
 * run as the kernels it bounds (bench/simd.c prints both): the read bandwidth
 * of a stream too large for the cores' L2, and the time of a decode step's
 * two passes over its state with none of the step's other work. Header-only
 * (static functions), like bench/problem.h; needs now(), fma_loop_*'s
 * includes (immintrin.h, omp.h) and gsl_sort.
 *
 * They explain a gap, they do not time a kernel: a chunkwise call must read
 * its inputs twice (the input screen, then the kernel) and write o and ht, so
 * those bytes over the stream's bandwidth is time no kernel of this design
 * can go below; and a decode step whose 64 KB state does not fit L1 cannot be
 * faster than one read pass plus one read-modify-write pass over it.
 */
#ifndef KDALAB_BENCH_FLOORS_H
#define KDALAB_BENCH_FLOORS_H

/* Sum of x[0..n) (n a multiple of 64) in eight independent vector chains: the
 * loads, not the adds, set the pace. */
__attribute__((target("avx512f"))) static float floor_read_avx512(const float *x, size_t n)
{
    __m512 s[8];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 128)
        for (int j = 0; j < 8; j++)
            s[j] = _mm512_add_ps(s[j], _mm512_loadu_ps(x + i + 16 * j));
    for (int i = 1; i < 8; i++)
        s[0] = _mm512_add_ps(s[0], s[i]);
    return _mm512_reduce_add_ps(s[0]);
}

__attribute__((target("avx2"))) static float floor_read_avx2(const float *x, size_t n)
{
    __m256 s[8];
    for (int i = 0; i < 8; i++)
        s[i] = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 64)
        for (int j = 0; j < 8; j++)
            s[j] = _mm256_add_ps(s[j], _mm256_loadu_ps(x + i + 8 * j));
    for (int i = 1; i < 8; i++)
        s[0] = _mm256_add_ps(s[0], s[i]);
    float out[8];
    _mm256_storeu_ps(out, s[0]);
    return out[0];
}

static float floor_read_scalar(const float *x, size_t n)
{
    float s[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += x[i + j];
    return s[0] + s[7];
}

/* GB/s of nth threads reading disjoint parts of a `bytes` buffer (best of 5:
 * interference only slows a run down), at the widest level available. */
static double floor_read_gbs(int nth, size_t bytes, int level)
{
    size_t n = bytes / sizeof(float) / (128 * (size_t)nth) * (128 * (size_t)nth);
    float *x = aligned_alloc(64, n * sizeof *x);
    if (!x)
        return 0;
    for (size_t i = 0; i < n; i++)
        x[i] = 1e-3f * (float)(i % 97);
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now();
#pragma omp parallel num_threads(nth)
        {
            size_t part = n / (size_t)nth, i0 = part * (size_t)omp_get_thread_num();
            float v = level == 2   ? floor_read_avx512(x + i0, part)
                      : level == 1 ? floor_read_avx2(x + i0, part)
                                   : floor_read_scalar(x + i0, part);
#pragma omp critical
            sink += v;
        }
        t[r] = now() - t0;
    }
    gsl_sort(t, 1, 5);
    free(x);
    return (double)(n * sizeof(float)) / t[0] * 1e-9;
}

/* One decode step's memory traffic alone, on a [K, V] state S: pass 1 reads
 * S into two sums per column (as the step forms S^T k and S^T q), pass 2
 * rewrites it (S = a S + d d^T), in the opposite order. Strips of four
 * vectors at AVX-512 (V a multiple of 64) or AVX2 (of 32); floor_passes_c
 * otherwise (what the compiler makes of it at baseline x86-64, an upper bound
 * on a wider machine). */
__attribute__((target("avx512f"))) static void floor_passes_avx512(float *S, size_t K, size_t V,
                                                                   const float *a, const float *d,
                                                                   float *u)
{
    for (size_t j = 0; j < V; j += 64) { /* pass 1: strips of four vectors, 8 chains */
        __m512 s[8];
        for (int i = 0; i < 8; i++)
            s[i] = _mm512_setzero_ps();
        for (size_t ch = 0; ch < K; ch++) {
            const float *row = S + ch * V + j;
            __m512 x = _mm512_set1_ps(a[ch]), y = _mm512_set1_ps(d[ch]);
            for (int b = 0; b < 4; b++) {
                __m512 r = _mm512_loadu_ps(row + 16 * b);
                s[b] = _mm512_fmadd_ps(x, r, s[b]);
                s[4 + b] = _mm512_fmadd_ps(y, r, s[4 + b]);
            }
        }
        for (int b = 0; b < 4; b++)
            _mm512_storeu_ps(u + j + 16 * b, _mm512_add_ps(s[b], s[4 + b]));
    }
    for (size_t j = V; j >= 64; j -= 64) { /* pass 2: the other way round */
        __m512 dv[4];
        for (int b = 0; b < 4; b++)
            dv[b] = _mm512_loadu_ps(d + j - 64 + 16 * b);
        for (size_t ch = K; ch-- > 0;) {
            float *row = S + ch * V + j - 64;
            __m512 x = _mm512_set1_ps(a[ch]), y = _mm512_set1_ps(d[ch]);
            for (int b = 0; b < 4; b++) {
                __m512 r = _mm512_loadu_ps(row + 16 * b);
                _mm512_storeu_ps(row + 16 * b, _mm512_fmadd_ps(y, dv[b], _mm512_mul_ps(x, r)));
            }
        }
    }
}

__attribute__((target("avx2,fma"))) static void floor_passes_avx2(float *S, size_t K, size_t V,
                                                                 const float *a, const float *d,
                                                                 float *u)
{
    for (size_t j = 0; j < V; j += 32) {
        __m256 s[8];
        for (int i = 0; i < 8; i++)
            s[i] = _mm256_setzero_ps();
        for (size_t ch = 0; ch < K; ch++) {
            const float *row = S + ch * V + j;
            __m256 x = _mm256_set1_ps(a[ch]), y = _mm256_set1_ps(d[ch]);
            for (int b = 0; b < 4; b++) {
                __m256 r = _mm256_loadu_ps(row + 8 * b);
                s[b] = _mm256_fmadd_ps(x, r, s[b]);
                s[4 + b] = _mm256_fmadd_ps(y, r, s[4 + b]);
            }
        }
        for (int b = 0; b < 4; b++)
            _mm256_storeu_ps(u + j + 8 * b, _mm256_add_ps(s[b], s[4 + b]));
    }
    for (size_t j = V; j >= 32; j -= 32) {
        __m256 dv[4];
        for (int b = 0; b < 4; b++)
            dv[b] = _mm256_loadu_ps(d + j - 32 + 8 * b);
        for (size_t ch = K; ch-- > 0;) {
            float *row = S + ch * V + j - 32;
            __m256 x = _mm256_set1_ps(a[ch]), y = _mm256_set1_ps(d[ch]);
            for (int b = 0; b < 4; b++) {
                __m256 r = _mm256_loadu_ps(row + 8 * b);
                _mm256_storeu_ps(row + 8 * b, _mm256_fmadd_ps(y, dv[b], _mm256_mul_ps(x, r)));
            }
        }
    }
}

static void floor_passes_c(float *S, size_t K, size_t V, const float *a, const float *d,
                           float *u)
{
    for (size_t j = 0; j < V; j++)
        u[j] = 0;
    for (size_t ch = 0; ch < K; ch++)
        for (size_t j = 0; j < V; j++)
            u[j] += (a[ch] + d[ch]) * S[ch * V + j];
    for (size_t ch = K; ch-- > 0;)
        for (size_t j = 0; j < V; j++)
            S[ch * V + j] = a[ch] * S[ch * V + j] + d[ch] * d[j];
}

/* One pair of passes over S [K, V] at the level (2 AVX-512, 1 AVX2, 0 plain
 * C; a V the level's strips do not tile falls back to plain C). a [K], d
 * [max(K, V)], u [V]. */
static void floor_passes(float *S, size_t K, size_t V, const float *a, const float *d,
                         float *u, int level)
{
    if (level == 2 && V % 64 == 0)
        floor_passes_avx512(S, K, V, a, d, u);
    else if (level >= 1 && V % 32 == 0)
        floor_passes_avx2(S, K, V, a, d, u);
    else
        floor_passes_c(S, K, V, a, d, u);
}

#endif /* KDALAB_BENCH_FLOORS_H */
