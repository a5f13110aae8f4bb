/* fuzz_seeds.c - writes the valid starting inputs of the file fuzzers
 * (well-formed safetensors files and shards, made by Koma's own writers)
 * into a directory, for a fuzzer to mutate:
 *
 *   fuzz_seeds OUT_DIR   (writes OUT_DIR/safetensors/ and OUT_DIR/shard/)
 *
 * The committed corpora (tests/data/fuzz/<target>/) started from these and
 * the fuzzers' own finds, minimized with -merge=1 (tests/fuzz/README.md).
 */
#include <string.h>

#include "compat/compat.h"
#include "data/shard.h"
#include "nn/safetensors.h"

static int fail(const char *err) {
    fprintf(stderr, "fuzz_seeds: %s\n", err);
    return 1;
}

static int write_safetensors(const char *dir) {
    char path[1200], err[512];
    /* 1: empty (metadata only). */
    st_writer_t *w = st_writer_new();
    st_writer_meta(w, "koma.kind", "weights");
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    if (st_writer_write(w, path, err, sizeof err) != 0) return fail(err);
    st_writer_free(w);
    /* 2: one tensor of every dtype, a scalar and a zero-size tensor. */
    static uint8_t bytes[8 * 24];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 37 + 11);
    w = st_writer_new();
    for (int d = 0; d < ST_DTYPE_NB; d++) {
        char name[32];
        snprintf(name, sizeof name, "t_%s", st_dtype_name((st_dtype_t)d));
        int64_t shape[2] = {2, 3};
        if (st_writer_add(w, name, (st_dtype_t)d, 2, shape, bytes) != 0) return fail("add");
    }
    int64_t zero[2] = {0, 5};
    st_writer_add(w, "empty", ST_DTYPE_F32, 2, zero, bytes);
    st_writer_add(w, "scalar", ST_DTYPE_F32, 0, zero, bytes);
    st_writer_meta(w, "koma.kind", "weights");
    st_writer_meta(w, "koma.version", "1");
    snprintf(path, sizeof path, "%s/dtypes.safetensors", dir);
    if (st_writer_write(w, path, err, sizeof err) != 0) return fail(err);
    st_writer_free(w);
    /* 3: a small net-like file. */
    static float wts[64];
    for (int i = 0; i < 64; i++) wts[i] = (float)i * 0.25f - 3.0f;
    w = st_writer_new();
    int64_t s4[4] = {2, 2, 3, 3}, s1[1] = {2};
    st_writer_add(w, "stem.conv.weight", ST_DTYPE_F32, 4, s4, wts);
    st_writer_add(w, "stem.bn.weight", ST_DTYPE_F32, 1, s1, wts);
    st_writer_add(w, "stem.bn.bias", ST_DTYPE_F32, 1, s1, wts + 2);
    st_writer_meta(w, "koma.kind", "weights");
    st_writer_meta(w, "koma.arch", "{\"blocks\":1,\"channels\":2}");
    snprintf(path, sizeof path, "%s/net.safetensors", dir);
    if (st_writer_write(w, path, err, sizeof err) != 0) return fail(err);
    st_writer_free(w);
    return 0;
}

static int write_shard(const char *dir, const char *name, const shard_format_t *fmt, int games, int rows_per) {
    char err[512], path[1200];
    shard_builder_t *b = shard_builder_new(fmt, err, sizeof err);
    if (!b) return fail(err);
    uint8_t planes[64], legal[64], pos[SHARD_POSITION_BYTES];
    float hand[16];
    for (int g = 0; g < games; g++) {
        for (int r = 0; r < rows_per; r++) {
            for (int i = 0; i < 64; i++) planes[i] = (uint8_t)(i * 13 + r), legal[i] = (uint8_t)(i + g);
            for (int i = 0; i < 16; i++) hand[i] = (float)((i + r) % 3);
            shard_position_t p;
            memset(&p, 0, sizeof p);
            p.board[4] = 8;       /* Black king (engine codes: type + 16 * colour) */
            p.board[76] = 8 + 16; /* White king */
            p.side = (uint8_t)(r & 1);
            p.ply = (uint16_t)(r + 1);
            shard_position_pack(&p, pos);
            uint16_t labels[3] = {(uint16_t)(r * 7), (uint16_t)(100 + g), 2186};
            float probs[3] = {0.5f, 0.25f, 0.25f};
            shard_row_t row = {.planes = planes, .hand = hand, .legal = legal, .policy_label = labels,
                               .policy_prob = probs, .policy_n = r % 4 == 3 ? 0 : 3, .root_q = 0.125f * (float)(r % 8) - 0.5f,
                               .ply = (uint16_t)r, .move = (uint16_t)(0x1234 + r), .position = pos};
            if (shard_builder_add_row(b, &row, err, sizeof err) != 0) return fail(err);
        }
        db_game_t game;
        memset(&game, 0, sizeof game);
        game.start_sfen = "startpos";
        game.moves = "7g7f 3c3d";
        game.plies = rows_per;
        game.result = g % 3 - 1;
        game.reason = DB_REASON_RESIGN;
        if (shard_builder_end_game(b, &game, err, sizeof err) != 0) return fail(err);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (shard_write(b, path, err, sizeof err) != 0) return fail(err);
    shard_builder_free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    char err[512], dir[1100];
    snprintf(dir, sizeof dir, "%s/safetensors", argv[1]);
    if (compat_mkdir_p(dir, err, sizeof err) != 0) return fail(err);
    if (write_safetensors(dir)) return 1;
    snprintf(dir, sizeof dir, "%s/shard", argv[1]);
    if (compat_mkdir_p(dir, err, sizeof err) != 0) return fail(err);
    shard_format_t small = {.features_version = 1, .planes_bytes = 4, .hand_n = 2, .legal_bytes = 3};
    shard_format_t bare = {.features_version = 7, .planes_bytes = 1, .hand_n = 0, .legal_bytes = 0};
    if (write_shard(dir, "small.safetensors", &small, 2, 5)) return 1;
    if (write_shard(dir, "bare.safetensors", &bare, 1, 2)) return 1;
    if (write_shard(dir, "empty.safetensors", &small, 0, 0)) return 1;
    printf("fuzz_seeds: wrote %s/safetensors and %s/shard\n", argv[1], argv[1]);
    return 0;
}
