/* test_run_lock.c - one owner per run, through the real programs.
 *
 * 1. While `selfplay` runs on a run, a second `selfplay`, `train
 *    --from-games` and `import` on the same run are refused at once (exit 1,
 *    "in use", the holder's pid and command), and the run is not touched:
 *    the games and models of the first writer are all there when it ends.
 *    `inspect` reads it meanwhile. After the holder is killed with SIGKILL
 *    the next writer gets the run.
 * 2. A newest model replaced by another valid net (an older model copied
 *    over it) is refused at start-up, naming the file; nothing is trained or
 *    overwritten.
 * 3. A lost koma.db (deleted; then a zero-length one) with models/ and
 *    shards/ in place: `selfplay` refuses to start a new run over them and
 *    every file stays as it was.
 */
#include "sp_test.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif
#ifndef KOMA_TRAIN_BIN
#define KOMA_TRAIN_BIN "train"
#endif
#ifndef KOMA_IMPORT_BIN
#define KOMA_IMPORT_BIN "import"
#endif
#ifndef KOMA_INSPECT_BIN
#define KOMA_INSPECT_BIN "inspect"
#endif
#ifndef KOMA_SOURCE_DIR
#define KOMA_SOURCE_DIR "."
#endif

static const char *g_base;

/* selfplay's flags for a small, fast run of `cycles` cycles. */
#define SP_ARGS(dir, cycles)                                                                                   \
    KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", cycles, "--games-per-cycle", "4", "--shard-games", "1",       \
        "--threads", "1", "--games-per-thread", "4", "--leaves-per-game", "2", "--visits", "16", "--visits-fast", \
        "8", "--gumbel-m", "8", "--max-ply", "60", "--net", "2x16", "--progress", "0", "--min-steps-per-cycle",  \
        "2", "--max-steps-per-cycle", "4", "--batch", "16", "--window-min", "200", "--cpu-threads", "1",        \
        "--train-threads", "1", "--cache-mb", "1", "--eval-every", "0"

/* Runs argv to its end with stderr (and stdout) in a file; returns the exit
 * status and the output (malloc'ed) in *out. */
static int run_prog(const char *const *argv, char **out) {
    char path[800], err[512];
    snprintf(path, sizeof path, "%s/prog.out", g_base);
    int status = -1;
    if (compat_run_io(argv, path, path, &status, err, sizeof err) != 0) {
        fprintf(stderr, "cannot run %s: %s\n", argv[0], err);
        exit(2);
    }
    *out = t_read_file(path, NULL);
    return status;
}

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static int64_t model_count(const char *dir) {
    char p[800];
    snprintf(p, sizeof p, "%s/koma.db", dir);
    sqlite3 *s = NULL;
    if (sqlite3_open_v2(p, &s, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(s);
        return -1;
    }
    int64_t n = sql_int(s, "SELECT count(*) FROM models");
    sqlite3_close(s);
    return n;
}

static void test_second_writer(void) {
    char dir[700], log[760], pid[32];
    snprintf(dir, sizeof dir, "%s/busy", g_base);
    snprintf(log, sizeof log, "%s/holder.log", g_base);
    const char *argv[] = {SP_ARGS(dir, "50"), NULL};
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_SELFPLAY_BIN, err);
        exit(2);
    }
    /* Wait until the holder has its first model registered (it holds the lock by then). */
    int64_t t0 = compat_now_ms();
    int status = 0;
    while (model_count(dir) < 1 && compat_now_ms() - t0 < 120000 && compat_proc_wait(p, 50, &status) == 1) {}
    CHECKF(model_count(dir) >= 1, "the first selfplay did not start its run");
    snprintf(pid, sizeof pid, "pid %d", compat_proc_pid(p));

    char *out = NULL;
    const char *sp2[] = {SP_ARGS(dir, "50"), NULL};
    int64_t t1 = compat_now_ms();
    int st = run_prog(sp2, &out);
    CHECKF(st == 1 && contains(out, "in use") && contains(out, "selfplay"),
           "a second selfplay on the run: exit %d, output:\n%s", st, out);
    CHECKF(contains(out, pid), "the refusal does not name the holder's %s:\n%s", pid, out);
    CHECKF(compat_now_ms() - t1 < 60000, "the refusal took %lld ms", (long long)(compat_now_ms() - t1));
    free(out);

    const char *tr[] = {KOMA_TRAIN_BIN, "--from-games", "--run", dir, "--steps", "2", "--batch", "8", NULL};
    st = run_prog(tr, &out);
    CHECKF(st == 1 && contains(out, "in use"), "train --from-games on a busy run: exit %d:\n%s", st, out);
    free(out);

    char rec[900];
    snprintf(rec, sizeof rec, "%s/tests/data/records/game1.csa", KOMA_SOURCE_DIR);
    const char *im[] = {KOMA_IMPORT_BIN, "--run", dir, rec, NULL};
    st = run_prog(im, &out);
    CHECKF(st == 1 && contains(out, "in use"), "import into a busy run: exit %d:\n%s", st, out);
    free(out);

    const char *ins[] = {KOMA_INSPECT_BIN, dir, NULL};
    st = run_prog(ins, &out);
    CHECKF(st == 0, "inspect of a busy run: exit %d:\n%s", st, out);
    free(out);

    /* The holder dies without a word; its lock goes with it. */
    compat_proc_kill(p);
    compat_proc_wait(p, 30000, &status);
    compat_proc_free(p);
    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY, 60, &rs);
    const char *sp3[] = {SP_ARGS(dir, "1"), NULL};
    st = run_prog(sp3, &out);
    CHECKF(st == 0 && !contains(out, "in use"), "after the holder was killed: exit %d:\n%s", st, out);
    free(out);
}

/* A run with models 0 and 1 (one cycle played). */
static void make_run(const char *dir) {
    char *out = NULL;
    const char *sp[] = {SP_ARGS(dir, "1"), NULL};
    int st = run_prog(sp, &out);
    CHECKF(st == 0 && model_count(dir) == 2, "a one-cycle run: exit %d, %lld models:\n%s", st,
           (long long)model_count(dir), out);
    free(out);
}

static void test_replaced_model(void) {
    char dir[700], m0[800], m1[800];
    snprintf(dir, sizeof dir, "%s/replaced", g_base);
    make_run(dir);
    snprintf(m0, sizeof m0, "%s/models/0000.safetensors", dir);
    snprintf(m1, sizeof m1, "%s/models/0001.safetensors", dir);
    size_t n0 = 0;
    char *net0 = t_read_file(m0, &n0);
    char e[256];
    CHECK(n0 > 0 && compat_write_file_durable(m1, net0, n0, e, sizeof e) == 0);
    char *out = NULL;
    const char *sp[] = {SP_ARGS(dir, "2"), NULL};
    int st = run_prog(sp, &out);
    CHECKF(st == 1 && contains(out, "models/0001.safetensors") && contains(out, "does not match koma.db"),
           "resuming from a replaced newest model: exit %d:\n%s", st, out);
    free(out);
    size_t n1 = 0;
    char *now = t_read_file(m1, &n1);
    CHECKF(n1 == n0 && memcmp(now, net0, n0) == 0, "models/0001.safetensors was rewritten");
    CHECK(model_count(dir) == 2);
    free(now);
    free(net0);
}

static void test_lost_database(void) {
    char dir[700], db[800], m1[800];
    snprintf(dir, sizeof dir, "%s/lost", g_base);
    make_run(dir);
    snprintf(db, sizeof db, "%s/koma.db", dir);
    snprintf(m1, sizeof m1, "%s/models/0001.safetensors", dir);
    size_t n1 = 0;
    char *net1 = t_read_file(m1, &n1);
    const char *const gone[] = {"koma.db", "koma.db-wal", "koma.db-shm"};
    for (int i = 0; i < 3; i++) {
        char p[800];
        snprintf(p, sizeof p, "%s/%s", dir, gone[i]);
        compat_remove_file(p);
    }
    for (int empty = 0; empty < 2; empty++) {
        char e[256];
        if (empty) CHECK(compat_write_file_durable(db, "", 0, e, sizeof e) == 0);
        char *out = NULL;
        const char *sp[] = {SP_ARGS(dir, "2"), NULL};
        int st = run_prog(sp, &out);
        CHECKF(st == 1 && contains(out, empty ? "koma.db is empty" : "koma.db is missing") &&
                   contains(out, "Nothing was changed"),
               "selfplay over a run with %s koma.db: exit %d:\n%s", empty ? "an empty" : "no", st, out);
        free(out);
        size_t n = 0;
        char *now = t_read_file(m1, &n);
        CHECKF(n == n1 && memcmp(now, net1, n1) == 0, "models/0001.safetensors was overwritten");
        free(now);
        CHECKF(empty ? compat_file_size(db) == 0 : !compat_file_exists(db), "koma.db was %s",
               empty ? "written" : "created");
    }
    free(net1);
}

int main(void) {
    g_base = t_scratch("run_lock");
    test_second_writer();
    test_replaced_model();
    test_lost_database();
    if (!atomic_load(&g_fail)) t_rm_rf(g_base);
    return t_done("test_run_lock");
}
