/* test_encode.c - the NN encoding: move labels, legal mask, feature planes.
 *
 * Positions come from random playouts from the start position and from
 * crowded SFENs (many drops, promotions, checks), both colours to move.
 * Checked on each: labels are a bijection over the legal moves and decode
 * back; no other label decodes to a move; the legal mask has exactly the
 * legal moves' bits; the colour-flipped mirror (built as SFEN text) encodes
 * to the same bits and floats; and, on a subset, the packed planes equal a
 * slow square-by-square reference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/bits.h"
#include "compat/compat.h"
#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"
#include "sfen_mirror.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static const char *START_SFENS[] = {
    "startpos",
    "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
    "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1",
    "l2kg2+R1/4n3+L/p1gpps3/4np3/6P1N/PP+rP2pS1/1pG2P3/4P1G2/LN3KB1+p b SPbslpppp 1",
    "l+Rl2+R3/3k1s2+L/p1p1p4/2Ppnp1S1/4n1Pbp/PP2G4/1G3P+n2/Kp2P4/L8 w GSPPPPbgsnp 1",
    "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1",
    "4k4/9/9/9/9/9/9/9/4K4 w RBGSNLPrb3g3s3n3l17p 1",
    "+B+R5n1/2+P+P2gk1/+P3+P+S2l/3+N4p/9/P1+p6/1+s+p+p3+p1/2+n+l+l3K/1G4+r+b1 b GSN4Pgsl4p 1",
};
enum { N_START = sizeof START_SFENS / sizeof START_SFENS[0] };

/* The mirror image of a move (squares rotated; drops keep their piece type). */
static move_t flip_move(move_t m) {
    if (move_is_drop(m)) return move_make_drop(move_drop_pt(m), sq_flip(move_to(m)));
    return move_make(sq_flip(move_from(m)), sq_flip(move_to(m)), move_is_promote(m));
}

/* ---- slow reference encoder ------------------------------------------------- */
static void set_bit(uint8_t *packed, int32_t i) { packed[i >> 3] |= (uint8_t)(1u << (i & 7)); }

static void encode_reference(const pos_t *pos, uint8_t *packed, float *hand) {
    memset(packed, 0, ENC_PACKED_BYTES);
    const color_t us = pos->side;
    const bb_t occ = pos_occupied(pos);
    for (int b = 0; b < 2; b++) {
        const color_t c = b == 0 ? us : color_flip(us), them = color_flip(c);
        const int base = b * ENC_SIDE_PLANES;
        int count[SQ_NB] = {0};
        bool by_type[PT_NB][SQ_NB];
        memset(by_type, 0, sizeof by_type);
        for (sq_t s = 0; s < SQ_NB; s++) {
            piece_t pc = pos->board[s];
            if (pc == PIECE_NONE || piece_color(pc) != c) continue;
            bb_t a = bb_attacks(pc, s, occ);
            for (sq_t t = 0; t < SQ_NB; t++)
                if (bb_test(a, t)) {
                    count[t]++;
                    by_type[piece_type(pc)][t] = true;
                }
        }
        sq_t ksq = pos->king_sq[c];
        bb_t checkers_now = pos_attackers_to(pos, them, ksq, occ);
        for (sq_t v = 0; v < SQ_NB; v++) {
            sq_t sq = us == COLOR_WHITE ? SQ_NB - 1 - v : v;
            piece_t pc = pos->board[sq];
            if (pc != PIECE_NONE && piece_color(pc) == c) set_bit(packed, (base + piece_type(pc) - 1) * 81 + v);
            for (piece_type_t pt = PT_PAWN; pt <= PT_DRAGON; pt++)
                if (by_type[pt][sq]) set_bit(packed, (base + 14 + pt - 1) * 81 + v);
            if (count[sq] != bb_popcount(pos_attackers_to(pos, c, sq, occ)))
                CHECKF(0, "attack count %d != attackers_to %d", count[sq],
                       bb_popcount(pos_attackers_to(pos, c, sq, occ)));
            for (int k = 1; k <= 3; k++)
                if (count[sq] >= k) set_bit(packed, (base + 28 + k - 1) * 81 + v);
            if (pc != PIECE_NONE && piece_color(pc) == c && piece_type(pc) != PT_KING) {
                bb_t occ2 = bb_xor(occ, bb_sq(sq));
                bb_t after = bb_andnot(pos_attackers_to(pos, them, ksq, occ2), checkers_now);
                if (bb_nonzero(after)) set_bit(packed, (base + 31) * 81 + v);
            }
            bool pawn_on_file = false;
            for (int r = 0; r < 9; r++)
                if (pos->board[sq_make(sq_file(sq), r)] == piece_make(c, PT_PAWN)) pawn_on_file = true;
            if (!pawn_on_file) set_bit(packed, (base + 32) * 81 + v);
        }
        static const int TOTAL[8] = {0, 18, 4, 4, 4, 2, 2, 4};
        for (piece_type_t pt = PT_PAWN; pt <= PT_GOLD; pt++)
            hand[b * 7 + pt - 1] = (float)((double)pos_hand_count(pos, c, pt) / TOTAL[pt]);
    }
    for (sq_t v = 0; v < SQ_NB; v++) {
        if (pos_in_check(pos)) set_bit(packed, 66 * 81 + v);
        set_bit(packed, 67 * 81 + v);
    }
}

/* ---- per-position checks ----------------------------------------------------- */
static int positions_checked = 0, moves_checked = 0, mirrors_checked = 0, references_checked = 0;
static int white_positions = 0, drops_seen = 0, promos_seen = 0, check_positions = 0;

static void check_position(const pos_t *pos, bool with_reference) {
    static int32_t stamp[ENC_LABEL_NB];
    static int32_t stamp_id = 0;
    char sfen[SFEN_MAX_LEN];
    sfen_write(pos, sfen, sizeof sfen);
    stamp_id++;
    positions_checked++;
    if (pos->side == COLOR_WHITE) white_positions++;
    if (pos_in_check(pos)) check_positions++;

    move_list_t list;
    movegen_legal(pos, &list);
    uint8_t mask[ENC_LEGAL_BYTES];
    encode_legal_mask(pos, mask);
    int mask_bits = 0;
    for (int i = 0; i < ENC_LEGAL_BYTES; i++) mask_bits += compat_popcount32(mask[i]);
    CHECKF(mask_bits == list.n, "%s: mask has %d bits, %d legal moves", sfen, mask_bits, list.n);
    uint8_t mask_l[ENC_LEGAL_BYTES];
    encode_legal_mask_list(pos, &list, mask_l);
    CHECKF(memcmp(mask, mask_l, sizeof mask) == 0, "%s: mask from the move list differs", sfen);

    for (int32_t i = 0; i < list.n; i++) {
        move_t m = list.moves[i];
        char u[MOVE_USI_MAX];
        move_to_usi(m, u);
        int32_t l = encode_move_label(pos, m);
        moves_checked++;
        if (move_is_drop(m)) drops_seen++;
        if (move_is_promote(m)) promos_seen++;
        if (l < 0 || l >= ENC_LABEL_NB) {
            CHECKF(0, "%s: move %s label %d out of range", sfen, u, l);
            continue;
        }
        CHECKF(stamp[l] != stamp_id, "%s: move %s shares label %d with another legal move", sfen, u, l);
        stamp[l] = stamp_id;
        CHECKF(encode_label_move(pos, l) == m, "%s: label %d of %s decodes to %04x", sfen, l, u,
               encode_label_move(pos, l));
        CHECKF(encode_bit(mask, l), "%s: legal move %s (label %d) missing from the mask", sfen, u, l);
    }
    /* Every other label decodes to nothing. */
    for (int32_t l = 0; l < ENC_LABEL_NB; l++) {
        if (stamp[l] == stamp_id) continue;
        move_t m = encode_label_move(pos, l);
        CHECKF(m == MOVE_NONE, "%s: label %d without a legal move decodes to %04x", sfen, l, m);
        CHECKF(!encode_bit(mask, l), "%s: mask bit %d set without a legal move", sfen, l);
    }
    for (int i = ENC_LABEL_NB; i < ENC_LEGAL_BYTES * 8; i++) CHECKF(!encode_bit(mask, i), "mask tail bit %d set", i);

    uint8_t packed[ENC_PACKED_BYTES];
    float hand[ENC_HAND];
    memset(packed, 0xAB, sizeof packed);
    encode_position(pos, packed, hand);
    for (int i = ENC_PLANES * 81; i < ENC_PACKED_BYTES * 8; i++) CHECKF(!encode_bit(packed, i), "plane tail bit %d", i);

    /* Colour-flipped mirror: same encoding, same labels for mirrored moves. */
    char fs[SFEN_MAX_LEN + 16], err[256];
    static pos_t mirror;
    CHECKF(mirror_sfen(sfen, fs, sizeof fs) == 0, "cannot flip %s", sfen);
    if (sfen_parse_cstr(&mirror, fs, err, sizeof err) != SFEN_OK) {
        CHECKF(0, "mirror of %s does not parse: %s (%s)", sfen, fs, err);
    } else {
        mirrors_checked++;
        uint8_t packed2[ENC_PACKED_BYTES];
        float hand2[ENC_HAND];
        encode_position(&mirror, packed2, hand2);
        int diff = -1;
        for (int i = 0; i < ENC_PLANES * 81; i++)
            if (encode_bit(packed, i) != encode_bit(packed2, i)) {
                diff = i;
                break;
            }
        CHECKF(diff < 0, "%s vs mirror %s: first differing bit %d (plane %d square %d)", sfen, fs, diff, diff / 81,
               diff % 81);
        CHECKF(memcmp(hand, hand2, sizeof hand) == 0, "%s: mirror hand values differ", sfen);
        move_list_t list2;
        movegen_legal(&mirror, &list2);
        CHECKF(list2.n == list.n, "%s: mirror has %d legal moves, not %d", sfen, list2.n, list.n);
        for (int32_t i = 0; i < list.n; i++) {
            move_t fm = flip_move(list.moves[i]);
            CHECKF(movegen_list_contains(&list2, fm), "%s: mirrored move not legal in the mirror", sfen);
            CHECKF(encode_move_label(&mirror, fm) == encode_move_label(pos, list.moves[i]),
                   "%s: mirrored move has another label", sfen);
        }
        uint8_t mask2[ENC_LEGAL_BYTES];
        encode_legal_mask(&mirror, mask2);
        CHECKF(memcmp(mask, mask2, sizeof mask) == 0, "%s: mirror legal mask differs", sfen);
    }

    if (with_reference) {
        references_checked++;
        uint8_t ref[ENC_PACKED_BYTES];
        float rhand[ENC_HAND];
        encode_reference(pos, ref, rhand);
        for (int i = 0; i < ENC_PLANES * 81; i++)
            if (encode_bit(packed, i) != encode_bit(ref, i)) {
                CHECKF(0, "%s: plane %d square %d is %d, reference %d", sfen, i / 81, i % 81, encode_bit(packed, i),
                       encode_bit(ref, i));
                break;
            }
        for (int j = 0; j < ENC_HAND; j++)
            CHECKF(fabsf(hand[j] - rhand[j]) < 1e-6f, "%s: hand[%d] %g, reference %g", sfen, j, hand[j], rhand[j]);
    }
}

/* ---- fixed facts ----------------------------------------------------------------- */
static sq_t usi_sq(const char *s) { return sq_make(s[0] - '1', s[1] - 'a'); }

static void test_fixed(void) {
    static pos_t pos;
    char err[256];
    pos_set_startpos(&pos);
    /* Black 7g7f: UP to 7f. */
    move_t m = move_from_usi(&pos, "7g7f", 4);
    CHECKF(encode_move_label(&pos, m) == 0 * 81 + usi_sq("7f"), "7g7f label %d", encode_move_label(&pos, m));
    uint8_t packed[ENC_PACKED_BYTES];
    float hand[ENC_HAND];
    encode_position(&pos, packed, hand);
    /* Start position, Black to move: our pawns on rank g, theirs on rank c, our king on 5i. */
    for (int f = 0; f < 9; f++) {
        CHECKF(encode_bit(packed, (ENC_PLANE_US + ENC_OFF_PIECE + PT_PAWN - 1) * 81 + sq_make(f, 6)), "our pawn");
        CHECKF(encode_bit(packed, (ENC_PLANE_THEM + ENC_OFF_PIECE + PT_PAWN - 1) * 81 + sq_make(f, 2)), "their pawn");
    }
    CHECKF(encode_bit(packed, (ENC_PLANE_US + ENC_OFF_PIECE + PT_KING - 1) * 81 + usi_sq("5i")), "our king 5i");
    CHECKF(!encode_bit(packed, ENC_PLANE_IN_CHECK * 81), "start position is not check");
    CHECKF(encode_bit(packed, ENC_PLANE_ONES * 81 + 80), "ones plane");
    /* Every file has our pawn: no-pawn-file plane empty. */
    for (int s = 0; s < 81; s++)
        CHECKF(!encode_bit(packed, (ENC_PLANE_US + ENC_OFF_NO_PAWN_FILE) * 81 + s), "pawn files");

    pos_do_move(&pos, m);
    /* White 3c3d is UP in White's view; destination 3d seen rotated is 7f. */
    move_t w = move_from_usi(&pos, "3c3d", 4);
    CHECKF(encode_move_label(&pos, w) == 0 * 81 + usi_sq("7f"), "3c3d label %d", encode_move_label(&pos, w));
    uint8_t packed_w[ENC_PACKED_BYTES];
    encode_position(&pos, packed_w, hand);
    /* White to move sees its own pawns on view rank g except the 7f pawn of Black... its own 3c pawn
     * appears at view 7g; Black's advanced 7f pawn appears at view 3d. */
    CHECKF(encode_bit(packed_w, (ENC_PLANE_US + ENC_OFF_PIECE + PT_PAWN - 1) * 81 + usi_sq("7g")), "white's 3c pawn");
    CHECKF(encode_bit(packed_w, (ENC_PLANE_THEM + ENC_OFF_PIECE + PT_PAWN - 1) * 81 + usi_sq("3d")),
           "black's 7f pawn seen from white");
    CHECKF(!encode_bit(packed_w, (ENC_PLANE_THEM + ENC_OFF_PIECE + PT_PAWN - 1) * 81 + usi_sq("3c")),
           "black's 7f pawn left view 3c");

    /* Drops, knight jumps and promotions. */
    CHECKF(sfen_parse_cstr(&pos, "4k4/9/9/9/9/9/9/1N7/4K4 b BP 1", err, sizeof err) == SFEN_OK, "%s", err);
    m = move_from_usi(&pos, "B*5e", 4);
    CHECKF(encode_move_label(&pos, m) == (ENC_DIR_DROP + PT_BISHOP - PT_PAWN) * 81 + usi_sq("5e"), "B*5e");
    m = move_from_usi(&pos, "8h7f", 4);
    CHECKF(encode_move_label(&pos, m) == 9 * 81 + usi_sq("7f"), "8h7f is KNIGHT_RIGHT: %d", encode_move_label(&pos, m));
    m = move_from_usi(&pos, "8h9f", 4);
    CHECKF(encode_move_label(&pos, m) == 8 * 81 + usi_sq("9f"), "8h9f is KNIGHT_LEFT: %d", encode_move_label(&pos, m));
    CHECKF(sfen_parse_cstr(&pos, "4k4/9/9/9/9/9/9/9/B3K4 b - 1", err, sizeof err) == SFEN_OK, "%s", err);
    m = move_from_usi(&pos, "9i3c+", 5);
    CHECKF(m != MOVE_NONE && encode_move_label(&pos, m) == (ENC_DIR_PROMOTE + 2) * 81 + usi_sq("3c"),
           "9i3c+ is UP_RIGHT promoting");
    CHECKF(encode_label_move(&pos, (ENC_DIR_PROMOTE + 2) * 81 + usi_sq("3c")) == m, "decode 9i3c+");
    CHECKF(encode_label_move(&pos, 2 * 81 + usi_sq("3c")) != MOVE_NONE, "9i3c unpromoted is legal too");
    CHECKF(encode_label_move(&pos, -1) == MOVE_NONE && encode_label_move(&pos, ENC_LABEL_NB) == MOVE_NONE, "range");
    /* Hand values from the side to move. */
    CHECKF(sfen_parse_cstr(&pos, "4k4/9/9/9/9/9/9/9/4K4 w 2Pr3p 1", err, sizeof err) == SFEN_OK, "%s", err);
    encode_position(&pos, packed, hand);
    CHECKF(fabsf(hand[0] - 3.0f / 18) < 1e-6f && fabsf(hand[5] - 0.5f) < 1e-6f && fabsf(hand[7] - 2.0f / 18) < 1e-6f,
           "hand %g %g %g", hand[0], hand[5], hand[7]);
}

int main(void) {
    engine_init();
    test_fixed();
    static pos_t pos;
    char err[256];
    int games = 0;
    for (int round = 0; round < 12; round++) {
        for (int s = 0; s < N_START; s++) {
            if (sfen_parse_cstr(&pos, START_SFENS[s], err, sizeof err) != SFEN_OK) {
                CHECKF(0, "start %s: %s", START_SFENS[s], err);
                continue;
            }
            games++;
            for (int ply = 0; ply < 160; ply++) {
                bool ref = (ply % 7) == 0;
                check_position(&pos, ref);
                move_list_t list;
                movegen_legal(&pos, &list);
                if (list.n == 0) break;
                pos_do_move(&pos, list.moves[t_xorshift64(&rng_state) % (uint64_t)list.n]);
            }
        }
    }
    printf("test_encode: %d games, %d positions (%d White to move, %d in check), %d legal moves (%d drops, %d "
           "promotions), %d mirrors, %d reference comparisons\n",
           games, positions_checked, white_positions, check_positions, moves_checked, drops_seen, promos_seen,
           mirrors_checked, references_checked);
    CHECKF(white_positions > 1000 && check_positions > 50 && drops_seen > 10000 && promos_seen > 1000,
           "too little coverage");

    /* Speed of encode_position (information only). */
    if (sfen_parse_cstr(&pos, START_SFENS[1], err, sizeof err) == SFEN_OK) {
        uint8_t packed[ENC_PACKED_BYTES];
        float hand[ENC_HAND];
        int64_t t0 = compat_now_ns();
        unsigned sink = 0;
        for (int i = 0; i < 200000; i++) {
            encode_position(&pos, packed, hand);
            sink += packed[i % ENC_PACKED_BYTES];
        }
        printf("encode_position: %.0f ns per call (Matsuri position; sink %u)\n",
               (double)(compat_now_ns() - t0) / 200000, sink);
    }
    return t_done("test_encode");
}
