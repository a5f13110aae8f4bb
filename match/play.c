/* play.c - a match between two nets in process (the in-loop evaluation),
 * judged by the referee. See play.h. */
#include "match/play.h"
#include "compat/bits.h"
#include "compat/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/run.h"
#include "engine/encode.h"
#include "mcts/mcts.h"
#include "nn/net.h"
#include "nn/weights.h"

void match_play_config_default(match_play_config_t *c) {
    memset(c, 0, sizeof *c);
    c->games = 20;
    c->visits = 64;
    c->seed = 1;
    c->temp_plies = 12;
    c->temp = 1.0f;
    c->max_ply = RULES_MAX_PLY_DEFAULT;
    c->threads = 0;
    c->batch = 16;
    c->store = 1;
}

/* One finished game, from a's side. */
typedef struct {
    int32_t done;
    int32_t a_black;
    int32_t score2; /* a's score in half points: 2 win, 1 draw, 0 loss */
    int32_t plies;
    rules_end_t end;
} eval_game_t;

typedef struct {
    const match_play_config_t *cfg;
    nn_net_t *net[2]; /* 0 = a, 1 = b; read-only while games run */
    eval_game_t *games;
    compat_mutex_t mu; /* next, failed, err, the database */
    int32_t next;
    int failed;
    char err[256];
    const match_engine_player_t *engine; /* NULL: net b plays; else this engine does */
    int engine_failed;                   /* the engine could not be (re)started (set with failed) */
    match_engine_t spare; /* the engine started before the row was opened: the first game thread takes it */
    db_t *db;             /* NULL: nothing stored; used under mu by the game threads */
    int64_t match_id;     /* the matches row the games go to (db_match_begin) */
    char name[2][DB_PATH_MAX];
} eval_shared_t;

typedef struct {
    nn_ctx_t *ctx;
    match_engine_t eng; /* player b when the match is against an engine (sh->engine) */
    nn_backend_t *be;   /* the game thread's, ctx runs on it */
    eval_shared_t *sh;  /* a failed forward fails the evaluation */
    uint8_t *packed;    /* (batch, ENC_PACKED_BYTES) */
    float *hand;        /* (batch, ENC_HAND) */
} eval_player_t;

static void fail_shared(eval_shared_t *sh, const char *fmt, ...);

/* mcts_search's evaluator: the requests' planes into one batch, one forward. */
static void eval_leaves(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *policy, float *wdl) {
    (void)t;
    eval_player_t *p = user;
    for (int32_t i = 0; i < n; i++) {
        memcpy(p->packed + (size_t)i * ENC_PACKED_BYTES, reqs[i].packed, ENC_PACKED_BYTES);
        memcpy(p->hand + (size_t)i * ENC_HAND, reqs[i].hand, sizeof(float) * ENC_HAND);
    }
    if (nn_forward(p->ctx, n, p->packed, p->hand, policy, wdl, NULL) != 0) /* the games stop at sh->failed */
        fail_shared(p->sh, "evaluation: the %s backend failed: %s", p->be->name, nn_backend_error(p->be));
}

static void fail_shared(eval_shared_t *sh, const char *fmt, ...) {
    compat_mutex_lock(&sh->mu);
    if (!sh->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->err, sizeof sh->err, fmt, ap);
        va_end(ap);
        sh->failed = 1;
    }
    compat_mutex_unlock(&sh->mu);
}

/* Has the caller asked the match to stop (cfg->stop)? */
static int stop_asked(const match_play_config_t *cfg) { return cfg->stop && atomic_load(cfg->stop); }

/* Has a game thread failed the evaluation? (Any thread may, at any move.) */
static int shared_failed(eval_shared_t *sh) {
    compat_mutex_lock(&sh->mu);
    int f = sh->failed;
    compat_mutex_unlock(&sh->mu);
    return f;
}

/* The engine (player b) started and readied for a new game: restarted once
 * when it fails. 0, or -1 with the match failed (engine_failed). */
static int engine_ready(eval_shared_t *sh, match_engine_t *e) {
    const match_engine_player_t *ep = sh->engine;
    char label[128], err[700] = "";
    snprintf(label, sizeof label, "engine '%s' (%.60s)", ep->label, ep->spec.cmd);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (e->proc && e->alive && match_engine_new_game(e, ep->init_timeout_ms, label, err, sizeof err) == 0) return 0;
        match_engine_close(e);
        if (match_engine_open(e, &ep->spec, sh->cfg->engine_stderr, ep->init_timeout_ms, label, err, sizeof err) != 0)
            break;
    }
    compat_mutex_lock(&sh->mu);
    sh->engine_failed = 1;
    compat_mutex_unlock(&sh->mu);
    fail_shared(sh, "%s", err);
    return -1;
}

/* The engine's move in g (bounded by move_timeout_ms): played, or the game
 * forfeited on time or for a crash. */
static void engine_move(eval_shared_t *sh, match_engine_t *e, ref_game_t *g) {
    const match_engine_player_t *ep = sh->engine;
    color_t side = ref_game_side(g);
    char *pc = match_engine_position_cmd(g), mv[64] = "", detail[REF_DETAIL_MAX];
    int rc = pc && compat_proc_write_line(e->proc, pc) == 0 && compat_proc_write_line(e->proc, ep->go) == 0
                 ? 0
                 : COMPAT_PROC_EOF;
    free(pc);
    int64_t t0 = compat_now_ms();
    if (rc == 0) rc = match_engine_bestmove(e, ep->move_timeout_ms, mv, sizeof mv);
    if (rc == COMPAT_PROC_EOF) {
        e->alive = 0;
        snprintf(detail, sizeof detail, "engine '%s' exited or closed its output while thinking", ep->label);
        ref_game_forfeit(g, side, RULES_END_ILLEGAL_MOVE, true, detail);
    } else if (rc == COMPAT_PROC_TIMEOUT) {
        snprintf(detail, sizeof detail, "engine '%s' sent no bestmove within %lld ms", ep->label,
                 (long long)(compat_now_ms() - t0));
        ref_game_forfeit(g, side, RULES_END_TIME, false, detail);
        char tmp[64];
        if (compat_proc_write_line(e->proc, "stop") != 0 || match_engine_bestmove(e, 1000, tmp, sizeof tmp) != 0)
            e->alive = 0; /* restarted before the next game */
    } else {
        ref_game_play_usi(g, mv);
    }
}

/* Plays game gi to its end in g. 0, or -1 when out of memory. */
static int play_game(eval_shared_t *sh, eval_player_t pl[2], int32_t gi, ref_game_t *g, mcts_result_t *res) {
    const match_play_config_t *cfg = sh->cfg;
    int a_black = gi % 2 == 0;
    char e[256];
    if (ref_game_start(g, "startpos", cfg->max_ply, e, sizeof e) != 0) return -1;
    mcts_params_t prm;
    mcts_params_default(&prm);
    prm.noise = false;
    prm.move_temp = cfg->temp;
    prm.move_temp_plies = cfg->temp > 0 ? cfg->temp_plies : 0;
    prm.max_ply = cfg->max_ply;
    prm.search_batch = cfg->batch;
    prm.node_limit = 4 * cfg->visits + 4096;
    mcts_tree_t *tree[2] = {NULL, NULL};
    int n_trees = sh->engine ? 1 : 2; /* an engine (b) searches for itself */
    for (int k = 0; k < n_trees; k++) {
        prm.seed = compat_mix64(cfg->seed * 0x100000001B3ull + (uint64_t)gi * 2 + (uint64_t)k);
        tree[k] = mcts_tree_new(&prm, NULL);
        if (tree[k]) mcts_tree_set_position(tree[k], &g->pos);
    }
    if (!tree[0] || (n_trees == 2 && !tree[1])) {
        mcts_tree_free(tree[0]);
        mcts_tree_free(tree[1]);
        return -1;
    }
    mcts_limits_t lim = {.visits = cfg->visits, .full = 0};
    while (!ref_game_over(g) && !shared_failed(sh) && !stop_asked(cfg)) {
        color_t side = ref_game_side(g);
        int k = (side == COLOR_BLACK) == a_black ? 0 : 1; /* net to move */
        if (k == 1 && sh->engine) {
            engine_move(sh, &pl[1].eng, g);
            if (ref_game_over(g)) break;
            mcts_tree_advance(tree[0], g->moves[g->n_moves - 1]);
            continue;
        }
        if (rules_can_declare(&g->pos)) { /* a search always declares when it can */
            ref_game_claim_win(g);
            break;
        }
        mcts_search(tree[k], &lim, eval_leaves, &pl[k], res);
        if (res->best == MOVE_NONE) { /* no move at a root the referee still plays on: give up */
            ref_game_resign(g);
            break;
        }
        move_t m = res->best;
        if (ref_game_play(g, m) != RULES_END_NONE) break;
        for (int j = 0; j < n_trees; j++) mcts_tree_advance(tree[j], m);
    }
    mcts_tree_free(tree[0]);
    mcts_tree_free(tree[1]);
    return 0;
}

static void *eval_thread(void *arg) {
    eval_shared_t *sh = arg;
    const match_play_config_t *cfg = sh->cfg;
    char e[256];
    nn_backend_t *be = nn_backend_cpu_new(1);
    eval_player_t pl[2];
    memset(pl, 0, sizeof pl);
    ref_game_t *g = ref_game_new();
    mcts_result_t *res = malloc(sizeof *res);
    int ok = be && g && res;
    int n_nets = sh->engine ? 1 : 2;
    for (int k = 0; ok && k < n_nets; k++) {
        pl[k].ctx = nn_ctx_new(sh->net[k], be, cfg->batch, e, sizeof e);
        pl[k].be = be;
        pl[k].sh = sh;
        pl[k].packed = malloc((size_t)cfg->batch * ENC_PACKED_BYTES);
        pl[k].hand = malloc((size_t)cfg->batch * ENC_HAND * sizeof(float));
        if (!pl[k].ctx || !pl[k].packed || !pl[k].hand) ok = 0;
    }
    if (!ok) fail_shared(sh, "evaluation: cannot set up a game thread (out of memory)");
    compat_mutex_lock(&sh->mu);
    if (sh->engine && sh->spare.proc) { /* already started and checked: the first thread takes it */
        pl[1].eng = sh->spare;
        memset(&sh->spare, 0, sizeof sh->spare);
    }
    compat_mutex_unlock(&sh->mu);
    while (ok) {
        compat_mutex_lock(&sh->mu);
        int32_t gi = sh->failed || stop_asked(cfg) ? cfg->games : sh->next++;
        compat_mutex_unlock(&sh->mu);
        if (gi >= cfg->games) break;
        if (sh->engine && engine_ready(sh, &pl[1].eng) != 0) break;
        if (play_game(sh, pl, gi, g, res) != 0) {
            fail_shared(sh, "evaluation: game %d: out of memory", gi + 1);
            break;
        }
        if (shared_failed(sh) || !ref_game_over(g)) break; /* failed, or stopped mid-game: not stored */
        int a_black = gi % 2 == 0;
        int32_t r = ref_game_result(g);      /* +1 Black won */
        if (sh->engine && pl[1].eng.alive) { /* the result from the engine's side */
            const char *res_b = r == 0 ? "gameover draw" : (r > 0) != a_black ? "gameover win" : "gameover lose";
            if (compat_proc_write_line(pl[1].eng.proc, res_b) != 0) pl[1].eng.alive = 0;
        }
        eval_game_t *out = &sh->games[gi];
        out->a_black = a_black;
        out->score2 = r == 0 ? 1 : (r > 0) == a_black ? 2 : 0;
        out->plies = g->n_moves;
        out->end = g->end;
        /* Stored as it ends, so that a match that never finishes keeps it. */
        compat_mutex_lock(&sh->mu);
        out->done = 1;
        if (sh->db) {
            const char *black = sh->name[a_black ? 0 : 1], *white = sh->name[a_black ? 1 : 0];
            db_status_t st = ref_store_match_game(sh->db, sh->match_id, g, black, white);
            if (st != DB_OK && !sh->failed) {
                set_err(sh->err, sizeof sh->err, "evaluation: store game %d: %s", gi + 1, db_errmsg(sh->db));
                sh->failed = 1;
            }
        }
        compat_mutex_unlock(&sh->mu);
    }
    for (int k = 0; k < 2; k++) {
        nn_ctx_free(pl[k].ctx);
        free(pl[k].packed);
        free(pl[k].hand);
        match_engine_close(&pl[k].eng);
    }
    free(res);
    ref_game_free(g);
    nn_backend_free(be);
    return NULL;
}

/* path as given when it exists, else run_dir/path. */
static void resolve_path(const char *run_dir, const char *path, char *out, size_t len) {
    if (compat_file_exists(path) || !run_dir || !run_dir[0]) snprintf(out, len, "%s", path);
    else snprintf(out, len, "%s/%s", run_dir, path);
}

/* The models row whose path (relative to run_dir) names the same file as
 * path. DB_NOTFOUND when none. */
static db_status_t find_model(db_t *db, const char *run_dir, const char *path, db_model_t *out) {
    db_model_t latest;
    db_status_t st = db_model_latest(db, &latest);
    if (st != DB_OK) return st;
    size_t rl = strlen(run_dir);
    const char *rel = path;
    if (strncmp(path, run_dir, rl) == 0 && path[rl] == '/') rel = path + rl + 1;
    while (rel[0] == '.' && rel[1] == '/') rel += 2;
    for (int32_t c = latest.cycle; c >= 0; c--) {
        db_model_t m;
        st = db_model_by_cycle(db, c, &m);
        if (st == DB_NOTFOUND) continue;
        if (st != DB_OK) return st;
        if (strcmp(m.path, rel) == 0) {
            *out = m;
            return DB_OK;
        }
    }
    return DB_NOTFOUND;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    const char *b = strrchr(p, '\\');
    if (b && (!s || b > s)) s = b;
    return s ? s + 1 : p;
}

/* Loads net a and net b (n_nets 2) or net a alone (an engine plays b) into
 * sh->net, names them, and folds batch norm once here, before the game
 * threads share the nets. */
static int load_nets(eval_shared_t *sh, nn_backend_t *be, const char *run_dir, const char *const paths[2], int n_nets,
                     char *err, size_t errlen) {
    char file[2][1200];
    for (int k = 0; k < n_nets; k++) {
        resolve_path(run_dir, paths[k], file[k], sizeof file[k]);
        sh->net[k] = nn_weights_load(be, file[k], ENC_FEATURES_VERSION, err, errlen);
        if (!sh->net[k]) return -1;
        const nn_net_config_t *nc = nn_net_config(sh->net[k]);
        if (nc->in_planes != ENC_PLANES || nc->in_hand != ENC_HAND) {
            set_err(err, errlen, "%s: net takes %d planes and %d hand values, not %d and %d", file[k], nc->in_planes,
                    nc->in_hand, ENC_PLANES, ENC_HAND);
            return -1;
        }
        snprintf(sh->name[k], sizeof sh->name[k], "%s", base_name(paths[k]));
    }
    for (int k = 0; k < n_nets; k++) {
        nn_ctx_t *warm = nn_ctx_new(sh->net[k], be, 1, err, errlen);
        if (!warm) return -1;
        uint8_t packed[ENC_PACKED_BYTES];
        float hand[ENC_HAND], pol[ENC_LABEL_NB], wdl[3];
        pos_t *pos = malloc(sizeof *pos);
        if (!pos) {
            nn_ctx_free(warm);
            set_err(err, errlen, "evaluation: out of memory");
            return -1;
        }
        pos_set_startpos(pos);
        encode_position(pos, packed, hand);
        free(pos);
        int bad = nn_forward(warm, 1, packed, hand, pol, wdl, NULL);
        nn_ctx_free(warm);
        if (bad) {
            set_err(err, errlen, "evaluation: the %s backend failed: %s", be->name, nn_backend_error(be));
            return -1;
        }
    }
    return 0;
}

/* The run's matches row for this match (cfg->store with a run): the players
 * named by their models where the run has them (model[k], have_model[k]),
 * the row begun (no Elo until the end: a match that does not finish says
 * so); each game is stored as it ends. */
static int begin_row(eval_shared_t *sh, const char *run_dir, const char *const paths[2], int n_nets,
                     db_model_t model[2], int have_model[2], db_match_t *row, match_play_result_t *res, char *err,
                     size_t errlen) {
    const match_play_config_t *cfg = sh->cfg;
    const match_engine_player_t *engine = sh->engine;
    char dbp[1200];
    run_path(run_dir, RUN_DB, dbp, sizeof dbp);
    if (db_open(dbp, 0, &sh->db, err, errlen) != DB_OK) return -1;
    for (int k = 0; k < n_nets; k++) {
        db_status_t st = find_model(sh->db, run_dir, paths[k], &model[k]);
        if (st == DB_OK) {
            have_model[k] = 1;
            snprintf(sh->name[k], sizeof sh->name[k], "cycle %d (%.200s)", model[k].cycle, model[k].path);
        } else if (st != DB_NOTFOUND) {
            set_err(err, errlen, "%s", db_errmsg(sh->db));
            return -1;
        }
    }
    res->cycle_a = have_model[0] ? model[0].cycle : -1;
    res->cycle_b = have_model[1] ? model[1].cycle : -1;
    /* The games' players: the row's W/D/L follow them only when the two
     * names differ (a net against its own file). */
    if (strcmp(sh->name[0], sh->name[1]) == 0) {
        size_t l = strnlen(sh->name[0], sizeof sh->name[0] - 5);
        memcpy(sh->name[0] + l, " (a)", 5);
        memcpy(sh->name[1] + l, " (b)", 5);
    }
    memset(row, 0, sizeof *row);
    row->cycle = have_model[0] ? model[0].cycle : -1;
    row->model_a = have_model[0] ? model[0].id : 0;
    row->model_b = have_model[1] ? model[1].id : 0;
    snprintf(row->opponent, sizeof row->opponent, "%.63s", have_model[1] ? "" : sh->name[1]);
    snprintf(row->engine_a, sizeof row->engine_a, "%s", sh->name[0]);
    snprintf(row->engine_b, sizeof row->engine_b, "%s", sh->name[1]);
    snprintf(row->settings, sizeof row->settings, "eval visits=%d temp=%.2f/%d max_ply=%d games=%d%s%.40s", cfg->visits,
             (double)cfg->temp, cfg->temp_plies, cfg->max_ply, cfg->games, engine ? " vs " : "",
             engine ? engine->go : "");
    if (db_match_begin(sh->db, row) != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(sh->db));
        return -1;
    }
    sh->match_id = res->match_id = row->id;
    return 0;
}

/* Plays the match's games on cfg->threads game threads (eval_thread) until
 * each is done, the match failed or cfg->stop. res->stored: the games
 * finished. */
static int play_games(eval_shared_t *sh, match_play_result_t *res, char *err, size_t errlen) {
    const match_play_config_t *cfg = sh->cfg;
    sh->games = calloc((size_t)cfg->games, sizeof *sh->games);
    if (!sh->games) {
        set_err(err, errlen, "evaluation: out of memory");
        return -1;
    }
    int32_t nt = cfg->threads > 0 ? cfg->threads : compat_cpu_count();
    if (nt > cfg->games) nt = cfg->games;
    compat_thread_t *th = calloc((size_t)nt, sizeof *th);
    int32_t started = 0;
    if (!th) {
        set_err(err, errlen, "evaluation: out of memory");
        return -1;
    }
    for (; started < nt; started++)
        if (compat_thread_create(&th[started], eval_thread, sh) != 0) break;
    if (started == 0) eval_thread(sh);
    for (int32_t i = 0; i < started; i++) compat_thread_join(th[i]);
    free(th);
    res->engine_failed = sh->engine_failed;
    for (int32_t i = 0; i < cfg->games; i++) res->stored += sh->games[i].done;
    if (sh->failed) {
        set_err(err, errlen, "%s", sh->err);
        return -1;
    }
    if (res->stored < cfg->games) { /* cfg->stop: the row stays unfinished with the games it has */
        KOMA_ASSERT(stop_asked(cfg));
        res->interrupted = 1;
        set_err(err, errlen, "evaluation: stopped after %d of %d games", res->stored, cfg->games);
        return -1;
    }
    return 0;
}

/* Every game played: the totals, the Elo, the row finished and net a's place
 * on the ladder (when it is a model of the run). */
static int finish_match(eval_shared_t *sh, const db_model_t *model_a, int have_model_a, db_match_t *row,
                        match_play_result_t *res, char *err, size_t errlen) {
    const match_play_config_t *cfg = sh->cfg;
    int64_t plies = 0;
    for (int32_t i = 0; i < cfg->games; i++) {
        const eval_game_t *gm = &sh->games[i];
        KOMA_ASSERT(gm->done);
        res->games++;
        if (gm->score2 == 2) {
            res->wins++;
            if (gm->a_black) res->a_black_wins++;
            else res->a_white_wins++;
        } else if (gm->score2 == 1) {
            res->draws++;
        } else {
            res->losses++;
        }
        res->reasons[gm->end]++;
        plies += gm->plies;
    }
    res->avg_plies = (double)plies / cfg->games;
    ref_elo_trinomial(res->wins, res->draws, res->losses, &res->elo);

    if (sh->db) { /* every game is stored: the totals and the Elo finish the row */
        row->wins = res->wins, row->draws = res->draws, row->losses = res->losses;
        row->elo = res->elo.elo, row->elo_lo = res->elo.elo_lo, row->elo_hi = res->elo.elo_hi;
        if (db_match_finish(sh->db, row) != DB_OK) {
            set_err(err, errlen, "%s", db_errmsg(sh->db));
            return -1;
        }
    }
    if (sh->db && have_model_a) {
        ref_ladder_point_t *pts = NULL;
        int32_t np = 0;
        if (ref_elo_ladder(sh->db, &pts, &np) != DB_OK) {
            set_err(err, errlen, "%s", db_errmsg(sh->db));
            return -1;
        }
        for (int32_t i = 0; i < np; i++)
            if (pts[i].cycle == model_a->cycle) res->ladder = pts[i];
        free(pts);
    }
    return 0;
}

/* A match of net a against net b (model_b_path) or an engine (engine). */
static int play_match(const char *run_dir, const char *model_a_path, const char *model_b_path,
                      const match_engine_player_t *engine, const match_play_config_t *cfg_in, match_play_result_t *res,
                      char *err, size_t errlen) {
    match_play_config_t cfg;
    if (cfg_in) cfg = *cfg_in;
    else match_play_config_default(&cfg);
    memset(res, 0, sizeof *res);
    res->cycle_a = res->cycle_b = -1;
    res->ladder.cycle = -1;
    res->elo.elo = res->elo.elo_lo = res->elo.elo_hi = NAN;
    if (!model_a_path || (!model_b_path && !engine) || cfg.games < 1 || cfg.visits < 1 || cfg.batch < 1 ||
        cfg.max_ply < 0) {
        set_err(err, errlen, "evaluation: bad arguments (games %d, visits %d, batch %d)", cfg.games, cfg.visits,
                cfg.batch);
        return -1;
    }
    int64_t t0 = compat_now_ms();
    eval_shared_t *sh = calloc(1, sizeof *sh);
    nn_backend_t *main_be = nn_backend_cpu_new(1);
    int rc = -1;
    if (!sh || !main_be) {
        set_err(err, errlen, "evaluation: out of memory");
        free(sh);
        nn_backend_free(main_be);
        return -1;
    }
    compat_mutex_init(&sh->mu);
    sh->cfg = &cfg;
    sh->engine = engine;
    int n_nets = engine ? 1 : 2;
    const char *paths[2] = {model_a_path, engine ? engine->label : model_b_path};
    if (engine) snprintf(sh->name[1], sizeof sh->name[1], "%s", engine->label);
    db_model_t model[2];
    int have_model[2] = {0, 0};
    db_match_t row;
    if (load_nets(sh, main_be, run_dir, paths, n_nets, err, errlen) != 0) goto done;
    if (engine) { /* a missing or broken engine fails here, before anything is stored */
        char label[128];
        snprintf(label, sizeof label, "engine '%s' (%.60s)", engine->label, engine->spec.cmd);
        if (match_engine_open(&sh->spare, &engine->spec, cfg.engine_stderr, engine->init_timeout_ms, label, err,
                              errlen) != 0) {
            res->engine_failed = 1;
            goto done;
        }
    }
    if (stop_asked(&cfg)) { /* before the row: nothing stored */
        res->interrupted = 1;
        set_err(err, errlen, "evaluation: stopped before its first game");
        goto done;
    }
    if (run_dir && cfg.store && begin_row(sh, run_dir, paths, n_nets, model, have_model, &row, res, err, errlen) != 0)
        goto done;
    if (play_games(sh, res, err, errlen) != 0) goto done;
    if (finish_match(sh, &model[0], have_model[0], &row, res, err, errlen) != 0) goto done;
    rc = 0;
done:
    res->seconds = (double)(compat_now_ms() - t0) / 1000.0;
    db_close(sh->db);
    match_engine_close(&sh->spare);
    free(sh->games);
    nn_net_free(sh->net[0]);
    nn_net_free(sh->net[1]);
    compat_mutex_destroy(&sh->mu);
    free(sh);
    nn_backend_free(main_be);
    return rc;
}

int match_play_nets(const char *run_dir, const char *model_a_path, const char *model_b_path,
                    const match_play_config_t *cfg, match_play_result_t *res, char *err, size_t errlen) {
    return play_match(run_dir, model_a_path, model_b_path, NULL, cfg, res, err, errlen);
}

int match_play_engine(const char *run_dir, const char *model_a_path, const match_engine_player_t *engine,
                      const match_play_config_t *cfg, match_play_result_t *res, char *err, size_t errlen) {
    if (!engine) {
        set_err(err, errlen, "evaluation: no engine");
        return -1;
    }
    return play_match(run_dir, model_a_path, NULL, engine, cfg, res, err, errlen);
}

int match_play_cycles(const char *run_dir, int32_t cycle_a, int32_t cycle_b, const match_play_config_t *cfg,
                      match_play_result_t *res, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    res->cycle_a = res->cycle_b = res->ladder.cycle = -1;
    if (!run_dir) {
        set_err(err, errlen, "evaluation: no run directory");
        return -1;
    }
    char dbp[1200];
    run_path(run_dir, RUN_DB, dbp, sizeof dbp);
    db_t *db = NULL;
    if (db_open(dbp, DB_OPEN_READONLY, &db, err, errlen) != DB_OK) return -1;
    db_model_t m[2];
    int32_t cyc[2] = {cycle_a, cycle_b};
    for (int k = 0; k < 2; k++) {
        db_status_t st = db_model_by_cycle(db, cyc[k], &m[k]);
        if (st != DB_OK) {
            if (st == DB_NOTFOUND) set_err(err, errlen, "%s: no model of cycle %d", dbp, cyc[k]);
            else set_err(err, errlen, "%s", db_errmsg(db));
            db_close(db);
            return -1;
        }
    }
    db_close(db);
    return match_play_nets(run_dir, m[0].path, m[1].path, cfg, res, err, errlen);
}

int match_play(const char *run_dir, const char *model_a_path, const char *model_b_path, int32_t games, int32_t visits,
               uint64_t seed, match_play_result_t *res, char *err, size_t errlen) {
    match_play_config_t cfg;
    match_play_config_default(&cfg);
    cfg.games = games;
    cfg.visits = visits;
    cfg.seed = seed;
    return match_play_nets(run_dir, model_a_path, model_b_path, &cfg, res, err, errlen);
}
