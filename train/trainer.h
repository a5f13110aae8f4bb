/* trainer.h - the trainer: turns a run's shards into the next net.
 *
 * Owns: the training window (which recent positions are trained on), the
 * sampling of minibatches from it, the number of steps a cycle takes, the
 * model files models/<cycle %04d>.safetensors (weights + optimizer state in
 * one file), their registration in koma.db's models table (through the
 * writer thread), the per-step train_steps rows, publishing each new net to
 * the inference server, and the trainer thread.
 * Does not own: its options (train/config.h), the step loop (train/loop.h),
 * the network, losses and SGD (nn/net.h), the weights format
 * (nn/weights.h), shard files and their validation (data/shard.h), SQLite
 * (data/db.h, data/writer.h), self-play and the cycle driver (selfplay/).
 *
 * ---- Cycles ----------------------------------------------------------------
 * Model cycle 0 is the initial random net. Shards registered with cycle c are
 * the data of cycle c (played by an earlier net). train_trainer_run_cycle(c)
 * trains on the WINDOW OF CYCLE c: the most recent W positions of the shards
 * with shards.cycle <= c (in registration order, with the net's
 * features_version; a bad shard is skipped and older rows fill its place),
 * where, with N = all positions of those shards and m = window_min (KataGo's
 * growing window):
 *     W = N                                                    if N <= m
 *     W = min(window_max, m * (1 + beta * ((N/m)^alpha - 1) / alpha))  else
 * (window_max <= 0: no cap). The number of steps is
 *     ceil(samples_per_position * new / batch) clamped to
 *     [min_steps_per_cycle, max_steps_per_cycle],
 * new = positions of shards with prev < shards.cycle <= c, prev = the cycle of
 * the newest model before c. Rows are drawn uniformly (with replacement) from
 * the window; step s of cycle c draws from an RNG seeded by (seed, c, s), so a
 * cycle is a pure function of (starting model file, window, config).
 *
 * ---- Files and crash safety -------------------------------------------------
 * A cycle writes models/<cycle>.safetensors durably (nn_weights_save:
 * temporary name, fsync, rename) and only then inserts its models row
 * (cycle, path, XXH3 of the file, arch "resnet<B>x<C>-<act>", total steps and
 * samples, the cycle's mean losses) and waits until the writer committed it;
 * only then is the net published. So no row ever points at a missing file. A
 * kill -9 between the rename and the commit leaves a model file without a
 * row: it is NOT trusted; the cycle is retrained when asked for again and the
 * file is overwritten (the same inputs give the same weights). train_steps
 * rows of such an unfinished cycle are replaced by the retrained ones (the
 * table's key is the global step). Ctrl-C (compat_stop_requested) or
 * train_trainer_stop finishes the step in flight and abandons the cycle: no
 * model file is written, the trainer state stays that of the last model.
 *
 * ---- Training group (selfplay --train-ranks K) ---------------------------------
 * With cfg->group (K > 1 ranks), every cycle's steps are taken data-parallel
 * with ranks 1..K-1: before the first collective the trainer hands
 * cfg->plan a train_plan_t (the cycle, its steps, the seed, the model it
 * starts from and the shard listing it selects from), then runs the group's
 * protocol (train/follow.h: the same collectives on every rank whatever
 * fails, the weights compared after the steps). The net's optimizer takes
 * batch / K rows; the window and the model files are rank 0's as above.
 *
 * ---- Threads ------------------------------------------------------------------
 * A trainer is one thread's at a time: either call train_trainer_run_cycle
 * (serialised by an internal lock), or start the trainer thread and use
 * submit / wait from any threads. The trainer owns its net, its nn trainer
 * (optimizer state), its backend instance, its read-only koma.db connection
 * and its cache of open shards (each shard is opened, i.e. mapped and
 * checksum-verified, once and kept while it is in the window).
 *
 * Errors: -1 with a message naming the run directory, file or shard. A bad
 * shard (checksum, truncation, wrong format) is reported by path through the
 * log and skipped for the rest of the trainer's life; training goes on with
 * the others. Nothing here aborts the process.
 */
#ifndef KOMA_TRAIN_TRAINER_H
#define KOMA_TRAIN_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "data/writer.h"
#include "dist/dist.h"
#include "nn/net.h"
#include "nn/server.h"
#include "train/config.h"
#include "train/follow.h"

/* The window formula above for N total positions. */
int64_t train_window_size(const train_config_t *cfg, int64_t total_positions);
/* Steps for a cycle with new_positions new positions (formula above). */
int64_t train_steps_for(const train_config_t *cfg, int64_t new_positions);

typedef struct {
    int64_t cycle, steps, samples, window_positions;
    double policy_loss, value_loss, legal_loss, policy_acc, legal_f1;  /* means over the cycle's steps */
    double seconds, samples_per_s;
    char model_path[512];      /* run-relative models/<cycle>.safetensors */
    /* ---- additions ---- */
    int64_t step;              /* optimizer steps behind the model, in total */
    int64_t new_positions;     /* positions new since the previous model */
    double loss;               /* mean weighted total loss */
    double lr;                 /* lr of the cycle's last step */
    int32_t bad_shards;        /* shards of the window skipped as unreadable (reported in the log) */
    int32_t already;           /* 1: the cycle had a model already; nothing was trained */
} train_cycle_report_t;

typedef struct train_trainer train_trainer_t;
/* Opens (or creates) the trainer for run_dir: loads the latest registered model WITH its optimizer state
 * (models/<cycle %04d>.safetensors) so training resumes exactly; if the run has no model yet, creates a
 * random net from cfg->net and writes + registers it as cycle 0 (models/0000.safetensors).
 * writer: the run's writer thread (all SQLite writes go through it); server: may be NULL (offline). */
train_trainer_t *train_trainer_new(const train_config_t *cfg, const char *run_dir, db_writer_t *writer,
                                   nn_server_t *server, char *err, size_t errlen);
int64_t train_trainer_latest_cycle(const train_trainer_t *tr);  /* cycle of the newest model */
/* Synchronous: trains on the window for `cycle` (its data already committed), writes models/<cycle>.safetensors
 * durably (weights + optimizer state), registers it in the models table (via the writer; wait for it), publishes
 * it to the server (generation = cycle + 1, see below). Returns 0 or -1 with err. Idempotent for a cycle that already has a model. */
int train_trainer_run_cycle(train_trainer_t *tr, int64_t cycle, train_cycle_report_t *rep, char *err, size_t errlen);
/* Asynchronous: a trainer thread runs train_trainer_run_cycle for submitted cycles in order. */
int train_trainer_start(train_trainer_t *tr);
int train_trainer_submit(train_trainer_t *tr, int64_t cycle);            /* returns at once */
/* Waits for a submitted cycle (timeout_ms < 0: forever; returns 1 on timeout); also respects compat_stop_requested(). */
int train_trainer_wait(train_trainer_t *tr, int64_t cycle, int64_t timeout_ms, train_cycle_report_t *rep, char *err, size_t errlen);
void train_trainer_stop(train_trainer_t *tr);  /* finishes the step in flight, never blocks forever */
/* The cycle being trained: cycle -1 when none; else step S of T done (S = 0
 * while the window loads) and the samples/s of its steps so far. Any thread. */
typedef struct {
    int64_t cycle, step, steps;
    double samples_per_s;
} train_progress_t;
void train_trainer_progress(train_trainer_t *tr, train_progress_t *out);
void train_trainer_free(train_trainer_t *tr);  /* NULL ok */

/* Details of the calls above:
 * - latest_cycle may be called from any thread, also while the thread runs.
 * - cfg->log is called from the thread that trains (the trainer thread once
 *   started): it must be thread-safe.
 * - run_cycle: cycle must be above the newest model's (or equal to a cycle
 *   that has a model: then rep->already = 1, nothing is trained, and the
 *   newest model is published when the server is behind it). Returns
 *   TRAIN_STOPPED when a stop was requested before the model was written.
 * - Generations: model cycle c is published as server generation c + 1
 *   (a server starts at generation >= 1: serve models/<c> with
 *   nn_server_config_t.generation = c + 1, so cycle 0 is the default 1). When
 *   the server already is at or above c + 1, current + 1 is used and the log
 *   says so.
 * - Log lines: "cycle C: step S/T, ..." every 10 s inside a cycle, and one
 *   "cycle C: N steps x B ... -> models/<C>.safetensors" line per cycle.
 *   They are for people: programs ask train_trainer_progress.
 * - start: 0, or -1 (no thread; already started).
 * - submit: 0; -1 when the thread is not running or the queue (64 cycles)
 *   is full. Cycles run in submission order; a cycle submitted twice runs once.
 * - wait: 0 with rep filled, -1 with err when the cycle failed (the thread
 *   goes on with the next one), TRAIN_TIMEOUT, or TRAIN_STOPPED when a stop
 *   was requested (compat_stop_requested() or train_trainer_stop) before
 *   the cycle finished. Any thread may wait; results of the last 64 finished
 *   cycles are kept.
 * - stop: refuses new submissions, lets the step in flight finish, abandons
 *   queued cycles and joins; waiters get TRAIN_STOPPED. Idempotent. */

/* ---- accessors (tests) ----------------------------------------------------- */
nn_net_t *train_trainer_net(train_trainer_t *tr);          /* the trained net (the trainer's backend) */
nn_optim_t *train_trainer_nn(train_trainer_t *tr);       /* its optimizer state */
#endif
