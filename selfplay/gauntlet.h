/* gauntlet.h - the in-loop evaluation: each new net plays a gauntlet of
 * earlier nets, and the run's rating list places it.
 *
 * Owns: when and against whom a net is evaluated, the match thread, and the
 * rating that results. When model c is published (c >= K, c % K == 0, K =
 * --eval-every) it plays, one match after the other, up to --gauntlet
 * earlier nets: c-K, cycle 0, the net halfway, a quarter of the way, and
 * then every outside USI engine given as --gauntlet-engine1..4 (match/engine.h:
 * a label that names it in the rating list, its command, setoption pairs,
 * a byoyomi, node or depth budget), the same engines for every net and
 * every run, so they anchor the scale (match/play.h: --eval-games in all,
 * shared, at --eval-visits, on the CPU backend, recorded game by game in
 * koma.db by its own connection; the engines' stderr goes to
 * <run>/engines.log). An engine that cannot be started or restarted gets
 * one warning naming it and is left out for the rest of the session; every
 * wait for an engine is bounded (match_play_engine). Then
 * the joint rating list over every match of the run (match/rating.h) places
 * it, and its rating goes into its cycle_metrics row through the writer.
 * One evaluation at a time, on a thread of its own so that self-play never
 * waits for it; evaluations due meanwhile queue (never skipped). A match
 * counts in the rating once it has finished: one killed or stopped midway
 * keeps its games in koma.db under a row with no Elo, counted in no rating
 * (match/rating.h), and is played again in full. A resumed run queues,
 * oldest first, every due model without a rating and every evaluation a
 * kill or a stop interrupted, and plays their missing matches
 * (sp_gauntlet_resume): every due model ends up rated.
 * Does not own: the matches (match/play.c), the rating arithmetic
 * (match/rating.c), the run's database connection (the driver's).
 *
 * Every function accepts NULL (nothing to do).
 * Threads: every function is called from the driver thread; the match
 * thread touches only the fields of the evaluation in flight until it sets
 * `done`. A stop leaves the queue to the next run and ends the match in
 * flight at its next move (match_play_config_t.stop): a search of
 * --eval-visits playouts, or an engine's move (bounded by its timeout).
 * Errors: a failed match is logged as a warning; a failure of the database
 * is counted (sp_gauntlet_db_failures) so that the run ends non-zero.
 */
#ifndef KOMA_SELFPLAY_GAUNTLET_H
#define KOMA_SELFPLAY_GAUNTLET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compat/runlog.h"
#include "data/db.h"
#include "data/writer.h"
#include "selfplay/config.h"

typedef struct sp_gauntlet sp_gauntlet_t;

/* rdb: the driver thread's read-only connection to koma.db; log: whole lines. */
sp_gauntlet_t *sp_gauntlet_new(const sp_config_t *cfg, const char *run_dir, db_t *rdb, db_writer_t *writer,
                               runlog_fn log, void *log_user);
void sp_gauntlet_free(sp_gauntlet_t *g);                    /* waits for a match in flight; NULL ok */
void sp_gauntlet_set_seed(sp_gauntlet_t *g, uint64_t seed); /* the session's seed: matches differ between sessions */

void sp_gauntlet_enqueue(sp_gauntlet_t *g, int64_t cycle); /* model cycle was published (ignored when not due) */
/* Queues, oldest first, the evaluations that earlier sessions left undone
 * (models up to latest; see gauntlet.c for the rule); returns how many. */
int32_t sp_gauntlet_resume(sp_gauntlet_t *g, int64_t latest);
/* Reports a finished evaluation (waiting for it with wait; a Ctrl-C during
 * that wait stops it) and starts the next queued one unless a stop is
 * requested. */
void sp_gauntlet_poll(sp_gauntlet_t *g, bool wait);
/* At a stop or an error: leaves the queue to the next run, stops the match
 * in flight at its next move and reports it. */
void sp_gauntlet_finish(sp_gauntlet_t *g);
bool sp_gauntlet_idle(const sp_gauntlet_t *g); /* nothing running or queued */

/* " | eval 7 vs 6 | rating +85" for the status line ("" when nothing to say). */
void sp_gauntlet_describe(const sp_gauntlet_t *g, char *buf, size_t len);
/* 1 and the newest rating when it is cycle's; else 0. */
int sp_gauntlet_rating(const sp_gauntlet_t *g, int64_t cycle, double *elo, double *lo, double *hi);
/* Database failures of the matches so far, and the last message. */
int64_t sp_gauntlet_db_failures(const sp_gauntlet_t *g, char *msg, size_t len);

#endif
