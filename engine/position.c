/* position.c - board state, Zobrist keys, make/unmake, attacks and legality.
 *
 * Owns: engine_init (tables + keys), everything declared in position.h.
 * Does not own: move lists (movegen.c), text (sfen.c).
 */
#include "engine/position.h"
#include "compat/bits.h"

#include <stdatomic.h>
#include <string.h>

#include "compat/compat.h"

const int32_t HAND_SHIFT[PT_HAND_NB] = {0, 0, 8, 12, 16, 20, 24, 28};
const uint32_t HAND_MASK[PT_HAND_NB] = {0,          0x1Fu,      0x7u << 8,  0x7u << 12,
                                        0x7u << 16, 0x3u << 20, 0x3u << 24, 0x7u << 28};
const int32_t PIECE_TOTAL[PT_HAND_NB + 1] = {0, 18, 4, 4, 4, 2, 2, 4, 2};

/* Zobrist keys. */
static uint64_t zob_psq[PIECE_NB][SQ_NB];
static uint64_t zob_hand[COLOR_NB][PT_HAND_NB];
static uint64_t zob_side;

/* Union bitboards each piece type belongs to (POS_BB_TRASH when none). */
static const uint8_t GROUP1[PT_NB] = {POS_BB_TRASH, POS_BB_TRASH,        POS_BB_TRASH,       POS_BB_TRASH,
                                      POS_BB_TRASH, POS_BB_BISHOP_HORSE, POS_BB_ROOK_DRAGON, POS_BB_GOLDS,
                                      POS_BB_HDK,   POS_BB_GOLDS,        POS_BB_GOLDS,       POS_BB_GOLDS,
                                      POS_BB_GOLDS, POS_BB_BISHOP_HORSE, POS_BB_ROOK_DRAGON};
static const uint8_t GROUP2[PT_NB] = {POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH,
                                      POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH,
                                      POS_BB_TRASH, POS_BB_TRASH, POS_BB_TRASH, POS_BB_HDK,   POS_BB_HDK};

static void init_all(void) {
    bb_init_tables();
    uint64_t seed = 0x4B6F6D615368676Full; /* fixed: keys are the same in every run */
    for (piece_t pc = 0; pc < PIECE_NB; pc++)
        for (sq_t sq = 0; sq < SQ_NB; sq++) zob_psq[pc][sq] = compat_splitmix64(&seed);
    for (sq_t sq = 0; sq < SQ_NB; sq++) zob_psq[PIECE_NONE][sq] = 0;
    for (color_t c = 0; c < COLOR_NB; c++)
        for (piece_type_t pt = 0; pt < PT_HAND_NB; pt++) zob_hand[c][pt] = pt ? compat_splitmix64(&seed) : 0;
    zob_side = compat_splitmix64(&seed);
}

void engine_init(void) {
    static atomic_int state = 0; /* 0 not started, 1 running, 2 done */
    if (atomic_load_explicit(&state, memory_order_acquire) == 2) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&state, &expected, 1)) {
        init_all();
        atomic_store_explicit(&state, 2, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&state, memory_order_acquire) != 2) compat_sleep_ms(1);
}

/* ---- piece placement ------------------------------------------------------ */
static inline void toggle_piece(pos_t *pos, piece_t pc, sq_t sq) {
    bb_t s = bb_sq_tab[sq];
    piece_type_t pt = piece_type(pc);
    pos->bb[pt] = bb_xor(pos->bb[pt], s);
    pos->bb[GROUP1[pt]] = bb_xor(pos->bb[GROUP1[pt]], s);
    pos->bb[GROUP2[pt]] = bb_xor(pos->bb[GROUP2[pt]], s);
    pos->by_color[piece_color(pc)] = bb_xor(pos->by_color[piece_color(pc)], s);
    pos->bb[POS_BB_OCC] = bb_xor(pos->bb[POS_BB_OCC], s);
}

/* Moves pc from one square to another (same piece on both). */
static inline void shift_piece(pos_t *pos, piece_t pc, sq_t from, sq_t to) {
    bb_t s = bb_or(bb_sq_tab[from], bb_sq_tab[to]);
    piece_type_t pt = piece_type(pc);
    pos->bb[pt] = bb_xor(pos->bb[pt], s);
    pos->bb[GROUP1[pt]] = bb_xor(pos->bb[GROUP1[pt]], s);
    pos->bb[GROUP2[pt]] = bb_xor(pos->bb[GROUP2[pt]], s);
    pos->by_color[piece_color(pc)] = bb_xor(pos->by_color[piece_color(pc)], s);
    pos->bb[POS_BB_OCC] = bb_xor(pos->bb[POS_BB_OCC], s);
}

uint64_t pos_compute_board_key(const pos_t *pos) {
    uint64_t k = pos->side == COLOR_WHITE ? zob_side : 0;
    for (sq_t sq = 0; sq < SQ_NB; sq++) k ^= zob_psq[pos->board[sq]][sq];
    return k;
}

uint64_t pos_compute_hand_key(const pos_t *pos) {
    uint64_t k = 0;
    for (color_t c = 0; c < COLOR_NB; c++)
        for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++)
            k += (uint64_t)hand_count(pos->hand[c], pt) * zob_hand[c][pt];
    return k;
}

void pos_reset_state(pos_t *pos) {
    engine_init();
    for (int i = 0; i < POS_BB_NB; i++) pos->bb[i] = bb_zero();
    pos->by_color[0] = pos->by_color[1] = bb_zero();
    pos->king_sq[0] = pos->king_sq[1] = SQ_NONE;
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        piece_t pc = pos->board[sq];
        if (pc == PIECE_NONE) continue;
        toggle_piece(pos, pc, sq);
        if (piece_type(pc) == PT_KING) pos->king_sq[piece_color(pc)] = sq;
    }
    pos->hist_n = 0;
    pos_state_t *st = &pos->hist[0];
    memset(st, 0, sizeof *st);
    st->board_key = pos_compute_board_key(pos);
    st->hand_key = pos_compute_hand_key(pos);
    st->key = st->board_key ^ st->hand_key;
    st->hand[0] = pos->hand[0];
    st->hand[1] = pos->hand[1];
    st->move = MOVE_NONE;
    st->captured = PIECE_NONE;
    sq_t ksq = pos->king_sq[pos->side];
    st->checkers = ksq == SQ_NONE ? bb_zero() : pos_attackers_to(pos, color_flip(pos->side), ksq, pos->bb[POS_BB_OCC]);
}

void pos_set_startpos(pos_t *pos) {
    static const piece_type_t BACK[9] = {PT_LANCE, PT_KNIGHT, PT_SILVER, PT_GOLD, PT_KING,
                                         PT_GOLD,  PT_SILVER, PT_KNIGHT, PT_LANCE};
    engine_init();
    memset(pos->board, 0, sizeof pos->board);
    for (int f = 0; f < 9; f++) {
        pos->board[sq_make(f, 0)] = (uint8_t)piece_make(COLOR_WHITE, BACK[f]);
        pos->board[sq_make(f, 2)] = (uint8_t)piece_make(COLOR_WHITE, PT_PAWN);
        pos->board[sq_make(f, 6)] = (uint8_t)piece_make(COLOR_BLACK, PT_PAWN);
        pos->board[sq_make(f, 8)] = (uint8_t)piece_make(COLOR_BLACK, BACK[f]);
    }
    /* Black's rook on 2h, bishop on 8h; White's rook on 8b, bishop on 2b. */
    pos->board[sq_make(1, 7)] = (uint8_t)piece_make(COLOR_BLACK, PT_ROOK);
    pos->board[sq_make(7, 7)] = (uint8_t)piece_make(COLOR_BLACK, PT_BISHOP);
    pos->board[sq_make(7, 1)] = (uint8_t)piece_make(COLOR_WHITE, PT_ROOK);
    pos->board[sq_make(1, 1)] = (uint8_t)piece_make(COLOR_WHITE, PT_BISHOP);
    pos->hand[0] = pos->hand[1] = 0;
    pos->side = COLOR_BLACK;
    pos->game_ply = 1;
    pos_reset_state(pos);
}

void pos_copy(pos_t *dst, const pos_t *src) {
    if (dst == src) return;
    memcpy(dst, src, offsetof(pos_t, hist));
    memcpy(dst->hist, src->hist, (size_t)(src->hist_n + 1) * sizeof(pos_state_t));
}

/* ---- attacks ------------------------------------------------------------- */
bb_t pos_attackers_to(const pos_t *pos, color_t c, sq_t sq, bb_t occ) {
    color_t them = color_flip(c); /* step tables of the opposite colour, read backwards */
    bb_t a = bb_and(bb_pawn_attacks(them, sq), pos->bb[PT_PAWN]);
    a = bb_or(a, bb_and(bb_knight_attacks(them, sq), pos->bb[PT_KNIGHT]));
    a = bb_or(a, bb_and(bb_silver_attacks(them, sq), pos->bb[PT_SILVER]));
    a = bb_or(a, bb_and(bb_gold_attacks(them, sq), pos->bb[POS_BB_GOLDS]));
    a = bb_or(a, bb_and(bb_king_attacks(sq), pos->bb[POS_BB_HDK]));
    a = bb_or(a, bb_and(bb_lance_attacks(them, sq, occ), pos->bb[PT_LANCE]));
    a = bb_or(a, bb_and(bb_bishop_attacks(sq, occ), pos->bb[POS_BB_BISHOP_HORSE]));
    a = bb_or(a, bb_and(bb_rook_attacks(sq, occ), pos->bb[POS_BB_ROOK_DRAGON]));
    return bb_and(a, pos->by_color[c]);
}

bool pos_is_attacked(const pos_t *pos, color_t c, sq_t sq, bb_t occ) {
    color_t them = color_flip(c);
    bb_t mine = pos->by_color[c];
    bb_t a = bb_and(bb_pawn_attacks(them, sq), pos->bb[PT_PAWN]);
    a = bb_or(a, bb_and(bb_knight_attacks(them, sq), pos->bb[PT_KNIGHT]));
    a = bb_or(a, bb_and(bb_silver_attacks(them, sq), pos->bb[PT_SILVER]));
    a = bb_or(a, bb_and(bb_gold_attacks(them, sq), pos->bb[POS_BB_GOLDS]));
    a = bb_or(a, bb_and(bb_king_attacks(sq), pos->bb[POS_BB_HDK]));
    if (bb_intersects(a, mine)) return true;
    /* Sliders: each one on a line through sq attacks it when nothing stands between. */
    bb_t sl = bb_and(bb_lance_pseudo_tab[them][sq], pos->bb[PT_LANCE]);
    sl = bb_or(sl, bb_and(bb_bishop_pseudo_tab[sq], pos->bb[POS_BB_BISHOP_HORSE]));
    sl = bb_or(sl, bb_and(bb_rook_pseudo_tab[sq], pos->bb[POS_BB_ROOK_DRAGON]));
    sl = bb_and(sl, mine);
    while (bb_nonzero(sl)) {
        sq_t s = bb_pop_lsb(&sl);
        if (!bb_intersects(bb_between(sq, s), occ)) return true;
    }
    return false;
}

bb_t pos_attacks_by(const pos_t *pos, color_t c) {
    bb_t occ = pos->bb[POS_BB_OCC], a = bb_zero();
    for (bb_t t = pos->by_color[c]; bb_nonzero(t);) {
        sq_t sq = bb_pop_lsb(&t);
        a = bb_or(a, bb_attacks(pos->board[sq], sq, occ));
    }
    return a;
}

/* ---- make / unmake -------------------------------------------------------- */
/* Pieces of us checking them's king right after us played m (already on the board):
 * the moved piece itself, and sliders uncovered on the line through its origin. */
static inline bb_t checkers_after(const pos_t *pos, move_t m, color_t us, color_t them) {
    const sq_t ksq = pos->king_sq[them], to = move_to(m);
    const bb_t occ = pos->bb[POS_BB_OCC];
    const piece_t pc = pos->board[to];
    const piece_type_t pt = piece_type(pc);
    bb_t ch = bb_zero();
    bool direct;
    switch (pt) {
    case PT_LANCE:
        direct = bb_test(bb_lance_pseudo_tab[them][ksq], to) && !bb_intersects(bb_between(to, ksq), occ);
        break;
    case PT_BISHOP: direct = bb_test(bb_bishop_pseudo_tab[to], ksq) && !bb_intersects(bb_between(to, ksq), occ); break;
    case PT_ROOK: direct = bb_test(bb_rook_pseudo_tab[to], ksq) && !bb_intersects(bb_between(to, ksq), occ); break;
    case PT_HORSE:
        direct = bb_test(bb_king_attacks(to), ksq) ||
                 (bb_test(bb_bishop_pseudo_tab[to], ksq) && !bb_intersects(bb_between(to, ksq), occ));
        break;
    case PT_DRAGON:
        direct = bb_test(bb_king_attacks(to), ksq) ||
                 (bb_test(bb_rook_pseudo_tab[to], ksq) && !bb_intersects(bb_between(to, ksq), occ));
        break;
    default: direct = bb_test(bb_step_tab[us][pt][to], ksq); break;
    }
    if (direct) ch = bb_sq_tab[to];
    if (!move_is_drop(m)) {
        sq_t from = move_from(m);
        int d = bb_dir_tab[ksq][from];
        if (d) {
            /* Our sliders beyond from, seen from their king along direction d. */
            bool diag = d == 1 || d == 3 || d == 6 || d == 8;
            bb_t sl = diag ? pos->bb[POS_BB_BISHOP_HORSE] : pos->bb[POS_BB_ROOK_DRAGON];
            sl = bb_or(sl, bb_and(bb_lance_pseudo_tab[them][ksq], pos->bb[PT_LANCE]));
            sl = bb_and(bb_and(sl, pos->by_color[us]), bb_ray_tab[d][ksq]);
            while (bb_nonzero(sl)) {
                sq_t s = bb_pop_lsb(&sl);
                if (s != to && !bb_intersects(bb_between(ksq, s), occ)) ch = bb_or(ch, bb_sq_tab[s]);
            }
        }
    }
    return ch;
}

void pos_do_move(pos_t *pos, move_t m) {
    KOMA_ASSERT(pos->hist_n + 1 < POS_HIST_MAX);
    const pos_state_t *prev = &pos->hist[pos->hist_n];
    pos_state_t *st = &pos->hist[pos->hist_n + 1];
    color_t us = pos->side, them = color_flip(us);
    uint64_t board_key = prev->board_key ^ zob_side, hand_key = prev->hand_key;
    sq_t to = move_to(m);
    piece_t captured = PIECE_NONE;

    if (move_is_drop(m)) {
        piece_type_t pt = move_drop_pt(m);
        piece_t pc = piece_make(us, pt);
        pos->hand[us] = hand_sub(pos->hand[us], pt);
        hand_key -= zob_hand[us][pt];
        pos->board[to] = (uint8_t)pc;
        toggle_piece(pos, pc, to);
        board_key ^= zob_psq[pc][to];
    } else {
        sq_t from = move_from(m);
        piece_t pc = pos->board[from];
        captured = pos->board[to];
        if (captured != PIECE_NONE) {
            piece_type_t cpt = pt_demote(piece_type(captured));
            toggle_piece(pos, captured, to);
            pos->hand[us] = hand_add(pos->hand[us], cpt);
            hand_key += zob_hand[us][cpt];
            board_key ^= zob_psq[captured][to];
        }
        piece_t npc = move_is_promote(m) ? pc + PT_PROMOTE : pc;
        if (npc == pc) {
            shift_piece(pos, pc, from, to);
        } else {
            toggle_piece(pos, pc, from);
            toggle_piece(pos, npc, to);
        }
        pos->board[from] = PIECE_NONE;
        pos->board[to] = (uint8_t)npc;
        board_key ^= zob_psq[pc][from] ^ zob_psq[npc][to];
        if (piece_type(pc) == PT_KING) pos->king_sq[us] = to;
    }
    pos->side = them;
    pos->game_ply++;
    pos->hist_n++;
    st->board_key = board_key;
    st->hand_key = hand_key;
    st->key = board_key ^ hand_key;
    st->hand[0] = pos->hand[0];
    st->hand[1] = pos->hand[1];
    st->move = m;
    st->captured = captured;
    st->checkers = checkers_after(pos, m, us, them);
}

void pos_undo_move(pos_t *pos) {
    KOMA_ASSERT(pos->hist_n > 0);
    const pos_state_t *st = &pos->hist[pos->hist_n];
    move_t m = st->move;
    KOMA_ASSERT(m != MOVE_NULL);
    color_t them = pos->side, us = color_flip(them);
    sq_t to = move_to(m);
    if (move_is_drop(m)) {
        piece_type_t pt = move_drop_pt(m);
        toggle_piece(pos, piece_make(us, pt), to);
        pos->board[to] = PIECE_NONE;
        pos->hand[us] = hand_add(pos->hand[us], pt);
    } else {
        sq_t from = move_from(m);
        piece_t npc = pos->board[to];
        piece_t pc = move_is_promote(m) ? npc - PT_PROMOTE : npc;
        if (npc == pc) {
            shift_piece(pos, pc, to, from);
        } else {
            toggle_piece(pos, npc, to);
            toggle_piece(pos, pc, from);
        }
        pos->board[from] = (uint8_t)pc;
        pos->board[to] = (uint8_t)st->captured;
        if (st->captured != PIECE_NONE) {
            toggle_piece(pos, st->captured, to);
            pos->hand[us] = hand_sub(pos->hand[us], pt_demote(piece_type(st->captured)));
        }
        if (piece_type(pc) == PT_KING) pos->king_sq[us] = from;
    }
    pos->side = us;
    pos->game_ply--;
    pos->hist_n--;
}

void pos_do_null_move(pos_t *pos) {
    KOMA_ASSERT(pos->hist_n + 1 < POS_HIST_MAX && !pos_in_check(pos));
    const pos_state_t *prev = &pos->hist[pos->hist_n];
    pos_state_t *st = &pos->hist[pos->hist_n + 1];
    *st = *prev;
    st->board_key ^= zob_side;
    st->key = st->board_key ^ st->hand_key;
    st->move = MOVE_NULL;
    st->captured = PIECE_NONE;
    pos->side = color_flip(pos->side);
    pos->game_ply++;
    pos->hist_n++;
    st->checkers = pos_attackers_to(pos, color_flip(pos->side), pos->king_sq[pos->side], pos->bb[POS_BB_OCC]);
}

void pos_undo_null_move(pos_t *pos) {
    KOMA_ASSERT(pos->hist_n > 0 && pos->hist[pos->hist_n].move == MOVE_NULL);
    pos->side = color_flip(pos->side);
    pos->game_ply--;
    pos->hist_n--;
}

/* ---- legality ---------------------------------------------------------------- */
bool pos_is_pawn_drop_mate(const pos_t *pos, sq_t sq) {
    color_t us = pos->side, them = color_flip(us);
    sq_t ksq = pos->king_sq[them];
    bb_t occ = pos->bb[POS_BB_OCC];
    /* Undefended: the king takes the pawn. */
    if (!pos_is_attacked(pos, us, sq, occ)) return false;
    /* Another piece of theirs takes it (pinned pieces only along their pin line). */
    bb_t takers = bb_andnot(pos_attackers_to(pos, them, sq, occ), pos->bb[PT_KING]);
    if (bb_nonzero(takers)) {
        bb_t pinned = bb_and(pos_blockers(pos, them, 0), pos->by_color[them]);
        while (bb_nonzero(takers)) {
            sq_t from = bb_pop_lsb(&takers);
            if (!bb_test(pinned, from) || bb_aligned(ksq, from, sq)) return false;
        }
    }
    /* The king steps away. */
    bb_t occ2 = bb_xor(bb_or(occ, bb_sq_tab[sq]), bb_sq_tab[ksq]);
    bb_t esc = bb_andnot(bb_king_attacks(ksq), bb_or(pos->by_color[them], bb_sq_tab[sq]));
    while (bb_nonzero(esc)) {
        sq_t e = bb_pop_lsb(&esc);
        if (!pos_is_attacked(pos, us, e, occ2)) return false;
    }
    return true;
}

bool pos_is_legal(const pos_t *pos, move_t m) {
    color_t us = pos->side, them = color_flip(us);
    sq_t ksq = pos->king_sq[us], to = move_to(m);
    bb_t checkers = pos_checkers(pos);
    if (move_is_drop(m)) {
        if (bb_nonzero(checkers)) {
            if (bb_more_than_one(checkers)) return false;
            if (!bb_test(bb_between(ksq, bb_lsb(checkers)), to)) return false;
        }
        if (move_drop_pt(m) == PT_PAWN && bb_test(bb_pawn_attacks(them, pos->king_sq[them]), to))
            return !pos_is_pawn_drop_mate(pos, to);
        return true;
    }
    sq_t from = move_from(m);
    if (from == ksq) return !pos_is_attacked(pos, them, to, bb_xor(pos->bb[POS_BB_OCC], bb_sq_tab[from]));
    if (bb_nonzero(checkers)) {
        if (bb_more_than_one(checkers)) return false;
        sq_t ch = bb_lsb(checkers);
        if (to != ch && !bb_test(bb_between(ksq, ch), to)) return false;
    }
    bb_t pinned = bb_and(pos_blockers(pos, us, 0), pos->by_color[us]);
    return !bb_test(pinned, from) || bb_aligned(ksq, from, to);
}

bool pos_is_pseudo_legal(const pos_t *pos, move_t m) {
    if (!move_is_ok(m)) return false;
    color_t us = pos->side;
    sq_t to = move_to(m);
    if (to >= SQ_NB) return false;
    int32_t rr = rank_relative(us, sq_rank(to));
    if (move_is_drop(m)) {
        piece_type_t pt = move_drop_pt(m);
        if (move_is_promote(m) || pt < PT_PAWN || pt > PT_GOLD) return false;
        if (!hand_has(pos->hand[us], pt) || pos->board[to] != PIECE_NONE) return false;
        if ((pt == PT_PAWN || pt == PT_LANCE) && rr == 0) return false;
        if (pt == PT_KNIGHT && rr <= 1) return false;
        if (pt == PT_PAWN && bb_intersects(pos_pieces(pos, us, PT_PAWN), bb_file_tab[sq_file(to)])) return false;
        return true;
    }
    sq_t from = move_from(m);
    if (from >= SQ_NB || from == to) return false;
    piece_t pc = pos->board[from];
    if (pc == PIECE_NONE || piece_color(pc) != us) return false;
    piece_t cap = pos->board[to];
    if (cap != PIECE_NONE && piece_color(cap) == us) return false;
    if (!bb_test(bb_attacks(pc, from, pos->bb[POS_BB_OCC]), to)) return false;
    piece_type_t pt = piece_type(pc);
    if (move_is_promote(m)) {
        if (!pt_can_promote(pt)) return false;
        return rr <= 2 || rank_relative(us, sq_rank(from)) <= 2;
    }
    if ((pt == PT_PAWN || pt == PT_LANCE) && rr == 0) return false;
    if (pt == PT_KNIGHT && rr <= 1) return false;
    return true;
}

bool pos_gives_check(const pos_t *pos, move_t m) {
    color_t us = pos->side, them = color_flip(us);
    sq_t ksq = pos->king_sq[them], to = move_to(m);
    bb_t occ = pos->bb[POS_BB_OCC];
    piece_t pc = pos_moved_piece_after(pos, m);
    if (!move_is_drop(m)) {
        sq_t from = move_from(m);
        occ = bb_xor(occ, bb_sq_tab[from]);
        if (bb_test(pos_blockers(pos, them, 0), from) && !bb_aligned(ksq, from, to)) return true;
    }
    occ = bb_or(occ, bb_sq_tab[to]);
    return bb_test(bb_attacks(pc, to, occ), ksq);
}

/* ---- consistency ------------------------------------------------------------ */
const char *pos_validate(const pos_t *pos) {
    pos_t tmp;
    memcpy(&tmp, pos, offsetof(pos_t, hist));
    for (int i = 0; i < POS_BB_NB; i++) tmp.bb[i] = bb_zero();
    tmp.by_color[0] = tmp.by_color[1] = bb_zero();
    int kings[COLOR_NB] = {0, 0};
    int count[PT_HAND_NB + 1] = {0};
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        piece_t pc = pos->board[sq];
        if (pc == PIECE_NONE) continue;
        piece_type_t pt = piece_type(pc);
        if (pt == PT_NONE || pt >= PT_NB || (pc & ~(PIECE_WHITE_BIT | 15))) return "bad piece code on the board";
        toggle_piece(&tmp, pc, sq);
        if (pt == PT_KING) {
            kings[piece_color(pc)]++;
            if (pos->king_sq[piece_color(pc)] != sq) return "king square does not match the board";
        }
        count[pt == PT_KING ? PT_HAND_NB : pt_demote(pt)]++;
    }
    if (kings[0] != 1 || kings[1] != 1) return "each side needs exactly one king";
    for (int i = 0; i < POS_BB_TRASH; i++)
        if (!bb_equal(tmp.bb[i], pos->bb[i])) return "piece bitboards do not match the board";
    for (color_t c = 0; c < COLOR_NB; c++) {
        if (!bb_equal(tmp.by_color[c], pos->by_color[c])) return "colour bitboards do not match the board";
        if (pos->hand[c] & (HAND_BORROW_MASK | 0x40u | 0x80u | (1u << 23) | (1u << 27))) return "hand has stray bits";
        for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++) count[pt] += hand_count(pos->hand[c], pt);
    }
    for (piece_type_t pt = PT_PAWN; pt <= PT_HAND_NB; pt++)
        if (count[pt] > PIECE_TOTAL[pt]) return "more pieces of a kind than a game has";
    const pos_state_t *st = &pos->hist[pos->hist_n];
    if (st->board_key != pos_compute_board_key(pos)) return "board key differs from a fresh computation";
    if (st->hand_key != pos_compute_hand_key(pos)) return "hand key differs from a fresh computation";
    if (st->key != (st->board_key ^ st->hand_key)) return "key is not board_key ^ hand_key";
    if (st->hand[0] != pos->hand[0] || st->hand[1] != pos->hand[1]) return "state hands differ from the position";
    bb_t ch = pos_attackers_to(pos, color_flip(pos->side), pos->king_sq[pos->side], pos->bb[POS_BB_OCC]);
    if (!bb_equal(ch, st->checkers)) return "checkers differ from a fresh computation";
    if (pos_is_attacked(pos, pos->side, pos->king_sq[color_flip(pos->side)], pos->bb[POS_BB_OCC]))
        return "the side not to move is in check";
    return NULL;
}
