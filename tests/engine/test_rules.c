/* test_rules.c - game end: sennichite, perpetual check, superior/inferior
 * repetition, the entering-king declaration (27-point rule, and the 24-point
 * and no-declaration rules at their boundaries), no legal move, the move
 * limit, and the end-reason names.
 *
 * Repetitions are played as real move sequences (USI) from SFENs; each
 * scenario also runs colour-flipped (mirrored SFEN and moves), so both
 * colours are covered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"
#include "sfen_mirror.h"

static pos_t pos;

/* Sets pos from sfen (mirrored when flip). Returns false (and counts a failure) on error. */
static bool set_pos(const char *sfen, bool flip) {
    char buf[SFEN_MAX_LEN + 16], err[256];
    if (flip) {
        if (mirror_sfen(sfen, buf, sizeof buf) != 0) {
            CHECKF(0, "cannot mirror %s", sfen);
            return false;
        }
        sfen = buf;
    }
    if (sfen_parse_cstr(&pos, sfen, err, sizeof err) != SFEN_OK) {
        CHECKF(0, "%s: %s", sfen, err);
        return false;
    }
    return true;
}

/* Plays space-separated USI moves (mirrored when flip); false on an illegal one. */
static bool play(const char *moves, bool flip) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", moves);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) {
        char u[16];
        if (flip)
            mirror_usi(t, u);
        else
            snprintf(u, sizeof u, "%s", t);
        move_t m = move_from_usi(&pos, u, strlen(u));
        if (m == MOVE_NONE) {
            char sfen[SFEN_MAX_LEN];
            sfen_write(&pos, sfen, sizeof sfen);
            CHECKF(0, "move %s is not legal in %s", u, sfen);
            return false;
        }
        pos_do_move(&pos, m);
    }
    return true;
}

static const char *side_name(color_t c) { return c == COLOR_BLACK ? "black" : c == COLOR_WHITE ? "white" : "none"; }

/* ---- sennichite ------------------------------------------------------------- */
static void test_sennichite(bool flip) {
    const char *F = flip ? " (flipped)" : "";
    /* Golds back and forth from the start position: no checks. */
    if (!set_pos("startpos", flip)) return;
    const char *cycle = "4i4h 6a6b 4h4i 6b6a";
    int32_t back = -1;
    CHECKF(rules_repetition(&pos, &back) == RULES_REP_NONE && back == 0, "fresh position%s", F);
    play(cycle, flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_NONE, "2 occurrences are no sennichite%s", F);
    CHECKF(rules_repetition_first(&pos, -1, false, &back) == RULES_REP_DRAW && back == 4,
           "search variant sees the first repetition%s: back %d", F, back);
    CHECKF(rules_repetition_first(&pos, 3, false, &back) == RULES_REP_NONE && back == 0,
           "a cycle longer than max_plies_back is not seen%s", F);
    CHECKF(rules_repetition_first(&pos, 4, false, NULL) == RULES_REP_DRAW, "max_plies_back 4 sees it%s", F);
    play(cycle, flip);
    CHECKF(rules_repetition(&pos, &back) == RULES_REP_NONE && back == 0, "3 occurrences are not yet sennichite%s", F);
    rules_status_t st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
    CHECKF(st.end == RULES_END_NONE, "3 occurrences: game goes on%s, got %s", F, rules_end_name(st.end));
    play("4i4h 6a6b 4h4i", flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_NONE, "one ply short of the 4th occurrence%s", F);
    play("6b6a", flip);
    CHECKF(rules_repetition(&pos, &back) == RULES_REP_DRAW && back == 12, "4th occurrence: draw%s (back %d)", F, back);
    st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
    CHECKF(st.end == RULES_END_SENNICHITE && st.winner == COLOR_NB, "status sennichite%s: %s %s", F,
           rules_end_name(st.end), side_name(st.winner));
    /* The position after the first move occurs for the 4th time one ply later. */
    play("4i4h", flip);
    CHECKF(rules_repetition(&pos, &back) == RULES_REP_DRAW && back == 12, "4th occurrence of the next position%s", F);
}

/* Black's rook 1e and White's king 2a, Black to move. Cycles of 4 plies. */
static const char *ROOK_SFEN = "7k1/9/9/9/8R/9/9/9/K8 b - 1";
static const char *ALL_CHECKS = "1e2e 2a1a 2e1e 1a2a"; /* Black checks with every move */
static const char *SOME_CHECKS = "1e2e 2a3a 2e1e 3a2a"; /* Black checks, then does not */

static void test_perpetual(bool flip) {
    const char *F = flip ? " (flipped)" : "";
    const color_t checker = flip ? COLOR_WHITE : COLOR_BLACK, victim = color_flip(checker);
    int32_t back = -1;
    if (!set_pos(ROOK_SFEN, flip)) return;
    play(ALL_CHECKS, flip);
    CHECKF(rules_repetition_first(&pos, -1, false, &back) == RULES_REP_LOSS && back == 4,
           "search variant: the perpetual checker (to move) loses%s", F);
    play(ALL_CHECKS, flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_NONE, "3 occurrences of a perpetual check: not yet%s", F);
    play(ALL_CHECKS, flip);
    CHECKF(rules_repetition(&pos, &back) == RULES_REP_LOSS && back == 12, "4th occurrence, checker to move: loss%s", F);
    rules_status_t st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
    CHECKF(st.end == RULES_END_PERPETUAL_CHECK && st.winner == victim, "status%s: %s, winner %s", F,
           rules_end_name(st.end), side_name(st.winner));
    /* One ply on, the checked side is to move in its 4th occurrence: it wins. */
    play("1e2e", flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_WIN, "4th occurrence, checked side to move: win%s", F);
    st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
    CHECKF(st.end == RULES_END_PERPETUAL_CHECK && st.winner == victim, "status after the check%s: %s, winner %s", F,
           rules_end_name(st.end), side_name(st.winner));
    (void)checker;

    /* Check on some moves only: an ordinary draw. */
    if (!set_pos(ROOK_SFEN, flip)) return;
    play(SOME_CHECKS, flip);
    CHECKF(rules_repetition_first(&pos, -1, false, NULL) == RULES_REP_DRAW, "mixed cycle, search variant: draw%s", F);
    play(SOME_CHECKS, flip);
    play(SOME_CHECKS, flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_DRAW, "mixed cycles: sennichite draw%s", F);
    st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
    CHECKF(st.end == RULES_END_SENNICHITE && st.winner == COLOR_NB, "mixed cycles status%s: %s", F,
           rules_end_name(st.end));

    /* The game rule looks at every move since the FIRST of the four
     * occurrences: a mixed first cycle makes it a draw even though the last
     * cycles are all checks; the search variant judges only the last cycle. */
    if (!set_pos(ROOK_SFEN, flip)) return;
    play(SOME_CHECKS, flip);
    play(ALL_CHECKS, flip);
    play(ALL_CHECKS, flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_DRAW, "mixed first cycle, then checks: draw%s", F);
    CHECKF(rules_repetition_first(&pos, -1, false, NULL) == RULES_REP_LOSS, "last cycle all checks: loss%s", F);
}

static void test_superior(bool flip) {
    const char *F = flip ? " (flipped)" : "";
    int32_t back = -1;
    /* Black's gold takes a pawn and walks round; White drops the pawn back
     * and its king walks round: same board, Black holds one pawn more. */
    if (!set_pos("4k4/9/9/9/4p4/4G4/9/9/4K4 b p 1", flip)) return;
    play("5f5e 5a4a 5e4e P*5e 4e4f 4a4b 4f5f 4b5a", flip);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_NONE, "hands differ: no sennichite%s", F);
    CHECKF(rules_repetition_first(&pos, -1, false, NULL) == RULES_REP_NONE, "superior not asked%s", F);
    CHECKF(rules_repetition_first(&pos, -1, true, &back) == RULES_REP_SUPERIOR && back == 8,
           "side to move came round a pawn up: superior%s (back %d)", F, back);
    CHECKF(rules_repetition_first(&pos, 6, true, NULL) == RULES_REP_NONE, "beyond max_plies_back%s", F);
    /* White's gold takes a pawn; Black drops it back: Black (to move) is a pawn down. */
    if (!set_pos("4k4/9/9/4g4/4P4/9/9/9/4K4 b P 1", flip)) return;
    play("5i4i 5d5e 4i4h 5e6e P*5e 6e6d 4h5i 6d5d", flip);
    CHECKF(rules_repetition_first(&pos, -1, true, &back) == RULES_REP_INFERIOR && back == 8,
           "side to move came round a pawn down: inferior%s (back %d)", F, back);
    CHECKF(rules_repetition(&pos, NULL) == RULES_REP_NONE, "inferior is no game rule%s", F);
}

/* ---- declaration --------------------------------------------------------------- */
static void expect_declare(const char *sfen, bool flip, bool want, int32_t points, const char *what) {
    const char *F = flip ? " (flipped)" : "";
    if (!set_pos(sfen, flip)) return;
    CHECKF(rules_can_declare(&pos) == want, "%s%s: can_declare should be %d", what, F, want);
    if (points >= 0)
        CHECKF(rules_declaration_points(&pos, pos.side) == points, "%s%s: %d points, want %d", what, F,
               rules_declaration_points(&pos, pos.side), points);
    rules_status_t st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
    if (want)
        CHECKF(st.end == RULES_END_DECLARATION && st.winner == pos.side, "%s%s: status %s", what, F,
               rules_end_name(st.end));
    else
        CHECKF(st.end != RULES_END_DECLARATION, "%s%s: status must not be declaration", what, F);
}

static void test_declaration(void) {
    /* Black's king on 5b with 10 pieces in White's camp: 8 small (8 points)
     * + rook and bishop (10 points) = 18, plus R B in hand (10) = 28. */
    const char *OK28 = "+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RB 1";
    /* Black needs 28 points, White 27. */
    expect_declare("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b R4P 1", false, false, 27, "27 points for Black");
    expect_declare("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b R4P 1", true, true, 27, "27 points for White");
    expect_declare("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b R3P 1", true, false, 26, "26 points for White");
    for (int f = 0; f < 2; f++) {
        bool flip = f == 1;
        expect_declare(OK28, flip, true, 28, "28 points, 10 pieces");
        /* Too few pieces in the camp: 9, however many points. */
        expect_declare("1+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RBL10P 1", flip, false, 38, "9 pieces in the camp");
        /* King one rank short of the camp. */
        expect_declare("+L+NSG1GS+N+L/1R5B1/9/4K4/9/9/9/9/4k4 b RB 1", flip, false, 28, "king outside the camp");
        /* In check from a rook on the king's file. */
        expect_declare("+L+NSG1GS+N+L/1R2K2B1/9/9/4r4/9/9/9/4k4 b B 1", flip, false, 23, "in check, 23 points");
        expect_declare("+L+NSG1GS+N+L/1R2K2B1/9/9/4r4/9/9/9/4k4 b B5P 1", flip, false, 28, "in check, 28 points");
        /* Promoted pieces count as their kind: horse and dragon 5, tokins 1. */
        expect_declare("+P+N+SG1G+S+N+L/1+R2K2+B1/9/9/9/9/9/9/4k4 b RB 1", flip, true, 28, "promoted pieces");
        /* Pieces outside the camp do not count. */
        expect_declare("+L+NSG1GS+N+L/4K4/9/1R5B1/9/9/9/9/4k4 b RB2P 1", flip, false, 20, "big pieces outside the camp");
    }
}

/* The rule as a parameter: rules_can_declare_by under each rule, and the
 * 27-point rule's answer staying rules_can_declare's. want24, want27: the
 * verdicts under the 24- and 27-point rules (none never declares). */
static void expect_declare_by(const char *sfen, bool flip, bool want24, bool want27, int32_t points, const char *what) {
    const char *F = flip ? " (flipped)" : "";
    if (!set_pos(sfen, flip)) return;
    CHECKF(rules_declaration_points(&pos, pos.side) == points, "%s%s: %d points, want %d", what, F,
           rules_declaration_points(&pos, pos.side), points);
    CHECKF(rules_can_declare_by(&pos, RULES_DECLARE_CSA24) == want24, "%s%s: 24-point rule should say %d", what, F,
           want24);
    CHECKF(rules_can_declare_by(&pos, RULES_DECLARE_CSA27) == want27, "%s%s: 27-point rule should say %d", what, F,
           want27);
    CHECKF(rules_can_declare(&pos) == want27, "%s%s: rules_can_declare is the 27-point rule", what, F);
    CHECKF(!rules_can_declare_by(&pos, RULES_DECLARE_NONE), "%s%s: no rule, no declaration", what, F);
    CHECKF(!rules_can_declare_by(&pos, RULES_DECLARE_NB), "%s%s: an invalid rule declares nothing", what, F);
    /* the game rule stays the 27-point one */
    CHECKF((rules_status(&pos, RULES_MAX_PLY_DEFAULT).end == RULES_END_DECLARATION) == want27, "%s%s: status", what,
           F);
}

static void test_declaration_rules(void) {
    /* Black's king on 5b, 10 pieces in White's camp worth 18 points, the rest in hand. */
    for (int f = 0; f < 2; f++) {
        bool flip = f == 1; /* flipped: White declares, the same counts */
        /* 24-point rule: 31 points for either colour; 30 is not a win (a draw under that rule, not declared) */
        expect_declare_by("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RB3P 1", flip, true, true, 31, "31 points");
        expect_declare_by("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RB2P 1", flip, false, true, 30, "30 points");
        expect_declare_by("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RB 1", flip, false, true, 28, "28 points");
        /* 27 points: the 27-point rule's line between the colours */
        expect_declare_by("+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b R4P 1", flip, false, flip, 27, "27 points");
        /* 9 pieces in the camp: no rule declares, however many points */
        expect_declare_by("1+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RBL10P 1", flip, false, false, 38, "9 pieces");
        /* 10 pieces, one of them a big piece: 9 small + dragon = 14 on the board */
        expect_declare_by("+L+NSG1GS+N+L/1+R2K1P2/9/9/9/9/9/9/4k4 b RB7P 1", flip, true, true, 31, "10 pieces, 31");
        /* in check (rook on the king's file), 31 points */
        expect_declare_by("+L+NSG1GS+N+L/1R2K2B1/9/9/4r4/9/9/9/4k4 b B8P 1", flip, false, false, 31, "in check");
        /* the king one rank short of the camp, 31 points */
        expect_declare_by("+L+NSG1GS+N+L/1R5B1/9/4K4/9/9/9/9/4k4 b RB3P 1", flip, false, false, 31, "king outside");
    }
}

/* ---- no legal move, max ply, names -------------------------------------------------- */
static void test_status(void) {
    for (int f = 0; f < 2; f++) {
        bool flip = f == 1;
        const char *F = flip ? " (flipped)" : "";
        /* Checkmate: head gold. White to move, mated. */
        if (set_pos("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1", flip)) {
            rules_status_t st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
            CHECKF(st.end == RULES_END_CHECKMATE && st.winner == (flip ? COLOR_WHITE : COLOR_BLACK),
                   "checkmate%s: %s winner %s", F, rules_end_name(st.end), side_name(st.winner));
            CHECKF(!rules_has_legal_move(&pos), "mated side has no legal move%s", F);
        }
        /* Stalemate: White's lone king on 1a, every square covered, no check: also a loss. */
        if (set_pos("8k/6S2/8G/9/9/9/9/9/K8 w - 1", flip)) {
            CHECKF(!pos_in_check(&pos) && movegen_count_legal(&pos) == 0, "stalemate position%s", F);
            rules_status_t st = rules_status(&pos, RULES_MAX_PLY_DEFAULT);
            CHECKF(st.end == RULES_END_CHECKMATE && st.winner == (flip ? COLOR_WHITE : COLOR_BLACK),
                   "stalemate loses%s: %s winner %s", F, rules_end_name(st.end), side_name(st.winner));
        }
        /* Only pawn drops left, one of them a pawn-drop mate: still legal moves. */
        if (set_pos("7nk/7p1/8G/9/9/9/9/9/K8 b P 1", flip)) {
            CHECKF(rules_has_legal_move(&pos), "king and gold can move%s", F);
        }
        /* Max ply: 320 moves played at SFEN ply 321. */
        if (set_pos("4k4/9/9/9/9/9/9/9/4K4 b GS 320", flip)) {
            CHECKF(rules_status(&pos, 320).end == RULES_END_NONE, "319 moves played: ongoing%s", F);
        }
        if (set_pos("4k4/9/9/9/9/9/9/9/4K4 b GS 321", flip)) {
            rules_status_t st = rules_status(&pos, 320);
            CHECKF(st.end == RULES_END_MAX_PLY && st.winner == COLOR_NB, "320 moves played: max_ply%s, got %s", F,
                   rules_end_name(st.end));
            CHECKF(rules_status(&pos, 0).end == RULES_END_NONE, "max_ply 0 means no limit%s", F);
            CHECKF(rules_status(&pos, 400).end == RULES_END_NONE, "limit 400%s", F);
        }
        /* A mate delivered by the last allowed move still counts. */
        if (set_pos("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 321", flip)) {
            CHECKF(rules_status(&pos, 320).end == RULES_END_CHECKMATE, "mate at the move limit%s", F);
        }
        /* The limit counts moves actually played through the history too. */
        if (set_pos("startpos", flip) && !flip) {
            play("4i4h 6a6b 4h4i", false);
            CHECKF(rules_status(&pos, 3).end == RULES_END_MAX_PLY, "3 moves played, limit 3");
            CHECKF(rules_status(&pos, 4).end == RULES_END_NONE, "3 moves played, limit 4");
        }
    }
    /* Names as written to the database, and back. */
    static const char *const WANT[RULES_END_NB] = {
        "ongoing", "checkmate", "sennichite", "perpetual_check", "declaration", "max_ply", "resign", "illegal_move", "time"};
    for (int i = 0; i < RULES_END_NB; i++) {
        CHECKF(strcmp(rules_end_name((rules_end_t)i), WANT[i]) == 0, "name of %d is %s", i, rules_end_name((rules_end_t)i));
        CHECKF(rules_end_from_name(WANT[i]) == (rules_end_t)i, "from_name(%s)", WANT[i]);
    }
    CHECKF(strcmp(rules_end_name(RULES_END_NB), "?") == 0 && rules_end_from_name("mate") == RULES_END_NB &&
              rules_end_from_name(NULL) == RULES_END_NB,
           "unknown names");
    CHECKF(strcmp(rules_rep_name(RULES_REP_LOSS), "loss") == 0, "rep names");
}

/* rules_has_legal_move and rules_status_with_count against movegen on random playouts. */
static void test_random_agreement(void) {
    static const char *STARTS[] = {
        "startpos",
        "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
        "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1",
        "8k/9/9/9/9/9/9/9/K8 w 2R2B4G4S4N4L18P 1",
        "k8/9/9/9/9/9/9/9/8K b 17P 1",
    };
    uint64_t rng = 0x1234567887654321ull;
    int positions = 0, no_moves = 0;
    for (int round = 0; round < 30; round++)
        for (size_t s = 0; s < sizeof STARTS / sizeof STARTS[0]; s++) {
            if (!set_pos(STARTS[s], false)) continue;
            for (int ply = 0; ply < 150; ply++) {
                int32_t n = movegen_count_legal(&pos);
                positions++;
                no_moves += n == 0;
                CHECKF(rules_has_legal_move(&pos) == (n > 0), "has_legal_move disagrees with movegen (%d moves)", n);
                rules_status_t a = rules_status(&pos, 100), b = rules_status_with_count(&pos, 100, n);
                CHECKF(a.end == b.end && a.winner == b.winner, "status with and without the count");
                if (n == 0 || a.end != RULES_END_NONE) break;
                move_list_t list;
                movegen_legal(&pos, &list);
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                pos_do_move(&pos, list.moves[rng % (uint64_t)list.n]);
            }
        }
    printf("test_rules: %d random positions (%d without a legal move)\n", positions, no_moves);
    CHECKF(positions > 5000, "too few positions");
}

int main(void) {
    engine_init();
    for (int f = 0; f < 2; f++) {
        test_sennichite(f == 1);
        test_perpetual(f == 1);
        test_superior(f == 1);
    }
    test_declaration();
    test_declaration_rules();
    test_status();
    test_random_agreement();
    return t_done("test_rules");
}
