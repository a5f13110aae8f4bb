/* test_train_late.c - the training loop reads each step's metrics one step
 * late (train/loop.c over nn_train_step_launch) and still gives what
 * nn_train_step in turn gives.
 *
 * On real shards, with the window's keyed sampling and the prefetch thread:
 *  - the loop on a backend whose downloads arrive late (tests/nn/nn_late.h)
 *    and on the plain CPU backend, each with the window on the host and
 *    resident in the backend's memory (batches gathered there by
 *    gather_rows): every step's hook sees the metrics of
 *    nn_train_step in turn bit for bit, named by their step, in order; the
 *    final weights, BN statistics, momentum and step count are bit for bit
 *    those of the synchronous loop;
 *  - the hook of an ordinary step runs while the next step is queued (one
 *    record unread: it really is one step late); the hook of a barrier step
 *    sees no step queued and the weights exactly as after that step;
 *  - a stop request, a failing hook and a NaN in the very last step: the loop
 *    ends with every step taken booked in order and no record left unread;
 *    the NaN of the last step reaches the hook before the loop returns, so
 *    a caller that saves or publishes after the loop never sees it pass. */
#include "train_test.h"

#include "compat/err.h"
#include "nn/fault.h"
#include "tests/nn/nn_late.h"
#include "train/loop.h"
#include "train/window.h"

#define STEPS 9
#define BARRIER 3 /* the hook of this step needs the weights after it */
#define SEED 11

typedef struct {
    nn_metrics_t m[STEPS];
    int64_t seen[STEPS]; /* order of the hook calls */
    int32_t n;
    int32_t pending_bad;      /* hooks of ordinary steps that saw no step queued, or a barrier's that saw one */
    nn_optim_t *nt;
    const float *snap;        /* the reference's params after BARRIER */
    int64_t np;
    int snap_ok;
    int64_t stop_at, fail_at; /* -1: none */
    atomic_int stop;
} rec_t;

static int rec_hook(void *user, int64_t s, const nn_metrics_t *m, const train_loop_result_t *r, char *err,
                    size_t errlen) {
    rec_t *h = user;
    (void)r;
    KOMA_ASSERT(h->n < STEPS);
    h->seen[h->n] = s;
    h->m[h->n++] = *m;
    int32_t pending = nn_train_steps_pending(h->nt);
    int last = s == STEPS - 1;
    if (s == BARRIER) {
        h->pending_bad += pending != 0;
        const float *p = nn_net_params(nn_optim_net(h->nt), NULL, NULL);
        h->snap_ok = h->snap && memcmp(p, h->snap, sizeof(float) * (size_t)h->np) == 0;
    } else if (!last) {
        h->pending_bad += pending != 1 && !(h->stop_at >= 0 && s == h->stop_at + 1); /* a stop reads the late step first */
    }
    if (s == h->stop_at) atomic_store(&h->stop, 1);
    if (s == h->fail_at || !isfinite(m->loss)) {
        set_err(err, errlen, "hook refuses step %lld (loss %g)", (long long)s, m->loss);
        return -1;
    }
    return 0;
}

static int rec_barrier(void *user, int64_t s) {
    (void)user;
    return s == BARRIER;
}

typedef struct {
    train_window_t *win;
    shard_batch_t *batch;
    train_config_t cfg;
} fixture_t;

static void set_fault(const char *spec) {
    char e[256];
    KOMA_ASSERT(nn_fault_set(spec, e, sizeof e) == 0);
}

static int same_state(train_net_t *a, train_net_t *b) {
    int64_t np, ns;
    float *pa = nn_net_params(a->net, &np, NULL), *pb = nn_net_params(b->net, NULL, NULL);
    float *sa = nn_net_stats(a->net, &ns), *sb = nn_net_stats(b->net, NULL);
    return !memcmp(pa, pb, sizeof(float) * (size_t)np) && !memcmp(sa, sb, sizeof(float) * (size_t)ns) &&
           !memcmp(nn_optim_momentum(a->nt), nn_optim_momentum(b->nt), sizeof(float) * (size_t)np) &&
           nn_optim_step_count(a->nt) == nn_optim_step_count(b->nt);
}

/* Runs the loop on be: TRAIN_* status, hook records in *h, result in *r. */
static int run_loop(fixture_t *F, nn_backend_t *be, rec_t *h, train_net_t *tn, train_loop_result_t *r, char *err,
                    size_t errlen) {
    char e2[1024];
    if (train_net_new(be, &F->cfg, F->cfg.batch, tn, e2, sizeof e2) != 0) {
        fprintf(stderr, "%s\n", e2);
        KOMA_ASSERT(0);
    }
    h->nt = tn->nt;
    train_loop_t lp = {.win = F->win, .batch = F->batch, .nt = tn->nt, .rows = F->cfg.batch, .seed = SEED,
                       .cycle = 1, .first = 0, .end = STEPS, .stop = &h->stop, .on_step = rec_hook,
                       .barrier = rec_barrier, .user = h};
    return train_loop_run(&lp, r, err, errlen);
}

static void rec_init(rec_t *h, const float *snap, int64_t np) {
    memset(h, 0, sizeof *h);
    h->snap = snap;
    h->np = np;
    h->stop_at = h->fail_at = -1;
    atomic_init(&h->stop, 0);
}

int main(void) {
    t_scratch("train_late");
    char err[2048];
    t_run_t R;
    t_run_open(&R, t_path("run"));
    t_rng = 515;
    t_add_shard(&R, 1, 4, 30);
    db_shard_t *list = NULL;
    int32_t nl = t_run_shards(&R, &list);
    KOMA_ASSERT(nl == 1);
    fixture_t F;
    F.cfg = t_tiny_config(STEPS);
    F.cfg.opt.warmup_steps = 4; /* a different lr every early step */
    F.win = train_window_new(R.dir, &T_FMT, NULL, NULL, err, sizeof err);
    KOMA_ASSERT(F.win);
    F.batch = shard_batch_new(&T_FMT, F.cfg.batch, 0, err, sizeof err);
    KOMA_ASSERT(F.batch);
    int64_t pos = 0;
    int32_t bad = 0;
    CHECK_OK(train_window_select(F.win, list, nl, -1, 0, &pos, &bad, err, sizeof err), err);
    CHECK(pos > F.cfg.batch);

    /* The reference: nn_train_step in turn on the same keyed batches. */
    nn_backend_t *cpu = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
    KOMA_ASSERT(cpu);
    train_net_t ref;
    CHECK_OK(train_net_new(cpu, &F.cfg, F.cfg.batch, &ref, err, sizeof err), err);
    nn_metrics_t want[STEPS];
    int64_t np;
    nn_net_params(ref.net, &np, NULL);
    float *snap = malloc(sizeof(float) * (size_t)np);
    KOMA_ASSERT(snap);
    for (int64_t s = 0; s < STEPS; s++) {
        CHECK_OK(train_window_sample(F.win, train_key(SEED, 1, s), F.cfg.batch, F.batch, err, sizeof err), err);
        nn_batch_t bt = shard_batch_view(F.batch);
        CHECK_OK(nn_train_step(ref.nt, &bt, &want[s], err, sizeof err), err);
        if (s == BARRIER) memcpy(snap, nn_net_params(ref.net, NULL, NULL), sizeof(float) * (size_t)np);
    }

    /* The loop, on late downloads and on the plain CPU. */
    for (int k = 0; k < 4; k++) {
        const char *names[] = {"late", "cpu", "late, resident window", "cpu, resident window"};
        const char *name = names[k];
        nn_backend_t *be = k % 2 == 0 ? t_late_backend_new(1, 1) : nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
        int resident = k >= 2;
        /* residency starts at the next select; the host route after */
        CHECK_OK(train_window_resident(F.win, resident ? be : NULL, 0, err, sizeof err), err);
        CHECK_OK(train_window_select(F.win, list, nl, -1, 0, &pos, &bad, err, sizeof err), err);
        CHECKF(train_window_is_resident(F.win) == resident && (train_window_resident_bytes(F.win) > 0) == resident,
               "%s: resident %d, %lld bytes", name, train_window_is_resident(F.win),
               (long long)train_window_resident_bytes(F.win));
        rec_t *h = malloc(sizeof *h);
        rec_init(h, snap, np);
        train_net_t tn;
        train_loop_result_t r;
        int rc = run_loop(&F, be, h, &tn, &r, err, sizeof err);
        CHECKF(rc == TRAIN_OK && r.steps == STEPS && h->n == STEPS, "%s: rc %d, %lld steps, %d hooks: %s", name, rc,
               (long long)r.steps, h->n, err);
        for (int32_t i = 0; i < h->n; i++) {
            CHECKF(h->seen[i] == i && h->m[i].step == i + 1, "%s: hook %d saw step %lld (record %lld)", name, i,
                   (long long)h->seen[i], (long long)h->m[i].step);
            CHECKF(!memcmp(&h->m[i], &want[i], sizeof want[i]), "%s: step %d: loss %.9g vs %.9g, grad norm %.9g vs %.9g",
                   name, i, h->m[i].loss, want[i].loss, h->m[i].grad_norm, want[i].grad_norm);
        }
        CHECK(!memcmp(&r.last, &want[STEPS - 1], sizeof r.last));
        CHECKF(h->pending_bad == 0, "%s: %d hooks were not one step late (or a barrier's was)", name, h->pending_bad);
        CHECKF(h->snap_ok, "%s: the barrier step's hook did not see the weights after that step", name);
        CHECKF(same_state(&ref, &tn), "%s: weights, statistics, momentum or step count differ from nn_train_step's", name);
        CHECK(nn_train_steps_pending(tn.nt) == 0);
        if (k % 2 == 0) {
            t_late_be_t *L = t_late_of(be);
            fprintf(stderr, "late backend: %lld async copies, %lld fence waits\n", (long long)L->asyncs,
                    (long long)L->waits);
            CHECK(L->asyncs == STEPS && L->waits == STEPS && L->delivered == STEPS);
        }
        train_net_free(&tn);

        /* A stop asked for in step 5's hook: step 6 was queued already; it is
         * read and booked, and the loop stops there, nothing left unread. */
        rec_init(h, NULL, 0);
        h->stop_at = 5;
        rc = run_loop(&F, be, h, &tn, &r, err, sizeof err);
        CHECKF(rc == TRAIN_STOPPED && r.steps == 7 && h->n == 7 && h->seen[6] == 6 &&
                   nn_optim_step_count(tn.nt) == 7 && nn_train_steps_pending(tn.nt) == 0,
               "%s: stop: rc %d, %lld steps, %d hooks, step count %lld", name, rc, (long long)r.steps, h->n,
               (long long)nn_optim_step_count(tn.nt));
        train_net_free(&tn);

        /* A hook that ends the loop at step 4: failed there, step 5's record dropped. */
        rec_init(h, NULL, 0);
        h->fail_at = 4;
        err[0] = 0;
        rc = run_loop(&F, be, h, &tn, &r, err, sizeof err);
        CHECKF(rc == TRAIN_ERROR && r.failed_in == TRAIN_LOOP_HOOK && r.failed_step == 4 && r.steps == 5 &&
                   strstr(err, "refuses step 4") && nn_train_steps_pending(tn.nt) == 0,
               "%s: failing hook: rc %d, in %d at %lld, %lld steps: %s", name, rc, (int)r.failed_in,
               (long long)r.failed_step, (long long)r.steps, err);
        train_net_free(&tn);

        /* NaN value logits in the very last step (fc2 is the second dense
         * op of a step): only its late read knows, and the hook has it before
         * the loop returns. */
        rec_init(h, NULL, 0);
        char spec[64];
        snprintf(spec, sizeof spec, "dense_fwd:%d:nan", 2 * STEPS);
        set_fault(spec);
        err[0] = 0;
        rc = run_loop(&F, be, h, &tn, &r, err, sizeof err);
        set_fault(NULL);
        CHECKF(rc == TRAIN_ERROR && r.failed_in == TRAIN_LOOP_HOOK && r.failed_step == STEPS - 1 &&
                   h->n == STEPS && !isfinite(h->m[STEPS - 1].loss) && isfinite(h->m[STEPS - 2].loss) &&
                   nn_train_steps_pending(tn.nt) == 0,
               "%s: NaN at the last step: rc %d, in %d at %lld, %d hooks: %s", name, rc, (int)r.failed_in,
               (long long)r.failed_step, h->n, err);
        train_net_free(&tn);
        free(h);
        CHECK_OK(train_window_resident(F.win, NULL, 0, err, sizeof err), err); /* frees be's copies */
        nn_backend_free(be);
    }

    free(snap);
    train_net_free(&ref);
    nn_backend_free(cpu);
    shard_batch_free(F.batch);
    train_window_free(F.win);
    free(list);
    t_run_close(&R);
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_late");
}
