/* writer.c - the writer thread and its bounded queue. See writer.h.
 *
 * One mutex guards the queue, the counters and the stats. Three conditions:
 * not_empty (producers -> thread), not_full (thread -> producers), progress
 * (thread -> flush/stop waiters). Sequence numbers: `submitted` counts items
 * accepted, `completed` items written or failed; because train steps are
 * written before any later non-step item, completion follows submission
 * order and flush can wait for `completed >= submitted-at-call`.
 */
#include "data/writer.h"

#include "compat/compat.h"
#include "compat/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ITEM_JOB, ITEM_STEP, ITEM_CYCLE } item_kind_t;

typedef struct {
    item_kind_t kind;
    union {
        db_job_t job;
        db_train_step_t step;
        db_cycle_metrics_t cycle;
    } u;
} item_t;

struct db_writer {
    db_t *db;
    compat_thread_t thread;
    compat_mutex_t mu;
    compat_cond_t not_empty, not_full, progress;

    /* guarded by mu */
    item_t *ring; /* capacity items, count of them from head */
    int32_t cap, head, count;
    uint64_t submitted, completed;
    int32_t flush_waiters; /* flush() calls waiting: write the step batch without delay */
    int stopping;          /* no new items */
    int aborting;          /* cancel what is queued */
    int exited;            /* the thread has left its loop */
    int joined;
    db_writer_stats_t stats;

    /* writer thread only */
    db_train_step_t batch[DB_WRITER_BATCH];
    int32_t nbatch;
    int64_t batch_deadline_ms;
};

static void note_failure(db_writer_t *w, int status, const char *err) {
    w->stats.last_status = status;
    set_err(w->stats.last_error, sizeof w->stats.last_error, "%s", err && err[0] ? err : db_status_name(status));
}

/* Writes the step batch; called on the writer thread without the lock. */
static void write_batch(db_writer_t *w) {
    if (w->nbatch == 0) return;
    int32_t n = w->nbatch;
    db_status_t st = db_train_steps_insert(w->db, w->batch, n);
    w->nbatch = 0;
    compat_mutex_lock(&w->mu);
    if (st == DB_OK) {
        w->stats.steps_written += n;
    } else {
        w->stats.steps_failed += n;
        note_failure(w, st, db_errmsg(w->db));
    }
    w->completed += (uint64_t)n;
    compat_cond_broadcast(&w->progress);
    compat_mutex_unlock(&w->mu);
}

/* Runs one item; called on the writer thread without the lock. */
static void process(db_writer_t *w, item_t *it) {
    if (it->kind == ITEM_STEP) {
        if (w->nbatch == 0) w->batch_deadline_ms = compat_now_ms() + DB_WRITER_BATCH_MS;
        w->batch[w->nbatch++] = it->u.step;
        if (w->nbatch == DB_WRITER_BATCH || compat_now_ms() >= w->batch_deadline_ms) write_batch(w);
        return; /* counted as completed when its batch is written */
    }
    write_batch(w); /* keep completion in submission order */
    char err[DB_ERR_MAX] = "";
    int st;
    if (it->kind == ITEM_JOB) {
        st = it->u.job.run ? it->u.job.run(w->db, it->u.job.arg, err, sizeof err) : DB_INVALID;
        if (!it->u.job.run) set_err(err, sizeof err, "writer: job without a run function");
        if (it->u.job.done) it->u.job.done(it->u.job.arg, st, err);
    } else {
        st = db_cycle_metrics_put(w->db, &it->u.cycle);
        if (st != DB_OK) set_err(err, sizeof err, "%s", db_errmsg(w->db));
    }
    compat_mutex_lock(&w->mu);
    if (it->kind == ITEM_JOB) {
        if (st == DB_OK) w->stats.jobs_done++;
        else w->stats.jobs_failed++;
    } else {
        if (st == DB_OK) w->stats.cycles_written++;
        else w->stats.cycles_failed++;
    }
    if (st != DB_OK) note_failure(w, st, err);
    w->completed++;
    compat_cond_broadcast(&w->progress);
    compat_mutex_unlock(&w->mu);
}

/* Cancels everything queued; called with the lock held. The done callbacks
 * run without it. */
static void cancel_queued(db_writer_t *w) {
    while (w->count > 0) {
        item_t it = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        if (it.kind == ITEM_JOB) w->stats.jobs_cancelled++;
        else if (it.kind == ITEM_STEP) w->stats.steps_cancelled++;
        else w->stats.cycles_cancelled++;
        w->completed++;
        if (it.kind == ITEM_JOB && it.u.job.done) {
            compat_mutex_unlock(&w->mu);
            it.u.job.done(it.u.job.arg, DB_CANCELLED, "writer stopping: job cancelled, nothing written");
            compat_mutex_lock(&w->mu);
        }
    }
    compat_cond_broadcast(&w->progress);
    compat_cond_broadcast(&w->not_full);
}

static void *writer_main(void *arg) {
    db_writer_t *w = arg;
    compat_mutex_lock(&w->mu);
    for (;;) {
        while (w->count == 0 && !w->stopping && !(w->nbatch > 0 && w->flush_waiters > 0)) {
            if (w->nbatch == 0) {
                compat_cond_wait(&w->not_empty, &w->mu);
                continue;
            }
            int64_t left = w->batch_deadline_ms - compat_now_ms();
            if (left <= 0) break;
            compat_cond_timedwait(&w->not_empty, &w->mu, left);
        }
        if (w->aborting) {
            /* The batch in hand was accepted and costs one transaction: keep it. */
            compat_mutex_unlock(&w->mu);
            write_batch(w);
            compat_mutex_lock(&w->mu);
            cancel_queued(w);
            break;
        }
        if (w->count == 0) {
            /* Idle: the batch is due (deadline, flush or stop). */
            compat_mutex_unlock(&w->mu);
            write_batch(w);
            compat_mutex_lock(&w->mu);
            if (w->stopping && w->count == 0) break;
            continue;
        }
        item_t it = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        compat_cond_signal(&w->not_full);
        compat_mutex_unlock(&w->mu);
        process(w, &it);
        compat_mutex_lock(&w->mu);
    }
    w->exited = 1;
    compat_cond_broadcast(&w->progress);
    compat_cond_broadcast(&w->not_full);
    compat_mutex_unlock(&w->mu);
    return NULL;
}

db_writer_t *db_writer_start(db_t *db, int32_t capacity, char *err, size_t errlen) {
    if (!db || capacity < 1) {
        set_err(err, errlen, "%s: writer: no database or capacity %d < 1", db ? db_path(db) : "(null)", capacity);
        return NULL;
    }
    db_writer_t *w = calloc(1, sizeof *w);
    item_t *ring = calloc((size_t)capacity, sizeof *ring);
    if (!w || !ring) {
        set_err(err, errlen, "%s: writer: out of memory", db_path(db));
        free(w);
        free(ring);
        return NULL;
    }
    w->db = db;
    w->ring = ring;
    w->cap = capacity;
    compat_mutex_init(&w->mu);
    compat_cond_init(&w->not_empty);
    compat_cond_init(&w->not_full);
    compat_cond_init(&w->progress);
    if (compat_thread_create(&w->thread, writer_main, w) != 0) {
        set_err(err, errlen, "%s: writer: cannot start the thread", db_path(db));
        compat_cond_destroy(&w->progress);
        compat_cond_destroy(&w->not_full);
        compat_cond_destroy(&w->not_empty);
        compat_mutex_destroy(&w->mu);
        free(ring);
        free(w);
        return NULL;
    }
    return w;
}

/* Waits on c until pred or the deadline; with the lock held. Returns 1 when
 * the deadline passed. deadline < 0: none. */
static int wait_until(compat_cond_t *c, compat_mutex_t *m, int64_t deadline) {
    if (deadline < 0) {
        compat_cond_wait(c, m);
        return 0;
    }
    int64_t left = deadline - compat_now_ms();
    if (left <= 0) return 1;
    compat_cond_timedwait(c, m, left);
    return 0;
}

static int64_t deadline_of(int64_t timeout_ms) {
    return timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
}

static int push(db_writer_t *w, const item_t *it, int64_t timeout_ms) {
    if (!w) return DB_INVALID;
    int64_t deadline = deadline_of(timeout_ms);
    compat_mutex_lock(&w->mu);
    int st = DB_OK;
    for (;;) {
        if (w->stopping) {
            st = DB_CANCELLED;
            break;
        }
        if (w->count < w->cap) break;
        if (wait_until(&w->not_full, &w->mu, deadline)) {
            st = DB_TIMEOUT;
            break;
        }
    }
    if (st == DB_OK) {
        w->ring[(w->head + w->count) % w->cap] = *it;
        w->count++;
        w->submitted++;
        compat_cond_signal(&w->not_empty);
    }
    compat_mutex_unlock(&w->mu);
    return st;
}

int db_writer_submit(db_writer_t *w, const db_job_t *job, int64_t timeout_ms) {
    if (!job) return DB_INVALID;
    item_t it = {.kind = ITEM_JOB, .u.job = *job};
    return push(w, &it, timeout_ms);
}

int db_writer_train_step(db_writer_t *w, const db_train_step_t *row, int64_t timeout_ms) {
    if (!row) return DB_INVALID;
    item_t it = {.kind = ITEM_STEP, .u.step = *row};
    return push(w, &it, timeout_ms);
}

int db_writer_cycle_metrics(db_writer_t *w, const db_cycle_metrics_t *m, int64_t timeout_ms) {
    if (!m) return DB_INVALID;
    item_t it = {.kind = ITEM_CYCLE, .u.cycle = *m};
    return push(w, &it, timeout_ms);
}

int db_writer_flush(db_writer_t *w, int64_t timeout_ms) {
    if (!w) return DB_INVALID;
    int64_t deadline = deadline_of(timeout_ms);
    compat_mutex_lock(&w->mu);
    uint64_t target = w->submitted;
    w->flush_waiters++;
    compat_cond_signal(&w->not_empty);
    int st = DB_OK;
    while (w->completed < target) {
        if (w->exited) {
            st = DB_CANCELLED;
            break;
        }
        if (wait_until(&w->progress, &w->mu, deadline)) {
            st = DB_TIMEOUT;
            break;
        }
    }
    w->flush_waiters--;
    compat_mutex_unlock(&w->mu);
    return st;
}

int db_writer_stop(db_writer_t *w, int64_t timeout_ms) {
    if (!w) return DB_INVALID;
    int64_t deadline = deadline_of(timeout_ms);
    compat_mutex_lock(&w->mu);
    w->stopping = 1;
    compat_cond_broadcast(&w->not_empty);
    compat_cond_broadcast(&w->not_full);
    while (!w->exited) {
        if (!w->aborting && wait_until(&w->progress, &w->mu, deadline)) {
            w->aborting = 1; /* the thread cancels the rest after its current item */
            compat_cond_broadcast(&w->not_empty);
        } else if (w->aborting) {
            compat_cond_wait(&w->progress, &w->mu);
        }
    }
    int cancelled = w->stats.jobs_cancelled + w->stats.steps_cancelled + w->stats.cycles_cancelled > 0;
    int join = !w->joined;
    w->joined = 1;
    compat_mutex_unlock(&w->mu);
    if (join) compat_thread_join(w->thread);
    return cancelled ? DB_TIMEOUT : DB_OK;
}

void db_writer_stats(db_writer_t *w, db_writer_stats_t *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!w) return;
    compat_mutex_lock(&w->mu);
    *out = w->stats;
    out->queued = w->count;
    compat_mutex_unlock(&w->mu);
}

void db_writer_free(db_writer_t *w) {
    if (!w) return;
    db_writer_stop(w, 10000);
    compat_cond_destroy(&w->progress);
    compat_cond_destroy(&w->not_full);
    compat_cond_destroy(&w->not_empty);
    compat_mutex_destroy(&w->mu);
    free(w->ring);
    free(w);
}
