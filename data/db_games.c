/* db_games.c - koma.db's games read back: a shard's games, counts of games
 * and positions, a cycle's results, games by MPI rank.
 *
 * Owns: the game row reader (GAME_COLS into db_game_t, strings malloc'ed;
 * db_game_list_free), db_games_of_shard, db_count, db_cycle_results,
 * db_games_by_rank. Does not own: writing games (db_shards.c registers
 * self-play and imported games with their shard, db_matches.c match games),
 * the run's summary (db_metrics.c).
 */
#include "data/db_internal.h"

void db_game_list_free(db_game_list_t *l) {
    if (!l) return;
    for (int64_t i = 0; i < l->n; i++) {
        db_game_t *g = &l->games[i];
        free((void *)g->start_sfen);
        free((void *)g->moves);
        free((void *)g->black);
        free((void *)g->white);
        free((void *)g->detail);
        free((void *)g->host);
    }
    free(l->games);
    l->games = NULL;
    l->n = 0;
}

/* A row of GAME_COLS into row (db_game_t); ctx: the `what` of messages. */
static db_status_t game_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    db_game_t *g = row;
    g->id = sqlite3_column_int64(s, 0);
    g->shard_id = sqlite3_column_int64(s, 1);
    g->first_row = sqlite3_column_int64(s, 2);
    g->row_count = sqlite3_column_int64(s, 3);
    g->model_id = sqlite3_column_int64(s, 4);
    g->start_sfen = col_strdup(s, 5);
    g->moves = col_strdup(s, 6);
    g->plies = sqlite3_column_int(s, 7);
    g->result = sqlite3_column_int(s, 8);
    const unsigned char *reason = sqlite3_column_text(s, 9);
    col_text(s, 10, g->created, sizeof g->created);
    g->match_id = sqlite3_column_int64(s, 11);
    g->black = col_strdup(s, 12);
    g->white = col_strdup(s, 13);
    g->detail = col_strdup(s, 14);
    g->rank = sqlite3_column_int(s, 15);
    g->host = col_strdup(s, 16);
    if (!g->start_sfen || !g->moves || !g->black || !g->white || !g->detail || !g->host)
        return dbi_fail_with(db, DB_ERROR, "%s: out of memory", (const char *)ctx);
    if (db_reason_parse((const char *)reason, &g->reason) != 0)
        return dbi_fail_with(db, DB_CORRUPT, "read game %lld: unknown end reason '%.32s'", (long long)g->id,
                             reason ? (const char *)reason : "");
    return DB_OK;
}

db_status_t dbi_games_by_id(db_t *db, int which, int64_t id, const char *label, db_game_list_t *out) {
    if (!db || !out) return DB_INVALID;
    out->games = NULL;
    out->n = 0;
    sqlite3_stmt *s = dbi_stmt(db, which);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    char what[80];
    snprintf(what, sizeof what, "read games of %s %lld", label, (long long)id);
    dbi_array_t a;
    db_status_t st = dbi_rows_array(db, s, sizeof(db_game_t), game_row, what, what, &a);
    out->games = a.v;
    out->n = a.n;
    if (st != DB_OK) db_game_list_free(out);
    return st;
}

db_status_t db_games_of_shard(db_t *db, int64_t shard_id, db_game_list_t *out) {
    return dbi_games_by_id(db, S_GAMES_OF_SHARD, shard_id, "shard", out);
}

db_status_t db_count(db_t *db, int32_t cycle, int64_t *games, int64_t *positions) {
    if (!db) return DB_INVALID;
    sqlite3_stmt *s = dbi_stmt(db, cycle < 0 ? S_COUNT_ALL : S_COUNT_CYCLE);
    if (!s) return DB_ERROR;
    if (cycle >= 0) sqlite3_bind_int(s, 1, cycle);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
        if (games) *games = sqlite3_column_int64(s, 0);
        if (positions) *positions = sqlite3_column_int64(s, 1);
    } else {
        st = dbi_fail(db, rc, "count games and positions");
    }
    done(s);
    return st;
}

db_status_t db_cycle_results(db_t *db, int32_t cycle, int64_t *black_wins, int64_t *white_wins, int64_t *draws,
                             double *avg_plies) {
    if (!db) return DB_INVALID;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq,
                                "SELECT coalesce(sum(g.result = 1), 0), coalesce(sum(g.result = -1), 0), "
                                "coalesce(sum(g.result = 0), 0), avg(g.plies) "
                                "FROM games g JOIN shards s ON g.shard_id = s.id WHERE s.cycle = ?1",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 1, cycle);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
        if (black_wins) *black_wins = sqlite3_column_int64(s, 0);
        if (white_wins) *white_wins = sqlite3_column_int64(s, 1);
        if (draws) *draws = sqlite3_column_int64(s, 2);
        if (avg_plies) *avg_plies = sqlite3_column_type(s, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 3);
    } else {
        st = dbi_fail(db, rc, "count a cycle's results");
    }
    sqlite3_finalize(s);
    return st;
}

/* A row of db_games_by_rank's query into row (db_rank_games_t). */
static db_status_t rank_row(db_t *db, sqlite3_stmt *s, void *row, void *ctx) {
    (void)db, (void)ctx;
    db_rank_games_t *r = row;
    r->rank = sqlite3_column_int(s, 0);
    col_text(s, 1, r->host, sizeof r->host);
    r->games = sqlite3_column_int64(s, 2);
    r->positions = sqlite3_column_int64(s, 3);
    col_text(s, 4, r->first, sizeof r->first);
    col_text(s, 5, r->last, sizeof r->last);
    r->seconds = sqlite3_column_double(s, 6);
    return DB_OK;
}

db_status_t db_games_by_rank(db_t *db, db_rank_games_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL, *n = 0;
    sqlite3_stmt *s = NULL;
    dbi_array_t a = {NULL, 0};
    db_status_t st =
        dbi_prepare(db,
                    "SELECT rank, host, count(*), coalesce(sum(row_count), 0), min(created), max(created), "
                    "(julianday(max(created)) - julianday(min(created))) * 86400.0 "
                    "FROM games WHERE host IS NOT NULL AND host != '' AND match_id IS NULL "
                    "GROUP BY rank, host ORDER BY rank, host",
                    &s, "count games by rank");
    if (st == DB_OK) st = dbi_rows_array(db, s, sizeof(db_rank_games_t), rank_row, NULL, "count games by rank", &a);
    sqlite3_finalize(s);
    if (st != DB_OK) {
        free(a.v);
        return st;
    }
    *out = a.v;
    *n = (int32_t)a.n;
    return DB_OK;
}
