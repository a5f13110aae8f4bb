/* loop.h - the one training loop (internal to train/): what the trainer
 * thread (train/trainer.c), a training group's follower (train/follow.c)
 * and `train --from-games` (train/main.c) all run.
 *
 * Owns: the setup every trainer shares (the backend the config names, the
 * window made resident as it says); a net being trained (train_net_t: the
 * net, its optimizer state and the shard format it reads), created from the
 * config or loaded from a model file; the step loop (sample step s with the key (seed, cycle, s), take the
 * step, on one process or data-parallel over ranks, add its figures to the
 * means, call the caller's per-step hook, honour stop requests); the running
 * means of the training figures.
 * Does not own: the backends (nn/), the window and which rows it holds
 * (train/window.c), how many steps and which cycle (the callers), model files
 * and their registration (train/model.c: train_model_save), checkpoints,
 * progress lines and the train_steps rows (the callers' hooks).
 *
 * Threads: one thread at a time per net; the loop runs on the caller's
 * thread. Under a data-parallel job (train_loop_t.dist) every rank runs the
 * loop over the same steps: the collective calls are made in the same order
 * whatever fails (train/dist_train.h).
 * Errors: -1 (TRAIN_ERROR) with err; the loop says where it failed
 * (train_loop_result_t.failed_in / failed_step) so that each caller words the
 * message for its users. Nothing here aborts the process.
 */
#ifndef KOMA_TRAIN_LOOP_H
#define KOMA_TRAIN_LOOP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "data/shard.h"
#include "nn/net.h"
#include "nn/backend.h"
#include "train/config.h"
#include "train/dist_train.h"
#include "train/window.h"

/* ---- the backend and the window ------------------------------------------------ */
/* The CPU trainer's threads when --train-threads is 0: the cores the
 * machine's load average leaves free at start (at least 1, at most all). A
 * trainer that asks OpenMP for every core of a busy machine loses to one
 * thread: its threads wait at every barrier for a core another process
 * holds (docs/BENCHMARKS.md). */
int32_t train_threads_free(void);
/* The trainer's backend from cfg->backend ("auto": cuda when a device is present; a CPU backend with
 * cfg->threads, 0: train_threads_free()). NULL with err. */
nn_backend_t *train_backend_new(const train_config_t *cfg, char *err, size_t errlen);
/* Makes w resident on be (train_window_resident) as cfg->device_window says:
 * "auto" on a CUDA backend of one process (ranks <= 1; data-parallel steps
 * gather on the host), "on" always, "off" never. Returns 1 resident, 0 not,
 * -1 with err. */
int train_window_setup(const train_config_t *cfg, train_window_t *w, nn_backend_t *be, int32_t ranks, char *err,
                       size_t errlen);

/* ---- the net being trained ------------------------------------------------- */
typedef struct {
    nn_net_t *net;
    nn_optim_t *nt;   /* optimizer state, for minibatches of up to the batch given */
    shard_format_t fmt; /* the shard columns the net reads */
} train_net_t;

/* A random net of cfg->net / cfg->activation seeded by cfg->seed, with an
 * optimizer (cfg->opt) for batches of up to `batch` rows. 0, or -1 with err
 * ("new net 6x64: ..."); *tn is left empty on failure. */
int train_net_new(nn_backend_t *be, const train_config_t *cfg, int32_t batch, train_net_t *tn, char *err,
                  size_t errlen);
/* The net of the model file `path` (its own size and activation) with an
 * optimizer as train_net_new; with_state: its optimizer state (momentum, step
 * count) is read from the file too, and a file without one is an error.
 * 0, or -1 with err naming the file; *tn is left empty on failure. */
int train_net_load(nn_backend_t *be, const train_config_t *cfg, int32_t batch, const char *path, int with_state,
                   train_net_t *tn, char *err, size_t errlen);
void train_net_free(train_net_t *tn); /* frees and empties; NULL or empty ok */

/* ---- running means of the training figures ----------------------------------- */
/* Sums over steps; the policy figures are weighted by the positions that
 * have a policy target. */
typedef struct {
    double policy, value, legal, acc, f1, total;
    int64_t n, n_policy; /* steps; positions with a policy target */
    double ml_abs, opp;  /* the optional heads: moves-left |error| (plies) and opponent loss, weighted by rows */
    int64_t n_ml, n_opp; /* rows with a moves-left target, with an opponent-reply target */
} train_sums_t;
typedef struct {
    double policy_loss, value_loss, legal_loss, policy_acc, legal_f1, loss; /* NaN when nothing was added */
    double moves_left_mae, opp_policy_loss; /* NaN on a net without the head (or no targets) */
} train_means_t;
void train_sums_add(train_sums_t *s, const nn_metrics_t *m);
train_means_t train_sums_mean(const train_sums_t *s);

/* ---- the step loop ------------------------------------------------------------ */
typedef enum { TRAIN_LOOP_OK, TRAIN_LOOP_SAMPLE, TRAIN_LOOP_STEP, TRAIN_LOOP_HOOK } train_loop_fail_t;

typedef struct {
    int64_t steps;           /* steps taken */
    double train_ns;         /* time spent sampling and stepping */
    train_sums_t sums;       /* the figures of the steps taken */
    nn_metrics_t last;       /* the last step's metrics (zero before one) */
    int64_t failed_step;     /* the step that failed, -1 none */
    train_loop_fail_t failed_in;
} train_loop_result_t;

/* Called after step s (its figures already in r->sums, r->last = *m): 0 to
 * go on, -1 with err to end the loop (TRAIN_LOOP_HOOK). In one process the
 * hook of step s runs one step late, once step s + 1 is queued (see
 * train_loop_run): it must not read or write the net unless the barrier
 * names step s. */
typedef int (*train_step_hook)(void *user, int64_t s, const nn_metrics_t *m, const train_loop_result_t *r, char *err,
                               size_t errlen);

typedef struct {
    train_window_t *win;   /* selected already */
    shard_batch_t *batch;  /* buffers for `rows` rows */
    nn_optim_t *nt;
    int32_t rows;          /* the (global) minibatch */
    uint64_t seed;         /* step s samples with train_key(seed, cycle, s) */
    int64_t cycle;         /* -1: offline (train --from-games) */
    int64_t first, end;    /* steps [first, end) */
    train_dist_t *dist;    /* NULL: one process and nn_train_step; else train_dist_step on every rank */
    const atomic_int *stop; /* besides compat_stop_requested(); NULL ok */
    train_step_hook on_step; /* NULL ok */
    /* NULL ok (none). Nonzero for a step whose hook needs the net as it is
     * after that step (a checkpoint, a crash test): step s + 1 is then queued
     * only after step s's hook. */
    int (*barrier)(void *user, int64_t s);
    void *user;
} train_loop_t;

/* Runs steps lp->first .. lp->end - 1. Before each step a stop request
 * (agreed over ranks under dist: no rank takes a step another refused) ends
 * the loop with TRAIN_STOPPED; TRAIN_OK when all steps were taken;
 * TRAIN_ERROR with err (the sampler's, the step's or the hook's message, as
 * they wrote it) and r->failed_in / r->failed_step. The weights after a
 * failure are undefined (nn_train_step): the caller reloads them.
 * In one process the metrics are read one step late: step s + 1 is queued
 * (nn_train_step_launch) before step s's metrics are read (the device is
 * never idle waiting for the host; on CUDA one wait per step, for the step
 * before the one running), and step s + 1's batch is sampled on a second
 * thread (into a second buffer like lp->batch) while step s runs. The hooks
 * still see every step in order with the same metrics, and the weights are
 * the same, bit for bit, as nn_train_step in turn. When the loop returns,
 * whatever the status, no step's metrics are left unread: every step whose
 * hook was not called (r->steps counts the hooked steps) is the failed one,
 * or one queued after it; after TRAIN_OK or TRAIN_STOPPED the caller may
 * save or publish the net (every step's hook has seen its losses).
 * Data-parallel steps (lp->dist) are synchronous. */
int train_loop_run(const train_loop_t *lp, train_loop_result_t *r, char *err, size_t errlen);

#endif
