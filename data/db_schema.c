/* db_schema.c - the SQL of koma.db: the schema of every version, the
 * migrations from one to the next, the schema check on open, and the text of
 * every prepared statement.
 *
 * Owns: the tables as each schema version left them (a new database is
 * created at version 1 and migrated, so that every file, new or old, reaches
 * the current schema by one path), PRAGMA user_version and application_id,
 * the statements' SQL (dbi_stmt_sql, indexed by the S_* ids of
 * db_internal.h). Does not own: opening the file (db.c), binding and reading
 * the statements (the db_*.c file of each table).
 */
#include "data/db_internal.h"

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
 * Other Kinds Of Table Schema Changes"): with foreign keys off (dbi_schema_check
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
static const char v5_games[] = "ALTER TABLE games ADD COLUMN rank INTEGER CHECK (rank >= 0);"
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

static const char v6_cpu[] = "ALTER TABLE runs ADD COLUMN cpu_seconds REAL CHECK (cpu_seconds >= 0);"
                             "ALTER TABLE models ADD COLUMN cpu_seconds REAL CHECK (cpu_seconds >= 0);";

/* Version 7: imported position files as position sets (docs/DATA.md): one
 * row per file (what it is, how far its import got), never one per
 * position; a shard of a set names it. Older rows keep set_id NULL. */
static const char v7_sets[] =
    "CREATE TABLE position_sets ("
    "  id           INTEGER PRIMARY KEY,"
    "  path         TEXT NOT NULL,"
    "  format       TEXT NOT NULL,"
    "  bytes        INTEGER NOT NULL CHECK (bytes >= 0),"
    "  mtime_ns     INTEGER NOT NULL,"
    "  xxh3         TEXT NOT NULL CHECK (length(xxh3) = 16),"
    "  records      INTEGER NOT NULL CHECK (records >= 0),"
    "  records_done INTEGER NOT NULL DEFAULT 0 CHECK (records_done >= 0 AND records_done <= records),"
    "  positions    INTEGER NOT NULL DEFAULT 0 CHECK (positions >= 0 AND positions <= records_done),"
    "  rejected     INTEGER NOT NULL DEFAULT 0 CHECK (rejected >= 0),"
    "  finished     INTEGER NOT NULL DEFAULT 0 CHECK (finished IN (0, 1)),"
    "  created      TEXT NOT NULL DEFAULT " NOW_ISO ");"
    "CREATE INDEX position_sets_file ON position_sets(path, bytes, mtime_ns);"
    "CREATE INDEX position_sets_hash ON position_sets(xxh3, bytes);"
    "ALTER TABLE shards ADD COLUMN set_id INTEGER REFERENCES position_sets(id);";

/* ---- migrations ------------------------------------------------------------------ */
static db_status_t exec_step(db_t *db, const char *sql, const char *step) {
    int rc = sqlite3_exec(db->sq, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? DB_OK : dbi_fail(db, rc, "%s", step);
}

/* Version 0 (an empty file) -> 1. */
static db_status_t create_v1(db_t *db) { return exec_step(db, schema_v1, "create the schema (version 1)"); }

/* Version 1 -> 2, inside dbi_schema_check's transaction, foreign keys off. */
static db_status_t migrate_v1_v2(db_t *db) {
    db_status_t st = exec_step(db, v2_matches, "upgrade to version 2: rebuild matches");
    if (st == DB_OK) st = exec_step(db, v2_games, "upgrade to version 2: rebuild games");
    int64_t interim = 0, last_match = 0;
    if (st == DB_OK)
        st = dbi_query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'match_games'",
                           &interim, "upgrade to version 2: look for match_games");
    if (st == DB_OK && interim) {
        st = dbi_query_int(db, "SELECT coalesce(max(id), 0) FROM matches", &last_match,
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
        st = dbi_fail_with(db, DB_CONSTRAINT,
                           "upgrade to version 2: foreign key check: %s row %lld refers to a missing row of %s",
                           table ? (const char *)table : "?", (long long)sqlite3_column_int64(s, 1),
                           parent ? (const char *)parent : "?");
    } else if (rc != SQLITE_DONE) {
        st = dbi_fail(db, rc, "upgrade to version 2: foreign key check");
    }
    sqlite3_finalize(s);
    return st;
}

/* Version 2 -> 3, inside dbi_schema_check's transaction. */
static db_status_t migrate_v2_v3(db_t *db) {
    return exec_step(db, v3_cycle_metrics, "upgrade to version 3: resignation figures in cycle_metrics");
}

/* Version 3 -> 4, inside dbi_schema_check's transaction. */
static db_status_t migrate_v3_v4(db_t *db) {
    return exec_step(db, v4_resign_threshold, "upgrade to version 4: resign threshold as a win probability");
}

/* Version 4 -> 5, inside dbi_schema_check's transaction. */
static db_status_t migrate_v4_v5(db_t *db) {
    return exec_step(db, v5_games, "upgrade to version 5: rank and host of each game");
}

/* Version 5 -> 6, inside dbi_schema_check's transaction. */
static db_status_t migrate_v5_v6(db_t *db) {
    return exec_step(db, v6_cpu, "upgrade to version 6: the CPU seconds of each invocation and model");
}

/* Version 6 -> 7, inside dbi_schema_check's transaction. */
static db_status_t migrate_v6_v7(db_t *db) {
    return exec_step(db, v7_sets, "upgrade to version 7: position sets of imported position files");
}

/* migrations[v] upgrades a version-v database to v+1; index 0 creates an
 * empty database (at version 1, then migrated like any v1 file). */
typedef db_status_t (*migration_fn)(db_t *db);
static const migration_fn migrations[DB_SCHEMA_VERSION] = {create_v1, migrate_v1_v2, migrate_v2_v3, migrate_v3_v4,
                                                           migrate_v4_v5, migrate_v5_v6, migrate_v6_v7};

db_status_t dbi_schema_check(db_t *db) {
    int64_t app = 0, ver = 0, objects = 0;
    db_status_t st = dbi_query_int(db, "PRAGMA application_id", &app, "read application_id");
    if (st == DB_OK) st = dbi_query_int(db, "PRAGMA user_version", &ver, "read schema version");
    if (st != DB_OK) return st;
    if (app != 0 && app != DB_APPLICATION_ID)
        return dbi_fail_with(db, DB_SCHEMA, "not a Koma database (application_id 0x%08llx)", (unsigned long long)app);
    if (ver > DB_SCHEMA_VERSION)
        return dbi_fail_with(db, DB_SCHEMA,
                             "schema version %lld is newer than this build of Koma understands (%d); "
                             "use a newer koma",
                             (long long)ver, DB_SCHEMA_VERSION);
    if (ver < 0)
        return dbi_fail_with(db, DB_SCHEMA, "unknown schema version %lld (this build knows 1..%d)", (long long)ver,
                             DB_SCHEMA_VERSION);
    if (ver == DB_SCHEMA_VERSION) {
        if (app != DB_APPLICATION_ID)
            return dbi_fail_with(db, DB_SCHEMA,
                                 "not a Koma database (application_id 0x%08llx with schema version %lld)",
                                 (unsigned long long)app, (long long)ver);
        db->version = (int32_t)ver;
        return DB_OK;
    }
    /* ver == 0 (new file) or an older version: create or migrate. */
    if ((db->flags & DB_OPEN_READONLY) && ver == 0)
        return dbi_fail_with(db, DB_SCHEMA, "not a Koma database (no schema version; opened read-only)");
    if (db->flags & DB_OPEN_READONLY) {
        db->older_version = (int32_t)ver;
        return dbi_fail_with(db, DB_SCHEMA,
                             "schema version %lld needs migrating to %d: open the run with a Koma program that writes "
                             "(selfplay, train) or with DB_OPEN_MIGRATE (inspect and report do)",
                             (long long)ver, DB_SCHEMA_VERSION);
    }
    if ((db->flags & DB_OPEN_NOCREATE_) && ver == 0)
        return dbi_fail_with(db, DB_SCHEMA, "not a Koma database (no schema version)");
    /* Tables are rebuilt with foreign keys off (the pragma is a no-op inside a
     * transaction); db_open turns them on again. */
    if ((st = db_exec(db, "PRAGMA foreign_keys = OFF")) != DB_OK) return st;
    if ((st = db_begin(db)) != DB_OK) return st;
    /* Read again inside the write lock: another process may have created or migrated it. */
    st = dbi_query_int(db, "PRAGMA user_version", &ver, "read schema version");
    if (st == DB_OK && ver == 0) {
        st = dbi_query_int(db, "SELECT count(*) FROM sqlite_master", &objects, "inspect an unversioned database");
        if (st == DB_OK && objects > 0)
            st = dbi_fail_with(db, DB_SCHEMA, "not a Koma database (%lld schema objects but no schema version)",
                               (long long)objects);
    }
    for (int64_t v = ver; st == DB_OK && v < DB_SCHEMA_VERSION; v++) st = migrations[v](db);
    if (st == DB_OK) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d", DB_APPLICATION_ID,
                 DB_SCHEMA_VERSION);
        int rc = sqlite3_exec(db->sq, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) st = dbi_fail(db, rc, "set schema version");
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
