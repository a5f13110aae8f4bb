/* bench_selfplay.c - self-play throughput without training or storage.
 *
 * The selfplay worker pool (selfplay/worker.h) plays games against a random
 * net of the given size through the inference server, exactly as `selfplay`
 * does, for a fixed time after a warm-up; finished games are counted and
 * dropped. Reported: positions (searched moves)/s, evaluations/s, average
 * device batch, device busy %, NN-cache hit rate, games/s and plies/game,
 * and the process CPU time per position (comparable on a shared machine).
 *
 * Usage: bench_selfplay [--config configs/cpu.ini] [--net 4x32] [--seconds 30]
 *                       [--warmup 5] [any selfplay flag: --threads, --visits, --backend, ...]
 * Trainer flags are accepted and ignored, except --net (the random net's size)
 * and --activation (its activation).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "compat/status.h"
#include "config/config.h"
#include "engine/encode.h"
#include "mcts/cache.h"
#include "nn/net.h"
#include "nn/server.h"
#include "selfplay/config.h"
#include "selfplay/driver.h"
#include "selfplay/worker.h"
#include "train/trainer.h"

typedef struct {
    int64_t searches, leaves, games, rows, plies, evaluated, batches, lookups, hits;
    double busy_s, worker_s, t, cpu;
} snap_t;

static int64_t g_games, g_rows, g_plies;

static void drain(sp_pool_t *pool) {
    sp_record_t *recs[256];
    int32_t n;
    while ((n = sp_pool_take(pool, recs, 256, 0)) > 0)
        for (int32_t i = 0; i < n; i++) {
            g_games++;
            g_rows += recs[i]->n_rows;
            g_plies += recs[i]->n_moves;
            sp_record_free(recs[i]);
        }
}

static void snap(sp_pool_t *pool, nn_server_t *srv, mcts_cache_t *cache, snap_t *s, double *busy_acc, double *ws_acc) {
    drain(pool);
    sp_pool_stats_t ps;
    sp_pool_stats(pool, &ps);
    nn_server_stats_t st;
    nn_server_stats(srv, &st);
    mcts_cache_stats_t cs = {0};
    if (cache) mcts_cache_stats(cache, &cs);
    double t = (double)compat_now_ns() * 1e-9;
    if (s->t > 0) {
        *busy_acc += st.busy_frac * (t - s->t) * st.workers;
        *ws_acc += (t - s->t) * st.workers;
    }
    s->searches = ps.searches, s->leaves = ps.leaves, s->games = g_games, s->rows = g_rows, s->plies = g_plies;
    s->evaluated = st.evaluated, s->batches = st.batches, s->lookups = (int64_t)cs.lookups, s->hits = (int64_t)cs.hits;
    s->busy_s = *busy_acc, s->worker_s = *ws_acc, s->t = t;
    s->cpu = (double)clock() / CLOCKS_PER_SEC;
}

int main(int argc, char **argv) {
    static sp_config_t cfg;
    static train_config_t tcfg; /* its flags are accepted (the configs hold them); net sizes the random net */
    sp_config_default(&cfg);
    tcfg = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    double seconds = 30, warmup = 5;
    cfg_opt_t opts[SP_CONFIG_NFLAGS + TRAIN_CONFIG_NFLAGS + 2];
    int n = sp_config_flags(&cfg, opts, SP_CONFIG_NFLAGS);
    n += train_config_flags(&tcfg, opts + n, TRAIN_CONFIG_NFLAGS);
    opts[n++] = (cfg_opt_t){"seconds", CFG_TYPE_DOUBLE, &seconds, 0.1, 1e6, "measured seconds"};
    opts[n++] = (cfg_opt_t){"warmup", CFG_TYPE_DOUBLE, &warmup, 0, 1e6, "seconds before measuring"};
    char err[1024];
    int rc = cfg_parse(opts, n, argc, argv, 1, NULL, 0, NULL,
                       "usage: bench_selfplay [--config FILE] [--net 4x32] [--seconds 30] [--warmup 5] [selfplay flags]",
                       stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK || train_config_check(&tcfg, err, sizeof err) != 0 ||
        sp_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "bench_selfplay: %s\n", err);
        return 2;
    }
    const char *net = tcfg.net;
    nn_net_config_t nc = {0, 0, (nn_act_t)nn_act_parse(tcfg.activation), ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    if (nn_net_size_parse(net, &nc.blocks, &nc.channels) != 0) {
        fprintf(stderr, "bench_selfplay: --net '%s' is not BLOCKSxCHANNELS\n", net);
        return 2;
    }
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *init = nn_net_new(be, &nc, 1, err, sizeof err);
    if (!init) {
        fprintf(stderr, "bench_selfplay: %s\n", err);
        return 1;
    }
    nn_server_config_t sc = sp_config_server(&cfg);
    nn_server_t *srv = nn_server_new(&sc, NULL, init, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "bench_selfplay: server: %s\n", err);
        return 1;
    }
    mcts_cache_t *cache = cfg.cache_mb > 0 ? mcts_cache_new(cfg.cache_mb << 20) : NULL;
    sp_pool_t *pool = sp_pool_new(&cfg, srv, cache, (uint64_t)cfg.seed + 12345, err, sizeof err);
    if (!pool || sp_pool_start(pool, err, sizeof err) != 0) {
        fprintf(stderr, "bench_selfplay: %s\n", err);
        return 1;
    }
    nn_server_stats_t sst;
    nn_server_stats(srv, &sst);
    printf("bench_selfplay: net %s %s on %s%s%s (%d CPUs), %lld threads x %lld games, %lld leaves/game, %s %lld/%lld "
           "visits "
           "(p=%.2f), max batch %lld, max ply %lld\n",
           net, nn_act_name(nc.act), nn_server_backend_name(srv), sst.precision ? " " : "",
           sst.precision ? sst.precision : "", compat_cpu_count(), (long long)sp_config_threads(&cfg),
           (long long)cfg.games_per_thread, (long long)cfg.leaves_per_game, cfg.search, (long long)cfg.visits,
           (long long)cfg.visits_fast, cfg.full_prob, (long long)cfg.max_batch, (long long)cfg.max_ply);
    fflush(stdout);
    snap_t a = {0}, b = {0};
    double busy = 0, ws = 0;
    snap(pool, srv, cache, &a, &busy, &ws);
    int64_t t_end = compat_now_ms() + (int64_t)(warmup * 1000);
    while (compat_now_ms() < t_end) {
        compat_sleep_ms(100);
        drain(pool);
    }
    snap(pool, srv, cache, &a, &busy, &ws);
    b = a;
    t_end = compat_now_ms() + (int64_t)(seconds * 1000);
    /* the running figures: one line in place on a terminal, a line every 5 s otherwise */
    status_t *st = status_new(stdout, compat_isatty(stdout) ? 1.0 : 5.0, false);
    while (compat_now_ms() < t_end) {
        compat_sleep_ms(100);
        drain(pool);
        if (status_due(st)) {
            snap(pool, srv, cache, &b, &busy, &ws);
            double dt = b.t - a.t;
            status_line(st, false, "  %5.0f s: %.1f positions/s, %.0f evals/s, batch %.1f, busy %.0f%%, %lld games", dt,
                        (double)(b.searches - a.searches) / dt, (double)(b.evaluated - a.evaluated) / dt,
                        b.batches > a.batches ? (double)(b.evaluated - a.evaluated) / (double)(b.batches - a.batches)
                                              : 0.0,
                        b.worker_s > a.worker_s ? 100.0 * (b.busy_s - a.busy_s) / (b.worker_s - a.worker_s) : 0.0,
                        (long long)(b.games - a.games));
        }
    }
    status_free(st);
    snap(pool, srv, cache, &b, &busy, &ws);
    sp_pool_free(pool);
    nn_server_free(srv);
    nn_net_free(init);
    nn_backend_free(be);
    mcts_cache_free(cache);
    double dt = b.t - a.t;
    int64_t pos = b.searches - a.searches, ev = b.evaluated - a.evaluated, games = b.games - a.games;
    double cpu = b.cpu - a.cpu;
    printf("positions/s %.1f | evals/s %.0f | avg batch %.1f | busy %.1f%% | cache hits %.1f%% | evals/position %.1f |"
           " games/s %.3f (%.0f plies/game) | CPU %.2f ms/position (%.2f cores)\n",
           (double)pos / dt, (double)ev / dt, b.batches > a.batches ? (double)ev / (double)(b.batches - a.batches) : 0.0,
           b.worker_s > a.worker_s ? 100.0 * (b.busy_s - a.busy_s) / (b.worker_s - a.worker_s) : 0.0,
           b.lookups > a.lookups ? 100.0 * (double)(b.hits - a.hits) / (double)(b.lookups - a.lookups) : 0.0,
           pos > 0 ? (double)ev / (double)pos : 0.0, (double)games / dt,
           games > 0 ? (double)(b.plies - a.plies) / (double)games : 0.0, pos > 0 ? 1000.0 * cpu / (double)pos : 0.0,
           cpu / dt);
    return 0;
}
