/* test_train_from_games.c - the `train --from-games` program: an interrupted
 * run (it dies like kill -9 right after step 13, the checkpoint being at
 * step 10) continued by the same command ends with the same weights and
 * optimizer state as an uninterrupted run; so does one killed by a real
 * SIGKILL at whatever step it lands; --steps 10 then --steps 20 too;
 * the default output registers the next cycle's model and a repeat of the
 * same command does not register it twice; progress lines; clear errors
 * naming the run directory or file. */
#include "train_test.h"

#ifndef KOMA_TRAIN_BIN
#error "KOMA_TRAIN_BIN: the path of the train executable (tests/train/CMakeLists.txt)"
#endif

static char g_run[900], g_out[900], g_errf[900];

/* Runs `train <args>` with stdout and stderr to files; returns the exit code.
 * args are split at spaces, "double quotes" group (no shell is involved, so
 * the test runs the same on Windows). */
static int run_train(const char *args) {
    static char buf[4096];
    const char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    argv[argc++] = KOMA_TRAIN_BIN;
    argc = t_split_args(buf, argv, argc, 64);
    char err[512];
    int status = -1;
    if (compat_run_io(argv, g_out, g_errf, &status, err, sizeof err) != 0) {
        fprintf(stderr, "test_train_from_games: %s\n", err);
        return -1;
    }
    return status;
}

#define CHECK_RUN(cond) T_CHECK_RUN(cond, g_out, g_errf)

static int out_has(const char *what) {
    char *o = t_read_file(g_out, NULL);
    int r = strstr(o, what) != NULL;
    free(o);
    return r;
}

static int err_has(const char *what) {
    char *e = t_read_file(g_errf, NULL);
    int r = strstr(e, what) != NULL;
    free(e);
    return r;
}

static int64_t ckpt_step(void) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/train/checkpoint.safetensors", g_run);
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = nn_weights_load(be, path, -1, err, sizeof err);
    int64_t s = -1;
    if (net) {
        nn_optim_t *nt = nn_optim_new(net, NULL, 1, err, sizeof err);
        if (nn_weights_read(net, nt, path, err, sizeof err) == 0) s = nn_optim_step_count(nt);
        nn_optim_free(nt);
    }
    nn_net_free(net);
    nn_backend_free(be);
    return s;
}

static void rm_ckpt(void) {
    char path[1000];
    snprintf(path, sizeof path, "%s/train/checkpoint.safetensors", g_run);
    compat_remove_file(path);
}

static int64_t models_count(void) {
    char path[1000], err[1024];
    snprintf(path, sizeof path, "%s/koma.db", g_run);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    db_summary_t s;
    KOMA_ASSERT(db_summary(db, &s) == DB_OK);
    db_close(db);
    return s.models;
}

int main(void) {
    t_scratch("train_from_games");
    snprintf(g_out, sizeof g_out, "%s", t_path("stdout.txt"));
    snprintf(g_errf, sizeof g_errf, "%s", t_path("stderr.txt"));
    snprintf(g_run, sizeof g_run, "%s", t_path("run"));
    t_run_t R;
    t_run_open(&R, g_run);
    t_rng = 99;
    t_add_shard(&R, 1, 4, 14);
    t_add_shard(&R, 1, 4, 14);
    t_run_close(&R);

    char common[2048], args[4096];
    snprintf(common, sizeof common,
             "--from-games --run \"%s\" --batch 16 --net 1x16 --train-threads 1 --checkpoint-every 5 "
             "--lr-total-steps 20 --warmup-steps 3 --lr 0.05",
             g_run);
    const char *U = t_path("U.safetensors"), *K = t_path("K.safetensors"), *S = t_path("S.safetensors");

    /* uninterrupted */
    snprintf(args, sizeof args, "%s --steps 20 --fresh --out \"%s\"", common, U);
    int rc = run_train(args);
    CHECK_RUN(rc == 0);
    CHECK_RUN(out_has("step 20/20") && out_has("samples/s") && out_has("ETA") && out_has("done: step 20"));
    CHECK(ckpt_step() == 20);

    /* killed right after step 13 (checkpoint at 10), then the same command */
    rm_ckpt();
    char stale[1000];
    snprintf(stale, sizeof stale, "%s/train/checkpoint.safetensors.tmp.4242", g_run); /* a save killed mid-write */
    FILE *sf = fopen(stale, "wb");
    KOMA_ASSERT(sf && fputs("half", sf) >= 0 && fclose(sf) == 0);
    snprintf(args, sizeof args, "%s --steps 20 --out \"%s\" --die-at-step 13", common, K);
    rc = run_train(args);
    CHECK_RUN(rc == 137);
    CHECK(ckpt_step() == 10 && !compat_file_exists(K));
    snprintf(args, sizeof args, "%s --steps 20 --out \"%s\"", common, K);
    rc = run_train(args);
    CHECK_RUN(rc == 0 && out_has("resuming at step 10"));
    CHECK(!compat_file_exists(stale));
    int64_t su = -1, sk = -2;
    double d = t_weights_diff(U, K, &su, &sk);
    fprintf(stderr, "killed at 13 + resumed vs uninterrupted: max diff %.3g, steps %" PRId64 "/%" PRId64 "\n", d, su, sk);
    CHECK(d <= 1e-6 && su == 20 && sk == 20);

    /* a real kill -9 at whatever moment it lands (after the first checkpoint),
     * then the same command: the same weights as an uninterrupted run */
    {
        const char *U40 = t_path("U40.safetensors"), *K40 = t_path("K40.safetensors");
        char steps_s[] = "40";
        rm_ckpt();
        snprintf(args, sizeof args, "%s --steps 40 --fresh --out \"%s\"", common, U40);
        CHECK_RUN(run_train(args) == 0);
        rm_ckpt();
        const char *argv[] = {KOMA_TRAIN_BIN, "--from-games", "--run", g_run, "--batch", "16", "--net", "1x16",
                              "--train-threads", "1", "--checkpoint-every", "5", "--lr-total-steps", "20",
                              "--warmup-steps", "3", "--lr", "0.05", "--steps", steps_s, "--out", K40, NULL};
        char perr[512];
        compat_proc_t *p = compat_proc_spawn(argv, "", perr, sizeof perr);
        CHECK(p != NULL);
        int64_t at = -1;
        if (p) {
            char ck[1000];
            snprintf(ck, sizeof ck, "%s/train/checkpoint.safetensors", g_run);
            int64_t until = compat_now_ms() + 60000;
            while (!compat_file_exists(ck) && compat_now_ms() < until && compat_proc_wait(p, 0, NULL) == 1)
                compat_sleep_ms(2);
            compat_sleep_ms(20);
            compat_proc_kill(p);
            int status = 0;
            CHECK(compat_proc_wait(p, 10000, &status) == 0);
            compat_proc_free(p);
            at = ckpt_step();
            fprintf(stderr, "kill -9 landed with the checkpoint at step %" PRId64 " of 40 (status %d)\n", at, status);
            CHECK(at >= 5);
        }
        snprintf(args, sizeof args, "%s --steps 40 --out \"%s\"", common, K40);
        CHECK_RUN(run_train(args) == 0);
        if (at < 40) CHECK_RUN(out_has("resuming at step"));
        int64_t s1 = -1, s2 = -2;
        double dk = t_weights_diff(U40, K40, &s1, &s2);
        fprintf(stderr, "kill -9 + resumed vs uninterrupted (40 steps): max diff %.3g\n", dk);
        CHECK(dk <= 1e-6 && s1 == 40 && s2 == 40);
    }

    /* --steps 10, then --steps 20 */
    rm_ckpt();
    snprintf(args, sizeof args, "%s --steps 10 --out \"%s\"", common, S);
    CHECK_RUN(run_train(args) == 0);
    CHECK(ckpt_step() == 10);
    double d10 = t_weights_diff(U, S, NULL, NULL);
    snprintf(args, sizeof args, "%s --steps 20 --out \"%s\"", common, S);
    CHECK_RUN(run_train(args) == 0);
    d = t_weights_diff(U, S, &su, &sk);
    fprintf(stderr, "10 then 20 vs 20: max diff %.3g (after 10 only: %.3g)\n", d, d10);
    CHECK(d <= 1e-6 && sk == 20);
    CHECK(d10 > 1e-4); /* the comparison can fail */

    /* default output: the next cycle's model, registered once */
    CHECK(models_count() == 0);
    snprintf(args, sizeof args, "%s --steps 20", common);
    CHECK_RUN(run_train(args) == 0 && out_has("registered as cycle 0"));
    char m0[1000];
    snprintf(m0, sizeof m0, "%s/models/0000.safetensors", g_run);
    CHECK(compat_file_exists(m0) && models_count() == 1);
    CHECK(t_weights_diff(U, m0, NULL, NULL) <= 1e-6);
    CHECK_RUN(run_train(args) == 0 && out_has("already registered"));
    CHECK(models_count() == 1);
    snprintf(args, sizeof args, "%s --steps 25", common);
    CHECK_RUN(run_train(args) == 0 && out_has("registered as cycle 1"));
    CHECK(models_count() == 2);

    /* errors */
    snprintf(args, sizeof args, "--from-games --run \"%s\"", t_path("no_such_run"));
    CHECK_RUN(run_train(args) == 1 && err_has("no_such_run") && err_has("no such run directory"));
    snprintf(args, sizeof args, "--from-games --run \"%s\"", t_dir);
    CHECK_RUN(run_train(args) == 1 && err_has("koma.db") && err_has("not a Koma run directory"));
    snprintf(args, sizeof args, "--run \"%s\"", g_run);
    CHECK_RUN(run_train(args) == 2 && err_has("--from-games"));
    snprintf(args, sizeof args, "%s --steps 30 --net 2x16", common);
    CHECK_RUN(run_train(args) == 1 && err_has("checkpoint.safetensors") && err_has("--fresh"));
    snprintf(args, sizeof args, "%s --bogus 3", common);
    CHECK_RUN(run_train(args) == 2 && err_has("bogus"));
    /* a corrupt checkpoint is named */
    char ck[1000];
    snprintf(ck, sizeof ck, "%s/train/checkpoint.safetensors", g_run);
    t_corrupt(ck);
    snprintf(args, sizeof args, "%s --steps 30", common);
    CHECK_RUN(run_train(args) == 1 && err_has("checkpoint.safetensors") && err_has("--fresh"));

    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_from_games");
}
