/* window.h - the training window: which recent positions are trained on, the
 * shards that hold them, and minibatch sampling from them (uniform, or
 * weighted by policy surprise).
 *
 * Owns: a cache of open shards (each shard_open'ed once, i.e. mapped and
 * checksum-verified once, when a batch first draws from it, and kept while
 * it stays in the window), the list of
 * bad shards (reported once by path, then skipped), the choice of the most
 * recent `want` rows, and deterministic sampling: a batch is a pure function
 * of (the window, key). Does not own: which shards are candidates (the caller
 * lists them from koma.db), shard validation (data/shard.c), training.
 *
 * Two routes to a minibatch. On the host (train_window_sample) the mapped
 * shards are the window and the rows are copied into host buffers that
 * nn_train_step uploads. Resident (train_window_resident, the default on a
 * GPU): each shard's columns are uploaded into the trainer backend's memory
 * once, one piece a column, when the shard enters the window, and freed when
 * it leaves; a step uploads only its rows' references and policy offsets (12
 * bytes a row) and gather_rows (nn/backend.h) assembles the batch in the
 * trainer's staging. Both routes draw the same rows in the same order, so the
 * losses and weights are the same bit for bit.
 *
 * Targets derived once a shard, as it enters the cache, and used by both
 * routes: the value column (q_lambda), the soft policy (policy_temp), and
 * every row's move label (train_move_labels): the opponent-reply target of
 * the row before is a one-hot on it where this row has no policy target
 * (shard_row_reply).
 *
 * Threads: one thread at a time.
 */
#ifndef KOMA_TRAIN_WINDOW_H
#define KOMA_TRAIN_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "data/shard.h"
#include "train/config.h"

typedef struct train_window train_window_t;

/* Shards are read from <run_dir>/<db path> with format fmt. log may be NULL (stderr). */
train_window_t *train_window_new(const char *run_dir, const shard_format_t *fmt, train_log_fn log,
                                 void *log_user, char *err, size_t errlen);
void train_window_free(train_window_t *w); /* NULL ok */

/* The value column trained on: each row's root_q (lambda 0, the default)
 * or its lambda-return over the next rows of its game (shard_q_lambda),
 * computed once when a shard enters the cache and used by both routes.
 * Called before the first train_window_select. 0, or -1 with err (lambda
 * outside [0, 1), or shards already open). */
int train_window_set_q_lambda(train_window_t *w, float lambda, char *err, size_t errlen);

/* The soft policy target (--policy-target-temp): each row's policy entries
 * raised to the power 1/temp and scaled back to the row's sum (1 for a
 * search's target), computed once when a shard enters the cache and used by
 * both routes; temp 1 (the default) trains on the column as stored. Called
 * before the first train_window_select. 0, or -1 with err (temp outside
 * [0.1, 10], or shards already open). */
int train_window_set_policy_temp(train_window_t *w, float temp, char *err, size_t errlen);

/* Policy-surprise weighting (--surprise-weight, KataGo): from the next
 * train_window_select on, a row is drawn with probability proportional to
 * (1 - s) + s * surprise / mean, the mean over the window's rows that have a
 * policy target and a surprise (data/shard.h); rows without either weigh as
 * the mean (1). s = 0 (the default), or a window without surprises, samples
 * uniformly: the same batches as without weighting. 0, or -1 with err (s
 * outside [0, 1]). */
int train_window_set_surprise_weight(train_window_t *w, float s, char *err, size_t errlen);

/* out[r] (shard_rows(s)) = row r's played move's label in its side to move's
 * view: encode_move_label of its move column in its position column's
 * position, or SHARD_LABEL_UNKNOWN where that is no label (MOVE_NONE, a
 * move with no direction) or a label the row's legal mask does not hold (not
 * a legal move there; shards whose mask is narrower than the labels are not
 * checked). What self-play once stored as the move_label column, without a
 * replay of the game. 0, or -1 when out of memory. */
int train_move_labels(const shard_t *s, uint16_t *out);

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
int32_t train_window_shards(const train_window_t *w); /* shards the window spans */

/* Clears batch and gathers B rows drawn with replacement from the window
 * (uniformly, or by surprise weight) by an RNG seeded with key; rows are grouped by shard (sorted), so
 * the batch is the same for the same (window, key). Returns 0, or -1 with err
 * (empty window, batch too small). */
int train_window_sample(train_window_t *w, uint64_t key, int32_t B, shard_batch_t *batch, char *err,
                        size_t errlen);

/* Makes the planes, hand and legal-move mask of every batch row gathered
 * from a version-2 shard (batch->expand) from its position, with
 * engine/encode (the functions self-play and koma use), so that they equal
 * what a version-1 shard stored for the same position, bit for bit. The
 * batch's format must be this build's features (ENC_*). Called by
 * train_window_sample; callers that gather with shard_row_batch* call it
 * before the batch is used. 0, or -1 with err. */
int train_batch_expand(shard_batch_t *batch, char *err, size_t errlen);

/* From the next train_window_select on, keeps the window's rows in be's
 * memory (be: the trainer's backend, which must have gather_rows), at most
 * cap_bytes in all (<= 0: no cap). When a select finds the cap or the
 * backend's memory short, residency ends (one log line names why) and the
 * host route goes on. be NULL: the host route from now on (the resident
 * copies freed). 0, or -1 with err (be cannot gather rows). The resident
 * copies are freed through be: end residency (be NULL, or train_window_free)
 * before be is freed. */
int train_window_resident(train_window_t *w, nn_backend_t *be, int64_t cap_bytes, char *err, size_t errlen);
int train_window_is_resident(const train_window_t *w);
int64_t train_window_resident_bytes(const train_window_t *w); /* held in be's memory now */
/* train_window_sample's rows for key, gathered on the resident window's
 * backend into tr's staging (queued behind tr's work: the step before has
 * read its batch by the time they land); *bt = the staged batch, whose
 * policy_offsets (host) stay valid until the next call. 0, or -1 with err
 * (not resident on tr's backend, empty window, B over tr's max_batch). */
int train_window_gather(train_window_t *w, uint64_t key, int32_t B, nn_optim_t *tr, nn_batch_t *bt, char *err,
                        size_t errlen);

/* eager 1 (the default: selfplay's trainer, whose window is recent and
 * whose bad shards count at select): every shard of the window is opened
 * (mapped, its checksums verified, its values checked) when it is selected.
 * eager 0 (train --from-games without --verify-shards): a shard joins the
 * window by its koma.db row and is opened the first time a batch draws from
 * it, so a start costs nothing per shard (40M positions in 400 shards start
 * at once); a shard found bad then leaves the window. Resident windows and
 * surprise weighting open every shard at select in any case. */
void train_window_set_eager(train_window_t *w, int eager);

/* Epochs (train --from-games --epochs N): from now on a key made by
 * train_window_key for step s draws positions s * B .. s * B + B - 1 of an
 * endless sequence of epochs, each every position of the window exactly once
 * in a shuffled order: epoch e's order is a keyed bijection of [0, P) (a
 * Feistel network, cycle walking; P = the window's positions), so it costs no
 * memory and a resumed run continues it from its step. A shard found bad
 * when first read leaves the window, and the order is that of the window
 * that remains. */
void train_window_set_epoch_order(train_window_t *w, uint64_t seed);
/* The sampling key of a step: train_key(seed, cycle, step), or in epoch
 * order the step itself (tagged). */
uint64_t train_window_key(const train_window_t *w, uint64_t seed, int64_t cycle, int64_t step);

/* Mixes numbers into a sampling key (splitmix64 steps). */
uint64_t train_key(uint64_t seed, int64_t a, int64_t b);

#endif
