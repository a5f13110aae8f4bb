/* config.c - selfplay flags, defaults and their translation; see config.h. */
#include "selfplay/config.h"
#include "nn/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "engine/encode.h"
#include "engine/rules.h"
#include "match/engine.h"

#define KOMA_STR_(x) #x
#define KOMA_STR(x) KOMA_STR_(x)

void sp_config_default(sp_config_t *c) {
    memset(c, 0, sizeof *c);
    mcts_params_t p; /* the moves-left rows' defaults are the search's */
    mcts_params_default(&p);
    c->ml_max_effect = p.ml_max_effect, c->ml_threshold = p.ml_threshold, c->ml_slope = p.ml_slope;
    cfg_opt_t t[SP_CONFIG_NFLAGS];
    cfg_defaults(t, sp_config_flags(c, t, SP_CONFIG_NFLAGS));
}

int sp_config_flags(sp_config_t *c, cfg_opt_t *opts, int cap) {
    const cfg_opt_t all[] = {
        {"run", CFG_TYPE_STRING, c->run, 1, 0, "run directory (koma.db, shards/, models/, log)", "runs/default", NULL, sizeof c->run},
        {"init", CFG_TYPE_PATH, c->init, 1, 0,
         "a new run starts from this run directory's newest net (or this net file) with its optimizer state and "
         "counters, and its lineage: every run before, their commits and CPU/GPU-minutes (\"\" = a random net; a "
         "run that has nets goes on from its own)", "", NULL, sizeof c->init},
        {"cycles", CFG_TYPE_INT, &c->cycles, 1, 1e9, "stop when this many nets are published in all (resumes count)", "10"},
        {"cpu-minutes", CFG_TYPE_DOUBLE, &c->cpu_minutes, 0, 1e9,
         "stop (as Ctrl-C does) once this invocation used this many CPU-minutes, all its threads; outside engines "
         "not counted; for comparisons at equal CPU time (0 = no limit)", "0"},
        {"games-per-cycle", CFG_TYPE_INT, &c->games_per_cycle, 1, 1e9, "games played per cycle (per published net)", "24"},
        {"shard-games", CFG_TYPE_INT, &c->shard_games, 0, 1e9, "games per shard file (0 = one shard per cycle)", "8"},
        {"sync-train", CFG_TYPE_BOOL, &c->sync_train, 1, 0, "wait for each new net before playing on", "0"},
        {"max-ahead", CFG_TYPE_INT, &c->max_ahead, 1, 1000, "cycles self-play may run ahead of the newest net", "1"},
        {"seed", CFG_TYPE_INT, &c->seed, 0, 9.2e18, "random seed (0 = new each invocation); mixed with the run row", "0"},
        {"progress", CFG_TYPE_DOUBLE, &c->progress_s, -1, 3600,
         "seconds between status lines (-1 = 1 on a terminal, where the line is updated in place, 30 otherwise; "
         "0 = none)", "-1"},
        {"quiet", CFG_TYPE_BOOL, &c->quiet, 1, 0, "no status lines, and only warnings and errors on the terminal (the "
                                                  "log file keeps everything)", "0"},
        {"report", CFG_TYPE_BOOL, &c->report, 1, 0, "rewrite RUN/report.html (tools/report) after each new net and evaluation, and when the run stops", "1"},
        {"verify-shards", CFG_TYPE_BOOL, &c->verify_shards, 1, 0, "hash every shard and model file at start-up (the newest model is always hashed)", "0"},
        {"threads", CFG_TYPE_INT, &c->threads, 0, 1024, "self-play worker threads (0 = two per CPU)", "0"},
        {"games-per-thread", CFG_TYPE_INT, &c->games_per_thread, 2, 65536, "games each worker plays at once", "8"},
        {"leaves-per-game", CFG_TYPE_INT, &c->leaves_per_game, 1, 256, "leaves one game adds to a batch per step", "4"},
        {"search", CFG_TYPE_STRING, c->search, 1, 0, "root search", "gumbel", "gumbel|puct", sizeof c->search},
        {"visits", CFG_TYPE_INT, &c->visits, 1, 1e7, "visits of a full search (policy target)", "128"},
        {"visits-fast", CFG_TYPE_INT, &c->visits_fast, 1, 1e7, "visits of a fast search (no policy target)", "16"},
        {"full-prob", CFG_TYPE_DOUBLE, &c->full_prob, 0, 1, "probability that a move gets a full search", "0.25"},
        {"gumbel-m", CFG_TYPE_INT, &c->gumbel_m, 1, 600, "Gumbel: root actions sampled", "16"},
        {"leaf-mate", CFG_TYPE_STRING, c->leaf_mate, 1, 0,
         "a leaf whose side to move mates in this many moves is a win without the net: 0, 1 or 3", "1", "0|1|3",
         sizeof c->leaf_mate},
        {"dfpn-nodes", CFG_TYPE_INT, &c->dfpn_nodes, 0, 1e7,
         "df-pn mate search nodes at each move's root, 0 = off; a proven mate is played without the MCTS", "0"},
        {"cpuct", CFG_TYPE_DOUBLE, &c->cpuct, 0, 100, "PUCT exploration constant c_init", "1.25"},
        {"fpu", CFG_TYPE_DOUBLE, &c->fpu, 0, 10, "PUCT first-play urgency reduction", "0.2"},
        {"noise-alpha-scale", CFG_TYPE_DOUBLE, &c->noise_alpha_scale, 0.001, 1e6,
         "PUCT: Dirichlet alpha = this / legal moves", "10"},
        {"noise-weight", CFG_TYPE_DOUBLE, &c->noise_weight, 0, 1, "PUCT: Dirichlet noise weight", "0.25"},
        {"tree-reuse", CFG_TYPE_BOOL, &c->tree_reuse, 1, 0, "keep the searched subtree of the played move", "1"},
        {"cache-mb", CFG_TYPE_INT, &c->cache_mb, 0, 1e6, "shared network-result cache in MiB (0 = none)", "64"},
        {"moves-left-max-effect", CFG_TYPE_DOUBLE, &c->ml_max_effect, 0, 1,
         "with a moves-left net (--net BxCm): the most lc0's moves-left utility, which prefers the shorter win and "
         "the longer loss, adds to a move's Q (0 = off)", NULL},
        {"moves-left-threshold", CFG_TYPE_DOUBLE, &c->ml_threshold, 0, 1,
         "the moves-left utility applies where |Q| is above this", NULL},
        {"moves-left-slope", CFG_TYPE_DOUBLE, &c->ml_slope, 0, 1, "moves-left utility per ply of difference", NULL},
        {"max-ply", CFG_TYPE_INT, &c->max_ply, 1, 2000, "moves after which a game is a draw", KOMA_STR(RULES_MAX_PLY_DEFAULT)},
        {"random-opening", CFG_TYPE_INT, &c->random_opening, 0, 100, "up to this many random first moves per game", "4"},
        {"temp-plies", CFG_TYPE_INT, &c->temp_plies, 0, 2000, "plies whose move is sampled with a temperature", "30"},
        {"temp-start", CFG_TYPE_DOUBLE, &c->temp_start, 0.01, 100, "move temperature at the first searched ply", "1"},
        {"temp-end", CFG_TYPE_DOUBLE, &c->temp_end, 0.01, 100, "move temperature reached at temp-plies (geometric decay)", "0.3"},
        {"resign-threshold", CFG_TYPE_DOUBLE, &c->resign_threshold, 0, 1,
         "resign when the search's win probability, (1 + W-L) / 2, stays below this; 0 = never (USI's ResignThreshold unit)",
         "0.05"},
        {"resign-consecutive", CFG_TYPE_INT, &c->resign_consecutive, 1, 1000, "... for this many own moves in a row", "2"},
        {"no-resign-fraction", CFG_TYPE_DOUBLE, &c->no_resign_fraction, 0, 1,
         "share of games that never resign (they measure false resignations)", "0.2"},
        {"backend", CFG_TYPE_STRING, c->backend, 1, 0, "inference backend", "cpu", "cpu|cuda|auto", sizeof c->backend},
        {"cpu-precision", CFG_TYPE_STRING, c->cpu_precision, 1, 0,
         "the CPU backend's inference convolutions: bf16 products on the Winograd route where the CPU has "
         "AVX512_BF16 (auto: bf16 there, fp32 elsewhere; KOMA_CPU_PRECISION in the environment decides auto); "
         "training stays fp32", "auto", NN_CPU_PREC_NAMES, sizeof c->cpu_precision},
        {"device", CFG_TYPE_INT, &c->device, 0, 64, "CUDA device of the inference server", "0"},
        {"streams", CFG_TYPE_INT, &c->streams, 0, 64, "inference device workers (0 = cpu: one per CPU thread of cpu-threads; cuda: 2)", "0"},
        {"max-batch", CFG_TYPE_INT, &c->max_batch, 1, 65536, "positions per inference batch", "256"},
        {"gather-us", CFG_TYPE_INT, &c->gather_us, -1, 1e7, "inference: wait at most this long for a fuller batch (-1 = cpu: 0, run what is queued at once; cuda: 1000)", "-1"},
        {"cpu-threads", CFG_TYPE_INT, &c->cpu_threads, 0, 4096, "CPU inference BLAS threads in all, split among the streams (0 = all CPUs)", "0"},
        {"net-fanout", CFG_TYPE_INT, &c->net_fanout, 0, 64,
         "mpirun: each published net goes down a tree of ranks, each passing it on to this many (0 = rank 0 sends "
         "it to every rank)", "8"},
        {"train-ranks", CFG_TYPE_INT, &c->train_ranks, 1, 4096,
         "mpirun: ranks 0..K-1 train each cycle's net together, data-parallel (the global --batch split among "
         "them); ranks 1..K-1 do not play and read the run directory, which they must see (a shared file system)",
         "1"},
        {"eval-every", CFG_TYPE_INT, &c->eval_every, 0, 1e6,
         "every K cycles the new net plays the one K cycles older (0 = no evaluation)", "1"},
        {"eval-games", CFG_TYPE_INT, &c->eval_games, 1, 100000,
         "games of a new net's evaluation in all, shared by its --gauntlet opponents (colours alternate)", "8"},
        {"gauntlet", CFG_TYPE_INT, &c->gauntlet, 1, 4,
         "opponents of a new net: the previous evaluated net, then cycle 0, the net halfway, a quarter of the way", "2"},
        {"eval-visits", CFG_TYPE_INT, &c->eval_visits, 1, 1e7, "playouts per move in an evaluation match", "32"},
#define SP_ENGINE_ROW(k, help) \
    {"gauntlet-engine" #k, CFG_TYPE_STRING, c->gauntlet_engine[k - 1], 1, 0, help, "", NULL, sizeof c->gauntlet_engine[k - 1]}
        SP_ENGINE_ROW(1, "an outside USI engine every evaluated net also plays (sharing --eval-games), a fixed anchor "
                         "of the rating list: 'LABEL | COMMAND | byoyomi MS or nodes N or depth N | NAME=VALUE ...' "
                         "(NAME=VALUE: setoption; docs/LEARNING.md), e.g. 'gpsusi | /usr/games/gpsusi | byoyomi 100' "
                         "('' = none)"),
        SP_ENGINE_ROW(2, "another outside engine, as gauntlet-engine1"),
        SP_ENGINE_ROW(3, "another outside engine, as gauntlet-engine1"),
        SP_ENGINE_ROW(4, "another outside engine, as gauntlet-engine1"),
#undef SP_ENGINE_ROW
    };
    int n = (int)(sizeof all / sizeof all[0]);
    if (n > cap) n = cap;
    memcpy(opts, all, sizeof(cfg_opt_t) * (size_t)n);
    return n;
}

int sp_config_check(const sp_config_t *c, char *err, size_t errlen) {
    if (strcmp(c->search, "gumbel") && strcmp(c->search, "puct")) {
        set_err(err, errlen, "search: '%s' is not gumbel or puct", c->search);
        return -1;
    }
    char eb[600];
    if (nn_backend_resolve(c->backend, NULL, eb, sizeof eb) != 0) {
        set_err(err, errlen, "backend: %s", eb);
        return -1;
    }
    if (!c->run[0]) {
        set_err(err, errlen, "run: an empty run directory");
        return -1;
    }
    char labels[SP_ENGINES_MAX][MATCH_ENGINE_NAME_MAX];
    for (int k = 0; k < SP_ENGINES_MAX; k++) {
        labels[k][0] = 0;
        if (!c->gauntlet_engine[k][0]) continue;
        match_engine_player_t *ep = malloc(sizeof *ep);
        if (!ep) {
            set_err(err, errlen, "gauntlet-engine%d: out of memory", k + 1);
            return -1;
        }
        int bad = match_engine_player_parse(c->gauntlet_engine[k], ep, eb, sizeof eb);
        if (!bad) snprintf(labels[k], sizeof labels[k], "%s", ep->label);
        free(ep);
        if (bad) {
            set_err(err, errlen, "gauntlet-engine%d: %s", k + 1, eb);
            return -1;
        }
        for (int j = 0; j < k; j++)
            if (strcmp(labels[j], labels[k]) == 0) {
                set_err(err, errlen,
                        "gauntlet-engine%d: the label '%s' is gauntlet-engine%d's too (labels name "
                        "players in the rating list: give each engine its own)",
                        k + 1, labels[k], j + 1);
                return -1;
            }
    }
    if (c->games_per_thread < 2) {
        set_err(err, errlen, "games-per-thread: %lld, need 2 at least (two halves)", (long long)c->games_per_thread);
        return -1;
    }
    int64_t mem = sp_machine_memory();
    char why[160] = "";
    int64_t lim = compat_address_space_limit();
    if (lim > 0 && (mem <= 0 || lim < mem)) {
        mem = lim;
        snprintf(why, sizeof why, "the address-space limit (ulimit -v)");
    }
    if (mem > 0) {
        if (!why[0]) snprintf(why, sizeof why, "this machine's memory");
        return sp_config_check_memory(c, mem, why, err, errlen);
    }
    return 0;
}

int64_t sp_config_games_per_thread(const sp_config_t *c) {
    int64_t g = c->games_per_thread, cycle = c->games_per_cycle > 2 ? c->games_per_cycle : 2;
    return g < cycle ? g : cycle;
}

int64_t sp_config_slot_bytes(const sp_config_t *c) {
    mcts_params_t p;
    sp_config_mcts(c, 1, &p);
    /* mcts_tree_new's one block (mcts/mcts.h: 48-byte nodes + a 4-byte
     * forwarding index, 12-byte edges, the edge pool clamped as there), the
     * tree's Position (about 115 KiB), and the slot's leaves in its half's
     * batch (labels and logits for every legal move, packed planes). */
    int64_t edges = p.edge_limit < MCTS_MOVES_MAX ? MCTS_MOVES_MAX : p.edge_limit;
    if (edges > (int64_t)UINT32_MAX - MCTS_MOVES_MAX) edges = (int64_t)UINT32_MAX - MCTS_MOVES_MAX;
    int64_t tree = (int64_t)p.node_limit * (48 + 4) + edges * 12 + (115 << 10);
    int64_t leaves = c->leaves_per_game * ((int64_t)MCTS_MOVES_MAX * 6 + ENC_PACKED_BYTES + 64);
    return tree + leaves;
}

static const char *bytes_text(double b, char *buf, size_t n) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024.0 && u < 5) b /= 1024.0, u++;
    snprintf(buf, n, u == 0 ? "%.0f %s" : "%.1f %s", b, unit[u]);
    return buf;
}

int sp_config_check_memory(const sp_config_t *c, int64_t mem_bytes, const char *what, char *err, size_t errlen) {
    int64_t threads = sp_config_threads(c), gpt = sp_config_games_per_thread(c), slot = sp_config_slot_bytes(c);
    double total = (double)threads * (double)gpt * (double)slot;
    if (total <= (double)mem_bytes) return 0;
    char a[32], b[32], m[32];
    int fast = c->visits_fast > c->visits;
    set_err(err, errlen,
            "--%s %lld with %lld games at once (--threads %lld x --games-per-thread %lld): their search trees "
            "could take %s (%s per game), more than the %s of %s; lower --%s, --threads or --games-per-thread",
            fast ? "visits-fast" : "visits", (long long)(fast ? c->visits_fast : c->visits), (long long)(threads * gpt),
            (long long)threads, (long long)gpt, bytes_text(total, a, sizeof a), bytes_text((double)slot, b, sizeof b),
            bytes_text((double)mem_bytes, m, sizeof m), what, fast ? "visits-fast" : "visits");
    return -1;
}

/* Physical memory in bytes (compat_memory_total), or -1 where unknown: then
 * only an address-space limit bounds the check. */
int64_t sp_machine_memory(void) {
    int64_t mem = compat_memory_total();
    return mem > 0 ? mem : -1;
}

void sp_config_mcts(const sp_config_t *c, uint64_t seed, mcts_params_t *p) {
    mcts_params_default(p);
    p->root_mode = strcmp(c->search, "puct") == 0 ? MCTS_ROOT_PUCT : MCTS_ROOT_GUMBEL;
    p->c_init = (float)c->cpuct;
    p->fpu_reduction = (float)c->fpu;
    p->noise = true;
    p->noise_alpha_scale = (float)c->noise_alpha_scale;
    p->noise_weight = (float)c->noise_weight;
    p->move_temp_plies = 0; /* selfplay samples with its own decaying temperature */
    p->gumbel_m = (int32_t)c->gumbel_m;
    p->visits_full = (int32_t)c->visits;
    p->visits_fast = (int32_t)c->visits_fast;
    p->full_prob = (float)c->full_prob;
    p->leaf_mate = atoi(c->leaf_mate);
    p->max_ply = (int32_t)c->max_ply;
    p->encode_leaves = true;
    p->single_move_stop = true;
    p->ml_max_effect = (float)c->ml_max_effect; /* used only with a moves-left net */
    p->ml_threshold = (float)c->ml_threshold;
    p->ml_slope = (float)c->ml_slope;
    /* A search adds at most one node per playout; a reused subtree holds at
     * most the previous search's. Edges: up to ~600 per node in drop-rich
     * endgames, ~80 on average; 128 per node leaves room. */
    int64_t v = c->visits > c->visits_fast ? c->visits : c->visits_fast;
    int64_t nodes = 2 * v + 4 * c->leaves_per_game + 64;
    if (nodes > 1 << 24) nodes = 1 << 24;
    p->node_limit = (int32_t)nodes;
    p->edge_limit = nodes * 128 > 4096 ? nodes * 128 : 4096;
    p->search_batch = (int32_t)c->leaves_per_game;
    p->seed = seed ? seed : 1;
}

/* Two per CPU: each thread keeps two submissions in flight, and with one
 * thread per CPU the CPU inference workers ran dry while every search thread
 * waited for its results (1.87 of 2 cores busy; two per CPU: 1.97, and 8-12%
 * more positions/s at the same 32 games per CPU: docs/BENCHMARKS.md). */
int64_t sp_config_threads(const sp_config_t *c) { return c->threads > 0 ? c->threads : 2 * compat_cpu_count(); }

nn_server_config_t sp_config_server(const sp_config_t *c) {
    nn_server_config_t s = nn_server_config_default();
    s.backend = c->backend;
    s.device = (int32_t)c->device;
    s.streams = (int32_t)c->streams;
    s.cpu_threads = (int32_t)c->cpu_threads;
    /* CPU: one single-thread worker per BLAS thread keeps every core busy (the
     * workers split the queued rows); several BLAS threads per worker idle
     * while the worker packs, unpacks and waits for rows. */
    if (s.streams == 0 && !strcmp(c->backend, "cpu"))
        s.streams = s.cpu_threads > 0 ? s.cpu_threads : compat_cpu_count();
    s.max_batch = (int32_t)c->max_batch;
    s.gather_us = (int32_t)c->gather_us; /* -1: the server's choice for its backend */
    s.expect_features_version = ENC_FEATURES_VERSION;
    nn_cpu_prec_t prec = NN_CPU_PREC_AUTO;
    nn_cpu_prec_parse(c->cpu_precision, &prec); /* the row's choices: one of the three */
    s.cpu_precision = prec;
    /* Every worker keeps two submissions of up to half its games' leaves in
     * flight: the queue must hold them all, or submitters block on each other. */
    int64_t half = (c->games_per_thread + 1) / 2 * c->leaves_per_game;
    int64_t q = 2 * sp_config_threads(c) * half + c->max_batch;
    if (q < 8 * c->max_batch) q = 8 * c->max_batch;
    if (q > INT32_MAX / 2) q = INT32_MAX / 2;
    s.queue_positions = (int32_t)q;
    return s;
}
