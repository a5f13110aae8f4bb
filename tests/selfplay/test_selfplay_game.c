/* test_selfplay_game.c - selfplay/game.c without a network server: game
 * slots driven by network doubles, their records written as a shard and
 * replayed with the engine (sp_test.h replay_game):
 *   - full games (Gumbel and PUCT, with and without tree reuse) are legal,
 *     end the way their reason says (checkmates really are mate), and every
 *     row matches the replayed position, move, planes and legal mask;
 *   - playout cap randomization: full_prob 0 gives no policy targets,
 *     full_prob 1 gives one on every searched move with a choice;
 *   - random openings: the first searched ply is the number of random moves;
 *   - resignation: a net that says Black is lost makes Black resign after
 *     resign_consecutive searches; no-resign games play on, remember who
 *     would have resigned and whether that was wrong;
 *   - the temperature schedule and the sampler's distribution.
 */
#include "sp_test.h"
#include "compat/bits.h"

#include "mcts/select.h"
#include "selfplay/game.h"
#include "sp_hash_net.h"

/* ---- network doubles ------------------------------------------------------------------ */

typedef enum { NET_HASH, NET_BLACK_LOST } net_kind_t;

/* Move logits from the position key (spread ~3 nats) and a value: hash
 * (NET_HASH, sp_hash_net.h) or "Black is lost" (NET_BLACK_LOST). */
static void evaluate(net_kind_t kind, const sp_game_t *g, const mcts_request_t *q, float *logits, float *wdl) {
    sp_hash_evaluate(q, logits, wdl);
    if (kind != NET_HASH) {
        static pos_t pos;
        mcts_request_position(sp_game_tree(g), q, &pos);
        bool black = pos_side_to_move(&pos) == COLOR_BLACK;
        wdl[0] = black ? -8.0f : 8.0f;
        wdl[1] = -8.0f;
        wdl[2] = black ? 8.0f : -8.0f;
    }
}

/* Plays one game to its end on slot g; returns its record. */
static sp_record_t *play_game(sp_game_t *g, net_kind_t kind, int32_t max_leaves) {
    static mcts_request_t reqs[64];
    static float logits[MCTS_MOVES_MAX];
    sp_game_begin(g);
    for (int64_t steps = 0; steps < 1000000; steps++) {
        bool ended = false;
        int32_t n = sp_game_step(g, max_leaves, reqs, &ended);
        if (ended) return sp_game_take_record(g);
        CHECKF(n > 0, "an active game made no request");
        if (n <= 0) return NULL;
        for (int32_t i = 0; i < n; i++) {
            float wdl[3];
            evaluate(kind, g, &reqs[i], logits, wdl);
            sp_game_deliver(g, &reqs[i], logits, wdl, 5);
        }
    }
    CHECKF(0, "game did not end");
    return NULL;
}

static const shard_format_t FMT = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};

typedef struct {
    int32_t games, full_rows, rows, random_plies_mismatch;
    int32_t reasons[RULES_END_NB];
    int32_t first_ply_max;
} batch_stats_t;

/* Plays n games with cfg, writes them as one shard and replays it. */
static void play_and_check(const char *what, const sp_config_t *cfg, net_kind_t kind, int32_t n, uint64_t seed,
                           batch_stats_t *bs) {
    memset(bs, 0, sizeof *bs);
    char err[1024];
    sp_game_t *g = sp_game_new(cfg, seed, NULL);
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    CHECKF(g && b, "%s: setup: %s", what, err);
    if (!g || !b) return;
    for (int32_t k = 0; k < n; k++) {
        sp_record_t *r = play_game(g, kind, 4);
        if (!r) break;
        bs->games++;
        bs->rows += r->n_rows;
        bs->full_rows += r->full_rows;
        bs->reasons[r->end]++;
        int32_t first = r->n_rows ? r->rows[0].ply : r->n_moves;
        if (first != r->random_plies) bs->random_plies_mismatch++;
        if (first > bs->first_ply_max) bs->first_ply_max = first;
        CHECKF(r->n_gens == 1 && r->gens[0] == 5 && sp_record_main_gen(r) == 5, "%s: generations %d, main %lld", what,
               r->n_gens, (long long)sp_record_main_gen(r));
        CHECKF(sp_record_add_to_shard(r, b, 42, 0, "test-host", err, sizeof err) == 0, "%s: add to shard: %s", what, err);
        sp_record_free(r);
    }
    const char *dir = t_scratch("sp_game");
    char path[800];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, what);
    CHECKF(shard_write(b, path, err, sizeof err) == 0, "%s: shard_write: %s", what, err);
    shard_t *s = shard_open(path, &FMT, 0, err, sizeof err);
    CHECKF(s != NULL, "%s: shard_open: %s", what, err);
    if (s) {
        run_state_t rs;
        memset(&rs, 0, sizeof rs);
        for (int32_t i = 0; i < shard_builder_games(b); i++) {
            const db_game_t *gm = shard_builder_game(b, i);
            CHECKF(gm->model_id == 42, "%s: model id %lld", what, (long long)gm->model_id);
            replay_game(gm, s, (int32_t)cfg->max_ply, &rs);
        }
        CHECKF(rs.replayed == n, "%s: %lld of %d games replayed", what, (long long)rs.replayed, n);
        CHECKF(rs.with_policy == bs->full_rows, "%s: %lld rows with a policy in the shard, records say %d", what,
               (long long)rs.with_policy, bs->full_rows);
        shard_close(s);
    }
    t_rm_rf(dir);
    shard_builder_free(b);
    sp_game_free(g);
}

static void base_config(sp_config_t *c) {
    sp_config_default(c);
    c->visits = 24;
    c->visits_fast = 8;
    c->full_prob = 0.5;
    c->max_ply = 320;
    c->resign_threshold = 0.0; /* never */
}

static void test_full_games(void) {
    sp_config_t c;
    batch_stats_t bs;
    int32_t mates = 0, total = 0;
    const char *names[4] = {"gumbel", "gumbel_noreuse", "puct", "puct_noreuse"};
    for (int k = 0; k < 4; k++) {
        base_config(&c);
        snprintf(c.search, sizeof c.search, "%s", k < 2 ? "gumbel" : "puct");
        c.tree_reuse = (k & 1) == 0;
        play_and_check(names[k], &c, NET_HASH, 4, 100 + (uint64_t)k, &bs);
        CHECKF(bs.games == 4 && bs.rows > 0, "%s: %d games, %d rows", names[k], bs.games, bs.rows);
        CHECKF(bs.random_plies_mismatch == 0, "%s: %d games whose first row is not after the random moves", names[k],
               bs.random_plies_mismatch);
        mates += bs.reasons[RULES_END_CHECKMATE];
        total += bs.games;
    }
    /* With mate-in-one leaves the search finds mates: random-ish games end in
     * checkmate well before 320 plies in most cases. */
    CHECKF(mates >= 4, "only %d of %d games ended in checkmate", mates, total);
}

static void test_playout_cap(void) {
    sp_config_t c;
    batch_stats_t bs;
    base_config(&c);
    c.max_ply = 40;
    c.full_prob = 0.0;
    play_and_check("cap0", &c, NET_HASH, 2, 7, &bs);
    CHECKF(bs.rows > 0 && bs.full_rows == 0, "full_prob 0: %d of %d rows have a policy target", bs.full_rows, bs.rows);
    c.full_prob = 1.0;
    play_and_check("cap1", &c, NET_HASH, 2, 8, &bs);
    /* every searched move with more than one legal move (forced moves are rare in 40 plies) */
    CHECKF(bs.full_rows >= bs.rows - 4 && bs.full_rows > 0, "full_prob 1: %d of %d rows", bs.full_rows, bs.rows);
    c.full_prob = 0.25;
    play_and_check("cap25", &c, NET_HASH, 4, 9, &bs);
    double share = (double)bs.full_rows / (double)bs.rows;
    CHECKF(share > 0.1 && share < 0.45, "full_prob 0.25: share %.3f of %d rows", share, bs.rows);
}

static void test_random_opening(void) {
    sp_config_t c;
    batch_stats_t bs;
    base_config(&c);
    c.max_ply = 30;
    c.random_opening = 0;
    play_and_check("rand0", &c, NET_HASH, 3, 11, &bs);
    CHECKF(bs.first_ply_max == 0, "no random opening: a game's first row at ply %d", bs.first_ply_max);
    c.random_opening = 6;
    play_and_check("rand6", &c, NET_HASH, 12, 12, &bs);
    CHECKF(bs.first_ply_max > 0 && bs.first_ply_max <= 6 && bs.random_plies_mismatch == 0,
           "random opening up to 6: first rows up to ply %d, %d mismatches", bs.first_ply_max, bs.random_plies_mismatch);
}

static void test_resignation(void) {
    sp_config_t c;
    base_config(&c);
    c.max_ply = 30;
    c.random_opening = 0;
    c.resign_threshold = 0.1; /* win probability (1 + W-L) / 2: W-L -0.8 */
    c.resign_consecutive = 2;
    c.no_resign_fraction = 0.0;
    batch_stats_t bs;
    play_and_check("resign", &c, NET_BLACK_LOST, 2, 21, &bs);
    CHECKF(bs.reasons[RULES_END_RESIGN] == 2, "resign: %d of 2 games resigned", bs.reasons[RULES_END_RESIGN]);
    /* Black resigns at its second search: two moves played (black, white). */
    sp_game_t *g = sp_game_new(&c, 22, NULL);
    sp_record_t *r = play_game(g, NET_BLACK_LOST, 4);
    CHECKF(r && r->end == RULES_END_RESIGN && r->result == -1 && r->n_moves == 2 && !r->no_resign,
           "resign: end %s result %d after %d moves", r ? rules_end_name(r->end) : "-", r ? r->result : 9,
           r ? r->n_moves : -1);
    sp_record_free(r);
    sp_game_free(g);

    /* No-resign games play on; Black would have resigned and then did not
     * lose (the game is a max-ply draw): a false resignation. */
    c.no_resign_fraction = 1.0;
    g = sp_game_new(&c, 23, NULL);
    r = play_game(g, NET_BLACK_LOST, 4);
    CHECKF(r && r->no_resign && r->end != RULES_END_RESIGN && r->would_resign == COLOR_BLACK,
           "no-resign: end %s, would_resign %d", r ? rules_end_name(r->end) : "-", r ? r->would_resign : -1);
    if (r) CHECKF(r->false_resign == (r->result != -1), "no-resign: result %d, false_resign %d", r->result, r->false_resign);
    sp_record_free(r);
    sp_game_free(g);

    /* A threshold of 0 never resigns and never counts. */
    c.resign_threshold = 0.0;
    c.no_resign_fraction = 0.0;
    g = sp_game_new(&c, 24, NULL);
    r = play_game(g, NET_BLACK_LOST, 4);
    CHECKF(r && r->end != RULES_END_RESIGN && r->would_resign == COLOR_NB, "threshold 0: end %s would_resign %d",
           r ? rules_end_name(r->end) : "-", r ? r->would_resign : -1);
    sp_record_free(r);
    sp_game_free(g);
}

static void test_temperature(void) {
    sp_config_t c;
    sp_config_default(&c);
    c.temp_plies = 10;
    c.temp_start = 1.0;
    c.temp_end = 0.25;
    CHECKF(fabs(sp_temperature(&c, 0) - 1.0) < 1e-12, "T(0) = %g", sp_temperature(&c, 0));
    CHECKF(fabs(sp_temperature(&c, 5) - 0.5) < 1e-12, "T(5) = %g, want 0.5 (geometric)", sp_temperature(&c, 5));
    CHECKF(sp_temperature(&c, 10) == 0.0 && sp_temperature(&c, 200) == 0.0, "greedy after temp_plies");
    for (int32_t p = 1; p < 10; p++) CHECKF(sp_temperature(&c, p) < sp_temperature(&c, p - 1), "T decays at %d", p);

    mcts_rng_t rng;
    mcts_rng_seed(&rng, 5);
    const float p[4] = {0.5f, 0.3f, 0.2f, 0.0f};
    int32_t cnt[4] = {0};
    const int32_t N = 200000;
    for (int32_t i = 0; i < N; i++) cnt[sp_sample_policy(&rng, p, 4, 1.0)]++;
    for (int k = 0; k < 3; k++)
        CHECKF(fabs((double)cnt[k] / N - p[k]) < 0.01, "T=1: move %d drawn %.4f, p %.2f", k, (double)cnt[k] / N, p[k]);
    CHECKF(cnt[3] == 0, "a zero-probability move was drawn %d times", cnt[3]);
    /* T = 0.5 squares: 0.25 : 0.09 : 0.04 */
    memset(cnt, 0, sizeof cnt);
    for (int32_t i = 0; i < N; i++) cnt[sp_sample_policy(&rng, p, 4, 0.5)]++;
    CHECKF(fabs((double)cnt[0] / N - 0.25 / 0.38) < 0.01, "T=0.5: best drawn %.4f, want %.4f", (double)cnt[0] / N,
           0.25 / 0.38);
    CHECKF(sp_sample_policy(&rng, p, 4, 0.0) == 0, "T=0 is the argmax");
}

int main(void) {
    test_temperature();
    test_full_games();
    test_playout_cap();
    test_random_opening();
    test_resignation();
    return t_done("test_selfplay_game");
}
