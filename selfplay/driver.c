/* driver.c - the cycle driver behind `selfplay`; see driver.h. */
#include "selfplay/driver.h"
#include "compat/bits.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
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
#include "selfplay/ranks.h"
#include "selfplay/trainrank.h"
#include "selfplay/wire.h"
#include "selfplay/worker.h"

#ifndef KOMA_VERSION_STRING
#define KOMA_VERSION_STRING "0.0.0"
#endif

#define SP_PATH_MAX 1024
#define SP_WRITER_CAPACITY 1024
#define SP_WRITER_DRAIN_MS 600000 /* a stop waits this long for queued shard writes */
#define SP_SUBMIT_TIMEOUT_MS 600000
#define SP_TAKE_MAX 256
#define SP_RANKS_IN_FLIGHT 8      /* rank 0's sends in flight (nets, orders) */
#define SP_RANKS_INBOX 256        /* messages received and not yet taken */
#define SP_RANKS_STOP_MS 60000    /* the other ranks get this long to answer STOP */

/* A closed cycle whose shards are on their way to the writer. */
typedef struct {
    int64_t cycle;
    int64_t need_shards; /* committed shard jobs needed before it can be trained */
} closed_t;

/* A cycle handed to the trainer and not yet reported. */
typedef struct {
    int64_t cycle;
    int64_t steps;       /* expected optimizer steps (train_steps_for) */
} training_t;

/* What the current cycle has done in this session. */
typedef struct {
    int64_t cycle;
    int64_t t0_ns;
    double started;      /* unix seconds */
    int64_t games, rows, plies, full_rows;
    int64_t black, white, draws;
    int64_t reasons[RULES_END_NB];
    int64_t no_resign, would_resign, false_resign;
    int64_t mixed;           /* games played by more than one net */
    int64_t evaluated, batches;
    int64_t searched;        /* positions searched during this cycle's window (all games) */
    double busy_s, worker_s; /* device busy seconds, wall x workers */
    int64_t gens[8], gen_games[8];
    int32_t n_gens;
} cycle_acc_t;

typedef struct {
    const sp_config_t *cfg;
    train_config_t tcfg;
    char run_dir[SP_PATH_MAX];
    runlog_t *log;             /* the events: stderr (st) and the run's log file */
    status_t *st;              /* stderr: the status line and the event lines */
    int64_t t_start_ns;

    run_t *run; /* the run directory, its writer lock held until the end */
    db_t *db;   /* read-write (run_db); the writer thread's once it starts */
    db_t *rdb;  /* read-only: the driver thread's queries */
    db_writer_t *writer;
    nn_server_t *server;
    train_trainer_t *trainer;
    mcts_cache_t *cache;
    sp_pool_t *pool;
    shard_format_t fmt;
    shard_builder_t *builder;  /* the shard being filled (cycle `fill`) */
    int64_t seq;               /* next shard number */
    int64_t run_id;

    /* cycles */
    int64_t target;            /* model cycle that ends the run */
    int64_t latest;            /* newest published model */
    int64_t latest_steps;      /* optimizer steps behind it */
    int64_t fill;              /* cycle being filled with games */
    int64_t fill_games;        /* its games: committed before start-up + this session */
    int64_t fill_positions;    /* their positions */
    int64_t total_games;       /* games of the run: committed before start-up + this session */
    closed_t *closed;
    int32_t n_closed, cap_closed;
    training_t *training;
    int32_t n_training, cap_training;
    bool paused;
    bool pool_running;
    cycle_acc_t acc;

    /* shard commits (the writer thread's callback) */
    atomic_llong shards_submitted, shards_done;
    atomic_int shard_failed;
    compat_mutex_t shard_mu;
    char shard_err[DB_ERR_MAX];  /* under shard_mu */

    /* model ids by cycle (generation = cycle + 1) */
    int64_t id_cycle[16], id_model[16];
    int32_t n_ids;

    /* progress window */
    int64_t prog_t_ns, prog_searches, prog_lookups, prog_hits;
    int64_t srv_evaluated, srv_batches; /* last server counters */
    int64_t srv_searches;               /* last worker-pool search counter */
    int64_t srv_t_ns;
    double win_evals, win_batches, win_busy, win_worker_s, win_s;

    /* in-loop evaluation: the gauntlet of each new net, on its own thread */
    uint64_t seed;             /* the session's self-play seed */
    sp_gauntlet_t *gauntlet;
    /* database writes that failed without stopping the run (metrics, a match):
     * the run still ends with a non-zero exit status */
    int64_t db_failures;
    char db_failure[DB_ERR_MAX + 64];

    /* other ranks (mpirun -np N selfplay): NULL for one process */
    dist_t *dist;
    dist_mail_t *mail;
    sp_ranks_t *ranks;
    int64_t srv_remote;        /* the other ranks' searches at the last sample */
    bool ranks_finished;       /* STOP sent, BYEs drained */
    bool ranks_abort;          /* ... some rank did not answer in time */
    char host[128];            /* this machine, recorded with each local game */
} driver_t;

/* ---- log ----------------------------------------------------------------------------
 * Every line goes through the run log (compat/runlog.h): the driver's own,
 * the gauntlet's and the other ranks' (runlog_line), and the trainer's. */

/* The trainer's lines, after "train: ". */
static void train_log(void *user, const char *line) { runlog_event_prefix(user, "train: ", "%s", line); }

/* ---- helpers ---------------------------------------------------------------------------- */

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

static int64_t model_id_of_cycle(driver_t *d, int64_t cycle) {
    for (int32_t i = 0; i < d->n_ids; i++)
        if (d->id_cycle[i] == cycle) return d->id_model[i];
    db_model_t m;
    if (cycle < 0 || db_model_by_cycle(d->rdb, (int32_t)cycle, &m) != DB_OK) return 0;
    int32_t k = d->n_ids < 16 ? d->n_ids++ : (int32_t)(cycle % 16);
    d->id_cycle[k] = cycle;
    d->id_model[k] = m.id;
    return m.id;
}

/* The server runs generation = model cycle + 1 (it starts at latest + 1 and
 * the trainer publishes cycle c as the next generation). */
static int64_t model_id_of_gen(driver_t *d, int64_t gen) {
    return model_id_of_cycle(d, gen > 0 ? gen - 1 : d->latest);
}

static void acc_reset(driver_t *d, int64_t cycle) {
    memset(&d->acc, 0, sizeof d->acc);
    d->acc.cycle = cycle;
    d->acc.t0_ns = compat_now_ns();
    d->acc.started = wall_now();
}

/* Server counters since the previous call, into the cycle and the progress window. */
static void sample_server(driver_t *d) {
    if (!d->server) return;
    nn_server_stats_t st;
    nn_server_stats(d->server, &st);
    int64_t now = compat_now_ns();
    double dt = d->srv_t_ns ? (double)(now - d->srv_t_ns) * 1e-9 : 0.0;
    d->srv_t_ns = now;
    int64_t de = st.evaluated - d->srv_evaluated, db = st.batches - d->srv_batches;
    d->srv_evaluated = st.evaluated;
    d->srv_batches = st.batches;
    double busy = st.busy_frac * dt * st.workers, ws = dt * st.workers;
    d->acc.evaluated += de, d->acc.batches += db, d->acc.busy_s += busy, d->acc.worker_s += ws;
    if (d->pool) {
        sp_pool_stats_t ps = {0};
        sp_pool_stats(d->pool, &ps);
        d->acc.searched += ps.searches - d->srv_searches;
        d->srv_searches = ps.searches;
    }
    if (d->ranks) { /* the cycle's positions per second are the job's */
        int64_t s = sp_ranks_searches(d->ranks);
        d->acc.searched += s - d->srv_remote;
        d->srv_remote = s;
    }
    d->win_evals += (double)de, d->win_batches += (double)db, d->win_busy += busy, d->win_worker_s += ws;
    d->win_s += dt;
}

/* ---- shards -------------------------------------------------------------------------------- */

static void shard_done(void *user, int status, const char *err, const db_shard_t *shard) {
    driver_t *d = user;
    (void)shard;
    if (status == DB_OK) {
        atomic_fetch_add(&d->shards_done, 1);
        return;
    }
    compat_mutex_lock(&d->shard_mu);
    if (!atomic_load(&d->shard_failed))
        snprintf(d->shard_err, sizeof d->shard_err, "shard commit failed (%s): %s", db_status_name(status),
                 err ? err : "");
    atomic_store(&d->shard_failed, 1);
    compat_mutex_unlock(&d->shard_mu);
}

static int new_builder(driver_t *d, char *err, size_t errlen) {
    d->builder = shard_builder_new(&d->fmt, err, errlen);
    return d->builder ? 0 : -1;
}

/* Sends the builder's games (if any) to the writer as a shard of cycle `cycle`. */
static int flush_shard(driver_t *d, int64_t cycle, char *err, size_t errlen) {
    if (!d->builder || shard_builder_games(d->builder) == 0) return 0;
    char rel[DB_PATH_MAX], full[SP_PATH_MAX + DB_PATH_MAX];
    for (;;) { /* never a path that exists (an orphan moved back by hand, ...) */
        shard_path_format(rel, sizeof rel, (int32_t)cycle, d->seq);
        snprintf(full, sizeof full, "%s/%s", d->run_dir, rel);
        if (!compat_file_exists(full)) break;
        d->seq++;
    }
    int32_t games = shard_builder_games(d->builder);
    int64_t rows = shard_builder_rows(d->builder);
    int st = shard_submit(d->writer, d->run_dir, rel, (int32_t)cycle, d->builder, shard_done, d, SP_SUBMIT_TIMEOUT_MS);
    if (st != DB_OK) {
        snprintf(err, errlen, "%s: cannot queue shard %s (%d games): %s", d->run_dir, rel, games, db_status_name(st));
        return -1;
    }
    d->builder = NULL;
    d->seq++;
    atomic_fetch_add(&d->shards_submitted, 1);
    runlog_event(d->log, "shard %s: %d games, %" PRId64 " positions queued", rel, games, rows);
    return new_builder(d, err, errlen);
}

/* ---- cycles --------------------------------------------------------------------------------- */

static void push_closed(driver_t *d, int64_t cycle, int64_t need) {
    if (d->n_closed == d->cap_closed) {
        int32_t cap = d->cap_closed ? 2 * d->cap_closed : 16;
        closed_t *q = realloc(d->closed, (size_t)cap * sizeof *q);
        KOMA_ASSERT(q != NULL);
        d->closed = q;
        d->cap_closed = cap;
    }
    d->closed[d->n_closed++] = (closed_t){cycle, need};
}

static void push_training(driver_t *d, int64_t cycle, int64_t steps) {
    if (d->n_training == d->cap_training) {
        int32_t cap = d->cap_training ? 2 * d->cap_training : 16;
        training_t *q = realloc(d->training, (size_t)cap * sizeof *q);
        KOMA_ASSERT(q != NULL);
        d->training = q;
        d->cap_training = cap;
    }
    d->training[d->n_training++] = (training_t){cycle, steps};
}

static void write_metrics(driver_t *d, const cycle_acc_t *a, int64_t games, int64_t positions) {
    double sp_s = secs_since(a->t0_ns);
    db_cycle_metrics_t m = {
        .cycle = (int32_t)a->cycle,
        .started = a->started,
        .finished = wall_now(),
        .games = games,
        .positions = positions,
        .selfplay_s = sp_s,
        .train_s = NAN,
        /* Searched during the cycle's window, not the rows of the games that finished in
         * it: with many games in flight, those were mostly played in earlier cycles. */
        .positions_per_s = sp_s > 0 ? (double)a->searched / sp_s : NAN,
        .evals_per_s = sp_s > 0 ? (double)a->evaluated / sp_s : NAN,
        .avg_batch = a->batches > 0 ? (double)a->evaluated / (double)a->batches : NAN,
        .busy_pct = a->worker_s > 0 ? fmin(100.0, 100.0 * a->busy_s / a->worker_s) : NAN,
        .avg_plies = a->games > 0 ? (double)a->plies / (double)a->games : NAN,
        .black_wins = a->black,
        .white_wins = a->white,
        .draws = a->draws,
        .elo = NAN,
        .elo_lo = NAN,
        .elo_hi = NAN,
        /* over the same games as black_wins .. draws: this session's of the cycle */
        .no_resign_games = a->no_resign,
        .would_resign = a->would_resign,
        .false_resign = a->false_resign,
        .resign_threshold = d->cfg->resign_threshold,
    };
    /* Normally a cycle's row is written before its model exists; should it
     * be rewritten after its evaluation, the Elo stays. */
    sp_gauntlet_rating(d->gauntlet, a->cycle, &m.elo, &m.elo_lo, &m.elo_hi);
    int64_t g = 0, best = -1;
    for (int32_t i = 0; i < a->n_gens; i++)
        if (a->gen_games[i] > best) best = a->gen_games[i], g = a->gens[i];
    m.model_id = model_id_of_gen(d, g);
    int st = db_writer_cycle_metrics(d->writer, &m, 10000);
    if (st != DB_OK)
        runlog_event(d->log, "warning: cycle %" PRId64 " metrics not queued: %s", a->cycle, db_status_name(st));
    char rs[256] = "";
    size_t len = 0;
    for (int e = 1; e < RULES_END_NB; e++)
        if (a->reasons[e] && len < sizeof rs)
            len += (size_t)snprintf(rs + len, sizeof rs - len, "%s%s %" PRId64, len ? ", " : "", rules_end_name(e),
                                    a->reasons[e]);
    runlog_event(
        d->log,
        "cycle %" PRId64 " self-play done: %" PRId64 " games this session (%" PRId64 " in all; black %" PRId64
        " white %" PRId64 " draw %" PRId64 "; %s), %" PRId64 " positions (%" PRId64 " with a policy target), "
        "%.1f plies/game, %" PRId64 " games played by two nets or more, %.1f s, %.1f positions/s, %.0f evals/s, "
        "batch %.1f, busy %.0f%%",
        a->cycle, a->games, games, a->black, a->white, a->draws, len ? rs : "-", a->rows, a->full_rows,
        a->games ? m.avg_plies : 0.0, a->mixed, sp_s, a->games ? m.positions_per_s : 0.0,
        m.evals_per_s > 0 ? m.evals_per_s : 0.0, a->batches ? m.avg_batch : 0.0, a->worker_s > 0 ? m.busy_pct : 0.0);
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
        for (int i = 0; i < 6000 && atomic_load(&d->shards_done) < atomic_load(&d->shards_submitted); i++)
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
    if (st != DB_OK) snprintf(err, errlen, "cycle_metrics of cycle %d: %s", (int)cycle, db_errmsg(db));
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
        if (db_count(d->rdb, (int32_t)c, &g, &p) != DB_OK) return;
        if (c > d->latest && g < d->cfg->games_per_cycle) return; /* being filled: its row comes when it closes */
        db_cycle_metrics_t m;
        db_status_t st = db_cycle_metrics_get(d->rdb, (int32_t)c, &m);
        if (g == 0 || (st == DB_OK && m.games > 0) || (st != DB_OK && st != DB_NOTFOUND)) continue;
        db_job_t job = {.run = metrics_repair_run, .arg = (void *)(intptr_t)c};
        int qs = db_writer_submit(d->writer, &job, 10000);
        if (qs != DB_OK)
            runlog_event(d->log, "warning: cycle %" PRId64 " metrics not queued: %s", c, db_status_name(qs));
        else
            runlog_event(d->log,
                         "cycle %" PRId64 ": its metrics row was %s (killed before the cycle's summary): games, "
                         "positions and results recomputed from its %" PRId64 " stored games", c,
                         st == DB_NOTFOUND ? "missing" : "empty", g);
    }
}

/* The current cycle has its games: flush, hand it on, open the next one. */
static int close_cycle(driver_t *d, char *err, size_t errlen) {
    sample_server(d);
    if (flush_shard(d, d->fill, err, errlen) != 0) return -1;
    push_closed(d, d->fill, atomic_load(&d->shards_submitted));
    test_kill_at(d, "cycle-summary", d->fill);
    write_metrics(d, &d->acc, d->fill_games, d->fill_positions);
    d->fill++;
    int64_t g = 0, p = 0;
    if (d->fill <= d->target && db_count(d->rdb, (int32_t)d->fill, &g, &p) != DB_OK) g = p = 0;
    d->fill_games = g;
    d->fill_positions = p;
    acc_reset(d, d->fill);
    return 0;
}

/* A finished game, from this process (rank 0) or from another rank: the same path. */
static int handle_record(driver_t *d, sp_record_t *r, int32_t rank, const char *host, char *err, size_t errlen) {
    if (d->fill > d->target || !d->builder) { /* every cycle has its games: the run is finishing */
        sp_record_free(r);
        return 0;
    }
    int64_t gen = sp_record_main_gen(r);
    int rc = sp_record_add_to_shard(r, d->builder, model_id_of_gen(d, gen), rank, host, err, errlen);
    if (rc != 0) {
        sp_record_free(r);
        return -1;
    }
    int64_t r_rows = r->n_rows;
    cycle_acc_t *a = &d->acc;
    a->games++;
    a->rows += r->n_rows;
    a->full_rows += r->full_rows;
    a->plies += r->n_moves;
    if (r->result > 0) a->black++;
    else if (r->result < 0) a->white++;
    else a->draws++;
    if (r->end > 0 && r->end < RULES_END_NB) a->reasons[r->end]++;
    if (r->no_resign) a->no_resign++;
    if (r->would_resign != COLOR_NB) a->would_resign++;
    if (r->false_resign) a->false_resign++;
    if (r->n_gens > 1) a->mixed++;
    int32_t k = 0;
    while (k < a->n_gens && a->gens[k] != gen) k++;
    if (k == a->n_gens && k < 8) a->gens[a->n_gens++] = gen;
    if (k < 8) a->gen_games[k]++;
    sp_record_free(r);
    d->fill_games++;
    d->fill_positions += r_rows;
    d->total_games++;
    if (d->cfg->shard_games > 0 && shard_builder_games(d->builder) >= d->cfg->shard_games)
        if (flush_shard(d, d->fill, err, errlen) != 0) return -1;
    if (d->fill_games >= d->cfg->games_per_cycle) return close_cycle(d, err, errlen);
    return 0;
}

/* Closed cycles whose shards are all committed go to the trainer, in order. */
static int submit_training(driver_t *d, char *err, size_t errlen) {
    int64_t done = atomic_load(&d->shards_done);
    while (d->n_closed > 0 && d->closed[0].need_shards <= done) {
        int64_t c = d->closed[0].cycle;
        int64_t g = 0, p = 0;
        if (db_count(d->rdb, (int32_t)c, &g, &p) != DB_OK) p = 0;
        if (train_trainer_submit(d->trainer, c) != 0) {
            snprintf(err, errlen, "%s: the trainer refused cycle %" PRId64, d->run_dir, c);
            return -1;
        }
        push_training(d, c, train_steps_for(&d->tcfg, p));
        runlog_event(d->log, "cycle %" PRId64 ": %" PRId64 " games, %" PRId64 " positions committed; training", c, g,
                     p);
        memmove(d->closed, d->closed + 1, (size_t)(--d->n_closed) * sizeof *d->closed);
    }
    return 0;
}

/* Model `cycle`, as registered, to every other rank. */
static int send_net(driver_t *d, int64_t cycle, char *err, size_t errlen) {
    db_model_t m;
    if (db_model_by_cycle(d->rdb, (int32_t)cycle, &m) != DB_OK) {
        snprintf(err, errlen, "model cycle %" PRId64 " for the other ranks: %s", cycle, db_errmsg(d->rdb));
        return -1;
    }
    char path[SP_PATH_MAX + DB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", d->run_dir, m.path);
    return sp_ranks_send_net(d->ranks, cycle, d->seed, path, m.xxh3, err, errlen);
}

/* Reports of finished training cycles, in order. Returns 0, -1 (error) or
 * TRAIN_STOPPED. */
static int poll_training(driver_t *d, int64_t timeout_ms, char *err, size_t errlen) {
    while (d->n_training > 0) {
        int64_t c = d->training[0].cycle;
        train_cycle_report_t rep;
        char e[1024] = "";
        int st = train_trainer_wait(d->trainer, c, timeout_ms, &rep, e, sizeof e);
        if (st == TRAIN_TIMEOUT) return 0;
        if (st == TRAIN_STOPPED) return TRAIN_STOPPED;
        if (st != TRAIN_OK) {
            snprintf(err, errlen, "training cycle %" PRId64 " failed: %s", c, e);
            return -1;
        }
        d->latest = c;
        d->latest_steps = rep.step;
        int64_t gen = d->server ? nn_server_generation(d->server) : 0;
        if (gen != c + 1)
            runlog_event(d->log,
                         "note: the server is at generation %" PRId64 " after model cycle %" PRId64
                         " (expected %" PRId64 "): games may name a neighbouring model",
                         gen, c, c + 1);
        runlog_event(d->log,
                     "model %" PRId64 "/%" PRId64 " published: %s, %" PRId64 " steps (%" PRId64 " in all), loss %.4f "
                     "(policy %.4f value %.4f legal %.5f), window %" PRId64 " positions, %.1f s",
                     c, d->target, rep.model_path, rep.steps, rep.step, rep.loss, rep.policy_loss, rep.value_loss,
                     rep.legal_loss, rep.window_positions, rep.seconds);
        memmove(d->training, d->training + 1, (size_t)(--d->n_training) * sizeof *d->training);
        if (d->ranks && c < d->target && send_net(d, c, err, errlen) != 0) return -1;
        sp_gauntlet_enqueue(d->gauntlet, c);
        if (timeout_ms > 0) timeout_ms = 0;
    }
    return 0;
}

static void update_pause_local(driver_t *d) {
    if (!d->pool_running) return;
    int64_t ahead = d->cfg->sync_train ? 0 : d->cfg->max_ahead;
    bool want = d->fill - 1 - d->latest > ahead;
    if (want != d->paused) {
        d->paused = want;
        sp_pool_pause(d->pool, want);
        if (want)
            runlog_event(d->log, "self-play paused: cycle %" PRId64 " waits for model %" PRId64 " (newest %" PRId64 ")",
                         d->fill, d->fill - 1 - ahead, d->latest);
        else
            runlog_event(d->log, "self-play resumed with model %" PRId64, d->latest);
    }
}

static void progress(driver_t *d, bool force) {
    int64_t now = compat_now_ns();
    double dt = (double)(now - d->prog_t_ns) * 1e-9;
    bool log_due = runlog_file_due(d->log, 60.0); /* the log: once a minute */
    if (!force && !log_due && (d->cfg->progress_s == 0 || !status_due(d->st))) {
        if (dt >= 1.0 && (d->cfg->progress_s == 0 || status_period(d->st) > 1.0)) {
            sample_server(d); /* keep the cycle figures */
        }
        return;
    }
    sample_server(d);
    sp_pool_stats_t ps = {0};
    if (d->pool) sp_pool_stats(d->pool, &ps);
    mcts_cache_stats_t cs = {0};
    if (d->cache) mcts_cache_stats(d->cache, &cs);
    double pos_s = dt > 0 ? (double)(ps.searches - d->prog_searches) / dt : 0;
    double evals = d->win_s > 0 ? d->win_evals / d->win_s : 0;
    double batch = d->win_batches > 0 ? d->win_evals / d->win_batches : 0;
    double busy = d->win_worker_s > 0 ? 100.0 * d->win_busy / d->win_worker_s : 0;
    if (busy > 100.0) busy = 100.0; /* a batch straddling two intervals counts in the second */
    int64_t dl = (int64_t)cs.lookups - d->prog_lookups, dh = (int64_t)cs.hits - d->prog_hits;
    double hit = dl > 0 ? 100.0 * (double)dh / (double)dl : 0;
    d->prog_t_ns = now;
    d->prog_searches = ps.searches;
    d->prog_lookups = (int64_t)cs.lookups;
    d->prog_hits = (int64_t)cs.hits;
    d->win_evals = d->win_batches = d->win_busy = d->win_worker_s = d->win_s = 0;

    char train[160];
    if (d->n_training > 0) {
        int64_t c = d->training[0].cycle, s = 0, total = d->training[0].steps;
        train_progress_t tp;
        train_trainer_progress(d->trainer, &tp);
        if (tp.cycle == c) s = tp.step, total = tp.steps;
        if (s > 0)
            snprintf(train, sizeof train, "training cycle %" PRId64 ": step %" PRId64 "/%" PRId64 " (%.0f samples/s)", c,
                     s, total, tp.samples_per_s);
        else
            snprintf(train, sizeof train, "training cycle %" PRId64 ": ~%" PRId64 " steps", c, total);
        if (d->n_training > 1)
            snprintf(train + strlen(train), sizeof train - strlen(train), " (+%d queued)", d->n_training - 1);
    } else if (d->n_closed > 0) {
        snprintf(train, sizeof train, "waiting for cycle %" PRId64 "'s shards", d->closed[0].cycle);
    } else {
        snprintf(train, sizeof train, "idle");
    }
    char ev[96] = "";
    sp_gauntlet_describe(d->gauntlet, ev, sizeof ev);
    char eta[32] = "-";
    if (d->fill <= d->target) {
        double el = secs_since(d->acc.t0_ns);
        int64_t left = d->cfg->games_per_cycle - d->fill_games;
        if (d->acc.games > 0) fmt_duration(el / (double)d->acc.games * (double)left, eta, sizeof eta);
        else snprintf(eta, sizeof eta, "?");
    }
    char cyc[64];
    if (d->fill <= d->target)
        snprintf(cyc, sizeof cyc, "cycle %" PRId64 "/%" PRId64 "%s", d->fill, d->target, d->paused ? " (paused)" : "");
    else
        snprintf(cyc, sizeof cyc, "cycle -/%" PRId64 " (self-play done)", d->target);
    char ranks[512] = "";
    if (d->ranks) { /* the job's rate, then each rank's */
        char per[400];
        double remote = sp_ranks_describe(d->ranks, per, sizeof per);
        snprintf(ranks, sizeof ranks, " (r0 %.1f%s%s)", pos_s, per[0] ? ", " : "", per); /* none: --train-ranks N */
        pos_s += remote;
    }
    char line[1600];
    snprintf(line, sizeof line,
             "%s | games %" PRId64 "/%" PRId64 " (total %" PRId64 ", playing %d) | ETA %s | %.1f pos/s%s | %.0f evals/s | "
             "batch %.1f | busy %.0f%% | cache %.0f%% | %s%s",
             cyc, d->fill <= d->target ? d->fill_games : 0, d->cfg->games_per_cycle, d->total_games, ps.active, eta,
             pos_s, ranks, evals, batch, busy, hit, train, ev);
    if (d->cfg->progress_s != 0) status_line(d->st, force, "%s", line);
    if (log_due || force) runlog_file_line(d->log, line);
}

/* ---- start-up and shutdown ---------------------------------------------------------------- */

static int open_run(driver_t *d, const char *config_text, char *err, size_t errlen) {
    char e[DB_ERR_MAX + 256], path[SP_PATH_MAX + 64];
    uint32_t flags = RUN_WRITE | RUN_CREATE | (d->cfg->verify_shards ? RUN_VERIFY : 0);
    d->run = run_open(d->run_dir, flags, "selfplay", err, errlen); /* writes nothing in a foreign directory */
    if (!d->run) return -1;
    d->db = run_db(d->run);
    run_path(d->run_dir, RUN_LOG, path, sizeof path);
    if (runlog_open(d->log, path) != 0)
        runlog_event(d->log, "warning: cannot open %s for appending; logging to stderr only", path);
    if (run_is_new(d->run)) runlog_event(d->log, "new run in %s", d->run_dir);
    for (int32_t i = 0; i < run_findings(d->run); i++)
        runlog_event(d->log, "start-up check: %s", run_finding(d->run, i));
    int64_t ns = 0, nm = 0;
    run_checked(d->run, &ns, &nm);
    runlog_event(d->log, "start-up check: %" PRId64 " shards, %" PRId64 " models checked, %d finding(s)", ns, nm,
                 run_findings(d->run));
    if (db_run_insert(d->db, KOMA_VERSION_STRING, "selfplay", config_text ? config_text : "", &d->run_id) != DB_OK) {
        snprintf(err, errlen, "%s", db_errmsg(d->db));
        return -1;
    }
    d->writer = db_writer_start(d->db, SP_WRITER_CAPACITY, e, sizeof e);
    if (!d->writer) {
        snprintf(err, errlen, "%s: writer thread: %s", d->run_dir, e);
        return -1;
    }
    run_path(d->run_dir, RUN_DB, path, sizeof path);
    if (db_open(path, DB_OPEN_READONLY, &d->rdb, e, sizeof e) != DB_OK) {
        snprintf(err, errlen, "%s", e);
        return -1;
    }
    d->gauntlet = sp_gauntlet_new(d->cfg, d->run_dir, d->rdb, d->writer, runlog_line, d->log);
    if (!d->gauntlet) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* The newest model (the trainer writes cycle 0 for a new run). */
static int open_nets(driver_t *d, char *err, size_t errlen) {
    char e[1536];
    db_model_t m;
    db_status_t st = db_model_latest(d->rdb, &m);
    if (st == DB_NOTFOUND) {
        train_trainer_t *t0 = train_trainer_new(&d->tcfg, d->run_dir, d->writer, NULL, e, sizeof e);
        if (!t0) {
            snprintf(err, errlen, "%s", e);
            return -1;
        }
        train_trainer_free(t0);
        st = db_model_latest(d->rdb, &m);
    }
    if (st != DB_OK) {
        snprintf(err, errlen, "%s: no model: %s", d->run_dir, db_errmsg(d->rdb));
        return -1;
    }
    d->latest = m.cycle;
    d->latest_steps = m.train_steps;
    if (d->latest >= d->target) return 0; /* nothing to play */
    nn_server_config_t sc = sp_config_server(d->cfg);
    sc.generation = d->latest + 1;
    char path[SP_PATH_MAX + DB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", d->run_dir, m.path);
    d->server = nn_server_new(&sc, path, NULL, e, sizeof e);
    if (!d->server) {
        snprintf(err, errlen, "inference server: %s", e);
        return -1;
    }
    const nn_net_config_t *nc = nn_server_net_config(d->server);
    nn_server_stats_t ss;
    nn_server_stats(d->server, &ss);
    d->srv_t_ns = compat_now_ns(); /* the baseline of the cycle figures */
    runlog_event(d->log, "net: %s = %dx%d, generation %" PRId64 ", %s backend, %d device worker(s), max batch %d",
                 m.path, nc->blocks, nc->channels, nn_server_generation(d->server), nn_server_backend_name(d->server),
                 ss.workers, nn_server_max_batch(d->server));
    d->trainer = train_trainer_new(&d->tcfg, d->run_dir, d->writer, d->server, e, sizeof e);
    if (!d->trainer) {
        snprintf(err, errlen, "%s", e);
        return -1;
    }
    if (train_trainer_latest_cycle(d->trainer) != d->latest) {
        snprintf(err, errlen, "%s: the trainer starts from cycle %" PRId64 ", the database's newest model is %" PRId64,
                 d->run_dir, train_trainer_latest_cycle(d->trainer), d->latest);
        return -1;
    }
    if (train_trainer_start(d->trainer) != 0) {
        snprintf(err, errlen, "%s: cannot start the trainer thread", d->run_dir);
        return -1;
    }
    return 0;
}

/* Where the run stands: cycles whose games are all committed go to the
 * trainer, the first incomplete one is filled. */
static int plan_cycles(driver_t *d, char *err, size_t errlen) {
    db_summary_t s;
    if (db_summary(d->rdb, &s) != DB_OK) {
        snprintf(err, errlen, "%s", db_errmsg(d->rdb));
        return -1;
    }
    d->seq = s.shards + 1;
    d->total_games = s.games;
    d->fill = d->latest + 1;
    for (;;) {
        int64_t g = 0, p = 0;
        if (db_count(d->rdb, (int32_t)d->fill, &g, &p) != DB_OK) {
            snprintf(err, errlen, "%s", db_errmsg(d->rdb));
            return -1;
        }
        d->fill_games = g;
        d->fill_positions = p;
        if (d->fill > d->target || g < d->cfg->games_per_cycle) break;
        runlog_event(d->log, "cycle %" PRId64 ": %" PRId64 " games already committed", d->fill, g);
        push_closed(d, d->fill, 0);
        d->fill++;
    }
    acc_reset(d, d->fill);
    runlog_event(d->log, "run %s: newest model cycle %" PRId64 " of %" PRId64 ", %" PRId64 " games so far; %s",
                 d->run_dir, d->latest, d->target, s.games,
                 d->fill <= d->target ? "playing" : "self-play done, training");
    if (d->fill <= d->target && d->fill_games > 0)
        runlog_event(d->log, "cycle %" PRId64 " resumes with %" PRId64 " of %" PRId64 " games", d->fill, d->fill_games,
                     d->cfg->games_per_cycle);
    return 0;
}

static int start_selfplay(driver_t *d, char *err, size_t errlen) {
    if (new_builder(d, err, errlen) != 0) return -1;
    uint64_t seed = d->cfg->seed ? (uint64_t)d->cfg->seed
                                 : (uint64_t)time(NULL) ^ ((uint64_t)compat_getpid() << 32) ^ (uint64_t)compat_now_ns();
    seed = compat_mix64(seed ^ compat_mix64((uint64_t)d->run_id)); /* a resumed run never replays the same games */
    d->seed = seed;
    sp_gauntlet_set_seed(d->gauntlet, seed);
    if (d->fill > d->target) return 0;
    if (d->cfg->cache_mb > 0) {
        d->cache = mcts_cache_new(d->cfg->cache_mb << 20);
        if (!d->cache) {
            snprintf(err, errlen, "out of memory for a %lld MiB cache", (long long)d->cfg->cache_mb);
            return -1;
        }
    }
    d->pool = sp_pool_new(d->cfg, d->server, d->cache, seed, err, errlen);
    if (!d->pool) return -1;
    if (sp_pool_start(d->pool, err, errlen) != 0) return -1;
    d->pool_running = true;
    runlog_event(
        d->log,
        "self-play: %lld threads x %lld games, %s search, %lld visits (full, p=%.2f) / %lld (fast), max ply %lld",
        (long long)sp_config_threads(d->cfg), (long long)d->cfg->games_per_thread, d->cfg->search,
        (long long)d->cfg->visits, d->cfg->full_prob, (long long)d->cfg->visits_fast, (long long)d->cfg->max_ply);
    return 0;
}

/* Stops self-play; with keep, the games it finished go into a last shard. */
static void stop_selfplay(driver_t *d, bool keep, char *err, size_t errlen) {
    if (!d->pool || !d->pool_running) return;
    sp_pool_stop(d->pool);
    d->pool_running = false;
    sp_record_t *recs[SP_TAKE_MAX];
    int32_t n;
    while ((n = sp_pool_take(d->pool, recs, SP_TAKE_MAX, 0)) > 0)
        for (int32_t i = 0; i < n; i++) {
            if (keep && d->builder && d->fill <= d->target) {
                char e[512];
                if (handle_record(d, recs[i], 0, d->host, e, sizeof e) != 0 && err && !err[0])
                    snprintf(err, errlen, "%s", e);
            } else {
                sp_record_free(recs[i]);
            }
        }
    if (keep && d->fill <= d->target && d->builder && shard_builder_games(d->builder) > 0) {
        char e[512];
        if (flush_shard(d, d->fill, e, sizeof e) != 0 && err && !err[0]) snprintf(err, errlen, "%s", e);
    }
}

static void shutdown_all(driver_t *d) {
    if (d->pool) sp_pool_stop(d->pool);
    if (d->trainer) train_trainer_stop(d->trainer);
    if (d->writer) {
        int st = db_writer_stop(d->writer, SP_WRITER_DRAIN_MS);
        if (st != DB_OK)
            runlog_event(d->log, "warning: the writer stopped with items unwritten (%s)", db_status_name(st));
        db_writer_stats_t ws;
        db_writer_stats(d->writer, &ws);
        int64_t failed = ws.jobs_failed + ws.steps_failed + ws.cycles_failed;
        if (failed > 0) {
            d->db_failures += failed;
            snprintf(d->db_failure, sizeof d->db_failure, "%.700s", ws.last_error);
        }
    }
    train_trainer_free(d->trainer);
    d->trainer = NULL;
    sp_pool_free(d->pool);
    d->pool = NULL;
    nn_server_free(d->server);
    d->server = NULL;
    db_writer_free(d->writer);
    d->writer = NULL;
    shard_builder_free(d->builder);
    d->builder = NULL;
    mcts_cache_free(d->cache);
    d->cache = NULL;
    char e[DB_ERR_MAX + 64];
    int64_t failed = sp_gauntlet_db_failures(d->gauntlet, e, sizeof e);
    if (failed > 0) d->db_failures += failed, snprintf(d->db_failure, sizeof d->db_failure, "%s", e);
    sp_gauntlet_free(d->gauntlet); /* before its database connection closes */
    d->gauntlet = NULL;
    db_close(d->rdb);
    d->rdb = NULL;
    free(d->closed);
    free(d->training);
    runlog_close(d->log);
    run_close(d->run); /* closes d->db and releases the writer lock: the last thing */
    d->run = NULL;
    d->db = NULL;
}

/* ---- other ranks ------------------------------------------------------------------------- */

/* A game that reaches rank 0 while the job ends: kept like a local one. */
static void ranks_late_game(void *user, sp_ranks_game_t *g) {
    driver_t *d = user;
    char e[512];
    if (handle_record(d, g->rec, g->rank, g->host, e, sizeof e) != 0) runlog_event(d->log, "warning: %s", e);
}

/* Ends the other ranks once (STOP with code, drain until each said BYE);
 * with keep, the games still arriving are committed. A rank that does not
 * answer in time leaves d->ranks_abort set: the job then ends with
 * dist_abort once this rank has closed the run. */
static void finish_ranks(driver_t *d, int code, bool keep) {
    if (!d->ranks || d->ranks_finished) return;
    d->ranks_finished = true;
    /* The training ranks answer STOP only between cycles: the cycle in
     * flight stops first (a stop agreed inside the training group). */
    if (d->tcfg.group && d->trainer) train_trainer_stop(d->trainer);
    char e[1024];
    if (sp_ranks_finish(d->ranks, code, SP_RANKS_STOP_MS, keep ? ranks_late_game : NULL, d, e, sizeof e) != 0) {
        runlog_event(d->log, "warning: ending the other ranks: %s", e);
        d->ranks_abort = true;
    }
}

/* The trainer's plan for a cycle to the training ranks 1..K-1 (their group
 * ranks are their ranks in the job: dist_split with key = rank). Called on
 * the trainer's thread. */
static int send_plan(void *user, const train_plan_t *plan, char *err, size_t errlen) {
    driver_t *d = user;
    int64_t len = 0;
    uint8_t *msg = sp_wire_plan_encode(plan, &len);
    if (!msg) {
        snprintf(err, errlen, "cannot encode the plan of cycle %" PRId64 " (%d shards; out of memory, or a path over "
                 "255 bytes)", plan->cycle, (int)plan->nshards);
        return -1;
    }
    int rc = 0;
    char e[512];
    for (int32_t r = 1; r < dist_size(d->tcfg.group) && rc == 0; r++) {
        int st = dist_mail_send(d->mail, r, SP_TAG_PLAN, msg, len, SP_RANKS_STOP_MS, e, sizeof e);
        if (st != DIST_OK) {
            snprintf(err, errlen, "to rank %d: %s", (int)r, st == DIST_TIMEOUT ? "earlier messages still in flight "
                     "after 60 s" : e);
            rc = -1;
        }
    }
    free(msg);
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
        snprintf(err, errlen, "%s", e);
        return SP_EXIT_USAGE;
    }
    driver_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        fprintf(stderr, "error: %s\n", err); /* shown here, as every error of the run (sp_main does not repeat it) */
        return SP_EXIT_ERROR;
    }
    d->st = status_new(stderr, cfg->progress_s > 0 ? cfg->progress_s : 0, cfg->quiet != 0);
    d->log = runlog_new(d->st);
    if (!d->log) {
        snprintf(err, errlen, "out of memory");
        fprintf(stderr, "error: %s\n", err);
        status_free(d->st);
        free(d);
        return SP_EXIT_ERROR;
    }
    d->cfg = cfg;
    d->tcfg = *tcfg;
    d->tcfg.log = train_log;
    d->tcfg.log_user = d->log;
    d->target = cfg->cycles;
    d->t_start_ns = compat_now_ns();
    d->fmt = (shard_format_t){ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    snprintf(d->run_dir, sizeof d->run_dir, "%s", cfg->run);
    size_t rl = strlen(d->run_dir);
    while (rl > 1 && d->run_dir[rl - 1] == '/') d->run_dir[--rl] = 0;
    compat_mutex_init(&d->shard_mu);
    atomic_init(&d->shards_submitted, 0);
    atomic_init(&d->shards_done, 0);
    atomic_init(&d->shard_failed, 0);
    d->prog_t_ns = compat_now_ns();
    compat_hostname(d->host, sizeof d->host);

    int rc = SP_EXIT_ERROR;
    bool budget = false; /* --cpu-minutes ended the run (read after out:) */
    if (dist && dist_size(dist) > 1) { /* before anything can fail: the other ranks must hear the end */
        d->dist = dist;
        d->mail = dist_mail_start(dist, SP_RANKS_IN_FLIGHT, SP_RANKS_INBOX, e, sizeof e);
        if (!d->mail || !(d->ranks = sp_ranks_new(dist, d->mail, (int32_t)cfg->net_fanout, runlog_line, d->log))) {
            if (d->mail) snprintf(e, sizeof e, "out of memory");
            runlog_event(d->log, "error: %s", e);
            snprintf(err, errlen, "%s", e);
            dist_abort(dist, SP_EXIT_ERROR); /* the other ranks cannot be told otherwise */
            goto out_free;
        }
        int32_t K = d->tcfg.group ? dist_size(d->tcfg.group) : 1;
        if (K > 1) {
            d->tcfg.plan = send_plan;
            d->tcfg.plan_user = d;
            sp_ranks_set_train_ranks(d->ranks, K);
            char others[64];
            if (K == 2) snprintf(others, sizeof others, "rank 1 does not play and reads");
            else snprintf(others, sizeof others, "ranks 1-%d do not play and read", (int)K - 1);
            runlog_event(d->log,
                         "job: %d ranks, rank 0 on %s owns the run and plays; ranks 0-%d train each net together "
                         "(--train-ranks %d: %s the run directory %s)",
                         (int)dist_size(dist), d->host, (int)K - 1, (int)K, others, d->run_dir);
        } else {
            runlog_event(d->log, "job: %d ranks, rank 0 on %s owns the run and plays", (int)dist_size(dist), d->host);
        }
    }
    if (open_run(d, config_text, e, sizeof e) != 0 || open_nets(d, e, sizeof e) != 0) goto out;
    repair_metrics(d);
    if (d->latest >= d->target) {
        if (sp_gauntlet_resume(d->gauntlet, d->latest) > 0) { /* the last cycle's, interrupted: finish it first */
            sp_gauntlet_set_seed(d->gauntlet, compat_mix64((uint64_t)d->run_id ^ (uint64_t)compat_now_ns()));
            while (!compat_stop_requested() && !sp_gauntlet_idle(d->gauntlet)) sp_gauntlet_poll(d->gauntlet, true);
        }
        runlog_event(d->log, "run %s already has model cycle %" PRId64 " (--cycles %" PRId64 "): nothing to do",
                     d->run_dir, d->latest, d->target);
        rc = compat_stop_requested() ? SP_EXIT_INTERRUPTED : SP_EXIT_DONE;
        goto out;
    }
    if (plan_cycles(d, e, sizeof e) != 0 || start_selfplay(d, e, sizeof e) != 0) goto out;
    if (d->ranks && d->fill <= d->target && send_net(d, d->latest, e, sizeof e) != 0) goto out;
    sp_gauntlet_resume(d->gauntlet, d->latest);

    sp_record_t *recs[SP_TAKE_MAX];
    static sp_ranks_game_t rgames[SP_TAKE_MAX]; /* one driver per process */
    bool interrupted = false;
    const int64_t cpu_limit_ns = (int64_t)(cfg->cpu_minutes * 60e9);
    for (;;) {
        if (cpu_limit_ns > 0 && !budget && compat_cpu_time_ns() >= cpu_limit_ns) {
            runlog_event(d->log, "CPU budget of %g minutes used: stopping as on Ctrl-C", cfg->cpu_minutes);
            budget = true;
            compat_request_stop(); /* every thread stops as on a signal */
        }
        if (compat_stop_requested()) {
            interrupted = true;
            break;
        }
        if (d->pool && sp_pool_error(d->pool, e, sizeof e)) goto out;
        if (atomic_load(&d->shard_failed)) {
            compat_mutex_lock(&d->shard_mu);
            snprintf(e, sizeof e, "%s", d->shard_err);
            compat_mutex_unlock(&d->shard_mu);
            goto out;
        }
        int32_t n = d->pool_running ? sp_pool_take(d->pool, recs, SP_TAKE_MAX, 50) : 0;
        for (int32_t i = 0; i < n; i++)
            if (handle_record(d, recs[i], 0, d->host, e, sizeof e) != 0) {
                for (int32_t j = i + 1; j < n; j++) sp_record_free(recs[j]);
                goto out;
            }
        if (d->ranks) { /* the other ranks' games, committed as this process's own */
            int32_t m = sp_ranks_take(d->ranks, rgames, SP_TAKE_MAX, d->pool_running ? 0 : 10, e, sizeof e);
            if (m == SP_RANKS_LEFT) {
                runlog_event(d->log, "%s", e);
                interrupted = true;
                break;
            }
            if (m < 0) goto out;
            for (int32_t i = 0; i < m; i++)
                if (handle_record(d, rgames[i].rec, rgames[i].rank, rgames[i].host, e, sizeof e) != 0) {
                    for (int32_t j = i + 1; j < m; j++) sp_record_free(rgames[j].rec);
                    goto out;
                }
        }
        if (d->fill > d->target && d->pool_running) stop_selfplay(d, false, NULL, 0);
        if (submit_training(d, e, sizeof e) != 0) goto out;
        int st = poll_training(d, d->pool_running ? 0 : 50, e, sizeof e);
        if (st == TRAIN_STOPPED) {
            interrupted = true;
            break;
        }
        if (st != 0) goto out;
        sp_gauntlet_poll(d->gauntlet, false);
        update_pause_local(d);
        /* The other ranks pause with this one, and for good once every cycle has its games. */
        if (d->ranks && sp_ranks_pause(d->ranks, d->paused || d->fill > d->target, e, sizeof e) != 0) goto out;
        progress(d, false);
        if (d->fill > d->target && d->n_closed == 0 && d->n_training == 0 && sp_gauntlet_idle(d->gauntlet))
            break;
        if (!d->pool_running && d->n_training == 0) compat_sleep_ms(20); /* waiting for shards or an evaluation */
    }
    if (interrupted) {
        status_finish(d->st); /* the status line stays as it was; what follows goes below it */
        runlog_event(d->log, "stop requested: committing finished games, dropping games in progress");
        e[0] = 0;
        finish_ranks(d, SP_EXIT_INTERRUPTED, true);
        stop_selfplay(d, true, e, sizeof e);
        if (e[0]) runlog_event(d->log, "warning: %s", e);
        sp_gauntlet_finish(d->gauntlet);
        rc = budget ? SP_EXIT_DONE : SP_EXIT_INTERRUPTED;
    } else {
        progress(d, true);
        status_finish(d->st); /* the final status line stays; the summary goes below it */
        finish_ranks(d, SP_EXIT_DONE, false);
        runlog_event(d->log, "run %s: model cycle %" PRId64 " published, %" PRId64 " games in all, %.1f s", d->run_dir,
                     d->latest, d->total_games, secs_since(d->t_start_ns));
        rc = SP_EXIT_DONE;
    }
out:
    status_finish(d->st);
    if (rc == SP_EXIT_ERROR) {
        runlog_event(d->log, "error: %s", e); /* the one place the error is shown: sp_main does not repeat it */
        snprintf(err, errlen, "%s", e);
        /* keep what is finished: the finished games still go to a shard */
        finish_ranks(d, SP_EXIT_ERROR, !atomic_load(&d->shard_failed));
        char e2[512] = "";
        if (!atomic_load(&d->shard_failed)) stop_selfplay(d, true, e2, sizeof e2);
    }
    finish_ranks(d, rc, false); /* the early ends (nothing to do, Ctrl-C at start-up) */
    sp_gauntlet_finish(d->gauntlet); /* never leave the match thread running */
    shutdown_all(d);
    if (d->mail && dist_mail_stop(d->mail) > 0) d->ranks_abort = true; /* messages that never left */
    d->mail = NULL;
    sp_ranks_free(d->ranks);
    d->ranks = NULL;
    if (d->db_failures > 0 && rc != SP_EXIT_ERROR) {
        /* Everything committed is kept, but a database that refused writes is not a clean run. */
        snprintf(err, errlen, "%" PRId64 " database write(s) failed during the run; the last: %s", d->db_failures,
                 d->db_failure);
        rc = SP_EXIT_ERROR;
        status_event(d->st, STATUS_WARN, "error: %s", err); /* the log file is closed by now */
    }
    if (budget && rc == SP_EXIT_DONE) {
        fprintf(stderr, "CPU budget of %g minutes used: everything committed is kept; the same command goes on\n",
                cfg->cpu_minutes);
    }
    if (rc == SP_EXIT_INTERRUPTED) {
        fprintf(stderr, "interrupted: everything committed is kept; run the same command to resume\n");
    }
    if (d->ranks_abort) { /* everything committed is on disk: end the ranks that did not answer */
        fprintf(stderr, "selfplay: other ranks did not stop in time: ending the job (mpirun reports it)\n");
        dist_abort(d->dist, rc ? rc : SP_EXIT_ERROR);
    }
out_free:
    runlog_free(d->log);
    status_free(d->st);
    compat_mutex_destroy(&d->shard_mu);
    free(d);
    return rc;
}

/* ---- the command -------------------------------------------------------------------------- */

static const char *const USAGE =
    "usage: selfplay [--config FILE] [--run DIR] [--cycles N] [flags]\n"
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
            fprintf(stderr, "selfplay: --games-per-thread %lld capped at %lld: a thread never plays more games at "
                    "once than a cycle has (--games-per-cycle %lld)\n", (long long)cfg.games_per_thread,
                    (long long)sp_config_games_per_thread(&cfg), (long long)cfg.games_per_cycle);
        cfg.games_per_thread = sp_config_games_per_thread(&cfg);
    }
    if (K > dist_size(dist) || (K > 1 && tcfg.batch % K != 0)) { /* every rank sees the same flags and refuses */
        if (rank == 0) {
            if (K > dist_size(dist))
                fprintf(stderr, "selfplay: --train-ranks %d: the job has %d rank(s) (mpirun -np N with N >= %d)\n",
                        (int)K, (int)dist_size(dist), (int)K);
            else
                fprintf(stderr, "selfplay: --batch %d is the global batch of the %d training ranks: it must be a "
                        "multiple of %d\n", (int)tcfg.batch, (int)K, (int)K);
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
