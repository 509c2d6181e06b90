/*
 * lib/train/tasks.c — the two synthetic tasks of the Kimi Linear report
 * beside MQAR: the palindrome (a string, then the same string backwards) and
 * the stack (pushes and pops on S stacks, each pop's value predicted). Their
 * layouts are in lib/kdalab_mqar.h; kdalab_mqar_vocab_size and
 * kdalab_mqar_make (lib/train/mqar.c) call the rules and the sequence makers
 * here.
 *
 * defines: kdalab__task_rules, kdalab__task_work, kdalab__palindrome_sequence,
 *          kdalab__stack_sequence
 */
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "internal.h"
#include "train_internal.h"

kdalab_status kdalab__task_rules(const kdalab_mqar_config *cfg, size_t *n_scored)
{
    const size_t P = cfg->kv_pairs, T = cfg->T;
    const char *name = kdalab_mqar_task_name(cfg->task);
    if (cfg->n_queries != 0 || cfg->updates != 0 || cfg->recent != 0)
        return kdalab_fail(KDALAB_ESIZE, "n_queries = %zu, updates = %zu, recent = %zu: the %s "
                           "task has none of them; leave them 0", cfg->n_queries, cfg->updates,
                           cfg->recent, name);
    if (cfg->task == KDALAB_MQAR_PALINDROME) {
        /* P <= (SIZE_MAX - 1) / 2 was checked first: 2P does not overflow */
        if (T != 2 * P)
            return kdalab_fail(KDALAB_ESIZE, "T = %zu: the palindrome task is a string of "
                               "kv_pairs = %zu tokens and its reverse: T must be %zu", T, P,
                               2 * P);
        *n_scored = P;
        return KDALAB_OK;
    }
    /* KDALAB_MQAR_STACK */
    if (cfg->key_vocab % 2 != 0)
        return kdalab_fail(KDALAB_ESIZE, "key_vocab = %zu: the stack task has a push and a pop "
                           "token per stack, so key_vocab = 2 * stacks must be even",
                           cfg->key_vocab);
    if (T % 2 != 0)
        return kdalab_fail(KDALAB_ESIZE, "T = %zu: the stack task's operations are two tokens "
                           "each: T must be even", T);
    const size_t ops = T / 2, pops = ops > P ? ops - P : 0;
    if (pops < 1 || pops > P)
        return kdalab_fail(KDALAB_ESIZE, "T = %zu, kv_pairs = %zu: the stack task has T / 2 - "
                           "kv_pairs = %zu pops, which must be 1 .. kv_pairs (a pop needs an "
                           "earlier push): T in %zu .. %zu", T, P, pops, 2 * P + 2, 4 * P);
    *n_scored = pops;
    return KDALAB_OK;
}

size_t kdalab__task_work(const kdalab_mqar_config *cfg)
{
    /* STACK: top, place in the live list and the live list per stack, then
     * the value and the item below per push */
    return cfg->task == KDALAB_MQAR_STACK ? 3 * (cfg->key_vocab / 2) + 2 * cfg->kv_pairs : 0;
}

void kdalab__palindrome_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, int32_t *tokens,
                                 int32_t *targets)
{
    const size_t N = cfg->kv_pairs, content = cfg->key_vocab + cfg->value_vocab;
    for (size_t t = 0; t < N; t++) {
        tokens[t] = 1 + (int32_t)gsl_rng_uniform_int(rng, (unsigned long)content);
        targets[t] = -1;
    }
    tokens[N] = 0; /* the separator: now the string backwards */
    for (size_t i = 0; i < N; i++) {
        targets[N + i] = tokens[N - 1 - i];
        if (i + 1 < N)
            tokens[N + 1 + i] = tokens[N - 1 - i];
    }
}

void kdalab__stack_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, size_t *work,
                            int32_t *tokens, int32_t *targets)
{
    const size_t S = cfg->key_vocab / 2, P = cfg->kv_pairs, ops = cfg->T / 2;
    const int32_t first_value = (int32_t)(1 + cfg->key_vocab);
    /* top[s]: 1 + the push on top of stack s, 0 when empty; live[0 .. n_live)
     * the stacks that hold a value, place[s] stack s's index there;
     * value[j], below[j]: push j's value and 1 + the push under it */
    size_t *top = work, *place = work + S, *live = work + 2 * S, *value = work + 3 * S,
           *below = value + P;
    for (size_t s = 0; s < S; s++)
        top[s] = 0;
    size_t n_live = 0, pushes = 0, pops_left = ops - P;
    for (size_t o = 0; o < ops; o++) {
        const size_t left = ops - o;
        const int pop = n_live > 0 && pops_left > 0 &&
                        gsl_rng_uniform(rng) * (double)left < (double)pops_left;
        int32_t *x = tokens + 2 * o, *y = targets + 2 * o;
        y[0] = y[1] = -1;
        if (pop) {
            const size_t s = live[gsl_rng_uniform_int(rng, (unsigned long)n_live)];
            const size_t j = top[s] - 1;
            x[0] = (int32_t)(1 + S + s);
            x[1] = y[0] = first_value + (int32_t)value[j];
            top[s] = below[j];
            if (!top[s]) { /* empty now: out of the live list */
                live[place[s]] = live[--n_live];
                place[live[place[s]]] = place[s];
            }
            pops_left--;
        } else {
            const size_t s = (size_t)gsl_rng_uniform_int(rng, (unsigned long)S);
            const size_t j = pushes++;
            value[j] = (size_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->value_vocab);
            x[0] = (int32_t)(1 + s);
            x[1] = first_value + (int32_t)value[j];
            if (!top[s]) {
                place[s] = n_live;
                live[n_live++] = s;
            }
            below[j] = top[s];
            top[s] = j + 1;
        }
    }
}
