/* test_train_fault.c - the trainer never writes or publishes a bad net.
 *
 * Faults injected into the trainer's CPU backend (nn/fault.h): NaN weights in
 * the middle of a cycle (the next loss is NaN), at its very last update (the
 * losses all look fine: nn_weights_save must refuse) and in the last step's
 * forward (its loss, read one step late by train/loop.c, is NaN: the loop
 * reads it before it returns), then a failed backend op on the trainer
 * thread. Each time the cycle fails with a message saying
 * why, no model file appears, koma.db has no model row for the cycle, the
 * inference server keeps its generation, and the trainer is back at the
 * newest model; once the NaN fault is gone the same cycle trains and
 * publishes. Runs under ThreadSanitizer too (trainer thread + server). */
#include "train_test.h"

#include "nn/fault.h"
#include "nn/server.h"

#define STEPS 4 /* two sgd_step calls per step: decayed weights, then the rest */

static void set_fault(const char *spec) {
    char e[256];
    if (nn_fault_set(spec, e, sizeof e) != 0) {
        fprintf(stderr, "nn_fault_set(%s): %s\n", spec, e);
        KOMA_ASSERT(0);
    }
}

static int model_row(const char *dir, int32_t cycle) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    db_t *db = NULL;
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(db);
    db_model_t m;
    int found = db_model_by_cycle(db, cycle, &m) == DB_OK;
    db_close(db);
    return found;
}

static int model_file(const char *dir, int32_t cycle) {
    char path[1000];
    snprintf(path, sizeof path, "%s/models/%04d.safetensors", dir, cycle);
    return compat_file_exists(path);
}

/* A failed cycle left no trace and the trainer is back at cycle `latest`. */
static void check_nothing_left(const char *what, train_trainer_t *tr, const char *dir, nn_server_t *srv,
                               int32_t cycle, int64_t gen, int64_t steps) {
    CHECKF(!model_file(dir, cycle), "%s: models/%04d.safetensors was written", what, cycle);
    CHECKF(!model_row(dir, cycle), "%s: koma.db has a model row for cycle %d", what, cycle);
    CHECKF(nn_server_generation(srv) == gen, "%s: the server went to generation %lld", what,
           (long long)nn_server_generation(srv));
    CHECKF(train_trainer_latest_cycle(tr) == cycle - 1, "%s: latest cycle %lld", what,
           (long long)train_trainer_latest_cycle(tr));
    CHECKF(nn_optim_step_count(train_trainer_nn(tr)) == steps, "%s: step count %lld, expected %lld", what,
           (long long)nn_optim_step_count(train_trainer_nn(tr)), (long long)steps);
}

static void test_trainer_faults(void) {
    char err[2048], path[1000];
    t_log_t lg;
    memset(&lg, 0, sizeof lg);
    compat_mutex_init(&lg.mu);
    train_config_t cfg = t_tiny_config(STEPS);
    cfg.log = t_log_fn;
    cfg.log_user = &lg;
    t_run_t R;
    t_run_open(&R, t_path("run"));
    train_trainer_t *t0 = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err); /* writes cycle 0 */
    if (!t0) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(t0);
    train_trainer_free(t0);
    nn_server_config_t sc = nn_server_config_default();
    sc.cpu_threads = 1;
    sc.max_batch = 8;
    sc.generation = 1;
    snprintf(path, sizeof path, "%s/models/0000.safetensors", R.dir);
    nn_server_t *srv = nn_server_new(&sc, path, NULL, err, sizeof err);
    if (!srv) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(srv);
    train_trainer_t *tr = train_trainer_new(&cfg, R.dir, R.w, srv, err, sizeof err);
    KOMA_ASSERT(tr);
    t_rng = 900;
    t_add_shard(&R, 1, 3, 12);
    train_cycle_report_t rep;

    /* NaN weights after step 2: step 3's loss is NaN. */
    set_fault("sgd_step:3:nan");
    err[0] = 0;
    int st = train_trainer_run_cycle(tr, 1, &rep, err, sizeof err);
    CHECKF(st == TRAIN_ERROR && strstr(err, "non-finite loss") && strstr(err, "nothing written"), "mid-cycle NaN: %d %s",
           st, err);
    check_nothing_left("mid-cycle NaN", tr, R.dir, srv, 1, 1, 0);

    /* NaN weights at the last update: every loss was finite; the save refuses. */
    set_fault("sgd_step:" "8" ":nan"); /* 2 * STEPS */
    err[0] = 0;
    st = train_trainer_run_cycle(tr, 1, &rep, err, sizeof err);
    CHECKF(st == TRAIN_ERROR && strstr(err, "0001.safetensors") && strstr(err, "not written") &&
               strstr(err, "non-finite"),
           "last-step NaN: %d %s", st, err);
    check_nothing_left("last-step NaN", tr, R.dir, srv, 1, 1, 0);

    /* NaN value logits in the last step's forward (fc2, the second dense op
     * of each step): its loss is read one step late, after the loop has
     * queued nothing more, and still before anything is written. */
    set_fault("dense_fwd:" "8" ":nan"); /* 2 * STEPS */
    err[0] = 0;
    st = train_trainer_run_cycle(tr, 1, &rep, err, sizeof err);
    CHECKF(st == TRAIN_ERROR && strstr(err, "training step 3 of cycle 1: non-finite loss") &&
               strstr(err, "nothing written"),
           "last-step NaN loss: %d %s", st, err);
    check_nothing_left("last-step NaN loss", tr, R.dir, srv, 1, 1, 0);

    /* The fault gone, the same cycle trains and publishes. */
    set_fault(NULL);
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    CHECK(model_file(R.dir, 1) && model_row(R.dir, 1) && nn_server_generation(srv) == 2);
    CHECK(rep.step == STEPS);

    /* A failed backend op on the trainer thread: the waiter gets the error. */
    t_add_shard(&R, 2, 3, 12);
    CHECK(train_trainer_start(tr) == 0);
    set_fault("conv_bwd_data:5");
    CHECK(train_trainer_submit(tr, 2) == 0);
    err[0] = 0;
    st = train_trainer_wait(tr, 2, 120000, &rep, err, sizeof err);
    CHECKF(st == TRAIN_ERROR && strstr(err, "injected fault: conv_bwd_data call 5") && strstr(err, "nothing written"),
           "failed op: %d %s", st, err);
    CHECKF(strstr(lg.text, "cycle 2 failed") != NULL, "the trainer logs the failure:\n%s", lg.text);
    set_fault(NULL);
    train_trainer_stop(tr);
    check_nothing_left("failed op", tr, R.dir, srv, 2, 2, STEPS);
    /* The instance stays failed: the next try says so instead of training on garbage. */
    err[0] = 0;
    st = train_trainer_run_cycle(tr, 2, &rep, err, sizeof err);
    CHECKF(st == TRAIN_ERROR && strstr(err, "cpu backend failed"), "retry on the failed backend: %d %s", st, err);
    CHECK(!model_file(R.dir, 2) && nn_server_generation(srv) == 2);

    train_trainer_free(tr);
    nn_server_free(srv);
    t_run_close(&R);
    compat_mutex_destroy(&lg.mu);
}

int main(void) {
    t_scratch("train_fault");
    test_trainer_faults();
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_train_fault");
}
