/* job.h - rank 0's side of a `selfplay` job (mpirun -np N selfplay), in the
 * driver loop's own terms: start, a net to send, games to take, a pause,
 * the end.
 *
 * Owns: rank 0's mailbox and the sp_ranks_t over it (selfplay/ranks.h), the
 * job's start-up line, the trainer's plan hook (train_config_t.plan: each
 * cycle's plan to the training ranks 1..K-1, on the trainer's thread),
 * sending each model as koma.db registers it, the other ranks' games handed
 * to the driver, pausing them with rank 0 (and for good once every cycle has
 * its games), their searches, and the end of the job: STOP once, the games
 * that still arrive, and a rank that did not answer in time (the job then
 * ends with dist_abort once the run is closed: sp_job_end).
 * Does not own: the run and the commit of games (driver.c: the same path as
 * local games), the other ranks' side (ranks.c, trainrank.c), MPI (dist/).
 *
 * Every function accepts NULL, the job of a process alone (sp_job_open gives
 * NULL without error for a job of one), and then does nothing.
 * Threads: the driver's; the plan hook runs on the trainer's thread.
 */
#ifndef KOMA_SELFPLAY_JOB_H
#define KOMA_SELFPLAY_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compat/runlog.h"
#include "data/db.h"
#include "dist/dist.h"
#include "selfplay/config.h"
#include "selfplay/ranks.h"
#include "train/trainer.h"

typedef struct sp_job sp_job_t;

/* A game from another rank for the driver to commit (the record is then its
 * own). 0, or -1 with err. */
typedef int (*sp_job_game_fn)(void *user, sp_ranks_game_t *g, char *err, size_t errlen);

/* Rank 0 of dist: the mailbox, the other ranks' side, the start-up line in
 * log; when rank 0 trains with others (tcfg->group of K > 1) the plan hook
 * is set in tcfg. dist NULL or of one rank: 0 and *out NULL. On failure -1
 * with err, logged as "error: ..." and every rank ended with dist_abort. */
int sp_job_open(dist_t *dist, const sp_config_t *cfg, train_config_t *tcfg, runlog_t *log, const char *host,
                const char *run_dir, sp_job_t **out, char *err, size_t errlen);

/* Model `cycle`, as registered in the run (rdb), with the session's seed,
 * to every other rank. 0, or -1 with err. */
int sp_job_send_net(sp_job_t *j, db_t *rdb, int64_t cycle, uint64_t seed, char *err, size_t errlen);
/* The games that arrived (waiting up to timeout_ms for the first message),
 * each to on_game; on its failure the rest are freed. Returns 0,
 * SP_RANKS_LEFT with err (a rank said BYE: the job ends as interrupted) or
 * -1 with err (a rank's error, a malformed message, an MPI failure). */
int sp_job_games(sp_job_t *j, int64_t timeout_ms, sp_job_game_fn on_game, void *user, char *err, size_t errlen);
/* The playing ranks pause with rank 0 (sent only on a change). 0, or -1 with err. */
int sp_job_pause(sp_job_t *j, bool paused, char *err, size_t errlen);
/* Moves searched by the other ranks, in all (0 alone). */
int64_t sp_job_searches(const sp_job_t *j);
/* " (r0 <rate>, r1 ..., r2 ...)" for the progress line after rank 0's rate
 * rank0_pos_s (empty alone); returns the job's rate (rank0_pos_s alone). */
double sp_job_describe(sp_job_t *j, double rank0_pos_s, char *buf, size_t n);

/* Ends the other ranks once: STOP with code, then the drain until each said
 * BYE; with keep, the games still arriving go to on_game (a failure is
 * logged as a warning). A training group first stops trainer's cycle in
 * flight (it answers STOP only between cycles). */
void sp_job_finish(sp_job_t *j, int code, bool keep, train_trainer_t *trainer, sp_job_game_fn on_game, void *user);
/* The mailbox stops and the other ranks' side is freed (after the run's
 * threads). */
void sp_job_close(sp_job_t *j);
/* The last act of rank 0 (after its messages are out): when a rank did not
 * answer in time or messages never left, every rank is ended with
 * dist_abort(rc, or 1 when 0), said on stderr. Frees j. */
void sp_job_end(sp_job_t *j, int rc);

#endif
