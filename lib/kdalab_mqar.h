/*
 * kdalab_mqar.h — the multi-query associative recall task (lib/train/mqar.c).
 * Sequences and targets of Zoology's MQAR, each batch a function of (seed,
 * batch index); the test stream of a training seed.
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
 * One MQAR task, in the manner of the Zoology paper (Arora et al. 2023,
 * zoology/data/associative_recall.py). The vocabulary is
 *   0                              the filler token
 *   [1, 1 + key_vocab)             keys
 *   [1 + key_vocab, 1 + key_vocab + value_vocab)   values
 * so 1 + key_vocab + value_vocab tokens in all (kdalab_mqar_vocab_size).
 * A sequence of T tokens is
 *   positions 0 .. 2P-1   P pairs  key_0 value_0 key_1 value_1 ...  (distinct
 *                         keys; each value drawn uniformly and independently,
 *                         so two keys may share a value)
 *   positions 2P .. T-1   n_queries of the P keys, each at most once, at
 *                         distinct positions drawn uniformly; filler elsewhere
 * and the target at a query position is the value paired with its key; every
 * other target is -1 (not counted by the loss).
 * Differences from Zoology: Zoology draws query gaps from a power law (most
 * queries early), draws values without replacement, fills with random tokens
 * rather than 0, and puts the answer as the label of the position after the
 * query (the same thing after its one-token shift).
 */
typedef struct {
    size_t T;           /* tokens per sequence; >= 2 * kv_pairs + 1                 */
    size_t kv_pairs;    /* P >= 1                                                    */
    size_t key_vocab;   /* number of key tokens; >= P                                */
    size_t value_vocab; /* number of value tokens; >= 1                              */
    size_t n_queries;   /* 0: min(P, T - 2P), Zoology's every key once when it fits; */
                        /* else 1 .. min(P, T - 2P)                                  */
} kdalab_mqar_config;

/*
 * kdalab_mqar_vocab_size — check cfg and give the vocabulary size
 * 1 + key_vocab + value_vocab in *vocab (and the number of queries per
 * sequence in *n_queries; either pointer may be NULL). Errors: KDALAB_ENULL
 * (cfg), KDALAB_ESIZE (P = 0, a vocabulary of 0, key_vocab < P, T < 2P + 1,
 * T > 2^32 - 1, n_queries > min(P, T - 2P)), KDALAB_EOVERFLOW (2P + 1, or
 * the vocabulary beyond INT32_MAX, the largest token an int32_t holds).
 */
kdalab_status kdalab_mqar_vocab_size(const kdalab_mqar_config *cfg, size_t *vocab,
                                     size_t *n_queries);

/*
 * kdalab_mqar_make — batch number batch_index of the stream `seed`: B
 * sequences, a function of (cfg, seed, batch_index, B) only.
 *   tokens   [B, T]  the inputs
 *   targets  [B, T]  the answer at query positions, -1 elsewhere
 * Each batch draws from its own GSL gsl_rng_mt19937, seeded with a hash of
 * (seed, batch_index) (SplitMix64's finaliser, folded to the 32 bits
 * mt19937 takes): batches are independent of each other and of the order
 * they are made in; the rows are drawn in order, so the first B' rows of a
 * batch of B > B' are the batch of B'. Two different (seed, batch_index)
 * pairs share a generator with probability 2^-32, so a training run should
 * draw its test set from its own seed (e.g. seed + 1) rather than rely on
 * disjoint indices.
 * B = 0 writes nothing. Errors: those of kdalab_mqar_vocab_size,
 * KDALAB_EOVERFLOW (B * T elements), KDALAB_ENULL (tokens or targets),
 * KDALAB_ENOMEM.
 */
kdalab_status kdalab_mqar_make(const kdalab_mqar_config *cfg, unsigned long seed,
                               size_t batch_index, size_t B, int32_t *tokens,
                               int32_t *targets);

/* The test stream of a training seed: a hash of it (SplitMix64's
 * finaliser), so no small training seed's stream is another run's test set. */
unsigned long kdalab_mqar_test_seed(unsigned long seed);

KDALAB_END_DECLS

#endif /* KDALAB_MQAR_H */
