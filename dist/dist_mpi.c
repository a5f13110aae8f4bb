/* dist_mpi.c - dist.h over MPI (built when CMake finds MPI; dist_stub.c
 * otherwise).
 *
 * Owns: MPI_Init_thread / MPI_Finalize, the world communicator with
 * MPI_ERRORS_RETURN, the groups' communicators (dist_split), the sums, the agreement, the same-value check, the
 * node-local rank, and the mailbox: its communication thread, its send slots
 * (MPI_Isend, MPI_Test) and inbox (MPI_Improbe, MPI_Mrecv).
 * Does not own: what the buffers and messages mean (train/dist_train.c,
 * selfplay/wire.c).
 * Threads: MPI_THREAD_SERIALIZED is asked for: the collectives run on the
 * thread that called dist_init; while a mailbox runs, its thread alone calls
 * MPI (the other threads only touch its queues and its one collective slot,
 * under its mutex: coll_run hands a collective over, mail_coll posts it as
 * MPI_Iallreduce / MPI_Ibcast and tests it).
 * Errors: every MPI call goes through DIST_CHECK: -1 with err naming the call,
 * file:line and MPI's own error string.
 */
#include "dist/dist.h"

#ifdef KOMA_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"

struct dist {
    int32_t rank, size, local_rank;
    int provided;     /* the thread level MPI gave */
    int mpi;          /* 1: dist_init initialised MPI and dist_free finalizes it */
    MPI_Comm comm;    /* a duplicate of MPI_COMM_WORLD (a group's: of its split) with MPI_ERRORS_RETURN */
    dist_t *world;    /* a group (dist_split): the job it was split from; NULL for the job itself */
    dist_mail_t *_Atomic mail; /* the job's running mailbox, whose thread makes the collectives */
    double sum_s;     /* time inside the sums */
    int64_t sum_bytes;
};

/* A collective handed to the mailbox's thread (coll_t, below); direct
 * blocking calls when no mailbox runs. */
typedef enum { COLL_ALLREDUCE, COLL_BCAST } coll_kind_t;
typedef struct {
    coll_kind_t kind;
    void *buf;             /* in place */
    int count, root;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Comm comm;
    MPI_Request req;       /* the thread's */
    int state;             /* COLL_* below, under the mailbox's mutex */
    char err[MPI_MAX_ERROR_STRING + 160];
} coll_t;
enum { COLL_QUEUED = 1, COLL_POSTED, COLL_DONE, COLL_FAILED };
static int coll_run(dist_t *d, coll_t *c, const char *call, int line, char *err, size_t errlen);

static int mpi_fail(int rc, const char *call, const char *file, int line, char *err, size_t errlen) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    set_err(err, errlen, "%s failed at %s:%d: %s", call, file, line, msg);
    return -1;
}

/* Every MPI call: DIST_CHECK(MPI_Xxx(...)) returns -1 with err on failure. */
#define DIST_CHECK(call)                                                                  \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, #call, __FILE__, __LINE__, err, errlen); \
    } while (0)

bool dist_built(void) { return true; }

/* A launcher that starts MPI processes leaves one of these behind. */
static int launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                                       "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static int start(dist_t *d, int *argc, char ***argv, char *err, size_t errlen) {
    int provided = 0, r = 0, n = 0;
    DIST_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    d->mpi = 1;
    d->provided = provided;
    DIST_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    DIST_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d->comm));
    DIST_CHECK(MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN));
    DIST_CHECK(MPI_Comm_rank(d->comm, &r));
    DIST_CHECK(MPI_Comm_size(d->comm, &n));
    d->rank = r;
    d->size = n;
    MPI_Comm node = MPI_COMM_NULL;
    DIST_CHECK(MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &node));
    int lr = 0;
    int rc = MPI_Comm_rank(node, &lr);
    MPI_Comm_free(&node);
    DIST_CHECK(rc);
    d->local_rank = lr;
    return 0;
}

dist_t *dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    dist_t *d = calloc(1, sizeof *d);
    if (!d) {
        set_err(err, errlen, "dist_init: out of memory");
        return NULL;
    }
    d->size = 1;
    d->comm = MPI_COMM_NULL;
    if (!launched()) return d;
    if (start(d, argc, argv, err, errlen) != 0) {
        dist_free(d);
        return NULL;
    }
    return d;
}

void dist_free(dist_t *d) {
    if (!d) return;
    if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
    if (d->mpi && !d->world) MPI_Finalize();
    free(d);
}

int dist_split(dist_t *d, int32_t color, int32_t key, dist_t **group, char *err, size_t errlen) {
    *group = NULL;
    if (d->world || atomic_load(&d->mail)) {
        set_err(err, errlen, "dist_split: %s",
                d->world ? "a group cannot be split again" : "a mailbox is running (split before dist_mail_start)");
        return -1;
    }
    dist_t *g = NULL;
    if (color >= 0 && !(g = calloc(1, sizeof *g))) {
        set_err(err, errlen, "dist_split: out of memory");
        /* the others still wait in MPI_Comm_split: take part without a group */
        color = -1;
    }
    if (!d->mpi) { /* a job of one: the group is this rank alone */
        if (!g) return color >= 0 ? -1 : 0;
        *g = (dist_t){.rank = 0, .size = 1, .comm = MPI_COMM_NULL, .world = d};
        *group = g;
        return 0;
    }
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_split(d->comm, color >= 0 ? color : MPI_UNDEFINED, key, &c);
    if (rc != MPI_SUCCESS) {
        free(g);
        return mpi_fail(rc, "MPI_Comm_split", __FILE__, __LINE__, err, errlen);
    }
    if (!g) return color >= 0 ? -1 : 0; /* out of memory (err says so), or not in a group */
    int r = 0, n = 0;
    *g = (dist_t){.local_rank = d->local_rank, .provided = d->provided, .mpi = 1, .comm = c, .world = d};
    if ((rc = MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank(c, &r)) != MPI_SUCCESS || (rc = MPI_Comm_size(c, &n)) != MPI_SUCCESS) {
        dist_free(g);
        return mpi_fail(rc, "MPI_Comm_rank", __FILE__, __LINE__, err, errlen);
    }
    g->rank = r;
    g->size = n;
    *group = g;
    return 0;
}

int32_t dist_rank(const dist_t *d) { return d->rank; }
int32_t dist_size(const dist_t *d) { return d->size; }
int32_t dist_local_rank(const dist_t *d) { return d->local_rank; }

void dist_abort(dist_t *d, int code) {
    if (d && d->world) d = d->world; /* a group's abort ends the job */
    if (!d || !d->mpi || d->size == 1) return;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
}

/* One collective on d's communicator: through the mailbox's thread while
 * one runs (dist.h), else a blocking call here. */
static int coll(dist_t *d, coll_kind_t kind, void *buf, int count, MPI_Datatype type, MPI_Op op, int root,
                const char *call, int line, char *err, size_t errlen) {
    coll_t c = {.kind = kind, .buf = buf, .count = count, .root = root, .type = type, .op = op, .comm = d->comm};
    dist_t *w = d->world ? d->world : d;
    if (atomic_load(&w->mail)) return coll_run(w, &c, call, line, err, errlen);
    int rc = kind == COLL_BCAST ? MPI_Bcast(buf, count, type, root, d->comm)
                                : MPI_Allreduce(MPI_IN_PLACE, buf, count, type, op, d->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, call, __FILE__, line, err, errlen);
}

/* In-place sum in chunks that an int count can hold. */
static int sum_any(dist_t *d, void *buf, int64_t n, MPI_Datatype type, size_t width, char *err, size_t errlen) {
    if (d->size == 1 || n <= 0) return 0;
    int64_t t0 = compat_now_ns();
    char *p = buf;
    for (int64_t done = 0; done < n;) {
        int count = (int)(n - done < (INT_MAX / 2) ? n - done : (INT_MAX / 2));
        if (coll(d, COLL_ALLREDUCE, p + done * (int64_t)width, count, type, MPI_SUM, 0, "MPI_Allreduce", __LINE__,
                 err, errlen) != 0)
            return -1;
        done += count;
    }
    d->sum_s += (double)(compat_now_ns() - t0) * 1e-9;
    d->sum_bytes += n * (int64_t)width;
    return 0;
}

int dist_sum_f32(dist_t *d, float *buf, int64_t n, char *err, size_t errlen) {
    return sum_any(d, buf, n, MPI_FLOAT, sizeof(float), err, errlen);
}

int dist_sum_f64(dist_t *d, double *buf, int64_t n, char *err, size_t errlen) {
    return sum_any(d, buf, n, MPI_DOUBLE, sizeof(double), err, errlen);
}

int dist_bcast(dist_t *d, void *buf, int64_t bytes, int32_t root, char *err, size_t errlen) {
    if (d->size == 1) return 0;
    if (bytes < 0 || bytes > INT_MAX || root < 0 || root >= d->size) {
        set_err(err, errlen, "dist_bcast: %lld bytes from rank %d: out of range", (long long)bytes, (int)root);
        return -1;
    }
    return coll(d, COLL_BCAST, buf, (int)bytes, MPI_BYTE, MPI_OP_NULL, root, "MPI_Bcast", __LINE__, err, errlen);
}

int dist_agree(dist_t *d, int ok, int *all_ok, char *err, size_t errlen) {
    int v = ok != 0;
    *all_ok = v;
    if (d->size == 1) return 0;
    if (coll(d, COLL_ALLREDUCE, &v, 1, MPI_INT, MPI_LAND, 0, "MPI_Allreduce", __LINE__, err, errlen) != 0) return -1;
    *all_ok = v;
    return 0;
}

int dist_same_u64(dist_t *d, uint64_t v, int *same, int32_t *first_bad, char *err, size_t errlen) {
    *same = 1;
    *first_bad = -1;
    if (d->size == 1) return 0;
    uint64_t ref = v;
    if (coll(d, COLL_BCAST, &ref, 1, MPI_UINT64_T, MPI_OP_NULL, 0, "MPI_Bcast", __LINE__, err, errlen) != 0) return -1;
    int low = ref == v ? INT_MAX : d->rank;
    if (coll(d, COLL_ALLREDUCE, &low, 1, MPI_INT, MPI_MIN, 0, "MPI_Allreduce", __LINE__, err, errlen) != 0) return -1;
    if (low != INT_MAX) {
        *same = 0;
        *first_bad = low;
    }
    return 0;
}

double dist_sum_seconds(const dist_t *d, int64_t *bytes) {
    if (bytes) *bytes = d->sum_bytes;
    return d->sum_s;
}

/* ---- the mailbox ------------------------------------------------------------------ */

/* A message's bytes, shared by the sends of one dist_mail_send. */
typedef struct {
    int32_t refs; /* under the mailbox mutex */
    int64_t len;
    uint8_t data[];
} payload_t;

enum { SLOT_FREE, SLOT_QUEUED, SLOT_POSTED };

typedef struct {
    int state;
    int32_t dest, tag;
    payload_t *p;
    MPI_Request req;
} slot_t;

struct dist_mail {
    dist_t *d;
    compat_mutex_t mu;
    compat_cond_t cv;  /* a slot freed, a message in, the thread stopped or failed */
    compat_thread_t thread;
    int started, stop, failed, stopped;
    char err[MPI_MAX_ERROR_STRING + 160];
    slot_t *slots;     /* (n_slots) */
    int32_t n_slots, n_used;
    dist_msg_t **inbox; /* ring of cap_in */
    int32_t cap_in, head_in, n_in;
    int64_t sent, sent_bytes, received, received_bytes;
    coll_t *coll;       /* the collective a caller handed over (one at a time), or NULL */
};

void dist_msg_free(dist_msg_t *m) { free(m); }

static void payload_release(payload_t *p) {
    if (p && --p->refs == 0) free(p);
}

/* Under m->mu: the thread's MPI failure (call, file:line, MPI's string). */
static void mail_fail(dist_mail_t *m, int rc, const char *call, int line) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    if (!m->failed) set_err(m->err, sizeof m->err, "%s failed at %s:%d: %s", call, __FILE__, line, msg);
    m->failed = 1;
    compat_cond_broadcast(&m->cv);
}

#define MAIL_CHECK(call)                                              \
    do {                                                              \
        int rc_ = (call);                                             \
        if (rc_ != MPI_SUCCESS) {                                     \
            compat_mutex_lock(&m->mu);                                \
            mail_fail(m, rc_, #call, __LINE__);                       \
            compat_mutex_unlock(&m->mu);                              \
            return -1;                                                \
        }                                                             \
    } while (0)

/* Posts queued sends and completes finished ones; returns how many changed
 * state, or -1 after an MPI failure. The only caller is the thread. */
static int mail_sends(dist_mail_t *m) {
    int moved = 0;
    compat_mutex_lock(&m->mu);
    for (int32_t i = 0; i < m->n_slots; i++) {
        slot_t *s = &m->slots[i];
        int rc = MPI_SUCCESS;
        if (s->state == SLOT_QUEUED) {
            rc = MPI_Isend(s->p->data, (int)s->p->len, MPI_BYTE, s->dest, s->tag, m->d->comm, &s->req);
            if (rc == MPI_SUCCESS) s->state = SLOT_POSTED, moved++;
            else mail_fail(m, rc, "MPI_Isend", __LINE__);
        } else if (s->state == SLOT_POSTED) {
            int done = 0;
            rc = MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                mail_fail(m, rc, "MPI_Test", __LINE__);
            } else if (done) {
                m->sent++;
                m->sent_bytes += s->p->len;
                payload_release(s->p);
                s->p = NULL;
                s->state = SLOT_FREE;
                m->n_used--;
                moved++;
                compat_cond_broadcast(&m->cv);
            }
        }
        if (rc != MPI_SUCCESS) {
            compat_mutex_unlock(&m->mu);
            return -1;
        }
    }
    compat_mutex_unlock(&m->mu);
    return moved;
}

/* Receives one message if one is there and the inbox has room: 1, 0, or -1. */
static int mail_recv_one(dist_mail_t *m) {
    compat_mutex_lock(&m->mu);
    int room = m->n_in < m->cap_in;
    compat_mutex_unlock(&m->mu);
    if (!room) return 0;
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    MAIL_CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, m->d->comm, &flag, &msg, &st));
    if (!flag) return 0;
    int count = 0;
    MAIL_CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
    dist_msg_t *out = malloc(sizeof *out + (size_t)(count > 0 ? count : 1));
    if (!out) { /* the message is matched: receive it into a scratch byte, then fail */
        compat_mutex_lock(&m->mu);
        set_err(m->err, sizeof m->err, "out of memory for a %d-byte message from rank %d", count, st.MPI_SOURCE);
        m->failed = 1;
        compat_cond_broadcast(&m->cv);
        compat_mutex_unlock(&m->mu);
        return -1;
    }
    out->src = st.MPI_SOURCE;
    out->tag = st.MPI_TAG;
    out->len = count;
    out->data = (uint8_t *)(out + 1);
    int rc = MPI_Mrecv(out->data, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) free(out);
    MAIL_CHECK(rc);
    compat_mutex_lock(&m->mu);
    m->inbox[(m->head_in + m->n_in) % m->cap_in] = out;
    m->n_in++;
    m->received++;
    m->received_bytes += count;
    compat_cond_broadcast(&m->cv);
    compat_mutex_unlock(&m->mu);
    return 1;
}

/* Posts the handed-over collective (MPI_Iallreduce / MPI_Ibcast on its
 * communicator) or tests the posted one; the caller is woken when it is
 * done or failed. Returns 1 when it moved, 0, or -1 after an MPI failure
 * (the collective's caller gets the message; the mailbox fails too: the
 * job cannot go on with a collective that some ranks finished). */
static int mail_coll(dist_mail_t *m) {
    compat_mutex_lock(&m->mu);
    coll_t *c = m->coll;
    int state = c ? c->state : 0;
    compat_mutex_unlock(&m->mu);
    if (!c || (state != COLL_QUEUED && state != COLL_POSTED)) return 0;
    int rc, done = 0;
    const char *call;
    if (state == COLL_QUEUED) {
        call = c->kind == COLL_BCAST ? "MPI_Ibcast" : "MPI_Iallreduce";
        rc = c->kind == COLL_BCAST ? MPI_Ibcast(c->buf, c->count, c->type, c->root, c->comm, &c->req)
                                   : MPI_Iallreduce(MPI_IN_PLACE, c->buf, c->count, c->type, c->op, c->comm, &c->req);
    } else {
        call = "MPI_Test";
        rc = MPI_Test(&c->req, &done, MPI_STATUS_IGNORE);
    }
    compat_mutex_lock(&m->mu);
    int moved = 0;
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
        set_err(c->err, sizeof c->err, "%s failed at %s:%d (the mailbox's thread): %s", call, __FILE__, __LINE__, msg);
        c->state = COLL_FAILED;
        m->coll = NULL;
        mail_fail(m, rc, call, __LINE__);
        moved = -1;
    } else if (state == COLL_QUEUED) {
        c->state = COLL_POSTED;
        moved = 1;
    } else if (done) {
        c->state = COLL_DONE;
        m->coll = NULL;
        compat_cond_broadcast(&m->cv);
        moved = 1;
    }
    compat_mutex_unlock(&m->mu);
    return moved;
}

static void *mail_main(void *arg) {
    dist_mail_t *m = arg;
    int idle = 0;
    for (;;) {
        compat_mutex_lock(&m->mu);
        /* a collective posted is finished first: MPI still uses its buffer */
        int stop = m->stop && !(m->coll && m->coll->state == COLL_POSTED);
        compat_mutex_unlock(&m->mu);
        if (stop) break;
        int a = mail_sends(m);
        int b = a < 0 ? -1 : mail_recv_one(m);
        int c = b < 0 ? -1 : mail_coll(m);
        if (a < 0 || b < 0 || c < 0) break; /* sticky: every waiter is woken with the error */
        if (a + b + c > 0) {
            idle = 0;
        } else if (++idle > 50) {
            compat_sleep_ms(1); /* idle: poll every millisecond */
        }
    }
    compat_mutex_lock(&m->mu);
    m->stopped = 1;
    if (m->coll && m->coll->state == COLL_QUEUED) { /* never posted: its caller is told */
        set_err(m->coll->err, sizeof m->coll->err, "%s", m->failed ? m->err : "the mailbox stopped");
        m->coll->state = COLL_FAILED;
        m->coll = NULL;
    }
    compat_cond_broadcast(&m->cv);
    compat_mutex_unlock(&m->mu);
    return NULL;
}

/* Hands c to the mailbox's thread and waits until it is done (no time
 * limit: a collective ends when every rank of its group enters it, or the
 * job ends). */
static int coll_run(dist_t *w, coll_t *c, const char *call, int line, char *err, size_t errlen) {
    dist_mail_t *m = atomic_load(&w->mail);
    compat_mutex_lock(&m->mu);
    for (;;) { /* one collective at a time */
        const char *down = m->failed ? m->err : (m->stop || (m->started && m->stopped)) ? "the mailbox is stopped" : NULL;
        if (down) {
            set_err(err, errlen, "%s (rank %d) not made: %s", call, (int)w->rank, down);
            compat_mutex_unlock(&m->mu);
            return -1;
        }
        if (!m->coll) break;
        compat_cond_timedwait(&m->cv, &m->mu, 100);
    }
    c->state = COLL_QUEUED;
    m->coll = c;
    while (c->state != COLL_DONE && c->state != COLL_FAILED) {
        if (m->stopped) { /* the thread ended on an MPI failure with c posted: the job cannot go on */
            set_err(c->err, sizeof c->err, "%s", m->failed ? m->err : "the mailbox stopped");
            c->state = COLL_FAILED;
            m->coll = NULL;
            break;
        }
        compat_cond_timedwait(&m->cv, &m->mu, 100);
    }
    compat_mutex_unlock(&m->mu);
    if (c->state == COLL_DONE) return 0;
    set_err(err, errlen, "%s (%s:%d): %s", call, __FILE__, line, c->err);
    return -1;
}

dist_mail_t *dist_mail_start(dist_t *d, int32_t max_in_flight, int32_t max_inbox, char *err, size_t errlen) {
    if (d->world || atomic_load(&d->mail)) {
        set_err(err, errlen, "dist_mail_start: %s",
                d->world ? "a mailbox is the job's, not a group's" : "a mailbox runs already");
        return NULL;
    }
    if (d->mpi && d->provided < MPI_THREAD_SERIALIZED) {
        set_err(err, errlen,
                "the MPI library gives thread level %d, below MPI_THREAD_SERIALIZED (%d), which the "
                "mailbox's communication thread needs",
                d->provided, MPI_THREAD_SERIALIZED);
        return NULL;
    }
    dist_mail_t *m = calloc(1, sizeof *m);
    if (!m) {
        set_err(err, errlen, "dist_mail_start: out of memory");
        return NULL;
    }
    m->d = d;
    m->n_slots = max_in_flight > d->size - 1 ? max_in_flight : d->size - 1;
    if (m->n_slots < 1) m->n_slots = 1;
    m->cap_in = max_inbox > 0 ? max_inbox : 1;
    m->slots = calloc((size_t)m->n_slots, sizeof *m->slots);
    m->inbox = calloc((size_t)m->cap_in, sizeof *m->inbox);
    if (!m->slots || !m->inbox) {
        free(m->slots), free(m->inbox), free(m);
        set_err(err, errlen, "dist_mail_start: out of memory");
        return NULL;
    }
    compat_mutex_init(&m->mu);
    compat_cond_init(&m->cv);
    if (!d->mpi) { /* a job of one: nothing to talk to, no thread */
        m->stopped = 1;
        return m;
    }
    if (compat_thread_create(&m->thread, mail_main, m) != 0) {
        set_err(err, errlen, "dist_mail_start: cannot start the communication thread");
        compat_cond_destroy(&m->cv);
        compat_mutex_destroy(&m->mu);
        free(m->slots), free(m->inbox), free(m);
        return NULL;
    }
    m->started = 1;
    atomic_store(&d->mail, m);
    return m;
}

/* Under m->mu: why the mailbox cannot take or give messages, or NULL. */
static const char *mail_down(dist_mail_t *m) {
    if (m->failed) return m->err;
    if (m->stop || (m->started && m->stopped)) return "the mailbox is stopped";
    return NULL;
}

static int64_t ms_left(int64_t deadline_ns) {
    int64_t left = (deadline_ns - compat_now_ns()) / 1000000;
    return left > 0 ? left : 0;
}

int dist_mail_send(dist_mail_t *m, int32_t dest, int32_t tag, const void *buf, int64_t len, int64_t timeout_ms,
                   char *err, size_t errlen) {
    int32_t size = m->d->size, me = m->d->rank;
    int32_t want = dest == DIST_ALL_OTHERS ? size - 1 : 1;
    if (dest != DIST_ALL_OTHERS && (dest < 0 || dest >= size || dest == me)) {
        set_err(err, errlen, "dist_mail_send: no rank %d to send to (this is rank %d of %d)", (int)dest, (int)me,
                (int)size);
        return -1;
    }
    if (len < 0 || len > DIST_MSG_MAX || tag < 0 || tag > 32767) {
        set_err(err, errlen, "dist_mail_send: a %lld-byte message with tag %d (at most %lld bytes, tags 0..32767)",
                (long long)len, (int)tag, (long long)DIST_MSG_MAX);
        return -1;
    }
    if (want == 0) return DIST_OK; /* all others of a job of one */
    payload_t *p = malloc(sizeof *p + (size_t)(len > 0 ? len : 1));
    if (!p) {
        set_err(err, errlen, "dist_mail_send: out of memory for %lld bytes", (long long)len);
        return -1;
    }
    p->refs = 1; /* this call's */
    p->len = len;
    if (len) memcpy(p->data, buf, (size_t)len);
    int64_t deadline = compat_now_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    int rc = DIST_OK;
    compat_mutex_lock(&m->mu);
    for (;;) {
        const char *down = mail_down(m);
        if (down) {
            set_err(err, errlen, "%s", down);
            rc = -1;
            break;
        }
        if (m->n_slots - m->n_used >= want) break;
        int64_t left = ms_left(deadline);
        if (left == 0) {
            rc = DIST_TIMEOUT;
            break;
        }
        compat_cond_timedwait(&m->cv, &m->mu, left);
    }
    if (rc == DIST_OK) {
        int32_t next = 0;
        for (int32_t r = 0; r < size; r++) {
            if (r == me || (dest != DIST_ALL_OTHERS && r != dest)) continue;
            while (m->slots[next].state != SLOT_FREE) next++;
            m->slots[next] = (slot_t){.state = SLOT_QUEUED, .dest = r, .tag = tag, .p = p};
            p->refs++;
            m->n_used++;
        }
    }
    payload_release(p);
    compat_mutex_unlock(&m->mu);
    return rc;
}

int dist_mail_recv(dist_mail_t *m, dist_msg_t **out, int64_t timeout_ms, char *err, size_t errlen) {
    *out = NULL;
    int64_t deadline = compat_now_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    compat_mutex_lock(&m->mu);
    int rc = DIST_TIMEOUT;
    for (;;) {
        if (m->n_in > 0) {
            *out = m->inbox[m->head_in];
            m->head_in = (m->head_in + 1) % m->cap_in;
            m->n_in--;
            rc = DIST_OK;
            break;
        }
        if (m->failed) {
            set_err(err, errlen, "%s", m->err);
            rc = -1;
            break;
        }
        int64_t left = ms_left(deadline);
        if (left == 0 || m->stopped) break;
        compat_cond_timedwait(&m->cv, &m->mu, left);
    }
    compat_mutex_unlock(&m->mu);
    return rc;
}

int dist_mail_flush(dist_mail_t *m, int64_t timeout_ms, char *err, size_t errlen) {
    int64_t deadline = compat_now_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    compat_mutex_lock(&m->mu);
    int rc = DIST_OK;
    while (m->n_used > 0) {
        if (m->failed || (m->started && m->stopped)) {
            set_err(err, errlen, "%s", m->failed ? m->err : "the mailbox stopped with sends in flight");
            rc = -1;
            break;
        }
        int64_t left = ms_left(deadline);
        if (left == 0) {
            rc = DIST_TIMEOUT;
            break;
        }
        compat_cond_timedwait(&m->cv, &m->mu, left);
    }
    compat_mutex_unlock(&m->mu);
    return rc;
}

int dist_mail_error(dist_mail_t *m, char *err, size_t errlen) {
    compat_mutex_lock(&m->mu);
    int f = m->failed;
    if (f) set_err(err, errlen, "%s", m->err);
    compat_mutex_unlock(&m->mu);
    return f;
}

void dist_mail_stats(dist_mail_t *m, dist_mail_stats_t *st) {
    compat_mutex_lock(&m->mu);
    *st = (dist_mail_stats_t){m->sent, m->sent_bytes, m->received, m->received_bytes, m->n_used, m->n_in};
    compat_mutex_unlock(&m->mu);
}

int32_t dist_mail_stop(dist_mail_t *m) {
    if (!m) return 0;
    compat_mutex_lock(&m->mu);
    m->stop = 1;
    compat_mutex_unlock(&m->mu);
    if (m->started) compat_thread_join(m->thread);
    if (m->started) atomic_store(&m->d->mail, NULL); /* the collectives are direct calls again */
    int32_t left = 0;
    for (int32_t i = 0; i < m->n_slots; i++) {
        slot_t *s = &m->slots[i];
        if (s->state == SLOT_POSTED) left++; /* MPI may still read the bytes: they stay */
        else if (s->state == SLOT_QUEUED) payload_release(s->p);
    }
    while (m->n_in > 0) {
        free(m->inbox[m->head_in]);
        m->head_in = (m->head_in + 1) % m->cap_in;
        m->n_in--;
    }
    compat_cond_destroy(&m->cv);
    compat_mutex_destroy(&m->mu);
    free(m->slots);
    free(m->inbox);
    free(m);
    return left;
}

#endif /* KOMA_HAVE_MPI */
