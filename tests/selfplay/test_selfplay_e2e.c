/* test_selfplay_e2e.c - the whole loop in process (sp_main, as the command
 * line runs it): a new run plays two cycles with a tiny net and few visits,
 * trains and publishes models 1 and 2; then
 *   - check_run: every game is in its shard with its rows, shards verify,
 *     games replay legally and end as recorded, rows match the replay,
 *     models 0, 1, 2 exist and load, no orphan files, no pending intents;
 *   - the runs row holds the effective flags; cycle_metrics rows of both
 *     cycles hold their games and figures; games name the model that played;
 *   - cycle_metrics' resignation check (schema v3): false <= would-be
 *     resignations <= no-resign games, no no-resign game ended by
 *     resignation, the figures the log reports and the threshold in use;
 *     the resumed cycles play every game without resigning
 *     (--no-resign-fraction 1) at a threshold that every side falls below
 *     (a win probability of 0.95: the tiny nets' values stay near 0.5), so their no-resign games
 *     are their games, some would have resigned, and every drawn game with
 *     a would-be resigner is a false resignation;
 *   - the same command again has nothing to do and adds no game;
 *   - --cycles 4 --sync-train resumes: two more cycles, self-play pausing
 *     until each net is published; models 0..4, earlier games kept;
 *   - --eval-every 1: every published model c >= 1 played model c-1 (a
 *     matches row with W+D+L = --eval-games), the log has its eval line,
 *     and cycle_metrics holds the ladder Elo.
 * Run it under TSan (-DKOMA_SANITIZE=thread, OPENBLAS_NUM_THREADS=1) for
 * the worker / server / trainer / writer hand-offs.
 */
#include "sp_test.h"

#include "selfplay/driver.h"

#define GPC 6
#define MAX_PLY 48

/* sync: --sync-train, and every game without resigning (--no-resign-fraction 1)
 * at a threshold every side falls below (0.95; the default is 0.05), and two
 * games in flight (the fewest: one worker's two halves): a game is its majority
 * net's, and the games in flight when self-play pauses finish after it resumes,
 * so with 2 x 4 of them the first 6 to end (most moves played before the pause)
 * could fill cycle 4 with model 2's games (seen under load); with two, at most
 * those two and the games that end before the pause takes hold are, and the
 * rest of cycle 4 starts under model 3. */
static int run(const char *dir, int cycles, bool sync) {
    char cyc[16], run_dir[700];
    snprintf(cyc, sizeof cyc, "%d", cycles);
    snprintf(run_dir, sizeof run_dir, "%s", dir);
    char *threads = sync ? "1" : "2", *per_thread = sync ? "2" : "4";
    char *argv[] = {"selfplay", "--run", run_dir, "--cycles", cyc, "--games-per-cycle", "6", "--shard-games", "4",
                    "--threads", threads, "--games-per-thread", per_thread, "--leaves-per-game", "2", "--visits", "8",
                    "--visits-fast", "4", "--full-prob", "0.5", "--gumbel-m", "4", "--max-ply", "48", "--net", "1x8",
                    "--progress", "0", "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--batch", "16",
                    "--window-min", "200", "--seed", "7", "--cpu-threads", "1", "--train-threads", "1",
                    "--cache-mb", "1", "--random-opening", "2", "--eval-every", "1", "--eval-games", "2",
                    "--eval-visits", "8", "--sync-train", "--no-resign-fraction", "1", "--resign-threshold", "0.95",
                    NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - (sync ? 1 : 6);
    if (!sync) argv[argc] = NULL;
    return sp_main(argc, argv, 0);
}

/* The first column of the first row of query q on dir's koma.db (NAN: none, NULL). */
static double sql_double(const char *dir, const char *q) {
    char path[800];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    sqlite3 *s = NULL;
    double v = NAN;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(s, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
            sqlite3_column_type(st, 0) != SQLITE_NULL)
            v = sqlite3_column_double(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(s);
    return v;
}

static double metric(const char *dir, int cycle, const char *col) {
    char q[200];
    snprintf(q, sizeof q, "SELECT %s FROM cycle_metrics WHERE cycle = %d", col, cycle);
    return sql_double(dir, q);
}

/* Every net of the run carries the run's CPU seconds at publication, which
 * grow with the cycle across invocations (schema 6). */
static void check_cpu_seconds(const char *dir) {
    double unknown = sql_double(dir, "SELECT count(*) FROM models WHERE cpu_seconds IS NULL");
    double backwards = sql_double(dir, "SELECT count(*) FROM models a JOIN models b ON b.cycle = a.cycle + 1 "
                                       "WHERE b.cpu_seconds < a.cpu_seconds");
    double last = sql_double(dir, "SELECT cpu_seconds FROM models ORDER BY cycle DESC LIMIT 1");
    CHECKF(unknown == 0 && backwards == 0 && last > 0, "models' CPU seconds: %g unknown, %g going back, last %g", unknown,
           backwards, last);
}

/* Calls fn on every self-play game of the shards of cycle c. */
static void each_game_of_cycle(db_t *db, int c, void (*fn)(db_t *, const db_game_t *, void *), void *user) {
    db_shard_t *sh = NULL;
    int32_t n = 0;
    db_shards_recent(db, 0, &sh, &n);
    for (int32_t i = 0; i < n; i++) {
        if (sh[i].cycle != c) continue;
        db_game_list_t gl = {0};
        db_games_of_shard(db, sh[i].id, &gl);
        for (int64_t k = 0; k < gl.n; k++) fn(db, &gl.games[k], user);
        db_game_list_free(&gl);
    }
    free(sh);
}

typedef struct {
    int64_t resigned, drawn;
} ends_t;

static void count_ends(db_t *db, const db_game_t *g, void *user) {
    ends_t *e = user;
    (void)db;
    e->resigned += g->reason == DB_REASON_RESIGN;
    e->drawn += g->result == DB_RESULT_DRAW;
}

/* A game of cycle *user was played by a model of an earlier cycle. */
static void check_model_earlier(db_t *db, const db_game_t *g, void *user) {
    const int c = *(const int *)user;
    db_model_t m;
    memset(&m, 0, sizeof m);
    CHECKF(db_model_get(db, g->model_id, &m) == DB_OK && m.cycle < c, "cycle %d game %lld: model id %lld (cycle %d)", c,
           (long long)g->id, (long long)g->model_id, m.cycle);
}

/* Self-play games of cycle c that ended by resignation, and drawn ones. */
static int64_t resigned_games(db_t *db, int c, int64_t *drawn) {
    ends_t e = {0, 0};
    each_game_of_cycle(db, c, count_ends, &e);
    *drawn = e.drawn;
    return e.resigned;
}

/* The driver's log line for cycle c's resignation check (the last one). */
static int log_resign(const char *dir, int c, long long *nr, long long *wr, long long *fr) {
    char logp[800], key[64];
    snprintf(logp, sizeof logp, "%s/log", dir);
    snprintf(key, sizeof key, "cycle %d resignation: ", c);
    size_t n = 0;
    char *text = compat_read_file(logp, &n, NULL, 0);
    int found = 0;
    for (const char *p = text; p && (p = strstr(p, key)); p += strlen(key))
        found = sscanf(p + strlen(key), "%lld no-resign games, %lld would have resigned, %lld of them wrongly", nr,
                       wr, fr) == 3;
    free(text);
    return found;
}

/* The resignation figures of cycle c's metrics row (schema v3). */
static void check_resign_metrics(db_t *db, const char *dir, int c, double threshold, bool all_no_resign) {
    db_cycle_metrics_t m;
    if (db_cycle_metrics_get(db, c, &m) != DB_OK) {
        CHECKF(0, "cycle_metrics %d: %s", c, db_errmsg(db));
        return;
    }
    int64_t drawn = 0, games = m.black_wins + m.white_wins + m.draws, resigned = resigned_games(db, c, &drawn);
    fprintf(stderr, "cycle %d: %lld games, %lld resigned, %lld no-resign, %lld would resign, %lld false (threshold %g)\n",
            c, (long long)games, (long long)resigned, (long long)m.no_resign_games, (long long)m.would_resign,
            (long long)m.false_resign, m.resign_threshold);
    CHECKF(m.no_resign_games >= 0 && m.would_resign >= 0 && m.false_resign >= 0,
           "cycle_metrics %d: resignation figures not recorded (%lld %lld %lld)", c, (long long)m.no_resign_games,
           (long long)m.would_resign, (long long)m.false_resign);
    CHECKF(m.false_resign <= m.would_resign && m.would_resign <= m.no_resign_games && m.no_resign_games <= games,
           "cycle_metrics %d: %lld false <= %lld would <= %lld no-resign <= %lld games", c, (long long)m.false_resign,
           (long long)m.would_resign, (long long)m.no_resign_games, (long long)games);
    /* A no-resign game never ends by resignation. */
    CHECKF(m.no_resign_games + resigned <= games, "cycle %d: %lld no-resign games + %lld resigned > %lld games", c,
           (long long)m.no_resign_games, (long long)resigned, (long long)games);
    if (all_no_resign) {
        CHECKF(m.no_resign_games == GPC && resigned == 0, "cycle %d: %lld no-resign games, %lld resigned; want %d, 0",
               c, (long long)m.no_resign_games, (long long)resigned, GPC);
        /* A draw is no loss for the would-be resigner: at least the draws of
         * the games that had one are false resignations. */
        CHECKF(m.would_resign > 0, "cycle %d: no game would have resigned at threshold %g", c, threshold);
        CHECKF(m.false_resign >= drawn - (games - m.would_resign),
               "cycle %d: %lld false resignations, but %lld draws in %lld games of which %lld would have resigned", c,
               (long long)m.false_resign, (long long)drawn, (long long)games, (long long)m.would_resign);
    }
    CHECKF(m.resign_threshold == threshold, "cycle_metrics %d: threshold %g, want %g", c, m.resign_threshold, threshold);
    long long nr = -1, wr = -1, fr = -1;
    CHECKF(log_resign(dir, c, &nr, &wr, &fr), "the log has no resignation line for cycle %d", c);
    CHECKF(nr == m.no_resign_games && wr == m.would_resign && fr == m.false_resign,
           "cycle %d: the log says %lld/%lld/%lld, cycle_metrics %lld/%lld/%lld", c, nr, wr, fr,
           (long long)m.no_resign_games, (long long)m.would_resign, (long long)m.false_resign);
}

static void check_db_facts(const char *dir, int cycles) {
    char path[800], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) {
        CHECKF(0, "%s", err);
        return;
    }
    db_run_t r;
    memset(&r, 0, sizeof r);
    CHECKF(db_run_latest(db, &r) == DB_OK && !strcmp(r.command, "selfplay") && r.config &&
              strstr(r.config, "games-per-cycle = 6") && strstr(r.config, "net = 1x8"),
           "runs row: command '%s', config %.80s", r.command, r.config ? r.config : "(null)");
    db_run_clear(&r);
    for (int c = 1; c <= cycles; c++) {
        int64_t g = 0, p = 0;
        CHECKF(db_count(db, c, &g, &p) == DB_OK && g == GPC && p > 0, "cycle %d: %lld games, %lld positions", c,
               (long long)g, (long long)p);
        CHECKF(metric(dir, c, "games") == GPC, "cycle_metrics %d: games %g", c, metric(dir, c, "games"));
        CHECKF(metric(dir, c, "positions") == (double)p, "cycle_metrics %d: positions %g, committed %lld", c,
               metric(dir, c, "positions"), (long long)p);
        /* Rates measured in the cycle's window; a window with no evaluation has none (NAN: the driver,
         * held back on a loaded machine, closed this cycle in the same pass as the last one). The
         * first cycle's window always has its games' searches. */
        double eps = metric(dir, c, "evals_per_s"), bat = metric(dir, c, "avg_batch");
        double sps = metric(dir, c, "selfplay_s");
        CHECKF(sps > 0 && ((eps > 0 && bat >= 1) || (c > 1 && isnan(eps) && isnan(bat) &&
                                                      isnan(metric(dir, c, "positions_per_s")))),
               "cycle_metrics %d: evals/s %g batch %g selfplay_s %g", c, eps, bat, sps);
        CHECKF(metric(dir, c, "train_s") > 0, "cycle_metrics %d: train_s %g", c, metric(dir, c, "train_s"));
        double bw = metric(dir, c, "black_wins"), ww = metric(dir, c, "white_wins"), dr = metric(dir, c, "draws");
        CHECKF(bw + ww + dr == GPC, "cycle_metrics %d: results %g + %g + %g", c, bw, ww, dr);
        check_resign_metrics(db, dir, c, c <= 2 ? 0.05 : 0.95, c > 2);
        /* The games of cycle c were played by a model of an earlier cycle. */
        each_game_of_cycle(db, c, check_model_earlier, &c);
    }
    db_close(db);
}

/* W+D+L of the latest match of model `a` against model `b` (-1: none). */
static int match_games(const char *dir, int a, int b) {
    char path[800], q[400];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    sqlite3 *s = NULL;
    int v = -1;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        snprintf(q, sizeof q,
                 "SELECT m.wins + m.draws + m.losses FROM matches m JOIN models ma ON m.model_a = ma.id "
                 "JOIN models mb ON m.model_b = mb.id WHERE ma.cycle = %d AND mb.cycle = %d ORDER BY m.id DESC",
                 a, b);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(s, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(s);
    return v;
}

static void check_evals(const char *dir, int from, int to) {
    char logp[800], line[64];
    snprintf(logp, sizeof logp, "%s/log", dir);
    size_t n = 0;
    char *text = compat_read_file(logp, &n, NULL, 0);
    for (int c = from; c <= to; c++) {
        CHECKF(match_games(dir, c, c - 1) == 2, "model %d vs %d: %d match games, want 2", c, c - 1,
               match_games(dir, c, c - 1));
        snprintf(line, sizeof line, "eval: model %d vs %d: +", c, c - 1);
        CHECKF(text && strstr(text, line), "the log has no '%s' line", line);
        CHECKF(isfinite(metric(dir, c, "elo")), "cycle_metrics %d: elo %g", c, metric(dir, c, "elo"));
    }
    free(text);
}

typedef struct {
    int model;
    int64_t n;
} by_model_t;

static void count_by_model(db_t *db, const db_game_t *g, void *user) {
    by_model_t *b = user;
    db_model_t m;
    if (db_model_get(db, g->model_id, &m) == DB_OK && m.cycle == b->model) b->n++;
}

/* Games of shard cycle `cycle` whose model is of cycle `model`. */
static int64_t model_games(const char *dir, int cycle, int model) {
    char path[800], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) return -1;
    by_model_t b = {model, 0};
    each_game_of_cycle(db, cycle, count_by_model, &b);
    db_close(db);
    return b.n;
}

int main(void) {
    const char *dir = t_scratch("sp_e2e");
    char d[700];
    snprintf(d, sizeof d, "%s/run", dir);
    int64_t t0 = compat_now_ms();
    int rc = run(d, 2, false);
    CHECKF(rc == SP_EXIT_DONE, "selfplay --cycles 2 exited %d", rc);
    fprintf(stderr, "two cycles: %.1f s\n", (double)(compat_now_ms() - t0) / 1000.0);
    run_state_t rs;
    check_run(d, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == 2 && rs.models == 3, "latest model %d, %lld models", rs.latest_cycle, (long long)rs.models);
    CHECKF(rs.games == 2 * GPC && rs.replayed == rs.games, "%lld games, %lld replayed", (long long)rs.games,
           (long long)rs.replayed);
    CHECKF(rs.shards == 4, "%lld shards, want 2 per cycle (4 + 2 games)", (long long)rs.shards);
    CHECKF(rs.with_policy > 0 && rs.with_policy < rs.positions, "%lld of %lld rows with a policy target",
           (long long)rs.with_policy, (long long)rs.positions);
    check_db_facts(d, 2);
    check_evals(d, 1, 2);

    /* Done already: nothing is played. */
    rc = run(d, 2, false);
    CHECKF(rc == SP_EXIT_DONE, "second run exited %d", rc);
    run_state_t rs2;
    check_run(d, CHECK_RUN_CLEAN, MAX_PLY, &rs2);
    CHECKF(rs2.games == rs.games && rs2.models == 3, "a finished run grew: %lld games, %lld models", (long long)rs2.games,
           (long long)rs2.models);

    /* Two more cycles with --sync-train (two games in flight, see run): self-play
     * pauses after cycle 3 until model 3 is published, so cycle 4's games are
     * (mostly) model 3's. */
    rc = run(d, 4, true);
    CHECKF(rc == SP_EXIT_DONE, "--cycles 4 --sync-train exited %d", rc);
    check_run(d, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, MAX_PLY, &rs2);
    CHECKF(rs2.latest_cycle == 4 && rs2.games == 4 * GPC, "after --cycles 4: model %d, %lld games", rs2.latest_cycle,
           (long long)rs2.games);
    check_db_facts(d, 4);
    check_cpu_seconds(d);
    check_evals(d, 3, 4);
    char logp[800];
    snprintf(logp, sizeof logp, "%s/log", d);
    size_t n = 0;
    char *text = compat_read_file(logp, &n, NULL, 0);
    CHECKF(text && strstr(text, "self-play paused: cycle 4 waits for model 3") && strstr(text, "self-play resumed with model 3"),
           "the log does not show the pause for model 3");
    free(text);
    int64_t by3 = model_games(d, 4, 3);
    fprintf(stderr, "cycle 4: %lld of %d games by model 3\n", (long long)by3, GPC);
    CHECKF(by3 > 0, "no game of cycle 4 was played by model 3");
    if (!atomic_load(&g_fail)) t_rm_rf(dir);
    return t_done("test_selfplay_e2e");
}
