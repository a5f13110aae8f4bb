/* db_internal.h - what the files of the run database share (data/db*.c only).
 *
 * Owns: the connection struct, the ids of the prepared statements, the error
 * helpers ("<db path>: <step>: <sqlite message>" into db->err, the SQLite
 * code mapped to a db_status_t), transactions that nest as savepoints, and
 * the row readers every query goes through. Does not own: the public API and
 * its contracts (data/db.h), the SQL text of the statements (db_schema.c).
 *
 * The files: db.c (open, probe, close, errors, statements, transactions,
 * row readers, integrity check), db_schema.c (the schema, its migrations and
 * the statements' SQL), db_models.c (runs, models), db_shards.c (the shard
 * registration protocol, shards, the start-up file check), db_games.c (games
 * read back, counts), db_matches.c (matches and their games), db_metrics.c
 * (train steps, cycle metrics, the summary).
 *
 * Names: dbi_ (internal, defined in one of those files); the static inline
 * binders and column readers below keep short names (no link symbol).
 */
#ifndef KOMA_DB_INTERNAL_H
#define KOMA_DB_INTERNAL_H

#include "data/db.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the prepared statements (SQL in db_schema.c: dbi_stmt_sql) ------------- */
enum {
    S_RUN_INSERT,
    S_RUN_CPU_SET,
    S_RUN_CPU_SUM,
    S_RUN_LATEST,
    S_MODEL_INSERT,
    S_MODEL_LATEST,
    S_MODEL_GET,
    S_MODEL_BY_CYCLE,
    S_SHARD_POS_END,
    S_SHARD_INSERT,
    S_GAME_INSERT,
    S_INTENT_INSERT,
    S_INTENT_DELETE,
    S_SHARD_GET,
    S_SHARD_BY_PATH,
    S_SHARDS_DESC,
    S_GAMES_OF_SHARD,
    S_COUNT_ALL,
    S_COUNT_CYCLE,
    S_STEP_INSERT,
    S_STEPS_GET,
    S_CYCLE_PUT,
    S_CYCLE_GET,
    S_MATCH_INSERT,
    S_MATCHES_ALL,
    S_MATCHES_CYCLE,
    S_MATCH_GET,
    S_MATCH_GAME_INSERT,
    S_MATCH_TALLY,
    S_MATCH_FINISH,
    S_MATCH_GAMES,
    S_MATCH_MOVE_GAMES,
    S_MATCH_DELETE,
    S_NB
};
extern const char *const dbi_stmt_sql[S_NB];

struct db {
    sqlite3 *sq;
    char *path;
    uint32_t flags;
    int32_t version;
    int32_t older_version; /* read-only open refused: the file has this older schema version */
    int32_t migrated_from; /* DB_OPEN_MIGRATE: the version migrated from, 0 if none */
    sqlite3_stmt *stmt[S_NB];
    char err[DB_ERR_MAX];
};

#if defined(__GNUC__) || defined(__clang__)
#define DBI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DBI_PRINTF(f, a)
#endif

/* ---- errors (db.c) -------------------------------------------------------------
 * dbi_fail: a SQLite failure rc during the step `fmt` (printf format); a full
 * disk says so. dbi_fail_with: a failure that is not SQLite's (bad argument,
 * file I/O). Both write db->err and return the status. */
db_status_t dbi_fail(db_t *db, int rc, const char *fmt, ...) DBI_PRINTF(3, 4);
db_status_t dbi_fail_with(db_t *db, db_status_t s, const char *fmt, ...) DBI_PRINTF(3, 4);
/* snprintf for messages that may be cut short (no truncation warning). */
void dbi_msgf(char *dst, size_t len, const char *fmt, ...) DBI_PRINTF(3, 4);

/* ---- argument checks and paths (db.c) -------------------------------------------- */
int dbi_is_hex16(const char *s); /* 16 lowercase hex digits, nothing after */
int dbi_path_ok(const char *p);  /* non-empty, relative, shorter than DB_PATH_MAX */
/* <dir>/<rel>, or rel when dir is NULL or "" (buffers DB_PATH_MAX + 1024). */
void dbi_join_path(char *out, size_t len, const char *dir, const char *rel);

/* ---- statements (db.c) ------------------------------------------------------------ */
/* Statement id, prepared once per connection; NULL (db->err set) on failure. */
sqlite3_stmt *dbi_stmt(db_t *db, int id);
/* Steps a statement that returns no rows, then resets it. */
db_status_t dbi_run_stmt(db_t *db, sqlite3_stmt *s, const char *step);
/* One integer from a one-row query, e.g. a PRAGMA. */
db_status_t dbi_query_int(db_t *db, const char *sql, int64_t *out, const char *step);
/* Prepares sql (a statement run once, not kept); the failure names `what`. */
db_status_t dbi_prepare(db_t *db, const char *sql, sqlite3_stmt **s, const char *what);

static inline void done(sqlite3_stmt *s) {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}
static inline void bind_real(sqlite3_stmt *s, int i, double v) { /* NAN -> NULL */
    if (isnan(v)) sqlite3_bind_null(s, i);
    else sqlite3_bind_double(s, i, v);
}
static inline void bind_id(sqlite3_stmt *s, int i, int64_t id) { /* <= 0 -> NULL */
    if (id > 0) sqlite3_bind_int64(s, i, id);
    else sqlite3_bind_null(s, i);
}
static inline void bind_text(sqlite3_stmt *s, int i, const char *t) { /* NULL -> "" */
    sqlite3_bind_text(s, i, t ? t : "", -1, SQLITE_STATIC);
}
static inline double col_real(sqlite3_stmt *s, int i) { /* NULL -> NAN */
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}
static inline void col_text(sqlite3_stmt *s, int i, char *dst, size_t len) {
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, len, "%s", t ? (const char *)t : "");
}
static inline char *col_strdup(sqlite3_stmt *s, int i) { /* NULL when out of memory */
    const unsigned char *t = sqlite3_column_text(s, i);
    return strdup(t ? (const char *)t : "");
}

/* ---- row readers (db.c) ------------------------------------------------------------
 * Every query's rows go through these three. A dbi_row_fn reads the current
 * row of s into row (dbi_row_one, dbi_rows_array) or into its ctx
 * (dbi_rows_each: row is NULL); ctx is NULL for dbi_row_one. It returns
 * DB_OK, DBI_ROW_LAST (read, and no further row is wanted) or a failure with
 * db->err set. Each helper leaves s reset (a statement prepared for one use
 * is then finalized by its caller). */
typedef db_status_t (*dbi_row_fn)(db_t *db, sqlite3_stmt *s, void *row, void *ctx);
#define DBI_ROW_LAST ((db_status_t)1)

/* The one row of s: read(db, s, row, NULL) (NULL read: only whether there is
 * one); DB_NOTFOUND with the message `missing` when there is none; a SQLite
 * failure names `what`. */
db_status_t dbi_row_one(db_t *db, sqlite3_stmt *s, dbi_row_fn read, void *row, const char *what, const char *missing);
/* Every row of s: read(db, s, NULL, ctx) until it returns something else
 * than DB_OK (DBI_ROW_LAST: DB_OK) or the rows end; a SQLite failure names
 * `what`. */
db_status_t dbi_rows_each(db_t *db, sqlite3_stmt *s, dbi_row_fn read, void *ctx, const char *what);
/* Every row of s into a malloc'ed array of elements of `size` bytes, each
 * zeroed, then read(db, s, element, ctx); DBI_ROW_LAST ends it there. Out of
 * memory is "<what>: out of memory". On failure *v still holds the n rows
 * read (the last one possibly half read, its pointers NULL or malloc'ed) for
 * the caller to free. */
typedef struct {
    void *v;
    int64_t n;
} dbi_array_t;
db_status_t dbi_rows_array(db_t *db, sqlite3_stmt *s, size_t size, dbi_row_fn read, void *ctx, const char *what,
                           dbi_array_t *out);

/* ---- transactions (db.c) ------------------------------------------------------------
 * A writer's own transaction (*outer = 1), or a savepoint inside the caller's.
 * dbi_tx_end commits (st == DB_OK) or rolls back and returns the final status;
 * the message of a failure in the body is kept. */
db_status_t dbi_tx_begin(db_t *db, int *outer);
db_status_t dbi_tx_end(db_t *db, int outer, db_status_t st);

/* ---- schema (db_schema.c) ------------------------------------------------------------ */
/* Checks the schema version of a connection just opened: creates (a new
 * file) or migrates (an older version) inside one transaction, or refuses
 * another program's file or a newer version. Sets db->version, and
 * db->older_version when a read-only open meets an older schema. */
db_status_t dbi_schema_check(db_t *db);

/* ---- games (db_games.c) ----------------------------------------------------------------- */
/* The games selected by statement `which` that takes one id (a shard's, a
 * match's); `label` names the owner in messages ("shard", "match"). */
db_status_t dbi_games_by_id(db_t *db, int which, int64_t id, const char *label, db_game_list_t *out);

#endif
