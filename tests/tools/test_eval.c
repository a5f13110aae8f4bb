/* test_eval.c - the in-loop evaluation (match/play.h) with tiny random
 * nets: the games finish, W + D + L = games, colours alternate, the result
 * does not depend on the number of threads, the match and its games are
 * stored in the run database (a row opened first, games as they end, W/D/L
 * and Elo at the end: every row agrees with its games), and the ladder
 * chains the cycles. Bad inputs
 * fail with a message that names the file; a failed backend (KOMA_FAULT)
 * fails the evaluation with its cause. */
#include "engine/encode.h"
#include "nn/fault.h"
#include "nn/net.h"
#include "nn/weights.h"
#include "match/play.h"
#include "tools_test.h"

/* models/cycle-NNNN.safetensors, a 1x8 net from seed, registered as cycle c. */
static void make_model(db_t *db, int cycle, uint64_t seed, int planes) {
    char err[512], rel[64];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t nc = {1, 8, NN_ACT_RELU, planes, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = nn_net_new(be, &nc, seed, err, sizeof err);
    KOMA_ASSERT(net);
    snprintf(rel, sizeof rel, "models/cycle-%04d.safetensors", cycle);
    KOMA_ASSERT(nn_weights_save(net, NULL, t_path(rel), err, sizeof err) == 0);
    nn_net_free(net);
    nn_backend_free(be);
    if (!db) return;
    db_model_t m;
    memset(&m, 0, sizeof m);
    m.cycle = cycle;
    snprintf(m.path, sizeof m.path, "%s", rel);
    strcpy(m.xxh3, "0123456789abcdef");
    strcpy(m.arch, "1x8");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    KOMA_ASSERT(db_model_insert(db, &m) == DB_OK);
}

int main(void) {
    t_scratch("test_eval");
    char err[DB_ERR_MAX];
    KOMA_ASSERT(compat_mkdir_p(t_path("models"), err, sizeof err) == 0);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(t_path("koma.db"), 0, &db, err, sizeof err) == DB_OK);
    make_model(db, 0, 101, ENC_PLANES);
    make_model(db, 1, 202, ENC_PLANES);
    make_model(db, 2, 303, ENC_PLANES);
    db_close(db);
    make_model(NULL, 7, 707, ENC_PLANES); /* a file that is not in the models table */
    make_model(NULL, 8, 808, 10);         /* a net with other input planes */

    match_play_config_t cfg;
    match_play_config_default(&cfg);
    cfg.games = 4;
    cfg.visits = 8;
    cfg.max_ply = 60;
    cfg.temp_plies = 6;
    cfg.seed = 42;

    /* Play only (no run dir): W + D + L = games, colours alternate, ends named. */
    match_play_result_t r1, r3;
    cfg.threads = 1;
    int rc = match_play_nets(NULL, t_path("models/cycle-0001.safetensors"), t_path("models/cycle-0000.safetensors"), &cfg,
                         &r1, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CHECK(rc == 0);
    CHECK(r1.games == 4 && r1.wins + r1.draws + r1.losses == 4);
    CHECK(r1.a_black_wins + r1.a_white_wins == r1.wins);
    int ends = 0;
    for (int e = 0; e < RULES_END_NB; e++) ends += r1.reasons[e];
    CHECK(ends == 4 && r1.reasons[RULES_END_NONE] == 0 && r1.reasons[RULES_END_TIME] == 0);
    CHECK(r1.reasons[RULES_END_ILLEGAL_MOVE] == 0); /* a search never plays an illegal move */
    CHECK(r1.avg_plies > 0 && r1.avg_plies <= 60);
    CHECK(r1.match_id == 0 && r1.cycle_a == -1 && r1.ladder.cycle == -1);
    CHECK(isfinite(r1.elo.elo));
    fprintf(stderr, "eval 1 vs 0: +%d =%d -%d, %.1f plies, Elo %+.1f [%+.1f, %+.1f], %.2f s\n", r1.wins, r1.draws,
            r1.losses, r1.avg_plies, r1.elo.elo, r1.elo.elo_lo, r1.elo.elo_hi, r1.seconds);
    /* The same games with three threads: every game has its own seed. */
    cfg.threads = 3;
    CHECK(match_play_nets(NULL, t_path("models/cycle-0001.safetensors"), t_path("models/cycle-0000.safetensors"), &cfg,
                      &r3, err, sizeof err) == 0);
    CHECK(r3.wins == r1.wins && r3.draws == r1.draws && r3.losses == r1.losses);
    CHECK_NEAR(r3.avg_plies, r1.avg_plies, 1e-9);

    /* Stored in the run: paths relative to the run directory, as in the models table. */
    match_play_result_t r;
    cfg.threads = 2;
    rc = match_play_nets(t_dir, "models/cycle-0001.safetensors", "models/cycle-0000.safetensors", &cfg, &r, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CHECK(rc == 0);
    CHECK(r.wins == r1.wins && r.draws == r1.draws && r.losses == r1.losses);
    CHECK(r.match_id > 0 && r.cycle_a == 1 && r.cycle_b == 0);
    CHECK(r.ladder.cycle == 1 && r.ladder.from_cycle == 0);
    CHECK_NEAR(r.ladder.elo, r.elo.elo, 1e-9);
    const char *dbp = t_path("koma.db");
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches") == 1);
    CHECK(t_sql_int(dbp, "SELECT wins + draws + losses FROM matches") == 4);
    CHECK(t_sql_int(dbp, "SELECT wins FROM matches") == r.wins);
    CHECK(t_sql_int(dbp, "SELECT cycle FROM matches") == 1);
    CHECK(t_sql_int(dbp, "SELECT model_b = (SELECT id FROM models WHERE cycle = 0) FROM matches") == 1);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE match_id = (SELECT id FROM matches)") == 4);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE plies < 1 OR plies > 60") == 0);
    /* a is Black in games 1 and 3: two games each way. */
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE black LIKE 'cycle 1%'") == 2);

    /* The whole-signature call (full paths under the run dir work too), and
     * the ladder chaining cycle 2 on cycle 1. */
    rc = match_play(t_dir, t_path("models/cycle-0002.safetensors"), "models/cycle-0001.safetensors", 2, 4, 9, &r,
                       err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CHECK(rc == 0 && r.games == 2 && r.wins + r.draws + r.losses == 2 && r.cycle_a == 2 && r.cycle_b == 1);
    db = NULL;
    KOMA_ASSERT(db_open(dbp, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    ref_ladder_point_t *pts = NULL;
    int32_t n = 0;
    CHECK(ref_elo_ladder(db, &pts, &n) == DB_OK && n == 3);
    if (n == 3) {
        CHECK(pts[0].cycle == 0 && pts[1].cycle == 1 && pts[2].cycle == 2);
        CHECK_NEAR(pts[2].elo, pts[1].elo + r.elo.elo, 1e-9);
        CHECK_NEAR(r.ladder.elo, pts[2].elo, 1e-9);
    }
    free(pts);
    db_close(db);

    /* By cycle numbers, as the driver calls it: cycle 2 against 0. */
    cfg.games = 2;
    rc = match_play_cycles(t_dir, 2, 0, &cfg, &r, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    CHECK(rc == 0 && r.cycle_a == 2 && r.cycle_b == 0 && r.games == 2 && r.match_id > 0);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches WHERE cycle = 2") == 2);
    CHECK(match_play_cycles(t_dir, 5, 0, &cfg, &r, err, sizeof err) != 0 && strstr(err, "cycle 5"));

    /* A net that is not registered: its games are stored under a matches row
     * with no model (players named by file), not rated in the ladder. */
    CHECK(match_play(t_dir, "models/cycle-0007.safetensors", "models/cycle-0000.safetensors", 2, 4, 1, &r, err,
                        sizeof err) == 0);
    CHECK(r.match_id > 0 && r.cycle_a == -1 && r.cycle_b == 0 && r.games == 2);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches") == 4);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM games WHERE match_id = "
                         "(SELECT id FROM matches WHERE model_a IS NULL AND engine_a <> '')") == 2);
    char q[200];
    snprintf(q, sizeof q, "SELECT count(*) FROM matches WHERE id = %lld AND model_a IS NULL AND cycle IS NULL AND "
                          "engine_a = 'cycle-0007.safetensors' AND model_b IS NOT NULL", (long long)r.match_id);
    CHECK(t_sql_int(dbp, q) == 1);
    /* A net against its own file: the players are told apart, so the row's
     * W/D/L follow the games. */
    CHECK(match_play(t_dir, "models/cycle-0001.safetensors", "models/cycle-0001.safetensors", 2, 4, 3, &r, err,
                        sizeof err) == 0);
    snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE match_id = %lld AND (black LIKE '%% (a)' OR "
                          "white LIKE '%% (a)')", (long long)r.match_id);
    CHECK(r.match_id > 0 && t_sql_int(dbp, q) == 2);
    /* Every row is finished: as many games as W + D + L (the totals the games
     * added up to while the match ran), and an Elo. */
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches m WHERE elo IS NULL OR wins + draws + losses <> "
                         "(SELECT count(*) FROM games g WHERE g.match_id = m.id)") == 0);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches m WHERE wins <> (SELECT count(*) FROM games g WHERE "
                         "g.match_id = m.id AND ((g.black = m.engine_a AND g.result = 1) OR "
                         "(g.white = m.engine_a AND g.result = -1)))") == 0);

    /* Failures name the file. */
    err[0] = 0;
    CHECK(match_play(t_dir, "models/missing.safetensors", "models/cycle-0000.safetensors", 2, 4, 1, &r, err,
                        sizeof err) != 0);
    CHECK(strstr(err, "missing.safetensors") != NULL);
    err[0] = 0;
    CHECK(match_play(t_dir, "models/cycle-0008.safetensors", "models/cycle-0000.safetensors", 2, 4, 1, &r, err,
                        sizeof err) != 0);
    CHECK(strstr(err, "cycle-0008") != NULL);
    fprintf(stderr, "(expected) %s\n", err);
    CHECK(match_play(t_dir, "models/cycle-0001.safetensors", "models/cycle-0000.safetensors", 0, 4, 1, &r, err,
                        sizeof err) != 0);

    /* A failed backend fails the evaluation with its cause (an injected
     * fault in a game thread's forward, past the two warm-up forwards). */
    char ferr[256];
    KOMA_ASSERT(nn_fault_set("conv_fwd:200", ferr, sizeof ferr) == 0);
    err[0] = 0;
    CHECKF(match_play_nets(NULL, t_path("models/cycle-0001.safetensors"), t_path("models/cycle-0000.safetensors"), &cfg,
                       &r, err, sizeof err) != 0 && strstr(err, "evaluation: the cpu backend failed") &&
               strstr(err, "injected fault: conv_fwd call 200"),
           "evaluation on a failed backend: %s", err);
    nn_fault_set(NULL, NULL, 0);

    int rc2 = t_done("test_eval");
    if (rc2 == 0) t_rm_rf(t_dir);
    return rc2;
}
