/* db.c - koma.db: schema v5, open/version check, typed inserts and queries,
 * the shard registration protocol and the start-up file check. See db.h.
 *
 * Every statement is prepared once per connection (stmt()) and reset after
 * use. Every failure goes through fail(), which writes
 * "<db path>: <step>: <sqlite message>" into db->err and maps the SQLite code
 * to a db_status_t.
 */
#include "data/db.h"

#include "compat/compat.h"

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define BUSY_TIMEOUT_MS 10000

/* ---- schema ---------------------------------------------------------------- */
#define NOW_ISO "(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"

/* Version 1: creates every table of an empty database. Kept as it was
 * released: a new database is created at version 1 and then migrated, so
 * every database, new or old, reaches the current schema by one path. */
static const char schema_v1[] =
    /* One row per invocation of a command on this run directory. */
    "CREATE TABLE runs ("
    "  id           INTEGER PRIMARY KEY,"
    "  created      TEXT NOT NULL DEFAULT " NOW_ISO ","
    "  koma_version TEXT NOT NULL,"
    "  command      TEXT NOT NULL,"
    "  config       TEXT NOT NULL);"
    /* One published net per cycle; path relative to the run directory. */
    "CREATE TABLE models ("
    "  id               INTEGER PRIMARY KEY,"
    "  run_id           INTEGER REFERENCES runs(id),"
    "  cycle            INTEGER NOT NULL UNIQUE CHECK (cycle >= 0),"
    "  path             TEXT NOT NULL UNIQUE,"
    "  xxh3             TEXT NOT NULL CHECK (length(xxh3) = 16),"
    "  features_version INTEGER NOT NULL,"
    "  arch             TEXT NOT NULL DEFAULT '',"
    "  train_steps      INTEGER NOT NULL DEFAULT 0,"
    "  train_samples    INTEGER NOT NULL DEFAULT 0,"
    "  loss_policy REAL, loss_value REAL, loss_legal REAL, loss_total REAL,"
    "  created          TEXT NOT NULL DEFAULT " NOW_ISO ");"
    /* Shard files; pos_begin numbers every position of the run globally. */
    "CREATE TABLE shards ("
    "  id               INTEGER PRIMARY KEY,"
    "  path             TEXT NOT NULL UNIQUE,"
    "  cycle            INTEGER NOT NULL,"
    "  features_version INTEGER NOT NULL,"
    "  rows             INTEGER NOT NULL CHECK (rows >= 0),"
    "  games            INTEGER NOT NULL CHECK (games >= 0),"
    "  pos_begin        INTEGER NOT NULL CHECK (pos_begin >= 0),"
    "  bytes            INTEGER NOT NULL CHECK (bytes >= 0),"
    "  xxh3             TEXT NOT NULL CHECK (length(xxh3) = 16),"
    "  created          TEXT NOT NULL DEFAULT " NOW_ISO ");"
    "CREATE INDEX shards_cycle ON shards(cycle);"
    /* Files about to be written and not yet registered (db_shard_intent). */
    "CREATE TABLE shard_intents ("
    "  path    TEXT PRIMARY KEY,"
    "  pid     INTEGER NOT NULL,"
    "  created TEXT NOT NULL DEFAULT " NOW_ISO ");"
    /* Games; result from Black's side: 1 Black wins, -1 White wins, 0 draw. */
    "CREATE TABLE games ("
    "  id         INTEGER PRIMARY KEY,"
    "  shard_id   INTEGER NOT NULL REFERENCES shards(id),"
    "  first_row  INTEGER NOT NULL CHECK (first_row >= 0),"
    "  row_count  INTEGER NOT NULL CHECK (row_count >= 0),"
    "  model_id   INTEGER REFERENCES models(id),"
    "  start_sfen TEXT NOT NULL,"
    "  moves      TEXT NOT NULL,"
    "  plies      INTEGER NOT NULL CHECK (plies >= 0),"
    "  result     INTEGER NOT NULL CHECK (result IN (-1, 0, 1)),"
    "  reason     TEXT NOT NULL,"
    "  created    TEXT NOT NULL DEFAULT " NOW_ISO ");"
    "CREATE INDEX games_shard ON games(shard_id, first_row);"
    "CREATE INDEX games_model ON games(model_id);"
    "CREATE TABLE train_steps ("
    "  step        INTEGER PRIMARY KEY,"
    "  cycle       INTEGER NOT NULL,"
    "  time        REAL NOT NULL,"
    "  lr          REAL NOT NULL,"
    "  samples     INTEGER NOT NULL DEFAULT 0,"
    "  loss_policy REAL, loss_value REAL, loss_legal REAL, loss_total REAL,"
    "  acc_policy  REAL, acc_value REAL, acc_legal REAL,"
    "  grad_norm   REAL);"
    "CREATE INDEX train_steps_cycle ON train_steps(cycle);"
    "CREATE TABLE cycle_metrics ("
    "  cycle           INTEGER PRIMARY KEY,"
    "  model_id        INTEGER REFERENCES models(id),"
    "  started REAL, finished REAL,"
    "  games INTEGER NOT NULL DEFAULT 0, positions INTEGER NOT NULL DEFAULT 0,"
    "  selfplay_s REAL, train_s REAL,"
    "  positions_per_s REAL, evals_per_s REAL, avg_batch REAL, busy_pct REAL, avg_plies REAL,"
    "  black_wins INTEGER NOT NULL DEFAULT 0, white_wins INTEGER NOT NULL DEFAULT 0,"
    "  draws INTEGER NOT NULL DEFAULT 0,"
    "  elo REAL, elo_lo REAL, elo_hi REAL);"
    /* Evaluation matches, from model_a's side; model_b NULL = external engine. */
    "CREATE TABLE matches ("
    "  id       INTEGER PRIMARY KEY,"
    "  cycle    INTEGER NOT NULL,"
    "  model_a  INTEGER NOT NULL REFERENCES models(id),"
    "  model_b  INTEGER REFERENCES models(id),"
    "  opponent TEXT NOT NULL DEFAULT '',"
    "  wins     INTEGER NOT NULL CHECK (wins >= 0),"
    "  draws    INTEGER NOT NULL CHECK (draws >= 0),"
    "  losses   INTEGER NOT NULL CHECK (losses >= 0),"
    "  elo REAL, elo_lo REAL, elo_hi REAL,"
    "  settings TEXT NOT NULL DEFAULT '',"
    "  created  TEXT NOT NULL DEFAULT " NOW_ISO ");"
    "CREATE INDEX matches_cycle ON matches(cycle);"
    "CREATE INDEX matches_models ON matches(model_a, model_b);";

/* Version 2: match games in `games`, outside engines in `matches`.
 *  - games.shard_id NULL-able; games.match_id (matches); black / white (the
 *    players' names) and detail (how it ended, in words); a game is in
 *    exactly one of a shard or a match; match games have ids < 0 and no rows,
 *    shard games ids > 0 (see db.h);
 *  - matches.model_a and matches.cycle NULL-able (A is not a net of this
 *    run); engine_a / engine_b (the players' names as in games.black/white);
 *    A is a model or has a name;
 *  - the view match_games: the match games with the columns of the table
 *    selfplay/referee.c created before v2 (read by tests and by hand).
 * SQLite cannot change a column's NOT NULL or add a CHECK, so `matches` and
 * `games` are rebuilt (https://www.sqlite.org/lang_altertable.html, "Making
 * Other Kinds Of Table Schema Changes"): with foreign keys off (check_schema
 * turns them off outside the transaction), in the migration's transaction:
 * create the new table, copy, drop the old one, rename the new one, recreate
 * its indexes; then PRAGMA foreign_key_check must find nothing. New columns
 * come after the v1 ones. A later migration that rebuilds `games` must drop
 * the view first and create it again. */
static const char v2_matches[] =
    "CREATE TABLE matches_v2 ("
    "  id       INTEGER PRIMARY KEY,"
    "  cycle    INTEGER,"
    "  model_a  INTEGER REFERENCES models(id),"
    "  model_b  INTEGER REFERENCES models(id),"
    "  opponent TEXT NOT NULL DEFAULT '',"
    "  wins     INTEGER NOT NULL CHECK (wins >= 0),"
    "  draws    INTEGER NOT NULL CHECK (draws >= 0),"
    "  losses   INTEGER NOT NULL CHECK (losses >= 0),"
    "  elo REAL, elo_lo REAL, elo_hi REAL,"
    "  settings TEXT NOT NULL DEFAULT '',"
    "  created  TEXT NOT NULL DEFAULT " NOW_ISO ","
    "  engine_a TEXT NOT NULL DEFAULT '',"
    "  engine_b TEXT NOT NULL DEFAULT '',"
    "  CHECK (model_a IS NOT NULL OR engine_a <> ''),"
    "  CHECK (cycle IS NULL OR model_a IS NOT NULL));"
    "INSERT INTO matches_v2 (id, cycle, model_a, model_b, opponent, wins, draws, losses, elo, elo_lo, elo_hi,"
    "  settings, created) "
    "SELECT id, cycle, model_a, model_b, opponent, wins, draws, losses, elo, elo_lo, elo_hi, settings, created "
    "FROM matches;"
    "DROP TABLE matches;"
    "ALTER TABLE matches_v2 RENAME TO matches;"
    "CREATE INDEX matches_cycle ON matches(cycle);"
    "CREATE INDEX matches_models ON matches(model_a, model_b);";

static const char v2_games[] =
    "CREATE TABLE games_v2 ("
    "  id         INTEGER PRIMARY KEY,"
    "  shard_id   INTEGER REFERENCES shards(id),"
    "  first_row  INTEGER NOT NULL CHECK (first_row >= 0),"
    "  row_count  INTEGER NOT NULL CHECK (row_count >= 0),"
    "  model_id   INTEGER REFERENCES models(id),"
    "  start_sfen TEXT NOT NULL,"
    "  moves      TEXT NOT NULL,"
    "  plies      INTEGER NOT NULL CHECK (plies >= 0),"
    "  result     INTEGER NOT NULL CHECK (result IN (-1, 0, 1)),"
    "  reason     TEXT NOT NULL,"
    "  created    TEXT NOT NULL DEFAULT " NOW_ISO ","
    "  match_id   INTEGER REFERENCES matches(id),"
    "  black      TEXT NOT NULL DEFAULT '',"
    "  white      TEXT NOT NULL DEFAULT '',"
    "  detail     TEXT NOT NULL DEFAULT '',"
    /* self-play or imported (in a shard), or played in a match: one of the two */
    "  CHECK ((shard_id IS NULL) <> (match_id IS NULL)),"
    "  CHECK (shard_id IS NULL OR id > 0),"
    "  CHECK (match_id IS NULL OR (id < 0 AND first_row = 0 AND row_count = 0)));"
    "INSERT INTO games_v2 (id, shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason,"
    "  created) "
    "SELECT id, shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason, created "
    "FROM games;"
    "DROP TABLE games;"
    "ALTER TABLE games_v2 RENAME TO games;"
    "CREATE INDEX games_shard ON games(shard_id, first_row);"
    "CREATE INDEX games_model ON games(model_id);"
    "CREATE INDEX games_match ON games(match_id);";

/* Version 3: cycle_metrics records the resignation check of self-play (the
 * no-resign games, selfplay/game.h): how many games of the cycle could not
 * resign, in how many of them a side would have resigned, in how many of
 * those that side then did not lose, and the resign threshold in use. Rows
 * written before v3 have NULL there (not recorded). ADD COLUMN keeps every
 * row as it is; the CHECKs hold for NULL too. */
static const char v3_cycle_metrics[] =
    "ALTER TABLE cycle_metrics ADD COLUMN no_resign_games INTEGER CHECK (no_resign_games >= 0);"
    "ALTER TABLE cycle_metrics ADD COLUMN would_resign INTEGER "
    "  CHECK (would_resign >= 0 AND would_resign <= no_resign_games);"
    "ALTER TABLE cycle_metrics ADD COLUMN false_resign INTEGER "
    "  CHECK (false_resign >= 0 AND false_resign <= would_resign);"
    "ALTER TABLE cycle_metrics ADD COLUMN resign_threshold REAL;";

/* Version 4: one unit for the resign threshold. Self-play took W-L in
 * [-2, 1] (<= -1: never resign) where the USI engine takes a win probability
 * in [0, 1]; both now take the win probability p = (1 + W-L) / 2, 0 meaning
 * never. The thresholds recorded in cycle_metrics are converted: t <= -1
 * becomes 0 (off), anything else (1 + t) / 2; NULL stays not recorded. */
static const char v4_resign_threshold[] =
    "UPDATE cycle_metrics SET resign_threshold = "
    "  CASE WHEN resign_threshold <= -1.0 THEN 0.0 ELSE (1.0 + resign_threshold) / 2.0 END "
    "WHERE resign_threshold IS NOT NULL;";

/* Version 5: the rank and host that played each self-play game (selfplay
 * under mpirun). NULL in older rows, imports and match games. */
static const char v5_games[] =
    "ALTER TABLE games ADD COLUMN rank INTEGER CHECK (rank >= 0);"
    "ALTER TABLE games ADD COLUMN host TEXT;";

/* The rows of the interim table match_games (selfplay/referee.c before v2:
 * session, match_id, black, white, start_sfen, moves, plies, result, reason,
 * detail, created), when a v1 file has one. Games already attached to a
 * matches row go to that match. The others (a match with no model of the
 * run, or one killed before its end) get a new matches row per session (one
 * invocation of usi-match or of the evaluation): A = the Black player of the
 * session's first game, B = its White player, W/D/L counted from the games,
 * settings = the session, no Elo (SQL has no logarithm: shown unrated).
 * Ids: -(the interim id), which keeps their order. %lld: the highest matches
 * id before these rows. */
static const char v2_interim_matches[] =
    "INSERT INTO matches (cycle, model_a, model_b, opponent, wins, draws, losses, settings, created, engine_a,"
    "  engine_b) "
    "SELECT NULL, NULL, NULL, f.white, "
    "  (SELECT count(*) FROM match_games g WHERE g.session = f.session AND g.match_id IS NULL AND"
    "     ((g.black = f.black AND g.result = 1) OR (g.black <> f.black AND g.result = -1))),"
    "  (SELECT count(*) FROM match_games g WHERE g.session = f.session AND g.match_id IS NULL AND g.result = 0),"
    "  (SELECT count(*) FROM match_games g WHERE g.session = f.session AND g.match_id IS NULL AND"
    "     ((g.black = f.black AND g.result = -1) OR (g.black <> f.black AND g.result = 1))),"
    "  f.session, f.created, CASE WHEN f.black <> '' THEN f.black ELSE '?' END, f.white "
    "FROM match_games f WHERE f.match_id IS NULL AND "
    "  f.id = (SELECT min(id) FROM match_games x WHERE x.session = f.session AND x.match_id IS NULL) "
    "ORDER BY f.id;";
static const char v2_interim_games[] =
    "INSERT INTO games (id, shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason,"
    "  created, match_id, black, white, detail) "
    "SELECT -g.id, NULL, 0, 0, NULL, g.start_sfen, g.moves, g.plies, g.result, g.reason, g.created, "
    "  coalesce(g.match_id, (SELECT min(m.id) FROM matches m WHERE m.id > %lld AND m.settings = g.session)), "
    "  g.black, g.white, g.detail "
    "FROM match_games g ORDER BY g.id;"
    "DROP TABLE match_games;";

static const char v2_view[] =
    "CREATE VIEW match_games AS "
    "SELECT id, match_id, black, white, start_sfen, moves, plies, result, reason, detail, created "
    "FROM games WHERE match_id IS NOT NULL;";

/* ---- statements -------------------------------------------------------------- */
enum {
    S_RUN_INSERT,
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

#define MODEL_COLS                                                                          \
    "id, coalesce(run_id, 0), cycle, features_version, path, xxh3, arch, train_steps, "    \
    "train_samples, loss_policy, loss_value, loss_legal, loss_total, created"
#define SHARD_COLS "id, path, cycle, features_version, rows, games, pos_begin, bytes, xxh3, created"
#define MATCH_COLS                                                                                    \
    "id, coalesce(cycle, -1), coalesce(model_a, 0), coalesce(model_b, 0), opponent, wins, draws, losses, " \
    "elo, elo_lo, elo_hi, settings, created, engine_a, engine_b, "                                        \
    "(SELECT count(*) FROM games g WHERE g.match_id = matches.id)"
#define GAME_COLS                                                                                     \
    "id, coalesce(shard_id, 0), first_row, row_count, coalesce(model_id, 0), start_sfen, moves, plies, " \
    "result, reason, created, coalesce(match_id, 0), black, white, detail, coalesce(rank, 0), host"

static const char *const stmt_sql[S_NB] = {
    [S_RUN_INSERT] = "INSERT INTO runs(koma_version, command, config) VALUES(?1, ?2, ?3)",
    [S_RUN_LATEST] = "SELECT id, created, koma_version, command, config FROM runs ORDER BY id DESC LIMIT 1",
    [S_MODEL_INSERT] = "INSERT INTO models(run_id, cycle, features_version, path, xxh3, arch, "
                       "train_steps, train_samples, loss_policy, loss_value, loss_legal, loss_total) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
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
    [DB_REASON_CHECKMATE] = "checkmate",       [DB_REASON_RESIGN] = "resign",
    [DB_REASON_SENNICHITE] = "sennichite",     [DB_REASON_PERPETUAL_CHECK] = "perpetual_check",
    [DB_REASON_DECLARATION] = "declaration",   [DB_REASON_MAX_PLY] = "max_ply",
    [DB_REASON_ILLEGAL_MOVE] = "illegal_move", [DB_REASON_TIME] = "time",
    [DB_REASON_ABORT] = "abort",
};

const char *db_reason_name(db_reason_t r) {
    return (unsigned)r < DB_REASON_NB ? reason_names[r] : "?";
}

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
static db_status_t fail(db_t *db, int rc, const char *fmt, ...) {
    char step[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(step, sizeof step, fmt, ap);
    va_end(ap);
    db_status_t s = status_of(rc);
    if (s == DB_OK) s = DB_ERROR;
    const char *msg = db->sq ? sqlite3_errmsg(db->sq) : sqlite3_errstr(rc);
    if (s == DB_FULL)
        snprintf(db->err, sizeof db->err,
                 "%s: %s: %s: the disk is full; free some space and start again (the run resumes)",
                 db->path, step, msg);
    else
        snprintf(db->err, sizeof db->err, "%s: %s: %s (%s)", db->path, step, msg, sqlite3_errstr(rc));
    return s;
}

/* A failure that is not SQLite's (bad argument, file I/O). */
static db_status_t fail_with(db_t *db, db_status_t s, const char *fmt, ...) {
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
static sqlite3_stmt *stmt(db_t *db, int id) {
    if (!db->stmt[id]) {
        int rc = sqlite3_prepare_v3(db->sq, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                    &db->stmt[id], NULL);
        if (rc != SQLITE_OK) {
            fail(db, rc, "prepare statement %d", id);
            db->stmt[id] = NULL;
            return NULL;
        }
    }
    return db->stmt[id];
}

static void done(sqlite3_stmt *s) {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

static void bind_real(sqlite3_stmt *s, int i, double v) {
    if (isnan(v)) sqlite3_bind_null(s, i);
    else sqlite3_bind_double(s, i, v);
}
static void bind_id(sqlite3_stmt *s, int i, int64_t id) {
    if (id > 0) sqlite3_bind_int64(s, i, id);
    else sqlite3_bind_null(s, i);
}
static void bind_text(sqlite3_stmt *s, int i, const char *t) {
    sqlite3_bind_text(s, i, t ? t : "", -1, SQLITE_STATIC);
}
static double col_real(sqlite3_stmt *s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}
static void col_text(sqlite3_stmt *s, int i, char *dst, size_t len) {
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, len, "%s", t ? (const char *)t : "");
}
static char *col_strdup(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return strdup(t ? (const char *)t : "");
}

/* Steps a statement that returns no rows, then resets it. */
static db_status_t run_stmt(db_t *db, sqlite3_stmt *s, const char *step) {
    int rc = sqlite3_step(s);
    db_status_t st = rc == SQLITE_DONE ? DB_OK : fail(db, rc, "%s", step);
    done(s);
    return st;
}

db_status_t db_exec(db_t *db, const char *sql) {
    if (!db || !sql) return DB_INVALID;
    int rc = sqlite3_exec(db->sq, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return fail(db, rc, "exec '%.80s'", sql);
    return DB_OK;
}

/* One integer from a one-row query, e.g. a PRAGMA. */
static db_status_t query_int(db_t *db, const char *sql, int64_t *out, const char *step) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return fail(db, rc, "%s", step);
    rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(s, 0);
    else st = rc == SQLITE_DONE ? fail_with(db, DB_ERROR, "%s: no row", step) : fail(db, rc, "%s", step);
    sqlite3_finalize(s);
    return st;
}

/* ---- transactions --------------------------------------------------------------- */
db_status_t db_begin(db_t *db) {
    if (!db) return DB_INVALID;
    int rc = sqlite3_exec(db->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : fail(db, rc, "begin transaction");
}

db_status_t db_commit(db_t *db) {
    if (!db) return DB_INVALID;
    int rc = sqlite3_exec(db->sq, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return DB_OK;
    db_status_t st = fail(db, rc, "commit");
    if (!sqlite3_get_autocommit(db->sq)) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

db_status_t db_rollback(db_t *db) {
    if (!db) return DB_INVALID;
    if (sqlite3_get_autocommit(db->sq)) return DB_OK; /* nothing open (SQLite may have rolled back already) */
    int rc = sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : fail(db, rc, "rollback");
}

/* A writer's own transaction, or a savepoint inside the caller's. */
static db_status_t tx_begin(db_t *db, int *outer) {
    *outer = sqlite3_get_autocommit(db->sq);
    int rc = sqlite3_exec(db->sq, *outer ? "BEGIN IMMEDIATE" : "SAVEPOINT koma_tx", NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : fail(db, rc, "begin transaction");
}

/* Commits (st == DB_OK) or rolls back; returns the final status. The error
 * message of a failure in the body is kept. */
static db_status_t tx_end(db_t *db, int outer, db_status_t st) {
    if (st == DB_OK) {
        int rc = sqlite3_exec(db->sq, outer ? "COMMIT" : "RELEASE koma_tx", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return DB_OK;
        st = fail(db, rc, "commit");
    }
    if (outer) {
        if (!sqlite3_get_autocommit(db->sq)) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
    } else {
        sqlite3_exec(db->sq, "ROLLBACK TO koma_tx; RELEASE koma_tx", NULL, NULL, NULL);
    }
    return st;
}

/* ---- open / close ---------------------------------------------------------------- */
void db_close(db_t *db) {
    if (!db) return;
    for (int i = 0; i < S_NB; i++) sqlite3_finalize(db->stmt[i]);
    if (db->sq) sqlite3_close(db->sq);
    free(db->path);
    free(db);
}

/* ---- migrations ------------------------------------------------------------------ */
static db_status_t exec_step(db_t *db, const char *sql, const char *step) {
    int rc = sqlite3_exec(db->sq, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : fail(db, rc, "%s", step);
}

/* Version 0 (an empty file) -> 1. */
static db_status_t create_v1(db_t *db) { return exec_step(db, schema_v1, "create the schema (version 1)"); }

/* Version 1 -> 2, inside check_schema's transaction, foreign keys off. */
static db_status_t migrate_v1_v2(db_t *db) {
    db_status_t st = exec_step(db, v2_matches, "upgrade to version 2: rebuild matches");
    if (st == DB_OK) st = exec_step(db, v2_games, "upgrade to version 2: rebuild games");
    int64_t interim = 0, last_match = 0;
    if (st == DB_OK)
        st = query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'match_games'",
                       &interim, "upgrade to version 2: look for match_games");
    if (st == DB_OK && interim) {
        st = query_int(db, "SELECT coalesce(max(id), 0) FROM matches", &last_match,
                       "upgrade to version 2: read the matches");
        if (st == DB_OK) st = exec_step(db, v2_interim_matches, "upgrade to version 2: matches of match_games");
        if (st == DB_OK) {
            char sql[sizeof v2_interim_games + 32];
            snprintf(sql, sizeof sql, v2_interim_games, (long long)last_match);
            st = exec_step(db, sql, "upgrade to version 2: copy match_games into games");
        }
    }
    if (st == DB_OK) st = exec_step(db, v2_view, "upgrade to version 2: create the view match_games");
    if (st != DB_OK) return st;
    /* Every reference still resolves (the tables were rebuilt with foreign keys off). */
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq, "PRAGMA foreign_key_check", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const unsigned char *table = sqlite3_column_text(s, 0), *parent = sqlite3_column_text(s, 2);
        st = fail_with(db, DB_CONSTRAINT,
                       "upgrade to version 2: foreign key check: %s row %lld refers to a missing row of %s", table ? (const char *)table : "?", (long long)sqlite3_column_int64(s, 1),
                       parent ? (const char *)parent : "?");
    } else if (rc != SQLITE_DONE) {
        st = fail(db, rc, "upgrade to version 2: foreign key check");
    }
    sqlite3_finalize(s);
    return st;
}

/* Version 2 -> 3, inside check_schema's transaction. */
static db_status_t migrate_v2_v3(db_t *db) {
    return exec_step(db, v3_cycle_metrics, "upgrade to version 3: resignation figures in cycle_metrics");
}

/* Version 3 -> 4, inside check_schema's transaction. */
static db_status_t migrate_v3_v4(db_t *db) {
    return exec_step(db, v4_resign_threshold, "upgrade to version 4: resign threshold as a win probability");
}

/* Version 4 -> 5, inside check_schema's transaction. */
static db_status_t migrate_v4_v5(db_t *db) {
    return exec_step(db, v5_games, "upgrade to version 5: rank and host of each game");
}

/* migrations[v] upgrades a version-v database to v+1; index 0 creates an
 * empty database (at version 1, then migrated like any v1 file). */
typedef db_status_t (*migration_fn)(db_t *db);
static const migration_fn migrations[DB_SCHEMA_VERSION] = {create_v1, migrate_v1_v2, migrate_v2_v3, migrate_v3_v4, migrate_v4_v5};

static db_status_t check_schema(db_t *db) {
    int64_t app = 0, ver = 0, objects = 0;
    db_status_t st = query_int(db, "PRAGMA application_id", &app, "read application_id");
    if (st == DB_OK) st = query_int(db, "PRAGMA user_version", &ver, "read schema version");
    if (st != DB_OK) return st;
    if (app != 0 && app != DB_APPLICATION_ID)
        return fail_with(db, DB_SCHEMA, "not a Koma database (application_id 0x%08llx)",
                         (unsigned long long)app);
    if (ver > DB_SCHEMA_VERSION)
        return fail_with(db, DB_SCHEMA,
                         "schema version %lld is newer than this build of Koma understands (%d); "
                         "use a newer koma",
                         (long long)ver, DB_SCHEMA_VERSION);
    if (ver < 0)
        return fail_with(db, DB_SCHEMA, "unknown schema version %lld (this build knows 1..%d)",
                         (long long)ver, DB_SCHEMA_VERSION);
    if (ver == DB_SCHEMA_VERSION) {
        if (app != DB_APPLICATION_ID)
            return fail_with(db, DB_SCHEMA, "not a Koma database (application_id 0x%08llx with schema version %lld)",
                             (unsigned long long)app, (long long)ver);
        db->version = (int32_t)ver;
        return DB_OK;
    }
    /* ver == 0 (new file) or an older version: create or migrate. */
    if ((db->flags & DB_OPEN_READONLY) && ver == 0)
        return fail_with(db, DB_SCHEMA, "not a Koma database (no schema version; opened read-only)");
    if (db->flags & DB_OPEN_READONLY) {
        db->older_version = (int32_t)ver;
        return fail_with(db, DB_SCHEMA,
                         "schema version %lld needs migrating to %d: open the run with a Koma program that writes "
                         "(selfplay, train) or with DB_OPEN_MIGRATE (inspect and report do)",
                         (long long)ver, DB_SCHEMA_VERSION);
    }
    if ((db->flags & DB_OPEN_NOCREATE_) && ver == 0)
        return fail_with(db, DB_SCHEMA, "not a Koma database (no schema version)");
    /* Tables are rebuilt with foreign keys off (the pragma is a no-op inside a
     * transaction); db_open turns them on again. */
    if ((st = db_exec(db, "PRAGMA foreign_keys = OFF")) != DB_OK) return st;
    if ((st = db_begin(db)) != DB_OK) return st;
    /* Read again inside the write lock: another process may have created or migrated it. */
    st = query_int(db, "PRAGMA user_version", &ver, "read schema version");
    if (st == DB_OK && ver == 0) {
        st = query_int(db, "SELECT count(*) FROM sqlite_master", &objects, "inspect an unversioned database");
        if (st == DB_OK && objects > 0)
            st = fail_with(db, DB_SCHEMA, "not a Koma database (%lld schema objects but no schema version)",
                           (long long)objects);
    }
    for (int64_t v = ver; st == DB_OK && v < DB_SCHEMA_VERSION; v++) st = migrations[v](db);
    if (st == DB_OK) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 DB_APPLICATION_ID, DB_SCHEMA_VERSION);
        int rc = sqlite3_exec(db->sq, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) st = fail(db, rc, "set schema version");
    }
    if (st != DB_OK) {
        char keep[DB_ERR_MAX];
        memcpy(keep, db->err, sizeof keep);
        db_rollback(db);
        memcpy(db->err, keep, sizeof keep);
        return st;
    }
    if ((st = db_commit(db)) != DB_OK) return st;
    db->version = DB_SCHEMA_VERSION;
    return DB_OK;
}

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
        else
            out[n++] = (char)*p;
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
        if (err && errlen)
            snprintf(err, errlen,
                     "%s: on a read-only file system or in a directory this user cannot write, and %s still holds "
                     "transactions (the run was not closed cleanly): it cannot be read without writing; copy the "
                     "run directory to a writable place and read it there",
                     path, wal);
        return -1;
    }
    if (immutable_uri(path, uri, urilen) != 0) {
        if (err && errlen) snprintf(err, errlen, "%s: path too long", path);
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
        if (err && errlen) snprintf(err, errlen, "%s: is a directory, not a database", path);
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
        if (err && errlen)
            snprintf(err, errlen, "%s: %s (%s)", path, st == DB_CORRUPT ? "not a database, or a corrupt one" : "cannot read",
                     sq ? sqlite3_errmsg(sq) : sqlite3_errstr(rc));
    } else if (v[0] != 0 && v[0] != DB_APPLICATION_ID) {
        st = DB_SCHEMA;
        if (err && errlen) snprintf(err, errlen, "%s: not a Koma database (application_id 0x%08llx)", path,
                                    (unsigned long long)v[0]);
    } else if (v[1] == 0 && v[2] > 0) {
        st = DB_SCHEMA;
        if (err && errlen) snprintf(err, errlen, "%s: not a Koma database (%lld schema objects but no schema version)",
                                    path, (long long)v[2]);
    } else if (v[1] < 0 || v[1] > DB_SCHEMA_VERSION) {
        st = DB_SCHEMA;
        if (err && errlen)
            snprintf(err, errlen, "%s: schema version %lld is not one this build of Koma understands (1..%d)", path,
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
        if (err && errlen) snprintf(err, errlen, "%s: db_open: no path or result", path ? path : "(null)");
        return DB_INVALID;
    }
    if (compat_check_regular_file(path, err, errlen) != 0) return DB_INVALID;
    db_t *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) {
        if (err && errlen) snprintf(err, errlen, "%s: out of memory", path);
        free(db);
        return DB_ERROR;
    }
    db->flags = flags;
    int oflags = (flags & DB_OPEN_READONLY)   ? SQLITE_OPEN_READONLY
                 : (flags & DB_OPEN_NOCREATE_) ? SQLITE_OPEN_READWRITE
                                               : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    char uri[DB_PATH_MAX + 1200];
    int route = flags & DB_OPEN_READONLY ? reader_route(path, uri, sizeof uri, err, errlen) : 0;
    if (route < 0) {
        db_close(db);
        return DB_ERROR;
    }
    if (!(flags & DB_OPEN_READONLY) && compat_file_exists(path) && (on_readonly_media(path) || !compat_can_write(path))) {
        if (err && errlen)
            snprintf(err, errlen,
                     "%s: %s: a program that writes to it (selfplay, train, import, usi-match recording a match) "
                     "cannot use it; copy the run directory to a writable place (inspect, report and koma read it "
                     "where it is)",
                     path, compat_fs_readonly(path) ? "on a read-only file system"
                           : compat_can_write(path) ? "in a directory this user cannot write (permissions)"
                                                    : "a read-only file (permissions)");
        db_close(db);
        return DB_ERROR;
    }
    int rc = route == 1 ? sqlite3_open_v2(uri, &db->sq, oflags | SQLITE_OPEN_URI, NULL)
                        : sqlite3_open_v2(path, &db->sq, oflags, NULL);
    db_status_t st = DB_OK;
    if (rc != SQLITE_OK) st = fail(db, rc, "open");
    if (st == DB_OK) sqlite3_busy_timeout(db->sq, BUSY_TIMEOUT_MS);
    /* The schema first: another program's database is refused untouched. */
    if (st == DB_OK) st = check_schema(db);
    if (st == DB_OK && !(flags & DB_OPEN_READONLY)) {
        /* Persistent in the file; needs no open transaction. */
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(db->sq, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(s);
        if (rc != SQLITE_ROW) {
            st = fail(db, rc, "enable the WAL journal");
        } else {
            const unsigned char *mode = sqlite3_column_text(s, 0);
            if (!mode || strcmp((const char *)mode, "wal") != 0)
                st = fail_with(db, DB_ERROR, "enable the WAL journal: the file system refused (journal mode '%s')",
                               mode ? (const char *)mode : "?");
        }
        sqlite3_finalize(s);
    }
    if (st == DB_OK) st = db_exec(db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON");
    if (st != DB_OK) {
        if (err && errlen) snprintf(err, errlen, "%s", db->err);
        if (older_version) *older_version = db->older_version;
        db_close(db);
        return st;
    }
    *out = db;
    return DB_OK;
}

/* ---- runs ---------------------------------------------------------------------- */
db_status_t db_run_insert(db_t *db, const char *koma_version, const char *command,
                          const char *config, int64_t *id) {
    if (!db) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, S_RUN_INSERT);
    if (!s) return DB_ERROR;
    bind_text(s, 1, koma_version);
    bind_text(s, 2, command);
    bind_text(s, 3, config);
    db_status_t st = run_stmt(db, s, "insert run");
    if (st == DB_OK && id) *id = sqlite3_last_insert_rowid(db->sq);
    return st;
}

db_status_t db_run_latest(db_t *db, db_run_t *out) {
    if (!db || !out) return DB_INVALID;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = stmt(db, S_RUN_LATEST);
    if (!s) return DB_ERROR;
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(s, 0);
        col_text(s, 1, out->created, sizeof out->created);
        col_text(s, 2, out->koma_version, sizeof out->koma_version);
        col_text(s, 3, out->command, sizeof out->command);
        out->config = col_strdup(s, 4);
        if (!out->config) st = fail_with(db, DB_ERROR, "read run: out of memory");
    } else {
        st = rc == SQLITE_DONE ? fail_with(db, DB_NOTFOUND, "no runs") : fail(db, rc, "read latest run");
    }
    done(s);
    return st;
}

void db_run_clear(db_run_t *r) {
    if (!r) return;
    free(r->config);
    r->config = NULL;
}

/* ---- models -------------------------------------------------------------------- */
static int is_hex16(const char *s) {
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[16] == 0;
}

static int path_ok(const char *p) {
    size_t n = strnlen(p, DB_PATH_MAX);
    return n > 0 && n < DB_PATH_MAX && p[0] != '/';
}

db_status_t db_model_insert(db_t *db, db_model_t *m) {
    if (!db || !m) return DB_INVALID;
    if (!path_ok(m->path))
        return fail_with(db, DB_INVALID, "insert model of cycle %d: path '%.64s' is empty, absolute or too long",
                         m->cycle, m->path);
    if (!is_hex16(m->xxh3))
        return fail_with(db, DB_INVALID, "insert model '%s': checksum '%.20s' is not 16 lowercase hex digits",
                         m->path, m->xxh3);
    sqlite3_stmt *s = stmt(db, S_MODEL_INSERT);
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
    char step[DB_PATH_MAX + 64];
    snprintf(step, sizeof step, "insert model '%s' (cycle %d)", m->path, m->cycle);
    db_status_t st = run_stmt(db, s, step);
    if (st == DB_OK) m->id = sqlite3_last_insert_rowid(db->sq);
    return st;
}

static db_status_t read_model(db_t *db, sqlite3_stmt *s, db_model_t *out, const char *what) {
    memset(out, 0, sizeof *out);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
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
    } else {
        st = rc == SQLITE_DONE ? fail_with(db, DB_NOTFOUND, "%s: no such model", what) : fail(db, rc, "%s", what);
    }
    done(s);
    return st;
}

db_status_t db_model_latest(db_t *db, db_model_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, S_MODEL_LATEST);
    return s ? read_model(db, s, out, "read latest model") : DB_ERROR;
}

db_status_t db_model_get(db_t *db, int64_t id, db_model_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, S_MODEL_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    return read_model(db, s, out, "read model by id");
}

db_status_t db_model_by_cycle(db_t *db, int32_t cycle, db_model_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, S_MODEL_BY_CYCLE);
    if (!s) return DB_ERROR;
    sqlite3_bind_int(s, 1, cycle);
    return read_model(db, s, out, "read model by cycle");
}

/* ---- shards and games -------------------------------------------------------- */
static db_status_t intent_delete(db_t *db, const char *rel_path) {
    sqlite3_stmt *s = stmt(db, S_INTENT_DELETE);
    if (!s) return DB_ERROR;
    bind_text(s, 1, rel_path);
    return run_stmt(db, s, "clear shard intent");
}

db_status_t db_shard_intent(db_t *db, const char *rel_path) {
    if (!db || !rel_path) return DB_INVALID;
    if (!path_ok(rel_path))
        return fail_with(db, DB_INVALID, "shard intent: path '%.64s' is empty, absolute or too long", rel_path);
    sqlite3_stmt *s = stmt(db, S_INTENT_INSERT);
    if (!s) return DB_ERROR;
    bind_text(s, 1, rel_path);
    sqlite3_bind_int(s, 2, compat_getpid());
    char step[DB_PATH_MAX + 64];
    snprintf(step, sizeof step, "record intent to write shard '%s'", rel_path);
    return run_stmt(db, s, step);
}

static db_status_t check_shard_args(db_t *db, const db_shard_t *sh, const db_game_t *games, int32_t n) {
    if (!path_ok(sh->path))
        return fail_with(db, DB_INVALID, "insert shard: path '%.64s' is empty, absolute or too long", sh->path);
    if (!is_hex16(sh->xxh3))
        return fail_with(db, DB_INVALID, "insert shard '%s': checksum '%.20s' is not 16 lowercase hex digits",
                         sh->path, sh->xxh3);
    if (sh->rows < 0 || sh->bytes < 0 || n < 0 || (n > 0 && !games))
        return fail_with(db, DB_INVALID, "insert shard '%s': negative rows, bytes or game count", sh->path);
    for (int32_t i = 0; i < n; i++) {
        const db_game_t *g = &games[i];
        if (g->first_row < 0 || g->row_count < 0 || g->first_row > sh->rows - g->row_count)
            return fail_with(db, DB_INVALID, "insert shard '%s': game %d has rows [%lld, %lld+%lld) outside the shard's %lld rows",
                             sh->path, i, (long long)g->first_row, (long long)g->first_row,
                             (long long)g->row_count, (long long)sh->rows);
        if (g->result < -1 || g->result > 1)
            return fail_with(db, DB_INVALID, "insert shard '%s': game %d has result %d (want -1, 0 or 1)",
                             sh->path, i, g->result);
        if ((unsigned)g->reason >= DB_REASON_NB)
            return fail_with(db, DB_INVALID, "insert shard '%s': game %d has an unknown end reason %d",
                             sh->path, i, (int)g->reason);
        if (g->plies < 0 || !g->start_sfen || !g->moves)
            return fail_with(db, DB_INVALID, "insert shard '%s': game %d has no start position, no moves or negative plies",
                             sh->path, i);
    }
    return DB_OK;
}

db_status_t db_shard_insert(db_t *db, db_shard_t *sh, db_game_t *games, int32_t n) {
    if (!db || !sh) return DB_INVALID;
    db_status_t st = check_shard_args(db, sh, games, n);
    if (st != DB_OK) return st;
    int outer;
    if ((st = tx_begin(db, &outer)) != DB_OK) return st;

    int64_t pos_begin = 0;
    sqlite3_stmt *s = stmt(db, S_SHARD_POS_END);
    if (!s) st = DB_ERROR;
    if (st == DB_OK) {
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) pos_begin = sqlite3_column_int64(s, 0);
        else if (rc != SQLITE_DONE) st = fail(db, rc, "insert shard '%s': read the position count", sh->path);
        done(s);
    }
    if (st == DB_OK && !(s = stmt(db, S_SHARD_INSERT))) st = DB_ERROR;
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
        st = run_stmt(db, s, step);
        shard_id = sqlite3_last_insert_rowid(db->sq);
    }
    if (st == DB_OK && !(s = stmt(db, S_GAME_INSERT))) st = DB_ERROR;
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
        st = run_stmt(db, s, step);
        g->id = sqlite3_last_insert_rowid(db->sq);
        g->shard_id = shard_id;
        g->match_id = 0;
    }
    if (st == DB_OK) st = intent_delete(db, sh->path);
    st = tx_end(db, outer, st);
    if (st == DB_OK) {
        sh->id = shard_id;
        sh->games = n;
        sh->pos_begin = pos_begin;
    } else {
        for (int32_t i = 0; i < n; i++) games[i].id = games[i].shard_id = 0;
    }
    return st;
}

/* snprintf for messages that may be cut short (no truncation warning). */
static void msgf(char *dst, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

#define RUN_DIR_MAX 1000 /* join_path buffers are DB_PATH_MAX + 1024 */

static void join_path(char *out, size_t len, const char *dir, const char *rel) {
    if (!dir || !dir[0]) snprintf(out, len, "%s", rel);
    else snprintf(out, len, "%s/%s", dir, rel);
}

int db_file_xxh3(const char *path, uint64_t *hash, int64_t *bytes, char *err, size_t errlen) {
    if (compat_check_regular_file(path, err, errlen) != 0) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err && errlen) snprintf(err, errlen, "%s: cannot open for checksum", path);
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
            snprintf(err, errlen, "%s: read error while hashing", path);
        }
    } else if (err && errlen) {
        snprintf(err, errlen, "%s: out of memory for checksum", path);
    }
    free(buf);
    XXH3_freeState(x);
    fclose(f);
    return rc;
}

db_status_t db_shard_commit(db_t *db, const char *run_dir, db_shard_t *sh, db_game_t *games,
                            int32_t n, db_shard_write_fn write, void *arg) {
    if (!db || !sh || !write) return DB_INVALID;
    if (!path_ok(sh->path))
        return fail_with(db, DB_INVALID, "commit shard: path '%.64s' is empty, absolute or too long", sh->path);
    if (run_dir && strlen(run_dir) > RUN_DIR_MAX)
        return fail_with(db, DB_INVALID, "commit shard: run directory path longer than %d bytes", RUN_DIR_MAX);
    char abs[DB_PATH_MAX + 1024];
    join_path(abs, sizeof abs, run_dir, sh->path);
    /* Never write over a file: a registered one would lose its data, an
     * unregistered one is an orphan for db_check_shards to look at. */
    sqlite3_stmt *s = stmt(db, S_SHARD_BY_PATH);
    if (!s) return DB_ERROR;
    bind_text(s, 1, sh->path);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW)
        st = fail_with(db, DB_CONSTRAINT, "commit shard '%s': a shard of that path is already registered", sh->path);
    else if (rc != SQLITE_DONE)
        st = fail(db, rc, "commit shard '%s': look up the path", sh->path);
    done(s);
    if (st != DB_OK) return st;
    if (compat_file_exists(abs))
        return fail_with(db, DB_CONSTRAINT, "commit shard: %s already exists but is not registered (run the start-up check)", abs);
    if ((st = db_shard_intent(db, sh->path)) != DB_OK) return st;
    char err[DB_ERR_MAX] = "";
    int wrc = write(abs, arg, err, sizeof err);
    if (wrc != 0) {
        st = wrc < 0 && wrc >= DB_TIMEOUT ? (db_status_t)wrc : DB_ERROR;
        /* the shard file failed, not the database: name the file */
        snprintf(db->err, sizeof db->err, "%.300s: the shard could not be written: %s%.300s%s", abs,
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
        st = fail_with(db, DB_ERROR, "register shard: %s", err);
    } else {
        snprintf(sh->xxh3, sizeof sh->xxh3, "%016llx", (unsigned long long)h);
        st = db_shard_insert(db, sh, games, n);
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

static db_status_t read_shard_row(sqlite3_stmt *s, db_shard_t *out) {
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
    sqlite3_stmt *s = stmt(db, S_SHARD_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    db_status_t st = rc == SQLITE_ROW   ? read_shard_row(s, out)
                     : rc == SQLITE_DONE ? fail_with(db, DB_NOTFOUND, "read shard %lld: no such shard", (long long)id)
                                         : fail(db, rc, "read shard %lld", (long long)id);
    done(s);
    return st;
}

db_status_t db_shards_recent(db_t *db, int64_t min_rows, db_shard_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = stmt(db, S_SHARDS_DESC);
    if (!s) return DB_ERROR;
    db_shard_t *v = NULL;
    int32_t cnt = 0, cap = 0;
    int64_t rows = 0;
    db_status_t st = DB_OK;
    int rc = SQLITE_DONE;
    while ((min_rows <= 0 || rows < min_rows) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? 2 * cap : 64;
            db_shard_t *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) {
                st = fail_with(db, DB_ERROR, "list shards: out of memory");
                break;
            }
            v = nv;
        }
        read_shard_row(s, &v[cnt]);
        rows += v[cnt].rows;
        cnt++;
    }
    if (st == DB_OK && (min_rows <= 0 || rows < min_rows) && rc != SQLITE_DONE) st = fail(db, rc, "list shards");
    done(s);
    if (st != DB_OK) {
        free(v);
        return st;
    }
    for (int32_t i = 0; i < cnt / 2; i++) { /* newest first -> oldest first */
        db_shard_t t = v[i];
        v[i] = v[cnt - 1 - i];
        v[cnt - 1 - i] = t;
    }
    *out = v;
    *n = cnt;
    return DB_OK;
}

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

/* Reads the rows of s (GAME_COLS) into out; `what` names them in messages. */
static db_status_t read_games(db_t *db, sqlite3_stmt *s, db_game_list_t *out, const char *what) {
    out->games = NULL;
    out->n = 0;
    int64_t cap = 0;
    db_status_t st = DB_OK;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (out->n == cap) {
            cap = cap ? 2 * cap : 64;
            db_game_t *ng = realloc(out->games, (size_t)cap * sizeof *ng);
            if (!ng) {
                st = fail_with(db, DB_ERROR, "read %s: out of memory", what);
                break;
            }
            out->games = ng;
        }
        db_game_t *g = &out->games[out->n];
        memset(g, 0, sizeof *g);
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
        out->n++;
        if (!g->start_sfen || !g->moves || !g->black || !g->white || !g->detail || !g->host) {
            st = fail_with(db, DB_ERROR, "read %s: out of memory", what);
            break;
        }
        if (db_reason_parse((const char *)reason, &g->reason) != 0) {
            st = fail_with(db, DB_CORRUPT, "read game %lld: unknown end reason '%.32s'", (long long)g->id,
                           reason ? (const char *)reason : "");
            break;
        }
    }
    if (st == DB_OK && rc != SQLITE_DONE) st = fail(db, rc, "read %s", what);
    done(s);
    if (st != DB_OK) db_game_list_free(out);
    return st;
}

/* Games selected by one statement that takes one id (a shard's, a match's). */
static db_status_t list_games_by_id(db_t *db, int which, int64_t id, const char *label, db_game_list_t *out) {
    if (!db || !out) return DB_INVALID;
    out->games = NULL;
    out->n = 0;
    sqlite3_stmt *s = stmt(db, which);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    char what[64];
    snprintf(what, sizeof what, "games of %s %lld", label, (long long)id);
    return read_games(db, s, out, what);
}

db_status_t db_games_of_shard(db_t *db, int64_t shard_id, db_game_list_t *out) {
    return list_games_by_id(db, S_GAMES_OF_SHARD, shard_id, "shard", out);
}

db_status_t db_count(db_t *db, int32_t cycle, int64_t *games, int64_t *positions) {
    if (!db) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, cycle < 0 ? S_COUNT_ALL : S_COUNT_CYCLE);
    if (!s) return DB_ERROR;
    if (cycle >= 0) sqlite3_bind_int(s, 1, cycle);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
        if (games) *games = sqlite3_column_int64(s, 0);
        if (positions) *positions = sqlite3_column_int64(s, 1);
    } else {
        st = fail(db, rc, "count games and positions");
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
        st = fail(db, rc, "count a cycle's results");
    }
    sqlite3_finalize(s);
    return st;
}

db_status_t db_games_by_rank(db_t *db, db_rank_games_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL, *n = 0;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq,
                                "SELECT rank, host, count(*), coalesce(sum(row_count), 0), min(created), max(created), "
                                "(julianday(max(created)) - julianday(min(created))) * 86400.0 "
                                "FROM games WHERE host IS NOT NULL AND host != '' AND match_id IS NULL "
                                "GROUP BY rank, host ORDER BY rank, host",
                                -1, &s, NULL);
    db_status_t st = DB_OK;
    int32_t cap = 0;
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step(s)) != SQLITE_ROW) break;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            db_rank_games_t *grown = realloc(*out, (size_t)cap * sizeof **out);
            if (!grown) {
                st = fail_with(db, DB_ERROR, "games by rank: out of memory");
                break;
            }
            *out = grown;
        }
        db_rank_games_t *r = &(*out)[(*n)++];
        memset(r, 0, sizeof *r);
        r->rank = sqlite3_column_int(s, 0);
        const unsigned char *t = sqlite3_column_text(s, 1);
        snprintf(r->host, sizeof r->host, "%s", t ? (const char *)t : "");
        r->games = sqlite3_column_int64(s, 2);
        r->positions = sqlite3_column_int64(s, 3);
        t = sqlite3_column_text(s, 4);
        snprintf(r->first, sizeof r->first, "%s", t ? (const char *)t : "");
        t = sqlite3_column_text(s, 5);
        snprintf(r->last, sizeof r->last, "%s", t ? (const char *)t : "");
        r->seconds = sqlite3_column_double(s, 6);
    }
    if (st == DB_OK && rc != SQLITE_DONE) st = fail(db, rc, "count games by rank");
    sqlite3_finalize(s);
    if (st != DB_OK) {
        free(*out);
        *out = NULL, *n = 0;
    }
    return st;
}

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
            st = fail_with(db, DB_CORRUPT, "%s: %s; the database is damaged: restore it from a backup "
                           "(sqlite3's .recover can save what is readable)",
                           full ? "integrity check" : "quick check", first);
    } else {
        st = fail(db, rc, full ? "integrity check" : "quick check");
    }
    sqlite3_finalize(s);
    return st;
}

/* ---- metrics ------------------------------------------------------------------ */
db_status_t db_train_steps_insert(db_t *db, const db_train_step_t *rows, int32_t n) {
    if (!db || n < 0 || (n > 0 && !rows)) return DB_INVALID;
    if (n == 0) return DB_OK;
    int outer;
    db_status_t st = tx_begin(db, &outer);
    if (st != DB_OK) return st;
    sqlite3_stmt *s = stmt(db, S_STEP_INSERT);
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
        st = run_stmt(db, s, step);
    }
    return tx_end(db, outer, st);
}

db_status_t db_train_steps_get(db_t *db, int64_t from, int64_t to, db_train_step_t *rows,
                               int32_t max, int32_t *n) {
    if (!db || !n || max < 0 || (max > 0 && !rows)) return DB_INVALID;
    *n = 0;
    sqlite3_stmt *s = stmt(db, S_STEPS_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, from);
    sqlite3_bind_int64(s, 2, to);
    sqlite3_bind_int(s, 3, max);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        db_train_step_t *r = &rows[(*n)++];
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
    }
    db_status_t st = rc == SQLITE_DONE ? DB_OK : fail(db, rc, "read train steps");
    done(s);
    return st;
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
        return fail_with(db, DB_INVALID,
                         "write metrics of cycle %d: resignation figures do not nest: %lld false of %lld would-be "
                         "resignations in %lld no-resign games",
                         m->cycle, (long long)fr, (long long)wr, (long long)nr);
    sqlite3_stmt *s = stmt(db, S_CYCLE_PUT);
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
    return run_stmt(db, s, step);
}

db_status_t db_cycle_metrics_get_or_init(db_t *db, int32_t cycle, db_cycle_metrics_t *out) {
    db_status_t st = db_cycle_metrics_get(db, cycle, out);
    if (st == DB_NOTFOUND) {
        db_cycle_metrics_init(out, cycle);
        st = DB_OK;
    }
    return st;
}

db_status_t db_cycle_metrics_get(db_t *db, int32_t cycle, db_cycle_metrics_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, S_CYCLE_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int(s, 1, cycle);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) {
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
    } else {
        st = rc == SQLITE_DONE ? fail_with(db, DB_NOTFOUND, "no metrics for cycle %d", cycle)
                               : fail(db, rc, "read metrics of cycle %d", cycle);
    }
    done(s);
    return st;
}

/* ---- matches ------------------------------------------------------------------ */
static void bind_name(sqlite3_stmt *s, int i, const char *t, size_t max) {
    sqlite3_bind_text(s, i, t, (int)strnlen(t, max - 1), SQLITE_STATIC);
}

static db_status_t match_insert(db_t *db, db_match_t *m, const char *what) {
    if (!db || !m) return DB_INVALID;
    if (m->model_a <= 0 && !m->engine_a[0])
        return fail_with(db, DB_INVALID, "%s: player A is neither a model (model_a) nor named (engine_a)", what);
    if (m->wins < 0 || m->draws < 0 || m->losses < 0)
        return fail_with(db, DB_INVALID, "%s: negative W/D/L %d/%d/%d", what, m->wins, m->draws, m->losses);
    sqlite3_stmt *s = stmt(db, S_MATCH_INSERT);
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
    db_status_t st = run_stmt(db, s, what);
    if (st == DB_OK) {
        m->id = sqlite3_last_insert_rowid(db->sq);
        if (m->model_a <= 0) m->cycle = -1;
    }
    return st;
}

static void match_what(char *buf, size_t len, const char *verb, const db_match_t *m) {
    if (m->model_a > 0) msgf(buf, len, "%s match of model %lld (cycle %d)", verb, (long long)m->model_a, m->cycle);
    else msgf(buf, len, "%s match of '%.64s'", verb, m->engine_a);
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

static void read_match_row(sqlite3_stmt *s, db_match_t *m) {
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
}

db_status_t db_match_get(db_t *db, int64_t id, db_match_t *out) {
    if (!db || !out) return DB_INVALID;
    sqlite3_stmt *s = stmt(db, S_MATCH_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    db_status_t st = DB_OK;
    if (rc == SQLITE_ROW) read_match_row(s, out);
    else if (rc == SQLITE_DONE) st = fail_with(db, DB_NOTFOUND, "read match %lld: no such match", (long long)id);
    else st = fail(db, rc, "read match %lld", (long long)id);
    done(s);
    return st;
}

/* DB_OK if row id of matches exists, DB_NOTFOUND (with `what` in the message) if not. */
static db_status_t match_exists(db_t *db, int64_t id, const char *what) {
    sqlite3_stmt *s = stmt(db, S_MATCH_GET);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    db_status_t st = rc == SQLITE_ROW    ? DB_OK
                     : rc == SQLITE_DONE ? fail_with(db, DB_NOTFOUND, "%s: no match %lld", what, (long long)id)
                                         : fail(db, rc, "%s: read match %lld", what, (long long)id);
    done(s);
    return st;
}

db_status_t db_match_game_insert(db_t *db, int64_t match_id, db_game_t *g) {
    if (!db || !g) return DB_INVALID;
    char what[96];
    snprintf(what, sizeof what, "insert a game of match %lld", (long long)match_id);
    if (match_id <= 0) return fail_with(db, DB_INVALID, "%s: no match id", what);
    if (g->result < -1 || g->result > 1)
        return fail_with(db, DB_INVALID, "%s: result %d (want -1, 0 or 1)", what, g->result);
    if ((unsigned)g->reason >= DB_REASON_NB)
        return fail_with(db, DB_INVALID, "%s: unknown end reason %d", what, (int)g->reason);
    if (g->plies < 0 || !g->start_sfen || !g->moves)
        return fail_with(db, DB_INVALID, "%s: no start position, no moves or negative plies", what);
    int outer;
    db_status_t st = tx_begin(db, &outer);
    if (st != DB_OK) return st;
    st = match_exists(db, match_id, what);
    sqlite3_stmt *s = st == DB_OK ? stmt(db, S_MATCH_GAME_INSERT) : NULL;
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
        st = run_stmt(db, s, what);
        id = sqlite3_last_insert_rowid(db->sq);
    }
    if (st == DB_OK && !(s = stmt(db, S_MATCH_TALLY))) st = DB_ERROR;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, match_id);
        bind_text(s, 2, g->black);
        bind_text(s, 3, g->white);
        sqlite3_bind_int(s, 4, g->result);
        st = run_stmt(db, s, "add the game to its match's W/D/L");
    }
    st = tx_end(db, outer, st);
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
        return fail_with(db, DB_INVALID, "%s: negative W/D/L %d/%d/%d", what, m->wins, m->draws, m->losses);
    sqlite3_stmt *s = stmt(db, S_MATCH_FINISH);
    if (!s) return DB_ERROR;
    sqlite3_bind_int64(s, 1, m->id);
    sqlite3_bind_int(s, 2, m->wins);
    sqlite3_bind_int(s, 3, m->draws);
    sqlite3_bind_int(s, 4, m->losses);
    bind_real(s, 5, m->elo);
    bind_real(s, 6, m->elo_lo);
    bind_real(s, 7, m->elo_hi);
    db_status_t st = run_stmt(db, s, what);
    if (st == DB_OK && sqlite3_changes(db->sq) == 0) st = fail_with(db, DB_NOTFOUND, "%s: no such match", what);
    return st;
}

db_status_t db_match_move_games(db_t *db, int64_t from_id, int64_t into_id) {
    if (!db) return DB_INVALID;
    char what[96];
    snprintf(what, sizeof what, "move the games of match %lld to match %lld", (long long)from_id, (long long)into_id);
    if (from_id <= 0 || into_id <= 0 || from_id == into_id)
        return fail_with(db, DB_INVALID, "%s: two different match ids needed", what);
    int outer;
    db_status_t st = tx_begin(db, &outer);
    if (st != DB_OK) return st;
    st = match_exists(db, from_id, what);
    if (st == DB_OK) st = match_exists(db, into_id, what);
    sqlite3_stmt *s = st == DB_OK ? stmt(db, S_MATCH_MOVE_GAMES) : NULL;
    if (st == DB_OK && !s) st = DB_ERROR;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, from_id);
        sqlite3_bind_int64(s, 2, into_id);
        st = run_stmt(db, s, what);
    }
    if (st == DB_OK && !(s = stmt(db, S_MATCH_DELETE))) st = DB_ERROR;
    if (st == DB_OK) {
        sqlite3_bind_int64(s, 1, from_id);
        st = run_stmt(db, s, what);
    }
    return tx_end(db, outer, st);
}

db_status_t db_matches_list(db_t *db, int32_t cycle, db_match_t **out, int32_t *n) {
    if (!db || !out || !n) return DB_INVALID;
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = stmt(db, cycle < 0 ? S_MATCHES_ALL : S_MATCHES_CYCLE);
    if (!s) return DB_ERROR;
    if (cycle >= 0) sqlite3_bind_int(s, 1, cycle);
    db_match_t *v = NULL;
    int32_t cnt = 0, cap = 0;
    db_status_t st = DB_OK;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? 2 * cap : 16;
            db_match_t *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) {
                st = fail_with(db, DB_ERROR, "list matches: out of memory");
                break;
            }
            v = nv;
        }
        read_match_row(s, &v[cnt++]);
    }
    if (st == DB_OK && rc != SQLITE_DONE) st = fail(db, rc, "list matches");
    done(s);
    if (st != DB_OK) {
        free(v);
        return st;
    }
    *out = v;
    *n = cnt;
    return DB_OK;
}

db_status_t db_match_games_list(db_t *db, int64_t match_id, db_game_list_t *out) {
    return list_games_by_id(db, S_MATCH_GAMES, match_id, "match", out);
}

/* ---- summary ------------------------------------------------------------------- */
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
    if (rc != SQLITE_OK) return fail(db, rc, "summary: begin");
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
        st = query_int(db, counts[i].sql, counts[i].dst, "summary: count");
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
            st = fail(db, rc, "summary: latest figures");
        }
        sqlite3_finalize(s);
        s = NULL;
    }
    if (st == DB_OK) {
        rc = sqlite3_prepare_v2(db->sq,
                                "SELECT reason, shard_id IS NOT NULL, count(*) FROM games "
                                "GROUP BY reason, shard_id IS NOT NULL",
                                -1, &s, NULL);
        while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            db_reason_t r;
            if (db_reason_parse((const char *)sqlite3_column_text(s, 0), &r) == 0)
                (sqlite3_column_int(s, 1) ? out->reasons : out->match_reasons)[r] = sqlite3_column_int64(s, 2);
            rc = SQLITE_OK;
        }
        if (rc != SQLITE_DONE) st = fail(db, rc, "summary: end reasons");
        sqlite3_finalize(s);
    }
    sqlite3_exec(db->sq, "RELEASE koma_summary", NULL, NULL, NULL);
    return st;
}

/* ---- start-up check -------------------------------------------------------------- */
static db_status_t report_add(db_t *db, db_check_report_t *r, db_check_kind_t kind, const char *path,
                              const char *fmt, ...) {
    db_check_item_t *v = realloc(r->items, (size_t)(r->n + 1) * sizeof *v);
    if (!v) return fail_with(db, DB_ERROR, "check shards: out of memory");
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
    join_path(dir, sizeof dir, run_dir, "orphans");
    if (compat_mkdir_p(dir, err, errlen) != 0) return -1;
    join_path(src, sizeof src, run_dir, rel);
    snprintf(flat, sizeof flat, "%s", rel);
    for (char *p = flat; *p; p++)
        if (*p == '/' || *p == '\\') *p = '_';
    for (int i = 0; i < 1000; i++) {
        if (i == 0) snprintf(dst, dstlen, "%s/%s", dir, flat);
        else snprintf(dst, dstlen, "%s/%s.%d", dir, flat, i);
        if (compat_file_exists(dst)) continue;
        if (rename(src, dst) == 0) return 0;
        msgf(err, errlen, "%s: cannot move to %s", src, dst);
        return -1;
    }
    msgf(err, errlen, "%s: too many orphans of that name in %s", src, dir);
    return -1;
}

db_status_t db_check_shards(db_t *db, const char *run_dir, uint32_t flags, db_check_report_t *r) {
    if (!db || !r) return DB_INVALID;
    memset(r, 0, sizeof *r);
    if (run_dir && strlen(run_dir) > RUN_DIR_MAX)
        return fail_with(db, DB_INVALID, "check shards: run directory path longer than %d bytes", RUN_DIR_MAX);
    char abs[DB_PATH_MAX + 1024], err[DB_ERR_MAX];
    db_status_t st = DB_OK;

    /* 1. Every registered shard file is there, with the size (and hash) on record. */
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sq, "SELECT path, bytes, xxh3 FROM shards ORDER BY id", -1, &s, NULL);
    while (st == DB_OK && rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        const char *rel = (const char *)sqlite3_column_text(s, 0);
        int64_t bytes = sqlite3_column_int64(s, 1);
        const char *want = (const char *)sqlite3_column_text(s, 2);
        r->shards_checked++;
        join_path(abs, sizeof abs, run_dir, rel);
        int64_t size = compat_file_size(abs);
        if (size < 0) {
            st = report_add(db, r, DB_CHECK_MISSING, rel, "registered shard file is missing");
        } else if (size != bytes) {
            st = report_add(db, r, DB_CHECK_MISMATCH, rel, "file is %lld bytes, the database says %lld",
                            (long long)size, (long long)bytes);
        } else if (flags & DB_CHECK_VERIFY) {
            uint64_t h;
            char hex[17];
            if (db_file_xxh3(abs, &h, NULL, err, sizeof err) != 0) {
                st = report_add(db, r, DB_CHECK_MISMATCH, rel, "cannot be read");
            } else {
                snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
                if (strcmp(hex, want ? want : "") != 0)
                    st = report_add(db, r, DB_CHECK_MISMATCH, rel, "XXH3 %s, the database says %s", hex, want);
            }
        }
    }
    if (st == DB_OK && rc != SQLITE_DONE) st = fail(db, rc, "check shards: list shards");
    sqlite3_finalize(s);
    s = NULL;

    /* 2. Every registered model file is there. */
    if (st == DB_OK) {
        rc = sqlite3_prepare_v2(db->sq, "SELECT path FROM models ORDER BY id", -1, &s, NULL);
        while (st == DB_OK && rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            rc = SQLITE_OK;
            const char *rel = (const char *)sqlite3_column_text(s, 0);
            r->models_checked++;
            join_path(abs, sizeof abs, run_dir, rel);
            if (!compat_file_exists(abs)) st = report_add(db, r, DB_CHECK_MISSING, rel, "registered model file is missing");
        }
        if (st == DB_OK && rc != SQLITE_DONE) st = fail(db, rc, "check shards: list models");
        sqlite3_finalize(s);
        s = NULL;
    }

    /* 3. Intents never registered: the file (if the rename happened) is an
     * orphan, a temporary is half-written. Collect first, then act. */
    typedef struct {
        char path[DB_PATH_MAX];
        int pid;
        int registered;
    } intent_t;
    intent_t *iv = NULL;
    int32_t ni = 0;
    if (st == DB_OK) {
        rc = sqlite3_prepare_v2(db->sq,
                                "SELECT i.path, i.pid, s.id IS NOT NULL FROM shard_intents i "
                                "LEFT JOIN shards s ON s.path = i.path ORDER BY i.path",
                                -1, &s, NULL);
        while (st == DB_OK && rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            rc = SQLITE_OK;
            intent_t *nv = realloc(iv, (size_t)(ni + 1) * sizeof *nv);
            if (!nv) {
                st = fail_with(db, DB_ERROR, "check shards: out of memory");
                break;
            }
            iv = nv;
            col_text(s, 0, iv[ni].path, sizeof iv[ni].path);
            iv[ni].pid = sqlite3_column_int(s, 1);
            iv[ni].registered = sqlite3_column_int(s, 2);
            ni++;
        }
        if (st == DB_OK && rc != SQLITE_DONE) st = fail(db, rc, "check shards: list intents");
        sqlite3_finalize(s);
    }
    for (int32_t i = 0; st == DB_OK && i < ni; i++) {
        const char *rel = iv[i].path;
        if (!iv[i].registered) {
            char tmp[DB_PATH_MAX + 1100], rtmp[DB_PATH_MAX + 32];
            join_path(abs, sizeof abs, run_dir, rel);
            snprintf(tmp, sizeof tmp, "%s.tmp.%d", abs, iv[i].pid);
            snprintf(rtmp, sizeof rtmp, "%s.tmp.%d", rel, iv[i].pid);
            if (compat_file_exists(tmp)) {
                if (compat_remove_file(tmp) == 0)
                    st = report_add(db, r, DB_CHECK_TMP_REMOVED, rtmp, "half-written temporary removed");
                else
                    st = fail_with(db, DB_ERROR, "check shards: cannot remove %s", tmp);
            }
            if (st == DB_OK && compat_file_exists(abs)) {
                if (flags & DB_CHECK_DELETE_ORPHANS) {
                    if (compat_remove_file(abs) == 0)
                        st = report_add(db, r, DB_CHECK_ORPHAN_DELETED, rel, "written but never registered: deleted");
                    else
                        st = fail_with(db, DB_ERROR, "check shards: cannot delete orphan %s", abs);
                } else {
                    char dst[DB_PATH_MAX + 2100];
                    if (move_aside(run_dir, rel, dst, sizeof dst, err, sizeof err) == 0)
                        st = report_add(db, r, DB_CHECK_ORPHAN_MOVED, rel, "written but never registered: moved to orphans/");
                    else
                        st = fail_with(db, DB_ERROR, "check shards: %s", err);
                }
            }
        }
        if (st == DB_OK) st = intent_delete(db, rel);
    }
    free(iv);
    return st;
}
