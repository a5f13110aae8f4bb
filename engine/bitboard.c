/* bitboard.c - attack tables behind bitboard.h.
 *
 * Owns: filling every bb_*_tab table once (bb_init_tables, called by
 * engine_init) and the generic bb_attacks.
 * Does not own: anything about positions.
 */
#include "engine/bitboard.h"

bb_t bb_sq_tab[SQ_NB];
bb_t bb_file_tab[FILE_NB];
bb_t bb_rank_tab[RANK_NB];
bb_t bb_forward_ranks_tab[COLOR_NB][RANK_NB];
bb_t bb_step_tab[COLOR_NB][PT_NB][SQ_NB];
uint64_t bb_lance_ray_tab[COLOR_NB][SQ_NB];
bb_t bb_rook_ray_tab[SQ_NB][2];
bb_t bb_bishop_ray_tab[SQ_NB][4];
bb_t bb_lance_pseudo_tab[COLOR_NB][SQ_NB];
bb_t bb_bishop_pseudo_tab[SQ_NB];
bb_t bb_rook_pseudo_tab[SQ_NB];
uint8_t bb_dir_tab[SQ_NB][SQ_NB];
bb_t bb_ray_tab[10][SQ_NB];
bb_t bb_line_tab[10][SQ_NB];

/* Directions 1..8 as (file step, rank step); direction 9 - d is the opposite of d. */
static const int8_t DIR_DF[10] = {0, -1, -1, -1, 0, 0, 1, 1, 1, 0};
static const int8_t DIR_DR[10] = {0, -1, 0, 1, -1, 1, -1, 0, 1, 0};

static bool on_board(int f, int r) { return f >= 0 && f < 9 && r >= 0 && r < 9; }

/* Bitboard of the squares reached by the given steps (Black's view; White flips the rank step). */
static bb_t steps(color_t c, sq_t sq, const int8_t (*d)[2], int n) {
    bb_t b = bb_zero();
    int f = sq_file(sq), r = sq_rank(sq);
    for (int i = 0; i < n; i++) {
        int df = d[i][0], dr = c == COLOR_BLACK ? d[i][1] : -d[i][1];
        if (on_board(f + df, r + dr)) b = bb_or(b, bb_sq_tab[sq_make(f + df, r + dr)]);
    }
    return b;
}

/* Squares along direction (df, dr) from sq to the edge, sq excluded. */
static bb_t ray(sq_t sq, int df, int dr) {
    bb_t b = bb_zero();
    for (int f = sq_file(sq) + df, r = sq_rank(sq) + dr; on_board(f, r); f += df, r += dr)
        b = bb_or(b, bb_sq_tab[sq_make(f, r)]);
    return b;
}

void bb_init_tables(void) {
    for (sq_t sq = 0; sq < SQ_NB; sq++)
        bb_sq_tab[sq] = sq < 63 ? bb_make(1ull << sq, 0) : bb_make(0, 1ull << (sq - 63));
    for (int i = 0; i < 9; i++) {
        bb_file_tab[i] = bb_rank_tab[i] = bb_zero();
    }
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        bb_file_tab[sq_file(sq)] = bb_or(bb_file_tab[sq_file(sq)], bb_sq_tab[sq]);
        bb_rank_tab[sq_rank(sq)] = bb_or(bb_rank_tab[sq_rank(sq)], bb_sq_tab[sq]);
    }
    for (color_t c = 0; c < COLOR_NB; c++) {
        bb_t acc = bb_zero();
        for (int r = 0; r < 9; r++) {
            acc = bb_or(acc, bb_rank_tab[c == COLOR_BLACK ? r : 8 - r]);
            bb_forward_ranks_tab[c][r] = acc;
        }
    }

    static const int8_t PAWN_D[][2] = {{0, -1}};
    static const int8_t KNIGHT_D[][2] = {{-1, -2}, {1, -2}};
    static const int8_t SILVER_D[][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 1}, {1, 1}};
    static const int8_t GOLD_D[][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {0, 1}};
    static const int8_t KING_D[][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
    for (color_t c = 0; c < COLOR_NB; c++) {
        for (piece_type_t pt = 0; pt < PT_NB; pt++)
            for (sq_t sq = 0; sq < SQ_NB; sq++) bb_step_tab[c][pt][sq] = bb_zero();
        for (sq_t sq = 0; sq < SQ_NB; sq++) {
            bb_step_tab[c][PT_PAWN][sq] = steps(c, sq, PAWN_D, 1);
            bb_step_tab[c][PT_KNIGHT][sq] = steps(c, sq, KNIGHT_D, 2);
            bb_step_tab[c][PT_SILVER][sq] = steps(c, sq, SILVER_D, 5);
            bb_step_tab[c][PT_GOLD][sq] = steps(c, sq, GOLD_D, 6);
            bb_step_tab[c][PT_KING][sq] = steps(c, sq, KING_D, 8);
            for (piece_type_t pt = PT_PRO_PAWN; pt <= PT_PRO_SILVER; pt++)
                bb_step_tab[c][pt][sq] = bb_step_tab[c][PT_GOLD][sq];
        }
    }

    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        int h = sq >= 63;
        bb_t up = ray(sq, 0, -1), down = ray(sq, 0, 1);
        bb_lance_ray_tab[COLOR_BLACK][sq] = up.p[h];
        bb_lance_ray_tab[COLOR_WHITE][sq] = down.p[h];
        bb_lance_pseudo_tab[COLOR_BLACK][sq] = up;
        bb_lance_pseudo_tab[COLOR_WHITE][sq] = down;
        bb_rook_ray_tab[sq][0] = ray(sq, 1, 0);
        bb_rook_ray_tab[sq][1] = bb_byte_reverse(ray(sq, -1, 0));
        bb_bishop_ray_tab[sq][0] = ray(sq, 1, -1);
        bb_bishop_ray_tab[sq][1] = ray(sq, 1, 1);
        bb_bishop_ray_tab[sq][2] = bb_byte_reverse(ray(sq, -1, 1));
        bb_bishop_ray_tab[sq][3] = bb_byte_reverse(ray(sq, -1, -1));
        bb_rook_pseudo_tab[sq] = bb_or(bb_or(up, down), bb_or(ray(sq, 1, 0), ray(sq, -1, 0)));
        bb_bishop_pseudo_tab[sq] =
            bb_or(bb_or(ray(sq, 1, 1), ray(sq, 1, -1)), bb_or(ray(sq, -1, 1), ray(sq, -1, -1)));
    }

    for (int d = 0; d < 10; d++)
        for (sq_t sq = 0; sq < SQ_NB; sq++) bb_ray_tab[d][sq] = bb_line_tab[d][sq] = bb_zero();
    for (int d = 1; d <= 8; d++)
        for (sq_t sq = 0; sq < SQ_NB; sq++) bb_ray_tab[d][sq] = ray(sq, DIR_DF[d], DIR_DR[d]);
    for (int d = 1; d <= 8; d++)
        for (sq_t sq = 0; sq < SQ_NB; sq++)
            bb_line_tab[d][sq] = bb_or(bb_or(bb_ray_tab[d][sq], bb_ray_tab[9 - d][sq]), bb_sq_tab[sq]);
    for (sq_t a = 0; a < SQ_NB; a++)
        for (sq_t b = 0; b < SQ_NB; b++) {
            bb_dir_tab[a][b] = 0;
            for (int d = 1; d <= 8; d++)
                if (bb_test(bb_ray_tab[d][a], b)) bb_dir_tab[a][b] = (uint8_t)d;
        }
}

bb_t bb_attacks(piece_t pc, sq_t sq, bb_t occ) {
    color_t c = piece_color(pc);
    switch (piece_type(pc)) {
    case PT_PAWN:
    case PT_KNIGHT:
    case PT_SILVER:
    case PT_GOLD:
    case PT_KING:
    case PT_PRO_PAWN:
    case PT_PRO_LANCE:
    case PT_PRO_KNIGHT:
    case PT_PRO_SILVER: return bb_step_tab[c][piece_type(pc)][sq];
    case PT_LANCE: return bb_lance_attacks(c, sq, occ);
    case PT_BISHOP: return bb_bishop_attacks(sq, occ);
    case PT_ROOK: return bb_rook_attacks(sq, occ);
    case PT_HORSE: return bb_horse_attacks(sq, occ);
    case PT_DRAGON: return bb_dragon_attacks(sq, occ);
    default: return bb_zero();
    }
}
