/* compat_win32.c - compat.h and exe.h on Windows (MinGW-w64, MSVC, clang-cl).
 *
 * Owns: every function of compat.h and exe.h that asks Windows: threads
 * (_beginthreadex, SRWLOCK, CONDITION_VARIABLE), clocks, CPUs and memory,
 * aligned memory, file mapping, file and directory queries, file locks
 * (LockFileEx past the holder's text), the console, processes (CreateProcess
 * with quoted command lines, pipes) and the executable's path; and the
 * platform half of compat.c's shared code (compat/compat_os.h).
 * Does not own: what is the same on every OS (compat/compat.c), POSIX
 * (compat/compat_posix.c). compat/CMakeLists.txt builds this file on Windows
 * only, and compat_posix.c everywhere else.
 */
#ifndef _WIN32
#error "compat_win32.c is the Windows half of compat/: compat/CMakeLists.txt builds compat_posix.c here"
#endif

#include "compat.h"
#include "compat/compat_os.h"
#include "compat/err.h"
#include "compat/exe.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WIN32_LEAN_AND_MEAN
#include <direct.h>
#include <io.h>
#include <malloc.h>
#include <process.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <windows.h>

/* ---- threads ------------------------------------------------------------ */
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

/* ---- time, CPUs --------------------------------------------------------- */
int64_t compat_now_ns(void) {
    static LARGE_INTEGER freq;
    LARGE_INTEGER now;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (int64_t)((double)now.QuadPart * 1e9 / (double)freq.QuadPart);
}

/* kernel + user time of GetProcessTimes / GetThreadTimes (100-ns units) in ns */
static int64_t cpu_times_ns(const FILETIME *kernel, const FILETIME *user) {
    uint64_t k = ((uint64_t)kernel->dwHighDateTime << 32) | kernel->dwLowDateTime;
    uint64_t u = ((uint64_t)user->dwHighDateTime << 32) | user->dwLowDateTime;
    return (int64_t)(k + u) * 100;
}

int64_t compat_cpu_time_ns(void) {
    FILETIME created, exited, kernel, user;
    if (!GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel, &user)) return 0;
    return cpu_times_ns(&kernel, &user);
}

int64_t compat_thread_cpu_time_ns(void) {
    FILETIME created, exited, kernel, user;
    if (!GetThreadTimes(GetCurrentThread(), &created, &exited, &kernel, &user)) return 0;
    return cpu_times_ns(&kernel, &user);
}

void compat_sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    Sleep((DWORD)ms);
}

int compat_cpu_count(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
}

double compat_os_load_average(void) { return -1.0; }

int64_t compat_memory_total(void) {
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms) && ms.ullTotalPhys > 0 && ms.ullTotalPhys <= (DWORDLONG)INT64_MAX)
        return (int64_t)ms.ullTotalPhys;
    return 0;
}

int64_t compat_address_space_used(void) { return -1; }

int64_t compat_address_space_limit(void) { return -1; }

/* ---- memory ------------------------------------------------------------- */
void *compat_aligned_alloc(size_t align, size_t size) {
    if (align < sizeof(void *)) align = sizeof(void *);
    if ((align & (align - 1)) != 0 || align > 4096) return NULL;
    size_t n = (size + align - 1) & ~(align - 1);
    if (n < size) return NULL; /* overflow */
    if (n == 0) n = align;
    return _aligned_malloc(n, align);
}

void compat_aligned_free(void *p) { _aligned_free(p); }

/* ---- mapping ------------------------------------------------------------ */
int compat_map_file(const char *path, compat_map_t *map, char *err, size_t errlen) {
    memset(map, 0, sizeof *map);
    if (compat_check_regular_file(path, err, errlen) != 0) return -1;
    HANDLE f = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, NULL);
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
}

void compat_unmap_file(compat_map_t *map) {
    if (!map || !map->data) return;
    UnmapViewOfFile((void *)map->data);
    map->data = NULL;
    map->size = 0;
}

/* ---- durable writes (compat.c), directories and files --------------------- */
int compat_os_sync_file(FILE *f) {
    if (fflush(f) != 0) return -1;
    return _commit(_fileno(f));
}

void compat_os_sync_parent_dir(const char *path) { (void)path; }

int compat_os_mkdir(const char *p) { return _mkdir(p); }

int compat_is_dir(const char *p) {
    DWORD a = GetFileAttributesA(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}

int compat_check_regular_file(const char *path, char *err, size_t errlen) {
    if (!path) return 0;
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
}

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

int compat_file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

int64_t compat_file_size(const char *path) {
    struct _stat64 st;
    if (_stat64(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
}

int64_t compat_file_mtime_ns(const char *path) {
    WIN32_FILE_ATTRIBUTE_DATA a;
    if (!GetFileAttributesExA(path, GetFileExInfoStandard, &a)) return -1;
    uint64_t t = ((uint64_t)a.ftLastWriteTime.dwHighDateTime << 32) | a.ftLastWriteTime.dwLowDateTime;
    return (int64_t)((t - 116444736000000000ULL) * 100); /* 100 ns ticks since 1601 */
}

int compat_remove_dir(const char *path) { return _rmdir(path); }

int compat_rename(const char *from, const char *to, char *err, size_t errlen) {
    if (!MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
        set_err(err, errlen, "%s -> %s: rename failed (Windows error %lu)", from, to, (unsigned long)GetLastError());
        return -1;
    }
    return 0;
}

/* A directory that is no link (lstat; Windows: no reparse point). */
int compat_os_is_real_dir(const char *p) {
    DWORD a = GetFileAttributesA(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) && !(a & FILE_ATTRIBUTE_REPARSE_POINT);
}

int compat_os_exists_nofollow(const char *p) { return GetFileAttributesA(p) != INVALID_FILE_ATTRIBUTES; }

int compat_os_remove_nondir(const char *path, char *err, size_t errlen) {
    DWORD a = GetFileAttributesA(path);
    int ok = (a & FILE_ATTRIBUTE_DIRECTORY) ? RemoveDirectoryA(path) : DeleteFileA(path);
    if (!ok) {
        set_err(err, errlen, "%s: cannot remove (Windows error %lu)", path, (unsigned long)GetLastError());
        return -1;
    }
    return 0;
}

int compat_os_list_dir(const char *dir, compat_os_listing_t *l, char *err, size_t errlen) {
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
        if (compat_os_listing_push(l, name, (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) != 0) {
            l->oom = 1;
            break;
        }
    } while (FindNextFileA(h, &fd));
    FindClose(h);
    return 0;
}

const char *compat_os_temp_fallback(void) {
    static char wbuf[MAX_PATH + 1]; /* compat_temp_dir calls this once */
    DWORD k = GetTempPathA(sizeof wbuf, wbuf);
    return (k > 0 && k < sizeof wbuf) ? wbuf : ".";
}

/* ---- file locks --------------------------------------------------------- */

/* The holder's text is short: a pid, a command, a host and a time. */
#define LOCK_TEXT_MAX 512

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

/* ---- terminals -------------------------------------------------------- */
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

/* ---- process ------------------------------------------------------------ */
int compat_reexec_envp(char **argv, char **envp, const char *name, const char *value) {
    if (!name || !value || !argv || !argv[0] || !envp || compat_envp_get(envp, name)) return -1;
    return -1;
}

int compat_reexec_envp_vars(char **argv, char **envp, const char *const *vars) {
    (void)argv, (void)envp, (void)vars;
    return -1;
}

int compat_reexec_with_env(const char *name, const char *value, char **argv) {
    (void)name, (void)value, (void)argv;
    return -1;
}

int compat_getpid(void) { return (int)_getpid(); }

void compat_hostname(char *buf, size_t n) {
    if (!buf || n == 0) return;
    buf[0] = 0;
    DWORD len = (DWORD)n;
    if (!GetComputerNameA(buf, &len)) buf[0] = 0;
    buf[n - 1] = 0;
    if (!buf[0]) snprintf(buf, n, "localhost");
}

/* The job every child of this process joins: closed when this process ends however it ends (its handle is
 * the last one), and then every child still running ends with it, as a killed selfplay's report writer must
 * (an orphan held the test suite's output pipe open under wine). NULL when jobs are not to be had; made by
 * the first spawn, under g_spawn_mu. */
static HANDLE children_job(void) {
    static HANDLE job;
    static int tried;
    if (tried) return job;
    tried = 1;
    job = CreateJobObjectA(NULL, NULL);
    if (!job) return NULL;
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
    memset(&li, 0, sizeof li);
    li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation, &li, sizeof li)) {
        CloseHandle(job);
        job = NULL;
    }
    return job;
}

/* CreateProcessA inheriting the child's three standard handles and no other
 * (PROC_THREAD_ATTRIBUTE_HANDLE_LIST): a file this process has open while it
 * starts a child - a shard being written, while selfplay starts its report
 * writer - is not held by the child too, which made its rename fail with
 * ERROR_SHARING_VIOLATION (C runtime files are inheritable); where the list
 * cannot be made, every inheritable handle as before. Tried again a few times
 * on ERROR_INTERNAL_ERROR (1359), which wine returns now and then under load.
 * The child starts suspended until it is in children_job() (where that
 * fails, as inside a job that allows no nesting, it runs outside it). */
static BOOL create_process(char *cmd, DWORD flags, STARTUPINFOA *si, PROCESS_INFORMATION *pi) {
    int redirected = (si->dwFlags & STARTF_USESTDHANDLES) != 0;
    HANDLE std3[3] = {redirected ? si->hStdInput : GetStdHandle(STD_INPUT_HANDLE),
                      redirected ? si->hStdOutput : GetStdHandle(STD_OUTPUT_HANDLE),
                      redirected ? si->hStdError : GetStdHandle(STD_ERROR_HANDLE)};
    HANDLE list[3];
    int n = 0;
    for (int k = 0; k < 3; k++) {
        DWORD f = 0;
        HANDLE h = std3[k];
        if (!h || h == INVALID_HANDLE_VALUE || !GetHandleInformation(h, &f) || !(f & HANDLE_FLAG_INHERIT)) continue;
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= list[j] == h;
        if (!dup) list[n++] = h;
    }
    STARTUPINFOEXA six;
    memset(&six, 0, sizeof six);
    six.StartupInfo = *si;
    six.StartupInfo.cb = sizeof six;
    SIZE_T size = 0;
    InitializeProcThreadAttributeList(NULL, 1, 0, &size);
    LPPROC_THREAD_ATTRIBUTE_LIST attrs = n > 0 && size > 0 ? malloc(size) : NULL;
    int ext = attrs && InitializeProcThreadAttributeList(attrs, 1, 0, &size);
    if (ext && !UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, list, sizeof(HANDLE) * (size_t)n,
                                          NULL, NULL)) {
        DeleteProcThreadAttributeList(attrs);
        ext = 0;
    }
    six.lpAttributeList = ext ? attrs : NULL;
    for (int i = 0;; i++) {
        BOOL ok = ext ? CreateProcessA(NULL, cmd, NULL, NULL, TRUE, flags | CREATE_SUSPENDED | EXTENDED_STARTUPINFO_PRESENT,
                                       NULL, NULL, &six.StartupInfo, pi)
                      : CreateProcessA(NULL, cmd, NULL, NULL, TRUE, flags | CREATE_SUSPENDED, NULL, NULL, si, pi);
        if (!ok && ext && GetLastError() != ERROR_INTERNAL_ERROR) { /* no handle list here: as before */
            DeleteProcThreadAttributeList(attrs);
            ext = 0;
            continue;
        }
        if (ok) {
            HANDLE job = children_job();
            if (job) AssignProcessToJobObject(job, pi->hProcess);
            ResumeThread(pi->hThread);
        }
        if (ok || GetLastError() != ERROR_INTERNAL_ERROR || i == 4) {
            DWORD e = GetLastError();
            if (ext) DeleteProcThreadAttributeList(attrs);
            free(attrs);
            SetLastError(e);
            return ok;
        }
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
    return CreateFileA(path[0] ? path : "NUL", GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, CREATE_ALWAYS,
                       FILE_ATTRIBUTE_NORMAL, NULL);
}

int compat_run_io(const char *const *argv, const char *out_path, const char *err_path, int *status, char *err,
                  size_t errlen) {
    if (status) *status = -1;
    if (!argv || !argv[0]) {
        set_err(err, errlen, "compat_run: no program");
        return -1;
    }
    int same = out_path && err_path && strcmp(out_path, err_path) == 0;
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
}

int compat_setenv(const char *name, const char *value) { return _putenv_s(name, value ? value : "") == 0 ? 0 : -1; }

/* ---- child processes on pipes ------------------------------------------- */
struct compat_proc {
    compat_os_lines_t lines; /* first: compat_proc_read_line's buffer (compat.c) */
    int reaped;              /* the child has been waited for */
    int status;              /* its exit status once reaped */
    int in_closed;           /* in_w has been closed (compat_proc_close_input) */
    HANDLE in_w, out_r, process;
    DWORD pid;
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
}

int compat_proc_pid(const compat_proc_t *p) { return p ? (int)p->pid : -1; }

/* Reads what is available (waiting at most timeout_ms, < 0 forever) into
 * p->lines. Returns 1 when bytes came or EOF was seen, 0 on timeout. */
int compat_os_proc_fill(compat_proc_t *p, int64_t timeout_ms) {
    size_t room = PROC_RBUF - p->lines.rlen;
    int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
    for (;;) {
        DWORD avail = 0, got = 0;
        if (!PeekNamedPipe(p->out_r, NULL, 0, NULL, &avail, NULL)) {
            p->lines.eof = 1;
            return 1;
        }
        if (avail > 0) {
            if (!ReadFile(p->out_r, p->lines.rbuf + p->lines.rlen, (DWORD)(avail < room ? avail : room), &got, NULL) ||
                got == 0) {
                p->lines.eof = 1;
                return 1;
            }
            p->lines.rlen += got;
            return 1;
        }
        if (deadline >= 0 && compat_now_ms() >= deadline) return 0;
        Sleep(1);
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
        DWORD put = 0;
        if (!WriteFile(p->in_w, msg + off, (DWORD)(n - off), &put, NULL)) {
            rc = -1;
            break;
        }
        off += (size_t)put;
    }
    if (msg != stackbuf) free(msg);
    return rc;
}

void compat_proc_close_input(compat_proc_t *p) {
    if (!p || p->in_closed) return;
    CloseHandle(p->in_w);
    p->in_closed = 1;
}

void compat_proc_kill(compat_proc_t *p) {
    if (!p || p->reaped) return;
    TerminateProcess(p->process, 1);
}

int compat_kill_pid(int pid) {
    if (pid <= 0) return -1;
    HANDLE h = OpenProcess(PROCESS_TERMINATE, FALSE, (DWORD)pid);
    if (!h) return -1;
    int ok = TerminateProcess(h, 1) != 0;
    CloseHandle(h);
    return ok ? 0 : -1;
}

struct compat_dl {
    HMODULE h;
};

compat_dl_t *compat_dl_open(const char *path, char *err, size_t errlen) {
    HMODULE h = LoadLibraryA(path);
    if (!h) {
        set_err(err, errlen, "%s: cannot be loaded (Windows error %lu: the file or a DLL it needs is missing)", path,
                (unsigned long)GetLastError());
        return NULL;
    }
    compat_dl_t *d = malloc(sizeof *d);
    if (!d) {
        FreeLibrary(h);
        set_err(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    d->h = h;
    return d;
}

void *compat_dl_sym(compat_dl_t *d, const char *name) {
    return d && name ? (void *)(uintptr_t)GetProcAddress(d->h, name) : NULL;
}

const char *compat_dl_file_name(const char *name, char *out, size_t len) {
    snprintf(out, len, "%s.dll", name);
    return out;
}

int compat_pid_alive(int pid) {
    if (pid <= 0) return 0;
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) return GetLastError() == ERROR_ACCESS_DENIED; /* it runs, as another user */
    DWORD code = 0;
    int alive = GetExitCodeProcess(h, &code) && code == STILL_ACTIVE;
    CloseHandle(h);
    return alive;
}

int compat_proc_interrupt(compat_proc_t *p) {
    if (!p || p->reaped) return -1;
    /* The child is its own process group (CREATE_NEW_PROCESS_GROUP), so
     * Ctrl-Break reaches it alone; its C runtime raises SIGBREAK. */
    return GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, p->pid) ? 0 : -1;
}

int compat_proc_wait(compat_proc_t *p, int64_t timeout_ms, int *status) {
    if (!p) return 1;
    if (!p->reaped) {
        if (WaitForSingleObject(p->process, timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms) != WAIT_OBJECT_0) return 1;
        DWORD code = 1;
        GetExitCodeProcess(p->process, &code);
        p->status = (int)code;
        p->reaped = 1;
    }
    if (status) *status = p->status;
    return 0;
}

void compat_proc_free(compat_proc_t *p) {
    if (!p) return;
    compat_proc_close_input(p);
    CloseHandle(p->out_r);
    if (compat_proc_wait(p, 0, NULL) != 0) {
        compat_proc_kill(p);
        compat_proc_wait(p, -1, NULL);
    }
    CloseHandle(p->process);
    free(p);
}

/* ---- the executable (exe.h) ---------------------------------------------- */
int compat_exe_path(char *out, size_t len) {
    if (!out || len < 2) return -1;
    DWORD n = GetModuleFileNameA(NULL, out, (DWORD)len);
    if (n == 0 || n >= len) return -1;
    for (DWORD i = 0; i < n; i++)
        if (out[i] == '\\') out[i] = '/';
    return 0;
}
