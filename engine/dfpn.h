/* dfpn.h - df-pn: a depth-first proof-number mate search over checks.
 *
 * Owns: the proof-number search for the side to move (OR nodes: its legal
 * checking moves; AND nodes: every legal evasion of the defender), its
 * transposition table (a fixed size given by the caller, clusters of four,
 * replacement of the entry with the least work, older searches first), the
 * shortening of a found mate by re-searching with a smaller depth bound, and
 * the mate PV.
 * Does not own: the clock (the caller sets the stop flag or gives a poll
 * callback), threads, USI text, the iterative-deepening `go mate` of usi/.
 *
 * The search: df-pn (Nagai) with the 1 + epsilon threshold trick (Pawlewicz
 * and Lew: a child's threshold is the second best value times 1.25, plus
 * one, not plus one), mate in one (engine/mate1) at every OR node, and as a
 * checking move's initial proof number the defender's number of legal replies
 * (df-pn+'s heuristic initial values; a reply count of 0 is a mate at once).
 * Table entries are keyed by the board (with the side to move) and the
 * attacker's hand: a proof also holds for any hand that has at least as much
 * of every piece (the defender then holds less: the total is fixed), a
 * disproof for any hand that has at most as much.
 *
 * Rules: only legal moves (movegen: no pawn-drop mate, no nifu, no self
 * check), so uchifuzume is never part of a proof; a position that repeats
 * one on the path or in the game history (rules_repetition_first) is a
 * disproof for the attacker there (perpetual check is a loss for the
 * checker, a repetition never helps him); a defender with no legal move is
 * mated.
 *
 * Depth: every value carries the remaining depth it was found with. A proof
 * stores its length (plies: 1 + the shortest proven child at an OR node,
 * 1 + the longest at an AND node) and is used only where that length fits
 * the remaining depth; a disproof stores the remaining depth up to which it
 * holds (a depth cut, or a repetition on the path: for that depth, and not
 * for more), or that it holds at any depth (no check left to give).
 *
 * Depth bounds: the root is searched with a bound of 31 plies first; a
 * disproof that holds only up to the bound (not a final one) is searched
 * again with 63, 127, 255 (up to max_plies), the table kept.
 *
 * Answers and what is guaranteed:
 *  - DFPN_PROVEN: pv (len plies, odd) is a mate: every move legal, every
 *    attacker move a check, the last position mated (checked again move by
 *    move before it is returned). len is a proof's length, an upper bound of
 *    the shortest mate. After the first proof the root is searched again
 *    with the bound len - 2 while the node budget lasts; `shortest` is set
 *    when the last such re-search ended in a disproof: then there is no
 *    mate in len - 2 plies or fewer, up to the graph-history interaction of
 *    repetition disproofs (a repetition met on one path may be reused on
 *    another at the same or a smaller depth; it can hide a mate, it can
 *    never make one).
 *  - DFPN_DISPROVEN: no mate within max_plies (a repetition disproof, as
 *    above, may hide a mate; it never makes a false proof).
 *  - DFPN_UNKNOWN: the node budget, the stop flag or the poll callback ended
 *    the search first.
 *
 * Threads: a dfpn_t is used by one thread at a time; the stop flag may be
 * set from any thread and is looked at every 256 nodes.
 */
#ifndef KOMA_ENGINE_DFPN_H
#define KOMA_ENGINE_DFPN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/position.h"

enum { DFPN_PLY_MAX = 255 }; /* longest mate searched and reported, in plies (odd) */

typedef enum { DFPN_PROVEN = 0, DFPN_DISPROVEN, DFPN_UNKNOWN } dfpn_status_t;

typedef struct {
    int64_t max_nodes;      /* 0 = none; the shortening may use 1/4 more, the PV 20000 more */
    int32_t max_plies;      /* longest mate looked for, 1..DFPN_PLY_MAX; 0: DFPN_PLY_MAX */
    const atomic_int *stop; /* NULL = none; nonzero stops the search */
    /* NULL = none; called every 256 nodes, true stops the search (a clock) */
    bool (*poll)(void *user);
    void *poll_user;
    bool shorten; /* after a proof, look for shorter mates (re-search with len - 2) */
} dfpn_limits_t;

typedef struct {
    dfpn_status_t status;
    int32_t len;              /* plies of pv (odd) when PROVEN */
    bool shortest;            /* PROVEN: no shorter mate (see above) */
    move_t pv[DFPN_PLY_MAX];  /* attacker, defender, ..., attacker's mating move */
    int64_t nodes;            /* nodes searched (mid calls) */
} dfpn_result_t;

typedef struct dfpn dfpn_t;

/* A solver with a table of about tt_bytes (at least 4 KiB; rounded down to
 * a power of two of 128-byte clusters). NULL when out of memory. */
dfpn_t *dfpn_new(size_t tt_bytes);
void dfpn_free(dfpn_t *d); /* NULL ok */
/* Empties the table (a search keeps what earlier ones learnt otherwise). */
void dfpn_clear(dfpn_t *d);
/* Bytes of the table. */
size_t dfpn_tt_bytes(const dfpn_t *d);
void dfpn_limits_default(dfpn_limits_t *lim);
/* Searches pos (the side to move attacks). pos is scratch: moves are made
 * and taken back; it is unchanged on return. */
void dfpn_search(dfpn_t *d, pos_t *pos, const dfpn_limits_t *lim, dfpn_result_t *res);
/* Is pv a mate from pos: every move legal, every attacker move a check, the
 * last position mated? */
bool dfpn_verify(const pos_t *pos, const move_t *pv, int32_t len);

#endif
