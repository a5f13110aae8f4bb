/* referee.h - the match referee and the arithmetic of match results.
 *
 * Owns: judging one game between two players that may misbehave (USI
 * engines in tools/usi_match.c, nets in process in match/play.c): every
 * move is checked against Koma's rules, the ends a player causes (resigning,
 * claiming the entering-king declaration, an illegal or unreadable move,
 * running out of time, crashing) and the ends the rules impose (no legal
 * move, fourfold repetition, perpetual check, the move limit); the Elo
 * estimate of a match score with its 95% interval; the Elo ladder over the
 * matches table; storing match games in the run database (data/db.h).
 * Does not own: the rules (engine/rules.h decides every verdict), talking
 * USI, searching, time keeping (the caller measures and reports a time-out).
 *
 * ---- How a game ends --------------------------------------------------------
 *  - a move that is unreadable or not legal in the position (including
 *    nifu, pawn-drop mate, leaving the king in check): the mover loses,
 *    RULES_END_ILLEGAL_MOVE;
 *  - "resign": the side to move loses, RULES_END_RESIGN;
 *  - "win" (the declaration claim): rules_can_declare decides; a true claim
 *    wins (RULES_END_DECLARATION), a false one loses (RULES_END_ILLEGAL_MOVE,
 *    "false declaration"). The referee never declares for a player: a side
 *    that could declare and plays on simply plays on;
 *  - after every move, rules_status: no legal move for the side to move
 *    (mate or stalemate) loses (RULES_END_CHECKMATE); the fourth occurrence
 *    of a position is a draw (RULES_END_SENNICHITE) unless one side gave
 *    check with every move of the cycle, which then loses
 *    (RULES_END_PERPETUAL_CHECK); at max_ply moves (counted as rules.h does,
 *    by the position's ply number, so an opening SFEN at ply 31 has 30 moves
 *    already counted) the game is a draw (RULES_END_MAX_PLY);
 *  - time-outs and crashes are reported by the caller (ref_game_forfeit):
 *    the side named loses, RULES_END_TIME or RULES_END_ILLEGAL_MOVE with
 *    crashed set (an engine that exits or stops answering commits an
 *    illegal action).
 *
 * ---- Elo ---------------------------------------------------------------------
 * Score s = (W + D/2) / N of player A; Elo(A) - Elo(B) = -400 log10(1/s - 1)
 * (logistic model). 95% interval (z = 1.959964):
 *  - trinomial: s +- z * sqrt(var / N) with var the variance of one game's
 *    score (1, 1/2, 0) around s; each end mapped through the Elo formula;
 *  - pentanomial: the same over game pairs (one opening, colours swapped):
 *    a pair scores 0, 1/4, 1/2, 3/4 or 1 per game; var over pairs, N pairs.
 *    It accounts for the correlation of the two games of a pair (an
 *    unbalanced opening), which the trinomial ignores.
 * Degenerate samples: when every game (pair) scored the same, var = 0 and
 * the normal interval collapses; the Wilson score interval of s with N
 * games is used instead. A perfect score (s = 1 or 0) has an infinite point
 * estimate; it is reported as if one more game had been drawn
 * (s = (N + 1/2) / (N + 1)), so the estimate stays finite and grows with N;
 * the interval's far end is then +-INFINITY. An interval end with s <= 0 or >= 1 is -+INFINITY.
 * N = 0: everything NAN.
 */
#ifndef KOMA_MATCH_REFEREE_H
#define KOMA_MATCH_REFEREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "engine/position.h"
#include "engine/rules.h"
#include "engine/sfen.h"

/* ---- one game ---------------------------------------------------------------- */
enum { REF_START_MAX = SFEN_MAX_LEN + 16, REF_DETAIL_MAX = 192 };

typedef struct {
    pos_t pos;              /* the current position with its whole history */
    char start[REF_START_MAX]; /* "startpos" or the SFEN the game started from */
    int32_t max_ply;           /* move limit as in rules_status (0: none) */
    int32_t n_moves;           /* moves played from start (opening moves included) */
    move_t moves[POS_HIST_MAX];
    rules_end_t end;              /* RULES_END_NONE while the game goes on */
    color_t winner;              /* COLOR_BLACK / COLOR_WHITE, COLOR_NB: draw or not over */
    color_t offender;            /* the side whose act ended the game (resigned, claimed,
                                  illegal move, time, crash, perpetual check); COLOR_NB else */
    bool crashed;              /* ILLEGAL_MOVE because the player's process failed */
    char detail[REF_DETAIL_MAX]; /* how it ended, in words ("" while not over) */
} ref_game_t;

/* Heap object (a Position is large). NULL when out of memory. */
ref_game_t *ref_game_new(void);
void ref_game_free(ref_game_t *g); /* NULL ok */

/* Starts a game from `start`: "startpos", an SFEN, or either prefixed by
 * "sfen " / followed by " moves m1 m2 ..." (opening moves, played and
 * checked here; they count as moves of the game). 0, or -1 with err naming
 * what is wrong. The start may already be over (a mated side to move). */
int ref_game_start(ref_game_t *g, const char *start, int32_t max_ply, char *err, size_t errlen);

static inline bool ref_game_over(const ref_game_t *g) { return g->end != RULES_END_NONE; }
static inline color_t ref_game_side(const ref_game_t *g) { return pos_side_to_move(&g->pos); }

/* The side to move plays m (any 16-bit value: it is checked). Returns the
 * end after it (RULES_END_NONE: play on). */
rules_end_t ref_game_play(ref_game_t *g, move_t m);
/* The side to move answers with USI text: a move ("7g7f", "P*5e", "8h2b+"),
 * "resign" or "win"; surrounding spaces are ignored; anything else is an
 * illegal move. */
rules_end_t ref_game_play_usi(ref_game_t *g, const char *text);
rules_end_t ref_game_resign(ref_game_t *g);
/* The side to move claims the declaration win. */
rules_end_t ref_game_claim_win(ref_game_t *g);
/* side loses: end is RULES_END_TIME or RULES_END_ILLEGAL_MOVE (crashed
 * marks a process failure); detail says what happened. */
rules_end_t ref_game_forfeit(ref_game_t *g, color_t side, rules_end_t end, bool crashed, const char *detail);

/* +1 Black won, -1 White won, 0 draw (db_result_t); 0 while not over. */
int32_t ref_game_result(const ref_game_t *g);
/* The games.reason of an end (RULES_END_NONE -> DB_REASON_ABORT). */
db_reason_t ref_db_reason(rules_end_t end);
/* USI moves of the game separated by single spaces, malloc'ed ("" for none). */
char *ref_game_moves_usi(const ref_game_t *g);
/* The CSA v2.2 ending line of a finished game ("%TORYO", "%TSUMI",
 * "%SENNICHITE", "%+ILLEGAL_ACTION", "%KACHI", "%ILLEGAL_MOVE", "%TIME_UP",
 * "%JISHOGI"); "%CHUDAN" while not over. */
const char *ref_csa_ending(const ref_game_t *g);

/* ---- Elo --------------------------------------------------------------------- */
#define REF_ELO_Z95 1.959963984540054

typedef struct {
    int32_t wins, draws, losses; /* of player A (trinomial; 0 for the pentanomial) */
    int32_t n;                   /* samples: games (trinomial) or pairs (pentanomial) */
    double score;                /* A's mean score per game */
    double elo;                  /* A minus B (finite when n > 0, see the header) */
    double elo_lo, elo_hi;       /* 95% interval; may be +-INFINITY */
    double los;                  /* likelihood of superiority (normal approximation on W - L) */
} ref_elo_t;

/* -400 log10(1/s - 1); +-INFINITY at s = 1 / 0, NAN outside [0, 1]. */
double ref_elo_from_score(double s);
/* The score that gives Elo difference e (inverse of ref_elo_from_score). */
double ref_elo_to_score(double e);
/* From W/D/L of A, trinomial interval. */
void ref_elo_trinomial(int32_t wins, int32_t draws, int32_t losses, ref_elo_t *out);
/* From pair counts: pairs[k] = pairs in which A scored k half-points out of
 * 4 (k = 0..4: lost both, ..., won both). */
void ref_elo_pentanomial(const int32_t pairs[5], ref_elo_t *out);

/* ---- the ladder -------------------------------------------------------------- */
typedef struct {
    int32_t cycle;
    double elo, elo_lo, elo_hi; /* cumulative, cycle 0 = 0 */
    double diff;                /* the measured difference to the cycle it was chained to */
    int32_t from_cycle;         /* that cycle (-1 for cycle 0) */
    int64_t match_id;           /* the matches row used (0 for cycle 0) */
    int32_t games;              /* of that match */
} ref_ladder_point_t;

/* Cumulative Elo by cycle from the matches table: for every cycle a, the
 * latest match (highest id) of model a against an earlier model b of this
 * run gives elo[a] = elo[b] + difference; cycle 0 is 0. The interval widens
 * along the chain: each side's half-width is the root of the sum of the
 * squared half-widths (independent matches). Cycles that chain to no rated
 * cycle are left out, and so are matches against external engines and
 * unfinished ones (no Elo: data/db.h, db_match_begin). Points
 * in increasing cycle order; *out malloc'ed (free()), *n may be 0 (no match
 * yet: not even cycle 0 is listed). */
db_status_t ref_elo_ladder(db_t *db, ref_ladder_point_t **out, int32_t *n);

/* ---- match games in the run database --------------------------------------------
 * Match games are games rows of a matches row (data/db.h, schema v2): the
 * caller opens the row (db_match_begin), stores each game with the call
 * below as it ends, and finishes the row (db_match_finish). */

/* Stores finished game g of match match_id (db_match_begin) with the players'
 * names black and white (NULL = ""), its end reason and detail, in one
 * transaction; the row's W/D/L follow the game when engine_a is one of the
 * two names (see db_match_game_insert). */
db_status_t ref_store_match_game(db_t *db, int64_t match_id, const ref_game_t *g, const char *black,
                                 const char *white);

#endif
