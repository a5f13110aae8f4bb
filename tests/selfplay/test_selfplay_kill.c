/* test_selfplay_kill.c - kill -9 at random moments, then the same command.
 *
 * Runs the real `selfplay` binary on a small run (one game per shard, so
 * commits are frequent), SIGKILLs it at a random moment (the first during
 * start-up, the others once 0-3 more games are committed, plus 0-0.4 s, so
 * the kills land mid-run on any machine), checks the run directory as the kill left it (before
 * any clean-up: every games row in a shard that exists and verifies with
 * its rows, integrity_check ok, the models rows' files present, the number
 * of games never lower than before), restarts the same command, and so on;
 * the last start runs to the end and must leave a complete, clean run
 * (every cycle's model, no pending intent, no unregistered shard file).
 * The seed of the random moments is printed; KOMA_KILL_SEED repeats them.
 */
#include "sp_test.h"

#include <time.h>

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif

#define CYCLES 10
#define MAX_PLY 60
#define KILLS 5

static uint64_t g_rng;
static double uniform(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

static compat_proc_t *start(const char *dir, const char *log) {
    const char *argv[] = {KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", "10", "--games-per-cycle", "4",
                          "--shard-games", "1", "--threads", "1", "--games-per-thread", "4", "--leaves-per-game", "2",
                          "--visits", "16", "--visits-fast", "8", "--gumbel-m", "8", "--max-ply", "60", "--net", "2x16",
                          "--progress", "0", "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--batch", "16",
                          "--window-min", "200", "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1",
                          /* small evaluations: the last run plays every one still owed (of up to 10 nets), and
                           * under ASan on a busy machine the default 8 x 32 each ran past its 240 s */
                          "--eval-games", "2", "--eval-visits", "8", NULL};
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_SELFPLAY_BIN, err);
        exit(2);
    }
    return p;
}

int main(void) {
    const char *env = getenv("KOMA_KILL_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)compat_getpid() << 20);
    g_rng = seed;
    printf("test_selfplay_kill: seed %llu (KOMA_KILL_SEED=%llu repeats the delays)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    const char *base = t_scratch("sp_kill");
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/child.log", base);

    int64_t games_before = 0;
    int landed = 0;
    for (int k = 0; k < KILLS; k++) {
        /* The first kill lands in start-up; the others after 0-3 more games
         * were committed (whatever the machine's speed) plus 0-0.4 s, so
         * they hit shard writes, commits, training and model files. */
        compat_proc_t *p = start(dir, log);
        int status = -1, still = 1;
        int64_t t0 = compat_now_ms();
        double extra = k == 0 ? 0.02 + 0.28 * uniform() : 0.4 * uniform();
        int64_t want = games_before + (k == 0 ? 0 : (int64_t)(4 * uniform()));
        while (still == 1 && k > 0 && committed_games(dir) < want && compat_now_ms() - t0 < 120000)
            still = compat_proc_wait(p, 10, &status);
        if (still == 1) still = compat_proc_wait(p, (int64_t)(extra * 1000), &status);
        double delay = (double)(compat_now_ms() - t0) / 1000.0;
        if (still == 1) {
            compat_proc_kill(p);
            compat_proc_wait(p, 30000, &status);
        }
        compat_proc_free(p);
        run_state_t rs;
        check_run(dir, CHECK_RUN_REPLAY, MAX_PLY, &rs);
        printf("  kill %d after %.2f s (%lld+ games wanted): %s, %lld games, %lld shards, model %d\n", k + 1, delay,
               (long long)want, still == 1 ? "killed" : "had exited", (long long)rs.games, (long long)rs.shards,
               rs.latest_cycle);
        if (still == 1 && rs.latest_cycle < CYCLES) landed++;
        else CHECKF(still == 1 || status == 0, "the run exited with %d before its kill", status);
        if (still != 1 && status != 0) { /* its log, before the next run overwrites it */
            size_t len = 0;
            char e[256];
            char *text = compat_read_file(log, &len, e, sizeof e);
            fprintf(stderr, "---- log of run %d ----\n%s\n", k + 1, text ? text : e);
            free(text);
        }
        CHECKF(rs.games >= games_before, "games went down from %lld to %lld", (long long)games_before,
               (long long)rs.games);
        games_before = rs.games;
    }
    CHECKF(landed >= 3, "only %d kills landed before the run was complete: make the run longer", landed);

    /* The same command once more, to the end. */
    compat_proc_t *p = start(dir, log);
    int status = -1;
    int still = compat_proc_wait(p, 240000, &status);
    if (still == 1) compat_proc_kill(p);
    compat_proc_free(p);
    CHECKF(still == 0 && status == 0, "the last run %s with status %d", still ? "timed out" : "exited", status);
    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == CYCLES && rs.models == CYCLES + 1, "after the last run: model %d, %lld models",
           rs.latest_cycle, (long long)rs.models);
    CHECKF(rs.games >= games_before && rs.games >= 4 * CYCLES, "%lld games at the end (%lld before, want >= %d)",
           (long long)rs.games, (long long)games_before, 4 * CYCLES);
    printf("  final: %lld games, %lld shards, %lld positions, model %d\n", (long long)rs.games, (long long)rs.shards,
           (long long)rs.positions, rs.latest_cycle);
    if (atomic_load(&g_fail)) {
        size_t n = 0;
        char *text = compat_read_file(log, &n, NULL, 0);
        if (text) fprintf(stderr, "---- child log (last 3000 bytes) ----\n%s\n", n > 3000 ? text + n - 3000 : text);
        free(text);
    } else {
        t_rm_rf(base);
    }
    return t_done("test_selfplay_kill");
}
