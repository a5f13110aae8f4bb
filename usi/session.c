/* session.c - the engine behind the protocol: game, options, net, search
 * thread, answers (see session.h). */
#include "usi/session.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/dfpn.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "mcts/cache.h"
#include "usi/eval.h"
#include "usi/mate.h"
#include "usi/options.h"

#ifndef KOMA_VERSION
#define KOMA_VERSION "0"
#endif


/* The engine's own lateness kept back: the second largest of how late the last USI_LATE_MOVES
 * timed answers came after their hard deadline (a lateness that recurs on this machine, not
 * one spike), at most a quarter of the time. */
enum { USI_LATE_MOVES = 8 };

/* Everything one go needs, copied by the reader before the thread starts. */
typedef struct {
    usi_go_t go;
    usi_options_t opt;
    pos_t *pos;
    char base[SFEN_MAX_LEN];
    move_t *moves; /* (POS_HIST_MAX) */
    int32_t n;
    int64_t received_ms;
    bool newgame;
} usi_job_t;

struct usi_session {
    usi_out_t out;
    usi_options_t opt;
    /* the game (reader) */
    pos_t *pos, *tmp; /* the position, and the next one being set up (swapped) */
    char base[SFEN_MAX_LEN];
    move_t *moves; /* (POS_HIST_MAX) */
    int32_t n_moves;
    bool newgame_pending;
    /* search state: the reader's when no thread runs, the thread's while it runs */
    usi_eval_t *eval;
    char eval_opt_key[CFG_STRING_MAX * 2 + 64]; /* the options the evaluator was made for */
    char eval_path[USI_PATH_MAX];               /* the weights file it serves ("" = uniform) */
    mcts_tree_t *tree;
    mcts_cache_t *cache;
    int64_t tree_hash_mb;
    bool tree_valid;
    char tree_base[SFEN_MAX_LEN];
    move_t *tree_moves; /* (POS_HIST_MAX) */
    int32_t tree_n;
    usi_batch_t *batch[2];
    int32_t batch_cap;
    mcts_result_t *res;
    usi_mate_result_t mate_res; /* the search thread's: root_mate, mated_in */
    usi_search_t search; /* the search thread's loop state (the tree points at its stop flag) */
    bool pending;        /* the last search's batches may still be in flight: taken in by the next
                          * search (wait_previous) or by the reader (drain) before the tree, the
                          * net or the batches are touched */
    pos_t *scratch;
    double nps_est;
    /* the search thread's: how late its last timed answers came after their hard deadline */
    int64_t late_hist[USI_LATE_MOVES];
    int32_t late_n, late_next;
    int32_t load_percent_said; /* the search thread's: the automatic margins' percent last said (at first, the idle one) */
    usi_job_t job;
    /* the thread */
    compat_thread_t thread;
    bool live; /* reader only: a thread was started and not joined */
    compat_mutex_t mu;
    compat_cond_t cv;
    bool answered;        /* mu: the thread has given its answer (it may still take in batches) */
    bool finished;        /* mu: the thread is about to return */
    bool ponderhit;       /* mu */
    int64_t ponderhit_ms; /* mu */
    bool quiet;           /* mu: give no answer (gameover, quit) */
    atomic_int ponderhit_flag;
    atomic_int stop;
    atomic_int halt; /* the MCTS loop's stop flag: set with stop, and by df-pn's proof */
    /* df-pn: `go mate`, and beside the MCTS on a thread of its own (the search thread's) */
    dfpn_t *dfpn;
    int64_t dfpn_mb;
    pos_t *dfpn_pos;
    dfpn_result_t dfpn_res;
    /* the defence: after our own mate is not proven, is every move of ours answered by a mate? */
    dfpn_t *dfpn_def; /* its own table: the opponent attacks there (DfpnHash / 4) */
    pos_t *dfpn_def_pos;
    dfpn_result_t dfpn_def_res;
    int64_t mated_nodes; /* the defence's df-pn nodes */
    int32_t mated_len;   /* > 0: proven mated in this many plies (our move first), with: */
    move_t mated_pv[USI_MATE_PLY_MAX + 1];
    int64_t dfpn_deadline_ms; /* go mate's clock (0 = none) */
    compat_thread_t dfpn_thread;
    atomic_int dfpn_stop;
    atomic_int dfpn_done;
    int64_t dfpn_nodes;
};

/* ---- small helpers --------------------------------------------------------------- */

void usi_session_say(usi_session_t *s, const char *fmt, ...) {
    char buf[USI_LINE_MAX - 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    usi_out_line(&s->out, "info string %s", buf);
}

const pos_t *usi_session_position_now(const usi_session_t *s) { return s->pos; }

static void set_startpos(usi_session_t *s) {
    pos_set_startpos(s->pos);
    sfen_write(s->pos, s->base, sizeof s->base);
    s->n_moves = 0;
}

usi_session_t *usi_session_new(usi_write_fn_t write, void *user) {
    usi_session_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    usi_out_init(&s->out, write, user);
    compat_mutex_init(&s->mu);
    compat_cond_init(&s->cv);
    atomic_init(&s->stop, 0);
    atomic_init(&s->halt, 0);
    atomic_init(&s->dfpn_stop, 0);
    atomic_init(&s->dfpn_done, 0);
    atomic_init(&s->ponderhit_flag, 0);
    usi_options_default(&s->opt);
    s->load_percent_said = MCTS_TIME_AUTO_PERCENT;
    usi_net_shipped(s->opt.net, sizeof s->opt.net, NULL, 0); /* Net's default: the shipped net, if found */
    s->pos = malloc(sizeof(pos_t));
    s->tmp = malloc(sizeof(pos_t));
    s->scratch = malloc(sizeof(pos_t));
    s->dfpn_pos = malloc(sizeof(pos_t));
    s->dfpn_def_pos = malloc(sizeof(pos_t));
    s->job.pos = malloc(sizeof(pos_t));
    s->moves = malloc(POS_HIST_MAX * sizeof(move_t));
    s->tree_moves = malloc(POS_HIST_MAX * sizeof(move_t));
    s->job.moves = malloc(POS_HIST_MAX * sizeof(move_t));
    s->res = malloc(sizeof(mcts_result_t));
    if (!s->pos || !s->tmp || !s->scratch || !s->dfpn_pos || !s->dfpn_def_pos || !s->job.pos || !s->moves ||
        !s->tree_moves || !s->job.moves || !s->res) {
        usi_session_free(s);
        return NULL;
    }
    set_startpos(s);
    s->nps_est = 0;
    return s;
}

/* Joins a thread that has given its answer (waiting at most for the batches
 * it still takes in). Returns true when no thread is live: the reader owns
 * the tree and the net again. A search still thinking is left alone. */
static bool reap(usi_session_t *s) {
    if (!s->live) return true;
    compat_mutex_lock(&s->mu);
    bool done = s->answered || s->finished;
    compat_mutex_unlock(&s->mu);
    if (!done) return false;
    compat_thread_join(s->thread);
    s->live = false;
    return true;
}

static void stop_search(usi_session_t *s, bool quiet) {
    atomic_store(&s->stop, 1);
    atomic_store(&s->halt, 1);
    compat_mutex_lock(&s->mu);
    if (quiet) s->quiet = true;
    compat_cond_broadcast(&s->cv);
    compat_mutex_unlock(&s->mu);
}

static void join_search(usi_session_t *s) {
    if (!s->live) return;
    compat_thread_join(s->thread);
    s->live = false;
}

/* Reader, no thread live: waits for the last search's batches. */
static void drain(usi_session_t *s) {
    if (!s->pending) return;
    usi_search_finish(&s->search);
    s->pending = false;
}

void usi_session_free(usi_session_t *s) {
    if (!s) return;
    if (s->live) {
        stop_search(s, true);
        join_search(s);
    }
    drain(s);
    usi_eval_free(s->eval);
    mcts_tree_free(s->tree);
    mcts_cache_free(s->cache);
    usi_batch_free(s->batch[0]);
    usi_batch_free(s->batch[1]);
    free(s->pos);
    free(s->tmp);
    free(s->scratch);
    free(s->dfpn_pos);
    free(s->dfpn_def_pos);
    dfpn_free(s->dfpn);
    dfpn_free(s->dfpn_def);
    free(s->job.pos);
    free(s->moves);
    free(s->tree_moves);
    free(s->job.moves);
    free(s->res);
    compat_cond_destroy(&s->cv);
    compat_mutex_destroy(&s->mu);
    usi_out_destroy(&s->out);
    free(s);
}

/* ---- net, tree, batches (called by whoever owns them) ------------------------- */

/* us: the side the engine searches for (Contempt's side). */
static void tree_params(const usi_options_t *o, color_t us, mcts_params_t *p) {
    mcts_params_default(p);
    p->root_mode = strcmp(o->search, "gumbel") == 0 ? MCTS_ROOT_GUMBEL : MCTS_ROOT_PUCT;
    p->max_ply = (int32_t)o->max_ply;
    p->noise = false;
    p->move_temp_plies = 0;
    p->leaf_mate = atoi(o->leaf_mate);
    p->declare = usi_options_declare_rule(o);
    p->single_move_stop = false; /* the search loop answers a forced move after one playout (search.h) */
    /* on the W - L scale a result of 50% - c is a value of -2c */
    p->draw_value[us] = -2.0f * (float)o->contempt / 1000.0f;
    p->draw_value[color_flip(us)] = -p->draw_value[us];
    p->ml_max_effect = (float)o->ml_max_effect; /* used only with a moves-left net (mcts.h) */
    p->ml_threshold = (float)o->ml_threshold;
    p->ml_slope = (float)o->ml_slope;
    p->ml_constant = (float)o->ml_constant;
    p->ml_scaled = (float)o->ml_scaled;
    p->ml_quadratic = (float)o->ml_quadratic;
}

/* Makes the tree, cache and batches fit the options. Returns false when out of memory. */
static bool ensure_tree(usi_session_t *s, const usi_options_t *o, color_t us) {
    mcts_params_t p;
    tree_params(o, us, &p);
    if (!s->tree || s->tree_hash_mb != o->hash_mb) {
        mcts_tree_free(s->tree);
        mcts_cache_free(s->cache);
        s->tree = NULL;
        s->cache = NULL;
        s->tree_valid = false;
        int64_t bytes = o->hash_mb * 1024 * 1024;
        int64_t nodes = bytes / USI_BYTES_PER_NODE;
        if (nodes < 4096) nodes = 4096;
        if (nodes > INT32_MAX / 2) nodes = INT32_MAX / 2;
        const int64_t want = nodes;
        s->cache = mcts_cache_new(bytes / 8); /* NULL is fine: no cache */
        for (;;) { /* what the machine gives, halving down to 4096 nodes */
            p.node_limit = (int32_t)nodes;
            s->tree = mcts_tree_new(&p, s->cache);
            if (s->tree || nodes <= 4096) break;
            nodes /= 2;
        }
        if (s->tree && nodes < want && nodes > 4096) {
            /* memory ran short: leave as much again for the search threads'
             * stacks and the net, or the tree fits and nothing else does */
            mcts_tree_free(s->tree);
            nodes /= 2;
            p.node_limit = (int32_t)nodes;
            s->tree = mcts_tree_new(&p, s->cache);
        }
        if (!s->tree) {
            mcts_cache_free(s->cache);
            s->cache = NULL;
            usi_session_say(s, "USI_Hash %lld MiB: out of memory for the tree", (long long)o->hash_mb);
            return false;
        }
        if ((int64_t)nodes * USI_BYTES_PER_NODE < bytes / 2)
            usi_session_say(s, "USI_Hash %lld MiB: only %lld MiB could be had for the tree", (long long)o->hash_mb,
                            (long long)((int64_t)nodes * USI_BYTES_PER_NODE >> 20));
        s->tree_hash_mb = o->hash_mb;
    } else {
        const mcts_params_t *was = mcts_tree_params(s->tree);
        /* the tree's drawn leaves hold values of the old draw value, its
         * declaration leaves the old rule's verdicts */
        if (was->draw_value[COLOR_BLACK] != p.draw_value[COLOR_BLACK] ||
            was->draw_value[COLOR_WHITE] != p.draw_value[COLOR_WHITE] || was->declare != p.declare)
            s->tree_valid = false;
        mcts_tree_set_params(s->tree, &p);
    }
    if (s->batch_cap < o->batch || !s->batch[0] || !s->batch[1]) {
        usi_batch_free(s->batch[0]);
        usi_batch_free(s->batch[1]);
        s->batch[0] = usi_batch_new((int32_t)o->batch);
        s->batch[1] = usi_batch_new((int32_t)o->batch);
        s->batch_cap = (int32_t)o->batch;
        if (!s->batch[0] || !s->batch[1]) {
            usi_batch_free(s->batch[0]);
            usi_batch_free(s->batch[1]);
            s->batch[0] = s->batch[1] = NULL;
            s->batch_cap = 0;
            usi_session_say(s, "BatchSize %lld: out of memory", (long long)o->batch);
            return false;
        }
    }
    return true;
}

static void eval_opt_key(const usi_options_t *o, char *key, size_t n) {
    snprintf(key, n, "%s|%s|%lld|%lld", o->net, o->backend, (long long)o->threads, (long long)o->batch);
}

/* The error that keeps koma from playing: `info string Error: <text>` to the
 * GUI and `Error: <text>` on stderr (what a GUI's log or a terminal shows). */
static void say_error(usi_session_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say_error(usi_session_t *s, const char *fmt, ...) {
    char buf[USI_LINE_MAX - 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    usi_out_line(&s->out, "info string Error: %s", buf);
    fprintf(stderr, "Error: %s\n", buf);
    fflush(stderr);
}

/* Makes the evaluator serve the Net option. resolve: look the net up again
 * (a run directory may have a newer model); otherwise only when the options
 * changed. Returns 0, or -1 after say_error when the Net or Backend asked for
 * cannot be used (nothing is served then: koma must not play). Net `none`
 * is the uniform evaluator, asked for. */
/* Threads beside the net's team that koma needs (reader, search, df-pn, server workers). A
 * Threads value above the CPU count is tried first: a team thread costs more than a bare one
 * (its stack, a malloc arena, the backend's scratch), so Threads N is used when
 * 4 N + USI_THREADS_SPARE bare threads can be started at once, else a quarter of what could
 * (under `ulimit -v 8000000`: 808 bare threads; 300 team threads ran and 404 did not). */
enum { USI_THREADS_SPARE = 8 };

static int ensure_eval(usi_session_t *s, const usi_options_t *o, bool resolve) {
    char key[sizeof s->eval_opt_key];
    eval_opt_key(o, key, sizeof key);
    bool opts_changed = !s->eval || strcmp(key, s->eval_opt_key) != 0;
    if (!opts_changed && !resolve) return 0;
    char path[USI_PATH_MAX], err[1024], note[2048];
    bool none = usi_net_is_none(o->net);
    path[0] = 0;
    if (none) {
        /* the uniform evaluator, asked for */
    } else if (!o->net[0]) { /* <empty>: the shipped net */
        char looked[2 * USI_PATH_MAX + 64];
        if (usi_net_shipped(path, sizeof path, looked, sizeof looked) != 0) {
            say_error(s, "Net: no net given and no shipped net found (looked for %s); set the Net option to a "
                         "weights file or a run directory (or to none to play legal moves only)",
                      looked);
            return -1;
        }
    } else if (usi_net_resolve(o->net, path, sizeof path, note, sizeof note, err, sizeof err) != 0) {
        say_error(s, "%s", err);
        return -1;
    } else if (note[0]) {
        usi_session_say(s, "Net: %s", note);
    }
    if (!opts_changed && strcmp(path, s->eval_path) == 0) return 0;
    drain(s);
    usi_eval_free(s->eval);
    s->eval = NULL;
    s->eval_opt_key[0] = 0;
    if (s->cache) mcts_cache_clear(s->cache);
    s->tree_valid = false; /* values of another net */
    int64_t t0 = compat_now_ms();
    int32_t threads = (int32_t)o->threads;
    if (!none && threads > compat_cpu_count()) { /* the OpenMP runtime ends koma when it cannot start its team */
        int32_t want = 4 * threads + USI_THREADS_SPARE, can = usi_threads_startable(want);
        if (can < want) {
            int32_t use = (can - USI_THREADS_SPARE) / 4 > 1 ? (can - USI_THREADS_SPARE) / 4 : 1;
            char note[128];
            say_error(s, "Threads %d: only %d threads could be started here%s; using %d", threads, can,
                      compat_address_space_note(note, sizeof note), use);
            threads = use;
        }
    }
    s->eval = usi_eval_new(path, o->backend, threads, (int32_t)o->batch, err, sizeof err);
    if (!s->eval) {
        say_error(s, "%s", err);
        return -1;
    }
    snprintf(s->eval_opt_key, sizeof s->eval_opt_key, "%s", key);
    snprintf(s->eval_path, sizeof s->eval_path, "%s", path);
    if (usi_eval_uniform(s->eval))
        usi_session_say(s, "Net none: no network, a uniform policy and zero value: the engine plays legal moves only");
    else
        usi_session_say(s, "net loaded in %lld ms: %s", (long long)(compat_now_ms() - t0),
                        usi_eval_describe(s->eval));
    return 0;
}

/* ---- the search thread ------------------------------------------------------------ */

static void sync_tree(usi_session_t *s, const usi_job_t *j) {
    bool extend = s->tree_valid && !j->newgame && strcmp(s->tree_base, j->base) == 0 && j->n >= s->tree_n &&
                  memcmp(j->moves, s->tree_moves, (size_t)s->tree_n * sizeof(move_t)) == 0;
    if (extend) {
        for (int32_t i = s->tree_n; i < j->n; i++) mcts_tree_advance(s->tree, j->moves[i]);
        int32_t kept = mcts_tree_nodes(s->tree);
        if (kept > 1) usi_session_say(s, "tree reuse: %d nodes kept", kept);
    } else {
        mcts_tree_set_position(s->tree, j->pos);
    }
    snprintf(s->tree_base, sizeof s->tree_base, "%s", j->base);
    memcpy(s->tree_moves, j->moves, (size_t)j->n * sizeof(move_t));
    s->tree_n = j->n;
    s->tree_valid = true;
}

static bool cb_ponderhit(void *user, int64_t *at_ms) {
    usi_session_t *s = user;
    if (!atomic_load_explicit(&s->ponderhit_flag, memory_order_acquire)) return false;
    compat_mutex_lock(&s->mu);
    *at_ms = s->ponderhit_ms;
    compat_mutex_unlock(&s->mu);
    return true;
}

/* Holds the answer of an infinite or ponder search until stop / ponderhit,
 * then gives it (unless quiet). */
static void answer(usi_session_t *s, const usi_job_t *j, const char *line) {
    compat_mutex_lock(&s->mu);
    while (!atomic_load(&s->stop) && (j->go.infinite || (j->go.ponder && !s->ponderhit)))
        compat_cond_wait(&s->cv, &s->mu);
    if (!s->quiet && line) usi_out_line(&s->out, "%s", line);
    s->answered = true;
    compat_mutex_unlock(&s->mu);
}

static void *thread_done(usi_session_t *s) {
    compat_mutex_lock(&s->mu);
    s->answered = s->finished = true;
    compat_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- df-pn ------------------------------------------------------------------------- */

/* The table sized by DfpnHash (made or remade by the search thread). */
/* Address space a df-pn table may take under `ulimit -v`: a quarter of what
 * is left, and nothing when less than USI_DFPN_ROOM_MIN would be left beside
 * it (thread stacks, OpenMP's team, the net's buffers: libgomp aborts when it
 * cannot start a thread). -1 where there is no limit. */
#define USI_DFPN_ROOM_MIN (64LL << 20)
static int64_t dfpn_room_bytes(void) {
    int64_t limit = compat_address_space_limit(), used = compat_address_space_used();
    if (limit <= 0 || used < 0) return -1;
    int64_t left = limit - used;
    return left > 2 * USI_DFPN_ROOM_MIN ? (left - USI_DFPN_ROOM_MIN) / 4 : 0;
}

static dfpn_t *ensure_dfpn(usi_session_t *s, const usi_options_t *o) {
    if (s->dfpn_mb == o->dfpn_hash_mb) return s->dfpn; /* made, or refused, for this size */
    dfpn_free(s->dfpn);
    s->dfpn = NULL;
    int64_t mb = o->dfpn_hash_mb, room = dfpn_room_bytes();
    if (room >= 0 && (mb << 20) > room) mb = room >> 20;
    for (; mb >= 1 && !s->dfpn; mb /= 2) s->dfpn = dfpn_new((size_t)mb << 20);
    if (!s->dfpn) {
        char note[128];
        usi_session_say(s, "DfpnHash %lld MiB: no memory for the df-pn table%s; mates are left to the search",
                        (long long)o->dfpn_hash_mb, compat_address_space_note(note, sizeof note));
    } else if (mb < o->dfpn_hash_mb / 2) {
        usi_session_say(s, "DfpnHash %lld MiB: only %lld MiB could be had for the df-pn table",
                        (long long)o->dfpn_hash_mb, (long long)mb);
    }
    dfpn_free(s->dfpn_def);
    s->dfpn_def = NULL;
    for (int64_t d = mb / 4 > 1 ? mb / 4 : 1; s->dfpn && d >= 1 && !s->dfpn_def; d /= 2)
        s->dfpn_def = dfpn_new((size_t)d << 20);
    s->dfpn_mb = o->dfpn_hash_mb;
    return s->dfpn;
}

static bool dfpn_clock(void *user) {
    const usi_session_t *s = user;
    return s->dfpn_deadline_ms && compat_now_ms() >= s->dfpn_deadline_ms;
}

static void run_mate(usi_session_t *s, const usi_job_t *j) {
    const usi_go_t *g = &j->go;
    dfpn_limits_t lim;
    dfpn_limits_default(&lim);
    s->dfpn_deadline_ms = 0;
    if (g->mate_ms >= 0) {
        int64_t margin = j->opt.network_delay >= 0 ? j->opt.network_delay : g->mate_ms / 10; /* -1: automatic */
        if (margin > MCTS_TIME_AUTO_DELAY_MS && j->opt.network_delay < 0) margin = MCTS_TIME_AUTO_DELAY_MS;
        if (margin > g->mate_ms / 2) margin = g->mate_ms / 2;
        s->dfpn_deadline_ms = j->received_ms + (g->mate_ms - margin > 1 ? g->mate_ms - margin : 1);
    }
    lim.stop = &s->stop;
    lim.poll = dfpn_clock;
    lim.poll_user = s;
    pos_copy(s->scratch, j->pos);
    dfpn_result_t *r = &s->dfpn_res;
    memset(r, 0, sizeof *r);
    r->status = DFPN_UNKNOWN;
    int64_t t0 = compat_now_ms();
    dfpn_t *d = ensure_dfpn(s, &j->opt);
    if (d) dfpn_search(d, s->scratch, &lim, r);
    int64_t ms = compat_now_ms() - t0;
    usi_out_line(&s->out, "info depth %d nodes %lld time %lld nps %lld", r->len > 0 ? r->len : 1,
                 (long long)r->nodes, (long long)ms, ms > 0 ? (long long)(r->nodes * 1000 / ms) : 0LL);
    char line[USI_LINE_MAX];
    if (r->status == DFPN_PROVEN) {
        size_t used = (size_t)snprintf(line, sizeof line, "checkmate");
        for (int32_t i = 0; i < r->len && used < sizeof line - MOVE_USI_MAX - 2; i++) {
            char mv[MOVE_USI_MAX];
            move_to_usi(r->pv[i], mv);
            used += (size_t)snprintf(line + used, sizeof line - used, " %s", mv);
        }
    } else {
        snprintf(line, sizeof line, "checkmate %s", r->status == DFPN_DISPROVEN ? "nomate" : "timeout");
    }
    compat_mutex_lock(&s->mu);
    if (!s->quiet) usi_out_line(&s->out, "%s", line);
    s->answered = true;
    compat_mutex_unlock(&s->mu);
}

/* The defence's budgets: each of our moves gets DfpnNodes / moves, at least
 * USI_DEF_NODES_MIN; mates up to USI_DEF_PLIES plies are looked for. */
enum { USI_DEF_NODES_MIN = 5000, USI_DEF_PLIES = 31 };

/* Is the side to move at s->dfpn_pos mated whatever it plays: after each of
 * its legal moves, does df-pn prove the opponent's mate? Stops at the first
 * move that is not proven lost (budget, disproof or stop). Sets mated_len
 * (1 + the longest of those mates: the longest resistance) and mated_pv. */
static void dfpn_defence(usi_session_t *s) {
    move_list_t *l = malloc(sizeof *l);
    int32_t n = l ? movegen_legal(s->dfpn_pos, l) : 0, worst = -1;
    int64_t per = n > 0 ? s->dfpn_nodes / n : 0;
    if (per < USI_DEF_NODES_MIN) per = USI_DEF_NODES_MIN;
    dfpn_result_t *r = &s->dfpn_def_res;
    for (int32_t i = 0; i < n && !atomic_load(&s->dfpn_stop); i++) {
        pos_copy(s->dfpn_def_pos, s->dfpn_pos);
        pos_do_move(s->dfpn_def_pos, l->moves[i]);
        dfpn_limits_t lim;
        dfpn_limits_default(&lim);
        lim.max_nodes = per;
        lim.max_plies = USI_DEF_PLIES;
        lim.stop = &s->dfpn_stop;
        dfpn_search(s->dfpn_def, s->dfpn_def_pos, &lim, r);
        s->mated_nodes += r->nodes;
        if (r->status != DFPN_PROVEN || r->len <= 0 || r->len > USI_MATE_PLY_MAX ||
            !dfpn_verify(s->dfpn_def_pos, r->pv, r->len)) {
            worst = -1;
            break;
        }
        if (r->len > worst) {
            worst = r->len;
            s->mated_pv[0] = l->moves[i];
            memcpy(s->mated_pv + 1, r->pv, (size_t)r->len * sizeof(move_t));
        }
        if (i == n - 1) s->mated_len = worst + 1;
    }
    free(l);
}

/* The df-pn thread beside the MCTS: searches s->dfpn_pos within DfpnNodes
 * until dfpn_stop; a proof halts the MCTS (halt), whose answer plays it.
 * Without one, it looks whether the side to move is mated whatever it plays
 * (dfpn_defence); a proof of that halts the MCTS too: the longest
 * resistance is played, reported as `score mate -N`. */
static void *dfpn_main(void *arg) {
    usi_session_t *s = arg;
    dfpn_limits_t lim;
    dfpn_limits_default(&lim);
    lim.max_nodes = s->dfpn_nodes;
    lim.stop = &s->dfpn_stop;
    dfpn_search(s->dfpn, s->dfpn_pos, &lim, &s->dfpn_res);
    if (s->dfpn_res.status != DFPN_PROVEN && s->dfpn_def && !atomic_load(&s->dfpn_stop)) dfpn_defence(s);
    bool decided = s->dfpn_res.status == DFPN_PROVEN || s->mated_len > 0;
    atomic_store(&s->dfpn_done, 1); /* before halt: the search thread reads the result once halted */
    if (decided) atomic_store(&s->halt, 1);
    return NULL;
}

/* Starts df-pn beside the search at root (DfpnNodes > 0). Returns whether a thread runs. */
static bool dfpn_start(usi_session_t *s, const usi_job_t *j, const pos_t *root) {
    s->dfpn_res.status = DFPN_UNKNOWN;
    s->mated_len = 0;
    s->mated_nodes = 0;
    if (j->opt.dfpn_nodes <= 0 || !ensure_dfpn(s, &j->opt)) return false;
    pos_copy(s->dfpn_pos, root);
    s->dfpn_nodes = j->opt.dfpn_nodes;
    atomic_store(&s->dfpn_stop, 0);
    atomic_store(&s->dfpn_done, 0);
    return compat_thread_create(&s->dfpn_thread, dfpn_main, s) == 0;
}

/* Stops and joins the df-pn thread (it looks at its flag every 256 nodes). */
static void dfpn_join(usi_session_t *s, bool running) {
    if (!running) return;
    atomic_store(&s->dfpn_stop, 1);
    compat_thread_join(s->dfpn_thread);
}

/* The machine's load average per CPU (compat_load_average), < 0 where the OS does not tell. */
static double machine_load_per_cpu(void) {
    double l = compat_load_average();
    return l < 0 ? -1.0 : l / compat_cpu_count();
}

static void search_limits(usi_session_t *s, const usi_job_t *j, usi_search_limits_t *lim) {
    const usi_go_t *g = &j->go;
    const pos_t *root = mcts_tree_position(s->tree);
    memset(lim, 0, sizeof *lim);
    /* go nodes, else NodeLimit (not for go infinite, which runs until stop) */
    int64_t visits = g->nodes >= 0 ? (g->nodes > 0 ? g->nodes : 1) : g->infinite ? 0 : j->opt.node_limit;
    bool timed = usi_go_timed(g) && !g->infinite;
    if (!timed && !g->infinite && visits <= 0) visits = USI_GO_DEFAULT_VISITS; /* also a clockless ponder */
    mcts_time_limits_t tl = {0, 0};
    if (timed) {
        double load = machine_load_per_cpu();
        tl = usi_go_time_limits(g, pos_side_to_move(root), pos_game_ply(root), &j->opt, load);
        int32_t pct = mcts_time_auto_percent(load);
        if (pct != s->load_percent_said && (j->opt.network_delay < 0 || j->opt.network_delay2 < 0)) {
            usi_session_say(s, "load average %.2f per CPU: the automatic NetworkDelay margins keep back %d%% of the time",
                            load, pct);
            s->load_percent_said = pct;
        }
        /* the engine's own lateness on this machine (a loaded one answers after its deadline) */
        int64_t first = 0, second = 0;
        for (int32_t i = 0; i < s->late_n; i++) {
            int64_t x = s->late_hist[i];
            if (x > first) second = first, first = x;
            else if (x > second) second = x;
        }
        int64_t shift = second < tl.hard_ms / 4 ? second : tl.hard_ms / 4;
        tl.hard_ms -= shift;
        tl.soft_ms = tl.soft_ms - shift > 1 ? tl.soft_ms - shift : 1;
        if (tl.soft_ms > tl.hard_ms) tl.soft_ms = tl.hard_ms;
    }
    if (strcmp(j->opt.search, "gumbel") == 0 && visits <= 0) {
        double nps = s->nps_est > 0 ? s->nps_est : 200.0;
        visits = timed ? (int64_t)(nps * (double)tl.soft_ms / 1000.0) : 1000000;
        if (visits < 64) visits = 64;
    }
    lim->visits = visits;
    lim->ponder = g->ponder;
    if (timed) {
        if (g->ponder) {
            lim->soft_rel = tl.soft_ms;
            lim->hard_rel = tl.hard_ms;
        } else {
            lim->soft_ms = j->received_ms + tl.soft_ms;
            lim->hard_ms = j->received_ms + tl.hard_ms;
        }
    }
}

/* ---- proven mates ------------------------------------------------------------------ */

/* Budgets of the mate searches around each go: small beside any move's time. */
enum {
    USI_ROOT_MATE_PLIES = 7,    /* the side to move mates in at most this many plies */
    USI_ROOT_MATE_NODES = 20000,
    USI_ROOT_MATE_MS = 50,      /* and at most a quarter of the time to the hard deadline */
    USI_MATED_PLIES = 7,        /* after each of our moves, the opponent's mate */
    USI_MATED_NODES = 4000,     /* per move */
    USI_MATED_MS = 30,          /* for all of them */
    USI_MATED_MOVES_MAX = 64,   /* more legal moves than this: not tried */
    USI_MATE_TT_LOG2 = 16,
};
#define USI_MATED_Q (-0.8f) /* the search's value below which a mate against us is looked for */

static int64_t mate_deadline(const usi_search_limits_t *lim, int64_t budget_ms) {
    int64_t now = compat_now_ms(), d = now + budget_ms;
    if (lim->hard_ms && !lim->ponder) {
        int64_t quarter = now + (lim->hard_ms - now) / 4;
        if (quarter < d) d = quarter;
    }
    return d > now ? d : now + 1;
}

/* Does the side to move at root mate within USI_ROOT_MATE_PLIES? A FOUND
 * answer of usi_mate_search is proven (every defence tried) and the shortest
 * (iterative deepening): r holds it. */
static bool root_mate(usi_session_t *s, const pos_t *root, const usi_search_limits_t *lim, usi_mate_result_t *r) {
    usi_mate_limits_t ml;
    usi_mate_limits_default(&ml);
    ml.max_plies = USI_ROOT_MATE_PLIES;
    ml.max_nodes = USI_ROOT_MATE_NODES;
    ml.tt_log2 = USI_MATE_TT_LOG2;
    ml.deadline_ms = mate_deadline(lim, USI_ROOT_MATE_MS);
    ml.stop = &s->stop;
    pos_copy(s->scratch, root);
    usi_mate_search(s->scratch, &ml, r);
    return r->status == USI_MATE_FOUND && r->len > 0 && usi_mate_verify(root, r->pv, r->len);
}

/* Is the side to move at root mated whatever it plays (every legal move
 * answered by a mate within USI_MATED_PLIES, found within the budgets)?
 * Returns the plies to mate after the longest resistance (> 0), with that
 * line in pv (our move first, *len plies), or 0. */
static int32_t mated_in(usi_session_t *s, const pos_t *root, const usi_search_limits_t *lim, move_t *pv,
                        int32_t *len) {
    move_list_t *l = malloc(sizeof *l);
    if (!l) return 0;
    int32_t n = movegen_legal(root, l), worst = -1;
    usi_mate_limits_t ml;
    usi_mate_limits_default(&ml);
    ml.max_plies = USI_MATED_PLIES;
    ml.max_nodes = USI_MATED_NODES;
    ml.tt_log2 = USI_MATE_TT_LOG2;
    ml.deadline_ms = mate_deadline(lim, USI_MATED_MS);
    ml.stop = NULL; /* after stop, still: the answer is not out yet and this is short */
    usi_mate_result_t *r = &s->mate_res;
    for (int32_t i = 0; i < n && n <= USI_MATED_MOVES_MAX; i++) {
        pos_copy(s->scratch, root);
        pos_do_move(s->scratch, l->moves[i]);
        usi_mate_search(s->scratch, &ml, r);
        if (r->status != USI_MATE_FOUND || r->len <= 0) {
            worst = -1;
            break;
        }
        if (r->len > worst) {
            worst = r->len;
            pv[0] = l->moves[i];
            memcpy(pv + 1, r->pv, (size_t)r->len * sizeof(move_t));
            *len = r->len + 1;
        }
    }
    free(l);
    return worst >= 0 ? worst + 1 : 0;
}

/* The first legal move (when the clock ran out before the root was evaluated). */
static move_t first_legal(const pos_t *pos) {
    move_list_t *l = malloc(sizeof *l);
    if (!l) return MOVE_NONE;
    move_t m = movegen_legal(pos, l) > 0 ? l->moves[0] : MOVE_NONE;
    free(l);
    return m;
}

/* Takes in the previous search's batches still on the device before this
 * search touches the tree. A stop that comes meanwhile is answered at once
 * with the first legal move (the tree is not this search's yet) and returns
 * true; the batches are then left for the next one. */
static bool wait_previous(usi_session_t *s, const usi_job_t *j) {
    while (usi_search_take_in(&s->search) > 0) {
        if (atomic_load(&s->stop)) {
            move_t m = first_legal(j->pos);
            char line[64] = "bestmove resign", mv[MOVE_USI_MAX];
            if (m != MOVE_NONE) {
                move_to_usi(m, mv);
                snprintf(line, sizeof line, "bestmove %s", mv);
            }
            usi_session_say(s, "stopped before the search could start: playing the first legal move");
            answer(s, j, line);
            return true;
        }
        compat_sleep_ms(1);
    }
    usi_search_finish(&s->search); /* nothing left: only marks the tree stopped */
    s->pending = false;
    return false;
}

static void *thread_main(void *arg) {
    usi_session_t *s = arg;
    usi_job_t *j = &s->job;
    if (j->go.mate) {
        run_mate(s, j);
        return thread_done(s);
    }
    if (s->pending && wait_previous(s, j)) return thread_done(s);
    if (!ensure_tree(s, &j->opt, pos_side_to_move(j->pos))) {
        answer(s, j, "bestmove resign");
        return thread_done(s);
    }
    sync_tree(s, j); /* the reader made the evaluator serve j->opt (usi_session_go) */
    const pos_t *root = mcts_tree_position(s->tree);
    char line[256];
    if (!rules_has_legal_move(root)) {
        usi_session_say(s, "no legal move: resigning");
        answer(s, j, "bestmove resign");
        return thread_done(s);
    }
    if (rules_can_declare_by(root, usi_options_declare_rule(&j->opt))) {
        usi_session_say(s, "entering-king declaration holds: declaring a win");
        answer(s, j, "bestmove win");
        return thread_done(s);
    }
    usi_search_limits_t lim;
    search_limits(s, j, &lim);
    usi_search_t *se = &s->search;
    se->tree = s->tree;
    se->eval = s->eval;
    se->out = &s->out;
    se->batch[0] = s->batch[0];
    se->batch[1] = usi_eval_uniform(s->eval) ? NULL : s->batch[1];
    se->batch_size = (int32_t)j->opt.batch;
    se->stop = &s->halt;
    se->ponderhit = cb_ponderhit;
    se->user = s;
    se->start_ms = j->received_ms;
    se->info_interval_ms = 1000;
    se->scratch = s->scratch;
    se->res = s->res;
    se->multipv = (int32_t)j->opt.multipv;
    se->mate = 0;
    usi_mate_result_t *mr = &s->mate_res;
    if (root_mate(s, root, &lim, mr)) {
        /* proven: played at once (an infinite or ponder search holds it until stop) */
        se->mate = mr->len;
        se->mate_len = mr->len;
        memcpy(se->mate_pv, mr->pv, (size_t)mr->len * sizeof(move_t));
        se->playouts = mr->nodes;
        se->depth = se->seldepth = mr->len;
        mcts_search_result(s->tree, s->res); /* hashfull of the tree as it stands */
        usi_search_info(se);
        char mv[MOVE_USI_MAX], pm[MOVE_USI_MAX];
        move_to_usi(mr->pv[0], mv);
        if (j->opt.ponder && mr->len >= 2) {
            move_to_usi(mr->pv[1], pm);
            snprintf(line, sizeof line, "bestmove %s ponder %s", mv, pm);
        } else {
            snprintf(line, sizeof line, "bestmove %s", mv);
        }
        answer(s, j, line);
        return thread_done(s);
    }
    bool dfpn_running = dfpn_start(s, j, root);
    usi_search_run(se, &lim);
    /* df-pn's answer is used when it has one; the answer never waits for it to notice the stop
     * (on a loaded machine that took tens of ms): it is joined after the bestmove */
    bool dfpn_settled = false;
    if (dfpn_running) {
        atomic_store(&s->dfpn_stop, 1);
        dfpn_settled = atomic_load(&s->dfpn_done) != 0;
    }
    const mcts_result_t *r = s->res;
    float q = usi_result_value(r);
    move_t best = r->best;
    const dfpn_result_t *dr = &s->dfpn_res;
    int32_t mated = 0;
    if (dfpn_settled && dr->status == DFPN_PROVEN && dr->len > 0 && dfpn_verify(root, dr->pv, dr->len)) {
        /* df-pn proved a mate: played, whatever the MCTS chose */
        int32_t n = dr->len < USI_MATE_PLY_MAX ? dr->len : USI_MATE_PLY_MAX;
        se->mate = dr->len;
        se->mate_len = n;
        memcpy(se->mate_pv, dr->pv, (size_t)n * sizeof(move_t));
        best = dr->pv[0];
        se->playouts += dr->nodes; /* nodes: the positions searched, df-pn's with the MCTS's */
        usi_session_say(s, "df-pn: mate in %d found in %lld nodes", dr->len, (long long)dr->nodes);
    } else if (dfpn_settled && s->mated_len > 0) {
        /* df-pn proved every move of ours answered by a mate: the longest resistance, said so */
        int32_t n = s->mated_len < USI_MATE_PLY_MAX + 1 ? s->mated_len : USI_MATE_PLY_MAX + 1;
        se->mate = -s->mated_len;
        se->mate_len = n;
        memcpy(se->mate_pv, s->mated_pv, (size_t)n * sizeof(move_t));
        best = s->mated_pv[0];
        se->playouts += dr->nodes + s->mated_nodes;
        usi_session_say(s, "df-pn: every move is answered by a mate; the longest resistance, mated in %d",
                        s->mated_len);
    } else {
        mated = q < USI_MATED_Q ? mated_in(s, root, &lim, se->mate_pv, &se->mate_len) : 0;
        if (mated > 0) { /* every move loses to a mate: the longest resistance, said so */
            se->mate = -mated;
            best = se->mate_pv[0];
        }
    }
    usi_search_info(se);
    if (se->elapsed_ms >= 50 && r->playouts > 0) s->nps_est = (double)r->playouts * 1000.0 / (double)se->elapsed_ms;
    if (best == MOVE_NONE) {
        best = first_legal(root);
        usi_session_say(s, "no move searched yet: playing the first legal move");
    }
    if (best == MOVE_NONE) {
        snprintf(line, sizeof line, "bestmove resign");
    } else if (j->opt.resign > 0 && se->mate <= 0 && r->root_visits > 0 && (1.0 + q) * 0.5 < j->opt.resign) {
        usi_session_say(s, "win probability %.4f below ResignThreshold %g: resigning", (1.0 + q) * 0.5,
                        j->opt.resign);
        snprintf(line, sizeof line, "bestmove resign");
    } else {
        char mv[MOVE_USI_MAX], pm[MOVE_USI_MAX];
        move_to_usi(best, mv);
        const move_t *pv = se->mate != 0 ? se->mate_pv : r->pv;
        int32_t pv_len = se->mate != 0 ? se->mate_len : r->pv_len;
        if (j->opt.ponder && pv_len >= 2 && pv[0] == best) {
            move_to_usi(pv[1], pm);
            snprintf(line, sizeof line, "bestmove %s ponder %s", mv, pm);
        } else {
            snprintf(line, sizeof line, "bestmove %s", mv);
        }
    }
    if (lim.hard_ms && !lim.ponder) {
        /* how late this answer is after its hard deadline (also when a GUI's stop came after
         * it: a referee that gave up on the move sends one) */
        int64_t late = compat_now_ms() - lim.hard_ms;
        s->late_hist[s->late_next] = late > 0 ? late : 0;
        s->late_next = (s->late_next + 1) % USI_LATE_MOVES;
        if (s->late_n < USI_LATE_MOVES) s->late_n++;
    }
    answer(s, j, line);
    dfpn_join(s, dfpn_running);
    /* batches still on the device are the next search's (or the reader's)
     * to take in: the thread ends with the answer, so a go, stop or isready
     * that follows is never held up by them */
    s->pending = true;
    return thread_done(s);
}

/* ---- commands ------------------------------------------------------------------------ */

bool usi_session_searching(usi_session_t *s) { return !reap(s); }

void usi_session_usi(usi_session_t *s) {
    usi_out_line(&s->out, "id name %s %s", USI_ENGINE_NAME, KOMA_VERSION);
    usi_out_line(&s->out, "id author %s", USI_ENGINE_AUTHOR);
    usi_options_print(&s->opt, &s->out);
    usi_out_line(&s->out, "usiok");
}

int usi_session_isready(usi_session_t *s) {
    if (reap(s)) {
        drain(s);
        ensure_tree(s, &s->opt, COLOR_BLACK); /* the side is set again at each go */
        if (s->opt.dfpn_nodes > 0) ensure_dfpn(s, &s->opt); /* its table, not on the first move's clock */
        if (ensure_eval(s, &s->opt, true) != 0) return -1;
    }
    usi_out_line(&s->out, "readyok");
    return 0;
}

void usi_session_setoption(usi_session_t *s, const char *name, const char *value) {
    char err[CFG_STRING_MAX + 128];
    const char *canon = NULL;
    if (usi_options_set(&s->opt, name, value, &canon, err, sizeof err) != 0) {
        usi_session_say(s, "setoption: %s", err);
        return;
    }
    if (!reap(s)) usi_session_say(s, "setoption %s: takes effect with the next search", canon);
}

void usi_session_newgame(usi_session_t *s) {
    s->newgame_pending = true;
    if (reap(s)) s->tree_valid = false;
}

void usi_session_position(usi_session_t *s, const char *sfen, size_t sfen_len, const char *const *moves,
                          const size_t *lens, int32_t n) {
    char err[256];
    pos_t *p = s->tmp;
    if (sfen_len == 8 && memcmp(sfen, "startpos", 8) == 0) {
        pos_set_startpos(p);
    } else if (sfen_parse(p, sfen, sfen_len, err, sizeof err) != SFEN_OK) {
        usi_session_say(s, "position: bad SFEN '%.*s': %s; position unchanged", (int)(sfen_len > 200 ? 200 : sfen_len),
                        sfen, err);
        return;
    }
    sfen_write(p, s->base, sizeof s->base);
    int32_t ok = 0;
    for (int32_t i = 0; i < n; i++) {
        if (pos_hist_len(p) >= POS_HIST_MAX - 8) {
            usi_session_say(s, "position: more than %d moves; position set up to move %d", POS_HIST_MAX - 8, ok);
            break;
        }
        move_t m = move_from_usi(p, moves[i], lens[i]);
        if (m == MOVE_NONE) {
            usi_session_say(s, "position: illegal move '%.*s' (move %d); position set up to move %d",
                            (int)(lens[i] > 16 ? 16 : lens[i]), moves[i], i + 1, ok);
            break;
        }
        pos_do_move(p, m);
        s->moves[ok++] = m;
    }
    s->n_moves = ok;
    pos_t *t = s->pos;
    s->pos = s->tmp;
    s->tmp = t;
}

int usi_session_go(usi_session_t *s, const usi_go_t *g, int64_t received_ms) {
    if (!reap(s)) {
        /* every go gets its bestmove: the running search answers first */
        if (!atomic_load(&s->stop)) {
            usi_session_say(s, "go during a search: the running search is stopped and answers first");
            stop_search(s, false);
        }
        join_search(s); /* stopped: it answers within a moment */
    }
    /* options set since isready (or no isready at all): the net is loaded
     * here, on the go's clock; one that cannot be used ends koma unanswered */
    if (!g->mate && ensure_eval(s, &s->opt, false) != 0) return -1;
    usi_job_t *j = &s->job;
    j->go = *g;
    j->opt = s->opt;
    pos_copy(j->pos, s->pos);
    memcpy(j->base, s->base, sizeof j->base);
    memcpy(j->moves, s->moves, (size_t)s->n_moves * sizeof(move_t));
    j->n = s->n_moves;
    j->received_ms = received_ms;
    j->newgame = s->newgame_pending;
    s->newgame_pending = false;
    atomic_store(&s->stop, 0);
    atomic_store(&s->halt, 0);
    atomic_store(&s->ponderhit_flag, 0);
    s->finished = false;
    s->answered = false;
    s->ponderhit = false;
    s->quiet = false;
    if (compat_thread_create(&s->thread, thread_main, s) != 0) {
        /* no thread (out of memory): the GUI still gets its bestmove, at once,
         * a legal move without a search (mate searches answer as none found) */
        move_list_t *ml = malloc(sizeof *ml);
        char mv[16] = "resign";
        if (ml && movegen_legal(s->pos, ml) > 0) move_to_usi(ml->moves[0], mv);
        free(ml);
        usi_session_say(s, "go: cannot start the search thread (out of memory?): answering without a search");
        if (g->mate) usi_out_line(&s->out, "checkmate timeout");
        else usi_out_line(&s->out, "bestmove %s", mv);
        s->answered = s->finished = true;
        return 0;
    }
    s->live = true;
    return 0;
}

void usi_session_stop(usi_session_t *s) {
    if (s->live) stop_search(s, false);
}

void usi_session_ponderhit(usi_session_t *s) {
    if (!s->live || !s->job.go.ponder) return;
    compat_mutex_lock(&s->mu);
    if (!s->ponderhit) {
        s->ponderhit = true;
        s->ponderhit_ms = compat_now_ms();
        atomic_store_explicit(&s->ponderhit_flag, 1, memory_order_release);
        compat_cond_broadcast(&s->cv);
    }
    compat_mutex_unlock(&s->mu);
}

/* A search already told to stop still gives its bestmove (USI wants one after
 * every stop); any other is stopped quietly: the game is over. */
static bool answering_stop(usi_session_t *s) {
    compat_mutex_lock(&s->mu);
    bool answering = atomic_load(&s->stop) && !s->quiet;
    compat_mutex_unlock(&s->mu);
    return answering;
}

void usi_session_gameover(usi_session_t *s, const char *result) {
    (void)result;
    if (s->live && !answering_stop(s)) stop_search(s, true);
    s->newgame_pending = true;
}

/* A search that was told to stop gives its answer; any other is stopped quietly. */
void usi_session_quit(usi_session_t *s) {
    if (!s->live) return;
    if (!answering_stop(s)) stop_search(s, true);
    join_search(s);
}

void usi_session_wait(usi_session_t *s) {
    if (s->live && !s->job.go.infinite && !s->job.go.ponder && !(s->job.go.mate && s->job.go.mate_ms < 0))
        join_search(s);
}
