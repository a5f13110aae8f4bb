/* sp_mpi_test.h - what the `mpirun -np N selfplay` tests share (on top of
 * sp_test.h): the mpirun command line (Open MPI: run as root on CI,
 * oversubscribed on a 2-core machine), a tiny CPU run's flags, starting the
 * job with every wait bounded, and read-only queries of the run's koma.db.
 * Built only with MPI (tests/selfplay/CMakeLists.txt defines KOMA_MPIEXEC
 * and KOMA_SELFPLAY_BIN); the programs exit 77 (skipped) otherwise.
 */
#ifndef KOMA_TESTS_SELFPLAY_SP_MPI_TEST_H
#define KOMA_TESTS_SELFPLAY_SP_MPI_TEST_H

#include "sp_test.h"

#define SP_MPI_MAX_PLY 40

/* The flags of a tiny run: 2 games per rank at a time, 2x16 net, 16 visits,
 * shards of 2 games, a few training steps per cycle, sync-train (games of
 * cycle c+1 wait for model c, so the nets published reach every rank's
 * games), no evaluation matches (test_selfplay_e2e has them). cycles and games per cycle are the caller's. */
/* Flags a test adds to the job's (NULL-terminated; none by default). */
static const char *sp_mpi_extra[8];

static inline int sp_mpi_argv(const char **argv, const char *np, const char *dir, const char *cycles,
                              const char *games) {
    static const char *const flags[] = {
        "--shard-games", "2", "--threads", "1", "--games-per-thread", "2", "--leaves-per-game", "2", "--visits", "16",
        "--visits-fast", "8", "--gumbel-m", "8", "--max-ply", "40", "--net", "2x16", "--progress", "1",
        "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--batch", "16", "--window-min", "100",
        "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1", "--sync-train", "1", "--eval-every", "0", NULL};
    int argc = t_mpirun_argv(argv, np);
    argv[argc++] = KOMA_SELFPLAY_BIN;
    argv[argc++] = "--run";
    argv[argc++] = dir;
    argv[argc++] = "--cycles";
    argv[argc++] = cycles;
    argv[argc++] = "--games-per-cycle";
    argv[argc++] = games;
    for (int i = 0; flags[i]; i++) argv[argc++] = flags[i];
    for (int i = 0; sp_mpi_extra[i]; i++) argv[argc++] = sp_mpi_extra[i];
    argv[argc] = NULL;
    return argc;
}

/* Starts mpirun (its stderr, every rank's, appended to log); exits 2 when it cannot start. */
static inline compat_proc_t *sp_mpi_start(const char *np, const char *dir, const char *cycles, const char *games,
                                          const char *log) {
    const char *argv[80];
    sp_mpi_argv(argv, np, dir, cycles, games);
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", KOMA_MPIEXEC, err);
        exit(2);
    }
    return p;
}

/* The tail of a log file on stderr (when a check failed). */
static inline void sp_mpi_show(const char *what, const char *path, size_t tail) {
    size_t n = 0;
    char *text = t_read_file(path, &n);
    fprintf(stderr, "---- %s (last %zu bytes) ----\n%s\n", what, tail, n > tail ? text + n - tail : text);
    free(text);
}

/* One integer from the run's koma.db (read-only), -1 when it cannot be read. */
static inline int64_t sp_mpi_sql(const char *dir, const char *q) {
    char path[800];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    if (!compat_file_exists(path)) return -1;
    sqlite3 *s = NULL;
    int64_t v = -1;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(s, 2000);
        v = sql_int(s, q);
    }
    sqlite3_close(s);
    return v;
}

/* Games committed from rank r (with its host recorded). */
static inline int64_t sp_mpi_rank_games(const char *dir, int r) {
    char q[160];
    snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE rank = %d AND host IS NOT NULL AND host != ''", r);
    return sp_mpi_sql(dir, q);
}

/* Rank r played: its games, or (rank 0 alone can play a short job's games on
 * a loaded machine before rank r has a model) rank 0's line "rank R: playing
 * model" in the job's log. */
static inline bool sp_mpi_rank_played(const char *dir, const char *log, int r) {
    if (sp_mpi_rank_games(dir, r) > 0) return true;
    char line[32], *text = t_read_file(log, NULL);
    snprintf(line, sizeof line, "rank %d: playing model", r);
    bool logged = text && strstr(text, line);
    free(text);
    return logged;
}

/* The pid rank r reported in its hello, from the run's log ("rank 1: host H,
 * pid N, ..."); 0 when not there yet. */
static inline int sp_mpi_rank_pid(const char *dir, int r) {
    char path[800], key[32];
    snprintf(path, sizeof path, "%s/log", dir);
    snprintf(key, sizeof key, "rank %d: host ", r);
    char *text = t_read_file(path, NULL);
    int pid = 0;
    const char *at = strstr(text, key);
    const char *p = at ? strstr(at, ", pid ") : NULL;
    if (p) pid = atoi(p + 6);
    free(text);
    return pid;
}

#endif
