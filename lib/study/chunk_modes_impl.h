/*
 * lib/study/chunk_modes_impl.h — the chunkwise form with every KDA decay mode
 * and emulated storage precision, written once over `real` and instantiated
 * for float64 and float32 by lib/study/chunk_modes.c (through lib/study/real.h).
 *
 * defines (static, per suffix _f64 / _f32): study_chunk and its steps.
 *
 * The algorithm is lib/reference/chunk.c's (REFERENCE.md steps 1-7); read that
 * file first. What this one adds is what experiment 03 and the precision tests
 * study:
 *   - decay modes: besides the reference's safe sub-chunks, the C x C x K
 *     pairwise yardstick, the chapter's rescaled q * gamma, k / gamma, and the
 *     production kernels' anchored sub-chunks — the last two form POSITIVE
 *     exponents and overflow when |sum g| over their span exceeds the range
 *     (REFERENCE.md, "Where the floating-point range problem lives");
 *   - storage precision (float32 instance only): inputs and rescaled rows
 *     rounded to bf16 or fp16 where a production kernel stores them, every
 *     sum accumulated in float32;
 *   - the largest exponent formed, for kdalab_report.
 * Gated DeltaNet keeps its one decay per position here (a C x C mask), as the
 * production kernels do.
 *
 * Every exponent is formed as a sum over its span, never as the difference
 * of two cumulative sums: the g are all <= 0, so a span sum has no
 * cancellation, while Gamma_i - Gamma_j loses every small g that follows one
 * large one (-1e20 + -1 == -1e20) and would turn a decay into none.
 */

/* Everything one chunk needs; buffers are sized for a full chunk of C. */
typedef struct {
    size_t L, K, V;            /* positions in this chunk, head dims            */
    size_t gw;                 /* log-decay values per position: 0, 1 or K      */
    kdalab_chunk_opts opts;    /* chunk, sub-chunk, decay mode, precision       */
    real scale;
    real *Q, *Kc, *Vc, *beta;  /* the chunk's rows: [L,K], [L,K], [L,V], [L]     */
    real *g;                   /* log-decay of the chunk's rows [L, gw]         */
    real *Gin, *Gout;          /* [L, gw] sum of g over 0..r, over r+1..L-1     */
    real *Akk, *Aqk;           /* [C,C] lower-triangular score matrices          */
    real *W, *U;               /* [C,K], [C,V] right-hand sides of the UT solve  */
    real *Xs, *Ys;             /* [C,K] rows rescaled by a decay factor          */
    real *E;                   /* [C,K] exponents: span sums of g                */
    real *run;                 /* [K] a running span sum                         */
    real *S;                   /* [K,V] the state entering / leaving the chunk   */
    double max_exponent;       /* largest exponent formed (for the report)       */
} FN(chunk_ws);

/* Where a production kernel stores a value, emulate its storage format. */
static inline real FN(store)(const FN(chunk_ws) *w, real x)
{
#if KDALAB_REAL == 32
    return kdalab_round(w->opts.precision, x);
#else
    (void)w;
    return x;
#endif
}

static real FN(dot)(const real *x, const real *y, size_t n)
{
    real s = 0;
    for (size_t c = 0; c < n; c++)
        s += x[c] * y[c];
    return s;
}

/* dst = store(src * exp(sign * e)) per channel; records the exponent. */
static void FN(rescale_row)(FN(chunk_ws) *w, real *dst, const real *src, const real *e,
                            real sign)
{
    for (size_t c = 0; c < w->K; c++) {
        real x = sign * e[c];
        if (x > w->max_exponent)
            w->max_exponent = x;
        dst[c] = FN(store)(w, src[c] * EXP(x));
    }
}

/*
 * The decayed Gram matrix of two sets of rows of the chunk:
 *   out[i][j] = sum_c X[i][c] Y[j][c] exp(sum_{m=j+1..i} g_m[c])   for j < i
 * (and j == i when include_diag). Steps 1 and 5 of REFERENCE.md. Only j <= i
 * is ever touched, so o[i] cannot depend on a later position, not even
 * through a zero.
 *
 * For KDA this is where the decay modes differ. The rows are cut into
 * sub-chunks (of c positions; of the whole chunk for pairwise/rescaled), and
 * a query row i in the sub-chunk [i0, i1) is anchored at the boundary before
 * i0:
 *   - rows j of an EARLIER sub-chunk: the decay factors into
 *     exp(sum_{m=i0..i} g_m) * exp(sum_{m=j+1..i0-1} g_m), both exponents
 *     <= 0: a plain dot of rescaled rows;
 *   - rows j of the SAME sub-chunk: pairwise (safe, pairwise modes: every
 *     exponent <= 0) or rescaled about the anchor (rescaled, anchored modes:
 *     Y_j * exp(-sum_{m=i0..j} g_m) has a POSITIVE exponent, up to |sum g|
 *     over the span — the floating-point range problem).
 */
static void FN(decayed_gram)(FN(chunk_ws) *w, const real *X, const real *Y, int include_diag,
                             real *out)
{
    const size_t L = w->L, K = w->K, C = w->opts.chunk;
    const real *g = w->g;

    if (w->gw <= 1) { /* no decay, or one scalar per position: a C x C mask */
        for (size_t i = 0; i < L; i++) {
            real e = 0; /* sum_{m=j+1..i} g_m, grown as j walks down from i */
            for (size_t j = i + 1; j-- > 0;) {
                if (j < i || include_diag) {
                    real d = FN(dot)(X + i * K, Y + j * K, K);
                    out[i * C + j] = w->gw ? d * EXP(e) : d; /* exponent <= 0 */
                }
                if (w->gw)
                    e += g[j];
            }
        }
        return;
    }

    kdalab_decay_mode mode = w->opts.decay;
    size_t sub = (mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_ANCHORED)
                     ? w->opts.subchunk
                     : L;
    int diag_pairwise = (mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_PAIRWISE);
    real *E = w->E, *run = w->run;

    for (size_t i0 = 0; i0 < L; i0 += sub) {
        size_t i1 = i0 + sub < L ? i0 + sub : L;

        /* X rows decayed down to the anchor: E_i = sum_{m=i0..i} g_m <= 0 */
        for (size_t i = i0; i < i1; i++) {
            for (size_t c = 0; c < K; c++)
                E[i * K + c] = (i > i0 ? E[(i - 1) * K + c] : 0) + g[i * K + c];
            FN(rescale_row)(w, w->Xs + i * K, X + i * K, E + i * K, 1);
        }

        /* off-diagonal blocks: Y rows of earlier sub-chunks, decayed up to the
         * anchor by exp(sum_{m=j+1..i0-1} g_m) <= 1 */
        memset(run, 0, K * sizeof *run);
        for (size_t j = i0; j-- > 0;) {
            FN(rescale_row)(w, w->Ys + j * K, Y + j * K, run, 1);
            for (size_t i = i0; i < i1; i++)
                out[i * C + j] = FN(dot)(w->Xs + i * K, w->Ys + j * K, K);
            for (size_t c = 0; c < K; c++)
                run[c] += g[j * K + c];
        }

        /* the diagonal block */
        if (diag_pairwise) {
            for (size_t i = i0; i < i1; i++) {
                memset(run, 0, K * sizeof *run); /* sum_{m=j+1..i} g_m, per channel */
                for (size_t j = i + 1; j-- > i0;) {
                    if (j < i || include_diag) {
                        real acc = 0;
                        for (size_t c = 0; c < K; c++)
                            acc += X[i * K + c] * Y[j * K + c] * EXP(run[c]);
                        out[i * C + j] = acc;
                    }
                    for (size_t c = 0; c < K; c++)
                        run[c] += g[j * K + c];
                }
            }
        } else {
            for (size_t i = i0; i < i1; i++) {
                /* Y_i / gamma_i about the anchor: exponent -E_i >= 0 */
                FN(rescale_row)(w, w->Ys + i * K, Y + i * K, E + i * K, -1);
                for (size_t j = i0; j < i + (include_diag ? 1 : 0); j++)
                    out[i * C + j] = FN(dot)(w->Xs + i * K, w->Ys + j * K, K);
            }
        }
    }
}

/* gamma_r[c] = exp(sum_{m=0..r} g_m[c]) <= 1: the decay from the chunk start to r. */
static real FN(gamma)(const FN(chunk_ws) *w, size_t r, size_t c)
{
    return w->gw == 0 ? 1 : EXP(w->Gin[r * w->gw + (w->gw == 1 ? 0 : c)]);
}

/* exp(sum_{m=r+1..L-1} g_m[c]) <= 1: the decay from r to the chunk end. */
static real FN(decay_to_end)(const FN(chunk_ws) *w, size_t r, size_t c)
{
    return w->gw == 0 ? 1 : EXP(w->Gout[r * w->gw + (w->gw == 1 ? 0 : c)]);
}

/*
 * The UT transform, applied to right-hand sides: solve (I + A_kk) X = R for X
 * in place (R holds Diag(beta) times the rows), by forward substitution over
 * the unit lower-triangular I + A_kk. Equivalent to X = T R' with
 * T = (I + A_kk)^-1 Diag(beta), REFERENCE.md step 2.
 */
static void FN(ut_transform)(const FN(chunk_ws) *w, real *X, size_t width)
{
    const size_t C = w->opts.chunk;
    for (size_t i = 0; i < w->L; i++)
        for (size_t m = 0; m < i; m++) {
            real a = w->Akk[i * C + m];
            for (size_t c = 0; c < width; c++)
                X[i * width + c] -= a * X[m * width + c];
        }
}

/* One chunk: o rows for its L positions (written through o_rows with the
 * given stride) and the state S advanced past it. Steps 1-7. */
static void FN(chunk_step)(FN(chunk_ws) *w, kdalab_mechanism mech, real *o, size_t o_stride)
{
    const size_t L = w->L, K = w->K, V = w->V, C = w->opts.chunk;
    real *S = w->S;
    int delta = mech != KDALAB_LINEAR_ATTENTION;

    /* 1. A_kk[i][j] = beta_i sum_c k_i k_j exp(G_i - G_j), j < i */
    if (delta) {
        FN(decayed_gram)(w, w->Kc, w->Kc, 0, w->Akk);
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < i; j++)
                w->Akk[i * C + j] *= w->beta[i];
    }
    /* 5. A_qk[i][j] = s sum_c q_i k_j exp(G_i - G_j), j <= i */
    FN(decayed_gram)(w, w->Q, w->Kc, 1, w->Aqk);

    /* 2-3. W = T (gamma * K), U = T V; linear attention: W = 0, U = V */
    for (size_t r = 0; r < L; r++) {
        real b = delta ? w->beta[r] : 1;
        for (size_t c = 0; c < K; c++)
            w->W[r * K + c] = delta ? b * FN(gamma)(w, r, c) * w->Kc[r * K + c] : 0;
        for (size_t j = 0; j < V; j++)
            w->U[r * V + j] = b * w->Vc[r * V + j];
    }
    if (delta) {
        FN(ut_transform)(w, w->W, K);
        FN(ut_transform)(w, w->U, V);
    }

    /* 4. V_new = U - W S (in place in U) */
    if (delta)
        for (size_t r = 0; r < L; r++)
            for (size_t c = 0; c < K; c++) {
                real wrc = w->W[r * K + c];
                for (size_t j = 0; j < V; j++)
                    w->U[r * V + j] -= wrc * S[c * V + j];
            }
    const real *Vnew = w->U;

    /* 6. O = s (gamma * Q) S + A_qk V_new */
    for (size_t i = 0; i < L; i++) {
        real *oi = o + i * o_stride;
        for (size_t j = 0; j < V; j++)
            oi[j] = 0;
        for (size_t c = 0; c < K; c++) {
            real qg = FN(store)(w, w->Q[i * K + c] * FN(gamma)(w, i, c));
            for (size_t j = 0; j < V; j++)
                oi[j] += qg * S[c * V + j];
        }
        for (size_t m = 0; m <= i; m++) {
            real a = w->Aqk[i * C + m];
            for (size_t j = 0; j < V; j++)
                oi[j] += a * Vnew[m * V + j];
        }
        for (size_t j = 0; j < V; j++)
            oi[j] *= w->scale;
    }

    /* 7. S <- Diag(gamma_L) S + (exp(G_L - G) * K)^T V_new */
    for (size_t c = 0; c < K; c++) {
        real gl = FN(gamma)(w, L - 1, c);
        for (size_t j = 0; j < V; j++)
            S[c * V + j] *= gl;
        for (size_t r = 0; r < L; r++) {
            real kd = FN(store)(w, w->Kc[r * K + c] * FN(decay_to_end)(w, r, c));
            for (size_t j = 0; j < V; j++)
                S[c * V + j] += kd * Vnew[r * V + j];
        }
    }
}

static void FN(chunk_ws_free)(FN(chunk_ws) *w)
{
    free(w->Q); free(w->Kc); free(w->Vc); free(w->beta);
    free(w->g); free(w->Gin); free(w->Gout);
    free(w->Akk); free(w->Aqk); free(w->W); free(w->U);
    free(w->Xs); free(w->Ys); free(w->E); free(w->run); free(w->S);
}

static kdalab_status FN(chunk_ws_alloc)(FN(chunk_ws) *w, size_t C, size_t K, size_t V)
{
    size_t CK, CV, CC, KV, bytes;
    if (!kdalab_mul_size(C, K, &CK) || !kdalab_mul_size(C, V, &CV) ||
        !kdalab_mul_size(C, C, &CC) || !kdalab_mul_size(K, V, &KV) ||
        !kdalab_mul_size(CK > CV ? CK : CV, sizeof(real), &bytes) ||
        !kdalab_mul_size(CC > KV ? CC : KV, sizeof(real), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "chunk C = %zu with K = %zu, V = %zu overflows",
                           C, K, V);
    w->Q = malloc(CK * sizeof(real));   w->Kc = malloc(CK * sizeof(real));
    w->Vc = malloc(CV * sizeof(real));  w->beta = malloc(C * sizeof(real));
    w->g = malloc(CK * sizeof(real));   w->Gin = malloc(CK * sizeof(real));
    w->Gout = malloc(CK * sizeof(real));
    w->Akk = calloc(CC, sizeof(real));  w->Aqk = calloc(CC, sizeof(real));
    w->W = malloc(CK * sizeof(real));   w->U = malloc(CV * sizeof(real));
    w->Xs = malloc(CK * sizeof(real));  w->Ys = malloc(CK * sizeof(real));
    w->E = malloc(CK * sizeof(real));   w->run = malloc(K * sizeof(real));
    w->S = malloc(KV * sizeof(real));
    if (!w->Q || !w->Kc || !w->Vc || !w->beta || !w->g || !w->Gin || !w->Gout || !w->Akk ||
        !w->Aqk || !w->W || !w->U || !w->Xs || !w->Ys || !w->E || !w->run || !w->S) {
        FN(chunk_ws_free)(w);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for chunk C = %zu, K = %zu, V = %zu", C,
                           K, V);
    }
    return KDALAB_OK;
}

static kdalab_status FN(study_chunk)(const kdalab_dims *dims, kdalab_mechanism mech, real scale,
                               const real *q, const real *k, const real *v, const real *g,
                               const real *beta, const real *h0, real *o, real *ht,
                               const kdalab_chunk_opts *opts, kdalab_report *report)
{
    kdalab_counts n;
    kdalab_chunk_opts op;
    kdalab_status s = FN(kdalab_check)(dims, mech, scale, q, k, v, g, beta, h0, o, &n);
    if (s != KDALAB_OK)
        return s;
    s = kdalab_check_chunk_opts(opts, KDALAB_REAL == 64, &op);
    if (s != KDALAB_OK)
        return s;
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t C = op.chunk < T ? op.chunk : (T ? T : 1); /* no buffer larger than T */

    FN(chunk_ws) w = {.K = K, .V = V, .gw = kdalab_mechanism_g_width(mech, K), .opts = op,
                      .scale = scale};
    w.opts.chunk = C;
    s = FN(chunk_ws_alloc)(&w, C, K, V);
    if (s != KDALAB_OK)
        return s;

    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            if (h0)
                memcpy(w.S, h0 + bh * K * V, K * V * sizeof(real));
            else
                memset(w.S, 0, K * V * sizeof(real)); /* no h0: a zero state */
            for (size_t t0 = 0; t0 < T; t0 += C) {
                w.L = t0 + C <= T ? C : T - t0;
                /* gather the chunk's rows, stored as the kernel would store them */
                for (size_t r = 0; r < w.L; r++) {
                    size_t bth = (b * T + t0 + r) * H + h;
                    for (size_t c = 0; c < K; c++) {
                        w.Q[r * K + c] = FN(store)(&w, q[bth * K + c]);
                        w.Kc[r * K + c] = FN(store)(&w, k[bth * K + c]);
                    }
                    for (size_t j = 0; j < V; j++)
                        w.Vc[r * V + j] = FN(store)(&w, v[bth * V + j]);
                    w.beta[r] = beta && mech != KDALAB_LINEAR_ATTENTION
                                    ? FN(store)(&w, beta[bth]) : 1;
                    /* the log-decay stays in full precision, as production
                     * kernels keep it in fp32; Gin = sum over 0..r */
                    for (size_t c = 0; c < w.gw; c++) {
                        w.g[r * w.gw + c] = g[bth * w.gw + c];
                        w.Gin[r * w.gw + c] = (r ? w.Gin[(r - 1) * w.gw + c] : 0) +
                                              w.g[r * w.gw + c];
                    }
                }
                /* Gout = sum over r+1..L-1, summed backwards from the chunk end */
                for (size_t r = w.L; r-- > 0;)
                    for (size_t c = 0; c < w.gw; c++)
                        w.Gout[r * w.gw + c] =
                            r + 1 < w.L ? w.Gout[(r + 1) * w.gw + c] + w.g[(r + 1) * w.gw + c]
                                        : 0;
                FN(chunk_step)(&w, mech, o + ((b * T + t0) * H + h) * V, H * V);
            }
            if (ht)
                memcpy(ht + bh * K * V, w.S, K * V * sizeof(real));
        }
    FN(chunk_ws_free)(&w);

    kdalab_report rep = {.max_exponent = w.max_exponent};
    char what[96];
    snprintf(what, sizeof what, "chunkwise form (decay mode '%s', largest exponent %g)",
             kdalab_decay_name(op.decay), w.max_exponent);
    s = FN(kdalab_check_outputs)(what, o, n.v, ht, n.state, &rep.nonfinite_o,
                                 &rep.nonfinite_ht);
    if (report)
        *report = rep;
    return s;
}
