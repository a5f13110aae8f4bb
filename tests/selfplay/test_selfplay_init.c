/* test_selfplay_init.c - `selfplay --run NEW --init FROM` through the real
 * binary: a run continued from another, killed with -9 and resumed.
 *
 *   - run A plays 2 cycles from a random net;
 *   - run B starts with --init A and is killed with SIGKILL three times (once
 *     its cycle 0 is registered, once it has games, once its cycle 2 is; each
 *     kill then leaves a run check_run accepts), the same command each time,
 *     the last one to its end (4 cycles);
 *   - B's cycle 0 is A's newest net: every tensor (weights, BN statistics,
 *     momentum, the optimizer step) has the same XXH3; its models row has A's
 *     steps and samples, and B's later nets count on from them;
 *   - the lineage of B's newest net adds up: A's entry as A's newest net says
 *     it, B's own entry (cycle, steps, samples of B's newest models row; CPU
 *     minutes as koma.db's models.cpu_seconds, across the four invocations),
 *     and koma.lineage.cpu_minutes the sum of the two;
 *   - FROM a net file (A's cycle 1) starts run C from that net and its lineage;
 *   - bad FROMs are refused naming the input: a path that is not there, a
 *     directory that is not a run, a net file whose koma.lineage is not one
 *     (exit 1, no model written).
 */
#include "sp_test.h"

#include <inttypes.h>

#include "nn/backend.h"
#include "nn/safetensors.h"
#include "train/lineage.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif

static const char *const TINY[] = {"--games-per-cycle",
                                   "2",
                                   "--shard-games",
                                   "1",
                                   "--threads",
                                   "1",
                                   "--games-per-thread",
                                   "2",
                                   "--leaves-per-game",
                                   "2",
                                   "--visits",
                                   "16",
                                   "--visits-fast",
                                   "8",
                                   "--gumbel-m",
                                   "8",
                                   "--max-ply",
                                   "40",
                                   "--net",
                                   "2x16",
                                   "--progress",
                                   "0",
                                   "--min-steps-per-cycle",
                                   "2",
                                   "--max-steps-per-cycle",
                                   "4",
                                   "--batch",
                                   "16",
                                   "--window-min",
                                   "100",
                                   "--cpu-threads",
                                   "1",
                                   "--train-threads",
                                   "1",
                                   "--cache-mb",
                                   "1",
                                   "--eval-every",
                                   "0",
                                   NULL};

/* selfplay --run dir [--init from] --cycles cycles TINY... */
static void argv_of(const char **argv, const char *dir, const char *from, const char *cycles) {
    int n = 0;
    argv[n++] = KOMA_SELFPLAY_BIN;
    argv[n++] = "--run", argv[n++] = dir;
    if (from) argv[n++] = "--init", argv[n++] = from;
    argv[n++] = "--cycles", argv[n++] = cycles;
    for (int i = 0; TINY[i]; i++) argv[n++] = TINY[i];
    argv[n] = NULL;
}

static int run_sp(const char *dir, const char *from, const char *cycles, const char *log) {
    const char *argv[64];
    argv_of(argv, dir, from, cycles);
    return run_to_end(argv, log);
}

static void model_path(const char *dir, int cycle, char *out, size_t len) {
    snprintf(out, len, "%s/models/%04d.safetensors", dir, cycle);
}

static int64_t model_col(const char *dir, const char *col, int cycle) {
    char q[160];
    snprintf(q, sizeof q, "SELECT %s FROM models WHERE cycle = %d", col, cycle);
    return run_query(dir, q);
}

static double model_cpu_seconds(const char *dir, int cycle) {
    char path[800];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    sqlite3 *s = NULL;
    double v = NAN;
    char q[160];
    snprintf(q, sizeof q, "SELECT cpu_seconds FROM models WHERE cycle = %d", cycle);
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(s, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(s);
    return v;
}

static void read_lineage(const char *path, train_lineage_t *l) {
    char err[1024];
    int rc = train_lineage_read(path, l, err, sizeof err);
    CHECKF(rc == 0, "lineage of %s: %s", path, err);
}

static double meta_num(const char *path, const char *key) {
    char v[64], err[1024];
    if (nn_weights_meta(path, key, v, sizeof v, err, sizeof err) != 0) return NAN;
    return strtod(v, NULL);
}

/* Every tensor checksum (koma.xxh3.*) of a and b the same, and as many. */
static void same_tensors(const char *a, const char *b) {
    char err[1024];
    st_file_t *fa = st_open(a, 0, err, sizeof err), *fb = fa ? st_open(b, 0, err, sizeof err) : NULL;
    CHECKF(fa && fb, "open: %s", err);
    if (!fa || !fb) {
        st_close(fa);
        return;
    }
    CHECKF(st_count(fa) == st_count(fb), "%s has %d tensors, %s %d", a, (int)st_count(fa), b, (int)st_count(fb));
    int checked = 0, opt = 0;
    for (int32_t i = 0; i < st_count(fa); i++) {
        char key[ST_MAX_NAME + 16];
        snprintf(key, sizeof key, "koma.xxh3.%s", st_at(fa, i)->name);
        const char *ha = st_meta(fa, key), *hb = st_meta(fb, key);
        CHECKF(ha && hb && strcmp(ha, hb) == 0, "tensor %s: %s in %s, %s in %s", st_at(fa, i)->name, ha ? ha : "-", a,
               hb ? hb : "-", b);
        checked++;
        opt += strncmp(st_at(fa, i)->name, "opt.", 4) == 0;
    }
    CHECKF(opt > 1, "%s carries its optimizer state (%d opt.* tensors)", a, opt);
    printf("  %d tensors (%d of the optimizer) the same in %s and %s\n", checked, opt, a, b);
    st_close(fa);
    st_close(fb);
}

/* Starts B, waits for what `until` says (0: cycle 0 registered; 1: 2 games;
 * 2: cycle 2 registered), kills it with SIGKILL and checks the run. */
static void kill_b(const char *b, const char *a, int until, const char *log) {
    const char *argv[64];
    argv_of(argv, b, a, "4");
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_SELFPLAY_BIN, err);
        exit(2);
    }
    int status = -1, still = 1;
    for (;;) {
        int reached = until == 0   ? model_col(b, "count(*)", 0) == 1
                      : until == 1 ? committed_games(b) >= 2
                                   : model_col(b, "count(*)", 2) == 1;
        if (reached || (still = compat_proc_wait(p, 5, &status)) != 1) break;
    }
    if (still == 1) {
        compat_proc_kill(p);
        compat_proc_wait(p, 30000, &status);
    }
    compat_proc_free(p);
    printf("  kill %d: %s, %" PRId64 " games, newest cycle %" PRId64 "\n", until, still == 1 ? "killed" : "had ended",
           committed_games(b), run_query(b, "SELECT max(cycle) FROM models"));
    run_state_t rs;
    check_run(b, 0, 40, &rs);
}

static void bad_init(const char *base, const char *name, const char *from, const char *want) {
    char dir[600], log[700];
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    snprintf(log, sizeof log, "%s/%s.log", base, name);
    int st = run_sp(dir, from, "1", log);
    char *text = t_read_file(log, NULL);
    CHECKF(st == 1, "--init %s: exit %d, want 1", from, st);
    CHECKF(text && strstr(text, from) && strstr(text, want), "--init %s: the error names it and says '%s':\n%s", from,
           want, text ? text : "(no log)");
    CHECKF(model_col(dir, "count(*)", 0) <= 0, "--init %s: no model registered", from);
    free(text);
}

int main(void) {
    const char *base = t_scratch("sp_init");
    char a[700], b[700], c[700], log[760], pa[800], pb[800];
    snprintf(a, sizeof a, "%s/a", base);
    snprintf(b, sizeof b, "%s/b", base);
    snprintf(c, sizeof c, "%s/c", base);
    snprintf(log, sizeof log, "%s/child.log", base);

    int st = run_sp(a, NULL, "2", log);
    CHECKF(st == 0, "run a: exit %d", st);
    for (int k = 0; k < 3; k++) kill_b(b, a, k, log);
    st = run_sp(b, a, "4", log);
    CHECKF(st == 0, "run b, the last start: exit %d", st);
    run_state_t rs;
    check_run(b, CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, 40, &rs);
    CHECKF(rs.latest_cycle == 4, "run b ends at cycle %d, want 4", rs.latest_cycle);

    /* B's cycle 0 is A's newest net with its optimizer state and counters */
    model_path(a, 2, pa, sizeof pa);
    model_path(b, 0, pb, sizeof pb);
    same_tensors(pa, pb);
    int64_t a_steps = model_col(a, "train_steps", 2), a_samples = model_col(a, "train_samples", 2);
    CHECKF(a_steps > 0 && model_col(b, "train_steps", 0) == a_steps && model_col(b, "train_samples", 0) == a_samples,
           "b's cycle 0 row: steps %" PRId64 " samples %" PRId64 ", a's newest %" PRId64 " %" PRId64,
           model_col(b, "train_steps", 0), model_col(b, "train_samples", 0), a_steps, a_samples);
    CHECKF(model_col(b, "train_steps", 4) > a_steps, "b's steps count on from a's (%" PRId64 " after %" PRId64 ")",
           model_col(b, "train_steps", 4), a_steps);

    /* the lineage adds up */
    train_lineage_t la, lb;
    read_lineage(pa, &la);
    model_path(b, 4, pb, sizeof pb);
    read_lineage(pb, &lb);
    CHECKF(la.n == 1 && lb.n == 2, "a's newest names %d runs (want 1), b's %d (want 2)", (int)la.n, (int)lb.n);
    if (la.n == 1 && lb.n == 2) {
        const train_lineage_run_t *x = &la.r[0], *y = &lb.r[0], *z = &lb.r[1];
        CHECKF(strcmp(x->run, a) == 0 && strcmp(y->run, a) == 0 && strcmp(z->run, b) == 0,
               "runs: %s / %s, %s (want %s, %s)", x->run, y->run, z->run, a, b);
        CHECKF(memcmp(x, y, sizeof *x) == 0, "b's first entry is a's own as a's newest net says it");
        CHECKF(x->cycle == 2 && x->steps == a_steps && x->samples == a_samples,
               "a's entry: cycle %" PRId64 " steps %" PRId64 " samples %" PRId64, x->cycle, x->steps, x->samples);
        CHECKF(z->cycle == 4 && z->steps == model_col(b, "train_steps", 4) &&
                   z->samples == model_col(b, "train_samples", 4),
               "b's entry: cycle %" PRId64 " steps %" PRId64 " samples %" PRId64 ", its row's", z->cycle, z->steps,
               z->samples);
        double a_cpu = model_cpu_seconds(a, 2) / 60, b_cpu = model_cpu_seconds(b, 4) / 60;
        /* the file is stamped just before its row: a little less, never more */
        CHECKF(x->cpu_minutes > 0 && x->cpu_minutes <= a_cpu + 0.0006 && x->cpu_minutes > a_cpu - 0.05,
               "a's CPU minutes %.4f, its models row %.4f", x->cpu_minutes, a_cpu);
        CHECKF(z->cpu_minutes > 0 && z->cpu_minutes <= b_cpu + 0.0006 && z->cpu_minutes > b_cpu - 0.05,
               "b's CPU minutes %.4f, its models row %.4f (four invocations)", z->cpu_minutes, b_cpu);
        double total = meta_num(pb, "koma.lineage.cpu_minutes");
        CHECKF(fabs(total - (x->cpu_minutes + z->cpu_minutes)) < 0.0015, "koma.lineage.cpu_minutes %.4f = %.4f + %.4f",
               total, x->cpu_minutes, z->cpu_minutes);
        CHECKF(meta_num(pb, "koma.lineage.gpu_minutes") == 0 && z->gpu_minutes == 0, "no GPU, no GPU-minutes");
        /* B's own CPU grows with each net it publishes, across the kills */
        double prev = 0;
        for (int cy = 0; cy <= 4; cy++) {
            train_lineage_t l;
            char p[800];
            model_path(b, cy, p, sizeof p);
            read_lineage(p, &l);
            CHECKF(l.n == 2 && l.r[1].cpu_minutes >= prev && l.r[1].cycle == cy, "b cycle %d: own CPU %.4f after %.4f",
                   cy, l.n == 2 ? l.r[1].cpu_minutes : -1, prev);
            if (l.n == 2) prev = l.r[1].cpu_minutes;
        }
        printf("  lineage: a %.4f + b %.4f = %.4f CPU-minutes (rows: %.4f, %.4f)\n", x->cpu_minutes, z->cpu_minutes,
               total, a_cpu, b_cpu);
    }

    /* FROM a net file */
    model_path(a, 1, pa, sizeof pa);
    st = run_sp(c, pa, "1", log);
    CHECKF(st == 0, "run c (--init a net file): exit %d", st);
    model_path(c, 0, pb, sizeof pb);
    same_tensors(pa, pb);
    train_lineage_t l1, lc;
    read_lineage(pa, &l1);
    read_lineage(pb, &lc);
    CHECKF(l1.n == 1 && lc.n == 2 && memcmp(&l1.r[0], &lc.r[0], sizeof l1.r[0]) == 0 && lc.r[1].steps == l1.r[0].steps,
           "c's lineage: a as of cycle 1, then c (%d runs)", (int)lc.n);

    /* bad FROMs */
    char missing[800], bad[800];
    snprintf(missing, sizeof missing, "%s/no-such-run", base);
    bad_init(base, "d1", missing, "no such run directory or net file");
    bad_init(base, "d2", base, "is not a run");
    snprintf(bad, sizeof bad, "%s/bad-lineage.safetensors", base);
    nn_backend_t *be = nn_backend_cpu_new(1);
    char err[1024];
    nn_net_t *net = be ? nn_weights_load(be, pa, -1, err, sizeof err) : NULL;
    const char *kv[] = {"koma.lineage", "[{\"run\": 7}]", NULL};
    CHECKF(net && nn_weights_save_meta(net, NULL, kv, bad, err, sizeof err) == 0, "a file with a bad lineage: %s", err);
    nn_net_free(net);
    nn_backend_free(be);
    bad_init(base, "d3", bad, "koma.lineage");
    return t_done("test_selfplay_init");
}
