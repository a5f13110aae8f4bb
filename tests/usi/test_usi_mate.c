/* test_usi_mate.c - the `go mate` search in process: mates in 3, 5 and 7
 * found at their exact length and checked against a brute-force reference;
 * proven "no mate"; no mate within the longest length; limits (nodes, time,
 * stop flag) end a search that is too big; pawn-drop mate
 * is never played; the position is unchanged afterwards. */
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/mate1.h"
#include "tests/koma_test.h"
#include "usi/mate.h"

#include "mate_bf.h"

static pos_t *pos;

static bool set(const char *sfen) {
    char err[256];
    bool ok = sfen_parse_cstr(pos, sfen, err, sizeof err) == SFEN_OK;
    CHECKF(ok, "%s: %s", sfen, err);
    return ok;
}

static void pv_text(const usi_mate_result_t *r, char *buf, size_t n) {
    size_t u = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < r->len && u + 8 < n; i++) {
        char m[MOVE_USI_MAX];
        move_to_usi(r->pv[i], m);
        u += (size_t)snprintf(buf + u, n - u, "%s%s", i ? " " : "", m);
    }
}

/* sfen has a mate in exactly `plies` (and none shorter). */
static void check_mate(const char *sfen, int plies, bool brute_shorter) {
    if (!set(sfen)) return;
    uint64_t key = pos_key(pos);
    if (brute_shorter) CHECKF(!bf_or(pos, plies - 2), "%s: the fixture has a shorter mate", sfen);
    CHECKF(mate1_find(pos) == MOVE_NONE, "%s: no mate in one", sfen);
    usi_mate_limits_t lim;
    usi_mate_limits_default(&lim);
    lim.deadline_ms = compat_now_ms() + 20000;
    usi_mate_result_t r;
    usi_mate_search(pos, &lim, &r);
    char line[512];
    pv_text(&r, line, sizeof line);
    CHECKF(r.status == USI_MATE_FOUND && r.len == plies, "%s: status %d len %d (%s), want a mate in %d", sfen,
           (int)r.status, r.len, line, plies);
    int n = 0;
    CHECKF(bf_verify_line(pos, line, &n) && n == plies, "%s: '%s' is not a mate", sfen, line);
    CHECKF(usi_mate_verify(pos, r.pv, r.len), "usi_mate_verify agrees");
    CHECKF(pos_key(pos) == key && pos_hist_len(pos) == 0, "position unchanged");
    /* a search limited to fewer plies does not find it */
    lim.max_plies = plies - 2;
    usi_mate_search(pos, &lim, &r);
    CHECKF(r.status != USI_MATE_FOUND, "%s: found within %d plies", sfen, plies - 2);
}

int main(void) {
    pos = malloc(sizeof *pos);
    /* mates in 3 (brute force confirms none in 1 and one in 3) */
    const char *m3[] = {"lb7/4k4/5P3/5G3/9/9/9/9/8K b GG 1", "8k/9/2R6/9/9/9/9/9/K8 b NG 1",
                        "5R1gk/2rg5/7P1/7S1/9/9/9/9/6K2 b BB 1", "1R7/k8/2b3g2/1S7/9/9/9/9/4K4 b NS 1"};
    for (size_t i = 0; i < sizeof m3 / sizeof m3[0]; i++) {
        if (set(m3[i])) CHECKF(bf_or(pos, 3), "%s: brute force finds the mate in 3", m3[i]);
        check_mate(m3[i], 3, true);
    }
    /* longer mates */
    check_mate("k8/7l1/p7R/S2L5/9/9/9/9/K8 b S 1", 5, true);
    check_mate("9/2k6/3R5/3B5/9/9/9/9/3K5 b B 1", 5, true);
    check_mate("3k5/9/g8/3N5/9/9/9/9/2K6 b RS 1", 7, false);
    check_mate("7k1/p7n/8l/7P1/9/9/9/9/4K4 b RB 1", 7, false);
    /* White attacks too */
    check_mate("k8/9/9/9/9/9/6r2/9/8K w gn 1", 3, true);

    usi_mate_limits_t lim;
    usi_mate_result_t r;
    /* no check to give at all: proven, at once */
    pos_set_startpos(pos);
    usi_mate_limits_default(&lim);
    usi_mate_search(pos, &lim, &r);
    CHECKF(r.status == USI_MATE_NONE, "startpos: nomate, got %d", (int)r.status);
    /* one check (N*2c), answered by S2bx2c, after which Black has none: proven */
    if (set("7gk/7sl/9/9/9/9/9/9/K8 b N 1")) {
        usi_mate_limits_default(&lim);
        lim.deadline_ms = compat_now_ms() + 20000;
        usi_mate_search(pos, &lim, &r);
        CHECKF(r.status == USI_MATE_NONE && r.depth == 3, "checks run out: nomate, got %d at %d", (int)r.status,
               r.depth);
    }
    /* a lone rook checks forever but never mates: searched to the longest length */
    if (set("4k4/9/9/9/9/9/9/9/4K4 b R 1")) {
        usi_mate_limits_default(&lim);
        lim.deadline_ms = compat_now_ms() + 20000;
        usi_mate_search(pos, &lim, &r);
        CHECKF(r.status == USI_MATE_NONE && r.depth == USI_MATE_PLY_MAX, "lone rook: nomate, got %d at %d",
               (int)r.status, r.depth);
        lim.max_plies = 9;
        usi_mate_search(pos, &lim, &r);
        CHECKF(r.status == USI_MATE_NONE && r.depth == 9, "max_plies 9: got %d at %d", (int)r.status, r.depth);
    }
    /* rook and bishop against every interposition in hand: the limits end it */
    if (set("4k4/9/9/9/9/9/9/9/4K4 b RB8p2l2n2s2g 1")) {
        uint64_t key = pos_key(pos);
        usi_mate_limits_default(&lim);
        lim.max_nodes = 20000;
        usi_mate_search(pos, &lim, &r);
        CHECKF(r.status == USI_MATE_TIMEOUT, "node limit: timeout, got %d", (int)r.status);
        CHECKF(r.nodes >= 20000 && r.nodes < 40000, "node limit respected: %lld", (long long)r.nodes);
        CHECKF(pos_key(pos) == key && pos_hist_len(pos) == 0, "position unchanged after an aborted search");
        int64_t t0 = compat_now_ms();
        usi_mate_limits_default(&lim);
        lim.deadline_ms = t0 + 200;
        usi_mate_search(pos, &lim, &r);
        int64_t dt = compat_now_ms() - t0;
        /* no node limit, no stop: only the deadline makes it a timeout (the
         * search would run on for far longer, then end "none") */
        CHECKF(r.status == USI_MATE_TIMEOUT, "deadline: status %d after %lld ms", (int)r.status, (long long)dt);
        atomic_int stop;
        atomic_init(&stop, 1);
        usi_mate_limits_default(&lim);
        lim.stop = &stop;
        usi_mate_search(pos, &lim, &r);
        CHECKF(r.status == USI_MATE_TIMEOUT, "stop flag");
    }
    /* the only mate would be a pawn drop (uchifuzume): never played */
    if (set("7nk/9/7G1/9/9/9/9/9/K8 b P 1")) {
        pos_t *p2 = malloc(sizeof *p2);
        pos_copy(p2, pos);
        move_t drop = move_make_drop(PT_PAWN, sq_make(0, 1)); /* P*1b */
        CHECKF(!pos_is_valid_move(p2, drop), "P*1b is illegal here (pawn-drop mate)");
        free(p2);
        usi_mate_limits_default(&lim);
        lim.deadline_ms = compat_now_ms() + 5000;
        usi_mate_search(pos, &lim, &r);
        CHECKF(r.status != USI_MATE_FOUND, "no mate by a pawn drop, got %d len %d", (int)r.status, r.len);
        CHECKF(!bf_or(pos, 3), "brute force agrees: no mate in 3");
    }
    free(pos);
    return t_done("test_usi_mate");
}
