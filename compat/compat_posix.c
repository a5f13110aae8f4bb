/* compat_posix.c - compat.h and exe.h on POSIX systems (Linux, macOS, the BSDs).
 *
 * Owns: every function of compat.h and exe.h that asks the OS: threads
 * (pthreads, condition variables on CLOCK_MONOTONIC), clocks, CPUs, memory
 * and address-space limits, aligned memory, mmap, file and directory queries,
 * flock locks, terminals and pseudo-terminals, processes (posix_spawn, pipes,
 * process groups, waitpid), the re-exec with an extra variable (Linux) and
 * the executable's path (/proc/self/exe, _NSGetExecutablePath); and the
 * platform half of compat.c's shared code (compat/compat_os.h).
 * Does not own: what is the same on every OS (compat/compat.c), Windows
 * (compat/compat_win32.c). compat/CMakeLists.txt builds this file everywhere
 * but on Windows.
 */
#ifdef _WIN32
#error "compat_posix.c is the POSIX half of compat/: compat/CMakeLists.txt builds compat_win32.c on Windows"
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

#include <dirent.h>
#include <dlfcn.h>
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
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

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

/* ---- time, CPUs --------------------------------------------------------- */
int64_t compat_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t compat_cpu_time_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t compat_thread_cpu_time_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void compat_sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

int compat_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

double compat_os_load_average(void) {
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

int64_t compat_memory_total(void) {
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
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT64_MAX) return -1;
    return (int64_t)rl.rlim_cur;
}

/* ---- memory ------------------------------------------------------------- */
void *compat_aligned_alloc(size_t align, size_t size) {
    if (align < sizeof(void *)) align = sizeof(void *);
    if ((align & (align - 1)) != 0 || align > 4096) return NULL;
    size_t n = (size + align - 1) & ~(align - 1);
    if (n < size) return NULL; /* overflow */
    if (n == 0) n = align;
    void *p = NULL;
    return posix_memalign(&p, align, n) == 0 ? p : NULL;
}

void compat_aligned_free(void *p) { free(p); }

/* ---- mapping ------------------------------------------------------------ */
int compat_map_file(const char *path, compat_map_t *map, char *err, size_t errlen) {
    memset(map, 0, sizeof *map);
    if (compat_check_regular_file(path, err, errlen) != 0) return -1;
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
}

void compat_unmap_file(compat_map_t *map) {
    if (!map || !map->data) return;
    munmap((void *)map->data, (size_t)map->size);
    map->data = NULL;
    map->size = 0;
}

/* ---- durable writes (compat.c), directories and files --------------------- */
int compat_os_sync_file(FILE *f) {
    if (fflush(f) != 0) return -1;
    return fsync(fileno(f));
}

void compat_os_sync_parent_dir(const char *path) {
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
}

int compat_os_mkdir(const char *p) { return mkdir(p, 0777); }

int compat_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int compat_check_regular_file(const char *path, char *err, size_t errlen) {
    if (!path) return 0;
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
}

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

int compat_file_exists(const char *path) { return access(path, R_OK) == 0; /* no open: opening a FIFO blocks */ }

int64_t compat_file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
}

int64_t compat_file_mtime_ns(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
#if defined(__APPLE__)
    return (int64_t)st.st_mtimespec.tv_sec * 1000000000 + st.st_mtimespec.tv_nsec;
#else
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
#endif
}

int compat_remove_dir(const char *path) { return rmdir(path); }

int compat_rename(const char *from, const char *to, char *err, size_t errlen) {
    if (rename(from, to) != 0) {
        set_err(err, errlen, "%s -> %s: rename failed: %s", from, to, strerror(errno));
        return -1;
    }
    return 0;
}

/* A directory that is no link (lstat; Windows: no reparse point). */
int compat_os_is_real_dir(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int compat_os_exists_nofollow(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

int compat_os_remove_nondir(const char *path, char *err, size_t errlen) {
    if (unlink(path) != 0) {
        set_err(err, errlen, "%s: cannot remove: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int compat_os_list_dir(const char *dir, compat_os_listing_t *l, char *err, size_t errlen) {
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
        if (e->d_type == DT_DIR) isd = 1;
        else if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) isd = 0;
        else
#endif
        {
            char *full = malloc(dl + strlen(name) + 2);
            if (!full) {
                l->oom = 1;
                break;
            }
            sprintf(full, "%s/%s", dir, name);
            isd = compat_is_dir(full);
            free(full);
        }
        if (compat_os_listing_push(l, name, isd) != 0) {
            l->oom = 1;
            break;
        }
    }
    closedir(d);
    return 0;
}

const char *compat_os_temp_fallback(void) { return "/tmp"; }

/* ---- file locks --------------------------------------------------------- */

/* The holder's text is short: a pid, a command, a host and a time. */
#define LOCK_TEXT_MAX 512

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

/* ---- terminals -------------------------------------------------------- */
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

/* ---- process ------------------------------------------------------------ */
int compat_reexec_envp_vars(char **argv, char **envp, const char *const *vars) {
    if (!argv || !argv[0] || !envp || !vars) return -1;
#if defined(__linux__)
    size_t n = 0, k = 0, add = 0;
    while (envp[n]) n++;
    while (vars[k]) k++;
    char **env = malloc(sizeof(char *) * (n + k + 1));
    if (!env) return -1;
    memcpy(env, envp, sizeof(char *) * n);
    for (size_t i = 0; i < k; i++) {
        const char *eq = strchr(vars[i], '=');
        char name[128];
        size_t nl = eq ? (size_t)(eq - vars[i]) : 0;
        if (!eq || nl == 0 || nl >= sizeof name) continue;
        memcpy(name, vars[i], nl);
        name[nl] = 0;
        if (compat_envp_get(envp, name)) continue; /* the user's value stays */
        env[n + add++] = (char *)vars[i];
    }
    env[n + add] = NULL;
    if (add > 0) {
        char exe[4096]; /* its name, not "exe", in ps and top */
        execve(compat_exe_path(exe, sizeof exe) == 0 ? exe : "/proc/self/exe", argv, env);
    }
    free(env); /* nothing to add, or the exec failed: carry on as before */
    return -1;
#else
    return -1;
#endif
}

int compat_reexec_envp(char **argv, char **envp, const char *name, const char *value) {
    if (!name || !value || !envp || compat_envp_get(envp, name)) return -1;
    size_t len = strlen(name) + strlen(value) + 2;
    char *var = malloc(len);
    if (!var) return -1;
    snprintf(var, len, "%s=%s", name, value);
    const char *vars[] = {var, NULL};
    compat_reexec_envp_vars(argv, envp, vars);
    free(var);
    return -1;
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

int compat_getpid(void) { return (int)getpid(); }

void compat_hostname(char *buf, size_t n) {
    if (!buf || n == 0) return;
    buf[0] = 0;
    if (gethostname(buf, n) != 0) buf[0] = 0;
    buf[n - 1] = 0;
    if (!buf[0]) snprintf(buf, n, "localhost");
}

extern char **environ;

/* A close-on-exec descriptor on path for a child's output: "" is /dev/null. */
static int open_output(const char *path) {
    return open(path[0] ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
}

int compat_run_io(const char *const *argv, const char *out_path, const char *err_path, int *status, char *err,
                  size_t errlen) {
    if (status) *status = -1;
    if (!argv || !argv[0]) {
        set_err(err, errlen, "compat_run: no program");
        return -1;
    }
    int same = out_path && err_path && strcmp(out_path, err_path) == 0;
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
}

int compat_setenv(const char *name, const char *value) { return value ? setenv(name, value, 1) : unsetenv(name); }

/* ---- child processes on pipes ------------------------------------------- */
struct compat_proc {
    compat_os_lines_t lines; /* first: compat_proc_read_line's buffer (compat.c) */
    int reaped;              /* the child has been waited for */
    int status;              /* its exit status once reaped */
    int in_closed;           /* in_w has been closed (compat_proc_close_input) */
    int in_w, out_r;
    pid_t pid;
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
}

int compat_proc_pid(const compat_proc_t *p) { return p ? (int)p->pid : -1; }

/* Reads what is available (waiting at most timeout_ms, < 0 forever) into
 * p->lines. Returns 1 when bytes came or EOF was seen, 0 on timeout. */
int compat_os_proc_fill(compat_proc_t *p, int64_t timeout_ms) {
    size_t room = PROC_RBUF - p->lines.rlen;
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
            p->lines.eof = 1;
            return 1;
        }
        if (rc == 0) return 0;
        ssize_t got = read(p->out_r, p->lines.rbuf + p->lines.rlen, room);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            p->lines.eof = 1;
            return 1;
        }
        if (got == 0) p->lines.eof = 1;
        p->lines.rlen += (size_t)got;
        return 1;
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
        ssize_t put = write(p->in_w, msg + off, n - off);
        if (put < 0) {
            if (errno == EINTR) continue;
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
    close(p->in_w);
    p->in_closed = 1;
}

void compat_proc_kill(compat_proc_t *p) {
    if (!p || p->reaped) return;
    kill(p->pid, SIGKILL);
}

int compat_kill_pid(int pid) {
    if (pid <= 0) return -1;
    return kill((pid_t)pid, SIGKILL) == 0 ? 0 : -1;
}

struct compat_dl {
    void *h;
};

compat_dl_t *compat_dl_open(const char *path, char *err, size_t errlen) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        set_err(err, errlen, "%s", e ? e : path);
        return NULL;
    }
    compat_dl_t *d = malloc(sizeof *d);
    if (!d) {
        dlclose(h);
        set_err(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    d->h = h;
    return d;
}

void *compat_dl_sym(compat_dl_t *d, const char *name) { return d && name ? dlsym(d->h, name) : NULL; }

const char *compat_dl_file_name(const char *name, char *out, size_t len) {
#if defined(__APPLE__)
    snprintf(out, len, "lib%s.dylib", name);
#else
    snprintf(out, len, "lib%s.so", name);
#endif
    return out;
}

int compat_pid_alive(int pid) {
    if (pid <= 0) return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM; /* EPERM: it runs, as another user */
}

int compat_proc_interrupt(compat_proc_t *p) {
    if (!p || p->reaped) return -1;
    return kill(p->pid, SIGINT) == 0 ? 0 : -1;
}

int compat_proc_wait(compat_proc_t *p, int64_t timeout_ms, int *status) {
    if (!p) return 1;
    if (!p->reaped) {
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
    }
    if (status) *status = p->status;
    return 0;
}

void compat_proc_free(compat_proc_t *p) {
    if (!p) return;
    compat_proc_close_input(p);
    close(p->out_r);
    if (compat_proc_wait(p, 0, NULL) != 0) {
        compat_proc_kill(p);
        compat_proc_wait(p, -1, NULL);
    }
    free(p);
}

/* ---- the executable (exe.h) ---------------------------------------------- */
int compat_exe_path(char *out, size_t len) {
    if (!out || len < 2) return -1;
#if defined(__APPLE__)
    uint32_t n = (uint32_t)len;
    if (_NSGetExecutablePath(out, &n) != 0) return -1;
    char *real = realpath(out, NULL);
    if (real) {
        size_t k = strlen(real);
        if (k < len) memcpy(out, real, k + 1);
        free(real);
    }
    return 0;
#else
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n <= 0 || (size_t)n >= len - 1) return -1;
    out[n] = 0;
    return 0;
#endif
}
