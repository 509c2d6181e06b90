/*
 * lib/simd/screen.h — the vector input screen of the optimized path (the
 * kernel table's any_bad), run by the dispatcher before the exact checks.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: any_bad
 * needs: kernel_common.h
 */

/* Nonzero when some x[i] breaks the rule of its kind: NaN/Inf (every kind);
 * kind 1 (a log-decay g): > 0; kind 2 (beta): outside [0, 2]. A vector
 * screen: the caller finds the exact index and message with the reference's
 * scalar checks. */
static int SIMD_FN(any_bad)(const float *x, size_t n, int kind)
{
    /* y < the smallest positive float  <=>  y <= 0 (and false for NaN) */
    const float above0 = 1.40129846e-45f, above2 = 2.00000024f;
    vf acc = VZERO();
    size_t nv = n / VLEN * VLEN;
    int bad = 0;
    for (size_t i = 0; i < nv; i += VLEN) {
        vf xv = VLOAD(x + i);
        acc = VADD(acc, VSUB(xv, xv)); /* 0, or NaN for NaN/Inf */
        if (kind == 1)
            bad |= !VALL_LT(xv, above0);
        else if (kind == 2)
            bad |= !VALL_LT(VSUB(VZERO(), xv), above0) || !VALL_LT(xv, above2);
    }
    bad |= VHSUM(acc) != 0;
    for (size_t i = nv; i < n; i++)
        bad |= !isfinite(x[i]) || (kind == 1 && x[i] > 0) ||
               (kind == 2 && !(x[i] >= 0 && x[i] <= 2));
    return bad;
}
