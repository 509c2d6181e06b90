/*
 * lib/simd/step_kernel.h — the decode step of the optimized path (one token
 * of one head, in place, in two passes over the state S), the kernel table's
 * step.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: step_read4, step_read_strips,
 * step_read, step_read_wrap, step_write_strips, step_write, step_write_wrap, step
 * needs: kernel_common.h
 */

#define STEP_SMALL 512 /* K and V up to this: scratch on the stack, else malloc */

/* Pass 1 of the decode step for four vectors of columns of S [K, V],
 * starting at columns p[0..3]: u_j = sum_ch ak_ch S[ch][j] and
 * wq_j = sum_ch aq_ch S[ch][j] (8 accumulators, 4 loads per row). The
 * vectors may overlap or repeat: each computes its columns' full sums, in the
 * same order, so a column written twice gets the same value twice. */
static void SIMD_FN(step_read4)(const real *S, size_t K, size_t V, const size_t p[4],
                                const real *ak, const real *aq, real *u, real *wq)
{
    vf u0 = VZERO(), u1 = VZERO(), u2 = VZERO(), u3 = VZERO();
    vf w0 = VZERO(), w1 = VZERO(), w2 = VZERO(), w3 = VZERO();
    for (size_t ch = 0; ch < K; ch++) {
        const real *row = S + ch * V;
        vf akv = VSET1(ak[ch]), aqv = VSET1(aq[ch]);
        vf r0 = VLOAD(row + p[0]), r1 = VLOAD(row + p[1]);
        vf r2 = VLOAD(row + p[2]), r3 = VLOAD(row + p[3]);
        u0 = VFMA(akv, r0, u0); u1 = VFMA(akv, r1, u1);
        u2 = VFMA(akv, r2, u2); u3 = VFMA(akv, r3, u3);
        w0 = VFMA(aqv, r0, w0); w1 = VFMA(aqv, r1, w1);
        w2 = VFMA(aqv, r2, w2); w3 = VFMA(aqv, r3, w3);
    }
    VSTORE(u + p[0], u0); VSTORE(u + p[1], u1); VSTORE(u + p[2], u2); VSTORE(u + p[3], u3);
    VSTORE(wq + p[0], w0); VSTORE(wq + p[1], w1); VSTORE(wq + p[2], w2); VSTORE(wq + p[3], w3);
}

/* Pass 1's strips: nb strips of four vectors from column j0. */
static void SIMD_FN(step_read_strips)(const real *S, size_t K, size_t V, size_t j0, size_t nb,
                                      const real *ak, const real *aq, real *u, real *wq)
{
    for (size_t b = 0; b < nb; b++) {
        const size_t j = j0 + b * 4 * VLEN, p[4] = {j, j + VLEN, j + 2 * VLEN, j + 3 * VLEN};
        SIMD_FN(step_read4)(S, K, V, p, ak, aq, u, wq);
    }
}

/* Pass 1 of the decode step over all columns of S [K, V] (V >= VLEN): the
 * strips of four vectors from column head on, then the columns before head
 * and after the last strip as vectors that stay inside [0, V) (overlapping
 * their neighbours where needed), four at a time. */
static void SIMD_FN(step_read)(const real *S, size_t K, size_t V, size_t head,
                               const real *ak, const real *aq, real *u, real *wq)
{
    const size_t VB = 4 * VLEN, nb = (V - head) / VB, jv = head + nb * VB;
    SIMD_FN(step_read_strips)(S, K, V, head, nb, ak, aq, u, wq);
    size_t p[4], np = 0;
    const size_t lastv = V - VLEN;
    for (int part = 0; part < 2; part++) {
        size_t x0 = part == 0 ? 0 : jv, x1 = part == 0 ? head : V;
        for (size_t x = x0; x < x1; x += VLEN) {
            p[np++] = SIMD_FN(min_sz)(x, lastv);
            if (np == 4) {
                SIMD_FN(step_read4)(S, K, V, p, ak, aq, u, wq);
                np = 0;
            }
        }
    }
    if (np > 0) {
        for (size_t i = np; i < 4; i++)
            p[i] = p[0]; /* repeats: the same sums again */
        SIMD_FN(step_read4)(S, K, V, p, ak, aq, u, wq);
    }
}

/* The state off a vector boundary. When S is not on a VLEN-element boundary
 * but V is a multiple of VLEN, every row starts h = 1 .. VLEN - 1 elements
 * before one, and S, read as one flat array, is a run of aligned vectors:
 * per row, V / VLEN - 1 "plain" vectors at columns h, h + VLEN, ..., and one
 * "wrap" vector at flat position ch V + V - VLEN + h whose first VLEN - h
 * lanes are row ch's last columns and whose other h lanes are row ch + 1's
 * first columns. Weighing each lane by its own row's factor (a two-valued
 * vector, VBLEND) lets the kernel read and write the wrap
 * vector like any other. Left over: row 0's first h columns and row K - 1's
 * last VLEN - h, done as scalars with RFMA, in the place the aligned kernel
 * adds them, so every sum is the same sequence of fused multiply-adds and
 * the result the same values whatever S's alignment. */

/* The two-valued weights of the wrap vector: x in the lanes of mask m
 * (those < VLEN - h), y in the rest. */
#define STEP_PAIR(x, y, m) VBLEND((m), VSET1(x), VSET1(y))

/* Pass 1 with S off a vector boundary (h as above): the np <= 3 plain
 * vectors at columns p[0..np-1] (repeats allowed, as in step_read4) and the
 * wrap vector, over every row. */
static void SIMD_FN(step_read_wrap)(const real *S, size_t K, size_t V, size_t h,
                                    const size_t p[3], const real *ak, const real *aq,
                                    real *u, real *wq)
{
    const size_t lo_n = VLEN - h, cw = V - lo_n; /* wrap lane l < lo_n: column cw + l */
    real ui[VLEN], wi[VLEN];
    for (size_t l = 0; l < VLEN; l++) { /* lanes >= lo_n start with row 0's term, */
        ui[l] = l < lo_n ? 0.0f : RFMA(ak[0], S[l - lo_n], 0.0f); /* rounded as VFMA */
        wi[l] = l < lo_n ? 0.0f : RFMA(aq[0], S[l - lo_n], 0.0f); /* on 0 (-0 -> +0) */
    }
    const vmask lo = VMASK_LO(lo_n);
    vf uw = VLOAD(ui), ww = VLOAD(wi);
    vf u0 = VZERO(), u1 = VZERO(), u2 = VZERO(), w0 = VZERO(), w1 = VZERO(), w2 = VZERO();
    for (size_t ch = 0; ch < K; ch++) {
        const real *row = S + ch * V;
        vf akv = VSET1(ak[ch]), aqv = VSET1(aq[ch]);
        vf r0 = VLOAD(row + p[0]), r1 = VLOAD(row + p[1]), r2 = VLOAD(row + p[2]);
        u0 = VFMA(akv, r0, u0); u1 = VFMA(akv, r1, u1); u2 = VFMA(akv, r2, u2);
        w0 = VFMA(aqv, r0, w0); w1 = VFMA(aqv, r1, w1); w2 = VFMA(aqv, r2, w2);
        if (ch + 1 < K) {
            vf r = VLOAD(row + cw);
            uw = VFMA(STEP_PAIR(ak[ch], ak[ch + 1], lo), r, uw);
            ww = VFMA(STEP_PAIR(aq[ch], aq[ch + 1], lo), r, ww);
        }
    }
    VSTORE(u + p[0], u0); VSTORE(u + p[1], u1); VSTORE(u + p[2], u2);
    VSTORE(wq + p[0], w0); VSTORE(wq + p[1], w1); VSTORE(wq + p[2], w2);
    VSTORE(ui, uw);
    VSTORE(wi, ww);
    const real *last = S + (K - 1) * V;
    for (size_t l = 0; l < VLEN; l++) { /* lanes < lo_n: row K - 1's term last */
        const size_t j = l < lo_n ? cw + l : l - lo_n;
        u[j] = l < lo_n ? RFMA(ak[K - 1], last[j], ui[l]) : ui[l];
        wq[j] = l < lo_n ? RFMA(aq[K - 1], last[j], wi[l]) : wi[l];
    }
}

/* The strips of pass 2: nb strips of four vectors from column j0, the last
 * strip first, last row first (what pass 1 read last is still in L1, and
 * what is written last is what the next step reads first). Returns nonzero
 * when a value it wrote is not finite (the state overflowed): x - x is 0 for
 * a finite x and NaN otherwise, summed into accumulators that stay 0 while
 * everything is finite, at no extra pass. */
static int SIMD_FN(step_write_strips)(real *S, size_t K, size_t V, size_t j0, size_t nb,
                                      const real *a, const real *k, const real *d)
{
    const size_t VB = 4 * VLEN;
    vf bad0 = VZERO(), bad1 = VZERO(), bad2 = VZERO(), bad3 = VZERO();
    for (size_t b = nb; b-- > 0;) {
        const size_t j = j0 + b * VB;
        vf d0 = VLOAD(d + j), d1 = VLOAD(d + j + VLEN);
        vf d2 = VLOAD(d + j + 2 * VLEN), d3 = VLOAD(d + j + 3 * VLEN);
        for (size_t ch = K; ch-- > 0;) {
            real *row = S + ch * V + j;
            vf kv = VSET1(k[ch]), av = VSET1(a ? a[ch] : 1.0f);
            vf x0 = VFMA(kv, d0, VMUL(av, VLOAD(row)));
            vf x1 = VFMA(kv, d1, VMUL(av, VLOAD(row + VLEN)));
            vf x2 = VFMA(kv, d2, VMUL(av, VLOAD(row + 2 * VLEN)));
            vf x3 = VFMA(kv, d3, VMUL(av, VLOAD(row + 3 * VLEN)));
            VSTORE(row, x0);
            VSTORE(row + VLEN, x1);
            VSTORE(row + 2 * VLEN, x2);
            VSTORE(row + 3 * VLEN, x3);
            bad0 = VADD(bad0, VSUB(x0, x0));
            bad1 = VADD(bad1, VSUB(x1, x1));
            bad2 = VADD(bad2, VSUB(x2, x2));
            bad3 = VADD(bad3, VSUB(x3, x3));
        }
    }
    return VHSUM(VADD(VADD(bad0, bad1), VADD(bad2, bad3))) != 0.0f; /* NaN != 0 */
}

/* Pass 2 of the decode step: S[ch][j] = a_ch S[ch][j] + k_ch d_j (a = NULL:
 * a_ch = 1), in the opposite order of step_read: first the columns outside
 * its strips, row by row, then the strips (step_write_strips). Returns
 * nonzero when a value it wrote is not finite. */
static int SIMD_FN(step_write)(real *S, size_t K, size_t V, size_t j0, const real *a,
                               const real *k, const real *d)
{
    const size_t VB = 4 * VLEN;
    const size_t nb = (V - j0) / VB, jv = j0 + nb * VB;
    vf bad0 = VZERO();
    int bad_tail = 0;
    for (size_t ch = K; ch-- > 0;) { /* columns before j0 and after the last strip */
        real *row = S + ch * V;
        const real as = a ? a[ch] : 1.0f;
        vf kv = VSET1(k[ch]), av = VSET1(as);
        for (int part = 0; part < 2; part++) {
            size_t j = part == 0 ? 0 : jv, je = part == 0 ? j0 : V;
            for (; j + VLEN <= je; j += VLEN) {
                vf x = VFMA(kv, VLOAD(d + j), VMUL(av, VLOAD(row + j)));
                VSTORE(row + j, x);
                bad0 = VADD(bad0, VSUB(x, x));
            }
            for (; j < je; j++) { /* rounded as a vector lane: same bits at any offset */
                row[j] = RFMA(k[ch], d[j], as * row[j]);
                bad_tail |= !isfinite(row[j]);
            }
        }
    }
    return SIMD_FN(step_write_strips)(S, K, V, j0, nb, a, k, d) | bad_tail |
           (VHSUM(bad0) != 0.0f); /* NaN != 0 */
}

/* Pass 2 with S off a vector boundary (h as for step_read_wrap): the np
 * plain vectors at columns p[0..np-1] (distinct: a write twice would update
 * twice) and the wrap vector, rows in the opposite order of pass 1, and the
 * two scalar ends. Returns nonzero when a value it wrote is not finite. */
static int SIMD_FN(step_write_wrap)(real *S, size_t K, size_t V, size_t h, const size_t *p,
                                    size_t np /* <= 3 */, const real *a, const real *k, const real *d)
{
    const size_t lo_n = VLEN - h, cw = V - lo_n;
    real dw[VLEN];
    for (size_t l = 0; l < VLEN; l++)
        dw[l] = d[l < lo_n ? cw + l : l - lo_n];
    const vmask lo = VMASK_LO(lo_n);
    const vf dv = VLOAD(dw);
    vf dp[3] = {VZERO(), VZERO(), VZERO()};
    for (size_t i = 0; i < np; i++)
        dp[i] = VLOAD(d + p[i]);
    vf bad = VZERO();
    int bad_tail = 0;
    real *last = S + (K - 1) * V;
    const real a_last = a ? a[K - 1] : 1.0f;
    for (size_t j = cw; j < V; j++) { /* row K - 1's last columns: no wrap vector */
        last[j] = RFMA(k[K - 1], d[j], a_last * last[j]);
        bad_tail |= !isfinite(last[j]);
    }
    for (size_t ch = K; ch-- > 0;) {
        real *row = S + ch * V;
        vf kv = VSET1(k[ch]), av = VSET1(a ? a[ch] : 1.0f);
        SIMD_UNROLL(3)
        for (size_t i = 0; i < np; i++) {
            vf x = VFMA(kv, dp[i], VMUL(av, VLOAD(row + p[i])));
            VSTORE(row + p[i], x);
            bad = VADD(bad, VSUB(x, x));
        }
        if (ch + 1 < K) {
            vf kw = STEP_PAIR(k[ch], k[ch + 1], lo);
            vf aw = a ? STEP_PAIR(a[ch], a[ch + 1], lo) : VSET1(1.0f);
            vf x = VFMA(kw, dv, VMUL(aw, VLOAD(row + cw)));
            VSTORE(row + cw, x);
            bad = VADD(bad, VSUB(x, x));
        }
    }
    const real a0 = a ? a[0] : 1.0f;
    for (size_t j = 0; j < h; j++) { /* row 0's first columns: no wrap vector */
        S[j] = RFMA(k[0], d[j], a0 * S[j]);
        bad_tail |= !isfinite(S[j]);
    }
    return bad_tail || VHSUM(bad) != 0.0f; /* NaN != 0 */
}

/*
 * One token of one head, in place, in two passes over S:
 *   pass 1 (reads S only): u = S^T (a*k) and w = S^T (a*q). Every element of
 *     S enters u with a factor (a*k)_ch, and 0 * Inf, 0 * NaN are NaN, so a
 *     NaN/Inf anywhere in S makes some u_j non-finite: that is the finiteness
 *     screen (S is then rescanned to be sure; nothing has been written yet);
 *   then delta = beta (v - u) and o = s (w + delta (k . q)), which is
 *     s S_new^T q for S_new = Diag(a) S + k delta^T without a reduction over
 *     the new state;
 *   pass 2 (writes S): S = Diag(a) S + k delta^T, in pass 1's column strips
 *     taken in the opposite order (step_read, step_write).
 * Without the delta rule delta = v; without a decay a = 1.
 */
static kdalab_status SIMD_FN(step)(kdalab_mechanism mech, size_t K, size_t V, real scale,
                                   const real *q, const real *k, const real *v,
                                   const real *g, real beta, real *S, real *o,
                                   size_t *bad)
{
    real small_buf[5 * STEP_SMALL];
    real *buf = small_buf;
    if (K > STEP_SMALL || V > STEP_SMALL) {
        buf = malloc((3 * K + 2 * V) * sizeof(real));
        if (!buf)
            return KDALAB_ENOMEM;
    }
    /* decay, decay*k, decay*q; then u (becomes delta), w */
    real *a = buf, *ak = buf + K, *aq = buf + 2 * K;
    real *u = buf + 3 * K, *wq = u + V;
    const size_t Kv = K / VLEN * VLEN;
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(mech);
    const int decays = gs != KDALAB_G_NONE, delta = kdalab_mechanism_has_delta(mech);

    if (gs == KDALAB_G_PER_KEY) {
        for (size_t ch = 0; ch < Kv; ch += VLEN)
            VSTORE(a + ch, VEXP(VLOAD(g + ch)));
        for (size_t ch = Kv; ch < K; ch++)
            a[ch] = REXP(g[ch]);
    } else {
        real a0 = gs == KDALAB_G_PER_HEAD ? REXP(g[0]) : 1.0f;
        for (size_t ch = 0; ch < K; ch++)
            a[ch] = a0;
    }
    vf kqv = VZERO();
    for (size_t ch = 0; ch < Kv; ch += VLEN) {
        vf av = VLOAD(a + ch), kv = VLOAD(k + ch), qv = VLOAD(q + ch);
        VSTORE(ak + ch, VMUL(av, kv));
        VSTORE(aq + ch, VMUL(av, qv));
        kqv = VFMA(kv, qv, kqv);
    }
    real kq = VHSUM(kqv);
    for (size_t ch = Kv; ch < K; ch++) {
        ak[ch] = a[ch] * k[ch];
        aq[ch] = a[ch] * q[ch];
        kq += k[ch] * q[ch];
    }

    /* Strips of S's columns from the first 64-byte boundary of row 0 on, then
     * the few before it: strips that start on a cache line (a vector load
     * that straddles two lines costs about as much as two loads; bench/simd.c
     * times the step with S on and off a cache line). S off a vector
     * boundary with V a multiple of VLEN: the wrap layout (step_read_wrap),
     * every load aligned. */
    size_t head = 0;
    const size_t vbytes = VLEN * sizeof(real);
    const int wrap = VLEN > 1 && K >= 2 && V % VLEN == 0 && V >= 2 * VLEN &&
                     (uintptr_t)S % sizeof(real) == 0 && (uintptr_t)S % vbytes != 0;
    size_t nb = 0, np = 0, p[3];
    if (wrap) { /* V / VLEN - 1 plain vectors from column head: strips, then np */
        head = (vbytes - (uintptr_t)S % vbytes) / sizeof(real);
        const size_t m = V / VLEN - 1;
        nb = m / 4;
        np = m % 4;
        /* pass 1 reads three: the np left, repeated, or (np = 0) the last
         * strip's last vector again (the same sums, the same bits) */
        for (size_t i = 0; i < 3; i++)
            p[i] = head + (np ? 4 * nb + (i < np ? i : 0) : 4 * nb - 1) * VLEN;
    } else if ((uintptr_t)S % sizeof(real) == 0) {
        head = SIMD_FN(min_sz)((64 - (uintptr_t)S % 64) % 64 / sizeof(real), V);
    }

    /* pass 1 */
    if (wrap) {
        SIMD_FN(step_read_strips)(S, K, V, head, nb, ak, aq, u, wq);
        SIMD_FN(step_read_wrap)(S, K, V, head, p, ak, aq, u, wq);
    } else if (V >= VLEN) {
        SIMD_FN(step_read)(S, K, V, head, ak, aq, u, wq);
    } else {
        for (size_t j = 0; j < V; j++) {
            real u0 = 0, w0 = 0;
            for (size_t ch = 0; ch < K; ch++) {
                u0 += ak[ch] * S[ch * V + j];
                w0 += aq[ch] * S[ch * V + j];
            }
            u[j] = u0;
            wq[j] = w0;
        }
    }
    int finite = 1;
    for (size_t j = 0; j < V; j++)
        finite &= isfinite(u[j]) != 0;
    if (!finite) { /* maybe S holds a NaN/Inf, maybe u overflowed: look */
        for (size_t i = 0; i < K * V; i++)
            if (!isfinite(S[i])) {
                *bad = i;
                if (buf != small_buf)
                    free(buf);
                return KDALAB_ENONFINITE;
            }
    }
    /* delta (in u) and o */
    for (size_t j = 0; j < V; j++) {
        real d = delta ? beta * (v[j] - u[j]) : v[j];
        u[j] = d;
        o[j] = scale * (wq[j] + d * kq);
    }

    /* pass 2, in the opposite order of pass 1; it reports an overflowed state */
    int overflowed;
    if (wrap)
        overflowed = SIMD_FN(step_write_wrap)(S, K, V, head, p, np, decays ? a : NULL, k, u) |
                     SIMD_FN(step_write_strips)(S, K, V, head, nb, decays ? a : NULL, k, u);
    else
        overflowed = SIMD_FN(step_write)(S, K, V, head, decays ? a : NULL, k, u);
    if (buf != small_buf)
        free(buf);
    return overflowed ? KDALAB_ERANGE : KDALAB_OK;
}

#undef STEP_SMALL
#undef STEP_PAIR
