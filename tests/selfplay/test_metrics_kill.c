/* test_metrics_kill.c - kill -9 between a cycle's last committed shard and
 * its summary (issue 30.3), placed exactly with the driver's test hook
 * KOMA_TEST_KILL_AT=cycle-summary:1 (selfplay/driver.h): cycle 1's games are
 * all committed and its cycle_metrics row is not written. The same command
 * then fills the row from the stored games (games, positions, results, mean
 * length) and finishes the run; before, the row stayed at games 0,
 * positions 0 for good. */
#include "sp_test.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif

#define SP_ARGS(dir)                                                                                           \
    KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", "2", "--games-per-cycle", "4", "--shard-games", "2",          \
        "--threads", "1", "--games-per-thread", "2", "--visits", "8", "--visits-fast", "4", "--max-ply", "60", \
        "--net", "2x16", "--progress", "0", "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4",        \
        "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1", "--eval-every", "0"

int main(void) {
    const char *base = t_scratch("metrics_kill");
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/child.log", base);
    const char *argv[] = {SP_ARGS(dir), NULL};

    CHECK(compat_setenv("KOMA_TEST_KILL_AT", "cycle-summary:1") == 0);
    int st = run_to_end(argv, log);
    CHECK(compat_setenv("KOMA_TEST_KILL_AT", NULL) == 0);
    char *out = t_read_file(log, NULL);
    int64_t games = run_query(dir, "SELECT count(*) FROM games g JOIN shards s ON g.shard_id = s.id WHERE s.cycle = 1");
    int64_t rows = run_query(dir, "SELECT coalesce(sum(rows), 0) FROM shards WHERE cycle = 1");
    CHECKF(st != 0 && strstr(out, "KOMA_TEST_KILL_AT") && games == 4 &&
               run_query(dir, "SELECT count(*) FROM cycle_metrics WHERE cycle = 1 AND games > 0") == 0,
           "the kill did not land between cycle 1's last shard and its summary (exit %d, %lld games):\n%s", st,
           (long long)games, out);
    free(out);
    printf("  killed (status %d) with cycle 1's %lld games and %lld positions committed, no metrics row\n", st,
           (long long)games, (long long)rows);

    st = run_to_end(argv, log);
    out = t_read_file(log, NULL);
    CHECKF(st == 0 && strstr(out, "recomputed from its 4 stored games"), "the resumed run (exit %d):\n%s", st, out);
    free(out);
    CHECKF(run_query(dir, "SELECT games FROM cycle_metrics WHERE cycle = 1") == 4 &&
               run_query(dir, "SELECT positions FROM cycle_metrics WHERE cycle = 1") == rows,
           "cycle 1's metrics row: games %lld, positions %lld (want 4 and %lld)",
           (long long)run_query(dir, "SELECT games FROM cycle_metrics WHERE cycle = 1"),
           (long long)run_query(dir, "SELECT positions FROM cycle_metrics WHERE cycle = 1"), (long long)rows);
    CHECK(run_query(dir, "SELECT black_wins + white_wins + draws FROM cycle_metrics WHERE cycle = 1") == 4);
    CHECK(run_query(dir, "SELECT count(*) FROM cycle_metrics c WHERE cycle = 1 AND black_wins = (SELECT count(*) FROM "
                     "games g JOIN shards s ON g.shard_id = s.id WHERE s.cycle = 1 AND g.result = 1) AND "
                     "abs(avg_plies - (SELECT avg(g.plies) FROM games g JOIN shards s ON g.shard_id = s.id WHERE "
                     "s.cycle = 1)) < 1e-9") == 1);
    /* cycle 2 closed normally: its own row */
    CHECK(run_query(dir, "SELECT games FROM cycle_metrics WHERE cycle = 2") == 4);
    run_state_t rs;
    check_run(dir, CHECK_RUN_CLEAN, 60, &rs);
    CHECKF(rs.latest_cycle == 2, "the resumed run ended at model %d", rs.latest_cycle);
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_metrics_kill");
}
