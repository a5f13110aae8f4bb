/* test_usi_match.c - a short match of two random fake engines through
 * usi-match: openings played twice with colours swapped, two games at once,
 * every game in games under the matches row (engine1 registered as the
 * net of cycle 0), CSA files that parse back and replay legally to the same
 * moves as the database, the USI commands the engines received (byoyomi
 * and Fischer clocks, isready/usinewgame/gameover), and the Elo printed;
 * usi-match killed midway keeps the games it finished under an unfinished
 * matches row (no Elo), and a match played to its end is rated; its
 * options: --help lists them, --config FILE, --option1 from both.
 *
 *   test_usi_match USI_MATCH FAKE_USI
 */
#include "data/db.h"
#include "match/referee.h"
#include "tools_test.h"

#ifndef _WIN32
#include <sys/stat.h>
#endif

static const char *g_match, *g_fake;

/* The fake engines answer at once: a minute of grace on each move keeps a
 * loaded machine's scheduling delays from losing games on time (the time
 * rule itself is tested with an engine that sleeps, in test_referee). */
#define TOLERANCE "60000"

typedef struct {
    int n;
    int result[16], plies[16], match_id[16];
    char black[16][96], start[16][256], moves[16][4096];
} games_t;

static void collect(int nc, const char *const *c, void *user) {
    games_t *g = user;
    if (g->n >= 16 || nc < 6) return;
    g->result[g->n] = atoi(c[0]);
    g->plies[g->n] = atoi(c[1]);
    snprintf(g->black[g->n], sizeof g->black[0], "%s", c[2]);
    snprintf(g->start[g->n], sizeof g->start[0], "%s", c[3]);
    snprintf(g->moves[g->n], sizeof g->moves[0], "%s", c[4]);
    g->match_id[g->n] = atoi(c[5]);
    g->n++;
}

static int count_lines(const char *path, const char *prefix) {
    char err[256];
    size_t len;
    char *t = compat_read_file(path, &len, err, sizeof err);
    if (!t) return -1;
    int n = 0;
    size_t pl = strlen(prefix);
    for (char *p = t; p && *p;) {
        if (strncmp(p, prefix, pl) == 0) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    free(t);
    return n;
}

/* A database with one model, registered as cycle 0. */
static void make_model_db(const char *path) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    KOMA_ASSERT(db_open(path, 0, &db, err, sizeof err) == DB_OK);
    db_model_t m;
    memset(&m, 0, sizeof m);
    m.cycle = 0;
    strcpy(m.path, "models/cycle-0000.safetensors");
    strcpy(m.xxh3, "0123456789abcdef");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    KOMA_ASSERT(db_model_insert(db, &m) == DB_OK);
    db_close(db);
}

static t_csa_t g_csa;

static void test_match(void) {
    char err[DB_ERR_MAX];
    /* A run with one model: engine1 plays "the net of cycle 0". */
    make_model_db(t_path("koma.db"));

    char e1[1200], e2[1200], openings[900];
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 11 --log \"%s\"", g_fake, t_path("alpha.log"));
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 12 --log \"%s\"", g_fake, t_path("beta.log"));
    snprintf(openings, sizeof openings, "%s/tests/data/openings.sfen", KOMA_SOURCE_DIR);
    const char *argv[] = {g_match,       "--engine1",  e1,       "--engine2",       e2,      "--games",
                          "4",           "--openings", openings, "--byoyomi",       "500",   "--tolerance",
                          TOLERANCE,     "--concurrency", "2",   "--run",           t_dir,   "--cycle1",
                          "0",           "--csa-dir",  t_path("csa"), "--max-ply",  "200",   "--engine-stderr",
                          "",            NULL};
    CHECK(t_run(argv) == 0);

    games_t g;
    memset(&g, 0, sizeof g);
    CHECK(t_sql_rows(t_path("koma.db"),
                     "SELECT result, plies, black, start_sfen, moves, match_id FROM games WHERE match_id IS NOT NULL "
                     "ORDER BY id DESC",
                     collect, &g) == 4);
    CHECK(g.n == 4);
    long long match_id = t_sql_int(t_path("koma.db"), "SELECT id FROM matches");
    CHECK(match_id > 0);
    /* engine1's W/D/L from the games (engine1 is Black in games 1 and 3). */
    int w = 0, d = 0, l = 0;
    for (int i = 0; i < g.n; i++) {
        CHECK(g.match_id[i] == match_id);
        CHECK(g.plies[i] >= 1 && g.plies[i] <= 200);
        int e1_black = strncmp(g.black[i], "engine1", 7) == 0;
        int r = e1_black ? g.result[i] : -g.result[i];
        w += r > 0, d += r == 0, l += r < 0;
    }
    CHECK(t_sql_int(t_path("koma.db"), "SELECT wins FROM matches") == w);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT draws FROM matches") == d);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT losses FROM matches") == l);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT cycle FROM matches") == 0);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT model_b IS NULL FROM matches") == 1);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT opponent = 'beta' FROM matches") == 1);
    ref_elo_t e;
    ref_elo_trinomial(w, d, l, &e);
    /* Every game is recorded with the right start and the colours alternate
     * within each pair of games on one opening. */
    db_t *rd = NULL;
    KOMA_ASSERT(db_open(t_path("koma.db"), DB_OPEN_READONLY, &rd, err, sizeof err) == DB_OK);
    db_match_t *ms = NULL;
    int32_t nm = 0;
    CHECK(db_matches_list(rd, -1, &ms, &nm) == DB_OK && nm == 1);
    if (nm == 1) {
        CHECK(ms[0].wins + ms[0].draws + ms[0].losses == 4 && ms[0].games == 4);
        CHECK_NEAR(ms[0].elo, e.elo, 1e-9);
        CHECK(ms[0].elo_lo == e.elo_lo && ms[0].elo_hi == e.elo_hi);
        CHECK(strcmp(ms[0].engine_a, "engine1: alpha") == 0 && strcmp(ms[0].engine_b, "engine2: beta") == 0);
        CHECK(strstr(ms[0].settings, "byoyomi 500") != NULL);
    }
    free(ms);
    db_close(rd);

    /* The CSA files: readable, V2.2, legal all the way, the same moves as the db,
     * an ending that matches the result. Games are stored in finishing order,
     * so match them by their moves. */
    for (int gi = 1; gi <= 4; gi++) {
        char p[1000];
        snprintf(p, sizeof p, "%s/game-%04d.csa", t_path("csa"), gi);
        CHECK(t_csa_read(p, &g_csa) == 0);
        CHECK(g_csa.has_version);
        CHECK(g_csa.bad_line == 0);
        CHECK(g_csa.n_moves >= 1);
        CHECK(g_csa.ending[0] == '%');
        int found = -1;
        for (int i = 0; i < g.n; i++)
            if (strcmp(g.moves[i], g_csa.moves_usi) == 0) found = i;
        CHECK(found >= 0);
        /* Names: engine1 (alpha) is Black in odd games. */
        CHECK(strcmp(g_csa.black, gi % 2 ? "alpha" : "beta") == 0);
        CHECK(strcmp(g_csa.white, gi % 2 ? "beta" : "alpha") == 0);
        if (found >= 0) {
            /* Games 1-2 share opening 1, games 3-4 opening 2 of the file. */
            const char *want = gi <= 2 ? "lnsgkgsnl/1r5b1/p1pppp1pp/6p2/1p5P1/2P6/PP1PPPP1P/1B5R1/LNSGKGSNL b - 7"
                                       : "lnsgkgsnl/1r5b1/p1pppp1pp/1p4p2/9/2P6/PPSPPPPPP/1B5R1/LN1GKGSNL w - 6";
            CHECK(strcmp(g.start[found], want) == 0);
            if (strcmp(g_csa.ending, "%TSUMI") == 0) CHECK(g.result[found] != 0);
            /* The move limit counts from the SFEN's ply (7 and 6): 194 and 195 moves here. */
            if (strcmp(g_csa.ending, "%JISHOGI") == 0) CHECK(g.result[found] == 0 && g.plies[found] == (gi <= 2 ? 194 : 195));
        }
    }
    /* What the engines were told: each engine got isready + usinewgame per
     * game (2 processes each, 2 games each) and a gameover per game; go lines
     * carry both clocks and the byoyomi. */
    CHECK(count_lines(t_path("alpha.log"), "usinewgame") == 4);
    CHECK(count_lines(t_path("beta.log"), "usinewgame") == 4);
    CHECK(count_lines(t_path("alpha.log"), "gameover") == 4);
    CHECK(count_lines(t_path("alpha.log"), "go btime 0 wtime 0 byoyomi 500") >= 4);
    CHECK(count_lines(t_path("alpha.log"), "position sfen ") >= 4);
    CHECK(count_lines(t_path("alpha.log"), "quit") == 2);
}


/* W/D/L of player `a` (a games.black / games.white name) over the games of a match. */
static void wdl_of(db_t *db, int64_t match_id, const char *a, int *w, int *d, int *l, int *n) {
    db_game_list_t gl;
    *w = *d = *l = *n = 0;
    CHECK(db_match_games_list(db, match_id, &gl) == DB_OK);
    for (int64_t i = 0; i < gl.n; i++) {
        const db_game_t *g = &gl.games[i];
        CHECK(strcmp(g->black, a) == 0 || strcmp(g->white, a) == 0);
        int r = strcmp(g->black, a) == 0 ? g->result : -g->result;
        *w += r > 0, *d += r == 0, *l += r < 0;
        (*n)++;
    }
    db_game_list_free(&gl);
}

/* usi-match killed (compat_proc_kill) in its third game: the two games it
 * finished are in the database under its matches row, which has no Elo
 * (unfinished) and the W/D/L of those games. engine2 is the run's net
 * (--cycle2), so the row is from engine2's side. Then the same match played
 * to its end: a row with the W/D/L and Elo the whole match gives, as usi-match
 * recorded it when it stored the match at its end. */
static void test_killed(void) {
    const char *dbp = t_path("killed.db");
    make_model_db(dbp);
    char e1[1200], e2[1200], err[DB_ERR_MAX];
    /* engine1 resigns at its second move: engine2 (A) wins every game. */
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 21 --script random,resign", g_fake);
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 22 --hang-from-game 3", g_fake);
    const char *argv[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "6", "--byoyomi", "60000",
                          "--max-ply", "60", "--db", dbp, "--cycle2", "0", "--engine-stderr", "", NULL};
    compat_proc_t *p = compat_proc_spawn(argv, NULL, err, sizeof err);
    if (!p) fprintf(stderr, "%s\n", err);
    CHECK(p != NULL);
    if (!p) return;
    /* Each game's line is printed after the game is stored. */
    char line[4096];
    int ended = 0;
    while (ended < 2) {
        int32_t n = compat_proc_read_line(p, line, sizeof line, 60000);
        if (n < 0) break;
        fprintf(stderr, "usi-match: %s\n", line);
        ended += strncmp(line, "game ", 5) == 0;
    }
    CHECK(ended == 2);
    compat_proc_kill(p);
    int status = 0;
    CHECK(compat_proc_wait(p, 10000, &status) == 0 && status != 0);
    compat_proc_free(p);

    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbp, 0, &db, err, sizeof err) == DB_OK);
    db_match_t *ms = NULL;
    int32_t nm = 0;
    CHECK(db_matches_list(db, -1, &ms, &nm) == DB_OK && nm == 1);
    int64_t killed_id = nm == 1 ? ms[0].id : 0;
    if (nm == 1) {
        const db_match_t *m = &ms[0];
        CHECK(m->games == 2 && isnan(m->elo) && isnan(m->elo_lo) && isnan(m->elo_hi));
        CHECK(m->cycle == 0 && m->model_a > 0 && m->model_b == 0 && strcmp(m->opponent, "alpha") == 0);
        CHECK(strcmp(m->engine_a, "engine2: beta") == 0 && strcmp(m->engine_b, "engine1: alpha") == 0);
        CHECK(strstr(m->settings, "6 games") != NULL);
        int w, d, l, n;
        wdl_of(db, m->id, m->engine_a, &w, &d, &l, &n);
        CHECK(n == 2 && m->wins == w && m->draws == d && m->losses == l);
        CHECK(w == 2);
    }
    free(ms);
    /* Not on the ladder: it has no Elo. */
    ref_ladder_point_t *pts = NULL;
    int32_t np = 0;
    CHECK(ref_elo_ladder(db, &pts, &np) == DB_OK && np == 0);
    free(pts);
    db_close(db);

    /* The whole match, played to its end. */
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 22", g_fake);
    argv[6] = "4";
    CHECK(t_run(argv) == 0);
    KOMA_ASSERT(db_open(dbp, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    CHECK(db_matches_list(db, -1, &ms, &nm) == DB_OK && nm == 2);
    if (nm == 2) {
        CHECK(ms[0].id == killed_id && ms[0].games == 2 && isnan(ms[0].elo)); /* kept as it was */
        const db_match_t *m = &ms[1];
        int w, d, l, n;
        wdl_of(db, m->id, "engine2: beta", &w, &d, &l, &n);
        CHECK(n == 4 && m->games == 4 && m->wins == w && m->draws == d && m->losses == l && w == 4);
        CHECK(m->cycle == 0 && m->model_a > 0 && m->model_b == 0 && strcmp(m->engine_a, "engine2: beta") == 0);
        ref_elo_t e;
        ref_elo_trinomial(w, d, l, &e);
        CHECK(isfinite(m->elo));
        CHECK_NEAR(m->elo, e.elo, 1e-9);
        CHECK(m->elo_lo == e.elo_lo && m->elo_hi == e.elo_hi);
    }
    free(ms);
    db_close(db);
}

/* Fischer clocks from the start position: the go commands count down. */
static void test_fischer(void) {
    char e1[1200], e2[1200];
    snprintf(e1, sizeof e1, "\"%s\" --seed 3 --log \"%s\"", g_fake, t_path("f1.log"));
    snprintf(e2, sizeof e2, "\"%s\" --seed 4", g_fake);
    const char *argv[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "1", "--time", "60000", "--inc",
                          "1000", "--max-ply", "20", "--quiet", NULL};
    CHECK(t_run(argv) == 0);
    CHECK(count_lines(t_path("f1.log"), "position startpos") >= 10);
    CHECK(count_lines(t_path("f1.log"), "go btime 60000 wtime 60000 binc 1000 winc 1000") == 1);
    /* Black's k-th go (k = 0..9): the clock gained the increment minus the
     * (small) time of each of its earlier moves; White's stays at 60000 + ... */
    char e[256];
    size_t len;
    char *t = compat_read_file(t_path("f1.log"), &len, e, sizeof e);
    CHECK(t != NULL);
    int k = 0;
    for (char *p = t; p && *p; k += 0) {
        long long bt, wt;
        if (sscanf(p, "go btime %lld wtime %lld", &bt, &wt) == 2) {
            CHECK(bt <= 60000 + 1000LL * k && bt >= 60000 + 800LL * k);
            CHECK(wt <= 60000 + 1000LL * k && wt >= 60000 + 800LL * (k - 1));
            k++;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    CHECK(k == 10);
    free(t);
}

/* Runs argv with stdout and stderr to files; returns the exit status and
 * the two texts (malloc'ed). */
/* The Windows build writes text with CR LF line ends: the checks read lines as on POSIX. */
static char *crlf_to_lf(char *t) {
    if (!t) return t;
    char *w = t;
    for (const char *r = t; *r; r++)
        if (!(r[0] == '\r' && r[1] == '\n')) *w++ = *r;
    *w = 0;
    return t;
}

static int run_capture(const char *const *argv, char **out, char **errt) {
    char e[512], po[900], pe[900];
    snprintf(po, sizeof po, "%s", t_path("cap.out"));
    snprintf(pe, sizeof pe, "%s", t_path("cap.err"));
    int status = -1;
    if (compat_run_io(argv, po, pe, &status, e, sizeof e) != 0) {
        fprintf(stderr, "%s\n", e);
        status = -1;
    }
    size_t n;
    *out = crlf_to_lf(compat_read_file(po, &n, e, sizeof e));
    *errt = crlf_to_lf(compat_read_file(pe, &n, e, sizeof e));
    fprintf(stderr, "%s%s", *out ? *out : "", *errt ? *errt : "");
    return status;
}

static int longest_line(const char *t) {
    int longest = 0;
    for (const char *p = t; p && *p;) {
        const char *e = strchr(p, '\n');
        int l = e ? (int)(e - p) : (int)strlen(p);
        longest = l > longest ? l : longest;
        p = e ? e + 1 : p + l;
    }
    return longest;
}

/* What usi-match says about the Elo agrees with what it computes and with
 * the README ("a 95% interval (pentanomial over pairs)"): the headline is
 * the pentanomial interval over game pairs once 2 are complete, named so,
 * with the per-game (trinomial) figure below; with fewer pairs the
 * trinomial one, saying why. A difference that rounds to zero is "0", never
 * "-0" or "+0". The program calls itself by the name it was run as (the
 * install names it koma-usi-match), and --help fits 80 columns. */
static void test_output(void) {
    char e1[1200], e2[1200];
    /* every game a draw at the move limit: the difference is exactly 0 */
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 21", g_fake);
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 22", g_fake);
    const char *a4[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "4", "--byoyomi", "200",
                        "--tolerance", TOLERANCE, "--max-ply", "6", "--progress", "1", "--engine-stderr", "", NULL};
    char *out = NULL, *errt = NULL;
    CHECK(run_capture(a4, &out, &errt) == 0);
    CHECKF(out && strstr(out, "engine1: +0 =4 -0"), "4 draws expected (max-ply 6)");
    CHECKF(out && strstr(out, "\nElo 0, 95% interval [-") && strstr(out, "(pentanomial, over 2 game pairs)\n"),
           "the headline: pentanomial over 2 pairs, Elo 0");
    CHECKF(out && strstr(out, "pairs by engine1's points (0, 0.5, 1, 1.5, 2): 0/0/2/0/0"), "pair counts");
    CHECKF(out && strstr(out, "games taken one by one (trinomial): Elo 0, 95% interval"), "the trinomial figure");
    CHECKF(out && errt && !strstr(out, "Elo -0") && !strstr(out, "Elo +0") && !strstr(errt, "Elo -0") &&
               !strstr(errt, "Elo +0"),
           "a zero difference printed with a sign");
    CHECKF(out && strstr(out, "| Elo 0 [-") && strstr(out, "] over pairs"), "the running score's Elo");
    free(out), free(errt);

    const char *a2[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "2", "--byoyomi", "200",
                        "--tolerance", TOLERANCE, "--max-ply", "6", "--quiet", "--engine-stderr", "", NULL};
    CHECK(run_capture(a2, &out, &errt) == 0);
    CHECKF(out && strstr(out, "(trinomial, over 2 games taken one by one:") &&
               strstr(out, "needs 2 complete pairs, 1 here)") && !strstr(out, "pentanomial, over"),
           "2 games: the trinomial interval, saying why");
    free(out), free(errt);

    /* the name it was run as */
#ifndef _WIN32
    char inst[900];
    snprintf(inst, sizeof inst, "%s", t_path("koma-usi-match"));
    const char *cp[] = {"cp", g_match, inst, NULL};
    if (t_run(cp) == 0) {
        const char *v[] = {inst, "--version", NULL};
        CHECK(run_capture(v, &out, &errt) == 0);
        CHECKF(out && strncmp(out, "koma-usi-match (Koma) ", 22) == 0, "--version of koma-usi-match: %s", out);
        free(out), free(errt);
        const char *bad[] = {inst, "--no-such-flag", NULL};
        CHECK(run_capture(bad, &out, &errt) != 0);
        CHECKF(errt && strstr(errt, "koma-usi-match: unknown") && strstr(errt, "usage: koma-usi-match --engine1"),
               "messages of koma-usi-match: %s", errt);
        free(out), free(errt);
    }
#endif
    const char *h[] = {g_match, "--help", NULL};
    CHECK(run_capture(h, &out, &errt) == 0);
    CHECKF(out && longest_line(out) <= 80, "--help has a line of %d characters", out ? longest_line(out) : -1);
    CHECKF(out && strstr(out, "pentanomial"), "--help says how the interval is computed");
    free(out), free(errt);
}

/* The clock summary (the milliseconds each side really used): an engine that
 * sleeps 120 ms on each of its moves and one that answers at once; an engine
 * that overruns a 100 ms byoyomi loses on time, counted as such, with the
 * forfeiting move's time among its moves. Bounds from below only: a loaded
 * machine adds time, never takes it away. */
static long long after(const char *t, const char *key) {
    const char *p = t ? strstr(t, key) : NULL;
    return p ? atoll(p + strlen(key)) : -1;
}

static void test_time_use(void) {
    char e1[1200], e2[1200];
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 31 --script sleep:120,sleep:120,sleep:120", g_fake);
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 32", g_fake);
    const char *a[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "2", "--byoyomi", "1000",
                       "--tolerance", TOLERANCE, "--max-ply", "6", "--quiet", "--engine-stderr", "", NULL};
    char *out = NULL, *errt = NULL;
    CHECK(run_capture(a, &out, &errt) == 0);
    const char *l1 = out ? strstr(out, "time, engine1 alpha: 6 moves, median ") : NULL;
    const char *l2 = out ? strstr(out, "time, engine2 beta: 6 moves, median ") : NULL;
    CHECKF(l1 && l2, "a time line for each engine, 6 moves each (3 a game, 2 games)");
    CHECKF(after(l1, "median ") >= 120 && after(l1, "longest ") >= 120 && after(l1, "at most ") >= 12,
           "alpha's 120 ms a move: median %lld, longest %lld", after(l1, "median "), after(l1, "longest "));
    CHECKF(l1 && strstr(l1, "least allowance 1000 ms; lost on time 0\n"), "alpha: byoyomi 1000 ms, no time loss");
    CHECKF(l2 && strstr(l2, "least allowance 1000 ms; lost on time 0\n"), "beta: byoyomi 1000 ms, no time loss");
    free(out), free(errt);

    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 31 --script random,sleep:300", g_fake);
    const char *b[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "2", "--byoyomi", "100",
                       "--tolerance", "0", "--max-ply", "20", "--quiet", "--engine-stderr", "", NULL};
    CHECK(run_capture(b, &out, &errt) == 0);
    l1 = out ? strstr(out, "time, engine1 alpha: 4 moves, median ") : NULL;
    l2 = out ? strstr(out, "time, engine2 beta: ") : NULL;
    CHECKF(out && strstr(out, "ends: time 2\n"), "both games lost on time");
    CHECKF(l1 && strstr(l1, "lost on time 2\n") && after(l1, "longest ") >= 100 && after(l1, "at most ") >= 100,
           "alpha: its 2 moves each game (the second forfeits), 2 lost on time, the longest at the limit or over");
    CHECKF(l2 && strstr(l2, "lost on time 0\n"), "beta lost no game on time");
    free(out), free(errt);
}

/* ---- output paths (issue 30.1) ---------------------------------------------------------- */
static void put_file(const char *path, const char *text) {
    char e[512];
    KOMA_ASSERT(compat_write_file_durable(path, text, strlen(text), e, sizeof e) == 0);
}

/* A match of 2 short games with extra arguments (up to 4): its exit status,
 * its stderr in *errt. */
static int short_match(const char *a, const char *b, const char *c, const char *d, char **errt) {
    char e1[1200], e2[1200];
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 31", g_fake);
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 32", g_fake);
    const char *argv[] = {g_match, "--engine1", e1, "--engine2", e2, "--games", "2", "--byoyomi", "100",
                          "--tolerance", TOLERANCE, "--max-ply", "6", "--quiet", a, b, c, d, NULL};
    char *out = NULL;
    int st = run_capture(argv, &out, errt);
    free(out);
    return st;
}

/* usi-match never writes over a run's files or a non-regular file (data/run.h's
 * run_output_check): --csa-dir inside a run's models/ or shards/, --db naming
 * a new file under models/ or a run's koma.db-wal, --run inside shards/, and
 * --engine-stderr at the run's koma.db or log are refused before any game,
 * with "refusing to write ... (choose another FLAG)", and nothing is made
 * there; an existing --db that is not a Koma database is refused and left as
 * it was; a FIFO where a CSA record goes stays a FIFO (the record is refused,
 * the match goes on). Still allowed: --engine-stderr /dev/null or a log (appended
 * to), --db the run's own koma.db, --csa-dir the run's directory. */
static void test_outputs(void) {
    char R[900], p[1200], p2[1300];
    snprintf(R, sizeof R, "%s", t_path("orun"));
    char e[512];
    CHECK(compat_mkdir_p(R, e, sizeof e) == 0);
    snprintf(p, sizeof p, "%s/koma.db", R);
    make_model_db(p);
    snprintf(p, sizeof p, "%s/models", R);
    CHECK(compat_mkdir_p(p, e, sizeof e) == 0);
    snprintf(p, sizeof p, "%s/shards", R);
    CHECK(compat_mkdir_p(p, e, sizeof e) == 0);
    snprintf(p, sizeof p, "%s/models/0001.safetensors", R);
    put_file(p, "a model's bytes\n");
    char *errt = NULL;

    /* --csa-dir inside models/ (existing) and shards/ (to be made) */
    snprintf(p, sizeof p, "%s/models", R);
    CHECK(short_match("--csa-dir", p, "--run", R, &errt) == 1);
    CHECKF(errt && strstr(errt, "refusing to write CSA game records to") && strstr(errt, "models/") &&
               strstr(errt, "(choose another --csa-dir)"),
           "--csa-dir RUN/models: %s", errt ? errt : "");
    free(errt);
    snprintf(p2, sizeof p2, "%s/models/game-0001.csa", R);
    CHECKF(!compat_file_exists(p2), "%s was written", p2);
    snprintf(p, sizeof p, "%s/shards/csa/deep", R);
    CHECK(short_match("--csa-dir", p, "--engine-stderr", "", &errt) == 1);
    CHECKF(errt && strstr(errt, "refusing to write CSA game records to") && strstr(errt, "shards/"),
           "--csa-dir RUN/shards/csa/deep: %s", errt ? errt : "");
    free(errt);
    snprintf(p, sizeof p, "%s/shards/csa", R);
    CHECKF(!compat_is_dir(p), "%s was made", p);

    /* --db: a new file under models/, the name of the database's WAL, a file that is no database */
    snprintf(p, sizeof p, "%s/models/m.db", R);
    CHECK(short_match("--db", p, "--engine-stderr", "", &errt) == 1);
    CHECKF(errt && strstr(errt, "refusing to write the match database to") && strstr(errt, "(choose another --db)"),
           "--db RUN/models/m.db: %s", errt ? errt : "");
    free(errt);
    CHECKF(!compat_file_exists(p), "%s was made", p);
    snprintf(p, sizeof p, "%s/koma.db-wal", R);
    CHECK(short_match("--db", p, "--engine-stderr", "", &errt) == 1);
    CHECKF(errt && strstr(errt, "write-ahead log"), "--db RUN/koma.db-wal: %s", errt ? errt : "");
    free(errt);
    CHECKF(!compat_file_exists(p), "%s was made", p);
    snprintf(p, sizeof p, "%s/models/0001.safetensors", R);
    CHECK(short_match("--db", p, "--engine-stderr", "", &errt) == 1);
    CHECKF(errt && strstr(errt, "not a database") && strstr(errt, "--db takes a Koma database"),
           "--db RUN/models/0001.safetensors: %s", errt ? errt : "");
    free(errt);
    char *text = t_read_file(p, NULL);
    CHECKF(text && !strcmp(text, "a model's bytes\n"), "%s changed", p);
    free(text);

    /* --run inside shards/ */
    snprintf(p, sizeof p, "%s/shards/x", R);
    CHECK(short_match("--run", p, "--engine-stderr", "", &errt) == 1);
    CHECKF(errt && strstr(errt, "shards/") && strstr(errt, "(choose another --run)"), "--run RUN/shards/x: %s",
           errt ? errt : "");
    free(errt);
    CHECKF(!compat_is_dir(p), "%s was made", p);

    /* --engine-stderr: the run's database and log are refused; a log is appended to */
    snprintf(p, sizeof p, "%s/koma.db", R);
    CHECK(short_match("--engine-stderr", p, "--run", R, &errt) == 1);
    CHECKF(errt && strstr(errt, "refusing to write the engines' stderr to") && strstr(errt, "the run's database") &&
               strstr(errt, "(choose another --engine-stderr)"),
           "--engine-stderr RUN/koma.db: %s", errt ? errt : "");
    free(errt);
    snprintf(p, sizeof p, "%s/log", R);
    put_file(p, "the run's log\n");
    CHECK(short_match("--engine-stderr", p, "--quiet", "--quiet", &errt) == 1);
    CHECKF(errt && strstr(errt, "the run's log"), "--engine-stderr RUN/log: %s", errt ? errt : "");
    free(errt);
    text = t_read_file(p, NULL);
    CHECKF(text && !strcmp(text, "the run's log\n"), "%s changed", p);
    free(text);
    snprintf(p, sizeof p, "%s", t_path("engines.log"));
    put_file(p, "earlier line\n");
    CHECK(short_match("--engine-stderr", p, "--db", t_path("orun/koma.db"), &errt) == 0);
    free(errt);
    text = t_read_file(p, NULL);
    CHECKF(text && !strncmp(text, "earlier line\n", 13), "--engine-stderr replaced %s", p);
    free(text);
    CHECK(t_sql_int(t_path("orun/koma.db"), "SELECT count(*) FROM games WHERE match_id IS NOT NULL") == 2);
#ifndef _WIN32
    CHECK(short_match("--engine-stderr", "/dev/null", "--csa-dir", R, &errt) == 0);
    free(errt);
    snprintf(p, sizeof p, "%s/game-0002.csa", R);
    CHECKF(compat_file_exists(p), "--csa-dir RUN: %s not written", p);

    /* a FIFO where a CSA record goes */
    snprintf(p, sizeof p, "%s", t_path("csa_fifo"));
    CHECK(compat_mkdir_p(p, e, sizeof e) == 0);
    snprintf(p2, sizeof p2, "%s/game-0002.csa", p);
    CHECK(mkfifo(p2, 0644) == 0);
    CHECK(short_match("--csa-dir", p, "--engine-stderr", "", &errt) == 0);
    CHECKF(errt && strstr(errt, "refusing to write a CSA game record to") && strstr(errt, "not a regular file"),
           "a FIFO at %s: %s", p2, errt ? errt : "");
    free(errt);
    CHECKF(compat_check_regular_file(p2, e, sizeof e) != 0, "the FIFO %s was replaced", p2);
    snprintf(p2, sizeof p2, "%s/game-0001.csa", p);
    CHECKF(compat_file_exists(p2), "%s not written", p2);
#endif
}

/* ---- the options (config/config.h rows) ------------------------------------------------------- */
/* --help lists every option; a --config file gives flags as the command
 * line does (the command line wins), and --option1 from the file and from
 * the command line all reach the engine, the file's first; a bad value is
 * refused naming its flag, with the usage line. */
static void test_flags(void) {
    static const char *const names[] = {
        "engine1", "engine2", "option1", "option2", "name1", "name2", "games", "openings", "random-plies",
        "seed", "byoyomi", "time", "inc", "tolerance", "max-ply", "concurrency", "db", "run", "cycle1",
        "cycle2", "csa-dir", "engine-stderr", "init-timeout", "quiet", "progress", "config"};
    char *out = NULL, *errt = NULL;
    const char *h[] = {g_match, "--help", NULL};
    CHECK(run_capture(h, &out, &errt) == 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "\n  --%s ", names[i]);
        CHECKF(out && strstr(out, flag), "--help lists --%s", names[i]);
    }
    free(out), free(errt);

    char e1[1200], e2[1200], log[900], ini[900];
    snprintf(log, sizeof log, "%s", t_path("flags.log"));
    snprintf(ini, sizeof ini, "%s", t_path("flags.ini"));
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 31 --log \"%s\"", g_fake, log);
    snprintf(e2, sizeof e2, "\"%s\" --name beta --seed 32", g_fake);
    FILE *f = fopen(ini, "w");
    KOMA_ASSERT(f);
    fprintf(f, "engine1 = %s\nengine2 = %s\noption1 = Hash=16\noption1 = FakeOption=file\ngames = 3\n"
               "byoyomi = 200\ntolerance = " TOLERANCE "\nmax-ply = 6\nengine-stderr =\nquiet = true\n", e1, e2);
    fclose(f);
    const char *a[] = {g_match, "--config", ini, "--option1", "FakeOption=cli", "--games", "2", NULL};
    CHECK(run_capture(a, &out, &errt) == 0);
    CHECKF(out && strstr(out, "engine1: +0 =2 -0"), "2 games (the command line's), drawn at move 6: %s", out);
    free(out), free(errt);
    char err[256];
    size_t len = 0;
    char *t = compat_read_file(log, &len, err, sizeof err);
    const char *p1 = t ? strstr(t, "setoption name Hash value 16") : NULL;
    const char *p2 = t ? strstr(t, "setoption name FakeOption value file") : NULL;
    const char *p3 = t ? strstr(t, "setoption name FakeOption value cli") : NULL;
    CHECKF(p1 && p2 && p3 && p1 < p2 && p2 < p3, "engine1's setoptions, the file's then the command line's: %s",
           t ? t : err);
    free(t);

    const char *bad[] = {g_match, "--engine1", e1, "--engine2", e2, "--max-ply", "100000", NULL};
    CHECK(run_capture(bad, &out, &errt) == 2);
    CHECKF(errt && strstr(errt, "max-ply") && strstr(errt, "100000") && strstr(errt, "usage: "),
           "a bad value: %s", errt ? errt : "");
    free(out), free(errt);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_usi_match USI_MATCH FAKE_USI\n");
        return 2;
    }
    g_match = argv[1];
    g_fake = argv[2];
    t_scratch("test_usi_match");
    test_match();
    test_killed();
    test_fischer();
    test_output();
    test_time_use();
    test_outputs();
    test_flags();
    int rc = t_done("test_usi_match");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
