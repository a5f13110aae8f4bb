/* driver.c - the cycle driver behind `selfplay`; see driver.h.
 *
 * sp_run_job reads top to bottom: open the run, start the threads, loop
 * (games -> ledger -> shards -> trainer -> gauntlet -> progress), shut
 * down. What it keeps is split by concern: the cycles in a ledger
 * (selfplay/ledger.h: no threads, no I/O), the other ranks in a job
 * (selfplay/job.h), the lines in the run log (compat/runlog.h); here the
 * run's handles, the shard being filled, self-play and the progress meter.
 */
#include "selfplay/driver.h"
#include "compat/bits.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "compat/runlog.h"
#include "compat/status.h"
#include "data/db.h"
#include "data/run.h"
#include "data/shard.h"
#include "data/writer.h"
#include "engine/encode.h"
#include "engine/rules.h"
#include "mcts/cache.h"
#include "nn/server.h"
#include "selfplay/gauntlet.h"
#include "selfplay/game.h"
#include "selfplay/job.h"
#include "selfplay/ledger.h"
#include "selfplay/live_report.h"
#include "selfplay/ranks.h"
#include "selfplay/trainrank.h"
#include "selfplay/worker.h"

#ifndef KOMA_VERSION_STRING
#define KOMA_VERSION_STRING "0.0.0"
#endif

#define SP_PATH_MAX 1024
#define SP_WRITER_CAPACITY 1024
#define SP_WRITER_DRAIN_MS 600000 /* a stop waits this long for queued shard writes */
#define SP_SUBMIT_TIMEOUT_MS 600000
#define SP_TAKE_MAX 256
#define SP_MODEL_IDS 16 /* model ids remembered by cycle */

/* The run: its directory, its database and writer thread, what the
 * database refused. */
typedef struct {
    run_t *run; /* the run directory, its writer lock held until the end */
    db_t *db;   /* read-write (run_db); the writer thread's once it starts */
    db_t *rdb;  /* read-only: the driver thread's queries */
    db_writer_t *writer;
    int64_t run_id;
    int64_t id_cycle[SP_MODEL_IDS], id_model[SP_MODEL_IDS]; /* model ids by cycle (generation = cycle + 1) */
    int32_t n_ids;
    /* database writes that failed without stopping the run (metrics, a
     * match): the run still ends with a non-zero exit status */
    int64_t failures;
    char failure[DB_ERR_MAX + 64];
} store_t;

/* The shard being filled and the writer's reports of committed ones. */
typedef struct {
    shard_format_t fmt;
    shard_builder_t *builder;     /* the shard being filled (the ledger's cycle `fill`) */
    int64_t seq;                  /* next shard number */
    atomic_llong submitted, done; /* done: the writer thread's callback */
    atomic_int failed;
    compat_mutex_t mu;
    char err[DB_ERR_MAX]; /* the first failure, under mu */
} shards_t;

/* Self-play on this process. */
typedef struct {
    sp_pool_t *pool;
    mcts_cache_t *cache;
    bool running;
    bool paused;
    int64_t taken; /* records taken from the pool */
    int64_t limit; /* the pool's sp_pool_limit */
} play_t;

/* The counters last read from the server, the pool and the other ranks,
 * and the progress line's window since its last line. */
typedef struct {
    int64_t srv_t_ns, srv_evaluated, srv_batches; /* the server at the last sample */
    int64_t srv_searches;                         /* the worker pool's search counter at the last sample */
    int64_t srv_remote;                           /* the other ranks' searches at the last sample */
    int64_t prog_t_ns, prog_searches, prog_lookups, prog_hits;
    double win_evals, win_batches, win_busy, win_worker_s, win_s;
} meter_t;

typedef struct {
    const sp_config_t *cfg;
    train_config_t tcfg; /* the trainer's flags, logging here (and the job's plan hook) */
    char run_dir[SP_PATH_MAX];
    char host[128]; /* this machine, recorded with each local game */
    int64_t t_start_ns;
    uint64_t seed; /* the session's self-play seed */
    status_t *st;  /* stderr: the status line and the event lines */
    runlog_t *log; /* the events: st and the run's log file */
    store_t store;
    nn_server_t *server;
    train_trainer_t *trainer;
    sp_gauntlet_t *gauntlet; /* the gauntlet of each new net, on its own thread */
    sp_live_report_t *report; /* RUN/report.html rewritten by tools/report (NULL: --report 0) */
    play_t play;
    sp_ledger_t ledger; /* the cycles */
    shards_t shards;
    meter_t meter;
    sp_job_t *job; /* the other ranks (mpirun -np N selfplay); NULL for one process */
} driver_t;

/* The trainer's lines, after "train: ". */
static void train_log(void *user, const char *line) { runlog_event_prefix(user, "train: ", "%s", line); }

static double wall_now(void) { return (double)time(NULL); }
static double secs_since(int64_t t0_ns) { return (double)(compat_now_ns() - t0_ns) * 1e-9; }

static void fmt_duration(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

/* ---- the run's models ------------------------------------------------------------------- */

static int64_t model_id_of_cycle(driver_t *d, int64_t cycle) {
    store_t *s = &d->store;
    for (int32_t i = 0; i < s->n_ids; i++)
        if (s->id_cycle[i] == cycle) return s->id_model[i];
    db_model_t m;
    if (cycle < 0 || db_model_by_cycle(s->rdb, (int32_t)cycle, &m) != DB_OK) return 0;
    int32_t k = s->n_ids < SP_MODEL_IDS ? s->n_ids++ : (int32_t)(cycle % SP_MODEL_IDS);
    s->id_cycle[k] = cycle;
    s->id_model[k] = m.id;
    return m.id;
}

/* The server runs generation = model cycle + 1 (it starts at latest + 1 and
 * the trainer publishes cycle c as the next generation). */
static int64_t model_id_of_gen(driver_t *d, int64_t gen) {
    return model_id_of_cycle(d, gen > 0 ? gen - 1 : d->ledger.latest);
}

/* ---- the meter ------------------------------------------------------------------------------ */

/* Server counters since the previous call, into the cycle and the progress window. */
static void sample_server(driver_t *d) {
    if (!d->server) return;
    meter_t *mt = &d->meter;
    nn_server_stats_t st;
    nn_server_stats(d->server, &st);
    int64_t now = compat_now_ns();
    double dt = mt->srv_t_ns ? (double)(now - mt->srv_t_ns) * 1e-9 : 0.0;
    mt->srv_t_ns = now;
    int64_t de = st.evaluated - mt->srv_evaluated, db = st.batches - mt->srv_batches;
    mt->srv_evaluated = st.evaluated;
    mt->srv_batches = st.batches;
    double busy = st.busy_frac * dt * st.workers, ws = dt * st.workers;
    int64_t searched = 0;
    if (d->play.pool) {
        sp_pool_stats_t ps = {0};
        sp_pool_stats(d->play.pool, &ps);
        searched += ps.searches - mt->srv_searches;
        mt->srv_searches = ps.searches;
    }
    int64_t remote = sp_job_searches(d->job); /* the cycle's positions per second are the job's */
    searched += remote - mt->srv_remote;
    mt->srv_remote = remote;
    sp_ledger_sample(&d->ledger, de, db, busy, ws, searched);
    mt->win_evals += (double)de, mt->win_batches += (double)db, mt->win_busy += busy, mt->win_worker_s += ws;
    mt->win_s += dt;
}

/* ---- shards -------------------------------------------------------------------------------- */

static void shard_done(void *user, int status, const char *err, const db_shard_t *shard) {
    shards_t *s = user;
    (void)shard;
    if (status == DB_OK) {
        atomic_fetch_add(&s->done, 1);
        return;
    }
    compat_mutex_lock(&s->mu);
    if (!atomic_load(&s->failed))
        set_err(s->err, sizeof s->err, "shard commit failed (%s): %s", db_status_name(status), err ? err : "");
    atomic_store(&s->failed, 1);
    compat_mutex_unlock(&s->mu);
}

static int new_builder(driver_t *d, char *err, size_t errlen) {
    d->shards.builder = shard_builder_new_compact(0, err, errlen); /* version 2: docs/DATA.md */
    return d->shards.builder ? 0 : -1;
}

/* Sends the builder's games (if any) to the writer as a shard of cycle `cycle`. */
static int flush_shard(driver_t *d, int64_t cycle, char *err, size_t errlen) {
    shards_t *s = &d->shards;
    if (!s->builder || shard_builder_games(s->builder) == 0) return 0;
    char rel[DB_PATH_MAX], full[SP_PATH_MAX + DB_PATH_MAX];
    for (;;) { /* never a path that exists (an orphan moved back by hand, ...) */
        shard_path_format(rel, sizeof rel, (int32_t)cycle, s->seq);
        snprintf(full, sizeof full, "%s/%s", d->run_dir, rel);
        if (!compat_file_exists(full)) break;
        s->seq++;
    }
    int32_t games = shard_builder_games(s->builder);
    int64_t rows = shard_builder_rows(s->builder);
    int st =
        shard_submit(d->store.writer, d->run_dir, rel, (int32_t)cycle, s->builder, shard_done, s, SP_SUBMIT_TIMEOUT_MS);
    if (st != DB_OK) {
        set_err(err, errlen, "%s: cannot queue shard %s (%d games): %s", d->run_dir, rel, games, db_status_name(st));
        return -1;
    }
    s->builder = NULL;
    s->seq++;
    atomic_fetch_add(&s->submitted, 1);
    runlog_event(d->log, "shard %s: %d games, %" PRId64 " positions queued", rel, games, rows);
    return new_builder(d, err, errlen);
}

/* A shard commit failed (the writer's callback): 1 with its message in err. */
static int shard_failed(driver_t *d, char *err, size_t errlen) {
    if (!atomic_load(&d->shards.failed)) return 0;
    compat_mutex_lock(&d->shards.mu);
    set_err(err, errlen, "%s", d->shards.err);
    compat_mutex_unlock(&d->shards.mu);
    return 1;
}

/* ---- cycles --------------------------------------------------------------------------------- */

/* The summary of the cycle being filled: its cycle_metrics row and two log lines. */
static void write_metrics(driver_t *d) {
    const sp_cycle_acc_t *a = &d->ledger.acc;
    db_cycle_metrics_t m;
    sp_ledger_metrics(&d->ledger, compat_now_ns(), wall_now(), d->cfg->resign_threshold, &m);
    /* Normally a cycle's row is written before its model exists; should it
     * be rewritten after its evaluation, the Elo stays. */
    sp_gauntlet_rating(d->gauntlet, a->cycle, &m.elo, &m.elo_lo, &m.elo_hi);
    m.model_id = model_id_of_gen(d, sp_ledger_main_gen(&d->ledger));
    int st = db_writer_cycle_metrics(d->store.writer, &m, 10000);
    if (st != DB_OK)
        runlog_event(d->log, "warning: cycle %" PRId64 " metrics not queued: %s", a->cycle, db_status_name(st));
    char rs[256] = "";
    size_t len = 0;
    for (int e = 1; e < RULES_END_NB; e++)
        if (a->reasons[e] && len < sizeof rs)
            len += (size_t)snprintf(rs + len, sizeof rs - len, "%s%s %" PRId64, len ? ", " : "", rules_end_name(e),
                                    a->reasons[e]);
    char rates[160] = "no search in this cycle's window (its games were searched in the last one's)";
    if (!isnan(m.evals_per_s))
        snprintf(rates, sizeof rates, "%.1f positions/s, %.0f evals/s, batch %.1f, busy %.0f%%", m.positions_per_s,
                 m.evals_per_s, m.avg_batch, isnan(m.busy_pct) ? 0.0 : m.busy_pct);
    runlog_event(d->log,
                 "cycle %" PRId64 " self-play done: %" PRId64 " games this session (%" PRId64 " in all; black %" PRId64
                 " white %" PRId64 " draw %" PRId64 "; %s), %" PRId64 " positions (%" PRId64 " with a policy target), "
                 "%.1f plies/game, %" PRId64 " games played by two nets or more, %.1f s, %s",
                 a->cycle, a->games, m.games, a->black, a->white, a->draws, len ? rs : "-", a->rows, a->full_rows,
                 a->games ? m.avg_plies : 0.0, a->mixed, m.selfplay_s, rates);
    char rate[32] = "n/a";
    if (a->would_resign) snprintf(rate, sizeof rate, "%.3f", (double)a->false_resign / (double)a->would_resign);
    runlog_event(d->log,
                 "cycle %" PRId64 " resignation: %" PRId64 " no-resign games, %" PRId64 " would have resigned, %" PRId64
                 " of them wrongly (false-resignation rate %s)",
                 a->cycle, a->no_resign, a->would_resign, a->false_resign, rate);
}

/* KOMA_TEST_KILL_AT=<point>[:<cycle>] (driver.h): SIGKILL at a named point,
 * for the tests that need a kill at one exact place. */
static void test_kill_at(driver_t *d, const char *point, int64_t cycle) {
    const char *spec = getenv("KOMA_TEST_KILL_AT");
    size_t n = strlen(point);
    if (!spec || strncmp(spec, point, n) != 0 || (spec[n] != 0 && spec[n] != ':')) return;
    if (spec[n] == ':' && strtoll(spec + n + 1, NULL, 10) != cycle) return;
    if (strcmp(point, "cycle-summary") == 0) /* the cycle's shards committed: only its summary is missing */
        for (int i = 0; i < 6000 && atomic_load(&d->shards.done) < atomic_load(&d->shards.submitted); i++)
            compat_sleep_ms(10);
    runlog_event(d->log, "KOMA_TEST_KILL_AT=%s: killing this process (cycle %" PRId64 ")", spec, cycle);
    compat_kill_pid(compat_getpid());
    for (;;) compat_sleep_ms(1000); /* SIGKILL is on its way */
}

/* On the writer thread: cycle_metrics row `cycle` filled from the games
 * stored (when it has none), keeping whatever else it holds. */
static int metrics_repair_run(db_t *db, void *arg, char *err, size_t errlen) {
    int32_t cycle = (int32_t)(intptr_t)arg;
    db_cycle_metrics_t m;
    db_status_t st = db_cycle_metrics_get_or_init(db, cycle, &m);
    if (st == DB_OK && m.games > 0) return DB_OK; /* written meanwhile */
    int64_t g = 0, p = 0;
    if (st == DB_OK) st = db_count(db, cycle, &g, &p);
    if (st == DB_OK) st = db_cycle_results(db, cycle, &m.black_wins, &m.white_wins, &m.draws, &m.avg_plies);
    if (st == DB_OK) {
        m.games = g;
        m.positions = p;
        st = db_cycle_metrics_put(db, &m);
    }
    if (st != DB_OK) set_err(err, errlen, "cycle_metrics of cycle %d: %s", (int)cycle, db_errmsg(db));
    return st;
}

/* Start-up: a cycle whose games are all committed (every cycle up to the
 * newest model, and those after it that are complete) but whose metrics row
 * is missing or holds no games (kill -9 between the cycle's last shard and
 * its summary) gets its games, positions, results and mean length again
 * from the stored games; the figures of the session that played them
 * (speeds, resignation counts) are gone and stay unrecorded. */
static void repair_metrics(driver_t *d) {
    for (int64_t c = 1;; c++) {
        int64_t g = 0, p = 0;
        if (db_count(d->store.rdb, (int32_t)c, &g, &p) != DB_OK) return;
        if (c > d->ledger.latest && g < d->cfg->games_per_cycle) return; /* being filled: its row comes at its close */
        db_cycle_metrics_t m;
        db_status_t st = db_cycle_metrics_get(d->store.rdb, (int32_t)c, &m);
        if (g == 0 || (st == DB_OK && m.games > 0) || (st != DB_OK && st != DB_NOTFOUND)) continue;
        db_job_t job = {.run = metrics_repair_run, .arg = (void *)(intptr_t)c};
        int qs = db_writer_submit(d->store.writer, &job, 10000);
        if (qs != DB_OK)
            runlog_event(d->log, "warning: cycle %" PRId64 " metrics not queued: %s", c, db_status_name(qs));
        else
            runlog_event(d->log,
                         "cycle %" PRId64 ": its metrics row was %s (killed before the cycle's summary): games, "
                         "positions and results recomputed from its %" PRId64 " stored games",
                         c, st == DB_NOTFOUND ? "missing" : "empty", g);
    }
}

/* The current cycle has its games: flush, hand it on, open the next one. */
static int close_cycle(driver_t *d, char *err, size_t errlen) {
    sp_ledger_t *l = &d->ledger;
    sample_server(d);
    if (flush_shard(d, l->fill, err, errlen) != 0) return -1;
    test_kill_at(d, "cycle-summary", l->fill);
    write_metrics(d);
    sp_ledger_close(l, atomic_load(&d->shards.submitted));
    int64_t g = 0, p = 0;
    if (sp_ledger_playing(l) && db_count(d->store.rdb, (int32_t)l->fill, &g, &p) != DB_OK) g = p = 0;
    sp_ledger_stored(l, g, p);
    sp_ledger_begin(l, compat_now_ns(), wall_now());
    return 0;
}

/* A finished game, from this process (rank 0) or from another rank: the same path. */
static int handle_record(driver_t *d, sp_record_t *r, int32_t rank, const char *host, char *err, size_t errlen) {
    shard_builder_t *b = d->shards.builder;
    if (!sp_ledger_playing(&d->ledger) || !b) { /* every cycle has its games: the run is finishing */
        sp_record_free(r);
        return 0;
    }
    int64_t gen = sp_record_main_gen(r);
    if (sp_record_add_to_shard(r, b, model_id_of_gen(d, gen), rank, host, err, errlen) != 0) {
        sp_record_free(r);
        return -1;
    }
    bool full = sp_ledger_add(&d->ledger, r, gen);
    sp_record_free(r);
    if (d->cfg->shard_games > 0 && shard_builder_games(b) >= d->cfg->shard_games)
        if (flush_shard(d, d->ledger.fill, err, errlen) != 0) return -1;
    if (full) return close_cycle(d, err, errlen);
    return 0;
}

static void stop_selfplay(driver_t *d, bool keep, char *err, size_t errlen);

/* Another rank's game (sp_job_game_fn). */
static int handle_remote(void *user, sp_ranks_game_t *g, char *err, size_t errlen) {
    return handle_record(user, g->rec, g->rank, g->host, err, errlen);
}

/* Games: this process's and the other ranks', into the ledger and the
 * shards; once every cycle has its games, self-play stops. Returns 0,
 * SP_RANKS_LEFT (a rank left: logged) or -1 with err. */
static int take_games(driver_t *d, char *err, size_t errlen) {
    sp_record_t *recs[SP_TAKE_MAX];
    int32_t n = d->play.running ? sp_pool_take(d->play.pool, recs, SP_TAKE_MAX, 50) : 0;
    d->play.taken += n;
    for (int32_t i = 0; i < n; i++)
        if (handle_record(d, recs[i], 0, d->host, err, errlen) != 0) {
            for (int32_t j = i + 1; j < n; j++) sp_record_free(recs[j]);
            return -1;
        }
    /* the other ranks' games, committed as this process's own */
    int rc = sp_job_games(d->job, d->play.running ? 0 : 10, handle_remote, d, err, errlen);
    if (rc == SP_RANKS_LEFT) runlog_event(d->log, "%s", err);
    if (rc != 0) return rc == SP_RANKS_LEFT ? SP_RANKS_LEFT : -1;
    if (!sp_ledger_playing(&d->ledger) && d->play.running) stop_selfplay(d, false, NULL, 0);
    return 0;
}

/* Closed cycles whose shards are all committed go to the trainer, in order. */
static int submit_training(driver_t *d, char *err, size_t errlen) {
    int64_t done = atomic_load(&d->shards.done), c;
    while (sp_ledger_trainable(&d->ledger, done, &c)) {
        int64_t g = 0, p = 0;
        if (db_count(d->store.rdb, (int32_t)c, &g, &p) != DB_OK) p = 0;
        if (train_trainer_submit(d->trainer, c) != 0) {
            set_err(err, errlen, "%s: the trainer refused cycle %" PRId64, d->run_dir, c);
            return -1;
        }
        sp_ledger_train(&d->ledger, train_steps_for(&d->tcfg, p));
        runlog_event(d->log, "cycle %" PRId64 ": %" PRId64 " games, %" PRId64 " positions committed; training", c, g,
                     p);
    }
    return 0;
}

/* Reports of finished training cycles, in order: each new net goes to the
 * other ranks and the gauntlet's queue. Returns 0, -1 (error) or
 * TRAIN_STOPPED. */
static int poll_training(driver_t *d, int64_t timeout_ms, char *err, size_t errlen) {
    int64_t c;
    while (sp_ledger_training(&d->ledger, &c, NULL)) {
        train_cycle_report_t rep;
        char e[1024] = "";
        int st = train_trainer_wait(d->trainer, c, timeout_ms, &rep, e, sizeof e);
        if (st == TRAIN_TIMEOUT) return 0;
        if (st == TRAIN_STOPPED) return TRAIN_STOPPED;
        if (st != TRAIN_OK) {
            set_err(err, errlen, "training cycle %" PRId64 " failed: %s", c, e);
            return -1;
        }
        sp_ledger_published(&d->ledger, rep.step);
        int64_t gen = d->server ? nn_server_generation(d->server) : 0;
        if (gen != c + 1)
            runlog_event(d->log,
                         "note: the server is at generation %" PRId64 " after model cycle %" PRId64
                         " (expected %" PRId64 "): games may name a neighbouring model",
                         gen, c, c + 1);
        runlog_event(d->log,
                     "model %" PRId64 "/%" PRId64 " published: %s, %" PRId64 " steps (%" PRId64 " in all), loss %.4f "
                     "(policy %.4f value %.4f legal %.5f), window %" PRId64 " positions, %.1f s",
                     c, d->ledger.target, rep.model_path, rep.steps, rep.step, rep.loss, rep.policy_loss,
                     rep.value_loss, rep.legal_loss, rep.window_positions, rep.seconds);
        if (c < d->ledger.target && sp_job_send_net(d->job, d->store.rdb, c, d->seed, err, errlen) != 0) return -1;
        sp_gauntlet_enqueue(d->gauntlet, c);
        if (timeout_ms > 0) timeout_ms = 0;
    }
    return 0;
}

/* Self-play pauses rather than run more than --max-ahead cycles ahead of
 * the newest net; the other ranks pause with this one, and for good once
 * every cycle has its games. 0, or -1 with err. */
static int pace(driver_t *d, char *err, size_t errlen) {
    play_t *p = &d->play;
    const sp_ledger_t *l = &d->ledger;
    if (p->running) {
        int64_t ahead = d->cfg->sync_train ? 0 : d->cfg->max_ahead;
        bool want = sp_ledger_too_far_ahead(l, ahead);
        if (want != p->paused) { /* the pool itself pauses at its limit, below */
            p->paused = want;
            if (want)
                runlog_event(d->log,
                             "self-play paused: cycle %" PRId64 " waits for model %" PRId64 " (newest %" PRId64 ")",
                             l->fill, l->fill - 1 - ahead, l->latest);
            else runlog_event(d->log, "self-play resumed with model %" PRId64, l->latest);
        }
        /* no game begins that would finish past the point where self-play
         * must wait (0 games allowed while it must: the pool is paused) */
        int64_t limit = p->taken + sp_ledger_games_allowed(l, ahead);
        if (limit != p->limit) {
            p->limit = limit;
            sp_pool_limit(p->pool, limit);
        }
    }
    return sp_job_pause(d->job, p->paused || !sp_ledger_playing(l), err, errlen);
}

/* ---- progress ------------------------------------------------------------------------------ */

/* What the trainer does, for the progress line. */
static void training_text(driver_t *d, char *buf, size_t n) {
    const sp_ledger_t *l = &d->ledger;
    int64_t c, total, s = 0;
    if (sp_ledger_training(l, &c, &total)) {
        train_progress_t tp;
        train_trainer_progress(d->trainer, &tp);
        if (tp.cycle == c) s = tp.step, total = tp.steps;
        if (s > 0)
            snprintf(buf, n, "training cycle %" PRId64 ": step %" PRId64 "/%" PRId64 " (%.0f samples/s)", c, s, total,
                     tp.samples_per_s);
        else snprintf(buf, n, "training cycle %" PRId64 ": ~%" PRId64 " steps", c, total);
        if (l->n_training > 1) snprintf(buf + strlen(buf), n - strlen(buf), " (+%d queued)", l->n_training - 1);
    } else if (l->n_closed > 0) {
        snprintf(buf, n, "waiting for cycle %" PRId64 "'s shards", l->closed[0].cycle);
    } else {
        snprintf(buf, n, "idle");
    }
}

/* The status line (at most once per --progress period; forced at the end),
 * and the log file's copy of it once a minute; between lines the cycle's
 * figures are still sampled every second. */
static void progress(driver_t *d, bool force) {
    meter_t *mt = &d->meter;
    const sp_ledger_t *l = &d->ledger;
    int64_t now = compat_now_ns();
    double dt = (double)(now - mt->prog_t_ns) * 1e-9;
    bool log_due = runlog_file_due(d->log, 60.0); /* the log: once a minute */
    if (!force && !log_due && (d->cfg->progress_s == 0 || !status_due(d->st))) {
        if (dt >= 1.0 && (d->cfg->progress_s == 0 || status_period(d->st) > 1.0)) {
            sample_server(d); /* keep the cycle figures */
        }
        return;
    }
    sample_server(d);
    sp_pool_stats_t ps = {0};
    if (d->play.pool) sp_pool_stats(d->play.pool, &ps);
    mcts_cache_stats_t cs = {0};
    if (d->play.cache) mcts_cache_stats(d->play.cache, &cs);
    double pos_s = dt > 0 ? (double)(ps.searches - mt->prog_searches) / dt : 0;
    double evals = mt->win_s > 0 ? mt->win_evals / mt->win_s : 0;
    double batch = mt->win_batches > 0 ? mt->win_evals / mt->win_batches : 0;
    double busy = mt->win_worker_s > 0 ? 100.0 * mt->win_busy / mt->win_worker_s : 0;
    if (busy > 100.0) busy = 100.0; /* a batch straddling two intervals counts in the second */
    int64_t dl = (int64_t)cs.lookups - mt->prog_lookups, dh = (int64_t)cs.hits - mt->prog_hits;
    double hit = dl > 0 ? 100.0 * (double)dh / (double)dl : 0;
    mt->prog_t_ns = now;
    mt->prog_searches = ps.searches;
    mt->prog_lookups = (int64_t)cs.lookups;
    mt->prog_hits = (int64_t)cs.hits;
    mt->win_evals = mt->win_batches = mt->win_busy = mt->win_worker_s = mt->win_s = 0;

    char train[160], ev[96] = "", eta[32] = "-", cyc[64], ranks[512];
    training_text(d, train, sizeof train);
    sp_gauntlet_describe(d->gauntlet, ev, sizeof ev);
    if (sp_ledger_playing(l)) {
        fmt_duration(sp_ledger_eta_s(l, secs_since(l->acc.t0_ns)), eta, sizeof eta); /* "?" before a game */
        snprintf(cyc, sizeof cyc, "cycle %" PRId64 "/%" PRId64 "%s", l->fill, l->target,
                 d->play.paused ? " (paused)" : "");
    } else {
        snprintf(cyc, sizeof cyc, "cycle -/%" PRId64 " (self-play done)", l->target);
    }
    pos_s = sp_job_describe(d->job, pos_s, ranks, sizeof ranks); /* the job's rate, then each rank's */
    char games[96], line[1600]; /* the cycle's games while it plays; once self-play is done, the run's */
    if (sp_ledger_playing(l))
        snprintf(games, sizeof games, "games %" PRId64 "/%" PRId64 " (total %" PRId64 ", playing %d)", l->fill_games,
                 d->cfg->games_per_cycle, l->total_games, ps.active);
    else snprintf(games, sizeof games, "games %" PRId64 " in all", l->total_games);
    snprintf(line, sizeof line,
             "%s | %s | ETA %s | %.1f pos/s%s | %.0f evals/s | batch %.1f | busy %.0f%% | cache %.0f%% | %s%s", cyc,
             games, eta, pos_s, ranks, evals, batch, busy, hit, train, ev);
    if (d->cfg->progress_s != 0) status_line(d->st, force, "%s", line);
    if (log_due || force) runlog_file_line(d->log, line);
}

/* ---- start-up and shutdown ---------------------------------------------------------------- */

static int open_run(driver_t *d, const char *config_text, char *err, size_t errlen) {
    store_t *s = &d->store;
    char e[DB_ERR_MAX + 256], path[SP_PATH_MAX + 64];
    uint32_t flags = RUN_WRITE | RUN_CREATE | (d->cfg->verify_shards ? RUN_VERIFY : 0);
    s->run = run_open(d->run_dir, flags, "selfplay", err, errlen); /* writes nothing in a foreign directory */
    if (!s->run) return -1;
    s->db = run_db(s->run);
    run_path(d->run_dir, RUN_LOG, path, sizeof path);
    if (runlog_open(d->log, path) != 0)
        runlog_event(d->log, "warning: cannot open %s for appending; logging to stderr only", path);
    if (run_is_new(s->run)) runlog_event(d->log, "new run in %s", d->run_dir);
    for (int32_t i = 0; i < run_findings(s->run); i++)
        runlog_event(d->log, "start-up check: %s", run_finding(s->run, i));
    int64_t ns = 0, nm = 0;
    run_checked(s->run, &ns, &nm);
    runlog_event(d->log, "start-up check: %" PRId64 " shards, %" PRId64 " models checked, %d finding(s)", ns, nm,
                 run_findings(s->run));
    if (db_run_insert(s->db, KOMA_VERSION_STRING, "selfplay", config_text ? config_text : "", &s->run_id) != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(s->db));
        return -1;
    }
    s->writer = db_writer_start(s->db, SP_WRITER_CAPACITY, e, sizeof e);
    if (!s->writer) {
        set_err(err, errlen, "%s: writer thread: %s", d->run_dir, e);
        return -1;
    }
    run_path(d->run_dir, RUN_DB, path, sizeof path);
    if (db_open(path, DB_OPEN_READONLY, &s->rdb, e, sizeof e) != DB_OK) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    d->gauntlet = sp_gauntlet_new(d->cfg, d->run_dir, s->rdb, s->writer, runlog_line, d->log);
    if (!d->gauntlet) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    d->report = sp_live_report_new(d->run_dir, d->cfg->report, d->log);
    return 0;
}

/* The newest model (the trainer writes cycle 0 for a new run), the
 * inference server on it and the trainer thread (none when the run has its
 * last model). */
static int open_nets(driver_t *d, char *err, size_t errlen) {
    char e[1536];
    db_model_t m;
    db_status_t st = db_model_latest(d->store.rdb, &m);
    if (st == DB_NOTFOUND) {
        train_trainer_t *t0 = train_trainer_new(&d->tcfg, d->run_dir, d->store.writer, NULL, e, sizeof e);
        if (!t0) {
            set_err(err, errlen, "%s", e);
            return -1;
        }
        train_trainer_free(t0);
        st = db_model_latest(d->store.rdb, &m);
    }
    if (st != DB_OK) {
        set_err(err, errlen, "%s: no model: %s", d->run_dir, db_errmsg(d->store.rdb));
        return -1;
    }
    sp_ledger_resume(&d->ledger, m.cycle, m.train_steps);
    if (m.cycle >= d->ledger.target) return 0; /* nothing to play */
    nn_server_config_t sc = sp_config_server(d->cfg);
    sc.generation = m.cycle + 1;
    char path[SP_PATH_MAX + DB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", d->run_dir, m.path);
    d->server = nn_server_new(&sc, path, NULL, e, sizeof e);
    if (!d->server) {
        set_err(err, errlen, "inference server: %s", e);
        return -1;
    }
    const nn_net_config_t *nc = nn_server_net_config(d->server);
    nn_server_stats_t ss;
    nn_server_stats(d->server, &ss);
    d->meter.srv_t_ns = compat_now_ns(); /* the baseline of the cycle figures */
    char arch[32];
    runlog_event(d->log, "net: %s = %s, generation %" PRId64 ", %s backend, %d device worker(s), max batch %d", m.path,
                 nn_net_arch_format(nc, arch, sizeof arch), nn_server_generation(d->server),
                 nn_server_backend_name(d->server), ss.workers, nn_server_max_batch(d->server));
    d->trainer = train_trainer_new(&d->tcfg, d->run_dir, d->store.writer, d->server, e, sizeof e);
    if (!d->trainer) {
        set_err(err, errlen, "%s", e);
        return -1;
    }
    if (train_trainer_latest_cycle(d->trainer) != m.cycle) {
        set_err(err, errlen, "%s: the trainer starts from cycle %" PRId64 ", the database's newest model is %" PRId64,
                d->run_dir, train_trainer_latest_cycle(d->trainer), (int64_t)m.cycle);
        return -1;
    }
    if (train_trainer_start(d->trainer) != 0) {
        set_err(err, errlen, "%s: cannot start the trainer thread", d->run_dir);
        return -1;
    }
    return 0;
}

/* Where the run stands: cycles whose games are all committed go to the
 * trainer, the first incomplete one is filled. */
static int plan_cycles(driver_t *d, char *err, size_t errlen) {
    sp_ledger_t *l = &d->ledger;
    db_summary_t s;
    if (db_summary(d->store.rdb, &s) != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(d->store.rdb));
        return -1;
    }
    d->shards.seq = s.shards + 1;
    l->total_games = s.games; /* committed before start-up */
    for (;;) {
        int64_t g = 0, p = 0;
        if (db_count(d->store.rdb, (int32_t)l->fill, &g, &p) != DB_OK) {
            set_err(err, errlen, "%s", db_errmsg(d->store.rdb));
            return -1;
        }
        if (!sp_ledger_stored(l, g, p)) break;
        runlog_event(d->log, "cycle %" PRId64 ": %" PRId64 " games already committed", l->fill, g);
        sp_ledger_close(l, 0);
    }
    sp_ledger_begin(l, compat_now_ns(), wall_now());
    runlog_event(d->log, "run %s: newest model cycle %" PRId64 " of %" PRId64 ", %" PRId64 " games so far; %s",
                 d->run_dir, l->latest, l->target, s.games,
                 sp_ledger_playing(l) ? "playing" : "self-play done, training");
    if (sp_ledger_playing(l) && l->fill_games > 0)
        runlog_event(d->log, "cycle %" PRId64 " resumes with %" PRId64 " of %" PRId64 " games", l->fill, l->fill_games,
                     d->cfg->games_per_cycle);
    return 0;
}

static int start_selfplay(driver_t *d, char *err, size_t errlen) {
    if (new_builder(d, err, errlen) != 0) return -1;
    uint64_t seed = d->cfg->seed ? (uint64_t)d->cfg->seed
                                 : (uint64_t)time(NULL) ^ ((uint64_t)compat_getpid() << 32) ^ (uint64_t)compat_now_ns();
    seed = compat_mix64(seed ^ compat_mix64((uint64_t)d->store.run_id)); /* a resumed run never replays its games */
    d->seed = seed;
    sp_gauntlet_set_seed(d->gauntlet, seed);
    if (!sp_ledger_playing(&d->ledger)) return 0;
    play_t *p = &d->play;
    if (d->cfg->cache_mb > 0) {
        p->cache = mcts_cache_new(d->cfg->cache_mb << 20);
        if (!p->cache) {
            set_err(err, errlen, "out of memory for a %lld MiB cache", (long long)d->cfg->cache_mb);
            return -1;
        }
    }
    p->pool = sp_pool_new(d->cfg, d->server, p->cache, seed, err, errlen);
    if (!p->pool) return -1;
    p->limit = sp_ledger_games_allowed(&d->ledger, d->cfg->sync_train ? 0 : d->cfg->max_ahead);
    sp_pool_limit(p->pool, p->limit);
    if (sp_pool_start(p->pool, err, errlen) != 0) return -1;
    p->running = true;
    runlog_event(
        d->log,
        "self-play: %lld threads x %lld games, %s search, %lld visits (full, p=%.2f) / %lld (fast), max ply %lld",
        (long long)sp_config_threads(d->cfg), (long long)d->cfg->games_per_thread, d->cfg->search,
        (long long)d->cfg->visits, d->cfg->full_prob, (long long)d->cfg->visits_fast, (long long)d->cfg->max_ply);
    return 0;
}

/* Stops self-play; with keep, the games it finished go into a last shard. */
static void stop_selfplay(driver_t *d, bool keep, char *err, size_t errlen) {
    play_t *p = &d->play;
    if (!p->pool || !p->running) return;
    sp_pool_stop(p->pool);
    p->running = false;
    sp_record_t *recs[SP_TAKE_MAX];
    int32_t n;
    while ((n = sp_pool_take(p->pool, recs, SP_TAKE_MAX, 0)) > 0)
        for (int32_t i = 0; i < n; i++) {
            if (keep && d->shards.builder && sp_ledger_playing(&d->ledger)) {
                char e[512];
                if (handle_record(d, recs[i], 0, d->host, e, sizeof e) != 0 && err && !err[0])
                    set_err(err, errlen, "%s", e);
            } else {
                sp_record_free(recs[i]);
            }
        }
    if (keep && sp_ledger_playing(&d->ledger) && d->shards.builder && shard_builder_games(d->shards.builder) > 0) {
        char e[512];
        if (flush_shard(d, d->ledger.fill, e, sizeof e) != 0 && err && !err[0]) set_err(err, errlen, "%s", e);
    }
}

/* The threads (self-play, trainer, writer: its queue drained), then the
 * run: its database connections, the log file, the writer lock last. */
static void shutdown_all(driver_t *d) {
    store_t *s = &d->store;
    if (d->play.pool) sp_pool_stop(d->play.pool);
    if (d->trainer) train_trainer_stop(d->trainer);
    if (s->writer) {
        int st = db_writer_stop(s->writer, SP_WRITER_DRAIN_MS);
        if (st != DB_OK)
            runlog_event(d->log, "warning: the writer stopped with items unwritten (%s)", db_status_name(st));
        db_writer_stats_t ws;
        db_writer_stats(s->writer, &ws);
        int64_t failed = ws.jobs_failed + ws.steps_failed + ws.cycles_failed;
        if (failed > 0) {
            s->failures += failed;
            snprintf(s->failure, sizeof s->failure, "%.700s", ws.last_error);
        }
    }
    train_trainer_free(d->trainer);
    d->trainer = NULL;
    sp_pool_free(d->play.pool);
    d->play.pool = NULL;
    nn_server_free(d->server);
    d->server = NULL;
    db_writer_free(s->writer);
    s->writer = NULL;
    shard_builder_free(d->shards.builder);
    d->shards.builder = NULL;
    mcts_cache_free(d->play.cache);
    d->play.cache = NULL;
    char e[DB_ERR_MAX + 64];
    int64_t failed = sp_gauntlet_db_failures(d->gauntlet, e, sizeof e);
    if (failed > 0) s->failures += failed, snprintf(s->failure, sizeof s->failure, "%s", e);
    sp_gauntlet_free(d->gauntlet); /* before its database connection closes */
    d->gauntlet = NULL;
    sp_live_report_free(d->report); /* the last page, once every write is committed */
    d->report = NULL;
    db_close(s->rdb);
    s->rdb = NULL;
    sp_ledger_free(&d->ledger);
    runlog_close(d->log);
    run_close(s->run); /* closes s->db and releases the writer lock: the last thing */
    s->run = NULL;
    s->db = NULL;
}

static driver_t *driver_new(const sp_config_t *cfg, const train_config_t *tcfg, char *err, size_t errlen) {
    driver_t *d = calloc(1, sizeof *d);
    if (d) {
        d->st = status_new(stderr, cfg->progress_s > 0 ? cfg->progress_s : 0, cfg->quiet != 0);
        d->log = runlog_new(d->st);
    }
    if (!d || !d->log) {
        set_err(err, errlen, "out of memory");
        fprintf(stderr, "error: %s\n", err); /* shown here, as every error of the run (sp_main does not repeat it) */
        if (d) status_free(d->st);
        free(d);
        return NULL;
    }
    d->cfg = cfg;
    d->tcfg = *tcfg;
    snprintf(d->tcfg.init, sizeof d->tcfg.init, "%s", cfg->init); /* --init: the trainer makes the first net */
    d->tcfg.log = train_log;
    d->tcfg.log_user = d->log;
    d->t_start_ns = compat_now_ns();
    snprintf(d->run_dir, sizeof d->run_dir, "%s", cfg->run);
    size_t rl = strlen(d->run_dir);
    while (rl > 1 && d->run_dir[rl - 1] == '/') d->run_dir[--rl] = 0;
    compat_hostname(d->host, sizeof d->host);
    sp_ledger_init(&d->ledger, cfg->cycles, cfg->games_per_cycle);
    d->shards.fmt = (shard_format_t){ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    atomic_init(&d->shards.submitted, 0);
    atomic_init(&d->shards.done, 0);
    atomic_init(&d->shards.failed, 0);
    compat_mutex_init(&d->shards.mu);
    d->meter.prog_t_ns = compat_now_ns();
    return d;
}

static void driver_free(driver_t *d) {
    runlog_free(d->log);
    status_free(d->st);
    compat_mutex_destroy(&d->shards.mu);
    free(d);
}

/* ---- the loop's parts ------------------------------------------------------------------------ */

/* The run already has its last model: an evaluation of it that a stop
 * interrupted is played first. */
static int nothing_to_play(driver_t *d) {
    if (sp_gauntlet_resume(d->gauntlet, d->ledger.latest) > 0) {
        sp_gauntlet_set_seed(d->gauntlet, compat_mix64((uint64_t)d->store.run_id ^ (uint64_t)compat_now_ns()));
        while (!compat_stop_requested() && !sp_gauntlet_idle(d->gauntlet)) sp_gauntlet_poll(d->gauntlet, true);
    }
    runlog_event(d->log, "run %s already has model cycle %" PRId64 " (--cycles %" PRId64 "): nothing to do", d->run_dir,
                 d->ledger.latest, d->ledger.target);
    return compat_stop_requested() ? SP_EXIT_INTERRUPTED : SP_EXIT_DONE;
}

/* Ctrl-C or SIGTERM, or --cpu-minutes used (*budget: every thread then
 * stops as on Ctrl-C). */
static bool stop_due(driver_t *d, bool *budget) {
    const int64_t cpu_limit_ns = (int64_t)(d->cfg->cpu_minutes * 60e9);
    if (cpu_limit_ns > 0 && !*budget && compat_cpu_time_ns() >= cpu_limit_ns) {
        runlog_event(d->log, "CPU budget of %g minutes used: stopping as on Ctrl-C", d->cfg->cpu_minutes);
        *budget = true;
        compat_request_stop(); /* every thread stops as on a signal */
    }
    return compat_stop_requested();
}

/* A worker or a shard commit failed: 1 with err. */
static int run_failed(driver_t *d, char *err, size_t errlen) {
    if (d->play.pool && sp_pool_error(d->play.pool, err, errlen)) return 1;
    return shard_failed(d, err, errlen);
}

/* Every cycle published and every evaluation played. */
static int end_done(driver_t *d) {
    progress(d, true);
    status_finish(d->st); /* the final status line stays; the summary goes below it */
    sp_job_finish(d->job, SP_EXIT_DONE, false, d->trainer, NULL, NULL);
    runlog_event(d->log, "run %s: model cycle %" PRId64 " published, %" PRId64 " games in all, %.1f s", d->run_dir,
                 d->ledger.latest, d->ledger.total_games, secs_since(d->t_start_ns));
    return SP_EXIT_DONE;
}

/* Stopped (Ctrl-C, SIGTERM, --cpu-minutes, a rank that left, the trainer
 * stopped): the finished games are committed, the games in progress and
 * the evaluation in flight dropped. */
static int end_stopped(driver_t *d, bool budget) {
    status_finish(d->st); /* the status line stays as it was; what follows goes below it */
    runlog_event(d->log, "stop requested: committing finished games, dropping games in progress");
    char e[1024] = "";
    sp_job_finish(d->job, SP_EXIT_INTERRUPTED, true, d->trainer, handle_remote, d);
    stop_selfplay(d, true, e, sizeof e);
    if (e[0]) runlog_event(d->log, "warning: %s", e);
    sp_gauntlet_finish(d->gauntlet);
    return budget ? SP_EXIT_DONE : SP_EXIT_INTERRUPTED;
}

/* The shutdown of every end (e: the error when rc is SP_EXIT_ERROR): an
 * error still commits the finished games; then the other ranks, the
 * evaluation, the threads and the run, and what the user is told. Returns
 * the exit status. */
static int shut_down(driver_t *d, int rc, const char *e, bool budget, char *err, size_t errlen) {
    status_finish(d->st);
    if (rc == SP_EXIT_ERROR) {
        runlog_event(d->log, "error: %s", e); /* the one place the error is shown: sp_main does not repeat it */
        set_err(err, errlen, "%s", e);
        /* keep what is finished: the finished games still go to a shard */
        bool keep = !atomic_load(&d->shards.failed);
        sp_job_finish(d->job, SP_EXIT_ERROR, keep, d->trainer, handle_remote, d);
        char e2[512] = "";
        if (keep) stop_selfplay(d, true, e2, sizeof e2);
    }
    sp_job_finish(d->job, rc, false, d->trainer, NULL, NULL); /* the early ends (nothing to do, Ctrl-C at start-up) */
    sp_gauntlet_finish(d->gauntlet);                          /* never leave the match thread running */
    shutdown_all(d);
    sp_job_close(d->job);
    if (d->store.failures > 0 && rc != SP_EXIT_ERROR) {
        /* Everything committed is kept, but a database that refused writes is not a clean run. */
        set_err(err, errlen, "%" PRId64 " database write(s) failed during the run; the last: %s", d->store.failures,
                d->store.failure);
        rc = SP_EXIT_ERROR;
        status_event(d->st, STATUS_WARN, "error: %s", err); /* the log file is closed by now */
    }
    if (budget && rc == SP_EXIT_DONE) {
        fprintf(stderr, "CPU budget of %g minutes used: everything committed is kept; the same command goes on\n",
                d->cfg->cpu_minutes);
    }
    if (rc == SP_EXIT_INTERRUPTED) {
        fprintf(stderr, "interrupted: everything committed is kept; run the same command to resume\n");
    }
    sp_job_end(d->job, rc); /* a rank that did not answer: the job ends (mpirun reports it) */
    d->job = NULL;
    return rc;
}

/* ---- the loop ------------------------------------------------------------------------------ */

int sp_run(const sp_config_t *cfg, const train_config_t *tcfg, const char *config_text, char *err, size_t errlen) {
    return sp_run_job(cfg, tcfg, config_text, NULL, err, errlen);
}

int sp_run_job(const sp_config_t *cfg, const train_config_t *tcfg, const char *config_text, dist_t *dist, char *err,
               size_t errlen) {
    char e[2048] = "";
    if (sp_config_check(cfg, e, sizeof e) != 0) {
        set_err(err, errlen, "%s", e);
        return SP_EXIT_USAGE;
    }
    driver_t *d = driver_new(cfg, tcfg, err, errlen);
    if (!d) return SP_EXIT_ERROR;
    int rc = SP_EXIT_ERROR;
    bool budget = false; /* --cpu-minutes ended the run */
    bool done = false;   /* every cycle published */

    /* Open the run: the other ranks first (before anything can fail: they
     * must hear the end), the run directory and its database, the newest
     * net (the inference server) and the trainer thread. */
    if (sp_job_open(dist, cfg, &d->tcfg, d->log, d->host, d->run_dir, &d->job, err, errlen) != 0) {
        driver_free(d); /* every rank was ended */
        return SP_EXIT_ERROR;
    }
    if (open_run(d, config_text, e, sizeof e) != 0 || open_nets(d, e, sizeof e) != 0) goto out;
    repair_metrics(d);
    if (d->ledger.latest >= d->ledger.target) {
        rc = nothing_to_play(d);
        goto out;
    }

    /* Start the threads: self-play from where the run stands, the newest
     * net to the other ranks, the evaluations earlier sessions owe. */
    if (plan_cycles(d, e, sizeof e) != 0 || start_selfplay(d, e, sizeof e) != 0) goto out;
    if (sp_ledger_playing(&d->ledger) &&
        sp_job_send_net(d->job, d->store.rdb, d->ledger.latest, d->seed, e, sizeof e) != 0)
        goto out;
    sp_gauntlet_resume(d->gauntlet, d->ledger.latest);

    /* The loop: games -> ledger -> shards -> trainer -> gauntlet -> progress. */
    for (;;) {
        if (stop_due(d, &budget)) break;
        if (run_failed(d, e, sizeof e)) goto out;
        int got = take_games(d, e, sizeof e); /* games -> ledger -> shards (a full cycle closes) */
        if (got == SP_RANKS_LEFT) break;
        if (got != 0) goto out;
        if (submit_training(d, e, sizeof e) != 0) goto out;               /* committed cycles -> trainer */
        int st = poll_training(d, d->play.running ? 0 : 50, e, sizeof e); /* new nets -> ranks, gauntlet queue */
        if (st == TRAIN_STOPPED) break;
        if (st != 0) goto out;
        sp_gauntlet_poll(d->gauntlet, false);
        sp_live_report_poll(d->report, d->ledger.latest, d->gauntlet); /* a new net or rating: report.html */
        if (pace(d, e, sizeof e) != 0) goto out;
        progress(d, false);
        if (sp_ledger_done(&d->ledger) && sp_gauntlet_idle(d->gauntlet)) {
            done = true;
            break;
        }
        if (!d->play.running && d->ledger.n_training == 0) compat_sleep_ms(20); /* waiting: shards, an evaluation */
    }

    /* Shut down. */
    rc = done ? end_done(d) : end_stopped(d, budget);
out:
    rc = shut_down(d, rc, e, budget, err, errlen);
    driver_free(d);
    return rc;
}

/* ---- the command -------------------------------------------------------------------------- */

static const char *const USAGE = "usage: selfplay [--config FILE] [--run DIR] [--cycles N] [flags]\n"
                                 "Plays self-play games with the newest net of the run, stores them, trains and\n"
                                 "publishes the next net, until --cycles nets exist. Killing it and starting the\n"
                                 "same command again resumes the run. It is the run's one writer while it runs\n"
                                 "(a second selfplay, train or import on the run is refused, naming it); it refuses\n"
                                 "a damaged or foreign koma.db, a replaced newest model, and a lost koma.db with\n"
                                 "models/ or shards/ left (never a new run over them). Exit status: 0 done, 1 error\n"
                                 "(any database error included), 2 bad flags, 130 stopped by Ctrl-C (everything\n"
                                 "committed is kept).";

int sp_main(int argc, char **argv, int install_stop_handler) {
    static sp_config_t cfg; /* bound by the flag table (large strings) */
    static train_config_t tcfg;
    sp_config_default(&cfg);
    tcfg = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    cfg_opt_t opts[SP_CONFIG_NFLAGS + TRAIN_CONFIG_NFLAGS];
    int n = sp_config_flags(&cfg, opts, SP_CONFIG_NFLAGS);
    n += train_config_flags(&tcfg, opts + n, TRAIN_CONFIG_NFLAGS);
    char err[2048];
    int rc = cfg_parse(opts, n, argc, argv, 1, NULL, 0, NULL, USAGE, stdout, err, sizeof err);
    if (rc == CFG_HELP) return SP_EXIT_DONE;
    if (rc != CFG_OK || train_config_check(&tcfg, err, sizeof err) != 0 ||
        sp_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "selfplay: %s\n", err);
        return SP_EXIT_USAGE;
    }
    if (install_stop_handler) compat_install_stop_handler();
    dist_t *dist = dist_init(&argc, &argv, err, sizeof err);
    if (!dist) {
        fprintf(stderr, "selfplay: %s\n", err);
        return SP_EXIT_ERROR;
    }
    int32_t rank = dist_rank(dist), K = (int32_t)cfg.train_ranks;
    dist_t *group = NULL;
    if (sp_config_games_per_thread(&cfg) < cfg.games_per_thread) { /* a thread's games never exceed a cycle's */
        if (rank == 0)
            fprintf(stderr,
                    "selfplay: --games-per-thread %lld capped at %lld: a thread never plays more games at "
                    "once than a cycle has (--games-per-cycle %lld)\n",
                    (long long)cfg.games_per_thread, (long long)sp_config_games_per_thread(&cfg),
                    (long long)cfg.games_per_cycle);
        cfg.games_per_thread = sp_config_games_per_thread(&cfg);
    }
    if (K > dist_size(dist) || (K > 1 && tcfg.batch % K != 0)) { /* every rank sees the same flags and refuses */
        if (rank == 0) {
            if (K > dist_size(dist))
                fprintf(stderr, "selfplay: --train-ranks %d: the job has %d rank(s) (mpirun -np N with N >= %d)\n",
                        (int)K, (int)dist_size(dist), (int)K);
            else
                fprintf(stderr,
                        "selfplay: --batch %d is the global batch of the %d training ranks: it must be a "
                        "multiple of %d\n",
                        (int)tcfg.batch, (int)K, (int)K);
        }
        dist_free(dist);
        return SP_EXIT_USAGE;
    }
    if (K > 1 && dist_split(dist, rank < K ? 0 : -1, rank, &group, err, sizeof err) != 0) {
        fprintf(stderr, "selfplay rank %d: the training group: %s\n", (int)rank, err);
        dist_abort(dist, SP_EXIT_ERROR); /* the others may be waiting in the split */
        dist_free(dist);
        return SP_EXIT_ERROR;
    }
    if (rank != 0) { /* a rank that plays (no run, no trainer), or one that trains with rank 0 */
        rc = group ? sp_train_rank_run(&cfg, &tcfg, dist, group) : sp_remote_run(&cfg, dist);
        dist_free(group);
        dist_free(dist);
        return rc;
    }
    tcfg.group = group;
    char *text = cfg_dump_string(opts, n);
    rc = sp_run_job(&cfg, &tcfg, text, dist, err, sizeof err);
    free(text);
    if (rc == SP_EXIT_USAGE) fprintf(stderr, "selfplay: %s\n", err); /* an error was shown as "error: ..." */
    dist_free(group);
    dist_free(dist);
    return rc;
}
