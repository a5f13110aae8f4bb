/* fuzz_shard.c - data/shard.h: shard_open (the validating shard reader) on
 * untrusted files, and the batch gather on what it accepts.
 *
 * Each input is written to a scratch file and opened with any format
 * (expect NULL), without checksums first (so the fuzzer reaches the value
 * checks behind them), then with. Properties:
 *   - a refused shard comes with a message that starts with its path;
 *   - an accepted shard keeps its promises: every column lies inside the
 *     mapping (all bytes read: ASan), policy offsets start at 0, never
 *     decrease and end at nnz, labels < SHARD_LABEL_NB, probabilities finite
 *     and >= 0, results in {-1, 0, 1}, root_q in [-1, 1], game ids never
 *     decrease, every position entry passes shard_position_check;
 *   - shard_row_batch of every row (in pieces that fit) succeeds and copies
 *     exactly the row's policy entries.
 */
#include <math.h>
#include <string.h>

#include "data/shard.h"
#include "fuzz.h"

static uint64_t touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
    return h;
}

static void check_shard(const shard_t *s, const char *path) {
    const shard_format_t *fmt = shard_format(s);
    const shard_columns_t *c = shard_columns(s);
    int64_t R = shard_rows(s), nnz = shard_nnz(s);
    FUZZ_CHECK(R >= 0 && nnz >= 0 && shard_games(s) >= 0, "rows %lld nnz %lld", (long long)R, (long long)nnz);
    FUZZ_CHECK(strcmp(shard_path(s), path) == 0, "shard_path '%s'", shard_path(s));
    FUZZ_CHECK(fmt->planes_bytes >= 1 && fmt->hand_n >= 0 && fmt->legal_bytes >= 0, "format %d %d %d",
               (int)fmt->planes_bytes, (int)fmt->hand_n, (int)fmt->legal_bytes);
    /* Every byte of every column. */
    (void)touch(c->planes, (uint64_t)R * (uint64_t)fmt->planes_bytes);
    (void)touch(c->hand, (uint64_t)R * (uint64_t)fmt->hand_n * sizeof(float));
    (void)touch(c->legal, (uint64_t)R * (uint64_t)fmt->legal_bytes);
    (void)touch(c->policy_offsets, (uint64_t)R * sizeof(uint32_t));
    (void)touch(c->policy_label, (uint64_t)nnz * sizeof(uint16_t));
    (void)touch(c->policy_prob, (uint64_t)nnz * sizeof(float));
    (void)touch(c->ply, (uint64_t)R * sizeof(uint16_t));
    (void)touch(c->move, (uint64_t)R * sizeof(uint16_t));
    (void)touch(c->position, (uint64_t)R * SHARD_POSITION_BYTES);
    int64_t prev_end = 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t b, e;
        shard_row_policy(s, r, &b, &e);
        FUZZ_CHECK(b == prev_end && b <= e && e <= nnz, "row %lld: policy [%lld, %lld) after %lld of %lld",
                   (long long)r, (long long)b, (long long)e, (long long)prev_end, (long long)nnz);
        FUZZ_CHECK(e - b <= SHARD_LABEL_NB, "row %lld: %lld entries", (long long)r, (long long)(e - b));
        prev_end = e;
        FUZZ_CHECK(c->result[r] >= -1 && c->result[r] <= 1, "row %lld: result %d", (long long)r, c->result[r]);
        FUZZ_CHECK(c->root_q[r] >= -1.0f && c->root_q[r] <= 1.0f, "row %lld: root_q %g", (long long)r,
                   (double)c->root_q[r]);
        FUZZ_CHECK(r == 0 || shard_row_game(s, r) >= shard_row_game(s, r - 1), "row %lld: game id decreases", (long long)r);
        const char *bad = shard_position_check(c->position + (size_t)r * SHARD_POSITION_BYTES);
        FUZZ_CHECK(bad == NULL, "row %lld: position: %s", (long long)r, bad);
    }
    FUZZ_CHECK(prev_end == nnz, "policy entries end at %lld, nnz %lld", (long long)prev_end, (long long)nnz);
    for (int64_t k = 0; k < nnz; k++) {
        FUZZ_CHECK(c->policy_label[k] < SHARD_LABEL_NB, "entry %lld: label %u", (long long)k, c->policy_label[k]);
        FUZZ_CHECK(!c->policy_prob || (isfinite(c->policy_prob[k]) && c->policy_prob[k] >= 0.0f),
                   "entry %lld: prob %g", (long long)k, c->policy_prob ? (double)c->policy_prob[k] : 0.0);
    }

    /* Gather every row, 64 at a time, into one batch. */
    if (R == 0) return;
    char err[512];
    int32_t cap = R < 64 ? (int32_t)R : 64;
    shard_batch_t *bt = shard_batch_new(fmt, cap, 0, err, sizeof err);
    if (!bt) return; /* a huge row width: out of memory is an answer, not a bug */
    int64_t rows[64];
    for (int64_t r0 = 0; r0 < R; r0 += cap) {
        int32_t n = (int32_t)(R - r0 < cap ? R - r0 : cap);
        for (int32_t i = 0; i < n; i++) rows[i] = R - 1 - (r0 + i); /* back to front */
        shard_batch_clear(bt);
        int rc = shard_row_batch(s, rows, n, bt, err, sizeof err);
        FUZZ_CHECK(rc == 0, "gather of %d rows refused: %s", (int)n, err);
        FUZZ_CHECK(bt->B == n, "gathered %d rows, not %d", (int)bt->B, (int)n);
        for (int32_t i = 0; i < n; i++) {
            int64_t b, e;
            shard_row_policy(s, rows[i], &b, &e);
            uint32_t ob = bt->policy_offsets[i], oe = bt->policy_offsets[i + 1];
            FUZZ_CHECK((int64_t)(oe - ob) == e - b, "row %lld: %u entries gathered, %lld stored",
                       (long long)rows[i], oe - ob, (long long)(e - b));
            FUZZ_CHECK(memcmp(bt->policy_label + ob, c->policy_label + b, (size_t)(e - b) * 2) == 0,
                       "row %lld: labels differ", (long long)rows[i]);
            FUZZ_CHECK(bt->result[i] == c->result[rows[i]], "row %lld: result differs", (long long)rows[i]);
        }
        (void)shard_batch_view(bt);
    }
    shard_batch_free(bt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_file("shard", data, size);
    char err[512];
    for (int pass = 0; pass < 2; pass++) {
        memset(err, 0, sizeof err);
        shard_t *s = shard_open(path, NULL, pass ? 0 : SHARD_OPEN_NO_CHECKSUM, err, sizeof err);
        if (!s) {
            FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0, "message does not start with the path: '%s'", err);
            continue;
        }
        check_shard(s, path);
        shard_close(s);
    }
    shard_close(NULL);
    return 0;
}
