/* writer.h - the writer thread: the one thread that writes koma.db and the
 * shard files (DESIGN: "a writer thread owns SQLite and the shard files").
 *
 * Owns: a bounded queue, the thread, batching of train-step rows, orderly
 * shutdown. Does not own: what a job writes. A job is a function run on the
 * writer thread with the db handle (typically: write a shard file, then
 * db_shard_commit), plus the caller's argument; data/shard.c plugs in here
 * without this file knowing shards.
 *
 * Order: items are taken in submission order. Train-step rows are batched
 * (one transaction per batch: at most DB_WRITER_BATCH rows, written within
 * DB_WRITER_BATCH_MS, and always before any later job or cycle row runs), so
 * an item counts as written only once everything submitted before it is.
 *
 * Shutdown: db_writer_stop refuses new items at once, releases producers
 * blocked on a full queue, lets the thread write what is queued until the
 * deadline, then cancels the rest (each cancelled job's done() runs with
 * DB_CANCELLED) and joins. Nothing waits on a condition that can no longer
 * happen; the only unbounded wait is for the item being written at that
 * moment to finish its own I/O.
 *
 * Timeouts in milliseconds: < 0 waits as long as needed, 0 does not wait.
 */
#ifndef KOMA_WRITER_H
#define KOMA_WRITER_H

#include "data/db.h"

#include <stddef.h>
#include <stdint.h>

#define DB_WRITER_BATCH 256    /* train-step rows per transaction, at most */
#define DB_WRITER_BATCH_MS 500 /* a train-step row waits at most this long for its batch */

/* Runs on the writer thread. Returns 0 or a db_status_t, with err set. */
typedef int (*db_job_run_fn)(db_t *db, void *arg, char *err, size_t errlen);
/* Called exactly once per accepted job, on the writer thread: after run()
 * with its status and message, or with DB_CANCELLED at shutdown. The place
 * to free arg. run and done must not submit to the writer with a timeout < 0:
 * the writer thread would wait for itself. */
typedef void (*db_job_done_fn)(void *arg, int status, const char *err);

typedef struct {
    db_job_run_fn run;
    db_job_done_fn done; /* NULL ok */
    void *arg;           /* the caller's; untouched by the writer */
} db_job_t;

typedef struct {
    int64_t jobs_done, jobs_failed, jobs_cancelled;
    int64_t steps_written, steps_failed, steps_cancelled;
    int64_t cycles_written, cycles_failed, cycles_cancelled;
    int32_t queued;              /* items waiting now */
    int32_t last_status;         /* of the last failure; DB_OK if none */
    char last_error[DB_ERR_MAX]; /* its message, "" if none */
} db_writer_stats_t;

typedef struct db_writer db_writer_t;

/* Starts the thread. From now until db_writer_stop returns, db belongs to the
 * writer thread. capacity: queued items at most (>= 1). */
db_writer_t *db_writer_start(db_t *db, int32_t capacity, char *err, size_t errlen);

/* Queue an item (copied). Returns DB_OK; DB_TIMEOUT when the queue stayed
 * full for timeout_ms (nothing queued, done() not called); DB_CANCELLED when
 * the writer is stopping (nothing queued, done() not called). */
int db_writer_submit(db_writer_t *w, const db_job_t *job, int64_t timeout_ms);
int db_writer_train_step(db_writer_t *w, const db_train_step_t *row, int64_t timeout_ms);
int db_writer_cycle_metrics(db_writer_t *w, const db_cycle_metrics_t *m, int64_t timeout_ms);

/* Waits until everything submitted before the call is written (or failed).
 * DB_OK, DB_TIMEOUT, or DB_CANCELLED if the writer stopped first. */
int db_writer_flush(db_writer_t *w, int64_t timeout_ms);

/* Stops as described above. DB_OK when everything queued was written (some
 * items may still have failed: see stats), DB_TIMEOUT when some were
 * cancelled. Safe to call twice. */
int db_writer_stop(db_writer_t *w, int64_t timeout_ms);

void db_writer_stats(db_writer_t *w, db_writer_stats_t *out);

/* Stops (10 s to drain) if still running, and frees. NULL ok. */
void db_writer_free(db_writer_t *w);

#endif
