/* loop.c - the one training loop: the backend and the window's residency,
 * the net being trained, the step loop, the running means. See loop.h. */
#include "train/loop.h"
#include "compat/err.h"

#include <math.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/encode.h"
#include "nn/backend_cuda.h"
#include "nn/registry.h"
#include "nn/weights.h"

/* ---- the backend and the window ------------------------------------------------ */
int32_t train_threads_free(void) {
    int32_t cpus = compat_cpu_count();
    double load = compat_load_average();
    if (load < 0) return cpus;
    int32_t busy = (int32_t)(load + 0.5), n = cpus - busy;
    return n < 1 ? 1 : n > cpus ? cpus : n;
}

nn_backend_t *train_backend_new(const train_config_t *c, char *err, size_t errlen) {
    nn_backend_kind_t kind;
    char e2[512];
    if (nn_backend_resolve(c->backend, &kind, e2, sizeof e2) != 0) {
        set_err(err, errlen, "train-backend: %s", e2);
        return NULL;
    }
    if (kind == NN_BACKEND_KIND_CPU && nn_cpu_blas_room(1, e2, sizeof e2) != 0) {
        set_err(err, errlen, "trainer backend cpu: %s", e2);
        return NULL;
    }
    int32_t threads = c->threads;
    if (kind == NN_BACKEND_KIND_CPU && threads == 0) threads = train_threads_free();
    nn_backend_t *be = nn_backend_open(kind, threads, c->device, 0, e2, sizeof e2);
    if (!be) set_err(err, errlen, "trainer %s", e2);
    return be;
}

int train_window_setup(const train_config_t *c, train_window_t *w, nn_backend_t *be, int32_t ranks, char *err,
                       size_t errlen) {
    if (train_window_set_q_lambda(w, (float)(1.0 - 1.0 / c->q_horizon), err, errlen) != 0 ||
        train_window_set_policy_temp(w, (float)c->policy_temp, err, errlen) != 0 ||
        train_window_set_surprise_weight(w, (float)c->surprise_weight, err, errlen) != 0)
        return -1;
    int on = !strcmp(c->device_window, "on") ||
             (!strcmp(c->device_window, "auto") && nn_backend_is_cuda(be) && ranks <= 1);
    if (!on) return 0;
    if (train_window_resident(w, be, c->device_window_mb << 20, err, errlen) != 0) return -1;
    return 1;
}

/* ---- the net being trained ------------------------------------------------- */
/* The optimizer and the shard format of tn->net; the net is tn's already. */
static int attach_trainer(const train_config_t *cfg, int32_t batch, train_net_t *tn, char *err, size_t errlen) {
    tn->nt = nn_optim_new(tn->net, &cfg->opt, batch, err, errlen);
    if (!tn->nt) return -1;
    const nn_net_config_t *nc = nn_net_config(tn->net);
    tn->fmt = (shard_format_t){.features_version = nc->features_version,
                               .planes_bytes = (int32_t)nn_packed_bytes(nc->in_planes),
                               .hand_n = nc->in_hand,
                               .legal_bytes = (int32_t)nn_packed_bytes(NN_POLICY_CH)};
    return 0;
}

int train_net_new(nn_backend_t *be, const train_config_t *cfg, int32_t batch, train_net_t *tn, char *err,
                  size_t errlen) {
    memset(tn, 0, sizeof *tn);
    nn_net_config_t nc = {.act = (nn_act_t)nn_act_parse(cfg->activation),
                          .in_planes = ENC_PLANES,
                          .in_hand = ENC_HAND,
                          .features_version = ENC_FEATURES_VERSION};
    nn_net_arch_parse(cfg->net, &nc); /* "4x32", or "4x32g2" with global pooling */
    char e2[1024];
    tn->net = nn_net_new(be, &nc, cfg->seed, e2, sizeof e2);
    if (!tn->net || attach_trainer(cfg, batch, tn, e2, sizeof e2) != 0) {
        set_err(err, errlen, "new net %s: %s", cfg->net, e2);
        train_net_free(tn);
        return -1;
    }
    return 0;
}

int train_net_load(nn_backend_t *be, const train_config_t *cfg, int32_t batch, const char *path, int with_state,
                   train_net_t *tn, char *err, size_t errlen) {
    memset(tn, 0, sizeof *tn);
    tn->net = nn_weights_load(be, path, -1, err, errlen);
    if (!tn->net) return -1;
    char e2[1024];
    if (attach_trainer(cfg, batch, tn, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s: %s", path, e2);
        train_net_free(tn);
        return -1;
    }
    if (with_state && nn_weights_read(tn->net, tn->nt, path, err, errlen) != 0) {
        train_net_free(tn);
        return -1;
    }
    return 0;
}

void train_net_free(train_net_t *tn) {
    if (!tn) return;
    nn_optim_free(tn->nt);
    nn_net_free(tn->net);
    memset(tn, 0, sizeof *tn);
}

void train_sums_add(train_sums_t *a, const nn_metrics_t *m) {
    if (m->policy_positions > 0)
        a->policy += m->policy_loss * m->policy_positions, a->acc += m->policy_acc * m->policy_positions,
            a->n_policy += m->policy_positions;
    a->value += m->value_loss, a->legal += m->legal_loss, a->f1 += m->legal_f1, a->total += m->loss, a->n++;
    if (m->moves_left_positions > 0)
        a->ml_abs += m->moves_left_mae * m->moves_left_positions, a->n_ml += m->moves_left_positions;
    if (m->opp_positions > 0) a->opp += m->opp_policy_loss * m->opp_positions, a->n_opp += m->opp_positions;
}

train_means_t train_sums_mean(const train_sums_t *a) {
    double k = (double)a->n, kp = (double)a->n_policy;
    train_means_t r = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    if (a->n_ml > 0) r.moves_left_mae = a->ml_abs / (double)a->n_ml;
    if (a->n_opp > 0) r.opp_policy_loss = a->opp / (double)a->n_opp;
    if (a->n_policy > 0) r.policy_loss = a->policy / kp, r.policy_acc = a->acc / kp;
    if (a->n > 0) r.value_loss = a->value / k, r.legal_loss = a->legal / k, r.legal_f1 = a->f1 / k, r.loss = a->total / k;
    return r;
}

static int stop_seen(const train_loop_t *lp) {
    return compat_stop_requested() || (lp->stop && atomic_load(lp->stop));
}

/* One data-parallel step s on lp's window into *m: 0, 1 when a stop ended
 * the loop, -1 with err and r->failed_in. */
static int dist_step(const train_loop_t *lp, int64_t s, nn_metrics_t *m, train_loop_result_t *r, char *err,
                     size_t errlen) {
    uint64_t key = train_window_key(lp->win, lp->seed, lp->cycle, s);
    /* every rank, the same collective calls, a failed sampling included */
    int sampled = train_window_sample(lp->win, key, lp->rows, lp->batch, err, errlen) == 0;
    nn_batch_t bt = shard_batch_view(lp->batch);
    int stop_all = 0;
    if (train_dist_step(lp->dist, sampled ? &bt : NULL, stop_seen(lp), m, &stop_all, err, errlen) != 0) {
        r->failed_in = TRAIN_LOOP_STEP;
        return -1;
    }
    return stop_all ? 1 : 0;
}

/* Books step s into r (the time since *mark: sampling and stepping, not the
 * hooks) and calls the hook: 0, or -1 with err when the hook ends the loop. */
static int step_taken(const train_loop_t *lp, int64_t s, const nn_metrics_t *m, int64_t *mark, train_loop_result_t *r,
                      char *err, size_t errlen) {
    r->train_ns += (double)(compat_now_ns() - *mark);
    r->steps++;
    r->last = *m;
    train_sums_add(&r->sums, m);
    int rc = 0;
    if (lp->on_step && lp->on_step(lp->user, s, m, r, err, errlen) != 0) {
        r->failed_in = TRAIN_LOOP_HOOK;
        r->failed_step = s;
        rc = -1;
    }
    *mark = compat_now_ns();
    return rc;
}

/* The prefetch: step s + 1's batch is sampled on a thread of its own while
 * step s runs, into the second of two buffers (a device step then never waits
 * for the sampler; on the CPU the sampler fills a core the step leaves idle).
 * Sampling is keyed by step (train_key), so the batches, and the weights, are
 * the same as without it. */
typedef struct {
    const train_loop_t *lp;
    uint64_t key;
    shard_batch_t *batch;
    int rc;
    char err[512];
} prefetch_t;

static void *prefetch_main(void *arg) {
    prefetch_t *p = arg;
    p->rc = train_window_sample(p->lp->win, p->key, p->lp->rows, p->batch, p->err, sizeof p->err);
    return NULL;
}

/* Step s on a resident window (train_window_gather: the batch is assembled
 * on the device, queued before the step; nothing to prefetch): 0, or -1
 * with err and *in. */
static int resident_step(const train_loop_t *lp, int64_t s, int64_t *id, train_loop_fail_t *in, char *err,
                         size_t errlen) {
    nn_batch_t bt;
    *in = TRAIN_LOOP_SAMPLE;
    if (train_window_gather(lp->win, train_window_key(lp->win, lp->seed, lp->cycle, s), lp->rows, lp->nt, &bt, err, errlen) != 0)
        return -1;
    *in = TRAIN_LOOP_STEP;
    return nn_train_step_launch(lp->nt, &bt, id, err, errlen);
}

/* The step whose metrics are on their way (nn_train_step_launch): loop step
 * s (-1: none) and the trainer's name for its record. */
typedef struct {
    int64_t s, id;
} late_t;

/* Reads the late step's metrics and books it (hook included): 0 (also when
 * none is late), or -1 with err and r->failed_in / failed_step. */
static int late_flush(const train_loop_t *lp, late_t *late, int64_t *mark, train_loop_result_t *r, char *err,
                      size_t errlen) {
    if (late->s < 0) return 0;
    int64_t s = late->s;
    late->s = -1;
    nn_metrics_t m;
    if (nn_train_step_metrics(lp->nt, late->id, &m, err, errlen) != 0) {
        r->failed_in = TRAIN_LOOP_STEP;
        r->failed_step = s;
        return -1;
    }
    return step_taken(lp, s, &m, mark, r, err, errlen);
}

/* Step s failed in `in` with err: the late step (which came first) is booked
 * before, and its own failure, if any, is the one reported. TRAIN_ERROR. */
static int fail_after_flush(const train_loop_t *lp, late_t *late, int64_t *mark, int64_t s, train_loop_fail_t in,
                            train_loop_result_t *r, char *err, size_t errlen) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err);
    if (late_flush(lp, late, mark, r, err, errlen) != 0) return TRAIN_ERROR;
    set_err(err, errlen, "%s", msg);
    r->failed_in = in;
    r->failed_step = s;
    return TRAIN_ERROR;
}

/* The one-process loop: step s is queued (nn_train_step_launch) before step
 * s - 1's metrics are read and booked, so the device never waits for the
 * host's bookkeeping and the host waits once per step at most for a step
 * queued before the one running. Steps the caller's barrier names are read
 * before the next is queued (their hook sees the weights after them); a stop,
 * a failure and the end read the late step first: every step taken is booked
 * in order, and nothing leaves the loop unread. `next`: the prefetch's second
 * buffer, or NULL (sampling in turn). */
static int run_late(const train_loop_t *lp, shard_batch_t *next, late_t *lt, train_loop_result_t *r, char *err,
                    size_t errlen) {
    shard_batch_t *cur = lp->batch;
    int have = 0; /* cur holds step s's batch already */
    int resident = train_window_is_resident(lp->win);
    int64_t mark = compat_now_ns();
    for (int64_t s = lp->first; s < lp->end; s++) {
        if (stop_seen(lp)) return late_flush(lp, lt, &mark, r, err, errlen) == 0 ? TRAIN_STOPPED : TRAIN_ERROR;
        int64_t id = 0;
        train_loop_fail_t in = TRAIN_LOOP_STEP;
        prefetch_t p = {lp, train_window_key(lp->win, lp->seed, lp->cycle, s + 1), next, -1, ""};
        int threaded = 0, bad;
        if (resident) {
            bad = resident_step(lp, s, &id, &in, err, errlen) != 0;
        } else {
            if (!have && train_window_sample(lp->win, train_window_key(lp->win, lp->seed, lp->cycle, s), lp->rows, cur, err, errlen) != 0)
                return fail_after_flush(lp, lt, &mark, s, TRAIN_LOOP_SAMPLE, r, err, errlen);
            compat_thread_t th;
            threaded = next && s + 1 < lp->end && compat_thread_create(&th, prefetch_main, &p) == 0;
            nn_batch_t bt = shard_batch_view(cur);
            bad = nn_train_step_launch(lp->nt, &bt, &id, err, errlen) != 0;
            if (threaded) compat_thread_join(th);
        }
        if (bad) return fail_after_flush(lp, lt, &mark, s, in, r, err, errlen);
        late_t prev = *lt;
        *lt = (late_t){s, id};
        if (late_flush(lp, &prev, &mark, r, err, errlen) != 0) return TRAIN_ERROR; /* step s - 1 */
        if (lp->barrier && lp->barrier(lp->user, s) && late_flush(lp, lt, &mark, r, err, errlen) != 0)
            return TRAIN_ERROR;
        /* A failed prefetch is sampled again at its own step, which then
         * reports the error as without the prefetch. */
        have = threaded && p.rc == 0;
        if (have) {
            shard_batch_t *t = cur;
            cur = next;
            next = t;
        }
    }
    return late_flush(lp, lt, &mark, r, err, errlen) == 0 ? TRAIN_OK : TRAIN_ERROR;
}

static int run_one_process(const train_loop_t *lp, shard_batch_t *next, train_loop_result_t *r, char *err,
                           size_t errlen) {
    late_t late = {-1, 0};
    int rc = run_late(lp, next, &late, r, err, errlen);
    if (late.s >= 0) { /* a step queued after a failure: its record goes */
        char e2[256];
        (void)nn_train_step_metrics(lp->nt, late.id, NULL, e2, sizeof e2);
    }
    return rc;
}

int train_loop_run(const train_loop_t *lp, train_loop_result_t *r, char *err, size_t errlen) {
    memset(r, 0, sizeof r[0]);
    r->failed_step = -1;
    if (!lp->dist) {
        char e2[256];
        shard_batch_t *next = lp->end - lp->first > 1 && !train_window_is_resident(lp->win)
                                  ? shard_batch_new(&lp->batch->fmt, lp->batch->cap, lp->batch->nnz_cap, e2, sizeof e2)
                                  : NULL; /* out of memory: the loop runs without the prefetch */
        int rc = run_one_process(lp, next, r, err, errlen);
        shard_batch_free(next);
        return rc;
    }
    /* Data-parallel: the gradients go through the host every step
     * (train/dist_train.c), so the step waits for the device anyway. */
    nn_metrics_t m;
    memset(&m, 0, sizeof m);
    int64_t mark = compat_now_ns();
    for (int64_t s = lp->first; s < lp->end; s++) {
        int st = dist_step(lp, s, &m, r, err, errlen);
        if (st > 0) return TRAIN_STOPPED;
        if (st < 0) {
            r->failed_step = s;
            return TRAIN_ERROR;
        }
        if (step_taken(lp, s, &m, &mark, r, err, errlen) != 0) return TRAIN_ERROR;
    }
    return TRAIN_OK;
}
