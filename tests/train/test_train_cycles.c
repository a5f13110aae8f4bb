/* test_train_cycles.c - train/trainer.c over whole cycles: a new run gets
 * models/0000; cycles 1 and 2 write, register and chain their optimizer
 * state; train_steps rows; idempotent cycles; resume exactness (a trainer
 * re-created between cycles == one trainer); a corrupt and a truncated shard
 * are named in the log and skipped; a model file without a row (kill -9
 * between rename and commit) is retrained over; a stop request abandons the
 * cycle without writing anything. */
#include "train_test.h"

static db_t *ro_db(const char *dir) {
    char path[900], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(db);
    return db;
}

static int64_t shard_rows_of(const char *dir, const char *rel) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    shard_t *s = shard_open(path, NULL, 0, err, sizeof err);
    KOMA_ASSERT(s);
    int64_t n = shard_rows(s);
    shard_close(s);
    return n;
}

static void model_file(const char *dir, int cycle, char *buf, size_t len) {
    snprintf(buf, len, "%s/models/%04d.safetensors", dir, cycle);
}

/* Builds the same data in any run: fixed RNG seed per (cycle). */
static void add_cycle_data(t_run_t *r, int32_t cycle, int64_t *rows) {
    t_rng = 1000 + (uint64_t)cycle;
    const char *a = t_add_shard(r, cycle, 4, 12);
    const char *b = t_add_shard(r, cycle, 3, 16);
    if (rows) *rows = shard_rows_of(r->dir, a) + shard_rows_of(r->dir, b);
}

/* Run B: the same data as run A (in dir_a, cycles 1 and 2), the trainer
 * destroyed and re-created between cycles: the same weights; another seed:
 * different ones. */
static void test_resume_exact(const train_config_t *cfg, const char *dir_a) {
    char err[2048];
    train_trainer_t *tr;
    train_cycle_report_t rep;
    /* Run B: the same data; the trainer is destroyed and re-created between cycles. */
    t_run_t B;
    t_run_open(&B, t_path("runB"));
    tr = train_trainer_new(cfg, B.dir, B.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    add_cycle_data(&B, 1, NULL);
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    train_trainer_free(tr);
    tr = train_trainer_new(cfg, B.dir, B.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    CHECK(train_trainer_latest_cycle(tr) == 1);
    add_cycle_data(&B, 2, NULL);
    CHECK_OK(train_trainer_run_cycle(tr, 2, &rep, err, sizeof err), err);
    train_trainer_free(tr);
    for (int c = 1; c <= 2; c++) {
        char pa[1000], pb[1000];
        model_file(dir_a, c, pa, sizeof pa);
        model_file(B.dir, c, pb, sizeof pb);
        int64_t sa = -1, sb = -2;
        double d = t_weights_diff(pa, pb, &sa, &sb);
        fprintf(stderr, "resume exactness, cycle %d: max |A - B| = %.3g (steps %" PRId64 " / %" PRId64 ")\n", c, d, sa, sb);
        CHECK(d <= 1e-6 && sa == sb);
    }
    /* ... and a different seed gives different weights (the comparison can fail) */
    {
        t_run_t C;
        t_run_open(&C, t_path("runC"));
        train_config_t c2 = *cfg;
        c2.seed = 8;
        tr = train_trainer_new(&c2, C.dir, C.w, NULL, err, sizeof err);
        KOMA_ASSERT(tr);
        add_cycle_data(&C, 1, NULL);
        CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
        train_trainer_free(tr);
        char pa[1000], pc[1000];
        model_file(dir_a, 1, pa, sizeof pa);
        model_file(C.dir, 1, pc, sizeof pc);
        CHECK(t_weights_diff(pa, pc, NULL, NULL) > 1e-3);
        t_run_close(&C);
    }
    t_run_close(&B);
}

static void test_two_cycles_and_resume(void) {
    char err[2048], path[1000];
    t_log_t lg;
    memset(&lg, 0, sizeof lg);
    compat_mutex_init(&lg.mu);
    train_config_t cfg = t_tiny_config(12);
    cfg.log = t_log_fn;
    cfg.log_user = &lg;

    /* Run A: one trainer, cycles 1 and 2. */
    t_run_t A;
    t_run_open(&A, t_path("runA"));
    train_trainer_t *tr = train_trainer_new(&cfg, A.dir, A.w, NULL, err, sizeof err);
    if (!tr) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(tr);
    CHECK(train_trainer_latest_cycle(tr) == 0);
    model_file(A.dir, 0, path, sizeof path);
    CHECK(compat_file_exists(path));
    int64_t rows1 = 0, rows2 = 0;
    add_cycle_data(&A, 1, &rows1);
    train_cycle_report_t rep;
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    CHECK(rep.cycle == 1 && rep.steps == 12 && rep.samples == 12 * 16 && rep.step == 12 && !rep.already);
    CHECK(rep.window_positions == rows1 && rep.new_positions == rows1 && rep.bad_shards == 0);
    CHECK(!strcmp(rep.model_path, "models/0001.safetensors"));
    CHECK(isfinite(rep.policy_loss) && isfinite(rep.value_loss) && isfinite(rep.legal_loss) && rep.samples_per_s > 0);
    CHECK(train_trainer_latest_cycle(tr) == 1);
    add_cycle_data(&A, 2, &rows2);
    CHECK_OK(train_trainer_run_cycle(tr, 2, &rep, err, sizeof err), err);
    CHECK(rep.step == 24 && rep.new_positions == rows2 && rep.window_positions == rows1 + rows2);
    /* idempotent: cycles that have a model are reported, not retrained */
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    CHECK(rep.already == 1 && rep.step == 12 && !strcmp(rep.model_path, "models/0001.safetensors"));
    CHECK_OK(train_trainer_run_cycle(tr, 2, &rep, err, sizeof err), err);
    CHECK(rep.already == 1 && rep.step == 24);
    train_trainer_free(tr);
    CHECK(db_writer_flush(A.w, -1) == DB_OK);

    /* Registered, loadable, optimizer steps chained 0 -> 12 -> 24. */
    db_t *db = ro_db(A.dir);
    for (int c = 0; c <= 2; c++) {
        db_model_t m;
        CHECK(db_model_by_cycle(db, c, &m) == DB_OK);
        char want[64];
        snprintf(want, sizeof want, "models/%04d.safetensors", c);
        CHECK(!strcmp(m.path, want) && m.train_steps == 12 * c && m.features_version == ENC_FEATURES_VERSION);
        CHECK(!strcmp(m.arch, "resnet1x16-relu"));
        model_file(A.dir, c, path, sizeof path);
        uint64_t h;
        int64_t bytes;
        char hex[17];
        CHECK(db_file_xxh3(path, &h, &bytes, err, sizeof err) == 0);
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        CHECK(!strcmp(hex, m.xxh3));
        nn_backend_t *be = nn_backend_cpu_new(1);
        nn_net_t *net = nn_weights_load(be, path, ENC_FEATURES_VERSION, err, sizeof err);
        CHECK(net != NULL);
        if (net) {
            nn_optim_t *nt = nn_optim_new(net, NULL, 4, err, sizeof err);
            CHECK(nn_weights_read(net, nt, path, err, sizeof err) == 0);
            CHECK(nn_optim_step_count(nt) == 12 * c);
            nn_optim_free(nt);
        }
        nn_net_free(net);
        nn_backend_free(be);
        if (c > 0) CHECK(m.train_samples == 12 * 16 * c && isfinite(m.loss_total));
    }
    db_train_step_t steps[64];
    int32_t ns = 0;
    CHECK(db_train_steps_get(db, 0, 100, steps, 64, &ns) == DB_OK);
    CHECK(ns == 24);
    if (ns == 24) CHECK(steps[0].step == 1 && steps[0].cycle == 1 && steps[23].step == 24 && steps[23].cycle == 2 &&
                        steps[23].samples == 24 * 16 && isfinite(steps[23].loss_policy));
    db_cycle_metrics_t cm;
    CHECK(db_cycle_metrics_get(db, 2, &cm) == DB_OK && cm.train_s > 0);
    db_close(db);

    test_resume_exact(&cfg, A.dir);

    /* A model file with no row (killed between rename and commit): not
     * trusted, retrained over; a stray later file does not move the latest cycle. */
    model_file(A.dir, 3, path, sizeof path);
    CHECK(compat_write_file_durable(path, "garbage", 7, err, sizeof err) == 0);
    char stray[1000];
    model_file(A.dir, 4, stray, sizeof stray);
    char p2[1000];
    model_file(A.dir, 2, p2, sizeof p2);
    size_t len = 0;
    char *bytes2 = compat_read_file(p2, &len, err, sizeof err);
    KOMA_ASSERT(bytes2);
    CHECK(compat_write_file_durable(stray, bytes2, len, err, sizeof err) == 0);
    free(bytes2);
    char tmpf[1100];
    snprintf(tmpf, sizeof tmpf, "%s.tmp.12345", path); /* a save killed before its rename */
    CHECK(compat_write_file_durable(tmpf, "half", 4, err, sizeof err) == 0);
    tr = train_trainer_new(&cfg, A.dir, A.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    CHECK(train_trainer_latest_cycle(tr) == 2);
    CHECK(!compat_file_exists(tmpf) && strstr(lg.text, "0003.safetensors.tmp.12345"));
    add_cycle_data(&A, 3, NULL);
    CHECK_OK(train_trainer_run_cycle(tr, 3, &rep, err, sizeof err), err);
    CHECK(rep.step == 36 && !rep.already);
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = nn_weights_load(be, path, -1, err, sizeof err);
    CHECK(net != NULL);
    nn_net_free(net);
    nn_backend_free(be);
    db = ro_db(A.dir);
    db_model_t m3;
    CHECK(db_model_by_cycle(db, 3, &m3) == DB_OK && m3.train_steps == 36);
    CHECK(db_model_by_cycle(db, 4, &m3) == DB_NOTFOUND);
    db_close(db);

    /* A stop request (Ctrl-C) abandons the cycle: no file, no row, state kept. */
    add_cycle_data(&A, 4, NULL);
    compat_remove_file(stray);
    compat_request_stop();
    int st = train_trainer_run_cycle(tr, 4, &rep, err, sizeof err);
    CHECK(st == TRAIN_STOPPED && strstr(err, "stop requested"));
    CHECK(!compat_file_exists(stray));
    CHECK(train_trainer_latest_cycle(tr) == 3);
    CHECK(nn_optim_step_count(train_trainer_nn(tr)) == 36);
    train_trainer_free(tr);
    db = ro_db(A.dir);
    CHECK(db_model_by_cycle(db, 4, &m3) == DB_NOTFOUND);
    db_close(db);

    t_run_close(&A);
    compat_mutex_destroy(&lg.mu);
}

static void test_bad_shards(void) {
    char err[2048], path[1000];
    t_log_t lg;
    memset(&lg, 0, sizeof lg);
    compat_mutex_init(&lg.mu);
    lg.echo = 1;
    train_config_t cfg = t_tiny_config(5);
    cfg.log = t_log_fn;
    cfg.log_user = &lg;
    t_run_t R;
    t_run_open(&R, t_path("runBad"));
    t_rng = 77;
    const char *good1 = t_add_shard(&R, 1, 3, 10);
    const char *bad1 = t_add_shard(&R, 1, 3, 10);
    const char *good2 = t_add_shard(&R, 1, 3, 10);
    const char *bad2 = t_add_shard(&R, 1, 3, 10);
    int64_t good_rows = shard_rows_of(R.dir, good1) + shard_rows_of(R.dir, good2);
    snprintf(path, sizeof path, "%s/%s", R.dir, bad1);
    t_corrupt(path);
    /* truncate bad2 to half its size */
    snprintf(path, sizeof path, "%s/%s", R.dir, bad2);
    size_t len = 0;
    char *data = compat_read_file(path, &len, err, sizeof err);
    KOMA_ASSERT(data);
    FILE *f = fopen(path, "wb");
    KOMA_ASSERT(f && fwrite(data, 1, len / 2, f) == len / 2 && fclose(f) == 0);
    free(data);

    train_trainer_t *tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    train_cycle_report_t rep;
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    CHECK(rep.bad_shards == 2 && rep.window_positions == good_rows && rep.steps == 5);
    CHECK(strstr(lg.text, bad1) != NULL);
    CHECK(strstr(lg.text, bad2) != NULL);
    CHECK(strstr(lg.text, good1) == NULL || strstr(strstr(lg.text, good1), "bad") == NULL);
    snprintf(path, sizeof path, "%s/models/0001.safetensors", R.dir);
    CHECK(compat_file_exists(path));
    /* reported once: the next cycle skips them silently but still counts them */
    size_t before = lg.len;
    t_add_shard(&R, 2, 2, 10);
    CHECK_OK(train_trainer_run_cycle(tr, 2, &rep, err, sizeof err), err);
    CHECK(rep.bad_shards == 2);
    CHECK(strstr(lg.text + before, bad1) == NULL);
    train_trainer_free(tr);

    /* only bad shards: a clear error naming the run, nothing written */
    t_run_t E;
    t_run_open(&E, t_path("runOnlyBad"));
    const char *only = t_add_shard(&E, 1, 2, 10);
    snprintf(path, sizeof path, "%s/%s", E.dir, only);
    t_corrupt(path);
    tr = train_trainer_new(&cfg, E.dir, E.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    CHECK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err) == TRAIN_ERROR);
    CHECK(strstr(err, E.dir) && strstr(err, "no training positions") && rep.bad_shards == 1);
    snprintf(path, sizeof path, "%s/models/0001.safetensors", E.dir);
    CHECK(!compat_file_exists(path));
    CHECK(train_trainer_latest_cycle(tr) == 0);
    train_trainer_free(tr);
    t_run_close(&E);
    t_run_close(&R);
    compat_mutex_destroy(&lg.mu);
}

static void test_open_errors(void) {
    char err[2048];
    train_config_t cfg = t_tiny_config(5);
    t_run_t R;
    t_run_open(&R, t_path("runErr"));
    /* not a run directory */
    train_trainer_t *tr = train_trainer_new(&cfg, t_path("nowhere"), R.w, NULL, err, sizeof err);
    CHECK(tr == NULL && strstr(err, "nowhere") && strstr(err, "koma.db"));
    /* a bad flag value */
    train_config_t bad = cfg;
    snprintf(bad.net, sizeof bad.net, "6y64");
    tr = train_trainer_new(&bad, R.dir, R.w, NULL, err, sizeof err);
    CHECK(tr == NULL && strstr(err, "6y64"));
    /* a registered model whose file is gone */
    tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    train_trainer_free(tr);
    char path[1000];
    snprintf(path, sizeof path, "%s/models/0000.safetensors", R.dir);
    CHECK(compat_remove_file(path) == 0);
    tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    CHECK(tr == NULL && strstr(err, path) && strstr(err, "missing"));
    train_trainer_free(tr);
    t_run_close(&R);
}

int main(void) {
    t_scratch("train_cycles");
    test_open_errors();
    test_bad_shards();
    test_two_cycles_and_resume(); /* last: it raises the process-wide stop flag */
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_cycles");
}
