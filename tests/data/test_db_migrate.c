/* test_db_migrate.c - data/db_schema.c's migrations of files written by
 * older releases: a real version 1 file (every row kept, new constraints,
 * the interim match_games rows, a failed migration leaving the file as it
 * was), version 2 (the resignation figures of cycle_metrics, NULL in old
 * rows), and versions 3, 4 and 5, each to a schema equal to a new file's. */
#include "compat/compat.h"
#include "data/db.h"
#include "tests/data/db_test.h"
#include "tests/koma_test.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schema v1 -> v2 -------------------------------------------------------------------- */
/* The schema of version 1 as data/db.c released it (a copy: db.c may change,
 * files written by that release do not), and the table match_games that
 * selfplay/referee.c created in v1 files before match games moved to games. */
#define V1_NOW "(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
static const char v1_schema[] =
    /* One row per invocation of a command on this run directory. */
    "CREATE TABLE runs ("
    "  id           INTEGER PRIMARY KEY,"
    "  created      TEXT NOT NULL DEFAULT " V1_NOW ","
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
    "  created          TEXT NOT NULL DEFAULT " V1_NOW ");"
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
    "  created          TEXT NOT NULL DEFAULT " V1_NOW ");"
    "CREATE INDEX shards_cycle ON shards(cycle);"
    /* Files about to be written and not yet registered (db_shard_intent). */
    "CREATE TABLE shard_intents ("
    "  path    TEXT PRIMARY KEY,"
    "  pid     INTEGER NOT NULL,"
    "  created TEXT NOT NULL DEFAULT " V1_NOW ");"
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
    "  created    TEXT NOT NULL DEFAULT " V1_NOW ");"
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
    "  created  TEXT NOT NULL DEFAULT " V1_NOW ");"
    "CREATE INDEX matches_cycle ON matches(cycle);"
    "CREATE INDEX matches_models ON matches(model_a, model_b);";

static const char v1_interim_match_games[] =
    "CREATE TABLE IF NOT EXISTS match_games ("
    "  id         INTEGER PRIMARY KEY,"
    "  session    TEXT NOT NULL,"
    "  match_id   INTEGER REFERENCES matches(id),"
    "  black      TEXT NOT NULL,"
    "  white      TEXT NOT NULL,"
    "  start_sfen TEXT NOT NULL,"
    "  moves      TEXT NOT NULL,"
    "  plies      INTEGER NOT NULL CHECK (plies >= 0),"
    "  result     INTEGER NOT NULL CHECK (result IN (-1, 0, 1)),"
    "  reason     TEXT NOT NULL,"
    "  detail     TEXT NOT NULL DEFAULT '',"
    "  created    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')));"
    "CREATE INDEX IF NOT EXISTS match_games_session ON match_games(session);";

/* Rows in every v1 table, as the v1 code would have written them (ids from
 * 1, foreign keys resolved), plus the interim match_games: two games attached
 * to match 1, three of an unattached session (two outside engines), one of
 * another. */
static const char v1_rows[] =
    "INSERT INTO runs(koma_version, command, config, created) VALUES"
    "  ('0.1.0', 'selfplay', 'cycles = 2', '2024-01-01T00:00:00.000Z'),"
    "  ('0.1.0', 'selfplay', 'cycles = 3', '2024-01-02T00:00:00.000Z');"
    "INSERT INTO models(run_id, cycle, path, xxh3, features_version, arch, train_steps, train_samples,"
    "  loss_policy, loss_value, loss_legal, loss_total) VALUES"
    "  (1, 0, 'models/cycle-0000.safetensors', '0123456789abcdef', 3, 'resnet4x32', 0, 0, NULL, NULL, NULL, NULL),"
    "  (2, 1, 'models/cycle-0001.safetensors', 'fedcba9876543210', 3, 'resnet4x32', 100, 25600, 2.5, 0.7, 0.1, 3.3);"
    "INSERT INTO shards(path, cycle, features_version, rows, games, pos_begin, bytes, xxh3) VALUES"
    "  ('shards/c0000_000001.safetensors', 0, 3, 30, 2, 0, 5000, '00000000000000aa'),"
    "  ('shards/c0001_000002.safetensors', 1, 3, 12, 1, 30, 2000, '00000000000000bb');"
    "INSERT INTO shard_intents(path, pid) VALUES ('shards/c0001_000003.safetensors', 4242);"
    "INSERT INTO games(shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason) VALUES"
    "  (1, 0, 20, 1, 'startpos', '7g7f 3c3d', 20, 1, 'checkmate'),"
    "  (1, 20, 10, 1, 'startpos', '2g2f', 10, -1, 'resign'),"
    "  (2, 0, 12, NULL, 'lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1', '', 12, 0, 'max_ply');"
    "INSERT INTO train_steps(step, cycle, time, lr, samples, loss_policy, loss_value, loss_legal, loss_total,"
    "  acc_policy, acc_value, acc_legal, grad_norm) VALUES"
    "  (0, 0, 1.7e9, 0.02, 256, 5.0, 1.0, 0.5, 6.5, 0.1, NULL, 0.9, 2.0),"
    "  (1, 0, 1.7e9 + 1, 0.02, 512, 4.5, 0.9, 0.4, 5.8, 0.2, NULL, 0.9, 1.5);"
    "INSERT INTO cycle_metrics(cycle, model_id, started, finished, games, positions, black_wins, white_wins, draws,"
    "  elo, elo_lo, elo_hi) VALUES (0, 1, 1.7e9, 1.7e9 + 60, 2, 30, 1, 1, 0, NULL, NULL, NULL);"
    "INSERT INTO matches(cycle, model_a, model_b, opponent, wins, draws, losses, elo, elo_lo, elo_hi, settings)"
    "  VALUES (1, 2, 1, '', 1, 0, 1, 0.0, -400.0, 400.0, 'eval visits=64'),"
    "         (0, 1, NULL, 'gpsshogi', 0, 0, 2, NULL, NULL, NULL, 'usi-match byoyomi 100');";
static const char v1_interim_rows[] =
    "INSERT INTO match_games(session, match_id, black, white, start_sfen, moves, plies, result, reason, detail)"
    "  VALUES ('eval 1 pid 7 cycle 1 vs 0', 1, 'cycle 1 (a)', 'cycle 0 (b)', 'startpos', '7g7f', 1, 1, 'resign',"
    "          'white resigned'),"
    "         ('eval 1 pid 7 cycle 1 vs 0', 1, 'cycle 0 (b)', 'cycle 1 (a)', 'startpos', '2g2f', 1, 1, 'resign',"
    "          'white resigned'),"
    "         ('usi-match s1', NULL, 'engine1: x', 'engine2: y', 'startpos', '7g7f 3c3d', 2, 1, 'time', 'slow'),"
    "         ('usi-match s1', NULL, 'engine2: y', 'engine1: x', 'startpos', '7g7f 3c3d', 2, 1, 'resign', ''),"
    "         ('usi-match s1', NULL, 'engine1: x', 'engine2: y', 'startpos', '', 0, 0, 'max_ply', ''),"
    "         ('usi-match s2', NULL, 'p', 'q', 'startpos', '', 0, -1, 'illegal_move', 'p played 7g7e');";

/* Writes a version 1 file the way the v1 code did: schema, application id,
 * version 1, WAL; then `rows` (foreign keys on unless fk_off). */
static void write_v1(const char *path, const char *rows, int fk_off) {
    char sql[160];
    sql_raw(path, v1_schema);
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 1; PRAGMA journal_mode = WAL",
             DB_APPLICATION_ID);
    sql_raw(path, sql);
    size_t n = strlen(rows) + 64;
    char *all = malloc(n);
    KOMA_ASSERT(all);
    snprintf(all, n, "PRAGMA foreign_keys = %s; %s", fk_off ? "OFF" : "ON", rows);
    sql_raw(path, all);
    free(all);
}

/* Every v1 column of every v1 table, in id order, as one text: what must
 * survive the migration unchanged. games: the v1 games are the shard games. */
static const char *const v1_tables[][3] = {
    {"runs", "id, created, koma_version, command, config", ""},
    {"models", "id, run_id, cycle, path, xxh3, features_version, arch, train_steps, train_samples, loss_policy, "
               "loss_value, loss_legal, loss_total, created", ""},
    {"shards", "id, path, cycle, features_version, rows, games, pos_begin, bytes, xxh3, created", ""},
    {"shard_intents", "path, pid, created", ""},
    {"games", "id, shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason, created",
     "WHERE shard_id IS NOT NULL"},
    {"train_steps", "step, cycle, time, lr, samples, loss_policy, loss_value, loss_legal, loss_total, acc_policy, "
                    "acc_value, acc_legal, grad_norm", ""},
    {"cycle_metrics", "cycle, model_id, started, finished, games, positions, selfplay_s, train_s, positions_per_s, "
                      "evals_per_s, avg_batch, busy_pct, avg_plies, black_wins, white_wins, draws, elo, elo_lo, elo_hi",
     ""},
    {"matches", "id, cycle, model_a, model_b, opponent, wins, draws, losses, elo, elo_lo, elo_hi, settings, created",
     "WHERE id <= 2"},
};
enum { V1_TABLES = sizeof v1_tables / sizeof v1_tables[0], DIGEST_MAX = 8192 };

/* The columns `names` of every row of `table` (WHERE `where`), as one text. */
static void rows_digest(const char *path, const char *table, const char *names, const char *where, char *out) {
    /* quote() of every column, joined: NULLs, reals and texts told apart. */
    char cols[2048] = "", sql[4096];
    char buf[768];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *c = strtok(buf, ", "); c; c = strtok(NULL, ", ")) {
        if (cols[0]) strcat(cols, " || '|' || ");
        strcat(cols, "quote(");
        strcat(cols, c);
        strcat(cols, ")");
    }
    snprintf(sql, sizeof sql,
             "SELECT count(*) || ':' || coalesce(group_concat(r, ';'), '') FROM (SELECT %s AS r FROM %s %s ORDER BY 1)",
             cols, table, where);
    sql_text(path, sql, out, DIGEST_MAX);
}

static void table_digest(const char *path, int t, int v2, char *out) {
    rows_digest(path, v1_tables[t][0], v1_tables[t][1], v2 ? v1_tables[t][2] : "", out);
}

/* type:name:sql of every schema object, in order: two databases with the same text have the same schema. */
static void schema_digest(const char *path, char *out) {
    sql_text(path,
             "SELECT group_concat(x, char(10)) FROM (SELECT type || ':' || name || ':' || coalesce(sql, '') AS x "
             "FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name)",
             out, DIGEST_MAX);
}

/* After a migration from version `from`: the same schema as a new database's. */
/* "schema version <from> needs migrating to <DB_SCHEMA_VERSION>" */
static const char *migrating_msg(int from) {
    static char buf[64];
    snprintf(buf, sizeof buf, "schema version %d needs migrating to %d", from, DB_SCHEMA_VERSION);
    return buf;
}

static void check_schema_as_new(const char *path, const char *fresh_name, int from) {
    static char got[DIGEST_MAX], want[DIGEST_MAX];
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    schema_digest(path, got);
    const char *fresh = tmp_db(fresh_name);
    CHECK_OK(db, db_open(fresh, 0, &db, err, sizeof err));
    db_close(db);
    schema_digest(fresh, want);
    if (strcmp(got, want) != 0) fprintf(stderr, "new:\n%s\nmigrated from v%d:\n%s\n", want, from, got);
    CHECK(strcmp(got, want) == 0);
}

/* The migrated v1 file's new constraints hold (SQL by hand, another writer). */
static void v1_check_constraints(const char *path) {
    char msg[512];
    const char *cols = "INSERT INTO games(id, shard_id, match_id, first_row, row_count, start_sfen, moves, plies, "
                       "result, reason) VALUES ";
    char sql[512];
    snprintf(sql, sizeof sql, "%s(NULL, NULL, NULL, 0, 0, 'startpos', '', 0, 0, 'abort')", cols);
    CHECK(sql_try(path, sql, msg, sizeof msg) == SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    snprintf(sql, sizeof sql, "%s(-100, 1, 1, 0, 0, 'startpos', '', 0, 0, 'abort')", cols); /* both */
    CHECK(sql_try(path, sql, msg, sizeof msg) == SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    snprintf(sql, sizeof sql, "%s(100, NULL, 1, 0, 0, 'startpos', '', 0, 0, 'abort')", cols); /* match game, id > 0 */
    CHECK(sql_try(path, sql, msg, sizeof msg) == SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    snprintf(sql, sizeof sql, "%s(-100, NULL, 1, 0, 5, 'startpos', '', 0, 0, 'abort')", cols); /* with rows */
    CHECK(sql_try(path, sql, msg, sizeof msg) == SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    snprintf(sql, sizeof sql, "%s(-100, 1, NULL, 0, 0, 'startpos', '', 0, 0, 'abort')", cols); /* shard game, id < 0 */
    CHECK(sql_try(path, sql, msg, sizeof msg) == SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    snprintf(sql, sizeof sql, "%s(-100, NULL, 99, 0, 0, 'startpos', '', 0, 0, 'abort')", cols); /* no such match */
    CHECK(sql_try(path, sql, msg, sizeof msg) == SQLITE_CONSTRAINT && contains(msg, "FOREIGN KEY"));
    CHECK(sql_try(path, "INSERT INTO matches(wins, draws, losses) VALUES (0, 0, 0)", msg, sizeof msg) ==
              SQLITE_CONSTRAINT && contains(msg, "CHECK")); /* neither a model nor a name */
    CHECK(sql_try(path, "INSERT INTO matches(cycle, engine_a, wins, draws, losses) VALUES (3, 'x', 0, 0, 0)", msg,
                  sizeof msg) == SQLITE_CONSTRAINT); /* a cycle without a model */
    CHECK(sql_int(path, "SELECT count(*) FROM games") == 9);
}

/* The typed API on the migrated v1 file. Self-play figures leave match games
 * out. -1: the file did not open. */
static int v1_check_api(const char *path) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return -1;
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.schema_version == DB_SCHEMA_VERSION && sum.games == 3 && sum.match_games == 6 && sum.matches == 4 && sum.pending == 1);
    CHECK(sum.black_wins == 1 && sum.white_wins == 1 && sum.draws == 1 && fabs(sum.avg_plies - 14.0) < 1e-12);
    CHECK(sum.reasons[DB_REASON_CHECKMATE] == 1 && sum.reasons[DB_REASON_RESIGN] == 1 &&
          sum.reasons[DB_REASON_MAX_PLY] == 1 && sum.reasons[DB_REASON_TIME] == 0);
    CHECK(sum.match_reasons[DB_REASON_RESIGN] == 3 && sum.match_reasons[DB_REASON_TIME] == 1 &&
          sum.match_reasons[DB_REASON_MAX_PLY] == 1 && sum.match_reasons[DB_REASON_ILLEGAL_MOVE] == 1 &&
          sum.match_reasons[DB_REASON_CHECKMATE] == 0);
    db_match_t *ml = NULL;
    int32_t nm = 0;
    CHECK_OK(db, db_matches_list(db, -1, &ml, &nm));
    CHECK(nm == 4 && ml && ml[0].games == 2 && ml[1].games == 0 && ml[1].cycle == 0 && ml[1].model_a == 1 &&
          strcmp(ml[1].opponent, "gpsshogi") == 0 && ml[2].games == 3 && ml[2].cycle == -1 && ml[2].model_a == 0 &&
          isnan(ml[2].elo) && ml[3].games == 1);
    free(ml);
    CHECK_OK(db, db_matches_list(db, 1, &ml, &nm));
    CHECK(nm == 1 && ml && ml[0].id == 1);
    free(ml);
    db_game_list_t gl;
    CHECK_OK(db, db_match_games_list(db, 3, &gl));
    CHECK(gl.n == 3 && gl.games[0].id == -3 && gl.games[2].id == -5 && gl.games[0].reason == DB_REASON_TIME &&
          strcmp(gl.games[0].detail, "slow") == 0 && strcmp(gl.games[1].black, "engine2: y") == 0);
    db_game_list_free(&gl);
    /* Shard games keep the ids 1, 2, ... that shard files record, match games or not. */
    db_game_t g = game(0, 4, DB_RESULT_DRAW, DB_REASON_SENNICHITE, "5i5h 5a5b 5h5i 5b5a", 4);
    db_shard_t s = shard("shards/c0001_000004.safetensors", 1, 4);
    CHECK_OK(db, db_shard_insert(db, &s, &g, 1));
    CHECK(g.id == 4 && s.pos_begin == 42);
    db_game_t mg = game(0, 0, DB_RESULT_BLACK_WIN, DB_REASON_CHECKMATE, "", 0);
    CHECK_OK(db, db_match_game_insert(db, 4, &mg));
    CHECK(mg.id == -7 && mg.match_id == 4 && mg.shard_id == 0);
    db_cycle_metrics_t cm;
    CHECK_OK(db, db_cycle_metrics_get(db, 0, &cm));
    CHECK(cm.games == 2 && cm.black_wins == 1 && cm.no_resign_games == -1 && cm.would_resign == -1 &&
          cm.false_resign == -1 && isnan(cm.resign_threshold));
    db_close(db);
    return 0;
}

static void test_migration(void) {
    char err[DB_ERR_MAX], msg[512];
    db_t *db = NULL;
    const char *path = tmp_db("v1.db");
    write_v1(path, v1_rows, 0);
    sql_raw(path, v1_interim_match_games);
    sql_raw(path, v1_interim_rows);
    CHECK(sql_int(path, "PRAGMA user_version") == 1 && sql_int(path, "SELECT count(*) FROM games") == 3);
    static char before[V1_TABLES][DIGEST_MAX], after[DIGEST_MAX];
    for (int t = 0; t < V1_TABLES; t++) table_digest(path, t, 0, before[t]);

    /* Read-only: refused, untouched. */
    CHECK(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    CHECK(starts_with(err, path) && contains(err, migrating_msg(1)));
    CHECK(sql_int(path, "PRAGMA user_version") == 1);

    /* Read-write: migrated, every row kept. */
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION);
    db_close(db);
    CHECK(sql_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION && sql_int(path, "PRAGMA application_id") == DB_APPLICATION_ID);
    CHECK(sql_int(path, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
    char ok[16];
    sql_text(path, "PRAGMA integrity_check", ok, sizeof ok);
    CHECK(strcmp(ok, "ok") == 0);
    for (int t = 0; t < V1_TABLES; t++) {
        table_digest(path, t, 1, after);
        if (strcmp(before[t], after) != 0)
            fprintf(stderr, "table %s changed:\n  before %.300s\n  after  %.300s\n", v1_tables[t][0], before[t], after);
        CHECK(strcmp(before[t], after) == 0);
    }
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE shard_id IS NOT NULL AND match_id IS NULL AND "
                        "black = '' AND white = '' AND detail = '' AND id > 0") == 3);
    /* Through v2 to v3: the v1 cycle_metrics row records no resignation check. */
    CHECK(sql_int(path, "SELECT count(*) FROM cycle_metrics WHERE cycle = 0 AND no_resign_games IS NULL AND "
                        "would_resign IS NULL AND false_resign IS NULL AND resign_threshold IS NULL") == 1);
    /* The v1 matches: no players named yet. */
    CHECK(sql_int(path, "SELECT count(*) FROM matches WHERE id <= 2 AND engine_a = '' AND engine_b = ''") == 2);
    /* Indexes, old and new; no table left over. */
    CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('games_shard', "
                        "'games_model', 'games_match', 'matches_cycle', 'matches_models', 'shards_cycle', "
                        "'train_steps_cycle')") == 7);
    CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN ('games_v2', 'matches_v2', "
                        "'match_games_session')") == 0);
    CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND name = 'match_games'") == 1);
    CHECK(sql_int(path, "SELECT \"notnull\" FROM pragma_table_info('games') WHERE name = 'shard_id'") == 0);
    CHECK(sql_int(path, "SELECT \"notnull\" FROM pragma_table_info('matches') WHERE name = 'model_a'") == 0);

    /* The interim match_games rows: attached ones under their match, the
     * others under one new match per session, W/D/L from the first game's
     * Black player; ids -1, -2, ... in their old order. */
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE match_id IS NOT NULL") == 6);
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE match_id = 1 AND id IN (-1, -2)") == 2);
    CHECK(sql_int(path, "SELECT count(*) FROM matches") == 4);
    CHECK(sql_int(path, "SELECT count(*) FROM matches WHERE id = 3 AND model_a IS NULL AND cycle IS NULL AND "
                        "engine_a = 'engine1: x' AND engine_b = 'engine2: y' AND opponent = 'engine2: y' AND "
                        "wins = 1 AND draws = 1 AND losses = 1 AND elo IS NULL AND settings = 'usi-match s1'") == 1);
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE match_id = 3 AND id IN (-3, -4, -5)") == 3);
    CHECK(sql_int(path, "SELECT count(*) FROM matches WHERE id = 4 AND engine_a = 'p' AND wins = 0 AND "
                        "losses = 1") == 1);
    sql_text(path, "SELECT detail FROM games WHERE id = -6 AND match_id = 4 AND reason = 'illegal_move'", msg,
             sizeof msg);
    CHECK(strcmp(msg, "p played 7g7e") == 0);
    CHECK(sql_int(path, "SELECT count(*) FROM match_games WHERE match_id IS NOT NULL") == 6);

    v1_check_constraints(path);
    if (v1_check_api(path) != 0) return;

    /* Opening it again changes nothing. */
    schema_digest(path, before[0]);
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    db_close(db);
    schema_digest(path, after);
    CHECK(strcmp(before[0], after) == 0);
    /* A new database has the same schema as a migrated one (the copy of v1 above is v1). */
    check_schema_as_new(path, "fresh2.db", 1);
    /* A v1 file without the interim table migrates too. */
    const char *plain = tmp_db("v1-plain.db");
    write_v1(plain, v1_rows, 0);
    CHECK_OK(db, db_open(plain, 0, &db, err, sizeof err));
    db_close(db);
    schema_digest(plain, before[0]);
    CHECK(strcmp(before[0], after) == 0);
    CHECK(sql_int(plain, "SELECT count(*) FROM games") == 3 && sql_int(plain, "SELECT count(*) FROM matches") == 2);

    /* A migration that fails leaves the file as it was: a v1 file whose game
     * points at a missing shard (written with foreign keys off). */
    const char *bad = tmp_db("v1-bad.db");
    write_v1(bad, "INSERT INTO games(shard_id, first_row, row_count, start_sfen, moves, plies, result, reason) "
                  "VALUES (7, 0, 1, 'startpos', '', 1, 0, 'abort')", 1);
    err[0] = 0;
    CHECK(db_open(bad, 0, &db, err, sizeof err) == DB_CONSTRAINT && db == NULL);
    CHECK(starts_with(err, bad) && contains(err, "foreign key check: games row 1 refers to a missing row of shards"));
    CHECK(sql_int(bad, "PRAGMA user_version") == 1 && sql_int(bad, "SELECT count(*) FROM games") == 1);
    CHECK(sql_int(bad, "SELECT \"notnull\" FROM pragma_table_info('games') WHERE name = 'shard_id'") == 1);
    CHECK(sql_int(bad, "SELECT count(*) FROM sqlite_master WHERE name IN ('games_v2', 'matches_v2', "
                       "'match_games')") == 0);

    /* A version from the future is refused, naming the file. */
    char future[96];
    snprintf(future, sizeof future, "PRAGMA user_version = %d", DB_SCHEMA_VERSION + 1);
    sql_raw(plain, future);
    CHECK(db_open(plain, 0, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    snprintf(future, sizeof future, "schema version %d is newer than this build", DB_SCHEMA_VERSION + 1);
    CHECK(starts_with(err, plain) && contains(err, future));
}

/* ---- schema v2 -> v3 -------------------------------------------------------------------- */
/* What version 2 changed, as data/db.c released it (a copy): on top of
 * v1_schema it gives the v2 schema text for text. Tables that v2 rebuilt
 * are stored as SQLite left them after the rename (CREATE TABLE "name"). */
static const char v2_delta[] =
    "DROP TABLE games;"
    "DROP TABLE matches;"
    "CREATE TABLE \"matches\" ("
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
    "  created  TEXT NOT NULL DEFAULT " V1_NOW ","
    "  engine_a TEXT NOT NULL DEFAULT '',"
    "  engine_b TEXT NOT NULL DEFAULT '',"
    "  CHECK (model_a IS NOT NULL OR engine_a <> ''),"
    "  CHECK (cycle IS NULL OR model_a IS NOT NULL));"
    "CREATE INDEX matches_cycle ON matches(cycle);"
    "CREATE INDEX matches_models ON matches(model_a, model_b);"
    "CREATE TABLE \"games\" ("
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
    "  created    TEXT NOT NULL DEFAULT " V1_NOW ","
    "  match_id   INTEGER REFERENCES matches(id),"
    "  black      TEXT NOT NULL DEFAULT '',"
    "  white      TEXT NOT NULL DEFAULT '',"
    "  detail     TEXT NOT NULL DEFAULT '',"
    "  CHECK ((shard_id IS NULL) <> (match_id IS NULL)),"
    "  CHECK (shard_id IS NULL OR id > 0),"
    "  CHECK (match_id IS NULL OR (id < 0 AND first_row = 0 AND row_count = 0)));"
    "CREATE INDEX games_shard ON games(shard_id, first_row);"
    "CREATE INDEX games_model ON games(model_id);"
    "CREATE INDEX games_match ON games(match_id);"
    "CREATE VIEW match_games AS "
    "SELECT id, match_id, black, white, start_sfen, moves, plies, result, reason, detail, created "
    "FROM games WHERE match_id IS NOT NULL;";

/* Rows as the v2 code wrote them: two cycles of metrics (one rated), a
 * finished match of two nets and an unfinished one against an outside
 * engine, self-play and match games. */
static const char v2_rows[] =
    "INSERT INTO runs(koma_version, command, config, created) VALUES"
    "  ('0.2.0', 'selfplay', 'no-resign-fraction = 0.2', '2024-03-01T00:00:00.000Z');"
    "INSERT INTO models(run_id, cycle, path, xxh3, features_version, arch) VALUES"
    "  (1, 0, 'models/cycle-0000.safetensors', '0123456789abcdef', 1, '4x32'),"
    "  (1, 1, 'models/cycle-0001.safetensors', 'fedcba9876543210', 1, '4x32');"
    "INSERT INTO shards(path, cycle, features_version, rows, games, pos_begin, bytes, xxh3) VALUES"
    "  ('shards/c0001_000001.safetensors', 1, 1, 30, 2, 0, 5000, '00000000000000aa');"
    "INSERT INTO games(id, shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason) VALUES"
    "  (1, 1, 0, 20, 1, 'startpos', '7g7f 3c3d', 20, 1, 'resign'),"
    "  (2, 1, 20, 10, 1, 'startpos', '2g2f', 10, 0, 'max_ply');"
    "INSERT INTO cycle_metrics(cycle, model_id, started, finished, games, positions, selfplay_s, train_s,"
    "  positions_per_s, evals_per_s, avg_batch, busy_pct, avg_plies, black_wins, white_wins, draws, elo, elo_lo,"
    "  elo_hi) VALUES"
    "  (1, 1, 1.7e9, 1.7e9 + 60, 2, 30, 50.0, 10.0, 0.6, 900.0, 31.5, 80.0, 15.0, 1, 0, 1, 35.0, -20.0, 90.0),"
    "  (2, 2, 1.7e9 + 70, 1.7e9 + 130, 0, 0, 55.0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, NULL);"
    "INSERT INTO matches(cycle, model_a, model_b, opponent, wins, draws, losses, elo, elo_lo, elo_hi, settings,"
    "  engine_a, engine_b) VALUES"
    "  (1, 2, 1, '', 1, 0, 0, 190.8, -1.0e999, 1.0e999, 'eval visits=64', 'cycle 1 (a)', 'cycle 0 (b)'),"
    "  (NULL, NULL, NULL, 'gps', 0, 0, 1, NULL, NULL, NULL, 'usi-match', 'engine1: x', 'engine2: gps');"
    "INSERT INTO games(id, match_id, first_row, row_count, start_sfen, moves, plies, result, reason, black, white,"
    "  detail) VALUES"
    "  (-1, 1, 0, 0, 'startpos', '7g7f', 1, 1, 'resign', 'cycle 1 (a)', 'cycle 0 (b)', 'white resigned'),"
    "  (-2, 2, 0, 0, 'startpos', '', 0, -1, 'time', 'engine1: x', 'engine2: gps', 'slow');";

/* Every v2 table with its v2 columns (all of them: v3 adds columns only). */
static const char *const v2_tables[][2] = {
    {"runs", "id, created, koma_version, command, config"},
    {"models", "id, run_id, cycle, path, xxh3, features_version, arch, train_steps, train_samples, loss_policy, "
               "loss_value, loss_legal, loss_total, created"},
    {"shards", "id, path, cycle, features_version, rows, games, pos_begin, bytes, xxh3, created"},
    {"games", "id, shard_id, first_row, row_count, model_id, start_sfen, moves, plies, result, reason, created, "
              "match_id, black, white, detail"},
    {"train_steps", "step, cycle, time, lr, samples, loss_policy, loss_value, loss_legal, loss_total, acc_policy, "
                    "acc_value, acc_legal, grad_norm"},
    {"cycle_metrics", "cycle, model_id, started, finished, games, positions, selfplay_s, train_s, positions_per_s, "
                      "evals_per_s, avg_batch, busy_pct, avg_plies, black_wins, white_wins, draws, elo, elo_lo, elo_hi"},
    {"matches", "id, cycle, model_a, model_b, opponent, wins, draws, losses, elo, elo_lo, elo_hi, settings, created, "
                "engine_a, engine_b"},
};
enum { V2_TABLES = sizeof v2_tables / sizeof v2_tables[0] };

/* The rows of every v2 table (cycle_metrics over cm_cols where given: a
 * migration that converts a column leaves it out). */
static void v2_digests(const char *path, const char *cm_cols, char out[][DIGEST_MAX]) {
    for (int t = 0; t < V2_TABLES; t++)
        rows_digest(path, v2_tables[t][0], cm_cols && !strcmp(v2_tables[t][0], "cycle_metrics") ? cm_cols : v2_tables[t][1],
                    "", out[t]);
}

/* After a migration: a sound file whose v2 tables hold `before`'s rows. */
static void check_v2_rows_kept(const char *path, const char *cm_cols, char before[][DIGEST_MAX]) {
    static char after[V2_TABLES][DIGEST_MAX];
    char ok[16];
    sql_text(path, "PRAGMA integrity_check", ok, sizeof ok);
    CHECK(strcmp(ok, "ok") == 0);
    v2_digests(path, cm_cols, after);
    for (int t = 0; t < V2_TABLES; t++) {
        if (strcmp(before[t], after[t]) != 0)
            fprintf(stderr, "table %s changed:\n  before %.300s\n  after  %.300s\n", v2_tables[t][0], before[t], after[t]);
        CHECK(strcmp(before[t], after[t]) == 0);
    }
}

/* What version 3 added on top of v2, as data/db.c released it (a copy). */
static const char v3_delta[] =
    "ALTER TABLE cycle_metrics ADD COLUMN no_resign_games INTEGER CHECK (no_resign_games >= 0);"
    "ALTER TABLE cycle_metrics ADD COLUMN would_resign INTEGER "
    "  CHECK (would_resign >= 0 AND would_resign <= no_resign_games);"
    "ALTER TABLE cycle_metrics ADD COLUMN false_resign INTEGER "
    "  CHECK (false_resign >= 0 AND false_resign <= would_resign);"
    "ALTER TABLE cycle_metrics ADD COLUMN resign_threshold REAL;";

/* What version 5 added (a copy). */
static const char v5_delta[] = "ALTER TABLE games ADD COLUMN rank INTEGER CHECK (rank >= 0);"
                               "ALTER TABLE games ADD COLUMN host TEXT;";

/* What version 6 added (a copy). */
static const char v6_delta[] = "ALTER TABLE runs ADD COLUMN cpu_seconds REAL CHECK (cpu_seconds >= 0);"
                               "ALTER TABLE models ADD COLUMN cpu_seconds REAL CHECK (cpu_seconds >= 0);";

/* A file of schema `version` (2..6) as that version's code left it: v1's
 * schema and the deltas up to it (v4 changed no table), the application id,
 * the version, WAL, foreign keys on, and v2's rows. */
static void write_frozen(const char *path, int version) {
    sql_raw(path, v1_schema);
    sql_raw(path, v2_delta);
    if (version >= 3) sql_raw(path, v3_delta);
    if (version >= 5) sql_raw(path, v5_delta);
    if (version >= 6) sql_raw(path, v6_delta);
    char sql[160];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d; PRAGMA journal_mode = WAL",
             DB_APPLICATION_ID, version);
    sql_raw(path, sql);
    sql_raw(path, "PRAGMA foreign_keys = ON;");
    sql_raw(path, v2_rows);
}

static void test_migration_v2(void) {
    char err[DB_ERR_MAX], msg[512];
    db_t *db = NULL;
    /* A version 2 file as the v2 code left it. */
    const char *path = tmp_db("v2.db");
    write_frozen(path, 2);
    CHECK(sql_int(path, "PRAGMA user_version") == 2 && sql_int(path, "SELECT count(*) FROM games") == 4);
    static char before[V2_TABLES][DIGEST_MAX];
    v2_digests(path, NULL, before);

    /* Read-only: refused, untouched (inspect and report on an old run). */
    CHECK(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    CHECK(starts_with(err, path) && contains(err, migrating_msg(2)));
    CHECK(sql_int(path, "PRAGMA user_version") == 2);

    /* Read-only with DB_OPEN_MIGRATE (inspect, report): migrated, then read;
     * every row and every v2 column kept. */
    CHECK_OK(db, db_open(path, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION && db_migrated_from(db) == 2);
    db_close(db);
    CHECK_OK(db, db_open(path, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err));
    CHECK(db && db_migrated_from(db) == 0); /* once only */
    db_close(db);
    CHECK(sql_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION && sql_int(path, "PRAGMA application_id") == DB_APPLICATION_ID);
    CHECK(sql_int(path, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
    check_v2_rows_kept(path, NULL, before);
    /* The rows written by v2 record no resignation check. */
    CHECK(sql_int(path, "SELECT count(*) FROM cycle_metrics WHERE no_resign_games IS NULL AND would_resign IS NULL "
                        "AND false_resign IS NULL AND resign_threshold IS NULL") == 2);

    /* The typed API: old rows read as "not recorded", the rest as before. */
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
    db_cycle_metrics_t m;
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &m));
    CHECK(m.games == 2 && m.black_wins == 1 && m.draws == 1 && m.elo == 35.0 && m.avg_batch == 31.5 &&
          m.no_resign_games == -1 && m.would_resign == -1 && m.false_resign == -1 && isnan(m.resign_threshold));
    /* Rewritten as the driver does (get, change one figure, put): still not recorded. */
    m.elo = 40.0;
    CHECK_OK(db, db_cycle_metrics_put(db, &m));
    CHECK(sql_int(path, "SELECT count(*) FROM cycle_metrics WHERE cycle = 1 AND elo = 40.0 AND "
                        "no_resign_games IS NULL AND resign_threshold IS NULL") == 1);
    /* A new cycle written by this version records them. */
    db_cycle_metrics_init(&m, 3);
    m.games = 10, m.black_wins = 5, m.white_wins = 4, m.draws = 1;
    m.no_resign_games = 2, m.would_resign = 2, m.false_resign = 0, m.resign_threshold = 0.05;
    CHECK_OK(db, db_cycle_metrics_put(db, &m));
    CHECK_OK(db, db_cycle_metrics_get(db, 3, &m));
    CHECK(m.no_resign_games == 2 && m.would_resign == 2 && m.false_resign == 0 && m.resign_threshold == 0.05);
    CHECK(sql_try(path, "UPDATE cycle_metrics SET false_resign = 3 WHERE cycle = 3", msg, sizeof msg) ==
              SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    CHECK(sql_try(path, "UPDATE cycle_metrics SET no_resign_games = -1 WHERE cycle = 3", msg, sizeof msg) ==
              SQLITE_CONSTRAINT);
    /* The matches: the finished one rated (its infinite interval kept), the other unfinished. */
    db_match_t *ml = NULL;
    int32_t nm = 0;
    CHECK_OK(db, db_matches_list(db, -1, &ml, &nm));
    CHECK(nm == 2 && ml && ml[0].games == 1 && ml[0].wins == 1 && ml[0].elo == 190.8 && isinf(ml[0].elo_hi) &&
          ml[1].games == 1 && ml[1].losses == 1 && isnan(ml[1].elo) && ml[1].cycle == -1);
    free(ml);
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.schema_version == DB_SCHEMA_VERSION && sum.games == 2 && sum.match_games == 2 && sum.matches == 2);
    db_close(db);

    /* The same schema as a new database, and as a v1 file taken through v2. */
    check_schema_as_new(path, "fresh3.db", 2);
}

/* ---- schema v3 -> v4 -------------------------------------------------------------------- */

/* v3 rows: the v2 cycles (no resignation check recorded) and cycles 3..7 as
 * v3 self-play wrote them, its threshold in W-L (<= -1: off). */
static const char v3_rows[] =
    "INSERT INTO cycle_metrics(cycle, started, games, black_wins, white_wins, draws, no_resign_games, would_resign,"
    "  false_resign, resign_threshold) VALUES"
    "  (3, 1.7e9 + 200, 10, 5, 4, 1, 2, 1, 0, -0.9),"
    "  (4, 1.7e9 + 300, 10, 5, 4, 1, 2, 0, 0, -1.0),"
    "  (5, 1.7e9 + 400, 10, 5, 4, 1, 2, 0, 0, -2.0),"
    "  (6, 1.7e9 + 500, 10, 5, 4, 1, 2, 2, 1, 0.5),"
    "  (7, 1.7e9 + 600, 10, 5, 4, 1, 0, 0, 0, 1.0);";

static void test_migration_v3(void) {
    char err[DB_ERR_MAX], msg[128];
    db_t *db = NULL;
    const char *path = tmp_db("v3.db");
    write_frozen(path, 3);
    sql_raw(path, v3_rows);
    CHECK(sql_int(path, "PRAGMA user_version") == 3 && sql_int(path, "SELECT count(*) FROM cycle_metrics") == 7);
    /* Every table but the converted column, before and after. */
    static char before[V2_TABLES][DIGEST_MAX];
    const char *cm_cols = "cycle, model_id, started, finished, games, positions, selfplay_s, train_s, positions_per_s, "
                          "evals_per_s, avg_batch, busy_pct, avg_plies, black_wins, white_wins, draws, elo, elo_lo, "
                          "elo_hi, no_resign_games, would_resign, false_resign";
    v2_digests(path, cm_cols, before);

    CHECK(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    snprintf(msg, sizeof msg, "schema version 3 needs migrating to %d", DB_SCHEMA_VERSION);
    CHECK(starts_with(err, path) && contains(err, msg));
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION);
    if (!db) return;
    /* W-L t becomes the win probability (1 + t) / 2; off (t <= -1) becomes 0; not recorded stays NULL. */
    const struct { int32_t cycle; double want; } conv[] = {{3, 0.05}, {4, 0.0}, {5, 0.0}, {6, 0.75}, {7, 1.0}};
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        db_cycle_metrics_t m;
        CHECK_OK(db, db_cycle_metrics_get(db, conv[i].cycle, &m));
        CHECKF(fabs(m.resign_threshold - conv[i].want) < 1e-12, "cycle %d: threshold %g after v4, want %g",
               conv[i].cycle, m.resign_threshold, conv[i].want);
    }
    db_cycle_metrics_t m;
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &m));
    CHECK(isnan(m.resign_threshold) && m.no_resign_games == -1);
    db_close(db);
    CHECK(sql_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION && sql_int(path, "SELECT count(*) FROM cycle_metrics") == 7);
    check_v2_rows_kept(path, cm_cols, before);
    /* Once only: opening again converts nothing twice (0.05 would become 0.525). */
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    db_close(db);
    CHECK(sql_int(path, "SELECT count(*) FROM cycle_metrics WHERE cycle = 3 AND abs(resign_threshold - 0.05) < 1e-12") == 1);
}

/* ---- schema v4 -> v5 -------------------------------------------------------------------- */
/* A v4 file (v2's rows plus a cycle with its resignation check; v4 changed
 * no table, only the threshold's unit) migrates to v5 keeping every row; its
 * games have no rank or host (NULL), games stored afterwards with a host get
 * both, and the schema is a new database's. */
static void test_migration_v4(void) {
    char err[DB_ERR_MAX], msg[512];
    db_t *db = NULL;
    const char *path = tmp_db("v4.db");
    write_frozen(path, 4);
    sql_raw(path, "UPDATE cycle_metrics SET no_resign_games = 2, would_resign = 1, false_resign = 0, "
                  "resign_threshold = 0.05 WHERE cycle = 2");
    static char before[V2_TABLES][DIGEST_MAX];
    v2_digests(path, NULL, before);

    CHECK(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    CHECK(starts_with(err, path) && contains(err, migrating_msg(4)));
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION);
    db_close(db);
    CHECK(sql_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION);
    check_v2_rows_kept(path, NULL, before);
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE rank IS NULL AND host IS NULL") == 4);
    CHECK(sql_int(path, "SELECT count(*) FROM cycle_metrics WHERE cycle = 2 AND no_resign_games = 2") == 1);
    CHECK(sql_try(path, "UPDATE games SET rank = -1 WHERE id = 1", msg, sizeof msg) == SQLITE_CONSTRAINT);

    /* Old games read as not recorded; a new shard's games keep rank and host. */
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
    db_game_list_t gl;
    CHECK_OK(db, db_games_of_shard(db, 1, &gl));
    CHECK(gl.n == 2 && gl.games && gl.games[0].host && gl.games[0].host[0] == 0);
    db_game_list_free(&gl);
    db_shard_t sh = {.cycle = 2, .features_version = 1, .rows = 12, .bytes = 100};
    snprintf(sh.path, sizeof sh.path, "shards/c0002_000002.safetensors");
    snprintf(sh.xxh3, sizeof sh.xxh3, "00000000000000bb");
    db_game_t g[2] = {
        {.first_row = 0, .row_count = 5, .model_id = 2, .start_sfen = "startpos", .moves = "7g7f", .plies = 5,
         .result = 1, .reason = DB_REASON_RESIGN, .rank = 2, .host = "node-b"},
        {.first_row = 5, .row_count = 7, .model_id = 2, .start_sfen = "startpos", .moves = "2g2f", .plies = 7,
         .result = 0, .reason = DB_REASON_MAX_PLY}, /* no host: not recorded */
    };
    CHECK_OK(db, db_shard_insert(db, &sh, g, 2));
    CHECK_OK(db, db_games_of_shard(db, sh.id, &gl));
    CHECK(gl.n == 2 && gl.games && gl.games[0].rank == 2 && strcmp(gl.games[0].host, "node-b") == 0 &&
          gl.games[1].host[0] == 0);
    db_game_list_free(&gl);
    db_close(db);
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE rank = 2 AND host = 'node-b'") == 1);
    CHECK(sql_int(path, "SELECT count(*) FROM games WHERE rank IS NULL AND host IS NULL") == 5);

    check_schema_as_new(path, "fresh5.db", 4);
}

/* ---- schema v5 -> v6 -------------------------------------------------------------------- */
/* A v5 file migrates to v6 keeping every row; its runs and models have no CPU
 * seconds (NULL), so a net published by a later invocation has an unknown run
 * total while its invocation's own seconds are recorded; in a new run each
 * invocation's seconds add up across restarts and a retry never lowers them. */
static void test_migration_v5(void) {
    char err[DB_ERR_MAX], msg[512];
    db_t *db = NULL;
    const char *path = tmp_db("v5.db");
    write_frozen(path, 5);
    static char before[V2_TABLES][DIGEST_MAX];
    v2_digests(path, NULL, before);
    CHECK(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    CHECK(starts_with(err, path) && contains(err, migrating_msg(5)));
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION);
    db_close(db);
    check_v2_rows_kept(path, NULL, before);
    check_schema_as_new(path, "fresh6.db", 5);
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
    db_model_t m;
    CHECK_OK(db, db_model_latest(db, &m));
    CHECK(m.cycle == 1 && isnan(m.cpu_seconds));
    int64_t run = 0;
    double total = 0;
    CHECK_OK(db, db_run_insert(db, "test", "selfplay", "", &run));
    CHECK_OK(db, db_run_cpu_update(db, run, 12.5, &total));
    CHECK(isnan(total)); /* the v5 invocation's CPU time is not known */
    db_close(db);
    CHECK(sql_int(path, "SELECT count(*) FROM runs WHERE cpu_seconds IS NULL") == 1);
    CHECK(sql_int(path, "SELECT count(*) FROM runs WHERE cpu_seconds = 12.5") == 1);
    CHECK(sql_try(path, "UPDATE models SET cpu_seconds = -1 WHERE cycle = 1", msg, sizeof msg) == SQLITE_CONSTRAINT);

    /* A new run: totals over invocations, kept at the largest value written. */
    const char *fresh = tmp_db("cpu.db");
    CHECK_OK(db, db_open(fresh, 0, &db, err, sizeof err));
    if (!db) return;
    int64_t r1 = 0, r2 = 0, r3 = 0;
    CHECK_OK(db, db_run_insert(db, "test", "selfplay", "", &r1));
    CHECK_OK(db, db_run_cpu_update(db, r1, 60, &total));
    CHECK(total == 60);
    CHECK_OK(db, db_run_cpu_update(db, r1, 50, &total)); /* a retry with an older reading */
    CHECK(total == 60);
    CHECK_OK(db, db_run_insert(db, "test", "import", "", &r2)); /* publishes nothing: 0 */
    CHECK_OK(db, db_run_insert(db, "test", "selfplay", "", &r3));
    CHECK_OK(db, db_run_cpu_update(db, r3, 30, &total));
    CHECK(total == 90);
    CHECK_OK(db, db_run_cpu_update(db, r1, 61, &total)); /* a total as of run 1 */
    CHECK(total == 61);
    CHECK(db_run_cpu_update(db, r3, -1, &total) == DB_INVALID && db_run_cpu_update(db, 0, 1, &total) == DB_INVALID);
    db_model_t nm = {.run_id = r3, .cycle = 0, .features_version = 1, .cpu_seconds = 91.5};
    snprintf(nm.path, sizeof nm.path, "models/0000.safetensors");
    snprintf(nm.xxh3, sizeof nm.xxh3, "00000000000000aa");
    nm.loss_policy = nm.loss_value = nm.loss_legal = nm.loss_total = NAN;
    CHECK_OK(db, db_model_insert(db, &nm));
    CHECK_OK(db, db_model_latest(db, &m));
    CHECK(m.cpu_seconds == 91.5);
    db_close(db);
}

/* Version 6 -> 7: position sets (imported hcpe/psv files) and shards.set_id;
 * every row kept, older shards without a set, a set's progress advanced in
 * the transaction of its shard and never past its records. */
static void test_migration_v6(void) {
    char err[DB_ERR_MAX], msg[512];
    db_t *db = NULL;
    const char *path = tmp_db("v6.db");
    write_frozen(path, 6);
    static char before[V2_TABLES][DIGEST_MAX];
    v2_digests(path, NULL, before);
    CHECK(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    CHECK(starts_with(err, path) && contains(err, migrating_msg(6)));
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION);
    db_close(db);
    check_v2_rows_kept(path, NULL, before);
    check_schema_as_new(path, "fresh7.db", 6);
    CHECK(sql_int(path, "SELECT count(*) FROM shards WHERE set_id IS NOT NULL") == 0);
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
    db_set_t set = {.bytes = 380, .mtime_ns = 7, .records = 10};
    snprintf(set.path, sizeof set.path, "/data/a.hcpe");
    snprintf(set.format, sizeof set.format, "hcpe");
    snprintf(set.xxh3, sizeof set.xxh3, "00000000000000ab");
    CHECK_OK(db, db_set_insert(db, &set));
    CHECK(set.id > 0);
    db_set_t got;
    int found = 0;
    CHECK_OK(db, db_set_find(db, "/data/a.hcpe", 380, 7, NULL, &got, &found));
    CHECK(found && got.id == set.id && got.records == 10 && got.records_done == 0 && !got.finished);
    CHECK_OK(db, db_set_find(db, "/data/moved.hcpe", 380, 8, "00000000000000ab", &got, &found));
    CHECK(found && got.id == set.id); /* moved or touched: found by its content */
    CHECK_OK(db, db_set_find(db, "/data/b.hcpe", 380, 7, "00000000000000ac", &got, &found));
    CHECK(!found);
    set.records_done = 10, set.positions = 9, set.rejected = 1, set.finished = 1;
    CHECK_OK(db, db_set_progress(db, &set));
    CHECK_OK(db, db_set_find(db, "/data/a.hcpe", 380, 7, NULL, &got, &found));
    CHECK(found && got.records_done == 10 && got.positions == 9 && got.rejected == 1 && got.finished);
    set.records_done = 11; /* past its records: refused by the schema, nothing changed */
    CHECK(db_set_progress(db, &set) != DB_OK);
    db_close(db);
    CHECK(sql_int(path, "SELECT records_done FROM position_sets") == 10);
    CHECK(sql_try(path, "UPDATE position_sets SET positions = 11", msg, sizeof msg) == SQLITE_CONSTRAINT);
}

int main(void) {
    if (t_db_setup("db_migrate") != 0) return 1;
    test_migration();
    test_migration_v2();
    test_migration_v3();
    test_migration_v4();
    test_migration_v5();
    test_migration_v6();
    t_db_cleanup();
    return t_done("test_db_migrate");
}
