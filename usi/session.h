/* session.h - the engine behind the USI protocol: the game position, the
 * options, the net, the search thread and its answers.
 *
 * Owns: what each command does once usi.c has parsed it; the search thread
 * (one at a time) and the rule that the reader never waits for a search
 * (isready, stop, ponderhit, gameover and quit are answered while one runs);
 * tree reuse between `position` commands; the bestmove decision (declaration
 * win, resignation, the ponder move) and `checkmate` answers.
 * Does not own: parsing (usi.c), the search loop and info lines (search.c),
 * the net (eval.c), options (options.c), mate search (mate.c, engine/dfpn.c;
 * `go mate` is df-pn within DfpnHash).
 *
 * Threads: every function here is called from the one reader thread. The
 * search thread owns the tree, the evaluator and the batches while it runs;
 * the reader touches them only when no search is running (after joining a
 * finished thread), so `isready` during a search answers `readyok` at once
 * and loads nothing.
 *
 * Positions: `position ... moves a b c` with an illegal move c keeps the
 * legal prefix (a b) and says which move was refused; a bad SFEN leaves the
 * previous position untouched. Before any `position` the start position is set.
 *
 * The net: `isready` (and `go`, when options changed since) makes the
 * evaluator serve Net and Backend. One that cannot be used (missing,
 * unreadable, not a net, NaN values, no GPU for cuda, no shipped net for an
 * empty Net) is `info string Error: <path>: <reason>`, the same line on
 * stderr, and no readyok / no search: the caller (main.c) ends koma with
 * status 1. Net `none` is the uniform evaluator, asked for (tests). A
 * Threads value the machine cannot start (a `ulimit -v` too small for that
 * many stacks: the OpenMP runtime ended koma) is `info string Error:
 * Threads N: ...; using M` with M that it can, and koma plays on.
 *
 * Decisions for a `go` (in this order): the side to move has no legal move:
 * `bestmove resign`; the side to move can declare under EnteringKingRule
 * (rules_can_declare_by; never with NoEnteringKing): `bestmove win`; a mate
 * within 7 plies found by a bounded mate search (mate.h): `score mate N` and
 * its first move, without the MCTS; otherwise search (beside it, with
 * DfpnNodes > 0, df-pn on a thread of its own: a mate it proves halts the
 * MCTS and is played, `score mate N` with its PV; with none, it looks
 * whether every reply is answered by the opponent's mate (a table of its
 * own): a proof halts the MCTS too and the longest resistance is played,
 * `score mate -N`; the thread is told to stop when the search ends, its
 * result used if it has one, and it is joined after the answer, which
 * never waits for it), then `bestmove resign` when
 * ResignThreshold > 0 and the chosen move's (1 + Q) / 2 is below it, else
 * `bestmove <move> [ponder <move>]` (ponder move: the PV's second move, only
 * with USI_Ponder on). When Q < -0.8 and every legal move is answered by a
 * mate (bounded searches), the move that resists longest is played and the
 * score is `mate -N`. `go infinite` and `go ponder` hold the answer until
 * stop (or ponderhit), even when the search ends sooner. A timed search
 * also keeps back the engine's own lateness: the second largest of how late
 * its last USI_LATE_MOVES timed answers came after their hard deadline, at
 * most a quarter of the time (session.c).
 *
 * Every go gets exactly one bestmove: a `go` during a search stops it (its
 * bestmove first) and then searches; `stop` followed at once by `gameover`,
 * `quit` or end of input still prints the stopped search's bestmove (before
 * koma exits). After `gameover` or `quit` without a stop, a running search
 * is stopped and prints no bestmove (the game is over, the GUI gone).
 *
 * Limits: `go nodes N` or NodeLimit caps the visits (`go infinite`: only
 * `go infinite nodes N` does); a clock (btime/wtime,
 * byoyomi, binc/winc, movetime) sets deadlines through mcts/timeman counted
 * from the moment the `go` line was read (so a net loaded at go, when no
 * isready came since Net was set, costs its own clock and is read before a
 * stop sent meanwhile); a `go` (or `go ponder`) with neither a clock
 * nor a visit limit searches USI_GO_DEFAULT_VISITS visits. USI_Hash sizes
 * the tree (USI_BYTES_PER_NODE a node) and the result cache (1/8 more); when
 * the memory cannot be had, the tree is halved until it can. Gumbel search needs a visit budget:
 * without one it is estimated from the previous search's speed and the
 * soft time limit (at least 64).
 */
#ifndef KOMA_USI_SESSION_H
#define KOMA_USI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "usi/out.h"
#include "usi/search.h"

#define USI_ENGINE_NAME "Koma"
#define USI_ENGINE_AUTHOR "the Koma authors"
enum { USI_GO_DEFAULT_VISITS = 800 };
enum { USI_BYTES_PER_NODE = 640 }; /* a tree node, its ~48 edges and slack (mcts.h: ~620) */

typedef struct usi_session usi_session_t;

/* write: where lines go (NULL: stdout). NULL when out of memory. */
usi_session_t *usi_session_new(usi_write_fn_t write, void *user);
/* Stops a running search (no bestmove), joins it and frees everything. NULL ok. */
void usi_session_free(usi_session_t *s);
/* info string <text> */
void usi_session_say(usi_session_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void usi_session_usi(usi_session_t *s);
/* readyok; or -1 (no readyok) after `info string Error: ...` (and the same
 * on stderr) when the Net or Backend asked for cannot be used: the caller
 * ends koma with a nonzero status. */
int usi_session_isready(usi_session_t *s);
void usi_session_setoption(usi_session_t *s, const char *name, const char *value);
void usi_session_newgame(usi_session_t *s);
/* sfen: "startpos" or SFEN text (sfen_len bytes); moves[i] (lens[i] bytes) in USI notation. */
void usi_session_position(usi_session_t *s, const char *sfen, size_t sfen_len, const char *const *moves,
                          const size_t *lens, int32_t n);
/* received_ms: compat_now_ms() when the line was read. Returns 0, or -1 as
 * isready when the net (loaded here if options changed since isready)
 * cannot be used: no search starts and no bestmove comes. */
int usi_session_go(usi_session_t *s, const usi_go_t *g, int64_t received_ms);
void usi_session_stop(usi_session_t *s);
void usi_session_ponderhit(usi_session_t *s);
/* result: "win", "lose", "draw" or NULL. */
void usi_session_gameover(usi_session_t *s, const char *result);
/* Joins a running search: one already told to stop (`stop`, then quit or
 * end of input) gives its bestmove first; any other is stopped without one. */
void usi_session_quit(usi_session_t *s);
/* Blocks until the running search (if any) has given its answer. For
 * command-line commands and tests; never for infinite or ponder searches. */
void usi_session_wait(usi_session_t *s);
bool usi_session_searching(usi_session_t *s);
/* The current game position (for tests). */
const pos_t *usi_session_position_now(const usi_session_t *s);

#endif
