/* db_metrics.c - koma.db's figures: train steps, per-cycle metrics (with
 * the resignation check), and the summary of a whole run.
 *
 * Owns: train_steps (written in batches, read by range), cycle_metrics
 * (one row per cycle, NULL for what was not measured; the resignation
 * figures must nest), db_summary (every count of the run read in one read
 * transaction so that they agree). Does not own: measuring anything
 * (selfplay/, train/), the writer's batching of metrics (data/writer.c),
 * a cycle's game results (db_games.c).
 */
#include "data/db_internal.h"

/* ---- metrics ------------------------------------------------------------------ */
db_status_t db_train_steps_insert(db_t *db, const db_train_step_t *rows, int32_t n) {
    if (!db || n < 0 || (n > 0 && !rows)) return DB_INVALID;
    if (n == 0) return DB_OK;
    int outer;
    db_status_t st = dbi_tx_begin(db, &outer);
    if (st != DB_OK) return st;
    sqlite3_stmt *s = dbi_stmt(db, S_STEP_INSERT);
    if (!s) st = DB_ERROR;
    for (int32_t i = 0; st == DB_OK && i < n; i++) {
        const db_train_step_t *r = &rows[i];
        sqlite3_bind_int64(s, 1, r->step);
        sqlite3_bind_int(s, 2, r->cycle);
        if (r->time > 0) sqlite3_bind_double(s, 3, r->time);
        bind_real(s, 4, r->lr);
        sqlite3_bind_int64(s, 5, r->samples);
        bind_real(s, 6, r->loss_policy);
        bind_real(s, 7, r->loss_value);
        bind_real(s, 8, r->loss_legal);
        bind_real(s, 9, r->loss_total);
        bind_real(s, 10, r->acc_policy);
        bind_real(s, 11, r->acc_value);
        bind_real(s, 12, r->acc_legal);
        bind_real(s, 13, r->grad_norm);
        char step[64];
        snprintf(step, sizeof step, "insert train step %lld", (long long)r->step);
        st = dbi_run_stmt(db, s, step);
    }
    return dbi_tx_end(db, outer, st);
}

/* db_train_steps_get: the caller's rows, filled up to the statement's LIMIT. */
typedef struct {
    db_train_step_t *rows;
    int32_t *n;
} steps_t;

static db_status_t step_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)row;
    steps_t *c = ctx;
    db_train_step_t *r = &c->rows[(*c->n)++];
    r->step = sqlite3_column_int64(s, 0);
    r->cycle = sqlite3_column_int(s, 1);
    r->time = sqlite3_column_double(s, 2);
    r->lr = col_real(s, 3);
    r->samples = sqlite3_column_int64(s, 4);
    r->loss_policy = col_real(s, 5);
    r->loss_value = col_real(s, 6);
    r->loss_legal = col_real(s, 7);
    r->loss_total = col_real(s, 8);
    r->acc_policy = col_real(s, 9);
    r->acc_value = col_real(s, 10);
    r->acc_legal = col_real(s, 11);
    r->grad_norm = col_real(s, 12);
    return DB_OK;
}

db_status_t db_train_steps_get(db_t *db, int64_t from, int64_t to, db_train_step_t *rows, int32_t max, int32_t *n) {
    if (!db || !n || max < 0 || (max > 0 && !rows)) return DB_INVALID;
    *n = 0;
    sqlite3_stmt *s = dbi_stmt(db, S_STEPS_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, from);
    sqlite3_bind_int64(s, 2, to);
    sqlite3_bind_int(s, 3, max);
    steps_t c = {rows, n};
    return dbi_rows_each(db, s, step_row, &c, "read train steps");
}

void db_cycle_metrics_init(db_cycle_metrics_t *m, int32_t cycle) {
    if (!m) return;
    memset(m, 0, sizeof *m);
    m->cycle = cycle;
    m->started = m->finished = m->selfplay_s = m->train_s = NAN;
    m->positions_per_s = m->evals_per_s = m->avg_batch = m->busy_pct = m->avg_plies = NAN;
    m->elo = m->elo_lo = m->elo_hi = NAN;
    m->no_resign_games = m->would_resign = m->false_resign = -1;
    m->resign_threshold = NAN;
}

/* A count that may not have been recorded: < 0 is NULL. */
static void bind_count(sqlite3_stmt *s, int i, int64_t v) {
    if (v >= 0) sqlite3_bind_int64(s, i, v);
    else sqlite3_bind_null(s, i);
}

db_status_t db_cycle_metrics_put(db_t *db, const db_cycle_metrics_t *m) {
    if (!db || !m) return DB_INVALID;
    /* The resignation figures nest: false <= would <= no-resign games (each
     * may be unrecorded, < 0; a recorded one needs the ones around it). */
    int64_t nr = m->no_resign_games, wr = m->would_resign, fr = m->false_resign;
    if ((wr >= 0 && (nr < 0 || wr > nr)) || (fr >= 0 && (wr < 0 || fr > wr)))
        return dbi_fail_with(db, DB_INVALID,
                             "write metrics of cycle %d: resignation figures do not nest: %lld false of %lld would-be "
                             "resignations in %lld no-resign games",
                             m->cycle, (long long)fr, (long long)wr, (long long)nr);
    sqlite3_stmt *s = dbi_stmt(db, S_CYCLE_PUT);
    if (!s) return DB_ERROR;
    sqlite3_bind_int(s, 1, m->cycle);
    bind_id(s, 2, m->model_id);
    bind_real(s, 3, m->started);
    bind_real(s, 4, m->finished);
    sqlite3_bind_int64(s, 5, m->games);
    sqlite3_bind_int64(s, 6, m->positions);
    bind_real(s, 7, m->selfplay_s);
    bind_real(s, 8, m->train_s);
    bind_real(s, 9, m->positions_per_s);
    bind_real(s, 10, m->evals_per_s);
    bind_real(s, 11, m->avg_batch);
    bind_real(s, 12, m->busy_pct);
    bind_real(s, 13, m->avg_plies);
    sqlite3_bind_int64(s, 14, m->black_wins);
    sqlite3_bind_int64(s, 15, m->white_wins);
    sqlite3_bind_int64(s, 16, m->draws);
    bind_real(s, 17, m->elo);
    bind_real(s, 18, m->elo_lo);
    bind_real(s, 19, m->elo_hi);
    bind_count(s, 20, nr);
    bind_count(s, 21, wr);
    bind_count(s, 22, fr);
    bind_real(s, 23, m->resign_threshold);
    char step[64];
    snprintf(step, sizeof step, "write metrics of cycle %d", m->cycle);
    return dbi_run_stmt(db, s, step);
}

db_status_t db_cycle_metrics_get_or_init(db_t *db, int32_t cycle, db_cycle_metrics_t *out) {
    db_status_t st = db_cycle_metrics_get(db, cycle, out);
    if (st == DB_NOTFOUND) {
        db_cycle_metrics_init(out, cycle);
        st = DB_OK;
    }
    return st;
}

/* A row of S_CYCLE_GET into row (db_cycle_metrics_t). */
static db_status_t cycle_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    db_cycle_metrics_t *out = row;
    out->cycle = sqlite3_column_int(s, 0);
    out->model_id = sqlite3_column_int64(s, 1);
    out->started = col_real(s, 2);
    out->finished = col_real(s, 3);
    out->games = sqlite3_column_int64(s, 4);
    out->positions = sqlite3_column_int64(s, 5);
    out->selfplay_s = col_real(s, 6);
    out->train_s = col_real(s, 7);
    out->positions_per_s = col_real(s, 8);
    out->evals_per_s = col_real(s, 9);
    out->avg_batch = col_real(s, 10);
    out->busy_pct = col_real(s, 11);
    out->avg_plies = col_real(s, 12);
    out->black_wins = sqlite3_column_int64(s, 13);
    out->white_wins = sqlite3_column_int64(s, 14);
    out->draws = sqlite3_column_int64(s, 15);
    out->elo = col_real(s, 16);
    out->elo_lo = col_real(s, 17);
    out->elo_hi = col_real(s, 18);
    out->no_resign_games = sqlite3_column_int64(s, 19);
    out->would_resign = sqlite3_column_int64(s, 20);
    out->false_resign = sqlite3_column_int64(s, 21);
    out->resign_threshold = col_real(s, 22);
    return DB_OK;
}

db_status_t db_cycle_metrics_get(db_t *db, int32_t cycle, db_cycle_metrics_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_CYCLE_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int(s, 1, cycle);
    char what[48], missing[48];
    snprintf(what, sizeof what, "read metrics of cycle %d", cycle);
    snprintf(missing, sizeof missing, "no metrics for cycle %d", cycle);
    return dbi_row_one(db, s, cycle_row, out, what, missing);
}

/* ---- summary ------------------------------------------------------------------- */
/* A row of (reason, in a shard, count) into the summary's end reasons. */
static db_status_t reason_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)row;
    db_summary_t *out = ctx;
    db_reason_t r;
    if (db_reason_parse((const char *)sqlite3_column_text(s, 0), &r) == 0)
        (sqlite3_column_int(s, 1) ? out->reasons : out->match_reasons)[r] = sqlite3_column_int64(s, 2);
    return DB_OK;
}

db_status_t db_summary(db_t *db, db_summary_t *out) {
    if (!db || !out) return DB_INVALID;
    memset(out, 0, sizeof *out);
    out->schema_version = db->version;
    out->latest_cycle = -1;
    out->last_step = -1;
    out->last_loss_total = NAN;
    out->avg_plies = NAN;
    /* One read transaction so that the figures agree with each other. */
    int rc = sqlite3_exec(db->sq, "SAVEPOINT koma_summary", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return dbi_fail(db, rc, "summary: begin");
    struct {
        const char *sql;
        int64_t *dst;
    } counts[] = {
        {"SELECT count(*) FROM runs", &out->runs},
        {"SELECT count(*) FROM models", &out->models},
        {"SELECT count(*) FROM shards", &out->shards},
        {"SELECT count(*) FROM games WHERE shard_id IS NOT NULL", &out->games},
        {"SELECT count(*) FROM games WHERE match_id IS NOT NULL", &out->match_games},
        {"SELECT coalesce(sum(rows), 0) FROM shards", &out->positions},
        {"SELECT coalesce(sum(bytes), 0) FROM shards", &out->shard_bytes},
        {"SELECT count(*) FROM train_steps", &out->train_steps},
        {"SELECT count(*) FROM matches", &out->matches},
        {"SELECT count(*) FROM shard_intents", &out->pending},
        {"SELECT count(*) FROM games WHERE shard_id IS NOT NULL AND result = 1", &out->black_wins},
        {"SELECT count(*) FROM games WHERE shard_id IS NOT NULL AND result = -1", &out->white_wins},
        {"SELECT count(*) FROM games WHERE shard_id IS NOT NULL AND result = 0", &out->draws},
    };
    db_status_t st = DB_OK;
    for (size_t i = 0; st == DB_OK && i < sizeof counts / sizeof counts[0]; i++)
        st = dbi_query_int(db, counts[i].sql, counts[i].dst, "summary: count");
    sqlite3_stmt *s = NULL;
    if (st == DB_OK) {
        rc = sqlite3_prepare_v2(db->sq,
                                "SELECT (SELECT id FROM models ORDER BY cycle DESC LIMIT 1),"
                                " (SELECT max(cycle) FROM models),"
                                " (SELECT max(step) FROM train_steps),"
                                " (SELECT loss_total FROM train_steps ORDER BY step DESC LIMIT 1),"
                                " (SELECT avg(plies) FROM games WHERE shard_id IS NOT NULL),"
                                " (SELECT min(created) FROM runs), (SELECT max(created) FROM runs)",
                                -1, &s, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            if (sqlite3_column_type(s, 0) != SQLITE_NULL) {
                out->latest_model_id = sqlite3_column_int64(s, 0);
                out->latest_cycle = sqlite3_column_int(s, 1);
            }
            if (sqlite3_column_type(s, 2) != SQLITE_NULL) out->last_step = sqlite3_column_int64(s, 2);
            out->last_loss_total = col_real(s, 3);
            out->avg_plies = col_real(s, 4);
            col_text(s, 5, out->first_run, sizeof out->first_run);
            col_text(s, 6, out->last_run, sizeof out->last_run);
        } else {
            st = dbi_fail(db, rc, "summary: latest figures");
        }
        sqlite3_finalize(s);
        s = NULL;
    }
    if (st == DB_OK) {
        st = dbi_prepare(db,
                         "SELECT reason, shard_id IS NOT NULL, count(*) FROM games "
                         "GROUP BY reason, shard_id IS NOT NULL",
                         &s, "summary: end reasons");
        if (st == DB_OK) st = dbi_rows_each(db, s, reason_row, out, "summary: end reasons");
        sqlite3_finalize(s);
    }
    sqlite3_exec(db->sq, "RELEASE koma_summary", NULL, NULL, NULL);
    return st;
}
