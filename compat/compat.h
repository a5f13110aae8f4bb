/* compat.h - the only place that knows which operating system it runs on.
 *
 * Owns: threads, mutexes, condition variables, a monotonic clock, the CPU
 * count, read-only file mapping, durable writes (temporary name, fsync,
 * rename), directory creation and process-level signals. Everything else in
 * Koma calls these and never includes an OS header or tests _WIN32.
 * Does not own: atomics (C11 <stdatomic.h> is used directly), file formats.
 */
#ifndef KOMA_COMPAT_H
#define KOMA_COMPAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- threads (pthreads, winpthreads under MinGW-w64) ------------------- */
#include <pthread.h>

typedef pthread_t compat_thread_t;
typedef pthread_mutex_t compat_mutex_t;
typedef pthread_cond_t compat_cond_t;

typedef void *(*compat_thread_fn)(void *arg);

/* Returns 0 on success. */
int compat_thread_create(compat_thread_t *t, compat_thread_fn fn, void *arg);
int compat_thread_join(compat_thread_t t);

void compat_mutex_init(compat_mutex_t *m);
void compat_mutex_destroy(compat_mutex_t *m);
void compat_mutex_lock(compat_mutex_t *m);
void compat_mutex_unlock(compat_mutex_t *m);

void compat_cond_init(compat_cond_t *c);
void compat_cond_destroy(compat_cond_t *c);
void compat_cond_wait(compat_cond_t *c, compat_mutex_t *m);
/* Waits at most timeout_ms; returns 0 when signalled, 1 on timeout. */
int compat_cond_timedwait(compat_cond_t *c, compat_mutex_t *m, int64_t timeout_ms);
void compat_cond_signal(compat_cond_t *c);
void compat_cond_broadcast(compat_cond_t *c);

/* ---- time, CPUs ---------------------------------------------------------- */
/* Monotonic clock in nanoseconds since an arbitrary origin. */
int64_t compat_now_ns(void);
static inline int64_t compat_now_ms(void) { return compat_now_ns() / 1000000; }
void compat_sleep_ms(int64_t ms);
/* Number of online logical CPUs, at least 1. */
int compat_cpu_count(void);

/* ---- files --------------------------------------------------------------- */
/* A read-only mapping of a whole file. data is NULL for an empty file. */
typedef struct {
    const uint8_t *data;
    uint64_t size;
    void *handle_; /* private */
} compat_map_t;

/* Returns 0 on success; on failure -1 and a message naming the file in err. */
int compat_map_file(const char *path, compat_map_t *map, char *err, size_t errlen);
void compat_unmap_file(compat_map_t *map);

/* Durable write: data goes to "<path>.tmp.<pid>", is flushed and fsync'ed,
 * renamed over path, and the directory is fsync'ed. Either the old file or
 * the complete new one is there after a crash, never a torn one.
 * Streaming form: open, write any number of times, then commit or abort. */
typedef struct compat_durable compat_durable_t;
compat_durable_t *compat_durable_open(const char *path, char *err, size_t errlen);
int compat_durable_write(compat_durable_t *f, const void *data, size_t len, char *err, size_t errlen);
int compat_durable_commit(compat_durable_t *f, char *err, size_t errlen); /* frees f */
void compat_durable_abort(compat_durable_t *f);                            /* frees f, NULL ok */
int compat_write_file_durable(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* mkdir -p. Returns 0 when the directory exists afterwards. */
int compat_mkdir_p(const char *path, char *err, size_t errlen);
int compat_file_exists(const char *path);
/* Size of a file in bytes, or -1. */
int64_t compat_file_size(const char *path);
int compat_remove_file(const char *path);
/* Read a whole file into a malloc'ed, NUL-terminated buffer. */
char *compat_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* ---- process ------------------------------------------------------------- */
/* Installs SIGINT/SIGTERM (Ctrl-C / Ctrl-Break on Windows) handlers that set
 * a flag; compat_stop_requested() reads it. Safe to call more than once. */
void compat_install_stop_handler(void);
int compat_stop_requested(void);
void compat_request_stop(void);
int compat_getpid(void);

/* ---- invariants -------------------------------------------------------- */
/* Always on, prints file:line and the expression, then aborts. For bugs only;
 * failures from the outside world return a status instead. */
#define KOMA_ASSERT(cond)                                                       \
    do {                                                                        \
        if (!(cond)) compat_assert_fail(#cond, __FILE__, __LINE__);             \
    } while (0)
void compat_assert_fail(const char *expr, const char *file, int line);

#endif
