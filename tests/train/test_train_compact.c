/* test_train_compact.c - version-2 (compact) shards end to end (docs/DATA.md):
 *   1. every position of tests/data/perft.txt, of the game records under
 *      tests/data/records/ and of random playouts round-trips exactly
 *      through the 32-byte hcp position column (board, hands, side);
 *   2. the planes, hand values and legal-move mask the trainer's loader
 *      makes from those rows (shard_row_batch + train_batch_expand) equal
 *      engine/encode's of the same position bit for bit, in a batch that
 *      mixes version-1 rows (copied) and version-2 rows (made);
 *   3. a position set's rows train with a one-hot policy target on their
 *      move, and have no opponent-reply target;
 *   4. epochs: train_window_set_epoch_order draws every position of the
 *      window exactly once per epoch, in an order that differs between
 *      epochs and is the same for the same seed;
 *   5. lazy verification: a shard whose bytes were damaged after
 *      registration joins the window without being read, is found bad by
 *      the first batch that draws from it (named once), and the batches go
 *      on from the rest.
 */
#include "tests/train/train_test.h"

#include "data/record.h"
#include "data/shard_pos.h"
#include "train/window.h"
#include "nn/backend.h"

/* ---- positions ------------------------------------------------------------------------ */
#define MAXPOS 20000
/* A position kept small (a pos_t with its history is 128 KB): what sets it up again, and its key. */
typedef struct {
    uint8_t board[SQ_NB];
    hand_t hand[COLOR_NB];
    color_t side;
    int32_t ply;
    uint64_t key;
} small_pos_t;
static small_pos_t *g_pos; /* (MAXPOS) */

/* Position i, set up in a scratch pos_t (valid until the next call). */
static const pos_t *pos_at(int32_t i) {
    static pos_t p;
    const small_pos_t *s = &g_pos[i];
    char err[256];
    KOMA_ASSERT(sfen_set_position(&p, s->board, s->hand, s->side, s->ply, err, sizeof err) == SFEN_OK);
    KOMA_ASSERT(pos_key(&p) == s->key);
    return &p;
}
static int32_t g_npos;

static void add_pos(const pos_t *p) {
    if (g_npos >= MAXPOS) return;
    small_pos_t *s = &g_pos[g_npos++];
    memcpy(s->board, p->board, sizeof s->board);
    s->hand[0] = p->hand[0], s->hand[1] = p->hand[1];
    s->side = p->side;
    s->ply = pos_game_ply(p);
    s->key = pos_key(p);
}

static void load_perft(void) {
    FILE *f = fopen(KOMA_SOURCE_DIR "/tests/data/perft.txt", "r");
    KOMA_ASSERT(f);
    char line[1024], err[256];
    static pos_t p;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *semi = strchr(line, ';');
        if (semi) *semi = 0;
        if (sfen_parse_cstr(&p, line, err, sizeof err) == SFEN_OK) add_pos(&p);
    }
    fclose(f);
}

static int on_game(void *user, const rec_game_t *g) {
    (void)user;
    static pos_t p;
    char err[256];
    if (sfen_parse_cstr(&p, g->start_sfen, err, sizeof err) != SFEN_OK) return 0;
    add_pos(&p);
    for (int32_t i = 0; i < g->n_moves; i++) {
        pos_do_move(&p, g->moves[i]);
        add_pos(&p);
    }
    return 0;
}

static void load_records(void) {
    static const char *const FILES[] = {"game1.csa", "game1.kif", "game1_sjis.kif", "games.usi", "multi.csa",
                                        "pi.csa", "board.csa", "board.kif"};
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/records/%s", KOMA_SOURCE_DIR, FILES[i]);
        rec_parse_file(path, REC_FORMAT_AUTO, &(rec_sink_t){on_game, NULL, NULL});
    }
}

static void load_playouts(int games) {
    static pos_t p;
    for (int g = 0; g < games; g++) {
        pos_set_startpos(&p);
        for (int ply = 0; ply < 160; ply++) {
            add_pos(&p);
            move_list_t ml;
            movegen_legal(&p, &ml);
            if (ml.n == 0) break;
            pos_do_move(&p, ml.moves[t_next() % (uint64_t)ml.n]);
        }
    }
}

/* 1: the hcp column round-trips every position exactly. */
static void test_round_trip(void) {
    int32_t bad = 0;
    uint8_t hcp[SHARD_HCP_BYTES];
    static pos_t back;
    for (int32_t i = 0; i < g_npos; i++) {
        const pos_t *p = pos_at(i);
        shard_pos_hcp(p, hcp);
        char err[256];
        int ok = shard_hcp_position(hcp, pos_game_ply(p), &back, err, sizeof err) == 0 &&
                 memcmp(back.board, p->board, sizeof back.board) == 0 && back.side == p->side &&
                 back.hand[COLOR_BLACK] == p->hand[COLOR_BLACK] && back.hand[COLOR_WHITE] == p->hand[COLOR_WHITE] &&
                 pos_key(&back) == pos_key(p);
        if (!ok && bad++ < 5) fprintf(stderr, "position %d does not round-trip: %s\n", i, err);
    }
    CHECKF(bad == 0, "%d of %d positions do not round-trip through hcp", bad, g_npos);
}

/* A row's columns of both versions, for position p. */
typedef struct {
    uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES], posb[SHARD_POSITION_BYTES], hcp[SHARD_HCP_BYTES];
    float hand[ENC_HAND];
} row_cols_t;

/* p's columns as self-play makes them: the hcp (version 2), and the planes, hand, mask and 96-byte position
 * (version 1); a row over them without a policy target. */
static shard_row_t row_of(const pos_t *p, row_cols_t *rc) {
    shard_pos_hcp(p, rc->hcp);
    encode_position(p, rc->planes, rc->hand);
    encode_legal_mask(p, rc->legal);
    shard_position_t sp = {.side = (uint8_t)p->side, .ply = (uint16_t)pos_game_ply(p)};
    memcpy(sp.board, p->board, 81);
    sp.hand[0] = p->hand[COLOR_BLACK], sp.hand[1] = p->hand[COLOR_WHITE];
    shard_position_pack(&sp, rc->posb);
    return (shard_row_t){.planes = rc->planes, .hand = rc->hand, .legal = rc->legal, .position = rc->posb,
                         .hcp = rc->hcp, .root_q = 0.0f, .move = MOVE_NONE};
}

/* A version-2 game shard holding positions [from, from + n) as one-row games, and a version-1 shard of the
 * same positions (planes encoded as self-play did), in run r. */
static void write_pair(const char *dir, int32_t from, int32_t n, char *p2, char *p1, size_t len) {
    char err[1024];
    const shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    shard_builder_t *b2 = shard_builder_new_compact(0, err, sizeof err), *b1 = shard_builder_new(&fmt, err, sizeof err);
    KOMA_ASSERT(b1 && b2);
    static row_cols_t rc;
    for (int32_t i = from; i < from + n; i++) {
        shard_row_t row = row_of(pos_at(i), &rc);
        db_game_t g = {.start_sfen = "startpos", .moves = "", .plies = 1, .result = 0, .reason = DB_REASON_ABORT};
        CHECK_OK(shard_builder_add_row(b2, &row, err, sizeof err), err);
        CHECK_OK(shard_builder_end_game(b2, &g, err, sizeof err), err);
        CHECK_OK(shard_builder_add_row(b1, &row, err, sizeof err), err);
        CHECK_OK(shard_builder_end_game(b1, &g, err, sizeof err), err);
    }
    snprintf(p2, len, "%s/v2_%d.safetensors", dir, from);
    snprintf(p1, len, "%s/v1_%d.safetensors", dir, from);
    CHECK_OK(shard_write(b2, p2, err, sizeof err), err);
    CHECK_OK(shard_write(b1, p1, err, sizeof err), err);
    shard_builder_free(b1);
    shard_builder_free(b2);
}

/* 2: planes, hand and mask made from version-2 rows equal encode's (and a version-1 shard's copy), in mixed
 * batches. */
static void test_expand(const char *dir) {
    char err[1024], p2[1100], p1[1100];
    const shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    enum { CHUNK = 256 };
    shard_batch_t *bt = shard_batch_new(&fmt, 2 * CHUNK, 0, err, sizeof err);
    KOMA_ASSERT(bt);
    int32_t bad = 0, rows = 0;
    static uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES];
    float hand[ENC_HAND];
    for (int32_t from = 0; from < g_npos; from += CHUNK) {
        int32_t n = g_npos - from < CHUNK ? g_npos - from : CHUNK;
        write_pair(dir, from, n, p2, p1, sizeof p2);
        shard_t *s2 = shard_open(p2, &fmt, 0, err, sizeof err), *s1 = shard_open(p1, &fmt, 0, err, sizeof err);
        CHECKF(s2 && s1, "%s", err);
        if (!s2 || !s1) break;
        CHECK(shard_version(s2) == SHARD_VERSION && shard_version(s1) == SHARD_VERSION_V1);
        int64_t idx[CHUNK];
        for (int32_t i = 0; i < n; i++) idx[i] = n - 1 - i; /* any order */
        shard_batch_clear(bt);
        CHECK_OK(shard_row_batch(s1, idx, n, bt, err, sizeof err), err); /* rows [0, n): copied */
        CHECK_OK(shard_row_batch(s2, idx, n, bt, err, sizeof err), err); /* rows [n, 2n): made */
        CHECK(bt->pending == n);
        CHECK_OK(train_batch_expand(bt, err, sizeof err), err);
        CHECK(bt->pending == 0);
        for (int32_t i = 0; i < n; i++) {
            const pos_t *p = pos_at((int32_t)(from + idx[i]));
            encode_position(p, planes, hand);
            encode_legal_mask(p, legal);
            for (int half = 0; half < 2; half++) {
                int32_t j = half * n + i;
                int ok = !memcmp(bt->planes + (size_t)j * ENC_PACKED_BYTES, planes, sizeof planes) &&
                         !memcmp(bt->legal + (size_t)j * ENC_LEGAL_BYTES, legal, sizeof legal) &&
                         !memcmp(bt->hand + (size_t)j * ENC_HAND, hand, sizeof hand);
                if (!ok && bad++ < 5) fprintf(stderr, "position %lld (%s): planes, hand or mask differ\n", (long long)(from + idx[i]),
                                              half ? "made from version 2" : "copied from version 1");
            }
            rows++;
        }
        shard_close(s1);
        shard_close(s2);
        compat_remove_file(p1);
        compat_remove_file(p2);
    }
    CHECKF(bad == 0, "%d of %d rows differ from encode's", bad, 2 * rows);
    CHECK(rows == g_npos);
    shard_batch_free(bt);
}

/* 3: a version-2 game shard keeps each row's policy target as 16-bit shares: read back (and in a batch) it is
 * the row's distribution normalized, within 2e-5 (a share is 1/65535 of the row's largest); an entry above 0,
 * however small, stays above 0; the float column is gone; a version-1 shard keeps its floats exactly. */
static void test_policy_q16(const char *dir) {
    char err[1024], p2[1100], p1[1100];
    const shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    enum { ROWS = 40 };
    static uint16_t label[ROWS][SHARD_LABEL_NB];
    static float prob[ROWS][SHARD_LABEL_NB];
    int32_t n[ROWS];
    for (int32_t r = 0; r < ROWS; r++) { /* rows of 0..600 entries: visit-like counts, a 1e-7 entry, ties */
        n[r] = r == 0 ? 0 : r == 1 ? 1 : r == 2 ? 600 : 1 + (int32_t)(t_next() % 80);
        for (int32_t i = 0; i < n[r]; i++) {
            label[r][i] = (uint16_t)((i * 7 + r) % SHARD_LABEL_NB);
            prob[r][i] = r == 2 ? 1.0f / 600 : (float)(1 + t_next() % 800) / 800.0f;
        }
        if (n[r] > 2) prob[r][1] = 1e-7f;
    }
    n[3] = 5; /* a search's target: visits / their total, as floats; it reads back bit for bit */
    static const uint16_t vis[5] = {700, 1, 3, 37, 59};
    for (int32_t i = 0; i < 5; i++) prob[3][i] = (float)vis[i] / 800.0f;
    shard_builder_t *b2 = shard_builder_new_compact(0, err, sizeof err), *b1 = shard_builder_new(&fmt, err, sizeof err);
    KOMA_ASSERT(b1 && b2);
    static row_cols_t rc;
    for (int32_t r = 0; r < ROWS; r++) {
        shard_row_t row = row_of(pos_at(0), &rc);
        row.policy_label = label[r], row.policy_prob = prob[r], row.policy_n = n[r];
        CHECK_OK(shard_builder_add_row(b2, &row, err, sizeof err), err);
        CHECK_OK(shard_builder_add_row(b1, &row, err, sizeof err), err);
    }
    db_game_t g = {.start_sfen = "startpos", .moves = "", .plies = ROWS, .result = 0, .reason = DB_REASON_ABORT};
    CHECK_OK(shard_builder_end_game(b2, &g, err, sizeof err), err);
    CHECK_OK(shard_builder_end_game(b1, &g, err, sizeof err), err);
    snprintf(p2, sizeof p2, "%s/q16_v2.safetensors", dir);
    snprintf(p1, sizeof p1, "%s/q16_v1.safetensors", dir);
    CHECK_OK(shard_write(b2, p2, err, sizeof err), err);
    CHECK_OK(shard_write(b1, p1, err, sizeof err), err);
    shard_builder_free(b1);
    shard_builder_free(b2);
    shard_t *s2 = shard_open(p2, &fmt, 0, err, sizeof err), *s1 = shard_open(p1, &fmt, 0, err, sizeof err);
    CHECKF(s2 && s1, "%s", err);
    if (!s2 || !s1) return;
    CHECK(shard_columns(s2)->policy_q16 && !shard_columns(s2)->policy_prob);
    CHECK(shard_columns(s1)->policy_prob && !shard_columns(s1)->policy_q16);
    shard_batch_t *bt = shard_batch_new(&fmt, ROWS, 0, err, sizeof err);
    KOMA_ASSERT(bt);
    int64_t idx[ROWS];
    for (int32_t r = 0; r < ROWS; r++) idx[r] = r;
    CHECK_OK(shard_row_batch(s2, idx, ROWS, bt, err, sizeof err), err);
    int32_t bad = 0;
    double worst = 0;
    for (int32_t r = 0; r < ROWS; r++) {
        float got[SHARD_LABEL_NB], exact[SHARD_LABEL_NB];
        int64_t b, e;
        shard_row_policy(s2, r, &b, &e);
        CHECK(e - b == n[r]);
        CHECK(shard_row_game(s2, r) == shard_row_game(s1, r) && shard_row_game(s2, r) >= 0);
        shard_row_probs(s2, r, got);
        shard_row_probs(s1, r, exact);
        double sum = 0;
        for (int32_t i = 0; i < n[r]; i++) sum += prob[r][i];
        const float *inb = bt->policy_prob + bt->policy_offsets[r];
        for (int32_t i = 0; i < n[r] && i < e - b; i++) {
            double want = prob[r][i] / sum, d = fabs(got[i] - want);
            worst = d > worst ? d : worst;
            bad += d > 2e-5 || !(got[i] > 0) || exact[i] != prob[r][i] || inb[i] != got[i] ||
                   (r == 3 && got[i] != prob[r][i]) ||
                   shard_columns(s2)->policy_label[b + i] != label[r][i];
        }
    }
    fprintf(stderr, "policy as 16-bit shares: worst difference from the normalized target %.2e\n", worst);
    CHECKF(bad == 0, "%d policy entries differ (worst %.2e)", bad, worst);
    shard_batch_free(bt);
    shard_close(s1);
    shard_close(s2);
    compat_remove_file(p1);
    compat_remove_file(p2);
}

/* ---- position sets in a run ----------------------------------------------------------------- */
/* Registers `shards` position-set shards of `per` rows each in run r; row k of the run (in order) has root_q
 * = k / 2^20, a value every row has alone. */
typedef struct {
    char dir[1024];
    db_t *db;
} run_t_;

static void write_sets(run_t_ *r, int32_t shards, int32_t per) {
    char err[1024];
    int64_t k = 0;
    for (int32_t s = 0; s < shards; s++) {
        shard_builder_t *b = shard_builder_new_compact(1, err, sizeof err);
        KOMA_ASSERT(b);
        for (int32_t i = 0; i < per; i++, k++) {
            const pos_t *p = NULL;
            move_list_t ml;
            for (int64_t j = k;; j++) { /* a position with a move to play (a playout's last may be mate) */
                p = pos_at((int32_t)(j % g_npos));
                if (movegen_legal(p, &ml) > 0) break;
            }
            uint8_t hcp[SHARD_HCP_BYTES];
            shard_pos_hcp(p, hcp);
            move_t m = ml.moves[0];
            CHECK_OK(shard_builder_add_set_row(b, hcp, (uint16_t)m, (int8_t)(k % 3 - 1), (float)k / 1048576.0f, 0,
                                               DB_REASON_RESIGN, err, sizeof err),
                     err);
        }
        db_set_t set = {.bytes = 38 * per, .mtime_ns = s, .records = per, .records_done = per, .positions = per,
                        .finished = 1};
        snprintf(set.path, sizeof set.path, "/data/f%d.hcpe", s);
        snprintf(set.format, sizeof set.format, "hcpe");
        snprintf(set.xxh3, sizeof set.xxh3, "%016x", s + 1);
        CHECK_OK(db_set_insert(r->db, &set), db_errmsg(r->db));
        char rel[64];
        snprintf(rel, sizeof rel, "shards/set_%03d.safetensors", s);
        CHECK_OK(shard_commit_set(r->db, r->dir, rel, -1, b, &set, NULL, err, sizeof err), err);
        shard_builder_free(b);
    }
}

/* 3, 4 and 5. */
static void test_sets_and_epochs(const char *dir) {
    char err[2048];
    run_t_ r;
    snprintf(r.dir, sizeof r.dir, "%s", dir);
    KOMA_ASSERT(compat_mkdir_p(dir, err, sizeof err) == 0);
    char dbp[1100];
    snprintf(dbp, sizeof dbp, "%s/koma.db", dir);
    KOMA_ASSERT(db_open(dbp, 0, &r.db, err, sizeof err) == DB_OK);
    enum { SHARDS = 7, PER = 300, B = 70 }; /* B divides the positions: no batch spans two epochs */
    write_sets(&r, SHARDS, PER);
    db_shard_t *list = NULL;
    int32_t n = 0;
    CHECK_OK(db_shards_recent(r.db, 0, &list, &n), db_errmsg(r.db));
    CHECK(n == SHARDS);
    for (int32_t i = 0; i < n; i++) CHECK(list[i].features_version == SHARD_FEATURES_ANY && list[i].games == 0);
    const shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    train_window_t *w = train_window_new(r.dir, &fmt, NULL, NULL, err, sizeof err);
    shard_batch_t *bt = shard_batch_new(&fmt, B, 0, err, sizeof err);
    KOMA_ASSERT(w && bt);
    train_window_set_eager(w, 0); /* as train --from-games */
    int64_t positions = 0;
    int32_t bad = 0;
    CHECK_OK(train_window_select(w, list, n, -1, 0, &positions, &bad, err, sizeof err), err);
    CHECK(positions == SHARDS * PER && bad == 0);

    /* 3: one-hot targets on the move, no reply targets */
    CHECK_OK(train_window_sample(w, train_key(1, 0, 0), B, bt, err, sizeof err), err);
    int onehot = 1;
    for (int32_t j = 0; j < B; j++) {
        uint32_t b0 = bt->policy_offsets[j], e0 = bt->policy_offsets[j + 1];
        onehot &= e0 == b0 + 1 && bt->policy_prob[b0] == 1.0f && bt->opp_offsets[j + 1] == bt->opp_offsets[j];
        onehot &= encode_bit(bt->legal + (size_t)j * ENC_LEGAL_BYTES, bt->policy_label[b0]);
    }
    CHECKF(onehot, "a position set's row trains on a one-hot on its (legal) move, with no opponent reply");

    /* 4: epochs */
    enum { P = SHARDS * PER };
    static int32_t seen[2][P];
    static int64_t order[2][P];
    memset(seen, 0, sizeof seen);
    train_window_set_epoch_order(w, 42);
    int64_t steps = (2 * P + B - 1) / B, g = 0;
    for (int64_t s = 0; s < steps; s++) {
        CHECK_OK(train_window_sample(w, train_window_key(w, 7, -1, s), B, bt, err, sizeof err), err);
        /* the batch is sorted by shard and row: its set of rows is what the epoch order drew */
        for (int32_t j = 0; j < B; j++, g++) {
            if (g >= 2 * P) break;
            int64_t k = (int64_t)lrintf(bt->root_q[j] * 1048576.0f);
            KOMA_ASSERT(k >= 0 && k < P);
            seen[g / P][k]++;
        }
    }
    int once = 1;
    for (int e = 0; e < 2; e++)
        for (int32_t k = 0; k < P; k++) {
            if (seen[e][k] != 1 && once) fprintf(stderr, "epoch %d: position %d drawn %d times\n", e, k, seen[e][k]);
            once &= seen[e][k] == 1;
        }
    CHECKF(once, "every position exactly once in each of two epochs");
    /* the order: the same for the same seed, another in the next epoch (by the first batch's rows) */
    for (int e = 0; e < 2; e++) {
        CHECK_OK(train_window_sample(w, train_window_key(w, 7, -1, e * ((P + B - 1) / B)), B, bt, err, sizeof err),
                 err);
        for (int32_t j = 0; j < B; j++) order[e][j] = lrintf(bt->root_q[j] * 1048576.0f);
    }
    CHECK(memcmp(order[0], order[1], sizeof(int64_t) * B) != 0);
    CHECK_OK(train_window_sample(w, train_window_key(w, 7, -1, 0), B, bt, err, sizeof err), err);
    int same = 1;
    for (int32_t j = 0; j < B; j++) same &= lrintf(bt->root_q[j] * 1048576.0f) == order[0][j];
    CHECK(same);
    train_window_free(w);

    /* 5: damage a registered shard; a new window joins it unread and finds it bad when it first draws from it */
    char path[2400];
    snprintf(path, sizeof path, "%s/%s", r.dir, list[3].path);
    size_t len = 0;
    uint8_t *bytes = (uint8_t *)t_read_file(path, &len);
    KOMA_ASSERT(bytes && len > 100);
    bytes[len - 5] ^= 0x40; /* a bit of the last column: the checksum no longer matches */
    char e2[256];
    CHECK_OK(compat_write_file_durable(path, bytes, len, e2, sizeof e2), e2);
    free(bytes);
    w = train_window_new(r.dir, &fmt, NULL, NULL, err, sizeof err);
    KOMA_ASSERT(w);
    train_window_set_eager(w, 0);
    positions = 0;
    CHECK_OK(train_window_select(w, list, n, -1, 0, &positions, &bad, err, sizeof err), err);
    CHECKF(positions == P && bad == 0, "the damaged shard is not read at select (lazy): %lld positions, %d bad",
           (long long)positions, bad);
    int64_t drawn_bad = 0;
    for (int64_t s = 0; s < 40; s++) {
        CHECK_OK(train_window_sample(w, train_key(3, 0, s), B, bt, err, sizeof err), err);
        for (int32_t j = 0; j < B; j++) {
            int64_t k = (int64_t)lrintf(bt->root_q[j] * 1048576.0f);
            drawn_bad += k >= 3 * PER && k < 4 * PER;
        }
    }
    CHECKF(drawn_bad == 0, "%lld rows drawn from the damaged shard", (long long)drawn_bad);
    /* eager (--verify-shards): found at select */
    train_window_free(w);
    w = train_window_new(r.dir, &fmt, NULL, NULL, err, sizeof err);
    train_window_set_eager(w, 1);
    CHECK_OK(train_window_select(w, list, n, -1, 0, &positions, &bad, err, sizeof err), err);
    CHECK(positions == P - PER && bad == 1);
    train_window_free(w);
    /* a resident window (the device route) over version-2 shards: the host makes the planes instead, said once */
    nn_backend_t *be = nn_backend_cpu_new(1);
    w = train_window_new(r.dir, &fmt, NULL, NULL, err, sizeof err);
    KOMA_ASSERT(be && w);
    if (be->gather_rows) {
        CHECK_OK(train_window_resident(w, be, 0, err, sizeof err), err);
        CHECK_OK(train_window_select(w, list, n, -1, 0, &positions, &bad, err, sizeof err), err);
        CHECK(!train_window_is_resident(w) && positions == P - PER);
        CHECK_OK(train_window_sample(w, train_key(5, 0, 0), B, bt, err, sizeof err), err);
    }
    train_window_free(w);
    be->free(be);
    shard_batch_free(bt);
    free(list);
    db_close(r.db);
}

int main(void) {
    engine_init();
    t_seed(20261207);
    g_pos = malloc(sizeof(small_pos_t) * MAXPOS);
    KOMA_ASSERT(g_pos);
    load_perft();
    int32_t perft = g_npos;
    load_records();
    int32_t records = g_npos - perft;
    load_playouts(t_scaled(40, 4));
    fprintf(stderr, "positions: %d from perft.txt, %d from records, %d from playouts\n", perft, records,
            g_npos - perft - records);
    CHECK(perft >= 10 && records >= 50);
    const char *dir = t_scratch("train_compact");
    test_round_trip();
    test_expand(dir);
    test_policy_q16(dir);
    char run[1024];
    snprintf(run, sizeof run, "%s/run", dir);
    test_sets_and_epochs(run);
    free(g_pos);
    t_rm_rf(dir);
    return t_done("test_train_compact");
}
