/*
 * lib/chunk_impl.h — the chunkwise form (REFERENCE.md, "Chunkwise form",
 * steps 1-7), written once for float64 and float32 (instantiated by
 * lib/chunk.c via lib/real.h).
 *
 * Per (b, h) the sequence is cut into chunks of C positions (the last may be
 * shorter). Inside a chunk every position r = 0..L-1 carries the cumulative
 * log-decay G[r] = sum_{i<=r} g_i (K values for KDA, one for Gated DeltaNet,
 * none otherwise); a value written at j and read at i >= j is scaled by
 * exp(G[i] - G[j]).
 */

/* Everything one chunk needs; buffers are sized for a full chunk of C. */
typedef struct {
    size_t L, K, V;            /* positions in this chunk, head dims            */
    size_t gw;                 /* log-decay values per position: 0, 1 or K      */
    kdalab_chunk_opts opts;    /* chunk, sub-chunk, decay mode, precision       */
    real scale;
    real *Q, *Kc, *Vc, *beta;  /* the chunk's rows: [L,K], [L,K], [L,V], [L]     */
    real *G;                   /* cumulative log-decay [L, gw]                  */
    real *Akk, *Aqk;           /* [C,C] lower-triangular score matrices          */
    real *W, *U;               /* [C,K], [C,V] right-hand sides of the UT solve  */
    real *Xs, *Ys;             /* [C,K] rows rescaled by a decay factor          */
    real *anchor;              /* [K] G at a sub-chunk boundary                  */
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

/* dst = store(src * exp(to - from)) per channel; records the exponent. */
static void FN(rescale_row)(FN(chunk_ws) *w, real *dst, const real *src, const real *to,
                            const real *from)
{
    for (size_t c = 0; c < w->K; c++) {
        real e = to[c] - from[c];
        if (e > w->max_exponent)
            w->max_exponent = e;
        dst[c] = FN(store)(w, src[c] * EXP(e));
    }
}

/*
 * The decayed Gram matrix of two sets of rows of the chunk:
 *   out[i][j] = sum_c X[i][c] Y[j][c] exp(G[i][c] - G[j][c])    for j < i
 * (and j == i when include_diag). Steps 1 and 5 of REFERENCE.md. Only j <= i
 * is ever touched, so o[i] cannot depend on a later position, not even
 * through a zero.
 *
 * For KDA this is where the decay modes differ. The rows are cut into
 * sub-chunks (of c positions; of the whole chunk for pairwise/rescaled), and
 * for a query row i in a sub-chunk starting at i0 the anchor is G[i0-1] (zero
 * at the chunk start):
 *   - rows j of an EARLIER sub-chunk: exp(G_i - G_j) = exp(G_i - anchor) *
 *     exp(anchor - G_j), both exponents <= 0: a plain dot of rescaled rows;
 *   - rows j of the SAME sub-chunk: pairwise (safe, pairwise modes: every
 *     exponent <= 0) or rescaled about the anchor (rescaled, anchored modes:
 *     Y_j * exp(anchor - G_j) has a POSITIVE exponent, up to |sum g| over the
 *     span — the floating-point range problem).
 */
static void FN(decayed_gram)(FN(chunk_ws) *w, const real *X, const real *Y, int include_diag,
                             real *out)
{
    const size_t L = w->L, K = w->K, C = w->opts.chunk;
    const real *G = w->G;

    if (w->gw <= 1) { /* no decay, or one scalar per position: a C x C mask */
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < i + (include_diag ? 1 : 0); j++) {
                real d = FN(dot)(X + i * K, Y + j * K, K);
                out[i * C + j] = w->gw ? d * EXP(G[i] - G[j]) : d; /* exponent <= 0 */
            }
        return;
    }

    kdalab_decay_mode mode = w->opts.decay;
    size_t sub = (mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_ANCHORED)
                     ? w->opts.subchunk
                     : L;
    int diag_pairwise = (mode == KDALAB_DECAY_SAFE || mode == KDALAB_DECAY_PAIRWISE);

    for (size_t i0 = 0; i0 < L; i0 += sub) {
        size_t i1 = i0 + sub < L ? i0 + sub : L;
        if (i0 == 0)
            memset(w->anchor, 0, K * sizeof *w->anchor);
        else
            memcpy(w->anchor, G + (i0 - 1) * K, K * sizeof *w->anchor);

        /* X rows decayed down to the anchor: exp(G_i - anchor) <= 1 */
        for (size_t i = i0; i < i1; i++)
            FN(rescale_row)(w, w->Xs + i * K, X + i * K, G + i * K, w->anchor);

        /* off-diagonal blocks: Y rows of earlier sub-chunks, exp(anchor - G_j) <= 1 */
        for (size_t j = 0; j < i0; j++) {
            FN(rescale_row)(w, w->Ys + j * K, Y + j * K, w->anchor, G + j * K);
            for (size_t i = i0; i < i1; i++)
                out[i * C + j] = FN(dot)(w->Xs + i * K, w->Ys + j * K, K);
        }

        /* the diagonal block */
        if (diag_pairwise) {
            for (size_t i = i0; i < i1; i++)
                for (size_t j = i0; j < i + (include_diag ? 1 : 0); j++) {
                    real s = 0;
                    for (size_t c = 0; c < K; c++)
                        s += X[i * K + c] * Y[j * K + c] * EXP(G[i * K + c] - G[j * K + c]);
                    out[i * C + j] = s;
                }
        } else {
            for (size_t i = i0; i < i1; i++) {
                /* Y_i / gamma_i about the anchor: exponent anchor - G_i >= 0 */
                FN(rescale_row)(w, w->Ys + i * K, Y + i * K, w->anchor, G + i * K);
                for (size_t j = i0; j < i + (include_diag ? 1 : 0); j++)
                    out[i * C + j] = FN(dot)(w->Xs + i * K, w->Ys + j * K, K);
            }
        }
    }
}

/* gamma_r[c] = exp(G[r][c]) <= 1: the decay from the chunk start to r. */
static real FN(gamma)(const FN(chunk_ws) *w, size_t r, size_t c)
{
    return w->gw == 0 ? 1 : EXP(w->G[r * w->gw + (w->gw == 1 ? 0 : c)]);
}

/* exp(G[L-1] - G[r]) <= 1: the decay from r to the chunk end. */
static real FN(decay_to_end)(const FN(chunk_ws) *w, size_t r, size_t c)
{
    if (w->gw == 0)
        return 1;
    size_t cc = w->gw == 1 ? 0 : c;
    return EXP(w->G[(w->L - 1) * w->gw + cc] - w->G[r * w->gw + cc]);
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
    free(w->Q); free(w->Kc); free(w->Vc); free(w->beta); free(w->G);
    free(w->Akk); free(w->Aqk); free(w->W); free(w->U);
    free(w->Xs); free(w->Ys); free(w->anchor); free(w->S);
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
    w->G = malloc(CK * sizeof(real));
    w->Akk = calloc(CC, sizeof(real));  w->Aqk = calloc(CC, sizeof(real));
    w->W = malloc(CK * sizeof(real));   w->U = malloc(CV * sizeof(real));
    w->Xs = malloc(CK * sizeof(real));  w->Ys = malloc(CK * sizeof(real));
    w->anchor = malloc(K * sizeof(real)); w->S = malloc(KV * sizeof(real));
    if (!w->Q || !w->Kc || !w->Vc || !w->beta || !w->G || !w->Akk || !w->Aqk || !w->W ||
        !w->U || !w->Xs || !w->Ys || !w->anchor || !w->S) {
        FN(chunk_ws_free)(w);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for chunk C = %zu, K = %zu, V = %zu", C,
                           K, V);
    }
    return KDALAB_OK;
}

static size_t FN(count_nonfinite)(const real *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !REAL_IS_FINITE(x[i]);
    return bad;
}

kdalab_status FN(kdalab_chunk)(const kdalab_dims *dims, kdalab_mechanism mech, real scale,
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
                    /* G[r] = G[r-1] + g_r; the log-decay stays in full precision,
                     * as production kernels keep it in fp32 */
                    for (size_t c = 0; c < w.gw; c++)
                        w.G[r * w.gw + c] = (r ? w.G[(r - 1) * w.gw + c] : 0) +
                                            g[bth * w.gw + c];
                }
                FN(chunk_step)(&w, mech, o + ((b * T + t0) * H + h) * V, H * V);
            }
            if (ht)
                memcpy(ht + bh * K * V, w.S, K * V * sizeof(real));
        }
    FN(chunk_ws_free)(&w);

    size_t bad_o = FN(count_nonfinite)(o, n.v);
    size_t bad_ht = ht ? FN(count_nonfinite)(ht, n.state) : 0;
    if (report) {
        report->nonfinite_o = bad_o;
        report->nonfinite_ht = bad_ht;
        report->max_exponent = w.max_exponent;
    }
    if (bad_o || bad_ht)
        return kdalab_fail(KDALAB_ERANGE,
                           "%zu non-finite values in o and %zu in ht: decay mode '%s' overflowed "
                           "(largest exponent formed: %g)",
                           bad_o, bad_ht, kdalab_decay_name(op.decay), w.max_exponent);
    kdalab_clear_error();
    return KDALAB_OK;
}
