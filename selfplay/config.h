/* config.h - the flags of `selfplay` and what they turn into.
 *
 * Owns: sp_config_t (every self-play, search, inference-server and driver
 * flag with its default), the flag table for config/config.h, the checks of a
 * configuration, and its translation into mcts_params_t and nn_server_config_t.
 * Does not own: the trainer's flags (train/config.h adds its own to the same
 * table), parsing (config/config.c).
 *
 * Each flag's default is written once, in its row (sp_config_flags); they
 * are the laptop-CPU set. configs/gpu.ini overrides them for a GPU machine;
 * configs/cpu.ini sets nothing (test_selfplay_config refuses a file key that
 * restates a default).
 */
#ifndef KOMA_SELFPLAY_CONFIG_H
#define KOMA_SELFPLAY_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "mcts/mcts.h"
#include "nn/server.h"

enum { SP_ENGINES_MAX = 4 }; /* --gauntlet-engine1 .. --gauntlet-engine4 */

/* Fields bound to flags have the types cfg_opt_t wants (int64_t, double,
 * int for booleans, char[CFG_STRING_MAX]). */
typedef struct {
    /* run */
    char run[CFG_STRING_MAX];      /* run directory */
    char init[CFG_STRING_MAX];     /* a new run's first net: another run's newest or a net file ("" = random) */
    int64_t cycles;                /* published nets in total, counting resumed ones */
    double cpu_minutes;            /* stop once this process used this much CPU time; 0 = no limit */
    int64_t games_per_cycle;       /* games a cycle plays before its net is trained */
    int64_t shard_games;           /* games per shard; 0: one shard per cycle */
    int sync_train;                /* 1: wait for each net before playing on (0: overlap) */
    int64_t max_ahead;             /* cycles self-play may run ahead of the newest net */
    int64_t seed;                  /* 0: a new seed per invocation; else mixed with the run row id */
    double progress_s;             /* status line period in seconds; 0 = none; -1 = 1 on a terminal, else 30 */
    int quiet;                     /* no status lines; only warnings and errors on stderr */
    int verify_shards;             /* hash every shard at start-up (0: sizes only) */
    int report;                    /* keep RUN/report.html current (selfplay/live_report.h) */
    /* workers */
    int64_t threads;               /* self-play worker threads (0: two per CPU) */
    int64_t games_per_thread;      /* games each worker drives at once */
    int64_t leaves_per_game;       /* leaves one game adds to a batch per step */
    /* search */
    char search[CFG_STRING_MAX];   /* "gumbel" | "puct" */
    int64_t visits;                /* visits of a full search */
    int64_t visits_fast;           /* visits of a fast search */
    double full_prob;              /* probability of a full search */
    int64_t gumbel_m;              /* Gumbel sampled root actions */
    char leaf_mate[CFG_STRING_MAX]; /* "0" | "1" | "3": mate search at leaves, in plies (mcts_params_t.leaf_mate) */
    int64_t dfpn_nodes;            /* df-pn nodes at each move's root (0 = off); a proven mate is played */
    double cpuct;                  /* PUCT c_init */
    double fpu;                    /* PUCT first-play urgency reduction */
    double noise_alpha_scale;      /* PUCT Dirichlet alpha = this / legal moves */
    double noise_weight;           /* PUCT Dirichlet weight */
    int tree_reuse;                /* keep the played subtree between moves */
    int64_t cache_mb;              /* shared NN cache, MiB (0 = none) */
    double ml_max_effect;          /* moves-left utility (lc0's MovesLeft*; mcts/mcts.h): its cap, 0 = off */
    double ml_threshold;           /* ... applies where |Q| is above this */
    double ml_slope;               /* ... per ply of difference */
    /* game */
    int64_t max_ply;               /* moves before a game is a draw */
    int64_t random_opening;        /* up to this many uniformly random first moves */
    int64_t temp_plies;            /* plies sampled with a temperature */
    double temp_start, temp_end;   /* temperature at ply 0 and at temp_plies, geometric decay */
    double resign_threshold;       /* resign when the win probability stays below this (0: never) */
    int64_t resign_consecutive;    /* ... for this many of the side's searches in a row */
    double no_resign_fraction;     /* games that never resign, which measure false resignations */
    /* inference server */
    char backend[CFG_STRING_MAX];  /* "cpu" | "cuda" | "auto" */
    char cpu_precision[8];         /* "auto" | "fp32" | "bf16": the CPU backend's inference convolutions */
    int64_t device;                /* CUDA device */
    int64_t streams;               /* device workers (0: the backend's default) */
    int64_t max_batch;             /* positions per device batch */
    int64_t gather_us;             /* wait for a fuller batch at most this long (-1: cpu 0, cuda 1000) */
    int64_t net_fanout;            /* ranks each rank passes a net on to (tree); 0: rank 0 sends to all */
    int64_t train_ranks;           /* mpirun: ranks 0..K-1 train together; 1..K-1 do not play */
    int64_t cpu_threads;           /* CPU backend BLAS threads in all, split among the workers (0: all CPUs) */
    /* in-loop evaluation (match/play.h) */
    int64_t eval_every;            /* model c plays model c-K when c % K == 0; 0 = never */
    int64_t eval_games;            /* games of one evaluation in all, shared by its opponents */
    int64_t gauntlet;              /* opponents per evaluation: previous, cycle 0, halfway, a quarter */
    int64_t eval_visits;           /* playouts per move in it, both sides */
    /* outside USI engines in every gauntlet, fixed anchors of the rating list:
     * "LABEL | COMMAND | budget | NAME=VALUE ..." (match/engine.h); "" = none */
    char gauntlet_engine[SP_ENGINES_MAX][1024];
} sp_config_t;

/* Every field to its row's default. */
void sp_config_default(sp_config_t *c);

/* Writes the self-play flags into opts (cap entries at least SP_CONFIG_NFLAGS);
 * returns how many. The table points into *c. */
#define SP_CONFIG_NFLAGS 61
int sp_config_flags(sp_config_t *c, cfg_opt_t *opts, int cap);

/* Checks combinations the per-flag ranges cannot (and that every
 * gauntlet-engineK parses, with labels that differ, and that the game slots'
 * search trees fit in memory: sp_config_check_memory): 0, or -1 with err
 * naming the flag. Whether the engine's program runs is found out when it
 * is first played (a warning, and the run goes on without it). */
int sp_config_check(const sp_config_t *c, char *err, size_t errlen);

/* --games-per-thread capped by --games-per-cycle (at least 2): a run's
 * thread never starts more games than a cycle plays (65536 slots for a
 * 2-game cycle held 65536 trees). `selfplay` (sp_main) sets games_per_thread
 * to it and says so; the pool and the server take games_per_thread as
 * given (bench_selfplay and genconfig measure any). The memory check counts
 * the capped games. */
int64_t sp_config_games_per_thread(const sp_config_t *c);
/* The most memory one game slot can take: its search tree's block at its
 * node and edge limits (from --visits / --visits-fast and
 * --leaves-per-game), its Position, its leaves in a batch. */
int64_t sp_config_slot_bytes(const sp_config_t *c);
/* 0 when every slot (threads x games per thread) fits in mem_bytes, else
 * -1 with err naming the flags, the bytes they would take and what (e.g.
 * "this machine's memory"). sp_config_check calls it with the machine's
 * memory or the address-space limit, whichever is smaller. */
int sp_config_check_memory(const sp_config_t *c, int64_t mem_bytes, const char *what, char *err, size_t errlen);
/* Physical memory in bytes (compat_memory_total), or -1 where unknown. */
int64_t sp_machine_memory(void);

/* Search parameters of one game slot (seed picks its random stream). */
void sp_config_mcts(const sp_config_t *c, uint64_t seed, mcts_params_t *p);
/* Inference server configuration. */
/* Self-play worker threads: --threads, or two per CPU when 0. */
int64_t sp_config_threads(const sp_config_t *c);
nn_server_config_t sp_config_server(const sp_config_t *c);

#endif
