/* bench_train.c - trainer speed: samples/s of whole training steps (window
 * sampling + gather from the mapped shards + nn_train_step) for a net and
 * batch, with the time split between the gather and the step.
 *
 * Usage: bench_train [--net 6x64] [--batch 128] [--steps 30] [--games 48]
 *                    [--train-threads 0] [--cpu-time] [--keep] [trainer flags]
 * It builds a scratch run (random playouts from the start position, encoded
 * like self-play rows) under the temporary directory, then times --steps
 * steps after 3 untimed ones, and one train_trainer_run_cycle of the same
 * length. --cpu-time reports process CPU seconds as well (per-core figures
 * on a shared machine, with --train-threads 1). --keep leaves the scratch run
 * (koma.db, shards/, models/) in place and prints its path: a sample run for
 * trying `train --from-games`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "config/config.h"
#include "data/db.h"
#include "data/run.h"
#include "data/shard.h"
#include "data/writer.h"
#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/sfen.h"
#include "nn/weights.h"
#include "train/trainer.h"
#include "train/window.h"

static uint64_t g_rng = 0x5EEDull;
static uint64_t rnd(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const shard_format_t FMT = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};

/* One game of random moves, up to 120 plies, every position a row with a
 * policy target spread over up to 8 legal moves (like visit counts). */
static void add_game(shard_builder_t *b, pos_t *pos) {
    char err[512];
    pos_set_startpos(pos);
    int32_t result = (rnd() & 1) ? 1 : -1, ply = 0;
    for (; ply < 120; ply++) {
        move_list_t list;
        movegen_legal(pos, &list);
        if (list.n == 0) break;
        uint8_t planes[ENC_PACKED_BYTES], legal[ENC_LEGAL_BYTES], posb[SHARD_POSITION_BYTES] = {0};
        float hand[ENC_HAND], prob[8];
        uint16_t label[8];
        encode_position(pos, planes, hand);
        encode_legal_mask(pos, legal);
        int32_t k = list.n < 8 ? list.n : 8;
        for (int32_t i = 0; i < k; i++) {
            label[i] = (uint16_t)encode_move_label(pos, list.moves[i]);
            prob[i] = 1.0f / (float)k;
        }
        shard_position_t sp = {.side = (uint8_t)pos->side, .ply = (uint16_t)pos->game_ply};
        memcpy(sp.board, pos->board, 81);
        sp.hand[0] = pos->hand[0], sp.hand[1] = pos->hand[1];
        shard_position_pack(&sp, posb);
        move_t mv = list.moves[rnd() % (uint64_t)list.n];
        shard_row_t row = {.planes = planes, .hand = hand, .legal = legal, .policy_label = label,
                           .policy_prob = prob, .policy_n = k, .root_q = 0.0f, .ply = (uint16_t)ply,
                           .move = (uint16_t)mv, .position = posb};
        if (shard_builder_add_row(b, &row, err, sizeof err) != 0) {
            fprintf(stderr, "bench_train: %s\n", err);
            exit(1);
        }
        pos_do_move(pos, mv);
    }
    db_game_t g = {.start_sfen = "startpos", .moves = "", .plies = 0, .result = result, .reason = DB_REASON_ABORT};
    if (shard_builder_end_game(b, &g, err, sizeof err) != 0) {
        fprintf(stderr, "bench_train: %s\n", err);
        exit(1);
    }
}

static void on_done(void *user, int status, const char *err, const db_shard_t *shard) {
    (void)shard;
    if (status != DB_OK) fprintf(stderr, "bench_train: shard: %s\n", err);
    *(int *)user = status;
}

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

int main(int argc, char **argv) {
    train_config_t cfg = train_config_default();
    int64_t steps = 30, games = 48;
    int cpu_time = 0, keep = 0;
    cfg_opt_t opts[64];
    int n = 0;
    opts[n++] = (cfg_opt_t){"steps", CFG_TYPE_INT, &steps, 1, 1e9, "timed steps"};
    opts[n++] = (cfg_opt_t){"games", CFG_TYPE_INT, &games, 1, 1e6, "random games in the scratch run"};
    opts[n++] = (cfg_opt_t){"cpu-time", CFG_TYPE_BOOL, &cpu_time, 1, 0, "also report process CPU time"};
    opts[n++] = (cfg_opt_t){"keep", CFG_TYPE_BOOL, &keep, 1, 0, "keep the scratch run and print its path"};
    n += train_config_flags(&cfg, opts + n, 64 - n);
    char err[2048];
    int np = 0;
    int rc = cfg_parse(opts, n, argc, argv, 1, NULL, 0, &np, "usage: bench_train [flags]", stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK || train_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 2;
    }
    cfg.min_steps_per_cycle = cfg.max_steps_per_cycle = steps;
    cfg.log = NULL;

    char run[1024], path[1200];
    snprintf(run, sizeof run, "%s/koma_bench_train_%d", compat_temp_dir(), compat_getpid());
    if (compat_mkdir_p(run, err, sizeof err) != 0) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 1;
    }
    run_path(run, RUN_DB, path, sizeof path);
    db_t *db = NULL;
    if (db_open(path, 0, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 1;
    }
    db_writer_t *w = db_writer_start(db, 256, err, sizeof err);
    pos_t *pos = malloc(sizeof *pos);
    int64_t rows = 0;
    for (int64_t g0 = 0, seq = 1; g0 < games; g0 += 16, seq++) {
        shard_builder_t *b = shard_builder_new(&FMT, err, sizeof err);
        for (int64_t g = g0; g < games && g < g0 + 16; g++) add_game(b, pos);
        rows += shard_builder_rows(b);
        char rel[128];
        int st = -100;
        shard_path_format(rel, sizeof rel, 1, seq);
        if (shard_submit(w, run, rel, 1, b, on_done, &st, -1) != DB_OK || db_writer_flush(w, -1) != DB_OK || st != DB_OK) {
            fprintf(stderr, "bench_train: could not write the scratch shards in %s\n", run);
            return 1;
        }
    }
    free(pos);

    train_trainer_t *tr = train_trainer_new(&cfg, run, w, NULL, err, sizeof err);
    if (!tr) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 1;
    }
    /* The step loop by hand, timing its two halves. */
    db_t *ro = NULL;
    db_open(path, DB_OPEN_READONLY, &ro, err, sizeof err);
    db_shard_t *list = NULL;
    int32_t nl = 0;
    db_shards_recent(ro, 0, &list, &nl);
    train_window_t *win = train_window_new(run, &FMT, NULL, NULL, err, sizeof err);
    shard_batch_t *batch = shard_batch_new(&FMT, cfg.batch, 0, err, sizeof err);
    int64_t wpos = 0;
    int32_t bad = 0;
    train_window_select(win, list, nl, -1, 0, &wpos, &bad, err, sizeof err);
    nn_optim_t *nt = train_trainer_nn(tr);
    nn_metrics_t m;
    double t_gather = 0, t_step = 0, c0 = 0;
    for (int64_t s = -3; s < steps; s++) {
        if (s == 0) c0 = cpu_s();
        int64_t a = compat_now_ns();
        if (train_window_sample(win, train_key(1, 0, s + 3), cfg.batch, batch, err, sizeof err) != 0) {
            fprintf(stderr, "bench_train: %s\n", err);
            return 1;
        }
        int64_t b = compat_now_ns();
        nn_batch_t bt = shard_batch_view(batch);
        if (nn_train_step(nt, &bt, &m, err, sizeof err) != 0) {
            fprintf(stderr, "bench_train: %s\n", err);
            return 1;
        }
        int64_t c = compat_now_ns();
        if (s >= 0) t_gather += (double)(b - a) * 1e-9, t_step += (double)(c - b) * 1e-9;
    }
    double cpu = cpu_s() - c0;
    char arch[64], size[32];
    const nn_net_config_t *nc = nn_net_config(train_trainer_net(tr));
    snprintf(arch, sizeof arch, "%s %s", nn_net_arch_format(nc, size, sizeof size),
             nn_act_name(nc->act));
    double samples = (double)steps * cfg.batch;
    printf("bench_train: net %s, batch %d, %s backend, %d thread(s), window %" PRId64 " positions\n", arch, cfg.batch,
           cfg.backend, cfg.threads, wpos);
    printf("  steps by hand: %.0f samples/s (gather %.2f ms/step = %.1f%%, train step %.1f ms/step)", samples / (t_gather + t_step),
           1e3 * t_gather / (double)steps, 100 * t_gather / (t_gather + t_step), 1e3 * t_step / (double)steps);
    if (cpu_time) printf(", %.0f samples per CPU-second", samples / cpu);
    printf("\n");
    train_cycle_report_t rep;
    if (train_trainer_run_cycle(tr, 1, &rep, err, sizeof err) != 0) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 1;
    }
    printf("  train_trainer_run_cycle: %" PRId64 " steps, %.0f samples/s, %.2f s with the model write and registration\n",
           rep.steps, rep.samples_per_s, rep.seconds);
    free(list);
    shard_batch_free(batch);
    train_window_free(win);
    db_close(ro);
    train_trainer_free(tr);
    db_writer_stop(w, 10000);
    db_writer_free(w);
    db_close(db);
    if (keep) {
        printf("  kept the scratch run: %s\n", run);
        return 0;
    }
    char rerr[512];
    if (compat_remove_tree(run, rerr, sizeof rerr) != 0) fprintf(stderr, "bench_train: %s\n", rerr);
    return 0;
}
