/* test_selfplay_mpi_kill.c - kill -9 of a playing rank under `mpirun -np 3
 * selfplay`, then the same command (built with MPI; 77 otherwise):
 *   - once rank 1 has games committed, its process (the pid it sent in its
 *     hello, from the run's log) gets SIGKILL mid-run;
 *   - the job ends by itself (mpirun aborts the other ranks) with a non-zero
 *     status, within a bounded time;
 *   - nothing committed is lost: the run passes sp_test.h's check_run as the
 *     kill left it (integrity, every game replayed against its shard rows,
 *     model files present) and has at least the games counted before the
 *     kill;
 *   - the same command, with --cycles two past the newest model the kill
 *     left, resumes it to the end: status 0, a complete clean run (every
 *     cycle's model loads, no orphan), games from ranks 0, 1 and 2.
 * The killed job is given 40 cycles, more than it can play before rank 1
 * has 2 games: on a loaded machine (3 ranks on 2 cores) rank 0 alone played
 * all 4 cycles of 8 games that were once given while rank 1 still started.
 */
#if !defined(KOMA_MPIEXEC) || !defined(KOMA_SELFPLAY_BIN)
#include <stdio.h>
int main(void) {
    printf("test_selfplay_mpi_kill: built without MPI: skipped\n");
    return 77;
}
#else
#include "sp_mpi_test.h"

#define CYCLES 40
#define CYCLES_S "40"

int main(void) {
    if (!compat_file_exists(KOMA_MPIEXEC)) {
        printf("test_selfplay_mpi_kill: %s is gone: skipped\n", KOMA_MPIEXEC);
        return 77;
    }
    const char *base = t_scratch("sp_mpi_kill");
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/mpirun.log", base);

    /* 1. rank 1 killed once it has 2 games committed */
    int64_t t0 = compat_now_ms();
    compat_proc_t *p = sp_mpi_start("3", dir, CYCLES_S, "8", log);
    int status = -1, still = 1, pid = 0;
    while (still == 1 && compat_now_ms() - t0 < 60000) {
        if (sp_mpi_rank_games(dir, 1) >= 2 && (pid = sp_mpi_rank_pid(dir, 1)) > 0) break;
        still = compat_proc_wait(p, 20, &status);
    }
    int64_t before = sp_mpi_sql(dir, "SELECT count(*) FROM games");
    int latest_before = (int)sp_mpi_sql(dir, "SELECT coalesce(max(cycle), -1) FROM models");
    CHECKF(still == 1 && pid > 0, "the job %s before rank 1 had 2 games committed (pid %d)",
           still == 1 ? "ran 60 s" : "ended", pid);
    bool killed = still == 1 && pid > 0 && compat_kill_pid(pid) == 0;
    CHECKF(killed || still != 1, "kill -9 of rank 1 (pid %d) failed", pid);
    int64_t tk = compat_now_ms();
    if (still == 1) still = compat_proc_wait(p, 90000, &status);
    double end_s = (double)(compat_now_ms() - tk) / 1000.0;
    CHECKF(still == 0, "the job still ran 90 s after rank 1 was killed");
    if (still == 1) compat_proc_kill(p);
    compat_proc_free(p);
    CHECKF(!killed || status != 0, "mpirun exited 0 after a rank was killed");
    CHECKF(latest_before < CYCLES, "the run had finished (model %d) before the kill: make it longer", latest_before);
    printf("  rank 1 (pid %d) killed with %lld games committed at model %d; the job ended %.1f s later, status %d\n",
           pid, (long long)before, latest_before, end_s, status);

    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY, SP_MPI_MAX_PLY, &rs);
    CHECKF(rs.games >= before, "games went down from %lld to %lld", (long long)before, (long long)rs.games);
    printf("  after the kill: %lld games, %lld shards, model %d\n", (long long)rs.games, (long long)rs.shards,
           rs.latest_cycle);
    int64_t after_kill = rs.games;

    /* 2. the same command, to the end */
    if (!atomic_load(&g_fail)) {
        char log2[800];
        snprintf(log2, sizeof log2, "%s/mpirun2.log", base);
        int target = rs.latest_cycle + 2;
        char target_s[16];
        snprintf(target_s, sizeof target_s, "%d", target);
        p = sp_mpi_start("3", dir, target_s, "8", log2);
        still = compat_proc_wait(p, 240000, &status); /* TSan: 5-15x slower */
        if (still == 1) compat_proc_kill(p);
        compat_proc_free(p);
        CHECKF(still == 0 && status == 0, "the resumed job %s with status %d", still ? "timed out" : "exited", status);
        check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
        CHECKF(rs.latest_cycle == target && rs.models == target + 1,
               "after the resume: model %d, %lld models (want %d)", rs.latest_cycle, (long long)rs.models, target);
        CHECKF(rs.games >= after_kill && rs.games >= 8 * target, "%lld games at the end (%lld after the kill)",
               (long long)rs.games, (long long)after_kill);
        for (int r = 0; r < 3; r++) CHECKF(sp_mpi_rank_games(dir, r) > 0, "no games from rank %d", r);
        printf("  resumed: %lld games, model %d\n", (long long)rs.games, rs.latest_cycle);
        if (atomic_load(&g_fail)) sp_mpi_show("the resumed job's stderr", log2, 6000);
    }
    if (atomic_load(&g_fail)) {
        sp_mpi_show("the killed job's stderr", log, 6000);
    } else {
        t_rm_rf(base);
    }
    return t_done("test_selfplay_mpi_kill");
}
#endif
