/* gauntlet.c - the in-loop evaluation of each new net and its rating; see gauntlet.h. */
#include "selfplay/gauntlet.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "data/run.h"
#include "match/play.h"
#include "match/rating.h"

#define SP_GAUNTLET_MAX 4                             /* earlier nets */
#define SP_OPP_MAX (SP_GAUNTLET_MAX + SP_ENGINES_MAX) /* and outside engines */
/* An opponent: a cycle (>= 0) or engine k as -1 - k. */
#define ENGINE_OPP(k) (-1 - (int64_t)(k))
#define OPP_ENGINE(o) ((int32_t)(-1 - (o)))

struct sp_gauntlet {
    const sp_config_t *cfg;
    char run_dir[1024];
    db_t *rdb;           /* the driver thread's read-only connection */
    db_writer_t *writer; /* the ratings go into cycle_metrics through it */
    runlog_sink_t log;   /* whole lines (no callback: none) */
    uint64_t seed;

    compat_thread_t thread;
    bool running;                 /* thread started and not joined */
    atomic_int done;              /* set by the thread as its last act */
    atomic_int stop;              /* set by the driver thread: the match in flight ends at its next move */
    int64_t cycle;                /* the net being evaluated ... */
    char model_path[DB_PATH_MAX]; /* ... (its file, run-relative) ... */
    int64_t opp[SP_OPP_MAX];      /* ... against these earlier nets and engines, one match each */
    int32_t n_opp;
    atomic_llong base; /* the opponent being played now (for the status line) */
    int64_t t0_ns;
    int rc[SP_OPP_MAX];
    bool skipped[SP_OPP_MAX]; /* not begun: the evaluation was stopped before it */
    match_play_result_t res[SP_OPP_MAX];
    char err[SP_OPP_MAX][1024];
    match_engine_player_t *eng[SP_ENGINES_MAX]; /* --gauntlet-engineK, parsed (NULL: not given) */
    bool eng_off[SP_ENGINES_MAX];               /* could not be played: left out for the rest of the session */
    char engine_log[1100];                      /* <run>/engines.log: the engines' stderr */
    int64_t *queue;                             /* cycles due, waiting for the thread */
    int32_t n_queue, cap_queue;
    double rating_elo, rating_lo, rating_hi; /* newest joint rating seen (NAN: none yet) */
    int64_t rating_cycle;
    int64_t db_failures; /* matches that failed in the database */
    char db_failure[DB_ERR_MAX + 64];
};

/* An Elo for "%+.0f": rounded, with no "-0". */
static double elo_shown(double x) {
    double r = round(x);
    return r == 0 ? 0.0 : r;
}

/* The models row id of cycle c (0 when none). */
static int64_t model_id(sp_gauntlet_t *g, int64_t cycle) {
    db_model_t m;
    if (cycle < 0 || db_model_by_cycle(g->rdb, (int32_t)cycle, &m) != DB_OK) return 0;
    return m.id;
}

sp_gauntlet_t *sp_gauntlet_new(const sp_config_t *cfg, const char *run_dir, db_t *rdb, db_writer_t *writer,
                               runlog_fn log, void *log_user) {
    sp_gauntlet_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = cfg;
    snprintf(g->run_dir, sizeof g->run_dir, "%s", run_dir);
    g->rdb = rdb;
    g->writer = writer;
    g->log = runlog_sink(log, log_user, NULL);
    atomic_init(&g->done, 0);
    atomic_init(&g->stop, 0);
    atomic_init(&g->base, 0);
    g->rating_elo = g->rating_lo = g->rating_hi = NAN;
    g->rating_cycle = -1;
    snprintf(g->engine_log, sizeof g->engine_log, "%s/engines.log", run_dir);
    for (int k = 0; k < SP_ENGINES_MAX; k++) {
        if (!cfg->gauntlet_engine[k][0]) continue;
        char e[600];
        g->eng[k] = malloc(sizeof *g->eng[k]);
        if (g->eng[k] && match_engine_player_parse(cfg->gauntlet_engine[k], g->eng[k], e, sizeof e) != 0) {
            runlog_printf(&g->log, "warning: gauntlet-engine%d: %s; the gauntlet goes on without it", k + 1, e);
            free(g->eng[k]); /* sp_config_check refuses this before a run starts */
            g->eng[k] = NULL;
        }
    }
    return g;
}

/* "cycle 7" or the engine's label, for messages. */
static const char *opp_name(const sp_gauntlet_t *g, int64_t o, char *buf, size_t len) {
    if (o >= 0) snprintf(buf, len, "%" PRId64, o);
    else snprintf(buf, len, "%s", g->eng[OPP_ENGINE(o)] ? g->eng[OPP_ENGINE(o)]->label : "?");
    return buf;
}

void sp_gauntlet_free(sp_gauntlet_t *g) {
    if (!g) return;
    sp_gauntlet_finish(g); /* never leave the match thread running */
    for (int k = 0; k < SP_ENGINES_MAX; k++) free(g->eng[k]);
    free(g->queue);
    free(g);
}

void sp_gauntlet_set_seed(sp_gauntlet_t *g, uint64_t seed) {
    if (g) g->seed = seed;
}

bool sp_gauntlet_idle(const sp_gauntlet_t *g) { return !g || (!g->running && g->n_queue == 0); }

void sp_gauntlet_describe(const sp_gauntlet_t *g, char *buf, size_t len) {
    buf[0] = 0;
    if (!g) return;
    char who[MATCH_ENGINE_NAME_MAX];
    if (g->running)
        snprintf(buf, len, " | eval %" PRId64 " vs %s", g->cycle,
                 opp_name(g, (int64_t)atomic_load(&((sp_gauntlet_t *)g)->base), who, sizeof who));
    if (isfinite(g->rating_elo))
        snprintf(buf + strlen(buf), len - strlen(buf), " | rating %+.0f", elo_shown(g->rating_elo));
}

int sp_gauntlet_rating(const sp_gauntlet_t *g, int64_t cycle, double *elo, double *lo, double *hi) {
    if (!g || g->rating_cycle != cycle || !isfinite(g->rating_elo)) return 0;
    *elo = g->rating_elo, *lo = g->rating_lo, *hi = g->rating_hi;
    return 1;
}

int64_t sp_gauntlet_db_failures(const sp_gauntlet_t *g, char *msg, size_t len) {
    if (!g) return 0;
    set_err(msg, len, "%s", g->db_failure);
    return g->db_failures;
}

static void *eval_main(void *arg) {
    sp_gauntlet_t *g = arg;
    match_play_config_t ec;
    match_play_config_default(&ec);
    /* --eval-games in all, shared by the opponents (an even number each, 2 at least) */
    int32_t per = (int32_t)((g->cfg->eval_games + g->n_opp - 1) / g->n_opp);
    ec.games = per < 2 ? 2 : per + per % 2;
    ec.visits = (int32_t)g->cfg->eval_visits;
    ec.max_ply = (int32_t)g->cfg->max_ply;
    /* CPU: one game thread beside self-play's; otherwise the CPU is mostly free */
    ec.threads = strcmp(g->cfg->backend, "cpu") == 0 ? 1 : 4;
    ec.engine_stderr = g->engine_log;
    ec.stop = &g->stop;
    for (int32_t i = 0; i < g->n_opp; i++) {
        if (atomic_load(&g->stop)) { /* stopped: the rest is played by the next run */
            g->skipped[i] = true;
            continue;
        }
        ec.seed = (g->seed ^ (uint64_t)g->cycle ^ ((uint64_t)g->opp[i] << 32)) | 1;
        atomic_store(&g->base, g->opp[i]);
        if (g->opp[i] >= 0)
            g->rc[i] = match_play_cycles(g->run_dir, (int32_t)g->cycle, (int32_t)g->opp[i], &ec, &g->res[i], g->err[i],
                                         sizeof g->err[i]);
        else
            g->rc[i] = match_play_engine(g->run_dir, g->model_path, g->eng[OPP_ENGINE(g->opp[i])], &ec, &g->res[i],
                                         g->err[i], sizeof g->err[i]);
    }
    atomic_store(&g->done, 1);
    return NULL;
}

typedef struct {
    int32_t cycle;
    double elo, elo_lo, elo_hi;
} elo_arg_t;

/* On the writer thread: the joint rating into the cycle's metrics row, keeping the rest. */
static int elo_put_run(db_t *db, void *arg, char *err, size_t errlen) {
    const elo_arg_t *a = arg;
    db_cycle_metrics_t m;
    db_status_t st = db_cycle_metrics_get_or_init(db, a->cycle, &m);
    if (st == DB_OK) {
        m.elo = a->elo;
        m.elo_lo = a->elo_lo;
        m.elo_hi = a->elo_hi;
        st = db_cycle_metrics_put(db, &m);
    }
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void elo_put_done(void *arg, int status, const char *err) {
    (void)status, (void)err;
    free(arg);
}

/* The run's rating list (one joint fit over every finished match stored,
 * match/rating.h) places model c; its rating goes into its cycle_metrics row. */
static void rate_cycle(sp_gauntlet_t *g, int64_t c) {
    char e[DB_ERR_MAX + 64];
    rating_player_t *list = NULL;
    int32_t n = 0;
    const rating_player_t *me = NULL;
    if (rating_list(g->rdb, &list, &n, e, sizeof e) != DB_OK) runlog_printf(&g->log, "warning: rating list: %s", e);
    else me = rating_of_cycle(list, n, (int32_t)c);
    if (me && isfinite(me->elo)) {
        runlog_printf(&g->log,
                      "rating: model %" PRId64 ": %+.0f [%+.0f, %+.0f] (joint fit, cycle 0 = 0; %d players, %d games)",
                      c, elo_shown(me->elo), elo_shown(me->lo), elo_shown(me->hi), n, me->games);
        g->rating_elo = me->elo;
        g->rating_lo = me->lo;
        g->rating_hi = me->hi;
        g->rating_cycle = c;
        elo_arg_t *a = malloc(sizeof *a);
        if (a) {
            *a = (elo_arg_t){(int32_t)c, me->elo, me->lo, me->hi};
            db_job_t job = {.run = elo_put_run, .done = elo_put_done, .arg = a};
            int st = g->writer ? db_writer_submit(g->writer, &job, 10000) : DB_INVALID;
            if (st != DB_OK) {
                free(a);
                runlog_printf(&g->log, "warning: cycle %" PRId64 " rating not queued: %s", c, db_status_name(st));
            }
        }
    } else {
        runlog_printf(&g->log, "rating: model %" PRId64 " is not rated (no games link it to cycle 0)", c);
    }
    free(list);
}

static void eval_report(sp_gauntlet_t *g) {
    int64_t c = g->cycle;
    int32_t played = 0, finished = 0, left = 0;
    for (int32_t i = 0; i < g->n_opp; i++) {
        int64_t b = g->opp[i];
        char bn[MATCH_ENGINE_NAME_MAX];
        opp_name(g, b, bn, sizeof bn);
        if (g->skipped[i]) {
            left++;
            continue;
        }
        if (g->rc[i] != 0 && g->res[i].interrupted) {
            if (!g->res[i].match_id)
                runlog_printf(&g->log, "eval: model %" PRId64 " vs %s stopped before its first game", c, bn);
            else
                runlog_printf(&g->log,
                              "eval: model %" PRId64 " vs %s stopped after %d of its games: kept, unfinished (they "
                              "count in no rating)",
                              c, bn, g->res[i].stored);
            left++;
            continue;
        }
        if (g->rc[i] != 0 && b < 0 && g->res[i].engine_failed) { /* said once: the engine is left out */
            int32_t k = OPP_ENGINE(b);
            runlog_printf(&g->log,
                          "warning: gauntlet-engine%d '%s' cannot be played: %s; the gauntlet goes on without it",
                          k + 1, bn, g->err[i]);
            g->eng_off[k] = true;
            continue;
        }
        if (g->rc[i] != 0) {
            runlog_printf(&g->log, "warning: eval: model %" PRId64 " vs %s failed: %s", c, bn, g->err[i]);
            if (strstr(g->err[i], RUN_DB)) { /* the database, not the match, failed */
                g->db_failures++;
                snprintf(g->db_failure, sizeof g->db_failure, "%.700s", g->err[i]);
            }
            continue;
        }
        const match_play_result_t *r = &g->res[i];
        runlog_printf(&g->log,
                      "eval: model %" PRId64 " vs %s: +%d =%d -%d, Elo %+.0f [%+.0f, %+.0f] (%.1f plies/game, "
                      "%.1f s%s)",
                      c, bn, r->wins, r->draws, r->losses, elo_shown(r->elo.elo), elo_shown(r->elo.elo_lo),
                      elo_shown(r->elo.elo_hi), r->avg_plies, r->seconds, r->match_id ? "" : "; no matches row");
        played++;
        finished++;
    }
    if (left) { /* stopped: rated once the next run has played the rest (sp_gauntlet_resume) */
        runlog_printf(&g->log,
                      "eval: the evaluation of model %" PRId64 " was stopped with %d of %d match(es) finished; the "
                      "next run plays the rest and rates it",
                      c, finished, g->n_opp);
        return;
    }
    if (!played) return;
    rate_cycle(g, c);
}

/* The opponents of model c (--gauntlet of them): the net eval_every cycles
 * before it, cycle 0, the net halfway, the net a quarter of the way; each
 * once, all earlier than c. */
static int32_t gauntlet_of(const sp_gauntlet_t *g, int64_t c, int64_t *opp) {
    int64_t want[SP_GAUNTLET_MAX] = {c - g->cfg->eval_every, 0, c / 2, c / 4};
    int32_t n = 0;
    for (int32_t i = 0; i < SP_GAUNTLET_MAX && i < g->cfg->gauntlet; i++) {
        bool dup = want[i] < 0 || want[i] >= c;
        for (int32_t j = 0; j < n; j++) dup |= opp[j] == want[i];
        if (!dup) opp[n++] = want[i];
    }
    for (int32_t k = 0; k < SP_ENGINES_MAX; k++) /* then every outside engine still in play */
        if (g->eng[k] && !g->eng_off[k]) opp[n++] = ENGINE_OPP(k);
    return n;
}

/* Whether model a has a finished (rated) evaluation match against model b,
 * and the id of an unfinished one (0: none). */
static bool eval_done_before(sp_gauntlet_t *g, int64_t a, int64_t b, int64_t *open_id, int64_t *open_games) {
    db_match_t *ms = NULL;
    int32_t n = 0;
    bool rated = false;
    if (db_matches_list(g->rdb, (int32_t)a, &ms, &n) != DB_OK) return false;
    int64_t ida = model_id(g, a), idb = b >= 0 ? model_id(g, b) : 0;
    const char *label = b < 0 ? g->eng[OPP_ENGINE(b)]->label : "";
    for (int32_t i = 0; i < n; i++) {
        const db_match_t *m = &ms[i];
        if (m->model_a != ida || m->model_b != idb || strncmp(m->settings, "eval ", 5) != 0) continue;
        if (b < 0 && strcmp(m->engine_b, label) != 0) continue; /* another engine */
        if (isfinite(m->elo)) rated = true;
        else if (open_id) *open_id = m->id, *open_games = m->games;
    }
    free(ms);
    return rated;
}

void sp_gauntlet_enqueue(sp_gauntlet_t *g, int64_t c) {
    if (!g) return;
    int64_t k = g->cfg->eval_every;
    if (k <= 0 || c < k || c % k != 0) return;
    if (g->n_queue == g->cap_queue) {
        int32_t cap = g->cap_queue ? 2 * g->cap_queue : 8;
        int64_t *q = realloc(g->queue, (size_t)cap * sizeof *q);
        KOMA_ASSERT(q != NULL);
        g->queue = q;
        g->cap_queue = cap;
    }
    g->queue[g->n_queue++] = c;
    if (g->running)
        runlog_printf(&g->log,
                      "eval: model %" PRId64 " queued (model %" PRId64 " is still being evaluated, %d waiting)", c,
                      g->cycle, g->n_queue);
}

static void eval_start_next(sp_gauntlet_t *g) {
    if (g->running || g->n_queue == 0) return;
    int64_t c = g->queue[0];
    memmove(g->queue, g->queue + 1, (size_t)(--g->n_queue) * sizeof *g->queue);
    g->cycle = c;
    db_model_t mc;
    if (db_model_by_cycle(g->rdb, (int32_t)c, &mc) != DB_OK) {
        runlog_printf(&g->log, "warning: eval: model %" PRId64 " is not in the models table; it is not evaluated", c);
        return;
    }
    snprintf(g->model_path, sizeof g->model_path, "%s", mc.path);
    int64_t opp[SP_OPP_MAX];
    int32_t n = gauntlet_of(g, c, opp);
    g->n_opp = 0;
    for (int32_t i = 0; i < n; i++) /* a replayed evaluation plays only what is missing */
        if (!eval_done_before(g, c, opp[i], NULL, NULL)) g->opp[g->n_opp++] = opp[i];
    if (g->n_opp == 0) { /* every match is stored (killed before the rating was): rate it */
        rate_cycle(g, c);
        return;
    }
    atomic_store(&g->base, g->opp[0]);
    for (int32_t i = 0; i < g->n_opp; i++) {
        g->rc[i] = -1;
        g->skipped[i] = false;
        g->err[i][0] = 0;
        memset(&g->res[i], 0, sizeof g->res[i]);
    }
    atomic_store(&g->done, 0);
    g->t0_ns = compat_now_ns();
    if (compat_thread_create(&g->thread, eval_main, g) != 0) {
        runlog_printf(&g->log, "warning: eval: cannot start a thread; model %" PRId64 " is not evaluated", c);
        return;
    }
    g->running = true;
    char who[512] = "", bn[MATCH_ENGINE_NAME_MAX];
    for (int32_t i = 0; i < g->n_opp; i++)
        snprintf(who + strlen(who), sizeof who - strlen(who), "%s%s", i ? ", " : "",
                 opp_name(g, g->opp[i], bn, sizeof bn));
    runlog_printf(&g->log, "eval: model %" PRId64 " vs %s: %lld games in all x %lld visits started", c, who,
                  (long long)g->cfg->eval_games, (long long)g->cfg->eval_visits);
}

/* Reports a finished evaluation (waiting for it with wait: Ctrl-C meanwhile
 * stops it) and starts the next one unless a stop is requested. */
void sp_gauntlet_poll(sp_gauntlet_t *g, bool wait) {
    if (!g) return;
    while (g->running && wait && !atomic_load(&g->done)) {
        if (compat_stop_requested()) atomic_store(&g->stop, 1);
        compat_sleep_ms(20);
    }
    if (g->running && atomic_load(&g->done)) {
        compat_thread_join(g->thread);
        g->running = false;
        eval_report(g);
    }
    if (!compat_stop_requested() && !atomic_load(&g->stop)) eval_start_next(g);
}

/* At a stop or an error: the queue is left to the next run (its models have
 * no rating: sp_gauntlet_resume queues them again), and the evaluation in
 * flight stops at its next move. */
void sp_gauntlet_finish(sp_gauntlet_t *g) {
    if (!g) return;
    atomic_store(&g->stop, 1);
    if (g->n_queue > 0) {
        runlog_printf(&g->log,
                      "eval: %d queued evaluation(s) not started (model%s %" PRId64 "%s%" PRId64 "): the next run "
                      "evaluates them",
                      g->n_queue, g->n_queue > 1 ? "s" : "", g->queue[0], g->n_queue > 1 ? ".." : "",
                      g->queue[g->n_queue - 1]);
        g->n_queue = 0;
    }
    if (g->running) {
        if (!atomic_load(&g->done))
            runlog_printf(&g->log,
                          "eval: stopping the evaluation of model %" PRId64 " (running for %.0f s): its finished games "
                          "are kept, and the next run plays it again",
                          g->cycle, (double)(compat_now_ns() - g->t0_ns) * 1e-9);
        compat_thread_join(g->thread);
        g->running = false;
        eval_report(g);
    }
}

/* The cycles of the run that need an evaluation, oldest first: every model c
 * due (c >= K, c % K == 0, K = --eval-every) up to latest that
 *  - has a gauntlet match without an Elo (killed or stopped during it: its
 *    games stay stored and count in no rating; that match is played again in
 *    full, the finished ones not), or
 *  - has no rating in its cycle_metrics row: never evaluated (killed or
 *    stopped before its evaluation began, or published while evaluation was
 *    off), evaluated in part (the missing matches are played), or evaluated
 *    in full and killed before its rating was stored (rated from the stored
 *    matches, nothing played).
 * A rated model whose gauntlet has grown since (more --gauntlet opponents, a
 * new --gauntlet-engine) is left alone. Returns the evaluations queued. */
int32_t sp_gauntlet_resume(sp_gauntlet_t *g, int64_t latest) {
    if (!g) return 0;
    int64_t k = g->cfg->eval_every;
    int32_t queued = 0, never = 0;
    char list[160] = "";
    int64_t last_never = -1;
    for (int64_t c = k; k > 0 && c <= latest; c += k) {
        int64_t opp[SP_OPP_MAX], open_id = 0, open_games = 0;
        int32_t n = gauntlet_of(g, c, opp), missing = 0;
        for (int32_t i = 0; i < n; i++) missing += !eval_done_before(g, c, opp[i], &open_id, &open_games);
        db_cycle_metrics_t m;
        bool rated = db_cycle_metrics_get(g->rdb, (int32_t)c, &m) == DB_OK && isfinite(m.elo);
        if (missing && open_id) {
            runlog_printf(&g->log,
                          "eval: an evaluation match of model %" PRId64 " was interrupted (match %" PRId64 ": %" PRId64
                          " game(s) kept, unfinished: they count in no rating); playing it again",
                          c, open_id, open_games);
        } else if (!rated) {
            size_t l = strlen(list);
            if (never < 8) snprintf(list + l, sizeof list - l, "%s%" PRId64, never ? ", " : "", c);
            else if (never == 8) snprintf(list + l, sizeof list - l, ", ...");
            never++;
            last_never = c;
        } else {
            continue;
        }
        sp_gauntlet_enqueue(g, c);
        queued++;
    }
    if (never > 0) {
        char tail[32] = "";
        if (never > 9) snprintf(tail, sizeof tail, " %" PRId64, last_never);
        runlog_printf(&g->log, "eval: %d published model(s) without a rating (%s%s); evaluating them, oldest first",
                      never, list, tail);
    }
    return queued;
}
