/* test_usi_search.c - searches through the real koma binary: go infinite +
 * stop, isready while searching, go ponder + ponderhit / stop, clocks
 * (sudden death, byoyomi, increment) answered in time, declaration win,
 * resignation (mated root, ResignThreshold), tree reuse, quit during a search. */
#include "usi_test.h"

static usi_proc_t P;
static pos_t *pos;
static char txt[16];

static void start(void) {
    CHECKF(proc_start(&P, NULL), "start");
    CHECKF(proc_handshake(&P), "handshake");
}

static void finish(void) {
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "quit");
    proc_end(&P);
}

static void test_infinite_stop(void) {
    start();
    proc_send(&P, "position startpos moves 7g7f");
    proc_send(&P, "go infinite");
    proc_drain(&P, 400);
    CHECKF(!proc_find(&P, 0, P.n_lines, "bestmove"), "no bestmove before stop");
    /* isready while searching: readyok, and the search goes on (an infinite
     * one: a readyok held back until the search ends would never come) */
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "readyok while searching");
    CHECKF(!proc_find(&P, 0, P.n_lines, "bestmove"), "still searching after isready");
    /* a go while searching: the running search stops and answers, then the
     * new go is searched and answered (every go gets exactly one bestmove) */
    proc_send(&P, "go nodes 5");
    CHECKF(proc_expect(&P, "info string go during a search", USI_WAIT_MS) != NULL, "second go: said so");
    const char *b1 = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    const char *b2 = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    CHECKF(b1 && b2, "two go, two bestmoves: %s / %s", b1 ? b1 : "-", b2 ? b2 : "-");
    proc_drain(&P, 200);
    int before = 0;
    for (int i = 0; i < P.n_lines; i++) before += starts_with(P.lines[i], "bestmove");
    CHECKF(before == 2, "no third bestmove: %d", before);
    proc_send(&P, "go infinite");
    CHECKF(proc_expect(&P, "info depth ", USI_WAIT_MS) != NULL, "periodic info during infinite");
    long long t0 = now_ms();
    proc_send(&P, "stop");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS); /* an infinite search: only stop ends it */
    CHECKF(bm, "bestmove after stop");
    fprintf(stderr, "   bestmove %lld ms after stop\n", now_ms() - t0);
    play_moves(pos, "startpos", "7g7f");
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal: %s", bm ? bm : "-");
    /* one bestmove only */
    proc_drain(&P, 200);
    int n = 0;
    for (int i = 0; i < P.n_lines; i++) n += starts_with(P.lines[i], "bestmove");
    CHECKF(n == 3, "exactly one bestmove per go, got %d for 3", n);
    finish();
}

static void test_ponder(void) {
    start();
    proc_send(&P, "setoption name USI_Ponder value true");
    /* ponderhit converts to a timed search: the answer within the byoyomi.
     * A check of time, so as in clock_check: a loaded machine can hold the
     * search past it once (seen: 1,183 ms at load 8), a fault every time;
     * up to three tries, one in time passes. */
    const char *bm = NULL;
    long long dt = -1;
    for (int attempt = 1; attempt <= 3; attempt++) {
        int from = P.n_lines;
        proc_send(&P, "position startpos moves 7g7f 3c3d");
        proc_send(&P, "go ponder btime 0 wtime 0 byoyomi 1000");
        proc_drain(&P, 1500); /* longer than the byoyomi: pondering has no deadline */
        CHECKF(!proc_find(&P, from, P.n_lines, "bestmove"), "no bestmove while pondering");
        long long t0 = now_ms();
        proc_send(&P, "ponderhit");
        bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
        dt = now_ms() - t0;
        play_moves(pos, "startpos", "7g7f 3c3d");
        CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal: %s", bm ? bm : "-");
        if (!bm || dt < 1000) break;
        fprintf(stderr, "   ponderhit, attempt %d: bestmove %lld ms after it, want < 1000\n", attempt, dt);
    }
    CHECKF(bm && dt < 1000, "bestmove within the byoyomi after ponderhit (%lld ms)", dt);
    /* stop during ponder answers too */
    int mark = P.n_lines;
    proc_send(&P, "position startpos moves 2g2f");
    proc_send(&P, "go ponder btime 10000 wtime 10000 byoyomi 1000");
    proc_drain(&P, 300);
    CHECKF(!proc_find(&P, mark, P.n_lines, "bestmove"), "pondering");
    proc_send(&P, "stop");
    bm = proc_expect(&P, "bestmove ", USI_WAIT_MS); /* pondering has no deadline: only stop ends it */
    CHECKF(bm, "bestmove after stop during ponder");
    play_moves(pos, "startpos", "2g2f");
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal: %s", bm ? bm : "-");
    /* gameover during ponder: stops, no bestmove */
    mark = P.n_lines;
    proc_send(&P, "position startpos moves 2g2f 8c8d");
    proc_send(&P, "go ponder btime 10000 wtime 10000 byoyomi 1000");
    proc_drain(&P, 200);
    proc_send(&P, "gameover lose");
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "readyok after gameover");
    proc_drain(&P, 300);
    CHECKF(!proc_find(&P, mark, P.n_lines, "bestmove"), "no bestmove after gameover");
    /* and the next game starts normally */
    proc_send(&P, "usinewgame");
    proc_send(&P, "position startpos");
    proc_send(&P, "go nodes 8");
    CHECKF(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL, "next game plays");
    finish();
}

/* One timed go: the engine's own search time from its last info line before
 * bestmove ("time N"; the wall time from go to bestmove where it printed none),
 * the wall time in *wall. */
static long long timed_go(const char *moves, const char *go, long long *wall) {
    int from = P.n_lines;
    proc_send(&P, "position startpos moves %s", moves);
    long long t0 = now_ms();
    proc_send(&P, "%s", go);
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    *wall = now_ms() - t0;
    play_moves(pos, "startpos", moves);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "'%s': legal: %s", go, bm ? bm : "-");
    long long ms = *wall;
    for (int i = P.mark - 2; bm && i >= from; i--) {
        const char *t = starts_with(P.lines[i], "info ") ? strstr(P.lines[i], " time ") : NULL;
        if (t) {
            ms = atoll(t + 6);
            break;
        }
    }
    return ms;
}

/* The engine answers go within [lo, hi) ms of its own search time. A clock
 * check is a check of time: a machine loaded 5x over its cores can hold the
 * search thread past its deadline (seen: movetime 600 answered after 1,056 ms
 * at load 10), which does not repeat, while a time-management fault does,
 * so the go is played up to three times and one answer in bounds passes. */
static void clock_check(const char *what, const char *moves, const char *go, long long lo, long long hi) {
    long long ms = -1, wall = -1;
    for (int attempt = 1; attempt <= 3; attempt++) {
        ms = timed_go(moves, go, &wall);
        if (ms >= lo && ms < hi) return;
        fprintf(stderr, "   %s, attempt %d: %lld ms (wall %lld ms), want [%lld, %lld)\n", what, attempt, ms, wall,
                lo, hi);
    }
    CHECKF(0, "%s: %lld ms (wall %lld ms), want [%lld, %lld) ms", what, ms, wall, lo, hi);
}

static void test_clock(void) {
    start();
    clock_check("1 s sudden death", "7g7f", "go btime 1000 wtime 1000 byoyomi 0", 0, 500);
    clock_check("1 s byoyomi used but not overrun", "7g7f 3c3d", "go btime 0 wtime 0 byoyomi 1000", 300, 1000);
    clock_check("no time at all", "7g7f 3c3d 2g2f", "go btime 0 wtime 0 byoyomi 0", 0, 300);
    /* remaining time includes this move's increment (timeman.h) */
    clock_check("100 ms left with increment", "7g7f", "go btime 100 wtime 100 binc 1000 winc 1000", 0, 300);
    clock_check("3 s + 1 s increment for White", "7g7f", "go btime 60000 wtime 3000 binc 1000 winc 1000", 500, 2800);
    clock_check("movetime 600", "7g7f 3c3d", "go movetime 600", 100, 700);
    /* ByoyomiMargin (NetworkDelay and NetworkDelay2) widens the safety margin */
    proc_send(&P, "setoption name ByoyomiMargin value 800");
    clock_check("margin 800 of 1000 ms", "7g7f 3c3d", "go btime 0 wtime 0 byoyomi 1000", 0, 500);
    finish();
}

/* A loaded machine (a load average of 3 per CPU, through KOMA_TEST_LOADAVG): koma says so once and keeps
 * back a fifth of a 1 s byoyomi (800 ms, not 900); NetworkDelay2 set keeps what it says. */
static void test_loaded_clock(void) {
    char load[32];
    snprintf(load, sizeof load, "%d", 3 * compat_cpu_count());
    compat_setenv("KOMA_TEST_LOADAVG", load);
    start();
    compat_setenv("KOMA_TEST_LOADAVG", NULL);
    int from = P.n_lines;
    clock_check("1 s byoyomi at load 3 per CPU", "7g7f 3c3d", "go btime 0 wtime 0 byoyomi 1000", 600, 830);
    CHECKF(proc_find(&P, from, P.n_lines, "info string load average 3.00 per CPU: the automatic NetworkDelay "
                                          "margins keep back 20% of the time"),
           "koma says why it keeps a fifth back");
    int said = 0;
    for (int i = from; i < P.n_lines; i++) said += strstr(P.lines[i], "info string load average") != NULL;
    clock_check("again", "7g7f 3c3d 2g2f", "go btime 0 wtime 0 byoyomi 1000", 600, 830);
    int again = 0;
    for (int i = from; i < P.n_lines; i++) again += strstr(P.lines[i], "info string load average") != NULL;
    CHECKF(said == 1 && again == 1, "said once, not at every move: %d, %d", said, again);
    proc_send(&P, "setoption name NetworkDelay value 0");
    proc_send(&P, "setoption name NetworkDelay2 value 50");
    clock_check("NetworkDelay2 50 at load 3", "7g7f 3c3d", "go btime 0 wtime 0 byoyomi 1000", 870, 1000);
    finish();
}

static void test_declaration_and_resign(void) {
    start();
    /* Black king in camp, 13 pieces there, 16 + 5 + 7 = 28 points */
    const char *decl = "+R+BGGSS+L+L1/4K4/PPPPP4/9/9/9/9/9/4k4 b 7P 1";
    CHECKF(play_moves(pos, decl, "") && rules_can_declare(pos), "fixture declares");
    proc_send(&P, "position sfen %s", decl);
    proc_send(&P, "go btime 1000 wtime 1000 byoyomi 1000");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    CHECKF(bm && strcmp(bm, "bestmove win") == 0, "declaration: %s", bm ? bm : "-");
    /* one point short (6 pawns in hand): a real move */
    const char *nodecl = "+R+BGGSS+L+L1/4K4/PPPPP4/9/9/9/9/9/4k4 b 6P 1";
    CHECKF(play_moves(pos, nodecl, "") && !rules_can_declare(pos), "fixture short of points");
    proc_send(&P, "position sfen %s", nodecl);
    proc_send(&P, "go nodes 16");
    bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "no declaration: %s", bm ? bm : "-");
    /* mated: resign */
    const char *mated = "8k/9/9/9/9/9/9/7g1/7gK b - 1";
    CHECKF(play_moves(pos, mated, "") && pos_in_check(pos) && movegen_count_legal(pos) == 0, "fixture is mate");
    proc_send(&P, "position sfen %s", mated);
    proc_send(&P, "go btime 1000 wtime 1000 byoyomi 1000");
    bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    CHECKF(bm && strcmp(bm, "bestmove resign") == 0, "mated: %s", bm ? bm : "-");
    /* ResignThreshold: the uniform evaluator values everything at 0 (50%) */
    proc_send(&P, "setoption name ResignThreshold value 0.6");
    proc_send(&P, "position startpos");
    proc_send(&P, "go nodes 32");
    bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    CHECKF(bm && strcmp(bm, "bestmove resign") == 0, "threshold 0.6 > 0.5: %s", bm ? bm : "-");
    proc_send(&P, "setoption name ResignThreshold value 0.4");
    proc_send(&P, "go nodes 32");
    bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    pos_set_startpos(pos);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "threshold 0.4 < 0.5: %s", bm ? bm : "-");
    finish();
}

static void test_tree_reuse(void) {
    start();
    proc_send(&P, "position startpos");
    proc_send(&P, "go nodes 400");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    const char *info = P.mark >= 2 ? P.lines[P.mark - 2] : NULL;
    const char *pv = info ? strstr(info, " pv ") : NULL;
    CHECKF(bm && pv, "pv: %s", info ? info : "-");
    if (pv) {
        char a[8], b[8];
        CHECKF(sscanf(pv, " pv %7s %7s", a, b) == 2, "two pv moves");
        proc_send(&P, "position startpos moves %s %s", a, b);
        proc_send(&P, "go nodes 100");
        const char *r = proc_expect(&P, "info string tree reuse: ", USI_WAIT_MS);
        int kept = r ? atoi(r + strlen("info string tree reuse: ")) : 0;
        CHECKF(kept > 1, "subtree kept: %s", r ? r : "-");
        CHECKF(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL, "bestmove");
        /* a different line: no reuse claimed */
        int mark = P.n_lines;
        proc_send(&P, "position sfen 4k4/9/9/9/9/9/9/9/4K4 b G 1");
        proc_send(&P, "go nodes 50");
        CHECKF(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL, "bestmove");
        CHECKF(!proc_find(&P, mark, P.n_lines, "info string tree reuse"), "no reuse across positions");
    }
    finish();
}

static void test_quit_during_search(void) {
    start();
    proc_send(&P, "position startpos");
    proc_send(&P, "go infinite");
    proc_drain(&P, 300);
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "exits during go infinite"); /* which never ends by itself */
    CHECKF(P.status == 0, "exit status 0");
    proc_end(&P);
    /* also during a timed search that would go on for minutes (10 min of
     * byoyomi: more than USI_WAIT_MS) */
    start();
    proc_send(&P, "go btime 600000 wtime 600000 byoyomi 600000");
    CHECKF(proc_expect(&P, "info depth ", USI_WAIT_MS) != NULL, "searching");
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "exits during a timed search");
    proc_end(&P);
}

int main(void) {
    watchdog(170);
    pos = malloc(sizeof *pos);
    test_infinite_stop();
    test_ponder();
    test_clock();
    test_loaded_clock();
    test_declaration_and_resign();
    test_tree_reuse();
    test_quit_during_search();
    free(pos);
    return t_done("test_usi_search");
}
