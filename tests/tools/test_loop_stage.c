/* test_loop_stage.c - the CPU twin of tools/gpu-checks.sh's `loop` stage (the
 * real loop on a lent GPU, issue 32), so that the script cannot rot between
 * sessions that have a device:
 *   1. GPU_CHECKS_CPU=1 ... loop: a tiny CPU selfplay from nothing, stopped by
 *      SIGINT once a model is published (LOOP_STOP_CYCLES=1: an event, not a
 *      time); the summary's figures present and sane (cycles >= 1, positions/s,
 *      evaluations/s, trainer samples/s and both device times > 0, samples per
 *      position against the configured 0.5, the split adding up to 100%, the
 *      run committed), the newest model (weights only), koma.db and the log
 *      under OUT, each at most 16 MiB, and summary.txt with the stage's PASS
 *      line and the summary;
 *   2. the same run collected again (LOOP_COLLECT=1) under a 1024-byte cap:
 *      the model left out with a message, the log cut to its last 1024 bytes;
 *   3. a LOOP_RUN that is not empty is refused (the loop starts from nothing).
 *
 *   test_loop_stage BASH BUILD_DIR
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tools/tools_test.h"

#define CAP_MIB (16 * 1024 * 1024)

static const char *g_bash, *g_build;

/* Runs the stage with OUT=out and the given extra NAME=VALUE settings (NULL-ended). */
static int run_stage(const char *out, const char *const *env) {
    char err[512];
    if (compat_mkdir_p(out, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    static const char *const names[] = {"LOOP_STOP_CYCLES", "LOOP_COLLECT", "LOOP_EXIT", "GPU_CHECKS_FILE_CAP",
                                        "LOOP_MINUTES", "LOOP_ARGS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) compat_setenv(names[i], "");
    compat_setenv("OUT", out);
    for (int i = 0; env[i]; i++) {
        char kv[1024];
        snprintf(kv, sizeof kv, "%s", env[i]);
        char *eq = strchr(kv, '=');
        KOMA_ASSERT(eq);
        *eq = 0;
        compat_setenv(kv, eq + 1);
    }
    /* unset is not portable in compat: an empty LOOP_ARGS would mean "no flags" */
    char script[1024];
    snprintf(script, sizeof script, "%s/tools/gpu-checks.sh", KOMA_SOURCE_DIR);
    const char *argv[] = {g_bash, script, "loop", NULL};
    return t_run(argv);
}

/* The value of KEY in a loop summary ("key value  note"), NAN when absent or not a number. */
static double figure(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, key, kl) && p[kl] == ' ') {
            char *end;
            double v = strtod(p + kl, &end);
            return end == p + kl ? NAN : v;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NAN;
}

static int has(const char *text, const char *needle) { return strstr(text, needle) != NULL; }

/* Files under OUT, and how many are over the device tool's 16 MiB. */
typedef struct {
    const char *dir;
    int n, over;
} out_files_t;
static int count_file(const char *name, int is_dir, void *user) {
    out_files_t *o = user;
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", o->dir, name);
    o->n++;
    if (is_dir || compat_file_size(p) > CAP_MIB) o->over++;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_loop_stage BASH BUILD_DIR\n");
        return 2;
    }
    g_bash = argv[1], g_build = argv[2];
    t_scratch("loop_stage");
    char run[900], build_env[1100];
    snprintf(run, sizeof run, "%s", t_path("run"));
    snprintf(build_env, sizeof build_env, "BUILD_DIR=%s", g_build);
    compat_setenv("GPU_CHECKS_CPU", "1");
    char run_env[1000];
    snprintf(run_env, sizeof run_env, "LOOP_RUN=%s", run);

    /* 1. the loop from nothing, stopped by SIGINT once model 1 is published */
    const char *out1 = t_path("out1");
    const char *env1[] = {build_env, run_env, "LOOP_STOP_CYCLES=1", "LOOP_MINUTES=10",
                          "LOOP_ARGS=--net 2x16 --games-per-cycle 4 --shard-games 0 --threads 1 --games-per-thread 4 "
                          "--visits 8 --visits-fast 4 --max-ply 48 --eval-every 0 --min-steps-per-cycle 4 "
                          "--progress 0 --cycles 1000",
                          NULL};
    int rc = run_stage(out1, env1);
    CHECKF(rc == 0, "the loop stage exited %d", rc);
    char *sum = t_read_file(t_path("out1/loop-summary.txt"), NULL);
    printf("---- loop-summary.txt\n%s----\n", sum);
    CHECKF(has(sum, "selfplay exit 130: stopped as asked (SIGINT); run committed: yes"), "first line: %.200s", sum);
    double cycles = figure(sum, "cycles_published");
    CHECKF(cycles >= 1, "cycles_published %g", cycles);
    const char *positive[] = {"wall_s", "positions_per_s", "committed_positions_per_s", "evals_per_s",
                              "trainer_samples_per_s", "samples_per_position", "device_s_inference",
                              "device_s_training", "games"};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) {
        double v = figure(sum, positive[i]);
        CHECKF(v > 0 && isfinite(v), "%s %g", positive[i], v);
    }
    double batch = figure(sum, "avg_batch");
    CHECKF(batch >= 1 && batch <= 256, "avg_batch %g (max batch 256)", batch);
    double busy = figure(sum, "inference_busy_pct");
    CHECKF(busy > 0 && busy <= 100, "inference_busy_pct %g", busy);
    CHECKF(fabs(figure(sum, "samples_per_position_configured") - 0.5) < 1e-9, "configured samples per position");
    double si = figure(sum, "device_split_inference_pct"), st = figure(sum, "device_split_training_pct");
    CHECKF(si > 0 && st > 0 && fabs(si + st - 100) < 0.2, "split %g + %g", si, st);
    CHECK(has(sum, "run_committed                    yes"));
    CHECK(has(sum, "loop-model.safetensors: ") && has(sum, "as weights only (ship-net)"));

    /* the files under OUT: each at most 16 MiB, at most 8 */
    const char *files[] = {"loop-model.safetensors", "loop-koma.db", "loop-run.log", "loop-summary.txt",
                           "summary.txt", "loop.log"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[64];
        snprintf(p, sizeof p, "out1/%s", files[i]);
        int64_t n = compat_file_size(t_path(p));
        CHECKF(n > 0 && n <= CAP_MIB, "%s: %lld bytes", files[i], (long long)n);
    }
    out_files_t of = {out1, 0, 0};
    char err[512];
    CHECKF(compat_list_dir(out1, count_file, &of, err, sizeof err) == 0, "%s", err);
    CHECKF(of.n >= 6 && of.n <= 8 && of.over == 0, "%d files under OUT, %d over 16 MiB", of.n, of.over);
    /* the model: a weights file that says where it came from */
    char *model = t_read_file(t_path("out1/loop-model.safetensors"), NULL);
    CHECK(has(model + 8, "\"koma.kind\":\"weights\"") || has(model + 8, "\"koma.kind\": \"weights\""));
    CHECK(has(model + 8, "koma.shipped.loop"));
    free(model);
    /* koma.db: the same models as the summary counts (0 is the random net) */
    long long models = t_sql_int(t_path("out1/loop-koma.db"), "SELECT count(*) FROM models");
    CHECKF(models == (long long)cycles + 1, "%lld models in the copied koma.db, %g cycles", models, cycles);
    char *log = t_read_file(t_path("out1/loop-run.log"), NULL);
    CHECK(has(log, "model 1/1000 published") && has(log, "stop requested"));
    free(log);
    char *summary = t_read_file(t_path("out1/summary.txt"), NULL);
    CHECK(has(summary, "---- loop summary") && has(summary, "PASS     loop "));
    free(summary);

    /* 2. collected again under a 1024-byte cap */
    const char *out2 = t_path("out2");
    const char *env2[] = {build_env, run_env, "LOOP_COLLECT=1", "LOOP_EXIT=130", "GPU_CHECKS_FILE_CAP=1024", NULL};
    rc = run_stage(out2, env2);
    CHECKF(rc == 0, "the collect run exited %d", rc);
    char *sum2 = t_read_file(t_path("out2/loop-summary.txt"), NULL);
    char *full2 = t_read_file(t_path("out2/loop.log"), NULL);
    CHECKF(figure(full2, "cycles_published") == cycles, "the same run: cycles %g", figure(full2, "cycles_published"));
    CHECK(has(full2, "loop-model.safetensors: ") && has(full2, "is over the cap of 1024 (gzipped too): left out"));
    CHECK(has(full2, "loop-run.log: ") && has(full2, "only its last 1024 bytes came back"));
    CHECK(!compat_file_exists(t_path("out2/loop-model.safetensors")));
    CHECKF(compat_file_size(t_path("out2/loop-run.log")) == 1024, "cut log %lld bytes",
           (long long)compat_file_size(t_path("out2/loop-run.log")));
    free(sum2);
    free(full2);

    /* 3. not from nothing: refused */
    const char *out3 = t_path("out3");
    const char *env3[] = {build_env, run_env, "LOOP_MINUTES=10", NULL};
    rc = run_stage(out3, env3);
    CHECKF(rc == 1, "a used LOOP_RUN: exit %d", rc);
    char *s3 = t_read_file(t_path("out3/summary.txt"), NULL);
    CHECK(has(s3, "FAIL") && has(s3, "is not empty: the loop starts from nothing"));
    free(s3);
    free(sum);
    t_rm_rf(t_dir);
    return t_done("test_loop_stage");
}
