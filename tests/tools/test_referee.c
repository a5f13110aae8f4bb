/* test_referee.c - the referee (match/referee.h) on its own and through
 * usi-match with scripted fake engines: illegal and unreadable moves lose,
 * fourfold repetition draws, perpetual check loses for the checker, a false
 * declaration loses and a true one wins, resignation, the move limit,
 * time-outs, crashes, and the CSA ending of each; match games stored one
 * by one as games rows of a matches row, W/D/L following them, no Elo until
 * the row is finished.
 *
 *   test_referee USI_MATCH FAKE_USI
 */
#include "match/referee.h"
#include "tools_test.h"

static const char *g_match, *g_fake;

/* Black can declare: king on 1a, 2 rooks, 2 bishops, 4 golds, 4 silvers in
 * White's camp (28 points, 12 pieces); White's king far away. */
#define SFEN_DECLARE "8K/SSSS5/RRBBGGGG1/9/9/9/9/9/4k4 b - 1"
/* Black's rook can check White's king on 1a/1b for ever. */
#define SFEN_PERPETUAL "8k/6R2/9/9/9/9/9/9/K8 b - 1"
/* G*5b mates. */
#define SFEN_MATE1 "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"

static ref_game_t *start(const char *s, int32_t max_ply) {
    static ref_game_t *g;
    if (!g) g = ref_game_new();
    char err[256];
    int rc = ref_game_start(g, s, max_ply, err, sizeof err);
    if (rc != 0) fprintf(stderr, "start '%s': %s\n", s, err);
    CHECK(rc == 0);
    return g;
}

static void play_all(ref_game_t *g, const char *moves) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", moves);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) ref_game_play_usi(g, t);
}

/* ---- the referee on its own -------------------------------------------------------- */
static void test_unit(void) {
    ref_game_t *g = start("startpos", 320);
    CHECK(!ref_game_over(g) && ref_game_side(g) == COLOR_BLACK && strcmp(g->start, "startpos") == 0);
    /* An illegal move (pawn two squares) loses for the mover. */
    CHECK(ref_game_play_usi(g, "7g7e") == RULES_END_ILLEGAL_MOVE);
    CHECK(g->winner == COLOR_WHITE && g->offender == COLOR_BLACK && ref_game_result(g) == DB_RESULT_WHITE_WIN);
    CHECK(strcmp(ref_csa_ending(g), "%ILLEGAL_MOVE") == 0 && strstr(g->detail, "7g7e"));
    /* Nothing changes after the end. */
    CHECK(ref_game_play_usi(g, "7g7f") == RULES_END_ILLEGAL_MOVE && g->n_moves == 0);
    /* Unreadable and empty answers, White's turn. */
    g = start("startpos", 320);
    CHECK(ref_game_play_usi(g, " 7g7f ") == RULES_END_NONE && g->n_moves == 1);
    CHECK(ref_game_play_usi(g, "xyzzy") == RULES_END_ILLEGAL_MOVE && g->winner == COLOR_BLACK);
    g = start("startpos", 320);
    CHECK(ref_game_play_usi(g, "") == RULES_END_ILLEGAL_MOVE && g->winner == COLOR_WHITE);
    /* Leaving the king in check, nifu, pawn-drop mate are illegal too. */
    g = start("4k4/9/9/9/9/9/9/4r4/4K4 b P 1", 320); /* Black in check from the rook on 5h */
    CHECK(ref_game_play_usi(g, "P*1e") == RULES_END_ILLEGAL_MOVE);
    g = start("4k4/9/9/9/9/9/4P4/9/4K4 b P 1", 320);
    CHECK(ref_game_play_usi(g, "P*5e") == RULES_END_ILLEGAL_MOVE); /* nifu */
    g = start("4kg3/4g4/9/9/9/9/9/9/4K4 w - 1", 320);
    CHECK(ref_game_play_usi(g, "5b5c") == RULES_END_NONE); /* legal: gold steps down */

    /* Fourfold repetition: the 12th ply repeats the start for the fourth time. */
    g = start("startpos", 320);
    play_all(g, "5i5h 5a5b 5h5i 5b5a 5i5h 5a5b 5h5i 5b5a 5i5h 5a5b 5h5i");
    CHECK(!ref_game_over(g) && g->n_moves == 11);
    CHECK(ref_game_play_usi(g, "5b5a") == RULES_END_SENNICHITE);
    CHECK(g->winner == COLOR_NB && ref_game_result(g) == DB_RESULT_DRAW && strcmp(ref_csa_ending(g), "%SENNICHITE") == 0);

    /* Perpetual check: Black checks with every move; Black loses. */
    g = start(SFEN_PERPETUAL, 320);
    play_all(g, "3b3a 1a1b 3a3b 1b1a 3b3a 1a1b 3a3b 1b1a 3b3a 1a1b 3a3b");
    CHECK(!ref_game_over(g));
    CHECK(ref_game_play_usi(g, "1b1a") == RULES_END_PERPETUAL_CHECK);
    CHECK(g->winner == COLOR_WHITE && g->offender == COLOR_BLACK);
    CHECK(strcmp(ref_csa_ending(g), "%+ILLEGAL_ACTION") == 0);

    /* Declaration: a true claim wins, a false one loses; never automatic. */
    g = start(SFEN_DECLARE, 320);
    CHECK(!ref_game_over(g)); /* the referee does not declare for Black */
    CHECK(ref_game_play_usi(g, "win") == RULES_END_DECLARATION && g->winner == COLOR_BLACK);
    CHECK(strcmp(ref_csa_ending(g), "%KACHI") == 0);
    g = start(SFEN_DECLARE, 320);
    CHECK(ref_game_play_usi(g, "9c9d") == RULES_END_NONE); /* plays on instead */
    g = start("startpos", 320);
    CHECK(ref_game_play_usi(g, "win") == RULES_END_ILLEGAL_MOVE && g->winner == COLOR_WHITE);
    CHECK(strstr(g->detail, "declaration") != NULL);

    /* Resignation. */
    g = start("startpos moves 7g7f", 320);
    CHECK(g->n_moves == 1 && ref_game_side(g) == COLOR_WHITE);
    CHECK(ref_game_play_usi(g, "resign") == RULES_END_RESIGN && g->winner == COLOR_BLACK);
    CHECK(strcmp(ref_csa_ending(g), "%TORYO") == 0);

    /* Mate: the side to move has no legal move. */
    g = start(SFEN_MATE1, 320);
    CHECK(ref_game_play_usi(g, "G*5b") == RULES_END_CHECKMATE && g->winner == COLOR_BLACK);
    CHECK(strcmp(ref_csa_ending(g), "%TSUMI") == 0);

    /* The move limit: a draw after exactly max_ply moves; a mate on the last
     * move still counts. */
    g = start("startpos", 4);
    play_all(g, "7g7f 3c3d 2g2f");
    CHECK(!ref_game_over(g));
    CHECK(ref_game_play_usi(g, "8c8d") == RULES_END_MAX_PLY && g->winner == COLOR_NB);
    CHECK(strcmp(ref_csa_ending(g), "%JISHOGI") == 0);
    g = start("4k4/9/4P4/9/9/9/9/9/4K4 b G 9", 8); /* ply 9: the 9th move would be past the limit of 8 */
    CHECK(ref_game_over(g) && g->end == RULES_END_MAX_PLY);
    g = start("4k4/9/4P4/9/9/9/9/9/4K4 b G 8", 8);
    CHECK(!ref_game_over(g));
    CHECK(ref_game_play_usi(g, "G*5b") == RULES_END_CHECKMATE);

    /* Time and crashes, reported by the caller. */
    g = start("startpos moves 7g7f", 320);
    CHECK(ref_game_forfeit(g, COLOR_WHITE, RULES_END_TIME, false, "slow") == RULES_END_TIME);
    CHECK(g->winner == COLOR_BLACK && strcmp(ref_csa_ending(g), "%TIME_UP") == 0);
    g = start("startpos", 320);
    ref_game_forfeit(g, COLOR_BLACK, RULES_END_ILLEGAL_MOVE, true, "gone");
    CHECK(g->winner == COLOR_WHITE && g->crashed && strcmp(ref_csa_ending(g), "%+ILLEGAL_ACTION") == 0);

    /* Start positions: SFEN with and without "sfen ", with moves; bad ones. */
    char err[256];
    CHECK(ref_game_start(g, "sfen " SFEN_STARTPOS " moves 7g7f 3c3d", 320, err, sizeof err) == 0 && g->n_moves == 2);
    CHECK(ref_game_start(g, "startpos moves 7g7f 7g7f", 320, err, sizeof err) != 0);
    CHECK(ref_game_start(g, "lnsgkgsnl/9 b - 1", 320, err, sizeof err) != 0 && err[0]);
    CHECK(ref_game_start(g, "", 320, err, sizeof err) != 0);
    char *mv = ref_game_moves_usi(start("startpos moves 7g7f 3c3d 8h2b+", 320));
    CHECK(mv && strcmp(mv, "7g7f 3c3d 8h2b+") == 0);
    free(mv);

    /* Reasons for the database. */
    CHECK(ref_db_reason(RULES_END_PERPETUAL_CHECK) == DB_REASON_PERPETUAL_CHECK);
    CHECK(ref_db_reason(RULES_END_TIME) == DB_REASON_TIME);
    CHECK(ref_db_reason(RULES_END_NONE) == DB_REASON_ABORT);
}

/* ---- match games in the database --------------------------------------------------------- */
static void test_store(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    CHECK(db_open(t_path("store.db"), 0, &db, err, sizeof err) == DB_OK);
    if (!db) return;
    db_model_t mod;
    memset(&mod, 0, sizeof mod);
    snprintf(mod.path, sizeof mod.path, "models/cycle-0000.safetensors");
    snprintf(mod.xxh3, sizeof mod.xxh3, "0123456789abcdef");
    mod.loss_policy = mod.loss_value = mod.loss_legal = mod.loss_total = NAN;
    CHECK(db_model_insert(db, &mod) == DB_OK);

    /* A match as usi-match records it: the row first (A = the net of the
     * run, named as in its games), then each game as it ends. */
    db_match_t row;
    memset(&row, 0, sizeof row);
    row.cycle = 0;
    row.model_a = mod.id;
    snprintf(row.engine_a, sizeof row.engine_a, "engine1: x");
    snprintf(row.engine_b, sizeof row.engine_b, "engine2: y");
    snprintf(row.opponent, sizeof row.opponent, "y");
    snprintf(row.settings, sizeof row.settings, "usi-match byoyomi 100, 3 games");
    CHECK(db_match_begin(db, &row) == DB_OK && row.id > 0);
    /* White resigns after 7g7f: Black wins. Played twice, colours swapped. */
    ref_game_t *g = start("startpos moves 7g7f", 320);
    ref_game_resign(g);
    CHECK(ref_store_match_game(db, row.id, g, "engine2: y", "engine1: x") == DB_OK);
    CHECK(ref_store_match_game(db, row.id, g, "engine1: x", "engine2: y") == DB_OK);
    g = start("startpos", 4);
    play_all(g, "7g7f 3c3d 2g2f 8c8d");
    CHECK(ref_store_match_game(db, row.id, g, "engine2: y", "engine1: x") == DB_OK);
    /* W/D/L from engine_a's side after every game; no Elo until finished. */
    db_match_t *ms = NULL;
    int32_t n = 0;
    CHECK(db_matches_list(db, -1, &ms, &n) == DB_OK && n == 1);
    if (n == 1) {
        CHECK(ms[0].model_a == mod.id && ms[0].model_b == 0 && ms[0].cycle == 0 && ms[0].games == 3);
        CHECK(strcmp(ms[0].engine_a, "engine1: x") == 0 && strcmp(ms[0].engine_b, "engine2: y") == 0);
        CHECK(ms[0].wins == 1 && ms[0].draws == 1 && ms[0].losses == 1 && isnan(ms[0].elo));
    }
    free(ms);
    ref_ladder_point_t *pts = NULL;
    int32_t np = 0;
    CHECK(ref_elo_ladder(db, &pts, &np) == DB_OK && np == 0);
    free(pts);
    db_game_list_t gl;
    CHECK(db_match_games_list(db, row.id, &gl) == DB_OK && gl.n == 3);
    if (gl.n == 3) { /* in the order stored */
        CHECK(strcmp(gl.games[0].black, "engine2: y") == 0 && strcmp(gl.games[0].white, "engine1: x") == 0);
        CHECK(gl.games[0].result == DB_RESULT_BLACK_WIN && gl.games[0].reason == DB_REASON_RESIGN);
        CHECK(gl.games[0].plies == 1 && strcmp(gl.games[0].moves, "7g7f") == 0);
        CHECK(strcmp(gl.games[0].start_sfen, "startpos") == 0 && strstr(gl.games[0].detail, "resigned"));
        CHECK(gl.games[0].id < 0 && gl.games[0].shard_id == 0 && gl.games[0].match_id == row.id);
        CHECK(gl.games[2].reason == DB_REASON_MAX_PLY && gl.games[2].result == DB_RESULT_DRAW &&
              gl.games[2].plies == 4);
    }
    db_game_list_free(&gl);
    db_summary_t sum;
    CHECK(db_summary(db, &sum) == DB_OK && sum.games == 0 && sum.match_games == 3 && sum.matches == 1);
    CHECK(sum.match_reasons[DB_REASON_RESIGN] == 2 && sum.match_reasons[DB_REASON_MAX_PLY] == 1);
    /* Finished: the same totals, and the Elo. */
    ref_elo_t e;
    ref_elo_trinomial(1, 1, 1, &e);
    row.wins = row.draws = row.losses = 1;
    row.elo = e.elo, row.elo_lo = e.elo_lo, row.elo_hi = e.elo_hi;
    CHECK(db_match_finish(db, &row) == DB_OK);
    CHECK(db_match_get(db, row.id, &row) == DB_OK && row.games == 3 && row.wins == 1);
    CHECK_NEAR(row.elo, 0.0, 1e-9);
    CHECK(isfinite(row.elo_lo) && row.elo_lo < 0 && row.elo_hi > 0);

    /* The id-based call, for a match opened with db_match_begin. */
    db_match_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.engine_a, sizeof m.engine_a, "alpha");
    snprintf(m.engine_b, sizeof m.engine_b, "beta");
    CHECK(db_match_begin(db, &m) == DB_OK && m.id > 0);
    g = start(SFEN_MATE1, 320);
    ref_game_play_usi(g, "G*5b");
    CHECK(ref_store_match_game(db, m.id, g, "beta", "alpha") == DB_OK);
    CHECK(db_match_get(db, m.id, &m) == DB_OK && m.wins == 0 && m.losses == 1 && m.games == 1 && isnan(m.elo));
    CHECK(ref_store_match_game(db, 999, g, "beta", "alpha") == DB_NOTFOUND);
    db_close(db);
}

/* ---- through usi-match ----------------------------------------------------------------- */
typedef struct {
    int n;
    int result[8], plies[8];
    char reason[8][32], black[8][96], detail[8][200];
} rows_t;

static void collect(int nc, const char *const *c, void *user) {
    rows_t *r = user;
    if (r->n >= 8 || nc < 6) return;
    r->result[r->n] = atoi(c[0]);
    snprintf(r->reason[r->n], sizeof r->reason[0], "%s", c[1]);
    r->plies[r->n] = atoi(c[2]);
    snprintf(r->black[r->n], sizeof r->black[0], "%s", c[3]);
    snprintf(r->detail[r->n], sizeof r->detail[0], "%s", c[5]);
    r->n++;
}

/* Runs usi-match on the fakes with fake arguments a1/a2 and extra flags;
 * returns its exit status and the games it recorded. */
static int run_case(const char *name, const char *a1, const char *a2, const char *const *extra, rows_t *rows) {
    char e1[1200], e2[1200], db[900], csa[900];
    snprintf(e1, sizeof e1, "\"%s\" --name one %s", g_fake, a1);
    snprintf(e2, sizeof e2, "\"%s\" --name two %s", g_fake, a2);
    snprintf(db, sizeof db, "%s", t_path(name));
    strcat(db, ".db");
    snprintf(csa, sizeof csa, "%s", t_path(name));
    const char *argv[48] = {g_match, "--engine1", e1, "--engine2", e2, "--db", db, "--csa-dir", csa, "--engine-stderr", ""};
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 46; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    fprintf(stderr, "--- case %s\n", name);
    int st = t_run(argv);
    memset(rows, 0, sizeof *rows);
    if (compat_file_exists(db))
        t_sql_rows(db,
                   "SELECT result, reason, plies, black, white, detail FROM games WHERE match_id IS NOT NULL "
                   "ORDER BY id DESC", /* match games count down from -1: in the order stored */
                   collect, rows);
    return st;
}

static t_csa_t g_csa;

static const char *csa_ending(const char *name, int game) {
    char p[1000];
    snprintf(p, sizeof p, "%s/game-%04d.csa", t_path(name), game);
    if (t_csa_read(p, &g_csa) != 0) return "(unreadable)";
    CHECK(g_csa.bad_line == 0);
    return g_csa.ending;
}

static void test_match_ends(void) {
    rows_t r;
    const char *one[] = {"--games", "1", "--byoyomi", "2000", NULL};

    /* engine1 (Black in game 1) plays an illegal move at once. */
    CHECK(run_case("illegal", "--script 7g7e", "", one, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == -1 && strcmp(r.reason[0], "illegal_move") == 0 && r.plies[0] == 0);
    CHECK(strcmp(csa_ending("illegal", 1), "%ILLEGAL_MOVE") == 0);
    /* ... or something that is no move at all. */
    CHECK(run_case("garbage", "--script 7g7f,garbage", "", one, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == -1 && strcmp(r.reason[0], "illegal_move") == 0 && r.plies[0] == 2);

    /* Fourfold repetition. */
    CHECK(run_case("sennichite", "--script 5i5h,5h5i,5i5h,5h5i,5i5h,5h5i", "--script 5a5b,5b5a,5a5b,5b5a,5a5b,5b5a",
                   one, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == 0 && strcmp(r.reason[0], "sennichite") == 0 && r.plies[0] == 12);
    CHECK(strcmp(csa_ending("sennichite", 1), "%SENNICHITE") == 0 && g_csa.n_moves == 12);

    /* Perpetual check by engine1 (Black) from an opening SFEN: engine1 loses. */
    FILE *f = fopen(t_path("perpetual.sfen"), "w");
    fprintf(f, "# one opening\n%s\n", SFEN_PERPETUAL);
    fclose(f);
    const char *perp[] = {"--games", "1", "--byoyomi", "2000", "--openings", t_path("perpetual.sfen"), NULL};
    CHECK(run_case("perpetual", "--script 3b3a,3a3b,3b3a,3a3b,3b3a,3a3b", "--script 1a1b,1b1a,1a1b,1b1a,1a1b,1b1a",
                   perp, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == -1 && strcmp(r.reason[0], "perpetual_check") == 0 && r.plies[0] == 12);
    CHECK(strcmp(csa_ending("perpetual", 1), "%+ILLEGAL_ACTION") == 0);

    /* A false declaration loses; a true one wins. */
    CHECK(run_case("false_win", "--script win", "", one, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == -1 && strcmp(r.reason[0], "illegal_move") == 0);
    CHECK(strstr(r.detail[0], "declaration") != NULL);
    f = fopen(t_path("declare.sfen"), "w");
    fprintf(f, "%s\n", SFEN_DECLARE);
    fclose(f);
    const char *decl[] = {"--games", "1", "--byoyomi", "2000", "--openings", t_path("declare.sfen"), NULL};
    CHECK(run_case("true_win", "--declare", "", decl, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == 1 && strcmp(r.reason[0], "declaration") == 0 && r.plies[0] == 0);
    CHECK(strcmp(csa_ending("true_win", 1), "%KACHI") == 0);
    /* The referee does not declare for an engine that plays on. */
    CHECK(run_case("no_claim", "--script 9c9d", "--script resign", decl, &r) == 0);
    CHECK(r.n == 1 && r.result[0] == 1 && strcmp(r.reason[0], "resign") == 0 && r.plies[0] == 1);

    /* Resignation (engine2 is Black in game 2). */
    const char *two[] = {"--games", "2", "--byoyomi", "2000", NULL};
    CHECK(run_case("resign", "", "--script resign", two, &r) == 0);
    CHECK(r.n == 2 && r.result[0] == 1 && strcmp(r.reason[0], "resign") == 0 && r.plies[0] == 1);
    CHECK(r.result[1] == -1 && strcmp(r.reason[1], "resign") == 0 && r.plies[1] == 0);
    CHECK(strncmp(r.black[1], "engine2", 7) == 0);
    CHECK(strcmp(csa_ending("resign", 2), "%TORYO") == 0);
    /* Two outside engines: one matches row with no model, named players, the
     * score from engine1's side (it won both). */
    char rdb[900];
    snprintf(rdb, sizeof rdb, "%s.db", t_path("resign"));
    CHECK(t_sql_int(rdb, "SELECT count(*) FROM matches WHERE model_a IS NULL AND cycle IS NULL") == 1);
    CHECK(t_sql_int(rdb, "SELECT count(*) FROM matches WHERE engine_a = 'engine1: one' AND "
                         "engine_b = 'engine2: two' AND wins = 2 AND draws = 0 AND losses = 0 AND elo > 0") == 1);
    CHECK(t_sql_int(rdb, "SELECT count(*) FROM games WHERE match_id = (SELECT id FROM matches)") == 2);
    CHECK(t_sql_int(rdb, "SELECT count(*) FROM games WHERE shard_id IS NOT NULL") == 0);

    /* The move limit. */
    const char *lim[] = {"--games", "2", "--byoyomi", "2000", "--max-ply", "6", NULL};
    CHECK(run_case("max_ply", "--seed 5", "--seed 6", lim, &r) == 0);
    CHECK(r.n == 2 && r.result[0] == 0 && strcmp(r.reason[0], "max_ply") == 0 && r.plies[0] == 6);
    CHECK(strcmp(csa_ending("max_ply", 2), "%JISHOGI") == 0 && g_csa.n_moves == 6);
}

/* The first k moves of a game's move text, as a string (for comparisons). */
static void first_words(const char *moves, int k, char *out, size_t len) {
    size_t i = 0;
    for (int w = 0; moves[i] && w < k; w++) {
        while (moves[i] && moves[i] != ' ') i++;
        if (w + 1 < k && moves[i] == ' ') i++;
    }
    snprintf(out, len, "%.*s", (int)i, moves);
}

typedef struct {
    int n;
    char moves[8][400];
} moves_t;

static void collect_moves(int nc, const char *const *c, void *user) {
    moves_t *m = user;
    if (m->n < 8 && nc >= 1) snprintf(m->moves[m->n++], sizeof m->moves[0], "%s", c[0]);
}

static void test_random_openings(void) {
    /* --random-plies: every pair of games starts with its own random moves,
     * the same for both games of the pair (colours swapped); --seed picks them. */
    rows_t r;
    moves_t mv[2];
    const char *rnd1[] = {"--games", "4", "--byoyomi", "2000", "--max-ply", "10", "--random-plies", "6", NULL};
    const char *rnd2[] = {"--games", "4", "--byoyomi", "2000", "--max-ply", "10", "--random-plies", "6", "--seed", "2",
                          NULL};
    const char *const *flags[2] = {rnd1, rnd2};
    const char *names[2] = {"random1", "random2"};
    for (int k = 0; k < 2; k++) {
        CHECK(run_case(names[k], "--seed 5", "--seed 6", flags[k], &r) == 0);
        CHECK(r.n == 4 && r.plies[0] == 10 && r.plies[3] == 10);
        char db[900];
        snprintf(db, sizeof db, "%s.db", t_path(names[k]));
        memset(&mv[k], 0, sizeof mv[k]);
        t_sql_rows(db, "SELECT moves FROM games WHERE match_id IS NOT NULL ORDER BY id DESC", collect_moves, &mv[k]);
        CHECK(mv[k].n == 4);
        CHECK(t_sql_int(db, "SELECT count(*) FROM matches WHERE settings LIKE '%6 random plies (seed %'") == 1);
    }
    char a[4][200], b[200];
    for (int i = 0; i < 4; i++) first_words(mv[0].moves[i], 6, a[i], sizeof a[i]);
    CHECKF(strcmp(a[0], a[1]) == 0 && strcmp(a[2], a[3]) == 0, "a pair shares its opening: '%s' '%s' / '%s' '%s'",
           a[0], a[1], a[2], a[3]);
    CHECKF(strcmp(a[0], a[2]) != 0, "two pairs, two openings: '%s' '%s'", a[0], a[2]);
    CHECKF(strchr(a[0], ' ') && strlen(a[0]) >= 6 * 4 + 5, "six moves: '%s'", a[0]);
    first_words(mv[1].moves[0], 6, b, sizeof b);
    CHECKF(strcmp(a[0], b) != 0, "another seed, other openings: '%s' '%s'", a[0], b);
    /* Bad values are usage errors. */
    const char *bad[] = {g_match, "--engine1", "x", "--engine2", "y", "--random-plies", "65", NULL};
    CHECK(t_run(bad) == 2);
}

static void test_match_failures(void) {
    rows_t r;
    /* An engine that never answers loses on time, every game (it is stopped or
     * replaced between games); the other games go on. */
    /* Time limits with room for a loaded machine and wine, where a plain move
     * can take a few hundred ms to cross the pipes (CI, stop 23: 3,000 info
     * lines took 434-535 ms under wine on an idle box). */
    const char *fast[] = {"--games", "2", "--byoyomi", "1000", "--tolerance", "500", NULL};
    const char *roomy[] = {"--games", "2", "--byoyomi", "5000", "--tolerance", "5000", NULL};
    int64_t t0 = compat_now_ms();
    CHECK(run_case("hang", "--script random,hang", "", fast, &r) == 0);
    CHECK(r.n == 2 && strcmp(r.reason[0], "time") == 0 && r.result[0] == -1 && r.plies[0] == 2);
    CHECK(strcmp(r.reason[1], "time") == 0 && r.result[1] == 1 && r.plies[1] == 3);
    CHECK(strcmp(csa_ending("hang", 1), "%TIME_UP") == 0);
    CHECK(compat_now_ms() - t0 < 20000);
    /* A slow answer (2,500 ms against 1,000 + 500) is a time loss even though it comes. */
    CHECK(run_case("slow", "--script sleep:2500", "", fast, &r) == 0);
    CHECK(r.n == 2 && strcmp(r.reason[0], "time") == 0 && r.result[0] == -1 && strstr(r.detail[0], "ms"));
    /* ... while a flood of info lines within the time is fine. */
    CHECK(run_case("chatty", "--script info,info,resign", "", roomy, &r) == 0);
    CHECK(r.n == 2 && strcmp(r.reason[0], "resign") == 0 && r.plies[0] == 4);
    /* An engine that exits loses and is restarted for the next game. */
    CHECK(run_case("crash", "--script random,crash", "", fast, &r) == 0);
    CHECK(r.n == 2 && strcmp(r.reason[0], "illegal_move") == 0 && r.result[0] == -1 && r.plies[0] == 2);
    CHECK(strstr(r.detail[0], "exited") != NULL);
    CHECK(strcmp(r.reason[1], "illegal_move") == 0 && r.result[1] == 1 && r.plies[1] == 3);
    CHECK(strcmp(csa_ending("crash", 1), "%+ILLEGAL_ACTION") == 0);
    CHECK(strcmp(csa_ending("crash", 2), "%-ILLEGAL_ACTION") == 0);
    /* Options reach the engine; without the one it needs it exits at isready
     * and the match fails with a message (exit status 1). */
    const char *opt[] = {"--games", "1", "--option1", "FakeOption=hello world", NULL};
    CHECK(run_case("option_ok", "--require-option \"FakeOption=hello world\" --script resign", "", opt, &r) == 0);
    CHECK(r.n == 1 && strcmp(r.reason[0], "resign") == 0);
    CHECK(run_case("option_missing", "--require-option FakeOption=x", "", fast, &r) == 1);
    CHECK(r.n == 0);
    /* An engine command that does not exist. */
    char nope[900];
    snprintf(nope, sizeof nope, "%s", t_path("no-such-engine"));
    const char *bad[] = {g_match, "--engine1", nope, "--engine2", nope, "--games", "1", NULL};
    CHECK(t_run(bad) == 1);
    /* Usage errors. */
    const char *usage1[] = {g_match, "--engine1", "x", NULL};
    CHECK(t_run(usage1) == 2);
    const char *usage2[] = {g_match, "--engine1", "x", "--engine2", "y", "--byoyomi", "100", "--inc", "100", NULL};
    CHECK(t_run(usage2) == 2);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_referee USI_MATCH FAKE_USI\n");
        return 2;
    }
    g_match = argv[1];
    g_fake = argv[2];
    test_unit();
    t_scratch("test_referee");
    test_store();
    test_match_ends();
    test_random_openings();
    test_match_failures();
    int rc = t_done("test_referee");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
