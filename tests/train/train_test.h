/* train_test.h - helpers shared by the train/ tests: CHECK_OK, runs
 * (directory, koma.db + writer), shards of REAL positions (random playouts
 * from the start position, encoded with engine/encode.h, legal masks, a
 * one-hot policy target on a legal move, results +-1), weight comparisons,
 * and a log sink that remembers lines. Checks, the scratch directory and the
 * RNG (t_rng, t_next) come from tests/koma_test.h. Header-only; every
 * function is static. */
#ifndef KOMA_TESTS_TRAIN_TEST_H
#define KOMA_TESTS_TRAIN_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/db.h"
#include "data/shard.h"
#include "data/writer.h"
#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "nn/weights.h"
#include "tests/koma_test.h"
#include "train/trainer.h"

/* call returned 0; else its status and err are printed */
#define CHECK_OK(call, err)                                                                  \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (!t_judge(rc_ == 0))                                                              \
            fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, rc_, (err)); \
    } while (0)

/* ---- a run: directory, koma.db, writer -------------------------------------------------- */
typedef struct {
    char dir[900];
    db_t *db;
    db_writer_t *w;
    int64_t seq; /* shards written */
} t_run_t;

static inline void t_run_open(t_run_t *r, const char *dir) {
    char err[1024], path[1000];
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    KOMA_ASSERT(compat_mkdir_p(dir, err, sizeof err) == 0);
    snprintf(path, sizeof path, "%s/koma.db", dir);
    if (db_open(path, 0, &r->db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "%s\n", err);
        KOMA_ASSERT(0);
    }
    r->w = db_writer_start(r->db, 256, err, sizeof err);
    KOMA_ASSERT(r->w);
}

static inline void t_run_close(t_run_t *r) {
    if (!r->w) return;
    db_writer_stop(r->w, 10000);
    db_writer_free(r->w);
    db_close(r->db);
    r->w = NULL;
    r->db = NULL;
}

static const shard_format_t T_FMT = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};

/* Set: t_game's root_q are random values in [-1, 1] instead of the result. */
static int t_random_q;
/* Set: t_game's rows at odd plies have no policy target (a fast search's). */
static int t_fast_rows;
/* t_game appends each row's move label (encode_move_label of the move played in the row's position: what
 * older self-play builds stored as a shard's move_label column) while there is room. */
enum { T_LABELS_MAX = 4096 };
static uint16_t t_labels[T_LABELS_MAX];
static int32_t t_labels_n;

/* Adds one game of random legal moves (at most plies moves) to b; every
 * position from ply from_ply on is a row: real planes, hand, legal mask, the
 * move played as a one-hot policy target (none at odd plies: t_fast_rows),
 * root_q = the result from the side to move (t_random_q: a random value). */
static inline void t_game(shard_builder_t *b, pos_t *pos, int32_t plies, int32_t from_ply, int32_t result_black) {
    char err[512];
    pos_set_startpos(pos);
    static char moves[16384];
    size_t mlen = 0;
    moves[0] = '\0';
    int32_t ply = 0;
    for (; ply < plies; ply++) {
        move_list_t list;
        movegen_legal(pos, &list);
        if (list.n == 0) break;
        move_t mv = list.moves[t_next() % (uint64_t)list.n];
        if (ply < from_ply) {
            pos_do_move(pos, mv);
            char usi0[16];
            int32_t n0 = move_to_usi(mv, usi0);
            if (mlen) moves[mlen++] = ' ';
            memcpy(moves + mlen, usi0, (size_t)n0 + 1);
            mlen += (size_t)n0;
            continue;
        }
        uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES], posb[SHARD_POSITION_BYTES];
        float hand[ENC_HAND];
        encode_position(pos, planes, hand);
        encode_legal_mask(pos, legal);
        uint16_t label = (uint16_t)encode_move_label(pos, mv);
        float prob = 1.0f;
        shard_position_t sp;
        memset(&sp, 0, sizeof sp);
        memcpy(sp.board, pos->board, 81);
        sp.side = (uint8_t)pos->side;
        sp.ply = (uint16_t)pos->game_ply;
        sp.hand[0] = pos->hand[0];
        sp.hand[1] = pos->hand[1];
        shard_position_pack(&sp, posb);
        int32_t stm = pos->side == 0 ? result_black : -result_black;
        shard_row_t row = {.planes = planes,
                           .hand = hand,
                           .legal = legal,
                           .policy_label = &label,
                           .policy_prob = &prob,
                           .policy_n = t_fast_rows && (ply & 1) ? 0 : 1,
                           .root_q = t_random_q ? (float)(t_next() % 2001) / 1000.0f - 1.0f : (float)stm,
                           .ply = (uint16_t)ply,
                           .move = (uint16_t)mv,
                           .position = posb};
        if (shard_builder_add_row(b, &row, err, sizeof err) != 0) {
            fprintf(stderr, "add_row: %s\n", err);
            KOMA_ASSERT(0);
        }
        if (t_labels_n < T_LABELS_MAX) t_labels[t_labels_n++] = label;
        char usi[16];
        int32_t n = move_to_usi(mv, usi);
        if (mlen + (size_t)n + 2 < sizeof moves) {
            if (mlen) moves[mlen++] = ' ';
            memcpy(moves + mlen, usi, (size_t)n + 1);
            mlen += (size_t)n;
        }
        pos_do_move(pos, mv);
    }
    db_game_t g;
    memset(&g, 0, sizeof g);
    g.start_sfen = "startpos";
    g.moves = moves;
    g.plies = ply;
    g.result = result_black;
    g.reason = DB_REASON_RESIGN;
    if (shard_builder_end_game(b, &g, err, sizeof err) != 0) {
        fprintf(stderr, "end_game: %s\n", err);
        KOMA_ASSERT(0);
    }
}

typedef struct {
    compat_mutex_t mu;
    int done, status;
    char err[1024];
} t_shard_done_t;

static inline void t_on_shard(void *user, int status, const char *err, const db_shard_t *shard) {
    (void)shard;
    t_shard_done_t *d = user;
    compat_mutex_lock(&d->mu);
    d->done = 1;
    d->status = status;
    snprintf(d->err, sizeof d->err, "%s", err ? err : "");
    compat_mutex_unlock(&d->mu);
}

/* Writes and registers b (its games) as the run's next shard of `cycle`,
 * through the writer, waited for; b is the writer's afterwards. The
 * run-relative path goes to rel (len bytes). */
static inline void t_commit_shard(t_run_t *r, int32_t cycle, shard_builder_t *b, char *rel, size_t len) {
    shard_path_format(rel, len, cycle, ++r->seq);
    t_shard_done_t d;
    memset(&d, 0, sizeof d);
    compat_mutex_init(&d.mu);
    int st = shard_submit(r->w, r->dir, rel, cycle, b, t_on_shard, &d, -1);
    KOMA_ASSERT(st == DB_OK);
    KOMA_ASSERT(db_writer_flush(r->w, -1) == DB_OK);
    compat_mutex_lock(&d.mu);
    if (!d.done || d.status != DB_OK) fprintf(stderr, "shard %s: %d %s\n", rel, d.status, d.err);
    KOMA_ASSERT(d.done && d.status == DB_OK);
    compat_mutex_unlock(&d.mu);
    compat_mutex_destroy(&d.mu);
}

/* Writes and registers (through the writer, waited for) a shard of `games`
 * games of at most `plies` positions each for `cycle`. Returns its
 * run-relative path in rel (static storage of 16 slots). */
static inline const char *t_add_shard_from(t_run_t *r, int32_t cycle, int32_t games, int32_t plies, int32_t from_ply) {
    static char rels[16][128];
    static int at;
    char *rel = rels[at++ % 16];
    char err[1024];
    shard_builder_t *b = shard_builder_new(&T_FMT, err, sizeof err);
    KOMA_ASSERT(b);
    pos_t *pos = malloc(sizeof *pos);
    KOMA_ASSERT(pos);
    for (int32_t g = 0; g < games; g++) t_game(b, pos, plies, from_ply, (t_next() & 1) ? 1 : -1);
    free(pos);
    t_commit_shard(r, cycle, b, rel, 128);
    return rel;
}

static inline const char *t_add_shard(t_run_t *r, int32_t cycle, int32_t games, int32_t plies) {
    return t_add_shard_from(r, cycle, games, plies, 0);
}

/* The run's shards as a reader of koma.db sees them (db_shards_recent, a
 * connection of its own); *list: free() it. Returns how many. */
static inline int32_t t_run_shards(const t_run_t *r, db_shard_t **list) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", r->dir);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    int32_t n = 0;
    *list = NULL;
    KOMA_ASSERT(db_shards_recent(db, 0, list, &n) == DB_OK);
    db_close(db);
    return n;
}

/* Flips one byte near the end of a file (inside the last tensor's data). */
static inline void t_corrupt(const char *path) {
    FILE *f = fopen(path, "r+b");
    KOMA_ASSERT(f);
    KOMA_ASSERT(fseek(f, -20, SEEK_END) == 0);
    int c = fgetc(f);
    KOMA_ASSERT(c != EOF);
    KOMA_ASSERT(fseek(f, -20, SEEK_END) == 0);
    fputc(c ^ 0x5A, f);
    KOMA_ASSERT(fclose(f) == 0);
}

/* ---- log sink ------------------------------------------------------------------------- */
typedef struct {
    compat_mutex_t mu;
    char text[65536];
    size_t len;
    int echo;
} t_log_t;

static inline void t_log_fn(void *user, const char *line) {
    t_log_t *l = user;
    compat_mutex_lock(&l->mu);
    size_t n = strlen(line);
    if (l->len + n + 2 < sizeof l->text) {
        memcpy(l->text + l->len, line, n);
        l->len += n;
        l->text[l->len++] = '\n';
        l->text[l->len] = '\0';
    }
    compat_mutex_unlock(&l->mu);
    if (l->echo) fprintf(stderr, "  [log] %s\n", line);
}

/* ---- configs and weights ------------------------------------------------------------- */
/* A tiny, fast config: 1x16 net, batch 16, constant lr, fixed steps per cycle. */
static inline train_config_t t_tiny_config(int64_t steps) {
    train_config_t c = train_config_default();
    snprintf(c.net, sizeof c.net, "1x16");
    c.threads = 1;
    c.batch = 16;
    c.window_min = 1000;
    c.window_max = 100000;
    c.min_steps_per_cycle = steps;
    c.max_steps_per_cycle = steps;
    c.opt.schedule = NN_SCHED_CONSTANT;
    c.opt.warmup_steps = 2;
    c.opt.lr = 0.02f;
    c.seed = 7;
    return c;
}

/* Max |a - b| over params, stats and momentum of two weight files (INFINITY
 * when they do not load or differ in shape); *steps_a/_b get opt.step. */
static inline double t_weights_diff(const char *a, const char *b, int64_t *steps_a, int64_t *steps_b) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *na = nn_weights_load(be, a, -1, err, sizeof err);
    if (!na) fprintf(stderr, "%s\n", err);
    nn_net_t *nb = nn_weights_load(be, b, -1, err, sizeof err);
    if (!nb) fprintf(stderr, "%s\n", err);
    double d = INFINITY;
    if (na && nb) {
        nn_optim_t *ta = nn_optim_new(na, NULL, 1, err, sizeof err);
        nn_optim_t *tb = nn_optim_new(nb, NULL, 1, err, sizeof err);
        KOMA_ASSERT(ta && tb);
        int ok = nn_weights_read(na, ta, a, err, sizeof err) == 0 && nn_weights_read(nb, tb, b, err, sizeof err) == 0;
        if (!ok) fprintf(stderr, "%s\n", err);
        int64_t npa, npb, nsa, nsb;
        float *pa = nn_net_params(na, &npa, NULL), *pb = nn_net_params(nb, &npb, NULL);
        float *sa = nn_net_stats(na, &nsa), *sb = nn_net_stats(nb, &nsb);
        if (ok && npa == npb && nsa == nsb) {
            d = 0;
            float *ma = nn_optim_momentum(ta), *mb = nn_optim_momentum(tb);
            for (int64_t i = 0; i < npa; i++) {
                d = fmax(d, fabs((double)pa[i] - pb[i]));
                d = fmax(d, fabs((double)ma[i] - mb[i]));
            }
            for (int64_t i = 0; i < nsa; i++) d = fmax(d, fabs((double)sa[i] - sb[i]));
            if (steps_a) *steps_a = nn_optim_step_count(ta);
            if (steps_b) *steps_b = nn_optim_step_count(tb);
        }
        nn_optim_free(ta);
        nn_optim_free(tb);
    }
    nn_net_free(na);
    nn_net_free(nb);
    nn_backend_free(be);
    return d;
}

/* ---- running the real `train` ------------------------------------------------ */
/* Splits args at spaces ("double quotes" group) into argv[argc..], in buf
 * (kept by the caller); returns the new argc, argv NULL-terminated. */
static inline int t_split_args(char *buf, const char **argv, int argc, int cap) {
    for (char *s = buf; *s;) {
        while (*s == ' ') s++;
        if (!*s) break;
        KOMA_ASSERT(argc < cap - 1);
        if (*s == '"') {
            argv[argc++] = ++s;
            while (*s && *s != '"') s++;
        } else {
            argv[argc++] = s;
            while (*s && *s != ' ') s++;
        }
        if (*s) *s++ = '\0';
    }
    argv[argc] = NULL;
    return argc;
}

/* Fails the check and prints the program's stdout (file out) and stderr
 * (file errf) when cond is false. */
#define T_CHECK_RUN(cond, out, errf)                                                                         \
    do {                                                                                                     \
        if (!t_judge(!!(cond))) {                                                                            \
            char *o_ = t_read_file(out, NULL), *e_ = t_read_file(errf, NULL);                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n--- stdout:\n%s--- stderr:\n%s\n", __FILE__, __LINE__, \
                    #cond, o_, e_);                                                                          \
            free(o_);                                                                                        \
            free(e_);                                                                                        \
        }                                                                                                    \
    } while (0)

#endif
