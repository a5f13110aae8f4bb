/* test_report_board.c - the report's board in a real browser: Debian's
 * chromium, headless, loads the page report wrote for a synthetic run
 * (tests/tools/make_report_fixture: games of random legal moves) with a
 * query string that selects a game and a move (?game=ID&move=N) and dumps
 * the DOM it drew (--dump-dom: chromium exits once the page has loaded, the
 * event this test waits for); then, driven through the DevTools protocol
 * (--remote-debugging-pipe), it gets real key presses and mouse clicks.
 * Every square and both hands are checked against the position the game's
 * moves (read from koma.db) give when the engine replays them: the start, a
 * position with pieces in both hands (in letters too), the last, a match
 * game's capture, promotion, capture of a promoted piece and drop; moves
 * stepped with the keys (arrows, PageDown, End) and the buttons, letters
 * switched on with L, and the next game's last position (ArrowDown, End).
 * The value shown at each position is checked against a value string that
 * uses every character of report_games.c's encoding.
 * Skips (77) with the reason when no chromium is installed (tools/deps.sh
 * --test installs it). POSIX only (not registered in the Windows build).
 *
 *   test_report_board REPORT MAKE_REPORT_FIXTURE [CHROMIUM]
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
    char profile[900], out[900], errp[900], arg[1500];
    snprintf(profile, sizeof profile, "--user-data-dir=%s", t_path("chromium-profile"));
    snprintf(out, sizeof out, "%s", t_path("dom.html"));
    snprintf(errp, sizeof errp, "%s", t_path("chromium.err"));
    snprintf(arg, sizeof arg, "%s", url);
    /* --no-sandbox: root in a container; its own profile: never another chromium's running instance */
    const char *argv[] = {g_chromium,
                          "--headless",
                          "--no-sandbox",
                          "--disable-gpu",
                          "--disable-dev-shm-usage",
                          "--no-first-run",
                          "--no-default-browser-check",
                          "--disable-extensions",
                          profile,
                          "--dump-dom",
                          arg,
                          NULL};
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

/* ---- chromium driven through the DevTools protocol (--remote-debugging-pipe: JSON messages ending in
 * NUL, ours on its fd 3, its own on its fd 4) ---------------------------------------------------------- */
typedef struct {
    pid_t pid;
    int to, from; /* our ends */
    char *buf;    /* what it sent that is not read yet */
    size_t n, cap;
    int next_id;
    char session[128];
} cdp_t;

static int cdp_start(cdp_t *c) {
    int to[2], from[2];
    memset(c, 0, sizeof *c);
    if (pipe(to) != 0 || pipe(from) != 0) return -1;
    char profile[900], log[900];
    snprintf(profile, sizeof profile, "--user-data-dir=%s", t_path("chromium-cdp-profile"));
    snprintf(log, sizeof log, "%s", t_path("chromium-cdp.err"));
    c->pid = fork();
    if (c->pid < 0) return -1;
    if (c->pid == 0) { /* its fds 3 and 4, through fds above them first (a pipe end may be 3 or 4 already) */
        int r = fcntl(to[0], F_DUPFD, 10), w = fcntl(from[1], F_DUPFD, 10);
        int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (r < 0 || w < 0 || dup2(r, 3) < 0 || dup2(w, 4) < 0) _exit(126);
        if (err >= 0) dup2(err, 1), dup2(err, 2);
        for (int fd = 5; fd < 64; fd++) close(fd);
        execlp(g_chromium, g_chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--remote-debugging-pipe",
               "--window-size=1200,900", profile, "about:blank", (char *)NULL);
        _exit(127);
    }
    close(to[0]), close(from[1]);
    c->to = to[1], c->from = from[0];
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void cdp_stop(cdp_t *c) {
    if (c->pid > 0) {
        close(c->to); /* chromium ends when its pipe closes; a stuck one is killed */
        int st = 0;
        for (int i = 0; i < 300 && waitpid(c->pid, &st, WNOHANG) == 0; i++) poll(NULL, 0, 100);
        if (waitpid(c->pid, &st, WNOHANG) == 0) kill(c->pid, SIGKILL), waitpid(c->pid, &st, 0);
        close(c->from);
    }
    free(c->buf);
    c->pid = 0;
}

/* Sends method(params) (in the attached page's session when there is one) and waits, at most 120 s, for
 * its answer: the parsed message (cJSON_Delete it), or NULL (said on stderr). Events are skipped. */
static cJSON *cdp_call(cdp_t *c, const char *method, cJSON *params) {
    int id = ++c->next_id;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "id", id);
    cJSON_AddStringToObject(m, "method", method);
    cJSON_AddItemToObject(m, "params", params ? params : cJSON_CreateObject());
    if (c->session[0]) cJSON_AddStringToObject(m, "sessionId", c->session);
    char *text = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    size_t len = strlen(text) + 1; /* with its NUL */
    for (size_t off = 0; off < len;) {
        ssize_t k = write(c->to, text + off, len - off);
        if (k <= 0 && errno != EINTR) {
            fprintf(stderr, "cdp %s: chromium's pipe: %s\n", method, strerror(errno));
            free(text);
            return NULL;
        }
        if (k > 0) off += (size_t)k;
    }
    free(text);
    int64_t t0 = compat_now_ms();
    for (;;) {
        char *end = c->buf ? memchr(c->buf, 0, c->n) : NULL;
        while (end) {
            cJSON *r = cJSON_Parse(c->buf);
            size_t used = (size_t)(end - c->buf) + 1;
            memmove(c->buf, c->buf + used, c->n - used);
            c->n -= used;
            const cJSON *rid = r ? cJSON_GetObjectItem(r, "id") : NULL;
            if (rid && (int)rid->valuedouble == id) {
                if (cJSON_GetObjectItem(r, "error")) {
                    char *e = cJSON_PrintUnformatted(r);
                    fprintf(stderr, "cdp %s: %s\n", method, e);
                    free(e);
                    cJSON_Delete(r);
                    return NULL;
                }
                return r;
            }
            cJSON_Delete(r);
            end = memchr(c->buf, 0, c->n);
        }
        int64_t left = 120000 - (compat_now_ms() - t0);
        struct pollfd pf = {c->from, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
            fprintf(stderr, "cdp %s: no answer from chromium in 120 s\n", method);
            return NULL;
        }
        if (c->cap - c->n < 65536) {
            c->cap = c->cap ? 2 * c->cap : 1 << 20;
            c->buf = realloc(c->buf, c->cap);
            KOMA_ASSERT(c->buf);
        }
        ssize_t k = read(c->from, c->buf + c->n, c->cap - c->n - 1);
        if (k <= 0) {
            fprintf(stderr, "cdp %s: chromium closed its pipe\n", method);
            return NULL;
        }
        c->n += (size_t)k;
    }
}

/* The value of a JavaScript expression in the page, as a string (malloc'ed), or NULL. */
static char *cdp_eval(cdp_t *c, const char *expr) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "expression", expr);
    cJSON_AddBoolToObject(p, "returnByValue", 1);
    cJSON *r = cdp_call(c, "Runtime.evaluate", p);
    const cJSON *v =
        r ? cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "result"), "value") : NULL;
    char *out = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(r);
    return out;
}

/* Opens url in a new page and attaches to it; waits (bounded) until the board's script has run. */
static int cdp_open(cdp_t *c, const char *url) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "url", url);
    cJSON *r = cdp_call(c, "Target.createTarget", p);
    const cJSON *tid = r ? cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "targetId") : NULL;
    if (!cJSON_IsString(tid)) {
        cJSON_Delete(r);
        return -1;
    }
    p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "targetId", tid->valuestring);
    cJSON_AddBoolToObject(p, "flatten", 1);
    cJSON_Delete(r);
    r = cdp_call(c, "Target.attachToTarget", p);
    const cJSON *sid = r ? cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "sessionId") : NULL;
    if (cJSON_IsString(sid)) snprintf(c->session, sizeof c->session, "%s", sid->valuestring);
    cJSON_Delete(r);
    if (!c->session[0]) return -1;
    /* each answer is the event waited for; the page loads while they come (bounded by the 10 minutes) */
    for (int64_t t0 = compat_now_ms(); compat_now_ms() - t0 < 600000;) {
        char *v = cdp_eval(c, "(document.getElementById('kb') || {getAttribute: function () { return ''; }})"
                              ".getAttribute('data-ready') || ''");
        int ready = v && !strcmp(v, "1");
        free(v);
        if (ready) return 0;
    }
    return -1;
}

/* A real key press (down and up), as the browser delivers one. */
static int cdp_key(cdp_t *c, const char *key, int code) {
    for (int up = 0; up < 2; up++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", up ? "keyUp" : "keyDown");
        cJSON_AddStringToObject(p, "key", key);
        cJSON_AddStringToObject(p, "code", key);
        cJSON_AddNumberToObject(p, "windowsVirtualKeyCode", code);
        cJSON *r = cdp_call(c, "Input.dispatchKeyEvent", p);
        if (!r) return -1;
        cJSON_Delete(r);
    }
    return 0;
}

/* A real mouse click in the middle of the element with that id (scrolled into view first). */
static int cdp_click(cdp_t *c, const char *id) {
    char expr[256];
    snprintf(expr, sizeof expr,
             "(function (e) { e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect(); "
             "return (r.left + r.width / 2) + ' ' + (r.top + r.height / 2); })(document.getElementById('%s'))",
             id);
    char *v = cdp_eval(c, expr);
    double x = 0, y = 0;
    int ok = v && sscanf(v, "%lf %lf", &x, &y) == 2;
    free(v);
    for (int up = 0; up < 2 && ok; up++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", up ? "mouseReleased" : "mousePressed");
        cJSON_AddNumberToObject(p, "x", x);
        cJSON_AddNumberToObject(p, "y", y);
        cJSON_AddStringToObject(p, "button", "left");
        cJSON_AddNumberToObject(p, "clickCount", 1);
        cJSON *r = cdp_call(c, "Input.dispatchMouseEvent", p);
        ok = r != NULL;
        cJSON_Delete(r);
    }
    return ok ? 0 : -1;
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
static int check_dom(char *dom, const char *dbp, const char *query, long long expect_id, int expect_n) {
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

static int check_position(const char *page, const char *dbp, const char *query, long long expect_id, int expect_n) {
    char url[1400];
    snprintf(url, sizeof url, "file://%s?%s", page, query);
    char *dom = dump_dom(url);
    CHECKF(dom != NULL, "chromium could not load %s", url);
    return dom ? check_dom(dom, dbp, query, expect_id, expect_n) : -1;
}

/* The board as the page shows it now (cdp), checked as check_position does. */
static int check_now(cdp_t *c, const char *dbp, const char *what, long long expect_id, int expect_n) {
    char *dom = cdp_eval(c, "document.getElementById('kb').outerHTML");
    CHECKF(dom != NULL, "%s: the page could not be read", what);
    return dom ? check_dom(dom, dbp, what, expect_id, expect_n) : -1;
}

/* The value string the test puts in place of game g1's (the fixture's shards do not exist, so report wrote
 * none): position i gets VALUES[i * 7 % 64] (every character of report_games.c's alphabet: k / 63 of a win
 * for Black), or '.' (none stored) when i % 10 == 9. */
static const char VALUES[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static int value_k(int i) { return i % 10 == 9 ? -1 : i * 7 % 64; }

/* Puts the value string into game id's data in the page at path (replacing its "nv" note). */
static int put_values(const char *path, long long id, int plies) {
    char err[256], key[64];
    size_t n = 0;
    char *html = compat_read_file(path, &n, err, sizeof err);
    snprintf(key, sizeof key, "{\"id\":%lld,\"c\":", id);
    char *obj = html ? strstr(html, key) : NULL, *nv = obj ? strstr(obj, ",\"nv\":\"") : NULL;
    char *end = nv ? strchr(nv + 7, '"') : NULL;
    if (!end || strchr(obj, '}') < nv) {
        free(html);
        return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(html);
        return -1;
    }
    fwrite(html, 1, (size_t)(nv - html), f);
    fputs(",\"v\":\"", f);
    for (int i = 0; i <= plies; i++) fputc(value_k(i) < 0 ? '.' : VALUES[value_k(i)], f);
    fputc('"', f);
    fwrite(end + 1, 1, n - (size_t)(end + 1 - html), f);
    fclose(f);
    free(html);
    return 0;
}

/* The search value the page says at move n of game g1 (the text above the search moves). */
static void check_value(cdp_t *c, const char *what, int n) {
    char *v = cdp_eval(c, "document.getElementById('ktop').firstChild.textContent");
    char want[64];
    if (value_k(n) < 0) snprintf(want, sizeof want, "no search value stored at this position");
    else snprintf(want, sizeof want, "Black %d%% (", (int)(value_k(n) * 100.0 / 63 + 0.5));
    CHECKF(v && !strncmp(v, want, strlen(want)), "%s: the value at move %d reads '%s', want '%s...'", what, n,
           v ? v : "(none)", want);
    free(v);
}

/* Real key presses and clicks (the DevTools protocol): stepping, the buttons, the next game, letters. */
static void test_keys(const char *page, const char *dbp, long long g1, int plies) {
    cdp_t c;
    CHECK(cdp_start(&c) == 0);
    char url[1400];
    snprintf(url, sizeof url, "file://%s?game=%lld&move=0", page, g1);
    int opened = c.pid > 0 && cdp_open(&c, url) == 0;
    CHECKF(opened, "chromium (DevTools protocol) could not open %s", url);
    if (opened) {
        /* 3 forward, 1 back, 10 forward, 1 back */
        CHECK(cdp_key(&c, "ArrowRight", 39) == 0 && cdp_key(&c, "ArrowRight", 39) == 0 &&
              cdp_key(&c, "ArrowRight", 39) == 0 && cdp_key(&c, "ArrowLeft", 37) == 0 &&
              cdp_key(&c, "PageDown", 34) == 0 && cdp_key(&c, "ArrowLeft", 37) == 0);
        CHECK(check_now(&c, dbp, "keys: 3 forward, 1 back, 10 forward, 1 back", g1, 11) == 0);
        check_value(&c, "keys", 11);
        /* the buttons: forward twice, back once */
        CHECK(cdp_click(&c, "knext") == 0 && cdp_click(&c, "knext") == 0 && cdp_click(&c, "kprev") == 0);
        CHECK(check_now(&c, dbp, "buttons: forward, forward, back", g1, 12) == 0);
        check_value(&c, "buttons", 12);
        /* every value character: 70 moves stepped one by one from move 12 */
        for (int n = 13; n <= 12 + 70 && n <= plies; n++) {
            CHECK(cdp_key(&c, "ArrowRight", 39) == 0);
            check_value(&c, "ArrowRight", n);
        }
        CHECK(cdp_key(&c, "End", 35) == 0);
        CHECK(check_now(&c, dbp, "key End", g1, plies) == 0);
        CHECK(cdp_click(&c, "kfirst") == 0);
        CHECK(check_now(&c, dbp, "button first", g1, 0) == 0);
        /* L: letters, the same position */
        CHECK(cdp_key(&c, "End", 35) == 0 && cdp_key(&c, "l", 76) == 0);
        char *svg = cdp_eval(&c, "document.getElementById('kboard').outerHTML");
        CHECK(svg && strstr(svg, "class=\"kt kl") != NULL);
        free(svg);
        CHECK(check_now(&c, dbp, "key L (letters) at the end", g1, plies) == 0);
        /* the next game in the list, to its end: its id read from the page */
        CHECK(cdp_key(&c, "ArrowDown", 40) == 0 && cdp_key(&c, "End", 35) == 0);
        char *id = cdp_eval(&c, "document.getElementById('kb').getAttribute('data-game')");
        long long next = id ? atoll(id) : 0;
        free(id);
        CHECKF(next != 0 && next != g1, "ArrowDown from game %lld shows game %lld", g1, next);
        if (next != 0 && next != g1) CHECK(check_now(&c, dbp, "keys ArrowDown, End", next, -1) == 0);
        cJSON_Delete(cdp_call(&c, "Browser.close", NULL));
    }
    cdp_stop(&c);
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
    int plies =
        (int)t_sql_int(dbp, "SELECT plies FROM games WHERE shard_id IS NOT NULL ORDER BY plies DESC, id LIMIT 1");
    KOMA_ASSERT(g1 > 0 && plies > 30);
    char id1[32], idm[32];
    snprintf(id1, sizeof id1, "%lld", g1);
    snprintf(idm, sizeof idm, "%lld", match_game);
    const char *rep[] = {report, run, "--game", id1, "--game", idm, NULL};
    KOMA_ASSERT(t_run(rep) == 0);
    KOMA_ASSERT(put_values(page, g1, plies) == 0);

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
    test_keys(page, dbp, g1, plies);

    int rc = t_done("test_report_board");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
