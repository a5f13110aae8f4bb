/* test_train_window.c - the window formula, steps per cycle, the trainer's
 * flags (table, --config file, command line wins, errors naming the flag),
 * train's and selfplay's defaults (the rows' two columns), and
 * train/window.c: the most recent rows only (tail of the oldest shard),
 * cycle filter, deterministic sampling, every window row reachable and
 * nothing outside the window ever drawn, shards closed when they leave;
 * the resident window (train_window_resident on the CPU backend: the same
 * code path as on a GPU, gather_rows being the CPU twin): batches bit for bit
 * the host route's, copies freed as shards leave, a cap that is too small
 * ending residency with a log line that says so, a failing gather failing
 * the step, and the trainer's --device-window choice. */
#include "train_test.h"
#include "nn/fault.h"
#include "train/loop.h"
#include "train/window.h"

static void test_formula(void) {
    train_config_t c = train_config_default();
    c.window_min = 1000;
    c.window_max = 5000;
    c.window_alpha = 0.75;
    c.window_beta = 0.4;
    CHECK(train_window_size(&c, 0) == 0);
    CHECK(train_window_size(&c, 500) == 500);   /* everything while N <= min */
    CHECK(train_window_size(&c, 1000) == 1000);
    /* N = 16000: 1000 * (1 + 0.4 * (16^0.75 - 1) / 0.75) = 1000 * (1 + 0.4 * 7 / 0.75) = 4733.33 */
    CHECK(train_window_size(&c, 16000) == 4733);
    CHECK(train_window_size(&c, 1000000) == 5000); /* capped */
    c.window_max = 0;                               /* no cap */
    CHECK(train_window_size(&c, 1000000) > 5000);
    /* monotone and never above N */
    int64_t prev = 0;
    int ok = 1;
    for (int64_t n = 1; n < 200000; n += 997) {
        int64_t w = train_window_size(&c, n);
        ok &= w >= prev && w <= n;
        prev = w;
    }
    CHECK(ok);

    c.batch = 128;
    c.samples_per_position = 4;
    c.min_steps_per_cycle = 10;
    c.max_steps_per_cycle = 100;
    CHECK(train_steps_for(&c, 0) == 10);
    CHECK(train_steps_for(&c, 320) == 10);   /* ceil(4*320/128) = 10 */
    CHECK(train_steps_for(&c, 353) == 12);   /* ceil(1412/128) = 12 */
    CHECK(train_steps_for(&c, 1000000) == 100);
}

static void test_flags(void) {
    char err[1024];
    char ini[900];
    snprintf(ini, sizeof ini, "%s", t_path("flags.ini"));
    FILE *f = fopen(ini, "w");
    KOMA_ASSERT(f);
    fprintf(f, "batch = 64\nlr = 0.1\nnet = 10x128\nlr-schedule = step\nwindow-min = 5000\n");
    fclose(f);
    train_config_t c = train_config_default();
    cfg_opt_t opts[TRAIN_CONFIG_NFLAGS + 2];
    int n = train_config_flags(&c, opts, TRAIN_CONFIG_NFLAGS + 2);
    CHECK(n == TRAIN_CONFIG_NFLAGS);
    CHECK(train_config_flags(&c, opts, 3) == 3);
    n = train_config_flags(&c, opts, TRAIN_CONFIG_NFLAGS);
    char *argv[] = {"prog", "--config", ini, "--lr", "0.3", "--q-mix=0.5", "--no-nesterov", "--train-seed", "99"};
    int npos = 0;
    FILE *devnull = fopen(t_path("help.txt"), "w");
    int rc = cfg_parse(opts, n, 9, argv, 1, NULL, 0, &npos, "usage", devnull, err, sizeof err);
    fclose(devnull);
    CHECK_OK(rc, err);
    CHECK(train_config_flag_given(&c, "lr") && train_config_flag_given(&c, "batch") &&
          !train_config_flag_given(&c, "w-value") && !train_config_flag_given(&c, "lr-total-steps"));
    CHECK_OK(train_config_check(&c, err, sizeof err), err);
    CHECK(c.batch == 64 && !strcmp(c.net, "10x128") && c.window_min == 5000 && c.window_max == 500000);
    CHECK(fabsf(c.opt.lr - 0.3f) < 1e-7f); /* the command line wins over the file */
    CHECK(fabsf(c.opt.q_mix - 0.5f) < 1e-7f && c.opt.nesterov == 0 && c.seed == 99);
    CHECK(c.opt.schedule == NN_SCHED_STEP);
    CHECK(c.opt.w_value == 1.0f && c.opt.total_steps == 100000);
    /* the rows print what they hold, as --help and the stored config show it */
    char *dump = cfg_dump_string(opts, n);
    CHECKF(dump && strstr(dump, "lr = 0.3\n") && strstr(dump, "lr-schedule = step\n") &&
               strstr(dump, "train-seed = 99\n") && strstr(dump, "nesterov = false\n") && strstr(dump, "net = 10x128\n"),
           "dump: %s", dump ? dump : "-");
    free(dump);
    /* errors name the flag */
    train_config_t d = train_config_default();
    n = train_config_flags(&d, opts, TRAIN_CONFIG_NFLAGS);
    char *bad1[] = {"prog", "--net", "6y64"};
    CHECK(cfg_parse(opts, n, 3, bad1, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_OK);
    CHECK(train_config_check(&d, err, sizeof err) != 0 && strstr(err, "net") && strstr(err, "6y64"));
    d = train_config_default();
    n = train_config_flags(&d, opts, TRAIN_CONFIG_NFLAGS);
    char *bad2[] = {"prog", "--lr-schedule", "linear"};
    CHECKF(cfg_parse(opts, n, 3, bad2, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_ERROR &&
               strstr(err, "lr-schedule") && strstr(err, "'linear' is not constant, cosine or step"),
           "%s", err);
    CHECK(d.opt.schedule == NN_SCHED_COSINE); /* a refused value leaves the old one */
    char *bad5[] = {"prog", "--net", "123456789012345678901234567890123x4"};
    CHECKF(cfg_parse(opts, n, 3, bad5, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_ERROR &&
               strstr(err, "net") && strstr(err, "longer than 31"),
           "%s", err);
    char *bad6[] = {"prog", "--activation", "GELU"};
    CHECKF(cfg_parse(opts, n, 3, bad6, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_ERROR &&
               strstr(err, "'GELU' is not relu or silu"),
           "%s", err);
    char *ok7[] = {"prog", "--activation", "SiLU", "--train-backend", "CPU"};
    CHECK(cfg_parse(opts, n, 5, ok7, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_OK &&
          !strcmp(d.activation, "silu") && !strcmp(d.backend, "cpu"));
    d = train_config_default();
    n = train_config_flags(&d, opts, TRAIN_CONFIG_NFLAGS);
    char *bad3[] = {"prog", "--batch", "0"};
    CHECK(cfg_parse(opts, n, 3, bad3, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_ERROR &&
          strstr(err, "batch"));
    d = train_config_default();
    n = train_config_flags(&d, opts, TRAIN_CONFIG_NFLAGS);
    char *bad4[] = {"prog", "--window-min", "100", "--window-max", "50"};
    CHECK(cfg_parse(opts, n, 5, bad4, 1, NULL, 0, &npos, "usage", stdout, err, sizeof err) == CFG_OK);
    CHECK(train_config_check(&d, err, sizeof err) != 0 && strstr(err, "window"));
}

/* Two default columns: `train`'s, and `selfplay`'s where it differs (a
 * small net, batch and step count, one thread, half a sample per new
 * position, lr 0.06); every other row the same; a selfplay table's rows
 * carry selfplay's defaults, so cfg_defaults on it restores them. */
static void test_selfplay_defaults(void) {
    train_config_t t = train_config_default(), s = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    CHECK(!strcmp(t.net, "6x64") && t.batch == 128 && t.threads == 0 && t.samples_per_position == 4 &&
          t.max_steps_per_cycle == 2000 && t.opt.lr == nn_train_config_default().lr);
    CHECKF(!strcmp(s.net, "4x32") && s.batch == 64 && s.threads == 1 && s.samples_per_position == 0.5 &&
               s.max_steps_per_cycle == 200 && s.opt.lr == 0.06f,
           "selfplay's trainer defaults: %s batch %d threads %d samples %g steps %lld lr %.9g", s.net, s.batch,
           s.threads, s.samples_per_position, (long long)s.max_steps_per_cycle, s.opt.lr);
    cfg_opt_t ot[TRAIN_CONFIG_NFLAGS], os[TRAIN_CONFIG_NFLAGS];
    int n = train_config_flags(&t, ot, TRAIN_CONFIG_NFLAGS);
    CHECK(train_config_flags(&s, os, TRAIN_CONFIG_NFLAGS) == n);
    int differ = 0;
    for (int i = 0; i < n; i++) {
        char a[CFG_STRING_MAX + 8], b[CFG_STRING_MAX + 8];
        cfg_value_string(&ot[i], a, sizeof a);
        cfg_value_string(&os[i], b, sizeof b);
        differ += strcmp(a, b) != 0;
    }
    CHECKF(differ == 6, "%d rows differ between train's and selfplay's defaults, 6 expected", differ);
    s.batch = 7;
    snprintf(s.net, sizeof s.net, "2x8");
    cfg_defaults(os, n);
    CHECK(s.batch == 64 && !strcmp(s.net, "4x32"));
}

/* The window over 3 shards of cycles 1, 1, 2. */
static void test_window(void) {
    char err[1024];
    t_run_t R;
    t_run_open(&R, t_path("run"));
    t_rng = 5;
    const char *rel[3];
    /* rows from ply 4 on: all positions distinct (checked below) */
    rel[0] = t_add_shard_from(&R, 1, 2, 14, 4);
    rel[1] = t_add_shard_from(&R, 1, 2, 14, 4);
    rel[2] = t_add_shard_from(&R, 2, 2, 14, 4);
    KOMA_ASSERT(db_writer_flush(R.w, -1) == DB_OK);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 3);
    int64_t rows[3];
    for (int i = 0; i < 3; i++) rows[i] = list[i].rows;
    CHECK(!strcmp(list[0].path, rel[0]) && !strcmp(list[2].path, rel[2]));
    CHECK(train_window_count(list, nl, ENC_FEATURES_VERSION, -1, -1) == rows[0] + rows[1] + rows[2]);
    CHECK(train_window_count(list, nl, ENC_FEATURES_VERSION, 1, 2) == rows[2]);
    CHECK(train_window_count(list, nl, ENC_FEATURES_VERSION + 1, -1, -1) == 0);

    train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
    KOMA_ASSERT(w);
    shard_batch_t *b1 = shard_batch_new(&T_FMT, 64, 0, err, sizeof err);
    shard_batch_t *b2 = shard_batch_new(&T_FMT, 64, 0, err, sizeof err);
    KOMA_ASSERT(b1 && b2);
    /* empty window: a clear error */
    CHECK(train_window_sample(w, 1, 8, b1, err, sizeof err) != 0 && strstr(err, "empty"));

    /* cycle <= 1, the last 5 rows of shard 0 plus all of shard 1 */
    int64_t pos = 0;
    int32_t bad = 0;
    int64_t want = rows[1] + 5;
    CHECK_OK(train_window_select(w, list, nl, 1, want, &pos, &bad, err, sizeof err), err);
    CHECK(pos == want && bad == 0 && train_window_shards(w) == 2);
    /* which (shard, row) does each batch row come from? match on the position column */
    char p0[1000], p1[1000], p2[1000];
    snprintf(p0, sizeof p0, "%s/%s", R.dir, rel[0]);
    snprintf(p1, sizeof p1, "%s/%s", R.dir, rel[1]);
    snprintf(p2, sizeof p2, "%s/%s", R.dir, rel[2]);
    shard_t *s0 = shard_open(p0, &T_FMT, 0, err, sizeof err), *s1 = shard_open(p1, &T_FMT, 0, err, sizeof err),
            *s2 = shard_open(p2, &T_FMT, 0, err, sizeof err);
    KOMA_ASSERT(s0 && s1 && s2);
    int dup = 0; /* no two rows share their planes */
    const shard_t *ss[3] = {s0, s1, s2};
    for (int a = 0; a < 3; a++)
        for (int bb = 0; bb <= a; bb++)
            for (int64_t i = 0; i < rows[a]; i++)
                for (int64_t j = 0; j < (a == bb ? i : rows[bb]); j++)
                    dup += !memcmp(shard_columns(ss[a])->planes + i * ENC_PACKED_BYTES,
                                   shard_columns(ss[bb])->planes + j * ENC_PACKED_BYTES, ENC_PACKED_BYTES);
    CHECK(dup == 0);
    int64_t hits0[256] = {0}, hits1[256] = {0};
    int outside = 0, unmatched = 0;
    for (int k = 0; k < 200; k++) {
        CHECK_OK(train_window_sample(w, train_key(9, 1, k), 64, b1, err, sizeof err), err);
        for (int32_t r = 0; r < b1->B; r++) {
            const uint8_t *pl = b1->planes + (size_t)r * ENC_PACKED_BYTES;
            int found = 0;
            for (int64_t j = 0; j < rows[1] && !found; j++)
                if (!memcmp(pl, shard_columns(s1)->planes + j * ENC_PACKED_BYTES, ENC_PACKED_BYTES)) hits1[j]++, found = 1;
            for (int64_t j = rows[0] - 5; j < rows[0] && !found; j++)
                if (!memcmp(pl, shard_columns(s0)->planes + j * ENC_PACKED_BYTES, ENC_PACKED_BYTES)) hits0[j]++, found = 1;
            if (!found) {
                for (int64_t j = 0; j < rows[0] - 5; j++)
                    if (!memcmp(pl, shard_columns(s0)->planes + j * ENC_PACKED_BYTES, ENC_PACKED_BYTES)) outside++;
                for (int64_t j = 0; j < rows[2]; j++)
                    if (!memcmp(pl, shard_columns(s2)->planes + j * ENC_PACKED_BYTES, ENC_PACKED_BYTES)) outside++;
                unmatched++;
            }
        }
    }
    CHECK(unmatched == 0 && outside == 0);
    int64_t minh = INT64_MAX, maxh = 0;
    for (int64_t j = 0; j < rows[1]; j++) minh = hits1[j] < minh ? hits1[j] : minh, maxh = hits1[j] > maxh ? hits1[j] : maxh;
    for (int64_t j = rows[0] - 5; j < rows[0]; j++) minh = hits0[j] < minh ? hits0[j] : minh, maxh = hits0[j] > maxh ? hits0[j] : maxh;
    double expect = 200.0 * 64 / (double)want;
    fprintf(stderr, "window of %" PRId64 " rows: hits per row %" PRId64 "..%" PRId64 " (expected %.0f each)\n", want,
            minh, maxh, expect);
    CHECK(minh > 0 && (double)minh > 0.5 * expect && (double)maxh < 1.6 * expect);
    /* same key, same batch; another key, another batch */
    CHECK_OK(train_window_sample(w, 12345, 64, b1, err, sizeof err), err);
    CHECK_OK(train_window_sample(w, 12345, 64, b2, err, sizeof err), err);
    CHECK(b1->B == 64 && !memcmp(b1->planes, b2->planes, 64 * ENC_PACKED_BYTES) &&
          !memcmp(b1->result, b2->result, 64) && b1->policy_offsets[64] == b2->policy_offsets[64]);
    CHECK_OK(train_window_sample(w, 12346, 64, b2, err, sizeof err), err);
    CHECK(memcmp(b1->planes, b2->planes, 64 * ENC_PACKED_BYTES) != 0);
    CHECK(train_key(1, 2, 3) != train_key(1, 3, 2) && train_key(1, 2, 3) == train_key(1, 2, 3));
    /* a batch larger than the buffers is refused */
    CHECK(train_window_sample(w, 1, 65, b1, err, sizeof err) != 0);

    /* all cycles, all rows: the window grows to the newest shard */
    CHECK_OK(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err), err);
    CHECK(pos == rows[0] + rows[1] + rows[2] && train_window_shards(w) == 3);
    /* only the newest shard: the others are closed (their files may go) */
    CHECK_OK(train_window_select(w, list, nl, -1, rows[2], &pos, &bad, err, sizeof err), err);
    CHECK(pos == rows[2] && train_window_shards(w) == 1);

    shard_close(s0);
    shard_close(s1);
    shard_close(s2);
    shard_batch_free(b1);
    shard_batch_free(b2);
    train_window_free(w);
    free(list);
    t_run_close(&R);
}

/* The staging of tr (the CPU backend: host memory) holds what the host route put in b. */
static int staged_equals(nn_optim_t *tr, const nn_batch_t *bt, const shard_batch_t *b) {
    nn_train_staging_t st;
    nn_optim_staging(tr, &st, NULL);
    int32_t B = b->B;
    uint32_t nnz = b->policy_offsets[B];
    return bt->B == B && bt->staged && !memcmp(bt->policy_offsets, b->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
           !memcmp(st.offsets, b->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1)) &&
           !memcmp(st.planes, b->planes, (size_t)B * ENC_PACKED_BYTES) &&
           !memcmp(st.hand, b->hand, sizeof(float) * (size_t)B * ENC_HAND) &&
           !memcmp(st.legal, b->legal, (size_t)B * ENC_LEGAL_BYTES) &&
           !memcmp(st.labels, b->policy_label, sizeof(uint16_t) * nnz) &&
           !memcmp(st.probs, b->policy_prob, sizeof(float) * nnz) && !memcmp(st.result, b->result, (size_t)B) &&
           !memcmp(st.q, b->root_q, sizeof(float) * (size_t)B);
}

static void test_resident(void) {
    char err[2048];
    t_run_t R;
    t_run_open(&R, t_path("resident"));
    t_rng = 77;
    for (int c = 1; c <= 3; c++) t_add_shard(&R, c, 3, 40);
    KOMA_ASSERT(db_writer_flush(R.w, -1) == DB_OK);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 3);
    t_log_t lg;
    memset(&lg, 0, sizeof lg);
    compat_mutex_init(&lg.mu);
    train_window_t *w = train_window_new(R.dir, &T_FMT, t_log_fn, &lg, err, sizeof err);
    shard_batch_t *b = shard_batch_new(&T_FMT, 64, 0, err, sizeof err);
    nn_backend_t *be = nn_backend_cpu_new(1);
    KOMA_ASSERT(w && b && be);
    train_config_t cfg = t_tiny_config(4);
    cfg.batch = 64;
    train_net_t tn;
    CHECK_OK(train_net_new(be, &cfg, cfg.batch, &tn, err, sizeof err), err);

    /* --device-window: auto stays on the host on a CPU backend, on goes resident, off not */
    snprintf(cfg.device_window, sizeof cfg.device_window, "auto");
    CHECK(train_window_setup(&cfg, w, be, 1, err, sizeof err) == 0);
    snprintf(cfg.device_window, sizeof cfg.device_window, "off");
    CHECK(train_window_setup(&cfg, w, be, 1, err, sizeof err) == 0);
    snprintf(cfg.device_window, sizeof cfg.device_window, "on");
    CHECK(train_window_setup(&cfg, w, be, 1, err, sizeof err) == 1);
    /* a backend without gather_rows is refused by name */
    nn_backend_t nog = *be;
    nog.gather_rows = NULL;
    CHECK(train_window_resident(w, &nog, 0, err, sizeof err) != 0 && strstr(err, "cannot gather"));
    CHECK_OK(train_window_resident(w, be, 0, err, sizeof err), err);

    int64_t pos = 0;
    int32_t bad = 0;
    CHECK_OK(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err), err);
    int64_t all_bytes = train_window_resident_bytes(w);
    CHECK(train_window_is_resident(w) && all_bytes > pos * (ENC_PACKED_BYTES + ENC_LEGAL_BYTES));
    nn_batch_t bt;
    int same = 0;
    for (int k = 0; k < 20; k++) {
        uint64_t key = train_key(3, 1, k);
        CHECK_OK(train_window_sample(w, key, 64, b, err, sizeof err), err);
        CHECK_OK(train_window_gather(w, key, 64, tn.nt, &bt, err, sizeof err), err);
        same += staged_equals(tn.nt, &bt, b);
    }
    CHECKF(same == 20, "%d of 20 gathered batches equal the host route's", same);
    /* a batch over the trainer's rows is refused */
    CHECK(train_window_gather(w, 1, 65, tn.nt, &bt, err, sizeof err) != 0 && strstr(err, "does not fit"));
    /* the window shrinks to the newest shard: the others' copies go, the rest still gathers right */
    CHECK_OK(train_window_select(w, list, nl, -1, list[2].rows, &pos, &bad, err, sizeof err), err);
    int64_t one_bytes = train_window_resident_bytes(w);
    CHECKF(train_window_is_resident(w) && one_bytes > 0 && one_bytes < all_bytes / 2, "resident %lld of %lld bytes",
           (long long)one_bytes, (long long)all_bytes);
    CHECK_OK(train_window_sample(w, 99, 64, b, err, sizeof err), err);
    CHECK_OK(train_window_gather(w, 99, 64, tn.nt, &bt, err, sizeof err), err);
    CHECK(staged_equals(tn.nt, &bt, b));
    /* a failing gather fails the step that uses it, with the op's name */
    char e2[256];
    KOMA_ASSERT(nn_fault_set("gather_rows:1", e2, sizeof e2) == 0);
    CHECK_OK(train_window_gather(w, 5, 64, tn.nt, &bt, err, sizeof err), err); /* queued: the error is the backend's */
    nn_fault_set(NULL, e2, sizeof e2);
    int64_t id;
    CHECKF(nn_train_step_launch(tn.nt, &bt, &id, err, sizeof err) != 0 && strstr(err, "gather_rows"),
           "step after a failed gather: %s", err);
    train_net_free(&tn);
    CHECK_OK(train_window_resident(w, NULL, 0, err, sizeof err), err); /* the copies go before their backend */
    CHECK(!train_window_is_resident(w) && train_window_resident_bytes(w) == 0);
    nn_backend_free(be);

    /* a cap below the window: residency ends with a line that says why, the host route goes on */
    be = nn_backend_cpu_new(1);
    KOMA_ASSERT(be);
    CHECK_OK(train_net_new(be, &cfg, cfg.batch, &tn, err, sizeof err), err);
    CHECK_OK(train_window_resident(w, be, one_bytes + 1, err, sizeof err), err);
    CHECK_OK(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err), err);
    CHECKF(!train_window_is_resident(w) && train_window_resident_bytes(w) == 0 && strstr(lg.text, "does not fit") &&
               strstr(lg.text, "cap"), "log: %s", lg.text);
    CHECK(train_window_gather(w, 1, 64, tn.nt, &bt, err, sizeof err) != 0 && strstr(err, "not resident"));
    CHECK_OK(train_window_sample(w, 1, 64, b, err, sizeof err), err);
    train_net_free(&tn);
    train_window_free(w);
    nn_backend_free(be);
    shard_batch_free(b);
    free(list);
    compat_mutex_destroy(&lg.mu);
    t_run_close(&R);
}

/* --q-horizon: both routes train on the lambda-return of each row's game
 * (shard_q_lambda), not on its root_q; a lambda outside [0, 1) or set late is refused. */
static void test_q_horizon(void) {
    char err[2048];
    t_run_t R;
    t_run_open(&R, t_path("qhorizon"));
    t_rng = 5;
    t_random_q = 1;
    const char *rel = t_add_shard(&R, 1, 4, 30);
    t_random_q = 0;
    KOMA_ASSERT(db_writer_flush(R.w, -1) == DB_OK);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 1);
    char path[1000];
    snprintf(path, sizeof path, "%s/%s", R.dir, rel);
    shard_t *s = shard_open(path, &T_FMT, 0, err, sizeof err);
    KOMA_ASSERT(s);
    int64_t rows = shard_rows(s);
    float *want = malloc(sizeof(float) * (size_t)rows);
    KOMA_ASSERT(want);
    shard_q_lambda(s, 0.75f, want);
    int differ = 0;
    for (int64_t r = 0; r < rows; r++) differ += fabsf(want[r] - shard_columns(s)->root_q[r]) > 1e-3f;
    CHECKF(differ > rows / 2, "%d of %lld rows have a lambda-return unlike their root_q", differ, (long long)rows);

    train_config_t cfg = t_tiny_config(4);
    cfg.batch = 64;
    cfg.q_horizon = 4; /* lambda 0.75 */
    nn_backend_t *be = nn_backend_cpu_new(1);
    train_net_t tn;
    KOMA_ASSERT(be);
    CHECK_OK(train_net_new(be, &cfg, cfg.batch, &tn, err, sizeof err), err);
    shard_batch_t *b = shard_batch_new(&T_FMT, 64, 0, err, sizeof err);
    for (int resident = 0; resident <= 1; resident++) {
        train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
        KOMA_ASSERT(w && b);
        snprintf(cfg.device_window, sizeof cfg.device_window, resident ? "on" : "off");
        CHECK(train_window_setup(&cfg, w, be, 1, err, sizeof err) == resident);
        int64_t pos = 0;
        int32_t bad = 0;
        CHECK_OK(train_window_select(w, list, nl, -1, 0, &pos, &bad, err, sizeof err), err);
        CHECK(train_window_set_q_lambda(w, 0.5f, err, sizeof err) != 0 && strstr(err, "after"));
        int matched = 0, right = 0, same = 0;
        for (int k = 0; k < 5; k++) {
            CHECK_OK(train_window_sample(w, train_key(1, 1, k), 64, b, err, sizeof err), err);
            for (int32_t i = 0; i < b->B; i++) { /* a row of the same planes (the games share their start) */
                int found = 0, ok = 0;
                for (int64_t r = 0; r < rows; r++)
                    if (!memcmp(b->planes + (size_t)i * ENC_PACKED_BYTES, shard_columns(s)->planes + r * ENC_PACKED_BYTES,
                                ENC_PACKED_BYTES))
                        found = 1, ok |= b->root_q[i] == want[r];
                matched += found;
                right += ok;
            }
            if (resident) {
                nn_batch_t bt;
                CHECK_OK(train_window_gather(w, train_key(1, 1, k), 64, tn.nt, &bt, err, sizeof err), err);
                same += staged_equals(tn.nt, &bt, b);
            }
        }
        CHECKF(matched == 5 * 64 && right == matched, "%s route: %d of %d rows carry their lambda-return",
               resident ? "resident" : "host", right, matched);
        if (resident) CHECKF(same == 5, "%d of 5 gathered batches equal the host route's", same);
        train_window_free(w);
    }
    train_window_t *w = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
    CHECK(train_window_set_q_lambda(w, 1.0f, err, sizeof err) != 0 && strstr(err, "outside"));
    train_window_free(w);
    train_net_free(&tn);
    nn_backend_free(be);
    shard_batch_free(b);
    shard_close(s);
    free(want);
    free(list);
    t_run_close(&R);
}

int main(void) {
    t_scratch("train_window");
    test_formula();
    test_flags();
    test_selfplay_defaults();
    test_window();
    test_resident();
    test_q_horizon();
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_window");
}
