/*
 * experiments/cache_model.c — the decode-time cache of KDA + attention stacks
 * at documented sizes; see cache_model.h for the formula.
 *
 * Kimi Linear's sizes are those of Kimi-Linear-48B-A3B (its Hugging Face
 * config, as read by fla, vLLM and llama.cpp): d_model 2304, 27 layers; KDA
 * layers with 32 heads of d_k = d_v = 128 and a short convolution of kernel 4
 * on q, k and v; MLA attention layers (NoPE) caching the compressed latent
 * kv_lora_rank = 512 plus the shared key part qk_rope_head_dim = 64, i.e.
 * 576 numbers per token per layer; attention at layers 4, 8, ..., 24 and 27
 * (7 of 27, KDA : MLA = 20 : 7, the "3:1" of the paper).
 */
#include "cache_model.h"

#include <math.h>
#include <stdio.h>

double cache_model_state(const cache_model *m)
{
    double conv = m->conv_kernel ? (double)(m->conv_kernel - 1) * 3.0 * (double)(m->heads * m->dk) : 0.0;
    return (double)m->heads * (double)m->dk * (double)m->dv + conv;
}

double cache_model_fraction(const cache_model *m, double c)
{
    double L = (double)(m->n_kda + m->n_attn), a = (double)m->per_token;
    return ((double)m->n_attn * c * a + (double)m->n_kda * cache_model_state(m)) / (L * c * a);
}

double cache_model_context_for_fall(const cache_model *m, double fall)
{
    /* 1 - fraction >= fall  <=>  c >= n_kda state / (per_token (L (1 - fall) - n_attn)) */
    double L = (double)(m->n_kda + m->n_attn);
    double room = L * (1.0 - fall) - (double)m->n_attn;
    if (!(room > 0.0)) return INFINITY;
    double c = ceil((double)m->n_kda * cache_model_state(m) / ((double)m->per_token * room));
    while (c > 1.0 && 1.0 - cache_model_fraction(m, c - 1.0) >= fall) c -= 1.0; /* rounding */
    while (1.0 - cache_model_fraction(m, c) < fall) c += 1.0;
    return c;
}

enum { N_MODELS = 4 };

void cache_model_report(const lab_ctx *x, size_t H, size_t d_head, size_t context, double measured)
{
    const cache_model models[N_MODELS] = {
        {"kimi_mla_3to1", "Kimi-Linear-48B-A3B layers at exactly 3:1 (KDA 32x128x128 + conv 4; MLA 576 per token)",
         3, 1, 32, 128, 128, 4, 576},
        {"kimi_mla_27layers", "the released 27-layer layout: 20 KDA + 7 MLA layers, the same layer sizes",
         20, 7, 32, 128, 128, 4, 576},
        {"kimi_mha_3to1", "the same KDA layers at 3:1 with attention caching full K and V, 2*32*128 per token",
         3, 1, 32, 128, 128, 4, 2 * 32 * 128},
        {"lab_3to1", "this lab's stack of part 1 (no convolution; K and V cached, 2*H*d_head per token)",
         3, 1, H, d_head, d_head, 0, 2 * H * d_head},
    };
    static const char *const cols[] = {
        "context", "context length c (tokens)",
        "kimi_mla_3to1", "Kimi-Linear layer sizes at exactly 3:1: cache / attention-only (all-MLA) cache (1)",
        "kimi_mla_27layers", "the released 20 KDA + 7 MLA layout, the same (1)",
        "kimi_mha_3to1", "the same KDA layers, attention caching K and V (2 H d_head per token): / all-MHA (1)",
        "lab_3to1", "this lab's 3:1 stack (part 1): / its attention-only stack (1)", NULL};
    FILE *f = lab_tsv_open(x, "05_hybrid_cache_kimi", cols,
                           "arithmetic from documented sizes, every number the same width; Kimi-Linear-48B-A3B: "
                           "KDA 32 heads x 128 x 128 + short conv kernel 4 (q,k,v) = %.0f numbers per layer, MLA "
                           "kv_lora_rank 512 + qk_rope_head_dim 64 = 576 numbers per token per layer; lab stack "
                           "H=%zu d_head=%zu", cache_model_state(&models[0]), H, d_head);
    for (int i = 0; i <= 80; i++) {
        double c = 1024.0 * pow(2.0, i / 8.0);
        fprintf(f, "%.0f", round(c));
        for (int m = 0; m < N_MODELS; m++) fprintf(f, "\t%.6f", cache_model_fraction(&models[m], round(c)));
        fprintf(f, "\n");
    }
    lab_tsv_close(x, f);

    static const char *const fcols[] = {
        "model", "kimi_mla_3to1 | kimi_mla_27layers | kimi_mha_3to1 | lab_3to1",
        "n_kda", "KDA layers (per period, or in the whole stack)",
        "n_attn", "attention layers (the same)",
        "state", "numbers one KDA layer holds (state + convolution cache)",
        "per_token", "numbers one attention layer caches per token",
        "break_even", "state / per_token: the context where one KDA state weighs one attention cache (tokens)",
        "fall_max", "n_kda / (n_kda + n_attn): the fall as the context grows without bound (1)",
        "ctx_fall70", "smallest context where the fall 1 - fraction reaches 0.70 (tokens; inf: never)",
        "ctx_fall74", "smallest context where the fall reaches 0.74 (tokens; inf: never)",
        "frac_4k", "fraction at 4096 tokens (1)",
        "frac_32k", "fraction at 32768 tokens (1)",
        "frac_128k", "fraction at 131072 tokens (1)",
        "frac_1m", "fraction at 1048576 tokens (1)", NULL};
    FILE *g = lab_tsv_open(x, "05_hybrid_cache_kimi_fall", fcols, "as 05_hybrid_cache_kimi.tsv");
    printf("\nthe cache bill at documented sizes (arithmetic, every number the same width; attention-only = the "
           "same depth, same attention):\n");
    printf("  %-18s %11s %9s %10s %10s %9s %9s %9s %9s\n", "model", "break-even", "fall max", "fall 70%",
           "fall 74%", "@4K", "@32K", "@128K", "@1M");
    for (int m = 0; m < N_MODELS; m++) {
        const cache_model *cm = &models[m];
        double be = cache_model_state(cm) / (double)cm->per_token;
        double fmax_ = (double)cm->n_kda / (double)(cm->n_kda + cm->n_attn);
        double c70 = cache_model_context_for_fall(cm, 0.70), c74 = cache_model_context_for_fall(cm, 0.74);
        double fr[4];
        static const double at[4] = {4096, 32768, 131072, 1048576};
        for (int i = 0; i < 4; i++) fr[i] = cache_model_fraction(cm, at[i]);
        fprintf(g, "%s\t%zu\t%zu\t%.0f\t%zu\t%.1f\t%.4f\t%.0f\t%.0f\t%.4f\t%.4f\t%.4f\t%.4f\n", cm->name, cm->n_kda,
                cm->n_attn, cache_model_state(cm), cm->per_token, be, fmax_, c70, c74, fr[0], fr[1], fr[2], fr[3]);
        printf("  %-18s %9.0f t %8.2f%% %10.0f %10.0f %9.3f %9.3f %9.3f %9.3f\n", cm->name, be, 100.0 * fmax_, c70,
               c74, fr[0], fr[1], fr[2], fr[3]);
    }
    lab_tsv_close(x, g);
    for (int m = 0; m < N_MODELS; m++) printf("    %-18s %s\n", models[m].name, models[m].about);
    printf("  (fall 70%% / 74%%: the smallest context, in tokens, where the 3:1 cache is at most 30%% / 26%% of the\n"
           "   attention-only one; @c: the fraction at c tokens. lab_3to1 at %zu tokens: %.6f here, %.6f "
           "measured)\n", context, cache_model_fraction(&models[3], (double)context), measured);
    const cache_model *k = &models[0];
    printf("claim \"at 3:1 the cache bill has already fallen by three quarters\", at Kimi Linear's sizes (MLA): the\n"
           "  3:1 cache is %.2f of the attention-only cache at 4K tokens and %.2f at 32K; the fall reaches 70%% at\n"
           "  %.0f tokens and 74%% at %.0f: \"three quarters\" holds only at long context (the released 7-of-27\n"
           "  layout tops out at a %.1f%% fall)\n", cache_model_fraction(k, 4096), cache_model_fraction(k, 32768),
           cache_model_context_for_fall(k, 0.70), cache_model_context_for_fall(k, 0.74),
           100.0 * (double)models[1].n_kda / (double)(models[1].n_kda + models[1].n_attn));
}
