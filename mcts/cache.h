/* cache.h - a bounded cache of network results keyed by position.
 *
 * Owns: storing and finding, for a Zobrist key, the network's move logits
 * (compressed, one per legal move, in move-generation order), its W/D/L
 * probabilities and its moves-left estimate (NAN: none); the memory bound; thread safety.
 * Does not own: which network produced them (clear it when the net changes),
 * the meaning of the moves (the tree checks the move count and a checksum of
 * the move list, so a hit never belongs to a position with another list).
 *
 * Layout: the cache is split into shards (by key), each with its own mutex,
 * a 2-way set-associative index of (key, position) slots and a ring of variable-size entries that
 * new entries overwrite oldest-first. An entry is returned only when its slot
 * key, its stored key, its checksum and its move count all equal the query
 * and it has not been overwritten, so no query ever reads another position's
 * data or past its own n values. Memory is fixed at creation.
 *
 * Compressed logits: q_i = round((max_j logit_j - logit_i) * MCTS_QLOGIT_SCALE),
 * clipped to 0..65535 (0 = the best move; 1/1024 nat steps, 64 nats range).
 * The tree quantizes every network result this way whether or not a cache is
 * used, so a cache hit expands a node exactly like a fresh evaluation.
 */
#ifndef KOMA_MCTS_CACHE_H
#define KOMA_MCTS_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#define MCTS_QLOGIT_SCALE 1024.0f

typedef struct mcts_cache mcts_cache_t;

typedef struct {
    uint64_t lookups; /* mcts_cache_get calls */
    uint64_t hits;    /* of those, found */
    uint64_t inserts; /* mcts_cache_put calls that stored an entry */
} mcts_cache_stats_t;

/* A cache using about bytes of memory (at least 64 KiB are used). Returns
 * NULL when out of memory. */
mcts_cache_t *mcts_cache_new(int64_t bytes);
/* Explicit geometry (tests force collisions with one slot): shards >= 1,
 * slots per shard a power of two >= 1, ring bytes per shard >= 4096 (one
 * entry of the largest move list always fits). */
mcts_cache_t *mcts_cache_new_geometry(int32_t shards, int32_t slots, int64_t ring_bytes);
void mcts_cache_free(mcts_cache_t *c); /* NULL ok */
/* Forgets every entry (call when the network changes). */
void mcts_cache_clear(mcts_cache_t *c);

/* Looks up key with move-list checksum check and n moves; on a hit copies
 * the n compressed logits into q, the probabilities into wdl and the
 * moves-left estimate into *moves_left (NULL ok) and returns true. n must be
 * 1..MCTS_CACHE_MOVES_MAX. Thread-safe. */
bool mcts_cache_get(mcts_cache_t *c, uint64_t key, uint32_t check, int32_t n, uint16_t *q, float wdl[3],
                    float *moves_left);
/* Stores (replaces) the entry for key; moves_left: plies left, NAN = none.
 * Thread-safe. n outside 1..MCTS_CACHE_MOVES_MAX is ignored. */
void mcts_cache_put(mcts_cache_t *c, uint64_t key, uint32_t check, int32_t n, const uint16_t *q, const float wdl[3],
                    float moves_left);
void mcts_cache_stats(mcts_cache_t *c, mcts_cache_stats_t *out);

enum { MCTS_CACHE_MOVES_MAX = 600 };

#endif
