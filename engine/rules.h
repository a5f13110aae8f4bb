/* rules.h - how a shogi game ends: repetition (sennichite, perpetual check),
 * the entering-king declaration, no legal move, and the move limit.
 *
 * Owns: the verdicts on a position with its history, the end-reason enum
 * and its names (written to the database), the game status query.
 * Does not own: the history itself (position.h keeps keys and checkers per
 * ply), mate search (mate1.h), resignation and time (the caller decides
 * those; the reasons are only named here).
 *
 * ---- Repetition --------------------------------------------------------------
 * A position is the board, both hands and the side to move (pos_state_t.key).
 * Only the history the Position holds is seen: positions before the one it
 * was set from (SFEN) are unknown.
 *  - Sennichite (game rule, rules_repetition): the same position occurring
 *    for the fourth time ends the game as a draw, unless one side gave check
 *    with every one of its moves from the first of those four occurrences to
 *    the fourth (perpetual check): that side loses. If both sides gave check
 *    with every move (possible only in contrived cycles) it is a draw.
 *  - Search variant (rules_repetition_first): a single earlier occurrence
 *    within max_plies_back counts. Engines score that as the final result
 *    (draw, or a loss for the perpetual checker judged on the one cycle),
 *    since a side that can repeat once can repeat again; the MCTS tree uses
 *    it inside the tree and rules_repetition for the real game rule.
 *  - Superior/inferior positions (same board and side, one side holds more
 *    in hand: it came round with extra material) are NOT a game rule; only
 *    rules_repetition_first reports them, and only when asked (superior =
 *    true). A search may score them as a win/loss for the side to move.
 *
 * ---- Entering-king declaration (CSA rule, 27-point method) -------------------
 * The side to move may declare a win when all of: (a) it is its move,
 * (b) its king stands in the opponent's camp (the three far ranks),
 * (c) it has at least 28 points (Black) / 27 points (White), counting big
 * pieces (bishop, rook, horse, dragon) 5 and every other piece 1, over its
 * pieces in the opponent's camp except the king plus its pieces in hand,
 * (d) at least 10 of its pieces other than the king stand in that camp,
 * (e) its king is not in check, (f) it has time left (the caller's business).
 * Source: CSA tournament rules (computer-shogi.org, tcp_ip_1on1_11), as
 * implemented by YaneuraOu's EKR_27_POINT.
 *
 * ---- Entering-king declaration (24-point method) ------------------------------
 * The same conditions (a), (b), (d), (e), (f), with (c) replaced by: at least
 * 31 points, for either colour. Under the 24-point rule 24-30 points is a
 * draw and fewer a loss for the declarer; USI has no way to claim a draw
 * (`bestmove win` only), so, as YaneuraOu's EKR_24_POINT does, only the win
 * at 31 points or more is declared here: a position of 24-30 points is not a
 * declaration (the game goes on). Every position this rule declares, the
 * 27-point rule declares too (31 >= 28). Source: YaneuraOu
 * (source/position.cpp, Position::DeclarationWin: "24点法(31点以上で宣言勝ち)").
 *
 * The rule is a parameter (rules_declare_t) of rules_can_declare_by; the game
 * rule of self-play, the referee and rules_status is the 27-point rule.
 *
 * ---- No legal move -----------------------------------------------------------
 * A side to move with no legal move loses, in check (checkmate) or not
 * (stalemate, rare with drops; also a loss in shogi). Both are reported as
 * RULES_END_CHECKMATE.
 */
#ifndef KOMA_ENGINE_RULES_H
#define KOMA_ENGINE_RULES_H

#include "engine/position.h"

/* Repetition verdicts, for the side to move. */
typedef enum {
    RULES_REP_NONE = 0, /* no (qualifying) repetition */
    RULES_REP_DRAW,     /* sennichite: draw */
    RULES_REP_WIN,      /* the opponent gave check with every move of the cycle: side to move wins */
    RULES_REP_LOSS,     /* the side to move gave check with every move: it loses */
    RULES_REP_SUPERIOR, /* rules_repetition_first with superior: same board, side to move holds more */
    RULES_REP_INFERIOR  /* ... side to move holds less */
} rules_rep_t;

/* Game rule: the current position occurs for the fourth time (counting the
 * current one). *plies_back (may be NULL) receives the distance in plies to
 * the first of the four occurrences, 0 when RULES_REP_NONE. Cost: one key
 * comparison every second ply of the history. */
rules_rep_t rules_repetition(const pos_t *pos, int32_t *plies_back);

/* Search variant: the nearest earlier occurrence of the current position at
 * most max_plies_back plies back (max_plies_back < 0: the whole history)
 * gives DRAW, or WIN/LOSS when one side checked with every move of that one
 * cycle. With superior, a position with the same board and side whose hands
 * are ordered (the side to move now holds at least as much of every kind,
 * or at most) gives SUPERIOR/INFERIOR when no exact repetition is nearer.
 * *plies_back (may be NULL) receives the cycle length, 0 when NONE. */
rules_rep_t rules_repetition_first(const pos_t *pos, int32_t max_plies_back, bool superior, int32_t *plies_back);

/* Short name of a verdict ("none", "draw", "win", "loss", "superior", "inferior"). */
const char *rules_rep_name(rules_rep_t r);

/* Declaration points of colour c (as in rule (c) above): big pieces 5, others
 * 1, over c's pieces in the opponent's camp except its king plus c's hand. */
int32_t rules_declaration_points(const pos_t *pos, color_t c);
/* Can the side to move declare a win now (rules (a)-(e), 27-point method)? */
bool rules_can_declare(const pos_t *pos);

/* Which declaration rule holds (USI EnteringKingRule). */
typedef enum {
    RULES_DECLARE_CSA27 = 0, /* CSA 27-point rule: 28 points (Black) / 27 (White); the default */
    RULES_DECLARE_CSA24,     /* 24-point rule, wins only: 31 points for either colour */
    RULES_DECLARE_NONE,      /* no declaration */
    RULES_DECLARE_NB
} rules_declare_t;

/* Can the side to move declare a win now under rule? RULES_DECLARE_NONE (or
 * an invalid value): never. rules_can_declare_by(pos, RULES_DECLARE_CSA27)
 * == rules_can_declare(pos). */
bool rules_can_declare_by(const pos_t *pos, rules_declare_t rule);

/* Does the side to move have at least one legal move? Faster than counting:
 * returns at the first one found. */
bool rules_has_legal_move(const pos_t *pos);

/* Why a game ended. The names are written to the database. */
typedef enum {
    RULES_END_NONE = 0,        /* "ongoing": not ended */
    RULES_END_CHECKMATE,       /* "checkmate": side to move has no legal move (mate or stalemate) */
    RULES_END_SENNICHITE,      /* "sennichite": fourfold repetition, draw */
    RULES_END_PERPETUAL_CHECK, /* "perpetual_check": fourfold repetition, the perpetual checker loses */
    RULES_END_DECLARATION,     /* "declaration": entering-king declaration, the declarer wins */
    RULES_END_MAX_PLY,         /* "max_ply": move limit reached, draw */
    RULES_END_RESIGN,          /* "resign": the resigning side loses (never returned by rules_status) */
    RULES_END_ILLEGAL_MOVE,    /* "illegal_move": the side that played it loses (never returned) */
    RULES_END_TIME,            /* "time": the side out of time loses (never returned) */
    RULES_END_NB
} rules_end_t;

/* "ongoing", "checkmate", "sennichite", "perpetual_check", "declaration",
 * "max_ply", "resign", "illegal_move", "time"; "?" for an invalid value. */
const char *rules_end_name(rules_end_t e);
/* Inverse of rules_end_name; RULES_END_NB when the name is unknown or NULL. */
rules_end_t rules_end_from_name(const char *name);

#define RULES_MAX_PLY_DEFAULT 320

typedef struct {
    rules_end_t end;  /* RULES_END_NONE while the game goes on */
    color_t winner;  /* COLOR_BLACK / COLOR_WHITE, or COLOR_NB for a draw or an ongoing game */
} rules_status_t;

/* The state of the game at pos, checked in this order:
 *  1. no legal move: CHECKMATE, the side to move loses;
 *  2. fourfold repetition: SENNICHITE (draw) or PERPETUAL_CHECK;
 *  3. max_ply > 0 and at least max_ply moves played (pos_game_ply - 1 >=
 *     max_ply): MAX_PLY, draw (a mate delivered by move max_ply still counts);
 *  4. the side to move can declare: DECLARATION, the side to move wins
 *     (self-play and search always declare when they can);
 *  otherwise NONE. */
rules_status_t rules_status(const pos_t *pos, int32_t max_ply);
/* Same, with the number of legal moves already known (n_legal >= 0; pass -1
 * to have it worked out). Saves the legal-move test in a search that has
 * generated the moves anyway. */
rules_status_t rules_status_with_count(const pos_t *pos, int32_t max_ply, int32_t n_legal);

#endif
