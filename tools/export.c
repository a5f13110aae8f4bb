/* export.c - `export`: a run's games out in the field's training formats,
 * for dlshogi's train.py (hcpe, hcpe3) or YaneuraOu's learner (psv).
 *
 *   export --run DIR --format hcpe|hcpe3|psv --out FILE [--from-cycle A] [--to-cycle B]
 *
 * Owns: the command line, the choice of shards (cycles A..B; -1 = imported
 * data), turning each game's rows into records. Does not own: the record
 * layouts and encodings (data/fmt_file.h, data/fmt_pack.h), the shards
 * (data/shard.h), the database (data/db.h).
 *
 * What goes out: every game of the chosen shards, in the order koma.db has
 * them (shards oldest first, rows in order).
 *   hcpe  a record per row: the position, eval from root_q (dlshogi's scale),
 *         the move played, the game's result and its sennichite/declaration/
 *         move-limit flag.
 *   hcpe3 a record per game: its start position and result byte, then per
 *         move the move, eval from root_q and the policy target as visit
 *         counts (the counts the target was made from when small counts give
 *         exactly those probabilities, as for a target imported from hcpe3;
 *         else proportional counts); a row without a policy target (a fast
 *         search) has no candidates, as dlshogi writes moves it does not
 *         train on.
 *   psv   a record per row: the position, score from root_q (YaneuraOu's
 *         scale), the move, the position's ply, the result from the side to
 *         move.
 * Import of an exported file (--root-q auto, --dedup 0) and export again
 * gives the same bytes.
 *
 * It only reads the run (no lock: it may run beside selfplay); the output
 * is checked (run_output_check: never a file of a run, a directory or a
 * device) and written to a temporary name (OUT.tmp.PID), fsync'ed and
 * renamed: an export that is interrupted (Ctrl-C, kill -9, a full disk)
 * leaves OUT as it was, and the next export to OUT removes the temporaries
 * of exports that no longer run. Nothing to export (no games in the cycles
 * chosen, or none with a record in the format) is an error, found before OUT
 * is touched.
 * Exit status: 0 written, 1 a run or file failure or nothing to export, 2
 * bad flags.
 */
#include "compat/version.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "config/config.h"
#include "data/db.h"
#include "data/fmt_file.h"
#include "data/run.h"
#include "data/shard.h"
#include "data/shard_pos.h"
#include "engine/encode.h"
#include "engine/position.h"
#include "engine/sfen.h"

#define MAX_OPTS 16

static const char *g_prog = "export";
#define USAGE_ARGS                                                                                                     \
    "--run DIR --format hcpe|hcpe3|psv --out FILE [--from-cycle A] [--to-cycle B]\n"                                   \
    "Writes the run's games (shards of cycles A..B; -1 = imported data) as dlshogi\n"                                  \
    "hcpe (a position a record) or hcpe3 (a game a record, visit counts) or YaneuraOu\n"                               \
    "PackedSfenValue (psv, a position a record)."
static char usage[512];

static char g_run[CFG_STRING_MAX] = "runs/default";
static char g_format[CFG_STRING_MAX] = "";
static char g_out[CFG_STRING_MAX] = "";
static int64_t g_from = -1, g_to = 1000000000;

typedef struct {
    fmt_kind_t kind;
    compat_durable_t *f;
    pos_t *pos;
    uint8_t *buf; /* one hcpe3 game */
    size_t cap;
    int64_t games, records, positions, skipped;
    char err[2048];
} export_t;

static int emit(export_t *ex, const void *data, size_t len) {
    char err[1024];
    if (compat_durable_write(ex->f, data, len, err, sizeof err) != 0) {
        set_err(ex->err, sizeof ex->err, "%s", err);
        return -1;
    }
    return 0;
}

static int export_rows(export_t *ex, const shard_columns_t *c, const db_game_t *g) {
    uint8_t rec[FMT_PSV_BYTES];
    uint8_t rb = fmt_result_byte(g->result, g->reason);
    for (int64_t r = g->first_row; r < g->first_row + g->row_count; r++) {
        shard_row_pos(c, r, ex->pos); /* board, hands, side, ply: what the encoders read */
        int rc = ex->kind == FMT_HCPE ? fmt_hcpe_record(ex->pos, c->root_q[r], c->move[r], rb, rec)
                                      : fmt_psv_record(ex->pos, c->root_q[r], c->move[r], c->result[r], rec);
        if (rc != 0) {
            ex->skipped++;
            continue;
        }
        if (emit(ex, rec, ex->kind == FMT_HCPE ? FMT_HCPE_BYTES : FMT_PSV_BYTES) != 0) return -1;
        ex->records++;
        ex->positions++;
    }
    return 0;
}

static int reserve(export_t *ex, size_t n) {
    if (n <= ex->cap) return 0;
    size_t cap = n > 2 * ex->cap ? n : 2 * ex->cap;
    uint8_t *b = realloc(ex->buf, cap);
    if (!b) return -1;
    ex->buf = b;
    ex->cap = cap;
    return 0;
}

static inline void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static int export_game3(export_t *ex, const shard_t *s, const db_game_t *g) {
    const shard_columns_t *c = shard_columns(s);
    pos_t *pos = ex->pos;
    char err[512];
    if (sfen_parse_cstr(pos, g->start_sfen, err, sizeof err) != SFEN_OK) {
        ex->skipped++;
        return 0;
    }
    int32_t n = g->plies;
    if (reserve(ex, FMT_HCPE3_HEAD) != 0 ||
        fmt_hcpe3_head(pos, n, fmt_result_byte(g->result, g->reason), ex->buf) != 0) {
        ex->skipped++;
        return 0;
    }
    size_t len = FMT_HCPE3_HEAD;
    const char *mv = g->moves ? g->moves : "";
    int64_t r = g->first_row, rend = g->first_row + g->row_count;
    uint16_t visits[SHARD_LABEL_NB];
    float probs[SHARD_LABEL_NB], rowp[SHARD_LABEL_NB];
    move_t cm[SHARD_LABEL_NB];
    for (int32_t i = 0; i < n; i++) {
        while (*mv == ' ') mv++;
        size_t w = strcspn(mv, " ");
        move_t m = move_from_usi(pos, mv, w);
        mv += w;
        if (!move_is_ok(m)) {
            ex->skipped++;
            return 0;
        }
        while (r < rend && c->ply[r] < i) r++;
        int has = r < rend && c->ply[r] == i;
        int32_t nc = 0;
        float q = 0.0f;
        if (has) {
            q = c->root_q[r];
            int64_t b, e;
            shard_row_policy(s, r, &b, &e);
            shard_row_probs(s, r, rowp);
            for (int64_t j = b; j < e; j++) {
                move_t x = encode_label_move(pos, c->policy_label[j]);
                if (x == MOVE_NONE) continue;
                cm[nc] = x;
                probs[nc++] = rowp[j - b];
            }
            fmt_visits_of_probs(probs, nc, visits);
        }
        if (reserve(ex, len + FMT_HCPE3_MOVE + (size_t)nc * FMT_HCPE3_CAND) != 0) {
            set_err(ex->err, sizeof ex->err, "out of memory");
            return -1;
        }
        uint8_t *p = ex->buf + len;
        put16(p, fmt_move_to_cshogi(m));
        put16(p + 2, (uint16_t)(int16_t)fmt_value_to_eval(q, FMT_EVAL_DLSHOGI, FMT_EVAL_DLSHOGI_MAX));
        put16(p + 4, (uint32_t)nc);
        p += FMT_HCPE3_MOVE;
        for (int32_t j = 0; j < nc; j++, p += FMT_HCPE3_CAND) {
            put16(p, fmt_move_to_cshogi(cm[j]));
            put16(p + 2, visits[j]);
        }
        len = (size_t)(p - ex->buf);
        if (has) ex->positions++;
        pos_do_move(pos, m);
    }
    if (emit(ex, ex->buf, len) != 0) return -1;
    ex->records++;
    return 0;
}

/* A position set's rows (imported hcpe or psv: no games), a record each. */
static int export_set(export_t *ex, const shard_t *s) {
    const shard_columns_t *c = shard_columns(s);
    uint8_t rec[FMT_PSV_BYTES];
    for (int64_t r = 0; r < shard_rows(s); r++) {
        shard_row_pos(c, r, ex->pos);
        int black = ex->pos->side == COLOR_BLACK ? c->result[r] : -c->result[r];
        db_reason_t why = c->reason ? (db_reason_t)c->reason[r] : black ? DB_REASON_RESIGN : DB_REASON_ABORT;
        int rc = ex->kind == FMT_HCPE ? fmt_hcpe_record(ex->pos, c->root_q[r], c->move[r], fmt_result_byte(black, why), rec)
                                      : fmt_psv_record(ex->pos, c->root_q[r], c->move[r], c->result[r], rec);
        if (rc != 0) {
            ex->skipped++;
            continue;
        }
        if (emit(ex, rec, ex->kind == FMT_HCPE ? FMT_HCPE_BYTES : FMT_PSV_BYTES) != 0) return -1;
        ex->records++;
        ex->positions++;
    }
    return 0;
}

static int export_shard(export_t *ex, db_t *db, const db_shard_t *sh) {
    char path[CFG_STRING_MAX + DB_PATH_MAX + 2], err[1024];
    snprintf(path, sizeof path, "%s/%s", g_run, sh->path);
    shard_t *s = shard_open(path, NULL, 0, err, sizeof err);
    if (!s) {
        set_err(ex->err, sizeof ex->err, "%s", err);
        return -1;
    }
    if (shard_is_set(s)) { /* positions, not games: hcpe3 (a game a record) has no place for them */
        int rc = ex->kind == FMT_HCPE3 ? (ex->skipped += shard_rows(s), 0) : export_set(ex, s);
        shard_close(s);
        return rc;
    }
    db_game_list_t gl = {0};
    int rc = 0;
    if (db_games_of_shard(db, sh->id, &gl) != DB_OK) {
        set_err(ex->err, sizeof ex->err, "%s", db_errmsg(db));
        rc = -1;
    }
    for (int64_t i = 0; i < gl.n && rc == 0; i++) {
        const db_game_t *g = &gl.games[i];
        if (g->first_row < 0 || g->row_count < 0 || g->first_row + g->row_count > shard_rows(s)) {
            ex->skipped++;
            continue;
        }
        rc = ex->kind == FMT_HCPE3 ? export_game3(ex, s, g) : export_rows(ex, shard_columns(s), g);
        ex->games++;
    }
    db_game_list_free(&gl);
    shard_close(s);
    return rc;
}

/* KOMA_TEST_EXPORT_WAIT=1 (tests only): once the output's temporary file is
 * open, say so on stdout and wait for the end of stdin, so that a test can
 * kill the export (kill -9) while it writes, at a known point. */
static void test_wait_hook(void) {
    const char *w = getenv("KOMA_TEST_EXPORT_WAIT");
    if (!w || strcmp(w, "1") != 0) return;
    printf("%s: KOMA_TEST_EXPORT_WAIT: writing %s.tmp.%d; waiting for the end of stdin\n", g_prog, g_out,
           compat_getpid());
    fflush(stdout);
    while (getchar() != EOF) {}
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "export");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    snprintf(usage, sizeof usage, "usage: %s " USAGE_ARGS, g_prog);
    cfg_opt_t opts[MAX_OPTS];
    int n = 0;
    opts[n++] = (cfg_opt_t){"run", CFG_TYPE_STRING, g_run, 0, 0, "run directory to read"};
    opts[n++] = (cfg_opt_t){"format", CFG_TYPE_STRING, g_format, 0, 0, "hcpe, hcpe3 or psv"};
    opts[n++] = (cfg_opt_t){"out", CFG_TYPE_STRING, g_out, 0, 0, "the file to write (replaced whole)"};
    opts[n++] = (cfg_opt_t){"from-cycle", CFG_TYPE_INT, &g_from,
                            -1,           1e9,          "first cycle whose shards go out (-1 = imported data)"};
    opts[n++] = (cfg_opt_t){"to-cycle", CFG_TYPE_INT, &g_to, -1, 1e9, "last cycle whose shards go out"};
    char err[2048];
    int rc = cfg_parse(opts, n, argc, argv, 1, NULL, 0, NULL, usage, stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "%s: %s\n%s\n", g_prog, err, usage);
        return 2;
    }
    export_t ex;
    memset(&ex, 0, sizeof ex);
    if (fmt_kind_parse(g_format, &ex.kind) != 0) {
        fprintf(stderr, "%s: --format '%s': expected hcpe, hcpe3 or psv\n%s\n", g_prog, g_format, usage);
        return 2;
    }
    if (!g_out[0]) {
        fprintf(stderr, "%s: --out FILE is required\n%s\n", g_prog, usage);
        return 2;
    }
    if (g_from > g_to) {
        fprintf(stderr, "%s: --from-cycle %" PRId64 " is after --to-cycle %" PRId64 "\n", g_prog, g_from, g_to);
        return 2;
    }
    char dbpath[CFG_STRING_MAX + 16];
    run_path(g_run, RUN_DB, dbpath, sizeof dbpath);
    if (!compat_file_exists(dbpath)) {
        fprintf(stderr, "%s: %s: no koma.db: not a run (give --run DIR)\n", g_prog, g_run);
        return 1;
    }
    if (run_output_check(g_out, g_run, "the export", "--out", err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    db_t *db = NULL;
    if (db_open(dbpath, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    int status = 1;
    db_shard_t *list = NULL;
    int32_t ns = 0;
    ex.pos = malloc(sizeof *ex.pos);
    if (!ex.pos) goto done;
    if (db_shards_recent(db, 0, &list, &ns) != DB_OK) {
        fprintf(stderr, "%s: %s\n", g_prog, db_errmsg(db));
        goto done;
    }
    /* nothing to export is an error found before the output is touched */
    int32_t chosen = 0, lo = INT32_MAX, hi = INT32_MIN;
    for (int32_t i = 0; i < ns; i++) {
        if (list[i].cycle >= g_from && list[i].cycle <= g_to) chosen++;
        if (list[i].cycle < lo) lo = list[i].cycle;
        if (list[i].cycle > hi) hi = list[i].cycle;
    }
    if (chosen == 0) {
        if (ns == 0) fprintf(stderr, "%s: %s: nothing to export: the run %s holds no games", g_prog, g_out, g_run);
        else if (lo == hi)
            fprintf(stderr,
                    "%s: %s: nothing to export: no games of cycles %" PRId64 "..%" PRId64
                    " in %s (its games are all of cycle %d%s)",
                    g_prog, g_out, g_from, g_to, g_run, lo, lo < 0 ? ": imported data" : "");
        else
            fprintf(stderr,
                    "%s: %s: nothing to export: no games of cycles %" PRId64 "..%" PRId64 " in %s (its games are "
                    "of cycles %d..%d; -1 = imported)",
                    g_prog, g_out, g_from, g_to, g_run, lo, hi);
        fprintf(stderr, "; %s\n", compat_file_exists(g_out) ? "the file was left as it was" : "no file written");
        goto done;
    }
    /* temporaries of exports to the same name that were killed (kill -9, a crash) */
    char stale[1024];
    int removed = compat_durable_remove_stale(g_out, stale, sizeof stale);
    if (removed > 0)
        fprintf(stderr, "%s: removed %d temporary file(s) left by killed exports to %s (%s%s)\n", g_prog, removed,
                g_out, stale, removed > 1 ? ", ..." : "");
    ex.f = compat_durable_open(g_out, err, sizeof err);
    if (!ex.f) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        goto done;
    }
    test_wait_hook();
    double t0 = (double)compat_now_ns() * 1e-9;
    int failed = 0;
    for (int32_t i = 0; i < ns && !failed; i++)
        if (list[i].cycle >= g_from && list[i].cycle <= g_to && export_shard(&ex, db, &list[i]) != 0) failed = 1;
    if (failed) {
        compat_durable_abort(ex.f);
        fprintf(stderr, "%s: %s: nothing written: %s\n", g_prog, g_out, ex.err);
        goto done;
    }
    if (ex.records == 0) { /* games, but none has a record in the format */
        compat_durable_abort(ex.f);
        fprintf(stderr,
                "%s: %s: nothing to export: none of the %" PRId64 " game(s) of cycles %" PRId64 "..%" PRId64
                " has a record in %s (%" PRId64 " skipped); %s\n",
                g_prog, g_out, ex.games, g_from, g_to, fmt_kind_name(ex.kind), ex.skipped,
                compat_file_exists(g_out) ? "the file was left as it was" : "no file written");
        goto done;
    }
    if (run_output_check(g_out, g_run, "the export", "--out", err, sizeof err) != 0 ||
        compat_durable_commit(ex.f, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        goto done;
    }
    double dt = (double)compat_now_ns() * 1e-9 - t0;
    printf("%s: %s: %" PRId64 " game(s), %" PRId64 " %s record(s), %" PRId64 " position(s), %" PRId64
           " skipped (no record in the format), %.2f s\n",
           g_prog, g_out, ex.games, ex.records, fmt_kind_name(ex.kind), ex.positions, ex.skipped, dt);
    status = 0;
done:
    free(list);
    free(ex.pos);
    free(ex.buf);
    db_close(db);
    return status;
}
