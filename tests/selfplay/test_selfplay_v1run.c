/* test_selfplay_v1run.c - a run made by an older Koma (version-1 shards: planes, hand, legal and a 96-byte
 * position on disk) goes on with this one (docs/DATA.md "Reading old shards"):
 *   1. a one-cycle run is made, and every shard is rewritten as the older version wrote it (the same rows
 *      and games; koma.db's size and XXH3 updated as that version registered them);
 *   2. the same `selfplay` command with one more cycle resumes it: the start-up check passes, cycle 2's
 *      shards are version 2, the trainer's window holds both (its log names the window) and model 2 is
 *      published; every row of both versions replays against its game (check_run: the version-1 planes as
 *      stored, the version-2 planes as the loader makes them, bit for bit against encode);
 *   3. `train --from-games` trains on the mixed run.
 */
#include "tests/selfplay/sp_test.h"

#include <xxhash.h>

#include "data/shard_pos.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif
#ifndef KOMA_TRAIN_BIN
#define KOMA_TRAIN_BIN "train"
#endif

static int run_cmd(const char *const *argv, const char *log) {
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    KOMA_ASSERT(p);
    char line[1024];
    while (compat_proc_read_line(p, line, sizeof line, -1) != COMPAT_PROC_EOF) {}
    int status = -1;
    compat_proc_wait(p, -1, &status);
    compat_proc_free(p);
    return status;
}

/* Rewrites the version-2 shard at run/rel as version 1 (its games from koma.db), and koma.db's size and hash. */
static void to_v1(const char *run, const char *rel, int64_t shard_id, sqlite3 *sq) {
    char path[20000], err[1024];
    snprintf(path, sizeof path, "%s/%s", run, rel);
    shard_t *s = shard_open(path, NULL, 0, err, sizeof err);
    KOMA_ASSERT(s);
    CHECK(shard_version(s) == SHARD_VERSION);
    const shard_columns_t *c = shard_columns(s);
    const shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    shard_builder_t *b = shard_builder_new(&fmt, err, sizeof err);
    KOMA_ASSERT(b);
    char dbpath[20000];
    snprintf(dbpath, sizeof dbpath, "%s/koma.db", run);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbpath, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    db_game_list_t gl = {0};
    KOMA_ASSERT(db_games_of_shard(db, shard_id, &gl) == DB_OK && gl.n > 0);
    static pos_t pos;
    static uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES], posb[SHARD_POSITION_BYTES];
    float hand[ENC_HAND];
    for (int64_t i = 0; i < gl.n; i++) {
        const db_game_t *g = &gl.games[i];
        for (int64_t r = g->first_row; r < g->first_row + g->row_count; r++) {
            KOMA_ASSERT(shard_row_position(c, r, &pos, err, sizeof err) == 0);
            encode_position(&pos, planes, hand);
            encode_legal_mask(&pos, legal);
            shard_position_t sp = {.side = (uint8_t)pos.side, .ply = (uint16_t)(c->ply[r] + 1)};
            memcpy(sp.board, pos.board, 81);
            sp.hand[0] = pos.hand[COLOR_BLACK], sp.hand[1] = pos.hand[COLOR_WHITE];
            shard_position_pack(&sp, posb);
            int64_t pb, pe;
            shard_row_policy(s, r, &pb, &pe);
            float sur = shard_row_surprise(s, r), prob[SHARD_LABEL_NB];
            shard_row_probs(s, r, prob);
            shard_row_t row = {.planes = planes, .hand = hand, .legal = legal, .position = posb,
                               .policy_label = pe > pb ? c->policy_label + pb : NULL,
                               .policy_prob = pe > pb ? prob : NULL, .policy_n = (int32_t)(pe - pb),
                               .root_q = c->root_q[r], .ply = c->ply[r], .move = c->move[r],
                               .surprise = sur >= 0 ? &sur : NULL};
            KOMA_ASSERT(shard_builder_add_row(b, &row, err, sizeof err) == 0);
        }
        KOMA_ASSERT(shard_builder_end_game(b, g, err, sizeof err) == 0);
    }
    shard_builder_set_first_game_id(b, gl.games[0].id);
    db_game_list_free(&gl);
    db_close(db);
    shard_close(s);
    KOMA_ASSERT(compat_remove_file(path) == 0);
    KOMA_ASSERT(shard_write(b, path, err, sizeof err) == 0);
    shard_builder_free(b);
    uint64_t h = 0;
    int64_t bytes = 0;
    KOMA_ASSERT(db_file_xxh3(path, &h, &bytes, err, sizeof err) == 0);
    char sql[512];
    snprintf(sql, sizeof sql, "UPDATE shards SET bytes = %lld, xxh3 = '%016llx', features_version = %d WHERE id = %lld",
             (long long)bytes, (unsigned long long)h, ENC_FEATURES_VERSION, (long long)shard_id);
    KOMA_ASSERT(sqlite3_exec(sq, sql, NULL, NULL, NULL) == SQLITE_OK);
}

int main(void) {
    engine_init();
    const char *dir = t_scratch("selfplay_v1run");
    char run[1024], log[1100], err[512];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(log, sizeof log, "%s/selfplay.log", dir);
    const char *sp[] = {KOMA_SELFPLAY_BIN, "--run", run, "--cycles", "1", "--games-per-cycle", "6", "--visits", "8",
                        "--visits-fast", "4", "--threads", "1", "--games-per-thread", "3", "--max-ply", "40",
                        "--net", "2x16", "--cpu-threads", "1", "--train-threads", "1", "--min-steps-per-cycle", "2",
                        "--max-steps-per-cycle", "2", "--eval-every", "0", "--quiet", "--backend", "cpu", NULL};
    CHECK(run_cmd(sp, log) == 0);

    /* 1: every shard as the older version wrote it */
    char dbpath[1100];
    snprintf(dbpath, sizeof dbpath, "%s/koma.db", run);
    sqlite3 *sq = NULL;
    KOMA_ASSERT(sqlite3_open(dbpath, &sq) == SQLITE_OK);
    sqlite3_stmt *st = NULL;
    KOMA_ASSERT(sqlite3_prepare_v2(sq, "SELECT id, path FROM shards ORDER BY id", -1, &st, NULL) == SQLITE_OK);
    int64_t ids[64];
    char rels[64][256];
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n < 64) {
        ids[n] = sqlite3_column_int64(st, 0);
        snprintf(rels[n], sizeof rels[n], "%s", (const char *)sqlite3_column_text(st, 1));
        n++;
    }
    sqlite3_finalize(st);
    CHECK(n >= 1);
    for (int i = 0; i < n; i++) to_v1(run, rels[i], ids[i], sq);
    sqlite3_close(sq);

    /* 2: the same command with one more cycle */
    sp[4] = "2";
    snprintf(log, sizeof log, "%s/selfplay2.log", dir);
    int rc = run_cmd(sp, log);
    size_t len = 0;
    char *text = compat_read_file(log, &len, err, sizeof err);
    CHECKF(rc == 0, "the old run resumed with exit %d:\n%s", rc, text ? text : "");
    free(text);
    run_state_t rs;
    check_run(run, CHECK_RUN_CLEAN, 40, &rs);
    CHECKF(rs.latest_cycle == 2, "latest model cycle %d after resuming", rs.latest_cycle);
    int v1 = 0, v2 = 0;
    KOMA_ASSERT(sqlite3_open(dbpath, &sq) == SQLITE_OK);
    KOMA_ASSERT(sqlite3_prepare_v2(sq, "SELECT path, cycle FROM shards ORDER BY id", -1, &st, NULL) == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
        char path[20000];
        snprintf(path, sizeof path, "%s/%s", run, (const char *)sqlite3_column_text(st, 0));
        shard_t *s = shard_open(path, NULL, 0, err, sizeof err);
        CHECKF(s != NULL, "%s", err);
        if (!s) continue;
        int cycle = sqlite3_column_int(st, 1);
        if (shard_version(s) == SHARD_VERSION_V1) {
            v1++;
            CHECK(cycle == 1);
        } else {
            v2++;
            CHECK(cycle == 2);
        }
        shard_close(s);
    }
    sqlite3_finalize(st);
    sqlite3_close(sq);
    CHECKF(v1 == n && v2 >= 1, "%d version-1 and %d version-2 shards", v1, v2);

    /* 3: train --from-games over both */
    const char *tr[] = {KOMA_TRAIN_BIN, "--from-games", "--run", run, "--steps", "4", "--batch", "16",
                        "--train-threads", "1", "--quiet", NULL};
    snprintf(log, sizeof log, "%s/train.log", dir);
    rc = run_cmd(tr, log);
    text = compat_read_file(log, &len, err, sizeof err);
    CHECKF(rc == 0, "train --from-games on the mixed run: exit %d:\n%s", rc, text ? text : "");
    free(text);
    t_rm_rf(dir);
    return t_done("test_selfplay_v1run");
}
