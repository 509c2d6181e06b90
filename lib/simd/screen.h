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
 * are screened with the level's code; the last n % VLEN elements by the
 * library's own check (SIMD_CHECK_VALUES). */
static int SIMD_FN(screen)(const real *x, size_t n, kdalab_value_rule rule)
{
    vf acc = VZERO();
    size_t nv = n / VLEN * VLEN;
    int doubt = 0;
    for (size_t i = 0; i < nv; i += VLEN) {
        vf xv = VLOAD(x + i);
        acc = VADD(acc, VSUB(xv, xv)); /* 0, or NaN for NaN/Inf */
        if (rule == KDALAB_RULE_LOG_DECAY) /* (NaN compares false: doubt) */
            doubt |= !VALL_LE(xv, SIMD_RULE_G_MAX);
        else if (rule == KDALAB_RULE_BETA)
            doubt |= !VALL_GE(xv, SIMD_RULE_BETA_MIN) || !VALL_LE(xv, SIMD_RULE_BETA_MAX);
    }
    doubt |= VHSUM(acc) != 0;
    if (nv < n)
        doubt |= SIMD_CHECK_VALUES(rule, "x", x + nv, n - nv, NULL) != KDALAB_OK;
    return !doubt;
}
