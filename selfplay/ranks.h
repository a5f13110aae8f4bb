/* ranks.h - `selfplay` over several ranks (mpirun -np N selfplay ...): what
 * rank 0 does for the others, and the whole life of a rank that only plays.
 *
 * Owns: rank 0's view of the other ranks (their hello: host, pid, backend,
 * device; their rates from their stats messages; the games they send,
 * decoded by selfplay/wire.h and handed to the driver with their rank and
 * host), the sending of every net the run registers (the file's bytes,
 * checked against the XXH3 koma.db holds before they go), pause orders, the
 * end of the job (STOP to every rank, then the drain until each has said BYE,
 * bounded); and sp_remote_run, a playing rank: its own inference server and
 * self-play workers on its own device (the node-local rank picks the CUDA
 * device), nets received, verified, loaded and hot-swapped, finished games
 * sent to rank 0, its rates every second.
 * Does not own: the run (driver.c on rank 0 alone opens it; a playing rank
 * never touches the run directory, so nodes need no shared file system),
 * committing games (driver.c's handle_record, the same path as local games),
 * moving bytes (dist/dist.h's mailbox), the message layouts (wire.h).
 *
 * Protocol (tags in wire.h): rank r -> 0: HELLO once, GAME per finished
 * game, STATS every second, ERROR when it cannot go on, BYE last; a
 * training rank (--train-ranks, selfplay/trainrank.h) sends HELLO, TRAINED
 * per cycle (logged here), ERROR and BYE, and gets PLAN per cycle. 0 -> r: NET
 * at start and for every published model (down a tree: a rank passes each
 * NET it receives on to its children, after checking it and before loading
 * it; sp_ranks_children), PAUSE on changes, STOP at the end
 * (exit code: 0 done, 1 error, 130 interrupted). A playing rank never
 * decides the end alone: on its own failure it sends ERROR and waits for
 * STOP; on Ctrl-C/SIGTERM it sends BYE, and rank 0 ends the job as
 * interrupted. Every wait is bounded; a rank that cannot finish cleanly in
 * time ends the job with dist_abort (mpirun then stops every rank; nothing
 * committed is lost, as after kill -9).
 * Games in flight when a rank dies, or after STOP, are not committed.
 * Threads: the driver thread (rank 0) or the main thread (a playing rank).
 */
#ifndef KOMA_SELFPLAY_RANKS_H
#define KOMA_SELFPLAY_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compat/runlog.h"
#include "dist/dist.h"
#include "selfplay/config.h"
#include "selfplay/game.h"

typedef struct sp_ranks sp_ranks_t;

/* Rank 0's side, over a started mailbox; nets go down the tree of fan-out
 * `fanout` (sp_ranks_children; 0: to every rank). NULL when out of memory. */
sp_ranks_t *sp_ranks_new(dist_t *dist, dist_mail_t *mail, int32_t fanout, runlog_fn log, void *user);
/* The ranks that rank passes each net on to in a job of size ranks: rank 0's
 * and every rank's children in the tree of fan-out `fanout` (ranks r*F+1 ..
 * r*F+F below size); fanout 0: rank 0's children are all the other ranks, the
 * others have none. Writes at most max into out; returns the count. */
int32_t sp_ranks_children(int32_t rank, int32_t size, int32_t fanout, int32_t *out, int32_t max);
#define SP_NET_FANOUT_MAX 64 /* --net-fanout's largest value */
/* Sends a NET or PAUSE message from rank to its children in the tree
 * (*sent := how many; rank 0 of a small job or fan-out 0: one copy shared
 * by every other rank): 0, or -1 with err. */
int sp_ranks_tree_down(dist_mail_t *mail, int32_t rank, int32_t size, int32_t fanout, int32_t tag, const uint8_t *msg,
                       int64_t len, int32_t *sent, char *err, size_t errlen);
/* Ranks 1..train_ranks-1 train with rank 0 (--train-ranks) and do not
 * play: left out of the per-rank rates. */
void sp_ranks_set_train_ranks(sp_ranks_t *k, int32_t train_ranks);
void sp_ranks_free(sp_ranks_t *k); /* NULL ok */

/* Sends model `cycle` (file at path, registered XXH3 hex) and the session
 * seed to every other rank. 0, or -1 with err (the file does not match its
 * registered hash, cannot be read, or the sends did not get out in time). */
int sp_ranks_send_net(sp_ranks_t *k, int64_t cycle, uint64_t seed, const char *path, const char *xxh3_hex, char *err,
                      size_t errlen);
/* Tells the playing ranks to pause (or go on); sent only on a change. */
int sp_ranks_pause(sp_ranks_t *k, bool paused, char *err, size_t errlen);

/* A game from a playing rank. */
typedef struct {
    sp_record_t *rec; /* the caller frees it */
    int32_t rank;
    const char *host; /* valid while k lives */
} sp_ranks_game_t;

enum { SP_RANKS_OK = 0, SP_RANKS_FAILED = -1, SP_RANKS_LEFT = -2 };
/* Takes up to max games that arrived, handling the other messages on the
 * way (hello, stats, bye, error). Returns the count, SP_RANKS_FAILED with err
 * (a rank's error, a malformed message, an MPI failure), or SP_RANKS_LEFT
 * with err when a rank said BYE (it was interrupted: the job ends as
 * interrupted). timeout_ms: wait for the first message. */
int32_t sp_ranks_take(sp_ranks_t *k, sp_ranks_game_t *out, int32_t max, int64_t timeout_ms, char *err, size_t errlen);
/* Moves searched by the other ranks, in all (their last stats). */
int64_t sp_ranks_searches(const sp_ranks_t *k);
/* Per-rank rates since the previous call, for the progress line:
 * "r1 12.3, r2 11.0" (positions searched per second, from each rank's last
 * stats); returns their sum. */
double sp_ranks_describe(sp_ranks_t *k, char *buf, size_t n);

/* Ends the job: STOP(code) to every rank, then the messages drained until
 * every rank said BYE or timeout_ms passed; games that still arrive go to
 * on_game (may be NULL: freed) when keep. 0, or -1 with err when some rank
 * did not answer in time (the caller then ends the job with dist_abort). */
int sp_ranks_finish(sp_ranks_t *k, int32_t code, int64_t timeout_ms, void (*on_game)(void *user, sp_ranks_game_t *g),
                    void *user, char *err, size_t errlen);

/* A playing rank (rank >= 1): runs until rank 0 says STOP. Returns the
 * process exit code (SP_EXIT_*). */
int sp_remote_run(const sp_config_t *cfg, dist_t *dist);

/* The log of a rank other than 0: lines on stderr as "selfplay rank R
 * (HOST): ...", none when quiet (playing ranks here, training ranks in
 * selfplay/trainrank.c). */
runlog_sink_t sp_rank_sink(int32_t rank, const char *host, bool quiet);

#endif
