/* test_usi_parse.c - the protocol loop in process: `go` argument parsing,
 * `position` (SFEN, moves, illegal moves, bad SFEN), `setoption` values,
 * unknown commands, with the output captured line by line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"
#include "usi/options.h"
#include "usi/session.h"
#include "usi/usi.h"

/* ---- captured output ------------------------------------------------------------ */
enum { CAP_MAX = 512 };
typedef struct {
    compat_mutex_t mu;
    char *lines[CAP_MAX];
    int n;
} capture_t;

static void cap_write(void *user, const char *line, size_t len) {
    capture_t *c = user;
    compat_mutex_lock(&c->mu);
    if (c->n < CAP_MAX) {
        c->lines[c->n] = malloc(len + 1);
        memcpy(c->lines[c->n], line, len);
        c->lines[c->n][len] = 0;
        c->n++;
    }
    compat_mutex_unlock(&c->mu);
}

static void cap_clear(capture_t *c) {
    compat_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++) free(c->lines[i]);
    c->n = 0;
    compat_mutex_unlock(&c->mu);
}

/* A captured line containing needle (NULL if none). */
static const char *cap_find(capture_t *c, const char *needle) {
    const char *r = NULL;
    compat_mutex_lock(&c->mu);
    for (int i = 0; i < c->n && !r; i++)
        if (strstr(c->lines[i], needle)) r = c->lines[i];
    compat_mutex_unlock(&c->mu);
    return r;
}

static void cap_dump(capture_t *c) {
    for (int i = 0; i < c->n; i++) fprintf(stderr, "  < %s\n", c->lines[i]);
}

static int line(usi_session_t *s, const char *text) { return usi_handle_line(s, text, strlen(text), compat_now_ms()); }

/* ---- go parsing ----------------------------------------------------------------- */
static void test_go_parse(void) {
    usi_go_t g;
    char err[256], warn[256];
#define GO(text) usi_parse_go(text, strlen(text), &g, err, sizeof err, warn, sizeof warn)
    CHECKF(GO(" btime 1000 wtime 2000 byoyomi 3000") == 0, "%s", err);
    CHECKF(g.time[0] == 1000 && g.time[1] == 2000 && g.byoyomi == 3000 && g.inc[0] == -1 && g.movetime == -1,
           "fields");
    CHECKF(usi_go_timed(&g), "timed");
    CHECKF(GO("btime 60000 wtime 50000 binc 10000 winc 5000") == 0 && g.inc[0] == 10000 && g.inc[1] == 5000,
           "increments");
    CHECKF(GO("infinite") == 0 && g.infinite && !usi_go_timed(&g), "infinite");
    CHECKF(GO("ponder btime 5 wtime 6 byoyomi 7") == 0 && g.ponder && g.time[0] == 5 && g.byoyomi == 7, "ponder");
    CHECKF(GO("nodes 64") == 0 && g.nodes == 64 && !usi_go_timed(&g), "nodes");
    CHECKF(GO("movetime 500") == 0 && g.movetime == 500 && usi_go_timed(&g), "movetime");
    CHECKF(GO("mate 5000") == 0 && g.mate && g.mate_ms == 5000, "mate ms");
    CHECKF(GO("mate infinite") == 0 && g.mate && g.mate_ms == -1, "mate infinite");
    CHECKF(GO("mate") == 0 && g.mate && g.mate_ms == -1, "bare mate");
    CHECKF(GO("") == 0 && !g.infinite && !usi_go_timed(&g) && g.nodes == -1, "bare go");
    CHECKF(GO("btime 1000000000000") == 0 && g.time[0] == 1000000000000LL, "largest number");
    /* errors */
    CHECKF(GO("mate 12x") != 0, "bad mate time");
    /* a go mate time out of range is clamped like any go value */
    CHECKF(GO("mate -1") == 0 && g.mate && g.mate_ms == 0 && !g.infinite && strstr(warn, "mate -1") &&
               strstr(warn, "taken as 0"),
           "mate -1 clamped to 0: ms %lld, warn '%s'", (long long)g.mate_ms, warn);
    CHECKF(GO("mate 99999999999999") == 0 && g.mate_ms == USI_NUMBER_MAX, "mate too large clamped");
    /* a GUI waits for bestmove whatever it sent: bad values are clamped or
     * ignored, and warn says so */
    CHECKF(GO("btime") == 0 && strstr(warn, "btime") && g.time[0] == -1, "missing number: %s", warn);
    CHECKF(GO("btime abc wtime 1000") == 0 && strstr(warn, "abc") && g.time[0] == -1 && g.time[1] == 1000,
           "not a number: %s", warn);
    CHECKF(GO("btime -5 wtime -5 byoyomi -1") == 0 && g.time[0] == 0 && g.time[1] == 0 && g.byoyomi == 0 &&
               strstr(warn, "btime -5") && strstr(warn, "taken as 0") && strstr(warn, "byoyomi -1"),
           "negative: %s", warn);
    CHECKF(GO("nodes -1") == 0 && g.nodes == 0 && strstr(warn, "nodes -1"), "negative nodes: %s", warn);
    CHECKF(GO("wtime +5") == 0 && g.time[1] == 5 && !warn[0], "signed: %s", warn);
    CHECKF(GO("byoyomi 1000000000001") == 0 && g.byoyomi == USI_NUMBER_MAX && strstr(warn, "1000000000000"),
           "too large: %s", warn);
    CHECKF(GO("byoyomi 999999999999999") == 0 && g.byoyomi == USI_NUMBER_MAX, "byoyomi 999999999999999");
    CHECKF(GO("nodes 99999999999999999999999") == 0 && g.nodes == USI_NUMBER_MAX, "huge");
    /* unknown words are reported and skipped */
    CHECKF(GO("depth 5 btime 100") == 0 && strstr(warn, "depth") && g.time[0] == 100, "warn '%s'", warn);
#undef GO
}

/* ---- options ---------------------------------------------------------------------- */
static void test_options(void) {
    usi_options_t o;
    usi_options_default(&o);
    char err[256];
    const char *canon = NULL;
    CHECKF(usi_options_set(&o, "Threads", "3", &canon, err, sizeof err) == 0 && o.threads == 3, "%s", err);
    CHECKF(canon && strcmp(canon, "Threads") == 0, "canonical name");
    CHECKF(usi_options_set(&o, "usi_hash", "64", &canon, err, sizeof err) == 0 && o.hash_mb == 64 &&
              strcmp(canon, "USI_Hash") == 0,
           "case-insensitive name");
    CHECKF(usi_options_set(&o, "Threads", "abc", NULL, err, sizeof err) != 0 && o.threads == 3, "bad int kept old");
    CHECKF(usi_options_set(&o, "BatchSize", "0", NULL, err, sizeof err) != 0 && o.batch == 32, "range: %s", err);
    CHECKF(usi_options_set(&o, "Backend", "tpu", NULL, err, sizeof err) != 0 && strcmp(o.backend, "auto") == 0 &&
              strstr(err, "cpu"),
           "combo: %s", err);
    CHECKF(usi_options_set(&o, "Backend", "CPU", NULL, err, sizeof err) == 0 && strcmp(o.backend, "cpu") == 0,
           "combo canonical spelling");
    CHECKF(usi_options_set(&o, "Search", "gumbel", NULL, err, sizeof err) == 0 && strcmp(o.search, "gumbel") == 0,
           "search");
    CHECKF(usi_options_set(&o, "ResignThreshold", "0.05", NULL, err, sizeof err) == 0 && o.resign == 0.05, "resign");
    CHECKF(usi_options_set(&o, "ResignThreshold", "1.5", NULL, err, sizeof err) != 0 && o.resign == 0.05,
           "resign range");
    CHECKF(usi_options_set(&o, "USI_Ponder", "true", NULL, err, sizeof err) == 0 && o.ponder == 1, "check");
    CHECKF(usi_options_set(&o, "USI_Ponder", "maybe", NULL, err, sizeof err) != 0 && o.ponder == 1, "bad check");
    CHECKF(usi_options_set(&o, "Net", "<empty>", NULL, err, sizeof err) == 0 && o.net[0] == 0, "<empty>");
    CHECKF(usi_options_set(&o, "Net", NULL, NULL, err, sizeof err) != 0, "no value");
    /* ByoyomiMargin is NetworkDelay's old name; NodeLimit fits a 32-bit spin */
    CHECKF(usi_options_set(&o, "ByoyomiMargin", "450", &canon, err, sizeof err) == 0 && o.network_delay == 450 &&
               o.network_delay2 == 450 && strcmp(canon, "NetworkDelay") == 0,
           "ByoyomiMargin sets NetworkDelay: %s", err);
    CHECKF(usi_options_set(&o, "NodeLimit", "2147483647", NULL, err, sizeof err) == 0 && o.node_limit == INT32_MAX,
           "NodeLimit 2^31-1");
    CHECKF(usi_options_set(&o, "NodeLimit", "2147483648", NULL, err, sizeof err) != 0, "NodeLimit above 2^31-1");
    CHECKF(usi_options_set(&o, "EnteringKingRule", "nOEnteringKing", NULL, err, sizeof err) == 0 &&
               strcmp(o.entering_king, "NoEnteringKing") == 0,
           "EnteringKingRule");
    CHECKF(usi_options_set(&o, "EnteringKingRule", "csarule24", NULL, err, sizeof err) == 0 &&
               strcmp(o.entering_king, "CSARule24") == 0 && usi_options_declare_rule(&o) == RULES_DECLARE_CSA24,
           "EnteringKingRule CSARule24");
    CHECKF(usi_options_set(&o, "EnteringKingRule", "TryRule", NULL, err, sizeof err) != 0, "TryRule is not offered");
    CHECKF(usi_options_set(&o, "MultiPV", "33", NULL, err, sizeof err) != 0, "MultiPV range");
    CHECKF(usi_options_set(&o, "Frobnicate", "1", NULL, err, sizeof err) != 0 && strstr(err, "unknown option"),
           "unknown: %s", err);
}

/* ---- the loop in process ------------------------------------------------------------- */
static void test_loop(void) {
    capture_t cap = {0};
    compat_mutex_init(&cap.mu);
    usi_session_t *s = usi_session_new(cap_write, &cap);
    CHECKF(s != NULL, "session");
    pos_t *want = malloc(sizeof *want);

    /* default position: startpos */
    char sf[SFEN_MAX_LEN];
    sfen_write(usi_session_position_now(s), sf, sizeof sf);
    CHECKF(strcmp(sf, SFEN_STARTPOS) == 0, "initial position %s", sf);

    /* moves */
    CHECKF(line(s, "position startpos moves 7g7f 3c3d 8h2b+") == USI_CONTINUE, "position");
    pos_set_startpos(want);
    pos_do_move(want, move_from_usi(want, "7g7f", 4));
    pos_do_move(want, move_from_usi(want, "3c3d", 4));
    pos_do_move(want, move_from_usi(want, "8h2b+", 5));
    CHECKF(pos_key(usi_session_position_now(s)) == pos_key(want), "position after 3 moves");
    CHECKF(pos_hist_len(usi_session_position_now(s)) == 3, "history kept for repetition");

    /* an illegal move keeps the legal prefix and names the move */
    cap_clear(&cap);
    line(s, "position startpos moves 7g7f 3c3d 5a5b 2g2f");
    CHECKF(cap_find(&cap, "illegal move '5a5b' (move 3)") && cap_find(&cap, "up to move 2"), "illegal move message");
    pos_set_startpos(want);
    pos_do_move(want, move_from_usi(want, "7g7f", 4));
    pos_do_move(want, move_from_usi(want, "3c3d", 4));
    CHECKF(pos_key(usi_session_position_now(s)) == pos_key(want), "legal prefix kept");

    /* a bad SFEN leaves the position as it was */
    cap_clear(&cap);
    line(s, "position sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNX b - 1 moves 7g7f");
    CHECKF(cap_find(&cap, "bad SFEN"), "bad sfen message");
    CHECKF(pos_key(usi_session_position_now(s)) == pos_key(want), "bad sfen: unchanged");
    cap_clear(&cap);
    line(s, "position sfen");
    line(s, "position");
    line(s, "position fen x");
    line(s, "position startpos 7g7f");
    CHECKF(cap.n == 4, "four complaints, got %d", cap.n);
    CHECKF(pos_key(usi_session_position_now(s)) == pos_key(want), "malformed: unchanged");

    /* sfen with moves; tabs and CR */
    line(s, "position\tsfen 4k4/9/9/9/9/9/9/9/4K4 b G 1 moves G*5b\r\n");
    char err[128];
    sfen_parse_cstr(want, "4k4/9/9/9/9/9/9/9/4K4 b G 1", err, sizeof err);
    pos_do_move(want, move_from_usi(want, "G*5b", 4));
    CHECKF(pos_key(usi_session_position_now(s)) == pos_key(want), "sfen + drop");

    /* unknown and garbage commands */
    cap_clear(&cap);
    line(s, "frobnicate now");
    line(s, "\x01\x02\xff garbage");
    line(s, "");
    line(s, "   ");
    line(s, "gameover maybe");
    line(s, "setoption name");
    line(s, "setoption foo");
    CHECKF(cap_find(&cap, "unknown command 'frobnicate'"), "unknown command");
    CHECKF(cap_find(&cap, "unknown command '?" "?" "?'"), "garbage shown printable");
    CHECKF(cap_find(&cap, "gameover: unknown result"), "gameover arg");
    CHECKF(cap.n == 5, "one line per bad command, got %d", cap.n);

    /* setoption with a value containing spaces, applied at isready */
    cap_clear(&cap);
    line(s, "setoption name Net value /no such dir/x.safetensors  ");
    line(s, "setoption name NoSuchOption value 3");
    line(s, "setoption name Threads value -3");
    CHECKF(cap_find(&cap, "unknown option 'NoSuchOption'"), "unknown option");
    CHECKF(cap_find(&cap, "Threads"), "range message");
    /* a Net that cannot be used: an error, no readyok, and koma is to end */
    CHECKF(line(s, "isready") == USI_FATAL, "isready with a missing Net is fatal");
    CHECKF(cap_find(&cap, "info string Error: /no such dir/x.safetensors: no such file"),
           "Net path with spaces reported as an error");
    CHECKF(!cap_find(&cap, "readyok"), "no readyok with a missing Net");
    /* the same at go when no isready came since */
    cap_clear(&cap);
    CHECKF(line(s, "go nodes 8") == USI_FATAL, "go with a missing Net is fatal");
    CHECKF(cap_find(&cap, "info string Error: /no such dir/x.safetensors"), "go: the error");
    CHECKF(!cap_find(&cap, "bestmove"), "go: no search without the net asked for");

    /* Net none: the uniform evaluator, asked for */
    cap_clear(&cap);
    line(s, "setoption name Net value none");
    CHECKF(line(s, "isready") == USI_CONTINUE && cap_find(&cap, "readyok"), "readyok with Net none");
    CHECKF(cap_find(&cap, "info string Net none: no network"), "Net none said on isready");

    /* a search in process: go nodes, answered on the search thread */
    cap_clear(&cap);
    line(s, "position startpos moves 7g7f");
    line(s, "go nodes 32");
    usi_session_wait(s);
    const char *bm = cap_find(&cap, "bestmove ");
    CHECKF(bm != NULL, "bestmove");
    if (bm) {
        pos_set_startpos(want);
        pos_do_move(want, move_from_usi(want, "7g7f", 4));
        const char *m = bm + 9;
        size_t ml = strcspn(m, " ");
        CHECKF(move_from_usi(want, m, ml) != MOVE_NONE, "legal bestmove for White: %s", bm);
    }
    CHECKF(cap_find(&cap, "nodes 32 "), "32 visits reported");

    CHECKF(line(s, "quit") == USI_QUIT, "quit");
    if (g_fail) cap_dump(&cap);
    usi_session_free(s);
    cap_clear(&cap);
    compat_mutex_destroy(&cap.mu);
    free(want);
}

int main(void) {
    test_go_parse();
    test_options();
    test_loop();
    return t_done("test_usi_parse");
}
