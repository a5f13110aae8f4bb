/* test_bitboard.c - every bitboard.h operation against a plain reference.
 *
 * The reference works bit by bit or square by square on the two words of the
 * public layout (p[0]: squares 0..62, p[1]: squares 63..80) and shares no code
 * with the three representations (GCC vector, SSE2 register, two words). The
 * test is built on each engine library: test_bitboard (the compiler's
 * default), test_bitboard_portable, test_bitboard_sse2, and first checks that
 * the library's switch picked the representation it names.
 *
 * Inputs always include the boundary squares (62 and 63, where the words
 * meet; the board's corners and edge files and ranks). The 128-bit ray trick
 * is also run on arbitrary 128-bit words: a byte-reversed occupancy can have
 * bit 63 of the low word set, which no square of the plain layout has.
 */
#include <stdio.h>
#include <string.h>

#include "engine/bitboard.h"
#include "tests/koma_test.h"

typedef struct {
    uint64_t w[2];
} bb_ref_t;

static const sq_t EDGE_SQ[] = {0, 1, 8, 9, 17, 36, 40, 44, 53, 54, 61, 62, 63, 64, 70, 71, 72, 79, 80};
enum { EDGE_NB = sizeof EDGE_SQ / sizeof EDGE_SQ[0], RANDOM_NB = 400, SETS_MAX = 600 };

static bb_ref_t ref_of(bb_t b) {
    bb_ref_t r = {{b.p[0], b.p[1]}};
    return r;
}
static bool ref_has(bb_ref_t r, int sq) { return sq < 63 ? (r.w[0] >> sq) & 1 : (r.w[1] >> (sq - 63)) & 1; }
static void ref_add(bb_ref_t *r, int sq) {
    if (sq < 63)
        r->w[0] |= 1ull << sq;
    else
        r->w[1] |= 1ull << (sq - 63);
}
static bool same(bb_t b, bb_ref_t r) { return b.p[0] == r.w[0] && b.p[1] == r.w[1]; }
static bool on_board(int f, int r) { return f >= 0 && f < 9 && r >= 0 && r < 9; }

/* For messages: "hi:lo" in hex. */
static const char *hex(bb_ref_t r) {
    static char buf[4][40];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%05llx:%016llx", (unsigned long long)r.w[1], (unsigned long long)r.w[0]);
    return buf[k];
}

static bb_t random_bb(void) {
    uint64_t a = t_next(), b = t_next();
    switch (t_next() % 4) {
    case 0: a &= t_next() & t_next(), b &= t_next() & t_next(); break; /* sparse */
    case 1: break;                                                     /* half */
    case 2: a |= t_next(), b |= t_next(); break;                       /* dense */
    default:                                                           /* a few boundary squares */
        a = b = 0;
        for (int i = 0; i < 3; i++) {
            bb_ref_t r = {{a, b}};
            ref_add(&r, EDGE_SQ[t_next() % EDGE_NB]);
            a = r.w[0], b = r.w[1];
        }
    }
    return bb_make(a & 0x7FFFFFFFFFFFFFFFull, b & 0x3FFFFull);
}

/* The representation each library asks for is the one it got. */
static void test_representation(void) {
#if defined(BB_SSE2)
    const char *got = "sse2";
#elif defined(BB_VECTOR)
    const char *got = "vector";
#else
    const char *got = "words";
#endif
#if defined(KOMA_PORTABLE_BITBOARD)
    const char *want = "words";
#elif defined(KOMA_SSE2_BITBOARD)
    const char *want = "sse2";
#elif defined(__GNUC__) || defined(__clang__)
    const char *want = "vector";
#else
    const char *want = got;
#endif
    CHECKF(strcmp(got, want) == 0, "representation %s, want %s", got, want);
    printf("bitboard representation: %s\n", got);

    bb_t b = bb_make(0x0123456789ABCDEFull, 0xFEDCBA9876543210ull);
    CHECKF(b.p[0] == 0x0123456789ABCDEFull && b.p[1] == 0xFEDCBA9876543210ull, "bb_make(lo, hi) gave %s",
           hex(ref_of(b)));
    CHECKF(sizeof(bb_t) == 16, "sizeof(Bitboard) %d", (int)sizeof(bb_t));
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        bb_ref_t r = {{0, 0}};
        ref_add(&r, sq);
        CHECKF(same(bb_sq(sq), r), "bb_sq(%d) = %s", sq, hex(ref_of(bb_sq(sq))));
    }
    bb_ref_t full = {{0, 0}};
    for (sq_t sq = 0; sq < SQ_NB; sq++) ref_add(&full, sq);
    CHECKF(same(bb_full(), full), "bb_full() = %s", hex(ref_of(bb_full())));
    CHECK(same(bb_zero(), (bb_ref_t){{0, 0}}));
}

/* One-argument operations on every set, two-argument ones on every pair. */
static void test_set_ops(const bb_t *sets, int n) {
    for (int i = 0; i < n; i++) {
        const bb_t a = sets[i];
        const bb_ref_t ra = ref_of(a);
        int count = 0, lowest = -1;
        for (int sq = 0; sq < SQ_NB; sq++)
            if (ref_has(ra, sq)) {
                count++;
                if (lowest < 0) lowest = sq;
            }
        CHECKF(bb_is_empty(a) == (count == 0) && bb_nonzero(a) == (count > 0), "%s: empty/nonzero", hex(ra));
        CHECKF(bb_popcount(a) == count, "%s: popcount %d, want %d", hex(ra), bb_popcount(a), count);
        CHECKF(bb_more_than_one(a) == (count > 1), "%s: more_than_one with %d squares", hex(ra), count);
        if (count) CHECKF(bb_lsb(a) == lowest, "%s: lsb %d, want %d", hex(ra), bb_lsb(a), lowest);
        /* pop_lsb walks the squares in ascending order and empties the set. */
        bb_t t = a;
        int popped = 0, prev = -1;
        bool ok = true;
        while (bb_nonzero(t) && popped <= SQ_NB) {
            sq_t sq = bb_pop_lsb(&t);
            ok = ok && sq > prev && sq < SQ_NB && ref_has(ra, sq) && !bb_test(t, sq);
            prev = sq;
            popped++;
        }
        CHECKF(ok && popped == count, "%s: pop_lsb gave %d squares (bad order or square: %d), want %d", hex(ra),
               popped, !ok, count);
        bool tests_ok = true;
        for (sq_t sq = 0; sq < SQ_NB; sq++) tests_ok = tests_ok && bb_test(a, sq) == ref_has(ra, sq);
        CHECKF(tests_ok, "%s: bb_test", hex(ra));

        bb_ref_t not_a = {{~ra.w[0] & 0x7FFFFFFFFFFFFFFFull, ~ra.w[1] & 0x3FFFFull}};
        CHECKF(same(bb_not(a), not_a), "%s: not gave %s", hex(ra), hex(ref_of(bb_not(a))));
        CHECKF(bb_equal(a, a) && bb_equal(a, bb_make(ra.w[0], ra.w[1])), "%s: not equal to itself", hex(ra));

        /* Byte reversal of the 16 bytes, and back. */
        bb_ref_t rev = {{0, 0}};
        for (int byte = 0; byte < 16; byte++) {
            uint64_t v = (ra.w[byte / 8] >> (8 * (byte % 8))) & 0xFF;
            int to = 15 - byte;
            rev.w[to / 8] |= v << (8 * (to % 8));
        }
        CHECKF(same(bb_byte_reverse(a), rev), "%s: byte_reverse gave %s, want %s", hex(ra),
               hex(ref_of(bb_byte_reverse(a))), hex(rev));
        CHECKF(bb_equal(bb_byte_reverse(bb_byte_reverse(a)), a), "%s: byte_reverse twice", hex(ra));

        /* Files holding a square of a, whole. */
        bb_ref_t fill = {{0, 0}};
        for (int f = 0; f < 9; f++) {
            bool any = false;
            for (int r = 0; r < 9; r++) any = any || ref_has(ra, sq_make(f, r));
            for (int r = 0; r < 9 && any; r++) ref_add(&fill, sq_make(f, r));
        }
        CHECKF(same(bb_file_fill(a), fill), "%s: file_fill gave %s, want %s", hex(ra), hex(ref_of(bb_file_fill(a))),
               hex(fill));

        /* Pawn sets (never on their last rank): each attacks one rank forward. */
        for (color_t c = 0; c < COLOR_NB; c++) {
            bb_t pawns = bb_andnot(a, bb_rank(c == COLOR_BLACK ? 0 : 8));
            bb_ref_t rp = ref_of(pawns), want = {{0, 0}};
            for (int sq = 0; sq < SQ_NB; sq++)
                if (ref_has(rp, sq)) ref_add(&want, c == COLOR_BLACK ? sq - 1 : sq + 1);
            CHECKF(same(bb_pawn_set_attacks(c, pawns), want), "%s: pawn_set_attacks colour %d gave %s, want %s",
                   hex(rp), c, hex(ref_of(bb_pawn_set_attacks(c, pawns))), hex(want));
        }

        for (int j = 0; j < n; j++) {
            const bb_t b = sets[j];
            const bb_ref_t rb = ref_of(b);
            bb_ref_t w_and = {{ra.w[0] & rb.w[0], ra.w[1] & rb.w[1]}}, w_or = {{ra.w[0] | rb.w[0], ra.w[1] | rb.w[1]}};
            bb_ref_t w_xor = {{ra.w[0] ^ rb.w[0], ra.w[1] ^ rb.w[1]}}, w_andnot = {{ra.w[0] & ~rb.w[0], ra.w[1] & ~rb.w[1]}};
            bool eq = ra.w[0] == rb.w[0] && ra.w[1] == rb.w[1];
            bool meet = (w_and.w[0] | w_and.w[1]) != 0;
            CHECKF(same(bb_and(a, b), w_and) && same(bb_or(a, b), w_or) && same(bb_xor(a, b), w_xor) &&
                       same(bb_andnot(a, b), w_andnot),
                   "%s, %s: and/or/xor/andnot", hex(ra), hex(rb));
            CHECKF(bb_equal(a, b) == eq && bb_intersects(a, b) == meet, "%s, %s: equal %d intersects %d", hex(ra),
                   hex(rb), bb_equal(a, b), bb_intersects(a, b));
        }
    }
}

/* The ray up to and including the first blocker, in bit order over the 128
 * bits (the whole ray when nothing blocks): found by scanning, not by the
 * decrement the library uses. */
static bb_ref_t ref_ray_to_blocker(bb_ref_t occ, bb_ref_t ray) {
    int first = 128;
    for (int bit = 0; bit < 128 && first == 128; bit++)
        if ((occ.w[bit / 64] & ray.w[bit / 64]) >> (bit % 64) & 1) first = bit;
    bb_ref_t r = {{0, 0}};
    for (int bit = 0; bit <= first && bit < 128; bit++) r.w[bit / 64] |= ray.w[bit / 64] & (1ull << (bit % 64));
    return r;
}

static void check_ray(bb_t occ, bb_t ray) {
    bb_ref_t want = ref_ray_to_blocker(ref_of(occ), ref_of(ray));
    bb_t got = bb_ray_to_blocker(occ, ray);
    CHECKF(same(got, want), "ray_to_blocker(occ %s, ray %s) = %s, want %s", hex(ref_of(occ)), hex(ref_of(ray)),
           hex(ref_of(got)), hex(want));
}

static void test_ray_to_blocker(const bb_t *sets, int n) {
    /* The words meeting: blockers only in the low word, only in the high word,
     * none, and the low word's blocker on bit 63 alone (no borrow). */
    const uint64_t B63 = 1ull << 63;
    check_ray(bb_make(0, 0), bb_make(~0ull, ~0ull));
    check_ray(bb_make(B63, 0), bb_make(B63 | 1, 0xF));
    check_ray(bb_make(B63, 4), bb_make(B63, 0xF));
    check_ray(bb_make(0, B63), bb_make(0xFF, B63 | 1));
    check_ray(bb_make(1, 1), bb_make(1, 1));
    check_ray(bb_make(0, 1), bb_make(~0ull, 1));
    check_ray(bb_make(~0ull, ~0ull), bb_make(0, 0));
    /* Arbitrary 128-bit words. */
    for (int i = 0; i < 20000; i++) {
        uint64_t o0 = t_next(), o1 = t_next(), r0 = t_next(), r1 = t_next();
        if (i % 3 == 0) o0 &= t_next() & t_next() & t_next();
        if (i % 5 == 0) o0 = 0;
        if (i % 7 == 0) o0 = B63 | (o0 & t_next() & t_next() & B63);
        check_ray(bb_make(o0, o1), bb_make(r0 | B63, r1));
        check_ray(bb_make(o0, o1), bb_make(r0, r1));
    }
    /* The rays the attacks use, on real and byte-reversed occupancies. */
    for (int i = 0; i < n; i++)
        for (sq_t sq = 0; sq < SQ_NB; sq++) {
            check_ray(sets[i], bb_rook_ray_tab[sq][0]);
            check_ray(bb_byte_reverse(sets[i]), bb_rook_ray_tab[sq][1]);
            for (int d = 0; d < 4; d++)
                check_ray(d < 2 ? sets[i] : bb_byte_reverse(sets[i]), bb_bishop_ray_tab[sq][d]);
        }
}

/* Walks from sq in each (df, dr) until a blocker (included) or the edge. */
static bb_ref_t ref_slide(sq_t sq, bb_ref_t occ, const int (*dirs)[2], int ndirs) {
    bb_ref_t r = {{0, 0}};
    for (int d = 0; d < ndirs; d++)
        for (int f = sq_file(sq) + dirs[d][0], k = sq_rank(sq) + dirs[d][1]; on_board(f, k);
             f += dirs[d][0], k += dirs[d][1]) {
            ref_add(&r, sq_make(f, k));
            if (ref_has(occ, sq_make(f, k))) break;
        }
    return r;
}
static bb_ref_t ref_or(bb_ref_t a, bb_ref_t b) { return (bb_ref_t){{a.w[0] | b.w[0], a.w[1] | b.w[1]}}; }

static void test_slider_attacks(const bb_t *sets, int n) {
    static const int ROOK[][2] = {{0, -1}, {0, 1}, {-1, 0}, {1, 0}}, BISHOP[][2] = {{-1, -1}, {-1, 1}, {1, -1}, {1, 1}};
    static const int KING[][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
    for (int i = 0; i < n; i++) {
        const bb_t occ = sets[i];
        const bb_ref_t ro = ref_of(occ), all = {{~0ull, ~0ull}};
        bool lance = true, file = true, rank = true, rook = true, bishop = true, horse = true, dragon = true;
        int bad = -1;
        for (sq_t sq = 0; sq < SQ_NB; sq++) {
            const bb_ref_t king = ref_slide(sq, all, KING, 8); /* every neighbour blocks: one step */
            const bb_ref_t r_file = ref_slide(sq, ro, ROOK, 2), r_rank = ref_slide(sq, ro, ROOK + 2, 2);
            const bb_ref_t r_bishop = ref_slide(sq, ro, BISHOP, 4);
            bool ok = same(bb_lance_attacks(COLOR_BLACK, sq, occ), ref_slide(sq, ro, ROOK, 1)) &&
                      same(bb_lance_attacks(COLOR_WHITE, sq, occ), ref_slide(sq, ro, ROOK + 1, 1));
            lance = lance && ok;
            file = file && same(bb_file_attacks(sq, occ), r_file);
            rank = rank && same(bb_rank_attacks(sq, occ), r_rank);
            rook = rook && same(bb_rook_attacks(sq, occ), ref_or(r_file, r_rank));
            bishop = bishop && same(bb_bishop_attacks(sq, occ), r_bishop);
            horse = horse && same(bb_horse_attacks(sq, occ), ref_or(r_bishop, king));
            dragon = dragon && same(bb_dragon_attacks(sq, occ), ref_or(ref_or(r_file, r_rank), king));
            if (bad < 0 && !(lance && file && rank && rook && bishop && horse && dragon)) bad = sq;
        }
        CHECKF(lance && file && rank && rook && bishop && horse && dragon,
               "occ %s: first wrong square %d; lance %d file %d rank %d rook %d bishop %d horse %d dragon %d", hex(ro),
               bad, lance, file, rank, rook, bishop, horse, dragon);
    }
}

int main(void) {
    engine_init();
    t_seed(20261122);
    test_representation();

    static bb_t sets[SETS_MAX];
    int n = 0;
    sets[n++] = bb_zero();
    sets[n++] = bb_full();
    for (int i = 0; i < EDGE_NB; i++) sets[n++] = bb_sq(EDGE_SQ[i]);
    sets[n++] = bb_or(bb_sq(62), bb_sq(63));
    sets[n++] = bb_or(bb_sq(0), bb_sq(80));
    for (int f = 0; f < 9; f++) sets[n++] = bb_file(f);
    for (int r = 0; r < 9; r++) sets[n++] = bb_rank(r);
    sets[n++] = bb_make(0x7FFFFFFFFFFFFFFFull, 0);
    sets[n++] = bb_make(0, 0x3FFFFull);
    for (int i = 0; i < RANDOM_NB && n < SETS_MAX; i++) sets[n++] = random_bb();

    test_set_ops(sets, n);
    test_ray_to_blocker(sets, n);
    test_slider_attacks(sets, n);
    return t_done("test_bitboard");
}
