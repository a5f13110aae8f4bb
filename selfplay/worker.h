/* worker.h - the self-play worker threads and what they share.
 *
 * Owns: the worker threads, each driving games_per_thread game slots at once
 * in two halves so that tree work overlaps device work (submit half A's
 * leaves; collect and submit half B's; wait for A and deliver; collect and
 * submit A again; wait for B ...), the label lists that make the server
 * return only legal moves' logits, clearing the shared NN cache when a new
 * net generation answers, pausing, stopping, and the queue of finished game
 * records.
 * Does not own: the games themselves (game.c), what happens to records
 * (driver.c), the inference server (nn/server.h).
 *
 * Threads: sp_pool_* calls come from the driver thread; the records queue
 * and the pause flag are under one mutex; counters are atomics.
 * Stopping drops the games in progress (they are never recorded).
 */
#ifndef KOMA_SELFPLAY_WORKER_H
#define KOMA_SELFPLAY_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcts/cache.h"
#include "nn/server.h"
#include "selfplay/config.h"
#include "selfplay/game.h"

typedef struct sp_pool sp_pool_t;

/* Counters summed over the workers (monotonic since sp_pool_new). */
typedef struct {
    int64_t leaves;        /* positions sent to the server */
    int64_t submissions;   /* server submissions */
    int64_t searches;      /* moves searched */
    int64_t playouts;      /* playouts of those searches */
    int64_t games;         /* games finished (records queued) */
    int32_t active;        /* game slots with a game in progress */
} sp_pool_stats_t;

/* Makes cfg->threads workers with cfg->games_per_thread slots each (not yet
 * running). seed: the random stream of this invocation. cache may be NULL.
 * NULL with err when out of memory. */
sp_pool_t *sp_pool_new(const sp_config_t *cfg, nn_server_t *server, mcts_cache_t *cache, uint64_t seed, char *err,
                       size_t errlen);
/* Starts the threads: 0, or -1 with err. */
int sp_pool_start(sp_pool_t *p, char *err, size_t errlen);
/* Paused workers finish the batches they have in flight and wait; their
 * games are kept and go on when unpaused. */
void sp_pool_pause(sp_pool_t *p, bool paused);
/* Once `games` games have finished (sp_pool_stats' games), no game begins
 * and the workers pause as sp_pool_pause does, until the limit is raised;
 * -1: no limit (the start). Rank 0's driver paces its pool with this alone:
 * a pause from the driver would come after it had taken and counted the
 * records, and a loaded machine can hold it back for a whole cycle's games;
 * this one is applied where a game would begin. */
void sp_pool_limit(sp_pool_t *p, int64_t games);
/* Moves up to max finished records into out (the caller owns them); returns
 * how many. With timeout_ms > 0 waits that long for the first one. */
int32_t sp_pool_take(sp_pool_t *p, sp_record_t **out, int32_t max, int64_t timeout_ms);
/* Stops and joins the workers (games in progress are dropped; records
 * already queued stay for sp_pool_take). Idempotent. */
void sp_pool_stop(sp_pool_t *p);
/* Frees (stops first; queued records are freed). NULL ok. */
void sp_pool_free(sp_pool_t *p);
void sp_pool_stats(sp_pool_t *p, sp_pool_stats_t *st);
/* 1 with the first worker failure's message (a server error), else 0. */
int sp_pool_error(sp_pool_t *p, char *err, size_t errlen);

#endif
