/*
 * lib/train/mqar.c — the synthetic tasks' batches: the multi-query
 * associative recall (MQAR) layouts — Zoology's multiquery_ar,
 * forgetting_mqar and a recency variant of it, and kdalab's dense layout —
 * written here, the palindrome and the stack in lib/train/tasks.c. Every
 * layout is in lib/kdalab_mqar.h.
 *
 * defines: kdalab_mqar_task_name, kdalab_mqar_parse_task, kdalab_mqar_zoology_split,
 *          kdalab_mqar_vocab_size, kdalab_mqar_make, kdalab_mqar_test_seed
 *
 * Every batch is a function of (config, seed, batch index, B): it draws from
 * its own gsl_rng_mt19937, seeded from a hash of (seed, batch index) — or,
 * from a fixed training set, each row from a generator of its own sequence —
 * so a training loop may make its batches in any order, or twice.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "internal.h"
#include "train_internal.h"

static const char *const task_names[] = {"dense",  "zoology",    "overwrite",
                                         "recent", "palindrome", "stack"};
#define N_TASKS (sizeof task_names / sizeof task_names[0])

/* The largest fixed training set (kdalab_mqar_config.train_set): its
 * permutation works on at most 2^40 places. */
#define MAX_SET ((size_t)1 << 40)

const char *kdalab_mqar_task_name(kdalab_mqar_task task)
{
    return (unsigned)task < N_TASKS ? task_names[task] : "unknown";
}

kdalab_status kdalab_mqar_parse_task(const char *name, kdalab_mqar_task *task)
{
    kdalab_clear_error();
    if (!name || !task)
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", !name ? "the task name" : "task");
    for (size_t i = 0; i < N_TASKS; i++)
        if (strcmp(name, task_names[i]) == 0) {
            *task = (kdalab_mqar_task)i;
            kdalab_clear_error();
            return KDALAB_OK;
        }
    if (strcmp(name, "plain") == 0 || strcmp(name, "mqar") == 0)
        return kdalab_fail(KDALAB_EINVAL, "unknown task '%s': kdalab's own recall layout is "
                           "'dense', Zoology's MQAR is 'zoology'", name);
    return kdalab_fail(KDALAB_EINVAL, "unknown task '%s': dense, zoology, overwrite, recent, "
                       "palindrome or stack", name);
}

kdalab_status kdalab_mqar_zoology_split(size_t W, kdalab_mqar_config *cfg)
{
    kdalab_clear_error();
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "the task config is NULL");
    if (W < 4)
        return kdalab_fail(KDALAB_ESIZE, "W = %zu: Zoology's split of W tokens has keys [1, W/2) "
                           "and values [W/2, W): W must be >= 4 for one of each", W);
    cfg->key_vocab = W / 2 - 1;
    cfg->value_vocab = W - W / 2;
    kdalab_clear_error();
    return KDALAB_OK;
}

/* The recall tasks' rules, after the common ones: P distinct keys, and room
 * for a query after the pairs. */
static kdalab_status recall_rules(const kdalab_mqar_config *cfg)
{
    const size_t P = cfg->kv_pairs, T = cfg->T;
    if (cfg->key_vocab < P)
        return kdalab_fail(KDALAB_ESIZE,
                           "key_vocab = %zu is too small for kv_pairs = %zu distinct keys",
                           cfg->key_vocab, P);
    if (T < 2 * P + 1)
        return kdalab_fail(KDALAB_ESIZE,
                           "T = %zu < 2 * kv_pairs + 1 = %zu: no room for a query after "
                           "the %zu pairs",
                           T, 2 * P + 1, P);
    return KDALAB_OK;
}

/* The dense layout's rules, after the recall ones: *n_queries the number of
 * queries. */
static kdalab_status dense_rules(const kdalab_mqar_config *cfg, size_t *n_queries)
{
    const size_t P = cfg->kv_pairs, room = cfg->T - 2 * P, most = P < room ? P : room;
    if (cfg->updates != 0 || cfg->recent != 0)
        return kdalab_fail(KDALAB_ESIZE, "updates = %zu, recent = %zu: the dense task has "
                           "neither; leave them 0", cfg->updates, cfg->recent);
    if (cfg->n_queries > most)
        return kdalab_fail(KDALAB_ESIZE,
                           "n_queries = %zu > min(kv_pairs, T - 2 * kv_pairs) = %zu: each "
                           "key is queried at most once, each position holds one query",
                           cfg->n_queries, most);
    *n_queries = cfg->n_queries ? cfg->n_queries : most;
    return KDALAB_OK;
}

/* The Zoology layouts' rules (lib/kdalab_mqar.h), after the recall ones:
 * *n_queries the number of queries. */
static kdalab_status zoology_rules(const kdalab_mqar_config *cfg, size_t *n_queries)
{
    const size_t P = cfg->kv_pairs, T = cfg->T;
    const char *name = kdalab_mqar_task_name(cfg->task);
    if (cfg->n_queries != 0)
        return kdalab_fail(KDALAB_ESIZE, "n_queries = %zu: the %s task queries every key it asks "
                           "about; leave it 0", cfg->n_queries, name);
    if (cfg->task != KDALAB_MQAR_OVERWRITE && cfg->updates != 0)
        return kdalab_fail(KDALAB_ESIZE, "updates = %zu: only the overwrite task binds keys "
                           "again", cfg->updates);
    if (cfg->task != KDALAB_MQAR_RECENT && cfg->recent != 0)
        return kdalab_fail(KDALAB_ESIZE, "recent = %zu: only the recent task has a window",
                           cfg->recent);
    if (cfg->task == KDALAB_MQAR_OVERWRITE && (cfg->updates < 1 || cfg->updates > P))
        return kdalab_fail(KDALAB_ESIZE, "updates = %zu: the overwrite task binds 1 .. "
                           "kv_pairs = %zu keys again", cfg->updates, P);
    if (cfg->task == KDALAB_MQAR_RECENT && (cfg->recent < 1 || cfg->recent > P))
        return kdalab_fail(KDALAB_ESIZE, "recent = %zu: the recent task queries the last 1 .. "
                           "kv_pairs = %zu pairs", cfg->recent, P);
    if (cfg->value_vocab < P || (cfg->task == KDALAB_MQAR_OVERWRITE && cfg->value_vocab < 2))
        return kdalab_fail(KDALAB_ESIZE, "value_vocab = %zu: the %s task draws %zu distinct "
                           "values%s", cfg->value_vocab, name, P,
                           cfg->task == KDALAB_MQAR_OVERWRITE ? " (and at least 2)" : "");
    if (T % 2 != 0)
        return kdalab_fail(KDALAB_ESIZE, "T = %zu: the %s task places its queries at even "
                           "offsets: T must be even", T, name);
    const size_t U = cfg->updates, nq = cfg->task == KDALAB_MQAR_RECENT ? cfg->recent : P;
    /* P <= key_vocab < 2^31 (checked first): 2 (P + U) + 2 nq cannot overflow */
    if (T < 2 * (P + U) + 2 * nq)
        return kdalab_fail(KDALAB_ESIZE, "T = %zu < %zu: the %s task needs 2 tokens per pair "
                           "(%zu), per update (%zu) and per query (%zu)", T,
                           2 * (P + U) + 2 * nq, name, P, U, nq);
    *n_queries = nq;
    return KDALAB_OK;
}

kdalab_status kdalab_mqar_vocab_size(const kdalab_mqar_config *cfg, size_t *vocab,
                                     size_t *n_queries)
{
    kdalab_clear_error();
    if (!cfg)
        return kdalab_fail(KDALAB_ENULL, "the task config is NULL");
    size_t P = cfg->kv_pairs, T = cfg->T;
    if (P == 0)
        return kdalab_fail(KDALAB_ESIZE, "kv_pairs = 0: every task needs at least one pair (or token, or push)");
    if (cfg->key_vocab == 0 || cfg->value_vocab == 0)
        return kdalab_fail(KDALAB_ESIZE, "key_vocab = %zu, value_vocab = %zu: both must be >= 1",
                           cfg->key_vocab, cfg->value_vocab);
    if (cfg->key_vocab > (size_t)INT32_MAX - 1 ||
        cfg->value_vocab > (size_t)INT32_MAX - 1 - cfg->key_vocab)
        return kdalab_fail(KDALAB_EOVERFLOW,
                           "key_vocab = %zu, value_vocab = %zu: the largest token must fit "
                           "an int32_t (1 + key_vocab + value_vocab <= %d)",
                           cfg->key_vocab, cfg->value_vocab, INT32_MAX);
    if (P > (SIZE_MAX - 1) / 2)
        return kdalab_fail(KDALAB_EOVERFLOW, "kv_pairs = %zu: 2 * kv_pairs + 1 overflows", P);
    if (T > UINT32_MAX)
        return kdalab_fail(KDALAB_ESIZE, "T = %zu: at most %lu (GSL draws positions as 32-bit "
                           "integers)", T, (unsigned long)UINT32_MAX);
    if ((unsigned)cfg->task >= N_TASKS)
        return kdalab_fail(KDALAB_EINVAL, "task = %d: not a kdalab_mqar_task", (int)cfg->task);
    if (cfg->train_set > MAX_SET)
        return kdalab_fail(KDALAB_ESIZE, "train_set = %zu: a fixed set holds at most 2^40 "
                           "sequences", cfg->train_set);
    size_t nq = 0;
    const int recall = cfg->task <= KDALAB_MQAR_RECENT;
    kdalab_status s = recall ? recall_rules(cfg) : kdalab__task_rules(cfg, &nq);
    if (s == KDALAB_OK && recall)
        s = cfg->task == KDALAB_MQAR_DENSE ? dense_rules(cfg, &nq) : zoology_rules(cfg, &nq);
    if (s != KDALAB_OK)
        return s;
    if (vocab)
        *vocab = 1 + cfg->key_vocab + cfg->value_vocab;
    if (n_queries)
        *n_queries = nq;
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
static void dense_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, size_t n_queries,
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

/* The scratch of one batch: idx [key_vocab + value_vocab + T] indices,
 * weight [T / 2] the query gaps' weights, value [P] each key's latest value. */
typedef struct {
    size_t *idx;
    double *weight;
    int32_t *value;
} scratch;

/* n distinct gaps of [0, space), drawn one after another with probability
 * proportional to (gap + 1)^(a - 1) among those not drawn yet (numpy's
 * choice(replace=False, p=...), which Zoology uses), into gap[n]. */
static void power_law_gaps(gsl_rng *rng, size_t space, size_t n, double *weight, size_t *gap)
{
    for (size_t i = 0; i < space; i++)
        weight[i] = pow((double)(i + 1), KDALAB_MQAR_POWER_A - 1);
    for (size_t j = 0; j < n; j++) {
        double total = 0;
        for (size_t i = 0; i < space; i++)
            total += weight[i];
        double u = gsl_rng_uniform(rng) * total;
        size_t pick = space; /* the last gap with weight left, should rounding run past it */
        for (size_t i = 0; i < space; i++) {
            if (weight[i] == 0)
                continue;
            pick = i;
            if (u < weight[i])
                break;
            u -= weight[i];
        }
        gap[j] = pick;
        weight[pick] = 0;
    }
}

/* One sequence of a Zoology layout (ZOOLOGY, OVERWRITE, RECENT): tokens,
 * targets [T]. */
static void zoology_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, size_t n_queries,
                             scratch *w, int32_t *tokens, int32_t *targets)
{
    const size_t T = cfg->T, P = cfg->kv_pairs, U = cfg->updates, Kv = cfg->key_vocab,
                 Vv = cfg->value_vocab, vocab = 1 + Kv + Vv, ctx = 2 * (P + U);
    const int32_t first_value = (int32_t)(1 + Kv);

    /* P distinct keys, then P distinct values */
    for (size_t i = 0; i < Kv; i++)
        w->idx[i] = i;
    partial_shuffle(rng, w->idx, Kv, P);
    for (size_t p = 0; p < P; p++)
        tokens[2 * p] = (int32_t)(1 + w->idx[p]);
    for (size_t i = 0; i < Vv; i++)
        w->idx[i] = i;
    partial_shuffle(rng, w->idx, Vv, P);
    for (size_t p = 0; p < P; p++)
        w->value[p] = tokens[2 * p + 1] = first_value + (int32_t)w->idx[p];
    /* OVERWRITE: U distinct keys bound again, each to another value */
    for (size_t p = 0; p < P; p++)
        w->idx[p] = p;
    partial_shuffle(rng, w->idx, P, U);
    for (size_t j = 0; j < U; j++) {
        const size_t p = w->idx[j];
        int32_t v = first_value + (int32_t)gsl_rng_uniform_int(rng, (unsigned long)(Vv - 1));
        if (v >= w->value[p])
            v++; /* skip the key's first value */
        w->value[p] = v;
        tokens[2 * (P + j)] = tokens[2 * p];
        tokens[2 * (P + j) + 1] = v;
    }
    for (size_t t = 0; t < T; t++)
        targets[t] = -1;
    /* the queries: every key (RECENT: the last n_queries pairs), in pair order,
     * key at ctx + 2 gap */
    const size_t space = (T - ctx) / 2, first = P - n_queries;
    power_law_gaps(rng, space, n_queries, w->weight, w->idx);
    for (size_t t = ctx; t < T; t++)
        tokens[t] = -1;
    for (size_t j = 0; j < n_queries; j++) {
        const size_t t = ctx + 2 * w->idx[j];
        tokens[t] = tokens[2 * (first + j)];
        targets[t] = w->value[first + j];
    }
    /* every other position after the pairs: a token drawn from the whole vocabulary */
    for (size_t t = ctx; t < T; t++)
        if (tokens[t] < 0)
            tokens[t] = (int32_t)gsl_rng_uniform_int(rng, (unsigned long)vocab);
}

/* One sequence of cfg's task into tokens, targets [T], drawn from rng. */
static void one_sequence(gsl_rng *rng, const kdalab_mqar_config *cfg, size_t n_queries,
                         scratch *w, int32_t *tokens, int32_t *targets)
{
    switch (cfg->task) {
    case KDALAB_MQAR_DENSE:
        dense_sequence(rng, cfg, n_queries, w->idx, w->idx + cfg->key_vocab, w->value, tokens,
                       targets);
        break;
    case KDALAB_MQAR_PALINDROME: kdalab__palindrome_sequence(rng, cfg, tokens, targets); break;
    case KDALAB_MQAR_STACK: kdalab__stack_sequence(rng, cfg, w->idx, tokens, targets); break;
    default: zoology_sequence(rng, cfg, n_queries, w, tokens, targets); break;
    }
}

/* The place of position x (< n <= MAX_SET) of a pass over a fixed set of n:
 * a permutation of [0, n) keyed by key. A four-round Feistel network on the
 * smallest power of 4 that holds n, walked until it lands inside [0, n)
 * (cycle walking: the walk returns there, as the network permutes the
 * larger range; fewer than 4 steps on average). */
static uint64_t set_place(uint64_t x, uint64_t n, uint64_t key)
{
    unsigned half = 1;
    while (((uint64_t)1 << (2 * half)) < n)
        half++;
    const uint64_t mask = ((uint64_t)1 << half) - 1;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (uint64_t round = 0; round < 4; round++) {
            const uint64_t f = mix64(r ^ key ^ (round * 0x9e3779b97f4a7c15ULL)) & mask;
            const uint64_t next = l ^ f;
            l = r;
            r = next;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

kdalab_status kdalab_mqar_make(const kdalab_mqar_config *cfg, unsigned long seed,
                               size_t batch_index, size_t B, int32_t *tokens,
                               int32_t *targets)
{
    // tokens, targets are (B, T)
    kdalab_clear_error();
    size_t n_queries, n, bytes, first_row = 0;
    kdalab_status s = kdalab_mqar_vocab_size(cfg, NULL, &n_queries);
    if (s != KDALAB_OK)
        return s;
    size_t T = cfg->T, P = cfg->kv_pairs;
    if (!kdalab_mul_size(B, T, &n) || !kdalab_mul_size(n, sizeof(int32_t), &bytes))
        return kdalab_fail(KDALAB_EOVERFLOW, "B = %zu, T = %zu: B * T tokens overflow", B, T);
    if (cfg->train_set && (!kdalab_mul_size(batch_index, B, &first_row) ||
                           first_row > SIZE_MAX - B))
        return kdalab_fail(KDALAB_EOVERFLOW, "batch_index = %zu, B = %zu: the rows' places "
                           "in a pass over the fixed set overflow", batch_index, B);
    if (n && (!tokens || !targets))
        return kdalab_fail(KDALAB_ENULL, "%s is NULL", !tokens ? "tokens" : "targets");
    if (n == 0) {
        kdalab_clear_error();
        return KDALAB_OK;
    }
    /* dense: keys [key_vocab] then slots [T - 2P]; Zoology: one of key_vocab,
     * value_vocab or T at a time; stack: its own (bounded by
     * kdalab_mqar_vocab_size: no overflow) */
    const size_t work = kdalab__task_work(cfg), n_idx = cfg->key_vocab + cfg->value_vocab + T;
    scratch w = {malloc((work > n_idx ? work : n_idx) * sizeof *w.idx),
                 malloc((T / 2 + 1) * sizeof *w.weight), malloc(P * sizeof *w.value)};
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!w.idx || !w.weight || !w.value || !rng) {
        free(w.idx);
        free(w.weight);
        free(w.value);
        if (rng)
            gsl_rng_free(rng);
        return kdalab_fail(KDALAB_ENOMEM, "no memory for a batch of the %s task",
                           kdalab_mqar_task_name(cfg->task));
    }
    const uint64_t N = cfg->train_set;
    if (!N)
        gsl_rng_set(rng, batch_seed(seed, batch_index));
    for (size_t b = 0; b < B; b++) {
        if (N) { /* row b is the sequence at place (first_row + b) mod N of its pass */
            const uint64_t p = (uint64_t)(first_row + b), pass = p / N;
            const uint64_t key = mix64(mix64((uint64_t)seed ^ 0x5e75e75e75e75e75ULL) + pass);
            const uint64_t which = set_place(p % N, N, key);
            gsl_rng_set(rng, batch_seed(seed ^ 0xf12ed5e7f12ed5e7ULL, (size_t)which));
        }
        one_sequence(rng, cfg, n_queries, &w, tokens + b * T, targets + b * T);
    }
    free(w.idx);
    free(w.weight);
    free(w.value);
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
