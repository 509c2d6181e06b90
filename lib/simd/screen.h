/*
 * lib/simd/screen.h — the vector input screen of the optimized path (the
 * kernel table's screen): a fast filter the dispatcher runs so it can skip
 * the library's exact check when every input is certainly legal.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: screen
 * needs: kernel_common.h
 *
 * It is not a statement of the rules: those live once, in lib/core/rules.c,
 * and so does every decision about a doubtful value and the wording of its
 * error. The screen only answers "certainly legal" (1) or "not sure" (0), and
 * may say "not sure" of legal input (it then costs one exact check, never a
 * different result). Its bounds come from SIMD_RULE_* in simd_internal.h.
 */

/* 1 when every x[i] is certainly legal under rule (finite, and for
 * KDALAB_RULE_LOG_DECAY <= SIMD_RULE_G_MAX, for KDALAB_RULE_BETA in
 * [SIMD_RULE_BETA_MIN, SIMD_RULE_BETA_MAX]); 0 when not sure. Whole vectors
 * are screened with the level's code, four at a time in independent chains
 * (sums of x - x: 0, or NaN for a NaN/Inf; running max and min, which start
 * at a legal value and skip NaN lanes, as the sums catch those); the last
 * n % VLEN elements by the library's own check (SIMD_CHECK_VALUES). */
static int SIMD_FN(screen)(const real *x, size_t n, kdalab_value_rule rule)
{
    const int bounded = rule == KDALAB_RULE_LOG_DECAY || rule == KDALAB_RULE_BETA;
    const vf start = VSET1(rule == KDALAB_RULE_BETA ? SIMD_RULE_BETA_MIN : SIMD_RULE_G_MAX);
    vf acc[4], hi[4], lo[4];
    SIMD_UNROLL(4)
    for (int u = 0; u < 4; u++) {
        acc[u] = VZERO();
        hi[u] = lo[u] = start;
    }
    const size_t nv = n / VLEN * VLEN, n4 = n / (4 * VLEN) * (4 * VLEN);
    for (size_t i = 0; i < n4; i += 4 * VLEN) {
        SIMD_UNROLL(4)
        for (int u = 0; u < 4; u++) {
            vf xv = VLOAD(x + i + (size_t)u * VLEN);
            acc[u] = VADD(acc[u], VSUB(xv, xv));
            if (bounded) {
                hi[u] = VMAX(xv, hi[u]);
                lo[u] = VMIN(xv, lo[u]);
            }
        }
    }
    for (size_t i = n4; i < nv; i += VLEN) {
        vf xv = VLOAD(x + i);
        acc[0] = VADD(acc[0], VSUB(xv, xv));
        if (bounded) {
            hi[0] = VMAX(xv, hi[0]);
            lo[0] = VMIN(xv, lo[0]);
        }
    }
    vf sum = VADD(VADD(acc[0], acc[1]), VADD(acc[2], acc[3]));
    vf mx = VMAX(VMAX(hi[0], hi[1]), VMAX(hi[2], hi[3]));
    vf mn = VMIN(VMIN(lo[0], lo[1]), VMIN(lo[2], lo[3]));
    int doubt = VHSUM(sum) != 0;
    if (rule == KDALAB_RULE_LOG_DECAY)
        doubt |= !VALL_LE(mx, SIMD_RULE_G_MAX);
    else if (rule == KDALAB_RULE_BETA)
        doubt |= !VALL_GE(mn, SIMD_RULE_BETA_MIN) || !VALL_LE(mx, SIMD_RULE_BETA_MAX);
    if (nv < n)
        doubt |= SIMD_CHECK_VALUES(rule, "x", x + nv, n - nv, NULL) != KDALAB_OK;
    return !doubt;
}
