/* test_shard_moves_left.c - data/shard.c's optional "moves_left" column (the
 * moves-left head's target) and the opponent-reply targets of a gathered
 * batch:
 *  - the builder gives each row plies - ply of its game (two games of
 *    different lengths), the reader and shard_row_moves_left return them,
 *    shard_row_batch / shard_batch_view hand them to the trainer as floats;
 *  - a game marked shard_builder_length_unknown (an imported position) gets
 *    -1, and a shard of only such games has no column (as older shards) and
 *    reads -1 everywhere;
 *  - the reader refuses a column holding a value below -1, by path;
 *  - row r's opponent-reply target is row r+1's policy target when r+1 is the
 *    same game one ply later with a target, or a one-hot on its move label
 *    (the caller's array: train/window.c derives them) when it has no policy
 *    target but a known label; none for a game's last row, for a row whose
 *    next row has neither, across games, and without labels (NULL);
 *  - the builder writes no move_label column, and a shard that holds one (as
 *    older builds wrote it) still opens, its column ignored whatever it holds. */
#include "data/shard.h"
#include "nn/safetensors.h"
#include "tests/data/shard_test.h"
#include "tests/koma_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const shard_format_t FMT = {7, 11, 3, 5};

/* Row i of a game: policy entries {label 10*i + game, 10*i + game + 1} (none when i == no_policy). */
static void add_row(shard_builder_t *b, int32_t game, int32_t i, int32_t no_policy) {
    char err[512];
    uint8_t planes[11] = {0}, legal[5] = {0}, pos[SHARD_POSITION_BYTES];
    float hand[3] = {0, 1, 2};
    shard_position_t p;
    memset(&p, 0, sizeof p);
    p.side = (uint8_t)(i & 1);
    p.ply = (uint16_t)(i + 1);
    shard_position_pack(&p, pos);
    uint16_t label[2] = {(uint16_t)(10 * i + game), (uint16_t)(10 * i + game + 1)};
    float prob[2] = {0.75f, 0.25f};
    shard_row_t row = {.planes = planes, .hand = hand, .legal = legal, .policy_label = label, .policy_prob = prob,
                       .policy_n = i == no_policy ? 0 : 2, .root_q = 0, .ply = (uint16_t)i, .position = pos};
    KOMA_ASSERT(shard_builder_add_row(b, &row, err, sizeof err) == 0);
}

static void end_game(shard_builder_t *b, int32_t plies, int unknown) {
    char err[512];
    if (unknown) shard_builder_length_unknown(b);
    db_game_t g = {.start_sfen = "startpos", .moves = "", .plies = plies, .result = 1, .reason = DB_REASON_RESIGN};
    KOMA_ASSERT(shard_builder_end_game(b, &g, err, sizeof err) == 0);
}

static void test_column_and_batch(void) {
    char err[1024] = "";
    const char *path = t_path("ml.safetensors");
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int32_t i = 0; i < 4; i++) add_row(b, 0, i, 2); /* game 0: 4 rows of a 5-ply game, row 2 without policy */
    end_game(b, 5, 0);
    for (int32_t i = 0; i < 1; i++) add_row(b, 1, i, -1); /* game 1: an imported position */
    end_game(b, 1, 1);
    for (int32_t i = 0; i < 3; i++) add_row(b, 2, i, -1); /* game 2: 3 rows of 3 plies */
    end_game(b, 3, 0);
    for (int32_t i = 0; i < 3; i++) add_row(b, 3, i, 1); /* game 3 (rows 8..10): row 9 has no policy target */
    end_game(b, 3, 0);
    for (int32_t i = 0; i < 3; i++) add_row(b, 4, i, 1); /* game 4 (rows 11..13): row 12 has no policy target */
    end_game(b, 3, 0);
    KOMA_ASSERT(shard_write(b, path, err, sizeof err) == 0);
    shard_builder_free(b);
    st_file_t *f = st_open(path, 0, err, sizeof err);
    CHECKF(f && !st_find(f, "move_label"), "the builder wrote a move_label column: %s", err);
    st_close(f);
    shard_t *sh = shard_open(path, &FMT, 0, err, sizeof err);
    CHECKF(sh != NULL, "%s", err);
    if (!sh) return;
    /* the move labels: row 9's move 501 (no policy target, a known move), row 12's unknown (neither), row 13's
     * 502 beside its policy */
    uint16_t labels[14];
    for (int r = 0; r < 14; r++) labels[r] = SHARD_LABEL_UNKNOWN;
    labels[9] = 501, labels[13] = 502;
    const int32_t want[8] = {5, 4, 3, 2, -1, 3, 2, 1};
    int same = 0;
    for (int64_t r = 0; r < 8; r++) same += shard_row_moves_left(sh, r) == want[r];
    CHECKF(shard_columns(sh)->moves_left != NULL && same == 8, "%d of 8 rows kept their moves_left", same);
    /* replies: 0 -> 1, 1 -> none (row 2 has no policy), 2 -> 3, 3 -> none (last of its game), 4 -> none (next
     * game), 5 -> 6, 6 -> 7, 7 -> none */
    const int64_t reply[8] = {1, -1, 3, -1, -1, 6, 7, -1};
    same = 0;
    for (int64_t r = 0; r < 8; r++)
        same += shard_row_reply(sh, NULL, r) == reply[r] && shard_row_reply(sh, labels, r) == reply[r];
    CHECKF(same == 8, "%d of 8 rows have the right reply row", same);
    const int64_t reply2[6] = {9, 10, -1, -1, 13, -1}; /* rows 8..13 */
    const int64_t reply2_nolabels[6] = {-1, 10, -1, -1, 13, -1}; /* row 9 has no target then */
    same = 0;
    for (int64_t r = 8; r < 14; r++)
        same += shard_row_reply(sh, labels, r) == reply2[r - 8] && shard_row_reply(sh, NULL, r) == reply2_nolabels[r - 8];
    CHECKF(same == 6, "%d of 6 rows (move labels) have the right reply row", same);
    shard_batch_t *bt = shard_batch_new(&FMT, 8, 0, err, sizeof err);
    KOMA_ASSERT(bt);
    const int64_t rows[7] = {7, 0, 4, 5, 2, 8, 11};
    CHECKF(shard_row_batch_labels(sh, labels, rows, 7, bt, err, sizeof err) == 0, "%s", err);
    nn_batch_t v = shard_batch_view(bt);
    CHECK(v.moves_left && v.moves_left[0] == 1.0f && v.moves_left[1] == 5.0f && v.moves_left[2] == -1.0f &&
          v.moves_left[3] == 3.0f && v.moves_left[4] == 3.0f);
    /* opponent targets: row 7 none, row 0 = row 1's {10, 11}, row 4 none, row 5 = row 6's {12, 13}, row 2 = row 3's {30, 31} */
    const uint32_t off[6] = {0, 0, 2, 2, 4, 6};
    const uint16_t lab[6] = {10, 11, 12, 13, 30, 31};
    int ok = v.opp_offsets != NULL;
    for (int k = 0; ok && k < 6; k++) ok &= v.opp_offsets[k] == off[k];
    for (int k = 0; ok && k < 6; k++) ok &= v.opp_label[k] == lab[k] && v.opp_prob[k] == (k % 2 ? 0.25f : 0.75f);
    CHECKF(ok, "opponent-reply targets differ");
    /* row 8: row 9's move, one-hot; row 11: none */
    CHECKF(v.opp_offsets[6] == 7 && v.opp_offsets[7] == 7 && v.opp_label[6] == 501 && v.opp_prob[6] == 1.0f,
           "one-hot reply: offsets %u %u label %u", v.opp_offsets[6], v.opp_offsets[7], v.opp_label[6]);
    /* without labels (shard_row_batch): the same, but row 8 has no reply */
    shard_batch_clear(bt);
    CHECKF(shard_row_batch(sh, rows, 7, bt, err, sizeof err) == 0, "%s", err);
    v = shard_batch_view(bt);
    CHECKF(v.opp_offsets[5] == 6 && v.opp_offsets[6] == 6 && v.opp_offsets[7] == 6,
           "no labels: offsets %u %u %u", v.opp_offsets[5], v.opp_offsets[6], v.opp_offsets[7]);
    shard_batch_free(bt);
    shard_close(sh);
}

/* Only imported positions: no column, -1 everywhere (as a shard from before the column). */
static void test_absent(void) {
    char err[1024] = "";
    const char *path = t_path("imported.safetensors");
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int g = 0; g < 3; g++) {
        add_row(b, g, 0, -1);
        end_game(b, 1, 1);
    }
    KOMA_ASSERT(shard_write(b, path, err, sizeof err) == 0);
    shard_builder_free(b);
    st_file_t *f = st_open(path, 0, err, sizeof err);
    KOMA_ASSERT(f);
    CHECK(st_find(f, "moves_left") == NULL);
    st_close(f);
    shard_t *sh = shard_open(path, &FMT, 0, err, sizeof err);
    CHECKF(sh != NULL, "%s", err);
    if (!sh) return;
    CHECK(shard_columns(sh)->moves_left == NULL && shard_row_moves_left(sh, 0) == -1 &&
          shard_row_moves_left(sh, 2) == -1 && shard_row_reply(sh, NULL, 0) == -1);
    shard_close(sh);
}

static void test_reader_rejects(void) {
    char err[1024] = "";
    const char *src = t_path("good.safetensors"), *dst = t_path("bad.safetensors");
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int32_t i = 0; i < 3; i++) add_row(b, 0, i, -1);
    end_game(b, 3, 0);
    KOMA_ASSERT(shard_write(b, src, err, sizeof err) == 0);
    shard_builder_free(b);
    const int16_t good[3] = {3, -1, 1}, bad[3] = {3, -2, 1};
    t_shard_rewrite_column(src, dst, "moves_left", ST_DTYPE_I16, 3, good); /* control: the rewrite itself is read */
    shard_t *sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(sh && shard_row_moves_left(sh, 1) == -1 && shard_row_moves_left(sh, 2) == 1, "%s", err);
    shard_close(sh);
    t_shard_rewrite_column(src, dst, "moves_left", ST_DTYPE_I16, 3, bad);
    sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(!sh && !strncmp(err, dst, strlen(dst)) && strstr(err, "moves_left"), "value -2: %s", err);
    shard_close(sh);
    t_shard_rewrite_column(src, dst, "moves_left", ST_DTYPE_I16, 2, good); /* a row short */
    sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(!sh && strstr(err, "moves_left"), "short column: %s", err);
    shard_close(sh);
    const float f3[3] = {3, 2, 1};
    t_shard_rewrite_column(src, dst, "moves_left", ST_DTYPE_F32, 3, f3); /* wrong dtype */
    sh = shard_open(dst, &FMT, 0, err, sizeof err);
    CHECKF(!sh && strstr(err, "moves_left"), "F32 column: %s", err);
    shard_close(sh);
}

/* A shard with the move_label column older builds wrote (derivable from move and position, so no longer
 * read): it opens, and the column changes nothing, whatever it holds (older readers refused 4000). */
static void test_old_label_column(void) {
    char err[1024] = "";
    const char *src = t_path("new.safetensors"), *dst = t_path("old.safetensors");
    shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int32_t i = 0; i < 3; i++) add_row(b, 0, i, 1); /* row 1 without a policy target */
    end_game(b, 3, 0);
    KOMA_ASSERT(shard_write(b, src, err, sizeof err) == 0);
    shard_builder_free(b);
    const uint16_t col[2][3] = {{500, 501, 502}, {4000, 4001, SHARD_LABEL_UNKNOWN}};
    for (int k = 0; k < 2; k++) {
        t_shard_rewrite_column(src, dst, "move_label", ST_DTYPE_U16, 3, col[k]);
        st_file_t *f = st_open(dst, 0, err, sizeof err);
        CHECKF(f && st_find(f, "move_label"), "the rewrite has no move_label column: %s", err);
        st_close(f);
        shard_t *sh = shard_open(dst, &FMT, 0, err, sizeof err);
        CHECKF(sh, "an old shard with a move_label column (%u ...) does not open: %s", col[k][0], err);
        if (!sh) continue;
        CHECK(shard_rows(sh) == 3 && shard_row_reply(sh, NULL, 0) == -1 && shard_row_reply(sh, NULL, 1) == 2);
        shard_close(sh);
    }
}

int main(void) {
    t_scratch("shard_moves_left");
    test_column_and_batch();
    test_absent();
    test_reader_rejects();
    test_old_label_column();
    t_rm_rf(t_dir);
    return t_done("test_shard_moves_left");
}
