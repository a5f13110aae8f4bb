/* bitboard.h - 81-square bitboards and piece attacks.
 *
 * Owns: the Bitboard type, set operations, attack tables for every piece,
 * sliding attacks (lance, bishop, rook, horse, dragon), between/line masks.
 * Does not own: positions (position.h) or move generation (movegen.h).
 *
 * Layout (as in YaneuraOu): two 64-bit words. p[0] holds squares 0..62
 * (files 1-7, bit = square), p[1] holds squares 63..80 (files 8-9,
 * bit = square - 63). A file never straddles the two words, so lance and
 * vertical rook attacks are one-word bit tricks. Unused bits are always 0.
 *
 * Sliding attacks use no magic numbers and no occupancy tables: along a ray
 * towards higher square numbers, x = occ & ray and (x ^ (x - 1)) & ray is the
 * ray up to and including the first blocker (a 128-bit decrement). Rays
 * towards lower square numbers on ranks and diagonals have one square per
 * byte, so reversing the byte order of both words reverses the ray and the
 * same trick applies (the "qugiy" method of YaneuraOu, re-derived here).
 *
 * Call engine_init() (types.h) before using any table here.
 */
#ifndef KOMA_ENGINE_BITBOARD_H
#define KOMA_ENGINE_BITBOARD_H

#include "compat/bits.h"
#include "engine/types.h"

/* Two representations of the same 128 bits: a GCC/Clang vector (and, or,
 * xor in one SIMD instruction), or, where the compiler has no vector
 * extensions (MSVC's cl) or with -DKOMA_PORTABLE_BITBOARD, two plain words.
 * Both give the same results; ctest runs the engine tests on both
 * (test_*_portable). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(KOMA_PORTABLE_BITBOARD)
typedef uint64_t bb_vec_t __attribute__((vector_size(16)));
#define BB_VECTOR 1
#endif

/* p[0]: squares 0..62, p[1]: squares 63..80 (bit = square - 63). */
typedef union {
    uint64_t p[2];
#ifdef BB_VECTOR
    bb_vec_t v; /* the same 128 bits as one SIMD value (GCC/Clang vector extension) */
#endif
} Bitboard;

/* ---- tables, filled by engine_init() ------------------------------------ */
extern Bitboard bb_sq_tab[SQ_NB];
extern Bitboard bb_file_tab[FILE_NB];
extern Bitboard bb_rank_tab[RANK_NB];
/* Squares whose rank is (relative to colour c) at most r: ranks 0..r from c's far side. */
extern Bitboard bb_forward_ranks_tab[COLOR_NB][RANK_NB];
/* Step attacks indexed [colour][piece type][square]; filled for PAWN, KNIGHT,
 * SILVER, GOLD, KING (and PRO_* = GOLD). Other entries are empty. */
extern Bitboard bb_step_tab[COLOR_NB][PT_NB][SQ_NB];
/* Lance ray on an empty board, as one word of the half holding the square. */
extern uint64_t bb_lance_ray_tab[COLOR_NB][SQ_NB];
/* Rank rays: [0] towards higher squares, [1] towards lower squares byte-reversed. */
extern Bitboard bb_rook_ray_tab[SQ_NB][2];
/* Diagonals: [0],[1] towards higher squares, [2],[3] towards lower, byte-reversed. */
extern Bitboard bb_bishop_ray_tab[SQ_NB][4];
/* Empty-board attacks of sliders. */
extern Bitboard bb_lance_pseudo_tab[COLOR_NB][SQ_NB];
extern Bitboard bb_bishop_pseudo_tab[SQ_NB];
extern Bitboard bb_rook_pseudo_tab[SQ_NB];
/* Direction from a to b (1..8) when on a common line, else 0; rays per direction. */
extern uint8_t bb_dir_tab[SQ_NB][SQ_NB];
extern Bitboard bb_ray_tab[10][SQ_NB];  /* [0] and [9] are empty */
extern Bitboard bb_line_tab[10][SQ_NB]; /* line through sq in direction d, sq included */
/* Fills the tables; engine_init() calls it once. */
void bb_init_tables(void);

/* ---- basics --------------------------------------------------------------- */
static inline Bitboard bb_make(uint64_t lo, uint64_t hi) {
    Bitboard b;
#ifdef BB_VECTOR
    b.v = (bb_vec_t){lo, hi}; /* built in a register, not through memory */
#else
    b.p[0] = lo;
    b.p[1] = hi;
#endif
    return b;
}
static inline Bitboard bb_zero(void) { return bb_make(0, 0); }
static inline Bitboard bb_full(void) { return bb_make(0x7FFFFFFFFFFFFFFFull, 0x3FFFFull); }
static inline Bitboard bb_sq(Square sq) { return bb_sq_tab[sq]; }
static inline Bitboard bb_file(int32_t f) { return bb_file_tab[f]; }
static inline Bitboard bb_rank(int32_t r) { return bb_rank_tab[r]; }
/* Promotion zone of c: the three ranks nearest the opponent. */
static inline Bitboard bb_zone(Color c) { return bb_forward_ranks_tab[c][2]; }
#ifdef BB_VECTOR
static inline Bitboard bb_and(Bitboard a, Bitboard b) { Bitboard r; r.v = a.v & b.v; return r; }
static inline Bitboard bb_or(Bitboard a, Bitboard b) { Bitboard r; r.v = a.v | b.v; return r; }
static inline Bitboard bb_xor(Bitboard a, Bitboard b) { Bitboard r; r.v = a.v ^ b.v; return r; }
/* a & ~b */
static inline Bitboard bb_andnot(Bitboard a, Bitboard b) { Bitboard r; r.v = a.v & ~b.v; return r; }
#else
static inline Bitboard bb_and(Bitboard a, Bitboard b) { return bb_make(a.p[0] & b.p[0], a.p[1] & b.p[1]); }
static inline Bitboard bb_or(Bitboard a, Bitboard b) { return bb_make(a.p[0] | b.p[0], a.p[1] | b.p[1]); }
static inline Bitboard bb_xor(Bitboard a, Bitboard b) { return bb_make(a.p[0] ^ b.p[0], a.p[1] ^ b.p[1]); }
/* a & ~b */
static inline Bitboard bb_andnot(Bitboard a, Bitboard b) { return bb_make(a.p[0] & ~b.p[0], a.p[1] & ~b.p[1]); }
#endif
/* All 81 squares not in b. */
static inline Bitboard bb_not(Bitboard b) { return bb_andnot(bb_full(), b); }
static inline bool bb_is_empty(Bitboard b) { return (b.p[0] | b.p[1]) == 0; }
static inline bool bb_nonzero(Bitboard b) { return (b.p[0] | b.p[1]) != 0; }
static inline bool bb_equal(Bitboard a, Bitboard b) { return a.p[0] == b.p[0] && a.p[1] == b.p[1]; }
static inline bool bb_test(Bitboard b, Square sq) { return bb_nonzero(bb_and(b, bb_sq_tab[sq])); }
static inline bool bb_intersects(Bitboard a, Bitboard b) { return ((a.p[0] & b.p[0]) | (a.p[1] & b.p[1])) != 0; }
static inline int32_t bb_popcount(Bitboard b) {
    return compat_popcount64(b.p[0]) + compat_popcount64(b.p[1]);
}
static inline bool bb_more_than_one(Bitboard b) {
    return (b.p[0] & (b.p[0] - 1)) != 0 || (b.p[1] & (b.p[1] - 1)) != 0 || (b.p[0] != 0 && b.p[1] != 0);
}
/* Lowest square of a non-empty bitboard. */
static inline Square bb_lsb(Bitboard b) {
    return b.p[0] ? compat_ctz64(b.p[0]) : 63 + compat_ctz64(b.p[1]);
}
/* Removes and returns the lowest square of a non-empty bitboard. */
static inline Square bb_pop_lsb(Bitboard *b) {
    if (b->p[0]) {
        Square sq = compat_ctz64(b->p[0]);
        b->p[0] &= b->p[0] - 1;
        return sq;
    }
    Square sq = 63 + compat_ctz64(b->p[1]);
    b->p[1] &= b->p[1] - 1;
    return sq;
}
/* Iterate: for (Bitboard t = b; bb_nonzero(t);) { Square sq = bb_pop_lsb(&t); ... } */

/* ---- 128-bit helpers for the sliding trick --------------------------------- */
static inline Bitboard bb_byte_reverse(Bitboard b) {
    return bb_make(compat_bswap64(b.p[1]), compat_bswap64(b.p[0]));
}
/* Ray up to the first blocker: (x ^ (x - 1)) & ray, with x = occ & ray, 128-bit. */
static inline Bitboard bb_ray_to_blocker(Bitboard occ, Bitboard ray) {
    uint64_t x0 = occ.p[0] & ray.p[0], x1 = occ.p[1] & ray.p[1];
    uint64_t y0 = x0 - 1, y1 = x1 - (x0 == 0);
    return bb_make((x0 ^ y0) & ray.p[0], (x1 ^ y1) & ray.p[1]);
}

/* ---- attacks ------------------------------------------------------------- */
static inline Bitboard bb_pawn_attacks(Color c, Square sq) { return bb_step_tab[c][PT_PAWN][sq]; }
static inline Bitboard bb_knight_attacks(Color c, Square sq) { return bb_step_tab[c][PT_KNIGHT][sq]; }
static inline Bitboard bb_silver_attacks(Color c, Square sq) { return bb_step_tab[c][PT_SILVER][sq]; }
static inline Bitboard bb_gold_attacks(Color c, Square sq) { return bb_step_tab[c][PT_GOLD][sq]; }
static inline Bitboard bb_king_attacks(Square sq) { return bb_step_tab[COLOR_BLACK][PT_KING][sq]; }

static inline Bitboard bb_lance_attacks(Color c, Square sq, Bitboard occ) {
    /* Select words with conditionals, not p[h]: a store of one word followed by a
     * 128-bit load would stall store forwarding. */
    const bool h = sq >= 63;
    uint64_t ray = bb_lance_ray_tab[c][sq];
    uint64_t x = (h ? occ.p[1] : occ.p[0]) & ray, a;
    if (c == COLOR_WHITE)
        a = (x ^ (x - 1)) & ray;
    else
        a = ray & (~0ull << (63 - compat_clz64(x | 1)));
    return h ? bb_make(0, a) : bb_make(a, 0);
}
/* Vertical rook attacks (both lance directions). */
static inline Bitboard bb_file_attacks(Square sq, Bitboard occ) {
    const bool h = sq >= 63;
    uint64_t up = bb_lance_ray_tab[COLOR_BLACK][sq], down = bb_lance_ray_tab[COLOR_WHITE][sq];
    uint64_t o = h ? occ.p[1] : occ.p[0];
    uint64_t xu = o & up, xd = o & down;
    uint64_t a = ((xd ^ (xd - 1)) & down) | (up & (~0ull << (63 - compat_clz64(xu | 1))));
    return h ? bb_make(0, a) : bb_make(a, 0);
}
static inline Bitboard bb_rank_attacks(Square sq, Bitboard occ) {
    Bitboard hi = bb_ray_to_blocker(occ, bb_rook_ray_tab[sq][0]);
    Bitboard lo = bb_byte_reverse(bb_ray_to_blocker(bb_byte_reverse(occ), bb_rook_ray_tab[sq][1]));
    return bb_or(hi, lo);
}
static inline Bitboard bb_rook_attacks(Square sq, Bitboard occ) {
    return bb_or(bb_file_attacks(sq, occ), bb_rank_attacks(sq, occ));
}
static inline Bitboard bb_bishop_attacks(Square sq, Bitboard occ) {
    Bitboard rev = bb_byte_reverse(occ);
    Bitboard a = bb_or(bb_ray_to_blocker(occ, bb_bishop_ray_tab[sq][0]), bb_ray_to_blocker(occ, bb_bishop_ray_tab[sq][1]));
    Bitboard b = bb_or(bb_ray_to_blocker(rev, bb_bishop_ray_tab[sq][2]), bb_ray_to_blocker(rev, bb_bishop_ray_tab[sq][3]));
    return bb_or(a, bb_byte_reverse(b));
}
static inline Bitboard bb_horse_attacks(Square sq, Bitboard occ) {
    return bb_or(bb_bishop_attacks(sq, occ), bb_king_attacks(sq));
}
static inline Bitboard bb_dragon_attacks(Square sq, Bitboard occ) {
    return bb_or(bb_rook_attacks(sq, occ), bb_king_attacks(sq));
}
/* Attacks of any piece standing on sq with occupancy occ. */
Bitboard bb_attacks(Piece pc, Square sq, Bitboard occ);

/* Squares attacked by a set of pawns of colour c (pawns never stand on their last rank). */
static inline Bitboard bb_pawn_set_attacks(Color c, Bitboard pawns) {
    return c == COLOR_BLACK ? bb_make(pawns.p[0] >> 1, pawns.p[1] >> 1) : bb_make(pawns.p[0] << 1, pawns.p[1] << 1);
}

/* Squares strictly between a and b when they share a rank, file or diagonal, else empty. */
static inline Bitboard bb_between(Square a, Square b) {
    int d = bb_dir_tab[a][b];
    return bb_and(bb_ray_tab[d][a], bb_ray_tab[9 - d][b]);
}
/* The whole line (edge to edge) through a and b, empty when they are not aligned. */
static inline Bitboard bb_line(Square a, Square b) { return bb_line_tab[bb_dir_tab[a][b]][a]; }
/* a, b, c on one line (c may be on either side). */
static inline bool bb_aligned(Square a, Square b, Square c) { return bb_test(bb_line(a, b), c); }

/* Files (full 9-square columns) that hold at least one square of b. */
static inline Bitboard bb_file_fill(Bitboard b) {
    /* Low 8 bits and the top bit of every 9-bit file group, per word. */
    const uint64_t low0 = 0x3FDFEFF7FBFDFEFFull, top0 = 0x4020100804020100ull;
    const uint64_t low1 = 0x1FEFFull, top1 = 0x20100ull;
    uint64_t f0 = (((b.p[0] & low0) + low0) | b.p[0]) & top0;
    uint64_t f1 = (((b.p[1] & low1) + low1) | b.p[1]) & top1;
    return bb_make((f0 - (f0 >> 8)) | f0, (f1 - (f1 >> 8)) | f1);
}

#endif
