/*
 * lib/train/mqar.c — the multi-query associative recall (MQAR) task: batches
 * of key-value pairs followed by queries of earlier keys, as in the Zoology
 * paper (the layout of a sequence is in kdalab_train.h).
 *
 * defines: kdalab_mqar_vocab_size, kdalab_mqar_make, kdalab_mqar_test_seed
 *
 * Every batch is a function of (config, seed, batch index, B): it draws from
 * its own gsl_rng_mt19937, seeded from a hash of (seed, batch index), so a
 * training loop may make its batches in any order, or twice.
 */
#include <stdint.h>
#include <stdlib.h>

#include <gsl/gsl_rng.h>

#include "internal.h"

kdalab_status kdalab_mqar_vocab_size(const kdalab_mqar_config *cfg, size_t *vocab,
                                     size_t *n_queries)
{
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "the MQAR config is NULL");
    size_t P = cfg->kv_pairs, T = cfg->T;
    if (P == 0)
        return kdalab_fail(KDALAB_ESIZE, "kv_pairs = 0: MQAR needs at least one pair");
    if (cfg->key_vocab == 0 || cfg->value_vocab == 0)
        return kdalab_fail(KDALAB_ESIZE, "key_vocab = %zu, value_vocab = %zu: both must be >= 1",
                           cfg->key_vocab, cfg->value_vocab);
    if (cfg->key_vocab > (size_t)INT32_MAX - 1 ||
        cfg->value_vocab > (size_t)INT32_MAX - 1 - cfg->key_vocab)
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "key_vocab = %zu, value_vocab = %zu: the largest token must fit "
                           "an int32_t (1 + key_vocab + value_vocab <= %d)",
                           cfg->key_vocab, cfg->value_vocab, INT32_MAX);
    if (cfg->key_vocab < P)
        return kdalab_fail(KDALAB_ESIZE,
                           "key_vocab = %zu is too small for kv_pairs = %zu distinct keys",
                           cfg->key_vocab, P);
    if (P > (SIZE_MAX - 1) / 2)
        return kdalab_fail(KDALAB_EOVERFLOW, "kv_pairs = %zu: 2 * kv_pairs + 1 overflows", P);
    if (T > UINT32_MAX)
        return kdalab_fail(KDALAB_ESIZE, "T = %zu: at most %lu (GSL draws positions as 32-bit "
                           "integers)", T, (unsigned long)UINT32_MAX);
    if (T < 2 * P + 1)
        return kdalab_fail(KDALAB_ESIZE,
                           "T = %zu < 2 * kv_pairs + 1 = %zu: no room for a query after "
                           "the %zu pairs",
                           T, 2 * P + 1, P);
    size_t room = T - 2 * P, most = P < room ? P : room;
    if (cfg->n_queries > most)
        return kdalab_fail(KDALAB_ESIZE,
                           "n_queries = %zu > min(kv_pairs, T - 2 * kv_pairs) = %zu: each "
                           "key is queried at most once, each position holds one query",
                           cfg->n_queries, most);
    if (vocab)
        *vocab = 1 + cfg->key_vocab + cfg->value_vocab;
    if (n_queries)
        *n_queries = cfg->n_queries ? cfg->n_queries : most;
    return KDALAB_OK;
}

/* SplitMix64's finaliser: a bijection of 64-bit words that mixes every bit. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The generator's seed for batch batch_index of stream seed: 32 bits, since
 * GSL's mt19937 uses only the low 32 bits of its seed (and replaces 0). */
static unsigned long batch_seed(unsigned long seed, size_t batch_index)
{
    uint64_t h = mix64(mix64((uint64_t)seed) ^ ((uint64_t)batch_index + 0x9e3779b97f4a7c15ULL));
    return (unsigned long)((h ^ (h >> 32)) & 0xffffffffUL);
}

/* Move a uniformly chosen one of a[i .. n) to a[i], for i = 0 .. k-1: the
 * first k entries become a uniform random k-subset in random order (a partial
 * Fisher-Yates shuffle). */
static void partial_shuffle(gsl_rng *rng, size_t *a, size_t n, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)gsl_rng_uniform_int(rng, (unsigned long)(n - i));
        size_t tmp = a[i];
        a[i] = a[j];
        a[j] = tmp;
    }
}

/* One sequence: tokens, targets [T]. keys [key_vocab] and slots [T - 2P]
 * are scratch, refilled here; pair_value [P]. */
static void mqar_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, size_t n_queries,
                          size_t *keys, size_t *slots, int32_t *pair_value, int32_t *tokens,
                          int32_t *targets)
{
    size_t T = cfg->T, P = cfg->kv_pairs, Kv = cfg->key_vocab, room = T - 2 * P;
    int32_t first_value = (int32_t)(1 + Kv);

    /* the P pairs: distinct keys (the first P of a shuffle of all Kv),
     * values drawn independently */
    for (size_t i = 0; i < Kv; i++)
        keys[i] = i;
    partial_shuffle(rng, keys, Kv, P);
    for (size_t p = 0; p < P; p++) {
        pair_value[p] =
            first_value + (int32_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->value_vocab);
        tokens[2 * p] = (int32_t)(1 + keys[p]);
        tokens[2 * p + 1] = pair_value[p];
        targets[2 * p] = targets[2 * p + 1] = -1;
    }
    /* after them, filler */
    for (size_t t = 2 * P; t < T; t++) {
        tokens[t] = 0;
        targets[t] = -1;
    }
    /* n_queries distinct pairs, at n_queries distinct positions in [2P, T):
     * reuse keys[0 .. P) as the pair indices, shuffled */
    for (size_t p = 0; p < P; p++)
        keys[p] = p;
    partial_shuffle(rng, keys, P, n_queries);
    for (size_t s = 0; s < room; s++)
        slots[s] = s;
    partial_shuffle(rng, slots, room, n_queries);
    for (size_t j = 0; j < n_queries; j++) {
        size_t t = 2 * P + slots[j], p = keys[j];
        tokens[t] = tokens[2 * p];
        targets[t] = pair_value[p];
    }
}

kdalab_status kdalab_mqar_make(const kdalab_mqar_config *cfg, unsigned long seed,
                               size_t batch_index, size_t B, int32_t *tokens,
                               int32_t *targets)
{
    // tokens, targets are (B, T)
    size_t n_queries, n, bytes;
    kdalab_status s = kdalab_mqar_vocab_size(cfg, NULL, &n_queries);
    if (s != KDALAB_OK)
        return s;
    size_t T = cfg->T, P = cfg->kv_pairs;
    if (!kdalab_mul_size(B, T, &n) || !kdalab_mul_size(n, sizeof(int32_t), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "B = %zu, T = %zu: B * T tokens overflow", B, T);
    if (n && (!tokens || !targets))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", !tokens ? "tokens" : "targets");
    if (n == 0) {
        kdalab_clear_error();
        return KDALAB_OK;
    }
    size_t *keys = malloc(cfg->key_vocab * sizeof *keys);
    size_t *slots = malloc((T - 2 * P) * sizeof *slots);
    int32_t *pair_value = malloc(P * sizeof *pair_value);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!keys || !slots || !pair_value || !rng) {
        free(keys);
        free(slots);
        free(pair_value);
        if (rng)
            gsl_rng_free(rng);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for an MQAR batch");
    }
    gsl_rng_set(rng, batch_seed(seed, batch_index));
    for (size_t b = 0; b < B; b++)
        mqar_sequence(rng, cfg, n_queries, keys, slots, pair_value, tokens + b * T,
                      targets + b * T);
    free(keys);
    free(slots);
    free(pair_value);
    gsl_rng_free(rng);
    kdalab_clear_error();
    return KDALAB_OK;
}

unsigned long kdalab_mqar_test_seed(unsigned long seed)
{
    /* SplitMix64's finaliser of seed + a constant: a far-away stream that no
     * small training seed reaches (seed ^ constant did: seed 2119686778 trained
     * on seed 0's test set) */
    uint64_t z = (uint64_t)seed + 0x7e57da7a7e57da7aULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (unsigned long)(z ^ (z >> 31));
}
