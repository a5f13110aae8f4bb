/* test_db.c - data/db.c: create/open and schema checks, round trips of
 * every table, match games (two outside engines, recorded game by game),
 * all-or-nothing shard registration (including a full disk), the start-up
 * check that moves orphans aside, and db_probe on a busy database and on a
 * hot rollback journal. The migrations of older files: test_db_migrate.c;
 * the writer thread: test_db_writer.c. */
#include "compat/compat.h"
#include "compat/err.h"
#include "data/db.h"
#include "data/writer.h"
#include "tests/data/db_test.h"
#include "tests/koma_test.h"

#include <math.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- open and schema ---------------------------------------------------------------- */
static void test_open_and_schema(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *path = tmp_db("open.db");

    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    CHECK(db && db_schema_version(db) == DB_SCHEMA_VERSION);
    CHECK(db && strcmp(db_path(db), path) == 0 && strcmp(db_errmsg(db), "") == 0);
    db_close(db);
    db_close(NULL);
    CHECK(sql_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION);
    CHECK(sql_int(path, "PRAGMA application_id") == DB_APPLICATION_ID);
    char mode[32];
    sql_text(path, "PRAGMA journal_mode", mode, sizeof mode);
    CHECK(strcmp(mode, "wal") == 0);
    CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                        "('runs','models','games','shards','shard_intents','train_steps',"
                        "'cycle_metrics','matches')") == 8);
    CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'games_shard'") == 1);

    /* Reopen, read-write and read-only. */
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    db_close(db);
    CHECK_OK(db, db_open(path, DB_OPEN_READONLY, &db, err, sizeof err));
    CHECK(db && db_run_insert(db, "0.1.0", "selfplay", "x", NULL) != DB_OK); /* read-only */
    CHECK(db && starts_with(db_errmsg(db), path) && contains(db_errmsg(db), "insert run"));
    db_close(db);

    /* A newer schema version is refused, naming the file. */
    const char *newer = tmp_db("newer.db");
    CHECK_OK(db, db_open(newer, 0, &db, err, sizeof err));
    db_close(db);
    sql_raw(newer, "PRAGMA user_version = 99");
    err[0] = 0;
    CHECK(db_open(newer, 0, &db, err, sizeof err) == DB_SCHEMA && db == NULL);
    CHECK(starts_with(err, newer) && contains(err, "schema version 99 is newer than this build"));
    CHECK(db_open(newer, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(starts_with(err, newer) && contains(err, "schema version 99"));
    sql_raw(newer, "PRAGMA user_version = -3");
    CHECK(db_open(newer, 0, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(starts_with(err, newer) && contains(err, "unknown schema version -3"));

    /* Another program's database. */
    const char *foreign = tmp_db("foreign.db");
    sql_raw(foreign, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    CHECK(db_open(foreign, 0, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(starts_with(err, foreign) && contains(err, "not a Koma database"));
    CHECK(sql_int(foreign, "SELECT count(*) FROM t") == 1); /* left alone */
    CHECK(db_open(foreign, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(sql_int(foreign, "SELECT count(*) FROM t") == 1 && sql_int(foreign, "PRAGMA user_version") == 0);
    const char *empty_ro = tmp_db("empty_ro.db");
    write_text(empty_ro, "");
    CHECK(db_open(empty_ro, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(starts_with(err, empty_ro) && contains(err, "not a Koma database"));
    CHECK(compat_file_size(empty_ro) == 0); /* not given a schema */
    const char *appid = tmp_db("appid.db");
    sql_raw(appid, "PRAGMA application_id = 1234; PRAGMA user_version = 1");
    CHECK(db_open(appid, 0, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(starts_with(err, appid) && contains(err, "not a Koma database (application_id"));

    /* Not a database at all. */
    const char *text = tmp_db("text.db");
    write_text(text, "this is not an SQLite database, just some text that is long enough to have a header..........");
    db_status_t st = db_open(text, 0, &db, err, sizeof err);
    CHECK(st == DB_CORRUPT);
    CHECK(starts_with(err, text) && contains(err, "not a database"));

    /* An empty file is a new database. */
    const char *empty = tmp_db("empty.db");
    write_text(empty, "");
    CHECK_OK(db, db_open(empty, 0, &db, err, sizeof err));
    db_close(db);

    /* So is what a kill between the file's creation and the schema's commit
     * leaves: a WAL header, no version, no tables. A read-only open refuses
     * it without touching it; a writing open gives it the schema. */
    const char *bare = tmp_db("bare.db");
    sql_raw(bare, "PRAGMA journal_mode = WAL");
    CHECK(db_open(bare, DB_OPEN_READONLY, &db, err, sizeof err) == DB_SCHEMA);
    CHECK(starts_with(err, bare) && contains(err, "no schema version"));
    CHECK(sql_int(bare, "SELECT count(*) FROM sqlite_master") == 0);
    CHECK_OK(db, db_open(bare, 0, &db, err, sizeof err));
    db_close(db);
    CHECK(sql_int(bare, "PRAGMA user_version") == DB_SCHEMA_VERSION);

    /* A directory that does not exist. */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no/such/dir/koma.db", g_dir);
    CHECK(db_open(missing, 0, &db, err, sizeof err) != DB_OK && db == NULL);
    CHECK(starts_with(err, missing) && contains(err, "open"));
    CHECK(db_open(tmp("absent.db"), DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK);
    CHECK(db_open(tmp("absent.db"), DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err) != DB_OK);
    CHECK(!compat_file_exists(tmp("absent.db")));

    CHECK(strcmp(db_status_name(DB_FULL), "DB_FULL") == 0);
    db_reason_t r;
    CHECK(db_reason_parse("perpetual_check", &r) == 0 && r == DB_REASON_PERPETUAL_CHECK);
    CHECK(db_reason_parse("nope", &r) == -1 && strcmp(db_reason_name(DB_REASON_NB), "?") == 0);
    for (int i = 0; i < DB_REASON_NB; i++)
        CHECK(db_reason_parse(db_reason_name((db_reason_t)i), &r) == 0 && r == (db_reason_t)i);
}

/* ---- round trips ----------------------------------------------------------------------- */
/* What the round trips share: the database and the rows one section writes
 * and a later one refers to. */
typedef struct {
    db_t *db;
    const char *path;
    int64_t run1, m0, m1;  /* the first run; models of cycles 0 and 1 */
    db_shard_t s1, s2, s3; /* shards of cycles 0, 1, 1 (s3 empty) */
} rt_t;

/* runs */
static void rt_runs(rt_t *r) {
    db_t *db = r->db;
    db_run_t run;
    CHECK(db_run_latest(db, &run) == DB_NOTFOUND);
    int64_t run1 = 0, run2 = 0;
    CHECK_OK(db, db_run_insert(db, "0.1.0", "selfplay", "cycles = 50\n", &run1));
    CHECK_OK(db, db_run_insert(db, "0.1.1", "train", "{\"lr\": 0.02}", &run2));
    CHECK(run1 > 0 && run2 > run1);
    CHECK_OK(db, db_run_latest(db, &run));
    CHECK(run.id == run2 && strcmp(run.koma_version, "0.1.1") == 0 && strcmp(run.command, "train") == 0 &&
          run.config && strcmp(run.config, "{\"lr\": 0.02}") == 0 && strlen(run.created) >= 20);
    db_run_clear(&run);
    db_run_clear(&run);
    r->run1 = run1;
}

/* models */
static void rt_models(rt_t *r) {
    db_t *db = r->db;
    const char *path = r->path;
    int64_t run1 = r->run1;
    db_model_t m = {0}, got;
    CHECK(db_model_latest(db, &got) == DB_NOTFOUND && contains(db_errmsg(db), "no such model"));
    m.run_id = run1;
    m.cycle = 0;
    m.features_version = 3;
    snprintf(m.path, sizeof m.path, "models/c0000.safetensors");
    snprintf(m.xxh3, sizeof m.xxh3, "0123456789abcdef");
    snprintf(m.arch, sizeof m.arch, "resnet6x64");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    CHECK_OK(db, db_model_insert(db, &m));
    int64_t m0 = m.id;
    m.cycle = 1;
    snprintf(m.path, sizeof m.path, "models/c0001.safetensors");
    m.train_steps = 1000;
    m.train_samples = 256000;
    m.loss_policy = 2.5;
    m.loss_value = 0.75;
    m.loss_legal = 0.125;
    m.loss_total = 3.375;
    CHECK_OK(db, db_model_insert(db, &m));
    int64_t m1 = m.id;
    CHECK(m0 > 0 && m1 > m0);
    CHECK_OK(db, db_model_latest(db, &got));
    CHECK(got.id == m1 && got.cycle == 1 && got.run_id == run1 && got.features_version == 3 &&
          strcmp(got.path, "models/c0001.safetensors") == 0 && strcmp(got.xxh3, "0123456789abcdef") == 0 &&
          strcmp(got.arch, "resnet6x64") == 0 && got.train_steps == 1000 && got.train_samples == 256000 &&
          got.loss_policy == 2.5 && got.loss_value == 0.75 && got.loss_legal == 0.125 && got.loss_total == 3.375);
    CHECK_OK(db, db_model_by_cycle(db, 0, &got));
    CHECK(got.id == m0 && isnan(got.loss_policy) && isnan(got.loss_total) && got.train_steps == 0);
    CHECK_OK(db, db_model_get(db, m1, &got));
    CHECK(got.cycle == 1);
    CHECK(db_model_get(db, 999, &got) == DB_NOTFOUND);
    /* One net per cycle, one row per path. */
    snprintf(m.path, sizeof m.path, "models/other.safetensors");
    CHECK(db_model_insert(db, &m) == DB_CONSTRAINT);
    CHECK(starts_with(db_errmsg(db), path) && contains(db_errmsg(db), "insert model 'models/other.safetensors' (cycle 1)") &&
          contains(db_errmsg(db), "UNIQUE"));
    snprintf(m.xxh3, sizeof m.xxh3, "XYZ");
    m.cycle = 7;
    CHECK(db_model_insert(db, &m) == DB_INVALID && contains(db_errmsg(db), "not 16 lowercase hex"));
    snprintf(m.xxh3, sizeof m.xxh3, "0123456789abcdef");
    snprintf(m.path, sizeof m.path, "/abs/path");
    CHECK(db_model_insert(db, &m) == DB_INVALID && contains(db_errmsg(db), "absolute"));
    r->m0 = m0, r->m1 = m1;
}

/* shards and games */
static void rt_shards(rt_t *r) {
    db_t *db = r->db;
    int64_t m0 = r->m0, m1 = r->m1;
    db_game_t g1[3] = {
        game(0, 10, DB_RESULT_BLACK_WIN, DB_REASON_CHECKMATE, "7g7f 3c3d 8h2b+", 10),
        game(10, 20, DB_RESULT_WHITE_WIN, DB_REASON_RESIGN, "2g2f 8c8d", 20),
        game(30, 5, DB_RESULT_DRAW, DB_REASON_MAX_PLY, "", 5),
    };
    for (int i = 0; i < 3; i++) g1[i].model_id = m0;
    g1[2].start_sfen = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";
    db_shard_t s1 = shard("shards/c0000_000001.safetensors", 0, 35);
    CHECK_OK(db, db_shard_insert(db, &s1, g1, 3));
    CHECK(s1.id > 0 && s1.games == 3 && s1.pos_begin == 0);
    CHECK(g1[0].id > 0 && g1[0].shard_id == s1.id && g1[2].shard_id == s1.id);
    db_game_t g2[1] = {game(0, 40, DB_RESULT_BLACK_WIN, DB_REASON_DECLARATION, "5g5f", 41)};
    g2[0].model_id = m1;
    db_shard_t s2 = shard("shards/c0001_000002.safetensors", 1, 40);
    CHECK_OK(db, db_shard_insert(db, &s2, g2, 1));
    CHECK(s2.pos_begin == 35);
    db_shard_t s3 = shard("shards/c0001_000003.safetensors", 1, 0); /* an empty shard is legal */
    CHECK_OK(db, db_shard_insert(db, &s3, NULL, 0));
    CHECK(s3.pos_begin == 75 && s3.games == 0);

    db_shard_t sg;
    CHECK_OK(db, db_shard_get(db, s1.id, &sg));
    CHECK(sg.id == s1.id && strcmp(sg.path, s1.path) == 0 && sg.cycle == 0 && sg.features_version == 3 &&
          sg.rows == 35 && sg.games == 3 && sg.pos_begin == 0 && sg.bytes == s1.bytes &&
          strcmp(sg.xxh3, s1.xxh3) == 0 && strlen(sg.created) >= 20);
    CHECK(db_shard_get(db, 12345, &sg) == DB_NOTFOUND);

    db_game_list_t gl;
    CHECK_OK(db, db_games_of_shard(db, s1.id, &gl));
    CHECK(gl.n == 3);
    if (gl.n == 3) {
        CHECK(gl.games[0].id == g1[0].id && gl.games[0].first_row == 0 && gl.games[0].row_count == 10 &&
              gl.games[0].model_id == m0 && strcmp(gl.games[0].moves, "7g7f 3c3d 8h2b+") == 0 &&
              strcmp(gl.games[0].start_sfen, "startpos") == 0 && gl.games[0].plies == 10 &&
              gl.games[0].result == DB_RESULT_BLACK_WIN && gl.games[0].reason == DB_REASON_CHECKMATE);
        CHECK(gl.games[1].result == DB_RESULT_WHITE_WIN && gl.games[1].reason == DB_REASON_RESIGN &&
              gl.games[1].first_row == 10 && gl.games[1].row_count == 20);
        CHECK(gl.games[2].result == DB_RESULT_DRAW && gl.games[2].reason == DB_REASON_MAX_PLY &&
              strcmp(gl.games[2].moves, "") == 0 && strcmp(gl.games[2].start_sfen, g1[2].start_sfen) == 0);
    }
    db_game_list_free(&gl);
    db_game_list_free(NULL);
    CHECK_OK(db, db_games_of_shard(db, s3.id, &gl));
    CHECK(gl.n == 0);
    db_game_list_free(&gl);

    int64_t ng = -1, np = -1;
    CHECK_OK(db, db_count(db, -1, &ng, &np));
    CHECK(ng == 4 && np == 75);
    CHECK_OK(db, db_count(db, 1, &ng, &np));
    CHECK(ng == 1 && np == 40);
    CHECK_OK(db, db_count(db, 9, &ng, &np));
    CHECK(ng == 0 && np == 0);

    /* The trainer's window: newest shards covering at least N rows, oldest first. */
    db_shard_t *win = NULL;
    int32_t nw = -1;
    CHECK_OK(db, db_shards_recent(db, 30, &win, &nw));
    CHECK(nw == 2 && win && win[0].id == s2.id && win[1].id == s3.id);
    free(win);
    CHECK_OK(db, db_shards_recent(db, 41, &win, &nw));
    CHECK(nw == 3 && win && win[0].id == s1.id && win[2].id == s3.id);
    free(win);
    CHECK_OK(db, db_shards_recent(db, 0, &win, &nw));
    CHECK(nw == 3);
    free(win);
    CHECK_OK(db, db_shards_recent(db, 1000000, &win, &nw));
    CHECK(nw == 3);
    free(win);

    /* Bad shard arguments are refused before anything is written. */
    db_game_t bad = game(30, 10, DB_RESULT_DRAW, DB_REASON_ABORT, "", 0);
    db_shard_t s4 = shard("shards/bad.safetensors", 1, 35);
    CHECK(db_shard_insert(db, &s4, &bad, 1) == DB_INVALID && contains(db_errmsg(db), "outside the shard's 35 rows"));
    bad = game(0, 1, 2, DB_REASON_ABORT, "", 0);
    CHECK(db_shard_insert(db, &s4, &bad, 1) == DB_INVALID && contains(db_errmsg(db), "result 2"));
    bad = game(0, 1, 0, DB_REASON_NB, "", 0);
    CHECK(db_shard_insert(db, &s4, &bad, 1) == DB_INVALID && contains(db_errmsg(db), "unknown end reason"));
    CHECK(db_shard_insert(db, &s1, NULL, 0) == DB_CONSTRAINT && contains(db_errmsg(db), "UNIQUE")); /* same path */
    CHECK(count_rows(db, "shards") == 3);
    r->s1 = s1, r->s2 = s2, r->s3 = s3;
}

/* train steps: batched, replaced when written again */
static void rt_train_steps(rt_t *r) {
    db_t *db = r->db;
    db_train_step_t steps[5];
    for (int i = 0; i < 5; i++) {
        memset(&steps[i], 0, sizeof steps[i]);
        steps[i].step = 100 + i;
        steps[i].cycle = 1;
        steps[i].time = 1.7e9 + i;
        steps[i].lr = 0.02;
        steps[i].samples = 256 * (i + 1);
        steps[i].loss_policy = 2.0 - 0.1 * i;
        steps[i].loss_value = 0.5;
        steps[i].loss_legal = 0.01;
        steps[i].loss_total = 2.51 - 0.1 * i;
        steps[i].acc_policy = 0.3;
        steps[i].acc_value = NAN;
        steps[i].acc_legal = 0.99;
        steps[i].grad_norm = 1.5;
    }
    steps[4].time = 0; /* "now" */
    CHECK_OK(db, db_train_steps_insert(db, steps, 5));
    steps[0].loss_total = 9.0;
    CHECK_OK(db, db_train_steps_insert(db, steps, 1)); /* step 100 again after a resume */
    db_train_step_t back[8];
    int32_t nb = 0;
    CHECK_OK(db, db_train_steps_get(db, 0, 1000, back, 8, &nb));
    CHECK(nb == 5);
    CHECK(back[0].step == 100 && back[0].loss_total == 9.0 && back[0].cycle == 1 && back[0].lr == 0.02 &&
          back[0].time == 1.7e9 && isnan(back[0].acc_value) && back[0].acc_legal == 0.99 && back[0].grad_norm == 1.5);
    CHECK(back[3].step == 103 && back[3].samples == 1024 && fabs(back[3].loss_policy - 1.7) < 1e-12);
    CHECK(back[4].time > 1.6e9 && back[4].time < 4e9); /* filled in by the database */
    CHECK_OK(db, db_train_steps_get(db, 101, 103, back, 8, &nb));
    CHECK(nb == 2 && back[0].step == 101 && back[1].step == 102);
    CHECK_OK(db, db_train_steps_get(db, 0, 1000, back, 3, &nb));
    CHECK(nb == 3);
    CHECK_OK(db, db_train_steps_insert(db, steps, 0));
}

/* cycle metrics: put, get, replace */
static void rt_cycle_metrics(rt_t *r) {
    db_t *db = r->db;
    const char *path = r->path;
    int64_t m1 = r->m1;
    db_cycle_metrics_t cm = {0}, cg;
    cm.cycle = 1;
    cm.model_id = m1;
    cm.started = 1.7e9;
    cm.finished = 1.7e9 + 60;
    cm.games = 4;
    cm.positions = 75;
    cm.selfplay_s = 50;
    cm.train_s = 10;
    cm.positions_per_s = 1.5;
    cm.evals_per_s = 12000;
    cm.avg_batch = 230.5;
    cm.busy_pct = 87.5;
    cm.avg_plies = 19;
    cm.black_wins = 2;
    cm.white_wins = 1;
    cm.draws = 1;
    cm.elo = cm.elo_lo = cm.elo_hi = NAN;
    cm.no_resign_games = 3;
    cm.would_resign = 2;
    cm.false_resign = 1;
    cm.resign_threshold = 0.05;
    CHECK_OK(db, db_cycle_metrics_put(db, &cm));
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &cg));
    CHECK(cg.cycle == 1 && cg.model_id == m1 && cg.games == 4 && cg.positions == 75 && cg.evals_per_s == 12000 &&
          cg.avg_batch == 230.5 && cg.busy_pct == 87.5 && cg.black_wins == 2 && cg.draws == 1 && isnan(cg.elo));
    CHECK(cg.no_resign_games == 3 && cg.would_resign == 2 && cg.false_resign == 1 && cg.resign_threshold == 0.05);
    /* Resignation figures that do not nest are refused before anything is written. */
    db_cycle_metrics_t badm = cm;
    badm.false_resign = 3;
    CHECK(db_cycle_metrics_put(db, &badm) == DB_INVALID && contains(db_errmsg(db), "cycle 1") &&
          contains(db_errmsg(db), "do not nest"));
    badm = cm;
    badm.would_resign = 4;
    CHECK(db_cycle_metrics_put(db, &badm) == DB_INVALID);
    badm = cm;
    badm.no_resign_games = -1; /* would-be resignations of unknown games */
    CHECK(db_cycle_metrics_put(db, &badm) == DB_INVALID);
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &cg));
    CHECK(cg.no_resign_games == 3 && cg.false_resign == 1);
    /* The schema holds them too (another writer, by hand). */
    char msg[256];
    CHECK(sql_try(path, "UPDATE cycle_metrics SET would_resign = 5 WHERE cycle = 1", msg, sizeof msg) ==
              SQLITE_CONSTRAINT && contains(msg, "CHECK"));
    /* A row with nothing recorded: NULLs, read back as -1 / NAN. */
    db_cycle_metrics_t blank;
    db_cycle_metrics_init(&blank, 7);
    CHECK(blank.cycle == 7 && blank.games == 0 && isnan(blank.started) && isnan(blank.train_s) &&
          isnan(blank.elo) && blank.no_resign_games == -1 && blank.false_resign == -1 &&
          isnan(blank.resign_threshold));
    CHECK_OK(db, db_cycle_metrics_put(db, &blank));
    CHECK(sql_int(path, "SELECT count(*) FROM cycle_metrics WHERE cycle = 7 AND no_resign_games IS NULL AND "
                        "would_resign IS NULL AND false_resign IS NULL AND resign_threshold IS NULL AND "
                        "model_id IS NULL AND train_s IS NULL") == 1);
    CHECK_OK(db, db_cycle_metrics_get(db, 7, &cg));
    CHECK(cg.no_resign_games == -1 && cg.would_resign == -1 && cg.false_resign == -1 && isnan(cg.resign_threshold));
    CHECK_OK(db, db_exec(db, "DELETE FROM cycle_metrics WHERE cycle = 7"));
    cm.elo = 120;
    cm.elo_lo = 90;
    cm.elo_hi = 150;
    CHECK_OK(db, db_cycle_metrics_put(db, &cm));
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &cg));
    CHECK(cg.elo == 120 && cg.elo_lo == 90 && cg.elo_hi == 150);
    CHECK(db_cycle_metrics_get(db, 2, &cg) == DB_NOTFOUND);
    CHECK_OK(db, db_cycle_metrics_get_or_init(db, 2, &cg)); /* nothing recorded, nothing written */
    CHECK(cg.cycle == 2 && cg.games == 0 && isnan(cg.elo) && cg.no_resign_games == -1);
    CHECK_OK(db, db_cycle_metrics_get_or_init(db, 1, &cg));
    CHECK(cg.cycle == 1 && cg.elo == 120);
    CHECK(count_rows(db, "cycle_metrics") == 1);
}

/* matches */
static void rt_matches(rt_t *r) {
    db_t *db = r->db;
    int64_t m0 = r->m0, m1 = r->m1;
    db_match_t ma = {0};
    ma.cycle = 1;
    ma.model_a = m1;
    ma.model_b = m0;
    ma.wins = 60;
    ma.draws = 10;
    ma.losses = 30;
    ma.elo = 106;
    ma.elo_lo = 40;
    ma.elo_hi = 170;
    snprintf(ma.settings, sizeof ma.settings, "nodes=800");
    CHECK_OK(db, db_match_insert(db, &ma));
    db_match_t mb = ma;
    mb.model_b = 0;
    snprintf(mb.opponent, sizeof mb.opponent, "YaneuraOu 8.0 depth 1");
    mb.elo = NAN;
    CHECK_OK(db, db_match_insert(db, &mb));
    mb.cycle = 0;
    mb.model_a = m0;
    CHECK_OK(db, db_match_insert(db, &mb));
    mb.model_a = 4242; /* no such model */
    CHECK(db_match_insert(db, &mb) == DB_CONSTRAINT && contains(db_errmsg(db), "FOREIGN KEY"));
    db_match_t *ml = NULL;
    int32_t nm = 0;
    CHECK_OK(db, db_matches_list(db, 1, &ml, &nm));
    CHECK(nm == 2 && ml && ml[0].id == ma.id && ml[0].model_b == m0 && ml[0].wins == 60 && ml[0].draws == 10 &&
          ml[0].losses == 30 && ml[0].elo == 106 && strcmp(ml[0].settings, "nodes=800") == 0 &&
          ml[1].model_b == 0 && strcmp(ml[1].opponent, "YaneuraOu 8.0 depth 1") == 0 && isnan(ml[1].elo));
    free(ml);
    CHECK_OK(db, db_matches_list(db, -1, &ml, &nm));
    CHECK(nm == 3);
    free(ml);
}

/* summary; everything survives a reopen; an empty database (closes r->db) */
static void rt_summary(rt_t *r) {
    char err[DB_ERR_MAX];
    db_t *db = r->db;
    const char *path = r->path;
    int64_t m1 = r->m1;
    db_shard_t s1 = r->s1, s2 = r->s2, s3 = r->s3;
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.schema_version == DB_SCHEMA_VERSION && sum.runs == 2 && sum.models == 2 && sum.shards == 3 &&
          sum.games == 4 && sum.positions == 75 && sum.train_steps == 5 && sum.matches == 3 && sum.pending == 0);
    CHECK(sum.shard_bytes == s1.bytes + s2.bytes + s3.bytes);
    CHECK(sum.latest_cycle == 1 && sum.latest_model_id == m1 && sum.last_step == 104);
    CHECK(fabs(sum.last_loss_total - (2.51 - 0.4)) < 1e-12);
    CHECK(sum.black_wins == 2 && sum.white_wins == 1 && sum.draws == 1);
    CHECK(fabs(sum.avg_plies - (10 + 20 + 5 + 41) / 4.0) < 1e-12);
    CHECK(sum.reasons[DB_REASON_CHECKMATE] == 1 && sum.reasons[DB_REASON_RESIGN] == 1 &&
          sum.reasons[DB_REASON_MAX_PLY] == 1 && sum.reasons[DB_REASON_DECLARATION] == 1 &&
          sum.reasons[DB_REASON_SENNICHITE] == 0);
    CHECK(strlen(sum.first_run) >= 20 && strlen(sum.last_run) >= 20);
    db_close(db);

    /* Everything survives a reopen. */
    CHECK_OK(db, db_open(path, DB_OPEN_READONLY, &db, err, sizeof err));
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.games == 4 && sum.positions == 75);
    db_close(db);

    /* An empty database summarises to zeros. */
    CHECK_OK(db, db_open(tmp_db("empty2.db"), 0, &db, err, sizeof err));
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.games == 0 && sum.latest_cycle == -1 && sum.last_step == -1 && isnan(sum.avg_plies) &&
          isnan(sum.last_loss_total) && sum.first_run[0] == 0);
    db_close(db);
}

static void test_round_trips(void) {
    char err[DB_ERR_MAX];
    rt_t r = {0};
    r.path = tmp_db("rt.db");
    CHECK_OK(r.db, db_open(r.path, 0, &r.db, err, sizeof err));
    if (!r.db) return;
    rt_runs(&r);
    rt_models(&r);
    rt_shards(&r);
    rt_train_steps(&r);
    rt_cycle_metrics(&r);
    rt_matches(&r);
    rt_summary(&r);
}

/* ---- match games through db.h ---------------------------------------------------------------- */
static void test_match_games(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    CHECK_OK(db, db_open(tmp_db("mg.db"), 0, &db, err, sizeof err));
    if (!db) return;
    /* Two outside engines: no model, named players. */
    db_match_t m = {0};
    m.wins = 5;
    CHECK(db_match_begin(db, &m) == DB_INVALID && contains(db_errmsg(db), "neither a model"));
    snprintf(m.engine_a, sizeof m.engine_a, "engine1: YaneuraOu");
    snprintf(m.engine_b, sizeof m.engine_b, "engine2: gpsshogi");
    snprintf(m.opponent, sizeof m.opponent, "gpsshogi");
    snprintf(m.settings, sizeof m.settings, "byoyomi 1000");
    m.cycle = 4; /* no model: no cycle */
    CHECK_OK(db, db_match_begin(db, &m));
    CHECK(m.id > 0 && m.wins == 0 && isnan(m.elo) && m.cycle == -1);
    db_game_t g[3] = {game(0, 0, DB_RESULT_BLACK_WIN, DB_REASON_CHECKMATE, "7g7f 3c3d", 2),
                      game(0, 0, DB_RESULT_BLACK_WIN, DB_REASON_RESIGN, "2g2f", 1),
                      game(0, 0, DB_RESULT_DRAW, DB_REASON_SENNICHITE, "", 0)};
    g[0].black = g[2].black = g[1].white = m.engine_a;
    g[0].white = g[2].white = g[1].black = m.engine_b;
    g[1].detail = "white resigned";
    g[0].first_row = 7; /* ignored for a match game */
    for (int i = 0; i < 3; i++) {
        CHECK_OK(db, db_match_game_insert(db, m.id, &g[i]));
        CHECK(g[i].id == -1 - i && g[i].match_id == m.id);
    }
    db_match_t got;
    CHECK_OK(db, db_match_get(db, m.id, &got));
    CHECK(got.wins == 1 && got.draws == 1 && got.losses == 1 && got.games == 3 && got.model_a == 0 &&
          got.cycle == -1 && strcmp(got.engine_a, m.engine_a) == 0 && strcmp(got.engine_b, m.engine_b) == 0 &&
          strcmp(got.settings, "byoyomi 1000") == 0 && isnan(got.elo));
    got.elo = 0;
    got.elo_lo = -350;
    got.elo_hi = 350;
    CHECK_OK(db, db_match_finish(db, &got));
    CHECK_OK(db, db_match_get(db, m.id, &got));
    CHECK(got.elo == 0 && got.elo_lo == -350 && got.wins == 1);
    db_game_list_t gl;
    CHECK_OK(db, db_match_games_list(db, m.id, &gl));
    CHECK(gl.n == 3);
    if (gl.n == 3) {
        CHECK(gl.games[0].id == -1 && gl.games[0].first_row == 0 && gl.games[0].shard_id == 0 &&
              strcmp(gl.games[0].moves, "7g7f 3c3d") == 0 && gl.games[0].reason == DB_REASON_CHECKMATE &&
              strcmp(gl.games[0].black, m.engine_a) == 0 && strcmp(gl.games[0].detail, "") == 0);
        CHECK(strcmp(gl.games[1].detail, "white resigned") == 0 && strcmp(gl.games[1].white, m.engine_a) == 0);
        CHECK(gl.games[2].reason == DB_REASON_SENNICHITE && gl.games[2].result == DB_RESULT_DRAW);
    }
    db_game_list_free(&gl);

    /* Refused before anything is written. */
    db_game_t bad = game(0, 0, 2, DB_REASON_ABORT, "", 0);
    CHECK(db_match_game_insert(db, m.id, &bad) == DB_INVALID && contains(db_errmsg(db), "result 2"));
    bad = game(0, 0, 0, DB_REASON_NB, "", 0);
    CHECK(db_match_game_insert(db, m.id, &bad) == DB_INVALID);
    bad = game(0, 0, 0, DB_REASON_ABORT, NULL, 0);
    CHECK(db_match_game_insert(db, m.id, &bad) == DB_INVALID);
    bad = game(0, 0, 0, DB_REASON_ABORT, "", 0);
    CHECK(db_match_game_insert(db, 999, &bad) == DB_NOTFOUND && contains(db_errmsg(db), "no match 999"));
    CHECK(db_match_game_insert(db, 0, &bad) == DB_INVALID);
    CHECK(count_rows(db, "games") == 3);
    db_match_t none = got;
    none.id = 999;
    CHECK(db_match_finish(db, &none) == DB_NOTFOUND);
    CHECK(db_match_get(db, 999, &none) == DB_NOTFOUND);

    /* Players that cannot be told apart: the games are kept, the score is the caller's. */
    db_match_t same = {0};
    snprintf(same.engine_a, sizeof same.engine_a, "koma");
    snprintf(same.engine_b, sizeof same.engine_b, "koma");
    CHECK_OK(db, db_match_begin(db, &same));
    db_game_t sg = game(0, 0, DB_RESULT_WHITE_WIN, DB_REASON_RESIGN, "", 0);
    sg.black = sg.white = "koma";
    CHECK_OK(db, db_match_game_insert(db, same.id, &sg));
    CHECK_OK(db, db_match_get(db, same.id, &got));
    CHECK(got.games == 1 && got.wins + got.draws + got.losses == 0);

    /* Two records of one match joined. */
    CHECK_OK(db, db_match_move_games(db, same.id, m.id));
    CHECK(db_match_get(db, same.id, &got) == DB_NOTFOUND);
    CHECK_OK(db, db_match_get(db, m.id, &got));
    CHECK(got.games == 4 && got.wins == 1);
    CHECK(db_match_move_games(db, m.id, m.id) == DB_INVALID);
    CHECK(db_match_move_games(db, 999, m.id) == DB_NOTFOUND);

    /* A finished match in one call still works, and a model's cycle is kept. */
    db_model_t mod = {0};
    snprintf(mod.path, sizeof mod.path, "models/c0000.safetensors");
    snprintf(mod.xxh3, sizeof mod.xxh3, "0123456789abcdef");
    mod.loss_policy = mod.loss_value = mod.loss_legal = mod.loss_total = NAN;
    CHECK_OK(db, db_model_insert(db, &mod));
    db_match_t done = {0};
    done.model_a = mod.id;
    done.cycle = 0;
    done.wins = 3;
    done.elo = done.elo_lo = done.elo_hi = NAN;
    CHECK_OK(db, db_match_insert(db, &done));
    CHECK_OK(db, db_match_get(db, done.id, &got));
    CHECK(got.cycle == 0 && got.model_a == mod.id && got.wins == 3 && got.games == 0 && got.engine_a[0] == 0);

    /* Self-play figures are self-play games only; shard games still get ids 1, 2, ... */
    db_game_t sp = game(0, 10, DB_RESULT_BLACK_WIN, DB_REASON_DECLARATION, "5g5f", 10);
    db_shard_t s = shard("shards/c0000_000001.safetensors", 0, 10);
    CHECK_OK(db, db_shard_insert(db, &s, &sp, 1));
    CHECK(sp.id == 1 && sp.match_id == 0);
    int64_t ng = 0, np = 0;
    CHECK_OK(db, db_count(db, -1, &ng, &np));
    CHECK(ng == 1 && np == 10);
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.games == 1 && sum.black_wins == 1 && sum.white_wins == 0 && sum.draws == 0 && sum.avg_plies == 10.0);
    CHECK(sum.reasons[DB_REASON_DECLARATION] == 1 && sum.reasons[DB_REASON_CHECKMATE] == 0);
    CHECK(sum.match_games == 4 && sum.match_reasons[DB_REASON_CHECKMATE] == 1 &&
          sum.match_reasons[DB_REASON_RESIGN] == 2 && sum.match_reasons[DB_REASON_SENNICHITE] == 1 &&
          sum.matches == 2);
    CHECK_OK(db, db_games_of_shard(db, s.id, &gl));
    CHECK(gl.n == 1 && gl.games[0].match_id == 0 && strcmp(gl.games[0].black, "") == 0);
    db_game_list_free(&gl);
    db_close(db);
}

/* ---- all or nothing ---------------------------------------------------------------------- */
static void test_transactions(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *path = tmp_db("tx.db");
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;

    /* A game that fails inside the transaction (unknown model: foreign key)
     * takes its shard row and the earlier games with it. */
    db_game_t gs[3] = {
        game(0, 1, 1, DB_REASON_CHECKMATE, "7g7f", 1),
        game(1, 1, 1, DB_REASON_CHECKMATE, "7g7f", 1),
        game(2, 1, 1, DB_REASON_CHECKMATE, "7g7f", 1),
    };
    gs[2].model_id = 777;
    db_shard_t s = shard("shards/a.safetensors", 0, 3);
    db_status_t st = db_shard_insert(db, &s, gs, 3);
    CHECK(st == DB_CONSTRAINT);
    CHECK(starts_with(db_errmsg(db), path) && contains(db_errmsg(db), "insert game 3 of 3 of shard 'shards/a.safetensors'") &&
          contains(db_errmsg(db), "FOREIGN KEY"));
    CHECK(count_rows(db, "shards") == 0 && count_rows(db, "games") == 0);
    CHECK(s.id == 0 && gs[0].id == 0);
    gs[2].model_id = 0;
    CHECK_OK(db, db_shard_insert(db, &s, gs, 3));
    CHECK(count_rows(db, "shards") == 1 && count_rows(db, "games") == 3);

    /* Inside the caller's transaction the insert is a savepoint: the caller's
     * rollback takes it back, and a failing insert leaves the caller's
     * earlier work in place. */
    CHECK_OK(db, db_begin(db));
    db_shard_t s2 = shard("shards/b.safetensors", 0, 1);
    CHECK_OK(db, db_shard_insert(db, &s2, gs, 1));
    db_shard_t s3 = shard("shards/c.safetensors", 0, 3);
    gs[1].model_id = 999;
    CHECK(db_shard_insert(db, &s3, gs, 3) == DB_CONSTRAINT);
    gs[1].model_id = 0;
    CHECK_OK(db, db_commit(db));
    CHECK(count_rows(db, "shards") == 2 && count_rows(db, "games") == 4);
    CHECK_OK(db, db_begin(db));
    CHECK_OK(db, db_shard_insert(db, &s3, gs, 3));
    CHECK_OK(db, db_rollback(db));
    CHECK(count_rows(db, "shards") == 2 && count_rows(db, "games") == 4);
    CHECK_OK(db, db_rollback(db)); /* nothing open: harmless */

    /* A full disk (simulated with max_page_count): DB_FULL, a clear message,
     * nothing half-registered, and the database works again afterwards. */
    CHECK_OK(db, db_exec(db, "PRAGMA max_page_count = 1"));
    static char moves[6000];
    for (int i = 0; i < 1000; i++) memcpy(moves + 5 * i, "7g7f ", 5);
    moves[4999] = 0;
    db_game_t big[50];
    for (int i = 0; i < 50; i++) big[i] = game(i, 1, 0, DB_REASON_MAX_PLY, moves, 1000);
    db_shard_t sf = shard("shards/full.safetensors", 0, 50);
    st = db_shard_insert(db, &sf, big, 50);
    CHECK(st == DB_FULL);
    CHECK(starts_with(db_errmsg(db), path) && contains(db_errmsg(db), "disk is full") &&
          contains(db_errmsg(db), "shard 'shards/full.safetensors'"));
    CHECK(count_rows(db, "shards") == 2 && count_rows(db, "games") == 4);
    CHECK_OK(db, db_exec(db, "PRAGMA max_page_count = 1073741823"));
    CHECK_OK(db, db_shard_insert(db, &sf, big, 50));
    CHECK(count_rows(db, "shards") == 3 && count_rows(db, "games") == 54);
    CHECK(db_exec(db, "SELEC nonsense") == DB_ERROR && contains(db_errmsg(db), "exec 'SELEC nonsense'"));
    db_close(db);
}

/* ---- the shard protocol and the start-up check ----------------------------------------------- */
typedef struct {
    const char *text;
    int fail; /* 0 ok, 1 fail before writing, 2 write then fail */
} writer_arg_t;

static int write_shard_file(const char *path, void *arg, char *err, size_t errlen) {
    writer_arg_t *a = arg;
    if (a->fail == 1) {
        set_err(err, errlen, "%s: No space left on device", path);
        return DB_FULL;
    }
    if (compat_write_file_durable(path, a->text, strlen(a->text), err, errlen) != 0) return DB_ERROR;
    if (a->fail == 2) {
        set_err(err, errlen, "%s: failed after the rename", path);
        return DB_ERROR;
    }
    return 0;
}

static void test_shard_files(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *run = tmp("run");
    tmp("run/shards");
    tmp("run/models");
    tmp("run/orphans");
    CHECK(compat_mkdir_p(tmp("run/shards"), err, sizeof err) == 0);
    CHECK(compat_mkdir_p(tmp("run/models"), err, sizeof err) == 0);
    const char *path = tmp_db("run/koma.db");
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;

    /* The whole protocol: intent, durable write, measure, register. */
    writer_arg_t ok = {"shard bytes 0123456789", 0};
    db_game_t g = game(0, 2, 1, DB_REASON_RESIGN, "7g7f 3c3d", 2);
    db_shard_t s1 = shard("shards/s1.safetensors", 0, 2);
    s1.bytes = 0;
    s1.xxh3[0] = 0;
    CHECK_OK(db, db_shard_commit(db, run, &s1, &g, 1, write_shard_file, &ok));
    uint64_t h;
    int64_t bytes;
    CHECK(db_file_xxh3(tmp("run/shards/s1.safetensors"), &h, &bytes, err, sizeof err) == 0);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    db_shard_t back;
    CHECK_OK(db, db_shard_get(db, s1.id, &back));
    CHECK(back.bytes == (int64_t)strlen(ok.text) && bytes == back.bytes && strcmp(back.xxh3, hex) == 0);
    CHECK(g.shard_id == s1.id);
    CHECK(count_rows(db, "shard_intents") == 0);

    /* Never over an existing file, registered or not. */
    db_shard_t again = shard("shards/s1.safetensors", 0, 2);
    CHECK(db_shard_commit(db, run, &again, &g, 1, write_shard_file, &ok) == DB_CONSTRAINT);
    CHECK(contains(db_errmsg(db), "already registered"));
    write_text(tmp("run/shards/stray.safetensors"), "stray");
    db_shard_t stray = shard("shards/stray.safetensors", 0, 0);
    CHECK(db_shard_commit(db, run, &stray, NULL, 0, write_shard_file, &ok) == DB_CONSTRAINT);
    CHECK(contains(db_errmsg(db), "already exists but is not registered"));
    compat_remove_file(tmp("run/shards/stray.safetensors"));

    /* A write that fails (out of space) leaves nothing behind. */
    writer_arg_t full = {"x", 1};
    db_shard_t s2 = shard("shards/s2.safetensors", 0, 2);
    CHECK(db_shard_commit(db, run, &s2, &g, 1, write_shard_file, &full) == DB_FULL);
    /* the shard file failed, not the database: the message names the shard and says the disk is full */
    CHECKF(starts_with(db_errmsg(db), tmp("run/shards/s2.safetensors")) && contains(db_errmsg(db), "the disk is full") &&
               contains(db_errmsg(db), "No space left"),
           "%s", db_errmsg(db));
    CHECK(!compat_file_exists(tmp("run/shards/s2.safetensors")));
    writer_arg_t late = {"late", 2};
    CHECK(db_shard_commit(db, run, &s2, &g, 1, write_shard_file, &late) == DB_ERROR);
    CHECK(!compat_file_exists(tmp("run/shards/s2.safetensors")));
    /* A registration that fails takes its file back. */
    db_game_t badg = g;
    badg.model_id = 4242;
    CHECK(db_shard_commit(db, run, &s2, &badg, 1, write_shard_file, &ok) == DB_CONSTRAINT);
    CHECK(!compat_file_exists(tmp("run/shards/s2.safetensors")));
    CHECK(count_rows(db, "shard_intents") == 0 && count_rows(db, "shards") == 1);

    /* Now the states a kill -9 can leave, and the ones that should never exist. */
    db_shard_t s3 = shard("shards/s3.safetensors", 0, 2);
    CHECK_OK(db, db_shard_commit(db, run, &s3, &g, 1, write_shard_file, &ok));
    db_shard_t s4 = shard("shards/s4.safetensors", 0, 2);
    CHECK_OK(db, db_shard_commit(db, run, &s4, &g, 1, write_shard_file, &ok));
    db_shard_t s5 = shard("shards/s5.safetensors", 0, 2);
    CHECK_OK(db, db_shard_commit(db, run, &s5, &g, 1, write_shard_file, &ok));
    compat_remove_file(tmp("run/shards/s3.safetensors"));               /* missing */
    write_text(tmp("run/shards/s4.safetensors"), "short");                /* size differs */
    write_text(tmp("run/shards/s5.safetensors"), "shard bytes 0123456788"); /* same size, other bytes */
    /* killed after the rename, before the commit */
    CHECK_OK(db, db_shard_intent(db, "shards/orphan.safetensors"));
    write_text(tmp("run/shards/orphan.safetensors"), "orphan data");
    /* killed in the middle of the write */
    CHECK_OK(db, db_shard_intent(db, "shards/half.safetensors"));
    char tmpname[128];
    snprintf(tmpname, sizeof tmpname, "run/shards/half.safetensors.tmp.%d", compat_getpid());
    write_text(tmp(tmpname), "half");
    snprintf(tmpname, sizeof tmpname, "shards/half.safetensors.tmp.%d", compat_getpid());
    /* killed before writing anything */
    CHECK_OK(db, db_shard_intent(db, "shards/never.safetensors"));
    /* a model row without its file */
    db_model_t m = {0};
    snprintf(m.path, sizeof m.path, "models/c0000.safetensors");
    snprintf(m.xxh3, sizeof m.xxh3, "0000000000000000");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    CHECK_OK(db, db_model_insert(db, &m));
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.pending == 3);

    db_check_report_t rep;
    CHECK_OK(db, db_check_shards(db, run, 0, &rep));
    CHECK(rep.shards_checked == 4 && rep.models_checked == 1);
    CHECK(has_item(&rep, DB_CHECK_MISSING, "shards/s3.safetensors"));
    CHECK(has_item(&rep, DB_CHECK_MISMATCH, "shards/s4.safetensors"));
    CHECK(!has_item(&rep, DB_CHECK_MISMATCH, "shards/s5.safetensors")); /* sizes only without VERIFY */
    CHECK(has_item(&rep, DB_CHECK_ORPHAN_MOVED, "shards/orphan.safetensors"));
    CHECK(has_item(&rep, DB_CHECK_TMP_REMOVED, tmpname));
    CHECK(has_item(&rep, DB_CHECK_MISSING, "models/c0000.safetensors"));
    CHECK(rep.n == 5);
    for (int32_t i = 0; i < rep.n; i++) printf("  check: %d %s: %s\n", rep.items[i].kind, rep.items[i].path, rep.items[i].what);
    db_check_report_free(&rep);
    db_check_report_free(NULL);
    CHECK(!compat_file_exists(tmp("run/shards/orphan.safetensors")));
    CHECK(compat_file_exists(tmp("run/orphans/shards_orphan.safetensors")));
    tmp("run/orphans/shards_orphan.safetensors.1");
    snprintf(tmpname, sizeof tmpname, "run/shards/half.safetensors.tmp.%d", compat_getpid());
    CHECK(!compat_file_exists(tmp(tmpname)));
    CHECK(count_rows(db, "shard_intents") == 0);
    CHECK(count_rows(db, "shards") == 4); /* rows are never deleted */

    /* VERIFY hashes the files; a second run finds no orphans any more. */
    CHECK_OK(db, db_check_shards(db, run, DB_CHECK_VERIFY, &rep));
    CHECK(has_item(&rep, DB_CHECK_MISMATCH, "shards/s5.safetensors"));
    CHECK(!has_item(&rep, DB_CHECK_ORPHAN_MOVED, "shards/orphan.safetensors") && rep.n == 4);
    db_check_report_free(&rep);

    /* The same orphan name again is moved next to the first; DELETE deletes. */
    CHECK_OK(db, db_shard_intent(db, "shards/orphan.safetensors"));
    write_text(tmp("run/shards/orphan.safetensors"), "orphan 2");
    CHECK_OK(db, db_check_shards(db, run, 0, &rep));
    CHECK(has_item(&rep, DB_CHECK_ORPHAN_MOVED, "shards/orphan.safetensors"));
    CHECK(compat_file_exists(tmp("run/orphans/shards_orphan.safetensors.1")));
    db_check_report_free(&rep);
    CHECK_OK(db, db_shard_intent(db, "shards/orphan.safetensors"));
    write_text(tmp("run/shards/orphan.safetensors"), "orphan 3");
    CHECK_OK(db, db_check_shards(db, run, DB_CHECK_DELETE_ORPHANS, &rep));
    CHECK(has_item(&rep, DB_CHECK_ORPHAN_DELETED, "shards/orphan.safetensors"));
    CHECK(!compat_file_exists(tmp("run/shards/orphan.safetensors")));
    db_check_report_free(&rep);
    tmp("run/shards/s1.safetensors");
    tmp("run/shards/s4.safetensors");
    tmp("run/shards/s5.safetensors");
    db_close(db);
}

/* ---- db_probe waits for a busy database -------------------------------------------- */
typedef struct {
    const char *path;
    atomic_int locked;
} hold_arg_t;

/* Holds koma.db exclusively for 400 ms (as a connection recovering the WAL
 * of a killed writer does), then lets go. */
static void *hold_exclusive(void *arg) {
    hold_arg_t *h = arg;
    sqlite3 *s = NULL;
    if (sqlite3_open_v2(h->path, &s, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_exec(s, "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; "
                        "UPDATE runs SET command = command WHERE 0", NULL, NULL, NULL) == SQLITE_OK) {
        atomic_store(&h->locked, 1);
        compat_sleep_ms(400);
        sqlite3_exec(s, "COMMIT", NULL, NULL, NULL);
    }
    atomic_store(&h->locked, atomic_load(&h->locked) ? 2 : -1);
    sqlite3_close(s);
    return NULL;
}

static void test_probe_busy(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *path = tmp_db("probe_busy.db");
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    db_close(db);
    hold_arg_t h = {path, 0};
    compat_thread_t th;
    KOMA_ASSERT(compat_thread_create(&th, hold_exclusive, &h) == 0);
    while (atomic_load(&h.locked) == 0) compat_sleep_ms(1);
    CHECK(atomic_load(&h.locked) == 1);
    db_probe_t kind = DB_PROBE_ABSENT;
    int64_t t0 = compat_now_ms();
    db_status_t st = db_probe(path, &kind, err, sizeof err);
    CHECKF(st == DB_OK && kind == DB_PROBE_KOMA, "db_probe on a database held for 400 ms: %d (%s)", (int)st,
           st == DB_OK ? "" : err);
    CHECKF(compat_now_ms() - t0 >= 100, "db_probe waited for the lock (%lld ms)", (long long)(compat_now_ms() - t0));
    compat_thread_join(th);
}

/* ---- db_probe and a hot rollback journal ---------------------------------------- */
static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    KOMA_ASSERT(a && b);
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) KOMA_ASSERT(fwrite(buf, 1, n, b) == n);
    fclose(a);
    KOMA_ASSERT(fclose(b) == 0);
}

/* A new run killed inside its first transaction (the schema, written with a
 * rollback journal before the file turns to WAL) leaves the file and a hot
 * journal: the copy of both, taken while a transaction that spilled pages
 * into the file is open, is that state. The probe must see the last commit
 * (an empty file), not fail read-only, and the run must open. */
static void test_probe_hot_journal(void) {
    char err[DB_ERR_MAX], b[200];
    const char *src = tmp_db("hot_src.db"), *dst = tmp_db("hot.db");
    snprintf(b, sizeof b, "%s-journal", src);
    const char *src_j = tmp(b + strlen(g_dir) + 1);
    snprintf(b, sizeof b, "hot.db-journal");
    const char *dst_j = tmp(b);
    sqlite3 *s = NULL;
    KOMA_ASSERT(sqlite3_open_v2(src, &s, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) == SQLITE_OK);
    KOMA_ASSERT(sqlite3_exec(s, "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 2; BEGIN; "
                                "CREATE TABLE u (y); "
                                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) "
                                "INSERT INTO u SELECT randomblob(1000) FROM n",
                             NULL, NULL, NULL) == SQLITE_OK);
    CHECK(compat_file_exists(src_j));
    copy_file(src, dst);
    copy_file(src_j, dst_j);
    sqlite3_exec(s, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(s);
    /* the state as a kill leaves it: a read-only reader cannot read it */
    KOMA_ASSERT(sqlite3_open_v2(dst, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(s, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) == SQLITE_READONLY);
    sqlite3_close(s);
    db_probe_t kind = DB_PROBE_ABSENT;
    db_status_t st = db_probe(dst, &kind, err, sizeof err);
    CHECKF(st == DB_OK && kind == DB_PROBE_BLANK, "db_probe after a kill in the first transaction: %d %d (%s)",
           (int)st, (int)kind, st == DB_OK ? "" : err);
    CHECK(!compat_file_exists(dst_j)); /* rolled back */
    db_t *db = NULL;
    CHECK_OK(db, db_open(dst, 0, &db, err, sizeof err));
    db_close(db);
}

int main(void) {
    if (t_db_setup("db") != 0) return 1;
    test_open_and_schema();
    test_round_trips();
    test_match_games();
    test_transactions();
    test_shard_files();
    test_probe_busy();
    test_probe_hot_journal();
    t_db_cleanup();
    return t_done("test_db");
}
