/* test_shard.c - data/shard.c: builder -> file -> reader round trips (every
 * column, exactly), rows without policy targets, gathers into training
 * batches (and one nn_eval_batch on them), rejection of bad shards (every
 * truncation point, a flipped byte in each column, wrong format, a missing
 * column, a wrong row count, bad offsets/labels/values), registration in
 * koma.db (row ranges, game ids, all-or-nothing) and the writer-thread job. */
#include "compat/compat.h"
#include "data/db.h"
#include "data/shard.h"
#include "data/shard_pos.h"
#include "data/writer.h"
#include "engine/encode.h"
#include "nn/net.h"
#include "nn/safetensors.h"
#include "tests/data/db_test.h" /* game(): a games-row fixture */
#include "tests/koma_test.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A call returning 0 / DB_OK that must succeed; prints err if not. */
#define CHECK_RC(call, err)                                                       \
    do {                                                                          \
        t_count_();                                                               \
        int rc_ = (call);                                                         \
        if (rc_ != 0) t_fail(__FILE__, __LINE__, #call, " -> %d: %s", rc_, (err)); \
    } while (0)
/* err must start with the file's path and contain what. */
#define CHECK_MSG(err, path, what)                                                                       \
    do {                                                                                                 \
        t_count_();                                                                                      \
        if (strncmp((err), (path), strlen(path)) != 0 || !strstr((err), (what)))                         \
            t_fail(__FILE__, __LINE__, "", "message \"%s\" does not name %s and \"%s\"", (err), (path), \
                   (what));                                                                              \
    } while (0)

_Static_assert(SHARD_LABEL_NB == ENC_LABEL_NB, "labels: shard vs engine");
_Static_assert(SHARD_LABEL_NB == NN_POLICY_NB, "labels: shard vs nn");

static const shard_format_t FMT = {7, 11, 3, 5};
static const shard_format_t FMT_ENC = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};

/* ---- temporary files (t_path under t_scratch) ------------------------------------ */
static uint8_t *read_all(const char *path, size_t *len) {
    char err[512];
    uint8_t *d = (uint8_t *)compat_read_file(path, len, err, sizeof err);
    if (!d) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(d);
    return d;
}

static void write_plain(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    KOMA_ASSERT(f);
    KOMA_ASSERT(len == 0 || fwrite(data, 1, len, f) == len);
    KOMA_ASSERT(fclose(f) == 0);
}

/* ---- random rows and the reference copy ------------------------------------------------ */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rndn(uint32_t n) { return (uint32_t)(t_splitmix64(&g_rng) % n); }
static float rndf(void) { return (float)(t_splitmix64(&g_rng) >> 40) / (float)(1 << 24); } /* [0, 1) */

typedef struct {
    uint8_t *planes, *legal;
    float *hand;
    uint16_t *label;
    float *prob;
    int32_t n; /* policy entries */
    float q;
    uint16_t ply, move;
    uint8_t pos[SHARD_POSITION_BYTES];
    int8_t result; /* side to move's */
    int32_t game;  /* index in its shard */
} ref_row_t;

typedef struct {
    shard_format_t fmt;
    ref_row_t *rows;
    int64_t n, cap, nnz;
    int32_t games;
} ref_t;

static void ref_free(ref_t *r) {
    for (int64_t i = 0; i < r->n; i++) {
        free(r->rows[i].planes);
        free(r->rows[i].legal);
        free(r->rows[i].hand);
        free(r->rows[i].label);
        free(r->rows[i].prob);
    }
    free(r->rows);
    memset(r, 0, sizeof *r);
}

static void random_position(uint8_t out[SHARD_POSITION_BYTES]) {
    shard_position_t p;
    for (int sq = 0; sq < 81; sq++) {
        uint32_t k = rndn(3);
        p.board[sq] = k == 0 ? 0 : (uint8_t)((1 + rndn(14)) | (k == 2 ? 16 : 0));
    }
    p.side = (uint8_t)rndn(2);
    p.ply = (uint16_t)(1 + rndn(500));
    p.hand[0] = (uint32_t)t_splitmix64(&g_rng);
    p.hand[1] = (uint32_t)t_splitmix64(&g_rng);
    shard_position_pack(&p, out);
}

/* policy: 0 = none, 1 = a few entries, 2 = all 2187 labels. */
static void random_row(const shard_format_t *f, ref_row_t *r, int policy, uint16_t ply) {
    memset(r, 0, sizeof *r);
    r->planes = malloc((size_t)f->planes_bytes);
    r->legal = malloc((size_t)f->legal_bytes + 1);
    r->hand = malloc(sizeof(float) * ((size_t)f->hand_n + 1));
    for (int i = 0; i < f->planes_bytes; i++) r->planes[i] = (uint8_t)t_splitmix64(&g_rng);
    for (int i = 0; i < f->legal_bytes; i++) r->legal[i] = (uint8_t)t_splitmix64(&g_rng);
    for (int i = 0; i < f->hand_n; i++) r->hand[i] = rndf();
    r->n = policy == 0 ? 0 : policy == 1 ? 1 + (int32_t)rndn(30) : SHARD_LABEL_NB;
    r->label = malloc(sizeof(uint16_t) * (size_t)(r->n + 1));
    r->prob = malloc(sizeof(float) * (size_t)(r->n + 1));
    for (int32_t i = 0; i < r->n; i++) {
        r->label[i] = policy == 2 ? (uint16_t)((i * 7 + 3) % SHARD_LABEL_NB) : (uint16_t)rndn(SHARD_LABEL_NB);
        r->prob[i] = rndf();
    }
    uint32_t k = rndn(8);
    r->q = k == 0 ? -1.0f : k == 1 ? 1.0f : 2 * rndf() - 1;
    r->ply = ply;
    r->move = (uint16_t)t_splitmix64(&g_rng);
    random_position(r->pos);
}

static shard_row_t as_row(const ref_row_t *r) {
    shard_row_t row = {0};
    row.planes = r->planes;
    row.hand = r->hand;
    row.legal = r->legal;
    row.policy_label = r->label;
    row.policy_prob = r->prob;
    row.policy_n = r->n;
    row.root_q = r->q;
    row.ply = r->ply;
    row.move = r->move;
    row.position = r->pos;
    return row;
}

/* The next row of ref, to be filled by random_row; counted in ref->n. */
static ref_row_t *ref_next(ref_t *ref) {
    if (ref->n == ref->cap) {
        ref->cap = ref->cap ? 2 * ref->cap : 64;
        ref->rows = realloc(ref->rows, (size_t)ref->cap * sizeof *ref->rows);
        KOMA_ASSERT(ref->rows);
    }
    return &ref->rows[ref->n++];
}

/* Adds a game of nrows rows (policy per row from pattern: 'n' none, 'f' few,
 * 'a' all labels; cycled) to b and to ref. result from Black. */
static void add_game(shard_builder_t *b, ref_t *ref, int64_t nrows, const char *pattern, int32_t result,
                     const char *moves) {
    char err[512] = "";
    for (int64_t i = 0; i < nrows; i++) {
        char c = pattern[i % (int64_t)strlen(pattern)];
        ref_row_t *r = ref_next(ref);
        random_row(&ref->fmt, r, c == 'n' ? 0 : c == 'f' ? 1 : 2, (uint16_t)i);
        r->game = ref->games;
        int side = r->pos[SHARD_POS_SIDE];
        r->result = (int8_t)(side == 0 ? result : -result);
        shard_row_t row = as_row(r);
        CHECK_RC(shard_builder_add_row(b, &row, err, sizeof err), err);
        ref->nnz += r->n;
    }
    db_game_t g = game(0, 0, result, result == 0 ? DB_REASON_MAX_PLY : DB_REASON_CHECKMATE, moves, (int32_t)nrows);
    CHECK_RC(shard_builder_end_game(b, &g, err, sizeof err), err);
    ref->games++;
}

/* Every column of s equals ref exactly; game ids are first_id + game index. */
static int same_as_ref(const shard_t *s, const ref_t *ref, int64_t first_id) {
    const shard_format_t *f = &ref->fmt;
    if (shard_rows(s) != ref->n || shard_nnz(s) != ref->nnz || shard_games(s) != ref->games) {
        fprintf(stderr, "counts: rows %lld/%lld nnz %lld/%lld games %lld/%d\n", (long long)shard_rows(s),
                (long long)ref->n, (long long)shard_nnz(s), (long long)ref->nnz, (long long)shard_games(s), ref->games);
        return 0;
    }
    const shard_format_t *sf = shard_format(s);
    if (memcmp(sf, f, sizeof *f) != 0) return 0;
    const shard_columns_t *c = shard_columns(s);
    for (int64_t i = 0; i < ref->n; i++) {
        const ref_row_t *r = &ref->rows[i];
        int64_t b, e;
        shard_row_policy(s, i, &b, &e);
        int ok = memcmp(c->planes + i * f->planes_bytes, r->planes, (size_t)f->planes_bytes) == 0 &&
                 memcmp(c->hand + i * f->hand_n, r->hand, sizeof(float) * (size_t)f->hand_n) == 0 &&
                 memcmp(c->legal + i * f->legal_bytes, r->legal, (size_t)f->legal_bytes) == 0 && e - b == r->n &&
                 memcmp(c->policy_label + b, r->label, sizeof(uint16_t) * (size_t)r->n) == 0 &&
                 memcmp(c->policy_prob + b, r->prob, sizeof(float) * (size_t)r->n) == 0 &&
                 c->result[i] == r->result && memcmp(&c->root_q[i], &r->q, sizeof(float)) == 0 && c->ply[i] == r->ply &&
                 c->move[i] == r->move && c->game_id[i] == first_id + r->game &&
                 memcmp(c->position + i * SHARD_POSITION_BYTES, r->pos, SHARD_POSITION_BYTES) == 0;
        if (!ok) {
            fprintf(stderr, "row %lld differs from the reference\n", (long long)i);
            return 0;
        }
    }
    return 1;
}

/* Batch rows [at, at+n) are ref rows idx[0..n). */
static int batch_matches(const shard_batch_t *bt, int32_t at, const ref_t *ref, const int64_t *idx, int32_t n) {
    const shard_format_t *f = &ref->fmt;
    for (int32_t j = 0; j < n; j++) {
        const ref_row_t *r = &ref->rows[idx[j]];
        int32_t k = at + j;
        uint32_t b = bt->policy_offsets[k], e = bt->policy_offsets[k + 1];
        int ok = memcmp(bt->planes + (int64_t)k * f->planes_bytes, r->planes, (size_t)f->planes_bytes) == 0 &&
                 memcmp(bt->hand + (int64_t)k * f->hand_n, r->hand, sizeof(float) * (size_t)f->hand_n) == 0 &&
                 memcmp(bt->legal + (int64_t)k * f->legal_bytes, r->legal, (size_t)f->legal_bytes) == 0 &&
                 e >= b && (int32_t)(e - b) == r->n &&
                 memcmp(bt->policy_label + b, r->label, sizeof(uint16_t) * (size_t)r->n) == 0 &&
                 memcmp(bt->policy_prob + b, r->prob, sizeof(float) * (size_t)r->n) == 0 &&
                 bt->result[k] == r->result && memcmp(&bt->root_q[k], &r->q, sizeof(float)) == 0;
        if (!ok) {
            fprintf(stderr, "batch row %d (shard row %lld) differs\n", k, (long long)idx[j]);
            return 0;
        }
    }
    return 1;
}

/* ---- round trips ---------------------------------------------------------------------- */
/* The position column's packing: fields at their bytes, and the check of a
 * packed position's squares and padding. */
static void rt_position_packing(void) {
    shard_position_t p = {0}, q;
    for (int i = 0; i < 81; i++) p.board[i] = (uint8_t)(i % 3 ? 0 : 1 + i % 14);
    p.board[40] = 16 + 8;
    p.side = 1;
    p.ply = 0xBEEF;
    p.hand[0] = 0x12345678u;
    p.hand[1] = 0x9ABCDEF0u;
    uint8_t pk[SHARD_POSITION_BYTES];
    shard_position_pack(&p, pk);
    shard_position_unpack(pk, &q);
    CHECK(memcmp(p.board, q.board, 81) == 0 && q.side == 1 && q.ply == 0xBEEF && q.hand[0] == p.hand[0] &&
          q.hand[1] == p.hand[1]);
    CHECK(pk[82] == 0xEF && pk[83] == 0xBE && pk[84] == 0x78 && pk[87] == 0x12 && pk[88] == 0xF0 && pk[91] == 0x9A);
    /* a row of the column as an engine position (data/shard_pos.h): those fields and nothing else */
    uint8_t rows[2 * SHARD_POSITION_BYTES] = {0};
    memcpy(rows + SHARD_POSITION_BYTES, pk, SHARD_POSITION_BYTES);
    pos_t *pos = malloc(sizeof *pos);
    KOMA_ASSERT(pos);
    memset(pos, 0xA5, sizeof *pos);
    shard_row_pos(&(shard_columns_t){.position = rows}, 1, pos);
    CHECK(memcmp(pos->board, p.board, 81) == 0 && pos->side == 1 && pos->game_ply == 0xBEEF &&
          pos->hand[COLOR_BLACK] == p.hand[0] && pos->hand[COLOR_WHITE] == p.hand[1] && pos->hist_n == (int32_t)0xA5A5A5A5);
    free(pos);
    CHECK(shard_position_check(pk) == NULL);
    pk[93] = 1;
    CHECK(shard_position_check(pk) != NULL);
    pk[93] = 0;
    pk[5] = 15;
    CHECK(shard_position_check(pk) != NULL);
    pk[5] = 16;
    CHECK(shard_position_check(pk) != NULL);
    pk[5] = 32 + 1;
    CHECK(shard_position_check(pk) != NULL);
    pk[5] = 16 + 14;
    CHECK(shard_position_check(pk) == NULL);
}

/* A written shard's metadata, as another safetensors reader sees it. */
static void rt_metadata(const char *path, const shard_format_t *f, const ref_t *ref) {
    char err[1024] = "";
    st_file_t *sf = st_open(path, ST_OPEN_VERIFY, err, sizeof err);
    CHECK(sf && strcmp(st_meta(sf, "koma.kind"), "shard") == 0 && strcmp(st_meta(sf, "koma.version"), "1") == 0);
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)ref->n);
    CHECK(sf && strcmp(st_meta(sf, "koma.rows"), want) == 0 && strcmp(st_meta(sf, "koma.games"), "4") == 0);
    snprintf(want, sizeof want, "%d", f->planes_bytes);
    CHECK(sf && strcmp(st_meta(sf, "koma.planes_bytes"), want) == 0 && st_meta(sf, "koma.xxh3.planes") != NULL);
    for (int32_t i = 0; sf && i < st_count(sf); i++) { /* dimension 0 is rows (or nnz) everywhere */
        const st_tensor_t *t = st_at(sf, i);
        int nnz_col = strncmp(t->name, "policy_l", 8) == 0 || strncmp(t->name, "policy_p", 8) == 0;
        CHECK(t->shape[0] == (nnz_col ? ref->nnz : ref->n));
    }
    st_close(sf);
}

/* Gathers that fail append nothing: rows out of range, a full batch, too
 * many policy entries, a batch of another format. */
static void rt_gather_refusals(shard_t *s, shard_batch_t *bt, int pass, const int64_t *idx, const char *path,
                               const ref_t *ref) {
    char err[1024] = "";
    const shard_format_t *f = pass == 0 ? &FMT : &FMT_ENC;
    int64_t bad[2] = {0, ref->n};
    CHECK(shard_row_batch(s, bad, 2, bt, err, sizeof err) != 0);
    CHECK_MSG(err, path, "out of range");
    bad[1] = -1;
    CHECK(shard_row_batch(s, bad, 2, bt, err, sizeof err) != 0 && bt->B == 40);
    CHECK(shard_row_batch(s, idx, 25, bt, err, sizeof err) != 0 && bt->B == 40);
    CHECK_MSG(err, path, "batch full");
    shard_batch_t *tiny = shard_batch_new(f, 4, 100, err, sizeof err); /* entries are the limit */
    int64_t all2[2] = {3, 0};
    CHECK(tiny && shard_row_batch(s, all2, 1, tiny, err, sizeof err) != 0 && tiny->B == 0);
    CHECK_MSG(err, path, "policy entries do not fit");
    shard_batch_free(tiny);
    shard_batch_t *other = shard_batch_new(pass == 0 ? &FMT_ENC : &FMT, 4, 0, err, sizeof err);
    CHECK(other && shard_row_batch(s, idx, 1, other, err, sizeof err) != 0 && other->B == 0);
    CHECK_MSG(err, path, "differs from the batch");
    shard_batch_free(other);
}

/* The gathered batch (rows idx[0..40) of s) is one the trainer accepts. */
static void rt_trainer_accepts(shard_t *s, shard_batch_t *bt, const int64_t *idx) {
    char err[1024] = "";
    shard_batch_clear(bt);
    CHECK_RC(shard_row_batch(s, idx, 40, bt, err, sizeof err), err);
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t nc = {1, 8, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = be ? nn_net_new(be, &nc, 1, err, sizeof err) : NULL;
    nn_train_config_t tc = nn_train_config_default();
    nn_optim_t *tr = net ? nn_optim_new(net, &tc, 64, err, sizeof err) : NULL;
    CHECK(tr != NULL);
    if (tr) {
        nn_batch_t nb = shard_batch_view(bt);
        nn_metrics_t m;
        CHECK_RC(nn_eval_batch(tr, &nb, &m, err, sizeof err), err);
        CHECK(isfinite(m.loss) && m.policy_loss > 0 && m.value_loss > 0 && m.legal_loss > 0);
    }
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
}

static void test_round_trip(void) {
    char err[1024] = "";
    CHECK(strcmp(shard_path_format(err, sizeof err, 3, 42), "shards/c0003_000042.safetensors") == 0);

    rt_position_packing();

    for (int pass = 0; pass < 2; pass++) {
        const shard_format_t *f = pass == 0 ? &FMT : &FMT_ENC;
        ref_t ref = {.fmt = *f};
        shard_builder_t *b = shard_builder_new(f, err, sizeof err);
        CHECK(b != NULL);
        if (!b) return;
        add_game(b, &ref, 17, "ffnaf", 1, "7g7f 3c3d");
        add_game(b, &ref, 0, "f", 0, "");         /* a game with no positions kept */
        add_game(b, &ref, 40, "fnnn", -1, "2g2f");
        add_game(b, &ref, 9, "n", 0, "5i5h");      /* no policy targets at all */
        /* an aborted game leaves nothing behind */
        ref_row_t junk;
        random_row(f, &junk, 1, 0);
        shard_row_t jr = as_row(&junk);
        CHECK_RC(shard_builder_add_row(b, &jr, err, sizeof err), err);
        shard_builder_abort_game(b);
        free(junk.planes), free(junk.legal), free(junk.hand), free(junk.label), free(junk.prob);

        CHECK(shard_builder_rows(b) == ref.n && shard_builder_games(b) == 4 && shard_builder_nnz(b) == ref.nnz);
        const db_game_t *g2 = shard_builder_game(b, 2);
        CHECK(g2 && g2->first_row == 17 && g2->row_count == 40 && strcmp(g2->moves, "2g2f") == 0 && g2->result == -1);
        CHECK(shard_builder_game(b, 1)->row_count == 0 && shard_builder_game(b, 4) == NULL);
        shard_builder_set_first_game_id(b, 1000);
        CHECK(shard_builder_game(b, 3)->id == 1003);

        const char *path = t_path(pass == 0 ? "rt.safetensors" : "rt_enc.safetensors");
        CHECK_RC(shard_write(b, path, err, sizeof err), err);
        shard_t *s = shard_open(path, f, 0, err, sizeof err);
        CHECK(s != NULL);
        if (!s) {
            fprintf(stderr, "%s\n", err);
            shard_builder_free(b);
            ref_free(&ref);
            return;
        }
        CHECK(strcmp(shard_path(s), path) == 0);
        CHECK(same_as_ref(s, &ref, 1000));
        /* rows without policy targets have empty ranges */
        int64_t pb, pe;
        shard_row_policy(s, 2, &pb, &pe); /* pattern "ffnaf": row 2 none, row 3 all labels */
        CHECK(pe == pb && ref.rows[2].n == 0);
        shard_row_policy(s, 3, &pb, &pe);
        CHECK(pe - pb == SHARD_LABEL_NB);
        shard_row_policy(s, ref.n - 1, &pb, &pe);
        CHECK(pb == pe && pe == ref.nnz); /* the last row has no entries and ends at nnz */
        /* The metadata, as another safetensors reader sees it. */
        rt_metadata(path, f, &ref);

        /* Gathers: random rows with repeats, in two calls, then from a second shard. */
        shard_batch_t *bt = shard_batch_new(f, 64, 0, err, sizeof err);
        CHECK(bt != NULL);
        int64_t idx[64];
        for (int i = 0; i < 40; i++) idx[i] = rndn((uint32_t)ref.n);
        idx[0] = 3; /* all labels */
        idx[1] = ref.n - 1;
        idx[2] = 2; /* none */
        idx[3] = 3;
        CHECK_RC(shard_row_batch(s, idx, 25, bt, err, sizeof err), err);
        CHECK_RC(shard_row_batch(s, idx + 25, 15, bt, err, sizeof err), err);
        CHECK(bt->B == 40 && bt->policy_offsets[0] == 0 && batch_matches(bt, 0, &ref, idx, 40));
        int64_t total = 0;
        for (int i = 0; i < 40; i++) total += ref.rows[idx[i]].n;
        CHECK(bt->policy_offsets[40] == total);
        nn_batch_t v = shard_batch_view(bt);
        CHECK(v.B == 40 && v.planes == bt->planes && v.policy_offsets == bt->policy_offsets && v.root_q == bt->root_q &&
              v.hand == bt->hand && v.legal == bt->legal && v.result == bt->result);
        /* Failures append nothing. */
        rt_gather_refusals(s, bt, pass, idx, path, &ref);

        /* A second shard from the same builder after reset; gather across both. */
        shard_builder_reset(b);
        CHECK(shard_builder_rows(b) == 0 && shard_builder_games(b) == 0 && shard_builder_nnz(b) == 0);
        ref_t ref2 = {.fmt = *f};
        shard_builder_set_first_game_id(b, 0);
        add_game(b, &ref2, 5, "f", 1, "1g1f");
        const char *path2 = t_path(pass == 0 ? "rt2.safetensors" : "rt2_enc.safetensors");
        CHECK_RC(shard_write(b, path2, err, sizeof err), err);
        shard_t *s2 = shard_open(path2, f, 0, err, sizeof err);
        CHECK(s2 && same_as_ref(s2, &ref2, 0));
        int64_t idx2[3] = {4, 0, 4};
        if (s2) CHECK_RC(shard_row_batch(s2, idx2, 3, bt, err, sizeof err), err);
        CHECK(bt->B == 43 && batch_matches(bt, 0, &ref, idx, 40) && batch_matches(bt, 40, &ref2, idx2, 3));
        CHECK(bt->policy_offsets[43] == total + ref2.rows[4].n * 2 + ref2.rows[0].n);
        shard_batch_clear(bt);
        CHECK(bt->B == 0 && bt->policy_offsets[0] == 0);

        if (pass == 1 && s) rt_trainer_accepts(s, bt, idx); /* the gathered batch is one the trainer accepts */
        shard_batch_free(bt);

        /* An empty shard is valid. */
        shard_builder_reset(b);
        const char *pe0 = t_path("empty.safetensors");
        CHECK_RC(shard_write(b, pe0, err, sizeof err), err);
        shard_t *s0 = shard_open(pe0, f, 0, err, sizeof err);
        CHECK(s0 && shard_rows(s0) == 0 && shard_games(s0) == 0 && shard_nnz(s0) == 0);
        shard_close(s0);

        shard_close(s2);
        shard_close(s);
        shard_builder_free(b);
        ref_free(&ref);
        ref_free(&ref2);
    }
}

/* Only rows without policy targets: nnz = 0, the policy columns are empty. */
static void test_no_policy(void) {
    char err[1024] = "";
    ref_t ref = {.fmt = FMT};
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    add_game(b, &ref, 6, "n", 1, "a");
    add_game(b, &ref, 3, "n", 0, "b");
    const char *path = t_path("nopolicy.safetensors");
    CHECK_RC(shard_write(b, path, err, sizeof err), err);
    shard_t *s = shard_open(path, &FMT, 0, err, sizeof err);
    CHECK(s && shard_nnz(s) == 0 && same_as_ref(s, &ref, 0));
    shard_batch_t *bt = shard_batch_new(&FMT, 8, 1, err, sizeof err);
    int64_t idx[4] = {8, 0, 3, 3};
    if (s) CHECK_RC(shard_row_batch(s, idx, 4, bt, err, sizeof err), err);
    CHECK(bt->B == 4 && bt->policy_offsets[4] == 0 && batch_matches(bt, 0, &ref, idx, 4));
    shard_batch_free(bt);
    shard_close(s);
    shard_builder_free(b);
    ref_free(&ref);
}

/* One game of rows with the given plies and search values, each position's
 * side to move the ply's parity (so results alternate as in a real game). */
static void add_game_q(shard_builder_t *b, ref_t *ref, int32_t n, const uint16_t *ply, const float *q,
                       int32_t result) {
    char err[512] = "";
    for (int32_t i = 0; i < n; i++) {
        ref_row_t *r = ref_next(ref);
        random_row(&ref->fmt, r, 1, ply[i]);
        r->game = ref->games;
        r->q = q[i];
        r->pos[SHARD_POS_SIDE] = (uint8_t)(ply[i] & 1);
        r->result = (int8_t)((ply[i] & 1) ? -result : result);
        shard_row_t row = as_row(r);
        CHECK_RC(shard_builder_add_row(b, &row, err, sizeof err), err);
        ref->nnz += r->n;
    }
    db_game_t g = game(0, 0, result, DB_REASON_CHECKMATE, "a", n);
    CHECK_RC(shard_builder_end_game(b, &g, err, sizeof err), err);
    ref->games++;
}

/* shard_q_lambda: the lambda-return of the search values, by hand, at its
 * two ends (lambda 0 = root_q, near 1 = the result) and against its
 * definition as a sum over a long game. */
static void test_q_lambda(void) {
    char err[1024] = "";
    ref_t ref = {.fmt = FMT};
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    /* game 0: plies 0, 1, 2, Black wins; game 1: plies 10 and 12 (ply 11 not stored), Black loses */
    static const uint16_t ply0[3] = {0, 1, 2}, ply1[2] = {10, 12};
    static const float q0[3] = {0.5f, -0.2f, 0.4f}, q1[2] = {0.1f, 0.3f};
    add_game_q(b, &ref, 3, ply0, q0, 1);
    add_game_q(b, &ref, 2, ply1, q1, -1);
    /* game 2: 200 plies of random values, White wins */
    uint16_t ply2[200];
    float q2[200];
    for (int i = 0; i < 200; i++) ply2[i] = (uint16_t)(i + 1), q2[i] = 2 * rndf() - 1;
    add_game_q(b, &ref, 200, ply2, q2, -1);
    const char *path = t_path("qlambda.safetensors");
    CHECK_RC(shard_write(b, path, err, sizeof err), err);
    shard_t *s = shard_open(path, &FMT, 0, err, sizeof err);
    KOMA_ASSERT(s && shard_rows(s) == 205);
    float out[205];
    /* by hand, lambda 1/2:
     *   game 0: G2 = .5*.4 + .5*(+1) = .7; G1 = .5*(-.2) + .5*(-.7) = -.45; G0 = .5*.5 + .5*.45 = .475
     *   game 1 (rows at plies 10 and 12: the same side to move, result -1 at both):
     *           G1 = .5*.3 + .5*(-1) = -.35; G0 = .5*.1 + .5*(-.35) = -.125 */
    shard_q_lambda(s, 0.5f, out);
    const float hand[5] = {0.475f, -0.45f, 0.7f, -0.125f, -0.35f};
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= fabsf(out[i] - hand[i]) < 1e-6f;
    CHECKF(ok, "lambda 0.5: %g %g %g | %g %g", out[0], out[1], out[2], out[3], out[4]);
    /* lambda 0: root_q itself; lambda -> 1: the result */
    shard_q_lambda(s, 0.0f, out);
    ok = 1;
    for (int64_t r = 0; r < 205; r++) ok &= out[r] == shard_columns(s)->root_q[r];
    CHECK(ok);
    shard_q_lambda(s, 1.0f - 1e-7f, out);
    ok = 1;
    for (int64_t r = 0; r < 205; r++) ok &= fabsf(out[r] - (float)shard_columns(s)->result[r]) < 1e-3f;
    CHECK(ok);
    /* the definition: (1-l) sum_k l^k s_k q(r+k) + l^n z(r), s_k = -1 for an odd ply difference */
    const float lam = 1.0f - 1.0f / 6;
    shard_q_lambda(s, lam, out);
    double worst = 0;
    for (int r = 5; r < 205; r++) {
        double sum = 0, w = 1;
        for (int k = 0; r + k < 205; k++, w *= lam) sum += (1 - lam) * w * ((k & 1) ? -q2[r - 5 + k] : q2[r - 5 + k]);
        sum += w * (double)shard_columns(s)->result[r];
        double d = fabs(sum - out[r]);
        worst = d > worst ? d : worst;
    }
    CHECKF(worst < 1e-5, "horizon 6: largest difference from the sum %g", worst);
    shard_close(s);
    shard_builder_free(b);
    ref_free(&ref);
}

/* The builder refuses rows and games a reader would reject. */
static void test_builder_rejects(void) {
    char err[1024] = "";
    shard_format_t bad = FMT;
    bad.planes_bytes = 0;
    CHECK(shard_builder_new(&bad, err, sizeof err) == NULL && strstr(err, "bad format"));
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    ref_row_t r;
    random_row(&FMT, &r, 1, 0);
    shard_row_t row = as_row(&r);
    row.policy_n = 2;
    uint16_t lab[2] = {5, 2187};
    float pr[2] = {0.5f, 0.5f};
    row.policy_label = lab;
    row.policy_prob = pr;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "label 2187"));
    lab[1] = 2186;
    pr[0] = -0.25f;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "probability"));
    pr[0] = NAN;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "probability"));
    pr[0] = 0.5f;
    row.root_q = 1.001f;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "root_q"));
    row.root_q = NAN;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "root_q"));
    row.root_q = 0;
    row.policy_n = SHARD_LABEL_NB + 1;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "policy entries"));
    row.policy_n = 2;
    uint8_t pos[SHARD_POSITION_BYTES];
    memcpy(pos, r.pos, sizeof pos);
    pos[SHARD_POS_SIDE] = 2;
    row.position = pos;
    CHECK(shard_builder_add_row(b, &row, err, sizeof err) != 0 && strstr(err, "side to move"));
    row.position = r.pos;
    CHECK(shard_builder_rows(b) == 0 && shard_builder_nnz(b) == 0);
    CHECK_RC(shard_builder_add_row(b, &row, err, sizeof err), err);
    const char *path = t_path("open.safetensors");
    CHECK(shard_write(b, path, err, sizeof err) != 0);
    CHECK_MSG(err, path, "still open");
    CHECK(!compat_file_exists(path));
    db_game_t g = game(0, 0, 2, DB_REASON_CHECKMATE, "", 0);
    CHECK(shard_builder_end_game(b, &g, err, sizeof err) != 0 && strstr(err, "result 2"));
    g = game(0, 0, 1, DB_REASON_NB, "", 0);
    CHECK(shard_builder_end_game(b, &g, err, sizeof err) != 0 && strstr(err, "reason"));
    g = game(0, 0, -1, DB_REASON_RESIGN, "", 0);
    CHECK_RC(shard_builder_end_game(b, &g, err, sizeof err), err);
    CHECK(shard_builder_rows(b) == 1 && shard_builder_nnz(b) == 2);
    shard_builder_free(b);
    free(r.planes), free(r.legal), free(r.hand), free(r.label), free(r.prob);
}

/* ---- rejection of bad files ----------------------------------------------------------- */
/* A small valid shard (3 games, 7 rows) at path; returns its reference. */
static void small_shard(const char *path, ref_t *ref) {
    char err[1024] = "";
    memset(ref, 0, sizeof *ref);
    ref->fmt = FMT;
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    add_game(b, ref, 3, "fnf", 1, "x");
    add_game(b, ref, 2, "f", -1, "y");
    add_game(b, ref, 2, "nf", 0, "z");
    /* rows 0-1 of game 0 on different sides, so a flipped result contradicts */
    KOMA_ASSERT(shard_write(b, path, err, sizeof err) == 0);
    shard_builder_free(b);
}

static void test_truncation(void) {
    char err[1024] = "";
    const char *path = t_path("trunc_src.safetensors"), *cut = t_path("trunc.safetensors");
    ref_t ref;
    small_shard(path, &ref);
    size_t len;
    uint8_t *d = read_all(path, &len);
    shard_t *s = shard_open(path, &FMT, 0, err, sizeof err);
    CHECK(s != NULL);
    shard_close(s);
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
        write_plain(cut, d, n);
        s = shard_open(cut, &FMT, 0, err, sizeof err);
        if (s || strncmp(err, cut, strlen(cut)) != 0) {
            if (bad++ < 5) fprintf(stderr, "truncated at %zu of %zu: %s\n", n, len, s ? "accepted" : err);
            shard_close(s);
        }
        s = shard_open(cut, &FMT, SHARD_OPEN_NO_CHECKSUM, err, sizeof err); /* lengths alone catch it */
        if (s) {
            if (bad++ < 5) fprintf(stderr, "truncated at %zu of %zu: accepted without checksums\n", n, len);
            shard_close(s);
        }
    }
    CHECK(bad == 0);
    printf("  truncation: %zu cut points rejected\n", len);
    free(d);
    ref_free(&ref);
}

/* Data offset in the file of every tensor (our writer lays them out in header order). */
static int64_t column_offset(const char *path, const char *name, int64_t *nbytes) {
    char err[512];
    size_t len;
    uint8_t *d = read_all(path, &len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)d[i] << (8 * i);
    free(d);
    st_file_t *f = st_open(path, 0, err, sizeof err);
    KOMA_ASSERT(f);
    int64_t at = 8 + (int64_t)hlen, found = -1;
    for (int32_t i = 0; i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        if (strcmp(t->name, name) == 0) {
            found = at;
            *nbytes = (int64_t)t->nbytes;
        }
        at += (int64_t)t->nbytes;
    }
    KOMA_ASSERT(at == (int64_t)len);
    st_close(f);
    return found;
}

static const char *COLS[12] = {"planes", "hand",    "legal", "policy_offsets", "policy_label", "policy_prob",
                               "result", "root_q", "ply",   "game_id",        "move",         "position"};

static void test_flipped_byte(void) {
    char err[1024] = "";
    const char *path = t_path("flip_src.safetensors"), *bad = t_path("flip.safetensors");
    ref_t ref;
    small_shard(path, &ref);
    size_t len;
    uint8_t *d = read_all(path, &len);
    for (int c = 0; c < 12; c++) {
        int64_t nb = 0, off = column_offset(path, COLS[c], &nb);
        CHECK(off > 0 && nb > 0);
        if (off <= 0 || nb <= 0) continue;
        d[off + nb / 2] ^= 0x10;
        write_plain(bad, d, len);
        d[off + nb / 2] ^= 0x10;
        shard_t *s = shard_open(bad, &FMT, 0, err, sizeof err);
        CHECK(s == NULL);
        char what[160];
        snprintf(what, sizeof what, "tensor '%s': checksum mismatch", COLS[c]);
        CHECK_MSG(err, bad, what);
        shard_close(s);
    }
    /* Without checksums a flip in the feature bits goes unseen; that is what the flag means. */
    int64_t nb = 0, off = column_offset(path, "planes", &nb);
    d[off] ^= 1;
    write_plain(bad, d, len);
    shard_t *s = shard_open(bad, &FMT, SHARD_OPEN_NO_CHECKSUM, err, sizeof err);
    CHECK(s != NULL && (shard_columns(s)->planes[0] ^ 1) == ref.rows[0].planes[0]);
    shard_close(s);
    d[off] ^= 1;
    /* ...but a label pushed out of range is still caught by the value checks. */
    off = column_offset(path, "policy_label", &nb);
    d[off + 1] |= 0x90; /* high byte of label 0: >= 0x9000 */
    write_plain(bad, d, len);
    s = shard_open(bad, &FMT, SHARD_OPEN_NO_CHECKSUM, err, sizeof err);
    CHECK(s == NULL);
    CHECK_MSG(err, bad, "policy_label[0]");
    free(d);
    ref_free(&ref);
}

static void test_wrong_format(void) {
    char err[1024] = "";
    const char *path = t_path("fmt.safetensors");
    ref_t ref;
    small_shard(path, &ref);
    const char *what[4] = {"features_version is 7, expected 8", "planes_bytes is 11, expected 12",
                           "hand_n is 3, expected 4", "legal_bytes is 5, expected 6"};
    for (int i = 0; i < 4; i++) {
        shard_format_t e = FMT;
        int32_t *fld[4] = {&e.features_version, &e.planes_bytes, &e.hand_n, &e.legal_bytes};
        (*fld[i])++;
        shard_t *s = shard_open(path, &e, 0, err, sizeof err);
        CHECK(s == NULL);
        CHECK_MSG(err, path, what[i]);
        shard_close(s);
    }
    shard_t *s = shard_open(path, NULL, 0, err, sizeof err); /* no expectation: any format */
    CHECK(s && memcmp(shard_format(s), &FMT, sizeof FMT) == 0);
    shard_close(s);
    ref_free(&ref);
}

/* Rewrites a valid shard through the safetensors writer (fresh checksums),
 * with one change, so that only the shard checks can catch it. */
typedef struct {
    const char *drop;       /* leave this column out */
    const char *grow;       /* add a zero row to this column (dimension 0 + 1) */
    const char *retype;     /* give this column dtype `dtype` (same element size) */
    st_dtype_t dtype;
    const char *meta_key;   /* set (or with NULL value, leave out) this metadata entry */
    const char *meta_value;
    const char *patch;      /* column whose bytes patch_fn edits */
    void (*patch_fn)(void *data, int64_t nbytes);
} mod_t;

static const char *META_KEYS[11] = {"koma.kind",         "koma.version", "koma.rows",       "koma.games",
                                    "koma.nnz",          "koma.features_version",           "koma.planes_bytes",
                                    "koma.hand_n",       "koma.legal_bytes", "koma.position", "koma.set"};

static void rewrite(const char *src, const char *dst, const mod_t *m) {
    char err[512];
    st_file_t *f = st_open(src, ST_OPEN_VERIFY, err, sizeof err);
    KOMA_ASSERT(f);
    st_writer_t *w = st_writer_new();
    void *bufs[16] = {0};
    for (int32_t i = 0; i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        if (m->drop && strcmp(t->name, m->drop) == 0) continue;
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        uint64_t nbytes = t->nbytes, row = t->shape[0] ? t->nbytes / (uint64_t)t->shape[0] : 0;
        if (m->grow && strcmp(t->name, m->grow) == 0) {
            shape[0]++;
            row = st_dtype_size(t->dtype);
            for (int k = 1; k < t->ndim; k++) row *= (uint64_t)t->shape[k];
            nbytes += row;
        }
        bufs[i] = calloc(1, nbytes + 1);
        memcpy(bufs[i], t->data, t->nbytes);
        if (m->patch && strcmp(t->name, m->patch) == 0) m->patch_fn(bufs[i], (int64_t)t->nbytes);
        st_dtype_t dt = m->retype && strcmp(t->name, m->retype) == 0 ? m->dtype : t->dtype;
        KOMA_ASSERT(st_writer_add(w, t->name, dt, t->ndim, shape, bufs[i]) == 0);
    }
    for (int k = 0; k < 11; k++) {
        const char *v = st_meta(f, META_KEYS[k]);
        if (m->meta_key && strcmp(m->meta_key, META_KEYS[k]) == 0) v = m->meta_value;
        if (v) KOMA_ASSERT(st_writer_meta(w, META_KEYS[k], v) == 0);
    }
    KOMA_ASSERT(st_writer_write(w, dst, err, sizeof err) == 0);
    st_writer_free(w);
    st_close(f);
    for (int i = 0; i < 16; i++) free(bufs[i]);
}

/* Patches (the small shard: 7 rows, game rows 0-2 / 3-4 / 5-6; offsets[0] = 0). */
static void p_off0(void *d, int64_t n) { (void)n, ((uint32_t *)d)[0] = 1; }
static void p_off_down(void *d, int64_t n) {
    (void)n;
    uint32_t *o = d;
    o[2] = o[1] + 1, o[3] = o[1]; /* row 2 ends below where it starts */
}
static void p_off_past(void *d, int64_t n) { ((uint32_t *)d)[n / 4 - 1] = 100000; }
static void p_label(void *d, int64_t n) { ((uint16_t *)d)[n / 2 - 1] = 2187; }
static void p_label_max(void *d, int64_t n) { (void)n, ((uint16_t *)d)[0] = 65535; }
static void p_prob_neg(void *d, int64_t n) { (void)n, ((float *)d)[1] = -0.5f; }
static void p_prob_nan(void *d, int64_t n) { (void)n, ((float *)d)[1] = NAN; }
static void p_prob_inf(void *d, int64_t n) { (void)n, ((float *)d)[1] = INFINITY; }
static void p_result2(void *d, int64_t n) { (void)n, ((int8_t *)d)[4] = 2; }
static void p_q(void *d, int64_t n) { (void)n, ((float *)d)[3] = 1.5f; }
static void p_hand_nan(void *d, int64_t n) { (void)n, ((float *)d)[4] = NAN; }
static void p_gid_down(void *d, int64_t n) { (void)n, ((int64_t *)d)[5] = -1; }
static void p_side(void *d, int64_t n) { (void)n, ((uint8_t *)d)[2 * SHARD_POSITION_BYTES + SHARD_POS_SIDE] = 2; }
static void p_piece(void *d, int64_t n) { (void)n, ((uint8_t *)d)[SHARD_POSITION_BYTES + 7] = 15; }
static int64_t g_flip_row;
static void p_result_flip(void *d, int64_t n) { (void)n, ((int8_t *)d)[g_flip_row] = (int8_t)-((int8_t *)d)[g_flip_row]; }

static void test_bad_files(void) {
    char err[1024] = "";
    const char *src = t_path("bad_src.safetensors"), *dst = t_path("bad.safetensors");
    ref_t ref;
    small_shard(src, &ref);

    /* Control: an unchanged rewrite is accepted, so every rejection below is the change's. */
    mod_t none = {0};
    rewrite(src, dst, &none);
    shard_t *s = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECK(s && same_as_ref(s, &ref, 0));
    shard_close(s);

    /* A missing column, and a column with one row too many, for every column. */
    for (int c = 0; c < 12; c++) {
        mod_t m = {.drop = COLS[c]};
        rewrite(src, dst, &m);
        s = shard_open(dst, &FMT, 0, err, sizeof err);
        CHECK(s == NULL);
        char what[160];
        snprintf(what, sizeof what, "tensor '%s' is missing", COLS[c]);
        CHECK_MSG(err, dst, what);
        shard_close(s);

        mod_t g = {.grow = COLS[c]};
        rewrite(src, dst, &g);
        s = shard_open(dst, &FMT, 0, err, sizeof err);
        CHECK(s == NULL);
        int nnz_col = c == 4 || c == 5;
        snprintf(what, sizeof what, "column '%s' has %lld rows, koma.%s says %lld", COLS[c],
                 (long long)(nnz_col ? ref.nnz : ref.n) + 1, nnz_col ? "nnz" : "rows",
                 (long long)(nnz_col ? ref.nnz : ref.n));
        CHECK_MSG(err, dst, what);
        shard_close(s);
    }

    struct {
        mod_t m;
        const char *what;
    } cases[] = {
        {{.retype = "result", .dtype = ST_DTYPE_U8}, "tensor 'result' has dtype U8, expected I8"},
        {{.retype = "hand", .dtype = ST_DTYPE_I32}, "tensor 'hand' has dtype I32, expected F32"},
        {{.retype = "policy_label", .dtype = ST_DTYPE_I16}, "tensor 'policy_label' has dtype I16, expected U16"},
        {{.meta_key = "koma.kind", .meta_value = "weights"}, "koma.kind is 'weights', not 'shard'"},
        {{.meta_key = "koma.kind", .meta_value = NULL}, "koma.kind is '(missing)'"},
        {{.meta_key = "koma.version", .meta_value = "3"}, "shard version 3, this build reads versions 1 and 2"},
        {{.meta_key = "koma.rows", .meta_value = "7x"}, "metadata 'koma.rows' = '7x' is not an integer"},
        {{.meta_key = "koma.rows", .meta_value = "-7"}, "metadata 'koma.rows' = '-7' is not an integer"},
        {{.meta_key = "koma.rows", .meta_value = "99999999999999999999999"}, "is not an integer"},
        {{.meta_key = "koma.rows", .meta_value = "6"}, "has 7 rows, koma.rows says 6"},
        {{.meta_key = "koma.nnz", .meta_value = NULL}, "metadata 'koma.nnz' is missing"},
        {{.meta_key = "koma.games", .meta_value = "2"}, "rows belong to 3 games, but koma.games says 2"},
        {{.meta_key = "koma.planes_bytes", .meta_value = "0"}, "'koma.planes_bytes' = '0' is not an integer in [1,"},
        {{.patch = "policy_offsets", .patch_fn = p_off0}, "policy_offsets[0] = 1, must be 0"},
        {{.patch = "policy_offsets", .patch_fn = p_off_down}, "policy_offsets decrease at row 3"},
        {{.patch = "policy_offsets", .patch_fn = p_off_past}, "row 5 ends at 100000, beyond nnz"},
        {{.patch = "policy_label", .patch_fn = p_label}, "is not below 2187"},
        {{.patch = "policy_label", .patch_fn = p_label_max}, "policy_label[0] = 65535 is not below 2187"},
        {{.patch = "policy_prob", .patch_fn = p_prob_neg}, "policy_prob[1] = -0.5 is not finite and >= 0"},
        {{.patch = "policy_prob", .patch_fn = p_prob_nan}, "policy_prob[1]"},
        {{.patch = "policy_prob", .patch_fn = p_prob_inf}, "policy_prob[1]"},
        {{.patch = "result", .patch_fn = p_result2}, "result[4] = 2, want -1, 0 or 1"},
        {{.patch = "root_q", .patch_fn = p_q}, "root_q[3] = 1.5 is outside [-1, 1]"},
        {{.patch = "hand", .patch_fn = p_hand_nan}, "hand[1][1] is not finite"},
        {{.patch = "game_id", .patch_fn = p_gid_down}, "game_id decreases at row 5"},
        {{.patch = "position", .patch_fn = p_side}, "position[2]: side to move"},
        {{.patch = "position", .patch_fn = p_piece}, "position[1]: bad piece code"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(src, dst, &cases[i].m);
        s = shard_open(dst, &FMT, 0, err, sizeof err);
        CHECK(s == NULL);
        CHECK_MSG(err, dst, cases[i].what);
        shard_close(s);
    }

    /* A result that contradicts the rest of its game: flip the sign of one row's. */
    shard_t *ok = shard_open(src, &FMT, 0, err, sizeof err);
    KOMA_ASSERT(ok);
    const shard_columns_t *c = shard_columns(ok);
    g_flip_row = -1;
    for (int64_t i = 1; i < 7 && g_flip_row < 0; i++)
        if (c->game_id[i] == c->game_id[i - 1] && c->result[i] != 0) g_flip_row = i;
    shard_close(ok);
    KOMA_ASSERT(g_flip_row > 0);
    mod_t flip = {.patch = "result", .patch_fn = p_result_flip};
    rewrite(src, dst, &flip);
    s = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECK(s == NULL);
    CHECK_MSG(err, dst, "contradicts row");
    shard_close(s);

    /* Not a safetensors file at all, and a missing file. */
    write_plain(dst, "hello", 5);
    s = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECK(s == NULL);
    CHECK_MSG(err, dst, "");
    const char *nofile = t_path("no_such.safetensors");
    s = shard_open(nofile, &FMT, 0, err, sizeof err);
    CHECK(s == NULL);
    CHECK_MSG(err, nofile, "");
    ref_free(&ref);
}

/* ---- registration in koma.db -------------------------------------------------------- */
static db_summary_t summary(db_t *db) {
    db_summary_t sum;
    KOMA_ASSERT(db_summary(db, &sum) == DB_OK);
    return sum;
}

/* The shard's games rows point at the shard and at the rows holding their ids. */
static int games_match_file(db_t *db, const char *run, const db_shard_t *sh, int32_t ngames, const int64_t *rows) {
    char err[1024], path[1200];
    snprintf(path, sizeof path, "%s/%s", run, sh->path);
    shard_t *s = shard_open(path, &FMT, 0, err, sizeof err);
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return 0;
    }
    db_game_list_t gl;
    int ok = db_games_of_shard(db, sh->id, &gl) == DB_OK && gl.n == ngames && shard_rows(s) == sh->rows;
    int64_t at = 0;
    for (int64_t i = 0; ok && i < gl.n; i++) {
        const db_game_t *g = &gl.games[i];
        ok = g->shard_id == sh->id && g->first_row == at && g->row_count == rows[i];
        for (int64_t r = g->first_row; ok && r < g->first_row + g->row_count; r++)
            ok = shard_row_game(s, r) == g->id;
        at += rows[i];
        if (!ok) fprintf(stderr, "%s: game %lld (id %lld) rows [%lld, +%lld) do not match\n", sh->path, (long long)i,
                         (long long)g->id, (long long)g->first_row, (long long)g->row_count);
    }
    ok = ok && at == shard_rows(s);
    db_game_list_free(&gl);
    shard_close(s);
    return ok;
}

static shard_builder_t *builder_with(ref_t *ref, int32_t ngames, const int64_t *rows, const char *boom_at) {
    char err[256];
    memset(ref, 0, sizeof *ref);
    ref->fmt = FMT;
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int32_t i = 0; i < ngames; i++) {
        const char *mv = boom_at && i == 1 ? "boom" : "7g7f 3c3d";
        add_game(b, ref, rows[i], "fn", i % 3 - 1, mv);
    }
    return b;
}

static void test_register(void) {
    char err[1024] = "";
    const char *run = t_path("run");
    char dbp[1000], abs[1200];
    snprintf(dbp, sizeof dbp, "%s/koma.db", run);
    KOMA_ASSERT(compat_mkdir_p(run, err, sizeof err) == 0);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbp, 0, &db, err, sizeof err) == DB_OK);

    /* shard_commit: the shards/ folder is created, ids start at 1. */
    ref_t ref;
    int64_t rows1[2] = {4, 3};
    shard_builder_t *b = builder_with(&ref, 2, rows1, NULL);
    char rel[128];
    db_shard_t sh1 = {0};
    CHECK_RC(shard_commit(db, run, shard_path_format(rel, sizeof rel, 0, 1), 0, b, &sh1, err, sizeof err), err);
    snprintf(abs, sizeof abs, "%s/%s", run, rel);
    CHECK(sh1.id > 0 && sh1.rows == 7 && sh1.games == 2 && sh1.cycle == 0 && sh1.features_version == 7 &&
          sh1.bytes == compat_file_size(abs) && strcmp(sh1.path, rel) == 0 && sh1.pos_begin == 0);
    CHECK(games_match_file(db, run, &sh1, 2, rows1));
    CHECK(shard_builder_game(b, 0)->id == 1 && shard_builder_game(b, 1)->id == 2);
    db_shard_t got;
    CHECK(db_shard_get(db, sh1.id, &got) == DB_OK && got.bytes == sh1.bytes && strcmp(got.xxh3, sh1.xxh3) == 0);
    shard_builder_free(b);
    ref_free(&ref);

    /* A second one continues the ids and the global positions. */
    int64_t rows2[3] = {2, 0, 5};
    b = builder_with(&ref, 3, rows2, NULL);
    db_shard_t sh2 = {0};
    CHECK_RC(shard_commit(db, run, shard_path_format(rel, sizeof rel, 1, 2), 1, b, &sh2, err, sizeof err), err);
    CHECK(sh2.id > sh1.id && sh2.games == 3 && sh2.pos_begin == 7 && shard_builder_game(b, 0)->id == 3);
    CHECK(games_match_file(db, run, &sh2, 3, rows2));
    /* The same path again: refused, the registered file untouched. */
    char before[17];
    snprintf(before, sizeof before, "%s", sh2.xxh3);
    CHECK(shard_commit(db, run, rel, 1, b, NULL, err, sizeof err) == DB_CONSTRAINT);
    CHECK(strstr(err, "already registered") != NULL);
    uint64_t h;
    snprintf(abs, sizeof abs, "%s/%s", run, rel);
    CHECK(db_file_xxh3(abs, &h, NULL, err, sizeof err) == 0);
    char hx[17];
    snprintf(hx, sizeof hx, "%016llx", (unsigned long long)h);
    CHECK(strcmp(hx, before) == 0);
    shard_builder_free(b);
    ref_free(&ref);
    db_summary_t sum = summary(db);
    CHECK(sum.shards == 2 && sum.games == 5 && sum.positions == 14 && sum.pending == 0);

    /* shard_register: the caller writes, then registers. */
    int64_t rows3[2] = {1, 6};
    b = builder_with(&ref, 2, rows3, NULL);
    int64_t first = 0;
    CHECK_RC(shard_next_game_id(db, &first, err, sizeof err), err);
    CHECK(first == 6);
    shard_builder_set_first_game_id(b, first);
    shard_path_format(rel, sizeof rel, 1, 3);
    snprintf(abs, sizeof abs, "%s/%s", run, rel);
    CHECK_RC(shard_write(b, abs, err, sizeof err), err);
    db_shard_t sh3 = {0};
    CHECK_RC(shard_register(db, run, rel, 1, b, &sh3, err, sizeof err), err);
    CHECK(sh3.id > sh2.id && sh3.games == 2 && sh3.bytes == compat_file_size(abs));
    CHECK(games_match_file(db, run, &sh3, 2, rows3));
    shard_builder_free(b);
    ref_free(&ref);

    /* Registration with ids the database does not assign: nothing on record. */
    b = builder_with(&ref, 2, rows3, NULL);
    shard_builder_set_first_game_id(b, 1); /* stale */
    shard_path_format(rel, sizeof rel, 1, 4);
    snprintf(abs, sizeof abs, "%s/%s", run, rel);
    CHECK_RC(shard_write(b, abs, err, sizeof err), err);
    CHECK(shard_register(db, run, rel, 1, b, NULL, err, sizeof err) == DB_CONSTRAINT);
    CHECK(strstr(err, "game_id column") != NULL);
    sum = summary(db);
    CHECK(sum.shards == 3 && sum.games == 7);
    compat_remove_file(abs);
    shard_builder_free(b);
    ref_free(&ref);

    /* A games insert that fails half-way (a trigger stands in for any SQLite
     * error): no shards row, no games rows, no file, no intent. */
    CHECK(db_exec(db, "CREATE TRIGGER boom BEFORE INSERT ON games WHEN NEW.moves = 'boom' "
                      "BEGIN SELECT RAISE(ABORT, 'boom'); END;") == DB_OK);
    int64_t rows4[3] = {2, 2, 2};
    b = builder_with(&ref, 3, rows4, "boom");
    shard_path_format(rel, sizeof rel, 2, 5);
    snprintf(abs, sizeof abs, "%s/%s", run, rel);
    CHECK(shard_commit(db, run, rel, 2, b, NULL, err, sizeof err) != DB_OK);
    CHECK(strstr(err, "boom") != NULL && strstr(err, "insert game 2 of 3") != NULL);
    sum = summary(db);
    CHECK(sum.shards == 3 && sum.games == 7 && sum.pending == 0 && !compat_file_exists(abs));
    /* shard_register's transaction fails the same way, all or nothing. */
    shard_builder_set_first_game_id(b, 8);
    CHECK_RC(shard_write(b, abs, err, sizeof err), err);
    CHECK(shard_register(db, run, rel, 2, b, NULL, err, sizeof err) != DB_OK && strstr(err, "boom"));
    sum = summary(db);
    CHECK(sum.shards == 3 && sum.games == 7);
    compat_remove_file(abs);
    CHECK(db_exec(db, "DROP TRIGGER boom") == DB_OK);
    /* With the trigger gone the same builder registers, with ids 8, 9, 10. */
    CHECK_RC(shard_commit(db, run, rel, 2, b, NULL, err, sizeof err), err);
    CHECK(shard_builder_game(b, 2)->id == 10);
    shard_builder_free(b);
    ref_free(&ref);

    /* A kill -9 after the rename and before the transaction leaves an intent
     * and a file; the start-up check moves the file aside. */
    int64_t rows5[1] = {3};
    b = builder_with(&ref, 1, rows5, NULL);
    shard_path_format(rel, sizeof rel, 2, 6);
    snprintf(abs, sizeof abs, "%s/%s", run, rel);
    CHECK(db_shard_intent(db, rel) == DB_OK);
    CHECK_RC(shard_write(b, abs, err, sizeof err), err);
    db_check_report_t rep;
    CHECK(db_check_shards(db, run, 0, &rep) == DB_OK);
    int moved = 0;
    for (int32_t i = 0; i < rep.n; i++) moved += rep.items[i].kind == DB_CHECK_ORPHAN_MOVED && strcmp(rep.items[i].path, rel) == 0;
    CHECK(moved == 1 && !compat_file_exists(abs));
    db_check_report_free(&rep);
    sum = summary(db);
    CHECK(sum.shards == 4 && sum.games == 10 && sum.pending == 0);
    shard_builder_free(b);
    ref_free(&ref);
    db_close(db);
}

/* ---- the writer-thread job ------------------------------------------------------------ */
typedef struct {
    int32_t n;
    int status[8];
    int64_t shard_id[8], rows[8];
    char err[8][512];
} done_log_t;

static void on_done(void *user, int status, const char *err, const db_shard_t *sh) {
    done_log_t *l = user;
    if (l->n >= 8) return;
    l->status[l->n] = status;
    l->shard_id[l->n] = sh ? sh->id : -1;
    l->rows[l->n] = sh ? sh->rows : -1;
    snprintf(l->err[l->n], sizeof l->err[0], "%s", err ? err : "");
    l->n++;
}

static void test_writer_job(void) {
    char err[1024] = "";
    const char *run = t_path("run_w");
    char dbp[1000], rel[128], abs[1200];
    snprintf(dbp, sizeof dbp, "%s/koma.db", run);
    KOMA_ASSERT(compat_mkdir_p(run, err, sizeof err) == 0);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(dbp, 0, &db, err, sizeof err) == DB_OK);
    db_writer_t *w = db_writer_start(db, 2, err, sizeof err);
    KOMA_ASSERT(w);
    done_log_t log = {0};
    ref_t refs[4];
    int64_t rows[4][2] = {{3, 4}, {5, 1}, {2, 2}, {1, 1}};
    for (int i = 0; i < 4; i++) {
        shard_builder_t *b = builder_with(&refs[i], 2, rows[i], NULL);
        int seq = i == 3 ? 2 : i + 1; /* the last reuses a path: it must fail alone */
        CHECK(shard_submit(w, run, shard_path_format(rel, sizeof rel, 0, seq), 0, b, on_done, &log, -1) == DB_OK);
    }
    CHECK(db_writer_flush(w, 30000) == DB_OK);
    CHECK(db_writer_stop(w, 10000) == DB_OK);
    /* After stop: refused, and the builder is still ours (ASan would see a double free). */
    ref_t late_ref;
    shard_builder_t *late = builder_with(&late_ref, 1, rows[3], NULL);
    CHECK(shard_submit(w, run, "shards/late.safetensors", 0, late, on_done, &log, 0) == DB_CANCELLED);
    CHECK(shard_builder_games(late) == 1);
    shard_builder_free(late);
    ref_free(&late_ref);
    db_writer_free(w);

    CHECK(log.n == 4);
    for (int i = 0; i < 3; i++) {
        CHECK(log.status[i] == DB_OK && log.shard_id[i] > 0 && log.rows[i] == rows[i][0] + rows[i][1]);
        db_shard_t sh;
        CHECK(db_shard_get(db, log.shard_id[i], &sh) == DB_OK);
        CHECK(games_match_file(db, run, &sh, 2, rows[i]));
        snprintf(abs, sizeof abs, "%s/%s", run, sh.path);
        shard_t *s = shard_open(abs, &FMT, 0, err, sizeof err);
        CHECK(s && same_as_ref(s, &refs[i], 1 + 2 * i));
        shard_close(s);
    }
    CHECK(log.status[3] == DB_CONSTRAINT && log.shard_id[3] == -1 && strstr(log.err[3], "already registered"));
    db_summary_t sum = summary(db);
    CHECK(sum.shards == 3 && sum.games == 6 && sum.pending == 0);
    for (int i = 0; i < 4; i++) ref_free(&refs[i]);
    db_close(db);
}

/* ---- version 2 game shards: the games' columns and the 16-bit policy ------------------------------- */
/* Patches of the version-2 shard below (3 games of 3, 2 and 2 rows). */
static void p_grows_more(void *d, int64_t n) { (void)n, ((uint32_t *)d)[1] = 3; }
static void p_gid_same(void *d, int64_t n) { (void)n, ((int64_t *)d)[2] = ((int64_t *)d)[1]; }
static void p_grows_split(void *d, int64_t n) { (void)n, ((uint32_t *)d)[0] = 2, ((uint32_t *)d)[1] = 3; }

/* A version-2 game shard reads back as written (ids and policies through shard_row_game and
 * shard_row_probs), and one wrong game column is refused with a message that names it. */
static void test_v2_games(void) {
    static const uint8_t START[SHARD_HCP_BYTES] = {
        0x58, 0xa4, 0x49, 0x21, 0x0c, 0xd7, 0x57, 0x21, 0x7e, 0x8e, 0x4d, 0x21, 0x2c, 0xaf, 0x42, 0x78,
        0x14, 0xc2, 0xab, 0x10, 0x9e, 0x4d, 0x21, 0x2c, 0xd7, 0x5f, 0x21, 0x3e, 0x8e, 0x49, 0x21, 0x0c}; /* cshogi's */
    static const uint8_t AFTER_7F[SHARD_HCP_BYTES] = {
        0x59, 0xa4, 0x49, 0x21, 0x0c, 0xd7, 0x57, 0x21, 0x7e, 0x8e, 0x4d, 0x21, 0x2c, 0xaf, 0x42, 0x78,
        0x14, 0xc2, 0xab, 0x10, 0x9e, 0x4d, 0x11, 0x2c, 0xd7, 0x5f, 0x21, 0x3e, 0x8e, 0x49, 0x21, 0x0c};
    char err[1024] = "";
    const char *src = t_path("v2_src.safetensors"), *dst = t_path("v2_bad.safetensors");
    shard_builder_t *b = shard_builder_new_compact(0, err, sizeof err);
    KOMA_ASSERT(b);
    const uint16_t label[2] = {3, 40};
    const float prob[2] = {0.75f, 0.25f}; /* visits 3 and 1: stored as those counts, read back exactly */
    const int rows_of[3] = {3, 2, 2};
    for (int g = 0; g < 3; g++) {
        for (int r = 0; r < rows_of[g]; r++) {
            shard_row_t row = {.hcp = r & 1 ? AFTER_7F : START, .policy_label = label, .policy_prob = prob,
                               .policy_n = r == 1 ? 0 : 2, .ply = (uint16_t)r, .move = 0x1234, .root_q = 0.25f};
            CHECKF(shard_builder_add_row(b, &row, err, sizeof err) == 0, "%s", err);
        }
        db_game_t gm = {.start_sfen = "startpos", .moves = "", .plies = rows_of[g], .result = g == 1 ? -1 : 1,
                        .reason = DB_REASON_RESIGN};
        CHECKF(shard_builder_end_game(b, &gm, err, sizeof err) == 0, "%s", err);
    }
    shard_builder_set_first_game_id(b, 41);
    CHECKF(shard_write(b, src, err, sizeof err) == 0, "%s", err);
    shard_builder_free(b);
    shard_t *s = shard_open(src, NULL, 0, err, sizeof err);
    CHECKF(s != NULL, "%s", err);
    if (!s) return;
    static const int64_t want_game[7] = {41, 41, 41, 42, 42, 43, 43};
    static const int no_policy[7] = {0, 1, 0, 0, 1, 0, 1}; /* each game's second row */
    int bad = 0;
    for (int64_t r = 0; r < 7; r++) {
        float p[2] = {0, 0};
        int64_t pb, pe;
        shard_row_policy(s, r, &pb, &pe);
        shard_row_probs(s, r, p);
        bad += shard_row_game(s, r) != want_game[r] || (no_policy[r] ? pe != pb : (p[0] != 0.75f || p[1] != 0.25f));
    }
    CHECKF(bad == 0 && shard_games(s) == 3 && shard_columns(s)->game_ids && !shard_columns(s)->game_id,
           "%d rows read back otherwise", bad);
    shard_close(s);
    struct {
        mod_t m;
        const char *what;
    } cases[] = {
        {{.drop = "game_rows"}, "tensor 'game_rows' is missing"},
        {{.drop = "policy_q16"}, "tensor 'policy_q16' is missing"},
        {{.grow = "game_id"}, "column 'game_id' has 4 rows, koma.games says 3"},
        {{.patch = "game_rows", .patch_fn = p_grows_more}, "game_rows add up to 8 rows, koma.rows says 7"},
        {{.patch = "game_id", .patch_fn = p_gid_same}, "game_id[2] = 42 does not increase"},
        {{.patch = "game_rows", .patch_fn = p_grows_split}, "contradicts row"}, /* row 2 joins game 42 (-1) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(src, dst, &cases[i].m);
        s = shard_open(dst, NULL, 0, err, sizeof err);
        CHECK(s == NULL);
        CHECK_MSG(err, dst, cases[i].what);
        shard_close(s);
    }
}

int main(void) {
    t_scratch("test_shard");
    test_round_trip();
    test_no_policy();
    test_q_lambda();
    test_builder_rejects();
    test_truncation();
    test_flipped_byte();
    test_wrong_format();
    test_bad_files();
    test_v2_games();
    test_register();
    test_writer_job();
    t_rm_rf(t_dir);
    return t_done("test_shard");
}
