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

/* Three representations of the same 128 bits, chosen at compile time:
 *  - two plain words, with -DKOMA_PORTABLE_BITBOARD (or on a compiler that
 *    has neither of the two below);
 *  - an SSE2 register (__m128i, <emmintrin.h>), with -DKOMA_SSE2_BITBOARD,
 *    or where the compiler has no GCC vector extensions but the target has
 *    SSE2: MSVC's cl on x64 (_M_X64) or on x86 with /arch:SSE2 (_M_IX86_FP),
 *    not on ARM64EC (which defines _M_X64 too);
 *  - a GCC/Clang vector (and, or, xor in one SIMD instruction), the default
 *    with GCC and Clang (clang-cl included).
 * All give the same results; ctest runs the engine tests on each
 * (test_*_portable, test_*_sse2). The SSE2 path uses SSE2 intrinsics only. */
#if defined(KOMA_PORTABLE_BITBOARD)
/* two words */
#elif defined(KOMA_SSE2_BITBOARD) ||                                                                                  \
    (!defined(__GNUC__) && !defined(__clang__) && !defined(_M_ARM64EC) &&                                             \
     (defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2) || defined(__SSE2__)))
#if !defined(__SSE2__) && !defined(_M_X64) && !(defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#error "KOMA_SSE2_BITBOARD needs an SSE2 target: x86-64, or x86 with -msse2 (/arch:SSE2)"
#endif
#include <emmintrin.h>
#define BB_SSE2 1
#elif defined(__GNUC__) || defined(__clang__)
typedef uint64_t bb_vec_t __attribute__((vector_size(16)));
#define BB_VECTOR 1
#endif

/* p[0]: squares 0..62, p[1]: squares 63..80 (bit = square - 63). */
typedef union {
    uint64_t p[2];
#if defined(BB_VECTOR)
    bb_vec_t v; /* the same 128 bits as one SIMD value (GCC/Clang vector extension) */
#elif defined(BB_SSE2)
    __m128i m; /* the same 128 bits in an SSE2 register; p[0] is the low half */
#endif
} bb_t;

/* ---- tables, filled by engine_init() ------------------------------------ */
extern bb_t bb_sq_tab[SQ_NB];
extern bb_t bb_file_tab[FILE_NB];
extern bb_t bb_rank_tab[RANK_NB];
/* Squares whose rank is (relative to colour c) at most r: ranks 0..r from c's far side. */
extern bb_t bb_forward_ranks_tab[COLOR_NB][RANK_NB];
/* Step attacks indexed [colour][piece type][square]; filled for PAWN, KNIGHT,
 * SILVER, GOLD, KING (and PRO_* = GOLD). Other entries are empty. */
extern bb_t bb_step_tab[COLOR_NB][PT_NB][SQ_NB];
/* Lance ray on an empty board, as one word of the half holding the square. */
extern uint64_t bb_lance_ray_tab[COLOR_NB][SQ_NB];
/* Rank rays: [0] towards higher squares, [1] towards lower squares byte-reversed. */
extern bb_t bb_rook_ray_tab[SQ_NB][2];
/* Diagonals: [0],[1] towards higher squares, [2],[3] towards lower, byte-reversed. */
extern bb_t bb_bishop_ray_tab[SQ_NB][4];
/* Empty-board attacks of sliders. */
extern bb_t bb_lance_pseudo_tab[COLOR_NB][SQ_NB];
extern bb_t bb_bishop_pseudo_tab[SQ_NB];
extern bb_t bb_rook_pseudo_tab[SQ_NB];
/* Direction from a to b (1..8) when on a common line, else 0; rays per direction. */
extern uint8_t bb_dir_tab[SQ_NB][SQ_NB];
extern bb_t bb_ray_tab[10][SQ_NB];  /* [0] and [9] are empty */
extern bb_t bb_line_tab[10][SQ_NB]; /* line through sq in direction d, sq included */
/* Fills the tables; engine_init() calls it once. */
void bb_init_tables(void);

/* ---- basics --------------------------------------------------------------- */
static inline bb_t bb_make(uint64_t lo, uint64_t hi) {
    bb_t b;
#if defined(BB_VECTOR)
    b.v = (bb_vec_t){lo, hi}; /* built in a register, not through memory */
#elif defined(BB_SSE2) && (defined(__x86_64__) || defined(_M_X64))
    b.m = _mm_set_epi64x((long long)hi, (long long)lo);
#elif defined(BB_SSE2) /* i386: some MSVC versions lack _mm_set_epi64x there */
    b.m = _mm_set_epi32((int)(hi >> 32), (int)(uint32_t)hi, (int)(lo >> 32), (int)(uint32_t)lo);
#else
    b.p[0] = lo;
    b.p[1] = hi;
#endif
    return b;
}
/* BB_LO_(b), BB_HI_(b): the two words of b, p[0] and p[1]. The SSE2 path
 * moves them out of the register (i386 has no 64-bit general register: there
 * through memory); elsewhere they are b.p[0] and b.p[1]. */
#if defined(BB_SSE2)
static inline uint64_t bb_sse2_lo_(__m128i m) {
#if defined(__x86_64__) || defined(_M_X64)
    return (uint64_t)_mm_cvtsi128_si64(m);
#else
    uint64_t w[2];
    _mm_storeu_si128((__m128i *)w, m);
    return w[0];
#endif
}
static inline uint64_t bb_sse2_hi_(__m128i m) { return bb_sse2_lo_(_mm_shuffle_epi32(m, _MM_SHUFFLE(3, 2, 3, 2))); }
#define BB_LO_(b) bb_sse2_lo_((b).m)
#define BB_HI_(b) bb_sse2_hi_((b).m)
#else
#define BB_LO_(b) ((b).p[0])
#define BB_HI_(b) ((b).p[1])
#endif
static inline bb_t bb_zero(void) { return bb_make(0, 0); }
static inline bb_t bb_full(void) { return bb_make(0x7FFFFFFFFFFFFFFFull, 0x3FFFFull); }
static inline bb_t bb_sq(sq_t sq) { return bb_sq_tab[sq]; }
static inline bb_t bb_file(int32_t f) { return bb_file_tab[f]; }
static inline bb_t bb_rank(int32_t r) { return bb_rank_tab[r]; }
/* Promotion zone of c: the three ranks nearest the opponent. */
static inline bb_t bb_zone(color_t c) { return bb_forward_ranks_tab[c][2]; }
#if defined(BB_VECTOR)
static inline bb_t bb_and(bb_t a, bb_t b) { bb_t r; r.v = a.v & b.v; return r; }
static inline bb_t bb_or(bb_t a, bb_t b) { bb_t r; r.v = a.v | b.v; return r; }
static inline bb_t bb_xor(bb_t a, bb_t b) { bb_t r; r.v = a.v ^ b.v; return r; }
/* a & ~b */
static inline bb_t bb_andnot(bb_t a, bb_t b) { bb_t r; r.v = a.v & ~b.v; return r; }
#elif defined(BB_SSE2)
static inline bb_t bb_and(bb_t a, bb_t b) { bb_t r; r.m = _mm_and_si128(a.m, b.m); return r; }
static inline bb_t bb_or(bb_t a, bb_t b) { bb_t r; r.m = _mm_or_si128(a.m, b.m); return r; }
static inline bb_t bb_xor(bb_t a, bb_t b) { bb_t r; r.m = _mm_xor_si128(a.m, b.m); return r; }
/* a & ~b (_mm_andnot_si128(x, y) is ~x & y) */
static inline bb_t bb_andnot(bb_t a, bb_t b) { bb_t r; r.m = _mm_andnot_si128(b.m, a.m); return r; }
#else
static inline bb_t bb_and(bb_t a, bb_t b) { return bb_make(a.p[0] & b.p[0], a.p[1] & b.p[1]); }
static inline bb_t bb_or(bb_t a, bb_t b) { return bb_make(a.p[0] | b.p[0], a.p[1] | b.p[1]); }
static inline bb_t bb_xor(bb_t a, bb_t b) { return bb_make(a.p[0] ^ b.p[0], a.p[1] ^ b.p[1]); }
/* a & ~b */
static inline bb_t bb_andnot(bb_t a, bb_t b) { return bb_make(a.p[0] & ~b.p[0], a.p[1] & ~b.p[1]); }
#endif
/* All 81 squares not in b. */
static inline bb_t bb_not(bb_t b) { return bb_andnot(bb_full(), b); }
#if defined(BB_SSE2)
/* Byte-wise compare, one bit per byte: 0xFFFF when all 16 bytes are equal. */
static inline bool bb_is_empty(bb_t b) { return _mm_movemask_epi8(_mm_cmpeq_epi8(b.m, _mm_setzero_si128())) == 0xFFFF; }
static inline bool bb_nonzero(bb_t b) { return !bb_is_empty(b); }
static inline bool bb_equal(bb_t a, bb_t b) { return _mm_movemask_epi8(_mm_cmpeq_epi8(a.m, b.m)) == 0xFFFF; }
static inline bool bb_intersects(bb_t a, bb_t b) { return bb_nonzero(bb_and(a, b)); }
#else
static inline bool bb_is_empty(bb_t b) { return (b.p[0] | b.p[1]) == 0; }
static inline bool bb_nonzero(bb_t b) { return (b.p[0] | b.p[1]) != 0; }
static inline bool bb_equal(bb_t a, bb_t b) { return a.p[0] == b.p[0] && a.p[1] == b.p[1]; }
static inline bool bb_intersects(bb_t a, bb_t b) { return ((a.p[0] & b.p[0]) | (a.p[1] & b.p[1])) != 0; }
#endif
static inline bool bb_test(bb_t b, sq_t sq) { return bb_nonzero(bb_and(b, bb_sq_tab[sq])); }
static inline int32_t bb_popcount(bb_t b) {
    return compat_popcount64(BB_LO_(b)) + compat_popcount64(BB_HI_(b));
}
static inline bool bb_more_than_one(bb_t b) {
    return (BB_LO_(b) & (BB_LO_(b) - 1)) != 0 || (BB_HI_(b) & (BB_HI_(b) - 1)) != 0 ||
           (BB_LO_(b) != 0 && BB_HI_(b) != 0);
}
/* Lowest square of a non-empty bitboard. */
static inline sq_t bb_lsb(bb_t b) {
    return BB_LO_(b) ? compat_ctz64(BB_LO_(b)) : 63 + compat_ctz64(BB_HI_(b));
}
/* Removes and returns the lowest square of a non-empty bitboard. */
static inline sq_t bb_pop_lsb(bb_t *b) {
#if defined(BB_SSE2)
    /* The lowest bit (x & -x) of the word that has it, cleared with one xor. */
    const uint64_t lo = BB_LO_(*b);
    if (lo) {
        b->m = _mm_xor_si128(b->m, bb_make(lo & (0 - lo), 0).m);
        return compat_ctz64(lo);
    }
    const uint64_t hi = BB_HI_(*b);
    b->m = _mm_xor_si128(b->m, bb_make(0, hi & (0 - hi)).m);
    return 63 + compat_ctz64(hi);
#else
    if (b->p[0]) {
        sq_t sq = compat_ctz64(b->p[0]);
        b->p[0] &= b->p[0] - 1;
        return sq;
    }
    sq_t sq = 63 + compat_ctz64(b->p[1]);
    b->p[1] &= b->p[1] - 1;
    return sq;
#endif
}
/* Iterate: for (Bitboard t = b; bb_nonzero(t);) { Square sq = bb_pop_lsb(&t); ... } */

/* ---- 128-bit helpers for the sliding trick --------------------------------- */
static inline bb_t bb_byte_reverse(bb_t b) {
#if defined(BB_SSE2)
    /* Dwords reversed, then the 16-bit halves of each dword, then the bytes of each half. */
    __m128i x = _mm_shuffle_epi32(b.m, _MM_SHUFFLE(0, 1, 2, 3));
    x = _mm_shufflehi_epi16(_mm_shufflelo_epi16(x, _MM_SHUFFLE(2, 3, 0, 1)), _MM_SHUFFLE(2, 3, 0, 1));
    bb_t r;
    r.m = _mm_or_si128(_mm_slli_epi16(x, 8), _mm_srli_epi16(x, 8));
    return r;
#else
    return bb_make(compat_bswap64(b.p[1]), compat_bswap64(b.p[0]));
#endif
}
/* Ray up to the first blocker: (x ^ (x - 1)) & ray, with x = occ & ray, 128-bit. */
static inline bb_t bb_ray_to_blocker(bb_t occ, bb_t ray) {
#if defined(BB_SSE2)
    /* x - 1 per word; the high word's part is kept only when the low word
     * borrowed (its x was 0): that is bit 63 of ~x & (x - 1) in the low word,
     * spread over the high word by an arithmetic shift of its dword. */
    const __m128i ones = _mm_set1_epi32(-1);
    const __m128i x = _mm_and_si128(occ.m, ray.m), y = _mm_add_epi64(x, ones);
    const __m128i borrow = _mm_shuffle_epi32(_mm_srai_epi32(_mm_andnot_si128(x, y), 31), _MM_SHUFFLE(1, 1, 1, 1));
    bb_t r;
    r.m = _mm_and_si128(_mm_and_si128(_mm_xor_si128(x, y), ray.m), _mm_unpacklo_epi64(ones, borrow));
    return r;
#else
    uint64_t x0 = occ.p[0] & ray.p[0], x1 = occ.p[1] & ray.p[1];
    uint64_t y0 = x0 - 1, y1 = x1 - (x0 == 0);
    return bb_make((x0 ^ y0) & ray.p[0], (x1 ^ y1) & ray.p[1]);
#endif
}

/* ---- attacks ------------------------------------------------------------- */
static inline bb_t bb_pawn_attacks(color_t c, sq_t sq) { return bb_step_tab[c][PT_PAWN][sq]; }
static inline bb_t bb_knight_attacks(color_t c, sq_t sq) { return bb_step_tab[c][PT_KNIGHT][sq]; }
static inline bb_t bb_silver_attacks(color_t c, sq_t sq) { return bb_step_tab[c][PT_SILVER][sq]; }
static inline bb_t bb_gold_attacks(color_t c, sq_t sq) { return bb_step_tab[c][PT_GOLD][sq]; }
static inline bb_t bb_king_attacks(sq_t sq) { return bb_step_tab[COLOR_BLACK][PT_KING][sq]; }

static inline bb_t bb_lance_attacks(color_t c, sq_t sq, bb_t occ) {
    /* Select words with conditionals, not p[h]: a store of one word followed by a
     * 128-bit load would stall store forwarding. */
    const bool h = sq >= 63;
    uint64_t ray = bb_lance_ray_tab[c][sq];
    uint64_t x = (h ? BB_HI_(occ) : BB_LO_(occ)) & ray, a;
    if (c == COLOR_WHITE)
        a = (x ^ (x - 1)) & ray;
    else
        a = ray & (~0ull << (63 - compat_clz64(x | 1)));
    return h ? bb_make(0, a) : bb_make(a, 0);
}
/* Vertical rook attacks (both lance directions). */
static inline bb_t bb_file_attacks(sq_t sq, bb_t occ) {
    const bool h = sq >= 63;
    uint64_t up = bb_lance_ray_tab[COLOR_BLACK][sq], down = bb_lance_ray_tab[COLOR_WHITE][sq];
    uint64_t o = h ? BB_HI_(occ) : BB_LO_(occ);
    uint64_t xu = o & up, xd = o & down;
    uint64_t a = ((xd ^ (xd - 1)) & down) | (up & (~0ull << (63 - compat_clz64(xu | 1))));
    return h ? bb_make(0, a) : bb_make(a, 0);
}
static inline bb_t bb_rank_attacks(sq_t sq, bb_t occ) {
    bb_t hi = bb_ray_to_blocker(occ, bb_rook_ray_tab[sq][0]);
    bb_t lo = bb_byte_reverse(bb_ray_to_blocker(bb_byte_reverse(occ), bb_rook_ray_tab[sq][1]));
    return bb_or(hi, lo);
}
static inline bb_t bb_rook_attacks(sq_t sq, bb_t occ) {
    return bb_or(bb_file_attacks(sq, occ), bb_rank_attacks(sq, occ));
}
static inline bb_t bb_bishop_attacks(sq_t sq, bb_t occ) {
    bb_t rev = bb_byte_reverse(occ);
    bb_t a = bb_or(bb_ray_to_blocker(occ, bb_bishop_ray_tab[sq][0]), bb_ray_to_blocker(occ, bb_bishop_ray_tab[sq][1]));
    bb_t b = bb_or(bb_ray_to_blocker(rev, bb_bishop_ray_tab[sq][2]), bb_ray_to_blocker(rev, bb_bishop_ray_tab[sq][3]));
    return bb_or(a, bb_byte_reverse(b));
}
static inline bb_t bb_horse_attacks(sq_t sq, bb_t occ) {
    return bb_or(bb_bishop_attacks(sq, occ), bb_king_attacks(sq));
}
static inline bb_t bb_dragon_attacks(sq_t sq, bb_t occ) {
    return bb_or(bb_rook_attacks(sq, occ), bb_king_attacks(sq));
}
/* Attacks of any piece standing on sq with occupancy occ. */
bb_t bb_attacks(piece_t pc, sq_t sq, bb_t occ);

/* Squares attacked by a set of pawns of colour c (pawns never stand on their last rank). */
static inline bb_t bb_pawn_set_attacks(color_t c, bb_t pawns) {
#if defined(BB_SSE2)
    bb_t r;
    r.m = c == COLOR_BLACK ? _mm_srli_epi64(pawns.m, 1) : _mm_slli_epi64(pawns.m, 1);
    return r;
#else
    return c == COLOR_BLACK ? bb_make(pawns.p[0] >> 1, pawns.p[1] >> 1) : bb_make(pawns.p[0] << 1, pawns.p[1] << 1);
#endif
}

/* Squares strictly between a and b when they share a rank, file or diagonal, else empty. */
static inline bb_t bb_between(sq_t a, sq_t b) {
    int d = bb_dir_tab[a][b];
    return bb_and(bb_ray_tab[d][a], bb_ray_tab[9 - d][b]);
}
/* The whole line (edge to edge) through a and b, empty when they are not aligned. */
static inline bb_t bb_line(sq_t a, sq_t b) { return bb_line_tab[bb_dir_tab[a][b]][a]; }
/* a, b, c on one line (c may be on either side). */
static inline bool bb_aligned(sq_t a, sq_t b, sq_t c) { return bb_test(bb_line(a, b), c); }

/* Files (full 9-square columns) that hold at least one square of b. */
static inline bb_t bb_file_fill(bb_t b) {
    /* Low 8 bits and the top bit of every 9-bit file group, per word. */
    const uint64_t low0 = 0x3FDFEFF7FBFDFEFFull, top0 = 0x4020100804020100ull;
    const uint64_t low1 = 0x1FEFFull, top1 = 0x20100ull;
#if defined(BB_SSE2)
    const __m128i low = bb_make(low0, low1).m, top = bb_make(top0, top1).m;
    const __m128i f = _mm_and_si128(_mm_or_si128(_mm_add_epi64(_mm_and_si128(b.m, low), low), b.m), top);
    bb_t r;
    r.m = _mm_or_si128(_mm_sub_epi64(f, _mm_srli_epi64(f, 8)), f);
    return r;
#else
    uint64_t f0 = (((b.p[0] & low0) + low0) | b.p[0]) & top0;
    uint64_t f1 = (((b.p[1] & low1) + low1) | b.p[1]) & top1;
    return bb_make((f0 - (f0 >> 8)) | f0, (f1 - (f1 >> 8)) | f1);
#endif
}

#endif
