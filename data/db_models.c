/* db_models.c - koma.db's runs and models: one row per invocation of a
 * command, one published net per cycle.
 *
 * Owns: db_run_insert, db_run_latest, db_model_insert and the model
 * lookups (latest, by id, by cycle), with the checks of a model row (a
 * relative path, a 16-digit XXH3). Does not own: the model files themselves
 * (nn/weights.c writes them, data/run.c checks the newest one), the
 * start-up check that every registered model file is there (db_shards.c).
 */
#include "data/db_internal.h"

/* ---- runs ---------------------------------------------------------------------- */
db_status_t db_run_insert(db_t *db, const char *koma_version, const char *command, const char *config, int64_t *id) {
    if (!db) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_RUN_INSERT);
    if (!s) return DB_ERROR;
    bind_text(s, 1, koma_version);
    bind_text(s, 2, command);
    bind_text(s, 3, config);
    db_status_t st = dbi_run_stmt(db, s, "insert run");
    if (st == DB_OK && id) *id = sqlite3_last_insert_rowid(db->sq);
    return st;
}

/* A row of S_RUN_LATEST into row (db_run_t). */
static db_status_t run_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)ctx;
    db_run_t *out = row;
    out->id = sqlite3_column_int64(s, 0);
    col_text(s, 1, out->created, sizeof out->created);
    col_text(s, 2, out->koma_version, sizeof out->koma_version);
    col_text(s, 3, out->command, sizeof out->command);
    out->config = col_strdup(s, 4);
    return out->config ? DB_OK : dbi_fail_with(db, DB_ERROR, "read run: out of memory");
}

db_status_t db_run_latest(db_t *db, db_run_t *out) {
    if (!db || !out) return DB_INVALID;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = dbi_stmt(db, S_RUN_LATEST);
    if (!s) return DB_ERROR;
    return dbi_row_one(db, s, run_row, out, "read latest run", "no runs");
}

void db_run_clear(db_run_t *r) {
    if (!r) return;
    free(r->config);
    r->config = NULL;
}

db_status_t db_run_cpu_update(db_t *db, int64_t run_id, double seconds, double *total) {
    if (!db || !total || run_id <= 0 || !(seconds >= 0)) return DB_INVALID;
    *total = NAN;
    sqlite3_stmt *s = dbi_stmt(db, S_RUN_CPU_SET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, run_id);
    sqlite3_bind_double(s, 2, seconds);
    db_status_t st = dbi_run_stmt(db, s, "record the run's CPU seconds");
    if (st != DB_OK) return st;
    s = dbi_stmt(db, S_RUN_CPU_SUM);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, run_id);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st = dbi_fail(db, rc, "sum the run's CPU seconds");
        sqlite3_reset(s);
        return st;
    }
    double sum = sqlite3_column_double(s, 0);
    int64_t unknown = sqlite3_column_int64(s, 1);
    sqlite3_reset(s);
    if (unknown == 0) *total = sum;
    return DB_OK;
}

/* ---- models -------------------------------------------------------------------- */
db_status_t db_model_insert(db_t *db, db_model_t *m) {
    if (!db || !m) return DB_INVALID;
    if (!dbi_path_ok(m->path))
        return dbi_fail_with(db, DB_INVALID, "insert model of cycle %d: path '%.64s' is empty, absolute or too long",
                             m->cycle, m->path);
    if (!dbi_is_hex16(m->xxh3))
        return dbi_fail_with(db, DB_INVALID, "insert model '%s': checksum '%.20s' is not 16 lowercase hex digits",
                             m->path, m->xxh3);
    sqlite3_stmt *s = dbi_stmt(db, S_MODEL_INSERT);
    if (!s) return DB_ERROR;
    bind_id(s, 1, m->run_id);
    sqlite3_bind_int(s, 2, m->cycle);
    sqlite3_bind_int(s, 3, m->features_version);
    bind_text(s, 4, m->path);
    bind_text(s, 5, m->xxh3);
    bind_text(s, 6, m->arch);
    sqlite3_bind_int64(s, 7, m->train_steps);
    sqlite3_bind_int64(s, 8, m->train_samples);
    bind_real(s, 9, m->loss_policy);
    bind_real(s, 10, m->loss_value);
    bind_real(s, 11, m->loss_legal);
    bind_real(s, 12, m->loss_total);
    bind_real(s, 13, m->cpu_seconds);
    char step[DB_PATH_MAX + 64];
    snprintf(step, sizeof step, "insert model '%s' (cycle %d)", m->path, m->cycle);
    db_status_t st = dbi_run_stmt(db, s, step);
    if (st == DB_OK) m->id = sqlite3_last_insert_rowid(db->sq);
    return st;
}

/* A row of MODEL_COLS into row (db_model_t). */
static db_status_t model_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    db_model_t *out = row;
    out->id = sqlite3_column_int64(s, 0);
    out->run_id = sqlite3_column_int64(s, 1);
    out->cycle = sqlite3_column_int(s, 2);
    out->features_version = sqlite3_column_int(s, 3);
    col_text(s, 4, out->path, sizeof out->path);
    col_text(s, 5, out->xxh3, sizeof out->xxh3);
    col_text(s, 6, out->arch, sizeof out->arch);
    out->train_steps = sqlite3_column_int64(s, 7);
    out->train_samples = sqlite3_column_int64(s, 8);
    out->loss_policy = col_real(s, 9);
    out->loss_value = col_real(s, 10);
    out->loss_legal = col_real(s, 11);
    out->loss_total = col_real(s, 12);
    col_text(s, 13, out->created, sizeof out->created);
    out->cpu_seconds = col_real(s, 14);
    return DB_OK;
}

/* The one model a bound statement selects; `what` names the lookup. */
static db_status_t read_model(db_t *db, sqlite3_stmt *s, db_model_t *out, const char *what) {
    memset(out, 0, sizeof *out);
    char missing[96];
    snprintf(missing, sizeof missing, "%s: no such model", what);
    return dbi_row_one(db, s, model_row, out, what, missing);
}

db_status_t db_model_latest(db_t *db, db_model_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_MODEL_LATEST);
    return s ? read_model(db, s, out, "read latest model") : DB_ERROR;
}

db_status_t db_model_get(db_t *db, int64_t id, db_model_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_MODEL_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    return read_model(db, s, out, "read model by id");
}

db_status_t db_model_by_cycle(db_t *db, int32_t cycle, db_model_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_MODEL_BY_CYCLE);
    if (!s) return DB_ERROR;
    sqlite3_bind_int(s, 1, cycle);
    return read_model(db, s, out, "read model by cycle");
}
