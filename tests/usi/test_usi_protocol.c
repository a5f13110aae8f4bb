/* test_usi_protocol.c - scripted USI transcripts through the real koma
 * binary: handshake and options, isready, setoption (valid, invalid,
 * unknown), position + go nodes -> a legal bestmove, malformed lines, an
 * illegal move in the moves list, gameover with and without a result, quit. */
#include "usi_test.h"

static const char *OPTIONS[] = {"Net",        "Threads",       "BatchSize",           "Backend",
                                "NodeLimit",  "NetworkDelay",  "NetworkDelay2",       "MinimumThinkingTime",
                                "ResignThreshold", "USI_Ponder", "USI_Hash",          "MaxPly",
                                "Search",     "LeafMate",      "Contempt",            "MultiPV",
                                "EnteringKingRule"};

static void test_handshake(void) {
    usi_proc_t p;
    CHECKF(proc_start(&p, NULL), "start");
    proc_send(&p, "usi");
    const char *id = proc_expect(&p, "id name ", USI_WAIT_MS);
    CHECKF(id && strstr(id, "Koma"), "id name");
    CHECKF(proc_expect(&p, "id author ", USI_WAIT_MS) != NULL, "id author");
    int before = p.mark;
    CHECKF(proc_expect(&p, "usiok", USI_WAIT_MS) != NULL, "usiok");
    for (size_t i = 0; i < sizeof OPTIONS / sizeof OPTIONS[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "option name %s type ", OPTIONS[i]);
        CHECKF(proc_find(&p, before, p.mark, want), "option %s announced before usiok", OPTIONS[i]);
    }
    const char *b = proc_find(&p, before, p.mark, "option name Backend");
    CHECKF(b && strstr(b, "type combo") && strstr(b, "var cpu") && strstr(b, "var cuda") && strstr(b, "var auto"),
           "Backend combo: %s", b ? b : "-");
    /* Net is a filename (GUIs offer a file dialog); every spin fits 32 bits
     * (a GUI reading max 10^12 as an int got -727379968) */
    const char *net = proc_find(&p, before, p.mark, "option name Net ");
    CHECKF(net && strstr(net, " type filename default "), "Net of type filename: %s", net ? net : "-");
    for (int i = before; i < p.mark; i++) {
        const char *mx = strstr(p.lines[i], " type spin ") ? strstr(p.lines[i], " max ") : NULL;
        if (!mx) continue;
        long long v = atoll(mx + 5), mn = atoll(strstr(p.lines[i], " min ") + 5);
        CHECKF(v <= 2147483647LL && mn >= -2147483647LL - 1, "spin within 32 bits: %s", p.lines[i]);
    }
    CHECKF(!proc_find(&p, before, p.mark, "option name ByoyomiMargin"), "ByoyomiMargin is NetworkDelay now");
    /* isready: Net none (proc_start) -> says so, then readyok */
    before = p.mark;
    proc_send(&p, "isready");
    CHECKF(proc_expect(&p, "readyok", USI_WAIT_MS) != NULL, "readyok");
    const char *say = proc_find(&p, before, p.mark, "info string Net none: no network");
    CHECKF(say && strstr(say, "legal moves only"), "Net none notice before readyok");
    /* usinewgame gets no answer; isready again answers */
    proc_send(&p, "usinewgame");
    proc_send(&p, "isready");
    CHECKF(proc_expect(&p, "readyok", USI_WAIT_MS) != NULL, "second readyok");
    proc_send(&p, "quit");
    CHECKF(proc_wait_exit(&p, USI_WAIT_MS) && p.status == 0, "quit exits 0");
    proc_end(&p);
}

/* Sends cmd, then isready; returns the lines koma wrote in between as an index range. */
static int sync_after(usi_proc_t *p, const char *cmd, int *end) {
    int from = p->mark;
    proc_send(p, "%s", cmd);
    proc_send(p, "isready");
    proc_expect(p, "readyok", USI_WAIT_MS);
    *end = p->mark;
    return from;
}

static void test_options(pos_t *pos) {
    usi_proc_t p;
    CHECKF(proc_start(&p, NULL), "start");
    CHECKF(proc_handshake(&p), "handshake");
    int end, from;
    /* valid values are silent */
    from = sync_after(&p, "setoption name NodeLimit value 50", &end);
    CHECKF(!proc_find(&p, from, end, "info string setoption"), "valid NodeLimit accepted silently");
    from = sync_after(&p, "setoption name USI_Ponder value true", &end);
    CHECKF(!proc_find(&p, from, end, "info string setoption"), "valid USI_Ponder");
    from = sync_after(&p, "setoption name search value GUMBEL", &end);
    CHECKF(!proc_find(&p, from, end, "info string setoption"), "case-insensitive name and value");
    from = sync_after(&p, "setoption name Search value puct", &end);
    /* invalid values are refused with a reason */
    from = sync_after(&p, "setoption name Threads value abc", &end);
    const char *r = proc_find(&p, from, end, "info string setoption");
    CHECKF(r && strstr(r, "Threads") && strstr(r, "abc"), "bad integer: %s", r ? r : "-");
    from = sync_after(&p, "setoption name BatchSize value 0", &end);
    CHECKF(proc_find(&p, from, end, "info string setoption"), "out of range");
    from = sync_after(&p, "setoption name Backend value tpu", &end);
    CHECKF(proc_find(&p, from, end, "info string setoption"), "bad combo");
    from = sync_after(&p, "setoption name ResignThreshold value 2", &end);
    CHECKF(proc_find(&p, from, end, "info string setoption"), "threshold above 1");
    from = sync_after(&p, "setoption name Frobnicate value 1", &end);
    r = proc_find(&p, from, end, "info string setoption");
    CHECKF(r && strstr(r, "unknown option 'Frobnicate'"), "unknown option: %s", r ? r : "-");
    /* the old name of NetworkDelay still works */
    from = sync_after(&p, "setoption name ByoyomiMargin value 250", &end);
    CHECKF(!proc_find(&p, from, end, "info string setoption"), "ByoyomiMargin accepted");
    /* NodeLimit 50 applies to a plain go */
    proc_send(&p, "position startpos");
    proc_send(&p, "go");
    const char *bm = proc_expect(&p, "bestmove ", USI_WAIT_MS);
    const char *info = p.mark >= 2 ? p.lines[p.mark - 2] : NULL;
    CHECKF(info && strstr(info, " nodes 50 "), "NodeLimit 50 -> 50 visits: %s", info ? info : "-");
    char txt[16];
    pos_set_startpos(pos);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal: %s", bm ? bm : "-");
    /* USI_Ponder on: the answer names a ponder move, legal after the best move */
    CHECKF(bm && strstr(bm, " ponder "), "ponder move: %s", bm ? bm : "-");
    if (bm && strstr(bm, " ponder ")) {
        move_t m = bestmove_of(pos, bm, txt, sizeof txt);
        pos_do_move(pos, m);
        const char *pm = strstr(bm, " ponder ") + 8;
        CHECKF(move_from_usi(pos, pm, strcspn(pm, " ")) != MOVE_NONE, "legal ponder move: %s", bm);
    }
    proc_send(&p, "quit");
    CHECKF(proc_wait_exit(&p, USI_WAIT_MS), "quit");
    proc_end(&p);
}

static void test_go_nodes(pos_t *pos) {
    usi_proc_t p;
    CHECKF(proc_start(&p, NULL), "start");
    CHECKF(proc_handshake(&p), "handshake");
    proc_send(&p, "usinewgame");
    proc_send(&p, "position startpos moves 7g7f 3c3d");
    proc_send(&p, "go nodes 64");
    const char *bm = proc_expect(&p, "bestmove ", USI_WAIT_MS);
    CHECKF(play_moves(pos, "startpos", "7g7f 3c3d"), "replay");
    char txt[16];
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal bestmove: %s", bm ? bm : "-");
    const char *info = p.mark >= 2 ? p.lines[p.mark - 2] : NULL;
    CHECKF(info && starts_with(info, "info depth ") && strstr(info, " nodes 64 ") && strstr(info, " score cp ") &&
              strstr(info, " pv ") && strstr(info, " nps ") && strstr(info, " seldepth "),
           "final info line: %s", info ? info : "-");
    if (info && strstr(info, " pv ")) { /* the pv starts with the best move and is legal */
        const char *pv = strstr(info, " pv ") + 4;
        CHECKF(strncmp(pv, txt, strlen(txt)) == 0, "pv starts with bestmove");
        CHECKF(play_moves(pos, "startpos", "7g7f 3c3d") && play_moves(pos, "startpos", "7g7f 3c3d"), "replay");
        char buf[512];
        snprintf(buf, sizeof buf, "7g7f 3c3d %s", pv);
        CHECKF(play_moves(pos, "startpos", buf), "pv legal: %s", pv);
    }
    proc_send(&p, "quit");
    CHECKF(proc_wait_exit(&p, USI_WAIT_MS), "quit");
    proc_end(&p);
}

static void test_malformed(pos_t *pos) {
    usi_proc_t p;
    CHECKF(proc_start(&p, NULL), "start");
    CHECKF(proc_handshake(&p), "handshake");
    static const char *bad[] = {
        "garbage", "\x01\x02\x03", "position sfen not/a/real/sfen b - 1", "position sfen",
        "position startpos moves 7g7f zzzz", "go btime abc wtime 1000", "go nodes -5",
        "go btime 99999999999999999999", "go byoyomi", "setoption", "position", "go mate 1x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int end, from = sync_after(&p, bad[i], &end);
        CHECKF(end > 0 && starts_with(p.lines[end - 1], "readyok"), "still answers isready after '%s'", bad[i]);
        CHECKF(proc_find(&p, from, end, "info string "), "a reason for '%s'", bad[i]);
        if (starts_with(bad[i], "go ")) /* a GUI waits for it: clamped or ignored values, still a bestmove */
            CHECKF(proc_find(&p, from, end, "bestmove ") || proc_expect(&p, "bestmove ", USI_WAIT_MS) != NULL,
                   "a bestmove after '%s'", bad[i]);
        else
            CHECKF(!proc_find(&p, from, end, "bestmove"), "no search from '%s'", bad[i]);
    }
    /* an illegal move keeps the legal prefix: White is to move after 7g7f */
    int end, from = sync_after(&p, "position startpos moves 7g7f 9z9z 3c3d", &end);
    const char *r = proc_find(&p, from, end, "info string position: illegal move '9z9z' (move 2)");
    CHECKF(r && strstr(r, "up to move 1"), "illegal move named: %s", r ? r : "-");
    proc_send(&p, "go nodes 16");
    const char *bm = proc_expect(&p, "bestmove ", USI_WAIT_MS);
    CHECKF(play_moves(pos, "startpos", "7g7f"), "replay");
    char txt[16];
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "bestmove legal for White after 7g7f: %s",
           bm ? bm : "-");
    /* a long line of moves: 200 plies of back-and-forth */
    char *line = malloc(8192);
    size_t u = (size_t)snprintf(line, 8192, "position startpos moves");
    for (int i = 0; i < 50; i++) u += (size_t)snprintf(line + u, 8192 - u, " 5i5h 5a5b 5h5i 5b5a");
    from = sync_after(&p, line, &end);
    CHECKF(!proc_find(&p, from, end, "info string position"), "long move list accepted");
    proc_send(&p, "go nodes 16");
    bm = proc_expect(&p, "bestmove ", USI_WAIT_MS);
    pos_set_startpos(pos);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal after a long repetition: %s", bm ? bm : "-");
    free(line);
    /* gameover, bare and with a result; engine keeps going */
    from = sync_after(&p, "gameover", &end);
    CHECKF(end > 0 && starts_with(p.lines[end - 1], "readyok") && !proc_find(&p, from, end, "info string"),
           "bare gameover is quiet");
    from = sync_after(&p, "gameover win", &end);
    CHECKF(!proc_find(&p, from, end, "info string"), "gameover win is quiet");
    from = sync_after(&p, "gameover lose", &end);
    from = sync_after(&p, "gameover draw", &end);
    CHECKF(!proc_find(&p, from, end, "info string"), "gameover draw is quiet");
    proc_send(&p, "usinewgame");
    proc_send(&p, "position startpos");
    proc_send(&p, "go nodes 8");
    CHECKF(proc_expect(&p, "bestmove ", USI_WAIT_MS) != NULL, "plays after gameover");
    /* stray stop / ponderhit while idle are ignored */
    from = sync_after(&p, "stop", &end);
    CHECKF(!proc_find(&p, from, end, "bestmove"), "idle stop: no bestmove");
    from = sync_after(&p, "ponderhit", &end);
    CHECKF(!proc_find(&p, from, end, "bestmove"), "idle ponderhit: no bestmove");
    proc_send(&p, "quit");
    CHECKF(proc_wait_exit(&p, USI_WAIT_MS) && p.status == 0, "quit");
    proc_end(&p);
}

/* End of input without quit: koma exits by itself. */
static void test_eof(void) {
    usi_proc_t p;
    CHECKF(proc_start(&p, NULL), "start");
    proc_send(&p, "usi");
    CHECKF(proc_expect(&p, "usiok", USI_WAIT_MS) != NULL, "usiok");
    proc_close_input(&p);
    CHECKF(proc_wait_exit(&p, USI_WAIT_MS), "exits at end of input");
    proc_end(&p);
}

/* Commands given as arguments run first, each go to its answer. */
static void test_argv(pos_t *pos) {
    usi_proc_t p;
    const char *args[] = {"position startpos moves 2g2f", "go nodes 16", "quit", NULL};
    CHECKF(proc_start(&p, args), "start");
    const char *bm = proc_expect(&p, "bestmove ", USI_WAIT_MS);
    CHECKF(play_moves(pos, "startpos", "2g2f"), "replay");
    char txt[16];
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "argv go: %s", bm ? bm : "-");
    CHECKF(proc_wait_exit(&p, USI_WAIT_MS), "argv quit exits");
    proc_end(&p);
}

int main(void) {
    watchdog(170);
    pos_t *pos = malloc(sizeof *pos);
    test_handshake();
    test_options(pos);
    test_go_nodes(pos);
    test_malformed(pos);
    test_eof();
    test_argv(pos);
    free(pos);
    return t_done("test_usi_protocol");
}
