/* config.c - the trainer's options: rows, defaults, checks; see config.h. */
#include "train/config.h"
#include "compat/err.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nn/registry.h"

/* The trainer's options: one row each (config/config.h) and selfplay's
 * default where it is not train's. `train` trains from records (its
 * defaults); under `selfplay` the trainer shares a 2-core CPU with the
 * games: a small net, one BLAS thread (the inference server has the other
 * core), half a sample per new position, at most 200 steps a cycle, and a
 * peak learning rate of 0.06 (docs/LEARNING.md: +153 Elo over train's 0.02
 * at equal CPU time). A row without a default of its own (lr, momentum, ...)
 * keeps nn_train_config_default's. */
_Static_assert(sizeof(nn_sched_t) == sizeof(int) && NN_SCHED_CONSTANT == 0 && NN_SCHED_COSINE == 1 &&
                   NN_SCHED_STEP == 2,
               "lr-schedule is an ENUM row over constant|cosine|step");
_Static_assert(sizeof(int) == sizeof(int32_t), "nesterov is a BOOL row");

typedef struct {
    cfg_opt_t row;        /* its def: train's default */
    const char *selfplay; /* selfplay's, where it differs; NULL: train's */
} train_row_t;

static int flag_rows(train_config_t *c, cfg_opt_t *t) {
    nn_train_config_t *o = &c->opt;
    const train_row_t all[TRAIN_CONFIG_NFLAGS] = {
        {{"net", CFG_TYPE_STRING, c->net, 1, 0, "size BLOCKSxCHANNELS of a new run's first net; BxCgK: global pooling every K-th block; a suffix m adds the moves-left head, o the opponent-reply policy head (4x32mo, 6x64g2m)", "6x64", NULL, sizeof c->net}, "4x32"},
        {{"activation", CFG_TYPE_STRING, c->activation, 1, 0, "activation of a new net", "relu", "relu|silu",
          sizeof c->activation}},
        {{"train-backend", CFG_TYPE_STRING, c->backend, 1, 0, "trainer backend", "cpu", "cpu|cuda|auto",
          sizeof c->backend}},
        {{"train-threads", CFG_TYPE_I32, &c->threads, 0, 4096, "CPU trainer threads (0 = the cores the load average leaves free at start)", "0"}, "1"},
        {{"batch", CFG_TYPE_I32, &c->batch, 1, 65536, "training minibatch", "128"}, "64"},
        {{"window-min", CFG_TYPE_INT, &c->window_min, 1, 1e15, "training window: all positions up to this many, then it grows", "25000"}},
        {{"window-max", CFG_TYPE_INT, &c->window_max, 0, 1e15, "training window cap in positions (0 = none)", "500000"}},
        {{"window-alpha", CFG_TYPE_DOUBLE, &c->window_alpha, 1e-6, 1, "window growth exponent", "0.75"}},
        {{"window-beta", CFG_TYPE_DOUBLE, &c->window_beta, 0, 100, "window growth factor", "0.4"}},
        {{"samples-per-position", CFG_TYPE_DOUBLE, &c->samples_per_position, 0, 1e6, "samples trained per new position", "4"}, "0.5"},
        {{"min-steps-per-cycle", CFG_TYPE_INT, &c->min_steps_per_cycle, 0, 1e12, "training steps per cycle, at least", "10"}},
        {{"max-steps-per-cycle", CFG_TYPE_INT, &c->max_steps_per_cycle, 1, 1e12, "training steps per cycle, at most", "2000"}, "200"},
        {{"lr", CFG_TYPE_FLOAT, &o->lr, 0, 100, "peak learning rate"}, "0.06"},
        {{"momentum", CFG_TYPE_FLOAT, &o->momentum, 0, 0.9999, "SGD momentum"}},
        {{"nesterov", CFG_TYPE_BOOL, &o->nesterov, 1, 0, "Nesterov momentum"}},
        {{"weight-decay", CFG_TYPE_FLOAT, &o->weight_decay, 0, 1, "decoupled weight decay (conv/dense weights)"}},
        {{"clip-norm", CFG_TYPE_FLOAT, &o->clip_norm, 0, 1e9, "global gradient-norm clip (0 = off)"}},
        {{"warmup-steps", CFG_TYPE_INT, &o->warmup_steps, 0, 1e12, "linear lr warmup steps"}},
        {{"lr-schedule", CFG_TYPE_ENUM, &o->schedule, 1, 0, "lr schedule", NULL, "constant|cosine|step"}},
        {{"lr-total-steps", CFG_TYPE_INT, &o->total_steps, 1, 1e15, "cosine: steps until lr * lr-min-frac"}},
        {{"lr-min-frac", CFG_TYPE_FLOAT, &o->lr_min_frac, 0, 1, "cosine: final lr fraction"}},
        {{"lr-step-size", CFG_TYPE_INT, &o->step_size, 1, 1e15, "step schedule: steps per decay"}},
        {{"lr-step-gamma", CFG_TYPE_FLOAT, &o->step_gamma, 0, 1, "step schedule: decay factor"}},
        {{"w-policy", CFG_TYPE_FLOAT, &o->w_policy, 0, 1e6, "policy loss weight"}},
        {{"w-value", CFG_TYPE_FLOAT, &o->w_value, 0, 1e6, "value loss weight"}},
        {{"w-legal", CFG_TYPE_FLOAT, &o->w_legal, 0, 1e6, "legal-move loss weight"}},
        {{"w-moves-left", CFG_TYPE_FLOAT, &o->w_moves_left, 0, 1e6, "moves-left head's loss weight (Huber on plies / 20; a net with the m suffix)"}},
        {{"w-opp-policy", CFG_TYPE_FLOAT, &o->w_opp_policy, 0, 1e6, "opponent-reply policy loss weight (a net with the o suffix)"}},
        {{"q-mix", CFG_TYPE_FLOAT, &o->q_mix, 0, 1, "value target: share of the search value"}},
        {{"q-draw", CFG_TYPE_FLOAT, &o->q_draw, 0, 1, "draw share at q = 0 in the value target"}},
        {{"q-horizon", CFG_TYPE_DOUBLE, &c->q_horizon, 1, 1e6, "value target: the search value is the lambda-return (lambda = 1 - 1/H) of the next plies' search values and the game's result (1 = the position's own search value)", "1"}},
        {{"policy-target-temp", CFG_TYPE_DOUBLE, &c->policy_temp, 0.1, 10, "policy target temperature: each row's target distribution is raised to the power 1/T and renormalised (T > 1 softens it; 1 = the target as stored)", "1"}},
        {{"surprise-weight", CFG_TYPE_DOUBLE, &c->surprise_weight, 0, 1, "policy-surprise weighting (KataGo): rows are sampled with weight (1 - s) + s * surprise / mean surprise, rows without a surprise as the mean (0 = uniform sampling)", "0"}},
        {{"bn-momentum", CFG_TYPE_FLOAT, &o->bn_momentum, 0, 1, "batch-norm running statistics momentum"}},
        {{"train-seed", CFG_TYPE_U64, &c->seed, 0, 9.2e18, "trainer seed (init and sampling)", "1"}},
        {{"train-device", CFG_TYPE_I32, &c->device, 0, 64, "CUDA device of the trainer (train under mpirun: this + the rank's index on its node)", "0"}},
        {{"device-window", CFG_TYPE_STRING, c->device_window, 1, 0, "keep the training window in the trainer backend's memory, each shard uploaded once, batches gathered there (auto = on a GPU, one process)", "auto", "auto|on|off", sizeof c->device_window}},
        {{"device-window-mb", CFG_TYPE_INT, &c->device_window_mb, 0, 1e9, "cap of the resident window in MiB; a window over it is gathered on the host (0 = no cap)", "0"}},
    };
    for (int i = 0; i < TRAIN_CONFIG_NFLAGS; i++) {
        t[i] = all[i].row;
        if (c->program_ == TRAIN_PROGRAM_SELFPLAY && all[i].selfplay) t[i].def = all[i].selfplay;
        t[i].given = &c->given_[i];
    }
    return TRAIN_CONFIG_NFLAGS;
}

train_config_t train_config_default_for(train_program_t program) {
    train_config_t c;
    memset(&c, 0, sizeof c);
    c.program_ = program;
    c.opt = nn_train_config_default();
    cfg_opt_t t[TRAIN_CONFIG_NFLAGS];
    cfg_defaults(t, flag_rows(&c, t));
    return c;
}

train_config_t train_config_default(void) { return train_config_default_for(TRAIN_PROGRAM_TRAIN); }

int train_config_flags(train_config_t *cfg, cfg_opt_t *opts, int cap) {
    if (!cfg || !opts || cap <= 0) return 0;
    cfg_opt_t t[TRAIN_CONFIG_NFLAGS];
    int n = flag_rows(cfg, t);
    if (n > cap) n = cap;
    memcpy(opts, t, sizeof(cfg_opt_t) * (size_t)n);
    return n;
}

int train_config_flag_given(const train_config_t *c, const char *name) {
    train_config_t copy = *c; /* the rows' names and order; nothing is written */
    cfg_opt_t t[TRAIN_CONFIG_NFLAGS];
    int n = flag_rows(&copy, t);
    const cfg_opt_t *o = cfg_find(t, n, name);
    return o ? c->given_[o - t] : 0;
}

#define NN_STR_(x) #x
#define NN_STR(x) NN_STR_(x)

int train_config_check(const train_config_t *c, char *err, size_t errlen) {
    int32_t b, ch;
    if (nn_net_size_parse(c->net, &b, &ch) != 0) {
        long long nb = -1, nc = -1;
        char x, tail;
        if (sscanf(c->net, "%lld%c%lld%c", &nb, &x, &nc, &tail) == 3 && (x == 'x' || x == 'X') && nb >= 0 &&
            nc >= 0 && isdigit((unsigned char)c->net[0]))
            set_err(err, errlen, "net: '%s': %s", c->net,
                    nb < 1 || nb > NN_MAX_BLOCKS ? "blocks must be 1.." NN_STR(NN_MAX_BLOCKS)
                                                 : "channels must be 1.." NN_STR(NN_MAX_CHANNELS));
        else
            set_err(err, errlen, "net: '%s' is not BLOCKSxCHANNELS[gK][m][o] (e.g. 6x64, 6x64g2mo)", c->net);
        return -1;
    }
    if (nn_act_parse(c->activation) < 0) {
        set_err(err, errlen, "activation: '%s' is not relu or silu", c->activation);
        return -1;
    }
    char eb[128];
    if (nn_backend_resolve(c->backend, NULL, eb, sizeof eb) != 0) {
        set_err(err, errlen, "train-backend: %s", eb);
        return -1;
    }
    if (c->batch < 1 || c->batch > 65536) {
        set_err(err, errlen, "batch: %d is outside [1, 65536]", c->batch);
        return -1;
    }
    if (c->window_min < 1 || c->window_max < 0 || (c->window_max > 0 && c->window_max < c->window_min)) {
        set_err(err, errlen, "window: window-min %" PRId64 " must be >= 1 and <= window-max %" PRId64 " (0 = no cap)",
                c->window_min, c->window_max);
        return -1;
    }
    if (!(c->window_alpha > 0 && c->window_alpha <= 1) || !(c->window_beta >= 0)) {
        set_err(err, errlen, "window: alpha %g must be in (0, 1], beta %g >= 0", c->window_alpha, c->window_beta);
        return -1;
    }
    if (!(c->samples_per_position >= 0) || c->min_steps_per_cycle < 0 || c->max_steps_per_cycle < 1 ||
        c->min_steps_per_cycle > c->max_steps_per_cycle) {
        set_err(err, errlen, "steps per cycle: need 0 <= min-steps-per-cycle (%" PRId64 ") <= max-steps-per-cycle (%" PRId64
                ") and samples-per-position >= 0", c->min_steps_per_cycle, c->max_steps_per_cycle);
        return -1;
    }
    if (!(c->opt.lr >= 0) || !(c->opt.momentum >= 0 && c->opt.momentum < 1)) {
        set_err(err, errlen, "lr %g must be >= 0 and momentum %g in [0, 1)", c->opt.lr, c->opt.momentum);
        return -1;
    }
    return 0;
}
