/* follow.c - a training group's cycle and a follower of rank 0's trainer;
 * see follow.h. */
#include "train/follow.h"
#include "compat/err.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/run.h"
#include "nn/registry.h"
#include "nn/weights.h"
#include "train/window.h"

/* ---- the cycle on every rank of the group ----------------------------------------- */

int train_group_run(dist_t *group, train_dist_t **td, nn_optim_t *nt, int ready, int64_t positions,
                    const train_loop_t *lp, train_loop_result_t *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->failed_step = -1;
    r->failed_in = TRAIN_LOOP_SAMPLE;
    char e2[1024];
    int all = 0;
    /* 1. every rank ready (its own failure is already in err) */
    if (dist_agree(group, ready, &all, e2, sizeof e2) != 0) {
        set_err(err, errlen, "training group: %s", e2);
        return TRAIN_ERROR;
    }
    if (!all) {
        if (ready)
            set_err(err, errlen, "another rank of the training group could not start the cycle (its message is "
                    "in rank 0's log)");
        return TRAIN_ERROR;
    }
    /* 2. the data-parallel steps, made once every rank has its net */
    int made = 1;
    if (!*td && !(*td = train_dist_new(group, nt, lp->rows, 1, e2, sizeof e2))) made = 0;
    if (dist_agree(group, made, &all, err, errlen) != 0) return TRAIN_ERROR;
    if (!all) {
        if (made) set_err(err, errlen, "another rank of the training group could not set up its steps");
        else set_err(err, errlen, "training group: %s", e2);
        return TRAIN_ERROR;
    }
    /* 3. the same window everywhere (the rows sampled are then the same) */
    int same = 0;
    int32_t bad = -1;
    if (dist_same_u64(group, (uint64_t)positions, &same, &bad, e2, sizeof e2) != 0) {
        set_err(err, errlen, "training group: %s", e2);
        return TRAIN_ERROR;
    }
    if (!same) {
        set_err(err, errlen, "the training window of rank %d of the group does not hold the %s positions of rank 0's "
                "(every training rank must see the same run directory)", (int)bad,
                dist_rank(group) == 0 ? "same number of" : "same");
        return TRAIN_ERROR;
    }
    /* 4. the steps, then 5. the same weights everywhere */
    train_loop_t l = *lp;
    l.dist = *td;
    int rc = train_loop_run(&l, r, err, errlen);
    if (rc == TRAIN_OK && train_dist_check(*td, e2, sizeof e2) != 0) {
        set_err(err, errlen, "after cycle %" PRId64 ": %s", lp->cycle, e2);
        r->failed_in = TRAIN_LOOP_SAMPLE; /* no step failed: failed_step stays -1 */
        return TRAIN_ERROR;
    }
    return rc;
}

/* ---- a follower --------------------------------------------------------------------- */

struct train_follower {
    train_config_t cfg;
    char run_dir[1024];
    dist_t *group;
    nn_backend_t *be;
    train_net_t tn;          /* loaded from the first plan's model */
    train_window_t *win;
    shard_batch_t *batch;    /* the global batch */
    train_dist_t *td;
    int64_t cur_cycle;       /* the model the weights are (-1: unknown, reload) */
};

train_follower_t *train_follower_new(const train_config_t *cfg, const char *run_dir, dist_t *group, char *err,
                                     size_t errlen) {
    train_follower_t *f = calloc(1, sizeof *f);
    if (!f) {
        set_err(err, errlen, "training rank: out of memory");
        return NULL;
    }
    f->cfg = *cfg;
    f->group = group;
    f->cur_cycle = -1;
    snprintf(f->run_dir, sizeof f->run_dir, "%s", run_dir);
    f->cfg.device = nn_device_for_rank(cfg->backend, (int32_t)cfg->device, dist_local_rank(group));
    if (!(f->be = train_backend_new(&f->cfg, err, errlen))) {
        free(f);
        return NULL;
    }
    return f;
}

void train_follower_free(train_follower_t *f) {
    if (!f) return;
    train_dist_free(f->td);
    shard_batch_free(f->batch);
    train_window_free(f->win);
    train_net_free(&f->tn);
    nn_backend_free(f->be);
    free(f);
}

/* The plan's model into the net (made from the first one): verified against
 * the plan's XXH3, with its optimizer state (a file without one: zero
 * momentum at model_steps, as the trainer does). 0, or -1 with err. */
static int load_model(train_follower_t *f, const train_plan_t *p, char *err, size_t errlen) {
    char path[1400], e2[1024];
    run_path(f->run_dir, p->model_rel, path, sizeof path);
    if (run_verify_file(path, p->model_xxh3, e2, sizeof e2) != 0) {
        set_err(err, errlen, "model %" PRId64 ": %s (a training rank reads the run directory: it must be on a file "
                "system every training rank sees)", p->model_cycle, e2);
        return -1;
    }
    int32_t K = dist_size(f->group);
    if (!f->tn.net) {
        if (train_net_load(f->be, &f->cfg, train_dist_local_batch(p->batch, K), path, 0, &f->tn, err, errlen) != 0)
            return -1;
        f->win = train_window_new(f->run_dir, &f->tn.fmt, f->cfg.log, f->cfg.log_user, err, errlen);
        if (!f->win || train_window_setup(&f->cfg, f->win, f->be, K, err, errlen) < 0) return -1;
        if (!(f->batch = shard_batch_new(&f->tn.fmt, p->batch, 0, e2, sizeof e2))) {
            set_err(err, errlen, "batch buffers: %s", e2);
            return -1;
        }
    }
    if (nn_weights_read(f->tn.net, f->tn.nt, path, e2, sizeof e2) == 0) return 0;
    if (nn_weights_read(f->tn.net, NULL, path, err, errlen) != 0) return -1;
    int64_t np = 0;
    float *mom = nn_optim_momentum(f->tn.nt);
    nn_net_params(f->tn.net, &np, NULL);
    f->be->memset_zero(f->be, mom, sizeof(float) * (size_t)np);
    nn_optim_set_step_count(f->tn.nt, p->model_steps);
    return 0;
}

/* The follower's hook: rank 0 ends the cycle on a non-finite loss, and the
 * metrics are the group's, so every rank ends it at the same step. */
static int follow_hook(void *user, int64_t s, const nn_metrics_t *m, const train_loop_result_t *r, char *err,
                       size_t errlen) {
    (void)user, (void)r;
    if (isfinite(m->loss) && isfinite(m->grad_norm)) return 0;
    set_err(err, errlen, "training step %" PRId64 ": non-finite loss %g (gradient norm %g)", s, m->loss, m->grad_norm);
    return -1;
}

int train_follower_cycle(train_follower_t *f, const train_plan_t *p, train_follow_report_t *rep, char *err,
                         size_t errlen) {
    memset(rep, 0, sizeof *rep);
    int64_t t0 = compat_now_ns();
    int ready = 1;
    if (p->batch != f->cfg.batch) {
        set_err(err, errlen, "rank 0 trains with --batch %d, this rank was given %d: every rank needs the same flags",
                (int)p->batch, (int)f->cfg.batch);
        ready = 0;
    }
    if (ready && (!f->tn.net || f->cur_cycle != p->model_cycle)) {
        f->cur_cycle = -1;
        ready = load_model(f, p, err, errlen) == 0;
        rep->loaded = ready;
        if (ready) f->cur_cycle = p->model_cycle;
    }
    int32_t bad = 0;
    if (ready && train_window_select(f->win, p->shards, p->nshards, p->cycle, p->want, &rep->positions, &bad, err,
                                     errlen) != 0)
        ready = 0;
    if (ready && rep->positions <= 0) {
        set_err(err, errlen, "%s: no training positions for cycle %" PRId64 " in the %d shard(s) of the plan (%d "
                "unreadable: a training rank needs the run directory on a file system it sees)", f->run_dir,
                p->cycle, (int)p->nshards, (int)bad);
        ready = 0;
    }
    train_loop_t lp = {.win = f->win, .batch = f->batch, .nt = f->tn.nt, .rows = p->batch, .seed = p->seed,
                       .cycle = p->cycle, .first = p->first, .end = p->end, .on_step = follow_hook};
    train_loop_result_t r;
    int rc = train_group_run(f->group, &f->td, f->tn.nt, ready, rep->positions, &lp, &r, err, errlen);
    rep->steps = r.steps;
    rep->seconds = (double)(compat_now_ns() - t0) * 1e-9;
    rep->route = f->td ? train_dist_route(f->td) : NULL;
    if (rc == TRAIN_OK) {
        f->cur_cycle = p->cycle; /* the weights rank 0 saves as model cycle (checked the same bits) */
        rep->weights = train_dist_weights_hash(f->td);
    } else if (ready) {
        f->cur_cycle = -1; /* steps taken or not, the weights are reloaded next time */
    }
    return rc;
}
