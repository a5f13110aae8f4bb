/* compat.c - POSIX and Windows implementations of compat.h. With exe.c, the
 * only files in Koma with #ifdef _WIN32. */
#include "compat.h"
#include "compat/err.h"
#include "compat/exe.h"

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
#include <malloc.h>
#include <process.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <windows.h>
#else
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>
#endif

void compat_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

/* ---- threads ------------------------------------------------------------ */
#ifdef _WIN32
/* compat.h stores these as one opaque pointer each. */
_Static_assert(sizeof(compat_mutex_t) == sizeof(SRWLOCK) && _Alignof(compat_mutex_t) >= _Alignof(SRWLOCK),
               "compat_mutex_t must hold an SRWLOCK");
_Static_assert(sizeof(compat_cond_t) == sizeof(CONDITION_VARIABLE) &&
                   _Alignof(compat_cond_t) >= _Alignof(CONDITION_VARIABLE),
               "compat_cond_t must hold a CONDITION_VARIABLE");
#define SRW_OF(m) ((PSRWLOCK)(void *)(m))
#define CV_OF(c) ((PCONDITION_VARIABLE)(void *)(c))

typedef struct {
    compat_thread_fn fn;
    void *arg;
} thread_start_t;

/* _beginthreadex wants unsigned __stdcall f(void *); ours return void *. */
static unsigned __stdcall thread_main(void *p) {
    thread_start_t start = *(thread_start_t *)p;
    free(p);
    start.fn(start.arg);
    return 0;
}

int compat_thread_create(compat_thread_t *t, compat_thread_fn fn, void *arg) {
    thread_start_t *start = malloc(sizeof *start);
    if (!start) return -1;
    start->fn = fn;
    start->arg = arg;
    /* _beginthreadex, not CreateThread: the C runtime sets up its per-thread state. */
    uintptr_t h = _beginthreadex(NULL, 0, thread_main, start, 0, NULL);
    if (!h) {
        free(start);
        return -1;
    }
    *t = (void *)h;
    return 0;
}
int compat_thread_join(compat_thread_t t) {
    DWORD rc = WaitForSingleObject((HANDLE)t, INFINITE);
    CloseHandle((HANDLE)t);
    return rc == WAIT_OBJECT_0 ? 0 : -1;
}
/* An SRWLOCK or CONDITION_VARIABLE owns no kernel object: nothing to destroy. */
void compat_mutex_init(compat_mutex_t *m) { InitializeSRWLock(SRW_OF(m)); }
void compat_mutex_destroy(compat_mutex_t *m) { (void)m; }
void compat_mutex_lock(compat_mutex_t *m) { AcquireSRWLockExclusive(SRW_OF(m)); }
void compat_mutex_unlock(compat_mutex_t *m) { ReleaseSRWLockExclusive(SRW_OF(m)); }

void compat_cond_init(compat_cond_t *c) { InitializeConditionVariable(CV_OF(c)); }
void compat_cond_destroy(compat_cond_t *c) { (void)c; }
void compat_cond_wait(compat_cond_t *c, compat_mutex_t *m) {
    KOMA_ASSERT(SleepConditionVariableSRW(CV_OF(c), SRW_OF(m), INFINITE, 0));
}
void compat_cond_signal(compat_cond_t *c) { WakeConditionVariable(CV_OF(c)); }
void compat_cond_broadcast(compat_cond_t *c) { WakeAllConditionVariable(CV_OF(c)); }

int compat_cond_timedwait(compat_cond_t *c, compat_mutex_t *m, int64_t timeout_ms) {
    if (timeout_ms < 0) timeout_ms = 0;
    if (timeout_ms > INT64_MAX / 4000000) timeout_ms = INT64_MAX / 4000000; /* no overflow below */
    /* Windows may end a timed wait up to a clock tick early: wait again for
     * the rest, so that a timeout means the time has passed (as with the
     * absolute pthreads deadline). */
    const int64_t deadline = compat_now_ns() + timeout_ms * 1000000;
    for (;;) {
        int64_t left_ms = (deadline - compat_now_ns() + 999999) / 1000000;
        DWORD ms = left_ms <= 0 ? 0 : left_ms >= (int64_t)INFINITE ? INFINITE - 1 : (DWORD)left_ms;
        if (SleepConditionVariableSRW(CV_OF(c), SRW_OF(m), ms, 0)) return 0;
        KOMA_ASSERT(GetLastError() == ERROR_TIMEOUT);
        if (compat_now_ns() >= deadline) return 1;
    }
}
#else
int compat_thread_create(compat_thread_t *t, compat_thread_fn fn, void *arg) {
    return pthread_create(t, NULL, fn, arg);
}
int compat_thread_join(compat_thread_t t) { return pthread_join(t, NULL); }
void compat_mutex_init(compat_mutex_t *m) { KOMA_ASSERT(pthread_mutex_init(m, NULL) == 0); }
void compat_mutex_destroy(compat_mutex_t *m) { pthread_mutex_destroy(m); }
void compat_mutex_lock(compat_mutex_t *m) { KOMA_ASSERT(pthread_mutex_lock(m) == 0); }
void compat_mutex_unlock(compat_mutex_t *m) { KOMA_ASSERT(pthread_mutex_unlock(m) == 0); }

void compat_cond_init(compat_cond_t *c) {
#if defined(__APPLE__)
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
    if (timeout_ms < 0) timeout_ms = 0;
#if defined(__APPLE__)
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
#endif

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

int64_t compat_cpu_time_ns(void) {
#ifdef _WIN32
    FILETIME created, exited, kernel, user; /* 100-ns units */
    if (!GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel, &user)) return 0;
    uint64_t k = ((uint64_t)kernel.dwHighDateTime << 32) | kernel.dwLowDateTime;
    uint64_t u = ((uint64_t)user.dwHighDateTime << 32) | user.dwLowDateTime;
    return (int64_t)(k + u) * 100;
#else
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
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

int64_t compat_memory_total(void) {
#ifdef _WIN32
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms) && ms.ullTotalPhys > 0 && ms.ullTotalPhys <= (DWORDLONG)INT64_MAX)
        return (int64_t)ms.ullTotalPhys;
    return 0;
#else
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (int64_t)pages <= INT64_MAX / page) return (int64_t)pages * page;
#endif
    long long kb = 0;
    FILE *f = fopen("/proc/meminfo", "r"); /* Linux without the sysconf names */
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) break;
        fclose(f);
    }
    return kb > 0 && kb <= INT64_MAX / 1024 ? (int64_t)kb * 1024 : 0;
#endif
}

int64_t compat_address_space_used(void) {
#if defined(__linux__)
    char b[64];
    long long pages = -1;
    FILE *f = fopen("/proc/self/statm", "r"); /* first field: pages of address space */
    if (!f) return -1;
    if (fgets(b, sizeof b, f)) pages = strtoll(b, NULL, 10);
    fclose(f);
    return pages < 0 ? -1 : (int64_t)pages * (int64_t)sysconf(_SC_PAGESIZE);
#else
    return -1;
#endif
}

int64_t compat_address_space_limit(void) {
#ifdef _WIN32
    return -1;
#else
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT64_MAX)
        return -1;
    return (int64_t)rl.rlim_cur;
#endif
}

char *compat_address_space_note(char *buf, size_t n) {
    int64_t lim = compat_address_space_limit();
    if (!buf || n == 0) return buf;
    buf[0] = 0;
    if (lim >= 0)
        snprintf(buf, n, " under the address-space limit of %lld MiB (ulimit -v %lld)", (long long)(lim >> 20),
                 (long long)(lim >> 10));
    return buf;
}

/* ---- memory ------------------------------------------------------------- */
void *compat_aligned_alloc(size_t align, size_t size) {
    if (align < sizeof(void *)) align = sizeof(void *);
    if ((align & (align - 1)) != 0 || align > 4096) return NULL;
    size_t n = (size + align - 1) & ~(align - 1);
    if (n < size) return NULL; /* overflow */
    if (n == 0) n = align;
#ifdef _WIN32
    return _aligned_malloc(n, align);
#else
    void *p = NULL;
    return posix_memalign(&p, align, n) == 0 ? p : NULL;
#endif
}

void compat_aligned_free(void *p) {
#ifdef _WIN32
    _aligned_free(p);
#else
    free(p);
#endif
}

/* ---- mapping ------------------------------------------------------------ */
int compat_map_file(const char *path, compat_map_t *map, char *err, size_t errlen) {
    memset(map, 0, sizeof *map);
    if (compat_check_regular_file(path, err, errlen) != 0) return -1;
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
    /* O_NONBLOCK: a FIFO put in place after the check must not block the open */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
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
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s: is not a regular file", path);
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
    if (compat_rename(d->tmp, d->path, err, errlen) != 0) {
        compat_durable_abort(d);
        return -1;
    }
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

int compat_is_dir(const char *p) {
#ifdef _WIN32
    DWORD a = GetFileAttributesA(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
#else
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
#endif
}

int compat_check_regular_file(const char *path, char *err, size_t errlen) {
    if (!path) return 0;
#ifdef _WIN32
    /* \\.\NAME is the device namespace (pipes, consoles, disks) */
    if ((path[0] == '\\' || path[0] == '/') && (path[1] == '\\' || path[1] == '/') && path[2] == '.' &&
        (path[3] == '\\' || path[3] == '/')) {
        set_err(err, errlen, "%s: is not a regular file (a device or pipe)", path);
        return -1;
    }
    DWORD a = GetFileAttributesA(path);
    if (a == INVALID_FILE_ATTRIBUTES) return 0;
    if (a & FILE_ATTRIBUTE_DIRECTORY) {
        set_err(err, errlen, "%s: is a directory", path);
        return -1;
    }
    if (a & FILE_ATTRIBUTE_DEVICE) {
        set_err(err, errlen, "%s: is not a regular file (a device)", path);
        return -1;
    }
    return 0;
#else
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: is a directory", path);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s: is not a regular file (a FIFO, device or socket)", path);
        return -1;
    }
    return 0;
#endif
}

#ifdef _WIN32
int compat_file_id(const char *path, compat_file_id_t *id) {
    HANDLE h = CreateFileA(path, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS, NULL); /* BACKUP_SEMANTICS: directories too */
    if (h == INVALID_HANDLE_VALUE) return -1;
    BY_HANDLE_FILE_INFORMATION fi;
    BOOL ok = GetFileInformationByHandle(h, &fi);
    CloseHandle(h);
    if (!ok) return -1;
    id->dev = fi.dwVolumeSerialNumber;
    id->ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow;
    id->nlink = fi.nNumberOfLinks;
    return 0;
}

int compat_real_path(const char *path, char *out, size_t len) {
    if (GetFileAttributesA(path) == INVALID_FILE_ATTRIBUTES) return -1;
    DWORD n = GetFullPathNameA(path, (DWORD)len, out, NULL);
    return n > 0 && n < len ? 0 : -1;
}

int compat_is_link(const char *path) {
    DWORD a = GetFileAttributesA(path);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_REPARSE_POINT) ? 1 : 0;
}

int compat_fs_readonly(const char *path) {
    char vol[MAX_PATH];
    DWORD flags = 0;
    if (!GetVolumePathNameA(path, vol, sizeof vol)) return 0;
    if (!GetVolumeInformationA(vol, NULL, 0, NULL, NULL, &flags, NULL, 0)) return 0;
    return (flags & FILE_READ_ONLY_VOLUME) ? 1 : 0;
}

int compat_can_write(const char *path) {
    DWORD a = GetFileAttributesA(path);
    if (a == INVALID_FILE_ATTRIBUTES) return 0;
    if (compat_fs_readonly(path)) return 0;
    return (a & FILE_ATTRIBUTE_DIRECTORY) || !(a & FILE_ATTRIBUTE_READONLY) ? 1 : 0;
}
#else
int compat_file_id(const char *path, compat_file_id_t *id) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    id->dev = (uint64_t)st.st_dev;
    id->ino = (uint64_t)st.st_ino;
    id->nlink = (int64_t)st.st_nlink;
    return 0;
}

int compat_real_path(const char *path, char *out, size_t len) {
    char *r = realpath(path, NULL);
    if (!r) return -1;
    size_t n = strlen(r);
    int ok = n < len;
    if (ok) memcpy(out, r, n + 1);
    free(r);
    return ok ? 0 : -1;
}

int compat_is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? 1 : 0;
}

int compat_fs_readonly(const char *path) {
    struct statvfs vs;
    return statvfs(path, &vs) == 0 && (vs.f_flag & ST_RDONLY) ? 1 : 0;
}

int compat_can_write(const char *path) { return access(path, W_OK) == 0 ? 1 : 0; }
#endif

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
            if (!compat_is_dir(p)) mkdir_one(p);
            *s = c;
        }
    }
    if (!compat_is_dir(p) && mkdir_one(p) != 0 && !compat_is_dir(p)) {
        set_err(err, errlen, "%s: cannot create directory: %s", path, strerror(errno));
        free(p);
        return -1;
    }
    free(p);
    return 0;
}

int compat_file_exists(const char *path) {
#ifdef _WIN32
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
#else
    return access(path, R_OK) == 0; /* no open: opening a FIFO blocks */
#endif
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

int compat_remove_dir(const char *path) {
#ifdef _WIN32
    return _rmdir(path);
#else
    return rmdir(path);
#endif
}

int compat_rename(const char *from, const char *to, char *err, size_t errlen) {
#ifdef _WIN32
    if (!MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
        set_err(err, errlen, "%s -> %s: rename failed (Windows error %lu)", from, to,
                (unsigned long)GetLastError());
        return -1;
    }
#else
    if (rename(from, to) != 0) {
        set_err(err, errlen, "%s -> %s: rename failed: %s", from, to, strerror(errno));
        return -1;
    }
#endif
    return 0;
}

/* A directory that is no link (lstat; Windows: no reparse point). */
static int is_real_dir(const char *p) {
#ifdef _WIN32
    DWORD a = GetFileAttributesA(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) && !(a & FILE_ATTRIBUTE_REPARSE_POINT);
#else
    struct stat st;
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
#endif
}

static int path_exists_nofollow(const char *p) {
#ifdef _WIN32
    return GetFileAttributesA(p) != INVALID_FILE_ATTRIBUTES;
#else
    struct stat st;
    return lstat(p, &st) == 0;
#endif
}

typedef struct {
    const char *dir;
    char *err;
    size_t errlen;
    int failed;
} remove_walk_t;

static int remove_entry(const char *name, int is_dir, void *user) {
    (void)is_dir; /* decided again without following links */
    remove_walk_t *w = user;
    size_t n = strlen(w->dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) {
        if (!w->failed) set_err(w->err, w->errlen, "%s: out of memory", w->dir);
        w->failed = 1;
        return 0;
    }
    snprintf(p, n, "%s/%s", w->dir, name);
    char e[512];
    if (compat_remove_tree(p, e, sizeof e) != 0) {
        if (!w->failed) set_err(w->err, w->errlen, "%s", e);
        w->failed = 1;
    }
    free(p);
    return 0;
}

int compat_remove_tree(const char *path, char *err, size_t errlen) {
    if (!path_exists_nofollow(path)) return 0;
    if (!is_real_dir(path)) {
#ifdef _WIN32
        DWORD a = GetFileAttributesA(path);
        int ok = (a & FILE_ATTRIBUTE_DIRECTORY) ? RemoveDirectoryA(path) : DeleteFileA(path);
        if (!ok) {
            set_err(err, errlen, "%s: cannot remove (Windows error %lu)", path, (unsigned long)GetLastError());
            return -1;
        }
#else
        if (unlink(path) != 0) {
            set_err(err, errlen, "%s: cannot remove: %s", path, strerror(errno));
            return -1;
        }
#endif
        return 0;
    }
    remove_walk_t w = {path, err, errlen, 0};
    char e[512];
    if (compat_list_dir(path, remove_entry, &w, e, sizeof e) != 0) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    if (compat_remove_dir(path) != 0) {
        if (!w.failed) set_err(err, errlen, "%s: cannot remove directory: %s", path, strerror(errno));
        return -1;
    }
    return w.failed ? -1 : 0;
}

/* One directory entry of a listing snapshot. */
typedef struct {
    char *name;
    int is_dir;
} dir_entry_t;

static int dir_entry_cmp(const void *a, const void *b) {
    return strcmp(((const dir_entry_t *)a)->name, ((const dir_entry_t *)b)->name);
}

static int dir_push(dir_entry_t **v, size_t *n, size_t *cap, const char *name, int is_dir) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        dir_entry_t *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return -1;
        *v = nv;
        *cap = nc;
    }
    char *copy = malloc(strlen(name) + 1);
    if (!copy) return -1;
    strcpy(copy, name);
    (*v)[*n].name = copy;
    (*v)[*n].is_dir = is_dir;
    (*n)++;
    return 0;
}

int compat_list_dir(const char *dir, compat_dir_fn fn, void *user, char *err, size_t errlen) {
    dir_entry_t *v = NULL;
    size_t n = 0, cap = 0;
    int oom = 0;
#ifdef _WIN32
    size_t dl = strlen(dir);
    char *pat = malloc(dl + 3);
    if (!pat) {
        set_err(err, errlen, "%s: out of memory", dir);
        return -1;
    }
    memcpy(pat, dir, dl);
    size_t k = dl;
    if (k && pat[k - 1] != '/' && pat[k - 1] != '\\') pat[k++] = '/';
    pat[k++] = '*';
    pat[k] = 0;
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pat, &fd);
    free(pat);
    if (h == INVALID_HANDLE_VALUE) {
        DWORD e = GetLastError();
        if (e == ERROR_FILE_NOT_FOUND && compat_is_dir(dir)) return 0; /* empty */
        set_err(err, errlen, "%s: cannot list directory (Windows error %lu)", dir, (unsigned long)e);
        return -1;
    }
    do {
        const char *name = fd.cFileName;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (dir_push(&v, &n, &cap, name, (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) != 0) {
            oom = 1;
            break;
        }
    } while (FindNextFileA(h, &fd));
    FindClose(h);
#else
    DIR *d = opendir(dir);
    if (!d) {
        set_err(err, errlen, "%s: cannot list directory: %s", dir, strerror(errno));
        return -1;
    }
    size_t dl = strlen(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        int isd;
#ifdef DT_DIR
        if (e->d_type == DT_DIR)
            isd = 1;
        else if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK)
            isd = 0;
        else
#endif
        {
            char *full = malloc(dl + strlen(name) + 2);
            if (!full) {
                oom = 1;
                break;
            }
            sprintf(full, "%s/%s", dir, name);
            isd = compat_is_dir(full);
            free(full);
        }
        if (dir_push(&v, &n, &cap, name, isd) != 0) {
            oom = 1;
            break;
        }
    }
    closedir(d);
#endif
    int rc = 0;
    if (oom) {
        set_err(err, errlen, "%s: out of memory while listing", dir);
        rc = -1;
    } else {
        if (n > 1) qsort(v, n, sizeof *v, dir_entry_cmp);
        for (size_t i = 0; i < n && rc == 0; i++) rc = fn(v[i].name, v[i].is_dir, user);
    }
    for (size_t i = 0; i < n; i++) free(v[i].name);
    free(v);
    return rc;
}

const char *compat_temp_dir(void) {
    static char buf[1024];
    static atomic_int state; /* 0 unset, 1 being set, 2 set */
    int expect = 0;
    if (atomic_compare_exchange_strong(&state, &expect, 1)) {
        const char *names[] = {"TMPDIR", "TEMP", "TMP"};
        const char *t = NULL;
        for (int i = 0; i < 3 && !t; i++) {
            t = getenv(names[i]);
            if (t && !*t) t = NULL;
        }
#ifdef _WIN32
        char wbuf[MAX_PATH + 1];
        if (!t) {
            DWORD k = GetTempPathA(sizeof wbuf, wbuf);
            t = (k > 0 && k < sizeof wbuf) ? wbuf : ".";
        }
#else
        if (!t) t = "/tmp";
#endif
        snprintf(buf, sizeof buf, "%s", t);
        size_t k = strlen(buf);
        while (k > 1 && (buf[k - 1] == '/' || buf[k - 1] == '\\')) buf[--k] = 0;
        atomic_store(&state, 2);
    } else {
        while (atomic_load(&state) != 2) {
        }
    }
    return buf;
}

char *compat_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    if (compat_check_regular_file(path, err, errlen) != 0) return NULL;
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

/* ---- file locks --------------------------------------------------------- */

/* The holder's text is short: a pid, a command, a host and a time. */
#define LOCK_TEXT_MAX 512

#ifdef _WIN32
struct compat_lock {
    HANDLE h;
};
/* Windows locks are mandatory for the bytes they cover: lock one byte far past
 * the text so that a refused process can still read who holds it. */
#define LOCK_WIN_OFFSET 0x40000000u

static void lock_read_text(HANDLE h, char *buf, size_t len) {
    if (!buf || !len) return;
    buf[0] = 0;
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    DWORD got = 0;
    DWORD want = (DWORD)(len - 1 < LOCK_TEXT_MAX ? len - 1 : LOCK_TEXT_MAX);
    if (ReadFile(h, buf, want, &got, &ov)) buf[got] = 0;
}

int compat_lock_try(const char *path, const char *owner, compat_lock_t **out, char *holder, size_t holder_len,
                    char *err, size_t errlen) {
    *out = NULL;
    if (holder && holder_len) holder[0] = 0;
    HANDLE h = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        set_err(err, errlen, "%s: cannot open the lock file (Windows error %lu)", path, (unsigned long)GetLastError());
        return -1;
    }
    SetHandleInformation(h, HANDLE_FLAG_INHERIT, 0);
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.Offset = LOCK_WIN_OFFSET;
    if (!LockFileEx(h, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ov)) {
        DWORD e = GetLastError();
        if (e == ERROR_LOCK_VIOLATION || e == ERROR_IO_PENDING) {
            lock_read_text(h, holder, holder_len);
            CloseHandle(h);
            return 1;
        }
        CloseHandle(h);
        set_err(err, errlen, "%s: cannot lock (Windows error %lu)", path, (unsigned long)e);
        return -1;
    }
    DWORD put = 0;
    size_t n = owner ? strlen(owner) : 0;
    if (SetFilePointer(h, 0, NULL, FILE_BEGIN) == INVALID_SET_FILE_POINTER || !SetEndOfFile(h) ||
        (n && !WriteFile(h, owner, (DWORD)n, &put, NULL))) {
        set_err(err, errlen, "%s: cannot write the lock file (Windows error %lu)", path, (unsigned long)GetLastError());
        CloseHandle(h);
        return -1;
    }
    compat_lock_t *l = malloc(sizeof *l);
    if (!l) {
        CloseHandle(h);
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    l->h = h;
    *out = l;
    return 0;
}

void compat_lock_release(compat_lock_t *l) {
    if (!l) return;
    CloseHandle(l->h); /* closing the handle releases the lock */
    free(l);
}

int compat_set_readonly_dir(const char *path, int readonly) {
    (void)path, (void)readonly;
    return -1;
}
#else
#include <sys/file.h>

struct compat_lock {
    int fd;
};

static void lock_read_text(int fd, char *buf, size_t len) {
    if (!buf || !len) return;
    size_t want = len - 1 < LOCK_TEXT_MAX ? len - 1 : LOCK_TEXT_MAX;
    ssize_t got = pread(fd, buf, want, 0);
    buf[got > 0 ? got : 0] = 0;
}

int compat_lock_try(const char *path, const char *owner, compat_lock_t **out, char *holder, size_t holder_len,
                    char *err, size_t errlen) {
    *out = NULL;
    if (holder && holder_len) holder[0] = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot open the lock file: %s", path, strerror(errno));
        return -1;
    }
    int rc;
    do rc = flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int e = errno;
        if (e == EWOULDBLOCK || e == EAGAIN) {
            lock_read_text(fd, holder, holder_len);
            close(fd);
            return 1;
        }
        close(fd);
        set_err(err, errlen, "%s: cannot lock: %s", path, strerror(e));
        return -1;
    }
    size_t n = owner ? strlen(owner) : 0;
    if (ftruncate(fd, 0) != 0 || (n && pwrite(fd, owner, n, 0) != (ssize_t)n)) {
        set_err(err, errlen, "%s: cannot write the lock file: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    compat_lock_t *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    l->fd = fd;
    *out = l;
    return 0;
}

void compat_lock_release(compat_lock_t *l) {
    if (!l) return;
    close(l->fd); /* closing the last descriptor releases the flock */
    free(l);
}

int compat_set_readonly_dir(const char *path, int readonly) {
    return chmod(path, readonly ? 0555 : 0755) == 0 ? 0 : -1;
}
#endif

/* ---- terminals -------------------------------------------------------- */
#ifdef _WIN32
int compat_isatty(FILE *f) { return f && _isatty(_fileno(f)) ? 1 : 0; }

int compat_term_width(FILE *f) {
    if (!compat_isatty(f)) return 0;
    HANDLE h = (HANDLE)_get_osfhandle(_fileno(f));
    CONSOLE_SCREEN_BUFFER_INFO info;
    if (h == INVALID_HANDLE_VALUE || !GetConsoleScreenBufferInfo(h, &info)) return 0;
    return info.srWindow.Right - info.srWindow.Left + 1;
}

int compat_run_pty(const char *const *argv, int cols, const char *out_path, int *status, char *err, size_t errlen) {
    (void)argv, (void)cols, (void)out_path, (void)status;
    set_err(err, errlen, "no pseudo-terminals on this OS");
    return -1;
}
#else
#include <sys/ioctl.h>
#include <termios.h>

int compat_isatty(FILE *f) { return f && isatty(fileno(f)) ? 1 : 0; }

int compat_term_width(FILE *f) {
    struct winsize ws;
    if (!compat_isatty(f) || ioctl(fileno(f), TIOCGWINSZ, &ws) != 0) return 0;
    return ws.ws_col;
}

int compat_run_pty(const char *const *argv, int cols, const char *out_path, int *status, char *err, size_t errlen) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        set_err(err, errlen, "no pseudo-terminals: %s", strerror(errno));
        if (master >= 0) close(master);
        return -1;
    }
    char slave[256];
    if (ptsname_r(master, slave, sizeof slave) != 0) {
        set_err(err, errlen, "ptsname: %s", strerror(errno));
        close(master);
        return -1;
    }
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
    ioctl(master, TIOCSWINSZ, &ws);
    FILE *out = fopen(out_path, "wb");
    if (!out) {
        set_err(err, errlen, "%s: %s", out_path, strerror(errno));
        close(master);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        set_err(err, errlen, "fork: %s", strerror(errno));
        fclose(out);
        close(master);
        return -1;
    }
    if (pid == 0) { /* the child: the slave as its controlling terminal, stdout and stderr */
        setsid();
        int s = open(slave, O_RDWR);
        int nul = open("/dev/null", O_RDONLY);
        if (s < 0 || nul < 0) _exit(127);
        ioctl(s, TIOCSCTTY, 0);
        dup2(nul, 0), dup2(s, 1), dup2(s, 2);
        close(master);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    char buf[4096];
    for (;;) { /* until the last holder of the slave is gone (EIO) */
        ssize_t n = read(master, buf, sizeof buf);
        if (n > 0) {
            fwrite(buf, 1, (size_t)n, out);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    fclose(out);
    close(master);
    int ws_status = 0;
    while (waitpid(pid, &ws_status, 0) < 0 && errno == EINTR) {}
    *status = WIFEXITED(ws_status) ? WEXITSTATUS(ws_status) : 128 + (WIFSIGNALED(ws_status) ? WTERMSIG(ws_status) : 0);
    return 0;
}
#endif

/* ---- process ------------------------------------------------------------ */
static atomic_int g_stop;

static void on_signal(int sig) {
    (void)sig;
    atomic_store(&g_stop, 1);
}

void compat_install_stop_handler(void) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
#ifdef SIGBREAK
    signal(SIGBREAK, on_signal); /* Ctrl-Break (Windows) */
#endif
}
int compat_stop_requested(void) { return atomic_load(&g_stop); }
void compat_request_stop(void) { atomic_store(&g_stop, 1); }

const char *compat_envp_get(char **envp, const char *name) {
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

int compat_reexec_envp(char **argv, char **envp, const char *name, const char *value) {
    if (!name || !value || !argv || !argv[0] || !envp || compat_envp_get(envp, name)) return -1;
#if defined(__linux__)
    size_t n = 0, len = strlen(name) + strlen(value) + 2;
    while (envp[n]) n++;
    char **env = malloc(sizeof(char *) * (n + 2)), *var = malloc(len);
    if (env && var) {
        memcpy(env, envp, sizeof(char *) * n);
        snprintf(var, len, "%s=%s", name, value);
        env[n] = var, env[n + 1] = NULL;
        char exe[4096]; /* its name, not "exe", in ps and top */
        execve(compat_exe_path(exe, sizeof exe) == 0 ? exe : "/proc/self/exe", argv, env);
    }
    free(env), free(var); /* exec failed: carry on as before */
    return -1;
#else
    return -1;
#endif
}

int compat_reexec_with_env(const char *name, const char *value, char **argv) {
#if defined(__linux__)
    extern char **environ;
    return compat_reexec_envp(argv, environ, name, value);
#else
    (void)name, (void)value, (void)argv;
    return -1;
#endif
}

int compat_getpid(void) {
#ifdef _WIN32
    return (int)_getpid();
#else
    return (int)getpid();
#endif
}

void compat_hostname(char *buf, size_t n) {
    if (!buf || n == 0) return;
    buf[0] = 0;
#ifdef _WIN32
    DWORD len = (DWORD)n;
    if (!GetComputerNameA(buf, &len)) buf[0] = 0;
#else
    if (gethostname(buf, n) != 0) buf[0] = 0;
#endif
    buf[n - 1] = 0;
    if (!buf[0]) snprintf(buf, n, "localhost");
}

#ifdef _WIN32
/* CreateProcessA with inherited handles, tried again a few times on
 * ERROR_INTERNAL_ERROR (1359), which wine returns now and then under load. */
static BOOL create_process(char *cmd, DWORD flags, STARTUPINFOA *si, PROCESS_INFORMATION *pi) {
    for (int i = 0;; i++) {
        BOOL ok = CreateProcessA(NULL, cmd, NULL, NULL, TRUE, flags, NULL, NULL, si, pi);
        if (ok || GetLastError() != ERROR_INTERNAL_ERROR || i == 4) return ok;
        Sleep((DWORD)(50 << i));
    }
}

/* Appends arg to the command line at *p quoted so that the C runtime's
 * argument parser (CommandLineToArgvW rules) gives it back verbatim. */
static char *quote_arg(char *p, const char *arg) {
    if (*arg && !strpbrk(arg, " \t\n\v\"")) {
        size_t n = strlen(arg);
        memcpy(p, arg, n);
        return p + n;
    }
    *p++ = '"';
    for (const char *a = arg;; a++) {
        size_t bs = 0;
        while (*a == '\\') a++, bs++;
        if (!*a) {
            for (size_t i = 0; i < 2 * bs; i++) *p++ = '\\'; /* before the closing quote */
            break;
        }
        if (*a == '"') {
            for (size_t i = 0; i < 2 * bs + 1; i++) *p++ = '\\';
        } else {
            for (size_t i = 0; i < bs; i++) *p++ = '\\';
        }
        *p++ = *a;
    }
    *p++ = '"';
    return p;
}

/* Spawns take turns, so an inheritable handle made for one child (a pipe end,
 * a redirection) never leaks into another. */
static SRWLOCK g_spawn_mu = SRWLOCK_INIT;

/* An inheritable handle on path for a child's output: "" is NUL. */
static HANDLE open_output(const char *path) {
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    return CreateFileA(path[0] ? path : "NUL", GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa,
                       CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
}
#else
extern char **environ;

/* A close-on-exec descriptor on path for a child's output: "" is /dev/null. */
static int open_output(const char *path) {
    return open(path[0] ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
}
#endif

int compat_run(const char *const *argv, int *status, char *err, size_t errlen) {
    return compat_run_io(argv, NULL, NULL, status, err, errlen);
}

int compat_run_io(const char *const *argv, const char *out_path, const char *err_path, int *status, char *err,
                  size_t errlen) {
    if (status) *status = -1;
    if (!argv || !argv[0]) {
        set_err(err, errlen, "compat_run: no program");
        return -1;
    }
    int same = out_path && err_path && strcmp(out_path, err_path) == 0;
#ifdef _WIN32
    size_t n = 1;
    for (int i = 0; argv[i]; i++) n += 3 + 2 * strlen(argv[i]) + 1;
    char *cmd = malloc(n), *p = cmd;
    if (!cmd) {
        set_err(err, errlen, "%s: out of memory", argv[0]);
        return -1;
    }
    for (int i = 0; argv[i]; i++) {
        if (i) *p++ = ' ';
        p = quote_arg(p, argv[i]);
    }
    *p = 0;
    fflush(stdout);
    fflush(stderr);
    STARTUPINFOA si;
    PROCESS_INFORMATION pi;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    HANDLE ho = INVALID_HANDLE_VALUE, he = INVALID_HANDLE_VALUE;
    AcquireSRWLockExclusive(&g_spawn_mu);
    if (out_path && (ho = open_output(out_path)) == INVALID_HANDLE_VALUE) {
        ReleaseSRWLockExclusive(&g_spawn_mu);
        set_err(err, errlen, "%s: cannot create (Windows error %lu)", out_path, (unsigned long)GetLastError());
        free(cmd);
        return -1;
    }
    if (err_path && !same && (he = open_output(err_path)) == INVALID_HANDLE_VALUE) {
        DWORD e = GetLastError();
        if (ho != INVALID_HANDLE_VALUE) CloseHandle(ho);
        ReleaseSRWLockExclusive(&g_spawn_mu);
        set_err(err, errlen, "%s: cannot create (Windows error %lu)", err_path, (unsigned long)e);
        free(cmd);
        return -1;
    }
    if (same) he = ho;
    if (out_path || err_path) {
        si.dwFlags = STARTF_USESTDHANDLES;
        si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
        si.hStdOutput = out_path ? ho : GetStdHandle(STD_OUTPUT_HANDLE);
        si.hStdError = err_path ? he : GetStdHandle(STD_ERROR_HANDLE);
    }
    BOOL ok = create_process(cmd, 0, &si, &pi);
    DWORD cerr = ok ? 0 : GetLastError();
    if (ho != INVALID_HANDLE_VALUE) CloseHandle(ho);
    if (he != INVALID_HANDLE_VALUE && !same) CloseHandle(he);
    ReleaseSRWLockExclusive(&g_spawn_mu);
    free(cmd);
    if (!ok) {
        set_err(err, errlen, "%s: cannot start (Windows error %lu)", argv[0], (unsigned long)cerr);
        return -1;
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
    if (status) *status = (int)code;
    return 0;
#else
    fflush(stdout);
    fflush(stderr);
    int fo = -1, fe = -1;
    if (out_path && (fo = open_output(out_path)) < 0) {
        set_err(err, errlen, "%s: cannot create: %s", out_path, strerror(errno));
        return -1;
    }
    if (err_path && !same && (fe = open_output(err_path)) < 0) {
        set_err(err, errlen, "%s: cannot create: %s", err_path, strerror(errno));
        if (fo >= 0) close(fo);
        return -1;
    }
    if (same) fe = fo;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (fo >= 0) posix_spawn_file_actions_adddup2(&fa, fo, 1);
    if (fe >= 0) posix_spawn_file_actions_adddup2(&fa, fe, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (fo >= 0) close(fo);
    if (fe >= 0 && !same) close(fe);
    if (rc != 0) {
        set_err(err, errlen, "%s: cannot start: %s", argv[0], strerror(rc));
        return -1;
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR) {
            set_err(err, errlen, "%s: waitpid failed: %s", argv[0], strerror(errno));
            return -1;
        }
    }
    /* posix_spawnp reports a failed exec as exit status 127 on some libcs. */
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127 && strchr(argv[0], '/') && access(argv[0], X_OK) != 0) {
        set_err(err, errlen, "%s: cannot start: %s", argv[0], strerror(ENOENT));
        return -1;
    }
    if (status) *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
    return 0;
#endif
}

int compat_setenv(const char *name, const char *value) {
#ifdef _WIN32
    return _putenv_s(name, value ? value : "") == 0 ? 0 : -1;
#else
    return value ? setenv(name, value, 1) : unsetenv(name);
#endif
}

/* ---- child processes on pipes ------------------------------------------- */
enum { PROC_RBUF = 1 << 16 };

struct compat_proc {
    char rbuf[PROC_RBUF]; /* bytes read from the child, not yet returned as lines */
    size_t rlen;
    int eof;              /* the child's stdout is closed */
    int skip_to_nl;       /* the rest of an over-long line is being dropped */
    int reaped;           /* the child has been waited for */
    int status;           /* its exit status once reaped */
    int in_closed;        /* in_w has been closed (compat_proc_close_input) */
#ifdef _WIN32
    HANDLE in_w, out_r, process;
    DWORD pid;
#else
    int in_w, out_r;
    pid_t pid;
#endif
};

compat_proc_t *compat_proc_spawn(const char *const *argv, const char *stderr_path, char *err, size_t errlen) {
    if (!argv || !argv[0]) {
        set_err(err, errlen, "compat_proc_spawn: no program");
        return NULL;
    }
    compat_proc_t *p = calloc(1, sizeof *p);
    if (!p) {
        set_err(err, errlen, "%s: out of memory", argv[0]);
        return NULL;
    }
#ifdef _WIN32
    size_t n = 1;
    for (int i = 0; argv[i]; i++) n += 3 + 2 * strlen(argv[i]) + 1;
    char *cmd = malloc(n), *c = cmd;
    if (!cmd) {
        free(p);
        set_err(err, errlen, "%s: out of memory", argv[0]);
        return NULL;
    }
    for (int i = 0; argv[i]; i++) {
        if (i) *c++ = ' ';
        c = quote_arg(c, argv[i]);
    }
    *c = 0;
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    HANDLE in_r = NULL, in_w = NULL, out_r = NULL, out_w = NULL, errh = NULL;
    AcquireSRWLockExclusive(&g_spawn_mu);
    BOOL ok = CreatePipe(&in_r, &in_w, &sa, 0) && CreatePipe(&out_r, &out_w, &sa, 0) &&
              SetHandleInformation(in_w, HANDLE_FLAG_INHERIT, 0) && SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
    if (ok && stderr_path) {
        errh = CreateFileA(stderr_path[0] ? stderr_path : "NUL", FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE,
                           &sa, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
        if (errh == INVALID_HANDLE_VALUE) errh = NULL, ok = FALSE;
    }
    PROCESS_INFORMATION pi;
    memset(&pi, 0, sizeof pi);
    if (ok) {
        STARTUPINFOA si;
        memset(&si, 0, sizeof si);
        si.cb = sizeof si;
        si.dwFlags = STARTF_USESTDHANDLES;
        si.hStdInput = in_r;
        si.hStdOutput = out_w;
        si.hStdError = errh ? errh : GetStdHandle(STD_ERROR_HANDLE);
        ok = create_process(cmd, CREATE_NEW_PROCESS_GROUP, &si, &pi);
    }
    DWORD code = GetLastError();
    if (in_r) CloseHandle(in_r);
    if (out_w) CloseHandle(out_w);
    if (errh) CloseHandle(errh);
    ReleaseSRWLockExclusive(&g_spawn_mu);
    free(cmd);
    if (!ok) {
        if (in_w) CloseHandle(in_w);
        if (out_r) CloseHandle(out_r);
        free(p);
        set_err(err, errlen, "%s: cannot start (Windows error %lu)", argv[0], (unsigned long)code);
        return NULL;
    }
    CloseHandle(pi.hThread);
    p->in_w = in_w;
    p->out_r = out_r;
    p->process = pi.hProcess;
    p->pid = pi.dwProcessId;
    return p;
#else
    signal(SIGPIPE, SIG_IGN);
    int in[2] = {-1, -1}, out[2] = {-1, -1};
#ifdef __linux__
    int prc = pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 ? 0 : -1;
#else
    int prc = pipe(in) == 0 && pipe(out) == 0 ? 0 : -1;
    for (int i = 0; prc == 0 && i < 2; i++) {
        fcntl(in[i], F_SETFD, FD_CLOEXEC);
        fcntl(out[i], F_SETFD, FD_CLOEXEC);
    }
#endif
    if (prc != 0) {
        set_err(err, errlen, "%s: cannot make pipes: %s", argv[0], strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (in[i] >= 0) close(in[i]);
            if (out[i] >= 0) close(out[i]);
        }
        free(p);
        return NULL;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (stderr_path)
        posix_spawn_file_actions_addopen(&fa, 2, stderr_path[0] ? stderr_path : "/dev/null",
                                         O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        free(p);
        set_err(err, errlen, "%s: cannot start: %s", argv[0], strerror(rc));
        return NULL;
    }
    p->in_w = in[1];
    p->out_r = out[0];
    p->pid = pid;
    return p;
#endif
}

int compat_proc_pid(const compat_proc_t *p) { return p ? (int)p->pid : -1; }

/* Reads what is available (waiting at most timeout_ms, < 0 forever) into
 * p->rbuf. Returns 1 when bytes came or EOF was seen, 0 on timeout. */
static int proc_fill(compat_proc_t *p, int64_t timeout_ms) {
    size_t room = PROC_RBUF - p->rlen;
#ifdef _WIN32
    int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
    for (;;) {
        DWORD avail = 0, got = 0;
        if (!PeekNamedPipe(p->out_r, NULL, 0, NULL, &avail, NULL)) {
            p->eof = 1;
            return 1;
        }
        if (avail > 0) {
            if (!ReadFile(p->out_r, p->rbuf + p->rlen, (DWORD)(avail < room ? avail : room), &got, NULL) || got == 0) {
                p->eof = 1;
                return 1;
            }
            p->rlen += got;
            return 1;
        }
        if (deadline >= 0 && compat_now_ms() >= deadline) return 0;
        Sleep(1);
    }
#else
    int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
    for (;;) {
        int wait_ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - compat_now_ms();
            if (left < 0) left = 0;
            wait_ms = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd pfd = {p->out_r, POLLIN, 0};
        int rc = poll(&pfd, 1, wait_ms);
        if (rc < 0) {
            if (errno == EINTR) continue;
            p->eof = 1;
            return 1;
        }
        if (rc == 0) return 0;
        ssize_t got = read(p->out_r, p->rbuf + p->rlen, room);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            p->eof = 1;
            return 1;
        }
        if (got == 0) p->eof = 1;
        p->rlen += (size_t)got;
        return 1;
    }
#endif
}

/* Copies rbuf[0..n) into buf (cut to buflen - 1, "\r" at the end dropped)
 * and removes rbuf[0..consumed). */
static int32_t proc_take(compat_proc_t *p, size_t n, size_t consumed, char *buf, size_t buflen) {
    if (n > 0 && p->rbuf[n - 1] == '\r') n--;
    size_t k = buflen ? (n < buflen - 1 ? n : buflen - 1) : 0;
    if (buflen) {
        memcpy(buf, p->rbuf, k);
        buf[k] = 0;
    }
    memmove(p->rbuf, p->rbuf + consumed, p->rlen - consumed);
    p->rlen -= consumed;
    return (int32_t)k;
}

int32_t compat_proc_read_line(compat_proc_t *p, char *buf, size_t buflen, int64_t timeout_ms) {
    if (buflen) buf[0] = 0;
    if (!p) return COMPAT_PROC_EOF;
    int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->rbuf, '\n', p->rlen);
        if (p->skip_to_nl) { /* the tail of an over-long line */
            if (nl) {
                size_t drop = (size_t)(nl - p->rbuf) + 1;
                memmove(p->rbuf, p->rbuf + drop, p->rlen - drop);
                p->rlen -= drop;
                p->skip_to_nl = 0;
                continue;
            }
            p->rlen = 0;
        } else if (nl) {
            return proc_take(p, (size_t)(nl - p->rbuf), (size_t)(nl - p->rbuf) + 1, buf, buflen);
        } else if (p->rlen == PROC_RBUF) { /* a line longer than the buffer: cut it */
            p->skip_to_nl = 1;
            return proc_take(p, p->rlen, p->rlen, buf, buflen);
        }
        if (p->eof) {
            if (p->rlen > 0 && !p->skip_to_nl) return proc_take(p, p->rlen, p->rlen, buf, buflen);
            return COMPAT_PROC_EOF;
        }
        int64_t left = deadline < 0 ? -1 : deadline - compat_now_ms();
        if (deadline >= 0 && left < 0) left = 0;
        if (!proc_fill(p, left) && deadline >= 0 && compat_now_ms() >= deadline) return COMPAT_PROC_TIMEOUT;
    }
}

int compat_proc_write_line(compat_proc_t *p, const char *line) {
    if (!p || !line || p->in_closed) return -1;
    size_t n = strlen(line);
    char stackbuf[1024], *msg = n + 2 <= sizeof stackbuf ? stackbuf : malloc(n + 2);
    if (!msg) return -1;
    memcpy(msg, line, n);
    msg[n++] = '\n';
    int rc = 0;
    size_t off = 0;
    while (off < n) {
#ifdef _WIN32
        DWORD put = 0;
        if (!WriteFile(p->in_w, msg + off, (DWORD)(n - off), &put, NULL)) {
            rc = -1;
            break;
        }
#else
        ssize_t put = write(p->in_w, msg + off, n - off);
        if (put < 0) {
            if (errno == EINTR) continue;
            rc = -1;
            break;
        }
#endif
        off += (size_t)put;
    }
    if (msg != stackbuf) free(msg);
    return rc;
}

void compat_proc_close_input(compat_proc_t *p) {
    if (!p || p->in_closed) return;
#ifdef _WIN32
    CloseHandle(p->in_w);
#else
    close(p->in_w);
#endif
    p->in_closed = 1;
}

void compat_proc_kill(compat_proc_t *p) {
    if (!p || p->reaped) return;
#ifdef _WIN32
    TerminateProcess(p->process, 1);
#else
    kill(p->pid, SIGKILL);
#endif
}

int compat_kill_pid(int pid) {
    if (pid <= 0) return -1;
#ifdef _WIN32
    HANDLE h = OpenProcess(PROCESS_TERMINATE, FALSE, (DWORD)pid);
    if (!h) return -1;
    int ok = TerminateProcess(h, 1) != 0;
    CloseHandle(h);
    return ok ? 0 : -1;
#else
    return kill((pid_t)pid, SIGKILL) == 0 ? 0 : -1;
#endif
}

int compat_proc_interrupt(compat_proc_t *p) {
    if (!p || p->reaped) return -1;
#ifdef _WIN32
    /* The child is its own process group (CREATE_NEW_PROCESS_GROUP), so
     * Ctrl-Break reaches it alone; its C runtime raises SIGBREAK. */
    return GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, p->pid) ? 0 : -1;
#else
    return kill(p->pid, SIGINT) == 0 ? 0 : -1;
#endif
}

int compat_proc_wait(compat_proc_t *p, int64_t timeout_ms, int *status) {
    if (!p) return 1;
    if (!p->reaped) {
#ifdef _WIN32
        if (WaitForSingleObject(p->process, timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms) != WAIT_OBJECT_0) return 1;
        DWORD code = 1;
        GetExitCodeProcess(p->process, &code);
        p->status = (int)code;
        p->reaped = 1;
#else
        int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
        int64_t nap = 1;
        for (;;) {
            int ws = 0;
            pid_t r = waitpid(p->pid, &ws, timeout_ms < 0 ? 0 : WNOHANG);
            if (r == p->pid) {
                p->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
                p->reaped = 1;
                break;
            }
            if (r < 0 && errno != EINTR) { /* not our child any more: nothing to wait for */
                p->status = 1;
                p->reaped = 1;
                break;
            }
            if (r == 0) {
                if (compat_now_ms() >= deadline) return 1;
                compat_sleep_ms(nap);
                if (nap < 10) nap++;
            }
        }
#endif
    }
    if (status) *status = p->status;
    return 0;
}

void compat_proc_free(compat_proc_t *p) {
    if (!p) return;
    compat_proc_close_input(p);
#ifdef _WIN32
    CloseHandle(p->out_r);
    if (compat_proc_wait(p, 0, NULL) != 0) {
        compat_proc_kill(p);
        compat_proc_wait(p, -1, NULL);
    }
    CloseHandle(p->process);
#else
    close(p->out_r);
    if (compat_proc_wait(p, 0, NULL) != 0) {
        compat_proc_kill(p);
        compat_proc_wait(p, -1, NULL);
    }
#endif
    free(p);
}
