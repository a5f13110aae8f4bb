/* db_util.c - what every db*.c file shares (db_internal.h): status and
 * reason names, errors, the statement cache, transactions, argument checks
 * and the row readers.
 *
 * Owns: the mapping of SQLite codes to db_status_t and the messages
 * "<db path>: <step>: <sqlite message>" in db->err, the statements prepared
 * once per connection (dbi_stmt, the SQL from db_sql.c) and reset after use,
 * the one loop every query's rows go through (dbi_row_one, dbi_rows_each,
 * dbi_rows_array), transactions that nest as savepoints. Calls nothing in
 * the files above it (db.c, db_schema.c and the tables' files call it), so
 * data/ has no circle (issue 44). Does not own: the connection's opening
 * (db.c), the schema (db_schema.c).
 */
#include "data/db_internal.h"

#include "compat/compat.h"
#include "compat/err.h"

#include <stdarg.h>

/* ---- names ------------------------------------------------------------------ */
const char *db_status_name(db_status_t s) {
    switch (s) {
    case DB_OK: return "DB_OK";
    case DB_ERROR: return "DB_ERROR";
    case DB_FULL: return "DB_FULL";
    case DB_BUSY: return "DB_BUSY";
    case DB_CORRUPT: return "DB_CORRUPT";
    case DB_SCHEMA: return "DB_SCHEMA";
    case DB_CONSTRAINT: return "DB_CONSTRAINT";
    case DB_NOTFOUND: return "DB_NOTFOUND";
    case DB_INVALID: return "DB_INVALID";
    case DB_CANCELLED: return "DB_CANCELLED";
    case DB_TIMEOUT: return "DB_TIMEOUT";
    }
    return "DB_?";
}

static const char *const reason_names[DB_REASON_NB] = {
    [DB_REASON_CHECKMATE] = "checkmate",
    [DB_REASON_RESIGN] = "resign",
    [DB_REASON_SENNICHITE] = "sennichite",
    [DB_REASON_PERPETUAL_CHECK] = "perpetual_check",
    [DB_REASON_DECLARATION] = "declaration",
    [DB_REASON_MAX_PLY] = "max_ply",
    [DB_REASON_ILLEGAL_MOVE] = "illegal_move",
    [DB_REASON_TIME] = "time",
    [DB_REASON_ABORT] = "abort",
};

const char *db_reason_name(db_reason_t r) { return (unsigned)r < DB_REASON_NB ? reason_names[r] : "?"; }

int db_reason_parse(const char *name, db_reason_t *r) {
    for (int i = 0; name && i < DB_REASON_NB; i++) {
        if (strcmp(name, reason_names[i]) == 0) {
            *r = (db_reason_t)i;
            return 0;
        }
    }
    return -1;
}

/* ---- errors ----------------------------------------------------------------- */
static db_status_t status_of(int rc) {
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW: return DB_OK;
    case SQLITE_FULL: return DB_FULL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return DB_BUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return DB_CORRUPT;
    case SQLITE_CONSTRAINT: return DB_CONSTRAINT;
    default: return DB_ERROR;
    }
}

static void vset(db_t *db, const char *fmt, va_list ap) {
    int n = snprintf(db->err, sizeof db->err, "%s: ", db->path);
    if (n > 0 && (size_t)n < sizeof db->err) vsnprintf(db->err + n, sizeof db->err - (size_t)n, fmt, ap);
}

/* A SQLite failure during `step` (printf format). */
db_status_t dbi_fail(db_t *db, int rc, const char *fmt, ...) {
    char step[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(step, sizeof step, fmt, ap);
    va_end(ap);
    db_status_t s = status_of(rc);
    if (s == DB_OK) s = DB_ERROR;
    const char *msg = db->sq ? sqlite3_errmsg(db->sq) : sqlite3_errstr(rc);
    if (s == DB_FULL)
        set_err(db->err, sizeof db->err,
                "%s: %s: %s: the disk is full; free some space and start again (the run resumes)", db->path, step, msg);
    else set_err(db->err, sizeof db->err, "%s: %s: %s (%s)", db->path, step, msg, sqlite3_errstr(rc));
    return s;
}

/* A failure that is not SQLite's (bad argument, file I/O). */
db_status_t dbi_fail_with(db_t *db, db_status_t s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(db, fmt, ap);
    va_end(ap);
    return s;
}

const char *db_path(const db_t *db) { return db ? db->path : NULL; }
const char *db_errmsg(const db_t *db) { return db ? db->err : "no database"; }
int32_t db_schema_version(const db_t *db) { return db ? db->version : 0; }

/* ---- statement helpers -------------------------------------------------------- */
sqlite3_stmt *dbi_stmt(db_t *db, int id) {
    if (!db->stmt[id]) {
        int rc = sqlite3_prepare_v3(db->sq, dbi_stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &db->stmt[id], NULL);
        if (rc != SQLITE_OK) {
            dbi_fail(db, rc, "prepare statement %d", id);
            db->stmt[id] = NULL;
            return NULL;
        }
    }
    return db->stmt[id];
}

/* Steps a statement that returns no rows, then resets it. */
db_status_t dbi_run_stmt(db_t *db, sqlite3_stmt *s, const char *step) {
    int rc = sqlite3_step(s);
    db_status_t st = rc == SQLITE_DONE ? DB_OK : dbi_fail(db, rc, "%s", step);
    done(s);
    return st;
}

db_status_t db_exec(db_t *db, const char *sql) {
    if (!db || !sql) return DB_INVALID;
    int rc = sqlite3_exec(db->sq, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return dbi_fail(db, rc, "exec '%.80s'", sql);
    return DB_OK;
}

/* One integer from a one-row query, e.g. a PRAGMA. */
db_status_t dbi_query_int(db_t *db, const char *sql, int64_t *out, const char *step) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return dbi_fail(db, rc, "%s", step);
    rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(s, 0);
    else st = rc == SQLITE_DONE ? dbi_fail_with(db, DB_ERROR, "%s: no row", step) : dbi_fail(db, rc, "%s", step);
    sqlite3_finalize(s);
    return st;
}

/* ---- transactions --------------------------------------------------------------- */
db_status_t db_begin(db_t *db) {
    if (!db) return DB_INVALID;
    int rc = sqlite3_exec(db->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : dbi_fail(db, rc, "begin transaction");
}

db_status_t db_commit(db_t *db) {
    if (!db) return DB_INVALID;
    int rc = sqlite3_exec(db->sq, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return DB_OK;
    db_status_t st = dbi_fail(db, rc, "commit");
    if (!sqlite3_get_autocommit(db->sq)) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

db_status_t db_rollback(db_t *db) {
    if (!db) return DB_INVALID;
    if (sqlite3_get_autocommit(db->sq)) return DB_OK; /* nothing open (SQLite may have rolled back already) */
    int rc = sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : dbi_fail(db, rc, "rollback");
}

/* A writer's own transaction, or a savepoint inside the caller's. */
db_status_t dbi_tx_begin(db_t *db, int *outer) {
    *outer = sqlite3_get_autocommit(db->sq);
    int rc = sqlite3_exec(db->sq, *outer ? "BEGIN IMMEDIATE" : "SAVEPOINT koma_tx", NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : dbi_fail(db, rc, "begin transaction");
}

/* Commits (st == DB_OK) or rolls back; returns the final status. The error
 * message of a failure in the body is kept. */
db_status_t dbi_tx_end(db_t *db, int outer, db_status_t st) {
    if (st == DB_OK) {
        int rc = sqlite3_exec(db->sq, outer ? "COMMIT" : "RELEASE koma_tx", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return DB_OK;
        st = dbi_fail(db, rc, "commit");
    }
    if (outer) {
        if (!sqlite3_get_autocommit(db->sq)) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    } else {
        sqlite3_exec(db->sq, "ROLLBACK TO koma_tx; RELEASE koma_tx", NULL, NULL, NULL);
    }
    return st;
}

/* ---- argument checks and paths ----------------------------------------------------- */
int dbi_is_hex16(const char *s) {
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[16] == 0;
}

int dbi_path_ok(const char *p) {
    size_t n = strnlen(p, DB_PATH_MAX);
    return n > 0 && n < DB_PATH_MAX && p[0] != '/';
}

void dbi_msgf(char *dst, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

void dbi_join_path(char *out, size_t len, const char *dir, const char *rel) {
    if (!dir || !dir[0]) snprintf(out, len, "%s", rel);
    else snprintf(out, len, "%s/%s", dir, rel);
}

/* ---- row readers ---------------------------------------------------------------------- */
db_status_t dbi_prepare(db_t *db, const char *sql, sqlite3_stmt **s, const char *what) {
    *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq, sql, -1, s, NULL);
    return rc == SQLITE_OK ? DB_OK : dbi_fail(db, rc, "%s", what);
}

db_status_t dbi_row_one(db_t *db, sqlite3_stmt *s, dbi_row_fn read, void *row, const char *what, const char *missing) {
    int rc = sqlite3_step(s);
    db_status_t st;
    if (rc == SQLITE_ROW) st = read ? read(db, s, row, NULL) : DB_OK;
    else if (rc == SQLITE_DONE) st = dbi_fail_with(db, DB_NOTFOUND, "%s", missing);
    else st = dbi_fail(db, rc, "%s", what);
    done(s);
    return st == DBI_ROW_LAST ? DB_OK : st;
}

db_status_t dbi_rows_each(db_t *db, sqlite3_stmt *s, dbi_row_fn read, void *ctx, const char *what) {
    db_status_t st = DB_OK;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        st = read(db, s, NULL, ctx);
        if (st != DB_OK) break;
    }
    if (st == DBI_ROW_LAST) st = DB_OK;
    else if (st == DB_OK && rc != SQLITE_DONE) st = dbi_fail(db, rc, "%s", what);
    done(s);
    return st;
}

typedef struct {
    size_t size;
    dbi_row_fn read;
    void *ctx;
    const char *what;
    dbi_array_t a;
    int64_t cap;
} grow_t;

/* dbi_rows_array's row: one more element, zeroed, counted, then read. */
static db_status_t grow_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)row;
    grow_t *g = ctx;
    if (g->a.n == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 16;
        void *v = realloc(g->a.v, (size_t)cap * g->size);
        if (!v) return dbi_fail_with(db, DB_ERROR, "%s: out of memory", g->what);
        g->a.v = v;
        g->cap = cap;
    }
    void *e = (char *)g->a.v + (size_t)g->a.n * g->size;
    memset(e, 0, g->size);
    g->a.n++;
    return g->read(db, s, e, g->ctx);
}

db_status_t dbi_rows_array(db_t *db, sqlite3_stmt *s, size_t size, dbi_row_fn read, void *ctx, const char *what,
                           dbi_array_t *out) {
    grow_t g = {.size = size, .read = read, .ctx = ctx, .what = what};
    db_status_t st = dbi_rows_each(db, s, grow_row, &g, what);
    *out = g.a;
    return st;
}
