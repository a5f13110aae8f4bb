/* trainer.c - the trainer: model files, cycles, the trainer thread. See
 * trainer.h for the contract.
 *
 * Owns: the struct train_trainer, its net + nn trainer (optimizer state) +
 * backend instance, its read-only koma.db connection, its window (shard
 * cache) and batch buffers, what a cycle does after each step (cycle_hook:
 * the divergence check, train_steps rows, progress) and the trainer thread's
 * queue and results.
 * Does not own: the step loop and the net's creation and loading
 * (train/loop.c, shared with train --from-games), saving and registering a
 * model (train/model.c: train_model_save), shards (data/shard.c), SQL
 * (data/db.c; all writes go through the writer thread, train/model.c), the
 * network (nn/).
 *
 * Errors: a failed step (the backend's sticky error, nn/backend.h), a
 * non-finite loss, or weights nn_weights_save refuses (non-finite) end the
 * cycle with TRAIN_ERROR and its message: the trainer goes back to the newest
 * model's file and writes, registers and publishes nothing. cycle_hook sees
 * step s's loss one step late (train/loop.h: step s + 1 is queued first);
 * the loop reads the last step's before it returns, so the check has seen
 * every step of the cycle before the save and the publish.
 *
 * Device memory (--device-window, train_window_setup). On a GPU the window
 * lives on the device: when a shard enters the window its columns (planes,
 * hand, legal, policy entries, result, root_q) are uploaded once into one
 * device allocation (shards never change), a step uploads its rows'
 * references and policy offsets (12 bytes a row), and gather_rows writes the
 * minibatch into the trainer's staging (train/window.c). On the CPU backend
 * the mapped shards are the window and a minibatch is copied from them into
 * the host buffers nn_train_step reads; "on" puts the CPU backend on the
 * device route too (the tests compare the two).
 */
#include "train/trainer.h"
#include "compat/err.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/runlog.h"
#include "data/db.h"
#include "data/run.h"
#include "data/shard.h"
#include "nn/backend_cuda.h"
#include "nn/registry.h"
#include "nn/weights.h"
#include "train/follow.h"
#include "train/loop.h"
#include "train/model.h"
#include "train/window.h"

#define TRAIN_QUEUE 64

/* ---- the window and step formulas ------------------------------------------------ */
int64_t train_window_size(const train_config_t *c, int64_t N) {
    if (N <= 0) return 0;
    double m = (double)(c->window_min > 0 ? c->window_min : 1);
    if ((double)N <= m) return N;
    double a = c->window_alpha > 0 ? c->window_alpha : 1.0;
    double w = m * (1.0 + c->window_beta * (pow((double)N / m, a) - 1.0) / a);
    if (c->window_max > 0 && w > (double)c->window_max) w = (double)c->window_max;
    if (w > (double)N) w = (double)N;
    if (w < m) w = m;
    return (int64_t)w;
}

int64_t train_steps_for(const train_config_t *c, int64_t new_positions) {
    double want = c->samples_per_position * (double)(new_positions > 0 ? new_positions : 0);
    double steps = ceil(want / (double)(c->batch > 0 ? c->batch : 1));
    int64_t s = steps > 1e15 ? (int64_t)1e15 : (int64_t)steps;
    if (s < c->min_steps_per_cycle) s = c->min_steps_per_cycle;
    if (s > c->max_steps_per_cycle) s = c->max_steps_per_cycle;
    return s;
}

/* ---- the trainer --------------------------------------------------------------------- */
typedef struct {
    int64_t cycle;
    int status;
    char err[1024];
    train_cycle_report_t rep;
} result_t;

struct train_trainer {
    train_config_t cfg;
    runlog_sink_t log; /* cfg.log, else stderr after "train: " */
    char run_dir[1024];
    db_writer_t *writer;
    nn_server_t *server;
    db_t *db; /* read-only */
    nn_backend_t *be;
    train_net_t tn; /* the net, its optimizer state, the shard format */
    int32_t rows;   /* its slice of a step: the batch, or batch / K in a training group of K ranks */
    train_dist_t *td; /* the group's data-parallel steps (made at the first cycle), or NULL */
    train_window_t *win;
    shard_batch_t *batch;
    db_shard_t *list; /* the last shard listing */
    int32_t nlist;

    _Atomic int64_t latest_cycle; /* newest registered model (read by any thread) */
    char latest_rel[DB_PATH_MAX];
    char latest_xxh3[17];      /* of latest_rel, as registered in koma.db */
    int64_t latest_steps;  /* its train_steps (for a file without optimizer state) */
    int64_t total_samples; /* samples behind the newest model */

    compat_mutex_t run_mu; /* one cycle at a time */
    atomic_int stop;       /* abandon the cycle in flight */

    /* trainer thread; guarded by mu */
    compat_mutex_t mu;
    compat_cond_t cv;
    compat_thread_t thread;
    int started, stopping, exited, joined;
    int64_t queue[TRAIN_QUEUE];
    int32_t qhead, qn;
    int64_t running; /* -1 none */
    train_progress_t progress; /* the cycle in flight, any thread reads it */
    result_t results[TRAIN_QUEUE];
    int32_t nresults, rnext;
};

static void set_progress(train_trainer_t *tr, int64_t cycle, int64_t step, int64_t steps, int64_t samples,
                         double train_ns) {
    compat_mutex_lock(&tr->mu);
    tr->progress = (train_progress_t){.cycle = cycle, .step = step, .steps = steps,
                                      .samples_per_s = train_ns > 0 ? (double)samples / (train_ns * 1e-9) : 0};
    compat_mutex_unlock(&tr->mu);
}

void train_trainer_progress(train_trainer_t *tr, train_progress_t *out) {
    compat_mutex_lock(&tr->mu);
    *out = tr->progress;
    compat_mutex_unlock(&tr->mu);
}

/* Loads the weights and optimizer state of <run_dir>/rel into the trainer's
 * net (which has the file's configuration). A file without optimizer state
 * (a net imported from elsewhere) loads with zero momentum and step count
 * `steps`. Returns 0, or -1 with err (nothing changed). */
/* Loads the model file rel (registered with XXH3 xxh3, "" = unknown) and its
 * optimizer state; a file that is not the one registered is refused, so that
 * a run never resumes from a net its database does not describe. */
static int load_state(train_trainer_t *tr, const char *rel, const char *xxh3, int64_t steps, char *err,
                      size_t errlen) {
    char path[1400];
    run_path(tr->run_dir, rel, path, sizeof path);
    if (run_verify_file(path, xxh3, err, errlen) != 0) return -1;
    if (nn_weights_read(tr->tn.net, tr->tn.nt, path, err, errlen) == 0) return 0;
    char e2[1024];
    if (nn_weights_read(tr->tn.net, NULL, path, e2, sizeof e2) != 0) return -1; /* err says why */
    runlog_printf(&tr->log, "%s has no optimizer state (%s): momentum starts at zero, step %" PRId64, path, err,
                  steps);
    int64_t np = 0;
    float *mom = nn_optim_momentum(tr->tn.nt);
    nn_net_params(tr->tn.net, &np, NULL);
    tr->be->memset_zero(tr->be, mom, sizeof(float) * (size_t)np);
    nn_optim_set_step_count(tr->tn.nt, steps);
    return 0;
}

static int64_t latest_run_id(db_t *db) {
    db_run_t r;
    if (db_run_latest(db, &r) != DB_OK) return 0;
    int64_t id = r.id;
    db_run_clear(&r);
    return id;
}

/* A new run from another (--init FROM): FROM's newest net with its
 * optimizer state and counters (steps, samples) written and registered as
 * cycle 0, with FROM's lineage and a new entry for this run. A net without
 * optimizer state (a shipped net) starts with zero momentum. */
static int init_first(train_trainer_t *tr, char *err, size_t errlen) {
    char model[1400], e2[1024];
    int64_t steps = 0, samples = 0;
    train_lineage_t *anc = malloc(sizeof *anc);
    if (!anc) {
        set_err(err, errlen, "%s: out of memory", tr->run_dir);
        return -1;
    }
    int rc = train_lineage_from(tr->cfg.init, model, sizeof model, &steps, &samples, anc, err, errlen);
    if (rc == 0 && train_net_load(tr->be, &tr->cfg, tr->rows, model, 0, &tr->tn, e2, sizeof e2) != 0) {
        set_err(err, errlen, "--init %s: %s", tr->cfg.init, e2);
        rc = -1;
    }
    if (rc == 0 && nn_weights_read(tr->tn.net, tr->tn.nt, model, e2, sizeof e2) != 0) {
        if (steps < 0) steps = 0;
        runlog_printf(&tr->log, "--init %s: %s has no optimizer state (%s): momentum starts at zero, step %" PRId64,
                      tr->cfg.init, model, e2, steps);
        int64_t np = 0;
        float *mom = nn_optim_momentum(tr->tn.nt);
        nn_net_params(tr->tn.net, &np, NULL);
        tr->be->memset_zero(tr->be, mom, sizeof(float) * (size_t)np);
        nn_optim_set_step_count(tr->tn.nt, steps);
    } else if (rc == 0) {
        steps = nn_optim_step_count(tr->tn.nt); /* the file's own count is the one the schedule follows */
    }
    if (rc == 0 && anc->r[anc->n - 1].steps < 0) anc->r[anc->n - 1].steps = steps;
    db_model_t m;
    memset(&m, 0, sizeof m);
    m.cycle = 0;
    m.run_id = latest_run_id(tr->db);
    m.train_steps = steps;
    m.train_samples = samples;
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    if (rc == 0)
        rc = train_model_save_from(tr->writer, tr->run_dir, tr->tn.net, tr->tn.nt, &m, anc, &tr->stop, err, errlen);
    if (rc == 0) {
        tr->latest_cycle = 0;
        snprintf(tr->latest_rel, sizeof tr->latest_rel, "%s", m.path);
        snprintf(tr->latest_xxh3, sizeof tr->latest_xxh3, "%s", m.xxh3);
        tr->latest_steps = steps;
        tr->total_samples = samples;
        runlog_printf(&tr->log,
                      "new run %s from %s: %s net (step %" PRId64 ", %" PRId64 " samples, %d runs before "
                      "this one, %.1f CPU-minutes and %.1f GPU-minutes in all) written as %s",
                      tr->run_dir, model, m.arch, steps, samples, (int)anc->n, train_lineage_cpu_minutes(anc),
                      train_lineage_gpu_minutes(anc), m.path);
    }
    free(anc);
    return rc;
}

/* A new run: random net from the config, written and registered as cycle 0. */
static int create_first(train_trainer_t *tr, char *err, size_t errlen) {
    if (tr->cfg.init[0]) return init_first(tr, err, errlen);
    char e2[1024];
    if (train_net_new(tr->be, &tr->cfg, tr->rows, &tr->tn, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s: %s", tr->run_dir, e2);
        return -1;
    }
    db_model_t m;
    memset(&m, 0, sizeof m);
    m.cycle = 0;
    m.run_id = latest_run_id(tr->db);
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    if (train_model_save(tr->writer, tr->run_dir, tr->tn.net, tr->tn.nt, &m, &tr->stop, err, errlen) != 0) return -1;
    tr->latest_cycle = 0;
    snprintf(tr->latest_rel, sizeof tr->latest_rel, "%s", m.path);
    snprintf(tr->latest_xxh3, sizeof tr->latest_xxh3, "%s", m.xxh3);
    tr->latest_steps = 0;
    tr->total_samples = 0;
    runlog_printf(&tr->log, "new run %s: random %s %s net written as %s", tr->run_dir, m.arch, tr->cfg.backend,
                  m.path);
    return 0;
}

static int open_latest(train_trainer_t *tr, const db_model_t *row, char *err, size_t errlen) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", tr->run_dir, row->path);
    if (!compat_file_exists(path)) {
        set_err(err, errlen, "%s: model of cycle %d is registered in koma.db but the file is missing", path, row->cycle);
        return -1;
    }
    /* the optimizer state is read by load_state, which also takes a file without one */
    if (train_net_load(tr->be, &tr->cfg, tr->rows, path, 0, &tr->tn, err, errlen) != 0) return -1;
    if (load_state(tr, row->path, row->xxh3, row->train_steps, err, errlen) != 0) return -1;
    tr->latest_cycle = row->cycle;
    snprintf(tr->latest_rel, sizeof tr->latest_rel, "%s", row->path);
    snprintf(tr->latest_xxh3, sizeof tr->latest_xxh3, "%s", row->xxh3);
    tr->latest_steps = row->train_steps;
    tr->total_samples = row->train_samples;
    const nn_net_config_t *nc = nn_net_config(tr->tn.net);
    nn_net_config_t want = *nc;
    if (nn_net_arch_parse(tr->cfg.net, &want) == 0 && !nn_net_arch_is(tr->cfg.net, nc)) {
        char arch[32];
        runlog_printf(&tr->log, "the run's net is %s (%s); net %s applies only to a new run",
                      nn_net_arch_format(nc, arch, sizeof arch), row->path, tr->cfg.net);
    }
    int64_t step = nn_optim_step_count(tr->tn.nt);
    if (row->cycle == 0 && step == 0) /* the run's new net, never trained: nothing to resume */
        runlog_printf(&tr->log, "starting %s from its new net %s (cycle 0, no training steps yet)", tr->run_dir,
                      row->path);
    else
        runlog_printf(&tr->log, "resuming %s from %s (cycle %d, step %" PRId64 ")", tr->run_dir, row->path,
                      row->cycle, step);
    train_lineage_t *l = tr->cfg.init[0] ? malloc(sizeof *l) : NULL;
    if (l && train_lineage_read(path, l, err, errlen) == 0 && l->n <= 1) /* a run not made by --init */
        runlog_printf(&tr->log, "--init %s applies only to a new run: %s goes on from its own nets", tr->cfg.init,
                      tr->run_dir);
    free(l);
    return 0;
}

static void note_stale(void *user, const char *path) {
    train_trainer_t *tr = user;
    runlog_printf(&tr->log, "removed %s, left by a write that was killed before its rename", path);
}

train_trainer_t *train_trainer_new(const train_config_t *cfg_in, const char *run_dir, db_writer_t *writer,
                                   nn_server_t *server, char *err, size_t errlen) {
    if (!cfg_in || !run_dir || !run_dir[0]) {
        set_err(err, errlen, "trainer: no config or run directory");
        return NULL;
    }
    if (!writer) {
        set_err(err, errlen, "%s: trainer: no writer thread (koma.db is written only through it)", run_dir);
        return NULL;
    }
    train_trainer_t *tr = calloc(1, sizeof *tr);
    if (!tr) {
        set_err(err, errlen, "%s: trainer: out of memory", run_dir);
        return NULL;
    }
    tr->cfg = *cfg_in;
    tr->log = runlog_sink(tr->cfg.log, tr->cfg.log_user, "train: ");
    char e2[1024];
    if (train_config_check(&tr->cfg, e2, sizeof e2) != 0) {
        set_err(err, errlen, "trainer config: %s", e2);
        free(tr);
        return NULL;
    }
    snprintf(tr->run_dir, sizeof tr->run_dir, "%s", run_dir);
    int32_t K = tr->cfg.group ? dist_size(tr->cfg.group) : 1;
    if (K > 1 && (tr->cfg.batch % K != 0 || !tr->cfg.plan)) {
        if (!tr->cfg.plan)
            set_err(err, errlen, "trainer: a training group of %d ranks needs a plan sender (train_config_t.plan)",
                    (int)K);
        else
            set_err(err, errlen, "trainer: --batch %d is the global batch of the %d training ranks: it must be a "
                    "multiple of %d", tr->cfg.batch, (int)K, (int)K);
        free(tr);
        return NULL;
    }
    tr->rows = train_dist_local_batch(tr->cfg.batch, K);
    tr->writer = writer;
    tr->server = server;
    tr->running = -1;
    tr->progress.cycle = -1;
    atomic_init(&tr->latest_cycle, -1);
    compat_mutex_init(&tr->run_mu);
    compat_mutex_init(&tr->mu);
    compat_cond_init(&tr->cv);
    atomic_init(&tr->stop, 0);

    char path[1400];
    snprintf(path, sizeof path, "%s/" TRAIN_MODELS_DIR, run_dir);
    if (compat_mkdir_p(path, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s: %s", path, e2);
        goto fail;
    }
    train_remove_stale_tmp(path, note_stale, tr);
    run_path(run_dir, RUN_DB, path, sizeof path);
    if (!compat_file_exists(path)) {
        set_err(err, errlen, "%s: no koma.db in the run directory", run_dir);
        goto fail;
    }
    if (db_open(path, DB_OPEN_READONLY, &tr->db, e2, sizeof e2) != DB_OK) {
        set_err(err, errlen, "%s", e2);
        goto fail;
    }
    tr->be = train_backend_new(&tr->cfg, err, errlen);
    if (!tr->be) goto fail;
    train_lineage_clock_ns(); /* the GPU minutes of the lineage count from here */
    db_model_t row;
    db_status_t st = db_model_latest(tr->db, &row);
    if (st == DB_OK) {
        if (open_latest(tr, &row, err, errlen) != 0) goto fail;
    } else if (st == DB_NOTFOUND) {
        if (create_first(tr, err, errlen) != 0) goto fail;
    } else {
        set_err(err, errlen, "%s", db_errmsg(tr->db));
        goto fail;
    }
    tr->win = train_window_new(run_dir, &tr->tn.fmt, tr->cfg.log, tr->cfg.log_user, err, errlen);
    if (!tr->win || train_window_setup(&tr->cfg, tr->win, tr->be, K, err, errlen) < 0) goto fail;
    tr->batch = shard_batch_new(&tr->tn.fmt, tr->cfg.batch, 0, e2, sizeof e2);
    if (!tr->batch) {
        set_err(err, errlen, "%s: batch buffers: %s", run_dir, e2);
        goto fail;
    }
    return tr;
fail:
    train_trainer_free(tr);
    return NULL;
}

int64_t train_trainer_latest_cycle(const train_trainer_t *tr) {
    return tr ? atomic_load(&((train_trainer_t *)tr)->latest_cycle) : -1;
}
nn_net_t *train_trainer_net(train_trainer_t *tr) { return tr ? tr->tn.net : NULL; }
nn_optim_t *train_trainer_nn(train_trainer_t *tr) { return tr ? tr->tn.nt : NULL; }

/* Publishes <run_dir>/rel as `cycle` (see trainer.h for the generation). */
static int publish(train_trainer_t *tr, int64_t cycle, const char *rel, char *err, size_t errlen) {
    if (!tr->server) return 0;
    char path[1400], e2[1024];
    snprintf(path, sizeof path, "%s/%s", tr->run_dir, rel);
    int64_t cur = nn_server_generation(tr->server), gen = cycle + 1;
    if (gen <= cur) {
        runlog_printf(&tr->log, "publishing cycle %" PRId64 " as generation %" PRId64
                      ": the server is at generation %" PRId64, cycle, cur + 1, cur);
        gen = 0;
    }
    int64_t got = nn_server_publish_file(tr->server, path, gen, e2, sizeof e2);
    if (got < 0) {
        set_err(err, errlen, "%s: publish to the inference server: %s", path, e2);
        return -1;
    }
    return 0;
}

/* A cycle that already has a model: report it, publish it when the server lags. */
static int cycle_done_before(train_trainer_t *tr, int64_t cycle, train_cycle_report_t *rep, char *err,
                             size_t errlen) {
    db_model_t row;
    db_status_t st = db_model_by_cycle(tr->db, (int32_t)cycle, &row);
    if (st != DB_OK) {
        set_err(err, errlen, "%s: cycle %" PRId64 " is not above the newest model's (%" PRId64 ") and has no model: %s",
                tr->run_dir, cycle, tr->latest_cycle, db_errmsg(tr->db));
        return TRAIN_ERROR;
    }
    rep->already = 1;
    rep->step = row.train_steps;
    rep->policy_loss = row.loss_policy;
    rep->value_loss = row.loss_value;
    rep->legal_loss = row.loss_legal;
    rep->loss = row.loss_total;
    rep->policy_acc = rep->legal_f1 = NAN;
    snprintf(rep->model_path, sizeof rep->model_path, "%s", row.path);
    if (tr->server && cycle == tr->latest_cycle && nn_server_generation(tr->server) < cycle + 1)
        if (publish(tr, cycle, row.path, err, errlen) != 0) return TRAIN_ERROR;
    return TRAIN_OK;
}

/* Puts the trainer back to the newest model after an abandoned cycle. */
static void restore(train_trainer_t *tr) {
    char e2[1024];
    if (load_state(tr, tr->latest_rel, tr->latest_xxh3, tr->latest_steps, e2, sizeof e2) != 0)
        runlog_printf(&tr->log, "cannot restore the state of %s: %s", tr->latest_rel, e2);
}

/* What the trainer does after each step of a cycle (train_step_hook). */
typedef struct {
    train_trainer_t *tr;
    int64_t cycle, steps, last_log;
} cycle_hook_t;

/* A non-finite loss ends the cycle (these weights must go nowhere); else the
 * step's train_steps row, the progress and, every cfg.progress_ms, a log line. */
static int cycle_hook(void *user, int64_t s, const nn_metrics_t *m, const train_loop_result_t *r, char *err,
                      size_t errlen) {
    cycle_hook_t *h = user;
    train_trainer_t *tr = h->tr;
    if (!isfinite(m->loss) || !isfinite(m->grad_norm)) {
        set_err(err, errlen, "%s: training step %" PRId64 " of cycle %" PRId64 ": non-finite loss %g (policy %g, value %g, "
                "legal %g, gradient norm %g); nothing written or published", tr->run_dir, s, h->cycle, m->loss,
                m->policy_loss, m->value_loss, m->legal_loss, m->grad_norm);
        return -1;
    }
    int64_t samples = r->steps * tr->cfg.batch;
    db_train_step_t row = {.step = m->step,
                           .cycle = (int32_t)h->cycle,
                           .time = 0,
                           .lr = m->lr,
                           .samples = tr->total_samples + samples,
                           .loss_policy = m->policy_loss,
                           .loss_value = m->value_loss,
                           .loss_legal = m->legal_loss,
                           .loss_total = m->loss,
                           .acc_policy = m->policy_acc,
                           .acc_value = NAN,
                           .acc_legal = m->legal_f1,
                           .grad_norm = m->grad_norm};
    db_writer_train_step(tr->writer, &row, -1); /* a stopping writer refuses it: the rows are figures only */
    set_progress(tr, h->cycle, s + 1, h->steps, samples, r->train_ns);
    int64_t every = tr->cfg.progress_ms ? tr->cfg.progress_ms : TRAIN_PROGRESS_MS;
    if (every < 0 || compat_now_ms() - h->last_log >= every) {
        h->last_log = compat_now_ms();
        char heads[96] = ""; /* the optional heads' figures, on a net that has them */
        if (isfinite(m->moves_left_mae) || isfinite(m->opp_policy_loss))
            snprintf(heads, sizeof heads, " moves-left %.1f plies opp %.4f", m->moves_left_mae, m->opp_policy_loss);
        runlog_printf(&tr->log, "cycle %" PRId64 ": step %" PRId64 "/%" PRId64 ", %.0f samples/s, policy %.4f value "
                      "%.4f legal %.5f%s", h->cycle, s + 1, h->steps, (double)samples / (r->train_ns * 1e-9),
                      m->policy_loss, m->value_loss, m->legal_loss, heads);
    }
    return 0;
}

/* A cycle's steps with the training group: the plan to the other ranks,
 * then the group's protocol (train_group_run). A plan that cannot be sent
 * fails the cycle here alone (the others never heard of it). */
static int group_cycle(train_trainer_t *tr, const train_loop_t *lp, int64_t want, int64_t positions,
                       train_loop_result_t *lr, char *err, size_t errlen) {
    train_plan_t plan = {.cycle = lp->cycle, .first = lp->first, .end = lp->end, .want = want,
                         .batch = tr->cfg.batch, .seed = lp->seed, .model_cycle = tr->latest_cycle,
                         .model_steps = tr->latest_steps, .shards = tr->list, .nshards = tr->nlist};
    snprintf(plan.model_rel, sizeof plan.model_rel, "%s", tr->latest_rel);
    snprintf(plan.model_xxh3, sizeof plan.model_xxh3, "%s", tr->latest_xxh3);
    memset(lr, 0, sizeof *lr);
    lr->failed_step = -1;
    lr->failed_in = TRAIN_LOOP_SAMPLE;
    char e2[1024];
    if (tr->cfg.plan(tr->cfg.plan_user, &plan, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s: cycle %" PRId64 ": the plan to the training ranks: %s", tr->run_dir, lp->cycle, e2);
        return TRAIN_ERROR;
    }
    int had = tr->td != NULL;
    int rc = train_group_run(tr->cfg.group, &tr->td, tr->tn.nt, 1, positions, lp, lr, e2, sizeof e2);
    if (!had && tr->td)
        runlog_printf(&tr->log, "training on ranks 0-%d: %s", (int)dist_size(tr->cfg.group) - 1,
                      train_dist_route(tr->td));
    if (rc == TRAIN_ERROR && lr->failed_step < 0) /* before or after the steps */
        set_err(err, errlen, "%s: cycle %" PRId64 ": %s", tr->run_dir, lp->cycle, e2);
    else if (rc != TRAIN_OK)
        set_err(err, errlen, "%s", e2);
    return rc;
}

int train_trainer_run_cycle(train_trainer_t *tr, int64_t cycle, train_cycle_report_t *rep_out, char *err,
                            size_t errlen) {
    train_cycle_report_t rep_local, *rep = rep_out ? rep_out : &rep_local;
    memset(rep, 0, sizeof *rep);
    rep->cycle = cycle;
    if (!tr || cycle < 0 || cycle > INT32_MAX) {
        set_err(err, errlen, "trainer: bad cycle %" PRId64, cycle);
        return TRAIN_ERROR;
    }
    compat_mutex_lock(&tr->run_mu);
    int rc = TRAIN_ERROR;
    int64_t t0 = compat_now_ns();
    char e2[1024];
    if (cycle <= tr->latest_cycle) {
        rc = cycle_done_before(tr, cycle, rep, err, errlen);
        goto out;
    }
    /* The window of this cycle. */
    free(tr->list);
    tr->list = NULL;
    tr->nlist = 0;
    if (db_shards_recent(tr->db, 0, &tr->list, &tr->nlist) != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(tr->db));
        goto out;
    }
    int32_t fv = tr->tn.fmt.features_version;
    int64_t total = train_window_count(tr->list, tr->nlist, fv, -1, cycle);
    rep->new_positions = train_window_count(tr->list, tr->nlist, fv, tr->latest_cycle, cycle);
    int64_t want = train_window_size(&tr->cfg, total);
    int64_t positions = 0;
    int32_t bad = 0;
    if (train_window_select(tr->win, tr->list, tr->nlist, cycle, want, &positions, &bad, err, errlen) != 0) goto out;
    rep->window_positions = positions;
    rep->bad_shards = bad;
    if (positions <= 0) {
        set_err(err, errlen, "%s: no training positions for cycle %" PRId64 " (%" PRId64
                " registered in shards of cycles <= %" PRId64 " with features_version %d, %d bad shard(s) skipped)",
                tr->run_dir, cycle, total, cycle, fv, bad);
        goto out;
    }
    int64_t steps = train_steps_for(&tr->cfg, rep->new_positions);
    int32_t B = tr->cfg.batch;
    cycle_hook_t hook = {tr, cycle, steps, compat_now_ms()};
    train_loop_t lp = {.win = tr->win, .batch = tr->batch, .nt = tr->tn.nt, .rows = B, .seed = tr->cfg.seed,
                       .cycle = cycle, .first = 0, .end = steps, .stop = &tr->stop, .on_step = cycle_hook,
                       .user = &hook};
    train_loop_result_t lr;
    double device_ms = -1; /* not measured */
    set_progress(tr, cycle, 0, steps, 0, 0);
    char le[1024] = "";
    if (tr->cfg.group && dist_size(tr->cfg.group) > 1)
        rc = group_cycle(tr, &lp, want, positions, &lr, le, sizeof le);
    else {
        /* the trainer's device time over the steps (backend.h's stopwatch: CUDA events on its stream,
         * the wall clock on the CPU), for the log line below (tools/loop_summary.c reads it) */
        if (tr->be->timer_mark) tr->be->timer_mark(tr->be, 0);
        rc = train_loop_run(&lp, &lr, le, sizeof le);
        if (tr->be->timer_mark) tr->be->timer_mark(tr->be, 1);
        if (rc == TRAIN_OK && tr->be->timer_ms) device_ms = tr->be->timer_ms(tr->be);
    }
    rep->steps = lr.steps - (lr.failed_in == TRAIN_LOOP_HOOK); /* a diverged step does not count */
    rep->samples = rep->steps * B;
    if (rc != TRAIN_OK) {
        if (rc == TRAIN_STOPPED)
            set_err(err, errlen, "%s: stop requested: cycle %" PRId64 " abandoned after %" PRId64 " of %" PRId64
                    " steps, nothing written", tr->run_dir, cycle, lr.steps, steps);
        else if (lr.failed_in == TRAIN_LOOP_STEP)
            set_err(err, errlen, "%s: training step %" PRId64 " of cycle %" PRId64 ": %s; nothing written or published",
                    tr->run_dir, lr.failed_step, cycle, le);
        else
            set_err(err, errlen, "%s", le); /* the sampler's or cycle_hook's message */
        if (rc == TRAIN_ERROR || lr.steps > 0) restore(tr); /* back to the newest model's weights and state */
        goto out;
    }
    train_means_t mean = train_sums_mean(&lr.sums);
    rep->policy_loss = mean.policy_loss, rep->value_loss = mean.value_loss, rep->legal_loss = mean.legal_loss;
    rep->policy_acc = mean.policy_acc, rep->legal_f1 = mean.legal_f1, rep->loss = mean.loss;
    rep->lr = rep->steps ? lr.last.lr : NAN;
    rep->samples_per_s = lr.train_ns > 0 ? (double)rep->samples / (lr.train_ns * 1e-9) : 0;
    rep->step = nn_optim_step_count(tr->tn.nt);

    /* The file first (durable), then its row, then the server. */
    db_model_t mr;
    memset(&mr, 0, sizeof mr);
    mr.cycle = (int32_t)cycle;
    mr.run_id = latest_run_id(tr->db);
    mr.train_steps = rep->step;
    mr.train_samples = tr->total_samples + rep->samples;
    mr.loss_policy = rep->policy_loss, mr.loss_value = rep->value_loss, mr.loss_legal = rep->legal_loss;
    mr.loss_total = rep->loss;
    rc = TRAIN_ERROR;
    if (train_model_save(tr->writer, tr->run_dir, tr->tn.net, tr->tn.nt, &mr, &tr->stop, err, errlen) != 0) {
        restore(tr); /* a retry retrains from the previous model; the file, if any, is overwritten */
        goto out;
    }
    tr->latest_cycle = cycle;
    snprintf(tr->latest_rel, sizeof tr->latest_rel, "%s", mr.path);
    snprintf(tr->latest_xxh3, sizeof tr->latest_xxh3, "%s", mr.xxh3);
    tr->latest_steps = rep->step;
    tr->total_samples = mr.train_samples;
    snprintf(rep->model_path, sizeof rep->model_path, "%s", mr.path);
    rep->seconds = (double)(compat_now_ns() - t0) * 1e-9;
    if (train_cycle_train_s(tr->writer, (int32_t)cycle, rep->seconds, &tr->stop, e2, sizeof e2) != 0)
        runlog_printf(&tr->log, "%s", e2); /* a figure only */
    char heads[96] = ""; /* the optional heads' figures, on a net that has them */
    if (isfinite(mean.moves_left_mae) || isfinite(mean.opp_policy_loss))
        snprintf(heads, sizeof heads, " moves-left %.1f plies opp %.4f", mean.moves_left_mae, mean.opp_policy_loss);
    runlog_printf(&tr->log, "cycle %" PRId64 ": %" PRId64 " steps x %d (window %" PRId64 " of %" PRId64
                  " positions, %" PRId64 " new%s), policy %.4f value %.4f legal %.5f acc %.3f f1 %.3f%s, %.0f "
                  "samples/s, %.1f s -> %s", cycle, rep->steps, B, positions, total, rep->new_positions,
                  bad ? ", bad shards skipped" : "", rep->policy_loss, rep->value_loss, rep->legal_loss,
                  rep->policy_acc, rep->legal_f1, heads, rep->samples_per_s, rep->seconds, mr.path);
    if (device_ms >= 0)
        runlog_printf(&tr->log, "cycle %" PRId64 ": steps %.3f s, device %.3f s (the trainer's stream, first step "
                      "to last)", cycle, lr.train_ns * 1e-9, device_ms * 1e-3);
    rc = publish(tr, cycle, mr.path, err, errlen) == 0 ? TRAIN_OK : TRAIN_ERROR;
out:
    if (rep->seconds == 0) rep->seconds = (double)(compat_now_ns() - t0) * 1e-9;
    set_progress(tr, -1, 0, 0, 0, 0);
    compat_mutex_unlock(&tr->run_mu);
    return rc;
}

/* ---- the trainer thread -------------------------------------------------------------- */
static void record(train_trainer_t *tr, int64_t cycle, int status, const char *err, const train_cycle_report_t *rep) {
    result_t *r = NULL;
    for (int32_t i = 0; i < tr->nresults; i++)
        if (tr->results[i].cycle == cycle) r = &tr->results[i];
    if (!r) {
        r = &tr->results[tr->rnext];
        tr->rnext = (tr->rnext + 1) % TRAIN_QUEUE;
        if (tr->nresults < TRAIN_QUEUE) tr->nresults++;
    }
    r->cycle = cycle;
    r->status = status;
    snprintf(r->err, sizeof r->err, "%s", err ? err : "");
    r->rep = *rep;
}

static void *thread_main(void *arg) {
    train_trainer_t *tr = arg;
    compat_mutex_lock(&tr->mu);
    for (;;) {
        while (tr->qn == 0 && !tr->stopping) compat_cond_wait(&tr->cv, &tr->mu);
        if (tr->stopping) break;
        int64_t cycle = tr->queue[tr->qhead];
        tr->qhead = (tr->qhead + 1) % TRAIN_QUEUE;
        tr->qn--;
        tr->running = cycle;
        compat_mutex_unlock(&tr->mu);
        train_cycle_report_t rep;
        char err[1024] = "";
        int st = train_trainer_run_cycle(tr, cycle, &rep, err, sizeof err);
        if (st == TRAIN_ERROR) runlog_printf(&tr->log, "cycle %" PRId64 " failed: %s", cycle, err);
        compat_mutex_lock(&tr->mu);
        record(tr, cycle, st, err, &rep);
        tr->running = -1;
        compat_cond_broadcast(&tr->cv);
    }
    tr->exited = 1;
    compat_cond_broadcast(&tr->cv);
    compat_mutex_unlock(&tr->mu);
    return NULL;
}

int train_trainer_start(train_trainer_t *tr) {
    if (!tr) return -1;
    compat_mutex_lock(&tr->mu);
    int rc = -1;
    if (!tr->started) {
        tr->stopping = 0;
        tr->exited = 0;
        tr->joined = 0;
        if (compat_thread_create(&tr->thread, thread_main, tr) == 0) {
            tr->started = 1;
            rc = 0;
        }
    }
    compat_mutex_unlock(&tr->mu);
    return rc;
}

static int queued(const train_trainer_t *tr, int64_t cycle) {
    for (int32_t i = 0; i < tr->qn; i++)
        if (tr->queue[(tr->qhead + i) % TRAIN_QUEUE] == cycle) return 1;
    return 0;
}

int train_trainer_submit(train_trainer_t *tr, int64_t cycle) {
    if (!tr) return -1;
    compat_mutex_lock(&tr->mu);
    int rc = -1;
    if (tr->started && !tr->stopping && cycle >= 0) {
        if (queued(tr, cycle) || tr->running == cycle) {
            rc = 0;
        } else if (tr->qn < TRAIN_QUEUE) {
            /* a new run of a finished cycle replaces its old result when done */
            tr->queue[(tr->qhead + tr->qn) % TRAIN_QUEUE] = cycle;
            tr->qn++;
            for (int32_t i = 0; i < tr->nresults; i++)
                if (tr->results[i].cycle == cycle) tr->results[i].cycle = -1;
            compat_cond_broadcast(&tr->cv);
            rc = 0;
        }
    }
    compat_mutex_unlock(&tr->mu);
    return rc;
}

int train_trainer_wait(train_trainer_t *tr, int64_t cycle, int64_t timeout_ms, train_cycle_report_t *rep, char *err,
                       size_t errlen) {
    if (!tr) {
        set_err(err, errlen, "trainer: NULL");
        return TRAIN_ERROR;
    }
    int64_t deadline = timeout_ms < 0 ? -1 : compat_now_ms() + timeout_ms;
    compat_mutex_lock(&tr->mu);
    int rc;
    for (;;) {
        const result_t *r = NULL;
        for (int32_t i = 0; i < tr->nresults; i++)
            if (tr->results[i].cycle == cycle) r = &tr->results[i];
        if (r) {
            if (rep) *rep = r->rep;
            rc = r->status;
            if (rc != TRAIN_OK) set_err(err, errlen, "%s", r->err);
            break;
        }
        if (tr->stopping || compat_stop_requested()) {
            set_err(err, errlen, "%s: stop requested: cycle %" PRId64 " not finished", tr->run_dir, cycle);
            rc = TRAIN_STOPPED;
            break;
        }
        if (!queued(tr, cycle) && tr->running != cycle) {
            set_err(err, errlen, "%s: cycle %" PRId64 " was not submitted to the trainer thread%s", tr->run_dir, cycle,
                    tr->started ? "" : " (not started)");
            rc = TRAIN_ERROR;
            break;
        }
        int64_t slice = 100;
        if (deadline >= 0) {
            int64_t left = deadline - compat_now_ms();
            if (left <= 0) {
                rc = TRAIN_TIMEOUT;
                break;
            }
            if (left < slice) slice = left;
        }
        compat_cond_timedwait(&tr->cv, &tr->mu, slice);
    }
    compat_mutex_unlock(&tr->mu);
    return rc;
}

void train_trainer_stop(train_trainer_t *tr) {
    if (!tr) return;
    compat_mutex_lock(&tr->mu);
    int join = tr->started && !tr->joined;
    tr->stopping = 1;
    tr->qn = 0;
    if (join) atomic_store(&tr->stop, 1);
    compat_cond_broadcast(&tr->cv);
    compat_mutex_unlock(&tr->mu);
    if (!join) return;
    compat_thread_join(tr->thread);
    compat_mutex_lock(&tr->mu);
    tr->joined = 1;
    tr->started = 0;
    compat_mutex_unlock(&tr->mu);
    atomic_store(&tr->stop, 0); /* synchronous run_cycle works again */
}

void train_trainer_free(train_trainer_t *tr) {
    if (!tr) return;
    train_trainer_stop(tr);
    train_dist_free(tr->td);
    shard_batch_free(tr->batch);
    train_window_free(tr->win);
    free(tr->list);
    train_net_free(&tr->tn);
    nn_backend_free(tr->be);
    db_close(tr->db);
    compat_cond_destroy(&tr->cv);
    compat_mutex_destroy(&tr->mu);
    compat_mutex_destroy(&tr->run_mu);
    free(tr);
}
