/* sp_test.h - shared helpers of the selfplay tests, on top of
 * tests/koma_test.h (CHECKF, t_done, scratch run directories): check_run, the
 * consistency check of a run directory that every test applies (after a
 * clean exit, after a kill -9, after Ctrl-C):
 *   - PRAGMA integrity_check is "ok";
 *   - every shards row's file exists and opens with every checksum verified;
 *   - every games row lies in its shard: rows [first_row, first_row+row_count)
 *     carry its id in the game_id column, no other row does, and the games
 *     of a shard cover all its rows; no game outside a shard;
 *   - every models row's file exists (and, when asked, loads);
 *   - optionally (replay): games.moves replayed from the start position are
 *     legal, end the way games.reason says (a checkmate is mate, a max_ply
 *     game has max_ply moves, a repetition is fourfold, a declaration can be
 *     declared, a resignation ends a game the rules had not ended) with the
 *     recorded result; each row's position/move/planes/legal mask are those
 *     of the replayed game at its ply;
 *   - after a clean exit: no pending shard intent and every file in shards/
 *     is registered (no orphans).
 */
#ifndef KOMA_TESTS_SELFPLAY_SP_TEST_H
#define KOMA_TESTS_SELFPLAY_SP_TEST_H

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/db.h"
#include "data/shard.h"
#include "data/shard_pos.h"
#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "nn/weights.h"
#include "train/window.h"
#include "tests/koma_test.h"

/* ---- the run check ---------------------------------------------------------------------- */

typedef struct {
    int64_t games, shards, positions, models;
    int32_t latest_cycle;
    int64_t reasons[DB_REASON_NB];
    int64_t with_policy;       /* rows with a policy target */
    int64_t replayed;          /* games replayed */
} run_state_t;

enum {
    CHECK_RUN_REPLAY = 1,      /* replay every game and compare its rows */
    CHECK_RUN_CLEAN = 2,       /* after a clean exit: no intents, no orphan files */
    CHECK_RUN_LOAD_MODELS = 4, /* load every model file */
};

static inline int64_t sql_int(sqlite3 *s, const char *q) {
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(s, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The first column of the first row of sql on the run at dir's koma.db, read
 * beside a running writer (WAL); -1 when there is no such row or database. */
static inline int64_t run_query(const char *dir, const char *sql) {
    char path[800];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    if (!compat_file_exists(path)) return -1;
    sqlite3 *s = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(s, 2000);
        n = sql_int(s, sql);
    }
    sqlite3_close(s);
    return n;
}

/* Games committed in the run at dir (0 when there is no database yet). */
static inline int64_t committed_games(const char *dir) {
    int64_t n = run_query(dir, "SELECT count(*) FROM games");
    return n < 0 ? 0 : n;
}

/* Runs argv to its end, stdout and stderr into log; its exit status
 * (exits 2 when it cannot be started). */
static inline int run_to_end(const char *const *argv, const char *log) {
    char err[512];
    int status = -1;
    if (compat_run_io(argv, log, log, &status, err, sizeof err) != 0) {
        fprintf(stderr, "cannot run %s: %s\n", argv[0], err);
        exit(2);
    }
    return status;
}

typedef struct {
    const char **paths;
    int32_t n;
    int unknown;
    char first[320];
} shard_dir_t;

static inline int shard_dir_entry(const char *name, int is_dir, void *user) {
    shard_dir_t *s = user;
    if (is_dir) return 0;
    char rel[300];
    snprintf(rel, sizeof rel, "shards/%s", name);
    for (int32_t i = 0; i < s->n; i++)
        if (!strcmp(s->paths[i], rel)) return 0;
    if (!s->unknown) snprintf(s->first, sizeof s->first, "%s", rel);
    s->unknown++;
    return 0;
}

/* The end of one replayed game against games.reason / games.result. */
static inline void check_end(const db_game_t *g, pos_t *pos, int32_t max_ply) {
    rules_status_t st = rules_status(pos, max_ply);
    int32_t want = st.winner == COLOR_BLACK ? 1 : st.winner == COLOR_WHITE ? -1 : 0;
    switch (g->reason) {
    case DB_REASON_CHECKMATE:
        CHECKF(st.end == RULES_END_CHECKMATE && movegen_count_legal(pos) == 0,
               "game %lld: 'checkmate' but the side to move has %d legal moves", (long long)g->id,
               movegen_count_legal(pos));
        CHECKF(g->result == want && want != 0, "game %lld: checkmate result %d, want %d", (long long)g->id, g->result,
               want);
        break;
    case DB_REASON_SENNICHITE:
    case DB_REASON_PERPETUAL_CHECK:
        CHECKF(st.end == (g->reason == DB_REASON_SENNICHITE ? RULES_END_SENNICHITE : RULES_END_PERPETUAL_CHECK),
               "game %lld: '%s' but the rules say '%s'", (long long)g->id, db_reason_name(g->reason),
               rules_end_name(st.end));
        CHECKF(g->result == want, "game %lld: repetition result %d, want %d", (long long)g->id, g->result, want);
        break;
    case DB_REASON_DECLARATION:
        CHECKF(st.end == RULES_END_DECLARATION && rules_can_declare(pos), "game %lld: 'declaration' but rules say '%s'",
               (long long)g->id, rules_end_name(st.end));
        CHECKF(g->result == (pos_side_to_move(pos) == COLOR_BLACK ? 1 : -1), "game %lld: declaration result %d",
               (long long)g->id, g->result);
        break;
    case DB_REASON_MAX_PLY:
        CHECKF(st.end == RULES_END_MAX_PLY && g->plies == max_ply && g->result == 0,
               "game %lld: 'max_ply' with %d plies (max %d), rules '%s', result %d", (long long)g->id, g->plies, max_ply,
               rules_end_name(st.end), g->result);
        break;
    case DB_REASON_RESIGN:
        CHECKF(st.end == RULES_END_NONE, "game %lld: 'resign' in a position the rules end ('%s')", (long long)g->id,
               rules_end_name(st.end));
        /* the side to move resigned */
        CHECKF(g->result == (pos_side_to_move(pos) == COLOR_BLACK ? -1 : 1), "game %lld: resign result %d with %s to move",
               (long long)g->id, g->result, pos_side_to_move(pos) == COLOR_BLACK ? "black" : "white");
        break;
    default:
        CHECKF(0, "game %lld: unexpected reason %s", (long long)g->id, db_reason_name(g->reason));
    }
}

/* Replays one game and compares its rows [first_row, +row_count) in the shard. */
static inline void replay_game(const db_game_t *g, const shard_t *sh, int32_t max_ply, run_state_t *rs) {
    static pos_t pos;
    static uint8_t packed[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES];
    float hand[ENC_HAND];
    CHECKF(!strcmp(g->start_sfen, "startpos"), "game %lld starts at '%s'", (long long)g->id, g->start_sfen);
    pos_set_startpos(&pos);
    const shard_columns_t *c = shard_columns(sh);
    const shard_format_t *f = shard_format(sh);
    int64_t r = g->first_row, rend = g->first_row + g->row_count;
    int32_t ply = 0;
    const char *s = g->moves;
    bool ok = true;
    while (ok && *s) {
        while (*s == ' ') s++;
        const char *e = s;
        while (*e && *e != ' ') e++;
        if (e == s) break;
        /* the rows of this ply, before the move */
        if (r < rend && c->ply[r] == ply) {
            encode_position(&pos, packed, hand);
            encode_legal_mask(&pos, legal);
            if (shard_version(sh) == SHARD_VERSION) {
                /* version 2: the hcp decodes to the replay's position, and the planes, hand and mask the
                 * trainer's loader makes from it (train_batch_expand) equal encode's bit for bit */
                static pos_t rp;
                memset(&rp, 0, sizeof rp);
                shard_row_pos(c, r, &rp);
                bool same = rp.side == pos.side && rp.hand[COLOR_BLACK] == pos.hand[COLOR_BLACK] &&
                            rp.hand[COLOR_WHITE] == pos.hand[COLOR_WHITE] && memcmp(rp.board, pos.board, 81) == 0;
                CHECKF(same, "game %lld row %lld: position column differs from the replay at ply %d",
                       (long long)g->id, (long long)r, ply);
                static shard_batch_t *bt;
                const shard_format_t ef = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
                char berr[512];
                if (!bt) bt = shard_batch_new(&ef, 1, 0, berr, sizeof berr);
                shard_batch_clear(bt);
                CHECKF(bt && shard_row_batch(sh, &r, 1, bt, berr, sizeof berr) == 0 &&
                           train_batch_expand(bt, berr, sizeof berr) == 0,
                       "game %lld row %lld: batch: %s", (long long)g->id, (long long)r, berr);
                CHECKF(!memcmp(bt->planes, packed, ENC_PACKED_BYTES) && !memcmp(bt->legal, legal, ENC_LEGAL_BYTES) &&
                           !memcmp(bt->hand, hand, sizeof hand),
                       "game %lld row %lld: planes, mask or hand made from the position differ from encode's",
                       (long long)g->id, (long long)r);
            } else {
                shard_position_t sp;
                shard_position_unpack(c->position + r * SHARD_POSITION_BYTES, &sp);
                bool same = sp.side == (uint8_t)pos.side && sp.ply == pos.game_ply &&
                            sp.hand[0] == pos.hand[COLOR_BLACK] && sp.hand[1] == pos.hand[COLOR_WHITE] &&
                            memcmp(sp.board, pos.board, 81) == 0;
                CHECKF(same, "game %lld row %lld: position column differs from the replay at ply %d",
                       (long long)g->id, (long long)r, ply);
                CHECKF(f->planes_bytes == ENC_PACKED_BYTES &&
                           !memcmp(c->planes + r * ENC_PACKED_BYTES, packed, ENC_PACKED_BYTES),
                       "game %lld row %lld: planes differ from encode_position", (long long)g->id, (long long)r);
                CHECKF(!memcmp(c->legal + r * ENC_LEGAL_BYTES, legal, ENC_LEGAL_BYTES),
                       "game %lld row %lld: legal mask", (long long)g->id, (long long)r);
                CHECKF(!memcmp(c->hand + r * ENC_HAND, hand, sizeof hand), "game %lld row %lld: hand",
                       (long long)g->id, (long long)r);
            }
            move_t m = move_from_usi(&pos, s, (size_t)(e - s));
            CHECKF(c->move[r] == m, "game %lld row %lld: move column %u, games.moves says %.*s", (long long)g->id,
                   (long long)r, (unsigned)c->move[r], (int)(e - s), s);
            int64_t b, en;
            shard_row_policy(sh, r, &b, &en);
            if (en > b) {
                rs->with_policy++;
                double sum = 0;
                float prob[SHARD_LABEL_NB];
                shard_row_probs(sh, r, prob);
                for (int64_t k = b; k < en; k++) {
                    sum += prob[k - b];
                    move_t pm = encode_label_move(&pos, c->policy_label[k]);
                    CHECKF(pm != MOVE_NONE, "game %lld row %lld: policy label %u is no legal move", (long long)g->id,
                           (long long)r, (unsigned)c->policy_label[k]);
                }
                CHECKF(fabs(sum - 1.0) < 1e-3, "game %lld row %lld: policy sums to %f", (long long)g->id, (long long)r,
                       sum);
            }
            int8_t want = g->result == 0 ? 0 : ((g->result > 0) == (pos.side == COLOR_BLACK) ? 1 : -1);
            CHECKF(c->result[r] == want, "game %lld row %lld: result column %d, want %d", (long long)g->id, (long long)r,
                   c->result[r], want);
            r++;
        }
        move_t m = move_from_usi(&pos, s, (size_t)(e - s));
        if (m == MOVE_NONE) {
            CHECKF(0, "game %lld: move %d '%.*s' is not legal", (long long)g->id, ply + 1, (int)(e - s), s);
            ok = false;
            break;
        }
        rules_status_t st = rules_status(&pos, max_ply);
        CHECKF(st.end == RULES_END_NONE, "game %lld: the game was over ('%s') before move %d", (long long)g->id,
               rules_end_name(st.end), ply + 1);
        pos_do_move(&pos, m);
        ply++;
        s = e;
    }
    if (!ok) return;
    CHECKF(ply == g->plies, "game %lld: %d moves, plies %d", (long long)g->id, ply, g->plies);
    CHECKF(r == rend, "game %lld: %lld of %lld rows matched a ply", (long long)g->id, (long long)(r - g->first_row),
           (long long)g->row_count);
    check_end(g, &pos, max_ply);
    rs->replayed++;
}

/* Checks the run directory; fills rs. */
static inline void check_run(const char *dir, uint32_t flags, int32_t max_ply, run_state_t *rs) {
    memset(rs, 0, sizeof *rs);
    char path[1200], err[2048];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    rs->latest_cycle = -1;
    if (!compat_file_exists(path) && !(flags & CHECK_RUN_CLEAN)) return; /* killed before it existed */
    /* killed inside the new run's first transaction (rollback journal, before
     * WAL): the hot journal is rolled back first, as selfplay's own probe does */
    db_probe_t kind;
    (void)db_probe(path, &kind, err, sizeof err);
    sqlite3 *s = NULL;
    char uri[1300];
    snprintf(uri, sizeof uri, "file:%s?mode=ro", path);
    if (sqlite3_open_v2(uri, &s, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        char res[64] = "";
        if (sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            snprintf(res, sizeof res, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        CHECKF(!strcmp(res, "ok"), "%s: integrity_check says '%s'", path, res);
        /* A kill between SQLite creating the file and the schema's commit
         * leaves a file with no version and no tables: the next run creates
         * the schema in it (the final, clean run checks that). */
        int64_t ver = -1, objects = -1;
        if (sqlite3_prepare_v2(s, "SELECT (SELECT user_version FROM pragma_user_version), count(*) FROM sqlite_master",
                               -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            ver = sqlite3_column_int64(st, 0);
            objects = sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
        if (ver == 0 && objects == 0 && !(flags & CHECK_RUN_CLEAN)) {
            sqlite3_close(s);
            return; /* killed before the schema was committed */
        }
    } else {
        CHECKF(0, "%s: cannot open with sqlite3", path);
    }
    sqlite3_close(s);

    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) {
        CHECKF(0, "db_open: %s", err);
        return;
    }
    db_summary_t sum;
    CHECKF(db_summary(db, &sum) == DB_OK, "summary: %s", db_errmsg(db));
    rs->latest_cycle = sum.latest_cycle;
    rs->models = sum.models;
    db_shard_t *sh = NULL;
    int32_t nsh = 0;
    CHECKF(db_shards_recent(db, 0, &sh, &nsh) == DB_OK, "shards: %s", db_errmsg(db));
    const char **paths = calloc((size_t)nsh + 1, sizeof *paths);
    for (int32_t i = 0; i < nsh; i++) {
        paths[i] = sh[i].path;
        char fp[1400];
        snprintf(fp, sizeof fp, "%s/%s", dir, sh[i].path);
        shard_t *f = shard_open(fp, NULL, 0, err, sizeof err);
        CHECKF(f != NULL, "shard row %lld: %s", (long long)sh[i].id, err);
        if (!f) continue;
        CHECKF(shard_rows(f) == sh[i].rows, "%s: %lld rows, db says %lld", fp, (long long)shard_rows(f),
               (long long)sh[i].rows);
        db_game_list_t gl = {0};
        CHECKF(db_games_of_shard(db, sh[i].id, &gl) == DB_OK, "games of shard %lld", (long long)sh[i].id);
        CHECKF(gl.n == sh[i].games && gl.n == shard_games(f), "%s: %lld games listed, row says %lld, file %lld", fp,
               (long long)gl.n, (long long)sh[i].games, (long long)shard_games(f));
        int64_t covered = 0;
        for (int64_t k = 0; k < gl.n; k++) {
            const db_game_t *g = &gl.games[k];
            CHECKF(g->first_row >= 0 && g->row_count >= 0 && g->first_row + g->row_count <= shard_rows(f),
                   "game %lld: rows [%lld, +%lld) outside %s", (long long)g->id, (long long)g->first_row,
                  (long long)g->row_count, fp);
            if (!(g->first_row >= 0 && g->first_row + g->row_count <= shard_rows(f))) continue;
            int64_t mine = 0;
            for (int64_t r = 0; r < shard_rows(f); r++) mine += shard_row_game(f, r) == g->id;
            bool in = true;
            for (int64_t r = g->first_row; r < g->first_row + g->row_count; r++) in &= shard_row_game(f, r) == g->id;
            CHECKF(in && mine == g->row_count, "game %lld: %lld rows carry its id, games row says [%lld, +%lld)",
                  (long long)g->id, (long long)mine, (long long)g->first_row, (long long)g->row_count);
            covered += g->row_count;
            rs->reasons[g->reason]++;
            if (flags & CHECK_RUN_REPLAY) replay_game(g, f, max_ply, rs);
        }
        CHECKF(covered == shard_rows(f), "%s: games cover %lld of %lld rows", fp, (long long)covered,
               (long long)shard_rows(f));
        rs->games += gl.n;
        rs->positions += shard_rows(f);
        db_game_list_free(&gl);
        shard_close(f);
    }
    rs->shards = nsh;
    CHECKF(rs->games == sum.games, "games in shards %lld, games rows %lld", (long long)rs->games, (long long)sum.games);
    for (int32_t c = 0; c <= sum.latest_cycle; c++) {
        db_model_t m;
        if (db_model_by_cycle(db, c, &m) != DB_OK) {
            CHECKF(0, "no model of cycle %d (latest %d)", c, sum.latest_cycle);
            continue;
        }
        char fp[1400];
        snprintf(fp, sizeof fp, "%s/%s", dir, m.path);
        CHECKF(compat_file_exists(fp), "model %d: %s missing", c, fp);
        if (flags & CHECK_RUN_LOAD_MODELS) {
            nn_backend_t *be = nn_backend_cpu_new(1);
            nn_net_t *net = nn_weights_load(be, fp, ENC_FEATURES_VERSION, err, sizeof err);
            CHECKF(net != NULL, "model %d: %s", c, err);
            nn_net_free(net);
            nn_backend_free(be);
        }
    }
    if (flags & CHECK_RUN_CLEAN) {
        CHECKF(sum.pending == 0, "%lld shard intents pending after a clean exit", (long long)sum.pending);
        shard_dir_t sd = {paths, nsh, 0, ""};
        snprintf(path, sizeof path, "%s/shards", dir);
        if (compat_is_dir(path)) compat_list_dir(path, shard_dir_entry, &sd, err, sizeof err);
        CHECKF(sd.unknown == 0, "%d unregistered file(s) in shards/, e.g. %s", sd.unknown, sd.first);
    }
    free(paths);
    free(sh);
    db_close(db);
}

#endif
