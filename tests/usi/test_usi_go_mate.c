/* test_usi_go_mate.c - `go mate` through the real koma binary: a mate in 3
 * answered with a sequence a brute-force check accepts, `checkmate nomate`
 * when no check exists, `checkmate timeout` on a time limit and on stop,
 * `checkmate nomate` for a lone rook (no mate within the longest length
 * searched), isready and quit while a mate search runs. */
#include "usi_test.h"

#include "mate_bf.h"

static usi_proc_t P;
static pos_t *pos;

static void mate_in_3(const char *sfen) {
    CHECKF(play_moves(pos, sfen, "") && !bf_or(pos, 1) && bf_or(pos, 3), "%s is a mate in 3", sfen);
    proc_send(&P, "position sfen %s", sfen);
    proc_send(&P, "go mate 10000");
    const char *cm = proc_expect(&P, "checkmate", USI_WAIT_MS);
    int plies = 0;
    CHECKF(cm && strlen(cm) > 10 && bf_verify_line(pos, cm + 10, &plies) && plies == 3, "'%s' mates in 3",
           cm ? cm : "-");
}

int main(void) {
    watchdog(170);
    pos = malloc(sizeof *pos);
    CHECKF(proc_start(&P, NULL), "start");
    CHECKF(proc_handshake(&P), "handshake");
    mate_in_3("lb7/4k4/5P3/5G3/9/9/9/9/8K b GG 1");
    mate_in_3("1R7/k8/2b3g2/1S7/9/9/9/9/4K4 b NS 1");
    /* with moves: position ... moves, attacker White */
    proc_send(&P, "position sfen k8/9/9/9/9/9/6r2/9/7K1 b gn 1 moves 2i1i");
    proc_send(&P, "go mate 10000");
    const char *cm = proc_expect(&P, "checkmate", USI_WAIT_MS);
    CHECKF(play_moves(pos, "k8/9/9/9/9/9/6r2/9/7K1 b gn 1", "2i1i"), "replay");
    int plies = 0;
    CHECKF(cm && strlen(cm) > 10 && bf_verify_line(pos, cm + 10, &plies) && plies == 3, "White mates: '%s'",
           cm ? cm : "-");
    /* no check at all: proven at once */
    proc_send(&P, "position startpos");
    proc_send(&P, "go mate infinite");
    cm = proc_expect(&P, "checkmate", USI_WAIT_MS);
    CHECKF(cm && strcmp(cm, "checkmate nomate") == 0, "startpos: %s", cm ? cm : "-");
    /* a lone rook checks forever but never mates: no mate within the longest length searched */
    proc_send(&P, "position sfen 4k4/9/9/9/9/9/9/9/4K4 b R 1");
    proc_send(&P, "go mate 20000");
    cm = proc_expect(&P, "checkmate", USI_WAIT_MS);
    CHECKF(cm && strcmp(cm, "checkmate nomate") == 0, "lone rook: %s", cm ? cm : "-");
    /* both sides holding one of every piece and nine pawns: far too big (df-pn settles nothing in
     * 3,000,000 nodes, 20 s of CPU), the clock ends it: well before 20 s, at any load */
    proc_send(&P, "position sfen 4k4/9/9/9/9/9/9/9/4K4 b RBGSNL9Prbgsnl9p 1");
    long long t0 = now_ms();
    proc_send(&P, "go mate 500");
    cm = proc_expect(&P, "checkmate", USI_WAIT_MS);
    long long dt = now_ms() - t0;
    CHECKF(cm && strcmp(cm, "checkmate timeout") == 0 && dt < 15000, "timeout in %lld ms: %s", dt, cm ? cm : "-");
    /* infinite: isready answers during it, stop ends it, quit too (nothing
     * else would: no bound is needed on how soon) */
    int mark = P.n_lines;
    proc_send(&P, "go mate infinite");
    proc_drain(&P, 300);
    CHECKF(!proc_find(&P, mark, P.n_lines, "checkmate"), "still searching");
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "readyok during go mate");
    CHECKF(!proc_find(&P, mark, P.n_lines, "checkmate"), "still searching after isready");
    proc_send(&P, "stop");
    cm = proc_expect(&P, "checkmate", USI_WAIT_MS);
    CHECKF(cm && strcmp(cm, "checkmate timeout") == 0, "stop: %s", cm ? cm : "-");
    /* quit during go mate infinite */
    proc_send(&P, "go mate infinite");
    proc_drain(&P, 200);
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "quit during go mate");
    proc_end(&P);
    free(pos);
    return t_done("test_usi_go_mate");
}
