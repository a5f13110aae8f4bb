/* test_db.c - data/db.c and data/writer.c: create/open and schema checks,
 * round trips of every table, the migration of a real version 1 file
 * (every row kept, new constraints, the interim match_games rows, a failed
 * migration leaving the file as it was) and of a version 2 file (the
 * resignation figures of cycle_metrics, NULL in old rows), match games (two outside engines,
 * recorded game by game), all-or-nothing shard registration (including a
 * full disk), the start-up check that moves orphans aside, and the writer
 * thread with several producers, backpressure, flush and bounded shutdown. */
#include "compat/compat.h"
#include "compat/err.h"
#include "data/db.h"
#include "data/writer.h"
#include "tests/koma_test.h"

#include <math.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A db call that must succeed; prints the database's message if not. */
#define CHECK_OK(db, call)                                                                                  \
    do {                                                                                                    \
        t_count_();                                                                                         \
        db_status_t st_ = (call);                                                                           \
        if (st_ != DB_OK) t_fail(__FILE__, __LINE__, #call, " -> %s: %s", db_status_name(st_), db_errmsg(db)); \
    } while (0)

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }
static int starts_with(const char *s, const char *p) { return s && strncmp(s, p, strlen(p)) == 0; }

/* ---- temporary files ------------------------------------------------------------ */
static char g_dir[400];
static char *g_cleanup[4096];
static int g_ncleanup;

/* <g_dir>/<name>, remembered for removal at exit (files before their folders). */
static const char *tmp(const char *name) {
    char buf[800];
    snprintf(buf, sizeof buf, "%s/%s", g_dir, name);
    for (int i = 0; i < g_ncleanup; i++)
        if (strcmp(g_cleanup[i], buf) == 0) return g_cleanup[i];
    KOMA_ASSERT(g_ncleanup < 4096);
    g_cleanup[g_ncleanup] = strdup(buf);
    return g_cleanup[g_ncleanup++];
}

/* A database path plus its WAL files, all scheduled for removal. */
static const char *tmp_db(const char *name) {
    char b[200];
    snprintf(b, sizeof b, "%s-wal", name);
    tmp(b);
    snprintf(b, sizeof b, "%s-shm", name);
    tmp(b);
    return tmp(name);
}

static void write_text(const char *path, const char *text) {
    char err[512];
    KOMA_ASSERT(compat_write_file_durable(path, text, strlen(text), err, sizeof err) == 0);
}

static void sql_raw(const char *path, const char *sql) {
    sqlite3 *sq;
    KOMA_ASSERT(sqlite3_open(path, &sq) == SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(sq, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "raw sql failed: %s\n", msg);
        KOMA_ASSERT(0);
    }
    sqlite3_close(sq);
}

static int64_t sql_int(const char *path, const char *sql) {
    sqlite3 *sq;
    sqlite3_stmt *s;
    KOMA_ASSERT(sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    KOMA_ASSERT(sqlite3_prepare_v2(sq, sql, -1, &s, NULL) == SQLITE_OK);
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -999;
    sqlite3_finalize(s);
    sqlite3_close(sq);
    return v;
}

static void sql_text(const char *path, const char *sql, char *out, size_t len) {
    sqlite3 *sq;
    sqlite3_stmt *s;
    KOMA_ASSERT(sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    KOMA_ASSERT(sqlite3_prepare_v2(sq, sql, -1, &s, NULL) == SQLITE_OK);
    out[0] = 0;
    if (sqlite3_step(s) == SQLITE_ROW) snprintf(out, len, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(sq);
}

/* A statement that may fail, on its own connection with foreign keys on;
 * returns SQLite's code and its message in msg. */
static int sql_try(const char *path, const char *sql, char *msg, size_t len) {
    sqlite3 *sq;
    KOMA_ASSERT(sqlite3_open(path, &sq) == SQLITE_OK);
    sqlite3_busy_timeout(sq, 5000);
    KOMA_ASSERT(sqlite3_exec(sq, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) == SQLITE_OK);
    char *m = NULL;
    int rc = sqlite3_exec(sq, sql, NULL, NULL, &m);
    snprintf(msg, len, "%s", m ? m : "");
    sqlite3_free(m);
    sqlite3_close(sq);
    return rc;
}

/* ---- fixtures -------------------------------------------------------------------- */
static db_game_t game(int64_t first_row, int64_t rows, int32_t result, db_reason_t reason,
                      const char *moves, int32_t plies) {
    db_game_t g = {0};
    g.first_row = first_row;
    g.row_count = rows;
    g.start_sfen = "startpos";
    g.moves = moves;
    g.plies = plies;
    g.result = result;
    g.reason = reason;
    return g;
}

static db_shard_t shard(const char *path, int32_t cycle, int64_t rows) {
    db_shard_t s = {0};
    snprintf(s.path, sizeof s.path, "%s", path);
    s.cycle = cycle;
    s.rows = rows;
    s.features_version = 3;
    s.bytes = 1000 + rows;
    snprintf(s.xxh3, sizeof s.xxh3, "%016llx", (unsigned long long)(0x1234 + rows));
    return s;
}

static int64_t count_rows(db_t *db, const char *table) {
    /* Through a second connection: what is committed, not what is pending. */
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    return sql_int(db_path(db), sql);
}

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
static void test_round_trips(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *path = tmp_db("rt.db");
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;

    /* runs */
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

    /* models */
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

    /* shards and games */
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

    /* train steps: batched, replaced when written again */
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

    /* cycle metrics: put, get, replace */
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

    /* matches */
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

    /* summary */
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

    /* The new constraints hold. */
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

    /* The typed API on the migrated file. Self-play figures leave match games out. */
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
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

/* A file of schema `version` (2..5) as that version's code left it: v1's
 * schema and the deltas up to it (v4 changed no table), the application id,
 * the version, WAL, foreign keys on, and v2's rows. */
static void write_frozen(const char *path, int version) {
    sql_raw(path, v1_schema);
    sql_raw(path, v2_delta);
    if (version >= 3) sql_raw(path, v3_delta);
    if (version >= 5) sql_raw(path, v5_delta);
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
    CHECK(db && db_schema_version(db) == 6);
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

static int has_item(const db_check_report_t *r, db_check_kind_t kind, const char *path) {
    for (int32_t i = 0; i < r->n; i++)
        if (r->items[i].kind == kind && strcmp(r->items[i].path, path) == 0) return 1;
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

/* ---- the writer thread ------------------------------------------------------------------------- */
#define PRODUCERS 4
#define JOBS_PER_PRODUCER 12
#define STEPS_PER_PRODUCER 150

typedef struct {
    int producer, index;
    const char *run;
    atomic_int *done_calls;
    atomic_int *done_ok;
    int sleep_ms;
    atomic_int *gate;    /* when set, the job waits for *gate != 0 before its sleep */
    atomic_int *entered; /* when set, counts jobs the writer thread has begun */
    int big;          /* games with long move lists: the database must grow */
    char text[64];
} job_arg_t;

static int job_write(const char *path, void *arg, char *err, size_t errlen) {
    job_arg_t *a = arg;
    return compat_write_file_durable(path, a->text, strlen(a->text), err, errlen) == 0 ? 0 : DB_ERROR;
}

/* Runs on the writer thread: writes and registers a shard of 3 games. */
static int job_run(db_t *db, void *arg, char *err, size_t errlen) {
    job_arg_t *a = arg;
    if (a->entered) atomic_fetch_add(a->entered, 1);
    while (a->gate && !atomic_load(a->gate)) compat_sleep_ms(1);
    if (a->sleep_ms) compat_sleep_ms(a->sleep_ms);
    db_shard_t s = shard("", 1, 30);
    snprintf(s.path, sizeof s.path, "shards/p%d_j%03d.safetensors", a->producer, a->index);
    snprintf(a->text, sizeof a->text, "producer %d job %d", a->producer, a->index);
    static char long_moves[20001];
    if (a->big && !long_moves[0]) { /* only ever filled on the writer thread */
        for (int i = 0; i < 4000; i++) memcpy(long_moves + 5 * i, "7g7f ", 5);
        long_moves[19999] = 0;
    }
    const char *mv = a->big ? long_moves : "7g7f";
    db_game_t g[3] = {game(0, 10, 1, DB_REASON_CHECKMATE, mv, 10), game(10, 10, -1, DB_REASON_RESIGN, mv, 10),
                      game(20, 10, 0, DB_REASON_SENNICHITE, mv, 10)};
    db_status_t st = db_shard_commit(db, a->run, &s, g, 3, job_write, a);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void job_done(void *arg, int status, const char *err) {
    job_arg_t *a = arg;
    (void)err;
    atomic_fetch_add(a->done_calls, 1);
    if (status == DB_OK) atomic_fetch_add(a->done_ok, 1);
    free(a);
}

typedef struct {
    db_writer_t *w;
    int producer;
    const char *run;
    atomic_int *done_calls, *done_ok;
    int submit_failures;
} producer_t;

static void *producer_main(void *arg) {
    producer_t *p = arg;
    int job = 0;
    for (int i = 0; i < STEPS_PER_PRODUCER; i++) {
        db_train_step_t row = {0};
        row.step = (int64_t)p->producer * 100000 + i;
        row.cycle = 1;
        row.lr = 0.01;
        row.loss_total = 1.0 / (i + 1);
        row.loss_policy = row.loss_value = row.loss_legal = NAN;
        row.acc_policy = row.acc_value = row.acc_legal = row.grad_norm = NAN;
        if (db_writer_train_step(p->w, &row, -1) != DB_OK) p->submit_failures++;
        if (i % (STEPS_PER_PRODUCER / JOBS_PER_PRODUCER) == 0 && job < JOBS_PER_PRODUCER) {
            job_arg_t *a = calloc(1, sizeof *a);
            a->producer = p->producer;
            a->index = job++;
            a->run = p->run;
            a->done_calls = p->done_calls;
            a->done_ok = p->done_ok;
            db_job_t j = {job_run, job_done, a};
            if (db_writer_submit(p->w, &j, -1) != DB_OK) {
                p->submit_failures++;
                free(a);
            }
        }
    }
    return NULL;
}

static void test_writer_producers(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *run = tmp("wrun");
    tmp("wrun/shards");
    CHECK(compat_mkdir_p(tmp("wrun/shards"), err, sizeof err) == 0);
    for (int p = 0; p < PRODUCERS; p++)
        for (int j = 0; j < JOBS_PER_PRODUCER; j++) {
            char name[96];
            snprintf(name, sizeof name, "wrun/shards/p%d_j%03d.safetensors", p, j);
            tmp(name);
        }
    const char *path = tmp_db("wrun/koma.db");
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;
    db_t *reader = NULL; /* the trainer's view: a read-only connection while the writer writes */
    CHECK_OK(reader, db_open(path, DB_OPEN_READONLY, &reader, err, sizeof err));

    db_writer_t *w = db_writer_start(db, 8, err, sizeof err); /* small: producers feel backpressure */
    CHECK(w != NULL);
    if (!w) return;
    atomic_int done_calls = 0, done_ok = 0;
    producer_t prod[PRODUCERS];
    compat_thread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        prod[p] = (producer_t){w, p, run, &done_calls, &done_ok, 0};
        CHECK(compat_thread_create(&th[p], producer_main, &prod[p]) == 0);
    }
    int64_t seen_games = 0;
    for (int i = 0; i < 20; i++) { /* reads never block on the writer */
        int64_t ng = 0;
        CHECK_OK(reader, db_count(reader, -1, &ng, NULL));
        CHECK(ng >= seen_games);
        seen_games = ng;
        compat_sleep_ms(2);
    }
    for (int p = 0; p < PRODUCERS; p++) compat_thread_join(th[p]);
    CHECK(db_writer_flush(w, 30000) == DB_OK);
    /* After the flush every row is visible to another connection. */
    int64_t ng = 0, np = 0;
    CHECK_OK(reader, db_count(reader, -1, &ng, &np));
    CHECK(ng == PRODUCERS * JOBS_PER_PRODUCER * 3 && np == PRODUCERS * JOBS_PER_PRODUCER * 30);
    db_train_step_t *rows = calloc(PRODUCERS * STEPS_PER_PRODUCER + 1, sizeof *rows);
    int32_t nr = 0;
    CHECK_OK(reader, db_train_steps_get(reader, 0, INT64_MAX, rows, PRODUCERS * STEPS_PER_PRODUCER + 1, &nr));
    CHECK(nr == PRODUCERS * STEPS_PER_PRODUCER);
    free(rows);

    db_cycle_metrics_t cm = {0};
    cm.cycle = 1;
    cm.games = ng;
    cm.started = cm.finished = cm.selfplay_s = cm.train_s = cm.positions_per_s = cm.evals_per_s = NAN;
    cm.avg_batch = cm.busy_pct = cm.avg_plies = cm.elo = cm.elo_lo = cm.elo_hi = NAN;
    CHECK(db_writer_cycle_metrics(w, &cm, -1) == DB_OK);
    db_train_step_t late = {0};
    late.step = 999999;
    CHECK(db_writer_train_step(w, &late, -1) == DB_OK); /* written by stop, not lost */

    CHECK(db_writer_stop(w, 30000) == DB_OK);
    CHECK(db_writer_stop(w, 0) == DB_OK); /* twice is fine */
    db_writer_stats_t stats;
    db_writer_stats(w, &stats);
    CHECK(stats.jobs_done == PRODUCERS * JOBS_PER_PRODUCER && stats.jobs_failed == 0 && stats.jobs_cancelled == 0);
    CHECK(stats.steps_written == PRODUCERS * STEPS_PER_PRODUCER + 1 && stats.steps_failed == 0);
    CHECK(stats.cycles_written == 1 && stats.queued == 0 && stats.last_status == DB_OK);
    CHECK(atomic_load(&done_calls) == PRODUCERS * JOBS_PER_PRODUCER && atomic_load(&done_ok) == done_calls);
    for (int p = 0; p < PRODUCERS; p++) CHECK(prod[p].submit_failures == 0);
    CHECK(db_writer_train_step(w, &late, -1) == DB_CANCELLED); /* stopped: refused, not queued */
    db_writer_free(w);

    /* The db is the caller's again. */
    db_cycle_metrics_t cg;
    CHECK_OK(db, db_cycle_metrics_get(db, 1, &cg));
    CHECK(cg.games == ng);
    db_summary_t sum;
    CHECK_OK(db, db_summary(db, &sum));
    CHECK(sum.train_steps == PRODUCERS * STEPS_PER_PRODUCER + 1 && sum.last_step == 999999 && sum.pending == 0);
    CHECK(sum.shards == PRODUCERS * JOBS_PER_PRODUCER);
    db_check_report_t rep;
    CHECK_OK(db, db_check_shards(db, run, DB_CHECK_VERIFY, &rep));
    CHECK(rep.n == 0 && rep.shards_checked == PRODUCERS * JOBS_PER_PRODUCER);
    db_check_report_free(&rep);
    db_close(reader);
    db_close(db);
}

/* A producer blocked on a full queue, released by stop. */
typedef struct {
    db_writer_t *w;
    atomic_int *done_calls, *done_ok, *gate, *entered;
    int results[64];
    int n;
} blocked_t;

static void *blocked_main(void *arg) {
    blocked_t *b = arg;
    for (b->n = 0; b->n < 64; b->n++) {
        job_arg_t *a = calloc(1, sizeof *a);
        a->sleep_ms = 100;
        a->producer = 9;
        a->index = 100 + b->n;
        a->run = g_dir;
        a->done_calls = b->done_calls;
        a->done_ok = b->done_ok;
        a->gate = b->gate;
        a->entered = b->entered;
        db_job_t j = {job_run, job_done, a};
        b->results[b->n] = db_writer_submit(b->w, &j, -1);
        if (b->results[b->n] != DB_OK) {
            free(a);
            b->n++;
            break;
        }
    }
    return NULL;
}

static void test_writer_shutdown(void) {
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    const char *path = tmp_db("wstop.db");
    CHECK(compat_mkdir_p(tmp("shards"), err, sizeof err) == 0);
    for (int i = 0; i < 64; i++) {
        char name[96];
        snprintf(name, sizeof name, "shards/p9_j%03d.safetensors", 100 + i);
        tmp(name);
    }
    CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
    if (!db) return;

    CHECK(db_writer_start(db, 0, err, sizeof err) == NULL && contains(err, "capacity 0"));
    CHECK(db_writer_start(NULL, 4, err, sizeof err) == NULL);

    /* Slow jobs, a full queue, a short deadline: stop returns within bounds,
     * the queued jobs are cancelled, every job's done() runs exactly once
     * (written or cancelled), the blocked producer is released. */
    db_writer_t *w = db_writer_start(db, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) return;
    /* The job in flight waits at the gate until the full-queue checks are
     * done, so no slot can open under them (a 100 ms sleep alone could end
     * during them on a loaded machine). */
    atomic_int done_calls = 0, done_ok = 0, gate = 0, entered = 0;
    blocked_t b = {w, &done_calls, &done_ok, &gate, &entered, {0}, 0};
    compat_thread_t th;
    CHECK(compat_thread_create(&th, blocked_main, &b) == 0);
    db_writer_stats_t stats;
    /* Until 4 are queued behind the one running: the first must have left the
     * queue (entered the writer), or its slot could open under the checks
     * below (seen under TSan, where the writer thread starts late). */
    for (int i = 0; i < 2500; i++) {
        db_writer_stats(w, &stats);
        if (stats.queued == 4 && atomic_load(&entered) == 1) break;
        compat_sleep_ms(2);
    }
    CHECK(stats.queued == 4 && atomic_load(&entered) == 1);
    /* The queue is full: a submit that does not wait says so. */
    atomic_int extra_calls = 0, extra_ok = 0;
    job_arg_t *extra = calloc(1, sizeof *extra);
    extra->done_calls = &extra_calls, extra->done_ok = &extra_ok;
    extra->run = g_dir, extra->producer = 8;
    db_job_t ej = {job_run, job_done, extra};
    int r0 = db_writer_submit(w, &ej, 0);
    int r20 = r0 == DB_OK ? DB_OK : db_writer_submit(w, &ej, 20);
    CHECK(r0 == DB_TIMEOUT && r20 == DB_TIMEOUT);
    if (r0 != DB_OK && r20 != DB_OK) free(extra); /* else the writer owns it: job_done frees it */
    CHECK(db_writer_flush(w, 1) == DB_TIMEOUT);
    atomic_store(&gate, 1);

    int64_t t0 = compat_now_ms();
    int st = db_writer_stop(w, 50);
    int64_t took = compat_now_ms() - t0;
    CHECK(st == DB_TIMEOUT);
    CHECK(took < 1000); /* the deadline plus the job in flight */
    compat_thread_join(th);
    CHECK(b.n >= 1 && b.results[b.n - 1] == DB_CANCELLED);
    int accepted = 0;
    for (int i = 0; i < b.n; i++) accepted += b.results[i] == DB_OK;
    db_writer_stats(w, &stats);
    CHECK(atomic_load(&done_calls) == accepted);
    CHECK(stats.jobs_done + stats.jobs_cancelled == accepted && stats.jobs_cancelled >= 3);
    CHECK(atomic_load(&done_ok) == stats.jobs_done);
    CHECK(db_writer_flush(w, 100) == DB_OK); /* everything is accounted for */
    printf("writer shutdown: %d accepted, %lld written, %lld cancelled, stop took %lld ms\n", accepted,
           (long long)stats.jobs_done, (long long)stats.jobs_cancelled, (long long)took);
    db_writer_free(w);
    CHECK(count_rows(db, "shards") == stats.jobs_done && count_rows(db, "shard_intents") == 0);

    /* A failing row and a full disk reach the stats and done(). */
    w = db_writer_start(db, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) return;
    db_train_step_t row = {0};
    row.step = 1;
    row.lr = NAN; /* lr is NOT NULL: this row cannot be written */
    row.loss_policy = row.loss_value = row.loss_legal = row.loss_total = NAN;
    row.acc_policy = row.acc_value = row.acc_legal = row.grad_norm = NAN;
    CHECK(db_writer_train_step(w, &row, -1) == DB_OK);
    CHECK(db_writer_flush(w, 10000) == DB_OK);
    db_writer_stats(w, &stats);
    CHECK(stats.steps_failed == 1 && stats.last_status == DB_CONSTRAINT && contains(stats.last_error, "train step 1"));
    CHECK(db_writer_stop(w, 1000) == DB_OK);
    db_writer_free(w);

    CHECK_OK(db, db_exec(db, "PRAGMA max_page_count = 1")); /* the db is ours between writers */
    w = db_writer_start(db, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) return;
    int calls_before = atomic_load(&done_calls);
    job_arg_t *a = calloc(1, sizeof *a);
    a->producer = 9;
    a->index = 500;
    a->big = 1;
    a->run = g_dir;
    a->done_calls = &done_calls;
    a->done_ok = &done_ok;
    tmp("shards/p9_j500.safetensors");
    db_job_t j = {job_run, job_done, a};
    CHECK(db_writer_submit(w, &j, -1) == DB_OK);
    CHECK(db_writer_flush(w, 10000) == DB_OK);
    db_writer_stats(w, &stats);
    CHECK(stats.jobs_failed == 1 && stats.last_status == DB_FULL && contains(stats.last_error, "disk is full") &&
          starts_with(stats.last_error, path));
    CHECK(atomic_load(&done_calls) == calls_before + 1);
    CHECK(!compat_file_exists(tmp("shards/p9_j500.safetensors"))); /* no orphan left */
    db_writer_free(w);
    CHECK_OK(db, db_exec(db, "PRAGMA max_page_count = 1073741823"));
    db_writer_free(NULL);
    db_close(db);
}

/* ---- crash and resume ------------------------------------------------------------------------ */
/* The test binary runs itself as a child ("--crash-child <dir> <iteration>
 * <mode>") that writes shards and train steps through the writer thread and
 * dies with _Exit at some moment: no cleanup, no stdio flush, as under
 * kill -9 (the OS keeps what was written). Mode 0 dies right after a shard
 * file's rename, before its registration (the orphan window); mode 1 dies
 * after a delay that depends on the iteration. The parent then reopens the
 * run as a restarted command would and checks the invariants. */
#define CRASH_JOBS 40

typedef struct {
    int iteration, mode, producer, index;
    char text[64];
} crash_arg_t;

static int crash_write(const char *path, void *arg, char *err, size_t errlen) {
    crash_arg_t *a = arg;
    int rc = compat_write_file_durable(path, a->text, strlen(a->text), err, errlen);
    if (a->mode == 0 && a->producer == 0 && a->index == 5) _Exit(3); /* renamed, not registered */
    return rc == 0 ? 0 : DB_ERROR;
}

static const char *g_child_run;

static int crash_job(db_t *db, void *arg, char *err, size_t errlen) {
    crash_arg_t *a = arg;
    db_shard_t s = shard("", a->iteration, 20);
    snprintf(s.path, sizeof s.path, "shards/i%02d_p%d_j%03d.safetensors", a->iteration, a->producer, a->index);
    snprintf(a->text, sizeof a->text, "iteration %d producer %d job %d", a->iteration, a->producer, a->index);
    db_game_t g[2] = {game(0, 12, 1, DB_REASON_CHECKMATE, "7g7f 3c3d", 12),
                      game(12, 8, 0, DB_REASON_SENNICHITE, "2g2f", 8)};
    db_status_t st = db_shard_commit(db, g_child_run, &s, g, 2, crash_write, a);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void crash_done(void *arg, int status, const char *err) {
    (void)status;
    (void)err;
    free(arg);
}

typedef struct {
    db_writer_t *w;
    int iteration, mode, producer;
} crash_producer_t;

static void *crash_producer(void *arg) {
    crash_producer_t *p = arg;
    for (int j = 0; j < CRASH_JOBS; j++) {
        crash_arg_t *a = calloc(1, sizeof *a);
        *a = (crash_arg_t){p->iteration, p->mode, p->producer, j, ""};
        db_job_t job = {crash_job, crash_done, a};
        if (db_writer_submit(p->w, &job, -1) != DB_OK) free(a);
        for (int k = 0; k < 5; k++) {
            db_train_step_t row = {0};
            row.step = (int64_t)p->iteration * 1000000 + p->producer * 100000 + j * 10 + k;
            row.cycle = p->iteration;
            row.lr = 0.01;
            row.loss_policy = row.loss_value = row.loss_legal = row.loss_total = NAN;
            row.acc_policy = row.acc_value = row.acc_legal = row.grad_norm = NAN;
            db_writer_train_step(p->w, &row, -1);
        }
    }
    return NULL;
}

static int crash_child(const char *run, int iteration, int mode) {
    char err[DB_ERR_MAX], path[600];
    g_child_run = run;
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, 0, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "child: %s\n", err);
        return 1;
    }
    db_writer_t *w = db_writer_start(db, 4, err, sizeof err);
    if (!w) return 1;
    crash_producer_t p[2] = {{w, iteration, mode, 0}, {w, iteration, mode, 1}};
    compat_thread_t th[2];
    for (int i = 0; i < 2; i++) compat_thread_create(&th[i], crash_producer, &p[i]);
    if (mode == 1) {
        compat_sleep_ms(3 + 7 * iteration);
        _Exit(3); /* in the middle of whatever the writer is doing */
    }
    for (int i = 0; i < 2; i++) compat_thread_join(th[i]);
    db_writer_free(w);
    db_close(db);
    return 0; /* mode 0 normally dies before this */
}

static void test_crash_resume(const char *self) {
    char err[DB_ERR_MAX];
    const char *run = tmp("crun");
    tmp("crun/shards");
    tmp("crun/orphans");
    const char *path = tmp_db("crun/koma.db");
    CHECK(compat_mkdir_p(tmp("crun/shards"), err, sizeof err) == 0);
    int orphans = 0, registered = 0;
    for (int it = 0; it < 6; it++) {
        int mode = it % 2;
        for (int p = 0; p < 2; p++)
            for (int j = 0; j < CRASH_JOBS; j++) {
                char name[96];
                snprintf(name, sizeof name, "crun/shards/i%02d_p%d_j%03d.safetensors", it, p, j);
                tmp(name);
                snprintf(name, sizeof name, "crun/orphans/shards_i%02d_p%d_j%03d.safetensors", it, p, j);
                tmp(name);
            }
        char it_s[16], mode_s[16];
        snprintf(it_s, sizeof it_s, "%d", it);
        snprintf(mode_s, sizeof mode_s, "%d", mode);
        const char *argv[] = {self, "--crash-child", run, it_s, mode_s, NULL};
        int status = 0;
        int ran = compat_run(argv, &status, err, sizeof err);
        if (ran != 0) fprintf(stderr, "%s\n", err);
        CHECK(ran == 0 && status != 0); /* it ran, and died */

        /* Restart: open, check, and everything on record is whole. */
        db_t *db = NULL;
        CHECK_OK(db, db_open(path, 0, &db, err, sizeof err));
        if (!db) return;
        db_check_report_t rep;
        CHECK_OK(db, db_check_shards(db, run, DB_CHECK_VERIFY, &rep));
        for (int32_t i = 0; i < rep.n; i++) {
            CHECK(rep.items[i].kind != DB_CHECK_MISSING && rep.items[i].kind != DB_CHECK_MISMATCH);
            if (rep.items[i].kind == DB_CHECK_ORPHAN_MOVED) orphans++;
            if (rep.items[i].kind == DB_CHECK_TMP_REMOVED) {
                char name[DB_PATH_MAX + 64];
                snprintf(name, sizeof name, "crun/%s", rep.items[i].path);
                tmp(name);
            }
        }
        if (mode == 0) { /* died between rename and registration of this one */
            char rel[96];
            snprintf(rel, sizeof rel, "shards/i%02d_p0_j005.safetensors", it);
            CHECK(has_item(&rep, DB_CHECK_ORPHAN_MOVED, rel));
        }
        db_check_report_free(&rep);
        CHECK(sql_int(path, "SELECT count(*) FROM shards s WHERE games != "
                            "(SELECT count(*) FROM games g WHERE g.shard_id = s.id)") == 0);
        CHECK(sql_int(path, "SELECT count(*) FROM games WHERE shard_id NOT IN (SELECT id FROM shards)") == 0);
        CHECK(sql_int(path, "SELECT count(*) FROM shard_intents") == 0);
        char ok[16];
        sql_text(path, "PRAGMA integrity_check", ok, sizeof ok);
        CHECK(strcmp(ok, "ok") == 0);
        /* A file in shards/ exists exactly when its row does. */
        for (int p = 0; p < 2; p++)
            for (int j = 0; j < CRASH_JOBS; j++) {
                char rel[96], abs[800], sql[200];
                snprintf(rel, sizeof rel, "shards/i%02d_p%d_j%03d.safetensors", it, p, j);
                snprintf(abs, sizeof abs, "%s/%s", run, rel);
                snprintf(sql, sizeof sql, "SELECT count(*) FROM shards WHERE path = '%s'", rel);
                int64_t rows = sql_int(path, sql);
                CHECK(rows == (compat_file_exists(abs) ? 1 : 0));
                registered += (int)rows;
            }
        db_close(db);
    }
    printf("crash/resume: 6 crashes, %d shards registered, %d orphans moved aside\n", registered, orphans);
    CHECK(orphans >= 1);
    CHECK(registered > 0);
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

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--crash-child") == 0)
        return crash_child(argv[2], atoi(argv[3]), atoi(argv[4]));
    snprintf(g_dir, sizeof g_dir, "%s/koma_test_db_%d", compat_temp_dir(), compat_getpid());
    char err[512];
    (void)compat_remove_tree(g_dir, err, sizeof err); /* a previous run's leftovers (reused pids) */
    if (compat_mkdir_p(g_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_open_and_schema();
    test_round_trips();
    test_migration();
    test_migration_v2();
    test_migration_v3();
    test_migration_v4();
    test_migration_v5();
    test_match_games();
    test_transactions();
    test_shard_files();
    test_writer_producers();
    test_writer_shutdown();
    test_crash_resume(argv[0]);
    test_probe_busy();
    test_probe_hot_journal();

    for (int i = g_ncleanup - 1; i >= 0; i--) { /* files first, then their folders */
        remove(g_cleanup[i]);
        free(g_cleanup[i]);
    }
    remove(g_dir);
    return t_done("test_db");
}
