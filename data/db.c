/* db.c - koma.db: open, probe and close, and the integrity check (see db.h
 * for the API, db_internal.h for what the db*.c files share).
 *
 * Owns: the connection (db_t), how a file is opened (read-only media,
 * migration on open through db_schema.c). Does not own: errors, statements,
 * transactions and row readers (db_util.c, below every db*.c file), the
 * schema (db_schema.c), the SQL text (db_sql.c), what each table holds
 * (db_models.c, db_shards.c, db_games.c, db_matches.c, db_metrics.c).
 */
#include "data/db_internal.h"

#include "compat/compat.h"
#include "compat/err.h"

#include <stdarg.h>

#define BUSY_TIMEOUT_MS 10000

/* ---- read-only media ----------------------------------------------------------------------
 * A WAL database is read through its -shm index, which a reader creates next
 * to the file: on a read-only file system (a backup on read-only media, a
 * file system remounted read-only) or in a directory this process may not
 * write, a plain read-only open fails ("unable to open database file"). A
 * cleanly closed run there (no -wal, or an empty one: everything
 * checkpointed) is opened immutable (SQLite's immutable=1 URI: no locks, no
 * -shm); one whose -wal still holds transactions is opened plainly when its
 * -shm is there (SQLite reads through a read-only one), else it cannot be
 * read without writing and is refused naming why. */

/* 1 when path's directory takes no new file (read-only file system or permissions). */
static int on_readonly_media(const char *path) {
    char dir[DB_PATH_MAX + 1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return compat_fs_readonly(path) || !compat_can_write(dir);
}

/* "file:PATH?immutable=1" with PATH percent-encoded where a URI needs it. */
static int immutable_uri(const char *path, char *out, size_t len) {
    size_t n = 0;
    int w = snprintf(out, len, "file:");
    if (w < 0 || (size_t)w >= len) return -1;
    n = (size_t)w;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (n + 4 >= len) return -1;
        if (*p == '%' || *p == '?' || *p == '#' || *p <= ' ' || *p >= 0x7f)
            n += (size_t)snprintf(out + n, len - n, "%%%02X", *p);
        else out[n++] = (char)*p;
    }
    w = snprintf(out + n, len - n, "?immutable=1");
    return w < 0 || (size_t)w >= len - n ? -1 : 0;
}

/* How a reader opens path: 0 plainly; 1 immutable (*uri filled); -1 with err
 * when it cannot be read without writing. */
static int reader_route(const char *path, char *uri, size_t urilen, char *err, size_t errlen) {
    if (!on_readonly_media(path)) return 0;
    char wal[DB_PATH_MAX + 1100], shm[DB_PATH_MAX + 1100];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    if (compat_file_size(wal) > 0 && compat_file_exists(shm)) return 0; /* SQLite reads through a read-only -shm */
    if (compat_file_size(wal) > 0) {
        set_err(err, errlen,
                "%s: on a read-only file system or in a directory this user cannot write, and %s still holds "
                "transactions (the run was not closed cleanly): it cannot be read without writing; copy the "
                "run directory to a writable place and read it there",
                path, wal);
        return -1;
    }
    if (immutable_uri(path, uri, urilen) != 0) {
        set_err(err, errlen, "%s: path too long", path);
        return -1;
    }
    return 1;
}

static db_status_t db_open_once(const char *path, uint32_t flags, db_t **out, char *err, size_t errlen,
                                int32_t *older_version);

db_status_t db_open(const char *path, uint32_t flags, db_t **out, char *err, size_t errlen) {
    int32_t older = 0;
    db_status_t st = db_open_once(path, flags & ~(uint32_t)DB_OPEN_MIGRATE, out, err, errlen, &older);
    if (st != DB_SCHEMA || !older || !(flags & DB_OPEN_MIGRATE) || !(flags & DB_OPEN_READONLY)) return st;
    /* An older schema, read-only with DB_OPEN_MIGRATE: migrate it in a short
     * read-write open that never creates a file or a schema, then read. */
    db_t *rw = NULL;
    st = db_open_once(path, DB_OPEN_NOCREATE_, &rw, err, errlen, NULL);
    db_close(rw);
    if (st != DB_OK) return st;
    st = db_open_once(path, flags & ~(uint32_t)DB_OPEN_MIGRATE, out, err, errlen, NULL);
    if (st == DB_OK) (*out)->migrated_from = older;
    return st;
}

db_status_t db_probe(const char *path, db_probe_t *kind, char *err, size_t errlen) {
    *kind = DB_PROBE_ABSENT;
    if (!compat_file_exists(path)) return DB_OK;
    if (compat_is_dir(path)) {
        set_err(err, errlen, "%s: is a directory, not a database", path);
        return DB_CORRUPT;
    }
    sqlite3 *sq = NULL;
    int rc = SQLITE_OK;
    int64_t v[3] = {0, 0, 0}; /* application_id, user_version, schema objects */
    static const char *const sql[3] = {"PRAGMA application_id", "PRAGMA user_version",
                                       "SELECT count(*) FROM sqlite_master"};
    /* Read-only; once more read-write where a writer killed inside a
     * rollback-journal transaction (a new run's schema, before WAL) left a hot
     * journal: reading then needs the rollback to the last commit that any
     * connection with write access makes (a read-only one gets "attempt to
     * write a readonly database", and the run could never be resumed). */
    char uri[DB_PATH_MAX + 1200];
    int route = reader_route(path, uri, sizeof uri, err, errlen);
    if (route < 0) return DB_ERROR;
    for (int pass = 0; pass < 2; pass++) {
        if (sq) sqlite3_close(sq), sq = NULL;
        if (route == 1) rc = sqlite3_open_v2(uri, &sq, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        else rc = sqlite3_open_v2(path, &sq, pass ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, NULL);
        /* a reader that meets a WAL left by a killed writer while another
         * connection recovers it gets SQLITE_BUSY: wait as every connection does */
        if (rc == SQLITE_OK) sqlite3_busy_timeout(sq, BUSY_TIMEOUT_MS);
        for (int i = 0; rc == SQLITE_OK && i < 3; i++) {
            sqlite3_stmt *s = NULL;
            rc = sqlite3_prepare_v2(sq, sql[i], -1, &s, NULL);
            if (rc == SQLITE_OK) rc = sqlite3_step(s);
            if (rc == SQLITE_ROW) {
                v[i] = sqlite3_column_int64(s, 0);
                rc = SQLITE_OK;
            }
            sqlite3_finalize(s);
        }
        if (!(rc == SQLITE_READONLY && sq && sqlite3_extended_errcode(sq) == SQLITE_READONLY_ROLLBACK)) break;
    }
    db_status_t st = DB_OK;
    if (rc != SQLITE_OK) {
        st = rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT ? DB_CORRUPT : DB_ERROR;
        set_err(err, errlen, "%s: %s (%s)", path, st == DB_CORRUPT ? "not a database, or a corrupt one" : "cannot read",
                sq ? sqlite3_errmsg(sq) : sqlite3_errstr(rc));
    } else if (v[0] != 0 && v[0] != DB_APPLICATION_ID) {
        st = DB_SCHEMA;
        set_err(err, errlen, "%s: not a Koma database (application_id 0x%08llx)", path, (unsigned long long)v[0]);
    } else if (v[1] == 0 && v[2] > 0) {
        st = DB_SCHEMA;
        set_err(err, errlen, "%s: not a Koma database (%lld schema objects but no schema version)", path,
                (long long)v[2]);
    } else if (v[1] < 0 || v[1] > DB_SCHEMA_VERSION) {
        st = DB_SCHEMA;
        set_err(err, errlen, "%s: schema version %lld is not one this build of Koma understands (1..%d)", path,
                (long long)v[1], DB_SCHEMA_VERSION);
    } else {
        *kind = v[1] == 0 ? DB_PROBE_BLANK : DB_PROBE_KOMA;
    }
    sqlite3_close(sq);
    return st;
}

int32_t db_migrated_from(const db_t *db) { return db ? db->migrated_from : 0; }

static db_status_t db_open_once(const char *path, uint32_t flags, db_t **out, char *err, size_t errlen,
                                int32_t *older_version) {
    if (out) *out = NULL;
    if (!path || !out) {
        set_err(err, errlen, "%s: db_open: no path or result", path ? path : "(null)");
        return DB_INVALID;
    }
    if (compat_check_regular_file(path, err, errlen) != 0) return DB_INVALID;
    db_t *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) {
        set_err(err, errlen, "%s: out of memory", path);
        free(db);
        return DB_ERROR;
    }
    db->flags = flags;
    int oflags = (flags & DB_OPEN_READONLY)    ? SQLITE_OPEN_READONLY
                 : (flags & DB_OPEN_NOCREATE_) ? SQLITE_OPEN_READWRITE
                                               : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    char uri[DB_PATH_MAX + 1200];
    int route = flags & DB_OPEN_READONLY ? reader_route(path, uri, sizeof uri, err, errlen) : 0;
    if (route < 0) {
        db_close(db);
        return DB_ERROR;
    }
    if (!(flags & DB_OPEN_READONLY) && compat_file_exists(path) &&
        (on_readonly_media(path) || !compat_can_write(path))) {
        set_err(err, errlen,
                "%s: %s: a program that writes to it (selfplay, train, import, usi-match recording a match) "
                "cannot use it; copy the run directory to a writable place (inspect, report and koma read it "
                "where it is)",
                path,
                compat_fs_readonly(path) ? "on a read-only file system"
                : compat_can_write(path) ? "in a directory this user cannot write (permissions)"
                                         : "a read-only file (permissions)");
        db_close(db);
        return DB_ERROR;
    }
    int rc = route == 1 ? sqlite3_open_v2(uri, &db->sq, oflags | SQLITE_OPEN_URI, NULL)
                        : sqlite3_open_v2(path, &db->sq, oflags, NULL);
    db_status_t st = DB_OK;
    if (rc != SQLITE_OK) st = dbi_fail(db, rc, "open");
    if (st == DB_OK) sqlite3_busy_timeout(db->sq, BUSY_TIMEOUT_MS);
    /* The schema first: another program's database is refused untouched. */
    if (st == DB_OK) st = dbi_schema_check(db);
    if (st == DB_OK && !(flags & DB_OPEN_READONLY)) {
        /* Persistent in the file; needs no open transaction. */
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(db->sq, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(s);
        if (rc != SQLITE_ROW) {
            st = dbi_fail(db, rc, "enable the WAL journal");
        } else {
            const unsigned char *mode = sqlite3_column_text(s, 0);
            if (!mode || strcmp((const char *)mode, "wal") != 0)
                st = dbi_fail_with(db, DB_ERROR, "enable the WAL journal: the file system refused (journal mode '%s')",
                                   mode ? (const char *)mode : "?");
        }
        sqlite3_finalize(s);
    }
    if (st == DB_OK) st = db_exec(db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON");
    if (st != DB_OK) {
        set_err(err, errlen, "%s", db->err);
        if (older_version) *older_version = db->older_version;
        db_close(db);
        return st;
    }
    *out = db;
    return DB_OK;
}

void db_close(db_t *db) {
    if (!db) return;
    for (int i = 0; i < S_NB; i++) sqlite3_finalize(db->stmt[i]);
    if (db->sq) sqlite3_close(db->sq);
    free(db->path);
    free(db);
}

/* ---- integrity ------------------------------------------------------------------------ */
db_status_t db_check_integrity(db_t *db, int full) {
    if (!db) return DB_INVALID;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq, full ? "PRAGMA integrity_check(5)" : "PRAGMA quick_check(5)", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(s, 0);
        char first[256];
        snprintf(first, sizeof first, "%s", text ? text : "?");
        for (char *q = first; *q; q++)
            if (*q == '\n' || *q == '\r') *q = ' ';
        if (strcmp(first, "ok") != 0)
            st = dbi_fail_with(db, DB_CORRUPT,
                               "%s: %s; the database is damaged: restore it from a backup "
                               "(sqlite3's .recover can save what is readable)",
                               full ? "integrity check" : "quick check", first);
    } else {
        st = dbi_fail(db, rc, full ? "integrity check" : "quick check");
    }
    sqlite3_finalize(s);
    return st;
}
