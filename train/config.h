/* config.h - the trainer's options (train_config_t) and what every train/
 * file shares: the status codes and the log sink.
 *
 * Owns: train_config_t, its option rows (one per flag; config/config.h reads
 * them for the command line, INI files and --help) with two default columns,
 * `train`'s and `selfplay`'s (the trainer of a self-play run is tuned for a
 * small CPU: a smaller net, batch and step count, a higher learning rate),
 * and the checks of a configuration.
 * Does not own: parsing (config/config.c), the optimizer's own defaults
 * (nn_train_config_default: the rows for lr, momentum, ... take them unless a
 * column says otherwise), what the options mean (train/trainer.h, loop.h,
 * window.h), the flags of the programs themselves (selfplay/config.h,
 * train/main.c).
 */
#ifndef KOMA_TRAIN_CONFIG_H
#define KOMA_TRAIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "compat/runlog.h"
#include "config/config.h"
#include "dist/dist.h"
#include "nn/net.h"

/* Return codes of the train_ functions beyond 0 / -1. */
enum {
    TRAIN_OK = 0,
    TRAIN_ERROR = -1,
    TRAIN_TIMEOUT = 1, /* train_trainer_wait: the cycle is not done yet */
    TRAIN_STOPPED = 2, /* stop requested (Ctrl-C or train_trainer_stop): the cycle was not written */
};

/* Log sink: one line without a trailing newline (compat/runlog.h); NULL in
 * the config: stderr, after "train: ". */
typedef runlog_fn train_log_fn;

/* Sends a cycle's plan (train_plan_t, train/follow.h) to the other ranks of
 * a training group (train_config_t.plan): 0, or -1 with err. Called on the
 * trainer's thread before the cycle's first collective. */
struct train_plan;
typedef int (*train_plan_fn)(void *user, const struct train_plan *plan, char *err, size_t errlen);

/* Whose defaults: the program the trainer runs in. */
typedef enum { TRAIN_PROGRAM_TRAIN, TRAIN_PROGRAM_SELFPLAY } train_program_t;

#define TRAIN_CONFIG_NFLAGS 38 /* rows of train_config_flags */
#define TRAIN_PROGRESS_MS 10000 /* train_config_t.progress_ms's 0 */

typedef struct {
    char net[32];              /* BLOCKSxCHANNELS of a new run's first net */
    char activation[16];       /* "relu" | "silu" */
    char backend[16];          /* "cpu" | "cuda" | "auto" */
    int32_t threads;           /* CPU backend threads, 0 = all */
    int32_t batch;             /* minibatch (the global one in a training group) */
    int64_t window_min;        /* window of most recent positions: KataGo-style growing window */
    int64_t window_max;
    double window_alpha, window_beta; /* window = min(window_max, c*(1 + beta*((N/c)^alpha - 1)/alpha)), c = window_min, N = total positions */
    double samples_per_position; /* cap: samples trained per new position */
    int64_t max_steps_per_cycle;
    int64_t min_steps_per_cycle;
    nn_train_config_t opt;     /* lr, momentum, wd, clip, schedule, loss weights, q_mix */
    uint64_t seed;
    int32_t device;            /* CUDA device index */
    char device_window[8];     /* "auto" | "on" | "off": the window resident in the trainer's memory */
    int64_t device_window_mb;  /* cap of the resident window (0 = none) */
    double q_horizon;          /* the value target's search value: lambda-return over ~H plies (1 = the row's own) */
    double policy_temp;        /* policy target: each row's distribution ^ (1/T), renormalised (1 = as stored) */
    double surprise_weight;    /* s: rows sampled with weight (1 - s) + s * surprise / mean surprise (0 = uniform) */
    /* A new run's first net: "" = random (net, activation); else a run
     * directory or a net file whose net, optimizer state and counters the
     * run starts from (selfplay --init; train/lineage.h). No row here: the
     * program that offers it sets it. Ignored by a run that has a net. */
    char init[1024];
    train_log_fn log;          /* NULL: stderr, prefixed "train: " */
    void *log_user;
    int64_t progress_ms;       /* a progress line this often inside a cycle (0: TRAIN_PROGRESS_MS; < 0: every step) */
    /* A training group (selfplay --train-ranks K > 1): this trainer is rank 0
     * of group (dist_split), and every cycle's steps are taken data-parallel
     * with the group's other ranks, which follow the plan sent through plan
     * (train/follow.h). NULL: one process. The global batch must be a
     * multiple of the group's size. */
    dist_t *group;
    train_plan_fn plan;
    void *plan_user;
    train_program_t program_;         /* private: whose defaults the rows carry */
    int given_[TRAIN_CONFIG_NFLAGS];  /* private: which flags a file or the command line set */
} train_config_t;

/* `train`'s defaults: train_config_default_for(TRAIN_PROGRAM_TRAIN). */
train_config_t train_config_default(void);
/* The rows' defaults for program (`train --help` and `selfplay --help` list
 * them) and, where a row has none, nn_train_config_default()'s. */
train_config_t train_config_default_for(train_program_t program);

/* Adds the trainer's option rows (net, batch, lr, window-min, ...) to a
 * cfg_opt_t table owned by the caller: returns how many were written
 * (<= cap). The rows point into *cfg, so a parse sets its fields directly;
 * their `def` is the column of the program cfg's defaults came from. Check
 * the result with train_config_check. Flag names (avoid them in the table
 * they are added to):
 *   net activation train-backend train-threads batch window-min window-max
 *   window-alpha window-beta samples-per-position min-steps-per-cycle
 *   max-steps-per-cycle lr momentum nesterov weight-decay clip-norm
 *   warmup-steps lr-schedule lr-total-steps lr-min-frac lr-step-size
 *   lr-step-gamma w-policy w-value w-legal q-mix q-draw q-horizon policy-target-temp surprise-weight
 *   bn-momentum train-seed train-device device-window device-window-mb */
int train_config_flags(train_config_t *cfg, cfg_opt_t *opts, int cap);
/* 1 when a file or flag set the option `name` (through rows made by
 * train_config_flags on this cfg); 0 otherwise. */
int train_config_flag_given(const train_config_t *cfg, const char *name);
/* Checks a configuration: 0, or -1 with err. */
int train_config_check(const train_config_t *cfg, char *err, size_t errlen);

#endif
