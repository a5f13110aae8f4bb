/* mate1.c - mate in one.
 *
 * Owns: mate1_find, mate1_find_reference, mate1_is_mated.
 * Does not own: move generation (movegen.c), make/unmake (position.c).
 *
 * mate1_find generates only the checking moves, straight from bitboards:
 * for each piece kind the squares from which it would attack the enemy king
 * ("check squares"), intersected with where our pieces can go or drop, plus
 * every move of a piece that uncovers one of our sliders (discovered check).
 * Each candidate is made, mate1_is_mated asks whether the defender has any
 * legal reply (king step, capture of a single checker, interposition by a
 * move or a drop, each returning at the first one found), and it is taken
 * back. Distant slider drops are skipped when the defender holds a silver,
 * gold, bishop or rook, which could always be dropped in between.
 * In check, the evasions from movegen are tried instead (rare).
 */
#include "engine/mate1.h"

#include <stddef.h>

#include "engine/movegen.h"

/* ---- mated? ------------------------------------------------------------------ */
bool mate1_is_mated(const pos_t *pos) {
    const bb_t checkers = pos_checkers(pos);
    if (bb_is_empty(checkers)) return false;
    const color_t us = pos->side, them = color_flip(us);
    const sq_t ksq = pos->king_sq[us];
    const bb_t occ = pos->bb[POS_BB_OCC], own = pos->by_color[us];

    /* King steps (including capturing the checker), king lifted off the board. */
    bb_t t = bb_andnot(bb_king_attacks(ksq), own);
    const bb_t occ_wo_k = bb_xor(occ, bb_sq_tab[ksq]);
    while (bb_nonzero(t))
        if (!pos_is_attacked(pos, them, bb_pop_lsb(&t), occ_wo_k)) return false;
    if (bb_more_than_one(checkers)) return true;

    const sq_t ch = bb_lsb(checkers);
    const bb_t pinned = bb_and(pos_blockers(pos, us, NULL), own);
    /* Capture the checker with another piece. */
    for (bb_t a = bb_andnot(pos_attackers_to(pos, us, ch, occ), bb_sq_tab[ksq]); bb_nonzero(a);) {
        sq_t from = bb_pop_lsb(&a);
        if (!bb_test(pinned, from) || bb_aligned(ksq, from, ch)) return false;
    }
    const bb_t between = bb_between(ksq, ch);
    if (bb_is_empty(between)) return true;

    /* Interpose: a drop, or a piece moving in. */
    const hand_t h = pos->hand[us];
    if (h & (HAND_MASK[PT_SILVER] | HAND_MASK[PT_GOLD] | HAND_MASK[PT_BISHOP] | HAND_MASK[PT_ROOK])) return false;
    const bool lance = hand_has(h, PT_LANCE), knight = hand_has(h, PT_KNIGHT), pawn = hand_has(h, PT_PAWN);
    const bb_t pawn_files = pawn ? bb_file_fill(pos_pieces(pos, us, PT_PAWN)) : bb_zero();
    for (bb_t b = between; bb_nonzero(b);) {
        sq_t sq = bb_pop_lsb(&b);
        int32_t rr = rank_relative(us, sq_rank(sq));
        if (lance && rr >= 1) return false;
        if (knight && rr >= 2) return false;
        if (pawn && rr >= 1 && !bb_test(pawn_files, sq)) {
            /* A pawn dropped in front of the attacker's king must not mate it. */
            if (!bb_test(bb_pawn_attacks(them, pos->king_sq[them]), sq) || !pos_is_pawn_drop_mate(pos, sq))
                return false;
        }
        for (bb_t m = bb_andnot(pos_attackers_to(pos, us, sq, occ), bb_sq_tab[ksq]); bb_nonzero(m);) {
            sq_t from = bb_pop_lsb(&m);
            if (!bb_test(pinned, from) || bb_aligned(ksq, from, sq)) return false;
        }
    }
    return true;
}

/* ---- reference ---------------------------------------------------------------- */
move_t mate1_find_reference(pos_t *pos) {
    move_list_t list;
    movegen_legal(pos, &list);
    for (int32_t i = 0; i < list.n; i++) {
        move_t m = list.moves[i];
        if (move_is_drop(m) && move_drop_pt(m) == PT_PAWN) continue;
        if (!pos_gives_check(pos, m)) continue;
        pos_do_move(pos, m);
        bool mate = movegen_count_legal(pos) == 0;
        pos_undo_move(pos);
        if (mate) return m;
    }
    return MOVE_NONE;
}

/* ---- fast finder --------------------------------------------------------------- */
/* Makes m, tests for mate, takes it back. */
static inline bool try_move(pos_t *pos, move_t m) {
    pos_do_move(pos, m);
    bool mate = mate1_is_mated(pos);
    pos_undo_move(pos);
    return mate;
}

static move_t find_in_check(pos_t *pos) {
    move_list_t list;
    movegen_legal(pos, &list);
    for (int32_t i = 0; i < list.n; i++) {
        move_t m = list.moves[i];
        if (move_is_drop(m) && move_drop_pt(m) == PT_PAWN) continue;
        if (pos_gives_check(pos, m) && try_move(pos, m)) return m;
    }
    return MOVE_NONE;
}

/* Squares a piece of colour c and type pt on sq attacks, occupancy occ. */
static inline bb_t attacks_of(color_t c, piece_type_t pt, sq_t sq, bb_t occ) {
    switch (pt) {
    case PT_LANCE: return bb_lance_attacks(c, sq, occ);
    case PT_BISHOP: return bb_bishop_attacks(sq, occ);
    case PT_ROOK: return bb_rook_attacks(sq, occ);
    case PT_HORSE: return bb_horse_attacks(sq, occ);
    case PT_DRAGON: return bb_dragon_attacks(sq, occ);
    default: return bb_step_tab[c][pt][sq];
    }
}

/* The 5x5 box of squares around sq (clipped at the edges). */
static inline bb_t box5(sq_t sq) {
    int32_t f = sq_file(sq), r = sq_rank(sq);
    bb_t files = bb_zero(), ranks = bb_zero();
    for (int32_t d = -2; d <= 2; d++) {
        if (f + d >= 0 && f + d < FILE_NB) files = bb_or(files, bb_file_tab[f + d]);
        if (r + d >= 0 && r + d < RANK_NB) ranks = bb_or(ranks, bb_rank_tab[r + d]);
    }
    return bb_and(files, ranks);
}

move_t mate1_find(pos_t *pos) {
    if (pos_in_check(pos)) return find_in_check(pos);
    const color_t us = pos->side, them = color_flip(us);
    const sq_t ek = pos->king_sq[them], ok = pos->king_sq[us];
    const bb_t occ = pos->bb[POS_BB_OCC], own = pos->by_color[us], empty = bb_not(occ);
    const bb_t zone = bb_zone(us), last1 = bb_forward_ranks_tab[us][0], last2 = bb_forward_ranks_tab[us][1];
    const bb_t occ_k = bb_xor(occ, bb_sq_tab[ek]); /* their king lifted: x-rays through it count */

    /* Squares from which a piece of ours of each type would attack their king. */
    bb_t chk[PT_NB];
    chk[PT_PAWN] = bb_pawn_attacks(them, ek);
    chk[PT_LANCE] = bb_lance_attacks(them, ek, occ);
    chk[PT_KNIGHT] = bb_knight_attacks(them, ek);
    chk[PT_SILVER] = bb_silver_attacks(them, ek);
    chk[PT_GOLD] = bb_gold_attacks(them, ek);
    chk[PT_BISHOP] = bb_bishop_attacks(ek, occ);
    chk[PT_ROOK] = bb_rook_attacks(ek, occ);
    chk[PT_KING] = bb_zero();
    chk[PT_PRO_PAWN] = chk[PT_PRO_LANCE] = chk[PT_PRO_KNIGHT] = chk[PT_PRO_SILVER] = chk[PT_GOLD];
    const bb_t ek_near = bb_king_attacks(ek);
    chk[PT_HORSE] = bb_or(chk[PT_BISHOP], ek_near);
    chk[PT_DRAGON] = bb_or(chk[PT_ROOK], ek_near);

    /* Escape squares of their king that none of our pieces attacks now (with
     * the king lifted). A move can take such a square from the king only by
     * the moved piece attacking it from its destination, or by opening a
     * line through its origin; if neither can happen the move cannot mate,
     * and it is skipped without being made. Worked out at the first candidate. */
    bool have_free = false;
    bb_t free = bb_zero();
#define NEED_FREE()                                                                                                    \
    do {                                                                                                               \
        if (!have_free) {                                                                                              \
            have_free = true;                                                                                          \
            for (bb_t e = bb_andnot(ek_near, pos->by_color[them]); bb_nonzero(e);) {                             \
                sq_t sq = bb_pop_lsb(&e);                                                                            \
                if (!pos_is_attacked(pos, us, sq, occ_k)) free = bb_or(free, bb_sq_tab[sq]);                          \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

    /* Drops (never pawns: a mating pawn drop is illegal). */
    const hand_t h = pos->hand[us];
    if (h & HAND_EXCEPT_PAWN_MASK) {
        /* Distant slider drops can be answered by a drop in between when the
         * defender holds a piece that drops anywhere. */
        const hand_t eh = pos->hand[them];
        const bool block =
            (eh & (HAND_MASK[PT_SILVER] | HAND_MASK[PT_GOLD] | HAND_MASK[PT_BISHOP] | HAND_MASK[PT_ROOK])) != 0;
        const bb_t far_ok = block ? ek_near : bb_full();
        static const piece_type_t KINDS[6] = {PT_ROOK, PT_BISHOP, PT_GOLD, PT_SILVER, PT_KNIGHT, PT_LANCE};
        for (int32_t k = 0; k < 6; k++) {
            piece_type_t pt = KINDS[k];
            if (!hand_has(h, pt)) continue;
            bb_t t = bb_and(chk[pt], empty);
            if (pt == PT_ROOK || pt == PT_BISHOP || pt == PT_LANCE) t = bb_and(t, far_ok);
            if (pt == PT_LANCE) t = bb_andnot(t, last1);
            if (pt == PT_KNIGHT) t = bb_andnot(t, last2);
            if (bb_is_empty(t)) continue;
            NEED_FREE();
            while (bb_nonzero(t)) {
                sq_t to = bb_pop_lsb(&t);
                /* A dropped piece opens no line: it must cover every free square. */
                if (bb_nonzero(bb_andnot(free, attacks_of(us, pt, to, occ_k)))) continue;
                move_t m = move_make_drop(pt, to);
                if (try_move(pos, m)) return m;
            }
        }
    }

    /* Board moves. A promoted pawn, bishop or rook attacks a superset of
     * its plain squares, so it leaves the defender a subset of replies and
     * mates whenever the plain move does - except through one reply whose
     * legality depends on our pieces: a pawn dropped in between that checks
     * our king is illegal when it mates (uchifuzume), and a stronger piece
     * may make it legal. Try plain moves too when that can happen: the
     * defender holds a pawn and the empty square in front of our king lies
     * on a line through theirs. */
    const bb_t our_front = bb_and(bb_pawn_attacks(us, ok), empty);
    const bool plain_too = hand_has(pos->hand[them], PT_PAWN) && bb_nonzero(our_front) &&
                           bb_dir_tab[ek][bb_lsb(our_front)] != 0;
    const bb_t pinned = bb_and(pos_blockers(pos, us, NULL), own);
    const bb_t disc = bb_and(pos_blockers(pos, them, NULL), own); /* our pieces hiding a check */
    /* Pieces that can give check: step pieces near their king (a step piece
     * checks from within one square of it, so starts within two), long-range
     * and jumping pieces anywhere, and the pieces hiding a discovered check. */
    const bb_t far_movers = bb_or(bb_or(pos->bb[PT_LANCE], pos->bb[PT_KNIGHT]),
                                      bb_or(pos->bb[POS_BB_BISHOP_HORSE], pos->bb[POS_BB_ROOK_DRAGON]));
    const bb_t movers = bb_and(own, bb_or(bb_or(box5(ek), far_movers), disc));
    for (bb_t b = movers; bb_nonzero(b);) {
        const sq_t from = bb_pop_lsb(&b);
        const piece_t pc = pos->board[from];
        const piece_type_t pt = piece_type(pc);
        bb_t moves = bb_andnot(attacks_of(us, pt, from, occ), own);
        if (pt == PT_KING) {
            /* Only a discovered check; the destination must be safe. */
            if (!bb_test(disc, from)) continue;
            moves = bb_andnot(moves, bb_line(ek, from));
            const bb_t occ_wo_k = bb_xor(occ, bb_sq_tab[ok]);
            while (bb_nonzero(moves)) {
                sq_t to = bb_pop_lsb(&moves);
                if (pos_is_attacked(pos, them, to, occ_wo_k)) continue;
                move_t m = move_make(from, to, false);
                if (try_move(pos, m)) return m;
            }
            continue;
        }
        if (bb_test(pinned, from)) moves = bb_and(moves, bb_line(ok, from));
        if (bb_is_empty(moves)) continue;
        const bool discovers = bb_test(disc, from);
        const bb_t off_line = discovers ? bb_andnot(moves, bb_line(ek, from)) : bb_zero();
        /* Promoting moves. */
        bb_t promo = bb_zero(), plain;
        if (pt_can_promote(pt)) {
            promo = bb_test(zone, from) ? moves : bb_and(moves, zone);
            promo = bb_and(promo, bb_or(chk[pt_promote(pt)], off_line));
        }
        /* Plain moves: forbidden where the piece could never move again; a
         * pawn, bishop or rook that may promote is only tried promoting. */
        plain = bb_and(moves, bb_or(chk[pt], off_line));
        if (pt == PT_PAWN || pt == PT_LANCE)
            plain = bb_andnot(plain, last1);
        else if (pt == PT_KNIGHT)
            plain = bb_andnot(plain, last2);
        if (!plain_too && (pt == PT_PAWN || pt == PT_BISHOP || pt == PT_ROOK)) {
            bb_t can_promote = bb_test(zone, from) ? moves : bb_and(moves, zone);
            plain = bb_andnot(plain, can_promote);
        }
        if (bb_is_empty(promo) && bb_is_empty(plain)) continue;
        NEED_FREE();
        /* Free squares the move might still take away through a line opened at its origin. */
        const bb_t free_here = bb_andnot(free, bb_or(bb_rook_pseudo_tab[from], bb_bishop_pseudo_tab[from]));
        const bb_t occ_m = bb_xor(occ_k, bb_sq_tab[from]);
        while (bb_nonzero(promo)) {
            sq_t to = bb_pop_lsb(&promo);
            if (bb_nonzero(bb_andnot(free_here, attacks_of(us, pt_promote(pt), to, occ_m)))) continue;
            move_t m = move_make(from, to, true);
            if (try_move(pos, m)) return m;
        }
        while (bb_nonzero(plain)) {
            sq_t to = bb_pop_lsb(&plain);
            if (bb_nonzero(bb_andnot(free_here, attacks_of(us, pt, to, occ_m)))) continue;
            move_t m = move_make(from, to, false);
            if (try_move(pos, m)) return m;
        }
    }
#undef NEED_FREE
    return MOVE_NONE;
}
