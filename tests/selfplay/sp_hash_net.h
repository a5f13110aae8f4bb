/* sp_hash_net.h - self-play games without a network: move logits and W/D/L
 * from a hash of the position key, so that games are quick, varied and
 * reproducible. For tests and benchmarks of what comes after a game (the
 * rank messages, commits); header-only. */
#ifndef KOMA_TESTS_SP_HASH_NET_H
#define KOMA_TESTS_SP_HASH_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "compat/bits.h"
#include "selfplay/game.h"

/* The logits of q's moves (spread ~3 nats) and a W/D/L from the key. */
static inline void sp_hash_evaluate(const mcts_request_t *q, float *logits, float *wdl) {
    for (int32_t i = 0; i < q->n_moves; i++)
        logits[i] = (float)(compat_mix64_fin(q->key + q->labels[i]) >> 40) * (3.0f / 16777216.0f);
    uint64_t h = compat_mix64_fin(q->key ^ 0x1234567ull);
    wdl[0] = (float)(h & 1023) / 512.0f;
    wdl[1] = (float)((h >> 10) & 1023) / 1024.0f;
    wdl[2] = (float)((h >> 20) & 1023) / 512.0f;
}

/* Plays g to its end with the hash net as generation gen: its record, or
 * NULL when the game asks for nothing more without ending. One thread at a
 * time (static buffers). */
static inline sp_record_t *sp_hash_play_game(sp_game_t *g, int64_t gen) {
    static mcts_request_t reqs[64];
    static float logits[MCTS_MOVES_MAX];
    sp_game_begin(g);
    for (int64_t steps = 0; steps < 1000000; steps++) {
        bool ended = false;
        int32_t n = sp_game_step(g, 8, reqs, &ended);
        if (ended) return sp_game_take_record(g);
        if (n <= 0) return NULL;
        for (int32_t i = 0; i < n; i++) {
            float wdl[3];
            sp_hash_evaluate(&reqs[i], logits, wdl);
            sp_game_deliver(g, &reqs[i], logits, wdl, gen);
        }
    }
    return NULL;
}

#endif
