/* test_selfplay_badnet.c - a run whose newest model is a valid file that
 * holds no net: a NaN, or a negative batch-norm running variance, in a file
 * whose tensor checksums and koma.db XXH3 were recomputed (so only the
 * values betray it). The real `selfplay` must refuse to resume from it (exit
 * 1), naming the file, the tensor and the index, and publish nothing; it
 * used to play with the NaN net (a uniform policy and a zero value) or to
 * take the negative variance. With the original file put back, the same
 * command resumes the run: the refusal was for the values alone.
 * Before that, the start-up checks of the game slots: --visits 10000000
 * refused naming the flags and the memory (it was "out of memory for 1 x 2
 * game slots"), --games-per-thread capped by --games-per-cycle in the log.
 */
#include "sp_test.h"

#include "nn/safetensors.h"
#include "nn/weights.h"
#include "selfplay/config.h"
#include "selfplay/driver.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif

static int run_selfplay_gpt(const char *dir, const char *cycles, const char *gpt, const char *visits, const char *log) {
    const char *argv[] = {KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", cycles, "--games-per-cycle", "2",
                          "--threads", "1", "--games-per-thread", gpt, "--visits", visits, "--visits-fast", "4",
                          "--gumbel-m", "4", "--max-ply", "24", "--net", "2x16", "--eval-every", "0", "--progress", "0",
                          "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "2", "--batch", "16",
                          "--window-min", "10", "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1", NULL};
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_SELFPLAY_BIN, err);
        exit(2);
    }
    int status = -1;
    int still = compat_proc_wait(p, 240000, &status);
    if (still) {
        compat_proc_kill(p);
        status = -1;
    }
    compat_proc_free(p);
    return status;
}

static int run_selfplay(const char *dir, const char *cycles, const char *log) {
    return run_selfplay_gpt(dir, cycles, "2", "8", log);
}

/* Writes src's net to dst with tensor[index] = v, through the safetensors
 * writer (checksums of the new bytes), and registers dst's XXH3 for cycle. */
static void poison(const char *src, const char *dst, const char *tensor, int64_t index, float v, const char *db,
                   int cycle) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = nn_weights_load(be, src, -1, err, sizeof err);
    KOMA_ASSERT(net);
    st_file_t *f = st_open(src, 0, err, sizeof err);
    KOMA_ASSERT(f);
    st_writer_t *w = st_writer_new();
    int hit = 0;
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        float *d = nn_net_tensor_data(net, i); /* host memory on the CPU backend */
        if (strcmp(t->name, tensor) == 0) d[index] = v, hit = 1;
        KOMA_ASSERT(st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, t->shape, d) == 0);
    }
    KOMA_ASSERT(hit);
    static const char *const keys[] = {"koma.kind",  "koma.version",   "koma.net",   "koma.activation",
                                       "koma.features_version", "koma.in_planes", "koma.in_hand"};
    for (int k = 0; k < 7; k++) KOMA_ASSERT(st_writer_meta(w, keys[k], st_meta(f, keys[k])) == 0);
    st_close(f);
    KOMA_ASSERT(st_writer_write(w, dst, err, sizeof err) == 0);
    st_writer_free(w);
    nn_net_free(net);
    nn_backend_free(be);
    uint64_t h = 0;
    int64_t bytes = 0;
    KOMA_ASSERT(db_file_xxh3(dst, &h, &bytes, err, sizeof err) == 0);
    char sql[200];
    snprintf(sql, sizeof sql, "UPDATE models SET xxh3 = '%016llx' WHERE cycle = %d", (unsigned long long)h, cycle);
    sqlite3 *s = NULL;
    KOMA_ASSERT(sqlite3_open(db, &s) == SQLITE_OK && sqlite3_exec(s, sql, NULL, NULL, NULL) == SQLITE_OK);
    KOMA_ASSERT(sqlite3_changes(s) == 1);
    sqlite3_close(s);
}

static int64_t models_of(const char *db) {
    sqlite3 *s = NULL;
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(s, "SELECT count(*) FROM models", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(s);
    return n;
}

int main(void) {
    const char *base = t_scratch("sp_badnet");
    char dir[700], log[760], db[760], model[760], keep[760];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/child.log", base);
    snprintf(db, sizeof db, "%s/koma.db", dir);
    snprintf(model, sizeof model, "%s/models/0001.safetensors", dir);
    snprintf(keep, sizeof keep, "%s/0001.original", base);

    /* Game slots, checked before the run is touched: trees that could not
     * fit in memory are refused naming the flags and the bytes. */
    int status = run_selfplay_gpt(dir, "1", "2", "10000000", log);
    char err[512];
    size_t n = 0;
    char *text = compat_read_file(log, &n, NULL, 0);
    if (sp_machine_memory() > 0 && sp_machine_memory() < ((int64_t)50 << 30)) { /* 2 trees of ~25 GiB */
        CHECKF(status == SP_EXIT_USAGE && text && strstr(text, "--visits 10000000 with 2 games at once") &&
                   strstr(text, "more than the") && !compat_file_exists(db),
               "--visits 10000000: status %d: %s", status, text ? text : "-");
    }
    free(text);
    /* A thread plays no more games at once than a cycle has: 64 games per
     * thread for a 2-game cycle is capped at 2, said once. */
    snprintf(log, sizeof log, "%s/first.log", base);
    status = run_selfplay_gpt(dir, "1", "64", "8", log);
    CHECKF(status == 0 && models_of(db) == 2, "the first run: status %d, %lld models", status,
           (long long)models_of(db));
    text = compat_read_file(log, &n, NULL, 0);
    const char *cap = text ? strstr(text, "--games-per-thread 64 capped at 2") : NULL;
    CHECKF(cap && !strstr(cap + 1, "--games-per-thread 64 capped") && strstr(text, "1 threads x 2 games"),
           "the cap is not said (once): %s", text ? text : "-");
    free(text);
    char *orig = compat_read_file(model, &n, err, sizeof err);
    KOMA_ASSERT(orig);
    KOMA_ASSERT(compat_write_file_durable(keep, orig, n, err, sizeof err) == 0);
    free(orig);
    uint64_t h0 = 0;
    int64_t bytes = 0;
    KOMA_ASSERT(db_file_xxh3(keep, &h0, &bytes, err, sizeof err) == 0);

    static const struct {
        const char *tensor;
        int64_t index;
        float value;
        const char *want;
    } cases[] = {
        {"blocks.0.bn1.running_var", 3, NAN,
         "0001.safetensors: tensor 'blocks.0.bn1.running_var' holds NaN at index 3"},
        {"policy.conv.weight", 7, INFINITY, "0001.safetensors: tensor 'policy.conv.weight' holds +Inf at index 7"},
        {"blocks.1.bn2.running_var", 5, -0.25f,
         "0001.safetensors: tensor 'blocks.1.bn2.running_var' holds -0.25 at index 5: a batch-norm running variance "
         "cannot be negative"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        poison(keep, model, cases[k].tensor, cases[k].index, cases[k].value, db, 1);
        snprintf(log, sizeof log, "%s/child-%d.log", base, (int)k); /* a log of its own: the child appends */
        status = run_selfplay(dir, "2", log);
        char *text = compat_read_file(log, &n, NULL, 0);
        const char *line = text ? strstr(text, "0001.safetensors: tensor") : NULL;
        fprintf(stderr, "  %s[%lld] = %g: status %d: %.*s\n", cases[k].tensor, (long long)cases[k].index,
                (double)cases[k].value, status, line ? (int)strcspn(line, "\n") : 2, line ? line : "--");
        CHECKF(status == SP_EXIT_ERROR, "%s: status %d, want %d (refused)", cases[k].tensor, status, SP_EXIT_ERROR);
        CHECKF(text && strstr(text, cases[k].want), "%s: the refusal does not say '%s'", cases[k].tensor,
               cases[k].want);
        CHECKF(models_of(db) == 2, "%s: %lld models registered: something was published from the bad net",
               cases[k].tensor, (long long)models_of(db));
        free(text);
    }

    /* The control: the original file and XXH3 back, the run resumes. */
    size_t on = 0;
    char *again = compat_read_file(keep, &on, err, sizeof err);
    KOMA_ASSERT(again && compat_write_file_durable(model, again, on, err, sizeof err) == 0);
    free(again);
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE models SET xxh3 = '%016llx' WHERE cycle = 1", (unsigned long long)h0);
    sqlite3 *s = NULL;
    KOMA_ASSERT(sqlite3_open(db, &s) == SQLITE_OK && sqlite3_exec(s, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(s);
    status = run_selfplay(dir, "2", log);
    CHECKF(status == 0 && models_of(db) == 3, "the original back: status %d, %lld models", status,
           (long long)models_of(db));
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_selfplay_badnet");
}
