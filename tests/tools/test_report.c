/* test_report.c - report on a synthetic run (tests/tools/make_report_fixture)
 * writes one self-contained HTML page with the expected SVG charts, real
 * points in them, the tables (a match of two outside engines with its games
 * among the matches, kept out of the self-play figures), and nothing
 * fetched from the network; on a
 * partial run and an empty database it writes a page with "no data yet" in
 * place of every missing chart; a directory without a database is an error
 * (exit 1, naming the path) and bad arguments fail cleanly. The training
 * steps are counted as the trainer numbers them (from 1); the hours chart's
 * note never overlaps its title, and a 1-cycle run's hours axis starts at 0. The false resignations by cycle (schema v3) are in a chart
 * and a table with the numbers of koma.db and the resign threshold, a cycle
 * written before v3 is left out; inspect prints them too. A match that
 * never finished (games, no Elo) is marked unfinished in both.
 *
 *   test_report REPORT MAKE_REPORT_FIXTURE [INSPECT]
 */
#include <math.h>

#include "data/db.h"
#include "tools_test.h"

static char *g_html;
static char buf[1 << 20]; /* a chart copied out of the page */

static int count(const char *needle) {
    int n = 0;
    for (const char *p = g_html; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The <svg>...</svg> whose title is `title`, copied into buf ("" if none). */
static const char *chart(const char *title, char *buf, size_t len) {
    char key[256];
    snprintf(key, sizeof key, "class=\"title\">%s</text>", title);
    const char *t = strstr(g_html, key);
    buf[0] = 0;
    if (!t) return buf;
    const char *a = t;
    while (a > g_html && strncmp(a, "<svg", 4) != 0) a--;
    const char *b = strstr(t, "</svg>");
    if (!b) return buf;
    size_t n = (size_t)(b - a) + 6;
    if (n >= len) n = len - 1;
    memcpy(buf, a, n);
    buf[n] = 0;
    return buf;
}

static int occurrences(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Resignation figures of the fixture's cycles, from koma.db. */
typedef struct {
    int n;
    long long cycle[32], games[32], nr[32], wr[32], fr[32];
} resign_rows_t;

static void collect_resign(int nc, const char *const *c, void *user) {
    resign_rows_t *r = user;
    if (r->n >= 32 || nc < 5) return;
    r->cycle[r->n] = atoll(c[0]);
    r->games[r->n] = atoll(c[1]);
    r->nr[r->n] = atoll(c[2]);
    r->wr[r->n] = atoll(c[3]);
    r->fr[r->n] = atoll(c[4]);
    r->n++;
}

/* One row of results (black, white, draws, mean plies) as inspect prints them. */
static void collect_results(int nc, const char *const *c, void *user) {
    if (nc < 4 || !c[0] || !c[3]) return;
    snprintf(user, 160, " %6lld %6lld %6lld %7.1f ", atoll(c[0]), atoll(c[1]), atoll(c[2]), atof(c[3]));
}

static int load(const char *path) {
    char err[256];
    size_t len;
    free(g_html);
    g_html = compat_read_file(path, &len, err, sizeof err);
    if (!g_html) fprintf(stderr, "%s\n", err);
    return g_html ? 0 : -1;
}

/* Every page: well-formed enough, self-contained: no request, the one script inline (the board's, when
 * the page has games) and no broken number outside it. */
static void check_page(void) {
    CHECK(strncmp(g_html, "<!DOCTYPE html>", 15) == 0);
    CHECK(count("</html>") == 1);
    CHECK(count("<svg") == count("</svg>"));
    CHECK(count("<table") == count("</table>"));
    CHECK(count("http://") == 0 && count("https://") == 0 && count("<link") == 0 && count("src=") == 0);
    CHECK(count("<script") == count("</script>") && count("<script") <= 1);
    CHECK(count("<script") == (strstr(g_html, "window.KOMA_GAMES") != NULL));
    char *s = strstr(g_html, "<script>"), *e = s ? strstr(s, "</script>") : NULL;
    char saved = 0;
    if (s && e) saved = *s, *s = 0;                                       /* the page up to the script, */
    CHECK(count("NaN") == 0 && count("nan,") == 0 && count("inf,") == 0); /* no broken coordinates */
    if (s && e) {
        *s = saved;
        CHECK(strstr(e, "NaN") == NULL && strstr(e, "nan,") == NULL && strstr(e, "inf,") == NULL);
    }
}

/* The outside engines' match of the full run: two games, recorded one by one, and its Elo. */
static void add_outside_match(const char *full) {
    char dbp[1000], err[DB_ERR_MAX];
    snprintf(dbp, sizeof dbp, "%s/koma.db", full);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbp, 0, &db, err, sizeof err) == DB_OK);
    db_match_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.engine_a, sizeof m.engine_a, "engine1: Alpha <1.0>");
    snprintf(m.engine_b, sizeof m.engine_b, "engine2: Beta");
    snprintf(m.opponent, sizeof m.opponent, "engine2: Beta");
    snprintf(m.settings, sizeof m.settings, "usi-match byoyomi 100");
    CHECK(db_match_begin(db, &m) == DB_OK);
    db_game_t g;
    memset(&g, 0, sizeof g);
    g.start_sfen = "startpos";
    g.moves = "7g7f 3c3d";
    g.plies = 2;
    g.result = DB_RESULT_BLACK_WIN;
    g.reason = DB_REASON_RESIGN;
    g.black = m.engine_a, g.white = m.engine_b;
    CHECK(db_match_game_insert(db, m.id, &g) == DB_OK);
    g.reason = DB_REASON_TIME; /* never in the fixture's self-play games */
    g.black = m.engine_b, g.white = m.engine_a;
    CHECK(db_match_game_insert(db, m.id, &g) == DB_OK);
    CHECK(db_match_get(db, m.id, &m) == DB_OK && m.wins == 1 && m.losses == 1);
    m.elo = 0, m.elo_lo = -300, m.elo_hi = 300;
    CHECK(db_match_finish(db, &m) == DB_OK);
    db_close(db);
}

/* The full run's charts: each title present, points in the ones with data. */
static void full_charts(void) {
    const char *titles[] = {"Losses", "Accuracy", "Learning rate", "Gradient norm (before clipping)",
                            "Elo by cycle (cycle 0 = 0, 95% interval)", "Positions per second",
                            "Network evaluations per second", "Average inference batch", "Inference device busy",
                            "Self-play results", "Average game length", "False resignations in no-resign games",
                            "Game length", "How games ended"};
    for (size_t i = 0; i < sizeof titles / sizeof titles[0]; i++) {
        chart(titles[i], buf, sizeof buf);
        if (!buf[0]) fprintf(stderr, "chart '%s' missing\n", titles[i]);
        CHECK(buf[0] != 0);
    }
    /* Losses: four series with many points each, and a legend. */
    chart("Losses", buf, sizeof buf);
    CHECK(occurrences(buf, "<polyline") == 4);
    CHECK(strstr(buf, ">policy</text>") && strstr(buf, ">value</text>") && strstr(buf, ">legal</text>"));
    CHECK(occurrences(buf, ",") >= 4 * 400); /* 2000 steps in 4-step buckets: 500 points a series */
    CHECK(strstr(buf, ">training step</text>") != NULL);
    /* Elo: nine rated cycles (0..8), each with a point and an error bar. */
    chart("Elo by cycle (cycle 0 = 0, 95% interval)", buf, sizeof buf);
    CHECK(occurrences(buf, "<circle") == 9);
    CHECK(occurrences(buf, "class=\"err\"") >= 8);
    /* The same ratings by hours: the nets whose cycle has timed metrics (0..7). */
    chart("Elo by hours of running (cycle 0 = 0, 95% interval)", buf, sizeof buf);
    CHECK(occurrences(buf, "<circle") == 8 && strstr(buf, ">hours</text>") != NULL);
    /* its note does not fit beside the title: it is on a line of its own, not drawn over the title */
    CHECK(strstr(buf, "y=\"22\" class=\"small\"") == NULL && strstr(buf, "y=\"39\" class=\"small\"") != NULL);
    /* hours of running: the fixture's day between cycles 3 and 4 is left
     * out, so the axis ends near 8 cycles x 10 minutes, not a day later */
    {
        double xmax = -1;
        const char *key = "text-anchor=\"middle\">";
        for (const char *p = buf; (p = strstr(p, key)); p += strlen(key)) xmax = fmax(xmax, atof(p + strlen(key)));
        CHECK(xmax >= 1.0 && xmax <= 2.0);
    }
    /* Throughput: one point per cycle (0..7). */
    chart("Positions per second", buf, sizeof buf);
    CHECK(occurrences(buf, "<circle") == 8);
}

/* The full run's false resignations: the chart, and the table with koma.db's numbers. */
static void full_resignations(const char *dbp_full) {
    /* False resignations: cycles 1..7 recorded them (cycle 0's row is as
     * a binary before schema v3 wrote it), two series, the threshold. */
    chart("False resignations in no-resign games", buf, sizeof buf);
    CHECK(occurrences(buf, "<circle") == 2 * 7);
    CHECK(occurrences(buf, "<polyline") == 2);
    CHECK(strstr(buf, ">resign threshold 0.05</text>") != NULL);
    CHECK(strstr(buf, "false, % of would-be: 0 =") == NULL); /* no point for cycle 0 */
    /* The table: one row per recorded cycle with the database's numbers. */
    resign_rows_t rr;
    memset(&rr, 0, sizeof rr);
    CHECK(t_sql_rows(dbp_full, "SELECT cycle, black_wins + white_wins + draws, no_resign_games, would_resign, "
                               "false_resign FROM cycle_metrics WHERE no_resign_games IS NOT NULL ORDER BY cycle",
                     collect_resign, &rr) == 7);
    CHECK(t_sql_int(dbp_full, "SELECT count(*) FROM cycle_metrics WHERE cycle = 0 AND no_resign_games IS NULL") ==
          1);
    for (int i = 0; i < rr.n; i++) {
        char row[256];
        snprintf(row, sizeof row,
                 "<tr><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%.1f%%</td>"
                 "<td>0.05</td></tr>",
                 rr.cycle[i], rr.games[i], rr.nr[i], rr.wr[i], rr.fr[i], 100.0 * (double)rr.fr[i] / (double)rr.wr[i]);
        if (count(row) != 1) fprintf(stderr, "no table row %s\n", row);
        CHECK(count(row) == 1);
        CHECK(rr.games[i] == 120 && rr.nr[i] == 24 && rr.fr[i] <= rr.wr[i] && rr.wr[i] <= rr.nr[i]);
    }
    CHECK(count("<th>false-resignation rate</th>") == 1);
}

/* The full run's game lengths and endings, the tables and the figures. */
static void full_tables(void) {
    /* Game lengths: bars holding all 8 x 120 games. */
    chart("Game length", buf, sizeof buf);
    CHECK(occurrences(buf, "class=\"bar\"") >= 10);
    long long sum = 0;
    for (const char *p = buf; (p = strstr(p, " plies: ")); p += 8) sum += atoll(p + 8);
    CHECK(sum == 8 * 120);
    chart("How games ended", buf, sizeof buf);
    CHECK(strstr(buf, ">checkmate</text>") && strstr(buf, ">resign</text>") && strstr(buf, ">max_ply</text>"));
    /* Tables: the models (cycles 0..8) and the matches (8 + 1 external). */
    CHECK(count("models/cycle-0008.safetensors") == 1);
    CHECK(count("gpsshogi (smp) vm r3033") == 1);
    CHECK(count(">cycle 7</td>") == 1);
    /* The outside engines' match: both names, its games, how they ended;
     * not in the self-play figures (8 x 120 games, checked above too). */
    CHECK(count(">engine1: Alpha &lt;1.0&gt;</td>") == 1 && count(">engine2: Beta</td>") == 1);
    CHECK(count("<td>-</td><td class=\"l\">engine1") == 1); /* no cycle */
    CHECK(count("2 match games, ended by resign 1, time 1") == 1);
    CHECK(count("<b>960</b><span>self-play games</span>") == 1);
    /* 8 cycles x 250 steps, numbered from 1 as the trainer does (not one more) */
    CHECK(count("<b>2000</b><span>training steps</span>") == 1);
    CHECK(count("<b>2</b><span>match games</span>") == 1);
    chart("How games ended", buf, sizeof buf);
    CHECK(buf[0] && !strstr(buf, ">time</text>"));
}

/* A partial run: training under way, nothing else. */
static void test_partial(const char *report, const char *fixture) {
    char out[1000];
    char part[900];
    snprintf(part, sizeof part, "%s", t_path("partial"));
    const char *mk_p[] = {fixture, part, "--partial", NULL};
    CHECK(t_run(mk_p) == 0);
    const char *rep_p[] = {report, part, NULL};
    CHECK(t_run(rep_p) == 0);
    snprintf(out, sizeof out, "%s/report.html", part);
    CHECK(load(out) == 0);
    if (g_html) {
        check_page();
        chart("Losses", buf, sizeof buf);
        CHECK(occurrences(buf, "<polyline") == 4 && !strstr(buf, "no data yet"));
        chart("Elo by cycle (cycle 0 = 0, 95% interval)", buf, sizeof buf);
        CHECK(strstr(buf, "no data yet") != NULL && !strstr(buf, "<polyline"));
        chart("Game length", buf, sizeof buf);
        CHECK(strstr(buf, "no data yet") != NULL);
        /* Elo by cycle and by hours, 7 self-play, 2 games, the board; the models are listed */
        CHECK(count("no data yet") == 12);
        CHECK(count("<h2>Games on the board</h2><p class=\"muted\">no data yet: no game has been recorded</p>") == 1);
        CHECK(count("<th>false-resignation rate</th>") == 0);
    }
}

/* An empty database, and a run directory without one. */
static void test_empty_and_bare(const char *report, const char *fixture) {
    char out[1000];
    char empty[900];
    snprintf(empty, sizeof empty, "%s", t_path("empty"));
    const char *mk_e[] = {fixture, empty, "--empty", NULL};
    CHECK(t_run(mk_e) == 0);
    const char *rep_e[] = {report, empty, NULL};
    CHECK(t_run(rep_e) == 0);
    snprintf(out, sizeof out, "%s/report.html", empty);
    CHECK(load(out) == 0);
    if (g_html) {
        check_page();
        CHECK(count("no data yet") == 17); /* 15 charts, the board and the models table */
        CHECK(count("<polyline") == 0 && count("<circle") == 0);
    }
    char bare[900], err[256];
    snprintf(bare, sizeof bare, "%s", t_path("bare"));
    KOMA_ASSERT(compat_mkdir_p(bare, err, sizeof err) == 0);
    /* a directory without koma.db: nothing to report is an error naming the database's path, no page */
    const char *rep_b[] = {report, bare, NULL};
    int st_b = -1;
    char e_b[512];
    CHECK(compat_run_io(rep_b, "", t_path("bare.txt"), &st_b, e_b, sizeof e_b) == 0 && st_b == 1);
    snprintf(out, sizeof out, "%s/report.html", bare);
    CHECK(!compat_file_exists(out));
    CHECK(load(t_path("bare.txt")) == 0);
    CHECKF(g_html && strstr(g_html, "bare/koma.db") && strstr(g_html, "no koma.db"), "report on a bare directory: %s",
           g_html ? g_html : "");
}

/* A run of one cycle: the hours axis starts at 0, not at -1. */
static void test_one_cycle(const char *report, const char *fixture) {
    char out[1000];
    char one[900];
    snprintf(one, sizeof one, "%s", t_path("one"));
    const char *mk_1[] = {fixture, one, "--cycles", "1", NULL};
    CHECK(t_run(mk_1) == 0);
    const char *rep_1[] = {report, one, NULL};
    CHECK(t_run(rep_1) == 0);
    snprintf(out, sizeof out, "%s/report.html", one);
    CHECK(load(out) == 0);
    if (g_html) {
        check_page();
        chart("Elo by hours of running (cycle 0 = 0, 95% interval)", buf, sizeof buf);
        CHECK(occurrences(buf, "<circle") >= 1);
        double xmin = 1e9;
        const char *key = "text-anchor=\"middle\">"; /* the x ticks (and the axis label) */
        for (const char *p = buf; (p = strstr(p, key)); p += strlen(key))
            if (p[strlen(key)] == '-' || (p[strlen(key)] >= '0' && p[strlen(key)] <= '9'))
                xmin = fmin(xmin, atof(p + strlen(key)));
        CHECKF(xmin == 0.0, "1-cycle run: the hours axis starts at %g", xmin);
    }
}

/* An unfinished match (begun, one game, never finished): marked so. */
static void test_unfinished(const char *report, const char *full, const char *dbp_full) {
    {
        char err2[DB_ERR_MAX];
        db_t *db = NULL;
        KOMA_ASSERT(db_open(dbp_full, 0, &db, err2, sizeof err2) == DB_OK);
        db_match_t m;
        memset(&m, 0, sizeof m);
        snprintf(m.engine_a, sizeof m.engine_a, "engine1: Gamma");
        snprintf(m.engine_b, sizeof m.engine_b, "engine2: Delta");
        snprintf(m.opponent, sizeof m.opponent, "Delta");
        snprintf(m.settings, sizeof m.settings, "usi-match killed");
        CHECK(db_match_begin(db, &m) == DB_OK);
        db_game_t g;
        memset(&g, 0, sizeof g);
        g.start_sfen = "startpos";
        g.moves = "";
        g.result = DB_RESULT_WHITE_WIN;
        g.reason = DB_REASON_RESIGN;
        g.black = m.engine_a, g.white = m.engine_b;
        CHECK(db_match_game_insert(db, m.id, &g) == DB_OK);
        db_close(db);
    }
    const char *rep_u[] = {report, full, "-o", t_path("unfinished.html"), NULL};
    CHECK(t_run(rep_u) == 0);
    CHECK(load(t_path("unfinished.html")) == 0);
    if (g_html) {
        check_page();
        CHECK(count(">unfinished</td>") == 1);
        CHECK(count("</td><td>1</td><td>0</td><td>0</td><td>1</td><td class=\"muted\">-</td><td class=\"muted\">"
                    "unfinished</td><td class=\"l\">usi-match killed</td>") == 1);
    }
}

/* inspect: the same figures in its cycles table. */
static void test_inspect(const char *inspect, const char *full, const char *dbp_full) {
    const char *insp[] = {inspect, full, NULL};
    int status = -1;
    char e[512];
    CHECK(compat_run_io(insp, t_path("inspect.txt"), "", &status, e, sizeof e) == 0 && status == 0);
    CHECK(load(t_path("inspect.txt")) == 0);
    int failed_before = atomic_load(&g_fail);
    if (g_html) { /* text mode on Windows: lines end in \r\n */
        char *o = g_html;
        for (const char *q = g_html; *q; q++)
            if (*q != '\r') *o++ = *q;
        *o = 0;
        CHECK(count("no-resign   false-res   rate") == 1);
        CHECK(count("resign threshold 0.05") == 1);
        resign_rows_t rr;
        memset(&rr, 0, sizeof rr);
        t_sql_rows(dbp_full, "SELECT cycle, black_wins + white_wins + draws, no_resign_games, would_resign, "
                             "false_resign FROM cycle_metrics WHERE no_resign_games IS NOT NULL ORDER BY cycle",
                   collect_resign, &rr);
        CHECK(rr.n == 7);
        for (int i = 0; i < rr.n; i++) {
            char fr[64], tail[128];
            snprintf(fr, sizeof fr, "%lld/%lld", rr.fr[i], rr.wr[i]);
            snprintf(tail, sizeof tail, " %10lld %11s %5.1f%%\n", rr.nr[i], fr,
                     100.0 * (double)rr.fr[i] / (double)rr.wr[i]);
            if (count(tail) < 1) fprintf(stderr, "inspect: no cycle line ending '%s'\n", tail);
            CHECK(count(tail) >= 1);
        }
        /* cycle 0, written before v3: its figures are not recorded */
        CHECK(count("          -           -      -\n") == 1);
        CHECK(count("engine1: Gamma vs Delta: 1 games +0 =0 -1  unfinished, no Elo  usi-match killed") == 1);
        /* the engine in the matches list and in the joint rating list, with cycle 0 anchored at 0 */
        CHECK(count("model ") >= 2 && count("gpsshogi (smp) vm r3033") == 2);
        CHECK(count("ratings      joint fit over every match, cycle 0 = 0") == 1);
        CHECK(count("    cycle 0                                        +0 [    +0,     +0]") == 1);
        if (atomic_load(&g_fail) > failed_before) fprintf(stderr, "inspect printed:\n%s", g_html);
    }
    /* A kill mid-cycle leaves the cycle's metrics row blank (zeros, no plies) while its games
     * are stored: inspect counts results and lengths from the games themselves. */
    sqlite3 *sq = NULL;
    CHECK(sqlite3_open(dbp_full, &sq) == SQLITE_OK &&
          sqlite3_exec(sq, "UPDATE cycle_metrics SET black_wins = 0, white_wins = 0, draws = 0, avg_plies = NULL, "
                           "positions_per_s = NULL WHERE cycle = 2", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(sq);
    char want[160] = "(no games)";
    t_sql_rows(dbp_full, "SELECT sum(g.result = 1), sum(g.result = -1), sum(g.result = 0), avg(g.plies) "
                         "FROM games g JOIN shards s ON g.shard_id = s.id WHERE s.cycle = 2",
               collect_results, want);
    CHECK(compat_run_io(insp, t_path("inspect2.txt"), "", &status, e, sizeof e) == 0 && status == 0);
    CHECK(load(t_path("inspect2.txt")) == 0);
    CHECKF(g_html && strstr(g_html, want), "inspect's cycle 2 line does not show '%s' from the games:\n%s", want,
           g_html ? g_html : "");
    /* a FIFO as --shard is refused by name at once (the open blocked for ever) */
    const char *mk[] = {"mkfifo", t_path("shard.fifo"), NULL};
    if (compat_run(mk, &status, e, sizeof e) == 0 && status == 0) {
        const char *fi[] = {inspect, "--shard", t_path("shard.fifo"), NULL};
        compat_proc_t *p = compat_proc_spawn(fi, t_path("inspect_fifo.txt"), e, sizeof e);
        CHECK(p != NULL);
        int ended = p && compat_proc_wait(p, 60000, &status) == 0;
        CHECKF(ended, "inspect --shard FIFO still runs after 60 s");
        compat_proc_free(p);
        char *out = compat_read_file(t_path("inspect_fifo.txt"), NULL, e, sizeof e);
        CHECKF(ended && status != 0 && out && strstr(out, "shard.fifo") && strstr(out, "not a regular file"),
               "inspect --shard FIFO: status %d, %s", status, out ? out : e);
        free(out);
    }
}

/* A net's evaluation match with one game it lost (A = the net of `cycle`); returns the game's id. */
static int64_t add_eval_loss(const char *dbp, int cycle) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbp, 0, &db, err, sizeof err) == DB_OK);
    db_model_t a, b;
    KOMA_ASSERT(db_model_by_cycle(db, cycle, &a) == DB_OK && db_model_by_cycle(db, cycle - 1, &b) == DB_OK);
    db_match_t m;
    memset(&m, 0, sizeof m);
    m.cycle = cycle, m.model_a = a.id, m.model_b = b.id;
    snprintf(m.engine_a, sizeof m.engine_a, "cycle %d (%.200s)", cycle, a.path);
    snprintf(m.engine_b, sizeof m.engine_b, "cycle %d (%.200s)", cycle - 1, b.path);
    snprintf(m.settings, sizeof m.settings, "eval visits=8");
    CHECK(db_match_begin(db, &m) == DB_OK);
    db_game_t g;
    memset(&g, 0, sizeof g);
    g.start_sfen = "startpos";
    g.moves = "7g7f 3c3d 8h2b+ 3a2b B*4e";
    g.plies = 5;
    g.result = DB_RESULT_BLACK_WIN; /* A had White: lost */
    g.reason = DB_REASON_RESIGN;
    g.black = m.engine_b, g.white = m.engine_a;
    CHECK(db_match_game_insert(db, m.id, &g) == DB_OK);
    db_close(db);
    return g.id;
}

/* The games on the board: for each cycle its longest game (the fixture's games end by max ply, checkmate,
 * declaration, resignation... in any order), their moves as koma.db holds them, no values where the shard
 * file is missing (said so), a net's lost evaluation game, a game named with --game (a match game too),
 * and a game id the run does not hold refused with a message naming it. */
static void test_board(const char *report, const char *full, const char *dbp_full) {
    int64_t lost = add_eval_loss(dbp_full, 8);
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)lost);
    const char *rep[] = {report, full, "-o", t_path("board.html"), "--game", "5", "--game", "-1", NULL};
    CHECK(t_run(rep) == 0);
    CHECK(load(t_path("board.html")) == 0);
    if (!g_html) return;
    check_page();
    CHECK(count("<h2>Games on the board</h2>") == 1 && count("window.KOMA_GAMES=") == 1);
    for (int c = 0; c < 8; c++) {
        char key[64];
        snprintf(key, sizeof key, "\"title\":\"net %d · longest", c);
        CHECKF(count(key) == 1, "cycle %d's longest game: %d", c, count(key));
    }
    /* cycle 8's net has no self-play games yet, only the evaluation game it lost */
    char key[128];
    snprintf(key, sizeof key, "\"id\":%s,\"c\":8,\"title\":\"net 8 · lost in evaluation · 5 plies", id);
    CHECKF(count(key) == 1, "the lost evaluation game %s", id);
    CHECK(count("\"m\":\"7g7f 3c3d 8h2b+ 3a2b B*4e\"") >= 1);
    CHECK(count("\"id\":5,") == 1 && count("\"id\":-1,") == 1 && count("· named") == 2);
    /* game 5's moves as stored */
    char sql[128], *moves = NULL;
    snprintf(sql, sizeof sql, "SELECT moves FROM games WHERE id = 5");
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(dbp_full, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            moves = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    CHECK(moves && strlen(moves) > 20);
    if (moves) {
        char *k = malloc(strlen(moves) + 16);
        sprintf(k, "\"m\":\"%s\"", moves);
        CHECK(count(k) == 1);
        free(k), free(moves);
    }
    /* the fixture writes no shard files: no values, and the page says why */
    CHECK(count("\"v\":\"") == 0 && count("values not available: ") >= 8 && count(".safetensors: no such file") >= 8);
    /* --game of a game the run does not hold, or not an id */
    const char *none[] = {report, full, "-o", t_path("none.html"), "--game", "987654", NULL};
    int st = -1;
    char e[256];
    CHECK(compat_run_io(none, "", t_path("none.txt"), &st, e, sizeof e) == 0 && st == 1);
    CHECK(!compat_file_exists(t_path("none.html")));
    CHECK(load(t_path("none.txt")) == 0);
    CHECKF(g_html && strstr(g_html, "--game 987654") && strstr(g_html, "koma.db") && strstr(g_html, "no such game"),
           "--game 987654: %s", g_html ? g_html : "");
    const char *bad[] = {report, full, "--game", "five", NULL};
    CHECK(t_run(bad) == 2);
}

/* A long run (1,000 cycles): the page stays under 2 MB even were the board's games as large as its budget
 * allows: the newest 20 cycles and 20 spread over the earlier ones, the charts without markers and the
 * tables with their newest rows. */
static void test_long_run(const char *report, const char *fixture) {
    char dir[900];
    snprintf(dir, sizeof dir, "%s", t_path("long"));
    const char *mk[] = {fixture, dir, "--cycles", "1000", "--games-per-cycle", "4", "--steps-per-cycle", "10", NULL};
    CHECK(t_run(mk) == 0);
    const char *rep[] = {report, dir, "-o", t_path("long.html"), NULL};
    CHECK(t_run(rep) == 0);
    CHECK(load(t_path("long.html")) == 0);
    if (!g_html) return;
    check_page();
    size_t size = strlen(g_html);
    const char *a = strstr(g_html, "window.KOMA_GAMES="), *b = a ? strstr(a, "]};") : NULL;
    CHECK(a && b);
    size_t games = a && b ? (size_t)(b - a) : size;
    fprintf(stderr, "long run: page %zu bytes, games %zu bytes\n", size, games);
    CHECKF(size - games + 1200000 <= 2000000, "1,000 cycles: page %lu bytes, %lu of them games", (unsigned long)size,
           (unsigned long)games);
    CHECK(count("40 of 1000 nets (the newest 20, and earlier ones spread over the run)") == 1);
    CHECK(count("\"title\":\"net 999 · longest") == 1 && count("\"title\":\"net 0 · longest") == 1 &&
          count("\"title\":\"net 500 · longest") == 0);
    CHECK(count("earlier matches not shown") == 1 && count("earlier models not shown") == 1);
}

/* Failures. */
static void test_failures(const char *report, const char *full) {
    char err[256];
    const char *missing[] = {report, t_path("no-such-run"), NULL};
    CHECK(t_run(missing) == 1);
    FILE *f = fopen(t_path("not-a-db/koma.db"), "w");
    if (!f) {
        KOMA_ASSERT(compat_mkdir_p(t_path("not-a-db"), err, sizeof err) == 0);
        f = fopen(t_path("not-a-db/koma.db"), "w");
    }
    fprintf(f, "this is not a database, just text that is long enough to look like a header .........\n");
    fclose(f);
    const char *notdb[] = {report, t_path("not-a-db"), NULL};
    CHECK(t_run(notdb) == 1);
    const char *usage[] = {report, NULL};
    CHECK(t_run(usage) == 2);
    const char *noout[] = {report, full, "-o", t_path("no/such/dir/r.html"), NULL};
    CHECK(t_run(noout) == 1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_report REPORT MAKE_REPORT_FIXTURE\n");
        return 2;
    }
    const char *report = argv[1], *fixture = argv[2];
    t_scratch("test_report");

    /* ---- a full synthetic run ---- */
    char full[900];
    snprintf(full, sizeof full, "%s", t_path("full"));
    const char *mk[] = {fixture, full, "--cycles", "8", NULL};
    CHECK(t_run(mk) == 0);
    char dbp_full[1000];
    snprintf(dbp_full, sizeof dbp_full, "%s/koma.db", full);
    add_outside_match(full);
    const char *rep[] = {report, full, NULL};
    CHECK(t_run(rep) == 0);
    char out[1000];
    snprintf(out, sizeof out, "%s/report.html", full);
    CHECK(load(out) == 0);
    if (g_html) {
        check_page();
        CHECK(count("no data yet") == 0);
        full_charts();
        full_resignations(dbp_full);
        full_tables();
    }
    /* -o elsewhere */
    const char *rep_o[] = {report, full, "-o", t_path("other.html"), NULL};
    CHECK(t_run(rep_o) == 0 && compat_file_exists(t_path("other.html")));

    test_partial(report, fixture);
    test_empty_and_bare(report, fixture);
    test_one_cycle(report, fixture);
    test_unfinished(report, full, dbp_full);
    if (argc > 3) test_inspect(argv[3], full, dbp_full);
    test_board(report, full, dbp_full);
    test_long_run(report, fixture);
    test_failures(report, full);

    free(g_html);
    int rc = t_done("test_report");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
