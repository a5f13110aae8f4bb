/* follow.h - a training group's cycle (selfplay --train-ranks K): rank 0's
 * trainer thread and ranks 1..K-1 take every step of a cycle together,
 * data-parallel (train/dist_train.h) over the group's communicator
 * (dist_split), and each of ranks 1..K-1 is a follower that does what
 * rank 0's plan (train_plan_t) says.
 *
 * Owns: the protocol of one cycle on every rank of the group, the same
 * collective calls in the same order whatever fails (train_group_run): an
 * agreement that every rank is ready (its model loaded and verified, its
 * window selected), the data-parallel step object made once (collective
 * where NCCL is used), a check that every rank's window holds the same
 * number of positions, the steps (train_loop_run: stops agreed, failures
 * agreed), and after a cycle whose steps were all taken the check that the
 * weights hash the same on every rank (train_dist_check); and a follower's
 * state: its backend, its net and optimizer state (the plan's model file,
 * loaded when its own weights are not that model: XXH3 checked against the
 * plan's), its window over the run's shards, its batch buffers.
 * Does not own: how plans and reports travel (selfplay/trainrank.c, over
 * dist/'s mailbox), the run (rank 0 owns it: a follower reads model and
 * shard files only, and writes nothing), model files and koma.db.
 *
 * Files: a follower reads <run>/<model_rel> and the shards by their
 * run-relative paths, so every training rank needs the run directory on a
 * file system it sees (shared, or the same path with the same files); a
 * file it cannot read fails the cycle on every rank with a message naming
 * the path.
 * Threads: one thread at a time per follower; collectives as dist/dist.h
 * says (through the mailbox's thread while one runs).
 * Errors: -1 (TRAIN_ERROR) with err; TRAIN_STOPPED when a stop was agreed.
 */
#ifndef KOMA_TRAIN_FOLLOW_H
#define KOMA_TRAIN_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "dist/dist.h"
#include "train/config.h"
#include "train/dist_train.h"
#include "train/loop.h"

/* A cycle's steps as rank 0 of a training group takes them (selfplay
 * --train-ranks K): what each other rank of the group needs to take the
 * same steps with it. The model is the file the weights start from
 * (run-relative path, the XXH3 koma.db holds for it); shards is the listing
 * rank 0 selects its window from (train_window_select with max_cycle =
 * cycle and want). Rank 0's trainer sends it through train_config_t.plan. */
typedef struct train_plan {
    int64_t cycle, first, end;   /* steps [first, end) of cycle */
    int64_t want;                /* positions wanted in the window */
    int32_t batch;               /* the global batch */
    uint64_t seed;               /* step s samples with train_key(seed, cycle, s) */
    int64_t model_cycle, model_steps; /* the starting model; its optimizer steps (a file without state) */
    char model_rel[DB_PATH_MAX];
    char model_xxh3[17];
    const db_shard_t *shards;
    int32_t nshards;
} train_plan_t;

/* One cycle on a rank of the group (collective over group). ready: this
 * rank has its model and window (else it only takes part, and the cycle
 * fails on every rank); positions: its window's. *td: the data-parallel
 * step object, made here at the first cycle every rank is ready for (nt,
 * global batch lp->rows). lp->dist is set from *td. Returns TRAIN_OK,
 * TRAIN_STOPPED or TRAIN_ERROR (the same on every rank) with err. */
int train_group_run(dist_t *group, train_dist_t **td, nn_optim_t *nt, int ready, int64_t positions,
                    const train_loop_t *lp, train_loop_result_t *r, char *err, size_t errlen);

typedef struct train_follower train_follower_t;
/* A follower of rank 0's trainer for the run at run_dir (not opened: no
 * koma.db, no lock) on this rank's backend (cfg: the same trainer flags
 * as rank 0; a CUDA trainer takes cfg->device + the node-local rank).
 * NULL with err. */
train_follower_t *train_follower_new(const train_config_t *cfg, const char *run_dir, dist_t *group, char *err,
                                     size_t errlen);
typedef struct {
    int64_t steps;           /* steps taken */
    int64_t positions;       /* in the window */
    int loaded;              /* 1: the model file was loaded for this cycle */
    uint64_t weights;        /* the weights' hash after the cycle (train_dist_weights_hash), 0 when none */
    double seconds;
    const char *route;       /* train_dist_route, NULL before the first cycle */
} train_follow_report_t;
/* Takes plan's steps with rank 0 (collective over the group): TRAIN_OK,
 * TRAIN_STOPPED or TRAIN_ERROR with err (this rank's own failure, or the
 * group's). */
int train_follower_cycle(train_follower_t *f, const train_plan_t *plan, train_follow_report_t *rep, char *err,
                         size_t errlen);
void train_follower_free(train_follower_t *f); /* NULL ok */

#endif
