/*
 * 12_latent_cache — the next bill (seed chapter, last paragraph: "the
 * surviving attention layers still cache 2 H d_h numbers per token, and one
 * quarter of a large number is still a large number; that is what MLA fixes").
 *
 * Sizes (flags; defaults are Kimi-Linear-48B-A3B's published configuration as
 * a public port of it lists them: 27 layers of which 7 are MLA attention,
 * layers 4, 8, ..., 24 and 27, i.e. about 3:1; 32 heads of d_h = 128; MLA
 * kv_lora_rank d_c = 512 and decoupled key width d_rope = 64; 32 KDA heads of
 * d_k = d_v = 128 with a short convolution of width 4 on q, k and v):
 *   full attention layer   2 H d_h numbers per token (the chapter's count)
 *   latent (MLA) layer     d_c + d_rope numbers per token, shared by the heads
 *   KDA layer              a fixed H d_k d_v state (--state-bytes per number,
 *                          float32 by default, as fla keeps it) plus the short
 *                          convolution's last (w - 1) inputs of q, k and v:
 *                          3 (w - 1) H d_k numbers (--cache-bytes)
 * KV and latent caches are stored at --cache-bytes per number (bf16: 2).
 * Four models: attention only with full KV, attention only with latent
 * caches (MLA everywhere), the hybrid with full-KV attention layers, and the
 * hybrid with latent attention layers (Kimi Linear). Bytes per token and the
 * total at context N = 4K ... 1M (doubling), computed.
 *
 * Measured (the numbers above are arithmetic; this checks the premise that a
 * latent cache computes the SAME attention): at a small size (--check-*),
 * per-head keys [W_uk,h c_t ; r_t] and values W_uv,h c_t expanded from a
 * latent c_t (d_c) and a shared decoupled key r_t (d_rope), attended with
 * kdalab_kv_cache (the library's softmax attention over an expanded cache),
 * against attention over the latent cache itself with absorbed queries
 * q~_h = [W_uk,h^T q_h ; q_rope,h] and o_h = W_uv,h sum_t p_t c_t. Reported:
 * max |difference| / max |o|, and the bytes of both caches (the expanded one
 * from kdalab_kv_cache_bytes). Also computed: the multiply-adds each form
 * spends per cached token and head (MLA trades bytes for arithmetic).
 *
 * Outputs (DIR = --out):
 *   12_latent_cache.tsv        per (model, N): growing cache, fixed state, total bytes
 *   12_latent_cache_model.tsv  per model: numbers and bytes per token, fixed bytes
 *   12_latent_cache_check.tsv  the equivalence check
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common.h"
#include "kdalab.h"

typedef struct {
    size_t layers, attn, H, dh, dc, drope, kda_heads, dk, conv, cache_bytes, state_bytes;
    size_t Nmin, Nmax;
    size_t cH, cdn, cdr, cdv, cdc, cN; /* the equivalence check's sizes */
} params;

typedef struct {
    const char *name, *title;
    size_t n_attn, n_kda;   /* attention and KDA layers            */
    double per_layer;       /* numbers per token per attention layer */
    double per_token_bytes; /* bytes per token, whole model          */
    double fixed_bytes;     /* KDA states + conv, whole model        */
} model;

static void make_models(const params *p, model m[4])
{
    double full = 2.0 * (double)p->H * (double)p->dh, lat = (double)(p->dc + p->drope);
    double kda = (double)p->kda_heads * (double)p->dk * (double)p->dk * (double)p->state_bytes +
                 3.0 * (double)(p->conv ? p->conv - 1 : 0) * (double)p->kda_heads *
                     (double)p->dk * (double)p->cache_bytes;
    size_t nk = p->layers - p->attn;
    m[0] = (model){"attention_full", "attention only, full KV", p->layers, 0, full, 0, 0};
    m[1] = (model){"attention_latent", "attention only, latent (MLA)", p->layers, 0, lat, 0, 0};
    m[2] = (model){"hybrid_full", "hybrid, full-KV attention", p->attn, nk, full, 0, 0};
    m[3] = (model){"hybrid_latent", "hybrid, latent attention (Kimi Linear)", p->attn, nk, lat,
                   0, 0};
    for (int i = 0; i < 4; i++) {
        m[i].per_token_bytes = (double)m[i].n_attn * m[i].per_layer * (double)p->cache_bytes;
        m[i].fixed_bytes = (double)m[i].n_kda * kda;
    }
}

/* ---- the equivalence check -------------------------------------------------------------- */

typedef struct {
    double rel_err;
    size_t expanded_bytes, latent_bytes; /* float64, as stored in the check */
} check_result;

static check_result latent_check(lab_ctx *x, const params *p, gsl_rng *rng)
{
    const size_t H = p->cH, dn = p->cdn, dr = p->cdr, dv = p->cdv, dc = p->cdc, N = p->cN;
    const size_t dkh = dn + dr; /* per-head key width of the expanded cache */
    double *Wuk = lab_zeros(x, H * dn * dc), *Wuv = lab_zeros(x, H * dv * dc);
    double *c = lab_zeros(x, N * dc), *r = lab_zeros(x, N * dr);
    double *k = lab_zeros(x, H * dkh), *v = lab_zeros(x, H * dv);
    double *q = lab_zeros(x, H * dkh), *o = lab_zeros(x, H * dv), *ol = lab_zeros(x, H * dv);
    double *qt = lab_zeros(x, dc + dr), *s = lab_zeros(x, N), *acc = lab_zeros(x, dc);
    for (size_t i = 0; i < H * dn * dc; i++) Wuk[i] = gsl_ran_gaussian(rng, 1.0 / sqrt((double)dc));
    for (size_t i = 0; i < H * dv * dc; i++) Wuv[i] = gsl_ran_gaussian(rng, 1.0 / sqrt((double)dc));
    for (size_t i = 0; i < N * dc; i++) c[i] = gsl_ran_gaussian(rng, 1.0);
    for (size_t i = 0; i < N * dr; i++) r[i] = gsl_ran_gaussian(rng, 1.0);
    for (size_t i = 0; i < H * dkh; i++) q[i] = gsl_ran_gaussian(rng, 1.0);
    double scale = 1.0 / sqrt((double)dkh);

    /* expanded: every head's key and value materialised in a kdalab_kv_cache */
    kdalab_kv_cache *kv = kdalab_kv_cache_new(H, dkh, dv);
    if (!kv) lab_check(x, KDALAB_ENOMEM, "kv cache");
    for (size_t t = 0; t < N; t++) {
        for (size_t h = 0; h < H; h++) {
            for (size_t i = 0; i < dn; i++) {
                double a = 0;
                for (size_t j = 0; j < dc; j++) a += Wuk[(h * dn + i) * dc + j] * c[t * dc + j];
                k[h * dkh + i] = a;
            }
            for (size_t i = 0; i < dr; i++) k[h * dkh + dn + i] = r[t * dr + i];
            for (size_t i = 0; i < dv; i++) {
                double a = 0;
                for (size_t j = 0; j < dc; j++) a += Wuv[(h * dv + i) * dc + j] * c[t * dc + j];
                v[h * dv + i] = a;
            }
        }
        lab_check(x, kdalab_kv_cache_append(kv, k, v), "kv append");
    }
    lab_check(x, kdalab_kv_cache_attend(kv, scale, q, o), "attend");
    check_result res = {.expanded_bytes = kdalab_kv_cache_bytes(kv),
                        .latent_bytes = N * (dc + dr) * sizeof(double)};
    kdalab_kv_cache_free(kv);

    /* latent: absorb W_uk into the query, attend over [c ; r], expand the sum once */
    for (size_t h = 0; h < H; h++) {
        for (size_t j = 0; j < dc; j++) {
            double a = 0;
            for (size_t i = 0; i < dn; i++) a += Wuk[(h * dn + i) * dc + j] * q[h * dkh + i];
            qt[j] = a;
        }
        for (size_t i = 0; i < dr; i++) qt[dc + i] = q[h * dkh + dn + i];
        double mx = -INFINITY, z = 0;
        for (size_t t = 0; t < N; t++) {
            double a = 0;
            for (size_t j = 0; j < dc; j++) a += qt[j] * c[t * dc + j];
            for (size_t i = 0; i < dr; i++) a += qt[dc + i] * r[t * dr + i];
            s[t] = scale * a;
            mx = fmax(mx, s[t]);
        }
        memset(acc, 0, dc * sizeof *acc);
        for (size_t t = 0; t < N; t++) {
            double w = exp(s[t] - mx);
            z += w;
            for (size_t j = 0; j < dc; j++) acc[j] += w * c[t * dc + j];
        }
        for (size_t i = 0; i < dv; i++) {
            double a = 0;
            for (size_t j = 0; j < dc; j++) a += Wuv[(h * dv + i) * dc + j] * acc[j];
            ol[h * dv + i] = a / z;
        }
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < H * dv; i++) {
        num = fmax(num, fabs(o[i] - ol[i]));
        den = fmax(den, fabs(o[i]));
    }
    res.rel_err = num / den;
    double *all[] = {Wuk, Wuv, c, r, k, v, q, o, ol, qt, s, acc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return res;
}

/* ---- output ---------------------------------------------------------------------------------- */

static double gib(double b) { return b / 1073741824.0; }

static void write_models(lab_ctx *x, const params *p, const model *m)
{
    static const char *const cols[] = {
        "model", "attention_full, attention_latent, hybrid_full, hybrid_latent",
        "attn_layers", "layers that cache per token",
        "kda_layers", "layers with a fixed state",
        "numbers_per_layer", "numbers cached per token per attention layer: 2 H d_h or "
                             "d_c + d_rope",
        "bytes_per_token", "bytes cached per token, whole model",
        "fixed_bytes", "KDA states and conv windows, whole model, bytes",
        "fraction", "bytes_per_token / attention_full's",
        NULL};
    FILE *f = lab_tsv_open(x, "12_latent_cache_model", cols,
                           "L=%zu (attention %zu), H=%zu d_h=%zu, d_c=%zu d_rope=%zu, KDA %zu "
                           "heads d_k=d_v=%zu conv %zu, cache %zu B, state %zu B per number",
                           p->layers, p->attn, p->H, p->dh, p->dc, p->drope, p->kda_heads, p->dk,
                           p->conv, p->cache_bytes, p->state_bytes);
    printf("Per token (%zu layers, %zu of them attention in the hybrid; cache %zu B, KDA state "
           "%zu B per number):\n", p->layers, p->attn, p->cache_bytes, p->state_bytes);
    printf("%-40s %6s %6s %12s %14s %14s %9s\n", "model", "attn", "KDA", "numbers/lay",
           "bytes/token", "fixed bytes", "fraction");
    for (int i = 0; i < 4; i++) {
        double fr = m[i].per_token_bytes / m[0].per_token_bytes;
        fprintf(f, "%s\t%zu\t%zu\t%.0f\t%.0f\t%.0f\t%.6f\n", m[i].name, m[i].n_attn, m[i].n_kda,
                m[i].per_layer, m[i].per_token_bytes, m[i].fixed_bytes, fr);
        printf("%-40s %6zu %6zu %12.0f %14.0f %14.0f %9.4f\n", m[i].title, m[i].n_attn,
               m[i].n_kda, m[i].per_layer, m[i].per_token_bytes, m[i].fixed_bytes, fr);
    }
    lab_tsv_close(x, f);
}

static void write_contexts(lab_ctx *x, const params *p, const model *m)
{
    static const char *const cols[] = {
        "model", "as in 12_latent_cache_model.tsv",
        "N", "context length, tokens",
        "cache_bytes", "N * bytes_per_token (the growing part)",
        "fixed_bytes", "KDA states and conv windows (constant)",
        "total_bytes", "cache_bytes + fixed_bytes",
        "total_gib", "total_bytes / 2^30",
        NULL};
    FILE *f = lab_tsv_open(x, "12_latent_cache", cols, "N = %zu..%zu doubling; sizes as in "
                           "12_latent_cache_model.tsv", p->Nmin, p->Nmax);
    printf("\nTotal decode-time memory, GiB (cache + fixed KDA states):\n%9s", "N");
    for (int i = 0; i < 4; i++) printf(" %18s", m[i].name);
    printf("\n");
    for (int i = 0; i < 4; i++) {
        for (size_t N = p->Nmin; N <= p->Nmax; N *= 2) {
            double cb = (double)N * m[i].per_token_bytes, tot = cb + m[i].fixed_bytes;
            fprintf(f, "%s\t%zu\t%.0f\t%.0f\t%.0f\t%.6f\n", m[i].name, N, cb, m[i].fixed_bytes,
                    tot, gib(tot));
        }
        fprintf(f, "\n\n");
    }
    for (size_t N = p->Nmin; N <= p->Nmax; N *= 2) {
        printf("%9zu", N);
        for (int i = 0; i < 4; i++)
            printf(" %18.4f", gib((double)N * m[i].per_token_bytes + m[i].fixed_bytes));
        printf("\n");
    }
    lab_tsv_close(x, f);
}

static void write_check(lab_ctx *x, const params *p, const check_result *c)
{
    static const char *const cols[] = {
        "H", "heads", "d_nope", "per-head key width from the latent", "d_rope",
        "decoupled key width (shared by the heads)", "d_v", "value width per head", "d_c",
        "latent width", "N", "cached tokens",
        "rel_err", "max |o_latent - o_expanded| / max |o_expanded| (kdalab_kv_cache_attend)",
        "expanded_bytes", "kdalab_kv_cache_bytes of the expanded cache (float64)",
        "latent_bytes", "N (d_c + d_rope) * 8",
        NULL};
    FILE *f = lab_tsv_open(x, "12_latent_cache_check", cols, "random N(0,1) latents and "
                           "decoupled keys, W ~ N(0, 1/d_c), scale (d_nope + d_rope)^-1/2");
    fprintf(f, "%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%.3e\t%zu\t%zu\n", p->cH, p->cdn, p->cdr, p->cdv,
            p->cdc, p->cN, c->rel_err, c->expanded_bytes, c->latent_bytes);
    lab_tsv_close(x, f);
}

static void print_verdict(const params *p, const model *m, const check_result *c)
{
    double N = (double)p->Nmax, full = 2.0 * (double)p->H * (double)p->dh;
    double lat = (double)(p->dc + p->drope);
    double hyf = N * m[2].per_token_bytes + m[2].fixed_bytes;
    double hyl = N * m[3].per_token_bytes + m[3].fixed_bytes;
    double att = N * m[0].per_token_bytes, mla = N * m[1].per_token_bytes;
    double cross = m[3].fixed_bytes / m[3].per_token_bytes;
    /* multiply-adds per cached token per head at decode: scores and values */
    double mac_full = (double)(p->dh + p->drope) + (double)p->dh, mac_lat = lat + (double)p->dc;
    printf("\nEquivalence (H = %zu, d_c = %zu, d_rope = %zu, N = %zu): attention over the latent "
           "cache equals attention over the expanded cache to %.1e (relative); the latent "
           "cache holds %zu bytes, the expanded one %zu (float64 here).\n", p->cH, p->cdc,
           p->cdr, p->cN, c->rel_err, c->latent_bytes, c->expanded_bytes);
    printf("Cost of the saving: per cached token and head, the latent form spends %.0f "
           "multiply-adds (d_c + d_rope for the score, d_c for the value sum) against %.0f for "
           "an expanded MLA cache (d_h + d_rope, d_h): x%.1f the arithmetic for x%.1f fewer "
           "bytes than the chapter's 2 H d_h.\n", mac_lat, mac_full, mac_lat / mac_full,
           full / lat);
    printf("\nVerdict: at N = %zu the hybrid with full-KV attention still caches %.1f GiB "
           "(attention only: %.1f GiB; %.1f%% of it: \"one quarter of a large number is still "
           "a large number\"). A latent cache stores %.0f instead of %.0f numbers per token "
           "and layer (x%.1f less): %.2f GiB for the Kimi-Linear-like hybrid, %.2f GiB for MLA "
           "everywhere; the %zu KDA layers' fixed states are %.1f MiB, equal to the latent "
           "cache at N = %.0f tokens. %s\n", p->Nmax, gib(hyf), gib(att), 100 * hyf / att, lat,
           full, full / lat, gib(hyl), gib(mla), p->layers - p->attn,
           m[3].fixed_bytes / 1048576.0, cross,
           c->rel_err < 1e-12 && hyl < hyf / 4 ? "CONFIRMED (sizes computed; equivalence "
                                                "measured)." : "NOT CONFIRMED.");
}

int main(int argc, char **argv)
{
    lab_ctx x;
    params p = {.layers = 27, .attn = 7, .H = 32, .dh = 128, .dc = 512, .drope = 64,
                .kda_heads = 32, .dk = 128, .conv = 4, .cache_bytes = 2, .state_bytes = 4,
                .Nmin = 4096, .Nmax = 1048576,
                .cH = 4, .cdn = 32, .cdr = 16, .cdv = 32, .cdc = 64, .cN = 512};
    lab_init(&x, "12_latent_cache",
             "cache bytes per token and in total at 4K..1M context: attention only, the "
             "hybrid of 20 KDA and 7 attention layers (about 3:1) with full KV, and with an "
             "MLA-style latent cache");
    lab_flag_size(&x, "layers", &p.layers, "layers L");
    lab_flag_size(&x, "attn", &p.attn, "attention layers of the hybrid (the rest are KDA)");
    lab_flag_size(&x, "H", &p.H, "attention heads");
    lab_flag_size(&x, "dh", &p.dh, "attention head dimension d_h");
    lab_flag_size(&x, "dc", &p.dc, "latent width d_c (MLA kv_lora_rank)");
    lab_flag_size(&x, "drope", &p.drope, "decoupled key width d_rope");
    lab_flag_size(&x, "kda-heads", &p.kda_heads, "KDA heads");
    lab_flag_size(&x, "dk", &p.dk, "KDA head dimension d_k = d_v");
    lab_flag_size(&x, "conv", &p.conv, "KDA short convolution width (0: none)");
    lab_flag_size(&x, "cache-bytes", &p.cache_bytes, "bytes per cached number (2: bf16)");
    lab_flag_size(&x, "state-bytes", &p.state_bytes, "bytes per KDA state number (4: fp32)");
    lab_flag_size(&x, "Nmin", &p.Nmin, "smallest context (doubled up to --Nmax)");
    lab_flag_size(&x, "Nmax", &p.Nmax, "largest context");
    lab_flag_size(&x, "check-N", &p.cN, "tokens of the equivalence check");
    lab_flag_size(&x, "check-dc", &p.cdc, "latent width of the equivalence check");
    lab_parse(&x, argc, argv);
    lab_need(&x, p.layers >= 1 && p.attn <= p.layers, "--layers, --attn",
             "1 <= layers, attn <= layers");
    lab_need(&x, p.H >= 1 && p.dh >= 1 && p.dc >= 1 && p.kda_heads >= 1 && p.dk >= 1,
             "--H, --dh, --dc, --kda-heads, --dk", "each >= 1");
    lab_need(&x, p.cache_bytes >= 1 && p.state_bytes >= 1, "--cache-bytes, --state-bytes",
             "each >= 1");
    lab_need(&x, p.Nmin >= 1 && p.Nmin <= p.Nmax, "--Nmin, --Nmax", "1 <= Nmin <= Nmax");
    lab_need(&x, p.cN >= 1 && p.cN <= 100000, "--check-N", "1 <= check-N <= 100000");
    lab_need(&x, p.cdc >= 1 && p.cdc <= 4096, "--check-dc", "1 <= check-dc <= 4096");
    model m[4];
    make_models(&p, m);
    write_models(&x, &p, m);
    write_contexts(&x, &p, m);
    gsl_rng *rng = lab_rng(&x);
    check_result c = latent_check(&x, &p, rng);
    gsl_rng_free(rng);
    write_check(&x, &p, &c);
    print_verdict(&p, m, &c);
    printf("\n%s: %.2f s; results in %s/12_latent_cache*.tsv\n", x.name, lab_elapsed(&x), x.out);
    return 0;
}
