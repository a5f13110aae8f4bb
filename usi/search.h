/* search.h - one `go`: its arguments, its time limits, and the MCTS loop that
 * runs on the search thread with `info` lines.
 *
 * Owns: the parsed form of `go` (usi_go_t), turning it into visit and time
 * limits (mcts/timeman does the clock arithmetic), the collect / evaluate /
 * deliver loop with two batches in flight, the switch from pondering to a
 * timed search at `ponderhit`, the `info` line (depth, seldepth, nodes, nps,
 * time, hashfull, score cp or mate, pv; `multipv k` lines with MultiPV > 1)
 * and the score scale.
 * Does not own: threads and the bestmove decision (session.c), the tree
 * (mcts/), the network (eval.c).
 *
 * Score: the value head's Q = W - L of the chosen move (the root's mean when
 * it has no visits), as expected score s = (1 + Q) / 2, is reported as
 * cp = 600 * log10(s / (1 - s)), i.e. s = 1 / (1 + 10^(-cp / 600)), with s
 * clamped to [0.001, 0.999] (|cp| <= 1799).
 *
 * MultiPV N > 1: N lines `info multipv k ...` for the N most visited root
 * moves (visited ones only, at least one), each with its own Q as score; the
 * first carries the result's PV, each other its own line from the tree (its
 * root move, then the most visited child at each node: mcts_tree_pv).
 *
 * Depth: one leaf of every batch is sampled; depth is the mean sampled leaf
 * depth (plies below the root, rounded, at least 1) and seldepth the deepest.
 * nodes counts this search's playouts (visits), nps = nodes / time.
 */
#ifndef KOMA_USI_SEARCH_H
#define KOMA_USI_SEARCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcts/mcts.h"
#include "mcts/timeman.h"
#include "usi/eval.h"
#include "usi/mate.h"
#include "usi/options.h"
#include "usi/out.h"

/* `go` as parsed; -1 marks an absent number. */
typedef struct {
    int64_t time[2];   /* btime, wtime (ms) */
    int64_t inc[2];    /* binc, winc (ms) */
    int64_t byoyomi;   /* ms */
    int64_t movetime;  /* ms */
    int64_t nodes;     /* visits */
    bool infinite;
    bool ponder;
    bool mate;         /* go mate */
    int64_t mate_ms;   /* go mate <ms>; -1: infinite */
} usi_go_t;

void usi_go_init(usi_go_t *g);
/* Has the go any clock (time, byoyomi, increment or movetime)? */
bool usi_go_timed(const usi_go_t *g);
/* Soft and hard limits for the side to move at game ply `ply`, counted from
 * the moment the move's clock starts. remaining = btime/wtime as given (it is
 * taken to include this move's increment, as timeman.h says). load_per_cpu:
 * the machine's load average per CPU (< 0: unknown), which widens the
 * automatic margins on a loaded machine (timeman.h). */
mcts_time_limits_t usi_go_time_limits(const usi_go_t *g, color_t side, int32_t ply, const usi_options_t *o,
                                      double load_per_cpu);

/* Limits of one search. Times are compat_now_ms() values. The search loop
 * enforces the deadlines itself (the tree gets only the visit budget): past
 * the hard deadline it stops at once; past the soft one it stops as soon as
 * the most visited root move is also the best by Q. No deadline ends a
 * search before one of its playouts has completed (a leaf evaluated by the
 * net and backed up): a search that reaches its deadline without one sends
 * a single leaf at once and answers when it is back (for a fresh root: the
 * root, then one leaf), so no timed move is played unsearched, and the
 * least it plays is the net's own choice at the root. A root with one legal
 * move is searched by one playout and answered. It does not wait for
 * batches still on the device: the answer is given from the tree as it
 * stands, and usi_search_finish takes those batches in afterwards. So that
 * little is left running when the answer goes out (the next move would wait
 * for it), a timed search sizes each batch to what should finish before the
 * hard deadline (from the measured device time per position, behind the
 * batch in flight), keeps one batch in flight, not two, once past the soft
 * deadline, and answers at once when nothing more fits. */
/* A search stopped (`stop`) before any playout completed (stop right after
 * go) waits at most this long for the batches on the device, so that stop
 * is answered with a searched move (about a millisecond on an idle machine;
 * this bounds the wait on a loaded one). */
enum { USI_ROOT_WAIT_MS = 200 };

typedef struct {
    int64_t visits;   /* playouts; <= 0: unbounded (time, stop or a full pool) */
    int64_t soft_ms;  /* deadlines; 0 = none (ignored while pondering) */
    int64_t hard_ms;
    bool ponder;      /* no deadline until ponderhit at time T, then: */
    int64_t soft_rel; /* T + soft_rel, T + hard_rel (0 = none) */
    int64_t hard_rel;
} usi_search_limits_t;

typedef struct {
    mcts_tree_t *tree;
    usi_eval_t *eval;
    usi_out_t *out;
    usi_batch_t *batch[2];            /* two batches in flight with a net; batch[1] may be NULL */
    int32_t batch_size;
    const atomic_int *stop;        /* nonzero: stop now */
    /* true once ponderhit has arrived, *at_ms its time; NULL: never */
    bool (*ponderhit)(void *user, int64_t *at_ms);
    void *user;
    int64_t start_ms;              /* when the go arrived (info time) */
    int64_t info_interval_ms;      /* 1000 */
    pos_t *scratch;             /* depth sampling */
    mcts_result_t *res;               /* out: the final result */
    int32_t multipv;                  /* info lines per report (MultiPV); <= 1: one, without `multipv` */
    /* a proven mate (set by the caller before usi_search_info): > 0 the side
     * to move mates in `mate` plies, < 0 it is mated in -mate plies; 0 none.
     * The info line then says `score mate <mate>` with mate_pv as its pv. */
    int32_t mate;
    int32_t mate_len;
    move_t mate_pv[USI_MATE_PLY_MAX + 1];
    /* out */
    int64_t playouts;
    int64_t elapsed_ms;
    int32_t depth, seldepth;
    /* private */
    atomic_int halt_;              /* the tree's stop flag */
    bool warned_;
    bool searched_;                /* a playout of this search has completed */
    bool forced_;                  /* ... and the root has one legal move */
    int64_t depth_sum_, depth_n_;
    double pos_ms_;                /* device time per position (moving average; 0 = unknown) */
    int64_t submit_ms_[2], last_done_ms_;
} usi_search_t;

/* Runs the search to its limits or the stop flag, printing an info line
 * every info_interval_ms, and fills s->res (batches may still be in flight). */
void usi_search_run(usi_search_t *s, const usi_search_limits_t *lim);
/* Stops the tree and takes in every batch still in flight, waiting for them
 * (the tree is then ready for the next search). */
void usi_search_finish(usi_search_t *s);
/* Takes in the batches of the last search that have finished, without
 * waiting; returns how many are still in flight. */
int32_t usi_search_take_in(usi_search_t *s);
/* The value of the move the result plays (Q of the chosen child, the root's
 * mean when it has no visits), for the root's side to move, in [-1, 1]. */
float usi_result_value(const mcts_result_t *res);
/* cp of a value Q (see above). */
int32_t usi_value_to_cp(float q);
/* Writes the info line of s->res; also used for the final line. */
void usi_search_info(usi_search_t *s);

#endif
