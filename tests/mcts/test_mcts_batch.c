/* test_mcts_batch.c - mcts/batch.c, the one bridge from search to network:
 * leaves of two trees committed into one batch keep their tags, planes, hand
 * counts and legal-move labels in the CSR layout the inference server reads;
 * answers reach the right tree; uniform answers are zero; the batch never
 * takes more leaves than it holds. */
#include "mcts_test.h"

#include "mcts/batch.h"

int main(void) {
    engine_init();
    mcts_params_t p;
    mcts_params_default(&p);
    p.node_limit = 1 << 12;
    pos_t *pos = malloc(sizeof *pos);
    mcts_tree_t *t[2] = {mcts_tree_new(&p, NULL), mcts_tree_new(&p, NULL)};
    set_sfen(pos, "startpos");
    mcts_tree_set_position(t[0], pos);
    set_sfen(pos, "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2");
    mcts_tree_set_position(t[1], pos);
    mcts_limits_t lim = {0};
    lim.visits = 64;
    mcts_search_begin(t[0], &lim);
    mcts_search_begin(t[1], &lim);
    mcts_batch_t *b = mcts_batch_new(8);
    CHECK(b && b->cap == 8 && b->n == 0 && mcts_batch_room(b) == 8);
    CHECK(mcts_batch_new(0) == NULL);
    int32_t got0 = mcts_collect(t[0], 3, mcts_batch_slots(b));
    mcts_batch_commit(b, got0, 10);
    int32_t got1 = mcts_collect(t[1], 3, mcts_batch_slots(b));
    mcts_batch_commit(b, got1, 11);
    CHECK(got0 >= 1 && got1 >= 1 && b->n == got0 + got1 && mcts_batch_room(b) == 8 - b->n);
    uint32_t off = 0;
    for (int32_t i = 0; i < b->n; i++) {
        const mcts_request_t *q = &b->reqs[i];
        CHECK(b->tag[i] == (i < got0 ? 10 : 11));
        CHECK(b->offsets[i] == off);
        CHECK(memcmp(b->packed + (size_t)i * ENC_PACKED_BYTES, q->packed, ENC_PACKED_BYTES) == 0);
        CHECK(memcmp(b->hand + (size_t)i * ENC_HAND, q->hand, sizeof(float) * ENC_HAND) == 0);
        CHECK(memcmp(b->labels + off, q->labels, sizeof(uint16_t) * (size_t)q->n_moves) == 0);
        CHECK(mcts_batch_policy(b, i) == b->policy + off && mcts_batch_value(b, i) == b->value + 3 * i);
        off += (uint32_t)q->n_moves;
    }
    CHECK(b->offsets[b->n] == off && off >= 30); /* the start position has 30 legal moves */
    /* Uniform answers, handed to each leaf's own tree by tag. */
    for (uint32_t j = 0; j < off; j++) b->policy[j] = 1.0f;
    mcts_batch_uniform(b);
    int nonzero = 0;
    for (uint32_t j = 0; j < off; j++) nonzero += b->policy[j] != 0.0f;
    for (int32_t i = 0; i < 3 * b->n; i++) nonzero += b->value[i] != 0.0f;
    CHECK(nonzero == 0);
    for (int32_t i = 0; i < b->n; i++)
        CHECK(mcts_deliver_moves(t[b->tag[i] - 10], &b->reqs[i], mcts_batch_policy(b, i), mcts_batch_value(b, i)));
    mcts_batch_clear(b);
    CHECK(b->n == 0 && b->offsets[0] == 0);
    /* A single tree's leaves with mcts_batch_deliver; it empties the batch. */
    int32_t got = mcts_collect(t[0], 8, mcts_batch_slots(b));
    mcts_batch_commit(b, got, 0);
    mcts_batch_uniform(b);
    mcts_batch_deliver(b, t[0]);
    CHECK(got >= 1 && b->n == 0);
    mcts_batch_free(b);
    mcts_batch_free(NULL);
    mcts_tree_free(t[0]);
    mcts_tree_free(t[1]);
    free(pos);
    return t_done("test_mcts_batch");
}
