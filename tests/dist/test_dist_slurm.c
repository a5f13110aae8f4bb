/* test_dist_slurm.c - tools/slurm/selfplay.sbatch on a real Slurm cluster
 * (label slow; built with MPI and selfplay, else exit 77). The program runs
 * itself again under tools/slurm/local-cluster.sh: a one-node cluster from
 * Debian's slurm-wlm and munge (slurmctld, slurmd and munged on this host,
 * in a temporary folder, stopped and removed at the end whatever happens);
 * where that cannot be had (not root, packages missing, a daemon that does
 * not start) the script prints why and the test is skipped (77). Then:
 *   1. sbatch of the script as it ships (3 ranks on one node, no GPUs, the
 *      tiny CPU run of tests/selfplay/sp_mpi_test.h, 2 cycles): the job
 *      ends COMPLETED with exit 0; the run is complete and clean (sp_test.h
 *      check_run: every game replayed against its shard rows, every model
 *      loads, no orphan), models of cycles 1 and 2 published, games from
 *      every rank (or its 'playing' line in the log: rank 0 alone can play
 *      a short job's games on a loaded machine), and ranks 1 and 2 logged
 *      model 1 published with the XXH3 koma.db holds (srun --mpi=pmix ran
 *      the MPI job);
 *   2. the same script with CYCLES=6, cancelled with scancel once its first
 *      model (cycle 3) is published: the job ends CANCELLED, the run passes
 *      check_run as the cancel left it, every game committed before the
 *      cancel is still there, and the run's last cycle (6) was not reached;
 *   3. the same sbatch again: COMPLETED, exit 0; the job resumed from the
 *      model the cancel left, K ("newest model cycle K of 6" in its log),
 *      the run is complete and clean with 7 models, no game lost, games
 *      from ranks 0, 1 and 2;
 *   4. CYCLES=10, and at its first model (cycle 7) `scontrol requeue`, what
 *      Slurm does to a --requeue job after a node failure (its start time
 *      then set to now: Slurm holds a requeued job back for minutes): the
 *      same job runs the script again, resumes from the newest model and
 *      completes (11 models, no game lost), and its log holds both runs
 *      (--open-mode=append; without it the second run truncates the log).
 * Waits are on events (job states from scontrol, models in koma.db); the
 * deadlines only bound a failure. The cancel and the requeue land some time
 * after the model that triggers them, more on a loaded machine (the test's
 * poll, scontrol, the signal reaching 3 ranks), so each job has 3 cycles
 * left at its trigger: the checks ask that it was stopped before its end,
 * not at which cycle.
 */
#if !defined(KOMA_MPIEXEC) || !defined(KOMA_SELFPLAY_BIN)
#include <stdio.h>
int main(void) {
    printf("test_dist_slurm: built without MPI: skipped\n");
    return 77;
}
#else
#include "dist_test.h"

#define GAMES "64" /* a cycle lasts some seconds: the cancel lands inside cycle 4 */
#define SCRIPT KOMA_SOURCE_DIR "/tools/slurm/selfplay.sbatch"

static const char *g_base;

/* The output of argv (stdout and stderr) as a string to free; *status its exit status. */
static char *capture(const char *const *argv, const char *name, int *status) {
    char out[800];
    snprintf(out, sizeof out, "%s/%s.out", g_base, name);
    *status = run_to_end(argv, out);
    return t_read_file(out, NULL);
}

/* sbatch of the shipped script for the run at dir with cycles; the job id, 0 on failure. */
static long submit(const char *dir, const char *cycles) {
    char output[800];
    snprintf(output, sizeof output, "%s/job-%%j.log", g_base);
    compat_setenv("KOMA", KOMA_SOURCE_DIR);
    compat_setenv("SELFPLAY", KOMA_SELFPLAY_BIN);
    compat_setenv("CONFIG", KOMA_SOURCE_DIR "/configs/cpu.ini");
    compat_setenv("RUN", dir);
    compat_setenv("CYCLES", cycles);
    const char *argv[96] = {"sbatch",
                            "--parsable",
                            "--nodes=1",
                            "--ntasks-per-node=3",
                            "--gpus-per-node=0",
                            "--cpus-per-task=2",
                            "--time=30",
                            "--job-name=koma-test",
                            "--output",
                            output,
                            "--chdir",
                            g_base,
                            SCRIPT};
    int argc = 0;
    while (argv[argc]) argc++;
    dist_selfplay_args(argv, argc, dir, cycles, GAMES);
    int status = -1;
    char *out = capture(argv, "sbatch", &status);
    long id = 0; /* --parsable: "ID" or "ID;CLUSTER" on a line of its own (warnings may come first) */
    for (const char *line = out; status == 0 && *line && id <= 0; line += strcspn(line, "\n"), line += *line == '\n') {
        char *end = NULL;
        long v = strtol(line, &end, 10);
        if (end != line && (*end == '\n' || *end == ';' || *end == 0)) id = v;
    }
    CHECKF(id > 0, "sbatch exited %d: %s", status, out);
    free(out);
    return id;
}

/* The job's state (JobState=, e.g. RUNNING, COMPLETED) and ExitCode= from
 * scontrol; "?" when scontrol cannot tell. */
static void job_state(long id, char *state, size_t n, char *code, size_t cn) {
    char ids[32];
    snprintf(ids, sizeof ids, "%ld", id);
    const char *argv[] = {"scontrol", "--oneliner", "show", "job", ids, NULL};
    int status = -1;
    char *out = capture(argv, "scontrol", &status);
    snprintf(state, n, "?");
    if (code) snprintf(code, cn, "?");
    const char *s = strstr(out, "JobState="), *c = strstr(out, "ExitCode=");
    if (status == 0 && s) snprintf(state, n, "%.*s", (int)strcspn(s + 9, " \n"), s + 9);
    if (status == 0 && c && code) snprintf(code, cn, "%.*s", (int)strcspn(c + 9, " \n"), c + 9);
    free(out);
}

static bool job_over(const char *state) {
    static const char *const live[] = {"PENDING",  "CONFIGURING", "RUNNING",   "COMPLETING", "SUSPENDED", "REQUEUED",
                                       "RESIZING", "SIGNALING",   "STAGE_OUT", "?",          NULL};
    for (int i = 0; live[i]; i++)
        if (!strcmp(state, live[i])) return false;
    return true;
}

/* Waits for the job's state to be want; false after limit_s. */
static bool job_wait_state(long id, const char *want, int limit_s) {
    char state[64];
    for (int64_t t0 = compat_now_ms(); compat_now_ms() - t0 < (int64_t)limit_s * 1000; compat_sleep_ms(200)) {
        job_state(id, state, sizeof state, NULL, 0);
        if (!strcmp(state, want)) return true;
    }
    return false;
}

/* scontrol ARGS...; its exit status (0 when it did it). */
static int scontrol(const char *a, const char *b, const char *c) {
    const char *argv[] = {"scontrol", a, b, c, NULL};
    int status = -1;
    char *out = capture(argv, "scontrol-cmd", &status);
    CHECKF(status == 0, "scontrol %s %s %s exited %d: %s", a, b, c ? c : "", status, out);
    free(out);
    return status;
}

/* Waits for the job to end (or, with a cycle >= 0, for that model to be in
 * the run's koma.db while it runs); the state; false after limit_s. */
static bool job_wait(long id, const char *dir, int cycle, int limit_s, char *state, size_t n, char *code, size_t cn) {
    int64_t t0 = compat_now_ms();
    for (int i = 0; compat_now_ms() - t0 < (int64_t)limit_s * 1000; i++) {
        if (cycle >= 0 && sp_mpi_sql(dir, "SELECT coalesce(max(cycle), -1) FROM models") >= cycle) {
            job_state(id, state, n, code, cn);
            return true;
        }
        if (i % 5 == 0) { /* scontrol every 0.5 s, koma.db every 0.1 s */
            job_state(id, state, n, code, cn);
            if (job_over(state)) return true;
        }
        compat_sleep_ms(100);
    }
    return false;
}

/* After a failed check: the job's log, what scontrol says of it, and the
 * ends of the cluster's own logs (slurmctld's decisions, slurmd's launches). */
static void show_job(long id) {
    char path[800], ids[32];
    snprintf(path, sizeof path, "%s/job-%ld.log", g_base, id);
    sp_mpi_show("the job's log", path, 6000);
    snprintf(ids, sizeof ids, "%ld", id);
    const char *argv[] = {"scontrol", "show", "job", ids, NULL};
    int status = -1;
    char *out = capture(argv, "scontrol-show", &status);
    fprintf(stderr, "---- scontrol show job %ld (exit %d) ----\n%s\n", id, status, out);
    free(out);
    const char *cluster = getenv("KOMA_LOCAL_CLUSTER");
    if (!cluster) return;
    snprintf(path, sizeof path, "%s/slurmctld.log", cluster);
    sp_mpi_show("slurmctld.log", path, 3000);
    snprintf(path, sizeof path, "%s/slurmd.log", cluster);
    sp_mpi_show("slurmd.log", path, 3000);
}

int main(void) {
    dist_run_under(KOMA_SOURCE_DIR "/tools/slurm/local-cluster.sh", "KOMA_LOCAL_CLUSTER");
    g_base = t_scratch("dist_slurm");
    char dir[700], log[800], state[64], code[32];
    snprintf(dir, sizeof dir, "%s/run", g_base);

    /* 1. the job to the end of 2 cycles */
    int64_t t0 = compat_now_ms();
    long id = submit(dir, "2");
    if (id <= 0) return t_done("test_dist_slurm");
    bool over = job_wait(id, dir, -1, 600, state, sizeof state, code, sizeof code);
    printf("  job %ld (sbatch, 3 ranks, 2 cycles): %s, exit code %s, %.1f s\n", id, state, code,
           (double)(compat_now_ms() - t0) / 1000.0);
    CHECKF(over && !strcmp(state, "COMPLETED") && !strcmp(code, "0:0"), "job %ld: %s, exit code %s", id, state, code);
    snprintf(log, sizeof log, "%s/job-%ld.log", g_base, id);
    run_state_t rs;
    check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
    CHECKF(rs.latest_cycle == 2 && rs.models == 3, "model %d, %lld models (want cycle 2, 3 models)", rs.latest_cycle,
           (long long)rs.models);
    /* every rank plays: its games, or (rank 0 alone can play a short job's
     * games on a loaded machine before a remote rank's are committed) rank
     * 0's log line that the rank is playing */
    int ranks = 0;
    for (int r = 0; r < 3; r++)
        ranks += r == 0 ? sp_mpi_rank_games(dir, 0) > 0 || dist_text_has(log, "rank 0 on", "owns the run and plays")
                        : sp_mpi_rank_played(dir, log, r);
    CHECKF(ranks == 3, "%d rank(s) of 3 played (games or 'rank R: playing model' in the log)", ranks);
    CHECKF(dist_text_has(log, "job: 3 ranks", "owns the run"), "the job's log lacks 'job: 3 ranks ... owns the run'");
    char xxh[64], want[96];
    dist_model_xxh3(dir, 1, xxh, sizeof xxh);
    snprintf(want, sizeof want, "): model 1 published (XXH3 %s)", xxh);
    CHECKF(strlen(xxh) == 16 && dist_text_has(log, "selfplay rank 1 (", want) &&
               dist_text_has(log, "selfplay rank 2 (", want),
           "ranks 1 and 2 did not both log model 1 published with XXH3 '%s'", xxh);
    printf("  run: %lld games (by rank %lld, %lld, %lld), %lld models; model 1 (XXH3 %s) reached ranks 1 and 2\n",
           (long long)rs.games, (long long)sp_mpi_rank_games(dir, 0), (long long)sp_mpi_rank_games(dir, 1),
           (long long)sp_mpi_rank_games(dir, 2), (long long)rs.models, xxh);
    if (atomic_load(&g_fail)) show_job(id);

    /* 2. CYCLES=6, scancel at its first published model (cycle 3) */
    if (!atomic_load(&g_fail)) {
        long id2 = submit(dir, "6");
        over = id2 > 0 && job_wait(id2, dir, 3, 600, state, sizeof state, NULL, 0);
        CHECKF(over && !job_over(state), "job %ld ended (%s) before model 3 was published", id2, state);
        int64_t last_id = 0, before = dist_games_now(dir, &last_id);
        char ids[32];
        snprintf(ids, sizeof ids, "%ld", id2);
        const char *cancel[] = {"scancel", ids, NULL};
        int status = -1;
        char *out = capture(cancel, "scancel", &status);
        CHECKF(status == 0, "scancel %ld exited %d: %s", id2, status, out);
        free(out);
        int64_t tc = compat_now_ms();
        over = job_wait(id2, dir, -1, 120, state, sizeof state, code, sizeof code);
        CHECKF(over && !strcmp(state, "CANCELLED"), "job %ld after scancel: %s", id2, state);
        check_run(dir, CHECK_RUN_REPLAY, SP_MPI_MAX_PLY, &rs);
        char q[160];
        snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE id <= %lld", (long long)last_id);
        int64_t kept = sp_mpi_sql(dir, q);
        CHECKF(kept == before && rs.games >= before, "games before the cancel %lld, of them still there %lld, now %lld",
               (long long)before, (long long)kept, (long long)rs.games);
        int cancelled_at = rs.latest_cycle;
        CHECKF(cancelled_at >= 3 && cancelled_at < 6,
               "after the cancel the newest model is %d (want 3 to 5: cancelled before the end)", cancelled_at);
        printf("  job %ld (CYCLES=6) cancelled at model 3 with %lld games: %s %.1f s later; the run: %lld games, %lld "
               "shards, model %d\n",
               id2, (long long)before, state, (double)(compat_now_ms() - tc) / 1000.0, (long long)rs.games,
               (long long)rs.shards, rs.latest_cycle);
        int64_t after_cancel = rs.games;
        if (atomic_load(&g_fail)) show_job(id2);

        /* 3. the same sbatch again: resumes to the end */
        if (!atomic_load(&g_fail)) {
            long id3 = submit(dir, "6");
            int64_t t3 = compat_now_ms();
            over = id3 > 0 && job_wait(id3, dir, -1, 600, state, sizeof state, code, sizeof code);
            CHECKF(over && !strcmp(state, "COMPLETED") && !strcmp(code, "0:0"), "job %ld: %s, exit code %s", id3, state,
                   code);
            snprintf(log, sizeof log, "%s/job-%ld.log", g_base, id3);
            char resumed[64];
            snprintf(resumed, sizeof resumed, "newest model cycle %d of 6", cancelled_at);
            CHECKF(dist_text_has(log, resumed, "games so far"),
                   "job %ld's log lacks '%s' (it did not resume from model %d)", id3, resumed, cancelled_at);
            check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
            CHECKF(rs.latest_cycle == 6 && rs.models == 7, "model %d, %lld models (want cycle 6, 7 models)",
                   rs.latest_cycle, (long long)rs.models);
            kept = sp_mpi_sql(dir, q);
            CHECKF(kept == before && rs.games >= after_cancel,
                   "games before the cancel %lld, still there %lld; %lld now", (long long)before, (long long)kept,
                   (long long)rs.games);
            for (int r = 0; r < 3; r++) CHECKF(sp_mpi_rank_games(dir, r) > 0, "no games from rank %d", r);
            printf(
                "  job %ld (the same sbatch): %s, exit code %s, %.1f s; resumed from model %d: %lld games, model %d\n",
                id3, state, code, (double)(compat_now_ms() - t3) / 1000.0, cancelled_at, (long long)rs.games,
                rs.latest_cycle);
            if (atomic_load(&g_fail)) show_job(id3);
        }

        /* 4. CYCLES=10, requeued at its first model (cycle 7) */
        if (!atomic_load(&g_fail)) {
            long id4 = submit(dir, "10");
            over = id4 > 0 && job_wait(id4, dir, 7, 600, state, sizeof state, NULL, 0);
            CHECKF(over && !job_over(state), "job %ld ended (%s) before model 7 was published", id4, state);
            before = dist_games_now(dir, &last_id);
            snprintf(q, sizeof q, "SELECT count(*) FROM games WHERE id <= %lld", (long long)last_id);
            char ids[32], start[64];
            snprintf(ids, sizeof ids, "%ld", id4);
            snprintf(start, sizeof start, "JobId=%ld", id4);
            int64_t t4 = compat_now_ms();
            bool requeued = id4 > 0 && scontrol("requeue", ids, NULL) == 0 && job_wait_state(id4, "PENDING", 120) &&
                            scontrol("update", start, "StartTime=now") == 0;
            CHECKF(requeued, "job %ld: requeue, wait until pending, start now: failed (%s)", id4, state);
            over = requeued && job_wait(id4, dir, -1, 600, state, sizeof state, code, sizeof code);
            CHECKF(over && !strcmp(state, "COMPLETED") && !strcmp(code, "0:0"), "requeued job %ld: %s, exit code %s",
                   id4, state, code);
            snprintf(log, sizeof log, "%s/job-%ld.log", g_base, id4);
            char *text = t_read_file(log, NULL), head[64];
            snprintf(head, sizeof head, "koma-selfplay: job %ld on ", id4);
            int runs = 0;
            for (const char *at = strstr(text, head); at; at = strstr(at + 1, head)) runs++;
            free(text);
            CHECKF(runs == 2, "job %ld's log shows %d run(s) of the script (want 2: the first and the requeued)", id4,
                   runs);
            /* the requeue lands once model 7 is out, on a busy machine a cycle or two
             * later: the requeued run resumes from the newest model it finds */
            int resumed_at = -1;
            for (int c = 7; c < 10 && resumed_at < 0; c++) {
                char line[64];
                snprintf(line, sizeof line, "newest model cycle %d of 10", c);
                if (dist_text_has(log, line, "games so far")) resumed_at = c;
            }
            CHECKF(resumed_at >= 0,
                   "job %ld's log lacks 'newest model cycle K of 10' for K in 7..9 (the requeued run "
                   "did not resume)",
                   id4);
            check_run(dir, CHECK_RUN_REPLAY | CHECK_RUN_CLEAN | CHECK_RUN_LOAD_MODELS, SP_MPI_MAX_PLY, &rs);
            CHECKF(rs.latest_cycle == 10 && rs.models == 11, "model %d, %lld models (want cycle 10, 11 models)",
                   rs.latest_cycle, (long long)rs.models);
            kept = sp_mpi_sql(dir, q);
            CHECKF(kept == before, "games before the requeue %lld, still there %lld", (long long)before,
                   (long long)kept);
            printf("  job %ld (CYCLES=10) requeued at model 7 with %lld games: %s, exit code %s, %.1f s later; %d "
                   "run(s) in its log, the second from model %d; %lld games, model %d\n",
                   id4, (long long)before, state, code, (double)(compat_now_ms() - t4) / 1000.0, runs, resumed_at,
                   (long long)rs.games, rs.latest_cycle);
            if (atomic_load(&g_fail)) show_job(id4);
        }
    }
    if (!atomic_load(&g_fail)) t_rm_rf(g_base);
    return t_done("test_dist_slurm");
}
#endif
