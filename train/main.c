/* main.c - `train --from-games`: trains offline from the games stored in a run
 * (self-play shards or imported records) without playing.
 *
 * Owns: the command line, what it does after each step (offline_step: the
 * progress line, --losses, the resumable checkpoint
 * <run>/train/checkpoint.safetensors with weights + optimizer state + step
 * count in one durable file, the weights compared across ranks; the loop
 * calls it one step late, except at the steps offline_barrier names, whose
 * hook needs the net as it is after them) and where the final model goes.
 * Does not own: the step loop, the net's creation and loading
 * (train/loop.c: the same loop the trainer thread of a self-play run runs),
 * the window and sampling (train/window.c), saving and registering a model
 * (train/model.c), the trainer of a self-play run (train/trainer.c).
 *
 * Reading order: train_main parses the flags, then offline_open (the run),
 * offline_net (checkpoint or new net), offline_window (window, batch,
 * data-parallel step), offline_train (train_loop_run with offline_step),
 * offline_finish (checkpoint, summary, --out or the next cycle), offline_close.
 *
 * Resuming: the checkpoint is written every --checkpoint-every steps, at the
 * end and on Ctrl-C. Run the same command again and it continues from the
 * checkpoint's step to --steps in all; step s always samples with the key
 * (seed, -1, s), so an interrupted and resumed run gives the same weights as
 * an uninterrupted one (the window must not change in between: do not run
 * this while selfplay adds shards to the same run). A finished checkpoint
 * stays: the same command again only checks that its model is registered; a
 * larger --steps trains on; --fresh starts over. The cosine schedule's
 * length is --steps unless --lr-total-steps is given.
 *
 * The start: the checkpoint when there is one (unless --fresh); else the
 * run's newest net, its weights with a new optimizer (start_net); a new net
 * only for a run without one, with --fresh (the newest net's size), or with
 * a --net/--activation that differs from it (printed as a new architecture).
 * A failed command writes nothing: the runs row, train/ and cycle 0 come in
 * offline_commit, once the backend, the net and the positions are there.
 *
 * Output: the final net (with optimizer state) goes to --out PATH, or by
 * default to the run's next cycle, models/<cycle>.safetensors, registered in
 * koma.db (file first, then the row). A run with no model at all first gets
 * the untrained net as cycle 0, as a self-play run starts (the anchor of its
 * rating list: the trained net, cycle 1, is then rated against it), so
 * `selfplay --run DIR` afterwards continues from cycle 1 with cycle 2. Offline steps are not written to the
 * train_steps table (their step numbers would collide with the run's).
 *
 * More than one process (`mpirun -np N train --from-games ...`, dist/): the
 * ranks train one net data-parallel (train/dist_train.h). Rank 0 alone owns
 * the run (writer lock, checkpoint, final model, output); the other ranks
 * open it read-only after rank 0 has taken the lock. --batch is the global
 * batch: each rank trains on its B/N rows of the batch every rank samples,
 * gradients and BN running statistics are averaged, the same SGD step is
 * taken everywhere and the weights' hashes are compared every
 * --dist-check-every steps, before every checkpoint and at the end. Every
 * rank makes the same collective calls in the same order whatever fails
 * (gate(), train_dist_step), so a failure on one rank ends every rank with
 * a message instead of leaving them waiting. One process (no launcher) runs
 * exactly the single-process path.
 */
#include "compat/version.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "compat/status.h"
#include "nn/backend.h"
#include "nn/registry.h"
#include "config/config.h"
#include "data/db.h"
#include "data/run.h"
#include "data/shard.h"
#include "data/writer.h"
#include "dist/dist.h"
#include "engine/encode.h"
#include "nn/weights.h"
#include "train/dist_train.h"
#include "train/loop.h"
#include "train/model.h"
#include "train/trainer.h"
#include "train/window.h"

#ifndef KOMA_VERSION_STRING
#define KOMA_VERSION_STRING "0.0.0"
#endif

#define MAX_OPTS 64
#define EXIT_STOPPED 130

static const char *usage =
    "usage: train --from-games [--run DIR] [--window N] [--steps N] [--batch N] [--lr X] [--net 6x64]\n"
    "             [--config FILE] [--out PATH] [--checkpoint-every K] [--fresh] [trainer flags]\n"
    "Trains a net offline on the most recent --window positions of the run's shards.\n"
    "It starts from the run's newest net (its size; a new optimizer); --net of another\n"
    "size starts a new architecture instead (it says so); a run with no net yet gets a\n"
    "new --net net. Its trainer defaults are for training from records (--batch 128\n"
    "--lr 0.02 --net 6x64); selfplay's trainer defaults are --batch 64 --lr 0.06\n"
    "--net 4x32, tuned for the self-play loop on a small CPU (docs/LEARNING.md): to go on\n"
    "as a self-play run trained, pass those. Nothing is written before every check passes.\n"
    "It is the run's one writer while it runs (selfplay or import on the same run is\n"
    "refused meanwhile, and it is refused while they run). Exit status: 0 done,\n"
    "1 error, 2 bad flags, 130 stopped (the checkpoint is kept: the same command resumes).\n"
    "Under mpirun (-np N) the N ranks train one net; --batch is the global batch (docs/SCALING.md).";

/* The command's own options, one row each (config/config.h; the trainer's
 * are train/config.h's rows): offline_flags. */
typedef struct {
    int from_games, fresh, quiet;
    char run[CFG_STRING_MAX], out[CFG_STRING_MAX], losses[CFG_STRING_MAX];
    int64_t window, steps, ckpt_every, die_at, micro, diverge_at, check_every;
    double progress, epochs;
    int verify, steps_given;
} offline_flags_t;

static int offline_flags(offline_flags_t *f, cfg_opt_t *opts) {
    const cfg_opt_t all[] = {
        {"from-games", CFG_TYPE_BOOL, &f->from_games, 1, 0, "train offline from the run's stored games", "0"},
        {"run", CFG_TYPE_STRING, f->run, 1, 0, "run directory (koma.db, shards/, models/)", "runs/default"},
        {"window", CFG_TYPE_INT, &f->window, 0, 1e15, "train on the most recent N positions (0 = all)", "0"},
        {"steps", CFG_TYPE_INT, &f->steps, 1, 1e15, "training steps in all (a resumed run ends here too)", "1000", NULL, 0, &f->steps_given},
        {"epochs", CFG_TYPE_DOUBLE, &f->epochs, 0, 1e6, "train E passes over the window, each position once per pass in a new shuffled order; the steps are E x positions / batch (instead of --steps); 0 = draw rows with replacement for --steps", "0"},
        {"verify-shards", CFG_TYPE_BOOL, &f->verify, 1, 0, "open, hash and check every shard before the first step (by default each shard is verified when a batch first reads it)", "0"},
        {"out", CFG_TYPE_STRING, f->out, 1, 0, "write the final net here instead of registering the next cycle's model (never a run's file or a device)", ""},
        {"checkpoint-every", CFG_TYPE_INT, &f->ckpt_every, 1, 1e15, "write <run>/train/checkpoint.safetensors every K steps", "100"},
        {"fresh", CFG_TYPE_BOOL, &f->fresh, 1, 0, "ignore an existing checkpoint; start from a new net (the size of the run's newest net unless --net)", "0"},
        {"die-at-step", CFG_TYPE_INT, &f->die_at, 0, 1e15, "tests: exit abruptly (like kill -9) after this step (0 = never)", "0"},
        {"progress", CFG_TYPE_DOUBLE, &f->progress, -1, 3600, "seconds between status lines (-1 = 1 on a terminal, updated in place, 30 otherwise; 0 = none)", "-1"},
        {"quiet", CFG_TYPE_BOOL, &f->quiet, 1, 0, "no status lines; only warnings and errors", "0"},
        {"losses", CFG_TYPE_STRING, f->losses, 1, 0, "write every step's losses to this CSV file (step,loss,policy,value,legal,acc,f1)", ""},
        {"micro-batches", CFG_TYPE_INT, &f->micro, 1, 4096, "split each batch into M slices, each with its own BN statistics, and average their gradients (what M ranks under mpirun compute; less memory)", "1"},
        {"dist-diverge-at-step", CFG_TYPE_INT, &f->diverge_at, 0, 1e15, "tests: the last rank changes one weight after this step (0 = never)", "0"},
        {"dist-check-every", CFG_TYPE_INT, &f->check_every, 1, 1e15, "under mpirun: compare the weights' XXH3 across ranks every K steps", "10"},
    };
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(opts, all, sizeof all);
    return n;
}

#define TRAIN_GATES 2   /* 1: rank 0 holds the run; 2: every rank is ready to train */

static void fmt_eta(double s, char *buf, size_t len) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, len, "?");
        return;
    }
    int64_t t = (int64_t)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%" PRId64 "h%02" PRId64 "m", t / 3600, (t / 60) % 60);
    else snprintf(buf, len, "%" PRId64 "m%02" PRId64 "s", t / 60, t % 60);
}

typedef struct {
    const char *sql_config;
} run_row_arg_t;

static int run_row_job(db_t *db, void *arg, char *err, size_t errlen) {
    run_row_arg_t *a = arg;
    int64_t id;
    db_status_t st = db_run_insert(db, KOMA_VERSION_STRING, "train", a->sql_config, &id);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void note_stale(void *user, const char *path) {
    (void)user;
    printf("removed %s, left by a write that was killed before its rename\n", path);
}

/* --out and --losses: not a run's file nor a device (run_output_check), in a
 * directory that takes a file, checked before any step is spent. */
static int check_out(const char *run, const char *out, const char *what, const char *flag, char *err, size_t errlen) {
    if (run_output_check(out, run, what, flag, err, errlen) != 0) return -1;
    char dir[CFG_STRING_MAX], e[1024];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (run_check_writable(dir, e, sizeof e) != 0) {
        set_err(err, errlen, "%s %s: %s", flag, out, e);
        return -1;
    }
    return 0;
}

/* One offline run: what train_main opens, trains and closes. */
typedef struct {
    offline_flags_t f;          /* the command's options */
    dist_t *dist;               /* the job: rank 0 of 1 without a launcher */
    int32_t rank;               /* this process's rank */
    int gates;                  /* pre-loop agreements made (TRAIN_GATES in all, on every path) */
    train_config_t *cfg;
    int net_given;              /* --net or --activation: the checkpoint must be that net */
    int32_t ranks, slices;      /* ranks x --micro-batches */
    run_t *rn;
    const char *run;
    const char *config_text;    /* the flags, for the runs row */
    db_t *db;                   /* read-only */
    db_writer_t *writer;        /* rank 0: the run's one writer */
    nn_backend_t *be;
    train_net_t tn;
    int resumed;                /* tn is the checkpoint's */
    char ckpt[1400];
    db_shard_t *list;
    int32_t nlist, bad;
    train_window_t *win;
    int total_given;            /* --lr-total-steps given (else the schedule's length is the steps) */
    shard_batch_t *batch;
    int64_t positions, all;
    train_dist_t *td;           /* NULL: one process, one slice */
    compat_durable_t *lf;       /* --losses: written to a temporary name, renamed at the end */
    status_t *sl;               /* the status line of the step loop */
    /* the step loop's figures */
    train_sums_t tick, tail;    /* since the last status line; of the last 100 steps */
    int64_t t_start, saved_at;  /* the loop's start; the checkpoint's step */
} offline_t;

/* 0 when every rank passes ok != 0 (a job of one: ok itself). */
static int agree(offline_t *o, int ok) {
    char err[512];
    int all = 0;
    if (dist_agree(o->dist, ok, &all, err, sizeof err) != 0) {
        fprintf(stderr, "train: rank %d: %s\n", o->rank, err);
        return -1;
    }
    if (ok && !all) fprintf(stderr, "train: rank %d: another rank failed (its message is above)\n", o->rank);
    return all ? 0 : -1;
}

/* One of the TRAIN_GATES pre-loop agreements. */
static int gate(offline_t *o, int ok) {
    o->gates++;
    return agree(o, ok);
}

/* The steps of train_main, in order (below it). */
static int offline_open(offline_t *o, const char *config_text);
static int offline_net(offline_t *o);
static int offline_window(offline_t *o);
static int offline_train(offline_t *o);
static int offline_finish(offline_t *o, int stopped);
static void offline_close(offline_t *o);

static void status_end(offline_t *o) {
    status_free(o->sl); /* the last status stays on the screen as a line */
    o->sl = NULL;
}

/* The command: the flags, the job, then the steps above in order. o holds
 * the job (dist, gates) when it returns. */
static int train_main(offline_t *o, int argc, char **argv) {
    if (koma_version_asked(argc, argv, "train")) return 0;
    nn_cpu_blas_reexec_if_generic(argv);
    compat_install_stop_handler();
    offline_flags_t *f = &o->f;
    train_config_t cfg = train_config_default();
    cfg_opt_t opts[MAX_OPTS];
    int n = offline_flags(f, opts);
    cfg_defaults(opts, n);
    n += train_config_flags(&cfg, opts + n, MAX_OPTS - n);

    char err[2048];
    int npos = 0;
    int rc = cfg_parse(opts, n, argc, argv, 1, NULL, 0, &npos, usage, stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "train: %s\n", err);
        return 2;
    }
    if (!f->from_games) {
        fprintf(stderr, "train: nothing to do: pass --from-games (the trainer of a self-play run runs inside `selfplay`)\n%s\n",
                usage);
        return 2;
    }
    /* selfplay's trainer rows that mean nothing here: refused, not listed and ignored */
    static const char *const SELFPLAY_ONLY[] = {"window-min", "window-max", "window-alpha", "window-beta",
                                                "samples-per-position", "min-steps-per-cycle", "max-steps-per-cycle"};
    for (size_t i = 0; i < sizeof SELFPLAY_ONLY / sizeof SELFPLAY_ONLY[0]; i++)
        if (train_config_flag_given(&cfg, SELFPLAY_ONLY[i])) {
            fprintf(stderr, "train: --%s is selfplay's (its trainer's growing window and steps per cycle); train "
                    "--from-games trains on the most recent --window N positions (0 = all) for --steps N or "
                    "--epochs E\n", SELFPLAY_ONLY[i]);
            return 2;
        }
    if (f->epochs > 0 && f->steps_given) {
        fprintf(stderr, "train: --epochs and --steps both given: --epochs sets the steps (E x positions / batch)\n");
        return 2;
    }
    int total_given = train_config_flag_given(&cfg, "lr-total-steps");
    int net_given = train_config_flag_given(&cfg, "net") || train_config_flag_given(&cfg, "activation");
    if (train_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return 2;
    }
    if (!total_given) cfg.opt.total_steps = f->steps;
    o->dist = dist_init(&argc, &argv, err, sizeof err);
    if (!o->dist) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    o->rank = dist_rank(o->dist);
    int32_t ranks = dist_size(o->dist), slices = ranks * (int32_t)f->micro;
    if (cfg.batch % slices != 0) {
        fprintf(stderr, "train: --batch %d is the global batch: it must be a multiple of the %d rank(s) x %d micro-batches\n",
                cfg.batch, ranks, (int)f->micro);
        return 2;
    }
    if (o->rank != 0) f->quiet = 1, f->progress = 0; /* rank 0 speaks for the job */

    o->cfg = &cfg;
    o->net_given = net_given;
    o->total_given = total_given;
    o->ranks = ranks;
    o->slices = slices;
    char *config_text = cfg_dump_string(opts, n);
    int status = 1;
    if (offline_open(o, config_text) == 0 && offline_net(o) == 0 && offline_window(o) == 0) {
        int rc = offline_train(o);
        if (rc != TRAIN_ERROR) status = offline_finish(o, rc == TRAIN_STOPPED);
    }
    offline_close(o);
    o->cfg = NULL;
    free(config_text);
    return status;
}

/* The run: rank 0 takes it as its one writer (the runs row, the checkpoint's
 * folder); the other ranks open it read-only once rank 0 holds it. 0, or -1
 * with the message printed. */
static int offline_open(offline_t *o, const char *config_text) {
    char err[2048], path[1400];
    if (o->rank == 0 && ((o->f.out[0] && check_out(o->f.run, o->f.out, "the final net", "--out", err, sizeof err) != 0) ||
                        (o->f.losses[0] && check_out(o->f.run, o->f.losses, "the losses", "--losses", err, sizeof err) != 0))) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    if (o->rank != 0 && gate(o, 1) != 0) return -1;
    o->rn = run_open(o->f.run, o->rank == 0 ? RUN_WRITE : 0, "train --from-games", err, sizeof err);
    if (!o->rn) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    o->run = run_dir(o->rn);
    for (int32_t i = 0; i < run_findings(o->rn); i++) fprintf(stderr, "train: start-up check: %s\n", run_finding(o->rn, i));
    run_path(o->run, RUN_DB, path, sizeof path);
    o->writer = o->rank == 0 ? db_writer_start(run_db(o->rn), 64, err, sizeof err) : NULL;
    if (o->rank == 0 && !o->writer) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    o->config_text = config_text ? config_text : "";
    if (db_open(path, DB_OPEN_READONLY, &o->db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    if (o->rank == 0 && gate(o, 1) != 0) return -1;
    snprintf(o->ckpt, sizeof o->ckpt, "%s/%s/checkpoint.safetensors", o->run, RUN_TRAIN);
    return 0;
}

static int register_start(offline_t *o);

/* Rank 0, once every check has passed (the run, the net, the backend, the
 * positions): the first writes of this command, the invocation's runs row,
 * train/ (stale temporary files removed), and a run without a model gets
 * the start net as cycle 0. A command that fails before writes nothing. 0,
 * or -1 with the message printed. */
static int offline_commit(offline_t *o) {
    if (o->rank != 0) return 0;
    char dir[1400], path[1400], e2[1024];
    run_path(o->run, RUN_DB, path, sizeof path);
    run_row_arg_t ra = {o->config_text};
    if (train_writer_call(o->writer, run_row_job, &ra, sizeof ra, NULL, e2, sizeof e2) != DB_OK) {
        fprintf(stderr, "train: %s: runs row not written: %s\n", path, e2); /* a database that cannot take it */
        return -1;
    }
    run_path(o->run, RUN_TRAIN, dir, sizeof dir);
    if (compat_mkdir_p(dir, e2, sizeof e2) != 0) {
        fprintf(stderr, "train: %s: %s\n", dir, e2);
        return -1;
    }
    train_remove_stale_tmp(dir, note_stale, NULL);
    return o->resumed ? 0 : register_start(o);
}

/* A run without any model gets the new, untrained net as its cycle 0 before
 * training starts, as a self-play run does: the rating list's anchor, so
 * the trained net (the next cycle) is rated against where it started.
 * Nothing with --out, on other ranks, or when the run has a model. 0, or
 * -1 with the message printed. */
static int register_start(offline_t *o) {
    if (o->rank != 0 || o->f.out[0]) return 0;
    char err[2048];
    db_model_t latest;
    db_status_t st = db_model_latest(o->db, &latest);
    if (st == DB_OK) return 0;
    if (st != DB_NOTFOUND) {
        fprintf(stderr, "train: %s\n", db_errmsg(o->db));
        return -1;
    }
    db_model_t mr;
    memset(&mr, 0, sizeof mr);
    mr.cycle = 0;
    mr.loss_policy = mr.loss_value = mr.loss_legal = mr.loss_total = NAN;
    db_run_t rr;
    if (db_run_latest(o->db, &rr) == DB_OK) {
        mr.run_id = rr.id;
        db_run_clear(&rr);
    }
    if (train_model_save(o->writer, o->run, o->tn.net, o->tn.nt, &mr, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    printf("wrote %s/%s, the untrained net, registered as cycle 0 (the anchor of the run's rating list)\n", o->run,
           mr.path);
    return 0;
}

/* Without a checkpoint (or with --fresh): the run's newest net when it has
 * one, its weights with a new optimizer (--fresh: a new net of its size);
 * a new net of another size only when --net/--activation ask for one, said
 * so; a run without a model starts from a new --net net. 0, or -1 with the
 * message printed. */
/* A new, untrained net of cfg's size into o->tn. 0, or -1 with the message printed. */
static int new_net(offline_t *o, const train_config_t *cfg, int32_t rows) {
    char err[2048];
    if (train_net_new(o->be, cfg, rows, &o->tn, err, sizeof err) == 0) return 0;
    fprintf(stderr, "train: %s\n", err);
    return -1;
}

static int start_net(offline_t *o, const train_config_t *cfg, int32_t rows) {
    char err[2048], path[1400 + DB_PATH_MAX], have[32], want[32];
    db_model_t newest;
    db_status_t st = db_model_latest(o->db, &newest);
    if (st != DB_OK && st != DB_NOTFOUND) {
        fprintf(stderr, "train: %s\n", db_errmsg(o->db));
        return -1;
    }
    if (st == DB_NOTFOUND) return new_net(o, cfg, rows);
    run_path(o->run, newest.path, path, sizeof path);
    nn_net_config_t nc;
    if (nn_weights_peek(path, &nc, err, sizeof err) != 0) {
        fprintf(stderr, "train: the run's newest net (cycle %d): %s\n", newest.cycle, err);
        return -1;
    }
    nn_net_arch_format(&nc, have, sizeof have);
    snprintf(want, sizeof want, "%s", cfg->net);
    int same = nn_net_arch_is(cfg->net, &nc) && nn_act_parse(cfg->activation) == (int)nc.act;
    if (o->net_given && !same) {
        if (o->rank == 0)
            printf("starting a new architecture: a new %s %s net, as --net/--activation ask (the run's newest net, "
                   "cycle %d, is %s %s)\n", want, cfg->activation, newest.cycle, have, nn_act_name(nc.act));
        return new_net(o, cfg, rows);
    }
    if (o->f.fresh) { /* a new net, of the run's size */
        train_config_t c = *cfg;
        snprintf(c.net, sizeof c.net, "%s", have);
        snprintf(c.activation, sizeof c.activation, "%s", nn_act_name(nc.act));
        if (o->rank == 0)
            printf("--fresh: a new %s %s net, the size of the run's newest net (cycle %d)\n", have,
                   nn_act_name(nc.act), newest.cycle);
        return new_net(o, &c, rows);
    }
    if (train_net_load(o->be, cfg, rows, path, 0, &o->tn, err, sizeof err) != 0) {
        fprintf(stderr, "train: the run's newest net (cycle %d): %s\n", newest.cycle, err);
        return -1;
    }
    if (o->rank == 0)
        printf("continuing from the run's newest net: %s (cycle %d, %s %s), new optimizer state\n", path,
               newest.cycle, have, nn_act_name(nc.act));
    return 0;
}

/* The net: the checkpoint's (weights and optimizer state), or start_net's. */
static int offline_net(offline_t *o) {
    char err[2048];
    const train_config_t *cfg = o->cfg;
    train_config_t mine;
    if (o->ranks > 1) { /* one GPU per rank of a node, as selfplay's ranks */
        mine = *cfg;
        mine.device = nn_device_for_rank(cfg->backend, (int32_t)cfg->device, dist_local_rank(o->dist));
        cfg = &mine;
    }
    o->be = train_backend_new(cfg, err, sizeof err);
    if (!o->be) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    int32_t rows = train_dist_local_batch(cfg->batch, o->slices);
    if (o->f.fresh || !compat_file_exists(o->ckpt)) return start_net(o, cfg, rows);
    if (train_net_load(o->be, cfg, rows, o->ckpt, 1, &o->tn, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n(pass --fresh to start over)\n", err);
        return -1;
    }
    const nn_net_config_t *nc = nn_net_config(o->tn.net);
    if (o->net_given && (!nn_net_arch_is(cfg->net, nc) || nn_act_parse(cfg->activation) != (int)nc->act)) {
        char sz[32];
        fprintf(stderr, "train: %s holds a %s %s net, not the %s %s asked for: pass --fresh to start over\n", o->ckpt,
                nn_net_arch_format(nc, sz, sizeof sz), nn_act_name(nc->act), cfg->net,
                cfg->activation);
        return -1;
    }
    o->resumed = 1;
    return 0;
}

/* The window (the most recent --window positions of every shard), the batch
 * buffers, --losses, the data-parallel step; then every rank agrees to train
 * and starts from the same net. */
static int offline_window(offline_t *o) {
    char err[2048];
    const shard_format_t *fmt = &o->tn.fmt;
    if (db_shards_recent(o->db, 0, &o->list, &o->nlist) != DB_OK) {
        fprintf(stderr, "train: %s\n", db_errmsg(o->db));
        return -1;
    }
    o->win = train_window_new(o->run, fmt, NULL, NULL, err, sizeof err);
    if (o->win) train_window_set_eager(o->win, o->f.verify);
    o->batch = o->win ? shard_batch_new(fmt, o->cfg->batch, 0, err, sizeof err) : NULL;
    if (!o->win || !o->batch || train_window_setup(o->cfg, o->win, o->be, o->slices, err, sizeof err) < 0) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    if (train_window_select(o->win, o->list, o->nlist, -1, o->f.window, &o->positions, &o->bad, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    o->all = train_window_count(o->list, o->nlist, fmt->features_version, -1, -1);
    if (o->positions <= 0) {
        fprintf(stderr, "train: %s: no positions to train on (%d shard(s) registered, %" PRId64
                " positions with features_version %d, %d bad shard(s))\n", o->run, o->nlist, o->all,
                fmt->features_version, o->bad);
        return -1;
    }
    if (o->f.epochs > 0) { /* every position once per epoch: the steps follow from the window */
        if (o->slices > 1) {
            fprintf(stderr, "train: --epochs trains in one process (or --micro-batches 1): under mpirun use --steps\n");
            return -1;
        }
        train_window_set_epoch_order(o->win, (uint64_t)o->cfg->seed);
        double steps = ceil(o->f.epochs * (double)o->positions / (double)o->cfg->batch);
        o->f.steps = steps < 1 ? 1 : (int64_t)steps;
        if (!o->total_given) {
            o->cfg->opt.total_steps = o->f.steps;
            nn_optim_set_config(o->tn.nt, &o->cfg->opt);
        }
        if (o->rank == 0 && !o->f.quiet)
            printf("train --from-games: %g epoch(s) of %" PRId64 " positions in a shuffled order: %" PRId64
                   " steps of %d\n", o->f.epochs, o->positions, o->f.steps, o->cfg->batch);
    }
    if (offline_commit(o) != 0) return -1;
    if (o->rank == 0 && o->f.losses[0]) {
        static const char head[] = "step,loss,policy,value,legal,acc,f1\n";
        o->lf = compat_durable_open(o->f.losses, err, sizeof err);
        if (!o->lf || compat_durable_write(o->lf, head, sizeof head - 1, err, sizeof err) != 0) {
            fprintf(stderr, "train: --losses %s: cannot write: %s\n", o->f.losses, err);
            return -1;
        }
    }
    if (o->slices > 1 &&
        !(o->td = train_dist_new(o->dist, o->tn.nt, o->cfg->batch, (int32_t)o->f.micro, err, sizeof err))) {
        fprintf(stderr, "train: %s\n", err);
        return -1;
    }
    if (gate(o, 1) != 0) return -1;
    if (o->td && train_dist_check(o->td, err, sizeof err) != 0) { /* every rank starts from the same net */
        fprintf(stderr, "train: rank %d: %s\n", o->rank, err);
        return -1;
    }
    return 0;
}

/* Whether the hook of step s writes the checkpoint, and whether it ends the
 * process there (--die-at-step, tests). */
static int ckpt_due(const offline_t *o, int64_t s) { return (s + 1) % o->f.ckpt_every == 0 && s + 1 < o->f.steps; }
static int die_due(const offline_t *o, int64_t s) { return o->f.die_at > 0 && s + 1 == o->f.die_at; }

/* After step s of the loop (train_step_hook): --losses, the figures, the
 * weights compared across ranks, the checkpoint, --die-at-step, the status
 * line. -1 with err ends the loop. */
static int offline_step(void *user, int64_t s, const nn_metrics_t *m, const train_loop_result_t *r, char *err,
                        size_t errlen) {
    offline_t *o = user;
    if (o->lf) {
        char line[256], e[512];
        int n = snprintf(line, sizeof line, "%" PRId64 ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", m->step, m->loss,
                         m->policy_loss, m->value_loss, m->legal_loss, m->policy_acc, m->legal_f1);
        if (compat_durable_write(o->lf, line, (size_t)n, e, sizeof e) != 0) {
            set_err(err, errlen, "--losses: %s", e);
            return -1;
        }
    }
    train_sums_add(&o->tick, m);
    if (o->f.steps - s <= 100) train_sums_add(&o->tail, m);
    if (o->td && s + 1 == o->f.diverge_at && o->rank == o->ranks - 1) { /* tests: what the weights check must catch */
        float w = 0;
        float *p = nn_net_params(o->tn.net, NULL, NULL);
        o->be->download(o->be, &w, p, sizeof w);
        w += 1e-3f;
        o->be->upload(o->be, p, &w, sizeof w);
        nn_net_mark_dirty(o->tn.net);
    }
    char e2[1024];
    if (o->td && (ckpt_due(o, s) || (s + 1) % o->f.check_every == 0 || s + 1 == o->f.steps) &&
        train_dist_check(o->td, e2, sizeof e2) != 0) {
        set_err(err, errlen, "rank %d: %s", o->rank, e2);
        return -1;
    }
    if (ckpt_due(o, s)) {
        int saved = o->rank != 0 || nn_weights_save(o->tn.net, o->tn.nt, o->ckpt, e2, sizeof e2) == 0;
        if (saved) err[0] = 0;
        else set_err(err, errlen, "checkpoint: %s", e2);
        if ((o->td ? agree(o, saved) : (saved ? 0 : -1)) != 0) return -1;
        o->saved_at = s + 1;
    }
    if (die_due(o, s)) _Exit(137); /* tests: a crash right here */
    if (o->f.progress != 0 && (status_due(o->sl) || s + 1 == o->f.steps)) {
        double el = (double)(compat_now_ns() - o->t_start) * 1e-9;
        double rate = (double)r->steps / el;
        char eta[32];
        fmt_eta((double)(o->f.steps - s - 1) / rate, eta, sizeof eta);
        train_means_t t = train_sums_mean(&o->tick);
        status_line(o->sl, s + 1 == o->f.steps,
                    "step %" PRId64 "/%" PRId64 "  %.0f samples/s  policy %.4f value %.4f legal %.5f  acc %.3f "
                    "f1 %.3f  lr %.5f  ETA %s",
                    s + 1, o->f.steps, rate * o->cfg->batch, t.policy_loss, t.value_loss, t.legal_loss, t.policy_acc,
                    t.legal_f1, m->lr, eta);
        memset(&o->tick, 0, sizeof o->tick);
    }
    return 0;
}

/* The steps whose hook needs the net as it is after them (train_loop_t.barrier):
 * a checkpoint, the weights compared across ranks (data-parallel steps are
 * synchronous anyway), --die-at-step. */
static int offline_barrier(void *user, int64_t s) {
    const offline_t *o = user;
    return ckpt_due(o, s) || die_due(o, s);
}

/* Steps from the checkpoint's to --steps: train_loop_run with offline_step.
 * TRAIN_OK, TRAIN_STOPPED, or TRAIN_ERROR with the message printed. */
static int offline_train(offline_t *o) {
    char arch[64];
    int64_t step0 = nn_optim_step_count(o->tn.nt);
    if (o->rank == 0)
        printf("train --from-games: %s, window %" PRId64 " of %" PRId64 " positions in %d shard(s)%s, %s, batch %d, "
               "%s step %" PRId64 " -> %" PRId64 ", checkpoint every %" PRId64 " steps: %s\n",
               o->run, o->positions, o->all, train_window_shards(o->win), o->bad ? " (bad shards skipped)" : "",
               train_model_arch(nn_net_config(o->tn.net), arch, sizeof arch), o->cfg->batch,
               o->resumed ? "resuming at" : "from", step0, o->f.steps, o->f.ckpt_every, o->ckpt);
    fflush(stdout);
    o->t_start = compat_now_ns();
    o->saved_at = step0;
    o->sl = status_new(stdout, o->f.progress > 0 ? o->f.progress : 0, o->f.quiet != 0); /* freed before any other output */
    train_loop_t lp = {.win = o->win, .batch = o->batch, .nt = o->tn.nt, .rows = o->cfg->batch,
                       .seed = o->cfg->seed, .cycle = -1, .first = step0, .end = o->f.steps, .dist = o->td,
                       .on_step = offline_step, .barrier = offline_barrier, .user = o};
    train_loop_result_t r;
    char err[2048] = "";
    int rc = train_loop_run(&lp, &r, err, sizeof err);
    status_end(o);
    if (rc == TRAIN_ERROR) {
        if (r.failed_in == TRAIN_LOOP_STEP && o->td)
            fprintf(stderr, "train: rank %d: step %" PRId64 ": %s\n", o->rank, r.failed_step, err);
        else if (r.failed_in == TRAIN_LOOP_STEP)
            fprintf(stderr, "train: step %" PRId64 ": %s\n", r.failed_step, err);
        else if (err[0])
            fprintf(stderr, "train: %s\n", err);
        return rc;
    }
    if (o->rank == 0 && o->ranks > 1 && r.steps > 0) {
        int64_t bytes = 0;
        double sec = dist_sum_seconds(o->dist, &bytes);
        printf("data-parallel: %d ranks x %d rows, sums over ranks %.2f ms/step (%.2f MB/step, waits for the slowest "
               "rank included; %s)\n",
               o->ranks, train_dist_local_batch(o->cfg->batch, o->ranks), 1e3 * sec / (double)r.steps,
               (double)bytes / (double)r.steps / 1e6, train_dist_route(o->td));
    }
    return rc;
}

/* The final net as the run's next cycle, unless the newest model already is
 * the checkpoint's net. 0, or 1 with the message printed. */
static int register_next(offline_t *o, int64_t step_end) {
    char err[2048];
    uint64_t h = 0;
    int64_t bytes = 0;
    if (db_file_xxh3(o->ckpt, &h, &bytes, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    db_model_t latest;
    int64_t next = 0;
    db_status_t st = db_model_latest(o->db, &latest);
    if (st == DB_OK) {
        char lp[1400];
        snprintf(lp, sizeof lp, "%s/%s", o->run, latest.path); /* the same net, its lineage added (train/lineage.h) */
        if (strcmp(latest.xxh3, hex) == 0 || nn_weights_same_tensors(o->ckpt, lp, err, sizeof err) == 1) {
            printf("already registered: %s/%s (cycle %d) is this net\n", o->run, latest.path, latest.cycle);
            return 0;
        }
        next = latest.cycle + 1;
    } else if (st != DB_NOTFOUND) {
        fprintf(stderr, "train: %s\n", db_errmsg(o->db));
        return 1;
    }
    train_means_t t = train_sums_mean(&o->tail);
    db_model_t mr;
    memset(&mr, 0, sizeof mr);
    mr.cycle = (int32_t)next;
    mr.train_steps = step_end;
    mr.train_samples = step_end * o->cfg->batch;
    mr.loss_policy = t.policy_loss, mr.loss_value = t.value_loss, mr.loss_legal = t.legal_loss;
    mr.loss_total = t.loss; /* the objective minimised (nn/net.h) */
    db_run_t rr;
    if (db_run_latest(o->db, &rr) == DB_OK) {
        mr.run_id = rr.id;
        db_run_clear(&rr);
    }
    if (train_model_save(o->writer, o->run, o->tn.net, o->tn.nt, &mr, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    printf("wrote %s/%s, registered as cycle %" PRId64 "\n", o->run, mr.path, next);
    return 0;
}

/* After the loop (rank 0 writes, the others are done): the checkpoint, the
 * summary, the final net to --out or as the next cycle. The exit status. */
static int offline_finish(offline_t *o, int stopped) {
    /* After a stop (agreed: every rank is here), the other ranks leave only
     * once rank 0 has written its checkpoint and said so: a rank that exits
     * first with EXIT_STOPPED makes mpirun end the job, rank 0 included
     * (seen on a loaded machine: no "stopped at step" line). */
    int wait_0 = stopped && o->ranks > 1;
    if (o->rank != 0) {
        if (wait_0) (void)agree(o, 1);
        return stopped ? EXIT_STOPPED : 0;
    }
    char err[2048];
    int64_t step_end = nn_optim_step_count(o->tn.nt);
    if (step_end != o->saved_at || !compat_file_exists(o->ckpt)) {
        if (nn_weights_save(o->tn.net, o->tn.nt, o->ckpt, err, sizeof err) != 0) {
            fprintf(stderr, "train: checkpoint: %s\n", err);
            if (wait_0) (void)agree(o, 0);
            return 1;
        }
    }
    if (stopped) {
        printf("stopped at step %" PRId64 " of %" PRId64 "; checkpoint %s written: the same command continues\n",
               step_end, o->f.steps, o->ckpt);
        fflush(stdout);
        if (wait_0) (void)agree(o, 1);
        return EXIT_STOPPED;
    }
    if (o->tail.n) {
        train_means_t t = train_sums_mean(&o->tail);
        printf("done: step %" PRId64 ", mean of the last %" PRId64 " steps: policy %.4f value %.4f legal %.5f "
               "acc %.3f f1 %.3f\n",
               step_end, o->tail.n, t.policy_loss, t.value_loss, t.legal_loss, t.policy_acc, t.legal_f1);
    } else {
        printf("done: step %" PRId64 " (nothing left to train: the checkpoint is at --steps)\n", step_end);
    }
    if (!o->f.out[0]) return register_next(o, step_end);
    if (run_output_check(o->f.out, o->run, "the final net", "--out", err, sizeof err) != 0 ||
        nn_weights_save(o->tn.net, o->tn.nt, o->f.out, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    printf("wrote %s\n", o->f.out);
    return 0;
}

static void offline_close(offline_t *o) {
    status_end(o);
    train_dist_free(o->td);
    if (o->lf) { /* the losses so far, also after a stop or a failed step */
        char err[2048];
        if (run_output_check(o->f.losses, o->run, "the losses", "--losses", err, sizeof err) != 0) {
            compat_durable_abort(o->lf);
            fprintf(stderr, "train: %s\n", err);
        } else if (compat_durable_commit(o->lf, err, sizeof err) != 0) {
            fprintf(stderr, "train: --losses %s: %s\n", o->f.losses, err);
        }
        o->lf = NULL;
    }
    fflush(stdout);
    free(o->list);
    shard_batch_free(o->batch);
    train_window_free(o->win);
    train_net_free(&o->tn);
    nn_backend_free(o->be);
    db_close(o->db);
    if (o->writer) {
        if (db_writer_stop(o->writer, 10000) != DB_OK) fprintf(stderr, "train: %s: writer: some writes cancelled\n", o->run);
        db_writer_free(o->writer);
    }
    run_close(o->rn);
}

int main(int argc, char **argv) {
    static offline_t o; /* large; zero */
    int status = train_main(&o, argc, argv);
    while (o.dist && o.gates < TRAIN_GATES) gate(&o, 0); /* a rank that failed before the loop */
    dist_free(o.dist);
    return status;
}
