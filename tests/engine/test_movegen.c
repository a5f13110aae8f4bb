/* test_movegen.c - move generation, legality, make/unmake and history.
 *
 * Random playouts from several starts check at every ply that:
 *   - the legal list has no duplicates and equals the pseudo-legal list
 *     filtered by pos_is_legal, and movegen_count_legal agrees;
 *   - on sampled plies, pos_is_valid_move accepts exactly the legal moves
 *     among all 65536 16-bit values;
 *   - every legal move made and unmade restores the position exactly, the
 *     incremental state (keys, checkers, bitboards) matches a fresh
 *     computation, and pos_gives_check predicts the check;
 *   - the history keeps every ply's key and check status.
 * Then hand-made positions pin down each rule (promotion, drops, nifu,
 * pawn-drop mate, pins, double check, king safety).
 * $KOMA_TEST_GAMES scales the playouts (default 60).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/movegen.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static const char *sfen_of(const pos_t *pos) {
    static char buf[SFEN_MAX_LEN];
    sfen_write(pos, buf, sizeof buf);
    return buf;
}

static int cmp_move(const void *a, const void *b) { return (int)*(const move_t *)a - (int)*(const move_t *)b; }

/* The parts of a position make/unmake must restore. */
static bool same_position(const pos_t *a, const pos_t *b) {
    if (memcmp(a->board, b->board, sizeof a->board)) return false;
    if (memcmp(a->bb, b->bb, sizeof a->bb) || memcmp(a->by_color, b->by_color, sizeof a->by_color)) return false;
    if (memcmp(a->hand, b->hand, sizeof a->hand) || memcmp(a->king_sq, b->king_sq, sizeof a->king_sq)) return false;
    if (a->side != b->side || a->game_ply != b->game_ply || a->hist_n != b->hist_n) return false;
    const pos_state_t *sa = pos_state(a), *sb = pos_state(b);
    return sa->key == sb->key && sa->board_key == sb->board_key && sa->hand_key == sb->hand_key &&
           bb_equal(sa->checkers, sb->checkers) && sa->hand[0] == sb->hand[0] && sa->hand[1] == sb->hand[1];
}

static pos_t pos, before;

/* Everything checked at one ply. */
static void check_ply(pos_t *p, bool full_scan) {
    move_list_t legal, pseudo;
    movegen_legal(p, &legal);
    CHECKF(legal.n == movegen_count_legal(p), "%s: list %d, count %d", sfen_of(p), legal.n, movegen_count_legal(p));
    qsort(legal.moves, (size_t)legal.n, sizeof(move_t), cmp_move);
    for (int i = 1; i < legal.n; i++) CHECKF(legal.moves[i] != legal.moves[i - 1], "%s: duplicate move", sfen_of(p));

    movegen_pseudo(p, &pseudo);
    move_list_t filtered = {.n = 0};
    for (int i = 0; i < pseudo.n; i++) {
        CHECKF(pos_is_pseudo_legal(p, pseudo.moves[i]), "%s: pseudo move %d not pseudo-legal", sfen_of(p),
               pseudo.moves[i]);
        if (pos_is_legal(p, pseudo.moves[i])) filtered.moves[filtered.n++] = pseudo.moves[i];
    }
    qsort(filtered.moves, (size_t)filtered.n, sizeof(move_t), cmp_move);
    bool same = filtered.n == legal.n && memcmp(filtered.moves, legal.moves, (size_t)legal.n * sizeof(move_t)) == 0;
    CHECKF(same, "%s: legal %d moves, filtered pseudo %d", sfen_of(p), legal.n, filtered.n);

    if (full_scan) {
        int valid = 0;
        for (uint32_t v = 0; v < 65536; v++) {
            bool ok = pos_is_valid_move(p, (move_t)v);
            valid += ok;
            if (ok)
                CHECKF(movegen_list_contains(&legal, (move_t)v), "%s: move %u valid but not generated", sfen_of(p), v);
        }
        CHECKF(valid == legal.n, "%s: %d valid values, %d legal moves", sfen_of(p), valid, legal.n);
    }

    pos_copy(&before, p);
    for (int i = 0; i < legal.n; i++) {
        move_t m = legal.moves[i];
        bool gives = pos_gives_check(p, m);
        pos_do_move(p, m);
        const char *why = pos_validate(p);
        CHECKF(why == NULL, "after %d from %s: %s", m, sfen_of(&before), why ? why : "");
        CHECKF(gives == pos_in_check(p), "%s: gives_check(%d) = %d", sfen_of(&before), m, gives);
        CHECKF(pos_last_move(p) == m, "last move not recorded");
        pos_undo_move(p);
        CHECKF(same_position(p, &before), "%s: undo of %d does not restore", sfen_of(&before), m);
    }
}

static void playout(const char *start, int max_plies) {
    char err[256];
    if (sfen_parse_cstr(&pos, start, err, sizeof err) != SFEN_OK) {
        CHECKF(false, "%s", err);
        return;
    }
    uint64_t keys[POS_HIST_MAX];
    bool checks[POS_HIST_MAX];
    keys[0] = pos_key(&pos);
    checks[0] = pos_in_check(&pos);
    for (int ply = 0; ply < max_plies; ply++) {
        check_ply(&pos, ply % 37 == 5);
        move_list_t list;
        if (movegen_legal(&pos, &list) == 0) break;
        pos_do_move(&pos, list.moves[t_xorshift64(&rng_state) % (uint64_t)list.n]);
        keys[pos_hist_len(&pos)] = pos_key(&pos);
        checks[pos_hist_len(&pos)] = pos_in_check(&pos);
    }
    int n = pos_hist_len(&pos);
    for (int k = 0; k <= n; k++) {
        CHECKF(pos_state_ago(&pos, k)->key == keys[n - k], "history key %d plies ago", k);
        CHECKF(bb_nonzero(pos_state_ago(&pos, k)->checkers) == checks[n - k], "history check flag %d plies ago", k);
    }
    /* Unwind the whole game: every earlier position comes back with its key. */
    while (pos_hist_len(&pos) > 0) {
        pos_undo_move(&pos);
        CHECKF(pos_key(&pos) == keys[pos_hist_len(&pos)], "key after unwinding to ply %d", pos_hist_len(&pos));
    }
    CHECKF(pos_validate(&pos) == NULL, "start position after unwinding");
}

/* ---- hand-made rule checks ------------------------------------------------ */
static void set(const char *sfen) {
    char err[256];
    sfen_error_t e = sfen_parse_cstr(&pos, sfen, err, sizeof err);
    if (e != SFEN_OK) {
        fprintf(stderr, "setup failed: %s\n", err);
        exit(1);
    }
}
static bool legal(const char *usi) { return move_from_usi(&pos, usi, strlen(usi)) != MOVE_NONE; }
static int count(void) { return movegen_count_legal(&pos); }

static void test_rules(void) {
    /* Pawn-drop mate: P*5b mates (defended by the knight, no escape), L*5b is fine. */
    set("3rkr3/9/8p/4N4/1B7/9/1SG6/1KS6/9 b LPp 1");
    CHECKF(!legal("P*5b"), "pawn-drop mate must be illegal");
    CHECKF(legal("L*5b"), "lance drop check is legal");
    CHECKF(pos_is_pawn_drop_mate(&pos, sq_make(4, 1)), "pos_is_pawn_drop_mate");
    /* Same drop without the knight: the king escapes to 4b/6b, so it is legal. */
    set("3rkr3/9/8p/9/1B7/9/1SG6/1KS6/9 b LPp 1");
    CHECKF(legal("P*5b"), "undefended pawn-drop check is legal");
    /* Corner: P*1b is mate (silver guards 1b and 2b). */
    set("7lk/9/8S/9/9/9/9/7L1/8K b P 1");
    CHECKF(!legal("P*1b"), "corner pawn-drop mate");
    CHECKF(legal("P*1d"), "ordinary pawn drop");
    /* A pawn-drop mate is fine when a piece can capture the pawn. */
    set("7gk/9/8S/9/9/9/9/7L1/8K b P 1");
    CHECKF(legal("P*1b"), "gold on 2a takes the pawn");

    /* Nifu, dead squares for drops. */
    set("4k4/9/9/9/9/9/4P4/9/4K4 b PLN 1");
    CHECKF(!legal("P*5e"), "nifu");
    CHECKF(legal("P*4e"), "pawn drop on a free file");
    CHECKF(!legal("P*4a") && !legal("L*4a"), "pawn/lance drop on the last rank");
    CHECKF(legal("L*4b"), "lance drop on rank 2");
    CHECKF(!legal("N*4b") && !legal("N*4a") && legal("N*4c"), "knight drops");
    /* A promoted pawn does not count for nifu. */
    set("4k4/9/9/9/9/9/4+P4/9/4K4 b P 1");
    CHECKF(legal("P*5e"), "tokin is no pawn for nifu");

    /* Promotion: optional in the zone, forced on the last ranks, never for gold/king/promoted. */
    set("4k4/9/7S1/1+PG3NS1/9/9/9/9/4K3L b - 1");
    CHECKF(!legal("8d8c+"), "tokin cannot promote");
    CHECKF(!legal("7d7c+"), "gold cannot promote");
    CHECKF(!legal("1i1a") && legal("1i1a+"), "lance to last rank must promote");
    CHECKF(!legal("3d2b") && legal("3d2b+"), "knight to rank b must promote");
    CHECKF(legal("2c1d+") && legal("2c1d"), "silver leaving the zone may promote");
    CHECKF(legal("2d1c+") && legal("2d1c"), "silver entering the zone may promote");
    set("4k4/9/9/7P1/9/9/9/9/4K4 b - 1");
    CHECKF(legal("2d2c") && legal("2d2c+"), "pawn into the zone: both generated");
    CHECKF(count() == 2 + 5, "pawn 2 moves + king 5 moves, got %d", count());
    set("4k4/7P1/9/9/9/9/9/9/4K4 b - 1");
    CHECKF(!legal("2b2a") && legal("2b2a+"), "pawn to last rank must promote");
    set("4k4/9/9/9/9/9/9/1B7/4K4 b - 1");
    CHECKF(legal("8h3c+") && legal("8h3c"), "bishop into zone, both");
    CHECKF(!legal("8h7g+"), "bishop outside the zone cannot promote");

    /* Pins: the gold on 5h is pinned by the rook on 5a; it may move along the file only. */
    set("4r1k2/9/9/9/9/9/9/4G4/4K4 b - 1");
    CHECKF(legal("5h5g") && !legal("5h4h") && !legal("5h4g"), "pinned gold");
    /* Lance pin: the silver on 5g may not leave the file. */
    set("4l1k2/9/9/9/9/9/4S4/9/4K4 b - 1");
    CHECKF(legal("5g5f") && !legal("5g4f") && !legal("5g6h"), "lance pin");

    /* Check evasion: rook check from 5a; the king may not step back along the file. */
    set("4r1k2/9/9/9/9/9/9/9/4K4 b G 1");
    CHECKF(!legal("5i5h"), "king stays on the checking line");
    CHECKF(legal("5i4h") && legal("G*5h") && !legal("G*4h"), "evasions");
    /* Double check: only king moves. */
    set("4r1k2/9/9/9/9/9/5n3/9/4K2B1 b G 1");
    CHECKF(bb_more_than_one(pos_checkers(&pos)), "double check set up");
    move_list_t l;
    movegen_legal(&pos, &l);
    for (int i = 0; i < l.n; i++)
        CHECKF(!move_is_drop(l.moves[i]) && move_from(l.moves[i]) == pos_king_sq(&pos, COLOR_BLACK),
               "only king moves in double check");
    CHECKF(l.n > 0 && !legal("2i4g") && !legal("2i4g+") && !legal("G*5h"), "no capture or block in double check");
    /* No king move into an attacked square, nor capture of a defended piece. */
    set("4k4/9/9/9/9/9/4g4/4p4/4K4 b - 1");
    CHECKF(!legal("5i5h"), "capturing a defended pawn with the king");
    set("9/9/9/9/9/9/3g1g3/9/4K2k1 b - 1");
    CHECKF(!legal("5i5h") && !legal("5i4h") && !legal("5i6h") && legal("5i4i") && legal("5i6i"), "gold control");

    /* Checkmate: no legal moves. */
    set("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1");
    CHECKF(count() == 0 && pos_in_check(&pos), "mate has no legal moves");

    /* The maximum legal move count. */
    set("R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1");
    CHECKF(count() == 593, "max moves %d", count());
}

static void test_history(void) {
    /* 1500 plies of kings walking back and forth: the history survives and
     * every position repeats with the same key 4 plies later. */
    set("4k4/9/9/9/9/9/9/9/4K4 b - 1");
    const char *cycle[4] = {"5i4i", "5a4a", "4i5i", "4a5a"};
    uint64_t start_key = pos_key(&pos);
    for (int i = 0; i < 1500; i++) {
        move_t m = move_from_usi(&pos, cycle[i % 4], 4);
        CHECKF(m != MOVE_NONE, "cycle move %s", cycle[i % 4]);
        if (m == MOVE_NONE) return;
        pos_do_move(&pos, m);
        if (i >= 4) CHECKF(pos_state_ago(&pos, 4)->key == pos_key(&pos), "repetition key at ply %d", i);
    }
    CHECKF(pos_hist_len(&pos) == 1500 && pos_game_ply(&pos) == 1501, "history length %d", pos_hist_len(&pos));
    CHECKF(pos_state_ago(&pos, 1500)->key == start_key, "first state kept");
    pos_t copy;
    pos_copy(&copy, &pos);
    CHECKF(same_position(&copy, &pos) && pos_state_ago(&copy, 1000)->key == pos_state_ago(&pos, 1000)->key,
           "pos_copy keeps the history");

    /* Board key vs hand: same board and side, different hands. */
    pos_t a, b;
    char err[128];
    sfen_parse_cstr(&a, "4k4/9/9/9/9/9/9/9/4K4 b 2P 1", err, sizeof err);
    sfen_parse_cstr(&b, "4k4/9/9/9/9/9/9/9/4K4 b Pp 1", err, sizeof err);
    CHECKF(pos_board_key(&a) == pos_board_key(&b) && pos_key(&a) != pos_key(&b), "board key ignores hands");
    CHECKF(hand_is_superior_or_equal(pos_hand(&a, COLOR_BLACK), pos_hand(&b, COLOR_BLACK)), "2P >= P");
    CHECKF(!hand_is_superior_or_equal(pos_hand(&b, COLOR_BLACK), pos_hand(&a, COLOR_BLACK)), "P < 2P");
    sfen_parse_cstr(&b, "4k4/9/9/9/9/9/9/9/4K4 w 2P 1", err, sizeof err);
    CHECKF(pos_board_key(&a) != pos_board_key(&b), "board key includes the side to move");

    /* Null move flips the side and the key, and comes back. */
    set("startpos");
    uint64_t k = pos_key(&pos);
    pos_do_null_move(&pos);
    CHECKF(pos_side_to_move(&pos) == COLOR_WHITE && pos_key(&pos) != k && pos_validate(&pos) == NULL, "null move");
    pos_undo_null_move(&pos);
    CHECKF(pos_key(&pos) == k && pos_side_to_move(&pos) == COLOR_BLACK, "undo null move");
}

static void test_attacks(void) {
    /* Attackers of a square, with a chosen occupancy. */
    set("4k4/9/9/9/4r4/9/9/4P4/4K4 b - 1");
    sq_t s = sq_make(4, 7); /* 5h, the pawn */
    bb_t att = pos_attackers_to(&pos, COLOR_WHITE, s, pos_occupied(&pos));
    CHECKF(bb_popcount(att) == 1 && bb_lsb(att) == sq_make(4, 4), "rook on 5e attacks 5h");
    bb_t occ = bb_xor(pos_occupied(&pos), bb_sq(s));
    CHECKF(pos_is_attacked(&pos, COLOR_WHITE, sq_make(4, 8), occ), "x-ray through the removed pawn");
    CHECKF(!pos_is_attacked(&pos, COLOR_WHITE, sq_make(4, 8), pos_occupied(&pos)), "pawn blocks");
    bb_t pinned = pos_pinned(&pos, COLOR_BLACK);
    CHECKF(bb_popcount(pinned) == 1 && bb_lsb(pinned) == s, "pawn pinned");
    bb_t by_white = pos_attacks_by(&pos, COLOR_WHITE);
    CHECKF(bb_test(by_white, sq_make(0, 4)) && bb_test(by_white, s) && !bb_test(by_white, sq_make(4, 8)),
           "attacked squares of White");
}

int main(void) {
    const char *starts[] = {
        "startpos",
        "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
        "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1",
        "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
        "l+Rl2+R3/3k1s2+L/p1p1p4/2Ppnp1S1/4n1Pbp/PP2G4/1G3P+n2/Kp2P4/L8 w GSPPPPbgsnp",
        "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrbgsnlp 1",
        "8k/9/9/9/9/9/9/9/K8 b 2R2B4G4S4N4L9P9p 1",
    };
    int games = 60;
    const char *env = getenv("KOMA_TEST_GAMES");
    if (env && *env) games = atoi(env);
    for (int g = 0; g < games; g++) playout(starts[g % (int)(sizeof starts / sizeof *starts)], 240);
    test_rules();
    test_history();
    test_attacks();
    printf("test_movegen: %d playouts\n", games);
    return t_done("test_movegen");
}
