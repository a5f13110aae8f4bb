/* db_test.h - what the koma.db tests share (tests/data/test_db*.c): a
 * temporary folder whose files are removed at exit, raw SQL on a second
 * connection, game and shard fixtures, CHECK_OK; test_shard.c takes game(). */
#ifndef KOMA_TESTS_DB_TEST_H
#define KOMA_TESTS_DB_TEST_H

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/db.h"
#include "tests/koma_test.h"

/* A db call that must succeed; prints the database's message if not. */
#define CHECK_OK(db, call)                                                                                  \
    do {                                                                                                    \
        t_count_();                                                                                         \
        db_status_t st_ = (call);                                                                           \
        if (st_ != DB_OK) t_fail(__FILE__, __LINE__, #call, " -> %s: %s", db_status_name(st_), db_errmsg(db)); \
    } while (0)

static inline int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }
static inline int starts_with(const char *s, const char *p) { return s && strncmp(s, p, strlen(p)) == 0; }

/* ---- temporary files ------------------------------------------------------------ */
static char g_dir[400];
static char *g_cleanup[4096];
static int g_ncleanup;

/* <g_dir>/<name>, remembered for removal at exit (files before their folders). */
static inline const char *tmp(const char *name) {
    char buf[800];
    snprintf(buf, sizeof buf, "%s/%s", g_dir, name);
    for (int i = 0; i < g_ncleanup; i++)
        if (strcmp(g_cleanup[i], buf) == 0) return g_cleanup[i];
    KOMA_ASSERT(g_ncleanup < 4096);
    g_cleanup[g_ncleanup] = strdup(buf);
    return g_cleanup[g_ncleanup++];
}

/* A database path plus its WAL files, all scheduled for removal. */
static inline const char *tmp_db(const char *name) {
    char b[200];
    snprintf(b, sizeof b, "%s-wal", name);
    tmp(b);
    snprintf(b, sizeof b, "%s-shm", name);
    tmp(b);
    return tmp(name);
}

static inline void write_text(const char *path, const char *text) {
    char err[512];
    KOMA_ASSERT(compat_write_file_durable(path, text, strlen(text), err, sizeof err) == 0);
}

static inline void sql_raw(const char *path, const char *sql) {
    sqlite3 *sq;
    KOMA_ASSERT(sqlite3_open(path, &sq) == SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(sq, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "raw sql failed: %s\n", msg);
        KOMA_ASSERT(0);
    }
    sqlite3_close(sq);
}

static inline int64_t sql_int(const char *path, const char *sql) {
    sqlite3 *sq;
    sqlite3_stmt *s;
    KOMA_ASSERT(sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    KOMA_ASSERT(sqlite3_prepare_v2(sq, sql, -1, &s, NULL) == SQLITE_OK);
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -999;
    sqlite3_finalize(s);
    sqlite3_close(sq);
    return v;
}

static inline void sql_text(const char *path, const char *sql, char *out, size_t len) {
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
static inline int sql_try(const char *path, const char *sql, char *msg, size_t len) {
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
static inline db_game_t game(int64_t first_row, int64_t rows, int32_t result, db_reason_t reason,
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

static inline db_shard_t shard(const char *path, int32_t cycle, int64_t rows) {
    db_shard_t s = {0};
    snprintf(s.path, sizeof s.path, "%s", path);
    s.cycle = cycle;
    s.rows = rows;
    s.features_version = 3;
    s.bytes = 1000 + rows;
    snprintf(s.xxh3, sizeof s.xxh3, "%016llx", (unsigned long long)(0x1234 + rows));
    return s;
}

static inline int64_t count_rows(db_t *db, const char *table) {
    /* Through a second connection: what is committed, not what is pending. */
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    return sql_int(db_path(db), sql);
}

/* Whether the start-up check's report r names path with that finding. */
static inline int has_item(const db_check_report_t *r, db_check_kind_t kind, const char *path) {
    for (int32_t i = 0; i < r->n; i++)
        if (r->items[i].kind == kind && strcmp(r->items[i].path, path) == 0) return 1;
    return 0;
}

/* Makes the temporary folder <temp>/koma_test_<name>_<pid> (a previous run's
 * leftovers removed first); 0 on success. */
static inline int t_db_setup(const char *name) {
    snprintf(g_dir, sizeof g_dir, "%s/koma_test_%s_%d", compat_temp_dir(), name, compat_getpid());
    char err[512];
    (void)compat_remove_tree(g_dir, err, sizeof err); /* a previous run's leftovers (reused pids) */
    if (compat_mkdir_p(g_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* Removes every file tmp() named, then the folder. */
static inline void t_db_cleanup(void) {
    for (int i = g_ncleanup - 1; i >= 0; i--) { /* files first, then their folders */
        remove(g_cleanup[i]);
        free(g_cleanup[i]);
    }
    remove(g_dir);
}

#endif
