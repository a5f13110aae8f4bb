/* encode.c - feature planes, hand values, move labels and the legal mask.
 *
 * Owns: everything declared in encode.h.
 * Does not own: move generation (movegen.c) or legality (position.c).
 *
 * Planes are built as bitboards in view square numbering (for White to
 * move the occupancy and colour sets are rotated 180 degrees once, by a bit
 * reversal of the 81-bit value) and OR-ed into a little-endian 64-bit word
 * buffer at bit plane * 81, which is the packed byte format once copied out
 * on a little-endian host.
 */
#include "engine/encode.h"

#include <string.h>

#include "compat/bits.h"
#include "engine/movegen.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "encode.c writes packed bits through 64-bit words: little-endian hosts only"
#endif

enum { WORDS = (ENC_PLANES * 81 + 63) / 64 + 1 };

static inline uint64_t rev64(uint64_t x) {
    x = compat_bswap64(x);
    x = ((x >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((x & 0x0F0F0F0F0F0F0F0Full) << 4);
    x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
    x = ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
    return x;
}

/* Square sq -> 80 - sq for every bit. lo holds squares 0..62, hi 63..80. */
static inline bb_t rotate180(bb_t b) {
    uint64_t a = rev64(b.p[0]), rh = rev64(b.p[1]);
    uint64_t y0 = (a << 17) | (rh >> 46), y1 = a >> 47;
    return bb_make(y0 & 0x7FFFFFFFFFFFFFFFull, (y0 >> 63) | (y1 << 1));
}

/* ORs the 81 bits of b at bit offset 81 * plane. */
static inline void put_plane(uint64_t *w, int32_t plane, bb_t b) {
    uint64_t v0 = b.p[0] | (b.p[1] << 63), v1 = b.p[1] >> 1; /* 64 + 17 bits */
    int32_t off = plane * 81, i = off >> 6, s = off & 63;
    w[i] |= v0 << s;
    if (s) {
        w[i + 1] |= (v0 >> (64 - s)) | (v1 << s);
        w[i + 2] |= v1 >> (64 - s);
    } else {
        w[i + 1] |= v1;
    }
}

typedef struct {
    bb_t att[PT_NB]; /* by piece type */
    bb_t c1, c2, c3; /* attacked by >= 1, 2, 3 pieces */
} side_attacks_t;

static inline void add_attacks(side_attacks_t *sa, piece_type_t pt, bb_t a) {
    sa->att[pt] = bb_or(sa->att[pt], a);
    sa->c3 = bb_or(sa->c3, bb_and(sa->c2, a));
    sa->c2 = bb_or(sa->c2, bb_and(sa->c1, a));
    sa->c1 = bb_or(sa->c1, a);
}

/* Attacks of a piece of type pt moving like colour c, on view square sq. */
static inline bb_t view_attacks(color_t c, piece_type_t pt, sq_t sq, bb_t occ) {
    switch (pt) {
    case PT_LANCE: return bb_lance_attacks(c, sq, occ);
    case PT_BISHOP: return bb_bishop_attacks(sq, occ);
    case PT_ROOK: return bb_rook_attacks(sq, occ);
    case PT_HORSE: return bb_horse_attacks(sq, occ);
    case PT_DRAGON: return bb_dragon_attacks(sq, occ);
    default: return bb_step_tab[c][pt][sq];
    }
}

/* Everything is computed in the view: for White to move the occupancy and
 * the colour sets are rotated once, "us" then moves like Black and "them"
 * like White, and each view square's piece is read at the rotated square. */
void encode_position(const pos_t *pos, uint8_t packed[ENC_PACKED_BYTES], float hand[ENC_HAND]) {
    static const float HAND_SCALE[PT_HAND_NB] = {0, 1.0f / 18, 1.0f / 4, 1.0f / 4, 1.0f / 4, 1.0f / 2, 1.0f / 2, 1.0f / 4};
    uint64_t w[WORDS];
    memset(w, 0, sizeof w);
    const color_t us = pos->side, them = color_flip(us);
    const bool flip = us == COLOR_WHITE;
    bb_t occ = pos->bb[POS_BB_OCC];
    bb_t side_bb[2] = {pos->by_color[us], pos->by_color[them]};
    bb_t pinned[2] = {bb_and(pos_blockers(pos, us, NULL), side_bb[0]), bb_and(pos_blockers(pos, them, NULL), side_bb[1])};
    if (flip) {
        occ = rotate180(occ);
        for (int32_t b = 0; b < 2; b++) {
            side_bb[b] = rotate180(side_bb[b]);
            pinned[b] = rotate180(pinned[b]);
        }
    }
    for (int32_t b = 0; b < 2; b++) {
        const color_t c = b == 0 ? us : them;
        const color_t vc = b == 0 ? COLOR_BLACK : COLOR_WHITE; /* how the side moves in the view */
        const int32_t base = b * ENC_SIDE_PLANES;
        bb_t pcs[PT_NB];
        side_attacks_t sa;
        memset(pcs, 0, sizeof pcs);
        memset(&sa, 0, sizeof sa);
        for (bb_t t = side_bb[b]; bb_nonzero(t);) {
            sq_t v = bb_pop_lsb(&t);
            piece_type_t pt = piece_type(pos->board[flip ? sq_flip(v) : v]);
            pcs[pt] = bb_or(pcs[pt], bb_sq_tab[v]);
            add_attacks(&sa, pt, view_attacks(vc, pt, v, occ));
        }
        for (piece_type_t pt = PT_PAWN; pt <= PT_DRAGON; pt++) {
            if (bb_nonzero(pcs[pt])) put_plane(w, base + ENC_OFF_PIECE + pt - 1, pcs[pt]);
            if (bb_nonzero(sa.att[pt])) put_plane(w, base + ENC_OFF_ATTACK + pt - 1, sa.att[pt]);
        }
        put_plane(w, base + ENC_OFF_COUNT + 0, sa.c1);
        if (bb_nonzero(sa.c2)) put_plane(w, base + ENC_OFF_COUNT + 1, sa.c2);
        if (bb_nonzero(sa.c3)) put_plane(w, base + ENC_OFF_COUNT + 2, sa.c3);
        if (bb_nonzero(pinned[b])) put_plane(w, base + ENC_OFF_PINNED, pinned[b]);
        put_plane(w, base + ENC_OFF_NO_PAWN_FILE, bb_not(bb_file_fill(pcs[PT_PAWN])));
        for (piece_type_t pt = PT_PAWN; pt <= PT_GOLD; pt++)
            hand[b * 7 + pt - 1] = (float)hand_count(pos->hand[c], pt) * HAND_SCALE[pt];
    }
    if (pos_in_check(pos)) put_plane(w, ENC_PLANE_IN_CHECK, bb_full());
    put_plane(w, ENC_PLANE_ONES, bb_full());
    memcpy(packed, w, ENC_PACKED_BYTES);
}

/* ---- labels ----------------------------------------------------------------- */
/* Board direction of a step (df, dr) in the view (f: towards higher files,
 * r: towards rank i); -1 when it is no king step direction or knight jump. */
static inline int32_t dir_of(int32_t df, int32_t dr) {
    if (dr == -2 && (df == 1 || df == -1)) return df > 0 ? 8 : 9;
    if (df != 0 && dr != 0 && df != dr && df != -dr) return -1;
    if (df == 0 && dr == 0) return -1;
    if (dr < 0) return df == 0 ? 0 : df > 0 ? 1 : 2;
    if (dr == 0) return df > 0 ? 3 : 4;
    return df == 0 ? 5 : df > 0 ? 6 : 7;
}

/* Step (df, dr) of each board direction in the view. */
static const int8_t DIR_DF[10] = {0, 1, -1, 1, -1, 0, 1, -1, 1, -1};
static const int8_t DIR_DR[10] = {-1, -1, -1, 0, 0, 1, 1, 1, -2, -2};

int32_t encode_move_label(const pos_t *pos, move_t m) {
    if (!move_is_ok(m)) return -1;
    const bool flip = pos->side == COLOR_WHITE;
    sq_t to = move_to(m);
    if (to >= SQ_NB) return -1;
    sq_t vto = flip ? sq_flip(to) : to;
    if (move_is_drop(m)) {
        piece_type_t pt = move_drop_pt(m);
        if (pt < PT_PAWN || pt > PT_GOLD) return -1;
        return (ENC_DIR_DROP + pt - PT_PAWN) * SQ_NB + vto;
    }
    sq_t from = move_from(m);
    if (from >= SQ_NB) return -1;
    sq_t vfrom = flip ? sq_flip(from) : from;
    int32_t d = dir_of(sq_file(vto) - sq_file(vfrom), sq_rank(vto) - sq_rank(vfrom));
    if (d < 0) return -1;
    if (move_is_promote(m)) d += ENC_DIR_PROMOTE;
    return d * SQ_NB + vto;
}

move_t encode_label_move(const pos_t *pos, int32_t label) {
    if (label < 0 || label >= ENC_LABEL_NB) return MOVE_NONE;
    const bool flip = pos->side == COLOR_WHITE;
    int32_t d = label / SQ_NB;
    sq_t vto = label % SQ_NB;
    sq_t to = flip ? sq_flip(vto) : vto;
    move_t m = MOVE_NONE;
    if (d >= ENC_DIR_DROP) {
        m = move_make_drop(PT_PAWN + d - ENC_DIR_DROP, to);
    } else {
        bool promote = d >= ENC_DIR_PROMOTE;
        if (promote) d -= ENC_DIR_PROMOTE;
        int32_t f = sq_file(vto), r = sq_rank(vto);
        const int32_t max_steps = d >= 8 ? 1 : 8;
        for (int32_t k = 0; k < max_steps; k++) {
            f -= DIR_DF[d];
            r -= DIR_DR[d];
            if (f < 0 || f > 8 || r < 0 || r > 8) return MOVE_NONE;
            sq_t from = flip ? sq_flip(sq_make(f, r)) : sq_make(f, r);
            piece_t pc = pos->board[from];
            if (pc == PIECE_NONE) continue;
            if (piece_color(pc) != pos->side) return MOVE_NONE;
            m = move_make(from, to, promote);
            break;
        }
        if (m == MOVE_NONE) return MOVE_NONE;
    }
    return pos_is_valid_move(pos, m) ? m : MOVE_NONE;
}

void encode_legal_mask_list(const pos_t *pos, const move_list_t *list, uint8_t mask[ENC_LEGAL_BYTES]) {
    memset(mask, 0, ENC_LEGAL_BYTES);
    for (int32_t i = 0; i < list->n; i++) {
        int32_t l = encode_move_label(pos, list->moves[i]);
        if (l >= 0) mask[l >> 3] |= (uint8_t)(1u << (l & 7));
    }
}

void encode_legal_mask(const pos_t *pos, uint8_t mask[ENC_LEGAL_BYTES]) {
    move_list_t list;
    movegen_legal(pos, &list);
    encode_legal_mask_list(pos, &list, mask);
}
