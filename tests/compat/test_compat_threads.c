/* test_compat_threads.c - compat/ threads, mutexes and condition variables
 * (pthreads on POSIX, the native Win32 objects on Windows): mutual
 * exclusion, a bounded producer/consumer queue, signal and broadcast
 * wake-ups, timed waits that time out only once the time has passed and
 * return early when signalled, many threads created and joined. */
#include "compat/compat.h"
#include "tests/koma_test.h"

#include <stdatomic.h>
#include <string.h>

/* ---- mutual exclusion: a non-atomic counter, many threads ------------------ */
enum { MX_THREADS = 8, MX_ITERS = 20000 };
typedef struct {
    compat_mutex_t mu;
    int64_t counter;
    int64_t in_section; /* > 1 would mean two threads inside at once */
    int64_t max_in_section;
} mx_t;

static void *mx_worker(void *arg) {
    mx_t *s = arg;
    for (int i = 0; i < MX_ITERS; i++) {
        compat_mutex_lock(&s->mu);
        if (++s->in_section > s->max_in_section) s->max_in_section = s->in_section;
        s->counter++;
        s->in_section--;
        compat_mutex_unlock(&s->mu);
    }
    return NULL;
}

static void test_mutex(void) {
    mx_t s;
    memset(&s, 0, sizeof s);
    compat_mutex_init(&s.mu);
    compat_thread_t t[MX_THREADS];
    for (int i = 0; i < MX_THREADS; i++) CHECK(compat_thread_create(&t[i], mx_worker, &s) == 0);
    for (int i = 0; i < MX_THREADS; i++) CHECK(compat_thread_join(t[i]) == 0);
    CHECK(s.counter == (int64_t)MX_THREADS * MX_ITERS);
    CHECK(s.max_in_section == 1);
    compat_mutex_destroy(&s.mu);
}

/* ---- bounded queue: producers and consumers on two condition variables ---- */
enum { Q_CAP = 4, Q_PRODUCERS = 3, Q_CONSUMERS = 3, Q_ITEMS = 3000 };
typedef struct {
    compat_mutex_t mu;
    compat_cond_t not_full, not_empty;
    int64_t buf[Q_CAP];
    int head, n, producers_left;
    int64_t sum, count;
} queue_t;

static void *q_producer(void *arg) {
    queue_t *q = arg;
    for (int64_t i = 1; i <= Q_ITEMS; i++) {
        compat_mutex_lock(&q->mu);
        while (q->n == Q_CAP) compat_cond_wait(&q->not_full, &q->mu);
        q->buf[(q->head + q->n) % Q_CAP] = i;
        q->n++;
        compat_cond_signal(&q->not_empty);
        compat_mutex_unlock(&q->mu);
    }
    compat_mutex_lock(&q->mu);
    if (--q->producers_left == 0) compat_cond_broadcast(&q->not_empty); /* consumers: no more items */
    compat_mutex_unlock(&q->mu);
    return NULL;
}

static void *q_consumer(void *arg) {
    queue_t *q = arg;
    for (;;) {
        compat_mutex_lock(&q->mu);
        while (q->n == 0 && q->producers_left > 0) compat_cond_wait(&q->not_empty, &q->mu);
        if (q->n == 0) {
            compat_mutex_unlock(&q->mu);
            return NULL;
        }
        int64_t v = q->buf[q->head];
        q->head = (q->head + 1) % Q_CAP;
        q->n--;
        q->sum += v;
        q->count++;
        compat_cond_signal(&q->not_full);
        compat_mutex_unlock(&q->mu);
    }
}

static void test_queue(void) {
    queue_t q;
    memset(&q, 0, sizeof q);
    compat_mutex_init(&q.mu);
    compat_cond_init(&q.not_full);
    compat_cond_init(&q.not_empty);
    q.producers_left = Q_PRODUCERS;
    compat_thread_t t[Q_PRODUCERS + Q_CONSUMERS];
    for (int i = 0; i < Q_CONSUMERS; i++) CHECK(compat_thread_create(&t[i], q_consumer, &q) == 0);
    for (int i = 0; i < Q_PRODUCERS; i++) CHECK(compat_thread_create(&t[Q_CONSUMERS + i], q_producer, &q) == 0);
    for (int i = 0; i < Q_PRODUCERS + Q_CONSUMERS; i++) CHECK(compat_thread_join(t[i]) == 0);
    CHECK(q.count == (int64_t)Q_PRODUCERS * Q_ITEMS);
    CHECK(q.sum == (int64_t)Q_PRODUCERS * Q_ITEMS * (Q_ITEMS + 1) / 2);
    CHECK(q.n == 0);
    compat_cond_destroy(&q.not_full);
    compat_cond_destroy(&q.not_empty);
    compat_mutex_destroy(&q.mu);
}

/* ---- broadcast wakes every waiter; a signalled timed wait returns 0 ------- */
enum { BC_WAITERS = 6 };
typedef struct {
    compat_mutex_t mu;
    compat_cond_t cv;
    int waiting, go, woken, timed_rc;
} bc_t;

static void *bc_waiter(void *arg) {
    bc_t *b = arg;
    compat_mutex_lock(&b->mu);
    b->waiting++;
    compat_cond_broadcast(&b->cv); /* the main thread waits for all to be waiting */
    while (!b->go) compat_cond_wait(&b->cv, &b->mu);
    b->woken++;
    compat_mutex_unlock(&b->mu);
    return NULL;
}

static void *bc_timed_waiter(void *arg) {
    bc_t *b = arg;
    compat_mutex_lock(&b->mu);
    b->waiting++;
    compat_cond_broadcast(&b->cv);
    int rc = 0;
    /* 60 s: a signal must end this long before. */
    while (!b->go && rc == 0) rc = compat_cond_timedwait(&b->cv, &b->mu, 60000);
    b->timed_rc = rc;
    b->woken++;
    compat_mutex_unlock(&b->mu);
    return NULL;
}

static void test_broadcast(void) {
    bc_t b;
    memset(&b, 0, sizeof b);
    compat_mutex_init(&b.mu);
    compat_cond_init(&b.cv);
    compat_thread_t t[BC_WAITERS + 1];
    for (int i = 0; i < BC_WAITERS; i++) CHECK(compat_thread_create(&t[i], bc_waiter, &b) == 0);
    CHECK(compat_thread_create(&t[BC_WAITERS], bc_timed_waiter, &b) == 0);
    compat_mutex_lock(&b.mu);
    while (b.waiting < BC_WAITERS + 1) compat_cond_wait(&b.cv, &b.mu);
    b.go = 1;
    compat_cond_broadcast(&b.cv);
    compat_mutex_unlock(&b.mu);
    int64_t t0 = compat_now_ns();
    for (int i = 0; i < BC_WAITERS + 1; i++) CHECK(compat_thread_join(t[i]) == 0);
    CHECK(b.woken == BC_WAITERS + 1);
    CHECK(b.timed_rc == 0);
    CHECK(compat_now_ns() - t0 < 30 * 1000000000LL);
    compat_cond_destroy(&b.cv);
    compat_mutex_destroy(&b.mu);
}

/* ---- timed waits that time out --------------------------------------------- */
static void test_timeouts(void) {
    compat_mutex_t mu;
    compat_cond_t cv;
    compat_mutex_init(&mu);
    compat_cond_init(&cv);
    const int64_t waits[] = {1, 17, 40, 120};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        compat_mutex_lock(&mu);
        int64_t t0 = compat_now_ns();
        int rc = compat_cond_timedwait(&cv, &mu, waits[i]);
        int64_t dt = compat_now_ns() - t0;
        compat_mutex_unlock(&mu);
        CHECK(rc == 1);
        /* A timeout means the time has passed (1 ms slack for the clocks'
         * rounding), and not ten times over. */
        CHECK(dt >= (waits[i] - 1) * 1000000);
        CHECK(dt < (waits[i] * 10 + 500) * 1000000);
        if (dt < (waits[i] - 1) * 1000000)
            fprintf(stderr, "timedwait %lld ms returned after %.3f ms\n", (long long)waits[i], (double)dt / 1e6);
    }
    /* Zero and negative timeouts return at once, as a timeout. */
    compat_mutex_lock(&mu);
    int64_t t0 = compat_now_ns();
    CHECK(compat_cond_timedwait(&cv, &mu, 0) == 1);
    CHECK(compat_cond_timedwait(&cv, &mu, -5) == 1);
    CHECK(compat_now_ns() - t0 < 500 * 1000000LL);
    compat_mutex_unlock(&mu);
    compat_cond_destroy(&cv);
    compat_mutex_destroy(&mu);
}

/* ---- many short threads: each sees its own argument --------------------- */
enum { MANY = 64 };
static atomic_int g_seen[MANY];
static void *many_worker(void *arg) {
    int i = (int)(intptr_t)arg;
    atomic_fetch_add(&g_seen[i], 1);
    return NULL;
}

static void test_many(void) {
    for (int round = 0; round < 4; round++) {
        compat_thread_t t[MANY];
        for (int i = 0; i < MANY; i++) CHECK(compat_thread_create(&t[i], many_worker, (void *)(intptr_t)i) == 0);
        for (int i = 0; i < MANY; i++) CHECK(compat_thread_join(t[i]) == 0);
    }
    for (int i = 0; i < MANY; i++) CHECK(atomic_load(&g_seen[i]) == 4);
}

int main(void) {
    test_mutex();
    test_queue();
    test_broadcast();
    test_timeouts();
    test_many();
    return t_done("test_compat_threads");
}
