/* test_train_targets.c - the training targets the window shapes (issue 33
 * item 3): the soft policy target (--policy-target-temp: T = 1 gives the
 * bytes of a window without it, T = 2 each row's renormalised square roots,
 * on the host route and on the resident route's gather_rows, set through the
 * trainer's flags and train_window_setup) and policy-surprise weighting
 * (--surprise-weight: s = 0 gives the batches of uniform sampling, bit for
 * bit, as does a window without surprises; s = 0.5 draws each row with the
 * frequency (1 - s) + s * surprise / mean within 5 standard deviations over
 * 128000 draws on a fixed seed, rows without a policy target or a surprise as
 * the mean; s = 1 never draws a row of surprise 0; the resident route draws
 * the same rows). Rows are synthetic and tagged in their first plane bytes. */
#include "train_test.h"
#include "train/loop.h"
#include "train/window.h"

/* Row r of shard k carries the tag k * 65536 + r in planes[0..4). */
static uint32_t tag_of(const uint8_t *planes) {
    return (uint32_t)planes[0] | (uint32_t)planes[1] << 8 | (uint32_t)planes[2] << 16 | (uint32_t)planes[3] << 24;
}

/* The policy target of pattern k (k % 5): none, one-hot, two, three with a zero, four. */
static int32_t pattern(int32_t k, uint16_t *label, float *prob) {
    static const float P[5][4] = {{0}, {1.0f}, {0.64f, 0.36f}, {0.81f, 0.0f, 0.19f}, {0.4f, 0.3f, 0.2f, 0.1f}};
    static const int32_t N[5] = {0, 1, 2, 3, 4};
    k %= 5;
    for (int32_t i = 0; i < N[k]; i++) label[i] = (uint16_t)(100 * k + 7 * i), prob[i] = P[k][i];
    return N[k];
}

/* A shard of one game of n synthetic rows (tags k * 65536 + r), policy pattern
 * r, surprise s[r] (< 0: unknown; NULL: none at all), for cycle. */
static void add_shard(t_run_t *R, int32_t cycle, uint32_t k, int32_t n, const float *s) {
    char err[1024], rel[128];
    shard_builder_t *b = shard_builder_new(&T_FMT, err, sizeof err);
    KOMA_ASSERT(b);
    for (int32_t r = 0; r < n; r++) {
        uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES], pos[SHARD_POSITION_BYTES];
        float hand[ENC_HAND];
        for (int i = 0; i < ENC_PACKED_BYTES; i++) planes[i] = (uint8_t)t_next();
        for (int i = 0; i < ENC_LEGAL_BYTES; i++) legal[i] = (uint8_t)t_next();
        for (int i = 0; i < ENC_HAND; i++) hand[i] = (float)(t_next() % 3);
        uint32_t tag = k * 65536u + (uint32_t)r;
        for (int i = 0; i < 4; i++) planes[i] = (uint8_t)(tag >> (8 * i));
        shard_position_t p;
        memset(&p, 0, sizeof p);
        p.side = (uint8_t)(r & 1);
        p.ply = (uint16_t)(r + 1);
        shard_position_pack(&p, pos);
        uint16_t label[4];
        float prob[4];
        int32_t np = pattern(r, label, prob);
        shard_row_t row = {.planes = planes, .hand = hand, .legal = legal, .policy_label = label, .policy_prob = prob,
                           .policy_n = np, .root_q = 0.5f, .ply = (uint16_t)r, .move = 0, .position = pos,
                           .surprise = s && s[r] >= 0 ? &s[r] : NULL};
        KOMA_ASSERT(shard_builder_add_row(b, &row, err, sizeof err) == 0);
    }
    db_game_t g = {.start_sfen = "startpos", .moves = "", .plies = n, .result = 1, .reason = DB_REASON_RESIGN};
    KOMA_ASSERT(shard_builder_end_game(b, &g, err, sizeof err) == 0);
    t_commit_shard(R, cycle, b, rel, sizeof rel);
}

/* The staging of tr (the CPU backend: host memory) holds what the host route put in b. */
static int staged_equals(nn_optim_t *tr, const nn_batch_t *bt, const shard_batch_t *b) {
    nn_train_staging_t st;
    nn_optim_staging(tr, &st, NULL);
    int32_t B = b->B;
    uint32_t nnz = b->policy_offsets[B];
    return bt->B == B && bt->staged && !memcmp(bt->policy_offsets, b->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
           !memcmp(st.planes, b->planes, (size_t)B * ENC_PACKED_BYTES) &&
           !memcmp(st.hand, b->hand, sizeof(float) * (size_t)B * ENC_HAND) &&
           !memcmp(st.legal, b->legal, (size_t)B * ENC_LEGAL_BYTES) &&
           !memcmp(st.labels, b->policy_label, sizeof(uint16_t) * nnz) &&
           !memcmp(st.probs, b->policy_prob, sizeof(float) * nnz) && !memcmp(st.result, b->result, (size_t)B) &&
           !memcmp(st.q, b->root_q, sizeof(float) * (size_t)B);
}

/* Every byte of two host batches. */
static int batches_equal(const shard_batch_t *a, const shard_batch_t *b) {
    int32_t B = a->B;
    uint32_t nnz = a->policy_offsets[B];
    return a->B == b->B && !memcmp(a->policy_offsets, b->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
           !memcmp(a->planes, b->planes, (size_t)B * ENC_PACKED_BYTES) &&
           !memcmp(a->hand, b->hand, sizeof(float) * (size_t)B * ENC_HAND) &&
           !memcmp(a->legal, b->legal, (size_t)B * ENC_LEGAL_BYTES) &&
           !memcmp(a->policy_label, b->policy_label, sizeof(uint16_t) * nnz) &&
           !memcmp(a->policy_prob, b->policy_prob, sizeof(float) * nnz) && !memcmp(a->result, b->result, (size_t)B) &&
           !memcmp(a->root_q, b->root_q, sizeof(float) * (size_t)B);
}

/* A window over the newest `want` rows of list, after set_policy_temp(temp)
 * unless temp <= 0 and set_surprise_weight(s) unless s < 0. */
static train_window_t *window_over(const t_run_t *R, const db_shard_t *list, int32_t nl, int64_t want,
                                   float temp, float s) {
    char err[1024];
    train_window_t *w = train_window_new(R->dir, &T_FMT, NULL, NULL, err, sizeof err);
    KOMA_ASSERT(w);
    if (temp > 0) KOMA_ASSERT(train_window_set_policy_temp(w, temp, err, sizeof err) == 0);
    if (s >= 0) KOMA_ASSERT(train_window_set_surprise_weight(w, s, err, sizeof err) == 0);
    int64_t pos = 0;
    int32_t bad = 0;
    KOMA_ASSERT(train_window_select(w, list, nl, -1, want, &pos, &bad, err, sizeof err) == 0 && bad == 0);
    return w;
}

/* ---- the soft policy target ---------------------------------------------------- */
static void test_policy_temp(void) {
    char err[2048];
    t_run_t R;
    t_run_open(&R, t_path("temp"));
    t_rng = 11;
    add_shard(&R, 1, 0, 25, NULL);
    add_shard(&R, 2, 1, 30, NULL);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 2);
    shard_batch_t *b0 = shard_batch_new(&T_FMT, 64, 0, err, sizeof err), *b1 = shard_batch_new(&T_FMT, 64, 0, err, sizeof err);
    KOMA_ASSERT(b0 && b1);

    /* T = 1 (set explicitly) is the window without the option, byte for byte, and the stored targets */
    train_window_t *w0 = window_over(&R, list, nl, 0, 0, -1), *w1 = window_over(&R, list, nl, 0, 1.0f, -1);
    int same = 0, stored = 0, rows = 0;
    for (int k = 0; k < 10; k++) {
        CHECK_OK(train_window_sample(w0, train_key(5, 0, k), 64, b0, err, sizeof err), err);
        CHECK_OK(train_window_sample(w1, train_key(5, 0, k), 64, b1, err, sizeof err), err);
        same += batches_equal(b0, b1);
        for (int32_t i = 0; i < b1->B; i++, rows++) {
            uint16_t label[4];
            float prob[4];
            int32_t np = pattern((int32_t)(tag_of(b1->planes + (size_t)i * ENC_PACKED_BYTES) & 0xffff), label, prob);
            uint32_t at = b1->policy_offsets[i];
            stored += (int32_t)(b1->policy_offsets[i + 1] - at) == np &&
                      !memcmp(b1->policy_prob + at, prob, sizeof(float) * (size_t)np) &&
                      !memcmp(b1->policy_label + at, label, sizeof(uint16_t) * (size_t)np);
        }
    }
    CHECK(train_window_set_policy_temp(w1, 1.0f, err, sizeof err) != 0 && strstr(err, "after"));
    CHECKF(same == 10 && stored == rows, "T = 1: %d of 10 batches as without the option, %d of %d rows as stored",
           same, stored, rows);
    train_window_free(w0);
    train_window_free(w1);

    /* T = 2 through the trainer's flag and train_window_setup, on both routes */
    train_config_t cfg = t_tiny_config(4);
    cfg.batch = 64;
    cfg_opt_t opts[TRAIN_CONFIG_NFLAGS];
    int n = train_config_flags(&cfg, opts, TRAIN_CONFIG_NFLAGS);
    CHECK(cfg.policy_temp == 1.0 && cfg.surprise_weight == 0.0); /* both off by default */
    char *argv[] = {"prog", "--policy-target-temp", "2"};
    int npos = 0;
    CHECK_OK(cfg_parse(opts, n, 3, argv, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err), err);
    CHECK(cfg.policy_temp == 2.0);
    char *bad[] = {"prog", "--policy-target-temp", "0"};
    CHECKF(cfg_parse(opts, n, 3, bad, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_ERROR &&
               strstr(err, "policy-target-temp"), "%s", err);
    nn_backend_t *be = nn_backend_cpu_new(1);
    train_net_t tn;
    KOMA_ASSERT(be);
    CHECK_OK(train_net_new(be, &cfg, cfg.batch, &tn, err, sizeof err), err);
    for (int resident = 0; resident <= 1; resident++) {
        train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
        KOMA_ASSERT(w);
        snprintf(cfg.device_window, sizeof cfg.device_window, resident ? "on" : "off");
        CHECK(train_window_setup(&cfg, w, be, 1, err, sizeof err) == resident);
        int64_t pos = 0;
        int32_t nbad = 0;
        CHECK_OK(train_window_select(w, list, nl, -1, 0, &pos, &nbad, err, sizeof err), err);
        CHECK(train_window_set_policy_temp(w, 3.0f, err, sizeof err) != 0 && strstr(err, "after"));
        int right = 0, total = 0, staged = 0, labels = 0;
        double worst = 0;
        for (int k = 0; k < 10; k++) {
            CHECK_OK(train_window_sample(w, train_key(5, 0, k), 64, b1, err, sizeof err), err);
            for (int32_t i = 0; i < b1->B; i++, total++) {
                uint16_t label[4];
                float prob[4];
                int32_t np = pattern((int32_t)(tag_of(b1->planes + (size_t)i * ENC_PACKED_BYTES) & 0xffff), label, prob);
                uint32_t at = b1->policy_offsets[i];
                double sum = 0;
                for (int32_t j = 0; j < np; j++) sum += sqrt((double)prob[j]);
                int ok = (int32_t)(b1->policy_offsets[i + 1] - at) == np;
                labels += ok && !memcmp(b1->policy_label + at, label, sizeof(uint16_t) * (size_t)np);
                for (int32_t j = 0; ok && j < np; j++) {
                    double want = sqrt((double)prob[j]) / sum, d = fabs(b1->policy_prob[at + j] - want);
                    worst = d > worst ? d : worst;
                    ok &= d <= 1e-6 * want + 1e-9 && (prob[j] > 0 || b1->policy_prob[at + j] == 0.0f);
                }
                right += ok;
            }
            if (resident) {
                nn_batch_t bt;
                CHECK_OK(train_window_gather(w, train_key(5, 0, k), 64, tn.nt, &bt, err, sizeof err), err);
                staged += staged_equals(tn.nt, &bt, b1);
            }
        }
        CHECKF(right == total && labels == total, "%s route, T = 2: %d of %d rows are their renormalised square roots "
               "(worst %.3g), %d keep their labels", resident ? "resident" : "host", right, total, worst, labels);
        if (resident) CHECKF(staged == 10, "%d of 10 gathered batches equal the host route's", staged);
        train_window_free(w);
    }
    /* 0.64/0.36 -> 0.8/0.6 -> 4/7, 3/7: the example by hand */
    train_window_t *w = window_over(&R, list, nl, 0, 2.0f, -1);
    int seen = 0;
    for (int k = 0; k < 5 && !seen; k++) {
        CHECK_OK(train_window_sample(w, train_key(6, 0, k), 64, b1, err, sizeof err), err);
        for (int32_t i = 0; i < b1->B && !seen; i++)
            if ((tag_of(b1->planes + (size_t)i * ENC_PACKED_BYTES) & 0xffff) % 5 == 2) {
                const float *p = b1->policy_prob + b1->policy_offsets[i];
                seen = 1;
                CHECKF(fabsf(p[0] - 4.0f / 7.0f) < 1e-6f && fabsf(p[1] - 3.0f / 7.0f) < 1e-6f, "%.9g %.9g", p[0], p[1]);
            }
    }
    CHECK(seen);
    train_window_free(w);
    w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
    CHECK(train_window_set_policy_temp(w, 0.05f, err, sizeof err) != 0 && strstr(err, "outside"));
    CHECK(train_window_set_policy_temp(w, NAN, err, sizeof err) != 0 && strstr(err, "outside"));
    train_window_free(w);
    train_net_free(&tn);
    nn_backend_free(be);
    shard_batch_free(b0);
    shard_batch_free(b1);
    free(list);
    t_run_close(&R);
}

/* ---- policy-surprise weighting ----------------------------------------------------- */
enum { S0_ROWS = 40, S1_ROWS = 36, S0_CUT = 10 }; /* the window: shard 0's last 30 rows + shard 1 */

/* Surprise of row r of shard k: some unknown, some 0, the rest spread over two decades. */
static float surprise_of(uint32_t k, int32_t r) {
    if (r % 7 == 3) return -1.0f;
    if (r % 11 == 4) return 0.0f;
    return 0.05f * (float)(1 + (r * 13 + (int32_t)k * 5) % 29);
}

/* Expected draw probability of every window row (index: tag's shard * S0_ROWS + row), by the formula. */
static void expected(double s, double *p) {
    double sum = 0;
    int known = 0;
    for (uint32_t k = 0; k < 2; k++)
        for (int32_t r = k ? 0 : S0_CUT; r < (k ? S1_ROWS : S0_ROWS); r++) {
            float x = surprise_of(k, r);
            if (r % 5 != 0 && x >= 0) sum += x, known++; /* pattern 0: no policy target */
        }
    double mean = sum / known, tot = 0;
    for (int i = 0; i < 2 * S0_ROWS; i++) p[i] = 0;
    for (uint32_t k = 0; k < 2; k++)
        for (int32_t r = k ? 0 : S0_CUT; r < (k ? S1_ROWS : S0_ROWS); r++) {
            float x = surprise_of(k, r);
            double wgt = r % 5 != 0 && x >= 0 ? (1 - s) + s * x / mean : 1.0;
            p[k * S0_ROWS + (uint32_t)r] = wgt;
            tot += wgt;
        }
    for (int i = 0; i < 2 * S0_ROWS; i++) p[i] /= tot;
}

static void test_surprise(void) {
    char err[2048];
    t_run_t R;
    t_run_open(&R, t_path("surprise"));
    t_rng = 12;
    float s0[S0_ROWS], s1[S1_ROWS];
    for (int32_t r = 0; r < S0_ROWS; r++) s0[r] = surprise_of(0, r);
    for (int32_t r = 0; r < S1_ROWS; r++) s1[r] = surprise_of(1, r);
    add_shard(&R, 1, 0, S0_ROWS, s0);
    add_shard(&R, 2, 1, S1_ROWS, s1);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 2);
    int64_t want = S0_ROWS + S1_ROWS - S0_CUT;
    shard_batch_t *b0 = shard_batch_new(&T_FMT, 64, 0, err, sizeof err), *b1 = shard_batch_new(&T_FMT, 64, 0, err, sizeof err);
    KOMA_ASSERT(b0 && b1);

    /* s = 0: today's uniform batches, bit for bit, though the shards have surprises */
    train_window_t *wu = window_over(&R, list, nl, want, 0, -1), *wz = window_over(&R, list, nl, want, 0, 0.0f);
    int same = 0;
    for (int k = 0; k < 20; k++) {
        CHECK_OK(train_window_sample(wu, train_key(8, 1, k), 64, b0, err, sizeof err), err);
        CHECK_OK(train_window_sample(wz, train_key(8, 1, k), 64, b1, err, sizeof err), err);
        same += batches_equal(b0, b1);
    }
    CHECKF(same == 20, "s = 0: %d of 20 batches are uniform sampling's", same);
    train_window_free(wz);

    /* s = 0.5: frequencies match the weights; nothing outside the window is drawn */
    enum { BATCHES = 2000 };
    for (int pass = 0; pass < 2; pass++) {
        double s = pass == 0 ? 0.5 : 1.0;
        train_window_t *w = window_over(&R, list, nl, want, 0, (float)s);
        double p[2 * S0_ROWS];
        expected(s, p);
        int64_t hits[2 * S0_ROWS] = {0}, outside = 0, total = 0;
        for (int k = 0; k < BATCHES; k++) {
            CHECK_OK(train_window_sample(w, train_key(9, pass, k), 64, b1, err, sizeof err), err);
            for (int32_t i = 0; i < b1->B; i++, total++) {
                uint32_t tag = tag_of(b1->planes + (size_t)i * ENC_PACKED_BYTES), k2 = tag >> 16, r = tag & 0xffff;
                if (k2 > 1 || r >= (uint32_t)(k2 ? S1_ROWS : S0_ROWS) || (k2 == 0 && r < (uint32_t)S0_CUT)) outside++;
                else hits[k2 * S0_ROWS + r]++;
            }
        }
        int off = 0, zero_drawn = 0;
        double worst = 0;
        for (int i = 0; i < 2 * S0_ROWS; i++) {
            if (p[i] == 0) continue;
            double e = p[i] * (double)total, sd = sqrt(e * (1 - p[i])), z = fabs((double)hits[i] - e) / sd;
            worst = z > worst ? z : worst;
            off += z > 5;
        }
        for (uint32_t k = 0; k < 2; k++) /* s = 1: a row of surprise 0 weighs 0 */
            for (int32_t r = k ? 0 : S0_CUT; r < (k ? S1_ROWS : S0_ROWS); r++)
                if (r % 5 != 0 && surprise_of(k, r) == 0.0f) zero_drawn += hits[k * S0_ROWS + (uint32_t)r] > 0;
        fprintf(stderr, "s = %g: %lld draws, the worst row %.2f standard deviations from its weight\n", s,
                (long long)total, worst);
        CHECKF(outside == 0 && off == 0, "s = %g: %lld draws outside the window, %d rows beyond 5 standard deviations "
               "(worst %.2f)", s, (long long)outside, off, worst);
        if (s == 1.0) CHECKF(zero_drawn == 0, "s = 1: %d rows of surprise 0 drawn", zero_drawn);
        /* the weighting moves the draws: the most surprising row is drawn well above uniform */
        if (pass == 0) {
            int top = 0;
            for (int i = 1; i < 2 * S0_ROWS; i++) top = p[i] > p[top] ? i : top;
            CHECKF((double)hits[top] > 1.25 * (double)total / (double)want, "the most surprising row: %lld draws, "
                   "uniform %.0f", (long long)hits[top], (double)total / (double)want);
        }
        train_window_free(w);
    }

    /* the resident route draws the same rows as the host route */
    train_config_t cfg = t_tiny_config(4);
    cfg.batch = 64;
    cfg.surprise_weight = 0.5;
    snprintf(cfg.device_window, sizeof cfg.device_window, "on");
    nn_backend_t *be = nn_backend_cpu_new(1);
    train_net_t tn;
    KOMA_ASSERT(be);
    CHECK_OK(train_net_new(be, &cfg, cfg.batch, &tn, err, sizeof err), err);
    train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
    KOMA_ASSERT(w);
    CHECK(train_window_setup(&cfg, w, be, 1, err, sizeof err) == 1);
    CHECK_OK(train_window_select(w, list, nl, -1, want, &(int64_t){0}, &(int32_t){0}, err, sizeof err), err);
    int staged = 0, differs = 0;
    for (int k = 0; k < 10; k++) {
        nn_batch_t bt;
        CHECK_OK(train_window_sample(w, train_key(8, 1, k), 64, b1, err, sizeof err), err);
        CHECK_OK(train_window_gather(w, train_key(8, 1, k), 64, tn.nt, &bt, err, sizeof err), err);
        staged += staged_equals(tn.nt, &bt, b1);
        CHECK_OK(train_window_sample(wu, train_key(8, 1, k), 64, b0, err, sizeof err), err);
        differs += !batches_equal(b0, b1);
    }
    CHECKF(staged == 10 && differs == 10, "s = 0.5: %d of 10 gathered batches equal the host route's, %d of 10 differ "
           "from uniform sampling's", staged, differs);
    CHECK(train_window_set_surprise_weight(w, 1.5f, err, sizeof err) != 0 && strstr(err, "outside"));
    CHECK(train_window_set_surprise_weight(w, -0.1f, err, sizeof err) != 0 && strstr(err, "outside"));
    train_window_free(w);
    train_window_free(wu);
    train_net_free(&tn);
    nn_backend_free(be);
    free(list);
    t_run_close(&R);

    /* shards without surprises (older shards): s = 0.5 samples uniformly, bit for bit */
    t_run_open(&R, t_path("nosurprise"));
    add_shard(&R, 1, 0, 30, NULL);
    add_shard(&R, 2, 1, 30, NULL);
    nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 2);
    wu = window_over(&R, list, nl, 0, 0, -1);
    w = window_over(&R, list, nl, 0, 0, 0.5f);
    same = 0;
    for (int k = 0; k < 10; k++) {
        CHECK_OK(train_window_sample(wu, train_key(4, 1, k), 64, b0, err, sizeof err), err);
        CHECK_OK(train_window_sample(w, train_key(4, 1, k), 64, b1, err, sizeof err), err);
        same += batches_equal(b0, b1);
    }
    CHECKF(same == 10, "no surprises, s = 0.5: %d of 10 batches are uniform sampling's", same);
    train_window_free(w);
    train_window_free(wu);
    shard_batch_free(b0);
    shard_batch_free(b1);
    free(list);
    t_run_close(&R);
}

int main(void) {
    t_scratch("train_targets");
    test_policy_temp();
    test_surprise();
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_targets");
}
