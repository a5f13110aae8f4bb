/* position.h - a shogi position with make/unmake and a per-ply history.
 *
 * Owns: the board, hands, side to move, Zobrist keys, checkers, pins,
 * attack queries, making and unmaking moves, the state history used by the
 * repetition rules, and the legality test of a pseudo-legal move.
 * Does not own: move generation (movegen.h), SFEN/USI text (sfen.h),
 * repetition/declaration/max-ply verdicts (rules.h), mate search (mate1.h).
 *
 * A Position is a plain struct: it may be copied with pos_copy (which copies
 * only the used part of the history: 480 bytes + 64 per ply) or memcpy. It
 * holds no pointers. It is large (about 128 KiB, mostly history): keep it
 * static, on the heap, or in a long-lived struct rather than on small
 * thread stacks.
 *
 * History: hist[0] is the state of the position as set (SFEN/startpos),
 * hist[hist_n] the current one. pos_do_move pushes, pos_undo_move pops.
 * At most POS_HIST_MAX - 1 moves can be made after setting a position.
 *
 * Keys: board_key covers the pieces on the board and the side to move;
 * hand_key covers both hands (additive per piece); key = board_key ^ hand_key.
 * Two positions with equal board_key differ at most in how the pieces in
 * hand are split, which hand_is_superior_or_equal (types.h) can compare.
 */
#ifndef KOMA_ENGINE_POSITION_H
#define KOMA_ENGINE_POSITION_H

#include "engine/bitboard.h"
#include "engine/types.h"

enum { POS_HIST_MAX = 2048 };

/* Indices into Position.bb: 0 = all pieces, 1..14 = one piece type (both
 * colours), then unions the attack code wants. POS_BB_TRASH absorbs updates
 * for types that belong to no union. */
enum {
    POS_BB_OCC = 0,
    POS_BB_GOLDS = PT_NB, /* GOLD, PRO_PAWN, PRO_LANCE, PRO_KNIGHT, PRO_SILVER */
    POS_BB_BISHOP_HORSE,  /* BISHOP, HORSE */
    POS_BB_ROOK_DRAGON,   /* ROOK, DRAGON */
    POS_BB_HDK,           /* HORSE, DRAGON, KING */
    POS_BB_TRASH,
    POS_BB_NB
};

/* What each ply of the history remembers. */
typedef struct {
    uint64_t key;       /* board_key ^ hand_key */
    uint64_t board_key; /* board and side to move */
    uint64_t hand_key;  /* both hands */
    bb_t checkers;      /* pieces giving check to the side to move; empty if not in check */
    hand_t hand[COLOR_NB];
    move_t move;      /* the move that led here (MOVE_NONE for hist[0]) */
    piece_t captured; /* piece that move captured, PIECE_NONE if none */
} pos_state_t;

typedef struct {
    uint8_t board[SQ_NB];    /* Piece on each square, PIECE_NONE when empty */
    bb_t bb[POS_BB_NB];      /* see POS_BB_*; bb[pt] has both colours */
    bb_t by_color[COLOR_NB]; /* pieces of each colour */
    hand_t hand[COLOR_NB];
    sq_t king_sq[COLOR_NB];
    color_t side;     /* side to move */
    int32_t game_ply; /* 1 for the first move of a game; SFEN's last field */
    int32_t hist_n;   /* index of the current state in hist */
    pos_state_t hist[POS_HIST_MAX];
} pos_t;

/* ---- setting up ------------------------------------------------------------ */
/* The standard initial position, Black to move, ply 1. */
void pos_set_startpos(pos_t *pos);
/* Copies src to dst including the used part of the history. */
void pos_copy(pos_t *dst, const pos_t *src);
/* Recomputes bitboards, keys and checkers from board/hands/side and
 * restarts the history with that state (game_ply is kept). Used by the SFEN
 * reader; board[], hand[], side must already be set. */
void pos_reset_state(pos_t *pos);

/* ---- accessors ------------------------------------------------------------- */
static inline color_t pos_side_to_move(const pos_t *pos) { return pos->side; }
static inline piece_t pos_piece_on(const pos_t *pos, sq_t sq) { return pos->board[sq]; }
static inline hand_t pos_hand(const pos_t *pos, color_t c) { return pos->hand[c]; }
static inline int32_t pos_hand_count(const pos_t *pos, color_t c, piece_type_t pt) {
    return hand_count(pos->hand[c], pt);
}
static inline sq_t pos_king_sq(const pos_t *pos, color_t c) { return pos->king_sq[c]; }
static inline bb_t pos_occupied(const pos_t *pos) { return pos->bb[POS_BB_OCC]; }
static inline bb_t pos_pieces_of(const pos_t *pos, color_t c) { return pos->by_color[c]; }
/* Pieces of one type (exact: PT_PAWN does not include PT_PRO_PAWN) and colour. */
static inline bb_t pos_pieces(const pos_t *pos, color_t c, piece_type_t pt) {
    return bb_and(pos->bb[pt], pos->by_color[c]);
}
/* Gold-movers of colour c: GOLD and the four promoted small pieces. */
static inline bb_t pos_golds(const pos_t *pos, color_t c) { return bb_and(pos->bb[POS_BB_GOLDS], pos->by_color[c]); }
static inline const pos_state_t *pos_state(const pos_t *pos) { return &pos->hist[pos->hist_n]; }
static inline uint64_t pos_key(const pos_t *pos) { return pos->hist[pos->hist_n].key; }
static inline uint64_t pos_board_key(const pos_t *pos) { return pos->hist[pos->hist_n].board_key; }
static inline uint64_t pos_hand_key(const pos_t *pos) { return pos->hist[pos->hist_n].hand_key; }
static inline bb_t pos_checkers(const pos_t *pos) { return pos->hist[pos->hist_n].checkers; }
static inline bool pos_in_check(const pos_t *pos) { return bb_nonzero(pos->hist[pos->hist_n].checkers); }
static inline int32_t pos_game_ply(const pos_t *pos) { return pos->game_ply; }
/* Number of moves made since the position was set (0 right after setting). */
static inline int32_t pos_hist_len(const pos_t *pos) { return pos->hist_n; }
/* State plies_ago moves back (0 = current), 0 <= plies_ago <= pos_hist_len(). */
static inline const pos_state_t *pos_state_ago(const pos_t *pos, int32_t plies_ago) {
    return &pos->hist[pos->hist_n - plies_ago];
}
/* The last move made, MOVE_NONE right after setting. */
static inline move_t pos_last_move(const pos_t *pos) { return pos->hist[pos->hist_n].move; }

/* Piece a move moves (after promotion when it promotes); valid for pseudo-legal moves. */
static inline piece_t pos_moved_piece_after(const pos_t *pos, move_t m) {
    if (move_is_drop(m)) return piece_make(pos->side, move_drop_pt(m));
    return pos->board[move_from(m)] + (move_is_promote(m) ? PT_PROMOTE : 0);
}
static inline bool pos_is_capture(const pos_t *pos, move_t m) {
    return !move_is_drop(m) && pos->board[move_to(m)] != PIECE_NONE;
}

/* ---- attacks ------------------------------------------------------------- */
/* Pieces of colour c that attack sq, with the given occupancy. */
bb_t pos_attackers_to(const pos_t *pos, color_t c, sq_t sq, bb_t occ);
/* Every square attacked by at least one piece of colour c (current occupancy). */
bb_t pos_attacks_by(const pos_t *pos, color_t c);
/* Does any piece of colour c attack sq (occupancy occ)? */
bool pos_is_attacked(const pos_t *pos, color_t c, sq_t sq, bb_t occ);
/* Pieces (either colour) that are the only piece between c's king and an
 * enemy slider aiming at it; pinners receives those sliders (may be NULL).
 * (Inline: a Bitboard returned from a call costs a store-forwarding stall.) */
static inline bb_t pos_blockers(const pos_t *pos, color_t c, bb_t *pinners) {
    color_t them = color_flip(c);
    sq_t ksq = pos->king_sq[c];
    bb_t occ = pos->bb[POS_BB_OCC], blockers = bb_zero(), pin = bb_zero();
    bb_t snipers = bb_and(bb_lance_pseudo_tab[c][ksq], pos->bb[PT_LANCE]);
    snipers = bb_or(snipers, bb_and(bb_bishop_pseudo_tab[ksq], pos->bb[POS_BB_BISHOP_HORSE]));
    snipers = bb_or(snipers, bb_and(bb_rook_pseudo_tab[ksq], pos->bb[POS_BB_ROOK_DRAGON]));
    snipers = bb_and(snipers, pos->by_color[them]);
    while (bb_nonzero(snipers)) {
        sq_t s = bb_pop_lsb(&snipers);
        bb_t b = bb_and(bb_between(ksq, s), occ);
        if (bb_nonzero(b) && !bb_more_than_one(b)) {
            blockers = bb_or(blockers, b);
            if (bb_intersects(b, pos->by_color[c])) pin = bb_or(pin, bb_sq_tab[s]);
        }
    }
    if (pinners) *pinners = pin;
    return blockers;
}

/* c's own pieces pinned to c's king. */
static inline bb_t pos_pinned(const pos_t *pos, color_t c) { return bb_and(pos_blockers(pos, c, 0), pos->by_color[c]); }

/* ---- moves ----------------------------------------------------------------- */
/* Plays a legal move (a pseudo-legal move that pos_is_legal accepts). */
void pos_do_move(pos_t *pos, move_t m);
/* Takes back the last move made (not a null move: pos_undo_null_move). */
void pos_undo_move(pos_t *pos);
/* Passes (side to move flips). Only when not in check. */
void pos_do_null_move(pos_t *pos);
void pos_undo_null_move(pos_t *pos);
/* Is a pseudo-legal move (one movegen_pseudo could produce) legal: own king
 * not left in check, no pawn-drop mate? */
bool pos_is_legal(const pos_t *pos, move_t m);
/* Is any 16-bit value a pseudo-legal move here (piece of the side to move,
 * reachable square, promotion allowed/forced rules, nifu, dead squares)? */
bool pos_is_pseudo_legal(const pos_t *pos, move_t m);
/* Full check of an untrusted move: pseudo-legal and legal. */
static inline bool pos_is_valid_move(const pos_t *pos, move_t m) {
    return pos_is_pseudo_legal(pos, m) && pos_is_legal(pos, m);
}
/* Does a legal move give check? */
bool pos_gives_check(const pos_t *pos, move_t m);
/* Would dropping a pawn of the side to move on sq be mate (uchifuzume)?
 * sq must be the square in front of the enemy king and empty. */
bool pos_is_pawn_drop_mate(const pos_t *pos, sq_t sq);

/* Zobrist keys from scratch (for tests and assertions). */
uint64_t pos_compute_board_key(const pos_t *pos);
uint64_t pos_compute_hand_key(const pos_t *pos);
/* Checks every invariant (bitboards vs board, keys, king squares, counts);
 * returns NULL when consistent, else a static description of the first fault. */
const char *pos_validate(const pos_t *pos);

#endif
