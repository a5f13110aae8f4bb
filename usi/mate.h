/* mate.h - an iterative-deepening mate search over checks (tsume) for the
 * side to move: the bounded checks around each go (session.c: a mate within
 * 7 plies at the root, the opponent's mates after each of our moves) and the
 * tests' exhaustive reference (test_usi_mate, test_usi_tsume). `go mate`
 * itself uses df-pn (engine/dfpn.h); this search was `go mate` before it.
 *
 * Owns: an iterative-deepening AND/OR search (the attacker plays only
 * checks, the defender every legal evasion) with a transposition table,
 * mate in one at the attacker's last move (engine/mate1), move ordering by
 * the defender's reply count, and the extraction of a mating line in which
 * the attacker mates as fast as it can and the defender resists as long as
 * it can.
 * Does not own: the clock (the caller gives a deadline and a stop flag), USI
 * text (session.c prints `checkmate ...`).
 *
 * Rules: a defender reply that repeats an earlier position (in the line or
 * the game) escapes (perpetual check is no mate); pawn-drop mate is never
 * played (movegen does not produce it).
 * Answers: FOUND with the line; NONE when there is no mate within max_plies
 * (every iteration up to it finished), found early when it is proven
 * outright (every line ends with no check left to give, without a
 * repetition escape); TIMEOUT when time, the stop flag or the node limit
 * ended the search first.
 */
#ifndef KOMA_USI_MATE_H
#define KOMA_USI_MATE_H

#include <stdatomic.h>
#include <stdint.h>

#include "engine/position.h"

enum { USI_MATE_PLY_MAX = 63 }; /* longest mate searched, in plies (odd) */

typedef enum { USI_MATE_FOUND = 0, USI_MATE_NONE, USI_MATE_TIMEOUT } usi_mate_status_t;

typedef struct {
    int64_t deadline_ms;    /* compat_now_ms() time; 0 = none */
    const atomic_int *stop; /* NULL = none; nonzero stops the search */
    int32_t max_plies;      /* longest mate looked for, 1..USI_MATE_PLY_MAX (odd; even is rounded down) */
    int64_t max_nodes;      /* 0 = none */
    int32_t tt_log2;        /* transposition table of 2^tt_log2 entries (16 bytes each); 0: 20 */
} usi_mate_limits_t;

typedef struct {
    usi_mate_status_t status;
    int32_t len;                  /* plies of pv (odd) when FOUND */
    move_t pv[USI_MATE_PLY_MAX];    /* attacker, defender, ..., attacker's mating move */
    int64_t nodes;
    int32_t depth;                /* deepest iteration finished (plies) */
} usi_mate_result_t;

void usi_mate_limits_default(usi_mate_limits_t *lim);
/* Searches pos (side to move attacks). pos is scratch: moves are made and
 * taken back, it is unchanged on return. */
void usi_mate_search(pos_t *pos, const usi_mate_limits_t *lim, usi_mate_result_t *res);
/* Is pv a mate: every move legal, every attacker move a check, the last
 * position mated? (The tests' and the search's own final check.) */
bool usi_mate_verify(const pos_t *pos, const move_t *pv, int32_t len);

#endif
