/* run.c - a run directory's layout, writer lock and start-up checks; see run.h. */
#include "data/run.h"
#include "compat/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"

#define RUN_FINDINGS_MAX 64

struct run {
    char dir[RUN_PATH_MAX];
    uint32_t flags;
    compat_lock_t *lock;
    db_t *db;
    bool created;
    int64_t shards_checked, models_checked;
    char *findings[RUN_FINDINGS_MAX];
    int32_t n_findings;
};

int run_path(const char *dir, const char *rel, char *out, size_t len) {
    int n = rel && rel[0] ? snprintf(out, len, "%s/%s", dir, rel) : snprintf(out, len, "%s", dir);
    if (n < 0 || (size_t)n >= len) {
        if (len) out[0] = 0;
        return -1;
    }
    return 0;
}

/* The first RUN_FINDINGS_MAX - 1 findings, then one line saying there were more. */
static void add_finding(run_t *r, const char *fmt, ...) {
    if (r->n_findings == RUN_FINDINGS_MAX) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (r->n_findings == RUN_FINDINGS_MAX - 1) snprintf(line, sizeof line, "(more findings not listed)");
    char *s = malloc(strlen(line) + 1);
    if (!s) return;
    strcpy(s, line);
    r->findings[r->n_findings++] = s;
}

int run_check_writable(const char *dir, char *err, size_t errlen) {
    char e[512], probe[RUN_PATH_MAX + 64];
    if (compat_file_exists(dir) && !compat_is_dir(dir)) {
        set_err(err, errlen, "%s: exists and is not a directory", dir);
        return -1;
    }
    if (compat_mkdir_p(dir, e, sizeof e) != 0) {
        set_err(err, errlen, "%s: cannot create the directory: %s", dir, e);
        return -1;
    }
    snprintf(probe, sizeof probe, "%s/.koma-write-test.%d", dir, compat_getpid());
    FILE *f = fopen(probe, "wb");
    int ok = f && fputc('k', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    compat_remove_file(probe);
    if (!ok) {
        set_err(err, errlen, "%s: not writable (a file cannot be created in it); fix its permissions or free space "
                "before starting, so that no games or training steps are spent in vain", dir);
        return -1;
    }
    return 0;
}

int run_verify_file(const char *path, const char *xxh3_hex, char *err, size_t errlen) {
    uint64_t h = 0;
    int64_t bytes = 0;
    char e[512];
    if (db_file_xxh3(path, &h, &bytes, e, sizeof e) != 0) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    if (xxh3_hex && xxh3_hex[0] && strcmp(hex, xxh3_hex) != 0) {
        set_err(err, errlen, "%s: XXH3 %s does not match koma.db's %s: the file was replaced or damaged", path, hex,
                xxh3_hex);
        return -1;
    }
    return 0;
}

/* ---- output files a user names ------------------------------------------------------------ */

/* The names a run directory holds at its top level, and why each is the run's. */
static const char *run_file_reason(const char *name) {
    static const char *const files[][2] = {
        {RUN_DB, "it is the run's database"},
        {RUN_DB "-wal", "it belongs to the run's database (SQLite's write-ahead log)"},
        {RUN_DB "-shm", "it belongs to the run's database (SQLite's shared memory index)"},
        {RUN_DB "-journal", "it belongs to the run's database (SQLite's rollback journal)"},
        {RUN_LOCK, "it is the run's writer lock"},
        {RUN_LOG, "it is the run's log"},
        {RUN_REPORT, "it is the run's report (report RUN_DIR writes it)"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!strcmp(name, files[i][0])) return files[i][1];
    return NULL;
}

/* The folders of a run whose every file belongs to it, and what they hold. */
static const char *run_folder_reason(const char *name) {
    static const char *const dirs[][2] = {
        {RUN_MODELS, "it is in the run's models/ (the run's nets)"},
        {RUN_SHARDS, "it is in the run's shards/ (the run's games)"},
        {RUN_TRAIN, "it is in the run's train/ (the training checkpoint)"},
        {"orphans", "it is in the run's orphans/"},
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (!strcmp(name, dirs[i][0])) return dirs[i][1];
    return NULL;
}

/* dir is a run: it holds a koma.db, or it is the run the program works on. */
static int is_run_dir(const char *dir, const compat_file_id_t *run_id) {
    compat_file_id_t id;
    if (run_id && compat_file_id(dir, &id) == 0 && compat_file_id_equal(&id, run_id)) return 1;
    char db[RUN_PATH_MAX];
    return run_path(dir, RUN_DB, db, sizeof db) == 0 && compat_file_exists(db) && !compat_is_dir(db);
}

typedef struct {
    const char *dir;
    compat_file_id_t target;
    char found[RUN_PATH_MAX];
} same_file_t;

static int same_file_entry(const char *name, int is_dir, void *user) {
    same_file_t *s = user;
    char p[RUN_PATH_MAX];
    compat_file_id_t id;
    if (is_dir || run_path(s->dir, name, p, sizeof p) != 0 || compat_file_id(p, &id) != 0) return 0;
    if (!compat_file_id_equal(&id, &s->target)) return 0;
    snprintf(s->found, sizeof s->found, "%s", p);
    return 1;
}

/* The file of run_dir that target is (by identity), into found; 0 if none.
 * Its top-level files always; with deep (a target with several hard links)
 * also every file in models/, shards/ and train/. */
static int run_file_with_id(const char *run_dir, const compat_file_id_t *target, int deep, const char *own, char *found,
                            size_t len) {
    static const char *const top[] = {RUN_DB,   RUN_DB "-wal", RUN_DB "-shm", RUN_DB "-journal",
                                      RUN_LOCK, RUN_LOG,       RUN_REPORT};
    char p[RUN_PATH_MAX];
    compat_file_id_t id;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if ((!own || strcmp(own, top[i]) != 0) && run_path(run_dir, top[i], p, sizeof p) == 0 &&
            compat_file_id(p, &id) == 0 &&
            compat_file_id_equal(&id, target)) {
            snprintf(found, len, "%s", p);
            return 1;
        }
    if (!deep) return 0;
    static const char *const sub[] = {RUN_MODELS, RUN_SHARDS, RUN_TRAIN};
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        same_file_t s = {p, *target, ""};
        if (run_path(run_dir, sub[i], p, sizeof p) != 0 || !compat_is_dir(p)) continue;
        if (compat_list_dir(p, same_file_entry, &s, NULL, 0) == 1) {
            snprintf(found, len, "%s", s.found);
            return 1;
        }
    }
    return 0;
}

/* Why the resolved path real (absolute, "/a/b/name") is a run's file, or NULL.
 * own: the name of the file the program writes itself in the run run_id
 * (report: RUN_REPORT), allowed there and only there; NULL for none. */
static const char *run_owned(const char *real, const compat_file_id_t *run_id, const char *own) {
    char buf[RUN_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", real);
    size_t n = strlen(buf);
    /* end: the component right below the ancestor buf[0..i) */
    for (size_t i = n; i-- > 0;) {
        if (buf[i] != '/' && buf[i] != '\\') continue;
        const char *child = real + i + 1;
        char name[256];
        size_t k = strcspn(child, "/\\");
        if (k == 0 || k >= sizeof name) continue;
        memcpy(name, child, k);
        name[k] = 0;
        int last = child[k] == 0;
        char c = buf[i == 0 ? 1 : i];
        buf[i == 0 ? 1 : i] = 0; /* the ancestor; "/" itself keeps its slash */
        int run = is_run_dir(buf, run_id);
        buf[i == 0 ? 1 : i] = c;
        if (!run) continue;
        if (last && own && run_id && !strcmp(name, own)) {
            compat_file_id_t id;
            buf[i == 0 ? 1 : i] = 0;
            int mine = compat_file_id(buf, &id) == 0 && compat_file_id_equal(&id, run_id);
            buf[i == 0 ? 1 : i] = c;
            if (mine) continue;
        }
        const char *why = last ? run_file_reason(name) : run_folder_reason(name);
        if (why) return why;
    }
    return NULL;
}

int run_output_check(const char *path, const char *run_dir, const char *what, const char *flag, char *err,
                     size_t errlen) {
    return run_output_check_own(path, run_dir, NULL, what, flag, err, errlen);
}

int run_output_check_own(const char *path, const char *run_dir, const char *own, const char *what, const char *flag,
                         char *err, size_t errlen) {
    char e[512];
    const char *why = NULL;
    char extra[RUN_PATH_MAX + 64] = "";
    if (!path || !path[0]) {
        set_err(err, errlen, "refusing to write %s: no file name given (give one with %s)", what, flag);
        return -1;
    }
    int link = compat_is_link(path);
    if (compat_is_dir(path)) why = link ? "it is a symbolic link to a directory" : "it is a directory";
    else if (compat_check_regular_file(path, e, sizeof e) != 0)
        why = link ? "it is a symbolic link to something that is not a regular file (a device, FIFO or socket)"
                   : "it is not a regular file (a device, FIFO or socket)";
    if (why) goto refuse;

    /* Its directory, resolved. */
    char parent[RUN_PATH_MAX], real[RUN_PATH_MAX], rp[RUN_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/'); /* '/' everywhere (compat.h); run_owned also splits at '\\' */
    const char *base = slash ? slash + 1 : path;
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = 0;
    else *slash = 0;
    if (!base[0]) {
        why = "it names a directory, not a file";
        goto refuse;
    }
    if (compat_real_path(parent, rp, sizeof rp) != 0 || !compat_is_dir(parent)) {
        set_err(err, errlen, "refusing to write %s to %s: its directory %s does not exist (choose another %s)", what,
                path, parent, flag);
        return -1;
    }
    compat_file_id_t tid;
    int exists = compat_file_id(path, &tid) == 0;
    if (!exists || compat_real_path(path, real, sizeof real) != 0) {
        int n = snprintf(real, sizeof real, "%s%s%s", rp, rp[strlen(rp) - 1] == '/' ? "" : "/", base);
        if (n < 0 || (size_t)n >= sizeof real) {
            set_err(err, errlen, "refusing to write %s to %s: path too long", what, path);
            return -1;
        }
    }
    compat_file_id_t rid;
    int have_run = run_dir && run_dir[0] && compat_file_id(run_dir, &rid) == 0;
    why = run_owned(real, have_run ? &rid : NULL, own);
    if (why) {
        if (strcmp(real, path) != 0) snprintf(extra, sizeof extra, " (%s)", real);
        goto refuse;
    }
    char found[RUN_PATH_MAX];
    if (exists && have_run && run_file_with_id(run_dir, &tid, tid.nlink > 1, own, found, sizeof found)) {
        why = "it is a hard link to the run's file ";
        snprintf(extra, sizeof extra, "%s", found);
        goto refuse;
    }
    return 0;
refuse:
    set_err(err, errlen, "refusing to write %s to %s: %s%s (choose another %s)", what, path, why, extra, flag);
    return -1;
}

int run_output_write(const char *path, const char *run_dir, const char *what, const char *flag, const void *data,
                     size_t len, char *err, size_t errlen) {
    if (run_output_check(path, run_dir, what, flag, err, errlen) != 0) return -1;
    return compat_write_file_durable(path, data, len, err, errlen);
}

/* ---- where a new run may be created --------------------------------------------------------- */

static int is_run_name(const char *name) {
    return run_file_reason(name) || run_folder_reason(name) ||
           !strncmp(name, ".koma-write-test.", 17);
}

typedef struct {
    int32_t unrelated;
    char first[256];
} foreign_t;

static int foreign_entry(const char *name, int is_dir, void *user) {
    foreign_t *f = user;
    if (is_run_name(name)) return 0;
    if (f->unrelated++ == 0) snprintf(f->first, sizeof f->first, "%s%s", name, is_dir ? "/" : "");
    return 0;
}

int run_check_new_dir(const char *dir, char *err, size_t errlen) {
    if (!compat_is_dir(dir)) return 0; /* missing: created; a file is refused as "not a directory" */
    char db[RUN_PATH_MAX], e[512];
    db_probe_t kind;
    if (run_path(dir, RUN_DB, db, sizeof db) == 0 && db_probe(db, &kind, e, sizeof e) == DB_OK &&
        kind == DB_PROBE_KOMA)
        return 0;
    static const char *const system[] = {"/",     "/bin",   "/boot", "/dev",  "/etc",  "/home", "/lib",
                                         "/lib32", "/lib64", "/media", "/mnt", "/opt",  "/proc", "/root",
                                         "/run",  "/sbin",  "/srv",  "/sys",  "/tmp",  "/usr",  "/var"};
    char real[RUN_PATH_MAX], home[RUN_PATH_MAX];
    if (compat_real_path(dir, real, sizeof real) == 0) {
        const char *h = getenv("HOME");
        int is_home = h && h[0] && compat_real_path(h, home, sizeof home) == 0 && !strcmp(home, real);
        for (size_t i = 0; i < sizeof system / sizeof system[0] && !is_home; i++)
            if (!strcmp(real, system[i])) is_home = 2;
        if (strlen(real) <= 3 && real[0] && real[1] == ':') is_home = 2; /* a drive's root (C:\\) */
        if (is_home) {
            set_err(err, errlen,
                    "%s: refusing to make a new run in %s%s%s%s: a run needs a directory of its own; give a new or "
                    "empty one, e.g. runs/NAME",
                    dir, is_home == 1 ? "your home directory" : "a system directory", strcmp(dir, real) ? " (" : "",
                    strcmp(dir, real) ? real : "", strcmp(dir, real) ? ")" : "");
            return -1;
        }
    }
    foreign_t f = {0, ""};
    if (compat_list_dir(dir, foreign_entry, &f, e, sizeof e) != 0) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    if (f.unrelated > 0) {
        set_err(err, errlen,
                "%s: refusing to make a new run here: it holds no koma.db but %d other entr%s (%s%s); a new "
                "run goes into a missing or empty directory: give another one (or move those files away)",
                dir, f.unrelated, f.unrelated == 1 ? "y" : "ies", f.first, f.unrelated > 1 ? ", ..." : "");
        return -1;
    }
    return 0;
}

/* ---- taking a run ------------------------------------------------------------------------ */

typedef struct {
    int32_t n;
} count_t;

static int count_entry(const char *name, int is_dir, void *user) {
    (void)is_dir;
    if (strncmp(name, ".koma-write-test.", 17) != 0) ((count_t *)user)->n++;
    return 0;
}

typedef struct {
    const char *dir;
} stale_t;

static int remove_probe(const char *name, int is_dir, void *user) {
    if (is_dir || strncmp(name, ".koma-write-test.", 17) != 0) return 0;
    char p[RUN_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", ((stale_t *)user)->dir, name);
    compat_remove_file(p);
    return 0;
}

/* Under the lock: write-test files a writer killed mid-check left in dir. */
static void remove_stale_probes(const char *dir) {
    stale_t s = {dir};
    if (compat_is_dir(dir)) compat_list_dir(dir, remove_probe, &s, NULL, 0);
}

/* Entries in dir/sub (0 when it does not exist). */
static int32_t entries(const char *dir, const char *sub) {
    char p[RUN_PATH_MAX];
    count_t c = {0};
    if (run_path(dir, sub, p, sizeof p) == 0 && compat_is_dir(p)) compat_list_dir(p, count_entry, &c, NULL, 0);
    return c.n;
}

static int take_lock(run_t *r, const char *command, char *err, size_t errlen) {
    char path[RUN_PATH_MAX], owner[512], holder[512], e[512], ts[32] = "";
    run_path(r->dir, RUN_LOCK, path, sizeof path);
    time_t now = time(NULL);
    const struct tm *tm = gmtime(&now);
    if (tm) strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", tm);
    snprintf(owner, sizeof owner, "pid %d, %s, since %s\n", compat_getpid(), command ? command : "?", ts);
    int rc = compat_lock_try(path, owner, &r->lock, holder, sizeof holder, e, sizeof e);
    if (rc < 0) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    if (rc > 0) {
        size_t l = strlen(holder);
        while (l > 0 && (holder[l - 1] == '\n' || holder[l - 1] == '\r')) holder[--l] = 0;
        set_err(err, errlen,
                "%s: the run is in use by another Koma program (%s); one program writes a run at a time: wait "
                "for it to end or stop it (inspect, report, koma and usi-match can read the run meanwhile)",
                r->dir, l ? holder : "it has not said who it is yet");
        return -1;
    }
    return 0;
}

/* Under the lock: what koma.db is, and whether a new run may start here. */
static int check_database(run_t *r, char *err, size_t errlen) {
    char path[RUN_PATH_MAX], e[1024];
    run_path(r->dir, RUN_DB, path, sizeof path);
    db_probe_t kind;
    if (db_probe(path, &kind, e, sizeof e) != DB_OK) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    if (kind == DB_PROBE_KOMA) return 0;
    if (!(r->flags & RUN_CREATE)) {
        set_err(err, errlen, "%s: %s: not a Koma run directory", r->dir,
                kind == DB_PROBE_ABSENT ? "no koma.db" : "koma.db holds no run");
        return -1;
    }
    int32_t nm = entries(r->dir, RUN_MODELS), ns = entries(r->dir, RUN_SHARDS);
    if (nm > 0 || ns > 0) {
        set_err(err, errlen,
                "%s: koma.db is %s, but %s/ holds %d file(s) and %s/ %d: this is a run whose database was lost, "
                "and a new run would overwrite its nets. Nothing was changed. Restore koma.db from a backup, or move "
                "%s/ and %s/ elsewhere to start a new run here (`inspect --shard FILE` reads a shard without the "
                "database; `import` turns game records into a new run)",
                r->dir, kind == DB_PROBE_ABSENT ? "missing" : "empty (no schema)", RUN_MODELS, nm, RUN_SHARDS, ns,
                RUN_MODELS, RUN_SHARDS);
        return -1;
    }
    r->created = true;
    return 0;
}

/* Every registered file is there, and the newest model (every model with
 * RUN_VERIFY) is the file koma.db registered. */
static int check_files(run_t *r, char *err, size_t errlen) {
    db_check_report_t rep;
    memset(&rep, 0, sizeof rep);
    uint32_t flags = r->flags & RUN_VERIFY ? DB_CHECK_VERIFY : 0;
    if (db_check_shards(r->db, r->dir, flags, &rep) != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(r->db));
        return -1;
    }
    static const char *const kinds[] = {"missing", "mismatch", "orphan moved to orphans/", "orphan deleted",
                                        "temporary removed"};
    for (int32_t i = 0; i < rep.n; i++)
        add_finding(r, "%s: %s (%s)", kinds[rep.items[i].kind], rep.items[i].path, rep.items[i].what);
    r->shards_checked = rep.shards_checked;
    r->models_checked = rep.models_checked;
    db_check_report_free(&rep);

    db_model_t newest;
    db_status_t st = db_model_latest(r->db, &newest);
    if (st == DB_NOTFOUND) return 0;
    if (st != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(r->db));
        return -1;
    }
    char path[RUN_PATH_MAX + DB_PATH_MAX], e[1024];
    for (int32_t c = newest.cycle; c >= 0; c--) {
        db_model_t m;
        st = c == newest.cycle ? DB_OK : db_model_by_cycle(r->db, c, &m);
        if (c == newest.cycle) m = newest;
        if (st == DB_NOTFOUND) continue;
        if (st != DB_OK) {
            set_err(err, errlen, "%s", db_errmsg(r->db));
            return -1;
        }
        run_path(r->dir, m.path, path, sizeof path);
        if (run_verify_file(path, m.xxh3, e, sizeof e) != 0) {
            if (c == newest.cycle) {
                set_err(err, errlen,
                        "%s (the newest model, cycle %d): the run resumes from it, so it must be the file koma.db "
                        "registered; put the original back (or a backup of the whole run directory)",
                        e, c);
                return -1;
            }
            add_finding(r, "model mismatch: %s", e);
        }
        if (!(r->flags & RUN_VERIFY)) break;
    }
    return 0;
}

/* A writer's run must take writes: a run on a read-only file system (a
 * backup on read-only media, a file system remounted read-only), in a
 * directory or with a koma.db this user may not write, is refused naming
 * which, before the lock file is touched. Readers (inspect, report, koma)
 * read such a run where it is. 0, or -1 with err. */
static int check_writable_run(const char *dir, const char *db, const char *command, char *err, size_t errlen) {
    const char *what = NULL, *where = dir;
    if (compat_is_dir(dir) && compat_fs_readonly(dir)) what = "is on a read-only file system";
    else if (compat_is_dir(dir) && !compat_can_write(dir)) what = "is a directory this user cannot write (permissions)";
    else if (compat_file_exists(db) && !compat_can_write(db)) what = "is a read-only file (permissions)", where = db;
    if (!what) return 0;
    set_err(err, errlen,
            "%s: %s: %s writes to its run, so it cannot use this one; copy the run directory to a writable place "
            "to continue it there (inspect, report and koma read it where it is)",
            where, what, command ? command : "this program");
    return -1;
}

static void strip_slashes(char *s) {
    size_t l = strlen(s);
    while (l > 1 && (s[l - 1] == '/' || s[l - 1] == '\\')) s[--l] = 0;
}

run_t *run_open(const char *dir, uint32_t flags, const char *command, char *err, size_t errlen) {
    if (!dir || !dir[0]) {
        set_err(err, errlen, "no run directory given");
        return NULL;
    }
    run_t *r = calloc(1, sizeof *r);
    if (!r) {
        set_err(err, errlen, "%s: out of memory", dir);
        return NULL;
    }
    if (run_path(dir, NULL, r->dir, sizeof r->dir) != 0) {
        set_err(err, errlen, "%.200s...: run directory path too long", dir);
        free(r);
        return NULL;
    }
    strip_slashes(r->dir);
    r->flags = flags;
    char path[RUN_PATH_MAX], e[1024];
    run_path(r->dir, RUN_DB, path, sizeof path);
    if (compat_file_exists(r->dir) && !compat_is_dir(r->dir)) {
        set_err(err, errlen, "%s: not a directory", r->dir);
        goto fail;
    }
    if (!compat_is_dir(r->dir) && !(flags & RUN_CREATE)) {
        set_err(err, errlen, "%s: no such run directory", r->dir);
        goto fail;
    }
    /* Another program's database is refused before anything is written here. */
    db_probe_t kind;
    if (db_probe(path, &kind, e, sizeof e) != DB_OK) {
        set_err(err, errlen, "%s", e);
        goto fail;
    }
    /* Not a run yet: refused before anything (the lock file included) is written here. */
    if (kind != DB_PROBE_KOMA && !(flags & RUN_WRITE && flags & RUN_CREATE)) {
        set_err(err, errlen, "%s: %s: not a Koma run directory", r->dir,
                kind == DB_PROBE_ABSENT ? "no koma.db" : "koma.db holds no run");
        goto fail;
    }
    if (kind != DB_PROBE_KOMA && run_check_new_dir(r->dir, err, errlen) != 0) goto fail;
    if (!(flags & RUN_WRITE)) return r;
    if (check_writable_run(r->dir, path, command, err, errlen) != 0) goto fail;
    if (compat_mkdir_p(r->dir, e, sizeof e) != 0) {
        set_err(err, errlen, "%s: cannot create the run directory: %s", r->dir, e);
        goto fail;
    }
    if (take_lock(r, command, err, errlen) != 0 || check_database(r, err, errlen) != 0) goto fail;
    char sub[RUN_PATH_MAX];
    const char *const dirs[] = {"", RUN_MODELS, RUN_SHARDS};
    for (int i = 0; i < 3; i++) {
        run_path(r->dir, dirs[i], sub, sizeof sub);
        remove_stale_probes(sub);
        if (run_check_writable(sub, err, errlen) != 0) goto fail;
    }
    if (db_open(path, 0, &r->db, e, sizeof e) != DB_OK) {
        set_err(err, errlen, "%s", e);
        goto fail;
    }
    if (db_check_integrity(r->db, (flags & RUN_VERIFY) != 0) != DB_OK) { /* before any work is spent on it */
        set_err(err, errlen, "%s", db_errmsg(r->db));
        goto fail;
    }
    if (check_files(r, err, errlen) != 0) goto fail;
    return r;
fail:
    run_close(r);
    return NULL;
}

void run_close(run_t *r) {
    if (!r) return;
    db_close(r->db);
    compat_lock_release(r->lock);
    for (int32_t i = 0; i < r->n_findings; i++) free(r->findings[i]);
    free(r);
}

const char *run_dir(const run_t *r) { return r ? r->dir : ""; }
db_t *run_db(run_t *r) { return r ? r->db : NULL; }
bool run_is_new(const run_t *r) { return r && r->created; }
int32_t run_findings(const run_t *r) { return r ? r->n_findings : 0; }
const char *run_finding(const run_t *r, int32_t i) {
    return r && i >= 0 && i < r->n_findings ? r->findings[i] : "";
}
void run_checked(const run_t *r, int64_t *shards, int64_t *models) {
    if (shards) *shards = r ? r->shards_checked : 0;
    if (models) *models = r ? r->models_checked : 0;
}
