/* trainrank.h - a training rank of `selfplay` (mpirun -np N selfplay
 * --train-ranks K: ranks 1..K-1): it does not play; it takes every step of
 * every cycle together with rank 0's trainer thread, data-parallel over the
 * training group (dist_split of ranks 0..K-1), as rank 0's plans say.
 *
 * Owns: the life of such a rank: its mailbox, its hello to rank 0, the
 * plans it receives (one per cycle: selfplay/wire.h SP_TAG_PLAN) and the
 * report it sends on each (SP_TAG_TRAINED: steps, window, the weights' hash
 * or the error), nets and pause orders passed on down the nets' tree (a
 * training rank may be an inner node of it) but not loaded, the end (BYE
 * once rank 0 says STOP, or on Ctrl-C).
 * Does not own: the training itself (train/follow.h: model loading, window,
 * the group's collectives), the run (rank 0 owns it; this rank reads the
 * model and shard files under --run, which it must see: a shared file
 * system, or the same path with the same files; it writes nothing there).
 *
 * Errors: a plan that cannot be decoded, a model or shard it cannot
 * read, a failed step: the cycle fails on every rank of the group (it
 * still makes the group's collective calls, with ready = 0: rank 0 never
 * waits for it forever), its report says why, and rank 0's trainer fails
 * the cycle, which ends the run. A failure of its own mailbox or backend is
 * sent as ERROR; it then keeps answering plans (not ready) until STOP,
 * bounded. Ctrl-C: a stop agreed inside the group (train_loop_run), BYE,
 * then the wait for STOP.
 * Threads: the main thread (the mailbox's thread makes its collectives).
 */
#ifndef KOMA_SELFPLAY_TRAINRANK_H
#define KOMA_SELFPLAY_TRAINRANK_H

#include "dist/dist.h"
#include "selfplay/config.h"
#include "train/trainer.h"

/* A training rank (group rank >= 1): runs until rank 0 says STOP. Returns
 * the process exit code (SP_EXIT_*). */
int sp_train_rank_run(const sp_config_t *cfg, const train_config_t *tcfg, dist_t *dist, dist_t *group);

#endif
