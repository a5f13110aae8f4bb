/* test_compat.c - compat/ layer: durable writes, mapping, threads, clock. */
#include "compat/compat.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                \
    do {                                                                        \
        if (!(c)) {                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                         \
        }                                                                       \
    } while (0)

typedef struct {
    compat_mutex_t mu;
    compat_cond_t cv;
    int counter;
    atomic_int ready;
} shared_t;

static void *worker(void *arg) {
    shared_t *s = arg;
    for (int i = 0; i < 100000; i++) {
        compat_mutex_lock(&s->mu);
        s->counter++;
        compat_mutex_unlock(&s->mu);
    }
    compat_mutex_lock(&s->mu);
    atomic_fetch_add(&s->ready, 1);
    compat_cond_broadcast(&s->cv);
    compat_mutex_unlock(&s->mu);
    return NULL;
}

int main(void) {
    char err[512];
    char dir[256];
    snprintf(dir, sizeof dir, "%s/compat_%d/a/b", KOMA_TEST_TMP, compat_getpid());
    CHECK(compat_mkdir_p(dir, err, sizeof err) == 0);
    CHECK(compat_mkdir_p(dir, err, sizeof err) == 0); /* idempotent */

    char path[300];
    snprintf(path, sizeof path, "%s/file.bin", dir);
    const char msg[] = "hello, durable world";
    CHECK(compat_write_file_durable(path, msg, sizeof msg, err, sizeof err) == 0);
    CHECK(compat_file_size(path) == (int64_t)sizeof msg);

    compat_map_t m;
    CHECK(compat_map_file(path, &m, err, sizeof err) == 0);
    CHECK(m.size == sizeof msg && memcmp(m.data, msg, sizeof msg) == 0);
    compat_unmap_file(&m);

    /* An aborted durable write leaves the old contents and no temporary. */
    compat_durable_t *d = compat_durable_open(path, err, sizeof err);
    CHECK(d != NULL);
    CHECK(compat_durable_write(d, "xx", 2, err, sizeof err) == 0);
    compat_durable_abort(d);
    size_t len = 0;
    char *back = compat_read_file(path, &len, err, sizeof err);
    CHECK(back && len == sizeof msg && memcmp(back, msg, len) == 0);
    free(back);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, compat_getpid());
    CHECK(!compat_file_exists(tmp));

    /* Missing files are reported by name. */
    CHECK(compat_map_file("build/no/such/file", &m, err, sizeof err) != 0);
    CHECK(strstr(err, "build/no/such/file") != NULL);
    CHECK(compat_read_file("build/no/such/file", NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "build/no/such/file") != NULL);

    /* Threads and a mutex: no lost increments. */
    shared_t s;
    memset(&s, 0, sizeof s);
    compat_mutex_init(&s.mu);
    compat_cond_init(&s.cv);
    compat_thread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(compat_thread_create(&t[i], worker, &s) == 0);
    compat_mutex_lock(&s.mu);
    while (atomic_load(&s.ready) < 4) compat_cond_wait(&s.cv, &s.mu);
    compat_mutex_unlock(&s.mu);
    for (int i = 0; i < 4; i++) compat_thread_join(t[i]);
    CHECK(s.counter == 400000);

    /* Timed wait times out and the clock moves forward. */
    int64_t t0 = compat_now_ns();
    compat_mutex_lock(&s.mu);
    int rc = compat_cond_timedwait(&s.cv, &s.mu, 30);
    compat_mutex_unlock(&s.mu);
    int64_t dt = compat_now_ns() - t0;
    CHECK(rc == 1);
    CHECK(dt >= 25 * 1000000LL);
    CHECK(compat_cpu_count() >= 1);
    compat_cond_destroy(&s.cv);
    compat_mutex_destroy(&s.mu);
    compat_remove_file(path);

    if (failures) {
        fprintf(stderr, "test_compat: %d failures\n", failures);
        return 1;
    }
    printf("test_compat: ok\n");
    return 0;
}
