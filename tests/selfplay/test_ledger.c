/* test_ledger.c - selfplay/ledger.c, the cycle ledger, alone (no threads,
 * no files, no clock):
 *   - a new run (model 0, --cycles 3, 4 games a cycle): games fill cycle 1,
 *     the fourth closes it; the closed cycle waits for the shard jobs it
 *     named, goes to the trainer, and once published is the newest model;
 *     the run is done only when cycle 3 is published;
 *   - the accumulators: results, end reasons, resignation counts, games of
 *     several nets, rows and plies, the net that played most games, the
 *     device counters and the cycle_metrics row they make (rates over the
 *     cycle's time, NAN where there is nothing to divide);
 *   - resuming: cycles whose games are all stored close at once needing no
 *     shard, the first incomplete one is filled from the games it has; a
 *     run whose games are all stored plays nothing;
 *   - the pause rule: self-play waits when the cycle being filled is more
 *     than --max-ahead past the newest model (0: every net);
 *   - the ETA: unknown before a game, then by this session's pace.
 */
#include "tests/koma_test.h"

#include "selfplay/ledger.h"

/* A finished game with the fields the ledger reads. */
static sp_record_t game(int32_t result, rules_end_t end, int32_t rows, int32_t moves, int64_t gen, int32_t n_gens) {
    sp_record_t r;
    memset(&r, 0, sizeof r);
    r.result = result;
    r.end = end;
    r.n_rows = rows;
    r.full_rows = rows / 2;
    r.n_moves = moves;
    r.gens[0] = gen;
    r.n_gens = n_gens;
    r.would_resign = COLOR_NB;
    return r;
}

static void test_new_run(void) {
    sp_ledger_t l;
    sp_ledger_init(&l, 3, 4);
    sp_ledger_resume(&l, 0, 0);
    CHECK(!sp_ledger_stored(&l, 0, 0)); /* cycle 1 has nothing */
    sp_ledger_begin(&l, 1000000000, 1700000000.0);
    CHECK(sp_ledger_playing(&l) && l.fill == 1 && l.acc.cycle == 1);
    CHECK(!sp_ledger_done(&l));
    int64_t c = -1, steps = -1;
    CHECK(!sp_ledger_trainable(&l, 100, &c));
    CHECK(!sp_ledger_training(&l, &c, &steps));

    sp_record_t g1 = game(1, RULES_END_CHECKMATE, 10, 30, 1, 1);
    sp_record_t g2 = game(-1, RULES_END_RESIGN, 20, 40, 1, 1);
    sp_record_t g3 = game(0, RULES_END_SENNICHITE, 30, 50, 2, 2);
    g3.no_resign = true, g3.would_resign = COLOR_BLACK, g3.false_resign = true;
    sp_record_t g4 = game(1, RULES_END_MAX_PLY, 40, 60, 1, 1);
    CHECK(!sp_ledger_add(&l, &g1, 1));
    CHECK(!sp_ledger_add(&l, &g2, 1));
    CHECK(!sp_ledger_add(&l, &g3, 2));
    sp_ledger_sample(&l, 800, 10, 1.5, 2.0, 400);
    sp_ledger_sample(&l, 200, 5, 0.5, 2.0, 100);
    CHECKF(sp_ledger_add(&l, &g4, 1), "the 4th game of 4 closes the cycle");
    const sp_cycle_acc_t *a = &l.acc;
    CHECKF(a->games == 4 && a->black == 2 && a->white == 1 && a->draws == 1, "games %lld: +%lld -%lld =%lld",
           (long long)a->games, (long long)a->black, (long long)a->white, (long long)a->draws);
    CHECK(a->rows == 100 && a->full_rows == 50 && a->plies == 180);
    CHECK(a->reasons[RULES_END_CHECKMATE] == 1 && a->reasons[RULES_END_RESIGN] == 1 &&
          a->reasons[RULES_END_SENNICHITE] == 1 && a->reasons[RULES_END_MAX_PLY] == 1);
    CHECK(a->no_resign == 1 && a->would_resign == 1 && a->false_resign == 1 && a->mixed == 1);
    CHECKF(sp_ledger_main_gen(&l) == 1, "main generation %lld", (long long)sp_ledger_main_gen(&l));
    CHECK(l.fill_games == 4 && l.fill_positions == 100 && l.total_games == 4);

    /* The cycle_metrics row: 2 s of self-play. */
    db_cycle_metrics_t m;
    sp_ledger_metrics(&l, 3000000000, 1700000002.0, -0.9, &m);
    CHECK(m.cycle == 1 && m.games == 4 && m.positions == 100);
    CHECK_NEAR(m.selfplay_s, 2.0, 1e-9);
    CHECK_NEAR(m.started, 1700000000.0, 0);
    CHECK_NEAR(m.finished, 1700000002.0, 0);
    CHECK_NEAR(m.positions_per_s, 250.0, 1e-9); /* 500 searched / 2 s */
    CHECK_NEAR(m.evals_per_s, 500.0, 1e-9);
    CHECK_NEAR(m.avg_batch, 1000.0 / 15.0, 1e-9);
    CHECK_NEAR(m.busy_pct, 50.0, 1e-9);
    CHECK_NEAR(m.avg_plies, 45.0, 1e-9);
    CHECK(m.black_wins == 2 && m.white_wins == 1 && m.draws == 1);
    CHECK(m.no_resign_games == 1 && m.would_resign == 1 && m.false_resign == 1);
    CHECK_NEAR(m.resign_threshold, -0.9, 0);
    CHECK(isnan(m.train_s) && isnan(m.elo) && isnan(m.elo_lo) && isnan(m.elo_hi) && m.model_id == 0);

    /* Closed: trained once its 2 shard jobs are committed. */
    sp_ledger_close(&l, 2);
    CHECK(l.fill == 2 && l.fill_games == 0 && l.n_closed == 1);
    CHECK(!sp_ledger_stored(&l, 0, 0));
    sp_ledger_begin(&l, 3000000000, 1700000002.0);
    CHECK(l.acc.cycle == 2 && l.acc.games == 0 && l.acc.n_gens == 0);
    CHECK(!sp_ledger_trainable(&l, 1, &c));
    CHECK(sp_ledger_trainable(&l, 2, &c) && c == 1);
    sp_ledger_train(&l, 50);
    CHECK(l.n_closed == 0 && sp_ledger_training(&l, &c, &steps) && c == 1 && steps == 50);
    CHECK(!sp_ledger_trainable(&l, 2, &c));
    sp_ledger_published(&l, 50);
    CHECK(l.latest == 1 && l.latest_steps == 50 && !sp_ledger_training(&l, &c, NULL));

    /* Cycles 2 and 3: both closed before either is trained, trained in order. */
    for (int64_t k = 2; k <= 3; k++) {
        for (int i = 0; i < 4; i++) {
            sp_record_t g = game(1, RULES_END_CHECKMATE, 5, 9, k, 1);
            CHECK(sp_ledger_add(&l, &g, k) == (i == 3));
        }
        CHECK(!sp_ledger_done(&l));
        sp_ledger_close(&l, 3 + k); /* cycle 2 waits for 5 shard jobs, cycle 3 for 6 */
        sp_ledger_begin(&l, 0, 0);
    }
    CHECK(!sp_ledger_playing(&l) && l.fill == 4 && l.total_games == 12 && l.n_closed == 2);
    CHECK(sp_ledger_trainable(&l, 5, &c) && c == 2);
    sp_ledger_train(&l, 10);
    CHECK(!sp_ledger_trainable(&l, 5, &c));
    CHECK(sp_ledger_trainable(&l, 6, &c) && c == 3);
    sp_ledger_train(&l, 20);
    CHECK(sp_ledger_training(&l, &c, &steps) && c == 2 && steps == 10);
    sp_ledger_published(&l, 60);
    CHECK(!sp_ledger_done(&l));
    CHECK(sp_ledger_training(&l, &c, &steps) && c == 3 && steps == 20);
    sp_ledger_published(&l, 80);
    CHECK(l.latest == 3 && l.latest_steps == 80);
    CHECKF(sp_ledger_done(&l), "model 3 of --cycles 3 published: done");
    sp_ledger_free(&l);
}

/* More nets than the ledger counts: the first SP_LEDGER_GENS are counted. */
static void test_many_nets(void) {
    sp_ledger_t l;
    sp_ledger_init(&l, 1, 100);
    sp_ledger_resume(&l, 0, 0);
    sp_ledger_begin(&l, 0, 0);
    for (int64_t g = 1; g <= SP_LEDGER_GENS + 3; g++) {
        for (int64_t i = 0; i < (g == 5 ? 3 : 1); i++) {
            sp_record_t r = game(0, RULES_END_MAX_PLY, 1, 1, g, 1);
            sp_ledger_add(&l, &r, g);
        }
    }
    CHECK(l.acc.n_gens == SP_LEDGER_GENS && l.acc.games == SP_LEDGER_GENS + 5);
    CHECKF(sp_ledger_main_gen(&l) == 5, "main generation %lld", (long long)sp_ledger_main_gen(&l));
    db_cycle_metrics_t m;
    sp_ledger_metrics(&l, 0, 0, 0, &m); /* no time, no device counters */
    CHECK(isnan(m.positions_per_s) && isnan(m.evals_per_s) && isnan(m.avg_batch) && isnan(m.busy_pct));
    /* time but no batch in the window (its games searched in the last cycle's): no rates, not 0 */
    sp_ledger_sample(&l, 0, 0, 0.0, 0.5, 0);
    sp_ledger_metrics(&l, 1000000, 0, 0, &m);
    CHECKF(m.selfplay_s > 0 && isnan(m.positions_per_s) && isnan(m.evals_per_s) && isnan(m.avg_batch) &&
               isnan(m.busy_pct),
           "an empty window: %g s, %g positions/s, %g evals/s, batch %g, busy %g", m.selfplay_s, m.positions_per_s,
           m.evals_per_s, m.avg_batch, m.busy_pct);
    sp_ledger_free(&l);
    sp_ledger_free(NULL);
}

static void test_resume(void) {
    /* Model 2 published; cycles 3 and 4 have every game stored, cycle 5 has 3 of 10. */
    const int64_t stored[][2] = {{10, 100}, {12, 130}, {3, 33}};
    sp_ledger_t l;
    sp_ledger_init(&l, 6, 10);
    sp_ledger_resume(&l, 2, 400);
    l.total_games = 55; /* as the driver sets it */
    int k = 0;
    while (sp_ledger_stored(&l, stored[k][0], stored[k][1])) {
        CHECK(l.fill == 3 + k);
        sp_ledger_close(&l, 0);
        k++;
    }
    sp_ledger_begin(&l, 0, 0);
    CHECKF(k == 2 && l.fill == 5 && l.fill_games == 3 && l.fill_positions == 33, "closed %d, filling %lld with %lld",
           k, (long long)l.fill, (long long)l.fill_games);
    CHECK(l.latest == 2 && l.latest_steps == 400 && l.total_games == 55);
    int64_t c = -1;
    CHECKF(sp_ledger_trainable(&l, 0, &c) && c == 3, "stored cycles need no shard");
    sp_ledger_train(&l, 1);
    CHECK(sp_ledger_trainable(&l, 0, &c) && c == 4);
    sp_ledger_train(&l, 1);
    /* 7 more games close cycle 5. */
    for (int i = 0; i < 7; i++) {
        sp_record_t r = game(0, RULES_END_MAX_PLY, 1, 1, 3, 1);
        CHECK(sp_ledger_add(&l, &r, 3) == (i == 6));
    }
    CHECK(l.fill_games == 10 && l.fill_positions == 40 && l.total_games == 62 && l.acc.games == 7);
    sp_ledger_free(&l);

    /* Every cycle stored: nothing to play, the stored ones go to the trainer. */
    sp_ledger_init(&l, 2, 4);
    sp_ledger_resume(&l, 0, 0);
    CHECK(sp_ledger_stored(&l, 4, 40));
    sp_ledger_close(&l, 0);
    CHECK(sp_ledger_stored(&l, 4, 40));
    sp_ledger_close(&l, 0);
    CHECKF(!sp_ledger_stored(&l, 0, 0), "cycle 3 of --cycles 2 is past the run");
    CHECK(!sp_ledger_playing(&l) && !sp_ledger_done(&l) && l.n_closed == 2);
    sp_ledger_free(&l);
}

static void test_pause_and_eta(void) {
    sp_ledger_t l;
    sp_ledger_init(&l, 10, 8);
    sp_ledger_resume(&l, 0, 0);
    sp_ledger_begin(&l, 0, 0);
    /* filling 1 with model 0: 0 ahead */
    CHECK(!sp_ledger_too_far_ahead(&l, 0));
    /* the games self-play may finish: cycle 1's 8 (sync), and cycle 2's 8 too (--max-ahead 1) */
    CHECK(sp_ledger_games_allowed(&l, 0) == 8 && sp_ledger_games_allowed(&l, 1) == 16);
    CHECKF(sp_ledger_eta_s(&l, 5.0) < 0, "no game yet: the ETA is unknown");
    for (int i = 0; i < 2; i++) {
        sp_record_t r = game(0, RULES_END_MAX_PLY, 1, 1, 1, 1);
        sp_ledger_add(&l, &r, 1);
    }
    CHECK_NEAR(sp_ledger_eta_s(&l, 5.0), 15.0, 1e-9); /* 2 games in 5 s, 6 to go */
    CHECK(sp_ledger_games_allowed(&l, 0) == 6 && sp_ledger_games_allowed(&l, 1) == 14);
    CHECKF(sp_ledger_games_allowed(&l, 20) == 6 + 9 * 8, "no further than the target (cycle 10): %lld",
           (long long)sp_ledger_games_allowed(&l, 20));
    for (int c = 0; c < 2; c++) { /* closes 1 and 2: filling 3 with model 0 */
        while (!sp_ledger_add(&l, &(sp_record_t){.would_resign = COLOR_NB}, 1)) {}
        sp_ledger_close(&l, 0);
        sp_ledger_begin(&l, 0, 0);
    }
    CHECK(l.fill == 3);
    CHECK(sp_ledger_too_far_ahead(&l, 0) && sp_ledger_too_far_ahead(&l, 1));
    CHECKF(!sp_ledger_too_far_ahead(&l, 2), "cycle 3 is 2 ahead of model 0: --max-ahead 2 lets it play");
    CHECK(sp_ledger_games_allowed(&l, 0) == 0 && sp_ledger_games_allowed(&l, 1) == 0 &&
          sp_ledger_games_allowed(&l, 2) == 8);
    int64_t c = 0;
    while (sp_ledger_trainable(&l, 0, &c)) sp_ledger_train(&l, 1);
    sp_ledger_published(&l, 1); /* model 1 */
    CHECK(!sp_ledger_too_far_ahead(&l, 1) && sp_ledger_too_far_ahead(&l, 0));
    sp_ledger_published(&l, 2); /* model 2 */
    CHECK(!sp_ledger_too_far_ahead(&l, 0) && sp_ledger_games_allowed(&l, 0) == 8);
    sp_ledger_free(&l);
}

int main(void) {
    test_new_run();
    test_many_nets();
    test_resume();
    test_pause_and_eta();
    return t_done("test_ledger");
}
