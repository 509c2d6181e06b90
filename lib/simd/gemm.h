/*
 * lib/simd/gemm.h — the one matrix product of the optimized path: a
 * register-blocked micro-kernel (MR = 6 rows x NRV vectors of accumulators,
 * A broadcast, B streamed) and the driver that tiles a product with it, plus
 * the transpose that feeds it.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: micro, micro_any, gemm,
 * transpose
 * needs: kernel_common.h (included before it by the ISA file); the ISA file
 * may set SIMD_NRV (default 2)
 *
 * NRV is the level's choice because it is bounded by the register file:
 * MR x NRV accumulators + NRV vectors of B + one broadcast of A must fit.
 * With 16 registers (AVX2) that is 6 x 2 (15 registers); with AVX-512's 32
 * it is 6 x 4 (29), which loads 10 vectors per 24 multiply-adds instead of
 * 8 per 12 and halves how often the accumulators are loaded and stored.
 */

#define MR 6 /* rows of the register block */
#ifdef SIMD_NRV
#define NRV SIMD_NRV /* vectors per row of the block */
#else
#define NRV 2
#endif

/* One register block: C[mr x nv*VLEN] = (accumulate ? diag(rs) C : 0) +
 * A[mr x kd] B[kd x nv*VLEN], rs NULL meaning no scaling. */
SIMD_INLINE void SIMD_FN(micro)(const int mr, const int nv, size_t kd, const real *A,
                                size_t rsa, size_t csa, const real *B, size_t ldb, real *C,
                                size_t ldc, int accumulate, const real *rs)
{
    vf c[MR][NRV];
    SIMD_UNROLL(MR)
    for (int m = 0; m < MR; m++)
        SIMD_UNROLL(NRV)
        for (int n = 0; n < NRV; n++) {
            c[m][n] = (m < mr && n < nv && accumulate) ? VLOAD(C + m * ldc + n * VLEN) : VZERO();
            if (m < mr && n < nv && accumulate && rs)
                c[m][n] = VMUL(VSET1(rs[m]), c[m][n]);
        }
    SIMD_UNROLL(2)
    for (size_t p = 0; p < kd; p++) {
        const real *bp = B + p * ldb;
        vf b[NRV];
        SIMD_UNROLL(NRV)
        for (int n = 0; n < NRV; n++)
            b[n] = n < nv ? VLOAD(bp + n * VLEN) : VZERO();
        const real *ap = A + p * csa;
        SIMD_UNROLL(MR)
        for (int m = 0; m < MR; m++) {
            if (m < mr) {
                vf a = VSET1(ap[m * rsa]);
                SIMD_UNROLL(NRV)
                for (int n = 0; n < NRV; n++)
                    if (n < nv)
                        c[m][n] = VFMA(a, b[n], c[m][n]);
            }
        }
    }
    SIMD_UNROLL(MR)
    for (int m = 0; m < MR; m++)
        SIMD_UNROLL(NRV)
        for (int n = 0; n < NRV; n++)
            if (m < mr && n < nv)
                VSTORE(C + m * ldc + n * VLEN, c[m][n]);
}

/* micro with mr and nv as compile-time constants (1 <= mr <= MR,
 * 1 <= nv <= NRV), so every block shape gets its own unrolled code. */
static void SIMD_FN(micro_any)(int mr, int nv, size_t kd, const real *A, size_t rsa,
                               size_t csa, const real *B, size_t ldb, real *C, size_t ldc,
                               int accumulate, const real *rs)
{
#define SIMD_MICRO_NV(R, N)                                                                   \
    case N:                                                                                   \
        SIMD_FN(micro)(R, (N) <= NRV ? (N) : NRV, kd, A, rsa, csa, B, ldb, C, ldc,            \
                       accumulate, rs);                                                       \
        break;
#define SIMD_MICRO_CASE(R)                                                                    \
    case R:                                                                                   \
        switch (nv) {                                                                         \
            SIMD_MICRO_NV(R, 4)                                                               \
            SIMD_MICRO_NV(R, 3)                                                               \
            SIMD_MICRO_NV(R, 2)                                                               \
        default:                                                                              \
            SIMD_FN(micro)(R, 1, kd, A, rsa, csa, B, ldb, C, ldc, accumulate, rs);            \
            break;                                                                            \
        }                                                                                     \
        break;
    switch (mr) {
        SIMD_MICRO_CASE(6)
        SIMD_MICRO_CASE(5)
        SIMD_MICRO_CASE(4)
        SIMD_MICRO_CASE(3)
        SIMD_MICRO_CASE(2)
        SIMD_MICRO_CASE(1)
    default:
        break;
    }
#undef SIMD_MICRO_CASE
#undef SIMD_MICRO_NV
}

/*
 * C[M x N] = (accumulate ? diag(rs) C : 0) + A[M x Kd] B[Kd x N] (rs: M row
 * scales, or NULL for none; the scaling is one rounding before the sum, as a
 * separate pass over C would be).
 * A's element (m, p) is A[m*rsa + p*csa] (so a transposed A is rsa = 1,
 * csa = its row length); B and C are row-major with leading dims ldb, ldc.
 * lower: A is lower-triangular including the diagonal (A[m][p] = 0 for p > m
 * and stored as 0), so row block m0.. only reads p < m0 + rows.
 */
static void SIMD_FN(gemm_rs)(size_t M, size_t N, size_t Kd, const real *A, size_t rsa,
                             size_t csa, const real *B, size_t ldb, real *C, size_t ldc,
                             int accumulate, int lower, const real *rs)
{
    size_t n0 = 0;
    for (int nv; n0 + VLEN <= N; n0 += (size_t)nv * VLEN) {
        nv = (int)SIMD_FN(min_sz)(NRV, (N - n0) / VLEN); /* vectors in this column block */
        for (size_t m0 = 0, mr; m0 < M; m0 += mr) {
            /* blocks of 6 rows; 7 or 8 rows left go as 4 + 3 or 4 + 4 (a block
             * of 1 or 2 rows has too few accumulators to hide FMA latency) */
            size_t left = M - m0;
            mr = (left == 7 || left == 8) ? 4 : SIMD_FN(min_sz)(MR, left);
            size_t kd = lower ? SIMD_FN(min_sz)(Kd, m0 + mr) : Kd;
            SIMD_FN(micro_any)((int)mr, nv, kd, A + m0 * rsa, rsa, csa, B + n0, ldb,
                               C + m0 * ldc + n0, ldc, accumulate, rs ? rs + m0 : NULL);
        }
    }
    /* columns left over (fewer than one vector) */
    for (; n0 < N; n0++)
        for (size_t m = 0; m < M; m++) {
            size_t kd = lower ? SIMD_FN(min_sz)(Kd, m + 1) : Kd;
            real s = accumulate ? C[m * ldc + n0] : 0.0f;
            if (accumulate && rs)
                s *= rs[m];
            for (size_t p = 0; p < kd; p++)
                s += A[m * rsa + p * csa] * B[p * ldb + n0];
            C[m * ldc + n0] = s;
        }
}

/* gemm_rs without row scales. */
static inline void SIMD_FN(gemm)(size_t M, size_t N, size_t Kd, const real *A, size_t rsa,
                                 size_t csa, const real *B, size_t ldb, real *C, size_t ldc,
                                 int accumulate, int lower)
{
    SIMD_FN(gemm_rs)(M, N, Kd, A, rsa, csa, B, ldb, C, ldc, accumulate, lower, NULL);
}

/* dst[K x n] = src[n x K]^T (src rows lds apart, dst row length n): each
 * source row read once, contiguously, and scattered down a destination column
 * (the inner loop is unrolled: its body is only one load and one store). */
static void SIMD_FN(transpose)(real *dst, const real *src, size_t lds, size_t n, size_t K)
{
    for (size_t r = 0; r < n; r++) {
        const real *s = src + r * lds;
        real *d = dst + r;
        SIMD_UNROLL(8)
        for (size_t c = 0; c < K; c++)
            d[c * n] = s[c];
    }
}

#undef MR
#undef NRV
