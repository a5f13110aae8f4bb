/* compat.c - POSIX and Windows implementations of compat.h. The only file in
 * Koma with #ifdef _WIN32. */
#include "compat.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <direct.h>
#include <io.h>
#include <process.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#endif

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void compat_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

/* ---- threads ------------------------------------------------------------ */
int compat_thread_create(compat_thread_t *t, compat_thread_fn fn, void *arg) {
    return pthread_create(t, NULL, fn, arg);
}
int compat_thread_join(compat_thread_t t) { return pthread_join(t, NULL); }
void compat_mutex_init(compat_mutex_t *m) { KOMA_ASSERT(pthread_mutex_init(m, NULL) == 0); }
void compat_mutex_destroy(compat_mutex_t *m) { pthread_mutex_destroy(m); }
void compat_mutex_lock(compat_mutex_t *m) { KOMA_ASSERT(pthread_mutex_lock(m) == 0); }
void compat_mutex_unlock(compat_mutex_t *m) { KOMA_ASSERT(pthread_mutex_unlock(m) == 0); }

void compat_cond_init(compat_cond_t *c) {
#if defined(_WIN32) || defined(__APPLE__)
    KOMA_ASSERT(pthread_cond_init(c, NULL) == 0);
#else
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    KOMA_ASSERT(pthread_cond_init(c, &a) == 0);
    pthread_condattr_destroy(&a);
#endif
}
void compat_cond_destroy(compat_cond_t *c) { pthread_cond_destroy(c); }
void compat_cond_wait(compat_cond_t *c, compat_mutex_t *m) { pthread_cond_wait(c, m); }
void compat_cond_signal(compat_cond_t *c) { pthread_cond_signal(c); }
void compat_cond_broadcast(compat_cond_t *c) { pthread_cond_broadcast(c); }

int compat_cond_timedwait(compat_cond_t *c, compat_mutex_t *m, int64_t timeout_ms) {
    struct timespec ts;
#if defined(_WIN32) || defined(__APPLE__)
    clock_gettime(CLOCK_REALTIME, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    int64_t ns = (int64_t)ts.tv_nsec + (timeout_ms % 1000) * 1000000;
    ts.tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    int rc = pthread_cond_timedwait(c, m, &ts);
    return rc == ETIMEDOUT ? 1 : 0;
}

/* ---- time, CPUs --------------------------------------------------------- */
int64_t compat_now_ns(void) {
#ifdef _WIN32
    static LARGE_INTEGER freq;
    LARGE_INTEGER now;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (int64_t)((double)now.QuadPart * 1e9 / (double)freq.QuadPart);
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#endif
}

void compat_sleep_ms(int64_t ms) {
    if (ms <= 0) return;
#ifdef _WIN32
    Sleep((DWORD)ms);
#else
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
#endif
}

int compat_cpu_count(void) {
#ifdef _WIN32
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

/* ---- mapping ------------------------------------------------------------ */
int compat_map_file(const char *path, compat_map_t *map, char *err, size_t errlen) {
    memset(map, 0, sizeof *map);
#ifdef _WIN32
    HANDLE f = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (f == INVALID_HANDLE_VALUE) {
        set_err(err, errlen, "%s: cannot open (error %lu)", path, (unsigned long)GetLastError());
        return -1;
    }
    LARGE_INTEGER sz;
    if (!GetFileSizeEx(f, &sz)) {
        CloseHandle(f);
        set_err(err, errlen, "%s: cannot read size", path);
        return -1;
    }
    map->size = (uint64_t)sz.QuadPart;
    if (map->size == 0) {
        CloseHandle(f);
        return 0;
    }
    HANDLE m = CreateFileMappingA(f, NULL, PAGE_READONLY, 0, 0, NULL);
    CloseHandle(f);
    if (!m) {
        set_err(err, errlen, "%s: cannot map", path);
        return -1;
    }
    map->data = MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0);
    CloseHandle(m);
    if (!map->data) {
        set_err(err, errlen, "%s: cannot map view", path);
        return -1;
    }
    return 0;
#else
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    map->size = (uint64_t)st.st_size;
    if (map->size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)map->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        set_err(err, errlen, "%s: cannot mmap: %s", path, strerror(errno));
        map->size = 0;
        return -1;
    }
    map->data = p;
    return 0;
#endif
}

void compat_unmap_file(compat_map_t *map) {
    if (!map || !map->data) return;
#ifdef _WIN32
    UnmapViewOfFile((void *)map->data);
#else
    munmap((void *)map->data, (size_t)map->size);
#endif
    map->data = NULL;
    map->size = 0;
}

/* ---- durable writes ----------------------------------------------------- */
struct compat_durable {
    FILE *f;
    char *path;
    char *tmp;
};

static int sync_file(FILE *f) {
    if (fflush(f) != 0) return -1;
#ifdef _WIN32
    return _commit(_fileno(f));
#else
    return fsync(fileno(f));
#endif
}

static void sync_parent_dir(const char *path) {
#ifndef _WIN32
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash) {
        *slash = 0;
        d = dir[0] ? dir : "/";
    }
    int fd = open(d, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
#else
    (void)path;
#endif
}

compat_durable_t *compat_durable_open(const char *path, char *err, size_t errlen) {
    compat_durable_t *d = calloc(1, sizeof *d);
    size_t n = strlen(path) + 32;
    if (!d || !(d->path = strdup(path)) || !(d->tmp = malloc(n))) {
        set_err(err, errlen, "%s: out of memory", path);
        if (d) free(d->path);
        free(d);
        return NULL;
    }
    snprintf(d->tmp, n, "%s.tmp.%d", path, compat_getpid());
    d->f = fopen(d->tmp, "wb");
    if (!d->f) {
        set_err(err, errlen, "%s: cannot create: %s", d->tmp, strerror(errno));
        free(d->path);
        free(d->tmp);
        free(d);
        return NULL;
    }
    return d;
}

int compat_durable_write(compat_durable_t *d, const void *data, size_t len, char *err, size_t errlen) {
    if (len && fwrite(data, 1, len, d->f) != len) {
        set_err(err, errlen, "%s: write failed: %s", d->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

void compat_durable_abort(compat_durable_t *d) {
    if (!d) return;
    if (d->f) fclose(d->f);
    remove(d->tmp);
    free(d->path);
    free(d->tmp);
    free(d);
}

int compat_durable_commit(compat_durable_t *d, char *err, size_t errlen) {
    if (sync_file(d->f) != 0) {
        set_err(err, errlen, "%s: flush/fsync failed: %s", d->tmp, strerror(errno));
        compat_durable_abort(d);
        return -1;
    }
    int rc = fclose(d->f);
    d->f = NULL;
    if (rc != 0) {
        set_err(err, errlen, "%s: close failed: %s", d->tmp, strerror(errno));
        compat_durable_abort(d);
        return -1;
    }
#ifdef _WIN32
    if (!MoveFileExA(d->tmp, d->path, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
        set_err(err, errlen, "%s: rename failed (error %lu)", d->path, (unsigned long)GetLastError());
        compat_durable_abort(d);
        return -1;
    }
#else
    if (rename(d->tmp, d->path) != 0) {
        set_err(err, errlen, "%s: rename failed: %s", d->path, strerror(errno));
        compat_durable_abort(d);
        return -1;
    }
#endif
    sync_parent_dir(d->path);
    free(d->path);
    free(d->tmp);
    free(d);
    return 0;
}

int compat_write_file_durable(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    compat_durable_t *d = compat_durable_open(path, err, errlen);
    if (!d) return -1;
    if (compat_durable_write(d, data, len, err, errlen) != 0) {
        compat_durable_abort(d);
        return -1;
    }
    return compat_durable_commit(d, err, errlen);
}

/* ---- directories and files ---------------------------------------------- */
static int mkdir_one(const char *p) {
#ifdef _WIN32
    return _mkdir(p);
#else
    return mkdir(p, 0777);
#endif
}

static int is_dir(const char *p) {
#ifdef _WIN32
    DWORD a = GetFileAttributesA(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
#else
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
#endif
}

int compat_mkdir_p(const char *path, char *err, size_t errlen) {
    char *p = strdup(path);
    if (!p) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s == '/' || *s == '\\') {
            char c = *s;
            *s = 0;
            if (!is_dir(p)) mkdir_one(p);
            *s = c;
        }
    }
    if (!is_dir(p) && mkdir_one(p) != 0 && !is_dir(p)) {
        set_err(err, errlen, "%s: cannot create directory: %s", path, strerror(errno));
        free(p);
        return -1;
    }
    free(p);
    return 0;
}

int compat_file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

int64_t compat_file_size(const char *path) {
#ifdef _WIN32
    struct _stat64 st;
    if (_stat64(path, &st) != 0) return -1;
#else
    struct stat st;
    if (stat(path, &st) != 0) return -1;
#endif
    return (int64_t)st.st_size;
}

int compat_remove_file(const char *path) { return remove(path); }

char *compat_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        set_err(err, errlen, "%s: read failed", path);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* ---- process ------------------------------------------------------------ */
static atomic_int g_stop;

static void on_signal(int sig) {
    (void)sig;
    atomic_store(&g_stop, 1);
}

void compat_install_stop_handler(void) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
}
int compat_stop_requested(void) { return atomic_load(&g_stop); }
void compat_request_stop(void) { atomic_store(&g_stop, 1); }

int compat_getpid(void) {
#ifdef _WIN32
    return (int)_getpid();
#else
    return (int)getpid();
#endif
}
