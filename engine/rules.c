/* rules.c - repetition verdicts, declaration, legal-move existence, status.
 *
 * Owns: everything declared in rules.h.
 * Does not own: the per-ply history (position.c), move lists (movegen.c),
 * the in-check "mated" test (mate1.c).
 */
#include "engine/rules.h"

#include <string.h>

#include "engine/mate1.h"
#include "engine/movegen.h"

/* ---- repetition ---------------------------------------------------------------- */
/* Verdict on the span from hist[i0] (same position, same side to move as now)
 * to the current state: who checked with every move in between? */
static rules_rep_t cycle_verdict(const pos_t *pos, int32_t i0) {
    const int32_t n = pos->hist_n;
    bool them_always = true, us_always = true;
    /* hist[j] with j = n, n-2, ... was reached by the opponent's move: the
     * side to move (us) was in check there when that move checked. */
    for (int32_t j = n; j > i0 && them_always; j -= 2)
        if (bb_is_empty(pos->hist[j].checkers)) them_always = false;
    for (int32_t j = n - 1; j > i0 && us_always; j -= 2)
        if (bb_is_empty(pos->hist[j].checkers)) us_always = false;
    if (them_always && !us_always) return RULES_REP_WIN;
    if (us_always && !them_always) return RULES_REP_LOSS;
    return RULES_REP_DRAW;
}

rules_rep_t rules_repetition(const pos_t *pos, int32_t *plies_back) {
    const int32_t n = pos->hist_n;
    const uint64_t key = pos->hist[n].key;
    int32_t seen = 0;
    if (plies_back) *plies_back = 0;
    for (int32_t i = n - 4; i >= 0; i -= 2) {
        if (pos->hist[i].key != key) continue;
        if (++seen == 3) {
            if (plies_back) *plies_back = n - i;
            return cycle_verdict(pos, i);
        }
    }
    return RULES_REP_NONE;
}

rules_rep_t rules_repetition_first(const pos_t *pos, int32_t max_plies_back, bool superior, int32_t *plies_back) {
    const int32_t n = pos->hist_n;
    const pos_state_t *cur = &pos->hist[n];
    const color_t us = pos->side;
    int32_t lo = max_plies_back < 0 || max_plies_back > n ? 0 : n - max_plies_back;
    if (plies_back) *plies_back = 0;
    /* The same position needs at least 4 plies to come back. */
    for (int32_t i = n - 4; i >= lo; i -= 2) {
        const pos_state_t *st = &pos->hist[i];
        if (st->key == cur->key) {
            if (plies_back) *plies_back = n - i;
            return cycle_verdict(pos, i);
        }
        if (superior && st->board_key == cur->board_key) {
            if (hand_is_superior_or_equal(cur->hand[us], st->hand[us])) {
                if (plies_back) *plies_back = n - i;
                return RULES_REP_SUPERIOR;
            }
            if (hand_is_superior_or_equal(st->hand[us], cur->hand[us])) {
                if (plies_back) *plies_back = n - i;
                return RULES_REP_INFERIOR;
            }
        }
    }
    return RULES_REP_NONE;
}

const char *rules_rep_name(rules_rep_t r) {
    static const char *const NAMES[] = {"none", "draw", "win", "loss", "superior", "inferior"};
    return (unsigned)r < sizeof NAMES / sizeof NAMES[0] ? NAMES[r] : "?";
}

/* ---- declaration ------------------------------------------------------------------ */
int32_t rules_declaration_points(const pos_t *pos, color_t c) {
    bb_t camp = bb_andnot(bb_and(pos->by_color[c], bb_zone(c)), pos->bb[PT_KING]);
    bb_t big = bb_and(camp, bb_or(pos->bb[POS_BB_BISHOP_HORSE], pos->bb[POS_BB_ROOK_DRAGON]));
    hand_t h = pos->hand[c];
    int32_t nbig = bb_popcount(big), nsmall = bb_popcount(camp) - nbig;
    return 5 * (nbig + hand_count(h, PT_BISHOP) + hand_count(h, PT_ROOK)) + nsmall + hand_count(h, PT_PAWN) +
           hand_count(h, PT_LANCE) + hand_count(h, PT_KNIGHT) + hand_count(h, PT_SILVER) + hand_count(h, PT_GOLD);
}

bool rules_can_declare_by(const pos_t *pos, rules_declare_t rule) {
    if (rule != RULES_DECLARE_CSA27 && rule != RULES_DECLARE_CSA24) return false;
    const color_t us = pos->side;
    const bb_t zone = bb_zone(us);
    if (!bb_test(zone, pos->king_sq[us])) return false;           /* (b) */
    if (pos_in_check(pos)) return false;                          /* (e) */
    if (bb_popcount(bb_and(pos->by_color[us], zone)) < 11) return false; /* (d): 10 + the king */
    const int32_t need = rule == RULES_DECLARE_CSA24 ? 31 : us == COLOR_BLACK ? 28 : 27;
    return rules_declaration_points(pos, us) >= need; /* (c) */
}

bool rules_can_declare(const pos_t *pos) { return rules_can_declare_by(pos, RULES_DECLARE_CSA27); }

/* ---- legal moves ------------------------------------------------------------------- */
bool rules_has_legal_move(const pos_t *pos) {
    if (pos_in_check(pos)) return !mate1_is_mated(pos);
    const color_t us = pos->side, them = color_flip(us);
    const sq_t ksq = pos->king_sq[us];
    const bb_t occ = pos->bb[POS_BB_OCC];
    /* A king step to a safe square. */
    bb_t t = bb_andnot(bb_king_attacks(ksq), pos->by_color[us]);
    bb_t occ_wo_k = bb_xor(occ, bb_sq_tab[ksq]);
    while (bb_nonzero(t))
        if (!pos_is_attacked(pos, them, bb_pop_lsb(&t), occ_wo_k)) return true;
    /* Not in check, a silver, gold, bishop or rook drop on any empty square is legal. */
    const hand_t h = pos->hand[us];
    if ((h & (HAND_MASK[PT_SILVER] | HAND_MASK[PT_GOLD] | HAND_MASK[PT_BISHOP] | HAND_MASK[PT_ROOK])) &&
        bb_nonzero(bb_not(occ)))
        return true;
    /* Not in check, any other piece that can step anywhere has a legal move
     * (promoting where it must), unless pinned: then only along the pin. */
    const bb_t own = pos->by_color[us];
    const bb_t pinned = bb_and(pos_blockers(pos, us, NULL), own);
    for (bb_t b = bb_andnot(own, bb_sq_tab[ksq]); bb_nonzero(b);) {
        sq_t from = bb_pop_lsb(&b);
        bb_t to = bb_andnot(bb_attacks(pos->board[from], from, occ), own);
        if (bb_test(pinned, from)) to = bb_and(to, bb_line(ksq, from));
        if (bb_nonzero(to)) return true;
    }
    return movegen_count_legal(pos) > 0;
}

/* ---- status -------------------------------------------------------------------------- */
static const char *const END_NAMES[RULES_END_NB] = {
    "ongoing", "checkmate", "sennichite", "perpetual_check", "declaration", "max_ply", "resign", "illegal_move", "time"};

const char *rules_end_name(rules_end_t e) { return (unsigned)e < RULES_END_NB ? END_NAMES[e] : "?"; }

rules_end_t rules_end_from_name(const char *name) {
    if (!name) return RULES_END_NB;
    for (int32_t i = 0; i < RULES_END_NB; i++)
        if (strcmp(name, END_NAMES[i]) == 0) return (rules_end_t)i;
    return RULES_END_NB;
}

rules_status_t rules_status_with_count(const pos_t *pos, int32_t max_ply, int32_t n_legal) {
    const color_t us = pos->side, them = color_flip(us);
    rules_status_t s = {RULES_END_NONE, COLOR_NB};
    bool has_move = n_legal >= 0 ? n_legal > 0 : rules_has_legal_move(pos);
    if (!has_move) {
        s.end = RULES_END_CHECKMATE;
        s.winner = them;
        return s;
    }
    switch (rules_repetition(pos, NULL)) {
    case RULES_REP_NONE: break;
    case RULES_REP_WIN:
        s.end = RULES_END_PERPETUAL_CHECK;
        s.winner = us;
        return s;
    case RULES_REP_LOSS:
        s.end = RULES_END_PERPETUAL_CHECK;
        s.winner = them;
        return s;
    default: s.end = RULES_END_SENNICHITE; return s;
    }
    if (max_ply > 0 && pos->game_ply - 1 >= max_ply) {
        s.end = RULES_END_MAX_PLY;
        return s;
    }
    if (rules_can_declare(pos)) {
        s.end = RULES_END_DECLARATION;
        s.winner = us;
    }
    return s;
}

rules_status_t rules_status(const pos_t *pos, int32_t max_ply) { return rules_status_with_count(pos, max_ply, -1); }
