/* test_selfplay_dfpn.c - the root df-pn of self-play (--dfpn-nodes) and the
 * game's end reason:
 *   - the flag is a row of the registry (default 0 = off, a value is
 *     accepted, a negative one refused), within SP_CONFIG_NFLAGS rows;
 *   - games driven by a network double with --dfpn-nodes 20000: once df-pn
 *     has played a mating move for a side, the game ends by checkmate of the
 *     other side within the proven length (the mate is played out), the
 *     moves df-pn played get no training row, and the rows + df-pn moves
 *     + random moves make up the game;
 *   - ref_db_reason maps every end of engine/rules.h to the database's
 *     reason of the same name (no trip through the name).
 */
#include "sp_test.h"

#include "data/db.h"
#include "engine/dfpn.h"
#include "match/referee.h"
#include "selfplay/game.h"
#include "sp_hash_net.h"

static void test_flag(void) {
    sp_config_t c;
    sp_config_default(&c);
    CHECKF(c.dfpn_nodes == 0, "dfpn-nodes defaults to 0 (off): %lld", (long long)c.dfpn_nodes);
    static cfg_opt_t t[SP_CONFIG_NFLAGS + 8];
    int n = sp_config_flags(&c, t, SP_CONFIG_NFLAGS + 8);
    CHECKF(n <= SP_CONFIG_NFLAGS, "sp_config_flags gives %d rows, more than SP_CONFIG_NFLAGS (%d)", n,
           SP_CONFIG_NFLAGS);
    char err[256];
    CHECKF(cfg_set(t, n, "dfpn-nodes", "5000", err, sizeof err) == CFG_OK && c.dfpn_nodes == 5000,
           "--dfpn-nodes 5000: %s", err);
    CHECKF(cfg_set(t, n, "dfpn-nodes", "-1", err, sizeof err) != CFG_OK && c.dfpn_nodes == 5000,
           "--dfpn-nodes -1 refused");
}

static void test_end_reason(void) {
    for (int e = RULES_END_CHECKMATE; e < RULES_END_NB; e++) {
        db_reason_t want;
        CHECKF(db_reason_parse(rules_end_name((rules_end_t)e), &want) == 0 && ref_db_reason((rules_end_t)e) == want,
               "%s -> %s", rules_end_name((rules_end_t)e), db_reason_name(ref_db_reason((rules_end_t)e)));
    }
    CHECKF(ref_db_reason(RULES_END_NONE) == DB_REASON_ABORT, "an unfinished game is an abort");
}

/* Plays one game on g with the hash network double. */
static sp_record_t *play_game(sp_game_t *g) {
    static mcts_request_t reqs[64];
    static float logits[MCTS_MOVES_MAX];
    sp_game_begin(g);
    for (int64_t steps = 0; steps < 1000000; steps++) {
        bool ended = false;
        int32_t n = sp_game_step(g, 16, reqs, &ended);
        if (ended) return sp_game_take_record(g);
        if (n <= 0) break;
        for (int32_t i = 0; i < n; i++) {
            float wdl[3];
            sp_hash_evaluate(&reqs[i], logits, wdl);
            sp_game_deliver(g, &reqs[i], logits, wdl, 1);
        }
    }
    CHECKF(0, "game did not end");
    return NULL;
}

static void test_games(void) {
    sp_config_t c;
    sp_config_default(&c);
    c.visits = 16;
    c.visits_fast = 8;
    c.full_prob = 0.5;
    c.resign_threshold = 0.0;
    snprintf(c.leaf_mate, sizeof c.leaf_mate, "0"); /* the mates are df-pn's to find */
    c.dfpn_nodes = 20000;
    sp_game_t *g = sp_game_new(&c, 7, NULL);
    CHECKF(g != NULL, "slot");
    if (!g) return;
    dfpn_t *d = dfpn_new((size_t)4 << 20);
    pos_t *pos = malloc(sizeof *pos);
    int64_t mates_before = 0, games_with_mate = 0;
    for (int k = 0; k < 6; k++) {
        sp_record_t *r = play_game(g);
        if (!r) break;
        int64_t played = sp_game_stats(g)->dfpn_mates - mates_before;
        mates_before = sp_game_stats(g)->dfpn_mates;
        CHECKF(r->n_rows + r->random_plies + played == r->n_moves, "game %d: %d rows + %d random + %lld df-pn != %d",
               k, r->n_rows, r->random_plies, (long long)played, r->n_moves);
        if (played == 0) {
            sp_record_free(r);
            continue;
        }
        games_with_mate++;
        /* replay: find the first position where df-pn proves a mate for the side to move */
        pos_set_startpos(pos);
        int32_t first = -1, len = 0;
        for (int32_t i = 0; i < r->n_moves && first < 0; i++) {
            dfpn_limits_t lim;
            dfpn_limits_default(&lim);
            lim.max_nodes = c.dfpn_nodes;
            lim.shorten = false;
            dfpn_result_t res;
            pos_t *tmp = malloc(sizeof *tmp);
            pos_copy(tmp, pos);
            dfpn_clear(d);
            dfpn_search(d, tmp, &lim, &res);
            free(tmp);
            if (res.status == DFPN_PROVEN) first = i, len = res.len;
            pos_do_move(pos, r->moves[i]);
        }
        CHECKF(first >= 0, "game %d: df-pn played %lld moves, none found again", k, (long long)played);
        color_t winner = first % 2 == 0 ? COLOR_BLACK : COLOR_WHITE;
        CHECKF(r->end == RULES_END_CHECKMATE && r->result == (winner == COLOR_BLACK ? 1 : -1),
               "game %d: df-pn mate for %s at ply %d, game ended %s with result %d", k,
               winner == COLOR_BLACK ? "Black" : "White", first, rules_end_name(r->end), r->result);
        CHECKF(r->n_moves - first <= 3 * len + 2, "game %d: mate in %d from ply %d took %d plies", k, len, first,
               r->n_moves - first);
        sp_record_free(r);
    }
    CHECKF(games_with_mate >= 2, "only %lld of 6 games had a df-pn mate", (long long)games_with_mate);
    printf("games with a df-pn mate: %lld of 6; df-pn nodes %lld\n", (long long)games_with_mate,
           (long long)sp_game_stats(g)->dfpn_nodes);
    free(pos);
    dfpn_free(d);
    sp_game_free(g);
}

int main(void) {
    engine_init();
    test_flag();
    test_end_reason();
    test_games();
    return t_done("test_selfplay_dfpn");
}
