/* test_selfplay_mpi.c - `mpirun -np 3 selfplay --cycles 4` on a tiny CPU
 * run (built with MPI: tests/selfplay/CMakeLists.txt; elsewhere, or when
 * mpirun is gone, it exits 77, skipped):
 *   - the job exits 0 and leaves a complete, clean run (sp_test.h check_run:
 *     integrity, every game replayed against its shard rows, every cycle's
 *     model loads, no orphan);
 *   - games come from every rank: koma.db games.rank holds 0, 1 and 2, each
 *     with its host, and db_games_by_rank (inspect, report) lists 3 ranks;
 *   - the net of cycle 1 reached ranks 1 and 2: each logged it as published
 *     with the XXH3 koma.db registered for it; and the two committed games
 *     played by the nets published during the run (games.model_id of cycles
 *     1 to 3; in a given cycle they may play none, see below);
 *   - the progress line in the run's log shows the per-rank rates;
 *   - nets go down a chain (--net-fanout 1: rank 0 -> 1 -> 2): rank 0 sends
 *     each to rank 1 only, rank 1 passes it on to rank 2, and rank 2 still
 *     publishes model 1 with the registered XXH3 (test_selfplay_mpi_kill
 *     runs the default, where rank 0 sends to both). The pauses of
 *     --sync-train take the same path, so rank 2 resumes only after model 1
 *     reached it.
 */
#if !defined(KOMA_MPIEXEC) || !defined(KOMA_SELFPLAY_BIN)
#include <stdio.h>
int main(void) {
    printf("test_selfplay_mpi: built without MPI: skipped\n");
    return 77;
}
#else
#include "sp_mpi_test.h"

int main(void) {
    if (!compat_file_exists(KOMA_MPIEXEC)) {
        printf("test_selfplay_mpi: %s is gone: skipped\n", KOMA_MPIEXEC);
        return 77;
    }
    const char *base = t_scratch("sp_mpi");
    char dir[700], log[760], path[800];
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(log, sizeof log, "%s/mpirun.log", base);

    sp_mpi_extra[0] = "--net-fanout", sp_mpi_extra[1] = "1";
    int64_t t0 = compat_now_ms();
    /* 24 games a cycle: down the chain rank 2 resumes last, and still plays some of each cycle's */
    compat_proc_t *p = sp_mpi_start("3", dir, "4", "24", log);
    int status = -1;
    int still = compat_proc_wait(p, 240000, &status); /* TSan: 5-15x slower */
    if (still == 1) compat_proc_kill(p);
    compat_proc_free(p);
    double secs = (double)(compat_now_ms() - t0) / 1000.0;
    CHECKF(still == 0 && status == 0, "mpirun -np 3 selfplay %s with status %d", still ? "timed out" : "exited", status);
    printf("  mpirun -np 3 selfplay --cycles 4: status %d, %.1f s\n", status, secs);

    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == 4 && rs.models == 5, "model %d, %lld models (want cycle 4, 5 models)", rs.latest_cycle,
           (long long)rs.models);
    CHECKF(rs.games >= 96, "%lld games (want >= 4 cycles x 24)", (long long)rs.games);

    /* every rank's games, with rank and host */
    int64_t by_rank[3];
    for (int r = 0; r < 3; r++) {
        by_rank[r] = sp_mpi_rank_games(dir, r);
        CHECKF(by_rank[r] > 0, "no games from rank %d in koma.db", r);
    }
    CHECKF(sp_mpi_sql(dir, "SELECT count(*) FROM games WHERE match_id IS NULL AND (host IS NULL OR rank NOT IN (0, 1, 2))") == 0,
           "self-play games without a rank 0..2 and host");
    printf("  games by rank: %lld, %lld, %lld\n", (long long)by_rank[0], (long long)by_rank[1], (long long)by_rank[2]);
    snprintf(path, sizeof path, "%s/koma.db", dir);
    db_t *db = NULL;
    char err[1024];
    if (db_open(path, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK) {
        db_rank_games_t *rk = NULL;
        int32_t n = 0;
        CHECKF(db_games_by_rank(db, &rk, &n) == DB_OK, "db_games_by_rank: %s", db_errmsg(db));
        CHECKF(n == 3, "db_games_by_rank: %d rows, want 3", n);
        int64_t sum = 0;
        for (int32_t i = 0; i < n; i++) {
            CHECKF(rk[i].rank == i && rk[i].host[0] && rk[i].positions > 0, "ranks row %d: rank %d host '%s' positions %lld", i,
                   rk[i].rank, rk[i].host, (long long)rk[i].positions);
            sum += rk[i].games;
        }
        CHECKF(sum == rs.games, "ranks rows sum to %lld games, the run has %lld", (long long)sum, (long long)rs.games);
        free(rk);
        db_close(db);
    } else {
        CHECKF(0, "db_open: %s", err);
    }

    /* model 1 on ranks 1 and 2: published with the registered XXH3, and playing games */
    char xxh[64] = "";
    {
        sqlite3 *s = NULL;
        sqlite3_stmt *st = NULL;
        if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(s, "SELECT xxh3 FROM models WHERE cycle = 1", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            snprintf(xxh, sizeof xxh, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        sqlite3_close(s);
    }
    CHECKF(strlen(xxh) == 16, "model 1's XXH3 in koma.db: '%s'", xxh);
    char *text = t_read_file(log, NULL);
    int64_t by_model1 = 0;
    for (int r = 1; r <= 2; r++) {
        char key[64], want[96];
        snprintf(key, sizeof key, "selfplay rank %d (", r);
        snprintf(want, sizeof want, "): model 1 published (XXH3 %s)", xxh);
        bool found = false;
        for (const char *at = strstr(text, key); at && !found; at = strstr(at + 1, key)) {
            const char *eol = strchr(at, '\n');
            const char *w = strstr(at, want);
            found = w && (!eol || w < eol);
        }
        CHECKF(found, "rank %d never logged model 1 published with XXH3 %s", r, xxh);
        if (r == 1) { /* the chain: rank 1 passed model 1 on to rank 2 */
            snprintf(want, sizeof want, "selfplay rank 1 (");
            bool passed = false;
            for (const char *at = strstr(text, want); at && !passed; at = strstr(at + 1, want)) {
                const char *eol = strchr(at, '\n'), *w = strstr(at, "): model 1 passed on to 1 rank(s) from rank 0");
                passed = w && (!eol || w < eol);
            }
            CHECKF(passed, "rank 1 never logged model 1 passed on to rank 2");
        }
        char q[200];
        snprintf(q, sizeof q,
                 "SELECT count(*) FROM games WHERE rank = %d AND model_id IN (SELECT id FROM models WHERE cycle BETWEEN "
                 "1 AND 3)",
                 r);
        int64_t g = sp_mpi_sql(dir, q);
        /* Either remote rank may commit none of a new net's games: its games
         * in flight at the pause end as the old net's, and on a loaded machine
         * (3 ranks on 2 cores) the others can play the rest of the cycle
         * before it starts one (seen: rank 1 0 and rank 2 8 of model 1's;
         * rank 2 0 in another run; and once both 0: rank 0 played all 24 of
         * cycle 2 while model 1 was still on its way down the chain). That
         * model 1 reached each intact is its log line above (the XXH3); that
         * the remote ranks play with the nets they receive, their sum over
         * models 1 to 3 below (three chances, not one). */
        by_model1 += g;
        printf("  rank %d: model 1 published (XXH3 %s); %lld of its games played by models 1-3\n", r, xxh,
               (long long)g);
    }
    CHECKF(by_model1 > 0, "ranks 1 and 2 committed no game played by models 1 to 3");
    free(text);

    /* the per-rank rates in the progress line, and each rank's hello, in the run's log */
    snprintf(path, sizeof path, "%s/log", dir);
    text = t_read_file(path, NULL);
    CHECKF(strstr(text, "pos/s (r0 ") && strstr(text, ", r1 ") && strstr(text, ", r2 "),
           "the run's log has no progress line with per-rank rates");
    CHECKF(sp_mpi_rank_pid(dir, 1) > 0 && sp_mpi_rank_pid(dir, 2) > 0, "the run's log lacks the hello of rank 1 or 2");
    free(text);

    if (atomic_load(&g_fail)) {
        sp_mpi_show("mpirun's stderr", log, 6000);
    } else {
        t_rm_rf(base);
    }
    return t_done("test_selfplay_mpi");
}
#endif
