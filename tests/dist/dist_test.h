/* dist_test.h - what the tests of real multi-machine set-ups share
 * (test_dist_slurm: a Slurm cluster; test_dist_hosts: two hosts as network
 * namespaces), on top of tests/selfplay/sp_mpi_test.h (the tiny run's flags,
 * koma.db queries, check_run):
 *   - dist_run_under: the test runs itself again under the script that
 *     builds the set-up for as long as one command runs and takes it down
 *     afterwards whatever happens (trap), passing its exit status on (77,
 *     skipped, with the script's reason where the set-up cannot be had);
 *   - dist_selfplay_args: the selfplay arguments of sp_mpi_test.h's tiny run;
 *   - dist_games_now: the games committed so far, for "nothing lost" checks;
 *   - dist_text_has: a line of a log file holding two strings.
 * Built only with MPI and selfplay (tests/dist/CMakeLists.txt); POSIX only.
 */
#ifndef KOMA_TESTS_DIST_DIST_TEST_H
#define KOMA_TESTS_DIST_DIST_TEST_H

#include "compat/exe.h"
#include "tests/selfplay/sp_mpi_test.h"

/* Returns when env is set (this process runs inside the set-up); otherwise
 * runs `bash script <this program>` (the script sets env), and exits with its
 * status. */
static inline void dist_run_under(const char *script, const char *env) {
    if (getenv(env) && getenv(env)[0]) return;
    char self[1024];
    if (compat_exe_path(self, sizeof self) != 0) {
        printf("cannot find this program's path: skipped\n");
        exit(77);
    }
    const char *argv[] = {"bash", script, self, NULL};
    int status = -1;
    char err[512];
    fflush(stdout);
    if (compat_run(argv, &status, err, sizeof err) != 0) {
        printf("cannot run bash %s (%s): skipped\n", script, err);
        exit(77);
    }
    exit(status);
}

/* Appends to argv at index at the arguments of sp_mpi_test.h's tiny run
 * after the program (--run dir --cycles c --games-per-cycle g, the flags,
 * sp_mpi_extra) and a NULL; returns the new count. */
static inline int dist_selfplay_args(const char **argv, int at, const char *dir, const char *cycles, const char *games) {
    const char *all[96];
    int n = sp_mpi_argv(all, "1", dir, cycles, games);
    int i = 0;
    while (i < n && strcmp(all[i], KOMA_SELFPLAY_BIN)) i++;
    KOMA_ASSERT(i < n);
    for (i++; i < n; i++) argv[at++] = all[i];
    argv[at] = NULL;
    return at;
}

/* The games committed so far in the run at dir, read beside its writer: the
 * newest id first (*last_id), then the games up to it (ids only grow, so a
 * game committed between the two reads is not counted: two separate counts
 * could disagree). Later, "SELECT count(*) FROM games WHERE id <= last_id"
 * must give the same number: nothing committed was lost. */
static inline int64_t dist_games_now(const char *dir, int64_t *last_id) {
    *last_id = sp_mpi_sql(dir, "SELECT coalesce(max(id), 0) FROM games");
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE id <= %lld", (long long)*last_id);
    return sp_mpi_sql(dir, q);
}

/* True when a line of the file at path holds a, and b after it on the same line. */
static inline bool dist_text_has(const char *path, const char *a, const char *b) {
    char *text = t_read_file(path, NULL);
    bool found = false;
    for (const char *at = strstr(text, a); at && !found; at = strstr(at + 1, a)) {
        const char *eol = strchr(at, '\n'), *w = strstr(at + strlen(a), b);
        found = w && (!eol || w < eol);
    }
    free(text);
    return found;
}

/* The XXH3 koma.db holds for the model of this cycle, into xxh ("" if none). */
static inline void dist_model_xxh3(const char *dir, int cycle, char *xxh, size_t n) {
    sqlite3 *s = NULL;
    sqlite3_stmt *st = NULL;
    char path[800];
    xxh[0] = '\0';
    snprintf(path, sizeof path, "%s/koma.db", dir);
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(s, "SELECT xxh3 FROM models WHERE cycle = ?", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_int(st, 1, cycle) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        snprintf(xxh, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(s);
}

#endif
