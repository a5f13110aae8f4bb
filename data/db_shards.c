/* db_shards.c - koma.db's shards: the crash-safe protocol that puts a shard
 * file and its games on record together, the shard lookups, and the start-up
 * check of the files against the database.
 *
 * Owns: shard_intents (a file about to be written), db_shard_insert (the
 * shard row and its games in one transaction), db_shard_commit (intent,
 * write, hash, register; nothing on record and no file left when any step
 * fails), db_file_xxh3, the trainer's window of recent shards, and
 * db_check_shards (missing or changed files, half-written temporaries,
 * orphans moved aside or deleted). Does not own: what is inside a shard
 * (data/shard.c), the games read back (db_games.c), the writer thread
 * (data/writer.c).
 */
#include "data/db_internal.h"

#include "compat/compat.h"
#include "compat/err.h"

#include <stdarg.h>
#include <xxhash.h>

/* ---- registration -------------------------------------------------------------- */
static db_status_t intent_delete(db_t *db, const char *rel_path) {
    sqlite3_stmt *s = dbi_stmt(db, S_INTENT_DELETE);
    if (!s) return DB_ERROR;
    bind_text(s, 1, rel_path);
    return dbi_run_stmt(db, s, "clear shard intent");
}

db_status_t db_shard_intent(db_t *db, const char *rel_path) {
    if (!db || !rel_path) return DB_INVALID;
    if (!dbi_path_ok(rel_path))
        return dbi_fail_with(db, DB_INVALID, "shard intent: path '%.64s' is empty, absolute or too long", rel_path);
    sqlite3_stmt *s = dbi_stmt(db, S_INTENT_INSERT);
    if (!s) return DB_ERROR;
    bind_text(s, 1, rel_path);
    sqlite3_bind_int(s, 2, compat_getpid());
    char step[DB_PATH_MAX + 64];
    snprintf(step, sizeof step, "record intent to write shard '%s'", rel_path);
    return dbi_run_stmt(db, s, step);
}

static db_status_t check_shard_args(db_t *db, const db_shard_t *sh, const db_game_t *games, int32_t n) {
    if (!dbi_path_ok(sh->path))
        return dbi_fail_with(db, DB_INVALID, "insert shard: path '%.64s' is empty, absolute or too long", sh->path);
    if (!dbi_is_hex16(sh->xxh3))
        return dbi_fail_with(db, DB_INVALID, "insert shard '%s': checksum '%.20s' is not 16 lowercase hex digits",
                             sh->path, sh->xxh3);
    if (sh->rows < 0 || sh->bytes < 0 || n < 0 || (n > 0 && !games))
        return dbi_fail_with(db, DB_INVALID, "insert shard '%s': negative rows, bytes or game count", sh->path);
    for (int32_t i = 0; i < n; i++) {
        const db_game_t *g = &games[i];
        if (g->first_row < 0 || g->row_count < 0 || g->first_row > sh->rows - g->row_count)
            return dbi_fail_with(db, DB_INVALID,
                                 "insert shard '%s': game %d has rows [%lld, %lld+%lld) outside the shard's %lld rows",
                                 sh->path, i, (long long)g->first_row, (long long)g->first_row, (long long)g->row_count,
                                 (long long)sh->rows);
        if (g->result < -1 || g->result > 1)
            return dbi_fail_with(db, DB_INVALID, "insert shard '%s': game %d has result %d (want -1, 0 or 1)", sh->path,
                                 i, g->result);
        if ((unsigned)g->reason >= DB_REASON_NB)
            return dbi_fail_with(db, DB_INVALID, "insert shard '%s': game %d has an unknown end reason %d", sh->path, i,
                                 (int)g->reason);
        if (g->plies < 0 || !g->start_sfen || !g->moves)
            return dbi_fail_with(db, DB_INVALID,
                                 "insert shard '%s': game %d has no start position, no moves or negative plies",
                                 sh->path, i);
    }
    return DB_OK;
}

db_status_t db_shard_insert(db_t *db, db_shard_t *sh, db_game_t *games, int32_t n) {
    if (!db || !sh) return DB_INVALID;
    db_status_t st = check_shard_args(db, sh, games, n);
    if (st != DB_OK) return st;
    int outer;
    if ((st = dbi_tx_begin(db, &outer)) != DB_OK) return st;

    int64_t pos_begin = 0;
    sqlite3_stmt *s = dbi_stmt(db, S_SHARD_POS_END);
    if (!s) st = DB_ERROR;
    if (st == DB_OK) {
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) pos_begin = sqlite3_column_int64(s, 0);
        else if (rc != SQLITE_DONE) st = dbi_fail(db, rc, "insert shard '%s': read the position count", sh->path);
        done(s);
    }
    if (st == DB_OK && !(s = dbi_stmt(db, S_SHARD_INSERT))) st = DB_ERROR;
    int64_t shard_id = 0;
    if (st == DB_OK) {
        bind_text(s, 1, sh->path);
        sqlite3_bind_int(s, 2, sh->cycle);
        sqlite3_bind_int(s, 3, sh->features_version);
        sqlite3_bind_int64(s, 4, sh->rows);
        sqlite3_bind_int64(s, 5, n);
        sqlite3_bind_int64(s, 6, pos_begin);
        sqlite3_bind_int64(s, 7, sh->bytes);
        bind_text(s, 8, sh->xxh3);
        char step[DB_PATH_MAX + 32];
        snprintf(step, sizeof step, "insert shard '%s'", sh->path);
        st = dbi_run_stmt(db, s, step);
        shard_id = sqlite3_last_insert_rowid(db->sq);
    }
    if (st == DB_OK && !(s = dbi_stmt(db, S_GAME_INSERT))) st = DB_ERROR;
    for (int32_t i = 0; st == DB_OK && i < n; i++) {
        db_game_t *g = &games[i];
        sqlite3_bind_int64(s, 1, shard_id);
        sqlite3_bind_int64(s, 2, g->first_row);
        sqlite3_bind_int64(s, 3, g->row_count);
        bind_id(s, 4, g->model_id);
        bind_text(s, 5, g->start_sfen);
        bind_text(s, 6, g->moves);
        sqlite3_bind_int(s, 7, g->plies);
        sqlite3_bind_int(s, 8, g->result);
        bind_text(s, 9, db_reason_name(g->reason));
        bind_text(s, 10, g->black);
        bind_text(s, 11, g->white);
        bind_text(s, 12, g->detail);
        if (g->host && g->host[0]) {
            sqlite3_bind_int(s, 13, g->rank);
            bind_text(s, 14, g->host);
        } else {
            sqlite3_bind_null(s, 13);
            sqlite3_bind_null(s, 14);
        }
        char step[DB_PATH_MAX + 64];
        snprintf(step, sizeof step, "insert game %d of %d of shard '%s'", i + 1, n, sh->path);
        st = dbi_run_stmt(db, s, step);
        g->id = sqlite3_last_insert_rowid(db->sq);
        g->shard_id = shard_id;
        g->match_id = 0;
    }
    if (st == DB_OK) st = intent_delete(db, sh->path);
    st = dbi_tx_end(db, outer, st);
    if (st == DB_OK) {
        sh->id = shard_id;
        sh->games = n;
        sh->pos_begin = pos_begin;
    } else {
        for (int32_t i = 0; i < n; i++) games[i].id = games[i].shard_id = 0;
    }
    return st;
}

#define RUN_DIR_MAX 1000 /* dbi_join_path buffers are DB_PATH_MAX + 1024 */

int db_file_xxh3(const char *path, uint64_t *hash, int64_t *bytes, char *err, size_t errlen) {
    if (compat_check_regular_file(path, err, errlen) != 0) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open for checksum", path);
        return -1;
    }
    XXH3_state_t *x = XXH3_createState();
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    int rc = -1;
    if (x && buf && XXH3_64bits_reset(x) == XXH_OK) {
        int64_t total = 0;
        size_t got;
        while ((got = fread(buf, 1, CHUNK, f)) > 0) {
            XXH3_64bits_update(x, buf, got);
            total += (int64_t)got;
        }
        if (!ferror(f)) {
            if (hash) *hash = XXH3_64bits_digest(x);
            if (bytes) *bytes = total;
            rc = 0;
        } else if (err && errlen) {
            set_err(err, errlen, "%s: read error while hashing", path);
        }
    } else if (err && errlen) {
        set_err(err, errlen, "%s: out of memory for checksum", path);
    }
    free(buf);
    XXH3_freeState(x);
    fclose(f);
    return rc;
}

static db_status_t set_update(db_t *db, const db_set_t *set, int64_t shard_id);

/* db_shard_commit, and with set its progress in the registration's transaction. */
static db_status_t shard_commit_common(db_t *db, const char *run_dir, db_shard_t *sh, db_game_t *games, int32_t n,
                                       const db_set_t *set, db_shard_write_fn write, void *arg) {
    if (!db || !sh || !write) return DB_INVALID;
    if (!dbi_path_ok(sh->path))
        return dbi_fail_with(db, DB_INVALID, "commit shard: path '%.64s' is empty, absolute or too long", sh->path);
    if (run_dir && strlen(run_dir) > RUN_DIR_MAX)
        return dbi_fail_with(db, DB_INVALID, "commit shard: run directory path longer than %d bytes", RUN_DIR_MAX);
    char abs[DB_PATH_MAX + 1024];
    dbi_join_path(abs, sizeof abs, run_dir, sh->path);
    /* Never write over a file: a registered one would lose its data, an
     * unregistered one is an orphan for db_check_shards to look at. */
    sqlite3_stmt *s = dbi_stmt(db, S_SHARD_BY_PATH);
    if (!s) return DB_ERROR;
    bind_text(s, 1, sh->path);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW)
        st =
            dbi_fail_with(db, DB_CONSTRAINT, "commit shard '%s': a shard of that path is already registered", sh->path);
    else if (rc != SQLITE_DONE) st = dbi_fail(db, rc, "commit shard '%s': look up the path", sh->path);
    done(s);
    if (st != DB_OK) return st;
    if (compat_file_exists(abs))
        return dbi_fail_with(db, DB_CONSTRAINT,
                             "commit shard: %s already exists but is not registered (run the start-up check)", abs);
    if ((st = db_shard_intent(db, sh->path)) != DB_OK) return st;
    char err[DB_ERR_MAX] = "";
    int wrc = write(abs, arg, err, sizeof err);
    if (wrc != 0) {
        st = wrc < 0 && wrc >= DB_TIMEOUT ? (db_status_t)wrc : DB_ERROR;
        /* the shard file failed, not the database: name the file */
        set_err(db->err, sizeof db->err, "%.300s: the shard could not be written: %s%.300s%s", abs,
                st == DB_FULL ? "the disk is full (" : "", err[0] ? err : "write failed",
                st == DB_FULL ? "); free some space and start again (what was committed before is kept)" : "");
        compat_remove_file(abs); /* a writer that failed after its rename */
        char keep[DB_ERR_MAX];
        memcpy(keep, db->err, sizeof keep);
        intent_delete(db, sh->path);
        memcpy(db->err, keep, sizeof keep);
        return st;
    }
    uint64_t h = 0;
    if (db_file_xxh3(abs, &h, &sh->bytes, err, sizeof err) != 0) {
        st = dbi_fail_with(db, DB_ERROR, "register shard: %s", err);
    } else {
        snprintf(sh->xxh3, sizeof sh->xxh3, "%016llx", (unsigned long long)h);
        int outer;
        st = dbi_tx_begin(db, &outer);
        if (st == DB_OK) {
            st = db_shard_insert(db, sh, games, n);
            if (st == DB_OK && set) st = set_update(db, set, sh->id);
            st = dbi_tx_end(db, outer, st);
        }
    }
    if (st != DB_OK) {
        /* Nothing is on record: take the file back, so that no orphan stays. */
        char keep[DB_ERR_MAX];
        memcpy(keep, db->err, sizeof keep);
        compat_remove_file(abs);
        intent_delete(db, sh->path);
        memcpy(db->err, keep, sizeof keep);
    }
    return st;
}

db_status_t db_shard_commit(db_t *db, const char *run_dir, db_shard_t *sh, db_game_t *games, int32_t n,
                            db_shard_write_fn write, void *arg) {
    return shard_commit_common(db, run_dir, sh, games, n, NULL, write, arg);
}

db_status_t db_shard_commit_set(db_t *db, const char *run_dir, db_shard_t *sh, const db_set_t *set,
                                db_shard_write_fn write, void *arg) {
    if (!set || set->id <= 0) return DB_INVALID;
    return shard_commit_common(db, run_dir, sh, NULL, 0, set, write, arg);
}

/* ---- position sets ------------------------------------------------------------------ */
#define SET_COLS "id, path, format, bytes, mtime_ns, xxh3, records, records_done, positions, rejected, finished, created"

static db_status_t set_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    db_set_t *o = row;
    memset(o, 0, sizeof *o);
    o->id = sqlite3_column_int64(s, 0);
    col_text(s, 1, o->path, sizeof o->path);
    col_text(s, 2, o->format, sizeof o->format);
    o->bytes = sqlite3_column_int64(s, 3);
    o->mtime_ns = sqlite3_column_int64(s, 4);
    col_text(s, 5, o->xxh3, sizeof o->xxh3);
    o->records = sqlite3_column_int64(s, 6);
    o->records_done = sqlite3_column_int64(s, 7);
    o->positions = sqlite3_column_int64(s, 8);
    o->rejected = sqlite3_column_int64(s, 9);
    o->finished = sqlite3_column_int(s, 10);
    col_text(s, 11, o->created, sizeof o->created);
    return DB_OK;
}

db_status_t db_set_find(db_t *db, const char *path, int64_t bytes, int64_t mtime_ns, const char *xxh3, db_set_t *out,
                        int *found) {
    if (!db || !path || !out || !found) return DB_INVALID;
    *found = 0;
    for (int by_hash = 0; by_hash < 2 && !*found; by_hash++) {
        if (by_hash && !xxh3) break;
        sqlite3_stmt *s = NULL;
        db_status_t st = dbi_prepare(db,
                                     by_hash ? "SELECT " SET_COLS " FROM position_sets WHERE xxh3 = ?1 AND bytes = ?2 "
                                               "ORDER BY finished DESC, id DESC LIMIT 1"
                                             : "SELECT " SET_COLS " FROM position_sets WHERE path = ?1 AND bytes = ?2 "
                                               "AND mtime_ns = ?3 ORDER BY finished DESC, id DESC LIMIT 1",
                                     &s, "look up a position set");
        if (st != DB_OK) return st;
        bind_text(s, 1, by_hash ? xxh3 : path);
        sqlite3_bind_int64(s, 2, bytes);
        if (!by_hash) sqlite3_bind_int64(s, 3, mtime_ns);
        st = dbi_row_one(db, s, set_row, out, "look up a position set", "no such set");
        sqlite3_finalize(s);
        if (st == DB_OK) *found = 1;
        else if (st != DB_NOTFOUND) return st;
    }
    return DB_OK;
}

db_status_t db_set_insert(db_t *db, db_set_t *set) {
    if (!db || !set || !dbi_is_hex16(set->xxh3) || set->records < 0 || set->bytes < 0)
        return db ? dbi_fail_with(db, DB_INVALID, "insert position set: bad arguments") : DB_INVALID;
    sqlite3_stmt *s = NULL;
    db_status_t st = dbi_prepare(db,
                                 "INSERT INTO position_sets(path, format, bytes, mtime_ns, xxh3, records, records_done, "
                                 "positions, rejected, finished) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                                 &s, "insert position set");
    if (st != DB_OK) return st;
    bind_text(s, 1, set->path);
    bind_text(s, 2, set->format);
    sqlite3_bind_int64(s, 3, set->bytes);
    sqlite3_bind_int64(s, 4, set->mtime_ns);
    bind_text(s, 5, set->xxh3);
    sqlite3_bind_int64(s, 6, set->records);
    sqlite3_bind_int64(s, 7, set->records_done);
    sqlite3_bind_int64(s, 8, set->positions);
    sqlite3_bind_int64(s, 9, set->rejected);
    sqlite3_bind_int(s, 10, set->finished ? 1 : 0);
    char step[DB_PATH_MAX + 64];
    dbi_msgf(step, sizeof step, "insert position set '%s'", set->path);
    st = dbi_run_stmt(db, s, step);
    if (st == DB_OK) set->id = sqlite3_last_insert_rowid(db->sq);
    sqlite3_finalize(s);
    return st;
}

/* The set's progress, and the shard that carried it (shard_id > 0). */
static db_status_t set_update(db_t *db, const db_set_t *set, int64_t shard_id) {
    sqlite3_stmt *s = NULL;
    db_status_t st = dbi_prepare(db,
                                 "UPDATE position_sets SET records_done = ?2, positions = ?3, rejected = ?4, "
                                 "finished = ?5 WHERE id = ?1",
                                 &s, "advance a position set");
    if (st != DB_OK) return st;
    sqlite3_bind_int64(s, 1, set->id);
    sqlite3_bind_int64(s, 2, set->records_done);
    sqlite3_bind_int64(s, 3, set->positions);
    sqlite3_bind_int64(s, 4, set->rejected);
    sqlite3_bind_int(s, 5, set->finished ? 1 : 0);
    st = dbi_run_stmt(db, s, "advance a position set");
    sqlite3_finalize(s);
    if (st == DB_OK && sqlite3_changes(db->sq) != 1)
        st = dbi_fail_with(db, DB_NOTFOUND, "advance position set %lld: no such set", (long long)set->id);
    if (st == DB_OK && shard_id > 0) {
        char sql[96];
        snprintf(sql, sizeof sql, "UPDATE shards SET set_id = %lld WHERE id = %lld", (long long)set->id,
                 (long long)shard_id);
        st = db_exec(db, sql);
    }
    return st;
}

db_status_t db_set_progress(db_t *db, const db_set_t *set) {
    if (!db || !set || set->id <= 0) return DB_INVALID;
    int outer;
    db_status_t st = dbi_tx_begin(db, &outer);
    if (st != DB_OK) return st;
    return dbi_tx_end(db, outer, set_update(db, set, 0));
}

db_status_t db_sets_list(db_t *db, db_set_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    db_status_t st = dbi_prepare(db, "SELECT " SET_COLS " FROM position_sets ORDER BY id", &s, "list position sets");
    if (st != DB_OK) return st;
    dbi_array_t a = {0};
    st = dbi_rows_array(db, s, sizeof(db_set_t), set_row, NULL, "list position sets", &a);
    sqlite3_finalize(s);
    *out = a.v;
    *n = (int32_t)a.n;
    return st;
}

/* A row of SHARD_COLS into row (db_shard_t). */
static db_status_t shard_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    db_shard_t *out = row;
    memset(out, 0, sizeof *out);
    out->id = sqlite3_column_int64(s, 0);
    col_text(s, 1, out->path, sizeof out->path);
    out->cycle = sqlite3_column_int(s, 2);
    out->features_version = sqlite3_column_int(s, 3);
    out->rows = sqlite3_column_int64(s, 4);
    out->games = sqlite3_column_int64(s, 5);
    out->pos_begin = sqlite3_column_int64(s, 6);
    out->bytes = sqlite3_column_int64(s, 7);
    col_text(s, 8, out->xxh3, sizeof out->xxh3);
    col_text(s, 9, out->created, sizeof out->created);
    return DB_OK;
}

db_status_t db_shard_get(db_t *db, int64_t id, db_shard_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_SHARD_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    char what[48], missing[64];
    snprintf(what, sizeof what, "read shard %lld", (long long)id);
    snprintf(missing, sizeof missing, "%s: no such shard", what);
    return dbi_row_one(db, s, shard_row, out, what, missing);
}

/* db_shards_recent: the rows taken so far, up to min_rows (<= 0: all). */
typedef struct {
    int64_t min_rows, rows;
} recent_t;

static db_status_t recent_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    recent_t *r = ctx;
    shard_row(db, s, row, NULL);
    r->rows += ((db_shard_t *)row)->rows;
    return r->min_rows > 0 && r->rows >= r->min_rows ? DBI_ROW_LAST : DB_OK;
}

db_status_t db_shards_recent(db_t *db, int64_t min_rows, db_shard_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = dbi_stmt(db, S_SHARDS_DESC);
    if (!s) return DB_ERROR;
    recent_t r = {min_rows, 0};
    dbi_array_t a;
    db_status_t st = dbi_rows_array(db, s, sizeof(db_shard_t), recent_row, &r, "list shards", &a);
    if (st != DB_OK) {
        free(a.v);
        return st;
    }
    db_shard_t *v = a.v;
    int32_t cnt = (int32_t)a.n;
    for (int32_t i = 0; i < cnt / 2; i++) { /* newest first -> oldest first */
        db_shard_t t = v[i];
        v[i] = v[cnt - 1 - i];
        v[cnt - 1 - i] = t;
    }
    *out = v;
    *n = cnt;
    return DB_OK;
}

/* ---- start-up check -------------------------------------------------------------- */
static db_status_t report_add(db_t *db, db_check_report_t *r, db_check_kind_t kind, const char *path, const char *fmt,
                              ...) {
    db_check_item_t *v = realloc(r->items, (size_t)(r->n + 1) * sizeof *v);
    if (!v) return dbi_fail_with(db, DB_ERROR, "check shards: out of memory");
    r->items = v;
    db_check_item_t *it = &v[r->n++];
    it->kind = kind;
    snprintf(it->path, sizeof it->path, "%s", path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->what, sizeof it->what, fmt, ap);
    va_end(ap);
    return DB_OK;
}

void db_check_report_free(db_check_report_t *r) {
    if (!r) return;
    free(r->items);
    memset(r, 0, sizeof *r);
}

/* Moves <run_dir>/<rel> to <run_dir>/orphans/<rel with '/' -> '_'>[.N]. */
static int move_aside(const char *run_dir, const char *rel, char *dst, size_t dstlen, char *err, size_t errlen) {
    char dir[DB_PATH_MAX + 1024], src[DB_PATH_MAX + 1024], flat[DB_PATH_MAX];
    dbi_join_path(dir, sizeof dir, run_dir, "orphans");
    if (compat_mkdir_p(dir, err, errlen) != 0) return -1;
    dbi_join_path(src, sizeof src, run_dir, rel);
    snprintf(flat, sizeof flat, "%s", rel);
    for (char *p = flat; *p; p++)
        if (*p == '/' || *p == '\\') *p = '_';
    for (int i = 0; i < 1000; i++) {
        if (i == 0) snprintf(dst, dstlen, "%s/%s", dir, flat);
        else snprintf(dst, dstlen, "%s/%s.%d", dir, flat, i);
        if (compat_file_exists(dst)) continue;
        if (rename(src, dst) == 0) return 0;
        dbi_msgf(err, errlen, "%s: cannot move to %s", src, dst);
        return -1;
    }
    dbi_msgf(err, errlen, "%s: too many orphans of that name in %s", src, dir);
    return -1;
}

/* What db_check_shards' row readers share. */
typedef struct {
    db_check_report_t *r;
    const char *run_dir;
    uint32_t flags;
    char abs[DB_PATH_MAX + 1024];
} check_t;

/* 1. A registered shard file is there, with the size (and hash) on record. */
static db_status_t check_shard_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)row;
    check_t *c = ctx;
    db_check_report_t *r = c->r;
    const char *rel = (const char *)sqlite3_column_text(s, 0);
    int64_t bytes = sqlite3_column_int64(s, 1);
    const char *want = (const char *)sqlite3_column_text(s, 2);
    r->shards_checked++;
    dbi_join_path(c->abs, sizeof c->abs, c->run_dir, rel);
    int64_t size = compat_file_size(c->abs);
    if (size < 0) return report_add(db, r, DB_CHECK_MISSING, rel, "registered shard file is missing");
    if (size != bytes)
        return report_add(db, r, DB_CHECK_MISMATCH, rel, "file is %lld bytes, the database says %lld", (long long)size,
                          (long long)bytes);
    if (!(c->flags & DB_CHECK_VERIFY)) return DB_OK;
    uint64_t h;
    char hex[17], err[DB_ERR_MAX];
    if (db_file_xxh3(c->abs, &h, NULL, err, sizeof err) != 0)
        return report_add(db, r, DB_CHECK_MISMATCH, rel, "cannot be read");
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    if (strcmp(hex, want ? want : "") != 0)
        return report_add(db, r, DB_CHECK_MISMATCH, rel, "XXH3 %s, the database says %s", hex, want);
    return DB_OK;
}

/* 2. A registered model file is there. */
static db_status_t check_model_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)row;
    check_t *c = ctx;
    const char *rel = (const char *)sqlite3_column_text(s, 0);
    c->r->models_checked++;
    dbi_join_path(c->abs, sizeof c->abs, c->run_dir, rel);
    if (!compat_file_exists(c->abs))
        return report_add(db, c->r, DB_CHECK_MISSING, rel, "registered model file is missing");
    return DB_OK;
}

/* 3. A shard intent, and whether its shard was registered. */
typedef struct {
    char path[DB_PATH_MAX];
    int pid;
    int registered;
} intent_t;

static db_status_t intent_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    intent_t *it = row;
    col_text(s, 0, it->path, sizeof it->path);
    it->pid = sqlite3_column_int(s, 1);
    it->registered = sqlite3_column_int(s, 2);
    return DB_OK;
}

/* An intent never registered: the file (if the rename happened) is an
 * orphan, moved aside or deleted; a temporary is half-written, removed. */
static db_status_t check_intent(db_t *db, check_t *c, const intent_t *it) {
    const char *rel = it->path;
    char tmp[DB_PATH_MAX + 1100], rtmp[DB_PATH_MAX + 32], err[DB_ERR_MAX];
    dbi_join_path(c->abs, sizeof c->abs, c->run_dir, rel);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", c->abs, it->pid);
    snprintf(rtmp, sizeof rtmp, "%s.tmp.%d", rel, it->pid);
    db_status_t st = DB_OK;
    if (compat_file_exists(tmp)) {
        if (compat_remove_file(tmp) == 0)
            st = report_add(db, c->r, DB_CHECK_TMP_REMOVED, rtmp, "half-written temporary removed");
        else st = dbi_fail_with(db, DB_ERROR, "check shards: cannot remove %s", tmp);
    }
    if (st != DB_OK || !compat_file_exists(c->abs)) return st;
    if (c->flags & DB_CHECK_DELETE_ORPHANS) {
        if (compat_remove_file(c->abs) == 0)
            return report_add(db, c->r, DB_CHECK_ORPHAN_DELETED, rel, "written but never registered: deleted");
        return dbi_fail_with(db, DB_ERROR, "check shards: cannot delete orphan %s", c->abs);
    }
    char dst[DB_PATH_MAX + 2100];
    if (move_aside(c->run_dir, rel, dst, sizeof dst, err, sizeof err) == 0)
        return report_add(db, c->r, DB_CHECK_ORPHAN_MOVED, rel, "written but never registered: moved to orphans/");
    return dbi_fail_with(db, DB_ERROR, "check shards: %s", err);
}

db_status_t db_check_shards(db_t *db, const char *run_dir, uint32_t flags, db_check_report_t *r) {
    if (!db || !r) return DB_INVALID;
    memset(r, 0, sizeof *r);
    if (run_dir && strlen(run_dir) > RUN_DIR_MAX)
        return dbi_fail_with(db, DB_INVALID, "check shards: run directory path longer than %d bytes", RUN_DIR_MAX);
    check_t c = {.r = r, .run_dir = run_dir, .flags = flags};
    sqlite3_stmt *s = NULL;
    db_status_t st =
        dbi_prepare(db, "SELECT path, bytes, xxh3 FROM shards ORDER BY id", &s, "check shards: list shards");
    if (st == DB_OK) st = dbi_rows_each(db, s, check_shard_row, &c, "check shards: list shards");
    sqlite3_finalize(s);
    if (st == DB_OK) {
        st = dbi_prepare(db, "SELECT path FROM models ORDER BY id", &s, "check shards: list models");
        if (st == DB_OK) st = dbi_rows_each(db, s, check_model_row, &c, "check shards: list models");
        sqlite3_finalize(s);
    }
    /* Intents: collected first, then acted on (each is deleted once done). */
    dbi_array_t a = {NULL, 0};
    if (st == DB_OK) {
        st = dbi_prepare(db,
                         "SELECT i.path, i.pid, s.id IS NOT NULL FROM shard_intents i "
                         "LEFT JOIN shards s ON s.path = i.path ORDER BY i.path",
                         &s, "check shards: list intents");
        if (st == DB_OK)
            st = dbi_rows_array(db, s, sizeof(intent_t), intent_row, NULL, "check shards: list intents", &a);
        sqlite3_finalize(s);
    }
    const intent_t *iv = a.v;
    for (int64_t i = 0; st == DB_OK && i < a.n; i++) {
        if (!iv[i].registered) st = check_intent(db, &c, &iv[i]);
        if (st == DB_OK) st = intent_delete(db, iv[i].path);
    }
    free(a.v);
    return st;
}
