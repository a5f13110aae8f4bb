/* test_sfen.c - SFEN and USI move text.
 *
 * Malformed SFENs are rejected with the right code and a message; SFEN
 * written from many positions (random playouts) reads back identically
 * (text, board, hands, keys); every legal move's USI text reads back as the
 * same move; malformed or illegal USI moves are refused; input is never
 * read past the given length; random mutations never crash the reader.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/movegen.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static pos_t pos, pos2;

typedef struct {
    const char *sfen;
    sfen_error_t want;
} bad_case_t;

static const bad_case_t BAD[] = {
    {"", SFEN_ERR_EMPTY},
    {"   \t\n", SFEN_ERR_EMPTY},
    {"sfen", SFEN_ERR_EMPTY},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNX b - 1", SFEN_ERR_BOARD_CHAR},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSN0 b - 1", SFEN_ERR_BOARD_CHAR},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSG-GSNL b - 1", SFEN_ERR_BOARD_CHAR},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNS+GKGSNL b - 1", SFEN_ERR_PROMOTED},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSG+KGSNL b - 1", SFEN_ERR_PROMOTED},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R+/LNSGKGSNL b - 1", SFEN_ERR_PROMOTED},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL+ b - 1", SFEN_ERR_PROMOTED},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNLL b - 1", SFEN_ERR_RANK_LONG},
    {"lnsgkgsnl/1r6b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_RANK_LONG},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/91/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_RANK_LONG},
    {"lnsgkgsnl/1r5b/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_RANK_SHORT},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSN b - 1", SFEN_ERR_RANK_SHORT},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/ b - 1", SFEN_ERR_RANK_SHORT},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1 b - 1", SFEN_ERR_RANK_COUNT},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_RANK_COUNT},
    {"lnsg1gsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_KING_MISSING},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSG1GSNL b - 1", SFEN_ERR_KING_MISSING},
    {"8k/9/9/9/9/9/9/9/9 b 2r2b4g4s4n4l18p 1", SFEN_ERR_KING_MISSING},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/4k4/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_KING_TWO},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/4K4/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", SFEN_ERR_KING_TWO},
    {"4k4/9/9/9/9/9/9/9/4K3P b - 1", SFEN_OK}, /* a Black pawn on rank i can still move */
    {"P3k4/9/9/9/9/9/9/9/4K4 b - 1", SFEN_ERR_DEAD_PIECE},
    {"L3k4/9/9/9/9/9/9/9/4K4 b - 1", SFEN_ERR_DEAD_PIECE},
    {"4k4/N8/9/9/9/9/9/9/4K4 b - 1", SFEN_ERR_DEAD_PIECE},
    {"4k4/9/9/9/9/9/9/9/p3K4 b - 1", SFEN_ERR_DEAD_PIECE},
    {"4k4/9/9/9/9/9/9/n8/4K4 b - 1", SFEN_ERR_DEAD_PIECE},
    {"4k4/9/9/9/4P4/4P4/9/9/4K4 b - 1", SFEN_ERR_NIFU},
    {"4k4/p8/p8/9/9/9/9/9/4K4 b - 1", SFEN_ERR_NIFU},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b P 1", SFEN_ERR_PIECE_COUNT},
    {"lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b r 1", SFEN_ERR_PIECE_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b 3B 1", SFEN_ERR_HAND_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b GGGGG 1", SFEN_ERR_HAND_COUNT},
    {"4k4/1G7/9/9/9/9/9/9/4K4 b 4G 1", SFEN_ERR_PIECE_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 x - 1", SFEN_ERR_SIDE},
    {"4k4/9/9/9/9/9/9/9/4K4 B - 1", SFEN_ERR_SIDE},
    {"4k4/9/9/9/9/9/9/9/4K4 bw - 1", SFEN_ERR_SIDE},
    {"4k4/9/9/9/9/9/9/9/4K4", SFEN_ERR_SIDE},
    {"4k4/9/9/9/9/9/9/9/4K4 b X 1", SFEN_ERR_HAND_CHAR},
    {"4k4/9/9/9/9/9/9/9/4K4 b -P 1", SFEN_ERR_HAND_CHAR},
    {"4k4/9/9/9/9/9/9/9/4K4 b K 1", SFEN_ERR_HAND_KING},
    {"4k4/9/9/9/9/9/9/9/4K4 b k 1", SFEN_ERR_HAND_KING},
    {"4k4/9/9/9/9/9/9/9/4K4 b +P 1", SFEN_ERR_HAND_PROMOTED},
    {"4k4/9/9/9/9/9/9/9/4K4 b 0P 1", SFEN_ERR_HAND_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b 19P 1", SFEN_ERR_HAND_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b 03P 1", SFEN_ERR_HAND_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b 100P 1", SFEN_ERR_HAND_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b 2 1", SFEN_ERR_HAND_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b 10P9p 1", SFEN_ERR_PIECE_COUNT},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 0", SFEN_ERR_PLY},
    {"4k4/9/9/9/9/9/9/9/4K4 b - -1", SFEN_ERR_PLY},
    {"4k4/9/9/9/9/9/9/9/4K4 b - x", SFEN_ERR_PLY},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 12a", SFEN_ERR_PLY},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 99999999999999999999", SFEN_ERR_PLY},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 1000000000", SFEN_ERR_PLY},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 999999999", SFEN_OK},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 1 moves", SFEN_ERR_TRAILING},
    {"startpos moves 7g7f", SFEN_ERR_TRAILING},
    {"4k4/9/9/9/9/9/9/9/4K3R w - 1", SFEN_OK},
    {"4k4/4r4/9/9/9/9/9/9/4K4 w - 1", SFEN_ERR_OPPONENT_IN_CHECK},
    {"4k4/9/9/9/9/9/9/9/4K4 b - 1", SFEN_OK},
    {"4k4/9/9/9/9/9/9/9/4K4 b", SFEN_OK},
    {"  sfen 4k4/9/9/9/9/9/9/9/4K4 b - 12 \r\n", SFEN_OK},
};

static void test_bad(void) {
    char err[256];
    int rejected = 0;
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        sfen_error_t want = BAD[i].want;
        sfen_error_t got = sfen_parse_cstr(&pos, BAD[i].sfen, err, sizeof err);
        CHECKF(got == want, "'%s': want %d (%s), got %d (%s) %s", BAD[i].sfen, want, sfen_error_name(want), got,
               sfen_error_name(got), err);
        if (got != SFEN_OK) {
            rejected++;
            CHECKF(strstr(err, sfen_error_name(got)) != NULL && strlen(err) > strlen(sfen_error_name(got)) + 8,
                   "message '%s' names the error and says more", err);
        } else {
            CHECKF(pos_validate(&pos) == NULL, "accepted position is consistent");
        }
    }
    CHECKF(rejected >= 25, "only %d malformed SFENs", rejected);
    /* Messages point at the problem. */
    sfen_parse_cstr(&pos, "lnsgkgsnl/1r5b/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", err, sizeof err);
    CHECKF(strstr(err, "rank b") != NULL, "short rank named: %s", err);
    sfen_parse_cstr(&pos, "4k4/9/9/9/4P4/4P4/9/9/4K4 b - 1", err, sizeof err);
    CHECKF(strstr(err, "file 5") != NULL, "nifu file named: %s", err);
    /* A tiny error buffer is fine, and NULL too. */
    char tiny[4];
    CHECKF(sfen_parse_cstr(&pos, "x", tiny, sizeof tiny) == SFEN_ERR_BOARD_CHAR && strlen(tiny) == 3, "tiny buffer");
    CHECKF(sfen_parse_cstr(&pos, "x", NULL, 0) == SFEN_ERR_BOARD_CHAR, "NULL buffer");
    CHECKF(sfen_parse(&pos, NULL, 0, err, sizeof err) == SFEN_ERR_EMPTY, "NULL text");
    CHECKF(strcmp(sfen_error_name((sfen_error_t)999), "unknown SFEN error") == 0, "unknown code name");
}

static void test_length(void) {
    char err[256];
    /* Only len bytes are read: a heap copy without NUL (ASan catches over-reads). */
    const char *text = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";
    size_t n = strlen(text);
    char *copy = malloc(n);
    memcpy(copy, text, n);
    CHECKF(sfen_parse(&pos, copy, n, err, sizeof err) == SFEN_OK, "%s", err);
    for (size_t k = 0; k < n; k++) sfen_parse(&pos, copy, k, err, sizeof err); /* every prefix, no over-read */
    CHECKF(sfen_parse(&pos, copy, n - 2, err, sizeof err) == SFEN_OK && pos_game_ply(&pos) == 1, "prefix w/o ply");
    CHECKF(sfen_parse(&pos, copy, 20, err, sizeof err) == SFEN_ERR_RANK_SHORT, "cut inside the board");
    free(copy);
    /* A NUL before len ends the text. */
    const char with_nul[] = "startpos\0garbage";
    CHECKF(sfen_parse(&pos, with_nul, sizeof with_nul, err, sizeof err) == SFEN_OK, "NUL ends the text");
    CHECKF(sfen_parse(&pos, "startposX", 8, err, sizeof err) == SFEN_OK, "len ends the text");
}

static void check_round_trip(const pos_t *p) {
    char a[SFEN_MAX_LEN], b[SFEN_MAX_LEN], err[256];
    int32_t n = sfen_write(p, a, sizeof a);
    CHECKF(n > 0 && (size_t)n < sizeof a && strlen(a) == (size_t)n, "length");
    sfen_error_t e = sfen_parse(&pos2, a, (size_t)n, err, sizeof err);
    CHECKF(e == SFEN_OK, "'%s' does not read back: %s", a, err);
    if (e != SFEN_OK) return;
    sfen_write(&pos2, b, sizeof b);
    CHECKF(strcmp(a, b) == 0, "'%s' reads back as '%s'", a, b);
    CHECKF(memcmp(p->board, pos2.board, sizeof p->board) == 0 && p->hand[0] == pos2.hand[0] &&
              p->hand[1] == pos2.hand[1] && p->side == pos2.side && p->game_ply == pos2.game_ply,
           "'%s' fields", a);
    CHECKF(pos_key(p) == pos_key(&pos2) && pos_board_key(p) == pos_board_key(&pos2), "'%s' keys differ", a);
    CHECKF(bb_equal(pos_checkers(p), pos_checkers(&pos2)), "'%s' checkers", a);
}

static void check_usi_moves(const pos_t *p) {
    move_list_t list;
    movegen_legal(p, &list);
    for (int i = 0; i < list.n; i++) {
        char usi[MOVE_USI_MAX];
        int32_t n = move_to_usi(list.moves[i], usi);
        CHECKF(n >= 4 && n <= 5 && (size_t)n == strlen(usi), "usi length");
        move_t back = move_from_usi(p, usi, (size_t)n);
        CHECKF(back == list.moves[i], "'%s' reads back as %d, not %d", usi, back, list.moves[i]);
        /* The same text with its promotion flipped is legal iff generated. */
        if (!move_is_drop(list.moves[i])) {
            move_t other = list.moves[i] ^ MOVE_PROMOTE_FLAG;
            char t[MOVE_USI_MAX];
            move_to_usi(other, t);
            CHECKF((move_from_usi(p, t, strlen(t)) != MOVE_NONE) == movegen_list_contains(&list, other),
                   "'%s' legality", t);
        }
    }
}

static void test_playouts(void) {
    const char *starts[] = {
        "startpos",
        "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
        "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1",
        "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
        "8k/9/9/9/9/9/9/9/K8 b 2R2B4G4S4N4L9P9p 1",
    };
    char err[256];
    int positions = 0;
    for (int g = 0; g < 40; g++) {
        CHECKF(sfen_parse_cstr(&pos, starts[g % 5], err, sizeof err) == SFEN_OK, "%s", err);
        for (int ply = 0; ply < 200; ply++) {
            check_round_trip(&pos);
            if (ply % 3 == 0) check_usi_moves(&pos);
            positions++;
            move_list_t list;
            if (movegen_legal(&pos, &list) == 0) break;
            pos_do_move(&pos, list.moves[t_xorshift64(&rng_state) % (uint64_t)list.n]);
        }
    }
    CHECKF(positions > 2000, "only %d positions", positions);
}

static void test_known(void) {
    char buf[SFEN_MAX_LEN], err[256];
    pos_set_startpos(&pos);
    sfen_write(&pos, buf, sizeof buf);
    CHECKF(strcmp(buf, SFEN_STARTPOS) == 0, "startpos writes as '%s'", buf);
    CHECKF(sfen_parse_cstr(&pos2, SFEN_STARTPOS, err, sizeof err) == SFEN_OK && pos_key(&pos) == pos_key(&pos2),
           "startpos text and pos_set_startpos agree");
    CHECKF(sfen_parse_cstr(&pos, "startpos", err, sizeof err) == SFEN_OK && pos_key(&pos) == pos_key(&pos2),
           "'startpos'");
    /* Hands come out in R B G S N L P order, Black first, counts before letters. */
    sfen_parse_cstr(&pos, "4k4/9/9/9/9/9/9/9/4K4 w pPPPl2gRbB 7", err, sizeof err);
    sfen_write(&pos, buf, sizeof buf);
    CHECKF(strcmp(buf, "4k4/9/9/9/9/9/9/9/4K4 w RB3Pb2glp 7") == 0, "hand order: '%s'", buf);
    /* Promoted pieces and empty-run digits. */
    sfen_parse_cstr(&pos, "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1", err, sizeof err);
    sfen_write(&pos, buf, sizeof buf);
    CHECKF(strcmp(buf, "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1") == 0, "'%s'", buf);
    /* Square numbering: 7g is file 7 rank g. */
    CHECKF(pos_piece_on(&pos2, sq_make(6, 6)) == piece_make(COLOR_BLACK, PT_PAWN), "7g holds a Black pawn");
    CHECKF(pos_piece_on(&pos2, sq_make(7, 7)) == piece_make(COLOR_BLACK, PT_BISHOP), "8h holds Black's bishop");
    CHECKF(pos_piece_on(&pos2, sq_make(1, 1)) == piece_make(COLOR_WHITE, PT_BISHOP), "2b holds White's bishop");
    CHECKF(pos_piece_on(&pos2, 0) == piece_make(COLOR_WHITE, PT_LANCE), "square 0 is 1a");
    /* The ply field saturates at SFEN_PLY_MAX, so what is written reads back. */
    sfen_parse_cstr(&pos, "4k4/9/9/9/9/9/9/9/4K4 b - 999999999", err, sizeof err);
    pos_do_move(&pos, move_from_usi(&pos, "5i5h", 4));
    sfen_write(&pos, buf, sizeof buf);
    CHECKF(strcmp(buf, "4k4/9/9/9/9/9/9/4K4/9 w - 999999999") == 0, "saturated ply: '%s'", buf);
    CHECKF(sfen_parse_cstr(&pos2, buf, err, sizeof err) == SFEN_OK, "saturated ply reads back: %s", err);
}

static void test_usi_bad(void) {
    pos_set_startpos(&pos);
    const char *good[] = {"7g7f", "2g2f", "5i5h", " 7g7f\n", "7g7f "};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECKF(move_from_usi(&pos, good[i], strlen(good[i])) != MOVE_NONE, "'%s' legal", good[i]);
    const char *bad[] = {"",      "7g",    "7g7",   "7g7f++", "7g7e",  "7g7f+", "0a1b",  "7j7f", "a7g7",
                         "P*5e",  "K*5e",  "p*5e",  "8h2b+", "8h2b",  "5i5g",  "1a1b", "7g7f7e",
                         "P*5e+", "+7g7f", "7G7F", "7g7f\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECKF(move_from_usi(&pos, bad[i], strlen(bad[i])) == MOVE_NONE, "'%s' must be refused", bad[i]);
    }
    /* Drops, promotions and their text. */
    char err[256];
    sfen_parse_cstr(&pos, "4k4/9/9/9/9/9/9/1B7/4K4 b P 1", err, sizeof err);
    CHECKF(move_from_usi(&pos, "P*5e", 4) == move_make_drop(PT_PAWN, sq_make(4, 4)), "P*5e");
    CHECKF(move_from_usi(&pos, "8h2b+", 5) == move_make(sq_make(7, 7), sq_make(1, 1), true), "8h2b+");
    CHECKF(move_from_usi(&pos, "8h2b", 4) == move_make(sq_make(7, 7), sq_make(1, 1), false), "8h2b");
    CHECKF(move_from_usi(&pos, "8h2bX", 4) != MOVE_NONE, "length bounds the text");
    char buf[MOVE_USI_MAX];
    move_to_usi(move_make_drop(PT_GOLD, sq_make(4, 4)), buf);
    CHECKF(strcmp(buf, "G*5e") == 0, "G*5e: %s", buf);
    move_to_usi(MOVE_NONE, buf);
    CHECKF(strcmp(buf, "none") == 0, "none");
    move_to_usi(MOVE_NULL, buf);
    CHECKF(strcmp(buf, "pass") == 0, "pass");
}

static void test_fuzz(void) {
    /* Random edits of valid SFENs: never crash; whatever is accepted is consistent and round-trips. */
    const char *seeds[] = {SFEN_STARTPOS, "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
                           "8k/9/9/9/9/9/9/9/K8 b 2R2B4G4S4N4L9P9p 1"};
    const char alphabet[] = "plnsgbrkPLNSGBRK+0123456789/ -bw\t";
    char buf[300], err[256];
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        const char *s = seeds[i % 3];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        int edits = 1 + (int)(t_xorshift64(&rng_state) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(t_xorshift64(&rng_state) % n);
            int kind = (int)(t_xorshift64(&rng_state) % 3);
            if (kind == 0) {
                buf[at] = alphabet[t_xorshift64(&rng_state) % (sizeof alphabet - 1)];
            } else if (kind == 1 && n > 1) {
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
            } else if (n < sizeof buf - 1) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = alphabet[t_xorshift64(&rng_state) % (sizeof alphabet - 1)];
                n++;
            }
        }
        char *heap = malloc(n ? n : 1);
        memcpy(heap, buf, n);
        if (sfen_parse(&pos, heap, n, err, sizeof err) == SFEN_OK) {
            accepted++;
            CHECKF(pos_validate(&pos) == NULL, "fuzzed '%.*s' accepted but inconsistent", (int)n, buf);
            check_round_trip(&pos);
            (void)movegen_count_legal(&pos);
        }
        free(heap);
    }
    CHECKF(accepted > 100, "fuzzing accepted only %d", accepted);
}

int main(void) {
    test_bad();
    test_length();
    test_known();
    test_usi_bad();
    test_playouts();
    test_fuzz();
    return t_done("test_sfen");
}
