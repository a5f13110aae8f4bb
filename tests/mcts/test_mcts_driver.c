/* test_mcts_driver.c - the batching protocol as a self-play worker uses it:
 * one thread drives several games, collects leaves from every tree into one
 * batch while the previous batch is still "on the device" (delivered one
 * step later, after the trees have collected again), plays the result's
 * move with tree reuse, and starts a new game when one ends. Checks the
 * tree invariants at every step, every result's policy target, that reuse
 * keeps the played subtree's visits, and that every game ends by the rules.
 */
#include "mcts_test.h"

#include "engine/rules.h"

enum { GAMES = 6, BATCH_MAX = 256, PER_TREE = 12, MOVES = 70 };

typedef struct {
    mcts_tree_t *t;
    int32_t plies;
    bool searching;
} test_game_t;

typedef struct {
    mcts_request_t req[BATCH_MAX];
    int32_t owner[BATCH_MAX];
    int32_t n;
} test_batch_t;

static test_batch_t batches[2];
static float pol[BATCH_MAX * ENC_LABEL_NB], wdl[BATCH_MAX * 3];
static pos_t start;
static mcts_result_t res;

static void evaluate_and_deliver(test_game_t *g, test_batch_t *b) {
    eval_hash(NULL, NULL, b->req, b->n, pol, wdl);
    for (int32_t i = 0; i < b->n; i++)
        mcts_deliver(g[b->owner[i]].t, &b->req[i], pol + (size_t)i * ENC_LABEL_NB, wdl + 3 * i);
    b->n = 0;
}

int main(void) {
    pos_set_startpos(&start);
    mcts_cache_t *cache = mcts_cache_new(4 << 20);
    static test_game_t g[GAMES];
    for (int i = 0; i < GAMES; i++) {
        mcts_params_t p;
        mcts_params_default(&p);
        p.root_mode = i % 2 ? MCTS_ROOT_GUMBEL : MCTS_ROOT_PUCT;
        p.gumbel_m = 8;
        p.noise = true;
        p.full_prob = 0.5f;
        p.visits_full = 96;
        p.visits_fast = 24;
        p.move_temp_plies = 10;
        p.max_ply = 60; /* games end by max ply at the latest */
        p.node_limit = 4096;
        p.seed = (uint64_t)i + 1;
        g[i].t = mcts_tree_new(&p, cache);
        mcts_tree_set_position(g[i].t, &start);
    }
    int64_t moves = 0, games_ended = 0, kept_total = 0, steps = 0;
    int cur = 0;
    static pos_t after;
    while (moves < MOVES * GAMES && steps < 100000) {
        steps++;
        test_batch_t *b = &batches[cur];
        for (int i = 0; i < GAMES; i++) {
            test_game_t *x = &g[i];
            if (!x->searching) {
                if (mcts_pending(x->t) > 0) continue; /* its last leaves are still in the other batch */
                mcts_search_begin(x->t, NULL);
                x->searching = true;
            }
            int32_t room = BATCH_MAX - b->n < PER_TREE ? BATCH_MAX - b->n : PER_TREE;
            int32_t n = mcts_collect(x->t, room, b->req + b->n);
            for (int32_t k = 0; k < n; k++) b->owner[b->n + k] = i;
            b->n += n;
        }
        /* The previous batch comes back from the "device" only now. */
        evaluate_and_deliver(g, &batches[cur ^ 1]);
        for (int i = 0; i < GAMES; i++) {
            const char *err = mcts_tree_validate(g[i].t);
            CHECKF(err == NULL, "step %lld game %d: %s", (long long)steps, i, err ? err : "");
        }
        for (int i = 0; i < GAMES; i++) {
            test_game_t *x = &g[i];
            if (!x->searching || !mcts_search_done(x->t)) continue;
            mcts_search_result(x->t, &res);
            x->searching = false;
            const pos_t *root = mcts_tree_position(x->t);
            check_result_policy(root, &res, "driver");
            int32_t k = 0;
            while (k < res.n && res.moves[k] != res.best) k++;
            int32_t child_visits = k < res.n ? res.visits[k] : 0;
            pos_copy(&after, root);
            pos_do_move(&after, res.best);
            bool kept = mcts_tree_advance(x->t, res.best);
            CHECKF(pos_key(mcts_tree_position(x->t)) == pos_key(&after), "game %d: root after advance", i);
            if (kept) {
                mcts_limits_t none = {.visits = 1};
                mcts_search_begin(x->t, &none); /* summarize the kept tree */
                mcts_search_result(x->t, &res);
                CHECKF(res.root_visits == child_visits, "game %d: kept %lld visits, the child had %d", i,
                       (long long)res.root_visits, child_visits);
                kept_total++;
            }
            moves++;
            x->plies++;
            rules_status_t st = rules_status(&after, 60);
            if (st.end != RULES_END_NONE) {
                games_ended++;
                mcts_tree_set_position(x->t, &start);
                x->plies = 0;
            }
        }
        cur ^= 1;
    }
    evaluate_and_deliver(g, &batches[cur ^ 1]);
    CHECKF(moves >= MOVES * GAMES, "only %lld moves played in %lld steps", (long long)moves, (long long)steps);
    CHECKF(kept_total > moves / 2, "reuse kept a subtree on %lld of %lld moves", (long long)kept_total, (long long)moves);
    CHECKF(games_ended >= 1, "no game ended in %lld moves (max ply 60)", (long long)moves);
    mcts_cache_stats_t cs;
    mcts_cache_stats(cache, &cs);
    CHECKF(cs.hits > 0, "shared cache never hit");
    for (int i = 0; i < GAMES; i++) mcts_tree_free(g[i].t);
    mcts_cache_free(cache);
    printf("driver: %lld moves, %lld games ended, %lld steps, cache hits %llu of %llu\n", (long long)moves,
           (long long)games_ended, (long long)steps, (unsigned long long)cs.hits, (unsigned long long)cs.lookups);
    return t_done("test_mcts_driver");
}
