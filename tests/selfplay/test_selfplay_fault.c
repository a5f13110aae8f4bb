/* test_selfplay_fault.c - a failed inference-server worker stops self-play
 * cleanly.
 *
 * Runs the real `selfplay` binary with KOMA_FAULT=conv_fwd:N (nn/fault.h) in
 * its environment: the N-th convolution of the process, one of the server
 * workers' forwards in the middle of cycle 1 (games are short and committed
 * one per shard, so several are committed before it). The binary must exit
 * with status 1 (SP_EXIT_ERROR) within a minute, say which worker failed and
 * why, and leave the same guarantees as Ctrl-C: a consistent run with no
 * pending intent and no unregistered shard file, every committed game
 * replayable from its shard. The same command without the fault then
 * finishes the run (status 0) and keeps those games.
 */
#include "sp_test.h"

#include "selfplay/driver.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif

#define MAX_PLY 24
#define GAMES "40"
#define FAULT "conv_fwd:2500" /* ~6 games into cycle 1 here; the cycle has 40 */

static compat_proc_t *start(const char *dir, const char *log) {
    const char *argv[] = {KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", "1", "--games-per-cycle", GAMES,
                          "--shard-games", "1", "--threads", "1", "--games-per-thread", "4", "--leaves-per-game", "2",
                          "--visits", "16", "--visits-fast", "8", "--gumbel-m", "8", "--max-ply", "24", "--net", "2x16",
                          "--progress", "0", "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--batch", "16",
                          "--window-min", "200", "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1", NULL};
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_SELFPLAY_BIN, err);
        exit(2);
    }
    return p;
}

int main(void) {
    const char *base = t_scratch("sp_fault");
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/child.log", base);

    KOMA_ASSERT(compat_setenv("KOMA_FAULT", FAULT) == 0); /* the child inherits it */
    compat_proc_t *p = start(dir, log);
    int status = -1;
    int still = compat_proc_wait(p, 60000, &status);
    if (still) compat_proc_kill(p);
    compat_proc_free(p);
    KOMA_ASSERT(compat_setenv("KOMA_FAULT", "") == 0);
    CHECKF(still == 0 && status == SP_EXIT_ERROR, "with %s: %s, status %d (want %d)", FAULT,
           still ? "still running after 60 s" : "exited", status, SP_EXIT_ERROR);
    size_t n = 0;
    char *text = compat_read_file(log, &n, NULL, 0);
    CHECKF(text && strstr(text, "inference server worker") && strstr(text, "injected fault: " "conv_fwd call 2500") &&
               strstr(text, "error: "), /* once, as "error: ...", not again as "selfplay: ..." */
           "the failure is not reported with its worker and cause");
    free(text);
    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN, MAX_PLY, &rs);
    int64_t kept = rs.games;
    printf("  %s: exit %d, %lld games committed, model %d\n", FAULT, status, (long long)kept, rs.latest_cycle);
    CHECKF(kept >= 1 && kept < 40 && rs.latest_cycle == 0,
           "%lld games, model %d: the fault must hit during cycle 1 after some games (adjust " FAULT ")",
           (long long)kept, rs.latest_cycle);

    /* The same command without the fault finishes the run. */
    p = start(dir, log);
    still = compat_proc_wait(p, 240000, &status);
    if (still) compat_proc_kill(p);
    compat_proc_free(p);
    CHECKF(still == 0 && status == 0, "resumed run: %s, status %d", still ? "timed out" : "exited", status);
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == 1 && rs.games >= 40 && rs.games >= kept, "resumed run: model %d, %lld games (%lld kept)",
           rs.latest_cycle, (long long)rs.games, (long long)kept);
    if (atomic_load(&g_fail)) {
        text = compat_read_file(log, &n, NULL, 0);
        if (text) fprintf(stderr, "---- child log (last 3000 bytes) ----\n%s\n", n > 3000 ? text + n - 3000 : text);
        free(text);
    } else {
        t_rm_rf(base);
    }
    return t_done("test_selfplay_fault");
}
