/* driver.h - the cycle driver behind `selfplay`: one process runs self-play,
 * storage and training of a run until its nets are published.
 *
 * Owns: the loop (sp_run_job: open the run, start the threads, loop over
 * games -> ledger -> shards -> trainer -> gauntlet -> progress, shut down);
 * the run's start-up (koma.db with a runs row holding the effective flags,
 * the start-up check of shard files against the database, the writer
 * thread, the inference server on the newest net, the trainer thread, the
 * worker pool), shards of --shard-games games, handing a cycle to the
 * trainer once its shards are committed, pausing self-play that runs too far
 * ahead of the newest net, resumption, the per-cycle metrics rows and
 * summaries, the progress line, and shutdown (Ctrl-C).
 * Does not own: the cycle bookkeeping (selfplay/ledger.h), the other ranks
 * of a job (selfplay/job.h), the log's lines and file (compat/runlog.h),
 * the evaluation (selfplay/gauntlet.h), games and search (game.c,
 * worker.c), training and model files (train/), SQLite and shard files
 * (data/).
 *
 * ---- Cycles ----------------------------------------------------------------
 * Model cycle 0 is the random first net (the trainer creates it for a new
 * run). Cycle c (c >= 1) = --games-per-cycle games, registered in shards
 * with cycle c, then model c trained on the window of cycle c. A run is done
 * when model --cycles exists. Games are played by the newest net the server
 * has; with training overlapping self-play (the default), the games of
 * cycle c are mostly played by model c-2 or c-1, and self-play pauses rather
 * than run more than --max-ahead cycles ahead of the newest net
 * (--sync-train: 0 ahead, i.e. wait for every net).
 *
 * ---- Resuming ---------------------------------------------------------------
 * Start-up resolves what a kill left behind (data/db.h db_check_shards), then
 * continues from the newest model L: cycles after L whose games are all
 * committed go straight to the trainer, and the first incomplete cycle is
 * filled up from the games it already has. Nothing committed is lost or
 * played twice; games in progress at the kill are simply gone. A cycle
 * whose games are all committed but whose cycle_metrics row is missing or
 * empty (a kill between its last shard and its summary) gets its games,
 * positions, results and mean length again from the stored games.
 *
 * ---- Evaluation ---------------------------------------------------------------
 * With --eval-every K > 0, each published model is handed to the gauntlet
 * (selfplay/gauntlet.h: whom it plays, on its own thread so that self-play
 * never waits, the queue, the rating), which the loop polls every turn. On
 * completion the log gets one "eval: model c vs b: +W =D -L, Elo ..." line
 * per match and "rating: model c: +x [lo, hi]", the status line "rating
 * +x", and cycle_metrics row c that rating. The end of a run waits for
 * every queued evaluation; a stop (Ctrl-C, an error) leaves the queue to
 * the next run and ends the match in flight at its next move. A resumed run
 * queues every due model without a rating and every interrupted evaluation,
 * so every due model gets rated; a run that already has its last model
 * plays its owed evaluations and ends.
 *
 * ---- Test hook ----------------------------------------------------------------
 * KOMA_TEST_KILL_AT=<point>[:<cycle>] in the environment: the process kills
 * itself (SIGKILL / TerminateProcess) at that point, at any cycle or the one
 * given, for tests that need a kill at one exact place. Points:
 *   cycle-summary  a cycle has its games and every shard of it is
 *                  committed; its cycle_metrics row is not yet written.
 *
 * ---- Exit status --------------------------------------------------------------
 * SP_EXIT_DONE (0): every cycle published; SP_EXIT_ERROR (1): a failure
 * (shown once, "error: ...", on stderr and in the log); SP_EXIT_USAGE (2): bad flags;
 * SP_EXIT_INTERRUPTED (130): Ctrl-C / SIGTERM: the finished games were
 * committed, games in progress and the training cycle in progress were
 * dropped; the same command resumes.
 */
#ifndef KOMA_SELFPLAY_DRIVER_H
#define KOMA_SELFPLAY_DRIVER_H

#include <stddef.h>

#include "dist/dist.h"
#include "selfplay/config.h"
#include "selfplay/exit.h"
#include "train/trainer.h"

/* Runs the loop. config_text (may be NULL): the effective flags, stored in
 * the runs row. Returns an SP_EXIT_* code; on SP_EXIT_ERROR err says why
 * (already shown on stderr); on SP_EXIT_USAGE err says why (not shown). */
int sp_run(const sp_config_t *cfg, const train_config_t *tcfg, const char *config_text, char *err, size_t errlen);
/* The same as rank 0 of a job (dist: mpirun -np N selfplay; NULL or a job
 * of one: sp_run): the other ranks play (selfplay/ranks.h) and their games
 * are committed here with their rank and host. */
int sp_run_job(const sp_config_t *cfg, const train_config_t *tcfg, const char *config_text, dist_t *dist, char *err,
               size_t errlen);

/* The whole command: parses argv (flags, --config FILE, --help), installs
 * the Ctrl-C handler when install_stop_handler, runs. Returns an SP_EXIT_* code. */
int sp_main(int argc, char **argv, int install_stop_handler);

#endif
