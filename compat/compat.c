/* compat.c - the platform-free half of compat.h and exe.h, written once.
 *
 * Owns: what is the same on every OS: the assertion report, durable writes
 * (temporary name, sync, rename), mkdir -p, removing a tree, sorted directory
 * listings, the temporary directory, reading a whole file, the stop flag and
 * its signal handler, environment lookups, compat_run, the line reader of a
 * child process, and the executable's directory.
 * Does not own: anything that asks the OS: compat_posix.c or compat_win32.c
 * (compat/CMakeLists.txt builds one), which also give this file the few OS
 * steps it needs (compat/compat_os.h). Nothing here tests _WIN32.
 */
#include "compat.h"
#include "compat/compat_os.h"
#include "compat/err.h"
#include "compat/exe.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void compat_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

/* ---- time, CPUs --------------------------------------------------------- */
char *compat_address_space_note(char *buf, size_t n) {
    int64_t lim = compat_address_space_limit();
    if (!buf || n == 0) return buf;
    buf[0] = 0;
    if (lim >= 0)
        snprintf(buf, n, " under the address-space limit of %lld MiB (ulimit -v %lld)", (long long)(lim >> 20),
                 (long long)(lim >> 10));
    return buf;
}

/* ---- durable writes ----------------------------------------------------- */
struct compat_durable {
    FILE *f;
    char *path;
    char *tmp;
};

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
    if (compat_os_sync_file(d->f) != 0) {
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
    compat_os_sync_parent_dir(d->path);
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

typedef struct {
    const char *dir, *base;
    size_t base_len;
    int removed;
    char *note;
    size_t notelen;
} stale_tmp_t;

static int stale_tmp_entry(const char *name, int is_dir, void *user) {
    stale_tmp_t *st = user;
    if (is_dir || strncmp(name, st->base, st->base_len) != 0 || strncmp(name + st->base_len, ".tmp.", 5) != 0) return 0;
    const char *digits = name + st->base_len + 5;
    long pid = 0;
    for (const char *p = digits; *p; p++) {
        if (*p < '0' || *p > '9' || pid > 100000000) return 0;
        pid = pid * 10 + (*p - '0');
    }
    if (!digits[0] || pid == compat_getpid() || compat_pid_alive((int)pid)) return 0;
    char full[4096];
    int n = snprintf(full, sizeof full, "%s%s", st->dir, name);
    if (n < 0 || (size_t)n >= sizeof full || compat_remove_file(full) != 0) return 0;
    if (st->removed++ == 0 && st->note) snprintf(st->note, st->notelen, "%s", full);
    return 0;
}

int compat_durable_remove_stale(const char *path, char *note, size_t notelen) {
    if (note && notelen) note[0] = 0;
    if (!path || !path[0]) return 0;
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/' || *p == '\\') base = p + 1;
    char dir[4096];
    size_t dl = (size_t)(base - path);
    if (dl >= sizeof dir || !base[0]) return 0;
    memcpy(dir, path, dl);
    dir[dl] = 0; /* "" or ending in a separator */
    stale_tmp_t st = {dir, base, strlen(base), 0, note, notelen};
    compat_list_dir(dl ? dir : ".", stale_tmp_entry, &st, NULL, 0);
    return st.removed;
}

/* ---- directories and files ---------------------------------------------- */
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
            if (!compat_is_dir(p)) compat_os_mkdir(p);
            *s = c;
        }
    }
    if (!compat_is_dir(p) && compat_os_mkdir(p) != 0 && !compat_is_dir(p)) {
        set_err(err, errlen, "%s: cannot create directory: %s", path, strerror(errno));
        free(p);
        return -1;
    }
    free(p);
    return 0;
}

int compat_remove_file(const char *path) { return remove(path); }

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
    if (!compat_os_exists_nofollow(path)) return 0;
    if (!compat_os_is_real_dir(path)) return compat_os_remove_nondir(path, err, errlen);
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

/* Listings are sorted by name before compat_list_dir calls back. */
static int dir_entry_cmp(const void *a, const void *b) {
    return strcmp(((const compat_os_dirent_t *)a)->name, ((const compat_os_dirent_t *)b)->name);
}

int compat_os_listing_push(compat_os_listing_t *l, const char *name, int is_dir) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        compat_os_dirent_t *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    char *copy = malloc(strlen(name) + 1);
    if (!copy) return -1;
    strcpy(copy, name);
    l->v[l->n].name = copy;
    l->v[l->n].is_dir = is_dir;
    l->n++;
    return 0;
}

int compat_list_dir(const char *dir, compat_dir_fn fn, void *user, char *err, size_t errlen) {
    compat_os_listing_t l = {NULL, 0, 0, 0};
    if (compat_os_list_dir(dir, &l, err, errlen) != 0) return -1;
    int rc = 0;
    if (l.oom) {
        set_err(err, errlen, "%s: out of memory while listing", dir);
        rc = -1;
    } else {
        if (l.n > 1) qsort(l.v, l.n, sizeof *l.v, dir_entry_cmp);
        for (size_t i = 0; i < l.n && rc == 0; i++) rc = fn(l.v[i].name, l.v[i].is_dir, user);
    }
    for (size_t i = 0; i < l.n; i++) free(l.v[i].name);
    free(l.v);
    return rc;
}

double compat_load_average(void) {
    const char *t = getenv("KOMA_TEST_LOADAVG");
    return t && t[0] ? atof(t) : compat_os_load_average();
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
        if (!t) t = compat_os_temp_fallback();
        snprintf(buf, sizeof buf, "%s", t);
        size_t k = strlen(buf);
        while (k > 1 && (buf[k - 1] == '/' || buf[k - 1] == '\\')) buf[--k] = 0;
        atomic_store(&state, 2);
    } else {
        while (atomic_load(&state) != 2) {}
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

int compat_run(const char *const *argv, int *status, char *err, size_t errlen) {
    return compat_run_io(argv, NULL, NULL, status, err, errlen);
}

/* ---- child processes on pipes ------------------------------------------- */
/* Copies rbuf[0..n) into buf (cut to buflen - 1, "\r" at the end dropped)
 * and removes rbuf[0..consumed). */
static int32_t proc_take(compat_os_lines_t *p, size_t n, size_t consumed, char *buf, size_t buflen) {
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
    compat_os_lines_t *l = (compat_os_lines_t *)p; /* the first member of struct compat_proc */
    int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(l->rbuf, '\n', l->rlen);
        if (l->skip_to_nl) { /* the tail of an over-long line */
            if (nl) {
                size_t drop = (size_t)(nl - l->rbuf) + 1;
                memmove(l->rbuf, l->rbuf + drop, l->rlen - drop);
                l->rlen -= drop;
                l->skip_to_nl = 0;
                continue;
            }
            l->rlen = 0;
        } else if (nl) {
            return proc_take(l, (size_t)(nl - l->rbuf), (size_t)(nl - l->rbuf) + 1, buf, buflen);
        } else if (l->rlen == PROC_RBUF) { /* a line longer than the buffer: cut it */
            l->skip_to_nl = 1;
            return proc_take(l, l->rlen, l->rlen, buf, buflen);
        }
        if (l->eof) {
            if (l->rlen > 0 && !l->skip_to_nl) return proc_take(l, l->rlen, l->rlen, buf, buflen);
            return COMPAT_PROC_EOF;
        }
        int64_t left = deadline < 0 ? -1 : deadline - compat_now_ms();
        if (deadline >= 0 && left < 0) left = 0;
        if (!compat_os_proc_fill(p, left) && deadline >= 0 && compat_now_ms() >= deadline) return COMPAT_PROC_TIMEOUT;
    }
}

/* ---- the executable (exe.h) ---------------------------------------------- */
int compat_exe_dir(char *out, size_t len) {
    if (compat_exe_path(out, len) != 0) return -1;
    char *slash = strrchr(out, '/');
    if (!slash) return -1;
    if (slash == out) slash[1] = 0; /* "/koma": the root */
    else *slash = 0;
    return 0;
}
