/* types.h - the small vocabulary of the shogi engine: colours, squares,
 * piece types, pieces, hands and moves, with their *_NB sizes.
 *
 * Owns: numbering conventions and tiny inline helpers on them.
 * Does not own: bitboards (bitboard.h), positions (position.h), notation (sfen.h).
 *
 * ---- Squares ---------------------------------------------------------------
 * A square is 0..80:  sq = (file - 1) * 9 + (rank - 1)
 *   file 1..9 is the USI digit (file 1 is on Black's right),
 *   rank 1..9 is the USI letter a..i (rank a is White's back rank, Black's far side).
 * So USI "1a" = 0, "1i" = 8, "2a" = 9, "5e" = 40, "7g" = 60, "9i" = 80.
 * sq_make(f, r) takes 0-based f = file-1 and r = rank-1 (USI letter - 'a').
 * Black (sente, moves first, upper-case in SFEN) moves towards rank a; its
 * promotion zone is ranks a-c (r = 0..2). White's zone is ranks g-i (r = 6..8).
 *
 * ---- Pieces ----------------------------------------------------------------
 * piece_type_t 1..14: PAWN LANCE KNIGHT SILVER BISHOP ROOK GOLD KING, then the
 * promoted kinds, each exactly PT_PROMOTE (8) above its base
 * (PRO_PAWN = PAWN + 8, ..., HORSE = BISHOP + 8, DRAGON = ROOK + 8).
 * piece_t = piece_type_t + 16 * color_t; 0 is an empty square.
 * Hand piece types are PAWN..GOLD (1..7); index 0 of hand arrays is unused.
 *
 * ---- Moves -----------------------------------------------------------------
 * move_t is 16 bits:
 *   bits 0-6   destination square
 *   bits 7-13  origin square, or for a drop the dropped piece_type_t (PAWN..GOLD)
 *   bit 14     drop flag
 *   bit 15     promote flag
 * MOVE_NONE (0) is never a legal move; MOVE_NULL (from 1 to 1) is a pass.
 */
#ifndef KOMA_ENGINE_TYPES_H
#define KOMA_ENGINE_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef int32_t color_t;
enum { COLOR_BLACK = 0, COLOR_WHITE = 1, COLOR_NB = 2 };
static inline color_t color_flip(color_t c) { return c ^ 1; }

typedef int32_t sq_t;
enum { SQ_NB = 81, FILE_NB = 9, RANK_NB = 9, SQ_NONE = 127 };
/* f = file - 1 (0..8), r = rank - 1 (0..8, 'a' = 0). */
static inline sq_t sq_make(int32_t f, int32_t r) { return f * 9 + r; }
static inline int32_t sq_file(sq_t sq) { return sq / 9; } /* 0-based: USI file - 1 */
static inline int32_t sq_rank(sq_t sq) { return sq % 9; } /* 0-based: USI letter - 'a' */
static inline bool sq_is_ok(sq_t sq) { return sq >= 0 && sq < SQ_NB; }
/* The square seen from the other side (180 degree rotation). */
static inline sq_t sq_flip(sq_t sq) { return SQ_NB - 1 - sq; }
/* Rank seen from c: 0 is c's far rank (where its pawns promote last). */
static inline int32_t rank_relative(color_t c, int32_t r) { return c == COLOR_BLACK ? r : 8 - r; }

typedef int32_t piece_type_t;
enum {
    PT_NONE = 0,
    PT_PAWN = 1,
    PT_LANCE,
    PT_KNIGHT,
    PT_SILVER,
    PT_BISHOP,
    PT_ROOK,
    PT_GOLD,
    PT_KING,
    PT_PRO_PAWN,
    PT_PRO_LANCE,
    PT_PRO_KNIGHT,
    PT_PRO_SILVER,
    PT_HORSE,
    PT_DRAGON,
    PT_NB = 15,     /* array size for piece types (index 0 unused) */
    PT_HAND_NB = 8, /* array size for hand piece types PAWN..GOLD (index 0 unused) */
    PT_PROMOTE = 8  /* PT_PRO_x == PT_x + PT_PROMOTE */
};
static inline bool pt_can_promote(piece_type_t pt) { return pt >= PT_PAWN && pt <= PT_ROOK; }
static inline bool pt_is_promoted(piece_type_t pt) { return pt > PT_KING; }
static inline piece_type_t pt_promote(piece_type_t pt) { return pt + PT_PROMOTE; }
/* Base kind of a piece: PRO_PAWN -> PAWN, HORSE -> BISHOP; others unchanged. */
static inline piece_type_t pt_demote(piece_type_t pt) { return pt > PT_KING ? pt - PT_PROMOTE : pt; }

typedef int32_t piece_t;
enum { PIECE_NONE = 0, PIECE_WHITE_BIT = 16, PIECE_NB = 32 };
static inline piece_t piece_make(color_t c, piece_type_t pt) { return pt + (c << 4); }
static inline piece_type_t piece_type(piece_t pc) { return pc & 15; }
static inline color_t piece_color(piece_t pc) { return pc >> 4; }

/* Hand: the pieces one side holds, packed in 32 bits so that two hands can be
 * compared in one subtraction (superiority, used by the repetition rules).
 *   PAWN bits 0-4, LANCE 8-10, KNIGHT 12-14, SILVER 16-18, BISHOP 20-21,
 *   ROOK 24-25, GOLD 28-30; the bit just above each field is always 0. */
typedef uint32_t hand_t;
#define HAND_BORROW_MASK ((uint32_t)((1u << 5) | (1u << 11) | (1u << 15) | (1u << 19) | (1u << 22) | (1u << 26) | (1u << 31)))
extern const int32_t HAND_SHIFT[PT_HAND_NB];
extern const uint32_t HAND_MASK[PT_HAND_NB];
/* Most pieces of each kind that exist in a game (both sides, board + hands). */
extern const int32_t PIECE_TOTAL[PT_HAND_NB + 1]; /* index PT_KING = 8 holds 2 */
static inline int32_t hand_count(hand_t h, piece_type_t pt) { return (int32_t)((h & HAND_MASK[pt]) >> HAND_SHIFT[pt]); }
static inline hand_t hand_add(hand_t h, piece_type_t pt) { return h + (1u << HAND_SHIFT[pt]); }
static inline hand_t hand_sub(hand_t h, piece_type_t pt) { return h - (1u << HAND_SHIFT[pt]); }
static inline bool hand_has(hand_t h, piece_type_t pt) { return (h & HAND_MASK[pt]) != 0; }
/* a holds at least as many of every kind as b. */
static inline bool hand_is_superior_or_equal(hand_t a, hand_t b) { return ((a - b) & HAND_BORROW_MASK) == 0; }
/* Any piece except pawns. */
#define HAND_EXCEPT_PAWN_MASK ((uint32_t)0x73377700u)

typedef uint16_t move_t;
enum { MOVE_NONE = 0, MOVE_NULL = (1 << 7) | 1, MOVE_DROP_FLAG = 1 << 14, MOVE_PROMOTE_FLAG = 1 << 15 };
/* The most legal moves any position has is 593; a list also holds every
 * pseudo-legal move (fewer than 1000 in any position: one side owning all
 * 40 pieces has under 400 board moves and 7 x 81 drops at most). */
enum { MOVES_MAX = 1024 };

static inline move_t move_make(sq_t from, sq_t to, bool promote) {
    return (move_t)(to | (from << 7) | (promote ? MOVE_PROMOTE_FLAG : 0));
}
static inline move_t move_make_drop(piece_type_t pt, sq_t to) { return (move_t)(to | (pt << 7) | MOVE_DROP_FLAG); }
static inline sq_t move_to(move_t m) { return m & 0x7F; }
/* Origin square of a board move (meaningless for drops). */
static inline sq_t move_from(move_t m) { return (m >> 7) & 0x7F; }
static inline bool move_is_drop(move_t m) { return (m & MOVE_DROP_FLAG) != 0; }
static inline bool move_is_promote(move_t m) { return (m & MOVE_PROMOTE_FLAG) != 0; }
/* Dropped piece type of a drop (meaningless for board moves). */
static inline piece_type_t move_drop_pt(move_t m) { return (m >> 7) & 0x7F; }
static inline bool move_is_ok(move_t m) { return m != MOVE_NONE && m != MOVE_NULL; }

typedef struct {
    move_t moves[MOVES_MAX];
    int32_t n;
} move_list_t;

/* One-time table setup for the whole engine (bitboards, Zobrist keys).
 * Thread-safe and idempotent; pos_set_startpos and sfen_parse call it, so
 * callers only need it before using bitboard functions on their own. */
void engine_init(void);

#endif
