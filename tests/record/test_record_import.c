/* test_record_import.c - tools/import, the real binary: the fixtures of
 * tests/data/records/ and random playouts written as USI records go into
 * temporary runs; koma.db and the shards are read back and every row is
 * checked against the game replayed with the engine (planes, legal mask,
 * one-hot policy on the move played, result and root_q from the side to
 * move, ply, move, position, game id); shard rows = the games' plies; shards
 * verify (checksums). Also: deduplication on a second run, --skip-draws,
 * --min-rating, --cycle, --root-q zero, exit codes, and `train --from-games`
 * on the imported run when the train program is built. */
#include "compat/compat.h"
#include "data/db.h"
#include "data/record.h"
#include "data/shard.h"
#include "data/shard_pos.h"
#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KOMA_IMPORT_BIN
#error "KOMA_IMPORT_BIN: the path of the import executable (tests/record/CMakeLists.txt)"
#endif

#define FIX(name) KOMA_SOURCE_DIR "/tests/data/records/" name

static pos_t g_pos;

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    KOMA_ASSERT(f);
    KOMA_ASSERT(fputs(text, f) >= 0);
    KOMA_ASSERT(fclose(f) == 0);
}

/* Runs import with these arguments (NULL-terminated); returns its exit status. */
static int run_import(const char *a0, ...) {
    const char *argv[32];
    int n = 0;
    argv[n++] = KOMA_IMPORT_BIN;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int status = -1;
    char err[512];
    fflush(stdout);
    if (compat_run(argv, &status, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return status;
}

static db_t *open_run(const char *run) {
    char path[900], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(db);
    return db;
}

/* ---- reading a run back ------------------------------------------------------------------ */
typedef struct {
    int64_t games, positions, shards, bad_rows;
    int found_resign, found_pi, found_illegal, sennichite;
    int32_t cycle;        /* of the last shard */
    char last_path[DB_PATH_MAX];
    int root_q_zero;      /* every root_q was 0 */
} readback_t;

static const shard_format_t FMT = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};

/* Every row of every game against the game replayed from its start. */
static void read_back(const char *run, readback_t *rb) {
    memset(rb, 0, sizeof *rb);
    rb->root_q_zero = 1;
    db_t *db = open_run(run);
    db_shard_t *list = NULL;
    int32_t n = 0;
    KOMA_ASSERT(db_shards_recent(db, 0, &list, &n) == DB_OK);
    uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES];
    float hand[ENC_HAND];
    for (int32_t s = 0; s < n; s++) {
        char path[1200], err[1024];
        snprintf(path, sizeof path, "%s/%s", run, list[s].path);
        shard_t *sh = shard_open(path, &FMT, 0, err, sizeof err); /* checksums verified */
        CHECK(sh != NULL);
        if (!sh) {
            fprintf(stderr, "%s\n", err);
            continue;
        }
        rb->shards++;
        rb->cycle = list[s].cycle;
        snprintf(rb->last_path, sizeof rb->last_path, "%s", list[s].path);
        const shard_columns_t *c = shard_columns(sh);
        db_game_list_t gl;
        KOMA_ASSERT(db_games_of_shard(db, list[s].id, &gl) == DB_OK);
        int64_t plies = 0;
        for (int64_t gi = 0; gi < gl.n; gi++) {
            const db_game_t *g = &gl.games[gi];
            plies += g->plies;
            CHECK(g->row_count == g->plies && g->model_id == 0);
            if (strcmp(g->moves, "7g7f 3c3d 8h2b+ 3a2b B*4e B*5e 4e3d 5e7g+") == 0 && strcmp(g->start_sfen, "startpos") == 0)
                rb->found_resign += g->result == DB_RESULT_WHITE_WIN && g->reason == DB_REASON_RESIGN;
            if (strcmp(g->start_sfen, "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1") == 0 &&
                strcmp(g->moves, "3c3d 7g7f 4a3b") == 0)
                rb->found_pi += g->result == DB_RESULT_DRAW && g->reason == DB_REASON_ABORT;
            if (strcmp(g->moves, "7g7f 3c3d") == 0 && g->reason == DB_REASON_ILLEGAL_MOVE)
                rb->found_illegal += g->result == DB_RESULT_WHITE_WIN;
            rb->sennichite += g->reason == DB_REASON_SENNICHITE;
            char e2[256];
            if (sfen_parse_cstr(&g_pos, g->start_sfen, e2, sizeof e2) != SFEN_OK) {
                CHECK(!"start position reads");
                continue;
            }
            const char *mv = g->moves;
            for (int32_t i = 0; i < g->plies; i++) {
                while (*mv == ' ') mv++;
                size_t len = strcspn(mv, " ");
                move_t m = move_from_usi(&g_pos, mv, len);
                mv += len;
                int64_t r = g->first_row + i;
                color_t stm = pos_side_to_move(&g_pos);
                int bad = 0;
                bad |= m == MOVE_NONE;
                bad |= c->move[r] != m || c->ply[r] != i || shard_row_game(sh, r) != g->id;
                int8_t z = (int8_t)(stm == COLOR_BLACK ? g->result : -g->result);
                bad |= c->result[r] != z;
                if (c->root_q[r] != 0.0f) rb->root_q_zero = 0;
                bad |= c->root_q[r] != 0.0f && c->root_q[r] != (float)z;
                int64_t b, e;
                shard_row_policy(sh, r, &b, &e);
                float one = 0;
                if (e - b == 1) shard_row_probs(sh, r, &one);
                bad |= e - b != 1 || c->policy_label[b] != encode_move_label(&g_pos, m) || one != 1.0f;
                if (c->hcp) { /* version 2: the exact position (planes are made from it: test_shard_compact) */
                    static pos_t rp;
                    shard_row_pos(c, r, &rp);
                    bad |= memcmp(rp.board, g_pos.board, sizeof rp.board) != 0 || rp.side != stm ||
                           rp.hand[COLOR_BLACK] != pos_hand(&g_pos, COLOR_BLACK) ||
                           rp.hand[COLOR_WHITE] != pos_hand(&g_pos, COLOR_WHITE) || c->ply[r] != i;
                } else {
                    encode_position(&g_pos, planes, hand);
                    encode_legal_mask(&g_pos, legal);
                    bad |= memcmp(c->planes + r * ENC_PACKED_BYTES, planes, sizeof planes) != 0;
                    bad |= memcmp(c->hand + r * ENC_HAND, hand, sizeof hand) != 0;
                    bad |= memcmp(c->legal + r * ENC_LEGAL_BYTES, legal, sizeof legal) != 0;
                    bad |= !encode_bit(c->legal + r * ENC_LEGAL_BYTES, encode_move_label(&g_pos, m));
                    shard_position_t sp;
                    shard_position_unpack(c->position + r * SHARD_POSITION_BYTES, &sp);
                    bad |= memcmp(sp.board, g_pos.board, sizeof sp.board) != 0 || sp.side != stm ||
                           sp.hand[0] != pos_hand(&g_pos, COLOR_BLACK) || sp.hand[1] != pos_hand(&g_pos, COLOR_WHITE) ||
                           sp.ply != pos_game_ply(&g_pos);
                }
                rb->bad_rows += bad;
                if (m == MOVE_NONE) break;
                pos_do_move(&g_pos, m);
            }
        }
        CHECK(shard_rows(sh) == plies && list[s].rows == plies && shard_games(sh) == gl.n);
        rb->games += gl.n;
        rb->positions += plies;
        db_game_list_free(&gl);
        shard_close(sh);
    }
    free(list);
    int64_t games = 0, positions = 0;
    KOMA_ASSERT(db_count(db, -1, &games, &positions) == DB_OK);
    CHECK(games == rb->games && positions == rb->positions);
    db_close(db);
}

/* ---- random playouts as USI records ------------------------------------------------------ */
static uint64_t g_rng = 0x853C49E6748FEA9Bull;
static uint32_t rnd(uint32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((g_rng >> 33) % n);
}

/* n games of at most max_ply random legal moves; returns the plies in all. */
static int64_t write_playouts(const char *path, int n, int max_ply) {
    FILE *f = fopen(path, "wb");
    KOMA_ASSERT(f);
    int64_t plies = 0;
    move_list_t list;
    for (int g = 0; g < n; g++) {
        pos_set_startpos(&g_pos);
        fputs("startpos moves", f);
        int ply = 0;
        const char *end = "max_ply";
        for (;;) {
            rules_status_t st = rules_status(&g_pos, 0);
            if (st.end != RULES_END_NONE) { /* declared, or said by the rules (or a resignation) */
                end = st.end == RULES_END_DECLARATION ? "win" : rnd(2) ? "" : "resign";
                break;
            }
            if (ply == max_ply) break;
            movegen_legal(&g_pos, &list);
            move_t m = list.moves[rnd((uint32_t)list.n)];
            char u[MOVE_USI_MAX];
            move_to_usi(m, u);
            fprintf(f, " %s", u);
            pos_do_move(&g_pos, m);
            ply++;
        }
        fprintf(f, "%s%s\n", *end ? " " : "", end);
        plies += ply;
    }
    KOMA_ASSERT(fclose(f) == 0);
    return plies;
}

/* ---- tests ---------------------------------------------------------------------------------- */
static void test_fixtures(void) {
    const char *run = t_path("run1");
    CHECK(run_import("--run", run, "--shard-games", "3", KOMA_SOURCE_DIR "/tests/data/records", NULL) == 0);
    readback_t rb;
    read_back(run, &rb);
    /* 14 games read, 1 rejected (multi.csa game 3), 3 duplicates across files */
    CHECK(rb.games == 11);
    CHECK(rb.positions == 46);
    CHECK(rb.shards == 4); /* 3 + 3 + 3 + 2 */
    CHECK(rb.bad_rows == 0);
    CHECK(rb.found_resign == 1 && rb.found_pi == 1 && rb.found_illegal == 1 && rb.sennichite == 1);
    CHECK(rb.cycle == -1 && strncmp(rb.last_path, "shards/import_", 14) == 0);
    CHECK(rb.root_q_zero == 0);
    db_t *db = open_run(run);
    db_summary_t s;
    CHECK(db_summary(db, &s) == DB_OK && s.runs == 1 && s.pending == 0);
    db_close(db);

    /* Again: everything is already there. Then without dedup, one file more. */
    CHECK(run_import("--run", run, KOMA_SOURCE_DIR "/tests/data/records", NULL) == 0);
    read_back(run, &rb);
    CHECK(rb.games == 11 && rb.shards == 4);
    CHECK(run_import("--run", run, "--dedup", "0", FIX("game1.csa"), NULL) == 0);
    read_back(run, &rb);
    CHECK(rb.games == 12 && rb.shards == 5 && rb.found_resign == 2 && rb.bad_rows == 0);

#ifdef KOMA_TRAIN_BIN
    /* The imported run trains. */
    const char *argv[] = {KOMA_TRAIN_BIN, "--from-games", "--run", run, "--steps", "2", "--batch", "8",
                          "--net", "1x16", "--train-threads", "1", NULL};
    int status = -1;
    char err[512];
    fflush(stdout);
    CHECK(compat_run(argv, &status, err, sizeof err) == 0 && status == 0);
    db = open_run(run);
    db_model_t m;
    /* the untrained net is cycle 0 (the rating anchor), the trained one cycle 1 */
    CHECK(db_model_latest(db, &m) == DB_OK && m.cycle == 1 && m.train_steps == 2);
    CHECK(db_model_by_cycle(db, 0, &m) == DB_OK && m.train_steps == 0);
    db_close(db);
#endif
}

static void test_filters(void) {
    readback_t rb;
    /* --skip-draws: multi.csa has a sennichite among its 4 readable games */
    const char *r2 = t_path("run2");
    CHECK(run_import("--run", r2, "--skip-draws", FIX("multi.csa"), NULL) == 0);
    read_back(r2, &rb);
    CHECK(rb.games == 3 && rb.sennichite == 0 && rb.bad_rows == 0);
    /* --min-rating: game1.csa is rated 2510.5 / 2480; unrated games never pass */
    const char *r3 = t_path("run3");
    CHECK(run_import("--run", r3, "--min-rating", "2500", FIX("game1.csa"), FIX("games.usi"), NULL) == 0);
    read_back(r3, &rb);
    CHECK(rb.games == 0);
    CHECK(run_import("--run", r3, "--min-rating", "2480", FIX("game1.csa"), FIX("games.usi"), NULL) == 0);
    read_back(r3, &rb);
    CHECK(rb.games == 1 && rb.found_resign == 1);
    /* --cycle N: the self-play file names and cycle; --root-q zero */
    const char *r4 = t_path("run4");
    CHECK(run_import("--run", r4, "--cycle", "2", "--root-q", "zero", FIX("game1.kif"), NULL) == 0);
    read_back(r4, &rb);
    CHECK(rb.games == 1 && rb.cycle == 2 && strcmp(rb.last_path, "shards/c0002_000001.safetensors") == 0);
    CHECK(rb.root_q_zero == 1 && rb.bad_rows == 0);
}

static void test_playouts(void) {
    const char *file = t_path("random.usi"), *run = t_path("run5");
    int64_t plies = write_playouts(file, 40, 300);
    CHECK(run_import("--run", run, "--shard-games", "16", file, NULL) == 0);
    readback_t rb;
    read_back(run, &rb);
    CHECK(rb.games == 40 && rb.positions == plies && rb.shards == 3 && rb.bad_rows == 0);
    printf("playouts: 40 random games, %lld positions read back\n", (long long)plies);
}

static void test_errors(void) {
    const char *bad = t_path("bad.usi"), *run = t_path("run6");
    write_text(bad, "startpos moves 7g7f 3c3d 7f7d\n");
    CHECK(run_import("--run", run, bad, NULL) == 1);                 /* nothing readable */
    CHECK(run_import("--run", run, t_path("missing.csa"), NULL) == 1);  /* unreadable */
    CHECK(run_import("--run", run, "--format", "ki2", bad, NULL) == 2);
    CHECK(run_import("--run", run, "--root-q", "half", bad, NULL) == 2);
    CHECK(run_import("--run", run, NULL) == 2);                      /* no files */
    CHECK(run_import("--run", run, "--cycle", "-2", bad, NULL) == 2);
    write_text(t_path("afile"), "x");
    CHECK(run_import("--run", t_path("afile/run"), FIX("game1.csa"), NULL) == 1); /* no run directory */
    /* nothing was imported: the run these imports created is gone again (issue 46: no koma.db, lock,
     * models/ or shards/ left in a mistyped --run) */
    CHECK(!compat_file_exists(run));
    /* One rule for every format: nothing usable is an error. USI records that
     * are all rejected or have no moves import nothing: exit 1, as for CSA/KIF. */
    const char *none = t_path("none.usi");
    write_text(none, "startpos\nstartpos moves 7g7f 3c3d 7f7d\nsfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1\n");
    CHECK(run_import("--run", t_path("run7"), none, NULL) == 1);
    CHECK(run_import("--run", t_path("run7"), FIX("game1.csa"), NULL) == 0);
    CHECK(run_import("--run", t_path("run7"), FIX("game1.csa"), NULL) == 0); /* all duplicates: usable, not new */
}

/* A full disk while a shard is written: the message names the shard file
 * and says the disk is full (not the database). Needs a small tmpfs
 * (mount, as root); skipped where that is not allowed. */
static void test_disk_full(void) {
    const char *mnt = t_path("full");
    char err[256], run[1000], out[1000];
    KOMA_ASSERT(compat_mkdir_p(mnt, err, sizeof err) == 0);
    const char *mount[] = {"mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", mnt, NULL};
    int status = -1;
    if (compat_run_io(mount, "", "", &status, err, sizeof err) != 0 || status != 0) {
        printf("disk full: no tmpfs can be mounted here (not root?): not tested\n");
        return;
    }
    snprintf(run, sizeof run, "%s/run", mnt);
    snprintf(out, sizeof out, "%s", t_path("full.txt"));
    const char *argv[260];
    int n = 0;
    argv[n++] = KOMA_IMPORT_BIN;
    argv[n++] = "--run", argv[n++] = run, argv[n++] = "--dedup", argv[n++] = "0";
    while (n < 250) argv[n++] = FIX("game1.csa"); /* one shard far larger than what is left */
    argv[n] = NULL;
    CHECK(compat_run_io(argv, "", out, &status, err, sizeof err) == 0 && status == 1);
    char *text = t_read_file(out, NULL);
    CHECKF(strstr(text, "shards/import_000001.safetensors: the shard could not be written: the disk is full") &&
               !strstr(text, "koma.db: write shard"),
           "import on a full disk said:\n%s", text);
    free(text);
    const char *umount[] = {"umount", mnt, NULL};
    CHECK(compat_run_io(umount, "", "", &status, err, sizeof err) == 0 && status == 0);
}

int main(void) {
    engine_init();
    t_scratch("record_import");
    test_fixtures();
    test_filters();
    test_playouts();
    test_errors();
    test_disk_full();
    int rc = t_done("test_record_import");
    if (!g_fail) t_rm_rf(t_dir);
    return rc;
}
