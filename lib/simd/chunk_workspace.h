/*
 * lib/simd/chunk_workspace.h — the workspace of one chunkwise task (one head,
 * a block of value columns): its buffers, how they are laid out in one
 * aligned block, and the prefetching of the next chunk's input rows.
 *
 * defines, per ISA suffix _scalar/_avx2/_avx512: the type ws, prefetch,
 * prefetch_rows, ws_carve, qg_scale, ws_floats
 * needs: kernel_common.h
 */

typedef struct {
    size_t C, c, K, W, nsub;
    const real *q, *k, *v;      /* the chunk's rows, read where the caller keeps    */
    const real *gin;            /* them: q, k [n, ldqk], v [n, ldv], g [n, ldg]      */
    const real *ain, *bin;      /* DPLR's a, b [n, ldab] (dplr_scores.h), else NULL */
    real *o;                    /* and its output rows [n, ldo], written there too  */
    size_t ldqk, ldv, ldg, ldab; /* (a row stride is H times a head's row), ldo     */
    size_t ldo;
    kdalab_precision store;     /* emulated storage (chunk_kernels.h), or FP32      */
    real *qs, *ks, *vs;         /* [C, K] [C, K] [C, W] the chunk's rows as stored  */
    real *as, *bs;              /* [C, K] DPLR's a, b as stored                     */
    real *g, *b;                /* a = exp(g) [C, K|1], beta [C]                    */
    real *S;                    /* [K, W] state columns of the head being run      */
    real *Sall;                 /* [nh, K, W] the task's heads' states             */
    real *kqf;                  /* per sub-chunk: c rows k*F then c rows q*F [2C,K]  */
    real *kb;                   /* k * B (decayed to its sub-chunk's end) [C,K]     */
    real *subtot;               /* per sub-chunk prod a, its total decay [nsub, K]  */
    real *dvec;                 /* [K] between-sub-chunk decay                      */
    real *X;                    /* [K, C] kb transposed                             */
    real *kqd;                  /* [2c, K] a sub-chunk's [kf ; qf] times d_IJ        */
    real *blk;                  /* [2c, c] an off-diagonal block of A_kk ; A_qk      */
    real *pkk, *pqk;            /* [c, VLEN] lane partial sums of the diagonal block */
    real *Akk, *Aqk, *Tm;       /* [C, C]                                           */
    real *Gk, *Gq;              /* [C, C] full Gram matrices (non-KDA mechanisms)   */
    real *kg, *qg, *kd;         /* -gamma*k, s*gamma*q, kdec*k  [C,K]               */
    real *Wn, *U;               /* [C,K] [C,W]                                      */
    real *kt;                   /* [K, C] transposed keys                           */
    real *gl;                   /* [K] gamma at the chunk end                       */
    real *dsc;                  /* [C] scalar decay row / factors                   */
    real *gam, *kdec;           /* [C] scalar gamma and decay-to-end                */
    /* DPLR only (dplr_scores.h, dplr_chunk in chunk_kernels.h) */
    real *Aak, *Aqb;            /* [C, C] A_ak (strict lower), s A_qb (lower)       */
    real *ah, *bd;              /* [C, K] gamma_{r-1} a_r, decay-to-end times b_r   */
    real *R;                    /* [C, W] the solve's right-hand side A^ S + A_ak V */
    real *bb, *Xb;              /* [C, K] b * B, [K, C] its transpose               */
    real *rows;                 /* [6, K] running products of the factor passes     */
    const SIMD_ARGS *pa;        /* the task, for prefetching its next rows          */
    size_t pf_next, pf_end;     /* rows [pf_next, pf_end) not yet prefetched         */
    size_t pf_rows;             /* rows to prefetch between two stages of a chunk    */
} SIMD_FN(ws);

/* Ask for n elements from p to be brought towards the cache (the inputs stream
 * from memory with a stride of H rows, which the hardware prefetcher misses). */
static inline void SIMD_FN(prefetch)(const real *p, size_t n)
{
#if defined(__GNUC__)
    for (size_t i = 0; i < n; i += SIMD_LINE)
        __builtin_prefetch(p + i, 0, 2);
#else
    (void)p;
    (void)n;
#endif
}

/* Prefetch the next chunk's input rows (and its output rows, for writing)
 * a few at a time: called between the stages of a chunk, so the requests are
 * spread over the chunk's work instead of queueing up in one burst. A row of
 * the task is its nh heads' rows, which lie side by side (a task of several
 * heads has all value columns: W = V). */
static void SIMD_FN(prefetch_rows)(SIMD_FN(ws) *w, size_t nrows)
{
    const SIMD_ARGS *a = w->pa;
    const size_t nh = a->nh, W = a->v1 - a->v0;
    const size_t gw = kdalab_mechanism_g_width(a->mech, a->K);
    for (; nrows > 0 && w->pf_next < w->pf_end; nrows--, w->pf_next++) {
        size_t t = w->pf_next;
        SIMD_FN(prefetch)(a->q + t * a->ld_qk, nh * a->K);
        SIMD_FN(prefetch)(a->k + t * a->ld_qk, nh * a->K);
        SIMD_FN(prefetch)(a->v + t * a->ld_v + a->v0, nh * W);
        if (gw)
            SIMD_FN(prefetch)(a->g + t * a->ld_g, nh * gw);
        if (a->a) {
            SIMD_FN(prefetch)(a->a + t * a->ld_ab, nh * a->K);
            SIMD_FN(prefetch)(a->b + t * a->ld_ab, nh * a->K);
        }
#if defined(__GNUC__)
        for (size_t i = 0; i < nh * W; i += SIMD_LINE)
            __builtin_prefetch(a->o + t * a->ld_v + a->v0 + i, 1, 2);
#endif
    }
}

/*
 * Lay the workspace out from base (or only count it, base == NULL); returns
 * the floats used. Buffers of the score phase (steps 1, 5: the decays
 * a = exp(g) and the KDA or the scalar-decay temporaries) share memory with
 * those of the state phase (steps 2-4, 6, 7: W, U), and the inputs and the
 * output stay where the caller keeps them, so one task's working set stays
 * small: K = V = 128, c = 16 take 226 KB at C = 32 and 392 KB at C = 64 with
 * one head, and 64 KB more for each further head of the task (its state).
 * Whether that fits a core's cache decides which C runs faster; bench/simd.c
 * times both. ab: the DPLR row's buffers too (float32, K = V = 128: 37 KB
 * more at C = 16, 163 KB at C = 64); without it they are NULL and the
 * layout is the other rows' alone. stored: the chunk's input rows as an
 * emulated storage format holds them (qs, ks, vs; as, bs with ab), after
 * everything else; without it they are NULL. Sets store to KDALAB_FP32 (the
 * caller sets the task's).
 */
static size_t SIMD_FN(ws_carve)(SIMD_FN(ws) *w, real *base, size_t C, size_t c, size_t K,
                                size_t W, size_t nh, int ab, int stored)
{
    size_t nsub = (C + c - 1) / c, cur = 0, mark, endA, endB;
    w->C = C; w->c = c; w->K = K; w->W = W; w->nsub = nsub;
#define SIMD_TAKE(ptr, n)                                                                     \
    do {                                                                                      \
        (ptr) = base ? base + cur : NULL;                                                     \
        cur += ((n) + SIMD_LINE - 1) / SIMD_LINE * SIMD_LINE; /* 64-byte aligned */          \
    } while (0)
    /* both phases */
    SIMD_TAKE(w->b, C); SIMD_TAKE(w->Sall, nh * K * W);
    w->S = w->Sall;
    SIMD_TAKE(w->Akk, C * C); SIMD_TAKE(w->Aqk, C * C); SIMD_TAKE(w->Tm, C * C);
    SIMD_TAKE(w->kg, C * K); SIMD_TAKE(w->qg, C * K); SIMD_TAKE(w->kd, C * K);
    SIMD_TAKE(w->gl, K); SIMD_TAKE(w->gam, C); SIMD_TAKE(w->kdec, C);
    SIMD_TAKE(w->Aak, ab ? C * C : 0); SIMD_TAKE(w->Aqb, ab ? C * C : 0); /* DPLR's */
    SIMD_TAKE(w->ah, ab ? C * K : 0); SIMD_TAKE(w->bd, ab ? C * K : 0);
    size_t region = cur;
    /* score phase: the decays a = exp(g), then KDA's or the scalar decays' temporaries */
    SIMD_TAKE(w->g, C * K);
    mark = cur;
    SIMD_TAKE(w->kqf, 2 * C * K); SIMD_TAKE(w->kb, C * K);
    SIMD_TAKE(w->subtot, nsub * K); SIMD_TAKE(w->dvec, K);
    SIMD_TAKE(w->X, K * C); SIMD_TAKE(w->blk, 2 * c * c); SIMD_TAKE(w->kqd, 2 * c * K);
    SIMD_TAKE(w->pkk, c * VLEN); SIMD_TAKE(w->pqk, c * VLEN);
    SIMD_TAKE(w->bb, ab ? C * K : 0); SIMD_TAKE(w->Xb, ab ? K * C : 0); /* DPLR's */
    SIMD_TAKE(w->rows, ab ? 6 * K : 0);
    endA = cur;
    cur = mark;
    SIMD_TAKE(w->Gk, C * C); SIMD_TAKE(w->Gq, C * C); SIMD_TAKE(w->kt, K * C);
    SIMD_TAKE(w->dsc, C);
    endA = cur > endA ? cur : endA;
    /* state phase, over the score phase's memory */
    cur = region;
    SIMD_TAKE(w->Wn, C * K); SIMD_TAKE(w->U, C * W);
    SIMD_TAKE(w->R, ab ? C * W : 0); /* DPLR's */
    endB = cur;
    /* emulated storage: the chunk's input rows as stored, read in every phase */
    cur = endA > endB ? endA : endB;
    SIMD_TAKE(w->qs, stored ? C * K : 0); SIMD_TAKE(w->ks, stored ? C * K : 0);
    SIMD_TAKE(w->vs, stored ? C * W : 0);
    SIMD_TAKE(w->as, stored && ab ? C * K : 0); SIMD_TAKE(w->bs, stored && ab ? C * K : 0);
#undef SIMD_TAKE
    if (!ab)
        w->Aak = w->Aqb = w->ah = w->bd = w->bb = w->Xb = w->rows = w->R = NULL;
    if (!stored || !ab)
        w->as = w->bs = NULL;
    if (!stored)
        w->qs = w->ks = w->vs = NULL;
    w->store = KDALAB_FP32;
    return cur;
}

/* The scale the factor passes put into qg = s gamma q: s, or 1 when storage
 * is emulated (store_factors rounds gamma q, then scales it by s). */
static inline real SIMD_FN(qg_scale)(const SIMD_FN(ws) *w, real s)
{
    return w->store == KDALAB_FP32 ? s : 1;
}

/* Floats needed by one task with chunk C, sub-chunk c, head dim K, W value
 * columns, nh heads; ab: the DPLR row's buffers too; stored: the input rows
 * as stored. */
static size_t SIMD_FN(ws_floats)(size_t C, size_t c, size_t K, size_t W, size_t nh, int ab,
                                 int stored)
{
    SIMD_FN(ws) w;
    return SIMD_FN(ws_carve)(&w, NULL, C, c, K, W, nh, ab, stored);
}
