/* bench_ranks.c - the limits of rank 0 in `mpirun -np N selfplay`.
 *
 *   build/bench/bench_ranks [--games 400] [--max-ply 160] [--shard-games 32]
 *       rank 0's commit path without MPI: game messages as the playing ranks
 *       send them (games played against a hash network double, encoded by
 *       selfplay/wire.c) are decoded (checksum, legality replay, rows rebuilt),
 *       added to shard builders (sp_record_add_to_shard, with rank and host)
 *       and committed through the writer thread (shard_submit: file, fsync,
 *       rename, one transaction per shard) in a scratch run; prints games/s
 *       and positions/s for the decode alone and for the whole path, and the
 *       bytes per game message.
 *   mpirun -np 2 build/bench/bench_ranks --net-mb 1,8,32 [--reps 5]
 *       a net to every other rank as `selfplay` sends it: the file's bytes in
 *       one NET message (dist/ mailbox), decoded and XXH3-verified on the
 *       receiver, which answers; rank 0 times send to answer.
 * Owns: its scratch directory (removed). Errors: exit 1 with a message.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "compat/bits.h"
#include "compat/compat.h"
#include "data/db.h"
#include "data/run.h"
#include "data/shard.h"
#include "data/writer.h"
#include "dist/dist.h"
#include "engine/encode.h"
#include "selfplay/game.h"
#include "selfplay/wire.h"
#include "tests/selfplay/sp_hash_net.h"

static double now_s(void) { return (double)compat_now_ns() * 1e-9; }

typedef struct {
    _Atomic int64_t done, failed;
} commit_state_t;

static void shard_done(void *user, int status, const char *err, const db_shard_t *sh) {
    (void)sh;
    commit_state_t *c = user;
    if (status != DB_OK) {
        fprintf(stderr, "bench_ranks: shard commit: %s\n", err);
        atomic_fetch_add(&c->failed, 1);
    }
    atomic_fetch_add(&c->done, 1);
}

static int bench_commit(int32_t games, int32_t max_ply, int32_t shard_games) {
    char err[2048];
    sp_config_t cfg;
    sp_config_default(&cfg);
    cfg.max_ply = max_ply;
    cfg.visits = 8;
    cfg.visits_fast = 4;
    cfg.gumbel_m = 8;
    cfg.full_prob = 0.25; /* the default's share of full searches */
    sp_game_t *g = sp_game_new(&cfg, 1234, NULL);
    uint8_t **msg = calloc((size_t)games, sizeof *msg);
    int64_t *len = calloc((size_t)games, sizeof *len);
    if (!g || !msg || !len) {
        fprintf(stderr, "bench_ranks: out of memory\n");
        return 1;
    }
    double t0 = now_s();
    int64_t bytes = 0, rows = 0;
    for (int32_t i = 0; i < games; i++) {
        sp_record_t *r = sp_hash_play_game(g, 1);
        if (!r) {
            fprintf(stderr, "bench_ranks: a game did not end\n");
            return 1;
        }
        rows += r->n_rows;
        msg[i] = sp_wire_game_encode(r, &len[i]);
        bytes += len[i];
        sp_record_free(r);
    }
    sp_game_free(g);
    printf("games: %d played against a hash net in %.1f s (not timed below): %.1f positions/game, %.0f bytes/message\n",
           games, now_s() - t0, (double)rows / games, (double)bytes / games);

    /* decode only */
    t0 = now_s();
    for (int32_t i = 0; i < games; i++) {
        sp_record_t *r = sp_wire_game_decode(msg[i], len[i], err, sizeof err);
        if (!r) {
            fprintf(stderr, "bench_ranks: decode: %s\n", err);
            return 1;
        }
        sp_record_free(r);
    }
    double td = now_s() - t0;
    printf("decode (XXH3, replay, rows rebuilt): %.0f games/s, %.0f positions/s\n", games / td, (double)rows / td);

    /* the whole path into a scratch run */
    char dir[900], path[1000];
    snprintf(dir, sizeof dir, "%s/koma_bench_ranks_%d", compat_temp_dir(), compat_getpid());
    run_path(dir, RUN_DB, path, sizeof path);
    db_t *db = NULL;
    if (compat_mkdir_p(dir, err, sizeof err) != 0 || db_open(path, 0, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "bench_ranks: %s\n", err);
        return 1;
    }
    db_writer_t *w = db_writer_start(db, 64, err, sizeof err);
    if (!w) {
        fprintf(stderr, "bench_ranks: %s\n", err);
        return 1;
    }
    const shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    commit_state_t cs;
    atomic_init(&cs.done, 0);
    atomic_init(&cs.failed, 0);
    int64_t submitted = 0;
    shard_builder_t *b = NULL;
    t0 = now_s();
    for (int32_t i = 0; i < games; i++) {
        if (!b && !(b = shard_builder_new(&fmt, err, sizeof err))) break;
        sp_record_t *r = sp_wire_game_decode(msg[i], len[i], err, sizeof err);
        if (!r || sp_record_add_to_shard(r, b, 0, 1 + i % 3, "bench-host", err, sizeof err) != 0) {
            fprintf(stderr, "bench_ranks: %s\n", err);
            return 1;
        }
        sp_record_free(r);
        if (shard_builder_games(b) == shard_games || i == games - 1) {
            char rel[64];
            snprintf(rel, sizeof rel, "shards/b%06" PRId64 ".safetensors", submitted);
            if (shard_submit(w, dir, rel, 1, b, shard_done, &cs, 600000) != DB_OK) {
                fprintf(stderr, "bench_ranks: shard_submit failed\n");
                return 1;
            }
            b = NULL;
            submitted++;
        }
    }
    db_writer_flush(w, 600000);
    while (atomic_load(&cs.done) < submitted) compat_sleep_ms(1);
    double tc = now_s() - t0;
    db_writer_stop(w, 60000);
    db_writer_free(w);
    int64_t ng = 0, np = 0;
    db_count(db, 1, &ng, &np);
    db_close(db);
    printf("commit (decode, shard builder, writer: file + fsync + one transaction per %d games): %.0f games/s, "
           "%.0f positions/s (%" PRId64 " games, %" PRId64 " positions in koma.db, %" PRId64 " shards, %" PRId64
           " failed)\n",
           shard_games, games / tc, (double)rows / tc, ng, np, submitted, (int64_t)atomic_load(&cs.failed));
    compat_remove_tree(dir, err, sizeof err);
    for (int32_t i = 0; i < games; i++) free(msg[i]);
    free(msg);
    free(len);
    return ng == games && atomic_load(&cs.failed) == 0 ? 0 : 1;
}

/* ---- nets over the mailbox ------------------------------------------------------------ */

static int bench_net(dist_t *d, const char *sizes, int reps) {
    char err[1024];
    int32_t rank = dist_rank(d), size = dist_size(d);
    dist_mail_t *m = dist_mail_start(d, 4, 4, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_ranks: %s\n", err);
        return 1;
    }
    int rc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", sizes);
    for (char *tok = strtok(list, ","); tok && rc == 0; tok = strtok(NULL, ",")) {
        int64_t mb = atoll(tok), n = mb << 20;
        for (int rep = 0; rep <= reps && rc == 0; rep++) { /* rep 0: warm-up */
            if (rank == 0) {
                uint8_t *file = malloc((size_t)n);
                if (!file) return 1;
                for (int64_t i = 0; i < n; i++) file[i] = (uint8_t)(i * 2654435761u >> 13);
                double t0 = now_s();
                int64_t len = 0;
                uint64_t h = XXH3_64bits(file, (size_t)n);
                uint8_t *msg = sp_wire_net_encode(rep, 7, h, file, n, &len);
                free(file);
                if (!msg || dist_mail_send(m, DIST_ALL_OTHERS, SP_TAG_NET, msg, len, 60000, err, sizeof err) != DIST_OK) {
                    fprintf(stderr, "bench_ranks: send: %s\n", err);
                    rc = 1;
                }
                free(msg);
                for (int32_t k = 1; k < size && rc == 0; k++) {
                    dist_msg_t *a = NULL;
                    if (dist_mail_recv(m, &a, 60000, err, sizeof err) != DIST_OK) {
                        fprintf(stderr, "bench_ranks: no answer within 60 s: %s\n", err);
                        rc = 1;
                    }
                    dist_msg_free(a);
                }
                double t = now_s() - t0;
                if (rep > 0 && rc == 0)
                    printf("net %" PRId64 " MB to %d rank(s): %.1f ms (%.2f ms/MB), XXH3 verified there\n", mb,
                           size - 1, t * 1e3, t * 1e3 / (double)mb);
            } else {
                dist_msg_t *a = NULL;
                if (dist_mail_recv(m, &a, 60000, err, sizeof err) != DIST_OK) {
                    fprintf(stderr, "bench_ranks: rank %d: no net within 60 s\n", rank);
                    rc = 1;
                    break;
                }
                int64_t cycle, fl;
                uint64_t seed, x;
                const uint8_t *file;
                if (sp_wire_net_decode(a->data, a->len, &cycle, &seed, &x, &file, &fl, err, sizeof err) != 0) {
                    fprintf(stderr, "bench_ranks: rank %d: %s\n", rank, err);
                    rc = 1;
                }
                dist_msg_free(a);
                uint8_t ok = 1;
                if (dist_mail_send(m, 0, SP_TAG_STATS, &ok, 1, 60000, err, sizeof err) != DIST_OK) rc = 1;
            }
        }
    }
    dist_mail_flush(m, 60000, err, sizeof err);
    dist_mail_stop(m);
    return rc;
}

int main(int argc, char **argv) {
    int32_t games = 400, max_ply = 160, shard_games = 32, reps = 5;
    const char *net_mb = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--games") && i + 1 < argc) games = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-ply") && i + 1 < argc) max_ply = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shard-games") && i + 1 < argc) shard_games = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--net-mb") && i + 1 < argc) net_mb = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ranks [--games N] [--max-ply P] [--shard-games G] | "
                            "mpirun -np 2 bench_ranks --net-mb 1,8,32 [--reps R]\n(unknown argument '%s')\n",
                    argv[i]);
            return 2;
        }
    }
    if (games < 1 || max_ply < 1 || shard_games < 1 || reps < 1) {
        fprintf(stderr, "bench_ranks: --games, --max-ply, --shard-games and --reps must be >= 1\n");
        return 2;
    }
    char err[1024];
    dist_t *d = dist_init(&argc, &argv, err, sizeof err);
    if (!d) {
        fprintf(stderr, "bench_ranks: %s\n", err);
        return 1;
    }
    int rc;
    if (net_mb) {
        if (dist_size(d) < 2) {
            fprintf(stderr, "bench_ranks: --net-mb needs mpirun -np 2 or more\n");
            rc = 2;
        } else {
            rc = bench_net(d, net_mb, reps);
        }
    } else {
        rc = dist_rank(d) == 0 ? bench_commit(games, max_ply, shard_games) : 0;
    }
    dist_free(d);
    return rc;
}
