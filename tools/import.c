/* import.c - `import`: game records (CSA, KIF, USI) and the field's binary
 * training data (dlshogi hcpe/hcpe3, YaneuraOu PackedSfenValue) into a run's
 * koma.db and shards, so that `train --from-games --run DIR` trains on them.
 *
 *   import --run DIR [--min-rating R] [--skip-draws] [--cycle -1|N] [--shard-games N]
 *          [--format auto|csa|kif|usi|hcpe|hcpe3|psv] [--root-q auto|result|zero|eval]
 *          [--dedup 0|1] FILES|DIRS...
 *
 * Owns: the command line, filtering (rating, draws, games without moves,
 * duplicates), turning each game into shard rows, and the counts it prints.
 * Does not own: reading records (data/record.c; hcpe, hcpe3 and psv:
 * data/fmt_file.c), the shard format and the crash-safe registration
 * (data/shard.c, data/db.c).
 *
 * hcpe and psv hold positions: each becomes a game of one move (its SFEN the
 * start position, the move a one-hot target), so the same dedup, draw and
 * shard rules apply; hcpe3 games keep their visit counts as the policy
 * target (prob = visits / sum) and moves without candidates get no policy
 * target. --root-q auto (the default) stores the file's eval as root_q
 * where the format has one (data/fmt_pack.h: dlshogi's and YaneuraOu's
 * scales), the result otherwise.
 *
 * Rows: one per move of each game, for the position before the move: packed
 * feature planes, hand values, legal-move mask, a one-hot policy target on
 * the move played, the result from the side to move (set by the shard
 * builder from the game's result), root_q (= that result with --root-q
 * result, else 0), ply, move and the exact position. Games go into shards of
 * --shard-games games, each written and registered with its games in one
 * transaction (shard_commit). --cycle -1 (the default) registers the shards
 * as cycle -1, data from before any self-play cycle: `train --from-games`
 * takes every shard, and a self-play trainer's window (shards with cycle <=
 * c, the most recent positions first) takes them too while they are recent
 * enough, without counting them as any cycle's new positions; --cycle N
 * counts them as new positions of cycle N (more steps in that cycle). Their
 * paths are shards/import_<seq>.safetensors (cycle -1) or the self-play names
 * shards/c<cycle>_<seq>.safetensors.
 *
 * Resuming: games already in the run (same start position and moves) are
 * skipped (--dedup 1, the default), so after a kill or Ctrl-C the same
 * command again imports only what is missing. Ctrl-C commits the games read
 * so far and exits 130.
 *
 * Exit status: 0 when the inputs were read (rejected records are counted and
 * shown, not fatal) unless nothing at all could be imported from inputs that
 * had errors (1); 1 on a database or shard failure; 2 on bad flags.
 */
#include "compat/version.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "compat/compat.h"
#include "compat/status.h"
#include "config/config.h"
#include "data/db.h"
#include "data/fmt_file.h"
#include "data/run.h"
#include "data/record.h"
#include "data/shard.h"
#include "data/shard_pos.h"
#include "engine/encode.h"
#include "engine/position.h"
#include "engine/sfen.h"

#ifndef KOMA_VERSION_STRING
#define KOMA_VERSION_STRING "0.0.0"
#endif

#define MAX_OPTS 32
#define EXIT_STOPPED 130
#define RATING_OFF (-1e9)

/* "usage: NAME " comes first (main); NAME is the name this program was run
 * as: import in the build, koma-import where installed (compat/version.h),
 * in usage, --version and every message. */
static const char *g_prog = "import";
#define USAGE_ARGS                                                                             \
    "[--run DIR] [--min-rating R] [--skip-draws] [--cycle -1|N]\n"                              \
    "       [--shard-games N] [--format auto|csa|kif|usi|hcpe|hcpe3|psv]\n"                     \
    "       [--root-q auto|result|zero|eval] [--dedup -1|0|1] [--shard-rows N] [--check] FILES|DIRS...\n"           \
    "Reads CSA, KIF and USI game records and dlshogi hcpe/hcpe3 and YaneuraOu psv\n"            \
    "training data, checks every position and move, and stores the games in the\n"            \
    "run's koma.db and shards for `train --from-games`. A directory stands for its\n"         \
    "*.csa *.kif *.kifu *.usi *.sfen *.hcpe *.hcpe3 *.psv files. It is the run's one writer while\n" \
    "it runs (refused while selfplay or train runs on the same run); a missing\n"              \
    "koma.db next to existing models/ or shards/ is refused."
static char usage[1536];

/* ---- flags ------------------------------------------------------------------------- */
static char g_run[CFG_STRING_MAX] = "runs/default";
static char g_format[CFG_STRING_MAX] = "auto";
static char g_root_q[CFG_STRING_MAX] = "auto";
static double g_min_rating = RATING_OFF;
static int g_skip_draws = 0;
static int64_t g_dedup = -1; /* -1: records 1 (a resumed import skips stored games), position files 0 */
static int64_t g_cycle = -1, g_shard_games = 256, g_show = 20, g_shard_rows = 100000;
static double g_progress = -1;
static int g_quiet = 0, g_check = 0;

/* ---- the set of games already stored (XXH3 of start + moves) ---------------------- */
typedef struct {
    uint64_t *keys; /* (cap), 0 = empty */
    int64_t n, cap;
} hashset_t;

static uint64_t game_key(const char *start, const char *moves) {
    uint64_t k = XXH3_64bits_withSeed(moves, strlen(moves), XXH3_64bits(start, strlen(start)));
    return k ? k : 1;
}

/* Adds k; returns 1 when it was new, 0 when present, -1 when out of memory. */
static int hashset_add(hashset_t *h, uint64_t k) {
    if (2 * (h->n + 1) > h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 1024;
        uint64_t *keys = calloc((size_t)cap, sizeof *keys);
        if (!keys) return -1;
        for (int64_t i = 0; i < h->cap; i++) {
            uint64_t x = h->keys[i];
            if (!x) continue;
            int64_t j = (int64_t)(x & (uint64_t)(cap - 1));
            while (keys[j]) j = (j + 1) & (cap - 1);
            keys[j] = x;
        }
        free(h->keys);
        h->keys = keys;
        h->cap = cap;
    }
    int64_t j = (int64_t)(k & (uint64_t)(h->cap - 1));
    while (h->keys[j]) {
        if (h->keys[j] == k) return 0;
        j = (j + 1) & (h->cap - 1);
    }
    h->keys[j] = k;
    h->n++;
    return 1;
}

enum { ROOT_Q_AUTO, ROOT_Q_RESULT, ROOT_Q_ZERO, ROOT_Q_EVAL };

/* A game from either reader. */
typedef struct {
    const char *start_sfen;
    const move_t *moves;
    int32_t n_moves;
    int32_t result; /* db_result_t */
    db_reason_t reason;
    const float *values;         /* (n_moves) or NULL: the file's evals as values */
    const uint32_t *cand_begin;  /* (n_moves + 1) or NULL: one-hot targets on the moves */
    const move_t *cand_moves;
    const uint16_t *cand_visits;
    int32_t length_unknown;      /* a position imported as a game of one move (hcpe, psv): its moves_left unknown */
} import_game_t;

/* ---- the import ----------------------------------------------------------------------- */
typedef struct {
    db_t *db;
    shard_builder_t *b;
    pos_t *pos;
    hashset_t seen;
    int64_t seq; /* next shard number */
    int root_q; /* ROOT_Q_* */
    int failed;  /* a database/shard failure: stop */
    char err[2048];
    /* counts */
    int64_t files, files_bad, games_read, games, positions, shards;
    int64_t sets, sets_done, set_records, set_resumed; /* position files: imported, already done, records read, skipped by resuming */
    int64_t wrong_format;    /* position files refused whole: nearly every record failed */
    int64_t cut_short;       /* files that end inside a record (their unread bytes are named): an error */
    shard_builder_t *b_set;  /* the position set's builder while one is read */
    int64_t skip_draw, skip_rating, skip_dup, skip_empty;
    int64_t rejected, rej_by[REC_ERR_NB], shown;
    status_t *st;   /* stderr: files, games and speed so far (in place on a terminal), rejects */
    double t0;      /* seconds */
} import_t;

static int commit_shard(import_t *im) {
    if (shard_builder_games(im->b) == 0) return 0;
    char rel[DB_PATH_MAX], full[CFG_STRING_MAX + DB_PATH_MAX + 2];
    for (;;) { /* never a path that exists (an orphan of a killed run, a file put there by hand) */
        if (g_cycle >= 0) shard_path_format(rel, sizeof rel, (int32_t)g_cycle, im->seq);
        else snprintf(rel, sizeof rel, "shards/import_%06" PRId64 ".safetensors", im->seq);
        snprintf(full, sizeof full, "%s/%s", g_run, rel);
        if (!compat_file_exists(full)) break;
        im->seq++;
    }
    char err[1024];
    db_shard_t sh;
    db_status_t st = shard_commit(im->db, g_run, rel, (int32_t)g_cycle, im->b, &sh, err, sizeof err);
    if (st != DB_OK) {
        snprintf(im->err, sizeof im->err, "%.300s: shard %s (%d games) not written: %.600s", g_run, rel,
                 (int)shard_builder_games(im->b), err);
        im->failed = 1;
        return -1;
    }
    im->seq++;
    im->shards++;
    im->games += shard_builder_games(im->b);
    im->positions += shard_builder_rows(im->b);
    shard_builder_reset(im->b);
    return 0;
}

/* One game's rows into the builder. */
static int add_game(import_t *im, const import_game_t *g, const char *moves_usi) {
    pos_t *pos = im->pos;
    char err[512];
    if (sfen_parse_cstr(pos, g->start_sfen, err, sizeof err) != SFEN_OK) { /* the reader checked it */
        snprintf(im->err, sizeof im->err, "internal: start position '%s' refused: %s", g->start_sfen, err);
        return -1;
    }
    uint8_t hcp[SHARD_HCP_BYTES];
    uint16_t labs[ENC_LABEL_NB];
    float probs[ENC_LABEL_NB];
    for (int32_t i = 0; i < g->n_moves; i++) {
        move_t m = g->moves[i];
        color_t stm = pos_side_to_move(pos);
        int32_t np = 0;
        if (g->cand_begin) { /* visit counts (the reader checked the moves: legal, sum > 0) */
            uint32_t b = g->cand_begin[i], e = g->cand_begin[i + 1], sum = 0;
            for (uint32_t j = b; j < e; j++) sum += g->cand_visits[j];
            for (uint32_t j = b; j < e && np < ENC_LABEL_NB; j++) {
                int32_t label = encode_move_label(pos, g->cand_moves[j]);
                KOMA_ASSERT(label >= 0 && label < ENC_LABEL_NB);
                labs[np] = (uint16_t)label;
                probs[np++] = (float)g->cand_visits[j] / (float)sum;
            }
        } else {
            int32_t label = encode_move_label(pos, m);
            KOMA_ASSERT(label >= 0 && label < ENC_LABEL_NB);
            labs[0] = (uint16_t)label;
            probs[0] = 1.0f;
            np = 1;
        }
        shard_pos_hcp(pos, hcp);
        float z = (float)(stm == COLOR_BLACK ? g->result : -g->result);
        shard_row_t row = {
            .hcp = hcp,
            .policy_label = labs,
            .policy_prob = probs,
            .policy_n = np,
            .root_q = im->root_q == ROOT_Q_ZERO                 ? 0.0f
                      : im->root_q == ROOT_Q_EVAL && g->values ? g->values[i]
                      : im->root_q == ROOT_Q_AUTO && g->values ? g->values[i]
                                                               : z,
            .ply = (uint16_t)i,
            .move = m,
        };
        if (shard_builder_add_row(im->b, &row, err, sizeof err) != 0) {
            shard_builder_abort_game(im->b);
            snprintf(im->err, sizeof im->err, "shard row: %s", err);
            return -1;
        }
        pos_do_move(pos, m);
    }
    if (g->length_unknown) shard_builder_length_unknown(im->b);
    db_game_t dg = {
        .model_id = 0,
        .start_sfen = g->start_sfen,
        .moves = moves_usi,
        .plies = g->n_moves,
        .result = g->result,
        .reason = g->reason,
    };
    if (shard_builder_end_game(im->b, &dg, err, sizeof err) != 0) {
        shard_builder_abort_game(im->b);
        snprintf(im->err, sizeof im->err, "shard game: %s", err);
        return -1;
    }
    return 0;
}

static int accept_game(import_t *im, const import_game_t *g, const double rating[2]) {
    im->games_read++;
    if (g->n_moves == 0) {
        im->skip_empty++;
        return compat_stop_requested();
    }
    if (g_skip_draws && g->result == DB_RESULT_DRAW) {
        im->skip_draw++;
        return compat_stop_requested();
    }
    if (g_min_rating > RATING_OFF) {
        double lo = fmin(rating[0], rating[1]);
        if (!(isfinite(rating[0]) && isfinite(rating[1]) && lo >= g_min_rating)) {
            im->skip_rating++;
            return compat_stop_requested();
        }
    }
    char *moves = rec_moves_usi(g->moves, g->n_moves);
    if (!moves) {
        snprintf(im->err, sizeof im->err, "out of memory");
        im->failed = 1;
        return 1;
    }
    if (g_dedup != 0) {
        int r = hashset_add(&im->seen, game_key(g->start_sfen, moves));
        if (r == 0) {
            im->skip_dup++;
            free(moves);
            return compat_stop_requested();
        }
        if (r < 0) {
            free(moves);
            snprintf(im->err, sizeof im->err, "out of memory");
            im->failed = 1;
            return 1;
        }
    }
    if (g_check) { /* --check: read, checked and counted, stored nowhere */
        free(moves);
        im->games++;
        im->positions += g->n_moves;
        return compat_stop_requested();
    }
    int rc = add_game(im, g, moves);
    free(moves);
    if (rc != 0) {
        im->failed = 1;
        return 1;
    }
    if (shard_builder_games(im->b) >= g_shard_games && commit_shard(im) != 0) return 1;
    return compat_stop_requested();
}

static int on_game(void *user, const rec_game_t *g) {
    import_game_t ig = {.start_sfen = g->start_sfen, .moves = g->moves, .n_moves = g->n_moves,
                        .result = g->result, .reason = g->reason};
    return accept_game(user, &ig, g->rating);
}

static int on_fmt_game(void *user, const fmt_game_t *g) {
    import_game_t ig = {.start_sfen = g->start_sfen, .moves = g->moves, .n_moves = g->n_moves,
                        .result = g->result, .reason = g->reason, .values = g->values,
                        .cand_begin = g->cand_begin, .cand_moves = g->cand_moves, .cand_visits = g->cand_visits,
                        .length_unknown = g->n_moves <= 1}; /* hcpe, psv: a position, not a game */
    static const double unrated[2] = {NAN, NAN};
    return accept_game(user, &ig, unrated);
}

static void on_reject(void *user, const rec_reject_t *r) {
    import_t *im = user;
    im->rejected++;
    if (r->code == REC_ERR_TRUNCATED) im->cut_short++; /* a file that ends inside a record: bytes not read */
    if ((unsigned)r->code < REC_ERR_NB) im->rej_by[r->code]++;
    if (r->game == 0) im->files_bad++;
    if (im->shown < g_show) status_event(im->st, STATUS_WARN, "%s: rejected: %s", g_prog, r->msg);
    else if (im->shown == g_show) status_event(im->st, STATUS_WARN, "%s: (more rejects not shown; --show-rejects N)", g_prog);
    im->shown++;
}

/* Every game already in the run, so that a second import of the same records adds nothing. */
static int load_seen(import_t *im) {
    db_shard_t *list = NULL;
    int32_t n = 0;
    if (db_shards_recent(im->db, 0, &list, &n) != DB_OK) {
        snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
        return -1;
    }
    int rc = 0;
    for (int32_t i = 0; i < n && rc == 0; i++) {
        db_game_list_t gl = {0};
        if (db_games_of_shard(im->db, list[i].id, &gl) != DB_OK) {
            snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
            rc = -1;
            break;
        }
        for (int64_t j = 0; j < gl.n && rc == 0; j++)
            if (hashset_add(&im->seen, game_key(gl.games[j].start_sfen, gl.games[j].moves)) < 0) {
                snprintf(im->err, sizeof im->err, "out of memory");
                rc = -1;
            }
        db_game_list_free(&gl);
    }
    free(list);
    return rc;
}

static double now_s(void) { return (double)compat_now_ns() * 1e-9; }

/* ---- position files (hcpe, psv) as position sets (docs/DATA.md) ----------------------- */
static uint64_t position_key(const uint8_t *hcp, uint16_t move, uint16_t ply) {
    uint8_t k[SHARD_HCP_BYTES + 4];
    memcpy(k, hcp, SHARD_HCP_BYTES);
    k[32] = (uint8_t)move, k[33] = (uint8_t)(move >> 8), k[34] = (uint8_t)ply, k[35] = (uint8_t)(ply >> 8);
    uint64_t h = XXH3_64bits(k, sizeof k) ^ 0x9e3779b97f4a7c15ULL; /* never equal to a game's key by design */
    return h ? h : 1;
}

/* --dedup 1: every stored position set's rows, so that none is stored twice. */
static int load_seen_positions(import_t *im) {
    db_shard_t *list = NULL;
    int32_t n = 0;
    if (db_shards_recent(im->db, 0, &list, &n) != DB_OK) {
        snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
        return -1;
    }
    int rc = 0;
    for (int32_t i = 0; i < n && rc == 0; i++) {
        if (list[i].games != 0 || list[i].features_version != SHARD_FEATURES_ANY) continue;
        char path[CFG_STRING_MAX + DB_PATH_MAX + 2], err[1024];
        snprintf(path, sizeof path, "%s/%s", g_run, list[i].path);
        shard_t *sh = shard_open(path, NULL, SHARD_OPEN_NO_CHECKSUM, err, sizeof err);
        if (!sh) continue; /* the trainer names it; dedup cannot use it */
        const shard_columns_t *c = shard_columns(sh);
        for (int64_t r = 0; shard_is_set(sh) && r < shard_rows(sh) && rc == 0; r++)
            if (hashset_add(&im->seen, position_key(c->hcp + r * SHARD_HCP_BYTES, c->move[r], c->ply[r])) < 0) {
                snprintf(im->err, sizeof im->err, "out of memory");
                rc = -1;
            }
        shard_close(sh);
    }
    free(list);
    return rc;
}

/* One record rejected: counted, and shown while --show-rejects allows. */
static void reject_record(import_t *im, const char *path, int64_t record, int64_t off, rec_error_t code,
                          const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    im->rejected++;
    if (code == REC_ERR_TRUNCATED) im->cut_short++;
    if ((unsigned)code < REC_ERR_NB) im->rej_by[code]++;
    if (im->shown < g_show)
        status_event(im->st, STATUS_WARN, "%s: rejected: %s: record %" PRId64 " (byte %" PRId64 "): %s", g_prog, path,
                     record, off, msg);
    else if (im->shown == g_show)
        status_event(im->st, STATUS_WARN, "%s: (more rejects not shown; --show-rejects N)", g_prog);
    im->shown++;
}

/* Record i (0-based) of a chunk at p into the builder, or rejected. 1 stored, 0 skipped or rejected. */
static int position_record(import_t *im, const char *path, fmt_kind_t k, const uint8_t *p, int64_t record,
                           int64_t off) {
    fmt_board_t fb;
    const char *e = fmt_pack_decode(k == FMT_HCPE ? FMT_PACK_HCP : FMT_PACK_PSFEN, p, &fb);
    if (e) {
        reject_record(im, path, record, off, REC_ERR_POSITION, "bad position: %s", e);
        return 0;
    }
    int16_t eval = (int16_t)(p[32] | p[33] << 8);
    uint16_t m16 = (uint16_t)(p[34] | p[35] << 8), ply = 0;
    int32_t z; /* the result from the side to move */
    move_t m;
    float value;
    uint8_t reason;
    if (k == FMT_HCPE) {
        int w = p[36] & 3;
        if (w == 3) {
            reject_record(im, path, record, off, REC_ERR_FORMAT, "gameResult %u is no result", (unsigned)p[36]);
            return 0;
        }
        int black = w == 0 ? 0 : w == 1 ? 1 : -1;
        z = fb.side == 0 ? black : -black;
        reason = (uint8_t)((p[36] & 4)    ? (black ? DB_REASON_PERPETUAL_CHECK : DB_REASON_SENNICHITE)
                           : (p[36] & 8)  ? DB_REASON_DECLARATION
                           : (p[36] & 16) ? DB_REASON_MAX_PLY
                           : black        ? DB_REASON_RESIGN
                                          : DB_REASON_ABORT);
        m = fmt_move_from_cshogi(m16);
        value = fmt_eval_to_value(eval, FMT_EVAL_DLSHOGI, FMT_EVAL_DLSHOGI_MAX);
    } else {
        uint16_t gp = (uint16_t)(p[36] | p[37] << 8);
        int8_t gr = (int8_t)p[38];
        if (gr < -1 || gr > 1) {
            reject_record(im, path, record, off, REC_ERR_FORMAT, "game_result %d is not -1, 0 or 1", (int)gr);
            return 0;
        }
        z = gr;
        reason = (uint8_t)(gr ? DB_REASON_RESIGN : DB_REASON_ABORT);
        ply = gp > 0 ? (uint16_t)(gp - 1) : 0;
        m = (move_t)m16;
        value = fmt_eval_to_value(eval, FMT_EVAL_YANEURAOU, FMT_EVAL_YANEURAOU_MAX);
    }
    char why[256];
    if (sfen_set_position(im->pos, fb.board, fb.hand, (color_t)fb.side, ply + 1, why, sizeof why) != SFEN_OK) {
        reject_record(im, path, record, off, REC_ERR_POSITION, "bad position: %s", why);
        return 0;
    }
    if (!move_is_ok(m) || !pos_is_valid_move(im->pos, m)) {
        char mt[MOVE_USI_MAX + 8];
        move_to_usi(m, mt);
        reject_record(im, path, record, off, REC_ERR_ILLEGAL, "move16 0x%04x (%s) is not legal", (unsigned)m16, mt);
        return 0;
    }
    if (g_skip_draws && z == 0) {
        im->skip_draw++;
        return 0;
    }
    uint8_t hcp[SHARD_HCP_BYTES];
    if (k == FMT_HCPE) memcpy(hcp, p, SHARD_HCP_BYTES); /* the record's own bytes: they decode */
    else if (fmt_pack_encode(FMT_PACK_HCP, &fb, hcp) != 0) {
        reject_record(im, path, record, off, REC_ERR_POSITION, "the position has no place in 32 bytes");
        return 0;
    }
    if (g_dedup == 1) {
        int r = hashset_add(&im->seen, position_key(hcp, (uint16_t)m, ply));
        if (r <= 0) {
            if (r < 0) snprintf(im->err, sizeof im->err, "out of memory"), im->failed = 1;
            else im->skip_dup++;
            return 0;
        }
    }
    if (g_check) return 1;
    float q = im->root_q == ROOT_Q_ZERO ? 0.0f : im->root_q == ROOT_Q_RESULT ? (float)z : value;
    char err[512];
    if (shard_builder_add_set_row(im->b_set, hcp, (uint16_t)m, (int8_t)z, q, ply, reason, err, sizeof err) != 0) {
        snprintf(im->err, sizeof im->err, "%s: record %" PRId64 ": %s", path, record, err);
        im->failed = 1;
        return 0;
    }
    return 1;
}

/* The chunk's shard and the set's progress in one transaction (or the progress alone). 0, or -1 (im->failed). */
static int commit_set_chunk(import_t *im, shard_builder_t *b, const db_set_t *set) {
    char err[1024];
    if (shard_builder_rows(b) == 0) {
        if (db_set_progress(im->db, set) != DB_OK) {
            snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
            im->failed = 1;
            return -1;
        }
        return 0;
    }
    char rel[DB_PATH_MAX], full[CFG_STRING_MAX + DB_PATH_MAX + 2];
    for (;;) {
        if (g_cycle >= 0) shard_path_format(rel, sizeof rel, (int32_t)g_cycle, im->seq);
        else snprintf(rel, sizeof rel, "shards/import_%06" PRId64 ".safetensors", im->seq);
        snprintf(full, sizeof full, "%s/%s", g_run, rel);
        if (!compat_file_exists(full)) break;
        im->seq++;
    }
    if (shard_commit_set(im->db, g_run, rel, (int32_t)g_cycle, b, set, NULL, err, sizeof err) != DB_OK) {
        snprintf(im->err, sizeof im->err, "%.300s: shard %s (%" PRId64 " positions) not written: %.600s", g_run, rel,
                 shard_builder_rows(b), err);
        im->failed = 1;
        return -1;
    }
    im->seq++;
    im->shards++;
    return 0;
}

/* The set row of path: found (resume or skip), or new (hashing the file once). 1 found or made, 0 skip the
 * file (already imported, or unreadable: counted), -1 failure. */
static int position_set_of(import_t *im, const char *path, fmt_kind_t k, int64_t bytes, db_set_t *set) {
    char abs[DB_PATH_MAX], err[1024];
    if (compat_real_path(path, abs, sizeof abs) != 0) snprintf(abs, sizeof abs, "%s", path);
    int64_t mtime = compat_file_mtime_ns(path);
    const size_t rec = k == FMT_HCPE ? FMT_HCPE_BYTES : FMT_PSV_BYTES;
    int found = 0;
    if (db_set_find(im->db, abs, bytes, mtime, NULL, set, &found) != DB_OK) goto dberr;
    if (!found) { /* not by name: hash it, for a file moved, copied or touched */
        uint64_t h = 0;
        int64_t hb = 0;
        if (db_file_xxh3(path, &h, &hb, err, sizeof err) != 0) {
            status_event(im->st, STATUS_WARN, "%s: %s", g_prog, err);
            im->files_bad++;
            return 0;
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        if (hb != bytes) {
            status_event(im->st, STATUS_WARN, "%s: %s: changed while it was hashed (%" PRId64 " then %" PRId64
                         " bytes): not imported", g_prog, path, bytes, hb);
            im->files_bad++;
            return 0;
        }
        if (db_set_find(im->db, abs, bytes, mtime, hex, set, &found) != DB_OK) goto dberr;
        if (!found) {
            memset(set, 0, sizeof *set);
            snprintf(set->path, sizeof set->path, "%s", abs);
            snprintf(set->format, sizeof set->format, "%s", fmt_kind_name(k));
            set->bytes = bytes;
            set->mtime_ns = mtime;
            snprintf(set->xxh3, sizeof set->xxh3, "%s", hex);
            set->records = bytes / (int64_t)rec;
            return 2; /* inserted once its first chunk is known to be of this format */
        }
    }
    if (set->finished) {
        status_event(im->st, STATUS_INFO, "%s: %s: already imported (position set %" PRId64 ", %" PRId64
                     " positions): not read again", g_prog, path, set->id, set->positions);
        im->sets_done++;
        return 0;
    }
    if (set->records_done > 0)
        status_event(im->st, STATUS_INFO, "%s: %s: resuming position set %" PRId64 " at record %" PRId64 " of %" PRId64,
                     g_prog, path, set->id, set->records_done + 1, set->records);
    return 1;
dberr:
    snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
    im->failed = 1;
    return -1;
}

/* Tests (tests/record/test_import_sets.c): with KOMA_TEST_IMPORT_HOLD=FILE, after each committed chunk the
 * import writes FILE ("N R": the Nth hold of this process, the records committed of the file) and waits until
 * the test removes it: the test then acts at a known point (kill -9, the input cut short) on every OS. N lets
 * the test tell a new hold from the last one still seen (on Windows a removed file can be seen a moment longer). */
static void test_hold(int64_t records_done) {
    static int64_t holds;
    const char *hold = getenv("KOMA_TEST_IMPORT_HOLD");
    if (!hold || !*hold) return;
    char text[48], err[256];
    int n = snprintf(text, sizeof text, "%" PRId64 " %" PRId64 "\n", ++holds, records_done);
    if (compat_write_file_durable(hold, text, (size_t)n, err, sizeof err) != 0) return;
    while (compat_file_exists(hold)) compat_sleep_ms(2);
}

/* A whole hcpe or psv file as a position set: chunk by chunk, each committed with the set's progress. */
static int import_positions(import_t *im, const char *path, fmt_kind_t k) {
    const size_t rec = k == FMT_HCPE ? FMT_HCPE_BYTES : FMT_PSV_BYTES;
    char err[1024];
    if (compat_check_regular_file(path, err, sizeof err) != 0) {
        status_event(im->st, STATUS_WARN, "%s: %s", g_prog, err);
        im->files_bad++;
        return 0;
    }
    int64_t bytes = compat_file_size(path);
    FILE *f = bytes >= 0 ? fopen(path, "rb") : NULL;
    if (!f) {
        status_event(im->st, STATUS_WARN, "%s: %s: cannot be opened", g_prog, path);
        im->files_bad++;
        return 0;
    }
    db_set_t set;
    memset(&set, 0, sizeof set);
    set.records = bytes / (int64_t)rec;
    int is_new = 1;
    if (!g_check) {
        int r = position_set_of(im, path, k, bytes, &set);
        if (r <= 0) {
            fclose(f);
            return r < 0 ? 1 : 0;
        }
        is_new = r == 2;
    }
    int64_t chunk = g_shard_rows;
    uint8_t *buf = malloc((size_t)chunk * rec);
    shard_builder_t *b = g_check ? NULL : shard_builder_new_compact(1, err, sizeof err);
    if (!buf || (!g_check && !b)) {
        snprintf(im->err, sizeof im->err, "%s: out of memory", path);
        im->failed = 1;
        free(buf);
        shard_builder_free(b);
        fclose(f);
        return 1;
    }
    im->b_set = b;
    int64_t at = set.records_done;
    im->set_resumed += at;
    if (at > 0 && fseeko(f, (off_t)(at * (int64_t)rec), SEEK_SET) != 0) {
        status_event(im->st, STATUS_WARN, "%s: %s: cannot seek to record %" PRId64, g_prog, path, at + 1);
        im->files_bad++;
        at = set.records; /* nothing read */
    }
    int rc = 0;
    while (at < set.records && !im->failed && !compat_stop_requested()) {
        int64_t n = set.records - at < chunk ? set.records - at : chunk;
        size_t got = fread(buf, rec, (size_t)n, f);
        if ((int64_t)got < n) { /* the file shrank (or failed) while it was read: never past what is there */
            status_event(im->st, STATUS_WARN, "%s: %s: %" PRId64 " bytes at the start, but the read ended at byte %"
                         PRId64 ": the file changed while it was imported; what was committed is kept, the rest "
                         "not read", g_prog, path, bytes, (at + (int64_t)got) * (int64_t)rec);
            im->files_bad++;
            im->cut_short++;
            rc = 0;
            break;
        }
        int64_t rej0 = im->rejected, stored = 0;
        for (int64_t i = 0; i < n && !im->failed; i++)
            stored += position_record(im, path, k, buf + i * rec, at + i + 1, (at + i) * (int64_t)rec);
        int64_t rej = im->rejected - rej0;
        if (is_new && at == 0 && n >= 16 && rej * 10 >= n * 9) { /* nearly every record fails: not this format */
            status_event(im->st, STATUS_WARN, "%s: %s: not %s data: %" PRId64 " of the first %" PRId64
                         " records fail (give --format); nothing imported from this file", g_prog, path,
                         fmt_kind_name(k), rej, n);
            im->files_bad++;
            im->wrong_format++;
            shard_builder_reset(b);
            break;
        }
        if (im->failed) break;
        im->set_records += n;
        im->positions += stored;
        at += n;
        if (g_check) continue;
        set.records_done = at;
        set.positions += stored;
        set.rejected += rej;
        set.finished = at == set.records && bytes % (int64_t)rec == 0;
        if (is_new) {
            if (db_set_insert(im->db, &set) != DB_OK) {
                snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
                im->failed = 1;
                break;
            }
            is_new = 0;
            im->sets++;
        }
        if (commit_set_chunk(im, b, &set) != 0) break;
        shard_builder_reset(b);
        test_hold(at);
        if (g_progress != 0 && status_due(im->st)) {
            double dt = now_s() - im->t0;
            status_line(im->st, false, "%s: record %" PRId64 " of %" PRId64 " | %" PRId64 " positions, %.0f/s", path,
                        at, set.records, im->positions, dt > 0 ? (double)im->positions / dt : 0.0);
        }
    }
    if (at == set.records && !im->failed && !compat_stop_requested() && bytes % (int64_t)rec) {
        reject_record(im, path, set.records + 1, set.records * (int64_t)rec, REC_ERR_TRUNCATED,
                      "the file ends %d bytes into a %d-byte record", (int)(bytes % (int64_t)rec), (int)rec);
        if (!g_check && !is_new) {
            set.rejected++;
            set.finished = 1;
            if (db_set_progress(im->db, &set) != DB_OK) {
                snprintf(im->err, sizeof im->err, "%s", db_errmsg(im->db));
                im->failed = 1;
            }
        }
    }
    im->b_set = NULL;
    shard_builder_free(b);
    free(buf);
    fclose(f);
    return im->failed || compat_stop_requested() ? 1 : rc;
}

/* ---- inputs ------------------------------------------------------------------------------ */
typedef struct {
    import_t *im;
    int fmt; /* rec_format_t, or IMPORT_BINARY + fmt_kind_t */
    const char *dir;
    int stop;
} walk_t;

#define IMPORT_BINARY 100 /* + fmt_kind_t: hcpe, hcpe3, psv */

static int import_file(import_t *im, const char *path, int fmt) {
    im->files++;
    fmt_kind_t k;
    if (fmt == REC_FORMAT_AUTO && fmt_kind_guess(path, &k) == 0) fmt = IMPORT_BINARY + (int)k;
    if (fmt == IMPORT_BINARY + FMT_HCPE || fmt == IMPORT_BINARY + FMT_PSV)
        return import_positions(im, path, (fmt_kind_t)(fmt - IMPORT_BINARY));
    int rc = fmt >= IMPORT_BINARY ? fmt_parse_file(path, (fmt_kind_t)(fmt - IMPORT_BINARY), &(fmt_sink_t){on_fmt_game, on_reject, im})
                                  : rec_parse_file(path, (rec_format_t)fmt, &(rec_sink_t){on_game, on_reject, im});
    if (rc < 0 && !im->failed) {
        snprintf(im->err, sizeof im->err, "%.900s: out of memory", path);
        im->failed = 1;
    }
    if (g_progress != 0 && status_due(im->st)) {
        double dt = now_s() - im->t0;
        status_line(im->st, false,
                    "files %" PRId64 " | games %" PRId64 " read, %" PRId64 " imported, %" PRId64 " rejected | %" PRId64
                    " positions, %.0f/s",
                    im->files, im->games_read, im->games, im->rejected, im->positions,
                    dt > 0 ? (double)im->positions / dt : 0.0);
    }
    return im->failed || compat_stop_requested() ? 1 : 0;
}

static int is_record_name(const char *name) {
    static const char *const EXT[] = {".csa", ".kif", ".kifu", ".usi", ".sfen", ".hcpe", ".hcpe3", ".psv"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof EXT / sizeof EXT[0]; i++) {
        size_t k = strlen(EXT[i]);
        if (n > k) {
            int same = 1;
            for (size_t j = 0; j < k; j++) {
                char c = name[n - k + j];
                if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
                if (c != EXT[i][j]) same = 0;
            }
            if (same) return 1;
        }
    }
    return 0;
}

static int on_dir_entry(const char *name, int is_dir, void *user) {
    walk_t *w = user;
    if (is_dir || name[0] == '.' || !is_record_name(name)) return 0;
    char path[2 * CFG_STRING_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", w->dir, name);
    return import_file(w->im, path, w->fmt);
}

/* ---- the program -------------------------------------------------------------------------- */
/* The option table: the command line, --help and the runs row's config. Returns its length. */
static int import_opts(cfg_opt_t *opts) {
    int n = 0;
    opts[n++] = (cfg_opt_t){"run", CFG_TYPE_STRING, g_run, 0, 0, "run directory (created with its koma.db if missing)"};
    opts[n++] = (cfg_opt_t){"progress", CFG_TYPE_DOUBLE, &g_progress, -1, 3600,
                            "seconds between status lines (-1 = 1 on a terminal, updated in place, 30 otherwise; 0 = none)"};
    opts[n++] = (cfg_opt_t){"quiet", CFG_TYPE_BOOL, &g_quiet, 1, 0, "no status lines and no rejected-record lines"};
    opts[n++] = (cfg_opt_t){"min-rating", CFG_TYPE_DOUBLE, &g_min_rating, 1, 0,
                            "keep only games whose two players are both rated >= R (floodgate CSA 'black_rate/'white_rate); "
                            "games without ratings are skipped when given; the default -1e9 = no filter"};
    opts[n++] = (cfg_opt_t){"skip-draws", CFG_TYPE_BOOL, &g_skip_draws, 0, 1, "skip drawn (and aborted) games"};
    opts[n++] = (cfg_opt_t){"cycle", CFG_TYPE_INT, &g_cycle, -1, 1e9,
                            "cycle the shards are registered with: -1 = data from before any self-play cycle (no cycle's new positions)"};
    opts[n++] = (cfg_opt_t){"shard-games", CFG_TYPE_INT, &g_shard_games, 1, 1e7, "games per shard file"};
    opts[n++] = (cfg_opt_t){"format", CFG_TYPE_STRING, g_format, 0, 0,
                            "auto (by extension: .hcpe .hcpe3 .psv .bin are binary, else records by extension or content), "
                            "csa, kif, usi, hcpe, hcpe3 or psv"};
    opts[n++] = (cfg_opt_t){"root-q", CFG_TYPE_STRING, g_root_q, 0, 0,
                            "root_q column: auto (eval where the file has one: hcpe, hcpe3, psv; else result), "
                            "result (the game's result, side to move's view), zero, or eval"};
    opts[n++] = (cfg_opt_t){"check", CFG_TYPE_BOOL, &g_check, 0, 1,
                            "read and check every record and count what would be imported; no run is opened or written"};
    opts[n++] = (cfg_opt_t){"dedup", CFG_TYPE_INT, &g_dedup, -1, 1,
                            "1: skip games (same start and moves) and positions (same position, move and ply) already "
                            "in the run or seen earlier in this import; 0: keep them, as the field does; -1 (the "
                            "default): 1 for game records, 0 for hcpe and psv position files (a killed import of "
                            "those resumes from its position set, not by dedup)"};
    opts[n++] = (cfg_opt_t){"shard-rows", CFG_TYPE_INT, &g_shard_rows, 1, 1e8,
                            "hcpe and psv: records per chunk, each one shard committed with its file's progress"};
    opts[n++] = (cfg_opt_t){"show-rejects", CFG_TYPE_INT, &g_show, 0, 1e9, "reject messages printed at most"};
    return n;
}

#define ARGS_OK (-1)

/* The flags, --format (into *fmt), --root-q (into *rq) and the inputs (files,
 * *nfiles): ARGS_OK, or the exit status (0 after --help, 2 on a bad flag). */
static int parse_args(int argc, char **argv, const cfg_opt_t *opts, int n, char **files, int *nfiles, int *fmt,
                      int *rq) {
    char err[1024];
    int rc = cfg_parse(opts, n, argc, argv, 1, files, argc, nfiles, usage, stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "%s: %s\n%s\n", g_prog, err, usage);
        return 2;
    }
    rec_format_t rfmt;
    fmt_kind_t kind;
    if (rec_format_parse(g_format, &rfmt) == 0) {
        *fmt = (int)rfmt;
    } else if (fmt_kind_parse(g_format, &kind) == 0) {
        *fmt = IMPORT_BINARY + (int)kind;
    } else {
        fprintf(stderr, "%s: --format %s: expected auto, csa, kif, usi, hcpe, hcpe3 or psv\n", g_prog, g_format);
        return 2;
    }
    static const char *const RQ[] = {"auto", "result", "zero", "eval"};
    *rq = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(g_root_q, RQ[i]) == 0) *rq = i;
    if (*rq < 0) {
        fprintf(stderr, "%s: --root-q %s: expected auto, result, zero or eval\n", g_prog, g_root_q);
        return 2;
    }
    if (*nfiles == 0) {
        fprintf(stderr, "%s: no record files given\n%s\n", g_prog, usage);
        return 2;
    }
    return ARGS_OK;
}

/* Opens the run (*rn) as its one writer, records this import in its runs
 * table, makes the shard builder and, with --dedup, loads the games already
 * stored. 0, or -1 with the message printed (*rn, when set, is the caller's
 * to close). */
static int import_open(import_t *im, run_t **rn, const cfg_opt_t *opts, int n) {
    char err[1024], path[CFG_STRING_MAX + 16];
    *rn = run_open(g_run, RUN_WRITE | RUN_CREATE, g_prog, err, sizeof err); /* the run's one writer */
    if (!*rn) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return -1;
    }
    for (int32_t i = 0; i < run_findings(*rn); i++) fprintf(stderr, "%s: start-up check: %s\n", g_prog, run_finding(*rn, i));
    im->db = run_db(*rn);
    run_path(g_run, RUN_DB, path, sizeof path);
    char *config = cfg_dump_string(opts, n);
    db_status_t rst = db_run_insert(im->db, KOMA_VERSION_STRING, "import", config ? config : "", NULL);
    free(config);
    if (rst != DB_OK) {
        fprintf(stderr, "%s: %s: runs row not written: %s\n", g_prog, path, db_errmsg(im->db));
        return -1;
    }
    db_summary_t sum;
    if (db_summary(im->db, &sum) != DB_OK) {
        fprintf(stderr, "%s: %s\n", g_prog, db_errmsg(im->db));
        return -1;
    }
    im->seq = sum.shards + 1;
    im->b = shard_builder_new_compact(0, err, sizeof err);
    if (!im->b || !im->pos) {
        fprintf(stderr, "%s: %s\n", g_prog, im->b ? "out of memory" : err);
        return -1;
    }
    if ((g_dedup != 0 && load_seen(im) != 0) || (g_dedup == 1 && load_seen_positions(im) != 0)) {
        fprintf(stderr, "%s: %s\n", g_prog, im->err);
        return -1;
    }
    return 0;
}

/* Reads every input (a directory: its record files) until the end, a
 * failure or Ctrl-C, then commits the last, partial shard. Returns the
 * seconds it took. */
static double import_inputs(import_t *im, char **files, int nfiles, int fmt) {
    char err[1024];
    compat_install_stop_handler();

    double t0 = now_s();
    im->t0 = t0;
    im->st = status_new(stderr, g_progress > 0 ? g_progress : 0, g_quiet != 0);
    for (int i = 0; i < nfiles && !im->failed && !compat_stop_requested(); i++) {
        if (compat_is_dir(files[i])) {
            walk_t w = {im, fmt, files[i], 0};
            if (compat_list_dir(files[i], on_dir_entry, &w, err, sizeof err) < 0) {
                fprintf(stderr, "%s: %s\n", g_prog, err);
                im->files_bad++;
            }
        } else {
            import_file(im, files[i], fmt);
        }
    }
    if (!im->failed && !g_check) commit_shard(im); /* the last, partial shard; also on Ctrl-C */
    double dt = now_s() - t0;
    status_free(im->st); /* before the summary */
    im->st = NULL;
    return dt;
}

/* The counts on stdout. */
static void print_summary(const import_t *im, double dt) {
    printf("%s: %s: %" PRId64 " file(s), %" PRId64 " game(s) read, %" PRId64 " imported (%" PRId64
           " positions) in %" PRId64 " shard(s), %" PRId64 " rejected\n",
           g_prog, g_check ? "--check, nothing stored" : g_run, im->files, im->games_read, im->games, im->positions,
           im->shards, im->rejected);
    printf("  skipped: %" PRId64 " draw(s), %" PRId64 " below --min-rating or unrated, %" PRId64
           " duplicate(s), %" PRId64 " without moves\n",
           im->skip_draw, im->skip_rating, im->skip_dup, im->skip_empty);
    if (im->sets || im->sets_done || im->set_records)
        printf("  position files: %" PRId64 " record(s) read into %" PRId64 " position set(s)%s; %" PRId64
               " file(s) already imported (not read again), %" PRId64 " record(s) committed earlier (not read "
               "again)\n",
               im->set_records, im->sets, g_check ? " (--check: none stored)" : "", im->sets_done, im->set_resumed);
    if (im->rejected) {
        printf("  rejected:");
        const char *sep = " ";
        for (int e = 1; e < REC_ERR_NB; e++)
            if (im->rej_by[e]) {
                printf("%s%" PRId64 " %s", sep, im->rej_by[e], rec_error_name((rec_error_t)e));
                sep = ", ";
            }
        printf("\n");
    }
    printf("  %.2f s, %.0f positions/s\n", dt, dt > 0 ? (double)im->positions / dt : 0.0);
    fflush(stdout);
}

/* The exit status once the inputs are read: 1 on a failure, 130 after
 * Ctrl-C, 1 when nothing usable came from nfiles arguments, else 0. */
static int import_status(const import_t *im, int nfiles) {
    if (im->failed) {
        fprintf(stderr, "%s: %s\n", g_prog, im->err);
        return 1;
    }
    if (compat_stop_requested()) {
        fprintf(stderr, "%s: stopped; the games above are stored: run the same command again to import the rest\n", g_prog);
        return EXIT_STOPPED;
    }
    /* One rule for every format: nothing usable is an error. Usable: a game
     * imported, one already in the run (a duplicate), or one the user chose
     * to skip (--skip-draws, --min-rating); rejected records, unreadable
     * files and games without moves are not. */
    if (im->cut_short) {
        fprintf(stderr, "%s: %" PRId64 " file(s) end inside a record or could not be read to their end (the bytes "
                "not read are named above); everything before that is stored\n", g_prog, im->cut_short);
        return 1;
    }
    if (im->wrong_format && im->games + im->sets == 0) {
        fprintf(stderr, "%s: nothing imported: %" PRId64 " file(s) are not of the format their name or --format says\n",
                g_prog, im->wrong_format);
        return 1;
    }
    if (im->games + im->skip_dup + im->skip_draw + im->skip_rating + im->positions + im->sets_done == 0) {
        fprintf(stderr,
                "%s: nothing usable: no game imported from %d argument(s) (%" PRId64 " record(s) rejected, %" PRId64
                " without moves, %" PRId64 " file(s) unreadable)\n",
                g_prog, nfiles, im->rejected, im->skip_empty, im->files_bad);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "import");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    snprintf(usage, sizeof usage, "usage: %s " USAGE_ARGS, g_prog);
    cfg_opt_t opts[MAX_OPTS];
    int n = import_opts(opts);
    char **files = calloc((size_t)(argc > 0 ? argc : 1), sizeof *files);
    if (!files) return 1;
    int nfiles = 0, fmt = 0, rq = -1;
    int rc = parse_args(argc, argv, opts, n, files, &nfiles, &fmt, &rq);
    if (rc != ARGS_OK) {
        free(files);
        return rc;
    }
    import_t im;
    memset(&im, 0, sizeof im);
    im.root_q = rq;
    im.pos = malloc(sizeof *im.pos); /* --check reads positions too */
    int status = 1;
    run_t *rn = NULL;
    int fresh = !g_check && !compat_file_exists(g_run); /* a run this import creates */
    if (g_check || import_open(&im, &rn, opts, n) == 0) { /* --check: read and check only, no run */
        double dt = import_inputs(&im, files, nfiles, fmt);
        print_summary(&im, dt);
        status = import_status(&im, nfiles);
    }
    status_free(im.st);
    shard_builder_free(im.b);
    free(im.pos);
    free(im.seen.keys);
    run_close(rn); /* closes im.db */
    /* Nothing stored in a run this import made (a mistyped --run, inputs that are all unusable): the
     * directory goes again, so no empty koma.db, lock, models/ and shards/ are left behind. */
    if (fresh && status != 0 && im.shards == 0 && im.sets == 0 && compat_file_exists(g_run)) {
        char err[512];
        if (compat_remove_tree(g_run, err, sizeof err) == 0)
            fprintf(stderr, "%s: %s: nothing was imported, so the run directory this import created is removed\n",
                    g_prog, g_run);
    }
    free(files);
    return status;
}
