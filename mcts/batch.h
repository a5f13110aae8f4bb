/* batch.h - leaves of one or many search trees packed for one network call:
 * the single bridge from search to network that self-play workers, the USI
 * engine and matches share.
 *
 * Owns: the buffers of a batch and the copies between the trees' requests
 * and them: planes and hand counts in rows, the legal-move labels of every
 * leaf in one CSR list (offsets), and the answers, one logit per legal move
 * (policy, in the same CSR order) and three W/D/L logits per leaf (value), as
 * the inference server gathers them on the device (nn/server.h), and the
 * moves-left estimate of each leaf (NAN unless a net with the moves-left
 * head wrote one; mcts_batch_deliver hands it to the tree). Each leaf
 * carries a caller's tag (e.g. the game slot whose tree asked for it).
 * Does not own: the network call (the caller submits the buffers to its
 * server or forward and waits), the trees.
 *
 *   mcts_batch_clear(b);
 *   got = mcts_collect(tree, want, mcts_batch_slots(b));   // requests into the batch
 *   mcts_batch_commit(b, got, tag);                       // packed for the network
 *   ... network fills b->policy, b->value (and b->moves_left) ...
 *   mcts_batch_moves_left(b);                             // estimates into the requests
 *   mcts_deliver_moves(tree, &b->reqs[i], mcts_batch_policy(b, i), mcts_batch_value(b, i));
 *
 * Threads: a batch belongs to one thread at a time. Errors: only out of
 * memory at creation (NULL).
 */
#ifndef KOMA_MCTS_BATCH_H
#define KOMA_MCTS_BATCH_H

#include <stdint.h>

#include "engine/encode.h"
#include "mcts/mcts.h"

typedef struct {
    int32_t cap;       /* leaves it holds */
    int32_t n;         /* leaves committed */
    mcts_request_t *reqs; /* (cap) */
    int32_t *tag;      /* (cap) the caller's tag of each leaf */
    uint8_t *packed;   /* (cap, ENC_PACKED_BYTES) */
    float *hand;       /* (cap, ENC_HAND) */
    uint32_t *offsets; /* (cap + 1) leaf i's labels and policy logits are [offsets[i], offsets[i+1]) */
    uint16_t *labels;  /* (cap * MCTS_MOVES_MAX) */
    float *policy;     /* (cap * MCTS_MOVES_MAX) answers: one logit per legal move */
    float *value;      /* (cap, 3) answers: W/D/L logits */
    float *moves_left; /* (cap) answers: plies left until the game ends; NAN (set by commit) = none */
} mcts_batch_t;

mcts_batch_t *mcts_batch_new(int32_t cap); /* NULL when out of memory */
void mcts_batch_free(mcts_batch_t *b);     /* NULL ok */
void mcts_batch_clear(mcts_batch_t *b);    /* no leaves */
/* Where the next leaves' requests go (mcts_collect's out), and how many fit. */
static inline mcts_request_t *mcts_batch_slots(mcts_batch_t *b) { return b->reqs + b->n; }
static inline int32_t mcts_batch_room(const mcts_batch_t *b) { return b->cap - b->n; }
/* Packs the got requests written at mcts_batch_slots for the network, each tagged tag. */
void mcts_batch_commit(mcts_batch_t *b, int32_t got, int32_t tag);
/* Answers that carry no information (all logits 0, no moves left): when there is no net or it failed. */
void mcts_batch_uniform(mcts_batch_t *b);
/* Copies each leaf's moves_left answer into its request (reqs[i].moves_left), where
 * mcts_deliver* read it; call it once the answers are in, before delivering. */
void mcts_batch_moves_left(mcts_batch_t *b);
static inline const float *mcts_batch_policy(const mcts_batch_t *b, int32_t i) { return b->policy + b->offsets[i]; }
static inline const float *mcts_batch_value(const mcts_batch_t *b, int32_t i) { return b->value + 3 * (int64_t)i; }
/* Every answer to tree t (all leaves must be t's), moves left included; then empty. */
void mcts_batch_deliver(mcts_batch_t *b, mcts_tree_t *t);

#endif
