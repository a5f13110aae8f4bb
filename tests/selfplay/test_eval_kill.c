/* test_eval_kill.c - kill -9 during the in-loop evaluation, then the same
 * command: the interrupted match keeps the games it stored (a row without
 * Elo), and the resumed run plays the evaluation again and rates it, so the
 * rating list goes on (before, the match stayed unrated for good and every
 * later cycle was "not on the ladder"). The kill lands in the evaluation of
 * the run's last cycle, the case where the resumed run has nothing else to
 * do; a second run with one more cycle checks that its net is rated. */
#include "sp_test.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif

#define SP_ARGS(dir, cycles)                                                                                   \
    KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", cycles, "--games-per-cycle", "4", "--shard-games", "1",       \
        "--threads", "1", "--games-per-thread", "4", "--leaves-per-game", "2", "--visits", "16", "--visits-fast", \
        "8", "--gumbel-m", "8", "--max-ply", "60", "--net", "2x16", "--progress", "0", "--min-steps-per-cycle",  \
        "2", "--max-steps-per-cycle", "4", "--batch", "16", "--window-min", "200", "--cpu-threads", "1",        \
        "--train-threads", "1", "--cache-mb", "1", "--eval-every", "1", "--eval-games", "12", "--eval-visits", "8"

int main(void) {
    const char *base = t_scratch("eval_kill");
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/child.log", base);
    const char *argv1[] = {SP_ARGS(dir, "1"), NULL};
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv1, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_SELFPLAY_BIN, err);
        return 2;
    }
    /* Kill once the evaluation of model 1 has stored a game and is not over. */
    const char *open_games = "SELECT count(*) FROM games g JOIN matches m ON g.match_id = m.id WHERE m.elo IS NULL";
    int64_t t0 = compat_now_ms();
    int status = 0, still = 1;
    while (still == 1 && compat_now_ms() - t0 < 180000 && run_query(dir, open_games) < 1)
        still = compat_proc_wait(p, 20, &status);
    if (still == 1) {
        compat_proc_kill(p);
        compat_proc_wait(p, 30000, &status);
    }
    compat_proc_free(p);
    int64_t kept = run_query(dir, open_games);
    int64_t rated = run_query(dir, "SELECT count(*) FROM matches WHERE elo IS NOT NULL");
    CHECKF(still == 1 && kept >= 1 && rated == 0,
           "the kill did not land in the evaluation (%s, %lld open games, %lld rated matches)",
           still == 1 ? "killed" : "exited", (long long)kept, (long long)rated);
    printf("  killed after %.1f s with %lld game(s) of the evaluation stored\n", (compat_now_ms() - t0) / 1000.0,
           (long long)kept);

    /* The same command: the evaluation is played again and rated; the stored games stay. */
    int st = run_to_end(argv1, log);
    char *out = t_read_file(log, NULL);
    CHECKF(st == 0, "the resumed run exited with %d:\n%s", st, out);
    CHECKF(strstr(out, "was interrupted") != NULL, "the resumed run did not say it replays the match:\n%s", out);
    free(out);
    CHECK(run_query(dir, "SELECT count(*) FROM matches WHERE elo IS NOT NULL AND cycle = 1") == 1);
    CHECKF(run_query(dir, open_games) == kept, "the interrupted match's games changed: %lld, were %lld",
           (long long)run_query(dir, open_games), (long long)kept);
    CHECK(run_query(dir, "SELECT count(*) FROM cycle_metrics WHERE cycle = 1 AND elo IS NOT NULL") == 1);

    /* One more cycle: its evaluation lands on the ladder. */
    const char *argv2[] = {SP_ARGS(dir, "2"), NULL};
    st = run_to_end(argv2, log);
    out = t_read_file(log, NULL);
    CHECKF(st == 0 && strstr(out, "not rated") == NULL && strstr(out, "rating: model 2: ") != NULL,
           "cycle 2 is not rated (exit %d):\n%s", st, out);
    free(out);
    CHECK(run_query(dir, "SELECT count(*) FROM cycle_metrics WHERE cycle = 2 AND elo IS NOT NULL") == 1);
    /* its gauntlet (--gauntlet 2): the previous net and cycle 0, one rated match each */
    CHECK(run_query(dir, "SELECT count(*) FROM matches m JOIN models b ON m.model_b = b.id "
                     "WHERE m.cycle = 2 AND m.elo IS NOT NULL AND b.cycle IN (0, 1)") == 2);
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_eval_kill");
}
