/* worker.c - self-play worker threads; see worker.h. */
#include "selfplay/worker.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "mcts/batch.h"

/* One half of a worker's games and its batch (mcts/batch.h; each leaf
 * tagged with its game slot), sized for every game of the half adding
 * leaves_per_game leaves. */
typedef struct {
    int32_t first, count;     /* game slots [first, first + count) */
    mcts_batch_t *lb;
    nn_server_ticket_t ticket;
    bool in_flight;
} half_t;

typedef struct {
    sp_pool_t *pool;
    int32_t index;
    sp_game_t **games;        /* (games_per_thread) */
    int32_t n_games;
    half_t half[2];
    compat_thread_t thread;
    bool started;
    /* counters (written by the worker, read by the driver) */
    atomic_llong leaves, submissions, searches, playouts;
    atomic_int active;
} worker_t;

struct sp_pool {
    const sp_config_t *cfg;
    nn_server_t *server;
    mcts_cache_t *cache;
    worker_t *workers;
    int32_t n_workers;
    compat_mutex_t mu;
    compat_cond_t cv;          /* pause changes, stop, records queued */
    bool paused;               /* under mu */
    atomic_int stop;
    bool running;
    sp_record_t **recs;        /* queued records, under mu */
    int32_t n_recs, cap_recs;
    atomic_llong games;
    atomic_llong limit;        /* sp_pool_limit: no game begins once games reaches it (-1: none) */
    atomic_llong cache_gen;    /* newest generation seen; the cache holds its results */
    int failed;                /* under mu */
    char err[512];
};

/* ---- records queue -------------------------------------------------------------- */

static void push_record(sp_pool_t *p, sp_record_t *r) {
    compat_mutex_lock(&p->mu);
    if (p->n_recs == p->cap_recs) {
        int32_t cap = p->cap_recs ? 2 * p->cap_recs : 64;
        sp_record_t **q = realloc(p->recs, (size_t)cap * sizeof *q);
        KOMA_ASSERT(q != NULL);
        p->recs = q;
        p->cap_recs = cap;
    }
    p->recs[p->n_recs++] = r;
    atomic_fetch_add(&p->games, 1);
    compat_cond_broadcast(&p->cv);
    compat_mutex_unlock(&p->mu);
}

int32_t sp_pool_take(sp_pool_t *p, sp_record_t **out, int32_t max, int64_t timeout_ms) {
    compat_mutex_lock(&p->mu);
    if (p->n_recs == 0 && timeout_ms > 0) compat_cond_timedwait(&p->cv, &p->mu, timeout_ms);
    int32_t n = p->n_recs < max ? p->n_recs : max;
    if (n > 0) {
        memcpy(out, p->recs, (size_t)n * sizeof *out);
        memmove(p->recs, p->recs + n, (size_t)(p->n_recs - n) * sizeof *out);
        p->n_recs -= n;
    }
    compat_mutex_unlock(&p->mu);
    return n;
}

static void fail(sp_pool_t *p, const char *msg) {
    compat_mutex_lock(&p->mu);
    if (!p->failed) {
        p->failed = 1;
        set_err(p->err, sizeof p->err, "%s", msg);
    }
    compat_cond_broadcast(&p->cv);
    compat_mutex_unlock(&p->mu);
}

int sp_pool_error(sp_pool_t *p, char *err, size_t errlen) {
    compat_mutex_lock(&p->mu);
    int f = p->failed;
    if (f) set_err(err, errlen, "%s", p->err);
    compat_mutex_unlock(&p->mu);
    return f;
}

/* ---- one worker ------------------------------------------------------------------ */

static bool stopping(const sp_pool_t *p) { return atomic_load(&p->stop) != 0; }

/* The games sp_pool_limit allows have finished. */
static bool at_limit(sp_pool_t *p) {
    long long limit = atomic_load(&p->limit);
    return limit >= 0 && atomic_load(&p->games) >= limit;
}

/* Fills half h's batch: ended games hand in their records and start anew
 * (unless the pool stops), every game adds up to leaves_per_game leaves. */
static void collect(worker_t *w, half_t *b) {
    sp_pool_t *p = w->pool;
    int32_t per = (int32_t)p->cfg->leaves_per_game;
    mcts_batch_t *lb = b->lb;
    mcts_batch_clear(lb);
    for (int32_t k = 0; k < b->count; k++) {
        int32_t gi = b->first + k;
        sp_game_t *g = w->games[gi];
        int32_t want = mcts_batch_room(lb) < per ? mcts_batch_room(lb) : per;
        int32_t got = 0;
        for (int32_t tries = 0; tries < 8 && want > 0; tries++) {
            if (!sp_game_active(g)) {
                sp_record_t *r = sp_game_take_record(g);
                if (r) push_record(p, r);
                if (stopping(p) || at_limit(p)) break;
                sp_game_begin(g);
                atomic_fetch_add(&w->active, 1);
            }
            bool ended = false;
            got = sp_game_step(g, want, mcts_batch_slots(lb), &ended);
            if (!ended) break;
            atomic_fetch_sub(&w->active, 1);
        }
        mcts_batch_commit(lb, got, gi);
    }
}

static int submit(worker_t *w, half_t *b) {
    const mcts_batch_t *lb = b->lb;
    if (lb->n == 0) return 0;
    nn_server_request_t req = {
        .n = lb->n,
        .packed = lb->packed,
        .hand = lb->hand,
        .label_offsets = lb->offsets,
        .labels = lb->labels,
        .value = lb->value,
        .policy = lb->policy,
        .legal = NULL,
        .moves_left = lb->moves_left, /* NAN from a net without the head */
    };
    char e[256];
    int st = nn_server_submit(w->pool->server, &req, &b->ticket, e, sizeof e);
    if (st != NN_SERVER_OK) {
        if (!(st == NN_SERVER_ESTOPPED && stopping(w->pool))) {
            char m[400];
            snprintf(m, sizeof m, "worker %d: inference submit failed (%s): %s", w->index, nn_server_status_name(st), e);
            fail(w->pool, m);
        }
        return -1;
    }
    b->in_flight = true;
    atomic_fetch_add(&w->leaves, lb->n);
    atomic_fetch_add(&w->submissions, 1);
    return 0;
}

/* Waits for half h's ticket and hands every result to its game. */
static int finish(worker_t *w, half_t *b) {
    if (!b->in_flight) return 0;
    b->in_flight = false;
    sp_pool_t *p = w->pool;
    nn_server_result_t res;
    int st = nn_server_wait(p->server, b->ticket, &res);
    if (st != NN_SERVER_OK) {
        if (!(st == NN_SERVER_ESTOPPED && stopping(p))) {
            char m[400];
            snprintf(m, sizeof m, "worker %d: inference failed (%s): %s", w->index, nn_server_status_name(st),
                     res.message);
            fail(p, m);
        }
        return -1;
    }
    /* A new net answers: cached results of the old one must go. */
    long long seen = atomic_load(&p->cache_gen);
    while (res.generation > seen) {
        if (atomic_compare_exchange_weak(&p->cache_gen, &seen, (long long)res.generation)) {
            if (p->cache) mcts_cache_clear(p->cache);
            break;
        }
    }
    mcts_batch_moves_left(b->lb); /* the estimates into the requests sp_game_deliver hands over */
    const mcts_batch_t *lb = b->lb;
    for (int32_t i = 0; i < lb->n; i++)
        sp_game_deliver(w->games[lb->tag[i]], &lb->reqs[i], mcts_batch_policy(lb, i), mcts_batch_value(lb, i),
                        res.generation);
    return 0;
}

static void update_counters(worker_t *w) {
    int64_t s = 0, pl = 0;
    for (int32_t i = 0; i < w->n_games; i++) {
        const sp_game_stats_t *gs = sp_game_stats(w->games[i]);
        s += gs->searches;
        pl += gs->playouts;
    }
    atomic_store(&w->searches, s);
    atomic_store(&w->playouts, pl);
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    sp_pool_t *p = w->pool;
    int h = 0;
    bool ok = true;
    while (ok && !stopping(p)) {
        compat_mutex_lock(&p->mu);
        bool paused = p->paused || at_limit(p);
        compat_mutex_unlock(&p->mu);
        if (paused) {
            ok = finish(w, &w->half[0]) == 0 && finish(w, &w->half[1]) == 0;
            compat_mutex_lock(&p->mu);
            while ((p->paused || at_limit(p)) && !stopping(p)) compat_cond_wait(&p->cv, &p->mu);
            compat_mutex_unlock(&p->mu);
            continue;
        }
        half_t *b = &w->half[h], *o = &w->half[1 - h];
        collect(w, b);
        if (stopping(p)) break;
        ok = submit(w, b) == 0;
        if (ok) ok = finish(w, o) == 0;
        update_counters(w);
        h = 1 - h;
    }
    /* Consume every ticket still out; the games are dropped. */
    for (int k = 0; k < 2; k++)
        if (w->half[k].in_flight) {
            w->half[k].in_flight = false;
            nn_server_wait(p->server, w->half[k].ticket, NULL);
        }
    for (int32_t i = 0; i < w->n_games; i++)
        if (sp_game_active(w->games[i])) atomic_fetch_sub(&w->active, 1);
    update_counters(w);
    return NULL;
}

/* ---- the pool ------------------------------------------------------------------------ */

static void half_free(half_t *b) { mcts_batch_free(b->lb); }

static int half_init(half_t *b, int32_t first, int32_t count, int32_t per) {
    memset(b, 0, sizeof *b);
    b->first = first;
    b->count = count;
    b->lb = mcts_batch_new(count * per > 0 ? count * per : 1);
    return b->lb ? 0 : -1;
}

sp_pool_t *sp_pool_new(const sp_config_t *cfg, nn_server_t *server, mcts_cache_t *cache, uint64_t seed, char *err,
                       size_t errlen) {
    sp_pool_t *p = calloc(1, sizeof *p);
    if (!p) goto oom;
    p->cfg = cfg;
    p->server = server;
    p->cache = cache;
    compat_mutex_init(&p->mu);
    compat_cond_init(&p->cv);
    atomic_init(&p->stop, 0);
    atomic_init(&p->games, 0);
    atomic_init(&p->limit, -1);
    atomic_init(&p->cache_gen, 0);
    p->n_workers = (int32_t)sp_config_threads(cfg);
    p->workers = calloc((size_t)p->n_workers, sizeof(worker_t));
    if (!p->workers) goto oom;
    int32_t per = (int32_t)cfg->leaves_per_game, ng = (int32_t)cfg->games_per_thread;
    for (int32_t t = 0; t < p->n_workers; t++) {
        worker_t *w = &p->workers[t];
        w->pool = p;
        w->index = t;
        atomic_init(&w->leaves, 0);
        atomic_init(&w->submissions, 0);
        atomic_init(&w->searches, 0);
        atomic_init(&w->playouts, 0);
        atomic_init(&w->active, 0);
        w->games = calloc((size_t)ng, sizeof(sp_game_t *));
        if (!w->games) goto oom;
        w->n_games = ng;
        for (int32_t i = 0; i < ng; i++) {
            /* splitmix-style stream per slot: seed, worker, slot */
            uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(t * 65536 + i + 1));
            w->games[i] = sp_game_new(cfg, s, cache);
            if (!w->games[i]) goto oom;
        }
        if (half_init(&w->half[0], 0, ng / 2, per) != 0 || half_init(&w->half[1], ng / 2, ng - ng / 2, per) != 0)
            goto oom;
    }
    return p;
oom:
    set_err(err, errlen, "self-play: out of memory for %lld x %lld game slots", (long long)sp_config_threads(cfg),
            (long long)cfg->games_per_thread);
    sp_pool_free(p);
    return NULL;
}

int sp_pool_start(sp_pool_t *p, char *err, size_t errlen) {
    for (int32_t t = 0; t < p->n_workers; t++) {
        if (compat_thread_create(&p->workers[t].thread, worker_main, &p->workers[t]) != 0) {
            set_err(err, errlen, "self-play: cannot start worker thread %d", t);
            sp_pool_stop(p);
            return -1;
        }
        p->workers[t].started = true;
    }
    p->running = true;
    return 0;
}

void sp_pool_pause(sp_pool_t *p, bool paused) {
    compat_mutex_lock(&p->mu);
    p->paused = paused;
    compat_cond_broadcast(&p->cv);
    compat_mutex_unlock(&p->mu);
}

void sp_pool_limit(sp_pool_t *p, int64_t games) {
    compat_mutex_lock(&p->mu);
    atomic_store(&p->limit, (long long)games);
    compat_cond_broadcast(&p->cv);
    compat_mutex_unlock(&p->mu);
}

void sp_pool_stop(sp_pool_t *p) {
    if (!p) return;
    compat_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    compat_cond_broadcast(&p->cv);
    compat_mutex_unlock(&p->mu);
    for (int32_t t = 0; t < p->n_workers; t++)
        if (p->workers[t].started) {
            compat_thread_join(p->workers[t].thread);
            p->workers[t].started = false;
        }
    p->running = false;
}

void sp_pool_free(sp_pool_t *p) {
    if (!p) return;
    sp_pool_stop(p);
    for (int32_t t = 0; p->workers && t < p->n_workers; t++) {
        worker_t *w = &p->workers[t];
        for (int32_t i = 0; w->games && i < w->n_games; i++) sp_game_free(w->games[i]);
        free(w->games);
        half_free(&w->half[0]);
        half_free(&w->half[1]);
    }
    free(p->workers);
    for (int32_t i = 0; i < p->n_recs; i++) sp_record_free(p->recs[i]);
    free(p->recs);
    compat_cond_destroy(&p->cv);
    compat_mutex_destroy(&p->mu);
    free(p);
}

void sp_pool_stats(sp_pool_t *p, sp_pool_stats_t *st) {
    memset(st, 0, sizeof *st);
    for (int32_t t = 0; t < p->n_workers; t++) {
        worker_t *w = &p->workers[t];
        st->leaves += atomic_load(&w->leaves);
        st->submissions += atomic_load(&w->submissions);
        st->searches += atomic_load(&w->searches);
        st->playouts += atomic_load(&w->playouts);
        st->active += atomic_load(&w->active);
    }
    st->games = atomic_load(&p->games);
}
