/* test_train_thread.c - the trainer thread with a live inference server:
 * start / submit / wait / stop while a client thread keeps evaluating on the
 * server; each new net is published with generation = cycle and the client
 * sees generations only go up (model cycle c = generation c + 1); duplicate submissions run once; waiting for a
 * cycle never submitted fails at once; a stop in the middle of a long cycle
 * returns within a step, the waiter gets TRAIN_STOPPED, nothing is written
 * and the trainer is back at the last model. Run under ThreadSanitizer too
 * (OPENBLAS_NUM_THREADS=1). A progress reading inside a cycle is taken while
 * the trainer waits in its log sink (hold_t), not by polling fast enough. */
#include <stdatomic.h>

#include "train_test.h"

typedef struct {
    nn_server_t *srv;
    atomic_int stop;
    int64_t evals, errors, backwards; /* read after the join */
    _Atomic int64_t last_gen;        /* read while it runs */
} client_t;

static void *client_main(void *arg) {
    client_t *c = arg;
    enum { N = 4 };
    static uint8_t packed[N * ENC_PACKED_BYTES];
    static float hand[N * ENC_HAND], value[N * 3];
    for (int i = 0; i < N * ENC_PACKED_BYTES; i++) packed[i] = (uint8_t)(i * 37);
    for (int i = 0; i < N * ENC_HAND; i++) hand[i] = (float)(i % 3) * 0.25f;
    nn_server_request_t req = {.n = N, .packed = packed, .hand = hand, .value = value};
    while (!atomic_load(&c->stop)) {
        nn_server_result_t res;
        int st = nn_server_eval(c->srv, &req, &res);
        if (st != NN_SERVER_OK) {
            c->errors++;
            break;
        }
        if (res.generation < atomic_load(&c->last_gen)) c->backwards++;
        atomic_store(&c->last_gen, res.generation);
        c->evals++;
    }
    return NULL;
}

/* The log sink of test_thread_with_server: at the first progress line inside
 * cycle 2 (one a step: progress_ms < 0) the trainer thread waits until the
 * test's thread has read a progress inside a cycle, so that reading never
 * depends on how fast the machine steps. */
typedef struct {
    t_log_t *lg;
    compat_mutex_t mu;
    compat_cond_t cv;
    int state; /* 0: not there yet, 1: the trainer waits, 2: released */
} hold_t;

static void hold_log_fn(void *user, const char *line) {
    hold_t *h = user;
    t_log_fn(h->lg, line);
    const char *p = strstr(line, "cycle 2: step ");
    int64_t step = 0, steps = 0;
    if (!p || sscanf(p, "cycle 2: step %" SCNd64 "/%" SCNd64, &step, &steps) != 2 || step >= steps) return;
    compat_mutex_lock(&h->mu);
    if (h->state == 0) {
        h->state = 1;
        while (h->state == 1) compat_cond_wait(&h->cv, &h->mu);
    }
    compat_mutex_unlock(&h->mu);
}

static void hold_release(hold_t *h) {
    compat_mutex_lock(&h->mu);
    h->state = 2;
    compat_cond_broadcast(&h->cv);
    compat_mutex_unlock(&h->mu);
}

static void add_data(t_run_t *r, int32_t cycle) {
    t_rng = 500 + (uint64_t)cycle;
    t_add_shard(r, cycle, 3, 12);
}

static void test_thread_with_server(void) {
    char err[2048], path[1000];
    t_log_t lg;
    memset(&lg, 0, sizeof lg);
    compat_mutex_init(&lg.mu);
    hold_t hold = {.lg = &lg};
    compat_mutex_init(&hold.mu);
    compat_cond_init(&hold.cv);
    train_config_t cfg = t_tiny_config(20);
    cfg.log = hold_log_fn;
    cfg.log_user = &hold;
    cfg.progress_ms = -1;
    t_run_t R;
    t_run_open(&R, t_path("run"));
    train_trainer_t *tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    if (!tr) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(tr);
    add_data(&R, 1);
    train_cycle_report_t rep;
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    train_trainer_free(tr);

    /* the server serves cycle 1 as generation 2 */
    nn_server_config_t sc = nn_server_config_default();
    sc.backend = "cpu";
    sc.cpu_threads = 1;
    sc.max_batch = 16;
    sc.gather_us = 200;
    sc.generation = 2;
    snprintf(path, sizeof path, "%s/models/0001.safetensors", R.dir);
    nn_server_t *srv = nn_server_new(&sc, path, NULL, err, sizeof err);
    if (!srv) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(srv);
    tr = train_trainer_new(&cfg, R.dir, R.w, srv, err, sizeof err);
    KOMA_ASSERT(tr);
    CHECK(train_trainer_latest_cycle(tr) == 1);

    client_t cl;
    memset(&cl, 0, sizeof cl);
    cl.srv = srv;
    atomic_init(&cl.stop, 0);
    atomic_init(&cl.last_gen, 0);
    compat_thread_t th;
    KOMA_ASSERT(compat_thread_create(&th, client_main, &cl) == 0);

    CHECK(train_trainer_submit(tr, 2) == -1); /* not started */
    CHECK(train_trainer_start(tr) == 0);
    CHECK(train_trainer_start(tr) == -1);
    add_data(&R, 2);
    CHECK(train_trainer_submit(tr, 2) == 0);
    add_data(&R, 3);
    CHECK(train_trainer_submit(tr, 3) == 0);
    CHECK(train_trainer_submit(tr, 3) == 0); /* queued already: runs once */
    CHECK(train_trainer_wait(tr, 9, 1000, &rep, err, sizeof err) == TRAIN_ERROR && strstr(err, "not submitted"));
    /* progress, read while the thread trains cycles 2 and 3 (20 steps each: steps 21-40 and 41-60) */
    int64_t seen_cycle = -1, seen_step = -1, mid = 0;
    int64_t until_done = compat_now_ms() + 120000;
    train_progress_t tp;
    for (;;) {
        train_trainer_progress(tr, &tp);
        if (tp.cycle != -1) {
            CHECKF((tp.cycle == 2 || tp.cycle == 3) && tp.steps == 20,
                   "progress: cycle %" PRId64 " with %" PRId64 " steps", tp.cycle, tp.steps);
            CHECKF(tp.step >= 0 && tp.step <= tp.steps, "progress: step %" PRId64 " of %" PRId64, tp.step, tp.steps);
            CHECKF(tp.cycle > seen_cycle || (tp.cycle == seen_cycle && tp.step >= seen_step),
                   "progress went back from cycle %" PRId64 " step %" PRId64 " to cycle %" PRId64 " step %" PRId64,
                   seen_cycle, seen_step, tp.cycle, tp.step);
            CHECK(tp.step == 0 || tp.samples_per_s > 0);
            if (tp.step > 0 && tp.step < tp.steps) mid++, hold_release(&hold);
            seen_cycle = tp.cycle, seen_step = tp.step;
        } else if (seen_cycle == 3 || train_trainer_wait(tr, 3, 0, &rep, err, sizeof err) != TRAIN_TIMEOUT) {
            break;
        }
        if (compat_now_ms() > until_done) break;
        compat_sleep_ms(1);
    }
    hold_release(&hold); /* a failed check below must not leave the trainer waiting */
    CHECKF(mid > 0, "progress: no reading inside a cycle (last: cycle %" PRId64 " step %" PRId64 ")", seen_cycle,
           seen_step);
    int st = train_trainer_wait(tr, 3, 120000, &rep, err, sizeof err);
    train_trainer_progress(tr, &tp);
    CHECK(tp.cycle == -1); /* idle once the cycle's result is out */
    CHECK_OK(st, err);
    CHECK(rep.cycle == 3 && rep.step == 60 && !rep.already);
    st = train_trainer_wait(tr, 2, 0, &rep, err, sizeof err);
    CHECK_OK(st, err);
    CHECK(rep.cycle == 2 && rep.step == 40);
    CHECK(nn_server_generation(srv) == 4);
    CHECK(strstr(lg.text, "as generation") == NULL); /* no fallback was needed */
    /* the client sees the new net */
    int64_t until = compat_now_ms() + 10000;
    while (atomic_load(&cl.last_gen) < 4 && compat_now_ms() < until) compat_sleep_ms(5);
    CHECK(atomic_load(&cl.last_gen) == 4);
    /* a finished cycle submitted again is reported (idempotent), not retrained */
    CHECK(train_trainer_submit(tr, 2) == 0);
    CHECK_OK(train_trainer_wait(tr, 2, 60000, &rep, err, sizeof err), err);
    CHECK(rep.already == 1);
    train_trainer_stop(tr);
    train_trainer_stop(tr); /* idempotent */
    CHECK(train_trainer_submit(tr, 4) == -1);
    CHECK(train_trainer_wait(tr, 4, 1000, &rep, err, sizeof err) == TRAIN_STOPPED);
    atomic_store(&cl.stop, 1);
    compat_thread_join(th);
    fprintf(stderr, "client: %" PRId64 " evaluations, last generation %" PRId64 ", %" PRId64 " errors\n", cl.evals,
            (int64_t)atomic_load(&cl.last_gen), cl.errors);
    CHECK(cl.evals > 0 && cl.errors == 0 && cl.backwards == 0);
    /* a server ahead of the trainer: the next model goes to current + 1, said in the log */
    snprintf(path, sizeof path, "%s/models/0003.safetensors", R.dir);
    CHECK(nn_server_publish_file(srv, path, 10, err, sizeof err) == 10);
    add_data(&R, 4);
    CHECK_OK(train_trainer_run_cycle(tr, 4, &rep, err, sizeof err), err); /* synchronous again after stop */
    CHECK(nn_server_generation(srv) == 11 && strstr(lg.text, "as generation 11"));
    train_trainer_free(tr);
    nn_server_free(srv);
    /* every model registered */
    db_t *db = NULL;
    snprintf(path, sizeof path, "%s/koma.db", R.dir);
    KOMA_ASSERT(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    db_model_t m;
    CHECK(db_model_latest(db, &m) == DB_OK && m.cycle == 4 && m.train_steps == 80);
    db_close(db);
    t_run_close(&R);
    CHECK(strstr(lg.text, "cycle 3: step 1/20") && strstr(lg.text, "cycle 3: step 20/20")); /* progress_ms < 0 */
    compat_cond_destroy(&hold.cv);
    compat_mutex_destroy(&hold.mu);
    compat_mutex_destroy(&lg.mu);
}

static void test_stop_mid_cycle(void) {
    char err[2048], path[1000];
    train_config_t cfg = t_tiny_config(100000000); /* a cycle that would never end */
    t_run_t R;
    t_run_open(&R, t_path("run_stop"));
    train_trainer_t *tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr);
    add_data(&R, 1);
    CHECK(train_trainer_start(tr) == 0);
    CHECK(train_trainer_submit(tr, 1) == 0);
    train_cycle_report_t rep;
    CHECK(train_trainer_wait(tr, 1, 300, &rep, err, sizeof err) == TRAIN_TIMEOUT);
    int64_t t0 = compat_now_ms();
    train_trainer_stop(tr);
    int64_t took = compat_now_ms() - t0;
    fprintf(stderr, "stop in the middle of a cycle took %" PRId64 " ms\n", took);
    CHECK(took < 5000);
    CHECK(train_trainer_wait(tr, 1, 1000, &rep, err, sizeof err) == TRAIN_STOPPED);
    snprintf(path, sizeof path, "%s/models/0001.safetensors", R.dir);
    CHECK(!compat_file_exists(path));
    CHECK(train_trainer_latest_cycle(tr) == 0);
    /* back at models/0000: same weights and optimizer state */
    CHECK(nn_optim_step_count(train_trainer_nn(tr)) == 0);
    char now[1000], m0[1000];
    snprintf(now, sizeof now, "%s/after_stop.safetensors", R.dir);
    snprintf(m0, sizeof m0, "%s/models/0000.safetensors", R.dir);
    CHECK(nn_weights_save(train_trainer_net(tr), train_trainer_nn(tr), now, err, sizeof err) == 0);
    CHECK(t_weights_diff(now, m0, NULL, NULL) == 0.0);
    /* and it can be started again */
    CHECK(train_trainer_start(tr) == 0);
    train_trainer_free(tr); /* stops the idle thread */
    t_run_close(&R);
}

int main(void) {
    t_scratch("train_thread");
    test_thread_with_server();
    test_stop_mid_cycle();
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_thread");
}
