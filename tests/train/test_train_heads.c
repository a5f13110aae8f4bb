/* test_train_heads.c - the optional heads through the trainer's options and
 * data (issue 33 item 3):
 *  - the rows w-moves-left and w-opp-policy (defaults 1 and 0.15, set like
 *    any row) reach nn_train_config_t; the net row takes the head suffixes
 *    ("1x16mo") and train_config_check refuses a malformed one;
 *  - train_net_new builds the net the row names, heads included;
 *  - rows of a real run's shard (games played by the engine, written by the
 *    builder and registered) gathered with shard_row_batch carry moves_left
 *    (plies to the game's end) and the opponent's reply (the next row's
 *    policy target), and training on them drives the moves-left error down;
 *    with both weights 0 the heads' output biases never move;
 *  - the resident window (train_window_resident on the CPU backend, the
 *    route a GPU trainer takes; gather_heads) stages the same moves_left and
 *    opponent-reply targets as the host route for the same key (one-hot
 *    replies on the window's move labels included: a shard of fast
 *    searches, where nearly every row has a reply), and a net without the
 *    heads stages none;
 *  - the window's move labels (train_move_labels, from the move and position
 *    columns) are the labels of the moves played, and a shard holding the
 *    move_label column older self-play builds wrote trains the same: the
 *    window's batches equal those of the shard without it, and the
 *    opponent-reply loss on its rows with the column's labels (the old
 *    route) equals the loss with the window's;
 *  - a cycle's means (train_sums): the moves-left MAE and opponent loss
 *    weighted by the rows that have targets, NaN on a plain net's steps. */
#include "train_test.h"
#include "nn/safetensors.h"
#include "tests/data/shard_test.h"
#include "train/loop.h"
#include "train/window.h"

static void set(train_config_t *c, const char *key, const char *value) {
    cfg_opt_t t[TRAIN_CONFIG_NFLAGS];
    int n = train_config_flags(c, t, TRAIN_CONFIG_NFLAGS);
    char err[256];
    CHECKF(cfg_set(t, n, key, value, err, sizeof err) == 0, "%s = %s: %s", key, value, err);
}

static float bias_of(nn_net_t *net, const char *name) {
    int32_t i = nn_net_tensor_find(net, name);
    KOMA_ASSERT(i >= 0);
    return nn_net_tensor_data(net, i)[0];
}

/* Trains tn for steps on the batch; returns the first and last metrics. */
static void train(train_net_t *tn, nn_batch_t *v, int32_t steps, nn_metrics_t *first, nn_metrics_t *last) {
    char err[512];
    for (int32_t s = 0; s < steps; s++)
        CHECKF(nn_train_step(tn->nt, v, s ? last : first, err, sizeof err) == 0, "%s", err);
}

/* A shard of 3 engine games of 20 rows whose odd plies were fast searches
 * (no policy target): replies to the even rows are one-hots on the move labels.
 * t_labels[0..60) get the rows' labels. Returns its run-relative path. */
static const char *add_fast_shard(t_run_t *R, int32_t cycle) {
    t_fast_rows = 1;
    t_labels_n = 0;
    const char *rel = t_add_shard(R, cycle, 3, 20);
    t_fast_rows = 0;
    KOMA_ASSERT(t_labels_n == 60);
    return rel;
}

/* The resident route's staged heads targets equal the host route's batch b. */
static int staged_heads_equal(nn_optim_t *tr, const nn_batch_t *bt, const shard_batch_t *b) {
    nn_train_staging_t st;
    nn_optim_staging(tr, &st, NULL);
    int32_t B = b->B;
    uint32_t n = b->opp_offsets[B];
    return bt->moves_left && bt->opp_offsets && !memcmp(st.moves_left, b->moves_left, sizeof(float) * (size_t)B) &&
           !memcmp(bt->opp_offsets, b->opp_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
           !memcmp(st.opp_offsets, b->opp_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
           !memcmp(st.opp_labels, b->opp_label, sizeof(uint16_t) * n) &&
           !memcmp(st.opp_probs, b->opp_prob, sizeof(float) * n);
}

static void test_resident(train_config_t c, const char *dir) {
    char err[2048];
    t_run_t R;
    t_run_open(&R, dir);
    t_rng = 77;
    for (int k = 1; k <= 2; k++) t_add_shard(&R, k, 3, 30);
    add_fast_shard(&R, 3);
    KOMA_ASSERT(db_writer_flush(R.w, -1) == DB_OK);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
    shard_batch_t *b = shard_batch_new(&T_FMT, 48, 0, err, sizeof err);
    nn_backend_t *be = nn_backend_cpu_new(1);
    KOMA_ASSERT(w && b && be && nl == 3);
    int64_t pos = 0;
    int32_t bad = 0;
    CHECKF(train_window_resident(w, be, 0, err, sizeof err) == 0, "%s", err);
    CHECKF(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err) == 0, "%s", err);
    CHECK(train_window_is_resident(w));
    for (int heads = 1; heads >= 0; heads--) {
        set(&c, "net", heads ? "1x16mo" : "1x16");
        train_net_t tn;
        KOMA_ASSERT(train_net_new(be, &c, 48, &tn, err, sizeof err) == 0);
        int same = 0;
        for (uint64_t key = 1; key <= 4; key++) {
            nn_batch_t bt;
            CHECKF(train_window_gather(w, key, 48, tn.nt, &bt, err, sizeof err) == 0, "%s", err);
            shard_batch_clear(b);
            CHECKF(train_window_sample(w, key, 48, b, err, sizeof err) == 0, "%s", err);
            if (heads) same += staged_heads_equal(tn.nt, &bt, b);
            else same += !bt.moves_left && !bt.opp_offsets;
            nn_metrics_t m;
            CHECKF(nn_train_step(tn.nt, &bt, &m, err, sizeof err) == 0, "%s", err);
            if (heads) CHECK(m.moves_left_positions == 48 && m.opp_positions > 24);
        }
        CHECKF(same == 4, "%s: %d of 4 resident batches stage the host route's heads targets", heads ? "1x16mo" : "1x16",
               same);
        if (heads) { /* the fast shard alone (its 60 rows): half the replies are one-hots, staged as the host's */
            CHECKF(train_window_select(w, list, nl, -1, 60, &pos, &bad, err, sizeof err) == 0 && pos == 60, "%s", err);
            nn_batch_t bt;
            CHECKF(train_window_gather(w, 5, 48, tn.nt, &bt, err, sizeof err) == 0, "%s", err);
            shard_batch_clear(b);
            CHECKF(train_window_sample(w, 5, 48, b, err, sizeof err) == 0, "%s", err);
            int32_t replies = 0;
            for (int32_t i = 0; i < b->B; i++) replies += b->opp_offsets[i + 1] > b->opp_offsets[i];
            /* without one-hots only the rows before a full search (about half) would have one; the rows
             * without any are the games' last rows (3 of 60) */
            CHECKF(replies >= 40 && staged_heads_equal(tn.nt, &bt, b),
                   "fast shard: %d of 48 rows with a reply; staged as the host's: %d", replies,
                   staged_heads_equal(tn.nt, &bt, b));
            CHECKF(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err) == 0, "%s", err);
        }
        train_net_free(&tn);
    }
    train_window_free(w);
    nn_backend_free(be);
    shard_batch_free(b);
    free(list);
    t_run_close(&R);
}

/* The opponent-reply loss of one step of a fresh net (c, seed fixed by train_net_new) on rows [0, n) of sh
 * gathered with the move labels lab. */
static double opp_loss(train_config_t c, nn_backend_t *be, const shard_t *sh, const uint16_t *lab, shard_batch_t *b,
                       int32_t *opp_rows) {
    char err[1024];
    int32_t n = (int32_t)shard_rows(sh);
    int64_t rows[64];
    KOMA_ASSERT(n <= 64 && b->cap >= n);
    for (int32_t i = 0; i < n; i++) rows[i] = i;
    shard_batch_clear(b);
    CHECKF(shard_row_batch_labels(sh, lab, rows, n, b, err, sizeof err) == 0, "%s", err);
    train_net_t tn;
    KOMA_ASSERT(train_net_new(be, &c, n, &tn, err, sizeof err) == 0);
    nn_batch_t v = shard_batch_view(b);
    nn_metrics_t m;
    CHECKF(nn_train_step(tn.nt, &v, &m, err, sizeof err) == 0, "%s", err);
    train_net_free(&tn);
    *opp_rows = m.opp_positions;
    return m.opp_policy_loss;
}

/* The move labels the window derives, and a shard with the move_label column older builds wrote. */
static void test_old_column(train_config_t c, const char *dir) {
    char err[2048], path[1200];
    t_run_t R;
    t_run_open(&R, dir);
    t_rng = 91;
    const char *rel = add_fast_shard(&R, 1);
    uint16_t column[60]; /* the old self-play recorder's column: the labels of the moves played */
    memcpy(column, t_labels, sizeof column);
    KOMA_ASSERT(db_writer_flush(R.w, -1) == DB_OK);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    shard_batch_t *b[2] = {shard_batch_new(&T_FMT, 60, 0, err, sizeof err), shard_batch_new(&T_FMT, 60, 0, err, sizeof err)};
    KOMA_ASSERT(nl == 1 && b[0] && b[1]);
    /* host batches of the shard as written now (no column), then of the same rows with the column added */
    for (int k = 0; k < 2; k++) {
        if (k) {
            st_file_t *f = st_open(path, 0, err, sizeof err);
            CHECKF(f && !st_find(f, "move_label"), "the shard already has a move_label column: %s", err);
            st_close(f);
            t_shard_rewrite_column(path, path, "move_label", ST_DTYPE_U16, 60, column);
        }
        train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
        int64_t pos = 0;
        int32_t bad = 0;
        KOMA_ASSERT(w);
        CHECKF(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err) == 0 && pos == 60 && bad == 0,
               "%s: %lld positions, %d bad", err, (long long)pos, bad);
        CHECKF(train_window_sample(w, 7, 60, b[k], err, sizeof err) == 0, "%s", err);
        train_window_free(w);
    }
    int32_t B = b[0]->B;
    uint32_t n = b[0]->opp_offsets[B];
    CHECKF(b[1]->B == B && !memcmp(b[0]->opp_offsets, b[1]->opp_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
               !memcmp(b[0]->opp_label, b[1]->opp_label, sizeof(uint16_t) * n) &&
               !memcmp(b[0]->opp_prob, b[1]->opp_prob, sizeof(float) * n) &&
               !memcmp(b[0]->policy_offsets, b[1]->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
               !memcmp(b[0]->planes, b[1]->planes, (size_t)B * ENC_PACKED_BYTES),
           "a window's batch of the shard with the move_label column differs from the same shard's without it");
    /* the window's labels are the moves' labels, the old column's values */
    shard_t *sh = shard_open(path, &T_FMT, 0, err, sizeof err);
    KOMA_ASSERT(sh && shard_rows(sh) == 60);
    uint16_t lab[60];
    KOMA_ASSERT(train_move_labels(sh, lab) == 0);
    int same = 0;
    for (int32_t r = 0; r < 60; r++) same += lab[r] == column[r] && lab[r] < SHARD_LABEL_NB;
    CHECKF(same == 60, "%d of 60 rows: the window's label is the move played's", same);
    /* the old route (the column's labels) and the window's train the opponent-reply head the same */
    nn_backend_t *be = nn_backend_cpu_new(1);
    set(&c, "net", "1x16mo");
    int32_t rows_old = 0, rows_new = 0;
    double old = opp_loss(c, be, sh, column, b[0], &rows_old), now = opp_loss(c, be, sh, lab, b[1], &rows_new);
    fprintf(stderr, "-- old shard: opponent-reply loss %.6f on %d rows (the column's labels), %.6f on %d (the "
            "window's)\n", old, rows_old, now, rows_new);
    CHECKF(old == now && rows_old == rows_new && rows_new == 57, "opponent-reply loss %.9g on %d rows (column), "
           "%.9g on %d (window), want 57 rows", old, rows_old, now, rows_new);
    nn_backend_free(be);
    shard_close(sh);
    shard_batch_free(b[0]);
    shard_batch_free(b[1]);
    free(list);
    t_run_close(&R);
}

int main(void) {
    t_scratch("train_heads");
    char err[1024];
    train_config_t c = train_config_default_for(TRAIN_PROGRAM_TRAIN);
    CHECK(c.opt.w_moves_left == 1.0f && c.opt.w_opp_policy == 0.15f);
    set(&c, "w-moves-left", "2.5");
    set(&c, "w-opp-policy", "0.5");
    set(&c, "net", "1x16mo");
    set(&c, "train-threads", "1");
    CHECK(c.opt.w_moves_left == 2.5f && c.opt.w_opp_policy == 0.5f && strcmp(c.net, "1x16mo") == 0);
    CHECKF(train_config_check(&c, err, sizeof err) == 0, "%s", err);
    train_config_t bad = c;
    set(&bad, "net", "1x16om");
    CHECKF(train_config_check(&bad, err, sizeof err) != 0 && strstr(err, "1x16om"), "%s", err);

    /* a run's shard: engine games, their rows through the builder and the writer */
    const char *dir = t_path("run");
    t_run_t R;
    t_run_open(&R, dir);
    t_rng = 5;
    const char *rel = t_add_shard(&R, 1, 6, 20);
    t_run_close(&R);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    shard_t *sh = shard_open(path, &T_FMT, 0, err, sizeof err);
    KOMA_ASSERT(sh);
    int32_t B = 32;
    shard_batch_t *bt = shard_batch_new(&T_FMT, B, 0, err, sizeof err);
    KOMA_ASSERT(bt);
    int64_t rows[32];
    for (int32_t i = 0; i < B; i++) rows[i] = (i * 7) % shard_rows(sh);
    KOMA_ASSERT(shard_row_batch(sh, rows, B, bt, err, sizeof err) == 0);
    nn_batch_t v = shard_batch_view(bt);
    int32_t known = 0, replies = 0;
    for (int32_t i = 0; i < B; i++) known += v.moves_left[i] >= 0, replies += v.opp_offsets[i + 1] > v.opp_offsets[i];
    CHECKF(known == B && replies > B / 2, "%d rows with moves_left, %d with a reply, of %d", known, replies, B);

    nn_backend_t *be = nn_backend_cpu_new(1);
    train_net_t tn;
    c.opt.lr = 0.02f, c.opt.warmup_steps = 5;
    KOMA_ASSERT(train_net_new(be, &c, B, &tn, err, sizeof err) == 0);
    CHECK(nn_net_config(tn.net)->heads == (NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY));
    nn_metrics_t m0, m;
    train(&tn, &v, 150, &m0, &m);
    train_sums_t sums;
    memset(&sums, 0, sizeof sums);
    train_sums_add(&sums, &m0);
    train_sums_add(&sums, &m);
    train_means_t mean = train_sums_mean(&sums);
    double want = (m0.moves_left_mae * m0.moves_left_positions + m.moves_left_mae * m.moves_left_positions) /
                  (m0.moves_left_positions + m.moves_left_positions);
    CHECK(fabs(mean.moves_left_mae - want) < 1e-9 && isfinite(mean.opp_policy_loss));
    nn_metrics_t plain = m;
    plain.moves_left_positions = plain.opp_positions = 0;
    plain.moves_left_mae = plain.opp_policy_loss = NAN;
    memset(&sums, 0, sizeof sums);
    train_sums_add(&sums, &plain);
    mean = train_sums_mean(&sums);
    CHECK(isnan(mean.moves_left_mae) && isnan(mean.opp_policy_loss) && isfinite(mean.policy_loss));
    fprintf(stderr, "-- 1x16mo on a run's rows: moves-left MAE %.1f -> %.1f plies (%d rows), opponent %.3f -> %.3f "
            "(%d rows)\n", m0.moves_left_mae, m.moves_left_mae, m.moves_left_positions, m0.opp_policy_loss,
            m.opp_policy_loss, m.opp_positions);
    CHECK(m.moves_left_positions == B && m.opp_positions == replies);
    CHECK(m.moves_left_mae < 0.5 * m0.moves_left_mae && m.opp_policy_loss < m0.opp_policy_loss);
    train_net_free(&tn);

    /* both weights 0: the heads' output biases (initialised 0, no decay) never move */
    set(&c, "w-moves-left", "0");
    set(&c, "w-opp-policy", "0");
    KOMA_ASSERT(train_net_new(be, &c, B, &tn, err, sizeof err) == 0);
    train(&tn, &v, 5, &m0, &m);
    CHECK(bias_of(tn.net, "moves_left.fc2.bias") == 0.0f && bias_of(tn.net, "opp_policy.out.bias") == 0.0f &&
          bias_of(tn.net, "policy.out.bias") != 0.0f);
    train_net_free(&tn);
    nn_backend_free(be);
    test_resident(c, t_path("resident"));
    test_old_column(c, t_path("old_column"));
    shard_batch_free(bt);
    shard_close(sh);
    t_rm_rf(t_dir);
    return t_done("test_train_heads");
}
