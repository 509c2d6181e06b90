/*
 * kdalab_mqar.h — the synthetic tasks the trained models learn
 * (lib/train/mqar.c, lib/train/tasks.c): Zoology's multi-query associative
 * recall (MQAR) and its forgetting variants, kdalab's dense recall layout,
 * the palindrome and the stack; each batch a function of (seed, batch
 * index); the test stream of a training seed.
 *
 * Part of kdalab's public API; include "kdalab.h" for all of it. The
 * conventions of every training header (statuses, outputs, backward) are in
 * lib/kdalab_train.h.
 */
#ifndef KDALAB_MQAR_H
#define KDALAB_MQAR_H

#include <stddef.h>
#include <stdint.h>

#include "kdalab_status.h"

KDALAB_BEGIN_DECLS

/*
 * The layouts a sequence can have (kdalab_mqar_config.task). The recall
 * tasks (DENSE, ZOOLOGY, OVERWRITE, RECENT) draw P distinct keys; the
 * vocabulary is
 *   0                              the filler token (DENSE), the separator
 *                                  (PALINDROME); elsewhere a token like any
 *   [1, 1 + key_vocab)             keys
 *   [1 + key_vocab, 1 + key_vocab + value_vocab)   values
 * so 1 + key_vocab + value_vocab tokens in all (kdalab_mqar_vocab_size).
 * The target at a scored position is the token to predict there (for a
 * query, the value its key is bound to at that point: the answer is
 * predicted at the query token itself); every other target is -1 (not
 * counted by the loss or the accuracy). Every sequence of a task has the
 * same number of scored positions (n_queries of kdalab_mqar_vocab_size).
 *
 * KDALAB_MQAR_ZOOLOGY — Zoology's multiquery_ar (Arora et al. 2023,
 * zoology/data/associative_recall.py; T even, T >= 4P, value_vocab >= P):
 * "MQAR" in kdalab's pages means this layout.
 *   positions 0 .. 2P-1   P pairs, values distinct (drawn without replacement)
 *   positions 2P .. T-1   every key queried once, key j at position
 *                         2P + 2 gap_j: the gaps are P distinct numbers of
 *                         [0, (T - 2P) / 2) drawn one after another with
 *                         probability proportional to (gap + 1)^(a - 1),
 *                         a = KDALAB_MQAR_POWER_A (most queries soon after
 *                         the pairs, as repeated bigrams are in text);
 *                         every other position a token drawn uniformly from
 *                         the whole vocabulary (distractors, keys among them)
 *   With kdalab_mqar_zoology_split's vocabulary (keys [1, W/2), values
 *   [W/2, W) for W tokens) the token ids are Zoology's own. Zoology's
 *   generator also asserts W > T; this one does not.
 *
 * KDALAB_MQAR_DENSE — kdalab's own layout (T >= 2P + 1), which kdalab's
 * experiments 14-17 and 20-21 train on; it differs from ZOOLOGY in every
 * point REFERENCE.md lists:
 *   positions 0 .. 2P-1   P pairs  key_0 value_0 key_1 value_1 ...  (each
 *                         value drawn uniformly and independently, so two
 *                         keys may share a value)
 *   positions 2P .. T-1   n_queries of the P keys, each at most once, at
 *                         distinct positions drawn uniformly; filler 0
 *                         elsewhere (so the filler marks where queries may be)
 *   With T < 4P not every key can be queried: n_queries = min(P, T - 2P).
 *   (KDALAB_MQAR_PLAIN is its older name.)
 *
 * KDALAB_MQAR_OVERWRITE — Zoology's forgetting_mqar: the ZOOLOGY layout with
 * `updates` (U, 1 <= U <= P) of the P keys bound again after the P pairs:
 *   positions 2P .. 2(P+U)-1   U pairs  key value', the keys distinct, chosen
 *                         uniformly among the P, each value' drawn uniformly
 *                         from the values other than that key's first one
 *   then every key queried once (gaps as ZOOLOGY, over (T - 2(P+U)) / 2
 *   slots), its target the key's latest value. T even, T >= 2(P + U) + 2P,
 *   value_vocab >= P (and >= 2). A decay that forgets the first binding, or
 *   a delta rule that overwrites it, is what the task rewards.
 *
 * KDALAB_MQAR_RECENT — more pairs than a small state holds, and only the
 * most recent matter: the ZOOLOGY layout whose queries ask only the last
 * `recent` (W, 1 <= W <= P) pairs, each once (gaps as ZOOLOGY over
 * (T - 2P) / 2 slots). T even, T >= 2P + 2W, value_vocab >= P. The regime a
 * decay should win: forgetting the old pairs frees the state for the new.
 *
 * KDALAB_MQAR_PALINDROME — a string, then the same string backwards (the
 * Kimi Linear report's palindrome task); kv_pairs = N, T = 2N:
 *   positions 0 .. N-1    x_1 .. x_N, each drawn uniformly from the tokens
 *                         [1, vocab) (the key and value tokens alike)
 *   position  N           the separator 0
 *   positions N+1 .. 2N-1 x_N .. x_2 (the answer so far, as a decoder reads it)
 *   scored: positions N .. 2N-1, whose targets are x_N .. x_1 (N per sequence)
 *
 * KDALAB_MQAR_STACK — pushes and pops on S = key_vocab / 2 stacks (the Kimi
 * Linear report's stack task); key_vocab even, T even; P = kv_pairs pushes
 * and Q = T/2 - P pops (1 <= Q <= P), each operation two tokens:
 *   push on stack i       key token i (1 + i), then the value pushed (a value
 *                         token drawn uniformly)
 *   pop from stack i      key token S + i (1 + S + i), then the value it pops
 *   scored: each pop's first token, whose target is the value on top of its
 *   stack (Q per sequence). The order of the T/2 operations is drawn one at a
 *   time: a pop with probability (pops left) / (operations left) while a stack
 *   holds a value, from a stack drawn uniformly among those that do; a push
 *   on a stack drawn uniformly among all S.
 *
 * Batches (every task): with train_set = 0 each batch is fresh (a function
 * of seed and batch index). With train_set = N, the stream `seed` is a fixed
 * set of N sequences, as Zoology trains on a fixed set (100,000 sequences):
 * row r of batch i is the sequence drawn at position i * B + r of the
 * stream, which visits the N sequences in a new random order in each pass
 * (position p: pass p / N, place p mod N of that pass's permutation). The
 * trainer's test stream is another seed's, so with a fixed set its test set
 * is N sequences of that stream too: at most N distinct ones.
 */
typedef enum {
    KDALAB_MQAR_DENSE = 0,
    KDALAB_MQAR_ZOOLOGY,
    KDALAB_MQAR_OVERWRITE,
    KDALAB_MQAR_RECENT,
    KDALAB_MQAR_PALINDROME,
    KDALAB_MQAR_STACK
} kdalab_mqar_task;

/* The older name of KDALAB_MQAR_DENSE. */
#define KDALAB_MQAR_PLAIN KDALAB_MQAR_DENSE

/* The power law of the query gaps in the Zoology layouts (Zoology's default
 * power_a): weight (gap + 1)^(a - 1). */
#define KDALAB_MQAR_POWER_A 0.01

/* "dense", "zoology", "overwrite", "recent", "palindrome", "stack"
 * ("unknown" otherwise). */
const char *kdalab_mqar_task_name(kdalab_mqar_task task);

/* The task named name (kdalab_mqar_task_name's names) into *task.
 * Errors: KDALAB_ENULL, KDALAB_EINVAL (an unknown name; "plain" and "mqar"
 * are refused naming "dense" and "zoology", the layouts they could mean). */
kdalab_status kdalab_mqar_parse_task(const char *name, kdalab_mqar_task *task);

/* One task. Zero-initialise, then set what you need: a {0}-filled task
 * field is KDALAB_MQAR_DENSE. */
typedef struct {
    size_t T;           /* tokens per sequence (see the task for its least)           */
    size_t kv_pairs;    /* P >= 1 (PALINDROME: the string's length; STACK: pushes)     */
    size_t key_vocab;   /* number of key tokens; >= P in the recall tasks             */
    size_t value_vocab; /* number of value tokens; >= 1 (>= P in the Zoology layouts) */
    size_t n_queries;   /* DENSE: 0 for min(P, T - 2P), else 1 .. min(P, T - 2P); the */
                        /* other tasks score every position they ask about: 0         */
    kdalab_mqar_task task; /* the layout (above); 0 is DENSE                           */
    size_t updates;     /* OVERWRITE: U keys bound again, 1 .. P; else 0               */
    size_t recent;      /* RECENT: W, the last pairs queried, 1 .. P; else 0           */
    size_t train_set;   /* 0: every batch fresh; N: a fixed set of N sequences (above) */
} kdalab_mqar_config;

/*
 * kdalab_mqar_zoology_split — Zoology's split of a vocabulary of W tokens:
 * cfg->key_vocab = W/2 - 1 and cfg->value_vocab = W - W/2 (integer halves),
 * so keys are [1, W/2) and values [W/2, W), as multiquery_ar draws them
 * (W = 129: 63 keys, 65 values). Only those two fields are written.
 * Errors: KDALAB_ENULL (cfg), KDALAB_ESIZE (W < 4: no key, or no value).
 */
kdalab_status kdalab_mqar_zoology_split(size_t W, kdalab_mqar_config *cfg);

/*
 * kdalab_mqar_vocab_size — check cfg and give the vocabulary size
 * 1 + key_vocab + value_vocab in *vocab (and the number of scored positions
 * per sequence in *n_queries; either pointer may be NULL). Errors:
 * KDALAB_ENULL (cfg), KDALAB_ESIZE (P = 0, a vocabulary of 0,
 * T > 2^32 - 1; in the recall tasks key_vocab < P or T < 2P + 1;
 * n_queries > min(P, T - 2P) for DENSE; for the Zoology layouts an odd T, a
 * T below the task's least, value_vocab < P, n_queries != 0, updates or
 * recent outside 1 .. P for their task or not 0 for another; for PALINDROME
 * T != 2P; for STACK an odd key_vocab or T, pops outside 1 .. P),
 * KDALAB_EINVAL (an unknown task), KDALAB_EOVERFLOW (2P + 1, or the
 * vocabulary beyond INT32_MAX, the largest token an int32_t holds).
 */
kdalab_status kdalab_mqar_vocab_size(const kdalab_mqar_config *cfg, size_t *vocab,
                                     size_t *n_queries);

/*
 * kdalab_mqar_make — batch number batch_index of the stream `seed`: B
 * sequences, a function of (cfg, seed, batch_index, B) only.
 *   tokens   [B, T]  the inputs
 *   targets  [B, T]  the answer at scored positions, -1 elsewhere
 * Fresh batches (train_set = 0) draw from their own GSL gsl_rng_mt19937,
 * seeded with a hash of (seed, batch_index) (SplitMix64's finaliser, folded
 * to the 32 bits mt19937 takes): batches are independent of each other and
 * of the order they are made in; the rows are drawn in order, so the first
 * B' rows of a batch of B > B' are the batch of B'. With a fixed set
 * (train_set = N) each sequence of the set draws from a generator of its
 * own (seeded from seed and its number), so the set is the same whatever B.
 * Two different (seed, batch_index) pairs share a generator with
 * probability 2^-32, so a training run should draw its test set from its
 * own seed (e.g. seed + 1) rather than rely on disjoint indices.
 * B = 0 writes nothing. Errors: those of kdalab_mqar_vocab_size,
 * KDALAB_EOVERFLOW (B * T elements; with a fixed set, batch_index * B + B),
 * KDALAB_ENULL (tokens or targets), KDALAB_ENOMEM.
 */
kdalab_status kdalab_mqar_make(const kdalab_mqar_config *cfg, unsigned long seed,
                               size_t batch_index, size_t B, int32_t *tokens,
                               int32_t *targets);

/* The test stream of a training seed: a hash of it (SplitMix64's
 * finaliser), so no small training seed's stream is another run's test set. */
unsigned long kdalab_mqar_test_seed(unsigned long seed);

KDALAB_END_DECLS

#endif /* KDALAB_MQAR_H */
