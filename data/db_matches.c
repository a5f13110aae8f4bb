/* db_matches.c - koma.db's matches: evaluation and usi-match results, from
 * player A's side, and the games played in them.
 *
 * Owns: a match's row (inserted whole, or begun and then finished), its
 * games recorded one by one (ids -1, -2, ... and the W/D/L tally in the same
 * transaction), moving the games of one match into another, the lists of
 * matches and of a match's games. Does not own: playing the games and the
 * Elo figures (match/), self-play games (db_shards.c), the ratings written
 * per cycle (db_metrics.c).
 */
#include "data/db_internal.h"

/* ---- matches ------------------------------------------------------------------ */
static void bind_name(sqlite3_stmt *s, int i, const char *t, size_t max) {
    sqlite3_bind_text(s, i, t, (int)strnlen(t, max - 1), SQLITE_STATIC);
}

static db_status_t match_insert(db_t *db, db_match_t *m, const char *what) {
    if (!db || !m) return DB_INVALID;
    if (m->model_a <= 0 && !m->engine_a[0])
        return dbi_fail_with(db, DB_INVALID, "%s: player A is neither a model (model_a) nor named (engine_a)", what);
    if (m->wins < 0 || m->draws < 0 || m->losses < 0)
        return dbi_fail_with(db, DB_INVALID, "%s: negative W/D/L %d/%d/%d", what, m->wins, m->draws, m->losses);
    sqlite3_stmt *s = dbi_stmt(db, S_MATCH_INSERT);
    if (!s) return DB_ERROR;
    if (m->model_a > 0 && m->cycle >= 0) sqlite3_bind_int(s, 1, m->cycle);
    else sqlite3_bind_null(s, 1);
    bind_id(s, 2, m->model_a);
    bind_id(s, 3, m->model_b);
    bind_name(s, 4, m->opponent, sizeof m->opponent);
    sqlite3_bind_int(s, 5, m->wins);
    sqlite3_bind_int(s, 6, m->draws);
    sqlite3_bind_int(s, 7, m->losses);
    bind_real(s, 8, m->elo);
    bind_real(s, 9, m->elo_lo);
    bind_real(s, 10, m->elo_hi);
    bind_name(s, 11, m->settings, sizeof m->settings);
    bind_name(s, 12, m->engine_a, sizeof m->engine_a);
    bind_name(s, 13, m->engine_b, sizeof m->engine_b);
    db_status_t st = dbi_run_stmt(db, s, what);
    if (st == DB_OK) {
        m->id = sqlite3_last_insert_rowid(db->sq);
        if (m->model_a <= 0) m->cycle = -1;
    }
    return st;
}

static void match_what(char *buf, size_t len, const char *verb, const db_match_t *m) {
    if (m->model_a > 0) dbi_msgf(buf, len, "%s match of model %lld (cycle %d)", verb, (long long)m->model_a, m->cycle);
    else dbi_msgf(buf, len, "%s match of '%.64s'", verb, m->engine_a);
}

db_status_t db_match_insert(db_t *db, db_match_t *m) {
    if (!db || !m) return DB_INVALID;
    char what[128];
    match_what(what, sizeof what, "insert", m);
    return match_insert(db, m, what);
}

db_status_t db_match_begin(db_t *db, db_match_t *m) {
    if (!db || !m) return DB_INVALID;
    m->wins = m->draws = m->losses = 0;
    m->elo = m->elo_lo = m->elo_hi = NAN;
    m->games = 0;
    char what[128];
    match_what(what, sizeof what, "begin", m);
    return match_insert(db, m, what);
}

/* A row of MATCH_COLS into row (db_match_t). */
static db_status_t match_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    db_match_t *m = row;
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(s, 0);
    m->cycle = sqlite3_column_int(s, 1);
    m->model_a = sqlite3_column_int64(s, 2);
    m->model_b = sqlite3_column_int64(s, 3);
    col_text(s, 4, m->opponent, sizeof m->opponent);
    m->wins = sqlite3_column_int(s, 5);
    m->draws = sqlite3_column_int(s, 6);
    m->losses = sqlite3_column_int(s, 7);
    m->elo = col_real(s, 8);
    m->elo_lo = col_real(s, 9);
    m->elo_hi = col_real(s, 10);
    col_text(s, 11, m->settings, sizeof m->settings);
    col_text(s, 12, m->created, sizeof m->created);
    col_text(s, 13, m->engine_a, sizeof m->engine_a);
    col_text(s, 14, m->engine_b, sizeof m->engine_b);
    m->games = sqlite3_column_int64(s, 15);
    return DB_OK;
}

db_status_t db_match_get(db_t *db, int64_t id, db_match_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, S_MATCH_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    char what[48], missing[64];
    snprintf(what, sizeof what, "read match %lld", (long long)id);
    snprintf(missing, sizeof missing, "%s: no such match", what);
    return dbi_row_one(db, s, match_row, out, what, missing);
}

/* DB_OK if row id of matches exists, DB_NOTFOUND (with `what` in the message) if not. */
static db_status_t match_exists(db_t *db, int64_t id, const char *what) {
    sqlite3_stmt *s = dbi_stmt(db, S_MATCH_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    char step[160], missing[160];
    dbi_msgf(step, sizeof step, "%s: read match %lld", what, (long long)id);
    dbi_msgf(missing, sizeof missing, "%s: no match %lld", what, (long long)id);
    return dbi_row_one(db, s, NULL, NULL, step, missing);
}

db_status_t db_match_game_insert(db_t *db, int64_t match_id, db_game_t *g) {
    if (!db || !g) return DB_INVALID;
    char what[96];
    snprintf(what, sizeof what, "insert a game of match %lld", (long long)match_id);
    if (match_id <= 0) return dbi_fail_with(db, DB_INVALID, "%s: no match id", what);
    if (g->result < -1 || g->result > 1)
        return dbi_fail_with(db, DB_INVALID, "%s: result %d (want -1, 0 or 1)", what, g->result);
    if ((unsigned)g->reason >= DB_REASON_NB)
        return dbi_fail_with(db, DB_INVALID, "%s: unknown end reason %d", what, (int)g->reason);
    if (g->plies < 0 || !g->start_sfen || !g->moves)
        return dbi_fail_with(db, DB_INVALID, "%s: no start position, no moves or negative plies", what);
    int outer;
    db_status_t st = dbi_tx_begin(db, &outer);
    if (st != DB_OK) return st;
    st = match_exists(db, match_id, what);
    sqlite3_stmt *s = st == DB_OK ? dbi_stmt(db, S_MATCH_GAME_INSERT) : NULL;
    if (st == DB_OK && !s) st = DB_ERROR;
    int64_t id = 0;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, match_id);
        bind_text(s, 2, g->start_sfen);
        bind_text(s, 3, g->moves);
        sqlite3_bind_int(s, 4, g->plies);
        sqlite3_bind_int(s, 5, g->result);
        bind_text(s, 6, db_reason_name(g->reason));
        bind_text(s, 7, g->black);
        bind_text(s, 8, g->white);
        bind_text(s, 9, g->detail);
        st = dbi_run_stmt(db, s, what);
        id = sqlite3_last_insert_rowid(db->sq);
    }
    if (st == DB_OK && !(s = dbi_stmt(db, S_MATCH_TALLY))) st = DB_ERROR;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, match_id);
        bind_text(s, 2, g->black);
        bind_text(s, 3, g->white);
        sqlite3_bind_int(s, 4, g->result);
        st = dbi_run_stmt(db, s, "add the game to its match's W/D/L");
    }
    st = dbi_tx_end(db, outer, st);
    if (st == DB_OK) {
        g->id = id;
        g->match_id = match_id;
        g->shard_id = 0;
    }
    return st;
}

db_status_t db_match_finish(db_t *db, const db_match_t *m) {
    if (!db || !m) return DB_INVALID;
    char what[64];
    snprintf(what, sizeof what, "finish match %lld", (long long)m->id);
    if (m->wins < 0 || m->draws < 0 || m->losses < 0)
        return dbi_fail_with(db, DB_INVALID, "%s: negative W/D/L %d/%d/%d", what, m->wins, m->draws, m->losses);
    sqlite3_stmt *s = dbi_stmt(db, S_MATCH_FINISH);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, m->id);
    sqlite3_bind_int(s, 2, m->wins);
    sqlite3_bind_int(s, 3, m->draws);
    sqlite3_bind_int(s, 4, m->losses);
    bind_real(s, 5, m->elo);
    bind_real(s, 6, m->elo_lo);
    bind_real(s, 7, m->elo_hi);
    db_status_t st = dbi_run_stmt(db, s, what);
    if (st == DB_OK && sqlite3_changes(db->sq) == 0) st = dbi_fail_with(db, DB_NOTFOUND, "%s: no such match", what);
    return st;
}

db_status_t db_match_move_games(db_t *db, int64_t from_id, int64_t into_id) {
    if (!db) return DB_INVALID;
    char what[96];
    snprintf(what, sizeof what, "move the games of match %lld to match %lld", (long long)from_id, (long long)into_id);
    if (from_id <= 0 || into_id <= 0 || from_id == into_id)
        return dbi_fail_with(db, DB_INVALID, "%s: two different match ids needed", what);
    int outer;
    db_status_t st = dbi_tx_begin(db, &outer);
    if (st != DB_OK) return st;
    st = match_exists(db, from_id, what);
    if (st == DB_OK) st = match_exists(db, into_id, what);
    sqlite3_stmt *s = st == DB_OK ? dbi_stmt(db, S_MATCH_MOVE_GAMES) : NULL;
    if (st == DB_OK && !s) st = DB_ERROR;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, from_id);
        sqlite3_bind_int64(s, 2, into_id);
        st = dbi_run_stmt(db, s, what);
    }
    if (st == DB_OK && !(s = dbi_stmt(db, S_MATCH_DELETE))) st = DB_ERROR;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, from_id);
        st = dbi_run_stmt(db, s, what);
    }
    return dbi_tx_end(db, outer, st);
}

db_status_t db_matches_list(db_t *db, int32_t cycle, db_match_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = dbi_stmt(db, cycle < 0 ? S_MATCHES_ALL : S_MATCHES_CYCLE);
    if (!s) return DB_ERROR;
    if (cycle >= 0) sqlite3_bind_int(s, 1, cycle);
    dbi_array_t a;
    db_status_t st = dbi_rows_array(db, s, sizeof(db_match_t), match_row, NULL, "list matches", &a);
    if (st != DB_OK) {
        free(a.v);
        return st;
    }
    *out = a.v;
    *n = (int32_t)a.n;
    return DB_OK;
}

db_status_t db_match_games_list(db_t *db, int64_t match_id, db_game_list_t *out) {
    return dbi_games_by_id(db, S_MATCH_GAMES, match_id, "match", out);
}
