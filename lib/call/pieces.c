/*
 * lib/call/pieces.c — the reference forms (and the float32 SIMD recurrence)
 * over fla's varlen (cu_seqlens) and GVA layouts: each (sequence, value
 * head) is gathered into a plain one-sequence, one-head call of the form,
 * and its results scattered back (kdalab_call.h describes the layouts).
 *
 * defines: kdalab__run_pieces (internal.h)
 *
 * One driver serves float64 and float32, forward and backward: rows are
 * moved by memcpy of `es` bytes per element, and the form runs on a
 * gathered piece. The call was validated (lib/call/call.c); the outputs are
 * assembled in scratch and copied out only at the end, so a failure (no
 * memory) leaves them untouched. The reference is the oracle, so the copies
 * cost nothing that matters; the SIMD chunkwise path reads every layout in
 * place instead (lib/simd/entry_impl.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The call, with its arrays as untyped pointers (float64 or float32). */
typedef struct {
    const kdalab__call *c;
    size_t es; /* bytes per element: 8 or 4 */
    double scale;
    int bwd;
    const void *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
    const void *a, *b; /* DPLR rows only */
} call;

/* One (sequence, value head), gathered: L positions of one head. */
typedef struct {
    kdalab_dims d;                  /* {1, L, 1, K, V}                        */
    void *q, *k, *v, *g, *beta, *h0; // (L, K), (L, K), (L, V), (L, gw), (L), (K, V)
    void *a, *b;                     // (L, K) each: DPLR rows
    void *d_o, *dht;                 // (L, V), (K, V)
    void *o, *ht;                    // forward: (L, V), (K, V)
    void *dq, *dk, *dv, *dg, *dbeta, *dh0, *da, *db; // backward: like the inputs
} piece;

/* The form on one piece. */
static kdalab_status run_piece(const call *a, piece *p, kdalab_report *rep)
{
    const kdalab__call *c = a->c;
    const kdalab_dims *d = &p->d;
    const void *h0 = a->h0 ? p->h0 : NULL, *dht = a->dht ? p->dht : NULL;
    const void *pa = c->ab ? p->a : NULL, *pb = c->ab ? p->b : NULL;
    void *da = c->ab ? p->da : NULL, *db = c->ab ? p->db : NULL;
    const int chunk = c->form == KDALAB_FORM_CHUNK;
    if (a->bwd && a->es == 8)
        return chunk ? kdalab__chunk_bwd_f64(d, c->mech, a->scale, p->q, p->k, p->v, p->g,
                                             p->beta, pa, pb, h0, p->d_o, dht, p->dq, p->dk,
                                             p->dv, p->dg, p->dbeta, da, db, p->dh0, &c->op)
                     : kdalab__recurrent_bwd_f64(d, c->mech, a->scale, p->q, p->k, p->v, p->g,
                                                 p->beta, pa, pb, h0, p->d_o, dht, p->dq,
                                                 p->dk, p->dv, p->dg, p->dbeta, da, db,
                                                 p->dh0);
    float s = (float)a->scale;
    if (a->bwd)
        return chunk ? kdalab__chunk_bwd_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta,
                                             pa, pb, h0, p->d_o, dht, p->dq, p->dk, p->dv,
                                             p->dg, p->dbeta, da, db, p->dh0, &c->op)
                     : kdalab__recurrent_bwd_f32(d, c->mech, s, p->q, p->k, p->v, p->g,
                                                 p->beta, pa, pb, h0, p->d_o, dht, p->dq,
                                                 p->dk, p->dv, p->dg, p->dbeta, da, db,
                                                 p->dh0);
    if (a->es == 8)
        return chunk ? kdalab__chunk_f64(d, c->mech, a->scale, p->q, p->k, p->v, p->g, p->beta,
                                         pa, pb, h0, p->o, p->ht, &c->op, rep)
                     : kdalab__recurrent_f64(d, c->mech, a->scale, p->q, p->k, p->v, p->g,
                                             p->beta, pa, pb, h0, p->o, p->ht);
    if (chunk)
        return kdalab__chunk_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, pa, pb, h0,
                                 p->o, p->ht, &c->op, rep);
    if (c->impl == KDALAB_IMPL_SIMD)
        return kdalab__simd_recurrent_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, h0,
                                          p->o, p->ht);
    return kdalab__recurrent_f32(d, c->mech, s, p->q, p->k, p->v, p->g, p->beta, pa, pb, h0,
                                 p->o, p->ht);
}

/* Rows t0 .. t0+L-1 of head h of an array [B, T, heads, width] <-> a
 * contiguous (L, width) block. */
static void gather(void *dst, const void *src, const call *a, size_t b, size_t t0, size_t L,
                   size_t heads, size_t h, size_t width)
{
    for (size_t r = 0; r < L; r++)
        memcpy((char *)dst + r * width * a->es,
               (const char *)src + (((b * a->c->T + t0 + r) * heads + h) * width) * a->es,
               width * a->es);
}

static void scatter(void *dst, const void *src, const call *a, size_t b, size_t t0, size_t L,
                    size_t heads, size_t h, size_t width)
{
    for (size_t r = 0; r < L; r++)
        memcpy((char *)dst + (((b * a->c->T + t0 + r) * heads + h) * width) * a->es,
               (const char *)src + r * width * a->es, width * a->es);
}

/* dst rows += src rows (the G value heads that read one query/key head).
 * Returns the number of sums that are not finite: finite shares can add up
 * past the largest value, which no piece saw. */
static size_t scatter_add(void *dst, const void *src, const call *a, size_t b, size_t t0,
                          size_t L, size_t h, size_t width)
{
    size_t bad = 0;
    for (size_t r = 0; r < L; r++)
        for (size_t x = 0; x < width; x++) {
            size_t at = ((b * a->c->T + t0 + r) * a->c->H + h) * width + x;
            if (a->es == 8) {
                double *d = (double *)dst + at;
                *d += ((const double *)src)[r * width + x];
                bad += !isfinite(*d);
            } else {
                float *d = (float *)dst + at;
                *d += ((const float *)src)[r * width + x];
                bad += !isfinite(*d);
            }
        }
    return bad;
}

/* The outputs, each (size in elements, destination, scratch). */
enum { O_O, O_HT, O_DQ, O_DK, O_DV, O_DG, O_DBETA, O_DH0, O_DA, O_DB, N_OUTS };

static kdalab_status drive(const call *a, void *const dest[N_OUTS], kdalab_report *report)
{
    const kdalab__call *c = a->c;
    size_t rows = c->B * c->T, state = c->N * c->HV * c->K * c->V;
    size_t total[N_OUTS] = {rows * c->HV * c->V, state, rows * c->H * c->K,
                            rows * c->H * c->K, rows * c->HV * c->V, rows * c->HV * c->gw,
                            rows * c->HV, state, rows * c->HV * c->K, rows * c->HV * c->K};
    size_t Lb = c->Lmax ? c->Lmax : 1, KV = c->K * c->V;
    /* scratch: the piece's buffers, and every output whole */
    void *all[N_OUTS] = {0};
    piece p = {0};
    void **bufs[] = {&p.q, &p.k, &p.v, &p.g, &p.beta, &p.h0, &p.d_o, &p.dht, &p.o,
                     &p.ht, &p.dq, &p.dk, &p.dv, &p.dg, &p.dbeta, &p.dh0,
                     &p.a, &p.b, &p.da, &p.db};
    const size_t Kab = c->ab ? c->K : 1; /* a, b and their gradients: DPLR rows */
    size_t sizes[] = {Lb * c->K, Lb * c->K, Lb * c->V, Lb * (c->gw ? c->gw : 1), Lb, KV,
                      Lb * c->V, KV, Lb * c->V, KV, Lb * c->K, Lb * c->K, Lb * c->V,
                      Lb * (c->gw ? c->gw : 1), Lb, KV, Lb * Kab, Lb * Kab, Lb * Kab,
                      Lb * Kab};
    int ok = 1;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ok &= (*bufs[i] = calloc(sizes[i], a->es)) != NULL;
    for (int i = 0; i < N_OUTS; i++)
        if (dest[i])
            ok &= (all[i] = calloc(total[i] ? total[i] : 1, a->es)) != NULL;
    kdalab_status worst = KDALAB_OK;
    if (!ok)
        worst = kdalab_fail(KDALAB_ENOMEM, "no memory for a batch of T = %zu", c->T);
    kdalab_report rep = {0};

    for (size_t n = 0; worst != KDALAB_ENOMEM && n < c->N; n++) {
        size_t b, t0, L;
        kdalab__call_seq(c, n, &b, &t0, &L);
        p.d = (kdalab_dims){.B = 1, .T = L, .H = 1, .K = c->K, .V = c->V};
        for (size_t j = 0; j < c->HV; j++) {
            size_t h = j / c->G, nj = (n * c->HV + j) * KV; /* q/k head; state offset */
            gather(p.q, a->q, a, b, t0, L, c->H, h, c->K);
            gather(p.k, a->k, a, b, t0, L, c->H, h, c->K);
            gather(p.v, a->v, a, b, t0, L, c->HV, j, c->V);
            if (c->gw)
                gather(p.g, a->g, a, b, t0, L, c->HV, j, c->gw);
            if (c->delta)
                gather(p.beta, a->beta, a, b, t0, L, c->HV, j, 1);
            if (c->ab) {
                gather(p.a, a->a, a, b, t0, L, c->HV, j, c->K);
                gather(p.b, a->b, a, b, t0, L, c->HV, j, c->K);
            }
            if (a->h0)
                memcpy(p.h0, (const char *)a->h0 + nj * a->es, KV * a->es);
            if (a->bwd) {
                gather(p.d_o, a->d_o, a, b, t0, L, c->HV, j, c->V);
                if (a->dht)
                    memcpy(p.dht, (const char *)a->dht + nj * a->es, KV * a->es);
            }
            kdalab_report pr = {0};
            kdalab_status s = run_piece(a, &p, &pr);
            if (s != KDALAB_OK && s != KDALAB_ERANGE) {
                worst = s;
                break;
            }
            if (s == KDALAB_ERANGE)
                worst = s;
            rep.nonfinite_o += pr.nonfinite_o;
            rep.nonfinite_ht += pr.nonfinite_ht;
            rep.max_exponent = pr.max_exponent > rep.max_exponent ? pr.max_exponent
                                                                  : rep.max_exponent;
            /* scatter into the whole-output scratch */
            if (!a->bwd) {
                if (all[O_O])
                    scatter(all[O_O], p.o, a, b, t0, L, c->HV, j, c->V);
                if (all[O_HT])
                    memcpy((char *)all[O_HT] + nj * a->es, p.ht, KV * a->es);
                continue;
            }
            size_t sum_bad = 0; /* dq, dk: summed over the value heads of a group */
            if (all[O_DQ])
                sum_bad += scatter_add(all[O_DQ], p.dq, a, b, t0, L, h, c->K);
            if (all[O_DK])
                sum_bad += scatter_add(all[O_DK], p.dk, a, b, t0, L, h, c->K);
            if (sum_bad)
                worst = KDALAB_ERANGE;
            if (all[O_DV])
                scatter(all[O_DV], p.dv, a, b, t0, L, c->HV, j, c->V);
            if (all[O_DG] && c->gw)
                scatter(all[O_DG], p.dg, a, b, t0, L, c->HV, j, c->gw);
            if (all[O_DBETA] && c->delta)
                scatter(all[O_DBETA], p.dbeta, a, b, t0, L, c->HV, j, 1);
            if (all[O_DH0])
                memcpy((char *)all[O_DH0] + nj * a->es, p.dh0, KV * a->es);
            if (all[O_DA] && c->ab)
                scatter(all[O_DA], p.da, a, b, t0, L, c->HV, j, c->K);
            if (all[O_DB] && c->ab)
                scatter(all[O_DB], p.db, a, b, t0, L, c->HV, j, c->K);
        }
        if (worst != KDALAB_OK && worst != KDALAB_ERANGE)
            break;
    }
    /* an overflow: the first output holding non-finite values, and how many */
    static const char *const names[N_OUTS] = {"o",  "ht",    "dq",  "dk", "dv",
                                              "dg", "dbeta", "dh0", "da", "db"};
    int bad_out = -1;
    size_t bad_n = 0;
    for (int i = 0; worst == KDALAB_ERANGE && bad_out < 0 && i < N_OUTS; i++) {
        for (size_t e = 0; all[i] && e < total[i]; e++)
            bad_n += a->es == 8 ? !isfinite(((const double *)all[i])[e])
                                : !isfinite(((const float *)all[i])[e]);
        if (bad_n)
            bad_out = i;
    }
    if (worst == KDALAB_ERANGE && bad_out < 0) {
        /* the overflow is in an output the caller did not ask for: what was
         * asked for is finite, and the SIMD path says OK for it too */
        worst = KDALAB_OK;
        rep.nonfinite_o = dest[O_O] ? rep.nonfinite_o : 0;
        rep.nonfinite_ht = dest[O_HT] ? rep.nonfinite_ht : 0;
    }
    if (worst == KDALAB_OK || worst == KDALAB_ERANGE)
        for (int i = 0; i < N_OUTS; i++)
            if (dest[i] && total[i])
                memcpy(dest[i], all[i], total[i] * a->es);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    for (int i = 0; i < N_OUTS; i++)
        free(all[i]);
    if (report && (worst == KDALAB_OK || worst == KDALAB_ERANGE))
        *report = rep;
    if (worst == KDALAB_ERANGE)
        return kdalab_fail(KDALAB_ERANGE,
                           "%s: the computation overflowed from finite inputs: %zu non-finite "
                           "values in %s (outputs written)",
                           a->bwd ? "backward" : "forward", bad_n, names[bad_out]);
    if (worst == KDALAB_OK)
        kdalab_clear_error();
    return worst;
}

kdalab_status kdalab__run_pieces(const kdalab__call *c, size_t es, double scale, const void *x,
                                 int bwd, kdalab_report *report)
{
    /* kdalab_tensors_f64 and _f32 name the same fields in the same order */
    call a = {.c = c, .es = es, .scale = scale, .bwd = bwd};
    void *dest[N_OUTS] = {0};
#define TAKE(T)                                                                                \
    do {                                                                                       \
        const T *t = x;                                                                        \
        a.q = t->q, a.k = t->k, a.v = t->v, a.g = c->gw ? t->g : NULL;                         \
        a.beta = c->delta ? t->beta : NULL, a.h0 = t->h0;                                      \
        a.a = c->ab ? t->a : NULL, a.b = c->ab ? t->b : NULL;                                  \
        if (bwd) {                                                                             \
            a.d_o = t->d_o, a.dht = t->dht;                                                    \
            dest[O_DQ] = t->dq, dest[O_DK] = t->dk, dest[O_DV] = t->dv;                        \
            dest[O_DG] = c->gw ? t->dg : NULL, dest[O_DBETA] = c->delta ? t->dbeta : NULL;     \
            dest[O_DH0] = t->dh0;                                                              \
            dest[O_DA] = c->ab ? t->da : NULL, dest[O_DB] = c->ab ? t->db : NULL;              \
        } else {                                                                               \
            dest[O_O] = t->o, dest[O_HT] = t->ht;                                              \
        }                                                                                      \
    } while (0)
    if (es == 8)
        TAKE(kdalab_tensors_f64);
    else
        TAKE(kdalab_tensors_f32);
#undef TAKE
    return drive(&a, dest, report);
}
