/* movegen.c - legal move generation and counting, pseudo-legal generation, perft.
 *
 * Owns: movegen_legal, movegen_count_legal, movegen_pseudo, movegen_perft.
 * Does not own: make/unmake and single-move legality (position.c).
 *
 * Legal generation works from the checkers and the pinned pieces of the
 * side to move: not in check, any piece may go to any square not holding an
 * own piece; in single check, only to the checker or between it and the king
 * (drops: between only); in double check, only the king moves. A pinned
 * piece stays on the line through its king. King moves are tested one by one
 * with the king removed from the occupancy. Counting uses the same targets
 * and counts promotion choices with popcounts instead of writing moves.
 */
#include "engine/movegen.h"

#include "compat/bits.h"
#include "compat/compat.h"

/* How a piece's moves split into promoting / non-promoting ones. */
enum {
    KIND_NONE,     /* never promotes: gold-likes, king, horse, dragon */
    KIND_PAWN,     /* pawn, lance: must promote on the last rank, may in the rest of the zone */
    KIND_KNIGHT,   /* must promote on the last two ranks, may on the third */
    KIND_FROMZONE, /* silver/bishop/rook standing in the zone: every move may promote */
    KIND_TOZONE    /* silver/bishop/rook outside the zone: moves into the zone may promote */
};

typedef struct {
    bb_t last1, last2, rank3, zone, pawn_opt; /* relative to the side to move */
} movegen_masks_t;

static KOMA_FORCE_INLINE movegen_masks_t masks_for(color_t us) {
    movegen_masks_t m;
    m.last1 = bb_forward_ranks_tab[us][0];
    m.last2 = bb_forward_ranks_tab[us][1];
    m.zone = bb_forward_ranks_tab[us][2];
    m.rank3 = bb_andnot(m.zone, m.last2);
    m.pawn_opt = bb_andnot(m.zone, m.last1);
    return m;
}

static KOMA_FORCE_INLINE move_t *emit_plain(move_t *p, sq_t from, bb_t t) {
    while (bb_nonzero(t)) *p++ = move_make(from, bb_pop_lsb(&t), false);
    return p;
}
static KOMA_FORCE_INLINE move_t *emit_promo(move_t *p, sq_t from, bb_t t) {
    while (bb_nonzero(t)) *p++ = move_make(from, bb_pop_lsb(&t), true);
    return p;
}
static KOMA_FORCE_INLINE move_t *emit_both(move_t *p, sq_t from, bb_t t) {
    while (bb_nonzero(t)) {
        sq_t to = bb_pop_lsb(&t);
        *p++ = move_make(from, to, true);
        *p++ = move_make(from, to, false);
    }
    return p;
}

static KOMA_FORCE_INLINE move_t *emit_kind(move_t *p, sq_t from, bb_t t, int kind, const movegen_masks_t *mk) {
    switch (kind) {
    case KIND_NONE: return emit_plain(p, from, t);
    case KIND_PAWN:
        p = emit_promo(p, from, bb_and(t, mk->last1));
        p = emit_both(p, from, bb_and(t, mk->pawn_opt));
        return emit_plain(p, from, bb_andnot(t, mk->zone));
    case KIND_KNIGHT:
        p = emit_promo(p, from, bb_and(t, mk->last2));
        p = emit_both(p, from, bb_and(t, mk->rank3));
        return emit_plain(p, from, bb_andnot(t, mk->zone));
    case KIND_FROMZONE: return emit_both(p, from, t);
    default: p = emit_both(p, from, bb_and(t, mk->zone)); return emit_plain(p, from, bb_andnot(t, mk->zone));
    }
}

static KOMA_FORCE_INLINE int32_t count_kind(bb_t t, int kind, const movegen_masks_t *mk) {
    switch (kind) {
    case KIND_NONE: return bb_popcount(t);
    case KIND_PAWN: return bb_popcount(t) + bb_popcount(bb_and(t, mk->pawn_opt));
    case KIND_KNIGHT: return bb_popcount(t) + bb_popcount(bb_and(t, mk->rank3));
    case KIND_FROMZONE: return 2 * bb_popcount(t);
    default: return bb_popcount(t) + bb_popcount(bb_and(t, mk->zone));
    }
}

/* King moves: each target tested against their pieces, sets hoisted out of
 * the loop. Moves written at p (COUNT false) or counted in *n (COUNT true);
 * returns p past the moves written. */
static KOMA_FORCE_INLINE move_t *gen_king(const pos_t *pos, move_t *p, int32_t *n, const bool COUNT) {
    const color_t us = pos->side, them = color_flip(us);
    const sq_t ksq = pos->king_sq[us];
    const bb_t occ = pos->bb[POS_BB_OCC];
    const bb_t own = pos->by_color[us];
    bb_t t = bb_andnot(bb_king_attacks(ksq), own);
    if (bb_nonzero(t)) {
        const bb_t occ_wo_k = bb_xor(occ, bb_sq_tab[ksq]);
        const bb_t theirs = pos->by_color[them];
        const bb_t e_pawn = bb_and(pos->bb[PT_PAWN], theirs), e_knight = bb_and(pos->bb[PT_KNIGHT], theirs);
        const bb_t e_silver = bb_and(pos->bb[PT_SILVER], theirs);
        const bb_t e_gold = bb_and(pos->bb[POS_BB_GOLDS], theirs), e_hdk = bb_and(pos->bb[POS_BB_HDK], theirs);
        const bb_t e_lance = bb_and(pos->bb[PT_LANCE], theirs);
        const bb_t e_bh = bb_and(pos->bb[POS_BB_BISHOP_HORSE], theirs);
        const bb_t e_rd = bb_and(pos->bb[POS_BB_ROOK_DRAGON], theirs);
        while (bb_nonzero(t)) {
            sq_t to = bb_pop_lsb(&t);
            /* Their X attacks `to` iff our X standing on `to` would attack it. */
            bb_t a = bb_and(bb_step_tab[us][PT_PAWN][to], e_pawn);
            a = bb_or(a, bb_and(bb_step_tab[us][PT_KNIGHT][to], e_knight));
            a = bb_or(a, bb_and(bb_step_tab[us][PT_SILVER][to], e_silver));
            a = bb_or(a, bb_and(bb_step_tab[us][PT_GOLD][to], e_gold));
            a = bb_or(a, bb_and(bb_king_attacks(to), e_hdk));
            if (bb_nonzero(a)) continue;
            bb_t sl = bb_and(bb_lance_pseudo_tab[us][to], e_lance);
            sl = bb_or(sl, bb_and(bb_bishop_pseudo_tab[to], e_bh));
            sl = bb_or(sl, bb_and(bb_rook_pseudo_tab[to], e_rd));
            bool attacked = false;
            while (bb_nonzero(sl)) {
                sq_t s = bb_pop_lsb(&sl);
                if (!bb_intersects(bb_between(to, s), occ_wo_k)) {
                    attacked = true;
                    break;
                }
            }
            if (attacked) continue;
            if (COUNT) (*n)++;
            else *p++ = move_make(ksq, to, false);
        }
    }
    return p;
}

/* Drops on drop_target (every empty square; between king and checker in
 * check): no pawn on a file that has ours, nor one that mates; no piece where
 * it could never move. As gen_king for p, n and COUNT. */
static KOMA_FORCE_INLINE move_t *gen_drops(const pos_t *pos, bb_t drop_target, const movegen_masks_t *mk, move_t *p,
                                           int32_t *n, const bool COUNT) {
    const color_t us = pos->side, them = color_flip(us);
    const hand_t hand = pos->hand[us];
    if (hand != 0 && bb_nonzero(drop_target)) {
        if (hand_has(hand, PT_PAWN)) {
            bb_t t = bb_andnot(drop_target, bb_or(mk->last1, bb_file_fill(pos_pieces(pos, us, PT_PAWN))));
            /* A pawn dropped in front of their king gives check: it must not mate. */
            bb_t front = bb_and(t, bb_pawn_attacks(them, pos->king_sq[them]));
            if (bb_nonzero(front) && pos_is_pawn_drop_mate(pos, bb_lsb(front))) t = bb_xor(t, front);
            if (COUNT) *n += bb_popcount(t);
            else
                while (bb_nonzero(t)) *p++ = move_make_drop(PT_PAWN, bb_pop_lsb(&t));
        }
        if (hand & HAND_EXCEPT_PAWN_MASK) {
            if (COUNT) {
                int32_t all = bb_popcount(drop_target);
                if (hand_has(hand, PT_LANCE)) *n += bb_popcount(bb_andnot(drop_target, mk->last1));
                if (hand_has(hand, PT_KNIGHT)) *n += bb_popcount(bb_andnot(drop_target, mk->last2));
                int32_t k = hand_has(hand, PT_SILVER) + hand_has(hand, PT_GOLD) + hand_has(hand, PT_BISHOP) +
                            hand_has(hand, PT_ROOK);
                *n += k * all;
            } else {
                piece_type_t kinds[4];
                int nk = 0;
                if (hand_has(hand, PT_SILVER)) kinds[nk++] = PT_SILVER;
                if (hand_has(hand, PT_GOLD)) kinds[nk++] = PT_GOLD;
                if (hand_has(hand, PT_BISHOP)) kinds[nk++] = PT_BISHOP;
                if (hand_has(hand, PT_ROOK)) kinds[nk++] = PT_ROOK;
                const bool lance = hand_has(hand, PT_LANCE), knight = hand_has(hand, PT_KNIGHT);
                for (bb_t t = drop_target; bb_nonzero(t);) {
                    sq_t to = bb_pop_lsb(&t);
                    for (int i = 0; i < nk; i++) *p++ = move_make_drop(kinds[i], to);
                    if (lance && !bb_test(mk->last1, to)) *p++ = move_make_drop(PT_LANCE, to);
                    if (knight && !bb_test(mk->last2, to)) *p++ = move_make_drop(PT_KNIGHT, to);
                }
            }
        }
    }
    return p;
}

/* The shared body of generation (COUNT false, moves written to out) and
 * counting (COUNT true). Returns the number of moves. */
static KOMA_FORCE_INLINE int32_t gen_legal(const pos_t *pos, move_t *out, const bool COUNT) {
    const color_t us = pos->side;
    const sq_t ksq = pos->king_sq[us];
    const bb_t occ = pos->bb[POS_BB_OCC];
    const bb_t own = pos->by_color[us];
    const bb_t checkers = pos_checkers(pos);
    const movegen_masks_t mk = masks_for(us);
    move_t *p = out;
    int32_t n = 0;

#define ADD(from, t, kind)                                                                                             \
    do {                                                                                                               \
        if (COUNT) n += count_kind((t), (kind), &mk);                                                                  \
        else p = emit_kind(p, (from), (t), (kind), &mk);                                                               \
    } while (0)

    p = gen_king(pos, p, &n, COUNT);

    bb_t target, drop_target;
    if (bb_is_empty(checkers)) {
        target = bb_not(own);
        drop_target = bb_not(occ);
    } else {
        if (bb_more_than_one(checkers)) return COUNT ? n : (int32_t)(p - out);
        sq_t ch = bb_lsb(checkers);
        drop_target = bb_between(ksq, ch);
        target = bb_or(drop_target, checkers);
    }

    const bb_t pinned = bb_and(pos_blockers(pos, us, 0), own);
    const bool any_pinned = bb_nonzero(pinned);

    /* Pawns: unpinned ones all at once, pinned ones one by one. */
    {
        bb_t pawns = pos_pieces(pos, us, PT_PAWN);
        bb_t free_pawns = bb_andnot(pawns, pinned);
        bb_t t = bb_and(bb_pawn_set_attacks(us, free_pawns), target);
        if (COUNT) {
            n += count_kind(t, KIND_PAWN, &mk);
        } else {
            const int delta = us == COLOR_BLACK ? 1 : -1;
            bb_t t1 = bb_and(t, mk.last1), t2 = bb_and(t, mk.pawn_opt), t3 = bb_andnot(t, mk.zone);
            while (bb_nonzero(t1)) {
                sq_t to = bb_pop_lsb(&t1);
                *p++ = move_make(to + delta, to, true);
            }
            while (bb_nonzero(t2)) {
                sq_t to = bb_pop_lsb(&t2);
                *p++ = move_make(to + delta, to, true);
                *p++ = move_make(to + delta, to, false);
            }
            while (bb_nonzero(t3)) {
                sq_t to = bb_pop_lsb(&t3);
                *p++ = move_make(to + delta, to, false);
            }
        }
        bb_t pp = bb_and(pawns, pinned);
        while (bb_nonzero(pp)) {
            sq_t from = bb_pop_lsb(&pp);
            bb_t tt = bb_and(bb_and(bb_pawn_attacks(us, from), target), bb_line(ksq, from));
            ADD(from, tt, KIND_PAWN);
        }
    }

    /* Lances. */
    for (bb_t b = pos_pieces(pos, us, PT_LANCE); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bb_t t = bb_and(bb_lance_attacks(us, from, occ), target);
        if (any_pinned && bb_test(pinned, from)) t = bb_and(t, bb_line(ksq, from));
        ADD(from, t, KIND_PAWN);
    }
    /* Knights: a pinned knight can never move. */
    for (bb_t b = bb_andnot(pos_pieces(pos, us, PT_KNIGHT), pinned); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bb_t t = bb_and(bb_knight_attacks(us, from), target);
        ADD(from, t, KIND_KNIGHT);
    }
    /* Silvers. */
    for (bb_t b = pos_pieces(pos, us, PT_SILVER); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bb_t t = bb_and(bb_silver_attacks(us, from), target);
        if (any_pinned && bb_test(pinned, from)) t = bb_and(t, bb_line(ksq, from));
        if (bb_test(mk.zone, from)) ADD(from, t, KIND_FROMZONE);
        else ADD(from, t, KIND_TOZONE);
    }
    /* Gold and the promoted small pieces. */
    for (bb_t b = bb_and(pos->bb[POS_BB_GOLDS], own); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bb_t t = bb_and(bb_gold_attacks(us, from), target);
        if (any_pinned && bb_test(pinned, from)) t = bb_and(t, bb_line(ksq, from));
        ADD(from, t, KIND_NONE);
    }
    /* Bishops and horses. */
    for (bb_t b = bb_and(pos->bb[POS_BB_BISHOP_HORSE], own); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bool horse = piece_type(pos->board[from]) == PT_HORSE;
        bb_t a = bb_bishop_attacks(from, occ);
        if (horse) a = bb_or(a, bb_king_attacks(from));
        bb_t t = bb_and(a, target);
        if (any_pinned && bb_test(pinned, from)) t = bb_and(t, bb_line(ksq, from));
        if (horse) ADD(from, t, KIND_NONE);
        else if (bb_test(mk.zone, from)) ADD(from, t, KIND_FROMZONE);
        else ADD(from, t, KIND_TOZONE);
    }
    /* Rooks and dragons. */
    for (bb_t b = bb_and(pos->bb[POS_BB_ROOK_DRAGON], own); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bool dragon = piece_type(pos->board[from]) == PT_DRAGON;
        bb_t a = bb_rook_attacks(from, occ);
        if (dragon) a = bb_or(a, bb_king_attacks(from));
        bb_t t = bb_and(a, target);
        if (any_pinned && bb_test(pinned, from)) t = bb_and(t, bb_line(ksq, from));
        if (dragon) ADD(from, t, KIND_NONE);
        else if (bb_test(mk.zone, from)) ADD(from, t, KIND_FROMZONE);
        else ADD(from, t, KIND_TOZONE);
    }
#undef ADD

    p = gen_drops(pos, drop_target, &mk, p, &n, COUNT);
    return COUNT ? n : (int32_t)(p - out);
}

int32_t movegen_legal(const pos_t *pos, move_list_t *list) {
    list->n = gen_legal(pos, list->moves, false);
    return list->n;
}

int32_t movegen_count_legal(const pos_t *pos) { return gen_legal(pos, NULL, true); }

int32_t movegen_pseudo(const pos_t *pos, move_list_t *list) {
    const color_t us = pos->side;
    const bb_t occ = pos->bb[POS_BB_OCC], own = pos->by_color[us];
    const movegen_masks_t mk = masks_for(us);
    move_t *p = list->moves;
    for (bb_t b = own; bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        piece_t pc = pos->board[from];
        piece_type_t pt = piece_type(pc);
        bb_t t = bb_andnot(bb_attacks(pc, from, occ), own);
        int kind = KIND_NONE;
        if (pt == PT_PAWN || pt == PT_LANCE) kind = KIND_PAWN;
        else if (pt == PT_KNIGHT) kind = KIND_KNIGHT;
        else if (pt == PT_SILVER || pt == PT_BISHOP || pt == PT_ROOK)
            kind = bb_test(mk.zone, from) ? KIND_FROMZONE : KIND_TOZONE;
        p = emit_kind(p, from, t, kind, &mk);
    }
    bb_t empty = bb_not(occ);
    for (piece_type_t pt = PT_PAWN; pt <= PT_GOLD; pt++) {
        if (!hand_has(pos->hand[us], pt)) continue;
        bb_t t = empty;
        if (pt == PT_PAWN) t = bb_andnot(t, bb_or(mk.last1, bb_file_fill(pos_pieces(pos, us, PT_PAWN))));
        if (pt == PT_LANCE) t = bb_andnot(t, mk.last1);
        if (pt == PT_KNIGHT) t = bb_andnot(t, mk.last2);
        while (bb_nonzero(t)) *p++ = move_make_drop(pt, bb_pop_lsb(&t));
    }
    list->n = (int32_t)(p - list->moves);
    KOMA_ASSERT(list->n <= MOVES_MAX);
    return list->n;
}

bool movegen_list_contains(const move_list_t *list, move_t m) {
    for (int32_t i = 0; i < list->n; i++)
        if (list->moves[i] == m) return true;
    return false;
}

uint64_t movegen_perft(pos_t *pos, int32_t depth) {
    if (depth <= 0) return 1;
    if (depth == 1) return (uint64_t)movegen_count_legal(pos);
    move_list_t list;
    movegen_legal(pos, &list);
    uint64_t total = 0;
    for (int32_t i = 0; i < list.n; i++) {
        pos_do_move(pos, list.moves[i]);
        total += movegen_perft(pos, depth - 1);
        pos_undo_move(pos);
    }
    return total;
}
