/* window.h - the training window: which recent positions are trained on, the
 * shards that hold them, and uniform minibatch sampling from them.
 *
 * Owns: a cache of open shards (each shard_open'ed once, i.e. mapped and
 * checksum-verified once, and kept while it stays in the window), the list of
 * bad shards (reported once by path, then skipped), the choice of the most
 * recent `want` rows, and deterministic sampling: a batch is a pure function
 * of (the window, key). Does not own: which shards are candidates (the caller
 * lists them from koma.db), shard validation (data/shard.c), training.
 *
 * "Device memory": on the CPU backend the mapped shards are the resident
 * window and a minibatch is gathered from them into host buffers that
 * nn_train_step reads. (A CUDA variant would upload each shard's columns once
 * when it enters the window and gather rows on the device; see the report in
 * train/trainer.c's header comment.)
 *
 * Threads: one thread at a time.
 */
#ifndef KOMA_TRAIN_WINDOW_H
#define KOMA_TRAIN_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "data/shard.h"
#include "train/trainer.h"

typedef struct train_window train_window_t;

/* Shards are read from <run_dir>/<db path> with format fmt. log may be NULL (stderr). */
train_window_t *train_window_new(const char *run_dir, const shard_format_t *fmt, train_log_fn log,
                                 void *log_user, char *err, size_t errlen);
void train_window_free(train_window_t *w); /* NULL ok */

/* Rows of the shards in list[0..n) whose cycle is in (lo, hi] (lo < 0 and hi
 * < 0: no bound on that side) and whose features_version is fv. */
int64_t train_window_count(const db_shard_t *list, int32_t n, int32_t fv, int64_t lo, int64_t hi);

/* Chooses the window: walking list (oldest first, as db_shards_recent gives
 * it) from its newest end, shards with cycle <= max_cycle (< 0: all) and
 * features_version fmt.features_version are opened (or found in the cache)
 * and taken until `want` rows are reached (want <= 0: all); the oldest shard
 * taken contributes its last rows only. Bad shards are reported (once) and
 * skipped; shards that left the window are closed. Returns 0 with
 * *positions = rows in the window (may be 0) and *bad = bad shards met, or
 * -1 with err (out of memory). */
int train_window_select(train_window_t *w, const db_shard_t *list, int32_t n, int64_t max_cycle, int64_t want,
                        int64_t *positions, int32_t *bad, char *err, size_t errlen);
int64_t train_window_positions(const train_window_t *w);
int32_t train_window_shards(const train_window_t *w); /* shards the window spans */

/* Clears batch and gathers B rows drawn uniformly with replacement from the
 * window by an RNG seeded with key; rows are grouped by shard (sorted), so
 * the batch is the same for the same (window, key). Returns 0, or -1 with err
 * (empty window, batch too small). */
int train_window_sample(train_window_t *w, uint64_t key, int32_t B, shard_batch_t *batch, char *err,
                        size_t errlen);

/* Mixes numbers into a sampling key (splitmix64 steps). */
uint64_t train_key(uint64_t seed, int64_t a, int64_t b);

#endif
