/* db_sql.c - the SQL of every prepared statement of koma.db (dbi_stmt_sql,
 * indexed by the S_* ids of db_internal.h).
 *
 * Owns: that text and nothing else: data below every db*.c file (db_util.c's
 * statement cache prepares it), so that no two files of data/ call each
 * other (issue 44). Does not own: the schema (db_schema.c).
 */
#include "data/db_internal.h"

/* ---- statements (ids in db_internal.h) ------------------------------------------ */
#define MODEL_COLS                                                                                                     \
    "id, coalesce(run_id, 0), cycle, features_version, path, xxh3, arch, train_steps, "                                \
    "train_samples, loss_policy, loss_value, loss_legal, loss_total, created, cpu_seconds"
#define SHARD_COLS "id, path, cycle, features_version, rows, games, pos_begin, bytes, xxh3, created"
#define MATCH_COLS                                                                                                     \
    "id, coalesce(cycle, -1), coalesce(model_a, 0), coalesce(model_b, 0), opponent, wins, draws, losses, "             \
    "elo, elo_lo, elo_hi, settings, created, engine_a, engine_b, "                                                     \
    "(SELECT count(*) FROM games g WHERE g.match_id = matches.id)"
#define GAME_COLS                                                                                                      \
    "id, coalesce(shard_id, 0), first_row, row_count, coalesce(model_id, 0), start_sfen, moves, plies, "               \
    "result, reason, created, coalesce(match_id, 0), black, white, detail, coalesce(rank, 0), host"

const char *const dbi_stmt_sql[S_NB] = {
    [S_RUN_INSERT] = "INSERT INTO runs(koma_version, command, config, cpu_seconds) VALUES(?1, ?2, ?3, 0)",
    [S_RUN_CPU_SET] = "UPDATE runs SET cpu_seconds = max(coalesce(cpu_seconds, 0), ?2) WHERE id = ?1",
    [S_RUN_CPU_SUM] = "SELECT total(cpu_seconds), count(*) - count(cpu_seconds) FROM runs WHERE id <= ?1",
    [S_RUN_LATEST] = "SELECT id, created, koma_version, command, config FROM runs ORDER BY id DESC LIMIT 1",
    [S_MODEL_INSERT] = "INSERT INTO models(run_id, cycle, features_version, path, xxh3, arch, "
                       "train_steps, train_samples, loss_policy, loss_value, loss_legal, loss_total, cpu_seconds) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [S_MODEL_LATEST] = "SELECT " MODEL_COLS " FROM models ORDER BY cycle DESC LIMIT 1",
    [S_MODEL_GET] = "SELECT " MODEL_COLS " FROM models WHERE id = ?1",
    [S_MODEL_BY_CYCLE] = "SELECT " MODEL_COLS " FROM models WHERE cycle = ?1",
    [S_SHARD_POS_END] = "SELECT pos_begin + rows FROM shards ORDER BY id DESC LIMIT 1",
    [S_SHARD_INSERT] = "INSERT INTO shards(path, cycle, features_version, rows, games, pos_begin, "
                       "bytes, xxh3) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    /* Shard games count up from 1 (see db.h). SQLite's own choice, the
     * largest id + 1, would be 0 while the only games are match games. */
    [S_GAME_INSERT] = "INSERT INTO games(id, shard_id, first_row, row_count, model_id, start_sfen, "
                      "moves, plies, result, reason, black, white, detail, rank, host) "
                      "VALUES((SELECT max(coalesce(max(id), 0), 0) + 1 FROM games), ?1, ?2, ?3, ?4, ?5, ?6, "
                      "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [S_INTENT_INSERT] = "INSERT OR REPLACE INTO shard_intents(path, pid) VALUES(?1, ?2)",
    [S_INTENT_DELETE] = "DELETE FROM shard_intents WHERE path = ?1",
    [S_SHARD_GET] = "SELECT " SHARD_COLS " FROM shards WHERE id = ?1",
    [S_SHARD_BY_PATH] = "SELECT id FROM shards WHERE path = ?1",
    [S_SHARDS_DESC] = "SELECT " SHARD_COLS " FROM shards ORDER BY id DESC",
    [S_GAMES_OF_SHARD] = "SELECT " GAME_COLS " FROM games WHERE shard_id = ?1 ORDER BY first_row, id",
    [S_COUNT_ALL] = "SELECT coalesce(sum(games), 0), coalesce(sum(rows), 0) FROM shards",
    [S_COUNT_CYCLE] = "SELECT coalesce(sum(games), 0), coalesce(sum(rows), 0) FROM shards WHERE cycle = ?1",
    [S_STEP_INSERT] = "INSERT OR REPLACE INTO train_steps(step, cycle, time, lr, samples, "
                      "loss_policy, loss_value, loss_legal, loss_total, acc_policy, acc_value, "
                      "acc_legal, grad_norm) VALUES(?1, ?2, "
                      "coalesce(?3, (julianday('now') - 2440587.5) * 86400.0), ?4, ?5, ?6, ?7, "
                      "?8, ?9, ?10, ?11, ?12, ?13)",
    [S_STEPS_GET] = "SELECT step, cycle, time, lr, samples, loss_policy, loss_value, loss_legal, "
                    "loss_total, acc_policy, acc_value, acc_legal, grad_norm FROM train_steps "
                    "WHERE step >= ?1 AND step < ?2 ORDER BY step LIMIT ?3",
    [S_CYCLE_PUT] = "INSERT OR REPLACE INTO cycle_metrics(cycle, model_id, started, finished, "
                    "games, positions, selfplay_s, train_s, positions_per_s, evals_per_s, "
                    "avg_batch, busy_pct, avg_plies, black_wins, white_wins, draws, elo, elo_lo, "
                    "elo_hi, no_resign_games, would_resign, false_resign, resign_threshold) "
                    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                    "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)",
    [S_CYCLE_GET] = "SELECT cycle, coalesce(model_id, 0), started, finished, games, positions, "
                    "selfplay_s, train_s, positions_per_s, evals_per_s, avg_batch, busy_pct, "
                    "avg_plies, black_wins, white_wins, draws, elo, elo_lo, elo_hi, "
                    "coalesce(no_resign_games, -1), coalesce(would_resign, -1), "
                    "coalesce(false_resign, -1), resign_threshold "
                    "FROM cycle_metrics WHERE cycle = ?1",
    [S_MATCH_INSERT] = "INSERT INTO matches(cycle, model_a, model_b, opponent, wins, draws, "
                       "losses, elo, elo_lo, elo_hi, settings, engine_a, engine_b) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [S_MATCHES_ALL] = "SELECT " MATCH_COLS " FROM matches ORDER BY id",
    [S_MATCHES_CYCLE] = "SELECT " MATCH_COLS " FROM matches WHERE cycle = ?1 ORDER BY id",
    [S_MATCH_GET] = "SELECT " MATCH_COLS " FROM matches WHERE id = ?1",
    /* Match games count down from -1 (see db.h); the write lock makes min(id) safe. */
    [S_MATCH_GAME_INSERT] = "INSERT INTO games(id, match_id, first_row, row_count, start_sfen, moves, plies, "
                            "result, reason, black, white, detail) "
                            "VALUES((SELECT min(coalesce(min(id), 0), 0) - 1 FROM games), ?1, 0, 0, ?2, ?3, ?4, "
                            "?5, ?6, ?7, ?8, ?9)",
    /* ?2 black, ?3 white, ?4 result (Black's side) */
    [S_MATCH_TALLY] = "UPDATE matches SET "
                      "wins = wins + (CASE WHEN engine_a = ?2 THEN ?4 ELSE -?4 END > 0), "
                      "draws = draws + (?4 = 0), "
                      "losses = losses + (CASE WHEN engine_a = ?2 THEN ?4 ELSE -?4 END < 0), "
                      "elo = NULL, elo_lo = NULL, elo_hi = NULL "
                      "WHERE id = ?1 AND engine_a <> '' AND engine_a <> engine_b AND engine_a IN (?2, ?3)",
    [S_MATCH_FINISH] = "UPDATE matches SET wins = ?2, draws = ?3, losses = ?4, elo = ?5, elo_lo = ?6, "
                       "elo_hi = ?7 WHERE id = ?1",
    [S_MATCH_GAMES] = "SELECT " GAME_COLS " FROM games WHERE match_id = ?1 ORDER BY id DESC",
    [S_MATCH_MOVE_GAMES] = "UPDATE games SET match_id = ?2 WHERE match_id = ?1",
    [S_MATCH_DELETE] = "DELETE FROM matches WHERE id = ?1",
};
