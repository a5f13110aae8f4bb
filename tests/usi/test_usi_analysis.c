/* test_usi_analysis.c - what analysis GUIs use (issue 31.4), as USI
 * conversations with the real koma binary:
 *   - `score mate N`: a mate in one gives `score mate 1` and plays it, a mate
 *     in three `score mate 3`; a side mated whatever it plays
 *     `score mate -N`; under `go infinite` the mate line comes at once and
 *     the bestmove only after stop;
 *   - MultiPV 3: three lines `info multipv 1..3`, each with its whole PV
 *     (more than one move after 1000 visits, legal), three different legal root
 *     moves, the first one's pv starting with the bestmove;
 *   - USI_Ponder: false, no ponder move in bestmove; true, a legal one;
 *   - EnteringKingRule: CSARule27 declares (`bestmove win`), NoEnteringKing
 *     plays a move instead; CSARule24 declares at 31 points, and at 28
 *     (a 27-point-only win) plays a move; inside the search a leaf where
 *     the opponent may declare is a loss under the rule set, not under the
 *     others;
 *   - MinimumThinkingTime: a timed move thinks at least that long.
 */
#include "usi_test.h"
#include "usi_net.h"

#include "engine/encode.h"
#include "nn/net.h"
#include "nn/weights.h"

static usi_proc_t P;
static pos_t *pos;
static char txt[16];

static bool write_net(const char *path) { return usi_write_net(path, 1, 16, 3); }

/* position sfen SFEN, go ARGS: the bestmove line; *info the info line before it. */
static const char *go_at(const char *sfen, const char *args, const char **info) {
    proc_send(&P, "position sfen %s", sfen);
    proc_send(&P, "go %s", args);
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    *info = bm && P.mark >= 2 ? P.lines[P.mark - 2] : NULL;
    return bm;
}

static void test_score_mate(void) {
    fprintf(stderr, "-- score mate\n");
    const char *info;
    /* Black: gold on 5c, a gold in hand; G*5b mates */
    const char *m1 = "4k4/9/4G4/9/9/9/9/9/4K4 b G 1";
    const char *bm = go_at(m1, "nodes 64", &info);
    CHECKF(bm && strcmp(bm, "bestmove G*5b") == 0, "mate in one played: %s", bm ? bm : "-");
    CHECKF(info && strstr(info, " score mate 1 pv G*5b"), "score mate 1: %s", info ? info : "-");
    /* a mate in three and one in five (test_usi_go_mate's and test_usi_mate's
     * fixtures, none shorter): the shortest, its line ending in mate */
    static const struct {
        const char *sfen;
        const char *want;
    } longer[] = {{"lb7/4k4/5P3/5G3/9/9/9/9/8K b GG 1", " score mate 3 pv "},
                  {"k8/7l1/p7R/S2L5/9/9/9/9/K8 b S 1", " score mate 5 pv "}};
    for (int i = 0; i < 2; i++) {
        bm = go_at(longer[i].sfen, "nodes 64", &info);
        CHECKF(info && strstr(info, longer[i].want), "%s: '%s': %s", longer[i].sfen, longer[i].want,
               info ? info : "-");
        const char *pv = info ? strstr(info, " pv ") : NULL;
        CHECKF(pv && play_moves(pos, longer[i].sfen, pv + 4) && pos_in_check(pos) && movegen_count_legal(pos) == 0,
               "the mate pv ends in mate: %s", info ? info : "-");
        CHECKF(pv && bm && strncmp(pv + 4, bm + 9, strcspn(bm + 9, " ")) == 0, "the first move played: %s",
               bm ? bm : "-");
    }
    /* White to move, mated in two whatever it plays (5a-4a G*4b, 5a-6a G*6b) */
    const char *mated = "4k4/9/4G4/9/9/9/9/9/4K4 w G 1";
    bm = go_at(mated, "nodes 64", &info);
    CHECKF(info && strstr(info, " score mate -2 "), "score mate -2: %s", info ? info : "-");
    CHECKF(play_moves(pos, mated, "") && bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "legal: %s",
           bm ? bm : "-");
    /* the start position: no mate, a cp score */
    proc_send(&P, "position startpos");
    proc_send(&P, "go nodes 64");
    CHECK(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL);
    info = P.mark >= 2 ? P.lines[P.mark - 2] : NULL;
    CHECKF(info && strstr(info, " score cp ") && !strstr(info, "mate"), "no mate at the start: %s", info ? info : "-");
    /* go infinite on a mate: the mate line at once, the bestmove after stop */
    proc_send(&P, "position sfen %s", m1);
    int from = P.mark;
    proc_send(&P, "go infinite");
    CHECKF(proc_expect(&P, "info depth 1 ", USI_WAIT_MS) != NULL, "go infinite: the mate line");
    proc_drain(&P, 200);
    CHECKF(!proc_find(&P, from, P.n_lines, "bestmove"), "go infinite: no bestmove before stop");
    proc_send(&P, "stop");
    bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    CHECKF(bm && strcmp(bm, "bestmove G*5b") == 0, "go infinite, stop: the mate: %s", bm ? bm : "-");
}

static void test_multipv(void) {
    fprintf(stderr, "-- MultiPV 3\n");
    proc_send(&P, "setoption name MultiPV value 3");
    proc_send(&P, "position startpos moves 7g7f");
    int from = P.mark;
    proc_send(&P, "go nodes 1000");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    /* the last report: the three lines right before bestmove */
    const char *l[3];
    for (int k = 0; k < 3; k++) l[k] = P.mark - 4 + k >= from ? P.lines[P.mark - 4 + k] : NULL;
    char moves[3][16] = {"", "", ""};
    for (int k = 0; k < 3; k++) {
        char want[32];
        snprintf(want, sizeof want, "info multipv %d ", k + 1);
        CHECKF(l[k] && starts_with(l[k], want) && strstr(l[k], " score cp ") && strstr(l[k], " pv "),
               "line %d: %s", k + 1, l[k] ? l[k] : "-");
        const char *pv = l[k] ? strstr(l[k], " pv ") : NULL;
        if (!pv) continue;
        snprintf(moves[k], sizeof moves[k], "%.*s", (int)strcspn(pv + 4, " "), pv + 4);
        CHECKF(play_moves(pos, "startpos", "7g7f") && move_from_usi(pos, moves[k], strlen(moves[k])) != MOVE_NONE,
               "line %d: a legal move: %s", k + 1, moves[k]);
        /* every line carries its whole PV (issue 45.3: lines 2..N had their first move only), legal
         * from the root, and its first move is the line's own */
        char line[2048];
        snprintf(line, sizeof line, "7g7f %s", pv + 4);
        int plies = 0;
        for (const char *c = pv + 3; *c; c++) plies += *c == ' ';
        CHECKF(plies >= 2, "line %d: a PV of more than one move (1000 visits): %s", k + 1, pv + 4);
        CHECKF(play_moves(pos, "startpos", line), "line %d: its PV is legal: %s", k + 1, pv + 4);
    }
    CHECKF(strcmp(moves[0], moves[1]) && strcmp(moves[1], moves[2]) && strcmp(moves[0], moves[2]),
           "three different moves: %s %s %s", moves[0], moves[1], moves[2]);
    CHECKF(play_moves(pos, "startpos", "7g7f") && bm && bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE &&
               strcmp(txt, moves[0]) == 0,
           "multipv 1 is the bestmove: %s vs %s", moves[0], bm ? bm : "-");
    proc_send(&P, "setoption name MultiPV value 1");
    proc_send(&P, "go nodes 50");
    CHECK(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL);
    const char *one = P.mark >= 2 ? P.lines[P.mark - 2] : NULL;
    CHECKF(one && starts_with(one, "info depth "), "MultiPV 1: the plain line: %s", one ? one : "-");
}

static void test_ponder_option(void) {
    fprintf(stderr, "-- USI_Ponder\n");
    for (int on = 0; on < 2; on++) {
        proc_send(&P, "setoption name USI_Ponder value %s", on ? "true" : "false");
        proc_send(&P, "position startpos moves 2g2f");
        proc_send(&P, "go nodes 300");
        const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
        const char *info = bm && P.mark >= 2 ? P.lines[P.mark - 2] : NULL;
        const char *pv = info ? strstr(info, " pv ") : NULL;
        CHECKF(pv && strchr(pv + 4, ' '), "a pv of two moves or more: %s", info ? info : "-");
        if (!on) {
            CHECKF(bm && !strstr(bm, " ponder "), "USI_Ponder false: no ponder move: %s", bm ? bm : "-");
        } else {
            CHECKF(bm && strstr(bm, " ponder "), "USI_Ponder true: a ponder move: %s", bm ? bm : "-");
            if (bm && strstr(bm, " ponder ")) {
                play_moves(pos, "startpos", "2g2f");
                pos_do_move(pos, bestmove_of(pos, bm, txt, sizeof txt));
                const char *pm = strstr(bm, " ponder ") + 8;
                CHECKF(move_from_usi(pos, pm, strcspn(pm, " ")) != MOVE_NONE, "legal ponder move: %s", bm);
            }
        }
    }
    proc_send(&P, "setoption name USI_Ponder value false");
}

static void test_entering_king(void) {
    fprintf(stderr, "-- EnteringKingRule\n");
    /* Black king in camp, 13 pieces there, 28 points: it may declare */
    const char *decl = "+R+BGGSS+L+L1/4K4/PPPPP4/9/9/9/9/9/4k4 b 7P 1";
    CHECKF(play_moves(pos, decl, "") && rules_can_declare(pos), "fixture declares");
    const char *info;
    const char *bm = go_at(decl, "nodes 32", &info);
    CHECKF(bm && strcmp(bm, "bestmove win") == 0, "CSARule27 (default): %s", bm ? bm : "-");
    proc_send(&P, "setoption name EnteringKingRule value NoEnteringKing");
    bm = go_at(decl, "nodes 32", &info);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "NoEnteringKing: a move, not win: %s", bm ? bm : "-");
    proc_send(&P, "setoption name EnteringKingRule value CSARule27");
    bm = go_at(decl, "nodes 32", &info);
    CHECKF(bm && strcmp(bm, "bestmove win") == 0, "CSARule27 again: %s", bm ? bm : "-");
    /* The 24-point rule declares at 31 points for either colour: every win
     * it declares the 27-point rule declares too, so the position that tells
     * them apart is a 27-point-only one (28 points, decl): a move under
     * CSARule24, `bestmove win` at 31 points (3 pawns more). */
    const char *decl31 = "+R+BGGSS+L+L1/4K4/PPPPP4/9/9/9/9/9/4k4 b 10P 1";
    CHECKF(play_moves(pos, decl31, "") && rules_declaration_points(pos, COLOR_BLACK) == 31 &&
               rules_can_declare_by(pos, RULES_DECLARE_CSA24),
           "fixture declares under the 24-point rule");
    CHECKF(play_moves(pos, decl, "") && !rules_can_declare_by(pos, RULES_DECLARE_CSA24), "28 points: not under 24");
    proc_send(&P, "setoption name EnteringKingRule value CSARule24");
    bm = go_at(decl, "nodes 32", &info);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "CSARule24 at 28 points: a move, not win: %s",
           bm ? bm : "-");
    bm = go_at(decl31, "nodes 32", &info);
    CHECKF(bm && strcmp(bm, "bestmove win") == 0, "CSARule24 at 31 points: %s", bm ? bm : "-");
    /* White declares by the same count: the mirror image, White to move */
    const char *decl31w = "4K4/9/9/9/9/9/4ppppp/4k4/1+l+lssgg+b+r w 10p 1";
    CHECKF(play_moves(pos, decl31w, "") && rules_can_declare_by(pos, RULES_DECLARE_CSA24), "White's fixture declares");
    bm = go_at(decl31w, "nodes 32", &info);
    CHECKF(bm && strcmp(bm, "bestmove win") == 0, "CSARule24, White at 31 points: %s", bm ? bm : "-");
    proc_send(&P, "setoption name EnteringKingRule value CSARule27");
    /* In the tree: White to move, and after any reply Black (28 points) may
     * declare. Under CSARule27 every leaf is a loss for White; under
     * NoEnteringKing or CSARule24 (28 < 31) none is, and Net none scores the
     * rest 0. Asked in turn on the same position: the tree kept between the
     * searches must not keep the other rule's verdicts. */
    const char *before = "+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 w RB 1";
    CHECKF(play_moves(pos, before, "5i4h") && rules_can_declare(pos), "Black may declare after White's reply");
    CHECKF(play_moves(pos, before, ""), "White to move");
    static const struct {
        const char *rule;
        bool lost;
    } tree[] = {{"CSARule27", true}, {"NoEnteringKing", false}, {"CSARule27", true}, {"CSARule24", false}};
    for (int i = 0; i < 4; i++) {
        proc_send(&P, "setoption name EnteringKingRule value %s", tree[i].rule);
        bm = go_at(before, "nodes 300", &info);
        const char *cp = info ? strstr(info, " score cp ") : NULL;
        int v = cp ? atoi(cp + 10) : 99999;
        CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE && (tree[i].lost ? v <= -1000 : v > -500),
               "%s in the tree: White's score %d (%s), want %s", tree[i].rule, v, info ? info : "-",
               tree[i].lost ? "a loss" : "about 0");
    }
    proc_send(&P, "setoption name EnteringKingRule value CSARule27");
}

static void test_minimum_time(void) {
    fprintf(stderr, "-- MinimumThinkingTime\n");
    /* 20 s sudden death at move 1: soft ~200 ms, hard ~400 ms; at least 380 ms asked for */
    proc_send(&P, "setoption name MinimumThinkingTime value 380");
    proc_send(&P, "position startpos");
    long long t0 = now_ms();
    proc_send(&P, "go btime 20000 wtime 20000");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    long long dt = now_ms() - t0;
    CHECKF(bm && dt >= 370, "MinimumThinkingTime 380: thought %lld ms", dt);
    fprintf(stderr, "   go btime 20000 with MinimumThinkingTime 380: %lld ms\n", dt);
    proc_send(&P, "setoption name MinimumThinkingTime value 0");
}

int main(void) {
    watchdog(170);
    pos = malloc(sizeof *pos);
    const char *dir = t_scratch("test_usi_analysis");
    char net[700];
    snprintf(net, sizeof net, "%s/net.safetensors", dir);
    CHECK(write_net(net));
    CHECK(proc_start(&P, NULL));
    CHECK(proc_handshake(&P));
    test_score_mate();
    test_entering_king();
    test_minimum_time();
    /* a net, so that the search has preferences (MultiPV, ponder moves) */
    proc_send(&P, "setoption name Net value %s", net);
    proc_send(&P, "setoption name Backend value cpu");
    proc_send(&P, "isready");
    CHECK(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL);
    test_multipv();
    test_ponder_option();
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 0, "quit");
    proc_end(&P);
    t_rm_rf(dir);
    free(pos);
    return t_done("test_usi_analysis");
}
