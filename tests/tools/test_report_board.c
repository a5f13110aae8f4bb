/* test_report_board.c - the report's board in a real browser: Debian's
 * chromium, headless, loads the page report wrote for a synthetic run
 * (tests/tools/make_report_fixture: games of random legal moves) with a
 * query string that selects a game and a move (?game=ID&move=N) and presses
 * keys (&keys=ArrowRight,...: keydown events through the page's own key
 * handler), and dumps the DOM it drew (--dump-dom: chromium exits once the
 * page has loaded, the event this test waits for). Every square and both
 * hands are checked against the position the game's moves (read from
 * koma.db) give when the engine replays them: the start, a position with
 * pieces in both hands (in letters too), the last, a match game's capture,
 * promotion, capture of a promoted piece and drop, moves stepped with keys,
 * and the next game's last position reached with keys.
 * Skips (77) with the reason when no chromium is installed (tools/deps.sh
 * --test installs it). POSIX only (not registered in the Windows build).
 *
 *   test_report_board REPORT MAKE_REPORT_FIXTURE [CHROMIUM]
 */
#include "data/db.h"
#include "tools_test.h"

static const char *g_chromium;

/* The first of the names that runs (--version exits 0); NULL if none. */
static const char *find_chromium(const char *given) {
    const char *names[] = {given, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!names[i] || !names[i][0]) continue;
        const char *argv[] = {names[i], "--version", NULL};
        int status = -1;
        char err[256];
        if (compat_run_io(argv, "", "", &status, err, sizeof err) == 0 && status == 0) return names[i];
    }
    return NULL;
}

/* The page's DOM after chromium loaded url; malloc'ed, NULL on failure (said on stderr). */
static char *dump_dom(const char *url) {
    char profile[900], out[900], errp[900], arg[1000];
    snprintf(profile, sizeof profile, "--user-data-dir=%s", t_path("chromium-profile"));
    snprintf(out, sizeof out, "%s", t_path("dom.html"));
    snprintf(errp, sizeof errp, "%s", t_path("chromium.err"));
    snprintf(arg, sizeof arg, "%s", url);
    /* --no-sandbox: root in a container; its own profile: never another chromium's running instance */
    const char *argv[] = {g_chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--no-first-run", "--no-default-browser-check", "--disable-extensions", profile,
                          "--dump-dom", arg, NULL};
    int status = -1;
    char err[512];
    fprintf(stderr, "+ %s --headless ... --dump-dom '%s'\n", g_chromium, url);
    if (compat_run_io(argv, out, errp, &status, err, sizeof err) != 0 || status != 0) {
        char *e = compat_read_file(errp, NULL, NULL, 0);
        fprintf(stderr, "chromium failed (status %d): %s\n%s\n", status, err, e ? e : "");
        free(e);
        return NULL;
    }
    return compat_read_file(out, NULL, err, sizeof err);
}

/* The value of attribute `name` inside the tag that starts at or before at (up to its '>'), into buf. */
static int tag_attr(const char *at, const char *name, char *buf, size_t len) {
    const char *end = strchr(at, '>');
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *p = strstr(at, key);
    buf[0] = 0;
    if (!end || !p || p > end) return -1;
    p += strlen(key);
    const char *q = strchr(p, '"');
    if (!q || q > end || (size_t)(q - p) >= len) return -1;
    memcpy(buf, p, (size_t)(q - p));
    buf[q - p] = 0;
    return 0;
}

/* The moves of game id in koma.db replayed from its start: n moves (n < 0: all, *n_out gets how many). */
static int replay(const char *dbp, long long id, int n, pos_t *pos, int *n_out) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT start_sfen, moves FROM games WHERE id = %lld", id);
    sqlite3 *db = NULL;
    int rc = -1;
    if (sqlite3_open_v2(dbp, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
            const char *start = (const char *)sqlite3_column_text(st, 0), *m = (const char *)sqlite3_column_text(st, 1);
            char err[256];
            if (sfen_parse_cstr(pos, start ? start : "startpos", err, sizeof err) == SFEN_OK) {
                int done = 0;
                rc = 0;
                while (m && *m && (n < 0 || done < n)) {
                    const char *w = m;
                    while (*m && *m != ' ') m++;
                    move_t mv = move_from_usi(pos, w, (size_t)(m - w));
                    if (mv == MOVE_NONE) {
                        rc = -1;
                        break;
                    }
                    pos_do_move(pos, mv);
                    done++;
                    while (*m == ' ') m++;
                }
                if (n_out) *n_out = done;
            }
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return rc;
}

/* A piece as the page writes it in data-p: "P", "+p" (White lower case). */
static void piece_text(piece_t pc, char *buf) {
    static const char letters[] = " PLNSBRGK";
    piece_type_t pt = piece_type(pc);
    int prom = pt > PT_KING;
    char c = letters[prom ? pt - PT_PROMOTE : pt];
    if (piece_color(pc) == COLOR_WHITE) c = (char)(c - 'A' + 'a');
    sprintf(buf, "%s%c", prom ? "+" : "", c);
}

/* A hand as the page writes it in data-hand: "R1 B1 P3", kinds in the order R B G S N L P. */
static void hand_text(const pos_t *pos, color_t c, char *buf) {
    static const piece_type_t order[] = {PT_ROOK, PT_BISHOP, PT_GOLD, PT_SILVER, PT_KNIGHT, PT_LANCE, PT_PAWN};
    static const char letters[] = " PLNSBRGK";
    buf[0] = 0;
    for (int i = 0; i < 7; i++) {
        int n = pos_hand_count(pos, c, order[i]);
        if (n) sprintf(buf + strlen(buf), "%s%c%d", buf[0] ? " " : "", letters[order[i]], n);
    }
}

/* Loads the page for game id at move n (plus extra query), then checks the game and move it shows and its
 * 81 squares and two hands against the engine's position of game expect_id after expect_n moves (-1: all).
 * Returns the number of mismatches found (-1: the page did not load). */
static int check_position(const char *page, const char *dbp, const char *query, long long expect_id, int expect_n) {
    char url[1400];
    snprintf(url, sizeof url, "file://%s?%s", page, query);
    char *dom = dump_dom(url);
    CHECKF(dom != NULL, "chromium could not load %s", url);
    if (!dom) return -1;
    static pos_t pos;
    int n = 0;
    KOMA_ASSERT(replay(dbp, expect_id, expect_n, &pos, &n) == 0);
    int bad = 0;
    char v[128];
    const char *kb = strstr(dom, "id=\"kb\"");
    while (kb && kb > dom && *kb != '<') kb--;
    CHECKF(kb && tag_attr(kb, "data-ready", v, sizeof v) == 0 && !strcmp(v, "1"), "%s: the board's script did not run",
           query);
    if (!kb) {
        free(dom);
        return -1;
    }
    tag_attr(kb, "data-game", v, sizeof v);
    CHECKF(atoll(v) == expect_id, "%s: shows game %s, want %lld", query, v, expect_id);
    tag_attr(kb, "data-move", v, sizeof v);
    CHECKF(atoi(v) == n, "%s: shows move %s, want %d", query, v, n);
    for (int sq = 0; sq < SQ_NB; sq++) {
        char key[32], want[8] = "", got[16];
        snprintf(key, sizeof key, "<g data-sq=\"%d%c\"", sq_file(sq) + 1, 'a' + sq_rank(sq));
        const char *at = strstr(dom, key);
        CHECKF(at != NULL, "%s: square %s not drawn", query, key + 13);
        if (!at) {
            bad++;
            continue;
        }
        if (pos_piece_on(&pos, sq)) piece_text(pos_piece_on(&pos, sq), want);
        tag_attr(at, "data-p", got, sizeof got);
        if (strcmp(want, got) != 0) {
            bad++;
            t_fail(__FILE__, __LINE__, "", "%s: square %d%c holds '%s', the engine says '%s'", query, sq_file(sq) + 1,
                   'a' + sq_rank(sq), got, want);
        }
        t_judge(1);
    }
    for (int c = 0; c < 2; c++) {
        char want[64], got[64];
        hand_text(&pos, (color_t)c, want);
        const char *at = strstr(dom, c == 0 ? "<g id=\"hand-b\"" : "<g id=\"hand-w\"");
        CHECKF(at && tag_attr(at, "data-hand", got, sizeof got) == 0 && !strcmp(got, want),
               "%s: %s's hand is '%s', the engine says '%s'", query, c ? "White" : "Black", at ? got : "(none)", want);
        bad += !(at && !strcmp(got, want));
    }
    free(dom);
    return bad;
}

/* An evaluation match of cycle's net with one game it lost: a capture, a promotion, the promoted piece
 * captured back and dropped. Returns the game's id (< 0). */
static long long add_match_game(const char *dbp, int cycle) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbp, 0, &db, err, sizeof err) == DB_OK);
    db_model_t a, b;
    KOMA_ASSERT(db_model_by_cycle(db, cycle, &a) == DB_OK && db_model_by_cycle(db, cycle - 1, &b) == DB_OK);
    db_match_t m;
    memset(&m, 0, sizeof m);
    m.cycle = cycle, m.model_a = a.id, m.model_b = b.id;
    snprintf(m.engine_a, sizeof m.engine_a, "cycle %d", cycle);
    snprintf(m.engine_b, sizeof m.engine_b, "cycle %d", cycle - 1);
    KOMA_ASSERT(db_match_begin(db, &m) == DB_OK);
    db_game_t g;
    memset(&g, 0, sizeof g);
    g.start_sfen = "startpos";
    g.moves = "7g7f 3c3d 8h2b+ 3a2b B*4e 2b3c 4e3d";
    g.plies = 7;
    g.result = DB_RESULT_WHITE_WIN;
    g.reason = DB_REASON_RESIGN;
    g.black = m.engine_a, g.white = m.engine_b;
    KOMA_ASSERT(db_match_game_insert(db, m.id, &g) == DB_OK);
    db_close(db);
    return (long long)g.id;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_report_board REPORT MAKE_REPORT_FIXTURE [CHROMIUM]\n");
        return 2;
    }
    g_chromium = find_chromium(argc > 3 ? argv[3] : NULL);
    if (!g_chromium) {
        printf("SKIP: no chromium (Debian: apt-get install chromium; tools/deps.sh --test installs it)\n");
        return 77;
    }
    const char *report = argv[1], *fixture = argv[2];
    t_scratch("test_report_board");
    char run[900], dbp[1000], page[1000];
    snprintf(run, sizeof run, "%s", t_path("run"));
    snprintf(dbp, sizeof dbp, "%s/koma.db", run);
    snprintf(page, sizeof page, "%s/report.html", run);
    const char *mk[] = {fixture, run, "--cycles", "3", "--games-per-cycle", "6", "--steps-per-cycle", "20", NULL};
    KOMA_ASSERT(t_run(mk) == 0);
    long long match_game = add_match_game(dbp, 3);
    long long g1 = t_sql_int(dbp, "SELECT id FROM games WHERE shard_id IS NOT NULL ORDER BY plies DESC, id LIMIT 1");
    int plies = (int)t_sql_int(dbp, "SELECT plies FROM games WHERE shard_id IS NOT NULL ORDER BY plies DESC, id LIMIT 1");
    KOMA_ASSERT(g1 > 0 && plies > 30);
    char id1[32], idm[32];
    snprintf(id1, sizeof id1, "%lld", g1);
    snprintf(idm, sizeof idm, "%lld", match_game);
    const char *rep[] = {report, run, "--game", id1, "--game", idm, NULL};
    KOMA_ASSERT(t_run(rep) == 0);

    /* a position with pieces in both hands */
    static pos_t pos;
    int both = -1;
    for (int n = 1; n <= plies && both < 0; n++) {
        KOMA_ASSERT(replay(dbp, g1, n, &pos, NULL) == 0);
        if (pos_hand(&pos, COLOR_BLACK) && pos_hand(&pos, COLOR_WHITE)) both = n;
    }
    fprintf(stderr, "game %lld: %d plies, both hands hold pieces from move %d\n", g1, plies, both);
    char q[256];
    snprintf(q, sizeof q, "game=%lld&move=0", g1);
    CHECK(check_position(page, dbp, q, g1, 0) == 0);
    if (both > 0) {
        snprintf(q, sizeof q, "game=%lld&move=%d&letters=1", g1, both);
        CHECK(check_position(page, dbp, q, g1, both) == 0);
    }
    snprintf(q, sizeof q, "game=%lld&move=%d", g1, plies);
    CHECK(check_position(page, dbp, q, g1, -1) == 0);
    /* the match game: 8h2b+ takes a bishop and promotes, 3a2b takes the horse (a bishop in hand), B*4e
     * drops it, 4e3d takes a pawn */
    for (int n = 3; n <= 7; n += 2) {
        snprintf(q, sizeof q, "game=%lld&move=%d", match_game, n);
        CHECK(check_position(page, dbp, q, match_game, n) == 0);
    }
    /* keys: 3 forward, 1 back, 10 forward, 1 back = move 11 */
    snprintf(q, sizeof q, "game=%lld&move=0&keys=ArrowRight,ArrowRight,ArrowRight,ArrowLeft,PageDown,ArrowLeft", g1);
    CHECK(check_position(page, dbp, q, g1, 11) == 0);
    /* keys: the next game in the list (the one after g1's), to its end; its id read from the page */
    snprintf(q, sizeof q, "game=%lld&move=4&keys=ArrowDown,End", g1);
    char url[1400];
    snprintf(url, sizeof url, "file://%s?%s", page, q);
    char *dom = dump_dom(url), v[64] = "";
    const char *kb = dom ? strstr(dom, "id=\"kb\"") : NULL;
    while (kb && kb > dom && *kb != '<') kb--;
    CHECK(kb && tag_attr(kb, "data-game", v, sizeof v) == 0);
    long long next = atoll(v);
    free(dom);
    CHECKF(next != 0 && next != g1, "ArrowDown from game %lld shows game %lld", g1, next);
    if (next != 0 && next != g1) CHECK(check_position(page, dbp, q, next, -1) == 0);

    int rc = t_done("test_report_board");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
