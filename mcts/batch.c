/* batch.c - leaves packed for one network call; see batch.h. */
#include "mcts/batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

mcts_batch_t *mcts_batch_new(int32_t cap) {
    if (cap < 1) return NULL;
    mcts_batch_t *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    size_t c = (size_t)cap;
    b->cap = cap;
    b->reqs = malloc(c * sizeof *b->reqs);
    b->tag = malloc(c * sizeof *b->tag);
    b->packed = malloc(c * ENC_PACKED_BYTES);
    b->hand = malloc(c * ENC_HAND * sizeof(float));
    b->offsets = malloc((c + 1) * sizeof(uint32_t));
    b->labels = malloc(c * MCTS_MOVES_MAX * sizeof(uint16_t));
    b->policy = malloc(c * MCTS_MOVES_MAX * sizeof(float));
    b->value = malloc(c * 3 * sizeof(float));
    b->moves_left = malloc(c * sizeof(float));
    if (!b->reqs || !b->tag || !b->packed || !b->hand || !b->offsets || !b->labels || !b->policy || !b->value ||
        !b->moves_left) {
        mcts_batch_free(b);
        return NULL;
    }
    mcts_batch_clear(b);
    return b;
}

void mcts_batch_free(mcts_batch_t *b) {
    if (!b) return;
    free(b->reqs);
    free(b->tag);
    free(b->packed);
    free(b->hand);
    free(b->offsets);
    free(b->labels);
    free(b->policy);
    free(b->value);
    free(b->moves_left);
    free(b);
}

void mcts_batch_clear(mcts_batch_t *b) {
    b->n = 0;
    b->offsets[0] = 0;
}

void mcts_batch_commit(mcts_batch_t *b, int32_t got, int32_t tag) {
    KOMA_ASSERT(got >= 0 && got <= b->cap - b->n);
    for (int32_t k = 0; k < got; k++) {
        int32_t j = b->n + k;
        const mcts_request_t *q = &b->reqs[j];
        b->tag[j] = tag;
        memcpy(b->packed + (size_t)j * ENC_PACKED_BYTES, q->packed, ENC_PACKED_BYTES);
        memcpy(b->hand + (size_t)j * ENC_HAND, q->hand, sizeof(float) * ENC_HAND);
        memcpy(b->labels + b->offsets[j], q->labels, sizeof(uint16_t) * (size_t)q->n_moves);
        b->offsets[j + 1] = b->offsets[j] + (uint32_t)q->n_moves;
        b->moves_left[j] = NAN;
    }
    b->n += got;
}

void mcts_batch_uniform(mcts_batch_t *b) {
    memset(b->policy, 0, (size_t)b->offsets[b->n] * sizeof(float));
    memset(b->value, 0, (size_t)b->n * 3 * sizeof(float));
    for (int32_t i = 0; i < b->n; i++) b->moves_left[i] = NAN;
}

void mcts_batch_moves_left(mcts_batch_t *b) {
    for (int32_t i = 0; i < b->n; i++) b->reqs[i].moves_left = b->moves_left[i];
}

void mcts_batch_deliver(mcts_batch_t *b, mcts_tree_t *t) {
    mcts_batch_moves_left(b);
    for (int32_t i = 0; i < b->n; i++) mcts_deliver_moves(t, &b->reqs[i], mcts_batch_policy(b, i), mcts_batch_value(b, i));
    mcts_batch_clear(b);
}
