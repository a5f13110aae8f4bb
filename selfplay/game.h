/* game.h - one self-play game slot: its search tree, its opening, its end,
 * and the record of the game it plays.
 *
 * Owns: the life of a game (random opening moves, one batched search per
 * move with playout cap randomization (before it, with --dfpn-nodes, a df-pn
 * mate search whose proven mate is played without a search or a row), move
 * choice with a decaying temperature, tree reuse, resignation and the no-resign games that measure
 * false resignations, every end from engine/rules.h), and the game record:
 * USI moves, one training row per searched move (planes, hand, legal mask,
 * policy target for full searches, search value, position), result, reason,
 * generations of the nets that played it.
 * Does not own: batching across games and the inference server (worker.c),
 * shards and the database (driver.c turns records into shard rows with
 * sp_record_add_to_shard).
 *
 * A slot belongs to one worker thread. Protocol (per slot):
 *   sp_game_begin(g)                        new game
 *   n = sp_game_step(g, max, reqs, &ended)  advance until the search needs the
 *                                           network (n > 0) or the game ends
 *   sp_game_deliver(g, &reqs[i], ...)       every request, before the next step
 *   rec = sp_game_take_record(g)            once ended; the caller owns rec
 */
#ifndef KOMA_SELFPLAY_GAME_H
#define KOMA_SELFPLAY_GAME_H

#include <stdbool.h>
#include <stdint.h>

#include "data/shard.h"
#include "engine/encode.h"
#include "engine/rules.h"
#include "mcts/mcts.h"
#include "mcts/select.h"
#include "selfplay/config.h"

/* One searched move, as it becomes a shard row. */
typedef struct {
    uint8_t packed[ENC_PACKED_BYTES];           /* encode_position of the position searched */
    float hand[ENC_HAND];
    uint8_t legal[ENC_LEGAL_BYTES];             /* legal-move mask */
    uint8_t position[SHARD_POSITION_BYTES];     /* shard_position_pack */
    uint8_t hcp[SHARD_HCP_BYTES];               /* the position as a version-2 shard stores it (shard_pos_hcp) */
    uint32_t pol_begin, pol_n;                  /* entries in the record's policy arrays; 0 for fast searches */
    float root_q;                               /* search value for the side to move, [-1, 1] */
    uint16_t ply;                               /* moves played before this position */
    uint16_t move;                              /* the move played */
    float surprise;                             /* KL(policy target || the root's priors), full searches;
                                                   SHARD_SURPRISE_UNKNOWN for fast ones */
} sp_row_t;

enum { SP_GENS_MAX = 4 };

/* A finished game. */
typedef struct {
    move_t *moves;            /* (n_moves) every move from the start position */
    int32_t n_moves, cap_moves;
    sp_row_t *rows;         /* (n_rows) searched moves, in order */
    int32_t n_rows, cap_rows;
    uint16_t *pol_label;    /* (n_pol) */
    float *pol_prob;        /* (n_pol) */
    int64_t n_pol, cap_pol;
    int32_t result;         /* db_result_t: +1 Black won, -1 White won, 0 draw */
    rules_end_t end;           /* why it ended (RULES_END_RESIGN for a resignation) */
    int32_t random_plies;   /* random opening moves (no rows) */
    int32_t full_rows;      /* rows with a policy target */
    int64_t gens[SP_GENS_MAX];      /* generations that played searched moves */
    int32_t gen_moves[SP_GENS_MAX]; /* moves each played */
    int32_t n_gens;
    bool no_resign;         /* a game that could not resign */
    int32_t would_resign;   /* no-resign game: COLOR_BLACK / COLOR_WHITE that would have resigned first, else COLOR_NB */
    bool false_resign;      /* ... and that side did not lose */
} sp_record_t;

void sp_record_free(sp_record_t *r); /* NULL ok */
/* The position's columns of a row (packed planes, hand, legal mask, packed
 * position): what the game fills while it plays, and what a record received
 * from another rank has rebuilt (selfplay/wire.h). */
void sp_row_encode(sp_row_t *w, const pos_t *pos);
/* Generation that played the most searched moves (0 if none). */
int64_t sp_record_main_gen(const sp_record_t *r);
/* "7g7f 3c3d ..." into a malloc'ed string. NULL when out of memory. */
char *sp_record_usi(const sp_record_t *r);
/* Adds the record's rows and closes its game in b (model_id, start "startpos",
 * moves, plies, result, reason, the rank and host that played it; host NULL:
 * not recorded). 0, or -1 with err (the builder's open game is dropped). */
int sp_record_add_to_shard(const sp_record_t *r, shard_builder_t *b, int64_t model_id, int32_t rank, const char *host,
                           char *err, size_t errlen);

typedef struct sp_game sp_game_t;

/* A slot with its tree. cache may be NULL (shared, thread-safe). NULL when
 * out of memory. cfg must outlive the slot. */
sp_game_t *sp_game_new(const sp_config_t *cfg, uint64_t seed, mcts_cache_t *cache);
void sp_game_free(sp_game_t *g); /* NULL ok */

/* Starts a new game from the start position (drops any unfinished one; its
 * requests in flight are abandoned). */
void sp_game_begin(sp_game_t *g);
/* Is a game being played (begun, not yet ended)? */
bool sp_game_active(const sp_game_t *g);
/* Plays on until the search needs the network: returns the requests written
 * to out (1..max), or 0 with *ended = true when the game ended (take its
 * record), or 0 with *ended = false when idle. Every request of the previous
 * step must have been delivered. */
int32_t sp_game_step(sp_game_t *g, int32_t max, mcts_request_t *out, bool *ended);
/* One network result: move_logits (req->n_moves, in req->moves order),
 * wdl_logits (3), from net generation gen. */
void sp_game_deliver(sp_game_t *g, const mcts_request_t *req, const float *move_logits, const float *wdl_logits,
                     int64_t gen);
/* The ended game's record (the caller frees it); the slot is idle until the
 * next sp_game_begin. NULL when no game has ended. */
sp_record_t *sp_game_take_record(sp_game_t *g);

/* The slot's tree (inspection and tests: mcts_request_position). */
const mcts_tree_t *sp_game_tree(const sp_game_t *g);

/* Counters since the slot was made (read by its own thread). */
typedef struct {
    int64_t searches, full_searches, playouts, cache_hits, leaves;
    int64_t dfpn_nodes, dfpn_mates; /* root df-pn (--dfpn-nodes): nodes searched, mates it played */
} sp_game_stats_t;
const sp_game_stats_t *sp_game_stats(const sp_game_t *g);

/* The move temperature at `ply` searched ply (0-based game ply): geometric
 * from temp_start to temp_end over temp_plies, 0 (greedy) after. */
double sp_temperature(const sp_config_t *cfg, int32_t ply);
/* Samples an index of p (n, sums to about 1) proportionally to p^(1/T). */
int32_t sp_sample_policy(mcts_rng_t *rng, const float *p, int32_t n, double temp);

#endif
