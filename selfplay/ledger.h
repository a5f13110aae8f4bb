/* ledger.h - the cycle ledger of a `selfplay` run: which cycle a finished
 * game belongs to, what the cycle's games add up to, which closed cycles
 * wait for their shards and which are with the trainer.
 *
 * Owns: the cycle being filled (its games and positions: those committed
 * before start-up and this session's), the run's game count, the queue of
 * closed cycles (each with the count of committed shard jobs it needs
 * before it can be trained), the queue of cycles handed to the trainer
 * (each with its expected steps), the newest published model, the pause
 * rule (--max-ahead), the end rule, and the accumulators of the cycle being
 * filled (results, end reasons, resignation counts, the nets that played,
 * device and search counters) with the cycle_metrics row they make.
 * Does not own: threads, clocks, files or the database: the driver
 * (driver.c) reads those and tells the ledger; shards, the trainer, the
 * text of the log.
 *
 * Cycles (driver.h): the run is done when model `target` is published;
 * cycle c (c >= 1) is filled with games_per_cycle games, closed, and
 * trained once the shards of its games are committed. Resuming, cycles
 * whose games are all stored are closed at once (needing no shard).
 *
 * Threads: the driver's only. Errors: none (out of memory asserts).
 */
#ifndef KOMA_SELFPLAY_LEDGER_H
#define KOMA_SELFPLAY_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

#include "data/db.h"
#include "engine/rules.h"
#include "selfplay/game.h"

enum { SP_LEDGER_GENS = 8 }; /* nets counted per cycle (more: not counted) */

/* What the cycle being filled has done in this session. */
typedef struct {
    int64_t cycle;
    int64_t t0_ns;  /* when this session began it (compat_now_ns) */
    double started; /* ... in unix seconds */
    int64_t games, rows, plies, full_rows;
    int64_t black, white, draws;
    int64_t reasons[RULES_END_NB];
    int64_t no_resign, would_resign, false_resign;
    int64_t mixed; /* games played by more than one net */
    int64_t evaluated, batches;
    int64_t searched;        /* positions searched during this cycle's window (all games) */
    double busy_s, worker_s; /* device busy seconds, wall x workers */
    int64_t gens[SP_LEDGER_GENS], gen_games[SP_LEDGER_GENS];
    int32_t n_gens;
} sp_cycle_acc_t;

typedef struct {
    int64_t cycle;
    int64_t need_shards; /* committed shard jobs needed before it can be trained */
} sp_closed_t;

typedef struct {
    int64_t cycle;
    int64_t steps; /* expected optimizer steps (train_steps_for) */
} sp_training_t;

typedef struct {
    int64_t target; /* model cycle that ends the run (--cycles) */
    int64_t games_per_cycle;
    int64_t latest;         /* newest published model */
    int64_t latest_steps;   /* optimizer steps behind it */
    int64_t fill;           /* cycle being filled with games */
    int64_t fill_games;     /* its games: committed before start-up + this session */
    int64_t fill_positions; /* their positions */
    int64_t total_games;    /* games of the run: committed before start-up + this session */
    sp_closed_t *closed;    /* (n_closed) oldest first */
    int32_t n_closed, cap_closed;
    sp_training_t *training; /* (n_training) oldest first */
    int32_t n_training, cap_training;
    sp_cycle_acc_t acc; /* cycle `fill` */
} sp_ledger_t;

void sp_ledger_init(sp_ledger_t *l, int64_t target, int64_t games_per_cycle);
void sp_ledger_free(sp_ledger_t *l); /* its queues; NULL ok */

/* Start-up: the newest model; the cycle after it is the one to fill
 * (sp_ledger_stored says what it has). total_games is the caller's to set
 * (the games committed before start-up). */
void sp_ledger_resume(sp_ledger_t *l, int64_t latest, int64_t latest_steps);
/* The cycle being filled has games/positions committed (start-up, and each
 * cycle that opens). Returns true when it needs none: it is within the run
 * and has every game (close it with sp_ledger_close(l, 0)). */
bool sp_ledger_stored(sp_ledger_t *l, int64_t games, int64_t positions);
/* Opens the accumulators of the cycle being filled, begun at now_ns
 * (compat_now_ns) / unix time wall_s. */
void sp_ledger_begin(sp_ledger_t *l, int64_t now_ns, double wall_s);
/* Is a cycle of the run still being filled (games are wanted)? */
bool sp_ledger_playing(const sp_ledger_t *l);

/* A finished game committed to cycle `fill`, its main generation gen
 * (sp_record_main_gen). Returns true when the cycle now has its games. */
bool sp_ledger_add(sp_ledger_t *l, const sp_record_t *r, int64_t gen);
/* Device and search counters since the last sample, into the cycle. */
void sp_ledger_sample(sp_ledger_t *l, int64_t evaluated, int64_t batches, double busy_s, double worker_s,
                      int64_t searched);
/* The cycle's cycle_metrics row as its games make it at now_ns / wall_s
 * (compat_now_ns, unix time): everything but elo* (NAN) and model_id (0). */
void sp_ledger_metrics(const sp_ledger_t *l, int64_t now_ns, double wall_s, double resign_threshold,
                       db_cycle_metrics_t *m);
/* The generation that played most of the cycle's games (0: none yet). */
int64_t sp_ledger_main_gen(const sp_ledger_t *l);
/* Seconds until the cycle has its games at this session's pace, elapsed_s
 * into it; < 0 when unknown (no game yet). */
double sp_ledger_eta_s(const sp_ledger_t *l, double elapsed_s);

/* Closes the cycle being filled: it waits for need_shards committed shard
 * jobs, and the next cycle is filled (with nothing stored: sp_ledger_stored
 * and sp_ledger_begin follow). */
void sp_ledger_close(sp_ledger_t *l, int64_t need_shards);
/* The oldest closed cycle when its shards are committed (shards_done
 * committed shard jobs so far): true with *cycle. */
bool sp_ledger_trainable(const sp_ledger_t *l, int64_t shards_done, int64_t *cycle);
/* That cycle went to the trainer, expecting steps steps. */
void sp_ledger_train(sp_ledger_t *l, int64_t steps);
/* The oldest cycle with the trainer: true with *cycle (and *steps, may be NULL). */
bool sp_ledger_training(const sp_ledger_t *l, int64_t *cycle, int64_t *steps);
/* The oldest cycle with the trainer was published, total_steps steps
 * behind it: it is the newest model. */
void sp_ledger_published(sp_ledger_t *l, int64_t total_steps);

/* Self-play should wait: the cycle being filled is more than `ahead`
 * cycles past the newest model (0: --sync-train). */
bool sp_ledger_too_far_ahead(const sp_ledger_t *l, int64_t ahead);
/* How many more games self-play may finish before it is too far ahead (or
 * every cycle up to the target has its games): the rest of the cycle being
 * filled and of each later cycle it may run ahead to; 0 when it must wait. */
int64_t sp_ledger_games_allowed(const sp_ledger_t *l, int64_t ahead);
/* Every cycle has its games, and every closed one is trained and published. */
bool sp_ledger_done(const sp_ledger_t *l);

#endif
