/* test_shard_surprise.c - data/shard.c's optional "surprise" column (policy
 * surprise, for surprise-weighted sampling): every row's value round-trips
 * (known and unknown rows side by side), a shard whose rows have none has no
 * such column (older shards, imports) and reads as unknown everywhere, the
 * builder refuses NaN, infinite and negative values, and the reader refuses a
 * file whose column holds one (or has the wrong dtype or length) by path. */
#include "data/shard.h"
#include "nn/safetensors.h"
#include "tests/data/shard_test.h"
#include "tests/koma_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const shard_format_t FMT = {7, 11, 3, 5};
static uint64_t g_rng = 0x51ab5eedull;

/* Row i of a test game: random bytes, two policy entries, surprise *sp (NULL: unknown). */
static int add_row(shard_builder_t *b, int32_t i, const float *sp, char *err, size_t errlen) {
    uint8_t planes[11], legal[5], pos[SHARD_POSITION_BYTES];
    float hand[3] = {0, 1, 2};
    for (int k = 0; k < 11; k++) planes[k] = (uint8_t)t_splitmix64(&g_rng);
    for (int k = 0; k < 5; k++) legal[k] = (uint8_t)t_splitmix64(&g_rng);
    shard_position_t p;
    memset(&p, 0, sizeof p);
    p.side = (uint8_t)(i & 1);
    p.ply = (uint16_t)(i + 1);
    shard_position_pack(&p, pos);
    uint16_t label[2] = {(uint16_t)(i % 2000), (uint16_t)(i % 2000 + 1)};
    float prob[2] = {0.75f, 0.25f};
    shard_row_t row = {.planes = planes, .hand = hand, .legal = legal, .policy_label = label, .policy_prob = prob,
                       .policy_n = 2, .root_q = 0, .ply = (uint16_t)i, .move = 0, .position = pos, .surprise = sp};
    return shard_builder_add_row(b, &row, err, errlen);
}

/* A shard of one game of n rows at path; row i's surprise is s[i] (< 0: unknown). */
static void write_shard(const char *path, const float *s, int32_t n) {
    char err[1024] = "";
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int32_t i = 0; i < n; i++) KOMA_ASSERT(add_row(b, i, s[i] >= 0 ? &s[i] : NULL, err, sizeof err) == 0);
    db_game_t g = {.start_sfen = "startpos", .moves = "", .plies = n, .result = 1, .reason = DB_REASON_RESIGN};
    KOMA_ASSERT(shard_builder_end_game(b, &g, err, sizeof err) == 0);
    if (shard_write(b, path, err, sizeof err) != 0) fprintf(stderr, "%s\n", err);
    shard_builder_free(b);
}

static void test_round_trip(void) {
    char err[1024] = "";
    const char *path = t_path("surprise.safetensors");
    const float s[6] = {0.0f, 1.25f, -1.0f, 3.5e-7f, 41.0f, -1.0f};
    write_shard(path, s, 6);
    shard_t *sh = shard_open(path, &FMT, 0, err, sizeof err);
    CHECKF(sh != NULL, "%s", err);
    if (!sh) return;
    const shard_columns_t *c = shard_columns(sh);
    CHECK(c->surprise != NULL);
    int same = 0;
    for (int64_t r = 0; r < 6; r++) {
        float want = s[r] >= 0 ? s[r] : SHARD_SURPRISE_UNKNOWN;
        same += c->surprise && c->surprise[r] == want && shard_row_surprise(sh, r) == want;
    }
    CHECKF(same == 6, "%d of 6 rows kept their surprise", same);
    shard_close(sh);
}

/* No row with a surprise: no column, as in a shard written before it existed. */
static void test_absent(void) {
    char err[1024] = "";
    const char *path = t_path("old.safetensors");
    const float s[4] = {-1, -1, -1, -1};
    write_shard(path, s, 4);
    st_file_t *f = st_open(path, 0, err, sizeof err);
    KOMA_ASSERT(f);
    CHECK(st_find(f, "surprise") == NULL && st_find(f, "root_q") != NULL);
    st_close(f);
    shard_t *sh = shard_open(path, &FMT, 0, err, sizeof err);
    CHECKF(sh != NULL, "%s", err);
    if (!sh) return;
    CHECK(shard_columns(sh)->surprise == NULL);
    int unknown = 0;
    for (int64_t r = 0; r < 4; r++) unknown += shard_row_surprise(sh, r) == SHARD_SURPRISE_UNKNOWN;
    CHECK(unknown == 4);
    shard_close(sh);
}

static void test_builder_rejects(void) {
    char err[1024] = "";
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    const float bad[4] = {NAN, INFINITY, -0.5f, -1.0f}; /* -1 means unknown in the file, never as a value */
    for (int i = 0; i < 4; i++) {
        err[0] = 0;
        CHECKF(add_row(b, 0, &bad[i], err, sizeof err) != 0 && strstr(err, "surprise"), "surprise %g: %s",
               (double)bad[i], err);
    }
    float ok = 0.5f;
    CHECK(add_row(b, 0, &ok, err, sizeof err) == 0 && add_row(b, 1, NULL, err, sizeof err) == 0);
    shard_builder_free(b);
}

static void test_reader_rejects(void) {
    char err[1024] = "";
    const char *src = t_path("good.safetensors"), *dst = t_path("bad.safetensors");
    const float s[3] = {0.5f, -1.0f, 2.0f};
    write_shard(src, s, 3);
    /* control: an unchanged rewrite is read, so each refusal below is the change's */
    t_shard_rewrite_column(src, dst, "surprise", ST_DTYPE_F32, 3, s);
    shard_t *sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(sh && shard_row_surprise(sh, 2) == 2.0f, "%s", err);
    shard_close(sh);
    const float vals[3][3] = {{0.5f, -0.5f, 2.0f}, {0.5f, NAN, 2.0f}, {INFINITY, -1.0f, 2.0f}};
    for (int k = 0; k < 3; k++) {
        t_shard_rewrite_column(src, dst, "surprise", ST_DTYPE_F32, 3, vals[k]);
        err[0] = 0;
        sh = shard_open(dst, &FMT, 0, err, sizeof err);
        CHECKF(!sh && !strncmp(err, dst, strlen(dst)) && strstr(err, "surprise"), "bad value %d: %s", k, err);
        shard_close(sh);
    }
    t_shard_rewrite_column(src, dst, "surprise", ST_DTYPE_F32, 2, s); /* a row short */
    sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(!sh && !strncmp(err, dst, strlen(dst)) && strstr(err, "surprise"), "short column: %s", err);
    shard_close(sh);
    t_shard_rewrite_column(src, dst, "surprise", ST_DTYPE_I32, 3, s); /* another dtype of the same width */
    sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(!sh && !strncmp(err, dst, strlen(dst)) && strstr(err, "surprise"), "I32 column: %s", err);
    shard_close(sh);
}

int main(void) {
    t_scratch("test_shard_surprise");
    test_round_trip();
    test_absent();
    test_builder_rejects();
    test_reader_rejects();
    t_rm_rf(t_dir);
    return t_done("test_shard_surprise");
}
