/* test_dist_hosts.c - `mpirun selfplay` over two hosts (label slow; built
 * with MPI and selfplay, else exit 77). The program runs itself again under
 * tests/dist/two-hosts.sh: two network namespaces joined by a veth pair,
 * host A (10.77.0.1, named koma-host-a) and host B (10.77.0.2, koma-host-b),
 * removed at the end whatever happens; where they cannot be made (not root,
 * no CAP_NET_ADMIN, no `ip`) the script prints why and the test is skipped
 * (77). mpirun runs on host A with a hostfile naming both (A 1 slot, B 2),
 * Open MPI over TCP on the pair only (btl_tcp_if_include and
 * oob_tcp_if_include 10.77.0.0/24), and starts host B's ranks through an rsh
 * agent that does `ip netns exec` where ssh would log in. Rank 0 runs on A
 * with the run directory; ranks 1 and 2 run on B, where the test's folder
 * (the run's parent) is hidden under an empty tmpfs: they cannot read the
 * run, only play and send.
 *   1. 2 cycles to the end: mpirun exits 0, the run is complete and clean
 *      (sp_test.h check_run: every game replayed against its shard rows,
 *      every model loads, no orphan); koma.db's games are rank 0's on
 *      koma-host-a and ranks 1 and 2's on koma-host-b, and host B played
 *      (its games, or its ranks' 'playing model' lines: rank 0 alone can
 *      play the 2 cycles on a loaded machine); ranks 1 and 2 logged model
 *      1 published with the XXH3 koma.db holds;
 *   2. the same command with --cycles 20, and once model 3 is published and
 *      host B's ranks have committed games of it or a newer one (behind on
 *      a loaded machine, they may load model 4 before they play model 3;
 *      seen: a whole 20-cycle job without one), every process in host B's
 *      namespace (orted and both ranks) is killed (SIGKILL): mpirun ends the
 *      job by itself with a non-zero status; the run passes check_run as the
 *      kill left it, every game committed before is still there, cycle 20
 *      was not reached (rank 0 plays on alone until mpirun has noticed,
 *      about 2 s: once it finished cycle 4 in that time); 20 cycles leave
 *      room for host B's ranks to catch up on a loaded machine;
 *   3. the same command with --cycles three past the newest model the kill
 *      left: exit 0, a complete clean run, no game lost, host B's ranks
 *      played again.
 * Waits are on events (the process's end, models and games in koma.db);
 * the deadlines only bound a failure.
 */
#if !defined(KOMA_MPIEXEC) || !defined(KOMA_SELFPLAY_BIN)
#include <stdio.h>
int main(void) {
    printf("test_dist_hosts: built without MPI: skipped\n");
    return 77;
}
#else
#include "dist_test.h"

#define GAMES "64" /* a cycle lasts some seconds: the kill lands inside cycle 4 */

static const char *g_base;

/* mpirun on host A over both hosts, the tiny run at dir with cycles; its
 * stderr (every rank's) appended to log. */
static compat_proc_t *start(const char *dir, const char *cycles, const char *log) {
    static char hostfile[800];
    snprintf(hostfile, sizeof hostfile, "%s/hostfile", g_base);
    const char *argv[128];
    argv[0] = getenv("KOMA_HOST_A");
    int argc = 1 + t_mpirun_argv(argv + 1, "3");
    const char *mpi[] = {"--hostfile", hostfile, "--mca", "plm_rsh_agent", getenv("KOMA_RSH_AGENT"),
                         "--mca", "btl_tcp_if_include", "10.77.0.0/24", "--mca", "oob_tcp_if_include",
                         "10.77.0.0/24", "-x", "OPENBLAS_NUM_THREADS", KOMA_SELFPLAY_BIN, NULL};
    for (int i = 0; mpi[i]; i++) argv[argc++] = mpi[i];
    dist_selfplay_args(argv, argc, dir, cycles, GAMES);
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", argv[0], err);
        exit(2);
    }
    return p;
}

/* Games of rank r on host. */
static int64_t host_games(const char *dir, int r, const char *host) {
    char q[200];
    snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE rank = %d AND host = '%s'", r, host);
    return sp_mpi_sql(dir, q);
}

/* The processes in namespace ns (environment variable env): with kill, each
 * gets SIGKILL; how many there are (-1 when ip cannot tell). */
static int host_procs(const char *env, bool kill) {
    char out[800];
    snprintf(out, sizeof out, "%s/pids.out", g_base);
    const char *argv[] = {"ip", "netns", "pids", getenv(env), NULL};
    int status = run_to_end(argv, out), n = 0;
    char *text = t_read_file(out, NULL);
    for (char *s = text, *end; status == 0 && *s; s = end) {
        long pid = strtol(s, &end, 10);
        if (end == s) break;
        if (pid > 1 && (!kill || compat_kill_pid((int)pid) == 0)) n++;
    }
    free(text);
    return status == 0 ? n : -1;
}

/* Waits until no process is left on either host (mpirun may exit before the
 * rank it killed has, whose writer lock then still holds the run); false
 * after 60 s. */
static bool hosts_idle(void) {
    int64_t t0 = compat_now_ms();
    for (int i = 0; compat_now_ms() - t0 < 60000; i++, compat_sleep_ms(100))
        if (host_procs("KOMA_NETNS_A", false) == 0 && host_procs("KOMA_NETNS_B", false) == 0) {
            if (i > 0) printf("  (processes left on the hosts after mpirun's end: gone %.1f s later)\n",
                              (double)(compat_now_ms() - t0) / 1000.0);
            return true;
        }
    return false;
}

int main(void) {
    dist_run_under(KOMA_SOURCE_DIR "/tests/dist/two-hosts.sh", "KOMA_TWO_HOSTS");
    if (!getenv("KOMA_HOST_A") || !getenv("KOMA_RSH_AGENT") || !getenv("KOMA_NETNS_A") || !getenv("KOMA_NETNS_B")) {
        printf("test_dist_hosts: two-hosts.sh set no KOMA_HOST_A / KOMA_RSH_AGENT / KOMA_NETNS_A / KOMA_NETNS_B: "
               "skipped\n");
        return 77;
    }
    g_base = t_scratch("dist_hosts");
    compat_setenv("KOMA_HIDE", g_base); /* host B's ranks see an empty folder here */
    char dir[700], path[800], log[800];
    snprintf(dir, sizeof dir, "%s/run", g_base);
    snprintf(path, sizeof path, "%s/hostfile", g_base);
    const char *hosts = "10.77.0.1 slots=1\n10.77.0.2 slots=2\n";
    char err[512];
    if (compat_write_file_durable(path, hosts, strlen(hosts), err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }

    /* 1. 2 cycles to the end */
    snprintf(log, sizeof log, "%s/mpirun1.log", g_base);
    int64_t t0 = compat_now_ms();
    compat_proc_t *p = start(dir, "2", log);
    int status = -1;
    int still = compat_proc_wait(p, 300000, &status);
    if (still == 1) compat_proc_kill(p);
    compat_proc_free(p);
    printf("  mpirun -np 3 over koma-host-a (rank 0) and koma-host-b (ranks 1, 2), 2 cycles: status %d, %.1f s\n", status,
           (double)(compat_now_ms() - t0) / 1000.0);
    CHECKF(still == 0 && status == 0, "mpirun %s with status %d", still ? "timed out" : "exited", status);
    CHECKF(hosts_idle(), "processes still run on host A or B 60 s after mpirun ended");
    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == 2 && rs.models == 3, "model %d, %lld models (want cycle 2, 3 models)", rs.latest_cycle,
           (long long)rs.models);
    int64_t a0 = host_games(dir, 0, "koma-host-a"), b1 = host_games(dir, 1, "koma-host-b"),
            b2 = host_games(dir, 2, "koma-host-b");
    CHECKF(a0 + b1 + b2 == rs.games, "%lld games, of them %lld from rank 0 on koma-host-a, %lld + %lld from ranks 1, 2 "
           "on koma-host-b", (long long)rs.games, (long long)a0, (long long)b1, (long long)b2);
    /* host B plays: its games, or both its ranks' 'playing model' lines (sp_mpi_rank_played); step 2
     * asks for host B's games of a model published during the job */
    CHECKF(b1 + b2 > 0 || (sp_mpi_rank_played(dir, log, 1) && sp_mpi_rank_played(dir, log, 2)),
           "host B neither committed games nor has its ranks' 'rank R: playing model' lines in the log");
    char xxh[64], want[96];
    dist_model_xxh3(dir, 1, xxh, sizeof xxh);
    snprintf(want, sizeof want, "): model 1 published (XXH3 %s)", xxh);
    CHECKF(strlen(xxh) == 16 && dist_text_has(log, "selfplay rank 1 (koma-host-b", want) &&
               dist_text_has(log, "selfplay rank 2 (koma-host-b", want),
           "ranks 1 and 2 did not both log model 1 published on koma-host-b with XXH3 '%s'", xxh);
    printf("  run: %lld games (rank 0 on koma-host-a %lld; on koma-host-b rank 1 %lld, rank 2 %lld), %lld models\n",
           (long long)rs.games, (long long)a0, (long long)b1, (long long)b2, (long long)rs.models);
    if (atomic_load(&g_fail)) sp_mpi_show("mpirun's stderr", log, 6000);

    /* 2. --cycles 20; host B's processes killed once model 3 or newer is out and played there */
    if (!atomic_load(&g_fail)) {
        snprintf(log, sizeof log, "%s/mpirun2.log", g_base);
        p = start(dir, "20", log);
        int64_t t1 = compat_now_ms();
        still = 1;
        const char *played =
            "SELECT count(*) FROM games WHERE rank IN (1, 2) AND model_id IN (SELECT id FROM models WHERE cycle >= 3)";
        while (still == 1 && compat_now_ms() - t1 < 300000 && sp_mpi_sql(dir, played) < 1)
            still = compat_proc_wait(p, 50, &status);
        int64_t last_id = 0, before = dist_games_now(dir, &last_id);
        CHECKF(still == 1, "the job %s before host B played model 3 or newer", still == 0 ? "ended" : "ran 300 s");
        int killed = still == 1 ? host_procs("KOMA_NETNS_B", true) : 0;
        CHECKF(still != 1 || killed >= 3, "%d process(es) killed in host B's namespace (want orted and 2 ranks)", killed);
        int64_t tk = compat_now_ms();
        if (still == 1) still = compat_proc_wait(p, 120000, &status);
        if (still == 1) compat_proc_kill(p);
        compat_proc_free(p);
        CHECKF(still == 0 && status != 0, "mpirun %s with status %d after host B's processes were killed",
               still ? "still ran 120 s" : "exited", status);
        CHECKF(hosts_idle(), "processes still run on host A or B 60 s after mpirun ended");
        check_run(dir, CHECK_RUN_REPLAY, SP_MPI_MAX_PLY, &rs);
        char q[160];
        snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE id <= %lld", (long long)last_id);
        int64_t kept = sp_mpi_sql(dir, q);
        CHECKF(kept == before && rs.games >= before, "games before the kill %lld, of them still there %lld, now %lld",
               (long long)before, (long long)kept, (long long)rs.games);
        CHECKF(rs.latest_cycle >= 3 && rs.latest_cycle < 20,
               "after the kill the newest model is %d (want 3 to 19: killed midway)", rs.latest_cycle);
        printf("  host B's %d processes killed at model 3 with %lld games: mpirun ended %.1f s later, status %d; the "
               "run: %lld games, %lld shards, model %d\n",
               killed, (long long)before, (double)(compat_now_ms() - tk) / 1000.0, status, (long long)rs.games,
               (long long)rs.shards, rs.latest_cycle);
        int64_t after_kill = rs.games, b_before = sp_mpi_sql(dir, "SELECT count(*) FROM games WHERE rank IN (1, 2)");
        if (atomic_load(&g_fail)) sp_mpi_show("the killed job's stderr", log, 6000);

        /* 3. the same command again */
        if (!atomic_load(&g_fail)) {
            snprintf(log, sizeof log, "%s/mpirun3.log", g_base);
            int64_t t3 = compat_now_ms();
            int target = rs.latest_cycle + 3;
            char target_s[16];
            snprintf(target_s, sizeof target_s, "%d", target);
            p = start(dir, target_s, log);
            still = compat_proc_wait(p, 300000, &status);
            if (still == 1) compat_proc_kill(p);
            compat_proc_free(p);
            CHECKF(still == 0 && status == 0, "the resumed mpirun %s with status %d", still ? "timed out" : "exited",
                   status);
            check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
            CHECKF(rs.latest_cycle == target && rs.models == target + 1, "model %d, %lld models (want cycle %d)",
                   rs.latest_cycle, (long long)rs.models, target);
            kept = sp_mpi_sql(dir, q);
            CHECKF(kept == before && rs.games >= after_kill, "games before the kill %lld, still there %lld; %lld now",
                   (long long)before, (long long)kept, (long long)rs.games);
            int64_t b_after = sp_mpi_sql(dir, "SELECT count(*) FROM games WHERE rank IN (1, 2)");
            CHECKF(b_after > b_before, "host B's ranks committed no game after the resume (%lld before, %lld after)",
                   (long long)b_before, (long long)b_after);
            printf("  the same command: status %d, %.1f s; resumed to model %d, %lld games (%lld from host B)\n", status,
                   (double)(compat_now_ms() - t3) / 1000.0, rs.latest_cycle, (long long)rs.games, (long long)b_after);
            if (atomic_load(&g_fail)) sp_mpi_show("the resumed job's stderr", log, 6000);
        }
    }
    if (!atomic_load(&g_fail)) t_rm_rf(g_base);
    return t_done("test_dist_hosts");
}
#endif
