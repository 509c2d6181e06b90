/*
 * lib/reference/recurrent.c — the recurrent form and the decode step of
 * every linear mechanism of the table in float64, and their backward:
 * the oracle every other form is checked against. The forward
 * reads like the update table of REFERENCE.md (chapters 02, 03, 05, 06) and
 * like fla's fla/ops/<mechanism>/naive.py recurrences; the backward is
 * REFERENCE.md "Gradients", the same recurrence run backwards in time.
 *
 * defines: kdalab_step_f64, kdalab_step_ab_f64 (the DPLR rows' decode step),
 *          kdalab__recurrent_f64 (forward);
 *          kdalab__recurrent_bwd_f64 (backward)
 *
 * kdalab__recurrent_f64 and _bwd run on a call kdalab_run_f64 has validated
 * (lib/call/call.c); the public kdalab_recurrent_f64 reaches them through it
 * (lib/call/flat.c). The decode step checks its own arguments.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the forward --------------------------------------------------------- */

/*
 * One token, one head: S_{t-1} -> S_t in place, o = s * S_t^T q.
 *   S [K,V]; q, k [K]; v, o [V]; g: [1] (a decay per head), [K] (per key
 *   channel), unused otherwise; a, b [K] and r [V] scratch: the DPLR rows
 *   only (kdalab_mechanism_has_ab), unused otherwise. o NULL: the state alone
 *   (the backward's replay; q unused).
 * Inputs are assumed valid (the public functions check them first).
 */
static void step_head(kdalab_mechanism mech, size_t K, size_t V, double scale, const double *q,
                      const double *k, const double *v, const double *g, double beta,
                      const double *a, const double *b, double *S, double *o, double *r)
{
    /* 0. DPLR: what the low-rank term reads from the previous state, r = S_{t-1}^T a */
    const int ab = kdalab_mechanism_has_ab(mech);
    if (ab)
        for (size_t j = 0; j < V; j++) {
            double acc = 0;
            for (size_t c = 0; c < K; c++)
                acc += a[c] * S[c * V + j];
            r[j] = acc;
        }

    /* 1. decay: S' = alpha S (g per head) or Diag(alpha) S (g per key channel),
     *    alpha = exp(g); DPLR adds its low-rank term, S' += b r^T */
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(mech);
    if (gs == KDALAB_G_PER_HEAD) {
        double alpha = exp(g[0]);
        for (size_t c = 0; c < K; c++)
            for (size_t j = 0; j < V; j++)
                S[c * V + j] *= alpha;
    } else if (gs == KDALAB_G_PER_KEY) {
        for (size_t c = 0; c < K; c++) {
            double alpha = exp(g[c]); /* row c = everything written through key channel c */
            for (size_t j = 0; j < V; j++)
                S[c * V + j] *= alpha;
        }
    }
    if (ab)
        for (size_t c = 0; c < K; c++)
            for (size_t j = 0; j < V; j++)
                S[c * V + j] += b[c] * r[j];

    /* 2. write, one value column j at a time:
     *      no delta rule     S[:,j] += k v_j
     *      delta rule        S[:,j] += beta k (v_j - S'[:,j] . k)   (uses the decayed S')
     * 3. read the same column of the new state: o_j = s S_t[:,j] . q */
    const int delta = kdalab_mechanism_has_delta(mech);
    for (size_t j = 0; j < V; j++) {
        double write = v[j];
        if (delta) {
            double predicted = 0; /* S'^T k: what the state already returns for key k */
            for (size_t c = 0; c < K; c++)
                predicted += S[c * V + j] * k[c];
            write = beta * (v[j] - predicted);
        }
        for (size_t c = 0; c < K; c++)
            S[c * V + j] += k[c] * write;
        if (!o)
            continue;
        double read = 0;
        for (size_t c = 0; c < K; c++)
            read += S[c * V + j] * q[c];
        o[j] = scale * read;
    }
}

kdalab_status kdalab_step_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                              const double *q, const double *k, const double *v,
                              const double *g, double beta, double *S, double *o)
{
    kdalab_clear_error();
    kdalab_status s = kdalab_check_step_f64(mech, K, V, scale, q, k, v, g, beta, S, o);
    if (s != KDALAB_OK)
        return s;
    step_head(mech, K, V, scale, q, k, v, g, beta, NULL, NULL, S, o, NULL);
    return kdalab_check_outputs_f64("decode step", o, V, S, K * V, NULL, NULL);
}

kdalab_status kdalab_step_ab_f64(kdalab_mechanism mech, size_t K, size_t V, double scale,
                                 const double *q, const double *k, const double *v,
                                 const double *g, const double *a, const double *b, double *S,
                                 double *o)
{
    kdalab_clear_error();
    kdalab_status s = kdalab_check_step_ab_f64(mech, K, V, scale, q, k, v, g, a, b, S, o);
    if (s != KDALAB_OK)
        return s;
    double *r = malloc(V * sizeof *r); /* S_{t-1}^T a */
    if (!r)
        return kdalab_fail(KDALAB_ENOMEM, "decode step: no memory for %zu values", V);
    step_head(mech, K, V, scale, q, k, v, g, 0, a, b, S, o, r);
    free(r);
    return kdalab_check_outputs_f64("decode step", o, V, S, K * V, NULL, NULL);
}

kdalab_status kdalab__recurrent_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                    double scale, const double *q, const double *k,
                                    const double *v, const double *g, const double *beta,
                                    const double *a, const double *b, const double *h0,
                                    double *o, double *ht)
{
    // q, k are (B, T, H, K); v, o are (B, T, H, V); beta is (B, T, H);
    // g is (B, T, H) or (B, T, H, K); a, b are (B, T, H, K) (DPLR) or NULL;
    // h0, ht are (B, H, K, V)
    kdalab_counts n;
    kdalab_count_dims(dims, mech, sizeof(double), &n); /* validated: cannot fail */
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V;
    const size_t gw = kdalab_mechanism_g_width(mech, K); /* g values per (b,t,h) */

    double *S = malloc(K * V * sizeof *S); /* one head's state [K,V] */
    double *r = malloc(V * sizeof *r);     /* DPLR: S_{t-1}^T a [V]   */
    if (!S || !r) {
        free(S);
        free(r);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a %zu x %zu state", K, V);
    }
    const int ab = kdalab_mechanism_has_ab(mech);

    for (size_t bi = 0; bi < B; bi++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = bi * H + h;
            if (h0)
                memcpy(S, h0 + bh * K * V, K * V * sizeof *S);
            else
                memset(S, 0, K * V * sizeof *S); /* no h0: a zero state */
            for (size_t t = 0; t < T; t++) {
                size_t bth = (bi * T + t) * H + h; /* index of (b,t,h) */
                step_head(mech, K, V, scale, q + bth * K, k + bth * K, v + bth * V,
                          gw ? g + bth * gw : NULL, beta ? beta[bth] : 1,
                          ab ? a + bth * K : NULL, ab ? b + bth * K : NULL, S, o + bth * V, r);
            }
            if (ht)
                memcpy(ht + bh * K * V, S, K * V * sizeof *S);
        }
    free(S);
    free(r);
    return kdalab_check_outputs_f64("recurrent form", o, n.v, ht, n.state, NULL, NULL);
}

/* ---- the backward -------------------------------------------------------- */

/*
 * One step forward (KDA; the others are special cases):
 *   S'  = Diag(alpha) S_prev,  alpha = exp(g)   (Gated DeltaNet: a scalar alpha;
 *   e   = v - S'^T k                            DeltaNet, linear attention: 1)
 *   u   = beta e                                (no delta rule: u = v)
 *   S   = S' + k u^T                            (DPLR: + b r^T, r = S_prev^T a)
 *   o   = s S^T q
 * and backwards, with dS the gradient reaching S from later steps (dht at
 * the last one):
 *   dq  = s S d_o;             dS  += s q d_o^T
 *   DPLR: db = dS r;  dr = dS^T b;  da = S_prev dr
 *   dk  = dS u;                du   = dS^T k
 *   dbeta = du . e;  dv = beta du;  dk -= beta S' du;  dS' = dS - beta k du^T
 *                              (no delta rule: dv = du, dS' = dS)
 *   dg[c] = alpha[c] sum_j dS'[c][j] S_prev[c][j]      (a decay per head: summed over c)
 *   dS  = Diag(alpha) dS'      (the gradient reaching S_prev; DPLR: + a dr^T)
 * and dh0 is the last dS. (A row has the delta rule or the DPLR term, never
 * both: the table's rows.)
 *
 * The step needs S_prev, so the forward is replayed (step_head without its
 * output): states are kept every SEGMENT positions on a forward sweep, and
 * each segment, last to first, replays its forward from its checkpoint,
 * keeping the segment's states.
 */

#define SEGMENT 64 /* positions between checkpoints */

/* Where one position of head (b, h) lives in the [B,T,H,*] arrays. */
typedef struct {
    size_t bth;                  /* index of (b, t, h) in [B, T, H]: beta, and a per-head g */
    const double *q, *k, *v, *g; // q, k (K); v (V); g (gw)
    const double *a, *b;         // (K) each: the DPLR rows; NULL otherwise
    double beta;
} position;

static position position_at(const kdalab_dims *d, kdalab_mechanism mech, size_t b, size_t h,
                            size_t t, const double *q, const double *k, const double *v,
                            const double *g, const double *beta, const double *a,
                            const double *bb)
{
    size_t gw = kdalab_mechanism_g_width(mech, d->K);
    position p = {.bth = (b * d->T + t) * d->H + h};
    p.q = q + p.bth * d->K;
    p.k = k + p.bth * d->K;
    p.v = v + p.bth * d->V;
    p.g = gw ? g + p.bth * gw : NULL;
    p.beta = kdalab_mechanism_has_beta(mech) ? beta[p.bth] : 1;
    if (kdalab_mechanism_has_ab(mech)) {
        p.a = a + p.bth * d->K;
        p.b = bb + p.bth * d->K;
    }
    return p;
}

/* Scratch of one head's backward. */
typedef struct {
    double *ckpt;   // (n_segments + 1, K, V) the state before each segment's first step
    double *Sseg;   // (SEGMENT + 1, K, V)    the states S_{t0-1} .. S_{t1-1} of a segment
    double *Sp;     // (K, V) S' = Diag(alpha) S_prev
    double *dS;     // (K, V) the gradient reaching the current state
    double *e, *du; // (V)
    double *r, *dr; // (V) DPLR: S_prev^T a and its gradient
    double *alpha;  // (K) the decay factors of the step being differentiated
} bwd_ws;

static void bwd_ws_free(bwd_ws *w)
{
    free(w->ckpt);
    free(w->Sseg);
    free(w->Sp);
    free(w->dS);
    free(w->e);
    free(w->du);
    free(w->r);
    free(w->dr);
    free(w->alpha);
}

/*
 * The backward of one step at position p. S_prev (K, V) is the state before
 * the step, S (K, V) after it. dS (K, V) holds dL/dS on entry and dL/dS_prev
 * on return. Writes this position's dq, dk, dv, dbeta, dg, da, db where not
 * NULL.
 */
static void step_bwd(bwd_ws *w, kdalab_mechanism mech, size_t K, size_t V, double scale,
                     const position *p, const double *d_o, const double *S_prev,
                     const double *S, double *dq, double *dk, double *dv, double *dg,
                     double *dbeta, double *da, double *db)
{
    const int delta = kdalab_mechanism_has_delta(mech), ab = kdalab_mechanism_has_ab(mech);
    const kdalab_g_shape gs = kdalab_mechanism_g_shape(mech);
    double *dS = w->dS, *Sp = w->Sp, *e = w->e, *du = w->du, *r = w->r, *dr = w->dr;

    /* the decay alpha (per channel; a per-head g's one value in every channel;
     * 1 without decay), S' = Diag(alpha) S_prev and the error e = v - S'^T k */
    double *alpha = w->alpha;
    for (size_t c = 0; c < K; c++) {
        alpha[c] = gs == KDALAB_G_PER_KEY    ? exp(p->g[c])
                   : gs == KDALAB_G_PER_HEAD ? exp(p->g[0])
                                             : 1;
        for (size_t j = 0; j < V; j++)
            Sp[c * V + j] = alpha[c] * S_prev[c * V + j];
    }
    for (size_t j = 0; j < V; j++) {
        double pred = 0;
        for (size_t c = 0; c < K; c++)
            pred += Sp[c * V + j] * p->k[c];
        e[j] = p->v[j] - pred;
    }

    /* o = s S^T q:  dq = s S d_o,  dS += s q d_o^T */
    for (size_t c = 0; c < K; c++) {
        double acc = 0;
        for (size_t j = 0; j < V; j++) {
            acc += S[c * V + j] * d_o[j];
            dS[c * V + j] += scale * p->q[c] * d_o[j];
        }
        if (dq)
            dq[c] = scale * acc;
    }

    /* DPLR, S += b r^T with r = S_prev^T a:  db = dS r,  dr = dS^T b */
    if (ab) {
        for (size_t j = 0; j < V; j++) {
            double acc = 0, accr = 0;
            for (size_t c = 0; c < K; c++) {
                acc += dS[c * V + j] * p->b[c];
                accr += p->a[c] * S_prev[c * V + j];
            }
            dr[j] = acc;
            r[j] = accr;
        }
        for (size_t c = 0; c < K; c++) {
            double acc = 0;
            for (size_t j = 0; j < V; j++)
                acc += dS[c * V + j] * r[j];
            if (db)
                db[c] = acc;
        }
    }

    /* S = S' + k u^T:  dk = dS u,  du = dS^T k */
    for (size_t j = 0; j < V; j++) {
        double acc = 0;
        for (size_t c = 0; c < K; c++)
            acc += dS[c * V + j] * p->k[c];
        du[j] = acc;
    }
    for (size_t c = 0; c < K; c++) {
        double acc = 0;
        for (size_t j = 0; j < V; j++)
            acc += dS[c * V + j] * (delta ? p->beta * e[j] : p->v[j]);
        if (dk)
            dk[c] = acc;
    }

    /* u = beta (v - S'^T k) */
    if (delta) {
        double dbt = 0;
        for (size_t j = 0; j < V; j++)
            dbt += du[j] * e[j];
        if (dbeta)
            *dbeta = dbt;
        for (size_t c = 0; c < K; c++) {
            double acc = 0; /* (S' du)[c] */
            for (size_t j = 0; j < V; j++) {
                acc += Sp[c * V + j] * du[j];
                dS[c * V + j] -= p->beta * p->k[c] * du[j]; /* dS' = dS - beta k du^T */
            }
            if (dk)
                dk[c] -= p->beta * acc;
        }
    }
    if (dv)
        for (size_t j = 0; j < V; j++)
            dv[j] = delta ? p->beta * du[j] : du[j];

    /* S' = Diag(alpha) S_prev: dg[c] = alpha[c] sum_j dS'[c][j] S_prev[c][j];
     * dS <- Diag(alpha) dS' */
    if (gs != KDALAB_G_NONE) {
        double total = 0;
        for (size_t c = 0; c < K; c++) {
            double acc = 0;
            for (size_t j = 0; j < V; j++) {
                acc += dS[c * V + j] * S_prev[c * V + j];
                dS[c * V + j] *= alpha[c];
            }
            if (gs == KDALAB_G_PER_KEY && dg)
                dg[c] = alpha[c] * acc;
            total += alpha[c] * acc;
        }
        if (gs == KDALAB_G_PER_HEAD && dg)
            dg[0] = total;
    }

    /* DPLR: r = S_prev^T a:  da = S_prev dr,  dS_prev += a dr^T */
    if (ab)
        for (size_t c = 0; c < K; c++) {
            double acc = 0;
            for (size_t j = 0; j < V; j++) {
                acc += S_prev[c * V + j] * dr[j];
                dS[c * V + j] += p->a[c] * dr[j];
            }
            if (da)
                da[c] = acc;
        }
}

kdalab_status kdalab__recurrent_bwd_f64(const kdalab_dims *dims, kdalab_mechanism mech,
                                        double scale, const double *q, const double *k,
                                        const double *v, const double *g, const double *beta,
                                        const double *a, const double *b, const double *h0,
                                        const double *d_o, const double *dht, double *dq,
                                        double *dk, double *dv, double *dg, double *dbeta,
                                        double *da, double *db, double *dh0)
{
    // q, k, dq, dk are (B, T, H, K); v, d_o, dv are (B, T, H, V); beta, dbeta are
    // (B, T, H); g, dg are (B, T, H) or (B, T, H, K); a, b, da, db are (B, T, H, K)
    // (DPLR) or NULL; h0, dht, dh0 are (B, H, K, V)
    const size_t B = dims->B, T = dims->T, H = dims->H, K = dims->K, V = dims->V, KV = K * V;
    const size_t gw = kdalab_mechanism_g_width(mech, K);
    const int ab = kdalab_mechanism_has_ab(mech);
    const size_t nseg = (T + SEGMENT - 1) / SEGMENT;
    size_t ckpt_elems, bytes;
    if (!kdalab_mul_size(nseg + 1, KV, &ckpt_elems) ||
        !kdalab_mul_size(ckpt_elems, sizeof(double), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "T = %zu checkpoints of %zu x %zu overflow", T, K,
                           V);
    bwd_ws w = {.ckpt = malloc(ckpt_elems * sizeof(double)),
                .Sseg = malloc((SEGMENT + 1) * KV * sizeof(double)),
                .Sp = malloc(KV * sizeof(double)),
                .dS = malloc(KV * sizeof(double)),
                .e = malloc(V * sizeof(double)),
                .du = malloc(V * sizeof(double)),
                .r = malloc(V * sizeof(double)),
                .dr = malloc(V * sizeof(double)),
                .alpha = malloc(K * sizeof(double))};
    if (!w.ckpt || !w.Sseg || !w.Sp || !w.dS || !w.e || !w.du || !w.r || !w.dr || !w.alpha) {
        bwd_ws_free(&w);
        return kdalab_fail(KDALAB_ENOMEM,
                           "no memory for the backward of T = %zu, K = %zu, "
                           "V = %zu",
                           T, K, V);
    }

    for (size_t bb = 0; bb < B; bb++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = bb * H + h;
            /* forward sweep: the state before each segment */
            if (h0)
                memcpy(w.ckpt, h0 + bh * KV, KV * sizeof(double));
            else
                memset(w.ckpt, 0, KV * sizeof(double));
            for (size_t sg = 0; sg < nseg; sg++) {
                memcpy(w.Sseg, w.ckpt + sg * KV, KV * sizeof(double));
                size_t t1 = (sg + 1) * SEGMENT < T ? (sg + 1) * SEGMENT : T;
                for (size_t t = sg * SEGMENT; t < t1; t++) {
                    position p = position_at(dims, mech, bb, h, t, q, k, v, g, beta, a, b);
                    step_head(mech, K, V, scale, NULL, p.k, p.v, p.g, p.beta, p.a, p.b, w.Sseg,
                              NULL, w.r);
                }
                memcpy(w.ckpt + (sg + 1) * KV, w.Sseg, KV * sizeof(double));
            }

            /* backward sweep, segment by segment */
            if (dht)
                memcpy(w.dS, dht + bh * KV, KV * sizeof(double));
            else
                memset(w.dS, 0, KV * sizeof(double));
            for (size_t sg = nseg; sg-- > 0;) {
                size_t t0 = sg * SEGMENT, t1 = t0 + SEGMENT < T ? t0 + SEGMENT : T;
                /* replay: Sseg[r] is the state before position t0 + r */
                memcpy(w.Sseg, w.ckpt + sg * KV, KV * sizeof(double));
                for (size_t t = t0; t < t1; t++) {
                    position p = position_at(dims, mech, bb, h, t, q, k, v, g, beta, a, b);
                    double *next = w.Sseg + (t - t0 + 1) * KV;
                    memcpy(next, next - KV, KV * sizeof(double));
                    step_head(mech, K, V, scale, NULL, p.k, p.v, p.g, p.beta, p.a, p.b, next,
                              NULL, w.r);
                }
                for (size_t t = t1; t-- > t0;) {
                    position p = position_at(dims, mech, bb, h, t, q, k, v, g, beta, a, b);
                    step_bwd(&w, mech, K, V, scale, &p, d_o + p.bth * V, w.Sseg + (t - t0) * KV,
                             w.Sseg + (t - t0 + 1) * KV, dq ? dq + p.bth * K : NULL,
                             dk ? dk + p.bth * K : NULL, dv ? dv + p.bth * V : NULL,
                             dg && gw ? dg + p.bth * gw : NULL,
                             dbeta && kdalab_mechanism_has_delta(mech) ? dbeta + p.bth : NULL,
                             da && ab ? da + p.bth * K : NULL, db && ab ? db + p.bth * K : NULL);
                }
            }
            if (dh0)
                memcpy(dh0 + bh * KV, w.dS, KV * sizeof(double));
        }
    bwd_ws_free(&w);
    return kdalab_check_grads_f64("recurrent backward", dims, mech, dq, dk, dv, dg, dbeta,
                                  ab ? da : NULL, ab ? db : NULL, dh0);
}
