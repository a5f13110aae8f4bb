/* main.c - `train --from-games`: trains offline from the games stored in a run
 * (self-play shards or imported records) without playing.
 *
 * Owns: the command line, the offline step loop with its progress line, the
 * resumable checkpoint <run>/train/checkpoint.safetensors (weights + optimizer
 * state + step count in one durable file) and the final model.
 * Does not own: the window and sampling (train/window.c), model registration
 * (train/model.c), the trainer of a self-play run (train/trainer.c).
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
 * Output: the final net (with optimizer state) goes to --out PATH, or by
 * default to the run's next cycle, models/<cycle>.safetensors, registered in
 * koma.db (file first, then the row). Offline steps are not written to the
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
#include "compat/status.h"
#include "nn/backend.h"
#include "data/config.h"
#include "data/db.h"
#include "data/run.h"
#include "data/shard.h"
#include "data/writer.h"
#include "dist/dist.h"
#include "engine/encode.h"
#include "nn/weights.h"
#include "train/dist_train.h"
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
    "It is the run's one writer while it runs (selfplay or import on the same run is\n"
    "refused meanwhile, and it is refused while they run). Exit status: 0 done,\n"
    "1 error, 2 bad flags, 130 stopped (the checkpoint is kept: the same command resumes).\n"
    "Under mpirun (-np N) the N ranks train one net; --batch is the global batch (docs/SCALING.md).";

static char g_run[CFG_STRING_MAX] = "runs/default";
static char g_out[CFG_STRING_MAX] = "";
static char g_losses[CFG_STRING_MAX] = "";
static int64_t g_window = 0, g_steps = 1000, g_ckpt_every = 100, g_die_at = 0, g_check_every = 10, g_micro = 1,
               g_diverge_at = 0;
static int g_from_games = 0, g_fresh = 0, g_quiet = 0;
static double g_progress = -1;
static dist_t *g_dist;  /* the job: rank 0 of 1 without a launcher */
static int32_t g_rank;  /* this process's rank */
static int g_gates;     /* pre-loop agreements made (TRAIN_GATES in all, on every path) */
#define TRAIN_GATES 2   /* 1: rank 0 holds the run; 2: every rank is ready to train */

/* 0 when every rank passes ok != 0 (a job of one: ok itself). */
static int agree(int ok) {
    char err[512];
    int all = 0;
    if (dist_agree(g_dist, ok, &all, err, sizeof err) != 0) {
        fprintf(stderr, "train: rank %d: %s\n", g_rank, err);
        return -1;
    }
    if (ok && !all) fprintf(stderr, "train: rank %d: another rank failed (its message is above)\n", g_rank);
    return all ? 0 : -1;
}

/* One of the TRAIN_GATES pre-loop agreements. */
static int gate(int ok) {
    g_gates++;
    return agree(ok);
}

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
    if (st != DB_OK) snprintf(err, errlen, "%s", db_errmsg(db));
    return st;
}

static void note_stale(void *user, const char *path) {
    (void)user;
    printf("removed %s, left by a write that was killed before its rename\n", path);
}

/* --out's directory must exist and take a file before any step is spent. */
static int check_out_dir(const char *out, char *err, size_t errlen) {
    char dir[CFG_STRING_MAX];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (compat_is_dir(out)) {
        snprintf(err, errlen, "%s: is a directory; give the path of the file to write", out);
        return -1;
    }
    if (!compat_is_dir(dir)) {
        snprintf(err, errlen, "%s: the directory %s does not exist", out, dir);
        return -1;
    }
    return run_check_writable(dir, err, errlen);
}

/* Running means of the metrics between two progress lines. */
typedef struct {
    double p, v, l, acc, f1, total;
    int64_t n, np; /* steps; positions with a policy target */
} acc_t;

/* Policy figures are weighted by the positions that have a policy target. */
static void acc_add(acc_t *a, const nn_metrics_t *m) {
    if (m->policy_positions > 0)
        a->p += m->policy_loss * m->policy_positions, a->acc += m->policy_acc * m->policy_positions,
            a->np += m->policy_positions;
    a->v += m->value_loss, a->l += m->legal_loss, a->f1 += m->legal_f1, a->total += m->loss, a->n++;
}

static int train_main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "train")) return 0;
    nn_cpu_blas_reexec_if_generic(argv);
    compat_install_stop_handler();
    train_config_t cfg = train_config_default();
    cfg_opt_t opts[MAX_OPTS];
    int n = 0;
    opts[n++] = (cfg_opt_t){"from-games", CFG_TYPE_BOOL, &g_from_games, 1, 0, "train offline from the run's stored games"};
    opts[n++] = (cfg_opt_t){"run", CFG_TYPE_STRING, g_run, 1, 0, "run directory (koma.db, shards/, models/)"};
    opts[n++] = (cfg_opt_t){"window", CFG_TYPE_INT, &g_window, 0, 1e15, "train on the most recent N positions (0 = all)"};
    opts[n++] = (cfg_opt_t){"steps", CFG_TYPE_INT, &g_steps, 1, 1e15, "training steps in all (a resumed run ends here too)"};
    opts[n++] = (cfg_opt_t){"out", CFG_TYPE_STRING, g_out, 1, 0, "write the final net here instead of registering the next cycle's model"};
    opts[n++] = (cfg_opt_t){"checkpoint-every", CFG_TYPE_INT, &g_ckpt_every, 1, 1e15, "write <run>/train/checkpoint.safetensors every K steps"};
    opts[n++] = (cfg_opt_t){"fresh", CFG_TYPE_BOOL, &g_fresh, 1, 0, "ignore an existing checkpoint and start from a new net"};
    opts[n++] = (cfg_opt_t){"die-at-step", CFG_TYPE_INT, &g_die_at, 0, 1e15, "tests: exit abruptly (like kill -9) after this step (0 = never)"};
    opts[n++] = (cfg_opt_t){"progress", CFG_TYPE_DOUBLE, &g_progress, -1, 3600, "seconds between status lines (-1 = 1 on a terminal, updated in place, 30 otherwise; 0 = none)"};
    opts[n++] = (cfg_opt_t){"quiet", CFG_TYPE_BOOL, &g_quiet, 1, 0, "no status lines; only warnings and errors"};
    opts[n++] = (cfg_opt_t){"losses", CFG_TYPE_STRING, g_losses, 1, 0, "write every step's losses to this CSV file (step,loss,policy,value,legal,acc,f1)"};
    opts[n++] = (cfg_opt_t){"micro-batches", CFG_TYPE_INT, &g_micro, 1, 4096, "split each batch into M slices, each with its own BN statistics, and average their gradients (what M ranks under mpirun compute; less memory)"};
    opts[n++] = (cfg_opt_t){"dist-diverge-at-step", CFG_TYPE_INT, &g_diverge_at, 0, 1e15, "tests: the last rank changes one weight after this step (0 = never)"};
    opts[n++] = (cfg_opt_t){"dist-check-every", CFG_TYPE_INT, &g_check_every, 1, 1e15, "under mpirun: compare the weights' XXH3 across ranks every K steps"};
    n += train_config_flags(&cfg, opts + n, MAX_OPTS - n);

    char err[2048], e2[1024];
    int npos = 0;
    int rc = cfg_parse(opts, n, argc, argv, 1, NULL, 0, &npos, usage, stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "train: %s\n", err);
        return 2;
    }
    if (!g_from_games) {
        fprintf(stderr, "train: nothing to do: pass --from-games (the trainer of a self-play run runs inside `selfplay`)\n%s\n",
                usage);
        return 2;
    }
    int total_given = train_config_flag_given(&cfg, "lr-total-steps");
    int net_given = train_config_flag_given(&cfg, "net") || train_config_flag_given(&cfg, "activation");
    if (train_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        return 2;
    }
    if (!total_given) cfg.opt.total_steps = g_steps;
    g_dist = dist_init(&argc, &argv, err, sizeof err);
    if (!g_dist) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    g_rank = dist_rank(g_dist);
    int32_t ranks = dist_size(g_dist), slices = ranks * (int32_t)g_micro;
    if (cfg.batch % slices != 0) {
        fprintf(stderr, "train: --batch %d is the global batch: it must be a multiple of the %d rank(s) x %d micro-batches\n",
                cfg.batch, ranks, (int)g_micro);
        return 2;
    }
    if (g_rank != 0) g_quiet = 1, g_progress = 0; /* rank 0 speaks for the job */

    /* The run: this program (rank 0) is its one writer until the end; the
     * other ranks open it read-only once rank 0 holds it. */
    if (g_rank == 0 && g_out[0] && check_out_dir(g_out, err, sizeof err) != 0) {
        fprintf(stderr, "train: --out %s\n", err);
        return 1;
    }
    char path[1400], ckpt[1400];
    if (g_rank != 0 && gate(1) != 0) return 1;
    run_t *rn = run_open(g_run, g_rank == 0 ? RUN_WRITE : 0, "train --from-games", err, sizeof err);
    if (!rn) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    const char *run = run_dir(rn);
    for (int32_t i = 0; i < run_findings(rn); i++) fprintf(stderr, "train: start-up check: %s\n", run_finding(rn, i));
    run_path(run, RUN_DB, path, sizeof path);
    char *config_text = cfg_dump_string(opts, n);
    int status = 1;
    db_t *db = NULL;
    db_writer_t *writer = NULL;
    nn_backend_t *be = NULL;
    nn_net_t *net = NULL;
    nn_trainer_t *nt = NULL;
    train_window_t *win = NULL;
    shard_batch_t *batch = NULL;
    db_shard_t *list = NULL;
    int32_t nlist = 0;
    status_t *sl = NULL; /* the status line of the step loop */
    train_dist_t *td = NULL;
    FILE *lf = NULL; /* --losses */

    writer = g_rank == 0 ? db_writer_start(run_db(rn), 64, err, sizeof err) : NULL;
    if (g_rank == 0 && !writer) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    run_row_arg_t ra = {config_text ? config_text : ""};
    if (writer && train_writer_call(writer, run_row_job, &ra, sizeof ra, NULL, e2, sizeof e2) != DB_OK) {
        fprintf(stderr, "train: %s: runs row not written: %s\n", path, e2); /* a database that cannot take it */
        goto done;
    }
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }

    /* The net: from the checkpoint, or new. */
    run_path(run, RUN_TRAIN, ckpt, sizeof ckpt);
    if (g_rank == 0) {
        if (compat_mkdir_p(ckpt, e2, sizeof e2) != 0) {
            fprintf(stderr, "train: %s: %s\n", ckpt, e2);
            goto done;
        }
        train_remove_stale_tmp(ckpt, note_stale, NULL);
        if (gate(1) != 0) goto done;
    }
    snprintf(ckpt, sizeof ckpt, "%s/train/checkpoint.safetensors", run);
    be = train_backend_new(&cfg, err, sizeof err);
    if (!be) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    int resumed = 0;
    if (!g_fresh && compat_file_exists(ckpt)) {
        net = nn_weights_load(be, ckpt, -1, err, sizeof err);
        if (!net) {
            fprintf(stderr, "train: %s\n(pass --fresh to start over)\n", err);
            goto done;
        }
        const nn_net_config_t *nc = nn_net_config(net);
        int32_t b = 0, ch = 0;
        nn_net_size_parse(cfg.net, &b, &ch);
        if (net_given && (b != nc->blocks || ch != nc->channels || nn_act_parse(cfg.activation) != (int)nc->act)) {
            char sz[32];
            fprintf(stderr, "train: %s holds a %s %s net, not the %s %s asked for: pass --fresh to start over\n", ckpt,
                    nn_net_size_format(nc->blocks, nc->channels, sz, sizeof sz), nn_act_name(nc->act), cfg.net,
                    cfg.activation);
            goto done;
        }
        resumed = 1;
    } else {
        nn_net_config_t nc = {.act = (nn_act_t)nn_act_parse(cfg.activation),
                              .in_planes = ENC_PLANES,
                              .in_hand = ENC_HAND,
                              .features_version = ENC_FEATURES_VERSION};
        nn_net_size_parse(cfg.net, &nc.blocks, &nc.channels);
        net = nn_net_new(be, &nc, cfg.seed, err, sizeof err);
        if (!net) {
            fprintf(stderr, "train: new net %s: %s\n", cfg.net, err);
            goto done;
        }
    }
    nt = nn_trainer_new(net, &cfg.opt, train_dist_local_batch(cfg.batch, slices), err, sizeof err);
    if (!nt) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    if (resumed && nn_weights_read(net, nt, ckpt, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n(pass --fresh to start over)\n", err);
        goto done;
    }
    const nn_net_config_t *nc = nn_net_config(net);
    shard_format_t fmt = {.features_version = nc->features_version,
                          .planes_bytes = (int32_t)nn_packed_bytes(nc->in_planes),
                          .hand_n = nc->in_hand,
                          .legal_bytes = (int32_t)nn_packed_bytes(NN_POLICY_CH)};

    /* The window. */
    if (db_shards_recent(db, 0, &list, &nlist) != DB_OK) {
        fprintf(stderr, "train: %s\n", db_errmsg(db));
        goto done;
    }
    win = train_window_new(run, &fmt, NULL, NULL, err, sizeof err);
    batch = win ? shard_batch_new(&fmt, cfg.batch, 0, err, sizeof err) : NULL;
    if (!win || !batch) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    int64_t positions = 0;
    int32_t bad = 0;
    if (train_window_select(win, list, nlist, -1, g_window, &positions, &bad, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    int64_t all = train_window_count(list, nlist, fmt.features_version, -1, -1);
    if (positions <= 0) {
        fprintf(stderr, "train: %s: no positions to train on (%d shard(s) registered, %" PRId64
                " positions with features_version %d, %d bad shard(s))\n", run, nlist, all, fmt.features_version, bad);
        goto done;
    }
    if (g_rank == 0 && g_losses[0]) {
        lf = fopen(g_losses, "w");
        if (!lf || fputs("step,loss,policy,value,legal,acc,f1\n", lf) < 0) {
            fprintf(stderr, "train: --losses %s: cannot write\n", g_losses);
            goto done;
        }
    }
    if (slices > 1 && !(td = train_dist_new(g_dist, nt, cfg.batch, (int32_t)g_micro, err, sizeof err))) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    if (gate(1) != 0) goto done;
    if (td && train_dist_check(td, err, sizeof err) != 0) { /* every rank starts from the same net */
        fprintf(stderr, "train: rank %d: %s\n", g_rank, err);
        goto done;
    }
    char arch[64];
    int64_t step0 = nn_trainer_step_count(nt);
    if (g_rank == 0)
        printf("train --from-games: %s, window %" PRId64 " of %" PRId64 " positions in %d shard(s)%s, %s, batch %d, "
           "%s step %" PRId64 " -> %" PRId64 ", checkpoint every %" PRId64 " steps: %s\n",
           run, positions, all, train_window_shards(win), bad ? " (bad shards skipped)" : "",
           train_model_arch(nc, arch, sizeof arch), cfg.batch, resumed ? "resuming at" : "from", step0, g_steps,
           g_ckpt_every, ckpt);
    fflush(stdout);

    /* The loop. */
    nn_metrics_t m;
    memset(&m, 0, sizeof m);
    acc_t tick = {0}, tail = {0};
    int64_t t_start = compat_now_ns(), steps_done = 0;
    int64_t saved_at = step0;
    int stopped = 0;
    sl = status_new(stdout, g_progress > 0 ? g_progress : 0, g_quiet != 0); /* freed before any other output */
    for (int64_t s = step0; s < g_steps; s++) {
        if (td) { /* data-parallel: every rank, the same collective calls */
            int sampled = train_window_sample(win, train_key(cfg.seed, -1, s), cfg.batch, batch, err, sizeof err) == 0;
            nn_batch_t bt = shard_batch_view(batch);
            int stop_all = 0;
            if (train_dist_step(td, sampled ? &bt : NULL, compat_stop_requested(), &m, &stop_all, err, sizeof err) != 0) {
                status_free(sl), sl = NULL;
                fprintf(stderr, "train: rank %d: step %" PRId64 ": %s\n", g_rank, s, err);
                goto done;
            }
            if (stop_all) {
                stopped = 1;
                break;
            }
        } else {
            if (compat_stop_requested()) {
                stopped = 1;
                break;
            }
            if (train_window_sample(win, train_key(cfg.seed, -1, s), cfg.batch, batch, err, sizeof err) != 0) {
                status_free(sl), sl = NULL;
                fprintf(stderr, "train: %s\n", err);
                goto done;
            }
            nn_batch_t bt = shard_batch_view(batch);
            if (nn_train_step(nt, &bt, &m, err, sizeof err) != 0) {
                status_free(sl), sl = NULL;
                fprintf(stderr, "train: step %" PRId64 ": %s\n", s, err);
                goto done;
            }
        }
        steps_done++;
        if (lf)
            fprintf(lf, "%" PRId64 ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", m.step, m.loss, m.policy_loss, m.value_loss,
                    m.legal_loss, m.policy_acc, m.legal_f1);
        acc_add(&tick, &m);
        if (g_steps - s <= 100) acc_add(&tail, &m);
        if (td && s + 1 == g_diverge_at && g_rank == ranks - 1) { /* tests: what the weights check must catch */
            float w = 0;
            float *p = nn_net_params(net, NULL, NULL);
            be->download(be, &w, p, sizeof w);
            w += 1e-3f;
            be->upload(be, p, &w, sizeof w);
            nn_net_mark_dirty(net);
        }
        int ckpt_due = (s + 1) % g_ckpt_every == 0 && s + 1 < g_steps;
        if (td && (ckpt_due || (s + 1) % g_check_every == 0 || s + 1 == g_steps) &&
            train_dist_check(td, err, sizeof err) != 0) {
            status_free(sl), sl = NULL;
            fprintf(stderr, "train: rank %d: %s\n", g_rank, err);
            goto done;
        }
        if (ckpt_due) {
            int saved = g_rank != 0 || nn_weights_save(net, nt, ckpt, err, sizeof err) == 0;
            if (!saved) {
                status_free(sl), sl = NULL;
                fprintf(stderr, "train: checkpoint: %s\n", err);
            }
            if ((td ? agree(saved) : (saved ? 0 : -1)) != 0) goto done;
            saved_at = s + 1;
        }
        if (g_die_at > 0 && s + 1 == g_die_at) _Exit(137); /* tests: a crash right here */
        if (g_progress != 0 && (status_due(sl) || s + 1 == g_steps)) {
            int64_t now = compat_now_ns();
            double el = (double)(now - t_start) * 1e-9;
            double rate = (double)steps_done / el;
            char eta[32];
            fmt_eta((double)(g_steps - s - 1) / rate, eta, sizeof eta);
            double k = (double)(tick.n ? tick.n : 1);
            status_line(sl, s + 1 == g_steps,
                        "step %" PRId64 "/%" PRId64 "  %.0f samples/s  policy %.4f value %.4f legal %.5f  acc %.3f "
                        "f1 %.3f  lr %.5f  ETA %s",
                        s + 1, g_steps, rate * cfg.batch, tick.np ? tick.p / (double)tick.np : NAN, tick.v / k, tick.l / k, tick.np ? tick.acc / (double)tick.np : NAN,
                        tick.f1 / k, m.lr, eta);
            memset(&tick, 0, sizeof tick);
        }
    }
    status_free(sl); /* the last status stays on the screen as a line */
    sl = NULL;
    int64_t step_end = nn_trainer_step_count(nt);
    if (g_rank != 0) { /* rank 0 writes and registers */
        status = stopped ? EXIT_STOPPED : 0;
        goto done;
    }
    if (ranks > 1 && steps_done > 0) {
        int64_t bytes = 0;
        double sec = dist_sum_seconds(g_dist, &bytes);
        printf("data-parallel: %d ranks x %d rows, sums over ranks %.2f ms/step (%.2f MB/step, waits for the slowest "
               "rank included)\n",
               ranks, train_dist_local_batch(cfg.batch, ranks), 1e3 * sec / (double)steps_done,
               (double)bytes / (double)steps_done / 1e6);
    }
    if (step_end != saved_at || !compat_file_exists(ckpt)) {
        if (nn_weights_save(net, nt, ckpt, err, sizeof err) != 0) {
            fprintf(stderr, "train: checkpoint: %s\n", err);
            goto done;
        }
    }
    if (stopped) {
        printf("stopped at step %" PRId64 " of %" PRId64 "; checkpoint %s written: the same command continues\n",
               step_end, g_steps, ckpt);
        status = EXIT_STOPPED;
        goto done;
    }
    if (tail.n) {
        double k = (double)tail.n;
        printf("done: step %" PRId64 ", mean of the last %" PRId64 " steps: policy %.4f value %.4f legal %.5f "
               "acc %.3f f1 %.3f\n",
               step_end, tail.n, tail.np ? tail.p / (double)tail.np : NAN, tail.v / k, tail.l / k,
               tail.np ? tail.acc / (double)tail.np : NAN, tail.f1 / k);
    } else {
        printf("done: step %" PRId64 " (nothing left to train: the checkpoint is at --steps)\n", step_end);
    }

    /* The final net. */
    if (g_out[0]) {
        if (nn_weights_save(net, nt, g_out, err, sizeof err) != 0) {
            fprintf(stderr, "train: %s\n", err);
            goto done;
        }
        printf("wrote %s\n", g_out);
        status = 0;
        goto done;
    }
    uint64_t h = 0;
    int64_t bytes = 0;
    if (db_file_xxh3(ckpt, &h, &bytes, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    db_model_t latest;
    int64_t next = 0;
    db_status_t st = db_model_latest(db, &latest);
    if (st == DB_OK) {
        if (strcmp(latest.xxh3, hex) == 0) {
            printf("already registered: %s/%s (cycle %d) is this net\n", run, latest.path, latest.cycle);
            status = 0;
            goto done;
        }
        next = latest.cycle + 1;
    } else if (st != DB_NOTFOUND) {
        fprintf(stderr, "train: %s\n", db_errmsg(db));
        goto done;
    }
    db_model_t mr;
    memset(&mr, 0, sizeof mr);
    mr.cycle = (int32_t)next;
    mr.features_version = nc->features_version;
    train_model_rel_path(mr.path, sizeof mr.path, next);
    snprintf(mr.arch, sizeof mr.arch, "%s", arch);
    mr.train_steps = step_end;
    mr.train_samples = step_end * cfg.batch;
    mr.loss_policy = tail.np ? tail.p / (double)tail.np : NAN;
    mr.loss_value = tail.n ? tail.v / (double)tail.n : NAN;
    mr.loss_legal = tail.n ? tail.l / (double)tail.n : NAN;
    mr.loss_total = tail.n ? tail.total / (double)tail.n : NAN; /* the objective minimised (nn/net.h) */
    db_run_t rr;
    if (db_run_latest(db, &rr) == DB_OK) {
        mr.run_id = rr.id;
        db_run_clear(&rr);
    }
    snprintf(path, sizeof path, "%s/" TRAIN_MODELS_DIR, run);
    if (compat_mkdir_p(path, e2, sizeof e2) != 0) {
        fprintf(stderr, "train: %s: %s\n", path, e2);
        goto done;
    }
    snprintf(path, sizeof path, "%s/%s", run, mr.path);
    if (nn_weights_save(net, nt, path, err, sizeof err) != 0 ||
        train_model_register(writer, run, &mr, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "train: %s\n", err);
        goto done;
    }
    printf("wrote %s, registered as cycle %" PRId64 "\n", path, next);
    status = 0;
done:
    status_free(sl);
    train_dist_free(td);
    if (lf && fclose(lf) != 0) fprintf(stderr, "train: --losses %s: write failed\n", g_losses);
    fflush(stdout);
    free(list);
    shard_batch_free(batch);
    train_window_free(win);
    nn_trainer_free(nt);
    nn_net_free(net);
    nn_backend_free(be);
    db_close(db);
    if (writer) {
        if (db_writer_stop(writer, 10000) != DB_OK) fprintf(stderr, "train: %s: writer: some writes cancelled\n", run);
        db_writer_free(writer);
    }
    free(config_text);
    run_close(rn);
    return status;
}

int main(int argc, char **argv) {
    int status = train_main(argc, argv);
    while (g_dist && g_gates < TRAIN_GATES) gate(0); /* a rank that failed before the loop */
    dist_free(g_dist);
    return status;
}
